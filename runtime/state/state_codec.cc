// runtime/state/state_codec.cc: CRC-32C (Castagnoli).  On x86-64 with SSE 4.2
// (checked once at run time) the crc32 instruction, eight bytes a step, about
// five times the table; elsewhere table-driven, eight bytes a step ("slicing by
// 8").  Both give the same values.  Abseil 20220623 has no absl/crc.
//
// Thread-safety: Crc32c is a pure function; its tables are built at compile
// time.  The encoding buffers' pool (TakeEncodeBuffer ...) is behind a mutex.
#include "tidemark/runtime/state/state_codec.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/detail/mutex.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define TM_CRC32C_HW 1
#endif

namespace tidemark::internal {
namespace {

constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[0] is the classic byte-at-a-time table; tables[k][b] is the CRC of
// byte b followed by k zero bytes, so eight table lookups advance eight bytes.
constexpr Tables MakeTables() {
  Tables t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kCastagnoliReflected : c >> 1;
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
  }
  return t;
}

constexpr Tables kTables = MakeTables();

inline uint32_t LoadLittleEndian32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

uint32_t Crc32cTable(const uint8_t* p, size_t n, uint32_t c);

#ifdef TM_CRC32C_HW
// The same CRC with the SSE 4.2 crc32 instruction (its polynomial is
// Castagnoli's, reflected, without the inversions, which stay here).
[[gnu::target("sse4.2")]] uint32_t Crc32cSse42(const uint8_t* p, size_t n, uint32_t c) {
  uint64_t c64 = c;
  while (n >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
    p += 8;
    n -= 8;
  }
  auto c32 = static_cast<uint32_t>(c64);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

const bool kHaveSse42 = [] {
  __builtin_cpu_init();  // may run before libgcc's own initialisation
  return __builtin_cpu_supports("sse4.2") != 0;
}();
#endif

}  // namespace

uint32_t Crc32c(const void* data, size_t n, uint32_t crc) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
#ifdef TM_CRC32C_HW
  if (kHaveSse42) return ~Crc32cSse42(p, n, ~crc);
#endif
  return ~Crc32cTable(p, n, ~crc);
}

