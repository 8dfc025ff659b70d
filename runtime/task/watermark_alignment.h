// runtime/task/watermark_alignment.h
//
// Watermark alignment (Flink's FLIP-182, WatermarkStrategy.withWatermark-
// Alignment(group, maxAllowedDrift, updateInterval)): source subtasks of one
// alignment group report their watermarks to a coordinator, and a subtask
// whose watermark is ahead of the group's minimum by more than the allowed
// drift stops reading until the group catches up.  Alignment only throttles
// reading; it never changes a watermark or a result.
//
// The rules (docs/semantics.md, "Watermark alignment"; the specification's
// section 9):
//   * every update interval, on its own processing-time clock, a source
//     subtask reports its latest watermark (which never decreases): MAX
//     while it is idle or once it has finished, nothing while it has none
//     (MIN); the latest report of a subtask replaces its previous one;
//   * the coordinator takes the minimum of the latest reports of the group's
//     subtasks (a subtask that never reported does not count) and announces
//     max_allowed = minimum + drift to every subtask of the group that has
//     reported (MAX on overflow, e.g. when every subtask is idle): as in
//     Flink's SourceCoordinator, which announces to the subtasks of its
//     combined watermark, one that never reported reads unlimited until it
//     has;
//   * a subtask pauses while its latest watermark is above the last
//     max_allowed it was told (strictly), and resumes when an announcement
//     lets it (max_allowed starts at MAX: nothing pauses before the first);
//   * while paused, the subtask's idleness clock stands still (the input
//     activity clock, runtime/core/clock.h), so a paused source is not marked idle
//     for not reading; it keeps reporting, so a group of one, or a group
//     whose slowest member is paused too, never deadlocks: its next report
//     raises the limit.
// tidemark announces after every report instead of on a timer of the
// coordinator's own (Flink's SourceCoordinator announces every update
// interval): the limit is never staler than one report, as in Flink.
//
// Across MPI ranks a group is job-wide, as Flink's (one SourceCoordinator per
// source): each rank's coordinator holds its own members, publishes their
// minimum to the other ranks whenever a report changes it (SetPublisher: the
// MPI exchange sends it), and counts the latest minimum each other rank
// published (RemoteReport) as one more member of the group.  A rank whose
// members have not reported yet publishes nothing, so it does not count, as a
// subtask that never reported does not (docs/distribution.md).
//
// Thread safety: SourceAlignment's task-side calls come from the source
// task's thread; Announce and the coordinator from any thread.
#ifndef TM_RUNTIME_WATERMARK_ALIGNMENT_H_
#define TM_RUNTIME_WATERMARK_ALIGNMENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

class Task;  // runtime/core/detail/task.h
// The subtask counter of pauses.
inline constexpr char kAlignmentPauses[] = "alignmentPauses";
// And of the milliseconds spent paused.
inline constexpr char kAlignmentPausedMs[] = "alignmentPausedMs";
class AlignmentCoordinator;

// The alignment side of one source task: told its watermark by the chain's
// watermark operator, asked by the source driver whether to read.
class SourceAlignment {
 public:
  SourceAlignment(AlignmentCoordinator* coordinator, Task* task, PausableRelativeClock* activity,
                  SubtaskMetrics* metrics, WatermarkListener* listener);
  SourceAlignment(const SourceAlignment&) = delete;
  SourceAlignment& operator=(const SourceAlignment&) = delete;

  // --- the watermark operator (task thread) ---
  // Joins `group` with `max_drift`; once.
  void Join(const std::string& group, Timestamp max_drift);
  bool joined() const { return joined_; }
  // The watermark the chain just emitted (kMaxWatermark at the end).
  void OnWatermark(Timestamp w) { latest_ = std::max(latest_, w); }
  // The periodic report: `idle_or_finished` reports MAX.
  void Report(bool idle_or_finished);

  // --- the source driver (task thread) ---
  // True while the subtask must not read; pauses and resumes the idleness
  // clock and reports each change (metrics, listener).
  bool ShouldPause();
  bool paused() const { return paused_; }

  // --- the coordinator (any thread) ---
  void Announce(Timestamp max_allowed);
  Timestamp max_allowed() const { return max_allowed_.load(std::memory_order_acquire); }
  Timestamp latest() const { return latest_; }
  const std::string& group() const { return group_; }
  Timestamp max_drift() const { return max_drift_; }

 private:
  AlignmentCoordinator* coordinator_;
  Task* task_;
  PausableRelativeClock* activity_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  std::string group_;
  Timestamp max_drift_ = kMaxTimestamp;
  bool joined_ = false;
  Timestamp latest_ = kMinTimestamp;  // task thread
  bool paused_ = false;               // task thread
  Timestamp paused_at_ = 0;           // task thread: the clock when it paused
  std::atomic<Timestamp> max_allowed_{kMaxTimestamp};
};

// The job's alignment groups.  Thread-safe.
class AlignmentCoordinator {
 public:
  void Add(SourceAlignment* s);
  // `s` reports `w`, replacing its previous report.
  void Report(SourceAlignment* s, Timestamp w);
  // Across ranks: `publish(group, minimum)` is called, under the
  // coordinator's lock and so in report order, whenever a report changes the
  // minimum over this rank's members of `group`.  Set before the job starts
  // (or null to stop publishing).
  using Publisher = std::function<void(const std::string& group, Timestamp minimum)>;
  void SetPublisher(Publisher publish);
  // Rank `rank` published `minimum` for `group` (replacing what it published
  // before); the group's members on this rank are told the new limit.
  void RemoteReport(int rank, const std::string& group, Timestamp minimum);
  // The group's state (for tests).
  struct GroupState {
    Timestamp minimum = kMaxTimestamp;  // over the members and ranks that reported
    int reported = 0;                   // members of this rank that reported
    int remote_ranks = 0;               // other ranks that published a minimum
  };
  GroupState Group(const std::string& name) const;

 private:
  struct Member {
    SourceAlignment* source;
    bool reported = false;
    Timestamp watermark = kMinTimestamp;
  };
  struct GroupData {
    std::vector<Member> members;
    std::map<int, Timestamp> remote;  // rank -> the minimum it published last
    bool published = false;
    Timestamp published_minimum = kMinTimestamp;
  };
  // Tells every member of `g` its limit from the minimum over the members
  // that reported and the other ranks' minima.
  static void AnnounceLocked(const GroupData& g);
  mutable Mutex mu_;
  std::map<std::string, GroupData> groups_ ABSL_GUARDED_BY(mu_);
  Publisher publish_ ABSL_GUARDED_BY(mu_);
};

// max_allowed = minimum + drift, MAX on overflow (Math.addExact failing).
inline Timestamp AlignmentLimit(Timestamp minimum, Timestamp drift) {
  Timestamp r;
  if (__builtin_add_overflow(minimum, drift, &r)) return kMaxTimestamp;
  return r;
}

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_WATERMARK_ALIGNMENT_H_
