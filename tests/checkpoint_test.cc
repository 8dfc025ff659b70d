// tests/checkpoint_test.cc
//
// Aligned checkpoints (issue 13): barrier alignment in the input gate
// (records before the barrier on every channel are processed before the
// snapshot, none after; ended and idle channels do not hold an alignment
// back), and whole jobs whose checkpoints are consistent cuts, taken while
// real threads run: the records the sources had emitted at checkpoint n are
// exactly the records the downstream operators had counted at n.  And a job
// cancelled after a checkpoint and restored from it ends with the same state
// as a run without failure.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gate_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using internal::Batch;
using internal::Channel;
using internal::ControlKind;
using internal::InputGate;
using internal::Record;

// --- the gate, driven by hand -----------------------------------------------

// Records what reaches the head of the chain, and the alignments.
struct Recorder final : Output<int>, internal::BarrierHandler {
  std::vector<std::string> events;
  void Collect(int&& v, Timestamp) override { events.push_back(std::to_string(v)); }
  void EmitWatermark(Timestamp w) override { events.push_back("W" + std::to_string(w)); }
  void EmitStatus(WatermarkStatus) override {}
  void OnBarrierAligned(int64_t id, int64_t alignment_ns) override {
    EXPECT_GE(alignment_ns, 0);
    events.push_back("CKPT" + std::to_string(id));
  }
};

struct GateFixture : testing::GateFixtureBase<Recorder> {
  explicit GateFixture(int n) : GateFixtureBase(n, 16) {}
  // Steps until nothing is left; returns the last step's result.
  internal::TaskInput::Step Drain() {
    internal::TaskInput::Step s;
    while ((s = gate->RunStep()) == internal::TaskInput::Step::kMore) {
    }
    return s;
  }
};

using Events = std::vector<std::string>;
namespace fs = std::filesystem;

TEST(BarrierAlignment, ChannelIsHeldFromItsBarrierUntilEveryChannelHasIt) {
  GateFixture f(2);
  f.Push(0, {"1", "2", "B1", "3"});
  f.Push(1, {"4"});
  f.Drain();
  // Channel 0 is held after its barrier: 3 waits; channel 1 goes on.
  EXPECT_EQ(f.rec.events, (Events{"1", "2", "4"}));
  EXPECT_TRUE(f.gate->blocked(0));
  EXPECT_EQ(f.gate->aligning_checkpoint(), 1);
  // More on the held channel stays held.
  f.Push(0, {"5"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"1", "2", "4"}));
  // The barrier on channel 1 completes the alignment: the snapshot sees
  // 1, 2, 4 and nothing after either barrier.
  f.Push(1, {"6", "B1", "7"});
  f.Drain();
  ASSERT_GE(f.rec.events.size(), 5u);
  EXPECT_EQ(Events(f.rec.events.begin(), f.rec.events.begin() + 5),
            (Events{"1", "2", "4", "6", "CKPT1"}));
  // Then everything that was held, in channel order: 3 before 5.
  Events after(f.rec.events.begin() + 5, f.rec.events.end());
  std::sort(after.begin(), after.end());
  EXPECT_EQ(after, (Events{"3", "5", "7"}));
  const auto it3 = std::find(f.rec.events.begin(), f.rec.events.end(), "3");
  const auto it5 = std::find(f.rec.events.begin(), f.rec.events.end(), "5");
  EXPECT_LT(it3, it5);
  EXPECT_FALSE(f.gate->blocked(0));
  EXPECT_EQ(f.gate->aligning_checkpoint(), -1);
}

TEST(BarrierAlignment, AnEndedChannelDoesNotHoldTheAlignmentBack) {
  GateFixture f(3);
  f.Push(0, {"1", "B1", "2"});
  f.Push(1, {"3", "E"});  // ended before its barrier: it will never send one
  f.Drain();
  EXPECT_EQ(f.gate->aligning_checkpoint(), 1);
  f.Push(2, {"4", "B1"});
  f.Drain();
  EXPECT_EQ(Events(f.rec.events.begin(), f.rec.events.begin() + 4),
            (Events{"1", "3", "4", "CKPT1"}));
  EXPECT_EQ(f.rec.events.back(), "2");
}

TEST(BarrierAlignment, ChannelEndingDuringAlignmentCompletesIt) {
  GateFixture f(2);
  f.Push(0, {"1", "B1", "2"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"1"}));
  f.Push(1, {"3", "E"});
  EXPECT_EQ(f.Drain(), internal::TaskInput::Step::kNothing);
  EXPECT_EQ(f.rec.events, (Events{"1", "3", "CKPT1", "2"}));
  f.Push(0, {"E"});
  EXPECT_EQ(f.Drain(), internal::TaskInput::Step::kEnd);
}

