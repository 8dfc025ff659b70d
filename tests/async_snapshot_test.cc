// Asynchronous snapshots (docs/checkpoints.md, "The snapshot's phases"):
// StateWriter's deferred parts, the copy-on-write SlotList and
// TimeWindowTable (operators/window/time_window_table.h), and a concurrency
// test that writes a table on one thread while another encodes its snapshot;
// the same for the keyed state of handles (KeyedStateStore's copy-on-write
// layers, operators/keyed/keyed_state_store.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "async_snapshot_util.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/window/time_window_table.h"
#include "tidemark/operators/window/window_contents.h"
#include "tidemark/runtime/state/detail/snapshot_pool.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {
namespace {

using internal::AsyncSnapshots;
using internal::CowEpoch;
using internal::KeyedStateStore;
using internal::KeyGroupRange;
using internal::SlotList;
using internal::SnapshotPool;
using internal::StateReader;
using internal::StateWriter;
using internal::TimeWindowTable;

// --- StateWriter::Defer ---------------------------------------------------

TEST(StateWriterDefer, PartsGoWhereTheyWereDeferredWhenCompletedLater) {
  StateWriter w;
  w.PutU8('a');
  w.Defer([](StateWriter& out) { out.PutRaw("XY", 2); });
  w.PutU8('b');
  w.Defer([](StateWriter& out) {
    out.PutU8('Z');
    out.Defer([](StateWriter& inner) { inner.PutU8('!'); });  // a part of a part
  });
  w.PutU8('c');
  ASSERT_TRUE(w.has_deferred());
  std::vector<StateWriter::Deferred> parts = w.TakeDeferred();
  EXPECT_FALSE(w.has_deferred());
  EXPECT_EQ(w.size(), 3u);
  std::string sync = w.Release();
  EXPECT_EQ(sync, "abc");
  EXPECT_EQ(StateWriter::CompleteDeferred(std::move(sync), std::move(parts)), "aXYbZ!c");
}

TEST(StateWriterDefer, ReleaseAndDataRunPendingPartsAndACallersStringGetsThemAtOnce) {
  StateWriter w;
  w.PutU8('a');
  w.Defer([](StateWriter& out) { out.PutU8('b'); });
  w.PutU8('c');
  EXPECT_EQ(w.data(), "abc");
  EXPECT_FALSE(w.has_deferred());

  std::string mine;
  StateWriter into(&mine);
  into.PutU8('x');
  into.Defer([](StateWriter& out) { out.PutU8('y'); });
  EXPECT_FALSE(into.has_deferred());
  EXPECT_EQ(mine, "xy");
}

// PutBytesWith writes the bytes PutBytes writes, whatever the guess: lengths
// whose varints take 1, 2 and 3 bytes, each with guesses of every width.
TEST(StateWriterPutBytesWith, SameBytesAsPutBytesForAnyGuess) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{300}, size_t{16383},
                   size_t{16384}, size_t{70000}}) {
    const std::string payload(n, 'p');
    StateWriter expected;
    expected.PutU8('<');
    expected.PutBytes(payload);
    expected.PutU8('>');
    for (size_t guess : {size_t{0}, size_t{5}, size_t{200}, size_t{20000}, size_t{3000000}}) {
      StateWriter w;
      w.PutU8('<');
      w.PutBytesWith(guess, [&](StateWriter& out) { out.PutRaw(payload.data(), payload.size()); });
      w.PutU8('>');
      ASSERT_EQ(w.data(), expected.data()) << "length " << n << ", guess " << guess;
      StateReader r(w.data());
      EXPECT_EQ(r.GetU8(), '<');
      EXPECT_EQ(r.GetBytes(), payload);
      EXPECT_EQ(r.GetU8(), '>');
      EXPECT_TRUE(r.AtEnd());
    }
  }
}

TEST(StateWriterPutBytesWith, ABytesPartThatDefersIsRefused) {
  StateWriter w;
  EXPECT_THROW(w.PutBytesWith(4, [](StateWriter& out) { out.Defer([](StateWriter&) {}); }),
               std::logic_error);
}

