// runtime/rocksdb/rocksdb_kv_store.cc
//
// One RocksDB database per operator instance, in a directory of its own
// under StateBackend::dir (the temp directory when empty), removed when the
// instance's store and the last snapshot of it are gone, or, left by a killed
// process, by the next process that opens a database there.  Writes skip the
// write-ahead log: the job's checkpoints, not RocksDB, make state durable
// (as Flink's RocksDB backend).  Small memtables and block cache keep the
// memory an instance uses bounded (a few tens of MB by default, less with
// smaller StateBackend::rocksdb_options), whatever the state's size.
#include "tidemark/runtime/rocksdb/rocksdb_kv_store.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"
#include "rocksdb/write_batch.h"
#include "tidemark/runtime/state/kv_store.h"

extern "C" {
int tidemark_rocksdb_link_anchor = 0;
}

namespace tidemark::internal {
namespace {

namespace fs = std::filesystem;

// The database and its directory; shared by the store and its snapshots.
struct Db {
  std::unique_ptr<rocksdb::DB> db;
  std::filesystem::path path;
  RocksDbOptions options;  // the backend's (defaults for a store read from files)
  // Native checkpoints: a name no other database uses (shared files are
  // "<id>-<uid>-<file>"), and the SST files already in the shared directory
  // (local name -> shared name and size).  SST files never change once
  // written, so one uploaded stays valid while the shared file is there.
  std::string uid;
  std::mutex mu;
  std::map<std::string, std::pair<std::string, uint64_t>> uploaded;
  void Close() {
    if (db != nullptr) {
      db->Close().PermitUncheckedError();
      db.reset();
    }
  }
  ~Db() {
    Close();
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // best effort: a temp directory
  }
};

std::string NewUid() {
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const uint64_t r =
      (uint64_t{rd()} << 32) ^ rd() ^ (uint64_t(::getpid()) << 16) ^ counter.fetch_add(1);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(r));
  return buf;
}

// RocksDB's options from the backend's RocksDbOptions (job_config.h): the
// memory a database may use is about max_write_buffer_number memtables of
// write_buffer_size, the block cache, and the index and filter blocks of
// the open files (inside the cache when cache_index_and_filter_blocks).
rocksdb::Options MakeOptions(const RocksDbOptions& o) {
  o.Validate();
  rocksdb::Options options;
  options.write_buffer_size = o.write_buffer_size;
  options.max_write_buffer_number = o.max_write_buffer_number;
  options.max_background_jobs = o.max_background_jobs;
  options.max_open_files = o.max_open_files;
  options.compression = rocksdb::kNoCompression;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(o.block_cache_size);
  table.cache_index_and_filter_blocks = o.cache_index_and_filter_blocks;
  table.pin_l0_filter_and_index_blocks_in_cache = o.cache_index_and_filter_blocks;
  // A key the state has never held (a new key's first record) is answered
  // by the filters, not by reading every level.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

bool IsSst(std::string_view name) {
  return name.size() > 4 && name.substr(name.size() - 4) == ".sst";
}

// `to` as a hard link to `from` (an SST file: never changed once written),
// or a copy (other files, which RocksDB may append to; another file
// system).
void LinkOrCopy(const fs::path& from, const fs::path& to, bool link) {
  std::error_code ec;
  if (link) {
    fs::create_hard_link(from, to, ec);
    if (!ec) return;
  }
  ec.clear();
  fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
  if (ec)
    throw std::runtime_error("RocksDB state backend: copy " + from.string() + " to " + to.string() +
                             ": " + ec.message());
}

// Fills the (empty) directory db.path with the files of a native checkpoint
// and opens the database there.
void OpenFromFiles(Db& db, const fs::path& shared_dir, const std::vector<KvNativeFile>& files);

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
    ScanRange(prefix, PrefixEnd(prefix), f);
  }
  void ScanRange(std::string_view begin, std::string_view end,
                 const std::function<void(std::string_view, std::string_view)>& f) const override {
    rocksdb::Slice upper(end.data(), end.size());
    rocksdb::ReadOptions ro;
    ro.snapshot = snap_;
    ro.fill_cache = false;
    if (!end.empty()) ro.iterate_upper_bound = &upper;
    std::unique_ptr<rocksdb::Iterator> it(db_->db->NewIterator(ro));
    for (it->Seek(ToSlice(begin)); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key(), v = it->value();
      f(std::string_view(k.data(), k.size()), std::string_view(v.data(), v.size()));
    }
    Check(it->status(), *db_, "reading a snapshot");
  }

 private:
  std::shared_ptr<Db> db_;
  const rocksdb::Snapshot* snap_;
};

