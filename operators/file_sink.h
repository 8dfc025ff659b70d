// operators/file_sink.h
//
// An exactly-once file sink (DataStream::sink_to_files): two-phase commit
// over part files, as Flink's FileSink does with checkpoints.
//
// Each sink subtask writes lines to an in-progress part file,
// DIR/.part-<subtask>-<n>.inprogress ("part": the sink's file prefix).  At the barrier of
// checkpoint c the file is closed, synced and renamed DIR/.part-<subtask>-<n>.pending, and the
// subtask's state lists it as pending for c (pre-commit).  When checkpoint c
// is complete everywhere (NotifyCheckpointComplete) every file pending for a
// checkpoint <= c is renamed DIR/part-<subtask>-<n> (commit): only then is it
// visible, so `cat DIR/*` reads committed results only (the hidden files
// start with '.').
//
// On restore from checkpoint c the files its state lists as pending are
// committed (c is complete, so they belong to the output) and every other
// hidden file of the subtask (in progress, or pending for a later checkpoint
// that never completed) is deleted: their records are replayed.  A fresh
// start deletes the subtask's hidden files left by an earlier attempt and
// numbers its parts after the committed ones.
//
// Restored at another parallelism (docs/checkpoints.md, "Rescaling"), the
// sink's state is operator list state: old subtask k's goes to new subtask
// k % parallelism, which commits k's pending parts (still named after k) and
// deletes k's other hidden files; the state names the subtask it was
// written by for that.  Every old subtask's state goes to exactly one new
// subtask, so every pending part is committed once, and old subtask k < the
// new parallelism is taken over by new subtask k itself, so no two new
// subtasks touch the same files.
//
// At the end of input the last file is pre-committed for the first
// checkpoint that holds the subtask's final snapshot: the next one the job
// completes (a bounded branch beside a running one, or a stop-with-savepoint)
// or the job's final checkpoint, taken when every subtask has finished (a job
// that stops before then commits it on restore).  Without checkpointing the
// sink commits at the end of input.
//
// Thread safety: one task thread (and, for the final commit, the thread that
// waits for the job once the task has finished).
#ifndef TM_OPERATORS_FILE_SINK_H_
#define TM_OPERATORS_FILE_SINK_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// The files of one sink subtask (file_sink.cc).  Every failure throws with a
// message naming the file.
class TwoPhaseCommitFiles {
 public:
  TwoPhaseCommitFiles();
  ~TwoPhaseCommitFiles();
  // Files are named <prefix>-<subtask>-<n> (hidden: .<prefix>-...).
  void Open(std::string dir, std::string prefix, int subtask, bool checkpointing);
  // A line every part file starts with (a CSV header), or none when empty.
  void set_header(std::string header) { header_ = std::move(header); }
  void Write(std::string_view line);
  // The barrier of checkpoint `id`: the in-progress file becomes pending.
  void PreCommit(int64_t id);
  // Pending files of checkpoints <= id become visible.
  void Commit(int64_t id);
  // End of input: the last file is pending for the final checkpoint (or,
  // without checkpointing, committed at once).
  void Finish();
  // After Finish: the final checkpoint is durable.
  void CommitFinal();
  void Snapshot(StateWriter& w) const;
  // Once per old state handed to this subtask (one, or several when the job
  // was rescaled): commits its pending parts, deletes its other hidden files,
  // and rolls the output back to the checkpoint: the committed parts of the
  // old subtask numbered after the state's last part were started after the
  // checkpoint's barrier (a later checkpoint committed them; its records are
  // replayed), so they are deleted.
  void Restore(StateReader& r);
  // The committed parts the restores deleted (full paths), in order.
  const std::vector<std::string>& rolled_back() const { return rolled_back_; }

 private:
  struct Pending {
    int64_t seq;
    int64_t checkpoint;  // kFinalCheckpoint: the job's final one
  };
  static constexpr int64_t kFinalCheckpoint = INT64_MAX;
  std::string Hidden(int subtask, int64_t seq, std::string_view state) const;
  std::string Visible(int subtask, int64_t seq) const;
  // Deletes the hidden files of (old) subtask `subtask` whose part is not in
  // `keep` (pending in the state), and its committed parts numbered
  // `rollback_from` or more (listed in rolled_back_); returns one past the
  // highest part number of `subtask` seen (committed or hidden, deleted or
  // not: part numbers are never reused).
  int64_t CleanUpSubtask(int subtask, const std::vector<Pending>& keep,
                         int64_t rollback_from = INT64_MAX);
  // Once, before the first file: CleanUpSubtask for this subtask's own files,
  // and parts numbered after every one seen.
  void CleanUp();
  void CommitOne(int subtask, const Pending& p);

  std::string dir_;
  std::string prefix_;
  int subtask_ = 0;
  bool checkpointing_ = false;
  bool cleaned_ = false;
  int64_t next_seq_ = 0;
  int fd_ = -1;  // the in-progress file
  int64_t current_seq_ = -1;
  std::string buffer_;  // written to fd_ in large pieces
  std::string header_;
  std::vector<Pending> pending_;
  std::vector<std::string> rolled_back_;
};

template <typename T>
class ExactlyOnceFileSinkOperator final
    : public BatchedSinkOperator<ExactlyOnceFileSinkOperator<T>, T> {
 public:
  using Formatter = std::function<std::string(const T&)>;
  // `header`: the first line of every part file, none when empty.
  ExactlyOnceFileSinkOperator(std::string dir, std::string prefix, Formatter fmt,
                              std::string header = {})
      : dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        fmt_(std::move(fmt)),
        header_(std::move(header)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    files_.set_header(header_);
    files_.Open(dir_, prefix_, ctx.subtask_index(), ctx.config().checkpointing());
  }
  void ProcessElement(T&& v, Timestamp) override { files_.Write(fmt_(v)); }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}
  void Finish() override {
    files_.Finish();
    finished_ = true;
  }
  void PrepareSnapshotPreBarrier(int64_t id) override { files_.PreCommit(id); }
  void SnapshotState(StateWriter& w) override { files_.Snapshot(w); }
  void RestoreState(StateReader& r) override {
    const size_t before = files_.rolled_back().size();
    files_.Restore(r);
    // Named where the job's notices go (the CLI prints them on stderr).
    for (size_t i = before; i < files_.rolled_back().size(); ++i) {
      this->ctx().Notice(absl::StrCat("rolled back ", files_.rolled_back()[i],
                                      ": committed after the checkpoint restored from (its "
                                      "records are replayed)"));
    }
  }
  // Pending parts are operator list state: rescaled, old subtask k's go to
  // new subtask k % parallelism, which commits them (and deletes k's hidden
  // files that are not pending).
  StateRescaling state_rescaling() const override { return StateRescaling::kRoundRobin; }
  void NotifyCheckpointComplete(int64_t id) override {
    if (finished_) {
      // Only a checkpoint that holds the final snapshot reaches a finished
      // sink (StreamTask::NotifyCheckpointComplete).
      files_.CommitFinal();
    } else {
      files_.Commit(id);
    }
  }

 private:
  std::string dir_;
  std::string prefix_;
  Formatter fmt_;
  std::string header_;
  TwoPhaseCommitFiles files_;
  bool finished_ = false;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_FILE_SINK_H_