// --- copy-on-write SlotList ---------------------------------------------------

using Pair = std::pair<int64_t, int64_t>;
constexpr uint32_t kManySlots = 16 * 15 + 5 * 256 + 7;  // growing chunks, then 6 of 256

std::vector<Pair> Contents(const SlotList<Pair>::View& v) {
  std::vector<Pair> out;
  v.ForEach([&](const Pair& p) { out.push_back(p); });
  return out;
}

TEST(CowSlotList, AViewKeepsTheSlotsOfItsTimeWhileTheListIsWrittenAndAppended) {
  CowEpoch epoch;
  SlotList<Pair> list;
  for (uint32_t i = 0; i < kManySlots; ++i) list.push_back({i, i}, epoch.version());
  auto guard = epoch.BeginSnapshot();
  const SlotList<Pair>::View view = list.Share();
  std::vector<Pair> expected;
  for (uint32_t i = 0; i < kManySlots; ++i) expected.push_back({i, i});

  for (uint32_t i = 0; i < kManySlots; i += 3) list.Mutable(i, epoch).second = -1;
  for (uint32_t i = 0; i < 300; ++i) list.push_back({-5, -5}, epoch.version());
  EXPECT_EQ(view.size(), kManySlots);
  EXPECT_EQ(Contents(view), expected);
  for (uint32_t i = 0; i < kManySlots; ++i)
    ASSERT_EQ(list[i].second, i % 3 == 0 ? -1 : static_cast<int64_t>(i)) << i;
  EXPECT_EQ(list.size(), kManySlots + 300);
}

TEST(CowSlotList, ACopiedChunkIsNotCopiedAgainAndNothingIsCopiedOnceNoSnapshotReads) {
  CowEpoch epoch;
  SlotList<Pair> list;
  for (uint32_t i = 0; i < kManySlots; ++i) list.push_back({i, i}, epoch.version());
  const Pair* before = &list[500];
  // No snapshot: written in place.
  EXPECT_EQ(&list.Mutable(500, epoch), before);

  auto guard = epoch.BeginSnapshot();
  auto view = list.Share();
  Pair* copied = &list.Mutable(500, epoch);
  EXPECT_NE(copied, before) << "a chunk a snapshot reads is copied before it is written";
  EXPECT_EQ(&list.Mutable(501, epoch), copied + 1) << "the copy is of the whole chunk";
  EXPECT_EQ(&list.Mutable(500, epoch), copied) << "and it is made once";
  EXPECT_EQ(epoch.live_snapshots(), 1);

  guard.reset();  // the snapshot is done with its chunks
  EXPECT_EQ(epoch.live_snapshots(), 0);
  const Pair* other = &list[1000];
  EXPECT_EQ(&list.Mutable(1000, epoch), other) << "not copied once no snapshot reads";
  EXPECT_EQ(Contents(view)[500], Pair(500, 500));
}

TEST(CowSlotList, EveryElementIsDestroyedOnceWhenViewsOutliveTheList) {
  struct Counted {
    Counted(int v, int* live) : v(v), live(live) { ++*live; }
    Counted(const Counted& o) : v(o.v), live(o.live) { ++*live; }
    Counted(Counted&& o) noexcept : v(o.v), live(o.live) { ++*live; }
    Counted& operator=(const Counted&) = default;
    ~Counted() { --*live; }
    int v;
    int* live;
  };
  int live = 0;
  {
    SlotList<Counted>::View view;
    {
      CowEpoch epoch;
      SlotList<Counted> list;
      for (int i = 0; i < 1000; ++i) list.push_back(Counted(i, &live), epoch.version());
      EXPECT_EQ(live, 1000);
      auto guard = epoch.BeginSnapshot();
      view = list.Share();
      list.Mutable(10, epoch).v = -1;   // copies chunk 0 (16 slots)
      list.Mutable(700, epoch).v = -1;  // and one of 256
      EXPECT_EQ(live, 1000 + 16 + 256);
      list.pop_back();
      EXPECT_EQ(live, 999 + 16 + 256);
    }
    // The list is gone; the view holds the chunks it shared.
    int n = 0;
    view.ForEach([&](const Counted& c) { EXPECT_EQ(c.v, n++); });
    EXPECT_EQ(n, 1000);
  }
  EXPECT_EQ(live, 0);
}

