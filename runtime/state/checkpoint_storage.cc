// runtime/state/checkpoint_storage.cc: the file layout, the manifest format and the
// verification of checkpoints; see checkpoint_storage.h.
#include "tidemark/runtime/state/checkpoint_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <optional>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kManifestMagic = "TMCKMANI";
// For absl::StrCat (absl::string_view is not std::string_view in this build).
constexpr absl::string_view kManifest = "_manifest";
constexpr uint32_t kManifestVersion = 1;
constexpr std::string_view kDirPrefix = "chk-";

std::string Hex(uint32_t v) { return absl::StrFormat("0x%08x", v); }

// An error for a failed system call `op` on `path`, from errno.
absl::Status ErrnoError(std::string_view op, const fs::path& path, int err) {
  const std::string msg = absl::StrCat(ToAbsl(op), " ", path.string(), ": ",
                                       std::error_code(err, std::generic_category()).message());
  if (err == ENOENT) return absl::NotFoundError(msg);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

absl::Status FsErrorStatus(std::string_view op, const fs::path& path, const std::error_code& ec) {
  return absl::InternalError(absl::StrCat(ToAbsl(op), " ", path.string(), ": ", ec.message()));
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now, reporting close's error (a deferred write error on some file
  // systems).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

absl::Status FsyncDir(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open directory", dir, errno);
  if (::fsync(fd.get()) != 0) return ErrnoError("fsync directory", dir, errno);
  return absl::OkStatus();
}

// Writes `bytes` to `tmp`, fsyncs it and renames it to `path`: afterwards
// `path` holds all of `bytes` or (after a crash) is as it was.  The rename is
// durable once the directory is fsynced.
absl::Status WriteFileAtomically(const fs::path& tmp, const fs::path& path,
                                 std::string_view bytes) {
  Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ErrnoError("create", tmp, errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd.get(), bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoError("write", tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("fsync", tmp, err);
  }
  if (fd.Close() != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError("close", tmp, err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return ErrnoError(absl::StrCat("rename ", tmp.string(), " to"), path, err);
  }
  return absl::OkStatus();
}

absl::Status ReadFile(const fs::path& path, std::string* out) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open", path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoError("stat", path, errno);
  out->clear();
  out->reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path, errno);
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status ValidateName(std::string_view name) {
  std::string_view why;
  if (name.empty()) {
    why = "is empty";
  } else if (name.find('/') != std::string_view::npos) {
    why = "contains '/'";
  } else if (name.find('\0') != std::string_view::npos) {
    why = "contains a NUL byte";
  } else if (name.front() == '.') {
    why = "starts with '.'";
  } else if (name == CheckpointStorage::kManifestName) {
    why = "is the manifest's name";
  } else {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("state file name \"", absl::CHexEscape(ToAbsl(name)), "\" ", ToAbsl(why)));
}

// "chk-<digits>" -> the id.
std::optional<int64_t> ParseCheckpointDirName(std::string_view name) {
  if (name.substr(0, kDirPrefix.size()) != kDirPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kDirPrefix.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t id = 0;
  std::from_chars(digits.data(), digits.data() + digits.size(), id);
  return id;
}

struct Manifest {
  int64_t id = -1;
  std::map<std::string, std::string> metadata;
  std::vector<StateFileInfo> files;
};

std::string EncodeManifest(const Manifest& m) {
  StateWriter w;
  w.PutRaw(kManifestMagic.data(), kManifestMagic.size());
  w.PutU32(kManifestVersion);
  w.PutI64(m.id);
  Encode(w, m.metadata);
  w.PutVarint(m.files.size());
  for (const StateFileInfo& f : m.files) {
    w.PutBytes(f.name);
    w.PutU64(f.size);
    w.PutU32(f.crc32c);
  }
  const uint32_t crc = Crc32c(w.data());
  w.PutU32(crc);
  return w.Release();
}

// The errors name the manifest ("_manifest: ...").
absl::StatusOr<Manifest> DecodeManifest(std::string_view bytes) {
  const std::string where = absl::StrCat(kManifest, ": ");
  const size_t min_size = kManifestMagic.size() + 4 + 8 + 4;
  if (bytes.size() < kManifestMagic.size() ||
      bytes.substr(0, kManifestMagic.size()) != kManifestMagic) {
    if (bytes.size() < kManifestMagic.size() && kManifestMagic.substr(0, bytes.size()) == bytes) {
      return absl::DataLossError(absl::StrCat(where, "size ", bytes.size(), " (truncated)"));
    }
    return absl::DataLossError(
        absl::StrCat(where, "not a tidemark checkpoint manifest (bad magic) (corrupt)"));
  }
  if (bytes.size() < min_size) {
    return absl::DataLossError(absl::StrCat(where, "size ", bytes.size(), ", at least ", min_size,
                                            " expected (truncated)"));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - 4);
  StateReader tail(bytes.substr(bytes.size() - 4));
  const uint32_t stored = tail.GetU32();
  const uint32_t actual = Crc32c(body);
  if (stored != actual) {
    return absl::DataLossError(absl::StrCat(where, "crc32c ", Hex(actual), " != stored ",
                                            Hex(stored), " (corrupt or truncated)"));
  }
  StateReader r(body);
  r.GetRaw(kManifestMagic.size(), "magic");
  const uint32_t version = r.GetU32("format version");
  if (version != kManifestVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, "format version ", version, ", this build reads version ", kManifestVersion));
  }
  Manifest m;
  m.id = r.GetI64("checkpoint id");
  m.metadata = Decode<std::map<std::string, std::string>>(r);
  const uint64_t n = r.GetCount("state file count");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    StateFileInfo f;
    f.name = std::string(r.GetBytes("state file name"));
    f.size = r.GetU64("state file size");
    f.crc32c = r.GetU32("state file crc32c");
    m.files.push_back(std::move(f));
  }
  if (!r.ok()) return absl::DataLossError(absl::StrCat(where, r.error(), " (corrupt)"));
  if (!r.AtEnd()) {
    return absl::DataLossError(
        absl::StrCat(where, r.remaining(), " bytes after the last entry (corrupt)"));
  }
  for (const StateFileInfo& f : m.files) {
    if (absl::Status s = ValidateName(f.name); !s.ok()) {
      return absl::DataLossError(absl::StrCat(where, s.message(), " (corrupt)"));
    }
  }
  return m;
}

absl::Status Prefixed(const absl::Status& s, std::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(ToAbsl(prefix), s.message()));
}

