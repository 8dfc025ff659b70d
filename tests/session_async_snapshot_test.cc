// Asynchronous snapshots of FastSessionWindowOperator
// (operators/window/session_window_operator.h, "Asynchronous snapshots";
// docs/checkpoints.md, "The snapshot's phases"): the synchronous part takes a
// copy-on-write view of the keys' sessions and of the timer entries, the
// snapshot threads encode it.  The encoding must be the operator's state at
// the barrier whatever the task does meanwhile (records that open, extend and
// merge sessions, late records, watermarks that fire sessions and clean them
// up, freeing and reusing key slots, keys in the general form), and it must
// restore to an operator that goes on exactly as the original did.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

using SumC = ReduceContents<E, std::string, TimeWindow, SumE, NoProcessFunction, E>;
using Op = FastSessionWindowOperator<E, std::string, KeyOfE, EventTimeSessionWindows, SumC>;
static_assert(std::is_same_v<WindowOperatorFor<E, std::string, KeyOfE, EventTimeSessionWindows,
                                               EventTimeTrigger, SumC>,
                             Op>);
const OutputTag<E> kLate("late");

// One instance under a harness, with its late side output.
struct Instance {
  Instance() : h(Make()) {
    late = &h.AddSideOutput(kLate);
    h.Open();
  }
  static std::unique_ptr<Op> Make() {
    WindowOperatorConfig<E> cfg;
    cfg.allowed_lateness = 400;
    cfg.late_tag = kLate;
    return std::make_unique<Op>(KeyOfE{}, EventTimeSessionWindows::with_gap(300ms),
                                EventTimeTrigger{}, SumC(SumE{}, {}), cfg);
  }
  Op& op() { return h.op<Op>(); }
  // The snapshot encoded at once (its deferred part runs in Release).
  std::string SyncSnapshot() {
    StateWriter w;
    h.base().SnapshotState(w);
    return w.Release();
  }
  void Restore(const std::string& bytes) {
    StateReader r(bytes);
    h.base().RestoreState(r);
    ASSERT_TRUE(r.ok()) << r.error();
    ASSERT_TRUE(r.AtEnd());
  }
  // Everything emitted since the last call: results, then late records.
  std::vector<std::pair<E, Timestamp>> Take() {
    auto out = h.TakeRecords();
    for (auto& l : late->TakeRecords())
      out.emplace_back(E("late:" + l.first.first, l.first.second), l.second);
    return out;
  }

  OperatorHarness<E, E> h;
  testing::RecordingOutput<E>* late = nullptr;
};

struct Step {
  bool watermark;
  E value;
  Timestamp ts;
};

// Records of `keys` keys, about 4 per millisecond, whose timestamps mostly
// advance but jump back by up to 1.5 s (the watermark trails the largest by 200 ms, the lateness is
// 400 ms: some records are late, some merge into fired sessions), a
// watermark every few records, and now and then a record near the end of
// time, whose session wraps (start > end): its key goes to the general form.
std::vector<Step> RandomSteps(std::mt19937_64& rng, Timestamp& t, Timestamp& wm, int n, int keys) {
  std::vector<Step> steps;
  for (int i = 0; i < n; ++i) {
    t += static_cast<int64_t>(rng() % 4 == 0);
    const std::string key = "k" + std::to_string(rng() % static_cast<uint64_t>(keys));
    const int v = static_cast<int>(rng() % 100);
    if (rng() % 700 == 0) {
      steps.push_back({false, E(key, v), kMaxTimestamp - static_cast<int64_t>(rng() % 200)});
    } else {
      steps.push_back({false, E(key, v), t - static_cast<int64_t>(rng() % 1500)});
    }
    if (rng() % 40 == 0 && t - 200 > wm) {
      wm = t - 200;
      steps.push_back({true, {}, wm});
    }
  }
  wm = std::max(wm, t - 200);
  steps.push_back({true, {}, wm});  // a barrier comes right after a watermark
  return steps;
}

void Apply(Instance& inst, const Step& s) {
  if (s.watermark) {
    inst.h.ProcessWatermark(s.ts);
  } else {
    inst.h.ProcessElement(s.value, s.ts);
  }
}

