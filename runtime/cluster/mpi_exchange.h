// runtime/cluster/mpi_exchange.h
//
// The network plane across processes: one MpiExchange per job and rank moves
// the batches of every channel whose two ends run on different ranks
// (runtime/exec/cluster.h), over MPI, with the contract of a local channel
// (channel.h):
//
//   * in order per channel: records, watermarks, statuses, end of input and
//     checkpoint barriers travel inside the batches (remote_codec.h), one MPI
//     message per batch, and MPI keeps the order of the messages between two
//     ranks of one communicator;
//   * bounded, by credits, as Flink's network stack does: a sender holds one
//     credit per batch the receiver has room for (the channel capacity at the
//     start) and sends only while it has one; the receiver returns credits
//     as its consumer task takes batches.  A sender without credits leaves
//     its batches in the local queue (a Channel<T> of the same capacity),
//     which fills, and the producing task stops: backpressure crosses ranks
//     and at most 2 x capacity batches per channel exist outside the tasks.
//
// On each rank the producing side writes into a local Channel<T> whose
// consumer is the exchange, and the consuming side reads a local Channel<T>
// whose producer is the exchange: writers and input gates do not know a
// channel is remote.
//
// The exchange's thread drives nonblocking MPI calls (MPI_Isend,
// MPI_Improbe/MPI_Mrecv, MPI_Testsome).  Local events (a batch to send, a
// batch consumed) wake it at once through a Task it poses as; what comes from
// other ranks is polled: every 20 us while messages moved within the last
// 5 ms, then with a sleep of a quarter of the time nothing moved, up to 5 ms,
// so an idle job takes next to no CPU (about 200 wake-ups a second) and a
// busy one neither spins nor waits long for what arrives.
//
// Failure: the first error of a rank's job (or its cancellation) is sent to
// every other rank, which fails its own job with the same message, naming the
// rank ("rank 1: ...").  A rank that dies (crash, SIGKILL) is the launcher's
// to report: mpirun ends every other rank within seconds.  At the end, ranks
// say goodbye to each other once everything they sent has been received, so
// no message of one job is ever left for the next, then gather every rank's
// metrics (JobResult::metrics holds every subtask of the job on every rank).
//
// Stop-with-savepoint without drain (StopWithSavepoint): once the savepoint
// is complete and every task was told, rank 0 sends every rank the stop;
// each ends its job OK once its tasks heard, the exchanges move no more
// batches (what is in flight is after the savepoint's barrier) and the end
// is reported as no failure.  A rank's failure before that fails the
// savepoint and the job as any failure does.
//
// Every job gets its own communicator (MPI_Comm_idup of MPI_COMM_WORLD) and
// the ranks check that they built the same plan; both with a deadline, so a
// rank that never starts the job is an error, not a hang.
#ifndef TM_RUNTIME_MPI_EXCHANGE_H_
#define TM_RUNTIME_MPI_EXCHANGE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tidemark/runtime/exec/job_result.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/remote_codec.h"
#include "tidemark/runtime/state/detail/checkpoint.h"

namespace tidemark::internal {

class MpiExchange final : public RemoteExchange {
 public:
  // `capacity`: every remote channel's capacity in batches (the job's channel
  // capacity), the credits a sender starts with.
  MpiExchange(ClusterInfo cluster, size_t capacity);
  ~MpiExchange();
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  // --- assembly (the job compiler) ---
  // `id` names the channel on every rank (both ends number the channels of
  // the plan alike).  Outbound: `channel` is filled by a local task and
  // drained here; inbound: filled here and drained by a local task.
  void AddOutbound(uint32_t id, int peer, ChannelBase* channel,
                   std::unique_ptr<RemoteCodec> codec) override;
  void AddInbound(uint32_t id, int peer, ChannelBase* channel,
                  std::unique_ptr<RemoteCodec> codec) override;
  // Collective: this job's communicator, and the check that every rank built
  // the plan whose fingerprint is `plan`.  FAILED_PRECONDITION when a rank
  // built another plan, DEADLINE_EXCEEDED when one did not come.
  absl::Status Open(const std::string& plan) override;

  // Checkpoints across ranks (docs/distribution.md): the coordinator runs
  // on rank 0.  There, every subtask of another rank is a stand-in that sends
  // the coordinator's requests (start checkpoint n, n is complete) to its
  // rank; on the other ranks the exchange is the tasks' acknowledger and
  // relays their snapshots to rank 0.
  void SetCoordinator(CheckpointAcknowledger* coordinator) override { coordinator_ = coordinator; }
  void AddLocalTask(int task, int subtask, CheckpointParticipant* t) override;
  CheckpointParticipant* AddRemoteTask(int rank, int task, int subtask, bool source) override;
  // CheckpointAcknowledger (ranks other than 0; any task thread).
  void Acknowledge(SubtaskSnapshot s) override;
  void SubtaskFinished(SubtaskSnapshot final_state) override;