// Reads and verifies the checkpoint in `chk_dir`.  Errors say "<file>: what".
absl::StatusOr<LoadedCheckpoint> LoadDir(const fs::path& chk_dir, std::optional<int64_t> dir_id) {
  std::string manifest_bytes;
  if (absl::Status s = ReadFile(chk_dir / CheckpointStorage::kManifestName, &manifest_bytes);
      !s.ok()) {
    if (absl::IsNotFound(s)) {
      return absl::NotFoundError(
          absl::StrCat(kManifest, ": missing (incomplete: never committed)"));
    }
    return Prefixed(s, absl::StrCat(kManifest, ": "));
  }
  absl::StatusOr<Manifest> m = DecodeManifest(manifest_bytes);
  if (!m.ok()) return m.status();
  if (dir_id.has_value() && m->id != *dir_id) {
    return absl::DataLossError(absl::StrCat(kManifest, ": says checkpoint ", m->id,
                                            ", the directory is ", ToAbsl(kDirPrefix), *dir_id,
                                            " (corrupt or moved)"));
  }
  LoadedCheckpoint out;
  out.id = m->id;
  out.path = chk_dir;
  out.metadata = std::move(m->metadata);
  for (const StateFileInfo& f : m->files) {
    std::string bytes;
    if (absl::Status s = ReadFile(chk_dir / f.name, &bytes); !s.ok()) {
      if (absl::IsNotFound(s)) {
        return absl::NotFoundError(
            absl::StrCat(f.name, ": missing, manifest says ", f.size, " bytes"));
      }
      return Prefixed(s, absl::StrCat(f.name, ": "));
    }
    if (bytes.size() != f.size) {
      return absl::DataLossError(
          absl::StrCat(f.name, ": size ", bytes.size(), ", manifest says ", f.size,
                       bytes.size() < f.size ? " (truncated)" : " (longer than written: corrupt)"));
    }
    const uint32_t crc = Crc32c(bytes);
    if (crc != f.crc32c) {
      return absl::DataLossError(absl::StrCat(f.name, ": crc32c ", Hex(crc), " != manifest ",
                                              Hex(f.crc32c), " (corrupt)"));
    }
    if (!out.states.emplace(f.name, std::move(bytes)).second) {
      return absl::DataLossError(absl::StrCat(kManifest, ": lists ", f.name, " twice (corrupt)"));
    }
  }
  return out;
}

