// Watermark alignment (runtime/task/watermark_alignment.h, FLIP-182): the
// coordinator's limit and the pause rule one call at a time (a manual clock,
// no threads), then jobs: alignment never changes a result, and it bounds the
// window operator's live (key, window) pairs when two sources run at
// different event-time speeds, where without it they grow with the gap.
#include "tidemark/runtime/task/watermark_alignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "test_util.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using internal::AlignmentCoordinator;
using internal::PausableRelativeClock;
using internal::SourceAlignment;

struct Events : WatermarkListener {
  std::vector<std::string> seen;
  void OnSourceAlignment(const std::string& task, int subtask, bool paused, Timestamp w,
                         Timestamp max_allowed) override {
    seen.push_back(task + "/" + std::to_string(subtask) + (paused ? " pause " : " resume ") +
                   std::to_string(w) + " " + std::to_string(max_allowed));
  }
};

class AlignmentUnitTest : public ::testing::Test {
 protected:
  AlignmentUnitTest()
      : activity0_(&clock_),
        activity1_(&clock_),
        m0_("src", 0, 2, 0),
        m1_("src", 1, 2, 0),
        a0_(&coordinator_, nullptr, &activity0_, &m0_, &events_),
        a1_(&coordinator_, nullptr, &activity1_, &m1_, &events_) {
    a0_.Join("g", 1000);
    a1_.Join("g", 1000);
  }
  ManualClock clock_{0};
  PausableRelativeClock activity0_, activity1_;
  SubtaskMetrics m0_, m1_;
  Events events_;
  AlignmentCoordinator coordinator_;
  SourceAlignment a0_, a1_;
};

TEST_F(AlignmentUnitTest, TheLimitIsTheGroupMinimumPlusTheDrift) {
  EXPECT_EQ(a0_.max_allowed(), kMaxTimestamp) << "no announcement yet";
  a0_.Report(false);  // no watermark yet: nothing reported
  EXPECT_EQ(coordinator_.Group("g").reported, 0);
  a0_.OnWatermark(42);
  a1_.OnWatermark(44);
  a0_.Report(false);
  EXPECT_EQ(a0_.max_allowed(), 1042) << "a subtask that never reported does not count";
  // Nor is it told the limit (Flink announces to the subtasks that reported).
  EXPECT_EQ(a1_.max_allowed(), kMaxTimestamp);
  a1_.Report(false);
  EXPECT_EQ(a0_.max_allowed(), 1042);
  EXPECT_EQ(a1_.max_allowed(), 1042);
  a0_.OnWatermark(5000);
  a0_.Report(false);
  EXPECT_EQ(a0_.max_allowed(), 1044) << "the specification's example";
  EXPECT_EQ(a1_.max_allowed(), 1044);
}

// Across ranks (docs/distribution.md): this rank publishes its members'
// minimum whenever a report changes it, and counts each other rank's latest
// published minimum as one more member.
TEST_F(AlignmentUnitTest, AcrossRanksEachRankPublishesItsMinimumAndCountsTheOthers) {
  std::vector<std::pair<std::string, Timestamp>> published;
  coordinator_.SetPublisher(
      [&](const std::string& group, Timestamp minimum) { published.emplace_back(group, minimum); });
  // Another rank's minimum before any local report: counted, and told to
  // the members once they report.
  coordinator_.RemoteReport(1, "g", 500);
  EXPECT_EQ(a0_.max_allowed(), kMaxTimestamp);
  EXPECT_EQ(coordinator_.Group("g").minimum, 500);
  EXPECT_EQ(coordinator_.Group("g").remote_ranks, 1);
  EXPECT_TRUE(published.empty()) << "nothing reported here yet: nothing to publish";
  a0_.OnWatermark(3000);
  a0_.Report(false);
  ASSERT_EQ(published.size(), 1u);
  EXPECT_EQ(published[0], std::make_pair(std::string("g"), Timestamp{3000}));
  EXPECT_EQ(a0_.max_allowed(), 1500) << "the other rank's 500 is the group's minimum";
  EXPECT_TRUE(a0_.ShouldPause()) << "3000 > 500 + 1000";
  a0_.Report(false);
  EXPECT_EQ(published.size(), 1u) << "the same minimum is not published again";
  // The other rank catches up (its latest report replaces the previous one).
  coordinator_.RemoteReport(1, "g", 2500);
  EXPECT_EQ(a0_.max_allowed(), 3500);
  EXPECT_FALSE(a0_.ShouldPause());
  // A third rank that reported, and one whose members are idle (MAX).
  coordinator_.RemoteReport(2, "g", kMaxWatermark);
  EXPECT_EQ(a0_.max_allowed(), 3500);
  coordinator_.RemoteReport(3, "g", 100);
  EXPECT_EQ(a0_.max_allowed(), 1100);
  EXPECT_EQ(a1_.max_allowed(), kMaxTimestamp) << "a1 has not reported: not told";
  EXPECT_EQ(coordinator_.Group("g").minimum, 100);
  EXPECT_EQ(coordinator_.Group("g").remote_ranks, 3);
  // The local minimum falls when the second member reports: published again.
  a1_.OnWatermark(2000);
  a1_.Report(false);
  ASSERT_EQ(published.size(), 2u);
  EXPECT_EQ(published[1].second, 2000);
  EXPECT_EQ(a1_.max_allowed(), 1100) << "told once it reported";
  // A group of another name is another group.
  coordinator_.RemoteReport(1, "h", 0);
  EXPECT_EQ(a0_.max_allowed(), 1100);
  coordinator_.SetPublisher(nullptr);
  a0_.OnWatermark(9000);
  a1_.OnWatermark(9000);
  a0_.Report(false);
  a1_.Report(false);
  EXPECT_EQ(published.size(), 2u);
}

