// api/windowed_stream.h
//
// The windowing API (Flink's WindowedStream), in tidemark's snake_case:
//
//   #include <tidemark/api/windowed_stream.h>  (or <tidemark/tidemark.h>)
//   using namespace tidemark;
//   OutputTag<Event> late("late");
//   DataStream<Event> sums = events                     // timestamps assigned
//       .key_by([](const Event& e) { return e.id; })
//       .window(TumblingEventTimeWindows::of(3s))       // or SlidingEventTimeWindows::of(10s, 5s),
//                                                       // EventTimeSessionWindows::with_gap(5s),
//                                                       ...
//       .allowed_lateness(2s)                           // optional, default 0
//       .side_output_late_data(late)                    // optional
//       .reduce([](const Event& a, const Event& b) { return a.Plus(b); });
//   DataStream<Event> late_events = sums.get_side_output(late);
//
// Optional, before the function: .trigger(CountTrigger::of(3)) (any trigger
// of triggers.h, or a class derived from Trigger<T, W>), .evictor(
// CountEvictor::of(2)) (process / apply only).
//
// Window functions, each returning DataStream<Out>; every output record is
// timestamped with the window's max_timestamp() (end - 1):
//   .reduce(f)                 f(const T&, const T&) -> T; Out = T
//   .reduce(f, p)              p(const K& key, const W& window, const T& reduced,
//                                WindowContext& ctx, Collector<Out>& out)
//   .aggregate(agg)            agg.create_accumulator() -> Acc, agg.add(const T&, Acc) -> Acc,
//                              agg.get_result(const Acc&) -> Out, agg.merge(Acc, Acc) -> Acc
//   .aggregate(agg, p)         p(const K&, const W&, const R& result, WindowContext&,
//   Collector<Out>&) .process(fn) / .apply(fn)  fn(const K& key, const W& window, const
//   std::vector<T>& elements,
//                                 WindowContext& ctx, Collector<Out>& out)
// With SlidingEventTimeWindows, reduce and aggregate (with merge) combine
// per pane of gcd(size, slide) and then merge the panes of a window
// (operators/window/sliced_window_operator.h): the reduce function, and the
// aggregate's add and merge, must be associative and commutative (sum, count,
// min, max) for the results to equal a fold of the window's records in
// arrival order.
// W is TimeWindow (GlobalWindow for GlobalWindows).  Out is deduced from the
// Collector<Out>& parameter of a non-generic lambda, else given explicitly:
// .process<std::string>(fn), .reduce<Out>(f, p), .aggregate<Out>(agg, p).
// WindowContext: window(), current_watermark(), current_processing_time(),
// output(tag, value) for side outputs, window_state<V>(name) (per key and
// window, dropped at cleanup; not for sessions) and global_state<V>(name)
// (per key), subtask_index(), fired_by_element().
//
// Keyed process functions (operators/keyed_process.h):
//   stream.key_by(key).process(MyFn())   // MyFn : KeyedProcessFunction<K, T, Out>
// with process_element(value, ctx, out) / on_timer(ts, ctx, out); ctx gives
// get_current_key(), timestamp(), current_watermark(), timer_service()
// (register_/delete_ event_time / processing_time timers), output(tag, v) and
// keyed state (operators/keyed/keyed_state_store.h): get_state<V>(name),
// get_list_state<V>(name), get_reducing_state<V>(name, f),
// get_aggregating_state(name, agg), get_map_state<UK, UV>(name).
//
// Records that are too late (docs/semantics.md 6) go to the late side
// output when one is set, else count in the subtask counter
// "numLateRecordsDropped".  Invalid parameters (negative lateness, bad window
// sizes) throw std::invalid_argument while the job is built.
//
// WindowedStream is a cheap immutable value: each setter returns a new one.
#ifndef TM_API_WINDOWED_STREAM_H_
#define TM_API_WINDOWED_STREAM_H_

