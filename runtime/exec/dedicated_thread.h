// runtime/exec/dedicated_thread.h
//
// DedicatedThread: a thread of its own for a task that does blocking I/O
// (sockets, files).  The thread is the task's only runner: it runs slices
// (Task::BeginRunOnOwnThread / RunSlice / EndRun) and, while the task waits,
// sleeps in poll() on an eventfd, the task's WaitFd() and its WakeupDeadline().
// It is the task's Dispatcher: Notify() on the idle task writes the eventfd.
// When the task has finished it tells the CompletionListener and ends.
#ifndef TM_RUNTIME_DEDICATED_THREAD_H_
#define TM_RUNTIME_DEDICATED_THREAD_H_

#include <thread>

#include "tidemark/runtime/core/detail/task.h"

namespace tidemark::internal {

class DedicatedThread final : public Dispatcher {
 public:
  // Becomes `task`'s dispatcher.
  DedicatedThread(Task* task, CompletionListener* listener);
  // Join() first.
  ~DedicatedThread() override;
  DedicatedThread(const DedicatedThread&) = delete;
  DedicatedThread& operator=(const DedicatedThread&) = delete;

  // Starts the thread.  Call once.
  void Start();
  // Waits for the thread to end (after the task has finished).  Idempotent.
  void Join();

  // Dispatcher: wakes the thread.
  void Dispatch(Task* task) override;

 private:
  void Main();
  // Sleeps until the eventfd, the task's descriptor or its deadline is ready.
  void Sleep();

  Task* const task_;
  CompletionListener* const listener_;
  const int efd_;
  std::thread thread_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_DEDICATED_THREAD_H_
