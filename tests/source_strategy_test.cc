// Every built-in source takes its watermark strategy in Flink's
// from_source(source, strategy, name) form (issue 23, item 4): the assigner
// runs in the source's subtasks.  Behind a rebalance the same strategy sees
// the records of several subtasks, in another order, and gives other late
// records; explain() and a one-time warning on stderr say when an assigner
// sits behind a non-forward edge.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::TempDir;

struct Ev {
  std::string key;
  int64_t ts = 0;
  int64_t v = 0;
};

constexpr int64_t kWindow = 1000;

WatermarkStrategy<Ev> Strategy(int64_t bound_ms) {
  return WatermarkStrategy<Ev>::for_bounded_out_of_orderness(Duration(bound_ms))
      .with_timestamp_assigner([](const Ev& e, Timestamp) { return e.ts; })
      .with_periodic_emit_per_record();
}

// What a job computed: the sum per (key, window start), and the late records'
// timestamps, sorted.
struct Outcome {
  std::map<std::pair<std::string, int64_t>, int64_t> sums;
  std::vector<int64_t> late;
};

// The sequential reference: one generator over the records in the order the
// source reads them (bounded out-of-orderness: watermark = max ts - bound -
// 1 after each record); a record whose window's last millisecond is at or
// below the watermark is late (no allowed lateness).
Outcome Reference(const std::vector<Ev>& in, int64_t bound_ms) {
  Outcome o;
  int64_t wm = std::numeric_limits<int64_t>::min();
  int64_t max_ts = std::numeric_limits<int64_t>::min();
  for (const Ev& e : in) {
    const int64_t start = e.ts - ((e.ts % kWindow) + kWindow) % kWindow;
    if (start + kWindow - 1 <= wm) {
      o.late.push_back(e.ts);
    } else {
      o.sums[{e.key, start}] += e.v;
    }
    max_ts = std::max(max_ts, e.ts);
    wm = std::max(wm, max_ts - bound_ms - 1);
  }
  std::sort(o.late.begin(), o.late.end());
  return o;
}

// Windows of kWindow over `stamped` at parallelism 2, with the late side output.
Outcome RunJob(StreamExecutionEnvironment& env, DataStream<Ev> stamped) {
  OutputTag<Ev> late("late");
  auto sums =
      stamped.key_by([](const Ev& e) { return e.key; })
          .window(TumblingEventTimeWindows::of(Duration(kWindow)))
          .side_output_late_data(late)
          .process([](const std::string& key, const TimeWindow& w, const std::vector<Ev>& evs,
                      WindowContext&, Collector<std::tuple<std::string, int64_t, int64_t>>& out) {
            int64_t sum = 0;
            for (const Ev& e : evs) sum += e.v;
            out.collect({key, w.start, sum});
          });
  auto got = sums.collect();
  auto late_got = sums.get_side_output(late).collect();
  JobResult r = env.execute("source strategy");
  EXPECT_TRUE(r.ok()) << r.status;
  Outcome o;
  for (const auto& item : got->items()) {
    const auto& [key, start, sum] = item.value;
    o.sums[{key, start}] += sum;
  }
  for (const auto& item : late_got->items()) o.late.push_back(item.value.ts);
  std::sort(o.late.begin(), o.late.end());
  return o;
}

void Configure(StreamExecutionEnvironment& env) {
  env.set_parallelism(2);
  env.set_auto_watermark_interval(Duration(0));
}

TEST(SourceStrategyTest, BehindARebalanceTheLateRecordsDifferAtTheSourceTheyMatchTheModel) {
  // Read in this order: 1500 comes after the watermark passed 4999, so it is
  // late for a generator in the source.  Behind a round-robin edge 1000 and
  // 1500 go to one assigner subtask and 5000 to the other, whose watermark
  // never reaches the window: nothing is late.
  const std::vector<Ev> in = {{"a", 1000, 1}, {"a", 5000, 10}, {"a", 1500, 100}};
  const Outcome expected = Reference(in, 0);
  ASSERT_EQ(expected.late, std::vector<int64_t>{1500});

  StreamExecutionEnvironment at_source;
  Configure(at_source);
  const Outcome source_side =
      RunJob(at_source, at_source.from_source(sources::collection(in), Strategy(0), "events"));
  EXPECT_EQ(source_side.sums, expected.sums);
  EXPECT_EQ(source_side.late, expected.late);

  StreamExecutionEnvironment behind;
  Configure(behind);
  Outcome rebalanced =
      RunJob(behind, behind.from_collection(in).assign_timestamps_and_watermarks(Strategy(0)));
  EXPECT_TRUE(rebalanced.late.empty());
  EXPECT_EQ((rebalanced.sums[{"a", 1000}]), 101);  // 1500 counted: not late there
  EXPECT_NE(rebalanced.sums, expected.sums);
}

