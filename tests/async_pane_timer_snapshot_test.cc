// Asynchronous snapshots (docs/checkpoints.md, "The snapshot's phases") of
// the sliced window operator's panes (operators/window/sliced_window_operator.h)
// and of the timer queues (operators/keyed/timer_service.h, TimerBuckets in
// timer_buckets.h): the synchronous part takes a copy-on-write view, the
// deferred part encodes it into the bytes a synchronous encoding at the
// barrier gives, however the task changes its state meanwhile (records,
// firings, panes dropped; timers registered, deleted, registered again and
// fired).  Two tests write on one thread while the snapshot pool encodes on
// others (label concurrency).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "async_snapshot_util.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/runtime/state/detail/snapshot_pool.h"
#include "tidemark/runtime/state/state_codec.h"
#include "window_harness.h"
#include "window_test_functions.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using testing::E;
using testing::KeyOfE;
using testing::OperatorHarness;
using testing::SumE;

// --- the sliced window operator's panes ---------------------------------------

using ReduceC = ReduceContents<E, std::string, TimeWindow, SumE, NoProcessFunction, E>;
using Sliced = SlicedWindowOperator<E, std::string, KeyOfE, SlidingEventTimeWindows, ReduceC>;
using Harness = OperatorHarness<E, E>;

// 1 s windows every 250 ms: four panes a window.
std::unique_ptr<Harness> MakeSliced(int64_t lateness, const std::string* restore = nullptr) {
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = lateness;
  auto h = std::make_unique<Harness>(
      std::make_unique<Sliced>(KeyOfE{}, SlidingEventTimeWindows::of(1s, 250ms), EventTimeTrigger{},
                               ReduceC(SumE{}, NoProcessFunction{}), cfg));
  if (restore != nullptr) h->initialize_state(harness::OperatorSnapshot{*restore});
  h->Open();
  return h;
}

// The operator's snapshot, encoded at once.
std::string SyncBytes(Harness& h) {
  StateWriter w;
  h.base().SnapshotState(w);
  return w.Release();  // the deferred part runs here
}

// `n` records with keys of `keys`, at `base` + [0, spread).
void Feed(Harness& h, std::mt19937_64& rng, int n, int keys, Timestamp base, int64_t spread) {
  for (int i = 0; i < n; ++i) {
    h.ProcessElement(E("k" + std::to_string(rng() % static_cast<uint64_t>(keys)),
                       static_cast<int>(rng() % 9) + 1),
                     base + static_cast<Timestamp>(rng() % static_cast<uint64_t>(spread)));
  }
}

TEST(SlicedWindowSnapshot, TheDeferredPartEncodesThePanesOfTheBarrier) {
  auto h = MakeSliced(300);
  std::mt19937_64 rng(3);
  Feed(*h, rng, 20000, 3000, 0, 1400);
  h->ProcessWatermark(400);
  ASSERT_TRUE(h->op<Sliced>().sliced());
  ASSERT_GT(h->op<Sliced>().num_panes(), 5000u);
  const std::string at_barrier = SyncBytes(*h);
  EXPECT_EQ(h->op<Sliced>().live_snapshots(), 0);

  StateWriter w;
  h->base().SnapshotState(w);
  auto parts = w.TakeDeferred();
  ASSERT_FALSE(parts.empty()) << "the panes are encoded off the task thread";
  std::string sync = w.Release();
  // (It holds the keyed state's list of state types and the layout's name.)
  EXPECT_LT(sync.size(), 96u) << "the synchronous part encodes no pane";
  EXPECT_EQ(h->op<Sliced>().live_snapshots(), 1);

  // After the barrier: every pane updated, new keys and panes, windows fired
  // and dropped with their panes.
  Feed(*h, rng, 20000, 4000, 200, 1600);
  h->ProcessWatermark(1500);
  Feed(*h, rng, 5000, 4000, 1500, 900);
  h->ProcessWatermark(2600);
  EXPECT_NE(SyncBytes(*h), at_barrier);

  const std::string got = StateWriter::CompleteDeferred(std::move(sync), std::move(parts));
  EXPECT_EQ(got, at_barrier);
  EXPECT_EQ(h->op<Sliced>().live_snapshots(), 0) << "the part let go of the chunks once run";

  // The bytes restore the operator of the barrier, which fires what the
  // operator restored from the old, synchronous encoding fires.
  auto back = MakeSliced(300, &got);
  EXPECT_EQ(SyncBytes(*back), at_barrier);
  back->ProcessWatermark(kMaxTimestamp);
  const auto fired = back->TakeRecords();
  EXPECT_GT(fired.size(), 3000u);
}

