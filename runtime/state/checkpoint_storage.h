// runtime/state/checkpoint_storage.h
//
// Durable checkpoint storage on a local (or mounted) file system, the layer
// the checkpoint coordinator and the tasks' snapshots write to and a restore
// reads from.
//
// Layout, for a storage directory DIR:
//
//   DIR/chk-7/3-window-1.state   one file per subtask state, named by the
//   DIR/chk-7/2-source-0.state   caller; each written as .<name>.tmp, fsynced
//                                and renamed, so it is whole or absent
//   DIR/chk-7/_manifest          written last, atomically (temp file, fsync,
//                                rename, fsync of the directories)
//
// A checkpoint directory without a _manifest is incomplete (the job failed or
// was stopped while it was taken) and is never used.  The manifest is binary:
// the magic "TMCKMANI", a format version, the checkpoint id, the job's
// metadata (a string map the caller chooses, e.g. "job" -> fingerprint,
// "op.3.parallelism" -> "2"), the name, size and CRC-32C of every state file,
// and last the CRC-32C of all of it.  Loading checks all of those, so a
// truncated or corrupted file is found at restore time, named, and the
// previous checkpoint used instead.
//
// Incremental checkpoints (set_incremental(true); docs/checkpoints.md,
// "Incremental checkpoints"): a state file's bytes are cut into
// content-defined chunks; the chunks no retained checkpoint holds yet are
// written to DIR/shared/<id>-<name>, and DIR/chk-<id>/<name> becomes a small
// reference file listing, in order, the (shared file, offset, length, CRC) of
// every chunk.  The manifest says so (metadata kIncrementalKey).  Loading
// follows the references and hands back the whole bytes, so the layers above
// do not see the difference.  Retention deletes a shared file once no retained
// checkpoint (and no checkpoint being written) refers to it; the references
// are counted from the retained checkpoints' reference files on disk, so a
// crash neither leaks a file in use nor keeps one for ever.
//
// Thread-safety: CheckpointStorage holds no mutable state but the incremental
// mode's chunk index (behind its own mutex).  WriteState may be
// called from any number of threads for distinct (id, name) pairs, and
// concurrently with Commit of another id; Commit and Abort are meant for one
// coordinating thread.  Loads may run at any time but only see committed
// checkpoints.  AsyncStateWriter is safe to Submit to from any thread.
#ifndef TM_RUNTIME_CHECKPOINT_STORAGE_H_
#define TM_RUNTIME_CHECKPOINT_STORAGE_H_

#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tidemark/runtime/core/detail/mutex.h"

namespace tidemark::internal {

class SharedFileSink;  // kv_store.h

// One state file of a checkpoint, as written.
struct StateFileInfo {
  std::string name;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  // Incremental mode (not in the manifest): the bytes written to shared files
  // for it (its new chunks), and the size of the state it stands for.
  uint64_t shared_bytes = 0;
  uint64_t full_size = 0;

  friend bool operator==(const StateFileInfo&, const StateFileInfo&) = default;
};

// A complete checkpoint, read and verified.
struct LoadedCheckpoint {
  int64_t id = -1;
  std::filesystem::path path;                   // DIR/chk-<id>
  std::map<std::string, std::string> metadata;  // as given to Commit
  std::map<std::string, std::string> states;    // state file name -> bytes
};

// One range of a shared file (incremental checkpoints): the bytes
// [offset, offset + size) of DIR/shared/<file>, whose CRC-32C is crc32c.
struct SharedChunkRef {
  std::string file;
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t crc32c = 0;
  // A content hash of the range (both 0: none; the range is then not reused
  // by later checkpoints, only referred to).
  uint64_t hash1 = 0;
  uint64_t hash2 = 0;

