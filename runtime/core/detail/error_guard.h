// runtime/core/detail/error_guard.h
//
// One place that turns whatever user code throws into an OperatorError naming
// the operator and subtask, so that a job fails with a message that says
// where, never with std::terminate.
//
//   GuardUserCall(ctx, [&] { fn(value); });
//
// - OperatorError (already named) and TaskCancelled (cancellation unwinding a
//   chain, below) pass through unchanged;
// - a std::runtime_error becomes "operator 'X' (subtask i of n) failed: what"
//   (its type adds nothing to its message);
// - any other std::exception adds its demangled type: "...: std::out_of_range:
//   what";
// - anything else (`throw 42;`) is named by its demangled type: "...: exception
//   of type int (not derived from std::exception)".
#ifndef TM_RUNTIME_ERROR_GUARD_H_
#define TM_RUNTIME_ERROR_GUARD_H_

#include <string>
#include <utility>

#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// TaskCancelled: runtime/operator.h.

// A typeid name as C++ spells the type ("long", "std::__cxx11::basic_string<...>"),
// or the name itself where it does not demangle.
std::string DemangledTypeName(const char* mangled);

// What the exception being handled is, for an error message.  Call only inside
// a catch block.
std::string DescribeCurrentException();

// Call only inside a catch block: rethrows the exception being handled, as
// it is when it is an OperatorError or TaskCancelled, else as an
// OperatorError for `name` (subtask `subtask` of `parallelism`).
[[noreturn]] void RethrowAsOperatorError(const std::string& name, int subtask, int parallelism);
[[noreturn]] void RethrowAsOperatorError(const OperatorContext& ctx);

// Runs f(); an exception from it becomes an OperatorError for `name`
// (subtask `subtask` of `parallelism`).
template <typename F>
decltype(auto) GuardUserCall(const std::string& name, int subtask, int parallelism, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    RethrowAsOperatorError(name, subtask, parallelism);
  }
}

template <typename F>
decltype(auto) GuardUserCall(const OperatorContext& ctx, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (...) {
    RethrowAsOperatorError(ctx);
  }
}

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_ERROR_GUARD_H_
