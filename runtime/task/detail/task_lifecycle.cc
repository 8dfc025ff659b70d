#include "tidemark/runtime/task/detail/task_lifecycle.h"

#include <cstdio>
#include <cstdlib>

namespace tidemark::internal {

std::string_view TaskLifecycleName(TaskLifecycle s) {
  switch (s) {
    case TaskLifecycle::kCreated:
      return "created";
    case TaskLifecycle::kRestoring:
      return "restoring";
    case TaskLifecycle::kRunning:
      return "running";
    case TaskLifecycle::kFinishing:
      return "finishing";
    case TaskLifecycle::kFinished:
      return "finished";
    case TaskLifecycle::kFailed:
      return "failed";
    case TaskLifecycle::kCancelled:
      return "cancelled";
  }
  return "invalid";
}

bool IsFinal(TaskLifecycle s) {
  return s == TaskLifecycle::kFinished || s == TaskLifecycle::kFailed ||
         s == TaskLifecycle::kCancelled;
}

bool IsLegalTransition(TaskLifecycle from, TaskLifecycle to) {
  using L = TaskLifecycle;
  switch (from) {
    case L::kCreated:
      return to == L::kRestoring || to == L::kRunning || to == L::kCancelled;
    case L::kRestoring:
      return to == L::kRunning || to == L::kFailed || to == L::kCancelled;
    case L::kRunning:
      return to == L::kFinishing || to == L::kFailed || to == L::kCancelled;
    case L::kFinishing:
      return to == L::kFinished || to == L::kFailed || to == L::kCancelled;
    case L::kFinished:
    case L::kFailed:
    case L::kCancelled:
      return false;
  }
  return false;
}

TaskLifecycle TaskLifecycleMachine::TransitionTo(TaskLifecycle to, const std::string& task_name) {
  const TaskLifecycle from = state_.load(std::memory_order_relaxed);
  if (!IsLegalTransition(from, to)) {
    const std::string_view f = TaskLifecycleName(from), t = TaskLifecycleName(to);
    std::fprintf(stderr, "tidemark: internal error: task '%s' moved from %.*s to %.*s\n",
                 task_name.c_str(), static_cast<int>(f.size()), f.data(),
                 static_cast<int>(t.size()), t.data());
    std::abort();
  }
  state_.store(to, std::memory_order_release);
  if (observer_) observer_(from, to);
  return from;
}

}  // namespace tidemark::internal
