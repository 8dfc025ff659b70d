// tests/rescale_test.cc
//
// Restoring at another parallelism (issue 13, docs/checkpoints.md
// "Rescaling"): a keyed tumbling-window job writing to the exactly-once file
// sink is cancelled after checkpoints and restored with the window (and the
// sink chained to it) at another parallelism, 2 -> 3 and 3 -> 1; the
// committed output of both runs together equals that of a run without
// failure, exactly once, and no hidden file is left.  The window state moves
// by key groups, the sink's pending parts round robin (the new subtask that
// takes an old one's parts commits them).  Records are in order per source
// subtask, so none is late whenever the watermarks arrive, and the result
// does not depend on timing.  A source task cannot be rescaled: refused with
// a clear error.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/operators/file_sink.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using Rec = std::tuple<int64_t, int64_t, int64_t>;  // key, timestamp, value

using testing::Progress;

// generator -> timestamps -> key_by -> tumbling 1 s sum (p = window_p) ->
// file sink (chained to the window): "key,window,sum" lines.
void BuildWindowJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n, double rate,
                    int source_p, int window_p, std::shared_ptr<Progress> progress = nullptr) {
  env.from_generator<Rec>(
         [](int64_t i) {
           return Rec{i % 37, i / 4, 1 + i % 5};
         },
         n, rate)
      .set_parallelism(source_p)
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Rec>::for_bounded_out_of_orderness(Duration(20))
              .with_timestamp_assigner([](const Rec& r, Timestamp) { return std::get<1>(r); }))
      .set_parallelism(source_p)
      .key_by([](const Rec& r) { return std::get<0>(r); })
      .window(TumblingEventTimeWindows::of(Duration(1000)))
      .reduce([](const Rec& a, const Rec& b) {
        return Rec{std::get<0>(a), std::min(std::get<1>(a), std::get<1>(b)),
                   std::get<2>(a) + std::get<2>(b)};
      })
      .name("Sums")
      .set_parallelism(window_p)
      .sink_to_files(out,
                     [progress](const Rec& r) {
                       if (progress) progress->Add();
                       return absl::StrCat(std::get<0>(r), ",", std::get<1>(r) / 1000, ",",
                                           std::get<2>(r));
                     })
      .set_parallelism(window_p);
}

struct RescaleCase {
  int from;
  int to;
};

class Rescale : public ::testing::TestWithParam<RescaleCase> {};

TEST_P(Rescale, KeyedWindowJobRestoredAtAnotherParallelismCommitsExactlyOnce) {
  const RescaleCase c = GetParam();
  const int64_t n = 240'000;
  testing::TempDir dir;
  // The reference: a run without failure at the original parallelism.
  std::vector<std::string> expected;
  {
    StreamExecutionEnvironment env;
    BuildWindowJob(env, dir.Path("ref"), n, 0, 2, c.from);
    JobResult r = env.execute("reference");
    ASSERT_TRUE(r.ok()) << r.status;
    int hidden = 0;
    expected = testing::CommittedLines(dir.Path("ref"), &hidden);
    ASSERT_GT(expected.size(), 1000u);
    ASSERT_EQ(hidden, 0);
  }
  const int reps = testing::StressIterations(2);
  for (int rep = 0; rep < reps; ++rep) {
    const std::string out = dir.Path(absl::StrCat("out", rep));
    const std::string chk = dir.Path(absl::StrCat("chk", rep));
    {
      StreamExecutionEnvironment env;
      env.enable_checkpointing(Duration(0), chk);
      auto progress = std::make_shared<Progress>();
      BuildWindowJob(env, out, n, 50'000.0, 2, c.from, progress);
      JobClient client = env.execute_async("before");
      for (int k = 0; k < 2 + rep; ++k) {
        // Windows have fired since the last checkpoint: parts to commit.
        ASSERT_NO_FATAL_FAILURE(testing::CheckpointAfter(client, *progress, 300 * (k + 1)));
      }
      client.cancel();
      JobResult r = client.wait();
      ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
    }
    int hidden = 0;
    const size_t before = testing::CommittedLines(out, &hidden).size();
    EXPECT_LT(before, expected.size()) << "the first run was to stop early";
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk).restore_from("latest");
    BuildWindowJob(env, out, n, 0, 2, c.to);
    JobResult r = env.execute("after");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_GE(r.checkpoints.restored_id, 2 + rep);
    const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
    EXPECT_EQ(hidden, 0);
    ASSERT_EQ(got.size(), expected.size()) << "rep " << rep << ", " << before << " before";
    EXPECT_TRUE(got == expected) << "rep " << rep;
  }
}

INSTANTIATE_TEST_SUITE_P(Parallelism, Rescale,
                         ::testing::Values(RescaleCase{2, 3}, RescaleCase{3, 1}, RescaleCase{1, 4}),
                         [](const auto& info) {
                           return absl::StrCat("From", info.param.from, "To", info.param.to);
                         });

