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

// The half of an input gate that does not depend on the record type
// (input_gate.cc): the valve, its inputs (watermarks, statuses, ends of input)
// and the reports of every channel change (metrics, WatermarkListener),
// published before the valve's output reaches the operators so that a trace
// shows the channel change before the window firings it causes.
class InputGateCore : private WatermarkValve::Emitter {
 public:
  InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                WatermarkListener* listener);
  const WatermarkValve& valve() const { return valve_; }

 protected:
  // A control element that arrived on channel `c`.
  void HandleControl(int c, const Control& ctl);
  // The number of channels that have ended.
  size_t ended() const { return ended_; }
  SubtaskMetrics* metrics() const { return metrics_; }

 private:
  void Notify(int c);
  // WatermarkValve::Emitter
  void EmitWatermark(Timestamp w) override;
  void EmitStatus(WatermarkStatus s) override;

  OutputBase* head_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  WatermarkValve valve_;
  size_t ended_ = 0;
  int current_channel_ = -1;
  bool notified_ = false;
};

template <typename T>
class InputGate final : public TaskInput, public InputGateCore {
 public:
  InputGate(std::vector<Channel<T>*> channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : InputGateCore(static_cast<int>(channels.size()), head, metrics, listener),
        channels_(std::move(channels)),
        head_(head) {}

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
      return ended() == n ? Step::kEnd : Step::kMore;
    }
    return ended() == n ? Step::kEnd : Step::kNothing;
  }

 private:
  // The batch's records go to the chain a run at a time: the runs between
  // its controls, each handed over in one call.
  void Process(int c, Batch<T>& b) {
    const size_t nr = b.records.size();
    std::span<Record<T>> records(b.records);
    size_t done = 0;
    for (const Control& ctl : b.controls) {
      if (ctl.position > done) {
        head_->CollectBatch(records.subspan(done, ctl.position - done));
        done = ctl.position;
      }
      HandleControl(c, ctl);
    }
    if (done < nr) head_->CollectBatch(records.subspan(done));
    if (nr != 0) metrics()->records_in.Inc(static_cast<int64_t>(nr));
  }

  std::vector<Channel<T>*> channels_;
  Output<T>* head_;
  size_t next_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_INPUT_GATE_H_
