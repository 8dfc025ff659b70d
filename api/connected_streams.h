// api/connected_streams.h
//
// Two inputs in one operator (Flink's ConnectedStreams, BroadcastConnected-
// Stream and interval join), in tidemark's snake_case:
//
//   // Two streams, each record to the *1 or *2 member (operators/co_process.h):
//   DataStream<Out> o = a.connect(b).map(f1, f2);          // or .map(CoMapFunction)
//   DataStream<Out> o = a.connect(b).flat_map(f1, f2);     // f(const X&, Collector<Out>&)
//   DataStream<Out> o = a.connect(b).process(MyCoProcessFunction());
//   // Keyed by one key type on both sides: state and timers per key.
//   DataStream<Out> o = a.key_by(ka).connect(b.key_by(kb)).process(MyKeyedCoProcessFunction());
//   DataStream<Out> o = a.connect(b).key_by(ka, kb).process(MyKeyedCoProcessFunction());
//   // Rules pushed to every subtask (broadcast state):
//   MapStateDescriptor<std::string, Rule> rules("rules");
//   DataStream<Out> o = events.key_by(k).connect(rule_stream.broadcast(rules))
//                             .process(MyKeyedBroadcastProcessFunction());
//   DataStream<Out> o = events.connect(rule_stream.broadcast(rules))
//                             .process(MyBroadcastProcessFunction());
//   // Interval join (operators/interval_join.h):
//   DataStream<Out> o = a.key_by(ka).interval_join(b.key_by(kb))
//                        .between(-2s, 1s)                 // b within [a - 2s, a + 1s]
//                        .lower_bound_exclusive()          // optional, also upper_
//                        .side_output_left_late_data(late_a)   // optional, also right_
//                        .process(f);                      // f(const A&, const B&, ctx, out)
//
// The operator's watermark is the minimum of the two inputs' (each input's
// the minimum over its channels), an idle input does not hold the other back
// (runtime/io/detail/input_gate.h).  Note, as in Flink: an input without watermarks (a
// rule stream without a timestamp assigner) holds the operator's watermark at
// MIN until it ends or is marked idle (WatermarkStrategy::with_idleness).
//
// Wrong function signatures fail to compile with one static_assert line that
// says what is expected.
#ifndef TM_API_CONNECTED_STREAMS_H_
#define TM_API_CONNECTED_STREAMS_H_

#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/api/environment.h"
#include "tidemark/operators/co_process.h"
#include "tidemark/operators/interval_join.h"
#include "tidemark/runtime/task/detail/node_ops.h"

