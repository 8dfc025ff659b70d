// operators/keyed/keyed_state_store.h
//
// KeyedStateStore<K>: the keyed state of one operator instance (Flink's heap
// KeyedStateBackend), and the typed handles user functions see (Flink's
// ValueState, ListState, ReducingState, AggregatingState, MapState).
//
// The store holds named tables.  A table is typed by its namespace N and its
// value V, and maps (key, namespace) to V: the namespace is the window for
// window state and VoidNamespace for state that belongs to no window (keyed
// process functions, a window function's per-key state), in which case the
// table is keyed by the key alone.  Table<V, N>(name) creates the table
// on first use and throws std::logic_error when `name` was created with other
// types (as Flink's state descriptors must agree on the type).  Tables live as
// long as the store, so a reference to one may be kept: the window operator
// looks its tables up once, when it is built; a process function's handles
// look theirs up by name on each get_*_state call.
//
// A handle (ValueState<K, V, N>, ...) is a table bound to the current key and
// namespace: it reads and writes the entry of that (key, namespace) only, and
// clear() drops that entry only (other keys keep theirs).  A handle is valid
// while the key and namespace it was made for are (for process functions:
// during the call it was obtained in).  An entry exists only while it holds
// something: ListState::update({}), MapState::remove of the last mapping and
// clear() erase it, as Flink's heap backend.
//
//   ValueState<K, V>        value() (nullopt when none), value_or, update, clear
//   ListState<K, V>         get, add, add_all, update, clear, mutable_list
//   ReducingState<K, V, F>  add (reduced with F on arrival), get, clear
//   AggregatingState<K, A>  add (A::add into A's accumulator), get (A's
//                           result), clear
//   MapState<K, UK, UV>     get, put, put_all, contains, remove, entries,
//                           keys, values, is_empty, clear; entries, keys and
//                           values come in UK order (Flink leaves the order
//                           unspecified; tidemark fixes it, so a job's output
//                           does not depend on hashing)
//
// Every handle takes the namespace type as its last parameter, VoidNamespace
// by default.
//
// State time-to-live (StateTtlConfig, at the end of this file): the Ttl*
// handles (TtlValueState, TtlListState, TtlMapState, TtlReducingState,
// TtlAggregatingState) keep each value, list element or map entry as a
// TtlValue (the value and its last access time, processing time) in a table
// of their own; get_*_state(name, ..., ttl_config) of a keyed process
// function returns them.  Their reads return copies (TtlListState::get,
// TtlMapState::entries), because expired elements are left out.  State
// without a TTL is untouched by any of this.
//
// Not here: the window-major contents of tumbling and sliding windows with a
// reduce or aggregate function and the default trigger
// (operators/window/time_window_table.h) keep their own table: a state layout
// specialised for that case (window-major, implicit timers), deliberately
// outside this store; the general window path keeps its contents, trigger
// state and function state in a KeyedStateStore.
//
// Checkpoints: KeyedStateStore::Snapshot(w) writes every table (and
// Restore(r, range) reads them back, keeping the entries whose key lies in
// `range`, the key groups of the restoring instance, and merging with what is
// there: it may be called once per old subtask whose key groups intersect the
// range).  A table is written as a count and (key, [namespace,] value)
// entries, one table at a time, so that entries can be filtered by key group
// on restore.  A table that the restored job has not created yet (a process
// function creates its states on first use) keeps its bytes until Table<V, N>
// creates it, then decodes them with its types; a snapshot taken before that
// writes the bytes again.  A table whose key, namespace or value type has no
// tidemark::StateCodec (runtime/state/state_codec.h) compiles and works, and
// throws at Snapshot with the type's name.
//
// Asynchronous snapshots: a table made by HandleTable on the heap (only the
// handles touch it) is encoded off the task thread.  Its snapshot freezes
// the entries into copy-on-write layers (StateTable::SnapshotBlobs), the
// task copies an entry up before writing it while a snapshot reads, and
// KeyedStateStore::Trim folds the layers back between records.  Such a
// table's `map` then holds only part of its entries: read it through the
// handles or ForEachEntry.
//
// Key groups (KeyGroupRange): the key -> key group function is key_by's
// (partitioning/key_groups.h).  Key types with a KeyHash of their own
// (a user specialisation of tidemark::KeyHash, not seen here) are not
// filtered: every entry is kept, which is exact when the old state comes from
// the same subtask.
//
// State backends (docs/checkpoints.md "State backends"): on the heap (the
// default) a table's entries are its `map`.  On RocksDB (UseBackend, with
// the job's StateBackend) the tables made by HandleTable (process function
// handles, window contents) live in a KvStore (runtime/state/kv_store.h),
// and `map` is a cache of decoded entries in front of it: Find reads through
// it, Erase deletes from both, and Trim (between records) writes a full
// cache back.  Code that reads `map` directly (trigger state, the interval
// join, broadcast state) uses Table, which stays on the heap.  A snapshot of
// a table on RocksDB has the heap's format, read from a RocksDB snapshot as
// a deferred part.
//
// Thread safety: none; one operator instance, one task thread.
#ifndef TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_
#define TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "tidemark/operators/keyed/cow_epoch.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/partitioning/key_groups.h"
#include "tidemark/runtime/core/detail/error_guard.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/kv_store.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

namespace internal {
// The namespace of state and timers that belong to no window.
struct VoidNamespace {
  friend bool operator==(const VoidNamespace&, const VoidNamespace&) { return true; }
  template <typename H>
  friend H AbslHashValue(H h, const VoidNamespace&) {
    return H::combine(std::move(h), 0);
  }
};
inline constexpr VoidNamespace kVoidNamespace{};

// The accumulator type of an aggregate function.
template <typename Agg>
using AccumulatorOf = std::decay_t<decltype(std::declval<Agg&>().create_accumulator())>;
// Its result type.
template <typename Agg>
using AggregateResultOf = std::decay_t<decltype(std::declval<Agg&>().get_result(
    std::declval<const AccumulatorOf<Agg>&>()))>;

// The (key, namespace) pair window state is keyed by.
template <typename K, typename W>
using KeyWindow = std::pair<K, W>;

// Whether key_by can compute the key group of a K (key_groups.h's KeyHash
// without a user specialisation): a constant, never an error.
template <typename K>
struct KeyGroupComputableTrait
    : std::bool_constant<std::is_same_v<K, std::string> || std::is_same_v<K, std::string_view> ||
                         std::is_same_v<K, std::u16string> || std::is_same_v<K, bool> ||
                         std::is_same_v<K, char> || std::is_same_v<K, char16_t> ||
                         std::is_same_v<K, float> || std::is_same_v<K, double> ||
                         kIsSignedJavaInteger<K> || HasJavaHashCode<K>> {};
template <typename K>
inline constexpr bool KeyGroupComputable = KeyGroupComputableTrait<std::remove_cv_t<K>>::value;
template <typename A, typename B>
struct KeyGroupComputableTrait<std::pair<A, B>>
    : std::bool_constant<KeyGroupComputable<A> && KeyGroupComputable<B>> {};
template <typename... Ts>
struct KeyGroupComputableTrait<std::tuple<Ts...>>
    : std::bool_constant<(KeyGroupComputable<Ts> && ...)> {};

// The key groups an operator instance owns: [first, last] of
// max_parallelism; every key when max_parallelism is 0 (All()).
struct KeyGroupRange {
  int first = 0;
  int last = -1;
  int max_parallelism = 0;

  static KeyGroupRange All() { return KeyGroupRange{}; }
  static KeyGroupRange Of(int subtask, int parallelism, int max_parallelism) {
    return KeyGroupRange{KeyGroupRangeStart(subtask, max_parallelism, parallelism),
                         KeyGroupRangeEnd(subtask, max_parallelism, parallelism), max_parallelism};
  }
  // The range of the instance `ctx` describes.
  static KeyGroupRange Of(const OperatorContext& ctx) {
    return Of(ctx.subtask_index(), ctx.parallelism(), ctx.max_parallelism());
  }
  bool all() const { return max_parallelism == 0 || (first == 0 && last == max_parallelism - 1); }
  // Whether `key` belongs to the range (always, see the file comment, for a
  // key type whose key group cannot be computed here).
  template <typename K>
  bool Contains(const K& key) const {
    if (all()) return true;
    if constexpr (KeyGroupComputable<K>) {
      const int g = ComputeKeyGroup(KeyHash<K>{}(key), max_parallelism);
      return g >= first && g <= last;
    } else {
      return true;
    }
  }
};

// Decodes the blob `bytes` (as PutBytes wrote it) with decode(reader); an
// error inside it is reported on `outer`, with `what`.
template <typename F>
void DecodeBlob(StateReader& outer, std::string_view bytes, std::string_view what, F&& decode) {
  StateReader r(bytes);
  decode(r);
  if (!r.ok()) {
    outer.Fail(std::string(what) + ": " + r.error());
  } else if (!r.AtEnd()) {
    outer.Fail(std::string(what) + ": " + std::to_string(r.remaining()) + " bytes left over");
  }
}

// A value with the processing time it was last written (or read, with
// StateTtlConfig::UpdateType::OnReadAndWrite): what a state with a time to
// live keeps per value, list element and map entry (Flink's TtlValue).
template <typename V>
struct TtlValue {
  V value;
  Timestamp last_access = 0;
  friend bool operator==(const TtlValue&, const TtlValue&) = default;
};
template <typename V>
struct HasStateCodecTrait<TtlValue<V>> : std::bool_constant<HasStateCodec<V>> {};

// Flink's TtlUtils.expired: last access + ttl (saturating) <= now.
inline bool TtlExpired(Timestamp last_access, int64_t ttl, Timestamp now) {
  return SaturatingAdd(last_access, ttl) <= now;
}

// What a table of TTL values needs at snapshot time.
struct TtlTableSettings {
  const Clock* clock = nullptr;
  int64_t ttl = 0;
  bool snapshot_cleanup = false;
};

// The shapes of TTL storage: a TtlValue, a vector of them (ListState), a map
// to them (MapState).
enum class TtlKind { kNone, kValue, kList, kMap };
template <typename V>
struct TtlStorage {
  static constexpr TtlKind kKind = TtlKind::kNone;
};
template <typename V>
struct TtlStorage<TtlValue<V>> {
  static constexpr TtlKind kKind = TtlKind::kValue;
};
template <typename V, typename A>
struct TtlStorage<std::vector<TtlValue<V>, A>> {
  static constexpr TtlKind kKind = TtlKind::kList;
  static const TtlValue<V>& Element(const TtlValue<V>& e) { return e; }
};
template <typename UK, typename V, typename C, typename A>
struct TtlStorage<std::map<UK, TtlValue<V>, C, A>> {
  static constexpr TtlKind kKind = TtlKind::kMap;
  template <typename E>
  static const TtlValue<V>& Element(const E& e) {
    return e.second;
  }
};
template <typename V>
inline constexpr bool kIsTtlStorage = TtlStorage<V>::kKind != TtlKind::kNone;
}  // namespace internal

