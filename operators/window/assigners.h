// operators/window/assigners.h
//
// Window assigners (docs/semantics.md 5.2-5.6).  An assigner is a small
// immutable value, validated when it is made (so a bad job fails while it is
// being built, with std::invalid_argument and a message), and copied into
// every subtask's window operator.  Members the WindowOperator uses:
//
//   using WindowType = TimeWindow | GlobalWindow;
//   static constexpr bool kIsEventTime;   // lateness and cleanup apply
//   static constexpr bool kIsMerging;     // sessions
//   template <typename T>
//   void assign_windows(const T& element, Timestamp ts, Timestamp processing_time,
//                       std::vector<WindowType>& out) const;   // appends
//   auto default_trigger() const;
//
// Tumbling assigners with a WindowStagger other than kAligned fix their
// stagger offset at the first element a copy sees (mutable, so each operator
// instance, which owns its copy, gets its own; used by one thread only).
//
// Tumbling and sliding event-time assigners reject a record without a
// timestamp (kNoTimestamp, i.e. MIN) with std::runtime_error, as Flink's
// do; session assigners take it, as Flink's EventTimeSessionWindows and
// DynamicEventTimeSessionWindows (no check there): [MIN, MIN + gap).
// Sliding assigners append windows in descending start order (the order the
// operator processes them).
//
// Near the ends of the long range (timestamps within a window size or slide
// of MIN or MAX) every assigner gives Flink's windows, computed as Flink
// computes them, in Java long arithmetic (JavaLongAdd in time_window.h): a
// window's start or end may wrap, and so may its max_timestamp(), which is
// what the window operator's lateness and timer rules then see.  At
// MIN + 1, MAX - 1 and MAX, for example (Flink's own results):
//   tumbling 10 ms      MIN+1 -> [MAX-1, MIN+8)   MAX-1, MAX -> [MAX-7, MIN+2)
//   sliding 10/5 ms     MIN+1 -> [MAX-1, MIN+8), [MAX-6, MIN+3)
//                       MAX-1, MAX -> [MAX-2, MIN+7), [MAX-7, MIN+2)
//   session gap 10 ms   MIN+1 -> [MIN+1, MIN+11)  MAX-1 -> [MAX-1, MIN+8)
//                       MAX -> [MAX, MIN+9)
// Each costs the same bounded work as any other timestamp; see AssignSliding
// for the cases where Flink's sliding loop never ends.
#ifndef TM_OPERATORS_WINDOW_ASSIGNERS_H_
#define TM_OPERATORS_WINDOW_ASSIGNERS_H_

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

// How tumbling windows of different subtasks are shifted against each other
// (Flink's WindowStagger), computed once per operator instance at its first
// element from the processing time then: kAligned 0 (default); kRandom
// uniform in [0, size); kNatural processing time minus the start of its
// window (so windows start when the subtask saw its first element).
enum class WindowStagger { kAligned, kRandom, kNatural };

namespace internal {

int64_t StaggerOffset(WindowStagger stagger, Timestamp processing_time, int64_t size);

// The offset a tumbling assigner uses: (offset + stagger offset) % size, the
// stagger part fixed at the first element this copy (one per operator
// instance) sees.
class StaggeredOffset {
 public:
  StaggeredOffset(int64_t size, int64_t offset, WindowStagger stagger)
      : size_(size), offset_(offset), stagger_(stagger) {}
  int64_t Get(Timestamp processing_time) const {
    if (stagger_ == WindowStagger::kAligned) return offset_;
    if (!set_) {
      stagger_offset_ = StaggerOffset(stagger_, processing_time, size_);
      set_ = true;
    }
    return JavaLongAdd(offset_, stagger_offset_) % size_;
  }
  bool aligned() const { return stagger_ == WindowStagger::kAligned; }

