// operators/window/window_operator_base.h
//
// WindowOperatorBase: what both window operators share, so that it is
// written once:
//   - WindowOperator (window_operator.h), the plain port of Flink's
//     WindowOperator (triggers, evictors, merging windows);
//   - FastWindowOperator (fast_window_operator.h), the window-major operator
//     for tumbling / sliding event-time windows with EventTimeTrigger and one
//     value per window.
//   - SlicedWindowOperator (sliced_window_operator.h), stream slicing for
//     sliding event-time windows with reduce / a mergeable aggregate.
//
// It holds the allowed-lateness rules (lateness.h), the late-data handling
// (side output vs. the counters), the counters both publish, the keyed timer
// service (operators/keyed/timer_service.h: the watermark and processing
// time; the general operator's timers), the keyed state store
// (operators/keyed/keyed_state_store.h: the window function's per-window and
// per-key state; the general operator's contents, trigger state and window
// sets), the window function's context and collector.
// Nothing here is virtual beyond the operator interface and the function
// state host, so per-record calls inline.
//
// Late data: an element that no window accepted and that is late
// (IsElementLate) goes unchanged to the late-data side output if one is set,
// counted as "numLateRecordsToUnconsumedSideOutput" when nobody reads that
// output, else it is counted as "numLateRecordsDropped".  One that no window
// accepted and that is not late (a sliding window's gap, size < slide) is
// counted as "numRecordsInNoWindow" (Flink skips it without a count).
//
// State size: at every watermark an operator compares its live
// (key, window) pairs with the largest number seen and, at a new peak,
// publishes that number and the bytes its state occupies as the counters
// "windowPeakLiveKeyWindows" and "windowStateBytesAtPeak".
//
// Left open: when the operator closes it publishes the (key, window) pairs
// holding contents whose window the watermark has not reached (processing
// time windows: every live one) as "windowsNotFiredAtClose", and their
// distinct keys as "windowKeysNotFiredAtClose".
//
// Checkpoints: SnapshotKeyedState / RestoreKeyedState write and read the
// keyed state store and (kTimers) the timers, keeping on restore the entries
// of the instance's key groups (runtime/core/operator.h, "Checkpoints"); each
// operator adds its own state around them.  The watermark is not restored:
// it starts at MIN again, as in Flink, and windows that fired keep their
// state until their cleanup time.  Counters are metrics, not state.
//
// Thread safety: none needed; one task thread calls every method.
#ifndef TM_OPERATORS_WINDOW_WINDOW_OPERATOR_BASE_H_
#define TM_OPERATORS_WINDOW_WINDOW_OPERATOR_BASE_H_

#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "tidemark/operators/basic.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/window/lateness.h"
#include "tidemark/operators/window/local_aggregate_record.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/time_window_table.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_contents.h"
#include "tidemark/operators/window/window_context.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

inline constexpr char kNumLateRecordsDropped[] = "numLateRecordsDropped";
inline constexpr char kNumLateRecordsToUnconsumedSideOutput[] =
    "numLateRecordsToUnconsumedSideOutput";
inline constexpr char kNumRecordsInNoWindow[] = "numRecordsInNoWindow";
inline constexpr char kWindowPeakLiveKeyWindows[] = "windowPeakLiveKeyWindows";
inline constexpr char kWindowStateBytesAtPeak[] = "windowStateBytesAtPeak";
inline constexpr char kWindowsNotFiredAtClose[] = "windowsNotFiredAtClose";
inline constexpr char kWindowKeysNotFiredAtClose[] = "windowKeysNotFiredAtClose";