#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "tidemark/api/environment.h"
#include "tidemark/operators/window/assigners.h"
#include "tidemark/operators/window/evictors.h"
#include "tidemark/operators/window/fast_window_operator.h"
#include "tidemark/operators/window/local_aggregate_operator.h"
#include "tidemark/operators/window/session_window_operator.h"
#include "tidemark/operators/window/sliced_window_operator.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_contents.h"
#include "tidemark/operators/window/window_context.h"
#include "tidemark/operators/window/window_operator.h"

namespace tidemark {

// The operator a windowed stream builds: SlicedWindowOperator (stream
// slicing, operators/window/sliced_window_operator.h) when
// SlicedWindowOperatorApplies -- SlidingEventTimeWindows, EventTimeTrigger
// itself, and reduce or an aggregate with merge (associative and commutative
// functions: see that file) -- else FastWindowOperator (window-major,
// operators/window/fast_window_operator.h) when FastWindowOperatorApplies --
// a non-merging event-time assigner of TimeWindows (tumbling, sliding), the
// trigger is EventTimeTrigger itself (not another type, even one that behaves
// alike) and the function keeps one value per window (reduce, aggregate, with
// or without a process function; no evictor) -- FastSessionWindowOperator
// (key-major, operators/window/session_window_operator.h) for event-time
// sessions (fixed or dynamic gap) with EventTimeTrigger itself and the same
// functions -- else WindowOperator, the plain port of Flink's
// (operators/window/window_operator.h).  All take the
// same constructor arguments.  Tests and benchmarks that want the general
// operator for such a job build WindowOperator directly.
namespace internal {
template <typename T, typename K, typename KeyFn, typename Assigner, typename TriggerT,
          typename Contents>
using WindowOperatorFor = std::conditional_t<
    SlicedWindowOperatorApplies<Assigner, TriggerT, Contents>,
    SlicedWindowOperator<T, K, KeyFn, Assigner, Contents>,
    std::conditional_t<
        FastWindowOperatorApplies<Assigner, TriggerT, Contents>,
        FastWindowOperator<T, K, KeyFn, Assigner, Contents>,
        std::conditional_t<FastSessionWindowOperatorApplies<Assigner, TriggerT, Contents>,
                           FastSessionWindowOperator<T, K, KeyFn, Assigner, Contents>,
                           WindowOperator<T, K, KeyFn, Assigner, TriggerT, Contents>>>>;

// Out from the Collector<Out>& parameter at position I of F, unless given.
template <typename Out, typename F, size_t I>
struct DeduceOut {
  using type = Out;
};
template <typename F, size_t I>
struct DeduceOut<void, F, I> {
  using type =
      typename CollectorType<std::tuple_element_t<I, typename CallableArgs<F>::args>>::type;
};
// fn(const K&, const W&, const std::vector<T>&, WindowContext&, Collector<Out>&).
template <typename Out, typename Fn, typename K, typename W, typename T>
constexpr bool WindowFunctionOk() {
  if constexpr (!OutDeducible<Out, Fn, 4>()) {
    return false;
  } else {
    using O = typename DeduceOut<Out, Fn, 4>::type;
    return std::is_invocable_v<Fn&, const K&, const W&, const std::vector<T>&, WindowContext&,
                               Collector<O>&>;
  }
}
// p(const K&, const W&, const R&, WindowContext&, Collector<Out>&).
template <typename Out, typename Fn, typename K, typename W, typename R>
constexpr bool ResultFunctionOk() {
  if constexpr (!OutDeducible<Out, Fn, 4>()) {
    return false;
  } else {
    using O = typename DeduceOut<Out, Fn, 4>::type;
    return std::is_invocable_v<Fn&, const K&, const W&, const R&, WindowContext&, Collector<O>&>;
  }
}
}  // namespace internal

// kLocal: local_aggregation() or local_aggregation_if() was called, so the
// local pre-aggregation path is compiled into reduce and aggregate (a stream
// without it does not pay for that path's code: a sixth of the functions GCC
// compiles for a one-window job, bench/RESULTS.md).
template <typename T, typename KeyFn, typename Assigner,
          typename TriggerT = decltype(std::declval<const Assigner&>().default_trigger()),
          typename EvictorT = NoEvictor, bool kLocal = false>
class WindowedStream {
 public:
  using Key = typename KeyedStream<T, KeyFn>::Key;
  using W = typename Assigner::WindowType;

