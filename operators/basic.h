// operators/basic.h
//
// The record-at-a-time operators behind DataStream::map / filter / flat_map /
// process and the rolling KeyedStream::reduce, plus the operator behind
// assign_timestamps_and_watermarks.  User functions are stored by their own
// type, so a lambda is inlined into the operator's ProcessElement.
//
// A user function may report an error by throwing, or, for map, by returning
// an absl::StatusOr<U> that is not ok: either fails the job with the
// operator's name and subtask index.
#ifndef TM_OPERATORS_BASIC_H_
#define TM_OPERATORS_BASIC_H_

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/watermark_alignment.h"
#include "tidemark/runtime/task/watermark_strategy.h"

namespace tidemark {

// A user counter (RuntimeContext::counter): per subtask, its total over the
// subtasks in JobResult::CounterTotal(name).
class UserCounter {
 public:
  explicit UserCounter(internal::Counter* c) : c_(c) {}
  void inc(int64_t n = 1) { c_->Inc(n); }
  int64_t value() const { return c_->Get(); }

 private:
  internal::Counter* c_;
};

// A settable user gauge (RuntimeContext::gauge(name)): the last value set.
class UserGauge {
 public:
  explicit UserGauge(internal::Gauge* g) : g_(g) {}
  void set(double v) { g_->Set(v); }
  double value() const { return g_->Get(); }

 private:
  internal::Gauge* g_;
};

// A user histogram (RuntimeContext::histogram(name, window)): count of every
// update, and min / max / mean / stddev / p50 / p95 / p99 over the last
// `window` values (HistogramStatistics, runtime/core/metrics.h).
class UserHistogram {
 public:
  explicit UserHistogram(internal::Histogram* h) : h_(h) {}
  void update(int64_t v) { h_->Update(v); }
  int64_t count() const { return h_->Count(); }
  HistogramStatistics statistics() const { return h_->Statistics(); }

 private:
  internal::Histogram* h_;
};

// What a rich user function sees (Flink's RuntimeContext).  A function object
// given to map, filter, flat_map, process or add_sink that has
// open(const RuntimeContext&) is opened once per subtask before its first
// record, and one that was opened and has close() is closed after its last
// (also when the job fails or is cancelled); every subtask has its own copy
// of the object.
class RuntimeContext {
 public:
  explicit RuntimeContext(OperatorContext* ctx) : ctx_(ctx) {}
  const std::string& operator_name() const { return ctx_->operator_name(); }
  int subtask_index() const { return ctx_->subtask_index(); }
  int parallelism() const { return ctx_->parallelism(); }
  int max_parallelism() const { return ctx_->max_parallelism(); }
  // The subtask's counter `name`, made on first use; in the job's metrics.
  UserCounter counter(const std::string& name) const { return UserCounter(ctx_->counter(name)); }
  // The operator's gauge `name` at this subtask (Flink's Gauge), made on
  // first use: a settable one, or one whose value is `f()` (any arithmetic
  // result).  `f` is called only on the subtask's own thread (right away,
  // after each slice of the subtask's work and before close()), so it may
  // read the function object's state without locks; readers of the metrics
  // see its last value.  Both reach JobResult::metrics[i].gauges.
  UserGauge gauge(const std::string& name) const {
    return UserGauge(ctx_->metrics().GetGauge(ctx_->operator_name(), name));
  }
  template <typename F>
  requires std::is_arithmetic_v<std::decay_t<std::invoke_result_t<F&>>>
  void gauge(const std::string& name, F f) const {
    ctx_->metrics().AddGaugeFunction(ctx_->operator_name(), name, [f = std::move(f)]() mutable {
      return static_cast<double>(f());
    });
  }
  // The operator's histogram `name` at this subtask (Flink's Histogram, as
  // DescriptiveStatisticsHistogram: a sliding window of the last `window`
  // values), made on first use; in JobResult::metrics[i].histograms.
  UserHistogram histogram(const std::string& name, size_t window = 1024) const {
    return UserHistogram(ctx_->metrics().GetHistogram(ctx_->operator_name(), name, window));
  }

