// The state encoding (runtime/state/state_codec.h) and the durable checkpoint
// storage (runtime/state/checkpoint_storage.h): codec round trips of every
// supported type, nested and user-specialised; the reader's truncation
// reports; CRC-32C against the standard vectors; checkpoints written,
// committed and loaded back; incomplete, truncated and corrupt checkpoints
// skipped with a message naming the file; retention; and the background
// writer fed from several threads.
#include "tidemark/runtime/state/checkpoint_storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/state/state_codec.h"

// A user type with its own codec (not trivially copyable: it holds a string).
namespace user {
struct Session {
  std::string user;
  std::vector<int64_t> clicks;
  bool operator==(const Session&) const = default;
};
// A trivially copyable aggregate: encoded by the fallback, as its bytes.
struct Point {
  int32_t x;
  double y;
  bool operator==(const Point&) const = default;
};
enum class Color : uint8_t { kRed = 1, kGreen = 2, kBlue = 200 };
enum Plain { kA = -5, kB = 1 << 20 };
}  // namespace user

template <>
struct tidemark::StateCodec<user::Session> {
  static void Encode(internal::StateWriter& w, const user::Session& s) {
    internal::Encode(w, s.user);
    internal::Encode(w, s.clicks);
  }
  static user::Session Decode(internal::StateReader& r) {
    user::Session s;
    s.user = internal::Decode<std::string>(r);
    s.clicks = internal::Decode<std::vector<int64_t>>(r);
    return s;
  }
};

namespace tidemark::internal {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

template <typename T>
std::string EncodeToString(const T& v) {
  StateWriter w;
  Encode(w, v);
  return w.Release();
}

// Encodes, decodes, and checks that every byte was read back.
template <typename T>
T RoundTrip(const T& v) {
  const std::string bytes = EncodeToString(v);
  StateReader r(bytes);
  T back = Decode<T>(r);
  EXPECT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r.AtEnd()) << r.remaining() << " bytes left of " << bytes.size();
  return back;
}

template <typename T>
void ExpectRoundTrip(const T& v) {
  EXPECT_EQ(RoundTrip(v), v);
}

TEST(StateCodecTest, Arithmetic) {
  ExpectRoundTrip(true);
  ExpectRoundTrip(false);
  ExpectRoundTrip('x');
  ExpectRoundTrip(static_cast<int8_t>(-128));
  ExpectRoundTrip(static_cast<uint8_t>(255));
  ExpectRoundTrip(static_cast<int16_t>(-12345));
  ExpectRoundTrip(static_cast<uint16_t>(65535));
  ExpectRoundTrip(std::numeric_limits<int32_t>::min());
  ExpectRoundTrip(std::numeric_limits<uint32_t>::max());
  ExpectRoundTrip(std::numeric_limits<int64_t>::min());
  ExpectRoundTrip(std::numeric_limits<int64_t>::max());
  ExpectRoundTrip(std::numeric_limits<uint64_t>::max());
  ExpectRoundTrip(3.25f);
  ExpectRoundTrip(-0.0);
  ExpectRoundTrip(std::numeric_limits<double>::infinity());
  ExpectRoundTrip(std::numeric_limits<double>::denorm_min());
  EXPECT_TRUE(std::isnan(RoundTrip(std::numeric_limits<double>::quiet_NaN())));
  EXPECT_TRUE(std::signbit(RoundTrip(-0.0)));
  // Fixed width whatever the value.
  EXPECT_EQ(EncodeToString(int64_t{1}).size(), 8u);
  EXPECT_EQ(EncodeToString(int32_t{1}).size(), 4u);
  EXPECT_EQ(EncodeToString(true).size(), 1u);
}

TEST(StateCodecTest, Enums) {
  ExpectRoundTrip(user::Color::kBlue);
  ExpectRoundTrip(user::kA);
  ExpectRoundTrip(user::kB);
  EXPECT_EQ(EncodeToString(user::Color::kBlue), std::string(1, '\xc8'));
}

TEST(StateCodecTest, LittleEndianAndVarintLayout) {
  StateWriter w;
  w.PutU32(0x01020304);
  w.PutU64(0x0807060504030201ull);
  w.PutI64(-2);
  w.PutVarint(300);
  w.PutBytes("ab");
  EXPECT_EQ(w.data(), std::string("\x04\x03\x02\x01"
                                  "\x01\x02\x03\x04\x05\x06\x07\x08"
                                  "\xfe\xff\xff\xff\xff\xff\xff\xff"
                                  "\xac\x02"
                                  "\x02"
                                  "ab",
                                  4 + 8 + 8 + 2 + 1 + 2));
  StateReader r(w.data());
  EXPECT_EQ(r.GetU32(), 0x01020304u);
  EXPECT_EQ(r.GetU64(), 0x0807060504030201ull);
  EXPECT_EQ(r.GetI64(), -2);
  EXPECT_EQ(r.GetVarint(), 300u);
  EXPECT_EQ(r.GetBytes(), "ab");
  EXPECT_TRUE(r.AtEnd());
}

TEST(StateCodecTest, VarintExtremes) {
  for (uint64_t v : {uint64_t{0}, uint64_t{127}, uint64_t{128}, uint64_t{1} << 35,
                     std::numeric_limits<uint64_t>::max()}) {
    StateWriter w;
    w.PutVarint(v);
    StateReader r(w.data());
    EXPECT_EQ(r.GetVarint(), v);
    EXPECT_TRUE(r.AtEnd());
  }
  // Eleven continuation bytes: more than 64 bits.
  const std::string bad(11, '\xff');
  StateReader r(bad);
  EXPECT_EQ(r.GetVarint("length"), 0u);
  EXPECT_THAT(r.error(), HasSubstr("malformed varint at byte 0 of 11 (reading length)"));
}

TEST(StateCodecTest, Strings) {
  ExpectRoundTrip(std::string());
  ExpectRoundTrip(std::string("hello"));
  ExpectRoundTrip(std::string("with\0nul", 8));
  ExpectRoundTrip(std::string(100000, 'z'));
}