std::string CheckpointLabel(const fs::path& chk_dir, std::optional<int64_t> id) {
  if (id.has_value()) return absl::StrCat("checkpoint ", *id);
  const std::string name = chk_dir.filename().string();
  return absl::StrCat(name.rfind("savepoint-", 0) == 0 ? "savepoint " : "checkpoint ", name);
}

}  // namespace

CheckpointStorage::CheckpointStorage(std::filesystem::path dir, int retain)
    : dir_(std::move(dir)), retain_(std::max(1, retain)) {}

CheckpointStorage CheckpointStorage::ForSavepoint(std::filesystem::path path) {
  CheckpointStorage s(std::move(path), 1);
  s.savepoint_ = true;
  return s;
}

std::filesystem::path CheckpointStorage::CheckpointPath(int64_t id) const {
  if (savepoint_) return dir_;
  return dir_ / absl::StrCat(ToAbsl(kDirPrefix), id);
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteState(int64_t id, std::string_view name,
                                                            std::string_view bytes) const {
  const std::string where = absl::StrCat("checkpoint ", id, ": write state: ");
  if (id < 0) return absl::InvalidArgumentError(absl::StrCat(where, "negative checkpoint id"));
  if (absl::Status s = ValidateName(name); !s.ok()) return Prefixed(s, where);
  const fs::path chk = CheckpointPath(id);
  std::error_code ec;
  fs::create_directories(chk, ec);
  if (ec) return Prefixed(FsErrorStatus("create directory", chk, ec), where);
  const fs::path path = chk / name;
  const fs::path tmp = chk / absl::StrCat(".", ToAbsl(name), ".tmp");
  if (absl::Status s = Inject("write", tmp); !s.ok()) return Prefixed(s, where);
  if (absl::Status s = WriteFileAtomically(tmp, path, bytes); !s.ok()) return Prefixed(s, where);
  return StateFileInfo{std::string(name), bytes.size(), Crc32c(bytes)};
}

absl::Status CheckpointStorage::Commit(int64_t id,
                                       const std::map<std::string, std::string>& metadata,
                                       const std::vector<StateFileInfo>& files) const {
  const std::string where = absl::StrCat("commit checkpoint ", id, ": ");
  if (id < 0) return absl::InvalidArgumentError(absl::StrCat(where, "negative checkpoint id"));
  const fs::path chk = CheckpointPath(id);
  std::error_code ec;
  fs::create_directories(chk, ec);  // a checkpoint of a job without state has no files
  if (ec) return Prefixed(FsErrorStatus("create directory", chk, ec), where);
  if (IsComplete(id)) {
    return absl::AlreadyExistsError(
        absl::StrCat(where, (chk / kManifestName).string(), " exists: already committed"));
  }
  std::set<std::string_view> seen;
  for (const StateFileInfo& f : files) {
    if (absl::Status s = ValidateName(f.name); !s.ok()) return Prefixed(s, where);
    if (!seen.insert(f.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, f.name, " is listed twice"));
    }
    struct stat st;
    const fs::path path = chk / f.name;
    if (::stat(path.c_str(), &st) != 0) {
      return Prefixed(ErrnoError("stat state file", path, errno), where);
    }
    if (static_cast<uint64_t>(st.st_size) != f.size) {
      return absl::FailedPreconditionError(absl::StrCat(where, path.string(), ": ", st.st_size,
                                                        " bytes on disk, ", f.size, " written"));
    }
  }
  // The state files' renames are durable before the manifest's.
  if (absl::Status s = FsyncDir(chk); !s.ok()) return Prefixed(s, where);
  Manifest m{id, metadata, files};
  if (absl::Status s = Inject("write", chk / kManifestName); !s.ok()) return Prefixed(s, where);
  if (absl::Status s = WriteFileAtomically(chk / absl::StrCat(".", kManifest, ".tmp"),
                                           chk / kManifestName, EncodeManifest(m));
      !s.ok()) {
    return Prefixed(s, where);
  }
  if (absl::Status s = FsyncDir(chk); !s.ok()) return Prefixed(s, where);
  if (absl::Status s = FsyncDir(!savepoint_             ? dir_
                                : chk.has_parent_path() ? chk.parent_path()
                                                        : fs::path("."));
      !s.ok()) {
    return Prefixed(s, where);
  }
  if (savepoint_) return absl::OkStatus();  // no retention

  // Retention: the checkpoints with a valid manifest count (a stray or
  // damaged chk-<n> neither counts nor is deleted); directories cut short
  // (no manifest) below `id` go.  Failures are left for the next Commit.
  std::vector<int64_t> complete;
  for (int64_t other : ListCheckpointIds()) {
    if (HasValidManifest(other)) {
      complete.push_back(other);
    } else if (other < id && !IsComplete(other)) {
      fs::remove_all(CheckpointPath(other), ec);
    }
  }
  std::sort(complete.rbegin(), complete.rend());
  for (size_t i = static_cast<size_t>(retain_); i < complete.size(); ++i) {
    fs::remove_all(CheckpointPath(complete[i]), ec);
  }
  return absl::OkStatus();
}

