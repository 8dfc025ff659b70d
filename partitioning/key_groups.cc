#include "partitioning/key_groups.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tidemark {
namespace {

// Decodes one code point from UTF-8; on malformed input consumes one byte and
// returns U+FFFD.
uint32_t DecodeUtf8(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  auto cont = [&](size_t k) -> int {
    if (i + k >= s.size()) return -1;
    const auto b = static_cast<unsigned char>(s[i + k]);
    return (b & 0xC0) == 0x80 ? (b & 0x3F) : -1;
  };
  if (b0 < 0x80) {
    i += 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0) {
    const int c1 = cont(1);
    const uint32_t cp = ((b0 & 0x1Fu) << 6) | static_cast<uint32_t>(c1);
    if (c1 >= 0 && cp >= 0x80) {
      i += 2;
      return cp;
    }
  } else if ((b0 & 0xF0) == 0xE0) {
    const int c1 = cont(1), c2 = c1 >= 0 ? cont(2) : -1;
    const uint32_t cp =
        ((b0 & 0x0Fu) << 12) | (static_cast<uint32_t>(c1) << 6) | static_cast<uint32_t>(c2);
    if (c1 >= 0 && c2 >= 0 && cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {
      i += 3;
      return cp;
    }
  } else if ((b0 & 0xF8) == 0xF0) {
    const int c1 = cont(1), c2 = c1 >= 0 ? cont(2) : -1, c3 = c2 >= 0 ? cont(3) : -1;
    const uint32_t cp = ((b0 & 0x07u) << 18) | (static_cast<uint32_t>(c1) << 12) |
                        (static_cast<uint32_t>(c2) << 6) | static_cast<uint32_t>(c3);
    if (c1 >= 0 && c2 >= 0 && c3 >= 0 && cp >= 0x10000 && cp <= 0x10FFFF) {
      i += 4;
      return cp;
    }
  }
  i += 1;
  return 0xFFFD;
}

}  // namespace

int32_t JavaStringHashCode(std::string_view utf8) {
  uint32_t h = 0;
  size_t i = 0;
  while (i < utf8.size()) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    if (b < 0x80) {  // fast path: ASCII
      h = 31 * h + b;
      ++i;
      continue;
    }
    const uint32_t cp = DecodeUtf8(utf8, i);
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      h = 31 * h + (0xD800 + (v >> 10));
      h = 31 * h + (0xDC00 + (v & 0x3FF));
    } else {
      h = 31 * h + cp;
    }
  }
  return static_cast<int32_t>(h);
}

int KeyGroupRangeStart(int subtask, int max_parallelism, int parallelism) {
  return static_cast<int>((static_cast<int64_t>(subtask) * max_parallelism + parallelism - 1) /
                          parallelism);
}

int KeyGroupRangeEnd(int subtask, int max_parallelism, int parallelism) {
  return static_cast<int>(((static_cast<int64_t>(subtask) + 1) * max_parallelism - 1) /
                          parallelism);
}

int DefaultMaxParallelism(int parallelism) {
  int64_t want = static_cast<int64_t>(parallelism) + parallelism / 2;
  int64_t pow2 = 1;
  while (pow2 < want) pow2 <<= 1;
  return static_cast<int>(
      std::min<int64_t>(std::max<int64_t>(pow2, 128), kUpperBoundMaxParallelism));
}

absl::Status ValidateParallelism(int parallelism, int max_parallelism) {
  if (max_parallelism <= 0 || max_parallelism > kUpperBoundMaxParallelism) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max parallelism must be in (0, ", kUpperBoundMaxParallelism, "], got ", max_parallelism));
  }
  if (parallelism <= 0 || parallelism > max_parallelism) {
    return absl::InvalidArgumentError(absl::StrCat("parallelism must be in (0, ", max_parallelism,
                                                   "] (the max parallelism), got ", parallelism));
  }
  return absl::OkStatus();
}

}  // namespace tidemark

#include "partitioning/partitioner.h"

namespace tidemark {
const char* ToString(ShipStrategy s) {
  switch (s) {
    case ShipStrategy::kDefault:
      return "DEFAULT";
    case ShipStrategy::kForward:
      return "FORWARD";
    case ShipStrategy::kRebalance:
      return "REBALANCE";
    case ShipStrategy::kBroadcast:
      return "BROADCAST";
    case ShipStrategy::kKeyGroups:
      return "HASH";
    case ShipStrategy::kCustom:
      return "CUSTOM";
  }
  return "?";
}
}  // namespace tidemark