// Checkpoints keep each value's last access time.
template <typename V>
struct StateCodec<internal::TtlValue<V>> {
  static void Encode(internal::StateWriter& w, const internal::TtlValue<V>& v) {
    internal::Encode(w, v.value);
    internal::Encode(w, v.last_access);
  }
  static internal::TtlValue<V> Decode(internal::StateReader& r) {
    V value = internal::Decode<V>(r);
    const Timestamp ts = internal::Decode<Timestamp>(r);
    return internal::TtlValue<V>{std::move(value), ts};
  }
};

namespace internal {
// RocksDB: the entries of the table whose keys start with `prefix`, from
// `snap`, in StateTable::Snapshot's format (a count, then the entries).  A
// stored key is the prefix, 2 bytes of key group, then the encoded key and
// namespace, as Snapshot writes them; a stored value is the encoded value:
// the bytes are copied, nothing is decoded, unless `filter` is given (state
// TTL's full-snapshot cleanup, StateTable::KvSnapshotFilter): it returns
// false to drop a value, else puts the bytes to write in *out.
// (keyed_state_store.cc, as the native checkpoint's codec below: compile
// cost, issue 24.)
using KvValueFilter = std::function<bool(std::string_view value, std::string* out)>;
void KvScanEntries(StateWriter& w, const KvSnapshot& snap, std::string_view prefix,
                   const KvValueFilter& filter = {});

// The store key prefix of the table numbered `id` (4 bytes, big-endian).
inline std::string KvTablePrefix(uint32_t id) {
  return std::string{static_cast<char>(id >> 24), static_cast<char>(id >> 16),
                     static_cast<char>(id >> 8), static_cast<char>(id)};
}

// Native incremental checkpoints of a store on RocksDB (docs/checkpoints.md,
// "Incremental checkpoints"): the pseudo table, in a KeyedStateStore's
// snapshot, whose one blob describes the store's files in the shared
// directory instead of its entries.
inline constexpr std::string_view kKvNativeTableName = "\x01tidemark:rocksdb-files";
// The pseudo table, first in a KeyedStateStore's snapshot, whose one blob
// lists each state's value type (a count, then name and typeid name pairs):
// a restore refuses a state read back as another type (Flink's
// StateMigrationException) instead of decoding its bytes as that type.
// Snapshots written before it have none and are not checked.
inline constexpr std::string_view kStateTypesTableName = "\x01tidemark:state-types";
struct KvNativeDescriptor {
  std::string shared_dir;
  int first = 0, last = -1, max_parallelism = 0;         // the instance's key groups
  std::vector<std::pair<std::string, uint32_t>> tables;  // name, table number
  std::vector<KvNativeFile> files;
};
inline constexpr uint32_t kKvNativeMagic = 0x544d524e;  // "TMRN"
std::string EncodeKvNative(const KvNativeDescriptor& d);
KvNativeDescriptor DecodeKvNative(StateReader& r);

class StateTableBase {
 public:
  virtual ~StateTableBase() = default;
  // Writes the entries; throws NoStateCodecError (naming `where`) when a type
  // has no codec.
  virtual void Snapshot(StateWriter& w, std::string_view where) const = 0;
  // Adds the entries of what Snapshot wrote whose key is in `range`.
  virtual void Restore(StateReader& r, const KeyGroupRange& range) = 0;
  // Incremental checkpoints (StateWriter::key_group_hint): the entries as
  // blobs in Snapshot's format, one per non-empty key group of
  // `max_parallelism` in ascending order (one empty blob when there is no
  // entry).  False, writing nothing, where the table cannot (a key type whose
  // key group is not computed here, snapshot cleanup of TTL state, a type
  // without a codec): Snapshot then writes it whole.
  virtual bool SnapshotByKeyGroup(int /*max_parallelism*/,
                                  std::vector<std::string>* /*blobs*/) const {
    return false;
  }
  // The RocksDB state backend (StateTable's AttachKv ... kv_prefix).
  virtual void AttachKv(KvStore* store, std::string prefix, int max_parallelism,
                        size_t cache_entries, std::string_view name) = 0;
  virtual bool on_kv() const = 0;
  virtual void Trim() = 0;
  virtual void FlushKv() = 0;
  // Asynchronous snapshots (StateTable's SnapshotBlobs ... num_layers).
  virtual void SnapshotBlobs(StateWriter& w, std::string_view where) = 0;
  virtual void EnableCopyOnWrite() = 0;
  virtual bool copy_on_write() const = 0;
  virtual size_t num_layers() const = 0;
  virtual const std::string& kv_prefix() const = 0;
  // For a table on RocksDB: the filter its snapshot applies to the stored
  // values (empty: none), taken at the synchronous part.
  virtual KvValueFilter KvSnapshotFilter() const = 0;
  // Whether the table is on the heap, without a namespace and too large for
  // the caches: Prefetch loads its entries (KeyedStateStore::Prefetch).
  virtual bool WorthPrefetching() const = 0;
  // Starts loading the entry of `key` (a K, the store's key type) when
  // WorthPrefetching(); does nothing otherwise.
  virtual void Prefetch(const void* key) const = 0;
  // The value type's typeid name (kStateTypesTableName).
  virtual const char* type_tag() const = 0;
};

// The type a state's values are named by in kStateTypesTableName: its own,
// except where two types encode alike and one state is meant to move
// between them (top_n(1) keeps std::optional<T> under the name of top_n(n)'s
// std::vector<T>, bytes for bytes): those are named as one.
template <typename V>
struct StateTypeForTag {
  using type = V;
};
template <typename X>
struct StateTypeForTag<std::optional<X>> {
  using type = std::vector<X>;
};

// One named state: V per (key, namespace).
template <typename K, typename N, typename V>
class StateTable final : public StateTableBase {
 public:
  static constexpr bool kVoid = std::is_same_v<N, VoidNamespace>;
  const char* type_tag() const override { return typeid(typename StateTypeForTag<V>::type).name(); }
  // The namespace of an encoded key (none stored for VoidNamespace).
  static N DecodeNamespace(StateReader& r) {
    if constexpr (kVoid) {
      return N{};
    } else {
      return Decode<N>(r);
    }
  }
  using EntryKey = std::conditional_t<kVoid, K, KeyWindow<K, N>>;
  using Map = KeyMap<EntryKey, V>;

  // The map key of (key, ns): the key itself (a reference) without a
  // namespace, else the pair.
  static decltype(auto) KeyOf(const K& key, const N& ns) {
    if constexpr (kVoid) {
      return (key);
    } else {
      return EntryKey(key, ns);
    }
  }
  // The entry of (key, ns), null when none.  On RocksDB (kv != null) `map`
  // is a cache of deserialised entries in front of the store: a miss reads
  // the store and caches what it finds.
  // The entry is written through the pointer: with copy-on-write layers
  // (below) an entry a snapshot reads is copied up first.
  V* Find(const K& key, const N& ns) {
    auto it = map.find(KeyOf(key, ns));
    if (it != map.end()) return &it->second;
    if (!layers_.empty()) [[unlikely]]
      return FindBelow(KeyOf(key, ns), /*for_write=*/true);
    if (kv == nullptr) [[likely]]
      return nullptr;
    return KvLoad(key, ns);
  }
  // Find for reading only: never copies an entry up.
  const V* Peek(const K& key, const N& ns) {
    if (layers_.empty()) [[likely]]
      return Find(key, ns);
    auto it = map.find(KeyOf(key, ns));
    if (it != map.end()) return &it->second;
    return FindBelow(KeyOf(key, ns), /*for_write=*/false);
  }
  // The entry of (key, ns), value-initialised when none.
  V& GetOrCreate(const K& key, const N& ns) {
    if (kv != nullptr || !layers_.empty()) {
      if (V* v = Find(key, ns)) return *v;
      if (!layers_.empty()) ++layered_visible_;
    }
    return map[KeyOf(key, ns)];
  }
  // The entry of (key, ns), made from `init` when none; whether it was.
  template <typename Init>
  std::pair<V*, bool> TryEmplace(const K& key, const N& ns, Init&& init) {
    if (kv != nullptr || !layers_.empty()) {
      if (V* v = Find(key, ns)) return {v, false};
    }
    auto [it, inserted] = map.try_emplace(KeyOf(key, ns), std::forward<Init>(init));
    if (!layers_.empty() && inserted) ++layered_visible_;
    return {&it->second, inserted};
  }
  void Erase(const K& key, const N& ns) {
    if (!layers_.empty()) [[unlikely]] {
      if (Peek(key, ns) != nullptr) --layered_visible_;
      erased_.insert(EntryKey(KeyOf(key, ns)));
    }
    map.erase(KeyOf(key, ns));
    if (kv != nullptr) kv->Delete(KvKey(key, ns));
  }
  // f(entry key, value) for every entry, in no particular order (the
  // copy-on-write layers included).  f must not change the table.
  template <typename F>
  void ForEachEntry(F&& f) const {
    if (layers_.empty()) {
      for (const auto& [ek, v] : map) f(ek, v);
      return;
    }
    std::vector<LevelRef> levels{{&map, &erased_}};
    for (size_t i = layers_.size(); i-- > 0;)
      levels.push_back({&layers_[i]->map, &layers_[i]->erased});
    ForEachVisible(levels, [&](const typename Map::value_type& e) { f(e.first, e.second); });
  }

  static constexpr bool kEncodable = HasStateCodec<K> && HasStateCodec<N> && HasStateCodec<V>;
  static constexpr bool kCopyable =
      std::is_copy_constructible_v<V> && std::is_copy_constructible_v<EntryKey>;

