// rescale(), shuffle() and global() (Flink's RescalePartitioner,
// ShufflePartitioner, GlobalPartitioner): which channels the job compiler
// makes (the pointwise pattern of Flink's EdgeManagerBuildUtil) and where the
// records go on the real runtime.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/partitioning/partitioner.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using internal::Connected;
using internal::ShipStrategy;

std::set<std::pair<int, int>> Pairs(ShipStrategy s, int pu, int pd) {
  std::set<std::pair<int, int>> out;
  for (int u = 0; u < pu; ++u)
    for (int d = 0; d < pd; ++d)
      if (Connected(s, u, d, pu, pd)) out.insert({u, d});
  return out;
}

TEST(Pointwise, FlinksPatternsForMoreFewerAndEqualSubtasks) {
  using P = std::set<std::pair<int, int>>;
  EXPECT_EQ(Pairs(ShipStrategy::kRescale, 2, 2), (P{{0, 0}, {1, 1}}));
  EXPECT_EQ(Pairs(ShipStrategy::kRescale, 2, 4), (P{{0, 0}, {0, 1}, {1, 2}, {1, 3}}));
  EXPECT_EQ(Pairs(ShipStrategy::kRescale, 4, 2), (P{{0, 0}, {1, 0}, {2, 1}, {3, 1}}));
  // Irregular: 3 -> 2: downstream d reads [d*3/2, (d+1)*3/2) = {0}, {1, 2};
  // 2 -> 3: upstream u feeds [ceil(3u/2), ceil(3(u+1)/2)) = {0, 1}, {2}.
  EXPECT_EQ(Pairs(ShipStrategy::kRescale, 3, 2), (P{{0, 0}, {1, 1}, {2, 1}}));
  EXPECT_EQ(Pairs(ShipStrategy::kRescale, 2, 3), (P{{0, 0}, {0, 1}, {1, 2}}));
  // Every subtask on both sides has a channel, and the others are all to all.
  for (int pu = 1; pu <= 9; ++pu) {
    for (int pd = 1; pd <= 9; ++pd) {
      std::set<int> ups, downs;
      for (auto [u, d] : Pairs(ShipStrategy::kRescale, pu, pd)) {
        ups.insert(u);
        downs.insert(d);
      }
      EXPECT_EQ(static_cast<int>(ups.size()), pu) << pu << " -> " << pd;
      EXPECT_EQ(static_cast<int>(downs.size()), pd) << pu << " -> " << pd;
      EXPECT_EQ(static_cast<int>(Pairs(ShipStrategy::kRescale, pu, pd).size()), std::max(pu, pd));
      EXPECT_EQ(static_cast<int>(Pairs(ShipStrategy::kShuffle, pu, pd).size()), pu * pd);
    }
  }
}

// Every record's (upstream subtask, downstream subtask), from a job whose
// source has parallelism `pu` and whose sink has `pd`.
template <typename Part>
std::vector<std::pair<int, int>> Route(int pu, int pd, Part part, std::string* plan = nullptr) {
  StreamExecutionEnvironment env;
  env.set_parallelism(pd);  // the map and the collecting sink, chained
  // The generator gives subtask s the indices i with i % pu == s.
  auto tagged =
      env.from_generator<std::pair<int, int64_t>>(
             [pu](int64_t i) { return std::pair<int, int64_t>(static_cast<int>(i % pu), i); }, 1200)
          .set_parallelism(pu);
  auto got = part(tagged).map([](const std::pair<int, int64_t>& r) { return r; }).collect();
  if (plan != nullptr) *plan = env.explain();
  JobResult r = env.execute("route");
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<std::pair<int, int>> out;
  for (const auto& item : got->items()) out.push_back({item.value.first, item.subtask});
  return out;
}

