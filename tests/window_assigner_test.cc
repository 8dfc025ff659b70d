// Window types and assigners: docs/semantics.md 5.1-5.6, ported facts
// of Flink's TimeWindowTest and the assigner tests.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename A>
std::vector<TimeWindow> Assign(const A& a, Timestamp ts, Timestamp now = 0) {
  std::vector<TimeWindow> out;
  a.assign_windows(0, ts, now, out);
  return out;
}

TEST(TimeWindow, BasicsAndMaxTimestamp) {
  TimeWindow w(10, 20);
  EXPECT_EQ(w.max_timestamp(), 19);
  EXPECT_TRUE(w.intersects(TimeWindow(20, 30)));  // touching windows intersect
  EXPECT_TRUE(w.intersects(TimeWindow(0, 10)));
  EXPECT_FALSE(w.intersects(TimeWindow(21, 30)));
  EXPECT_FALSE(w.intersects(TimeWindow(0, 9)));
  EXPECT_EQ(w.cover(TimeWindow(15, 40)), TimeWindow(10, 40));
  EXPECT_EQ(w.cover(TimeWindow(0, 5)), TimeWindow(0, 20));
}

TEST(TimeWindow, GetWindowStartWithOffsetSpecExamples) {
  // size 7, offset 0
  EXPECT_EQ(GetWindowStartWithOffset(-8, 0, 7), -14);
  EXPECT_EQ(GetWindowStartWithOffset(-7, 0, 7), -7);
  EXPECT_EQ(GetWindowStartWithOffset(-1, 0, 7), -7);
  EXPECT_EQ(GetWindowStartWithOffset(6, 0, 7), 0);
  EXPECT_EQ(GetWindowStartWithOffset(0, 0, 7), 0);
  EXPECT_EQ(GetWindowStartWithOffset(7, 0, 7), 7);
  // offset 3
  EXPECT_EQ(GetWindowStartWithOffset(2, 3, 7), -4);
  EXPECT_EQ(GetWindowStartWithOffset(3, 3, 7), 3);
  // offset -2
  EXPECT_EQ(GetWindowStartWithOffset(-3, -2, 7), -9);
  EXPECT_EQ(GetWindowStartWithOffset(4, -2, 7), -2);
  EXPECT_EQ(GetWindowStartWithOffset(7, -2, 7), 5);
  // Daily windows aligned to UTC+8 midnight.
  EXPECT_EQ(GetWindowStartWithOffset(1470902048450, -28800000, 86400000), 1470844800000);
}

TEST(TimeWindow, MergeWindowsTouchingAndSeparate) {
  std::vector<TimeWindow> in{{10, 20}, {0, 5}, {20, 30}, {40, 50}, {45, 46}, {60, 70}};
  std::vector<TimeWindow> group;
  std::vector<std::pair<TimeWindow, std::vector<TimeWindow>>> merges;
  MergeTimeWindows(in, group, [&](const TimeWindow& c, const std::vector<TimeWindow>& m) {
    merges.emplace_back(c, m);
  });
  ASSERT_EQ(merges.size(), 2u);
  EXPECT_EQ(merges[0].first, TimeWindow(10, 30));
  EXPECT_THAT(merges[0].second, ElementsAre(TimeWindow(10, 20), TimeWindow(20, 30)));
  EXPECT_EQ(merges[1].first, TimeWindow(40, 50));
}

TEST(TumblingEventTimeWindows, AssignsWithOffsetsAndNegativeTimestamps) {
  auto a = TumblingEventTimeWindows::of(5000ms);
  EXPECT_THAT(Assign(a, 0), ElementsAre(TimeWindow(0, 5000)));
  EXPECT_THAT(Assign(a, 4999), ElementsAre(TimeWindow(0, 5000)));
  EXPECT_THAT(Assign(a, 5000), ElementsAre(TimeWindow(5000, 10000)));
  EXPECT_THAT(Assign(a, -1), ElementsAre(TimeWindow(-5000, 0)));
  EXPECT_THAT(Assign(a, -5000), ElementsAre(TimeWindow(-5000, 0)));
  auto off = TumblingEventTimeWindows::of(5000ms, 100ms);
  EXPECT_THAT(Assign(off, 100), ElementsAre(TimeWindow(100, 5100)));
  EXPECT_THAT(Assign(off, 99), ElementsAre(TimeWindow(-4900, 100)));
  auto neg = TumblingEventTimeWindows::of(5000ms, -100ms);
  EXPECT_THAT(Assign(neg, 0), ElementsAre(TimeWindow(-100, 4900)));
  auto daily = TumblingEventTimeWindows::of(24h, -8h);
  EXPECT_THAT(Assign(daily, 1470902048450), ElementsAre(TimeWindow(1470844800000, 1470931200000)));
}

