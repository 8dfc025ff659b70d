// Tests for Channel<T> (runtime/io/detail/channel.h): FIFO order, bounded capacity and
// the producer/consumer notifications, batch recycling, and a threaded
// stress test; then, through real jobs, end of input, the flush of partial
// batches (a slow stream is never held back) and backpressure.
#include "tidemark/runtime/io/detail/channel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tidemark/api/environment.h"
#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/io/detail/channel_writer.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

// A Task whose notifications are counted and can be waited for.  Mirrors what
// the executor does: Notify() on an idle task dispatches it once; the waiter
// puts it back to idle before it looks for work again, so no notification is
// lost.
class WaitableTask final : public Task, public Dispatcher {
 public:
  WaitableTask() : Task("test") { set_dispatcher(this); }
  Result RunSlice() override { return Result::kWait; }
  void Dispatch(Task*) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++dispatched_;
    notified_ = true;
    cv_.notify_all();
  }
  // Blocks until notified, then re-arms.
  void WaitNotified() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
    notified_ = false;
    state().store(kIdle, std::memory_order_release);
  }
  // Re-arms without waiting; returns whether a notification was pending.
  bool TakeNotification() {
    std::lock_guard<std::mutex> lock(mu_);
    const bool was = notified_;
    notified_ = false;
    state().store(kIdle, std::memory_order_release);
    return was;
  }
  int dispatched() {
    std::lock_guard<std::mutex> lock(mu_);
    return dispatched_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
  int dispatched_ = 0;
};

std::unique_ptr<Batch<int>> MakeBatch(Channel<int>& ch, int from, int n) {
  auto b = ch.AcquireBatch();
  for (int i = 0; i < n; ++i) b->records.push_back(Record<int>{from + i, from + i});
  return b;
}

TEST(Channel, KeepsOrderOfBatchesRecordsAndControls) {
  Channel<int> ch(16);
  for (int k = 0; k < 5; ++k) {
    auto b = ch.AcquireBatch();
    b->records.push_back(Record<int>{k * 2, 100 + k});
    b->AddControl(ControlKind::kWatermark, 10 * k);
    b->records.push_back(Record<int>{k * 2 + 1, 200 + k});
    if (k == 4) b->AddControl(ControlKind::kEndOfInput, 0);
    ch.Push(std::move(b));
  }
  EXPECT_EQ(ch.SizeApprox(), 5u);
  for (int k = 0; k < 5; ++k) {
    auto b = ch.Pop();
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->records.size(), 2u);
    EXPECT_EQ(b->records[0].value, k * 2);
    EXPECT_EQ(b->records[0].timestamp, 100 + k);
    EXPECT_EQ(b->records[1].value, k * 2 + 1);
    ASSERT_GE(b->controls.size(), 1u);
    EXPECT_EQ(b->controls[0].kind, ControlKind::kWatermark);
    EXPECT_EQ(b->controls[0].position, 1u) << "the watermark sits between the two records";
    EXPECT_EQ(b->controls[0].value, 10 * k);
    if (k == 4) {
      ASSERT_EQ(b->controls.size(), 2u);
      EXPECT_EQ(b->controls[1].kind, ControlKind::kEndOfInput);
      EXPECT_EQ(b->controls[1].position, 2u);
    }
    ch.Recycle(std::move(b));
  }
  EXPECT_EQ(ch.Pop(), nullptr);
  EXPECT_EQ(ch.SizeApprox(), 0u);
}

TEST(Channel, PushReturnsFalseAtCapacityAndProducerIsNotifiedWhenDrained) {
  Channel<int> ch(3);
  WaitableTask producer, consumer;
  ch.set_producer(&producer);
  ch.set_consumer(&consumer);
  EXPECT_EQ(ch.capacity(), 3u);
  EXPECT_TRUE(ch.HasSpace());
  EXPECT_TRUE(ch.Push(MakeBatch(ch, 0, 1)));
  EXPECT_TRUE(consumer.TakeNotification()) << "push onto an empty channel wakes the consumer";
  EXPECT_TRUE(ch.Push(MakeBatch(ch, 1, 1)));
  EXPECT_FALSE(consumer.TakeNotification()) << "no wake-up when it was not empty";
  EXPECT_FALSE(ch.Push(MakeBatch(ch, 2, 1))) << "now full";
  EXPECT_FALSE(ch.HasSpace());
  EXPECT_EQ(producer.dispatched(), 0);
  auto b = ch.Pop();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->records[0].value, 0);
  EXPECT_TRUE(producer.TakeNotification()) << "drained below capacity: producer notified";
  EXPECT_EQ(producer.dispatched(), 1);
  EXPECT_TRUE(ch.HasSpace());
  ch.Pop();
  EXPECT_FALSE(producer.TakeNotification()) << "only one notification per wait";
}