// The general WindowOperator's trigger state table: its snapshots always
// hold it, the specialised operators' (FastWindowOperator,
// SlicedWindowOperator, FastSessionWindowOperator) never.
inline constexpr char kTriggerState[] = "trigger-state";
// Whether the keyed state store's part of a snapshot at `r` (KeyedStateStore::
// Snapshot's format: a count of tables, each a name and blobs) has a table
// `name`; `r` itself is not moved.
inline bool SnapshotHasState(const StateReader& r, std::string_view name) {
  StateReader p = r;
  const uint64_t n = p.GetVarint("state tables");
  for (uint64_t i = 0; i < n && p.ok(); ++i) {
    const std::string_view table = p.GetBytes("state name");
    const uint64_t blobs = p.GetVarint("state blobs");
    for (uint64_t b = 0; b < blobs && p.ok(); ++b) p.GetBytes("state entries");
    if (p.ok() && table == name) return true;
  }
  return false;
}
// On RocksDB a window job runs the general WindowOperator (its contents in
// its keyed state store), on the heap a specialised one where it applies:
// their snapshots differ.  The general operator restores the window-major
// layout (WindowOperator::RestoreWindowMajor); every other pair is refused.
inline constexpr char kWindowLayoutMismatch[] =
    "the checkpoint holds this window's state in another operator's layout: a window with the "
    "default trigger and reduce / aggregate runs the general WindowOperator on the RocksDB "
    "state backend and a specialised one on the heap; a tumbling window's heap checkpoint (and a "
    "sliding aggregate's without merge) restores on RocksDB, but a RocksDB checkpoint does not "
    "restore on the heap, nor does a pane (a sliding reduce, or aggregate with merge) or session "
    "window's heap checkpoint on RocksDB (docs/checkpoints.md, \"State backends\")";

// The specialised heap operators keep their windows in layouts of their own
// (a window-major table, panes, session lists): each writes its layout's id
// after the keyed state, and a restore into another one (the window's
// assigner or function changed) is refused, naming both, where the bytes of
// one decoded as the other failed with "truncated at byte ...".  A snapshot
// written before the ids has none and is read as before.
inline constexpr std::string_view kWindowLayoutPrefix = "tidemark.wl:";
// What each id is, for the message.
inline std::string WindowLayoutName(std::string_view id) {
  if (id == "fast") return "window-major (tumbling or sliding, one value per window)";
  if (id == "sliced") return "pane (sliding, combined from panes)";
  if (id == "session") return "session (merging windows, one value per session)";
  return std::string(id);
}
inline void WriteWindowLayout(StateWriter& w, std::string_view id) {
  w.PutBytes(std::string(kWindowLayoutPrefix) + std::string(id));
}
// False (r failed) when the snapshot names another layout than `id`.
inline bool ReadWindowLayout(StateReader& r, std::string_view id, const std::string& where) {
  StateReader peek = r;
  const std::string_view tag = peek.GetBytes("window layout");
  if (!peek.ok() || tag.substr(0, kWindowLayoutPrefix.size()) != kWindowLayoutPrefix) return true;
  r = peek;
  const std::string_view was = tag.substr(kWindowLayoutPrefix.size());
  if (was == id) return true;
  r.Fail(where + ": the checkpoint holds the windows of a " + WindowLayoutName(was) +
         " window operator and the job now runs a " + WindowLayoutName(id) +
         " one: the window's assigner or function changed, and their layouts differ (restore "
         "with the window as it was, or give the changed window another uid so that it starts "
         "empty, with --allow-non-restored-state)");
  return false;
}

// Contents that keep one value per window (reduce, aggregate) name its type.
template <typename Contents>
concept SingleValueContents = requires {
  typename Contents::Value;
};

// Whether FastWindowOperator (fast_window_operator.h) applies to a job with
// this assigner, trigger and contents (see that file's comment); the general
// WindowOperator restores its checkpoints, on RocksDB, when it does.
template <typename Assigner, typename TriggerT, typename Contents>
inline constexpr bool FastWindowOperatorApplies =
    Assigner::kIsEventTime && !Assigner::kIsMerging &&
    std::is_same_v<typename Assigner::WindowType, TimeWindow> &&
    std::is_same_v<TriggerT, EventTimeTrigger> && SingleValueContents<Contents>;

