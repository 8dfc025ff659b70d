// runtime/input_gate.h
//
// Data in (the network plane, receiving side): TaskInput is what a task reads
// from; InputGate<T> takes batches from the task's input channels in turn,
// drives the WatermarkValve with their watermarks, statuses and ends of input,
// reports every channel change (metrics, WatermarkListener) before the valve's
// output reaches the operators, and passes records to the head of the chain.
//
// Barrier alignment (Flink's aligned checkpoints): when checkpoint barrier n
// arrives on a channel, that channel is blocked: the rest of its batch and
// everything after it wait, while the other channels go on, until barrier n
// has arrived on every channel that has not ended.  Then the gate calls its
// BarrierHandler (the task snapshots its operators and sends barrier n on),
// unblocks every channel and carries on where each one stopped.  A channel
// that ends counts as aligned, so a finished upstream never holds a
// checkpoint back; an idle channel still carries barriers (its upstream task
// runs and forwards them), so idleness does not either.  A gate with one
// channel aligns at once.
//
// Touched only by the thread running the task.
#ifndef TM_RUNTIME_INPUT_GATE_H_
#define TM_RUNTIME_INPUT_GATE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "runtime/channel.h"
#include "runtime/metrics.h"
#include "runtime/operator.h"
#include "runtime/time.h"
#include "runtime/watermark_valve.h"

namespace tidemark::internal {

// Told when a checkpoint barrier has arrived on every input channel.
class BarrierHandler {
 public:
  // Barrier `checkpoint_id` has arrived on every channel that has not ended;
  // `alignment_ns`: from its first arrival to now.  The records before it on
  // every channel have been processed, none after it.
  virtual void OnBarrierAligned(int64_t checkpoint_id, int64_t alignment_ns) = 0;

 protected:
  ~BarrierHandler() = default;
};

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
  // Checkpoints: a source's position or a gate's watermark valve; a gate's
  // barrier alignment.
  virtual bool IsSource() const { return false; }
  virtual bool Replayable() const { return true; }
  virtual void SnapshotPosition(StateWriter& /*w*/) const {}
  virtual void RestorePosition(StateReader& /*r*/) {}
  // A rescaled job (this task's channels changed): restores what can be
  // from every old subtask's state (`old`); returns an error, or "".
  virtual std::string RestoreRescaled(const std::vector<const std::string*>& /*old*/) { return ""; }
  virtual void SetBarrierHandler(BarrierHandler* /*h*/) {}
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
  void set_barrier_handler(BarrierHandler* h) { barrier_handler_ = h; }
  // The checkpoint being aligned (-1: none) and whether channel c is held.
  int64_t aligning_checkpoint() const { return aligning_; }
  bool blocked(int c) const { return blocked_[static_cast<size_t>(c)]; }
  // Checkpoints: the valve's state.  Restoring it also hands its watermark
  // (and idleness) to the chain, so the operators are where they were at
  // the checkpoint before any replayed record arrives.
  void SnapshotValve(StateWriter& w) const { valve_.Snapshot(w); }
  void RestoreValve(StateReader& r);
  // Rescaled, the channels are others: they start at MIN (as in Flink), but
  // the gate's output starts at the lowest output watermark of the old
  // subtasks (`old`: their valves' states), handed to the chain like a
  // restored valve's.  Every record replayed here was behind at least that
  // watermark in the run that took the checkpoint, so none becomes late that
  // was not; over an all-to-all edge from tasks that were not rescaled every
  // old subtask had the same watermark, so lateness is decided as without
  // the restore.  (At MIN, a window that had fired before the checkpoint
  // would take a replayed late record as on time and never fire it again:
  // docs/checkpoints.md.)  Returns an error, or "".
  std::string RestoreRescaledValve(const std::vector<const std::string*>& old);

 protected:
  // A control element that arrived on channel `c`; true when it blocked the
  // channel (a barrier that others have not delivered yet).
  bool HandleControl(int c, const Control& ctl);
  // The number of channels that have ended.
  size_t ended() const { return ended_; }
  SubtaskMetrics* metrics() const { return metrics_; }

