// runtime/state/kv_store.cc
#include "tidemark/runtime/state/kv_store.h"

#include <atomic>
#include <stdexcept>

namespace tidemark::internal {
namespace {
std::atomic<KvStoreFactory> g_factory{nullptr};
std::atomic<KvFilesFactory> g_files_factory{nullptr};
}  // namespace

void RegisterKvStoreFactory(KvStoreFactory factory) { g_factory.store(factory); }

std::unique_ptr<KvStore> OpenKvStore(const StateBackend& backend, std::string_view owner) {
  KvStoreFactory f = g_factory.load();
  if (f == nullptr)
    throw std::runtime_error(
        "the job's state backend is RocksDB, but this program does not link tidemark::rocksdb "
        "(link it, or use the heap state backend)");
  return f(backend, owner);
}

void RegisterKvFilesFactory(KvFilesFactory factory) { g_files_factory.store(factory); }

std::unique_ptr<KvStore> OpenKvStoreFiles(const std::string& shared_dir,
                                          const std::vector<KvNativeFile>& files) {
  KvFilesFactory f = g_files_factory.load();
  if (f == nullptr)
    throw std::runtime_error(
        "the checkpoint holds RocksDB state in RocksDB's own files (native incremental "
        "checkpoint), but this program does not link tidemark::rocksdb (link it to restore it)");
  return f(shared_dir, files);
}

}  // namespace tidemark::internal
