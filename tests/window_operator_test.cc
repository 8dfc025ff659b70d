// WindowOperator and KeyedProcessOperator through the deterministic harness
// (Longer than 600 lines: Flink's WindowOperatorTest facts, one test each, over one harness.)
// (tests/window_harness.h): docs/semantics.md sections 4, 6 and 7, with
// facts ported from Flink's WindowOperatorTest.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "window_harness.h"

// Counts heap allocations while g_count_allocs is set (for the no-allocation
// checks of the reduce / aggregate path).
namespace {
std::atomic<bool> g_count_allocs{false};
std::atomic<int64_t> g_allocs{0};
}  // namespace
void* operator new(std::size_t n) {
  if (g_count_allocs.load(std::memory_order_relaxed)) g_allocs.fetch_add(1);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::MakeProcessWindowOperator;
using testing::MakeReduceWindowOperator;
using testing::OperatorHarness;
using ::testing::Pair;

using E = std::pair<std::string, int>;
using Out = std::vector<std::pair<E, Timestamp>>;

struct KeyOfE {
  std::string operator()(const E& e) const { return e.first; }
};
struct SumE {
  E operator()(const E& a, const E& b) const { return E(a.first, a.second + b.second); }
};

std::pair<E, Timestamp> R(const std::string& k, int v, Timestamp ts) { return {E(k, v), ts}; }

template <typename Assigner, typename Trigger>
auto ReduceHarness(Assigner a, Trigger t, int64_t lateness = 0,
                   std::optional<OutputTag<E>> tag = std::nullopt) {
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = lateness;
  cfg.late_tag = tag;
  auto h = std::make_unique<OperatorHarness<E, E>>(
      MakeReduceWindowOperator<E>(KeyOfE{}, a, t, SumE{}, cfg));
  return h;
}

// The operator ReduceHarness builds (as the windowed stream would).
template <typename Assigner, typename Trigger>
using ReduceOp = WindowOperatorFor<
    E, std::string, KeyOfE, Assigner, Trigger,
    ReduceContents<E, std::string, typename Assigner::WindowType, SumE, NoProcessFunction, E>>;

// ---------------------------------------------------------------------------
// Tumbling / sliding / session firing

TEST(WindowOperator, TumblingFiresWhenWatermarkReachesMaxTimestamp) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create());
  h->Open();
  h->ProcessElement(E("a", 1), 1000);
  h->ProcessElement(E("a", 2), 2999);
  h->ProcessElement(E("b", 5), 0);
  h->ProcessElement(E("a", 3), 3000);
  h->ProcessWatermark(2998);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(2999);
  EXPECT_THAT(h->TakeSortedRecords(), ElementsAre(R("a", 3, 2999), R("b", 5, 2999)));
  h->ProcessWatermark(5999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 5999)));
  // Results come before the watermark that caused them; watermarks forwarded.
  const auto& ev = h->output().events();
  ASSERT_EQ(ev.size(), 6u);
  EXPECT_EQ(ev[0].kind, testing::Emitted<E>::kWatermark);
  EXPECT_EQ(ev[3].kind, testing::Emitted<E>::kWatermark);
  EXPECT_EQ(ev[3].ts, 2999);
  EXPECT_EQ(ev[4].kind, testing::Emitted<E>::kRecord);
  EXPECT_THAT(h->output().Watermarks(), ElementsAre(2998, 2999, 5999));
  auto& op = h->op<ReduceOp<TumblingEventTimeWindows, EventTimeTrigger>>();
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
  EXPECT_EQ(op.num_event_time_timers(), 0u);
}

TEST(WindowOperator, EmptyWindowsNeverFire) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create());
  h->Open();
  h->ProcessWatermark(100000);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessElement(E("a", 1), 100001);
  h->ProcessWatermark(200000);  // skips many empty windows; only one fires
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 101999)));
}

TEST(WindowOperator, OffsetsAndNegativeTimestamps) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(5s, 100ms), EventTimeTrigger::create());
  h->Open();
  h->ProcessElement(E("a", 1), -1);     // [-4900, 100)
  h->ProcessElement(E("a", 2), 99);     // same window
  h->ProcessElement(E("a", 4), 100);    // [100, 5100)
  h->ProcessElement(E("b", 8), -7000);  // [-9900, -4900)
  h->ProcessWatermark(-4902);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(-4901);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("b", 8, -4901)));
  h->ProcessWatermark(99);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 99)));
  h->ProcessWatermark(5099);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 4, 5099)));
}

TEST(WindowOperator, SlidingFiresEachWindowOfAnElement) {
  auto h = ReduceHarness(SlidingEventTimeWindows::of(3s, 1s), EventTimeTrigger::create());
  h->Open();
  h->ProcessElement(E("a", 1), 1500);   // [1000,4000) [0,3000) [-1000,2000)
  h->ProcessElement(E("a", 10), 2500);  // [2000,5000) [1000,4000) [0,3000)
  h->ProcessWatermark(1999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 1999)));
  h->ProcessWatermark(2999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 11, 2999)));
  h->ProcessWatermark(10000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 11, 3999), R("a", 10, 4999)));
}

TEST(WindowOperator, SlidingLateFiringsInDescendingStartOrder) {
  auto h = ReduceHarness(SlidingEventTimeWindows::of(3s, 1s), EventTimeTrigger::create(), 5000);
  h->Open();
  h->ProcessElement(E("a", 1), 1500);
  h->ProcessWatermark(4999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 1999), R("a", 1, 2999), R("a", 1, 3999)));
  // One late element re-fires its windows in the assigner's order.
  h->ProcessElement(E("a", 1), 1600);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 3999), R("a", 2, 2999), R("a", 2, 1999)));
  // Past the cleanup of [-1000,2000) (1999 + 5000) only the other two fire.
  h->ProcessWatermark(6999);
  h->ProcessElement(E("a", 1), 1700);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 3999), R("a", 3, 2999)));
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
}

TEST(WindowOperator, SlidingElementAcceptedByOneWindowIsNeverLate) {
  OutputTag<E> late("late");
  auto h = ReduceHarness(SlidingEventTimeWindows::of(3s, 1s), EventTimeTrigger::create(), 0, late);
  auto& side = h->AddSideOutput(late);
  h->Open();
  h->ProcessWatermark(2500);
  // [-1000,2000) is late, [0,3000) and [1000,4000) are not.
  h->ProcessElement(E("a", 1), 1500);
  EXPECT_THAT(side.TakeRecords(), IsEmpty());
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
  h->ProcessWatermark(5000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 2999), R("a", 1, 3999)));
}

