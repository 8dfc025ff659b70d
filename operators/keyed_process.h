// operators/keyed_process.h
//
// KeyedStream::process(f): Flink's KeyedProcessFunction / KeyedProcessOperator,
// plus the keyed state user functions keep.
//
//   struct Alarm : KeyedProcessFunction<std::string, Event, std::string> {
//     void process_element(const Event& e, Context& ctx, Collector<std::string>& out) override {
//       auto last = ctx.get_state<Timestamp>("last");      // ValueState, per key
//       last.update(ctx.timestamp());
//       ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1000);
//     }
//     void on_timer(Timestamp ts, OnTimerContext& ctx, Collector<std::string>& out) override {
//       out.collect(ctx.get_current_key() + " idle at " + std::to_string(ts));
//     }
//   };
//   DataStream<std::string> alarms = events.key_by(key).process(Alarm());
//
// The function may also be any copyable object with
//   process_element(const In&, KeyedProcessContext<K>&, Collector<Out>&)
// and optionally on_timer(Timestamp, KeyedProcessContext<K>&, Collector<Out>&),
// open(const RuntimeContext&) and close() (operators/basic.h);
// Out comes from a nested OutputType or from process_element's third
// parameter.  Every subtask gets its own copy of the function.
//
// Timers: per (key, timestamp), a set per time domain (registering twice
// keeps one), deletable; event-time timers fire when the watermark reaches
// them, in timestamp order, before the watermark is forwarded; processing-time
// timers once the subtask's clock has passed them (clock >= T + 1, see
// ProcessingTimeService).  on_timer's output is timestamped with
// the timer's time (event time) or carries no timestamp (processing time);
// process_element's output carries the record's timestamp.
//
// State (KeyedProcessContext::get_state / get_list_state / get_reducing_state
// / get_aggregating_state / get_map_state) is per key, by name, kept in the
// operator's KeyedStateStore (operators/keyed/keyed_state_store.h, which
// describes the handles); a handle is valid while the function call it was
// obtained in runs.  Each get_*_state also takes a trailing StateTtlConfig
// for state with a time to live, on the operator's processing-time clock
// (env.set_clock), as Flink's StateTtlConfig.
//
// Checkpoints: the state and the timers (event and processing time) are
// snapshotted and restored; the function object itself is not (keep what must
// survive a failure in keyed state).  State whose type has no
// tidemark::StateCodec fails the job at the first checkpoint, naming it.
//
// Thread safety: one task thread per operator instance; nothing shared.
#ifndef TM_OPERATORS_KEYED_PROCESS_H_
#define TM_OPERATORS_KEYED_PROCESS_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

enum class TimeDomain { kEventTime, kProcessingTime };

// --- the context ---------------------------------------------------------

template <typename K>
class KeyedProcessContext;

// Timers of the current key (Flink's TimerService).
template <typename K>
class TimerService {
 public:
  TimerService(internal::KeyedTimerService<K, internal::VoidNamespace>* timers, const K* const* key)
      : timers_(timers), key_(key) {}
  Timestamp current_processing_time() const { return timers_->current_processing_time(); }
  Timestamp current_watermark() const { return timers_->current_watermark(); }
  void register_event_time_timer(Timestamp t) { timers_->RegisterEventTimeTimer(Key(), {}, t); }
  void register_processing_time_timer(Timestamp t) {
    timers_->RegisterProcessingTimeTimer(Key(), {}, t);
  }
  void delete_event_time_timer(Timestamp t) { timers_->DeleteEventTimeTimer(Key(), {}, t); }
  void delete_processing_time_timer(Timestamp t) {
    timers_->DeleteProcessingTimeTimer(Key(), {}, t);
  }

 private:
  // Timers are per key: none in on_watermark.
  const K& Key() const {
    if (*key_ == nullptr) [[unlikely]] {
      throw std::logic_error(
          "keyed process function: no current key in on_watermark (or the on_watermark_from_* "
          "members of a two-input function: a generalized watermark is not per key): timers are "
          "for process_element and on_timer");
    }
    return **key_;
  }
  internal::KeyedTimerService<K, internal::VoidNamespace>* timers_;
  const K* const* key_;
};

template <typename K>
class KeyedProcessContext {
 public:
  KeyedProcessContext(internal::KeyedTimerService<K, internal::VoidNamespace>* timers,
                      internal::KeyedStateStore<K>* state,
                      const std::map<std::string, internal::OutputBase*>* side_outputs,
                      const Clock* clock = nullptr)
      : timers_(timers),
        state_(state),
        side_outputs_(side_outputs),
        clock_(clock),
        timer_service_(timers, &key_) {}

