#include "runtime/metrics.h"

namespace tidemark {

internal::Counter* SubtaskMetrics::GetCounter(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = counters_[name];
  if (!c) c = std::make_unique<internal::Counter>();
  return c.get();
}

std::map<std::string, int64_t> SubtaskMetrics::CounterValues() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : counters_) out[k] = v->Get();
  return out;
}

}  // namespace tidemark
