// runtime/exec/job_result.h
//
// JobResult: what execute() returns once a job has ended: success or the
// first error (naming operator and subtask), the wall time, every
// subtask's metrics, and what checkpointing did.
#ifndef TM_RUNTIME_JOB_RESULT_H_
#define TM_RUNTIME_JOB_RESULT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/state/checkpoint_summary.h"

namespace tidemark {

// Traffic between ranks (runtime/cluster/mpi_exchange.h), summed over every rank;
// all zero for a job on one rank.
struct NetworkSummary {
  int ranks = 1;
  int64_t remote_channels = 0;  // channels whose ends are on different ranks
  int64_t batches_sent = 0;     // one MPI message each
  int64_t records_sent = 0;
  int64_t bytes_sent = 0;  // batch bytes, headers included
  int64_t credit_messages = 0;
  // The most batches of one remote channel ever sent and not yet taken by
  // its consumer (bounded by the channel capacity: credit-based flow control).
  int64_t max_in_flight_batches = 0;
};

// What the restart strategy did (env.set_restart_strategy, docs/checkpoints.md
// "Restarts"): Flink's numRestarts and the cause of the last failure.
struct RestartSummary {
  std::string strategy = "none";  // RestartStrategyConfiguration::Describe()
  int64_t num_restarts = 0;       // Flink's numRestarts
  // The error of the last failed attempt (empty: none failed); a job that
  // ended OK after restarts still names what it recovered from.
  std::string last_failure;
  // Every failed attempt's error, in order (one line each).
  std::vector<std::string> failures;
};

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
  // Wall seconds from the job's start to the end of its last task, plus the
  // final checkpoint and commits that follow it; the time before someone
  // waited for the job (JobClient::wait) is not counted.
  double seconds = 0;
  std::vector<SubtaskMetricsSnapshot> metrics;
  CheckpointSummary checkpoints;
  NetworkSummary network;
  // Restarts: metrics and checkpoints above are the last attempt's; seconds
  // spans every attempt.
  RestartSummary restarts;

  bool ok() const { return status.ok(); }
  // Sum of a named counter over all subtasks.
  int64_t CounterTotal(const std::string& name) const;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_JOB_RESULT_H_