// Concurrency: the task thread (here) keeps processing records -- updates of
// the newest panes, new keys, late records -- and watermarks that fire
// windows and drop panes, while the snapshot pool encodes the snapshot taken
// at each barrier; each must equal the synchronous encoding at its barrier.
TEST(SlicedWindowSnapshot, ConcurrentRecordsAndFiringsNeverReachASnapshotBeingEncoded) {
  constexpr int kSnapshots = 80;
  auto h = MakeSliced(200);
  std::mt19937_64 rng(26);
  Timestamp now = 1000;
  Feed(*h, rng, 5000, 2000, 0, 1000);

  SnapshotPool pool(2);
  AsyncSnapshots in_flight;
  std::vector<std::string> expected(kSnapshots), got(kSnapshots);
  for (int s = 0; s < kSnapshots; ++s) {
    expected[s] = SyncBytes(*h);
    StateWriter w;
    h->base().SnapshotState(w);
    ASSERT_TRUE(w.has_deferred());
    testing::CompleteOnPool(w, pool, in_flight, &got[s]);
    // Records up to 400 ms out of order around `now`, then the watermark.
    const int n = 1000 + static_cast<int>(rng() % 3000);
    Feed(*h, rng, n, 2500, now - 400, 500);
    now += 50 + static_cast<Timestamp>(rng() % 200);
    if (s % 3 != 2) h->ProcessWatermark(now - 450);
  }
  in_flight.AwaitAll();
  for (int s = 0; s < kSnapshots; ++s) ASSERT_EQ(got[s], expected[s]) << "snapshot " << s;
  EXPECT_EQ(h->op<Sliced>().live_snapshots(), 0);
  // And one of them restores.
  auto back = MakeSliced(200, &got[kSnapshots / 2]);
  EXPECT_EQ(SyncBytes(*back), expected[kSnapshots / 2]);
}

// --- timers ----------------------------------------------------------------------

using Timer = std::tuple<Timestamp, std::string, int64_t>;
using Queue = TimerQueue<std::string, int64_t>;

std::string QueueBytes(Queue& q) {
  StateWriter w;
  q.SnapshotTo(w);
  return w.Release();
}

std::set<Timer> LiveOf(const std::string& bytes) {
  Queue q;
  StateReader r(bytes);
  q.RestoreFrom(r, KeyGroupRange::All());
  EXPECT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r.AtEnd());
  const auto live = q.Snapshot();
  return std::set<Timer>(live.begin(), live.end());
}

// Random timer operations, mirrored in `model` (the live timers): register,
// delete (most of them of live timers), register a deleted one again, and
// fire up to `*watermark` after it moves on, sometimes registering more
// from the callback (which fire in the same loop when due).
void MutateTimers(Queue& q, std::set<Timer>& model, std::mt19937_64& rng, int ops,
                  Timestamp* watermark, std::vector<Timer>* fired = nullptr) {
  std::vector<Timer> deleted;
  for (int i = 0; i < ops; ++i) {
    const uint64_t what = rng() % 10;
    if (what < 5 || model.empty()) {
      const Timer t(*watermark + 1 + static_cast<Timestamp>(rng() % 3000),
                    "k" + std::to_string(rng() % 4000), static_cast<int64_t>(rng() % 3));
      EXPECT_EQ(q.Add(std::get<1>(t), std::get<2>(t), std::get<0>(t)), model.insert(t).second);
    } else if (what < 8) {
      auto it = model.begin();
      std::advance(it, static_cast<long>(rng() % model.size()));
      const Timer t = *it;
      EXPECT_TRUE(q.Remove(std::get<1>(t), std::get<2>(t), std::get<0>(t)));
      model.erase(it);
      deleted.push_back(t);
    } else if (what < 9 && !deleted.empty()) {
      const Timer t = deleted[rng() % deleted.size()];
      EXPECT_EQ(q.Add(std::get<1>(t), std::get<2>(t), std::get<0>(t)), model.insert(t).second);
    } else {
      *watermark += static_cast<Timestamp>(rng() % 8);
      q.FireUpTo(*watermark, [&](const std::string& key, int64_t ns, Timestamp ts) {
        EXPECT_EQ(model.erase(Timer(ts, key, ns)), 1u);
        if (fired != nullptr) fired->emplace_back(ts, key, ns);
        if (rng() % 4 == 0) {  // a timer due now: it fires in this loop
          const Timer t(*watermark, key + "+", ns);
          EXPECT_EQ(q.Add(std::get<1>(t), std::get<2>(t), std::get<0>(t)), model.insert(t).second);
        }
      });
    }
  }
}