 private:
  int64_t size_;
  int64_t offset_;
  WindowStagger stagger_;
  mutable bool set_ = false;
  mutable int64_t stagger_offset_ = 0;
};

inline void CheckHasTimestamp(Timestamp ts) {
  if (ts == kNoTimestamp) {
    throw std::runtime_error(
        "Record has kNoTimestamp (= no timestamp marker, Long.MIN_VALUE). Is the time "
        "characteristic "
        "set to 'ProcessingTime', or did you forget to call "
        "'DataStream::assign_timestamps_and_watermarks(...)'?");
  }
}

inline void CheckTumbling(const char* name, int64_t size, int64_t offset) {
  // abs(offset) < size also rejects size <= 0; offset MIN has no abs.
  if (size <= 0 || offset == kMinTimestamp || std::llabs(offset) >= size) {
    throw std::invalid_argument(
        absl::StrCat(name, " parameters must satisfy abs(offset) < size (size=", size,
                     " ms, offset=", offset, " ms)"));
  }
}

inline void CheckSliding(const char* name, int64_t size, int64_t slide, int64_t offset) {
  if (slide <= 0 || offset == kMinTimestamp || std::llabs(offset) >= slide || size <= 0) {
    throw std::invalid_argument(
        absl::StrCat(name, " parameters must satisfy abs(offset) < slide and size > 0 (size=", size,
                     " ms, slide=", slide, " ms, offset=", offset, " ms)"));
  }
  if (size / slide > 10000000) {
    throw std::invalid_argument(
        absl::StrCat(name, ": the number of windows per element (size / slide = ", size / slide,
                     ") must not exceed 10000000"));
  }
}

// Flink's TumblingEventTimeWindows / TumblingProcessingTimeWindows
// .assignWindows: start = getWindowStartWithOffset(t, offset, size), the
// window [start, start + size), both in Java arithmetic (so within `size` of
// MIN the start wraps to near MAX, within `size` of MAX the end wraps to
// near MIN).
inline void AssignTumbling(Timestamp t, int64_t size, int64_t offset,
                           std::vector<TimeWindow>& out) {
  const Timestamp start = GetWindowStartWithOffset(t, offset, size);
  out.emplace_back(start, JavaLongAdd(start, size));
}

// The error a sliding assigner fails the job with where Flink's loop would
// never end (see AssignSliding).
[[noreturn]] void ThrowEndlessSlidingLoop(Timestamp t, int64_t size, int64_t slide, int64_t offset);

// Flink's SlidingEventTimeWindows / SlidingProcessingTimeWindows
// .assignWindows, in Java arithmetic:
//   for (start = getWindowStartWithOffset(t, offset, slide); start > t - size;
//        start -= slide)
//     add [start, start + size)
// Away from the ends of the range these are the windows holding t.  Near MAX
// the ends wrap (start + size); near MIN, when the first start wraps (it would
// be below MIN) so does the bound t - size and the windows have wrapped starts
// and true ends; when only the bound wraps the loop runs zero times and t gets
// no window at all (sliding 10/5 ms, offset -2: MIN + 1 -> none).
//
// tidemark counts the iterations instead of walking, so the work is the
// windows' number, never more.  In two cases Flink's loop walks about
// 2^64 / slide starts around the whole range, which exhausts its memory:
// when the first start has wrapped but the bound has not (size < slide, t
// within slide of MIN: sliding 1/5 ms at MIN + 1), and when a start steps
// below MIN while still above the bound (it wraps to near MAX and the walk
// goes on: sliding 10/5 ms at MIN + 12).  tidemark fails the job there,
// with std::runtime_error naming the case, after bounded work.  (Only with a
// slide of more than about 58 years, 2^64 / 10^7 ms, would Flink's walk
// around the range end within ten million windows; tidemark fails those
// cases too.)
inline void AssignSliding(Timestamp t, int64_t size, int64_t slide, int64_t offset,
                          std::vector<TimeWindow>& out) {
  const Timestamp last = GetWindowStartWithOffset(t, offset, slide);
  const Timestamp bound = JavaLongSub(t, size);
  if (last <= bound) return;  // the loop runs zero times
  // The starts last - k * slide > bound, none wrapping: n of them.
  const uint64_t n = (static_cast<uint64_t>(last) - static_cast<uint64_t>(bound) - 1) /
                         static_cast<uint64_t>(slide) +
                     1;
  // Fewer than this unless the first start wrapped and the bound did not.
  if (n > static_cast<uint64_t>(size / slide) + 1) ThrowEndlessSlidingLoop(t, size, slide, offset);
  // The last start, > bound >= MIN; the one after it is <= bound unless it
  // is below MIN, where Java wraps it to the top of the range and goes on.
  const Timestamp lowest = JavaLongSub(last, static_cast<int64_t>((n - 1) * slide));
  Timestamp below = 0;
  if (__builtin_sub_overflow(lowest, slide, &below))
    ThrowEndlessSlidingLoop(t, size, slide, offset);
  for (Timestamp s = last;; s -= slide) {
    out.emplace_back(s, JavaLongAdd(s, size));
    if (s == lowest) break;
  }
}

}  // namespace internal

