// runtime/state/state_codec.h
//
// The binary encoding of operator state for checkpoints: a byte writer and a
// bounds-checked reader (internal), and tidemark::StateCodec<T>, the
// customisation point that says how one type is written and read back.
//
//   internal::StateWriter w(&bytes);
//   internal::Encode(w, my_map);                      // StateCodec<T>::Encode
//   internal::StateReader r(bytes);
//   auto back = internal::Decode<decltype(my_map)>(r);
//   if (!r.ok()) return r.status();                   // "truncated at byte ..."
//
// Fixed-width integers are little-endian whatever the host; lengths and counts
// are unsigned LEB128 varints.  Codecs are provided for arithmetic types and
// enums, std::string, std::pair, std::tuple, std::vector, std::optional, std::variant,
// std::map, absl::flat_hash_map and std::array (all nested freely), and, as a
// fallback, for any other trivially copyable type, whose object bytes are
// copied as they are, their padding written as zero bytes (with GCC 11 or
// clang 16 and later; a key's bytes are what RocksDB looks it up by).  That
// fallback is only valid for state read back by the same build on the same
// architecture (layout, padding and endianness are the compiler's), which is
// what a restore of a checkpoint taken by this binary is; specialise
// StateCodec for a type whose state must outlive the build.  A trivially
// copyable type that holds pointers (a struct with a const char* member,
// std::span) would have meaningless addresses restored; pointers themselves
// and std::string_view are rejected, pointer members cannot be
// detected: give such a type its own codec.
//
// A user type that is not trivially copyable needs its own codec:
//
//   template <>
//   struct tidemark::StateCodec<MyState> {
//     static void Encode(tidemark::StateWriter& w, const MyState& s) {
//       tidemark::EncodeState(w, s.name);
//       tidemark::EncodeState(w, s.counts);
//     }
//     static MyState Decode(tidemark::StateReader& r) {
//       MyState s;
//       s.name = tidemark::DecodeState<std::string>(r);
//       s.counts = tidemark::DecodeState<std::vector<int64_t>>(r);
//       return s;
//     }
//   };
//
// (tidemark::StateWriter / StateReader / EncodeState / DecodeState are the
// public names of internal::StateWriter / StateReader / Encode / Decode.)
//
// The reader never throws and never reads out of bounds: reading past the end
// (or a malformed value) sets a sticky error, every later read returns zeros /
// empty values, and ok() / error() / status() report the first problem.
// Decoders therefore need no checks of their own; the caller checks once at
// the end.
//
// Thread-safety: a StateWriter or StateReader is used by one thread at a time;
// the codecs have no state.
#ifndef TM_RUNTIME_STATE_CODEC_H_
#define TM_RUNTIME_STATE_CODEC_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tidemark::internal {

class SharedFileSink;  // kv_store.h

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by iSCSI,
// ext4 and RocksDB.  `crc` is the value of the bytes before: Crc32c(b, nb,
// Crc32c(a, na)) == Crc32c(a followed by b).  Crc32c("123456789") ==
// 0xE3069283.
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);
inline uint32_t Crc32c(std::string_view s, uint32_t crc = 0) {
  return Crc32c(s.data(), s.size(), crc);
}