// --- TimeWindowTable ----------------------------------------------------------

using Table = TimeWindowTable<int64_t, int64_t>;

void Add(Table& t, int64_t key, int64_t window, int64_t v) {
  auto [value, created] = t.FindOrCreate(key, TimeWindow(window * 10, window * 10 + 10),
                                         kMinTimestamp, [&] { return v; });
  if (!created) *value += v;
}

std::string SyncEncoding(Table& t) {
  StateWriter w;
  t.SnapshotTo(w);
  return w.Release();  // the deferred part runs here, at once
}

TEST(TimeWindowTableSnapshot, TheDeferredPartEncodesTheTableAsItWasAtTheSnapshot) {
  Table t;
  for (int64_t k = 0; k < 5000; ++k) Add(t, k, k % 3, k);
  const std::string at_barrier = SyncEncoding(t);
  EXPECT_EQ(t.live_snapshots(), 0);

  StateWriter w;
  t.SnapshotTo(w);
  auto parts = w.TakeDeferred();
  ASSERT_FALSE(parts.empty()) << "copyable keys and values: the encoding is deferred";
  std::string sync = w.Release();
  EXPECT_LT(sync.size(), 16u) << "the synchronous part encodes nothing of the contents";
  EXPECT_EQ(t.live_snapshots(), 1);
  // After the barrier: updates, new keys, a new window, a window dropped.
  for (int64_t k = 0; k < 7000; k += 2) Add(t, k, k % 3, 1000);
  Add(t, 1, 9, 1);
  t.Erase(t.begin());
  EXPECT_NE(SyncEncoding(t), at_barrier);

  EXPECT_EQ(StateWriter::CompleteDeferred(std::move(sync), std::move(parts)), at_barrier);
  EXPECT_EQ(t.live_snapshots(), 0) << "the parts let go of the chunks once run";

  // And the bytes restore the table of the barrier.
  Table back;
  StateReader r(at_barrier);
  back.RestoreFrom(r, KeyGroupRange::All());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(SyncEncoding(back), at_barrier);
}

// The deferred encoding of a large table writes into a buffer recycled from
// an earlier checkpoint (state_codec.h, TakeEncodeBuffer): the pool's buffer
// is taken (its old bytes gone) and the encoding is byte for byte the
// synchronous one.
TEST(TimeWindowTableSnapshot, ALargeEncodingWritesIntoARecycledBufferExactly) {
  internal::ReleaseEncodeBuffers();
  Table t;
  for (int64_t k = 0; k < 100000; ++k) Add(t, k, k % 4, k * 7);  // ~1.6 MB encoded
  const std::string at_barrier = SyncEncoding(t);
  ASSERT_GT(at_barrier.size(), size_t{1} << 20);
  std::string old(size_t{4} << 20, 'Z');  // a dropped checkpoint's bytes
  const char* old_data = old.data();
  internal::RecycleEncodeBuffer(std::move(old));
  ASSERT_EQ(internal::PooledEncodeBufferBytes(), size_t{4} << 20);

  StateWriter w;
  t.SnapshotTo(w);
  auto parts = w.TakeDeferred();
  ASSERT_FALSE(parts.empty());
  const std::string done = StateWriter::CompleteDeferred(w.Release(), std::move(parts));
  EXPECT_EQ(done.data(), old_data) << "the encoding went into the recycled buffer";
  EXPECT_EQ(internal::PooledEncodeBufferBytes(), 0u);
  EXPECT_EQ(done, at_barrier);
}