// Tumbling event-time windows of `size`, aligned to `offset` from the epoch.
class TumblingEventTimeWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = true;
  static constexpr bool kIsMerging = false;

  static TumblingEventTimeWindows of(Duration size, Duration offset = Duration(0),
                                     WindowStagger stagger = WindowStagger::kAligned) {
    internal::CheckTumbling("TumblingEventTimeWindows", ToMillis(size), ToMillis(offset));
    return TumblingEventTimeWindows(ToMillis(size), ToMillis(offset), stagger);
  }
  template <typename T>
  void assign_windows(const T&, Timestamp ts, Timestamp now, std::vector<TimeWindow>& out) const {
    out.push_back(window_of(ts, now));
  }
  // The one window of a record at `ts` (assign_windows without the vector,
  // for operators that take single-window assigners apart).
  TimeWindow window_of(Timestamp ts, Timestamp now) const {
    internal::CheckHasTimestamp(ts);
    // Most records fall into the window of the record before, and near a
    // window's end out-of-order records alternate between it and the next:
    // the two windows assigned last are kept, and either is taken without a
    // division.
    if (ts >= last_.start && ts < last_.end) [[likely]]
      return last_;
    if (ts >= previous_.start && ts < previous_.end) {
      std::swap(last_, previous_);
      return last_;
    }
    const int64_t offset = EffectiveOffset(now);  // fixed once it has run
    const Timestamp start = GetWindowStartWithOffset(ts, offset, size_);
    const TimeWindow window(start, internal::JavaLongAdd(start, size_));
    // Kept only if Flink's formula gives this window to every timestamp in
    // it, which holds where ts - offset wraps for none of them: near MIN
    // (offset > 0) or MAX (offset < 0) it may wrap, and timestamps of one
    // interval then get different windows.  An end that wrapped is kept as
    // it is: such a window is empty, and matches no timestamp.
    Timestamp first = 0, last = 0;
    const bool exact =
        window.start >= window.end || (!__builtin_sub_overflow(window.start, offset, &first) &&
                                       !__builtin_sub_overflow(window.end - 1, offset, &last));
    previous_ = last_;
    last_ = exact ? window : TimeWindow(0, 0);
    return window;
  }
  EventTimeTrigger default_trigger() const { return {}; }
  int64_t size() const { return size_; }
  int64_t offset() const { return offset_; }
  // False with a stagger: the windows' offset is then drawn per subtask.
  bool aligned() const { return effective_.aligned(); }

 private:
  TumblingEventTimeWindows(int64_t size, int64_t offset, WindowStagger stagger)
      : size_(size), offset_(offset), effective_(size, offset, stagger) {}
  int64_t EffectiveOffset(Timestamp processing_time) const {
    return effective_.Get(processing_time);
  }
  int64_t size_;
  int64_t offset_;
  internal::StaggeredOffset effective_;
  // The window assigned last (empty at first; an end that wrapped past MAX
  // makes it empty too, so such windows are always computed; and empty after
  // a window in which ts - offset wraps, see window_of), and the one before
  // it (the same rules).
  mutable TimeWindow last_{0, 0};
  mutable TimeWindow previous_{0, 0};
};

// Sliding event-time windows of `size` every `slide`, aligned to `offset`.
class SlidingEventTimeWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = true;
  static constexpr bool kIsMerging = false;

  static SlidingEventTimeWindows of(Duration size, Duration slide, Duration offset = Duration(0)) {
    internal::CheckSliding("SlidingEventTimeWindows", ToMillis(size), ToMillis(slide),
                           ToMillis(offset));
    return SlidingEventTimeWindows(ToMillis(size), ToMillis(slide), ToMillis(offset));
  }
  template <typename T>
  void assign_windows(const T&, Timestamp ts, Timestamp, std::vector<TimeWindow>& out) const {
    internal::CheckHasTimestamp(ts);
    internal::AssignSliding(ts, size_, slide_, offset_, out);
  }
  EventTimeTrigger default_trigger() const { return {}; }
  int64_t size() const { return size_; }
  int64_t slide() const { return slide_; }
  int64_t offset() const { return offset_; }

 private:
  SlidingEventTimeWindows(int64_t size, int64_t slide, int64_t offset)
      : size_(size), slide_(slide), offset_(offset) {}
  int64_t size_;
  int64_t slide_;
  int64_t offset_;
};