// absl::string_view is not std::string_view in this Abseil build.
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Appends encoded values to a string: either one the caller owns (which must
// outlive the writer) or the writer's own (data(), Release()).
//
// Deferred parts (asynchronous snapshots, docs/checkpoints.md "The snapshot's
// phases"): Defer(part) reserves the current position for bytes that
// part(writer) appends later, possibly on another thread.  An operator's
// SnapshotState takes a copy-on-write view of its large state on the task
// thread and defers encoding it; the task hands the parts to the snapshot
// threads (TakeDeferred, then CompleteDeferred).  Whoever reads the bytes
// without doing so gets them complete all the same: Release() and data() run
// the pending parts first, in order, on the calling thread, and a writer that
// appends to the caller's string runs each part at once.  A part must own
// everything it reads (it may outlive the operator).
class StateWriter {
 public:
  using DeferredPart = std::function<void(StateWriter&)>;
  // A part and the position in the synchronous bytes its output goes to.
  struct Deferred {
    size_t at;
    DeferredPart part;
  };

  // Out of line (state_codec.cc), as are the deferred parts' members below:
  // inline, they instantiated the vector of parts in every job (compile
  // cost, issue 24).
  StateWriter();
  explicit StateWriter(std::string* out);
  ~StateWriter();
  StateWriter(const StateWriter&) = delete;
  StateWriter& operator=(const StateWriter&) = delete;

  void PutU8(uint8_t v) { out_->push_back(static_cast<char>(v)); }
  void PutU16(uint16_t v) { PutLittleEndian(v); }
  void PutU32(uint32_t v) { PutLittleEndian(v); }
  void PutU64(uint64_t v) { PutLittleEndian(v); }
  void PutI64(int64_t v) { PutLittleEndian(static_cast<uint64_t>(v)); }
  // Unsigned LEB128: 1 byte below 128, at most 10.
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      PutU8(static_cast<uint8_t>(v) | 0x80);
      v >>= 7;
    }
    PutU8(static_cast<uint8_t>(v));
  }
  // The bytes as they are, no length: the reader must know how many.
  void PutRaw(const void* p, size_t n) { out_->append(static_cast<const char*>(p), n); }
  // A varint length, then the bytes.
  void PutBytes(std::string_view s) {
    PutVarint(s.size());
    out_->append(s.data(), s.size());
  }

  // The bytes PutBytes would write for what fill(*this) appends (a varint
  // length, then them), encoded in place rather than into a string of their
  // own and copied: for a large state, that string and its copy were fresh
  // memory as large as the state, twice.  `estimate` is a guess at the
  // length: room for it is reserved, and the length's varint takes the
  // guess's width, moved up when the guess was of another width.  `fill`
  // must not defer parts (std::logic_error).
  template <typename Fill>
  void PutBytesWith(size_t estimate, Fill&& fill) {
    const size_t width = VarintWidth(estimate);
    const size_t at = out_->size();
    const size_t parts = deferred_.size();
    Reserve(width + estimate);
    out_->append(width, '\0');
    fill(*this);
    if (deferred_.size() != parts) ThrowDeferredInsideBytes();
    FinishBytesAt(at, width);
  }
  // The bytes of an unsigned LEB128 varint of v.
  static size_t VarintWidth(uint64_t v) {
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) ++n;
    return n;
  }

  // Any unsigned integer of 1, 2, 4 or 8 bytes, little-endian.
  template <typename U>
  void PutLittleEndian(U v) {
    static_assert(std::is_unsigned_v<U>);
    char b[sizeof(U)];
    for (size_t i = 0; i < sizeof(U); ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_->append(b, sizeof(U));
  }

  // A hint for keyed state (incremental checkpoints): write the entries of a
  // table grouped by their key group of `max_parallelism`, so that a key
  // group whose entries did not change encodes to the same bytes (0: none).
  // Any grouping reads back the same (KeyedStateStore's blobs).
  void set_key_group_hint(int max_parallelism) { key_group_hint_ = max_parallelism; }
  int key_group_hint() const { return key_group_hint_; }
  // Native incremental checkpoints (kv_store.h): where a state backend with
  // files of its own puts them; null (the default) for the canonical format.
  void set_shared_file_sink(std::shared_ptr<SharedFileSink> sink) { sink_ = std::move(sink); }
  const std::shared_ptr<SharedFileSink>& shared_file_sink() const { return sink_; }

  // Appends part's bytes here later (see the class comment).
  void Defer(DeferredPart part);
  bool has_deferred() const { return !deferred_.empty(); }
  // The pending parts, in order; the writer then holds only the synchronous
  // bytes, into which CompleteDeferred inserts the parts' output.
  std::vector<Deferred> TakeDeferred();

  // Room for `more` bytes past the current end, allocated at once (an
  // estimate: writing past it grows the string as usual).  For a deferred
  // part that knows roughly how much it writes, so that a large encoding is
  // not copied each time its string doubles.
  // A large reservation comes from the encoding buffers' pool
  // (TakeEncodeBuffer) when it holds one large enough.
  void Reserve(size_t more) {
    const size_t want = out_->size() + more;
    if (want > out_->capacity()) ReserveFromPool(want);
  }

  // The size so far (pending deferred parts not counted).
  size_t size() const { return out_->size(); }
  const std::string& data() {
    RunDeferred();
    return *out_;
  }
  // The encoded bytes (moved out of the string written to), deferred parts
  // included.
  std::string Release() {
    RunDeferred();
    return std::move(*out_);
  }

 private:
  void RunDeferred() {
    if (!deferred_.empty()) RunDeferredNow();
  }
  void RunDeferredNow();
  void ReserveFromPool(size_t want);
  // PutBytesWith's end: the length of what follows the `width` bytes kept at
  // `at`, written there as a varint (the bytes moved when its width differs).
  void FinishBytesAt(size_t at, size_t width);
  [[noreturn]] static void ThrowDeferredInsideBytes();

 public:
  // `sync` with the output of every part inserted at its position.
  static std::string CompleteDeferred(std::string sync, std::vector<Deferred> parts);

 private:
  std::string own_;
  std::string* out_;
  std::vector<Deferred> deferred_;
  int key_group_hint_ = 0;
  std::shared_ptr<SharedFileSink> sink_;
};

