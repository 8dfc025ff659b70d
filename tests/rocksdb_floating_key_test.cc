// Keys that are or hold a double compare as Java's Double.equals() does
// (partitioning/key_groups.h's KeyEquals): every NaN is one key, whatever its
// payload or sign, and 0.0 and -0.0 are two keys.  That is what Flink's heap
// backend (equals/hashCode) and its RocksDB backend (doubleToLongBits bytes)
// both do.  C++'s == would make each NaN record a key of its own and merge
// the zeros.  Each job below runs on the heap and on RocksDB, at parallelism
// 2, and must give the same answer.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using namespace std::chrono_literals;

struct Ev {
  double key = 0;
  Timestamp ts = 0;
  int64_t n = 1;
};

// Six NaNs of three bit patterns (Java's canonical one, another payload, a
// negative one), three 0.0 and three -0.0, at times 0..11 ms.
std::vector<Ev> Input() {
  const double nans[] = {std::numeric_limits<double>::quiet_NaN(),
                         std::bit_cast<double>(uint64_t{0x7ff8000000000001}),
                         -std::numeric_limits<double>::quiet_NaN()};
  std::vector<Ev> in;
  for (int i = 0; i < 12; ++i) {
    const double key = i % 2 == 0 ? nans[(i / 2) % 3] : (i % 4 == 1 ? 0.0 : -0.0);
    in.push_back(Ev{key, i, 1});
  }
  return in;
}

std::string Name(double key) { return std::isnan(key) ? "NaN" : (std::signbit(key) ? "-0" : "+0"); }

Ev Sum(const Ev& a, const Ev& b) { return Ev{a.key, std::max(a.ts, b.ts), a.n + b.n}; }

struct CountPerKey : KeyedProcessFunction<double, Ev, std::string> {
  void process_element(const Ev&, Context& ctx, Collector<std::string>&) override {
    auto count = ctx.get_state<int64_t>("count");
    count.update(count.value_or(0) + 1);
    ctx.timer_service().register_event_time_timer(1000);
  }
  void on_timer(Timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    out.collect(Name(ctx.get_current_key()) + " " +
                std::to_string(ctx.get_state<int64_t>("count").value_or(0)));
  }
};

struct CountPerMapKey : KeyedProcessFunction<int32_t, Ev, std::string> {
  void process_element(const Ev& e, Context& ctx, Collector<std::string>&) override {
    auto seen = ctx.get_map_state<double, int64_t>("seen");
    seen.put(e.key, seen.get(e.key).value_or(0) + 1);
    ctx.timer_service().register_event_time_timer(1000);
  }
  void on_timer(Timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    for (const auto& [key, n] : ctx.get_map_state<double, int64_t>("seen").entries())
      out.collect(Name(key) + " " + std::to_string(n));
  }
};

enum class Job {
  kTumbling,
  kTumblingProcess,
  kSliding,
  kSession,
  kLocalAggregation,
  kRolling,
  kKeyedProcess,
  kMapState
};

