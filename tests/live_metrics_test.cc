// Issue 27 item 1: what the live view reads from a running job besides
// watermarks: how full each input channel is (back-pressure,
// SubtaskMetricsSnapshot::channel_fill) and the checkpoint in progress
// (CheckpointSummary::in_progress_id).  A sink blocked on a gate holds its
// input: the generator fills the channel between them and waits; the
// metrics say the channel is full.  A checkpoint triggered meanwhile cannot
// complete (the blocked sink cannot take its barrier): the summary says it
// is in progress; once the gate opens it completes, with its time.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using namespace std::chrono_literals;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(LiveMetrics, AFullChannelAndACheckpointInProgressWhileTheConsumerIsBlocked) {
  auto gate = std::make_shared<std::atomic<bool>>(false);     // true: the sink goes on
  auto blocked = std::make_shared<std::atomic<bool>>(false);  // the sink waits at the gate
  struct Open {
    std::shared_ptr<std::atomic<bool>> gate;
    ~Open() {
      gate->store(true);
      gate->notify_all();
    }
  } open_on_exit{gate};
  StreamExecutionEnvironment env;
  // The sink blocks its thread, which the worker pool's tasks must not do
  // (runtime/exec/worker_pool.h: a task queued on the blocked worker waits
  // for it; with the pool the source stalled at one batch in about one run
  // in ten): oneTBB's arena lets any free worker run the source.
  env.set_parallelism(1)
      .set_worker_threads(2)
      .set_batch_size(4)
      .set_channel_capacity(2)
      .use_tbb_arena_scheduler();
  env.enable_checkpointing(Duration(0));  // in memory, only when triggered
  env.from_generator<int64_t>([](int64_t i) { return i; }, 20'000)
      .rebalance()
      .add_sink(
          [gate, blocked](int64_t&&, Timestamp) {
            blocked->store(true);
            gate->wait(false);
          },
          "Blocked");
  JobClient client = env.execute_async("blocked");

  // The sink's one input channel fills up (capacity 2 batches) once the
  // sink waits at the gate: it pops nothing more from then on.
  auto sink_fill = [&] {
    for (const SubtaskMetricsSnapshot& m : client.metrics())
      if (m.task_name == "Blocked" && m.channel_fill.size() == 1) return m.channel_fill[0];
    return -1.0;
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!(blocked->load() && sink_fill() >= 1.0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);  // polling for the condition
  EXPECT_GE(sink_fill(), 1.0) << "the blocked sink's input channel never filled";
  for (const SubtaskMetricsSnapshot& m : client.metrics()) {
    if (m.task_name != "Blocked") EXPECT_TRUE(m.channel_fill.empty()) << m.task_name;
  }

  const int64_t id = client.trigger_checkpoint();
  ASSERT_GT(id, 0);
  CheckpointSummary c = client.checkpoints();
  EXPECT_EQ(c.in_progress_id, id);
  EXPECT_GE(c.in_progress_ms, 0.0);
  EXPECT_EQ(c.completed, 0);
  EXPECT_EQ(c.last_id, -1);

  const int64_t before = UnixMs();
  gate->store(true);
  gate->notify_all();
  ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
  const int64_t after = UnixMs();
  c = client.checkpoints();
  EXPECT_EQ(c.last_id, id);
  EXPECT_GE(c.last_completed_unix_ms, before);
  EXPECT_LE(c.last_completed_unix_ms, after);
  EXPECT_GE(c.last_alignment_ms, 0.0);
  EXPECT_LE(c.last_alignment_ms, c.max_alignment_ms);
  EXPECT_NE(c.in_progress_id, id);

  bool hung = false;
  JobResult r = testing::WaitWithWatchdog(client, &hung);
  ASSERT_FALSE(hung);
  EXPECT_TRUE(r.ok()) << r.status;
  for (const SubtaskMetricsSnapshot& m : r.metrics) {
    if (m.task_name == "Blocked") EXPECT_EQ(m.channel_fill, std::vector<double>{0.0});
  }
  EXPECT_EQ(r.checkpoints.in_progress_id, -1);
}

}  // namespace
}  // namespace tidemark