TEST(WindowOperator, SessionWindowsMergeStateAndTimers) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(3s), EventTimeTrigger::create());
  h->Open();
  auto& op = h->op<ReduceOp<EventTimeSessionWindows, EventTimeTrigger>>();
  h->ProcessElement(E("a", 1), 1000);    // [1000,4000)
  h->ProcessElement(E("a", 2), 5000);    // [5000,8000)
  h->ProcessElement(E("b", 100), 1000);  // other key
  EXPECT_EQ(op.num_event_time_timers(), 3u);
  h->ProcessElement(E("a", 4), 3500);  // [3500,6500) bridges: [1000,8000)
  // The timers of [1000,4000) and [5000,8000) are gone, [1000,8000) has one.
  EXPECT_EQ(op.num_event_time_timers(), 2u);
  EXPECT_EQ(op.num_windows_with_contents(), 2u);
  h->ProcessWatermark(3999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("b", 100, 3999)));
  h->ProcessWatermark(7998);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(7999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 7, 7999)));
  EXPECT_EQ(op.num_event_time_timers(), 0u);
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
  EXPECT_EQ(op.num_keys_with_sessions(), 0u);
}

TEST(WindowOperator, SessionElementsExactlyGapApartAreOneSession) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(5s), EventTimeTrigger::create());
  h->Open();
  h->ProcessElement(E("a", 1), 2000);
  h->ProcessElement(E("a", 1), 7000);  // touching windows merge: [2000, 12000)
  h->ProcessWatermark(kMaxWatermark);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 11999)));
}

TEST(WindowOperator, LateElementInsideFiredSessionFiresAtOnce) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(3s), EventTimeTrigger::create(), 3000);
  h->Open();
  h->ProcessElement(E("a", 1), 1000);
  h->ProcessElement(E("a", 1), 2000);  // [1000, 5000)
  h->ProcessWatermark(5000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 4999)));
  h->ProcessElement(E("a", 1), 1500);  // inside [1000,5000): no merge, late firing
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 4999)));
  h->ProcessWatermark(7999);  // cleanup at 4999 + 3000
  h->ProcessElement(E("a", 1), 1500);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 1);
}

TEST(WindowOperator, LateElementMergesFiredSessionsAndFiresImmediately) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(3s), EventTimeTrigger::create(), 10000);
  h->Open();
  auto& op = h->op<ReduceOp<EventTimeSessionWindows, EventTimeTrigger>>();
  h->ProcessElement(E("a", 1), 1000);  // [1000,4000)
  h->ProcessElement(E("a", 2), 4500);  // [4500,7500)
  h->ProcessWatermark(8000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 3999), R("a", 2, 7499)));
  // Within lateness: [3000,6000) bridges both into [1000,7500), whose end has
  // passed: it fires at once with everything.
  h->ProcessElement(E("a", 4), 3000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 7, 7499)));
  // No trigger timer for the merged window (EventTimeTrigger::on_merge), one
  // cleanup timer at 7499 + 10000.
  EXPECT_EQ(op.num_event_time_timers(), 1u);
  h->ProcessWatermark(17498);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(op.num_windows_with_contents(), 1u);
  h->ProcessWatermark(17499);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
  EXPECT_EQ(op.num_keys_with_sessions(), 0u);
}

TEST(WindowOperator, LateRecordMergesSessionsBeforeTheyFire) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(3s), EventTimeTrigger::create(), 1000);
  h->Open();
  h->ProcessElement(E("a", 1), 1000);  // [1000,4000)
  h->ProcessElement(E("a", 2), 5000);  // [5000,8000)
  h->ProcessWatermark(4000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 3999)));
  // 3800 is behind the watermark but [1000,4000) is within lateness (cleanup
  // 4999): merges both sessions into [1000,8000), which fires later.
  h->ProcessElement(E("a", 4), 3800);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(7999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 7, 7999)));
}

// Ported from Flink's WindowOperatorTest (testDropDueToLatenessSession*):
// gap 3 s, output "key-sum start end" at max_timestamp.
struct SessionDescribe {
  void operator()(const std::string& key, const TimeWindow& w, const E& reduced, WindowContext&,
                  Collector<std::string>& out) const {
    out.collect(key + "-" + std::to_string(reduced.second) + " " + std::to_string(w.start) + " " +
                std::to_string(w.end));
  }
};

template <typename Trigger>
std::unique_ptr<OperatorHarness<E, std::string>> FlinkSessionHarness(Trigger t, int64_t lateness) {
  using C = ReduceContents<E, std::string, TimeWindow, SumE, SessionDescribe, std::string>;
  using Op = WindowOperator<E, std::string, KeyOfE, EventTimeSessionWindows, Trigger, C>;
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = lateness;
  auto h = std::make_unique<OperatorHarness<E, std::string>>(std::make_unique<Op>(
      KeyOfE{}, EventTimeSessionWindows::with_gap(3s), t, C(SumE{}, SessionDescribe{}), cfg));
  h->Open();
  // The common prefix of the Flink tests.
  h->ProcessElement(E("key2", 1), 1000);
  h->ProcessWatermark(1999);
  h->ProcessElement(E("key2", 1), 2000);
  h->ProcessWatermark(4998);
  h->ProcessElement(E("key2", 1), 4500);  // not late: its session ends after the watermark
  h->ProcessElement(E("key2", 1), 8500);  // new session
  h->ProcessWatermark(7400);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessElement(E("key2", 1), 7000);  // merges the two sessions
  h->ProcessWatermark(11501);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-5 1000 11500", 11499)));
  h->ProcessElement(E("key2", 1), 11600);  // new session
  h->ProcessWatermark(14600);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-1 11600 14600", 14599)));
  return h;
}

