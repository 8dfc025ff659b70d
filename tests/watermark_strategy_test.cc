// Tests for watermark generation (docs/semantics.md section 2): the
// bounded-out-of-orderness and monotonous generators, saturating time
// arithmetic, the idleness timer, and TimestampsAndWatermarksOperator driven
// directly with a recording output and a manual clock.
#include "tidemark/runtime/task/watermark_strategy.h"

#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using V = std::vector<std::string>;

// Records WatermarkOutput calls.
class WmRecorder final : public WatermarkOutput {
 public:
  void EmitWatermark(Timestamp w) override { out.push_back("W:" + FormatTimestamp(w)); }
  void MarkIdle() override { out.push_back("IDLE"); }
  void MarkActive() override { out.push_back("ACTIVE"); }
  V Pop() {
    V r;
    r.swap(out);
    return r;
  }
  V out;
};

// Records what an operator emits, records included, in order.
template <typename T>
class OutputRecorder final : public Output<T> {
 public:
  void Collect(T&& v, Timestamp ts) override {
    out.push_back("R:" + std::to_string(v) + "@" + FormatTimestamp(ts));
  }
  void EmitWatermark(Timestamp w) override { out.push_back("W:" + FormatTimestamp(w)); }
  void EmitStatus(WatermarkStatus s) override { out.push_back(ToString(s)); }
  V Pop() {
    V r;
    r.swap(out);
    return r;
  }
  V out;
};

// ---------------------------------------------------------------------------
// Saturating arithmetic (the no-wrap cases).

TEST(TimeArithmetic, SaturatesAtBothEnds) {
  EXPECT_EQ(SaturatingAdd(1, 2), 3);
  EXPECT_EQ(SaturatingSub(1, 2), -1);
  EXPECT_EQ(SaturatingAdd(kMaxTimestamp, 1), kMaxTimestamp);
  EXPECT_EQ(SaturatingAdd(kMaxTimestamp - 5, 10), kMaxTimestamp);
  EXPECT_EQ(SaturatingAdd(kMinTimestamp, -1), kMinTimestamp);
  EXPECT_EQ(SaturatingAdd(kMinTimestamp, kMaxTimestamp), -1);
  EXPECT_EQ(SaturatingSub(kMinTimestamp, 1), kMinTimestamp);
  EXPECT_EQ(SaturatingSub(kMinTimestamp + 3, 10), kMinTimestamp);
  EXPECT_EQ(SaturatingSub(kMaxTimestamp, -1), kMaxTimestamp);
  EXPECT_EQ(SaturatingSub(-2, kMaxTimestamp), kMinTimestamp);
  // `end - 1 + lateness` near the top
  EXPECT_EQ(SaturatingAdd(SaturatingSub(kMaxTimestamp, 1), 5000), kMaxTimestamp);
  // `max_ts - d - 1` before anything was seen
  EXPECT_EQ(SaturatingSub(SaturatingSub(kMinTimestamp, 10), 1), kMinTimestamp);
  static_assert(SaturatingAdd(kMaxTimestamp, kMaxTimestamp) == kMaxTimestamp);
  static_assert(SaturatingSub(kMinTimestamp, kMaxTimestamp) == kMinTimestamp);
}

TEST(TimeArithmetic, FormatAndDurations) {
  EXPECT_EQ(FormatTimestamp(kMinTimestamp), "MIN");
  EXPECT_EQ(FormatTimestamp(kMaxTimestamp), "MAX");
  EXPECT_EQ(FormatTimestamp(-5), "-5");
  EXPECT_EQ(ToMillis(2s), 2000);
  EXPECT_EQ(ToMillis(std::chrono::duration_cast<Duration>(std::chrono::microseconds(1999))), 1);
  EXPECT_EQ(kNoTimestamp, kMinTimestamp);
  EXPECT_STREQ(ToString(WatermarkStatus::kIdle), "IDLE");
  EXPECT_STREQ(ToString(WatermarkStatus::kActive), "ACTIVE");
}

