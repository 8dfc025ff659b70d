// runtime/task/detail/stream_task.h
//
// StreamTask: one chain of operators at one subtask index, the unit the
// executor schedules.  Its input is either a source (SourceDriver<T>) or an
// input gate (InputGate<T>: the task's input channels, a WatermarkValve, and
// the head of the chain); its outputs are ChannelWriter<T>s, one per
// downstream edge, that fill batches and hand them to channels.
//
// What one RunSlice() does: fire due processing-time timers; then, while every
// output channel has space, take one step of input (one batch from a channel,
// or one poll of the source) through the chain; flush batches older than the
// buffer timeout; yield after a bounded number of steps so that tasks share
// the workers fairly.  When there is no input or no space it flushes every
// partial batch (so a slow stream is never held back) and waits.
//
// Its life (created, restoring, running, finishing, then finished, failed or
// cancelled) is one checked state machine: runtime/task_lifecycle.h.
//
// Thread safety: everything here is touched only by the thread running the
// task, except the channels (channel.h), the metrics (metrics.h) and
// lifecycle(), which any thread may read, and, once the task has finished,
// its operators' checkpoint notifications, which the thread that tells of a
// completed checkpoint delivers under notify_mu_ (NotifyCheckpointComplete).
#ifndef TM_RUNTIME_STREAM_TASK_H_
#define TM_RUNTIME_STREAM_TASK_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/core/detail/task_host.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/io/detail/channel_writer.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/state/detail/checkpoint.h"
#include "tidemark/runtime/state/detail/snapshot_pool.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/detail/chain_output.h"
#include "tidemark/runtime/task/detail/source_driver.h"
#include "tidemark/runtime/task/detail/task_lifecycle.h"
#include "tidemark/runtime/task/watermark_alignment.h"

namespace tidemark::internal {

// One chain of operators at one subtask index.
//
// Checkpoints (checkpoint.h): a source task starts checkpoint n between two
// polls once RequestCheckpoint(n) has been called; a task with input channels
// when its gate has aligned barrier n (OnBarrierAligned).  Either way it
// snapshots its source position and every operator of the chain, sends
// barrier n on every output and hands the snapshot to the acknowledger.  A
// task restored from a checkpoint gives each operator its state right after
// Open(), and the source its position.
class StreamTask final : public Task, public CheckpointParticipant, private BarrierHandler {
 public:
  StreamTask(std::string name, TaskHost* host, std::unique_ptr<SubtaskMetrics> metrics,
             const Clock* clock, const JobConfig* config);
  ~StreamTask() override;

  // --- assembly, by the executor, before the job starts ---
  ProcessingTimeService& timers() { return timers_; }
  // Processing time without the time spent back-pressured (idleness runs on
  // it; see PausableRelativeClock).
  PausableRelativeClock& input_activity_clock() { return activity_clock_; }
  SubtaskMetrics* metrics() { return metrics_.get(); }
  WriterSignals* signals() { return &signals_; }
  const JobConfig& config() const { return *config_; }
  // Operators in chain order (head first); contexts are owned here.
  OperatorContext* AddContext(std::unique_ptr<OperatorContext> ctx);
  void AddOperator(std::unique_ptr<OperatorBase> op, OperatorContext* ctx);
  void AddOutputObject(std::unique_ptr<OutputBase> out) { outputs_.push_back(std::move(out)); }
  void AddWriter(WriterBase* w) { writers_.push_back(w); }
  void SetInput(std::unique_ptr<TaskInput> input) { input_ = std::move(input); }
  // A source task's watermark alignment (runtime/task/watermark_alignment.h),
  // made on first call.
  SourceAlignment* EnableAlignment(AlignmentCoordinator* coordinator, WatermarkListener* listener) {
    if (!alignment_)
      alignment_ = std::make_unique<SourceAlignment>(coordinator, this, &activity_clock_,
                                                     metrics_.get(), listener);
    return alignment_.get();
  }
  // Takes part in checkpoints, reporting to `ack` (and each barrier to
  // `listener`, may be null); `task_index` names the task in the snapshots.
  // Call after SetInput.
  void EnableCheckpoints(CheckpointAcknowledger* ack, int task_index, WatermarkListener* listener);
  // Starts from `restore` (its snapshots' operators in this chain's order).
  void SetRestoreState(SubtaskRestore restore) { restore_ = std::move(restore); }
  // Told of every lifecycle move, on the task's thread (for tests).
  void set_lifecycle_observer(TaskLifecycleMachine::Observer o) {
    lifecycle_.set_observer(std::move(o));
  }
  bool is_source() const override { return input_ && input_->IsSource(); }
  bool replayable() const override { return !input_ || input_->Replayable(); }