  friend bool operator==(const SharedChunkRef&, const SharedChunkRef&) = default;
};

class CheckpointStorage {
 public:
  static constexpr std::string_view kManifestName = "_manifest";
  static constexpr std::string_view kSharedDirName = "shared";
  // The manifest metadata entry an incremental checkpoint carries ("1"):
  // its state files are reference files.
  static constexpr std::string_view kIncrementalKey = "storage.incremental";

  // Checkpoints live under `dir` (created when first written).  Commit keeps
  // the newest `retain` complete checkpoints (at least 1).
  explicit CheckpointStorage(std::filesystem::path dir, int retain = 3);

  // A savepoint's storage: one checkpoint whose files and manifest lie in
  // `path` itself (CheckpointPath(id) is `path` for every id), in the same
  // format; Commit deletes nothing (no retention: a savepoint is the user's to
  // delete) and Abort removes `path` while it has no manifest.
  static CheckpointStorage ForSavepoint(std::filesystem::path path);

  CheckpointStorage(CheckpointStorage&&) noexcept;
  CheckpointStorage& operator=(CheckpointStorage&&) noexcept;
  ~CheckpointStorage();

  const std::filesystem::path& dir() const { return dir_; }
  int retain() const { return retain_; }

  // Incremental checkpoints (see the file comment); before the first write.
  // A savepoint's storage stays full (self-contained) whatever is set.
  void set_incremental(bool on) { incremental_ = on && !savepoint_; }
  bool incremental() const { return incremental_; }
  // DIR/shared.
  std::filesystem::path SharedDir() const;

  // The lower level of the incremental mode, for a state backend with files
  // of its own (e.g. SST files): WriteSharedFile writes DIR/shared/<id>-<name>
  // durably and returns its one range; WriteStateRefs writes state file
  // `name` of checkpoint `id` as a reference file listing `refs` in order
  // (ranges of files written by this or a retained checkpoint), which a load
  // turns back into the concatenated bytes.  Only in incremental mode.
  absl::StatusOr<SharedChunkRef> WriteSharedFile(int64_t id, std::string_view name,
                                                 std::string_view bytes) const;
  // `files_referred`: whole shared files the state refers to besides its
  // chunks (a state backend's own files, read by it on restore, e.g.
  // RocksDB's SST files; name and size), each written or reused through
  // WriteSharedFileFrom / ReuseSharedFile below (FailedPrecondition if
  // not): retention keeps them while the checkpoint is retained, the
  // reference keeps the CRC-32C they were written with, and a load checks
  // they are there with their size and that CRC.
  absl::StatusOr<StateFileInfo> WriteStateRefs(
      int64_t id, std::string_view name, const std::vector<SharedChunkRef>& refs,
      const std::vector<SharedChunkRef>& files_referred = {}) const;
  // A state backend's own file `local` (never changed once written) as
  // shared file DIR/shared/<id>-<name>: hard-linked where the file system
  // allows, else copied; fsynced, then read back once for its CRC-32C.
  // Returns its name, size and CRC.
  absl::StatusOr<SharedChunkRef> WriteSharedFileFrom(int64_t id, std::string_view name,
                                                     const std::filesystem::path& local) const;
  // Whether shared file `file` (written by an earlier checkpoint) can be
  // referred to again: its CRC is known (from its upload by this object or
  // a retained checkpoint's reference of format 3) and it is there with
  // `size` bytes.  When its CRC is known it is kept from retention while
  // checkpoint `id` is written, whatever the answer; when not, false and
  // nothing kept (the caller uploads the file again).
  bool ReuseSharedFile(int64_t id, std::string_view file, uint64_t size) const;
  // A SharedFileSink (kv_store.h) into this storage for checkpoint `id`,
  // over the two calls above; null unless incremental.
  std::shared_ptr<SharedFileSink> SharedFileSinkFor(int64_t id) const;
  // The shared files the retained complete checkpoints refer to, counted
  // from their reference files on disk (file -> number of references).  An
  // error when one cannot be read (retention then deletes nothing).
  absl::StatusOr<std::map<std::string, int>> SharedFileReferences() const;
  // DIR/chk-<id> (a savepoint's storage: its path).
  std::filesystem::path CheckpointPath(int64_t id) const;

