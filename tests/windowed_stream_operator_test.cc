// Which operator the windowed stream (api/windowed_stream.h) builds:
// SlicedWindowOperator (operators/window/sliced_window_operator.h) for sliding
// event-time windows with EventTimeTrigger and reduce / aggregate with merge;
// else FastWindowOperator (operators/window/fast_window_operator.h) exactly when
// the assigner is a non-merging event-time one of TimeWindows (tumbling,
// sliding), the trigger is EventTimeTrigger itself and the function keeps one
// value per window (reduce, aggregate, with or without a process function);
// FastSessionWindowOperator (session_window_operator.h) for event-time
// sessions with EventTimeTrigger itself and the same functions;
// WindowOperator (window_operator.h) otherwise.  Each case builds a job graph
// and checks the dynamic type of the operator its window node makes.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "window_test_functions.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

using testing::CountSum;
using testing::E;
using testing::KeyOfE;
using testing::SumE;
struct ListAll {
  void operator()(const std::string& key, const TimeWindow&, const std::vector<E>& elements,
                  WindowContext&, Collector<std::string>& out) const {
    out.collect(key + " " + std::to_string(elements.size()));
  }
};
struct DescribeSum {
  void operator()(const std::string& key, const TimeWindow&, const E& sum, WindowContext&,
                  Collector<std::string>& out) const {
    out.collect(key + " " + std::to_string(sum.second));
  }
};
struct GapOfValue {
  int64_t operator()(const E& e) const { return int64_t{e.second} * 10; }
};
// Behaves as EventTimeTrigger but is another type: not the fast operator.
struct OpaqueEventTimeTrigger : EventTimeTrigger {};

// CountSum without merge (optional unless windows merge).
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
using ReduceProcessC = ReduceContents<E, std::string, TimeWindow, SumE, DescribeSum, std::string>;
using AggregateC =
    AggregateContents<E, std::string, TimeWindow, CountSum, NoProcessFunction, std::string>;
using NoMergeC =
    AggregateContents<E, std::string, TimeWindow, CountSumNoMerge, NoProcessFunction, std::string>;
template <typename Evictor>
using ListC = ListContents<E, std::string, TimeWindow, ListAll, Evictor, std::string>;

template <typename Assigner, typename Contents>
using Fast = FastWindowOperator<E, std::string, KeyOfE, Assigner, Contents>;
template <typename Contents>
using Sliced = SlicedWindowOperator<E, std::string, KeyOfE, SlidingEventTimeWindows, Contents>;
template <typename Assigner, typename Contents>
using FastSession = FastSessionWindowOperator<E, std::string, KeyOfE, Assigner, Contents>;
template <typename Assigner, typename Trigger, typename Contents>
using General = WindowOperator<E, std::string, KeyOfE, Assigner, Trigger, Contents>;

class WindowedStreamOperator : public ::testing::Test {
 protected:
  KeyedStream<E, KeyOfE> Keyed() {
    return env_.from_collection(std::vector<E>{E("a", 1)}).key_by(KeyOfE{});
  }
  // The operator the node of `stream` makes, as its subtasks would get it.
  template <typename Out>
  std::unique_ptr<OperatorBase> OperatorOf(const DataStream<Out>& stream) {
    return StreamAccess::Node(stream).make_operator();
  }
  template <typename Op, typename Out>
  bool Builds(const DataStream<Out>& stream) {
    auto op = OperatorOf(stream);
    return dynamic_cast<Op*>(op.get()) != nullptr;
  }

  StreamExecutionEnvironment env_;
};

TEST_F(WindowedStreamOperator, TumblingReduceIsFast) {
  auto s = Keyed().window(TumblingEventTimeWindows::of(1s)).reduce(SumE{});
  EXPECT_TRUE((Builds<Fast<TumblingEventTimeWindows, ReduceC>>(s)));
  // With lateness and a late side output too.
  auto late = Keyed()
                  .window(TumblingEventTimeWindows::of(1s, 100ms))
                  .allowed_lateness(2s)
                  .side_output_late_data(OutputTag<E>("late"))
                  .reduce(SumE{});
  EXPECT_TRUE((Builds<Fast<TumblingEventTimeWindows, ReduceC>>(late)));
}

TEST_F(WindowedStreamOperator, SlidingReduceAndAggregateAreSliced) {
  auto s = Keyed().window(SlidingEventTimeWindows::of(2s, 500ms)).aggregate(CountSum{});
  EXPECT_TRUE((Builds<Sliced<AggregateC>>(s)));
  auto r = Keyed()
               .window(SlidingEventTimeWindows::of(1s, 300ms, 100ms))
               .allowed_lateness(2s)
               .reduce(SumE{}, DescribeSum{});
  EXPECT_TRUE((Builds<Sliced<ReduceProcessC>>(r)));
}

TEST_F(WindowedStreamOperator, SlidingAggregateWithoutMergeIsFast) {
  auto s = Keyed().window(SlidingEventTimeWindows::of(2s, 500ms)).aggregate(CountSumNoMerge{});
  EXPECT_TRUE((Builds<Fast<SlidingEventTimeWindows, NoMergeC>>(s)));
}

TEST_F(WindowedStreamOperator, ReduceWithProcessFunctionIsFast) {
  auto s = Keyed().window(TumblingEventTimeWindows::of(1s)).reduce(SumE{}, DescribeSum{});
  EXPECT_TRUE((Builds<Fast<TumblingEventTimeWindows, ReduceProcessC>>(s)));
}