  // Puts the table on RocksDB (see "State backends" in the file comment):
  // its entries live in `store` under keys that start with `prefix`, and
  // `map` caches at most `cache_entries` of them between records.
  void AttachKv(KvStore* store, std::string prefix, int max_parallelism, size_t cache_entries,
                std::string_view name) override {
    if constexpr (kEncodable) {
      kv = store;
      kv_prefix_ = std::move(prefix);
      kv_max_parallelism_ = max_parallelism;
      kv_cache_entries_ = cache_entries == 0 ? 1 : cache_entries;
      // Entries created before (none, as the store attaches on creation).
      FlushKv();
    } else {
      (void)store, (void)prefix, (void)max_parallelism, (void)cache_entries;
      ThrowFirstMissingCodec<K, N, V>("state '" + std::string(name) +
                                      "' on the RocksDB state backend");
    }
  }
  bool on_kv() const override { return kv != nullptr; }
  // See StateTableBase::Prefetch.  Below kPrefetchMinCapacity slots the
  // table is likely in the caches and the second hash would only cost.
  static constexpr size_t kPrefetchMinCapacity = size_t{1} << 14;
  bool WorthPrefetching() const override {
    return kVoid && kv == nullptr && map.capacity() >= kPrefetchMinCapacity;
  }
  void Prefetch(const void* key) const override {
    if constexpr (kVoid) {
      if (WorthPrefetching()) map.prefetch(*static_cast<const K*>(key));
    } else {
      (void)key;
    }
  }
  // Trim (below, between records): on RocksDB, writes the cached entries
  // back when there are more than the cache holds.  No reference into the
  // table may be held across it.
  // Writes every cached entry back to the store and empties the cache.
  void FlushKv() override {
    if constexpr (kEncodable) {
      if (kv == nullptr || map.empty()) return;
      std::string k, v;
      for (const auto& [ek, value] : map) {
        if constexpr (kVoid) {
          KvKeyInto(k, ek, N{});
        } else {
          KvKeyInto(k, ek.first, ek.second);
        }
        v.clear();
        StateWriter vw(&v);
        Encode(vw, value);
        kv->Put(k, v);
      }
      kv->Commit();
      map.clear();
    }
  }
  const std::string& kv_prefix() const override { return kv_prefix_; }
  KvValueFilter KvSnapshotFilter() const override {
    if constexpr (kEncodable && kIsTtlStorage<V>) {
      if (ttl.snapshot_cleanup && ttl.clock != nullptr) {
        return [now = ttl.clock->NowMillis(), ttl_ms = ttl.ttl](std::string_view in,
                                                                std::string* out) {
          StateReader r(in);
          const V v = Decode<V>(r);
          if (!r.ok())
            throw std::runtime_error("RocksDB state backend: a stored value does not decode");
          if (!AnyLive(v, now, ttl_ms)) return false;
          out->clear();
          StateWriter w(out);
          EncodeLive(w, v, now, ttl_ms);
          return true;
        };
      }
    }
    return {};
  }
  // On RocksDB (window contents: their counters and "left open" at close):
  // f(key, ns) for every entry in the store, after writing the cache back,
  // in key order; and the number of entries.
  template <typename F>
  void ForEachStoredKey(F&& f) {
    if constexpr (kEncodable) {
      if (kv == nullptr) return;
      FlushKv();
      kv->Snapshot()->Scan(kv_prefix_, [&](std::string_view k, std::string_view) {
        StateReader r(k.substr(kv_prefix_.size() + 2));
        K key = Decode<K>(r);
        N ns = DecodeNamespace(r);
        if (!r.ok())
          throw std::runtime_error("RocksDB state backend: a stored key does not decode");
        f(std::move(key), std::move(ns));
      });
    }
  }
  size_t CountStored() {
    if (kv == nullptr) return map.size();
    FlushKv();
    size_t n = 0;
    kv->Snapshot()->Scan(kv_prefix_, [&](std::string_view, std::string_view) { ++n; });
    return n;
  }

  void Snapshot(StateWriter& w, std::string_view where) const override {
    if (kv != nullptr) {
      const_cast<StateTable*>(this)->FlushKv();
      KvScanEntries(w, *kv->Snapshot(), kv_prefix_, KvSnapshotFilter());
      return;
    }
    if constexpr (kEncodable) {
      std::optional<Timestamp> live_at;
      if constexpr (kIsTtlStorage<V>) {
        if (ttl.snapshot_cleanup && ttl.clock != nullptr) live_at = ttl.clock->NowMillis();
      }
      if (!layers_.empty()) {
        std::vector<const Entry*> entries;
        ForEachEntryPtr([&](const Entry& e) { entries.push_back(&e); });
        return WriteEntries(w, entries, live_at, ttl.ttl);
      }
      WriteEntries(w, map, live_at, ttl.ttl);
    } else {
      ThrowFirstMissingCodec<K, N, V>(where);
    }
  }
  bool SnapshotByKeyGroup(int max_parallelism, std::vector<std::string>* blobs) const override {
    if constexpr (kEncodable && KeyGroupComputable<K>) {
      if constexpr (kIsTtlStorage<V>) {
        if (ttl.snapshot_cleanup && ttl.clock != nullptr) return false;
      }
      if (max_parallelism <= 0) return false;
      std::vector<const Entry*> entries;
      ForEachEntryPtr([&](const Entry& e) { entries.push_back(&e); });
      GroupBlobs(entries, max_parallelism, blobs);
      return true;
    } else {
      return false;
    }
  }

  // Asynchronous snapshots (docs/checkpoints.md "The snapshot's phases"):
  // a table that only handles touch (KeyedStateStore::HandleTable on the
  // heap) keeps its entries in copy-on-write layers while snapshots read
  // them.  The synchronous part of a snapshot freezes the entries written
  // since the last one (`map` and the tombstones move into a new layer:
  // O(1)) and takes shared pointers to every layer; the encoding is
  // deferred.  While a snapshot reads, the task writes an entry of a frozen
  // layer only after copying it up into `map` (Find), and an erase leaves a
  // tombstone; once no snapshot reads, it writes frozen entries in place and
  // Trim folds the layers back into one map, a few entries per call.  The
  // bytes are those of Snapshot / SnapshotByKeyGroup.
  bool copy_on_write() const override { return cow_; }
  void EnableCopyOnWrite() override {
    if constexpr (kCopyable) {
      if (kv == nullptr) cow_ = true;
    }
  }
  // Writes the table's blobs (a count, then each as PutBytes) as
  // KeyedStateStore::Snapshot does; deferred when copy-on-write is on.
  void SnapshotBlobs(StateWriter& w, std::string_view where) override {
    if constexpr (kEncodable) {
      if (cow_) {
        std::optional<Timestamp> live_at;
        if constexpr (kIsTtlStorage<V>) {
          if (ttl.snapshot_cleanup && ttl.clock != nullptr) live_at = ttl.clock->NowMillis();
        }
        struct View {
          std::shared_ptr<const void> guard;  // declared first: released last
          std::vector<std::shared_ptr<const Layer>> layers;
        };
        // An operator that never calls Trim still keeps few layers: fold
        // them here once no snapshot reads (the work is the entries written
        // since, not the table).
        if (layers_.size() >= 4 && Idle()) FoldAll();
        auto view = std::make_shared<View>();
        view->guard = Freeze();
        view->layers.assign(layers_.begin(), layers_.end());
        const int hint = KeyGroupComputable<K> && !live_at ? w.key_group_hint() : 0;
        const int64_t ttl_ms = ttl.ttl;
        w.Defer([view = std::move(view), hint, live_at, ttl_ms](StateWriter& out) {
          std::vector<LevelRef> levels;
          for (size_t i = view->layers.size(); i-- > 0;)
            levels.push_back({&view->layers[i]->map, &view->layers[i]->erased});
          std::vector<const Entry*> entries;
          ForEachVisible(levels, [&](const Entry& e) { entries.push_back(&e); });
          if (hint > 0) {
            std::vector<std::string> blobs;
            GroupBlobs(entries, hint, &blobs);
            out.PutVarint(blobs.size());
            for (const std::string& b : blobs) out.PutBytes(b);
            return;
          }
          out.PutVarint(1);
          out.PutBytesWith(SampledEstimate(entries),
                           [&](StateWriter& tw) { WriteEntries(tw, entries, live_at, ttl_ms); });
        });
        return;
      }
    }
    if (std::vector<std::string> groups; w.key_group_hint() > 0 && kv == nullptr &&
                                         SnapshotByKeyGroup(w.key_group_hint(), &groups)) {
      w.PutVarint(groups.size());
      for (const std::string& b : groups) w.PutBytes(b);
      return;
    }
    w.PutVarint(1);
    w.PutBytesWith(EncodedEstimate(map.size()), [&](StateWriter& tw) { Snapshot(tw, where); });
  }
  // A guess at the encoded bytes of `n` entries (PutBytesWith): their size
  // in memory, which is exact for keys and values of fixed size.
  static size_t EncodedEstimate(size_t n) { return 8 + n * (sizeof(EntryKey) + sizeof(V)); }
  // The same from the encoding of a few of them, a quarter over: values
  // with strings or containers encode larger than they are (Nexmark's bids
  // by half), and a string that outgrows its reservation copies itself into
  // fresh memory twice its size.  Reserved pages never written are never
  // touched, so a guess over costs nothing.
  template <typename EntryPointers>
  static size_t SampledEstimate(const EntryPointers& entries) {
    constexpr size_t kSample = 64;
    if (entries.size() <= kSample) return EncodedEstimate(entries.size());
    std::string bytes;
    StateWriter w(&bytes);
    for (size_t i = 0; i < kSample; ++i) EncodeEntry(w, *entries[i * (entries.size() / kSample)]);
    return 8 + entries.size() / kSample * bytes.size() * 5 / 4;
  }
  // Between records: folds up to `budget` entries of the layers back into
  // one map when no snapshot reads them.
  void Trim() override {
    if (!layers_.empty() && Idle()) Fold(kFoldBudget);
    if (kv != nullptr && map.size() > kv_cache_entries_) FlushKv();
  }
  // Frozen layers (for tests).
  size_t num_layers() const override { return layers_.size(); }
  // The entries a reader sees (ForEachEntry's count) on the heap: `map`'s
  // size, or while copy-on-write layers stand below it a count kept as
  // entries come and go (`map` then holds only those written since).  On
  // RocksDB, the cache's size.
  size_t VisibleSize() const { return layers_.empty() ? map.size() : layered_visible_; }
  // Folds every layer now (tests; no snapshot may read).
  void FoldAll() {
    while (!layers_.empty()) Fold(~size_t{0});
  }

  // One entry of a restore from another layout (the window operator's from
  // a window-major snapshot): written blind on RocksDB, as Restore writes
  // its entries; CommitRestore() after the last.
  void RestoreEntry(const K& key, const N& ns, V v) {
    if (kv != nullptr) {
      KvRestore(key, ns, v);
      return;
    }
    map.insert_or_assign(KeyOf(key, ns), std::move(v));
  }
  void CommitRestore() {
    if (kv != nullptr) kv->Commit();
  }

  void Restore(StateReader& r, const KeyGroupRange& range) override {
    if constexpr (kEncodable) {
      FlushKv();
      const uint64_t n = r.GetCount("state entries");
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        K key = Decode<K>(r);
        N ns = DecodeNamespace(r);
        V v = Decode<V>(r);
        if (!r.ok()) return;
        if (!range.Contains(key)) continue;
        if (kv != nullptr) {
          KvRestore(key, ns, v);
          continue;
        }
        if constexpr (kVoid) {
          map.insert_or_assign(std::move(key), std::move(v));
        } else {
          map.insert_or_assign(EntryKey(std::move(key), std::move(ns)), std::move(v));
        }
      }
    } else {
      r.Fail("state of a type without tidemark::StateCodec cannot be restored");
    }
    if (kv != nullptr) kv->Commit();
  }

  Map map;
  // The RocksDB store the table lives in (AttachKv); null on the heap.
  KvStore* kv = nullptr;
  // Set by the TTL handles (StateTtlConfig) of a table of TtlValue<X>,
  // std::vector<TtlValue<X>> or std::map<UK, TtlValue<X>>; unused otherwise.
  TtlTableSettings ttl;