  // --- running (JobExecution) ---
  void Start(TaskHost* job) override;
  // After the local tasks have all finished with `local`: completes the
  // exchange with every rank (see the top) and returns the job's status
  // across ranks (the first failure of any rank, naming it), with `hooks`.
  absl::Status Finish(const absl::Status& local, const FinishHooks& hooks) override;
  // Rank 0: stop-with-savepoint without drain (remote_exchange.h).
  void StopWithSavepoint(int64_t id, const std::string& path) override;

  const ClusterInfo& cluster() const override { return cluster_; }
  // The task names in the plan's order, for sorting the gathered metrics.
  void SetTaskOrder(std::vector<std::string> names) override;
  // Publishes this rank's minimum of each alignment group to every other
  // rank, and hands theirs to `alignment` (runtime/task/watermark_alignment.h).
  void SetAlignment(AlignmentCoordinator* alignment) override;

 private:
  struct Link;
  struct Pending;
  struct Comm;
  class Waker;
  class RemoteTask;

  // Queues a message for the thread to send (any thread).
  void Queue(int peer, int tag, std::string bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void Deliver(int from, int tag, std::string_view bytes);

  void Loop() ABSL_LOCKS_EXCLUDED(mu_);
  bool Receive();
  bool SendOutbound();
  bool GrantCredits();
  bool CompleteSends();
  bool ReportLocalFailure();
  void Post(int peer, int tag, std::string bytes);
  void FailJob(const absl::Status& s);
  bool failed() const;   // this rank or another reported a failure
  bool stopped() const;  // the job was stopped with a savepoint (rank 0 said so)

  const ClusterInfo cluster_;
  const size_t capacity_;
  std::vector<std::unique_ptr<Link>> outbound_;
  std::vector<std::unique_ptr<Link>> inbound_;
  absl::flat_hash_map<uint32_t, Link*> by_id_;  // inbound links and outbound ones (credits)
  std::unique_ptr<Waker> waker_;
  std::unique_ptr<Comm> comm_;  // MPI_Comm, kept out of this header
  std::vector<std::string> task_order_;
  CheckpointAcknowledger* coordinator_ = nullptr;  // rank 0 of a checkpointing job
  AlignmentCoordinator* alignment_ = nullptr;
  bool forwarding_lines_ = false;  // this rank's lines go to rank 0 (Open to Finish)
  std::map<std::pair<int, int>, CheckpointParticipant*> local_tasks_;
  std::vector<std::unique_ptr<RemoteTask>> remote_tasks_;
  bool local_at_most_once_ = false;
  // Stop-with-savepoint without drain: set on rank 0 by StopWithSavepoint,
  // elsewhere by the thread on kStop; from then on no batch is sent,
  // received or waited for, and the local job's end is no failure.
  std::atomic<bool> stopping_{false};
  TaskHost* job_ = nullptr;
  std::thread thread_;

  // Between the caller of Finish() and the thread.
  Mutex mu_;
  CondVar cv_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::string lines_ ABSL_GUARDED_BY(mu_);  // ForwardLineToRank0's, for the thread to send
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status local_status_ ABSL_GUARDED_BY(mu_);  // the local job's, set by Finish()
  std::string stop_path_ ABSL_GUARDED_BY(mu_);      // the savepoint the job stopped with
  // Messages other threads queued (peer, tag, bytes).
  std::vector<std::tuple<int, int, std::string>> outbox_ ABSL_GUARDED_BY(mu_);

  // The thread's own.
  std::vector<std::unique_ptr<Pending>> pending_;  // sends in flight
  std::vector<std::string> free_buffers_;
  absl::Status remote_failure_;  // the first failure another rank reported
  bool reported_failure_ = false;
  absl::Status own_failure_;  // what this rank reported ("rank R: ...")
  std::chrono::steady_clock::time_point failed_since_;
  int byes_received_ = 0;
  bool byes_sent_ = false;
  bool broken_ = false;  // a rank never said goodbye
  NetworkSummary stats_;
  std::string recv_buffer_;
};

// The plan fingerprint and the metrics travel as bytes (mpi_exchange.cc).
std::string EncodeMetrics(const std::vector<SubtaskMetricsSnapshot>& m, const NetworkSummary& n,
                          const CheckpointSummary& c);
absl::Status DecodeMetrics(std::string_view bytes, std::vector<SubtaskMetricsSnapshot>* m,
                           NetworkSummary* n, CheckpointSummary* c);

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_MPI_EXCHANGE_H_