  // Writes one state file of checkpoint `id` (id >= 0) durably: .name.tmp,
  // fsync, rename to `name` (in incremental mode: its new chunks to a shared
  // file, then `name` as a reference file).  `name` must be non-empty, without '/' or NUL,
  // not start with '.', and not be "_manifest".  Overwrites a file of the
  // same name.  Returns what Commit needs to know about it.
  // `files_referred` (incremental mode only): as WriteStateRefs's.
  absl::StatusOr<StateFileInfo> WriteState(
      int64_t id, std::string_view name, std::string_view bytes,
      const std::vector<SharedChunkRef>& files_referred = {}) const;
  // The same, for the bytes that are `pieces` one after the other: a full
  // checkpoint writes them as they are, without joining them first (an
  // incremental one joins them to cut its chunks).
  absl::StatusOr<StateFileInfo> WriteState(
      int64_t id, std::string_view name, const std::vector<std::string_view>& pieces,
      const std::vector<SharedChunkRef>& files_referred = {}) const;

  // Makes checkpoint `id` complete: checks that every file in `files` is
  // there with its size, writes the manifest (last, atomically), then deletes
  // the complete checkpoints older than the newest `retain` ones and the
  // incomplete checkpoint directories with ids below `id` (ones above it may
  // still be being written).  A failure to delete does not fail the commit;
  // the next Commit tries again.  Fails (and leaves the directory as it is)
  // when `id` already has a manifest.
  absl::Status Commit(int64_t id, const std::map<std::string, std::string>& metadata,
                      const std::vector<StateFileInfo>& files) const;

  // Deletes checkpoint `id` when it is incomplete (no manifest); a complete
  // checkpoint is left alone.  Errors are ignored (the next Commit retries).
  void Abort(int64_t id) const;

  // The newest complete checkpoint whose manifest and state files all check
  // out.  A checkpoint that does not (or has no manifest) is skipped with one
  // line in *problems (when not null) naming the checkpoint, the file and
  // what is wrong, e.g. "checkpoint 7: 2-window-0.state: size 1200, manifest
  // says 4096 (truncated)".  NotFoundError, naming the directory and listing
  // the problems, when there is none.
  absl::StatusOr<LoadedCheckpoint> LoadLatest(std::vector<std::string>* problems) const;

  // One named checkpoint directory (e.g. DIR/chk-7, or a copy of one kept
  // elsewhere); any problem is the error, there is no falling back.
  absl::StatusOr<LoadedCheckpoint> Load(const std::filesystem::path& chk_dir) const;

  // The ids of the checkpoint directories under dir(), complete or not,
  // ascending.
  std::vector<int64_t> ListCheckpointIds() const;
  // Whether checkpoint `id` has a manifest (not whether it verifies).
  bool IsComplete(int64_t id) const;
  // Whether checkpoint `id` has a manifest that decodes and names `id` (its
  // state files are not read): a checkpoint this storage wrote.  Only these
  // count toward retention and the next checkpoint id; a stray chk-999999
  // does not.
  bool HasValidManifest(int64_t id) const;
  // The ids with a valid manifest, ascending.
  std::vector<int64_t> ListCommittedIds() const;
  // The entries of dir() named like checkpoints that are not: "chk-abc"
  // (not chk-<number>), and chk-<n> directories above the newest committed
  // id without a valid manifest (cut short, damaged or stray).  One line
  // each, naming the path and what is wrong, e.g. "ignored DIR/chk-abc: not
  // a checkpoint directory (chk-<number>)".
  std::vector<std::string> StrayEntries() const;
  // A job restored from committed checkpoint `id` of this directory goes on
  // from it: the committed checkpoints after `id` belong to the line it
  // left, and a later restore from "latest" (after a crash before the
  // restored job's first checkpoint) must not take one of them (their sinks'
  // pending files were rolled back by the restore).  Flink writes the
  // restored job's checkpoints under a new job id; here each is renamed
  // abandoned-chk-<n> (kept, not read again).  One line each, for the job's
  // notices; an error if one cannot be renamed.
  absl::StatusOr<std::vector<std::string>> AbandonAfter(int64_t id);