TEST(BarrierAlignment, IdleChannelStillCarriesItsBarrier) {
  GateFixture f(2);
  f.Push(1, {"I"});  // channel 1 idle: not in the watermark minimum
  f.Push(0, {"W5", "B1", "9"});
  f.Drain();
  // The watermark went through (channel 1 is idle), the barrier waits.
  EXPECT_EQ(f.rec.events, (Events{"W5"}));
  f.Push(1, {"B1"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"W5", "CKPT1", "9"}));
}

TEST(BarrierAlignment, SingleChannelAlignsAtOnceAndSuccessiveCheckpointsEachAlign) {
  GateFixture f(1);
  f.Push(0, {"1", "B1", "2", "B2", "3"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"1", "CKPT1", "2", "CKPT2", "3"}));
}

TEST(BarrierAlignment, RecordsInCountsEveryRecordOnceAcrossHeldBatches) {
  GateFixture f(2);
  f.Push(0, {"1", "2", "B1", "3", "4"});
  f.Push(1, {"5", "B1", "6"});
  f.Drain();
  EXPECT_EQ(f.metrics.records_in.Get(), 6);
}

// --- whole jobs ---------------------------------------------------------------

// Counts its records; the count is its state.  Emits (subtask, count) at the
// end.
class CountingOperator final : public OneInputOperator<int64_t, int64_t> {
 public:
  void ProcessElement(int64_t&& v, Timestamp) override {
    ++count_;
    sum_ += v;
  }
  void Finish() override { output().Collect(int64_t{sum_}, kNoTimestamp); }
  void SnapshotState(internal::StateWriter& w) override {
    w.PutI64(count_);
    w.PutI64(sum_);
  }
  void RestoreState(internal::StateReader& r) override {
    count_ = r.GetI64("count");
    sum_ = r.GetI64("sum");
  }

 private:
  int64_t count_ = 0;
  int64_t sum_ = 0;
};

struct Cut {
  int64_t emitted = 0;  // by the sources, from their positions
  int64_t counted = 0;  // by the counting operators
};

// Reads checkpoint `chk` back: what the sources had emitted (a generator at
// index i of subtask s with stride p has emitted (i - s) / p records) and
// what the counters had counted.
Cut ReadCut(const internal::LoadedCheckpoint& chk) {
  Cut cut;
  for (const auto& [name, bytes] : chk.states) {
    absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, name);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) continue;
    if (s->has_source) {
      internal::StateReader r(s->input_state);
      const int64_t next = r.GetI64();
      cut.emitted += (next - s->subtask) / s->parallelism;
    }
    for (const auto& op : s->operators) {
      if (op.name != "Counter") continue;
      internal::StateReader r(op.state);
      cut.counted += r.GetI64();
    }
  }
  return cut;
}

void BuildCountingJob(StreamExecutionEnvironment& env, int64_t n, int sources, int counters) {
  env.from_generator<int64_t>([](int64_t i) { return i; }, n)
      .set_parallelism(sources)
      .key_by([](const int64_t& v) { return v % 97; })
      .transform<int64_t>("Counter",
                          [] { return std::unique_ptr<OperatorBase>(new CountingOperator()); })
      .set_parallelism(counters)
      .add_sink([](int64_t&&, Timestamp) {}, "Discard")
      .set_parallelism(1);
}