// Concurrency: the task thread (here) keeps writing the table -- updating
// values, adding keys and windows, dropping the oldest window -- while the
// snapshot pool encodes the snapshot taken at each "barrier"; each
// snapshot must equal the table's synchronous encoding at its barrier.
TEST(TimeWindowTableSnapshot, ConcurrentWritesNeverReachASnapshotBeingEncoded) {
  constexpr int kSnapshots = 150;
  constexpr int64_t kKeys = 3000;
  Table t;
  std::mt19937_64 rng(26);
  int64_t next_window = 0;
  for (int w = 0; w < 3; ++w, ++next_window)
    for (int64_t k = 0; k < kKeys; ++k) Add(t, k, next_window, 1);

  SnapshotPool pool(2);
  AsyncSnapshots in_flight;
  std::vector<std::string> expected(kSnapshots), got(kSnapshots);
  std::atomic<int> done{0};
  for (int s = 0; s < kSnapshots; ++s) {
    expected[s] = SyncEncoding(t);
    StateWriter w;
    t.SnapshotTo(w);
    testing::CompleteOnPool(w, pool, in_flight, &got[s], &done);
    // Writes while the pool encodes: every slot of the newest windows, new
    // keys, sometimes a new window and the oldest one dropped.
    const int writes = 2000 + static_cast<int>(rng() % 4000);
    for (int i = 0; i < writes; ++i) {
      const int64_t window = next_window - 1 - static_cast<int64_t>(rng() % 3);
      Add(t, static_cast<int64_t>(rng() % (kKeys + 500)), window,
          1 + static_cast<int64_t>(rng() % 7));
    }
    if (s % 10 == 9) {
      t.Erase(t.begin());
      ++next_window;
    }
  }
  in_flight.AwaitAll();
  EXPECT_EQ(done.load(std::memory_order_acquire), kSnapshots);
  for (int s = 0; s < kSnapshots; ++s) ASSERT_EQ(got[s], expected[s]) << "snapshot " << s;
  EXPECT_EQ(t.live_snapshots(), 0);
}

// --- KeyedStateStore: copy-on-write layers of handle tables -------------------

using Store = KeyedStateStore<int64_t>;
struct KeyedContents {
  std::map<int64_t, int64_t> values;
  std::map<int64_t, std::vector<int64_t>> lists;
  std::map<int64_t, std::map<int64_t, int64_t>> maps;
  std::map<int64_t, int64_t> sums;
  friend bool operator==(const KeyedContents&, const KeyedContents&) = default;
};

KeyedContents Dump(Store& s) {
  KeyedContents c;
  s.HandleTable<int64_t>("v").ForEachEntry([&](int64_t k, int64_t v) { c.values[k] = v; });
  s.HandleTable<std::vector<int64_t>>("l").ForEachEntry(
      [&](int64_t k, const std::vector<int64_t>& v) { c.lists[k] = v; });
  s.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("m").ForEachEntry(
      [&](int64_t k, const MapState<int64_t, int64_t, int64_t>::Storage& v) {
        c.maps[k] = std::map<int64_t, int64_t>(v.begin(), v.end());
      });
  s.HandleTable<int64_t>("sum").ForEachEntry([&](int64_t k, int64_t v) { c.sums[k] = v; });
  return c;
}

KeyedContents DecodeStore(const std::string& bytes) {
  Store back;
  StateReader r(bytes);
  back.Restore(r, KeyGroupRange::All());
  EXPECT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r.AtEnd());
  return Dump(back);
}