TEST_F(AlignmentUnitTest, ASubtaskPausesStrictlyAboveTheLimitAndItsIdlenessClockStandsStill) {
  a0_.OnWatermark(100);
  a1_.OnWatermark(1100);
  a0_.Report(false);
  a1_.Report(false);
  EXPECT_FALSE(a1_.ShouldPause()) << "1100 == 100 + 1000: allowed";
  a1_.OnWatermark(1101);
  EXPECT_TRUE(a1_.ShouldPause());
  EXPECT_TRUE(activity1_.paused());
  const Timestamp before = activity1_.NowMillis();
  clock_.Set(5000);
  EXPECT_EQ(activity1_.NowMillis(), before) << "paused time does not count towards idleness";
  EXPECT_EQ(activity0_.NowMillis(), 5000);
  a0_.OnWatermark(200);
  a0_.Report(false);
  EXPECT_FALSE(a1_.ShouldPause());
  EXPECT_FALSE(activity1_.paused());
  EXPECT_EQ(m1_.GetCounter(internal::kAlignmentPauses)->Get(), 1);
  EXPECT_EQ(events_.seen,
            (std::vector<std::string>{"src/1 pause 1101 1100", "src/1 resume 1101 1200"}));
}

TEST_F(AlignmentUnitTest, AnIdleOrFinishedSubtaskDropsOutAndAllIdleAnnouncesMax) {
  a0_.OnWatermark(100);
  a1_.OnWatermark(9000);
  a0_.Report(false);
  a1_.Report(false);
  EXPECT_TRUE(a1_.ShouldPause());
  a0_.Report(/*idle_or_finished=*/true);
  EXPECT_EQ(a1_.max_allowed(), 10000) << "the idle subtask reports MAX: 9000 decides";
  EXPECT_FALSE(a1_.ShouldPause());
  a1_.Report(true);
  EXPECT_EQ(a0_.max_allowed(), kMaxTimestamp) << "MAX + drift overflows: MAX";
  // Active again: the latest watermark replaces MAX.
  a0_.Report(false);
  EXPECT_EQ(a1_.max_allowed(), 1100);
}

TEST(AlignmentGroupOfOne, NeverDeadlocks) {
  ManualClock clock(0);
  PausableRelativeClock activity(&clock);
  SubtaskMetrics m("src", 0, 1, 0);
  AlignmentCoordinator coordinator;
  SourceAlignment a(&coordinator, nullptr, &activity, &m, nullptr);
  a.Join("alone", 10);
  a.OnWatermark(100);
  a.Report(false);
  a.OnWatermark(500);  // raced ahead of its own last report
  EXPECT_TRUE(a.ShouldPause());
  a.Report(false);  // the paused subtask keeps reporting on its timer
  EXPECT_FALSE(a.ShouldPause());
  EXPECT_EQ(a.max_allowed(), 510);
}