TEST(CheckpointJob, EveryCheckpointIsAConsistentCut) {
  const int reps = testing::StressIterations(6);
  size_t mid_run = 0;  // checkpoints taken while the sources ran, over every rep
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir dir;
    const int sources = 1 + rep % 3;
    const int counters = 1 + (rep + 1) % 3;
    const int64_t n = 400'000;
    StreamExecutionEnvironment env;
    env.set_worker_threads(2).set_batch_size(1 + 37 * (rep % 4)).set_channel_capacity(2);
    env.enable_checkpointing(Duration(0), dir.path(), /*retain=*/1000);
    BuildCountingJob(env, n, sources, counters);
    JobClient client = env.execute_async("cut");
    std::vector<int64_t> ids;
    while (!client.done()) {
      const int64_t id = client.trigger_checkpoint();
      if (id < 0) break;  // every source has finished
      ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000))) << "checkpoint " << id;
      ids.push_back(id);
    }
    bool hung = false;
    JobResult r = testing::WaitWithWatchdog(client, &hung);
    ASSERT_FALSE(hung);
    ASSERT_TRUE(r.ok()) << r.status;
    // And the final checkpoint, once every subtask has finished.
    EXPECT_EQ(r.checkpoints.completed, static_cast<int64_t>(ids.size()) + 1);
    // On a loaded machine a rep may finish before its first trigger: then
    // only the final checkpoint is checked, and other reps take the rest.
    mid_run += ids.size();
    internal::CheckpointStorage storage(dir.path());
    int64_t last_emitted = -1;
    for (int64_t id : ids) {
      absl::StatusOr<internal::LoadedCheckpoint> chk = storage.Load(storage.CheckpointPath(id));
      ASSERT_TRUE(chk.ok()) << chk.status();
      const Cut cut = ReadCut(*chk);
      EXPECT_EQ(cut.emitted, cut.counted) << "rep " << rep << " checkpoint " << id;
      EXPECT_GE(cut.emitted, last_emitted);
      EXPECT_LE(cut.emitted, n);
      last_emitted = cut.emitted;
    }
    // The final checkpoint: every record emitted and counted.
    absl::StatusOr<internal::LoadedCheckpoint> last =
        storage.Load(storage.CheckpointPath(r.checkpoints.last_id));
    ASSERT_TRUE(last.ok()) << last.status();
    const Cut final_cut = ReadCut(*last);
    EXPECT_EQ(final_cut.emitted, n) << "rep " << rep;
    EXPECT_EQ(final_cut.counted, n) << "rep " << rep;
  }
  EXPECT_GT(mid_run, 0u);
}

// Issue 23 item 3, on the API: the checkpoint directory is checked before
// the job starts; a failed checkpoint is told to the listener when it fails,
// counted, and tolerated up to set_tolerable_checkpoint_failure_number.
TEST(CheckpointJob, AnUnusableCheckpointDirectoryFailsTheJobBeforeItRuns) {
  testing::TempDir dir;
  const std::string file = dir.File("plain", "x\n");
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(5), file + "/chk");
  std::atomic<int64_t> seen{0};
  env.from_generator<int64_t>([](int64_t i) { return i; }, 100, 0.0)
      .add_sink([&seen](int64_t&&, Timestamp) { seen.fetch_add(1); }, "Count");
  JobResult r = env.execute("unusable dir");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("checkpoint directory " + file + "/chk: cannot create"));
  EXPECT_EQ(seen.load(), 0);
}

TEST(CheckpointJob, AFailedCheckpointIsToldToTheListenerAndToleratedUpToTheCount) {
  testing::TempDir dir;
  // Checkpoint 1's first state file is written through a link to /dev/full.
  std::filesystem::create_directories(dir.Path("chk-1"));
  std::filesystem::create_symlink("/dev/full", dir.Path("chk-1/.0-0.state.tmp"));
  StreamExecutionEnvironment env;
  env.set_worker_threads(2);
  env.enable_checkpointing(Duration(5), dir.path());
  env.set_tolerable_checkpoint_failure_number(1);
  std::mutex mu;
  std::vector<std::string> failures;
  env.set_checkpoint_failure_listener([&](int64_t id, const std::string& error) {
    std::lock_guard<std::mutex> lock(mu);
    failures.push_back(absl::StrCat(id, " ", error));
  });
  // Paced, so that periodic checkpoints come before the end.
  env.from_generator<int64_t>([](int64_t i) { return i; }, 4'000, 20'000.0)
      .key_by([](const int64_t& v) { return v % 13; })
      .transform<int64_t>("Counter",
                          [] { return std::unique_ptr<OperatorBase>(new CountingOperator()); })
      .add_sink([](int64_t&&, Timestamp) {}, "Discard");
  JobResult r = env.execute("tolerated");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.failed, 1);
  EXPECT_GE(r.checkpoints.completed, 1);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_THAT(failures[0], ::testing::HasSubstr("1 checkpoint 1: write state: "));
  EXPECT_THAT(failures[0], ::testing::HasSubstr("No space left on device"));
}

