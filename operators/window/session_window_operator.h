// operators/window/session_window_operator.h
//
// FastSessionWindowOperator: the window operator for event-time sessions
// in the common case, key-major.  It applies
// (FastSessionWindowOperatorApplies) to a merging event-time assigner of
// TimeWindows (EventTimeSessionWindows, DynamicEventTimeSessionWindows), the
// default EventTimeTrigger and contents that keep one value per window
// (reduce, aggregate, with or without a process function over that value;
// no evictor); api/windowed_stream.h builds it then and WindowOperator
// (window_operator.h, the plain port of Flink's WindowOperator) otherwise.
// Its output (values, timestamps, order), late side output, counters and
// timer / contents counts are WindowOperator's for the same job
// (tests/window_fast_path_test.cc compares the two on random inputs,
// tests/differential_test.cc runs it against the reference model).
//
// It is WindowOperator specialised, not a different algorithm: every step of
// WindowOperator's processElement / onEventTime (Flink's
// WindowOperator.java) is done in the same order, with EventTimeTrigger's
// rules (Flink's EventTimeTrigger.java) written in place of the calls:
//   - per key, the in-flight windows are a MergingWindowSet
//     (merging_window_set.h, Flink's MergingWindowSet.java, quirks and
//     all: the state window of a cover, Flink's mapping.put when `new`
//     equals an in-flight window, the sweep for wrapped windows);
//   - the merge callback fails the job when the cover is late
//     (lateness.h IsMergeLate, as Flink's processElement), registers the
//     cover's timer at max_timestamp when the watermark has not reached it
//     (EventTimeTrigger.onMerge), deletes the merged windows' trigger timers
//     (EventTimeTrigger.clear) and cleanup timers, and merges their
//     contents into the cover's state window (sources in order, then the
//     target first: Flink's heap state mergeNamespaces);
//   - a window late after add_window is retired and skipped; otherwise the
//     element is added to its state window, EventTimeTrigger.onElement fires
//     it at once when the watermark has reached max_timestamp (fired by
//     element) or registers the timer at max_timestamp, and the cleanup
//     timer is registered at CleanupTime (none when that is MAX);
//   - an element no window accepted that is also late goes to the late side
//     output or is counted (window_operator_base.h);
//   - a timer at max_timestamp fires the window's contents (if any); a timer
//     at CleanupTime clears the contents, deletes the trigger timer and
//     retires the window (Flink's onEventTime / clearAllState).
//
// What differs is where the state is:
//   - one hash lookup per record: key -> a slot of a slab (KeyState) holding
//     the key's MergingWindowSet, its contents (state window -> value,
//     inline, a few per key) and its live event-time timers ((window,
//     timestamp) pairs, a few per key);
//   - the timers are Flink's set of (timestamp, key, window) triples with
//     registration order within a timestamp, as KeyedTimerService
//     (operators/keyed/timer_service.h) keeps them: registering a live triple
//     does nothing, registering another one appends an entry (slot, slot
//     generation, window) to the bucket of its timestamp, deleting removes it
//     from the key's list only (the entry goes stale), and a watermark takes
//     the entries in (timestamp, entry) order and fires those whose triple is
//     live in the slot's list, which it removes first.  That is TimerQueue's
//     lazy deletion exactly (a deleted and re-registered timer fires at its
//     earliest entry), with the liveness test in the key's slot instead of a
//     hash set of triples.  A slot is freed when its key has no window,
//     contents or timer; its generation then changes, which makes its old
//     entries stale.
//
// Counters: the state size at peak counts (key, state window) contents, as
// WindowOperator's; windows left open at close are the in-flight windows
// with contents (window_operator_base.h).  The introspection reports the
// same timer, contents, trigger state (EventTimeTrigger keeps none) and
// session counts as WindowOperator.
//
// Thread safety: none needed; one task thread calls every method.
#ifndef TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "operators/window/fast_window_operator.h"
#include "operators/window/merging_window_set.h"
#include "operators/window/time_window.h"
#include "operators/window/triggers.h"
#include "operators/window/window_operator_base.h"
#include "runtime/operator.h"

