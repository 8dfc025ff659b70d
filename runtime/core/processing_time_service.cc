// runtime/core/processing_time_service.cc
#include "tidemark/runtime/core/processing_time_service.h"

#include <utility>

namespace tidemark::internal {

int64_t ProcessingTimeService::RegisterTimer(Timestamp time, Callback cb) {
  const int64_t id = next_id_++;
  timers_.emplace(time, std::make_pair(id, std::move(cb)));
  by_id_[id] = time;
  return id;
}

void ProcessingTimeService::Cancel(int64_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  auto range = timers_.equal_range(it->second);
  for (auto t = range.first; t != range.second; ++t) {
    if (t->second.first == id) {
      timers_.erase(t);
      break;
    }
  }
  by_id_.erase(it);
}

Timestamp ProcessingTimeService::NextTimerTime() const {
  return timers_.empty() ? kMaxTimestamp : timers_.begin()->first;
}

Timestamp ProcessingTimeService::NextFiringTime() const {
  const Timestamp next = NextTimerTime();
  return next == kMaxTimestamp ? kMaxTimestamp : next + 1;
}

void ProcessingTimeService::FireDue(Timestamp now) {
  while (!timers_.empty() && IsDue(timers_.begin()->first, now)) {
    auto node = timers_.extract(timers_.begin());
    by_id_.erase(node.mapped().first);
    node.mapped().second(node.key());
  }
}

}  // namespace tidemark::internal
