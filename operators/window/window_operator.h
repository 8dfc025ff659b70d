// operators/window/window_operator.h
//
// WindowOperator: Flink's WindowOperator, exactly as docs/semantics.md
// section 6 states it.  One instance per subtask of a keyed window node; it
// sees only the keys of its key groups.
//
// Definitions (event-time assigners; processing-time ones use cleanup time =
// max_timestamp and are never "late"):
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
// also late goes unchanged to the late-data side output if one is set
// (counted as "numLateRecordsToUnconsumedSideOutput" when nobody reads that
// output), else it is counted as "numLateRecordsDropped".
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
// Window-major fast path: with a non-merging event-time assigner (tumbling,
// sliding), the default EventTimeTrigger and one value per window (reduce,
// aggregate), the contents live in a TimeWindowTable and the trigger and
// cleanup timers are implicit (all keys of a window share their times); see
// time_window_table.h for why the output and its order are the same.  The
// timer introspection below reports the timers the general path would hold.
//
// Keyed state and time: the general path keeps the window contents, the
// trigger state, the window function's state and the sessions' window sets in
// a KeyedStateStore (operators/keyed/keyed_state_store.h; the window is the
// namespace) and its timers in a KeyedTimerService
// (operators/keyed/timer_service.h); the window-major table is its own,
// specialised layout (time_window_table.h).
//
// State size: at every watermark the operator compares its live
// (key, window) pairs with the largest number seen and, at a new peak,
// publishes that number and the bytes its state occupies as the counters
// "windowPeakLiveKeyWindows" and "windowStateBytesAtPeak".
//
// Left open: when the operator closes (at the end of its input nothing is
// left; a cancelled job closes it with windows still open) it publishes the
// (key, window) pairs holding contents whose window the watermark has not
// reached (processing-time windows: every live one; sessions: by their
// current, merged window) as "windowsNotFiredAtClose", and their distinct
// keys as "windowKeysNotFiredAtClose".
//
// Thread safety: none needed; one task thread calls every method.
#ifndef TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "operators/basic.h"
#include "operators/keyed/keyed_state_store.h"
#include "operators/keyed/timer_service.h"
#include "operators/window/assigners.h"
#include "operators/window/merging_window_set.h"
#include "operators/window/time_window.h"
#include "operators/window/time_window_table.h"
#include "operators/window/triggers.h"
#include "operators/window/window_contents.h"
#include "operators/window/window_context.h"
#include "runtime/operator.h"