TEST(WindowOperatorFlinkPort, SessionSmallLatenessAccumulatingMergesLateElement) {
  auto h = FlinkSessionHarness(EventTimeTrigger::create(), 10);
  // Merged into (11600-14600), still within lateness: [10000,14600) has
  // max_timestamp <= watermark, so it fires at once.
  h->ProcessElement(E("key2", 1), 10000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-2 10000 14600", 14599)));
  h->ProcessElement(E("key2", 1), 14500);
  h->ProcessWatermark(20000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-3 10000 17500", 17499)));
  h->ProcessWatermark(100000);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
}

TEST(WindowOperatorFlinkPort, SessionSmallLatenessPurgingStillMergesAndFires) {
  // Current Flink (docs/semantics.md 11): the late element merges into
  // the fired-and-purged session and fires with what is left (itself).
  auto h =
      FlinkSessionHarness(PurgingTrigger<EventTimeTrigger>::of(EventTimeTrigger::create()), 10);
  h->ProcessElement(E("key2", 1), 10000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-1 10000 14600", 14599)));
  h->ProcessElement(E("key2", 1), 14500);
  h->ProcessWatermark(20000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-1 10000 17500", 17499)));
}

TEST(WindowOperatorFlinkPort, SessionHugeLatenessPurging) {
  auto h =
      FlinkSessionHarness(PurgingTrigger<EventTimeTrigger>::of(EventTimeTrigger::create()), 10000);
  h->ProcessElement(E("key2", 1), 10000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-1 1000 14600", 14599)));
  h->ProcessElement(E("key2", 1), 14500);
  h->ProcessWatermark(20000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-1 1000 17500", 17499)));
}

TEST(WindowOperatorFlinkPort, SessionHugeLatenessAccumulating) {
  auto h = FlinkSessionHarness(EventTimeTrigger::create(), 10000);
  // Bridges (1000-11500) and (11600-14600): the merged session is already
  // past the watermark, so it fires at once with all 7 elements.
  h->ProcessElement(E("key2", 1), 10000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-7 1000 14600", 14599)));
  h->ProcessElement(E("key2", 1), 14500);
  h->ProcessWatermark(20000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("key2-8 1000 17500", 17499)));
}

// ---------------------------------------------------------------------------
// Lateness, cleanup, side output

TEST(WindowOperator, LateFiringPerRecordWithinLatenessAndCleanupAtExactTime) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create(), 2000);
  h->Open();
  auto& op = h->op<ReduceOp<TumblingEventTimeWindows, EventTimeTrigger>>();
  h->ProcessElement(E("a", 1), 1000);
  EXPECT_EQ(op.num_event_time_timers(), 2u);  // 2999 (trigger) and 4999 (cleanup)
  h->ProcessWatermark(2999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 2999)));
  h->ProcessElement(E("a", 1), 500);  // late but within lateness: fires with all contents
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 2999)));
  h->ProcessWatermark(4998);
  h->ProcessElement(E("a", 1), 100);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 2999)));
  EXPECT_EQ(op.num_windows_with_contents(), 1u);
  h->ProcessWatermark(4999);  // cleanup time: contents dropped, nothing emitted
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
  EXPECT_EQ(op.num_event_time_timers(), 0u);
  h->ProcessElement(E("a", 1), 200);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 1);
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
}

TEST(WindowOperator, LateRecordsGoToSideOutputWhenTagged) {
  OutputTag<E> late("late");
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create(), 0, late);
  auto& side = h->AddSideOutput(late);
  h->Open();
  h->ProcessElement(E("a", 1), 1000);
  h->ProcessWatermark(2999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 2999)));
  h->ProcessElement(E("a", 7), 2999);  // window cleaned at 2999: late
  h->ProcessElement(E("b", 9), 10);
  h->ProcessElement(E("a", 1), 3000);  // next window: fine
  EXPECT_THAT(side.TakeRecords(), ElementsAre(R("a", 7, 2999), R("b", 9, 10)));
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
  h->ProcessWatermark(5999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 5999)));
  // Side outputs get the watermarks too.
  EXPECT_THAT(side.Watermarks(), ElementsAre(2999, 5999));
}

TEST(WindowOperator, TaggedButUnconsumedSideOutputIsCounted) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create(), 0,
                         OutputTag<E>("nobody"));
  h->Open();
  h->ProcessWatermark(2999);
  h->ProcessElement(E("a", 7), 5);
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
  EXPECT_EQ(h->counter(kNumLateRecordsToUnconsumedSideOutput), 1);
}

TEST(WindowOperator, DroppedWithoutTagIsCounted) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s), EventTimeTrigger::create());
  h->Open();
  h->ProcessWatermark(2999);
  h->ProcessElement(E("a", 7), 5);
  h->ProcessElement(E("a", 7), 2999);
  h->ProcessElement(E("a", 7), 3000);
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 2);
}

TEST(WindowOperator, EndOfInputMaxWatermarkFiresEveryWindow) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(1s), EventTimeTrigger::create(), 5000);
  h->Open();
  auto& op = h->op<ReduceOp<TumblingEventTimeWindows, EventTimeTrigger>>();
  for (int i = 0; i < 10; ++i) h->ProcessElement(E(i % 2 ? "odd" : "even", i), i * 700);
  h->ProcessWatermark(kMaxWatermark);
  auto r = h->TakeSortedRecords();
  EXPECT_EQ(r.size(), 10u);  // 7 one-second windows, 3 of them with both keys
  int total = 0;
  for (auto& [e, ts] : r) total += e.second;
  EXPECT_EQ(total, 45);
  EXPECT_EQ(op.num_event_time_timers(), 0u);
  EXPECT_EQ(op.num_windows_with_contents(), 0u);
  EXPECT_THAT(h->output().Watermarks(), ElementsAre(kMaxWatermark));
}

TEST(WindowOperator, CleanupTimeOverflowGuardNearMax) {
  const Timestamp ts = kMaxTimestamp - 5000;
  auto h = ReduceHarness(TumblingEventTimeWindows::of(1s), EventTimeTrigger::create(), 10000);
  h->Open();
  auto& op = h->op<ReduceOp<TumblingEventTimeWindows, EventTimeTrigger>>();
  std::vector<TimeWindow> ws;
  TumblingEventTimeWindows::of(1s).assign_windows(0, ts, 0, ws);
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(op.CleanupTime(ws[0]), kMaxTimestamp);  // max_timestamp + 10000 overflows
  h->ProcessElement(E("a", 1), ts);
  EXPECT_EQ(op.num_event_time_timers(), 1u);  // trigger timer only: no cleanup timer at MAX
  h->ProcessWatermark(kMaxWatermark - 1);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, ws[0].max_timestamp())));
  // Never late (cleanup MAX): a later element re-fires the window.
  h->ProcessElement(E("a", 1), ts);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, ws[0].max_timestamp())));
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
}

TEST(WindowOperator, ElementLatenessUsesPlainAddition) {
  // ts + lateness overflows for ts near MAX: Java wraps, so such an element
  // counts as late only when its window is.  Here the window is fine.
  auto h = ReduceHarness(TumblingEventTimeWindows::of(1s), EventTimeTrigger::create(),
                         kMaxTimestamp / 2);
  h->Open();
  h->ProcessWatermark(0);
  h->ProcessElement(E("a", 1), 10);
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
  h->ProcessWatermark(999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 999)));
}

TEST(WindowOperator, MergeCheckHasNoOverflowGuard) {
  // docs/semantics.md 11: cleanup_time is guarded, the merge check is
  // not.  Near MAX, max_timestamp + lateness wraps negative, so merging there
  // throws "cannot become earlier than the current watermark", as in Flink.
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(1s), EventTimeTrigger::create(), 10000);
  h->Open();
  h->ProcessWatermark(0);
  h->ProcessElement(E("a", 1), kMaxTimestamp - 5000);  // no cleanup timer: cleanup MAX
  try {
    h->ProcessElement(E("a", 1), kMaxTimestamp - 4500);
    FAIL() << "expected the merge to throw";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("cannot become earlier than the current watermark"));
  }
}

