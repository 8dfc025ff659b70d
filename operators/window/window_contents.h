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
// Merge follows Flink's heap state: the sources are combined in order, then
// the target (if present) is combined with that: target first.
//
// Thread safety: none; owned by one operator instance.
#ifndef TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_
#define TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_

#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "operators/basic.h"
#include "operators/keyed/keyed_state_store.h"
#include "operators/window/evictors.h"
#include "operators/window/window_context.h"

namespace tidemark {

// The name of the window contents' table in the window operator's store.
inline constexpr char kWindowContentsState[] = "window-contents";

// Marks "no process function" in ReduceContents / AggregateContents.
struct NoProcessFunction {};

template <typename T, typename K, typename W, typename ReduceFn, typename ProcessFn, typename Out>
class ReduceContents {
 public:
  using OutputType = Out;
  // The contents live in table kWindowContentsState of the operator's
  // KeyedStateStore: Bind before any other call.
  using Table = StateTable<K, W, T>;
  void Bind(KeyedStateStore<K>& store) {
    table_ = &store.template Table<T, W>(kWindowContentsState);
  }
  ReduceContents(ReduceFn f, ProcessFn p) : reduce_(std::move(f)), process_(std::move(p)) {}

  // One value per (key, window): the hooks of WindowOperator's window-major
  // state (time_window_table.h).  kNeedsContext: EmitValue reads the context.
  using Value = T;
  static constexpr bool kNeedsContext = !std::is_same_v<ProcessFn, NoProcessFunction>;
  Value NewValue(const T& v) { return v; }
  void AddTo(Value& acc, const T& v) { acc = reduce_(static_cast<const T&>(acc), v); }
  void EmitValue(const K& key, const W& window, const Value& acc, WindowContext& ctx,
                 Collector<Out>& out) {
    if constexpr (kNeedsContext) {
      process_(key, window, acc, ctx, out);
    } else {
      out.collect(acc);
    }
  }

  void Add(const K& key, const W& sw, const T& v, Timestamp) {
    auto [it, inserted] = table_->map.try_emplace(KeyWindow<K, W>(key, sw), v);
    if (!inserted) it->second = reduce_(static_cast<const T&>(it->second), v);
  }
  bool Has(const K& key, const W& sw) const {
    return table_->map.contains(KeyWindow<K, W>(key, sw));
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp, WindowContext& ctx,
            Collector<Out>& out) {
    auto it = table_->map.find(KeyWindow<K, W>(key, sw));
    if (it == table_->map.end()) return;
    if constexpr (std::is_same_v<ProcessFn, NoProcessFunction>) {
      out.collect(it->second);
    } else {
      process_(key, window, static_cast<const T&>(it->second), ctx, out);
    }
  }
  void Clear(const K& key, const W& sw) { table_->map.erase(KeyWindow<K, W>(key, sw)); }
  void Merge(const K& key, const W& target, const std::vector<W>& sources) {
    std::optional<T> merged;
    for (const W& s : sources) {
      auto it = table_->map.find(KeyWindow<K, W>(key, s));
      if (it == table_->map.end()) continue;
      if (merged) {
        merged = reduce_(static_cast<const T&>(*merged), static_cast<const T&>(it->second));
      } else {
        merged.emplace(std::move(it->second));
      }
      table_->map.erase(it);
    }
    if (!merged) return;
    auto [it, inserted] = table_->map.try_emplace(KeyWindow<K, W>(key, target), std::move(*merged));
    if (!inserted)
      it->second = reduce_(static_cast<const T&>(it->second), static_cast<const T&>(*merged));
  }
  size_t size() const { return table_->map.size(); }
  template <typename F>
  void ForEachKeyWindow(F&& f) const {
    for (const auto& [kw, v] : table_->map) f(kw.first, kw.second);
  }
  // Bytes of the table (capacity; heap memory owned by the values not seen).
  size_t StateBytes() const {
    return table_->map.capacity() * (sizeof(typename Table::Map::value_type) + 1);
  }

 private:
  ReduceFn reduce_;
  ProcessFn process_;
  Table* table_ = nullptr;  // in the operator's store (Bind)
};

template <typename T, typename K, typename W, typename Agg, typename ProcessFn, typename Out>
class AggregateContents {
 public:
  using OutputType = Out;
  using Acc = AccumulatorOf<Agg>;
  // See ReduceContents::Bind.
  using Table = StateTable<K, W, Acc>;
  void Bind(KeyedStateStore<K>& store) {
    table_ = &store.template Table<Acc, W>(kWindowContentsState);
  }
  AggregateContents(Agg agg, ProcessFn p) : agg_(std::move(agg)), process_(std::move(p)) {}