namespace tidemark {

inline constexpr char kNumLateRecordsDropped[] = "numLateRecordsDropped";
inline constexpr char kNumLateRecordsToUnconsumedSideOutput[] =
    "numLateRecordsToUnconsumedSideOutput";
inline constexpr char kWindowPeakLiveKeyWindows[] = "windowPeakLiveKeyWindows";
inline constexpr char kWindowStateBytesAtPeak[] = "windowStateBytesAtPeak";
inline constexpr char kWindowsNotFiredAtClose[] = "windowsNotFiredAtClose";
inline constexpr char kWindowKeysNotFiredAtClose[] = "windowKeysNotFiredAtClose";

namespace window_internal {
// The per-window value type of contents that keep one (reduce, aggregate),
// else NoValue.
struct NoValue {};
template <typename Contents>
struct SingleValueOf {
  using type = NoValue;
};
template <typename Contents>
requires requires { typename Contents::Value; }
struct SingleValueOf<Contents> {
  using type = typename Contents::Value;
};
struct NoTable {};
}  // namespace window_internal

// Settings common to every window operator.
template <typename T>
struct WindowOperatorConfig {
  int64_t allowed_lateness = 0;          // ms, >= 0
  std::optional<OutputTag<T>> late_tag;  // side_output_late_data
};

// T: input; K: key; KeyFn: const T& -> K; Assigner, TriggerT: see
// assigners.h / triggers.h; Contents: see window_contents.h.
template <typename T, typename K, typename KeyFn, typename Assigner, typename TriggerT,
          typename Contents>
class WindowOperator final : public OneInputOperator<T, typename Contents::OutputType>,
                             private TriggerHost,
                             private WindowStateHost {
 public:
  using W = typename Assigner::WindowType;
  using Out = typename Contents::OutputType;
  using Value = typename window_internal::SingleValueOf<Contents>::type;
  // See the file comment.
  static constexpr bool kWindowMajor = Assigner::kIsEventTime && !Assigner::kIsMerging &&
                                       std::is_same_v<W, TimeWindow> &&
                                       std::is_same_v<TriggerT, EventTimeTrigger> &&
                                       !std::is_same_v<Value, window_internal::NoValue>;

  WindowOperator(KeyFn key, Assigner assigner, TriggerT trigger, Contents contents,
                 WindowOperatorConfig<T> config)
      : key_(std::move(key)),
        assigner_(std::move(assigner)),
        trigger_(std::move(trigger)),
        contents_(std::move(contents)),
        lateness_(config.allowed_lateness),
        late_tag_(std::move(config.late_tag)),
        trigger_ctx_(this),
        merge_ctx_(this) {
    contents_.Bind(state_);
    if (lateness_ < 0) throw std::invalid_argument("allowed lateness must be >= 0");
    if constexpr (Assigner::kIsMerging) {
      if (!trigger_.can_merge())
        throw std::invalid_argument(
            "a merging window assigner (sessions) needs a trigger that can merge");
    }
  }

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    window_ctx_.SetSideOutputs(&this->side_outputs_);
    window_ctx_.SetStateHost(this);
    window_ctx_.SetSubtask(ctx.subtask_index());
    late_dropped_ = ctx.counter(kNumLateRecordsDropped);
    late_unconsumed_ = ctx.counter(kNumLateRecordsToUnconsumedSideOutput);
    peak_live_counter_ = ctx.counter(kWindowPeakLiveKeyWindows);
    peak_bytes_counter_ = ctx.counter(kWindowStateBytesAtPeak);
    not_fired_counter_ = ctx.counter(kWindowsNotFiredAtClose);
    not_fired_keys_counter_ = ctx.counter(kWindowKeysNotFiredAtClose);
    timers_.Init(
        &ctx.timers(), [this](const K& key, const W& w, Timestamp t) { OnEventTime(key, w, t); },
        [this](const K& key, const W& w, Timestamp t) { OnProcessingTime(key, w, t); });
  }

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    current_key_ = &key;
    windows_.clear();
    // Event-time assigners use processing time at most once (a stagger
    // offset), so they get the slice's time instead of a clock read per record.
    assigner_.assign_windows(static_cast<const T&>(value), ts,
                             Assigner::kIsEventTime ? timers_.slice_processing_time()
                                                    : timers_.current_processing_time(),
                             windows_);
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
        if (IsWindowLate(actual)) {
          set.retire_window(actual);
          continue;
        }
        skipped = false;
        AddAndTrigger(key, value, ts, actual, state_window);
      }
      if (set.empty()) merging_.erase(key);
    } else if constexpr (kWindowMajor) {
      const Timestamp watermark = timers_.current_watermark();
      for (const W& w : windows_) {
        if (IsWindowLate(w)) continue;
        skipped = false;
        auto [slot, created] =
            table_.FindOrCreate(key, w, watermark, [&] { return contents_.NewValue(value); });
        if (!created) contents_.AddTo(slot->value, value);
        // EventTimeTrigger.on_element: FIRE once the watermark has reached
        // the window's end; before that its timer (implicit) will.
        if (w.max_timestamp() <= watermark) {
          window_ctx_.SetFiredByElement(true);
          EmitValue(key, w, slot->value);
          window_ctx_.SetFiredByElement(false);
        }
      }
    } else {
      for (const W& w : windows_) {
        if (IsWindowLate(w)) continue;
        skipped = false;
        AddAndTrigger(key, value, ts, w, w);
      }
    }
    if (skipped && IsElementLate(ts)) {
      if (late_tag_) {
        if (Output<T>* side = this->side_output(*late_tag_)) {
          side->Collect(std::move(value), ts);
        } else {
          late_unconsumed_->Inc();
        }
      } else {
        late_dropped_->Inc();
      }
    }
    current_key_ = nullptr;
  }

  void ProcessWatermark(Timestamp watermark) override {
    NoteStateSize();
    timers_.AdvanceWatermark(watermark);
    if constexpr (kWindowMajor) FireWindows(watermark);
    this->ForwardWatermark(watermark);
  }

  void Close() override { PublishNotFired(); }

  // --- introspection, for tests ---
  Timestamp current_watermark() const { return timers_.current_watermark(); }
  size_t num_event_time_timers() const {
    return timers_.NumEventTimeTimers() + NumImplicitEventTimeTimers();
  }
  size_t num_processing_time_timers() const { return timers_.NumProcessingTimeTimers(); }
  // (key, window) pairs (sessions: state windows) that hold contents.
  size_t num_windows_with_contents() const {
    if constexpr (kWindowMajor) {
      return table_.size();
    } else {
      return contents_.size();
    }
  }
  // Bytes allocated for the window contents, trigger state and timers.
  size_t StateBytes() const {
    size_t bytes =
        timers_.StateBytes() +
        trigger_state_.capacity() *
            (sizeof(typename std::remove_reference_t<decltype(trigger_state_)>::value_type) + 1);
    if constexpr (kWindowMajor) {
      bytes += table_.StateBytes();
    } else {
      bytes += contents_.StateBytes();
    }
    return bytes;
  }
  size_t num_trigger_states() const { return trigger_state_.size(); }
  size_t num_keys_with_sessions() const { return merging_.size(); }
  KeyedTimerService<K, W>& timer_service() { return timers_; }
  int64_t allowed_lateness() const { return lateness_; }

  // Flink's WindowOperator.cleanupTime: max_timestamp + lateness, MAX when
  // that overflows (max_timestamp itself may have wrapped near the ends of
  // the range, see assigners.h; the guard is on the sum only).
  Timestamp CleanupTime(const W& w) const {
    if constexpr (Assigner::kIsEventTime) {
      Timestamp r = 0;
      if (__builtin_add_overflow(w.max_timestamp(), lateness_, &r)) return kMaxTimestamp;
      return r;
    } else {
      return w.max_timestamp();
    }
  }

 private:
  bool IsWindowLate(const W& w) const {
    return Assigner::kIsEventTime && CleanupTime(w) <= timers_.current_watermark();
  }
  bool IsElementLate(Timestamp ts) const {
    return Assigner::kIsEventTime && JavaLongAdd(ts, lateness_) <= timers_.current_watermark();
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

  // Window-major path: emits one key's value of `window`.
  void EmitValue(const K& key, const W& window, const Value& value) {
    collector_->set_timestamp(window.max_timestamp());
    if constexpr (Contents::kNeedsContext) {
      current_key_ = &key;
      current_window_ = &window;
      window_ctx_.Set(&window, timers_.current_watermark(), timers_.current_processing_time());
    }
    contents_.EmitValue(key, window, value, window_ctx_, *collector_);
  }

  // Window-major path: the implicit timers <= watermark, in timestamp order:
  // a window fires (every key, in arrival order) when the watermark reaches
  // its max timestamp and is dropped at its cleanup time.
  void FireWindows(Timestamp watermark) {
    for (auto it = table_.begin();
         it != table_.end() && it->second.window.max_timestamp() <= watermark;) {
      auto& win = it->second;
      if (!win.fired) {
        win.fired = true;
        win.slots.ForEach([&](const auto& slot) { EmitValue(slot.key, win.window, slot.value); });
      }
      // Dropped when a timer at the cleanup time fires: the cleanup timer
      // (none when the cleanup time is MAX), or the trigger timer when it is
      // at the cleanup time MAX too (a window whose end wrapped to MIN has
      // max_timestamp MAX; Flink's onEventTime then sees isCleanupTime).
      const Timestamp cleanup = CleanupTime(win.window);
      if (cleanup > watermark ||
          (cleanup == kMaxTimestamp && win.window.max_timestamp() != kMaxTimestamp)) {
        ++it;
        continue;
      }
      if (!function_window_state_.empty()) {
        win.slots.ForEach([&](const auto& slot) {
          function_window_state_.erase(KeyWindow<K, W>(slot.key, win.window));
        });
      }
      it = table_.Erase(it);
    }
  }

  // The timers the general path would hold for the window-major contents:
  // per (key, window) the trigger timer until the window fired and the
  // cleanup timer when it differs from it (allowed lateness > 0) and exists.
  size_t NumImplicitEventTimeTimers() const {
    size_t n = 0;
    if constexpr (kWindowMajor) {
      for (const auto& [k, win] : table_) {
        const Timestamp cleanup = CleanupTime(win.window);
        const size_t per_key = (win.fired ? 0 : 1) +
                               (cleanup != kMaxTimestamp && cleanup != win.window.max_timestamp());
        n += per_key * win.slots.size();
      }
    }
    return n;
  }

  void NoteStateSize() {
    const size_t live = num_windows_with_contents();
    if (live <= peak_live_) return;
    peak_live_ = live;
    peak_live_counter_->Set(static_cast<int64_t>(live));
    peak_bytes_counter_->Set(static_cast<int64_t>(StateBytes()));
  }

  // See "Left open" in the file comment.
  void PublishNotFired() {
    if (not_fired_counter_ == nullptr) return;
    const Timestamp watermark = timers_.current_watermark();
    size_t pairs = 0;
    absl::flat_hash_set<K> keys;
    auto note = [&](const K& key, const W& w) {
      if (Assigner::kIsEventTime && w.max_timestamp() <= watermark) return;  // has fired
      ++pairs;
      keys.insert(key);
    };
    if constexpr (kWindowMajor) {
      for (const auto& [order, win] : table_)
        win.slots.ForEach([&](const auto& slot) { note(slot.key, win.window); });
    } else if constexpr (Assigner::kIsMerging) {
      for (const auto& [key, set] : merging_)
        for (const auto& [window, state_window] : set.windows())
          if (contents_.Has(key, state_window)) note(key, window);
    } else {
      contents_.ForEachKeyWindow(note);
    }
    not_fired_counter_->Set(static_cast<int64_t>(pairs));
    not_fired_keys_counter_->Set(static_cast<int64_t>(keys.size()));
  }

  void Emit(const K& key, const W& window, const W& state_window) {
    collector_->set_timestamp(window.max_timestamp());
    current_key_ = &key;
    current_window_ = &window;
    window_ctx_.Set(&window, timers_.current_watermark(), timers_.current_processing_time());
    contents_.Emit(key, window, state_window, timers_.current_watermark(), window_ctx_,
                   *collector_);
  }

  void RegisterCleanupTimer(const K& key, const W& w) {
    const Timestamp t = CleanupTime(w);
    if (t == kMaxTimestamp) return;
    if constexpr (Assigner::kIsEventTime) {
      timers_.RegisterEventTimeTimer(key, w, t);
    } else {
      timers_.RegisterProcessingTimeTimer(key, w, t);
    }
  }
  void DeleteCleanupTimer(const K& key, const W& w) {
    const Timestamp t = CleanupTime(w);
    if (t == kMaxTimestamp) return;
    if constexpr (Assigner::kIsEventTime) {
      timers_.DeleteEventTimeTimer(key, w, t);
    } else {
      timers_.DeleteProcessingTimeTimer(key, w, t);
    }
  }

  void OnMerge(const K& key, const W& cover, const std::vector<W>& merged, const W& state_window,
               const std::vector<W>& merged_state_windows) {
    if (Assigner::kIsEventTime &&
        JavaLongAdd(cover.max_timestamp(), lateness_) <= timers_.current_watermark()) {
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
    if (Assigner::kIsEventTime == kEventTime && t == CleanupTime(window)) {
      contents_.Clear(key, state_window);
      current_window_ = &window;
      trigger_.clear(window, trigger_ctx_);
      if (!trigger_state_.empty()) trigger_state_.erase(KeyWindow<K, W>(key, window));
      if (!function_window_state_.empty())
        function_window_state_.erase(KeyWindow<K, W>(key, window));
      if constexpr (Assigner::kIsMerging) {
        set->retire_window(window);
        if (set->empty()) merging_.erase(key);
      }
    }
    current_key_ = nullptr;
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

  // --- WindowStateHost ---
  TriggerState* WindowFunctionState(bool create) override {
    if constexpr (Assigner::kIsMerging) {
      throw std::logic_error("Per-window state is not allowed when using merging windows.");
    } else {
      KeyWindow<K, W> kw(*current_key_, *current_window_);
      if (create) return &function_window_state_[std::move(kw)];
      auto it = function_window_state_.find(kw);
      return it == function_window_state_.end() ? nullptr : &it->second;
    }
  }
  TriggerState* GlobalFunctionState(bool create) override {
    if (create) return &function_global_state_[*current_key_];
    auto it = function_global_state_.find(*current_key_);
    return it == function_global_state_.end() ? nullptr : &it->second;
  }

  KeyFn key_;
  Assigner assigner_;
  TriggerT trigger_;
  // The keyed state of the general path: the window contents (Contents::Bind),
  // the trigger state, the window function's per-window and per-key state
  // and the sessions' window sets, one table each.
  KeyedStateStore<K> state_;
  Contents contents_;
  const int64_t lateness_;
  std::optional<OutputTag<T>> late_tag_;

  KeyedTimerService<K, W> timers_;
  using TableT =
      std::conditional_t<kWindowMajor, TimeWindowTable<K, Value>, window_internal::NoTable>;
  TableT table_;  // window-major contents (kWindowMajor)
  size_t peak_live_ = 0;
  Counter* peak_live_counter_ = nullptr;
  Counter* peak_bytes_counter_ = nullptr;
  Counter* not_fired_counter_ = nullptr;
  Counter* not_fired_keys_counter_ = nullptr;
  // Sessions only: the in-flight windows per key (Flink's
  // "merging-window-set" state).
  absl::flat_hash_map<K, MergingWindowSet>& merging_ =
      state_.template Table<MergingWindowSet>("merging-window-set").map;
  MergingWindowSet::Scratch merge_scratch_;  // sessions only
  absl::flat_hash_map<KeyWindow<K, W>, TriggerState>& trigger_state_ =
      state_.template Table<TriggerState, W>("trigger-state").map;
  absl::flat_hash_map<KeyWindow<K, W>, TriggerState>& function_window_state_ =
      state_.template Table<TriggerState, W>("window-function-window-state").map;
  absl::flat_hash_map<K, TriggerState>& function_global_state_ =
      state_.template Table<TriggerState>("window-function-global-state").map;
  TriggerContext trigger_ctx_;
  OnMergeContext merge_ctx_;
  WindowContext window_ctx_;
  std::optional<Collector<Out>> collector_;
  Counter* late_dropped_ = nullptr;
  Counter* late_unconsumed_ = nullptr;

  // Set while a key / window is being processed.
  const K* current_key_ = nullptr;
  const W* current_window_ = nullptr;
  const std::vector<W>* merged_windows_ = nullptr;
  std::vector<W> windows_;  // scratch for the assigner
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_WINDOW_OPERATOR_H_