// ---------------------------------------------------------------------------
// Triggers

TEST(WindowOperator, CountTriggerOnGlobalWindowsAccumulates) {
  auto h = ReduceHarness(GlobalWindows::create(), CountTrigger::of(3));
  h->Open();
  for (int i = 0; i < 7; ++i) h->ProcessElement(E("a", 1), i);
  h->ProcessElement(E("b", 1), 0);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, kMaxTimestamp), R("a", 6, kMaxTimestamp)));
  h->ProcessWatermark(kMaxWatermark);  // no end-of-stream firing by default
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
}

TEST(WindowOperator, PurgingCountTriggerDiscardsOnFire) {
  auto h =
      ReduceHarness(GlobalWindows::create(), PurgingTrigger<CountTrigger>::of(CountTrigger::of(3)));
  h->Open();
  for (int i = 0; i < 7; ++i) h->ProcessElement(E("a", i + 1), i);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 6, kMaxTimestamp), R("a", 15, kMaxTimestamp)));
}

TEST(WindowOperator, GlobalWindowsEndOfStreamTrigger) {
  auto h = ReduceHarness(GlobalWindows::create_with_end_of_stream_trigger(),
                         GlobalWindows::create_with_end_of_stream_trigger().default_trigger());
  h->Open();
  h->ProcessElement(E("a", 1), 5);
  h->ProcessElement(E("a", 2), 6);
  h->ProcessWatermark(1000000);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(kMaxWatermark);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, kMaxTimestamp)));
}

TEST(WindowOperator, PurgingEventTimeTriggerLateFiringCarriesOnlyNewElements) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(3s),
                         PurgingTrigger<EventTimeTrigger>::of(EventTimeTrigger::create()), 2000);
  h->Open();
  h->ProcessElement(E("a", 1), 1000);
  h->ProcessElement(E("a", 1), 2000);
  h->ProcessWatermark(2999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 2999)));
  h->ProcessElement(E("a", 5), 500);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 5, 2999)));
}

TEST(WindowOperator, ContinuousEventTimeTriggerFiresAtIntervalsClampedToWindowEnd) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(10s), ContinuousEventTimeTrigger::of(4s));
  h->Open();
  auto& op = h->op<ReduceOp<TumblingEventTimeWindows, ContinuousEventTimeTrigger>>();
  h->ProcessElement(E("a", 1), 1000);  // fire time 4000 (epoch aligned)
  h->ProcessWatermark(3999);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(4000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 9999)));
  h->ProcessElement(E("a", 2), 5000);
  h->ProcessWatermark(8000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 9999)));
  // Next fire time min(12000, 9999) = 9999 coincides with the end timer:
  // one firing.
  h->ProcessWatermark(9999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 9999)));
  EXPECT_EQ(op.num_event_time_timers(), 0u);
  EXPECT_EQ(op.num_trigger_states(), 0u);
}

TEST(WindowOperator, ContinuousEventTimeTriggerLateElementFires) {
  auto h =
      ReduceHarness(TumblingEventTimeWindows::of(10s), ContinuousEventTimeTrigger::of(3s), 5000);
  h->Open();
  h->ProcessElement(E("a", 1), 1000);
  h->ProcessWatermark(9999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 1, 9999), R("a", 1, 9999), R("a", 1, 9999),
                                            R("a", 1, 9999)));  // 3000, 6000, 9000, 9999
  h->ProcessElement(E("a", 1), 2000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 2, 9999)));
}

TEST(WindowOperator, CountTriggerOnSessionsMergesCounts) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(3s), CountTrigger::of(3));
  h->Open();
  auto& op = h->op<ReduceOp<EventTimeSessionWindows, CountTrigger>>();
  h->ProcessElement(E("a", 1), 1000);   // count 1 in [1000,4000)
  h->ProcessElement(E("a", 1), 10000);  // count 1 in [10000,13000)
  h->ProcessElement(E("a", 1), 6000);   // [6000,9000): separate, count 1
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessElement(E("a", 1), 3500);  // merges [1000,4000)+[6000,9000)? no: [3500,6500)
  // [3500,6500) bridges [1000,4000) and [6000,9000): counts 1+1, +1 = 3: fire.
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 4 - 1, 8999)));
  EXPECT_EQ(op.num_trigger_states(), 1u);  // [10000,13000) still counts 1
}

// A user trigger: fires on every element whose value is negative.
class FireOnNegative : public Trigger<E, TimeWindow> {
 public:
  TriggerResult on_element(const E& e, Timestamp, const TimeWindow&, TriggerContext&) override {
    return e.second < 0 ? TriggerResult::kFire : TriggerResult::kContinue;
  }
  TriggerResult on_event_time(Timestamp, const TimeWindow&, TriggerContext&) override {
    return TriggerResult::kContinue;
  }
  TriggerResult on_processing_time(Timestamp, const TimeWindow&, TriggerContext&) override {
    return TriggerResult::kContinue;
  }
  void clear(const TimeWindow&, TriggerContext&) override {}
};

TEST(WindowOperator, UserImplementedTrigger) {
  auto h = ReduceHarness(TumblingEventTimeWindows::of(10s), FireOnNegative());
  h->Open();
  h->ProcessElement(E("a", 5), 1);
  h->ProcessElement(E("a", -1), 2);
  h->ProcessElement(E("a", 2), 3);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 4, 9999)));
  h->ProcessWatermark(kMaxWatermark);  // cleans up without firing
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
}

// Issue 10, item 4: session windows at MIN, MIN + 1, MAX - 1 and MAX are
// Flink's [ts, ts + gap) in Java arithmetic: EventTimeSessionWindows has no
// MIN check, and near MAX the end wraps, so the window's max_timestamp is
// near MIN and the first watermark past it fires it.  Windows with wrapped
// ends merge by TimeWindow.intersects on the wrapped values: [MAX - 1, MIN + 8)
// and [MAX, MIN + 9) do not intersect (MAX - 1 > MIN + 9).
TEST(WindowOperator, SessionWindowsAtTheEndsOfTheLongRangeAreFlinks) {
  auto h = ReduceHarness(EventTimeSessionWindows::with_gap(10ms), EventTimeTrigger::create());
  h->Open();
  constexpr Timestamp kMin = kMinTimestamp, kMax = kMaxTimestamp;
  h->ProcessElement(E("a", 1), kMin);      // [MIN, MIN + 10)
  h->ProcessElement(E("a", 2), kMin + 1);  // merges: [MIN, MIN + 11)
  h->ProcessElement(E("b", 4), kMax - 1);  // [MAX - 1, MIN + 8)
  h->ProcessElement(E("b", 8), kMax);      // [MAX, MIN + 9), on its own
  using SessionOp = ReduceOp<EventTimeSessionWindows, EventTimeTrigger>;
  EXPECT_EQ(h->op<SessionOp>().num_windows_with_contents(), 3u);
  h->ProcessWatermark(kMin + 6);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->ProcessWatermark(kMin + 7);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("b", 4, kMin + 7)));
  h->ProcessWatermark(kMax);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("b", 8, kMin + 8), R("a", 3, kMin + 10)));
  EXPECT_EQ(h->op<SessionOp>().num_windows_with_contents(), 0u);
  EXPECT_EQ(h->op<SessionOp>().num_keys_with_sessions(), 0u);
  EXPECT_EQ(h->counter(kNumLateRecordsDropped), 0);
}

