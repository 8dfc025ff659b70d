// tests/operator_state_test.cc
//
// Operator state in checkpoints (issue 13): every stateful built-in operator
// snapshots and restores its state exactly.  The property, for each one, on
// random inputs (out-of-order timestamps, allowed lateness, late records,
// several snapshot points, some after windows fired and with timers pending):
// instance A runs part 1, snapshots, runs part 2; instance B, fresh, restores
// A's snapshot, gets the watermark A had (Flink does not restore watermarks:
// the sources rebuild them, so a restored operator sees its inputs' watermark
// again before the replayed records) and runs part 2.  B's output after the
// restore equals A's after the snapshot: values, timestamps, order, late side
// output and late-record counters.
//
// Also: rescaling by key group (two instances' snapshots restored into one
// with the union range, one snapshot restored into two instances that split
// its keys: same records as one instance that saw everything), and a state
// type without a StateCodec (snapshot fails naming it; a job without
// checkpoints runs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"
#include "window_harness.h"
#include "window_test_functions.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using testing::CountSum;
using testing::E;
using testing::KeyOfE;
using testing::OperatorHarness;
using testing::SumE;

// --- inputs ------------------------------------------------------------------

struct Step {
  enum Kind { kRecord, kWatermark, kProcessingTime };
  Kind kind;
  E value;
  Timestamp ts;  // record timestamp, watermark or processing time
};

// Records of `keys` keys with timestamps that mostly advance but jump back by
// up to `disorder`; a watermark (max seen - bound) every few records, so that
// some records are late, some within the allowed lateness; processing time
// advances now and then; the last watermark is MAX.
std::vector<Step> RandomSteps(uint64_t seed, int n, int keys, int64_t disorder, int64_t bound) {
  std::mt19937_64 rng(seed);
  std::vector<Step> steps;
  Timestamp t = 1000;
  Timestamp max_seen = 0;
  Timestamp wm = kMinTimestamp;
  Timestamp pt = 0;
  for (int i = 0; i < n; ++i) {
    t += static_cast<int64_t>(rng() % 120);
    const Timestamp ts = t - static_cast<int64_t>(rng() % static_cast<uint64_t>(disorder + 1));
    max_seen = std::max(max_seen, ts);
    const std::string key = "k" + std::to_string(rng() % static_cast<uint64_t>(keys));
    steps.push_back({Step::kRecord, E(key, static_cast<int>(rng() % 100)), ts});
    if (rng() % 5 == 0 && max_seen - bound > wm) {
      wm = max_seen - bound;
      steps.push_back({Step::kWatermark, {}, wm});
    }
    if (rng() % 9 == 0) {
      pt += static_cast<int64_t>(rng() % 400);
      steps.push_back({Step::kProcessingTime, {}, pt});
    }
  }
  steps.push_back({Step::kWatermark, {}, kMaxTimestamp});
  return steps;
}

using Factory = std::function<std::unique_ptr<OperatorBase>()>;
const OutputTag<E> kLate("late");

// Drives one instance (subtask of parallelism) and remembers the watermark
// and processing time it saw.
template <typename Out>
struct Instance {
  Instance(const Factory& make, Timestamp processing_time, int subtask = 0, int parallelism = 1)
      : h(make(), processing_time, subtask, parallelism), pt(processing_time) {
    late = &h.AddSideOutput(kLate);
    h.Open();
  }
  void Apply(const Step& s) {
    switch (s.kind) {
      case Step::kRecord:
        h.ProcessElement(s.value, s.ts);
        break;
      case Step::kWatermark:
        h.ProcessWatermark(s.ts);
        wm = s.ts;
        break;
      case Step::kProcessingTime:
        if (s.ts > pt) {
          h.SetProcessingTime(s.ts);
          pt = s.ts;
        }
        break;
    }
  }
  std::string Snapshot() {
    StateWriter w;
    h.base().SnapshotState(w);
    return w.Release();
  }
  void Restore(const std::string& bytes) {
    StateReader r(bytes);
    h.base().RestoreState(r);
    ASSERT_TRUE(r.AtEnd()) << r.error() << " at " << r.position() << " of " << r.size();
  }
  int64_t dropped() { return h.counter(kNumLateRecordsDropped); }

  OperatorHarness<E, Out> h;
  testing::RecordingOutput<E>* late = nullptr;
  Timestamp wm = kMinTimestamp;
  Timestamp pt = 0;
};

