// api/keyed_process.h
//
// KeyedStream::process(f): builds a KeyedProcessOperator
// (operators/keyed_process.h) for a keyed stream.
#ifndef TM_API_KEYED_PROCESS_H_
#define TM_API_KEYED_PROCESS_H_

#include <memory>
#include <type_traits>

#include "tidemark/api/environment.h"
#include "tidemark/operators/keyed_process.h"
#include "tidemark/operators/top_n.h"

namespace tidemark {

// KeyedStream::process, declared in api/environment.h.
template <typename T, typename KeyFn>
template <typename Function>
auto KeyedStream<T, KeyFn>::process(Function f) const {
  if constexpr (requires {
                  typename Function::KeyType;
                  typename Function::InputType;
                }) {
    static_assert(std::is_same_v<typename Function::KeyType, Key>,
                  "tidemark: the KeyedProcessFunction<K, In, Out>'s K must be the key type that "
                  "the key_by selector returns");
    static_assert(std::is_same_v<typename Function::InputType, T>,
                  "tidemark: the KeyedProcessFunction<K, In, Out>'s In must be the stream's record "
                  "type");
  }
  static_assert(
      requires { &Function::process_element; },
      "tidemark: a keyed stream's process(f) takes a KeyedProcessFunction<K, In, Out> "
      "(or an object with process_element(const In&, KeyedProcessContext<K>&, "
      "Collector<Out>&)); a lambda is not taken");
  using Out = internal::FunctionOutput<Function, internal::ProcessElementMember>;
  using Op = internal::KeyedProcessOperator<T, Key, KeyFn, Function, Out>;
  KeyFn key = key_;
  return transform<Out>("KeyedProcess", [key, f]() -> std::unique_ptr<OperatorBase> {
    return std::make_unique<Op>(key, f);
  });
}

template <typename T>
template <typename KeyFn>
auto DataStream<T>::reinterpret_as_keyed_stream(KeyFn key) const {
  static_assert(std::is_invocable_v<KeyFn&, const T&>,
                "tidemark: reinterpret_as_keyed_stream(f) needs a key selector f(const T&) -> K, T "
                "the stream's record type");
  using K = std::decay_t<std::invoke_result_t<KeyFn&, const T&>>;
  static_assert(!internal::IsNonOwningKey<K>::value,
                "tidemark: reinterpret_as_keyed_stream's key must own its data (return "
                "std::string(...) instead of a view)");
  using Check = internal::KeyGroupCheckOperator<T, KeyFn>;
  DataStream<T> checked =
      Add<T>("ReinterpretAsKeyedStream",
             [key]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Check>(key); });
  // Checked against the key groups of the keyed operator after it.
  env_->node(checked.id()).max_parallelism_of_consumer = true;
  return KeyedStream<T, KeyFn>(checked.forward(), std::move(key));
}

template <typename T, typename KeyFn>
template <typename Less>
auto KeyedStream<T, KeyFn>::top_n(size_t n, Less less) const {
  using F = internal::TopNFunction<Key, T, Less>;
  F f(n, std::move(less));
  using Op = internal::KeyedProcessOperator<T, Key, KeyFn, F, Changelog<T>>;
  KeyFn key = key_;
  return transform<Changelog<T>>(
      "TopN", [key, f]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Op>(key, f); });
}

template <typename T, typename KeyFn>
template <typename Less, typename R, typename C>
auto KeyedStream<T, KeyFn>::top_n(size_t n, Less less, R C::*rank) const {
  static_assert(std::is_same_v<C, T> && std::is_integral_v<R>,
                "tidemark: top_n(n, less, &T::rank) needs an integer field of the stream's record "
                "type T for the rank number");
  using F = internal::TopNRankedFunction<Key, T, Less, R>;
  F f(n, std::move(less), rank);
  using Op = internal::KeyedProcessOperator<T, Key, KeyFn, F, Changelog<T>>;
  KeyFn key = key_;
  return transform<Changelog<T>>(
      "TopN", [key, f]() -> std::unique_ptr<OperatorBase> { return std::make_unique<Op>(key, f); });
}

template <typename T, typename KeyFn>
template <typename Agg, typename Tie>
auto KeyedStream<T, KeyFn>::over_rows(size_t preceding, Agg agg, Tie tie) const {
  using F = internal::OverRowsFunction<Key, T, Agg, Tie>;
  using Out = typename F::OutputType;
  F f(preceding, std::move(agg), std::move(tie));
  using Op = internal::KeyedProcessOperator<T, Key, KeyFn, F, Out>;
  KeyFn key = key_;
  return transform<Out>("OverRows", [key, f]() -> std::unique_ptr<OperatorBase> {
    return std::make_unique<Op>(key, f);
  });
}

}  // namespace tidemark

#endif  // TM_API_KEYED_PROCESS_H_