// A RocksDB checkpoint (hard links of the SST files, copies of the rest) in
// a directory beside the database's, uploaded off the task thread.
class RocksDbCheckpoint final : public KvCheckpoint {
 public:
  RocksDbCheckpoint(std::shared_ptr<Db> db, fs::path dir)
      : db_(std::move(db)), dir_(std::move(dir)) {}
  ~RocksDbCheckpoint() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::vector<KvNativeFile> Upload(SharedFileSink& sink) override {
    std::vector<KvNativeFile> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      KvNativeFile f;
      f.local = it->path().filename().string();
      f.size = fs::file_size(it->path());
      out.push_back(std::move(f));
    }
    if (ec)
      throw std::runtime_error("RocksDB state backend: list " + dir_.string() + ": " +
                               ec.message());
    for (KvNativeFile& f : out) {
      if (IsSst(f.local)) {
        std::pair<std::string, uint64_t> known;
        {
          std::lock_guard<std::mutex> lock(db_->mu);
          auto it = db_->uploaded.find(f.local);
          if (it != db_->uploaded.end()) known = it->second;
        }
        if (!known.first.empty() && known.second == f.size && sink.Reuse(known.first, f.size)) {
          f.shared = known.first;
          continue;
        }
      }
      f.shared = sink.Upload((dir_ / f.local).string(), db_->uid + "-" + f.local);
    }
    // Only this checkpoint's SST files can be in later ones (a file a
    // compaction deleted never comes back).
    std::map<std::string, std::pair<std::string, uint64_t>> uploaded;
    for (const KvNativeFile& f : out)
      if (IsSst(f.local)) uploaded[f.local] = {f.shared, f.size};
    std::lock_guard<std::mutex> lock(db_->mu);
    db_->uploaded = std::move(uploaded);
    return out;
  }

 private:
  std::shared_ptr<Db> db_;
  fs::path dir_;
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

  std::unique_ptr<KvCheckpoint> Checkpoint() override {
    Commit();
    static std::atomic<uint64_t> counter{0};
    fs::path dir = db_->path;
    dir += ".chk-" + std::to_string(counter.fetch_add(1));
    std::error_code ec;
    fs::remove_all(dir, ec);
    rocksdb::Checkpoint* raw = nullptr;
    Check(rocksdb::Checkpoint::Create(db_->db.get(), &raw), *db_, "checkpoint");
    std::unique_ptr<rocksdb::Checkpoint> cp(raw);
    // Flushes the memtables first (log_size_for_flush 0): writes skip the WAL.
    Check(cp->CreateCheckpoint(dir.string(), 0), *db_, "checkpoint");
    return std::make_unique<RocksDbCheckpoint>(db_, std::move(dir));
  }

  void RestoreFiles(const std::string& shared_dir,
                    const std::vector<KvNativeFile>& files) override {
    if (db_.use_count() != 1)
      throw std::logic_error("RocksDB state backend: restoring files into a store in use");
    batch_.Clear();
    OpenFromFiles(*db_, shared_dir, files);
  }

 private:
  std::shared_ptr<Db> db_;
  rocksdb::WriteOptions wo_;
  rocksdb::WriteBatch batch_;
};

// A directory of its own for one database, made new under `base` (mkdtemp: a
// random suffix, retried until no such name exists): a process killed with -9
// leaves its directory behind, and a later process given the same pid would
// otherwise find a database under the same name and fail to open
// (error_if_exists), or, restoring, delete one in use; Flink's instance
// directories carry a random UUID for the same reason.
fs::path MakeInstanceDir(const fs::path& base, const std::string& name) {
  std::error_code ec;
  fs::create_directories(base, ec);
  if (ec)
    throw std::runtime_error("RocksDB state backend: cannot create " + base.string() + ": " +
                             ec.message());
  std::string dir = (base / (name + "-XXXXXX")).string();
  if (::mkdtemp(dir.data()) == nullptr) {
    const int err = errno;
    throw std::runtime_error("RocksDB state backend: cannot create a directory in " +
                             base.string() + ": " + std::generic_category().message(err));
  }
  return dir;
}

// The pid in an instance directory's name ("<owner>-<pid>-<n>-XXXXXX", with
// ".chk-<k>" after it for a native checkpoint's directory beside it; owner
// names have no '-'), 0 when the name is not one of ours.
pid_t InstancePid(const std::string& name, std::string* instance) {
  std::string base = name;
  if (const size_t chk = base.find(".chk-"); chk != std::string::npos) base.resize(chk);
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t dash = base.find('-', from);
    parts.push_back(base.substr(from, dash == std::string::npos ? dash : dash - from));
    if (dash == std::string::npos) break;
    from = dash + 1;
  }
  if (parts.size() != 4 || parts[3].size() != 6) return 0;
  for (const std::string& digits : {parts[1], parts[2]}) {
    if (digits.empty() || digits.size() > 9) return 0;
    for (char c : digits)
      if (c < '0' || c > '9') return 0;
  }
  *instance = base;
  return static_cast<pid_t>(std::stol(parts[1]));
}