  WindowedStream(const WindowedStream&) = default;
  // Assignable even when the key selector or a function object is a
  // capturing lambda (whose copy assignment is deleted), so that
  // `w = w.side_output_late_data(tag);` works: copy-constructs in place (the
  // object is transparently replaceable: no const or reference members).
  WindowedStream& operator=(const WindowedStream& other) {
    if (this != &other) {
      WindowedStream copy(other);
      this->~WindowedStream();
      new (this) WindowedStream(std::move(copy));
    }
    return *this;
  }
  WindowedStream(WindowedStream&&) = default;
  WindowedStream& operator=(WindowedStream&& other) {
    return *this = static_cast<const WindowedStream&>(other);
  }
  ~WindowedStream() = default;

  // Replaces the assigner's default trigger.
  template <typename NewTrigger>
  WindowedStream<T, KeyFn, Assigner, NewTrigger, EvictorT, kLocal> trigger(NewTrigger t) const {
    if constexpr (Assigner::kIsMerging) {
      if (!t.can_merge())
        throw std::invalid_argument(
            "A merging window assigner cannot be used with a trigger that does not support "
            "merging.");
    }
    return {keyed_, assigner_, std::move(t), evictor_, config_, local_max_partials_};
  }
  // Evicts elements before/after the window function (process / apply only).
  template <typename NewEvictor>
  WindowedStream<T, KeyFn, Assigner, TriggerT, NewEvictor, kLocal> evictor(NewEvictor e) const {
    return {keyed_, assigner_, trigger_, std::move(e), config_, local_max_partials_};
  }
  // How long after the window's end (event time) late elements are still
  // added, re-firing the window.  Must be >= 0.
  WindowedStream allowed_lateness(Duration lateness) const {
    if (ToMillis(lateness) < 0)
      throw std::invalid_argument("The allowed lateness cannot be negative.");
    WindowedStream s = *this;
    s.config_.allowed_lateness = ToMillis(lateness);
    return s;
  }
  // Sends elements that are too late to `tag` (read with get_side_output).
  WindowedStream side_output_late_data(OutputTag<T> tag) const {
    WindowedStream s = *this;
    s.config_.late_tag = std::move(tag);
    return s;
  }

  // Local pre-aggregation (Flink SQL's local-global aggregation): the
  // subtasks that send records into the key_by shuffle combine them per
  // (key, window pane) first, and ship one partial per (key, pane) instead of
  // every record (operators/window/local_aggregate_operator.h).  For reduce
  // and aggregate (with merge) over TumblingEventTimeWindows (aligned) or
  // SlidingEventTimeWindows with the default EventTimeTrigger; the function
  // (reduce's f, the aggregate's add and merge) must be associative and
  // commutative (sum, count, min, max), as results are combined in another
  // order than the records arrived.  Which records are late, what goes to the
  // late side output and how often a window fires are unchanged: a record
  // whose window may already have fired downstream passes alone.  At most
  // `max_partials` partials are held per sending subtask (all are sent when
  // the bound is reached).  Other windows or process / apply throw
  // std::invalid_argument when the job is built.
  // The result is a WindowedStream of another type (kLocal): to choose at
  // run time, from a flag, use local_aggregation_if, not
  // `w = w.local_aggregation()`.
  WindowedStream<T, KeyFn, Assigner, TriggerT, EvictorT, true> local_aggregation(
      size_t max_partials = kDefaultLocalAggregationMaxPartials) const {
    if (max_partials == 0)
      throw std::invalid_argument("local_aggregation: max_partials must be > 0");
    return {keyed_, assigner_, trigger_, evictor_, config_, max_partials};
  }
  // local_aggregation(max_partials) when `enabled`, else the same stream
  // without it, as one type either way (the choice is made when the job is
  // built, e.g. from a command-line flag).
  WindowedStream<T, KeyFn, Assigner, TriggerT, EvictorT, true> local_aggregation_if(
      bool enabled, size_t max_partials = kDefaultLocalAggregationMaxPartials) const {
    if (enabled) return local_aggregation(max_partials);
    return {keyed_, assigner_, trigger_, evictor_, config_, 0};
  }
  bool local_aggregation_enabled() const { return local_max_partials_ > 0; }

