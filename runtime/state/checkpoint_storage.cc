// runtime/state/checkpoint_storage.cc: the file layout, the manifest format and the
// verification of checkpoints; see checkpoint_storage.h.
#include "tidemark/runtime/state/checkpoint_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tidemark/runtime/state/kv_store.h"
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

// Direct I/O (O_DIRECT) for large state files (issue 26 item 1): the bytes
// go from a staging buffer of the writing thread to the disk, not through
// the page cache.  A checkpoint of 100 MB written through the page cache
// makes the kernel allocate and copy into 100 MB of fresh page-cache pages
// every checkpoint, which W4 measured at about 290 ms of CPU per checkpoint
// on a VM whose page allocations are slow (RESULTS.md); through the staging
// buffer it is one copy into memory that stays warm, and the file is synced
// anyway.  Files under kDirectMin bytes are written as before.  Where the file
// system refuses O_DIRECT (tmpfs; EINVAL at open or at the first write), the
// file is written through the page cache: the bytes are the same.
constexpr size_t kDirectMin = size_t{4} << 20;
constexpr size_t kDirectAlign = 4096;  // covers 512-byte and 4 KiB logical blocks
constexpr size_t kDirectStage = size_t{1} << 20;

// Tests: refuse direct writes (EINVAL) after this many on each file; -1 never.
std::atomic<int> refuse_direct_after{-1};

// The writing thread's staging buffer, aligned for O_DIRECT; made once per
// thread (the checkpoint coordinator's, the asynchronous writer's).
char* DirectStage() {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> stage(
      static_cast<char*>(std::aligned_alloc(kDirectAlign, kDirectStage)));
  return stage.get();
}

// write(2) of all `n` bytes, retrying short writes and EINTR; errno on -1.
ssize_t WriteAll(int fd, const char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t k = ::write(fd, p + done, n - done);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    done += static_cast<size_t>(k);
  }
  return static_cast<ssize_t>(done);
}

// `pieces` through the staging buffer, with O_DIRECT while `*direct`: every
// write but the last is a whole buffer; the last is padded with zeros to the
// alignment and the file cut back to its size.  Should the file system
// refuse a direct write (EINVAL), O_DIRECT is cleared on `fd` and the rest
// goes through the page cache from where the direct writes ended.  errno on
// failure.
bool WriteThroughStage(int fd, const std::vector<std::string_view>& pieces, uint32_t* crc,
                       bool* direct) {
  char* const stage = DirectStage();
  if (stage == nullptr) {
    errno = ENOMEM;
    return false;
  }
  uint32_t c = 0;
  size_t filled = 0;
  off_t offset = 0;  // the bytes written so far
  int direct_writes = 0;
  const int refuse_after = refuse_direct_after.load(std::memory_order_relaxed);
  auto flush = [&](bool last) {
    if (crc != nullptr) c = Crc32c(stage, filled, c);
    if (*direct) {
      size_t n = filled;
      if (last && n % kDirectAlign != 0) {
        const size_t padded = (n + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
        std::memset(stage + n, 0, padded - n);
        n = padded;
      }
      if (refuse_after >= 0 && direct_writes >= refuse_after) {
        errno = EINVAL;  // tests: as a file system without O_DIRECT
      } else if (WriteAll(fd, stage, n) >= 0) {
        ++direct_writes;
        offset += static_cast<off_t>(filled);
        filled = 0;
        return true;
      }
      if (errno != EINVAL) return false;
      // Not supported here after all: the page cache from now on.
      const int flags = ::fcntl(fd, F_GETFL);
      if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) return false;
      if (::lseek(fd, offset, SEEK_SET) != offset) return false;
      *direct = false;
    }
    if (WriteAll(fd, stage, filled) < 0) return false;
    offset += static_cast<off_t>(filled);
    filled = 0;
    return true;
  };
  for (std::string_view bytes : pieces) {
    while (!bytes.empty()) {
      const size_t k = std::min(kDirectStage - filled, bytes.size());
      std::memcpy(stage + filled, bytes.data(), k);
      filled += k;
      bytes.remove_prefix(k);
      if (filled == kDirectStage && !flush(/*last=*/false)) return false;
    }
  }
  if (filled > 0 && !flush(/*last=*/true)) return false;
  // The padding of the last direct write (or anything past a fallback) goes.
  if (::ftruncate(fd, offset) != 0) return false;
  if (crc != nullptr) *crc = c;
  return true;
}

