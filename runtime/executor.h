// runtime/executor.h
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
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/arena_scheduler.h"
#include "runtime/channel.h"
#include "runtime/checkpoint_coordinator.h"
#include "runtime/dedicated_thread.h"
#include "runtime/job_config.h"
#include "runtime/job_result.h"
#include "runtime/metrics.h"
#include "runtime/mutex.h"
#include "runtime/stream_task.h"
#include "runtime/task.h"
#include "runtime/task_host.h"
#include "runtime/wakeup_timer.h"
#include "runtime/watermark_alignment.h"
#include "runtime/worker_pool.h"

namespace tidemark {

namespace internal {
class MpiExchange;

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
  // the tasks and finished by Wait() (runtime/mpi_exchange.h).
  void SetExchange(std::unique_ptr<MpiExchange> exchange);

  // The job's watermark alignment groups (runtime/watermark_alignment.h).
  AlignmentCoordinator* alignment() { return &alignment_; }

  // Starts every task.  Call once.
  void Start();
  // Blocks until every task has finished; returns the job's result.  Call once.
  JobResult Wait();
  // Stops the job from any thread; Wait() then returns CANCELLED (unless it
  // had already failed or finished).
  void Cancel();
  // Records the first error and cancels the job.  Thread-safe.
  void Fail(const absl::Status& status) override;
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }
  // The flag behind cancelled(), for the tasks' per-record checks.
  const std::atomic<bool>* cancel_flag() const override { return &cancelled_; }
  bool done() const;
  // The error that failed the job (OK while none did).
  absl::Status FirstError() const;

  // Current metrics of every subtask.  Thread-safe.
  std::vector<SubtaskMetricsSnapshot> Metrics() const;

 private:
  // CompletionListener (both schedulers).
  void TaskFinished(Task* task) override;
  // Stops the timer and joins the dedicated threads.
  void StopThreads();

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
  std::unique_ptr<MpiExchange> exchange_;
  bool checkpointing_ = false;  // on ranks other than 0 without a coordinator
  int64_t restored_id_ = -1;
  std::string restored_path_;
  std::vector<std::string> restore_problems_;

  std::atomic<bool> cancelled_{false};
  mutable internal::Mutex mu_;
  internal::CondVar done_cv_;
  int remaining_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point start_time_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_RUNTIME_EXECUTOR_H_
