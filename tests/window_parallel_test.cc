// The fluent windowing API on the real multi-threaded runtime: the same jobs
// at parallelism 1 and 4 give the same multiset of results.  Timestamps are
// monotonous per source subtask, so no record is ever late at the window
// operator whatever the thread timing (the aligned watermark is the minimum
// over channels): the results are determined by event time alone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

struct Ev {
  int64_t key = 0;
  Timestamp ts = 0;
  int64_t n = 1;
};

struct CountAgg {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const Ev&, int64_t acc) const { return acc + 1; }
  int64_t get_result(const int64_t& acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};

struct CountPerKey : KeyedProcessFunction<int64_t, Ev, std::string> {
  void process_element(const Ev& e, Context& ctx, Collector<std::string>& out) override {
    auto c = ctx.get_state<int64_t>("c");
    c.update(c.value_or(0) + 1);
    if (e.ts % 1000 == 0) ctx.timer_service().register_event_time_timer(e.ts + 500);
    out.collect(std::to_string(ctx.get_current_key()) + "#" + std::to_string(*c.value()));
  }
  void on_timer(Timestamp ts, OnTimerContext& ctx, Collector<std::string>& out) override {
    out.collect("timer " + std::to_string(ctx.get_current_key()) + "@" + std::to_string(ts));
  }
};

struct Results {
  std::vector<std::string> tumbling, sliding, sessions, process, keyed_process;
  int64_t late_dropped = 0;
};

template <typename T>
std::vector<std::string> Sorted(const std::shared_ptr<CollectedResults<T>>& r,
                                std::string (*fmt)(const T&, Timestamp)) {
  std::vector<std::string> out;
  for (const auto& item : r->items()) out.push_back(fmt(item.value, item.timestamp));
  std::sort(out.begin(), out.end());
  return out;
}

Results RunJob(int parallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  env.set_auto_watermark_interval(5ms);
  constexpr int64_t kCount = 20000;
  auto events = env.from_generator<Ev>(
                       [](int64_t i) {
                         // A 5 s gap in the middle separates sessions.
                         return Ev{i % 13, i * 10 + (i >= kCount / 2 ? 5000 : 0), 1 + i % 3};
                       },
                       kCount)
                    .assign_timestamps_and_watermarks(
                        WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                            [](const Ev& e, Timestamp) { return e.ts; }));
  auto keyed = events.key_by([](const Ev& e) { return e.key; });

  auto tumbling = keyed.window(TumblingEventTimeWindows::of(1s))
                      .reduce([](const Ev& a, const Ev& b) {
                        return Ev{a.key, a.ts, a.n + b.n};
                      })
                      .collect();
  auto sliding = keyed.window(SlidingEventTimeWindows::of(2s, 500ms))
                     .aggregate(CountAgg{},
                                [](const int64_t& key, const TimeWindow& w, const int64_t& count,
                                   WindowContext&, Collector<std::string>& out) {
                                  out.collect(std::to_string(key) + " " + std::to_string(w.start) +
                                              " " + std::to_string(count));
                                })
                     .collect();
  OutputTag<Ev> late("late");
  auto session_stream = keyed.window(EventTimeSessionWindows::with_gap(1s))
                            .allowed_lateness(100ms)
                            .side_output_late_data(late)
                            .reduce([](const Ev& a, const Ev& b) {
                              return Ev{a.key, std::min(a.ts, b.ts), a.n + b.n};
                            });
  auto sessions = session_stream.collect();
  auto late_records = session_stream.get_side_output(late).collect();
  auto process = keyed.window(TumblingEventTimeWindows::of(3s, -1s))
                     .process<std::string>([](const int64_t& key, const TimeWindow& w,
                                              const std::vector<Ev>& elements, WindowContext& ctx,
                                              Collector<std::string>& out) {
                       int64_t sum = 0;
                       for (const Ev& e : elements) sum += e.n;
                       out.collect(std::to_string(key) + " [" + std::to_string(w.start) + "," +
                                   std::to_string(w.end) + ") " + std::to_string(sum) + " " +
                                   std::to_string(ctx.window().max_timestamp()));
                     })
                     .collect();
  auto keyed_process = keyed.process(CountPerKey()).collect();

  JobResult r = env.execute("windows");
  EXPECT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(late_records->size(), 0u);
  Results out;
  out.late_dropped = r.CounterTotal(kNumLateRecordsDropped);
  out.tumbling = Sorted<Ev>(tumbling, [](const Ev& e, Timestamp ts) {
    return std::to_string(e.key) + " " + std::to_string(e.n) + " @" + std::to_string(ts);
  });
  out.sliding = Sorted<std::string>(
      sliding, [](const std::string& s, Timestamp ts) { return s + " @" + std::to_string(ts); });
  out.sessions = Sorted<Ev>(sessions, [](const Ev& e, Timestamp ts) {
    return std::to_string(e.key) + " " + std::to_string(e.ts) + " " + std::to_string(e.n) + " @" +
           std::to_string(ts);
  });
  out.process = Sorted<std::string>(
      process, [](const std::string& s, Timestamp ts) { return s + " @" + std::to_string(ts); });
  out.keyed_process =
      Sorted<std::string>(keyed_process, [](const std::string& s, Timestamp) { return s; });
  return out;
}