// window_of, the window operators' path for this one-window assigner (and,
// through assign_windows, every other's): the window of each record, whether
// the window of the record before is reused or computed, with an offset and
// at the end of the long range.
TEST(TumblingEventTimeWindows, WindowOfGivesEachRecordsWindow) {
  const auto a = TumblingEventTimeWindows::of(5000ms);
  EXPECT_EQ(a.window_of(0, 0), TimeWindow(0, 5000));
  EXPECT_EQ(a.window_of(4999, 0), TimeWindow(0, 5000));  // the window before, reused
  EXPECT_EQ(a.window_of(5000, 0), TimeWindow(5000, 10000));
  EXPECT_EQ(a.window_of(-1, 0), TimeWindow(-5000, 0));
  EXPECT_EQ(a.window_of(12345, 0), TimeWindow(10000, 15000));
  EXPECT_EQ(a.window_of(12346, 0), TimeWindow(10000, 15000));
  // [MAX - 807, MIN + 4192): the end wraps as Java's long does.
  EXPECT_EQ(a.window_of(kMaxTimestamp, 0), TimeWindow(kMaxTimestamp - 807, kMinTimestamp + 4192));
  EXPECT_EQ(a.window_of(kMaxTimestamp - 1, 0),
            TimeWindow(kMaxTimestamp - 807, kMinTimestamp + 4192));
  EXPECT_EQ(a.window_of(3, 0), TimeWindow(0, 5000));
  const auto off = TumblingEventTimeWindows::of(5000ms, -100ms);
  EXPECT_EQ(off.window_of(0, 0), TimeWindow(-100, 4900));
  EXPECT_EQ(off.window_of(4899, 0), TimeWindow(-100, 4900));
  EXPECT_EQ(off.window_of(4900, 0), TimeWindow(4900, 9900));
  EXPECT_THROW(off.window_of(kNoTimestamp, 0), std::runtime_error);
}