namespace tidemark::internal {

// Whether FastSessionWindowOperator applies to a job with this assigner,
// trigger and contents (see the file comment).
template <typename Assigner, typename TriggerT, typename Contents>
inline constexpr bool FastSessionWindowOperatorApplies = Assigner::kIsEventTime&&
    Assigner::kIsMerging&& std::is_same_v<typename Assigner::WindowType, TimeWindow>&&
        std::is_same_v<TriggerT, EventTimeTrigger>&& SingleValueContents<Contents>;

// The event-time timer entries of FastSessionWindowOperator: per timestamp a
// bucket of entries in registration order, the buckets in a min-heap of
// timestamps (TimerQueue's layout, without its set of live triples: the
// operator decides whether an entry is live).
template <typename Entry>
class TimerEntryQueue {
 public:
  void Push(Timestamp ts, const Entry& e) {
    std::vector<Entry>& entries = BucketFor(ts).entries;
    const size_t before = entries.capacity();
    entries.push_back(e);
    entry_capacity_ += entries.capacity() - before;
  }
  // f(ts, entry) for every entry with ts <= limit, in (ts, registration)
  // order, including entries f pushes.
  template <typename F>
  void PopUpTo(Timestamp limit, F&& f) {
    while (!times_.empty()) {
      const auto [ts, slot] = times_.front();
      if (ts > limit) break;
      Bucket& b = buckets_[slot];
      const Entry e = b.entries[b.head++];
      if (b.head == b.entries.size()) ReleaseFront();
      f(ts, e);
    }
  }
  size_t StateBytes() const {
    return times_.capacity() * sizeof(std::pair<Timestamp, uint32_t>) +
           index_.capacity() * (sizeof(std::pair<Timestamp, uint32_t>) + 1) +
           buckets_.capacity() * sizeof(Bucket) + free_.capacity() * sizeof(uint32_t) +
           entry_capacity_ * sizeof(Entry);
  }

 private:
  struct Bucket {
    size_t head = 0;
    std::vector<Entry> entries;
  };
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  static constexpr size_t kKeepCapacity = 4096;  // larger buckets free their memory
  static bool Later(const std::pair<Timestamp, uint32_t>& a,
                    const std::pair<Timestamp, uint32_t>& b) {
    return a.first > b.first;
  }
  Bucket& BucketFor(Timestamp ts) {
    if (last_slot_ != kNoSlot && last_ts_ == ts) return buckets_[last_slot_];
    auto [it, inserted] = index_.try_emplace(ts, kNoSlot);
    if (inserted) {
      uint32_t slot;
      if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
      } else {
        slot = static_cast<uint32_t>(buckets_.size());
        buckets_.emplace_back();
      }
      it->second = slot;
      times_.emplace_back(ts, slot);
      std::push_heap(times_.begin(), times_.end(), Later);
    }
    last_ts_ = ts;
    last_slot_ = it->second;
    return buckets_[last_slot_];
  }
  void ReleaseFront() {
    const auto [ts, slot] = times_.front();
    std::pop_heap(times_.begin(), times_.end(), Later);
    times_.pop_back();
    index_.erase(ts);
    Bucket& b = buckets_[slot];
    b.head = 0;
    if (b.entries.capacity() > kKeepCapacity) {
      entry_capacity_ -= b.entries.capacity();
      std::vector<Entry>().swap(b.entries);
    } else {
      b.entries.clear();
    }
    free_.push_back(slot);
    if (last_slot_ == slot) last_slot_ = kNoSlot;
  }

