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
//   ListState<K, V>         get, add, add_all, update, clear
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
// tidemark::StateCodec (runtime/state_codec.h) compiles and works, and
// throws at Snapshot with the type's name.
//
// Key groups (KeyGroupRange): the key -> key group function is key_by's
// (partitioning/key_groups.h).  Key types with a KeyHash of their own
// (a user specialisation of tidemark::KeyHash, not seen here) are not
// filtered: every entry is kept, which is exact when the old state comes from
// the same subtask.
//
// Thread safety: none; one operator instance, one task thread.
#ifndef TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_
#define TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "partitioning/key_groups.h"
#include "runtime/operator.h"
#include "runtime/state_codec.h"

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

class StateTableBase {
 public:
  virtual ~StateTableBase() = default;
  // Writes the entries; throws NoStateCodecError (naming `where`) when a type
  // has no codec.
  virtual void Snapshot(StateWriter& w, std::string_view where) const = 0;
  // Adds the entries of what Snapshot wrote whose key is in `range`.
  virtual void Restore(StateReader& r, const KeyGroupRange& range) = 0;
};

// One named state: V per (key, namespace).
template <typename K, typename N, typename V>
class StateTable final : public StateTableBase {
 public:
  static constexpr bool kVoid = std::is_same_v<N, VoidNamespace>;
  using EntryKey = std::conditional_t<kVoid, K, KeyWindow<K, N>>;
  using Map = absl::flat_hash_map<EntryKey, V>;

  // The map key of (key, ns): the key itself (a reference) without a
  // namespace, else the pair.
  static decltype(auto) KeyOf(const K& key, const N& ns) {
    if constexpr (kVoid) {
      return (key);
    } else {
      return EntryKey(key, ns);
    }
  }
  V* Find(const K& key, const N& ns) {
    auto it = map.find(KeyOf(key, ns));
    return it == map.end() ? nullptr : &it->second;
  }
  void Erase(const K& key, const N& ns) { map.erase(KeyOf(key, ns)); }

  static constexpr bool kEncodable = HasStateCodec<K> && HasStateCodec<N> && HasStateCodec<V>;

