// runtime/chain_output.h
//
// Within a task (the chain plane): the outputs that pass a record from one
// operator of a chain to the next (ChainOutput), to several consumers at once
// (FanOutOutput), or nowhere (DiscardOutput).  Touched only by the thread
// running the task.
#ifndef TM_RUNTIME_CHAIN_OUTPUT_H_
#define TM_RUNTIME_CHAIN_OUTPUT_H_

#include <utility>
#include <vector>

#include "runtime/error_guard.h"
#include "runtime/operator.h"

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

 private:
  InputOperator<T>* next_;
  const OperatorContext* ctx_;
};

template <typename T>
class FanOutOutput final : public Output<T> {
 public:
  explicit FanOutOutput(std::vector<Output<T>*> outs)
      : outs_(std::move(outs)), bases_(outs_.begin(), outs_.end()) {}
  void Collect(T&& v, Timestamp ts) override {
    for (size_t i = 0; i + 1 < outs_.size(); ++i) outs_[i]->CollectCopy(v, ts);
    outs_.back()->Collect(std::move(v), ts);
  }
  void EmitWatermark(Timestamp w) override { FanOutWatermark(bases_, w); }
  void EmitStatus(WatermarkStatus s) override { FanOutStatus(bases_, s); }

 private:
  std::vector<Output<T>*> outs_;
  std::vector<OutputBase*> bases_;
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
