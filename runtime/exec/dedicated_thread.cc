#include "tidemark/runtime/exec/dedicated_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>

namespace tidemark::internal {

DedicatedThread::DedicatedThread(Task* task, CompletionListener* listener)
    : task_(task), listener_(listener), efd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  task_->set_dispatcher(this);
}

DedicatedThread::~DedicatedThread() {
  Join();
  if (efd_ >= 0) close(efd_);
}

void DedicatedThread::Start() {
  thread_ = std::thread([this] { Main(); });
}

void DedicatedThread::Join() {
  if (thread_.joinable()) thread_.join();
}

void DedicatedThread::Dispatch(Task*) {
  const uint64_t one = 1;
  ssize_t n = write(efd_, &one, sizeof(one));
  (void)n;
}

void DedicatedThread::Main() {
  for (;;) {
    task_->BeginRunOnOwnThread();
    switch (task_->EndRun(task_->RunSlice())) {
      case Task::Next::kRunAgain:
        continue;
      case Task::Next::kFinished:
        listener_->TaskFinished(task_);
        return;
      case Task::Next::kIdle:
        Sleep();
        break;
    }
  }
}

void DedicatedThread::Sleep() {
  // Idle, but this thread is still the task's only runner: Notify() only
  // writes the eventfd.
  const SteadyTime deadline = task_->WakeupDeadline();
  int timeout_ms = -1;
  if (deadline != SteadyTime::max()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
  }
  pollfd fds[2];
  fds[0] = {efd_, POLLIN, 0};
  int nfds = 1;
  const int io_fd = task_->WaitFd();
  if (io_fd >= 0) fds[nfds++] = {io_fd, POLLIN, 0};
  int rc;
  do {
    rc = poll(fds, nfds, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  uint64_t v;
  while (read(efd_, &v, sizeof(v)) > 0) {
  }
}

}  // namespace tidemark::internal
