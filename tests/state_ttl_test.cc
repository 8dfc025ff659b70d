// State time-to-live (StateTtlConfig, operators/keyed/keyed_state_store.h):
// the TTL handles on a store with a manual clock (expiry, update types,
// visibility, per-element list and per-entry map expiry, reducing and
// aggregating state), checkpoints that keep the last access times and leave
// expired values out with cleanup_full_snapshot, and a keyed process function
// with TTL state on the real runtime against a plain computation.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using Update = StateTtlConfig::UpdateType;
using Visibility = StateTtlConfig::StateVisibility;

StateTtlConfig Ttl(int64_t ms, Update u = Update::OnCreateAndWrite,
                   Visibility v = Visibility::NeverReturnExpired, bool full_snapshot = false) {
  auto b = StateTtlConfig::new_builder(Duration(ms)).set_update_type(u).set_state_visibility(v);
  if (full_snapshot) b.cleanup_full_snapshot();
  return b.build();
}

TEST(StateTtlConfig, BuilderAndValidation) {
  const StateTtlConfig c = StateTtlConfig::new_builder(Duration(500))
                               .update_ttl_on_read_and_write()
                               .return_expired_if_not_cleaned_up()
                               .cleanup_full_snapshot()
                               .build();
  EXPECT_EQ(c.ttl_millis(), 500);
  EXPECT_EQ(c.update_type(), Update::OnReadAndWrite);
  EXPECT_EQ(c.state_visibility(), Visibility::ReturnExpiredIfNotCleanedUp);
  EXPECT_TRUE(c.cleanup_in_full_snapshot());
  const StateTtlConfig d = StateTtlConfig::new_builder(Duration(1)).build();
  EXPECT_EQ(d.update_type(), Update::OnCreateAndWrite);
  EXPECT_EQ(d.state_visibility(), Visibility::NeverReturnExpired);
  EXPECT_FALSE(d.cleanup_in_full_snapshot());
  EXPECT_THROW(StateTtlConfig::new_builder(Duration(0)), std::invalid_argument);
}

TEST(TtlValueState, ExpiresTtlAfterTheLastWriteAndIsRemovedWhenRead) {
  ManualClock clock(1000);
  KeyedStateStore<std::string> store;
  const std::string a = "a", b = "b";
  auto& table = store.Table<TtlValue<int>>("v");
  TtlValueState<std::string, int> va(&table, &a, Ttl(100), &clock);
  TtlValueState<std::string, int> vb(&table, &b, Ttl(100), &clock);
  EXPECT_EQ(va.value(), std::nullopt);
  va.update(1);
  clock.Set(1050);
  vb.update(2);
  clock.Set(1099);
  EXPECT_EQ(va.value(), 1);  // a read does not restart the clock (OnCreateAndWrite)
  clock.Set(1100);           // 1000 + 100 <= 1100: expired
  EXPECT_EQ(va.value(), std::nullopt);
  EXPECT_EQ(va.value_or(7), 7);
  EXPECT_EQ(table.map.size(), 1u);  // a's entry is gone, b's stays
  EXPECT_EQ(vb.value(), 2);
  vb.update(3);  // a write restarts it
  clock.Set(1199);
  EXPECT_EQ(vb.value(), 3);
  clock.Set(1200);
  EXPECT_EQ(vb.value(), std::nullopt);
  EXPECT_TRUE(table.map.empty());
}

TEST(TtlValueState, OnReadAndWriteRestartsTheClockOnEveryRead) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  TtlValueState<int, std::string> v(&store.Table<TtlValue<std::string>>("v"), &k,
                                    Ttl(100, Update::OnReadAndWrite), &clock);
  v.update("x");
  clock.Set(80);
  EXPECT_EQ(v.value(), "x");  // now lives until 180
  clock.Set(179);
  EXPECT_EQ(v.value(), "x");  // until 279
  clock.Set(279);
  EXPECT_EQ(v.value(), std::nullopt);
}

TEST(TtlValueState, ReturnExpiredIfNotCleanedUpReturnsItOnceThenItIsGone) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  TtlValueState<int, int> v(
      &store.Table<TtlValue<int>>("v"), &k,
      Ttl(100, Update::OnCreateAndWrite, Visibility::ReturnExpiredIfNotCleanedUp), &clock);
  v.update(5);
  clock.Set(500);
  EXPECT_EQ(v.value(), 5);  // expired but still stored: returned, and cleaned up
  EXPECT_EQ(v.value(), std::nullopt);
}

