// tests/scenarios_test.cc
// (Longer than 600 lines: one file for the eight seed scenarios, so each document's expected output
// sits next to its job.)
//
// The seed documents' scenarios S1-S8 (../shared/seeds/SCENARIOS.md,
// docs/semantics.md 2.4, 6, 10), each run as the real multi-threaded
// pipeline with exactly the example programs' job code (examples/seed_jobs.h)
// on the documents' input (tests/data/*.txt), comparing the outputs exactly.
//
// Parallelism: the input is one ordered stream (one subtask parses and
// generates watermarks, as the documents' parallelism-1 jobs); the window
// operator and the sink run at parallelism 1, 2 and 4 (the test parameter).
// Every scenario has a single key, so one window subtask holds it and the
// others only see watermarks; per-key order is then the order of the results.
//
// Typing slowly: the documents type each record into `nc -lk`, so a periodic
// watermark is emitted between every two records.  Here the whole file arrives
// at once, so the jobs with a periodic generator (S1, S2: hand-written
// max_ts - 10 s; S3-S6, S8: forBoundedOutOfOrderness) run with
// SeedOptions::per_record_watermarks, i.e.
// WatermarkStrategy::with_periodic_emit_per_record(): the real periodic
// generator is asked for its watermark right after every record, instead of on
// the 200 ms timer.  S7's generator is punctuated (it emits on every record by
// itself) and runs unchanged, timer and all.  tests/scenario_socket_test.cc
// runs S1 once more with paced socket input and the real timer.
//
// Which record fired what: besides the printed results, each firing is checked
// with the window operator's watermark at that moment (SeedOptions::on_fire),
// which is the "watermark after it / fires" column of the documents' tables.
// A result fired by the end-of-input flush (W(MAX): the file ends, while the
// documents' sockets stay open) is marked "end"; those come after everything
// the documents show and are listed separately.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "examples/seed_jobs.h"
#include "tidemark/api/environment.h"

