// runtime/input_gate.h
//
// Data in (the network plane, receiving side): TaskInput is what a task reads
// from; InputGate<T> takes batches from the task's input channels in turn,
// drives the WatermarkValve with their watermarks, statuses and ends of input,
// reports every channel change (metrics, WatermarkListener) before the valve's
// output reaches the operators, and passes records to the head of the chain.
// Touched only by the thread running the task.
#ifndef TM_RUNTIME_INPUT_GATE_H_
#define TM_RUNTIME_INPUT_GATE_H_

#include <memory>
#include <utility>
#include <vector>

#include "runtime/channel.h"
#include "runtime/metrics.h"
#include "runtime/operator.h"
#include "runtime/time.h"
#include "runtime/watermark_valve.h"

namespace tidemark::internal {

// The input side of a task: a source or an input gate.
class TaskInput {
 public:
  enum class Step { kMore, kNothing, kEnd };
  virtual ~TaskInput() = default;
  virtual void Open() {}
  // One step: one batch or one poll.
  virtual Step RunStep() = 0;
  virtual void Close() {}
  // After kNothing: processing time at which to retry (kMaxTimestamp: when
  // notified).
  virtual Timestamp RetryAt() const { return kMaxTimestamp; }
  virtual bool NeedsOwnThread() const { return false; }
  virtual int WaitFd() const { return -1; }
};

template <typename T>
class InputGate final : public TaskInput, private WatermarkValve::Emitter {
 public:
  InputGate(std::vector<Channel<T>*> channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : channels_(std::move(channels)),
        head_(head),
        metrics_(metrics),
        listener_(listener),
        valve_(static_cast<int>(channels_.size())) {}

  Step RunStep() override {
    const size_t n = channels_.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t c = next_;
      if (++next_ == n) next_ = 0;
      if (channels_[c]->SizeApprox() == 0) continue;
      auto batch = channels_[c]->Pop();
      if (!batch) continue;
      Process(static_cast<int>(c), *batch);
      channels_[c]->Recycle(std::move(batch));
      return ended_ == n ? Step::kEnd : Step::kMore;
    }
    return ended_ == n ? Step::kEnd : Step::kNothing;
  }

  const WatermarkValve& valve() const { return valve_; }

 private:
  void Process(int c, Batch<T>& b) {
    size_t ci = 0;
    const size_t nr = b.records.size();
    for (size_t r = 0; r < nr; ++r) {
      while (ci < b.controls.size() && b.controls[ci].position == r)
        HandleControl(c, b.controls[ci++]);
      head_->Collect(std::move(b.records[r].value), b.records[r].timestamp);
    }
    while (ci < b.controls.size()) HandleControl(c, b.controls[ci++]);
    if (nr != 0) metrics_->records_in.Inc(static_cast<int64_t>(nr));
  }

  void HandleControl(int c, const Control& ctl) {
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

  // Publishes channel `c`'s state (metrics, listener).  Called before the
  // valve's output reaches the operators, so a trace shows the channel change
  // before the window firings it causes.
  void Notify(int c) {
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

  // WatermarkValve::Emitter
  void EmitWatermark(Timestamp w) override {
    metrics_->input_watermark.store(w, std::memory_order_relaxed);
    if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
    head_->EmitWatermark(w);
  }
  void EmitStatus(WatermarkStatus s) override {
    if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
    head_->EmitStatus(s);
  }

  std::vector<Channel<T>*> channels_;
  Output<T>* head_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  WatermarkValve valve_;
  size_t next_ = 0;
  size_t ended_ = 0;
  int current_channel_ = -1;
  bool notified_ = false;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_INPUT_GATE_H_
