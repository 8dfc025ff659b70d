// runtime/core/job_config.h
//
// JobConfig: the job-wide settings every task and operator instance sees
// (OperatorContext::config()).  Plain values, set before the job runs and
// read-only while it runs.
#ifndef TM_RUNTIME_JOB_CONFIG_H_
#define TM_RUNTIME_JOB_CONFIG_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include "tidemark/runtime/core/time.h"

namespace tidemark {

// Where keyed state lives (docs/checkpoints.md "State backends"): on the heap
// (Flink's HashMapStateBackend, the default) or in an embedded RocksDB per
// operator instance (Flink's EmbeddedRocksDBStateBackend; the program links
// tidemark::rocksdb).  On RocksDB the state of keyed process functions and
// the contents of keyed windows live on disk, serialised with tidemark::StateCodec; each state
// keeps at most `cache_entries` deserialised entries in memory between records.
//
// RocksDB's own memory, per database (one per operator instance), as Flink's
// state.backend.rocksdb.* options (docs/checkpoints.md "State backends",
// "RocksDB's memory"): about max_write_buffer_number * write_buffer_size of
// memtables plus block_cache_size of cached blocks plus the index and filter
// blocks of the open files (in the block cache when
// cache_index_and_filter_blocks), whatever the state's size.  The defaults
// are tidemark's (Flink's are 64 MB memtables and 8 MB of cache).
struct RocksDbOptions {
  size_t write_buffer_size = 8 << 20;  // state.backend.rocksdb.writebuffer.size
  int max_write_buffer_number = 2;     // state.backend.rocksdb.writebuffer.count
  size_t block_cache_size = 8 << 20;   // state.backend.rocksdb.block.cache-size
  int max_open_files = 256;            // state.backend.rocksdb.files.open (-1: no limit)
  int max_background_jobs = 2;         // state.backend.rocksdb.thread.num
  // Index and filter blocks in the block cache, so that block_cache_size
  // bounds them too (Flink does so when its RocksDB memory is managed);
  // false: held beside the cache by each open file.
  bool cache_index_and_filter_blocks = false;
  // Throws std::invalid_argument naming the first value out of range.
  void Validate() const {
    auto bad = [](const char* what, const std::string& why) {
      throw std::invalid_argument(std::string("RocksDbOptions::") + what + " " + why);
    };
    if (write_buffer_size < (64 << 10))
      bad("write_buffer_size", "must be at least 64 KiB, not " + std::to_string(write_buffer_size));
    if (max_write_buffer_number < 2)
      bad("max_write_buffer_number", "must be at least 2 (one to fill while one is flushed), not " +
                                         std::to_string(max_write_buffer_number));
    if (max_open_files != -1 && max_open_files < 20)  // RocksDB raises less to 20
      bad("max_open_files", "must be -1 or at least 20, not " + std::to_string(max_open_files));
    if (max_background_jobs < 1)
      bad("max_background_jobs", "must be at least 1, not " + std::to_string(max_background_jobs));
  }
};

struct StateBackend {
  enum class Kind { kHeap, kRocksDb };
  Kind kind = Kind::kHeap;
  // RocksDB's working directory (one database per operator instance under
  // it, deleted when the instance ends); empty: the system's temp directory.
  std::string dir;
  size_t cache_entries = 16384;
  RocksDbOptions rocksdb_options;  // RocksDB only

  static StateBackend heap() { return StateBackend{}; }
  static StateBackend hash_map() { return heap(); }
  static StateBackend rocksdb(std::string dir = "") {
    StateBackend b;
    b.kind = Kind::kRocksDb;
    b.dir = std::move(dir);
    return b;
  }
  static StateBackend embedded_rocksdb(std::string dir = "") { return rocksdb(std::move(dir)); }
  bool is_rocksdb() const { return kind == Kind::kRocksDb; }
  std::string name() const { return is_rocksdb() ? "rocksdb" : "heap"; }
};

}  // namespace tidemark

namespace tidemark::internal {

struct JobConfig {
  Duration auto_watermark_interval{200};
  Duration buffer_timeout{100};
  size_t batch_size = 1024;
  size_t channel_capacity = 4;  // batches
  // Who runs the non-blocking tasks: the job's own WorkerPool (default:
  // tasks keep a home worker, runtime/exec/worker_pool.h) or oneTBB's task_arena
  // (runtime/exec/arena_scheduler.h: any free worker takes the next slice).
  enum class Scheduler { kWorkerPool, kTbbArena };
  Scheduler scheduler = Scheduler::kWorkerPool;
  // Checkpoints (runtime/state/checkpoint_coordinator.h), when enabled: one every
  // checkpoint_interval (0: only when triggered) into checkpoint_dir (empty:
  // kept in memory), the newest checkpoints_retained kept.
  bool checkpoints_enabled = false;
  Duration checkpoint_interval{0};
  std::string checkpoint_dir;
  int checkpoints_retained = 3;
  // Incremental checkpoints (docs/checkpoints.md): a checkpoint writes only
  // the chunks of state no retained checkpoint holds and refers to the rest.
  // Keyed state is then written grouped by key group.  Savepoints stay full.
  bool incremental_checkpoints = false;
  // Unaligned checkpoints (FLIP-76; docs/checkpoints.md): barriers overtake
  // the records queued in the channels, which are stored with the checkpoint
  // as channel state and replayed on restore.  Savepoints stay aligned.  One
  // process only (refused across MPI ranks).
  bool unaligned_checkpoints = false;
  // Where the job starts: "" fresh, "latest" the newest valid checkpoint in
  // checkpoint_dir (fresh when there is none), or a checkpoint directory.
  std::string restore_from;
  // Under mpirun: text every rank must give alike (set_rank_settings), added
  // to the plan the ranks compare before the job starts.
  std::string rank_settings;
  // Restoring: state of an operator (task) the job no longer has is skipped
  // (named in the notices) instead of refused (Flink's
  // allowNonRestoredState).
  bool allow_non_restored_state = false;
  // Failed checkpoints (Flink's CheckpointConfig): the job fails once more
  // than `tolerable_failed_checkpoints` checkpoints in a row have failed (0,
  // Flink's default: the first failure fails it); a checkpoint not complete
  // and durable `checkpoint_timeout` after it started fails (expires; 0: no
  // limit).  `on_checkpoint_failed` (may be empty) is told of each failure
  // when it happens, on the checkpoint coordinator's thread.
  int tolerable_failed_checkpoints = 0;
  Duration checkpoint_timeout{std::chrono::minutes(10)};
  std::function<void(int64_t checkpoint_id, const std::string& error)> on_checkpoint_failed;
  // Where keyed state lives (StateBackend above).
  StateBackend state_backend;
  bool checkpointing() const { return checkpoints_enabled || !restore_from.empty(); }
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_CONFIG_H_