// Buffers for the encodings of the asynchronous part of snapshots (issue 26
// item 1; state_codec.cc).  A checkpoint of W4 encodes about 100 MB each
// second into fresh strings; on a VM whose page faults are slow the first
// touch of those pages cost more CPU than the encoding itself.  The
// checkpoint coordinator hands the buffers of the checkpoint it drops back
// here, and the next large encoding (one that calls StateWriter::Reserve,
// as the window tables' do) writes into one, so steady checkpoints touch
// memory that is already mapped.  Only buffers of
// 1 MiB or more are kept, at most 512 MiB in all; the coordinator releases
// them when it stops.  TakeEncodeBuffer gives the smallest kept buffer of at
// least `min_capacity` bytes, emptied (an empty string when none is), as
// StateWriter::Reserve does for a large reservation.  Thread-safe.
std::string TakeEncodeBuffer(size_t min_capacity);
void RecycleEncodeBuffer(std::string&& buffer);
void ReleaseEncodeBuffers();
size_t PooledEncodeBufferBytes();

// Reads what a StateWriter wrote, from a view the caller keeps alive.  Every
// Get takes what is being read, for the error message.
class StateReader {
 public:
  explicit StateReader(std::string_view in) : in_(in) {}

  uint8_t GetU8(std::string_view what = "u8") {
    if (!Need(1, what)) return 0;
    return static_cast<uint8_t>(in_[pos_++]);
  }
  uint16_t GetU16(std::string_view what = "u16") { return GetLittleEndian<uint16_t>(what); }
  uint32_t GetU32(std::string_view what = "u32") { return GetLittleEndian<uint32_t>(what); }
  uint64_t GetU64(std::string_view what = "u64") { return GetLittleEndian<uint64_t>(what); }
  int64_t GetI64(std::string_view what = "i64") {
    return static_cast<int64_t>(GetLittleEndian<uint64_t>(what));
  }
  uint64_t GetVarint(std::string_view what = "varint") {
    uint64_t v = 0;
    const size_t start = pos_;
    for (int shift = 0; shift < 64; shift += 7) {
      if (!ok()) return 0;
      if (pos_ >= in_.size()) {
        Truncated(start, what);
        return 0;
      }
      const uint8_t b = static_cast<uint8_t>(in_[pos_++]);
      if (shift == 63 && b > 1) break;  // more than 64 bits
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return v;
    }
    Fail(absl::StrCat("malformed varint at byte ", start, " of ", in_.size(), " (reading ",
                      ToAbsl(what), ")"));
    return 0;
  }
  // `n` bytes as they are (a view into the input); empty after an error.
  std::string_view GetRaw(size_t n, std::string_view what = "bytes") {
    if (!Need(n, what)) return {};
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // What PutBytes wrote: a varint length, then the bytes.
  std::string_view GetBytes(std::string_view what = "bytes") {
    const size_t start = pos_;
    const uint64_t n = GetVarint(what);
    if (!ok()) return {};
    if (n > remaining()) {
      Truncated(start, what);
      return {};
    }
    return GetRaw(static_cast<size_t>(n), what);
  }
  // A count of elements that follow, each at least one byte: a count larger
  // than the bytes left is a truncated or corrupt input, reported here rather
  // than after a huge allocation.  (A container of zero-byte elements, e.g.
  // std::vector<std::tuple<>>, longer than the bytes left cannot be read.)
  uint64_t GetCount(std::string_view what = "count") {
    const size_t start = pos_;
    const uint64_t n = GetVarint(what);
    if (ok() && n > remaining()) {
      Fail(absl::StrCat("truncated at byte ", start, " of ", in_.size(), " (reading ", ToAbsl(what),
                        ": ", n, " elements, ", remaining(), " bytes left)"));
      return 0;
    }
    return n;
  }

  template <typename U>
  U GetLittleEndian(std::string_view what) {
    static_assert(std::is_unsigned_v<U>);
    if (!Need(sizeof(U), what)) return 0;
    U v = 0;
    for (size_t i = 0; i < sizeof(U); ++i) {
      v |= static_cast<U>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    }
    pos_ += sizeof(U);
    return v;
  }

  // Records a problem with the input (a value out of range, ...); the first
  // one sticks.  Later reads return zeros.
  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    pos_ = in_.size();
  }