 private:
  OperatorContext* ctx_;
};

namespace internal {
// Opens and closes a user function object that has open / close.
// An open the runtime cannot call that looks meant for it (open taking a
// non-const RuntimeContext&, or open() with nothing) is refused when the job
// is compiled: it was skipped without a word, and the function ran unopened.
// Any other member named open or close (a helper, a data member) is the
// user's own.
template <typename F>
void OpenFunction(F& f, OperatorContext& ctx) {
  if constexpr (requires { f.open(std::declval<const RuntimeContext&>()); }) {
    f.open(RuntimeContext(&ctx));
  } else {
    static_assert(
        !requires { f.open(std::declval<RuntimeContext&>()); } && !requires { f.open(); },
        "tidemark: a function's open must be open(const RuntimeContext&) (it is called "
        "once per subtask before the first record); this one would never be called");
  }
}
template <typename F>
void CloseFunction(F& f) {
  if constexpr (requires { f.close(); }) f.close();
}
template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<absl::StatusOr<T>> : std::true_type {
  using value_type = T;
};

// The type map(f) produces for an input T: f's result, or U for
// absl::StatusOr<U>.
// (IsStatusOr<...>::type would be std::true_type's own `type`, so unwrap
// with a separate trait.)
template <typename R>
struct UnwrapStatusOr {
  using type = R;
};
template <typename U>
struct UnwrapStatusOr<absl::StatusOr<U>> {
  using type = U;
};

// Whether a user function takes its record by rvalue reference
// (f(T&& v, ...)): it cannot take a const T&, but can take a T&&.  The
// operator then moves the record into it (an operator owns the records it is
// given), so a function that keeps or forwards a part of the record (a
// string) moves it instead of copying it.  Any other function gets a const T&.
template <typename F, typename T, typename... Rest>
inline constexpr bool kTakesRecordByRvalue =
    !std::is_invocable_v<F&, const T&, Rest...> && std::is_invocable_v<F&, T&&, Rest...>;
// The record as the function takes it.
template <typename F, typename T, typename... Rest>
decltype(auto) RecordArg(T& v) {
  if constexpr (kTakesRecordByRvalue<F, T, Rest...>) {
    return std::move(v);
  } else {
    return static_cast<const T&>(v);
  }
}

template <typename F, typename T>
struct MapResult {
  using raw = std::decay_t<
      std::invoke_result_t<F&, std::conditional_t<kTakesRecordByRvalue<F, T>, T&&, const T&>>>;
  using type = typename UnwrapStatusOr<raw>::type;
};

template <typename In, typename Out, typename F>
class MapOperator final : public BatchedOperator<MapOperator<In, Out, F>, In, Out> {
 public:
  explicit MapOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement(In&& v, Timestamp ts) override {
    using Raw = typename MapResult<F, In>::raw;
    if constexpr (IsStatusOr<Raw>::value) {
      Raw r = f_(RecordArg<F, In>(v));
      if (!r.ok()) throw std::runtime_error(std::string(r.status().ToString()));
      this->output().Collect(std::move(*r), ts);
    } else {
      this->output().Collect(f_(RecordArg<F, In>(v)), ts);
    }
  }

 private:
  F f_;
};

template <typename T, typename F>
class FilterOperator final : public BatchedOperator<FilterOperator<T, F>, T, T> {
 public:
  explicit FilterOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement(T&& v, Timestamp ts) override {
    if (f_(static_cast<const T&>(v))) this->output().Collect(std::move(v), ts);
  }

 private:
  F f_;
};

}  // namespace internal
// What flat_map and process functions emit through.
template <typename Out>
class Collector {
 public:
  explicit Collector(Output<Out>* out) : out_(out) {}
  void collect(Out value) { out_->Collect(std::move(value), ts_); }
  void collect_with_timestamp(Out value, Timestamp ts) { out_->Collect(std::move(value), ts); }
  void set_timestamp(Timestamp ts) { ts_ = ts; }

 private:
  Output<Out>* out_;
  Timestamp ts_ = kNoTimestamp;
};

namespace internal {
// A process function context's emit_watermark (ProcessContext,
// KeyedProcessContext): checks the kind against the function's declarations
// (none declared: any kind) and sends the watermark on.
class GeneralizedWatermarkEmitter {
 public:
  void Set(std::function<void(const GeneralizedWatermark&)> emit,
           const std::vector<WatermarkDeclaration>* declared) {
    emit_ = std::move(emit);
    declared_ = declared;
  }
  void Emit(const GeneralizedWatermark& w) const {
    if (declared_ != nullptr &&
        std::none_of(declared_->begin(), declared_->end(),
                     [&](const WatermarkDeclaration& d) { return d.matches(w); })) {
      throw std::invalid_argument("watermark '" + w.identifier() +
                                  "' is emitted but not declared: add its declaration to the "
                                  "function's declare_watermarks()");
    }
    if (emit_) emit_(w);
  }