namespace tidemark {

namespace internal {
// A two-input node over `first` (input 1) and `second` (input 2).
template <typename Out, typename A, typename B>
DataStream<Out> AddTwoInputNode(const DataStream<A>& first, const DataStream<B>& second,
                                std::string name, OperatorFactory factory, bool keyed) {
  if (&first.env() != &second.env())
    throw std::invalid_argument("connect: the two streams belong to different environments");
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kOperator;
  n->name = std::move(name);
  n->out = NodeOpsOf<Out>();
  n->inputs.push_back(EdgeSpec{StreamAccess::Id(first), ShipStrategy::kDefault, nullptr, 0});
  n->inputs.push_back(EdgeSpec{StreamAccess::Id(second), ShipStrategy::kDefault, nullptr, 1});
  n->make_operator = std::move(factory);
  n->keyed = keyed;
  n->make_two_input_gate = &MakeTwoInputGate<A, B>;
  StreamExecutionEnvironment& env = first.env();
  const int id = StreamAccess::AddNode(env, std::move(n));
  return StreamAccess::Stream<Out>(env, id);
}

// Whether f is a join function of L and R (see IntervalJoined::process).
template <typename F, typename L, typename R>
constexpr bool JoinFunctionOk() {
  if constexpr (requires { typename F::OutputType; }) {
    using O = typename F::OutputType;
    return requires(F & g, const L& l, const R& r, ProcessJoinContext& ctx, Collector<O>& c) {
      g.process_element(l, r, ctx, c);
    }
    || std::is_invocable_v<F&, const L&, const R&, ProcessJoinContext&, Collector<O>&> ||
        std::is_invocable_v<F&, const L&, const R&, Collector<O>&>;
  } else if constexpr (requires { &F::process_element; }) {
    using Args = typename CallableArgs<decltype(&F::process_element)>::args;
    if constexpr (std::tuple_size_v<Args> != 4) {
      return false;
    } else if constexpr (!requires {
                           typename CollectorType<std::tuple_element_t<3, Args>>::type;
                         }) {
      return false;
    } else {
      using O = typename CollectorType<std::tuple_element_t<3, Args>>::type;
      return requires(F & g, const L& l, const R& r, ProcessJoinContext& ctx, Collector<O>& c) {
        g.process_element(l, r, ctx, c);
      };
    }
  } else if constexpr (OutDeducible<void, F, 2>()) {
    using O = FunctionOutput<F, ProcessElementMember>;
    return std::is_invocable_v<F&, const L&, const R&, Collector<O>&>;
  } else if constexpr (OutDeducible<void, F, 3>()) {
    using O = FunctionOutput<F, ProcessElementMember>;
    return std::is_invocable_v<F&, const L&, const R&, ProcessJoinContext&, Collector<O>&>;
  } else {
    return false;
  }
}
}  // namespace internal

// A stream sent to every subtask of the operator it is connected to, with
// the broadcast states it carries (DataStream::broadcast(descriptors...)).
template <typename T>
class BroadcastStream {
 public:
  const DataStream<T>& stream() const { return stream_; }
  // The names of the broadcast states it carries: the only ones its
  // functions may ask for.
  const std::vector<std::string>& state_names() const { return state_names_; }

 private:
  template <typename U>
  friend class DataStream;
  BroadcastStream(DataStream<T> s, std::vector<std::string> names)
      : stream_(std::move(s)), state_names_(std::move(names)) {}
  DataStream<T> stream_;
  std::vector<std::string> state_names_;
};

// Two streams connected (DataStream::connect).
template <typename A, typename B>
class ConnectedStreams {
 public:
  ConnectedStreams(DataStream<A> first, DataStream<B> second)
      : first_(std::move(first)), second_(std::move(second)) {}
  const DataStream<A>& first_input() const { return first_; }
  const DataStream<B>& second_input() const { return second_; }

