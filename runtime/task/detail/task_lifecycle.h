// runtime/task/detail/task_lifecycle.h
//
// TaskLifecycle: where a StreamTask is in its life, as one state machine (the
// scheduling state machine, which says who may run the task now, is another:
// runtime/core/detail/task.h).  The task moves it at each step of RunSlice()
// (stream_task.cc); every move is checked, and an illegal one is a bug in the
// runtime: the process aborts, naming the task and both states.
//
//   kCreated ----> kRestoring ----> kRunning ----> kFinishing ----> kFinished
//       |              |               |               |
//       |              +---------------+---------------+----> kFailed
//       +--------------+---------------+---------------+----> kCancelled
//
//   kCreated    made and wired; no operator opened.
//   kRestoring  opening the chain and restoring its state (a task started
//               from a checkpoint only).
//   kRunning    (opening the chain, for a task without state, then)
//               processing input: records, watermarks, timers, checkpoints.
//   kFinishing  the input ended: finishing the operators, the final snapshot,
//               end of input downstream.
//   kFinished   finished and closed.
//   kFailed     an operator, the source or the runtime threw (the job fails
//               with its error); closed.
//   kCancelled  the job was cancelled (or failed elsewhere) before the task
//               finished; closed when it had been opened.
// The last three are final.  A task leaves kCreated only from its first slice;
// it is opened (and so closed at the end) iff it left kCreated for kRestoring
// or kRunning.
//
// Thread safety: the task's thread moves it; any thread may read it.
#ifndef TM_RUNTIME_TASK_LIFECYCLE_H_
#define TM_RUNTIME_TASK_LIFECYCLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tidemark::internal {

enum class TaskLifecycle : uint8_t {
  kCreated,
  kRestoring,
  kRunning,
  kFinishing,
  kFinished,
  kFailed,
  kCancelled,
};

// "created", "restoring", ...
std::string_view TaskLifecycleName(TaskLifecycle s);
// kFinished, kFailed and kCancelled.
bool IsFinal(TaskLifecycle s);
// Whether `from` -> `to` is a move of the diagram above.
bool IsLegalTransition(TaskLifecycle from, TaskLifecycle to);

class TaskLifecycleMachine {
 public:
  // Told of every move, on the task's thread (tests record them).
  using Observer = std::function<void(TaskLifecycle from, TaskLifecycle to)>;

  TaskLifecycle state() const { return state_.load(std::memory_order_acquire); }
  // Moves to `to`; returns the state it left.  An illegal move prints the
  // task's name and both states and aborts.
  TaskLifecycle TransitionTo(TaskLifecycle to, const std::string& task_name);
  void set_observer(Observer o) { observer_ = std::move(o); }

 private:
  std::atomic<TaskLifecycle> state_{TaskLifecycle::kCreated};
  Observer observer_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_TASK_LIFECYCLE_H_