TEST(SourceStrategyTest, SourceSideFormMatchesTheReferenceOnShuffledInput) {
  std::mt19937 rng(23);
  std::vector<Ev> in;
  for (int i = 0; i < 600; ++i) {
    const int64_t ts = i * 20 + static_cast<int64_t>(rng() % 700);  // up to 700 ms disorder
    in.push_back({"k" + std::to_string(rng() % 5), ts, static_cast<int64_t>(rng() % 1000)});
  }
  const Outcome expected = Reference(in, 200);
  ASSERT_GT(expected.late.size(), 10u);

  StreamExecutionEnvironment env;
  Configure(env);
  const Outcome got =
      RunJob(env, env.from_source(sources::collection(in), Strategy(200), "events"));
  EXPECT_EQ(got.sums, expected.sums);
  EXPECT_EQ(got.late, expected.late);
}

TEST(SourceStrategyTest, ExplainAndAOneTimeWarningSayWhenAnAssignerIsBehindANonForwardEdge) {
  TempDir dir;
  const std::string a = dir.File("a.txt", "x,1\n"), b = dir.File("b.txt", "y,2\n");
  auto parse = [](const std::string& line) {
    return Ev{line.substr(0, 1), std::stoll(line.substr(2)), 1};
  };
  {
    // Two files, two source subtasks; the assigner at the job's parallelism 3.
    StreamExecutionEnvironment env;
    env.set_parallelism(3);
    env.read_text_files({a, b})
        .map(parse)
        .assign_timestamps_and_watermarks(Strategy(0))
        .add_sink([](Ev&&) {});
    const std::string plan = env.explain();
    EXPECT_THAT(plan, HasSubstr("Warning: timestamp/watermark assigner 'Timestamps/Watermarks' "
                                "(p=3) runs behind a non-forward edge, Source: Files (p=2) "
                                "--REBALANCE--> Map (p=3): "));
    EXPECT_THAT(plan, HasSubstr("env.from_source(source, strategy, name)"));
    ::testing::internal::CaptureStderr();
    ASSERT_TRUE(env.execute("behind").ok());
    const std::string err = ::testing::internal::GetCapturedStderr();
    const std::string warning = "tidemark: warning: timestamp/watermark assigner";
    ASSERT_THAT(err, HasSubstr(warning));
    EXPECT_EQ(err.find(warning), err.rfind(warning)) << err;  // once per job
  }
  {
    // The same files with the strategy at the source: chained, no warning.
    StreamExecutionEnvironment env;
    env.set_parallelism(3);
    WatermarkStrategy<std::string> s =
        WatermarkStrategy<std::string>::for_monotonous_timestamps().with_timestamp_assigner(
            [](const std::string& line, Timestamp) { return std::stoll(line.substr(2)); });
    env.from_source(sources::text_files({a, b}), s, "files").add_sink([](std::string&&) {});
    const std::string plan = env.explain();
    EXPECT_THAT(plan, HasSubstr("\"Source: files -> Timestamps/Watermarks\" p=2"));
    EXPECT_THAT(plan, Not(HasSubstr("Warning")));
    ::testing::internal::CaptureStderr();
    ASSERT_TRUE(env.execute("at source").ok());
    EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("warning")));
  }
}

TEST(SourceStrategyTest, EveryBuiltInSourceTakesAStrategyAndKeepsItsParallelism) {
  TempDir dir;
  const std::string file = dir.File("f.txt", "1\n2\n");
  const std::string csv = dir.File("f.csv", "a,1\n");
  auto ts_of_line = [](const std::string& l, Timestamp) { return std::stoll(l); };
  auto lines = WatermarkStrategy<std::string>::for_monotonous_timestamps().with_timestamp_assigner(
      ts_of_line);
  using Row = std::tuple<std::string, int64_t>;
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto sink = [](std::string&&) {};
  env.from_source(sources::text_file(file), lines, "one file").add_sink(sink);
  env.from_source(sources::socket_text("localhost", 1), lines, "socket").add_sink(sink);
  env.from_source(sources::csv(csv, CsvFormat<Row>()),
                  WatermarkStrategy<Row>::for_monotonous_timestamps().with_timestamp_assigner(
                      [](const Row& r, Timestamp) { return std::get<1>(r); }),
                  "csv")
      .add_sink([](Row&&) {});
  env.from_source(sources::generator<int64_t>([](int64_t i) { return i; }, 10),
                  WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
                      [](int64_t i, Timestamp) { return i; }),
                  "generator")
      .set_parallelism(2)  // the source's too
      .add_sink([](int64_t&&) {});
  const std::string plan = env.explain();
  EXPECT_THAT(plan, HasSubstr("\"Source: one file -> Timestamps/Watermarks -> Sink\" p=3"));
  EXPECT_THAT(plan, HasSubstr("\"Source: socket -> Timestamps/Watermarks\" p=1"));
  EXPECT_THAT(plan, HasSubstr("\"Source: csv -> Timestamps/Watermarks\" p=1"));
  EXPECT_THAT(plan, HasSubstr("\"Source: generator -> Timestamps/Watermarks\" p=2"));
  EXPECT_THAT(plan, Not(HasSubstr("Warning")));
}

}  // namespace
}  // namespace tidemark