namespace tidemark::seeds {
namespace {

using ::testing::ElementsAreArray;
using namespace std::chrono_literals;

std::string DataPath(const std::string& name) {
  return (std::filesystem::path(TIDEMARK_TEST_DATA_DIR) / name).string();
}

absl::TimeZone Shanghai() {
  absl::StatusOr<absl::TimeZone> tz = LoadSeedTimeZone(kDefaultTimeZone);
  return tz.ok() ? *tz : absl::FixedTimeZone(8 * 60 * 60);
}

// Thread-safe list of lines written by hooks running on task threads.
class Log {
 public:
  void Add(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// "[start,end) at <watermark or end>" for a firing.
std::string Firing(Timestamp start, Timestamp end, Timestamp watermark) {
  return absl::StrCat("[", start, ",", end, ") at ",
                      watermark == kMaxWatermark ? std::string("end") : absl::StrCat(watermark));
}

// One expected result: the firing that produced it and what it printed.
struct Fired {
  Timestamp start;
  Timestamp end;
  Timestamp watermark;  // kMaxWatermark: the end-of-input flush
  std::string result;
};
constexpr Timestamp kEnd = kMaxWatermark;

std::vector<std::string> Describe(const std::vector<Fired>& fired) {
  std::vector<std::string> out;
  for (const Fired& f : fired) {
    out.push_back(absl::StrCat(Firing(f.start, f.end, f.watermark), ": ", f.result));
  }
  return out;
}

template <typename T>
std::vector<T> Concat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// One scenario run: an environment at the test's window parallelism, options
// with the hooks recording into logs, and the collected results.
class ScenarioTest : public ::testing::TestWithParam<int> {
 protected:
  ScenarioTest() {
    env_.set_parallelism(GetParam());
    options_.tz = Shanghai();
    options_.per_record_watermarks = true;
    options_.on_fire = [fires = fires_](const std::string&, const TimeWindow& w, Timestamp wm) {
      fires->Add(Firing(w.start, w.end, wm));
    };
  }

  DataStream<std::string> Lines(const std::string& file) {
    return env_.read_text_file(DataPath(file)).set_parallelism(1);
  }

  JobResult Run() {
    JobResult r = env_.execute("scenario");
    EXPECT_TRUE(r.ok()) << r.status;
    return r;
  }

  // "firing: result" for every result, pairing the i-th firing with the i-th
  // result (each firing of these jobs emits exactly one result).  Also checks
  // that one subtask produced them all: the key's order is the list's order.
  template <typename T, typename Fmt>
  std::vector<std::string> Results(const CollectedResults<T>& collected, Fmt fmt) {
    std::vector<std::string> fires = fires_->lines();
    std::vector<std::string> out;
    const auto items = collected.items();
    EXPECT_EQ(items.size(), fires.size()) << "one result per firing";
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(items[i].subtask, items[0].subtask) << "a single key, a single window subtask";
      out.push_back(
          absl::StrCat(i < fires.size() ? fires[i] : std::string("?"), ": ", fmt(items[i].value)));
    }
    return out;
  }
  std::vector<std::string> Results(const CollectedResults<std::string>& collected) {
    return Results(collected, [](const std::string& s) { return s; });
  }
  std::vector<std::string> Results(const CollectedResults<WaterSensor>& collected) {
    return Results(collected, [](const WaterSensor& s) { return ToString(s); });
  }

  StreamExecutionEnvironment env_;
  SeedOptions options_;
  std::shared_ptr<Log> fires_ = std::make_shared<Log>();
};

INSTANTIATE_TEST_SUITE_P(WindowParallelism, ScenarioTest, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& p) {
                           return absl::StrCat("p", p.param);
                         });

// ---------------------------------------------------------------------------
// S1: document 000.

// 2018-10-01 10:11:xx.000 in UTC+8, as epoch ms.
constexpr Timestamp S1(int second) { return 1538359860000 + second * 1000; }

std::string S1Line(int count, int first, int last, int start, int end) {
  auto t = [](int s) { return absl::StrCat("2018-10-01 10:11:", s, ".000"); };
  return absl::StrCat("(0001),", count, ",", t(first), ",", t(last), ",", t(start), ",", t(end));
}

TEST_P(ScenarioTest, S1TumblingWithHandWrittenWatermark) {
  auto trace = std::make_shared<Log>();
  const absl::TimeZone tz = options_.tz;
  options_.on_record = [trace, tz](const std::string& key, const WatermarkTrace& t) {
    trace->Add(FormatS1Trace(key, t, tz));
  };
  auto results = BuildS1(Lines("s1.txt"), options_).results.collect();
  Run();

  // The document's tables: event time, current max timestamp, watermark.
  const std::vector<std::vector<int>> table = {
      {22, 22, 12}, {26, 26, 16}, {32, 32, 22}, {33, 33, 23}, {34, 34, 24},
      {36, 36, 26}, {37, 37, 27}, {39, 39, 29}, {31, 39, 29}, {43, 43, 33}};
  std::vector<std::string> expected_trace;
  for (const auto& row : table) {
    expected_trace.push_back(
        FormatS1Trace("0001", WatermarkTrace{S1(row[0]), S1(row[1]), S1(row[2])}, tz));
  }
  // The line the document's extractTimestamp prints, spelled out once.
  ASSERT_EQ(expected_trace[0],
            "key:0001,eventtime:[1538359882000|2018-10-01 10:11:22.000],"
            "currentMaxTimestamp:[1538359882000|2018-10-01 10:11:22.000],"
            "watermark:[1538359872000|2018-10-01 10:11:12.000]");
  EXPECT_THAT(trace->lines(), ElementsAreArray(expected_trace));

  const std::vector<Fired> document = {
      // 10:11:34 moves the watermark to 10:11:24 and fires [10:11:21, 10:11:24).
      {S1(21), S1(24), S1(24), S1Line(1, 22, 22, 21, 24)},
      // 10:11:37 -> watermark 10:11:27 fires [10:11:24, 10:11:27).
      {S1(24), S1(27), S1(27), S1Line(1, 26, 26, 24, 27)},
      // 10:11:43 -> watermark 10:11:33 fires [10:11:30, 10:11:33) with 10:11:31
      // (which arrived late, at watermark 10:11:29) and 10:11:32.
      {S1(30), S1(33), S1(33), S1Line(2, 31, 32, 30, 33)},
  };
  const std::vector<Fired> end_of_input = {
      {S1(33), S1(36), kEnd, S1Line(2, 33, 34, 33, 36)},
      {S1(36), S1(39), kEnd, S1Line(2, 36, 37, 36, 39)},
      {S1(39), S1(42), kEnd, S1Line(1, 39, 39, 39, 42)},
      {S1(42), S1(45), kEnd, S1Line(1, 43, 43, 42, 45)},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

// Section 4.1: after the watermark reached 10:11:33, records whose window has
// fired are dropped.  (The document shows its inputs only as screenshots; these
// are the reconstructed ones of docs/semantics.md 10.)
TEST_P(ScenarioTest, S1LateDataIsDroppedByDefault) {
  auto results = BuildS1(Lines("s1_late.txt"), options_).results.collect();
  JobResult r = Run();
  const std::vector<Fired> expected = {
      {S1(30), S1(33), S1(33), S1Line(1, 30, 30, 30, 33)},
      // 10:11:30, :31, :32 arrive at watermark 10:11:33: dropped.
      {S1(42), S1(45), kEnd, S1Line(1, 43, 43, 42, 45)},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(expected)));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 3);
}

// Section 4.2: allowedLateness(2 s): at watermark 10:11:33 and 10:11:34 every
// late record re-fires [10:11:30, 10:11:33) with all its elements; at 10:11:35
// the window is gone and they are dropped.
TEST_P(ScenarioTest, S1AllowedLatenessRefiresUntilCleanup) {
  options_.allowed_lateness = 2s;
  auto results = BuildS1(Lines("s1_lateness.txt"), options_).results.collect();
  JobResult r = Run();
  const std::vector<Fired> document = {
      {S1(30), S1(33), S1(33), S1Line(1, 30, 30, 30, 33)},
      {S1(30), S1(33), S1(33), S1Line(2, 30, 30, 30, 33)},
      {S1(30), S1(33), S1(33), S1Line(3, 30, 31, 30, 33)},
      {S1(30), S1(33), S1(33), S1Line(4, 30, 32, 30, 33)},
      // 10:11:44 -> watermark 10:11:34 < 10:11:32.999 + 2 s: still re-fires.
      {S1(30), S1(33), S1(34), S1Line(5, 30, 32, 30, 33)},
      {S1(30), S1(33), S1(34), S1Line(6, 30, 32, 30, 33)},
      {S1(30), S1(33), S1(34), S1Line(7, 30, 32, 30, 33)},
      // 10:11:45 -> watermark 10:11:35: cleaned up; the last three dropped.
  };
  const std::vector<Fired> end_of_input = {
      {S1(42), S1(45), kEnd, S1Line(2, 43, 44, 42, 45)},
      {S1(45), S1(48), kEnd, S1Line(1, 45, 45, 45, 48)},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 3);
}

// Section 4.3: sideOutputLateData: the late records go to the side output,
// unchanged (the document prints them with print(): "(0001,1538359890000)").
TEST_P(ScenarioTest, S1SideOutputLateData) {
  options_.side_output_late_data = true;
  SeedStreams<std::string, KeyedEvent> job = BuildS1(Lines("s1_late.txt"), options_);
  auto results = job.results.collect();
  auto late = job.late->collect();
  JobResult r = Run();
  const std::vector<Fired> expected = {
      {S1(30), S1(33), S1(33), S1Line(1, 30, 30, 30, 33)},
      {S1(42), S1(45), kEnd, S1Line(1, 43, 43, 42, 45)},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(expected)));
  std::vector<std::string> late_lines;
  for (const KeyedEvent& e : late->values()) late_lines.push_back(tidemark::internal::Format(e));
  EXPECT_THAT(late_lines, ElementsAreArray({"(0001,1538359890000)", "(0001,1538359891000)",
                                            "(0001,1538359892000)"}));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 0);
}