// One random change through the handles: a value put or cleared, a list
// appended to or cleared, a map entry put or removed, a reducing add.
void MutateOnce(Store& s, std::mt19937_64& rng, int64_t keys) {
  int64_t key = static_cast<int64_t>(rng() % static_cast<uint64_t>(keys));
  const int64_t x = static_cast<int64_t>(rng() % 1000);
  ValueState<int64_t, int64_t> v(&s.HandleTable<int64_t>("v"), &key);
  ListState<int64_t, int64_t> l(&s.HandleTable<std::vector<int64_t>>("l"), &key);
  MapState<int64_t, int64_t, int64_t> m(
      &s.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("m"), &key);
  auto plus = [](int64_t a, int64_t b) { return a + b; };
  ReducingState<int64_t, int64_t, decltype(plus)> sum(&s.HandleTable<int64_t>("sum"), &key, plus);
  switch (rng() % 8) {
    case 0:
      v.update(v.value_or(0) + x);
      break;
    case 1:
      v.mutable_value() += x;  // in place: copies the entry a snapshot reads
      break;
    case 2:
      v.clear();
      break;
    case 3:
      l.add(x);
      break;
    case 4:
      if (x % 4 == 0)
        l.clear();
      else
        l.mutable_list().push_back(-x);
      break;
    case 5:
      m.put(x % 16, x);
      break;
    case 6:
      m.remove(x % 16);
      break;
    default:
      sum.add(x);
      break;
  }
}

std::string StoreSnapshot(Store& s, int key_group_hint = 0) {
  StateWriter w;
  w.set_key_group_hint(key_group_hint);
  s.Snapshot(w, "test");
  return w.Release();  // the deferred parts run here, at once
}

TEST(KeyedStateSnapshot, TheDeferredPartEncodesTheStateAsItWasAtTheSnapshot) {
  Store s;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) MutateOnce(s, rng, 3000);
  KeyedContents at_barrier = Dump(s);
  ASSERT_FALSE(at_barrier.values.empty());
  ASSERT_FALSE(at_barrier.maps.empty());

  for (int hint : {0, 128}) {
    StateWriter w;
    w.set_key_group_hint(hint);
    s.Snapshot(w, "test");
    auto parts = w.TakeDeferred();
    ASSERT_EQ(parts.size(), 4u) << "one deferred part per handle table";
    std::string sync = w.Release();
    // (It holds the list of the four states' types, a name each.)
    EXPECT_LT(sync.size(), 192u) << "the synchronous part encodes no entry";
    // After the barrier: puts, clears, list and map changes, new keys.
    for (int i = 0; i < 20000; ++i) MutateOnce(s, rng, 4000);
    for (int i = 0; i < 1000; ++i) s.Trim();  // folds nothing: the snapshot still reads
    EXPECT_GT(s.HandleTable<int64_t>("v").num_layers(), 0u);
    const KeyedContents after = Dump(s);
    EXPECT_NE(after, at_barrier);

    const std::string bytes = StateWriter::CompleteDeferred(std::move(sync), std::move(parts));
    EXPECT_EQ(DecodeStore(bytes), at_barrier) << "key group hint " << hint;

    // No snapshot reads any more: Trim folds the layers back into one map,
    // and the state is the one written.
    for (int i = 0; i < 100000 && s.HandleTable<int64_t>("v").num_layers() > 0; ++i) s.Trim();
    EXPECT_EQ(s.HandleTable<int64_t>("v").num_layers(), 0u);
    EXPECT_EQ((s.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("m").num_layers()), 0u);
    EXPECT_EQ(Dump(s), after);
    EXPECT_EQ(DecodeStore(StoreSnapshot(s)), after);
    // Back to the barrier state for the next round.
    Store back;
    StateReader r(bytes);
    back.Restore(r, KeyGroupRange::All());
    EXPECT_EQ(Dump(back), at_barrier);
    for (int i = 0; i < 20000; ++i) MutateOnce(s, rng, 3000);
    at_barrier = Dump(s);
  }
}