 private:
  std::function<void(const GeneralizedWatermark&)> emit_;
  const std::vector<WatermarkDeclaration>* declared_ = nullptr;
};

// Whether a generalized watermark that a process function handled with `r`
// goes on: only when it peeked and the declaration forwards.
inline bool ForwardsGeneralized(const GeneralizedWatermark& w, WatermarkHandlingResult r) {
  return r == WatermarkHandlingResult::kPeek &&
         w.spec().strategy == WatermarkHandlingStrategy::kForward;
}
// A process operator's handling of a generalized watermark w (ProcessOperator,
// KeyedProcessOperator): the function's on_watermark where it has one
// (`prepare` first, e.g. clearing the context's record timestamp), then
// whether w goes on: only when the function peeked and the declaration
// forwards (Flink's ProcessOperator).  Records collected there carry the
// collector's timestamp as it is, the last record's or timer's (none before
// the first), as Flink's output collector does.
//
// The two-input process operators handle each input's values alike, with
// the function's member for that input: `member` is one of the callables
// below, which call it (and are not invocable for a function without it).
template <typename Member, typename F, typename Coll, typename Ctx, typename Prepare>
bool OnGeneralizedWatermarkWith(Member member, F& f, const GeneralizedWatermark& w, Coll& out,
                                Ctx& ctx, Prepare prepare) {
  WatermarkHandlingResult r = WatermarkHandlingResult::kPeek;
  if constexpr (std::is_invocable_v<Member&, F&, const GeneralizedWatermark&, Coll&, Ctx&>) {
    prepare();
    r = member(f, w, out, ctx);
  }
  return ForwardsGeneralized(w, r);
}
#define TM_GENERALIZED_WATERMARK_MEMBER(name)           \
  [](auto& f, const GeneralizedWatermark& w, auto& out, \
     auto& ctx) -> decltype(f.name(w, out, ctx)) { return f.name(w, out, ctx); }
inline constexpr auto kOnWatermark = TM_GENERALIZED_WATERMARK_MEMBER(on_watermark);
inline constexpr auto kOnWatermarkFromFirstInput =
    TM_GENERALIZED_WATERMARK_MEMBER(on_watermark_from_first_input);
inline constexpr auto kOnWatermarkFromSecondInput =
    TM_GENERALIZED_WATERMARK_MEMBER(on_watermark_from_second_input);
inline constexpr auto kOnWatermarkFromNonBroadcastInput =
    TM_GENERALIZED_WATERMARK_MEMBER(on_watermark_from_non_broadcast_input);
inline constexpr auto kOnWatermarkFromBroadcastInput =
    TM_GENERALIZED_WATERMARK_MEMBER(on_watermark_from_broadcast_input);
#undef TM_GENERALIZED_WATERMARK_MEMBER
template <typename F, typename Coll, typename Ctx, typename Prepare>
bool OnGeneralizedWatermark(F& f, const GeneralizedWatermark& w, Coll& out, Ctx& ctx,
                            Prepare prepare) {
  return OnGeneralizedWatermarkWith(kOnWatermark, f, w, out, ctx, prepare);
}

// The parameter types of a callable (its call operator) or of a member
// function pointer, as a std::tuple (args).
template <typename F>
struct CallableArgs : CallableArgs<decltype(&F::operator())> {};
template <typename C, typename R, typename... A>
struct CallableArgs<R (C::*)(A...) const> {
  using args = std::tuple<A...>;
};
template <typename C, typename R, typename... A>
struct CallableArgs<R (C::*)(A...)> {
  using args = std::tuple<A...>;
};
template <typename R, typename... A>
struct CallableArgs<R (*)(A...)> {
  using args = std::tuple<A...>;
};
// Out of a Collector<Out>& parameter.
template <typename T>
struct CollectorType;
template <typename O>
struct CollectorType<Collector<O>&> {
  using type = O;
};

// The member of a user function its output type is read from (below).
template <typename F>
using ProcessElementMember = decltype(&F::process_element);
template <typename F>
using ProcessElement1Member = decltype(&F::process_element1);
template <typename F>
using FlatMap1Member = decltype(&F::flat_map1);
template <typename F>
using CallOperator = decltype(&F::operator());

// Out of the Collector<Out>& last parameter of a function's signature.
template <typename Signature>
using LastCollectorOut = typename CollectorType<
    std::tuple_element_t<std::tuple_size_v<typename CallableArgs<Signature>::args> - 1,
                         typename CallableArgs<Signature>::args>>::type;

// The output type of a user function (what it collects): its nested
// OutputType when it has one (the base classes ProcessFunction,
// KeyedProcessFunction, CoProcessFunction ... do), else the Out of the
// Collector<Out>& last parameter of its member Member<F> (process_element,
// process_element1, flat_map1), else of its call operator (a lambda).
template <typename F, template <typename> class Member>
struct UserFunctionOutput {
  static_assert(
      requires { &F::operator(); },
      "tidemark: the function's output type cannot be deduced: derive it from the function's base "
      "class (ProcessFunction<In, Out>, KeyedProcessFunction<K, In, Out>, ...), give it a nested "
      "OutputType, or make its last parameter a Collector<Out>&");
  using type = LastCollectorOut<CallOperator<F>>;
};
template <typename F, template <typename> class Member>
requires(
    !requires { typename F::OutputType; } &&
    requires { typename Member<F>; }) struct UserFunctionOutput<F, Member> {
  using type = LastCollectorOut<Member<F>>;
};
template <typename F, template <typename> class Member>
requires requires { typename F::OutputType; }
struct UserFunctionOutput<F, Member> {
  using type = typename F::OutputType;
};
template <typename F, template <typename> class Member>
using FunctionOutput = typename UserFunctionOutput<F, Member>::type;
// Out when given (not void), else UserFunctionOutput (evaluated only then).
template <typename Out, typename F, template <typename> class Member>
struct FunctionOutputOr {
  using type = Out;
};
template <typename F, template <typename> class Member>
struct FunctionOutputOr<void, F, Member> : UserFunctionOutput<F, Member> {};

// flat_map(f) with f(const In&, Collector<Out>&).
template <typename In, typename Out, typename F>
class FlatMapOperator final : public BatchedOperator<FlatMapOperator<In, Out, F>, In, Out> {
 public:
  explicit FlatMapOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement(In&& v, Timestamp ts) override {
    collector_->set_timestamp(ts);
    f_(RecordArg<F, In, Collector<Out>&>(v), *collector_);
  }

