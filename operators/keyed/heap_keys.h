// operators/keyed/heap_keys.h
//
// How heap state, windows and timers find a key: with absl's hash and `==`
// for every key type whose Java equals() is `==`, and, for a key that is or
// holds a float or double, with KeyEquals (partitioning/key_groups.h) and a
// hash of the same bits.  So a NaN key is one key, not a new one per record
// (NaN != NaN), and 0.0 and -0.0 are two keys, as in Flink and on tidemark's
// RocksDB backend, which compares the keys' bytes.
#ifndef TM_OPERATORS_KEYED_HEAP_KEYS_H_
#define TM_OPERATORS_KEYED_HEAP_KEYS_H_

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "tidemark/partitioning/key_groups.h"

namespace tidemark::internal {

template <typename T>
inline constexpr bool kIsStdPair = false;
template <typename A, typename B>
inline constexpr bool kIsStdPair<std::pair<A, B>> = true;
template <typename T>
inline constexpr bool kIsStdTuple = false;
template <typename... Ts>
inline constexpr bool kIsStdTuple<std::tuple<Ts...>> = true;

// Feeds `v` to an absl hash state as KeyEquals compares it.
template <typename H, typename T>
H CombineJavaKey(H h, const T& v) {
  if constexpr (std::is_same_v<T, float>) {
    return H::combine(std::move(h), JavaFloatBits(v));
  } else if constexpr (std::is_same_v<T, double>) {
    return H::combine(std::move(h), JavaDoubleBits(v));
  } else if constexpr (kIsStdPair<T>) {
    return CombineJavaKey(CombineJavaKey(std::move(h), v.first), v.second);
  } else if constexpr (kIsStdTuple<T>) {
    return std::apply(
        [&h](const auto&... fields) {
          H s = std::move(h);
          ((s = CombineJavaKey(std::move(s), fields)), ...);
          return s;
        },
        v);
  } else {
    return H::combine(std::move(h), v);
  }
}

// The hash that goes with KeyEquals<K>.
template <typename K>
struct JavaKeyHash {
  size_t operator()(const K& key) const { return absl::Hash<View>{}(View{&key}); }

 private:
  struct View {
    const K* key;
    template <typename H>
    friend H AbslHashValue(H h, View v) {
      return CombineJavaKey(std::move(h), *v.key);
    }
  };
};

// A hash map and set of keys, and the hash and equality of one key, as heap
// state compares keys.  For keys without a float or double these are absl's
// own defaults (with their heterogeneous lookup), unchanged.
template <typename K, typename V>
using KeyMap = std::conditional_t<kHasFloatingField<K>,
                                  absl::flat_hash_map<K, V, JavaKeyHash<K>, KeyEquals<K>>,
                                  absl::flat_hash_map<K, V>>;
template <typename K>
using KeySet =
    std::conditional_t<kHasFloatingField<K>, absl::flat_hash_set<K, JavaKeyHash<K>, KeyEquals<K>>,
                       absl::flat_hash_set<K>>;

template <typename K>
size_t HeapKeyHash(const K& key) {
  if constexpr (kHasFloatingField<K>) {
    return JavaKeyHash<K>{}(key);
  } else {
    return absl::Hash<K>{}(key);
  }
}
template <typename K>
bool HeapKeyEquals(const K& a, const K& b) {
  return KeyEquals<K>{}(a, b);
}

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_KEYED_HEAP_KEYS_H_