TEST(TimerSnapshot, TheDeferredPartEncodesTheTimersOfTheBarrier) {
  Queue q;
  std::set<Timer> model;
  std::mt19937_64 rng(5);
  Timestamp wm = 0;
  MutateTimers(q, model, rng, 20000, &wm);
  ASSERT_GT(model.size(), 1000u);
  const std::string at_barrier = QueueBytes(q);
  EXPECT_EQ(LiveOf(at_barrier), model);
  const std::set<Timer> live_at_barrier = model;

  StateWriter w;
  q.SnapshotTo(w);
  auto parts = w.TakeDeferred();
  ASSERT_EQ(parts.size(), 1u);
  std::string sync = w.Release();
  EXPECT_TRUE(sync.empty()) << "the synchronous part encodes no timer";
  EXPECT_EQ(q.live_snapshots(), 1);

  // After the barrier: registrations, deletes, timers registered again and
  // every timer of the barrier fired (its buckets released).
  MutateTimers(q, model, rng, 20000, &wm);
  wm += 5000;
  q.FireUpTo(wm, [&](const std::string& key, int64_t ns, Timestamp ts) {
    model.erase(Timer(ts, key, ns));
  });
  EXPECT_NE(QueueBytes(q), at_barrier);

  const std::string got = StateWriter::CompleteDeferred(std::move(sync), std::move(parts));
  EXPECT_EQ(got, at_barrier);
  EXPECT_EQ(LiveOf(got), live_at_barrier);
  EXPECT_EQ(q.live_snapshots(), 0);
}

// A released bucket's first chunk is kept for the next new bucket, unless a
// snapshot may still read it; what the buckets hold is the same either way.
TEST(TimerBuckets, ReleasedFirstChunksAreReusedUnlessASnapshotReadsThem) {
  TimerBuckets<std::string> q;
  auto push_round = [&](Timestamp from, int n) {
    for (int i = 0; i < n; ++i) q.Push(from + i, "entry " + std::to_string(from + i));
  };
  auto pop_all = [&] {
    std::vector<std::string> out;
    while (!q.empty()) out.push_back(q.PopFront());
    return out;
  };
  push_round(0, 1000);
  EXPECT_EQ(q.spare_chunks(), 0u);
  const std::vector<std::string> first = pop_all();
  ASSERT_EQ(first.size(), 1000u);
  EXPECT_EQ(first.front(), "entry 0");
  EXPECT_EQ(first.back(), "entry 999");
  // A chunk is kept while fewer are kept than buckets are left: the first
  // 500 released.
  EXPECT_EQ(q.spare_chunks(), 500u);

  // Kept chunks make the next buckets; their entries are the new ones.
  push_round(5000, 1000);
  EXPECT_EQ(q.spare_chunks(), 0u);
  const std::vector<std::string> second = pop_all();
  ASSERT_EQ(second.size(), 1000u);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(second[i], "entry " + std::to_string(5000 + i));

  push_round(10000, 1000);
  for (int i = 0; i < 400; ++i) q.PopFront();
  EXPECT_EQ(q.spare_chunks(), 400u);
  pop_all();
  EXPECT_EQ(q.spare_chunks(), 500u);

  // While a view of a snapshot lives, the buckets it reads are released
  // without keeping their chunks, and the view reads them unchanged.
  push_round(20000, 200);
  EXPECT_EQ(q.spare_chunks(), 300u);
  {
    const auto view = q.Share();
    const size_t spare_at_view = q.spare_chunks();
    pop_all();
    EXPECT_EQ(q.spare_chunks(), spare_at_view);
    push_round(30000, 200);
    EXPECT_EQ(q.spare_chunks(), 100u);
    ASSERT_EQ(view.buckets().size(), 200u);
    for (size_t b = 0; b < 200; ++b) {
      std::vector<std::string> in;
      view.buckets()[b].ForEach([&](const std::string& e) { in.push_back(e); });
      ASSERT_EQ(in, std::vector<std::string>{"entry " + std::to_string(20000 + b)});
    }
  }
  EXPECT_EQ(q.live_snapshots(), 0);
  // Buckets made after the view are kept again.
  pop_all();
  EXPECT_EQ(q.spare_chunks(), 150u);
}

