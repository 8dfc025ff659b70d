#include "tidemark/runtime/task/detail/source_driver.h"

namespace tidemark::internal {

SourceDriverCore::SourceDriverCore(OutputBase* head, SourceContext ctx, std::string name,
                                   WriterSignals* signals, SubtaskMetrics* metrics, size_t budget,
                                   OperatorBase* head_op)
    : head_base_(head),
      ctx_(ctx),
      name_(std::move(name)),
      signals_(signals),
      metrics_(metrics),
      budget_(std::max<size_t>(1, budget)) {
  if (ctx_.metrics == nullptr) ctx_.metrics = metrics_;
  auto* splits = dynamic_cast<SplitWatermarkInput*>(head_op);
  if (splits != nullptr && splits->per_split()) splits_ = splits;
}

SourceDriverCore::~SourceDriverCore() = default;
SourceDriverCore::SplitOutputBase::~SplitOutputBase() = default;

SourceDriverCore::SplitOutputBase& SourceDriverCore::SplitFor(const std::string& split_id) {
  auto it = split_outputs_.find(split_id);
  if (it == split_outputs_.end()) {
    std::unique_ptr<SplitOutputBase> out = NewSplitOutput();
    out->index = splits_ != nullptr ? splits_->RegisterSplit(split_id) : -1;
    it = split_outputs_.emplace(split_id, std::move(out)).first;
  }
  return *it->second;
}

void SourceDriverCore::DropSplit(const std::string& split_id) {
  auto it = split_outputs_.find(split_id);
  if (it == split_outputs_.end()) {
    // No output made for it in this run: a split restored from a checkpoint
    // (the head registered it again with its watermark) that the source
    // ends before any record of it.  Released there too, or its watermark
    // would hold the subtask's until the end of the input.  A split the head
    // never had stays unknown to it: registered, it would make the head
    // take the source for one that names splits, and its records of no
    // split would go to a split "(main)" instead of the subtask's generator.
    if (splits_ != nullptr) {
      FlushRun();
      splits_->ReleaseSplitIfHeld(split_id);
    }
    return;
  }
  FlushRun();
  if (splits_ != nullptr) splits_->ReleaseSplit(it->second->index);
  split_outputs_.erase(it);
}

TaskInput::Step SourceDriverCore::AfterPoll(PollStatus st, int64_t emitted_before) {
  if (emitted_ != emitted_before) metrics_->records_in.Inc(emitted_ - emitted_before);
  switch (st) {
    case PollStatus::kMoreAvailable:
      return TaskInput::Step::kMore;
    case PollStatus::kNothingAvailable:
      return TaskInput::Step::kNothing;
    case PollStatus::kEndOfInput:
      // Through ForwardWatermark, so an idle source first becomes ACTIVE
      // again: W(MAX) is not ignored downstream as coming from an idle
      // channel.
      ForwardWatermark(kMaxWatermark);
      return TaskInput::Step::kEnd;
  }
  return TaskInput::Step::kEnd;
}

void SourceDriverCore::ForwardWatermark(Timestamp w) {
  if (w <= last_watermark_) return;
  if (idle_) {
    idle_ = false;
    head_base_->EmitStatus(WatermarkStatus::kActive);
  }
  last_watermark_ = w;
  head_base_->EmitWatermark(w);
}

void SourceDriverCore::ForwardIdle() {
  if (idle_) return;
  idle_ = true;
  head_base_->EmitStatus(WatermarkStatus::kIdle);
}

void SourceDriverCore::SourceWatermark(int split, Timestamp w) {
  if (splits_ == nullptr || w == kMaxWatermark) {
    ForwardWatermark(w);
    return;
  }
  splits_->SetCurrentSplit(split);
  head_base_->EmitWatermark(w);
}

void SourceDriverCore::SourceIdle(int split) {
  if (splits_ == nullptr) {
    ForwardIdle();
    return;
  }
  splits_->SetCurrentSplit(split);
  head_base_->EmitStatus(WatermarkStatus::kIdle);
}

}  // namespace tidemark::internal