 private:
  F f_;
  std::optional<Collector<Out>> collector_;
};

// Rolling keyed reduce (Flink's KeyedStream.reduce): keeps one value per key
// and emits the updated value for every record.
template <typename T, typename K, typename KeyFn, typename ReduceFn>
class RollingReduceOperator final
    : public BatchedOperator<RollingReduceOperator<T, K, KeyFn, ReduceFn>, T, T> {
 public:
  RollingReduceOperator(KeyFn key, ReduceFn reduce)
      : key_(std::move(key)), reduce_(std::move(reduce)) {}
  void ProcessElement(T&& v, Timestamp ts) override {
    auto [it, inserted] = state_.try_emplace(key_(static_cast<const T&>(v)), v);
    if (!inserted)
      it->second = reduce_(static_cast<const T&>(it->second), static_cast<const T&>(v));
    this->output().CollectCopy(it->second, ts);
  }
  size_t num_keys() const { return state_.size(); }
  StateRescaling state_rescaling() const override { return StateRescaling::kKeyGroups; }

  // Checkpoints: the value per key; a restore keeps the keys of this
  // instance's key groups and merges (runtime/core/operator.h).
  void SnapshotState(StateWriter& w) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<T>) {
      if constexpr (KeyGroupComputable<K>) {
        if (const int mp = w.key_group_hint(); mp > 0) {
          // Incremental checkpoints: the map's format, its entries grouped
          // by key group, so an unchanged key group encodes to the same bytes.
          std::vector<std::vector<const typename decltype(state_)::value_type*>> groups(
              static_cast<size_t>(mp));
          for (const auto& e : state_)
            groups[static_cast<size_t>(ComputeKeyGroup(KeyHash<K>{}(e.first), mp))].push_back(&e);
          w.PutVarint(state_.size());
          for (const auto& g : groups) {
            for (const auto* e : g) {
              Encode(w, e->first);
              Encode(w, e->second);
            }
          }
          return;
        }
      }
      Encode(w, state_);
    } else {
      ThrowFirstMissingCodec<K, T>("operator '" + this->ctx().operator_name() + "'");
    }
  }
  void RestoreState(StateReader& r) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<T>) {
      const KeyGroupRange range = KeyGroupRange::Of(this->ctx());
      for (auto& [k, v] : Decode<KeyMap<K, T>>(r))
        if (range.Contains(k)) state_.insert_or_assign(k, std::move(v));
    } else {
      r.Fail("operator '" + this->ctx().operator_name() +
             "': state without tidemark::StateCodec cannot be restored");
    }
  }

 private:
  KeyFn key_;
  ReduceFn reduce_;
  KeyMap<K, T> state_;
};

