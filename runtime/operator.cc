#include "runtime/operator.h"

#include "absl/strings/str_cat.h"

namespace tidemark {

OperatorError::OperatorError(const std::string& operator_name, int subtask, int parallelism,
                             const std::string& what)
    : std::runtime_error(absl::StrCat("operator '", operator_name, "' (subtask ", subtask, " of ",
                                      parallelism, ") failed: ", what)),
      operator_name_(operator_name),
      subtask_(subtask) {}

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

SubtaskMetricsSnapshot Snapshot(const SubtaskMetrics& m) {
  SubtaskMetricsSnapshot s;
  s.task_name = m.task_name();
  s.subtask = m.subtask();
  s.parallelism = m.parallelism();
  s.records_in = m.records_in.Get();
  s.records_out = m.records_out.Get();
  s.input_watermark = m.input_watermark.load(std::memory_order_relaxed);
  s.output_watermark = m.output_watermark.load(std::memory_order_relaxed);
  s.idle = m.idle.load(std::memory_order_relaxed);
  s.finished = m.finished.load(std::memory_order_relaxed);
  for (int i = 0; i < m.num_input_channels(); ++i) {
    s.channel_watermarks.push_back(m.channel(i).watermark.load(std::memory_order_relaxed));
    s.channel_idle.push_back(m.channel(i).idle.load(std::memory_order_relaxed));
  }
  s.counters = m.CounterValues();
  return s;
}

std::string FormatTimestamp(Timestamp ts) {
  if (ts == kMinTimestamp) return "MIN";
  if (ts == kMaxTimestamp) return "MAX";
  return absl::StrCat(ts);
}

}  // namespace tidemark
