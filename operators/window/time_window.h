// operators/window/time_window.h
//
// Window types (docs/semantics.md 5.1, 5.6):
//   TimeWindow   - the half-open interval [start, end) of event or processing
//                  time; max_timestamp() = end - 1 is the last time in it.
//   GlobalWindow - the single window of GlobalWindows; max_timestamp() = MAX.
// Both are small regular value types (copyable, hashable with absl::Hash,
// totally ordered), safe to share between threads as any value.
#ifndef TM_OPERATORS_WINDOW_TIME_WINDOW_H_
#define TM_OPERATORS_WINDOW_TIME_WINDOW_H_

#include <algorithm>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

namespace internal {
// Java's long addition and subtraction: two's complement, wrapping silently.
// Flink computes window bounds with them (TimeWindow, the assigners), so
// within a window size of MIN or MAX its windows have a wrapped start or end;
// tidemark produces the same windows (docs/semantics.md: every rule is
// in Java long arithmetic unless a guard is named).  No C++ signed overflow.
constexpr Timestamp JavaLongAdd(Timestamp a, int64_t b) {
  return static_cast<Timestamp>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
constexpr Timestamp JavaLongSub(Timestamp a, int64_t b) {
  return static_cast<Timestamp>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

}  // namespace internal
// [start, end).  Normally start <= end; near the ends of the long range a
// window can have a wrapped bound (start > end), exactly as in Flink (see
// JavaLongAdd), and every rule below then applies to it unchanged.
struct TimeWindow {
  Timestamp start = 0;
  Timestamp end = 0;

  constexpr TimeWindow() = default;
  constexpr TimeWindow(Timestamp s, Timestamp e) : start(s), end(e) {}

  // The largest timestamp that still belongs to the window: end - 1 in Java
  // arithmetic (TimeWindow.maxTimestamp), so an end that wrapped to MIN gives
  // MAX.
  constexpr Timestamp max_timestamp() const { return internal::JavaLongSub(end, 1); }
  constexpr Timestamp get_start() const { return start; }
  constexpr Timestamp get_end() const { return end; }

  // Flink's TimeWindow.intersects: windows that merely touch ([10,20) and
  // [20,30)) intersect.
  constexpr bool intersects(const TimeWindow& o) const { return start <= o.end && end >= o.start; }
  // The smallest window containing both.
  constexpr TimeWindow cover(const TimeWindow& o) const {
    return TimeWindow(std::min(start, o.start), std::max(end, o.end));
  }

  friend constexpr bool operator==(const TimeWindow& a, const TimeWindow& b) {
    return a.start == b.start && a.end == b.end;
  }
  friend constexpr bool operator!=(const TimeWindow& a, const TimeWindow& b) { return !(a == b); }
  // Ordered by start, then end (the order mergeWindows sorts by).
  friend constexpr bool operator<(const TimeWindow& a, const TimeWindow& b) {
    return a.start != b.start ? a.start < b.start : a.end < b.end;
  }
  template <typename H>
  friend H AbslHashValue(H h, const TimeWindow& w) {
    return H::combine(std::move(h), w.start, w.end);
  }
  std::string ToString() const {
    return absl::StrCat("TimeWindow{start=", start, ", end=", end, "}");
  }
  friend std::ostream& operator<<(std::ostream& os, const TimeWindow& w) {
    return os << w.ToString();
  }
};

// The one window of GlobalWindows.
struct GlobalWindow {
  constexpr Timestamp max_timestamp() const { return kMaxTimestamp; }
  friend constexpr bool operator==(const GlobalWindow&, const GlobalWindow&) { return true; }
  friend constexpr bool operator!=(const GlobalWindow&, const GlobalWindow&) { return false; }
  friend constexpr bool operator<(const GlobalWindow&, const GlobalWindow&) { return false; }
  template <typename H>
  friend H AbslHashValue(H h, const GlobalWindow&) {
    return H::combine(std::move(h), 0);
  }
  std::string ToString() const { return "GlobalWindow"; }
  friend std::ostream& operator<<(std::ostream& os, const GlobalWindow&) {
    return os << "GlobalWindow";
  }
};

// Start of the window of `size` containing `ts`, windows being aligned to
// `offset` (Flink's TimeWindow.getWindowStartWithOffset, with Java's `%`, which
// C++ shares: the remainder takes the dividend's sign).  Right for negative
// timestamps and offsets: size 7, offset 0: -8 -> -14, -1 -> -7, 6 -> 0.
// Requires size > 0.  Like Flink, Java long arithmetic: `ts - offset` and the
// result wrap within `size` of the ends of the range, e.g. size 10, offset 0:
// MIN + 1 -> MAX - 1 (the true start, MIN - 2, does not exist); size 10,
// offset 3: MIN + 1 -> MAX - 4 (ts - offset wraps first).
constexpr Timestamp GetWindowStartWithOffset(Timestamp ts, Timestamp offset, Timestamp size) {
  const Timestamp r = internal::JavaLongSub(ts, offset) % size;
  return internal::JavaLongSub(ts, r < 0 ? r + size : r);
}

namespace internal {
// Flink's TimeWindow.mergeWindows: sorts `windows` (in place) by start and
// sweeps, a window joining the running group when it intersects the group's
// cover.  Calls merge(cover, members) for every group of two or more distinct
// windows (members sorted, duplicates collapsed as in Flink's HashSet);
// single windows are left alone.  `group` is scratch space.
template <typename MergeFn>
void MergeTimeWindows(std::vector<TimeWindow>& windows, std::vector<TimeWindow>& group,
                      MergeFn&& merge) {
  group.clear();
  if (windows.empty()) return;
  std::sort(windows.begin(), windows.end());
  TimeWindow cover = windows[0];
  group.push_back(windows[0]);
  for (size_t i = 1; i < windows.size(); ++i) {
    if (cover.intersects(windows[i])) {
      if (windows[i] != group.back()) group.push_back(windows[i]);
      cover = cover.cover(windows[i]);
    } else {
      if (group.size() > 1) merge(cover, group);
      cover = windows[i];
      group.assign(1, windows[i]);
    }
  }
  if (group.size() > 1) merge(cover, group);
}

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_TIME_WINDOW_H_