  // --- window functions ---
  template <typename ReduceFn>
  DataStream<T> reduce(ReduceFn f) const {
    static_assert(std::is_invocable_r_v<T, ReduceFn&, const T&, const T&>,
                  "tidemark: window reduce(f) needs f(const T&, const T&) -> T");
    NoEvictorOnly();
    using C = internal::ReduceContents<T, Key, W, ReduceFn, internal::NoProcessFunction, T>;
    if constexpr (kLocal) {
      if (local_max_partials_ > 0) {
        if constexpr (kLocalWindows) {
          return BuildLocalReduce<C>(f, C(f, internal::NoProcessFunction{}));
        } else {
          ThrowLocalNotApplicable();
        }
      }
    }
    return Build<C>("reduce", C(std::move(f), internal::NoProcessFunction{}));
  }
  template <typename Out = void, typename ReduceFn, typename ProcessFn>
  auto reduce(ReduceFn f, ProcessFn p) const {
    constexpr bool ok = std::is_invocable_r_v<T, ReduceFn&, const T&, const T&> &&
                        internal::ResultFunctionOk<Out, ProcessFn, Key, W, T>();
    static_assert(ok,
                  "tidemark: window reduce(f, p) needs f(const T&, const T&) -> T and p(const K& "
                  "key, const W& window, const T& reduced, WindowContext& ctx, Collector<Out>& "
                  "out)");
    if constexpr (ok) {
      NoEvictorOnly();
      using O = typename internal::DeduceOut<Out, ProcessFn, 4>::type;
      using C = internal::ReduceContents<T, Key, W, ReduceFn, ProcessFn, O>;
      if constexpr (kLocal) {
        if (local_max_partials_ > 0) {
          if constexpr (kLocalWindows) {
            return BuildLocalReduce<C>(f, C(f, p));
          } else {
            ThrowLocalNotApplicable();
          }
        }
      }
      return Build<C>("reduce", C(std::move(f), std::move(p)));
    }
  }
  template <typename Agg>
  auto aggregate(Agg agg) const {
    CheckAggregateFunction<Agg>();
    NoEvictorOnly();
    using O = internal::AggregateResultOf<Agg>;
    if constexpr (kLocal) {
      if (local_max_partials_ > 0) {
        if constexpr (kLocalWindows && kHasMerge<Agg>) {
          return BuildLocalAggregate<O>(agg, internal::NoProcessFunction{});
        } else {
          ThrowLocalNotApplicable(kHasMerge<Agg>);
        }
      }
    }
    using C = internal::AggregateContents<T, Key, W, Agg, internal::NoProcessFunction, O>;
    return Build<C>("aggregate", C(std::move(agg), internal::NoProcessFunction{}));
  }
  template <typename Out = void, typename Agg, typename ProcessFn>
  auto aggregate(Agg agg, ProcessFn p) const {
    CheckAggregateFunction<Agg>();
    NoEvictorOnly();
    using O = typename internal::DeduceOut<Out, ProcessFn, 4>::type;
    if constexpr (kLocal) {
      if (local_max_partials_ > 0) {
        if constexpr (kLocalWindows && kHasMerge<Agg>) {
          return BuildLocalAggregate<O>(agg, p);
        } else {
          ThrowLocalNotApplicable(kHasMerge<Agg>);
        }
      }
    }
    using C = internal::AggregateContents<T, Key, W, Agg, ProcessFn, O>;
    return Build<C>("aggregate", C(std::move(agg), std::move(p)));
  }
  template <typename Out = void, typename Fn>
  auto process(Fn fn) const {
    constexpr bool ok = internal::WindowFunctionOk<Out, Fn, Key, W, T>();
    static_assert(ok,
                  "tidemark: window process(fn) / apply(fn) needs fn(const K& key, const W& "
                  "window, const std::vector<T>& elements, WindowContext& ctx, Collector<Out>& "
                  "out) (give Out explicitly, process<Out>(fn), for a generic lambda)");
    if constexpr (ok) {
      if (local_max_partials_ > 0)
        throw std::invalid_argument(
            "local_aggregation() applies to reduce and aggregate, not to process / apply");
      using O = typename internal::DeduceOut<Out, Fn, 4>::type;
      using C = internal::ListContents<T, Key, W, Fn, EvictorT, O>;
      return Build<C>("process", C(std::move(fn), evictor_));
    }
  }
  template <typename Out = void, typename Fn>
  auto apply(Fn fn) const {
    return process<Out>(std::move(fn));
  }

