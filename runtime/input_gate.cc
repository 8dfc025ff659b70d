#include "runtime/input_gate.h"

namespace tidemark::internal {

InputGateCore::InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                             WatermarkListener* listener)
    : head_(head), metrics_(metrics), listener_(listener), valve_(num_channels) {}

void InputGateCore::HandleControl(int c, const Control& ctl) {
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
      break;
  }
  if (!notified_ &&
      (valve_.channel_watermark(c) != before_wm || valve_.channel_idle(c) != before_idle ||
       valve_.last_output_watermark() != before_aligned)) {
    Notify(c);
  }
  current_channel_ = -1;
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
