// runtime/core/detail/task.h
//
// Task: the schedulable unit of a running job (one chain of operators at one
// subtask index).  A task never blocks the thread that runs it: RunSlice()
// does a bounded amount of work and returns
//   kYield    - there is more to do right away (re-queue me),
//   kWait     - nothing to do until someone calls Notify() (new input, free
//               space downstream, cancellation) or until WakeupDeadline(),
//   kFinished - done for good.
// The executor (executor.h) runs RunSlice() on oneTBB arena workers
// (arena_scheduler.h), or on a dedicated thread for tasks that do blocking I/O
// (dedicated_thread.h); a timer thread (wakeup_timer.h) notifies tasks at
// their deadlines.
//
// Scheduling state machine (state_), which guarantees that a task is never run
// by two threads at once and that no Notify() is lost.  The task owns it: a
// scheduler moves it only through the transitions below.
//
//   kIdle --Notify--> kScheduled (Notify dispatches the task, once)
//   kScheduled --BeginRun--> kRunning (a scheduler picks it; false otherwise)
//   kRunning --Notify--> kRunningNotified
//   EndRun(kYield):    kRunning | kRunningNotified --> kScheduled   [kRunAgain]
//   EndRun(kWait):     kRunning --> kIdle                           [kIdle]
//                      kRunningNotified --> kScheduled              [kRunAgain]
//   EndRun(kFinished): kRunning | kRunningNotified --> kFinishedState
//                      (Notify is then a no-op)                     [kFinished]
// When EndRun() says kRunAgain the caller runs the task again (an arena
// scheduler re-dispatches it: Notify() did not, the task was running).  A task
// with a thread of its own (dedicated_thread.h) is run by that thread only:
// the thread sleeps while the task is kIdle, Notify() wakes it through the
// dispatcher, and BeginRunOnOwnThread() takes kIdle | kScheduled --> kRunning
// whatever woke it (Notify, its descriptor, its deadline).
//
// Thread safety: Notify() may be called from any thread.  Everything else is
// called by the scheduler, by the one thread that runs the task.
// Memory ordering: every transition that a Notify() may race with is an
// acquire/release read-modify-write, so whatever a thread wrote before
// Notify() is visible to the next RunSlice().
#ifndef TM_RUNTIME_TASK_H_
#define TM_RUNTIME_TASK_H_

#include <atomic>
#include <chrono>
#include <string>

namespace tidemark::internal {

using SteadyTime = std::chrono::steady_clock::time_point;

class Task;

// How a task is put back to work when it is notified while idle.
class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  virtual void Dispatch(Task* task) = 0;
};

// Told by a scheduler when a task it runs has finished (on that thread).
class CompletionListener {
 public:
  virtual void TaskFinished(Task* task) = 0;

 protected:
  ~CompletionListener() = default;
};

class Task {
 public:
  enum class Result { kYield, kWait, kFinished };
  enum State : int { kIdle, kScheduled, kRunning, kRunningNotified, kFinishedState };
  // What the scheduler does after a slice (EndRun).
  enum class Next {
    kIdle,      // nothing: the next Notify() dispatches the task
    kRunAgain,  // run the task again (it yielded, or was notified while running)
    kFinished,  // done for good
  };

  explicit Task(std::string name) : name_(std::move(name)) {}
  virtual ~Task() = default;
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;

  const std::string& name() const { return name_; }

  // Asks for the task to run (again).  Thread-safe; cheap when the task is
  // already scheduled or running.
  void Notify() {
    int s = state_.load(std::memory_order_acquire);
    for (;;) {
      if (s == kIdle) {
        if (state_.compare_exchange_weak(s, kScheduled, std::memory_order_acq_rel)) {
          dispatcher_->Dispatch(this);
          return;
        }
      } else if (s == kRunning) {
        if (state_.compare_exchange_weak(s, kRunningNotified, std::memory_order_acq_rel)) return;
      } else {
        return;  // scheduled, already notified, or finished
      }
    }
  }

