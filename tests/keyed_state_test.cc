// The keyed state store (operators/keyed/keyed_state_store.h): MapState's
// semantics (Flink's MapState) and the other handles on their own, then a
// keyed process function that counts distinct items per key with MapState on
// the real runtime at parallelism 1 and 3, checked against a plain
// computation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::Pair;

using Items = MapState<std::string, std::string, int>::Storage;

TEST(MapState, EmptyUntilPut) {
  KeyedStateStore<std::string> store;
  const std::string key = "a";
  MapState<std::string, std::string, int> m(&store.Table<Items>("m"), &key);
  EXPECT_TRUE(m.is_empty());
  EXPECT_EQ(m.get("x"), std::nullopt);
  EXPECT_FALSE(m.contains("x"));
  EXPECT_TRUE(m.entries().empty());
  EXPECT_TRUE(m.keys().empty());
  EXPECT_TRUE(m.values().empty());
  m.remove("x");  // no mapping: no-op
  m.clear();
  EXPECT_TRUE(m.is_empty());
  EXPECT_EQ(store.Table<Items>("m").map.size(), 0u);
}

// A user key without a hash (only operator<): kept in a std::map, as before.
struct OrderedOnly {
  int v = 0;
  bool operator<(const OrderedOnly& o) const { return v < o.v; }
};

TEST(MapState, HashableUserKeysAreHashedOthersOrdered) {
  static_assert(
      std::is_same_v<MapState<int, std::string, int>::Storage, HashedMap<std::string, int>>);
  static_assert(std::is_same_v<MapState<int, int64_t, int>::Storage, HashedMap<int64_t, int>>);
  static_assert(std::is_same_v<MapState<int, std::pair<int, std::string>, int>::Storage,
                               HashedMap<std::pair<int, std::string>, int>>);
  static_assert(
      std::is_same_v<MapState<int, OrderedOnly, int>::Storage, std::map<OrderedOnly, int>>);
  KeyedStateStore<int> store;
  const int key = 1;
  MapState<int, OrderedOnly, int> m(&store.Table<std::map<OrderedOnly, int>>("m"), &key);
  m.put(OrderedOnly{3}, 30);
  m.put(OrderedOnly{1}, 10);
  EXPECT_EQ(m.get(OrderedOnly{3}), 30);
  ASSERT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries().begin()->first.v, 1);
  m.remove(OrderedOnly{1});
  EXPECT_EQ(m.keys().size(), 1u);
}

// The hashed map's bytes: in key order, so equal for equal maps however they
// were filled, and the same as a std::map's (checkpoints of either restore
// into the other).
TEST(MapState, HashedEntriesEncodeInKeyOrderAsAStdMapDoes) {
  std::map<int64_t, std::string> ordered;
  HashedMap<int64_t, std::string> up, down;
  for (int64_t i = 0; i < 1000; ++i) {
    ordered[i * 7919 % 1009] = std::to_string(i);
    up.insert_or_assign(i * 7919 % 1009, std::to_string(i));
  }
  for (int64_t i = 999; i >= 0; --i) down.insert_or_assign(i * 7919 % 1009, std::to_string(i));
  down.rehash(4096);  // another capacity, another iteration order
  auto bytes = [](const auto& m) {
    std::string out;
    StateWriter w(&out);
    Encode(w, m);
    return out;
  };
  EXPECT_EQ(bytes(up), bytes(ordered));
  EXPECT_EQ(bytes(down), bytes(ordered));
  const std::string b = bytes(ordered);
  StateReader r(b);
  const HashedMap<int64_t, std::string> back = Decode<HashedMap<int64_t, std::string>>(r);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(back == up);
}

