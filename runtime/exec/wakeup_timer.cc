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
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace(deadline, task);
  }
  cv_.notify_one();
}

void WakeupTimer::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void WakeupTimer::Main() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (queue_.empty()) {
      cv_.wait(lock);
      continue;
    }
    const SteadyTime next = queue_.top().first;
    if (std::chrono::steady_clock::now() < next) {
      cv_.wait_until(lock, next);
      continue;
    }
    Task* t = queue_.top().second;
    queue_.pop();
    lock.unlock();
    t->Notify();
    lock.lock();
  }
}

}  // namespace tidemark::internal