// ---------------------------------------------------------------------------
// S2: document 004, with the firing docs/semantics.md 10 adds
// ([10:11:40, 10:11:50) at 10:12:28).

// 2019-10-01 10:hh:mm.000 in UTC+8 (10:11:22 = 1569895882000).
constexpr Timestamp S2(int minute, int second) {
  return 1569895882000 + ((minute - 11) * 60 + second - 22) * 1000;
}

std::string S2Line(int count, const char* first, const char* last, const char* start,
                   const char* end) {
  auto t = [](const char* hms) { return absl::StrCat("2019-10-01 ", hms, ".000"); };
  return absl::StrCat("聚合数据的key为：(0001),窗口当中数据的条数为：", count,
                      ",窗口当中第一条数据为：", t(first), ",窗口当中最后一条数据为：", t(last),
                      ",窗口起始时间为：", t(start), ",窗口结束时间为：", t(end),
                      "！！！！！看到这个结果，就证明窗口已经运行了");
}

TEST_P(ScenarioTest, S2TumblingTenSeconds) {
  auto trace = std::make_shared<Log>();
  options_.on_record = [trace](const std::string&, const WatermarkTrace& t) {
    trace->Add(absl::StrCat(t.event_time, " ", t.watermark));
  };
  auto results = BuildS2(Lines("s2.txt"), options_).collect();
  JobResult r = Run();

  // The document's list: each record's event time and watermark.
  const std::vector<std::vector<int>> table = {
      {11, 22, 11, 12}, {11, 25, 11, 15}, {11, 28, 11, 18}, {11, 30, 11, 20}, {11, 31, 11, 21},
      {11, 35, 11, 25}, {11, 38, 11, 28}, {11, 40, 11, 30}, {11, 51, 11, 41}, {12, 28, 12, 18},
      {12, 25, 12, 18}, {12, 27, 12, 18}, {12, 30, 12, 20}, {12, 40, 12, 30}, {12, 29, 12, 30}};
  std::vector<std::string> expected_trace;
  for (const auto& row : table) {
    expected_trace.push_back(absl::StrCat(S2(row[0], row[1]), " ", S2(row[2], row[3])));
  }
  EXPECT_THAT(trace->lines(), ElementsAreArray(expected_trace));
  // The document's trace line, with the thread id its caller supplies.
  EXPECT_EQ(
      FormatS2Trace("57", "0001", WatermarkTrace{S2(11, 22), S2(11, 22), S2(11, 12)}, options_.tz),
      "currentThreadId:57,key:0001,eventtime:[1569895882000|2019-10-01 10:11:22.000],"
      "currentMaxTimestamp:[1569895882000|2019-10-01 10:11:22.000],"
      "watermark:[1569895872000|2019-10-01 10:11:12.000]");

  const std::vector<Fired> document = {
      {S2(11, 20), S2(11, 30), S2(11, 30),
       S2Line(3, "10:11:22", "10:11:28", "10:11:20", "10:11:30")},
      {S2(11, 30), S2(11, 40), S2(11, 41),
       S2Line(4, "10:11:30", "10:11:38", "10:11:30", "10:11:40")},
      // 10:12:28 (watermark 10:12:18) fires both windows still open.
      {S2(11, 40), S2(11, 50), S2(12, 18),
       S2Line(1, "10:11:40", "10:11:40", "10:11:40", "10:11:50")},
      {S2(11, 50), S2(12, 0), S2(12, 18),
       S2Line(1, "10:11:51", "10:11:51", "10:11:50", "10:12:00")},
      {S2(12, 20), S2(12, 30), S2(12, 30),
       S2Line(3, "10:12:25", "10:12:28", "10:12:20", "10:12:30")},
      // 10:12:29 at watermark 10:12:30: too late, dropped.
  };
  const std::vector<Fired> end_of_input = {
      {S2(12, 30), S2(12, 40), kEnd, S2Line(1, "10:12:30", "10:12:30", "10:12:30", "10:12:40")},
      {S2(12, 40), S2(12, 50), kEnd, S2Line(1, "10:12:40", "10:12:40", "10:12:40", "10:12:50")},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 1);
}