TEST(StateCodecTest, Containers) {
  ExpectRoundTrip(std::pair<int32_t, std::string>(7, "seven"));
  ExpectRoundTrip(std::tuple<>());
  ExpectRoundTrip(std::tuple<int8_t, std::string, double>(-1, "t", 2.5));
  ExpectRoundTrip(std::vector<int64_t>{});
  ExpectRoundTrip(std::vector<int64_t>{1, -2, 3});
  ExpectRoundTrip(std::vector<bool>{true, false, true});
  ExpectRoundTrip(std::vector<std::string>{"a", "", "ccc"});
  ExpectRoundTrip(std::optional<int32_t>());
  ExpectRoundTrip(std::optional<int32_t>(0));
  ExpectRoundTrip(std::optional<std::string>("x"));
  ExpectRoundTrip(std::map<std::string, int32_t>{{"a", 1}, {"b", 2}});
  ExpectRoundTrip(absl::flat_hash_map<int64_t, std::string>{{1, "one"}, {-2, "minus two"}});
  ExpectRoundTrip(std::array<int16_t, 3>{1, -2, 3});
  ExpectRoundTrip(std::array<std::string, 2>{"x", "yy"});
  ExpectRoundTrip(std::array<int32_t, 0>{});
}

TEST(StateCodecTest, Nested) {
  using Windows =
      std::map<std::string, std::vector<std::pair<int64_t, std::optional<std::string>>>>;
  ExpectRoundTrip(Windows{{"k1", {{1, "a"}, {2, std::nullopt}}}, {"k2", {}}});
  using Deep = absl::flat_hash_map<
      int64_t, std::tuple<std::string, std::vector<double>, std::optional<std::array<int, 3>>>>;
  ExpectRoundTrip(
      Deep{{5, {"five", {0.5, 1.5}, std::array<int, 3>{1, 2, 3}}}, {6, {"", {}, std::nullopt}}});
  ExpectRoundTrip(std::vector<std::map<int32_t, absl::flat_hash_map<std::string, bool>>>{
      {{1, {{"t", true}}}, {2, {}}}, {}});
  ExpectRoundTrip(std::optional<std::optional<int>>(std::optional<int>()));
}

TEST(StateCodecTest, TriviallyCopyableFallbackAndUserCodec) {
  ExpectRoundTrip(user::Point{3, -4.5});
  EXPECT_EQ(EncodeToString(user::Point{3, -4.5}).size(), sizeof(user::Point));
  ExpectRoundTrip(std::vector<user::Point>{{1, 2}, {3, 4}});
  ExpectRoundTrip(user::Session{"ann", {10, 20, 30}});
  // A user type nested in library containers.
  ExpectRoundTrip(std::map<std::string, user::Session>{{"s", {"bob", {}}}, {"t", {"", {-1}}}});
  ExpectRoundTrip(std::optional<std::pair<user::Session, user::Point>>(
      std::pair<user::Session, user::Point>{{"c", {1}}, {5, 6}}));
}

TEST(StateReaderTest, PastTheEndIsAStickyErrorNotACrash) {
  const std::string two("\x01\x02", 2);
  StateReader r(two);
  EXPECT_EQ(r.GetU32("window end"), 0u);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.AtEnd());
  EXPECT_EQ(r.error(), "truncated at byte 0 of 2 (reading window end)");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  // Sticky: later reads that would fit still return zeros, the first error
  // stays.
  EXPECT_EQ(r.GetU8(), 0);
  EXPECT_EQ(r.GetBytes(), "");
  EXPECT_EQ(r.error(), "truncated at byte 0 of 2 (reading window end)");

  StateReader r2(two);
  EXPECT_EQ(r2.GetU8(), 1);
  EXPECT_EQ(r2.GetU64("timestamp"), 0u);
  EXPECT_EQ(r2.error(), "truncated at byte 1 of 2 (reading timestamp)");
}

TEST(StateReaderTest, EveryPrefixOfAnEncodingIsReportedTruncated) {
  using Value = std::map<std::string, std::tuple<std::vector<int64_t>, std::optional<std::string>,
                                                 absl::flat_hash_map<int32_t, double>>>;
  const Value v{{"alpha", {{1, 2, 3}, "opt", {{1, 0.5}, {2, 1.5}}}},
                {"beta", {std::vector<int64_t>{}, std::nullopt, {}}}};
  const std::string bytes = EncodeToString(v);
  for (size_t n = 0; n < bytes.size(); ++n) {
    StateReader r(std::string_view(bytes).substr(0, n));
    Decode<Value>(r);
    EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes";
    EXPECT_THAT(r.error(), HasSubstr("truncated at byte ")) << n;
    EXPECT_THAT(r.error(), HasSubstr(absl::StrCat(" of ", n, " (reading "))) << n;
  }
}

TEST(StateReaderTest, CorruptCountsAndTagsAreErrors) {
  // A vector claiming 2^40 elements in 6 bytes: reported, no huge allocation.
  StateWriter w;
  w.PutVarint(uint64_t{1} << 40);
  StateReader r(w.data());
  EXPECT_THAT(Decode<std::vector<int64_t>>(r), IsEmpty());
  EXPECT_THAT(r.error(), HasSubstr("(reading vector size: 1099511627776 elements"));

  StateReader bad_bool("\x07");
  EXPECT_FALSE(Decode<bool>(bad_bool));
  EXPECT_EQ(bad_bool.error(), "bool at byte 0 of 1 is 7, not 0 or 1");

  StateReader bad_tag(std::string_view("\x02\0\0\0\0", 5));
  EXPECT_EQ(Decode<std::optional<int32_t>>(bad_tag), std::nullopt);
  EXPECT_THAT(bad_tag.error(), HasSubstr("optional tag at byte 0 of 5 is 2"));

  // A string whose length runs past the end.
  StateReader long_string(
      "\x05"
      "ab");
  EXPECT_EQ(Decode<std::string>(long_string), "");
  EXPECT_EQ(long_string.error(), "truncated at byte 0 of 3 (reading string)");
}

