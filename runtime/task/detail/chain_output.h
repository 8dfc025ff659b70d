// runtime/task/detail/chain_output.h
//
// Within a task (the chain plane): the outputs that pass a record from one
// operator of a chain to the next (ChainOutput), to several consumers at once
// (FanOutOutput), or nowhere (DiscardOutput).  Touched only by the thread
// running the task.
#ifndef TM_RUNTIME_CHAIN_OUTPUT_H_
#define TM_RUNTIME_CHAIN_OUTPUT_H_

#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/detail/error_guard.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// Passes elements to the next operator of a chain; turns an exception from
// that operator into an OperatorError naming it (error_guard.h).  Once the job
// is cancelled, the next element throws TaskCancelled instead, so a cancel
// lands within one user call even in the middle of a batch or a firing.
//
// The watermark and status paths do not depend on the type (chain_output.cc).
void ChainWatermark(OperatorBase* next, const OperatorContext* ctx, Timestamp w);
void ChainStatus(OperatorBase* next, const OperatorContext* ctx, WatermarkStatus s);
// To every output (FanOutOutput).
void FanOutWatermark(const std::vector<OutputBase*>& outs, Timestamp w);
void FanOutStatus(const std::vector<OutputBase*>& outs, WatermarkStatus s);
void ChainGeneralized(OperatorBase* next, const OperatorContext* ctx,
                      const GeneralizedWatermark& w);
void FanOutGeneralized(const std::vector<OutputBase*>& outs, const GeneralizedWatermark& w);

template <typename T>
class ChainOutput final : public Output<T> {
 public:
  ChainOutput(InputOperator<T>* next, const OperatorContext* ctx) : next_(next), ctx_(ctx) {}
  void Collect(T&& v, Timestamp ts) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    try {
      next_->ProcessElement(std::move(v), ts);
    } catch (...) {
      RethrowAsOperatorError(*ctx_);
    }
  }
  // One guarded call for the whole run.
  void CollectBatch(std::span<Record<T>> records) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    try {
      next_->ProcessBatch(records);
    } catch (...) {
      RethrowAsOperatorError(*ctx_);
    }
  }
  void EmitWatermark(Timestamp w) override { ChainWatermark(next_, ctx_, w); }
  void EmitStatus(WatermarkStatus s) override { ChainStatus(next_, ctx_, s); }
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    ChainGeneralized(next_, ctx_, w);
  }

 private:
  InputOperator<T>* next_;
  const OperatorContext* ctx_;
};

// Passes the records of input `I` (0 or 1) of a two-input operator to it, as
// ChainOutput does for one input; the watermark path is the operator's.
template <int I, typename In1, typename In2>
class TwoInputHeadOutput final : public Output<std::conditional_t<I == 0, In1, In2>> {
 public:
  using T = std::conditional_t<I == 0, In1, In2>;
  TwoInputHeadOutput(TwoInputOperatorBase<In1, In2>* op, const OperatorContext* ctx)
      : op_(op), ctx_(ctx) {}
  void Collect(T&& v, Timestamp ts) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    try {
      if constexpr (I == 0) {
        op_->ProcessElement1(std::move(v), ts);
      } else {
        op_->ProcessElement2(std::move(v), ts);
      }
    } catch (...) {
      RethrowAsOperatorError(*ctx_);
    }
  }
  void CollectBatch(std::span<Record<T>> records) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    try {
      if constexpr (I == 0) {
        op_->ProcessBatch1(records);
      } else {
        op_->ProcessBatch2(records);
      }
    } catch (...) {
      RethrowAsOperatorError(*ctx_);
    }
  }
  void EmitWatermark(Timestamp w) override { ChainWatermark(op_, ctx_, w); }
  void EmitStatus(WatermarkStatus s) override { ChainStatus(op_, ctx_, s); }
  // Input I's own combined value (the gate sends each input's to its head).
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    GuardUserCall(*ctx_, [&] {
      if constexpr (I == 0) {
        op_->ProcessGeneralizedWatermark1(w);
      } else {
        op_->ProcessGeneralizedWatermark2(w);
      }
    });
  }

 private:
  TwoInputOperatorBase<In1, In2>* op_;
  const OperatorContext* ctx_;
};

template <typename T>
class FanOutOutput final : public Output<T> {
 public:
  // `outs`: Output<T>s.
  explicit FanOutOutput(const std::vector<OutputBase*>& outs) : outs_(outs) {}
  void Collect(T&& v, Timestamp ts) override {
    for (size_t i = 0; i + 1 < outs_.size(); ++i) Out(i)->CollectCopy(v, ts);
    Out(outs_.size() - 1)->Collect(std::move(v), ts);
  }
  void EmitWatermark(Timestamp w) override { FanOutWatermark(outs_, w); }
  void EmitStatus(WatermarkStatus s) override { FanOutStatus(outs_, s); }
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    FanOutGeneralized(outs_, w);
  }

 private:
  Output<T>* Out(size_t i) const { return static_cast<Output<T>*>(outs_[i]); }
  std::vector<OutputBase*> outs_;
};

template <typename T>
class DiscardOutput final : public Output<T> {
 public:
  void Collect(T&&, Timestamp) override {}
  void CollectBatch(std::span<Record<T>>) override {}
  void EmitWatermark(Timestamp) override {}
  void EmitStatus(WatermarkStatus) override {}
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHAIN_OUTPUT_H_