void CheckpointStorage::Abort(int64_t id) const {
  if (id < 0 || IsComplete(id)) return;
  std::error_code ec;
  fs::remove_all(CheckpointPath(id), ec);
}

bool CheckpointStorage::IsComplete(int64_t id) const {
  std::error_code ec;
  return fs::is_regular_file(CheckpointPath(id) / kManifestName, ec);
}

bool CheckpointStorage::HasValidManifest(int64_t id) const {
  std::string bytes;
  if (!ReadFile(CheckpointPath(id) / kManifestName, &bytes).ok()) return false;
  absl::StatusOr<Manifest> m = DecodeManifest(bytes);
  return m.ok() && m->id == id;
}

std::vector<int64_t> CheckpointStorage::ListCommittedIds() const {
  std::vector<int64_t> ids;
  for (int64_t id : ListCheckpointIds())
    if (HasValidManifest(id)) ids.push_back(id);
  return ids;
}

std::vector<std::string> CheckpointStorage::StrayEntries() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kDirPrefix, 0) == 0 && !ParseCheckpointDirName(name)) {
      out.push_back(absl::StrCat("ignored ", it->path().string(),
                                 ": not a checkpoint directory (chk-<number>)"));
    }
  }
  const std::vector<int64_t> committed = ListCommittedIds();
  const int64_t newest = committed.empty() ? -1 : committed.back();
  for (int64_t id : ListCheckpointIds()) {
    if (id <= newest || HasValidManifest(id)) continue;
    out.push_back(absl::StrCat("ignored ", CheckpointPath(id).string(), ": ",
                               IsComplete(id) ? "its manifest does not check out (damaged or stray)"
                                              : "no manifest (cut short, or stray)",
                               "; checkpoint ids go on from ", std::max<int64_t>(1, newest + 1)));
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status CheckpointStorage::CheckWritable() const {
  const std::string where = absl::StrCat("checkpoint directory ", dir_.string(), ": ");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return Prefixed(FsErrorStatus("cannot create", dir_, ec), where);
  if (!fs::is_directory(dir_, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(where, "not a directory"));
  }
  const fs::path probe = dir_ / ".tidemark-write-check";
  const fs::path tmp = dir_ / ".tidemark-write-check.tmp";
  absl::Status s = Inject("write", tmp);
  if (s.ok()) s = WriteFileAtomically(tmp, probe, "tidemark checks that it can write here\n");
  if (s.ok()) s = FsyncDir(dir_);
  fs::remove(probe, ec);
  if (!s.ok()) return Prefixed(s, absl::StrCat(where, "not writable: "));
  return absl::OkStatus();
}

std::vector<int64_t> CheckpointStorage::ListCheckpointIds() const {
  std::vector<int64_t> ids;
  std::error_code ec;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_directory(type_ec)) continue;
    if (auto id = ParseCheckpointDirName(it->path().filename().string())) ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

absl::StatusOr<LoadedCheckpoint> CheckpointStorage::LoadLatest(
    std::vector<std::string>* problems) const {
  std::vector<std::string> found;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) {
    return absl::NotFoundError(
        absl::StrCat("no checkpoint in ", dir_.string(), ": not a directory"));
  }
  std::vector<int64_t> ids = ListCheckpointIds();
  for (auto it = ids.rbegin(); it != ids.rend(); ++it) {
    absl::StatusOr<LoadedCheckpoint> loaded = LoadDir(CheckpointPath(*it), *it);
    if (loaded.ok()) {
      if (problems != nullptr) problems->insert(problems->end(), found.begin(), found.end());
      return loaded;
    }
    found.push_back(absl::StrCat("checkpoint ", *it, ": ", loaded.status().message()));
  }
  if (problems != nullptr) problems->insert(problems->end(), found.begin(), found.end());
  return absl::NotFoundError(absl::StrCat(
      "no complete, valid checkpoint in ", dir_.string(),
      found.empty() ? ": no chk-<n> directories" : absl::StrCat(": ", absl::StrJoin(found, "; "))));
}

