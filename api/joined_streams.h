// api/joined_streams.h
//
// Window join and window co-group of two streams (Flink's JoinedStreams and
// CoGroupedStreams):
//
//   #include <tidemark/tidemark.h>
//   DataStream<Out> joined = orders.join(payments)
//       .where([](const Order& o) { return o.id; })
//       .equal_to([](const Payment& p) { return p.order_id; })
//       .window(TumblingEventTimeWindows::of(5s))   // or sliding, session windows
//       .apply([](const Order& o, const Payment& p) { return Out{o, p}; });
//
//   .apply(f)        f(const A&, const B&) -> Out        (Flink's JoinFunction)
//                    f(const A&, const B&, Collector<Out>&)   (FlatJoinFunction)
//   co_group(other)...window(assigner).apply(f)
//                    f(const std::vector<A>&, const std::vector<B>&, Collector<Out>&)
// Out is deduced from the result or from the Collector<Out>& parameter of a
// non-generic lambda; otherwise give it: .apply<Out>(f).  Optional, after
// window(): .trigger(t), .evictor(e), .allowed_lateness(d) (as on a
// WindowedStream, api/windowed_stream.h).
//
// As Flink does (CoGroupedStreams.WithWindow#apply): each input is mapped to
// the tagged union TaggedUnion<A, B> = std::variant<A, B> (index 0: this
// stream, 1: the other; the mappers run at their input's parallelism), the
// two are unioned, keyed by the key of either side (the two key selectors must
// return the same type), and windowed with the general window operator, whose
// function sees the window's elements in arrival order:
//   - co-group: f(the window's A's, the window's B's) for every window and key
//     that has elements (one side may be empty);
//   - join (Flink's JoinCoGroupFunction): f(a, b) for every a in arrival order
//     times every b in arrival order; a window with one side only emits
//     nothing.
// Outputs are timestamped with the window's max_timestamp().  The watermark
// of the window operator is the minimum over every channel of both inputs;
// records later than the allowed lateness are dropped and counted in the
// subtask counter "numLateRecordsDropped", as in Flink (which has no late side
// output for joins).  Checkpoints work when A, B and the key have a
// tidemark::StateCodec (std::variant has one).  With merging (session)
// windows the order of elements in a merged window is that of the window
// contents' merge (docs/semantics.md), as in Flink's heap state.
#ifndef TM_API_JOINED_STREAMS_H_
#define TM_API_JOINED_STREAMS_H_

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tidemark/api/environment.h"
#include "tidemark/api/windowed_stream.h"

namespace tidemark {

// One record of either input of a join (Flink's TaggedUnion): index 0 holds
// the first input's record, index 1 the second's (std::in_place_index, so
// A and B may be the same type).
template <typename A, typename B>
using TaggedUnion = std::variant<A, B>;

namespace internal {
struct JoinKind {};
struct CoGroupKind {};

// The Out of a Collector<Out>& type, else void.
template <typename T>
struct CollectorOutOr {
  using type = void;
};
template <typename O>
struct CollectorOutOr<Collector<O>&> {
  using type = O;
};
// The Out of the Collector<Out>& parameter at position I of a non-generic
// callable F; void when it cannot be deduced (no error).
template <typename F, size_t I, typename = void>
struct CollectorParamOut {
  using type = void;
};
template <typename F, size_t I>
requires(requires { &F::operator(); } || std::is_pointer_v<F>) struct CollectorParamOut<F, I> {
  using Args = typename CallableArgs<F>::args;
  static constexpr bool kHas = I < std::tuple_size_v<Args>;
  using type = typename CollectorOutOr<
      std::tuple_element_t<kHas ? I : 0, std::conditional_t<kHas, Args, std::tuple<void*>>>>::type;
};

// The key of a tagged record: the key selector of its side (Flink's
// UnionKeySelector).
template <typename A, typename B, typename KA, typename KB>
struct UnionKeySelector {
  using Key = std::decay_t<std::invoke_result_t<KA&, const A&>>;
  mutable KA ka;
  mutable KB kb;
  Key operator()(const TaggedUnion<A, B>& v) const {
    if (v.index() == 0) return ka(std::get<0>(v));
    return kb(std::get<1>(v));
  }
};

// The window function of a join: splits the window's elements by side and
// calls f for every (left, right) pair, lefts outer, in arrival order
// (Flink's CoGroupWindowFunction around JoinCoGroupFunction).
template <typename A, typename B, typename F, typename Out, bool kFlat>
struct JoinWindowFunction {
  F f;
  std::vector<const A*> left;
  std::vector<const B*> right;