  // A CoMapFunction-like object: map1(const A&) and map2(const B&), both
  // returning Out.
  template <typename F>
  auto map(F f) const {
    constexpr bool ok = requires(F & g, const A& a, const B& b) {
      g.map1(a);
      g.map2(b);
    };
    static_assert(
        ok,
        "tidemark: connect(...).map(f) needs f.map1(const A&) -> Out and f.map2(const B&) -> Out");
    if constexpr (ok) {
      using Out = std::decay_t<decltype(std::declval<F&>().map1(std::declval<const A&>()))>;
      static_assert(
          std::is_convertible_v<decltype(std::declval<F&>().map2(std::declval<const B&>())), Out>,
          "tidemark: connect(...).map(f): map2 must return map1's type");
      return internal::AddTwoInputNode<Out>(
          first_, second_, "Co-Map",
          [f] {
            return std::unique_ptr<OperatorBase>(
                std::make_unique<internal::CoMapOperator<A, B, Out, F>>(f));
          },
          keyed_);
    }
  }
  // Two functions: f1(const A&) -> Out, f2(const B&) -> Out.
  template <typename F1, typename F2>
  auto map(F1 f1, F2 f2) const {
    static_assert(std::is_invocable_v<F1&, const A&> && std::is_invocable_v<F2&, const B&>,
                  "tidemark: connect(...).map(f1, f2) needs f1(const A&) -> Out and "
                  "f2(const B&) -> Out");
    return map(internal::CoMapPair<F1, F2>{std::move(f1), std::move(f2)});
  }
  // A CoFlatMapFunction-like object: flat_map1(const A&, Collector<Out>&),
  // flat_map2(const B&, Collector<Out>&); Out from its OutputType, or given.
  template <typename Out = void, typename F>
  auto flat_map(F f) const {
    using O = typename internal::FunctionOutputOr<Out, F, internal::FlatMap1Member>::type;
    static_assert(
        requires(F & g, const A& a, const B& b, Collector<O>& c) {
          g.flat_map1(a, c);
          g.flat_map2(b, c);
        },
        "tidemark: connect(...).flat_map(f) needs f.flat_map1(const A&, Collector<Out>&) and "
        "f.flat_map2(const B&, Collector<Out>&)");
    return internal::AddTwoInputNode<O>(
        first_, second_, "Co-Flat Map",
        [f] {
          return std::unique_ptr<OperatorBase>(
              std::make_unique<internal::CoFlatMapOperator<A, B, O, F>>(f));
        },
        keyed_);
  }
  // Two functions f1(const A&, Collector<Out>&), f2(const B&, Collector<Out>&);
  // Out deduced from f1 (a non-generic lambda) or given.
  template <typename Out = void, typename F1, typename F2>
  auto flat_map(F1 f1, F2 f2) const {
    using O = typename internal::FunctionOutputOr<Out, F1, internal::CallOperator>::type;
    static_assert(std::is_invocable_v<F1&, const A&, Collector<O>&> &&
                      std::is_invocable_v<F2&, const B&, Collector<O>&>,
                  "tidemark: connect(...).flat_map(f1, f2) needs f1(const A&, Collector<Out>&) "
                  "and f2(const B&, Collector<Out>&)");
    return flat_map<O>(internal::CoFlatMapPair<F1, F2>{std::move(f1), std::move(f2)});
  }
  // A CoProcessFunction<A, B, Out>-like object: process_element1(const A&,
  // ProcessContext&, Collector<Out>&) and process_element2(const B&, ...).
  template <typename F>
  auto process(F f) const {
    using Out = internal::FunctionOutput<F, internal::ProcessElement1Member>;
    static_assert(
        requires(F & g, const A& a, const B& b, ProcessContext& ctx, Collector<Out>& c) {
          g.process_element1(a, ctx, c);
          g.process_element2(b, ctx, c);
        },
        "tidemark: connect(...).process(f) needs a CoProcessFunction<A, B, Out>: "
        "process_element1(const A&, ProcessContext&, Collector<Out>&) and process_element2");
    return internal::AddTwoInputNode<Out>(
        first_, second_, "Co-Process",
        [f] {
          return std::unique_ptr<OperatorBase>(
              std::make_unique<internal::CoProcessOperator<A, B, Out, F>>(f));
        },
        keyed_);
  }
  // Keys both inputs: ka(const A&) and kb(const B&) return the same key type.
  template <typename KA, typename KB>
  auto key_by(KA ka, KB kb) const;

 protected:
  DataStream<A> first_;
  DataStream<B> second_;
  bool keyed_ = false;
};

// Two keyed streams connected: ConnectedStreams' functions, and process with
// a KeyedCoProcessFunction (keyed state and timers).
template <typename A, typename B, typename KA, typename KB>
class KeyedConnectedStreams : public ConnectedStreams<A, B> {
 public:
  using Key = std::decay_t<std::invoke_result_t<KA&, const A&>>;
  static_assert(std::is_same_v<Key, std::decay_t<std::invoke_result_t<KB&, const B&>>>,
                "tidemark: both inputs of a keyed connect must be keyed by the same key type");

  KeyedConnectedStreams(const KeyedStream<A, KA>& a, const KeyedStream<B, KB>& b)
      : ConnectedStreams<A, B>(a.stream(), b.stream()),
        ka_(a.key_selector()),
        kb_(b.key_selector()) {
    this->keyed_ = true;
  }