// The sink's part of it, without timing: old subtask 2's state, taken with
// a part pending for checkpoint 5, goes to new subtask 0 (2 % 1), which
// commits that part under old subtask 2's name and deletes 2's other hidden
// files (a part pending for a later checkpoint that never completed, one in
// progress).
TEST(RescaleFileSink, NewSubtaskCommitsTheOldSubtasksPendingPartsAndDeletesItsHiddenFiles) {
  testing::TempDir dir;
  const std::string out = dir.Path("out");
  std::string state;
  {
    internal::TwoPhaseCommitFiles old2;
    old2.Open(out, "part", 2, /*checkpointing=*/true);
    old2.Write("a");
    old2.Write("b");
    old2.PreCommit(5);
    internal::StateWriter w;
    old2.Snapshot(w);
    state = w.Release();
    old2.Write("c");
    old2.PreCommit(6);
    old2.Write("d");
  }  // the old run dies here
  int hidden = 0;
  EXPECT_TRUE(testing::CommittedLines(out, &hidden).empty());
  EXPECT_EQ(hidden, 3);
  internal::TwoPhaseCommitFiles new0;
  new0.Open(out, "part", 0, /*checkpointing=*/true);
  internal::StateReader r(state);
  new0.Restore(r);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::CommittedLines(out, &hidden), std::vector<std::string>({"a", "b"}));
  EXPECT_EQ(hidden, 0);
  EXPECT_TRUE(std::filesystem::exists(out + "/part-2-0"));
  // The new subtask's own parts are named after it.
  new0.Write("e");
  new0.Finish();
  new0.CommitFinal();
  EXPECT_EQ(testing::CommittedLines(out, &hidden), std::vector<std::string>({"a", "b", "e"}));
  EXPECT_TRUE(std::filesystem::exists(out + "/part-0-0"));
}

// Issue 23 item 2, without timing: restored from checkpoint 5 after
// checkpoint 6 had committed a part (checkpoint 6 damaged, say), the sink
// rolls that part back: its records come again in the replay.  The same for
// an old subtask's state handed to another subtask (a rescale), and part
// numbers are never reused.
TEST(RescaleFileSink, RestoreFromAnOlderCheckpointRollsBackWhatLaterOnesCommitted) {
  testing::TempDir dir;
  const std::string out = dir.Path("out");
  std::string state5;
  {
    internal::TwoPhaseCommitFiles old2;
    old2.Open(out, "part", 2, /*checkpointing=*/true);
    old2.Write("a");
    old2.PreCommit(5);
    internal::StateWriter w;
    old2.Snapshot(w);
    state5 = w.Release();
    old2.Commit(5);
    old2.Write("b");
    old2.PreCommit(6);
    old2.Commit(6);  // part-2-1: committed by checkpoint 6
    old2.Write("c");
    old2.PreCommit(7);  // pending, never committed
    old2.Write("d");    // in progress
  }
  int hidden = 0;
  EXPECT_EQ(testing::CommittedLines(out, &hidden), std::vector<std::string>({"a", "b"}));
  internal::TwoPhaseCommitFiles new0;
  new0.Open(out, "part", 0, /*checkpointing=*/true);
  internal::StateReader r(state5);
  new0.Restore(r);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(testing::CommittedLines(out, &hidden), std::vector<std::string>({"a"}));
  EXPECT_EQ(hidden, 0);
  EXPECT_EQ(new0.rolled_back(), std::vector<std::string>({out + "/part-2-1"}));

  // Its own subtask: the same, and the replay's parts get new numbers.
  std::string own5;
  {
    internal::TwoPhaseCommitFiles s0;
    s0.Open(dir.Path("own"), "part", 0, true);
    s0.Write("x");
    s0.PreCommit(5);
    internal::StateWriter w;
    s0.Snapshot(w);
    own5 = w.Release();
    s0.Commit(5);
    s0.Write("y");
    s0.PreCommit(6);
    s0.Commit(6);
  }
  internal::TwoPhaseCommitFiles again;
  again.Open(dir.Path("own"), "part", 0, true);
  internal::StateReader r2(own5);
  again.Restore(r2);
  ASSERT_TRUE(r2.ok()) << r2.error();
  EXPECT_EQ(again.rolled_back(), std::vector<std::string>({dir.Path("own") + "/part-0-1"}));
  again.Write("y");  // replayed
  again.Finish();
  again.CommitFinal();
  EXPECT_EQ(testing::CommittedLines(dir.Path("own"), &hidden),
            std::vector<std::string>({"x", "y"}));
  EXPECT_TRUE(std::filesystem::exists(dir.Path("own") + "/part-0-2"));
  EXPECT_FALSE(std::filesystem::exists(dir.Path("own") + "/part-0-1"));
}