TEST(MapState, PutGetContainsOverwriteAndOrder) {
  KeyedStateStore<std::string> store;
  const std::string key = "a";
  MapState<std::string, std::string, int> m(&store.Table<Items>("m"), &key);
  m.put("b", 2);
  m.put("a", 1);
  m.put("c", 3);
  EXPECT_FALSE(m.is_empty());
  EXPECT_EQ(m.get("a"), 1);
  EXPECT_EQ(m.get("b"), 2);
  EXPECT_EQ(m.get("z"), std::nullopt);
  EXPECT_TRUE(m.contains("c"));
  EXPECT_FALSE(m.contains("z"));
  m.put("b", 20);  // overwrites
  EXPECT_EQ(m.get("b"), 20);
  // entries, keys and values in user-key order.
  EXPECT_THAT(m.entries(), ElementsAre(Pair("a", 1), Pair("b", 20), Pair("c", 3)));
  EXPECT_THAT(m.keys(), ElementsAre("a", "b", "c"));
  EXPECT_THAT(m.values(), ElementsAre(1, 20, 3));
  m.put_all(std::vector<std::pair<std::string, int>>{{"d", 4}, {"a", 10}});
  EXPECT_THAT(m.entries(), ElementsAre(Pair("a", 10), Pair("b", 20), Pair("c", 3), Pair("d", 4)));
}

TEST(MapState, RemovingTheLastMappingDropsTheKeysEntry) {
  KeyedStateStore<std::string> store;
  auto& table = store.Table<Items>("m");
  const std::string key = "a";
  MapState<std::string, std::string, int> m(&table, &key);
  m.put("x", 1);
  m.put("y", 2);
  m.remove("x");
  EXPECT_FALSE(m.contains("x"));
  EXPECT_THAT(m.keys(), ElementsAre("y"));
  EXPECT_EQ(table.map.size(), 1u);
  m.remove("y");
  EXPECT_TRUE(m.is_empty());
  EXPECT_EQ(table.map.size(), 0u);  // as Flink's heap MapState: no empty map kept
}

TEST(MapState, PerKeyClearLeavesOtherKeys) {
  KeyedStateStore<std::string> store;
  auto& table = store.Table<Items>("m");
  std::string key = "a";
  MapState<std::string, std::string, int> m(&table, &key);  // follows `key`
  m.put("x", 1);
  key = "b";
  EXPECT_TRUE(m.is_empty());
  m.put("x", 2);
  m.put("y", 3);
  key = "a";
  EXPECT_EQ(m.get("x"), 1);
  m.clear();
  EXPECT_TRUE(m.is_empty());
  key = "b";
  EXPECT_THAT(m.entries(), ElementsAre(Pair("x", 2), Pair("y", 3)));
  EXPECT_EQ(table.map.size(), 1u);
}

TEST(MapState, NamespacesAreSeparate) {
  KeyedStateStore<std::string> store;
  auto& table = store.Table<Items, int>("m");
  const std::string key = "a";
  const int ns1 = 1, ns2 = 2;
  MapState<std::string, std::string, int, int> m1(&table, &key, &ns1);
  MapState<std::string, std::string, int, int> m2(&table, &key, &ns2);
  m1.put("x", 1);
  EXPECT_TRUE(m2.is_empty());
  m2.put("x", 2);
  EXPECT_EQ(m1.get("x"), 1);
  EXPECT_EQ(m2.get("x"), 2);
  m1.clear();
  EXPECT_TRUE(m1.is_empty());
  EXPECT_EQ(m2.get("x"), 2);
}

TEST(KeyedStateStore, NamesAreTypedAndTablesStay) {
  KeyedStateStore<int> store;
  auto& a = store.Table<int>("a");
  EXPECT_EQ(&store.Table<int>("a"), &a);
  EXPECT_THROW(store.Table<std::string>("a"), std::logic_error);
  EXPECT_THROW((store.Table<int, int>("a")), std::logic_error);  // another namespace
  store.Table<std::string>("b");
  EXPECT_EQ(store.num_tables(), 2u);
}

