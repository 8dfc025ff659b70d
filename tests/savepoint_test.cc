// tests/savepoint_test.cc
//
// Savepoints (issue 26 item 5, docs/checkpoints.md "Savepoints"), on real
// jobs with real threads: a keyed tumbling-window job writing to the
// exactly-once file sink.
// - trigger_savepoint: the job goes on (later checkpoints, with retention 1,
//   never delete the savepoint); the savepoint is self-contained (the
//   checkpoint directory is deleted before the restore) and marked as a
//   savepoint; restored, the committed output equals an uninterrupted run's.
// - stop_with_savepoint: the job ends OK without firing its open windows;
//   restored at another parallelism of the window, the output is exact.
// - stop_with_savepoint(drain): the MAX watermark fires every window first;
//   the savepoint holds the finished job.
// - a changed job (every operator with a uid): a new operator starts empty;
//   a removed operator's state is refused, naming it, and restored without
//   it with set_allow_non_restored_state.
// Records are in order per source subtask, so none is late whenever the
// watermarks arrive: the results do not depend on timing.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "failing_source.h"
#include "test_util.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

namespace fs = std::filesystem;
using Rec = std::tuple<int64_t, int64_t, int64_t>;  // key, timestamp, value

using testing::Progress;

struct JobShape {
  int window_p = 2;
  double rate = 0;            // records per second per source subtask; 0: unpaced
  int64_t value_mod = 5;      // values 1 + i % value_mod (1: every value 1)
  bool new_counts = false;    // adds a keyed count per window (uid "counts")
  bool without_sums = false;  // the window sum and its sink removed
};

// generator (uid "src", p 2) -> timestamps ("ts") -> key_by -> tumbling 1 s
// sum ("sums", p window_p) -> file sink ("sink"): "key,window,sum" lines;
// every operator its own task, so each is matched by its uid.
void BuildJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n,
              const JobShape& shape, std::shared_ptr<Progress> progress = nullptr) {
  env.disable_operator_chaining();
  const int64_t mod = shape.value_mod;
  auto timestamped =
      env.from_generator<Rec>(
             [mod](int64_t i) {
               return Rec{i % 37, i / 4, 1 + i % mod};
             },
             n, shape.rate)
          .set_parallelism(2)
          .uid("src")
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<Rec>::for_bounded_out_of_orderness(Duration(20))
                  .with_timestamp_assigner([](const Rec& r, Timestamp) { return std::get<1>(r); }))
          .set_parallelism(2)
          .uid("ts");
  auto keyed = timestamped.key_by([](const Rec& r) { return std::get<0>(r); });
  auto sum = [](const Rec& a, const Rec& b) {
    return Rec{std::get<0>(a), std::min(std::get<1>(a), std::get<1>(b)),
               std::get<2>(a) + std::get<2>(b)};
  };
  if (!shape.without_sums) {
    keyed.window(TumblingEventTimeWindows::of(Duration(1000)))
        .reduce(sum)
        .name("Sums")
        .uid("sums")
        .set_parallelism(shape.window_p)
        .sink_to_files(out,
                       [progress](const Rec& r) {
                         if (progress) progress->Add();
                         return absl::StrCat(std::get<0>(r), ",", std::get<1>(r) / 1000, ",",
                                             std::get<2>(r));
                       })
        .uid("sink")
        .set_parallelism(shape.window_p);
  }
  if (shape.new_counts) {
    timestamped.map([](const Rec& r) {
                 return Rec{std::get<0>(r), std::get<1>(r), 1};
               })
        .uid("ones")
        .key_by([](const Rec& r) { return std::get<0>(r); })
        .window(TumblingEventTimeWindows::of(Duration(1000)))
        .reduce(sum)
        .name("Counts")
        .uid("counts")
        .sink_to_files(out + "-counts",
                       [](const Rec& r) {
                         return absl::StrCat(std::get<0>(r), ",", std::get<1>(r) / 1000, ",",
                                             std::get<2>(r));
                       })
        .uid("counts-sink");
  }
}

std::vector<std::string> Reference(const std::string& out, int64_t n, const JobShape& shape) {
  StreamExecutionEnvironment env;
  BuildJob(env, out, n, shape);
  JobResult r = env.execute("reference");
  EXPECT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  std::vector<std::string> lines = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  return lines;
}