template <typename Out>
struct Result {
  std::vector<std::pair<Out, Timestamp>> records;
  std::vector<std::pair<E, Timestamp>> late;
  int64_t dropped = 0;
};

// The equivalence property of the file comment, at step `cut`; `twice`
// restores B from A's snapshot and C from B's snapshot taken at once (state
// restored but not touched yet is written back as it was).
// Returns how many late records (side output or counted) the part after the
// snapshot had, so that callers can check the late paths were exercised.
template <typename Out>
int64_t ExpectRestoreEquivalent(const Factory& make, const std::vector<Step>& steps, size_t cut,
                                bool twice = false) {
  SCOPED_TRACE("cut at step " + std::to_string(cut) + " of " + std::to_string(steps.size()));
  Instance<Out> a(make, 0);
  for (size_t i = 0; i < cut; ++i) a.Apply(steps[i]);
  const std::string snapshot = a.Snapshot();
  const Timestamp pt_at_cut = a.pt;
  a.h.TakeRecords();
  a.late->TakeRecords();
  const int64_t dropped_before = a.dropped();
  for (size_t i = cut; i < steps.size(); ++i) a.Apply(steps[i]);
  Result<Out> x{a.h.TakeRecords(), a.late->TakeRecords(), a.dropped() - dropped_before};

  auto b = std::make_unique<Instance<Out>>(make, pt_at_cut);
  b->Restore(snapshot);
  if (twice) {
    const std::string again = b->Snapshot();
    b = std::make_unique<Instance<Out>>(make, pt_at_cut);
    b->Restore(again);
  }
  // The watermark, rebuilt: it fires nothing that had not fired.
  Timestamp wm = kMinTimestamp;
  for (size_t i = 0; i < cut; ++i)
    if (steps[i].kind == Step::kWatermark) wm = steps[i].ts;
  if (wm != kMinTimestamp) b->Apply({Step::kWatermark, {}, wm});
  EXPECT_THAT(b->h.TakeRecords(), ::testing::IsEmpty());
  for (size_t i = cut; i < steps.size(); ++i) b->Apply(steps[i]);
  EXPECT_EQ(b->h.TakeRecords(), x.records);
  EXPECT_EQ(b->late->TakeRecords(), x.late);
  EXPECT_EQ(b->dropped(), x.dropped);
  return static_cast<int64_t>(x.late.size()) + x.dropped;
}

// The snapshot points of `steps`: the start and random points right after a
// watermark.  Why after a watermark: the restored instance gets the last
// watermark again before the replayed records (see the file comment), which
// fires whatever timers at or before it are pending; right after that
// watermark the original has none either, while a record after it may have
// registered one (a late element's trigger timer) that the original fires only
// at its next watermark.  That difference is the rebuilt watermark's, not the
// restore's (Flink's is the same).
std::vector<size_t> Cuts(const std::vector<Step>& steps, uint64_t seed, int n) {
  std::vector<size_t> after_watermark;
  for (size_t i = 0; i + 1 < steps.size(); ++i)
    if (steps[i].kind == Step::kWatermark) after_watermark.push_back(i + 1);
  std::mt19937_64 rng(seed * 31);
  std::vector<size_t> cuts = {0, after_watermark[after_watermark.size() / 2],
                              after_watermark.back()};
  for (int i = 0; i < n; ++i) cuts.push_back(after_watermark[rng() % after_watermark.size()]);
  return cuts;
}