  template <typename K, typename W>
  void operator()(const K&, const W&, const std::vector<TaggedUnion<A, B>>& elements,
                  WindowContext&, Collector<Out>& out) {
    left.clear();
    right.clear();
    for (const auto& e : elements) {
      if (e.index() == 0) {
        left.push_back(&std::get<0>(e));
      } else {
        right.push_back(&std::get<1>(e));
      }
    }
    if (left.empty() || right.empty()) return;
    for (const A* l : left) {
      for (const B* r : right) {
        if constexpr (kFlat) {
          f(*l, *r, out);
        } else {
          out.collect(Out(f(*l, *r)));
        }
      }
    }
  }
};

// The window function of a co-group (Flink's CoGroupWindowFunction).
template <typename A, typename B, typename F, typename Out>
struct CoGroupWindowFunction {
  F f;
  std::vector<A> left;
  std::vector<B> right;

  template <typename K, typename W>
  void operator()(const K&, const W&, const std::vector<TaggedUnion<A, B>>& elements,
                  WindowContext&, Collector<Out>& out) {
    left.clear();
    right.clear();
    for (const auto& e : elements) {
      if (e.index() == 0) {
        left.push_back(std::get<0>(e));
      } else {
        right.push_back(std::get<1>(e));
      }
    }
    f(static_cast<const std::vector<A>&>(left), static_cast<const std::vector<B>&>(right), out);
    // Drop the copies now rather than keep the largest window's around.
    left.clear();
    right.clear();
  }
};
}  // namespace internal

// A join or co-group with its window (Flink's JoinedStreams.WithWindow /
// CoGroupedStreams.WithWindow).  A cheap value: each setter returns a new one.
template <typename Kind, typename A, typename B, typename KA, typename KB, typename Assigner,
          typename TriggerT = decltype(std::declval<const Assigner&>().default_trigger()),
          typename EvictorT = NoEvictor>
class TwoInputWindowedStream {
 public:
  using U = TaggedUnion<A, B>;
  using KeyFn = internal::UnionKeySelector<A, B, KA, KB>;
  using Key = typename KeyFn::Key;

  TwoInputWindowedStream(DataStream<A> a, DataStream<B> b, KA ka, KB kb, Assigner assigner)
      : a_(std::move(a)),
        b_(std::move(b)),
        ka_(std::move(ka)),
        kb_(std::move(kb)),
        assigner_(std::move(assigner)),
        trigger_(assigner_.default_trigger()) {}
  TwoInputWindowedStream(DataStream<A> a, DataStream<B> b, KA ka, KB kb, Assigner assigner,
                         TriggerT trigger, EvictorT evictor, Duration lateness)
      : a_(std::move(a)),
        b_(std::move(b)),
        ka_(std::move(ka)),
        kb_(std::move(kb)),
        assigner_(std::move(assigner)),
        trigger_(std::move(trigger)),
        evictor_(std::move(evictor)),
        lateness_(lateness) {}

