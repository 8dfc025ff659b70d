// The interval join (operators/interval_join.h): pairs against a nested-loop
// reference at parallelism 1 and 3 for bounds around, before and after the
// left record, inclusive and exclusive; and, on one operator instance fed in
// a fixed order, Flink's rules for late records (side outputs or the
// numLateRecordsDropped counter), state cleanup and checkpoints.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/window_harness.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

struct Click {
  int64_t user;
  Timestamp ts;
};
struct View {
  int64_t user;
  Timestamp ts;
};

struct Case {
  Timestamp lower;
  Timestamp upper;
  bool lower_exclusive;
  bool upper_exclusive;
  int parallelism;
};

std::string Pair(const Click& c, const View& v) {
  return std::to_string(c.user) + ":" + std::to_string(c.ts) + "-" + std::to_string(v.ts);
}

class IntervalJoinJobTest : public ::testing::TestWithParam<Case> {};

TEST_P(IntervalJoinJobTest, EmitsEveryPairWithinTheBoundsAtTheLaterTimestamp) {
  const Case c = GetParam();
  std::vector<Click> clicks;
  std::vector<View> views;
  for (Timestamp t = 0; t < 600; t += 7) clicks.push_back({(t / 7) % 5, t});
  for (Timestamp t = 3; t < 620; t += 5) views.push_back({(t / 5) % 4, t});
  // Some views at the very time of a click of their user (bounds [0, 0]).
  for (Timestamp t = 0; t < 600; t += 14) views.push_back({(t / 7) % 5, t});
  std::stable_sort(views.begin(), views.end(),
                   [](const View& a, const View& b) { return a.ts < b.ts; });

  StreamExecutionEnvironment env;
  env.set_parallelism(c.parallelism);
  auto cs = env.from_collection(clicks).assign_timestamps_and_watermarks(
      WatermarkStrategy<Click>::for_monotonous_timestamps()
          .with_timestamp_assigner([](const Click& x, Timestamp) { return x.ts; })
          .with_periodic_emit_per_record());
  auto vs = env.from_collection(views).assign_timestamps_and_watermarks(
      WatermarkStrategy<View>::for_monotonous_timestamps()
          .with_timestamp_assigner([](const View& x, Timestamp) { return x.ts; })
          .with_periodic_emit_per_record());
  auto joined = cs.key_by([](const Click& x) { return x.user; })
                    .interval_join(vs.key_by([](const View& x) { return x.user; }))
                    .between(Duration(c.lower), Duration(c.upper));
  if (c.lower_exclusive) joined = joined.lower_bound_exclusive();
  if (c.upper_exclusive) joined = joined.upper_bound_exclusive();
  auto out = joined
                 .process([](const Click& l, const View& r, ProcessJoinContext& ctx,
                             Collector<std::string>& o) {
                   EXPECT_EQ(ctx.left_timestamp(), l.ts);
                   EXPECT_EQ(ctx.right_timestamp(), r.ts);
                   o.collect(Pair(l, r));
                 })
                 .collect();
  JobResult r = env.execute("interval join");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.CounterTotal("numLateRecordsDropped"), 0);

  std::vector<std::pair<std::string, Timestamp>> expected, actual;
  for (const Click& l : clicks)
    for (const View& v : views) {
      if (l.user != v.user) continue;
      const bool above = c.lower_exclusive ? v.ts > l.ts + c.lower : v.ts >= l.ts + c.lower;
      const bool below = c.upper_exclusive ? v.ts < l.ts + c.upper : v.ts <= l.ts + c.upper;
      if (above && below) expected.emplace_back(Pair(l, v), std::max(l.ts, v.ts));
    }
  for (const auto& item : out->items()) actual.emplace_back(item.value, item.timestamp);
  std::sort(expected.begin(), expected.end());
  std::sort(actual.begin(), actual.end());
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(actual, expected);
}

INSTANTIATE_TEST_SUITE_P(
    Bounds, IntervalJoinJobTest,
    ::testing::Values(Case{-20, 30, false, false, 1}, Case{-20, 30, false, false, 3},
                      Case{-20, 30, true, true, 3}, Case{0, 0, false, false, 3},
                      Case{5, 40, false, true, 1}, Case{5, 40, true, false, 3},
                      Case{-40, -5, false, false, 3}, Case{-40, -5, true, true, 1}));

