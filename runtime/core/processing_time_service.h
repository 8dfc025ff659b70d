// runtime/core/processing_time_service.h
//
// ProcessingTimeService (class comment below).  Owned by the task; operators
// reach it through OperatorContext::timers() (runtime/core/operator.h), keyed
// operators through KeyedTimerService (operators/keyed/timer_service.h).
// See docs/semantics.md section 4.
//
// Thread safety: none; only the task's thread calls it.
#ifndef TM_RUNTIME_PROCESSING_TIME_SERVICE_H_
#define TM_RUNTIME_PROCESSING_TIME_SERVICE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <utility>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

// Processing-time timers of one task (Flink's ProcessingTimeService).  A
// timer registered for time T runs its callback on the task's thread once the
// clock has passed T, i.e. at a clock reading >= T + 1, like Flink's
// SystemProcessingTimeService, which delays every timer by
// ProcessingTimeServiceUtil.getProcessingTimeDelay(T, now) = T - now + 1 ms
// (0 for a T already in the past): a processing-time timer T, like a
// watermark T, says that time T itself is over, so a record that arrives
// while the clock still reads T (a processing-time window [0, 1000) gets its
// timer at 999 and holds a record seen at clock 999) is not left out of the
// firing.  Callbacks get the time they were registered for (Flink's
// ProcessingTimeCallback.onProcessingTime), not the clock reading.
//
// (Flink's test harness, TestProcessingTimeService, fires timer T already at
// setProcessingTime(T); tidemark's harness drives this service, so in its
// tests too a timer T fires at T + 1.)
class ProcessingTimeService {
 public:
  // Called with the time the timer was registered for.
  using Callback = std::function<void(Timestamp time)>;
  explicit ProcessingTimeService(const Clock* clock) : clock_(clock) {}

  Timestamp CurrentProcessingTime() const { return clock_->NowMillis(); }
  // The processing time read when the task's current slice began (at most a
  // slice, i.e. a few milliseconds, old); reads the clock when no slice has
  // set it.  For per-record uses where a clock read per record would cost
  // more than it tells (window assignment of event-time assigners).
  Timestamp SliceProcessingTime() const {
    return slice_now_ != kMinTimestamp ? slice_now_ : clock_->NowMillis();
  }
  void set_slice_processing_time(Timestamp now) { slice_now_ = now; }
  // Registers `cb` to run once the clock has passed `time` (see the class
  // comment); returns an id for Cancel().
  int64_t RegisterTimer(Timestamp time, Callback cb);
  void Cancel(int64_t id);

  // Whether a timer registered for `time` is due at clock reading `now`:
  // now >= time + 1 (never for a timer at kMaxTimestamp).
  static constexpr bool IsDue(Timestamp time, Timestamp now) { return time < now; }

  // --- for the task ---
  // Earliest registered time, kMaxTimestamp if none.
  Timestamp NextTimerTime() const;
  // The clock reading at which the earliest timer becomes due
  // (NextTimerTime() + 1); kMaxTimestamp if there is none, or it is at
  // kMaxTimestamp and never becomes due.
  Timestamp NextFiringTime() const;
  // Runs every callback due at `now` (IsDue), in time order, callbacks
  // registered while firing for a time that is due at `now` too.
  void FireDue(Timestamp now);
  const Clock* clock() const { return clock_; }

 private:
  const Clock* clock_;
  Timestamp slice_now_ = kMinTimestamp;
  std::multimap<Timestamp, std::pair<int64_t, Callback>> timers_;
  std::map<int64_t, Timestamp> by_id_;
  int64_t next_id_ = 1;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_PROCESSING_TIME_SERVICE_H_
