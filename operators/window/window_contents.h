// operators/window/window_contents.h
//
// Per-(key, state window) contents of a window operator, one policy class per
// kind of window function.  Each keeps its (key, window) -> value table in
// the window operator's KeyedStateStore (operators/keyed/keyed_state_store.h;
// the window is the namespace) and offers:
//
//   void Bind(KeyedStateStore<K>& store);             // first: the table
//   void Add(const K& key, const W& sw, const T& value, Timestamp ts);
//   bool Has(const K& key, const W& sw) const;        // non-empty contents
//   void Emit(const K& key, const W& window, const W& sw, Timestamp watermark,
//             WindowContext& ctx, Collector<Out>& out);
//   void Clear(const K& key, const W& sw);
//   void Merge(const K& key, const W& target, const std::vector<W>& sources);
//   size_t size() const;                               // live (key, window)s
//   void ForEachKeyWindow(F f) const;                  // f(key, sw) for each
//
//   ReduceContents     - one T per window, reduced on arrival (Flink's
//                        ReducingState): incremental, no allocation per
//                        record once the window exists;
//   AggregateContents  - one accumulator per window (AggregatingState);
//   ListContents       - every element with its timestamp (ListState), for
//                        process / apply and evictors.
// Has, Clear, Merge, size, ForEachKeyWindow and StateBytes are written once,
// in KeyWindowContents, the table all three derive from; Merge follows
// Flink's heap state: the sources are combined in order, then the target (if
// present) is combined with that: target first.
//
// Thread safety: none; owned by one operator instance.
#ifndef TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_
#define TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_

#include <concepts>
#include <deque>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark/operators/basic.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/window/evictors.h"
#include "tidemark/operators/window/window_context.h"

namespace tidemark::internal {

// The name of the window contents' table in the window operator's store.
inline constexpr char kWindowContentsState[] = "window-contents";

// Marks "no process function" in ReduceContents / AggregateContents.
struct NoProcessFunction {};

// The (key, state window) -> V table of one kind of contents, table
// kWindowContentsState of the operator's KeyedStateStore (Bind before any
// other call), with the members every kind has alike.  Derived (CRTP) supplies
//   void Combine(V& acc, V&& next);   // acc := acc combined with next
// for Merge, which follows Flink's heap state: the sources are combined in
// order, then the target (if present) is combined with that: target first.
template <typename Derived, typename K, typename W, typename V>
class KeyWindowContents {
 public:
  using Table = StateTable<K, W, V>;
  // Binds (again, after KeyedStateStore::UseBackend: then the table moves to
  // RocksDB when the job's backend is RocksDB) the table.  Every access goes
  // through the table's Find / TryEmplace / Erase, which read through the
  // cache on RocksDB.
  void Bind(KeyedStateStore<K>& store) {
    table_ = &store.template HandleTable<V, W>(kWindowContentsState);
  }
  bool Has(const K& key, const W& sw) const { return table_->Find(key, sw) != nullptr; }
  void Clear(const K& key, const W& sw) {
    if (table_->kv == nullptr) [[likely]] {
      // Through the table, never `map` alone: while a snapshot still reads
      // a frozen copy-on-write layer, the erase leaves a tombstone over the
      // entry there (else a purged window came back with its old contents).
      table_->Erase(key, sw);
    } else if (table_->Find(key, sw) != nullptr) {
      table_->Erase(key, sw);
      --kv_live_;
    }
  }
  void Merge(const K& key, const W& target, const std::vector<W>& sources) {
    Derived& self = static_cast<Derived&>(*this);
    std::optional<V> merged;
    for (const W& s : sources) {
      V* v = table_->Find(key, s);
      if (v == nullptr) continue;
      if (merged) {
        self.Combine(*merged, std::move(*v));
      } else {
        merged.emplace(std::move(*v));
      }
      Clear(key, s);
    }
    if (!merged) return;
    auto [v, inserted] = Emplace(key, target, std::move(*merged));
    if (!inserted) self.Combine(*v, std::move(*merged));
  }
  // Live (key, window)s: on the heap the table's visible entries (those of
  // the copy-on-write layers a snapshot still reads included); on RocksDB a
  // count kept as entries come and go (recounted from the store after a
  // restore).
  size_t size() const { return table_->kv == nullptr ? table_->VisibleSize() : kv_live_; }
  // f(key, sw) for every (key, window); on RocksDB from a snapshot of the
  // store (the pairs decoded and kept for the call, as f may keep pointers).
  template <typename F>
  void ForEachKeyWindow(F&& f) const {
    if (table_->kv == nullptr) {
      // The copy-on-write layers' entries included.
      table_->ForEachEntry([&f](const KeyWindow<K, W>& kw, const V&) { f(kw.first, kw.second); });
      return;
    }
    std::deque<KeyWindow<K, W>> pairs;
    table_->ForEachStoredKey([&](K key, W w) { pairs.emplace_back(std::move(key), std::move(w)); });
    for (const auto& [key, w] : pairs) f(key, w);
  }
  // Bytes of the table (capacity; heap memory owned by the values not seen):
  // on RocksDB those of its cache.
  size_t StateBytes() const {
    return table_->map.capacity() * (sizeof(typename Table::Map::value_type) + 1);
  }
  // Sets the value of (key, sw), in a restore from another operator's
  // layout (blind writes on RocksDB); Restored() after the last.
  void RestoreValue(const K& key, const W& sw, V value) {
    table_->RestoreEntry(key, sw, std::move(value));
  }
  // After a restore: on RocksDB, commits what RestoreValue wrote and counts
  // the entries in the store.
  void Restored() {
    table_->CommitRestore();
    if (table_->kv != nullptr) kv_live_ = table_->CountStored();
  }

