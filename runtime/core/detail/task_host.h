// runtime/core/detail/task_host.h
//
// TaskHost: what a running task sees of its job (implemented by JobExecution,
// executor.h): whether the job has been cancelled, a way to fail it, its first
// error, and its notices.
#ifndef TM_RUNTIME_TASK_HOST_H_
#define TM_RUNTIME_TASK_HOST_H_

#include <atomic>
#include <string>

#include "absl/status/status.h"

namespace tidemark::internal {

class TaskHost {
 public:
  virtual bool cancelled() const = 0;
  // The flag behind cancelled(), for per-record checks; lives as long as the
  // host.
  virtual const std::atomic<bool>* cancel_flag() const = 0;
  // Records the first error and cancels the job.  Thread-safe.
  virtual void Fail(const absl::Status& status) = 0;
  // A line for the job's notices (CheckpointSummary::notices), e.g. a part
  // file a restore rolled back.  Thread-safe.
  virtual void Notice(std::string line) { (void)line; }
  // The first error recorded (OK: none).  Thread-safe.
  virtual absl::Status FirstError() const = 0;
  // A task's operators have heard that checkpoint `id` is complete (on the
  // task's thread; stop-with-savepoint waits for it).  Thread-safe.
  virtual void CheckpointNotified(int64_t id) { (void)id; }
  // A job across ranks (a rank other than 0): rank 0 stopped the job with
  // savepoint `id` at `path` (stop-with-savepoint without drain; its tasks
  // have been told it is complete).  The job ends OK, as on rank 0, once
  // every task here has heard of it.  Does not block.  Thread-safe.
  virtual void StopAfterSavepoint(int64_t id, std::string path) {
    (void)id;
    (void)path;
  }

 protected:
  ~TaskHost() = default;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_TASK_HOST_H_
