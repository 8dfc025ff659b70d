// Issue 16, items 2-4: per-split watermark generation (docs/semantics.md
// 2.7), the quiet-stream flush (2.9) and the future-timestamp guard (2.10).
// Operator-level tests run TimestampsAndWatermarksOperator in the
// single-threaded harness on a ManualClock; the split pipeline test runs a
// real job whose result does not depend on timing (per-record emission at
// parallelism 1).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tidemark/operators/basic.h"
#include "tidemark/tidemark.h"
#include "window_harness.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using testing::Emitted;
using testing::OperatorHarness;
using Op = TimestampsAndWatermarksOperator<int>;

std::vector<Timestamp> StatusesAndWatermarks(const std::vector<Emitted<int>>& events,
                                             std::vector<std::string>* statuses = nullptr) {
  std::vector<Timestamp> wms;
  for (const auto& e : events) {
    if (e.kind == Emitted<int>::kWatermark) wms.push_back(e.ts);
    if (e.kind == Emitted<int>::kStatus && statuses)
      statuses->push_back(e.ts == static_cast<Timestamp>(WatermarkStatus::kIdle) ? "IDLE"
                                                                                 : "ACTIVE");
  }
  return wms;
}

// ---------------------------------------------------------------------------
// Per-split generation in the operator.

TEST(SplitWatermarks, MinimumOverSplitsNotTheMaximumOfTheMergedStream) {
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms).with_timestamp_assigner(
      [](int v) { return Timestamp{v}; });
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy, /*per_split=*/true));
  h.Open();
  Op& op = h.op<Op>();
  ASSERT_TRUE(op.per_split());
  const int a = op.RegisterSplit("a");
  const int b = op.RegisterSplit("b");
  op.SetCurrentSplit(a);
  h.ProcessElement(5000, 0);
  op.SetCurrentSplit(b);
  h.ProcessElement(1000, 0);
  h.SetProcessingTime(201);  // the periodic emission
  EXPECT_EQ(h.output().Watermarks(), std::vector<Timestamp>{999});
  op.SetCurrentSplit(a);
  h.ProcessElement(9000, 0);
  h.SetProcessingTime(402);
  EXPECT_EQ(h.output().Watermarks(), std::vector<Timestamp>{999}) << "b holds it back";
  op.SetCurrentSplit(b);
  h.ProcessElement(3000, 0);
  h.SetProcessingTime(603);
  EXPECT_EQ(h.output().Watermarks(), (std::vector<Timestamp>{999, 2999}));
  // b ends: released, it no longer holds a back.
  op.ReleaseSplit(b);
  EXPECT_EQ(h.output().Watermarks(), (std::vector<Timestamp>{999, 2999, 8999}));
  // The same operator without per_split: one generator, max over all.
  OperatorHarness<int, int> merged(std::make_unique<Op>(strategy, /*per_split=*/false));
  merged.Open();
  EXPECT_FALSE(merged.op<Op>().per_split());
  merged.ProcessElement(5000, 0);
  merged.ProcessElement(1000, 0);
  merged.SetProcessingTime(201);
  EXPECT_EQ(merged.output().Watermarks(), std::vector<Timestamp>{4999});
}

TEST(SplitWatermarks, AnIdleSplitDoesNotHoldTheOthersBackAndAllIdleFlushesTheMaximum) {
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms)
                      .with_timestamp_assigner([](int v) { return Timestamp{v}; })
                      .with_idleness(500ms);
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy, /*per_split=*/true));
  h.Open();
  Op& op = h.op<Op>();
  const int fast = op.RegisterSplit("fast");
  const int quiet = op.RegisterSplit("quiet");
  op.SetCurrentSplit(quiet);
  h.ProcessElement(1000, 0);
  op.SetCurrentSplit(fast);
  h.ProcessElement(2000, 0);
  Timestamp t = 0;
  // fast keeps getting records; quiet gets none.
  for (int i = 1; i <= 10; ++i) {
    t += 201;
    op.SetCurrentSplit(fast);
    h.ProcessElement(2000 + i * 1000, 0);
    h.SetProcessingTime(t);
  }
  std::vector<std::string> statuses;
  const std::vector<Timestamp> wms = StatusesAndWatermarks(h.output().events(), &statuses);
  ASSERT_FALSE(wms.empty());
  EXPECT_EQ(wms.front(), 999) << "quiet holds the subtask back while it is active";
  EXPECT_GT(wms.back(), 999) << "after quiet went idle, fast's watermark goes through";
  EXPECT_EQ(wms.back(), 2000 + 10 * 1000 - 1);
  EXPECT_TRUE(statuses.empty()) << "one split idle is not the subtask idle";
  // fast goes quiet too: all idle -> the maximum is flushed, then IDLE.
  for (int i = 0; i < 10; ++i) h.SetProcessingTime(t += 201);
  statuses.clear();
  StatusesAndWatermarks(h.output().events(), &statuses);
  EXPECT_EQ(statuses, std::vector<std::string>{"IDLE"});
  // quiet comes back with a record: ACTIVE again, and its watermark (below
  // the combined one) does not take the subtask's back.
  op.SetCurrentSplit(quiet);
  h.ProcessElement(1500, 0);
  h.SetProcessingTime(t += 201);
  statuses.clear();
  const std::vector<Timestamp> after = StatusesAndWatermarks(h.output().events(), &statuses);
  EXPECT_EQ(statuses, (std::vector<std::string>{"IDLE", "ACTIVE"}));
  EXPECT_EQ(after.back(), 2000 + 10 * 1000 - 1);
}