TEST(Crc32cTest, StandardVectors) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  // RFC 3720 (iSCSI), appendix B.4.
  std::string zeros(32, '\0'), ones(32, '\xff'), up(32, '\0'), down(32, '\0');
  for (int i = 0; i < 32; ++i) {
    up[i] = static_cast<char>(i);
    down[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(down), 0x113FDB5Cu);
}

TEST(Crc32cTest, IncrementalAndUnalignedMatchOneShot) {
  std::string data(1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131 + 7) % 251);
  // Byte at a time, the definition.
  uint32_t reference = 0;
  for (char c : data) reference = Crc32c(&c, 1, reference);
  EXPECT_EQ(Crc32c(data), reference);
  for (size_t split : {0, 1, 7, 8, 9, 500, 999, 1000}) {
    const std::string_view a = std::string_view(data).substr(0, split);
    const std::string_view b = std::string_view(data).substr(split);
    EXPECT_EQ(Crc32c(b, Crc32c(a)), reference) << split;
  }
  for (size_t offset = 1; offset < 8; ++offset) {
    const std::string_view tail = std::string_view(data).substr(offset);
    uint32_t slow = 0;
    for (char c : tail) slow = Crc32c(&c, 1, slow);
    EXPECT_EQ(Crc32c(tail), slow) << offset;
  }
}

// The CRC bit by bit (the definition), against whichever implementation
// Crc32c picked (the crc32 instruction on x86-64 with SSE 4.2, else tables),
// for every length 0..300 at every alignment 0..7, and chained.
TEST(Crc32cTest, MatchesBitwiseDefinitionAtEveryLengthAndAlignment) {
  auto bitwise = [](std::string_view s, uint32_t crc) {
    uint32_t c = ~crc;
    for (char ch : s) {
      c ^= static_cast<uint8_t>(ch);
      for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  std::string data(320, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 197 + 11) % 256);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; n + offset <= 308; ++n) {
      const std::string_view s = std::string_view(data).substr(offset, n);
      ASSERT_EQ(Crc32c(s), bitwise(s, 0)) << offset << " " << n;
      ASSERT_EQ(Crc32c(s, 0x12345678u), bitwise(s, 0x12345678u)) << offset << " " << n;
    }
  }
}

// A fresh directory per test, removed afterwards.
class CheckpointStorageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "tidemark-ckpt-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << tmpl;
    root_ = tmpl;
    dir_ = root_ / "checkpoints";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Writes checkpoint `id` with two states whose bytes depend on the id, and
  // commits it.
  void WriteCheckpoint(CheckpointStorage& storage, int64_t id) {
    std::vector<StateFileInfo> files;
    for (const std::string name : {"1-source-0.state", "2-window-0.state"}) {
      auto info = storage.WriteState(id, name, StateBytes(id, name));
      ASSERT_TRUE(info.ok()) << info.status();
      files.push_back(*info);
    }
    ASSERT_TRUE(storage.Commit(id, Metadata(id), files).ok());
  }
  static std::string StateBytes(int64_t id, const std::string& name) {
    StateWriter w;
    Encode(w, std::map<std::string, int64_t>{{name, id}, {"count", id * 100}});
    Encode(w, std::string(static_cast<size_t>(1000 + id), static_cast<char>('a' + id % 26)));
    return w.Release();
  }
  static std::map<std::string, std::string> Metadata(int64_t id) {
    return {{"job", "fingerprint-abc"}, {"op.2.parallelism", "1"}, {"id", std::to_string(id)}};
  }
  void ExpectIsCheckpoint(const LoadedCheckpoint& c, int64_t id) {
    EXPECT_EQ(c.id, id);
    EXPECT_EQ(c.path, dir_ / ("chk-" + std::to_string(id)));
    EXPECT_EQ(c.metadata, Metadata(id));
    ASSERT_THAT(c.states, SizeIs(2));
    EXPECT_EQ(c.states.at("1-source-0.state"), StateBytes(id, "1-source-0.state"));
    EXPECT_EQ(c.states.at("2-window-0.state"), StateBytes(id, "2-window-0.state"));
  }
  fs::path File(int64_t id, const std::string& name) const {
    return dir_ / ("chk-" + std::to_string(id)) / name;
  }
  static void FlipByte(const fs::path& p, std::streamoff at) {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(at);
    char c = 0;
    f.get(c);
    f.seekp(at);
    f.put(static_cast<char>(c ^ 0x40));
  }

  fs::path root_;
  fs::path dir_;
};

TEST_F(CheckpointStorageTest, WriteCommitLoadLatestRoundTrip) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_THAT(problems, IsEmpty());
  ExpectIsCheckpoint(*loaded, 2);
  // The state decodes back.
  StateReader r(loaded->states.at("2-window-0.state"));
  EXPECT_EQ((Decode<std::map<std::string, int64_t>>(r)),
            (std::map<std::string, int64_t>{{"2-window-0.state", 2}, {"count", 200}}));
  EXPECT_EQ(Decode<std::string>(r), std::string(1002, 'c'));
  EXPECT_TRUE(r.AtEnd());
  // No temporary files are left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_ / "chk-2")) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("1-source-0.state", "2-window-0.state", "_manifest"));
}