// The committed "key,window,sum" lines' sums added up.
int64_t TotalOfSums(const std::vector<std::string>& lines) {
  int64_t total = 0;
  for (const std::string& l : lines) total += std::stoll(l.substr(l.rfind(',') + 1));
  return total;
}

TEST(Savepoint, TriggeredTheJobGoesOnAndARestoreFromItCommitsTheUninterruptedOutput) {
  const int64_t n = 200'000;
  testing::TempDir dir;
  const JobShape shape;
  const std::vector<std::string> expected = Reference(dir.Path("ref"), n, shape);
  ASSERT_GT(expected.size(), 1000u);

  const std::string out = dir.Path("out"), chk = dir.Path("chk"), sp = dir.Path("sp");
  std::string savepoint;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk, /*retain=*/1);
    auto progress = std::make_shared<Progress>();
    JobShape paced = shape;
    paced.rate = 30'000.0;
    BuildJob(env, out, n, paced, progress);
    JobClient client = env.execute_async("before");
    ASSERT_TRUE(progress->WaitFor(300));
    absl::StatusOr<std::string> path = client.trigger_savepoint(sp);
    ASSERT_TRUE(path.ok()) << path.status();
    savepoint = *path;
    EXPECT_EQ(fs::path(savepoint).parent_path(), fs::path(sp));
    EXPECT_EQ(fs::path(savepoint).filename().string().rfind("savepoint-", 0), 0u) << savepoint;
    // The job goes on: two checkpoints after it, retention 1.
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(progress->WaitFor(600 + 300 * k));
      const int64_t id = client.trigger_checkpoint();
      ASSERT_GE(id, 0);
      ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
    }
    EXPECT_EQ(client.checkpoints().savepoints, std::vector<std::string>{savepoint});
    client.cancel();
    JobResult r = client.wait();
    ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
  }
  ASSERT_TRUE(fs::exists(fs::path(savepoint) / "_manifest")) << "retention deleted the savepoint";
  absl::StatusOr<internal::LoadedCheckpoint> loaded =
      internal::CheckpointStorage::ForSavepoint(savepoint).Load(savepoint);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->metadata["type"], "savepoint");
  // Self-contained: nothing of the checkpoint directory is needed.
  fs::remove_all(chk);

  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk).restore_from(savepoint);
  BuildJob(env, out, n, shape);
  JobResult r = env.execute("after");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.restored_id, loaded->id);
  EXPECT_EQ(r.checkpoints.restored_path, savepoint);
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  EXPECT_EQ(got, expected);
}

// The new version of a job writes to another directory (Flink's file sink
// keeps its files' paths in its state): what the savepoint had pending is
// committed in the old directory, what the old job committed after it is
// taken back there, and the new directory gets the rest, exactly once.
TEST(Savepoint, ARestoredFileSinkWritingElsewhereCommitsTheOldFilesWhereTheyWere) {
  const int64_t n = 200'000;
  testing::TempDir dir;
  const JobShape shape;
  const std::vector<std::string> expected = Reference(dir.Path("ref"), n, shape);
  const std::string v1 = dir.Path("out-v1"), v2 = dir.Path("out-v2"), chk = dir.Path("chk");
  std::string savepoint;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk);
    auto progress = std::make_shared<Progress>();
    JobShape paced = shape;
    paced.rate = 30'000.0;
    BuildJob(env, v1, n, paced, progress);
    JobClient client = env.execute_async("v1");
    ASSERT_TRUE(progress->WaitFor(300));
    absl::StatusOr<std::string> path = client.trigger_savepoint(dir.Path("sp"));
    ASSERT_TRUE(path.ok()) << path.status();
    savepoint = *path;
    // Committed after the savepoint: taken back by the restore.
    ASSERT_TRUE(progress->WaitFor(700));
    const int64_t id = client.trigger_checkpoint();
    ASSERT_GE(id, 0);
    ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
    client.cancel();
    client.wait();
  }
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk).restore_from(savepoint);
  BuildJob(env, v2, n, shape);
  JobResult r = env.execute("v2");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden1 = 0, hidden2 = 0;
  std::vector<std::string> got = testing::CommittedLines(v1, &hidden1);
  const std::vector<std::string> in_v2 = testing::CommittedLines(v2, &hidden2);
  EXPECT_FALSE(got.empty());
  EXPECT_FALSE(in_v2.empty());
  got.insert(got.end(), in_v2.begin(), in_v2.end());
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(hidden1, 0);
  EXPECT_EQ(hidden2, 0);
}