// The watermark output of TimestampsAndWatermarksOperator (basic.cc): it
// forwards a watermark only when it advances, turns the output active again
// before a watermark that follows idleness, and, while `deferring` (the
// generator's OnEvent, before the record is forwarded), holds what it is asked
// to emit until ApplyPending(), in order.
class TimestampsEmitter final : public WatermarkOutput {
 public:
  void set_out(OutputBase* out) { out_ = out; }
  void set_deferring(bool d) { deferring_ = d; }
  bool has_pending() const { return has_pending_; }
  Timestamp last_emitted() const { return last_emitted_; }
  bool idle() const { return idle_; }
  // A restored job: the last watermark and status sent before the checkpoint
  // (downstream has them already: its valve is restored too).
  void Restore(Timestamp last_emitted, bool idle) {
    last_emitted_ = last_emitted;
    idle_ = idle;
  }

  void EmitWatermark(Timestamp w) override;
  void MarkIdle() override;
  void MarkActive() override;
  void ApplyPending();

 private:
  enum class Action : uint8_t { kWatermark, kIdle, kActive };
  void Defer(Action what, Timestamp w);

  OutputBase* out_ = nullptr;
  Timestamp last_emitted_ = kMinTimestamp;
  bool idle_ = false;
  bool deferring_ = false;
  bool has_pending_ = false;
  std::vector<std::pair<Action, Timestamp>> pending_;  // in the order requested
};

// Flink's CombinedWatermarkStatus over the splits of one source subtask
// (basic.cc; docs/semantics.md 2.7): each split's watermark and idleness;
// the combined watermark is the minimum over the splits that are not idle,
// or, when every split is idle, the maximum over all of them (the flush).
// Released splits no longer count.  Never decreases.
class SplitWatermarks {
 public:
  struct Split {
    std::string id;
    Timestamp watermark = kMinTimestamp;
    bool idle = false;
    bool released = false;
  };
  int Add(std::string id);
  Split& at(int i) { return splits_[static_cast<size_t>(i)]; }
  const Split& at(int i) const { return splits_[static_cast<size_t>(i)]; }
  int size() const { return static_cast<int>(splits_.size()); }
  int Find(const std::string& id) const;
  // Emits the combined watermark on `out` when it advanced, then IDLE when
  // every registered split is idle; with no split left (all released),
  // emits nothing.
  void Update(WatermarkOutput& out);
  Timestamp combined() const { return combined_; }

 private:
  std::vector<Split> splits_;
  Timestamp combined_ = kMinTimestamp;
};

// assign_timestamps_and_watermarks: Flink's TimestampsAndWatermarksOperator
// (docs/semantics.md, 2.5).  Assigns each record's timestamp, forwards
// the record, then shows it to the generator, so a punctuated watermark always
// follows the record that caused it.  Watermarks leaving this operator
// strictly increase; upstream watermarks are ignored except kMaxWatermark.
//
// With per_split (from_source, Flink's ProgressiveTimestampsAndWatermarks
// with its WatermarkOutputMultiplexer, 2.7) and a source that names splits,
// every split has a generator of its own (with its own idleness and flush),
// and what leaves is the combined watermark of SplitWatermarks.  Records that
// come without a split share the split "(main)" once the source has named
// one (before that they have the subtask's single generator).
//
// The strategy's future-timestamp guard (2.10) takes records dated more than
// the skew ahead of processing time out before the generator sees them.
// The part of TimestampsAndWatermarksOperator that does not depend on the
// record type (basic.cc): the generators' periodic emission, the splits and
// their combined watermark, alignment, checkpoints and the future guard's
// counters.
class TimestampsAndWatermarksCore : public SplitWatermarkInput {
 public:
  // SplitWatermarkInput (the source driver, before each run of records).
  bool per_split() const override { return per_split_; }
  int RegisterSplit(const std::string& split_id) override;
  void SetCurrentSplit(int index) override;
  void ReleaseSplit(int index) override;
  void ReleaseSplitIfHeld(const std::string& split_id) override;

  Timestamp last_emitted() const { return emitter_.last_emitted(); }

 protected:
  // What the core needs of the strategy (WatermarkStrategy<T>'s settings).
  struct Settings {
    bool periodic_per_record = false;
    bool aligned = false;
    std::string alignment_group;
    int64_t alignment_drift_ms = 0;
    int64_t alignment_interval_ms = 0;
    int64_t skew_ms = -1;  // < 0: no future-timestamp guard
  };