// ---------------------------------------------------------------------------
// BoundedOutOfOrdernessWatermarks (BoundedOutOfOrdernessWatermarksTest facts).

TEST(BoundedOutOfOrderness, NothingSeenGivesMin) {
  BoundedOutOfOrdernessWatermarks<int> g(10ms);
  WmRecorder out;
  g.OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:MIN"});
}

TEST(BoundedOutOfOrderness, SingleEvent) {
  BoundedOutOfOrdernessWatermarks<int> g(10ms);
  WmRecorder out;
  g.OnEvent(0, 1337, out);
  EXPECT_EQ(out.Pop(), V{}) << "onEvent never emits";
  g.OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:1326"});
}

TEST(BoundedOutOfOrderness, MultipleEventsTrackTheMaximum) {
  BoundedOutOfOrdernessWatermarks<int> g(10ms);
  WmRecorder out;
  for (Timestamp ts : {12345, 12300, 12340, 12280}) g.OnEvent(0, ts, out);
  g.OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:12334"});
}

TEST(BoundedOutOfOrderness, RepeatedProbesEmitTheSameValue) {
  BoundedOutOfOrdernessWatermarks<int> g(10ms);
  WmRecorder out;
  g.OnEvent(0, 723456, out);
  g.OnPeriodicEmit(out);
  g.OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), (V{"W:723445", "W:723445"}));
}

TEST(BoundedOutOfOrderness, TwoSecondBoundClosesWindowAt7000) {
  BoundedOutOfOrdernessWatermarks<int> g(2s);
  WmRecorder out;
  g.OnEvent(0, 7000, out);
  g.OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:4999"});
}

TEST(BoundedOutOfOrderness, NoWrapAtTheEdges) {
  {
    // A huge bound before any event: still MIN, and events near MIN do not wrap.
    BoundedOutOfOrdernessWatermarks<int> g{Duration(kMaxTimestamp)};
    WmRecorder out;
    g.OnPeriodicEmit(out);
    g.OnEvent(0, 5, out);
    g.OnPeriodicEmit(out);
    // 5 - MAX - 1 == MIN + 5: exact, no saturation needed
    EXPECT_EQ(out.Pop(), (V{"W:MIN", "W:" + std::to_string(kMinTimestamp + 5)}));
    g.OnEvent(0, -5, out);
    g.OnPeriodicEmit(out);
    EXPECT_EQ(out.Pop(), (V{"W:" + std::to_string(kMinTimestamp + 5)}));
  }
  {
    BoundedOutOfOrdernessWatermarks<int> g(10ms);
    WmRecorder out;
    g.OnEvent(0, kMinTimestamp, out);  // the "no timestamp" marker
    g.OnPeriodicEmit(out);
    g.OnEvent(0, kMinTimestamp + 5, out);
    g.OnPeriodicEmit(out);
    EXPECT_EQ(out.Pop(), (V{"W:MIN", "W:MIN"}));
  }
  {
    BoundedOutOfOrdernessWatermarks<int> g(0ms);
    WmRecorder out;
    g.OnEvent(0, kMaxTimestamp, out);
    g.OnPeriodicEmit(out);
    EXPECT_EQ(out.Pop(), V{"W:" + std::to_string(kMaxTimestamp - 1)});
  }
  {
    BoundedOutOfOrdernessWatermarks<int> g(10ms);
    WmRecorder out;
    g.OnEvent(0, -100, out);  // negative timestamps are valid
    g.OnPeriodicEmit(out);
    EXPECT_EQ(out.Pop(), V{"W:-111"});
  }
}

TEST(BoundedOutOfOrderness, NegativeBoundRejected) {
  EXPECT_THROW(WatermarkStrategy<int>::for_bounded_out_of_orderness(Duration(-1)),
               std::invalid_argument);
  EXPECT_THROW(BoundedOutOfOrdernessWatermarks<int>(Duration(-1)), std::invalid_argument);
}

