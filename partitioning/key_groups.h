// partitioning/key_groups.h
//
// Key groups: how key_by decides which subtask owns a key.  This is Flink's
// KeyGroupRangeAssignment, reproduced exactly so that a key lands on the same
// subtask index a Flink job with the same parallelism and max parallelism
// would use (docs/semantics.md, section 8):
//
//   key_group = MurmurHash(JavaHashCode(key)) % max_parallelism
//   subtask   = key_group * parallelism / max_parallelism
//
// so subtask i owns the contiguous key-group range
//   [ (i*maxP + p - 1) / p , ((i+1)*maxP - 1) / p ].
//
// The mapping depends on nothing but the key, parallelism and max
// parallelism: it is the same in every run and on every machine.
//
// Key hashing (KeyHash<K>) reproduces the hashCode() of the Java object a
// Flink job would key by, so that every key lands on Flink's subtask.  Key
// types accepted, and the Java type each hashes like:
//
//   C++ key type                         Java key type  hashCode
//   std::string, std::string_view,       String         31 * h + c over the UTF-16 code units of
//   const char*, char* (NUL-terminated)                 new String(bytes, UTF_8): malformed UTF-8
//                                                       becomes U+FFFD as Java 17's decoder does it
//   std::u16string, std::u16string_view  String         the same, over these UTF-16 code units
//   bool                                 Boolean        1231 / 1237
//   char                                 Character      the byte as a Latin-1 code unit, 0..255
//                                                       (ASCII as is; 0xE9 is U+00E9, never
//                                                       negative whether char is signed or not)
//   char16_t                             Character      the UTF-16 code unit
//   signed char (int8_t)                 Byte           the value
//   short (int16_t)                      Short          the value
//   int (int32_t)                        Integer        the value
//   long long, long (int64_t)            Long           (int)(v ^ (v >>> 32))
//                                                       (a 32-bit long hashes as Integer)
//   float                                Float          floatToIntBits (every NaN 0x7fc00000;
//                                                       -0.0f differs from 0.0f)
//   double                               Double         (int)(b ^ (b >>> 32)), b = doubleToLongBits
//                                                       (every NaN 0x7ff8000000000000)
//   std::pair<A, B>                      Tuple2         h = 0; h = 31 * h + field hash, per field
//   std::tuple<T...> (0 to 25 fields)    Tuple0..25     (fields of any type above; nests)
//   a type T with `int32_t JavaHashCode(const T&)` found by argument-dependent lookup: what it
//   returns (write the hashCode() of the Java object the Flink job keys by).
//
// Every other type is rejected at compile time, with a message naming the fix,
// instead of being hashed some other way (which would put its keys on other
// subtasks than Flink's): unsigned integers (Java has none: cast to int32_t or
// int64_t, whichever the Flink job uses), char8_t / char32_t / wchar_t (cast to
// char16_t or int32_t), long double (cast to double), enums (Java's
// Enum.hashCode is per-JVM: key by an integer or a string), and any other class
// without a JavaHashCode.  Specialising tidemark::KeyHash<K> still overrides
// all of this for K.
#ifndef TM_PARTITIONING_KEY_GROUPS_H_
#define TM_PARTITIONING_KEY_GROUPS_H_

#include <bit>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tidemark {

inline constexpr int kDefaultMaxParallelism = 128;
inline constexpr int kUpperBoundMaxParallelism = 1 << 15;

// Java's String.hashCode of UTF-8 text, computed over UTF-16 code units.
// Malformed UTF-8 bytes count as U+FFFD, as Java's decoder substitutes them.
int32_t JavaStringHashCode(std::string_view utf8);