  const Assigner& assigner() const { return assigner_; }

 private:
  template <typename, typename, typename, typename, typename, bool>
  friend class WindowedStream;
  friend class KeyedStream<T, KeyFn>;
  friend struct internal::StreamAccess;

  const internal::WindowOperatorConfig<T>& config() const { return config_; }
  WindowedStream(KeyedStream<T, KeyFn> keyed, Assigner assigner)
      : keyed_(std::move(keyed)), assigner_(assigner), trigger_(assigner_.default_trigger()) {}
  WindowedStream(KeyedStream<T, KeyFn> keyed, Assigner assigner, TriggerT trigger, EvictorT evictor,
                 internal::WindowOperatorConfig<T> config, size_t local_max_partials = 0)
      : keyed_(std::move(keyed)),
        assigner_(std::move(assigner)),
        trigger_(std::move(trigger)),
        evictor_(std::move(evictor)),
        config_(std::move(config)),
        local_max_partials_(local_max_partials) {}
  // An AggregateFunction's members as the window calls them (Flink's, with
  // the accumulator passed and returned by value), and merge for windows
  // that merge (sessions).
  template <typename Agg>
  static constexpr void CheckAggregateFunction() {
    constexpr bool kShape = requires(Agg & a, const T& v) {
      a.create_accumulator();
      {
        a.add(v, a.create_accumulator())
        } -> std::convertible_to<std::decay_t<decltype(a.create_accumulator())>>;
      a.get_result(a.create_accumulator());
    };
    static_assert(kShape,
                  "tidemark: aggregate(agg) needs agg.create_accumulator() -> Acc, agg.add(const "
                  "T&, Acc) -> Acc (the record first; the accumulator taken and returned by "
                  "value) and agg.get_result(const Acc&) -> R, T the stream's record type");
    if constexpr (kShape) {
      constexpr bool kMerging = [] {
        if constexpr (requires { Assigner::kIsMerging; }) {
          return Assigner::kIsMerging;
        } else {
          return false;
        }
      }();
      static_assert(!kMerging || kHasMerge<Agg>,
                    "tidemark: aggregate(agg) on merging windows (sessions) needs agg.merge(Acc, "
                    "Acc) -> Acc");
    }
  }
  static constexpr void NoEvictorOnly() {
    static_assert(std::is_same_v<EvictorT, NoEvictor>,
                  "evictors apply to process / apply windows only");
  }
  template <typename C>
  DataStream<typename C::OutputType> Build(const char* what, C contents) const {
    using Op = internal::WindowOperatorFor<T, Key, KeyFn, Assigner, TriggerT, C>;
    KeyFn key = keyed_.key_selector();
    Assigner assigner = assigner_;
    TriggerT trigger = trigger_;
    internal::WindowOperatorConfig<T> config = config_;
    // Validates now, when the job is built.
    Op probe(key, assigner, trigger, contents, config);
    (void)probe;
    DataStream<typename C::OutputType> out = keyed_.template transform<typename C::OutputType>(
        std::string("Window(") + what + ")",
        [key, assigner, trigger, contents, config]() -> std::unique_ptr<OperatorBase> {
          return std::unique_ptr<OperatorBase>(new Op(key, assigner, trigger, contents, config));
        });
    // The late side output's type (the record's, also behind local
    // aggregation), so that get_side_output with another type is refused
    // when the job is built, as Flink refuses one id with two types.
    if (config_.late_tag) {
      using Late = typename internal::LateRecordOf<T>::type;
      internal::StreamAccess::Node(out).side_outs.emplace(config_.late_tag->id(),
                                                          internal::NodeOpsOf<Late>());
    }
#ifdef TIDEMARK_ROCKSDB_WINDOWS
    // On RocksDB the general operator, whose contents live in its keyed
    // state store (the specialised ones keep theirs in heap layouts of their
    // own): the backend is the job's, known when it runs.  Only in programs
    // that link tidemark::rocksdb (which defines TIDEMARK_ROCKSDB_WINDOWS):
    // the general operator is compiled for them alone (it costs a one-window
    // job about half again its compile time).
    using General = internal::WindowOperator<T, Key, KeyFn, Assigner, TriggerT, C>;
    if constexpr (!std::is_same_v<Op, General>) {
      internal::StreamAccess::Node(out).make_operator_on_rocksdb =
          [key, assigner, trigger, contents, config]() -> std::unique_ptr<OperatorBase> {
        return std::make_unique<General>(key, assigner, trigger, contents, config);
      };
    }
#else
    // Without it a specialised operator keeps its contents on the heap on
    // every backend; the job says so at start when its backend is RocksDB
    // (PhysicalPlan::StateBackendWarnings).
    if constexpr (!std::is_same_v<Op,
                                  internal::WindowOperator<T, Key, KeyFn, Assigner, TriggerT, C>>) {
      internal::StreamAccess::Node(out).window_contents_on_heap_only = true;
    }
#endif
    return out;
  }

