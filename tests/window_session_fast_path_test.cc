// FastSessionWindowOperator (operators/window/session_window_operator.h,
// key-major session state with implicit timer liveness) against
// WindowOperator, the general port of Flink's (window_operator.h), for the
// jobs the windowed stream gives the fast one: event-time sessions (fixed and
// dynamic gap) with EventTimeTrigger and reduce / aggregate contents, with and
// without a process function.  Random inputs (several keys, out-of-order
// timestamps, watermarks, allowed lateness, late side output, gap sizes,
// merges across late records, the ends of the long range) must give the same
// output in the same order, the same side output, counters and failures, and
// the same timer, contents and session counts after every step.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
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

constexpr Timestamp kMin = kMinTimestamp;
constexpr Timestamp kMax = kMaxTimestamp;

// A process function over the reduced value that shows what the context
// says: the window, who fired, the watermark and a per-key firing count
// (global state: sessions have no window state).
struct DescribeSession {
  void operator()(const std::string& key, const TimeWindow& w, const E& sum, WindowContext& ctx,
                  Collector<std::string>& out) const {
    int& firings = ctx.global_state<int>("firings");
    ++firings;
    out.collect(key + " " + w.ToString() + " sum=" + std::to_string(sum.second) +
                (ctx.fired_by_element() ? " element" : " timer") + " firing=" +
                std::to_string(firings) + " wm=" + std::to_string(ctx.current_watermark()));
  }
};

// An order-sensitive reduce (merged contents combine target first, then the
// sources in order, as Flink's heap state): a polynomial hash of the values.
struct MixE {
  E operator()(const E& a, const E& b) const {
    return E(a.first, static_cast<int>((static_cast<int64_t>(a.second) * 31 + b.second) % 1000003));
  }
};
using MixC = ReduceContents<E, std::string, TimeWindow, MixE, NoProcessFunction, E>;

// A gap from the element: its value times 150 ms.
struct GapOfValue {
  int64_t operator()(const E& e) const { return static_cast<int64_t>(e.second) * 150; }
};
using DynamicSessions = DynamicEventTimeSessionWindows<GapOfValue>;

using ReduceC = ReduceContents<E, std::string, TimeWindow, SumE, NoProcessFunction, E>;
using AggregateC =
    AggregateContents<E, std::string, TimeWindow, CountSum, NoProcessFunction, std::string>;
using ProcessC = ReduceContents<E, std::string, TimeWindow, SumE, DescribeSession, std::string>;

template <typename Assigner, typename Contents>
using FastOp = FastSessionWindowOperator<E, std::string, KeyOfE, Assigner, Contents>;
template <typename Assigner, typename Contents>
using GeneralOp = WindowOperator<E, std::string, KeyOfE, Assigner, EventTimeTrigger, Contents>;

static_assert(std::is_same_v<WindowOperatorFor<E, std::string, KeyOfE, EventTimeSessionWindows,
                                               EventTimeTrigger, ReduceC>,
                             FastOp<EventTimeSessionWindows, ReduceC>>);
static_assert(std::is_same_v<WindowOperatorFor<E, std::string, KeyOfE, DynamicSessions,
                                               EventTimeTrigger, AggregateC>,
                             FastOp<DynamicSessions, AggregateC>>);
// Another trigger, or contents that keep every element: the general operator.
static_assert(std::is_same_v<WindowOperatorFor<E, std::string, KeyOfE, EventTimeSessionWindows,
                                               ContinuousEventTimeTrigger, ReduceC>,
                             WindowOperator<E, std::string, KeyOfE, EventTimeSessionWindows,
                                            ContinuousEventTimeTrigger, ReduceC>>);

// Both operators side by side on the same input, compared after every step.
template <typename Out, typename Assigner, typename Contents>
class Pair {
 public:
  using Fast = FastOp<Assigner, Contents>;
  using General = GeneralOp<Assigner, Contents>;