absl::StatusOr<LoadedCheckpoint> CheckpointStorage::Load(
    const std::filesystem::path& chk_dir) const {
  const std::optional<int64_t> id = ParseCheckpointDirName(chk_dir.filename().string());
  std::error_code ec;
  if (!fs::is_directory(chk_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(
        CheckpointLabel(chk_dir, id), " (", chk_dir.string(), "): no such checkpoint (",
        fs::exists(chk_dir, ec) ? "not a directory" : "it does not exist",
        "): give a checkpoint directory, DIR/chk-<n>, or \"latest\" with a checkpoint "
        "directory"));
  }
  absl::StatusOr<LoadedCheckpoint> loaded = LoadDir(chk_dir, id);
  if (!loaded.ok()) {
    return Prefixed(loaded.status(),
                    absl::StrCat(CheckpointLabel(chk_dir, id), " (", chk_dir.string(), "): "));
  }
  return loaded;
}

AsyncStateWriter::AsyncStateWriter(const CheckpointStorage* storage)
    : storage_(storage), thread_([this] { Run(); }) {}

AsyncStateWriter::~AsyncStateWriter() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  work_cv_.Signal();
  thread_.join();
}

void AsyncStateWriter::Submit(int64_t id, std::string name, std::string bytes, Done done) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(Job{id, std::move(name), std::move(bytes), std::move(done)});
    ++submitted_;
  }
  work_cv_.Signal();
}

void AsyncStateWriter::Flush() {
  MutexLock lock(&mu_);
  const uint64_t target = submitted_;
  while (completed_ < target) done_cv_.Wait(&mu_);
}

void AsyncStateWriter::Run() {
  while (true) {
    Job job;
    {
      MutexLock lock(&mu_);
      while (!stop_ && queue_.empty()) work_cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stop_, and everything written
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    absl::StatusOr<StateFileInfo> result = storage_->WriteState(job.id, job.name, job.bytes);
    if (job.done) job.done(std::move(result));
    {
      MutexLock lock(&mu_);
      ++completed_;
    }
    done_cv_.SignalAll();
  }
}

}  // namespace tidemark::internal