TEST(Channel, HasSpaceRegistersTheProducer) {
  Channel<int> ch(1);
  WaitableTask producer;
  ch.set_producer(&producer);
  EXPECT_FALSE(ch.Push(MakeBatch(ch, 0, 1)));
  producer.TakeNotification();
  EXPECT_FALSE(ch.HasSpace());
  ch.Pop();
  EXPECT_TRUE(producer.TakeNotification());
}

TEST(Channel, ZeroCapacityMeansOne) {
  Channel<int> ch(0);
  EXPECT_EQ(ch.capacity(), 1u);
  EXPECT_FALSE(ch.Push(MakeBatch(ch, 0, 1)));
}

TEST(Channel, BatchesAreRecycled) {
  Channel<int> ch(2);
  auto b = MakeBatch(ch, 0, 100);
  Batch<int>* raw = b.get();
  b->AddControl(ControlKind::kWatermark, 5);
  ch.Push(std::move(b));
  auto got = ch.Pop();
  ASSERT_EQ(got.get(), raw);
  const size_t cap = got->records.capacity();
  ch.Recycle(std::move(got));
  auto again = ch.AcquireBatch();
  EXPECT_EQ(again.get(), raw) << "the emptied batch is reused";
  EXPECT_TRUE(again->empty());
  EXPECT_EQ(again->records.capacity(), cap) << "its memory is kept";
  // the free list is bounded
  std::vector<std::unique_ptr<Batch<int>>> many;
  for (int i = 0; i < 10; ++i) many.push_back(std::make_unique<Batch<int>>());
  for (auto& m : many) ch.Recycle(std::move(m));
  int reused = 0;
  for (int i = 0; i < 10; ++i) {
    auto x = ch.AcquireBatch();
    (void)x;
    ++reused;
  }
  EXPECT_EQ(reused, 10);
}

// One producer thread and one consumer thread, each sleeping on its task
// notification when it cannot go on; FIFO and no loss, many times.
TEST(Channel, ThreadedProducerConsumerKeepsFifoAndLosesNothing) {
  for (int round = 0; round < tidemark::testing::StressIterations(200); ++round) {
    const size_t capacity = 1 + round % 4;
    const int batches = 300;
    Channel<int> ch(capacity);
    WaitableTask producer, consumer;
    ch.set_producer(&producer);
    ch.set_consumer(&consumer);
    std::atomic<bool> over_capacity{false};
    std::thread prod([&] {
      int next = 0;
      for (int k = 0; k < batches; ++k) {
        const int n = 1 + (k * 7 + round) % 5;
        auto b = ch.AcquireBatch();
        ASSERT_TRUE(b->empty());
        for (int i = 0; i < n; ++i) b->records.push_back(Record<int>{next, next}), ++next;
        if (k + 1 == batches) b->AddControl(ControlKind::kEndOfInput, 0);
        const bool space = ch.Push(std::move(b));
        if (ch.SizeApprox() > capacity) over_capacity = true;
        if (!space) {
          // wait for the consumer to drain below capacity
          for (;;) {
            producer.TakeNotification();
            if (ch.HasSpace()) break;
            producer.WaitNotified();
            if (ch.HasSpace()) break;
          }
        }
      }
    });
    int expect = 0;
    bool ended = false;
    while (!ended) {
      consumer.TakeNotification();
      auto b = ch.Pop();
      if (!b) {
        consumer.WaitNotified();
        continue;
      }
      for (const auto& r : b->records) {
        ASSERT_EQ(r.value, expect) << "round " << round;
        ++expect;
      }
      for (const auto& c : b->controls) ended |= c.kind == ControlKind::kEndOfInput;
      ch.Recycle(std::move(b));
    }
    prod.join();
    EXPECT_EQ(ch.Pop(), nullptr);
    EXPECT_FALSE(over_capacity.load()) << "a producer that waits never exceeds capacity";
    int total = 0;
    for (int k = 0; k < batches; ++k) total += 1 + (k * 7 + round) % 5;
    ASSERT_EQ(expect, total);
  }
}