// Settings common to every window operator.
// Counts distinct keys, held by pointer (they must outlive it), hashed and
// compared through `hash` and `eq`: one set type for every key type, compiled
// once (window_operator_base.cc), for PublishNotFired at close.
class DistinctKeys {
 public:
  using HashFn = size_t (*)(const void* key);
  using EqFn = bool (*)(const void* a, const void* b);
  DistinctKeys(HashFn hash, EqFn eq);
  ~DistinctKeys();
  void Add(const void* key);
  size_t size() const;

 private:
  struct Hash {
    HashFn fn;
    size_t operator()(const void* k) const { return fn(k); }
  };
  struct Eq {
    EqFn fn;
    bool operator()(const void* a, const void* b) const { return fn(a, b); }
  };
  absl::flat_hash_set<const void*, Hash, Eq> keys_;
};

template <typename T>
struct WindowOperatorConfig {
  int64_t allowed_lateness = 0;          // ms, >= 0
  std::optional<OutputTag<T>> late_tag;  // side_output_late_data
};

// T: input; K: key; W: window; Out: output; kEventTime: the assigner's
// kIsEventTime; kMerging: its kIsMerging (no per-window function state);
// kTimers: whether the operator registers keyed timers (else it sees the
// watermark and the clocks only); kFunctionState: whether the window function
// can reach keyed state through its context (a process function).
template <typename T, typename K, typename W, typename Out, bool kEventTime, bool kMerging,
          bool kTimers = true, bool kFunctionState = true>
