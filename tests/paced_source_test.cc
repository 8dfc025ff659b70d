// A rate-limited source sleeps between its records: it wakes a bounded number
// of times a second whatever its rate, and uses CPU in proportion to what it
// emits.  Before, above 1 000 records/s per subtask the next-emission time
// rounded down to the current millisecond and the task yielded instead of
// sleeping, polling the source hundreds of thousands of times a second.
//
// Real time is the subject here (a pace), so the tests run on the real clock;
// they assert counts (polls of the source), never a speed, and check CPU time
// only loosely, where no sanitizer slows everything down.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

double ProcessCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

int64_t Identity(int64_t i) { return i; }
using Generator = GeneratorSource<int64_t, int64_t (*)(int64_t)>;

// The library's GeneratorSource, counting how often the task polls it (once
// or more per wake-up of its task).
class CountingSource final : public Source<int64_t> {
 public:
  CountingSource(std::unique_ptr<Generator> inner, std::shared_ptr<std::atomic<int64_t>> polls)
      : inner_(std::move(inner)), polls_(std::move(polls)) {}
  void Open(const SourceContext& ctx) override { inner_->Open(ctx); }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    polls_->fetch_add(1, std::memory_order_relaxed);
    return inner_->Poll(out, budget);
  }
  Timestamp RetryAt() const override { return inner_->RetryAt(); }

 private:
  std::unique_ptr<Generator> inner_;
  std::shared_ptr<std::atomic<int64_t>> polls_;
};

constexpr int64_t kRecords = 4000;
constexpr double kRate = 4000;  // per second: about one second of input

TEST(PacedSource, WakesABoundedNumberOfTimesAtFourThousandRecordsPerSecond) {
  auto polls = std::make_shared<std::atomic<int64_t>>(0);
  auto received = std::make_shared<std::atomic<int64_t>>(0);
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.add_source<int64_t>(
         [polls] {
           return std::make_unique<CountingSource>(
               std::make_unique<Generator>(&Identity, kRecords, kRate), polls);
         },
         "paced")
      .rebalance()  // a real channel: the sink runs as a task of its own
      .add_sink([received](int64_t) { received->fetch_add(1, std::memory_order_relaxed); });
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  JobResult r = env.execute();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = ProcessCpuSeconds() - cpu0;
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(received->load(), kRecords);
  // The pace is kept: record k (0-based) is not due before k / rate seconds.
  EXPECT_GE(wall, 0.9);
  // One wake-up per chunk of about RatePacer::kChunkMs: about 500 in a second
  // (a busy loop made hundreds of thousands).
  EXPECT_LT(polls->load(), 2000) << "wall " << wall << " s";
  RecordProperty("polls", std::to_string(polls->load()));
  RecordProperty("cpu_fraction", std::to_string(cpu / wall));
  if (!kSanitized) EXPECT_LT(cpu, 0.4 * wall) << "CPU " << cpu << " s in " << wall << " s";
}

TEST(PacedSource, AverageRateIsExactOverManyChunks) {
  // 1 500 records/s: not a whole number of records per millisecond, so a
  // chunk boundary falls between milliseconds; the allowance is counted from
  // the start, so nothing drifts.
  for (double rate : {1500.0, 300.0}) {
    RatePacer pacer(rate, 1000);
    int64_t now = 1000;
    int wakeups = 0;
    while (now <= 3000) {
      const int64_t n = pacer.Allowance(now);
      pacer.Emitted(n);
      const Timestamp next = pacer.NextPollAt(now);
      ASSERT_GT(next, now);
      ASSERT_EQ(pacer.Allowance(now), 0);
      now = next;
      ++wakeups;
    }
    // After 2 s, 2 s worth of records (and the first), give or take a chunk.
    const int64_t expected = static_cast<int64_t>(rate * 2) + 1;
    const int64_t chunk = static_cast<int64_t>(rate) * RatePacer::kChunkMs / 1000 + 1;
    EXPECT_NEAR(static_cast<double>(pacer.emitted()), static_cast<double>(expected),
                static_cast<double>(chunk))
        << rate;
    EXPECT_LE(wakeups, 2000 / RatePacer::kChunkMs + 2) << rate;
  }
}

// A poll that comes long after the source asked for it (the task held it
// back: back-pressure, watermark alignment) gives the delay no allowance:
// resumed, the source reads what was due when it asked, then keeps its
// pace.  A source that asked for nothing (polled on time, nothing to read,
// as a quiet FIFO) catches up.
TEST(PacedSource, TimeTheTaskHeldTheSourceBackEarnsNoAllowance) {
  RatePacer pacer(100, 0);  // one record each 10 ms
  EXPECT_EQ(pacer.Allowance(0), 1);
  pacer.Emitted(1);
  const Timestamp next = pacer.NextPollAt(0);  // the next chunk's time
  pacer.Expect(next);
  pacer.Polled(5000);  // held back for about 5 s
  EXPECT_LE(pacer.Allowance(5000), 2) << "5 s held back: no 500 records at once";
  pacer.Emitted(pacer.Allowance(5000));
  EXPECT_GE(pacer.Allowance(5100), 9);
  EXPECT_LE(pacer.Allowance(5100), 11);
  // Polled a few milliseconds late (scheduling): nothing is lost.
  RatePacer on_time(100, 0);
  on_time.Emitted(1);
  on_time.Expect(10);
  on_time.Polled(25);
  EXPECT_EQ(on_time.Allowance(25), 2);
  // Asked for nothing (a quiet input): it catches up.
  RatePacer quiet(100, 0);
  quiet.Emitted(1);
  for (Timestamp t = 0; t <= 5000; t += 100) quiet.Polled(t);
  EXPECT_EQ(quiet.Allowance(5000), 500);
}

TEST(PacedSource, NextPollIsAlwaysInTheFuture) {
  // The rounding that caused the busy loop: at 4 000 records/s the time of
  // the next record, in whole milliseconds, rounded down to now.
  RatePacer pacer(4000, 0);
  for (int64_t now = 0; now < 50; ++now) {
    pacer.Emitted(pacer.Allowance(now));
    EXPECT_GT(pacer.NextPollAt(now), now);
  }
}

}  // namespace
}  // namespace tidemark