// State files of 4 MiB and more are written with O_DIRECT through a
// staging buffer (checkpoint_storage.cc): sizes that are not a multiple of
// the buffer or of the alignment, pieces that straddle the buffer's end,
// /dev/shm (tmpfs, which refuses O_DIRECT before Linux 6.6), and a file
// system that refuses direct writes at the first or the third write (the
// page-cache fallback from there: RefuseDirectWritesForTesting) all read
// back byte for byte, with the CRC of the whole.
TEST_F(CheckpointStorageTest, LargeStateFilesWrittenDirectlyReadBackExactly) {
  std::vector<fs::path> dirs = {dir_};
  std::error_code ec;
  fs::path shm_root;
  if (fs::is_directory("/dev/shm", ec)) {
    std::string tmpl = "/dev/shm/tidemark-ckpt-XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) {
      shm_root = tmpl;
      dirs.push_back(shm_root / "checkpoints");
    }
  }
  // A byte pattern that differs at every offset of a 4 KiB block.
  auto bytes = [](size_t n, uint32_t seed) {
    std::string b(n, '\0');
    uint32_t x = seed;
    for (size_t i = 0; i < n; ++i) {
      x = x * 1664525u + 1013904223u;
      b[i] = static_cast<char>(x >> 24);
    }
    return b;
  };
  // Refused at the first direct write, after two, and never.
  for (const int refuse_after : {0, 2, -1}) {
    RefuseDirectWritesForTesting(refuse_after);
    for (const fs::path& top : dirs) {
      const fs::path dir = top / ("refuse" + std::to_string(refuse_after));
      CheckpointStorage storage(dir);
      // id -> pieces: just over the threshold, one byte short of a whole
      // number of buffers, several buffers with a piece across each border.
      const std::vector<std::vector<size_t>> cases = {
          {(size_t{4} << 20) + 1},
          {(size_t{5} << 20) - 1},
          {3, (size_t{1} << 20) - 1, (size_t{3} << 20) + 4097, 10, (size_t{2} << 20) + 123}};
      for (size_t c = 0; c < cases.size(); ++c) {
        const int64_t id = static_cast<int64_t>(c) + 1;
        std::vector<std::string> held;
        std::string whole;
        for (size_t n : cases[c]) {
          held.push_back(bytes(n, static_cast<uint32_t>(n + c)));
          whole += held.back();
        }
        const std::vector<std::string_view> pieces(held.begin(), held.end());
        auto info = storage.WriteState(id, "1-big-0.state", pieces);
        ASSERT_TRUE(info.ok()) << dir << ": " << info.status();
        EXPECT_EQ(info->size, whole.size());
        EXPECT_EQ(info->crc32c, Crc32c(whole)) << dir << " case " << c;
        EXPECT_EQ(fs::file_size(dir / ("chk-" + std::to_string(id)) / "1-big-0.state"),
                  whole.size());
        ASSERT_TRUE(storage.Commit(id, Metadata(id), {*info}).ok());
        std::vector<std::string> problems;
        auto loaded = storage.LoadLatest(&problems);
        ASSERT_TRUE(loaded.ok()) << loaded.status();
        EXPECT_THAT(problems, IsEmpty());
        EXPECT_EQ(loaded->id, id);
        ASSERT_EQ(loaded->states.at("1-big-0.state").size(), whole.size());
        EXPECT_TRUE(loaded->states.at("1-big-0.state") == whole) << dir << " case " << c;
      }
    }
  }
  RefuseDirectWritesForTesting(-1);
  if (!shm_root.empty()) fs::remove_all(shm_root, ec);
}

// The encoding buffers' pool (state_codec.h): large buffers handed back are
// given to the next large reservation, emptied, the smallest that fits;
// small ones are not kept; the total is bounded; a release empties it.
TEST(EncodeBufferPoolTest, LargeReservationsReuseRecycledBuffers) {
  ReleaseEncodeBuffers();
  std::string small;
  small.reserve(4096);
  RecycleEncodeBuffer(std::move(small));
  EXPECT_EQ(PooledEncodeBufferBytes(), 0u);
  std::string big(size_t{3} << 20, 'x');
  std::string bigger(size_t{8} << 20, 'y');
  const size_t big_capacity = big.capacity();
  const char* big_data = big.data();
  RecycleEncodeBuffer(std::move(big));
  RecycleEncodeBuffer(std::move(bigger));
  EXPECT_GE(PooledEncodeBufferBytes(), size_t{11} << 20);
  // The smallest large enough, emptied.
  std::string got = TakeEncodeBuffer(size_t{2} << 20);
  EXPECT_EQ(got.data(), big_data);
  EXPECT_TRUE(got.empty());
  EXPECT_EQ(got.capacity(), big_capacity);
  // None large enough: an empty string of its own.
  EXPECT_EQ(TakeEncodeBuffer(size_t{64} << 20).capacity(), std::string().capacity());
  // A writer's large reservation takes the kept 8 MiB buffer and keeps what
  // it had written.
  StateWriter w;
  w.PutU32(0xDEADBEEFu);
  w.Reserve(size_t{5} << 20);
  EXPECT_GE(w.data().capacity(), size_t{8} << 20);
  EXPECT_EQ(PooledEncodeBufferBytes(), 0u);
  StateReader r(w.data());
  EXPECT_EQ(Decode<uint32_t>(r), 0xDEADBEEFu);
  // Bounded: 512 MiB of capacity at most.
  for (int i = 0; i < 6; ++i) {
    std::string b;
    b.reserve(size_t{100} << 20);
    RecycleEncodeBuffer(std::move(b));
  }
  EXPECT_LE(PooledEncodeBufferBytes(), size_t{512} << 20);
  EXPECT_GE(PooledEncodeBufferBytes(), size_t{500} << 20);
  ReleaseEncodeBuffers();
  EXPECT_EQ(PooledEncodeBufferBytes(), 0u);
}

TEST_F(CheckpointStorageTest, CheckpointWithoutStateFiles) {
  CheckpointStorage storage(dir_);
  ASSERT_TRUE(storage.Commit(4, {{"job", "j"}}, {}).ok());
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 4);
  EXPECT_THAT(loaded->states, IsEmpty());
  EXPECT_EQ(loaded->metadata.at("job"), "j");
}

TEST_F(CheckpointStorageTest, IncompleteCheckpointIsIgnored) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  ASSERT_TRUE(storage.WriteState(2, "2-window-0.state", "newer, never committed").ok());
  EXPECT_FALSE(storage.IsComplete(2));
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
  EXPECT_THAT(problems,
              ElementsAre("checkpoint 2: _manifest: missing (incomplete: never committed)"));
}