TEST(KeyedStateStore, ValueListReducingAggregating) {
  KeyedStateStore<int> store;
  int key = 1;
  ValueState<int, std::string> v(&store.Table<std::string>("v"), &key);
  EXPECT_EQ(v.value(), std::nullopt);
  EXPECT_EQ(v.value_or("none"), "none");
  v.update("x");
  EXPECT_EQ(v.value(), "x");
  ListState<int, int> l(&store.Table<std::vector<int>>("l"), &key);
  l.add(1);
  l.add_all({2, 3});
  EXPECT_THAT(l.get(), ElementsAre(1, 2, 3));
  l.update({});
  EXPECT_TRUE(l.get().empty());
  EXPECT_EQ(store.Table<std::vector<int>>("l").map.size(), 0u);
  auto sum = [](int a, int b) { return a + b; };
  ReducingState<int, int, decltype(sum)> r(&store.Table<int>("r"), &key, sum);
  r.add(2);
  r.add(3);
  EXPECT_EQ(r.get(), 5);
  struct Avg {
    std::pair<int, int> create_accumulator() const { return {0, 0}; }
    std::pair<int, int> add(int v, std::pair<int, int> acc) const {
      return {acc.first + v, acc.second + 1};
    }
    double get_result(const std::pair<int, int>& acc) const {
      return static_cast<double>(acc.first) / acc.second;
    }
  };
  AggregatingState<int, Avg> a(&store.Table<std::pair<int, int>>("a"), &key, Avg{});
  EXPECT_EQ(a.get(), std::nullopt);
  a.add(1);
  a.add(2);
  EXPECT_EQ(a.get(), 1.5);
  key = 2;  // another key sees none of it
  EXPECT_EQ(v.value(), std::nullopt);
  EXPECT_EQ(r.get(), std::nullopt);
  EXPECT_EQ(a.get(), std::nullopt);
  key = 1;
  v.clear();
  r.clear();
  a.clear();
  EXPECT_EQ(v.value(), std::nullopt);
  EXPECT_EQ(r.get(), std::nullopt);
  EXPECT_EQ(a.get(), std::nullopt);
}

// --- MapState from a KeyedProcessFunction, on the runtime ---

struct Ev {
  int64_t key = 0;
  int64_t item = 0;
  Timestamp ts = 0;
};

constexpr int64_t kCount = 20000;
constexpr int64_t kKeys = 7;
constexpr Timestamp kReportAt = 1'000'000'000;  // after every record

Ev MakeEvent(int64_t i) { return Ev{i % kKeys, (i * 37 + i / 11) % 300, i}; }

// Per key: "key new n" at each item it has not seen yet (n distinct so far),
// and at kReportAt "key distinct d total t" from the map, which it then
// clears.
struct DistinctItems : KeyedProcessFunction<int64_t, Ev, std::string> {
  void process_element(const Ev& e, Context& ctx, Collector<std::string>& out) override {
    auto seen = ctx.get_map_state<int64_t, int64_t>("seen");
    std::optional<int64_t> n = seen.get(e.item);
    seen.put(e.item, n.value_or(0) + 1);
    if (!n) {
      out.collect(std::to_string(ctx.get_current_key()) + " new " +
                  std::to_string(seen.keys().size()));
    }
    ctx.timer_service().register_event_time_timer(kReportAt);
  }
  void on_timer(Timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    auto seen = ctx.get_map_state<int64_t, int64_t>("seen");
    int64_t total = 0;
    for (int64_t c : seen.values()) total += c;
    out.collect(std::to_string(ctx.get_current_key()) + " distinct " +
                std::to_string(seen.entries().size()) + " total " + std::to_string(total));
    seen.clear();
    if (!seen.is_empty()) out.collect("not cleared");
  }
};