 private:
  // The store's key of (key, ns): the table's prefix, the key group (2
  // bytes, big-endian, so that a key group's entries are contiguous), then
  // Encode(key) and, with a namespace, Encode(ns).
  void KvKeyInto(std::string& out, const K& key, const N& ns) const {
    if constexpr (kEncodable) {
      out.assign(kv_prefix_);
      int g = 0;
      if constexpr (KeyGroupComputable<K>) {
        if (kv_max_parallelism_ > 0) g = ComputeKeyGroup(KeyHash<K>{}(key), kv_max_parallelism_);
      }
      out.push_back(static_cast<char>((g >> 8) & 0xff));
      out.push_back(static_cast<char>(g & 0xff));
      StateWriter w(&out);
      Encode(w, key);
      if constexpr (!kVoid) Encode(w, ns);
    }
  }
  std::string KvKey(const K& key, const N& ns) const {
    std::string k;
    KvKeyInto(k, key, ns);
    return k;
  }
  V* KvLoad(const K& key, const N& ns) {
    if constexpr (kEncodable) {
      std::string bytes;
      if (!kv->Get(KvKey(key, ns), &bytes)) return nullptr;
      StateReader r(bytes);
      V v = Decode<V>(r);
      if (!r.ok() || !r.AtEnd())
        throw std::runtime_error("RocksDB state backend: a stored value does not decode" +
                                 (r.ok() ? std::string() : ": " + r.error()));
      return &map.emplace(KeyOf(key, ns), std::move(v)).first->second;
    } else {
      return nullptr;
    }
  }
  void KvRestore(const K& key, const N& ns, const V& v) {
    if constexpr (kEncodable) {
      std::string k = KvKey(key, ns), bytes;
      StateWriter vw(&bytes);
      Encode(vw, v);
      kv->Put(k, bytes);
      if (++kv_restored_ % 4096 == 0) kv->Commit();
    }
  }

  std::string kv_prefix_;
  int kv_max_parallelism_ = 0;
  size_t kv_cache_entries_ = 16384;
  uint64_t kv_restored_ = 0;

  using Entry = typename Map::value_type;
  using ErasedSet = KeySet<EntryKey>;
  // A frozen level of the table (see SnapshotBlobs): entries written since
  // the level below was frozen, and tombstones of keys below erased since.
  struct Layer {
    Map map;
    ErasedSet erased;
  };
  struct LevelRef {
    const Map* map;
    const ErasedSet* erased;
  };
  static constexpr size_t kFoldBudget = 32;

  static const Entry& Deref(const Entry& e) { return e; }
  static const Entry& Deref(const Entry* e) { return *e; }
  static void EncodeEntry(StateWriter& w, const Entry& e) {
    if constexpr (kEncodable) {
      if constexpr (kVoid) {
        Encode(w, e.first);
      } else {
        Encode(w, e.first.first);
        Encode(w, e.first.second);
      }
      Encode(w, e.second);
    }
  }
  // A count, then the entries of `entries` (a Map, or pointers to entries);
  // with `live_at` (cleanup in full snapshot) only those not expired then.
  template <typename Range>
  static void WriteEntries(StateWriter& w, const Range& entries, std::optional<Timestamp> live_at,
                           int64_t ttl_ms) {
    if constexpr (kEncodable && kIsTtlStorage<V>) {
      if (live_at) return WriteLive(w, entries, *live_at, ttl_ms);
    }
    (void)live_at, (void)ttl_ms;
    w.PutVarint(entries.size());
    for (const auto& e : entries) EncodeEntry(w, Deref(e));
  }
  // One blob per non-empty key group (SnapshotByKeyGroup).
  static void GroupBlobs(const std::vector<const Entry*>& entries, int max_parallelism,
                         std::vector<std::string>* blobs) {
    if constexpr (KeyGroupComputable<K>) {
      std::vector<std::vector<const Entry*>> groups(static_cast<size_t>(max_parallelism));
      for (const Entry* e : entries) {
        const K& key = [&]() -> const K& {
          if constexpr (kVoid) {
            return e->first;
          } else {
            return e->first.first;
          }
        }();
        groups[static_cast<size_t>(ComputeKeyGroup(KeyHash<K>{}(key), max_parallelism))].push_back(
            e);
      }
      for (const auto& g : groups) {
        if (g.empty()) continue;
        std::string bytes;
        StateWriter w(&bytes);
        w.PutVarint(g.size());
        for (const Entry* e : g) EncodeEntry(w, *e);
        blobs->push_back(std::move(bytes));
      }
    }
    if (blobs->empty()) blobs->push_back(std::string(1, '\0'));  // no entries
  }

  // Cleanup in full snapshot: only the entries (list elements, map entries)
  // that have not expired at `now` are written; the table itself keeps them.
  template <typename Range>
  static void WriteLive(StateWriter& w, const Range& entries, Timestamp now, int64_t ttl_ms) {
    if constexpr (kEncodable && kIsTtlStorage<V>) {
      size_t n = 0;
      for (const auto& e : entries) n += AnyLive(Deref(e).second, now, ttl_ms) ? 1 : 0;
      w.PutVarint(n);
      for (const auto& ep : entries) {
        const Entry& entry = Deref(ep);
        const V& v = entry.second;
        if (!AnyLive(v, now, ttl_ms)) continue;
        if constexpr (kVoid) {
          Encode(w, entry.first);
        } else {
          Encode(w, entry.first.first);
          Encode(w, entry.first.second);
        }
        EncodeLive(w, v, now, ttl_ms);
      }
    }
  }
  // Whether a TTL value (or an element of a TTL list or map) is live at
  // `now`, and the value with only its live elements.
  static bool AnyLive(const V& v, Timestamp now, int64_t ttl_ms) {
    if constexpr (kIsTtlStorage<V>) {
      auto live = [&](const auto& tv) { return !TtlExpired(tv.last_access, ttl_ms, now); };
      if constexpr (TtlStorage<V>::kKind == TtlKind::kValue) {
        return live(v);
      } else {
        for (const auto& e : v)
          if (live(TtlStorage<V>::Element(e))) return true;
        return false;
      }
    } else {
      return true;
    }
  }
  static void EncodeLive(StateWriter& w, const V& v, Timestamp now, int64_t ttl_ms) {
    if constexpr (kEncodable && kIsTtlStorage<V>) {
      auto live = [&](const auto& tv) { return !TtlExpired(tv.last_access, ttl_ms, now); };
      if constexpr (TtlStorage<V>::kKind == TtlKind::kValue) {
        Encode(w, v);
      } else {
        // The container codecs' format: a count, then the elements.
        size_t m = 0;
        for (const auto& e : v) m += live(TtlStorage<V>::Element(e)) ? 1 : 0;
        w.PutVarint(m);
        for (const auto& e : v) {
          if (!live(TtlStorage<V>::Element(e))) continue;
          if constexpr (TtlStorage<V>::kKind == TtlKind::kMap) Encode(w, e.first);
          Encode(w, TtlStorage<V>::Element(e));
        }
      }
    }
  }

  // f(entry) for every entry visible through `top_first` (the topmost
  // level first): an entry is hidden by the same key's entry or tombstone
  // in a level above.
  template <typename F>
  static void ForEachVisible(const std::vector<LevelRef>& top_first, F&& f) {
    for (size_t i = 0; i < top_first.size(); ++i) {
      for (const Entry& e : *top_first[i].map) {
        bool hidden = false;
        for (size_t j = 0; j < i && !hidden; ++j)
          hidden = top_first[j].map->contains(e.first) || top_first[j].erased->contains(e.first);
        if (!hidden) f(e);
      }
    }
  }
  template <typename F>
  void ForEachEntryPtr(F&& f) const {
    if (layers_.empty()) {
      for (const Entry& e : map) f(e);
      return;
    }
    std::vector<LevelRef> levels{{&map, &erased_}};
    for (size_t i = layers_.size(); i-- > 0;)
      levels.push_back({&layers_[i]->map, &layers_[i]->erased});
    ForEachVisible(levels, f);
  }

  // Whether no snapshot reads the layers (acquire: its reads happen before
  // the task's writes that follow).
  bool Idle() const { return readers_->load(std::memory_order_acquire) == 0; }
  // The synchronous part of a snapshot: `map` and the tombstones become a
  // frozen layer; returns the guard the snapshot holds while it reads.
  std::shared_ptr<const void> Freeze() {
    if (layers_.empty()) layered_visible_ = map.size();
    if (!map.empty() || !erased_.empty()) {
      auto layer = std::make_shared<Layer>();
      layer->map = std::move(map);
      layer->erased = std::move(erased_);
      map = Map();
      erased_ = ErasedSet();
      if (layers_.empty()) layer->erased.clear();  // nothing below to hide
      layers_.push_back(std::move(layer));
    }
    return SnapshotReaderGuard(readers_);
  }
  // The visible entry of `ek` below `map`; for writing, copied up into `map`
  // while a snapshot reads the layers (else written in place).
  V* FindBelow(const EntryKey& ek, bool for_write) {
    if (!erased_.empty() && erased_.contains(ek)) return nullptr;
    for (size_t i = layers_.size(); i-- > 0;) {
      Layer& l = *layers_[i];
      auto it = l.map.find(ek);
      if (it != l.map.end()) {
        if (!for_write || Idle()) return &it->second;
        if constexpr (kCopyable) {
          return &map.emplace(ek, it->second).first->second;
        } else {
          return &it->second;  // never: copy-on-write needs copies
        }
      }
      if (!l.erased.empty() && l.erased.contains(ek)) return nullptr;
    }
    return nullptr;
  }
  // Moves up to `budget` entries or tombstones of the layer above the base
  // into the base (no snapshot reads them); when only the base is left,
  // `map` and the tombstones become a layer to fold, or, when they are
  // small, are folded at once and the base becomes `map` again.
  void Fold(size_t budget) {
    if (layers_.size() == 1) {
      Layer& base = *layers_[0];
      if (map.size() + erased_.size() > 4 * kFoldBudget && budget != ~size_t{0}) {
        auto layer = std::make_shared<Layer>();
        layer->map = std::move(map);
        layer->erased = std::move(erased_);
        map = Map();
        erased_ = ErasedSet();
        layers_.push_back(std::move(layer));
        fold_started_ = false;
        return;
      }
      for (const EntryKey& ek : erased_) base.map.erase(ek);
      if constexpr (kCopyable)
        for (auto& [ek, v] : map) base.map.insert_or_assign(ek, std::move(v));
      map = std::move(base.map);
      erased_ = ErasedSet();
      layers_.clear();
      return;
    }
    Layer& base = *layers_[0];
    Layer& up = *layers_[1];
    if (!fold_started_) {
      // Tombstones first (then entries), so an entry written after its erase
      // wins.
      for (const EntryKey& ek : up.erased) base.map.erase(ek);
      up.erased.clear();
      fold_it_ = up.map.begin();
      fold_started_ = true;
    }
    for (size_t n = 0; n < budget && fold_it_ != up.map.end(); ++n) {
      auto cur = fold_it_++;
      if constexpr (kCopyable) base.map.insert_or_assign(cur->first, std::move(cur->second));
      up.map.erase(cur);
    }
    if (fold_it_ == up.map.end()) {
      layers_.erase(layers_.begin() + 1);
      fold_started_ = false;
    }
  }

