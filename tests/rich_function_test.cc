// Rich functions (Flink's RichFunction / RuntimeContext): function objects
// given to map, filter, flat_map and add_sink are opened once per subtask
// with its runtime context and closed after their last record, also when
// the job fails (every opened one); user counters reach the JobResult.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

struct Lifecycle {
  std::atomic<int> opened{0};
  std::atomic<int> closed{0};
  std::mutex mu;
  std::set<int> subtasks;
};

// A map that tags records with its subtask and counts the even ones.
struct TagMap {
  Lifecycle* life;
  int subtask = -1;
  std::optional<UserCounter> evens;
  void open(const RuntimeContext& ctx) {
    subtask = ctx.subtask_index();
    evens.emplace(ctx.counter("evens"));
    life->opened.fetch_add(1);
    std::lock_guard<std::mutex> lock(life->mu);
    life->subtasks.insert(ctx.subtask_index() * 100 + ctx.parallelism());
  }
  std::pair<int, int64_t> operator()(const int64_t& v) {
    if (v % 2 == 0) evens->inc();
    return {subtask, v};
  }
  void close() { life->closed.fetch_add(1); }
};

struct CountingSink {
  Lifecycle* life;
  std::atomic<int64_t>* seen;
  void open(const RuntimeContext&) { life->opened.fetch_add(1); }
  void operator()(std::pair<int, int64_t>&&) { seen->fetch_add(1); }
  void close() { life->closed.fetch_add(1); }
};

TEST(RichFunction, OpenedOncePerSubtaskWithItsContextAndCountersReachTheResult) {
  Lifecycle maps, sinks;
  std::atomic<int64_t> seen{0};
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto tagged =
      env.from_generator<int64_t>([](int64_t i) { return i; }, 3000).map(TagMap{&maps}).name("Tag");
  auto collected = tagged.collect();
  tagged.add_sink(CountingSink{&sinks, &seen});
  JobResult r = env.execute("rich");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(maps.opened.load(), 3);
  EXPECT_EQ(maps.closed.load(), 3);
  EXPECT_EQ(maps.subtasks, (std::set<int>{3, 103, 203}));  // subtask * 100 + parallelism
  EXPECT_EQ(sinks.opened.load(), 3);
  EXPECT_EQ(sinks.closed.load(), 3);
  EXPECT_EQ(seen.load(), 3000);
  // Each record was tagged by the map subtask that saw it, which is the one
  // the result came through.
  for (const auto& item : collected->items()) EXPECT_EQ(item.value.first, item.subtask);
  // The user counter: 1500 even numbers in all, per subtask in the metrics.
  EXPECT_EQ(r.CounterTotal("evens"), 1500);
  int with_counter = 0;
  for (const auto& m : r.metrics)
    if (m.counters.count("evens")) ++with_counter;
  EXPECT_EQ(with_counter, 3);
}

// Keyed and two-input functions are opened and closed too.
struct KeyedCount {
  using OutputType = int64_t;
  Lifecycle* life;
  int subtask = -1;
  void open(const RuntimeContext& ctx) {
    subtask = ctx.subtask_index();
    life->opened.fetch_add(1);
  }
  void process_element(const int64_t& v, KeyedProcessContext<int64_t>&, Collector<int64_t>& out) {
    out.collect(subtask * 1000000 + v);
  }
  void close() { life->closed.fetch_add(1); }
};
struct CoTag {
  Lifecycle* life;
  void open(const RuntimeContext&) { life->opened.fetch_add(1); }
  int64_t map1(const int64_t& v) { return v; }
  int64_t map2(const int64_t& v) { return -v; }
  void close() { life->closed.fetch_add(1); }
};

TEST(RichFunction, KeyedProcessAndCoFunctionsAreOpenedAndClosedPerSubtask) {
  Lifecycle keyed, co;
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto numbers = env.from_generator<int64_t>([](int64_t i) { return i; }, 100);
  auto out = numbers.key_by([](const int64_t& v) { return v % 5; })
                 .process(KeyedCount{&keyed})
                 .connect(numbers)
                 .map(CoTag{&co})
                 .collect();
  JobResult r = env.execute("rich keyed");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(keyed.opened.load(), 2);
  EXPECT_EQ(keyed.closed.load(), 2);
  EXPECT_EQ(co.opened.load(), 2);
  EXPECT_EQ(co.closed.load(), 2);
  // Every keyed result carries the subtask its key went to (set in open).
  std::set<int64_t> keyed_subtasks;
  for (const auto& item : out->items())
    if (item.value >= 0) keyed_subtasks.insert(item.value / 1000000);
  EXPECT_EQ(out->items().size(), 200u);
  EXPECT_FALSE(keyed_subtasks.empty());
  for (int64_t s : keyed_subtasks) EXPECT_TRUE(s == 0 || s == 1) << s;
}

struct FailingFilter {
  Lifecycle* life;
  void open(const RuntimeContext&) { life->opened.fetch_add(1); }
  bool operator()(const int64_t& v) {
    if (v == 500) throw std::runtime_error("bad record");
    return true;
  }
  void close() { life->closed.fetch_add(1); }
};

TEST(RichFunction, ClosedAlsoWhenTheJobFails) {
  Lifecycle life;
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.from_generator<int64_t>([](int64_t i) { return i; }, 2000)
      .filter(FailingFilter{&life})
      .add_sink([](int64_t&&) {});
  JobResult r = env.execute("failing");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.status.message().find("bad record"), std::string_view::npos) << r.status;
  // A subtask the failure cancelled before it started is never opened; every
  // one that was opened is closed.
  EXPECT_GE(life.opened.load(), 1);
  EXPECT_EQ(life.closed.load(), life.opened.load());
}

}  // namespace
}  // namespace tidemark
