// SlicedWindowOperator (operators/window/sliced_window_operator.h, stream
// slicing: one (key, pane) value per record, a window's value the merge of
// its panes) against FastWindowOperator (fast_window_operator.h, one value
// per (key, window)) and WindowOperator (window_operator.h, the plain port of
// Flink's), for the jobs the windowed stream gives the sliced one: sliding
// event-time windows with EventTimeTrigger and reduce / aggregate with merge.
// Random inputs (several keys, out-of-order timestamps, watermarks that stand
// still or jump, allowed lateness, late side output, sizes that are and are
// not multiples of the slide, sizes below the slide, offsets, W(MAX)) must
// give the same output in the same order, the same side output and counters,
// the same timer and contents counts after every step, and the same counters
// at close; records at the ends of the long range turn the operator into the
// per-window one without a visible seam.
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

#include "tidemark/api/windowed_stream.h"
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

// CountSum without merge: the sliced operator does not apply.
struct CountSumNoMerge {
  std::pair<int, int> create_accumulator() const { return {0, 0}; }
  std::pair<int, int> add(const E& e, std::pair<int, int> acc) const {
    return {acc.first + 1, acc.second + e.second};
  }
  std::string get_result(const std::pair<int, int>& acc) const {
    return std::to_string(acc.first) + "/" + std::to_string(acc.second);
  }
};

using ReduceC = ReduceContents<E, std::string, TimeWindow, SumE, NoProcessFunction, E>;
using AggregateC =
    AggregateContents<E, std::string, TimeWindow, CountSum, NoProcessFunction, std::string>;
using NoMergeC =
    AggregateContents<E, std::string, TimeWindow, CountSumNoMerge, NoProcessFunction, std::string>;
using ProcessC = ReduceContents<E, std::string, TimeWindow, SumE, Describe, std::string>;

template <typename Contents>
using SlicedOp = SlicedWindowOperator<E, std::string, KeyOfE, SlidingEventTimeWindows, Contents>;
template <typename Contents>
using FastOp = FastWindowOperator<E, std::string, KeyOfE, SlidingEventTimeWindows, Contents>;
template <typename Contents>
using GeneralOp =
    WindowOperator<E, std::string, KeyOfE, SlidingEventTimeWindows, EventTimeTrigger, Contents>;
template <typename Assigner, typename Contents>
using For = WindowOperatorFor<E, std::string, KeyOfE, Assigner, EventTimeTrigger, Contents>;

// The windowed stream's choice.
static_assert(std::is_same_v<For<SlidingEventTimeWindows, ReduceC>, SlicedOp<ReduceC>>);
static_assert(std::is_same_v<For<SlidingEventTimeWindows, AggregateC>, SlicedOp<AggregateC>>);
static_assert(std::is_same_v<For<SlidingEventTimeWindows, ProcessC>, SlicedOp<ProcessC>>);
static_assert(std::is_same_v<For<SlidingEventTimeWindows, NoMergeC>, FastOp<NoMergeC>>);
static_assert(
    std::is_same_v<For<TumblingEventTimeWindows, ReduceC>,
                   FastWindowOperator<E, std::string, KeyOfE, TumblingEventTimeWindows, ReduceC>>);

template <typename Out, typename OpT, typename Contents>
std::unique_ptr<OperatorHarness<E, Out>> Make(const SlidingEventTimeWindows& a, Contents c,
                                              int64_t lateness,
                                              const std::optional<OutputTag<E>>& tag) {
  WindowOperatorConfig<E> cfg;
  cfg.allowed_lateness = lateness;
  cfg.late_tag = tag;
  return std::make_unique<OperatorHarness<E, Out>>(
      std::make_unique<OpT>(KeyOfE{}, a, EventTimeTrigger{}, std::move(c), cfg));
}

// The three operators on one input, compared after every step.
template <typename Out, typename Contents>
class Trio {
 public:
  using Sliced = SlicedOp<Contents>;
  using Fast = FastOp<Contents>;
  using General = GeneralOp<Contents>;