  // Whether local_aggregation() can apply (else the window function throws
  // std::invalid_argument when local aggregation is asked for, and the local
  // path is not instantiated).  Only a kLocal stream instantiates it at all.
  static constexpr bool kLocalWindows =
      (std::is_same_v<Assigner, TumblingEventTimeWindows> ||
       std::is_same_v<Assigner, SlidingEventTimeWindows>)&&std::is_same_v<TriggerT,
                                                                          EventTimeTrigger>;
  template <typename Agg>
  static constexpr bool kHasMerge = requires(Agg& a, internal::AccumulatorOf<Agg> x,
                                             internal::AccumulatorOf<Agg> y) {
    { a.merge(std::move(x), std::move(y)) } -> std::convertible_to<internal::AccumulatorOf<Agg>>;
  };
  [[noreturn]] void ThrowLocalNotApplicable(bool has_merge = true) const {
    if (!has_merge)
      throw std::invalid_argument(
          "local_aggregation().aggregate(agg) needs agg.merge(Acc, Acc) -> Acc");
    (void)LocalPanesOrThrow();  // throws, naming what does not apply
    throw std::invalid_argument("local_aggregation() does not apply to this window");
  }
  // Local aggregation (local_aggregation()): the pane geometry, or throws
  // std::invalid_argument for a window it does not apply to.
  internal::LocalPanes LocalPanesOrThrow() const {
    if constexpr (!std::is_same_v<TriggerT, EventTimeTrigger>) {
      throw std::invalid_argument(
          "local_aggregation() needs the default EventTimeTrigger (a custom trigger may fire "
          "before the watermark)");
    } else if constexpr (std::is_same_v<Assigner, TumblingEventTimeWindows>) {
      if (!assigner_.aligned())
        throw std::invalid_argument(
            "local_aggregation() needs aligned tumbling windows (a stagger draws the offset per "
            "subtask)");
      return internal::LocalPanesOf(assigner_);
    } else if constexpr (std::is_same_v<Assigner, SlidingEventTimeWindows>) {
      return internal::LocalPanesOf(assigner_);
    } else {
      throw std::invalid_argument(
          "local_aggregation() applies to TumblingEventTimeWindows and SlidingEventTimeWindows "
          "only");
    }
  }
  // The stream into the key_by, and a node pre-aggregating it, at that
  // stream's parallelism so that it chains to it.
  template <typename Out>
  DataStream<Out> AddLocalNode(const char* what, internal::OperatorFactory factory) const {
    StreamExecutionEnvironment& env = keyed_.env();
    const int up_id = internal::StreamAccess::Node(keyed_.stream()).inputs.at(0).from;
    DataStream<T> up = internal::StreamAccess::Stream<T>(env, up_id);
    DataStream<Out> local = internal::StreamAccess::Add<Out>(
        up, std::string("LocalAggregate(") + what + ")", std::move(factory));
    const internal::StreamNode& u = internal::StreamAccess::Node(env, up_id);
    internal::StreamNode& l = internal::StreamAccess::Node(local);
    if (u.kind == internal::StreamNode::Kind::kSource ||
        u.kind == internal::StreamNode::Kind::kOperator) {
      l.parallelism = u.parallelism;
      l.fixed_parallelism = u.fixed_parallelism;
    }
    return local;
  }
  template <typename C, typename ReduceFn>
  DataStream<typename C::OutputType> BuildLocalReduce(ReduceFn f, C contents) const {
    const internal::LocalPanes panes = LocalPanesOrThrow();
    using Combiner = internal::LocalReduceCombiner<T, Key, ReduceFn>;
    using LocalOp = internal::LocalAggregateOperator<T, Key, KeyFn, Combiner>;
    KeyFn key = keyed_.key_selector();
    const size_t max_partials = local_max_partials_;
    DataStream<T> local =
        AddLocalNode<T>("reduce", [key, panes, f, max_partials]() -> std::unique_ptr<OperatorBase> {
          return std::unique_ptr<OperatorBase>(new LocalOp(key, panes, Combiner{f}, max_partials));
        });
    WindowedStream<T, KeyFn, Assigner, TriggerT, EvictorT> global(local.key_by(key), assigner_,
                                                                  trigger_, evictor_, config_);
    return global.template Build<C>("reduce", std::move(contents));
  }
  template <typename O, typename Agg, typename ProcessFn>
  auto BuildLocalAggregate(Agg agg, ProcessFn p) const {
    const internal::LocalPanes panes = LocalPanesOrThrow();
    using Combiner = internal::LocalAggregateCombiner<T, Key, Agg>;
    using Carrier = typename Combiner::Out;
    using LocalOp = internal::LocalAggregateOperator<T, Key, KeyFn, Combiner>;
    using GlobalKey = internal::LocalAggregateKey<KeyFn>;
    using Global = internal::GlobalAggregate<Agg, Carrier>;
    KeyFn key = keyed_.key_selector();
    const size_t max_partials = local_max_partials_;
    DataStream<Carrier> local = AddLocalNode<Carrier>(
        "aggregate", [key, panes, agg, max_partials]() -> std::unique_ptr<OperatorBase> {
          return std::unique_ptr<OperatorBase>(
              new LocalOp(key, panes, Combiner{agg}, max_partials));
        });
    internal::WindowOperatorConfig<Carrier> config;
    config.allowed_lateness = config_.allowed_lateness;
    if (config_.late_tag) config.late_tag.emplace(config_.late_tag->id());
    WindowedStream<Carrier, GlobalKey, Assigner, TriggerT> global(
        local.key_by(GlobalKey{key}), assigner_, trigger_, NoEvictor{}, std::move(config));
    using C = internal::AggregateContents<Carrier, Key, W, Global, ProcessFn, O>;
    return global.template Build<C>("aggregate", C(Global{std::move(agg)}, std::move(p)));
  }

