// operators/window/evictors.h
//
// Evictors remove elements from a window's contents when it fires, before
// and/or after the window function runs (Flink's Evictor); they apply to
// process / apply windows, whose contents are the list of elements.  The
// removal is permanent (the window keeps what is left), as in Flink.
//
// An evictor is any copyable object with
//   template <typename T, typename W>
//   void evict_before(WindowElements<T>& elements, const W& window, Timestamp watermark);
//   template <typename T, typename W>
//   void evict_after(WindowElements<T>& elements, const W& window, Timestamp watermark);
#ifndef TM_OPERATORS_WINDOW_EVICTORS_H_
#define TM_OPERATORS_WINDOW_EVICTORS_H_

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tidemark/operators/window/time_window.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

// The contents of a list window: values and their timestamps, in arrival
// order (values[i] has timestamps[i]).
template <typename T>
struct WindowElements {
  std::vector<T> values;
  std::vector<Timestamp> timestamps;

  size_t size() const { return values.size(); }
  bool empty() const { return values.empty(); }
  // Removes the first n elements.
  void erase_first(size_t n) {
    n = std::min(n, values.size());
    values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(n));
    timestamps.erase(timestamps.begin(), timestamps.begin() + static_cast<std::ptrdiff_t>(n));
  }
  // Removes every element for which pred(value, ts) holds; keeps order.
  template <typename Pred>
  void erase_if(Pred pred) {
    size_t out = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (pred(static_cast<const T&>(values[i]), timestamps[i])) continue;
      if (out != i) {
        values[out] = std::move(values[i]);
        timestamps[out] = timestamps[i];
      }
      ++out;
    }
    values.erase(values.begin() + static_cast<std::ptrdiff_t>(out), values.end());
    timestamps.resize(out);
  }
};

// Checkpoints: the values and their timestamps, in order.
template <typename T>
struct StateCodec<WindowElements<T>> {
  static void Encode(internal::StateWriter& w, const WindowElements<T>& e) {
    internal::Encode(w, e.values);
    internal::Encode(w, e.timestamps);
  }
  static WindowElements<T> Decode(internal::StateReader& r) {
    WindowElements<T> e;
    e.values = internal::Decode<std::vector<T>>(r);
    e.timestamps = internal::Decode<std::vector<Timestamp>>(r);
    return e;
  }
};
namespace internal {
template <typename T>
struct HasStateCodecTrait<WindowElements<T>> : std::bool_constant<HasStateCodec<T>> {};
}  // namespace internal

// No eviction (the default).
struct NoEvictor {
  template <typename T, typename W>
  void evict_before(WindowElements<T>&, const W&, Timestamp) const {}
  template <typename T, typename W>
  void evict_after(WindowElements<T>&, const W&, Timestamp) const {}
};

// Keeps at most the last `max_count` elements.
class CountEvictor {
 public:
  static CountEvictor of(int64_t max_count, bool do_evict_after = false) {
    if (max_count < 0) throw std::invalid_argument("CountEvictor::of: the count must be >= 0");
    return CountEvictor(max_count, do_evict_after);
  }
  template <typename T, typename W>
  void evict_before(WindowElements<T>& e, const W&, Timestamp) const {
    if (!after_) Evict(e);
  }
  template <typename T, typename W>
  void evict_after(WindowElements<T>& e, const W&, Timestamp) const {
    if (after_) Evict(e);
  }

 private:
  CountEvictor(int64_t n, bool after) : max_count_(n), after_(after) {}
  template <typename T>
  void Evict(WindowElements<T>& e) const {
    if (static_cast<int64_t>(e.size()) > max_count_)
      e.erase_first(e.size() - static_cast<size_t>(max_count_));
  }
  int64_t max_count_;
  bool after_;
};

// Keeps the elements within `window_size` of the newest element's timestamp:
// removes those with ts <= max_ts - window_size, as Flink's TimeEvictor:
// nothing when the first element has no timestamp, the cutoff in Java's
// wrapping arithmetic (near MIN, or with a size beyond the timestamps, it
// wraps to the top of the range and every element goes), and an element
// without a timestamp after a first one with is an error.
class TimeEvictor {
 public:
  static TimeEvictor of(Duration window_size, bool do_evict_after = false) {
    if (ToMillis(window_size) < 0)
      throw std::invalid_argument("TimeEvictor::of: the window size must be >= 0");
    return TimeEvictor(ToMillis(window_size), do_evict_after);
  }
  template <typename T, typename W>
  void evict_before(WindowElements<T>& e, const W&, Timestamp) const {
    if (!after_) Evict(e);
  }
  template <typename T, typename W>
  void evict_after(WindowElements<T>& e, const W&, Timestamp) const {
    if (after_) Evict(e);
  }

 private:
  TimeEvictor(int64_t size, bool after) : size_(size), after_(after) {}
  template <typename T>
  void Evict(WindowElements<T>& e) const {
    if (e.empty() || e.timestamps.front() == kNoTimestamp) return;  // Flink's hasTimestamp
    if (std::find(e.timestamps.begin(), e.timestamps.end(), kNoTimestamp) != e.timestamps.end())
      throw std::runtime_error(
          "TimeEvictor: an element of the window has no timestamp (assign timestamps to "
          "every record, as Flink's TimeEvictor requires)");
    const Timestamp newest = *std::max_element(e.timestamps.begin(), e.timestamps.end());
    const Timestamp cutoff = internal::JavaLongSub(newest, size_);
    e.erase_if([cutoff](const T&, Timestamp ts) { return ts <= cutoff; });
  }
  int64_t size_;
  bool after_;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_EVICTORS_H_
