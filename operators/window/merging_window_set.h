// operators/window/merging_window_set.h
//
// MergingWindowSet: the in-flight session windows of one key and, for each,
// its "state window", the namespace that holds its contents
// (docs/flink-semantics.md 5.5, Flink's MergingWindowSet).  The state window
// of a merged window is the state window of one of the windows merged into
// it, so merged contents never move more than once.
//
// add_window(new, merge_fn):
//   1. merges in-flight windows + new (TimeWindow sweep, touching windows
//      merge);
//   2. for each merge group: drops `new` from the group (the result of
//      add_window is then the group's cover); the cover takes the state window
//      of the group's first in-flight window; the others' state windows are
//      merged into it: merge_fn(cover, merged_windows, state_window_of_cover,
//      merged_state_windows) is called unless the group is a single
//      in-flight window equal to the cover (new lies inside it);
//   3. if no group took `new`, it becomes in flight with itself as state
//      window.
// merge_fn may throw (merging into a late window); the set is then left as
// Flink leaves it (already updated).
//
// Thread safety: none (one task thread).  Windows per key are few, so a
// vector; scratch buffers are reused so adding a window that merges nothing
// does not allocate once warmed up.
#ifndef TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_
#define TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "operators/window/time_window.h"

namespace tidemark {

class MergingWindowSet {
 public:
  using W = TimeWindow;

  // The state window of in-flight `w`, or nullptr.
  const W* get_state_window(const W& w) const {
    for (const auto& [win, sw] : mapping_)
      if (win == w) return &sw;
    return nullptr;
  }
  bool contains(const W& w) const { return get_state_window(w) != nullptr; }
  // Removes in-flight `w`; throws std::logic_error if absent.
  void retire_window(const W& w) {
    for (size_t i = 0; i < mapping_.size(); ++i) {
      if (mapping_[i].first == w) {
        mapping_.erase(mapping_.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
    throw std::logic_error("Window " + w.ToString() + " is not in the in-flight window set.");
  }
  bool empty() const { return mapping_.empty(); }
  size_t size() const { return mapping_.size(); }
  const std::vector<std::pair<W, W>>& windows() const { return mapping_; }

  // See the file comment.  merge_fn(const W& cover, const std::vector<W>&
  // merged_windows, const W& state_window, const std::vector<W>&
  // merged_state_windows).
  template <typename MergeFn>
  W add_window(const W& new_window, MergeFn&& merge_fn) {
    windows_.clear();
    for (const auto& [win, sw] : mapping_) windows_.push_back(win);
    windows_.push_back(new_window);
    results_.clear();
    MergeTimeWindows(windows_, group_, [this](const W& cover, const std::vector<W>& members) {
      results_.emplace_back(cover, members);
    });

    W result = new_window;
    bool merged_new = false;
    for (auto& [cover, merged] : results_) {
      auto it = std::find(merged.begin(), merged.end(), new_window);
      if (it != merged.end()) {
        merged.erase(it);
        merged_new = true;
        result = cover;
      }
      // `merged` is non-empty: a group has two or more distinct windows.
      const W state_window = *get_state_window(merged.front());
      std::vector<W> merged_state_windows;
      for (const W& m : merged) {
        for (size_t i = 0; i < mapping_.size(); ++i) {
          if (mapping_[i].first == m) {
            merged_state_windows.push_back(mapping_[i].second);
            mapping_.erase(mapping_.begin() + static_cast<std::ptrdiff_t>(i));
            break;
          }
        }
      }
      mapping_.emplace_back(cover, state_window);
      merged_state_windows.erase(
          std::remove(merged_state_windows.begin(), merged_state_windows.end(), state_window),
          merged_state_windows.end());
      if (!(merged.size() == 1 && merged.front() == cover)) {
        merge_fn(cover, merged, state_window, merged_state_windows);
      }
    }
    if (results_.empty() || (result == new_window && !merged_new)) {
      bool present = false;
      for (auto& [win, sw] : mapping_) {
        if (win == result) {
          sw = result;  // as Flink's mapping.put
          present = true;
        }
      }
      if (!present) mapping_.emplace_back(result, result);
    }
    return result;
  }

 private:
  std::vector<std::pair<W, W>> mapping_;               // in-flight window -> state window
  std::vector<W> windows_;                             // scratch
  std::vector<W> group_;                               // scratch
  std::vector<std::pair<W, std::vector<W>>> results_;  // scratch
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_