TEST(MonotonousTimestamps, IsBoundZero) {
  ManualClock clock;
  auto g = WatermarkStrategy<int>::for_monotonous_timestamps().CreateGenerator(&clock);
  WmRecorder out;
  g->OnEvent(0, 1337, out);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:1336"});
  g->OnEvent(0, 12345, out);
  g->OnEvent(0, 12340, out);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:12344"});
}

// ---------------------------------------------------------------------------
// Idleness (section 2.6).

TEST(IdlenessTimer, DocumentedExample) {
  // timeout 10 ms, event at 4 ms, probes every 5 ms: the countdown starts at
  // the 10 ms probe and idleness is declared at the 25 ms probe.
  ManualClock clock(0);
  IdlenessTimer t(&clock, 10ms);
  clock.Set(4);
  t.Activity();
  std::vector<Timestamp> idle_at;
  for (Timestamp now = 5; now <= 40; now += 5) {
    clock.Set(now);
    if (t.CheckIfIdle()) idle_at.push_back(now);
  }
  ASSERT_FALSE(idle_at.empty());
  EXPECT_EQ(idle_at.front(), 25);
}

TEST(IdlenessTimer, StrictlyGreaterThanTimeoutAndResetByActivity) {
  ManualClock clock(1000);
  IdlenessTimer t(&clock, 100ms);
  EXPECT_FALSE(t.CheckIfIdle());  // starts the countdown at 1000
  clock.Set(1100);
  EXPECT_FALSE(t.CheckIfIdle());  // exactly the timeout: not yet
  clock.Set(1101);
  EXPECT_TRUE(t.CheckIfIdle());
  t.Activity();
  EXPECT_FALSE(t.CheckIfIdle());  // activity resets
  clock.Set(5000);
  EXPECT_FALSE(t.CheckIfIdle());  // first quiet probe restarts the countdown
  clock.Set(5101);
  EXPECT_TRUE(t.CheckIfIdle());
}

TEST(WatermarksWithIdleness, MarksIdleOnceAndResumes) {
  ManualClock clock(0);
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms).with_idleness(10ms);
  auto g = strategy.CreateGenerator(&clock);
  WmRecorder out;
  g->OnEvent(0, 100, out);
  clock.Set(5);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:99"});
  clock.Set(10);
  g->OnPeriodicEmit(out);  // countdown starts, still delegates
  EXPECT_EQ(out.Pop(), V{"W:99"});
  clock.Set(20);
  g->OnPeriodicEmit(out);  // 10 ms: not strictly greater
  EXPECT_EQ(out.Pop(), V{"W:99"});
  clock.Set(21);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"IDLE"}) << "idle: markIdle and the inner generator is not asked";
  clock.Set(30);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{}) << "markIdle only once";
  g->OnEvent(0, 200, out);
  clock.Set(35);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{"W:199"});
}

TEST(WatermarksWithIdleness, NonPositiveTimeoutRejected) {
  EXPECT_THROW(WatermarkStrategy<int>::for_monotonous_timestamps().with_idleness(0ms),
               std::invalid_argument);
  EXPECT_THROW(WatermarkStrategy<int>::for_monotonous_timestamps().with_idleness(Duration(-5)),
               std::invalid_argument);
}

TEST(WatermarkStrategy, NoWatermarksAndCustomGenerator) {
  ManualClock clock;
  auto g = WatermarkStrategy<int>::no_watermarks().CreateGenerator(&clock);
  WmRecorder out;
  g->OnEvent(1, 100, out);
  g->OnPeriodicEmit(out);
  EXPECT_EQ(out.Pop(), V{});

  struct Punctuated : WatermarkGenerator<int> {
    void OnEvent(const int& v, Timestamp ts, WatermarkOutput& o) override {
      if (v < 0) o.EmitWatermark(ts - 2000);
    }
    void OnPeriodicEmit(WatermarkOutput&) override {}
  };
  int made = 0;
  auto s = WatermarkStrategy<int>::for_generator([&made] {
    ++made;
    return std::make_unique<Punctuated>();
  });
  auto p1 = s.CreateGenerator(&clock);
  auto p2 = s.CreateGenerator(&clock);
  EXPECT_EQ(made, 2) << "one generator per subtask";
  p1->OnEvent(1, 5000, out);
  p1->OnEvent(-1, 5000, out);
  EXPECT_EQ(out.Pop(), V{"W:3000"});
}