TEST(Savepoint, StopWithSavepointEndsWithoutFiringAndRestoresAtAnotherParallelism) {
  const int64_t n = 200'000;
  testing::TempDir dir;
  const JobShape shape;  // the window at parallelism 2
  const std::vector<std::string> expected = Reference(dir.Path("ref"), n, shape);
  const std::string out = dir.Path("out"), sp = dir.Path("sp");
  std::string savepoint;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    auto progress = std::make_shared<Progress>();
    JobShape paced = shape;
    paced.rate = 60'000.0;
    BuildJob(env, out, n, paced, progress);
    JobClient client = env.execute_async("stopped");
    ASSERT_TRUE(progress->WaitFor(300));
    absl::StatusOr<std::string> path = client.stop_with_savepoint(sp);
    ASSERT_TRUE(path.ok()) << path.status();
    savepoint = *path;
    JobResult r = client.wait();
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(r.checkpoints.stopped_with_savepoint, savepoint);
    int hidden = 0;
    const std::vector<std::string> before = testing::CommittedLines(out, &hidden);
    // What the savepoint's barrier closed is committed; the open windows
    // did not fire (no MAX watermark).
    EXPECT_GT(before.size(), 0u);
    EXPECT_LT(before.size(), expected.size());
  }
  // Restored with the window (and its sink) at parallelism 3.
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk2")).restore_from(savepoint);
  JobShape rescaled = shape;
  rescaled.window_p = 3;
  BuildJob(env, out, n, rescaled);
  JobResult r = env.execute("after");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
}

TEST(Savepoint, StopWithDrainFiresEveryWindowFirst) {
  const int64_t n = 10'000'000;  // far more than is read before the stop
  testing::TempDir dir;
  const std::string out = dir.Path("out");
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk"));
  auto progress = std::make_shared<Progress>();
  JobShape shape;
  shape.rate = 100'000.0;
  shape.value_mod = 1;  // every value 1: the sums add up to the records read
  BuildJob(env, out, n, shape, progress);
  JobClient client = env.execute_async("drained");
  ASSERT_TRUE(progress->WaitFor(300));
  absl::StatusOr<std::string> path = client.stop_with_savepoint(dir.Path("sp"), /*drain=*/true);
  ASSERT_TRUE(path.ok()) << path.status();
  JobResult r = client.wait();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(r.checkpoints.stopped_with_savepoint.empty()) << "drained: it finished";
  int64_t read = 0;
  for (const auto& m : r.metrics)
    if (m.task_name.rfind("Source", 0) == 0) read += m.records_in;
  ASSERT_GT(read, 0);
  ASSERT_LT(read, n);
  int hidden = 0;
  // Every record read is in a fired window, committed.
  EXPECT_EQ(TotalOfSums(testing::CommittedLines(out, &hidden)), read);
  EXPECT_EQ(hidden, 0);
  EXPECT_TRUE(std::regex_match(fs::path(*path).filename().string(),
                               std::regex("savepoint-[0-9]+-[0-9a-f]{6}")))
      << *path;
  // The savepoint is the finished job's.
  absl::StatusOr<internal::LoadedCheckpoint> loaded =
      internal::CheckpointStorage::ForSavepoint(*path).Load(*path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->metadata["type"], "savepoint");
  ASSERT_FALSE(loaded->states.empty());
  for (const auto& [file, bytes] : loaded->states) {
    absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, file);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->finished) << file;
  }
}

