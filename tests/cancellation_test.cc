// Cancellation lands within one user call (issue 10, item 15): once cancel()
// returns, a slow sink is called at most once more (the call in progress),
// whether it is chained to its source, behind a channel, or in the middle of a
// window firing thousands of results.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

// A sink taking `ms` per record that counts its calls.
struct SlowSink {
  std::shared_ptr<std::atomic<int64_t>> calls;
  std::chrono::milliseconds cost;
  template <typename T>
  void operator()(T&&) const {
    calls->fetch_add(1);
    std::this_thread::sleep_for(cost);  // the slow user code (real time is the point)
  }
};

// Waits (without sleeping as synchronisation: it polls the counter the job
// advances) until the sink has been called `n` times.
void WaitForCalls(const std::atomic<int64_t>& calls, int64_t n) {
  const auto limit = std::chrono::steady_clock::now() + 60s;
  while (calls.load() < n) {
    ASSERT_LT(std::chrono::steady_clock::now(), limit) << "the sink never got " << n << " records";
    std::this_thread::yield();
  }
}

enum class Shape { kChained, kNetworked, kWindowFiring };

void CancelDuringSlowSink(Shape shape) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(3); ++rep) {
    auto calls = std::make_shared<std::atomic<int64_t>>(0);
    StreamExecutionEnvironment env;
    env.set_parallelism(1).set_worker_threads(2);
    SlowSink sink{calls, 1ms};
    switch (shape) {
      case Shape::kChained:
        env.from_generator<int64_t>([](int64_t i) { return i; }, -1).add_sink(sink);
        break;
      case Shape::kNetworked:
        env.from_generator<int64_t>([](int64_t i) { return i; }, -1).rebalance().add_sink(sink);
        break;
      case Shape::kWindowFiring:
        // 20 000 keys in one window: the end of input fires 20 000 results
        // into the slow sink.
        env.from_generator<int64_t>([](int64_t i) { return i; }, 20000)
            .assign_timestamps_and_watermarks(
                WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
                    [](const int64_t&) { return Timestamp{0}; }))
            .key_by([](const int64_t& v) { return v; })
            .window(TumblingEventTimeWindows::of(1s))
            .reduce([](const int64_t& a, const int64_t&) { return a; })
            .add_sink(sink);
        break;
    }
    JobClient client = env.execute_async();
    WaitForCalls(*calls, 50);
    const int64_t before = calls->load();
    client.cancel();
    const int64_t at_cancel = calls->load();
    bool hung = false;
    JobResult r = tidemark::testing::WaitWithWatchdog(client, &hung);
    ASSERT_FALSE(hung);
    EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
    // At most the call in progress when cancel() ran (plus one that started
    // between the two reads around cancel()).
    EXPECT_LE(calls->load() - before, 2)
        << "sink calls after cancel(): " << calls->load() - at_cancel;
  }
}

TEST(Cancellation, LandsWithinOneUserCallWhenTheSinkIsChained) {
  CancelDuringSlowSink(Shape::kChained);
}

TEST(Cancellation, LandsWithinOneUserCallWhenTheSinkIsBehindAChannel) {
  CancelDuringSlowSink(Shape::kNetworked);
}

TEST(Cancellation, LandsWithinOneUserCallDuringAWindowFiring) {
  CancelDuringSlowSink(Shape::kWindowFiring);
}

}  // namespace
}  // namespace tidemark
