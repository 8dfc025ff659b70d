// partitioning/key_groups.h
//
// Key groups: how key_by decides which subtask owns a key.  This is Flink's
// KeyGroupRangeAssignment, reproduced exactly so that a string or integer key
// lands on the same subtask index a Flink job with the same parallelism and
// max parallelism would use (docs/flink-semantics.md, section 8):
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
// Key hashing (KeyHash<K>): std::string / std::string_view / const char* use
// Java's String.hashCode over the UTF-16 code units of the (UTF-8) text;
// integers up to 32 bits use their value (Integer.hashCode), 64-bit integers
// Long.hashCode; bool Boolean.hashCode; any other type absl::Hash, truncated to
// 32 bits.  Specialise tidemark::KeyHash<K> to choose another hash.
#ifndef TM_PARTITIONING_KEY_GROUPS_H_
#define TM_PARTITIONING_KEY_GROUPS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "absl/hash/hash.h"
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
// Flink's default when the user sets none: min(max(roundUpPow2(p + p/2), 128), 32768).
int DefaultMaxParallelism(int parallelism);
// 0 < parallelism <= max_parallelism <= 32768.
absl::Status ValidateParallelism(int parallelism, int max_parallelism);

template <typename K, typename Enable = void>
struct KeyHash {
  int32_t operator()(const K& key) const {
    return static_cast<int32_t>(static_cast<uint64_t>(absl::Hash<K>{}(key)));
  }
};

template <>
struct KeyHash<std::string> {
  int32_t operator()(const std::string& key) const { return JavaStringHashCode(key); }
};
template <>
struct KeyHash<std::string_view> {
  int32_t operator()(std::string_view key) const { return JavaStringHashCode(key); }
};
template <>
struct KeyHash<bool> {
  int32_t operator()(bool b) const { return b ? 1231 : 1237; }
};
template <typename K>
struct KeyHash<
    K, std::enable_if_t<std::is_integral_v<K> && !std::is_same_v<K, bool> && (sizeof(K) <= 4)>> {
  int32_t operator()(K key) const { return static_cast<int32_t>(key); }
};
template <typename K>
struct KeyHash<K, std::enable_if_t<std::is_integral_v<K> && (sizeof(K) == 8)>> {
  int32_t operator()(K key) const {
    const uint64_t v = static_cast<uint64_t>(key);
    return static_cast<int32_t>(static_cast<uint32_t>(v ^ (v >> 32)));
  }
};

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