// Releasing the last split changes neither the watermark nor the status
// (Flink's CombinedWatermarkStatus does not update without outputs): the
// subtask is not marked IDLE, so a file source's trace at the end of its
// input reads "emits MAX", not "idle, active, MAX, idle".  Before, every
// update with no split left marked the subtask IDLE.
TEST(SplitWatermarks, ReleasingEverySplitChangesNothingUntilASplitComesOrTheInputEnds) {
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms).with_timestamp_assigner(
      [](int v) { return Timestamp{v}; });
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy, /*per_split=*/true));
  h.Open();
  Op& op = h.op<Op>();
  const int a = op.RegisterSplit("a");
  const int b = op.RegisterSplit("b");
  op.SetCurrentSplit(a);
  h.ProcessElement(3000, 0);
  op.SetCurrentSplit(b);
  h.ProcessElement(2000, 0);
  h.SetProcessingTime(201);
  op.ReleaseSplit(b);
  op.ReleaseSplit(a);
  h.SetProcessingTime(402);  // periodic emissions with no split left
  h.SetProcessingTime(603);
  std::vector<std::string> statuses;
  EXPECT_EQ(StatusesAndWatermarks(h.output().events(), &statuses),
            (std::vector<Timestamp>{1999, 2999}))
      << "releasing b lets a's watermark through; releasing a changes nothing";
  EXPECT_TRUE(statuses.empty()) << "no split left is not the subtask idle";
  // A split added later carries on from there.
  const int c = op.RegisterSplit("c");
  op.SetCurrentSplit(c);
  h.ProcessElement(5000, 0);
  h.SetProcessingTime(804);
  EXPECT_EQ(StatusesAndWatermarks(h.output().events(), &statuses),
            (std::vector<Timestamp>{1999, 2999, 4999}));
  EXPECT_TRUE(statuses.empty());
  // A source that stays open with no split left says so itself
  // (SourceOutput::MarkIdle on its main output): IDLE.
  op.ReleaseSplit(c);
  op.SetCurrentSplit(-1);
  h.base().ProcessStatus(WatermarkStatus::kIdle);
  EXPECT_EQ(StatusesAndWatermarks(h.output().events(), &statuses),
            (std::vector<Timestamp>{1999, 2999, 4999}));
  EXPECT_EQ(statuses, std::vector<std::string>{"IDLE"});
}

// A split that marks itself idle (SourceOutput::ForSplit(id).MarkIdle(),
// Flink's createOutputForSplit(id).markIdle()) no longer holds the subtask's
// watermark back: split "quiet" has one record at 5 and goes idle, split
// "busy" runs to 2 900; the window [0, 1 s) fires while the source is still
// open.  Before, the split's idleness was dropped and the window never fired.
struct QuietSplitSource final : Source<int64_t> {
  bool sent = false;
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    if (!sent) {
      out.ForSplit("quiet").CollectWithTimestamp(5, 5);
      for (int64_t ts = 0; ts < 3000; ts += 100)
        out.ForSplit("busy").CollectWithTimestamp(int64_t{ts}, ts);
      sent = true;
    }
    out.ForSplit("quiet").MarkIdle();
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return kMaxTimestamp; }
};

