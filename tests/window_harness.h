// tests/window_harness.h
//
// A deterministic, single-threaded harness for one operator instance (Flink's
// KeyedOneInputStreamOperatorTestHarness): the test feeds records and
// watermarks one by one and reads, in order, what the operator emitted on its
// main output and side outputs.  Processing time is a ManualClock moved by
// SetProcessingTime(), which also fires the due processing-time timers, as
// the task thread would: a timer at T fires at SetProcessingTime(T + 1) or
// later, as in Flink's runtime (ProcessingTimeService).  Flink's own harness
// (TestProcessingTimeService) fires it already at T; tests ported from Flink
// move the clock one millisecond further.
//
//   auto h = MakeHarness<In, Out>(std::make_unique<SomeOperator>(...));
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

namespace tidemark {
using namespace internal;
namespace testing {

template <typename T>
struct Emitted {
  enum Kind { kRecord, kWatermark, kStatus };
  Kind kind;
  std::optional<T> value;       // records only
  Timestamp ts = kNoTimestamp;  // record timestamp or watermark
};

// Records everything an operator emits, in order.
template <typename T>
class RecordingOutput final : public Output<T> {
 public:
  void Collect(T&& v, Timestamp ts) override {
    events_.push_back({Emitted<T>::kRecord, std::move(v), ts});
  }
  void EmitWatermark(Timestamp w) override {
    events_.push_back({Emitted<T>::kWatermark, std::nullopt, w});
  }
  void EmitStatus(WatermarkStatus s) override {
    events_.push_back({Emitted<T>::kStatus, std::nullopt, static_cast<Timestamp>(s)});
  }
  std::vector<Emitted<T>>& events() { return events_; }

  // The records emitted since the last call, as (value, timestamp).
  std::vector<std::pair<T, Timestamp>> TakeRecords() {
    std::vector<std::pair<T, Timestamp>> out;
    for (size_t i = taken_; i < events_.size(); ++i)
      if (events_[i].kind == Emitted<T>::kRecord)
        out.emplace_back(*events_[i].value, events_[i].ts);
    taken_ = events_.size();
    return out;
  }
  std::vector<Timestamp> Watermarks() const {
    std::vector<Timestamp> out;
    for (const auto& e : events_)
      if (e.kind == Emitted<T>::kWatermark) out.push_back(e.ts);
    return out;
  }

 private:
  std::vector<Emitted<T>> events_;
  size_t taken_ = 0;
};

template <typename In, typename Out>
class OperatorHarness {
 public:
  // As subtask `subtask` of `parallelism` (max parallelism 128): that
  // decides the key groups a restore keeps.
  explicit OperatorHarness(std::unique_ptr<OperatorBase> op, Timestamp start_processing_time = 0,
                           int subtask = 0, int parallelism = 1)
      : op_(std::move(op)),
        input_(dynamic_cast<InputOperator<In>*>(op_.get())),
        clock_(start_processing_time),
        timers_(&clock_),
        metrics_("test", subtask, parallelism, 1),
        ctx_("window-under-test", subtask, parallelism, 128, &metrics_, &timers_, &config_,
             nullptr) {
    op_->set_output(&main_);
  }
  // The operator goes first: it may cancel timers in the service.
  ~OperatorHarness() { op_.reset(); }
  OperatorHarness(const OperatorHarness&) = delete;
  OperatorHarness& operator=(const OperatorHarness&) = delete;

  // Registers a recording side output for `tag`; call before Open().
  template <typename V>
  RecordingOutput<V>& AddSideOutput(const OutputTag<V>& tag) {
    auto out = std::make_unique<RecordingOutput<V>>();
    RecordingOutput<V>* raw = out.get();
    op_->set_side_output(tag.id(), raw);
    side_.push_back(std::move(out));
    return *raw;
  }

  void Open() { op_->Open(ctx_); }
  void ProcessElement(In v, Timestamp ts) { input_->ProcessElement(std::move(v), ts); }
  void ProcessWatermark(Timestamp w) { op_->ProcessWatermark(w); }
  // Moves processing time to `t` and fires every processing-time timer due
  // (those registered for a time < t).
  void SetProcessingTime(Timestamp t) {
    clock_.Set(t);
    timers_.FireDue(t);
  }
  void Finish() { op_->Finish(); }
  OperatorBase& base() { return *op_; }
  void Close() { op_->Close(); }

  RecordingOutput<Out>& output() { return main_; }
  std::vector<std::pair<Out, Timestamp>> TakeRecords() { return main_.TakeRecords(); }
  // Same, sorted (Flink leaves the order among equal timer times open).
  std::vector<std::pair<Out, Timestamp>> TakeSortedRecords() {
    auto r = main_.TakeRecords();
    std::sort(r.begin(), r.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second < b.second : a.first < b.first;
    });
    return r;
  }
  int64_t counter(const std::string& name) { return metrics_.GetCounter(name)->Get(); }
  template <typename OpT>
  OpT& op() {
    return *dynamic_cast<OpT*>(op_.get());
  }
  ProcessingTimeService& processing_time_service() { return timers_; }

 private:
  std::unique_ptr<OperatorBase> op_;
  InputOperator<In>* input_;
  ManualClock clock_;
  ProcessingTimeService timers_;
  SubtaskMetrics metrics_;
  JobConfig config_;
  OperatorContext ctx_;
  RecordingOutput<Out> main_;
  std::vector<std::unique_ptr<OutputBase>> side_;
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