// --- one instance, a fixed order ---

auto ClickKey = [](const Click& x) { return x.user; };
auto ViewKey = [](const View& x) { return x.user; };
auto Format = [](const Click& l, const View& r, Collector<std::string>& o) {
  o.collect(Pair(l, r));
};
using JoinOp = internal::IntervalJoinOperator<Click, View, int64_t, decltype(ClickKey),
                                              decltype(ViewKey), decltype(Format), std::string>;

std::unique_ptr<JoinOp> MakeJoin(Timestamp lower, Timestamp upper, std::string left_late = "",
                                 std::string right_late = "") {
  return std::make_unique<JoinOp>(ClickKey, ViewKey, Format,
                                  internal::IntervalJoinBounds{lower, upper, true, true},
                                  std::move(left_late), std::move(right_late));
}

TEST(IntervalJoinOperator, LateRecordsGoToTheirSideOutputsAndAreNotJoined) {
  OutputTag<Click> late_clicks("late-clicks");
  OutputTag<View> late_views("late-views");
  testing::OperatorHarness<int, std::string> h(
      MakeJoin(-10, 10, late_clicks.id(), late_views.id()));
  auto& lc = h.AddSideOutput(late_clicks);
  auto& lv = h.AddSideOutput(late_views);
  h.Open();
  JoinOp& op = h.op<JoinOp>();
  op.ProcessElement1({1, 100}, 100);
  op.ProcessElement2({1, 95}, 95);
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"1:100-95", 100}}));
  h.ProcessWatermark(100);
  op.ProcessElement2({1, 99}, 99);    // 99 < 100: late, though within the bounds
  op.ProcessElement1({1, 99}, 99);    // late too
  op.ProcessElement2({1, 100}, 100);  // == watermark: on time
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"1:100-100", 100}}));
  ASSERT_EQ(lv.TakeRecords().size(), 1u);
  ASSERT_EQ(lc.TakeRecords().size(), 1u);
  EXPECT_EQ(h.counter("numLateRecordsDropped"), 0);
}

TEST(IntervalJoinOperator, WithoutSideOutputsLateRecordsAreCountedAndABareRecordFailsTheJob) {
  testing::OperatorHarness<int, std::string> h(MakeJoin(0, 5));
  h.Open();
  JoinOp& op = h.op<JoinOp>();
  op.ProcessElement1({1, 10}, 10);  // before any watermark: never late
  h.ProcessWatermark(50);
  op.ProcessElement1({1, 20}, 20);
  op.ProcessElement2({1, 12}, 12);
  EXPECT_TRUE(h.TakeRecords().empty());
  EXPECT_EQ(h.counter("numLateRecordsDropped"), 2);
  EXPECT_THROW(op.ProcessElement1({1, 0}, kNoTimestamp), std::runtime_error);
}

TEST(IntervalJoinOperator, BuffersAreDroppedOnceTheWatermarkPassesWhatCouldStillJoin) {
  testing::OperatorHarness<int, std::string> h(MakeJoin(-10, 20));
  h.Open();
  JoinOp& op = h.op<JoinOp>();
  op.ProcessElement1({1, 100}, 100);  // joins views in [90, 120]: kept until 120
  op.ProcessElement2({2, 100}, 100);  // joins clicks in [80, 110]: kept until 110
  EXPECT_EQ(op.buffered_left(), 1u);
  EXPECT_EQ(op.buffered_right(), 1u);
  h.ProcessWatermark(109);
  EXPECT_EQ(op.buffered_right(), 1u);
  h.ProcessWatermark(110);
  EXPECT_EQ(op.buffered_right(), 0u);
  EXPECT_EQ(op.buffered_left(), 1u);
  op.ProcessElement2({1, 119}, 119);  // still joins the click at 100
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"1:100-119", 119}}));
  h.ProcessWatermark(120);
  EXPECT_EQ(op.buffered_left(), 0u);
  h.ProcessWatermark(200);
  EXPECT_EQ(op.buffered_right(), 0u);
}