// Whether some process holds the lock RocksDB takes on <dir>/LOCK (an fcntl
// write lock, held while the database is open, released when its process
// dies).  Not asked of this process's own databases: closing any descriptor
// of a file drops this process's fcntl locks on it.
bool DatabaseLocked(const fs::path& dir) {
  const int fd = ::open((dir / "LOCK").c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

// Removes, once per process and base directory, the instance directories
// that processes killed before closing their databases (kill -9, a crash)
// left under `base`: those whose process is gone (no such pid here) and whose
// database no process holds open (its LOCK, which also covers a process of
// the same pid on another host sharing `base`).  A checkpoint's directory
// goes with its database's.  Best effort: what cannot be removed stays.
void RemoveDirectoriesOfDeadProcesses(const fs::path& base) {
  static std::mutex mu;
  static std::vector<fs::path> cleaned;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const fs::path& b : cleaned)
      if (b == base) return;
    cleaned.push_back(base);
  }
  std::error_code ec;
  std::map<std::string, bool> removable;  // instance name -> its process and database are gone
  std::vector<fs::path> remove;
  for (fs::directory_iterator it(base, ec), end; !ec && it != end; it.increment(ec)) {
    std::string instance;
    const pid_t pid = InstancePid(it->path().filename().string(), &instance);
    if (pid <= 0 || pid == ::getpid()) continue;
    auto [at, fresh] = removable.try_emplace(instance, false);
    if (fresh) {
      at->second = ::kill(pid, 0) != 0 && errno == ESRCH && !DatabaseLocked(base / instance);
    }
    if (at->second) remove.push_back(it->path());
  }
  for (const fs::path& dir : remove) fs::remove_all(dir, ec);
}

std::unique_ptr<KvStore> OpenRocksDb(const StateBackend& backend, std::string_view owner) {
  static std::atomic<int> counter{0};
  const fs::path base =
      backend.dir.empty() ? fs::temp_directory_path() / "tidemark-rocksdb" : fs::path(backend.dir);
  RemoveDirectoriesOfDeadProcesses(base);
  std::string name;
  for (char c : owner) name.push_back(std::isalnum(static_cast<unsigned char>(c)) ? c : '_');
  if (name.size() > 60) name.resize(60);
  name += "-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1));
  auto db = std::make_shared<Db>();
  db->uid = NewUid();
  db->options = backend.rocksdb_options;
  db->path = MakeInstanceDir(base, name);
  rocksdb::Options options = MakeOptions(db->options);
  options.create_if_missing = true;
  options.error_if_exists = true;
  rocksdb::DB* raw = nullptr;
  Check(rocksdb::DB::Open(options, db->path.string(), &raw), *db, "opening");
  db->db.reset(raw);
  return std::make_unique<RocksDbKvStore>(std::move(db));
}

void OpenFromFiles(Db& db, const fs::path& shared_dir, const std::vector<KvNativeFile>& files) {
  db.Close();
  std::error_code ec;
  fs::remove_all(db.path, ec);
  fs::create_directories(db.path, ec);
  if (ec)
    throw std::runtime_error("RocksDB state backend: cannot create " + db.path.string() + ": " +
                             ec.message());
  std::map<std::string, std::pair<std::string, uint64_t>> uploaded;
  for (const KvNativeFile& f : files) {
    if (f.local.empty() || f.local.find('/') != std::string::npos || f.local[0] == '.')
      throw std::runtime_error("RocksDB state backend: native checkpoint names file '" + f.local +
                               "' (corrupt)");
    const fs::path from = shared_dir / f.shared;
    const uint64_t size = fs::file_size(from, ec);
    if (ec || size != f.size)
      throw std::runtime_error("RocksDB state backend: restoring " + from.string() + ": " +
                               (ec ? ec.message()
                                   : "size " + std::to_string(size) + ", the checkpoint says " +
                                         std::to_string(f.size)));
    LinkOrCopy(from, db.path / f.local, IsSst(f.local));
    if (IsSst(f.local)) uploaded[f.local] = {f.shared, f.size};
  }
  rocksdb::Options options = MakeOptions(db.options);
  options.create_if_missing = false;
  rocksdb::DB* raw = nullptr;
  Check(rocksdb::DB::Open(options, db.path.string(), &raw), db, "opening restored files");
  db.db.reset(raw);
  std::lock_guard<std::mutex> lock(db.mu);
  db.uploaded = std::move(uploaded);
}

std::unique_ptr<KvStore> OpenRocksDbFiles(const std::string& shared_dir,
                                          const std::vector<KvNativeFile>& files) {
  static std::atomic<int> counter{0};
  auto db = std::make_shared<Db>();
  db->uid = NewUid();
  RemoveDirectoriesOfDeadProcesses(fs::temp_directory_path() / "tidemark-rocksdb");
  db->path = MakeInstanceDir(
      fs::temp_directory_path() / "tidemark-rocksdb",
      "restore-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)));
  OpenFromFiles(*db, shared_dir, files);
  return std::make_unique<RocksDbKvStore>(std::move(db));
}

const bool kRegistered = [] {
  RegisterKvStoreFactory(&OpenRocksDb);
  RegisterKvFilesFactory(&OpenRocksDbFiles);
  return true;
}();

}  // namespace
}  // namespace tidemark::internal