// ---------------------------------------------------------------------------
// S3-S7: document 001.  Times are 1577844000 + s seconds.

constexpr Timestamp Ws(int s) { return (1577844000 + s) * 1000LL; }
std::string Sensor(int ts_offset, int vc) {
  return ToString(WaterSensor{"ws_001", 1577844000 + ts_offset, vc});
}

TEST_P(ScenarioTest, S3TumblingSumInOrder) {
  auto results = BuildS3(Lines("s3_in_order.txt"), options_).collect();
  Run();
  const std::vector<Fired> document = {
      // 009 moves the watermark to 006.999 >= 004.999.
      {Ws(0), Ws(5), Ws(7) - 1, Sensor(1, 3)},
  };
  const std::vector<Fired> end_of_input = {{Ws(5), Ws(10), kEnd, Sensor(5, 3)}};
  ASSERT_EQ(Sensor(1, 3), "WaterSensor{id='ws_001', ts=1577844001, vc=3}");
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

TEST_P(ScenarioTest, S3TumblingSumOutOfOrder) {
  auto results = BuildS3(Lines("s3_out_of_order.txt"), options_).collect();
  Run();
  const std::vector<Fired> document = {
      // 001 and 002 arrive after 005 (watermark 002.999): still in [000, 005).
      {Ws(0), Ws(5), Ws(7) - 1, Sensor(1, 5)},
  };
  const std::vector<Fired> end_of_input = {{Ws(5), Ws(10), kEnd, Sensor(5, 2)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

TEST_P(ScenarioTest, S4AllowedLatenessAndSideOutput) {
  SeedStreams<WaterSensor, WaterSensor> job = BuildS4(Lines("s4.txt"), options_);
  auto results = job.results.collect();
  auto side = job.late->collect();
  JobResult r = Run();
  const std::vector<Fired> document = {
      // 008: watermark 005.999 fires [000, 005).
      {Ws(0), Ws(5), Ws(6) - 1, Sensor(1, 3)},
      // Each late 001, 002, 003 re-fires it with everything so far.
      {Ws(0), Ws(5), Ws(6) - 1, Sensor(1, 4)},
      {Ws(0), Ws(5), Ws(6) - 1, Sensor(1, 5)},
      {Ws(0), Ws(5), Ws(6) - 1, Sensor(1, 6)},
      // 009: watermark 006.999 = 004.999 + 2 s purges it; 001, 002 go to Side.
  };
  const std::vector<Fired> end_of_input = {{Ws(5), Ws(10), kEnd, Sensor(8, 2)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
  std::vector<std::string> side_lines;
  for (const WaterSensor& s : side->values()) side_lines.push_back(ToString(s));
  EXPECT_THAT(side_lines, ElementsAreArray({Sensor(1, 1), Sensor(2, 1)}));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 0);
}

TEST_P(ScenarioTest, S5SlidingSum) {
  auto results = BuildS5(Lines("s5.txt"), options_).collect();
  Run();
  const std::vector<Fired> document = {
      // 008 (watermark 005.999) fires the three windows holding 001.
      {Ws(-4), Ws(2), Ws(6) - 1, Sensor(1, 1)},
      {Ws(-2), Ws(4), Ws(6) - 1, Sensor(1, 1)},
      {Ws(0), Ws(6), Ws(6) - 1, Sensor(1, 1)},
      // 012 (watermark 009.999) fires [004, 010).
      {Ws(4), Ws(10), Ws(10) - 1, Sensor(8, 1)},
  };
  const std::vector<Fired> end_of_input = {
      {Ws(6), Ws(12), kEnd, Sensor(8, 1)},
      {Ws(8), Ws(14), kEnd, Sensor(8, 2)},
      {Ws(10), Ws(16), kEnd, Sensor(12, 1)},
      {Ws(12), Ws(18), kEnd, Sensor(12, 1)},
  };
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

TEST_P(ScenarioTest, S6SessionSum) {
  auto results = BuildS6(Lines("s6.txt"), options_).collect();
  Run();
  const std::vector<Fired> document = {
      // 002 and 007 merge into [002, 012); 014 (watermark 011.999) fires it.
      {Ws(2), Ws(12), Ws(12) - 1, Sensor(2, 2)},
  };
  const std::vector<Fired> end_of_input = {{Ws(14), Ws(19), kEnd, Sensor(14, 1)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

// The punctuated generator emits on every record by itself: no per-record
// option, and the auto-watermark timer runs as usual (it asks a punctuated
// generator for nothing).
TEST_P(ScenarioTest, S7PunctuatedWatermarks) {
  options_.per_record_watermarks = false;
  auto trace = std::make_shared<Log>();
  options_.on_record = [trace](const std::string&, const WatermarkTrace& t) {
    trace->Add(absl::StrCat(t.watermark));
  };
  auto results = BuildS7(Lines("s7.txt"), options_).collect();
  Run();
  // max_ts - 2 s, no "- 1": 999.000, 000.000, 010.000.
  EXPECT_THAT(trace->lines(),
              ElementsAreArray({absl::StrCat(Ws(-1)), absl::StrCat(Ws(0)), absl::StrCat(Ws(10))}));
  const std::vector<Fired> document = {{Ws(0), Ws(5), Ws(10), Sensor(1, 2)}};
  const std::vector<Fired> end_of_input = {{Ws(10), Ws(15), kEnd, Sensor(12, 1)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

// Document 001, 4.1: the periodic twin of the same generator, polled after
// every record.
TEST_P(ScenarioTest, S7PeriodicTwin) {
  auto results = BuildS7(Lines("s7.txt"), options_, S7Generator::kPeriodic).collect();
  Run();
  const std::vector<Fired> document = {{Ws(0), Ws(5), Ws(10), Sensor(1, 2)}};
  const std::vector<Fired> end_of_input = {{Ws(10), Ws(15), kEnd, Sensor(12, 1)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
}

// ---------------------------------------------------------------------------
// S8: document 002.  2030-12-01 10:10:00 in UTC+8 is 1922321400000.

constexpr Timestamp Call(int second, int millis = 0) {
  return 1922321400000 + second * 1000 + millis;
}
std::string S8Line(int start, int end, int total) {
  auto t = [](int s) { return absl::StrCat("2030-12-01 10:10:", s < 10 ? "0" : "", s); };
  return absl::StrCat("window:[", t(start), "--", t(end), "]-<sid_1>--总时长：", total);
}

TEST_P(ScenarioTest, S8WithoutAllowedLateness) {
  auto results = BuildS8(Lines("s8_lateness0.txt"), options_).collect();
  JobResult r = Run();
  const std::vector<Fired> document = {
      // 05 moves the watermark to 04.999.
      {Call(0), Call(5), Call(5) - 1, S8Line(0, 5, 4)},
      // 04.989 is dropped; 10 moves the watermark to 09.999.
      {Call(5), Call(10), Call(10) - 1, S8Line(5, 10, 2)},
  };
  const std::vector<Fired> end_of_input = {{Call(10), Call(15), kEnd, S8Line(10, 15, 1)}};
  ASSERT_EQ(S8Line(0, 5, 4),
            "window:[2030-12-01 10:10:00--2030-12-01 10:10:05]-<sid_1>--总时长：4");
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 1);
}

TEST_P(ScenarioTest, S8WithAllowedLateness) {
  options_.allowed_lateness = 2s;
  auto results = BuildS8(Lines("s8_lateness2.txt"), options_).collect();
  JobResult r = Run();
  const std::vector<Fired> document = {
      {Call(0), Call(5), Call(5) - 1, S8Line(0, 5, 4)},
      // 04.456 and 04.888 re-fire the window.
      {Call(0), Call(5), Call(5) - 1, S8Line(0, 5, 5)},
      {Call(0), Call(5), Call(5) - 1, S8Line(0, 5, 6)},
      // 07 moves the watermark to 06.999 = 04.999 + 2 s: purged; 04.989 is
      // dropped; 10 fires [05, 10) with 05 and 07.
      {Call(5), Call(10), Call(10) - 1, S8Line(5, 10, 2)},
  };
  const std::vector<Fired> end_of_input = {{Call(10), Call(15), kEnd, S8Line(10, 15, 1)}};
  EXPECT_THAT(Results(*results), ElementsAreArray(Describe(Concat(document, end_of_input))));
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 1);
}

// Only callType "success" counts, and blank lines are skipped (the document's
// two filters).
TEST(ScenarioS8, FiltersCallTypeAndBlankLines) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  SeedOptions o;
  o.tz = Shanghai();
  o.per_record_watermarks = true;
  auto results = BuildS8(env.from_collection<std::string>({
                             "sid_1,success,2030-12-01 10:10:01,1",
                             "   ",
                             "sid_1,fail,2030-12-01 10:10:02,100",
                             "sid_1,success,2030-12-01 10:10:03,2",
                         }),
                         o)
                     .collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_THAT(results->values(), ElementsAreArray({S8Line(0, 5, 3)}));
}

// A malformed line fails the job with a message quoting it (as the
// documents' parsers throw).
TEST(ScenarioS1, MalformedLineFailsTheJob) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  SeedOptions o;
  o.per_record_watermarks = true;
  BuildS1(env.from_collection<std::string>({"0001,1538359882000", "0001;oops"}), o)
      .results.collect();
  JobResult r = env.execute();
  EXPECT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status.message()), ::testing::HasSubstr("0001;oops"));
}

// ---------------------------------------------------------------------------
// The pieces of examples/seed_common.h.

class RecordingOutput final : public WatermarkOutput {
 public:
  void EmitWatermark(Timestamp w) override { emitted.push_back(w); }
  void MarkIdle() override {}
  void MarkActive() override {}
  std::vector<Timestamp> emitted;
};

TEST(SeedGenerators, LegacyPeriodicStartsAtZeroAndHasNoMinusOne) {
  PeriodicMaxMinusDelay<int> g(10s, /*initial_max=*/0);
  RecordingOutput out;
  g.OnPeriodicEmit(out);  // before any record: 0 - 10 s
  g.OnEvent(0, 1538359882000, out);
  g.OnPeriodicEmit(out);
  g.OnEvent(0, 1538359876000, out);  // older: the maximum stays
  g.OnPeriodicEmit(out);
  EXPECT_THAT(out.emitted, ElementsAreArray({-10000LL, 1538359872000LL, 1538359872000LL}));
}

TEST(SeedGenerators, PunctuatedEmitsOnEveryEventOnly) {
  PunctuatedMaxMinusDelay<int> g(2s);
  RecordingOutput out;
  g.OnPeriodicEmit(out);
  EXPECT_TRUE(out.emitted.empty());
  g.OnEvent(0, 1577844001000, out);
  g.OnEvent(0, 1577844000000, out);
  g.OnEvent(0, 1577844012000, out);
  EXPECT_THAT(out.emitted, ElementsAreArray({1577843999000LL, 1577843999000LL, 1577844010000LL}));
}

TEST(SeedGenerators, DocumentOnePeriodicStartsAtMinPlusDelayPlusOne) {
  PeriodicMaxMinusDelay<int> g(2s, SaturatingAdd(kMinTimestamp, 2001));
  RecordingOutput out;
  g.OnPeriodicEmit(out);
  EXPECT_THAT(out.emitted, ElementsAreArray({kMinTimestamp + 1}));
}

TEST(SeedFormat, TimesInTheZoneGiven) {
  const absl::TimeZone tz = Shanghai();
  EXPECT_EQ(FormatMillis(1538359882000, tz), "2018-10-01 10:11:22.000");
  EXPECT_EQ(FormatMillis(1538359872123, tz), "2018-10-01 10:11:12.123");
  EXPECT_EQ(FormatSeconds(1922321404989, tz), "2030-12-01 10:10:04");
  EXPECT_EQ(FormatMillis(1538359882000, absl::UTCTimeZone()), "2018-10-01 02:11:22.000");
  EXPECT_EQ(FormatMillis(-10000, absl::UTCTimeZone()), "1969-12-31 23:59:50.000");
}

TEST(SeedFormat, TimeZoneFallsBackToFixedUtc8OnlyForTheDefault) {
  std::string note;
  absl::StatusOr<absl::TimeZone> tz = LoadSeedTimeZone(kDefaultTimeZone, &note);
  ASSERT_TRUE(tz.ok());
  EXPECT_EQ(FormatMillis(1538359882000, *tz), "2018-10-01 10:11:22.000");
  EXPECT_FALSE(LoadSeedTimeZone("No/Such_Zone").ok());
}

TEST(SeedParse, Lines) {
  const absl::TimeZone tz = Shanghai();
  EXPECT_EQ(*ParseCommaEvent("0001,1538359882000"), KeyedEvent("0001", 1538359882000));
  EXPECT_EQ(*ParseSpaceEvent("0001 1569895882000"), KeyedEvent("0001", 1569895882000));
  EXPECT_FALSE(ParseCommaEvent("0001 1538359882000").ok());
  EXPECT_FALSE(ParseSpaceEvent("0001,1569895882000").ok());
  EXPECT_EQ(*ParseWaterSensor("ws_001,1577844001,1"), (WaterSensor{"ws_001", 1577844001, 1}));
  EXPECT_FALSE(ParseWaterSensor("ws_001,1577844001").ok());
  EXPECT_EQ(*ParseStation("sid_1,success,2030-12-01 10:10:04.989,1", tz),
            (Station{"sid_1", "success", Call(4, 989), 1}));
  EXPECT_EQ(*ParseStation(" sid_1,success,2030-12-01 10:10:04,7 ", tz),
            (Station{"sid_1", "success", Call(4), 7}));
  EXPECT_FALSE(ParseStation("sid_1,success,2030-12-01T10:10:04,1", tz).ok());
  EXPECT_EQ(ParseStation("sid_1,success,2030-12-01 10:10:00,1", absl::UTCTimeZone())->call_time,
            1922350200000);
}

}  // namespace
}  // namespace tidemark::seeds