  // Copy-on-write (SnapshotBlobs): frozen layers, the base first; the
  // tombstones of keys of the layers erased since the last freeze.
  bool cow_ = false;
  std::vector<std::shared_ptr<Layer>> layers_;
  size_t layered_visible_ = 0;  // VisibleSize() while layers_ is not empty
  ErasedSet erased_;
  std::shared_ptr<std::atomic<int>> readers_ = std::make_shared<std::atomic<int>>(0);
  bool fold_started_ = false;
  typename Map::iterator fold_it_;
};

// Every named state of one operator instance.
template <typename K>
class KeyedStateStore {
 public:
  KeyedStateStore() = default;
  KeyedStateStore(const KeyedStateStore&) = delete;
  KeyedStateStore& operator=(const KeyedStateStore&) = delete;

  template <typename V, typename N = VoidNamespace>
  StateTable<K, N, V>& Table(std::string_view name) {
    return TableOn<V, N>(name, /*on_kv=*/false, /*handles=*/false);
  }
  // Table, on RocksDB when the store has one (UseBackend): for the tables
  // that only handles (ValueState ...) touch, through Find, GetOrCreate,
  // TryEmplace and Erase, never `map` directly.
  template <typename V, typename N = VoidNamespace>
  StateTable<K, N, V>& HandleTable(std::string_view name) {
    return TableOn<V, N>(name, kv_ != nullptr, /*handles=*/true);
  }
  size_t num_tables() const { return tables_.size(); }
  // Whether state `name` exists: made by Table / HandleTable, or restored and
  // not yet read (a native RocksDB restore's included).  Reading it without
  // making it (the test harness's get_state) asks this first.
  bool Contains(std::string_view name) const {
    return tables_.contains(name) || pending_.contains(name) || kv_ids_.contains(name);
  }

  // Opens the job's state backend for this operator instance: nothing on the
  // heap; on RocksDB a database of the instance's own (runtime/state/
  // kv_store.h).  Called by the operator's Open.
  void UseBackend(const OperatorContext& ctx) {
    const StateBackend& backend = ctx.config().state_backend;
    if (!backend.is_rocksdb() || kv_ != nullptr) return;
    UseKvStore(
        OpenKvStore(backend, ctx.operator_name() + "-" + std::to_string(ctx.subtask_index())),
        ctx.max_parallelism(), backend.cache_entries);
    own_range_ = KeyGroupRange::Of(ctx);
  }
  // The same with a given store (tests): tables made by HandleTable from now
  // on live in `store`, their keys prefixed with the key group of
  // max_parallelism (0: none), at most `cache_entries` entries cached per
  // table between records.
  void UseKvStore(std::unique_ptr<KvStore> store, int max_parallelism, size_t cache_entries,
                  KeyGroupRange range = KeyGroupRange::All()) {
    kv_ = std::move(store);
    max_parallelism_ = max_parallelism;
    cache_entries_ = cache_entries;
    own_range_ = range;
    if (own_range_.max_parallelism == 0 && max_parallelism > 0)
      own_range_ = KeyGroupRange{0, max_parallelism - 1, max_parallelism};
  }
  bool on_rocksdb() const { return kv_ != nullptr; }
  // Whether the last Restore opened the store from a native checkpoint's
  // files (the same key groups: no entry was read).
  bool restored_natively() const { return kv_native_restored_; }
  // Starts loading `key`'s entries of the process function's large heap
  // tables, a few records before it is processed (the keyed operators'
  // PrefetchFor): their lookups otherwise wait on memory one at a time.
  void Prefetch(const K& key) const {
    for (const StateTableBase* t : prefetch_tables_) t->Prefetch(&key);
  }
  // Whether Prefetch would load anything: some table is large enough.  The
  // keyed operators ask once a batch, so that a function whose state is in
  // the caches pays nothing per record.
  bool WorthPrefetching() const {
    for (const StateTableBase* t : prefetch_tables_)
      if (t->WorthPrefetching()) return true;
    return false;
  }
  // Between records (the operator calls it after each record and timer):
  // on RocksDB, writes back the cached entries of a table whose cache is
  // full.  Nothing on the heap.
  // On the heap, folds the copy-on-write layers a snapshot left (a few
  // entries per call, once the snapshot has read them).
  void Trim() {
    if (layered_) [[unlikely]] {
      bool any = false;
      for (StateTableBase* t : cow_tables_) {
        t->Trim();
        any = any || t->num_layers() > 0;
      }
      layered_ = any;
    }
    if (kv_ == nullptr) [[likely]]
      return;
    for (StateTableBase* t : kv_tables_) t->Trim();
  }