  Pair(const Assigner& a, const Contents& c, int64_t lateness, bool side_output) {
    WindowOperatorConfig<E> cfg;
    cfg.allowed_lateness = lateness;
    if (side_output) cfg.late_tag.emplace("late");
    fast_ = std::make_unique<OperatorHarness<E, Out>>(
        std::make_unique<Fast>(KeyOfE{}, a, EventTimeTrigger{}, c, cfg));
    general_ = std::make_unique<OperatorHarness<E, Out>>(
        std::make_unique<General>(KeyOfE{}, a, EventTimeTrigger{}, c, cfg));
    if (side_output) {
      fast_side_ = &fast_->AddSideOutput(*cfg.late_tag);
      general_side_ = &general_->AddSideOutput(*cfg.late_tag);
    }
    fast_->Open();
    general_->Open();
  }

  // Returns false once both failed (the same error), which ends the input.
  bool Element(const E& e, Timestamp ts) {
    return Both([&](auto& h) { h.ProcessElement(e, ts); });
  }
  bool Watermark(Timestamp w) {
    return Both([&](auto& h) { h.ProcessWatermark(w); });
  }
  // Compares everything observable; returns the fast side's output.
  std::vector<std::pair<Out, Timestamp>> Check(const std::string& where) {
    auto out = fast_->TakeRecords();
    EXPECT_EQ(out, general_->TakeRecords()) << where;
    if (fast_side_ != nullptr)
      EXPECT_EQ(fast_side_->TakeRecords(), general_side_->TakeRecords()) << where;
    const Fast& f = fast_->template op<Fast>();
    const General& g = general_->template op<General>();
    EXPECT_EQ(f.num_windows_with_contents(), g.num_windows_with_contents()) << where;
    EXPECT_EQ(f.num_event_time_timers(), g.num_event_time_timers()) << where;
    EXPECT_EQ(f.num_keys_with_sessions(), g.num_keys_with_sessions()) << where;
    EXPECT_EQ(f.num_trigger_states(), g.num_trigger_states()) << where;
    for (const char* c :
         {kNumLateRecordsDropped, kNumLateRecordsToUnconsumedSideOutput, kWindowPeakLiveKeyWindows})
      EXPECT_EQ(fast_->counter(c), general_->counter(c)) << where << " " << c;
    return out;
  }
  void Close() {
    fast_->Close();
    general_->Close();
    for (const char* c : {kWindowsNotFiredAtClose, kWindowKeysNotFiredAtClose})
      EXPECT_EQ(fast_->counter(c), general_->counter(c)) << c;
  }
  const Fast& fast() { return fast_->template op<Fast>(); }

 private:
  template <typename F>
  bool Both(F&& f) {
    std::optional<std::string> fast_error, general_error;
    try {
      f(*fast_);
    } catch (const std::exception& e) {
      fast_error = e.what();
    }
    try {
      f(*general_);
    } catch (const std::exception& e) {
      general_error = e.what();
    }
    EXPECT_EQ(fast_error, general_error);
    return !fast_error && !general_error;
  }

  std::unique_ptr<OperatorHarness<E, Out>> fast_, general_;
  testing::RecordingOutput<E>* fast_side_ = nullptr;
  testing::RecordingOutput<E>* general_side_ = nullptr;
};

struct Case {
  uint64_t seed;
  int64_t lateness;
  bool side_output;
};