TEST(WindowOperator, SessionsRejectNonMergingTrigger) {
  EXPECT_THROW(ReduceHarness(EventTimeSessionWindows::with_gap(1s), FireOnNegative()),
               std::invalid_argument);
  EXPECT_THROW(ReduceHarness(TumblingEventTimeWindows::of(1s), EventTimeTrigger::create(), -1),
               std::invalid_argument);
}

TEST(WindowOperator, ProcessingTimeTumblingWindows) {
  auto h = ReduceHarness(TumblingProcessingTimeWindows::of(1s), ProcessingTimeTrigger::create());
  h->Open();
  h->SetProcessingTime(100);
  h->ProcessElement(E("a", 1), kNoTimestamp);
  h->ProcessElement(E("a", 2), 123456);
  h->SetProcessingTime(998);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->SetProcessingTime(1000);
  h->ProcessElement(E("a", 4), 0);
  h->SetProcessingTime(1500);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 999)));
  h->ProcessWatermark(kMaxWatermark);  // event time does not fire it
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->SetProcessingTime(5000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 4, 1999)));
  using PtOp = ReduceOp<TumblingProcessingTimeWindows, ProcessingTimeTrigger>;
  EXPECT_EQ(h->op<PtOp>().num_processing_time_timers(), 0u);
}

// A processing-time timer at T fires once the clock has passed T (clock >=
// T + 1; Flink's ProcessingTimeServiceUtil.getProcessingTimeDelay).  The
// window [0, 1000) has its timer at max_timestamp 999, so a record seen at
// clock 999 still belongs to it and to its one firing, at clock 1000.
TEST(WindowOperator, ProcessingTimeWindowFiresOnceWithARecordSeenAtItsLastMillisecond) {
  auto h = ReduceHarness(TumblingProcessingTimeWindows::of(1s), ProcessingTimeTrigger::create());
  h->Open();
  h->SetProcessingTime(500);
  h->ProcessElement(E("a", 1), kNoTimestamp);
  h->SetProcessingTime(999);
  EXPECT_THAT(h->TakeRecords(), IsEmpty()) << "the timer at 999 is not due at clock 999";
  h->ProcessElement(E("a", 2), kNoTimestamp);
  EXPECT_THAT(h->TakeRecords(), IsEmpty());
  h->SetProcessingTime(1000);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(R("a", 3, 999)));
  h->SetProcessingTime(5000);
  EXPECT_THAT(h->TakeRecords(), IsEmpty()) << "fired once";
  using PtOp = ReduceOp<TumblingProcessingTimeWindows, ProcessingTimeTrigger>;
  EXPECT_EQ(h->op<PtOp>().num_processing_time_timers(), 0u);
  EXPECT_EQ(h->op<PtOp>().num_windows_with_contents(), 0u);
}

// ---------------------------------------------------------------------------
// process / apply, aggregate, evictors

std::string Describe(const TimeWindow& w) {
  return "[" + std::to_string(w.start) + "," + std::to_string(w.end) + ")";
}
std::string Describe(const GlobalWindow&) { return "[global]"; }

struct ListAll {
  template <typename W>
  void operator()(const std::string& key, const W& w, const std::vector<E>& elements,
                  WindowContext& ctx, Collector<std::string>& out) const {
    std::string s = key + Describe(w);
    for (const auto& e : elements) s += " " + std::to_string(e.second);
    s += " wm=" + FormatTimestamp(ctx.current_watermark());
    out.collect(s);
  }
};

TEST(WindowOperator, ProcessFunctionSeesAllElementsAndContext) {
  auto h =
      std::make_unique<OperatorHarness<E, std::string>>(MakeProcessWindowOperator<E, std::string>(
          KeyOfE{}, SlidingEventTimeWindows::of(2s, 1s), EventTimeTrigger::create(), ListAll{}));
  h->Open();
  h->ProcessElement(E("k", 1), 500);
  h->ProcessElement(E("k", 2), 1500);
  h->ProcessWatermark(999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("k[-1000,1000) 1 wm=999", 999)));
  h->ProcessWatermark(1999);
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("k[0,2000) 1 2 wm=1999", 1999)));
}

TEST(WindowOperator, CountEvictorKeepsLastElements) {
  auto h =
      std::make_unique<OperatorHarness<E, std::string>>(MakeProcessWindowOperator<E, std::string>(
          KeyOfE{}, GlobalWindows::create(), CountTrigger::of(2), ListAll{}, {},
          CountEvictor::of(3)));
  h->Open();
  for (int i = 1; i <= 6; ++i) h->ProcessElement(E("k", i), i);
  auto r = h->TakeRecords();
  ASSERT_EQ(r.size(), 3u);
  EXPECT_THAT(r[0].first, ::testing::StartsWith("k"));
  EXPECT_THAT(r[0].first, ::testing::HasSubstr(" 1 2 wm"));
  EXPECT_THAT(r[1].first, ::testing::HasSubstr(" 2 3 4 wm"));
  EXPECT_THAT(r[2].first, ::testing::HasSubstr(" 4 5 6 wm"));
}

TEST(WindowOperator, TimeEvictorKeepsRecentElements) {
  auto h =
      std::make_unique<OperatorHarness<E, std::string>>(MakeProcessWindowOperator<E, std::string>(
          KeyOfE{}, TumblingEventTimeWindows::of(10s), EventTimeTrigger::create(), ListAll{}, {},
          TimeEvictor::of(2s)));
  h->Open();
  for (int i = 0; i < 10; ++i) h->ProcessElement(E("k", i), i * 1000);
  h->ProcessWatermark(9999);
  // newest 9000: elements with ts <= 7000 are evicted.
  EXPECT_THAT(h->TakeRecords(), ElementsAre(Pair("k[0,10000) 8 9 wm=9999", 9999)));
}