TEST(SplitWatermarks, ASplitThatMarksItselfIdleDoesNotHoldTheSubtaskBack) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto strategy = WatermarkStrategy<int64_t>::for_monotonous_timestamps()
                      .with_timestamp_assigner([](const int64_t& v, Timestamp) { return v; })
                      .with_periodic_emit_per_record();
  struct Fired {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int64_t> counts;
  };
  auto fired = std::make_shared<Fired>();
  env.from_source<int64_t>([] { return std::make_unique<QuietSplitSource>(); }, strategy, "quiet")
      .map([](const int64_t&) { return int64_t{1}; })
      .key_by([](const int64_t&) { return 0; })
      .window(TumblingEventTimeWindows::of(1s))
      .reduce([](int64_t a, int64_t b) { return a + b; })
      .add_sink([fired](int64_t&& n) {
        std::lock_guard<std::mutex> lock(fired->mu);
        fired->counts.push_back(n);
        fired->cv.notify_all();
      });
  JobClient client = env.execute_async("quiet split");
  std::vector<int64_t> counts;
  {
    std::unique_lock<std::mutex> lock(fired->mu);
    // The limit only stops a hang.
    fired->cv.wait_for(lock, std::chrono::seconds(60), [&] { return fired->counts.size() >= 2; });
    counts = fired->counts;
  }
  EXPECT_FALSE(client.done()) << "the source never ends";
  client.cancel();
  client.wait();
  // [0, 1 s): busy's 10 records and quiet's one; [1 s, 2 s): 10.
  EXPECT_EQ(counts, (std::vector<int64_t>{11, 10}));
}

// A source of two splits at different event-time speeds, interleaved one
// record each in turn: "fast" advances 1000 ms per record, "slow" 250 ms.
struct TwoSpeedSource final : Source<int64_t> {
  int64_t i = 0;
  static constexpr int64_t kPerSplit = 40;
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    for (size_t n = 0; n < budget && i < 2 * kPerSplit; ++n, ++i) {
      const bool fast = i % 2 == 0;
      const int64_t ts = (i / 2) * (fast ? 1000 : 250);
      out.ForSplit(fast ? "fast" : "slow").CollectWithTimestamp(ts * 2 + (fast ? 0 : 1), ts);
    }
    return i < 2 * kPerSplit ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
};

// Late records of a job over TwoSpeedSource with tumbling 2 s windows (no
// lateness), the strategy at the source (per split) or after it (merged).
std::vector<int64_t> LateRecords(bool per_split) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_auto_watermark_interval(Duration(0));
  auto strategy =
      WatermarkStrategy<int64_t>::for_bounded_out_of_orderness(0ms).with_periodic_emit_per_record();
  auto factory = []() -> std::unique_ptr<Source<int64_t>> {
    return std::make_unique<TwoSpeedSource>();
  };
  DataStream<int64_t> s = per_split ? env.from_source<int64_t>(factory, strategy, "two speeds")
                                    : env.add_source<int64_t>(factory, "two speeds")
                                          .assign_timestamps_and_watermarks(strategy);
  OutputTag<int64_t> late("late");
  auto counts = s.key_by([](const int64_t& v) { return v % 2; })
                    .window(TumblingEventTimeWindows::of(2s))
                    .side_output_late_data(late)
                    .reduce([](int64_t a, int64_t) { return a; });
  auto late_records = counts.get_side_output(late).collect();
  JobResult r = env.execute();
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<int64_t> out;
  for (int64_t v : late_records->values()) out.push_back(v / 2);  // the timestamps
  std::sort(out.begin(), out.end());
  return out;
}

// The reference: replay the interleaved records; the watermark after each
// record is (per split) the minimum over the splits' max_ts - 1, or (merged)
// the maximum timestamp so far - 1; a record is late when its window's last
// millisecond is at or below the watermark before it.
std::vector<int64_t> ReferenceLate(bool per_split) {
  std::vector<int64_t> late;
  Timestamp max_fast = kMinTimestamp, max_slow = kMinTimestamp, wm = kMinTimestamp;
  for (int64_t i = 0; i < 2 * TwoSpeedSource::kPerSplit; ++i) {
    const bool fast = i % 2 == 0;
    const int64_t ts = (i / 2) * (fast ? 1000 : 250);
    const int64_t window_last = ts - ts % 2000 + 1999;
    if (window_last <= wm) late.push_back(ts);
    (fast ? max_fast : max_slow) = std::max(fast ? max_fast : max_slow, ts);
    // A split counts once it has a record (it registers then).
    Timestamp next = per_split ? kMaxTimestamp : kMinTimestamp;
    for (Timestamp m : {max_fast, max_slow}) {
      if (m == kMinTimestamp) continue;
      next = per_split ? std::min(next, m - 1) : std::max(next, m - 1);
    }
    wm = std::max(wm, next);
  }
  std::sort(late.begin(), late.end());
  return late;
}