TEST_F(CheckpointStorageTest, TruncatedStateFileFallsBack) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  const fs::path f = File(2, "2-window-0.state");
  const uintmax_t size = fs::file_size(f);
  fs::resize_file(f, 100);
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
  EXPECT_THAT(problems, ElementsAre(absl::StrCat("checkpoint 2: 2-window-0.state: size 100, ",
                                                 "manifest says ", size, " (truncated)")));
}

TEST_F(CheckpointStorageTest, FlippedByteInStateFileFallsBack) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  FlipByte(File(2, "1-source-0.state"), 10);
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0], ::testing::MatchesRegex("checkpoint 2: 1-source-0.state: crc32c "
                                                   "0x[0-9a-f]{8} != manifest 0x[0-9a-f]{8} "
                                                   "\\(corrupt\\)"));
}

TEST_F(CheckpointStorageTest, MissingStateFileFallsBack) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  fs::remove(File(2, "2-window-0.state"));
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
  ASSERT_THAT(problems, SizeIs(1));
  EXPECT_THAT(problems[0], HasSubstr("checkpoint 2: 2-window-0.state: missing, manifest says"));
}

TEST_F(CheckpointStorageTest, CorruptManifestFallsBack) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  WriteCheckpoint(storage, 3);
  // A flipped byte in the middle (in the metadata) of 3's manifest, and 2's
  // cut short.
  const fs::path m3 = File(3, "_manifest");
  FlipByte(m3, static_cast<std::streamoff>(fs::file_size(m3) / 2));
  const fs::path m2 = File(2, "_manifest");
  fs::resize_file(m2, fs::file_size(m2) - 3);
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
  ASSERT_THAT(problems, SizeIs(2));
  EXPECT_THAT(problems[0], ::testing::MatchesRegex("checkpoint 3: _manifest: crc32c 0x[0-9a-f]{8} "
                                                   "!= stored 0x[0-9a-f]{8} .*"));
  EXPECT_THAT(problems[1], ::testing::StartsWith("checkpoint 2: _manifest: "));

  // Garbage, and a manifest cut to a few bytes.
  std::ofstream(m3, std::ios::binary | std::ios::trunc) << "not a manifest at all";
  fs::resize_file(m2, 4);
  problems.clear();
  loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 1);
  EXPECT_THAT(problems, ElementsAre("checkpoint 3: _manifest: not a tidemark checkpoint manifest "
                                    "(bad magic) (corrupt)",
                                    "checkpoint 2: _manifest: size 4 (truncated)"));
}

TEST_F(CheckpointStorageTest, NoValidCheckpointIsNotFound) {
  CheckpointStorage storage(dir_);
  auto none = storage.LoadLatest(nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(none.status().message(), HasSubstr(dir_.string()));

  WriteCheckpoint(storage, 1);
  ASSERT_TRUE(storage.WriteState(2, "x.state", "abc").ok());
  fs::resize_file(File(1, "1-source-0.state"), 0);
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("no complete, valid checkpoint in " + dir_.string()));
  EXPECT_THAT(loaded.status().message(), HasSubstr("checkpoint 2: _manifest: missing"));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("checkpoint 1: 1-source-0.state: size 0, manifest says"));
  EXPECT_THAT(problems, SizeIs(2));
}

TEST_F(CheckpointStorageTest, RetentionKeepsTheNewestN) {
  CheckpointStorage storage(dir_, /*retain=*/2);
  for (int64_t id = 1; id <= 5; ++id) {
    WriteCheckpoint(storage, id);
    EXPECT_THAT(storage.ListCheckpointIds(), SizeIs(std::min<int64_t>(id, 2)));
  }
  EXPECT_THAT(storage.ListCheckpointIds(), ElementsAre(4, 5));

  // Incomplete ones below the committed id go, one above it (still being
  // written) stays.
  ASSERT_TRUE(storage.WriteState(6, "a.state", "six").ok());    // abandoned
  ASSERT_TRUE(storage.WriteState(8, "a.state", "eight").ok());  // in flight
  WriteCheckpoint(storage, 7);
  EXPECT_THAT(storage.ListCheckpointIds(), ElementsAre(5, 7, 8));
  EXPECT_TRUE(storage.IsComplete(5));
  EXPECT_TRUE(storage.IsComplete(7));
  EXPECT_FALSE(storage.IsComplete(8));
}

TEST_F(CheckpointStorageTest, LoadOfANamedCheckpoint) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  auto one = storage.Load(dir_ / "chk-1");
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectIsCheckpoint(*one, 1);

  FlipByte(File(2, "2-window-0.state"), 0);
  auto two = storage.Load(dir_ / "chk-2");
  EXPECT_EQ(two.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(two.status().message(), HasSubstr("checkpoint 2 (" + (dir_ / "chk-2").string() +
                                                "): 2-window-0.state: crc32c "));
  EXPECT_THAT(two.status().message(), HasSubstr("(corrupt)"));

  auto missing = storage.Load(dir_ / "chk-9");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("checkpoint 9"));
  // Issue 23: a path that is not there says so.
  EXPECT_THAT(missing.status().message(), HasSubstr("no such checkpoint (it does not exist)"));
  auto nowhere = storage.Load("/no/such/chk-1");
  EXPECT_EQ(nowhere.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(nowhere.status().message(),
              HasSubstr("checkpoint 1 (/no/such/chk-1): no such checkpoint"));

  // A manifest moved to another checkpoint's directory.
  fs::copy_file(File(1, "_manifest"), File(2, "_manifest"), fs::copy_options::overwrite_existing);
  auto moved = storage.Load(dir_ / "chk-2");
  EXPECT_THAT(moved.status().message(),
              HasSubstr("_manifest: says checkpoint 1, the directory is chk-2"));
}