TEST(WindowParallel, SameResultsAtParallelismOneAndFour) {
  Results one = RunJob(1);
  Results four = RunJob(4);
  // 2 x 100 s of event time in 1 s windows, 13 keys: every key in every window.
  EXPECT_EQ(one.tumbling.size(), 13u * 200);
  EXPECT_EQ(one.sessions.size(), 13u * 2);
  EXPECT_EQ(one.keyed_process.size(), 20000u + 200u);  // elements + timers
  EXPECT_EQ(one.tumbling, four.tumbling);
  EXPECT_EQ(one.sliding, four.sliding);
  EXPECT_EQ(one.sessions, four.sessions);
  EXPECT_EQ(one.process, four.process);
  EXPECT_EQ(one.keyed_process, four.keyed_process);
  EXPECT_EQ(one.late_dropped, 0);
  EXPECT_EQ(four.late_dropped, 0);
}

// Late data on the real pipeline: one source subtask, a watermark after every
// record (deterministic), the window at parallelism 2.
TEST(WindowParallel, LateDataSideOutputAndDroppedCounterOnRealPipeline) {
  for (bool with_tag : {true, false}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    env.set_auto_watermark_interval(0ms);
    std::vector<Ev> input{{1, 1000, 1}, {2, 1200, 1}, {1, 2000, 1}, {1, 6000, 1},
                          {1, 1500, 1}, {2, 2500, 1}, {1, 5200, 1}, {2, 7000, 1}};
    auto keyed = env.from_collection(input)
                     .assign_timestamps_and_watermarks(
                         WatermarkStrategy<Ev>::for_bounded_out_of_orderness(1s)
                             .with_timestamp_assigner([](const Ev& e, Timestamp) { return e.ts; })
                             .with_periodic_emit_per_record())
                     .set_parallelism(1)  // one generator: the watermarks are the document's
                     .key_by([size = int64_t{1}](const Ev& e) { return e.key * size; });
    OutputTag<Ev> late("late");
    const int64_t size_ms = 3000;  // a capturing function: WindowedStream stays assignable
    auto windowed = keyed.window(TumblingEventTimeWindows::of(3s))
                        .trigger(EventTimeTrigger::create())
                        .allowed_lateness(0ms);
    (void)size_ms;
    if (with_tag) windowed = windowed.side_output_late_data(late);
    auto sums = windowed.reduce([size_ms](const Ev& a, const Ev& b) {
      return Ev{a.key, a.ts % size_ms + a.ts - a.ts % size_ms, a.n + b.n};
    });
    auto results = sums.collect();
    std::shared_ptr<CollectedResults<Ev>> late_results;
    if (with_tag) late_results = sums.get_side_output(late).collect();
    JobResult r = env.execute("late data");
    ASSERT_TRUE(r.ok()) << r.status;
    std::vector<std::string> got;
    for (const auto& item : results->items())
      got.push_back(std::to_string(item.value.key) + ":" + std::to_string(item.value.n) + "@" +
                    std::to_string(item.timestamp));
    std::sort(got.begin(), got.end());
    // wm after 6000 is 4999: [0,3000) fires with 1000, 2000 (key 1) and 1200
    // (key 2); 1500 and 2500 are then late; wm 5999 after 7000 fires
    // [3000,6000) (5200); [6000,9000) fires at the end of input.
    EXPECT_THAT(got,
                ::testing::ElementsAre("1:1@5999", "1:1@8999", "1:2@2999", "2:1@2999", "2:1@8999"));
    if (with_tag) {
      std::vector<Timestamp> late_ts;
      for (const auto& item : late_results->items()) late_ts.push_back(item.timestamp);
      std::sort(late_ts.begin(), late_ts.end());
      EXPECT_THAT(late_ts, ::testing::ElementsAre(1500, 2500));
      EXPECT_EQ(r.CounterTotal(kNumLateRecordsDropped), 0);
    } else {
      EXPECT_EQ(r.CounterTotal(kNumLateRecordsDropped), 2);
    }
  }
}