  // A KeyedCoProcessFunction<K, A, B, Out>-like object:
  // process_element1(const A&, KeyedProcessContext<K>&, Collector<Out>&),
  // process_element2(const B&, ...), optionally on_timer(ts, ctx, out).
  template <typename F>
  auto process(F f) const {
    using K = Key;
    using Out = internal::FunctionOutput<F, internal::ProcessElement1Member>;
    static_assert(
        requires(F & g, const A& a, const B& b, KeyedProcessContext<K>& ctx, Collector<Out>& c) {
          g.process_element1(a, ctx, c);
          g.process_element2(b, ctx, c);
        },
        "tidemark: keyed connect(...).process(f) needs a KeyedCoProcessFunction<K, A, B, Out>: "
        "process_element1(const A&, KeyedProcessContext<K>&, Collector<Out>&) and "
        "process_element2");
    using Op = internal::KeyedCoProcessOperator<A, B, K, KA, KB, F, Out>;
    KA a = ka_;
    KB b = kb_;
    return internal::AddTwoInputNode<Out>(
        this->first_, this->second_, "Keyed Co-Process",
        [a, b, f]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Op>(a, b, f); },
        /*keyed=*/true);
  }

 private:
  KA ka_;
  KB kb_;
};

template <typename A, typename B>
template <typename KA, typename KB>
auto ConnectedStreams<A, B>::key_by(KA ka, KB kb) const {
  return KeyedConnectedStreams<A, B, KA, KB>(first_.key_by(std::move(ka)),
                                             second_.key_by(std::move(kb)));
}

// A keyed stream connected to a broadcast stream (KeyedStream::connect(
// BroadcastStream)).
template <typename A, typename KA, typename B>
class BroadcastConnectedStream {
 public:
  using Key = typename KeyedStream<A, KA>::Key;
  BroadcastConnectedStream(KeyedStream<A, KA> keyed, BroadcastStream<B> broadcast)
      : keyed_(std::move(keyed)), broadcast_(std::move(broadcast)) {}

  // A KeyedBroadcastProcessFunction<K, A, B, Out>-like object:
  // process_element(const A&, ReadOnlyBroadcastContext<K>&, Collector<Out>&),
  // process_broadcast_element(const B&, BroadcastContext<K>&, Collector<Out>&),
  // optionally on_timer(ts, ReadOnlyBroadcastContext<K>&, Collector<Out>&).
  template <typename F>
  auto process(F f) const {
    using K = Key;
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    static_assert(
        requires(F & g, const A& a, const B& b, ReadOnlyBroadcastContext<K>& rctx,
                 BroadcastContext<K>& bctx, Collector<Out>& c) {
          g.process_element(a, rctx, c);
          g.process_broadcast_element(b, bctx, c);
        },
        "tidemark: connect(broadcast).process(f) needs a KeyedBroadcastProcessFunction<K, A, B, "
        "Out>: process_element(const A&, ReadOnlyContext&, Collector<Out>&) and "
        "process_broadcast_element(const B&, Context&, Collector<Out>&)");
    using Op = internal::KeyedBroadcastProcessOperator<A, B, K, KA, F, Out>;
    KA key = keyed_.key_selector();
    std::vector<std::string> names = broadcast_.state_names();
    return internal::AddTwoInputNode<Out>(
        keyed_.stream(), broadcast_.stream(), "Keyed Broadcast Process",
        [key, f, names]() -> std::unique_ptr<OperatorBase> {
          return std::make_unique<Op>(key, f, names);
        },
        /*keyed=*/true);
  }

 private:
  KeyedStream<A, KA> keyed_;
  BroadcastStream<B> broadcast_;
};

// A non-keyed stream connected to a broadcast stream (DataStream::connect(
// BroadcastStream)): BroadcastConnectedStream<A, void, B>.
template <typename A, typename B>
class BroadcastConnectedStream<A, void, B> {
 public:
  BroadcastConnectedStream(DataStream<A> first, BroadcastStream<B> broadcast)
      : first_(std::move(first)), broadcast_(std::move(broadcast)) {}