std::vector<std::string> RunDistinct(int parallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  env.set_auto_watermark_interval(5ms);
  auto results = env.from_generator<Ev>(MakeEvent, kCount)
                     .assign_timestamps_and_watermarks(
                         WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                             [](const Ev& e, Timestamp) { return e.ts; }))
                     .key_by([](const Ev& e) { return e.key; })
                     .process(DistinctItems())
                     .collect();
  JobResult r = env.execute("distinct items");
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<std::string> out;
  for (const auto& item : results->items()) out.push_back(item.value);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> PlainDistinct() {
  std::map<int64_t, std::set<int64_t>> items;
  std::map<int64_t, int64_t> totals;
  for (int64_t i = 0; i < kCount; ++i) {
    const Ev e = MakeEvent(i);
    items[e.key].insert(e.item);
    ++totals[e.key];
  }
  std::vector<std::string> out;
  for (const auto& [key, set] : items) {
    for (size_t n = 1; n <= set.size(); ++n)
      out.push_back(std::to_string(key) + " new " + std::to_string(n));
    out.push_back(std::to_string(key) + " distinct " + std::to_string(set.size()) + " total " +
                  std::to_string(totals[key]));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(KeyedStateStore, MutableListChangesTheKeysListInPlace) {
  KeyedStateStore<int> store;
  int key = 1;
  ListState<int, std::string> l(&store.Table<std::vector<std::string>>("l"), &key);
  std::vector<std::string>& list = l.mutable_list();  // created empty
  EXPECT_TRUE(list.empty());
  list.push_back("a");
  list.insert(list.begin(), "b");
  EXPECT_THAT(l.get(), ElementsAre("b", "a"));
  EXPECT_EQ(&l.mutable_list(), &list);  // the same list, not a copy
  key = 2;                              // another key's list is its own
  EXPECT_TRUE(l.get().empty());
  l.mutable_list().push_back("c");
  key = 1;
  EXPECT_THAT(l.get(), ElementsAre("b", "a"));
  l.clear();
  EXPECT_EQ(store.Table<std::vector<std::string>>("l").map.size(), 1u);
}

TEST(KeyedStateStore, MutableValueChangesTheKeysValueInPlace) {
  KeyedStateStore<int> store;
  int key = 1;
  ValueState<int, std::string> v(&store.Table<std::string>("v"), &key);
  EXPECT_FALSE(v.value().has_value());
  std::string& s = v.mutable_value();  // created empty: the key has a value now
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(v.value(), std::optional<std::string>(""));
  s += "ab";
  EXPECT_EQ(v.value(), std::optional<std::string>("ab"));
  EXPECT_EQ(&v.mutable_value(), &s);  // the same value, not a copy
  key = 2;                            // another key's value is its own
  EXPECT_FALSE(v.value().has_value());
  v.mutable_value() = "c";
  key = 1;
  EXPECT_EQ(v.value(), std::optional<std::string>("ab"));
  v.clear();
  EXPECT_FALSE(v.value().has_value());
  key = 2;
  EXPECT_EQ(v.value_or("none"), "c");
}

TEST(KeyedStateStore, ValuePtrReadsTheStoredValueWithoutCreatingOne) {
  KeyedStateStore<int> store;
  int key = 1;
  ValueState<int, std::string> v(&store.Table<std::string>("v"), &key);
  EXPECT_EQ(v.value_ptr(), nullptr);  // none, and reading creates none
  EXPECT_TRUE(store.Table<std::string>("v").map.empty());
  v.update("ab");
  const std::string* p = v.value_ptr();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, "ab");
  EXPECT_EQ(p, &v.mutable_value());  // the stored value, not a copy
  key = 2;
  EXPECT_EQ(v.value_ptr(), nullptr);
  key = 1;
  v.clear();
  EXPECT_EQ(v.value_ptr(), nullptr);
}

// Prefetch is a hint: on a table large enough to be prefetched (and on a
// small one) it creates no entry and changes none, for keys present or not;
// only a table past the size loads anything (WorthPrefetching).
TEST(KeyedStateStore, PrefetchChangesNothing) {
  using Value = ValueState<int64_t, int64_t>;
  KeyedStateStore<int64_t> store;
  auto& big = store.HandleTable<int64_t>("big");
  auto& small = store.HandleTable<int64_t>("small");
  EXPECT_FALSE(store.WorthPrefetching()) << "no table is large yet";
  const int64_t n = 3 * (int64_t{1} << 14);  // past the size prefetching starts at
  int64_t key = 0;
  for (key = 0; key < n; ++key) Value(&big, &key).update(key * 2);
  key = 1;
  Value(&small, &key).update(-1);
  ASSERT_GE(big.map.capacity(), (size_t{1} << 14));
  EXPECT_TRUE(big.WorthPrefetching());
  EXPECT_FALSE(small.WorthPrefetching());
  EXPECT_TRUE(store.WorthPrefetching());
  for (int64_t k : std::vector<int64_t>{0, n / 2, n - 1, n, -5, 1}) store.Prefetch(k);
  EXPECT_EQ(big.map.size(), static_cast<size_t>(n));
  EXPECT_EQ(small.map.size(), 1u);
  for (key = 0; key < n; key += 997) EXPECT_EQ(Value(&big, &key).value(), key * 2);
  key = n;
  EXPECT_FALSE(Value(&big, &key).value().has_value());
}

// ProcessEachInline tells an operator with PrefetchFor of every record once,
// before the record is processed and at most kPrefetchAhead records ahead of
// it, whatever the batch's size, in a batch for which WantsPrefetch() is
// true; of none when it is false.
TEST(ProcessEachInline, TellsOfEachRecordOnceAndAheadOfIt) {
  struct Op {
    bool wants = true;
    std::vector<std::pair<char, int>> calls;  // ('p' prefetch | 'e' element, value)
    bool WantsPrefetch() const { return wants; }
    void PrefetchFor(const int& v) { calls.emplace_back('p', v); }
    void ProcessElement(int&& v, Timestamp) { calls.emplace_back('e', v); }
  };
  {
    Op op;
    op.wants = false;
    std::vector<Record<int>> batch;
    for (int i = 0; i < 9; ++i) batch.push_back(Record<int>{i, i});
    ProcessEachInline(op, std::span<Record<int>>(batch), nullptr);
    ASSERT_EQ(op.calls.size(), 9u);
    for (int i = 0; i < 9; ++i) EXPECT_EQ(op.calls[i], std::make_pair('e', i));
  }
  for (int n = 0; n <= 11; ++n) {
    Op op;
    std::vector<Record<int>> batch;
    for (int i = 0; i < n; ++i) batch.push_back(Record<int>{i, i});
    ProcessEachInline(op, std::span<Record<int>>(batch), nullptr);
    std::vector<int> prefetched_at(n, -1), processed_at(n, -1);
    int processed = 0;
    for (size_t c = 0; c < op.calls.size(); ++c) {
      const auto [what, v] = op.calls[c];
      ASSERT_TRUE(v >= 0 && v < n);
      if (what == 'p') {
        EXPECT_EQ(prefetched_at[v], -1) << "record " << v << " prefetched twice (n=" << n << ")";
        prefetched_at[v] = processed;
        EXPECT_LE(v, processed + static_cast<int>(kPrefetchAhead))
            << "too far ahead (n=" << n << ")";
      } else {
        EXPECT_EQ(v, processed) << "records in order";
        processed_at[v] = processed++;
      }
    }
    EXPECT_EQ(processed, n);
    for (int i = 0; i < n; ++i) {
      EXPECT_NE(prefetched_at[i], -1) << "record " << i << " never prefetched (n=" << n << ")";
      EXPECT_LE(prefetched_at[i], processed_at[i]) << "record " << i << " (n=" << n << ")";
    }
  }
}

// TableOn answers repeated lookups from the tables it found last: each name
// still gets its own table, the same one every time, whether it is among the
// last eight or was pushed out; a name asked for with another type throws
// even when it was just found.
TEST(KeyedStateStore, StatesByNameKeepTheirTablesThroughTheRecentLookups) {
  KeyedStateStore<int> store;
  int key = 7;
  constexpr int kNames = 20;  // more than the lookups kept
  std::vector<StateTable<int, VoidNamespace, int64_t>*> first(kNames);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < kNames; ++i) {
      const std::string name = "s" + std::to_string(i);  // a new string each time
      auto& t = store.HandleTable<int64_t>(name);
      if (round == 0) first[i] = &t;
      EXPECT_EQ(&t, first[i]) << name << " in round " << round;
      ValueState<int, int64_t> v(&t, &key);
      v.mutable_value() += i;  // round r leaves (r + 1) * i
    }
  }
  EXPECT_EQ(store.num_tables(), static_cast<size_t>(kNames));
  for (int i = 0; i < kNames; ++i) {
    ValueState<int, int64_t> v(&store.HandleTable<int64_t>("s" + std::to_string(i)), &key);
    EXPECT_EQ(v.value(), std::optional<int64_t>(3 * i)) << "s" << i;
  }
  store.HandleTable<int64_t>("s19");  // among the last found
  EXPECT_THROW(store.HandleTable<std::string>("s19"), std::logic_error);
  EXPECT_THROW(store.HandleTable<std::string>("s0"), std::logic_error);
  // Same name and type through Table (not handles) is the same table.
  EXPECT_EQ(&store.Table<int64_t>("s19"), first[19]);
}