  Trio(const SlidingEventTimeWindows& a, const Contents& c, int64_t lateness, bool side_output) {
    if (side_output) tag_.emplace("late");
    sliced_ = Make<Out, Sliced>(a, c, lateness, tag_);
    fast_ = Make<Out, Fast>(a, c, lateness, tag_);
    general_ = Make<Out, General>(a, c, lateness, tag_);
    if (tag_) {
      sliced_side_ = &sliced_->AddSideOutput(*tag_);
      fast_side_ = &fast_->AddSideOutput(*tag_);
      general_side_ = &general_->AddSideOutput(*tag_);
    }
    sliced_->Open();
    fast_->Open();
    general_->Open();
  }

  void Element(const E& e, Timestamp ts) {
    sliced_->ProcessElement(e, ts);
    fast_->ProcessElement(e, ts);
    general_->ProcessElement(e, ts);
  }
  void Watermark(Timestamp w) {
    sliced_->ProcessWatermark(w);
    fast_->ProcessWatermark(w);
    general_->ProcessWatermark(w);
  }
  // Compares everything observable; returns the sliced operator's output.
  std::vector<std::pair<Out, Timestamp>> Check(const std::string& where) {
    auto s = sliced_->TakeRecords();
    EXPECT_EQ(s, fast_->TakeRecords()) << where;
    EXPECT_EQ(s, general_->TakeRecords()) << where;
    if (tag_) {
      auto side = sliced_side_->TakeRecords();
      EXPECT_EQ(side, fast_side_->TakeRecords()) << where;
      EXPECT_EQ(side, general_side_->TakeRecords()) << where;
    }
    EXPECT_EQ(sliced().num_windows_with_contents(), fast().num_windows_with_contents()) << where;
    EXPECT_EQ(sliced().num_windows_with_contents(), general().num_windows_with_contents()) << where;
    EXPECT_EQ(sliced().num_event_time_timers(), fast().num_event_time_timers()) << where;
    EXPECT_EQ(sliced().num_event_time_timers(), general().num_event_time_timers()) << where;
    for (const char* c : {kNumLateRecordsDropped, kNumLateRecordsToUnconsumedSideOutput,
                          kWindowPeakLiveKeyWindows}) {
      EXPECT_EQ(sliced_->counter(c), fast_->counter(c)) << where << " " << c;
      EXPECT_EQ(sliced_->counter(c), general_->counter(c)) << where << " " << c;
    }
    return s;
  }
  void Close() {
    sliced_->Close();
    fast_->Close();
    general_->Close();
    for (const char* c : {kWindowsNotFiredAtClose, kWindowKeysNotFiredAtClose}) {
      EXPECT_EQ(sliced_->counter(c), fast_->counter(c)) << c;
      EXPECT_EQ(sliced_->counter(c), general_->counter(c)) << c;
    }
  }

  Sliced& sliced() { return sliced_->template op<Sliced>(); }
  Fast& fast() { return fast_->template op<Fast>(); }
  General& general() { return general_->template op<General>(); }

 private:
  std::optional<OutputTag<E>> tag_;
  std::unique_ptr<OperatorHarness<E, Out>> sliced_, fast_, general_;
  testing::RecordingOutput<E>* sliced_side_ = nullptr;
  testing::RecordingOutput<E>* fast_side_ = nullptr;
  testing::RecordingOutput<E>* general_side_ = nullptr;
};

struct Case {
  uint64_t seed;
  int64_t lateness;
  bool side_output;
  bool end_with_max;      // W(MAX) at the end, else Close with windows open
  bool near_max = false;  // a record near MAX half way: the per-window switch
};

template <typename Out, typename Contents>
void RunCase(const SlidingEventTimeWindows& assigner, const Contents& contents, const Case& c) {
  SCOPED_TRACE("size " + std::to_string(assigner.size()) + " slide " +
               std::to_string(assigner.slide()) + " offset " + std::to_string(assigner.offset()) +
               " seed " + std::to_string(c.seed) + " lateness " + std::to_string(c.lateness) +
               " side output " + std::to_string(c.side_output) + " W(MAX) " +
               std::to_string(c.end_with_max) + " near MAX " + std::to_string(c.near_max));
  Trio<Out, Contents> trio(assigner, contents, c.lateness, c.side_output);
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
      trio.Watermark(watermark);
    } else {
      cursor += uniform(0, 400);
      const E e("k" + std::to_string(uniform(0, 6)), static_cast<int>(uniform(1, 9)));
      const Timestamp ts = cursor - uniform(0, 4000);  // out of order, often late
      trio.Element(e, ts);
    }
    if (c.near_max && step == steps / 2) {
      EXPECT_TRUE(trio.sliced().sliced());
      trio.Element(E("k1", 5), kMaxTimestamp - uniform(0, 3));
      EXPECT_FALSE(trio.sliced().sliced());
    }
    if (c.end_with_max && step == steps - 1) trio.Watermark(kMaxTimestamp);
    trio.Check("step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
  }
  if (c.end_with_max) {
    EXPECT_EQ(trio.sliced().num_windows_with_contents(), 0u);
    EXPECT_EQ(trio.sliced().num_event_time_timers(), 0u);
    EXPECT_EQ(trio.sliced().num_panes(), 0u);
  }
  trio.Close();
}

