#include "tidemark/runtime/core/clock.h"

#include <utility>

namespace tidemark {

int64_t ManualClock::AddJumpListener(std::function<void()> f) const {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.emplace(next_id_, std::move(f));
  return next_id_++;
}

void ManualClock::RemoveJumpListener(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.erase(id);
}

void ManualClock::Jumped() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, f] : listeners_) f();
}

}  // namespace tidemark