std::vector<std::string> RunJob(Job job, bool rocksdb) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  if (rocksdb) {
    StateBackend backend = StateBackend::rocksdb();
    backend.cache_entries = 1;  // every key read from the database's bytes
    env.set_state_backend(backend);
  }
  auto keyed = env.from_collection(Input())
                   .assign_timestamps_and_watermarks(
                       WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                           [](const Ev& e, Timestamp) { return e.ts; }))
                   .key_by([](const Ev& e) { return e.key; });
  auto named = [](const Ev& e) { return Name(e.key) + " " + std::to_string(e.n); };
  std::shared_ptr<CollectedResults<std::string>> out;
  switch (job) {
    case Job::kTumbling:
      out = keyed.window(TumblingEventTimeWindows::of(1s)).reduce(Sum).map(named).collect();
      break;
    case Job::kTumblingProcess:
      out = keyed.window(TumblingEventTimeWindows::of(1s))
                .process([](const double& key, const TimeWindow&, const std::vector<Ev>& evs,
                            WindowContext&, Collector<std::string>& c) {
                  c.collect(Name(key) + " " + std::to_string(evs.size()));
                })
                .collect();
      break;
    case Job::kSliding:  // every record is in the windows [-5 s, 5 s) and [0, 10 s)
      out = keyed.window(SlidingEventTimeWindows::of(10s, 5s)).reduce(Sum).map(named).collect();
      break;
    case Job::kSession:
      out = keyed.window(EventTimeSessionWindows::with_gap(1s)).reduce(Sum).map(named).collect();
      break;
    case Job::kLocalAggregation:
      out = keyed.window(TumblingEventTimeWindows::of(1s))
                .local_aggregation()
                .reduce(Sum)
                .map(named)
                .collect();
      break;
    case Job::kRolling:  // the running sums; the test keeps each key's largest
      out = keyed.reduce(Sum).map(named).collect();
      break;
    case Job::kKeyedProcess:  // a ValueState count, one timer per key
      out = keyed.process(CountPerKey()).collect();
      break;
    case Job::kMapState:  // one key of the stream; the doubles are map keys
      out = env.from_collection(Input())
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                        [](const Ev& e, Timestamp) { return e.ts; }))
                .key_by([](const Ev&) { return int32_t{0}; })
                .process(CountPerMapKey())
                .collect();
      break;
  }
  JobResult r = env.execute("floating keys");
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<std::string> lines;
  for (const auto& item : out->items()) lines.push_back(item.value);
  if (job == Job::kRolling) {  // each key's last running sum is its largest
    absl::flat_hash_map<std::string, int64_t> last;
    for (const std::string& l : lines) {
      const size_t sp = l.find(' ');
      int64_t& m = last[l.substr(0, sp)];
      m = std::max<int64_t>(m, std::stoll(l.substr(sp + 1)));
    }
    lines.clear();
    for (const auto& [k, n] : last) lines.push_back(k + " " + std::to_string(n));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

class FloatingKeys : public ::testing::TestWithParam<std::tuple<Job, bool>> {};

TEST_P(FloatingKeys, EveryNaNIsOneKeyAndTheZerosAreTwo) {
  const auto [job, rocksdb] = GetParam();
  const std::vector<std::string> want =
      job == Job::kSliding
          ? std::vector<std::string>{"+0 3", "+0 3", "-0 3", "-0 3", "NaN 6", "NaN 6"}
          : std::vector<std::string>{"+0 3", "-0 3", "NaN 6"};
  EXPECT_EQ(RunJob(job, rocksdb), want);
}

INSTANTIATE_TEST_SUITE_P(HeapAndRocksDb, FloatingKeys,
                         ::testing::Combine(::testing::Values(Job::kTumbling, Job::kTumblingProcess,
                                                              Job::kSliding, Job::kSession,
                                                              Job::kLocalAggregation, Job::kRolling,
                                                              Job::kKeyedProcess, Job::kMapState),
                                            ::testing::Bool()));

TEST(KeyEquals, JavaEqualsForFloatsDoublesPairsAndTuples) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double other_nan = std::bit_cast<double>(uint64_t{0xfff0000000000123});
  EXPECT_TRUE(KeyEquals<double>{}(nan, other_nan));
  EXPECT_FALSE(KeyEquals<double>{}(0.0, -0.0));
  EXPECT_TRUE(KeyEquals<double>{}(1.5, 1.5));
  EXPECT_TRUE(KeyEquals<float>{}(std::nanf(""), -std::nanf("")));
  EXPECT_FALSE(KeyEquals<float>{}(0.0f, -0.0f));
  using P = std::pair<std::string, double>;
  EXPECT_TRUE(KeyEquals<P>{}(P{"a", nan}, P{"a", other_nan}));
  EXPECT_FALSE(KeyEquals<P>{}(P{"a", 0.0}, P{"a", -0.0}));
  EXPECT_FALSE(KeyEquals<P>{}(P{"a", nan}, P{"b", nan}));
  using T = std::tuple<int32_t, std::pair<float, int64_t>>;
  EXPECT_TRUE(KeyEquals<T>{}(T{1, {std::nanf(""), 2}}, T{1, {-std::nanf(""), 2}}));
  EXPECT_FALSE(KeyEquals<T>{}(T{1, {0.0f, 2}}, T{1, {-0.0f, 2}}));
  // Equal keys hash alike on the heap; the KeyHash (Java's hashCode) agrees.
  EXPECT_EQ(internal::HeapKeyHash(nan), internal::HeapKeyHash(other_nan));
  EXPECT_EQ(internal::HeapKeyHash(P{"a", nan}), internal::HeapKeyHash(P{"a", other_nan}));
  EXPECT_EQ(KeyHash<double>{}(nan), KeyHash<double>{}(other_nan));
  internal::KeyMap<P, int> map;
  ++map[P{"a", nan}];
  ++map[P{"a", other_nan}];
  ++map[P{"a", 0.0}];
  ++map[P{"a", -0.0}];
  EXPECT_EQ(map.size(), 3u);
  EXPECT_EQ((map[P{"a", -nan}]), 2);
}

TEST(KeyLess, SortsAsJavaComparesSoThatNaNIsOneKey) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::map<double, int, KeyLess<double>> m;
  for (double k :
       {nan, 1.0, -0.0, -inf, 0.0, -nan, inf, std::bit_cast<double>(uint64_t{0x7ff0000000000007})})
    ++m[k];
  std::vector<std::string> order;
  for (const auto& [k, n] : m)
    order.push_back(std::to_string(k) + (std::signbit(k) ? "s" : "") + "x" + std::to_string(n));
  EXPECT_EQ(order, (std::vector<std::string>{"-infsx1", "-0.000000sx1", "0.000000x1", "1.000000x1",
                                             "infx1", "nanx3"}));
  using P = std::pair<double, int32_t>;
  EXPECT_TRUE(KeyLess<P>{}(P{nan, 1}, P{-nan, 2}));
  EXPECT_FALSE(KeyLess<P>{}(P{nan, 2}, P{-nan, 2}));
  EXPECT_TRUE(KeyLess<P>{}(P{-0.0, 9}, P{0.0, 1}));
  using T = std::tuple<int32_t, float, int32_t>;
  EXPECT_TRUE(KeyLess<T>{}(T{1, std::nanf(""), 1}, T{1, -std::nanf(""), 2}));
  EXPECT_TRUE(KeyLess<T>{}(T{1, 5.0f, 1}, T{1, std::nanf(""), 0}));
  static_assert(std::is_same_v<KeyLess<std::string>, std::less<std::string>>);
}

}  // namespace
}  // namespace tidemark
