// runtime/executor.h
//
// JobExecution: runs the tasks of one job.
//
// Scheduling: tasks that do not block run cooperatively on a oneTBB
// task_arena.  A task is enqueued when it is notified (task.h), runs one slice
// and goes back to sleep or is re-enqueued; so a job with more subtasks than
// cores neither oversubscribes the machine nor spins, and an idle job uses no
// CPU (TBB's workers sleep when the arena has nothing to do).  Tasks that do
// blocking I/O (sockets, files) get a thread of their own and sleep in poll()
// on an eventfd (and the I/O descriptor) instead.  One timer thread wakes tasks
// at their deadlines (periodic watermarks, processing-time timers, retries).
//
// Failure: the first error (an exception from user code, a source error)
// cancels the job; every task then finishes at its next slice, every thread is
// joined, and Wait() returns that error.  Cancel() from any thread does the
// same with a CANCELLED status.
//
// Lifetime: the execution is shared (shared_ptr) with every closure it
// enqueues, so a TBB worker finishing a slice never touches freed memory; user
// code (operators, sources) is destroyed by Wait() on the caller's thread.
#ifndef TM_RUNTIME_EXECUTOR_H_
#define TM_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "runtime/channel.h"
#include "runtime/metrics.h"
#include "runtime/stream_task.h"
#include "runtime/task.h"

namespace tidemark {

struct JobResult {
  absl::Status status;
  double seconds = 0;
  std::vector<SubtaskMetricsSnapshot> metrics;

  bool ok() const { return status.ok(); }
  // Sum of a named counter over all subtasks.
  int64_t CounterTotal(const std::string& name) const;
};

class JobExecution final : public Dispatcher, public std::enable_shared_from_this<JobExecution> {
 public:
  explicit JobExecution(int worker_threads);
  ~JobExecution() override;

  // --- assembly ---
  StreamTask* AddTask(std::unique_ptr<StreamTask> task);
  template <typename C>
  C* AddChannel(std::unique_ptr<C> ch) {
    C* raw = ch.get();
    channels_.push_back(std::move(ch));
    return raw;
  }

  // Starts every task.  Call once.
  void Start();
  // Blocks until every task has finished; returns the job's result.  Call once.
  JobResult Wait();
  // Stops the job from any thread; Wait() then returns CANCELLED (unless it
  // had already failed or finished).
  void Cancel();
  // Records the first error and cancels the job.  Thread-safe.
  void Fail(const absl::Status& status);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The flag behind cancelled(), for the tasks' per-record checks.
  const std::atomic<bool>* cancel_flag() const { return &cancelled_; }
  bool done() const;

  // Current metrics of every subtask.  Thread-safe.
  std::vector<SubtaskMetricsSnapshot> Metrics() const;

  // Dispatcher (arena tasks).
  void Dispatch(Task* task) override;

 private:
  class ThreadSlot;
  static void RunOneReady();
  void RunArenaTask(Task* task);
  void AfterWait(Task* task);
  void ThreadMain(ThreadSlot* slot);
  void TimerMain();
  void ScheduleWakeup(Task* task, SteadyTime deadline);
  void TaskFinished();

  const int worker_threads_;
  void* arena_ = nullptr;  // tbb::task_arena*, shared and never destroyed
  void* ready_ = nullptr;  // its ReadyQueue
  std::vector<std::unique_ptr<StreamTask>> tasks_;
  std::vector<std::unique_ptr<ChannelBase>> channels_;
  std::vector<std::unique_ptr<ThreadSlot>> thread_slots_;

  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  int remaining_ = 0;         // guarded by mu_
  absl::Status first_error_;  // guarded by mu_
  bool started_ = false;
  std::chrono::steady_clock::time_point start_time_;

  // Timer thread.
  std::mutex timer_mu_;
  std::condition_variable timer_cv_;
  using TimerEntry = std::pair<SteadyTime, Task*>;
  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<TimerEntry>> timer_queue_;
  bool timer_stop_ = false;
  std::thread timer_thread_;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_EXECUTOR_H_