// Writes `bytes` to `tmp`, fsyncs it and renames it to `path`: afterwards
// `path` holds all of `bytes` or (after a crash) is as it was.  The rename is
// durable once the directory is fsynced.
//
// The bytes are `pieces` one after the other.  With `crc`, their CRC-32C is
// computed on the way, a slice at a time just before the slice is written,
// so the bytes are read from memory once.  Files of kDirectMin bytes or more
// are written with O_DIRECT (above).
absl::Status WriteFileAtomically(const fs::path& tmp, const fs::path& path,
                                 const std::vector<std::string_view>& pieces,
                                 uint32_t* crc = nullptr) {
  size_t total = 0;
  for (std::string_view p : pieces) total += p.size();
  bool direct = total >= kDirectMin;
  constexpr int kFlags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  int raw = ::open(tmp.c_str(), kFlags | (direct ? O_DIRECT : 0), 0644);
  if (raw < 0 && direct && errno == EINVAL) {
    direct = false;  // a file system without O_DIRECT (tmpfs)
    raw = ::open(tmp.c_str(), kFlags, 0644);
  }
  Fd fd(raw);
  if (fd.get() < 0) return ErrnoError("create", tmp, errno);
  if (direct) {
    if (!WriteThroughStage(fd.get(), pieces, crc, &direct)) {
      const int err = errno;
      ::unlink(tmp.c_str());
      return ErrnoError("write", tmp, err);
    }
  } else {
    constexpr size_t kSlice = size_t{256} << 10;  // stays in the core's cache
    uint32_t c = 0;
    for (std::string_view bytes : pieces) {
      size_t done = 0;
      while (done < bytes.size()) {
        const size_t slice = std::min(kSlice, bytes.size() - done);
        if (crc != nullptr) c = Crc32c(bytes.data() + done, slice, c);
        if (WriteAll(fd.get(), bytes.data() + done, slice) < 0) {
          const int err = errno;
          ::unlink(tmp.c_str());
          return ErrnoError("write", tmp, err);
        }
        done += slice;
      }
    }
    if (crc != nullptr) *crc = c;
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

absl::Status WriteFileAtomically(const fs::path& tmp, const fs::path& path,
                                 std::string_view bytes) {
  return WriteFileAtomically(tmp, path, std::vector<std::string_view>{bytes});
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

// The CRC-32C of the file at `path`, read 256 KiB at a time.
absl::StatusOr<uint32_t> FileCrc32c(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return ErrnoError("open", path, errno);
  std::vector<char> buf(size_t{1} << 18);
  uint32_t crc = 0;
  while (true) {
    const ssize_t n = ::read(fd.get(), buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("read", path, errno);
    }
    if (n == 0) break;
    crc = Crc32c(buf.data(), static_cast<size_t>(n), crc);
  }
  return crc;
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

// --- incremental checkpoints: chunks, hashes, reference files ---

constexpr std::string_view kRefMagic = "TMINCREF";
constexpr uint32_t kRefVersion = 1;
// With whole shared files the state refers to besides its chunks (a state
// backend's own files, e.g. RocksDB's SST files): counted by retention and
// checked by a load, not part of the state's bytes.
constexpr uint32_t kRefVersionFiles = 2;
// As 2, with each whole file's CRC-32C (computed when it was uploaded), so
// that a load finds a corrupt one and `latest` passes over the checkpoint.
constexpr uint32_t kRefVersionFilesCrc = 3;
// Chunk sizes: at least 1 KiB, about 4 KiB past that on average, at most
// 16 KiB (a cut where the rolling hash's top 12 bits are 0).
constexpr size_t kMinChunk = 1024;
constexpr size_t kMaxChunk = 16384;
constexpr uint64_t kCutMask = ~uint64_t{0} << (64 - 12);

uint64_t SplitMix(uint64_t& x) {
  x += 0x9E3779B97F4A7C15ULL;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The gear table of the rolling hash (FastCDC's): fixed, so cuts are the
// same in every run.
const std::array<uint64_t, 256>& GearTable() {
  static const std::array<uint64_t, 256> table = [] {
    std::array<uint64_t, 256> t{};
    uint64_t x = 0x7469646D61726B31ULL;  // "tidmark1"
    for (uint64_t& v : t) v = SplitMix(x);
    return t;
  }();
  return table;
}

uint64_t Fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  h ^= h >> 33;
  return h;
}

// Two independent 64-bit hashes of a chunk (with its CRC-32C and size, the
// identity under which a later checkpoint reuses it).
std::pair<uint64_t, uint64_t> ChunkHash(std::string_view b) {
  uint64_t a = 0x243F6A8885A308D3ULL ^ b.size();
  uint64_t c = 0x13198A2E03707344ULL ^ (b.size() * 0x9E3779B97F4A7C15ULL);
  size_t i = 0;
  for (; i + 8 <= b.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, b.data() + i, 8);
    a = Fmix(a ^ w) + 0x9E3779B97F4A7C15ULL;
    c = ((c ^ (w * 0x87C37B91114253D5ULL)) << 31 | (c ^ (w * 0x87C37B91114253D5ULL)) >> 33) *
            0x4CF5AD432745937FULL +
        0x52DCE729ULL;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, b.data() + i, b.size() - i);
  a = Fmix(a ^ tail ^ (uint64_t{b.size() - i} << 56));
  c = Fmix(c ^ Fmix(tail + 0x38495AB5ULL));
  return {a, c};
}

struct ChunkKey {
  uint64_t hash1;
  uint64_t hash2;
  uint64_t size;
  uint32_t crc32c;
  friend bool operator==(const ChunkKey&, const ChunkKey&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const ChunkKey& k) {
    return H::combine(std::move(h), k.hash1, k.hash2, k.size, k.crc32c);
  }
};
ChunkKey KeyOf(const SharedChunkRef& r) { return ChunkKey{r.hash1, r.hash2, r.size, r.crc32c}; }
bool Indexable(const SharedChunkRef& r) { return r.hash1 != 0 || r.hash2 != 0; }

// A reference file: the magic, a version, the size and CRC-32C of the whole
// state it stands for, the shared files' names, then per chunk (in order) the
// file's index, offset, size, CRC-32C and content hashes.
std::string EncodeRefs(const std::vector<SharedChunkRef>& refs,
                       const std::vector<SharedChunkRef>& files_referred = {}) {
  uint64_t total = 0;
  std::vector<std::string_view> files;
  std::map<std::string_view, uint64_t> index;
  for (const SharedChunkRef& r : refs) {
    total += r.size;
    if (index.emplace(r.file, files.size()).second) files.push_back(r.file);
  }
  StateWriter w;
  w.PutRaw(kRefMagic.data(), kRefMagic.size());
  w.PutU32(files_referred.empty() ? kRefVersion : kRefVersionFilesCrc);
  w.PutU64(total);
  w.PutVarint(files.size());
  for (std::string_view f : files) w.PutBytes(f);
  w.PutVarint(refs.size());
  for (const SharedChunkRef& r : refs) {
    w.PutVarint(index[r.file]);
    w.PutVarint(r.offset);
    w.PutVarint(r.size);
    w.PutU32(r.crc32c);
    w.PutU64(r.hash1);
    w.PutU64(r.hash2);
  }
  if (!files_referred.empty()) {
    w.PutVarint(files_referred.size());
    for (const SharedChunkRef& f : files_referred) {
      w.PutBytes(f.file);
      w.PutVarint(f.size);
      w.PutU32(f.crc32c);
    }
  }
  return w.Release();
}

// The errors say what is wrong (the caller names the file).  With
// `referred_crcs`, whether the whole files referred to carry their CRC-32C
// (format 3; format 2 has none).
absl::StatusOr<std::vector<SharedChunkRef>> DecodeRefs(
    std::string_view bytes, uint64_t* total_size,
    std::vector<SharedChunkRef>* files_referred = nullptr, bool* referred_crcs = nullptr) {
  if (bytes.substr(0, kRefMagic.size()) != kRefMagic) {
    return absl::DataLossError("not a reference file of an incremental checkpoint (bad magic)");
  }
  StateReader r(bytes);
  r.GetRaw(kRefMagic.size(), "magic");
  const uint32_t version = r.GetU32("format version");
  if (r.ok() && version != kRefVersion && version != kRefVersionFiles &&
      version != kRefVersionFilesCrc) {
    return absl::FailedPreconditionError(absl::StrCat("reference file format version ", version,
                                                      ", this build reads versions ", kRefVersion,
                                                      " to ", kRefVersionFilesCrc));
  }
  if (referred_crcs != nullptr) *referred_crcs = version == kRefVersionFilesCrc;
  *total_size = r.GetU64("state size");
  const uint64_t nfiles = r.GetCount("shared file count");
  std::vector<std::string> files;
  for (uint64_t i = 0; i < nfiles && r.ok(); ++i) {
    files.emplace_back(r.GetBytes("shared file name"));
    if (absl::Status s = ValidateName(files.back()); r.ok() && !s.ok()) {
      return absl::DataLossError(absl::StrCat("shared file: ", s.message()));
    }
  }
  const uint64_t n = r.GetCount("chunk count");
  std::vector<SharedChunkRef> refs;
  uint64_t sum = 0;
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    SharedChunkRef c;
    const uint64_t f = r.GetVarint("chunk file");
    c.offset = r.GetVarint("chunk offset");
    c.size = r.GetVarint("chunk size");
    c.crc32c = r.GetU32("chunk crc32c");
    c.hash1 = r.GetU64("chunk hash");
    c.hash2 = r.GetU64("chunk hash");
    if (!r.ok()) break;
    if (f >= files.size()) {
      return absl::DataLossError(
          absl::StrCat("chunk ", i, " names shared file ", f, " of ", files.size(), " (corrupt)"));
    }
    c.file = files[f];
    sum += c.size;
    refs.push_back(std::move(c));
  }
  if (version == kRefVersionFiles || version == kRefVersionFilesCrc) {
    const uint64_t nref = r.GetCount("referred file count");
    for (uint64_t i = 0; i < nref && r.ok(); ++i) {
      SharedChunkRef f;
      f.file = std::string(r.GetBytes("referred file name"));
      f.size = r.GetVarint("referred file size");
      if (version == kRefVersionFilesCrc) f.crc32c = r.GetU32("referred file crc32c");
      if (!r.ok()) break;
      if (absl::Status s = ValidateName(f.file); !s.ok()) {
        return absl::DataLossError(absl::StrCat("referred shared file: ", s.message()));
      }
      if (files_referred != nullptr) files_referred->push_back(std::move(f));
    }
  }
  if (!r.ok()) return absl::DataLossError(absl::StrCat(r.error(), " (corrupt)"));
  if (!r.AtEnd()) return absl::DataLossError("bytes after the last chunk (corrupt)");
  if (sum != *total_size) {
    return absl::DataLossError(absl::StrCat("chunks add up to ", sum, " bytes, the file says ",
                                            *total_size, " (corrupt)"));
  }
  return refs;
}

// "<id>-<rest>" (a shared file's name) -> id.
std::optional<int64_t> SharedFileId(std::string_view name) {
  const size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 18) return std::nullopt;
  int64_t id = 0;
  for (char ch : name.substr(0, dash)) {
    if (ch < '0' || ch > '9') return std::nullopt;
    id = id * 10 + (ch - '0');
  }
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
  auto inc = out.metadata.find(std::string(CheckpointStorage::kIncrementalKey));
  if (inc != out.metadata.end() && inc->second == "1") {
    // Follow the references into the shared directory beside the checkpoint.
    const fs::path shared = chk_dir.parent_path() / CheckpointStorage::kSharedDirName;
    std::map<std::string, std::string> files;  // read once per load
    std::set<std::string> files_checked;       // whole files, checked once per load
    for (auto& [name, ref_bytes] : out.states) {
      uint64_t total = 0;
      std::vector<SharedChunkRef> referred;
      bool referred_crcs = false;
      absl::StatusOr<std::vector<SharedChunkRef>> refs =
          DecodeRefs(ref_bytes, &total, &referred, &referred_crcs);
      if (!refs.ok()) return Prefixed(refs.status(), absl::StrCat(name, ": "));
      for (const SharedChunkRef& f : referred) {
        // A state backend's own file (read by that backend on restore):
        // there, with its size and (format 3) its CRC-32C.
        if (files_checked.contains(f.file)) continue;
        std::error_code ec;
        const uint64_t size = fs::file_size(shared / f.file, ec);
        if (ec) {
          return absl::NotFoundError(absl::StrCat(
              name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", f.file, ": ",
              ec == std::errc::no_such_file_or_directory
                  ? std::string("missing (a shared file this incremental checkpoint refers to)")
                  : ec.message()));
        }
        if (size != f.size) {
          return absl::DataLossError(absl::StrCat(
              name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", f.file, ": size ", size,
              ", the reference says ", f.size, size < f.size ? " (truncated)" : " (corrupt)"));
        }
        if (referred_crcs) {
          absl::StatusOr<uint32_t> crc = FileCrc32c(shared / f.file);
          if (!crc.ok()) return Prefixed(crc.status(), absl::StrCat(name, ": "));
          if (*crc != f.crc32c) {
            return absl::DataLossError(absl::StrCat(
                name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", f.file, ": crc32c ",
                Hex(*crc), ", the reference says ", Hex(f.crc32c), " (corrupt)"));
          }
        }
        files_checked.insert(f.file);
      }
      std::string bytes;
      bytes.reserve(total);
      for (const SharedChunkRef& c : *refs) {
        auto it = files.find(c.file);
        if (it == files.end()) {
          std::string content;
          const fs::path path = shared / c.file;
          if (absl::Status s = ReadFile(path, &content); !s.ok()) {
            if (absl::IsNotFound(s)) {
              return absl::NotFoundError(
                  absl::StrCat(name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", c.file,
                               ": missing (a shared file this incremental checkpoint refers to)"));
            }
            return Prefixed(s, absl::StrCat(name, ": "));
          }
          it = files.emplace(c.file, std::move(content)).first;
        }
        const std::string& content = it->second;
        if (c.offset > content.size() || c.size > content.size() - c.offset) {
          return absl::DataLossError(absl::StrCat(
              name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", c.file, ": size ",
              content.size(), ", a chunk ends at ", c.offset + c.size, " (truncated)"));
        }
        const std::string_view chunk = std::string_view(content).substr(c.offset, c.size);
        if (const uint32_t crc = Crc32c(chunk); crc != c.crc32c) {
          return absl::DataLossError(
              absl::StrCat(name, ": ", ToAbsl(CheckpointStorage::kSharedDirName), "/", c.file,
                           ": crc32c of the chunk at ", c.offset, " is ", Hex(crc),
                           ", the reference says ", Hex(c.crc32c), " (corrupt)"));
        }
        bytes.append(chunk);
      }
      ref_bytes = std::move(bytes);
    }
  }
  return out;
}

// The manifest of `chk_dir`, decoded (state files not read).
absl::StatusOr<Manifest> ReadManifest(const fs::path& chk_dir) {
  std::string bytes;
  if (absl::Status s = ReadFile(chk_dir / CheckpointStorage::kManifestName, &bytes); !s.ok()) {
    return s;
  }
  return DecodeManifest(bytes);
}

bool IsIncremental(const Manifest& m) {
  auto it = m.metadata.find(std::string(CheckpointStorage::kIncrementalKey));
  return it != m.metadata.end() && it->second == "1";
}

std::string CheckpointLabel(const fs::path& chk_dir, std::optional<int64_t> id) {
  if (id.has_value()) return absl::StrCat("checkpoint ", *id);
  const std::string name = chk_dir.filename().string();
  return absl::StrCat(name.rfind("savepoint-", 0) == 0 ? "savepoint " : "checkpoint ", name);
}

// A subtask's SharedFileSink for one checkpoint of an incremental storage.
class StorageSharedFileSink final : public SharedFileSink {
 public:
  StorageSharedFileSink(const CheckpointStorage* storage, int64_t id)
      : storage_(storage), id_(id) {}
  int64_t checkpoint_id() const override { return id_; }
  std::string shared_dir() const override {
    return std::filesystem::absolute(storage_->SharedDir()).string();
  }
  std::string Upload(const std::string& local, std::string_view name) override {
    absl::StatusOr<SharedChunkRef> r = storage_->WriteSharedFileFrom(id_, name, local);
    if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
    MutexLock lock(&mu_);
    files_.emplace_back(r->file, r->size);
    uploaded_ += r->size;
    return r->file;
  }
  bool Reuse(std::string_view shared, uint64_t size) override {
    if (!storage_->ReuseSharedFile(id_, shared, size)) return false;
    MutexLock lock(&mu_);
    files_.emplace_back(std::string(shared), size);
    return true;
  }
  std::vector<std::pair<std::string, uint64_t>> Files() const override {
    MutexLock lock(&mu_);
    return files_;
  }
  uint64_t uploaded_bytes() const override {
    MutexLock lock(&mu_);
    return uploaded_;
  }

 private:
  const CheckpointStorage* storage_;
  const int64_t id_;
  mutable Mutex mu_;
  std::vector<std::pair<std::string, uint64_t>> files_ ABSL_GUARDED_BY(mu_);
  uint64_t uploaded_ ABSL_GUARDED_BY(mu_) = 0;
};
}  // namespace

// The incremental mode's memory: which chunks the retained checkpoints hold
// (so a new checkpoint refers to them instead of writing them again), and
// what the checkpoints being written refer to.
struct CheckpointStorage::ChunkIndex {
  Mutex mu;
  bool loaded ABSL_GUARDED_BY(mu) = false;
  absl::flat_hash_map<ChunkKey, SharedChunkRef> committed ABSL_GUARDED_BY(mu);
  // By checkpoint id, not committed yet: the chunks they wrote, and every
  // shared file they refer to (never deleted while they are pending).
  std::map<int64_t, absl::flat_hash_map<ChunkKey, SharedChunkRef>> pending ABSL_GUARDED_BY(mu);
  std::map<int64_t, std::set<std::string>> pending_files ABSL_GUARDED_BY(mu);
  // Whole shared files (a state backend's own) -> their size and CRC-32C,
  // from their upload or the retained checkpoints' references: a file is
  // referred to again only with the CRC it had when it was written.
  absl::flat_hash_map<std::string, std::pair<uint64_t, uint32_t>> whole_files ABSL_GUARDED_BY(mu);
  // The highest id committed or aborted: a write for it or an earlier id
  // comes from a task that finished after its checkpoint was aborted (timed
  // out, failed elsewhere), and is not pending: its files go at the next
  // retention instead of being kept for good.
  int64_t closed_through ABSL_GUARDED_BY(mu) = -1;
  bool Closed(int64_t id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return id <= closed_through; }
  void AddPendingFile(int64_t id, std::string file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (!Closed(id)) pending_files[id].insert(std::move(file));
  }
};

CheckpointStorage::CheckpointStorage(std::filesystem::path dir, int retain)
    : dir_(std::move(dir)), retain_(std::max(1, retain)), chunks_(std::make_unique<ChunkIndex>()) {}
CheckpointStorage::CheckpointStorage(CheckpointStorage&&) noexcept = default;
CheckpointStorage& CheckpointStorage::operator=(CheckpointStorage&&) noexcept = default;
CheckpointStorage::~CheckpointStorage() = default;

std::filesystem::path CheckpointStorage::SharedDir() const { return dir_ / kSharedDirName; }

std::vector<size_t> ContentDefinedCuts(std::string_view bytes) {
  const std::array<uint64_t, 256>& gear = GearTable();
  std::vector<size_t> cuts;
  size_t start = 0;
  const size_t n = bytes.size();
  while (start < n) {
    size_t end = std::min(n, start + kMaxChunk);
    if (n - start > kMinChunk) {
      uint64_t h = 0;
      for (size_t i = start + kMinChunk - 64; i < end; ++i) {
        h = (h << 1) + gear[static_cast<unsigned char>(bytes[i])];
        if (i >= start + kMinChunk && (h & kCutMask) == 0) {
          end = i + 1;
          break;
        }
      }
    } else {
      end = n;
    }
    cuts.push_back(end);
    start = end;
  }
  return cuts;
}

namespace {

// Where WriteSharedFile and WriteSharedFileFrom write file `name` of
// checkpoint `id`: the file's name in the shared directory (created here),
// its path and the temporary path it is written to first.
struct SharedTarget {
  std::string file;
  fs::path path;
  fs::path tmp;
};

absl::StatusOr<SharedTarget> PrepareSharedTarget(const fs::path& shared, int64_t id,
                                                 std::string_view name, const std::string& where) {
  if (id < 0) return absl::InvalidArgumentError(absl::StrCat(where, "negative checkpoint id"));
  if (absl::Status s = ValidateName(name); !s.ok()) return Prefixed(s, where);
  std::error_code ec;
  fs::create_directories(shared, ec);
  if (ec) return Prefixed(FsErrorStatus("create directory", shared, ec), where);
  SharedTarget t;
  t.file = absl::StrCat(id, "-", ToAbsl(name));
  t.path = shared / t.file;
  t.tmp = shared / absl::StrCat(".", t.file, ".tmp");
  return t;
}

}  // namespace

absl::StatusOr<SharedChunkRef> CheckpointStorage::WriteSharedFile(int64_t id, std::string_view name,
                                                                  std::string_view bytes) const {
  const std::string where = absl::StrCat("checkpoint ", id, ": write shared file: ");
  absl::StatusOr<SharedTarget> target = PrepareSharedTarget(SharedDir(), id, name, where);
  if (!target.ok()) return target.status();
  const std::string& file = target->file;
  const fs::path& tmp = target->tmp;
  if (absl::Status s = Inject("write", tmp); !s.ok()) return Prefixed(s, where);
  if (absl::Status s = WriteFileAtomically(tmp, target->path, bytes); !s.ok()) {
    return Prefixed(s, where);
  }
  {
    MutexLock lock(&chunks_->mu);
    chunks_->AddPendingFile(id, file);
  }
  return SharedChunkRef{file, 0, bytes.size(), Crc32c(bytes)};
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteStateRefs(
    int64_t id, std::string_view name, const std::vector<SharedChunkRef>& refs,
    const std::vector<SharedChunkRef>& files_referred) const {
  std::vector<SharedChunkRef> whole = files_referred;
  {
    MutexLock lock(&chunks_->mu);
    for (const SharedChunkRef& r : refs) chunks_->AddPendingFile(id, r.file);
    for (SharedChunkRef& r : whole) {
      chunks_->AddPendingFile(id, r.file);
      // Written or reused through this storage (WriteSharedFileFrom,
      // ReuseSharedFile), which know its CRC.
      auto it = chunks_->whole_files.find(r.file);
      if (it == chunks_->whole_files.end() || it->second.first != r.size) {
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint ", id, ": write state: ", ToAbsl(name), " refers to shared file ", r.file,
            " of ", r.size, " bytes, which this storage has not written or reused"));
      }
      r.crc32c = it->second.second;
    }
  }
  const std::string encoded = EncodeRefs(refs, whole);
  absl::StatusOr<StateFileInfo> info = WriteStateFile(id, name, {encoded});
  if (!info.ok()) return info;
  info->full_size = 0;
  for (const SharedChunkRef& r : refs) info->full_size += r.size;
  return info;
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteIncremental(
    int64_t id, std::string_view name, std::string_view bytes,
    const std::vector<SharedChunkRef>& files_referred) const {
  if (id < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint ", id, ": write state: negative checkpoint id"));
  }
  if (absl::Status s = ValidateName(name); !s.ok()) {
    return Prefixed(s, absl::StrCat("checkpoint ", id, ": write state: "));
  }
  LoadIndex();
  const std::string file = absl::StrCat(id, "-", ToAbsl(name));
  std::vector<SharedChunkRef> refs;
  std::vector<SharedChunkRef> fresh;  // this call's new chunks
  std::string new_bytes;
  {
    absl::flat_hash_map<ChunkKey, size_t> mine;  // new chunks repeated in this state
    MutexLock lock(&chunks_->mu);
    auto& pending = chunks_->pending[id];
    size_t from = 0;
    for (size_t to : ContentDefinedCuts(bytes)) {
      const std::string_view chunk = bytes.substr(from, to - from);
      from = to;
      const auto [h1, h2] = ChunkHash(chunk);
      const ChunkKey key{h1, h2, chunk.size(), Crc32c(chunk)};
      if (auto it = chunks_->committed.find(key); it != chunks_->committed.end()) {
        refs.push_back(it->second);
      } else if (auto p = pending.find(key); p != pending.end()) {
        refs.push_back(p->second);
      } else if (auto m = mine.find(key); m != mine.end()) {
        refs.push_back(fresh[m->second]);
      } else {
        SharedChunkRef r{file, new_bytes.size(), chunk.size(), key.crc32c, h1, h2};
        mine.emplace(key, fresh.size());
        fresh.push_back(r);
        refs.push_back(std::move(r));
        new_bytes.append(chunk);
      }
    }
  }
  if (!new_bytes.empty()) {
    absl::StatusOr<SharedChunkRef> written = WriteSharedFile(id, name, new_bytes);
    if (!written.ok()) return written.status();
  }
  {
    MutexLock lock(&chunks_->mu);
    if (chunks_->Closed(id)) {
      chunks_->pending.erase(id);  // aborted meanwhile
    } else {
      auto& pending = chunks_->pending[id];
      for (const SharedChunkRef& r : fresh) pending.emplace(KeyOf(r), r);
    }
  }
  absl::StatusOr<StateFileInfo> info = WriteStateRefs(id, name, refs, files_referred);
  if (info.ok()) info->shared_bytes = new_bytes.size();
  return info;
}

void CheckpointStorage::LoadIndex() const {
  {
    MutexLock lock(&chunks_->mu);
    if (chunks_->loaded) return;
  }
  // The chunks of the retained checkpoints, from their reference files; a
  // file that cannot be read only means its chunks are written again.
  absl::flat_hash_map<ChunkKey, SharedChunkRef> committed;
  absl::flat_hash_map<std::string, std::pair<uint64_t, uint32_t>> whole_files;
  for (int64_t id : ListCommittedIds()) {
    const fs::path chk = CheckpointPath(id);
    absl::StatusOr<Manifest> m = ReadManifest(chk);
    if (!m.ok() || !IsIncremental(*m)) continue;
    for (const StateFileInfo& f : m->files) {
      std::string bytes;
      uint64_t total = 0;
      if (!ReadFile(chk / f.name, &bytes).ok() || bytes.size() != f.size ||
          Crc32c(bytes) != f.crc32c) {
        continue;
      }
      std::vector<SharedChunkRef> referred;
      bool referred_crcs = false;
      absl::StatusOr<std::vector<SharedChunkRef>> refs =
          DecodeRefs(bytes, &total, &referred, &referred_crcs);
      if (!refs.ok()) continue;
      for (SharedChunkRef& r : *refs) {
        std::error_code ec;
        if (Indexable(r) && fs::is_regular_file(SharedDir() / r.file, ec)) {
          committed.emplace(KeyOf(r), std::move(r));
        }
      }
      // Files of format 2 have no CRC: they are not reused (uploaded again).
      if (referred_crcs) {
        for (SharedChunkRef& r : referred) whole_files.emplace(r.file, std::pair{r.size, r.crc32c});
      }
    }
  }
  MutexLock lock(&chunks_->mu);
  if (chunks_->loaded) return;
  chunks_->committed = std::move(committed);
  // Uploads of this storage object come first (none before the first load).
  for (auto& [file, sc] : whole_files) chunks_->whole_files.emplace(file, sc);
  chunks_->loaded = true;
}

absl::StatusOr<std::map<std::string, int>> CheckpointStorage::SharedFileReferences() const {
  std::map<std::string, int> out;
  for (int64_t id : ListCommittedIds()) {
    const fs::path chk = CheckpointPath(id);
    absl::StatusOr<Manifest> m = ReadManifest(chk);
    if (!m.ok()) return Prefixed(m.status(), absl::StrCat("checkpoint ", id, ": "));
    if (!IsIncremental(*m)) continue;
    for (const StateFileInfo& f : m->files) {
      std::string bytes;
      uint64_t total = 0;
      if (absl::Status s = ReadFile(chk / f.name, &bytes); !s.ok()) {
        return Prefixed(s, absl::StrCat("checkpoint ", id, ": ", f.name, ": "));
      }
      std::vector<SharedChunkRef> referred;
      absl::StatusOr<std::vector<SharedChunkRef>> refs = DecodeRefs(bytes, &total, &referred);
      if (!refs.ok()) {
        return Prefixed(refs.status(), absl::StrCat("checkpoint ", id, ": ", f.name, ": "));
      }
      std::set<std::string_view> files;
      for (const SharedChunkRef& r : *refs) files.insert(r.file);
      for (const SharedChunkRef& r : referred) files.insert(r.file);
      for (std::string_view file : files) ++out[std::string(file)];
    }
  }
  return out;
}

void CheckpointStorage::CollectShared(int64_t id) const {
  {
    MutexLock lock(&chunks_->mu);
    auto p = chunks_->pending.find(id);
    if (p != chunks_->pending.end()) {
      for (auto& [key, ref] : p->second) chunks_->committed.emplace(key, std::move(ref));
      chunks_->pending.erase(p);
    }
    chunks_->pending_files.erase(id);
    chunks_->closed_through = std::max(chunks_->closed_through, id);
  }
  const fs::path shared = SharedDir();
  std::error_code ec;
  if (!fs::is_directory(shared, ec)) return;
  absl::StatusOr<std::map<std::string, int>> refs = SharedFileReferences();
  if (!refs.ok()) return;  // keep everything: a reference may be unreadable for now
  MutexLock lock(&chunks_->mu);
  std::set<std::string> keep;
  for (const auto& [pid, files] : chunks_->pending_files) keep.insert(files.begin(), files.end());
  std::vector<fs::path> entries;
  for (fs::directory_iterator it(shared, ec), end; !ec && it != end; it.increment(ec)) {
    entries.push_back(it->path());
  }
  for (const fs::path& path : entries) {
    const std::string name = path.filename().string();
    if (refs->contains(name) || keep.contains(name)) continue;
    // A temp file or a file of a checkpoint above `id` may still be written.
    std::string_view base = name;
    if (!base.empty() && base.front() == '.') base.remove_prefix(1);
    const std::optional<int64_t> file_id = SharedFileId(base);
    if (!file_id.has_value() || *file_id > id) continue;
    std::error_code rm;
    fs::remove(path, rm);
  }
  for (auto it = chunks_->committed.begin(); it != chunks_->committed.end();) {
    if (refs->contains(it->second.file)) {
      ++it;
    } else {
      chunks_->committed.erase(it++);
    }
  }
  absl::erase_if(chunks_->whole_files, [&](const auto& entry) {
    return !refs->contains(entry.first) && !keep.contains(entry.first);
  });
}

CheckpointStorage CheckpointStorage::ForSavepoint(std::filesystem::path path) {
  CheckpointStorage s(std::move(path), 1);
  s.savepoint_ = true;
  return s;
}

std::filesystem::path CheckpointStorage::CheckpointPath(int64_t id) const {
  if (savepoint_) return dir_;
  return dir_ / absl::StrCat(ToAbsl(kDirPrefix), id);
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteState(
    int64_t id, std::string_view name, std::string_view bytes,
    const std::vector<SharedChunkRef>& files_referred) const {
  if (incremental_) return WriteIncremental(id, name, bytes, files_referred);
  if (!files_referred.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", id, ": write state: ", ToAbsl(name),
                     " refers to shared files, but the storage is not incremental"));
  }
  return WriteStateFile(id, name, std::vector<std::string_view>{bytes});
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteState(
    int64_t id, std::string_view name, const std::vector<std::string_view>& pieces,
    const std::vector<SharedChunkRef>& files_referred) const {
  if (incremental_ || !files_referred.empty()) {
    std::string bytes;
    size_t size = 0;
    for (std::string_view p : pieces) size += p.size();
    bytes.reserve(size);
    for (std::string_view p : pieces) bytes.append(p);
    return WriteState(id, name, std::string_view(bytes), files_referred);
  }
  return WriteStateFile(id, name, pieces);
}

absl::StatusOr<SharedChunkRef> CheckpointStorage::WriteSharedFileFrom(
    int64_t id, std::string_view name, const std::filesystem::path& local) const {
  const std::string where = absl::StrCat("checkpoint ", id, ": write shared file: ");
  absl::StatusOr<SharedTarget> target = PrepareSharedTarget(SharedDir(), id, name, where);
  if (!target.ok()) return target.status();
  const std::string& file = target->file;
  const fs::path& tmp = target->tmp;
  const fs::path& path = target->path;
  std::error_code ec;
  if (absl::Status s = Inject("write", tmp); !s.ok()) return Prefixed(s, where);
  fs::remove(tmp, ec);
  ec.clear();
  // A hard link where the file system allows (the file must never change
  // afterwards: RocksDB's SST files), else a copy; synced either way.
  fs::create_hard_link(local, tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(local, tmp, fs::copy_options::overwrite_existing, ec);
    if (ec) return Prefixed(FsErrorStatus("copy " + local.string() + " to", tmp, ec), where);
  }
  {
    Fd fd(::open(tmp.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return Prefixed(ErrnoError("open", tmp, errno), where);
    if (::fsync(fd.get()) != 0) return Prefixed(ErrnoError("fsync", tmp, errno), where);
  }
  const uint64_t size = fs::file_size(tmp, ec);
  if (ec) return Prefixed(FsErrorStatus("stat", tmp, ec), where);
  // Read back once (from the page cache, as a rule): the references keep it,
  // and a load checks the file against it.
  absl::StatusOr<uint32_t> crc = FileCrc32c(tmp);
  if (!crc.ok()) return Prefixed(crc.status(), where);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Prefixed(ErrnoError(absl::StrCat("rename ", tmp.string(), " to"), path, err), where);
  }
  {
    MutexLock lock(&chunks_->mu);
    chunks_->AddPendingFile(id, file);
    chunks_->whole_files[file] = {size, *crc};
  }
  return SharedChunkRef{file, 0, size, *crc};
}

std::shared_ptr<SharedFileSink> CheckpointStorage::SharedFileSinkFor(int64_t id) const {
  if (!incremental_) return nullptr;
  return std::make_shared<StorageSharedFileSink>(this, id);
}

bool CheckpointStorage::ReuseSharedFile(int64_t id, std::string_view file, uint64_t size) const {
  if (ValidateName(file).ok()) {
    LoadIndex();
    // Protected from retention first, then checked.  Only a file whose CRC
    // is known is referred to again (a reference of format 2 has none).
    {
      MutexLock lock(&chunks_->mu);
      auto it = chunks_->whole_files.find(ToAbsl(file));
      if (it == chunks_->whole_files.end() || it->second.first != size) return false;
      chunks_->AddPendingFile(id, std::string(file));
    }
    std::error_code ec;
    if (fs::file_size(SharedDir() / file, ec) == size && !ec) return true;
  }
  return false;
}

absl::StatusOr<StateFileInfo> CheckpointStorage::WriteStateFile(
    int64_t id, std::string_view name, const std::vector<std::string_view>& pieces) const {
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
  uint32_t crc = 0;
  if (absl::Status s = WriteFileAtomically(tmp, path, pieces, &crc); !s.ok()) {
    return Prefixed(s, where);
  }
  size_t size = 0;
  for (std::string_view p : pieces) size += p.size();
  return StateFileInfo{std::string(name), size, crc, 0, size};
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
  // The state files' renames (and the shared files') are durable before the
  // manifest's.
  if (absl::Status s = FsyncDir(chk); !s.ok()) return Prefixed(s, where);
  Manifest m{id, metadata, files};
  if (incremental_) {
    m.metadata[std::string(kIncrementalKey)] = "1";
    if (fs::is_directory(SharedDir(), ec)) {
      if (absl::Status s = FsyncDir(SharedDir()); !s.ok()) return Prefixed(s, where);
    }
  }
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
  // The shared files no retained checkpoint refers to any more.
  CollectShared(id);
  return absl::OkStatus();
}

void CheckpointStorage::Abort(int64_t id) const {
  if (id < 0 || IsComplete(id)) return;
  std::error_code ec;
  fs::remove_all(CheckpointPath(id), ec);
  if (savepoint_) return;
  // Its own shared files (<id>-...): no committed checkpoint refers to them.
  {
    MutexLock lock(&chunks_->mu);
    chunks_->pending.erase(id);
    chunks_->pending_files.erase(id);
    chunks_->closed_through = std::max(chunks_->closed_through, id);
  }
  const fs::path shared = SharedDir();
  if (!fs::is_directory(shared, ec)) return;
  std::vector<fs::path> mine;
  for (fs::directory_iterator it(shared, ec), end; !ec && it != end; it.increment(ec)) {
    std::string_view name = it->path().filename().native();
    if (!name.empty() && name.front() == '.') name.remove_prefix(1);
    if (SharedFileId(name) == id) mine.push_back(it->path());
  }
  for (const fs::path& p : mine) fs::remove(p, ec);
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

absl::StatusOr<std::vector<std::string>> CheckpointStorage::AbandonAfter(int64_t id) {
  std::vector<std::string> lines;
  for (int64_t later : ListCommittedIds()) {
    if (later <= id) continue;
    const fs::path from = CheckpointPath(later);
    const fs::path to = dir_ / absl::StrCat("abandoned-", from.filename().string());
    std::error_code ec;
    fs::remove_all(to, ec);  // left by an earlier restore of the same id
    fs::rename(from, to, ec);
    if (ec) {
      return Prefixed(FsErrorStatus("cannot rename", from, ec),
                      absl::StrCat("restoring checkpoint ", id, " of ", dir_.string(),
                                   ": its later checkpoint ", later, " must be set aside: "));
    }
    lines.push_back(absl::StrCat("checkpoint ", later, " of ", dir_.string(),
                                 " came after the restored checkpoint ", id,
                                 ", on the line it left: renamed ", to.filename().string(),
                                 " (a restore from latest would have taken it)"));
  }
  if (!lines.empty()) {
    if (absl::Status s = FsyncDir(dir_); !s.ok()) return s;
  }
  return lines;
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

void RefuseDirectWritesForTesting(int after_writes) {
  refuse_direct_after.store(after_writes, std::memory_order_relaxed);
}

}  // namespace tidemark::internal