// The asynchronous part of a snapshot that fails (a storage error while a
// RocksDB backend uploads its files, here a deferred part that throws)
// fails the checkpoint, counted against the tolerable number as Flink's
// CHECKPOINT_ASYNC_EXCEPTION; it failed the job whatever the number.
class FailsItsFirstAsyncPart final : public OneInputOperator<int64_t, int64_t> {
 public:
  explicit FailsItsFirstAsyncPart(std::shared_ptr<std::atomic<int>> failures)
      : failures_(std::move(failures)) {}
  void ProcessElement(int64_t&& v, Timestamp ts) override { output().Collect(std::move(v), ts); }
  void SnapshotState(internal::StateWriter& w) override {
    w.Defer([failures = failures_](internal::StateWriter& out) {
      if (failures->fetch_sub(1) > 0) throw std::runtime_error("upload: No space left on device");
      out.PutI64(7);
    });
  }
  void RestoreState(internal::StateReader& r) override { r.GetI64("seven"); }

 private:
  std::shared_ptr<std::atomic<int>> failures_;
};

JobResult RunWithFailingAsyncParts(const std::string& dir, int failures, int tolerable,
                                   std::vector<std::string>* reported) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);  // one snapshot a checkpoint: one failure each
  env.enable_checkpointing(Duration(5), dir);
  env.set_tolerable_checkpoint_failure_number(tolerable);
  auto mu = std::make_shared<std::mutex>();
  env.set_checkpoint_failure_listener([mu, reported](int64_t id, const std::string& error) {
    std::lock_guard<std::mutex> lock(*mu);
    reported->push_back(absl::StrCat(id, " ", error));
  });
  auto left = std::make_shared<std::atomic<int>>(failures);
  // Paced, so that periodic checkpoints come before the end.
  env.from_generator<int64_t>([](int64_t i) { return i; }, 4'000, 20'000.0)
      .transform<int64_t>("Uploader",
                          [left] {
                            return std::unique_ptr<OneInputOperator<int64_t, int64_t>>(
                                new FailsItsFirstAsyncPart(left));
                          })
      .add_sink([](int64_t&&, Timestamp) {}, "Discard");
  return env.execute("async part");
}

TEST(CheckpointJob, AFailedAsynchronousPartFailsTheCheckpointNotTheJob) {
  testing::TempDir dir;
  std::vector<std::string> reported;
  JobResult r = RunWithFailingAsyncParts(dir.Path("a"), 1, 1, &reported);
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.failed, 1);
  EXPECT_GE(r.checkpoints.completed, 1);
  ASSERT_EQ(reported.size(), 1u);
  EXPECT_THAT(reported[0], ::testing::HasSubstr("operator 'Uploader' at checkpoint 1 "
                                                "(asynchronous part): upload: No space left"));
  // Past the tolerable number, the job fails, saying so.
  reported.clear();
  r = RunWithFailingAsyncParts(dir.Path("b"), 2, 1, &reported);
  ASSERT_FALSE(r.ok()) << r.checkpoints.failed << " failed, " << r.checkpoints.completed
                       << " completed: " << (reported.empty() ? "" : reported.back());
  EXPECT_THAT(std::string(r.status.message()), ::testing::HasSubstr("(asynchronous part)"));
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("2 checkpoints failed in a row; the job tolerates 1"));
  EXPECT_EQ(reported.size(), 2u);
}

// Periodic checkpoints while a job runs: they complete, each a consistent
// cut, and the summary reports them.
TEST(CheckpointJob, PeriodicCheckpointsCompleteWhileTheJobRuns) {
  testing::TempDir dir;
  StreamExecutionEnvironment env;
  env.set_worker_threads(2);
  env.enable_checkpointing(Duration(5), dir.path(), /*retain=*/3);
  // Paced, so the job lasts a while: 2 x 20 000 records/s for 40 000.
  env.from_generator<int64_t>([](int64_t i) { return i; }, 40'000, 20'000.0)
      .set_parallelism(2)
      .key_by([](const int64_t& v) { return v % 13; })
      .transform<int64_t>("Counter",
                          [] { return std::unique_ptr<OperatorBase>(new CountingOperator()); })
      .set_parallelism(2)
      .add_sink([](int64_t&&, Timestamp) {}, "Discard")
      .set_parallelism(1);
  JobResult r = env.execute("periodic");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_GE(r.checkpoints.completed, 3);
  EXPECT_EQ(r.checkpoints.failed, 0);
  EXPECT_GT(r.checkpoints.last_size_bytes, 0);
  EXPECT_FALSE(r.checkpoints.at_most_once);
  internal::CheckpointStorage storage(dir.path());
  // Retention: the newest 3.
  std::vector<int64_t> complete;
  for (int64_t id : storage.ListCheckpointIds())
    if (storage.IsComplete(id)) complete.push_back(id);
  EXPECT_EQ(complete.size(), 3u);
  std::vector<std::string> problems;
  absl::StatusOr<internal::LoadedCheckpoint> chk = storage.LoadLatest(&problems);
  ASSERT_TRUE(chk.ok()) << chk.status();
  EXPECT_EQ(chk->id, r.checkpoints.last_id);
  const Cut cut = ReadCut(*chk);
  EXPECT_EQ(cut.emitted, cut.counted);
  // Every subtask reported its alignment.
  int64_t snapshotted = 0;
  for (const auto& m : r.metrics) snapshotted += m.last_checkpoint > 0 ? 1 : 0;
  EXPECT_EQ(snapshotted, static_cast<int64_t>(r.metrics.size()));
}

