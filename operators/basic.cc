#include "operators/basic.h"

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

}  // namespace tidemark::internal
