#include "runtime/input_gate.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "runtime/state_codec.h"

namespace tidemark::internal {

InputGateCore::InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                             WatermarkListener* listener)
    : head_(head),
      metrics_(metrics),
      listener_(listener),
      valve_(num_channels),
      ended_channel_(static_cast<size_t>(num_channels)),
      blocked_(static_cast<size_t>(num_channels)) {}

bool InputGateCore::HandleControl(int c, const Control& ctl) {
  if (ctl.kind == ControlKind::kBarrier) return OnBarrier(c, ctl.value);
  const Timestamp before_wm = valve_.channel_watermark(c);
  const bool before_idle = valve_.channel_idle(c);
  const Timestamp before_aligned = valve_.last_output_watermark();
  current_channel_ = c;
  notified_ = false;
  switch (ctl.kind) {
    case ControlKind::kWatermark:
      valve_.InputWatermark(c, ctl.value, *this);
      break;
    case ControlKind::kStatus:
      valve_.InputStatus(c, static_cast<WatermarkStatus>(ctl.value), *this);
      break;
    case ControlKind::kEndOfInput:
      valve_.InputEnd(c, *this);
      ++ended_;
      ended_channel_[static_cast<size_t>(c)] = true;
      break;
    case ControlKind::kBarrier:
      break;  // handled above
  }
  if (!notified_ &&
      (valve_.channel_watermark(c) != before_wm || valve_.channel_idle(c) != before_idle ||
       valve_.last_output_watermark() != before_aligned)) {
    Notify(c);
  }
  current_channel_ = -1;
  // An ended channel no longer holds an alignment back.
  if (ctl.kind == ControlKind::kEndOfInput) MaybeCompleteAlignment();
  return false;
}

void InputGateCore::RestoreValve(StateReader& r) {
  if (!valve_.Restore(r)) {
    if (r.ok()) {
      r.Fail(
          absl::StrCat("the checkpoint's input gate has another number of channels than this "
                       "one (",
                       valve_.num_channels(), ")"));
    }
    return;
  }
  for (int c = 0; c < valve_.num_channels(); ++c) {
    InputChannelMetrics& m = metrics_->channel(c);
    m.watermark.store(valve_.channel_watermark(c), std::memory_order_relaxed);
    m.idle.store(valve_.channel_idle(c), std::memory_order_relaxed);
  }
  if (valve_.last_output_watermark() > kMinTimestamp) {
    metrics_->input_watermark.store(valve_.last_output_watermark(), std::memory_order_relaxed);
    head_->EmitWatermark(valve_.last_output_watermark());
  }
  if (valve_.last_output_status() == WatermarkStatus::kIdle)
    head_->EmitStatus(WatermarkStatus::kIdle);
}

std::string InputGateCore::RestoreRescaledValve(const std::vector<const std::string*>& old) {
  Timestamp lowest = kMaxWatermark;
  for (size_t k = 0; k < old.size(); ++k) {
    StateReader r(*old[k]);
    const Timestamp w = WatermarkValve::SnapshotOutputWatermark(r);
    if (!r.ok()) return absl::StrCat("old subtask ", k, ": ", r.error());
    lowest = std::min(lowest, w);
  }
  if (old.empty() || lowest == kMinTimestamp) return "";
  valve_.RestoreOutput(lowest);
  metrics_->input_watermark.store(lowest, std::memory_order_relaxed);
  head_->EmitWatermark(lowest);
  return "";
}

bool InputGateCore::OnBarrier(int c, int64_t id) {
  if (id <= last_aligned_) return false;  // not expected: a barrier of a completed checkpoint
  if (aligning_ >= 0 && id > aligning_) {
    // A newer checkpoint while one is being aligned: the older one can no
    // longer complete here (the coordinator does not start n + 1 before n has
    // completed, so this only follows an abandoned checkpoint); start over.
    std::fill(blocked_.begin(), blocked_.end(), false);
    num_blocked_ = 0;
    aligning_ = -1;
  }
  if (aligning_ < 0) {
    aligning_ = id;
    align_start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  }
  if (!blocked_[static_cast<size_t>(c)]) {
    blocked_[static_cast<size_t>(c)] = true;
    ++num_blocked_;
  }
  MaybeCompleteAlignment();
  return blocked_[static_cast<size_t>(c)];
}

void InputGateCore::MaybeCompleteAlignment() {
  if (aligning_ < 0 || num_blocked_ + ended_ < blocked_.size()) return;
  const int64_t id = aligning_;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  std::fill(blocked_.begin(), blocked_.end(), false);
  num_blocked_ = 0;
  aligning_ = -1;
  last_aligned_ = id;
  if (barrier_handler_ != nullptr) barrier_handler_->OnBarrierAligned(id, now_ns - align_start_ns_);
}

// Publishes channel `c`'s state (metrics, listener).
void InputGateCore::Notify(int c) {
  notified_ = true;
  InputChannelMetrics& m = metrics_->channel(c);
  m.watermark.store(valve_.channel_watermark(c), std::memory_order_relaxed);
  m.idle.store(valve_.channel_idle(c), std::memory_order_relaxed);
  if (listener_) {
    WatermarkListener::ChannelEvent e{&metrics_->task_name(),
                                      metrics_->subtask(),
                                      c,
                                      valve_.channel_watermark(c),
                                      valve_.channel_idle(c),
                                      valve_.last_output_watermark(),
                                      valve_.last_output_status() == WatermarkStatus::kIdle,
                                      valve_.HoldingChannel()};
    listener_->OnInputChannel(e);
  }
}

void InputGateCore::EmitWatermark(Timestamp w) {
  metrics_->input_watermark.store(w, std::memory_order_relaxed);
  if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
  head_->EmitWatermark(w);
}

void InputGateCore::EmitStatus(WatermarkStatus s) {
  if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
  head_->EmitStatus(s);
}

}  // namespace tidemark::internal
