// Keyed rolling aggregations (sum / min / max / min_by / max_by, Flink's
// KeyedStream aggregations: ComparableAggregator and SumAggregator) and count
// windows (countWindow(size[, slide])), on the real runtime.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tidemark/api/windowed_stream.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using Row = std::tuple<std::string, int64_t, std::string>;  // key, value, tag

// What one aggregation emits for key "a", in order.
template <typename MakeStream>
std::vector<Row> Aggregated(MakeStream make) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto rows = env.from_collection(
      std::vector<Row>{{"a", 3, "x"}, {"b", 9, "q"}, {"a", 1, "y"}, {"a", 1, "z"}, {"a", 5, "w"}});
  auto out = make(rows.key_by([](const Row& r) { return std::get<0>(r); })).collect();
  JobResult r = env.execute("aggregation");
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<Row> a;
  for (const auto& item : out->items())
    if (std::get<0>(item.value) == "a") a.push_back(item.value);
  return a;
}

TEST(KeyedAggregation, SumMinMaxKeepTheFirstRecordsOtherFields) {
  EXPECT_EQ(Aggregated([](auto k) { return k.template sum<1>(); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 4, "x"}, {"a", 5, "x"}, {"a", 10, "x"}}));
  EXPECT_EQ(Aggregated([](auto k) { return k.template min<1>(); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 1, "x"}, {"a", 1, "x"}, {"a", 1, "x"}}));
  EXPECT_EQ(Aggregated([](auto k) { return k.template max<1>(); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 3, "x"}, {"a", 3, "x"}, {"a", 5, "x"}}));
}

TEST(KeyedAggregation, MinByMaxByEmitTheWholeRecordFirstOrLatestOfEqualOnes) {
  EXPECT_EQ(Aggregated([](auto k) { return k.template min_by<1>(); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 1, "y"}, {"a", 1, "y"}, {"a", 1, "y"}}));
  EXPECT_EQ(Aggregated([](auto k) { return k.template min_by<1>(/*first=*/false); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 1, "y"}, {"a", 1, "z"}, {"a", 1, "z"}}));
  EXPECT_EQ(Aggregated([](auto k) { return k.template max_by<1>(); }),
            (std::vector<Row>{{"a", 3, "x"}, {"a", 3, "x"}, {"a", 3, "x"}, {"a", 5, "w"}}));
}

struct Reading {
  std::string sensor;
  double temperature = 0;
  int64_t at = 0;
};

TEST(KeyedAggregation, MemberPointersAndManyKeysInParallelKeepEachKeysOrder) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  std::vector<Reading> in;
  for (int64_t i = 0; i < 3000; ++i)
    in.push_back({"s" + std::to_string(i % 7), static_cast<double>((i * 37) % 101), i});
  auto keyed = env.from_collection(in).key_by([](const Reading& r) { return r.sensor; });
  auto sums = keyed.sum(&Reading::temperature).collect();
  auto hottest = keyed.max_by(&Reading::temperature).collect();
  JobResult r = env.execute("members");
  ASSERT_TRUE(r.ok()) << r.status;
  // Per key, in that key's order: the running sum, and the record with the
  // highest temperature so far (the first of equal ones).
  std::map<std::string, std::vector<double>> want_sum;
  std::map<std::string, std::vector<int64_t>> want_hot;
  std::map<std::string, std::pair<double, int64_t>> best;
  std::map<std::string, double> total;
  for (const Reading& x : in) {
    total[x.sensor] += x.temperature;
    want_sum[x.sensor].push_back(total[x.sensor]);
    auto [it, fresh] = best.try_emplace(x.sensor, x.temperature, x.at);
    if (!fresh && x.temperature > it->second.first) it->second = {x.temperature, x.at};
    want_hot[x.sensor].push_back(it->second.second);
  }
  std::map<std::string, std::vector<double>> got_sum;
  for (const auto& item : sums->items())
    got_sum[item.value.sensor].push_back(item.value.temperature);
  std::map<std::string, std::vector<int64_t>> got_hot;
  for (const auto& item : hottest->items()) got_hot[item.value.sensor].push_back(item.value.at);
  EXPECT_EQ(got_sum, want_sum);
  EXPECT_EQ(got_hot, want_hot);
}

TEST(CountWindow, TumblingFiresEveryNRecordsPerKeyAndNotAtTheEnd) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  std::vector<std::pair<std::string, int64_t>> in;
  for (int64_t i = 1; i <= 7; ++i) {
    in.push_back({"a", i});
    in.push_back({"b", 10 * i});
  }
  auto sums = env.from_collection(in)
                  .key_by([](const std::pair<std::string, int64_t>& p) { return p.first; })
                  .count_window(3)
                  .reduce([](const auto& x, const auto& y) {
                    return std::pair<std::string, int64_t>(x.first, x.second + y.second);
                  })
                  .collect();
  ASSERT_TRUE(env.execute("count").ok());
  std::map<std::string, std::vector<int64_t>> got;
  for (const auto& item : sums->items()) got[item.value.first].push_back(item.value.second);
  // 1+2+3, 4+5+6; the 7th record's window never fills.
  EXPECT_EQ(got["a"], (std::vector<int64_t>{6, 15}));
  EXPECT_EQ(got["b"], (std::vector<int64_t>{60, 150}));
}

TEST(CountWindow, SlidingFiresEverySlideRecordsOverTheLastSize) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  std::vector<int64_t> in = {1, 2, 3, 4, 5, 6, 7};
  auto windows = env.from_collection(in)
                     .key_by([](const int64_t&) { return 0; })
                     .count_window(3, 2)
                     .process([](const int& /*key*/, const GlobalWindow&,
                                 const std::vector<int64_t>& elements, WindowContext&,
                                 Collector<std::vector<int64_t>>& out) { out.collect(elements); })
                     .collect();
  ASSERT_TRUE(env.execute("sliding count").ok());
  std::vector<std::vector<int64_t>> got;
  for (const auto& item : windows->items()) got.push_back(item.value);
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{1, 2}, {2, 3, 4}, {4, 5, 6}}));
}

}  // namespace
}  // namespace tidemark