const int64_t kLateness[] = {0, 700, 2500};

template <typename Out, typename Contents>
void RunCases(const SlidingEventTimeWindows& assigner, const Contents& contents, int seeds = 12) {
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(seeds); ++seed) {
    for (int64_t lateness : kLateness) {
      for (bool side : {false, true}) {
        RunCase<Out>(assigner, contents, Case{seed, lateness, side, seed % 3 != 0});
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// Size a multiple of the slide, not a multiple (panes of gcd), below the
// slide (gaps between windows), equal to it, with offsets.
std::vector<SlidingEventTimeWindows> Assigners() {
  return {
      SlidingEventTimeWindows::of(3s, 1s),           SlidingEventTimeWindows::of(1s, 300ms, 100ms),
      SlidingEventTimeWindows::of(1s, 400ms),        SlidingEventTimeWindows::of(2s, 500ms, -200ms),
      SlidingEventTimeWindows::of(700ms, 1s, 300ms), SlidingEventTimeWindows::of(1s, 1s),
      SlidingEventTimeWindows::of(1001ms, 7ms, 3ms)};
}

TEST(SlicedWindowOperator, ReduceMatchesPerWindowPaths) {
  for (const auto& a : Assigners()) RunCases<E>(a, ReduceC(SumE{}, NoProcessFunction{}));
}

TEST(SlicedWindowOperator, AggregateMatchesPerWindowPaths) {
  for (const auto& a : Assigners()) RunCases<std::string>(a, AggregateC(CountSum{}, {}));
}

TEST(SlicedWindowOperator, ProcessFunctionSeesTheSameContextAndWindowState) {
  for (const auto& a : Assigners()) RunCases<std::string>(a, ProcessC(SumE{}, Describe{}));
}

// A record near MAX half way: the state turns per-window (same key order,
// fired flags, window state) and everything after it still agrees.
TEST(SlicedWindowOperator, RecordNearTheEndOfTheRangeSwitchesToPerWindowSeamlessly) {
  for (const auto& a : Assigners()) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      for (int64_t lateness : kLateness) {
        RunCase<std::string>(a, ProcessC(SumE{}, Describe{}),
                             Case{seed, lateness, true, seed % 2 == 0, true});
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

// Many keys per window, and W(MAX) firing many windows at once.
TEST(SlicedWindowOperator, ManyKeysMatchPerWindowPaths) {
  Trio<E, ReduceC> trio(SlidingEventTimeWindows::of(1s, 250ms), ReduceC(SumE{}, {}), 300, true);
  std::mt19937_64 rng(7);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 20000; ++i) {
      const E e("k" + std::to_string(rng() % 5000), static_cast<int>(rng() % 9) + 1);
      trio.Element(e, round * 1000 + static_cast<Timestamp>(rng() % 1400));
    }
    trio.Check("round " + std::to_string(round));
    trio.Watermark(round * 1000 + 999);
    trio.Check("round " + std::to_string(round));
  }
  trio.Watermark(kMaxTimestamp);
  trio.Check("end");
  trio.Close();
}

// The ends of the range: the windows of Flink's assigner there (wrapped
// starts and ends, missing windows; window_fast_path_test.cc checks them
// against WindowOperator) come out of the sliced operator too, which turns
// per-window at the first such record.
TEST(SlicedWindowOperator, WindowsAtTheEndsOfTheLongRangeAreFlinks) {
  constexpr Timestamp kMin = kMinTimestamp;
  constexpr Timestamp kMax = kMaxTimestamp;
  struct Step {
    bool watermark;
    Timestamp t;
    E e;
  };
  auto run = [&](const SlidingEventTimeWindows& a, int64_t lateness,
                 const std::vector<Step>& steps) {
    Trio<std::string, ProcessC> trio(a, ProcessC(SumE{}, Describe{}), lateness, true);
    // Ordinary records first, so that there is sliced state to convert.
    trio.Element(E("a", 1), 100);
    trio.Element(E("b", 2), 120);
    trio.Watermark(50);
    trio.Check("before");
    EXPECT_TRUE(trio.sliced().sliced());
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].watermark) {
        trio.Watermark(steps[i].t);
      } else {
        trio.Element(steps[i].e, steps[i].t);
      }
      trio.Check("step " + std::to_string(i));
    }
    EXPECT_FALSE(trio.sliced().sliced());
    trio.Close();
  };
  auto el = [](const char* k, int v, Timestamp ts) { return Step{false, ts, E(k, v)}; };
  auto wm = [](Timestamp w) { return Step{true, w, E()}; };
  run(SlidingEventTimeWindows::of(10ms, 5ms), 0,
      {el("a", 1, kMin + 1), el("b", 2, kMax - 1), el("b", 4, kMax), wm(kMin + 2), wm(kMax)});
  run(SlidingEventTimeWindows::of(10ms, 5ms, 2ms), 5,
      {el("a", 1, kMax - 1), el("a", 2, kMax), el("a", 4, kMax), wm(kMax - 1), wm(kMax)});
  run(SlidingEventTimeWindows::of(10ms, 5ms, -2ms), 0,
      {el("a", 1, kMin + 1), el("a", 2, kMax - 1), wm(kMax)});
  run(SlidingEventTimeWindows::of(10ms, 3ms, 1ms), 0, {el("a", 1, kMax - 1), wm(kMax)});
  // A watermark of MAX - 1 before a record at MAX: late windows that are not
  // dropped (cleanup time MAX).
  run(SlidingEventTimeWindows::of(10ms, 5ms), 3,
      {wm(kMax - 1), el("a", 1, kMax), el("c", 1, 1000), wm(kMax)});
}