// As Flink's TimeEvictor (found by a review): nothing is evicted when the
// first element has no timestamp; the cutoff (newest - size) wraps as Java's
// long does, so near MIN, or with a size past the timestamps, it wraps to the
// top of the range and every element goes; an element without a timestamp
// after one with is an error.
TEST(WindowOperator, TimeEvictorAsFlinksAtTheEdges) {
  auto run = [](Duration size, std::vector<Timestamp> ts) {
    auto h =
        std::make_unique<OperatorHarness<E, std::string>>(MakeProcessWindowOperator<E, std::string>(
            KeyOfE{}, GlobalWindows::create(), CountTrigger::of(2), ListAll{}, {},
            TimeEvictor::of(size)));
    h->Open();
    for (size_t i = 0; i < ts.size(); ++i)
      h->ProcessElement(E("k", static_cast<int>(i) + 1), ts[i]);
    auto r = h->TakeRecords();
    return r.empty() ? std::string("none") : r[0].first;
  };
  // MIN + 5 - 10 wraps to MAX - 4: both go.
  EXPECT_THAT(run(10ms, {kMinTimestamp + 1, kMinTimestamp + 5}),
              ::testing::HasSubstr("k[global] wm"));
  // The first has no timestamp: both stay.
  EXPECT_THAT(run(10ms, {kNoTimestamp, 100}), ::testing::HasSubstr(" 1 2 wm"));
  // -5 - MAX wraps to MAX - 3: both go.
  EXPECT_THAT(run(Duration(kMaxTimestamp), {-20, -5}), ::testing::HasSubstr("k[global] wm"));
  // Ordinary: 105 - 10 = 95, the element at 90 goes.
  EXPECT_THAT(run(10ms, {90, 105}), ::testing::HasSubstr(" 2 wm"));
  EXPECT_THAT(run(10ms, {90, 105}), ::testing::Not(::testing::HasSubstr(" 1 ")));
  EXPECT_THROW(run(10ms, {100, kNoTimestamp}), std::runtime_error);
}

// ---------------------------------------------------------------------------
// No allocation per record on the reduce / aggregate path

using IE = std::pair<int64_t, int64_t>;
struct KeyOfIE {
  int64_t operator()(const IE& e) const { return e.first; }
};
struct AvgAgg {
  std::pair<int64_t, int64_t> create_accumulator() const { return {0, 0}; }
  std::pair<int64_t, int64_t> add(const IE& e, std::pair<int64_t, int64_t> acc) const {
    return {acc.first + e.second, acc.second + 1};
  }
  double get_result(const std::pair<int64_t, int64_t>& acc) const {
    return static_cast<double>(acc.first) / static_cast<double>(acc.second);
  }
  std::pair<int64_t, int64_t> merge(std::pair<int64_t, int64_t> a,
                                    std::pair<int64_t, int64_t> b) const {
    return {a.first + b.first, a.second + b.second};
  }
};

template <typename Op, typename In, typename Out>
int64_t AllocationsFor(OperatorHarness<In, Out>& h, int n) {
  // Warm up: every (key, window), timer and table slot exists afterwards.
  for (int i = 0; i < n; ++i) h.ProcessElement(IE(i % 10, i), 1000 + i % 100);
  // The counter itself works:
  g_allocs = 0;
  g_count_allocs = true;
  {
    // Escapes the pointer so an optimizing build cannot elide the pair.
    auto* v = new std::vector<int>(3);
    asm volatile("" : : "g"(v) : "memory");
    delete v;
  }
  g_count_allocs = false;
  EXPECT_EQ(g_allocs.load(), 2);
  g_allocs = 0;
  g_count_allocs = true;
  for (int i = 0; i < n; ++i) h.ProcessElement(IE(i % 10, i), 1000 + i % 100);
  g_count_allocs = false;
  return g_allocs.load();
}

TEST(WindowOperator, ReduceAndAggregateDoNotAllocatePerRecord) {
  {
    using C = ReduceContents<IE, int64_t, TimeWindow, IE (*)(const IE&, const IE&),
                             NoProcessFunction, IE>;
    using Op =
        WindowOperatorFor<IE, int64_t, KeyOfIE, SlidingEventTimeWindows, EventTimeTrigger, C>;
    OperatorHarness<IE, IE> h(std::make_unique<Op>(
        KeyOfIE{}, SlidingEventTimeWindows::of(10s, 5s), EventTimeTrigger::create(),
        C([](const IE& a, const IE& b) { return IE(a.first, a.second + b.second); },
          NoProcessFunction{}),
        WindowOperatorConfig<IE>{}));
    h.Open();
    EXPECT_EQ(AllocationsFor<Op>(h, 1000), 0);
    h.ProcessWatermark(kMaxWatermark);
    EXPECT_EQ(h.TakeRecords().size(), 20u);  // 10 keys x 2 windows
  }
  {
    using C = AggregateContents<IE, int64_t, TimeWindow, AvgAgg, NoProcessFunction, double>;
    using Op =
        WindowOperatorFor<IE, int64_t, KeyOfIE, TumblingEventTimeWindows, EventTimeTrigger, C>;
    WindowOperatorConfig<IE> cfg;
    cfg.allowed_lateness = 1000;
    OperatorHarness<IE, double> h(std::make_unique<Op>(KeyOfIE{}, TumblingEventTimeWindows::of(10s),
                                                       EventTimeTrigger::create(),
                                                       C(AvgAgg{}, NoProcessFunction{}), cfg));
    h.Open();
    EXPECT_EQ(AllocationsFor<Op>(h, 1000), 0);
    h.ProcessWatermark(kMaxWatermark);
    auto r = h.TakeSortedRecords();
    ASSERT_EQ(r.size(), 10u);
    EXPECT_DOUBLE_EQ(r[0].first, 495.0);  // key 0: 0, 10, ..., 990 twice
  }
}

// ---------------------------------------------------------------------------
// Side outputs from window functions and aggregate with sessions

TEST(WindowOperator, WindowContextSideOutputAndAggregateOnSessions) {
  OutputTag<std::string> info("info");
  auto p = [info](const int64_t& key, const TimeWindow& w, const double& avg, WindowContext& ctx,
                  Collector<std::string>& out) {
    ctx.output(info,
               "key " + std::to_string(key) + " wm " + FormatTimestamp(ctx.current_watermark()));
    out.collect(std::to_string(key) + " " + w.ToString() + " " + std::to_string(avg));
  };
  using C = AggregateContents<IE, int64_t, TimeWindow, AvgAgg, decltype(p), std::string>;
  using Op = WindowOperator<IE, int64_t, KeyOfIE, EventTimeSessionWindows, EventTimeTrigger, C>;
  OperatorHarness<IE, std::string> h(
      std::make_unique<Op>(KeyOfIE{}, EventTimeSessionWindows::with_gap(1s),
                           EventTimeTrigger::create(), C(AvgAgg{}, p), WindowOperatorConfig<IE>{}));
  auto& side = h.AddSideOutput(info);
  h.Open();
  h.ProcessElement(IE(1, 10), 0);
  h.ProcessElement(IE(1, 20), 2000);
  h.ProcessElement(IE(1, 60), 1000);  // merges [0,1000) [1000,2000) [2000,3000)
  h.ProcessWatermark(2999);
  EXPECT_THAT(h.TakeRecords(),
              ElementsAre(Pair("1 TimeWindow{start=0, end=3000} 30.000000", 2999)));
  EXPECT_THAT(side.TakeRecords(), ElementsAre(Pair("key 1 wm 2999", 2999)));
}