 protected:
  // The entry of (key, sw), made from `init` when none; whether it was.
  template <typename Init>
  std::pair<V*, bool> Emplace(const K& key, const W& sw, Init&& init) {
    auto r = table_->TryEmplace(key, sw, std::forward<Init>(init));
    if (r.second && table_->kv != nullptr) ++kv_live_;
    return r;
  }
  V* Find(const K& key, const W& sw) const { return table_->Find(key, sw); }

  Table* table_ = nullptr;  // in the operator's store (Bind)
  size_t kv_live_ = 0;      // on RocksDB: live entries
};

template <typename T, typename K, typename W, typename ReduceFn, typename ProcessFn, typename Out>
class ReduceContents
    : public KeyWindowContents<ReduceContents<T, K, W, ReduceFn, ProcessFn, Out>, K, W, T> {
 public:
  using OutputType = Out;
  ReduceContents(ReduceFn f, ProcessFn p) : reduce_(std::move(f)), process_(std::move(p)) {}

  // One value per (key, window): the hooks of FastWindowOperator's
  // window-major state (fast_window_operator.h, time_window_table.h).
  // kNeedsContext: EmitValue reads the context.
  using Value = T;
  static constexpr bool kNeedsContext = !std::is_same_v<ProcessFn, NoProcessFunction>;
  Value NewValue(const T& v) { return v; }
  void AddTo(Value& acc, const T& v) { acc = reduce_(static_cast<const T&>(acc), v); }
  // Values of two parts of one window combine (SlicedWindowOperator,
  // sliced_window_operator.h): acc := reduce(acc, next).
  static constexpr bool kCanMergeValues = true;
  void MergeValue(Value& acc, const Value& next) {
    acc = reduce_(static_cast<const T&>(acc), next);
  }
  void EmitValue(const K& key, const W& window, const Value& acc, WindowContext& ctx,
                 Collector<Out>& out) {
    if constexpr (kNeedsContext) {
      process_(key, window, acc, ctx, out);
    } else {
      out.collect(acc);
    }
  }

  void Add(const K& key, const W& sw, const T& v, Timestamp) {
    auto [stored, inserted] = this->Emplace(key, sw, v);
    if (!inserted) *stored = reduce_(static_cast<const T&>(*stored), v);
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp, WindowContext& ctx,
            Collector<Out>& out) {
    const T* stored = this->Find(key, sw);
    if (stored == nullptr) return;
    if constexpr (std::is_same_v<ProcessFn, NoProcessFunction>) {
      out.collect(*stored);
    } else {
      process_(key, window, *stored, ctx, out);
    }
  }
  // Merge (KeyWindowContents): acc := reduce(acc, next).
  void Combine(T& acc, T&& next) {
    acc = reduce_(static_cast<const T&>(acc), static_cast<const T&>(next));
  }

 private:
  ReduceFn reduce_;
  ProcessFn process_;
};

template <typename T, typename K, typename W, typename Agg, typename ProcessFn, typename Out>
class AggregateContents : public KeyWindowContents<AggregateContents<T, K, W, Agg, ProcessFn, Out>,
                                                   K, W, AccumulatorOf<Agg>> {
 public:
  using OutputType = Out;
  using Acc = AccumulatorOf<Agg>;
  AggregateContents(Agg agg, ProcessFn p) : agg_(std::move(agg)), process_(std::move(p)) {}

  // One accumulator per (key, window): see ReduceContents.
  using Value = Acc;
  static constexpr bool kNeedsContext = !std::is_same_v<ProcessFn, NoProcessFunction>;
  Value NewValue(const T& v) { return agg_.add(v, agg_.create_accumulator()); }
  void AddTo(Value& acc, const T& v) { acc = agg_.add(v, std::move(acc)); }
  // See ReduceContents: acc := merge(acc, next), when the AggregateFunction
  // has merge (optional unless the windows merge).
  static constexpr bool kCanMergeValues = requires(Agg & a, Acc x, Acc y) {
    { a.merge(std::move(x), std::move(y)) } -> std::convertible_to<Acc>;
  };
  void MergeValue(Value& acc, const Value& next) requires kCanMergeValues {
    acc = agg_.merge(std::move(acc), Value(next));
  }
  void EmitValue(const K& key, const W& window, const Value& acc, WindowContext& ctx,
                 Collector<Out>& out) {
    if constexpr (kNeedsContext) {
      auto result = agg_.get_result(acc);
      process_(key, window, static_cast<const decltype(result)&>(result), ctx, out);
    } else {
      out.collect(agg_.get_result(acc));
    }
  }

  void Add(const K& key, const W& sw, const T& v, Timestamp) {
    Acc* acc = this->Find(key, sw);
    if (acc == nullptr) acc = this->Emplace(key, sw, agg_.create_accumulator()).first;
    *acc = agg_.add(v, std::move(*acc));
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp, WindowContext& ctx,
            Collector<Out>& out) {
    const Acc* acc = this->Find(key, sw);
    if (acc == nullptr) return;
    if constexpr (std::is_same_v<ProcessFn, NoProcessFunction>) {
      out.collect(agg_.get_result(*acc));
    } else {
      auto result = agg_.get_result(*acc);
      process_(key, window, static_cast<const decltype(result)&>(result), ctx, out);
    }
  }
  // Merge (KeyWindowContents): acc := merge(acc, next).  Without merge, the
  // API's message alone (not a compiler error on the missing member after it).
  void Combine(Acc& acc, Acc&& next) {
    constexpr bool kHasMerge = requires(Agg & a, Acc x, Acc y) {
      { a.merge(std::move(x), std::move(y)) } -> std::convertible_to<Acc>;
    };
    static_assert(kHasMerge,
                  "tidemark: aggregate(agg) on merging windows (sessions) needs agg.merge(Acc, "
                  "Acc) -> Acc");
    if constexpr (kHasMerge) acc = agg_.merge(std::move(acc), std::move(next));
  }

 private:
  Agg agg_;
  ProcessFn process_;
};

template <typename T, typename K, typename W, typename Fn, typename EvictorT, typename Out>
class ListContents
    : public KeyWindowContents<ListContents<T, K, W, Fn, EvictorT, Out>, K, W, WindowElements<T>> {
 public:
  using OutputType = Out;
  ListContents(Fn f, EvictorT e) : fn_(std::move(f)), evictor_(std::move(e)) {}

  void Add(const K& key, const W& sw, const T& v, Timestamp ts) {
    WindowElements<T>& e = *this->Emplace(key, sw, WindowElements<T>{}).first;
    e.values.push_back(v);
    e.timestamps.push_back(ts);
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp watermark, WindowContext& ctx,
            Collector<Out>& out) {
    WindowElements<T>* found = this->Find(key, sw);
    if (found == nullptr) return;
    // The function may not touch this table; the reference stays valid.
    WindowElements<T>& e = *found;
    evictor_.evict_before(e, window, watermark);
    fn_(key, window, static_cast<const std::vector<T>&>(e.values), ctx, out);
    evictor_.evict_after(e, window, watermark);
    if (e.empty()) this->Clear(key, sw);  // as Flink's ListState.update(empty)
  }
  // Merge (KeyWindowContents): next's elements appended to acc's.
  void Combine(WindowElements<T>& acc, WindowElements<T>&& next) {
    for (auto& v : next.values) acc.values.push_back(std::move(v));
    acc.timestamps.insert(acc.timestamps.end(), next.timestamps.begin(), next.timestamps.end());
  }

 private:
  Fn fn_;
  EvictorT evictor_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_