  // Creates dir() and checks that a file can be written, synced and removed
  // there (before a job starts, so an unusable directory is an error then
  // rather than a failed checkpoint later).  The error names the directory
  // and what failed.
  absl::Status CheckWritable() const;

  // For tests: called before every file this storage writes (state files,
  // manifests, the write check) with the operation and the path; a non-OK
  // status is that write's error (a full disk, a read-only file system).
  using FaultInjector =
      std::function<absl::Status(std::string_view op, const std::filesystem::path& path)>;
  void set_fault_injector(FaultInjector f) { fault_ = std::move(f); }

 private:
  absl::Status Inject(std::string_view op, const std::filesystem::path& path) const {
    return fault_ ? fault_(op, path) : absl::OkStatus();
  }

  absl::StatusOr<StateFileInfo> WriteStateFile(int64_t id, std::string_view name,
                                               const std::vector<std::string_view>& pieces) const;
  absl::StatusOr<StateFileInfo> WriteIncremental(
      int64_t id, std::string_view name, std::string_view bytes,
      const std::vector<SharedChunkRef>& files_referred) const;
  // Reads the retained checkpoints' chunks into the index, once.
  void LoadIndex() const;
  // Retention of shared files after checkpoint `id` was committed.
  void CollectShared(int64_t id) const;

  std::filesystem::path dir_;
  int retain_;
  bool savepoint_ = false;  // ForSavepoint
  bool incremental_ = false;
  FaultInjector fault_;
  struct ChunkIndex;  // checkpoint_storage.cc
  std::unique_ptr<ChunkIndex> chunks_;
};

// The content-defined cut points of `bytes` (incremental checkpoints): the
// end offsets of its chunks, the last one bytes.size().  A cut depends only on
// the bytes just before it (a rolling hash), so an insertion or a change moves
// only the cuts near it.  Exposed for tests.
std::vector<size_t> ContentDefinedCuts(std::string_view bytes);

// Writes state files on one background thread, in submission order, so that
// snapshot I/O stays off the task threads.  `done` is called on that thread
// with WriteState's result; it must not throw and should be quick (it holds
// up the writes after it).  The destructor writes everything submitted, then
// joins.  `storage` must outlive the writer.
class AsyncStateWriter {
 public:
  using Done = std::function<void(absl::StatusOr<StateFileInfo>)>;

  explicit AsyncStateWriter(const CheckpointStorage* storage);
  ~AsyncStateWriter();
  AsyncStateWriter(const AsyncStateWriter&) = delete;
  AsyncStateWriter& operator=(const AsyncStateWriter&) = delete;

  // Thread-safe.  `done` may be empty.
  void Submit(int64_t id, std::string name, std::string bytes, Done done) ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until everything submitted before the call is written and its
  // `done` has returned.
  void Flush() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Job {
    int64_t id;
    std::string name;
    std::string bytes;
    Done done;
  };
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  const CheckpointStorage* storage_;
  Mutex mu_;
  CondVar work_cv_;  // a job was queued, or stop_
  CondVar done_cv_;  // completed_ grew
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t submitted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t completed_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields above
};

// For tests: state files written with O_DIRECT (4 MiB and more) get EINVAL
// from the write after `after_writes` direct writes of 1 MiB each, as on a
// file system that refuses direct I/O, so the page-cache fallback runs; -1
// (the default) turns it off.  Process-wide.
void RefuseDirectWritesForTesting(int after_writes);

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHECKPOINT_STORAGE_H_