  // One accumulator per (key, window): see ReduceContents.
  using Value = Acc;
  static constexpr bool kNeedsContext = !std::is_same_v<ProcessFn, NoProcessFunction>;
  Value NewValue(const T& v) { return agg_.add(v, agg_.create_accumulator()); }
  void AddTo(Value& acc, const T& v) { acc = agg_.add(v, std::move(acc)); }
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
    KeyWindow<K, W> kw(key, sw);
    auto it = table_->map.find(kw);
    if (it == table_->map.end())
      it = table_->map.emplace(std::move(kw), agg_.create_accumulator()).first;
    it->second = agg_.add(v, std::move(it->second));
  }
  bool Has(const K& key, const W& sw) const {
    return table_->map.contains(KeyWindow<K, W>(key, sw));
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp, WindowContext& ctx,
            Collector<Out>& out) {
    auto it = table_->map.find(KeyWindow<K, W>(key, sw));
    if (it == table_->map.end()) return;
    if constexpr (std::is_same_v<ProcessFn, NoProcessFunction>) {
      out.collect(agg_.get_result(static_cast<const Acc&>(it->second)));
    } else {
      auto result = agg_.get_result(static_cast<const Acc&>(it->second));
      process_(key, window, static_cast<const decltype(result)&>(result), ctx, out);
    }
  }
  void Clear(const K& key, const W& sw) { table_->map.erase(KeyWindow<K, W>(key, sw)); }
  void Merge(const K& key, const W& target, const std::vector<W>& sources) {
    std::optional<Acc> merged;
    for (const W& s : sources) {
      auto it = table_->map.find(KeyWindow<K, W>(key, s));
      if (it == table_->map.end()) continue;
      if (merged) {
        merged = agg_.merge(std::move(*merged), std::move(it->second));
      } else {
        merged.emplace(std::move(it->second));
      }
      table_->map.erase(it);
    }
    if (!merged) return;
    auto [it, inserted] = table_->map.try_emplace(KeyWindow<K, W>(key, target), std::move(*merged));
    if (!inserted) it->second = agg_.merge(std::move(it->second), std::move(*merged));
  }
  size_t size() const { return table_->map.size(); }
  template <typename F>
  void ForEachKeyWindow(F&& f) const {
    for (const auto& [kw, v] : table_->map) f(kw.first, kw.second);
  }
  // Bytes of the table (capacity; heap memory owned by the values not seen).
  size_t StateBytes() const {
    return table_->map.capacity() * (sizeof(typename Table::Map::value_type) + 1);
  }

 private:
  Agg agg_;
  ProcessFn process_;
  Table* table_ = nullptr;  // in the operator's store (Bind)
};

template <typename T, typename K, typename W, typename Fn, typename EvictorT, typename Out>
class ListContents {
 public:
  using OutputType = Out;
  // The contents live in table kWindowContentsState of the operator's
  // KeyedStateStore: Bind before any other call.
  using Table = StateTable<K, W, WindowElements<T>>;
  void Bind(KeyedStateStore<K>& store) {
    table_ = &store.template Table<WindowElements<T>, W>(kWindowContentsState);
  }
  ListContents(Fn f, EvictorT e) : fn_(std::move(f)), evictor_(std::move(e)) {}

  void Add(const K& key, const W& sw, const T& v, Timestamp ts) {
    WindowElements<T>& e = table_->map[KeyWindow<K, W>(key, sw)];
    e.values.push_back(v);
    e.timestamps.push_back(ts);
  }
  bool Has(const K& key, const W& sw) const {
    return table_->map.contains(KeyWindow<K, W>(key, sw));
  }
  void Emit(const K& key, const W& window, const W& sw, Timestamp watermark, WindowContext& ctx,
            Collector<Out>& out) {
    auto it = table_->map.find(KeyWindow<K, W>(key, sw));
    if (it == table_->map.end()) return;
    // The function may not touch this map; the reference stays valid.
    WindowElements<T>& e = it->second;
    evictor_.evict_before(e, window, watermark);
    fn_(key, window, static_cast<const std::vector<T>&>(e.values), ctx, out);
    evictor_.evict_after(e, window, watermark);
    if (e.empty()) table_->map.erase(it);  // as Flink's ListState.update(empty)
  }
  void Clear(const K& key, const W& sw) { table_->map.erase(KeyWindow<K, W>(key, sw)); }
  void Merge(const K& key, const W& target, const std::vector<W>& sources) {
    std::optional<WindowElements<T>> merged;
    for (const W& s : sources) {
      auto it = table_->map.find(KeyWindow<K, W>(key, s));
      if (it == table_->map.end()) continue;
      if (merged) {
        Append(*merged, std::move(it->second));
      } else {
        merged.emplace(std::move(it->second));
      }
      table_->map.erase(it);
    }
    if (!merged) return;
    auto [it, inserted] = table_->map.try_emplace(KeyWindow<K, W>(key, target), std::move(*merged));
    if (!inserted) Append(it->second, std::move(*merged));
  }
  size_t size() const { return table_->map.size(); }
  template <typename F>
  void ForEachKeyWindow(F&& f) const {
    for (const auto& [kw, v] : table_->map) f(kw.first, kw.second);
  }
  // Bytes of the table (capacity; heap memory owned by the values not seen).
  size_t StateBytes() const {
    return table_->map.capacity() * (sizeof(typename Table::Map::value_type) + 1);
  }

 private:
  static void Append(WindowElements<T>& to, WindowElements<T>&& from) {
    for (auto& v : from.values) to.values.push_back(std::move(v));
    to.timestamps.insert(to.timestamps.end(), from.timestamps.begin(), from.timestamps.end());
  }
  Fn fn_;
  EvictorT evictor_;
  Table* table_ = nullptr;  // in the operator's store (Bind)
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_WINDOW_CONTENTS_H_
