// operators/window/timer_service.h
//
// KeyedTimerService<K, N>: Flink's InternalTimerService for one operator
// instance (docs/flink-semantics.md section 4).  Timers are (timestamp, key,
// namespace) triples forming a set per time domain: registering a triple
// twice keeps one timer, deleting removes it if present.
//
// Event time: AdvanceWatermark(w) sets the current watermark to w FIRST, then
// repeatedly takes the timer with the smallest timestamp while it is <= w and
// calls the event-time callback with its key, namespace and timestamp.  Timers
// registered by that callback with a timestamp <= w fire in the same loop.
// Equal timestamps fire in registration order (Flink leaves that order
// unspecified; tests must not depend on it).
//
// Processing time: timers fire when the subtask's ProcessingTimeService clock
// reaches them.  The service keeps one physical timer in the
// ProcessingTimeService, at the earliest keyed timer, and re-arms it after
// each firing.
//
// Implementation: per domain a binary min-heap of entries plus a hash set of
// the live triples.  Deletion only removes from the set; a heap entry whose
// triple is not in the set when it reaches the top is skipped (lazy
// deletion), so delete is O(1) and a re-registered timer fires once.
//
// Thread safety: none; one operator instance, one task thread.
#ifndef TM_OPERATORS_WINDOW_TIMER_SERVICE_H_
#define TM_OPERATORS_WINDOW_TIMER_SERVICE_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "runtime/operator.h"
#include "runtime/time.h"

namespace tidemark {

template <typename K, typename N>
class TimerQueue {
 public:
  // Returns true when the timer was not registered yet.
  bool Add(const K& key, const N& ns, Timestamp ts) {
    if (!live_.emplace(ts, key, ns).second) return false;
    heap_.push_back(Entry{ts, seq_++, key, ns});
    std::push_heap(heap_.begin(), heap_.end(), Later);
    return true;
  }
  bool Remove(const K& key, const N& ns, Timestamp ts) {
    return live_.erase(std::make_tuple(ts, key, ns)) != 0;
  }
  bool Contains(const K& key, const N& ns, Timestamp ts) const {
    return live_.contains(std::make_tuple(ts, key, ns));
  }
  // Earliest live timestamp, kMaxTimestamp when none (drops stale entries).
  Timestamp PeekTime() {
    DropStale();
    return heap_.empty() ? kMaxTimestamp : heap_.front().ts;
  }
  bool HasLive() {
    DropStale();
    return !heap_.empty();
  }
  // Fires, in timestamp order, every live timer with timestamp <= limit,
  // including those added by `fire` itself.  fire(key, ns, ts).
  template <typename F>
  void FireUpTo(Timestamp limit, F&& fire) {
    while (true) {
      DropStale();
      if (heap_.empty() || heap_.front().ts > limit) return;
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      Entry e = std::move(heap_.back());
      heap_.pop_back();
      live_.erase(std::make_tuple(e.ts, e.key, e.ns));
      fire(e.key, e.ns, e.ts);
    }
  }
  size_t size() const { return live_.size(); }
  // Bytes allocated: the heap and the set of live timers (capacity).
  size_t StateBytes() const {
    return heap_.capacity() * sizeof(Entry) +
           live_.capacity() * (sizeof(std::tuple<Timestamp, K, N>) + 1);
  }
  // All live timers as (ts, key, ns), sorted by timestamp (for tests).
  std::vector<std::tuple<Timestamp, K, N>> Snapshot() const {
    std::vector<std::tuple<Timestamp, K, N>> out(live_.begin(), live_.end());
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    return out;
  }

 private:
  struct Entry {
    Timestamp ts;
    uint64_t seq;
    K key;
    N ns;
  };
  // Heap comparator: "a is later than b" makes a min-heap.
  static bool Later(const Entry& a, const Entry& b) {
    return a.ts != b.ts ? a.ts > b.ts : a.seq > b.seq;
  }
  void DropStale() {
    while (!heap_.empty()) {
      const Entry& top = heap_.front();
      if (live_.contains(std::make_tuple(top.ts, top.key, top.ns))) return;
      std::pop_heap(heap_.begin(), heap_.end(), Later);
      heap_.pop_back();
    }
  }

  std::vector<Entry> heap_;
  absl::flat_hash_set<std::tuple<Timestamp, K, N>> live_;
  uint64_t seq_ = 0;
};

template <typename K, typename N>
class KeyedTimerService {
 public:
  // callback(key, namespace, timestamp).
  using Callback = std::function<void(const K&, const N&, Timestamp)>;

  KeyedTimerService() = default;
  KeyedTimerService(const KeyedTimerService&) = delete;
  KeyedTimerService& operator=(const KeyedTimerService&) = delete;
  ~KeyedTimerService() {
    if (pts_ != nullptr && physical_id_ != 0) pts_->Cancel(physical_id_);
  }

  // Must be called before any processing-time timer is registered.
  void Init(ProcessingTimeService* pts, Callback on_event_time, Callback on_processing_time) {
    pts_ = pts;
    on_event_time_ = std::move(on_event_time);
    on_processing_time_ = std::move(on_processing_time);
  }

  Timestamp current_watermark() const { return watermark_; }
  Timestamp current_processing_time() const {
    return pts_ ? pts_->CurrentProcessingTime() : kMinTimestamp;
  }
  // The processing time at the start of the task's slice (see
  // ProcessingTimeService::SliceProcessingTime).
  Timestamp slice_processing_time() const {
    return pts_ ? pts_->SliceProcessingTime() : kMinTimestamp;
  }

  void RegisterEventTimeTimer(const K& key, const N& ns, Timestamp ts) { event_.Add(key, ns, ts); }
  void DeleteEventTimeTimer(const K& key, const N& ns, Timestamp ts) { event_.Remove(key, ns, ts); }
  void RegisterProcessingTimeTimer(const K& key, const N& ns, Timestamp ts) {
    if (processing_.Add(key, ns, ts)) Arm();
  }
  void DeleteProcessingTimeTimer(const K& key, const N& ns, Timestamp ts) {
    processing_.Remove(key, ns, ts);
  }

  // See the file comment.
  void AdvanceWatermark(Timestamp w) {
    watermark_ = w;
    event_.FireUpTo(w, on_event_time_);
  }

  size_t NumEventTimeTimers() const { return event_.size(); }
  size_t NumProcessingTimeTimers() const { return processing_.size(); }
  size_t StateBytes() const { return event_.StateBytes() + processing_.StateBytes(); }
  TimerQueue<K, N>& event_timers() { return event_; }
  TimerQueue<K, N>& processing_timers() { return processing_; }

 private:
  // Keeps the physical timer at the earliest keyed processing-time timer.
  void Arm() {
    if (pts_ == nullptr) return;
    const Timestamp next = processing_.PeekTime();
    if (next == kMaxTimestamp && !processing_.HasLive()) return;
    if (physical_id_ != 0 && physical_time_ <= next) return;
    if (physical_id_ != 0) pts_->Cancel(physical_id_);
    physical_time_ = next;
    physical_id_ = pts_->RegisterTimer(next, [this](Timestamp now) {
      physical_id_ = 0;
      processing_.FireUpTo(now, on_processing_time_);
      Arm();
    });
  }

  Timestamp watermark_ = kMinTimestamp;
  TimerQueue<K, N> event_;
  TimerQueue<K, N> processing_;
  ProcessingTimeService* pts_ = nullptr;
  Callback on_event_time_;
  Callback on_processing_time_;
  int64_t physical_id_ = 0;
  Timestamp physical_time_ = kMaxTimestamp;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_TIMER_SERVICE_H_