TEST(AlignmentLimit, SaturatesAtMax) {
  EXPECT_EQ(internal::AlignmentLimit(kMaxTimestamp - 5, 10), kMaxTimestamp);
  EXPECT_EQ(internal::AlignmentLimit(5, 10), 15);
}

// --- jobs ---------------------------------------------------------------

struct Rec {
  int64_t key;
  Timestamp ts;
};

constexpr int64_t kKeys = 4;
constexpr Timestamp kWindow = 10;

struct SpeedRun {
  std::map<std::pair<int64_t, Timestamp>, int64_t> counts;  // (key, window start) -> count
  int64_t peak_live = 0;
  int64_t peak_bytes = 0;
  int64_t pauses = 0;
};

// Two sources of 1 ms of event time per record, paced at `fast_rate` and
// `slow_rate` records a second (so the fast one's event time runs ahead),
// unioned, counted per key in 10 ms tumbling windows; with alignment both are
// in one group.
// `unchained_from_source`: the strategies given to env.from_source, with
// operator chaining disabled.
SpeedRun RunTwoSpeeds(bool align, int64_t fast_n, double fast_rate, int64_t slow_n,
                      double slow_rate, const std::string& group = "speeds",
                      bool unchained_from_source = false, std::string* plan = nullptr) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto strategy = WatermarkStrategy<Rec>::for_monotonous_timestamps()
                      .with_timestamp_assigner([](const Rec& r, Timestamp) { return r.ts; })
                      .with_periodic_emit_per_record();
  if (align) strategy = strategy.with_watermark_alignment(group, Duration(100), Duration(5));
  auto gen = [](int64_t i) { return Rec{i % kKeys, i}; };
  auto make = [&](const char* name, int64_t n, double rate) {
    if (unchained_from_source)
      return env.from_source(sources::generator<Rec>(gen, n, rate), strategy, name);
    return env.from_generator<Rec>(gen, n, rate, name).assign_timestamps_and_watermarks(strategy);
  };
  if (unchained_from_source) env.disable_operator_chaining();
  auto fast = make("fast", fast_n, fast_rate);
  auto slow = make("slow", slow_n, slow_rate);
  auto counts = fast.union_with(slow)
                    .map([](const Rec& r) { return std::pair<int64_t, int64_t>(r.key, 1); })
                    .key_by([](const std::pair<int64_t, int64_t>& p) { return p.first; })
                    .window(TumblingEventTimeWindows::of(Duration(kWindow)))
                    .process([](const int64_t& key, const TimeWindow& w,
                                const std::vector<std::pair<int64_t, int64_t>>& v, WindowContext&,
                                Collector<std::pair<std::pair<int64_t, Timestamp>, int64_t>>& out) {
                      out.collect({{key, w.start}, static_cast<int64_t>(v.size())});
                    })
                    .collect();
  if (plan != nullptr) *plan = env.explain();
  JobResult r = env.execute(align ? "aligned" : "unaligned");
  EXPECT_TRUE(r.ok()) << r.status;
  SpeedRun run;
  for (const auto& item : counts->items()) run.counts[item.value.first] += item.value.second;
  run.peak_live = r.CounterTotal(internal::kWindowPeakLiveKeyWindows);
  run.peak_bytes = r.CounterTotal(internal::kWindowStateBytesAtPeak);
  run.pauses = r.CounterTotal(internal::kAlignmentPauses);
  return run;
}