TEST(SplitWatermarks, PerSplitGenerationDropsNothingThatIsOnTimeInItsSplit) {
  const std::vector<int64_t> merged_reference = ReferenceLate(false);
  ASSERT_FALSE(merged_reference.empty()) << "the merged stream's watermark must run ahead";
  EXPECT_TRUE(ReferenceLate(true).empty());
  EXPECT_EQ(LateRecords(/*per_split=*/false), merged_reference)
      << "generating after merging: the slow split's records are late";
  EXPECT_EQ(LateRecords(/*per_split=*/true), std::vector<int64_t>{})
      << "a generator per split: nothing late that is on time in its own split";
}

// ---------------------------------------------------------------------------
// A restore: the subtask reads its splits back one after another.  Each
// split it held at the checkpoint counts again at once, with its watermark,
// so the first split read does not move the subtask past one not read yet
// (whose next record a run without the restore took on time), until that one
// is read past it or released.

TEST(SplitWatermarks, ARestoredSplitHoldsTheOthersBackBeforeItsFirstRecord) {
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms).with_timestamp_assigner(
      [](int v) { return Timestamp{v}; });
  harness::OperatorSnapshot snapshot;
  {
    OperatorHarness<int, int> h(std::make_unique<Op>(strategy, /*per_split=*/true));
    h.Open();
    Op& op = h.op<Op>();
    const int a = op.RegisterSplit("a");
    const int b = op.RegisterSplit("b");
    op.SetCurrentSplit(a);
    h.ProcessElement(2000, 0);
    op.SetCurrentSplit(b);
    h.ProcessElement(5000, 0);
    h.SetProcessingTime(201);
    ASSERT_EQ(h.output().Watermarks(), std::vector<Timestamp>{1999});
    snapshot = h.snapshot(1);
  }
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy, /*per_split=*/true));
  h.initialize_state(snapshot);
  h.Open();
  Op& op = h.op<Op>();
  const int b = op.RegisterSplit("b");  // read first after the restore
  op.SetCurrentSplit(b);
  h.ProcessElement(6000, 0);
  h.SetProcessingTime(201);
  EXPECT_EQ(h.output().Watermarks(), std::vector<Timestamp>{}) << "a, at 1999, holds b back";
  const int a = op.RegisterSplit("a");
  op.SetCurrentSplit(a);
  h.ProcessElement(2500, 0);
  h.SetProcessingTime(402);
  EXPECT_EQ(h.output().Watermarks(), std::vector<Timestamp>{2499});
  op.ReleaseSplit(a);
  EXPECT_EQ(h.output().Watermarks(), (std::vector<Timestamp>{2499, 5999}));
}

// Splits "a" and "b".  First it emits a:1000 and b:5000, then waits (for the
// test's checkpoint and cancel) when `wait`.  Then it reads b first, b:6000
// in a poll of its own, and after it either a:1500 (`then_a`) or the end of a without a record of
// it and b:5500.  Its position: whether the first two were emitted.
class RestoredSplitsSource final : public Source<int64_t> {
 public:
  RestoredSplitsSource(bool wait, bool then_a, std::shared_ptr<std::atomic<bool>> emitted)
      : wait_(wait), then_a_(then_a), emitted_(std::move(emitted)) {}
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    if (!first_done_) {
      out.ForSplit("a").CollectWithTimestamp(1000, 1000);
      out.ForSplit("b").CollectWithTimestamp(5000, 5000);
      first_done_ = true;
      emitted_->store(true);
      if (wait_) restored_ = false;
    }
    if (wait_ && !restored_) {
      retry_at_ = SystemClock().NowMillis() + 1;  // until the test cancels the job
      return PollStatus::kNothingAvailable;
    }
    if (!b_read_) {
      // A poll of its own, as a paced reader's: a is not named in it.
      out.ForSplit("b").CollectWithTimestamp(6000, 6000);
      b_read_ = true;
      return PollStatus::kMoreAvailable;
    }
    if (then_a_) {
      out.ForSplit("a").CollectWithTimestamp(1500, 1500);
    } else {
      out.ReleaseSplit("a");
      out.ForSplit("b").CollectWithTimestamp(5500, 5500);
    }
    return PollStatus::kEndOfInput;
  }
  Timestamp RetryAt() const override { return retry_at_; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutU8(first_done_ ? 1 : 0); }
  void RestorePosition(internal::StateReader& r) override {
    first_done_ = r.GetU8("first done") != 0;
    restored_ = true;
  }

 private:
  bool wait_;
  bool then_a_;
  std::shared_ptr<std::atomic<bool>> emitted_;
  bool first_done_ = false;
  bool restored_ = false;
  bool b_read_ = false;
  Timestamp retry_at_ = kMaxTimestamp;
};