// Flink's MathUtils.murmurHash: never negative.  Inline: it runs once per
// record of every key_by.
inline int32_t FlinkMurmurHash(int32_t code_in) {
  auto rotl = [](uint32_t x, int r) { return (x << r) | (x >> (32 - r)); };
  uint32_t code = static_cast<uint32_t>(code_in);
  code *= 0xcc9e2d51u;
  code = rotl(code, 15);
  code *= 0x1b873593u;
  code = rotl(code, 13);
  code = code * 5 + 0xe6546b64u;
  code ^= 4;
  code ^= code >> 16;
  code *= 0x85ebca6bu;
  code ^= code >> 13;
  code *= 0xc2b2ae35u;
  code ^= code >> 16;
  // Java: code >= 0 ? code : code != MIN_VALUE ? -code : 0, computed without
  // a branch: the sign is random, so a branch mispredicts on every other
  // record of a key_by (measured: ~6 ns of ~37 ns per record end to end, see
  // bench/RESULTS.md).  Identical for all 2^32 inputs.
  const uint32_t neg = static_cast<uint32_t>(static_cast<int32_t>(code) >> 31);  // ~0 if < 0
  return static_cast<int32_t>(((code ^ neg) - neg) & 0x7fffffffu);
}

inline int ComputeKeyGroup(int32_t key_hash, int max_parallelism) {
  return FlinkMurmurHash(key_hash) % max_parallelism;
}
inline int KeyGroupToSubtask(int key_group, int max_parallelism, int parallelism) {
  return static_cast<int>(static_cast<int64_t>(key_group) * parallelism / max_parallelism);
}
// First and last (inclusive) key group of `subtask`.
int KeyGroupRangeStart(int subtask, int max_parallelism, int parallelism);
int KeyGroupRangeEnd(int subtask, int max_parallelism, int parallelism);
// The subtasks of a run at `old_parallelism` whose key-group ranges intersect
// that of `subtask` at `parallelism` (same max parallelism), in order: whose
// keyed state subtask `subtask` restores when a job is rescaled.  Ranges are
// contiguous and ordered, so these are the old subtasks of the range's first
// through last key group.
std::vector<int> OverlappingSubtasks(int subtask, int parallelism, int old_parallelism,
                                     int max_parallelism);
// Flink's default when the user sets none: min(max(roundUpPow2(p + p/2), 128), 32768).
int DefaultMaxParallelism(int parallelism);
// 0 < parallelism <= max_parallelism <= 32768.
absl::Status ValidateParallelism(int parallelism, int max_parallelism);

// Java's String.hashCode of UTF-16 code units.
int32_t JavaStringHashCode(std::u16string_view utf16);

namespace internal {

// Found by ordinary lookup so that the call below is always a call, and
// resolved by argument-dependent lookup to the user's JavaHashCode.
void JavaHashCode() = delete;

template <typename K>
concept HasJavaHashCode = requires(const K& key) {
  { JavaHashCode(key) } -> std::same_as<int32_t>;
};

template <typename K>
inline constexpr bool kIsCharacter =
    std::is_same_v<K, char> || std::is_same_v<K, char8_t> || std::is_same_v<K, char16_t> ||
    std::is_same_v<K, char32_t> || std::is_same_v<K, wchar_t>;

// signed char, short, int, long, long long: Java's Byte, Short, Integer, Long.
template <typename K>
inline constexpr bool kIsSignedJavaInteger =
    !kIsCharacter<K> && std::is_signed<K>::value && std::is_integral<K>::value &&
    (sizeof(K) == 1 || sizeof(K) == 2 || sizeof(K) == 4 || sizeof(K) == 8);

template <typename K>
inline constexpr bool kIsUnsignedInteger = !kIsCharacter<K> && !std::is_same_v<K, bool> &&
                                           std::is_unsigned<K>::value && std::is_integral<K>::value;

// Characters other than char and char16_t.
template <typename K>
inline constexpr bool kIsOtherCharacter =
    std::is_same_v<K, char8_t> || std::is_same_v<K, char32_t> || std::is_same_v<K, wchar_t>;

// Types rejected below with a message of their own.
template <typename K>
inline constexpr bool kHasOwnRejection = kIsUnsignedInteger<K> || kIsOtherCharacter<K> ||
                                         std::is_same_v<K, long double> || std::is_enum_v<K>;

inline int32_t CombineTupleHash(int32_t h, int32_t field) {
  return static_cast<int32_t>(31 * static_cast<uint32_t>(h) + static_cast<uint32_t>(field));
}

}  // namespace internal