// A sliding window shorter than its slide leaves gaps: a record in one
// belongs to no window and is not late.  Flink skips it without a count;
// here it is counted as numRecordsInNoWindow, by the sliced operator
// (reduce) and by the general one (process), so that every record ends in a
// result, the late side output or a named counter.
TEST(WindowParallel, ARecordInASlidingWindowsGapIsCounted) {
  for (bool sliced : {true, false}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    std::vector<Ev> input;
    for (int64_t ts = 0; ts < 10'000; ts += 1000) input.push_back(Ev{ts % 3, ts, 1});
    auto windowed =
        env.from_collection(input)
            .assign_timestamps_and_watermarks(
                WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                    [](const Ev& e, Timestamp) { return e.ts; }))
            .set_parallelism(1)
            .key_by([](const Ev& e) { return e.key; })
            .window(SlidingEventTimeWindows::of(2s, 5s));
    std::shared_ptr<CollectedResults<int64_t>> counts;
    if (sliced) {
      counts = windowed.reduce([](const Ev& a, const Ev& b) {
                         return Ev{a.key, a.ts, a.n + b.n};
                       })
                   .map([](const Ev& e) { return e.n; })
                   .collect();
    } else {
      counts = windowed
                   .process([](const int64_t&, const TimeWindow&, const std::vector<Ev>& all,
                               WindowContext&, Collector<int64_t>& out) {
                     out.collect(static_cast<int64_t>(all.size()));
                   })
                   .collect();
    }
    JobResult r = env.execute("gaps");
    ASSERT_TRUE(r.ok()) << r.status;
    int64_t in_windows = 0;
    for (const auto& item : counts->items()) in_windows += item.value;
    // Windows [0, 2000) and [5000, 7000): 0, 1000, 5000, 6000; the other
    // six fall in the gaps.
    EXPECT_EQ(in_windows, 4) << "sliced " << sliced;
    EXPECT_EQ(r.CounterTotal(kNumRecordsInNoWindow), 6) << "sliced " << sliced;
    EXPECT_EQ(r.CounterTotal(kNumLateRecordsDropped), 0);
  }
}