TEST(WatermarkStrategy, TimestampAssignerForms) {
  auto s1 = WatermarkStrategy<int>::for_monotonous_timestamps().with_timestamp_assigner(
      [](const int& v, Timestamp prev) { return v + prev; });
  EXPECT_EQ(s1.assigner()(5, 10), 15);
  auto s2 = WatermarkStrategy<int>::for_monotonous_timestamps().with_timestamp_assigner(
      [](const int& v) -> Timestamp { return v * 1000; });
  EXPECT_EQ(s2.assigner()(5, 10), 5000);
  EXPECT_FALSE(WatermarkStrategy<int>::for_monotonous_timestamps().assigner());
}

// ---------------------------------------------------------------------------
// TimestampsAndWatermarksOperator, driven directly.

class OperatorHarness {
 public:
  explicit OperatorHarness(WatermarkStrategy<int> strategy, Duration interval = 200ms)
      : clock_(1000), timers_(&clock_), metrics_("op", 0, 1, 0), op_(std::move(strategy)) {
    config_.auto_watermark_interval = interval;
    ctx_ = std::make_unique<OperatorContext>("Timestamps/Watermarks", 0, 1, 128, &metrics_,
                                             &timers_, &config_, nullptr);
    op_.set_output(&out_);
    op_.Open(*ctx_);
  }
  void Element(int v, Timestamp ts = kNoTimestamp) { op_.ProcessElement(std::move(v), ts); }
  // Moves processing time and fires due periodic timers, like the task does.
  void AdvanceTo(Timestamp now) {
    clock_.Set(now);
    timers_.FireDue(now);
  }
  V Pop() { return out_.Pop(); }
  TimestampsAndWatermarksOperator<int>& op() { return op_; }
  ProcessingTimeService& timers() { return timers_; }

 private:
  ManualClock clock_;
  ProcessingTimeService timers_;
  SubtaskMetrics metrics_;
  JobConfig config_;
  std::unique_ptr<OperatorContext> ctx_;
  OutputRecorder<int> out_;
  TimestampsAndWatermarksOperator<int> op_;
};

WatermarkStrategy<int> Bounded(Duration d) {
  return WatermarkStrategy<int>::for_bounded_out_of_orderness(d).with_timestamp_assigner(
      [](const int& v) -> Timestamp { return v; });
}

// The periodic timer is Flink's registerTimer(now + interval): like every
// processing-time timer it runs once the clock has passed that time
// (ProcessingTimeServiceUtil.getProcessingTimeDelay adds 1 ms), and it is
// re-armed at the clock then + interval.
TEST(TimestampsAndWatermarksOperator, AssignsTimestampsAndEmitsPeriodically) {
  OperatorHarness h(Bounded(10ms), 200ms);
  EXPECT_EQ(h.timers().NextTimerTime(), 1200) << "first timer at open time + interval";
  h.Element(1337, 5);
  EXPECT_EQ(h.Pop(), V{"R:1337@1337"});
  h.AdvanceTo(1200);
  EXPECT_EQ(h.Pop(), V{}) << "the timer at 1200 is due at clock 1201";
  h.AdvanceTo(1201);
  EXPECT_EQ(h.Pop(), V{"W:1326"});
  EXPECT_EQ(h.timers().NextTimerTime(), 1401) << "re-armed at now + interval";
  h.AdvanceTo(1402);
  EXPECT_EQ(h.Pop(), V{}) << "a watermark that does not advance is dropped";
  EXPECT_EQ(h.timers().NextTimerTime(), 1602);
  h.Element(1300);  // late record: forwarded, watermark unchanged
  h.AdvanceTo(1603);
  EXPECT_EQ(h.Pop(), V{"R:1300@1300"});
  h.Element(2000);
  h.AdvanceTo(1804);
  EXPECT_EQ(h.Pop(), (V{"R:2000@2000", "W:1989"}));
  EXPECT_EQ(h.op().last_emitted(), 1989);
}

