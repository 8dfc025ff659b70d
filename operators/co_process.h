// operators/co_process.h
//
// Two-input operators (runtime/core/operator.h, TwoInputOperator) behind
// DataStream::connect (api/connected_streams.h): Flink's CoMap, CoFlatMap,
// CoProcessFunction, KeyedCoProcessFunction and KeyedBroadcastProcess-
// Function.  Each instance reads both inputs of one subtask; records of the
// first input reach the function's *1 member, of the second its *2 member,
// interleaved in the order the task reads them (as in Flink there is no
// order between the two inputs).  The operator's watermark is the combined
// one (runtime/io/detail/input_gate.h: the minimum over the inputs that are not idle),
// and event-time timers fire on it.
//
//   co_map:         map1(const A&) -> Out,  map2(const B&) -> Out
//   co_flat_map:    flat_map1(const A&, Collector<Out>&), flat_map2(const B&, Collector<Out>&)
//   CoProcessFunction<A, B, Out>:
//                   process_element1(const A&, Context&, Collector<Out>&), process_element2(...)
//                   Context: ProcessContext (operators/process.h): timestamp(),
//                   current_watermark(), output(tag, v), subtask_index(), counter(name)
//   KeyedCoProcessFunction<K, A, B, Out> (both inputs keyed by the same key type):
//                   process_element1 / process_element2 / on_timer(ts, ctx, out), with
//                   KeyedProcessContext<K> (operators/keyed_process.h): keyed state and timers
//   KeyedBroadcastProcessFunction<K, A, B, Out> (keyed A, broadcast B):
//                   process_element(const A&, ReadOnlyContext&, Collector<Out>&),
//                   process_broadcast_element(const B&, BroadcastContext&, Collector<Out>&),
//                   on_timer(ts, ReadOnlyContext&, Collector<Out>&)
//   BroadcastProcessFunction<A, B, Out> (non-keyed A, broadcast B):
//                   process_element(const A&, ReadOnlyBroadcastProcessContext&, Collector<Out>&),
//                   process_broadcast_element(const B&, BroadcastProcessContext&,
//                   Collector<Out>&); no keyed state and no timers (as Flink's)
//
// Generalized watermarks (docs/generalized-watermarks.md): each function may
// have declare_watermarks() and a member per input for the input's combined
// values, returning kPeek (forwarded unless the declaration says ignore) or
// kPoll: on_watermark_from_first_input / _second_input (the co-process
// functions), on_watermark_from_non_broadcast_input / _broadcast_input (the
// broadcast process functions); in the keyed ones there is no current key.
//
// Broadcast state (Flink's BroadcastState / MapStateDescriptor): per operator
// instance, maps UK -> UV by name, written only by process_broadcast_element
// (every subtask receives every broadcast record, so every instance holds the
// same state when the function updates it deterministically) and read by
// process_element and on_timer through ReadOnlyBroadcastState.  The broadcast
// side also sees every key's keyed state of every kind through
// apply_to_keyed_state (value) and apply_to_keyed_list_state, _map_state,
// _reducing_state, _aggregating_state.
//
// Function objects may have open(const RuntimeContext&) and close(), as the
// one-input functions (operators/basic.h).  Every subtask has its own copy.
//
// Checkpoints: keyed operators write their keyed state and timers (restored
// by key group, runtime/core/operator.h) and the broadcast state (every old
// subtask's copy is the same: the first one restored is kept).  The two
// inputs' valves are the gate's (runtime/io/detail/input_gate.h).
//
// Thread safety: one task thread per operator instance.
#ifndef TM_OPERATORS_CO_PROCESS_H_
#define TM_OPERATORS_CO_PROCESS_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/keyed_process.h"
#include "tidemark/operators/process.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

// Base classes for the functions (optional: any object with the same members
// works).
template <typename In1, typename In2, typename Out>
class CoMapFunction {
 public:
  using OutputType = Out;
  virtual ~CoMapFunction() = default;
  virtual Out map1(const In1& value) = 0;
  virtual Out map2(const In2& value) = 0;
};

template <typename In1, typename In2, typename Out>
class CoFlatMapFunction {
 public:
  using OutputType = Out;
  virtual ~CoFlatMapFunction() = default;
  virtual void flat_map1(const In1& value, Collector<Out>& out) = 0;
  virtual void flat_map2(const In2& value, Collector<Out>& out) = 0;
};