// The window of the record before is reused only where Flink's formula
// gives it to every timestamp in it.  Within a window of MIN (offset > 0) or
// MAX (offset < 0), ts - offset wraps as Java's long does, and timestamps of
// one aligned interval get different windows ([MAX - 4, MIN + 5) for MIN + 1
// with size 10 and offset 3, [MIN + 1, MIN + 11) for MIN + 3): whatever came
// before, each record gets the window an assigner that saw nothing else gives.
TEST(TumblingEventTimeWindows, WindowOfNearTheEndsOfTheRangeIsTheFormulasWhateverCameBefore) {
  std::vector<Timestamp> ts;
  for (int64_t d = 1; d <= 40; ++d) {
    ts.push_back(kMinTimestamp + d);
    ts.push_back(kMaxTimestamp - d + 1);
  }
  ts.push_back(0);
  int compared = 0;
  for (int64_t offset : {3, -3, 7, -7, 0}) {
    const auto of = [&] { return TumblingEventTimeWindows::of(Duration(10), Duration(offset)); };
    for (Timestamp before : ts) {
      const auto shared = of();
      shared.window_of(before, 0);
      for (Timestamp t : ts) {
        const TimeWindow fresh = of().window_of(t, 0);
        ASSERT_EQ(shared.window_of(t, 0), fresh)
            << "offset " << offset << ", " << t << " after " << before;
        shared.window_of(before, 0);  // before again, then the next
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 5 * 81 * 81);
  // Flink's windows at the ends, for the record: size 10, offset 3.
  const auto a = TumblingEventTimeWindows::of(Duration(10), Duration(3));
  EXPECT_EQ(a.window_of(kMinTimestamp + 3, 0), TimeWindow(kMinTimestamp + 1, kMinTimestamp + 11));
  EXPECT_EQ(a.window_of(kMinTimestamp + 1, 0), TimeWindow(kMaxTimestamp - 4, kMinTimestamp + 5));
}

// The two windows assigned last are both kept (records out of order near a
// window's end alternate between it and the next one): whichever two came
// before, in either order, each record gets the window an assigner that saw
// nothing else gives, near the ends of the range too.
TEST(TumblingEventTimeWindows, WindowOfAfterAnyTwoWindowsIsTheFormulas) {
  std::vector<Timestamp> ts = {0, 9, 10, 11, 19, 20, -1, -10, -11};
  for (int64_t d = 1; d <= 12; ++d) {
    ts.push_back(kMinTimestamp + d);
    ts.push_back(kMaxTimestamp - d + 1);
  }
  int compared = 0;
  for (int64_t offset : {3, -3, 0}) {
    const auto of = [&] { return TumblingEventTimeWindows::of(Duration(10), Duration(offset)); };
    for (Timestamp first : ts) {
      for (Timestamp second : ts) {
        for (Timestamp t : ts) {
          const auto shared = of();
          shared.window_of(first, 0);
          shared.window_of(second, 0);
          ASSERT_EQ(shared.window_of(t, 0), of().window_of(t, 0))
              << "offset " << offset << ", " << t << " after " << first << ", " << second;
          // And back: the record before is now the window before the last.
          ASSERT_EQ(shared.window_of(second, 0), of().window_of(second, 0))
              << "offset " << offset << ", " << second << " after " << first << ", " << second
              << ", " << t;
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * 33 * 33 * 33);
  // Alternating between two windows, then a third, then back.
  const auto a = TumblingEventTimeWindows::of(Duration(10));
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(a.window_of(9 - i, 0), TimeWindow(0, 10));
    EXPECT_EQ(a.window_of(10 + i, 0), TimeWindow(10, 20));
  }
  EXPECT_EQ(a.window_of(25, 0), TimeWindow(20, 30));
  EXPECT_EQ(a.window_of(5, 0), TimeWindow(0, 10));
  EXPECT_EQ(a.window_of(15, 0), TimeWindow(10, 20));
  EXPECT_EQ(a.window_of(29, 0), TimeWindow(20, 30));
}

TEST(TumblingEventTimeWindows, RejectsInvalidParametersWithMessage) {
  EXPECT_THROW(TumblingEventTimeWindows::of(0ms), std::invalid_argument);
  EXPECT_THROW(TumblingEventTimeWindows::of(-1ms), std::invalid_argument);
  EXPECT_THROW(TumblingEventTimeWindows::of(10ms, 10ms), std::invalid_argument);
  EXPECT_THROW(TumblingEventTimeWindows::of(10ms, -10ms), std::invalid_argument);
  try {
    TumblingEventTimeWindows::of(1000ms, 2000ms);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("abs(offset) < size"));
  }
  EXPECT_NO_THROW(TumblingEventTimeWindows::of(10ms, 9ms));
}

TEST(TumblingEventTimeWindows, RejectsRecordWithoutTimestamp) {
  auto a = TumblingEventTimeWindows::of(5000ms);
  try {
    Assign(a, kNoTimestamp);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("assign_timestamps_and_watermarks"));
  }
}

TEST(SlidingEventTimeWindows, DescendingStartOrder) {
  auto a = SlidingEventTimeWindows::of(5000ms, 1000ms);
  EXPECT_THAT(Assign(a, 0),
              ElementsAre(TimeWindow(0, 5000), TimeWindow(-1000, 4000), TimeWindow(-2000, 3000),
                          TimeWindow(-3000, 2000), TimeWindow(-4000, 1000)));
  EXPECT_THAT(Assign(a, 4999),
              ElementsAre(TimeWindow(4000, 9000), TimeWindow(3000, 8000), TimeWindow(2000, 7000),
                          TimeWindow(1000, 6000), TimeWindow(0, 5000)));
  // Size not a multiple of slide.
  auto b = SlidingEventTimeWindows::of(3000ms, 2000ms);
  EXPECT_THAT(Assign(b, 2500), ElementsAre(TimeWindow(2000, 5000), TimeWindow(0, 3000)));
  EXPECT_THAT(Assign(b, 3500), ElementsAre(TimeWindow(2000, 5000)));
  // With offset, negative timestamp.
  auto c = SlidingEventTimeWindows::of(6000ms, 3000ms, 500ms);
  EXPECT_THAT(Assign(c, -1), ElementsAre(TimeWindow(-2500, 3500), TimeWindow(-5500, 500)));
  // Document S5: 10 s windows sliding 5 s.
  auto d = SlidingEventTimeWindows::of(10s, 5s);
  EXPECT_THAT(Assign(d, 7000), ElementsAre(TimeWindow(5000, 15000), TimeWindow(0, 10000)));
}

TEST(SlidingEventTimeWindows, RejectsInvalidParameters) {
  EXPECT_THROW(SlidingEventTimeWindows::of(0ms, 1000ms), std::invalid_argument);
  EXPECT_THROW(SlidingEventTimeWindows::of(1000ms, 0ms), std::invalid_argument);
  EXPECT_THROW(SlidingEventTimeWindows::of(1000ms, -1ms), std::invalid_argument);
  EXPECT_THROW(SlidingEventTimeWindows::of(5000ms, 1000ms, 1000ms), std::invalid_argument);
  EXPECT_THROW(SlidingEventTimeWindows::of(5000ms, 1000ms, -1000ms), std::invalid_argument);
  EXPECT_THROW(SlidingEventTimeWindows::of(100000000ms, 1ms), std::invalid_argument);
  try {
    SlidingEventTimeWindows::of(1000ms, 10ms, 20ms);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("abs(offset) < slide and size > 0"));
  }
}

TEST(EventTimeSessionWindows, AssignsGapWindowAndRejectsBadGap) {
  auto a = EventTimeSessionWindows::with_gap(5000ms);
  EXPECT_THAT(Assign(a, 2000), ElementsAre(TimeWindow(2000, 7000)));
  EXPECT_THAT(Assign(a, -3000), ElementsAre(TimeWindow(-3000, 2000)));
  EXPECT_THROW(EventTimeSessionWindows::with_gap(0ms), std::invalid_argument);
  EXPECT_THROW(EventTimeSessionWindows::with_gap(-5ms), std::invalid_argument);
  EXPECT_TRUE(EventTimeSessionWindows::kIsMerging);
}

TEST(EventTimeSessionWindows, DynamicGap) {
  auto a = EventTimeSessionWindows::with_dynamic_gap(
      [](const int& v) { return std::chrono::milliseconds(v); });
  std::vector<TimeWindow> out;
  a.assign_windows(300, 1000, 0, out);
  EXPECT_THAT(out, ElementsAre(TimeWindow(1000, 1300)));
  out.clear();
  EXPECT_THROW(a.assign_windows(0, 1000, 0, out), std::invalid_argument);
  auto b = EventTimeSessionWindows::with_dynamic_gap([](const int& v) { return int64_t{v} * 2; });
  b.assign_windows(10, 5, 0, out);
  EXPECT_THAT(out, ElementsAre(TimeWindow(5, 25)));
}

TEST(GlobalWindows, OneWindowMaxTimestamp) {
  auto g = GlobalWindows::create();
  std::vector<GlobalWindow> out;
  g.assign_windows(1, 123, 0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].max_timestamp(), kMaxTimestamp);
  EXPECT_FALSE(GlobalWindows::kIsEventTime);
}