class WindowOperatorBase : public OneInputOperator<T, Out>,
                           public TimerIntrospection,
                           private WindowStateHost {
 public:
  // Window contents and timers are keyed state (runtime/core/operator.h).
  StateRescaling state_rescaling() const override { return StateRescaling::kKeyGroups; }
  // --- introspection, for tests ---
  Timestamp current_watermark() const { return timers_.current_watermark(); }
  size_t num_processing_time_timers() const override { return timers_.NumProcessingTimeTimers(); }
  using Timers = std::conditional_t<kTimers, KeyedTimerService<K, W>, WatermarkOnlyTimeService>;
  Timers& timer_service() { return timers_; }
  int64_t allowed_lateness() const { return lateness_.allowed_lateness(); }
  // Flink's WindowOperator.cleanupTime (lateness.h).
  Timestamp CleanupTime(const W& w) const { return lateness_.CleanupTime(w); }

 protected:
  explicit WindowOperatorBase(WindowOperatorConfig<T> config)
      : lateness_(config.allowed_lateness), late_tag_(std::move(config.late_tag)) {
    if constexpr (kFunctionState) {
      function_window_state_ =
          &state_.template Table<TriggerState, W>("window-function-window-state").map;
      function_global_state_ =
          &state_.template Table<TriggerState>("window-function-global-state").map;
    }
  }

  // The shared part of Open; an operator with timers then calls
  // timers_.Init with its callbacks.
  void OpenWindowOperator(OperatorContext& ctx) {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    window_ctx_.SetSideOutputs(&this->side_outputs_);
    window_ctx_.SetStateHost(this);
    window_ctx_.SetSubtask(ctx.subtask_index());
    late_dropped_ = ctx.counter(kNumLateRecordsDropped);
    late_unconsumed_ = ctx.counter(kNumLateRecordsToUnconsumedSideOutput);
    in_no_window_ = ctx.counter(kNumRecordsInNoWindow);
    peak_live_counter_ = ctx.counter(kWindowPeakLiveKeyWindows);
    peak_bytes_counter_ = ctx.counter(kWindowStateBytesAtPeak);
    not_fired_counter_ = ctx.counter(kWindowsNotFiredAtClose);
    not_fired_keys_counter_ = ctx.counter(kWindowKeysNotFiredAtClose);
    if constexpr (!kTimers) timers_.Init(&ctx.timers());
  }

  // The operator's name for errors.
  std::string StateWhere() { return "operator '" + this->ctx().operator_name() + "'"; }
  // See "Checkpoints" in the file comment.
  void SnapshotKeyedState(StateWriter& w) {
    state_.Snapshot(w, StateWhere());
    if constexpr (kTimers) timers_.Snapshot(w, StateWhere());
  }
  void RestoreKeyedState(StateReader& r) {
    const KeyGroupRange range = KeyGroupRange::Of(this->ctx());
    state_.Restore(r, range);
    if constexpr (kTimers) timers_.Restore(r, range);
  }

  // The assigner's windows of an element into windows_ (cleared first).
  // Event-time assigners use processing time at most once (a stagger
  // offset), so they get the slice's time instead of a clock read per record.
  template <typename Assigner>
  void AssignWindows(Assigner& assigner, const T& value, Timestamp ts) {
    windows_.clear();
    assigner.assign_windows(value, ts, AssignerNow(), windows_);
  }
  Timestamp AssignerNow() {
    return kEventTime ? timers_.slice_processing_time() : timers_.current_processing_time();
  }

  bool IsWindowLate(const W& w) const {
    return lateness_.IsWindowLate(w, timers_.current_watermark());
  }
  bool IsElementLate(Timestamp ts) const {
    return lateness_.IsElementLate(ts, timers_.current_watermark());
  }

  // An element that no window accepted: see "Late data" in the file comment.
  // Behind local aggregation (local_aggregate_operator.h) T is a
  // LocalAggregateRecord: a late one is always a record passed alone, and
  // the late side output carries the record itself (a partial is never late
  // there; should one be, it counts as dropped).
  void HandleSkippedElement(T&& value, Timestamp ts) {
    if (!IsElementLate(ts)) {
      in_no_window_->Inc();
      return;
    }
    if (late_tag_) {
      if constexpr (IsLocalAggregateRecord<T>::value) {
        using R = typename T::Record;
        OutputBase* found = this->FindSideOutput(late_tag_->id());
        Output<R>* side = found == nullptr ? nullptr : SideOutputAs<R>(found, late_tag_->id());
        if (value.partial()) {
          late_dropped_->Inc();
        } else if (side != nullptr) {
          side->Collect(std::get<0>(std::move(value.value)), ts);
        } else {
          late_unconsumed_->Inc();
        }
      } else if (Output<T>* side = this->side_output(*late_tag_)) {
        side->Collect(std::move(value), ts);
      } else {
        late_unconsumed_->Inc();
      }
    } else {
      late_dropped_->Inc();
    }
  }

  // See "State size" in the file comment; state_bytes() is called at a new
  // peak only.
  template <typename F>
  void NoteStateSize(size_t live, F&& state_bytes) {
    if (live <= peak_live_) return;
    peak_live_ = live;
    peak_live_counter_->Set(static_cast<int64_t>(live));
    peak_bytes_counter_->Set(static_cast<int64_t>(state_bytes()));
  }

  // See "Left open" in the file comment: for_each(note) calls note(key, w)
  // for every (key, window) holding contents.
  template <typename ForEach>
  void PublishNotFired(ForEach&& for_each) {
    if (not_fired_counter_ == nullptr) return;
    const Timestamp watermark = timers_.current_watermark();
    size_t pairs = 0;
    DistinctKeys keys(
        [](const void* k) -> size_t { return HeapKeyHash(*static_cast<const K*>(k)); },
        [](const void* a, const void* b) {
          return HeapKeyEquals(*static_cast<const K*>(a), *static_cast<const K*>(b));
        });
    for_each([&](const K& key, const W& w) {
      if (kEventTime && w.max_timestamp() <= watermark) return;  // has fired
      ++pairs;
      keys.Add(&key);
    });
    not_fired_counter_->Set(static_cast<int64_t>(pairs));
    not_fired_keys_counter_->Set(static_cast<int64_t>(keys.size()));
  }

  // Drops the window function's per-window state of (key, w), at cleanup.
  void DropWindowFunctionState(const K& key, const W& w) {
    if constexpr (kFunctionState) {
      if (!function_window_state_->empty()) function_window_state_->erase(KeyWindow<K, W>(key, w));
    }
  }
  bool HasWindowFunctionState() const {
    if constexpr (kFunctionState) return !function_window_state_->empty();
    return false;
  }

  const WindowLateness<kEventTime> lateness_;
  std::optional<OutputTag<T>> late_tag_;
  Timers timers_;
  // The operator's keyed state, one table per kind (see the file comment).
  KeyedStateStore<K> state_;
  WindowContext window_ctx_;
  std::optional<Collector<Out>> collector_;

  // Set while a key / window is being processed.
  const K* current_key_ = nullptr;
  const W* current_window_ = nullptr;
  std::vector<W> windows_;  // scratch for the assigner

 private:
  // --- WindowStateHost: for the current key and window ---
  TriggerState* WindowFunctionState(bool create) override {
    if constexpr (kMerging) {
      throw std::logic_error("Per-window state is not allowed when using merging windows.");
    } else if constexpr (!kFunctionState) {
      throw std::logic_error("this window function has no keyed state");
    } else {
      KeyWindow<K, W> kw(*current_key_, *current_window_);
      if (create) return &(*function_window_state_)[std::move(kw)];
      auto it = function_window_state_->find(kw);
      return it == function_window_state_->end() ? nullptr : &it->second;
    }
  }
  TriggerState* GlobalFunctionState(bool create) override {
    if constexpr (!kFunctionState) {
      throw std::logic_error("this window function has no keyed state");
    } else {
      if (create) return &(*function_global_state_)[*current_key_];
      auto it = function_global_state_->find(*current_key_);
      return it == function_global_state_->end() ? nullptr : &it->second;
    }
  }

  // In state_ (kFunctionState only).
  KeyMap<KeyWindow<K, W>, TriggerState>* function_window_state_ = nullptr;
  KeyMap<K, TriggerState>* function_global_state_ = nullptr;
  size_t peak_live_ = 0;
  Counter* late_dropped_ = nullptr;
  Counter* late_unconsumed_ = nullptr;
  Counter* in_no_window_ = nullptr;
  Counter* peak_live_counter_ = nullptr;
  Counter* peak_bytes_counter_ = nullptr;
  Counter* not_fired_counter_ = nullptr;
  Counter* not_fired_keys_counter_ = nullptr;
};