// Subtask 0 emits 0..n-1; subtask 1 emits nothing and says it is idle until
// `release` is set, then ends.  Its position: how many it emitted.
class HalfIdleSource final : public Source<int64_t> {
 public:
  HalfIdleSource(int64_t n, std::shared_ptr<std::atomic<bool>> release)
      : n_(n), release_(std::move(release)) {}
  void Open(const SourceContext& ctx) override { subtask_ = ctx.subtask_index; }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    if (subtask_ == 1) {
      if (release_->load()) return PollStatus::kEndOfInput;
      out.MarkIdle();
      retry_at_ = SystemClock().NowMillis() + 1;
      return PollStatus::kNothingAvailable;
    }
    for (size_t k = 0; k < budget && next_ < n_ && !out.Backpressured(); ++k)
      out.CollectWithTimestamp(int64_t{next_}, next_), ++next_;
    return next_ < n_ ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
  Timestamp RetryAt() const override { return retry_at_; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutI64(next_); }
  void RestorePosition(internal::StateReader& r) override { next_ = r.GetI64(); }

 private:
  int64_t n_;
  std::shared_ptr<std::atomic<bool>> release_;
  int subtask_ = 0;
  int64_t next_ = 0;
  Timestamp retry_at_ = kMaxTimestamp;
};

// An idle source subtask (idle status on every channel downstream, no
// records) still forwards barriers: checkpoints complete while it is idle,
// each a consistent cut, and the other source's channel ending does not
// hold them back either.
TEST(CheckpointJob, IdleAndEndedChannelsDoNotHoldCheckpointsBack) {
  const int reps = testing::StressIterations(5);
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir dir;
    const int64_t n = 200'000;
    auto release = std::make_shared<std::atomic<bool>>(false);
    StreamExecutionEnvironment env;
    env.set_worker_threads(2).set_channel_capacity(2);
    env.enable_checkpointing(Duration(0), dir.path(), /*retain=*/1000);
    env.add_source<int64_t>([n, release] { return std::make_unique<HalfIdleSource>(n, release); },
                            "Source")
        .set_parallelism(2)
        .key_by([](const int64_t& v) { return v % 7; })
        .transform<int64_t>("Counter",
                            [] { return std::unique_ptr<OperatorBase>(new CountingOperator()); })
        .set_parallelism(3)
        .add_sink([](int64_t&&, Timestamp) {}, "Discard")
        .set_parallelism(1);
    JobClient client = env.execute_async("idle");
    // While subtask 0 runs and after it has ended (its channels ended),
    // subtask 1 idle all along: every checkpoint completes.
    std::vector<int64_t> ids;
    for (int k = 0; k < 6; ++k) {
      const int64_t id = client.trigger_checkpoint();
      ASSERT_GE(id, 0) << "rep " << rep << ": subtask 1 is still running";
      ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000))) << "checkpoint " << id;
      ids.push_back(id);
    }
    release->store(true);
    bool hung = false;
    JobResult r = testing::WaitWithWatchdog(client, &hung);
    ASSERT_FALSE(hung);
    ASSERT_TRUE(r.ok()) << r.status;
    internal::CheckpointStorage storage(dir.path());
    for (int64_t id : ids) {
      absl::StatusOr<internal::LoadedCheckpoint> chk = storage.Load(storage.CheckpointPath(id));
      ASSERT_TRUE(chk.ok()) << chk.status();
      int64_t emitted = 0, counted = 0;
      for (const auto& [name, bytes] : chk->states) {
        absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, name);
        ASSERT_TRUE(s.ok()) << s.status();
        if (s->has_source) {
          internal::StateReader pr(s->input_state);
          emitted += pr.GetI64();
        }
        for (const auto& op : s->operators) {
          if (op.name != "Counter") continue;
          internal::StateReader cr(op.state);
          counted += cr.GetI64();
        }
      }
      EXPECT_EQ(emitted, counted) << "rep " << rep << " checkpoint " << id;
    }
  }
}

