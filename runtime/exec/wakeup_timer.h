// runtime/exec/wakeup_timer.h
//
// WakeupTimer: one thread that notifies tasks at their deadlines (periodic
// watermarks, processing-time timers, source retries).  Schedule() may be
// called from any thread; a task is notified once per Schedule() call, at or
// after the deadline (Task::Notify() is a no-op for a task that has finished
// meanwhile).  The scheduled tasks must outlive Stop().
#ifndef TM_RUNTIME_WAKEUP_TIMER_H_
#define TM_RUNTIME_WAKEUP_TIMER_H_

#include <functional>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/detail/task.h"

namespace tidemark::internal {

class WakeupTimer;

// One slice of `task` (which is kScheduled) on a shared worker, as both
// schedulers run it (arena_scheduler.h, worker_pool.h): BeginRun, RunSlice,
// the wake-up deadline of a task that waits handed to `timer` before EndRun
// (once idle the task may run on another worker), then EndRun: a task to run
// again goes back to `dispatcher`, a finished one is reported to `listener`.
// Nothing when the task was not scheduled (BeginRun failed).
void RunSharedSlice(Task* task, WakeupTimer* timer, Dispatcher* dispatcher,
                    CompletionListener* listener);

class WakeupTimer {
 public:
  WakeupTimer() = default;
  ~WakeupTimer() { Stop(); }
  WakeupTimer(const WakeupTimer&) = delete;
  WakeupTimer& operator=(const WakeupTimer&) = delete;

  // Starts the thread.  Call once.
  void Start();
  // Notifies `task` at `deadline`.  Thread-safe.
  void Schedule(Task* task, SteadyTime deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops and joins the thread (pending deadlines are dropped).  Idempotent;
  // not concurrently with Start().
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Main() ABSL_LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  CondVar cv_;
  using Entry = std::pair<SteadyTime, Task*>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_WAKEUP_TIMER_H_