// The base of the window operators for event-time TimeWindows with
// EventTimeTrigger itself and contents that keep one value per window
// (reduce, aggregate): FastWindowOperator, SlicedWindowOperator and
// FastSessionWindowOperator.  It holds the contents and emits their values,
// and has the window-major table's steps (FastWindowOperator's; the sliced
// operator falls back to them near the ends of the time range).
template <typename T, typename K, typename Contents, bool kMerging>
class SingleValueWindowOperator
    : public WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType,
                                /*kEventTime=*/true, kMerging, /*kTimers=*/false,
                                /*kFunctionState=*/Contents::kNeedsContext> {
  using Base = WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType, true, kMerging,
                                  false, Contents::kNeedsContext>;

 public:
  using W = TimeWindow;
  using Out = typename Contents::OutputType;
  using Value = typename Contents::Value;

  // No timers are registered: the watermark and the clock only.
  void Open(OperatorContext& ctx) override { this->OpenWindowOperator(ctx); }
  size_t num_trigger_states() const { return 0; }  // EventTimeTrigger keeps none

 protected:
  SingleValueWindowOperator(Contents contents, WindowOperatorConfig<T> config)
      : Base(std::move(config)), contents_(std::move(contents)) {}

  // Emits one key's value of `window`.
  void EmitValue(const K& key, const W& window, const Value& value) {
    this->collector_->set_timestamp(window.max_timestamp());
    if constexpr (Contents::kNeedsContext) {
      this->current_key_ = &key;
      this->current_window_ = &window;
      this->window_ctx_.Set(&window, this->timers_.current_watermark(),
                            this->timers_.current_processing_time());
    }
    contents_.EmitValue(key, window, value, this->window_ctx_, *this->collector_);
    this->current_key_ = nullptr;
  }
  // The same, fired by an element (EventTimeTrigger.on_element).
  void EmitByElement(const K& key, const W& window, const Value& value) {
    this->window_ctx_.SetFiredByElement(true);
    EmitValue(key, window, value);
    this->window_ctx_.SetFiredByElement(false);
  }

  // Per key of a window, the trigger timer until the window fired and the
  // cleanup timer when it differs from it (allowed lateness > 0) and exists:
  // the event-time timers WindowOperator would hold.
  size_t TimersPerKey(const W& w, bool fired) const {
    const Timestamp cleanup = this->CleanupTime(w);
    return (fired ? 0 : 1) + (cleanup != kMaxTimestamp && cleanup != w.max_timestamp());
  }

  // --- the window-major table (time_window_table.h) ---

  // An element of `key`: for each of the assigner's windows, in its order, a
  // late window is skipped; otherwise the element is added to the (key,
  // window) value and, when the watermark has already reached the window's
  // max timestamp (EventTimeTrigger.on_element says FIRE), the value is
  // emitted at once.  An element no window accepted may be late data.
  template <typename Assigner>
  void AddToTable(TimeWindowTable<K, Value>& table, Assigner& assigner, const K& key, T&& value,
                  Timestamp ts) {
    this->current_key_ = &key;
    bool skipped = true;
    const Timestamp watermark = this->timers_.current_watermark();
    auto add = [&](const W& w) {
      if (this->IsWindowLate(w)) return;
      skipped = false;
      auto [stored, created] =
          table.FindOrCreate(key, w, watermark, [&] { return contents_.NewValue(value); });
      if (!created) contents_.AddTo(*stored, value);
      // Before that, its timer (implicit) will fire it.
      if (w.max_timestamp() <= watermark) EmitByElement(key, w, *stored);
    };
    if constexpr (requires { assigner.window_of(ts, ts); }) {
      add(assigner.window_of(ts, this->AssignerNow()));  // one window a record
    } else {
      this->AssignWindows(assigner, static_cast<const T&>(value), ts);
      for (const W& w : this->windows_) add(w);
    }
    if (skipped) this->HandleSkippedElement(std::move(value), ts);
    this->current_key_ = nullptr;
  }

  // The implicit timers <= watermark, in timestamp order: a window fires
  // (every key, in arrival order) when the watermark reaches its max
  // timestamp and is dropped at its cleanup time.
  void FireTable(TimeWindowTable<K, Value>& table, Timestamp watermark) {
    for (auto it = table.begin();
         it != table.end() && it->second.window.max_timestamp() <= watermark;) {
      auto& win = it->second;
      if (!win.fired) {
        win.fired = true;
        win.slots.ForEach([&](const auto& slot) { EmitValue(slot.key, win.window, slot.value); });
      }
      // Dropped when a timer at the cleanup time fires: the cleanup timer
      // (none when the cleanup time is MAX), or the trigger timer when it is
      // at the cleanup time MAX too (a window whose end wrapped to MIN has
      // max_timestamp MAX; Flink's onEventTime then sees isCleanupTime).
      const Timestamp cleanup = this->CleanupTime(win.window);
      if (cleanup > watermark ||
          (cleanup == kMaxTimestamp && win.window.max_timestamp() != kMaxTimestamp)) {
        ++it;
        continue;
      }
      if (this->HasWindowFunctionState()) {
        win.slots.ForEach(
            [&](const auto& slot) { this->DropWindowFunctionState(slot.key, win.window); });
      }
      it = table.Erase(it);
    }
  }

  // The event-time timers WindowOperator would hold for the table's windows.
  size_t TableTimers(const TimeWindowTable<K, Value>& table) const {
    size_t n = 0;
    for (const auto& [k, win] : table) n += TimersPerKey(win.window, win.fired) * win.slots.size();
    return n;
  }

  // note(key, window) for every (key, window) of the table (PublishNotFired).
  template <typename Note>
  static void ForEachTableWindow(const TimeWindowTable<K, Value>& table, Note&& note) {
    for (const auto& entry : table) {
      const auto& win = entry.second;  // a structured binding cannot be captured before clang 16
      win.slots.ForEach([&](const auto& slot) { note(slot.key, win.window); });
    }
  }

  Contents contents_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_WINDOW_OPERATOR_BASE_H_
