// window_all (Flink's AllWindowedStream): one window operator at parallelism
// 1 over a stream that is not keyed, with the functions of keyed windows
// without the key; count_window over it; its parallelism is fixed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tidemark/api/windowed_stream.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

struct Click {
  std::string user;
  int64_t ts;
};

DataStream<Click> Clicks(StreamExecutionEnvironment& env) {
  std::vector<Click> in;
  for (int64_t i = 0; i < 40; ++i) in.push_back({"u" + std::to_string(i % 3), i * 250});
  return env.from_collection(in)
      .rebalance()
      .map([](const Click& c) { return c; })  // at the job's parallelism (3)
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Click>::for_monotonous_timestamps().with_timestamp_assigner(
              [](const Click& c, Timestamp) { return c.ts; }));
}

TEST(WindowAll, OneWindowOperatorSeesEveryRecordOfEveryUpstreamSubtask) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto counts = Clicks(env)
                    .window_all(TumblingEventTimeWindows::of(Duration(2000)))
                    .process([](const TimeWindow& w, const std::vector<Click>& clicks,
                                WindowContext& ctx, Collector<std::string>& out) {
                      out.collect(std::to_string(w.start) + ":" + std::to_string(clicks.size()) +
                                  "@" + std::to_string(ctx.subtask_index()));
                    });
  auto got = counts.collect();
  const std::string plan = env.explain();
  ASSERT_TRUE(env.execute("window all").ok());
  std::vector<std::string> lines;
  for (const auto& item : got->items()) lines.push_back(item.value);
  std::sort(lines.begin(), lines.end());
  // 40 clicks 250 ms apart: 8 per 2 s window, the whole stream in one
  // operator (subtask 0 of 1).
  EXPECT_EQ(lines,
            (std::vector<std::string>{"0:8@0", "2000:8@0", "4000:8@0", "6000:8@0", "8000:8@0"}));
  EXPECT_NE(plan.find("p=1"), std::string::npos) << plan;
  EXPECT_THROW(counts.set_parallelism(3), std::invalid_argument);
}

TEST(WindowAll, ReduceAndAggregateWithAWindowFunctionWithoutKey) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto stream = Clicks(env);
  auto latest = stream.window_all(TumblingEventTimeWindows::of(Duration(5000)))
                    .reduce([](const Click& a, const Click& b) { return a.ts > b.ts ? a : b; },
                            [](const TimeWindow& w, const Click& c, WindowContext&,
                               Collector<int64_t>& out) { out.collect(c.ts - w.start); })
                    .collect();
  struct CountUsers {
    int64_t create_accumulator() const { return 0; }
    int64_t add(const Click& c, int64_t n) const { return n + (c.user == "u0" ? 1 : 0); }
    int64_t get_result(const int64_t& n) const { return n; }
    int64_t merge(int64_t a, int64_t b) const { return a + b; }
  };
  auto u0 = stream.window_all(TumblingEventTimeWindows::of(Duration(5000)))
                .aggregate(CountUsers{},
                           [](const TimeWindow& w, const int64_t& n, WindowContext&,
                              Collector<std::string>& out) {
                             out.collect(std::to_string(w.start) + "=" + std::to_string(n));
                           })
                .collect();
  ASSERT_TRUE(env.execute("reduce and aggregate all").ok());
  std::vector<int64_t> got;
  for (const auto& item : latest->items()) got.push_back(item.value);
  std::sort(got.begin(), got.end());
  // The latest click of [0, 5000) is at 4750, of [5000, 10000) at 9750.
  EXPECT_EQ(got, (std::vector<int64_t>{4750, 4750}));
  std::vector<std::string> counts;
  for (const auto& item : u0->items()) counts.push_back(item.value);
  std::sort(counts.begin(), counts.end());
  // Clicks 0, 3, 6, ... are u0's: 7 of the first 20 (0-18), 7 of the next (21-39).
  EXPECT_EQ(counts, (std::vector<std::string>{"0=7", "5000=7"}));
}

}  // namespace
}  // namespace tidemark