// Watermarks at the extremes with sliced state: W(MAX) with allowed lateness
// that overflows the cleanup time (windows never dropped), and records after
// W(MAX) (all late).
TEST(SlicedWindowOperator, HugeLatenessAndRecordsAfterTheLastWatermark) {
  for (int64_t lateness : {kMaxTimestamp, kMaxTimestamp - 2000}) {
    Trio<E, ReduceC> trio(SlidingEventTimeWindows::of(3s, 1s), ReduceC(SumE{}, {}), lateness, true);
    trio.Element(E("a", 1), 100);
    trio.Element(E("b", 1), 2500);
    trio.Watermark(-5000);
    trio.Watermark(1999);
    trio.Element(E("a", 2), 200);  // re-fires
    trio.Check("fired");
    trio.Watermark(kMaxTimestamp);
    trio.Check("W(MAX)");
    trio.Element(E("a", 4), 300);  // every window late now
    trio.Element(E("c", 4), 5000);
    trio.Check("after W(MAX)");
    EXPECT_TRUE(trio.sliced().sliced());
    trio.Close();
  }
}

// The (key, window) peak is the per-window path's, not the (key, pane) count.
TEST(SlicedWindowOperator, PeakLiveKeyWindowsCountsKeyWindowPairs) {
  Trio<E, ReduceC> trio(SlidingEventTimeWindows::of(1s, 100ms), ReduceC(SumE{}, {}), 0, false);
  for (int k = 0; k < 100; ++k) trio.Element(E("k" + std::to_string(k), 1), 10);
  for (int k = 0; k < 50; ++k) trio.Element(E("k" + std::to_string(k), 1), 1010);
  EXPECT_EQ(trio.sliced().num_panes(), 150u);
  trio.Watermark(99);
  trio.Check("peak");
  // [-900, 100) .. [0, 1000) hold 100 keys each, [100, 1100) .. [1000, 2000) 50.
  EXPECT_EQ(trio.sliced().num_windows_with_contents(), 9u * 100 + 10 * 50);
  trio.Watermark(kMaxTimestamp);
  trio.Check("end");
}

}  // namespace
}  // namespace tidemark