TEST(WindowOperator, PerWindowAndGlobalFunctionState) {
  auto fn = [](const std::string& key, const TimeWindow& w, const std::vector<E>& elements,
               WindowContext& ctx, Collector<std::string>& out) {
    int& firings = ctx.window_state<int>("firings");
    int& total = ctx.global_state<int>("total");
    ++firings;
    ++total;
    out.collect(key + " " + std::to_string(w.start) + " n=" + std::to_string(elements.size()) +
                " firing=" + std::to_string(firings) + " total=" + std::to_string(total));
  };
  using Op = WindowOperator<
      E, std::string, KeyOfE, TumblingEventTimeWindows, EventTimeTrigger,
      ListContents<E, std::string, TimeWindow, decltype(fn), NoEvictor, std::string>>;
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = 1000;
  OperatorHarness<E, std::string> h(testing::MakeProcessWindowOperator<E, std::string>(
      KeyOfE{}, TumblingEventTimeWindows::of(1s), EventTimeTrigger::create(), fn, cfg));
  h.Open();
  h.ProcessElement(E("a", 1), 100);
  h.ProcessWatermark(999);
  h.ProcessElement(E("a", 1), 200);  // late firing of [0,1000)
  h.ProcessElement(E("a", 1), 1100);
  h.ProcessWatermark(1999);
  EXPECT_THAT(h.TakeRecords(), ElementsAre(Pair("a 0 n=1 firing=1 total=1", 999),
                                           Pair("a 0 n=2 firing=2 total=2", 999),
                                           Pair("a 1000 n=1 firing=1 total=3", 1999)));
  EXPECT_EQ(h.op<Op>().num_windows_with_contents(), 1u);  // [1000,2000) until 2999
}

// ---------------------------------------------------------------------------
// KeyedTimerService on its own

TEST(KeyedTimerService, SetSemanticsOrderDeleteAndReRegister) {
  ManualClock clock(0);
  ProcessingTimeService pts(&clock);
  KeyedTimerService<std::string, int> timers;
  std::vector<std::string> fired;
  timers.Init(
      &pts,
      [&](const std::string& k, const int& ns, Timestamp t) {
        fired.push_back("e " + k + "/" + std::to_string(ns) + "@" + std::to_string(t) +
                        " wm=" + FormatTimestamp(timers.current_watermark()));
        if (t == 30) timers.RegisterEventTimeTimer(k, ns, 25);  // <= wm: same loop
        if (t == 40) timers.RegisterEventTimeTimer(k, ns, 41);  // > wm: a later advance
      },
      [&](const std::string& k, const int& ns, Timestamp t) {
        fired.push_back("p " + k + "/" + std::to_string(ns) + "@" + std::to_string(t));
      });
  timers.RegisterEventTimeTimer("a", 1, 30);
  timers.RegisterEventTimeTimer("a", 1, 30);  // set: kept once
  timers.RegisterEventTimeTimer("a", 2, 30);  // other namespace: separate
  timers.RegisterEventTimeTimer("b", 1, 10);
  timers.RegisterEventTimeTimer("b", 1, 20);
  timers.DeleteEventTimeTimer("b", 1, 20);
  timers.RegisterEventTimeTimer("b", 1, 20);  // re-registered after delete: fires once
  timers.RegisterEventTimeTimer("c", 1, 40);
  timers.DeleteEventTimeTimer("c", 1, 99);  // absent: no-op
  EXPECT_EQ(timers.NumEventTimeTimers(), 5u);
  timers.AdvanceWatermark(35);
  // 25, registered while a/1@30 fires, is then the smallest: it fires next.
  EXPECT_THAT(fired, ElementsAre("e b/1@10 wm=35", "e b/1@20 wm=35", "e a/1@30 wm=35",
                                 "e a/1@25 wm=35", "e a/2@30 wm=35", "e a/2@25 wm=35"));
  fired.clear();
  timers.AdvanceWatermark(40);
  EXPECT_THAT(fired, ElementsAre("e c/1@40 wm=40"));
  fired.clear();
  // Registered outside firing at a time <= the watermark: waits for the next
  // advance.
  timers.RegisterEventTimeTimer("d", 1, 38);
  EXPECT_THAT(fired, IsEmpty());
  timers.AdvanceWatermark(41);
  EXPECT_THAT(fired, ElementsAre("e d/1@38 wm=41", "e c/1@41 wm=41"));
  EXPECT_EQ(timers.NumEventTimeTimers(), 0u);

  // Processing time: one physical timer at the earliest keyed timer.
  fired.clear();
  timers.RegisterProcessingTimeTimer("a", 1, 500);
  timers.RegisterProcessingTimeTimer("b", 1, 300);
  timers.RegisterProcessingTimeTimer("b", 1, 300);
  timers.RegisterProcessingTimeTimer("c", 1, 700);
  timers.DeleteProcessingTimeTimer("c", 1, 700);
  EXPECT_EQ(pts.NextTimerTime(), 300);
  EXPECT_EQ(pts.NextFiringTime(), 301);
  clock.Set(299);
  pts.FireDue(299);
  EXPECT_THAT(fired, IsEmpty());
  // Due once the clock has passed 300 (Flink: getProcessingTimeDelay + 1 ms).
  clock.Set(300);
  pts.FireDue(300);
  EXPECT_THAT(fired, IsEmpty());
  clock.Set(301);
  pts.FireDue(301);
  EXPECT_THAT(fired, ElementsAre("p b/1@300"));
  fired.clear();
  clock.Set(600);
  pts.FireDue(600);
  EXPECT_THAT(fired, ElementsAre("p a/1@500"));
  EXPECT_EQ(pts.NextTimerTime(), kMaxTimestamp);  // nothing live: nothing armed
  EXPECT_EQ(timers.NumProcessingTimeTimers(), 0u);
}