  explicit TimestampsAndWatermarksCore(bool per_split);
  ~TimestampsAndWatermarksCore();  // not virtual: never deleted through it

  // The typed operator's part: a new generator from the strategy, and its
  // outputs (OperatorBase's forwarding).
  virtual std::unique_ptr<WatermarkGeneratorBase> NewGenerator() = 0;
  virtual void ForwardOut(Timestamp w) = 0;
  virtual void ForwardOutStatus(WatermarkStatus s) = 0;

  void OpenCore(OperatorContext& ctx, Settings settings);
  void FinishCore();
  void SnapshotCore(StateWriter& w);
  void RestoreCore(StateReader& r);

  bool IsFuture(Timestamp ts, Timestamp now) const {
    return ts != kNoTimestamp && ts > SaturatingAdd(now, skew_);
  }
  // A record taken out as from the future: counted, and dropped unless it
  // has a side output (`diverted`).
  void CountFuture(bool diverted);

  bool split_mode() const { return current_ >= 0; }
  WatermarkGeneratorBase& CurrentGenerator() {
    return split_mode() ? *split_state_[static_cast<size_t>(current_)]->generator : *generator_;
  }
  WatermarkOutput& EventOutput() {
    return split_mode()
               ? static_cast<WatermarkOutput&>(*split_state_[static_cast<size_t>(current_)])
               : static_cast<WatermarkOutput&>(emitter_);
  }
  // Every generator's periodic emission: the subtask's, or every live
  // split's followed by one update of the combined watermark.
  void PeriodicEmit();

  TimestampsEmitter emitter_;
  bool periodic_per_record_ = false;
  // The future-timestamp guard; skew_ < 0: off.
  int64_t skew_ = -1;

 private:
  // A split's generator and its output into SplitWatermarks (Flink's
  // PartialWatermark): watermarks from OnEvent update the combined
  // watermark at once, periodic ones after every split was asked
  // (Flink's immediate and deferred outputs).
  struct SplitState final : WatermarkOutput {
    TimestampsAndWatermarksCore* op = nullptr;
    int index = -1;
    std::unique_ptr<WatermarkGeneratorBase> generator;
    void EmitWatermark(Timestamp w) override;
    void MarkIdle() override;
    void MarkActive() override;
  };
  struct RestoredSplit {
    Timestamp watermark = kMinTimestamp;
    std::string generator;
  };
  // The emitter's way out: the operator's outputs.
  struct Forwarder final : OutputBase {
    TimestampsAndWatermarksCore* op = nullptr;
    void EmitWatermark(Timestamp w) override;
    void EmitStatus(WatermarkStatus s) override { op->ForwardOutStatus(s); }
  };

  int MainSplit();
  // A split's watermark or idleness changed: the trace hears of it, and
  // the combined watermark follows (after the periodic round, when in one).
  void SplitChanged(int index);
  // The periodic emitter, as Flink's: a timer at now + interval, re-armed
  // at (the clock then) + interval after each emission.  Like every
  // processing-time timer it runs once the clock has passed its time
  // (ProcessingTimeService), so the first emission comes at open time +
  // interval + 1 ms and the next ones about interval + 1 ms apart, which is
  // what Flink's registerTimer(now + interval) does too.
  void ScheduleNext();
  void ScheduleReport();

  OperatorContext* ctx_ = nullptr;
  bool per_split_;
  std::unique_ptr<WatermarkGeneratorBase> generator_;
  Forwarder forwarder_;
  int64_t interval_ = 0;
  int64_t alignment_interval_ = 0;
  SourceAlignment* align_ = nullptr;  // the source task's, when aligned
  // Per split (only once a source named one).
  SplitWatermarks combined_;
  std::vector<std::unique_ptr<SplitState>> split_state_;
  std::map<std::string, RestoredSplit> restored_splits_;
  int current_ = -1;
  int main_split_ = -1;
  bool in_periodic_ = false;
  Counter* future_ = nullptr;
  Counter* future_dropped_ = nullptr;
};