// Several seeds and snapshot points (the start, mid-stream after windows
// fired with timers pending, near the end).
// `late`: the inputs must have had late records after some snapshot (event
// time windows).
template <typename Out>
void CheckEquivalence(const Factory& make, int64_t disorder, int64_t bound, bool twice = false,
                      bool late = true) {
  int64_t late_seen = 0;
  for (uint64_t seed : {1u, 2u, 3u, 17u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Step> steps = RandomSteps(seed, 300, 7, disorder, bound);
    for (size_t cut : Cuts(steps, seed, 4))
      late_seen += ExpectRestoreEquivalent<Out>(make, steps, cut, twice);
  }
  if (late) EXPECT_GT(late_seen, 0) << "no late record: the inputs do not test the late paths";
}

// Late records to the side output `kLate`, or (`tag` false) counted.
WindowOperatorConfig<E> Config(int64_t lateness, bool tag = true) {
  WindowOperatorConfig<E> c;
  c.allowed_lateness = lateness;
  if (tag) c.late_tag = kLate;
  return c;
}

// --- the window operators ------------------------------------------------------

template <typename Assigner, typename Trigger, typename Contents>
using OpFor = WindowOperatorFor<E, std::string, KeyOfE, Assigner, Trigger, Contents>;
template <typename W>
using SumContents = ReduceContents<E, std::string, W, SumE, NoProcessFunction, E>;
template <typename W>
using AggContents = AggregateContents<E, std::string, W, CountSum, NoProcessFunction, std::string>;

// A process window function using per-window and per-key state.
struct DescribeList {
  template <typename W>
  void operator()(const std::string& key, const W& w, const std::vector<E>& values,
                  WindowContext& ctx, Collector<std::string>& out) const {
    int& firings = ctx.window_state<int>("firings");
    ++firings;
    int64_t& total = ctx.global_state<int64_t>("total");
    int sum = 0;
    for (const E& e : values) sum += e.second;
    total += sum;
    out.collect(key + " " + std::to_string(w.max_timestamp()) +
                " n=" + std::to_string(values.size()) + " sum=" + std::to_string(sum) +
                " firing=" + std::to_string(firings) + " total=" + std::to_string(total));
  }
};
struct DescribeSession {
  void operator()(const std::string& key, const TimeWindow& w, const std::vector<E>& values,
                  WindowContext& ctx, Collector<std::string>& out) const {
    int64_t& total = ctx.global_state<int64_t>("total");
    int sum = 0;
    for (const E& e : values) sum += e.second;
    total += sum;
    out.collect(key + " " + w.ToString() + " n=" + std::to_string(values.size()) +
                " sum=" + std::to_string(sum) + " total=" + std::to_string(total));
  }
};

template <typename Op, typename... A>
Factory MakeFactory(A... args) {
  return [=]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Op>(args...); };
}

TEST(OperatorState, FastWindowOperatorTumblingReduce) {
  using A = TumblingEventTimeWindows;
  using Op = OpFor<A, EventTimeTrigger, SumContents<TimeWindow>>;
  static_assert(
      std::is_same_v<Op, FastWindowOperator<E, std::string, KeyOfE, A, SumContents<TimeWindow>>>);
  for (int64_t lateness : {0, 700}) {
    for (bool tag : {true, false}) {
      CheckEquivalence<E>(
          MakeFactory<Op>(KeyOfE{}, A::of(1s), EventTimeTrigger{},
                          SumContents<TimeWindow>(SumE{}, {}), Config(lateness, tag)),
          1800, 300);
    }
  }
}

TEST(OperatorState, FastWindowOperatorSlidingAggregateWithHugeSlide) {
  // The windowed stream slices sliding windows whose contents merge; the
  // window-major operator for them, built directly.
  using A = SlidingEventTimeWindows;
  using Op = FastWindowOperator<E, std::string, KeyOfE, A, AggContents<TimeWindow>>;
  CheckEquivalence<std::string>(
      MakeFactory<Op>(KeyOfE{}, A::of(1500ms, 500ms), EventTimeTrigger{},
                      AggContents<TimeWindow>(CountSum{}, {}), Config(400)),
      3000, 200);
}

TEST(OperatorState, SlicedWindowOperator) {
  using A = SlidingEventTimeWindows;
  using Op = OpFor<A, EventTimeTrigger, AggContents<TimeWindow>>;
  static_assert(
      std::is_same_v<Op, SlicedWindowOperator<E, std::string, KeyOfE, A, AggContents<TimeWindow>>>);
  for (int64_t lateness : {0, 600}) {
    CheckEquivalence<std::string>(
        MakeFactory<Op>(KeyOfE{}, A::of(1200ms, 400ms), EventTimeTrigger{},
                        AggContents<TimeWindow>(CountSum{}, {}), Config(lateness)),
        3000, 250);
  }
}