// Every type that none of the specialisations below accepts: a type with a
// JavaHashCode found by argument-dependent lookup, or a compile error.
template <typename K, typename Enable = void>
struct KeyHash {
  static constexpr bool kCustom = internal::HasJavaHashCode<K>;
  static_assert(kCustom || !internal::kIsUnsignedInteger<K>,
                "tidemark: unsigned key types have no Java-compatible hashCode (Java has no "
                "unsigned integers); key by the signed type the Flink job uses: int32_t "
                "(Integer, same bits) or int64_t (Long)");
  static_assert(kCustom || !internal::kIsOtherCharacter<K>,
                "tidemark: char8_t / char32_t / wchar_t keys have no Java-compatible hashCode; "
                "key by char16_t (Java Character, one UTF-16 code unit), int32_t (Integer) or a "
                "string");
  static_assert(kCustom || !std::is_same_v<K, long double>,
                "tidemark: long double keys have no Java-compatible hashCode; key by double "
                "(Java Double)");
  static_assert(kCustom || !std::is_enum_v<K>,
                "tidemark: enum keys have no Java-compatible hashCode (Java's Enum.hashCode "
                "differs per JVM); key by static_cast<int32_t>(value) or a std::string name, or "
                "provide `int32_t JavaHashCode(const K&)` found by ADL");
  static_assert(kCustom || internal::kHasOwnRejection<K>,
                "tidemark: key type has no Java-compatible hashCode; provide `int32_t "
                "JavaHashCode(const K&)` found by ADL (the hashCode() of the Java key), or key "
                "by a std::string / signed integer / double / float / bool / char / std::pair / "
                "std::tuple of those");
  int32_t operator()(const K& key) const requires internal::HasJavaHashCode<K> {
    return JavaHashCode(key);
  }
};

// String
template <>
struct KeyHash<std::string> {
  int32_t operator()(const std::string& key) const { return JavaStringHashCode(key); }
};
template <>
struct KeyHash<std::string_view> {
  int32_t operator()(std::string_view key) const { return JavaStringHashCode(key); }
};
template <>
struct KeyHash<const char*> {
  // A null pointer hashes as Java's null field of a tuple: 0.
  int32_t operator()(const char* key) const {
    return key == nullptr ? 0 : JavaStringHashCode(std::string_view(key));
  }
};
template <>
struct KeyHash<char*> : KeyHash<const char*> {};
template <size_t N>
struct KeyHash<char[N]> {  // a string literal: up to its first NUL
  int32_t operator()(const char (&key)[N]) const {
    size_t n = 0;
    while (n < N && key[n] != '\0') ++n;
    return JavaStringHashCode(std::string_view(key, n));
  }
};
template <>
struct KeyHash<std::u16string> {
  int32_t operator()(const std::u16string& key) const { return JavaStringHashCode(key); }
};
template <>
struct KeyHash<std::u16string_view> {
  int32_t operator()(std::u16string_view key) const { return JavaStringHashCode(key); }
};

// Boolean
template <>
struct KeyHash<bool> {
  int32_t operator()(bool b) const { return b ? 1231 : 1237; }
};

// Character
template <>
struct KeyHash<char> {
  int32_t operator()(char c) const { return static_cast<unsigned char>(c); }
};
template <>
struct KeyHash<char16_t> {
  int32_t operator()(char16_t c) const { return c; }
};