// Restoring a drained savepoint (every subtask finished) runs nothing, as
// Flink deploys such tasks finished on restore (FLIP-147): the source does
// not read on from where the drain stopped it, and a processing-time timer
// pending at the drain (dropped there) does not fire.  Both happened: the
// restored source read the rest of its input and the restored timer fired.
TEST(Savepoint, ARestoredDrainedSavepointReadsNothingAndFiresNoTimer) {
  // Records 0-9, then (once `more`) 10-19 and the end; replayable.
  class TwoParts final : public Source<int64_t> {
   public:
    explicit TwoParts(std::shared_ptr<std::atomic<bool>> more) : more_(std::move(more)) {}
    PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
      if (next_ == 10 && !more_->load()) return PollStatus::kNothingAvailable;
      out.Collect(next_++);
      return next_ == 20 ? PollStatus::kEndOfInput : PollStatus::kMoreAvailable;
    }
    Timestamp RetryAt() const override { return kMaxTimestamp; }
    bool Replayable() const override { return true; }
    void SnapshotPosition(internal::StateWriter& w) const override { w.PutI64(next_); }
    void RestorePosition(internal::StateReader& r) override { next_ = r.GetI64("next"); }

   private:
    std::shared_ptr<std::atomic<bool>> more_;
    int64_t next_ = 0;
  };
  struct TimerOnFirst : KeyedProcessFunction<int, int64_t, std::string> {
    void process_element(const int64_t& v, Context& ctx, Collector<std::string>& out) override {
      if (v == 0) ctx.timer_service().register_processing_time_timer(1500);
      out.collect("record " + std::to_string(v));
    }
    void on_timer(Timestamp t, OnTimerContext&, Collector<std::string>& out) override {
      out.collect("timer " + std::to_string(t));
    }
  };
  testing::TempDir dir;
  ManualClock clock(0);
  auto more = std::make_shared<std::atomic<bool>>(false);
  struct Lines {
    std::mutex mu;
    std::vector<std::string> v;
  };
  auto build = [&](StreamExecutionEnvironment& env, const std::shared_ptr<Lines>& lines) {
    env.set_parallelism(1).set_clock(&clock);
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    env.add_source<int64_t>([more] { return std::make_unique<TwoParts>(more); }, "two parts")
        .key_by([](const int64_t&) { return 0; })
        .process(TimerOnFirst())
        .add_sink([lines](std::string&& s) {
          std::lock_guard<std::mutex> lock(lines->mu);
          lines->v.push_back(std::move(s));
        });
  };
  std::string path;
  {
    auto lines = std::make_shared<Lines>();
    StreamExecutionEnvironment env;
    build(env, lines);
    JobClient client = env.execute_async("first");
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(lines->mu);
        if (lines->v.size() == 10) break;
      }
      ASSERT_LT(std::chrono::steady_clock::now(), limit) << "the first ten records never came";
      std::this_thread::yield();
    }
    absl::StatusOr<std::string> sp = client.stop_with_savepoint(dir.Path("sp"), /*drain=*/true);
    ASSERT_TRUE(sp.ok()) << sp.status();
    path = *sp;
    const JobResult r = client.wait();
    ASSERT_TRUE(r.ok()) << r.status;
    std::lock_guard<std::mutex> lock(lines->mu);
    EXPECT_EQ(lines->v.size(), 10u) << "the timer (at 1500) was not due at the drain";
  }
  more->store(true);  // the source would read 10-19 now
  clock.Set(5000);    // and the timer at 1500 is due
  auto lines = std::make_shared<Lines>();
  StreamExecutionEnvironment env;
  build(env, lines);
  env.restore_from(path);
  const JobResult r = env.execute("restored from the drained savepoint");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.restored_path, path);
  EXPECT_TRUE(lines->v.empty()) << lines->v.front() << " (of " << lines->v.size() << ")";
  int64_t read = 0;
  for (const auto& m : r.metrics)
    if (m.task_name.find("two parts") != std::string::npos) read += m.records_in;
  EXPECT_EQ(read, 0);
}