TEST(OperatorState, SlicedWindowOperatorPerWindowNearTheEnds) {
  // A record near MAX turns the operator per-window for good; snapshots on
  // either side of that, restored into a fresh (sliced) instance.
  using A = SlidingEventTimeWindows;
  using Op = OpFor<A, EventTimeTrigger, SumContents<TimeWindow>>;
  const Factory make = MakeFactory<Op>(KeyOfE{}, A::of(1200ms, 400ms), EventTimeTrigger{},
                                       SumContents<TimeWindow>(SumE{}, {}), Config(300));
  std::vector<Step> steps = RandomSteps(5, 120, 5, 600, 200);
  steps.pop_back();
  steps.push_back({Step::kRecord, E("k1", 5), kMaxTimestamp - 10});
  std::vector<Step> more = RandomSteps(6, 80, 5, 600, 200);
  for (Step& s : more)
    if (s.kind != Step::kWatermark || s.ts != kMaxTimestamp) s.ts += 40'000;
  steps.insert(steps.end(), more.begin(), more.end());
  for (size_t cut : {size_t{60}, size_t{130}, steps.size() - 20})
    ExpectRestoreEquivalent<E>(make, steps, cut);
}

TEST(OperatorState, FastSessionWindowOperator) {
  using A = EventTimeSessionWindows;
  using Op = OpFor<A, EventTimeTrigger, SumContents<TimeWindow>>;
  static_assert(std::is_same_v<
                Op, FastSessionWindowOperator<E, std::string, KeyOfE, A, SumContents<TimeWindow>>>);
  for (int64_t lateness : {0, 500}) {
    CheckEquivalence<E>(MakeFactory<Op>(KeyOfE{}, A::with_gap(300ms), EventTimeTrigger{},
                                        SumContents<TimeWindow>(SumE{}, {}), Config(lateness)),
                        1800, 200);
  }
}

TEST(OperatorState, WindowOperatorWithCountTriggerEvictorAndFunctionState) {
  using A = TumblingEventTimeWindows;
  using C = ListContents<E, std::string, TimeWindow, DescribeList, CountEvictor, std::string>;
  using T = PurgingTrigger<CountTrigger>;
  using Op = WindowOperator<E, std::string, KeyOfE, A, T, C>;
  CheckEquivalence<std::string>(
      MakeFactory<Op>(KeyOfE{}, A::of(2s), T::of(CountTrigger::of(3)),
                      C(DescribeList{}, CountEvictor::of(2)), Config(500)),
      1800, 300);
  using Op2 = WindowOperator<E, std::string, KeyOfE, A, CountTrigger, C>;
  CheckEquivalence<std::string>(
      MakeFactory<Op2>(KeyOfE{}, A::of(2s), CountTrigger::of(2),
                       C(DescribeList{}, CountEvictor::of(3, /*do_evict_after=*/true)), Config(0)),
      1800, 300);
}

TEST(OperatorState, WindowOperatorMergingSessionsWithContinuousTrigger) {
  using A = EventTimeSessionWindows;
  using C = ListContents<E, std::string, TimeWindow, DescribeSession, NoEvictor, std::string>;
  using Op = WindowOperator<E, std::string, KeyOfE, A, ContinuousEventTimeTrigger, C>;
  CheckEquivalence<std::string>(
      MakeFactory<Op>(KeyOfE{}, A::with_gap(400ms), ContinuousEventTimeTrigger::of(250ms),
                      C(DescribeSession{}, NoEvictor{}), Config(300)),
      1800, 200);
}

TEST(OperatorState, WindowOperatorProcessingTimeTimers) {
  using A = TumblingProcessingTimeWindows;
  using Op =
      WindowOperator<E, std::string, KeyOfE, A, ProcessingTimeTrigger, SumContents<TimeWindow>>;
  CheckEquivalence<E>(MakeFactory<Op>(KeyOfE{}, A::of(700ms), ProcessingTimeTrigger{},
                                      SumContents<TimeWindow>(SumE{}, {}), Config(0)),
                      500, 100, false, /*late=*/false);
}

TEST(OperatorState, WindowOperatorGlobalWindowsCountTrigger) {
  using C = ListContents<E, std::string, GlobalWindow, DescribeList, NoEvictor, std::string>;
  using Op = WindowOperator<E, std::string, KeyOfE, GlobalWindows, CountTrigger, C>;
  CheckEquivalence<std::string>(
      MakeFactory<Op>(KeyOfE{}, GlobalWindows::create(), CountTrigger::of(4),
                      C(DescribeList{}, NoEvictor{}), Config(0)),
      500, 100, false, /*late=*/false);
}

