// runtime/state/checkpoint_coordinator.h
//
// CheckpointCoordinator: starts checkpoints, collects the subtasks'
// snapshots, and makes a checkpoint durable once every subtask has
// acknowledged it (checkpoint.h says how the snapshots form a consistent
// cut).
//
// Its own thread starts checkpoint n every `interval` (the first one interval
// after the job starts), one at a time as Flink does by default: the next is
// started only once n has completed and the interval has passed since n was
// started.  Starting n asks every source subtask that has not finished for
// it.  Acknowledgements arrive on the task threads and are only stored there;
// the coordinator's thread does the rest, so no task waits on a disk:
// encoding the snapshots, writing one state file per subtask, the manifest
// last (checkpoint_storage.h), then telling every task that n is complete
// (its operators' NotifyCheckpointComplete; a two-phase-commit sink commits
// then).  Without a storage directory completed checkpoints are kept in
// memory (LastCompleted), for tests.
//
// A finished subtask's final snapshot stands for it in every later
// checkpoint; once every source has finished no checkpoint is started.
//
// Failures (Flink's CheckpointFailureManager): a checkpoint fails when its
// files cannot be written (a full disk, a read-only or vanished directory) or
// when it is not complete and durable within the timeout (it expires: the
// coordinator abandons it, and late acknowledgements find nothing).  Each
// failure is counted in the summary and reported when it happens (the
// failure handler); once more than the tolerable number have failed in a
// row, the job is failed with the last one's error.  A completed checkpoint
// resets the count.
//
// Savepoints (docs/checkpoints.md, "Savepoints"; Flink's): TakeSavepoint
// runs a checkpoint like any other (same barriers, same snapshots, same
// encoding) but writes it, self-contained, into a directory of its own,
// DIR/savepoint-<id>-<hex>, marked "type" = "savepoint" in its manifest;
// retention never deletes it, and a failed savepoint fails neither the job
// nor counts as a failed checkpoint.  Stop-with-savepoint: without drain
// the sources stop reading after its barrier and the operators are told it
// is complete (the two-phase-commit sinks commit); with drain the sources
// end their input first (the MAX watermark fires every window), and the
// savepoint is made of the subtasks' final snapshots.  A job that fails or
// is cancelled meanwhile ends the savepoint at once (AbortSavepoint).
//
// Thread safety: Acknowledge and SubtaskFinished from any task thread;
// everything else from the thread that owns the job, before Start / after
// Stop, except TriggerCheckpoint, TakeSavepoint, AbortSavepoint,
// AwaitCompleted and Summary (any thread).
#ifndef TM_RUNTIME_CHECKPOINT_COORDINATOR_H_
#define TM_RUNTIME_CHECKPOINT_COORDINATOR_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/checkpoint_summary.h"
#include "tidemark/runtime/state/detail/checkpoint.h"

namespace tidemark::internal {

// The file a subtask's snapshot is stored in: "<task index>-<subtask>.state".
std::string SubtaskStateFileName(int task_index, int subtask);
// A subtask snapshot as stored in its state file, and back (the error names
// `file` and what is wrong).
std::string EncodeSubtaskSnapshot(const SubtaskSnapshot& s);
// The same bytes as pieces, in order, without copying the large ones: the
// state strings of `s` are referred to (s must outlive the pieces), the small
// encoded parts between them are kept in `scratch`.  EncodeSubtaskSnapshot is
// their concatenation.
std::vector<std::string_view> EncodeSubtaskSnapshotPieces(const SubtaskSnapshot& s,
                                                          std::deque<std::string>* scratch);
absl::StatusOr<SubtaskSnapshot> DecodeSubtaskSnapshot(std::string_view bytes,
                                                      const std::string& file);

class CheckpointCoordinator final : public CheckpointAcknowledger {
 public:
  // `storage` may be null (in memory only); `metadata` goes into every
  // manifest; ids start at `first_id`.
  CheckpointCoordinator(Duration interval, std::unique_ptr<CheckpointStorage> storage,
                        std::map<std::string, std::string> metadata, int64_t first_id);
  ~CheckpointCoordinator();
  CheckpointCoordinator(const CheckpointCoordinator&) = delete;
  CheckpointCoordinator& operator=(const CheckpointCoordinator&) = delete;