TEST(Savepoint, AChangedJobRestoresByUidNewOperatorsStartEmptyRemovedOnesAreRefused) {
  const int64_t n = 200'000;
  testing::TempDir dir;
  const JobShape shape;
  const std::vector<std::string> expected = Reference(dir.Path("ref"), n, shape);
  const std::string out = dir.Path("out");
  std::string savepoint;
  int64_t before_total = 0;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    auto progress = std::make_shared<Progress>();
    JobShape paced = shape;
    paced.rate = 60'000.0;
    BuildJob(env, out, n, paced, progress);
    JobClient client = env.execute_async("v1");
    ASSERT_TRUE(progress->WaitFor(300));
    absl::StatusOr<std::string> path = client.stop_with_savepoint(dir.Path("sp"));
    ASSERT_TRUE(path.ok()) << path.status();
    savepoint = *path;
    JobResult r = client.wait();
    ASSERT_TRUE(r.ok()) << r.status;
    int hidden = 0;
    before_total = static_cast<int64_t>(testing::CommittedLines(out, &hidden).size());
  }
  ASSERT_GT(before_total, 0);

  // The window sum and its sink removed: their state would be lost.
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), dir.Path("chk-removed")).restore_from(savepoint);
    JobShape removed = shape;
    removed.without_sums = true;
    removed.new_counts = true;
    BuildJob(env, dir.Path("out-removed"), n, removed);
    JobResult r = env.execute("v3");
    ASSERT_FALSE(r.ok());
    const std::string msg(r.status.message());
    EXPECT_NE(msg.find("savepoint"), std::string::npos) << msg;
    EXPECT_NE(msg.find("its task 'Sums' (uids sums) is not in the job"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--allow-non-restored-state"), std::string::npos) << msg;
    // Nothing was written: the job did not start.
    int hidden = 0;
    EXPECT_TRUE(testing::CommittedLines(dir.Path("out-removed") + "-counts", &hidden).empty());
  }
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), dir.Path("chk-removed2"))
        .restore_from(savepoint)
        .set_allow_non_restored_state();
    JobShape removed = shape;
    removed.without_sums = true;
    removed.new_counts = true;
    BuildJob(env, dir.Path("out-removed2"), n, removed);
    JobResult r = env.execute("v3 allowed");
    ASSERT_TRUE(r.ok()) << r.status;
    bool said = false;
    for (const std::string& line : r.checkpoints.notices)
      if (line.find("'Sums' (uids sums) is not in the job: its state was not restored") !=
          std::string::npos)
        said = true;
    EXPECT_TRUE(said) << "the skipped state is named in the notices";
  }

  // A new operator (uids "ones", "counts", "counts-sink") beside the old
  // ones: the old ones restore, the new ones start empty.
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk-new")).restore_from(savepoint);
  JobShape added = shape;
  added.new_counts = true;
  BuildJob(env, out, n, added);
  JobResult r = env.execute("v2");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  std::sort(got.begin(), got.end());
  std::vector<std::string> want = expected;
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want) << "the restored operators go on exactly";
  // The new count started empty: it saw only the records after the
  // savepoint, fewer than n.
  const int64_t counted = TotalOfSums(testing::CommittedLines(out + "-counts", &hidden));
  EXPECT_GT(counted, 0);
  EXPECT_LT(counted, n);
}

// A savepoint kept inside the checkpoint directory: retention (newest 1)
// neither deletes it nor counts it, the stray scan does not name it, and it
// loads as written.
TEST(SavepointStorage, RetentionAndTheStrayScanLeaveASavepointInTheCheckpointDirectoryAlone) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  internal::CheckpointStorage storage(chk, /*retain=*/1);
  const std::string sp = (fs::path(chk) / "savepoint-2-abcdef").string();
  const internal::CheckpointStorage savepoint = internal::CheckpointStorage::ForSavepoint(sp);
  absl::StatusOr<internal::StateFileInfo> f = savepoint.WriteState(2, "0-0.state", "state");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_TRUE(savepoint.Commit(2, {{"type", "savepoint"}}, {*f}).ok());
  for (int64_t id : {1, 3, 4}) ASSERT_TRUE(storage.Commit(id, {}, {}).ok());
  EXPECT_EQ(storage.ListCommittedIds(), std::vector<int64_t>{4});
  EXPECT_TRUE(storage.StrayEntries().empty());
  absl::StatusOr<internal::LoadedCheckpoint> loaded = savepoint.Load(sp);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 2);
  EXPECT_EQ(loaded->metadata["type"], "savepoint");
  EXPECT_EQ(loaded->states["0-0.state"], "state");
  // Committing it again is refused: a savepoint is never overwritten.
  EXPECT_EQ(savepoint.Commit(2, {}, {*f}).code(), absl::StatusCode::kAlreadyExists);
}

