// Idleness and back-pressure (issue 10, item 1; Flink FLINK-35886).
//
// A source whose task is blocked on a full output channel is busy, not idle:
// WatermarksWithIdleness runs on the task's input activity clock, which stands
// still while the task is back-pressured (or otherwise paused by the
// runtime).  Before the fix, a source held up by a slow downstream operator
// was marked idle, the window's aligned watermark jumped to the other
// source's, and almost all its records arrived late.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

TEST(PausableRelativeClock, StandsStillWhilePausedAndPausesNest) {
  ManualClock base(1000);
  PausableRelativeClock c(&base);
  const Timestamp t0 = c.NowMillis();
  base.Advance(10);
  EXPECT_EQ(c.NowMillis() - t0, 10);
  c.Pause();
  base.Advance(100);
  EXPECT_EQ(c.NowMillis() - t0, 10);
  c.Pause();  // a second reason to pause
  c.Resume();
  base.Advance(50);
  EXPECT_EQ(c.NowMillis() - t0, 10) << "still paused once";
  c.Resume();
  base.Advance(5);
  EXPECT_EQ(c.NowMillis() - t0, 15);
  c.Resume();  // not paused: ignored
  base.Advance(5);
  EXPECT_EQ(c.NowMillis() - t0, 20);
}

TEST(PausableRelativeClock, IdlenessTimerDoesNotRunWhilePaused) {
  ManualClock base(0);
  PausableRelativeClock c(&base);
  IdlenessTimer timer(&c, Duration(50));
  EXPECT_FALSE(timer.CheckIfIdle());  // starts the countdown
  c.Pause();
  base.Advance(10'000);
  EXPECT_FALSE(timer.CheckIfIdle()) << "10 s back-pressured is not 10 s without input";
  c.Resume();
  base.Advance(51);
  EXPECT_TRUE(timer.CheckIfIdle());
}

struct Ev {
  std::string key;
  Timestamp ts;
};

// Emits one record at ts 100000, then stays open without records (so it goes
// idle) until `release` is set.
class ParkedSource final : public Source<Ev> {
 public:
  explicit ParkedSource(std::shared_ptr<std::atomic<bool>> release)
      : release_(std::move(release)) {}
  void Open(const SourceContext& ctx) override { clock_ = ctx.clock; }
  PollStatus Poll(SourceOutput<Ev>& out, size_t) override {
    if (!sent_) {
      sent_ = true;
      out.Collect(Ev{"b", 100000});
    }
    if (release_->load()) return PollStatus::kEndOfInput;
    retry_at_ = clock_->NowMillis() + 5;
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return retry_at_; }

 private:
  std::shared_ptr<std::atomic<bool>> release_;
  const Clock* clock_ = nullptr;
  bool sent_ = false;
  Timestamp retry_at_ = kMaxTimestamp;
};

// Counts the records of a window.
struct CountAggregate {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const Ev&, int64_t acc) const { return acc + 1; }
  int64_t get_result(const int64_t& acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};

struct Outcome {
  size_t windows = 0;
  size_t late = 0;
  int64_t records_in_windows = 0;
};

// The reproduction: source A (monotonous, 200 records, ts 0..1990)
// into a map taking 30 ms a record (batch 4, channel capacity 1); source B
// parked at ts 100000; both with_idleness(50 ms) (or none), watermark
// interval 20 ms; union into 100 ms tumbling windows with a late side output.
Outcome RunSlowMapJob(bool idleness) {
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto mapped = std::make_shared<std::atomic<int>>(0);
  constexpr int kRecords = 200;
  StreamExecutionEnvironment env;
  env.set_parallelism(1)
      .set_worker_threads(2)
      .set_batch_size(4)
      .set_channel_capacity(1)
      .set_auto_watermark_interval(20ms);
  auto strategy = WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
      [](const Ev& e) { return e.ts; });
  if (idleness) strategy = strategy.with_idleness(50ms);
  std::vector<Ev> a_data;
  for (int i = 0; i < kRecords; ++i) a_data.push_back(Ev{"a", i * 10});
  auto a = env.from_collection(a_data)
               .name("A")
               .assign_timestamps_and_watermarks(strategy)
               .rebalance()
               .map([mapped, release](const Ev& e) {
                 std::this_thread::sleep_for(30ms);  // the slow operator (real time is the point)
                 if (mapped->fetch_add(1) + 1 == kRecords) release->store(true);
                 return e;
               })
               .name("Slow map");
  auto b =
      env.add_source<Ev>([release] { return std::make_unique<ParkedSource>(release); }, "B", false)
          .assign_timestamps_and_watermarks(strategy);
  OutputTag<Ev> late("late");
  auto counts = a.union_with(b)
                    .key_by([](const Ev& e) { return e.key; })
                    .window(TumblingEventTimeWindows::of(100ms))
                    .side_output_late_data(late)
                    .aggregate(CountAggregate());
  auto results = counts.collect();
  auto late_out = counts.get_side_output(late).collect();
  JobClient client = env.execute_async();
  bool hung = false;
  JobResult r = tidemark::testing::WaitWithWatchdog(client, &hung);
  EXPECT_FALSE(hung);
  EXPECT_TRUE(r.ok()) << r.status;
  Outcome o;
  o.windows = results->size();
  o.late = late_out->size();
  for (int64_t c : results->values()) o.records_in_windows += c;
  return o;
}

TEST(IdlenessBackpressure, BackpressuredSourceIsNotMarkedIdle) {
  const Outcome with = RunSlowMapJob(/*idleness=*/true);
  EXPECT_EQ(with.late, 0u) << "a back-pressured source must not become idle";
  EXPECT_EQ(with.windows, 21u);  // [0,100) .. [1900,2000) and B's [100000,100100)
  EXPECT_EQ(with.records_in_windows, 201);
}

TEST(IdlenessBackpressure, SameJobWithoutIdlenessAgrees) {
  const Outcome without = RunSlowMapJob(/*idleness=*/false);
  EXPECT_EQ(without.late, 0u);
  EXPECT_EQ(without.windows, 21u);
  EXPECT_EQ(without.records_in_windows, 201);
}

}  // namespace
}  // namespace tidemark