// ---------------------------------------------------------------------------
// Through real jobs.

TEST(ChannelJob, EndOfInputDeliversEverything) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(20); ++rep) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2).set_batch_size(7).set_channel_capacity(2);
    auto out = env.from_generator<int64_t>([](int64_t i) { return i; }, 5000)
                   .rebalance()
                   .map([](const int64_t& v) { return v * 2; })
                   .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    std::vector<int64_t> v = out->values();
    std::sort(v.begin(), v.end());
    ASSERT_EQ(v.size(), 5000u);
    for (int64_t i = 0; i < 5000; ++i) ASSERT_EQ(v[i], 2 * i);
  }
}

// A source that emits one record, then polls (without ending) until the sink
// has seen it.  If the runtime held the partly filled batch back, the sink
// would never see it; the source gives up after 10 s and fails the job.
struct Shared {
  std::atomic<bool> seen{false};
};

class OneThenWaitSource final : public Source<int> {
 public:
  OneThenWaitSource(std::shared_ptr<Shared> s, bool busy) : s_(std::move(s)), busy_(busy) {}
  void Open(const SourceContext& ctx) override { clock_ = ctx.clock; }
  PollStatus Poll(SourceOutput<int>& out, size_t) override {
    if (!emitted_) {
      emitted_ = true;
      start_ = clock_->NowMillis();
      out.CollectWithTimestamp(42, 1);
    }
    if (s_->seen.load()) return PollStatus::kEndOfInput;
    if (clock_->NowMillis() - start_ > 10000)
      throw std::runtime_error("record never reached the sink");
    // busy: keep the task running (only the buffer timeout can flush);
    // otherwise: nothing available, poll again in 2 ms (flush when idle).
    if (busy_) return PollStatus::kMoreAvailable;
    retry_ = clock_->NowMillis() + 2;
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return retry_; }

 private:
  std::shared_ptr<Shared> s_;
  bool busy_;
  bool emitted_ = false;
  const Clock* clock_ = nullptr;
  Timestamp start_ = 0;
  Timestamp retry_ = kMaxTimestamp;
};

void RunSlowStream(bool busy) {
  auto shared = std::make_shared<Shared>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2).set_buffer_timeout(10ms);
  std::vector<int> got;
  env.add_source<int>([shared, busy] { return std::make_unique<OneThenWaitSource>(shared, busy); },
                      "one then wait")
      .rebalance()  // a real channel, not a chain
      .add_sink([shared](int v) {
        EXPECT_EQ(v, 42);
        shared->seen.store(true);
      });
  JobResult r = env.execute();
  EXPECT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(shared->seen.load());
}

TEST(ChannelJob, PartialBatchIsFlushedWhenTheSourceHasNothing) { RunSlowStream(false); }
TEST(ChannelJob, PartialBatchIsFlushedAfterTheBufferTimeoutWhileBusy) { RunSlowStream(true); }

// A fast source and a slow sink: the source is never far ahead of the sink
// (memory stays bounded).  The generator emits each record itself
// (Collect), or returns it to be made in the source driver's run
// (CollectInPlace, which asks for back-pressure when the run is handed on:
// here at the end of each poll, whose budget is the batch size).
void CheckBackpressureBoundsHowFarTheProducerRunsAhead(bool in_place) {
  constexpr int kBatch = 16, kCapacity = 2, kCount = 20000;
  auto consumed = std::make_shared<std::atomic<int64_t>>(0);
  auto max_ahead = std::make_shared<std::atomic<int64_t>>(0);
  auto note_ahead = [consumed, max_ahead](int64_t i) {
    const int64_t ahead = i - consumed->load();
    if (ahead > max_ahead->load()) max_ahead->store(ahead);
  };
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2).set_batch_size(kBatch).set_channel_capacity(
      kCapacity);
  DataStream<int64_t> records = in_place ? env.from_generator<int64_t>(
                                               [note_ahead](int64_t i) {
                                                 note_ahead(i);
                                                 return i;
                                               },
                                               kCount)
                                         : env.from_generator<int64_t>(
                                               [note_ahead](int64_t i, SourceOutput<int64_t>& out) {
                                                 note_ahead(i);
                                                 out.Collect(int64_t{i});
                                               },
                                               kCount);
  records.rebalance().add_sink([consumed](int64_t v) {
    // some work per record, so the sink is the slow side
    volatile int64_t x = 0;
    for (int k = 0; k < 2000; ++k) x = x + k;
    EXPECT_EQ(v, consumed->load());
    consumed->fetch_add(1);
  });
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(consumed->load(), kCount);
  // queued batches (capacity, plus one step of overshoot), the batch being
  // filled, the batch being consumed, and one source poll
  const int64_t bound = (kCapacity + 3) * kBatch + kBatch;
  EXPECT_LE(max_ahead->load(), bound);
  EXPECT_GT(max_ahead->load(), 0);
}