// ProcessingTimeService on its own: a timer registered for T runs once the
// clock reads T + 1 or more (Flink's SystemProcessingTimeService delays it by
// ProcessingTimeServiceUtil.getProcessingTimeDelay(T, now) = T - now + 1),
// with the time it was registered for.
TEST(ProcessingTimeService, TimerAtTRunsOnceTheClockHasPassedT) {
  ManualClock clock(0);
  ProcessingTimeService pts(&clock);
  std::vector<std::string> ran;
  auto note = [&](const std::string& name) {
    return [&ran, name](Timestamp t) { ran.push_back(name + "@" + std::to_string(t)); };
  };
  pts.RegisterTimer(300, note("a"));
  pts.RegisterTimer(200, [&](Timestamp t) {
    ran.push_back("b@" + std::to_string(t));
    pts.RegisterTimer(250, note("c"));  // due at 301 as well: runs in this FireDue
    pts.RegisterTimer(300, note("d"));  // not due at 300
  });
  EXPECT_EQ(pts.NextTimerTime(), 200);
  EXPECT_EQ(pts.NextFiringTime(), 201);
  EXPECT_FALSE(ProcessingTimeService::IsDue(200, 200));
  EXPECT_TRUE(ProcessingTimeService::IsDue(200, 201));
  pts.FireDue(200);
  EXPECT_THAT(ran, IsEmpty());
  pts.FireDue(300);
  EXPECT_THAT(ran, ElementsAre("b@200", "c@250"));
  EXPECT_EQ(pts.NextFiringTime(), 301);
  pts.FireDue(301);
  EXPECT_THAT(ran, ElementsAre("b@200", "c@250", "a@300", "d@300"));
  EXPECT_EQ(pts.NextTimerTime(), kMaxTimestamp);
  EXPECT_EQ(pts.NextFiringTime(), kMaxTimestamp);
  // A timer at MAX never becomes due (T + 1 does not exist).
  pts.RegisterTimer(kMaxTimestamp, note("never"));
  EXPECT_EQ(pts.NextFiringTime(), kMaxTimestamp);
  pts.FireDue(kMaxTimestamp);
  EXPECT_EQ(ran.size(), 4u);
}

// ---------------------------------------------------------------------------
// KeyedProcessOperator: timers and state

struct TimerFn : KeyedProcessFunction<std::string, E, std::string> {
  void process_element(const E& e, Context& ctx, Collector<std::string>& out) override {
    if (e.second > 0) {
      ctx.timer_service().register_event_time_timer(e.second);
    } else {
      ctx.timer_service().delete_event_time_timer(-e.second);
    }
    auto count = ctx.get_state<int>("count");
    count.update(count.value_or(0) + 1);
    out.collect("el " + ctx.get_current_key() + " ts=" + FormatTimestamp(ctx.timestamp()));
  }
  void on_timer(Timestamp ts, OnTimerContext& ctx, Collector<std::string>& out) override {
    out.collect("timer " + ctx.get_current_key() + " " + std::to_string(ts) +
                " count=" + std::to_string(ctx.get_state<int>("count").value_or(-1)) +
                " wm=" + FormatTimestamp(ctx.current_watermark()));
    // A timer registered while firing, <= the watermark, fires in the same loop.
    if (ts == 300) ctx.timer_service().register_event_time_timer(250);
  }
};

TEST(KeyedProcessOperator, TimersFireInTimestampOrderWithSetSemantics) {
  using Op = KeyedProcessOperator<E, std::string, KeyOfE, TimerFn, std::string>;
  OperatorHarness<E, std::string> h(std::make_unique<Op>(KeyOfE{}, TimerFn{}));
  h.Open();
  h.ProcessElement(E("a", 300), 1);
  h.ProcessElement(E("b", 100), 2);
  h.ProcessElement(E("a", 200), 3);
  h.ProcessElement(E("a", 300), 4);  // duplicate: one timer
  h.ProcessElement(E("a", 400), 5);
  h.ProcessElement(E("a", -400), 6);  // deletes (a, 400)
  EXPECT_EQ(h.op<Op>().timer_service().NumEventTimeTimers(), 3u);
  h.TakeRecords();
  h.ProcessWatermark(1000);
  EXPECT_THAT(h.TakeRecords(), ElementsAre(Pair("timer b 100 count=1 wm=1000", 100),
                                           Pair("timer a 200 count=5 wm=1000", 200),
                                           Pair("timer a 300 count=5 wm=1000", 300),
                                           Pair("timer a 250 count=5 wm=1000", 250)));
  // A timer at or before the current watermark waits for the next one.
  h.ProcessElement(E("a", 900), 7);
  EXPECT_THAT(h.TakeRecords(), ElementsAre(Pair("el a ts=7", 7)));
  h.ProcessWatermark(1001);
  EXPECT_THAT(h.TakeRecords(), ElementsAre(Pair("timer a 900 count=6 wm=1001", 900)));
}

struct ProcTimerFn {
  using OutputType = std::string;
  void process_element(const E& e, KeyedProcessContext<std::string>& ctx,
                       Collector<std::string>& out) const {
    ctx.timer_service().register_processing_time_timer(ctx.current_processing_time() + e.second);
    auto sum = ctx.get_reducing_state<int>("sum", [](int a, int b) { return a + b; });
    sum.add(e.second);
    auto list = ctx.get_list_state<int>("all");
    list.add(e.second);
    (void)out;
  }
  void on_timer(Timestamp ts, KeyedProcessContext<std::string>& ctx,
                Collector<std::string>& out) const {
    auto sum = ctx.get_reducing_state<int>("sum", [](int a, int b) { return a + b; });
    out.collect(ctx.get_current_key() + "@" + std::to_string(ts) +
                " sum=" + std::to_string(*sum.get()) +
                " n=" + std::to_string(ctx.get_list_state<int>("all").get().size()) +
                (ctx.time_domain() == TimeDomain::kProcessingTime ? " pt" : " et"));
  }
};

TEST(KeyedProcessOperator, ProcessingTimeTimersAndState) {
  using Op = KeyedProcessOperator<E, std::string, KeyOfE, ProcTimerFn, std::string>;
  OperatorHarness<E, std::string> h(std::make_unique<Op>(KeyOfE{}, ProcTimerFn{}), 1000);
  h.Open();
  h.ProcessElement(E("a", 50), 0);
  h.ProcessElement(E("a", 20), 0);
  h.ProcessElement(E("b", 50), 0);  // same time as (a, 1050): two timers
  // A timer at 1020 fires once the clock has passed 1020, at 1021, as in
  // Flink's runtime (ProcessingTimeServiceUtil.getProcessingTimeDelay adds
  // 1 ms); Flink's TestProcessingTimeService would fire it at 1020 already.
  h.SetProcessingTime(1020);
  EXPECT_THAT(h.TakeRecords(), IsEmpty());
  h.SetProcessingTime(1021);
  EXPECT_THAT(h.TakeRecords(), ElementsAre(Pair("a@1020 sum=70 n=2 pt", kNoTimestamp)));
  h.SetProcessingTime(2000);
  EXPECT_THAT(h.TakeSortedRecords(), ElementsAre(Pair("a@1050 sum=70 n=2 pt", kNoTimestamp),
                                                 Pair("b@1050 sum=50 n=1 pt", kNoTimestamp)));
}

}  // namespace
}  // namespace tidemark