TEST(ProcessingTimeWindows, UseProcessingTimeNotRecordTime) {
  auto t = TumblingProcessingTimeWindows::of(1000ms);
  EXPECT_THAT(Assign(t, /*ts=*/kNoTimestamp, /*now=*/2500), ElementsAre(TimeWindow(2000, 3000)));
  auto s = SlidingProcessingTimeWindows::of(2000ms, 1000ms);
  EXPECT_THAT(Assign(s, 99999, 2500), ElementsAre(TimeWindow(2000, 4000), TimeWindow(1000, 3000)));
  EXPECT_THROW(TumblingProcessingTimeWindows::of(0ms), std::invalid_argument);
  EXPECT_THROW(SlidingProcessingTimeWindows::of(10ms, 0ms), std::invalid_argument);
}

// ---------------------------------------------------------------------------
// The ends of the long range (issue 10, item 4).  Flink computes windows in
// Java long arithmetic, which wraps; the expected windows below are what
// Flink's assigners return for these timestamps (worked out with Java's
// wrapping `+`, `-` and truncating `%`), and each assignment is bounded work.

constexpr Timestamp kMin = kMinTimestamp;
constexpr Timestamp kMax = kMaxTimestamp;

TEST(TimeWindow, MaxTimestampWrapsLikeJava) {
  EXPECT_EQ(TimeWindow(kMax - 9, kMin).max_timestamp(), kMax);  // end - 1 wraps
  EXPECT_EQ(TimeWindow(kMax - 7, kMin + 2).max_timestamp(), kMin + 1);
  EXPECT_EQ(TimeWindow(kMin, kMin + 1).max_timestamp(), kMin);
  EXPECT_EQ(GetWindowStartWithOffset(kMin + 1, 0, 10), kMax - 1);  // MIN - 2 wraps
  EXPECT_EQ(GetWindowStartWithOffset(kMin + 1, 3, 10), kMax - 4);  // ts - offset wraps first
  EXPECT_EQ(GetWindowStartWithOffset(kMax, -2, 5), kMax - 3);      // and near MAX too
  EXPECT_EQ(GetWindowStartWithOffset(kMax, 0, 10), kMax - 7);
}