  std::vector<Bucket> buckets_;
  std::vector<uint32_t> free_;
  size_t entry_capacity_ = 0;
  absl::flat_hash_map<Timestamp, uint32_t> index_;
  std::vector<std::pair<Timestamp, uint32_t>> times_;  // min-heap of (ts, bucket)
  Timestamp last_ts_ = 0;
  uint32_t last_slot_ = kNoSlot;
};

// T: input; K: key; KeyFn: const T& -> K; Assigner: a session assigner
// (assigners.h); Contents: ReduceContents / AggregateContents
// (window_contents.h).
template <typename T, typename K, typename KeyFn, typename Assigner, typename Contents>
class FastSessionWindowOperator final
    : public WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType,
                                /*kEventTime=*/true, /*kMerging=*/true, /*kTimers=*/false,
                                /*kFunctionState=*/Contents::kNeedsContext> {
  static_assert(FastSessionWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  using Base = WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType, true, true,
                                  false, Contents::kNeedsContext>;

 public:
  using W = TimeWindow;
  using Out = typename Contents::OutputType;
  using Value = typename Contents::Value;

  // The trigger is EventTimeTrigger; taken for WindowOperator's signature.
  FastSessionWindowOperator(KeyFn key, Assigner assigner, EventTimeTrigger /*trigger*/,
                            Contents contents, WindowOperatorConfig<T> config)
      : Base(std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)),
        contents_(std::move(contents)) {}

  void Open(OperatorContext& ctx) override { this->OpenWindowOperator(ctx); }

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    current_key_ = &key;
    this->AssignWindows(assigner_, static_cast<const T&>(value), ts);
    bool skipped = true;
    const uint32_t slot = SlotOf(key);
    for (const W& w : windows_) {
      KeyState& ks = keys_[slot];
      W state_window;
      const W actual = ks.set.add_window(
          w, merge_scratch_,
          [&](const W& cover, const std::vector<W>& merged, const W& sw,
              const std::vector<W>& merged_state_windows) {
            OnMerge(ks, slot, cover, merged, sw, merged_state_windows);
          },
          &state_window);
      if (this->IsWindowLate(actual)) {
        ks.set.retire_window(actual);
        continue;
      }
      skipped = false;
      Value* v = Find(ks, state_window);
      if (v == nullptr) {
        v = &ks.contents.emplace_back(state_window, contents_.NewValue(value)).second;
        ++live_contents_;
      } else {
        contents_.AddTo(*v, value);
      }
      // EventTimeTrigger.onElement.
      if (actual.max_timestamp() <= timers_.current_watermark()) {
        window_ctx_.SetFiredByElement(true);
        EmitValue(ks.key, actual, *v);
        window_ctx_.SetFiredByElement(false);
      } else {
        RegisterTimer(ks, slot, actual, actual.max_timestamp());
      }
      const Timestamp cleanup = this->CleanupTime(actual);
      if (cleanup != kMaxTimestamp) RegisterTimer(ks, slot, actual, cleanup);
    }
    MaybeFree(slot);
    if (skipped) this->HandleSkippedElement(std::move(value), ts);
    current_key_ = nullptr;
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    queue_.PopUpTo(watermark, [this](Timestamp t, const TimerEntry& e) {
      KeyState& ks = keys_[e.slot];
      if (ks.gen != e.gen || !RemoveTimer(ks, e.window, t)) return;  // stale
      OnEventTime(e.slot, e.window, t);
    });
    this->ForwardWatermark(watermark);
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) {
      for (const auto& [k, slot] : index_) {
        const KeyState& ks = keys_[slot];
        for (const auto& [window, state_window] : ks.set.windows())
          if (FindConst(ks, state_window) != nullptr) note(ks.key, window);
      }
    });
  }

  // --- introspection, for tests (WindowOperator's) ---
  size_t num_event_time_timers() const { return live_timers_; }
  // (key, state window) pairs that hold contents.
  size_t num_windows_with_contents() const { return live_contents_; }
  // Bytes allocated for the keys' state and the timer entries.
  size_t StateBytes() const {
    size_t bytes = index_.capacity() * (sizeof(std::pair<K, uint32_t>) + 1) +
                   keys_.capacity() * sizeof(KeyState) + free_.capacity() * sizeof(uint32_t) +
                   queue_.StateBytes();
    for (const auto& [k, slot] : index_) {
      const KeyState& ks = keys_[slot];
      bytes += ks.set.windows().capacity() * sizeof(std::pair<W, W>);
      if (ks.contents.capacity() > kInlineContents)
        bytes += ks.contents.capacity() * sizeof(std::pair<W, Value>);
      if (ks.timers.capacity() > kInlineTimers)
        bytes += ks.timers.capacity() * sizeof(std::pair<W, Timestamp>);
    }
    return bytes;
  }
  size_t num_trigger_states() const { return 0; }  // EventTimeTrigger keeps none
  size_t num_keys_with_sessions() const {
    size_t n = 0;
    for (const auto& [k, slot] : index_) n += !keys_[slot].set.empty();
    return n;
  }

 private:
  using Base::current_key_;
  using Base::current_window_;
  using Base::timers_;
  using Base::window_ctx_;
  using Base::windows_;

  static constexpr size_t kInlineContents = 1;
  static constexpr size_t kInlineTimers = 2;
  // One key's state (see the file comment).
  struct KeyState {
    explicit KeyState(const K& k) : key(k) {}
    K key;
    uint32_t gen = 0;  // changes when the slot is freed
    MergingWindowSet set;
    absl::InlinedVector<std::pair<W, Value>, kInlineContents> contents;  // by state window
    absl::InlinedVector<std::pair<W, Timestamp>, kInlineTimers> timers;  // live timers
  };
  struct TimerEntry {
    uint32_t slot;
    uint32_t gen;
    W window;
  };

  // The slot of `key`, created when absent.
  uint32_t SlotOf(const K& key) {
    auto [it, inserted] = index_.try_emplace(key, 0);
    if (!inserted) return it->second;
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      keys_[slot].key = key;
    } else {
      slot = static_cast<uint32_t>(keys_.size());
      keys_.emplace_back(key);
    }
    it->second = slot;
    return slot;
  }
  // Frees the slot of a key with no window, contents or timer left.
  void MaybeFree(uint32_t slot) {
    KeyState& ks = keys_[slot];
    if (!ks.set.empty() || !ks.contents.empty() || !ks.timers.empty()) return;
    index_.erase(ks.key);
    ++ks.gen;
    free_.push_back(slot);
  }

  static Value* Find(KeyState& ks, const W& sw) {
    for (auto& [w, v] : ks.contents)
      if (w == sw) return &v;
    return nullptr;
  }
  static const Value* FindConst(const KeyState& ks, const W& sw) {
    for (const auto& [w, v] : ks.contents)
      if (w == sw) return &v;
    return nullptr;
  }
  void EraseContents(KeyState& ks, size_t i) {
    if (i + 1 != ks.contents.size()) ks.contents[i] = std::move(ks.contents.back());
    ks.contents.pop_back();
    --live_contents_;
  }

  // Registers timer (window, t) of the key; a live one is left alone.
  void RegisterTimer(KeyState& ks, uint32_t slot, const W& window, Timestamp t) {
    for (const auto& [w, ts] : ks.timers)
      if (ts == t && w == window) return;
    ks.timers.emplace_back(window, t);
    ++live_timers_;
    queue_.Push(t, TimerEntry{slot, ks.gen, window});
  }
  // Deletes timer (window, t) of the key; returns whether it was live.
  bool RemoveTimer(KeyState& ks, const W& window, Timestamp t) {
    for (size_t i = 0; i < ks.timers.size(); ++i) {
      if (ks.timers[i].second == t && ks.timers[i].first == window) {
        if (i + 1 != ks.timers.size()) ks.timers[i] = ks.timers.back();
        ks.timers.pop_back();
        --live_timers_;
        return true;
      }
    }
    return false;
  }

  // WindowOperator::OnMerge with EventTimeTrigger.
  void OnMerge(KeyState& ks, uint32_t slot, const W& cover, const std::vector<W>& merged,
               const W& state_window, const std::vector<W>& merged_state_windows) {
    const Timestamp watermark = timers_.current_watermark();
    if (this->lateness_.IsMergeLate(cover, watermark)) {
      throw std::logic_error(
          "The end timestamp of an event-time window cannot become earlier than the current "
          "watermark by merging. Current watermark: " +
          FormatTimestamp(watermark) + " window: " + cover.ToString());
    }
    // EventTimeTrigger.onMerge.
    if (cover.max_timestamp() > watermark) RegisterTimer(ks, slot, cover, cover.max_timestamp());
    for (const W& m : merged) {
      RemoveTimer(ks, m, m.max_timestamp());  // EventTimeTrigger.clear
      const Timestamp cleanup = this->CleanupTime(m);
      if (cleanup != kMaxTimestamp) RemoveTimer(ks, m, cleanup);
    }
    // KeyWindowContents::Merge: the sources in order, then the target first.
    std::optional<Value> acc;
    for (const W& s : merged_state_windows) {
      for (size_t i = 0; i < ks.contents.size(); ++i) {
        if (ks.contents[i].first != s) continue;
        if (acc) {
          contents_.Combine(*acc, std::move(ks.contents[i].second));
        } else {
          acc.emplace(std::move(ks.contents[i].second));
        }
        EraseContents(ks, i);
        break;
      }
    }
    if (!acc) return;
    if (Value* target = Find(ks, state_window)) {
      contents_.Combine(*target, std::move(*acc));
    } else {
      ks.contents.emplace_back(state_window, std::move(*acc));
      ++live_contents_;
    }
  }

  // WindowOperator::OnTimer for an event-time timer (already removed from the
  // key's live timers) with EventTimeTrigger.
  void OnEventTime(uint32_t slot, const W& window, Timestamp t) {
    KeyState& ks = keys_[slot];
    current_key_ = &ks.key;
    const W* sw = ks.set.get_state_window(window);
    if (sw != nullptr) {  // else merged away: a stale timer
      const W state_window = *sw;
      if (t == window.max_timestamp()) {  // EventTimeTrigger.onEventTime: FIRE
        if (Value* v = Find(ks, state_window)) EmitValue(ks.key, window, *v);
      }
      if (t == this->CleanupTime(window)) {
        for (size_t i = 0; i < ks.contents.size(); ++i) {
          if (ks.contents[i].first == state_window) {
            EraseContents(ks, i);
            break;
          }
        }
        RemoveTimer(ks, window, window.max_timestamp());  // EventTimeTrigger.clear
        ks.set.retire_window(window);
      }
    }
    current_key_ = nullptr;
    MaybeFree(slot);
  }

  // Emits one key's value of `window`.
  void EmitValue(const K& key, const W& window, const Value& value) {
    this->collector_->set_timestamp(window.max_timestamp());
    if constexpr (Contents::kNeedsContext) {
      current_key_ = &key;
      current_window_ = &window;
      window_ctx_.Set(&window, timers_.current_watermark(), timers_.current_processing_time());
    }
    contents_.EmitValue(key, window, value, window_ctx_, *this->collector_);
  }

  KeyFn key_;
  Assigner assigner_;
  Contents contents_;
  absl::flat_hash_map<K, uint32_t> index_;  // key -> slot in keys_
  std::vector<KeyState> keys_;
  std::vector<uint32_t> free_;  // freed slots
  TimerEntryQueue<TimerEntry> queue_;
  MergingWindowSet::Scratch merge_scratch_;
  size_t live_contents_ = 0;
  size_t live_timers_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_