// The window job at source and window parallelism 2, cancelled once one
// checkpoint is complete in dir/chk.
void TakeOneCheckpointAtParallelismTwo(const testing::TempDir& dir) {
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk"));
  BuildWindowJob(env, dir.Path("out"), 400'000, 100'000.0, 2, 2);
  JobClient client = env.execute_async("before");
  const int64_t id = client.trigger_checkpoint();
  ASSERT_GE(id, 0);
  ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
  client.cancel();
  client.wait();
}

TEST(Rescale, SourceTaskAtAnotherParallelismIsRefusedWithAClearError) {
  testing::TempDir dir;
  TakeOneCheckpointAtParallelismTwo(dir);
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), dir.Path("chk")).restore_from("latest");
  BuildWindowJob(env, dir.Path("out"), 400'000, 0, 3, 2);
  JobResult r = env.execute("after");
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status.message());
  EXPECT_NE(msg.find("ran at parallelism 2, the job has 3; a source task cannot be restored"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("checkpoint "), std::string::npos) << msg;
}

TEST(Rescale, ChangedMaxParallelismIsRefused) {
  testing::TempDir dir;
  TakeOneCheckpointAtParallelismTwo(dir);
  StreamExecutionEnvironment env;
  env.set_max_parallelism(256);
  env.enable_checkpointing(Duration(0), dir.Path("chk")).restore_from("latest");
  BuildWindowJob(env, dir.Path("out"), 400'000, 0, 2, 3);
  JobResult r = env.execute("after");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("ran with max parallelism 128, the job has 256"),
            std::string::npos)
      << r.status;
}

// A non-keyed broadcast process function's state (its broadcast state) at
// another parallelism, 2 -> 3: new subtask s restores old subtask s % 2's
// copy (Flink's broadcast state repartitioning), so the third subtask knows
// the factor the rule source sent before the checkpoint, though that source
// has ended and sends nothing again.  Before, the restore was refused.
struct ScaleByRule {
  using OutputType = std::string;
  void process_element(const int64_t& v, ReadOnlyBroadcastProcessContext& ctx,
                       Collector<std::string>& out) {
    auto f = ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).get("x");
    out.collect(absl::StrCat(ctx.subtask_index(), ",", f ? v * *f : -1));
  }
  void process_broadcast_element(const int64_t& v, BroadcastProcessContext& ctx,
                                 Collector<std::string>& out) {
    ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).put("x", v);
    out.collect(absl::StrCat("rule at ", ctx.subtask_index()));
  }
};

void BuildBroadcastJob(StreamExecutionEnvironment& env, int64_t n, double rate, int p,
                       std::function<void(std::string&&)> sink) {
  env.from_generator<int64_t>([](int64_t i) { return i; }, n, rate)
      .set_parallelism(2)
      .uid("values")
      .rebalance()
      .connect(env.from_elements<int64_t>(7).uid("rules").broadcast(
          MapStateDescriptor<std::string, int64_t>("f")))
      .process(ScaleByRule())
      .uid("scale")
      .set_parallelism(p)
      .add_sink(std::move(sink))
      .uid("sink")
      .set_parallelism(p);
}

TEST(Rescale, BroadcastStateOfANonKeyedStreamGoesToEveryNewSubtask) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk);
    auto rules = std::make_shared<testing::Progress>();
    BuildBroadcastJob(env, 1'000'000, 20'000.0, 2, [rules](std::string&& line) {
      if (line.rfind("rule at ", 0) == 0) rules->Add();
    });
    JobClient client = env.execute_async("before");
    // Both subtasks hold the factor, then a checkpoint.
    ASSERT_NO_FATAL_FAILURE(testing::CheckpointAfter(client, *rules, 2));
    client.cancel();
    JobResult r = client.wait();
    ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
  }
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk).restore_from("latest");
  std::mutex mu;
  std::map<int, std::set<int64_t>> by_subtask;  // scaled values seen, per subtask
  BuildBroadcastJob(env, 1'000'000, 0, 3, [&](std::string&& line) {
    std::lock_guard<std::mutex> lock(mu);
    const size_t comma = line.find(',');
    ASSERT_NE(comma, std::string::npos) << line;
    by_subtask[std::stoi(line.substr(0, comma))].insert(std::stoll(line.substr(comma + 1)));
  });
  JobResult r = env.execute("after");
  ASSERT_TRUE(r.ok()) << r.status;
  ASSERT_EQ(by_subtask.size(), 3u);
  for (const auto& [subtask, scaled] : by_subtask) {
    ASSERT_FALSE(scaled.empty());
    EXPECT_GE(*scaled.begin(), 0) << "subtask " << subtask << " had no factor";
    EXPECT_EQ(*scaled.rbegin() % 7, 0) << "subtask " << subtask;
  }
}

}  // namespace
}  // namespace tidemark
