// runtime/state/detail/checkpoint.h
//
// What a subtask hands over for a checkpoint, and to whom.
//
// Flink's asynchronous barrier snapshotting: the checkpoint coordinator
// (checkpoint_coordinator.h) asks every source subtask to start checkpoint n;
// a source subtask writes its position, sends barrier n on all its outputs,
// in order with its records and watermarks, and acknowledges.  A subtask with
// input channels aligns barrier n over them (input_gate.h), then snapshots
// every operator of its chain, sends barrier n on and acknowledges.  Once
// every subtask has acknowledged n, checkpoint n is complete: together the
// snapshots are one consistent cut of the job (every record before the
// barriers is in the state, none after).
//
// A subtask that finishes hands over its final snapshot instead; it stands
// for that subtask in every checkpoint not yet acknowledged, since a
// finished subtask's state no longer changes (its inputs have all ended, so
// its upstream subtasks are finished too, and every record they sent is in
// it).
#ifndef TM_RUNTIME_CHECKPOINT_H_
#define TM_RUNTIME_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tidemark::internal {

class SharedFileSink;  // kv_store.h

// One operator's state in a subtask snapshot, in chain order.
struct OperatorSnapshot {
  std::string name;   // the operator's name, checked on restore
  std::string state;  // what OperatorBase::SnapshotState wrote
};

struct SubtaskSnapshot {
  int64_t checkpoint_id = 0;
  int task_index = 0;  // the task's index in the physical plan
  std::string task_name;
  int subtask = 0;
  int parallelism = 1;
  bool has_source = false;
  // A source's position (Source<T>::SnapshotPosition), or the input gate's
  // watermark valve (every channel's watermark and status).
  std::string input_state;
  std::vector<OperatorSnapshot> operators;
  // An unaligned checkpoint's channel state: the input channels' records in
  // flight (input_gate.h; empty when aligned or when none were).
  std::string channel_state;
  int64_t alignment_ns = 0;  // barrier alignment (0 for sources)
  int64_t sync_ns = 0;       // the synchronous part on the task thread
  bool finished = false;     // the subtask's final snapshot
  // Native incremental checkpoints (SharedFileSink): the shared files (name,
  // size) its operators' state refers to besides its bytes, and how many
  // bytes of them this checkpoint uploaded.  Not encoded: the storage writes
  // them into the state's reference file.
  std::vector<std::pair<std::string, uint64_t>> shared_files;
  uint64_t shared_uploaded_bytes = 0;
};

// What one subtask of a restored job starts from: the snapshots of every
// subtask its task had when the checkpoint was taken (shared by the task's
// subtasks).  At the same parallelism subtask s restores old subtask s's
// snapshot; at another (a rescaled task) each operator restores the old
// states its StateRescaling names (runtime/core/operator.h, docs/checkpoints.md).
struct SubtaskRestore {
  int64_t checkpoint_id = 0;
  int old_parallelism = 1;
  std::shared_ptr<const std::vector<SubtaskSnapshot>> old;  // by old subtask
  // Matched by its operators' uids: their names may have changed.
  bool matched_by_uid = false;
  // The input's state (a source's position, the input gate's per-channel
  // watermarks) is restored only where the channels are the same: neither
  // this task nor any task upstream was rescaled.  Otherwise the channels
  // start at MIN, as in Flink, and the gate's output at the old subtasks'
  // lowest (InputGateCore::RestoreRescaledValve).
  bool restore_input = true;
};

// What the checkpoint coordinator asks of a subtask: a StreamTask, or on a
// job across MPI ranks the stand-in for a subtask on another rank
// (mpi_exchange.h), which passes the request on.  Thread-safe.
class CheckpointParticipant {
 public:
  virtual bool is_source() const = 0;
  // Whether its input can be replayed from a snapshot (false: a socket...).
  virtual bool replayable() const = 0;
  // A source: start checkpoint `id` (write the position, send the barrier).
  virtual void RequestCheckpoint(int64_t id) = 0;
  // The same for a savepoint, whose barriers are always aligned (unaligned
  // checkpoints: docs/checkpoints.md).
  virtual void RequestSavepoint(int64_t id) { RequestCheckpoint(id); }
  // Checkpoint `id` is complete and durable.
  virtual void NotifyCheckpointComplete(int64_t id) = 0;
  // Stop-with-savepoint (a source; only where can_stop()): SuspendAfter(n)
  // reads nothing more once checkpoint n's barrier has gone out, until
  // SuspendAfter(kNoSuspend); EndInputNow ends the input at the next step,
  // with the MAX watermark, as at its natural end.
  static constexpr int64_t kNoSuspend = INT64_MAX;
  virtual bool can_stop() const { return false; }
  virtual void SuspendAfter(int64_t /*id*/) {}
  virtual void EndInputNow() {}

 protected:
  ~CheckpointParticipant() = default;
};

// Takes the subtasks' snapshots (the checkpoint coordinator).  Thread-safe:
// called from every task thread.
class CheckpointAcknowledger {
 public:
  // The subtask's snapshot for checkpoint `s.checkpoint_id`.
  virtual void Acknowledge(SubtaskSnapshot s) = 0;
  // The subtask has finished; `final_state` stands for it from now on.
  virtual void SubtaskFinished(SubtaskSnapshot final_state) = 0;
  // The subtask cannot complete its snapshot for checkpoint `id` (its
  // asynchronous part failed: `error`): the checkpoint fails and counts
  // against the tolerable number, as Flink's CHECKPOINT_ASYNC_EXCEPTION.
  // False where the acknowledger cannot (another rank's stand-in): the
  // caller then fails the job.
  virtual bool Decline(int64_t /*id*/, const std::string& /*error*/) { return false; }
  // Where a state backend with files of its own puts them for checkpoint
  // `id` (native incremental checkpoints), or null: the state is then
  // written in the canonical format (savepoints, full checkpoints, in-memory
  // checkpoints, another rank's coordinator).
  virtual std::shared_ptr<SharedFileSink> SharedFileSinkFor(int64_t /*id*/) { return nullptr; }

 protected:
  ~CheckpointAcknowledger() = default;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHECKPOINT_H_