// Byte, Short, Integer, Long
template <typename K>
struct KeyHash<K, std::enable_if_t<internal::kIsSignedJavaInteger<K>>> {
  int32_t operator()(K key) const {
    if constexpr (sizeof(K) <= 4) {
      return static_cast<int32_t>(key);
    } else {
      const uint64_t v = static_cast<uint64_t>(key);
      return static_cast<int32_t>(static_cast<uint32_t>(v ^ (v >> 32)));
    }
  }
};

// Float, Double
template <>
struct KeyHash<float> {
  int32_t operator()(float f) const {
    return std::isnan(f) ? 0x7fc00000 : std::bit_cast<int32_t>(f);  // NaN: Float.floatToIntBits
  }
};
template <>
struct KeyHash<double> {
  int32_t operator()(double d) const {
    const uint64_t bits = std::isnan(d) ? uint64_t{0x7ff8000000000000}
                                        // NaN: Double.doubleToLongBits
                                        : std::bit_cast<uint64_t>(d);
    return static_cast<int32_t>(static_cast<uint32_t>(bits ^ (bits >> 32)));
  }
};

// Tuple2 .. Tuple25 (and Tuple0, Tuple1): Flink's TupleN.hashCode.
template <typename A, typename B>
struct KeyHash<std::pair<A, B>> {
  int32_t operator()(const std::pair<A, B>& p) const {
    return internal::CombineTupleHash(KeyHash<std::remove_cvref_t<A>>{}(p.first),
                                      KeyHash<std::remove_cvref_t<B>>{}(p.second));
  }
};
template <typename... Ts>
struct KeyHash<std::tuple<Ts...>> {
  static_assert(sizeof...(Ts) <= 25,
                "tidemark: a std::tuple key has at most 25 fields, as Flink's Tuple25; nest "
                "tuples or provide `int32_t JavaHashCode(const K&)` found by ADL");
  int32_t operator()(const std::tuple<Ts...>& t) const {
    return std::apply(
        [](const auto&... fields) {
          int32_t h = 0;
          ((h = internal::CombineTupleHash(
                h, KeyHash<std::remove_cvref_t<decltype(fields)>>{}(fields))),
           ...);
          return h;
        },
        t);
  }
};

namespace internal {

// Float.floatToIntBits and Double.doubleToLongBits: the bits, every NaN one.
inline uint32_t JavaFloatBits(float f) {
  return std::isnan(f) ? uint32_t{0x7fc00000} : std::bit_cast<uint32_t>(f);
}
inline uint64_t JavaDoubleBits(double d) {
  return std::isnan(d) ? uint64_t{0x7ff8000000000000} : std::bit_cast<uint64_t>(d);
}

// Whether K is, or holds in a pair or tuple, a float or double: the keys
// whose Java equals() differs from C++'s ==.
template <typename K>
inline constexpr bool kHasFloatingField = std::is_floating_point_v<K>;
template <typename A, typename B>
inline constexpr bool kHasFloatingField<std::pair<A, B>> =
    kHasFloatingField<std::remove_cvref_t<A>> || kHasFloatingField<std::remove_cvref_t<B>>;
template <typename... Ts>
inline constexpr bool kHasFloatingField<std::tuple<Ts...>> =
    (kHasFloatingField<std::remove_cvref_t<Ts>> || ...);

}  // namespace internal