TEST(MapState, DistinctItemsPerKeyAtParallelismOneAndThree) {
  const std::vector<std::string> expected = PlainDistinct();
  ASSERT_EQ(expected.size(), 275u * kKeys + kKeys);  // 275 distinct items per key
  EXPECT_EQ(RunDistinct(1), expected);
  EXPECT_EQ(RunDistinct(3), expected);
}

// reinterpret_as_keyed_stream (Flink's DataStreamUtils.reinterpretAsKeyedStream):
// the output of a keyed operator, keyed again by the same key, feeds the next
// keyed operator in the same task, with the results of key_by.
struct RunningCount : KeyedProcessFunction<int64_t, int64_t, std::pair<int64_t, int64_t>> {
  void process_element(const int64_t& v, Context& ctx,
                       Collector<std::pair<int64_t, int64_t>>& out) override {
    int64_t& n = ctx.get_state<int64_t>("n").mutable_value();
    out.collect({v % 7, ++n});
  }
};
struct RunningCountOfPairs
    : KeyedProcessFunction<int64_t, std::pair<int64_t, int64_t>, std::pair<int64_t, int64_t>> {
  void process_element(const std::pair<int64_t, int64_t>& v, Context& ctx,
                       Collector<std::pair<int64_t, int64_t>>& out) override {
    int64_t& n = ctx.get_state<int64_t>("n").mutable_value();
    out.collect({v.first, ++n});
  }
};
std::vector<std::pair<int64_t, int64_t>> TopCounts(bool reinterpret, std::string* plan) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  std::vector<int64_t> in;
  for (int64_t i = 0; i < 700; ++i) in.push_back(i * 13 % 700);
  auto counts = env.from_collection(in)
                    .rebalance()
                    .key_by([](const int64_t& v) { return v % 7; })
                    .process(RunningCount());
  auto key = [](const std::pair<int64_t, int64_t>& c) { return c.first; };
  auto by_count = [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b) {
    return a.second > b.second;
  };
  auto top = reinterpret ? counts.reinterpret_as_keyed_stream(key).top_n(1, by_count)
                         : counts.key_by(key).top_n(1, by_count);
  auto out = top.collect();
  if (plan != nullptr) *plan = env.explain();
  EXPECT_TRUE(env.execute().ok());
  std::map<int64_t, int64_t> table;  // the final table of the changelog
  for (const auto& item : out->items()) {
    const auto& c = item.value;
    if (c.kind == RowKind::kInsert) {
      EXPECT_TRUE(table.emplace(c.row.first, c.row.second).second);
    } else {
      EXPECT_EQ(table.erase(c.row.first), 1u);
    }
  }
  return {table.begin(), table.end()};
}