  // See "Checkpoints" in the file comment.  `where` names the operator in
  // errors.  Format: a count of tables, then per table its name and a count
  // of blobs (each a table's entries as StateTable::Snapshot wrote them).
  // On RocksDB with a SharedFileSink (a checkpoint into an incremental
  // storage): the tables in the store are not written; one pseudo table
  // (kKvNativeTableName) describes the store's files instead, uploaded off
  // the task thread (RocksDB's native incremental checkpoint).  The tables
  // of handles on the heap are encoded off the task thread
  // (StateTable::SnapshotBlobs: a copy-on-write view, a deferred part).
  void Snapshot(StateWriter& w, std::string_view where) {
    std::shared_ptr<KvCheckpoint> native;
    std::shared_ptr<const KvSnapshot> snap;
    if (kv_ != nullptr) {
      // RocksDB: the cached entries go to the store, and a snapshot of the
      // store (or a checkpoint of its files) is read off the task thread (a
      // deferred part).
      for (StateTableBase* t : kv_tables_) t->FlushKv();
      if (w.shared_file_sink() != nullptr) native = kv_->Checkpoint();
      if (native == nullptr) snap = kv_->Snapshot();
    }
    // Tables in the store since a native restore, not created yet.
    std::vector<std::pair<std::string, uint32_t>> kv_only;
    if (native == nullptr) {
      for (const auto& [name, id] : kv_ids_)
        if (!tables_.contains(name) && !pending_.contains(name)) kv_only.emplace_back(name, id);
    }
    // Every state's value type: those restored (tables not created yet
    // included) and those made since.
    std::map<std::string, std::string, std::less<>> types = restored_types_;
    for (const auto& [name, table] : tables_) types[name] = table->type_tag();
    size_t n = kv_only.size() + (native != nullptr ? 1 : 0) + (types.empty() ? 0 : 1);
    for (const auto& [name, table] : tables_)
      if (native == nullptr || !table->on_kv()) ++n;
    for (const auto& [name, blobs] : pending_)
      if (!tables_.contains(name)) ++n;
    w.PutVarint(n);
    if (!types.empty()) {
      std::string blob;
      StateWriter tw(&blob);
      tw.PutVarint(types.size());
      for (const auto& [name, tag] : types) {
        tw.PutBytes(name);
        tw.PutBytes(tag);
      }
      w.PutBytes(kStateTypesTableName);
      w.PutVarint(1);
      w.PutBytes(blob);
    }
    for (const auto& [name, table] : tables_) {
      if (native != nullptr && table->on_kv()) continue;  // in the store's files
      w.PutBytes(name);
      if (table->on_kv()) {
        w.PutVarint(1);
        w.Defer([snap, prefix = table->kv_prefix(),
                 filter = table->KvSnapshotFilter()](StateWriter& dw) {
          std::string bytes;
          StateWriter tw(&bytes);
          KvScanEntries(tw, *snap, prefix, filter);
          dw.PutBytes(bytes);
        });
        continue;
      }
      // Incremental checkpoints (w.key_group_hint()): one blob per key group
      // (Restore merges them), so an unchanged key group encodes to the same
      // bytes.  Not for a table on RocksDB: its map is only a cache (the
      // snapshot of the store above is in key-group order already).
      table->SnapshotBlobs(w, std::string(where) + ", state '" + name + "'");
      if (table->num_layers() > 0) layered_ = true;
    }
    for (const auto& [name, blobs] : pending_) {
      if (tables_.contains(name)) continue;
      w.PutBytes(name);
      w.PutVarint(blobs.size());
      for (const std::string& b : blobs) w.PutBytes(b);
    }
    for (const auto& [name, id] : kv_only) {
      w.PutBytes(name);
      w.PutVarint(1);
      w.Defer([snap, prefix = KvTablePrefix(id)](StateWriter& dw) {
        std::string bytes;
        StateWriter tw(&bytes);
        KvScanEntries(tw, *snap, prefix);
        dw.PutBytes(bytes);
      });
    }
    if (native != nullptr) {
      KvNativeDescriptor d;
      d.first = own_range_.first;
      d.last = own_range_.last;
      d.max_parallelism = own_range_.max_parallelism;
      d.tables.assign(kv_ids_.begin(), kv_ids_.end());
      w.PutBytes(kKvNativeTableName);
      w.PutVarint(1);
      w.Defer([native, sink = w.shared_file_sink(), d = std::move(d)](StateWriter& dw) mutable {
        d.files = native->Upload(*sink);
        d.shared_dir = sink->shared_dir();
        native.reset();  // the local copy goes now
        dw.PutBytes(EncodeKvNative(d));
      });
    }
  }
  // Keeps the entries of `range` (see the file comment); may be called more
  // than once, merging.  Errors are reported on `r`.
  void Restore(StateReader& r, const KeyGroupRange& range) {
    range_ = range;
    const uint64_t n = r.GetCount("state tables");
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      std::string name(r.GetBytes("state name"));
      const uint64_t blobs = r.GetCount("state blobs");
      for (uint64_t b = 0; b < blobs && r.ok(); ++b) {
        const std::string_view bytes = r.GetBytes("state entries");
        if (!r.ok()) return;
        if (name == kKvNativeTableName) {
          DecodeBlob(r, bytes, "native RocksDB checkpoint",
                     [&](StateReader& tr) { RestoreNative(tr, range); });
          continue;
        }
        if (name == kStateTypesTableName) {
          DecodeBlob(r, bytes, "state types", [&](StateReader& tr) {
            const uint64_t count = tr.GetCount("state types");
            for (uint64_t t = 0; t < count && tr.ok(); ++t) {
              std::string state(tr.GetBytes("state name"));
              std::string tag(tr.GetBytes("state type"));
              if (tr.ok()) restored_types_.emplace(std::move(state), std::move(tag));
            }
          });
          continue;
        }
        auto it = tables_.find(name);
        if (it != tables_.end()) {
          if (std::string e = RestoredTypeMismatch(name, *it->second); !e.empty()) {
            r.Fail(e);
            return;
          }
          DecodeBlob(r, bytes, "state '" + name + "'",
                     [&](StateReader& tr) { it->second->Restore(tr, range); });
        } else {
          pending_[name].emplace_back(bytes);
        }
      }
    }
  }

 private:
  // The table `name`, created if new; attached to the store first when
  // `on_kv` (its prefix there: its number, 4 bytes big-endian), then given
  // the restored entries waiting for it.
  template <typename V, typename N>
  StateTable<K, N, V>& TableOn(std::string_view name, bool on_kv, bool handles) {
    // A function looks its few states up by name per record: the tables
    // found last answer without a walk of tables_ and without a dynamic_cast
    // (a table, once made, is never replaced or removed, and a name that is
    // in tables_ has no bytes waiting in pending_).
    const void* type = &TableTypeTag<StateTable<K, N, V>>::id;
    for (const RecentTable& r : recent_) {
      if (r.type == type && r.on_kv == on_kv && r.handles == handles && r.name == name)
        return *static_cast<StateTable<K, N, V>*>(r.table);
    }
    StateTable<K, N, V>& t = FindOrMakeTable<V, N>(name, on_kv, handles);
    RecentTable& slot = recent_[next_recent_];
    next_recent_ = (next_recent_ + 1) % kRecentTables;
    slot.name.assign(name);
    slot.type = type;
    slot.table = &t;
    slot.on_kv = on_kv;
    slot.handles = handles;
    return t;
  }
  template <typename T>
  struct TableTypeTag {
    static constexpr char id = 0;
  };
  template <typename V, typename N>
  StateTable<K, N, V>& FindOrMakeTable(std::string_view name, bool on_kv, bool handles) {
    auto it = tables_.find(name);
    const bool made = it == tables_.end();
    if (made)
      it = tables_.emplace(std::string(name), std::make_unique<StateTable<K, N, V>>()).first;
    auto* t = dynamic_cast<StateTable<K, N, V>*>(it->second.get());
    if (t == nullptr)
      throw std::logic_error("state '" + std::string(name) + "' was created with another type");
    if (std::string e = RestoredTypeMismatch(it->first, *t); !e.empty()) {
      // Read with another type than it was checkpointed with: the restored
      // bytes stay for a read with the right type.
      if (made) tables_.erase(it);
      throw std::runtime_error(e);
    }
    if (on_kv && !t->on_kv()) {
      // The number a native restore found it under, else a new one.
      auto known = kv_ids_.find(name);
      const uint32_t id = known != kv_ids_.end() ? known->second : next_kv_id_++;
      kv_ids_.emplace(std::string(name), id);
      t->AttachKv(kv_.get(), KvTablePrefix(id), max_parallelism_, cache_entries_, name);
      kv_tables_.push_back(t);
    }
    if (handles && !on_kv && !t->copy_on_write()) {
      // Only handles touch it (never `map` directly): its snapshots can read
      // copy-on-write layers.
      t->EnableCopyOnWrite();
      cow_tables_.push_back(t);
      if constexpr (std::is_same_v<N, VoidNamespace>) prefetch_tables_.push_back(t);
    }
    if (!pending_.empty()) ApplyPending(it->first, *t);
    return *t;
  }
  // A native RocksDB checkpoint (kKvNativeTableName's blob).  The same key
  // groups into a store that holds nothing yet: the store is opened from the
  // files (no entry read; the next checkpoint refers to them).  Otherwise (a
  // rescale, another restore before it, the heap backend): the files are
  // opened aside and each table's entries of `range`'s key groups read, in
  // key order, as the canonical format's blobs.
  void RestoreNative(StateReader& r, const KeyGroupRange& range) {
    KvNativeDescriptor d = DecodeKvNative(r);
    if (!r.ok()) return;
    if (kv_ != nullptr && kv_tables_.empty() && kv_ids_.empty() && !kv_native_restored_ &&
        d.max_parallelism == max_parallelism_ &&
        ((d.first == range.first && d.last == range.last) ||
         (range.all() && d.first == 0 && d.last == d.max_parallelism - 1))) {
      kv_->RestoreFiles(d.shared_dir, d.files);
      for (const auto& [name, id] : d.tables) {
        kv_ids_.emplace(name, id);
        next_kv_id_ = std::max(next_kv_id_, id + 1);
      }
      kv_native_restored_ = true;
      return;
    }
    std::unique_ptr<KvStore> old = OpenKvStoreFiles(d.shared_dir, d.files);
    std::shared_ptr<const KvSnapshot> snap = old->Snapshot();
    for (const auto& [name, id] : d.tables) {
      const std::string prefix = KvTablePrefix(id);
      std::string body;
      uint64_t count = 0;
      auto add = [&](std::string_view k, std::string_view v) {
        body.append(k.substr(prefix.size() + 2));
        body.append(v);
        ++count;
      };
      bool ranged = false;
      if constexpr (KeyGroupComputable<K>) {
        if (!range.all() && d.max_parallelism > 0 && range.max_parallelism == d.max_parallelism) {
          // Keys are key-group-prefixed: the range is read, nothing else.
          auto at = [&](int g) {
            std::string key = prefix;
            key.push_back(static_cast<char>((g >> 8) & 0xff));
            key.push_back(static_cast<char>(g & 0xff));
            return key;
          };
          snap->ScanRange(at(range.first), at(range.last + 1), add);
          ranged = true;
        }
      }
      if (!ranged) snap->Scan(prefix, add);
      std::string blob;
      StateWriter bw(&blob);
      bw.PutVarint(count);
      bw.PutRaw(body.data(), body.size());
      body.clear();
      auto it = tables_.find(name);
      if (it != tables_.end()) {
        if (std::string e = RestoredTypeMismatch(name, *it->second); !e.empty()) {
          r.Fail(e);
          return;
        }
        DecodeBlob(r, blob, "state '" + name + "'",
                   [&](StateReader& tr) { it->second->Restore(tr, range); });
      } else {
        pending_[name].push_back(std::move(blob));
      }
    }
  }
  // "" when `table`'s value type is the one `name` was checkpointed with (or
  // the checkpoint did not say), else what is wrong.
  std::string RestoredTypeMismatch(const std::string& name, const StateTableBase& table) const {
    auto it = restored_types_.find(name);
    if (it == restored_types_.end() || it->second == table.type_tag()) return {};
    return "restoring state '" + name + "': it was checkpointed with values of type " +
           DemangledTypeName(it->second.c_str()) + " and is read now as " +
           DemangledTypeName(table.type_tag()) +
           ": a state's type cannot change across a restore (Flink's StateMigrationException); "
           "give the changed state another name (it then starts empty)";
  }
  // Decodes the bytes restored for `name` before the table existed.
  void ApplyPending(const std::string& name, StateTableBase& table) {
    auto p = pending_.find(name);
    if (p == pending_.end()) return;
    std::vector<std::string> blobs = std::move(p->second);
    pending_.erase(p);
    for (const std::string& b : blobs) {
      StateReader r(b);
      table.Restore(r, range_);
      if (!r.AtEnd())
        throw std::runtime_error("restoring state '" + name +
                                 "': " + (r.ok() ? std::string("bytes left over") : r.error()));
    }
  }

  // RocksDB (UseBackend): the instance's store, and its tables.  Declared
  // before tables_, so that the tables go first.
  std::unique_ptr<KvStore> kv_;
  std::vector<StateTableBase*> kv_tables_;
  uint32_t next_kv_id_ = 1;
  // Every table's number in the store (its key prefix), by name: those
  // attached, and those a native restore found (created later under the
  // same number).
  std::map<std::string, uint32_t, std::less<>> kv_ids_;
  bool kv_native_restored_ = false;
  KeyGroupRange own_range_;  // the instance's key groups (UseBackend)
  int max_parallelism_ = 0;
  size_t cache_entries_ = 16384;
  std::map<std::string, std::unique_ptr<StateTableBase>, std::less<>> tables_;
  // Each state's value type as the restored checkpoints said
  // (kStateTypesTableName).
  std::map<std::string, std::string, std::less<>> restored_types_;
  // Tables with copy-on-write snapshots (TableOn), and whether one may have
  // layers to fold (Trim).
  std::vector<StateTableBase*> cow_tables_;
  // The heap tables of process functions' state without a namespace
  // (Prefetch).
  std::vector<StateTableBase*> prefetch_tables_;
  bool layered_ = false;
  // Restored bytes of tables not created yet, by name.
  std::map<std::string, std::vector<std::string>, std::less<>> pending_;
  // The tables TableOn found last (replaced in turn); an empty name with a
  // null type matches no lookup.
  struct RecentTable {
    std::string name;
    const void* type = nullptr;
    StateTableBase* table = nullptr;
    bool on_kv = false;
    bool handles = false;
  };
  static constexpr size_t kRecentTables = 8;
  std::array<RecentTable, kRecentTables> recent_;
  size_t next_recent_ = 0;
  KeyGroupRange range_;  // of the last Restore
};

// --- handles -------------------------------------------------------------

// A table bound to the current key and namespace.
template <typename K, typename N, typename V>
class BoundState {
 public:
  BoundState(StateTable<K, N, V>* table, const K* key, const N* ns = &kVoidNamespace)
      : table_(table), key_(key), ns_(ns) {}
  void clear() { table_->Erase(*key_, *ns_); }

 protected:
  V* find() const { return table_->Find(*key_, *ns_); }
  // For reading only (copies no entry a snapshot reads).
  const V* peek() const { return table_->Peek(*key_, *ns_); }
  V& get_or_create() { return table_->GetOrCreate(*key_, *ns_); }
  template <typename Init>
  std::pair<V*, bool> try_emplace(Init&& init) {
    return table_->TryEmplace(*key_, *ns_, std::forward<Init>(init));
  }

  StateTable<K, N, V>* table_;
  const K* key_;
  const N* ns_;
};

}  // namespace internal
// The value of the current key (Flink's ValueState).
template <typename K, typename V, typename N = internal::VoidNamespace>
class ValueState : public internal::BoundState<K, N, V> {
 public:
  using internal::BoundState<K, N, V>::BoundState;
  // nullopt when the key has none.
  std::optional<V> value() const {
    const V* v = this->peek();
    return v == nullptr ? std::nullopt : std::optional<V>(*v);
  }
  V value_or(V dflt) const {
    const V* v = this->peek();
    return v == nullptr ? std::move(dflt) : *v;
  }
  // The stored value itself, read-only and not copied (Flink's heap backend
  // hands out the stored object), or nullptr when the key has none.  Valid
  // until this operator next reads or writes state of this name.
  const V* value_ptr() const { return this->peek(); }
  void update(V v) { this->get_or_create() = std::move(v); }
  // The value itself, to change in place, as Flink's heap backend hands out
  // the stored object: value-initialised (V{}) when the key has none, which
  // gives the key a value from here on (clear() removes it).  One lookup
  // instead of value() and update()'s two, and no copy of V per record.
  // Valid until this operator next reads or writes state of this name.
  V& mutable_value() requires std::default_initializable<V> { return this->get_or_create(); }
};