TEST(Rescale, EachUpstreamSubtaskFeedsOnlyItsDownstreamSubtasksInTurn) {
  std::string plan;
  auto routes = Route(
      2, 4, [](auto s) { return s.rescale(); }, &plan);
  EXPECT_NE(plan.find("--RESCALE--> Map (p=4), 4 channel(s)"), std::string::npos) << plan;
  ASSERT_EQ(routes.size(), 1200u);
  std::map<std::pair<int, int>, int> count;
  for (auto r : routes) ++count[r];
  // Upstream 0 -> downstream 0, 1; upstream 1 -> 2, 3; evenly (round robin).
  EXPECT_EQ(count, (std::map<std::pair<int, int>, int>{
                       {{0, 0}, 300}, {{0, 1}, 300}, {{1, 2}, 300}, {{1, 3}, 300}}));
  routes = Route(4, 2, [](auto s) { return s.rescale(); });
  count.clear();
  for (auto r : routes) ++count[r];
  EXPECT_EQ(count, (std::map<std::pair<int, int>, int>{
                       {{0, 0}, 300}, {{1, 0}, 300}, {{2, 1}, 300}, {{3, 1}, 300}}));
}

TEST(Global, EveryRecordGoesToSubtaskZero) {
  std::string plan;
  auto routes = Route(
      3, 3, [](auto s) { return s.global(); }, &plan);
  EXPECT_NE(plan.find("--GLOBAL--> Map (p=3), 9 channel(s)"), std::string::npos) << plan;
  ASSERT_EQ(routes.size(), 1200u);
  for (auto [from, to] : routes) EXPECT_EQ(to, 0);
}

TEST(Shuffle, EveryRecordArrivesOnceSpreadOverEverySubtask) {
  auto routes = Route(2, 4, [](auto s) { return s.shuffle(); });
  ASSERT_EQ(routes.size(), 1200u);
  std::map<int, int> per_subtask;
  for (auto [from, to] : routes) ++per_subtask[to];
  ASSERT_EQ(per_subtask.size(), 4u);
  // Uniform: 300 expected each; far outside 200-400 is not random.
  for (auto [d, n] : per_subtask) {
    EXPECT_GT(n, 200) << d;
    EXPECT_LT(n, 400) << d;
  }
}

// map, filter and flat_map on a KeyedStream (a DataStream in Flink) run after
// the shuffle by key: every record of a key is in the one subtask that owns
// the key, wherever the source produced it.
TEST(KeyedStream, MapFilterAndFlatMapRunAfterTheShuffleByKey) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  // Source subtask s produces the i with i % 2 == s: every key from both.
  auto keyed = env.from_generator<int64_t>([](int64_t i) { return i; }, 1200)
                   .set_parallelism(2)
                   .key_by([](const int64_t& i) { return i % 10; });
  auto mapped = keyed.map([](const int64_t& i) { return i * 2; }).collect();
  auto filtered = keyed.filter([](const int64_t& i) { return i % 3 == 0; }).collect();
  auto flat = keyed
                  .flat_map([](const int64_t& i, Collector<int64_t>& out) {
                    out.collect(i);
                    out.collect(i);
                  })
                  .collect();
  const std::string plan = env.explain();
  JobResult r = env.execute("keyed map");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_NE(plan.find("--HASH(key groups, maxP=128)--> Map (p=3)"), std::string::npos) << plan;
  auto check = [](const auto& items, int64_t key_of_value_divisor, size_t n, const char* what) {
    ASSERT_EQ(items.size(), n) << what;
    std::map<int64_t, std::set<int>> subtasks_of_key;
    for (const auto& item : items)
      subtasks_of_key[(item.value / key_of_value_divisor) % 10].insert(item.subtask);
    std::set<int> used;
    for (const auto& [key, subtasks] : subtasks_of_key) {
      EXPECT_EQ(subtasks.size(), 1u) << what << ", key " << key;
      used.insert(*subtasks.begin());
    }
    EXPECT_GT(used.size(), 1u) << what;
  };
  check(mapped->items(), 2, 1200, "map");
  check(filtered->items(), 1, 400, "filter");
  check(flat->items(), 1, 2400, "flat_map");
}

}  // namespace
}  // namespace tidemark