TEST(ReinterpretAsKeyedStream, RunsTheNextKeyedOperatorInTheSameTaskWithKeyBysResults) {
  std::string plan;
  const auto reinterpreted = TopCounts(true, &plan);
  EXPECT_EQ(reinterpreted, TopCounts(false, nullptr));
  EXPECT_EQ(reinterpreted.size(), 7u);
  for (const auto& [key, count] : reinterpreted) EXPECT_EQ(count, 100) << key;
  // One shuffle (the first key_by), the second keyed operator chained.
  EXPECT_THAT(plan, ::testing::HasSubstr("KeyedProcess -> ReinterpretAsKeyedStream -> TopN"));
  EXPECT_EQ(plan.find("HASH"), plan.rfind("HASH")) << plan;
}

TEST(ReinterpretAsKeyedStream, AStreamNotPartitionedByTheKeyFailsTheJob) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  std::vector<int64_t> in;
  for (int64_t i = 0; i < 100; ++i) in.push_back(i);
  env.from_collection(in)
      .rebalance()
      .reinterpret_as_keyed_stream([](const int64_t& v) { return v; })
      .process(RunningCount())
      .add_sink([](std::pair<int64_t, int64_t>&&) {});
  JobResult r = env.execute();
  ASSERT_FALSE(r.ok());
  const std::string message(r.status.message());
  EXPECT_THAT(message,
              ::testing::ContainsRegex("reinterpret_as_keyed_stream: a record of key group [0-9]+ "
                                       "reached subtask [01], which owns key groups"));
  EXPECT_THAT(message, ::testing::HasSubstr("use key_by"));
}

