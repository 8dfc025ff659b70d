// runtime/core/clock.h
//
// Processing time.  Clock::NowMillis() is wall-clock epoch milliseconds (what
// Flink calls processing time, System.currentTimeMillis()).  Tests inject a
// ManualClock to drive processing time by hand.
#ifndef TM_RUNTIME_CLOCK_H_
#define TM_RUNTIME_CLOCK_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>

#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Timestamp NowMillis() const = 0;
  // A clock that jumps (ManualClock) calls `f` after each jump, so a running
  // job re-reads it at once instead of sleeping out a wait computed from the
  // old reading; one that moves with real time never calls it.  Returns an id
  // for RemoveJumpListener (-1: never called).  After RemoveJumpListener
  // returns, `f` is not running and is not called again.
  virtual int64_t AddJumpListener(std::function<void()> /*f*/) const { return -1; }
  virtual void RemoveJumpListener(int64_t /*id*/) const {}
};

class SystemClock final : public Clock {
 public:
  Timestamp NowMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  static const SystemClock* Get() {
    static const SystemClock clock;
    return &clock;
  }
};

// A clock that only moves when told to.  Thread-safe.
// A job on it wakes at each Set / Advance (AddJumpListener), so timers due
// after a jump fire at once.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Timestamp start = 0) : now_(start) {}
  Timestamp NowMillis() const override { return now_.load(std::memory_order_acquire); }
  void Set(Timestamp t) {
    now_.store(t, std::memory_order_release);
    Jumped();
  }
  void Advance(int64_t ms) {
    now_.fetch_add(ms, std::memory_order_acq_rel);
    Jumped();
  }
  // Out of line (clock.cc): inline, the map's members would be
  // instantiated in every file that includes this one.
  int64_t AddJumpListener(std::function<void()> f) const override;
  void RemoveJumpListener(int64_t id) const override;

 private:
  void Jumped();

  std::atomic<Timestamp> now_;
  mutable std::mutex mu_;
  mutable std::map<int64_t, std::function<void()>> listeners_;  // guarded by mu_
  mutable int64_t next_id_ = 0;                                 // guarded by mu_
};

namespace internal {
// A relative clock that stands still while it is paused (Flink's
// PausableRelativeClock, FLINK-35886).  Idleness detection reads it as its
// "input activity clock": time a task spends blocked on a full output
// channel (back-pressure), or paused by the runtime for any other reason, does
// not count as time without input.  Pauses nest: N Pause() calls need N
// Resume() calls.  Only differences between readings are meaningful.
// Thread-safe (the task pauses it; later a coordinator may too).
class PausableRelativeClock final : public Clock {
 public:
  explicit PausableRelativeClock(const Clock* base) : base_(base) {}
  Timestamp NowMillis() const override {
    internal::MutexLock lock(&mu_);
    const Timestamp now = base_->NowMillis();
    const int64_t paused_now = pauses_ > 0 ? now - pause_start_ : 0;
    return now - paused_total_ - paused_now;
  }
  void Pause() {
    internal::MutexLock lock(&mu_);
    if (pauses_++ == 0) pause_start_ = base_->NowMillis();
  }
  // Ignored when not paused.
  void Resume() {
    internal::MutexLock lock(&mu_);
    if (pauses_ == 0) return;
    if (--pauses_ == 0) paused_total_ += base_->NowMillis() - pause_start_;
  }
  bool paused() const {
    internal::MutexLock lock(&mu_);
    return pauses_ > 0;
  }
  const Clock* base() const { return base_; }

 private:
  const Clock* base_;
  mutable internal::Mutex mu_;
  int pauses_ ABSL_GUARDED_BY(mu_) = 0;
  Timestamp pause_start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t paused_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_RUNTIME_CLOCK_H_