  KeyedStream<T, KeyFn> keyed_;
  Assigner assigner_;
  TriggerT trigger_;
  EvictorT evictor_{};
  internal::WindowOperatorConfig<T> config_;
  size_t local_max_partials_ = 0;  // 0: no local aggregation
};

namespace internal {
// The key of every record of window_all (Flink's NullByteKeySelector).
struct AllWindowKey {
  template <typename T>
  int operator()(const T&) const {
    return 0;
  }
};
}  // namespace internal

// Windows over a whole stream that is not keyed (Flink's AllWindowedStream,
// from DataStream::window_all): one window operator at parallelism 1 sees
// every record.  The same options as WindowedStream; the window functions
// take no key:
//   .reduce(f) / .aggregate(agg)          as on a keyed stream
//   .reduce(f, p) / .aggregate(agg, p)    p(const W&, const R&, WindowContext&, Collector<Out>&)
//   .process(fn) / .apply(fn)             fn(const W&, const std::vector<T>&, WindowContext&,
//                                            Collector<Out>&)
// The result's parallelism is fixed at 1 (setting another throws).
template <typename T, typename Inner>
class AllWindowedStream {
 public:
  using W = typename Inner::W;
  explicit AllWindowedStream(Inner inner) : inner_(std::move(inner)) {}

