// operators/keyed/timer_service.h
//
// KeyedTimerService<K, N>: Flink's InternalTimerService for one operator
// instance (docs/semantics.md section 4).  Timers are (timestamp, key,
// namespace) triples forming a set per time domain: registering a triple
// twice keeps one timer, deleting removes it if present.
//
// Event time: AdvanceWatermark(w) sets the current watermark to w FIRST, then
// repeatedly takes the timer with the smallest timestamp while it is <= w and
// calls the event-time callback with its key, namespace and timestamp.  Timers
// registered by that callback with a timestamp <= w fire in the same loop.
// Equal timestamps fire in the order of their first registration: a timer
// deleted and registered again keeps its first place (Flink leaves that
// order unspecified; tests must not depend on it).
//
// Processing time: a timer at T fires once the subtask's clock has passed T
// (clock >= T + 1, as every ProcessingTimeService timer; Flink's
// ProcessingTimeServiceUtil.getProcessingTimeDelay).  The service keeps one
// physical timer in the ProcessingTimeService, at the earliest keyed timer;
// when it fires (with its own time, as Flink's InternalTimerServiceImpl.
// onProcessingTime) the keyed timers up to that time fire, and it is re-armed
// at the next one, which fires in the same FireDue when it is due too.
//
// Implementation: per domain a hash map of the live triples plus the
// registrations in timestamp order: per timestamp a bucket of (key, namespace)
// entries in registration order, the buckets in timestamp order (a queue of
// those registered in increasing order, a binary min-heap of the rest:
// TimeOrder, time_order.h); window timers cluster on few timestamps, so
// registering and firing cost no heap operation per timer (TimerBuckets,
// timer_buckets.h).
// Deletion only removes from the map; an entry whose triple is not in the map
// when it is reached is skipped (lazy deletion), so delete is O(1) and a
// re-registered timer fires once (at its earliest remaining entry: the order
// is that of a heap of (timestamp, registration number) entries with lazy
// deletion).  Each live triple also flags one of its entries (the map holds
// its position), for snapshots: deleting or firing the timer clears the flag.
//
// Checkpoints: Snapshot(w) writes, per domain, every registration still in
// the queue (live or stale, in (timestamp, registration) order) and the set of
// live triples; Restore(r, range) appends those whose key is in `range` (and
// may be called more than once, merging).  Stale entries are kept because
// they matter: a deleted timer registered again fires at its earliest entry.
// The watermark is not part of it (it restarts at MIN, as Flink's).
// Asynchronous (docs/checkpoints.md "The snapshot's phases"): the synchronous
// part takes a copy-on-write view of the buckets (per bucket its range of
// entries and one pointer per chunk; O(buckets + chunks)), and the snapshot
// threads encode the entries and, from their flags, the live set.  While a
// snapshot reads, clearing a flag copies its chunk first, new entries are
// appended past the view, and popped entries are copied out, not moved.
//
// Thread safety: none; one operator instance, one task thread (a snapshot's
// deferred part reads only chunks the task no longer writes).
#ifndef TM_OPERATORS_KEYED_TIMER_SERVICE_H_
#define TM_OPERATORS_KEYED_TIMER_SERVICE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_buckets.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

