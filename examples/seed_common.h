// examples/seed_common.h
//
// The parts of the seed documents' jobs (../shared/seeds, SCENARIOS.md S1-S8)
// that do not involve windows: their record types, the parsers of their input
// lines, the hand-written watermark generators, and the formatting of times
// and records exactly as the documents print them.  Header-only, so that the
// example programs and the tests (tests/scenarios_test.cc) share one copy of
// each job without a library of their own.
//
// Times: the documents print wall-clock times with Java's SimpleDateFormat in
// the JVM's zone, which was UTC+8 (Asia/Shanghai).  Here the zone is an
// explicit absl::TimeZone; LoadSeedTimeZone() loads it by name.
#ifndef TM_EXAMPLES_SEED_COMMON_H_
#define TM_EXAMPLES_SEED_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/task/watermark_strategy.h"

namespace tidemark::seeds {

// ---------------------------------------------------------------------------
// Time zone and time formatting.

inline constexpr char kDefaultTimeZone[] = "Asia/Shanghai";

// The zone called `name` from the system's zoneinfo.  If it cannot be loaded
// and `name` is the documents' Asia/Shanghai, falls back to a fixed UTC+8
// offset (the same for every date the documents use: China has had no DST
// since 1991) and sets *note to say so; for any other name returns an error.
inline absl::StatusOr<absl::TimeZone> LoadSeedTimeZone(const std::string& name,
                                                       std::string* note = nullptr) {
  absl::TimeZone tz;
  if (absl::LoadTimeZone(name, &tz)) return tz;
  if (name == kDefaultTimeZone) {
    if (note != nullptr) {
      *note = "zoneinfo for Asia/Shanghai not found; using a fixed UTC+08:00 offset";
    }
    return absl::FixedTimeZone(8 * 60 * 60);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown time zone '", name, "' (no zoneinfo for it)"));
}

// SimpleDateFormat("yyyy-MM-dd HH:mm:ss.SSS") of epoch milliseconds.
inline std::string FormatMillis(Timestamp ms, const absl::TimeZone& tz) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S", absl::FromUnixMillis(ms), tz);
}

// SimpleDateFormat("yyyy-MM-dd HH:mm:ss"): whole seconds (document 002).
inline std::string FormatSeconds(Timestamp ms, const absl::TimeZone& tz) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(ms), tz);
}

// "yyyy-MM-dd HH:mm:ss" with optional ".SSS" (any number of fraction digits)
// in zone `tz`, to epoch milliseconds.
inline absl::StatusOr<Timestamp> ParseDateTime(absl::string_view text, const absl::TimeZone& tz) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S", std::string(text), tz, &t, &err)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad time '", text, "' (want yyyy-MM-dd HH:mm:ss[.SSS]): ", err));
  }
  return absl::ToUnixMillis(t);
}

// ---------------------------------------------------------------------------
// Records and line parsers.  (absl::string_view, not std::string_view: the
// system's Abseil is built with its own string_view type.)  A malformed line is an error (the
// documents' jobs throw NumberFormatException / ArrayIndexOutOfBoundsException and the job fails);
// the message quotes the line.

// Documents 000 and 004: (key, event time in epoch ms), Flink's
// Tuple2<String, Long>; prints as "(0001,1538359882000)".
using KeyedEvent = std::pair<std::string, Timestamp>;

// The value, or throws std::invalid_argument with the status message: how a
// map function fails the job (operators/basic.h).
template <typename T>
T ValueOrThrow(absl::StatusOr<T> v) {
  if (!v.ok()) throw std::invalid_argument(std::string(v.status().message()));
  return *std::move(v);
}

namespace internal {
inline absl::Status BadLine(absl::string_view line, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("bad input line '", line, "': want ", want));
}
}  // namespace internal

// S1 (document 000): "key,epoch_ms".
inline absl::StatusOr<KeyedEvent> ParseCommaEvent(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ',');
  int64_t ts = 0;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &ts)) return internal::BadLine(line, "key,epoch_ms");
  return KeyedEvent(std::string(f[0]), ts);
}

// S2 (document 004): "key epoch_ms", split on single spaces as Scala's
// split(" ").
inline absl::StatusOr<KeyedEvent> ParseSpaceEvent(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
  int64_t ts = 0;
  if (f.size() < 2 || !absl::SimpleAtoi(f[1], &ts)) return internal::BadLine(line, "key epoch_ms");
  return KeyedEvent(std::string(f[0]), ts);
}

// S3-S7 (document 001): WaterSensor(id, ts in seconds, vc).
struct WaterSensor {
  std::string id;
  int64_t ts = 0;  // seconds; the timestamp assigner multiplies by 1000
  int vc = 0;

  friend bool operator==(const WaterSensor&, const WaterSensor&) = default;
};

// The document's WaterSensor.toString().  (The blog's rendering shows
// "WaterSensor{ id=..." with a space that its code does not produce; this is
// what the code prints.)
inline std::string ToString(const WaterSensor& s) {
  return absl::StrCat("WaterSensor{id='", s.id, "', ts=", s.ts, ", vc=", s.vc, "}");
}
inline std::ostream& operator<<(std::ostream& os, const WaterSensor& s) {
  return os << ToString(s);
}