  template <typename NewTrigger>
  auto trigger(NewTrigger t) const {
    return Wrap(inner_.trigger(std::move(t)));
  }
  template <typename NewEvictor>
  auto evictor(NewEvictor e) const {
    return Wrap(inner_.evictor(std::move(e)));
  }
  AllWindowedStream allowed_lateness(Duration lateness) const {
    return AllWindowedStream(inner_.allowed_lateness(lateness));
  }
  AllWindowedStream side_output_late_data(OutputTag<T> tag) const {
    return AllWindowedStream(inner_.side_output_late_data(std::move(tag)));
  }

  template <typename ReduceFn>
  DataStream<T> reduce(ReduceFn f) const {
    return One(inner_.reduce(std::move(f)));
  }
  template <typename Out = void, typename ReduceFn, typename ProcessFn>
  auto reduce(ReduceFn f, ProcessFn p) const {
    using O = typename internal::DeduceOut<Out, ProcessFn, 3>::type;
    return One(inner_.template reduce<O>(std::move(f), DropKey<O>(std::move(p))));
  }
  template <typename Agg>
  auto aggregate(Agg agg) const {
    return One(inner_.aggregate(std::move(agg)));
  }
  template <typename Out = void, typename Agg, typename ProcessFn>
  auto aggregate(Agg agg, ProcessFn p) const {
    using O = typename internal::DeduceOut<Out, ProcessFn, 3>::type;
    return One(inner_.template aggregate<O>(std::move(agg), DropKey<O>(std::move(p))));
  }
  template <typename Out = void, typename Fn>
  auto process(Fn fn) const {
    using O = typename internal::DeduceOut<Out, Fn, 3>::type;
    return One(inner_.template process<O>(DropKey<O>(std::move(fn))));
  }
  template <typename Out = void, typename Fn>
  auto apply(Fn fn) const {
    return process<Out>(std::move(fn));
  }

 private:
  template <typename I>
  static AllWindowedStream<T, I> Wrap(I inner) {
    return AllWindowedStream<T, I>(std::move(inner));
  }
  // The keyed window function's signature around one without the key.
  template <typename O, typename F>
  static auto DropKey(F f) {
    return [f](const int& /*key*/, const W& w, const auto& contents, WindowContext& ctx,
               Collector<O>& out) { f(w, contents, ctx, out); };
  }
  template <typename S>
  static S One(S stream) {
    internal::StreamNode& n = internal::StreamAccess::Node(stream);
    n.parallelism = 1;
    n.fixed_parallelism = true;
    return stream;
  }

  Inner inner_;
};

// DataStream::window_all, declared in api/environment.h.
template <typename T>
template <typename Assigner>
auto DataStream<T>::window_all(Assigner assigner) const {
  auto inner = key_by(internal::AllWindowKey{}).window(std::move(assigner));
  return AllWindowedStream<T, decltype(inner)>(std::move(inner));
}

// KeyedStream::window and count_window, declared in api/environment.h.
template <typename T, typename KeyFn>
template <typename Assigner>
auto KeyedStream<T, KeyFn>::window(Assigner assigner) const {
  return WindowedStream<T, KeyFn, Assigner>(*this, std::move(assigner));
}

template <typename T, typename KeyFn>
auto KeyedStream<T, KeyFn>::count_window(int64_t size) const {
  return window(GlobalWindows::create()).trigger(PurgingTrigger(CountTrigger::of(size)));
}

template <typename T, typename KeyFn>
auto KeyedStream<T, KeyFn>::count_window(int64_t size, int64_t slide) const {
  return window(GlobalWindows::create())
      .evictor(CountEvictor::of(size))
      .trigger(CountTrigger::of(slide));
}

}  // namespace tidemark

#endif  // TM_API_WINDOWED_STREAM_H_
