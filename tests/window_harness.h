// tests/window_harness.h
//
// The runtime's own single-threaded operator harness: the public one
// (api/testing/harness.h, Flink's KeyedOneInputStreamOperatorTestHarness)
// with the CamelCase names the runtime's tests were written against, and
// window operators built without a job.  Unlike the public harness it hands
// every watermark to the operator as it is (no valve) and takes an operator
// of one or two inputs (two-input ones are driven through op<Op>()).
// Processing time is a ManualClock moved by SetProcessingTime(), which also
// fires the due processing-time timers, as the task thread would: a timer at
// T fires at SetProcessingTime(T + 1) or later, as in Flink's runtime
// (ProcessingTimeService).  Flink's own harness (TestProcessingTimeService)
// fires it already at T; tests ported from Flink move the clock one
// millisecond further.
//
//   OperatorHarness<In, Out> h(std::make_unique<SomeOperator>(...));
//   h.AddSideOutput(late_tag);       // before Open()
//   h.Open();
//   h.ProcessElement(v, 1000);
//   h.ProcessWatermark(2999);
//   EXPECT_EQ(h.TakeRecords(), ...); // records since the last Take
#ifndef TM_TESTS_WINDOW_HARNESS_H_
#define TM_TESTS_WINDOW_HARNESS_H_

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/core/stream_element.h"
#include "tidemark/testing/harness.h"

namespace tidemark {
using namespace internal;
namespace testing {
// RecordingOutput, Emitted, OperatorTestHarnessBase, HarnessOptions ...
using namespace harness;

template <typename In, typename Out>
class OperatorHarness : public OperatorTestHarnessBase<Out> {
 public:
  // As subtask `subtask` of `parallelism` (max parallelism 128): that
  // decides the key groups a restore keeps.
  explicit OperatorHarness(std::unique_ptr<OperatorBase> op, Timestamp start_processing_time = 0,
                           int subtask = 0, int parallelism = 1)
      : OperatorTestHarnessBase<Out>(
            std::move(op),
            HarnessOptions{subtask, parallelism, 128, start_processing_time, "window-under-test"}),
        input_(dynamic_cast<InputOperator<In>*>(this->op_.get())) {}

  // Registers a recording side output for `tag`; call before Open().
  template <typename V>
  RecordingOutput<V>& AddSideOutput(const OutputTag<V>& tag) {
    return this->add_side_output(tag);
  }

  void Open() { this->open(); }
  void ProcessElement(In v, Timestamp ts) { input_->ProcessElement(std::move(v), ts); }
  void ProcessWatermark(Timestamp w) { this->op_->ProcessWatermark(w); }
  // Moves processing time to `t` and fires every processing-time timer due
  // (those registered for a time < t).
  void SetProcessingTime(Timestamp t) { this->set_processing_time(t); }
  void Finish() { this->op_->Finish(); }
  OperatorBase& base() { return *this->op_; }
  void Close() { this->op_->Close(); }

  RecordingOutput<Out>& output() { return this->main_output(); }
  std::vector<std::pair<Out, Timestamp>> TakeRecords() { return output().TakeRecords(); }
  // Same, sorted (Flink leaves the order among equal timer times open).
  std::vector<std::pair<Out, Timestamp>> TakeSortedRecords() {
    auto r = output().TakeRecords();
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    return r;
  }
  template <typename OpT>
  OpT& op() {
    return *dynamic_cast<OpT*>(this->op_.get());
  }

 private:
  InputOperator<In>* input_;
};

// --- building window operators without a job ---
// The operator the windowed stream would build (WindowOperatorFor in
// api/windowed_stream.h): SlicedWindowOperator, FastWindowOperator or
// WindowOperator.

template <typename T, typename KeyFn>
using KeyOf = std::decay_t<std::invoke_result_t<KeyFn&, const T&>>;

template <typename T, typename KeyFn, typename Assigner, typename Trigger, typename ReduceFn>
auto MakeReduceWindowOperator(KeyFn key, Assigner assigner, Trigger trigger, ReduceFn f,
                              WindowOperatorConfig<T> config = {}) {
  using K = KeyOf<T, KeyFn>;
  using C = ReduceContents<T, K, typename Assigner::WindowType, ReduceFn, NoProcessFunction, T>;
  return std::make_unique<WindowOperatorFor<T, K, KeyFn, Assigner, Trigger, C>>(
      key, assigner, trigger, C(f, NoProcessFunction{}), std::move(config));
}

template <typename T, typename Out, typename KeyFn, typename Assigner, typename Trigger,
          typename Fn, typename Evictor = NoEvictor>
auto MakeProcessWindowOperator(KeyFn key, Assigner assigner, Trigger trigger, Fn fn,
                               WindowOperatorConfig<T> config = {}, Evictor evictor = {}) {
  using K = KeyOf<T, KeyFn>;
  using C = ListContents<T, K, typename Assigner::WindowType, Fn, Evictor, Out>;
  return std::make_unique<WindowOperatorFor<T, K, KeyFn, Assigner, Trigger, C>>(
      key, assigner, trigger, C(fn, evictor), std::move(config));
}

}  // namespace testing
}  // namespace tidemark

#endif  // TM_TESTS_WINDOW_HARNESS_H_
