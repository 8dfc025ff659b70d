// operators/process.h
//
// DataStream::process(f) on a stream that is not keyed: Flink's
// ProcessFunction / ProcessOperator.  For every record the function gets the
// record, a context and a collector:
//
//   struct Split : ProcessFunction<Event, Event> {
//     void process_element(const Event& e, Context& ctx, Collector<Event>& out) override {
//       if (e.ok) out.collect(e);
//       else ctx.output(errors, e.reason);        // a side output of another type
//     }
//   };
//   DataStream<Event> good = events.process(Split());
//   DataStream<std::string> bad = good.get_side_output(errors);
//
// or a lambda (const In&, ProcessContext&, Collector<Out>&).  The context
// gives timestamp() (the record's, kNoTimestamp when it has none),
// current_watermark() (the operator's input watermark), current_processing_
// time(), subtask_index(), parallelism() and output(tag, value) (the side
// output `tag`, timestamped like the record; dropped when nobody consumes
// it).  Timers need a key, as in Flink: key the stream and use a
// KeyedProcessFunction (operators/keyed_process.h).
//
// A function object may also have open(const RuntimeContext&) and close()
// (operators/basic.h, RuntimeContext); the context is a RuntimeContext too
// (subtask_index(), parallelism(), counter(name)).  Every subtask gets its
// own copy of the function; its members are not checkpointed.
//
// Generalized watermarks (runtime/core/generalized_watermark.h, Flink 2's
// DataStream V2): a function may declare the kinds it emits,
//
//   std::vector<WatermarkDeclaration> declare_watermarks() const { return {backlog}; }
//
// emit one with ctx.emit_watermark(backlog.new_watermark(true)) (after the
// records collected so far; an undeclared kind is an error when the function
// declares any), and receive the combined ones of its input with
//
//   WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w,
//                                        Collector<Out>& out, ProcessContext& ctx);
//
// kPeek: the framework handles it (forwards it downstream unless its
// declaration says default_handling_strategy_ignore()); kPoll: the function
// took it and the framework does nothing.  A function without on_watermark
// peeks at every one.  docs/generalized-watermarks.md.
//
// Thread safety: one task thread per operator instance.
#ifndef TM_OPERATORS_PROCESS_H_
#define TM_OPERATORS_PROCESS_H_

#include <algorithm>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark {

// A RuntimeContext (operators/basic.h) with the record's timestamp, the
// watermark and side outputs.
class ProcessContext : public RuntimeContext {
 public:
  ProcessContext(OperatorContext* op,
                 const std::map<std::string, internal::OutputBase*>* side_outputs)
      : RuntimeContext(op), op_(op), side_outputs_(side_outputs) {}

  Timestamp timestamp() const { return timestamp_; }
  Timestamp current_watermark() const { return watermark_; }
  Timestamp current_processing_time() const { return op_->timers().CurrentProcessingTime(); }
  template <typename V>
  void output(const OutputTag<V>& tag, std::type_identity_t<V> value) {
    auto it = side_outputs_->find(tag.id());
    if (it == side_outputs_->end()) return;
    internal::SideOutputAs<V>(it->second, tag.id())->Collect(std::move(value), timestamp_);
  }

  // A generalized watermark downstream (to the main output and every side
  // output), after what was collected so far.
  void emit_watermark(const GeneralizedWatermark& w) { emitter_.Emit(w); }

  // --- for the operator ---
  void set_timestamp(Timestamp ts) { timestamp_ = ts; }
  void set_watermark(Timestamp w) { watermark_ = w; }
  void set_watermark_emitter(std::function<void(const GeneralizedWatermark&)> emit,
                             const std::vector<WatermarkDeclaration>* declared) {
    emitter_.Set(std::move(emit), declared);
  }

 private:
  internal::GeneralizedWatermarkEmitter emitter_;
  OperatorContext* op_;
  const std::map<std::string, internal::OutputBase*>* side_outputs_;
  Timestamp timestamp_ = kNoTimestamp;
  Timestamp watermark_ = kMinTimestamp;
};

// Base class for process functions (optional: any object with the same
// members works).
template <typename In, typename Out>
class ProcessFunction {
 public:
  using InputType = In;
  using OutputType = Out;
  using Context = ProcessContext;
  virtual ~ProcessFunction() = default;
  virtual void open(const RuntimeContext& /*ctx*/) {}
  virtual void process_element(const In& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void close() {}
  // Generalized watermarks (above): the kinds this function emits (none
  // declared: any may be emitted), and what it does with the ones it
  // receives.
  virtual std::vector<WatermarkDeclaration> declare_watermarks() const { return {}; }
  virtual WatermarkHandlingResult on_watermark(const GeneralizedWatermark& /*w*/,
                                               Collector<Out>& /*out*/, Context& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
};

namespace internal {

template <typename T, typename F, typename Out>
class ProcessOperator final : public BatchedOperator<ProcessOperator<T, F, Out>, T, Out> {
 public:
  explicit ProcessOperator(F f) : f_(std::move(f)) {}

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    pctx_.emplace(&ctx, &this->side_outputs_);
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    pctx_->set_watermark_emitter(
        [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); },
        declared_.empty() ? nullptr : &declared_);
    OpenFunction(f_, ctx);
  }
  void ProcessGeneralizedWatermark(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermark(f_, w, *collector_, *pctx_,
                               [this] { pctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void ProcessElement(T&& value, Timestamp ts) override {
    pctx_->set_timestamp(ts);
    collector_->set_timestamp(ts);
    if constexpr (requires {
                    f_.process_element(static_cast<const T&>(value), *pctx_, *collector_);
                  }) {
      f_.process_element(static_cast<const T&>(value), *pctx_, *collector_);
    } else if constexpr (requires { f_.process_element(std::move(value), *pctx_, *collector_); }) {
      f_.process_element(std::move(value), *pctx_, *collector_);  // takes T&&: moved in
    } else {
      f_(RecordArg<F, T, ProcessContext&, Collector<Out>&>(value), *pctx_, *collector_);
    }
  }
  void ProcessWatermark(Timestamp w) override {
    pctx_->set_watermark(w);
    this->ForwardWatermark(w);
  }
  void Close() override { CloseFunction(f_); }

 private:
  F f_;
  std::vector<WatermarkDeclaration> declared_;
  std::optional<ProcessContext> pctx_;
  std::optional<Collector<Out>> collector_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_PROCESS_H_