TEST_F(WindowedStreamOperator, ExplicitEventTimeTriggerIsFast) {
  auto s = Keyed()
               .window(TumblingEventTimeWindows::of(1s))
               .trigger(EventTimeTrigger::create())
               .reduce(SumE{});
  EXPECT_TRUE((Builds<Fast<TumblingEventTimeWindows, ReduceC>>(s)));
}

TEST_F(WindowedStreamOperator, TumblingProcessIsGeneral) {
  auto s = Keyed().window(TumblingEventTimeWindows::of(1s)).process(ListAll{});
  EXPECT_TRUE((Builds<General<TumblingEventTimeWindows, EventTimeTrigger, ListC<NoEvictor>>>(s)));
}

TEST_F(WindowedStreamOperator, SessionReduceAndAggregateAreFastSessions) {
  auto s = Keyed().window(EventTimeSessionWindows::with_gap(1s)).reduce(SumE{});
  EXPECT_TRUE((Builds<FastSession<EventTimeSessionWindows, ReduceC>>(s)));
  auto late = Keyed()
                  .window(EventTimeSessionWindows::with_gap(1s))
                  .allowed_lateness(2s)
                  .side_output_late_data(OutputTag<E>("late"))
                  .reduce(SumE{}, DescribeSum{});
  EXPECT_TRUE((Builds<FastSession<EventTimeSessionWindows, ReduceProcessC>>(late)));
  auto dynamic =
      Keyed().window(EventTimeSessionWindows::with_dynamic_gap(GapOfValue{})).aggregate(CountSum{});
  EXPECT_TRUE(
      (Builds<FastSession<DynamicEventTimeSessionWindows<GapOfValue>, AggregateC>>(dynamic)));
}

TEST_F(WindowedStreamOperator, SessionProcessOrOtherTriggerIsGeneral) {
  auto list = Keyed().window(EventTimeSessionWindows::with_gap(1s)).process(ListAll{});
  EXPECT_TRUE((Builds<General<EventTimeSessionWindows, EventTimeTrigger, ListC<NoEvictor>>>(list)));
  auto opaque = Keyed()
                    .window(EventTimeSessionWindows::with_gap(1s))
                    .trigger(OpaqueEventTimeTrigger{})
                    .reduce(SumE{});
  EXPECT_TRUE((Builds<General<EventTimeSessionWindows, OpaqueEventTimeTrigger, ReduceC>>(opaque)));
}

TEST_F(WindowedStreamOperator, CustomTriggerIsGeneral) {
  auto count =
      Keyed().window(TumblingEventTimeWindows::of(1s)).trigger(CountTrigger::of(3)).reduce(SumE{});
  EXPECT_TRUE((Builds<General<TumblingEventTimeWindows, CountTrigger, ReduceC>>(count)));
  // Even one that behaves exactly like EventTimeTrigger: the rule is by type.
  auto opaque = Keyed()
                    .window(SlidingEventTimeWindows::of(2s, 500ms))
                    .trigger(OpaqueEventTimeTrigger{})
                    .aggregate(CountSum{});
  EXPECT_TRUE(
      (Builds<General<SlidingEventTimeWindows, OpaqueEventTimeTrigger, AggregateC>>(opaque)));
}

TEST_F(WindowedStreamOperator, EvictorIsGeneral) {
  auto s = Keyed()
               .window(TumblingEventTimeWindows::of(1s))
               .evictor(CountEvictor::of(2))
               .process(ListAll{});
  EXPECT_TRUE(
      (Builds<General<TumblingEventTimeWindows, EventTimeTrigger, ListC<CountEvictor>>>(s)));
}

TEST_F(WindowedStreamOperator, ProcessingTimeReduceIsGeneral) {
  auto s = Keyed().window(TumblingProcessingTimeWindows::of(1s)).reduce(SumE{});
  EXPECT_TRUE((Builds<General<TumblingProcessingTimeWindows, ProcessingTimeTrigger, ReduceC>>(s)));
}

// The rule itself, at compile time.
static_assert(SlicedWindowOperatorApplies<SlidingEventTimeWindows, EventTimeTrigger, ReduceC>);
static_assert(SlicedWindowOperatorApplies<SlidingEventTimeWindows, EventTimeTrigger, AggregateC>);
static_assert(!SlicedWindowOperatorApplies<SlidingEventTimeWindows, EventTimeTrigger, NoMergeC>);
static_assert(!SlicedWindowOperatorApplies<TumblingEventTimeWindows, EventTimeTrigger, ReduceC>);
static_assert(
    !SlicedWindowOperatorApplies<SlidingEventTimeWindows, EventTimeTrigger, ListC<NoEvictor>>);
static_assert(
    !SlicedWindowOperatorApplies<SlidingEventTimeWindows, OpaqueEventTimeTrigger, ReduceC>);
static_assert(FastWindowOperatorApplies<TumblingEventTimeWindows, EventTimeTrigger, ReduceC>);
static_assert(FastWindowOperatorApplies<SlidingEventTimeWindows, EventTimeTrigger, AggregateC>);
static_assert(
    !FastWindowOperatorApplies<TumblingEventTimeWindows, EventTimeTrigger, ListC<NoEvictor>>);
static_assert(!FastWindowOperatorApplies<EventTimeSessionWindows, EventTimeTrigger, ReduceC>);
static_assert(!FastWindowOperatorApplies<TumblingEventTimeWindows, CountTrigger, ReduceC>);
static_assert(
    !FastWindowOperatorApplies<TumblingEventTimeWindows, OpaqueEventTimeTrigger, ReduceC>);
static_assert(
    !FastWindowOperatorApplies<TumblingProcessingTimeWindows, ProcessingTimeTrigger, ReduceC>);

}  // namespace
}  // namespace tidemark