// The late records of a job over RestoredSplitsSource (tumbling 1 s windows,
// no lateness, a watermark per record): run through when `restore_dir` is
// empty; else run until the first two records are in, checkpointed,
// cancelled, and restored from that checkpoint.
std::vector<int64_t> LateAfterRestore(bool then_a, const std::string& restore_dir) {
  const bool broken = !restore_dir.empty();
  auto run = [&](bool wait, bool restore) {
    auto emitted = std::make_shared<std::atomic<bool>>(false);
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    if (broken) env.enable_checkpointing(Duration(0), restore_dir, 3);
    if (restore) env.restore_from("latest");
    auto strategy = WatermarkStrategy<int64_t>::for_bounded_out_of_orderness(0ms)
                        .with_timestamp_assigner([](const int64_t& v, Timestamp) { return v; })
                        .with_periodic_emit_per_record();
    OutputTag<int64_t> late("late");
    auto windows =
        env.from_source<int64_t>(
               [=] { return std::make_unique<RestoredSplitsSource>(wait, then_a, emitted); },
               strategy, "splits")
            .key_by([](const int64_t&) { return 0; })
            .window(TumblingEventTimeWindows::of(1s))
            .side_output_late_data(late)
            .reduce([](int64_t x, int64_t) { return x; });
    auto late_records = windows.get_side_output(late).collect();
    JobClient client = env.execute_async("restored splits");
    if (wait) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (!emitted->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::yield();  // polling the source's flag; the limit only stops a hang
      EXPECT_TRUE(emitted->load());
      const int64_t id = client.trigger_checkpoint();
      EXPECT_GT(id, 0);
      EXPECT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
      client.cancel();
    }
    JobResult r = client.wait();
    if (!wait) {
      EXPECT_TRUE(r.ok()) << r.status;
      if (restore) EXPECT_GT(r.checkpoints.restored_id, 0);
    }
    std::vector<int64_t> out = late_records->values();
    std::sort(out.begin(), out.end());
    return out;
  };
  if (!broken) return run(/*wait=*/false, /*restore=*/false);
  run(/*wait=*/true, /*restore=*/false);
  return run(/*wait=*/false, /*restore=*/true);
}

TEST(SplitWatermarks, ARestoredJobTakesOnTimeWhatARunWithoutTheRestoreTookOnTime) {
  const int reps = testing::StressIterations(2);
  for (int rep = 0; rep < reps; ++rep) {
    for (bool then_a : {true, false}) {
      // a:1500 is on time (a held the subtask at 999); b:5500 is late once
      // a, ended, no longer holds b's 5999 back.
      const std::vector<int64_t> expected =
          then_a ? std::vector<int64_t>{} : std::vector<int64_t>{5500};
      EXPECT_EQ(LateAfterRestore(then_a, ""), expected) << "unbroken, then_a " << then_a;
      testing::TempDir dir;
      EXPECT_EQ(LateAfterRestore(then_a, dir.path()), expected)
          << "restored, then_a " << then_a << ", rep " << rep;
    }
  }
}

// A source that releases a split it never named (one it found empty) is
// still a source of no split: its records go through the subtask's one
// generator, not a split "(main)" (no split watermark is reported), and the
// window fires as it would without the release.
struct EmptySplitSource final : Source<int64_t> {
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    out.ReleaseSplit("empty");
    for (int64_t ts = 0; ts < 3000; ts += 100) out.CollectWithTimestamp(int64_t{ts}, ts);
    return PollStatus::kEndOfInput;
  }
};

struct SplitWatermarkLog final : WatermarkListener {
  void OnSplitWatermark(const std::string&, int, const std::string& split, Timestamp,
                        bool) override {
    std::lock_guard<std::mutex> lock(mu);
    splits.push_back(split);
  }
  std::mutex mu;
  std::vector<std::string> splits;
};

