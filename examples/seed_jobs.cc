// The seed jobs (examples/seed_jobs.h), compiled once for the programs and
// tests that run them.
#include "examples/seed_jobs.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"

namespace tidemark::seeds {

namespace internal {

template <typename T>
WatermarkStrategy<T> MaybePerRecord(WatermarkStrategy<T> s, const SeedOptions& o) {
  return o.per_record_watermarks ? s.with_periodic_emit_per_record() : s;
}

// Flink's Tuple1.toString(): the documents key by field 0 (keyBy(0)), so the
// key their window functions print is "(0001)".
inline std::string TupleKey(const std::string& key) { return absl::StrCat("(", key, ")"); }

// Documents 000/004: parse, then the hand-written periodic generator
// `max_ts - 10 s` (maximum starting at 0, no "- 1").
template <typename ParseFn>
DataStream<KeyedEvent> StampLegacyMaxMinus10s(const DataStream<std::string>& lines, ParseFn parse,
                                              const SeedOptions& o) {
  GeneratorHooks<KeyedEvent> hooks;
  if (o.on_record) {
    hooks.on_event = [cb = o.on_record](const KeyedEvent& e, const WatermarkTrace& t) {
      cb(e.first, t);
    };
  }
  auto strategy = WatermarkStrategy<KeyedEvent>::for_generator([hooks] {
                    return std::make_unique<PeriodicMaxMinusDelay<KeyedEvent>>(
                        std::chrono::seconds(10), /*initial_max=*/0, hooks);
                  }).with_timestamp_assigner([](const KeyedEvent& e) { return e.second; });
  return lines.map([parse](const std::string& line) { return ValueOrThrow(parse(line)); })
      .name("Parse")
      .set_parallelism(1)
      .assign_timestamps_and_watermarks(MaybePerRecord(strategy, o))
      .set_parallelism(1);
}

// Document 001: "id,ts,vc" with the timestamp assigner ts * 1000.
inline DataStream<WaterSensor> StampWaterSensors(const DataStream<std::string>& lines,
                                                 WatermarkStrategy<WaterSensor> strategy) {
  return lines.map([](const std::string& line) { return ValueOrThrow(ParseWaterSensor(line)); })
      .name("Parse WaterSensor")
      .set_parallelism(1)
      .assign_timestamps_and_watermarks(
          strategy.with_timestamp_assigner([](const WaterSensor& s) { return s.ts * 1000; }))
      .set_parallelism(1);
}

inline auto SensorId() {
  return [](const WaterSensor& s) { return s.id; };
}

// S1 and S2: the times of a window's elements, sorted.
std::vector<Timestamp> SortedTimes(const std::vector<KeyedEvent>& input) {
  std::vector<Timestamp> times;
  times.reserve(input.size());
  for (const KeyedEvent& e : input) times.push_back(e.second);
  std::sort(times.begin(), times.end());
  return times;
}

// S3-S6: WaterSensor lines, forBoundedOutOfOrderness(2 s), keyed by id.
auto SensorsBy2sOutOfOrderness(const DataStream<std::string>& lines, const SeedOptions& o) {
  return StampWaterSensors(
             lines, MaybePerRecord(WatermarkStrategy<WaterSensor>::for_bounded_out_of_orderness(
                                       std::chrono::seconds(2)),
                                   o))
      .key_by(SensorId());
}

using FiringHook = std::function<void(const std::string&, const TimeWindow&, Timestamp)>;

inline void ReportFiring(const FiringHook& on_fire, const std::string& key,
                         const TimeWindow& window, WindowContext& ctx) {
  if (on_fire) on_fire(key, window, ctx.current_watermark());
}

// The documents' reduce(SumVc), written as reduce(SumVc, f) with f passing the
// reduced value on unchanged (same value, same timestamp, so the same results
// as the one-argument form) after reporting the firing to options.on_fire.
inline auto SumVcReporting(const SeedOptions& o) {
  return [on_fire = o.on_fire](const std::string& key, const TimeWindow& window,
                               const WaterSensor& reduced, WindowContext& ctx,
                               Collector<WaterSensor>& out) {
    ReportFiring(on_fire, key, window, ctx);
    out.collect(reduced);
  };
}

}  // namespace internal

// ---------------------------------------------------------------------------
// S1 (document 000): lines "key,epoch_ms"; hand-written periodic watermark
// max_ts - 10 s; tumbling 3 s windows; the window function prints
// "(key),count,first,last,window start,window end" with the elements' times
// sorted, every time as yyyy-MM-dd HH:mm:ss.SSS.  Section 4 of the document
// runs the same job with allowedLateness(2 s) and with sideOutputLateData.
SeedStreams<std::string, KeyedEvent> BuildS1(const DataStream<std::string>& lines,
                                             const SeedOptions& o) {
  DataStream<KeyedEvent> stamped = internal::StampLegacyMaxMinus10s(lines, ParseCommaEvent, o);
  const OutputTag<KeyedEvent> late_tag("late-data");
  auto windowed = stamped.key_by([](const KeyedEvent& e) { return e.first; })
                      .window(TumblingEventTimeWindows::of(std::chrono::seconds(3)))
                      .allowed_lateness(o.allowed_lateness);
  if (o.side_output_late_data) windowed = windowed.side_output_late_data(late_tag);
  const absl::TimeZone tz = o.tz;
  DataStream<std::string> results = windowed.template apply<std::string>(
      [tz, on_fire = o.on_fire](const std::string& key, const TimeWindow& window,
                                const std::vector<KeyedEvent>& input, WindowContext& ctx,
                                Collector<std::string>& out) {
        internal::ReportFiring(on_fire, key, window, ctx);
        const std::vector<Timestamp> times = internal::SortedTimes(input);
        out.collect(
            absl::StrCat(internal::TupleKey(key), ",", times.size(), ",",
                         FormatMillis(times.front(), tz), ",", FormatMillis(times.back(), tz), ",",
                         FormatMillis(window.start, tz), ",", FormatMillis(window.end, tz)));
      });
  SeedStreams<std::string, KeyedEvent> s{results, std::nullopt};
  if (o.side_output_late_data) s.late = results.get_side_output(late_tag);
  return s;
}

// The line document 000 prints for every record (its extractTimestamp).
std::string FormatS1Trace(const std::string& key, const WatermarkTrace& t,
                          const absl::TimeZone& tz) {
  return absl::StrCat("key:", key, ",eventtime:[", t.event_time, "|",
                      FormatMillis(t.event_time, tz), "],currentMaxTimestamp:[", t.max_timestamp,
                      "|", FormatMillis(t.max_timestamp, tz), "],watermark:[", t.watermark, "|",
                      FormatMillis(t.watermark, tz), "]");
}

// ---------------------------------------------------------------------------
// S2 (document 004): lines "key epoch_ms"; the same generator (max_ts - 10 s);
// tumbling 10 s windows; the window function prints the document's Chinese
// sentence with key, count, first and last element time, window start and
// end.
DataStream<std::string> BuildS2(const DataStream<std::string>& lines, const SeedOptions& o) {
  DataStream<KeyedEvent> stamped = internal::StampLegacyMaxMinus10s(lines, ParseSpaceEvent, o);
  const absl::TimeZone tz = o.tz;
  return stamped.key_by([](const KeyedEvent& e) { return e.first; })
      .window(TumblingEventTimeWindows::of(std::chrono::seconds(10)))
      .template apply<std::string>(
          [tz, on_fire = o.on_fire](const std::string& key, const TimeWindow& window,
                                    const std::vector<KeyedEvent>& input, WindowContext& ctx,
                                    Collector<std::string>& out) {
            internal::ReportFiring(on_fire, key, window, ctx);
            const std::vector<Timestamp> times = internal::SortedTimes(input);
            out.collect(absl::StrCat(
                "聚合数据的key为：", internal::TupleKey(key), ",窗口当中数据的条数为：",
                times.size(), ",窗口当中第一条数据为：", FormatMillis(times.front(), tz),
                ",窗口当中最后一条数据为：", FormatMillis(times.back(), tz), ",窗口起始时间为：",
                FormatMillis(window.start, tz), ",窗口结束时间为：", FormatMillis(window.end, tz),
                "！！！！！看到这个结果，就证明窗口已经运行了"));
          });
}

// The line document 004 prints for every record; the document's thread id is
// Java's Thread.getId(), here whatever id the caller passes.
std::string FormatS2Trace(const std::string& thread_id, const std::string& key,
                          const WatermarkTrace& t, const absl::TimeZone& tz) {
  return absl::StrCat("currentThreadId:", thread_id, ",", FormatS1Trace(key, t, tz));
}

// ---------------------------------------------------------------------------
// S3 (document 001, 3.1): WaterSensor lines; forBoundedOutOfOrderness(2 s);
// tumbling 5 s; reduce summing vc.
DataStream<WaterSensor> BuildS3(const DataStream<std::string>& lines, const SeedOptions& o) {
  return internal::SensorsBy2sOutOfOrderness(lines, o)
      .window(TumblingEventTimeWindows::of(std::chrono::seconds(5)))
      .reduce(SumVc, internal::SumVcReporting(o));
}

// S4 (document 001, 3.2): S3 with allowedLateness(2 s) and the late data on
// the side output "Side" (the document prints it with print("Side")).
SeedStreams<WaterSensor, WaterSensor> BuildS4(const DataStream<std::string>& lines,
                                              const SeedOptions& o) {
  const OutputTag<WaterSensor> side("Side");
  DataStream<WaterSensor> results =
      internal::SensorsBy2sOutOfOrderness(lines, o)
          .window(TumblingEventTimeWindows::of(std::chrono::seconds(5)))
          .allowed_lateness(std::chrono::seconds(2))
          .side_output_late_data(side)
          .reduce(SumVc, internal::SumVcReporting(o));
  return {results, results.get_side_output(side)};
}

// S5 (document 001, 3.3): sliding 6 s every 2 s, otherwise as S3.
DataStream<WaterSensor> BuildS5(const DataStream<std::string>& lines, const SeedOptions& o) {
  return internal::SensorsBy2sOutOfOrderness(lines, o)
      .window(SlidingEventTimeWindows::of(std::chrono::seconds(6), std::chrono::seconds(2)))
      .reduce(SumVc, internal::SumVcReporting(o));
}

// S6 (document 001, 3.4): session windows with a 5 s gap, otherwise as S3.
DataStream<WaterSensor> BuildS6(const DataStream<std::string>& lines, const SeedOptions& o) {
  return internal::SensorsBy2sOutOfOrderness(lines, o)
      .window(EventTimeSessionWindows::with_gap(std::chrono::seconds(5)))
      .reduce(SumVc, internal::SumVcReporting(o));
}

// S7 (document 001, 4.2): the hand-written punctuated generator (MyPunt,
// max_ts - 2 s on every record); tumbling 5 s; sum of vc.  kPeriodic runs the
// document's periodic twin (4.1, MyPeriod) instead, which needs
// per_record_watermarks to behave as typed input.
DataStream<WaterSensor> BuildS7(const DataStream<std::string>& lines, const SeedOptions& o,
                                S7Generator kind) {
  GeneratorHooks<WaterSensor> hooks;
  if (o.on_record) {
    hooks.on_event = [cb = o.on_record](const WaterSensor& s, const WatermarkTrace& t) {
      cb(s.id, t);
    };
  }
  hooks.on_periodic_emit = o.on_periodic_emit;
  WatermarkStrategy<WaterSensor> strategy;
  if (kind == S7Generator::kPunctuated) {
    strategy = WatermarkStrategy<WaterSensor>::for_generator([hooks] {
      return std::make_unique<PunctuatedMaxMinusDelay<WaterSensor>>(std::chrono::seconds(2), hooks);
    });
  } else {
    strategy = internal::MaybePerRecord(
        WatermarkStrategy<WaterSensor>::for_generator([hooks] {
          return std::make_unique<PeriodicMaxMinusDelay<WaterSensor>>(
              std::chrono::seconds(2), SaturatingAdd(kMinTimestamp, 2000 + 1), hooks);
        }),
        o);
  }
  return internal::StampWaterSensors(lines, strategy)
      .key_by(internal::SensorId())
      .window(TumblingEventTimeWindows::of(std::chrono::seconds(5)))
      .reduce(SumVc, internal::SumVcReporting(o));
}

std::string FormatS7PeriodicLine(Timestamp watermark) {
  return absl::StrCat("生成WaterMark", watermark);
}

// ---------------------------------------------------------------------------
// S8 (document 002): lines "sid,callType,yyyy-MM-dd HH:mm:ss[.SSS],duration"
// (blank lines skipped, times read in options.tz); only callType "success";
// forBoundedOutOfOrderness(0); key sid; tumbling 5 s; allowedLateness from the
// options (the document runs 0 and 2 s); the window function sums the
// durations and prints "window:[start--end]-<sid>--总时长：N" with whole-second
// times.
DataStream<std::string> BuildS8(const DataStream<std::string>& lines, const SeedOptions& o) {
  const absl::TimeZone tz = o.tz;
  auto stations =
      lines.filter([](const std::string& l) { return !absl::StripAsciiWhitespace(l).empty(); })
          .name("Skip blank lines")
          .set_parallelism(1)
          .map([tz](const std::string& l) { return ValueOrThrow(ParseStation(l, tz)); })
          .name("Parse Station")
          .set_parallelism(1)
          .filter([](const Station& s) { return s.call_type == "success"; })
          .name("callType == success")
          .set_parallelism(1);
  return stations
      .assign_timestamps_and_watermarks(internal::MaybePerRecord(
          WatermarkStrategy<Station>::for_bounded_out_of_orderness(std::chrono::seconds(0))
              .with_timestamp_assigner([](const Station& s) { return s.call_time; }),
          o))
      .set_parallelism(1)
      .key_by([](const Station& s) { return s.sid; })
      .window(TumblingEventTimeWindows::of(std::chrono::seconds(5)))
      .allowed_lateness(o.allowed_lateness)
      .template apply<std::string>([tz, on_fire = o.on_fire](
                                       const std::string& sid, const TimeWindow& window,
                                       const std::vector<Station>& input, WindowContext& ctx,
                                       Collector<std::string>& out) {
        internal::ReportFiring(on_fire, sid, window, ctx);
        int64_t sum = 0;
        for (const Station& s : input) sum += s.duration;
        out.collect(absl::StrCat("window:[", FormatSeconds(window.start, tz), "--",
                                 FormatSeconds(window.end, tz), "]-<", sid, ">--总时长：", sum));
      });
}

}  // namespace tidemark::seeds