TEST(SessionAsyncSnapshot, TheDeferredPartEncodesTheSessionsAsTheyWereAtTheSnapshot) {
  Instance a;
  std::mt19937_64 rng(5);
  Timestamp t = 10'000, wm = kMinTimestamp;
  for (const Step& s : RandomSteps(rng, t, wm, 4000, 1500)) Apply(a, s);
  ASSERT_GT(a.op().num_keys_with_sessions(), 500u);
  const std::string at_barrier = a.SyncSnapshot();
  EXPECT_EQ(a.op().live_snapshots(), 0);

  StateWriter w;
  a.h.base().SnapshotState(w);
  auto parts = w.TakeDeferred();
  ASSERT_FALSE(parts.empty()) << "copyable keys and values: the encoding is deferred";
  std::string sync = w.Release();
  // (It holds the keyed state's list of state types and the layout's name.)
  EXPECT_LT(sync.size(), 128u) << "the synchronous part encodes no session";
  EXPECT_EQ(a.op().live_snapshots(), 1);
  // After the barrier: new sessions, merges, firings, cleanups, late records.
  for (const Step& s : RandomSteps(rng, t, wm, 4000, 2000)) Apply(a, s);
  a.h.ProcessWatermark(t + 10'000);  // everything but the wrapped sessions fires and is cleaned
  EXPECT_NE(a.SyncSnapshot(), at_barrier);

  const std::string bytes = StateWriter::CompleteDeferred(std::move(sync), std::move(parts));
  EXPECT_EQ(bytes, at_barrier);
  EXPECT_EQ(a.op().live_snapshots(), 0) << "the part lets go of the view once run";
}

// Concurrency: the task thread (here) keeps feeding the operator while the
// snapshot pool encodes the snapshot taken at each barrier.  Each encoding
// must equal the synchronous one at its barrier, and some, restored into a
// fresh operator, must go on exactly as the original did after the barrier.
TEST(SessionAsyncSnapshot, ConcurrentChangesNeverReachASnapshotBeingEncoded) {
  constexpr int kSnapshots = 40;
  constexpr int kKeys = 2500;  // about 10 chunks of keys
  Instance a;
  std::mt19937_64 rng(26);
  Timestamp t = 10'000, wm = kMinTimestamp;
  std::vector<Step> steps = RandomSteps(rng, t, wm, 3000, kKeys);
  std::vector<std::vector<std::pair<E, Timestamp>>> out;  // by step
  for (const Step& s : steps) {
    Apply(a, s);
    out.push_back(a.Take());
  }

  SnapshotPool pool(2);
  AsyncSnapshots in_flight;
  struct Barrier {
    size_t step;  // steps before it
    Timestamp watermark;
    size_t contents, timers, keys;
    std::string expected, got;
  };
  std::vector<Barrier> barriers(kSnapshots);
  for (int n = 0; n < kSnapshots; ++n) {
    Barrier& b = barriers[n];
    b.step = steps.size();
    b.watermark = wm;
    b.contents = a.op().num_windows_with_contents();
    b.timers = a.op().num_event_time_timers();
    b.keys = a.op().num_keys_with_sessions();
    b.expected = a.SyncSnapshot();
    StateWriter w;
    a.h.base().SnapshotState(w);
    auto parts = std::make_shared<std::vector<StateWriter::Deferred>>(w.TakeDeferred());
    ASSERT_FALSE(parts->empty());
    auto sync = std::make_shared<std::string>(w.Release());
    in_flight.Begin();
    pool.Submit([&b, parts, sync, &in_flight] {
      b.got = StateWriter::CompleteDeferred(std::move(*sync), std::move(*parts));
      parts->clear();
      in_flight.End();
    });
    // Changes while the pool encodes.
    const int n_records = 300 + static_cast<int>(rng() % 1200);
    for (const Step& s : RandomSteps(rng, t, wm, n_records, kKeys)) {
      steps.push_back(s);
      Apply(a, s);
      out.push_back(a.Take());
    }
  }
  in_flight.AwaitAll();
  EXPECT_EQ(a.op().live_snapshots(), 0);
  size_t results = 0, late = 0;
  for (const auto& step : out)
    for (const auto& [e, ts] : step) (e.first.starts_with("late:") ? late : results) += 1;
  EXPECT_GT(results, 10'000u) << "sessions fired";
  EXPECT_GT(late, 100u) << "late records";
  for (int n = 0; n < kSnapshots; ++n)
    ASSERT_EQ(barriers[n].got, barriers[n].expected) << "snapshot " << n;

  // Restored, they go on as the original did.
  for (int n = 0; n < kSnapshots; n += 7) {
    SCOPED_TRACE("snapshot " + std::to_string(n));
    const Barrier& b = barriers[n];
    Instance r;
    r.Restore(b.got);
    EXPECT_EQ(r.op().num_windows_with_contents(), b.contents);
    EXPECT_EQ(r.op().num_event_time_timers(), b.timers);
    EXPECT_EQ(r.op().num_keys_with_sessions(), b.keys);
    r.h.ProcessWatermark(b.watermark);  // rebuilt: fires nothing that had not fired
    EXPECT_TRUE(r.Take().empty());
    std::vector<std::pair<E, Timestamp>> want, got;
    for (size_t i = b.step; i < steps.size(); ++i) {
      Apply(r, steps[i]);
      for (auto& x : r.Take()) got.push_back(std::move(x));
      for (const auto& x : out[i]) want.push_back(x);
    }
    EXPECT_FALSE(want.empty());
    ASSERT_EQ(got, want);
  }
}

}  // namespace
}  // namespace tidemark