TEST(ChannelJob, BackpressureBoundsHowFarTheProducerRunsAhead) {
  CheckBackpressureBoundsHowFarTheProducerRunsAhead(false);
}
TEST(ChannelJob, BackpressureBoundsHowFarAGeneratorOfValuesRunsAhead) {
  CheckBackpressureBoundsHowFarTheProducerRunsAhead(true);
}

// A key_by writer's run (ChannelWriter::CollectBatch): each record goes to
// the channel that owns its key's key group, in the run's order, with its
// timestamp, in batches of at most the batch size, and is counted once; each
// partly filled batch is as old as the slice that started it (the buffer
// timeout flushes it then, not before).  Over the loop that keeps each
// channel's batch at hand (2, 3 and 16 channels) and past its bound (17
// channels, one record at a time).
TEST(ChannelWriter, ARunGoesToItsKeysOwnersInOrderInBatchesOfTheBatchSize) {
  constexpr int kMaxParallelism = 128;
  constexpr int64_t kRecords = 200;
  constexpr size_t kBatch = 3;
  auto key = [](const int64_t& v) { return v % 50; };
  for (int n : {2, 3, 16, 17}) {
    SCOPED_TRACE(n);
    std::vector<std::unique_ptr<Channel<int64_t>>> channels;
    std::vector<ChannelBase*> bases;
    for (int c = 0; c < n; ++c) {
      channels.push_back(std::make_unique<Channel<int64_t>>(1000));
      bases.push_back(channels.back().get());
    }
    WriterSignals signals;
    signals.now = SteadyTime(std::chrono::seconds(100));
    SubtaskMetrics metrics("writer", 0, 1, 0);
    ChannelWriter<int64_t> writer(
        bases,
        std::make_unique<KeyGroupPartitioner<int64_t, decltype(key)>>(key, n, kMaxParallelism),
        WriterRoute{}, kBatch, &signals, &metrics, nullptr, false);
    std::vector<Record<int64_t>> run;
    for (int64_t i = 0; i < kRecords; ++i) run.push_back(Record<int64_t>{i, 1000 + i});
    writer.CollectBatch(std::span<Record<int64_t>>(run));
    // Full batches went at once; the partly filled ones started at `now`.
    auto drain = [&](size_t c) {
      std::vector<int64_t> got;
      while (std::unique_ptr<Batch<int64_t>> b = channels[c]->Pop()) {
        EXPECT_LE(b->records.size(), kBatch);
        for (const Record<int64_t>& r : b->records) {
          got.push_back(r.value);
          EXPECT_EQ(r.timestamp, 1000 + r.value);
        }
      }
      return got;
    };
    std::vector<std::vector<int64_t>> got(static_cast<size_t>(n));
    writer.FlushOlderThan(signals.now - std::chrono::nanoseconds(1));
    for (size_t c = 0; c < got.size(); ++c) got[c] = drain(c);
    writer.FlushOlderThan(signals.now);
    EXPECT_EQ(metrics.records_out.Get(), kRecords);
    int64_t total = 0;
    for (int c = 0; c < n; ++c) {
      const auto uc = static_cast<size_t>(c);
      std::vector<int64_t> expected;
      for (int64_t i = 0; i < kRecords; ++i)
        if (SubtaskForKey(key(i), kMaxParallelism, n) == c) expected.push_back(i);
      EXPECT_EQ(got[uc].size(), expected.size() / kBatch * kBatch)
          << "channel " << c << ": only the full batches before the timeout";
      std::vector<int64_t> rest = drain(uc);
      got[uc].insert(got[uc].end(), rest.begin(), rest.end());
      EXPECT_EQ(got[uc], expected) << "channel " << c;
      total += static_cast<int64_t>(got[uc].size());
    }
    EXPECT_EQ(total, kRecords);
  }
}

}  // namespace
}  // namespace tidemark