  void Snapshot(StateWriter& w, std::string_view where) const override {
    if constexpr (kEncodable) {
      w.PutVarint(map.size());
      for (const auto& [ek, v] : map) {
        if constexpr (kVoid) {
          Encode(w, ek);
        } else {
          Encode(w, ek.first);
          Encode(w, ek.second);
        }
        Encode(w, v);
      }
    } else {
      ThrowFirstMissingCodec<K, N, V>(where);
    }
  }
  void Restore(StateReader& r, const KeyGroupRange& range) override {
    if constexpr (kEncodable) {
      const uint64_t n = r.GetCount("state entries");
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        K key = Decode<K>(r);
        N ns = [&] {
          if constexpr (kVoid) {
            return N{};
          } else {
            return Decode<N>(r);
          }
        }();
        V v = Decode<V>(r);
        if (!r.ok()) return;
        if (!range.Contains(key)) continue;
        if constexpr (kVoid) {
          map.insert_or_assign(std::move(key), std::move(v));
        } else {
          map.insert_or_assign(EntryKey(std::move(key), std::move(ns)), std::move(v));
        }
      }
    } else {
      r.Fail("state of a type without tidemark::StateCodec cannot be restored");
    }
  }

  Map map;
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
    auto it = tables_.find(name);
    if (it == tables_.end())
      it = tables_.emplace(std::string(name), std::make_unique<StateTable<K, N, V>>()).first;
    auto* t = dynamic_cast<StateTable<K, N, V>*>(it->second.get());
    if (t == nullptr)
      throw std::logic_error("state '" + std::string(name) + "' was created with another type");
    if (!pending_.empty()) ApplyPending(it->first, *t);
    return *t;
  }
  size_t num_tables() const { return tables_.size(); }

  // See "Checkpoints" in the file comment.  `where` names the operator in
  // errors.  Format: a count of tables, then per table its name and a count
  // of blobs (each a table's entries as StateTable::Snapshot wrote them).
  void Snapshot(StateWriter& w, std::string_view where) const {
    size_t n = tables_.size();
    for (const auto& [name, blobs] : pending_)
      if (!tables_.contains(name)) ++n;
    w.PutVarint(n);
    for (const auto& [name, table] : tables_) {
      w.PutBytes(name);
      w.PutVarint(1);
      std::string bytes;
      StateWriter tw(&bytes);
      table->Snapshot(tw, std::string(where) + ", state '" + name + "'");
      w.PutBytes(bytes);
    }
    for (const auto& [name, blobs] : pending_) {
      if (tables_.contains(name)) continue;
      w.PutBytes(name);
      w.PutVarint(blobs.size());
      for (const std::string& b : blobs) w.PutBytes(b);
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
        auto it = tables_.find(name);
        if (it != tables_.end()) {
          DecodeBlob(r, bytes, "state '" + name + "'",
                     [&](StateReader& tr) { it->second->Restore(tr, range); });
        } else {
          pending_[name].emplace_back(bytes);
        }
      }
    }
  }

 private:
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

  std::map<std::string, std::unique_ptr<StateTableBase>, std::less<>> tables_;
  // Restored bytes of tables not created yet, by name.
  std::map<std::string, std::vector<std::string>, std::less<>> pending_;
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
  V& get_or_create() { return table_->map[table_->KeyOf(*key_, *ns_)]; }
  template <typename Init>
  std::pair<V*, bool> try_emplace(Init&& init) {
    auto [it, inserted] =
        table_->map.try_emplace(table_->KeyOf(*key_, *ns_), std::forward<Init>(init));
    return {&it->second, inserted};
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
    const V* v = this->find();
    return v == nullptr ? std::nullopt : std::optional<V>(*v);
  }
  V value_or(V dflt) const {
    const V* v = this->find();
    return v == nullptr ? std::move(dflt) : *v;
  }
  void update(V v) { this->get_or_create() = std::move(v); }
};

// The list of the current key (ListState).
template <typename K, typename V, typename N = internal::VoidNamespace>
class ListState : public internal::BoundState<K, N, std::vector<V>> {
 public:
  using internal::BoundState<K, N, std::vector<V>>::BoundState;
  const std::vector<V>& get() const {
    static const std::vector<V> kEmpty;
    const std::vector<V>* v = this->find();
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
    const V* v = this->find();
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
    const Acc* acc = this->find();
    if (acc == nullptr) return std::nullopt;
    return agg_.get_result(*acc);
  }

 private:
  mutable Agg agg_;
};

// The map of the current key (Flink's MapState): user key UK to user value
// UV.  References from entries() stay valid until the map is next changed.
template <typename K, typename UK, typename UV, typename N = internal::VoidNamespace>
class MapState : public internal::BoundState<K, N, std::map<UK, UV>> {
 public:
  using Map = std::map<UK, UV>;
  using internal::BoundState<K, N, Map>::BoundState;

  // nullopt when `uk` has no mapping.
  std::optional<UV> get(const UK& uk) const {
    const Map* m = this->find();
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
    const Map* m = this->find();
    return m != nullptr && m->contains(uk);
  }
  // Drops the mapping of `uk` (none: no-op); the last one drops the key's map.
  void remove(const UK& uk) {
    Map* m = this->find();
    if (m == nullptr) return;
    m->erase(uk);
    if (m->empty()) this->clear();
  }
  // The mappings, in UK order.
  const Map& entries() const {
    static const Map kEmpty;
    const Map* m = this->find();
    return m == nullptr ? kEmpty : *m;
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
  bool is_empty() const { return this->find() == nullptr; }
};

}  // namespace tidemark

#endif  // TM_OPERATORS_KEYED_KEYED_STATE_STORE_H_