  // A BroadcastProcessFunction<A, B, Out>-like object (operators/co_process.h):
  // process_element(const A&, ReadOnlyBroadcastProcessContext&, Collector<Out>&)
  // and process_broadcast_element(const B&, BroadcastProcessContext&,
  // Collector<Out>&).  The first input keeps its partitioning (forward
  // where the parallelism is the same, else rebalance), as in Flink.
  template <typename F>
  auto process(F f) const {
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    static_assert(
        requires(F & g, const A& a, const B& b, ReadOnlyBroadcastProcessContext& rctx,
                 BroadcastProcessContext& bctx, Collector<Out>& c) {
          g.process_element(a, rctx, c);
          g.process_broadcast_element(b, bctx, c);
        },
        "tidemark: connect(broadcast).process(f) on a non-keyed stream needs a "
        "BroadcastProcessFunction<A, B, Out>: process_element(const A&, ReadOnlyContext&, "
        "Collector<Out>&) and process_broadcast_element(const B&, Context&, Collector<Out>&)");
    using Op = internal::BroadcastProcessOperator<A, B, Out, F>;
    std::vector<std::string> names = broadcast_.state_names();
    return internal::AddTwoInputNode<Out>(
        first_, broadcast_.stream(), "Broadcast Process",
        [f, names]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Op>(f, names); },
        /*keyed=*/false);
  }

 private:
  DataStream<A> first_;
  BroadcastStream<B> broadcast_;
};

// An interval join with its bounds (IntervalJoin::between).
template <typename L, typename KL, typename R, typename KR>
class IntervalJoined {
 public:
  IntervalJoined(KeyedStream<L, KL> left, KeyedStream<R, KR> right, Duration lower, Duration upper)
      : left_(std::move(left)), right_(std::move(right)) {
    bounds_.lower = lower.count();
    bounds_.upper = upper.count();
  }
  // The bound itself does not join (l + lower < r; r < l + upper).
  IntervalJoined lower_bound_exclusive() const {
    IntervalJoined j = *this;
    j.bounds_.lower_inclusive = false;
    return j;
  }
  IntervalJoined upper_bound_exclusive() const {
    IntervalJoined j = *this;
    j.bounds_.upper_inclusive = false;
    return j;
  }
  // Late records of each side go to `tag` (else they are dropped and
  // counted in "numLateRecordsDropped").
  IntervalJoined side_output_left_late_data(const OutputTag<L>& tag) const {
    IntervalJoined j = *this;
    j.left_late_ = tag.id();
    return j;
  }
  IntervalJoined side_output_right_late_data(const OutputTag<R>& tag) const {
    IntervalJoined j = *this;
    j.right_late_ = tag.id();
    return j;
  }
  // f: a ProcessJoinFunction<L, R, Out>, a function (const L&, const R&,
  // ProcessJoinContext&, Collector<Out>&) or (const L&, const R&,
  // Collector<Out>&); Out from OutputType or the Collector parameter.
  template <typename F>
  auto process(F f) const {
    constexpr bool ok = internal::JoinFunctionOk<F, L, R>();
    static_assert(ok,
                  "tidemark: interval_join(...).process(f) needs f(const L&, const R&, "
                  "ProcessJoinContext&, Collector<Out>&) or f(const L&, const R&, "
                  "Collector<Out>&), or a ProcessJoinFunction<L, R, Out>");
    if constexpr (ok) {
      return Build(std::move(f));
    }
  }

