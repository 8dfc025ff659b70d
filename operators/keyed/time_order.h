// operators/keyed/time_order.h
//
// TimeOrder: the buckets of a timer queue in time order, as (timestamp,
// slot) pairs with distinct timestamps -- TimerBuckets' (timer_buckets.h)
// and the session window operator's TimerEntryQueue
// (operators/window/session_window_operator.h).  A pair whose timestamp
// comes after every earlier one's (as most timers come: window ends,
// expiries of records that come in order, the watermark + 1) waits in a
// queue, pushed and popped in O(1); the others go to a binary min-heap.  The
// earliest of the two fronts is kept, so front() is a load.
//
// Thread safety: none; the task thread owns it.
#ifndef TM_OPERATORS_KEYED_TIME_ORDER_H_
#define TM_OPERATORS_KEYED_TIME_ORDER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

class TimeOrder {
 public:
  using Item = std::pair<Timestamp, uint32_t>;

  bool empty() const { return run_head_ == run_.size() && heap_.empty(); }
  size_t size() const { return run_.size() - run_head_ + heap_.size(); }
  // The earliest pair (not empty()).
  const Item& front() const { return earliest_; }
  // Adds (ts, slot); no pair held has timestamp ts.
  void Push(Timestamp ts, uint32_t slot) {
    if (empty() || ts < earliest_.first) earliest_ = {ts, slot};
    if (run_head_ == run_.size()) {
      run_.clear();
      run_head_ = 0;
    }
    if (run_.empty() || ts > run_.back().first) {
      run_.emplace_back(ts, slot);
    } else {
      heap_.emplace_back(ts, slot);
      std::push_heap(heap_.begin(), heap_.end(), Later);
    }
  }
  // Removes front() (not empty()).
  void Pop() {
    if (FrontInRun()) {
      if (++run_head_ == run_.size()) {
        run_.clear();
        run_head_ = 0;
      } else if (run_head_ >= kCompactAfter && 2 * run_head_ >= run_.size()) {
        run_.erase(run_.begin(), run_.begin() + static_cast<std::ptrdiff_t>(run_head_));
        run_head_ = 0;
      }
    } else {
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      heap_.pop_back();
    }
    if (!empty()) earliest_ = FrontInRun() ? run_[run_head_] : heap_.front();
  }
  // f(ts, slot) for every pair, in no particular order.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t i = run_head_; i < run_.size(); ++i) f(run_[i].first, run_[i].second);
    for (const auto& [ts, slot] : heap_) f(ts, slot);
  }
  // Bytes allocated.
  size_t CapacityBytes() const { return (run_.capacity() + heap_.capacity()) * sizeof(Item); }

 private:
  // The queue's popped front part is dropped once it is this long and half
  // of the vector.
  static constexpr size_t kCompactAfter = 1024;
  static bool Later(const Item& a, const Item& b) {
    return a.first > b.first;  // "a is later than b" makes a min-heap
  }
  // Whether the earliest pair is the queue's first (not empty()).
  bool FrontInRun() const {
    return run_head_ < run_.size() &&
           (heap_.empty() || run_[run_head_].first < heap_.front().first);
  }

  std::vector<Item> run_;  // ascending timestamps, from run_head_ on
  size_t run_head_ = 0;
  std::vector<Item> heap_;  // min-heap of the rest
  Item earliest_{};         // of run_ and heap_ (not empty())
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_KEYED_TIME_ORDER_H_