  // Before Start.  `report` (may be empty) is told of every failed
  // checkpoint when it fails; `fail_job` is called once more than
  // `tolerable` checkpoints in a row have failed (not for the final
  // checkpoint: CompleteFinal's caller fails the job then).  `timeout` <= 0:
  // checkpoints never expire.
  void SetFailurePolicy(int tolerable, Duration timeout,
                        std::function<void(int64_t id, const std::string& error)> report,
                        std::function<void(const absl::Status&)> fail_job);
  // Before Start: every subtask of the job (a StreamTask, or the stand-in of
  // one on another rank), with its task's index in the plan.
  void AddTask(CheckpointParticipant* task, int task_index, int subtask) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the thread (interval > 0) ; Stop joins it and abandons a pending
  // checkpoint.
  void Start();
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Starts a checkpoint now, unless one is pending or every source has
  // finished; returns its id or -1.  (The thread calls it every interval.)
  int64_t TriggerCheckpoint() ABSL_LOCKS_EXCLUDED(mu_);
  // After Stop, once every subtask has finished: the job's final
  // checkpoint, made of their final snapshots, written like any other; its
  // id, or -1 when it could not be written (Summary().last_error says why)
  // or a subtask has not finished.  The tasks are not told (they have
  // finished): the caller tells their operators.
  int64_t CompleteFinal() ABSL_LOCKS_EXCLUDED(mu_);
  enum class SavepointMode { kTrigger, kStop, kStopAndDrain };
  struct Savepoint {
    int64_t id = -1;
    std::string path;
  };
  // Takes a savepoint into a new directory under `dir` (created) and blocks
  // until it is durable, it failed, the job ended or `timeout` passed (the
  // error says which).  A checkpoint in progress is let complete first.
  // kStop: from then on no checkpoint is started, and the sources read
  // nothing after the savepoint's barrier (on failure they go on); the
  // caller ends the job once the tasks have been told.  kStopAndDrain: the
  // sources end their input now; the savepoint is written once every subtask
  // has finished (across ranks too: a source's stand-in relays it).  kStop
  // across ranks: a source's stand-in relays the suspension (and its lifting
  // when the savepoint fails), and "complete" reaches every rank's tasks;
  // the savepoint is complete only once every subtask of every rank has
  // acknowledged it, and until then no source stops for good.
  absl::StatusOr<Savepoint> TakeSavepoint(const std::string& dir, SavepointMode mode,
                                          std::chrono::milliseconds timeout)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The job failed or was cancelled (any thread): a savepoint being taken
  // fails now with `why`, its pending checkpoint abandoned, rather than
  // waiting for its timeout (the tasks that would acknowledge it are ending;
  // across ranks, a rank's failure reaches rank 0 as the job's).  One being
  // written is let finish.  A savepoint asked for afterwards is refused.
  void AbortSavepoint(const absl::Status& why) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until checkpoint `id` is complete and durable (true) or the
  // timeout passes (false).
  bool AwaitCompleted(int64_t id, std::chrono::milliseconds timeout) ABSL_LOCKS_EXCLUDED(mu_);
  CheckpointSummary Summary() const ABSL_LOCKS_EXCLUDED(mu_);
  // The snapshots of the last completed checkpoint (in memory and on disk).
  std::vector<SubtaskSnapshot> LastCompleted() const ABSL_LOCKS_EXCLUDED(mu_);