  // The record's or timer's key; there is none in on_watermark (a
  // generalized watermark is not per key): asking there throws.
  const K& get_current_key() const { return *Key(); }
  // The record's timestamp in process_element (kNoTimestamp if it has
  // none); the timer's time in on_timer.
  Timestamp timestamp() const { return timestamp_; }
  // In on_timer: which kind of timer fired.
  TimeDomain time_domain() const { return domain_; }
  Timestamp current_watermark() const { return timers_->current_watermark(); }
  Timestamp current_processing_time() const { return timers_->current_processing_time(); }
  TimerService<K>& timer_service() { return timer_service_; }
  // Emits to side output `tag` with the current timestamp; dropped when
  // nobody consumes it.
  template <typename V>
  void output(const OutputTag<V>& tag, std::type_identity_t<V> value) {
    auto it = side_outputs_->find(tag.id());
    if (it == side_outputs_->end()) return;
    internal::SideOutputAs<V>(it->second, tag.id())->Collect(std::move(value), timestamp_);
  }

  // A generalized watermark downstream (to the main output and every side
  // output), after what was collected so far; as ProcessContext's
  // (operators/process.h): an undeclared kind is an error when the function
  // declares any.
  void emit_watermark(const GeneralizedWatermark& w) { emitter_.Emit(w); }

  template <typename V>
  ValueState<K, V> get_state(std::string_view name) {
    return ValueState<K, V>(&state_->template HandleTable<V>(name), Key());
  }
  template <typename V>
  ListState<K, V> get_list_state(std::string_view name) {
    return ListState<K, V>(&state_->template HandleTable<std::vector<V>>(name), Key());
  }
  template <typename V, typename F>
  ReducingState<K, V, F> get_reducing_state(std::string_view name, F f) {
    return ReducingState<K, V, F>(&state_->template HandleTable<V>(name), Key(), std::move(f));
  }
  template <typename Agg>
  AggregatingState<K, Agg> get_aggregating_state(std::string_view name, Agg agg) {
    return AggregatingState<K, Agg>(
        &state_->template HandleTable<internal::AccumulatorOf<Agg>>(name), Key(), std::move(agg));
  }
  template <typename UK, typename UV>
  MapState<K, UK, UV> get_map_state(std::string_view name) {
    return MapState<K, UK, UV>(
        &state_->template HandleTable<typename MapState<K, UK, UV>::Storage>(name), Key());
  }

  // The same with a time to live (Flink's StateTtlConfig, in processing
  // time on the operator's clock; operators/keyed/keyed_state_store.h).
  // A name is used with a TTL or without one, not both.
  template <typename V>
  TtlValueState<K, V> get_state(std::string_view name, const StateTtlConfig& ttl) {
    return TtlValueState<K, V>(&state_->template HandleTable<internal::TtlValue<V>>(name), Key(),
                               ttl, clock_);
  }
  template <typename V>
  TtlListState<K, V> get_list_state(std::string_view name, const StateTtlConfig& ttl) {
    return TtlListState<K, V>(
        &state_->template HandleTable<std::vector<internal::TtlValue<V>>>(name), Key(), ttl,
        clock_);
  }
  template <typename V, typename F>
  TtlReducingState<K, V, F> get_reducing_state(std::string_view name, F f,
                                               const StateTtlConfig& ttl) {
    return TtlReducingState<K, V, F>(&state_->template HandleTable<internal::TtlValue<V>>(name),
                                     Key(), std::move(f), ttl, clock_);
  }
  template <typename Agg>
  TtlAggregatingState<K, Agg> get_aggregating_state(std::string_view name, Agg agg,
                                                    const StateTtlConfig& ttl) {
    return TtlAggregatingState<K, Agg>(
        &state_->template HandleTable<internal::TtlValue<internal::AccumulatorOf<Agg>>>(name),
        Key(), std::move(agg), ttl, clock_);
  }
  template <typename UK, typename UV>
  TtlMapState<K, UK, UV> get_map_state(std::string_view name, const StateTtlConfig& ttl) {
    return TtlMapState<K, UK, UV>(
        &state_->template HandleTable<std::map<UK, internal::TtlValue<UV>, KeyLess<UK>>>(name),
        Key(), ttl, clock_);
  }