// Random input: keys k0..k6, timestamps that move on and are pulled back up
// to 4 s (often late, within or beyond the lateness), watermarks that jump.
template <typename Out, typename Assigner, typename Contents>
void RunCase(const Assigner& assigner, const Contents& contents, const Case& c) {
  SCOPED_TRACE("seed " + std::to_string(c.seed) + " lateness " + std::to_string(c.lateness) +
               " side output " + std::to_string(c.side_output));
  Pair<Out, Assigner, Contents> p(assigner, contents, c.lateness, c.side_output);
  std::mt19937_64 rng(c.seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  Timestamp cursor = uniform(-5000, 5000);
  Timestamp watermark = kMin;
  const int steps = 300;
  bool alive = true;
  for (int step = 0; step < steps && alive; ++step) {
    if (uniform(0, 3) == 0) {
      const Timestamp next = cursor - uniform(-500, 2500);
      if (next > watermark) watermark = next;
      alive = p.Watermark(watermark);
    } else {
      cursor += uniform(0, 400);
      const E e("k" + std::to_string(uniform(0, 6)), static_cast<int>(uniform(1, 9)));
      alive = p.Element(e, cursor - uniform(0, 4000));
    }
    if (alive && step == steps - 1) alive = p.Watermark(kMax);  // end of input
    p.Check("step " + std::to_string(step));
    if (::testing::Test::HasFailure()) return;
  }
  p.Close();
  if (alive) {
    EXPECT_EQ(p.fast().num_windows_with_contents(), 0u);
    EXPECT_EQ(p.fast().num_event_time_timers(), 0u);
  }
}

const int64_t kLateness[] = {0, 700, 2500};

template <typename Out, typename Assigner, typename Contents>
void RunCases(const Assigner& assigner, const Contents& contents) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    for (int64_t lateness : kLateness) {
      for (bool side : {false, true}) {
        RunCase<Out>(assigner, contents, Case{seed, lateness, side});
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST(SessionFastPath, ReduceMatchesGeneralPath) {
  for (Duration gap : {Duration(1ms), Duration(300ms), Duration(1s), Duration(5s)})
    RunCases<E>(EventTimeSessionWindows::with_gap(gap), ReduceC(SumE{}, NoProcessFunction{}));
}

TEST(SessionFastPath, OrderSensitiveReduceMatchesGeneralPath) {
  RunCases<E>(EventTimeSessionWindows::with_gap(1s), MixC(MixE{}, NoProcessFunction{}));
  RunCases<E>(DynamicSessions(GapOfValue{}), MixC(MixE{}, NoProcessFunction{}));
}

TEST(SessionFastPath, AggregateMatchesGeneralPath) {
  RunCases<std::string>(EventTimeSessionWindows::with_gap(700ms), AggregateC(CountSum{}, {}));
}

TEST(SessionFastPath, DynamicGapMatchesGeneralPath) {
  RunCases<E>(DynamicSessions(GapOfValue{}), ReduceC(SumE{}, NoProcessFunction{}));
  RunCases<std::string>(DynamicSessions(GapOfValue{}), AggregateC(CountSum{}, {}));
}

TEST(SessionFastPath, ProcessFunctionSeesTheSameContextAndGlobalState) {
  RunCases<std::string>(EventTimeSessionWindows::with_gap(1s), ProcessC(SumE{}, DescribeSession{}));
  RunCases<std::string>(DynamicSessions(GapOfValue{}), ProcessC(SumE{}, DescribeSession{}));
}

// Many keys, sessions opening and closing: slots are freed and reused (their
// stale timer entries must not fire the key that took the slot).
TEST(SessionFastPath, ManyKeysMatchGeneralPath) {
  for (int64_t lateness : {0, 300}) {
    Pair<E, EventTimeSessionWindows, MixC> p(EventTimeSessionWindows::with_gap(50ms),
                                             MixC(MixE{}, NoProcessFunction{}), lateness, false);
    std::mt19937_64 rng(11);
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < 5000; ++i) {
        const E e("k" + std::to_string(rng() % 3000), static_cast<int>(rng() % 9) + 1);
        ASSERT_TRUE(p.Element(e, round * 200 + static_cast<Timestamp>(rng() % 400)));
      }
      ASSERT_TRUE(p.Watermark(round * 200 + 100));
      p.Check("round " + std::to_string(round));
      if (::testing::Test::HasFailure()) return;
    }
    ASSERT_TRUE(p.Watermark(kMax));
    p.Check("end");
  }
}

// The ends of the long range: a session window [ts, ts + gap) whose end wraps
// (ts within the gap of MAX) has start > end, and the window set merges by
// Flink's sweep from then on; records at MIN (no timestamp) and MIN + 1; a
// cleanup time that overflows (no cleanup timer); watermarks MIN + x and MAX;
// merging into a late window fails the job on both paths alike.
TEST(SessionFastPath, SessionsAtTheEndsOfTheLongRangeMatchGeneralPath) {
  const Timestamp near[] = {kMin, kMin + 1,  kMin + 5,  kMin + 30, -20,      0,
                            15,   kMax - 40, kMax - 12, kMax - 5,  kMax - 1, kMax};
  const Timestamp marks[] = {kMin, kMin + 2, kMin + 20, 0, kMax - 30, kMax - 8, kMax - 1, kMax};
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    for (int64_t lateness : {int64_t{0}, int64_t{7}, int64_t{100}, kMax}) {
      SCOPED_TRACE("seed " + std::to_string(seed) + " lateness " + std::to_string(lateness));
      std::mt19937_64 rng(seed);
      auto pick = [&](auto& arr) { return arr[rng() % std::size(arr)]; };
      Pair<std::string, EventTimeSessionWindows, ProcessC> p(
          EventTimeSessionWindows::with_gap(10ms), ProcessC(SumE{}, DescribeSession{}), lateness,
          seed % 2 == 0);
      Timestamp wm = kMin;
      bool alive = true;
      for (int step = 0; step < 12 && alive; ++step) {
        if (rng() % 4 == 0) {
          wm = std::max(wm, static_cast<Timestamp>(pick(marks)));
          alive = p.Watermark(wm);
        } else {
          const Timestamp ts = JavaLongAdd(pick(near), static_cast<int64_t>(rng() % 7) - 3);
          alive =
              p.Element(E("k" + std::to_string(rng() % 2), 1 + static_cast<int>(rng() % 5)), ts);
        }
        p.Check("step " + std::to_string(step));
        if (::testing::Test::HasFailure()) return;
      }
      if (alive) p.Watermark(kMax);
      p.Check("end");
      p.Close();
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// Hand-checked: two records merge, a late one within the lateness bridges
// into the fired session and re-fires it; a record beyond the lateness goes
// to the side output.
TEST(SessionFastPath, MergesAndRefiresLikeFlink) {
  Pair<std::string, EventTimeSessionWindows, ProcessC> p(
      EventTimeSessionWindows::with_gap(5ms), ProcessC(SumE{}, DescribeSession{}), 10, true);
  ASSERT_TRUE(p.Element(E("a", 1), 2));
  ASSERT_TRUE(p.Element(E("a", 2), 7));  // [2,12)
  ASSERT_TRUE(p.Watermark(11));
  EXPECT_THAT(p.Check("fired"), ::testing::ElementsAre(std::make_pair(
                                    std::string("a TimeWindow{start=2, end=12} sum=3 timer "
                                                "firing=1 wm=11"),
                                    Timestamp{11})));
  ASSERT_TRUE(p.Element(E("a", 4), 0));  // [0,5) merges: [0,12), fired by element
  EXPECT_THAT(p.Check("late"), ::testing::ElementsAre(std::make_pair(
                                   std::string("a TimeWindow{start=0, end=12} sum=7 element "
                                               "firing=2 wm=11"),
                                   Timestamp{11})));
  ASSERT_TRUE(p.Watermark(40));
  ASSERT_TRUE(p.Element(E("a", 8), 3));  // beyond the lateness: side output
  p.Check("side");
  p.Close();
}

// Flink's MergingWindowSet.addWindow puts (new, new) when `new` equals an
// in-flight window that no merge group took: a merged session keeps the
// state window of its first window, so a record whose window is exactly the
// session resets the state window, and the contents merged so far stay
// behind under the old one, never emitted nor cleaned (WindowOperator does
// this too; the fast operator keeps them as orphans).
TEST(SessionFastPath, WindowEqualToAMergedSessionResetsItsStateWindowAsFlink) {
  for (int64_t lateness : {0, 50}) {
    Pair<E, DynamicSessions, ReduceC> p(DynamicSessions(GapOfValue{}),
                                        ReduceC(SumE{}, NoProcessFunction{}), lateness, false);
    ASSERT_TRUE(p.Element(E("a", 1), 0));    // [0,150)
    ASSERT_TRUE(p.Element(E("a", 1), 150));  // [150,300): [0,300), state window [0,150)
    ASSERT_TRUE(p.Element(E("a", 2), 0));    // [0,300) itself: state window [0,300)
    p.Check("reset");
    EXPECT_EQ(p.fast().num_windows_with_contents(), 2u);
    ASSERT_TRUE(p.Watermark(299));
    EXPECT_THAT(p.Check("fired"),
                ::testing::ElementsAre(std::make_pair(E("a", 2), Timestamp{299})));
    ASSERT_TRUE(p.Watermark(kMax));
    p.Check("end");
    EXPECT_EQ(p.fast().num_windows_with_contents(), 1u);  // the orphan
    EXPECT_EQ(p.fast().num_event_time_timers(), 0u);
    p.Close();
  }
}

}  // namespace
}  // namespace tidemark