  // CheckpointAcknowledger
  void Acknowledge(SubtaskSnapshot s) override;
  void SubtaskFinished(SubtaskSnapshot final_state) override;
  bool Decline(int64_t id, const std::string& error) override ABSL_LOCKS_EXCLUDED(mu_);
  // A sink into the storage's shared directory for checkpoint `id` when the
  // storage is incremental and `id` is the pending checkpoint (not a
  // savepoint); null otherwise.
  std::shared_ptr<SharedFileSink> SharedFileSinkFor(int64_t id) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<int, int>;  // (task index, subtask)
  struct Pending {
    int64_t id = -1;
    std::chrono::steady_clock::time_point started;
    std::map<Key, SubtaskSnapshot> acks;
    std::string savepoint_path;  // a savepoint: its directory
  };
  // The savepoint being taken (one at a time).
  struct SavepointRequest {
    SavepointMode mode = SavepointMode::kTrigger;
    std::string target_dir;  // the directory asked for
    std::string suffix;      // of its name, savepoint-<id>-<suffix>
    std::string path;        // target_dir/savepoint-<id>-<suffix>, once the id is known
    int64_t id = -1;
    bool started = false;  // kStopAndDrain: its persisting has begun
    bool done = false;
    absl::Status status;
  };
  // Every subtask has finished?
  bool AllFinishedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // kStopAndDrain, once every subtask has finished: persists the savepoint
  // of their final snapshots (on the coordinator's thread, or Stop's caller).
  void PersistFinalSavepoint() ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the savepoint being taken with `status`.
  void FinishSavepointLocked(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run() ABSL_LOCKS_EXCLUDED(mu_);
  // The next checkpoint id, past directories that hold a manifest.
  int64_t NextIdLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every subtask has acknowledged or finished?
  bool PendingCompleteLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // On the coordinator's thread (or the caller's, without one): persists the
  // completed pending checkpoint and tells the tasks.
  // Returns whether it was written.
  bool Persist(Pending p, bool notify_tasks) ABSL_LOCKS_EXCLUDED(mu_);
  // Counts and reports failed checkpoint `id`; fails the job past the
  // tolerable count unless `final`.
  void RecordFailure(int64_t id, const std::string& error, bool final) ABSL_LOCKS_EXCLUDED(mu_);

  const Duration interval_;
  int tolerable_failures_ = 0;
  Duration timeout_{0};
  std::function<void(int64_t, const std::string&)> report_failure_;
  std::function<void(const absl::Status&)> fail_job_;
  const std::unique_ptr<CheckpointStorage> storage_;
  const std::map<std::string, std::string> metadata_;
  std::vector<std::pair<CheckpointParticipant*, Key>> tasks_;  // fixed once started

  mutable Mutex mu_;
  CondVar cv_;  // pending_ complete, completed_, stop_
  int64_t next_id_ ABSL_GUARDED_BY(mu_);
  std::optional<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool pending_ready_ ABSL_GUARDED_BY(mu_) = false;  // pending_ has every ack
  // The pending checkpoint a subtask declined (Decline), and why: failed on
  // the coordinator's thread.
  std::optional<std::pair<int64_t, std::string>> declined_ ABSL_GUARDED_BY(mu_);
  bool persisting_ ABSL_GUARDED_BY(mu_) = false;  // the thread is writing one
  // The one being written (Summary().in_progress_id), and when it started.
  int64_t persisting_id_ ABSL_GUARDED_BY(mu_) = -1;
  std::chrono::steady_clock::time_point persisting_started_ ABSL_GUARDED_BY(mu_);
  std::map<Key, SubtaskSnapshot> finished_ ABSL_GUARDED_BY(mu_);
  std::vector<SubtaskSnapshot> last_completed_ ABSL_GUARDED_BY(mu_);
  CheckpointSummary summary_ ABSL_GUARDED_BY(mu_);
  int64_t failed_in_a_row_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<SavepointRequest> savepoint_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // stop-with-savepoint: no more checkpoints
  // Why the job is ending (AbortSavepoint: cancelled or failed); a savepoint
  // asked for afterwards is refused at once rather than waiting out its
  // timeout.
  absl::Status ending_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHECKPOINT_COORDINATOR_H_