  template <typename NewTrigger>
  TwoInputWindowedStream<Kind, A, B, KA, KB, Assigner, NewTrigger, EvictorT> trigger(
      NewTrigger t) const {
    if constexpr (Assigner::kIsMerging) {
      if (!t.can_merge())
        throw std::invalid_argument(
            "A merging window assigner cannot be used with a trigger that does not support "
            "merging.");
    }
    return {a_, b_, ka_, kb_, assigner_, std::move(t), evictor_, lateness_};
  }
  template <typename NewEvictor>
  TwoInputWindowedStream<Kind, A, B, KA, KB, Assigner, TriggerT, NewEvictor> evictor(
      NewEvictor e) const {
    return {a_, b_, ka_, kb_, assigner_, trigger_, std::move(e), lateness_};
  }
  TwoInputWindowedStream allowed_lateness(Duration lateness) const {
    if (ToMillis(lateness) < 0)
      throw std::invalid_argument("The allowed lateness cannot be negative.");
    return {a_, b_, ka_, kb_, assigner_, trigger_, evictor_, lateness};
  }

  // Join: f(const A&, const B&) -> Out, or f(const A&, const B&,
  // Collector<Out>&).  Co-group: f(const std::vector<A>&, const
  // std::vector<B>&, Collector<Out>&).
  template <typename Out = void, typename F>
  auto apply(F f) const {
    if constexpr (std::is_same_v<Kind, internal::JoinKind>) {
      if constexpr (std::is_invocable_v<F&, const A&, const B&>) {
        using R = std::decay_t<std::invoke_result_t<F&, const A&, const B&>>;
        using O = std::conditional_t<std::is_void_v<Out>, R, Out>;
        static_assert(!std::is_void_v<O>,
                      "tidemark: join apply(f): f(const A&, const B&) must return the joined "
                      "record, or take a third parameter Collector<Out>&");
        if constexpr (!std::is_void_v<O>)
          return Build<O>("Window Join", internal::JoinWindowFunction<A, B, F, O, false>{f});
      } else {
        using O = std::conditional_t<std::is_void_v<Out>,
                                     typename internal::CollectorParamOut<F, 2>::type, Out>;
        constexpr bool kOk =
            !std::is_void_v<O> &&
            std::is_invocable_v<F&, const A&, const B&,
                                Collector<std::conditional_t<std::is_void_v<O>, int, O>>&>;
        static_assert(kOk,
                      "tidemark: join apply(f) takes f(const A&, const B&) -> Out or f(const A&, "
                      "const B&, Collector<Out>&) (a generic lambda needs apply<Out>(f))");
        if constexpr (kOk)
          return Build<O>("Window Join", internal::JoinWindowFunction<A, B, F, O, true>{f});
      }
    } else {
      using O = std::conditional_t<std::is_void_v<Out>,
                                   typename internal::CollectorParamOut<F, 2>::type, Out>;
      constexpr bool kOk =
          !std::is_void_v<O> &&
          std::is_invocable_v<F&, const std::vector<A>&, const std::vector<B>&,
                              Collector<std::conditional_t<std::is_void_v<O>, int, O>>&>;
      static_assert(kOk,
                    "tidemark: co_group apply(f) takes f(const std::vector<A>&, const "
                    "std::vector<B>&, Collector<Out>&) (a generic lambda needs apply<Out>(f))");
      if constexpr (kOk)
        return Build<O>("Window CoGroup", internal::CoGroupWindowFunction<A, B, F, O>{f});
    }
  }

 private:
  // Flink's CoGroupedStreams.WithWindow#apply: tag, union, key, window.
  template <typename Out, typename Fn>
  DataStream<Out> Build(const char* name, Fn fn) const {
    DataStream<U> left = a_.map([](const A& v) { return U(std::in_place_index<0>, v); });
    DataStream<U> right = b_.map([](const B& v) { return U(std::in_place_index<1>, v); });
    // The taggers run at their input's parallelism (when it is set), as
    // Flink's do, so they chain to it.
    const int pa = internal::StreamAccess::Node(a_).parallelism;
    const int pb = internal::StreamAccess::Node(b_).parallelism;
    if (pa > 0) left.set_parallelism(pa);
    if (pb > 0) right.set_parallelism(pb);
    auto windowed = left.union_with(right)
                        .key_by(KeyFn{ka_, kb_})
                        .window(assigner_)
                        .trigger(trigger_)
                        .evictor(evictor_)
                        .allowed_lateness(lateness_);
    return windowed.template process<Out>(std::move(fn)).name(name);
  }