template <typename T>
class TimestampsAndWatermarksOperator final : public OneInputOperator<T, T>,
                                              public TimestampsAndWatermarksCore {
 public:
  explicit TimestampsAndWatermarksOperator(WatermarkStrategy<T> strategy, bool per_split = false)
      : TimestampsAndWatermarksCore(per_split), strategy_(std::move(strategy)) {}

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    Settings s;
    s.periodic_per_record = strategy_.periodic_per_record();
    s.aligned = strategy_.aligned();
    if (s.aligned) {
      s.alignment_group = strategy_.alignment_group();
      s.alignment_drift_ms = strategy_.alignment_drift().count();
      s.alignment_interval_ms = strategy_.alignment_interval().count();
    }
    if (strategy_.max_future_skew()) {
      s.skew_ms = ToMillis(*strategy_.max_future_skew());
      if (!strategy_.future_tag().empty()) {
        if (OutputBase* out = this->FindSideOutput(strategy_.future_tag()))
          future_out_ = SideOutputAs<T>(out, strategy_.future_tag());
      }
    }
    OpenCore(ctx, std::move(s));
  }

  void ProcessElement(T&& v, Timestamp ts) override {
    const Timestamp new_ts = strategy_.assigner() ? strategy_.assigner()(v, ts) : ts;
    if (skew_ >= 0 && IsFuture(new_ts, this->ctx().timers().CurrentProcessingTime())) {
      Divert(std::move(v), new_ts);
      return;
    }
    // The generator sees the record before it is moved on; what it emits is
    // held back until the record has been forwarded.
    emitter_.set_deferring(true);
    Generator().OnEvent(v, new_ts, EventOutput());
    emitter_.set_deferring(false);
    this->output().Collect(std::move(v), new_ts);
    if (emitter_.has_pending()) emitter_.ApplyPending();
    if (periodic_per_record_) PeriodicEmit();
  }

  // The same, a run at a time: the records go on in runs, cut after each
  // record whose generator call asked for a watermark or idleness change (or
  // after each record for per-record periodic emission), and around each
  // record taken out as from the future, so what follows each record
  // downstream is exactly what ProcessElement would send.
  void ProcessBatch(std::span<Record<T>> records) override {
    const bool per_record = periodic_per_record_;
    const auto& assigner = strategy_.assigner();
    const std::atomic<bool>* cancel = this->ctx().cancel_flag();
    const Timestamp now = skew_ >= 0 ? this->ctx().timers().CurrentProcessingTime() : 0;
    WatermarkGenerator<T>& generator = Generator();
    WatermarkOutput& event_out = EventOutput();
    // The built-in bounded-out-of-orderness generator (monotonous too) only
    // emits when asked periodically: its OnEvent, called directly, keeps the
    // maximum and the batch goes on whole.  Exactly that type (a subclass
    // may emit from OnEvent).
    if (!per_record && skew_ < 0 &&
        typeid(generator) == typeid(BoundedOutOfOrdernessWatermarks<T>)) {
      auto& bounded = static_cast<BoundedOutOfOrdernessWatermarks<T>&>(generator);
      ThrowIfCancelled(cancel);
      if (records.empty()) return;
      Timestamp max_ts = kMinTimestamp;
      if (const auto& assign_all = strategy_.batch_assigner()) {
        max_ts = assign_all(records);  // assigns and returns the largest
      } else {
        for (Record<T>& r : records) {
          if (assigner) r.timestamp = assigner(r.value, r.timestamp);
          max_ts = std::max(max_ts, r.timestamp);
        }
      }
      // Its OnEvent keeps only the maximum: once for the run's.
      bounded.BoundedOutOfOrdernessWatermarks<T>::OnEvent(records.back().value, max_ts, event_out);
      this->output().CollectBatch(records);
      return;
    }
    size_t start = 0;
    for (size_t i = 0; i < records.size(); ++i) {
      ThrowIfCancelled(cancel);
      Record<T>& r = records[i];
      if (assigner) r.timestamp = assigner(r.value, r.timestamp);
      if (skew_ >= 0 && IsFuture(r.timestamp, now)) {
        if (start < i) this->output().CollectBatch(records.subspan(start, i - start));
        start = i + 1;
        Divert(std::move(r.value), r.timestamp);
        continue;
      }
      emitter_.set_deferring(true);
      generator.OnEvent(r.value, r.timestamp, event_out);
      emitter_.set_deferring(false);
      if (emitter_.has_pending() || per_record) {
        this->output().CollectBatch(records.subspan(start, i + 1 - start));
        start = i + 1;
        if (emitter_.has_pending()) emitter_.ApplyPending();
        if (per_record) PeriodicEmit();
      }
    }
    if (start < records.size()) this->output().CollectBatch(records.subspan(start));
  }

  // Upstream watermarks and statuses are dropped, as Flink's
  // TimestampsAndWatermarksOperator does, but for the end of input (MAX).
  // In the source (from_source: per split), they are the source's own
  // (SourceOutput::EmitWatermark / MarkIdle, of the split the driver made
  // current) and go where its generator writes, as Flink's
  // SourceOutputWithWatermarks sends them.
  void ProcessWatermark(Timestamp w) override {
    if (w == kMaxWatermark) {
      emitter_.EmitWatermark(w);
    } else if (per_split()) {
      EventOutput().EmitWatermark(w);
    }
  }
  void ProcessStatus(WatermarkStatus s) override {
    if (per_split() && s == WatermarkStatus::kIdle) EventOutput().MarkIdle();
  }
  void Finish() override { FinishCore(); }

  // Checkpoints: the generator's state and what was last sent, so that the
  // restored job emits exactly the watermarks an uninterrupted one would
  // (Flink restarts generators from scratch instead; docs/checkpoints.md).
  // Per split: each live split's watermark and generator, by split id.
  void SnapshotState(StateWriter& w) override { SnapshotCore(w); }
  void RestoreState(StateReader& r) override { RestoreCore(r); }

  // Rescaled (restored at another parallelism), the generator starts from
  // scratch, as Flink's always does: its watermarks start at MIN again, so
  // no record becomes late that would not have been (docs/checkpoints.md).
  StateRescaling state_rescaling() const override { return StateRescaling::kDropped; }

 private:
  std::unique_ptr<WatermarkGeneratorBase> NewGenerator() override {
    // Idleness runs on the input activity clock, which stands still while
    // the task is back-pressured (FLINK-35886).
    // release(): no converting constructor of unique_ptr instantiated per T.
    return std::unique_ptr<WatermarkGeneratorBase>(
        strategy_.CreateGenerator(this->ctx().input_activity_clock()).release());
  }
  void ForwardOut(Timestamp w) override { this->ForwardWatermark(w); }
  void ForwardOutStatus(WatermarkStatus s) override { this->ForwardStatus(s); }

  WatermarkGenerator<T>& Generator() {
    return static_cast<WatermarkGenerator<T>&>(CurrentGenerator());
  }
  void Divert(T&& v, Timestamp ts) {
    CountFuture(future_out_ != nullptr);
    if (future_out_ != nullptr) future_out_->Collect(std::move(v), ts);
  }

  WatermarkStrategy<T> strategy_;
  Output<T>* future_out_ = nullptr;
};