// Runs the counting job (sum of 0..n-1 in the counters' Finish), cancelled
// once checkpoint `cancel_after` is complete; returns the sums the job
// emitted (empty when cancelled).
std::vector<int64_t> RunCounting(const std::string& dir, const std::string& restore, int64_t n,
                                 int cancel_after, JobResult* result) {
  auto sums = std::make_shared<std::vector<int64_t>>();
  auto mu = std::make_shared<std::mutex>();
  StreamExecutionEnvironment env;
  env.set_worker_threads(2);
  env.enable_checkpointing(Duration(0), dir, 3);
  if (!restore.empty()) env.restore_from(restore);
  env.from_generator<int64_t>([](int64_t i) { return i; }, n, cancel_after > 0 ? 20'000.0 : 0)
      .set_parallelism(2)
      .key_by([](const int64_t& v) { return v % 31; })
      .transform<int64_t>("Counter",
                          [] { return std::unique_ptr<OperatorBase>(new CountingOperator()); })
      .set_parallelism(3)
      .add_sink(
          [sums, mu](int64_t&& v, Timestamp) {
            std::lock_guard<std::mutex> lock(*mu);
            sums->push_back(v);
          },
          "Sums")
      .set_parallelism(1);
  JobClient client = env.execute_async("restore");
  for (int k = 0; k < cancel_after; ++k) {
    const int64_t id = client.trigger_checkpoint();
    if (id < 0) break;
    EXPECT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
  }
  if (cancel_after > 0) client.cancel();
  *result = client.wait();
  std::lock_guard<std::mutex> lock(*mu);
  return *sums;
}

TEST(CheckpointJob, RestoredJobEndsWithTheStateOfARunWithoutFailure) {
  const int reps = testing::StressIterations(3);
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir dir;
    const int64_t n = 300'000;
    JobResult first;
    RunCounting(dir.path(), "", n, /*cancel_after=*/2 + rep, &first);
    EXPECT_EQ(first.checkpoints.completed, 2 + rep);
    JobResult second;
    std::vector<int64_t> sums = RunCounting(dir.path(), "latest", n, 0, &second);
    ASSERT_TRUE(second.ok()) << second.status;
    EXPECT_EQ(second.checkpoints.restored_id, first.checkpoints.last_id);
    int64_t total = 0;
    for (int64_t s : sums) total += s;
    EXPECT_EQ(sums.size(), 3u);
    EXPECT_EQ(total, n * (n - 1) / 2) << "rep " << rep;
  }
}

TEST(CheckpointJob, RestoreFromLatestWithoutAnyCheckpointStartsFresh) {
  testing::TempDir dir;
  JobResult r;
  std::vector<int64_t> sums = RunCounting(dir.path(), "latest", 1000, 0, &r);
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.restored_id, -1);
  int64_t total = 0;
  for (int64_t s : sums) total += s;
  EXPECT_EQ(total, 1000 * 999 / 2);
}

TEST(CheckpointJob, RestoreIntoAnotherJobIsRefusedWithAClearError) {
  testing::TempDir dir;
  JobResult first;
  RunCounting(dir.path(), "", 200'000, 1, &first);
  ASSERT_EQ(first.checkpoints.completed, 1);
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.path()).restore_from("latest");
  env.from_generator<int64_t>([](int64_t i) { return i; }, 10).print();
  JobResult r = env.execute("other");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("another job"), std::string::npos) << r.status;
}

// --- the exactly-once file sink ------------------------------------------------

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = i;
  return v;
}

void BuildFileJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n, double rate) {
  env.from_generator<int64_t>([](int64_t i) { return i; }, n, rate)
      .set_parallelism(2)
      .rebalance()
      .map([](const int64_t& v) { return v; })
      .set_parallelism(3)
      .sink_to_files(out, [](const int64_t& v) { return std::to_string(v); })
      .set_parallelism(3);
}