TEST(AlignmentJob, BoundsTheLiveWindowsByTheDriftAndNeverChangesAResult) {
  const int64_t fast_n = 20000, slow_n = 2000;
  // Both run about half a second; the fast one covers ten times the event
  // time of the slow one.
  SpeedRun aligned = RunTwoSpeeds(true, fast_n, 40000, slow_n, 4000);
  SpeedRun unaligned = RunTwoSpeeds(false, fast_n, 40000, slow_n, 4000);
  // The same counts, as a reference computes them.
  std::map<std::pair<int64_t, Timestamp>, int64_t> expected;
  for (int64_t i = 0; i < fast_n; ++i) ++expected[{i % kKeys, i / kWindow * kWindow}];
  for (int64_t i = 0; i < slow_n; ++i) ++expected[{i % kKeys, i / kWindow * kWindow}];
  EXPECT_EQ(aligned.counts, expected);
  EXPECT_EQ(unaligned.counts, expected);
  // With alignment the fast source runs at most the drift (100 ms) ahead of
  // the slow one's last report, which lags the slow one by up to a report
  // interval (5 ms here, 20 ms of its event time), and the window sees the
  // slow one's watermark only as its batches arrive (a partial batch waits up
  // to the 100 ms buffer timeout): the live windows of each key span the
  // drift plus those lags, measured 70 to 95 pairs here.  Three times the
  // drift bounds it whatever the input's length; without alignment the span
  // is the whole gap between the two sources (about 18 s, 7000 pairs here),
  // and grows with it.
  const int64_t bound = (3 * 100 / kWindow + 2) * kKeys;
  EXPECT_GT(aligned.pauses, 0);
  EXPECT_LE(aligned.peak_live, bound);
  std::printf(
      "peak live (key, window) pairs: aligned %lld, unaligned %lld; bytes %lld / %lld\n",
      static_cast<long long>(aligned.peak_live), static_cast<long long>(unaligned.peak_live),
      static_cast<long long>(aligned.peak_bytes), static_cast<long long>(unaligned.peak_bytes));
  // Without it the fast source's whole input waits for the slow one.
  EXPECT_GT(unaligned.peak_live, 4 * bound);
  EXPECT_LT(aligned.peak_bytes, unaligned.peak_bytes);
}

// With operator chaining disabled, from_source's strategy stays in its
// source's task (it is part of the source, as in Flink's SourceOperator), so
// it still aligns; before, it became a task of its own and joined no group.
TEST(AlignmentJob, FromSourceAlignsWithOperatorChainingDisabled) {
  const int64_t fast_n = 20000, slow_n = 2000;
  std::string plan;
  SpeedRun aligned = RunTwoSpeeds(true, fast_n, 40000, slow_n, 4000, "speeds",
                                  /*unchained_from_source=*/true, &plan);
  EXPECT_NE(plan.find("\"Source: fast -> Timestamps/Watermarks\""), std::string::npos) << plan;
  EXPECT_NE(plan.find("\"Source: slow -> Timestamps/Watermarks\""), std::string::npos) << plan;
  EXPECT_EQ(plan.find("Warning"), std::string::npos) << plan;
  std::map<std::pair<int64_t, Timestamp>, int64_t> expected;
  for (int64_t i = 0; i < fast_n; ++i) ++expected[{i % kKeys, i / kWindow * kWindow}];
  for (int64_t i = 0; i < slow_n; ++i) ++expected[{i % kKeys, i / kWindow * kWindow}];
  EXPECT_EQ(aligned.counts, expected);
  EXPECT_GT(aligned.pauses, 0);
  EXPECT_LE(aligned.peak_live, (3 * 100 / kWindow + 2) * kKeys);
}

// Where alignment cannot apply, the plan says so (env.explain(), and once on
// stderr at execute): an aligned assigner that is not in a source's task
// (after a union here), and a group of one source subtask.
TEST(AlignmentPlan, SaysWhereAlignmentCannotApply) {
  auto strategy = WatermarkStrategy<Rec>::for_monotonous_timestamps()
                      .with_timestamp_assigner([](const Rec& r, Timestamp) { return r.ts; })
                      .with_watermark_alignment("g", Duration(100));
  auto gen = [](int64_t i) { return Rec{i % kKeys, i}; };
  {
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    env.from_generator<Rec>(gen, 10, 0, "a")
        .union_with(env.from_generator<Rec>(gen, 10, 0, "b"))
        .assign_timestamps_and_watermarks(strategy)
        .add_sink([](const Rec&) {});
    const std::string plan = env.explain();
    EXPECT_NE(plan.find("Warning: the watermark alignment of assigner 'Timestamps/Watermarks' "
                        "(group 'g') does not apply"),
              std::string::npos)
        << plan;
  }
  for (int p : {1, 2}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(p);
    env.from_source(sources::generator<Rec>(gen, 10), strategy, "a").add_sink([](const Rec&) {});
    const std::string plan = env.explain();
    EXPECT_EQ(plan.find("Warning: watermark alignment group 'g' has one source subtask") !=
                  std::string::npos,
              p == 1)
        << plan;
    EXPECT_EQ(plan.find("does not apply"), std::string::npos) << plan;
  }
}