TEST_F(CheckpointStorageTest, CommitAndWriteStateRejectMistakes) {
  CheckpointStorage storage(dir_);
  for (const std::string& bad :
       std::vector<std::string>{"", "a/b", ".hidden", "_manifest", std::string("a\0b", 3)}) {
    auto r = storage.WriteState(1, bad, "x");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("checkpoint 1: write state: state file name"));
  }
  EXPECT_FALSE(storage.WriteState(-1, "a", "x").ok());

  auto a = storage.WriteState(1, "a.state", "aaaa");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size, 4u);
  EXPECT_EQ(a->crc32c, Crc32c("aaaa"));
  StateFileInfo never{"b.state", 3, 0};
  absl::Status s = storage.Commit(1, {}, {*a, never});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("commit checkpoint 1: stat state file"));
  EXPECT_THAT(s.message(), HasSubstr("b.state"));
  EXPECT_FALSE(storage.IsComplete(1));
  StateFileInfo wrong_size = *a;
  wrong_size.size = 5;
  EXPECT_THAT(storage.Commit(1, {}, {wrong_size}).message(),
              HasSubstr("a.state: 4 bytes on disk, 5 written"));
  EXPECT_FALSE(storage.Commit(1, {}, {*a, *a}).ok());

  ASSERT_TRUE(storage.Commit(1, {}, {*a}).ok());
  EXPECT_EQ(storage.Commit(1, {}, {*a}).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(CheckpointStorageTest, AbortDeletesOnlyIncomplete) {
  CheckpointStorage storage(dir_);
  WriteCheckpoint(storage, 1);
  ASSERT_TRUE(storage.WriteState(2, "a.state", "x").ok());
  storage.Abort(2);
  storage.Abort(1);
  storage.Abort(3);  // nothing there
  EXPECT_THAT(storage.ListCheckpointIds(), ElementsAre(1));
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectIsCheckpoint(*loaded, 1);
}

// Blobs from 4 threads x 200 each, written in submission order on the writer's
// thread; every file is there with the crc the writer reported and the bytes
// that were submitted.
TEST_F(CheckpointStorageTest, AsyncStateWriterFromManyThreads) {
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const fs::path dir = dir_ / ("round-" + std::to_string(round));
    CheckpointStorage storage(dir);
    const int64_t id = 10 + round;
    auto bytes_of = [&](int t, int i) {
      return absl::StrCat("thread ", t, " blob ", i, " ", std::string((t * 37 + i) % 300, 'q'));
    };
    std::mutex mu;
    std::vector<StateFileInfo> infos;
    std::vector<std::string> errors;
    std::vector<int> last_seen(kThreads, -1);
    bool out_of_order = false;
    std::thread::id writer_thread;
    bool several_writer_threads = false;
    {
      AsyncStateWriter writer(&storage);
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kPerThread; ++i) {
            writer.Submit(id, absl::StrCat(t, "-op-", i, ".state"), bytes_of(t, i),
                          [&, t, i](absl::StatusOr<StateFileInfo> r) {
                            std::lock_guard<std::mutex> lock(mu);
                            if (writer_thread == std::thread::id()) {
                              writer_thread = std::this_thread::get_id();
                            } else if (writer_thread != std::this_thread::get_id()) {
                              several_writer_threads = true;
                            }
                            if (i <= last_seen[t]) out_of_order = true;
                            last_seen[t] = i;
                            if (r.ok()) {
                              infos.push_back(*r);
                            } else {
                              errors.push_back(r.status().ToString());
                            }
                          });
          }
        });
      }
      for (auto& th : threads) th.join();
    }  // the destructor drains
    EXPECT_THAT(errors, IsEmpty());
    EXPECT_FALSE(out_of_order);
    EXPECT_FALSE(several_writer_threads);
    EXPECT_NE(writer_thread, std::this_thread::get_id());
    ASSERT_THAT(infos, SizeIs(kThreads * kPerThread));
    for (const StateFileInfo& info : infos) {
      std::ifstream in(dir / ("chk-" + std::to_string(id)) / info.name, std::ios::binary);
      const std::string content((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
      EXPECT_EQ(content.size(), info.size) << info.name;
      EXPECT_EQ(Crc32c(content), info.crc32c) << info.name;
    }
    // And they make a checkpoint that loads back with the submitted bytes.
    ASSERT_TRUE(storage.Commit(id, {{"round", std::to_string(round)}}, infos).ok());
    auto loaded = storage.LoadLatest(nullptr);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    ASSERT_THAT(loaded->states, SizeIs(kThreads * kPerThread));
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kPerThread; ++i) {
        EXPECT_EQ(loaded->states.at(absl::StrCat(t, "-op-", i, ".state")), bytes_of(t, i));
      }
    }
  }
}

TEST_F(CheckpointStorageTest, AsyncStateWriterFlushAndErrors) {
  CheckpointStorage storage(dir_);
  AsyncStateWriter writer(&storage);
  std::mutex mu;
  std::vector<std::string> results;
  auto record = [&](absl::StatusOr<StateFileInfo> r) {
    std::lock_guard<std::mutex> lock(mu);
    results.push_back(r.ok() ? r->name : std::string(r.status().message()));
  };
  writer.Submit(1, "a.state", "a", record);
  writer.Submit(1, "../escape", "b", record);
  writer.Submit(1, "c.state", "c", nullptr);
  writer.Submit(1, "d.state", "d", record);
  writer.Flush();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_THAT(results, SizeIs(3));
  EXPECT_EQ(results[0], "a.state");
  EXPECT_THAT(results[1], HasSubstr("state file name \"../escape\" contains '/'"));
  EXPECT_EQ(results[2], "d.state");
  EXPECT_TRUE(fs::exists(File(1, "c.state")));
}

