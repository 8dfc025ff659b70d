#include "tidemark/runtime/core/detail/error_guard.h"

#include <cxxabi.h>

#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <typeinfo>

#include "absl/strings/str_cat.h"

namespace tidemark::internal {

std::string DemangledTypeName(const char* mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(mangled);
}

std::string DescribeCurrentException() {
  try {
    throw;
  } catch (const std::exception& e) {
    if (typeid(e) == typeid(std::runtime_error)) return e.what();
    return absl::StrCat(DemangledTypeName(typeid(e).name()), ": ", e.what());
  } catch (...) {
    const std::type_info* t = abi::__cxa_current_exception_type();
    return absl::StrCat("exception of type ",
                        t != nullptr ? DemangledTypeName(t->name()) : "unknown",
                        " (not derived from std::exception)");
  }
}

void RethrowAsOperatorError(const std::string& name, int subtask, int parallelism) {
  try {
    throw;
  } catch (const OperatorError&) {
    throw;
  } catch (const TaskCancelled&) {
    throw;
  } catch (...) {
    throw OperatorError(name, subtask, parallelism, DescribeCurrentException());
  }
}

void RethrowAsOperatorError(const OperatorContext& ctx) {
  RethrowAsOperatorError(ctx.operator_name(), ctx.subtask_index(), ctx.parallelism());
}

}  // namespace tidemark::internal