  // --- checkpoints, from any thread ---
  // Source tasks: start checkpoint `id` at the next step.
  void RequestCheckpoint(int64_t id) override;
  // The same for a savepoint: its barriers are aligned even with unaligned
  // checkpoints on (as in Flink).
  void RequestSavepoint(int64_t id) override;
  // Every subtask has snapshotted checkpoint `id`: the operators hear of it
  // at the next slice.  Once the task has finished, they hear of it at once,
  // on the calling thread, when `id` holds the task's final snapshot (a
  // checkpoint taken after it finished): so a finished branch's two-phase
  // commit sink commits its last files at the next checkpoint, not only at
  // the job's end (Flink's FLIP-147).  A checkpoint this task acknowledged
  // before it finished is subsumed by the next one.
  void NotifyCheckpointComplete(int64_t id) override;
  // After the task has finished, from the thread that waits for the job: the
  // job's final checkpoint `id` is durable; tells the operators (a
  // two-phase-commit sink commits its last files).  An operator's error is
  // returned.
  absl::Status NotifyFinalCheckpoint(int64_t id);
  // Stop-with-savepoint (source tasks; docs/checkpoints.md, "Savepoints").
  bool can_stop() const override { return true; }
  void SuspendAfter(int64_t id) override;
  void EndInputNow() override;
  // The last completed checkpoint its operators have heard of (any thread).
  int64_t notified_checkpoint() const {
    return notified_checkpoint_.load(std::memory_order_acquire);
  }

  // --- Task ---
  Result RunSlice() override;
  SteadyTime WakeupDeadline() const override { return wakeup_; }
  bool NeedsOwnThread() const override { return input_ && input_->NeedsOwnThread(); }
  int WaitFd() const override { return input_ ? input_->WaitFd() : -1; }
  void Release() override;

  // Where the task is in its life (task_lifecycle.h); any thread.
  TaskLifecycle lifecycle() const { return lifecycle_.state(); }

 private:
  Result Wait(Timestamp now_ms);
  // Blocked on a full output channel: the input activity clock stands still
  // until the task can write again.
  void SetBackpressured(bool blocked);
  bool AnyWriterFull();
  // The steps of the lifecycle.  kCreated -> kRestoring (with state to
  // restore) or kRunning: opens the chain (tail first) and the input, and
  // restores the state, then kRunning.
  void OpenChain();
  // kRunning -> kFinishing -> kFinished: the input ended.  Finishes the
  // operators, hands the final snapshot over, ends the outputs, closes.
  void FinishTask();
  void FinishChain();
  // Moves to the final state `end` and closes the operators and the input
  // when they were opened (their errors are dropped: the task has ended).
  void Terminate(TaskLifecycle end);
  void CloseChain();
  // BarrierHandler
  void OnBarrierAligned(int64_t checkpoint_id, int64_t alignment_ns) override;
  void OnUnalignedBarrier(int64_t checkpoint_id) override;
  void OnChannelStateComplete(int64_t checkpoint_id, std::string channel_state) override;
  // Snapshots the chain (and source) for checkpoint `id`, or (final_state)
  // once the task has finished.
  // With `deferred`, the operators' deferred parts (StateWriter::Defer) are
  // left there, by operator index, for the snapshot threads; without, they
  // are run here.
  using DeferredParts = std::vector<std::pair<size_t, std::vector<StateWriter::Deferred>>>;
  SubtaskSnapshot TakeSnapshot(int64_t id, bool final_state, DeferredParts* deferred = nullptr,
                               std::shared_ptr<SharedFileSink> sink = nullptr);
  // `unaligned`: the barrier goes on unaligned (ChannelWriter::EmitBarrier),
  // and a task with input channels acknowledges once its gate has handed it
  // the channel state (OnChannelStateComplete).
  void PerformCheckpoint(int64_t id, int64_t alignment_ns, bool unaligned = false);
  // Hands snapshot `s` to the acknowledger, after its deferred parts (on the
  // snapshot threads when there are any).
  // `sink`: the native incremental upload target, if any (its files are
  // listed in the snapshot once the deferred parts are done).
  void AcknowledgeSnapshot(SubtaskSnapshot s, DeferredParts deferred,
                           std::shared_ptr<SharedFileSink> sink);
  void Restore();
  // The old subtasks whose state operator `i` restores (their indices in
  // `rs.old`): this subtask's own at the same parallelism, else by the
  // operator's StateRescaling.
  std::vector<int> OldStatesFor(size_t i, const SubtaskRestore& rs, const std::string& where) const;
  // Checkpoint requests and completions that arrived since the last slice.
  void HandleCheckpointSignals();

