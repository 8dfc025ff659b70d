// runtime/clock.h
//
// Processing time.  Clock::NowMillis() is wall-clock epoch milliseconds (what
// Flink calls processing time, System.currentTimeMillis()).  Tests inject a
// ManualClock to drive processing time by hand.
#ifndef TM_RUNTIME_CLOCK_H_
#define TM_RUNTIME_CLOCK_H_

#include <atomic>
#include <chrono>

#include "runtime/time.h"

namespace tidemark {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Timestamp NowMillis() const = 0;
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
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Timestamp start = 0) : now_(start) {}
  Timestamp NowMillis() const override { return now_.load(std::memory_order_acquire); }
  void Set(Timestamp t) { now_.store(t, std::memory_order_release); }
  void Advance(int64_t ms) { now_.fetch_add(ms, std::memory_order_acq_rel); }

 private:
  std::atomic<Timestamp> now_;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_CLOCK_H_
