#include "tidemark/runtime/core/generalized_watermark.h"

#include <deque>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/detail/mutex.h"

namespace tidemark {

const char* ToString(WatermarkCombinationFunction f) {
  switch (f) {
    case WatermarkCombinationFunction::kMin:
      return "min";
    case WatermarkCombinationFunction::kMax:
      return "max";
    case WatermarkCombinationFunction::kAnd:
      return "and";
    case WatermarkCombinationFunction::kOr:
      return "or";
  }
  return "?";
}

std::string GeneralizedWatermark::ToString() const {
  return absl::StrCat(identifier(), "=",
                      is_bool() ? (bool_value() ? "true" : "false") : absl::StrCat(long_value()));
}

namespace internal {
namespace {

// Append-only: a deque never moves its elements, so the pointers handed out
// stay valid.
struct Registry {
  Mutex mu;
  std::deque<WatermarkSpec> specs ABSL_GUARDED_BY(mu);
};

Registry& TheRegistry() {
  static Registry* r = new Registry;  // never destroyed: specs outlive every job
  return *r;
}

bool IsLongFunction(WatermarkCombinationFunction f) {
  return f == WatermarkCombinationFunction::kMin || f == WatermarkCombinationFunction::kMax;
}

}  // namespace

const WatermarkSpec* InternWatermarkSpec(const WatermarkSpec& s) {
  if (s.identifier.empty())
    throw std::invalid_argument("a watermark declaration needs an identifier");
  if (IsLongFunction(s.function) != (s.type == WatermarkValueType::kLong)) {
    throw std::invalid_argument(absl::StrCat(
        "watermark '", s.identifier, "': combination function ", ToString(s.function),
        " does not fit a ", s.type == WatermarkValueType::kLong ? "long" : "bool", " watermark"));
  }
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  for (const WatermarkSpec& have : r.specs)
    if (have.SamePolicy(s)) return &have;
  if (r.specs.size() >= 0xffff) throw std::invalid_argument("too many watermark declarations");
  WatermarkSpec& added = r.specs.emplace_back(s);
  added.id = static_cast<uint16_t>(r.specs.size());  // 0 is never an id
  return &added;
}

const WatermarkSpec* LookupWatermarkSpec(uint16_t id) {
  Registry& r = TheRegistry();
  MutexLock lock(&r.mu);
  if (id == 0 || id > r.specs.size()) return nullptr;
  return &r.specs[id - 1];
}

}  // namespace internal
}  // namespace tidemark
