#include "tidemark/runtime/task/detail/stream_task.h"

#include <algorithm>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "tidemark/partitioning/key_groups.h"
#include "tidemark/runtime/state/kv_store.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/detail/node_ops.h"

namespace tidemark::internal {
namespace {
constexpr int kStepsPerSlice = 32;
}  // namespace

// For node_ops.h (which does not include stream_task.h).
size_t TaskBatchSize(const StreamTask* task) { return task->config().batch_size; }
WriterSignals* TaskSignals(StreamTask* task) { return task->signals(); }
SubtaskMetrics* TaskMetrics(StreamTask* task) { return task->metrics(); }
void TaskAddOutputObject(StreamTask* task, std::unique_ptr<OutputBase> out) {
  task->AddOutputObject(std::move(out));
}

StreamTask::StreamTask(std::string name, TaskHost* host, std::unique_ptr<SubtaskMetrics> metrics,
                       const Clock* clock, const JobConfig* config)
    : Task(std::move(name)),
      host_(host),
      cancel_flag_(host->cancel_flag()),
      metrics_(std::move(metrics)),
      clock_(clock),
      config_(config),
      timers_(clock),
      activity_clock_(clock) {
  signals_.cancelled = cancel_flag_;
}

StreamTask::~StreamTask() { async_snapshots_->AwaitAll(); }

OperatorContext* StreamTask::AddContext(std::unique_ptr<OperatorContext> ctx) {
  ctx->set_input_activity_clock(&activity_clock_);
  ctx->set_cancel_flag(cancel_flag_);
  ctx->set_task_host(host_);
  contexts_.push_back(std::move(ctx));
  return contexts_.back().get();
}

void StreamTask::AddOperator(std::unique_ptr<OperatorBase> op, OperatorContext* ctx) {
  operators_.emplace_back(std::move(op), ctx);
}

Task::Result StreamTask::Wait(Timestamp now_ms) {
  metrics_->RefreshGaugeFunctions();
  // A timer at T is due at clock T + 1 (ProcessingTimeService).  A source
  // that had nothing and asks to be polled again now (or in the past) is
  // polled in a millisecond, not at once: the task must not spin.
  const Timestamp retry = std::max(input_->RetryAt(), SaturatingAdd(now_ms, 1));
  Timestamp next = std::min(timers_.NextFiringTime(), retry);
  if (next == kMaxTimestamp) {
    wakeup_ = SteadyTime::max();
  } else {
    if (next <= now_ms) return Result::kYield;
    wakeup_ = signals_.now + std::chrono::milliseconds(next - now_ms);
  }
  return Result::kWait;
}

void StreamTask::SetBackpressured(bool blocked) {
  if (blocked == paused_by_backpressure_) return;
  paused_by_backpressure_ = blocked;
  if (blocked) {
    activity_clock_.Pause();
  } else {
    activity_clock_.Resume();
  }
}

bool StreamTask::AnyWriterFull() {
  for (WriterBase* w : writers_)
    if (!w->HasSpace()) return true;
  return false;
}

void StreamTask::OpenChain() {
  lifecycle_.TransitionTo(restore_ ? TaskLifecycle::kRestoring : TaskLifecycle::kRunning, name());
  // Open from the tail to the head, so an operator's outputs are ready when
  // it opens.
  for (auto it = operators_.rbegin(); it != operators_.rend(); ++it) {
    OperatorBase* op = it->first.get();
    OperatorContext* ctx = it->second;
    GuardUserCall(*ctx, [&] { op->Open(*ctx); });
  }
  input_->Open();
  if (restore_) {
    Restore();
    lifecycle_.TransitionTo(TaskLifecycle::kRunning, name());
  }
}

void StreamTask::FinishTask() {
  lifecycle_.TransitionTo(TaskLifecycle::kFinishing, name());
  FinishChain();
  if (ack_ != nullptr) {
    // Every acknowledgement of this task comes before its final snapshot.
    async_snapshots_->AwaitAll();
    SubtaskSnapshot final_state = TakeSnapshot(last_checkpoint_, /*final_state=*/true);
    final_state.finished = true;
    ack_->SubtaskFinished(std::move(final_state));
  }
  for (WriterBase* w : writers_) w->EndOfInput();
  metrics_->RefreshGaugeFunctions();
  metrics_->finished.store(true, std::memory_order_relaxed);
  Terminate(TaskLifecycle::kFinished);
  if (ack_ != nullptr) {
    // From here on the notifying thread tells the operators; a checkpoint
    // completed since the last slice is delivered now.
    MutexLock lock(&notify_mu_);
    delivering_after_finish_ = true;
    DeliverAfterFinishLocked();
  }
}

Task::Result StreamTask::RunSlice() {
  if (cancelled()) {
    Terminate(TaskLifecycle::kCancelled);
    return Result::kFinished;
  }
  try {
    if (lifecycle_.state() == TaskLifecycle::kCreated) OpenChain();
    if (ack_ != nullptr) HandleCheckpointSignals();
    signals_.now = std::chrono::steady_clock::now();
    // Still blocked on output since the last slice?  Then the timers below see
    // a stopped input activity clock.
    if (paused_by_backpressure_) SetBackpressured(AnyWriterFull());
    const Timestamp now_ms = clock_->NowMillis();
    timers_.set_slice_processing_time(now_ms);
    if (!finished_on_restore_) timers_.FireDue(now_ms);
    if (finished_on_restore_ && input_->IsSource()) [[unlikely]] {
      // Nothing left to read: the MAX watermark, as at the end of input.
      input_->EndInputNow();
      FinishTask();
      return Result::kFinished;
    }
    bool check_space = true;
    for (int step = 0; step < kStepsPerSlice; ++step) {
      if (cancelled()) break;
      // Unaligned checkpoints: a barrier on a priority lane is taken before
      // anything else, also when the outputs are full.
      if (unaligned_) input_->PollPriority();
      if (check_space || signals_.backpressured) {
        signals_.backpressured = false;
        check_space = false;
        if (AnyWriterFull()) {
          SetBackpressured(true);
          for (WriterBase* x : writers_) x->FlushAll();
          return Wait(now_ms);
        }
        SetBackpressured(false);
      }
      // A source starts a requested checkpoint between two polls.
      if (ack_ != nullptr &&
          requested_checkpoint_.load(std::memory_order_acquire) > last_checkpoint_) [[unlikely]] {
        HandleCheckpointSignals();
      }
      TaskInput::Step step_result = TaskInput::Step::kMore;
      if (stop_signal_.load(std::memory_order_relaxed)) [[unlikely]] {
        step_result = CheckStopSignal();
      }
      if (step_result == TaskInput::Step::kMore) step_result = input_->RunStep();
      switch (step_result) {
        case TaskInput::Step::kMore:
          break;
        case TaskInput::Step::kNothing:
          for (WriterBase* w : writers_) w->FlushAll();
          return Wait(now_ms);
        case TaskInput::Step::kEnd:
          // A checkpoint requested before the end goes out before it.
          if (ack_ != nullptr) HandleCheckpointSignals();
          // Processing-time timers that fell due while this slice worked
          // through the input fire before the chain finishes (timers are
          // checked between slices, and this slice is the last): as Flink
          // runs the timers already due (queued in the mailbox) before it
          // finishes an operator; those not yet due are dropped.
          if (!finished_on_restore_) timers_.FireDue(clock_->NowMillis());
          FinishTask();
          return Result::kFinished;
      }
    }
    const SteadyTime cutoff = signals_.now - config_->buffer_timeout;
    for (WriterBase* w : writers_) w->FlushOlderThan(cutoff);
    metrics_->RefreshGaugeFunctions();
    return Result::kYield;
  } catch (const TaskCancelled&) {
    // The job was cancelled in the middle of a chain; nothing to report.
    Terminate(TaskLifecycle::kCancelled);
    return Result::kFinished;
  } catch (const OperatorError& e) {
    host_->Fail(absl::AbortedError(e.what()));
  } catch (...) {
    host_->Fail(absl::AbortedError(
        absl::StrCat("task '", name(), "' (subtask ", metrics_->subtask(), " of ",
                     metrics_->parallelism(), ") failed: ", DescribeCurrentException())));
  }
  Terminate(TaskLifecycle::kFailed);
  return Result::kFinished;
}

void StreamTask::EnableCheckpoints(CheckpointAcknowledger* ack, int task_index,
                                   WatermarkListener* listener) {
  ack_ = ack;
  unaligned_ = config_->unaligned_checkpoints;
  task_index_ = task_index;
  listener_ = listener;
  if (input_) input_->SetBarrierHandler(this);
}

void StreamTask::RequestCheckpoint(int64_t id) {
  int64_t cur = requested_checkpoint_.load(std::memory_order_relaxed);
  while (cur < id &&
         !requested_checkpoint_.compare_exchange_weak(cur, id, std::memory_order_acq_rel)) {
  }
  Notify();
}

void StreamTask::RequestSavepoint(int64_t id) {
  int64_t cur = savepoint_request_.load(std::memory_order_relaxed);
  while (cur < id &&
         !savepoint_request_.compare_exchange_weak(cur, id, std::memory_order_acq_rel)) {
  }
  RequestCheckpoint(id);
}

void StreamTask::SuspendAfter(int64_t id) {
  suspend_after_.store(id, std::memory_order_release);
  stop_signal_.store(true, std::memory_order_release);
  Notify();
}

void StreamTask::EndInputNow() {
  end_input_now_.store(true, std::memory_order_release);
  stop_signal_.store(true, std::memory_order_release);
  Notify();
}

TaskInput::Step StreamTask::CheckStopSignal() {
  if (!input_->IsSource()) return TaskInput::Step::kMore;
  if (end_input_now_.load(std::memory_order_acquire)) {
    input_->EndInputNow();  // the MAX watermark, as at the end of input
    return TaskInput::Step::kEnd;
  }
  if (last_checkpoint_ >= suspend_after_.load(std::memory_order_acquire))
    return TaskInput::Step::kNothing;
  return TaskInput::Step::kMore;
}

void StreamTask::NotifyCheckpointComplete(int64_t id) {
  int64_t cur = completed_checkpoint_.load(std::memory_order_relaxed);
  while (cur < id &&
         !completed_checkpoint_.compare_exchange_weak(cur, id, std::memory_order_acq_rel)) {
  }
  {
    MutexLock lock(&notify_mu_);
    if (delivering_after_finish_) {
      DeliverAfterFinishLocked();
      return;
    }
  }
  Notify();
}

void StreamTask::DeliverCompleted(int64_t id) {
  last_notified_ = id;
  for (auto& [op, ctx] : operators_) {
    OperatorBase* o = op.get();
    GuardUserCall(*ctx, [o, id] { o->NotifyCheckpointComplete(id); });
  }
  notified_checkpoint_.store(id, std::memory_order_release);
  host_->CheckpointNotified(id);
}

void StreamTask::DeliverAfterFinishLocked() {
  const int64_t completed = completed_checkpoint_.load(std::memory_order_acquire);
  // Only a checkpoint taken after the final snapshot holds it: one this task
  // acknowledged before it finished does not know of the last files its
  // sinks pre-committed when they finished.
  if (completed <= last_notified_ || completed <= last_checkpoint_) return;
  try {
    DeliverCompleted(completed);
  } catch (...) {
    host_->Fail(
        absl::AbortedError(absl::StrCat("after its task '", name(), "' finished, at checkpoint ",
                                        completed, ": ", DescribeCurrentException())));
  }
}

absl::Status StreamTask::NotifyFinalCheckpoint(int64_t id) {
  MutexLock lock(&notify_mu_);
  for (auto& [op, ctx] : operators_) {
    try {
      op->NotifyCheckpointComplete(id);
    } catch (...) {
      return absl::AbortedError(absl::StrCat("operator '", ctx->operator_name(), "' (subtask ",
                                             ctx->subtask_index(), ") at the final checkpoint ", id,
                                             ": ", DescribeCurrentException()));
    }
  }
  return absl::OkStatus();
}

void StreamTask::HandleCheckpointSignals() {
  if (input_->IsSource()) {
    const int64_t requested = requested_checkpoint_.load(std::memory_order_acquire);
    if (requested > last_checkpoint_) {
      const bool savepoint = savepoint_request_.load(std::memory_order_acquire) == requested;
      PerformCheckpoint(requested, 0, unaligned_ && !savepoint);
    }
  }
  const int64_t completed = completed_checkpoint_.load(std::memory_order_acquire);
  if (completed > last_notified_) DeliverCompleted(completed);
}

void StreamTask::OnBarrierAligned(int64_t checkpoint_id, int64_t alignment_ns) {
  if (ack_ != nullptr) PerformCheckpoint(checkpoint_id, alignment_ns);
}

void StreamTask::OnUnalignedBarrier(int64_t checkpoint_id) {
  if (ack_ != nullptr) PerformCheckpoint(checkpoint_id, 0, /*unaligned=*/true);
}

void StreamTask::OnChannelStateComplete(int64_t checkpoint_id, std::string channel_state) {
  if (!waiting_ || waiting_->snapshot.checkpoint_id != checkpoint_id) return;
  WaitingForChannelState w = std::move(*waiting_);
  waiting_.reset();
  w.snapshot.channel_state = std::move(channel_state);
  AcknowledgeSnapshot(std::move(w.snapshot), std::move(w.deferred), std::move(w.sink));
}

SubtaskSnapshot StreamTask::TakeSnapshot(int64_t id, bool final_state, DeferredParts* deferred,
                                         std::shared_ptr<SharedFileSink> sink) {
  SubtaskSnapshot s;
  s.checkpoint_id = id;
  s.task_index = task_index_;
  s.task_name = metrics_->task_name();
  s.subtask = metrics_->subtask();
  s.parallelism = metrics_->parallelism();
  s.has_source = input_->IsSource();
  {
    StateWriter w;
    input_->SnapshotPosition(w);
    s.input_state = w.Release();
  }
  s.operators.reserve(operators_.size());
  for (auto& [op, ctx] : operators_) {
    StateWriter w;
    if (ctx->config().incremental_checkpoints) w.set_key_group_hint(ctx->max_parallelism());
    if (sink != nullptr) w.set_shared_file_sink(sink);
    OperatorBase* o = op.get();
    GuardUserCall(*ctx, [o, &w, id, final_state] {
      if (!final_state) o->PrepareSnapshotPreBarrier(id);
      o->SnapshotState(w);
    });
    if (deferred != nullptr && w.has_deferred())
      deferred->emplace_back(s.operators.size(), w.TakeDeferred());
    s.operators.push_back(OperatorSnapshot{ctx->operator_name(), w.Release()});
  }
  return s;
}

void StreamTask::PerformCheckpoint(int64_t id, int64_t alignment_ns, bool unaligned) {
  if (id <= last_checkpoint_) return;
  last_checkpoint_ = id;
  // The synchronous part: operators' small state encoded, large state as
  // copy-on-write views whose encoding is deferred.
  const auto sync_start = std::chrono::steady_clock::now();
  DeferredParts deferred;
  // Native incremental checkpoints of a state backend's own files: only for
  // a checkpoint (never a savepoint) into an incremental storage.
  std::shared_ptr<SharedFileSink> sink =
      ack_ != nullptr ? ack_->SharedFileSinkFor(id) : std::shared_ptr<SharedFileSink>();
  SubtaskSnapshot s = TakeSnapshot(id, /*final_state=*/false, &deferred, sink);
  s.alignment_ns = alignment_ns;
  s.sync_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - sync_start)
                  .count();
  for (WriterBase* w : writers_) w->EmitBarrier(id, unaligned);
  metrics_->last_checkpoint.store(id, std::memory_order_relaxed);
  metrics_->last_alignment_ns.store(alignment_ns, std::memory_order_relaxed);
  if (alignment_ns > metrics_->max_alignment_ns.load(std::memory_order_relaxed))
    metrics_->max_alignment_ns.store(alignment_ns, std::memory_order_relaxed);
  if (listener_ != nullptr) {
    listener_->OnCheckpointBarrier(metrics_->task_name(), metrics_->subtask(), id, alignment_ns);
  }
  if (unaligned && !input_->IsSource()) {
    // Acknowledged once the gate has the channel state (at once when every
    // channel is done already).  One that waits still was abandoned.
    waiting_.emplace(WaitingForChannelState{std::move(s), std::move(deferred), std::move(sink)});
    return;
  }
  AcknowledgeSnapshot(std::move(s), std::move(deferred), std::move(sink));
}

