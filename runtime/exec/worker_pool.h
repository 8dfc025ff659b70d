// runtime/exec/worker_pool.h
//
// WorkerPool: the job's own worker threads for its non-blocking tasks, with
// affinity.  It is the tasks' Dispatcher.  Each worker has a ready queue; a
// task has a home worker (the last one that ran it; the first dispatch picks
// the next worker round robin) and is always queued there, so a task's state
// (a window operator's table, a source's generator) stays in one core's
// cache.  A worker runs its own queue first, in FIFO order (a task that
// yields goes to the back, so its own tasks share it fairly); a worker whose
// queue is empty takes a task from another worker's queue (work stealing) and
// becomes that task's home, and only when there is none anywhere does it
// sleep.  A worker that queues a task for a sleeping worker wakes it; one
// that queues a task on a busy worker while another sleeps wakes a sleeper to
// steal it.  So no core idles while a task is ready, an idle job uses no CPU
// (workers sleep on a condition variable, no spinning), and tasks stay put
// while every worker is busy.
//
// Why not oneTBB's task_arena (arena_scheduler.h, still available with
// JobConfig::scheduler): its enqueued work goes to whichever worker is free,
// so every slice of a task may run on another core, and with as many busy
// tasks as workers, W1's window operators moved between the two cores in
// most processes (issue 12: "two threads slower than one"; bench/RESULTS.md).
//
// One slice is Task::BeginRun / RunSlice / EndRun, as with the arena: a task
// that waits hands its wake-up deadline to the WakeupTimer, a finished task is
// reported to the CompletionListener.
//
// Lifetime: Stop() (after every task has finished, or on cancellation once
// the tasks have) wakes and joins the workers; a worker finishes the slice
// it is running first.
#ifndef TM_RUNTIME_WORKER_POOL_H_
#define TM_RUNTIME_WORKER_POOL_H_

#include <atomic>
#include <memory>
#include <vector>

#include "tidemark/runtime/core/detail/task.h"

namespace tidemark::internal {

class WakeupTimer;

class WorkerPool final : public Dispatcher {
 public:
  explicit WorkerPool(int workers);
  ~WorkerPool() override;  // Stop()s
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts the workers.  Call once, before the first Dispatch().
  void Start(WakeupTimer* timer, CompletionListener* listener);
  // Wakes and joins the workers.  Idempotent.
  void Stop();

  // Dispatcher: queues `task` (which is kScheduled) at its home worker.
  void Dispatch(Task* task) override;

  int num_workers() const { return static_cast<int>(workers_.size()); }
  // The worker `task` is queued at or last ran on (-1: never dispatched), and
  // how often tasks moved to another worker by stealing.  For tests.
  int HomeOf(const Task* task) const;
  int64_t steals() const { return steals_.load(std::memory_order_relaxed); }

 private:
  struct Worker;
  void Main(int w);
  Task* TakeOwn(int w);
  Task* Steal(int w);
  void RunSlice(Task* task);
  // Wakes a sleeping worker other than `except`, if any.
  void WakeOneSleeper(int except);

  std::vector<std::unique_ptr<Worker>> workers_;
  WakeupTimer* timer_ = nullptr;
  CompletionListener* listener_ = nullptr;
  std::atomic<int> next_home_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> steals_{0};
  bool started_ = false;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_WORKER_POOL_H_