TEST(TimestampsAndWatermarksOperator, MinWatermarkIsNeverEmitted) {
  OperatorHarness h(Bounded(10ms), 200ms);
  h.AdvanceTo(1201);  // probes (timers at 1200, 1401) run at 1201, 1402
  h.AdvanceTo(1402);
  EXPECT_EQ(h.Pop(), V{});
}

TEST(TimestampsAndWatermarksOperator, IntervalZeroDisablesPeriodicEmission) {
  OperatorHarness h(Bounded(10ms), 0ms);
  EXPECT_EQ(h.timers().NextTimerTime(), kMaxTimestamp);
  h.Element(500);
  EXPECT_EQ(h.Pop(), V{"R:500@500"});
  h.op().Finish();  // one last onPeriodicEmit at end of input
  EXPECT_EQ(h.Pop(), V{"W:489"});
}

TEST(TimestampsAndWatermarksOperator, PunctuatedWatermarkFollowsItsRecord) {
  struct Punctuated : WatermarkGenerator<int> {
    void OnEvent(const int&, Timestamp ts, WatermarkOutput& o) override {
      o.EmitWatermark(ts - 2000);
    }
    void OnPeriodicEmit(WatermarkOutput&) override {}
  };
  auto s = WatermarkStrategy<int>::for_generator([] {
             return std::make_unique<Punctuated>();
           }).with_timestamp_assigner([](const int& v) -> Timestamp { return v; });
  OperatorHarness h(s, 0ms);
  h.Element(5000);
  h.Element(6000);
  h.Element(5500);  // W(3500) does not advance: dropped
  h.Element(9000);
  EXPECT_EQ(h.Pop(), (V{"R:5000@5000", "W:3000", "R:6000@6000", "W:4000", "R:5500@5500",
                        "R:9000@9000", "W:7000"}));
}

// The same records as one run (ProcessBatch, as the runtime delivers them):
// each watermark still directly follows the record that caused it.
TEST(TimestampsAndWatermarksOperator, PunctuatedWatermarkFollowsItsRecordInARun) {
  struct Punctuated : WatermarkGenerator<int> {
    void OnEvent(const int&, Timestamp ts, WatermarkOutput& o) override {
      if (ts % 1000 == 0) o.EmitWatermark(ts - 2000);
    }
    void OnPeriodicEmit(WatermarkOutput&) override {}
  };
  auto s = WatermarkStrategy<int>::for_generator([] {
             return std::make_unique<Punctuated>();
           }).with_timestamp_assigner([](const int& v) -> Timestamp { return v; });
  OperatorHarness h(s, 0ms);
  std::vector<Record<int>> run = {{5000, 0}, {5100, 0}, {6000, 0}, {6100, 0}, {6200, 0}, {9000, 0}};
  h.op().ProcessBatch(std::span<Record<int>>(run));
  EXPECT_EQ(h.Pop(), (V{"R:5000@5000", "W:3000", "R:5100@5100", "R:6000@6000", "W:4000",
                        "R:6100@6100", "R:6200@6200", "R:9000@9000", "W:7000"}));
}