namespace {
// `c` and the result without the inversions.
uint32_t Crc32cTable(const uint8_t* p, size_t n, uint32_t c) {
  while (n >= 8) {
    const uint32_t lo = LoadLittleEndian32(p) ^ c;
    const uint32_t hi = LoadLittleEndian32(p + 4);
    c = kTables[7][lo & 0xff] ^ kTables[6][(lo >> 8) & 0xff] ^ kTables[5][(lo >> 16) & 0xff] ^
        kTables[4][lo >> 24] ^ kTables[3][hi & 0xff] ^ kTables[2][(hi >> 8) & 0xff] ^
        kTables[1][(hi >> 16) & 0xff] ^ kTables[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kTables[0][(c ^ *p++) & 0xff];
  return c;
}
}  // namespace

std::string TypeNameFromSignature(std::string_view s) {
  const size_t b = s.find("T = ");
  if (b == std::string_view::npos) return std::string(s);
  s.remove_prefix(b + 4);
  const size_t e = s.find_first_of(";]");
  return std::string(s.substr(0, e));
}

std::runtime_error NoStateCodecErrorFor(std::string_view where, const std::string& type_name) {
  return std::runtime_error(std::string(where) + ": type " + type_name +
                            " has no tidemark::StateCodec: specialise it to checkpoint this job "
                            "(see runtime/state/state_codec.h)");
}

// StateWriter's members that touch the deferred parts (state_codec.h).
StateWriter::StateWriter() : out_(&own_) {}
StateWriter::StateWriter(std::string* out) : out_(out) {}
StateWriter::~StateWriter() = default;

void StateWriter::Defer(DeferredPart part) {
  if (out_ != &own_) {
    part(*this);
    return;
  }
  deferred_.push_back(Deferred{out_->size(), std::move(part)});
}

void StateWriter::FinishBytesAt(size_t at, size_t width) {
  const size_t n = out_->size() - at - width;
  const size_t need = VarintWidth(n);
  if (need > width) {
    out_->insert(at + width, need - width, '\0');
  } else if (need < width) {
    out_->erase(at + need, width - need);
  }
  uint64_t v = n;
  for (size_t i = 0; i + 1 < need; ++i, v >>= 7)
    (*out_)[at + i] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
  (*out_)[at + need - 1] = static_cast<char>(static_cast<uint8_t>(v));
}

void StateWriter::ThrowDeferredInsideBytes() {
  throw std::logic_error("StateWriter::PutBytesWith: the bytes deferred a part of their own");
}

std::vector<StateWriter::Deferred> StateWriter::TakeDeferred() {
  return std::exchange(deferred_, {});
}

void StateWriter::RunDeferredNow() { *out_ = CompleteDeferred(std::move(*out_), TakeDeferred()); }

std::string StateWriter::CompleteDeferred(std::string sync, std::vector<Deferred> parts) {
  if (parts.empty()) return sync;
  StateWriter w;
  size_t from = 0;
  for (Deferred& d : parts) {
    w.out_->append(sync, from, d.at - from);
    from = d.at;
    d.part(w);
    d.part = nullptr;  // frees what it held (a snapshot's view) now
  }
  w.out_->append(sync, from, std::string::npos);
  return w.Release();  // parts that deferred parts of their own
}

namespace {
constexpr size_t kPooledMin = size_t{1} << 20;
constexpr size_t kPooledMax = size_t{512} << 20;

struct EncodeBufferPool {
  Mutex mu;
  std::vector<std::string> buffers ABSL_GUARDED_BY(mu);
  size_t bytes ABSL_GUARDED_BY(mu) = 0;  // their capacities
};
EncodeBufferPool& Pool() {
  static EncodeBufferPool* const pool = new EncodeBufferPool;
  return *pool;
}
}  // namespace

std::string TakeEncodeBuffer(size_t min_capacity) {
  EncodeBufferPool& pool = Pool();
  std::string out;
  MutexLock lock(&pool.mu);
  // The smallest that is large enough.
  auto best = pool.buffers.end();
  for (auto it = pool.buffers.begin(); it != pool.buffers.end(); ++it) {
    if (it->capacity() >= min_capacity &&
        (best == pool.buffers.end() || it->capacity() < best->capacity())) {
      best = it;
    }
  }
  if (best == pool.buffers.end()) return out;
  out = std::move(*best);
  pool.buffers.erase(best);
  pool.bytes -= out.capacity();
  out.clear();
  return out;
}

void StateWriter::ReserveFromPool(size_t want) {
  if (want >= kPooledMin) {
    std::string b = TakeEncodeBuffer(want);
    if (b.capacity() >= want) {
      b.append(*out_);
      out_->swap(b);
      return;  // `b`, the old buffer, is under the pool's minimum or given up
    }
    // None large enough: a quarter more than asked, so that the next
    // checkpoint's encoding, often a little larger, fits in this one (pages
    // reserved and never written are not touched).
    out_->reserve(want + want / 4);
    return;
  }
  out_->reserve(want);
}

void RecycleEncodeBuffer(std::string&& buffer) {
  if (buffer.capacity() < kPooledMin) return;
  std::string kept = std::move(buffer);
  EncodeBufferPool& pool = Pool();
  {
    MutexLock lock(&pool.mu);
    if (pool.bytes + kept.capacity() <= kPooledMax) {
      pool.bytes += kept.capacity();
      pool.buffers.push_back(std::move(kept));
      return;
    }
  }
  // Full: `kept` is freed here, outside the lock.
}

void ReleaseEncodeBuffers() {
  std::vector<std::string> dropped;
  EncodeBufferPool& pool = Pool();
  {
    MutexLock lock(&pool.mu);
    dropped.swap(pool.buffers);
    pool.bytes = 0;
  }
}

size_t PooledEncodeBufferBytes() {
  EncodeBufferPool& pool = Pool();
  MutexLock lock(&pool.mu);
  return pool.bytes;
}

}  // namespace tidemark::internal