template <typename K, typename N>
class TimerQueue {
 public:
  // Returns true when the timer was not registered yet.
  bool Add(const K& key, const N& ns, Timestamp ts) {
    if (CacheHolds(key, ns, ts) && cache_live_) return false;
    auto [it, inserted] = live_.try_emplace(std::make_tuple(ts, key, ns));
    Remember(key, ns, ts, true);
    if (!inserted) return false;
    try {
      it->second = queue_.Push(ts, Entry{key, ns, true});
    } catch (...) {
      live_.erase(it);
      cache_valid_ = false;
      throw;
    }
    return true;
  }
  bool Remove(const K& key, const N& ns, Timestamp ts) {
    if (CacheHolds(key, ns, ts) && !cache_live_) return false;
    auto it = live_.find(std::make_tuple(ts, key, ns));
    Remember(key, ns, ts, false);
    if (it == live_.end()) return false;
    queue_.Mutable(it->second).live = false;
    live_.erase(it);
    return true;
  }
  bool Contains(const K& key, const N& ns, Timestamp ts) const {
    if (CacheHolds(key, ns, ts)) return cache_live_;
    return live_.contains(std::make_tuple(ts, key, ns));
  }
  // Earliest live timestamp, kMaxTimestamp when none (drops stale entries).
  Timestamp PeekTime() {
    DropStale();
    return queue_.empty() ? kMaxTimestamp : queue_.front_time();
  }
  bool HasLive() {
    DropStale();
    return !queue_.empty();
  }
  // Fires, in timestamp order, every live timer with timestamp <= limit,
  // including those added by `fire` itself.  fire(key, ns, ts).
  // `state`, when given: the keyed state whose entries of the next key to
  // fire are loaded while this one fires (PrefetchNext).
  template <typename F>
  void FireUpTo(Timestamp limit, F&& fire, const KeyedStateStore<K>* state = nullptr) {
    while (!queue_.empty()) {
      const Timestamp ts = queue_.front_time();
      if (ts > limit) break;
      const BucketPos at = queue_.front_pos();
      Entry e = queue_.PopFront();
      // A stale entry (deleted, or fired through an earlier entry) is skipped.
      auto it = live_.find(std::make_tuple(ts, e.key, e.ns));
      if (it == live_.end()) continue;
      // The timer's flagged entry is a later one of this bucket (it was
      // registered again after a delete): no snapshot sees it live any more.
      if (it->second != at) queue_.Mutable(it->second).live = false;
      live_.erase(it);
      Remember(e.key, e.ns, ts, false);
      PrefetchNext(limit, state);
      fire(e.key, e.ns, ts);
    }
    DropStale();
  }
  size_t size() const { return live_.size(); }
  // Bytes allocated: the buckets, their index and heap, and the set of live
  // timers (capacity).
  size_t StateBytes() const {
    return queue_.StateBytes() +
           live_.capacity() * (sizeof(typename decltype(live_)::value_type) + 1);
  }

  // See "Checkpoints" in the file comment.  K and N have codecs.  The
  // synchronous part takes a copy-on-write view of the buckets (O(buckets +
  // chunks)); the encoding is deferred (StateWriter::Defer): every entry of
  // each bucket, then the live timers (the flagged entries).
  void SnapshotTo(StateWriter& w) {
    w.Defer([view = std::make_shared<const typename TimerBuckets<Entry>::View>(queue_.Share())](
                StateWriter& out) {
      const auto& buckets = view->buckets();
      out.PutVarint(buckets.size());
      size_t live = 0;
      for (const auto& b : buckets) {
        Encode(out, b.ts);
        out.PutVarint(b.count());
        b.ForEach([&](const Entry& e) {
          Encode(out, e.key);
          Encode(out, e.ns);
          live += e.live ? 1 : 0;
        });
      }
      // As std::tuple<Timestamp, K, N>'s codec writes the set's elements.
      out.PutVarint(live);
      for (const auto& b : buckets) {
        b.ForEach([&](const Entry& e) {
          if (!e.live) return;
          Encode(out, b.ts);
          Encode(out, e.key);
          Encode(out, e.ns);
        });
      }
    });
  }
  void RestoreFrom(StateReader& r, const KeyGroupRange& range) {
    cache_valid_ = false;
    // The last entry restored of each timer, to flag those that are live.
    KeyMap<std::tuple<Timestamp, K, N>, BucketPos> last;
    const uint64_t nb = r.GetCount("timer buckets");
    for (uint64_t i = 0; i < nb && r.ok(); ++i) {
      const auto ts = Decode<Timestamp>(r);
      const uint64_t ne = r.GetCount("timer entries");
      for (uint64_t j = 0; j < ne && r.ok(); ++j) {
        K key = Decode<K>(r);
        N ns = Decode<N>(r);
        if (!r.ok() || !range.Contains(key)) continue;
        const BucketPos pos = queue_.Push(ts, Entry{key, ns, false});
        last.insert_or_assign(std::make_tuple(ts, std::move(key), std::move(ns)), pos);
      }
    }
    const uint64_t nl = r.GetCount("live timers");
    for (uint64_t i = 0; i < nl && r.ok(); ++i) {
      auto t = Decode<std::tuple<Timestamp, K, N>>(r);
      if (!r.ok() || !range.Contains(std::get<1>(t))) continue;
      auto [it, inserted] = live_.try_emplace(t);
      if (!inserted) continue;
      if (auto l = last.find(t); l != last.end()) {
        it->second = l->second;
        queue_.Mutable(l->second).live = true;
      } else {
        // A live timer without an entry (not written so): one of its own.
        it->second = queue_.Push(std::get<0>(t), Entry{std::get<1>(t), std::get<2>(t), true});
      }
    }
  }
  // Snapshots whose deferred part still reads the buckets (for tests).
  int live_snapshots() const { return queue_.live_snapshots(); }

