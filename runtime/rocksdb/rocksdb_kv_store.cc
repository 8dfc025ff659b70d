// runtime/rocksdb/rocksdb_kv_store.cc
//
// One RocksDB database per operator instance, in a directory of its own
// under StateBackend::dir (the temp directory when empty), removed when the
// instance's store and the last snapshot of it are gone.  Writes skip the
// write-ahead log: the job's checkpoints, not RocksDB, make state durable
// (as Flink's RocksDB backend).  Small memtables and block cache keep the
// memory an instance uses bounded (a few tens of MB), whatever the state's
// size.
#include "tidemark/runtime/rocksdb/rocksdb_kv_store.h"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>

#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"
#include "tidemark/runtime/state/kv_store.h"

extern "C" {
int tidemark_rocksdb_link_anchor = 0;
}

namespace tidemark::internal {
namespace {

// The database and its directory; shared by the store and its snapshots.
struct Db {
  std::unique_ptr<rocksdb::DB> db;
  std::filesystem::path path;
  ~Db() {
    if (db != nullptr) {
      db->Close().PermitUncheckedError();
      db.reset();
    }
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // best effort: a temp directory
  }
};

rocksdb::Slice ToSlice(std::string_view s) { return rocksdb::Slice(s.data(), s.size()); }

void Check(const rocksdb::Status& s, const Db& db, const char* what) {
  if (!s.ok())
    throw std::runtime_error("RocksDB state backend (" + db.path.string() + "): " + what + ": " +
                             s.ToString());
}

// The smallest key greater than every key starting with `prefix` ("" when
// there is none: the prefix is all 0xff).
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& c = reinterpret_cast<unsigned char&>(end.back());
    if (c != 0xff) {
      ++c;
      return end;
    }
    end.pop_back();
  }
  return end;
}

class RocksDbSnapshot final : public KvSnapshot {
 public:
  explicit RocksDbSnapshot(std::shared_ptr<Db> db)
      : db_(std::move(db)), snap_(db_->db->GetSnapshot()) {}
  ~RocksDbSnapshot() override { db_->db->ReleaseSnapshot(snap_); }
  void Scan(std::string_view prefix,
            const std::function<void(std::string_view, std::string_view)>& f) const override {
    const std::string end = PrefixEnd(prefix);
    rocksdb::Slice upper(end);
    rocksdb::ReadOptions ro;
    ro.snapshot = snap_;
    ro.fill_cache = false;
    if (!end.empty()) ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(ro));
    for (it->Seek(ToSlice(prefix)); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      f(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()));
    }
    Check(it->status(), *db_, "reading a snapshot");
  }

 private:
  std::shared_ptr<Db> db_;
  const rocksdb::Snapshot* snap_;
};

class RocksDbKvStore final : public KvStore {
 public:
  explicit RocksDbKvStore(std::shared_ptr<Db> db) : db_(std::move(db)) { wo_.disableWAL = true; }
  bool Get(std::string_view key, std::string* value) override {
    const rocksdb::Status s = db_->db->Get(rocksdb::ReadOptions(), ToSlice(key), value);
    if (s.IsNotFound()) return false;
    Check(s, *db_, "reading");
    return true;
  }
  void Put(std::string_view key, std::string_view value) override {
    Check(batch_.Put(ToSlice(key), ToSlice(value)), *db_, "writing");
  }
  void Commit() override {
    if (batch_.Count() == 0) return;
    Check(db_->db->Write(wo_, &batch_), *db_, "writing");
    batch_.Clear();
  }
  void Delete(std::string_view key) override {
    Check(db_->db->Delete(wo_, ToSlice(key)), *db_, "deleting");
  }
  std::shared_ptr<const KvSnapshot> Snapshot() override {
    return std::make_shared<RocksDbSnapshot>(db_);
  }
  std::string path() const override { return db_->path.string(); }

 private:
  std::shared_ptr<Db> db_;
  rocksdb::WriteOptions wo_;
  rocksdb::WriteBatch batch_;
};

std::unique_ptr<KvStore> OpenRocksDb(const StateBackend& backend, std::string_view owner) {
  static std::atomic<int> counter{0};
  std::filesystem::path base = backend.dir.empty()
                                   ? std::filesystem::temp_directory_path() / "tidemark-rocksdb"
                                   : std::filesystem::path(backend.dir);
  std::string name;
  for (char c : owner) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (name.size() > 60) name.resize(60);
  name += "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  auto db = std::make_shared<Db>();
  db->path = base / name;
  std::error_code ec;
  std::filesystem::create_directories(db->path, ec);
  if (ec)
    throw std::runtime_error("RocksDB state backend: cannot create " + db->path.string() + ": " +
                             ec.message());
  rocksdb::Options options;
  options.create_if_missing = true;
  options.error_if_exists = true;
  options.write_buffer_size = 8 << 20;
  options.max_write_buffer_number = 2;
  options.max_background_jobs = 2;
  options.max_open_files = 256;
  options.compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(8 << 20);
  // A key the state has never held (a new key's first record) is answered
  // by the filters, not by reading every level.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  Check(rocksdb::DB::Open(options, db->path.string(), &raw), *db, "opening");
  db->db.reset(raw);
  return std::make_unique<RocksDbKvStore>(std::move(db));
}

const bool kRegistered = [] {
  RegisterKvStoreFactory(&OpenRocksDb);
  return true;
}();

}  // namespace
}  // namespace tidemark::internal