// A job that fails while its savepoint is taken ends the savepoint at once
// with the job's error: the caller (here the thread that would call wait())
// does not wait for the savepoint's timeout.  Before, it waited the whole
// timeout and said "not complete within the timeout".
TEST(Savepoint, AJobFailingDuringItsSavepointFailsTheSavepointAtOnceWithTheCause) {
  for (const bool stop : {false, true}) {
    testing::TempDir dir;
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    auto progress = std::make_shared<Progress>();
    env.add_source<int64_t>(
           [] { return std::make_unique<testing::FailsInSnapshot>([] { return true; }); }, "fails")
        .map([progress](const int64_t& v) {
          progress->Add();
          return v;
        })
        .add_sink([](int64_t&&) {});
    JobClient client = env.execute_async("fails in its savepoint");
    ASSERT_TRUE(progress->WaitFor(10));
    // A timeout far beyond the test's: the failure, not the timeout, ends it.
    const Duration timeout(3'600'000);
    absl::StatusOr<std::string> path =
        stop ? client.stop_with_savepoint(dir.Path("sp"), false, timeout)
             : client.trigger_savepoint(dir.Path("sp"), timeout);
    ASSERT_FALSE(path.ok());
    EXPECT_EQ(path.status().code(), absl::StatusCode::kAborted) << path.status();
    EXPECT_NE(std::string(path.status().message())
                  .find("savepoint: the job failed before it was complete: "),
              std::string::npos)
        << path.status();
    EXPECT_NE(std::string(path.status().message()).find("snapshot failed on purpose"),
              std::string::npos)
        << path.status();
    JobResult r = client.wait();
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(r.checkpoints.stopped_with_savepoint.empty());
    std::error_code ec;
    EXPECT_TRUE(!fs::exists(dir.Path("sp"), ec) || fs::is_empty(dir.Path("sp"), ec));
  }
}

TEST(Savepoint, NeedsCheckpointing) {
  testing::TempDir dir;
  StreamExecutionEnvironment env;
  JobShape shape;
  BuildJob(env, dir.Path("out"), 1000, shape);
  JobClient client = env.execute_async("no checkpointing");
  absl::StatusOr<std::string> path = client.trigger_savepoint(dir.Path("sp"));
  EXPECT_EQ(path.status().code(), absl::StatusCode::kFailedPrecondition) << path.status();
  EXPECT_NE(std::string(path.status().message()).find("no checkpointing"), std::string::npos);
  ASSERT_TRUE(client.wait().ok());
  EXPECT_FALSE(fs::exists(dir.Path("sp")));
}

// Passes records on; fails its task when it hears that checkpoint
// `fail_at_or_after` (or a later one) is complete.
class FailsWhenTold final : public OneInputOperator<int64_t, int64_t> {
 public:
  void ProcessElement(int64_t&& v, Timestamp ts) override { output().Collect(std::move(v), ts); }
  void NotifyCheckpointComplete(int64_t) override {
    throw std::runtime_error("failure after the savepoint completed");
  }
};

// A paced generator that never ends, then an operator failing when it hears
// of a completed checkpoint.
void BuildFailingAfterCompletion(StreamExecutionEnvironment& env) {
  env.set_parallelism(1);
  env.from_generator<int64_t>([](int64_t i) { return i; }, INT64_MAX, 2000.0)
      .transform<int64_t>("Fails when told", [] { return std::make_unique<FailsWhenTold>(); })
      .add_sink([](int64_t&&) {});
}

// As Flink's StopWithSavepointStoppingException: the savepoint is complete
// but the job failed before it stopped, so the caller is not told it
// stopped (it was told OK while the job failed, or restarted and ran on).
TEST(Savepoint, StopWithSavepointSaysSoWhenTheJobFailsBeforeItStops) {
  testing::TempDir dir;
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk"));
  BuildFailingAfterCompletion(env);
  JobClient client = env.execute_async("fails while stopping");
  absl::StatusOr<std::string> sp = client.stop_with_savepoint(dir.Path("sp"));
  ASSERT_FALSE(sp.ok());
  const std::string message(sp.status().message());
  EXPECT_NE(message.find("is complete, but the job failed before it stopped"), std::string::npos)
      << message;
  EXPECT_NE(message.find("failure after the savepoint completed"), std::string::npos) << message;
  JobResult r = client.wait();
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.checkpoints.stopped_with_savepoint.empty());
}