// The list of the current key (ListState).
template <typename K, typename V, typename N = internal::VoidNamespace>
class ListState : public internal::BoundState<K, N, std::vector<V>> {
 public:
  using internal::BoundState<K, N, std::vector<V>>::BoundState;
  const std::vector<V>& get() const {
    static const std::vector<V> kEmpty;
    const std::vector<V>* v = this->peek();
    return v == nullptr ? kEmpty : *v;
  }
  void add(V v) { this->get_or_create().push_back(std::move(v)); }
  void add_all(const std::vector<V>& values) {
    if (values.empty()) return;
    std::vector<V>& list = this->get_or_create();
    list.insert(list.end(), values.begin(), values.end());
  }
  void update(std::vector<V> values) {
    if (values.empty()) return this->clear();
    this->get_or_create() = std::move(values);
  }
  // The list itself, to change in place (created empty when the key has
  // none; leaving it empty leaves an empty entry: clear() it instead).  For
  // operators that keep a list per key (top_n): no copy of the list per
  // record.  Valid while the handle is.
  std::vector<V>& mutable_list() { return this->get_or_create(); }
};

// A value reduced with F on every add (ReducingState).
template <typename K, typename V, typename F, typename N = internal::VoidNamespace>
class ReducingState : public internal::BoundState<K, N, V> {
 public:
  ReducingState(internal::StateTable<K, N, V>* table, const K* key, F f,
                const N* ns = &internal::kVoidNamespace)
      : internal::BoundState<K, N, V>(table, key, ns), f_(std::move(f)) {}
  void add(const V& v) {
    auto [cur, inserted] = this->try_emplace(v);
    if (!inserted) *cur = f_(static_cast<const V&>(*cur), v);
  }
  std::optional<V> get() const {
    const V* v = this->peek();
    return v == nullptr ? std::nullopt : std::optional<V>(*v);
  }

 private:
  F f_;
};

// An accumulator of an aggregate function (AggregatingState).
template <typename K, typename Agg, typename N = internal::VoidNamespace>
class AggregatingState : public internal::BoundState<K, N, internal::AccumulatorOf<Agg>> {
 public:
  using Acc = internal::AccumulatorOf<Agg>;
  AggregatingState(internal::StateTable<K, N, Acc>* table, const K* key, Agg agg,
                   const N* ns = &internal::kVoidNamespace)
      : internal::BoundState<K, N, Acc>(table, key, ns), agg_(std::move(agg)) {}
  template <typename In>
  void add(const In& v) {
    Acc* acc = this->find();
    if (acc == nullptr) acc = this->try_emplace(agg_.create_accumulator()).first;
    *acc = agg_.add(v, std::move(*acc));
  }
  std::optional<internal::AggregateResultOf<Agg>> get() const {
    const Acc* acc = this->peek();
    if (acc == nullptr) return std::nullopt;
    return agg_.get_result(*acc);
  }

 private:
  mutable Agg agg_;
};

namespace internal {

// A MapState's entries when its user key hashes (absl::Hash) and compares
// with ==: a hash map, as Flink's heap backend keeps a MapState in a
// java.util.HashMap, so that get, put, contains and remove cost one probe,
// not a walk down a tree (Nexmark's q15 and q16 count distinct bidders in
// maps of 10^5 entries per key).  A type of its own for its StateCodec, which
// writes the entries in key order: the bytes of equal maps are equal (an
// incremental checkpoint's chunks do not change with a rehash), and they are
// the bytes a std::map of the same entries writes, so checkpoints taken
// before hash maps restore into them.
template <typename UK, typename UV>
class HashedMap : public KeyMap<UK, UV> {
 public:
  using KeyMap<UK, UV>::KeyMap;
};

template <typename UK>
concept HashableUserKey = std::equality_comparable<UK> && requires(const UK& k) {
  { absl::Hash<UK>{}(k) } -> std::convertible_to<size_t>;
};

// What a MapState<K, UK, UV> stores per key: a HashedMap when UK hashes,
// else a std::map (UK then needs operator<, as before).
template <typename UK, typename UV>
using MapStorage =
    std::conditional_t<HashableUserKey<UK>, HashedMap<UK, UV>, std::map<UK, UV, KeyLess<UK>>>;

template <typename UK, typename UV>
struct HasStateCodecTrait<HashedMap<UK, UV>>
    : std::bool_constant<HasStateCodec<UK> && HasStateCodec<UV>> {};

}  // namespace internal

template <typename UK, typename UV>
struct StateCodec<internal::HashedMap<UK, UV>> {
  using M = internal::HashedMap<UK, UV>;
  static void Encode(internal::StateWriter& w, const M& m) {
    if constexpr (std::totally_ordered<UK>) {
      std::vector<const typename M::value_type*> sorted;
      sorted.reserve(m.size());
      for (const auto& e : m) sorted.push_back(&e);
      std::sort(sorted.begin(), sorted.end(),
                [](const auto* a, const auto* b) { return KeyLess<UK>{}(a->first, b->first); });
      w.PutVarint(sorted.size());
      for (const auto* e : sorted) {
        internal::Encode(w, e->first);
        internal::Encode(w, e->second);
      }
    } else {
      internal::MapCodec<M>::Encode(w, m);  // in the hash map's order
    }
  }
  static M Decode(internal::StateReader& r) { return internal::MapCodec<M>::Decode(r); }
};

// The map of the current key (Flink's MapState): user key UK to user value
// UV.  A user key that absl::Hash hashes (integers, strings, pairs and
// tuples of them, types with AbslHashValue) is kept in a hash map, as
// Flink's heap backend does; others in a std::map (internal::MapStorage).
// entries() are in UK order either way.
template <typename K, typename UK, typename UV, typename N = internal::VoidNamespace>
class MapState : public internal::BoundState<K, N, internal::MapStorage<UK, UV>> {
 public:
  // What the state's table holds per key (tests name its table with it).
  using Storage = internal::MapStorage<UK, UV>;
  using Map = Storage;
  using internal::BoundState<K, N, Map>::BoundState;

  // nullopt when `uk` has no mapping.
  std::optional<UV> get(const UK& uk) const {
    const Map* m = this->peek();
    if (m == nullptr) return std::nullopt;
    auto it = m->find(uk);
    return it == m->end() ? std::nullopt : std::optional<UV>(it->second);
  }
  void put(UK uk, UV uv) { this->get_or_create().insert_or_assign(std::move(uk), std::move(uv)); }
  // Every mapping of `entries` (pairs of UK, UV), as put.
  template <typename Range>
  void put_all(const Range& entries) {
    for (const auto& [uk, uv] : entries) put(uk, uv);
  }
  bool contains(const UK& uk) const {
    const Map* m = this->peek();
    return m != nullptr && m->contains(uk);
  }
  // Drops the mapping of `uk` (none: no-op); the last one drops the key's map.
  void remove(const UK& uk) {
    Map* m = this->find();
    if (m == nullptr) return;
    m->erase(uk);
    if (m->empty()) this->clear();
  }
  // The mappings, in UK order: a std::map.  For a hashed user key, a sorted
  // copy (iterating a large map per record is then a cost to avoid: look
  // entries up with get / contains); otherwise the stored map itself, whose
  // references stay valid until the map is next changed.
  decltype(auto) entries() const {
    const Map* m = this->peek();
    if constexpr (std::is_same_v<Map, std::map<UK, UV, KeyLess<UK>>>) {
      static const Map kEmpty;
      return static_cast<const Map&>(m == nullptr ? kEmpty : *m);
    } else {
      std::map<UK, UV, KeyLess<UK>> sorted;
      if (m != nullptr) sorted.insert(m->begin(), m->end());
      return sorted;
    }
  }
  std::vector<UK> keys() const {
    std::vector<UK> out;
    for (const auto& [uk, uv] : entries()) out.push_back(uk);
    return out;
  }
  std::vector<UV> values() const {
    std::vector<UV> out;
    for (const auto& [uk, uv] : entries()) out.push_back(uv);
    return out;
  }
  bool is_empty() const { return this->peek() == nullptr; }
};

// --- state time-to-live ------------------------------------------------------

// Flink's StateTtlConfig: how long keyed state lives after its last write
// (or read), in processing time (the operator's clock; Flink has no event
// time TTL either), whether an expired value that is still stored may be
// returned, and when expired values are removed.  Given to get_*_state:
//
//   auto ttl = StateTtlConfig::new_builder(std::chrono::hours(1))
//                  .set_update_type(StateTtlConfig::UpdateType::OnReadAndWrite)
//                  .set_state_visibility(StateTtlConfig::StateVisibility::NeverReturnExpired)
//                  .cleanup_full_snapshot()
//                  .build();
//   auto last = ctx.get_state<int64_t>("last", ttl);   // a TtlValueState
//
// A value is expired once last access + ttl <= now.  Each value (each list
// element, each map entry) keeps its last access time next to it, also in
// checkpoints; state without a TTL keeps none and is unchanged.  Cleanup:
// always lazily, when an expired value is accessed (it is removed; with
// ReturnExpiredIfNotCleanedUp it is returned that once); with
// cleanup_full_snapshot() expired values are left out of checkpoints (the
// running state keeps them until accessed).
class StateTtlConfig {
 public:
  enum class UpdateType {
    Disabled,          // no time to live
    OnCreateAndWrite,  // the clock restarts on every write (Flink's default)
    OnReadAndWrite,    // ... and on every read of an unexpired value
  };
  enum class StateVisibility {
    NeverReturnExpired,           // an expired value reads as absent (default)
    ReturnExpiredIfNotCleanedUp,  // returned while still stored (then removed)
  };

  class Builder;

  static Builder new_builder(Duration ttl);

  Duration ttl() const { return Duration(ttl_); }
  int64_t ttl_millis() const { return ttl_; }
  UpdateType update_type() const { return update_type_; }
  StateVisibility state_visibility() const { return visibility_; }
  bool is_enabled() const { return update_type_ != UpdateType::Disabled; }
  bool cleanup_in_full_snapshot() const { return cleanup_full_snapshot_; }

 private:
  StateTtlConfig() = default;
  int64_t ttl_ = 0;
  UpdateType update_type_ = UpdateType::OnCreateAndWrite;
  StateVisibility visibility_ = StateVisibility::NeverReturnExpired;
  bool cleanup_full_snapshot_ = false;
};

// StateTtlConfig::new_builder(ttl)...build().
class StateTtlConfig::Builder {
 public:
  explicit Builder(Duration ttl) { set_ttl(ttl); }
  Builder& set_ttl(Duration ttl) {
    if (ToMillis(ttl) <= 0) throw std::invalid_argument("The state TTL must be positive.");
    c_.ttl_ = ToMillis(ttl);
    return *this;
  }
  Builder& set_update_type(UpdateType t) {
    c_.update_type_ = t;
    return *this;
  }
  Builder& update_ttl_on_create_and_write() {
    return set_update_type(UpdateType::OnCreateAndWrite);
  }
  Builder& update_ttl_on_read_and_write() { return set_update_type(UpdateType::OnReadAndWrite); }
  Builder& set_state_visibility(StateVisibility v) {
    c_.visibility_ = v;
    return *this;
  }
  Builder& return_expired_if_not_cleaned_up() {
    return set_state_visibility(StateVisibility::ReturnExpiredIfNotCleanedUp);
  }
  Builder& never_return_expired() {
    return set_state_visibility(StateVisibility::NeverReturnExpired);
  }
  // Leaves expired values out of checkpoints.
  Builder& cleanup_full_snapshot() {
    c_.cleanup_full_snapshot_ = true;
    return *this;
  }
  StateTtlConfig build() const { return c_; }