// --- keyed process and rolling reduce --------------------------------------------

struct Avg {
  std::pair<int64_t, int64_t> create_accumulator() const { return {0, 0}; }
  std::pair<int64_t, int64_t> add(const E& e, std::pair<int64_t, int64_t> a) const {
    return {a.first + e.second, a.second + 1};
  }
  int64_t get_result(const std::pair<int64_t, int64_t>& a) const {
    return a.second == 0 ? 0 : a.first / a.second;
  }
};

// Every kind of keyed state, event- and processing-time timers (deleted and
// registered again).
struct EveryState : KeyedProcessFunction<std::string, E, std::string> {
  void process_element(const E& e, Context& ctx, Collector<std::string>& out) override {
    auto count = ctx.get_state<int64_t>("count");
    count.update(count.value_or(0) + 1);
    auto list = ctx.get_list_state<int>("list");
    list.add(e.second);
    if (list.get().size() > 3) list.update({list.get().begin() + 1, list.get().end()});
    auto map = ctx.get_map_state<int, std::string>("map");
    map.put(e.second % 4, std::to_string(ctx.timestamp()));
    auto max = ctx.get_reducing_state<int>("max", [](int a, int b) { return std::max(a, b); });
    max.add(e.second);
    auto avg = ctx.get_aggregating_state("avg", Avg{});
    avg.add(e);
    auto last = ctx.get_state<Timestamp>("timer");
    if (auto t = last.value()) ctx.timer_service().delete_event_time_timer(*t);
    const Timestamp t = ctx.timestamp() + 500;
    ctx.timer_service().register_event_time_timer(t);
    last.update(t);
    if (e.second % 3 == 0)
      ctx.timer_service().register_processing_time_timer(ctx.current_processing_time() + 300);
    out.collect(ctx.get_current_key() + " n=" + std::to_string(*count.value()) +
                " max=" + std::to_string(*max.get()) + " avg=" + std::to_string(*avg.get()));
  }
  void on_timer(Timestamp ts, OnTimerContext& ctx, Collector<std::string>& out) override {
    std::string s = ctx.get_current_key() +
                    (ctx.time_domain() == TimeDomain::kEventTime ? " event " : " processing ") +
                    std::to_string(ts) + " list=";
    for (int v : ctx.get_list_state<int>("list").get()) s += std::to_string(v) + ",";
    s += " map=";
    for (const auto& [k, v] : ctx.get_map_state<int, std::string>("map").entries())
      s += std::to_string(k) + ":" + v + ",";
    if (ctx.time_domain() == TimeDomain::kEventTime) ctx.get_state<Timestamp>("timer").clear();
    out.collect(std::move(s));
  }
};

using ProcessOp = KeyedProcessOperator<E, std::string, KeyOfE, EveryState, std::string>;

TEST(OperatorState, KeyedProcessOperator) {
  CheckEquivalence<std::string>(MakeFactory<ProcessOp>(KeyOfE{}, EveryState{}), 900, 300, false,
                                /*late=*/false);
}

TEST(OperatorState, KeyedProcessOperatorSnapshotOfAnUntouchedRestore) {
  CheckEquivalence<std::string>(MakeFactory<ProcessOp>(KeyOfE{}, EveryState{}), 900, 300,
                                /*twice=*/true, /*late=*/false);
}

using ReduceOp = RollingReduceOperator<E, std::string, KeyOfE, SumE>;

TEST(OperatorState, RollingReduce) {
  CheckEquivalence<E>(MakeFactory<ReduceOp>(KeyOfE{}, SumE{}), 900, 300, false, /*late=*/false);
}

// --- rescaling by key group ------------------------------------------------------

int SubtaskOf(const std::string& key, int parallelism) {
  return KeyGroupToSubtask(ComputeKeyGroup(KeyHash<std::string>{}(key), 128), 128, parallelism);
}

// Records sorted (the order of two old states' keys at one time is not
// specified); late records too.
template <typename Out>
std::vector<std::pair<Out, Timestamp>> Sorted(std::vector<std::pair<Out, Timestamp>> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  return v;
}

