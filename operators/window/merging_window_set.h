// operators/window/merging_window_set.h
//
// MergingWindowSet: the in-flight session windows of one key and, for each,
// its "state window", the namespace that holds its contents
// (docs/semantics.md 5.5, Flink's MergingWindowSet).  The state window
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
// Fast path: while every window ever added is valid (start <= end), the
// in-flight windows are pairwise disjoint (not even touching: the sweep would
// have merged them), so the sweep of step 1 has at most one group of two or
// more windows: `new` and the in-flight windows it intersects (a window that
// joins the group through the running cover intersects `new` itself).
// add_window then scans the in-flight windows once instead of sorting them;
// the result, the callback's arguments and the order of the in-flight windows
// are those of the sweep.  A set that ever gets an invalid window takes the
// sweep from then on.
//
// Thread safety: none (one task thread).  Windows per key are few, so a
// vector.  The scratch buffers of add_window live in a Scratch, which the
// caller owns (one per operator) or, with the two-argument add_window, one per
// thread; the vectors merge_fn receives are in it and valid during the call
// only, and merge_fn must not call add_window with the same Scratch.  Once the
// scratch is warm, add_window does not allocate.
#ifndef TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_
#define TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_

#include <algorithm>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tidemark/operators/window/time_window.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

class MergingWindowSet {
 public:
  using W = TimeWindow;

  // add_window's scratch space (see the file comment).
  struct Scratch {
    std::vector<W> windows;  // sweep input
    std::vector<W> group;    // sweep scratch
    std::vector<W> members;  // the groups' members, back to back
    std::vector<std::pair<W, std::pair<size_t, size_t>>> groups;  // cover, members [b, e)
    std::vector<W> merged;                                        // merge_fn's merged_windows
    std::vector<W> merged_state_windows;                          // merge_fn's merged_state_windows
  };

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
  // Puts in-flight `w` with state window `sw` back, as a set that held it
  // would (FastSessionWindowOperator hands a key's sessions over to a set
  // this way).  Requires `w` not in flight; the order of the in-flight
  // windows does not change what add_window does.
  void restore_window(const W& w, const W& sw) { mapping_.emplace_back(w, sw); }
  bool empty() const { return mapping_.empty(); }
  size_t size() const { return mapping_.size(); }
  const std::vector<std::pair<W, W>>& windows() const { return mapping_; }
  // Whether the set sweeps (an invalid window was added), for checkpoints.
  bool irregular() const { return irregular_; }
  // A set with these in-flight windows, in this order (a restored one).
  static MergingWindowSet FromState(std::vector<std::pair<W, W>> mapping, bool irregular) {
    MergingWindowSet s;
    s.mapping_ = std::move(mapping);
    s.irregular_ = irregular;
    return s;
  }

  // See the file comment.  merge_fn(const W& cover, const std::vector<W>&
  // merged_windows, const W& state_window, const std::vector<W>&
  // merged_state_windows).  Uses a per-thread Scratch.
  template <typename MergeFn>
  W add_window(const W& new_window, MergeFn&& merge_fn) {
    static thread_local Scratch scratch;
    return add_window(new_window, scratch, merge_fn);
  }
  // As above, with the caller's scratch; when `state_window` is not null it
  // receives the state window of the result (get_state_window(result)).
  template <typename MergeFn>
  W add_window(const W& new_window, Scratch& s, MergeFn&& merge_fn, W* state_window = nullptr) {
    if (new_window.start > new_window.end) irregular_ = true;
    if (irregular_) return AddBySweep(new_window, s, merge_fn, state_window);

    // The in-flight windows `new` intersects; one equal to it intersects no
    // other (disjointness).
    s.merged.clear();
    W cover = new_window;
    size_t first = 0;  // mapping_ index of s.merged.front()
    for (size_t i = 0; i < mapping_.size(); ++i) {
      const W& win = mapping_[i].first;
      if (win.intersects(new_window)) {
        if (s.merged.empty()) first = i;
        s.merged.push_back(win);
        cover = cover.cover(win);
      }
    }
    if (s.merged.empty()) {
      // No group: `new` is in flight with itself as state window.
      mapping_.emplace_back(new_window, new_window);
      if (state_window != nullptr) *state_window = new_window;
      return new_window;
    }
    if (s.merged.size() == 1) {
      const W sw = mapping_[first].second;
      if (s.merged.front() == new_window) {
        // No group either: `new` is in flight already; its state window is
        // reset to itself, as Flink's mapping.put.
        mapping_[first].second = new_window;
        if (state_window != nullptr) *state_window = new_window;
        return new_window;
      }
      // The group {in-flight window, new}: the window leaves the mapping,
      // the cover joins it at the end with the window's state window
      // (TakeGroup, without the searches); no other state windows.
      std::move(mapping_.begin() + static_cast<std::ptrdiff_t>(first) + 1, mapping_.end(),
                mapping_.begin() + static_cast<std::ptrdiff_t>(first));
      mapping_.back() = std::make_pair(cover, sw);
      s.merged_state_windows.clear();
      if (state_window != nullptr) *state_window = sw;
      if (s.merged.front() != cover) {
        merge_fn(cover, static_cast<const std::vector<W>&>(s.merged), sw,
                 static_cast<const std::vector<W>&>(s.merged_state_windows));
      }
      return cover;
    }
    // One group: `new` + s.merged (distinct, `new` not among them), sorted
    // as the sweep sorts; `new` dropped from it.
    std::sort(s.merged.begin(), s.merged.end());
    TakeGroup(cover, s, merge_fn, state_window);
    return cover;
  }