TEST(SplitWatermarks, ReleasingASplitNeverNamedLeavesTheSourceOneOfNoSplit) {
  auto log = std::make_shared<SplitWatermarkLog>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.set_watermark_listener(log);
  auto strategy = WatermarkStrategy<int64_t>::for_bounded_out_of_orderness(0ms)
                      .with_timestamp_assigner([](const int64_t& v, Timestamp) { return v; })
                      .with_periodic_emit_per_record();
  auto sums = env.from_source<int64_t>([] { return std::make_unique<EmptySplitSource>(); },
                                       strategy, "empty split")
                  .key_by([](const int64_t&) { return 0; })
                  .window(TumblingEventTimeWindows::of(1s))
                  .reduce([](int64_t a, int64_t b) { return a + b; })
                  .collect();
  JobResult r = env.execute("empty split");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(sums->values(), (std::vector<int64_t>{4500, 14500, 24500}));
  std::lock_guard<std::mutex> lock(log->mu);
  EXPECT_TRUE(log->splits.empty()) << "split watermarks of " << log->splits.front();
}

// ---------------------------------------------------------------------------
// A batch through the operator: the built-in bounded generator is only asked
// periodically, so the batch goes on whole; a subclass of it may emit from
// OnEvent, and is asked at each record, its watermark right after it.

// Emits max_ts - 1 at every record, as a punctuated generator would.
struct EmitOnEvent final : BoundedOutOfOrdernessWatermarks<int> {
  EmitOnEvent() : BoundedOutOfOrdernessWatermarks<int>(Duration(0)) {}
  void OnEvent(const int& v, Timestamp ts, WatermarkOutput& out) override {
    BoundedOutOfOrdernessWatermarks<int>::OnEvent(v, ts, out);
    out.EmitWatermark(max_timestamp() - 1);
  }
};

std::vector<std::string> RunBatch(WatermarkStrategy<int> strategy) {
  OperatorHarness<int, int> h(std::make_unique<Op>(
      std::move(strategy).with_timestamp_assigner([](int v) { return Timestamp{v}; })));
  h.Open();
  std::vector<Record<int>> batch{
      {1000, kNoTimestamp}, {3000, kNoTimestamp}, {2000, kNoTimestamp}, {5000, kNoTimestamp}};
  h.op<Op>().ProcessBatch(std::span<Record<int>>(batch));
  h.SetProcessingTime(201);  // the periodic emission
  std::vector<std::string> seen;
  for (const auto& e : h.output().events()) {
    if (e.kind == Emitted<int>::kRecord) seen.push_back(std::to_string(*e.value));
    if (e.kind == Emitted<int>::kWatermark) seen.push_back("W" + std::to_string(e.ts));
  }
  return seen;
}

TEST(TimestampsAndWatermarksBatch, TheBoundedGeneratorSeesTheWholeBatchAndEmitsPeriodically) {
  EXPECT_EQ(RunBatch(WatermarkStrategy<int>::for_bounded_out_of_orderness(Duration(0))),
            (std::vector<std::string>{"1000", "3000", "2000", "5000", "W4999"}));
}

// The assigner over a batch: the two-argument form gets each record's own
// previous timestamp, and a function with state sees the records in order,
// each once.
TEST(TimestampsAndWatermarksBatch, TheAssignerSeesEachRecordOnceInOrderWithItsPreviousTimestamp) {
  auto strategy =
      WatermarkStrategy<int>::for_bounded_out_of_orderness(Duration(0))
          .with_timestamp_assigner([calls = 0](const int& v, Timestamp previous) mutable {
            return previous + v + 1000 * ++calls;
          });
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy));
  h.Open();
  std::vector<Record<int>> batch{{1, 10}, {2, 20}, {3, 30}};
  h.op<Op>().ProcessBatch(std::span<Record<int>>(batch));
  std::vector<Record<int>> second{{4, 40}};
  h.op<Op>().ProcessBatch(std::span<Record<int>>(second));
  std::vector<Timestamp> stamps;
  for (const auto& e : h.output().events())
    if (e.kind == Emitted<int>::kRecord) stamps.push_back(e.ts);
  EXPECT_EQ(stamps, (std::vector<Timestamp>{1011, 2022, 3033, 4044}));
}