// After cancel() a savepoint is refused at once (Flink:
// NOT_ALL_REQUIRED_TASKS_RUNNING); it waited out its timeout (10 min).
TEST(Savepoint, ASavepointAfterCancelIsRefusedAtOnce) {
  testing::TempDir dir;
  testing::TempDir out;
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk"));
  JobShape paced;
  paced.rate = 1000.0;
  BuildJob(env, out.Path("out"), 1'000'000, paced);
  JobClient client = env.execute_async("cancelled");
  client.cancel();
  for (bool stop : {false, true}) {
    absl::StatusOr<std::string> sp =
        stop ? client.stop_with_savepoint(dir.Path("sp"), false, std::chrono::seconds(30))
             : client.trigger_savepoint(dir.Path("sp"), std::chrono::seconds(30));
    EXPECT_EQ(sp.status().code(), absl::StatusCode::kFailedPrecondition) << sp.status();
    EXPECT_NE(std::string(sp.status().message()).find("not all tasks are running"),
              std::string::npos)
        << sp.status();
  }
  EXPECT_TRUE(absl::IsCancelled(client.wait().status));
}

// wait() from two threads at once, and again: one result for all (the
// second call wrote a broken "final checkpoint", two at once hung).
TEST(JobClientWait, AnyThreadAnyNumberOfTimesTheSameResult) {
  for (int rep = 0; rep < testing::StressIterations(20); ++rep) {
    testing::TempDir dir;
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), dir.Path("chk"));
    env.from_generator<int64_t>([](int64_t i) { return i; }, 2000)
        .key_by([](const int64_t& v) { return v % 3; })
        .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
        .add_sink([](int64_t&&) {});
    JobClient client = env.execute_async("waited twice");
    JobResult a, b;
    std::thread other([&] { b = client.wait(); });
    a = client.wait();
    other.join();
    const JobResult c = client.wait();
    ASSERT_TRUE(a.ok()) << a.status;
    EXPECT_TRUE(b.ok()) << b.status;
    EXPECT_TRUE(c.ok()) << c.status;
    EXPECT_EQ(a.checkpoints.completed, 1);  // the final checkpoint, once
    EXPECT_EQ(c.checkpoints.completed, 1);
    EXPECT_EQ(c.checkpoints.last_id, a.checkpoints.last_id);
    // The final checkpoint restores: nothing is left to do.
    StreamExecutionEnvironment again;
    again.set_parallelism(1);
    again.enable_checkpointing(Duration(0), dir.Path("chk")).restore_from("latest");
    again.from_generator<int64_t>([](int64_t i) { return i; }, 2000)
        .key_by([](const int64_t& v) { return v % 3; })
        .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
        .add_sink([](int64_t&&) {});
    JobResult restored = again.execute("restored");
    ASSERT_TRUE(restored.ok()) << restored.status;
    EXPECT_EQ(restored.checkpoints.restored_id, a.checkpoints.last_id);
  }
}

// JobResult::seconds is the job's time, not the caller's: a wait() called
// long after the job ended does not count the time in between (the bench's
// progress sampler, which sleeps 10 ms at a time, added up to 10 ms to a
// 0.1 s run).  Real time is the subject here: the caller sleeps on purpose.
TEST(JobClientWait, SecondsLeaveOutTheTimeBeforeTheCallerWaited) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.from_generator<int64_t>([](int64_t i) { return i; }, 1000).add_sink([](int64_t&&) {});
  const auto t0 = std::chrono::steady_clock::now();
  JobClient client = env.execute_async("waited late");
  const auto limit = t0 + std::chrono::seconds(60);
  while (!client.done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit) << "the job never ended";
    std::this_thread::yield();
  }
  const double ended = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const JobResult r = client.wait();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_GT(r.seconds, 0);
  // Ending the job after wait() (stopping its threads) takes far less than
  // the 1 s the caller slept: before the fix r.seconds was ended + 1 s.
  EXPECT_LT(r.seconds, ended + 0.5) << "ended after " << ended << " s";
}

}  // namespace
}  // namespace tidemark
