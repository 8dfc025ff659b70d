// sink_to with a SinkWriter of one's own (Flink's SinkWriter): one writer per
// subtask, opened with its context, every record written in order, flushed
// before each checkpoint's snapshot and once at the end of the input, closed.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

// What every writer did, by subtask.
struct Journal {
  std::mutex mu;
  std::map<int, std::vector<int64_t>> flushed;  // records, in the order flushed
  std::map<int, int> opens, closes, end_flushes, checkpoint_flushes;
  int64_t flushed_at_first_checkpoint = -1;  // records flushed in all by then
  std::atomic<int64_t> written{0};           // records handed to write()
};

// Buffers records and hands them to the journal when flushed.
class BufferingWriter final : public SinkWriter<int64_t> {
 public:
  explicit BufferingWriter(Journal* j) : j_(j) {}
  void open(const RuntimeContext& ctx) override {
    subtask_ = ctx.subtask_index();
    std::lock_guard<std::mutex> lock(j_->mu);
    ++j_->opens[subtask_];
  }
  void write(const int64_t& v, Timestamp) override {
    buffer_.push_back(v);
    j_->written.fetch_add(1, std::memory_order_relaxed);
  }
  void flush(bool end_of_input) override {
    std::lock_guard<std::mutex> lock(j_->mu);
    auto& out = j_->flushed[subtask_];
    out.insert(out.end(), buffer_.begin(), buffer_.end());
    buffer_.clear();
    ++(end_of_input ? j_->end_flushes : j_->checkpoint_flushes)[subtask_];
    if (!end_of_input && j_->flushed_at_first_checkpoint < 0)
      j_->flushed_at_first_checkpoint = static_cast<int64_t>(out.size());
  }
  void close() override {
    std::lock_guard<std::mutex> lock(j_->mu);
    ++j_->closes[subtask_];
  }

 private:
  Journal* j_;
  int subtask_ = -1;
  std::vector<int64_t> buffer_;
};

TEST(SinkWriter, EveryRecordIsWrittenInOrderAndFlushedByTheEndOnceOpenedAndClosed) {
  Journal j;
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.from_generator<int64_t>([](int64_t i) { return i; }, 10000)
      .sink_to([&j] { return std::make_unique<BufferingWriter>(&j); }, "Buffered");
  ASSERT_TRUE(env.execute("writer").ok());
  // Generator subtask s emits i % 2 == s, in order, forwarded to sink s.
  for (int s = 0; s < 2; ++s) {
    std::vector<int64_t> want;
    for (int64_t i = s; i < 10000; i += 2) want.push_back(i);
    EXPECT_EQ(j.flushed[s], want) << s;
    EXPECT_EQ(j.opens[s], 1);
    EXPECT_EQ(j.end_flushes[s], 1);
    EXPECT_EQ(j.closes[s], 1);
  }
}

TEST(SinkWriter, FlushedBeforeEachCheckpointsSnapshot) {
  Journal j;
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.enable_checkpointing(Duration(0));  // in memory, triggered below
  // 1000 records a second for about a second: checkpoints land mid-stream.
  env.from_generator<int64_t>([](int64_t i) { return i; }, 1000, 1000).sink_to([&j] {
    return std::make_unique<BufferingWriter>(&j);
  });
  JobClient job = env.execute_async("checkpointed writer");
  // Records reach the writer before the checkpoint is triggered.
  for (int waits = 0; waits < 6000 && j.written.load() < 20; ++waits)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the writer
  ASSERT_GE(j.written.load(), 20);
  int64_t id = -1;
  for (int tries = 0; tries < 200 && id < 0; ++tries) {
    id = job.trigger_checkpoint();
    if (id < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a job starting
  }
  ASSERT_GE(id, 0);
  EXPECT_TRUE(job.wait_for_checkpoint(id, Duration(10000)));
  ASSERT_TRUE(job.wait().ok());
  std::vector<int64_t> want;
  for (int64_t i = 0; i < 1000; ++i) want.push_back(i);
  EXPECT_EQ(j.flushed[0], want);
  EXPECT_GE(j.checkpoint_flushes[0], 1);
  EXPECT_EQ(j.end_flushes[0], 1);
  // The triggered checkpoint came mid-stream: what was written by then was
  // flushed before its snapshot.
  EXPECT_GT(j.flushed_at_first_checkpoint, 0);
  EXPECT_LT(j.flushed_at_first_checkpoint, 1000);
}

}  // namespace
}  // namespace tidemark
