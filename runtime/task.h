// runtime/task.h
//
// Task: the schedulable unit of a running job (one chain of operators at one
// subtask index).  A task never blocks the thread that runs it: RunSlice()
// does a bounded amount of work and returns
//   kYield    - there is more to do right away (re-queue me),
//   kWait     - nothing to do until someone calls Notify() (new input, free
//               space downstream, cancellation) or until WakeupDeadline(),
//   kFinished - done for good.
// The executor (executor.h) runs RunSlice() on oneTBB arena workers, or on a
// dedicated thread for tasks that do blocking I/O (sockets, files).
//
// Scheduling state machine (state_), which guarantees that a task is never run
// by two threads at once and that no Notify() is lost:
//
//   kIdle --Notify--> kScheduled --executor picks it--> kRunning
//   kRunning --Notify--> kRunningNotified
//   kRunning --returns kWait--> kIdle
//   kRunningNotified --returns kWait--> kScheduled (runs again)
//   any --returns kFinished--> kFinished (Notify is then a no-op)
//
// Thread safety: Notify() may be called from any thread.  Everything else is
// called by the executor, by one thread at a time.
// Memory ordering: the CAS transitions use acquire/release, so whatever a
// thread wrote before Notify() is visible to the next RunSlice().
#ifndef TM_RUNTIME_TASK_H_
#define TM_RUNTIME_TASK_H_

#include <atomic>
#include <chrono>
#include <string>

namespace tidemark {

using SteadyTime = std::chrono::steady_clock::time_point;

class Task;

// How a task is put back to work when it is notified while idle.
class Dispatcher {
 public:
  virtual ~Dispatcher() = default;
  virtual void Dispatch(Task* task) = 0;
};

class Task {
 public:
  enum class Result { kYield, kWait, kFinished };
  enum State : int { kIdle, kScheduled, kRunning, kRunningNotified, kFinishedState };

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

  // --- for the executor ---
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
  std::atomic<int>& state() { return state_; }
  // Deadline last handed to the timer thread (touched by the running thread only).
  SteadyTime registered_deadline = SteadyTime::max();

 private:
  std::string name_;
  Dispatcher* dispatcher_ = nullptr;
  std::atomic<int> state_{kIdle};
};

}  // namespace tidemark

#endif  // TM_RUNTIME_TASK_H_
