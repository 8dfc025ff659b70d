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

#include <functional>
#include <memory>
#include <string>
#include <string_view>

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

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_STATE_KV_STORE_H_
