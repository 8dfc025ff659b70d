// FastWindowOperator (operators/window/fast_window_operator.h, window-major
// state in a TimeWindowTable) against WindowOperator, the general port of
// Flink's (window_operator.h), for the jobs the windowed stream gives the
// fast one: both with EventTimeTrigger, the general one with contents keyed
// by (key, window) and one timer per (key, window, timestamp).  Random inputs
// (keys, out-of-order timestamps, watermarks, allowed lateness, late side
// output, tumbling and sliding windows with offsets) must give the same
// output in the same order, the same side output and counters, and the same
// timer and contents counts after every step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "window_harness.h"
#include "window_test_functions.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using testing::OperatorHarness;

using testing::CountSum;
using testing::E;
using testing::KeyOfE;
using testing::SumE;

// A process function over the reduced value that shows what the context
// says: the window, who fired, and a per-window firing count (window state,
// dropped at cleanup).
struct Describe {
  void operator()(const std::string& key, const TimeWindow& w, const E& sum, WindowContext& ctx,
                  Collector<std::string>& out) const {
    int& firings = ctx.window_state<int>("firings");
    ++firings;
    out.collect(key + " " + w.ToString() + " sum=" + std::to_string(sum.second) +
                (ctx.fired_by_element() ? " element" : " timer") + " firing=" +
                std::to_string(firings) + " wm=" + std::to_string(ctx.current_watermark()));
  }
};

template <typename Assigner, typename Contents>
using FastOp = FastWindowOperator<E, std::string, KeyOfE, Assigner, Contents>;
template <typename Assigner, typename Contents>
using GeneralOp = WindowOperator<E, std::string, KeyOfE, Assigner, EventTimeTrigger, Contents>;

// A harness around operator OpT (FastOp or GeneralOp) with EventTimeTrigger.
template <typename Out, typename OpT, typename Assigner, typename Contents>
std::unique_ptr<OperatorHarness<E, Out>> Make(const Assigner& a, Contents c, int64_t lateness,
                                              const std::optional<OutputTag<E>>& tag) {
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = lateness;
  cfg.late_tag = tag;
  return std::make_unique<OperatorHarness<E, Out>>(
      std::make_unique<OpT>(KeyOfE{}, a, EventTimeTrigger{}, std::move(c), cfg));
}

struct Case {
  uint64_t seed;
  int64_t lateness;
  bool side_output;
};