TEST(FileSink, WithoutCheckpointingCommitsAtTheEnd) {
  testing::TempDir out;
  StreamExecutionEnvironment env;
  BuildFileJob(env, out.path(), 50'000, 0);
  JobResult r = env.execute("files");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(50'000));
  EXPECT_EQ(hidden, 0);
}

TEST(FileSink, OnlyCompletedCheckpointsAreVisibleAndARestoreCompletesExactlyOnce) {
  const int reps = testing::StressIterations(3);
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir chk;
    testing::TempDir out;
    const int64_t n = 200'000;
    std::vector<int64_t> visible_after_cancel;
    {
      StreamExecutionEnvironment env;
      env.enable_checkpointing(Duration(0), chk.path());
      BuildFileJob(env, out.path(), n, 15'000.0);
      JobClient client = env.execute_async("files");
      for (int k = 0; k < 2 + rep; ++k) {
        const int64_t id = client.trigger_checkpoint();
        ASSERT_GE(id, 0);
        ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
      }
      client.cancel();
      JobResult r = client.wait();
      EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
      visible_after_cancel = testing::CommittedInts(out.path());
    }
    // What is visible is a prefix of each source's records, no duplicates,
    // and less than everything.
    EXPECT_LT(visible_after_cancel.size(), static_cast<size_t>(n));
    EXPECT_TRUE(std::adjacent_find(visible_after_cancel.begin(), visible_after_cancel.end()) ==
                visible_after_cancel.end());
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk.path()).restore_from("latest");
    BuildFileJob(env, out.path(), n, 0);
    JobResult r = env.execute("files");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_GE(r.checkpoints.restored_id, 1);
    int hidden = 0;
    EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(n)) << "rep " << rep;
    EXPECT_EQ(hidden, 0);
  }
}

// Restoring an older checkpoint of the job's own directory rolls the line
// back to it: the later checkpoints are set aside (abandoned-chk-<n>), so
// that a crash before the restored job's first checkpoint and a restore
// from "latest" go on from the restored one.  "latest" took the later
// checkpoint of the line that was left, whose sink files the first restore
// had rolled back: that restore failed ("cannot commit ... .pending") on
// every try, and the records after the older checkpoint were lost.
TEST(FileSink, ARestoreFromLatestAfterRestoringAnOlderCheckpointGoesOnFromIt) {
  testing::TempDir chk;
  testing::TempDir out;
  const int64_t n = 200'000;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk.path());
    BuildFileJob(env, out.path(), n, 15'000.0);
    JobClient client = env.execute_async("files");
    for (int k = 0; k < 3; ++k) {
      const int64_t id = client.trigger_checkpoint();
      ASSERT_GE(id, 0);
      ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
    }
    client.cancel();
    client.wait();
  }
  ASSERT_TRUE(fs::exists(fs::path(chk.path()) / "chk-3"));
  {
    // Restored from chk-2, then cancelled (a crash) before a checkpoint of
    // its own, once records flow: the restore has rolled the sink back.
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk.path())
        .restore_from((fs::path(chk.path()) / "chk-2").string());
    BuildFileJob(env, out.path(), n, 15'000.0);
    JobClient client = env.execute_async("files from chk-2");
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    auto flowing = [&] {
      for (const auto& m : client.metrics())
        if (m.task_name.find("Map") != std::string::npos && m.records_in > 0) return true;
      return false;
    };
    while (!flowing()) {
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "no record after the restore";
      std::this_thread::yield();
    }
    client.cancel();
    const JobResult r = client.wait();
    EXPECT_EQ(r.checkpoints.restored_id, 2);
    bool told = false;
    for (const std::string& line : r.checkpoints.notices)
      told = told || line.find("renamed abandoned-chk-3") != std::string::npos;
    EXPECT_TRUE(told) << "the notices name the checkpoint set aside";
  }
  EXPECT_FALSE(fs::exists(fs::path(chk.path()) / "chk-3"));
  EXPECT_TRUE(fs::exists(fs::path(chk.path()) / "abandoned-chk-3"));
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk.path()).restore_from("latest");
  BuildFileJob(env, out.path(), n, 0);
  const JobResult r = env.execute("files from latest");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.restored_id, 2);
  int hidden = 0;
  EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(n));
  EXPECT_EQ(hidden, 0);
}

// Two sinks into one directory whose prefixes extend one another ("part" and
// "part-0"): the first one's clean-up leaves the other's files alone (it
// deleted .part-0-0-0.inprogress as if it were its own subtask 0's).
TEST(FileSink, ASinkWhosePrefixExtendsAnotherKeepsItsFiles) {
  testing::TempDir dir;
  const std::string out = dir.Path("out");
  std::filesystem::create_directories(out);
  internal::TwoPhaseCommitFiles b;
  b.Open(out, "part-0", 0, /*checkpointing=*/true);
  b.Write("from b");
  internal::TwoPhaseCommitFiles a;
  a.Open(out, "part", 0, /*checkpointing=*/true);
  a.Write("from a");
  b.PreCommit(1);
  b.Commit(1);
  a.PreCommit(1);
  a.Commit(1);
  int hidden = 0;
  std::vector<std::string> lines = testing::CommittedLines(out, &hidden);
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, std::vector<std::string>({"from a", "from b"}));
  EXPECT_EQ(hidden, 0);
  EXPECT_TRUE(std::filesystem::exists(out + "/part-0-0-0"));
  EXPECT_TRUE(std::filesystem::exists(out + "/part-0-0"));
}