TEST(TtlListState, EachElementExpiresOnItsOwn) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  auto& table = store.Table<std::vector<TtlValue<std::string>>>("l");
  TtlListState<int, std::string> l(&table, &k, Ttl(100), &clock);
  EXPECT_TRUE(l.get().empty());
  l.add("a");
  clock.Set(50);
  l.add_all({"b", "c"});
  clock.Set(99);
  EXPECT_EQ(l.get(), (std::vector<std::string>{"a", "b", "c"}));
  clock.Set(100);
  EXPECT_EQ(l.get(), (std::vector<std::string>{"b", "c"}));
  // A read leaves the list as it is with OnCreateAndWrite (Flink's
  // TtlListState rewrites it only with OnReadAndWrite): "a" stays stored.
  EXPECT_EQ(table.map.at(k).size(), 3u);
  clock.Set(120);
  l.add("d");
  clock.Set(150);
  EXPECT_EQ(l.get(), (std::vector<std::string>{"d"}));
  l.update({"e"});
  clock.Set(250);
  EXPECT_TRUE(l.get().empty());
  EXPECT_TRUE(table.map.empty());
}

TEST(TtlListState, OnReadAndWriteAndReturnExpired) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  TtlListState<int, int> l(
      &store.Table<std::vector<TtlValue<int>>>("l"), &k,
      Ttl(100, Update::OnReadAndWrite, Visibility::ReturnExpiredIfNotCleanedUp), &clock);
  l.add(1);
  clock.Set(60);
  l.add(2);
  clock.Set(90);
  EXPECT_EQ(l.get(), (std::vector<int>{1, 2}));  // both read: both live until 190
  clock.Set(189);
  EXPECT_EQ(l.get(), (std::vector<int>{1, 2}));  // until 289
  clock.Set(300);
  EXPECT_EQ(l.get(), (std::vector<int>{1, 2}));  // expired, returned once
  EXPECT_TRUE(l.get().empty());
}

