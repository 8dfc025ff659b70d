#include "tidemark/runtime/exec/executor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/exec/remote_exchange.h"

namespace tidemark {
using namespace internal;

JobResult::JobResult() = default;
JobResult::JobResult(const JobResult&) = default;
JobResult::JobResult(JobResult&&) noexcept = default;
JobResult& JobResult::operator=(const JobResult&) = default;
JobResult& JobResult::operator=(JobResult&&) noexcept = default;
JobResult::~JobResult() = default;

int64_t JobResult::CounterTotal(const std::string& name) const {
  int64_t total = 0;
  for (const auto& m : metrics) {
    auto it = m.counters.find(name);
    if (it != m.counters.end()) total += it->second;
  }
  return total;
}

JobExecution::JobExecution(int worker_threads, JobConfig::Scheduler scheduler)
    : scheduler_(scheduler), arena_(std::max(1, worker_threads)), pool_(worker_threads) {}

JobExecution::~JobExecution() {
  // The last handle (JobClient) went away without wait(): the job is
  // cancelled and its threads are joined, rather than left running with
  // nobody to end it.
  bool started;
  {
    internal::MutexLock lock(&mu_);
    started = started_;
  }
  bool waited;
  {
    internal::MutexLock lock(&wait_mu_);
    waited = waited_.has_value();
  }
  if (started && !waited) Cancel();
  if (coordinator_) coordinator_->Stop();
  StopThreads();
}

StreamTask* JobExecution::AddTask(std::unique_ptr<StreamTask> task) {
  tasks_.push_back(std::move(task));
  return tasks_.back().get();
}

void JobExecution::EnableCheckpoints(std::unique_ptr<CheckpointCoordinator> coordinator,
                                     int64_t restored_id, std::string restored_path,
                                     std::vector<std::string> restore_problems) {
  coordinator_ = std::move(coordinator);
  checkpointing_ = true;
  restored_id_ = restored_id;
  restored_path_ = std::move(restored_path);
  restore_problems_ = std::move(restore_problems);
}

void JobExecution::SetExchange(std::unique_ptr<RemoteExchange> exchange) {
  exchange_ = std::move(exchange);
  if (exchange_ != nullptr) exchange_->SetAlignment(&alignment_);
}

absl::Status JobExecution::FirstError() const {
  internal::MutexLock lock(&mu_);
  return first_error_;
}

void JobExecution::WatchClock(const Clock* clock) {
  if (clock == nullptr) return;
  std::weak_ptr<JobExecution> weak = weak_from_this();
  const int64_t id = clock->AddJumpListener([weak] {
    std::shared_ptr<JobExecution> self = weak.lock();
    if (self == nullptr) return;
    {
      MutexLock lock(&self->mu_);
      if (!self->started_) return;  // Start() notifies every task anyway
    }
    for (auto& t : self->tasks_) t->Notify();
  });
  if (id >= 0) {
    watched_clock_ = clock;
    clock_listener_ = id;
  }
}

void JobExecution::Start() {
  start_time_ = std::chrono::steady_clock::now();
  CompletionListener* listener = this;
  Dispatcher* dispatcher;
  if (scheduler_ == JobConfig::Scheduler::kTbbArena) {
    // Slices queued on the arena share ownership of this execution.
    arena_.Start(std::shared_ptr<ArenaScheduler>(shared_from_this(), &arena_), &timer_, listener);
    dispatcher = &arena_;
  } else {
    pool_.Start(&timer_, listener);
    dispatcher = &pool_;
  }
  timer_.Start();
  std::vector<Task*> arena_tasks;
  for (auto& t : tasks_) {
    if (t->NeedsOwnThread()) {
      threads_.push_back(std::make_unique<DedicatedThread>(t.get(), listener));
    } else {
      t->set_dispatcher(dispatcher);
      arena_tasks.push_back(t.get());
    }
  }
  {
    // From here on Cancel() may notify tasks: every dispatcher is set.
    internal::MutexLock lock(&mu_);
    remaining_ = static_cast<int>(tasks_.size());
    started_ = true;
    if (tasks_.empty()) {
      tasks_ended_at_ = std::chrono::steady_clock::now();
      done_cv_.SignalAll();
    }
  }
  for (auto& thread : threads_) thread->Start();
  for (Task* t : arena_tasks) t->Notify();
  if (coordinator_) coordinator_->Start();
  if (exchange_) exchange_->Start(this);
}

void JobExecution::TaskFinished(Task*) {
  {
    internal::MutexLock lock(&mu_);
    if (--remaining_ == 0) {
      tasks_ended_at_ = std::chrono::steady_clock::now();
      done_cv_.SignalAll();
    }
    notified_cv_.SignalAll();
  }
  MaybeStopAfterSavepoint();
}

void JobExecution::CheckpointNotified(int64_t) {
  {
    internal::MutexLock lock(&mu_);
    notified_cv_.SignalAll();
  }
  MaybeStopAfterSavepoint();
}

bool JobExecution::AllHeardLocked(int64_t id) const {
  for (const auto& t : tasks_) {
    if (t->notified_checkpoint() < id && t->lifecycle() == TaskLifecycle::kRunning) return false;
  }
  return true;
}

void JobExecution::StopAfterSavepoint(int64_t id, std::string path) {
  {
    internal::MutexLock lock(&mu_);
    if (stop_after_id_ >= 0) return;
    stop_after_id_ = id;
    stop_after_path_ = std::move(path);
  }
  MaybeStopAfterSavepoint();
}

void JobExecution::MaybeStopAfterSavepoint() {
  {
    internal::MutexLock lock(&mu_);
    if (stop_after_id_ < 0 || stop_after_done_ || !AllHeardLocked(stop_after_id_)) return;
    stop_after_done_ = true;
    if (!first_error_.ok()) return;  // failed first: the failure stands
    stopped_with_savepoint_ = stop_after_path_;
    if (remaining_ == 0) return;  // every task had finished
  }
  Cancel();
}

bool JobExecution::done() const {
  internal::MutexLock lock(&mu_);
  return started_ && remaining_ == 0;
}

void JobExecution::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  absl::Status error;
  {
    // Before Start() the tasks cannot be notified yet; they see the flag at
    // their first slice.
    internal::MutexLock lock(&mu_);
    notified_cv_.SignalAll();
    error = first_error_;
    if (!started_) return;
  }
  // A savepoint being taken fails now: its caller (perhaps the thread that
  // would call Wait()) does not wait for its timeout.
  if (coordinator_) {
    coordinator_->AbortSavepoint(
        error.ok() ? absl::CancelledError("savepoint: the job was cancelled before it was complete")
                   : absl::Status(error.code(),
                                  absl::StrCat("savepoint: the job failed before it was complete: ",
                                               error.message())));
  }
  for (auto& t : tasks_) t->Notify();
}