// Java's equals() of the keys KeyHash accepts, the companion of KeyHash:
// `==`, except that Float and Double compare floatToIntBits and
// doubleToLongBits, alone or in a pair or tuple.  So every NaN is one key and
// 0.0 and -0.0 are two, as in Flink (whose heap backend compares keys with
// equals() and whose RocksDB backend compares their serialised bytes).
template <typename K>
struct KeyEquals {
  bool operator()(const K& a, const K& b) const {
    if constexpr (std::is_same_v<K, float>) {
      return internal::JavaFloatBits(a) == internal::JavaFloatBits(b);
    } else if constexpr (std::is_same_v<K, double>) {
      return internal::JavaDoubleBits(a) == internal::JavaDoubleBits(b);
    } else {
      return a == b;
    }
  }
};
template <typename A, typename B>
struct KeyEquals<std::pair<A, B>> {
  bool operator()(const std::pair<A, B>& a, const std::pair<A, B>& b) const {
    return KeyEquals<std::remove_cvref_t<A>>{}(a.first, b.first) &&
           KeyEquals<std::remove_cvref_t<B>>{}(a.second, b.second);
  }
};
template <typename... Ts>
struct KeyEquals<std::tuple<Ts...>> {
  bool operator()(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b) const {
    return Each(a, b, std::index_sequence_for<Ts...>{});
  }

 private:
  template <size_t... I>
  static bool Each(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b,
                   std::index_sequence<I...>) {
    return (KeyEquals<std::remove_cvref_t<Ts>>{}(std::get<I>(a), std::get<I>(b)) && ...);
  }
};

namespace internal {

// Java's compareTo of the keys KeyEquals compares: Float.compare and
// Double.compare (-0.0 before 0.0, every NaN one value after +infinity),
// pairs and tuples field by field.
template <typename K>
struct JavaKeyLess {
  bool operator()(const K& a, const K& b) const {
    if constexpr (std::is_same_v<K, float>) {
      return a < b || (!(a > b) && static_cast<int32_t>(JavaFloatBits(a)) <
                                       static_cast<int32_t>(JavaFloatBits(b)));
    } else if constexpr (std::is_same_v<K, double>) {
      return a < b || (!(a > b) && static_cast<int64_t>(JavaDoubleBits(a)) <
                                       static_cast<int64_t>(JavaDoubleBits(b)));
    } else {
      return a < b;
    }
  }
};
template <typename A, typename B>
struct JavaKeyLess<std::pair<A, B>> {
  bool operator()(const std::pair<A, B>& a, const std::pair<A, B>& b) const {
    if (JavaKeyLess<std::remove_cvref_t<A>>{}(a.first, b.first)) return true;
    if (!KeyEquals<std::remove_cvref_t<A>>{}(a.first, b.first)) return false;
    return JavaKeyLess<std::remove_cvref_t<B>>{}(a.second, b.second);
  }
};
template <typename... Ts>
struct JavaKeyLess<std::tuple<Ts...>> {
  bool operator()(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b) const {
    return From<0>(a, b);
  }

 private:
  template <size_t I>
  static bool From(const std::tuple<Ts...>& a, const std::tuple<Ts...>& b) {
    if constexpr (I == sizeof...(Ts)) {
      return false;
    } else {
      using F = std::remove_cvref_t<std::tuple_element_t<I, std::tuple<Ts...>>>;
      if (JavaKeyLess<F>{}(std::get<I>(a), std::get<I>(b))) return true;
      if (!KeyEquals<F>{}(std::get<I>(a), std::get<I>(b))) return false;
      return From<I + 1>(a, b);
    }
  }
};

}  // namespace internal

// The order of sorted keyed state (MapState's entries, broadcast state):
// std::less<K>, except for keys with a float or double, which sort as Java
// compares them, an order in which a NaN key is one key (< is no order there).
template <typename K>
using KeyLess =
    std::conditional_t<internal::kHasFloatingField<K>, internal::JavaKeyLess<K>, std::less<K>>;

// The key group of `key`.
template <typename K>
int KeyGroupOf(const K& key, int max_parallelism) {
  return ComputeKeyGroup(KeyHash<K>{}(key), max_parallelism);
}

// The subtask index that owns `key`.
template <typename K>
int SubtaskForKey(const K& key, int max_parallelism, int parallelism) {
  return KeyGroupToSubtask(KeyGroupOf(key, max_parallelism), max_parallelism, parallelism);
}

}  // namespace tidemark

#endif  // TM_PARTITIONING_KEY_GROUPS_H_