TEST(TumblingEventTimeWindows, WindowsAtTheEndsOfTheLongRangeAreFlinks) {
  auto a = TumblingEventTimeWindows::of(10ms);
  EXPECT_THROW(Assign(a, kMin), std::runtime_error);  // the no-timestamp marker
  EXPECT_THAT(Assign(a, kMin + 1), ElementsAre(TimeWindow(kMax - 1, kMin + 8)));
  EXPECT_THAT(Assign(a, kMax - 1), ElementsAre(TimeWindow(kMax - 7, kMin + 2)));
  EXPECT_THAT(Assign(a, kMax), ElementsAre(TimeWindow(kMax - 7, kMin + 2)));
  auto off = TumblingEventTimeWindows::of(10ms, 3ms);
  EXPECT_THROW(Assign(off, kMin), std::runtime_error);
  EXPECT_THAT(Assign(off, kMin + 1), ElementsAre(TimeWindow(kMax - 4, kMin + 5)));
  EXPECT_THAT(Assign(off, kMax - 1), ElementsAre(TimeWindow(kMax - 4, kMin + 5)));
  EXPECT_THAT(Assign(off, kMax), ElementsAre(TimeWindow(kMax - 4, kMin + 5)));
  // The cached last window is not mistaken for a wrapped one.
  auto c = TumblingEventTimeWindows::of(10ms);
  EXPECT_THAT(Assign(c, kMax - 1), ElementsAre(TimeWindow(kMax - 7, kMin + 2)));
  EXPECT_THAT(Assign(c, kMin + 1), ElementsAre(TimeWindow(kMax - 1, kMin + 8)));
  EXPECT_THAT(Assign(c, 5), ElementsAre(TimeWindow(0, 10)));
  EXPECT_THAT(Assign(c, kMax), ElementsAre(TimeWindow(kMax - 7, kMin + 2)));
}

