// api/keyed_process.h
//
// KeyedStream::process(f): builds a KeyedProcessOperator
// (operators/keyed_process.h) for a keyed stream.
#ifndef TM_API_KEYED_PROCESS_H_
#define TM_API_KEYED_PROCESS_H_

#include <memory>

#include "tidemark/api/environment.h"
#include "tidemark/operators/keyed_process.h"

namespace tidemark {

// KeyedStream::process, declared in api/environment.h.
template <typename T, typename KeyFn>
template <typename Function>
auto KeyedStream<T, KeyFn>::process(Function f) const {
  using Out = internal::FunctionOutput<Function, internal::ProcessElementMember>;
  using Op = internal::KeyedProcessOperator<T, Key, KeyFn, Function, Out>;
  KeyFn key = key_;
  return transform<Out>("KeyedProcess", [key, f]() -> std::unique_ptr<OperatorBase> {
    return std::make_unique<Op>(key, f);
  });
}

}  // namespace tidemark

#endif  // TM_API_KEYED_PROCESS_H_