// A table whose values encode larger than they are in memory (strings) is
// encoded into room reserved from a sample of its entries: the output never
// grows by doubling (a guess from sizeof, 40 bytes an entry here against 210
// encoded, left it at 1.5 times its size after three doublings).  Under 1 MiB,
// so the reservation is the plain one, not a pooled buffer.
TEST(KeyedStateSnapshot, ATableIsEncodedIntoRoomReservedFromASampleOfItsEntries) {
  Store s;
  for (int64_t k = 0; k < 3000; ++k) {
    int64_t key = k;
    ValueState<int64_t, std::string> v(&s.HandleTable<std::string>("s"), &key);
    v.update(std::string(200, static_cast<char>('a' + k % 26)));
  }
  StateWriter w;
  s.Snapshot(w, "test");
  auto parts = w.TakeDeferred();
  ASSERT_EQ(parts.size(), 1u);
  const std::string bytes = StateWriter::CompleteDeferred(w.Release(), std::move(parts));
  ASSERT_GT(bytes.size(), 3000u * 200);
  EXPECT_LE(bytes.capacity(), bytes.size() * 14 / 10)
      << "size " << bytes.size() << ": the encoding outgrew its reservation";
  Store back;
  StateReader r(bytes);
  back.Restore(r, KeyGroupRange::All());
  ASSERT_TRUE(r.AtEnd()) << r.error();
  size_t n = 0;
  back.HandleTable<std::string>("s").ForEachEntry([&](int64_t k, const std::string& v) {
    EXPECT_EQ(v, std::string(200, static_cast<char>('a' + k % 26)));
    ++n;
  });
  EXPECT_EQ(n, 3000u);
}

TEST(KeyedStateSnapshot, SnapshotsTakenWhileOthersStillReadStackLayersAndStayExact) {
  Store s;
  std::mt19937_64 rng(11);
  std::vector<KeyedContents> expected;
  std::vector<std::pair<std::string, std::vector<StateWriter::Deferred>>> pending;
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 5000; ++i) MutateOnce(s, rng, 2000);
    expected.push_back(Dump(s));
    StateWriter w;
    s.Snapshot(w, "test");
    auto parts = w.TakeDeferred();
    pending.emplace_back(w.Release(), std::move(parts));
  }
  EXPECT_GE(s.HandleTable<int64_t>("v").num_layers(), 5u);
  const KeyedContents now = Dump(s);
  // Completed out of order.
  for (int i : {3, 0, 4, 1, 2}) {
    EXPECT_EQ(DecodeStore(StateWriter::CompleteDeferred(std::move(pending[i].first),
                                                        std::move(pending[i].second))),
              expected[i])
        << "snapshot " << i;
  }
  for (int i = 0; i < 1000000 && s.HandleTable<int64_t>("v").num_layers() > 0; ++i) s.Trim();
  EXPECT_EQ(s.HandleTable<int64_t>("v").num_layers(), 0u);
  EXPECT_EQ(Dump(s), now);
}

// A table's VisibleSize (what the window operators report as their live
// windows) is the number of entries a reader sees, while snapshots stack
// copy-on-write layers below the entries written since and while Trim folds
// them back: before, it was the entries written since the last snapshot.
TEST(KeyedStateSnapshot, VisibleSizeCountsTheEntriesOfTheLayersSnapshotsRead) {
  Store s;
  std::mt19937_64 rng(19);
  auto check = [&s](const char* when) {
    auto counted = [](auto& table) {
      size_t n = 0;
      table.ForEachEntry([&n](const auto&, const auto&) { ++n; });
      return n;
    };
    auto& v = s.HandleTable<int64_t>("v");
    auto& l = s.HandleTable<std::vector<int64_t>>("l");
    auto& m = s.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("m");
    ASSERT_EQ(v.VisibleSize(), counted(v)) << when << ", " << v.num_layers() << " layers";
    ASSERT_EQ(l.VisibleSize(), counted(l)) << when << ", " << l.num_layers() << " layers";
    ASSERT_EQ(m.VisibleSize(), counted(m)) << when << ", " << m.num_layers() << " layers";
  };
  std::vector<std::pair<std::string, std::vector<StateWriter::Deferred>>> pending;
  for (int round = 0; round < 8; ++round) {
    for (int i = 0; i < 3000; ++i) {
      MutateOnce(s, rng, 800);
      if (i % 500 == 0) check("between writes");
    }
    StateWriter w;
    s.Snapshot(w, "test");
    auto parts = w.TakeDeferred();
    pending.emplace_back(w.Release(), std::move(parts));
    check("after a snapshot");
    if (round % 3 == 2) {  // the snapshots complete; Trim folds while writes go on
      for (auto& [sync, deferred] : pending)
        StateWriter::CompleteDeferred(std::move(sync), std::move(deferred));
      pending.clear();
      for (int i = 0; i < 4000; ++i) {
        MutateOnce(s, rng, 800);
        s.Trim();
        if (i % 400 == 0) check("while folding");
      }
    }
  }
  EXPECT_GT(s.HandleTable<int64_t>("v").num_layers(), 0u);
}