TEST(SlidingEventTimeWindows, WindowsAtTheEndsOfTheLongRangeAreFlinks) {
  auto a = SlidingEventTimeWindows::of(10ms, 5ms);
  EXPECT_THROW(Assign(a, kMin), std::runtime_error);  // the no-timestamp marker
  // Starts wrap to near MAX, the ends are the true ones.
  EXPECT_THAT(Assign(a, kMin + 1),
              ElementsAre(TimeWindow(kMax - 1, kMin + 8), TimeWindow(kMax - 6, kMin + 3)));
  // Ends wrap to near MIN.
  EXPECT_THAT(Assign(a, kMax - 1),
              ElementsAre(TimeWindow(kMax - 2, kMin + 7), TimeWindow(kMax - 7, kMin + 2)));
  EXPECT_THAT(Assign(a, kMax),
              ElementsAre(TimeWindow(kMax - 2, kMin + 7), TimeWindow(kMax - 7, kMin + 2)));
  auto off = SlidingEventTimeWindows::of(10ms, 5ms, 2ms);
  EXPECT_THAT(Assign(off, kMin + 1),
              ElementsAre(TimeWindow(kMax, kMin + 9), TimeWindow(kMax - 5, kMin + 4)));
  EXPECT_THAT(Assign(off, kMax - 1),
              ElementsAre(TimeWindow(kMax - 5, kMin + 4), TimeWindow(kMax - 10, kMax)));
  EXPECT_THAT(Assign(off, kMax),
              ElementsAre(TimeWindow(kMax, kMin + 9), TimeWindow(kMax - 5, kMin + 4)));
  // t - size wraps, the first start does not: Flink's loop runs zero times.
  auto neg = SlidingEventTimeWindows::of(10ms, 5ms, -2ms);
  EXPECT_THAT(Assign(neg, kMin + 1), ::testing::IsEmpty());
  EXPECT_THAT(Assign(neg, kMax - 1),
              ElementsAre(TimeWindow(kMax - 3, kMin + 6), TimeWindow(kMax - 8, kMin + 1)));
  EXPECT_THAT(Assign(neg, kMax),
              ElementsAre(TimeWindow(kMax - 3, kMin + 6), TimeWindow(kMax - 8, kMin + 1)));
  // An end that wraps to exactly MIN: max_timestamp MAX.
  auto odd = SlidingEventTimeWindows::of(10ms, 3ms, 1ms);
  EXPECT_THAT(Assign(odd, kMax - 1),
              ElementsAre(TimeWindow(kMax - 3, kMin + 6), TimeWindow(kMax - 6, kMin + 3),
                          TimeWindow(kMax - 9, kMin)));
  EXPECT_THAT(Assign(odd, kMin + 1), ::testing::IsEmpty());
  // Processing time: the same loop over the clock.
  auto pt = SlidingProcessingTimeWindows::of(10ms, 5ms);
  EXPECT_THAT(Assign(pt, 0, /*now=*/kMin + 1),
              ElementsAre(TimeWindow(kMax - 1, kMin + 8), TimeWindow(kMax - 6, kMin + 3)));
  EXPECT_THAT(Assign(pt, 0, /*now=*/kMax),
              ElementsAre(TimeWindow(kMax - 2, kMin + 7), TimeWindow(kMax - 7, kMin + 2)));
  EXPECT_THAT(Assign(TumblingProcessingTimeWindows::of(10ms), 0, /*now=*/kMin + 1),
              ElementsAre(TimeWindow(kMax - 1, kMin + 8)));
}

// Where Flink's loop would walk about 2^64 / slide starts around the whole
// range (and run out of memory), the assignment fails at once.
TEST(SlidingEventTimeWindows, LoopThatWouldWrapAroundTheRangeFailsInsteadOfRunningAway) {
  // The first start wraps (MIN - 2), the bound t - size (MIN) does not.
  try {
    Assign(SlidingEventTimeWindows::of(1ms, 5ms), kMin + 1);
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("wraps around the long range"));
  }
  // A start steps below MIN while above the bound: MIN + 12 is in
  // [MIN + 8, MIN + 18) and [MIN + 3, MIN + 13); the next start, MIN - 2,
  // wraps to MAX - 1 > MIN + 2.
  EXPECT_THROW(Assign(SlidingEventTimeWindows::of(10ms, 5ms), kMin + 12), std::runtime_error);
  EXPECT_THROW(Assign(SlidingProcessingTimeWindows::of(10ms, 5ms), 0, kMin + 12),
               std::runtime_error);
  // Just above that: no wrap, the two windows.
  EXPECT_THAT(Assign(SlidingEventTimeWindows::of(10ms, 5ms), kMin + 13),
              ElementsAre(TimeWindow(kMin + 13, kMin + 23), TimeWindow(kMin + 8, kMin + 18)));
}

TEST(EventTimeSessionWindows, WindowsAtTheEndsOfTheLongRangeAreFlinks) {
  auto a = EventTimeSessionWindows::with_gap(10ms);
  // Flink's session assigners have no MIN check: [MIN, MIN + gap).
  EXPECT_THAT(Assign(a, kMin), ElementsAre(TimeWindow(kMin, kMin + 10)));
  EXPECT_THAT(Assign(a, kMin + 1), ElementsAre(TimeWindow(kMin + 1, kMin + 11)));
  EXPECT_THAT(Assign(a, kMax - 1), ElementsAre(TimeWindow(kMax - 1, kMin + 8)));
  EXPECT_THAT(Assign(a, kMax), ElementsAre(TimeWindow(kMax, kMin + 9)));
  auto d = EventTimeSessionWindows::with_dynamic_gap([](const int&) { return int64_t{10}; });
  EXPECT_THAT(Assign(d, kMin), ElementsAre(TimeWindow(kMin, kMin + 10)));
  EXPECT_THAT(Assign(d, kMin + 1), ElementsAre(TimeWindow(kMin + 1, kMin + 11)));
  EXPECT_THAT(Assign(d, kMax - 1), ElementsAre(TimeWindow(kMax - 1, kMin + 8)));
  EXPECT_THAT(Assign(d, kMax), ElementsAre(TimeWindow(kMax, kMin + 9)));
}