// Feeds the same random input to the fast and the general operator and
// compares them after every step.
template <typename Out, typename Assigner, typename Contents>
void RunCase(const Assigner& assigner, const Contents& contents, const Case& c) {
  using Fast = FastOp<Assigner, Contents>;
  using General = GeneralOp<Assigner, Contents>;
  // The windowed stream builds Fast, or for sliding windows the sliced
  // operator (tests/sliced_window_operator_test.cc compares it with both).
  static_assert(
      std::is_same_v<
          WindowOperatorFor<E, std::string, KeyOfE, Assigner, EventTimeTrigger, Contents>, Fast> ||
      SlicedWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  SCOPED_TRACE("seed " + std::to_string(c.seed) + " lateness " + std::to_string(c.lateness) +
               " side output " + std::to_string(c.side_output));

  std::optional<OutputTag<E>> tag;
  if (c.side_output) tag.emplace("late");
  auto fast = Make<Out, Fast>(assigner, contents, c.lateness, tag);
  auto general = Make<Out, General>(assigner, contents, c.lateness, tag);
  testing::RecordingOutput<E>* fast_side = nullptr;
  testing::RecordingOutput<E>* general_side = nullptr;
  if (tag) {
    fast_side = &fast->AddSideOutput(*tag);
    general_side = &general->AddSideOutput(*tag);
  }
  fast->Open();
  general->Open();
  auto& fast_op = fast->template op<Fast>();
  auto& general_op = general->template op<General>();

  std::mt19937_64 rng(c.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Timestamp cursor = uniform(-5000, 5000);
  Timestamp watermark = kMinTimestamp;
  const int steps = 300;
  for (int step = 0; step < steps; ++step) {
    if (uniform(0, 3) == 0) {
      // The watermark moves on (sometimes not at all, sometimes far).
      const Timestamp next = cursor - uniform(-500, 2500);
      if (next > watermark) watermark = next;
      fast->ProcessWatermark(watermark);
      general->ProcessWatermark(watermark);
    } else {
      cursor += uniform(0, 400);
      const E e("k" + std::to_string(uniform(0, 6)), static_cast<int>(uniform(1, 9)));
      const Timestamp ts = cursor - uniform(0, 4000);  // out of order, often late
      fast->ProcessElement(e, ts);
      general->ProcessElement(e, ts);
    }
    if (step == steps - 1) {  // end of input
      fast->ProcessWatermark(kMaxTimestamp);
      general->ProcessWatermark(kMaxTimestamp);
    }
    ASSERT_EQ(fast->TakeRecords(), general->TakeRecords()) << "step " << step;
    if (tag) ASSERT_EQ(fast_side->TakeRecords(), general_side->TakeRecords()) << "step " << step;
    ASSERT_EQ(fast_op.num_windows_with_contents(), general_op.num_windows_with_contents())
        << "step " << step;
    ASSERT_EQ(fast_op.num_event_time_timers(), general_op.num_event_time_timers())
        << "step " << step;
    ASSERT_EQ(fast->counter(kNumLateRecordsDropped), general->counter(kNumLateRecordsDropped));
  }
  EXPECT_EQ(fast_op.num_windows_with_contents(), 0u);
  EXPECT_EQ(fast_op.num_event_time_timers(), 0u);
}

const int64_t kLateness[] = {0, 700, 2500};

template <typename Out, typename Assigner, typename Contents>
void RunCases(const Assigner& assigner, const Contents& contents) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (int64_t lateness : kLateness) {
      for (bool side : {false, true}) {
        RunCase<Out>(assigner, contents, Case{seed, lateness, side});
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

using ReduceC = ReduceContents<E, std::string, TimeWindow, SumE, NoProcessFunction, E>;
using AggregateC =
    AggregateContents<E, std::string, TimeWindow, CountSum, NoProcessFunction, std::string>;
using ProcessC = ReduceContents<E, std::string, TimeWindow, SumE, Describe, std::string>;

TEST(WindowFastPath, TumblingReduceMatchesGeneralPath) {
  RunCases<E>(TumblingEventTimeWindows::of(1s), ReduceC(SumE{}, NoProcessFunction{}));
  RunCases<E>(TumblingEventTimeWindows::of(1s, 300ms), ReduceC(SumE{}, NoProcessFunction{}));
}

TEST(WindowFastPath, SlidingReduceMatchesGeneralPath) {
  RunCases<E>(SlidingEventTimeWindows::of(3s, 1s), ReduceC(SumE{}, NoProcessFunction{}));
  RunCases<E>(SlidingEventTimeWindows::of(1s, 300ms, 100ms), ReduceC(SumE{}, NoProcessFunction{}));
}

TEST(WindowFastPath, AggregateMatchesGeneralPath) {
  RunCases<std::string>(TumblingEventTimeWindows::of(1s), AggregateC(CountSum{}, {}));
  RunCases<std::string>(SlidingEventTimeWindows::of(2s, 500ms), AggregateC(CountSum{}, {}));
}

TEST(WindowFastPath, ProcessFunctionSeesTheSameContextAndWindowState) {
  RunCases<std::string>(TumblingEventTimeWindows::of(1s), ProcessC(SumE{}, Describe{}));
  RunCases<std::string>(SlidingEventTimeWindows::of(3s, 1s), ProcessC(SumE{}, Describe{}));
}

// ---------------------------------------------------------------------------
// The ends of the long range (issue 10, item 4): tumbling and sliding windows
// of records at MIN + 1, MAX - 1 and MAX are Flink's windows, whose start or
// end wrapped (Java long arithmetic), and they fire, are late and are cleaned
// up by Flink's rules on their wrapped max_timestamp(), on both paths alike.
// A record at MIN is the no-timestamp marker and fails the job.

constexpr Timestamp kMin = kMinTimestamp;
constexpr Timestamp kMax = kMaxTimestamp;

struct Step {
  bool watermark;
  Timestamp t;
  E e;
};
Step El(const std::string& k, int v, Timestamp ts) { return {false, ts, E(k, v)}; }
Step Wm(Timestamp w) { return {true, w, E()}; }

// What Describe prints for a firing, with the record's timestamp.
std::string Fired(const std::string& key, const TimeWindow& w, int sum, const char* by, int firing,
                  Timestamp wm) {
  return key + " " + w.ToString() + " sum=" + std::to_string(sum) + " " + by +
         " firing=" + std::to_string(firing) + " wm=" + std::to_string(wm) + " @" +
         std::to_string(w.max_timestamp());
}

// Runs `steps` through the fast and the general path, checks after every step
// that they agree, and returns the fast path's output; *dropped receives
// numLateRecordsDropped.
template <typename Assigner>
std::vector<std::string> RunBothPaths(const Assigner& assigner, int64_t lateness,
                                      const std::vector<Step>& steps, int64_t* dropped) {
  using Fast = FastOp<Assigner, ProcessC>;
  using General = GeneralOp<Assigner, ProcessC>;
  auto fast =
      Make<std::string, Fast>(assigner, ProcessC(SumE{}, Describe{}), lateness, std::nullopt);
  auto general =
      Make<std::string, General>(assigner, ProcessC(SumE{}, Describe{}), lateness, std::nullopt);
  fast->Open();
  general->Open();
  std::vector<std::string> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& st = steps[i];
    if (st.watermark) {
      fast->ProcessWatermark(st.t);
      general->ProcessWatermark(st.t);
    } else {
      fast->ProcessElement(st.e, st.t);
      general->ProcessElement(st.e, st.t);
    }
    auto f = fast->TakeRecords();
    EXPECT_EQ(f, general->TakeRecords()) << "step " << i;
    for (const auto& [text, ts] : f) out.push_back(text + " @" + std::to_string(ts));
    EXPECT_EQ(fast->template op<Fast>().num_windows_with_contents(),
              general->template op<General>().num_windows_with_contents())
        << "step " << i;
    EXPECT_EQ(fast->template op<Fast>().num_event_time_timers(),
              general->template op<General>().num_event_time_timers())
        << "step " << i;
    EXPECT_EQ(fast->counter(kNumLateRecordsDropped), general->counter(kNumLateRecordsDropped));
  }
  // MIN is the no-timestamp marker: both fail.
  EXPECT_THROW(fast->ProcessElement(E("z", 1), kMin), std::runtime_error);
  EXPECT_THROW(general->ProcessElement(E("z", 1), kMin), std::runtime_error);
  *dropped = fast->counter(kNumLateRecordsDropped);
  return out;
}

TEST(WindowFastPath, TumblingWindowsAtTheEndsOfTheLongRangeAreFlinks) {
  const TimeWindow a(kMax - 1, kMin + 8);  // of MIN + 1
  const TimeWindow b(kMax - 7, kMin + 2);  // of MAX - 1 and MAX
  int64_t dropped = -1;
  EXPECT_THAT(
      RunBothPaths(TumblingEventTimeWindows::of(10ms), 0,
                   {El("a", 1, kMin + 1), El("b", 2, kMax - 1), El("b", 4, kMax), Wm(kMin + 1),
                    // b's window is now late: MAX is skipped, and as an
                    // element it is not late (MAX > MIN + 1): not counted.
                    El("b", 8, kMax), Wm(kMin + 7), Wm(kMax)},
                   &dropped),
      ::testing::ElementsAre(Fired("b", b, 6, "timer", 1, kMin + 1),
                             Fired("a", a, 1, "timer", 1, kMin + 7)));
  EXPECT_EQ(dropped, 0);
}

TEST(WindowFastPath, SlidingWindowsAtTheEndsOfTheLongRangeAreFlinks) {
  int64_t dropped = -1;
  // 10/5 ms: MIN + 1 has two windows with wrapped starts, MAX - 1 and MAX two
  // with wrapped ends; they fire in max_timestamp order.
  EXPECT_THAT(
      RunBothPaths(
          SlidingEventTimeWindows::of(10ms, 5ms), 0,
          {El("a", 1, kMin + 1), El("b", 2, kMax - 1), El("b", 4, kMax), Wm(kMin + 2), Wm(kMax)},
          &dropped),
      ::testing::ElementsAre(Fired("b", TimeWindow(kMax - 7, kMin + 2), 6, "timer", 1, kMin + 2),
                             Fired("a", TimeWindow(kMax - 6, kMin + 3), 1, "timer", 1, kMin + 2),
                             Fired("b", TimeWindow(kMax - 2, kMin + 7), 6, "timer", 1, kMax),
                             Fired("a", TimeWindow(kMax - 1, kMin + 8), 1, "timer", 1, kMax)));
  EXPECT_EQ(dropped, 0);

  // Offset 2 ms, lateness 5 ms: [MAX - 10, MAX) has max_timestamp MAX - 1 and
  // no cleanup timer (MAX - 1 + 5 overflows: cleanup time MAX, Flink's
  // guard); a late record fires its window by element until the wrapped
  // cleanup time.
  EXPECT_THAT(RunBothPaths(SlidingEventTimeWindows::of(10ms, 5ms, 2ms), 5,
                           {El("a", 1, kMax - 1), Wm(kMin + 3), El("a", 2, kMax), Wm(kMin + 8),
                            El("a", 4, kMax), Wm(kMax - 1), Wm(kMax)},
                           &dropped),
              ::testing::ElementsAre(
                  Fired("a", TimeWindow(kMax - 5, kMin + 4), 1, "timer", 1, kMin + 3),
                  Fired("a", TimeWindow(kMax - 5, kMin + 4), 3, "element", 2, kMin + 3),
                  Fired("a", TimeWindow(kMax, kMin + 9), 2, "timer", 1, kMin + 8),
                  // [MAX - 5, MIN + 4) was cleaned at MIN + 8: MAX only joins [MAX, MIN + 9).
                  Fired("a", TimeWindow(kMax, kMin + 9), 6, "element", 2, kMin + 8),
                  Fired("a", TimeWindow(kMax - 10, kMax), 1, "timer", 1, kMax - 1)));
  EXPECT_EQ(dropped, 0);

  // Offset -2 ms: MIN + 1 gets no window at all (t - size wraps, the first
  // start does not), so it is late as an element once the watermark has
  // reached it; MAX - 1's windows end at MIN + 6 and MIN + 1, both late here,
  // but MAX - 1 is not a late element: skipped silently, as in Flink.
  EXPECT_THAT(
      RunBothPaths(SlidingEventTimeWindows::of(10ms, 5ms, -2ms), 0,
                   {Wm(kMin + 5), El("a", 1, kMin + 1), El("a", 2, kMax - 1), Wm(kMax)}, &dropped),
      ::testing::IsEmpty());
  EXPECT_EQ(dropped, 1);

  // An end that wraps to exactly MIN: max_timestamp MAX, fired by W(MAX).
  EXPECT_THAT(
      RunBothPaths(SlidingEventTimeWindows::of(10ms, 3ms, 1ms), 0,
                   {El("a", 1, kMax - 1), Wm(kMin + 5), Wm(kMax)}, &dropped),
      ::testing::ElementsAre(Fired("a", TimeWindow(kMax - 6, kMin + 3), 1, "timer", 1, kMin + 5),
                             Fired("a", TimeWindow(kMax - 3, kMin + 6), 1, "timer", 1, kMin + 5),
                             Fired("a", TimeWindow(kMax - 9, kMin), 1, "timer", 1, kMax)));
}

// Many keys per window: the contents cross the SlotList's chunk boundaries.
TEST(WindowFastPath, ManyKeysMatchGeneralPath) {
  using Fast = FastOp<TumblingEventTimeWindows, ReduceC>;
  using General = GeneralOp<TumblingEventTimeWindows, ReduceC>;
  const auto assigner = TumblingEventTimeWindows::of(1s);
  auto fast = Make<E, Fast>(assigner, ReduceC(SumE{}, NoProcessFunction{}), 500, std::nullopt);
  auto general =
      Make<E, General>(assigner, ReduceC(SumE{}, NoProcessFunction{}), 500, std::nullopt);
  fast->Open();
  general->Open();
  std::mt19937_64 rng(7);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 30000; ++i) {
      const E e("k" + std::to_string(rng() % 20000), static_cast<int>(rng() % 9) + 1);
      const Timestamp ts = round * 1000 + static_cast<Timestamp>(rng() % 1400);
      fast->ProcessElement(e, ts);
      general->ProcessElement(e, ts);
    }
    ASSERT_EQ(fast->op<Fast>().num_windows_with_contents(),
              general->op<General>().num_windows_with_contents());
    fast->ProcessWatermark(round * 1000 + 999);
    general->ProcessWatermark(round * 1000 + 999);
    ASSERT_EQ(fast->TakeRecords(), general->TakeRecords()) << "round " << round;
  }
  fast->ProcessWatermark(kMaxTimestamp);
  general->ProcessWatermark(kMaxTimestamp);
  EXPECT_EQ(fast->TakeRecords(), general->TakeRecords());
}

// SlotList: positions stay valid, across chunk sizes, with a type that has
// no default constructor; every element is destroyed once.
TEST(SlotList, AppendsAcrossChunksAndDestroysEachElementOnce) {
  struct Counted {
    explicit Counted(int v, int* live) : v(v), live(live) { ++*live; }
    Counted(Counted&& o) noexcept : v(o.v), live(o.live) { ++*live; }
    Counted& operator=(Counted&&) = delete;
    ~Counted() { --*live; }
    int v;
    int* live;
  };
  int live = 0;
  {
    SlotList<Counted> list;
    constexpr int kN = 16 * 15 + 40 * 256 + 17;  // the growing chunks, then 41 of 256
    std::vector<const Counted*> addresses;
    for (int i = 0; i < kN; ++i) addresses.push_back(&list.push_back(Counted(i, &live)));
    EXPECT_EQ(list.size(), static_cast<uint32_t>(kN));
    EXPECT_EQ(live, kN);
    EXPECT_EQ(list.num_chunks(), 45u);
    EXPECT_GE(list.capacity(), static_cast<size_t>(kN));
    EXPECT_LT(list.capacity(), static_cast<size_t>(kN) + 256);
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(list[static_cast<uint32_t>(i)].v, i);
      ASSERT_EQ(&list[static_cast<uint32_t>(i)], addresses[static_cast<size_t>(i)]);
    }
    int expected = 0;
    list.ForEach([&](const Counted& c) { EXPECT_EQ(c.v, expected++); });
    EXPECT_EQ(expected, kN);
  }
  EXPECT_EQ(live, 0);
}