  // --- for the operator ---
  void Set(const K* key, Timestamp ts, TimeDomain domain) {
    key_ = key;
    timestamp_ = ts;
    domain_ = domain;
  }
  void set_watermark_emitter(std::function<void(const GeneralizedWatermark&)> emit,
                             const std::vector<WatermarkDeclaration>* declared) {
    emitter_.Set(std::move(emit), declared);
  }

 private:
  const K* Key() const {
    if (key_ == nullptr) [[unlikely]] {
      throw std::logic_error(
          "keyed process function: no current key in on_watermark (or the on_watermark_from_* "
          "members of a two-input function: a generalized watermark is not per key): keyed "
          "state and get_current_key() are for process_element and on_timer");
    }
    return key_;
  }
  internal::GeneralizedWatermarkEmitter emitter_;
  internal::KeyedTimerService<K, internal::VoidNamespace>* timers_;
  internal::KeyedStateStore<K>* state_;
  const std::map<std::string, internal::OutputBase*>* side_outputs_;
  const Clock* clock_;  // for state TTL; null: the system clock
  const K* key_ = nullptr;
  Timestamp timestamp_ = kNoTimestamp;
  TimeDomain domain_ = TimeDomain::kEventTime;
  TimerService<K> timer_service_;
};

// Base class for process functions (optional: any object with the same
// members works).
template <typename K, typename In, typename Out>
class KeyedProcessFunction {
 public:
  using KeyType = K;
  using InputType = In;
  using OutputType = Out;
  using Context = KeyedProcessContext<K>;
  using OnTimerContext = KeyedProcessContext<K>;
  virtual ~KeyedProcessFunction() = default;
  virtual void process_element(const In& value, Context& ctx, Collector<Out>& out) = 0;
  virtual void on_timer(Timestamp /*timestamp*/, OnTimerContext& /*ctx*/, Collector<Out>& /*out*/) {
  }
  // Generalized watermarks, as ProcessFunction's (operators/process.h): the
  // kinds this function emits, and what it does with the ones it receives
  // (in on_watermark there is no current key).
  virtual std::vector<WatermarkDeclaration> declare_watermarks() const { return {}; }
  virtual WatermarkHandlingResult on_watermark(const GeneralizedWatermark& /*w*/,
                                               Collector<Out>& /*out*/, Context& /*ctx*/) {
    return WatermarkHandlingResult::kPeek;
  }
};

namespace internal {
// Calls f.on_timer(t, ctx, out) where f has it (a function without timers
// needs none).  The keyed operators' one way to call it: an on_timer that
// cannot be called so (a parameter of another type, a Collector of another
// Out) or Flink's onTimer would never be called, and is refused when the
// operator is compiled.
template <typename F, typename Ctx, typename Coll>
void CallOnTimer(F& f, Timestamp t, Ctx& ctx, Coll& out) {
  constexpr bool kCallable = requires { f.on_timer(t, ctx, out); };
  if constexpr (requires { &F::on_timer; }) {
    static_assert(kCallable,
                  "tidemark: a keyed process function's on_timer must be on_timer(Timestamp, its "
                  "timer context (OnTimerContext&, a broadcast function's ReadOnlyContext&), "
                  "Collector<Out>&) with the function's Out: as declared it would never be "
                  "called");
  }
  static_assert(
      !requires { &F::onTimer; },
      "tidemark: the timer callback is on_timer(Timestamp, OnTimerContext&, Collector<Out>&), "
      "not Flink's onTimer: as named it would never be called");
  if constexpr (kCallable) f.on_timer(t, ctx, out);
}

template <typename T, typename K, typename KeyFn, typename F, typename Out>
class KeyedProcessOperator final
    : public KeyedOperator<BatchedOperator<KeyedProcessOperator<T, K, KeyFn, F, Out>, T, Out>, K> {
 public:
  KeyedProcessOperator(KeyFn key, F f) : key_fn_(std::move(key)), f_(std::move(f)) {}

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    state_.UseBackend(ctx);
    pctx_.emplace(&timers_, &state_, &this->side_outputs_, ctx.timers().clock());
    if constexpr (requires { f_.declare_watermarks(); }) {
      declared_ = f_.declare_watermarks();
    }
    pctx_->set_watermark_emitter(
        [this](const GeneralizedWatermark& w) { this->ForwardGeneralizedWatermark(w); },
        declared_.empty() ? nullptr : &declared_);
    timers_.Init(
        &ctx.timers(),
        [this](const K& key, const VoidNamespace&, Timestamp t) {
          OnTimer(key, t, TimeDomain::kEventTime);
        },
        [this](const K& key, const VoidNamespace&, Timestamp t) {
          OnTimer(key, t, TimeDomain::kProcessingTime);
        });
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  // A few records ahead (ProcessEachInline): starts loading the record's
  // state entries, for keys that cost little to select twice (no heap
  // memory in them).
  void PrefetchFor(const T& value) requires std::is_trivially_destructible_v<K> {
    state_.Prefetch(key_fn_(value));
  }
  bool WantsPrefetch() const requires std::is_trivially_destructible_v<K> {
    return state_.WorthPrefetching();
  }
  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_fn_(static_cast<const T&>(value));
    pctx_->Set(&key, ts, TimeDomain::kEventTime);
    collector_->set_timestamp(ts);
    if constexpr (requires {
                    f_.process_element(static_cast<const T&>(value), *pctx_, *collector_);
                  }) {
      f_.process_element(static_cast<const T&>(value), *pctx_, *collector_);
    } else {
      // A function taking T&& (top_n's) gets the record moved in.
      f_.process_element(std::move(value), *pctx_, *collector_);
    }
    state_.Trim();
  }
  // Generalized watermarks: as ProcessOperator's (Flink's keyed process
  // operator handles them as the non-keyed one), with no current key.
  void ProcessGeneralizedWatermark(const GeneralizedWatermark& w) override {
    if (OnGeneralizedWatermark(f_, w, *collector_, *pctx_, [this] {
          pctx_->Set(nullptr, kNoTimestamp, TimeDomain::kEventTime);
        }))
      this->ForwardGeneralizedWatermark(w);
  }
  // Watermarks, checkpoints (the keyed state store and the timers, the
  // instance's key groups kept on restore): KeyedOperator's.