// Issue 23 item 5: directories named like checkpoints that the storage did
// not write (no manifest, a manifest of another id, not chk-<number>) do not
// count toward retention or the next id, are not deleted, and are named.
TEST_F(CheckpointStorageTest, StrayDirectoriesDoNotCountTowardRetention) {
  CheckpointStorage storage(dir_, /*retain=*/2);
  WriteCheckpoint(storage, 1);
  WriteCheckpoint(storage, 2);
  fs::create_directories(dir_ / "chk-999999");
  fs::create_directories(dir_ / "chk-abc");
  fs::create_directories(dir_ / "chk-50");
  fs::copy_file(File(2, "_manifest"), File(50, "_manifest"));  // says 2
  EXPECT_THAT(storage.ListCommittedIds(), ElementsAre(1, 2));
  EXPECT_TRUE(storage.HasValidManifest(2));
  EXPECT_FALSE(storage.HasValidManifest(50));
  EXPECT_FALSE(storage.HasValidManifest(999999));

  WriteCheckpoint(storage, 3);
  // The newest two of the job's own: chk-50 did not push chk-2 out.
  EXPECT_THAT(storage.ListCommittedIds(), ElementsAre(2, 3));
  EXPECT_TRUE(fs::exists(dir_ / "chk-50"));
  EXPECT_TRUE(fs::exists(dir_ / "chk-999999"));
  EXPECT_TRUE(fs::exists(dir_ / "chk-abc"));
  auto latest = storage.LoadLatest(nullptr);
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(latest->id, 3);

  const std::vector<std::string> stray = storage.StrayEntries();
  ASSERT_THAT(stray, SizeIs(3));
  EXPECT_THAT(stray[0], HasSubstr("ignored " + (dir_ / "chk-50").string() +
                                  ": its manifest does not check out"));
  EXPECT_THAT(stray[1], HasSubstr("ignored " + (dir_ / "chk-999999").string() +
                                  ": no manifest (cut short, or stray); checkpoint ids go on "
                                  "from 4"));
  EXPECT_THAT(stray[2], HasSubstr("ignored " + (dir_ / "chk-abc").string() +
                                  ": not a checkpoint directory (chk-<number>)"));
}

// Issue 23 item 3: the directory is checked before a job starts.
TEST_F(CheckpointStorageTest, CheckWritableCreatesTheDirectoryOrSaysWhy) {
  CheckpointStorage storage(dir_ / "a" / "b");
  ASSERT_TRUE(storage.CheckWritable().ok());
  EXPECT_TRUE(fs::is_directory(dir_ / "a" / "b"));
  EXPECT_TRUE(fs::is_empty(dir_ / "a" / "b"));  // the probe is gone

  // Under a regular file: cannot be created (chmod would not stop root).
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  CheckpointStorage under_file(dir_ / "file" / "chk");
  absl::Status s = under_file.CheckWritable();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("checkpoint directory " + (dir_ / "file" / "chk").string() +
                                     ": cannot create"));

  // A read-only file system, injected.
  CheckpointStorage read_only(dir_ / "ro");
  read_only.set_fault_injector([](std::string_view op, const fs::path& p) {
    return absl::PermissionDeniedError(
        absl::StrCat(std::string(op), " ", p.string(), ": Read-only file system"));
  });
  s = read_only.CheckWritable();
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("not writable: "));
  EXPECT_THAT(s.message(), HasSubstr("Read-only file system"));
}

// A full disk, for real: the state file's temporary name is a link to
// /dev/full, whose writes fail with ENOSPC.
TEST_F(CheckpointStorageTest, AFullDiskIsAResourceExhaustedError) {
  CheckpointStorage storage(dir_);
  fs::create_directories(dir_ / "chk-1");
  fs::create_symlink("/dev/full", File(1, ".a.state.tmp"));
  auto info = storage.WriteState(1, "a.state", std::string(1000, 'x'));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(info.status().message(), HasSubstr("No space left on device"));
  EXPECT_THAT(info.status().message(), HasSubstr("checkpoint 1: write state: "));
}

// --- the coordinator's failure policy (issue 23 item 3) ---

// A source subtask: acknowledges each checkpoint at once, or never.
class FakeSource final : public CheckpointParticipant {
 public:
  explicit FakeSource(bool acks) : acks_(acks) {}
  void set_coordinator(CheckpointCoordinator* c) { coordinator_ = c; }
  bool is_source() const override { return true; }
  bool replayable() const override { return true; }
  void RequestCheckpoint(int64_t id) override {
    if (!acks_) return;
    SubtaskSnapshot s;
    s.checkpoint_id = id;
    s.task_name = "source";
    s.has_source = true;
    s.input_state = "position";
    coordinator_->Acknowledge(std::move(s));
  }
  void NotifyCheckpointComplete(int64_t) override {}

 private:
  const bool acks_;
  CheckpointCoordinator* coordinator_ = nullptr;
};

// What the coordinator reported: failed checkpoints and the job's failure.
struct Reports {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> failures;
  std::vector<std::string> job_failures;
  // Waits (bounded) until `n` failures were reported.
  bool WaitForFailures(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return failures.size() >= n; });
  }
  // Waits (bounded) until the job was failed `n` times (the coordinator
  // fails it after reporting the failure, on its own thread).
  bool WaitForJobFailures(size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(30), [&] { return job_failures.size() >= n; });
  }
  void Attach(CheckpointCoordinator& c, int tolerable, Duration timeout) {
    c.SetFailurePolicy(
        tolerable, timeout,
        [this](int64_t, const std::string& e) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back(e);
          cv.notify_all();
        },
        [this](const absl::Status& s) {
          std::lock_guard<std::mutex> lock(mu);
          job_failures.push_back(std::string(s.message()));
          cv.notify_all();
        });
  }
};