TEST(TimestampsAndWatermarksBatch, ASubclassThatEmitsOnEventsIsAskedAtEachRecordOfTheBatch) {
  EXPECT_EQ(RunBatch(WatermarkStrategy<int>::for_generator(
                [] { return std::unique_ptr<WatermarkGenerator<int>>(new EmitOnEvent()); })),
            (std::vector<std::string>{"1000", "W999", "3000", "W2999", "2000", "5000", "W4999"}));
}

// ---------------------------------------------------------------------------
// The quiet-stream flush.

// The watermarks a TimestampsAndWatermarksOperator emits reach a tumbling
// 5 s count window; returns the processing time at which window [0, 5000)
// fired (-1: never, up to `until`), stepping the clock 1 ms at a time.
struct FlushRun {
  Timestamp fired_at = -1;
  Timestamp watermark_at_firing = kMinTimestamp;
  std::vector<Timestamp> watermarks;
  std::vector<std::string> statuses;
};
FlushRun RunQuietStream(WatermarkStrategy<int> strategy, Timestamp until) {
  OperatorHarness<int, int> ts_op(std::make_unique<Op>(std::move(strategy)));
  auto window_op = testing::MakeReduceWindowOperator<int>(
      [](const int&) { return 0; }, TumblingEventTimeWindows::of(5s), EventTimeTrigger(),
      [](int a, int b) { return a + b; });
  OperatorHarness<int, int> window(std::move(window_op));
  ts_op.Open();
  window.Open();
  size_t pumped = 0;
  FlushRun run;
  auto pump = [&](Timestamp now) {
    auto& events = ts_op.output().events();
    for (; pumped < events.size(); ++pumped) {
      const auto& e = events[pumped];
      if (e.kind == Emitted<int>::kRecord) window.ProcessElement(*e.value, e.ts);
      if (e.kind == Emitted<int>::kWatermark) {
        run.watermarks.push_back(e.ts);
        window.ProcessWatermark(e.ts);
      }
      if (e.kind == Emitted<int>::kStatus)
        run.statuses.push_back(e.ts == static_cast<Timestamp>(WatermarkStatus::kIdle) ? "IDLE"
                                                                                      : "ACTIVE");
    }
    if (run.fired_at < 0 && !window.TakeRecords().empty()) {
      run.fired_at = now;
      run.watermark_at_firing = run.watermarks.back();
    }
  };
  // Two records at processing time 0, the last one at event time 3000.
  ts_op.ProcessElement(1, 1000);
  ts_op.ProcessElement(1, 3000);
  pump(0);
  for (Timestamp now = 1; now <= until; ++now) {
    ts_op.SetProcessingTime(now);
    pump(now);
  }
  return run;
}