// Concurrency: the task thread (here) keeps changing keyed state through the
// handles -- and folding layers between changes (Trim), writing in place once
// no snapshot reads -- while the snapshot pool encodes the snapshot taken at
// each barrier; each must decode to the state at its barrier.
TEST(KeyedStateSnapshot, ConcurrentWritesNeverReachASnapshotBeingEncoded) {
  constexpr int kSnapshots = 60;
  Store s;
  std::mt19937_64 rng(26);
  for (int i = 0; i < 6000; ++i) MutateOnce(s, rng, 2500);

  SnapshotPool pool(2);
  AsyncSnapshots in_flight;
  std::vector<KeyedContents> expected(kSnapshots);
  std::vector<std::string> got(kSnapshots);
  for (int n = 0; n < kSnapshots; ++n) {
    expected[n] = Dump(s);
    StateWriter w;
    w.set_key_group_hint(n % 2 == 0 ? 0 : 64);
    s.Snapshot(w, "test");
    testing::CompleteOnPool(w, pool, in_flight, &got[n]);
    const int writes = 1000 + static_cast<int>(rng() % 3000);
    for (int i = 0; i < writes; ++i) {
      MutateOnce(s, rng, 3000);
      s.Trim();
    }
  }
  in_flight.AwaitAll();
  for (int n = 0; n < kSnapshots; ++n)
    ASSERT_EQ(DecodeStore(got[n]), expected[n]) << "snapshot " << n;
}

// The window operator's contents (window_contents.h) on the heap: a window
// purged while a snapshot still reads the layer that froze it (a count
// window's FIRE_AND_PURGE between a checkpoint's barrier and the end of its
// encoding) stays purged.  Before, the purge erased only the entry written
// since, and the frozen one came back: the window fired its old elements
// again with the next ones.  And every window is still seen (Close's report
// of windows not fired), those of the frozen layer included.
TEST(KeyedStateSnapshot, AWindowPurgedWhileASnapshotReadsStaysPurged) {
  using Sum = int64_t (*)(const int64_t&, const int64_t&);
  using Contents = internal::ReduceContents<int64_t, int64_t, GlobalWindow, Sum,
                                            internal::NoProcessFunction, int64_t>;
  Store s;
  Contents c([](const int64_t& a, const int64_t& b) { return a + b; },
             internal::NoProcessFunction{});
  c.Bind(s);
  const GlobalWindow w;
  c.Add(1, w, 10, 0);
  c.Add(2, w, 20, 0);
  StateWriter snapshot;
  s.Snapshot(snapshot, "test");
  auto parts = snapshot.TakeDeferred();  // the snapshot reads until they run
  EXPECT_EQ(c.size(), 2u) << "the frozen layer's windows are live";
  c.Add(1, w, 5, 0);  // key 1's entry copied up, then purged
  EXPECT_EQ(c.size(), 2u);
  c.Clear(1, w);
  EXPECT_FALSE(c.Has(1, w)) << "the frozen entry came back";
  EXPECT_EQ(c.size(), 1u);
  c.Clear(1, w);  // a purged window purged again
  EXPECT_EQ(c.size(), 1u);
  c.Add(1, w, 7, 0);
  c.Add(3, w, 1, 0);
  EXPECT_EQ(c.size(), 3u);
  const int64_t* now =
      s.HandleTable<int64_t, GlobalWindow>(internal::kWindowContentsState).Find(1, w);
  ASSERT_NE(now, nullptr);
  EXPECT_EQ(*now, 7) << "a fresh window after the purge";
  std::vector<int64_t> keys;
  c.ForEachKeyWindow([&](const int64_t& k, const GlobalWindow&) { keys.push_back(k); });
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<int64_t>{1, 2, 3})) << "key 2 is only in the frozen layer";
  // The snapshot still holds the state at its barrier.
  const std::string bytes = StateWriter::CompleteDeferred(snapshot.Release(), std::move(parts));
  Store back;
  StateReader r(bytes);
  back.Restore(r, KeyGroupRange::All());
  Contents restored([](const int64_t& a, const int64_t& b) { return a + b; },
                    internal::NoProcessFunction{});
  restored.Bind(back);
  auto& table = back.HandleTable<int64_t, GlobalWindow>(internal::kWindowContentsState);
  ASSERT_NE(table.Find(1, w), nullptr);
  EXPECT_EQ(*table.Find(1, w), 10);
  ASSERT_NE(table.Find(2, w), nullptr);
  EXPECT_EQ(*table.Find(2, w), 20);
}