  bool cancelled() const { return cancel_flag_->load(std::memory_order_acquire); }

  TaskHost* host_;
  const std::atomic<bool>* cancel_flag_;  // host_->cancel_flag()
  std::unique_ptr<SubtaskMetrics> metrics_;
  const Clock* clock_;
  const JobConfig* config_;
  ProcessingTimeService timers_;
  PausableRelativeClock activity_clock_;
  bool paused_by_backpressure_ = false;
  WriterSignals signals_;
  std::vector<std::unique_ptr<OperatorContext>> contexts_;
  std::vector<std::pair<std::unique_ptr<OperatorBase>, OperatorContext*>> operators_;
  std::vector<std::unique_ptr<OutputBase>> outputs_;  // chain outputs and writers
  std::vector<WriterBase*> writers_;
  std::unique_ptr<TaskInput> input_;
  std::unique_ptr<SourceAlignment> alignment_;
  TaskLifecycleMachine lifecycle_;
  SteadyTime wakeup_ = SteadyTime::max();
  // Checkpoints.
  CheckpointAcknowledger* ack_ = nullptr;
  int task_index_ = 0;
  WatermarkListener* listener_ = nullptr;
  std::optional<SubtaskRestore> restore_;
  // Restored from snapshots that all finished (a drained savepoint, a
  // finished job's final checkpoint; Flink's finished-on-restore, FLIP-147):
  // the task reads nothing and fires no restored processing-time timer; it
  // ends its input at once (a source: the MAX watermark) and finishes.
  bool finished_on_restore_ = false;
  std::atomic<int64_t> requested_checkpoint_{-1};
  std::atomic<int64_t> completed_checkpoint_{-1};
  // The last id RequestSavepoint asked for (aligned whatever the config).
  std::atomic<int64_t> savepoint_request_{-1};
  // Unaligned checkpoints (docs/checkpoints.md): whether this job takes
  // them, and a snapshot waiting for its channel state.
  bool unaligned_ = false;
  struct WaitingForChannelState {
    SubtaskSnapshot snapshot;
    DeferredParts deferred;
    std::shared_ptr<SharedFileSink> sink;
  };
  std::optional<WaitingForChannelState> waiting_;
  // Snapshots whose asynchronous part runs on the snapshot threads
  // (runtime/state/detail/snapshot_pool.h); awaited before the final
  // snapshot and when the task ends.
  std::shared_ptr<AsyncSnapshots> async_snapshots_ = std::make_shared<AsyncSnapshots>();
  int64_t last_checkpoint_ = -1;  // the last this task snapshotted
  int64_t last_notified_ = -1;    // the last completion its operators heard of
  // Once finished (delivering_after_finish_), the operators hear of later
  // checkpoints from the notifying thread, one call at a time; before, only
  // the task thread touches last_notified_.
  Mutex notify_mu_;
  bool delivering_after_finish_ = false;
  std::atomic<int64_t> notified_checkpoint_{-1};  // last_notified_, for other threads
  // Stop-with-savepoint: read nothing once last_checkpoint_ >= suspend_after_;
  // end the input at the next step.  stop_signal_: either was set.
  std::atomic<int64_t> suspend_after_{INT64_MAX};
  std::atomic<bool> end_input_now_{false};
  std::atomic<bool> stop_signal_{false};
  // The stop-with-savepoint checks of a source step: kNothing (suspended),
  // kEnd (end the input now) or kMore (go on).
  TaskInput::Step CheckStopSignal();
  // The operators hear that checkpoint `id` is complete (task thread, or
  // under notify_mu_ once finished); an operator's error is thrown as an
  // OperatorError.
  void DeliverCompleted(int64_t id);
  // Under notify_mu_, once finished: delivers the last completed checkpoint
  // if it holds the final snapshot; an error fails the job.
  void DeliverAfterFinishLocked();
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_STREAM_TASK_H_
