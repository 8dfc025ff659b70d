#include "tidemark/runtime/exec/wakeup_timer.h"

namespace tidemark::internal {

void RunSharedSlice(Task* task, WakeupTimer* timer, Dispatcher* dispatcher,
                    CompletionListener* listener) {
  if (!task->BeginRun()) return;
  const Task::Result r = task->RunSlice();
  if (r == Task::Result::kWait) {
    const SteadyTime deadline = task->DeadlineToRegister();
    if (deadline != SteadyTime::max()) timer->Schedule(task, deadline);
  }
  switch (task->EndRun(r)) {
    case Task::Next::kIdle:
      return;
    case Task::Next::kRunAgain:
      dispatcher->Dispatch(task);
      return;
    case Task::Next::kFinished:
      listener->TaskFinished(task);
      return;
  }
}

void WakeupTimer::Start() {
  thread_ = std::thread([this] { Main(); });
}

void WakeupTimer::Schedule(Task* task, SteadyTime deadline) {
  {
    MutexLock lock(&mu_);
    queue_.emplace(deadline, task);
  }
  cv_.Signal();
}

void WakeupTimer::Stop() {
  if (!thread_.joinable()) return;
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  thread_.join();
}

void WakeupTimer::Main() {
  mu_.Lock();
  while (!stop_) {
    if (queue_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    const SteadyTime next = queue_.top().first;
    if (std::chrono::steady_clock::now() < next) {
      cv_.WaitUntil(&mu_, next);
      continue;
    }
    Task* t = queue_.top().second;
    queue_.pop();
    mu_.Unlock();
    t->Notify();
    mu_.Lock();
  }
  mu_.Unlock();
}

}  // namespace tidemark::internal