  DataStream<A> a_;
  DataStream<B> b_;
  KA ka_;
  KB kb_;
  Assigner assigner_;
  TriggerT trigger_;
  EvictorT evictor_{};
  Duration lateness_{0};
};

// The two inputs and both keys (Flink's JoinedStreams.Where.EqualTo).
template <typename Kind, typename A, typename B, typename KA, typename KB>
class TwoInputEqualTo {
 public:
  TwoInputEqualTo(DataStream<A> a, DataStream<B> b, KA ka, KB kb)
      : a_(std::move(a)), b_(std::move(b)), ka_(std::move(ka)), kb_(std::move(kb)) {}
  template <typename Assigner>
  TwoInputWindowedStream<Kind, A, B, KA, KB, Assigner> window(Assigner assigner) const {
    return {a_, b_, ka_, kb_, std::move(assigner)};
  }

 private:
  DataStream<A> a_;
  DataStream<B> b_;
  KA ka_;
  KB kb_;
};

// The two inputs and the first key (Flink's JoinedStreams.Where).
template <typename Kind, typename A, typename B, typename KA>
class TwoInputWhere {
 public:
  TwoInputWhere(DataStream<A> a, DataStream<B> b, KA ka)
      : a_(std::move(a)), b_(std::move(b)), ka_(std::move(ka)) {}
  template <typename KB>
  TwoInputEqualTo<Kind, A, B, KA, KB> equal_to(KB kb) const {
    static_assert(std::is_invocable_v<KB&, const B&>,
                  "tidemark: equal_to(key) takes a key selector of the second input: "
                  "key(const B&) -> K");
    if constexpr (std::is_invocable_v<KB&, const B&>) {
      static_assert(std::is_same_v<std::decay_t<std::invoke_result_t<KA&, const A&>>,
                                   std::decay_t<std::invoke_result_t<KB&, const B&>>>,
                    "tidemark: the where() and equal_to() key selectors must return the same "
                    "key type");
    }
    return {a_, b_, ka_, std::move(kb)};
  }

 private:
  DataStream<A> a_;
  DataStream<B> b_;
  KA ka_;
};

// a.join(b) / a.co_group(b) (Flink's JoinedStreams / CoGroupedStreams).
template <typename Kind, typename A, typename B>
class TwoInputStreams {
 public:
  TwoInputStreams(DataStream<A> a, DataStream<B> b) : a_(std::move(a)), b_(std::move(b)) {}
  template <typename KA>
  TwoInputWhere<Kind, A, B, KA> where(KA ka) const {
    static_assert(std::is_invocable_v<KA&, const A&>,
                  "tidemark: where(key) takes a key selector of the first input: "
                  "key(const A&) -> K");
    return {a_, b_, std::move(ka)};
  }

 private:
  DataStream<A> a_;
  DataStream<B> b_;
};

template <typename A, typename B>
using JoinedStreams = TwoInputStreams<internal::JoinKind, A, B>;
template <typename A, typename B>
using CoGroupedStreams = TwoInputStreams<internal::CoGroupKind, A, B>;

// DataStream::join and co_group, declared in api/environment.h.
template <typename T>
template <typename U>
auto DataStream<T>::join(const DataStream<U>& other) const {
  return JoinedStreams<T, U>(*this, other);
}
template <typename T>
template <typename U>
auto DataStream<T>::co_group(const DataStream<U>& other) const {
  return CoGroupedStreams<T, U>(*this, other);
}

}  // namespace tidemark

#endif  // TM_API_JOINED_STREAMS_H_