// 0 .. n - 1 as (v % keys, 1), rebalanced, counted per key by a keyed
// process function (whose output is keyed by the same key).
auto RunningCounts(StreamExecutionEnvironment& env, int64_t n, int64_t keys) {
  std::vector<int64_t> in;
  for (int64_t i = 0; i < n; ++i) in.push_back(i);
  return env.from_collection(in)
      .rebalance()
      .map([keys](const int64_t& v) {
        return std::pair<int64_t, int64_t>{v % keys, 1};
      })
      .key_by([](const std::pair<int64_t, int64_t>& p) { return p.first; })
      .process(RunningCountOfPairs());
}

// The check takes the key groups of the keyed operator after it: with its
// own max parallelism, a stream partitioned for another one fails the job (the
// operator's state would be split between subtasks, and a restore would drop
// what is not in a subtask's key groups); with the same one, it runs.
JobResult RunWithMaxParallelism(int upstream, int downstream, std::string* plan_error) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto counts = RunningCounts(env, 1000, 100);
  if (upstream > 0) counts.set_max_parallelism(upstream);
  auto reinterpreted = counts.reinterpret_as_keyed_stream(
      [](const std::pair<int64_t, int64_t>& c) { return c.first; });
  auto top = reinterpreted.top_n(
      1, [](const std::pair<int64_t, int64_t>& a, const std::pair<int64_t, int64_t>& b) {
        return a.second > b.second;
      });
  if (downstream > 0) top.set_max_parallelism(downstream);
  top.add_sink([](Changelog<std::pair<int64_t, int64_t>>&&) {});
  if (plan_error != nullptr) {
    // A second consumer of the same keyed stream with another max parallelism.
    reinterpreted.process(RunningCountOfPairs())
        .set_max_parallelism(512)
        .add_sink([](std::pair<int64_t, int64_t>&&) {});
    *plan_error = env.explain();
  }
  return env.execute();
}

// The check runs at its input's parallelism; the keyed operator after it
// must have the same (a forward edge), as in Flink.
TEST(ReinterpretAsKeyedStream, TheCheckRunsAtItsInputsParallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto counts = RunningCounts(env, 300, 30).set_parallelism(3);
  auto key = [](const std::pair<int64_t, int64_t>& c) { return c.first; };
  auto mismatched = counts.reinterpret_as_keyed_stream(key).process(RunningCountOfPairs());
  EXPECT_THAT(env.explain(), ::testing::HasSubstr("'ReinterpretAsKeyedStream' has 3"));
  mismatched.set_parallelism(3);
  auto out = mismatched.collect();
  EXPECT_THAT(env.explain(), ::testing::HasSubstr("ReinterpretAsKeyedStream -> KeyedProcess"));
  ASSERT_TRUE(env.execute().ok());
  std::map<int64_t, int64_t> last;
  for (const auto& item : out->items())
    last[item.value.first] = std::max(last[item.value.first], item.value.second);
  EXPECT_EQ(last.size(), 30u);
  for (const auto& [k, n] : last) EXPECT_EQ(n, 10) << k;
}

TEST(ReinterpretAsKeyedStream, ChecksTheKeyGroupsOfTheKeyedOperatorAfterIt) {
  const JobResult plain = RunWithMaxParallelism(0, 0, nullptr);
  EXPECT_TRUE(plain.ok()) << plain.status;
  EXPECT_TRUE(RunWithMaxParallelism(256, 256, nullptr).ok());
  // Partitioned for 128 key groups (the default at p=2), the operator after
  // it owns them by 256: refused (it ran, and a restore lost counts).
  JobResult r = RunWithMaxParallelism(0, 256, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("of the keyed operator after it (max parallelism 256)"));
  EXPECT_FALSE(RunWithMaxParallelism(256, 0, nullptr).ok());
  std::string plan;
  RunWithMaxParallelism(0, 0, &plan);
  EXPECT_THAT(plan, ::testing::HasSubstr("consume one keyed stream (ReinterpretAsKeyedStream) "
                                         "with max parallelism 128 and 512"));
}

}  // namespace
}  // namespace tidemark
