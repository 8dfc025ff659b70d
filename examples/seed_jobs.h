// examples/seed_jobs.h
//
// The jobs of the seed documents (SCENARIOS.md S1-S8), written once in
// tidemark's API and shared by the example programs (examples/sN_*.cc: lines
// from a socket or a file, results printed) and the tests
// (tests/scenarios_test.cc: lines from tests/data, results collected).  So the
// tests exercise exactly the examples' job code.
//
// Every BuildSn(lines, options) takes the input lines and returns the job's
// result stream(s); the caller adds sinks and executes.  `lines` must be one
// ordered stream (parallelism 1: a socket, or a file read by one subtask), as
// in the documents: parsing and watermark generation run in one subtask, so
// the records are seen in the order they were typed.  Everything after the
// key_by (the window operator and what the caller attaches) runs at the
// environment's parallelism.
//
// Typing slowly.  In the documents a person types each line into `nc -lk`, so
// a periodic watermark (every 200 ms; 100 ms in old Flink) is emitted between
// every two records.  Jobs with a periodic generator therefore take
// SeedOptions::per_record_watermarks: true asks the periodic generator for a
// watermark right after every record
// (WatermarkStrategy::with_periodic_emit_per_record), which reproduces that
// when the input arrives all at once (a file, a test); false leaves emission to
// the auto-watermark timer, which is right for a person at a socket.
//
// End of input.  The documents' sockets never close, so windows still open at
// the end never fire there.  When tidemark's input ends (a file, or the socket
// peer closing), W(MAX) fires every remaining window, as Flink does; those
// results come after everything the documents show.
#ifndef TM_EXAMPLES_SEED_JOBS_H_
#define TM_EXAMPLES_SEED_JOBS_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "examples/seed_common.h"
#include "tidemark/api/environment.h"
#include "tidemark/operators/window/time_window.h"

namespace tidemark::seeds {

struct SeedOptions {
  // Zone of the printed wall-clock times (and of S8's input times).  The
  // documents' JVMs ran in UTC+8.
  absl::TimeZone tz = absl::FixedTimeZone(8 * 60 * 60);
  // See "Typing slowly" above.
  bool per_record_watermarks = false;
  // S1 and S8: the documents run the same job with allowedLateness(2 s) and,
  // S1 only, with sideOutputLateData.
  Duration allowed_lateness{0};
  bool side_output_late_data = false;
  // Called by the watermark generator for every record, on its subtask's
  // thread, before the record moves on (the documents print these values from
  // their timestamp extractors).  Jobs with the built-in generator (S3-S6, S8)
  // do not call it.
  std::function<void(const std::string& key, const WatermarkTrace&)> on_record;
  // Called on every periodic emission of S7's periodic generator (document 001,
  // 4.1 prints "生成WaterMark<w>").
  std::function<void(Timestamp watermark)> on_periodic_emit;
  // Called on every window firing, on the window subtask's thread, with the
  // key, the window and the window operator's current watermark (kMaxWatermark
  // for the end-of-input flush), just before the result is emitted.  Tests use
  // it to check which record's watermark fired which window.
  std::function<void(const std::string& key, const TimeWindow& window, Timestamp watermark)>
      on_fire;
};

// A result stream and, when the job has one, its late-data side output.
template <typename Out, typename Late>
struct SeedStreams {
  DataStream<Out> results;
  std::optional<DataStream<Late>> late;
};

// The jobs (examples/seed_jobs.cc, whose comments give each document's
// details: compiled once, not in every program that includes this header).

// S1 (document 000): lines "key,epoch_ms"; the hand-written periodic watermark
// max_ts - 10 s; tumbling 3 s; the window prints "(key),count,first,last,
// start,end".  `late` is set when options.side_output_late_data is.
SeedStreams<std::string, KeyedEvent> BuildS1(const DataStream<std::string>& lines,
                                             const SeedOptions& o);
// The line document 000 prints for every record (its extractTimestamp).
std::string FormatS1Trace(const std::string& key, const WatermarkTrace& t,
                          const absl::TimeZone& tz);
// S2 (document 004): lines "key epoch_ms"; the same generator; tumbling 10 s;
// the window prints the document's Chinese sentence.
DataStream<std::string> BuildS2(const DataStream<std::string>& lines, const SeedOptions& o);
// The line document 004 prints for every record; the document's thread id is
// Java's Thread.getId(), here whatever id the caller passes.
std::string FormatS2Trace(const std::string& thread_id, const std::string& key,
                          const WatermarkTrace& t, const absl::TimeZone& tz);
// S3 (document 001, 3.1): WaterSensor lines; forBoundedOutOfOrderness(2 s);
// tumbling 5 s; reduce summing vc.
DataStream<WaterSensor> BuildS3(const DataStream<std::string>& lines, const SeedOptions& o);
// S4 (document 001, 3.2): S3 with allowedLateness(2 s) and the late data on
// the side output "Side" (`late`).
SeedStreams<WaterSensor, WaterSensor> BuildS4(const DataStream<std::string>& lines,
                                              const SeedOptions& o);
// S5 (document 001, 3.3): sliding 6 s every 2 s, otherwise as S3.
DataStream<WaterSensor> BuildS5(const DataStream<std::string>& lines, const SeedOptions& o);
// S6 (document 001, 3.4): session windows with a 5 s gap, otherwise as S3.
DataStream<WaterSensor> BuildS6(const DataStream<std::string>& lines, const SeedOptions& o);
// S7 (document 001, 4.2): the hand-written punctuated generator (max_ts - 2 s
// on every record); tumbling 5 s; sum of vc.  kPeriodic runs the document's
// periodic twin (4.1) instead, which needs per_record_watermarks to behave as
// typed input.
enum class S7Generator { kPunctuated, kPeriodic };
DataStream<WaterSensor> BuildS7(const DataStream<std::string>& lines, const SeedOptions& o,
                                S7Generator kind = S7Generator::kPunctuated);
// What document 001's generators print: MyPunt/MyPeriod on every record, and
// MyPeriod on every periodic emission.
inline constexpr char kS7EventLine[] = "取数据中最大的时间戳";
std::string FormatS7PeriodicLine(Timestamp watermark);
// S8 (document 002): lines "sid,callType,yyyy-MM-dd HH:mm:ss[.SSS],duration"
// in options.tz; only callType "success"; forBoundedOutOfOrderness(0); key
// sid; tumbling 5 s; allowedLateness from the options; the window prints
// "window:[start--end]-<sid>--总时长：N".
DataStream<std::string> BuildS8(const DataStream<std::string>& lines, const SeedOptions& o);

}  // namespace tidemark::seeds

#endif  // TM_EXAMPLES_SEED_JOBS_H_