// Every fluent form compiles and runs: trigger + evictor + apply on global
// windows, reduce(f, p), aggregate(agg), process with explicit Out.
TEST(WindowParallel, FluentFormsOnRealPipeline) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.set_auto_watermark_interval(0ms);
  std::vector<Ev> input;
  for (int i = 0; i < 12; ++i) input.push_back(Ev{i % 2, 1000 * i, i});
  auto keyed = env.from_collection(input)
                   .assign_timestamps_and_watermarks(
                       WatermarkStrategy<Ev>::for_monotonous_timestamps()
                           .with_timestamp_assigner([](const Ev& e, Timestamp) { return e.ts; })
                           .with_periodic_emit_per_record())
                   .set_parallelism(1)
                   .key_by([](const Ev& e) { return e.key; });
  auto last_two = keyed.window(GlobalWindows::create())
                      .trigger(PurgingTrigger<CountTrigger>::of(CountTrigger::of(3)))
                      .evictor(CountEvictor::of(2))
                      .apply([](const int64_t& key, const GlobalWindow&, const std::vector<Ev>& els,
                                WindowContext&, Collector<std::string>& out) {
                        std::string s = std::to_string(key) + ":";
                        for (const Ev& e : els) s += " " + std::to_string(e.n);
                        out.collect(s);
                      })
                      .collect();
  auto described = keyed.window(TumblingEventTimeWindows::of(4s))
                       .reduce(
                           [](const Ev& a, const Ev& b) {
                             return Ev{a.key, a.ts, a.n + b.n};
                           },
                           [](const int64_t& key, const TimeWindow& w, const Ev& sum,
                              WindowContext&, Collector<std::string>& out) {
                             out.collect(std::to_string(key) + " " + std::to_string(w.start) + " " +
                                         std::to_string(sum.n));
                           })
                       .collect();
  auto counts = keyed.window(SlidingEventTimeWindows::of(4s, 2s)).aggregate(CountAgg{}).collect();
  JobResult r = env.execute("fluent");
  ASSERT_TRUE(r.ok()) << r.status;
  auto sorted = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    return v;
  };
  // Key 0 gets n = 0,2,4,6,8,10; every third element fires with the last two.
  EXPECT_EQ(sorted(last_two->values()),
            (std::vector<std::string>{"0: 2 4", "0: 8 10", "1: 3 5", "1: 9 11"}));
  EXPECT_EQ(sorted(described->values()),
            (std::vector<std::string>{"0 0 2", "0 4000 10", "0 8000 18", "1 0 4", "1 4000 12",
                                      "1 8000 20"}));
  int64_t total = 0;
  for (int64_t c : counts->values()) total += c;
  EXPECT_EQ(total, 24);  // every element in two sliding windows
}

class NotMerging : public Trigger<int64_t, TimeWindow> {
 public:
  TriggerResult on_element(const int64_t&, Timestamp, const TimeWindow&, TriggerContext&) override {
    return TriggerResult::kContinue;
  }
  TriggerResult on_event_time(Timestamp, const TimeWindow&, TriggerContext&) override {
    return TriggerResult::kContinue;
  }
  TriggerResult on_processing_time(Timestamp, const TimeWindow&, TriggerContext&) override {
    return TriggerResult::kContinue;
  }
  void clear(const TimeWindow&, TriggerContext&) override {}
};

TEST(WindowParallel, InvalidWindowParametersFailWhenTheJobIsBuilt) {
  StreamExecutionEnvironment env;
  auto keyed = env.from_elements<int64_t>(1, 2, 3).key_by([](const int64_t& v) { return v; });
  EXPECT_THROW(keyed.window(TumblingEventTimeWindows::of(0s)), std::invalid_argument);
  EXPECT_THROW(keyed.window(TumblingEventTimeWindows::of(1s)).allowed_lateness(-1s),
               std::invalid_argument);
  EXPECT_THROW(keyed.window(EventTimeSessionWindows::with_gap(1s)).trigger(NotMerging()),
               std::invalid_argument);
  EXPECT_NO_THROW(keyed.window(EventTimeSessionWindows::with_gap(1s)).trigger(CountTrigger::of(2)));
}

}  // namespace
}  // namespace tidemark
