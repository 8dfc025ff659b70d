// operators/window/lateness.h
//
// WindowLateness<kEventTime>: Flink's allowed-lateness rules of
// WindowOperator, written once for both window operators (the general port
// in window_operator.h and the window-major one in fast_window_operator.h);
// docs/semantics.md section 6.  kEventTime is the assigner's
// Assigner::kIsEventTime: processing-time assigners use cleanup time =
// max_timestamp and nothing is ever late.
//
//   CleanupTime(w)   = w.max_timestamp() + allowed_lateness, MAX when that
//                      overflows (Flink's cleanupTime; max_timestamp itself may
//                      have wrapped near the ends of the range, see
//                      assigners.h: the guard is on the sum only);
//   IsWindowLate(w)  : cleanup_time(w) <= watermark (isWindowLate);
//   IsElementLate(ts): ts + allowed_lateness <= watermark, in Java long
//                      arithmetic: wraps, no guard (isElementLate);
//   IsMergeLate(cover): cover.max_timestamp() + allowed_lateness <=
//                      watermark, no guard either (the check in the merge
//                      callback of processElement, which fails the job).
//
// The cleanup timer, where one is kept, is at CleanupTime(w), and there is
// none when that is MAX.
//
// Thread safety: immutable.
#ifndef TM_OPERATORS_WINDOW_LATENESS_H_
#define TM_OPERATORS_WINDOW_LATENESS_H_

#include <cstdint>
#include <stdexcept>

#include "tidemark/operators/window/time_window.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

template <bool kEventTime>
class WindowLateness {
 public:
  // Throws std::invalid_argument for a negative lateness.
  explicit WindowLateness(int64_t allowed_lateness) : lateness_(allowed_lateness) {
    if (lateness_ < 0) throw std::invalid_argument("allowed lateness must be >= 0");
  }

  int64_t allowed_lateness() const { return lateness_; }

  template <typename W>
  Timestamp CleanupTime(const W& w) const {
    if constexpr (kEventTime) {
      Timestamp r = 0;
      if (__builtin_add_overflow(w.max_timestamp(), lateness_, &r)) return kMaxTimestamp;
      return r;
    } else {
      return w.max_timestamp();
    }
  }
  template <typename W>
  bool IsWindowLate(const W& w, Timestamp watermark) const {
    return kEventTime && CleanupTime(w) <= watermark;
  }
  bool IsElementLate(Timestamp ts, Timestamp watermark) const {
    return kEventTime && JavaLongAdd(ts, lateness_) <= watermark;
  }
  template <typename W>
  bool IsMergeLate(const W& cover, Timestamp watermark) const {
    return kEventTime && JavaLongAdd(cover.max_timestamp(), lateness_) <= watermark;
  }

 private:
  int64_t lateness_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_LATENESS_H_
