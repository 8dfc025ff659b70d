#include "tidemark/runtime/task/watermark_alignment.h"

#include <algorithm>

#include "tidemark/runtime/core/detail/task.h"

namespace tidemark::internal {

SourceAlignment::SourceAlignment(AlignmentCoordinator* coordinator, Task* task,
                                 PausableRelativeClock* activity, SubtaskMetrics* metrics,
                                 WatermarkListener* listener)
    : coordinator_(coordinator),
      task_(task),
      activity_(activity),
      metrics_(metrics),
      listener_(listener) {}

void SourceAlignment::Join(const std::string& group, Timestamp max_drift) {
  if (joined_ || coordinator_ == nullptr) return;
  group_ = group;
  max_drift_ = max_drift;
  joined_ = true;
  coordinator_->Add(this);
}

void SourceAlignment::Report(bool idle_or_finished) {
  if (!joined_) return;
  const Timestamp w = idle_or_finished ? kMaxWatermark : latest_;
  if (w == kMinTimestamp) return;  // no watermark yet: nothing to report
  // As Flink's SourceOperator#emitLatestWatermark: MAX while idle, the
  // latest watermark (which never decreases) again once active.
  coordinator_->Report(this, w);
}

bool SourceAlignment::ShouldPause() {
  if (!joined_) return false;
  const Timestamp limit = max_allowed_.load(std::memory_order_acquire);
  const bool pause = latest_ != kMaxWatermark && latest_ > limit;
  if (pause != paused_) {
    paused_ = pause;
    const Timestamp now = activity_->base()->NowMillis();
    if (pause) {
      activity_->Pause();
      metrics_->GetCounter(kAlignmentPauses)->Inc();
      paused_at_ = now;
    } else {
      activity_->Resume();
      metrics_->GetCounter(kAlignmentPausedMs)->Inc(now - paused_at_);
    }
    if (listener_ != nullptr)
      listener_->OnSourceAlignment(metrics_->task_name(), metrics_->subtask(), pause, latest_,
                                   limit);
  }
  return pause;
}

void SourceAlignment::Announce(Timestamp max_allowed) {
  const Timestamp before = max_allowed_.exchange(max_allowed, std::memory_order_acq_rel);
  // A paused task waits for this: wake it when the limit rose.
  if (max_allowed > before && task_ != nullptr) task_->Notify();
}

void AlignmentCoordinator::Add(SourceAlignment* s) {
  MutexLock lock(&mu_);
  groups_[s->group()].members.push_back(Member{s});
}

void AlignmentCoordinator::SetPublisher(Publisher publish) {
  MutexLock lock(&mu_);
  publish_ = std::move(publish);
}

void AlignmentCoordinator::AnnounceLocked(const GroupData& g) {
  Timestamp minimum = kMaxTimestamp;
  for (const Member& m : g.members)
    if (m.reported) minimum = std::min(minimum, m.watermark);
  for (const auto& [rank, w] : g.remote) minimum = std::min(minimum, w);
  for (const Member& m : g.members)
    if (m.reported) m.source->Announce(AlignmentLimit(minimum, m.source->max_drift()));
}

void AlignmentCoordinator::Report(SourceAlignment* s, Timestamp w) {
  // Under the lock, announcements reach every member in report order (an
  // older limit never overwrites a newer one), and so do publications.
  MutexLock lock(&mu_);
  GroupData& g = groups_[s->group()];
  Timestamp local = kMaxTimestamp;
  for (Member& m : g.members) {
    if (m.source == s) {
      m.reported = true;
      m.watermark = w;  // the latest report replaces the previous one
    }
    if (m.reported) local = std::min(local, m.watermark);
  }
  if (publish_ && (!g.published || g.published_minimum != local)) {
    g.published = true;
    g.published_minimum = local;
    publish_(s->group(), local);
  }
  AnnounceLocked(g);
}

void AlignmentCoordinator::RemoteReport(int rank, const std::string& group, Timestamp minimum) {
  MutexLock lock(&mu_);
  GroupData& g = groups_[group];
  g.remote[rank] = minimum;
  AnnounceLocked(g);
}

AlignmentCoordinator::GroupState AlignmentCoordinator::Group(const std::string& name) const {
  MutexLock lock(&mu_);
  GroupState state;
  auto it = groups_.find(name);
  if (it == groups_.end()) return state;
  for (const Member& m : it->second.members) {
    if (!m.reported) continue;
    ++state.reported;
    state.minimum = std::min(state.minimum, m.watermark);
  }
  for (const auto& [rank, w] : it->second.remote) {
    ++state.remote_ranks;
    state.minimum = std::min(state.minimum, w);
  }
  return state;
}

}  // namespace tidemark::internal