  // --- transitions, for the scheduler (one thread at a time) ---

  // kScheduled -> kRunning: the caller now runs one slice.  False when the
  // task is not scheduled (it must not be run).
  bool BeginRun() {
    int expected = kScheduled;
    if (!state_.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel))
      return false;
    ExpireRegisteredDeadline();
    return true;
  }
  // For a task on a thread of its own, which is its only runner: kIdle or
  // kScheduled -> kRunning, whatever woke the thread.
  void BeginRunOnOwnThread() {
    state_.exchange(kRunning, std::memory_order_acq_rel);
    ExpireRegisteredDeadline();
  }
  // Applies what RunSlice() returned (see the state machine above).  After
  // kIdle another thread may run the task at once: the caller must not touch
  // it any more (a wake-up deadline is taken before, DeadlineToRegister()).
  Next EndRun(Result r) {
    switch (r) {
      case Result::kFinished:
        state_.store(kFinishedState, std::memory_order_release);
        return Next::kFinished;
      case Result::kYield:
        // Also consumes a Notify() that came in during the slice: the next
        // slice begins after it.
        state_.exchange(kScheduled, std::memory_order_acq_rel);
        return Next::kRunAgain;
      case Result::kWait:
        break;
    }
    int expected = kRunning;
    if (state_.compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel)) {
      return Next::kIdle;
    }
    // Notified while running: run again.
    state_.store(kScheduled, std::memory_order_release);
    return Next::kRunAgain;
  }
  // After a slice that returned kWait, before EndRun(), on the running thread:
  // the WakeupDeadline() a wake-up timer must be given, or SteadyTime::max()
  // when there is none or an earlier (or the same) one is already pending.
  SteadyTime DeadlineToRegister() {
    const SteadyTime deadline = WakeupDeadline();
    if (deadline == SteadyTime::max() || deadline >= registered_deadline_) {
      return SteadyTime::max();
    }
    registered_deadline_ = deadline;
    return deadline;
  }

  // --- for the scheduler ---
  virtual Result RunSlice() = 0;
  // Valid after RunSlice() returned kWait: when to run again even without a
  // Notify() (SteadyTime::max() for never).
  virtual SteadyTime WakeupDeadline() const { return SteadyTime::max(); }
  // Tasks doing blocking I/O get a thread of their own.
  virtual bool NeedsOwnThread() const { return false; }
  // For tasks on their own thread: a file descriptor whose readability should
  // also wake the task while it waits (-1 for none).
  virtual int WaitFd() const { return -1; }
  // Releases user code (operators, sources) once the task has finished; runs on
  // the thread that called execute().
  virtual void Release() {}

  void set_dispatcher(Dispatcher* d) { dispatcher_ = d; }
  // The worker a WorkerPool keeps the task at (-1: none yet).
  int home_worker() const { return home_worker_.load(std::memory_order_relaxed); }
  void set_home_worker(int w) { home_worker_.store(w, std::memory_order_relaxed); }
  // The raw state, for tests and benchmarks that drive a task by hand.
  std::atomic<int>& state() { return state_; }

 private:
  // A registered deadline that has passed has fired (or is about to): a later
  // wait may register a new one.
  void ExpireRegisteredDeadline() {
    if (registered_deadline_ != SteadyTime::max() &&
        std::chrono::steady_clock::now() >= registered_deadline_) {
      registered_deadline_ = SteadyTime::max();
    }
  }

  std::string name_;
  Dispatcher* dispatcher_ = nullptr;
  std::atomic<int> state_{kIdle};
  std::atomic<int> home_worker_{-1};
  // Deadline last handed to a wake-up timer (touched by the running thread
  // only, between BeginRun and EndRun).
  SteadyTime registered_deadline_ = SteadyTime::max();
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_TASK_H_