// Session windows with a gap computed per element by `Fn`: const T& -> Duration
// (or integral milliseconds).  A gap <= 0 fails the job at that element.
template <typename Fn>
class DynamicEventTimeSessionWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = true;
  static constexpr bool kIsMerging = true;

  explicit DynamicEventTimeSessionWindows(Fn fn) : fn_(std::move(fn)) {}
  template <typename T>
  void assign_windows(const T& element, Timestamp ts, Timestamp,
                      std::vector<TimeWindow>& out) const {
    auto g = fn_(element);
    int64_t gap;
    if constexpr (std::is_integral_v<decltype(g)>) {
      gap = static_cast<int64_t>(g);
    } else {
      gap = std::chrono::duration_cast<Duration>(g).count();
    }
    if (gap <= 0) {
      throw std::invalid_argument(
          absl::StrCat("Dynamic session time gap must satisfy 0 < gap (gap=", gap, " ms)"));
    }
    // [ts, ts + gap) in Java arithmetic, any ts (Flink's
    // DynamicEventTimeSessionWindows.assignWindows has no MIN check).
    out.emplace_back(ts, internal::JavaLongAdd(ts, gap));
  }
  EventTimeTrigger default_trigger() const { return {}; }

 private:
  Fn fn_;
};

// Session windows: each element gets [ts, ts + gap); overlapping (or
// touching) windows of a key merge.
class EventTimeSessionWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = true;
  static constexpr bool kIsMerging = true;

  static EventTimeSessionWindows with_gap(Duration gap) {
    if (ToMillis(gap) <= 0) {
      throw std::invalid_argument(absl::StrCat(
          "EventTimeSessionWindows parameters must satisfy 0 < size (gap=", ToMillis(gap), " ms)"));
    }
    return EventTimeSessionWindows(ToMillis(gap));
  }
  template <typename Fn>
  static DynamicEventTimeSessionWindows<Fn> with_dynamic_gap(Fn fn) {
    return DynamicEventTimeSessionWindows<Fn>(std::move(fn));
  }
  // [ts, ts + gap) in Java arithmetic, for any ts: Flink's
  // EventTimeSessionWindows.assignWindows has no MIN check, so a record
  // without a timestamp gets [MIN, MIN + gap), and near MAX the end wraps.
  template <typename T>
  void assign_windows(const T&, Timestamp ts, Timestamp, std::vector<TimeWindow>& out) const {
    out.emplace_back(ts, internal::JavaLongAdd(ts, gap_));
  }
  EventTimeTrigger default_trigger() const { return {}; }
  int64_t gap() const { return gap_; }

 private:
  explicit EventTimeSessionWindows(int64_t gap) : gap_(gap) {}
  int64_t gap_;
};

// One window per key.  The default trigger never fires; use
// create_with_end_of_stream_trigger() to fire once at W(MAX), or a
// CountTrigger etc.
class GlobalWindows {
 public:
  using WindowType = GlobalWindow;
  static constexpr bool kIsEventTime = false;
  static constexpr bool kIsMerging = false;