TEST_F(CheckpointStorageTest, FailedCheckpointsAreReportedAndFailTheJobPastTheTolerableCount) {
  auto storage = std::make_unique<CheckpointStorage>(dir_);
  // Checkpoints 1, 2 and 4 meet a full disk; 3 is written.
  storage->set_fault_injector([](std::string_view, const fs::path& p) {
    const std::string s = p.string();
    if (s.find("chk-3/") != std::string::npos || s.find("chk-") == std::string::npos)
      return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat("write ", s, ": No space left on device"));
  });
  FakeSource source(true);
  CheckpointCoordinator c(Duration(0), std::move(storage), {}, 1);
  source.set_coordinator(&c);
  c.AddTask(&source, 0, 0);
  Reports reports;
  reports.Attach(c, /*tolerable=*/1, Duration(0));
  c.Start();

  ASSERT_EQ(c.TriggerCheckpoint(), 1);
  ASSERT_TRUE(reports.WaitForFailures(1));
  {
    std::lock_guard<std::mutex> lock(reports.mu);
    EXPECT_THAT(reports.failures[0], HasSubstr("checkpoint 1: write state: "));
    EXPECT_THAT(reports.failures[0], HasSubstr("No space left on device"));
    EXPECT_THAT(reports.job_failures, SizeIs(0));  // one tolerated
  }
  EXPECT_EQ(c.Summary().failed, 1);
  EXPECT_FALSE(fs::exists(dir_ / "chk-1"));  // abandoned

  ASSERT_EQ(c.TriggerCheckpoint(), 2);
  ASSERT_TRUE(reports.WaitForFailures(2));
  ASSERT_TRUE(reports.WaitForJobFailures(1));
  {
    std::lock_guard<std::mutex> lock(reports.mu);
    ASSERT_THAT(reports.job_failures, SizeIs(1));
    EXPECT_THAT(reports.job_failures[0], HasSubstr("checkpoint 2: "));
    EXPECT_THAT(reports.job_failures[0],
                HasSubstr("2 checkpoints failed in a row; the job tolerates 1"));
  }

  // A completed checkpoint resets the count.
  ASSERT_EQ(c.TriggerCheckpoint(), 3);
  ASSERT_TRUE(c.AwaitCompleted(3, std::chrono::milliseconds(30000)));
  ASSERT_EQ(c.TriggerCheckpoint(), 4);
  ASSERT_TRUE(reports.WaitForFailures(3));
  c.Stop();
  {
    std::lock_guard<std::mutex> lock(reports.mu);
    EXPECT_THAT(reports.job_failures, SizeIs(1));
  }
  const CheckpointSummary summary = c.Summary();
  EXPECT_EQ(summary.failed, 3);
  EXPECT_EQ(summary.completed, 1);
  EXPECT_EQ(summary.last_id, 3);
  EXPECT_THAT(summary.last_error, HasSubstr("checkpoint 4: "));
}

// A subtask whose snapshot's asynchronous part failed declines the
// checkpoint, then may finish at once: its final snapshot, taken after the
// barrier, must not stand for the snapshot it could not finish (the
// checkpoint completed with it, and a restore lost the records it sent
// after the barrier).  The checkpoint fails; the next one completes.
TEST_F(CheckpointStorageTest, ADeclinedCheckpointFailsEvenWhenTheDeclinerFinishesAtOnce) {
  FakeSource acker(true);
  FakeSource decliner(false);
  CheckpointCoordinator c(Duration(0), std::make_unique<CheckpointStorage>(dir_), {}, 1);
  acker.set_coordinator(&c);
  c.AddTask(&acker, 0, 0);
  c.AddTask(&decliner, 1, 0);
  Reports reports;
  reports.Attach(c, /*tolerable=*/5, Duration(0));
  c.Start();
  ASSERT_EQ(c.TriggerCheckpoint(), 1);
  ASSERT_TRUE(c.Decline(1,
                        "task 'b' (subtask 0): operator 'x' at checkpoint 1 (asynchronous "
                        "part): upload failed"));
  SubtaskSnapshot final_state;
  final_state.task_index = 1;
  final_state.task_name = "b";
  final_state.has_source = true;
  c.SubtaskFinished(final_state);
  ASSERT_TRUE(reports.WaitForFailures(1));
  {
    std::lock_guard<std::mutex> lock(reports.mu);
    EXPECT_THAT(reports.failures[0], HasSubstr("(asynchronous part): upload failed"));
  }
  EXPECT_FALSE(c.AwaitCompleted(1, std::chrono::milliseconds(0)));
  // The next checkpoint: the finished subtask's final snapshot stands for it.
  ASSERT_EQ(c.TriggerCheckpoint(), 2);
  ASSERT_TRUE(c.AwaitCompleted(2, std::chrono::milliseconds(30000)));
  c.Stop();
  const CheckpointSummary summary = c.Summary();
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(summary.completed, 1);
  EXPECT_EQ(summary.last_id, 2);
  EXPECT_FALSE(fs::exists(dir_ / "chk-1"));
}

// Real time is the subject: a checkpoint that no subtask acknowledges
// expires once the timeout has passed.
TEST_F(CheckpointStorageTest, ACheckpointPastItsTimeoutExpires) {
  FakeSource silent(false);
  CheckpointCoordinator c(Duration(0), std::make_unique<CheckpointStorage>(dir_), {}, 1);
  silent.set_coordinator(&c);
  c.AddTask(&silent, 0, 0);
  Reports reports;
  reports.Attach(c, /*tolerable=*/0, Duration(30));
  c.Start();
  ASSERT_EQ(c.TriggerCheckpoint(), 1);
  ASSERT_TRUE(reports.WaitForFailures(1));
  ASSERT_TRUE(reports.WaitForJobFailures(1));
  {
    std::lock_guard<std::mutex> lock(reports.mu);
    EXPECT_THAT(reports.failures[0],
                HasSubstr("checkpoint 1: expired before completing: not complete within the "
                          "checkpoint timeout of 30 ms"));
    ASSERT_THAT(reports.job_failures, SizeIs(1));
    EXPECT_THAT(reports.job_failures[0], HasSubstr("the job tolerates 0"));
  }
  // A late acknowledgement finds nothing; the next checkpoint can start.
  SubtaskSnapshot late;
  late.checkpoint_id = 1;
  c.Acknowledge(late);
  EXPECT_EQ(c.TriggerCheckpoint(), 2);
  c.Stop();
  EXPECT_EQ(c.Summary().completed, 0);
  EXPECT_GE(c.Summary().failed, 1);  // 2 may have expired too
}

}  // namespace
}  // namespace tidemark::internal