// An empty type (GlobalWindow) is written as one zero byte, whatever its
// byte held: a key or namespace on RocksDB is found by its encoding, and a
// count window's contents (namespace GlobalWindow) were lost after a
// checkpoint, read back under another byte.
TEST(StateCodecOfAnEmptyType, IsOneZeroByteWhateverTheObjectHeld) {
  alignas(GlobalWindow) unsigned char buf[sizeof(GlobalWindow)];
  std::memset(buf, 0xA5, sizeof(buf));
  const GlobalWindow* w = new (buf) GlobalWindow;  // default-initialised: the byte stays
  StateWriter out;
  internal::Encode(out, *w);
  EXPECT_EQ(out.Release(), std::string(1, '\0'));
}

// A struct with padding encodes its padding as 0, whatever its storage held:
// equal keys give equal bytes, the bytes RocksDB looks a key up by.
TEST(StateCodecOfAPaddedStruct, WritesItsPaddingAsZero) {
  struct Padded {
    int32_t id;  // 4 bytes of padding after it
    int64_t group;
  };
  static_assert(sizeof(Padded) == 16 && !std::has_unique_object_representations_v<Padded>);
  std::string first;
  for (unsigned char garbage : {0x00, 0xA5, 0x3C}) {
    alignas(Padded) unsigned char buf[sizeof(Padded)];
    std::memset(buf, garbage, sizeof(buf));
    Padded* p = new (buf) Padded;  // default-initialised: every byte stays
    p->id = 7;
    p->group = -2;
    StateWriter out;
    internal::Encode(out, *p);
    const std::string bytes = out.Release();
    ASSERT_EQ(bytes.size(), sizeof(Padded));
#if TIDEMARK_HAS_CLEAR_PADDING
    EXPECT_EQ(bytes.substr(4, 4), std::string(4, '\0')) << int{garbage};
    if (first.empty()) first = bytes;
    EXPECT_EQ(bytes, first) << int{garbage};
#endif
    StateReader in(bytes);
    const Padded back = internal::Decode<Padded>(in);
    EXPECT_EQ(back.id, 7);
    EXPECT_EQ(back.group, -2);
  }
}

// A table whose values cannot be copied keeps the synchronous encoding.
TEST(TimeWindowTableSnapshot, MoveOnlyValuesAreEncodedSynchronously) {
  struct MoveOnly {
    explicit MoveOnly(int64_t x) : v(x) {}
    MoveOnly(MoveOnly&&) = default;
    MoveOnly& operator=(MoveOnly&&) = default;
    int64_t v;
  };
  TimeWindowTable<int64_t, MoveOnly> t;
  t.FindOrCreate(7, TimeWindow(0, 10), kMinTimestamp, [] { return MoveOnly(3); });
  StateWriter w;
  t.SnapshotTo(w);
  EXPECT_FALSE(w.has_deferred());
  EXPECT_GT(w.size(), 16u);
  EXPECT_EQ(t.live_snapshots(), 0);
}

}  // namespace
}  // namespace tidemark