 private:
  template <typename F>
  auto Build(F f) const {
    using K = typename KeyedStream<L, KL>::Key;
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    using Op = internal::IntervalJoinOperator<L, R, K, KL, KR, F, Out>;
    auto b = bounds_;
    if (b.lower > b.upper)
      throw std::invalid_argument("interval_join: the lower bound is above the upper bound");
    if ((!b.lower_inclusive && b.lower == kMaxTimestamp) ||
        (!b.upper_inclusive && b.upper == kMinTimestamp))
      throw std::invalid_argument(
          "interval_join: an exclusive bound at the end of the time range (lower MAX or upper "
          "MIN) has no representable inclusive bound");
    if (!b.lower_inclusive) ++b.lower;
    if (!b.upper_inclusive) --b.upper;
    // (Exclusive bounds may leave an empty interval: nothing joins, as in
    // Flink, which checks the bounds as given.)
    b.lower_inclusive = b.upper_inclusive = true;
    KL kl = left_.key_selector();
    KR kr = right_.key_selector();
    std::string ll = left_late_, rl = right_late_;
    if (!ll.empty() && ll == rl && !std::is_same_v<L, R>)
      throw std::invalid_argument(
          "interval_join: the late side outputs of the two sides have "
          "one id ('" +
          ll +
          "') and two types; side output ids must "
          "be unique");
    DataStream<Out> out = internal::AddTwoInputNode<Out>(
        left_.stream(), right_.stream(), "Interval Join",
        [kl, kr, f, b, ll, rl]() -> std::unique_ptr<OperatorBase> {
          return std::make_unique<Op>(kl, kr, f, b, ll, rl);
        },
        /*keyed=*/true);
    // Their types, so that get_side_output with another is refused now.
    auto& sides = internal::StreamAccess::Node(out).side_outs;
    if (!ll.empty()) sides.emplace(ll, internal::NodeOpsOf<L>());
    if (!rl.empty()) sides.emplace(rl, internal::NodeOpsOf<R>());
    return out;
  }

  KeyedStream<L, KL> left_;
  KeyedStream<R, KR> right_;
  internal::IntervalJoinBounds bounds_;
  std::string left_late_;
  std::string right_late_;
};

// left.key_by(..).interval_join(right.key_by(..)): call between().
template <typename L, typename KL, typename R, typename KR>
class IntervalJoin {
 public:
  IntervalJoin(KeyedStream<L, KL> left, KeyedStream<R, KR> right)
      : left_(std::move(left)), right_(std::move(right)) {
    static_assert(
        std::is_same_v<typename KeyedStream<L, KL>::Key, typename KeyedStream<R, KR>::Key>,
        "tidemark: both inputs of an interval join must be keyed by the same key type");
  }
  // Joins r with l when l + lower <= r.ts <= l + upper (lower <= upper, else
  // std::invalid_argument).
  IntervalJoined<L, KL, R, KR> between(Duration lower, Duration upper) const {
    if (lower > upper)
      throw std::invalid_argument("interval_join: between(lower, upper) needs lower <= upper");
    return IntervalJoined<L, KL, R, KR>(left_, right_, lower, upper);
  }

 private:
  KeyedStream<L, KL> left_;
  KeyedStream<R, KR> right_;
};

// --- the members of DataStream and KeyedStream declared in environment.h ---

template <typename T>
template <typename U>
auto DataStream<T>::connect(const DataStream<U>& other) const {
  return ConnectedStreams<T, U>(*this, other);
}

template <typename T>
template <typename U>
auto DataStream<T>::connect(const BroadcastStream<U>& other) const {
  return BroadcastConnectedStream<T, void, U>(*this, other);
}

template <typename T>
template <typename UK, typename UV, typename... More>
auto DataStream<T>::broadcast(const MapStateDescriptor<UK, UV>& state, const More&... more) const {
  return BroadcastStream<T>(broadcast(), std::vector<std::string>{state.name, more.name...});
}

template <typename T, typename KeyFn>
template <typename U, typename KeyFn2>
auto KeyedStream<T, KeyFn>::connect(const KeyedStream<U, KeyFn2>& other) const {
  return KeyedConnectedStreams<T, U, KeyFn, KeyFn2>(*this, other);
}

template <typename T, typename KeyFn>
template <typename U>
auto KeyedStream<T, KeyFn>::connect(const BroadcastStream<U>& other) const {
  return BroadcastConnectedStream<T, KeyFn, U>(*this, other);
}

template <typename T, typename KeyFn>
template <typename U, typename KeyFn2>
auto KeyedStream<T, KeyFn>::interval_join(const KeyedStream<U, KeyFn2>& other) const {
  return IntervalJoin<T, KeyFn, U, KeyFn2>(*this, other);
}

}  // namespace tidemark

#endif  // TM_API_CONNECTED_STREAMS_H_