 private:
  // Barrier `id` on channel c: blocks it, or completes the alignment.
  bool OnBarrier(int c, int64_t id);
  // Every channel not ended has delivered the barrier being aligned?
  void MaybeCompleteAlignment();
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
  // Alignment.
  BarrierHandler* barrier_handler_ = nullptr;
  std::vector<bool> ended_channel_;
  std::vector<bool> blocked_;
  size_t num_blocked_ = 0;
  int64_t aligning_ = -1;       // the checkpoint id being aligned
  int64_t last_aligned_ = -1;   // the last completed
  int64_t align_start_ns_ = 0;  // steady clock, at the first barrier
};

template <typename T>
class InputGate final : public TaskInput, public InputGateCore {
 public:
  InputGate(std::vector<Channel<T>*> channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : InputGateCore(static_cast<int>(channels.size()), head, metrics, listener),
        channels_(std::move(channels)),
        head_(head) {}

  void SetBarrierHandler(BarrierHandler* h) override { set_barrier_handler(h); }
  void SnapshotPosition(StateWriter& w) const override { SnapshotValve(w); }
  void RestorePosition(StateReader& r) override { RestoreValve(r); }
  std::string RestoreRescaled(const std::vector<const std::string*>& old) override {
    return RestoreRescaledValve(old);
  }

  Step RunStep() override {
    const size_t n = channels_.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t c = next_;
      if (++next_ == n) next_ = 0;
      if (blocked(static_cast<int>(c))) continue;
      Held& held = held_[c];
      if (held.batch) {
        // The rest of a batch that a barrier held back.
        auto batch = std::move(held.batch);
        if (!Process(static_cast<int>(c), batch, held.control, held.position))
          channels_[c]->Recycle(std::move(batch));
        return ended() == n ? Step::kEnd : Step::kMore;
      }
      if (channels_[c]->SizeApprox() == 0) continue;
      auto batch = channels_[c]->Pop();
      if (!batch) continue;
      if (!Process(static_cast<int>(c), batch, 0, 0)) channels_[c]->Recycle(std::move(batch));
      return ended() == n ? Step::kEnd : Step::kMore;
    }
    return ended() == n ? Step::kEnd : Step::kNothing;
  }

 private:
  using BatchPtr = typename Channel<T>::BatchPtr;
  // Where a blocked channel stopped in its batch.
  struct Held {
    BatchPtr batch;
    size_t control = 0;     // the next control to handle
    uint32_t position = 0;  // the next record
  };

  // The batch's records go to the chain a run at a time: the runs between
  // its controls, each handed over in one call, from control `first_control`
  // and record `done` on.  Returns true when a barrier blocked the channel:
  // the batch is then kept in held_[c].
  bool Process(int c, BatchPtr& batch, size_t first_control, uint32_t done) {
    Batch<T>& b = *batch;
    const size_t nr = b.records.size();
    std::span<Record<T>> records(b.records);
    const uint32_t start = done;
    for (size_t i = first_control; i < b.controls.size(); ++i) {
      const Control& ctl = b.controls[i];
      if (ctl.position > done) {
        head_->CollectBatch(records.subspan(done, ctl.position - done));
        done = ctl.position;
      }
      if (HandleControl(c, ctl)) {
        if (done > start) metrics()->records_in.Inc(static_cast<int64_t>(done - start));
        held_[static_cast<size_t>(c)] = Held{std::move(batch), i + 1, done};
        return true;
      }
    }
    if (done < nr) head_->CollectBatch(records.subspan(done));
    if (nr > start) metrics()->records_in.Inc(static_cast<int64_t>(nr - start));
    return false;
  }

  std::vector<Channel<T>*> channels_;
  Output<T>* head_;
  std::vector<Held> held_ = std::vector<Held>(channels_.size());
  size_t next_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_INPUT_GATE_H_