// Generalized watermarks (operators/process.h) in the co-process functions'
// base classes: the kinds the function emits (none declared: any), and what
// it does with each input's combined value (Flink's onWatermarkFromFirstInput
// / SecondInput), returning kPeek or kPoll.  In a keyed function there is no
// current key in these members (keyed state and timers there fail the job).
template <typename Out, typename Context>
class CoProcessWatermarks {
 public:
  virtual ~CoProcessWatermarks() = default;
  virtual std::vector<WatermarkDeclaration> declare_watermarks() const { return {}; }
  virtual WatermarkHandlingResult on_watermark_from_first_input(const GeneralizedWatermark& /*w*/,
                                                                Collector<Out>& /*out*/,
                                                                Context& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
  virtual WatermarkHandlingResult on_watermark_from_second_input(const GeneralizedWatermark& /*w*/,
                                                                 Collector<Out>& /*out*/,
                                                                 Context& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
};

template <typename In1, typename In2, typename Out>
class CoProcessFunction : public CoProcessWatermarks<Out, ProcessContext> {
 public:
  using OutputType = Out;
  using Context = ProcessContext;
  virtual ~CoProcessFunction() = default;
  virtual void open(const RuntimeContext& /*ctx*/) {}
  virtual void process_element1(const In1& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void process_element2(const In2& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void close() {}
};

template <typename K, typename In1, typename In2, typename Out>
class KeyedCoProcessFunction : public CoProcessWatermarks<Out, KeyedProcessContext<K>> {
 public:
  using KeyType = K;
  using OutputType = Out;
  using Context = KeyedProcessContext<K>;
  using OnTimerContext = KeyedProcessContext<K>;
  virtual ~KeyedCoProcessFunction() = default;
  virtual void process_element1(const In1& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void process_element2(const In2& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void on_timer(Timestamp /*timestamp*/, OnTimerContext& /*ctx*/, Collector<Out>& /*out*/) {
  }
};

namespace internal {
// One named broadcast state.
class BroadcastTableBase {
 public:
  virtual ~BroadcastTableBase() = default;
  virtual void Snapshot(StateWriter& w, std::string_view where) const = 0;
  virtual void Restore(StateReader& r) = 0;
};
template <typename UK, typename UV>
class BroadcastTable final : public BroadcastTableBase {
 public:
  void Snapshot(StateWriter& w, std::string_view where) const override {
    if constexpr (HasStateCodec<UK> && HasStateCodec<UV>) {
      Encode(w, map);
    } else {
      ThrowFirstMissingCodec<UK, UV>(where);
    }
  }
  void Restore(StateReader& r) override {
    if constexpr (HasStateCodec<UK> && HasStateCodec<UV>) {
      map = Decode<std::map<UK, UV, KeyLess<UK>>>(r);
    } else {
      r.Fail("broadcast state of a type without tidemark::StateCodec cannot be restored");
    }
  }
  std::map<UK, UV, KeyLess<UK>> map;
};

// The broadcast states of one operator instance, by name.  A state restored
// before its first use keeps its bytes until then (as KeyedStateStore).
class BroadcastStateStore {
 public:
  // The states the stream was broadcast with (broadcast(descriptors...)):
  // any other name is refused, as Flink refuses it ("The requested state does
  // not exist").  None given (an operator made by hand): every name goes.
  void Register(std::vector<std::string> names) {
    registered_.insert(std::make_move_iterator(names.begin()),
                       std::make_move_iterator(names.end()));
  }
  template <typename UK, typename UV>
  BroadcastTable<UK, UV>& Table(std::string_view name) {
    if (!registered_.empty() && !registered_.contains(name)) ThrowNotRegistered(name);
    auto it = tables_.find(name);
    if (it == tables_.end())
      it = tables_.emplace(std::string(name), std::make_unique<BroadcastTable<UK, UV>>()).first;
    auto* t = dynamic_cast<BroadcastTable<UK, UV>*>(it->second.get());
    if (t == nullptr)
      throw std::logic_error("broadcast state '" + std::string(name) +
                             "' was created with another type");
    auto p = pending_.find(name);
    if (p != pending_.end()) {
      StateReader r(p->second);
      t->Restore(r);
      if (!r.AtEnd())
        throw std::runtime_error("restoring broadcast state '" + std::string(name) +
                                 "': " + (r.ok() ? std::string("bytes left over") : r.error()));
      pending_.erase(p);
    }
    return *t;
  }
  void Snapshot(StateWriter& w, std::string_view where) const {
    size_t n = tables_.size();
    for (const auto& [name, bytes] : pending_)
      if (!tables_.contains(name)) ++n;
    w.PutVarint(n);
    for (const auto& [name, table] : tables_) {
      w.PutBytes(name);
      std::string bytes;
      StateWriter tw(&bytes);
      table->Snapshot(tw, std::string(where) + ", broadcast state '" + name + "'");
      w.PutBytes(bytes);
    }
    for (const auto& [name, bytes] : pending_) {
      if (tables_.contains(name)) continue;
      w.PutBytes(name);
      w.PutBytes(bytes);
    }
  }
  // Every old subtask held the same broadcast state: the first restored wins,
  // later ones are read and dropped.
  void Restore(StateReader& r) {
    const uint64_t n = r.GetCount("broadcast states");
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      std::string name(r.GetBytes("broadcast state name"));
      const std::string_view bytes = r.GetBytes("broadcast state");
      if (!r.ok() || restored_) continue;
      auto it = tables_.find(name);
      if (it != tables_.end()) {
        DecodeBlob(r, bytes, "broadcast state '" + name + "'",
                   [&](StateReader& tr) { it->second->Restore(tr); });
      } else {
        pending_[name] = std::string(bytes);
      }
    }
    restored_ = true;
  }

 private:
  std::map<std::string, std::unique_ptr<BroadcastTableBase>, std::less<>> tables_;
  std::map<std::string, std::string, std::less<>> pending_;
  bool restored_ = false;
  [[noreturn]] static void ThrowNotRegistered(std::string_view name) {
    throw std::invalid_argument(
        "broadcast state '" + std::string(name) +
        "' does not exist: check the state descriptor's name, or give the descriptor to "
        "datastream.broadcast(...) (Flink: \"The requested state does not exist\")");
  }
  std::set<std::string, std::less<>> registered_;
};
}  // namespace internal

// Names a broadcast state of UK -> UV (Flink's MapStateDescriptor).
template <typename UK, typename UV>
struct MapStateDescriptor {
  explicit MapStateDescriptor(std::string n) : name(std::move(n)) {}
  std::string name;
};

// Read access to a broadcast state (the keyed side's view).
template <typename UK, typename UV>
class ReadOnlyBroadcastState {
 public:
  explicit ReadOnlyBroadcastState(const std::map<UK, UV, KeyLess<UK>>* map) : map_(map) {}
  std::optional<UV> get(const UK& k) const {
    auto it = map_->find(k);
    return it == map_->end() ? std::nullopt : std::optional<UV>(it->second);
  }
  bool contains(const UK& k) const { return map_->contains(k); }
  // In UK order.
  const std::map<UK, UV, KeyLess<UK>>& entries() const { return *map_; }
  bool is_empty() const { return map_->empty(); }

 protected:
  const std::map<UK, UV, KeyLess<UK>>* map_;
};

// Read and write access (the broadcast side's).
template <typename UK, typename UV>
class BroadcastState : public ReadOnlyBroadcastState<UK, UV> {
 public:
  explicit BroadcastState(std::map<UK, UV, KeyLess<UK>>* map)
      : ReadOnlyBroadcastState<UK, UV>(map), mutable_(map) {}
  void put(UK k, UV v) { mutable_->insert_or_assign(std::move(k), std::move(v)); }
  void remove(const UK& k) { mutable_->erase(k); }
  void clear() { mutable_->clear(); }

 private:
  std::map<UK, UV, KeyLess<UK>>* mutable_;
};

namespace internal {
// The contexts of a non-keyed broadcast process function: a ProcessContext
// (timestamp, watermark, processing time, side outputs) with the broadcast
// state, as StateView (read-only, or to write).
template <template <typename, typename> class StateView>
class BroadcastProcessContextOf : public ProcessContext {
 public:
  BroadcastProcessContextOf(OperatorContext* op,
                            const std::map<std::string, internal::OutputBase*>* side_outputs,
                            internal::BroadcastStateStore* broadcast)
      : ProcessContext(op, side_outputs), broadcast_(broadcast) {}
  template <typename UK, typename UV>
  StateView<UK, UV> get_broadcast_state(std::string_view name) {
    return StateView<UK, UV>(&broadcast_->template Table<UK, UV>(name).map);
  }
  template <typename UK, typename UV>
  StateView<UK, UV> get_broadcast_state(const MapStateDescriptor<UK, UV>& d) {
    return get_broadcast_state<UK, UV>(d.name);
  }

 private:
  internal::BroadcastStateStore* broadcast_;
};
}  // namespace internal

// The non-keyed side's context (Flink's BroadcastProcessFunction.
// ReadOnlyContext): reads the broadcast state.
using ReadOnlyBroadcastProcessContext = internal::BroadcastProcessContextOf<ReadOnlyBroadcastState>;
// Its broadcast side's context (BroadcastProcessFunction.Context): writes it.
using BroadcastProcessContext = internal::BroadcastProcessContextOf<BroadcastState>;

// Base class for non-keyed broadcast process functions (optional: any
// object with the same members works).
// The same for the broadcast process functions' base classes: the first
// input's values (Flink's onWatermarkFromNonBroadcastInput) with the keyed or
// read-only side's context, the broadcast input's with the broadcast side's.
template <typename Out, typename ReadOnlyContext, typename Context>
class BroadcastProcessWatermarks {
 public:
  virtual ~BroadcastProcessWatermarks() = default;
  virtual std::vector<WatermarkDeclaration> declare_watermarks() const { return {}; }
  virtual WatermarkHandlingResult on_watermark_from_non_broadcast_input(
      const GeneralizedWatermark& /*w*/, Collector<Out>& /*out*/, ReadOnlyContext& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
  virtual WatermarkHandlingResult on_watermark_from_broadcast_input(
      const GeneralizedWatermark& /*w*/, Collector<Out>& /*out*/, Context& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
};

template <typename In1, typename In2, typename Out>
class BroadcastProcessFunction
    : public BroadcastProcessWatermarks<Out, ReadOnlyBroadcastProcessContext,
                                        BroadcastProcessContext> {
 public:
  using OutputType = Out;
  using ReadOnlyContext = ReadOnlyBroadcastProcessContext;
  using Context = BroadcastProcessContext;
  virtual ~BroadcastProcessFunction() = default;
  virtual void open(const RuntimeContext& /*ctx*/) {}
  virtual void process_element(const In1& value, ReadOnlyContext& ctx, Collector<Out>& out) = 0;
  virtual void process_broadcast_element(const In2& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void close() {}
};

// The keyed side's context: a KeyedProcessContext (key, keyed state, timers,
// timestamp, side outputs) that also reads the broadcast state.
template <typename K>
class ReadOnlyBroadcastContext : public KeyedProcessContext<K> {
 public:
  ReadOnlyBroadcastContext(internal::KeyedTimerService<K, internal::VoidNamespace>* timers,
                           internal::KeyedStateStore<K>* state,
                           const std::map<std::string, internal::OutputBase*>* side_outputs,
                           internal::BroadcastStateStore* broadcast, const Clock* clock)
      : KeyedProcessContext<K>(timers, state, side_outputs, clock), broadcast_(broadcast) {}
  template <typename UK, typename UV>
  ReadOnlyBroadcastState<UK, UV> get_broadcast_state(std::string_view name) {
    return ReadOnlyBroadcastState<UK, UV>(&broadcast_->template Table<UK, UV>(name).map);
  }
  template <typename UK, typename UV>
  ReadOnlyBroadcastState<UK, UV> get_broadcast_state(const MapStateDescriptor<UK, UV>& d) {
    return get_broadcast_state<UK, UV>(d.name);
  }

 private:
  internal::BroadcastStateStore* broadcast_;
};

// The broadcast side's context: the record's timestamp, the watermark, side
// outputs, the broadcast state to write, and every key's value state.
template <typename K>
class BroadcastContext {
 public:
  BroadcastContext(internal::KeyedTimerService<K, internal::VoidNamespace>* timers,
                   internal::KeyedStateStore<K>* state,
                   const std::map<std::string, internal::OutputBase*>* side_outputs,
                   internal::BroadcastStateStore* broadcast)
      : timers_(timers), state_(state), side_outputs_(side_outputs), broadcast_(broadcast) {}
  Timestamp timestamp() const { return timestamp_; }
  Timestamp current_watermark() const { return timers_->current_watermark(); }
  Timestamp current_processing_time() const { return timers_->current_processing_time(); }
  template <typename V>
  void output(const OutputTag<V>& tag, std::type_identity_t<V> value) {
    auto it = side_outputs_->find(tag.id());
    if (it == side_outputs_->end()) return;
    internal::SideOutputAs<V>(it->second, tag.id())->Collect(std::move(value), timestamp_);
  }
  template <typename UK, typename UV>
  BroadcastState<UK, UV> get_broadcast_state(std::string_view name) {
    return BroadcastState<UK, UV>(&broadcast_->template Table<UK, UV>(name).map);
  }
  template <typename UK, typename UV>
  BroadcastState<UK, UV> get_broadcast_state(const MapStateDescriptor<UK, UV>& d) {
    return get_broadcast_state<UK, UV>(d.name);
  }
  // fn(const K& key, ValueState<K, V>& state) for every key of this subtask
  // that has value state `name` (Flink's applyToKeyedState); fn may update or
  // clear the state.  Keys come in no particular order.
  template <typename V, typename Fn>
  void apply_to_keyed_state(std::string_view name, Fn fn) {
    ForEachKey<V>(
        name, [](auto* table, const K* k) { return ValueState<K, V>(table, k); }, fn);
  }
  // The same for every other kind of keyed state (Flink's applyToKeyedState
  // takes any StateDescriptor): fn(key, ListState<K, V>&),
  // fn(key, MapState<K, UK, UV>&), fn(key, ReducingState<K, V, F>&),
  // fn(key, AggregatingState<K, Agg>&), each state named as the keyed side
  // created it with get_list_state / get_map_state / get_reducing_state /
  // get_aggregating_state.
  template <typename V, typename Fn>
  void apply_to_keyed_list_state(std::string_view name, Fn fn) {
    ForEachKey<std::vector<V>>(
        name, [](auto* table, const K* k) { return ListState<K, V>(table, k); }, fn);
  }
  template <typename UK, typename UV, typename Fn>
  void apply_to_keyed_map_state(std::string_view name, Fn fn) {
    ForEachKey<typename MapState<K, UK, UV>::Storage>(
        name, [](auto* table, const K* k) { return MapState<K, UK, UV>(table, k); }, fn);
  }
  template <typename V, typename F, typename Fn>
  void apply_to_keyed_reducing_state(std::string_view name, F f, Fn fn) {
    ForEachKey<V>(
        name, [&f](auto* table, const K* k) { return ReducingState<K, V, F>(table, k, f); }, fn);
  }
  template <typename Agg, typename Fn>
  void apply_to_keyed_aggregating_state(std::string_view name, Agg agg, Fn fn) {
    ForEachKey<internal::AccumulatorOf<Agg>>(
        name, [&agg](auto* table, const K* k) { return AggregatingState<K, Agg>(table, k, agg); },
        fn);
  }

  // A generalized watermark downstream, as ProcessContext::emit_watermark.
  void emit_watermark(const GeneralizedWatermark& w) { emitter_.Emit(w); }

  // --- for the operator ---
  void set_timestamp(Timestamp ts) { timestamp_ = ts; }
  void set_watermark_emitter(std::function<void(const GeneralizedWatermark&)> emit,
                             const std::vector<WatermarkDeclaration>* declared) {
    emitter_.Set(std::move(emit), declared);
  }

 private:
  // fn(key, handle) for every key with state `name` stored as `Stored`; the
  // keys are taken first, so fn may clear the state.
  template <typename Stored, typename Make, typename Fn>
  void ForEachKey(std::string_view name, Make make, Fn& fn) {
    auto& table = state_->template Table<Stored>(name);
    std::vector<K> keys;
    table.ForEachEntry([&keys](const K& k, const Stored&) { keys.push_back(k); });
    for (const K& k : keys) {
      auto s = make(&table, &k);
      fn(k, s);
    }
  }

  internal::KeyedTimerService<K, internal::VoidNamespace>* timers_;
  internal::KeyedStateStore<K>* state_;
  const std::map<std::string, internal::OutputBase*>* side_outputs_;
  internal::BroadcastStateStore* broadcast_;
  Timestamp timestamp_ = kNoTimestamp;
  internal::GeneralizedWatermarkEmitter emitter_;
};

template <typename K, typename In, typename BIn, typename Out>
class KeyedBroadcastProcessFunction
    : public BroadcastProcessWatermarks<Out, ReadOnlyBroadcastContext<K>, BroadcastContext<K>> {
 public:
  using KeyType = K;
  using OutputType = Out;
  using ReadOnlyContext = ReadOnlyBroadcastContext<K>;
  using Context = BroadcastContext<K>;
  virtual ~KeyedBroadcastProcessFunction() = default;
  virtual void process_element(const In& value, ReadOnlyContext& ctx, Collector<Out>& out) = 0;
  virtual void process_broadcast_element(const BIn& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void on_timer(Timestamp /*timestamp*/, ReadOnlyContext& /*ctx*/,
                        Collector<Out>& /*out*/) {}
};

namespace internal {

// Two lambdas as one co-function (connect(...).map(f1, f2)).
template <typename F1, typename F2>
struct CoMapPair {
  F1 f1;
  F2 f2;
  template <typename A>
  auto map1(const A& a) {
    return f1(a);
  }
  template <typename B>
  auto map2(const B& b) {
    return f2(b);
  }
};
template <typename F1, typename F2>
struct CoFlatMapPair {
  F1 f1;
  F2 f2;
  template <typename A, typename C>
  void flat_map1(const A& a, C& out) {
    f1(a, out);
  }
  template <typename B, typename C>
  void flat_map2(const B& b, C& out) {
    f2(b, out);
  }
};

// Calls ProcessElement1/2 of Derived without a virtual call per record.
template <typename Derived, typename A, typename B, typename Out>
class BatchedTwoInputOperator : public TwoInputOperator<A, B, Out> {
 public:
  void ProcessBatch1(std::span<Record<A>> records) override {
    Input1 in{static_cast<Derived&>(*this)};
    ProcessEachInline(in, records, this->ctx().cancel_flag());
  }
  void ProcessBatch2(std::span<Record<B>> records) override {
    Input2 in{static_cast<Derived&>(*this)};
    ProcessEachInline(in, records, this->ctx().cancel_flag());
  }

 private:
  // One input of Derived as ProcessEachInline's operator (its PrefetchFor1/2
  // as PrefetchFor where it has them).
  struct Input1 {
    Derived& d;
    void ProcessElement(A&& v, Timestamp ts) { d.Derived::ProcessElement1(std::move(v), ts); }
    void PrefetchFor(const A& v) requires requires(Derived& x, const A& a) { x.PrefetchFor1(a); }
    { d.PrefetchFor1(v); }
    bool WantsPrefetch() requires requires(Derived& x) { x.WantsPrefetch(); }
    { return d.WantsPrefetch(); }
  };
  struct Input2 {
    Derived& d;
    void ProcessElement(B&& v, Timestamp ts) { d.Derived::ProcessElement2(std::move(v), ts); }
    void PrefetchFor(const B& v) requires requires(Derived& x, const B& b) { x.PrefetchFor2(b); }
    { d.PrefetchFor2(v); }
    bool WantsPrefetch() requires requires(Derived& x) { x.WantsPrefetch(); }
    { return d.WantsPrefetch(); }
  };
};

template <typename A, typename B, typename Out, typename F>
class CoMapOperator final : public BatchedTwoInputOperator<CoMapOperator<A, B, Out, F>, A, B, Out> {
 public:
  explicit CoMapOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement1(A&& v, Timestamp ts) override {
    this->output().Collect(Out(f_.map1(static_cast<const A&>(v))), ts);
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    this->output().Collect(Out(f_.map2(static_cast<const B&>(v))), ts);
  }

 private:
  F f_;
};

template <typename A, typename B, typename Out, typename F>
class CoFlatMapOperator final
    : public BatchedTwoInputOperator<CoFlatMapOperator<A, B, Out, F>, A, B, Out> {
 public:
  explicit CoFlatMapOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement1(A&& v, Timestamp ts) override {
    collector_->set_timestamp(ts);
    f_.flat_map1(static_cast<const A&>(v), *collector_);
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    collector_->set_timestamp(ts);
    f_.flat_map2(static_cast<const B&>(v), *collector_);
  }

 private:
  F f_;
  std::optional<Collector<Out>> collector_;
};

template <typename A, typename B, typename Out, typename F>
class CoProcessOperator final
    : public BatchedTwoInputOperator<CoProcessOperator<A, B, Out, F>, A, B, Out> {
 public:
  explicit CoProcessOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    pctx_.emplace(&ctx, &this->side_outputs_);
    // ctx.emit_watermark(w) goes downstream, as from a ProcessFunction (it
    // was dropped without a word).
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    pctx_->set_watermark_emitter(
        [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); },
        declared_.empty() ? nullptr : &declared_);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement1(A&& v, Timestamp ts) override {
    pctx_->set_timestamp(ts);
    collector_->set_timestamp(ts);
    f_.process_element1(static_cast<const A&>(v), *pctx_, *collector_);
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    pctx_->set_timestamp(ts);
    collector_->set_timestamp(ts);
    f_.process_element2(static_cast<const B&>(v), *pctx_, *collector_);
  }
  void ProcessWatermark(Timestamp w) override {
    pctx_->set_watermark(w);
    this->ForwardWatermark(w);
  }
  // Generalized watermarks: each input's combined value to the function's
  // member for that input, with no record timestamp in the context (the
  // collector keeps the last record's, as ProcessOperator's); forwarded
  // when it peeked and the declaration forwards.  A function without the
  // member is as one that peeks.
  void ProcessGeneralizedWatermark1(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(kOnWatermarkFromFirstInput, f_, w, *collector_, *pctx_,
                                   [this] { pctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void ProcessGeneralizedWatermark2(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(kOnWatermarkFromSecondInput, f_, w, *collector_, *pctx_,
                                   [this] { pctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
  }

 private:
  F f_;
  std::vector<WatermarkDeclaration> declared_;
  std::optional<ProcessContext> pctx_;
  std::optional<Collector<Out>> collector_;
};

// The keyed two-input operators' common part: keyed state, timers on the
// combined watermark, checkpoints by key group.
template <typename Derived, typename A, typename B, typename K, typename Out>
class KeyedTwoInputOperator : public KeyedOperator<BatchedTwoInputOperator<Derived, A, B, Out>, K> {
 public:
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    timers_.Init(
        &ctx.timers(),
        [this](const K& key, const VoidNamespace&, Timestamp t) {
          static_cast<Derived*>(this)->OnTimer(key, t, TimeDomain::kEventTime);
        },
        [this](const K& key, const VoidNamespace&, Timestamp t) {
          static_cast<Derived*>(this)->OnTimer(key, t, TimeDomain::kProcessingTime);
        });
  }

 protected:
  using KeyedOperator<BatchedTwoInputOperator<Derived, A, B, Out>, K>::timers_;
  std::optional<Collector<Out>> collector_;
};

template <typename A, typename B, typename K, typename KeyFn1, typename KeyFn2, typename F,
          typename Out>
class KeyedCoProcessOperator final
    : public KeyedTwoInputOperator<KeyedCoProcessOperator<A, B, K, KeyFn1, KeyFn2, F, Out>, A, B, K,
                                   Out> {
  using Base =
      KeyedTwoInputOperator<KeyedCoProcessOperator<A, B, K, KeyFn1, KeyFn2, F, Out>, A, B, K, Out>;

 public:
  KeyedCoProcessOperator(KeyFn1 k1, KeyFn2 k2, F f)
      : key1_(std::move(k1)), key2_(std::move(k2)), f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    Base::Open(ctx);
    // The clock: state TTL runs on the operator's processing time.
    pctx_.emplace(&this->timers_, &this->state_, &this->side_outputs_, ctx.timers().clock());
    // ctx.emit_watermark(w) goes downstream (it was dropped without a word).
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    pctx_->set_watermark_emitter(
        [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); },
        declared_.empty() ? nullptr : &declared_);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  // A few records ahead (ProcessEachInline): starts loading the record's
  // state entries, for keys that cost little to select twice (no heap
  // memory in them).
  void PrefetchFor1(const A& v) requires std::is_trivially_destructible_v<K> {
    this->state_.Prefetch(key1_(v));
  }
  void PrefetchFor2(const B& v) requires std::is_trivially_destructible_v<K> {
    this->state_.Prefetch(key2_(v));
  }
  bool WantsPrefetch() const requires std::is_trivially_destructible_v<K> {
    return this->state_.WorthPrefetching();
  }
  void ProcessElement1(A&& v, Timestamp ts) override {
    const K key = key1_(static_cast<const A&>(v));
    pctx_->Set(&key, ts, TimeDomain::kEventTime);
    this->collector_->set_timestamp(ts);
    f_.process_element1(static_cast<const A&>(v), *pctx_, *this->collector_);
    this->state_.Trim();
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    const K key = key2_(static_cast<const B&>(v));
    pctx_->Set(&key, ts, TimeDomain::kEventTime);
    this->collector_->set_timestamp(ts);
    f_.process_element2(static_cast<const B&>(v), *pctx_, *this->collector_);
    this->state_.Trim();
  }
  void OnTimer(const K& key, Timestamp t, TimeDomain domain) {
    pctx_->Set(&key, t, domain);
    this->collector_->set_timestamp(domain == TimeDomain::kEventTime ? t : kNoTimestamp);
    CallOnTimer(f_, t, *pctx_, *this->collector_);
    this->state_.Trim();
  }
  // Generalized watermarks: as CoProcessOperator's, with no current key.
  void ProcessGeneralizedWatermark1(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(
            kOnWatermarkFromFirstInput, f_, w, *this->collector_, *pctx_,
            [this] { pctx_->Set(nullptr, kNoTimestamp, TimeDomain::kEventTime); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void ProcessGeneralizedWatermark2(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(
            kOnWatermarkFromSecondInput, f_, w, *this->collector_, *pctx_,
            [this] { pctx_->Set(nullptr, kNoTimestamp, TimeDomain::kEventTime); }))
      this->ForwardGeneralizedWatermark(w);
  }

 private:
  KeyFn1 key1_;
  KeyFn2 key2_;
  F f_;
  std::vector<WatermarkDeclaration> declared_;
  std::optional<KeyedProcessContext<K>> pctx_;
};

template <typename A, typename B, typename K, typename KeyFn, typename F, typename Out>
class KeyedBroadcastProcessOperator final
    : public KeyedTwoInputOperator<KeyedBroadcastProcessOperator<A, B, K, KeyFn, F, Out>, A, B, K,
                                   Out> {
  using Base =
      KeyedTwoInputOperator<KeyedBroadcastProcessOperator<A, B, K, KeyFn, F, Out>, A, B, K, Out>;

 public:
  // `broadcast_states`: the names of the descriptors the stream was
  // broadcast with (empty: any name, for an operator made by hand).
  KeyedBroadcastProcessOperator(KeyFn key, F f, std::vector<std::string> broadcast_states = {})
      : key_(std::move(key)), f_(std::move(f)) {
    broadcast_.Register(std::move(broadcast_states));
  }
  void Open(OperatorContext& ctx) override {
    Base::Open(ctx);
    rctx_.emplace(&this->timers_, &this->state_, &this->side_outputs_, &broadcast_,
                  ctx.timers().clock());
    bctx_.emplace(&this->timers_, &this->state_, &this->side_outputs_, &broadcast_);
    // ctx.emit_watermark(w) goes downstream from either side (the keyed
    // side's was dropped without a word).
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    auto emit = [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); };
    const std::vector<WatermarkDeclaration>* declared = declared_.empty() ? nullptr : &declared_;
    rctx_->set_watermark_emitter(emit, declared);
    bctx_->set_watermark_emitter(emit, declared);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement1(A&& v, Timestamp ts) override {
    const K key = key_(static_cast<const A&>(v));
    rctx_->Set(&key, ts, TimeDomain::kEventTime);
    this->collector_->set_timestamp(ts);
    f_.process_element(static_cast<const A&>(v), *rctx_, *this->collector_);
    this->state_.Trim();
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    bctx_->set_timestamp(ts);
    this->collector_->set_timestamp(ts);
    f_.process_broadcast_element(static_cast<const B&>(v), *bctx_, *this->collector_);
    this->state_.Trim();
  }
  void OnTimer(const K& key, Timestamp t, TimeDomain domain) {
    rctx_->Set(&key, t, domain);
    this->collector_->set_timestamp(domain == TimeDomain::kEventTime ? t : kNoTimestamp);
    CallOnTimer(f_, t, *rctx_, *this->collector_);
    this->state_.Trim();
  }
  // Generalized watermarks: as BroadcastProcessOperator's, with no current
  // key on the keyed side.
  void ProcessGeneralizedWatermark1(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(
            kOnWatermarkFromNonBroadcastInput, f_, w, *this->collector_, *rctx_,
            [this] { rctx_->Set(nullptr, kNoTimestamp, TimeDomain::kEventTime); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void ProcessGeneralizedWatermark2(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(kOnWatermarkFromBroadcastInput, f_, w, *this->collector_, *bctx_,
                                   [this] { bctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
    this->state_.Trim();  // it may change every key's state (apply_to_keyed_state)
  }
  void SnapshotState(StateWriter& w) override {
    Base::SnapshotState(w);
    broadcast_.Snapshot(w, "operator '" + this->ctx().operator_name() + "'");
  }
  void RestoreState(StateReader& r) override {
    Base::RestoreState(r);
    broadcast_.Restore(r);
  }

 private:
  KeyFn key_;
  F f_;
  BroadcastStateStore broadcast_;
  std::vector<WatermarkDeclaration> declared_;
  std::optional<ReadOnlyBroadcastContext<K>> rctx_;
  std::optional<BroadcastContext<K>> bctx_;
};

// A non-keyed stream connected to a broadcast stream (DataStream::connect(
// BroadcastStream)).  Its state is the broadcast state alone: rescaled, new
// subtask s restores old subtask s % old parallelism's copy (Flink's
// broadcast state repartitioning); all copies are the same.
template <typename A, typename B, typename Out, typename F>
class BroadcastProcessOperator final
    : public BatchedTwoInputOperator<BroadcastProcessOperator<A, B, Out, F>, A, B, Out> {
 public:
  // `broadcast_states`: as KeyedBroadcastProcessOperator's.
  explicit BroadcastProcessOperator(F f, std::vector<std::string> broadcast_states = {})
      : f_(std::move(f)) {
    broadcast_.Register(std::move(broadcast_states));
  }
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    rctx_.emplace(&ctx, &this->side_outputs_, &broadcast_);
    bctx_.emplace(&ctx, &this->side_outputs_, &broadcast_);
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    auto emit = [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); };
    const std::vector<WatermarkDeclaration>* declared = declared_.empty() ? nullptr : &declared_;
    rctx_->set_watermark_emitter(emit, declared);
    bctx_->set_watermark_emitter(emit, declared);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement1(A&& v, Timestamp ts) override {
    rctx_->set_timestamp(ts);
    collector_->set_timestamp(ts);
    f_.process_element(static_cast<const A&>(v), *rctx_, *collector_);
  }
  void ProcessElement2(B&& v, Timestamp ts) override {
    bctx_->set_timestamp(ts);
    collector_->set_timestamp(ts);
    f_.process_broadcast_element(static_cast<const B&>(v), *bctx_, *collector_);
  }
  void ProcessWatermark(Timestamp w) override {
    rctx_->set_watermark(w);
    bctx_->set_watermark(w);
    this->ForwardWatermark(w);
  }
  // Generalized watermarks: as CoProcessOperator's, the first input's to
  // on_watermark_from_non_broadcast_input, the broadcast one's to
  // on_watermark_from_broadcast_input.
  void ProcessGeneralizedWatermark1(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(kOnWatermarkFromNonBroadcastInput, f_, w, *collector_, *rctx_,
                                   [this] { rctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void ProcessGeneralizedWatermark2(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermarkWith(kOnWatermarkFromBroadcastInput, f_, w, *collector_, *bctx_,
                                   [this] { bctx_->set_timestamp(kNoTimestamp); }))
      this->ForwardGeneralizedWatermark(w);
  }
  void SnapshotState(StateWriter& w) override {
    broadcast_.Snapshot(w, "operator '" + this->ctx().operator_name() + "'");
  }
  void RestoreState(StateReader& r) override { broadcast_.Restore(r); }
  StateRescaling state_rescaling() const override { return StateRescaling::kBroadcast; }

 private:
  F f_;
  BroadcastStateStore broadcast_;
  std::vector<WatermarkDeclaration> declared_;
  std::optional<ReadOnlyBroadcastProcessContext> rctx_;
  std::optional<BroadcastProcessContext> bctx_;
  std::optional<Collector<Out>> collector_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_CO_PROCESS_H_