  bool ok() const { return error_.empty(); }
  // Empty while ok(); else e.g. "truncated at byte 12 of 14 (reading u32)".
  const std::string& error() const { return error_; }
  absl::Status status() const { return ok() ? absl::OkStatus() : absl::DataLossError(error_); }
  // Whether every byte was read (and no error).
  bool AtEnd() const { return ok() && pos_ == in_.size(); }
  size_t position() const { return pos_; }
  size_t remaining() const { return in_.size() - pos_; }
  size_t size() const { return in_.size(); }

 private:
  bool Need(size_t n, std::string_view what) {
    if (!ok()) return false;
    if (n > in_.size() - pos_) {
      Truncated(pos_, what);
      return false;
    }
    return true;
  }
  void Truncated(size_t at, std::string_view what) {
    Fail(absl::StrCat("truncated at byte ", at, " of ", in_.size(), " (reading ", ToAbsl(what),
                      ")"));
  }

  std::string_view in_;
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace tidemark::internal

// Whether the compiler can zero an object's padding bits (GCC 11, clang 16).
#if defined(__has_builtin)
#if __has_builtin(__builtin_clear_padding)
#define TIDEMARK_HAS_CLEAR_PADDING 1
#endif
#endif
#ifndef TIDEMARK_HAS_CLEAR_PADDING
#define TIDEMARK_HAS_CLEAR_PADDING 0
#endif

namespace tidemark {

namespace internal {
// What the primary StateCodec of a type with no codec derives from: no Encode
// or Decode, and the tag HasStateCodec looks for.
struct NoStateCodec {
  using TidemarkNoStateCodec = void;
};

// The raw-bytes codec of a trivially copyable type without pointers.
template <typename T>
struct TriviallyCopyableCodec {
  static void Encode(StateWriter& w, const T& v) {
    if constexpr (std::is_empty_v<T>) {
      // An empty type's one byte holds no value and is not initialised:
      // written as 0, so that equal values encode alike (a key or namespace
      // on RocksDB is looked up by its bytes: GlobalWindow's were not found).
      const char zero = 0;
      w.PutRaw(&zero, 1);
    } else if constexpr (!std::has_unique_object_representations_v<T>) {
#if TIDEMARK_HAS_CLEAR_PADDING
      // A struct with padding (or a long double): the padding bytes are
      // whatever the object's storage held, so two equal keys could encode
      // differently and miss each other on RocksDB.  They are written as 0.
      alignas(T) unsigned char copy[sizeof(T)];
      std::memcpy(copy, &v, sizeof(T));
      __builtin_clear_padding(reinterpret_cast<T*>(copy));
      w.PutRaw(copy, sizeof(T));
#else
      w.PutRaw(&v, sizeof(T));
#endif
    } else {
      w.PutRaw(&v, sizeof(T));
    }
  }
  static T Decode(StateReader& r) {
    std::array<char, sizeof(T)> b{};
    const std::string_view s = r.GetRaw(sizeof(T), "trivially copyable value");
    if (s.size() == sizeof(T)) std::memcpy(b.data(), s.data(), sizeof(T));
    return std::bit_cast<T>(b);
  }
};

template <typename T>
inline constexpr bool kIsRawEncodable =
    std::is_trivially_copyable_v<T> && !std::is_pointer_v<T> && !std::is_member_pointer_v<T>;
}  // namespace internal

// How a T is written into and read back from checkpointed state.  Specialise
// it for your own types (a full specialisation StateCodec<MyType>, or a
// partial one for a template).  The primary template is the fallback for
// trivially copyable types: their object bytes, valid only within one build
// on one architecture (see the top of this file).  For any other type it has
// no Encode / Decode (internal::HasStateCodec<T> is false): naming such a
// StateCodec compiles, encoding with it does not (internal::Encode's
// static_assert), so an operator can test for a codec and fail at snapshot
// time instead of failing the compile of a job that never checkpoints.
template <typename T, typename = void>
struct StateCodec
    : std::conditional_t<internal::kIsRawEncodable<T>, internal::TriviallyCopyableCodec<T>,
                         internal::NoStateCodec> {};

namespace internal {
// Whether T can be encoded: a StateCodec specialisation exists or T is
// trivially copyable without pointers, and, for the library's containers,
// their elements can be.  A constant, never an error.
template <typename T>
    struct HasStateCodecTrait : std::bool_constant < !requires {
  typename StateCodec<T>::TidemarkNoStateCodec;
} > {};
template <typename T>
inline constexpr bool HasStateCodec = HasStateCodecTrait<std::remove_cv_t<T>>::value;

template <>
struct HasStateCodecTrait<std::string_view> : std::false_type {};
template <typename A, typename B>
struct HasStateCodecTrait<std::pair<A, B>>
    : std::bool_constant<HasStateCodec<A> && HasStateCodec<B>> {};
template <typename... Ts>
struct HasStateCodecTrait<std::tuple<Ts...>> : std::bool_constant<(HasStateCodec<Ts> && ...)> {};
template <typename T, size_t N>
struct HasStateCodecTrait<std::array<T, N>> : std::bool_constant<HasStateCodec<T>> {};
template <typename T, typename A>
struct HasStateCodecTrait<std::vector<T, A>> : std::bool_constant<HasStateCodec<T>> {};
template <typename T>
struct HasStateCodecTrait<std::optional<T>> : std::bool_constant<HasStateCodec<T>> {};
template <typename... Ts>
struct HasStateCodecTrait<std::variant<Ts...>> : std::bool_constant<(HasStateCodec<Ts> && ...)> {};
template <typename K, typename V, typename C, typename A>
struct HasStateCodecTrait<std::map<K, V, C, A>>
    : std::bool_constant<HasStateCodec<K> && HasStateCodec<V>> {};
template <typename K, typename V, typename H, typename E, typename A>
struct HasStateCodecTrait<absl::flat_hash_map<K, V, H, E, A>>
    : std::bool_constant<HasStateCodec<K> && HasStateCodec<V>> {};

// The type name in a __PRETTY_FUNCTION__ of TypeName<T> (state_codec.cc).
std::string TypeNameFromSignature(std::string_view pretty_function);
// NoStateCodecError's message for the type named `type_name`.
std::runtime_error NoStateCodecErrorFor(std::string_view where, const std::string& type_name);

// The name of T as the compiler spells it, for error messages.
template <typename T>
std::string TypeName() {
  return TypeNameFromSignature(__PRETTY_FUNCTION__);
}

// The error an operator throws when asked to snapshot state of type T that
// has no codec (see HasStateCodec).
template <typename T>
std::runtime_error NoStateCodecError(std::string_view where) {
  return NoStateCodecErrorFor(where, TypeName<T>());
}

// Whether every one of Ts has a codec.
template <typename... Ts>
inline constexpr bool kAllHaveStateCodecs = (HasStateCodec<Ts> && ...);

// Throws NoStateCodecError for the first of Ts that has no codec (an
// operator's SnapshotState when kAllHaveStateCodecs<Ts...> is false).
template <typename T, typename... Rest>
[[noreturn]] void ThrowFirstMissingCodec(std::string_view where) {
  if constexpr (!HasStateCodec<T>) {
    throw NoStateCodecError<T>(where);
  } else if constexpr (sizeof...(Rest) > 0) {
    ThrowFirstMissingCodec<Rest...>(where);
  } else {
    throw std::logic_error("ThrowFirstMissingCodec: every type has a codec");
  }
}
}  // namespace internal

namespace internal {
template <typename T>
void Encode(StateWriter& w, const T& v) {
  static_assert(HasStateCodec<T>,
                "tidemark: no StateCodec for this state type: specialise tidemark::StateCodec<T> "
                "for your type (static void Encode(tidemark::StateWriter&, const T&); static T "
                "Decode(tidemark::StateReader&)), see runtime/state/state_codec.h.  Only trivially "
                "copyable types without pointers are encoded as they are.");
  if constexpr (HasStateCodec<T>) StateCodec<T>::Encode(w, v);
}
template <typename T>
T Decode(StateReader& r) {
  static_assert(HasStateCodec<T>,
                "tidemark: no StateCodec for this state type: specialise tidemark::StateCodec<T> "
                "for your type (static void Encode(tidemark::StateWriter&, const T&); static T "
                "Decode(tidemark::StateReader&)), see runtime/state/state_codec.h.  Only trivially "
                "copyable types without pointers are encoded as they are.");
  return StateCodec<T>::Decode(r);
}

// Integers by their width, little-endian; bool as one byte 0 or 1.
template <typename T>
inline constexpr bool kIsCodecInteger = std::is_integral_v<T> &&
                                        (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 ||
                                         sizeof(T) == 8);
}  // namespace internal

// The public names of what a StateCodec specialisation (or a watermark
// generator's SnapshotState / RestoreState) works with: the writer and
// reader, and the codec of each field.  Write codecs with these; the
// internal:: names they stand for may move.
using StateWriter = internal::StateWriter;
using StateReader = internal::StateReader;
template <typename T>
void EncodeState(StateWriter& w, const T& v) {
  internal::Encode(w, v);
}
template <typename T>
T DecodeState(StateReader& r) {
  return internal::Decode<T>(r);
}

template <typename T>
struct StateCodec<T, std::enable_if_t<internal::kIsCodecInteger<T> || std::is_enum_v<T> ||
                                      std::is_same_v<T, float> || std::is_same_v<T, double>>> {
  static void Encode(internal::StateWriter& w, const T& v) {
    if constexpr (std::is_enum_v<T>) {
      internal::Encode(w, static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_same_v<T, bool>) {
      w.PutU8(v ? 1 : 0);
    } else if constexpr (std::is_floating_point_v<T>) {
      // As Java's writeFloat/writeDouble (Flink's FloatSerializer and
      // DoubleSerializer): floatToIntBits/doubleToLongBits, so that every NaN
      // has one encoding and is one key on RocksDB.
      using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      constexpr U kNaN = static_cast<U>(sizeof(T) == 4 ? 0x7fc00000ULL : 0x7ff8000000000000ULL);
      w.PutLittleEndian(v != v ? kNaN : std::bit_cast<U>(v));
    } else {
      w.PutLittleEndian(static_cast<std::make_unsigned_t<T>>(v));
    }
  }
  static T Decode(internal::StateReader& r) {
    if constexpr (std::is_enum_v<T>) {
      return static_cast<T>(internal::Decode<std::underlying_type_t<T>>(r));
    } else if constexpr (std::is_same_v<T, bool>) {
      const size_t at = r.position();
      const uint8_t b = r.GetU8("bool");
      if (b > 1) {
        r.Fail(absl::StrCat("bool at byte ", at, " of ", r.size(), " is ", static_cast<int>(b),
                            ", not 0 or 1"));
        return false;
      }
      return b == 1;
    } else if constexpr (std::is_floating_point_v<T>) {
      using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      return std::bit_cast<T>(r.GetLittleEndian<U>(sizeof(T) == 4 ? "float" : "double"));
    } else {
      return static_cast<T>(r.GetLittleEndian<std::make_unsigned_t<T>>("integer"));
    }
  }
};

template <>
struct StateCodec<std::string> {
  static void Encode(internal::StateWriter& w, const std::string& s) { w.PutBytes(s); }
  static std::string Decode(internal::StateReader& r) { return std::string(r.GetBytes("string")); }
};

// A view's bytes are a pointer and a length: state must own its characters.
template <>
struct StateCodec<std::string_view> {
  template <typename Writer>
  static void Encode(Writer&, std::string_view) {
    static_assert(sizeof(Writer) == 0,
                  "tidemark: std::string_view cannot be checkpointed (it does not own its "
                  "characters): keep std::string in state");
  }
  template <typename Reader>
  static std::string_view Decode(Reader&) {
    static_assert(sizeof(Reader) == 0,
                  "tidemark: std::string_view cannot be checkpointed (it does not own its "
                  "characters): keep std::string in state");
    return {};
  }
};

template <typename A, typename B>
struct StateCodec<std::pair<A, B>> {
  static void Encode(internal::StateWriter& w, const std::pair<A, B>& p) {
    internal::Encode(w, p.first);
    internal::Encode(w, p.second);
  }
  static std::pair<A, B> Decode(internal::StateReader& r) {
    // Braced initialisation evaluates left to right.
    return std::pair<A, B>{internal::Decode<A>(r), internal::Decode<B>(r)};
  }
};

template <typename... Ts>
struct StateCodec<std::tuple<Ts...>> {
  static void Encode(internal::StateWriter& w, const std::tuple<Ts...>& t) {
    std::apply([&w](const Ts&... v) { (internal::Encode(w, v), ...); }, t);
  }
  static std::tuple<Ts...> Decode(internal::StateReader& r) {
    return std::tuple<Ts...>{internal::Decode<Ts>(r)...};
  }
};

template <typename T, size_t N>
struct StateCodec<std::array<T, N>> {
  static void Encode(internal::StateWriter& w, const std::array<T, N>& a) {
    for (const T& v : a) internal::Encode(w, v);
  }
  static std::array<T, N> Decode(internal::StateReader& r) {
    return DecodeAll(r, std::make_index_sequence<N>());
  }

 private:
  template <size_t... I>
  static std::array<T, N> DecodeAll(internal::StateReader& r, std::index_sequence<I...>) {
    return std::array<T, N>{((void)I, internal::Decode<T>(r))...};
  }
};

template <typename T, typename Alloc>
struct StateCodec<std::vector<T, Alloc>> {
  static void Encode(internal::StateWriter& w, const std::vector<T, Alloc>& v) {
    w.PutVarint(v.size());
    for (const auto& e : v) internal::Encode(w, static_cast<const T&>(e));
  }
  static std::vector<T, Alloc> Decode(internal::StateReader& r) {
    const uint64_t n = r.GetCount("vector size");
    std::vector<T, Alloc> v;
    v.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n && r.ok(); ++i) v.push_back(internal::Decode<T>(r));
    return v;
  }
};

template <typename T>
struct StateCodec<std::optional<T>> {
  static void Encode(internal::StateWriter& w, const std::optional<T>& v) {
    w.PutU8(v.has_value() ? 1 : 0);
    if (v.has_value()) internal::Encode(w, *v);
  }
  static std::optional<T> Decode(internal::StateReader& r) {
    const size_t at = r.position();
    const uint8_t tag = r.GetU8("optional tag");
    if (tag > 1) {
      r.Fail(absl::StrCat("optional tag at byte ", at, " of ", r.size(), " is ",
                          static_cast<int>(tag), ", not 0 or 1"));
    }
    if (tag != 1) return std::nullopt;
    return internal::Decode<T>(r);
  }
};

// A variant: its index (varint), then the alternative's value.  By index, so
// that a variant with the same type twice (std::variant<A, A>, the tagged
// union of a self-join) round-trips to the same alternative.
template <typename... Ts>
struct StateCodec<std::variant<Ts...>> {
  using V = std::variant<Ts...>;
  static void Encode(internal::StateWriter& w, const V& v) {
    w.PutVarint(v.index());
    EncodeAt(w, v, std::index_sequence_for<Ts...>());
  }
  static V Decode(internal::StateReader& r) {
    const size_t at = r.position();
    uint64_t index = r.GetVarint("variant index");
    if (r.ok() && index >= sizeof...(Ts)) {
      r.Fail(absl::StrCat("variant index at byte ", at, " of ", r.size(), " is ", index,
                          ", not below ", sizeof...(Ts)));
    }
    if (!r.ok()) index = 0;  // the failed reader gives an empty first alternative
    return DecodeAt(r, index, std::index_sequence_for<Ts...>());
  }

