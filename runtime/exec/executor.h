// runtime/exec/executor.h
//
// JobExecution: runs the tasks of one job.
//
// Scheduling, in three pieces: tasks that do not block run cooperatively on
// a oneTBB task_arena (arena_scheduler.h), so a job with more subtasks than
// cores neither oversubscribes the machine nor spins, and an idle job uses no
// CPU.  Tasks that do blocking I/O (sockets, files) get a thread of their own
// (dedicated_thread.h) that sleeps in poll().  One timer thread wakes tasks at
// their deadlines (wakeup_timer.h: periodic watermarks, processing-time
// timers, retries).  The task's state machine (task.h) guarantees that none is
// run by two threads at once and that no Notify() is lost.
//
// Failure: the first error (an exception from user code, a source error)
// cancels the job; every task then finishes at its next slice, every thread is
// joined, and Wait() returns that error.  Cancel() from any thread does the
// same with a CANCELLED status.
//
// Lifetime: the execution is shared (shared_ptr) with every slice queued on
// the arena, so a TBB worker finishing a slice never touches freed memory; user
// code (operators, sources) is destroyed by Wait() on the caller's thread.
#ifndef TM_RUNTIME_EXECUTOR_H_
#define TM_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/core/detail/task_host.h"
#include "tidemark/runtime/core/job_config.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/exec/arena_scheduler.h"
#include "tidemark/runtime/exec/dedicated_thread.h"
#include "tidemark/runtime/exec/job_result.h"
#include "tidemark/runtime/exec/wakeup_timer.h"
#include "tidemark/runtime/exec/worker_pool.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/task/detail/stream_task.h"
#include "tidemark/runtime/task/watermark_alignment.h"

namespace tidemark {

namespace internal {
class RemoteExchange;

class JobExecution final : public TaskHost,
                           private CompletionListener,
                           public std::enable_shared_from_this<JobExecution> {
 public:
  explicit JobExecution(int worker_threads,
                        JobConfig::Scheduler scheduler = JobConfig::Scheduler::kWorkerPool);
  ~JobExecution();

  // --- assembly ---
  StreamTask* AddTask(std::unique_ptr<StreamTask> task);
  template <typename C>
  C* AddChannel(std::unique_ptr<C> ch) {
    C* raw = ch.get();
    channels_.push_back(std::move(ch));
    return raw;
  }

  // Checkpoints: the job's coordinator (every task added to it; null on the
  // ranks other than 0 of a job across ranks), and what the job was restored
  // from.
  void EnableCheckpoints(std::unique_ptr<CheckpointCoordinator> coordinator, int64_t restored_id,
                         std::string restored_path, std::vector<std::string> restore_problems);
  CheckpointCoordinator* checkpoint_coordinator() const { return coordinator_.get(); }
  // A job spanning ranks: the exchange of its remote channels, started with
  // the tasks and finished by Wait() (runtime/cluster/mpi_exchange.h).
  void SetExchange(std::unique_ptr<RemoteExchange> exchange);

  // The job's watermark alignment groups (runtime/task/watermark_alignment.h).
  AlignmentCoordinator* alignment() { return &alignment_; }

  // Wakes every task whenever `clock` jumps (Clock::AddJumpListener: a
  // ManualClock), so processing-time timers due after a jump fire at once,
  // not after a wait computed from the old reading; until Wait() returns.
  // Call before Start().
  void WatchClock(const Clock* clock);
  // Starts every task.  Call once.
  void Start();
  // Blocks until every task has finished; returns the job's result.  Any
  // thread, any number of times: the first call ends the job (its final
  // checkpoint and commits), the others wait for it and get the same result.
  JobResult Wait();
  // Stops the job from any thread; Wait() then returns CANCELLED (unless it
  // had already failed or finished).
  void Cancel();
  // Records the first error and cancels the job.  Thread-safe.
  void Fail(const absl::Status& status) override;
  void Notice(std::string line) override;
  void CheckpointNotified(int64_t id) override;
  void StopAfterSavepoint(int64_t id, std::string path) override;
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  // The flag behind cancelled(), for the tasks' per-record checks.
  const std::atomic<bool>* cancel_flag() const override { return &cancelled_; }
  bool done() const;
  // The error that failed the job (OK while none did).
  absl::Status FirstError() const override;

  // Savepoints (docs/checkpoints.md, "Savepoints"), from any thread; need
  // checkpointing on (a coordinator).  TriggerSavepoint: the job goes on.
  // StopWithSavepoint: without `drain` the sources stop at the savepoint's
  // barrier, the operators are told it is complete (the sinks commit), and
  // the job ends with OK without firing its open windows; with `drain` the
  // sources end their input first (every window fires) and the job finishes
  // as at the end of input.  Both return the savepoint's directory.
  absl::StatusOr<std::string> TriggerSavepoint(const std::string& dir, Duration timeout);
  absl::StatusOr<std::string> StopWithSavepoint(const std::string& dir, bool drain,
                                                Duration timeout);

  // Current metrics of every subtask.  Thread-safe.
  std::vector<SubtaskMetricsSnapshot> Metrics() const;

 private:
  // CompletionListener (both schedulers).
  void TaskFinished(Task* task) override;
  // Stops the timer and joins the dedicated threads.
  void StopThreads();
  // Every running task has heard that checkpoint `id` is complete?
  bool AllHeardLocked(int64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // StopAfterSavepoint: ends the job once every task has heard.
  void MaybeStopAfterSavepoint() ABSL_LOCKS_EXCLUDED(mu_);

  // Before tasks_: outlives the tasks' SourceAlignments that it points to.
  AlignmentCoordinator alignment_;
  std::vector<std::unique_ptr<StreamTask>> tasks_;
  std::vector<std::unique_ptr<ChannelBase>> channels_;
  const JobConfig::Scheduler scheduler_;
  ArenaScheduler arena_;
  WorkerPool pool_;
  WakeupTimer timer_;
  std::vector<std::unique_ptr<DedicatedThread>> threads_;
  std::unique_ptr<CheckpointCoordinator> coordinator_;
  std::unique_ptr<RemoteExchange> exchange_;
  bool checkpointing_ = false;  // on ranks other than 0 without a coordinator
  int64_t restored_id_ = -1;
  std::string restored_path_;
  std::vector<std::string> restore_problems_;

  std::atomic<bool> cancelled_{false};
  // Wait(): the first call computes the result, the others take it.
  internal::Mutex wait_mu_;
  std::optional<JobResult> waited_ ABSL_GUARDED_BY(wait_mu_);
  JobResult WaitOnce();
  mutable internal::Mutex mu_;
  internal::CondVar done_cv_;
  internal::CondVar notified_cv_;  // a task heard of a checkpoint, finished, or cancel
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::string> notices_ ABSL_GUARDED_BY(mu_);
  std::string stopped_with_savepoint_ ABSL_GUARDED_BY(mu_);  // its path
  // StopAfterSavepoint's (a rank other than 0): -1 none.
  int64_t stop_after_id_ ABSL_GUARDED_BY(mu_) = -1;
  std::string stop_after_path_ ABSL_GUARDED_BY(mu_);
  bool stop_after_done_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point start_time_;
  // When the last task finished: JobResult::seconds leaves out the time
  // until Wait() was called and saw it.
  std::chrono::steady_clock::time_point tasks_ended_at_ ABSL_GUARDED_BY(mu_);
  const Clock* watched_clock_ = nullptr;
  int64_t clock_listener_ = -1;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_RUNTIME_EXECUTOR_H_