 private:
  StateTtlConfig c_;
};
inline StateTtlConfig::Builder StateTtlConfig::new_builder(Duration ttl) { return Builder(ttl); }

namespace internal {
// A TTL table bound to the current key and namespace, with the config and
// the clock.  S is the stored type (TtlValue<V>, a vector or map of them).
template <typename K, typename N, typename S>
class TtlBoundState {
 public:
  TtlBoundState(StateTable<K, N, S>* table, const K* key, const StateTtlConfig& config,
                const Clock* clock, const N* ns = &kVoidNamespace)
      : table_(table),
        key_(key),
        ns_(ns),
        clock_(clock != nullptr ? clock : SystemClock::Get()),
        ttl_(config.is_enabled() ? config.ttl_millis() : kMaxTimestamp),
        refresh_on_read_(config.update_type() == StateTtlConfig::UpdateType::OnReadAndWrite),
        return_expired_(config.state_visibility() ==
                        StateTtlConfig::StateVisibility::ReturnExpiredIfNotCleanedUp) {
    table_->ttl = TtlTableSettings{clock_, ttl_, config.cleanup_in_full_snapshot()};
  }
  void clear() { table_->Erase(*key_, *ns_); }

 protected:
  Timestamp now() const { return clock_->NowMillis(); }
  bool expired(Timestamp last_access, Timestamp now) const {
    return TtlExpired(last_access, ttl_, now);
  }
  S* find() const { return table_->Find(*key_, *ns_); }
  S& get_or_create() { return table_->GetOrCreate(*key_, *ns_); }
  // The value of a TtlValue entry by Flink's rules (AbstractTtlDecorator
  // #getWithTtlCheckAndUpdate): absent -> null; expired -> removed, and
  // returned only with ReturnExpiredIfNotCleanedUp; else refreshed on read
  // with OnReadAndWrite.  `remove` erases the entry.
  template <typename V, typename Remove>
  std::optional<V> Read(TtlValue<V>* e, Timestamp t, Remove remove) {
    if (e == nullptr) return std::nullopt;
    if (expired(e->last_access, t)) {
      std::optional<V> out;
      if (return_expired_) out.emplace(std::move(e->value));
      remove();
      return out;
    }
    if (refresh_on_read_) e->last_access = t;
    return e->value;
  }

  StateTable<K, N, S>* table_;
  const K* key_;
  const N* ns_;
  const Clock* clock_;
  int64_t ttl_;
  bool refresh_on_read_;
  bool return_expired_;
};
}  // namespace internal

// ValueState with a time to live (get_state<V>(name, ttl_config)).
template <typename K, typename V, typename N = internal::VoidNamespace>
class TtlValueState : public internal::TtlBoundState<K, N, internal::TtlValue<V>> {
 public:
  using internal::TtlBoundState<K, N, internal::TtlValue<V>>::TtlBoundState;
  std::optional<V> value() {
    return this->Read(this->find(), this->now(), [this] { this->clear(); });
  }
  V value_or(V dflt) {
    std::optional<V> v = value();
    return v ? std::move(*v) : std::move(dflt);
  }
  void update(V v) { this->get_or_create() = internal::TtlValue<V>{std::move(v), this->now()}; }
};

// ListState with a time to live per element.  get() returns a copy of the
// elements that are visible (expired ones are removed as they are read).
template <typename K, typename V, typename N = internal::VoidNamespace>
class TtlListState : public internal::TtlBoundState<K, N, std::vector<internal::TtlValue<V>>> {
  using Stored = std::vector<internal::TtlValue<V>>;

 public:
  using internal::TtlBoundState<K, N, Stored>::TtlBoundState;
  // As Flink's TtlListState: the unexpired elements (and the expired ones
  // too with ReturnExpiredIfNotCleanedUp); the list is cleared when none is
  // unexpired, and with OnReadAndWrite rewritten as its unexpired elements,
  // read now; otherwise a read leaves it as it is (an expired element stays
  // until cleaned up, and with ReturnExpiredIfNotCleanedUp is returned
  // again).
  std::vector<V> get() {
    std::vector<V> out;
    Stored* list = this->find();
    if (list == nullptr) return out;
    const Timestamp t = this->now();
    bool any_unexpired = false;
    for (const internal::TtlValue<V>& e : *list) {
      const bool unexpired = !this->expired(e.last_access, t);
      any_unexpired = any_unexpired || unexpired;
      if (unexpired || this->return_expired_) out.push_back(e.value);
    }
    if (!any_unexpired) {
      this->clear();
    } else if (this->refresh_on_read_) {
      size_t kept = 0;
      for (size_t i = 0; i < list->size(); ++i) {
        internal::TtlValue<V>& e = (*list)[i];
        if (this->expired(e.last_access, t)) continue;
        e.last_access = t;
        if (kept != i) (*list)[kept] = std::move(e);
        ++kept;
      }
      list->resize(kept);
    }
    return out;
  }
  void add(V v) { this->get_or_create().push_back({std::move(v), this->now()}); }
  void add_all(const std::vector<V>& values) {
    if (values.empty()) return;
    const Timestamp t = this->now();
    Stored& list = this->get_or_create();
    for (const V& v : values) list.push_back({v, t});
  }
  void update(const std::vector<V>& values) {
    if (values.empty()) return this->clear();
    const Timestamp t = this->now();
    Stored& list = this->get_or_create();
    list.clear();
    for (const V& v : values) list.push_back({v, t});
  }
};

// MapState with a time to live per map entry.  entries() returns a copy of
// the visible mappings, in UK order.
template <typename K, typename UK, typename UV, typename N = internal::VoidNamespace>
class TtlMapState
    : public internal::TtlBoundState<K, N, std::map<UK, internal::TtlValue<UV>, KeyLess<UK>>> {
  using Stored = std::map<UK, internal::TtlValue<UV>, KeyLess<UK>>;

 public:
  using internal::TtlBoundState<K, N, Stored>::TtlBoundState;
  std::optional<UV> get(const UK& uk) {
    Stored* m = this->find();
    if (m == nullptr) return std::nullopt;
    auto it = m->find(uk);
    if (it == m->end()) return std::nullopt;
    return this->Read(&it->second, this->now(), [&] { Erase(m, it); });
  }
  void put(UK uk, UV uv) {
    this->get_or_create().insert_or_assign(std::move(uk),
                                           internal::TtlValue<UV>{std::move(uv), this->now()});
  }
  template <typename Range>
  void put_all(const Range& entries) {
    for (const auto& [uk, uv] : entries) put(uk, uv);
  }
  bool contains(const UK& uk) { return get(uk).has_value(); }
  void remove(const UK& uk) {
    Stored* m = this->find();
    if (m == nullptr) return;
    auto it = m->find(uk);
    if (it != m->end()) Erase(m, it);
  }
  std::map<UK, UV, KeyLess<UK>> entries() {
    std::map<UK, UV, KeyLess<UK>> out;
    Stored* m = this->find();
    if (m == nullptr) return out;
    const Timestamp t = this->now();
    for (auto it = m->begin(); it != m->end();) {
      if (this->expired(it->second.last_access, t)) {
        if (this->return_expired_) out.emplace(it->first, it->second.value);
        it = m->erase(it);
        continue;
      }
      if (this->refresh_on_read_) it->second.last_access = t;
      out.emplace(it->first, it->second.value);
      ++it;
    }
    if (m->empty()) this->clear();
    return out;
  }
  std::vector<UK> keys() {
    std::vector<UK> out;
    for (auto& [uk, uv] : entries()) out.push_back(uk);
    return out;
  }
  std::vector<UV> values() {
    std::vector<UV> out;
    for (auto& [uk, uv] : entries()) out.push_back(uv);
    return out;
  }
  bool is_empty() { return entries().empty(); }

 private:
  void Erase(Stored* m, typename Stored::iterator it) {
    m->erase(it);
    if (m->empty()) this->clear();
  }
};

// ReducingState with a time to live: an expired value is not reduced with
// (the next add starts afresh, as Flink's TtlReduceFunction), unless it is
// still there and the visibility is ReturnExpiredIfNotCleanedUp.
template <typename K, typename V, typename F, typename N = internal::VoidNamespace>
class TtlReducingState : public internal::TtlBoundState<K, N, internal::TtlValue<V>> {
 public:
  TtlReducingState(internal::StateTable<K, N, internal::TtlValue<V>>* table, const K* key, F f,
                   const StateTtlConfig& config, const Clock* clock,
                   const N* ns = &internal::kVoidNamespace)
      : internal::TtlBoundState<K, N, internal::TtlValue<V>>(table, key, config, clock, ns),
        f_(std::move(f)) {}
  void add(const V& v) {
    const Timestamp t = this->now();
    internal::TtlValue<V>* e = this->find();
    if (e != nullptr && (this->return_expired_ || !this->expired(e->last_access, t))) {
      e->value = f_(static_cast<const V&>(e->value), v);
      e->last_access = t;
    } else {
      this->get_or_create() = internal::TtlValue<V>{v, t};
    }
  }
  std::optional<V> get() {
    return this->Read(this->find(), this->now(), [this] { this->clear(); });
  }

 private:
  F f_;
};

// AggregatingState with a time to live: an expired accumulator is not
// added to (the next add starts from create_accumulator(), as Flink's
// TtlAggregateFunction), unless it is still there and the visibility is
// ReturnExpiredIfNotCleanedUp.
template <typename K, typename Agg, typename N = internal::VoidNamespace>
class TtlAggregatingState
    : public internal::TtlBoundState<K, N, internal::TtlValue<internal::AccumulatorOf<Agg>>> {
 public:
  using Acc = internal::AccumulatorOf<Agg>;
  TtlAggregatingState(internal::StateTable<K, N, internal::TtlValue<Acc>>* table, const K* key,
                      Agg agg, const StateTtlConfig& config, const Clock* clock,
                      const N* ns = &internal::kVoidNamespace)
      : internal::TtlBoundState<K, N, internal::TtlValue<Acc>>(table, key, config, clock, ns),
        agg_(std::move(agg)) {}
  template <typename In>
  void add(const In& v) {
    const Timestamp t = this->now();
    internal::TtlValue<Acc>* e = this->find();
    if (e == nullptr || (!this->return_expired_ && this->expired(e->last_access, t))) {
      internal::TtlValue<Acc>& fresh = this->get_or_create();
      fresh.value = agg_.create_accumulator();
      e = &fresh;
    }
    e->value = agg_.add(v, std::move(e->value));
    e->last_access = t;
  }
  std::optional<internal::AggregateResultOf<Agg>> get() {
    std::optional<Acc> acc = this->Read(this->find(), this->now(), [this] { this->clear(); });
    if (!acc) return std::nullopt;
    return agg_.get_result(*acc);
  }

 private:
  mutable Agg agg_;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_