// A run through the bounded-out-of-orderness path (the assigner's batch form
// assigns and returns the run's largest timestamp; without an assigner the
// records' own are used): the watermark follows the run's largest timestamp,
// wherever it stands in the run.
TEST(TimestampsAndWatermarksOperator, BoundedRunFollowsItsLargestTimestampWhereverItIs) {
  const std::vector<WatermarkStrategy<int>> strategies = {
      Bounded(10ms),
      WatermarkStrategy<int>::for_bounded_out_of_orderness(10ms).with_timestamp_assigner(
          [](const int& v, Timestamp) -> Timestamp { return v; }),
      WatermarkStrategy<int>::for_bounded_out_of_orderness(10ms)};
  for (size_t i = 0; i < strategies.size(); ++i) {
    SCOPED_TRACE(i);
    OperatorHarness h(strategies[i], 0ms);
    const bool assigned = i < 2;
    auto at = [&](int v) { return Record<int>{v, assigned ? kNoTimestamp : Timestamp{v}}; };
    std::vector<Record<int>> run = {at(500), at(900), at(700)};
    h.op().ProcessBatch(std::span<Record<int>>(run));
    std::vector<Record<int>> lower = {at(300), at(800)};
    h.op().ProcessBatch(std::span<Record<int>>(lower));
    h.op().Finish();
    EXPECT_EQ(h.Pop(),
              (V{"R:500@500", "R:900@900", "R:700@700", "R:300@300", "R:800@800", "W:889"}));
  }
}

TEST(TimestampsAndWatermarksOperator, IgnoresUpstreamWatermarksExceptMax) {
  OperatorHarness h(Bounded(0ms), 0ms);
  h.op().ProcessWatermark(50);
  h.op().ProcessStatus(WatermarkStatus::kIdle);
  EXPECT_EQ(h.Pop(), V{});
  h.op().ProcessWatermark(kMaxWatermark);
  EXPECT_EQ(h.Pop(), V{"W:MAX"});
  h.op().ProcessWatermark(kMaxWatermark);
  EXPECT_EQ(h.Pop(), V{}) << "MAX only once";
}

TEST(TimestampsAndWatermarksOperator, KeepsUpstreamTimestampWithoutAssigner) {
  OperatorHarness h(WatermarkStrategy<int>::for_monotonous_timestamps(), 0ms);
  h.Element(1, 777);
  h.op().Finish();
  EXPECT_EQ(h.Pop(), (V{"R:1@777", "W:776"}));
}

TEST(TimestampsAndWatermarksOperator, IdleThenActiveBeforeTheNextWatermark) {
  auto s = Bounded(0ms).with_idleness(300ms);
  // Open at 1000, a probe timer every 100 ms after the last one ran; each runs
  // 1 ms after its time (1100 at 1101, then 1201 at 1202, 1302 at 1303, ...).
  OperatorHarness h(s, 100ms);
  h.Element(100);
  h.AdvanceTo(1101);
  EXPECT_EQ(h.Pop(), (V{"R:100@100", "W:99"}));
  // quiet from now on: countdown starts at 1202, idle at the first probe > 1502
  for (Timestamp t = 1202; t <= 1404; t += 101) h.AdvanceTo(t);
  EXPECT_EQ(h.Pop(), V{});
  h.AdvanceTo(1505);
  EXPECT_EQ(h.Pop(), V{"IDLE"});
  h.AdvanceTo(1606);
  h.AdvanceTo(1707);
  EXPECT_EQ(h.Pop(), V{}) << "IDLE only once";
  h.Element(500);
  EXPECT_EQ(h.Pop(), V{"R:500@500"}) << "a record alone does not make the output active";
  h.AdvanceTo(1808);
  EXPECT_EQ(h.Pop(), (V{"ACTIVE", "W:499"})) << "ACTIVE comes right before the watermark";
}

TEST(TimestampsAndWatermarksOperator, MaxWatermarkWhileIdleEmitsActiveFirst) {
  auto s = Bounded(0ms).with_idleness(50ms);
  OperatorHarness h(s, 100ms);
  h.AdvanceTo(1101);  // first probe: the countdown starts
  h.AdvanceTo(1202);  // 101 ms > 50 ms later
  EXPECT_EQ(h.Pop(), V{"IDLE"});
  h.op().ProcessWatermark(kMaxWatermark);
  EXPECT_EQ(h.Pop(), (V{"ACTIVE", "W:MAX"}));
}

}  // namespace
}  // namespace tidemark