TEST(MergingWindowSet, AddMergeRetire) {
  MergingWindowSet set;
  int calls = 0;
  auto no_merge = [&](const TimeWindow&, const std::vector<TimeWindow>&, const TimeWindow&,
                      const std::vector<TimeWindow>&) { ++calls; };
  EXPECT_EQ(set.add_window(TimeWindow(0, 10), no_merge), TimeWindow(0, 10));
  EXPECT_EQ(set.add_window(TimeWindow(20, 30), no_merge), TimeWindow(20, 30));
  EXPECT_EQ(calls, 0);
  // Inside an existing window: nothing changes, no callback.
  EXPECT_EQ(set.add_window(TimeWindow(2, 8), no_merge), TimeWindow(0, 10));
  EXPECT_EQ(calls, 0);
  // Extends [0,10): merge callback with the old window, state window [0,10).
  TimeWindow cover, sw;
  std::vector<TimeWindow> merged, merged_sw;
  auto rec = [&](const TimeWindow& c, const std::vector<TimeWindow>& m, const TimeWindow& s,
                 const std::vector<TimeWindow>& ms) {
    cover = c;
    merged = m;
    sw = s;
    merged_sw = ms;
    ++calls;
  };
  EXPECT_EQ(set.add_window(TimeWindow(5, 15), rec), TimeWindow(0, 15));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(cover, TimeWindow(0, 15));
  EXPECT_THAT(merged, ElementsAre(TimeWindow(0, 10)));
  EXPECT_EQ(sw, TimeWindow(0, 10));
  EXPECT_TRUE(merged_sw.empty());
  ASSERT_NE(set.get_state_window(TimeWindow(0, 15)), nullptr);
  EXPECT_EQ(*set.get_state_window(TimeWindow(0, 15)), TimeWindow(0, 10));
  // Bridges [0,15) and [20,30).
  EXPECT_EQ(set.add_window(TimeWindow(14, 21), rec), TimeWindow(0, 30));
  EXPECT_EQ(calls, 2);
  EXPECT_THAT(merged, ElementsAre(TimeWindow(0, 15), TimeWindow(20, 30)));
  EXPECT_EQ(sw, TimeWindow(0, 10));
  EXPECT_THAT(merged_sw, ElementsAre(TimeWindow(20, 30)));
  EXPECT_EQ(set.size(), 1u);
  set.retire_window(TimeWindow(0, 30));
  EXPECT_TRUE(set.empty());
  EXPECT_THROW(set.retire_window(TimeWindow(0, 30)), std::logic_error);
}

}  // namespace
}  // namespace tidemark

namespace tidemark {
namespace {

TEST(TumblingEventTimeWindows, StaggerNaturalShiftsByFirstProcessingTime) {
  auto a = TumblingEventTimeWindows::of(std::chrono::milliseconds(1000),
                                        std::chrono::milliseconds(0), WindowStagger::kNatural);
  std::vector<TimeWindow> out;
  a.assign_windows(0, 5000, /*now=*/12345, out);  // stagger offset 345, fixed from now on
  a.assign_windows(0, 5000, /*now=*/99999, out);
  EXPECT_THAT(out, ::testing::ElementsAre(TimeWindow(4345, 5345), TimeWindow(4345, 5345)));
  auto r = TumblingEventTimeWindows::of(std::chrono::milliseconds(1000),
                                        std::chrono::milliseconds(0), WindowStagger::kRandom);
  out.clear();
  r.assign_windows(0, 5000, 0, out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_LE(out[0].start, 5000);
  EXPECT_GT(out[0].end, 5000);
  EXPECT_EQ(out[0].end - out[0].start, 1000);
}

}  // namespace
}  // namespace tidemark