 private:
  // Step 2 for one group whose in-flight members (sorted, `new` dropped) are
  // s.merged.
  template <typename MergeFn>
  void TakeGroup(const W& cover, Scratch& s, MergeFn& merge_fn, W* state_window_out) {
    const std::vector<W>& merged = s.merged;
    // `merged` is non-empty: a group has two or more distinct windows.
    const W state_window = *get_state_window(merged.front());
    s.merged_state_windows.clear();
    for (const W& m : merged) {
      for (size_t i = 0; i < mapping_.size(); ++i) {
        if (mapping_[i].first == m) {
          s.merged_state_windows.push_back(mapping_[i].second);
          mapping_.erase(mapping_.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    }
    mapping_.emplace_back(cover, state_window);
    s.merged_state_windows.erase(
        std::remove(s.merged_state_windows.begin(), s.merged_state_windows.end(), state_window),
        s.merged_state_windows.end());
    if (state_window_out != nullptr) *state_window_out = state_window;
    if (!(merged.size() == 1 && merged.front() == cover)) {
      merge_fn(cover, merged, state_window,
               static_cast<const std::vector<W>&>(s.merged_state_windows));
    }
  }

  // The general algorithm (Flink's): sort and sweep every window.
  template <typename MergeFn>
  W AddBySweep(const W& new_window, Scratch& s, MergeFn& merge_fn, W* state_window_out) {
    s.windows.clear();
    for (const auto& [win, sw] : mapping_) s.windows.push_back(win);
    s.windows.push_back(new_window);
    s.members.clear();
    s.groups.clear();
    MergeTimeWindows(s.windows, s.group, [&s](const W& cover, const std::vector<W>& members) {
      const size_t b = s.members.size();
      s.members.insert(s.members.end(), members.begin(), members.end());
      s.groups.emplace_back(cover, std::make_pair(b, s.members.size()));
    });

    W result = new_window;
    bool merged_new = false;
    for (size_t g = 0; g < s.groups.size(); ++g) {
      const W cover = s.groups[g].first;
      const auto [b, e] = s.groups[g].second;
      s.merged.assign(s.members.begin() + static_cast<std::ptrdiff_t>(b),
                      s.members.begin() + static_cast<std::ptrdiff_t>(e));
      auto it = std::find(s.merged.begin(), s.merged.end(), new_window);
      if (it != s.merged.end()) {
        s.merged.erase(it);
        merged_new = true;
        result = cover;
      }
      TakeGroup(cover, s, merge_fn, nullptr);
    }
    if (s.groups.empty() || (result == new_window && !merged_new)) {
      bool present = false;
      for (auto& [win, sw] : mapping_) {
        if (win == result) {
          sw = result;  // as Flink's mapping.put
          present = true;
        }
      }
      if (!present) mapping_.emplace_back(result, result);
    }
    if (state_window_out != nullptr) {
      const W* sw = get_state_window(result);
      *state_window_out = sw != nullptr ? *sw : result;
    }
    return result;
  }

  std::vector<std::pair<W, W>> mapping_;  // in-flight window -> state window
  bool irregular_ = false;                // an invalid window was added: sweep
};

}  // namespace tidemark::internal

namespace tidemark {
// Checkpoints: the in-flight windows with their state windows, in order (the
// order decides which state window a merge keeps), and the sweep flag.
template <>
struct StateCodec<internal::MergingWindowSet> {
  using Set = internal::MergingWindowSet;
  static void Encode(internal::StateWriter& w, const Set& s) {
    internal::Encode(w, s.windows());
    internal::Encode(w, s.irregular());
  }
  static Set Decode(internal::StateReader& r) {
    auto mapping = internal::Decode<std::vector<std::pair<Set::W, Set::W>>>(r);
    const bool irregular = internal::Decode<bool>(r);
    return Set::FromState(std::move(mapping), irregular);
  }
};
}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_MERGING_WINDOW_SET_H_