// Flink's FLIP-147: a bounded branch that finishes beside a running one
// commits its last part at the next checkpoint (which holds the branch's
// final snapshot) and at a stop-with-savepoint, not only when the job ends;
// restored from that checkpoint, nothing is committed twice.
void BuildBranchesJob(StreamExecutionEnvironment& env, const std::string& out) {
  env.set_parallelism(1);
  std::vector<int64_t> values(1000);
  for (int64_t i = 0; i < 1000; ++i) values[i] = i;
  env.from_collection(values)
      .name("bounded")
      .sink_to_files(out, [](const int64_t& v) { return absl::StrCat(v); })
      .name("bounded sink");
  // Runs until cancelled or stopped: 1 000 records a second, never ending.
  env.from_generator<int64_t>([](int64_t i) { return i; }, INT64_MAX, 1000.0)
      .set_parallelism(1)
      .name("running")
      .add_sink([](int64_t&&) {})
      .name("running sink");
}

// Waits (polling the live metrics, 60 s at most) until every subtask of the
// bounded branch has finished.
bool AwaitBoundedBranchFinished(const JobClient& client) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    int bounded = 0, finished = 0;
    for (const SubtaskMetricsSnapshot& m : client.metrics()) {
      if (m.task_name.find("bounded") == std::string::npos) continue;
      ++bounded;
      if (m.finished) ++finished;
    }
    if (bounded > 0 && finished == bounded) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Waits (60 s at most) until `dir` holds no hidden file: the operators hear
// of a completed checkpoint after it is durable, so the commit may come a
// moment after wait_for_checkpoint returns.
void AwaitNoPendingPart(const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int hidden = 1;
  while (std::chrono::steady_clock::now() < deadline) {
    testing::CommittedLines(dir, &hidden);
    if (hidden == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

TEST(FileSink, AFinishedBranchCommitsItsLastPartAtTheNextCheckpointAndOnlyOnce) {
  const int reps = testing::StressIterations(3);
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir chk;
    testing::TempDir out;
    {
      StreamExecutionEnvironment env;
      env.enable_checkpointing(Duration(0), chk.path());
      BuildBranchesJob(env, out.path());
      JobClient client = env.execute_async("branches");
      ASSERT_TRUE(AwaitBoundedBranchFinished(client));
      int hidden = 0;
      EXPECT_TRUE(testing::CommittedInts(out.path(), &hidden).empty());
      EXPECT_EQ(hidden, 1);  // the last part, pending for the next checkpoint
      const int64_t id = client.trigger_checkpoint();
      ASSERT_GE(id, 0);
      ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
      AwaitNoPendingPart(out.path());
      EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(1000)) << "rep " << rep;
      EXPECT_EQ(hidden, 0);
      client.cancel();
      EXPECT_TRUE(absl::IsCancelled(client.wait().status));
    }
    // Restored from that checkpoint, the finished branch commits nothing
    // again and writes nothing more.
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk.path()).restore_from("latest");
    BuildBranchesJob(env, out.path());
    JobClient client = env.execute_async("branches restored");
    ASSERT_TRUE(AwaitBoundedBranchFinished(client));
    const int64_t id = client.trigger_checkpoint();
    ASSERT_GE(id, 0);
    ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
    client.cancel();
    JobResult r = client.wait();
    EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
    EXPECT_GE(r.checkpoints.restored_id, 1);
    int hidden = 0;
    EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(1000)) << "rep " << rep;
    EXPECT_EQ(hidden, 0);
  }
}

TEST(FileSink, AFinishedBranchCommitsItsLastPartAtAStopWithSavepoint) {
  testing::TempDir chk;
  testing::TempDir out;
  testing::TempDir savepoints;
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk.path());
  BuildBranchesJob(env, out.path());
  JobClient client = env.execute_async("branches");
  ASSERT_TRUE(AwaitBoundedBranchFinished(client));
  absl::StatusOr<std::string> sp = client.stop_with_savepoint(savepoints.path());
  ASSERT_TRUE(sp.ok()) << sp.status();
  JobResult r = client.wait();
  EXPECT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), Iota(1000));
  EXPECT_EQ(hidden, 0);
}

}  // namespace
}  // namespace tidemark
