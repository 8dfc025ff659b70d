#include "tidemark/runtime/io/watermark_combiner.h"

#include <algorithm>
#include <limits>

namespace tidemark {
namespace {

int64_t Identity(WatermarkCombinationFunction f) {
  switch (f) {
    case WatermarkCombinationFunction::kMin:
      return std::numeric_limits<int64_t>::max();
    case WatermarkCombinationFunction::kMax:
      return std::numeric_limits<int64_t>::min();
    case WatermarkCombinationFunction::kAnd:
      return 1;
    case WatermarkCombinationFunction::kOr:
      return 0;
  }
  return 0;
}

int64_t Apply(WatermarkCombinationFunction f, int64_t a, int64_t b) {
  switch (f) {
    case WatermarkCombinationFunction::kMin:
      return std::min(a, b);
    case WatermarkCombinationFunction::kMax:
      return std::max(a, b);
    case WatermarkCombinationFunction::kAnd:
      return (a != 0 && b != 0) ? 1 : 0;
    case WatermarkCombinationFunction::kOr:
      return (a != 0 || b != 0) ? 1 : 0;
  }
  return a;
}

}  // namespace

WatermarkCombiner::WatermarkCombiner(const internal::WatermarkSpec* spec, int num_channels)
    : spec_(spec),
      values_(static_cast<size_t>(num_channels), Identity(spec->function)),
      reported_(static_cast<size_t>(num_channels)),
      idle_(static_cast<size_t>(num_channels)) {}

std::optional<int64_t> WatermarkCombiner::Input(int c, int64_t value) {
  const auto k = static_cast<size_t>(c);
  values_[k] = spec_->type == WatermarkValueType::kBool ? (value != 0 ? 1 : 0) : value;
  reported_[k] = true;
  any_reported_ = true;
  return Combine();
}

std::optional<int64_t> WatermarkCombiner::SetIdle(int c, bool idle, bool combine) {
  const auto k = static_cast<size_t>(c);
  if (idle_[k] == idle) return std::nullopt;
  idle_[k] = idle;
  if (!combine || !spec_->ignore_idle_channels || !any_reported_) return std::nullopt;
  return Combine();
}

std::optional<int64_t> WatermarkCombiner::Combine() {
  const bool all_idle = std::all_of(idle_.begin(), idle_.end(), [](bool b) { return b; });
  const bool skip_idle = spec_->ignore_idle_channels && !all_idle;
  int64_t combined = Identity(spec_->function);
  bool any = false;
  for (size_t k = 0; k < values_.size(); ++k) {
    if (skip_idle && idle_[k]) continue;
    if (spec_->wait_for_all_channels && !reported_[k]) return std::nullopt;
    combined = Apply(spec_->function, combined, values_[k]);
    any = any || reported_[k];
  }
  // Only idle channels have reported (and they are left out): nothing yet.
  if (!any) return std::nullopt;
  if (emitted_ && combined == last_) return std::nullopt;
  emitted_ = true;
  last_ = combined;
  return combined;
}

}  // namespace tidemark