// ReturnExpiredIfNotCleanedUp with OnCreateAndWrite: an expired element is
// returned as long as it is stored, which a read does not change (Flink's
// TtlListState; it was returned once and then dropped).
TEST(TtlListState, ReturnExpiredKeepsReturningAnElementAReadLeavesStored) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  auto& table = store.Table<std::vector<TtlValue<std::string>>>("l");
  TtlListState<int, std::string> l(
      &table, &k, Ttl(1000, Update::OnCreateAndWrite, Visibility::ReturnExpiredIfNotCleanedUp),
      &clock);
  l.add("x");
  clock.Set(600);
  l.add("w");
  clock.Set(1100);
  EXPECT_EQ(l.get(), (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(l.get(), (std::vector<std::string>{"x", "w"}));
  clock.Set(1600);  // both expired: returned, and the list cleared
  EXPECT_EQ(l.get(), (std::vector<std::string>{"x", "w"}));
  EXPECT_TRUE(l.get().empty());
  EXPECT_TRUE(table.map.empty());
}

TEST(TtlMapState, EachEntryExpiresOnItsOwn) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  auto& table = store.Table<std::map<std::string, TtlValue<int>>>("m");
  TtlMapState<int, std::string, int> m(&table, &k, Ttl(100), &clock);
  EXPECT_TRUE(m.is_empty());
  m.put("x", 1);
  clock.Set(60);
  m.put("y", 2);
  m.put_all(std::map<std::string, int>{{"z", 3}});
  clock.Set(99);
  EXPECT_EQ(m.entries(), (std::map<std::string, int>{{"x", 1}, {"y", 2}, {"z", 3}}));
  clock.Set(100);
  EXPECT_FALSE(m.contains("x"));
  EXPECT_EQ(m.get("x"), std::nullopt);
  EXPECT_EQ(m.get("y"), 2);
  EXPECT_EQ(m.keys(), (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(m.values(), (std::vector<int>{2, 3}));
  m.put("y", 20);  // restarts y only
  m.remove("nothing");
  clock.Set(160);
  EXPECT_EQ(m.entries(), (std::map<std::string, int>{{"y", 20}}));
  m.remove("y");
  EXPECT_TRUE(m.is_empty());
  EXPECT_TRUE(table.map.empty());
}

TEST(TtlReducingAndAggregatingState, AnExpiredValueIsNotAddedTo) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  auto sum = [](int a, int b) { return a + b; };
  TtlReducingState<int, int, decltype(sum)> r(&store.Table<TtlValue<int>>("r"), &k, sum, Ttl(100),
                                              &clock);
  r.add(1);
  clock.Set(50);
  r.add(2);  // 3, written at 50
  clock.Set(149);
  EXPECT_EQ(r.get(), 3);
  clock.Set(150);
  EXPECT_EQ(r.get(), std::nullopt);
  r.add(5);
  clock.Set(300);
  r.add(7);  // 5 expired at 250: starts afresh
  EXPECT_EQ(r.get(), 7);

  struct Count {
    int64_t create_accumulator() const { return 0; }
    int64_t add(const std::string&, int64_t n) const { return n + 1; }
    std::string get_result(const int64_t& n) const { return std::to_string(n); }
  };
  TtlAggregatingState<int, Count> a(&store.Table<TtlValue<int64_t>>("a"), &k, Count{}, Ttl(100),
                                    &clock);
  a.add("p");
  a.add("q");
  EXPECT_EQ(a.get(), "2");
  clock.Set(400);
  a.add("r");  // the old count expired at 400
  EXPECT_EQ(a.get(), "1");
  clock.Set(500);
  EXPECT_EQ(a.get(), std::nullopt);
}

// With ReturnExpiredIfNotCleanedUp an expired value still stored is added
// to (Flink's TtlReduceFunction and TtlAggregateFunction take it through
// getUnexpired, which returns it then).
TEST(TtlReducingAndAggregatingState, ReturnExpiredAddsToAnExpiredValueStillStored) {
  ManualClock clock(0);
  KeyedStateStore<int> store;
  const int k = 1;
  const StateTtlConfig ttl =
      Ttl(1000, Update::OnCreateAndWrite, Visibility::ReturnExpiredIfNotCleanedUp);
  auto sum = [](int a, int b) { return a + b; };
  TtlReducingState<int, int, decltype(sum)> r(&store.Table<TtlValue<int>>("r"), &k, sum, ttl,
                                              &clock);
  struct Sum {
    int64_t create_accumulator() const { return 0; }
    int64_t add(int v, int64_t n) const { return n + v; }
    int64_t get_result(const int64_t& n) const { return n; }
  };
  TtlAggregatingState<int, Sum> a(&store.Table<TtlValue<int64_t>>("a"), &k, Sum{}, ttl, &clock);
  r.add(5);
  a.add(5);
  clock.Set(5000);
  r.add(7);
  a.add(7);
  EXPECT_EQ(r.get(), 12);
  EXPECT_EQ(a.get(), 12);
}

TEST(StateTtl, ANameIsUsedWithATtlOrWithout) {
  KeyedStateStore<int> store;
  store.Table<int>("s");
  EXPECT_THROW(store.Table<TtlValue<int>>("s"), std::logic_error);
}

// Snapshot of a store with TTL state of every shape at `at`.
std::string SnapshotAt(ManualClock& clock, const StateTtlConfig& ttl, Timestamp at) {
  KeyedStateStore<int> store;
  const int k = 1, j = 2;
  clock.Set(0);
  TtlValueState<int, int>(&store.Table<TtlValue<int>>("v"), &k, ttl, &clock).update(10);
  TtlListState<int, int> l(&store.Table<std::vector<TtlValue<int>>>("l"), &k, ttl, &clock);
  l.add(1);
  TtlMapState<int, int, int> m(&store.Table<std::map<int, TtlValue<int>>>("m"), &k, ttl, &clock);
  m.put(1, 1);
  clock.Set(40);
  TtlValueState<int, int>(&store.Table<TtlValue<int>>("v"), &j, ttl, &clock).update(20);
  l.add(2);
  m.put(2, 2);
  clock.Set(at);
  std::string bytes;
  StateWriter w(&bytes);
  store.Snapshot(w, "test");
  return bytes;
}

struct Restored {
  std::optional<int> v1, v2;
  std::vector<int> list;
  std::map<int, int> map;
};
// Restores `bytes` into a fresh store and reads everything at `at` with
// visibility ReturnExpiredIfNotCleanedUp (so what a read misses was not in
// the checkpoint).
Restored RestoreAndRead(const std::string& bytes, ManualClock& clock, Timestamp at) {
  KeyedStateStore<int> store;
  StateReader r(bytes);
  store.Restore(r, KeyGroupRange::All());
  EXPECT_TRUE(r.ok()) << r.error();
  clock.Set(at);
  const StateTtlConfig ttl =
      Ttl(100, Update::OnCreateAndWrite, Visibility::ReturnExpiredIfNotCleanedUp);
  const int k = 1, j = 2;
  Restored out;
  out.v1 = TtlValueState<int, int>(&store.Table<TtlValue<int>>("v"), &k, ttl, &clock).value();
  out.v2 = TtlValueState<int, int>(&store.Table<TtlValue<int>>("v"), &j, ttl, &clock).value();
  out.list =
      TtlListState<int, int>(&store.Table<std::vector<TtlValue<int>>>("l"), &k, ttl, &clock).get();
  out.map =
      TtlMapState<int, int, int>(&store.Table<std::map<int, TtlValue<int>>>("m"), &k, ttl, &clock)
          .entries();
  return out;
}

TEST(StateTtl, ACheckpointKeepsTheLastAccessTimes) {
  ManualClock clock;
  const std::string bytes = SnapshotAt(clock, Ttl(100), 50);
  // Restored with the times they were written at (0 and 40), not the
  // restore's: at 99 all live, NeverReturnExpired reads show it.
  {
    KeyedStateStore<int> store;
    StateReader r(bytes);
    store.Restore(r, KeyGroupRange::All());
    ASSERT_TRUE(r.ok());
    const int k = 1, j = 2;
    auto value = [&](const int& key) {
      return TtlValueState<int, int>(&store.Table<TtlValue<int>>("v"), &key, Ttl(100), &clock)
          .value();
    };
    auto list = [&](const int& key) {
      return TtlListState<int, int>(&store.Table<std::vector<TtlValue<int>>>("l"), &key, Ttl(100),
                                    &clock)
          .get();
    };
    clock.Set(99);
    EXPECT_EQ(value(k), 10);
    clock.Set(100);
    EXPECT_EQ(value(k), std::nullopt);
    EXPECT_EQ(value(j), 20);
    EXPECT_EQ(list(k), (std::vector<int>{2}));
    clock.Set(140);
    EXPECT_EQ(value(j), std::nullopt);
  }
  // Without cleanup in full snapshot, a snapshot taken after expiry still
  // holds the expired values.
  const Restored all = RestoreAndRead(SnapshotAt(clock, Ttl(100), 120), clock, 120);
  EXPECT_EQ(all.v1, 10);
  EXPECT_EQ(all.v2, 20);
  EXPECT_EQ(all.list, (std::vector<int>{1, 2}));
  EXPECT_EQ(all.map, (std::map<int, int>{{1, 1}, {2, 2}}));
}

TEST(StateTtl, CleanupInFullSnapshotLeavesExpiredValuesOut) {
  ManualClock clock;
  const StateTtlConfig ttl =
      Ttl(100, Update::OnCreateAndWrite, Visibility::NeverReturnExpired, /*full_snapshot=*/true);
  // At 120 what was written at 0 has expired, what was written at 40 has
  // not: only that is in the checkpoint.
  const Restored live = RestoreAndRead(SnapshotAt(clock, ttl, 120), clock, 120);
  EXPECT_EQ(live.v1, std::nullopt);
  EXPECT_EQ(live.v2, 20);
  EXPECT_EQ(live.list, (std::vector<int>{2}));
  EXPECT_EQ(live.map, (std::map<int, int>{{2, 2}}));
  // At 140 nothing is left.
  const Restored none = RestoreAndRead(SnapshotAt(clock, ttl, 140), clock, 140);
  EXPECT_EQ(none.v1, std::nullopt);
  EXPECT_EQ(none.v2, std::nullopt);
  EXPECT_TRUE(none.list.empty());
  EXPECT_TRUE(none.map.empty());
}

// On the runtime: per key, "hit" when the key's last record was less than
// the TTL ago (processing time), else "miss".  The clock is the operator's
// (env.set_clock); the function sets it from each record, so the test needs
// no sleeps: records reach the one keyed subtask in order.
struct Visit {
  int key;
  int64_t now;
};

TEST(StateTtl, KeyedProcessFunctionOnTheOperatorsClock) {
  ManualClock clock(0);
  std::vector<Visit> visits;
  for (int i = 0; i < 200; ++i) visits.push_back({i % 4, i * 37 + (i % 7) * 11});
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_clock(&clock).set_auto_watermark_interval(Duration(0));
  const StateTtlConfig ttl = StateTtlConfig::new_builder(Duration(150)).build();
  struct LastVisit {
    StateTtlConfig ttl;
    ManualClock* clock;
    void process_element(const Visit& v, KeyedProcessContext<int>& ctx,
                         Collector<std::string>& out) {
      clock->Set(v.now);
      auto last = ctx.get_state<int64_t>("last", ttl);
      out.collect(std::to_string(v.key) + "@" + std::to_string(v.now) +
                  (last.value() ? " hit" : " miss"));
      last.update(v.now);
    }
  };
  auto got = env.from_collection(visits)
                 .key_by([](const Visit& v) { return v.key; })
                 .process(LastVisit{ttl, &clock})
                 .collect();
  ASSERT_TRUE(env.execute("ttl").ok());
  std::vector<std::string> expected;
  std::map<int, int64_t> last;
  for (const Visit& v : visits) {
    auto it = last.find(v.key);
    const bool hit = it != last.end() && v.now < it->second + 150;
    expected.push_back(std::to_string(v.key) + "@" + std::to_string(v.now) +
                       (hit ? " hit" : " miss"));
    last[v.key] = v.now;
  }
  EXPECT_EQ(got->values(), expected);
  int hits = 0;
  for (const auto& s : expected) hits += s.ends_with("hit");
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 200);
}

}  // namespace
}  // namespace tidemark