// Buckets come out in time order however their timestamps were pushed: most
// after every earlier one (the queue), some before (the heap), some again
// (an existing bucket), pops in between (the queue's head moves, and its
// front part is dropped now and then).
TEST(TimerBuckets, PopsInTimeOrderWhetherPushedInOrderOrNot) {
  TimerBuckets<int64_t> q;
  std::multimap<Timestamp, int64_t> model;  // (ts, push number): push order within a ts
  std::mt19937_64 rng(17);
  Timestamp next = 0;
  int64_t n = 0;
  for (int round = 0; round < 200; ++round) {
    const int pushes = static_cast<int>(rng() % 300);
    for (int i = 0; i < pushes; ++i) {
      Timestamp ts;
      const uint64_t what = rng() % 10;
      if (what < 7) {
        ts = next += 1 + static_cast<Timestamp>(rng() % 3);  // after every earlier one
      } else if (what < 9 && !model.empty()) {
        ts = model.begin()->first + static_cast<Timestamp>(rng() % 50);  // earlier, or again
      } else {
        ts = next - static_cast<Timestamp>(rng() % 20);
      }
      q.Push(ts, n);
      model.emplace(ts, n++);
    }
    const int pops = static_cast<int>(rng() % 300);
    for (int i = 0; i < pops && !model.empty(); ++i) {
      ASSERT_FALSE(q.empty());
      ASSERT_EQ(q.front_time(), model.begin()->first);
      ASSERT_EQ(q.PopFront(), model.begin()->second);
      model.erase(model.begin());
    }
    ASSERT_EQ(q.empty(), model.empty());
  }
  while (!model.empty()) {
    ASSERT_EQ(q.front_time(), model.begin()->first);
    ASSERT_EQ(q.PopFront(), model.begin()->second);
    model.erase(model.begin());
  }
  EXPECT_TRUE(q.empty());
  EXPECT_GT(n, 20000);
}

// A restored queue fires what the original fires, in the same order (stale
// entries and timers registered again after a delete included).
TEST(TimerSnapshot, ARestoredQueueFiresAsTheOriginal) {
  Queue q;
  std::set<Timer> model;
  std::mt19937_64 rng(9);
  Timestamp wm = 0;
  MutateTimers(q, model, rng, 30000, &wm);
  const std::string bytes = QueueBytes(q);
  Queue back;
  StateReader r(bytes);
  back.RestoreFrom(r, KeyGroupRange::All());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(QueueBytes(back), bytes);
  std::vector<Timer> a, b;
  q.FireUpTo(kMaxTimestamp,
             [&](const std::string& k, int64_t ns, Timestamp ts) { a.emplace_back(ts, k, ns); });
  back.FireUpTo(kMaxTimestamp,
                [&](const std::string& k, int64_t ns, Timestamp ts) { b.emplace_back(ts, k, ns); });
  EXPECT_EQ(a.size(), model.size());
  EXPECT_EQ(a, b);
}

// Concurrency: the task thread (here) keeps registering, deleting and firing
// timers while the snapshot pool encodes the snapshot taken at each barrier;
// each must equal the synchronous encoding at its barrier and hold the live
// timers of then.
TEST(TimerSnapshot, ConcurrentRegistrationsDeletesAndFiringsNeverReachASnapshotBeingEncoded) {
  constexpr int kSnapshots = 80;
  Queue q;
  std::set<Timer> model;
  std::mt19937_64 rng(26);
  Timestamp wm = 0;
  MutateTimers(q, model, rng, 5000, &wm);

  SnapshotPool pool(2);
  AsyncSnapshots in_flight;
  std::vector<std::string> expected(kSnapshots), got(kSnapshots);
  std::vector<std::set<Timer>> live(kSnapshots);
  for (int s = 0; s < kSnapshots; ++s) {
    expected[s] = QueueBytes(q);
    live[s] = model;
    StateWriter w;
    q.SnapshotTo(w);
    testing::CompleteOnPool(w, pool, in_flight, &got[s]);
    MutateTimers(q, model, rng, 500 + static_cast<int>(rng() % 2000), &wm);
  }
  in_flight.AwaitAll();
  for (int s = 0; s < kSnapshots; ++s) {
    ASSERT_EQ(got[s], expected[s]) << "snapshot " << s;
    ASSERT_EQ(LiveOf(got[s]), live[s]) << "snapshot " << s;
  }
  EXPECT_EQ(q.live_snapshots(), 0);
}

}  // namespace
}  // namespace tidemark