void StreamTask::AcknowledgeSnapshot(SubtaskSnapshot s, DeferredParts deferred,
                                     std::shared_ptr<SharedFileSink> sink) {
  if (deferred.empty()) {
    if (sink != nullptr) {
      s.shared_files = sink->Files();
      s.shared_uploaded_bytes = sink->uploaded_bytes();
    }
    ack_->Acknowledge(std::move(s));
    return;
  }
  // The asynchronous part: the snapshot threads encode the deferred parts
  // and acknowledge.  What they touch outlives the task's run: the
  // acknowledger and the host (the task awaits this work before it ends).
  struct Work {
    SubtaskSnapshot snapshot;
    DeferredParts deferred;
    std::shared_ptr<SharedFileSink> sink;
  };
  auto work = std::make_shared<Work>(Work{std::move(s), std::move(deferred), std::move(sink)});
  async_snapshots_->Begin();
  SnapshotPool::Shared().Submit(
      [work, ack = ack_, host = host_, async = async_snapshots_, task = name()] {
        SubtaskSnapshot& snap = work->snapshot;
        size_t op = 0;
        try {
          for (auto& [i, parts] : work->deferred) {
            op = i;
            snap.operators[i].state =
                StateWriter::CompleteDeferred(std::move(snap.operators[i].state), std::move(parts));
          }
          work->deferred.clear();
          if (work->sink != nullptr) {
            snap.shared_files = work->sink->Files();
            snap.shared_uploaded_bytes = work->sink->uploaded_bytes();
          }
          ack->Acknowledge(std::move(snap));
        } catch (...) {
          // The checkpoint fails (counted against the tolerable number, as
          // Flink's CHECKPOINT_ASYNC_EXCEPTION); where it cannot be declined
          // (another rank's stand-in), the job.
          const std::string error =
              absl::StrCat("task '", task, "' (subtask ", snap.subtask, "): operator '",
                           snap.operators[op].name, "' at checkpoint ", snap.checkpoint_id,
                           " (asynchronous part): ", DescribeCurrentException());
          if (!ack->Decline(snap.checkpoint_id, error)) host->Fail(absl::AbortedError(error));
        }
        async->End();
      });
}