// As in Flink (WatermarkAlignmentParams: only the drift turns it on), the
// group's name may be anything, "" too: it turned alignment off silently.
TEST(AlignmentJob, AnEmptyGroupNameIsAGroupLikeAnyOther) {
  auto base = WatermarkStrategy<Rec>::for_monotonous_timestamps();
  EXPECT_FALSE(base.aligned());
  EXPECT_TRUE(base.with_watermark_alignment("", Duration(100)).aligned());
  EXPECT_FALSE(base.with_watermark_alignment("", Duration(kMaxTimestamp)).aligned());
  const SpeedRun aligned = RunTwoSpeeds(true, 20000, 40000, 2000, 4000, "");
  EXPECT_GT(aligned.pauses, 0);
  EXPECT_LE(aligned.peak_live, (3 * 100 / kWindow + 2) * kKeys);
}

// Emits one record, then nothing, and never ends.
class QuietSource : public Source<Rec> {
 public:
  PollStatus Poll(SourceOutput<Rec>& out, size_t) override {
    if (!sent_) out.Collect(Rec{0, 0});
    sent_ = true;
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return kMaxTimestamp; }
  // Checkpointed (ARestoredSubtaskAheadOfTheGroupPausesAgain): whether it sent.
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutU8(sent_ ? 1 : 0); }
  void RestorePosition(internal::StateReader& r) override { sent_ = r.GetU8("sent") != 0; }

 private:
  bool sent_ = false;
};

TEST(AlignmentJob, AnIdleSourceDoesNotHoldTheGroupBack) {
  // The quiet source reports its watermark (-1) and then goes idle: it must
  // report MAX, or the fast source (20 ms of drift, paced so that reports
  // come while it runs) would wait for it forever.  The quiet one emits on
  // the 200 ms timer, where its idleness is noticed.
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto strategy = WatermarkStrategy<Rec>::for_monotonous_timestamps()
                      .with_timestamp_assigner([](const Rec& r, Timestamp) { return r.ts; })
                      .with_idleness(Duration(50))
                      .with_watermark_alignment("idle", Duration(20), Duration(5));
  auto fast = env.from_generator<Rec>(
                     [](int64_t i) {
                       return Rec{i % kKeys, i};
                     },
                     3000, 6000, "fast")
                  .assign_timestamps_and_watermarks(strategy.with_periodic_emit_per_record());
  auto quiet = env.add_source<Rec>([] { return std::make_unique<QuietSource>(); }, "quiet")
                   .assign_timestamps_and_watermarks(strategy);
  struct Seen {
    std::mutex mu;
    std::condition_variable cv;
    std::map<std::pair<int64_t, Timestamp>, int64_t> counts;
  };
  auto seen = std::make_shared<Seen>();
  fast.union_with(quiet)
      .key_by([](const Rec& r) { return r.key; })
      .window(TumblingEventTimeWindows::of(Duration(100)))
      .process([](const int64_t& key, const TimeWindow& w, const std::vector<Rec>& v,
                  WindowContext&,
                  Collector<std::pair<std::pair<int64_t, Timestamp>, int64_t>>& out) {
        out.collect({{key, w.start}, static_cast<int64_t>(v.size())});
      })
      .add_sink([seen](std::pair<std::pair<int64_t, Timestamp>, int64_t>&& p) {
        std::lock_guard<std::mutex> lock(seen->mu);
        seen->counts[p.first] += p.second;
        seen->cv.notify_all();
      });
  JobClient client = env.execute_async("idle in group");
  std::map<std::pair<int64_t, Timestamp>, int64_t> counts;
  {
    std::unique_lock<std::mutex> lock(seen->mu);
    // (The limit only stops a hang: the fast source waiting forever.)
    seen->cv.wait_for(lock, std::chrono::seconds(60),
                      [&] { return seen->counts.size() >= static_cast<size_t>(30 * kKeys); });
    counts = seen->counts;
  }
  client.cancel();
  client.wait();
  std::map<std::pair<int64_t, Timestamp>, int64_t> expected;
  for (int64_t i = 0; i < 3000; ++i) ++expected[{i % kKeys, i / 100 * 100}];
  ++expected[{0, 0}];  // the quiet source's record
  EXPECT_EQ(counts, expected);
}