// Scale in (2 -> 1) and out (1 -> 2) at `cut`, against one instance that saw
// everything.
template <typename Out>
void ExpectRescaleEquivalent(const Factory& make, const std::vector<Step>& steps, size_t cut) {
  SCOPED_TRACE("cut at step " + std::to_string(cut));
  auto feed = [&](Instance<Out>& inst, size_t from, size_t to, int subtask, int parallelism) {
    for (size_t i = from; i < to; ++i) {
      const Step& s = steps[i];
      if (s.kind == Step::kRecord && SubtaskOf(s.value.first, parallelism) != subtask) continue;
      inst.Apply(s);
    }
  };
  Instance<Out> whole(make, 0);
  feed(whole, 0, cut, 0, 1);
  const std::string whole_snapshot = whole.Snapshot();
  const Timestamp wm = whole.wm;
  const Timestamp pt = whole.pt;
  whole.h.TakeRecords();
  whole.late->TakeRecords();
  feed(whole, cut, steps.size(), 0, 1);
  const auto expected = Sorted(whole.h.TakeRecords());
  const auto expected_late = Sorted(whole.late->TakeRecords());

  // 2 -> 1.
  Instance<Out> s0(make, 0, 0, 2);
  Instance<Out> s1(make, 0, 1, 2);
  feed(s0, 0, cut, 0, 2);
  feed(s1, 0, cut, 1, 2);
  Instance<Out> merged(make, pt);
  merged.Restore(s0.Snapshot());
  merged.Restore(s1.Snapshot());
  if (wm != kMinTimestamp) merged.Apply({Step::kWatermark, {}, wm});
  EXPECT_THAT(merged.h.TakeRecords(), ::testing::IsEmpty());
  feed(merged, cut, steps.size(), 0, 1);
  EXPECT_EQ(Sorted(merged.h.TakeRecords()), expected) << "2 -> 1";
  EXPECT_EQ(Sorted(merged.late->TakeRecords()), expected_late) << "2 -> 1";

  // 1 -> 2: each restores the whole snapshot and keeps its key groups.
  std::vector<std::pair<Out, Timestamp>> out;
  std::vector<std::pair<E, Timestamp>> late;
  for (int subtask = 0; subtask < 2; ++subtask) {
    Instance<Out> part(make, pt, subtask, 2);
    part.Restore(whole_snapshot);
    if (wm != kMinTimestamp) part.Apply({Step::kWatermark, {}, wm});
    EXPECT_THAT(part.h.TakeRecords(), ::testing::IsEmpty());
    feed(part, cut, steps.size(), subtask, 2);
    for (auto& r : part.h.TakeRecords()) out.push_back(std::move(r));
    for (auto& r : part.late->TakeRecords()) late.push_back(std::move(r));
  }
  EXPECT_EQ(Sorted(std::move(out)), expected) << "1 -> 2";
  EXPECT_EQ(Sorted(std::move(late)), expected_late) << "1 -> 2";
}

template <typename Out>
void CheckRescale(const Factory& make) {
  for (uint64_t seed : {4u, 9u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    const std::vector<Step> steps = RandomSteps(seed, 300, 11, 800, 250);
    for (size_t cut : Cuts(steps, seed, 2)) ExpectRescaleEquivalent<Out>(make, steps, cut);
  }
}

TEST(OperatorStateRescale, EveryOperator) {
  {
    using A = TumblingEventTimeWindows;
    using Op = OpFor<A, EventTimeTrigger, SumContents<TimeWindow>>;
    CheckRescale<E>(MakeFactory<Op>(KeyOfE{}, A::of(1s), EventTimeTrigger{},
                                    SumContents<TimeWindow>(SumE{}, {}), Config(500)));
  }
  {
    using A = SlidingEventTimeWindows;
    using Op = OpFor<A, EventTimeTrigger, AggContents<TimeWindow>>;
    CheckRescale<std::string>(MakeFactory<Op>(KeyOfE{}, A::of(1200ms, 400ms), EventTimeTrigger{},
                                              AggContents<TimeWindow>(CountSum{}, {}),
                                              Config(300)));
  }
  {
    using A = EventTimeSessionWindows;
    using Op = OpFor<A, EventTimeTrigger, SumContents<TimeWindow>>;
    CheckRescale<E>(MakeFactory<Op>(KeyOfE{}, A::with_gap(300ms), EventTimeTrigger{},
                                    SumContents<TimeWindow>(SumE{}, {}), Config(400)));
  }
  {
    using A = EventTimeSessionWindows;
    using C = ListContents<E, std::string, TimeWindow, DescribeSession, NoEvictor, std::string>;
    using Op = WindowOperator<E, std::string, KeyOfE, A, ContinuousEventTimeTrigger, C>;
    CheckRescale<std::string>(MakeFactory<Op>(KeyOfE{}, A::with_gap(400ms),
                                              ContinuousEventTimeTrigger::of(250ms),
                                              C(DescribeSession{}, NoEvictor{}), Config(300)));
  }
  CheckRescale<std::string>(MakeFactory<ProcessOp>(KeyOfE{}, EveryState{}));
  CheckRescale<E>(MakeFactory<ReduceOp>(KeyOfE{}, SumE{}));
}

// --- a state type without a codec ------------------------------------------------

}  // namespace
}  // namespace tidemark

