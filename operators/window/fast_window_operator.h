// operators/window/fast_window_operator.h
//
// FastWindowOperator: the window operator for the common case, window-major.
// It applies (FastWindowOperatorApplies) to a non-merging event-time
// assigner with TimeWindows (tumbling, sliding), the default EventTimeTrigger
// and contents that keep one value per window (reduce, aggregate, with or
// without a process function over that value); api/windowed_stream.h builds
// it then (except sliding windows whose values merge: SlicedWindowOperator,
// sliced_window_operator.h) and WindowOperator (window_operator.h, the plain
// port of Flink's) otherwise.  Its output, side output and counters are WindowOperator's for
// the same job (tests/window_fast_path_test.cc compares the two).
//
// The contents live in a TimeWindowTable (time_window_table.h, which says
// why the output and its order are the same) and the trigger and cleanup
// timers are implicit: all keys of a window share their times.
//
// ProcessElement(v, ts): for each of the assigner's windows, in its order, a
// late window (lateness.h) is skipped; otherwise the element is added to the
// (key, window) value and, when the watermark has already reached the
// window's max timestamp (EventTimeTrigger.on_element says FIRE), the value
// is emitted at once.  An element no window accepted that is also late goes
// to the late-data side output or is counted (window_operator_base.h).
//
// ProcessWatermark(w): the windows whose max timestamp is <= w fire (once;
// keys in arrival order, windows in max-timestamp order) and are dropped at
// their cleanup time, then w is forwarded.
//
// The timer introspection reports the timers WindowOperator would hold.  The
// counters (state size at peak, windows left open at close) are those of
// window_operator_base.h.
//
// Thread safety: none needed; one task thread calls every method.
#ifndef TM_OPERATORS_WINDOW_FAST_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_FAST_WINDOW_OPERATOR_H_

#include <type_traits>
#include <utility>

#include "operators/window/time_window.h"
#include "operators/window/time_window_table.h"
#include "operators/window/triggers.h"
#include "operators/window/window_operator_base.h"
#include "runtime/operator.h"

namespace tidemark::internal {

// Contents that keep one value per window (reduce, aggregate) name its type.
template <typename Contents>
concept SingleValueContents = requires {
  typename Contents::Value;
};

// Whether FastWindowOperator applies to a job with this assigner, trigger
// and contents (see the file comment).
template <typename Assigner, typename TriggerT, typename Contents>
inline constexpr bool FastWindowOperatorApplies =
    Assigner::kIsEventTime && !Assigner::kIsMerging &&
    std::is_same_v<typename Assigner::WindowType, TimeWindow> &&
    std::is_same_v<TriggerT, EventTimeTrigger> && SingleValueContents<Contents>;

// T: input; K: key; KeyFn: const T& -> K; Assigner: see assigners.h;
// Contents: ReduceContents / AggregateContents (window_contents.h).
template <typename T, typename K, typename KeyFn, typename Assigner, typename Contents>
class FastWindowOperator final
    : public WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType,
                                /*kEventTime=*/true, /*kMerging=*/false, /*kTimers=*/false,
                                /*kFunctionState=*/Contents::kNeedsContext> {
  static_assert(FastWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  using Base = WindowOperatorBase<T, K, TimeWindow, typename Contents::OutputType, true, false,
                                  false, Contents::kNeedsContext>;

 public:
  using W = TimeWindow;
  using Out = typename Contents::OutputType;
  using Value = typename Contents::Value;

  // The trigger is EventTimeTrigger; taken for WindowOperator's signature.
  FastWindowOperator(KeyFn key, Assigner assigner, EventTimeTrigger /*trigger*/, Contents contents,
                     WindowOperatorConfig<T> config)
      : Base(std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)),
        contents_(std::move(contents)) {}

  void Open(OperatorContext& ctx) override {
    // No timers are registered: the watermark and the clock only.
    this->OpenWindowOperator(ctx);
  }

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    current_key_ = &key;
    this->AssignWindows(assigner_, static_cast<const T&>(value), ts);
    bool skipped = true;
    const Timestamp watermark = timers_.current_watermark();
    for (const W& w : windows_) {
      if (this->IsWindowLate(w)) continue;
      skipped = false;
      auto [stored, created] =
          table_.FindOrCreate(key, w, watermark, [&] { return contents_.NewValue(value); });
      if (!created) contents_.AddTo(*stored, value);
      // EventTimeTrigger.on_element: FIRE once the watermark has reached
      // the window's end; before that its timer (implicit) will.
      if (w.max_timestamp() <= watermark) {
        window_ctx_.SetFiredByElement(true);
        EmitValue(key, w, *stored);
        window_ctx_.SetFiredByElement(false);
      }
    }
    if (skipped) this->HandleSkippedElement(std::move(value), ts);
    current_key_ = nullptr;
  }

  // A run of records: one virtual call, ProcessElement inlined.
  void ProcessBatch(std::span<Record<T>> records) override {
    ProcessEachInline(*this, records, this->ctx().cancel_flag());
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    FireWindows(watermark);
    this->ForwardWatermark(watermark);
  }

  // Checkpoints: the keyed state store (the function's state) and the
  // window-major table, windows and their keys' arrival order included.
  void SnapshotState(StateWriter& w) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      this->SnapshotKeyedState(w);
      table_.SnapshotTo(w);
    } else {
      ThrowFirstMissingCodec<K, Value>(this->StateWhere());
    }
  }
  void RestoreState(StateReader& r) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      this->RestoreKeyedState(r);
      table_.RestoreFrom(r, KeyGroupRange::Of(this->ctx()));
    } else {
      r.Fail(this->StateWhere() + ": state without tidemark::StateCodec cannot be restored");
    }
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) {
      for (const auto& entry : table_) {
        const auto& win = entry.second;  // a structured binding cannot be captured before clang 16
        win.slots.ForEach([&](const auto& slot) { note(slot.key, win.window); });
      }
    });
  }

  // --- introspection, for tests ---
  // The event-time timers WindowOperator would hold.
  size_t num_event_time_timers() const override {
    return timers_.NumEventTimeTimers() + NumImplicitEventTimeTimers();
  }
  // (key, window) pairs that hold contents.
  size_t num_windows_with_contents() const { return table_.size(); }
  // Bytes allocated for the window contents and timers.
  size_t StateBytes() const { return timers_.StateBytes() + table_.StateBytes(); }
  size_t num_trigger_states() const { return 0; }
  size_t num_keys_with_sessions() const { return 0; }

 private:
  using Base::current_key_;
  using Base::current_window_;
  using Base::timers_;
  using Base::window_ctx_;
  using Base::windows_;

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

  // The implicit timers <= watermark, in timestamp order: a window fires
  // (every key, in arrival order) when the watermark reaches its max
  // timestamp and is dropped at its cleanup time.
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
      it = table_.Erase(it);
    }
  }

  // Per (key, window) the trigger timer until the window fired and the
  // cleanup timer when it differs from it (allowed lateness > 0) and exists.
  size_t NumImplicitEventTimeTimers() const {
    size_t n = 0;
    for (const auto& [k, win] : table_) {
      const Timestamp cleanup = this->CleanupTime(win.window);
      const size_t per_key =
          (win.fired ? 0 : 1) + (cleanup != kMaxTimestamp && cleanup != win.window.max_timestamp());
      n += per_key * win.slots.size();
    }
    return n;
  }

  KeyFn key_;
  Assigner assigner_;
  Contents contents_;
  TimeWindowTable<K, Value> table_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_FAST_WINDOW_OPERATOR_H_
