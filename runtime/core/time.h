// runtime/core/time.h
//
// Event time in tidemark: epoch milliseconds in a signed 64-bit integer, as in
// Flink (`long`).  A record whose timestamp was never assigned carries
// kNoTimestamp (== kMinTimestamp), which is what Flink reports for such
// records.
//
// Watermark semantics, stated once for the whole code base: a watermark W(t)
// means "no more records with timestamp <= t are expected".  A subtask's
// watermark starts at kMinTimestamp; W(kMaxTimestamp) means end of event time.
//
// Arithmetic on timestamps must never wrap: every helper here saturates at the
// ends of the range, so `max_ts - d - 1` before any record was seen stays at
// kMinTimestamp and `end - 1 + lateness` near the top stays at kMaxTimestamp.
#ifndef TM_RUNTIME_TIME_H_
#define TM_RUNTIME_TIME_H_

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

namespace tidemark {

using Timestamp = int64_t;  // epoch milliseconds

inline constexpr Timestamp kMinTimestamp = std::numeric_limits<Timestamp>::min();
inline constexpr Timestamp kMaxTimestamp = std::numeric_limits<Timestamp>::max();
inline constexpr Timestamp kNoTimestamp = kMinTimestamp;
inline constexpr Timestamp kMaxWatermark = kMaxTimestamp;

// Durations in the API are std::chrono durations (so `2s`, `200ms` work); they
// are truncated to whole milliseconds, as Flink's Duration::toMillis does.
using Duration = std::chrono::milliseconds;

constexpr int64_t ToMillis(Duration d) { return d.count(); }

// a + b, clamped to [kMinTimestamp, kMaxTimestamp].
constexpr Timestamp SaturatingAdd(Timestamp a, int64_t b) {
  Timestamp r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMaxTimestamp : kMinTimestamp;
  return r;
}

// a - b, clamped to [kMinTimestamp, kMaxTimestamp].
constexpr Timestamp SaturatingSub(Timestamp a, int64_t b) {
  Timestamp r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b > 0 ? kMinTimestamp : kMaxTimestamp;
  return r;
}

// Formats a timestamp for humans: "MIN", "MAX" or the number.
std::string FormatTimestamp(Timestamp ts);

// Whether watermark status is idle or active (Flink's WatermarkStatus).
enum class WatermarkStatus : uint8_t { kActive = 0, kIdle = 1 };

inline const char* ToString(WatermarkStatus s) {
  return s == WatermarkStatus::kIdle ? "IDLE" : "ACTIVE";
}

}  // namespace tidemark

#endif  // TM_RUNTIME_TIME_H_
