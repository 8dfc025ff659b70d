// runtime/exec/arena_scheduler.h
//
// ArenaScheduler: runs a job's non-blocking tasks cooperatively on a oneTBB
// task_arena.  It is the tasks' Dispatcher: a task notified while idle is put
// on a ready queue and one closure is enqueued on the arena; a worker pops the
// task and runs one slice (Task::BeginRun / RunSlice / EndRun), re-dispatches
// it when it yielded or was notified meanwhile, hands its wake-up deadline to
// the WakeupTimer when it waits, and tells the CompletionListener when it has
// finished.  So a job with more subtasks than cores neither oversubscribes the
// machine nor spins, and an idle job uses no CPU (TBB's workers sleep when the
// arena has nothing to do).
//
// The arena and the ready queue of a given worker count are process-wide,
// shared by every job and never destroyed, so no arena is torn down while a
// worker may still be inside one of its tasks.  Every queued slice holds a
// shared pointer to the scheduler that owns the job (Start()), so a worker
// finishing a slice never touches freed memory.
#ifndef TM_RUNTIME_ARENA_SCHEDULER_H_
#define TM_RUNTIME_ARENA_SCHEDULER_H_

#include <memory>

#include "tidemark/runtime/core/detail/task.h"

namespace tidemark::internal {

class WakeupTimer;

class ArenaScheduler final : public Dispatcher {
 public:
  explicit ArenaScheduler(int worker_threads);

  // Before the first Dispatch().  `self` points at this scheduler and shares
  // ownership of whatever holds it, its tasks, the timer and the listener (the
  // job): a queued or running slice keeps them alive.
  void Start(std::weak_ptr<ArenaScheduler> self, WakeupTimer* timer, CompletionListener* listener);

  // Dispatcher: queues one slice of `task` (which is kScheduled).
  void Dispatch(Task* task) override;

 private:
  // Process-wide, one per worker count, never destroyed (arena_scheduler.cc).
  class Arena;  // a tbb::task_arena
  struct ReadyQueue;
  static Arena* ArenaFor(int threads);
  static ReadyQueue* ReadyQueueFor(int threads);
  static void RunOneReady();
  void RunSlice(Task* task);

  const int worker_threads_;
  Arena* arena_ = nullptr;
  ReadyQueue* ready_ = nullptr;
  std::weak_ptr<ArenaScheduler> self_;
  WakeupTimer* timer_ = nullptr;
  CompletionListener* listener_ = nullptr;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_ARENA_SCHEDULER_H_
