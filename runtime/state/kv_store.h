// runtime/state/kv_store.h
//
// KvStore: the ordered key-value store keyed state lives in when the job's
// state backend is RocksDB (StateBackend in runtime/core/job_config.h,
// docs/checkpoints.md "State backends").  The interface is here so that the
// keyed state store (operators/keyed/keyed_state_store.h) needs no RocksDB
// header; the implementation is the RocksDB plane (runtime/rocksdb/, library
// tidemark_rocksdb, CMake target tidemark::rocksdb), which registers itself
// when a program links it.  A job that asks for RocksDB in a program that
// does not link it fails at start with an error saying so.
//
// Thread safety: one KvStore belongs to one operator instance (its task
// thread); a KvSnapshot may be read on another thread (asynchronous
// snapshots) while the store goes on changing.
#ifndef TM_RUNTIME_STATE_KV_STORE_H_
#define TM_RUNTIME_STATE_KV_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/job_config.h"

namespace tidemark::internal {

// A consistent view of the store at the time it was taken (RocksDB's
// GetSnapshot); keeps the store's files alive while it exists.
class KvSnapshot {
 public:
  virtual ~KvSnapshot() = default;
  // Calls f(key, value) for every key that starts with `prefix`, in key
  // order.
  virtual void Scan(std::string_view prefix,
                    const std::function<void(std::string_view, std::string_view)>& f) const = 0;
  // Calls f(key, value) for every key in [begin, end) ("" end: no bound), in
  // key order (a key-group range of a table: keys are key-group-prefixed).
  virtual void ScanRange(
      std::string_view begin, std::string_view end,
      const std::function<void(std::string_view, std::string_view)>& f) const = 0;
};

// Native incremental checkpoints (docs/checkpoints.md, "Incremental
// checkpoints"): where a store with files of its own (RocksDB's SST files)
// puts them for checkpoint `checkpoint_id()`.  Made by the checkpoint
// coordinator for a checkpoint (never a savepoint) of an incremental
// storage; the files it is given are shared files of that storage, counted
// by retention like its chunks.  Thread-safe; errors are thrown
// (std::runtime_error), failing the checkpoint's asynchronous part.
class SharedFileSink {
 public:
  virtual ~SharedFileSink() = default;
  virtual int64_t checkpoint_id() const = 0;
  // The storage's shared directory (absolute), which restores read from.
  // Paths are strings in this file: <filesystem> here would be in the
  // reach of every job (tidemark.h; compile cost, issue 24).
  virtual std::string shared_dir() const = 0;
  // Hard-links (or copies) the local file `local` into the shared directory
  // as "<checkpoint id>-<name>", durably; returns that name.
  virtual std::string Upload(const std::string& local, std::string_view name) = 0;
  // Refers to shared file `shared` uploaded by an earlier checkpoint, when
  // it is still there with `size` bytes; false (nothing referred) if not.
  virtual bool Reuse(std::string_view shared, uint64_t size) = 0;
  // What Upload and Reuse were given (name, size), and the bytes uploaded.
  virtual std::vector<std::pair<std::string, uint64_t>> Files() const = 0;
  virtual uint64_t uploaded_bytes() const = 0;
};

// One file of a store's native checkpoint: its name in the store's
// directory, the shared file holding it and its size.
struct KvNativeFile {
  std::string local;
  std::string shared;
  uint64_t size = 0;
};

// The store's files at the moment it was taken (RocksDB: a flush and a
// checkpoint of hard links, on the task thread), to upload later off the
// task thread.  Deletes its local copy when destroyed.
class KvCheckpoint {
 public:
  virtual ~KvCheckpoint() = default;
  // Uploads the files no earlier confirmed checkpoint holds through `sink`
  // and refers to the others; returns every file of the checkpoint.
  virtual std::vector<KvNativeFile> Upload(SharedFileSink& sink) = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;
  // The value of `key` into *value; false when there is none.
  virtual bool Get(std::string_view key, std::string* value) = 0;
  // Buffers a write, applied (with the others, atomically) by Commit.
  virtual void Put(std::string_view key, std::string_view value) = 0;
  virtual void Commit() = 0;
  // Deletes `key` at once (not buffered).
  virtual void Delete(std::string_view key) = 0;
  virtual std::shared_ptr<const KvSnapshot> Snapshot() = 0;
  // Native checkpoints (above); null when the store has none (then the
  // caller writes its entries instead).  Pending writes must be committed.
  virtual std::unique_ptr<KvCheckpoint> Checkpoint() { return nullptr; }
  // Replaces the store's contents (it must hold nothing yet) by the files of
  // a native checkpoint, read from `shared_dir`; they count as uploaded, so
  // the next checkpoint refers to them.  Throws on failure.
  virtual void RestoreFiles(const std::string& /*shared_dir*/,
                            const std::vector<KvNativeFile>& /*files*/) {
    throw std::runtime_error("this state backend cannot restore native checkpoint files");
  }
  // Where the store keeps its files (for messages).
  virtual std::string path() const = 0;
};

// Opens a fresh store for the operator instance `owner` (a name, used in the
// directory's name) under backend.dir.  Throws std::runtime_error when no
// implementation is linked or the store cannot be opened.
std::unique_ptr<KvStore> OpenKvStore(const StateBackend& backend, std::string_view owner);

using KvStoreFactory = std::unique_ptr<KvStore> (*)(const StateBackend& backend,
                                                    std::string_view owner);
// Called by the RocksDB plane's static initialiser.
void RegisterKvStoreFactory(KvStoreFactory factory);

// Opens the files of a native checkpoint (copies of them, in a temporary
// directory removed with the store), to read key-group ranges from: a
// restore at another parallelism, or into the heap backend.  Throws when no
// implementation is linked.
std::unique_ptr<KvStore> OpenKvStoreFiles(const std::string& shared_dir,
                                          const std::vector<KvNativeFile>& files);
using KvFilesFactory = std::unique_ptr<KvStore> (*)(const std::string& shared_dir,
                                                    const std::vector<KvNativeFile>& files);
void RegisterKvFilesFactory(KvFilesFactory factory);

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_STATE_KV_STORE_H_