// "id,ts_seconds,vc".
inline absl::StatusOr<WaterSensor> ParseWaterSensor(absl::string_view line) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ',');
  WaterSensor s;
  if (f.size() < 3 || !absl::SimpleAtoi(f[1], &s.ts) || !absl::SimpleAtoi(f[2], &s.vc)) {
    return internal::BadLine(line, "id,ts_seconds,vc");
  }
  s.id = std::string(f[0]);
  return s;
}

// The document's ReduceFunction: id and ts of the first, vc summed.
inline WaterSensor SumVc(const WaterSensor& a, const WaterSensor& b) {
  return WaterSensor{a.id, a.ts, a.vc + b.vc};
}

// S8 (document 002): a base station's call record.
struct Station {
  std::string sid;
  std::string call_type;
  Timestamp call_time = 0;  // epoch ms
  int64_t duration = 0;

  friend bool operator==(const Station&, const Station&) = default;
};

// "sid,callType,yyyy-MM-dd HH:mm:ss[.SSS],duration" (trimmed, as the
// document's line.trim.split(",")), the time read in zone `tz`.  Unlike the
// document's FastDateFormat("yyyy-MM-dd HH:mm:ss"), which ignores ".SSS",
// the milliseconds are kept.
inline absl::StatusOr<Station> ParseStation(absl::string_view line, const absl::TimeZone& tz) {
  std::vector<absl::string_view> f = absl::StrSplit(absl::StripAsciiWhitespace(line), ',');
  Station s;
  if (f.size() < 4 || !absl::SimpleAtoi(f[3], &s.duration)) {
    return internal::BadLine(line, "sid,callType,yyyy-MM-dd HH:mm:ss[.SSS],duration");
  }
  absl::StatusOr<Timestamp> t = ParseDateTime(f[2], tz);
  if (!t.ok()) return internal::BadLine(line, t.status().message());
  s.sid = std::string(f[0]);
  s.call_type = std::string(f[1]);
  s.call_time = *t;
  return s;
}

// ---------------------------------------------------------------------------
// Hand-written watermark generators (docs/semantics.md, 2.4).  Both
// return `max_ts - delay` with no "- 1", unlike forBoundedOutOfOrderness.

// What a generator reports for every record, before the record moves on: the
// documents print these values from inside their timestamp extractors.
struct WatermarkTrace {
  Timestamp event_time;
  Timestamp max_timestamp;
  Timestamp watermark;  // max_timestamp - delay: what the next emission gives
};

template <typename T>
struct GeneratorHooks {
  // Every record: the record, and the values after it was seen.
  std::function<void(const T&, const WatermarkTrace&)> on_event;
  // Every periodic emission, with the watermark emitted (document 001, 4.1
  // prints it).
  std::function<void(Timestamp)> on_periodic_emit;
};

// Documents 000 and 004 (legacy AssignerWithPeriodicWatermarks) and document
// 001, 4.1 (MyPeriod): tracks the maximum timestamp on every record and emits
// `max_ts - delay` on every periodic tick.  The legacy documents start the
// maximum at 0, so the first tick emits W(-delay); document 001 starts it at
// MIN + delay + 1.
template <typename T>
class PeriodicMaxMinusDelay final : public WatermarkGenerator<T> {
 public:
  PeriodicMaxMinusDelay(Duration delay, Timestamp initial_max, GeneratorHooks<T> hooks = {})
      : delay_(ToMillis(delay)), max_ts_(initial_max), hooks_(std::move(hooks)) {}
  void OnEvent(const T& event, Timestamp ts, WatermarkOutput&) override {
    max_ts_ = std::max(max_ts_, ts);
    if (hooks_.on_event) hooks_.on_event(event, WatermarkTrace{ts, max_ts_, Current()});
  }
  void OnPeriodicEmit(WatermarkOutput& out) override {
    const Timestamp w = Current();
    if (hooks_.on_periodic_emit) hooks_.on_periodic_emit(w);
    out.EmitWatermark(w);
  }

 private:
  Timestamp Current() const { return SaturatingSub(max_ts_, delay_); }

  int64_t delay_;
  Timestamp max_ts_;
  GeneratorHooks<T> hooks_;
};

// Document 001, 4.2 (MyPunt): emits `max_ts - delay` on every record and
// nothing on the periodic tick.  The maximum starts at MIN + delay + 1.
template <typename T>
class PunctuatedMaxMinusDelay final : public WatermarkGenerator<T> {
 public:
  explicit PunctuatedMaxMinusDelay(Duration delay, GeneratorHooks<T> hooks = {})
      : delay_(ToMillis(delay)),
        max_ts_(SaturatingAdd(kMinTimestamp, delay_ + 1)),
        hooks_(std::move(hooks)) {}
  void OnEvent(const T& event, Timestamp ts, WatermarkOutput& out) override {
    max_ts_ = std::max(max_ts_, ts);
    const Timestamp w = SaturatingSub(max_ts_, delay_);
    if (hooks_.on_event) hooks_.on_event(event, WatermarkTrace{ts, max_ts_, w});
    out.EmitWatermark(w);
  }
  void OnPeriodicEmit(WatermarkOutput&) override {}

 private:
  int64_t delay_;
  Timestamp max_ts_;
  GeneratorHooks<T> hooks_;
};

}  // namespace tidemark::seeds

#endif  // TM_EXAMPLES_SEED_COMMON_H_