  const F& function() const { return f_; }

 private:
  void OnTimer(const K& key, Timestamp t, TimeDomain domain) {
    pctx_->Set(&key, t, domain);
    collector_->set_timestamp(domain == TimeDomain::kEventTime ? t : kNoTimestamp);
    CallOnTimer(f_, t, *pctx_, *collector_);
    state_.Trim();
  }

  using KeyedOperator<BatchedOperator<KeyedProcessOperator, T, Out>, K>::timers_;
  using KeyedOperator<BatchedOperator<KeyedProcessOperator, T, Out>, K>::state_;
  KeyFn key_fn_;
  F f_;
  std::optional<KeyedProcessContext<K>> pctx_;
  std::optional<Collector<Out>> collector_;
  std::vector<WatermarkDeclaration> declared_;
};

// The check behind DataStream::reinterpret_as_keyed_stream (Flink's
// DataStreamUtils.reinterpretAsKeyedStream): passes the records on
// unchanged, in batches, after checking that each one's key belongs to this
// subtask's key groups, as key_by would have sent it.  A record outside
// them fails the job: its keyed state would be split between subtasks and
// dropped by a restore (Flink's heap backend throws likewise).
template <typename T, typename KeyFn>
class KeyGroupCheckOperator final : public OneInputOperator<T, T> {
 public:
  explicit KeyGroupCheckOperator(KeyFn key) : key_(std::move(key)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    range_ = KeyGroupRange::Of(ctx);
  }
  void ProcessElement(T&& v, Timestamp ts) override {
    Check(v);
    this->output().Collect(std::move(v), ts);
  }
  void ProcessBatch(std::span<Record<T>> records) override {
    for (const Record<T>& r : records) Check(r.value);
    this->output().CollectBatch(records);
  }

 private:
  // The key group as key_by's partitioner computes it (KeyHash, user
  // specialisations included).
  void Check(const T& v) {
    using K = std::decay_t<std::invoke_result_t<const KeyFn&, const T&>>;
    if (range_.all()) return;
    const int group = ComputeKeyGroup(KeyHash<K>{}(key_(v)), range_.max_parallelism);
    if (group >= range_.first && group <= range_.last) return;
    throw std::runtime_error(
        "reinterpret_as_keyed_stream: a record of key group " + std::to_string(group) +
        " reached subtask " + std::to_string(this->ctx().subtask_index()) +
        ", which owns key groups " + std::to_string(range_.first) + "-" +
        std::to_string(range_.last) + " of the keyed operator after it (max parallelism " +
        std::to_string(range_.max_parallelism) +
        "): the stream is not partitioned as key_by with this key would partition it for that "
        "operator (its parallelism and max parallelism; use key_by)");
  }

  KeyFn key_;
  KeyGroupRange range_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_KEYED_PROCESS_H_