 private:
  template <size_t... I>
  static void EncodeAt(internal::StateWriter& w, const V& v, std::index_sequence<I...>) {
    ((v.index() == I ? internal::Encode(w, std::get<I>(v)) : void()), ...);
  }
  template <size_t... I>
  static V DecodeAt(internal::StateReader& r, uint64_t index, std::index_sequence<I...>) {
    std::optional<V> out;
    ((index == I ? (void)out.emplace(std::in_place_index<I>,
                                     internal::Decode<std::variant_alternative_t<I, V>>(r))
                 : void()),
     ...);
    return std::move(*out);
  }
};

namespace internal {
// Maps: a count, then (key, value) pairs in iteration order.
template <typename M>
struct MapCodec {
  using K = typename M::key_type;
  using V = typename M::mapped_type;
  static void Encode(StateWriter& w, const M& m) {
    w.PutVarint(m.size());
    for (const auto& [k, v] : m) {
      internal::Encode(w, k);
      internal::Encode(w, v);
    }
  }
  static M Decode(StateReader& r) {
    const uint64_t n = r.GetCount("map size");
    M m;
    if constexpr (requires { m.reserve(size_t{0}); }) m.reserve(static_cast<size_t>(n));
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      K k = internal::Decode<K>(r);
      V v = internal::Decode<V>(r);
      if (!r.ok()) break;
      m.insert_or_assign(std::move(k), std::move(v));
    }
    return m;
  }
};
}  // namespace internal

template <typename K, typename V, typename C, typename A>
struct StateCodec<std::map<K, V, C, A>> : internal::MapCodec<std::map<K, V, C, A>> {};

// Iteration order, hence the bytes, may differ between two equal maps (and
// between processes); what is read back is equal.
template <typename K, typename V, typename H, typename E, typename A>
struct StateCodec<absl::flat_hash_map<K, V, H, E, A>>
    : internal::MapCodec<absl::flat_hash_map<K, V, H, E, A>> {};

}  // namespace tidemark

#endif  // TM_RUNTIME_STATE_CODEC_H_