  // All live timers as (ts, key, ns), sorted by timestamp (for tests).
  std::vector<std::tuple<Timestamp, K, N>> Snapshot() const {
    std::vector<std::tuple<Timestamp, K, N>> out;
    out.reserve(live_.size());
    for (const auto& [t, pos] : live_) out.push_back(t);
    std::sort(out.begin(), out.end(),
              [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
    return out;
  }

 private:
  // One registration (its timestamp is its bucket's).  `live`: this entry
  // stands for the live timer in snapshots (each live timer flags one of
  // its entries, the one live_ points to).
  struct Entry {
    K key;
    N ns;
    bool live = false;
  };
  // The last (ts, key, ns) added, removed or fired and whether it is live,
  // for small trivially copyable keys and namespaces: a window operator
  // registers the same timer several times per record (trigger and cleanup
  // timer) and deletes it twice when the window merges.
  static constexpr bool kCache = std::is_trivially_copyable_v<K> &&
                                 std::is_trivially_copyable_v<N> &&
                                 std::is_default_constructible_v<K> &&
                                 std::is_default_constructible_v<N> && sizeof(K) + sizeof(N) <= 32;
  struct NoCache {};
  struct Cache {
    Timestamp ts = 0;
    K key{};
    N ns{};
  };

  bool CacheHolds(const K& key, const N& ns, Timestamp ts) const {
    if constexpr (kCache) {
      return cache_valid_ && cache_.ts == ts && HeapKeyEquals(cache_.key, key) && cache_.ns == ns;
    } else {
      return false;
    }
  }
  void Remember(const K& key, const N& ns, Timestamp ts, bool live) {
    if constexpr (kCache) {
      cache_.ts = ts;
      cache_.key = key;
      cache_.ns = ns;
      cache_live_ = live;
      cache_valid_ = true;
    }
  }

  // Starts loading live_'s slot of the next timer to fire, if it is due,
  // and its key's entries in `state`, while the callback of this one runs:
  // timers on many distinct timestamps (one per auction, per session) fire
  // in an order unrelated to the maps', and each lookup missed the caches.
  // Only for keys that are cheap to copy into the lookup's tuple (those of
  // the one-entry cache), and the live set's slot only when the set is too
  // large for the caches (BM_TimerService_Fire: 1.7-2.2x faster with 1 M
  // timers, 8% slower with 10 000 when it was loaded always).
  static constexpr size_t kPrefetchMinCapacity = size_t{1} << 14;
  void PrefetchNext(Timestamp limit, const KeyedStateStore<K>* state) const {
    if constexpr (kCache) {
      if (queue_.empty() || queue_.front_time() > limit) return;
      const Entry& next = queue_.front();
      if (live_.capacity() >= kPrefetchMinCapacity)
        live_.prefetch(std::make_tuple(queue_.front_time(), next.key, next.ns));
      if (state != nullptr) state->Prefetch(next.key);
    } else {
      (void)limit, (void)state;
    }
  }
  // Consumes stale entries at the front until the earliest entry is live.
  void DropStale() {
    while (!queue_.empty()) {
      const Entry& top = queue_.front();
      if (Contains(top.key, top.ns, queue_.front_time())) return;
      queue_.DropFront();
    }
  }

  // The registrations (live and stale) by timestamp; timers fire in
  // (timestamp, registration) order.
  TimerBuckets<Entry> queue_;
  // The live timers, each with the position of its flagged entry.
  KeyMap<std::tuple<Timestamp, K, N>, BucketPos> live_;
  [[no_unique_address]] std::conditional_t<kCache, Cache, NoCache> cache_;
  bool cache_valid_ = false;
  bool cache_live_ = false;
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

  // The keyed state the callbacks read: its entries of the next timer's
  // key are loaded while a timer fires (TimerQueue::FireUpTo).
  void PrefetchStateOf(const KeyedStateStore<K>* state) { prefetch_state_ = state; }

  // See the file comment.
  void AdvanceWatermark(Timestamp w) {
    watermark_ = w;
    event_.FireUpTo(w, on_event_time_, prefetch_state_);
  }

  size_t NumEventTimeTimers() const { return event_.size(); }
  size_t NumProcessingTimeTimers() const { return processing_.size(); }

  static constexpr bool kEncodable = HasStateCodec<K> && HasStateCodec<N>;
  // See "Checkpoints" in the file comment; `where` names the operator in
  // the error thrown when K or N has no codec.
  void Snapshot(StateWriter& w, std::string_view where) {
    if constexpr (kEncodable) {
      event_.SnapshotTo(w);
      processing_.SnapshotTo(w);
    } else {
      ThrowFirstMissingCodec<K, N>(where);
    }
  }
  // Call after Init: the processing-time timer is armed at the earliest
  // restored one.
  void Restore(StateReader& r, const KeyGroupRange& range) {
    if constexpr (kEncodable) {
      event_.RestoreFrom(r, range);
      processing_.RestoreFrom(r, range);
      if (r.ok()) Arm();
    } else {
      r.Fail("timers of a key type without tidemark::StateCodec cannot be restored");
    }
  }
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
    physical_id_ = pts_->RegisterTimer(next, [this](Timestamp time) {
      physical_id_ = 0;
      processing_.FireUpTo(time, on_processing_time_, prefetch_state_);
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
  const KeyedStateStore<K>* prefetch_state_ = nullptr;
};

// The time an operator without keyed timers sees (FastWindowOperator: its
// timers are implicit): KeyedTimerService's watermark and clocks, with no
// timer queues.
class WatermarkOnlyTimeService {
 public:
  void Init(ProcessingTimeService* pts) { pts_ = pts; }
  Timestamp current_watermark() const { return watermark_; }
  Timestamp current_processing_time() const {
    return pts_ ? pts_->CurrentProcessingTime() : kMinTimestamp;
  }
  Timestamp slice_processing_time() const {
    return pts_ ? pts_->SliceProcessingTime() : kMinTimestamp;
  }
  void AdvanceWatermark(Timestamp w) { watermark_ = w; }
  size_t NumEventTimeTimers() const { return 0; }
  size_t NumProcessingTimeTimers() const { return 0; }
  size_t StateBytes() const { return 0; }

 private:
  Timestamp watermark_ = kMinTimestamp;
  ProcessingTimeService* pts_ = nullptr;
};

// What an operator shows of its timers and keyed state to a test harness
// (api/testing/harness.h), which reads them through a dynamic_cast.  The
// operators with keyed timers (keyed process, the keyed two-input operators,
// the interval join, the window operators) implement them.
// Neither is deleted through its pointer: their destructors are protected and
// not virtual, so an operator's destructor needs no thunk for them.
class TimerIntrospection {
 public:
  // Timers registered and not yet fired or deleted, per time domain.
  virtual size_t num_event_time_timers() const = 0;
  virtual size_t num_processing_time_timers() const = 0;

 protected:
  ~TimerIntrospection() = default;
};
template <typename K>
class KeyedStateIntrospection {
 public:
  // The user function's keyed state (KeyedProcessContext::get_state ...).
  virtual KeyedStateStore<K>& keyed_state_store() = 0;

 protected:
  ~KeyedStateIntrospection() = default;
};

// A keyed operator's checkpoint: its keyed state and its timers, written
// under the operator's name and restored for the instance's key groups
// (runtime/core/operator.h).
template <typename K, typename N>
void SnapshotKeyed(StateWriter& w, const OperatorContext& ctx, KeyedStateStore<K>& state,
                   KeyedTimerService<K, N>& timers) {
  const std::string where = "operator '" + ctx.operator_name() + "'";
  state.Snapshot(w, where);
  timers.Snapshot(w, where);
}
template <typename K, typename N>
void RestoreKeyed(StateReader& r, const OperatorContext& ctx, KeyedStateStore<K>& state,
                  KeyedTimerService<K, N>& timers) {
  const KeyGroupRange range = KeyGroupRange::Of(ctx);
  state.Restore(r, range);
  timers.Restore(r, range);
}

// The subtask counter of the processing-time timers still registered when
// the input ended (KeyedOperator::Finish).
inline constexpr char kProcessingTimeTimersDroppedAtEnd[] = "processingTimeTimersDroppedAtEnd";

// The part every keyed operator with timers shares (keyed process, the keyed
// two-input operators, the interval join): keyed state and timers over
// `Base` (a one- or two-input operator class), timers firing on the
// watermark before it is forwarded, checkpoints of both by key group, and
// the introspection above.  The operator calls timers_.Init in its Open.
template <typename Base, typename K, typename N = VoidNamespace>
class KeyedOperator : public Base, public TimerIntrospection, public KeyedStateIntrospection<K> {
 public:
  KeyedOperator() { timers_.PrefetchStateOf(&state_); }
  void ProcessWatermark(Timestamp w) override {
    timers_.AdvanceWatermark(w);
    this->ForwardWatermark(w);
  }
  // At the end of the input the MAX watermark has fired every event-time
  // timer, and the processing-time timers already due have fired; those not
  // yet due are dropped, as in Flink (docs/semantics.md 4), and counted in
  // processingTimeTimersDroppedAtEnd so that they are not lost unseen.
  void Finish() override {
    if (const size_t n = timers_.NumProcessingTimeTimers(); n > 0)
      this->ctx().counter(kProcessingTimeTimersDroppedAtEnd)->Inc(static_cast<int64_t>(n));
  }
  void SnapshotState(StateWriter& w) override { SnapshotKeyed(w, this->ctx(), state_, timers_); }
  void RestoreState(StateReader& r) override { RestoreKeyed(r, this->ctx(), state_, timers_); }
  StateRescaling state_rescaling() const override { return StateRescaling::kKeyGroups; }

  size_t num_event_time_timers() const override { return timers_.NumEventTimeTimers(); }
  size_t num_processing_time_timers() const override { return timers_.NumProcessingTimeTimers(); }
  KeyedStateStore<K>& keyed_state_store() override { return state_; }
  KeyedTimerService<K, N>& timer_service() { return timers_; }

 protected:
  KeyedTimerService<K, N> timers_;
  KeyedStateStore<K> state_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_KEYED_TIMER_SERVICE_H_