TEST(IntervalJoinOperator, ACheckpointKeepsBothBuffersAndTheCleanupTimers) {
  auto h = std::make_unique<testing::OperatorHarness<int, std::string>>(MakeJoin(-5, 5));
  h->Open();
  h->op<JoinOp>().ProcessElement1({1, 100}, 100);
  h->op<JoinOp>().ProcessElement2({2, 200}, 200);
  std::string bytes;
  internal::StateWriter w(&bytes);
  h->op<JoinOp>().SnapshotState(w);
  h.reset();

  testing::OperatorHarness<int, std::string> h2(MakeJoin(-5, 5));
  h2.Open();
  internal::StateReader r(bytes);
  h2.op<JoinOp>().RestoreState(r);
  ASSERT_TRUE(r.ok()) << r.error();
  JoinOp& op = h2.op<JoinOp>();
  op.ProcessElement2({1, 103}, 103);
  op.ProcessElement1({2, 197}, 197);
  EXPECT_EQ(h2.TakeSortedRecords(), (std::vector<std::pair<std::string, Timestamp>>{
                                        {"1:100-103", 103}, {"2:197-200", 200}}));
  h2.ProcessWatermark(300);  // the restored timers drop the restored records
  EXPECT_EQ(op.buffered_left(), 0u);
  EXPECT_EQ(op.buffered_right(), 0u);
}

// At the ends of the time range (found by a review).  between(MIN, 0): a
// right record joins the left records at or after it; -MIN used to be
// undefined (in practice MIN, an empty range) and the right buffer's
// cleanup dropped another bucket, so right records stayed for good.  And a
// cleanup time that saturates at MAX (left at MAX - 5 with upper 10) must
// still drop its records at the last watermark.
TEST(IntervalJoinOperator, BoundsAndCleanupAtTheEndsOfTheRange) {
  testing::OperatorHarness<int, std::string> h(MakeJoin(kMinTimestamp, 0));
  h.Open();
  JoinOp& op = h.op<JoinOp>();
  op.ProcessElement1({1, 10}, 10);
  op.ProcessElement2({1, 5}, 5);  // 10 + MIN <= 5 <= 10 + 0
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"1:10-5", 10}}));
  op.ProcessElement1({1, 20}, 20);
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"1:20-5", 20}}));
  h.ProcessWatermark(30);
  EXPECT_EQ(op.buffered_left(), 0u);
  EXPECT_EQ(op.buffered_right(), 1u) << "a right record may join any later left one";
  h.ProcessWatermark(kMaxTimestamp);
  EXPECT_EQ(op.buffered_right(), 0u);

  testing::OperatorHarness<int, std::string> top(MakeJoin(-5, 10));
  top.Open();
  JoinOp& t = top.op<JoinOp>();
  t.ProcessElement1({1, 5}, kMaxTimestamp - 5);
  t.ProcessElement2({1, 3}, kMaxTimestamp - 3);
  EXPECT_EQ(top.TakeRecords().size(), 1u);
  top.ProcessWatermark(kMaxTimestamp - 1);
  EXPECT_EQ(t.buffered_left(), 1u) << "its cleanup time saturated at MAX";
  top.ProcessWatermark(kMaxTimestamp);
  EXPECT_EQ(t.buffered_left(), 0u);
  EXPECT_EQ(t.buffered_right(), 0u);
}

TEST(IntervalJoinApi, RejectsAnExclusiveBoundAtTheEndOfTheRange) {
  StreamExecutionEnvironment env;
  auto cs = env.from_collection(std::vector<Click>{{1, 1}});
  auto vs = env.from_collection(std::vector<View>{{1, 1}});
  auto f = [](const Click&, const View&, Collector<int>&) {};
  EXPECT_THROW(cs.key_by(ClickKey)
                   .interval_join(vs.key_by(ViewKey))
                   .between(Duration(kMaxTimestamp), Duration(kMaxTimestamp))
                   .lower_bound_exclusive()
                   .process(f),
               std::invalid_argument);
}

TEST(IntervalJoinApi, RejectsALowerBoundAboveTheUpper) {
  StreamExecutionEnvironment env;
  auto cs = env.from_collection(std::vector<Click>{{1, 1}});
  auto vs = env.from_collection(std::vector<View>{{1, 1}});
  EXPECT_THROW(
      cs.key_by(ClickKey).interval_join(vs.key_by(ViewKey)).between(Duration(5), Duration(4)),
      std::invalid_argument);
}

}  // namespace
}  // namespace tidemark