std::vector<int> StreamTask::OldStatesFor(size_t i, const SubtaskRestore& rs,
                                          const std::string& where) const {
  const int s = metrics_->subtask(), p = metrics_->parallelism();
  const int old_p = rs.old_parallelism;
  if (old_p == p) return {s};
  const auto& [op, ctx] = operators_[i];
  std::vector<int> picked;
  switch (op->state_rescaling()) {
    case StateRescaling::kKeyGroups:
      return OverlappingSubtasks(s, p, old_p, ctx->max_parallelism());
    case StateRescaling::kRoundRobin:
      for (int k = s; k < old_p; k += p) picked.push_back(k);
      return picked;
    case StateRescaling::kBroadcast:
      return {s % old_p};
    case StateRescaling::kDropped:
      return picked;
    case StateRescaling::kNotRescalable:
      for (int k = 0; k < old_p; ++k) {
        if (!(*rs.old)[static_cast<size_t>(k)].operators[i].state.empty()) {
          throw std::runtime_error(absl::StrCat(
              where, ": operator '", ctx->operator_name(), "' has state (old subtask ", k,
              ") and cannot be restored at another parallelism (it names no way to split it)"));
        }
      }
      return picked;
  }
  return picked;
}

void StreamTask::Restore() {
  const SubtaskRestore& rs = *restore_;
  const int p = metrics_->parallelism();
  const std::string where = absl::StrCat(
      "restoring task '", metrics_->task_name(), "' subtask ", metrics_->subtask(),
      " from checkpoint ", rs.checkpoint_id,
      rs.old_parallelism == p
          ? std::string()
          : absl::StrCat(" at parallelism ", p, " (it ran at ", rs.old_parallelism, ")"));
  const std::vector<SubtaskSnapshot>& old = *rs.old;
  finished_on_restore_ =
      !old.empty() &&
      std::all_of(old.begin(), old.end(), [](const SubtaskSnapshot& s) { return s.finished; });
  for (const SubtaskSnapshot& s : old) {
    if (s.operators.size() != operators_.size()) {
      throw std::runtime_error(absl::StrCat(where, ": the checkpoint has ", s.operators.size(),
                                            " operators in this chain, the job ",
                                            operators_.size()));
    }
    for (size_t i = 0; i < operators_.size(); ++i) {
      if (!rs.matched_by_uid && s.operators[i].name != operators_[i].second->operator_name()) {
        throw std::runtime_error(absl::StrCat(where, ": operator ", i, " is '",
                                              operators_[i].second->operator_name(),
                                              "', the checkpoint has '", s.operators[i].name, "'"));
      }
    }
    if (s.has_source != input_->IsSource()) {
      throw std::runtime_error(
          absl::StrCat(where, ": the checkpoint has ", s.has_source ? "a source" : "an input gate",
                       " where the job has ", input_->IsSource() ? "a source" : "an input gate"));
    }
  }
  for (size_t i = 0; i < operators_.size(); ++i) {
    auto& [op, ctx] = operators_[i];
    for (int k : OldStatesFor(i, rs, where)) {
      StateReader r(old[static_cast<size_t>(k)].operators[i].state);
      OperatorBase* o = op.get();
      GuardUserCall(*ctx, [o, &r] { o->RestoreState(r); });
      if (!r.ok()) {
        throw std::runtime_error(absl::StrCat(where, ": operator '", ctx->operator_name(),
                                              "' (old subtask ", k, "): ", r.error()));
      }
    }
  }
  if (rs.restore_input) {
    StateReader r(old[static_cast<size_t>(metrics_->subtask())].input_state);
    input_->RestorePosition(r);
    if (!r.ok()) throw std::runtime_error(absl::StrCat(where, ": input: ", r.error()));
    // An unaligned checkpoint's records in flight, queued ahead of the new
    // input (after the valve, whose watermark the chain has now).
    if (absl::Status st = input_->RestoreChannelState(
            old[static_cast<size_t>(metrics_->subtask())].channel_state);
        !st.ok()) {
      throw std::runtime_error(absl::StrCat(where, ": input: ", st.message()));
    }
  } else {
    for (size_t k = 0; k < old.size(); ++k) {
      if (!old[k].channel_state.empty()) {
        throw std::runtime_error(absl::StrCat(
            where, ": old subtask ", k,
            " has channel state (records in flight, stored by an unaligned checkpoint), which "
            "cannot be restored where this task's input channels changed (rescaling with channel "
            "state is not done; restore at the same parallelism, or from a savepoint, which is "
            "aligned)"));
      }
    }
    std::vector<const std::string*> states;
    for (const SubtaskSnapshot& s : old) states.push_back(&s.input_state);
    if (absl::Status s = input_->RestoreRescaled(states); !s.ok())
      throw std::runtime_error(absl::StrCat(where, ": input: ", s.message()));
  }
  last_checkpoint_ = rs.checkpoint_id;
  restore_.reset();
}

void StreamTask::FinishChain() {
  for (auto& [op, ctx] : operators_) {
    OperatorBase* o = op.get();
    GuardUserCall(*ctx, [o] { o->Finish(); });
  }
}

void StreamTask::Terminate(TaskLifecycle end) {
  // No snapshot of this task acknowledges after it has ended.
  async_snapshots_->AwaitAll();
  const TaskLifecycle from = lifecycle_.TransitionTo(end, name());
  SetBackpressured(false);
  if (from != TaskLifecycle::kCreated) CloseChain();
}

void StreamTask::CloseChain() {
  try {
    // The gauge functions' last values, while their objects are open.
    metrics_->RefreshGaugeFunctions();
  } catch (...) {
  }
  for (auto& [op, ctx] : operators_) {
    try {
      op->Close();
    } catch (...) {
      // The job has already ended or failed; Close() errors add nothing.
    }
  }
  try {
    if (input_) input_->Close();
  } catch (...) {
  }
}

void StreamTask::Release() {
  input_.reset();
  operators_.clear();
  outputs_.clear();
  writers_.clear();
}

}  // namespace tidemark::internal