namespace user_types {
// A key type key_by accepts (JavaHashCode) with no StateCodec: not trivially
// copyable.
struct Name {
  std::string s;
  bool operator==(const Name&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Name& n) {
    return H::combine(std::move(h), n.s);
  }
};
inline int32_t JavaHashCode(const Name& n) { return tidemark::JavaStringHashCode(n.s); }
}  // namespace user_types

namespace tidemark {
namespace {

static_assert(!HasStateCodec<user_types::Name>);
static_assert(!HasStateCodec<std::vector<user_types::Name>>);
static_assert(!HasStateCodec<std::pair<int, user_types::Name>>);
static_assert(!HasStateCodec<std::string_view>);
static_assert(HasStateCodec<std::map<std::string, std::vector<std::pair<int, double>>>>);
static_assert(HasStateCodec<TriggerState>);
static_assert(HasStateCodec<MergingWindowSet>);
static_assert(HasStateCodec<WindowElements<E>>);
static_assert(!HasStateCodec<WindowElements<user_types::Name>>);

struct NameOf {
  user_types::Name operator()(const E& e) const { return {e.first}; }
};

TEST(OperatorStateNoCodec, SnapshotFailsNamingTheTypeAndTheOperator) {
  using Op = RollingReduceOperator<E, user_types::Name, NameOf, SumE>;
  Instance<E> inst(MakeFactory<Op>(NameOf{}, SumE{}), 0);
  inst.Apply({Step::kRecord, E("a", 1), 5});
  try {
    inst.Snapshot();
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("operator 'window-under-test'"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("user_types::Name"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr(
                              "has no tidemark::StateCodec: specialise it to checkpoint this job"));
  }
  // Window contents keyed by it.
  using WOp = FastWindowOperator<
      E, user_types::Name, NameOf, TumblingEventTimeWindows,
      ReduceContents<E, user_types::Name, TimeWindow, SumE, NoProcessFunction, E>>;
  WindowOperatorConfig<E> cfg;
  Instance<E> w(
      MakeFactory<WOp>(
          NameOf{}, TumblingEventTimeWindows::of(1s), EventTimeTrigger{},
          ReduceContents<E, user_types::Name, TimeWindow, SumE, NoProcessFunction, E>(SumE{}, {}),
          cfg),
      0);
  w.Apply({Step::kRecord, E("a", 1), 5});
  EXPECT_THROW(w.Snapshot(), std::runtime_error);
}

void BuildNameJob(StreamExecutionEnvironment& env, std::vector<E>* out) {
  env.from_generator<E>([](int64_t i) { return E("k" + std::to_string(i % 5), 1); }, 3000, 3000.0)
      .key_by(NameOf{})
      .reduce(SumE{})
      .add_sink([out](E&& e, Timestamp) { out->push_back(std::move(e)); }, "Collect")
      .set_parallelism(1);
}

TEST(OperatorStateNoCodec, JobRunsWithoutCheckpointsAndFailsAtTheFirstOne) {
  {
    StreamExecutionEnvironment env;
    std::vector<E> out;
    BuildNameJob(env, &out);
    JobResult r = env.execute("no checkpoints");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(out.size(), 3000u);
  }
  {
    testing::TempDir dir;
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(5), dir.path());
    std::vector<E> out;
    BuildNameJob(env, &out);
    JobResult r = env.execute("checkpoints");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status.message()),
                ::testing::HasSubstr("has no tidemark::StateCodec: specialise it"));
    EXPECT_THAT(std::string(r.status.message()), ::testing::HasSubstr("user_types::Name"));
  }
}

}  // namespace
}  // namespace tidemark
