// operators/window/window_operator.h
//
// WindowOperator: Flink's WindowOperator, exactly as docs/semantics.md
// section 6 states it: triggers, evictors, merging windows.  One instance per
// subtask of a keyed window node; it sees only the keys of its key groups.
// The window-major operator for the common case (tumbling / sliding event
// time, EventTimeTrigger, reduce / aggregate) is FastWindowOperator
// (fast_window_operator.h); api/windowed_stream.h picks one of the two.
//
// Definitions (lateness.h; event-time assigners; processing-time ones use
// cleanup time = max_timestamp and are never "late"):
//   cleanup_time(w)  = w.max_timestamp() + allowed_lateness, MAX if that
//                      overflows;
//   window late      : cleanup_time(w) <= current watermark;
//   element late     : ts + allowed_lateness <= current watermark (Java long
//                      arithmetic: wraps, no guard);
//   cleanup timer    : event-time timer at cleanup_time(w), none when MAX.
//
// ProcessElement(v, ts): the assigner's windows, in its order; a late window
// is skipped; otherwise the element is added to the window's contents (for
// sessions: to the state window of the window it merged into), the trigger
// sees it, a FIRE emits the window function's output for non-empty contents
// (every output timestamped w.max_timestamp()), a PURGE clears the contents,
// and the cleanup timer is registered.  An element no window accepted that is
// also late goes to the late-data side output or is counted
// (window_operator_base.h).
//
// Timers: the trigger's timers and the cleanup timer share one set per
// (key, window, timestamp).  At a timer the trigger decides fire/purge; at
// cleanup_time the contents, the trigger state and (sessions) the in-flight
// window are dropped.  With lateness 0 one timer fires and cleans.
//
// Sessions (merging assigners) keep a MergingWindowSet per key; merging
// calls trigger.on_merge(cover), clears the triggers of and deletes the
// cleanup timers of the merged windows, and merges their contents into the
// cover's state window.  Merging into a window whose max_timestamp +
// lateness <= watermark throws (fails the job), as in Flink.
//
// Watermarks: ProcessWatermark(w) fires every event-time timer <= w, then
// forwards w (main and side outputs), so results precede the watermark that
// caused them.
//
// Keyed state and time: the window contents, the trigger state, the window
// function's state and the sessions' window sets live in a KeyedStateStore
// (operators/keyed/keyed_state_store.h; the window is the namespace), the
// timers in a KeyedTimerService (operators/keyed/timer_service.h), both held
// by WindowOperatorBase.
//
// State size and windows left open at close: the counters of
// window_operator_base.h (sessions count by their current, merged window).
//
// Checkpoints: the keyed state store and the timers (window_operator_base.h).
//
// Thread safety: none needed; one task thread calls every method.
#ifndef TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/window/assigners.h"
#include "tidemark/operators/window/merging_window_set.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_contents.h"
#include "tidemark/operators/window/window_context.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// T: input; K: key; KeyFn: const T& -> K; Assigner, TriggerT: see
// assigners.h / triggers.h; Contents: see window_contents.h.
template <typename T, typename K, typename KeyFn, typename Assigner, typename TriggerT,
          typename Contents>