// A sink that calls `f(value, timestamp)` or `f(value)` for each record.
template <typename T, typename F>
class FunctionSinkOperator final : public BatchedSinkOperator<FunctionSinkOperator<T, F>, T> {
 public:
  explicit FunctionSinkOperator(F f) : f_(std::move(f)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }
  void ProcessElement(T&& v, Timestamp ts) override {
    if constexpr (std::is_invocable_v<F&, T&&, Timestamp>) {
      f_(std::move(v), ts);
    } else {
      f_(std::move(v));
    }
  }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}

 private:
  F f_;
};

}  // namespace internal

// A sink of one's own (Flink's SinkWriter), for DataStream::sink_to: one
// writer per subtask, made by the factory given there.
//   open(ctx)            once before the first record (subtask index,
//                        parallelism, counters: RuntimeContext)
//   write(value, ts)     every record, in order
//   flush(end_of_input)  what it buffered must be out: before the subtask's
//                        snapshot of every checkpoint (false), and once after
//                        the last record of a bounded input (true)
//   close()              once at the end, also when the job fails
// Exceptions from any of them fail the job, naming the sink and subtask.
template <typename T>
class SinkWriter {
 public:
  virtual ~SinkWriter() = default;
  virtual void open(const RuntimeContext& /*ctx*/) {}
  virtual void write(const T& value, Timestamp timestamp) = 0;
  virtual void flush(bool /*end_of_input*/) {}
  virtual void close() {}
};

namespace internal {

template <typename T>
class WriterSinkOperator final : public BatchedSinkOperator<WriterSinkOperator<T>, T> {
 public:
  explicit WriterSinkOperator(std::unique_ptr<SinkWriter<T>> writer) : writer_(std::move(writer)) {}
  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    writer_->open(RuntimeContext(&ctx));
    opened_ = true;
  }
  void ProcessElement(T&& v, Timestamp ts) override { writer_->write(v, ts); }
  void ProcessWatermark(Timestamp) override {}
  void ProcessStatus(WatermarkStatus) override {}
  void PrepareSnapshotPreBarrier(int64_t) override { writer_->flush(false); }
  void Finish() override { writer_->flush(true); }
  void Close() override {
    if (opened_) writer_->close();
  }

 private:
  std::unique_ptr<SinkWriter<T>> writer_;
  bool opened_ = false;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_BASIC_H_
