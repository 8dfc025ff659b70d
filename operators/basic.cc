#include "tidemark/operators/basic.h"

namespace tidemark::internal {

void TimestampsEmitter::EmitWatermark(Timestamp w) {
  if (deferring_) return Defer(Action::kWatermark, w);
  if (w <= last_emitted_) return;
  if (idle_) {
    idle_ = false;
    out_->EmitStatus(WatermarkStatus::kActive);
  }
  last_emitted_ = w;
  out_->EmitWatermark(w);
}

void TimestampsEmitter::MarkIdle() {
  if (deferring_) return Defer(Action::kIdle, 0);
  if (idle_) return;
  idle_ = true;
  out_->EmitStatus(WatermarkStatus::kIdle);
}

void TimestampsEmitter::MarkActive() {
  if (deferring_) return Defer(Action::kActive, 0);
  if (!idle_) return;
  idle_ = false;
  out_->EmitStatus(WatermarkStatus::kActive);
}

void TimestampsEmitter::Defer(Action what, Timestamp w) {
  pending_.emplace_back(what, w);
  has_pending_ = true;
}

void TimestampsEmitter::ApplyPending() {
  has_pending_ = false;
  auto actions = std::move(pending_);
  pending_.clear();
  for (auto [what, w] : actions) {
    switch (what) {
      case Action::kWatermark:
        EmitWatermark(w);
        break;
      case Action::kIdle:
        MarkIdle();
        break;
      case Action::kActive:
        MarkActive();
        break;
    }
  }
}

int SplitWatermarks::Add(std::string id) {
  splits_.push_back(Split{std::move(id)});
  return static_cast<int>(splits_.size()) - 1;
}

int SplitWatermarks::Find(const std::string& id) const {
  for (size_t i = 0; i < splits_.size(); ++i)
    if (splits_[i].id == id) return static_cast<int>(i);
  return -1;
}

// Flink's CombinedWatermarkStatus#updateCombinedWatermark, with one
// difference: when every split is idle, the flushed maximum is emitted and
// then IDLE at once (Flink's multiplexer emits the watermark now and IDLE at
// its next update), as the valve does (3.2).
void SplitWatermarks::Update(WatermarkOutput& out) {
  Timestamp max_all = kMinTimestamp;
  Timestamp min_active = kMaxTimestamp;
  bool any = false;
  bool all_idle = true;
  for (const Split& s : splits_) {
    if (s.released) continue;
    any = true;
    max_all = std::max(max_all, s.watermark);
    if (!s.idle) {
      min_active = std::min(min_active, s.watermark);
      all_idle = false;
    }
  }
  if (!any) {
    // Every split released: idle, without going back.
    if (!splits_.empty()) out.MarkIdle();
    return;
  }
  const Timestamp c = all_idle ? max_all : min_active;
  if (c > combined_) {
    combined_ = c;
    out.EmitWatermark(c);
  }
  if (all_idle) {
    out.MarkIdle();
  } else {
    out.MarkActive();  // a split came back: so is the subtask
  }
}

}  // namespace tidemark::internal