  // Fires when the watermark reaches MAX (end of input).
  class EndOfStreamTrigger {
   public:
    template <typename T, typename W>
    TriggerResult on_element(const T&, Timestamp, const W&, TriggerContext& ctx) const {
      ctx.register_event_time_timer(kMaxTimestamp);
      return TriggerResult::kContinue;
    }
    template <typename W>
    TriggerResult on_event_time(Timestamp t, const W&, TriggerContext&) const {
      return t == kMaxTimestamp ? TriggerResult::kFire : TriggerResult::kContinue;
    }
    template <typename W>
    TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
      return TriggerResult::kContinue;
    }
    template <typename W>
    void clear(const W&, TriggerContext& ctx) const {
      ctx.delete_event_time_timer(kMaxTimestamp);
    }
    bool can_merge() const { return false; }
    template <typename W>
    void on_merge(const W&, OnMergeContext&) const {}
  };

  static GlobalWindows create() { return GlobalWindows(false); }
  static GlobalWindows create_with_end_of_stream_trigger() { return GlobalWindows(true); }
  template <typename T>
  void assign_windows(const T&, Timestamp, Timestamp, std::vector<GlobalWindow>& out) const {
    out.emplace_back();
  }
  // The trigger type is the same either way so that WindowedStream's type
  // does not depend on the factory used.
  class DefaultTrigger {
   public:
    explicit DefaultTrigger(bool eos) : eos_(eos) {}
    template <typename T, typename W>
    TriggerResult on_element(const T& e, Timestamp ts, const W& w, TriggerContext& ctx) const {
      return eos_ ? EndOfStreamTrigger().on_element(e, ts, w, ctx) : TriggerResult::kContinue;
    }
    template <typename W>
    TriggerResult on_event_time(Timestamp t, const W& w, TriggerContext& ctx) const {
      return eos_ ? EndOfStreamTrigger().on_event_time(t, w, ctx) : TriggerResult::kContinue;
    }
    template <typename W>
    TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
      return TriggerResult::kContinue;
    }
    template <typename W>
    void clear(const W& w, TriggerContext& ctx) const {
      if (eos_) EndOfStreamTrigger().clear(w, ctx);
    }
    bool can_merge() const { return false; }
    template <typename W>
    void on_merge(const W&, OnMergeContext&) const {}

   private:
    bool eos_;
  };
  DefaultTrigger default_trigger() const { return DefaultTrigger(end_of_stream_); }

 private:
  explicit GlobalWindows(bool eos) : end_of_stream_(eos) {}
  bool end_of_stream_;
};

// Tumbling windows of processing time (the wall clock of the subtask).
class TumblingProcessingTimeWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = false;
  static constexpr bool kIsMerging = false;

  static TumblingProcessingTimeWindows of(Duration size, Duration offset = Duration(0),
                                          WindowStagger stagger = WindowStagger::kAligned) {
    internal::CheckTumbling("TumblingProcessingTimeWindows", ToMillis(size), ToMillis(offset));
    return TumblingProcessingTimeWindows(ToMillis(size), ToMillis(offset), stagger);
  }
  template <typename T>
  void assign_windows(const T&, Timestamp, Timestamp now, std::vector<TimeWindow>& out) const {
    internal::AssignTumbling(now, size_, EffectiveOffset(now), out);
  }
  ProcessingTimeTrigger default_trigger() const { return {}; }

 private:
  TumblingProcessingTimeWindows(int64_t size, int64_t offset, WindowStagger stagger)
      : size_(size), effective_(size, offset, stagger) {}
  int64_t EffectiveOffset(Timestamp processing_time) const {
    return effective_.Get(processing_time);
  }
  int64_t size_;
  internal::StaggeredOffset effective_;  // the offset, staggered or not
};

// Sliding windows of processing time.
class SlidingProcessingTimeWindows {
 public:
  using WindowType = TimeWindow;
  static constexpr bool kIsEventTime = false;
  static constexpr bool kIsMerging = false;

  static SlidingProcessingTimeWindows of(Duration size, Duration slide,
                                         Duration offset = Duration(0)) {
    internal::CheckSliding("SlidingProcessingTimeWindows", ToMillis(size), ToMillis(slide),
                           ToMillis(offset));
    return SlidingProcessingTimeWindows(ToMillis(size), ToMillis(slide), ToMillis(offset));
  }
  template <typename T>
  void assign_windows(const T&, Timestamp, Timestamp now, std::vector<TimeWindow>& out) const {
    internal::AssignSliding(now, size_, slide_, offset_, out);
  }
  ProcessingTimeTrigger default_trigger() const { return {}; }

 private:
  SlidingProcessingTimeWindows(int64_t size, int64_t slide, int64_t offset)
      : size_(size), slide_(slide), offset_(offset) {}
  int64_t size_;
  int64_t slide_;
  int64_t offset_;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_ASSIGNERS_H_