// The state-size counters: the peak of live (key, window) pairs and the bytes
// at that peak, noted at watermarks.
TEST(WindowFastPath, PublishesPeakLiveKeyWindowsAndStateBytes) {
  auto h = Make<E, FastOp<TumblingEventTimeWindows, ReduceC>>(
      TumblingEventTimeWindows::of(1s), ReduceC(SumE{}, NoProcessFunction{}), 0, std::nullopt);
  h->Open();
  for (int k = 0; k < 100; ++k) h->ProcessElement(E("k" + std::to_string(k), 1), 10);
  for (int k = 0; k < 50; ++k) h->ProcessElement(E("k" + std::to_string(k), 1), 1010);
  h->ProcessWatermark(999);  // notes 150 live pairs, then fires [0,1000)
  EXPECT_EQ(h->counter(kWindowPeakLiveKeyWindows), 150);
  const int64_t bytes = h->counter(kWindowStateBytesAtPeak);
  // At least the slots themselves; at most a generous bound per pair.
  EXPECT_GE(bytes, 150 * static_cast<int64_t>(sizeof(std::string) + sizeof(E)));
  EXPECT_LE(bytes, 150 * 1024);
  h->ProcessWatermark(1999);  // 50 live: no new peak
  EXPECT_EQ(h->counter(kWindowPeakLiveKeyWindows), 150);
  EXPECT_EQ(h->counter(kWindowStateBytesAtPeak), bytes);
}

}  // namespace
}  // namespace tidemark