TEST(QuietStreamFlush, TheLastWindowFiresOnlyWithTheFlushAtThePredictedTime) {
  auto base = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms);
  const FlushRun without = RunQuietStream(base, 20'000);
  EXPECT_EQ(without.fired_at, -1) << "a quiet stream's last window never fires";
  EXPECT_EQ(without.watermarks, std::vector<Timestamp>{2999});

  const FlushRun with = RunQuietStream(base.with_flush_after(1000ms), 20'000);
  // W = 2999 + (now - 0 - 1000) reaches the window's last millisecond, 4999,
  // at now = 3000; the first periodic emission at or after that (every
  // 201 ms: the timer at T runs at T + 1 and is re-armed at now + 200) is
  // at 15 * 201 = 3015.
  EXPECT_EQ(with.fired_at, 3015);
  EXPECT_EQ(with.watermark_at_firing, 2999 + 3015 - 1000);
  for (size_t i = 1; i < with.watermarks.size(); ++i)
    EXPECT_GT(with.watermarks[i], with.watermarks[i - 1]) << "never goes back";
  EXPECT_EQ(with.watermarks.front(), 2999);
  // The first emission after more than 1000 ms quiet: 5 * 201 = 1005.
  EXPECT_EQ(with.watermarks[1], 2999 + 1005 - 1000);
}

TEST(QuietStreamFlush, AnIdleStreamDoesNotFlush) {
  // Idle after 500 ms: marked idle before the flush would start, so its
  // watermark stays (the idle stream holds nobody back anyway).
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms)
                      .with_flush_after(1000ms)
                      .with_idleness(500ms);
  const FlushRun run = RunQuietStream(strategy, 10'000);
  EXPECT_EQ(run.fired_at, -1);
  EXPECT_EQ(run.watermarks, std::vector<Timestamp>{2999});
  EXPECT_EQ(run.statuses, std::vector<std::string>{"IDLE"});
}

TEST(QuietStreamFlush, ARecordAfterTheFlushDoesNotTakeTheWatermarkBack) {
  OperatorHarness<int, int> h(std::make_unique<Op>(
      WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms).with_flush_after(1000ms)));
  h.Open();
  h.ProcessElement(1, 3000);
  Timestamp now = 0;
  while (now < 3015) h.SetProcessingTime(++now);
  const Timestamp flushed = h.output().Watermarks().back();
  EXPECT_EQ(flushed, 5014);
  h.ProcessElement(2, 4000);  // on time before the flush, late after it
  for (int i = 0; i < 2000; ++i) h.SetProcessingTime(++now);
  const std::vector<Timestamp> wms = h.output().Watermarks();
  for (size_t i = 1; i < wms.size(); ++i) EXPECT_GT(wms[i], wms[i - 1]);
  // Quiet again from 3015: 1000 ms later it flushes from the generator's
  // 3999: past 5014 only at 3015 + 1000 + 1016.
  EXPECT_EQ(wms.back(), 5014) << "3999 + (4824 - 3015 - 1000) = 4808 does not advance";
  for (int i = 0; i < 1000; ++i) h.SetProcessingTime(++now);
  // The last periodic emission by 6015 is at 29 * 201 = 5829.
  EXPECT_EQ(h.output().Watermarks().back(), 3999 + (5829 - 3015 - 1000))
      << "flushes on from the generator's own watermark";
  EXPECT_THROW(WatermarkStrategy<int>::no_watermarks().with_flush_after(0ms),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------
// The future-timestamp guard.

TEST(FutureTimestampGuard, RecordsTooFarAheadGoToTheSideOutputNotTheWatermark) {
  OutputTag<int> future("future");
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms)
                      .with_timestamp_assigner([](int v) { return Timestamp{v}; })
                      .with_max_future_skew(1000ms, future);
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy), /*start_processing_time=*/10'000);
  auto& side = h.AddSideOutput(future);
  h.Open();
  h.ProcessElement(10'500, 0);
  h.ProcessElement(11'000, 0);         // exactly the skew ahead: kept
  h.ProcessElement(11'001, 0);         // more than the skew: diverted
  h.ProcessElement(1'000'000'000, 0);  // far in the future
  // The batch path too.
  std::vector<Record<int>> batch = {{9'000, 0}, {20'000, 0}, {10'900, 0}};
  static_cast<InputOperator<int>&>(h.base()).ProcessBatch(std::span<Record<int>>(batch));
  h.SetProcessingTime(10'201);
  std::vector<std::pair<int, Timestamp>> kept = h.TakeRecords();
  EXPECT_EQ(kept, (std::vector<std::pair<int, Timestamp>>{
                      {10'500, 10'500}, {11'000, 11'000}, {9'000, 9'000}, {10'900, 10'900}}));
  EXPECT_EQ(side.TakeRecords(),
            (std::vector<std::pair<int, Timestamp>>{
                {11'001, 11'001}, {1'000'000'000, 1'000'000'000}, {20'000, 20'000}}));
  EXPECT_EQ(h.output().Watermarks(), std::vector<Timestamp>{10'999})
      << "the future records did not move the watermark";
  EXPECT_EQ(h.counter("numFutureRecords"), 3);
  EXPECT_EQ(h.counter("numFutureRecordsDropped"), 0);
  // The clock moves on: the same timestamp is no longer in the future.
  h.SetProcessingTime(20'000);
  h.ProcessElement(20'000, 0);
  EXPECT_EQ(h.TakeRecords().size(), 1u);
}

TEST(FutureTimestampGuard, WithoutASideOutputTheyAreCountedAsDropped) {
  auto strategy = WatermarkStrategy<int>::for_bounded_out_of_orderness(0ms)
                      .with_timestamp_assigner([](int v) { return Timestamp{v}; })
                      .with_max_future_skew(0ms);
  OperatorHarness<int, int> h(std::make_unique<Op>(strategy), 5000);
  h.Open();
  h.ProcessElement(5000, 0);
  h.ProcessElement(5001, 0);
  EXPECT_EQ(h.TakeRecords().size(), 1u);
  EXPECT_EQ(h.counter("numFutureRecords"), 1);
  EXPECT_EQ(h.counter("numFutureRecordsDropped"), 1);
  EXPECT_THROW(WatermarkStrategy<int>::no_watermarks().with_max_future_skew(-1ms),
               std::invalid_argument);
}

}  // namespace
}  // namespace tidemark
