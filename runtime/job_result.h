// runtime/job_result.h
//
// JobResult: what execute() returns once a job has ended: success or the
// first error (naming operator and subtask), the wall time, and every
// subtask's metrics.
#ifndef TM_RUNTIME_JOB_RESULT_H_
#define TM_RUNTIME_JOB_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "runtime/metrics.h"

namespace tidemark {

struct JobResult {
  // Out of line (executor.cc), so a job's translation unit does not generate
  // them.
  JobResult();
  JobResult(const JobResult&);
  JobResult(JobResult&&) noexcept;
  JobResult& operator=(const JobResult&);
  JobResult& operator=(JobResult&&) noexcept;
  ~JobResult();

  absl::Status status;
  double seconds = 0;
  std::vector<SubtaskMetricsSnapshot> metrics;

  bool ok() const { return status.ok(); }
  // Sum of a named counter over all subtasks.
  int64_t CounterTotal(const std::string& name) const;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_JOB_RESULT_H_