// A source of its own watermarks for the restore test: record 0 at ts 0,
// record 1 at ts 1000, then (from record 2) ts 500 + i up to `end`, one a
// poll; `stop_at` records, then nothing (not ended) until restored.
class ScriptedAhead : public Source<Rec> {
 public:
  ScriptedAhead(int64_t stop_at, int64_t end) : stop_at_(stop_at), end_(end) {}
  void Open(const SourceContext& ctx) override { clock_ = ctx.clock; }
  PollStatus Poll(SourceOutput<Rec>& out, size_t) override {
    if (next_ >= stop_at_) return PollStatus::kNothingAvailable;
    const Timestamp ts = next_ == 0 ? 0 : next_ == 1 ? 1000 : 500 + next_;
    out.CollectWithTimestamp(Rec{0, ts}, ts);
    ++next_;
    return next_ >= end_ ? PollStatus::kEndOfInput : PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return clock_->NowMillis() + 1; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutI64(next_); }
  void RestorePosition(internal::StateReader& r) override { next_ = r.GetI64("next"); }

 private:
  int64_t stop_at_, end_;
  const Clock* clock_ = nullptr;
  int64_t next_ = 0;
};

// A paused subtask's watermark comes back with its checkpoint, and so must
// its place in the group: restored at watermark 999 while the other source
// of the group holds the limit at 99 (its watermark -1 plus the 100 ms
// drift), it pauses again (as in Flink, where the restarted subtask reports
// the first watermark above the limit and then waits).  It read every
// remaining record instead: it reported nothing until its watermark passed
// the restored one.
TEST(AlignmentJob, ARestoredSubtaskAheadOfTheGroupPausesAgain) {
  testing::TempDir dir;
  static constexpr int64_t kEnd = 400;
  struct Seen : WatermarkListener {
    std::mutex mu;
    std::condition_variable cv;
    bool ahead_paused = false;
    void OnSourceAlignment(const std::string& task, int, bool paused, Timestamp w,
                           Timestamp max_allowed) override {
      std::lock_guard<std::mutex> lock(mu);
      if (task.find("ahead") != std::string::npos && paused && w == 999 && max_allowed == 99)
        ahead_paused = true;
      cv.notify_all();
    }
    bool WaitPaused() {
      std::unique_lock<std::mutex> lock(mu);
      // (The limit only stops a hang.)
      return cv.wait_for(lock, std::chrono::seconds(60), [&] { return ahead_paused; });
    }
  };
  auto run = [&](bool restore, int64_t stop_at, const std::shared_ptr<Seen>& seen,
                 const std::shared_ptr<std::atomic<int64_t>>& read) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.set_watermark_listener(seen);
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    if (restore) env.restore_from("latest");
    auto strategy = WatermarkStrategy<Rec>::for_monotonous_timestamps()
                        .with_timestamp_assigner([](const Rec& r, Timestamp) { return r.ts; })
                        .with_periodic_emit_per_record()
                        .with_watermark_alignment("g", Duration(100), Duration(5));
    auto ahead =
        env.add_source<Rec>([stop_at] { return std::make_unique<ScriptedAhead>(stop_at, kEnd); },
                            "ahead")
            .assign_timestamps_and_watermarks(strategy);
    auto behind = env.add_source<Rec>([] { return std::make_unique<QuietSource>(); }, "behind")
                      .assign_timestamps_and_watermarks(strategy);
    ahead.union_with(behind).add_sink([read](Rec&& r) {
      if (r.ts >= 500) read->fetch_add(1);
    });
    return env.execute_async(restore ? "restored" : "first");
  };
  {
    // Both records of "ahead" read (watermark 999 > 99): paused; a
    // checkpoint, then the job is cancelled.
    auto seen = std::make_shared<Seen>();
    auto read = std::make_shared<std::atomic<int64_t>>(0);
    JobClient first = run(false, 2, seen, read);
    ASSERT_TRUE(seen->WaitPaused());
    const int64_t id = first.trigger_checkpoint();
    ASSERT_TRUE(first.wait_for_checkpoint(id, Duration(60000)));
    first.cancel();
    first.wait();
  }
  auto seen = std::make_shared<Seen>();
  auto read = std::make_shared<std::atomic<int64_t>>(0);
  JobClient restored = run(true, kEnd, seen, read);
  // Before the fix this never came, and "ahead" read all of its records.
  const bool paused = seen->WaitPaused();
  restored.cancel();
  const JobResult r = restored.wait();
  EXPECT_EQ(r.checkpoints.restored_id, 1) << r.status;
  EXPECT_TRUE(paused);
  // At most what it read before the first announcement after the restore
  // (one record a millisecond, a report every 5 ms).
  EXPECT_LT(read->load(), kEnd - 2);
}

}  // namespace
}  // namespace tidemark
