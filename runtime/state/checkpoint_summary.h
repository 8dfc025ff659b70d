// runtime/state/checkpoint_summary.h
//
// CheckpointSummary: what checkpointing did in a job (JobResult::checkpoints,
// runtime/exec/job_result.h), filled by the checkpoint coordinator.
#ifndef TM_RUNTIME_CHECKPOINT_SUMMARY_H_
#define TM_RUNTIME_CHECKPOINT_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tidemark {

// What checkpointing did in a job (env.enable_checkpointing).
struct CheckpointSummary {
  bool enabled = false;
  int64_t completed = 0;  // checkpoints made durable
  int64_t failed = 0;     // checkpoints that could not be written (last_error says why)
  int64_t last_id = -1;
  double last_duration_ms = 0;  // from start to durable
  double max_duration_ms = 0;
  int64_t last_size_bytes = 0;  // the state files of the last one
  int64_t max_size_bytes = 0;   // of the largest one
  // Per completed checkpoint, in order: the bytes it wrote (with incremental
  // checkpoints its reference files and new shared chunks), and the size of
  // the state it stands for (the same without incremental checkpoints).
  std::vector<int64_t> sizes_bytes;
  std::vector<int64_t> state_bytes;
  double max_alignment_ms = 0;  // the longest barrier alignment of any subtask
  // The last completed one: when it became durable (wall clock, ms since
  // the epoch) and its longest barrier alignment of any subtask.
  int64_t last_completed_unix_ms = 0;
  double last_alignment_ms = 0;
  // The checkpoint (or savepoint) in progress, -1 for none: started and not
  // yet durable or failed (its files may be being written); and for how long.
  int64_t in_progress_id = -1;
  double in_progress_ms = 0;
  // The longest synchronous part of any subtask's snapshot (on its task
  // thread; the rest runs on the snapshot threads).
  double max_sync_ms = 0;
  std::string last_error;
  // Restored from this checkpoint (-1: started fresh).
  int64_t restored_id = -1;
  std::string restored_path;
  // Checkpoints passed over when restoring from the latest (damaged ones),
  // one line each naming the file and what is wrong.
  std::vector<std::string> restore_problems;
  // What else the job has to say about its checkpoints, one line each: a
  // committed part file a restore rolled back (committed by a checkpoint
  // after the one restored from), a directory in the checkpoint directory
  // that is not one of the job's checkpoints and was ignored.
  std::vector<std::string> notices;
  // The savepoints taken (JobClient::trigger_savepoint, stop_with_savepoint),
  // their directories in order, and the last savepoint error.
  std::vector<std::string> savepoints;
  std::string last_savepoint_error;
  // The job was stopped with this savepoint (stop_with_savepoint without
  // drain): it ended without firing its open windows.
  std::string stopped_with_savepoint;
  // Some source cannot replay (a socket, stdin): on a restore what it had
  // emitted after the checkpoint is lost, so the job is at-most-once.
  bool at_most_once = false;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_CHECKPOINT_SUMMARY_H_