void JobExecution::Fail(const absl::Status& status) {
  {
    internal::MutexLock lock(&mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  Cancel();
}

void JobExecution::Notice(std::string line) {
  MutexLock lock(&mu_);
  notices_.push_back(std::move(line));
}

void JobExecution::StopThreads() {
  timer_.Stop();
  pool_.Stop();
  for (auto& thread : threads_) thread->Join();
}

JobResult JobExecution::Wait() {
  internal::MutexLock lock(&wait_mu_);
  if (!waited_) waited_ = WaitOnce();
  return *waited_;
}

JobResult JobExecution::WaitOnce() {
  // The time between the tasks' end and this call noticing it (a caller
  // that calls Wait() late, or polls done() and sleeps) is not the job's.
  std::chrono::steady_clock::duration unwaited{0};
  {
    internal::MutexLock lock(&mu_);
    while (!started_ || remaining_ != 0) done_cv_.Wait(&mu_);
    unwaited = std::max(std::chrono::steady_clock::duration{0},
                        std::chrono::steady_clock::now() - tasks_ended_at_);
  }
  if (watched_clock_ != nullptr) watched_clock_->RemoveJumpListener(clock_listener_);
  StopThreads();
  JobResult result;
  // Before the tasks are released: the coordinator's thread may still be
  // telling them of a completed checkpoint.
  if (coordinator_) coordinator_->Stop();
  auto failed_or_cancelled = [this] {
    internal::MutexLock lock(&mu_);
    return !first_error_.ok() || cancelled();
  };
  // Every subtask finished: the final checkpoint (made of their final
  // snapshots), then the commits that wait for it.
  auto final_checkpoint = [this]() -> int64_t {
    const int64_t id = coordinator_->CompleteFinal();
    if (id < 0) {
      Fail(absl::DataLossError(absl::StrCat("the final checkpoint could not be written: ",
                                            coordinator_->Summary().last_error)));
    }
    return id;
  };
  auto commit_final = [this](int64_t id) {
    for (auto& t : tasks_) {
      if (absl::Status s = t->NotifyFinalCheckpoint(id); !s.ok()) {
        Fail(s);
        break;
      }
    }
  };
  auto checkpoint_summary = [this] {
    CheckpointSummary c;
    if (coordinator_) c = coordinator_->Summary();
    c.restored_id = restored_id_;
    c.restored_path = restored_path_;
    c.restore_problems = restore_problems_;
    MutexLock lock(&mu_);
    c.notices.insert(c.notices.end(), notices_.begin(), notices_.end());
    return c;
  };
  // Across ranks: the exchange completes with every other rank; the job's
  // status, metrics and checkpoints are then those of every rank.
  absl::Status distributed;
  std::vector<SubtaskMetricsSnapshot> all_metrics;
  if (exchange_) {
    absl::Status local = FirstError();
    bool stopped;
    {
      MutexLock lock(&mu_);
      stopped = !stopped_with_savepoint_.empty();
    }
    if (local.ok() && cancelled() && !stopped) local = absl::CancelledError("job cancelled");
    all_metrics = Metrics();
    int64_t final_id = -1;
    FinishHooks hooks;
    hooks.metrics = &all_metrics;
    hooks.network = &result.network;
    std::string stopped_path;
    hooks.stopped_with_savepoint = &stopped_path;
    if (checkpointing_) {
      if (coordinator_)
        hooks.final_checkpoint = final_checkpoint;
      else
        hooks.final_checkpoint = [] { return int64_t{-1}; };  // only rank 0 has one
      hooks.final_checkpoint_id = &final_id;
      hooks.checkpoint_summary = checkpoint_summary;
      hooks.checkpoints = &result.checkpoints;
    }
    distributed = exchange_->Finish(local, hooks);
    if (!distributed.ok()) {
      Fail(distributed);
    } else if (!stopped_path.empty()) {
      // Stopped with a savepoint (on rank 0): no final checkpoint; a rank
      // whose tasks had all finished before it heard is stopped too.
      MutexLock lock(&mu_);
      if (first_error_.ok() && stopped_with_savepoint_.empty())
        stopped_with_savepoint_ = stopped_path;
    } else if (checkpointing_) {
      if (final_id < 0) {
        Fail(absl::DataLossError(
            absl::StrCat("rank ", exchange_->cluster().rank,
                         ": the final checkpoint could not be written (rank 0 writes it)")));
      } else {
        commit_final(final_id);
      }
    }
  } else if (coordinator_) {
    if (!failed_or_cancelled()) {
      const int64_t id = final_checkpoint();
      if (id >= 0) commit_final(id);
    }
    result.checkpoints = checkpoint_summary();
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_ - unwaited)
          .count();
  result.metrics = exchange_ ? std::move(all_metrics) : Metrics();
  for (auto& t : tasks_) t->Release();
  {
    internal::MutexLock lock(&mu_);
    if (!distributed.ok()) {
      result.status = distributed;  // names the rank that failed first
    } else if (!first_error_.ok()) {
      result.status = first_error_;
    } else if (!stopped_with_savepoint_.empty()) {
      result.checkpoints.stopped_with_savepoint = stopped_with_savepoint_;  // status OK
    } else if (cancelled()) {
      result.status = absl::CancelledError("job cancelled");
    }
  }
  return result;
}

absl::StatusOr<std::string> JobExecution::TriggerSavepoint(const std::string& dir,
                                                           Duration timeout) {
  if (!coordinator_) {
    return absl::FailedPreconditionError(
        "savepoint: the job has no checkpointing (enable_checkpointing; with MPI, rank 0 takes "
        "it)");
  }
  absl::StatusOr<CheckpointCoordinator::Savepoint> sp =
      coordinator_->TakeSavepoint(dir, CheckpointCoordinator::SavepointMode::kTrigger, timeout);
  if (!sp.ok()) return sp.status();
  return sp->path;
}

absl::StatusOr<std::string> JobExecution::StopWithSavepoint(const std::string& dir, bool drain,
                                                            Duration timeout) {
  if (!coordinator_) {
    return absl::FailedPreconditionError(
        "stop-with-savepoint: the job has no checkpointing (enable_checkpointing)");
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  absl::StatusOr<CheckpointCoordinator::Savepoint> sp =
      coordinator_->TakeSavepoint(dir,
                                  drain ? CheckpointCoordinator::SavepointMode::kStopAndDrain
                                        : CheckpointCoordinator::SavepointMode::kStop,
                                  timeout);
  if (!sp.ok()) return sp.status();
  if (drain) return sp->path;  // the job finishes by itself, as at the end of input
  // Every task hears that the savepoint is complete (the sinks commit what
  // was pending for it) before the job is ended.  The coordinator has told
  // them all; each hears at its next slice (CheckpointNotified), unless it
  // has finished.
  bool stopped = false;
  {
    MutexLock lock(&mu_);
    while (!AllHeardLocked(sp->id) && !cancelled()) {
      if (notified_cv_.WaitUntil(&mu_, deadline)) break;
    }
    if (first_error_.ok()) {
      stopped_with_savepoint_ = sp->path;
      stopped = true;
    }
  }
  // Across ranks: every other rank ends its job OK once its tasks heard
  // (they were told before this message), rather than taking rank 0's end
  // for a failure.
  if (stopped && exchange_) exchange_->StopWithSavepoint(sp->id, sp->path);
  if (!stopped) {
    // The savepoint is complete but the job failed (or was cancelled) before
    // it stopped with it: as Flink's StopWithSavepointStoppingException, the
    // caller hears so; the job's failure takes its course (a restart
    // strategy restarts it from its latest checkpoint).
    absl::Status error;
    {
      MutexLock lock(&mu_);
      error = first_error_;
    }
    if (error.ok()) {
      return absl::CancelledError(absl::StrCat("stop-with-savepoint: the savepoint ", sp->path,
                                               " is complete, but the job was cancelled before "
                                               "it stopped with it"));
    }
    return absl::Status(error.code(),
                        absl::StrCat("stop-with-savepoint: the savepoint ", sp->path,
                                     " is complete, but the job failed before it stopped with "
                                     "it: ",
                                     error.message()));
  }
  Cancel();
  return sp->path;
}

std::vector<SubtaskMetricsSnapshot> JobExecution::Metrics() const {
  std::vector<SubtaskMetricsSnapshot> out;
  out.reserve(tasks_.size());
  for (const auto& t : tasks_) out.push_back(Snapshot(*t->metrics()));
  return out;
}

}  // namespace tidemark
