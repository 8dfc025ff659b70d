// runtime/exec/remote_exchange.h
//
// RemoteExchange: what the job compiler and JobExecution need of the plane
// that carries channels between ranks (runtime/cluster/mpi_exchange.h), so
// that the execution plane neither includes nor links MPI.  The MPI plane
// (library tidemark_mpi, CMake target tidemark::mpi) registers its factory
// when it is linked into the program; a program without it runs on one rank
// and says so when started under mpirun with more (the compiler's error
// names tidemark::mpi).
#ifndef TM_RUNTIME_REMOTE_EXCHANGE_H_
#define TM_RUNTIME_REMOTE_EXCHANGE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tidemark/runtime/core/detail/task_host.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tidemark/runtime/exec/job_result.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/remote_codec.h"
#include "tidemark/runtime/state/detail/checkpoint.h"
#include "tidemark/runtime/task/watermark_alignment.h"

namespace tidemark::internal {

// What Finish() hands back besides the status (JobExecution::Wait).
struct FinishHooks {
  // In: this rank's subtasks; out: every rank's, in the plan's order.
  std::vector<SubtaskMetricsSnapshot>* metrics = nullptr;
  NetworkSummary* network = nullptr;  // out: summed over the ranks
  // A checkpointing job, on rank 0, once every rank has finished without a
  // failure: writes the final checkpoint and returns its id (-1: it could
  // not be written).  Every rank gets the id in *final_checkpoint_id.
  std::function<int64_t()> final_checkpoint;
  int64_t* final_checkpoint_id = nullptr;
  // In: this rank's checkpoint summary (read after final_checkpoint ran);
  // out: rank 0's (the coordinator's), at-most-once if any rank's is.
  std::function<CheckpointSummary()> checkpoint_summary;
  CheckpointSummary* checkpoints = nullptr;
  // Out: the savepoint the job was stopped with (stop-with-savepoint without
  // drain, StopWithSavepoint below), the same on every rank; empty when it
  // was not.  Such a job has no final checkpoint.
  std::string* stopped_with_savepoint = nullptr;
};

// One per job and rank (the contract: runtime/cluster/mpi_exchange.h).
class RemoteExchange : public CheckpointAcknowledger {
 public:
  virtual ~RemoteExchange() = default;

  // --- assembly (the job compiler) ---
  virtual void AddOutbound(uint32_t id, int peer, ChannelBase* channel,
                           std::unique_ptr<RemoteCodec> codec) = 0;
  virtual void AddInbound(uint32_t id, int peer, ChannelBase* channel,
                          std::unique_ptr<RemoteCodec> codec) = 0;
  virtual absl::Status Open(const std::string& plan) = 0;
  virtual void SetCoordinator(CheckpointAcknowledger* coordinator) = 0;
  virtual void AddLocalTask(int task, int subtask, CheckpointParticipant* t) = 0;
  virtual CheckpointParticipant* AddRemoteTask(int rank, int task, int subtask, bool source) = 0;
  virtual void SetTaskOrder(std::vector<std::string> names) = 0;
  // The job's alignment groups: made job-wide across the ranks (each rank's
  // minimum of a group reaches the others).  Before Start().
  virtual void SetAlignment(AlignmentCoordinator* alignment) = 0;

  // --- running (JobExecution) ---
  virtual void Start(TaskHost* job) = 0;
  virtual absl::Status Finish(const absl::Status& local, const FinishHooks& hooks) = 0;
  // Rank 0, stop-with-savepoint without drain: savepoint `id` (at `path`) is
  // complete and every task was told (the other ranks' after the messages
  // telling them, in order).  Every other rank then ends its job OK once its
  // tasks heard (TaskHost::StopAfterSavepoint); records still in remote
  // channels (after the savepoint's barrier) are dropped, and no rank takes
  // the job's end as a failure.  Any thread.
  virtual void StopWithSavepoint(int64_t id, const std::string& path) {
    (void)id;
    (void)path;
  }
  virtual const ClusterInfo& cluster() const = 0;
};

// Rank 0's decision, made of every rank's report (in rank order).
using DecideFn = std::function<std::string(const std::vector<std::string>& reports)>;

// What the MPI plane registers when it is linked (runtime/cluster/mpi_cluster.cc).
struct RemotePlane {
  // A job's exchange; `capacity`: every remote channel's, in batches.
  std::unique_ptr<RemoteExchange> (*make_exchange)(const ClusterInfo& cluster,
                                                   size_t capacity) = nullptr;
  // GatherAtRank0 across the ranks (runtime/exec/cluster.h).
  std::vector<std::string> (*gather_at_rank0)(std::string_view mine) = nullptr;
  // DecideAtRank0 across the ranks (below).
  absl::StatusOr<std::string> (*decide_at_rank0)(std::string_view mine, const DecideFn& decide,
                                                 std::chrono::milliseconds deadline) = nullptr;
};
void RegisterRemotePlane(const RemotePlane& plane);

// Whole lines for rank 0's standard output from the other ranks (the CLI's
// results and traces under mpirun).  Each rank's standard output is a pipe
// that mpirun reads in chunks of its own size and copies out as they come, so
// lines that several ranks print at once come out torn mid-line; lines that
// travel to rank 0 as MPI messages and are printed there come out whole.
//
// Other ranks: hands `line` (without its newline) to the running job's
// exchange, which sends it to rank 0 after what it sent before; false when no
// job is running (the caller prints it itself).  Thread-safe.
bool ForwardLineToRank0(std::string_view line);
// The exchange, while its job runs (null when it stops taking lines).
void SetLineForwarder(std::function<void(std::string_view line)> forward);
// Rank 0: where lines from the other ranks go (null: standard output), and
// what rank 0's exchange calls with each line it receives.
void SetForwardedLineSink(std::function<void(std::string_view line)> sink);
void DeliverForwardedLine(std::string_view line);
// Collective: every rank calls it at the same point (the restart supervisor
// after a failed attempt, runtime/exec/restart_strategy.h).  Rank 0 calls
// `decide` with every rank's `mine` in rank order; every rank returns its
// answer.  One rank: decide({mine}).  DEADLINE_EXCEEDED (and the cluster
// marked broken) when a rank did not come within `deadline`; across ranks it
// needs tidemark::mpi linked (FAILED_PRECONDITION otherwise).  Runs on
// MPI_COMM_WORLD with nonblocking collectives, so no other collective on it
// may run at the same time (the jobs' own traffic has communicators of its
// own).
absl::StatusOr<std::string> DecideAtRank0(std::string_view mine, const DecideFn& decide,
                                          std::chrono::milliseconds deadline);

// The registered plane; every pointer null when tidemark::mpi is not linked.
const RemotePlane& RegisteredRemotePlane();

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_REMOTE_EXCHANGE_H_