class WindowOperator final
    : public WindowOperatorBase<T, K, typename Assigner::WindowType, typename Contents::OutputType,
                                Assigner::kIsEventTime, Assigner::kIsMerging>,
      private TriggerHost {
  using Base =
      WindowOperatorBase<T, K, typename Assigner::WindowType, typename Contents::OutputType,
                         Assigner::kIsEventTime, Assigner::kIsMerging>;

 public:
  using W = typename Assigner::WindowType;
  using Out = typename Contents::OutputType;

  WindowOperator(KeyFn key, Assigner assigner, TriggerT trigger, Contents contents,
                 WindowOperatorConfig<T> config)
      : Base(std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)),
        trigger_(std::move(trigger)),
        contents_(std::move(contents)),
        trigger_ctx_(this),
        merge_ctx_(this) {
    contents_.Bind(this->state_);
    if constexpr (Assigner::kIsMerging) {
      if (!trigger_.can_merge())
        throw std::invalid_argument(
            "a merging window assigner (sessions) needs a trigger that can merge");
    }
  }

  void Open(OperatorContext& ctx) override {
    this->OpenWindowOperator(ctx);
    // The contents on the job's state backend (RocksDB: a database of the
    // instance's own); trigger state, window sets, function state and timers
    // stay on the heap.
    this->state_.UseBackend(ctx);
    contents_.Bind(this->state_);
    timers_.Init(
        &ctx.timers(), [this](const K& key, const W& w, Timestamp t) { OnEventTime(key, w, t); },
        [this](const K& key, const W& w, Timestamp t) { OnProcessingTime(key, w, t); });
  }

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    current_key_ = &key;
    this->AssignWindows(assigner_, static_cast<const T&>(value), ts);
    bool skipped = true;
    if constexpr (Assigner::kIsMerging) {
      MergingWindowSet& set = merging_[key];
      for (const W& w : windows_) {
        W state_window;
        const W actual = set.add_window(
            w, merge_scratch_,
            [&](const W& cover, const std::vector<W>& merged, const W& sw,
                const std::vector<W>& merged_state_windows) {
              OnMerge(key, cover, merged, sw, merged_state_windows);
            },
            &state_window);
        if (this->IsWindowLate(actual)) {
          set.retire_window(actual);
          continue;
        }
        skipped = false;
        AddAndTrigger(key, value, ts, actual, state_window);
      }
      if (set.empty()) merging_.erase(key);
    } else {
      for (const W& w : windows_) {
        if (this->IsWindowLate(w)) continue;
        skipped = false;
        AddAndTrigger(key, value, ts, w, w);
      }
    }
    if (skipped) this->HandleSkippedElement(std::move(value), ts);
    current_key_ = nullptr;
    this->state_.Trim();
  }

  // A run of records: one virtual call, ProcessElement inlined.
  void ProcessBatch(std::span<Record<T>> records) override {
    ProcessEachInline(*this, records, this->ctx().cancel_flag());
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    this->ForwardWatermark(watermark);
  }

  // Checkpoints: every piece of state (contents, trigger state, window sets,
  // function state) is in the keyed state store, so the store and the timers
  // are all there is (window_operator_base.h).  A checkpoint of the heap's
  // window-major operator for the same window (FastWindowOperator: tumbling
  // or sliding, EventTimeTrigger, reduce / aggregate) restores too, so that
  // a job whose windows outgrew memory moves to RocksDB through a savepoint
  // (RestoreWindowMajor); the other specialised layouts are refused.
  void SnapshotState(StateWriter& w) override { this->SnapshotKeyedState(w); }
  void RestoreState(StateReader& r) override {
    if (!SnapshotHasState(r, kTriggerState)) {
      if constexpr (kRestoresWindowMajor) {
        RestoreWindowMajor(r);
      } else {
        r.Fail(this->StateWhere() + ": " + kWindowLayoutMismatch);
      }
      return;
    }
    this->RestoreKeyedState(r);
    contents_.Restored();
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) {
      if constexpr (Assigner::kIsMerging) {
        for (const auto& [key, set] : merging_)
          for (const auto& [window, state_window] : set.windows())
            if (contents_.Has(key, state_window)) note(key, window);
      } else {
        contents_.ForEachKeyWindow(note);
      }
    });
  }

  // --- introspection, for tests ---
  size_t num_event_time_timers() const override { return timers_.NumEventTimeTimers(); }
  // (key, window) pairs (sessions: state windows) that hold contents.
  size_t num_windows_with_contents() const { return contents_.size(); }
  // Bytes allocated for the window contents, trigger state and timers.
  size_t StateBytes() const {
    return timers_.StateBytes() +
           trigger_state_.capacity() *
               (sizeof(typename std::remove_reference_t<decltype(trigger_state_)>::value_type) +
                1) +
           contents_.StateBytes();
  }
  size_t num_trigger_states() const { return trigger_state_.size(); }
  size_t num_keys_with_sessions() const { return merging_.size(); }

 private:
  using Base::current_key_;
  using Base::current_window_;
  using Base::timers_;
  using Base::window_ctx_;
  using Base::windows_;

  static constexpr bool kRestoresWindowMajor = [] {
    if constexpr (FastWindowOperatorApplies<Assigner, TriggerT, Contents>) {
      return HasStateCodec<K> && HasStateCodec<typename Contents::Value>;
    } else {
      return false;
    }
  }();

  // FastWindowOperator's snapshot: its keyed state store (the window
  // function's state; it has no timers), its layout id, then its table
  // (TimeWindowTable::SnapshotTo).  Each (key, window) becomes the entry and
  // the timers this operator would hold for it: EventTimeTrigger's at the
  // window's max timestamp unless the window has fired, and the cleanup timer
  // (the same one without lateness), registered in the table's order (windows
  // by max timestamp, keys in arrival order), so that a watermark fires them
  // in the order the table would have.  The runtime hands the restored
  // watermark to the operator before any record (the input gate's valve), so
  // a window that had fired is not fired again; before that watermark this
  // operator would take a record for it as on time (as Flink's does) where
  // the table takes it as already fired.
  void RestoreWindowMajor(StateReader& r) requires kRestoresWindowMajor {
    const KeyGroupRange range = KeyGroupRange::Of(this->ctx());
    this->state_.Restore(r, range);
    StateReader peek = r;
    const std::string_view tag = peek.GetBytes("window layout");
    if (peek.ok() && tag.substr(0, kWindowLayoutPrefix.size()) == kWindowLayoutPrefix &&
        tag.substr(kWindowLayoutPrefix.size()) != "fast") {
      r.Fail(this->StateWhere() + ": " + kWindowLayoutMismatch);
      return;
    }
    if (!ReadWindowLayout(r, "fast", this->StateWhere())) return;
    TimeWindowTable<K, typename Contents::Value>::ForEachSnapshotEntry(
        r, range, [this](const TimeWindow& w, bool fired, K&& key, auto&& value) {
          contents_.RestoreValue(key, w, std::move(value));
          if (!fired) timers_.RegisterEventTimeTimer(key, w, w.max_timestamp());
          RegisterCleanupTimer(key, w);
        });
    contents_.Restored();
  }

  void AddAndTrigger(const K& key, const T& value, Timestamp ts, const W& window,
                     const W& state_window) {
    contents_.Add(key, state_window, value, ts);
    current_window_ = &window;
    const TriggerResult r = trigger_.on_element(value, ts, window, trigger_ctx_);
    if (IsFire(r) && contents_.Has(key, state_window)) {
      window_ctx_.SetFiredByElement(true);
      Emit(key, window, state_window);
      window_ctx_.SetFiredByElement(false);
    }
    if (IsPurge(r)) contents_.Clear(key, state_window);
    RegisterCleanupTimer(key, window);
  }

  void Emit(const K& key, const W& window, const W& state_window) {
    this->collector_->set_timestamp(window.max_timestamp());
    current_key_ = &key;
    current_window_ = &window;
    window_ctx_.Set(&window, timers_.current_watermark(), timers_.current_processing_time());
    contents_.Emit(key, window, state_window, timers_.current_watermark(), window_ctx_,
                   *this->collector_);
  }

  void RegisterCleanupTimer(const K& key, const W& w) {
    const Timestamp t = this->CleanupTime(w);
    if (t == kMaxTimestamp) return;
    if constexpr (Assigner::kIsEventTime) {
      timers_.RegisterEventTimeTimer(key, w, t);
    } else {
      timers_.RegisterProcessingTimeTimer(key, w, t);
    }
  }
  void DeleteCleanupTimer(const K& key, const W& w) {
    const Timestamp t = this->CleanupTime(w);
    if (t == kMaxTimestamp) return;
    if constexpr (Assigner::kIsEventTime) {
      timers_.DeleteEventTimeTimer(key, w, t);
    } else {
      timers_.DeleteProcessingTimeTimer(key, w, t);
    }
  }

  void OnMerge(const K& key, const W& cover, const std::vector<W>& merged, const W& state_window,
               const std::vector<W>& merged_state_windows) {
    if (this->lateness_.IsMergeLate(cover, timers_.current_watermark())) {
      throw std::logic_error(
          "The end timestamp of an event-time window cannot become earlier than the current "
          "watermark by merging. Current watermark: " +
          FormatTimestamp(timers_.current_watermark()) + " window: " + cover.ToString());
    }
    current_window_ = &cover;
    merged_windows_ = &merged;
    if constexpr (requires { trigger_.on_merge(cover, merge_ctx_); }) {
      trigger_.on_merge(cover, merge_ctx_);
    }
    merged_windows_ = nullptr;
    for (const W& m : merged) {
      current_window_ = &m;
      trigger_.clear(m, trigger_ctx_);
      if (!trigger_state_.empty()) trigger_state_.erase(KeyWindow<K, W>(key, m));
      DeleteCleanupTimer(key, m);
    }
    contents_.Merge(key, state_window, merged_state_windows);
  }

  // Runs the trigger for a timer and, at cleanup time, drops the window.
  template <bool kEventTime>
  void OnTimer(const K& key, const W& window, Timestamp t) {
    current_key_ = &key;
    current_window_ = &window;
    W state_window = window;
    MergingWindowSet* set = nullptr;
    if constexpr (Assigner::kIsMerging) {
      auto it = merging_.find(key);
      if (it == merging_.end()) return;
      const W* sw = it->second.get_state_window(window);
      if (sw == nullptr) return;  // merged away: a stale timer
      state_window = *sw;
      set = &it->second;
    }
    const TriggerResult r = kEventTime ? trigger_.on_event_time(t, window, trigger_ctx_)
                                       : trigger_.on_processing_time(t, window, trigger_ctx_);
    if (IsFire(r) && contents_.Has(key, state_window)) Emit(key, window, state_window);
    if (IsPurge(r)) contents_.Clear(key, state_window);
    if (Assigner::kIsEventTime == kEventTime && t == this->CleanupTime(window)) {
      contents_.Clear(key, state_window);
      current_window_ = &window;
      trigger_.clear(window, trigger_ctx_);
      if (!trigger_state_.empty()) trigger_state_.erase(KeyWindow<K, W>(key, window));
      this->DropWindowFunctionState(key, window);
      if constexpr (Assigner::kIsMerging) {
        set->retire_window(window);
        if (set->empty()) merging_.erase(key);
      }
    }
    current_key_ = nullptr;
    this->state_.Trim();
  }
  void OnEventTime(const K& key, const W& window, Timestamp t) { OnTimer<true>(key, window, t); }
  void OnProcessingTime(const K& key, const W& window, Timestamp t) {
    OnTimer<false>(key, window, t);
  }

  // --- TriggerHost: for the current key and window ---
  Timestamp HostWatermark() const override { return timers_.current_watermark(); }
  Timestamp HostProcessingTime() const override { return timers_.current_processing_time(); }
  void HostRegisterEventTimeTimer(Timestamp t) override {
    timers_.RegisterEventTimeTimer(*current_key_, *current_window_, t);
  }
  void HostRegisterProcessingTimeTimer(Timestamp t) override {
    timers_.RegisterProcessingTimeTimer(*current_key_, *current_window_, t);
  }
  void HostDeleteEventTimeTimer(Timestamp t) override {
    timers_.DeleteEventTimeTimer(*current_key_, *current_window_, t);
  }
  void HostDeleteProcessingTimeTimer(Timestamp t) override {
    timers_.DeleteProcessingTimeTimer(*current_key_, *current_window_, t);
  }
  TriggerState* HostState(bool create) override {
    KeyWindow<K, W> kw(*current_key_, *current_window_);
    if (create) return &trigger_state_[std::move(kw)];
    auto it = trigger_state_.find(kw);
    return it == trigger_state_.end() ? nullptr : &it->second;
  }
  void HostDropStateIfEmpty() override {
    auto it = trigger_state_.find(KeyWindow<K, W>(*current_key_, *current_window_));
    if (it != trigger_state_.end() && it->second.empty()) trigger_state_.erase(it);
  }
  size_t HostNumMerged() const override { return merged_windows_ ? merged_windows_->size() : 0; }
  TriggerState* HostMergedState(size_t i) override {
    auto it = trigger_state_.find(KeyWindow<K, W>(*current_key_, (*merged_windows_)[i]));
    return it == trigger_state_.end() ? nullptr : &it->second;
  }

  KeyFn key_;
  Assigner assigner_;
  TriggerT trigger_;
  Contents contents_;

  // Tables of the keyed state store (WindowOperatorBase::state_).  Sessions
  // only: the in-flight windows per key (Flink's "merging-window-set" state).
  KeyMap<K, MergingWindowSet>& merging_ =
      this->state_.template Table<MergingWindowSet>("merging-window-set").map;
  MergingWindowSet::Scratch merge_scratch_;  // sessions only
  KeyMap<KeyWindow<K, W>, TriggerState>& trigger_state_ =
      this->state_.template Table<TriggerState, W>(kTriggerState).map;
  TriggerContext trigger_ctx_;
  OnMergeContext merge_ctx_;
  const std::vector<W>* merged_windows_ = nullptr;  // set during on_merge
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_
