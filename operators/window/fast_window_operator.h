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

#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/time_window_table.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// T: input; K: key; KeyFn: const T& -> K; Assigner: see assigners.h;
// Contents: ReduceContents / AggregateContents (window_contents.h).
template <typename T, typename K, typename KeyFn, typename Assigner, typename Contents>
class FastWindowOperator final
    : public SingleValueWindowOperator<T, K, Contents, /*kMerging=*/false> {
  static_assert(FastWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  using Base = SingleValueWindowOperator<T, K, Contents, false>;
  // ReadWindowLayout
  static constexpr std::string_view kLayout = "fast";

 public:
  using typename Base::Out;
  using typename Base::Value;
  using typename Base::W;

  // The trigger is EventTimeTrigger; taken for WindowOperator's signature.
  FastWindowOperator(KeyFn key, Assigner assigner, EventTimeTrigger /*trigger*/, Contents contents,
                     WindowOperatorConfig<T> config)
      : Base(std::move(contents), std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)) {}

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    this->AddToTable(table_, assigner_, key, std::move(value), ts);
  }

  // A run of records: one virtual call, ProcessElement inlined.
  void ProcessBatch(std::span<Record<T>> records) override {
    ProcessEachInline(*this, records, this->ctx().cancel_flag());
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    this->FireTable(table_, watermark);
    this->ForwardWatermark(watermark);
  }

  // Checkpoints: the keyed state store (the function's state) and the
  // window-major table, windows and their keys' arrival order included.
  void SnapshotState(StateWriter& w) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      this->SnapshotKeyedState(w);
      WriteWindowLayout(w, kLayout);
      table_.SnapshotTo(w);
    } else {
      ThrowFirstMissingCodec<K, Value>(this->StateWhere());
    }
  }
  void RestoreState(StateReader& r) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      if (SnapshotHasState(r, kTriggerState)) {
        r.Fail(this->StateWhere() + ": " + kWindowLayoutMismatch);
        return;
      }
      this->RestoreKeyedState(r);
      if (!ReadWindowLayout(r, kLayout, this->StateWhere())) return;
      table_.RestoreFrom(r, KeyGroupRange::Of(this->ctx()));
    } else {
      r.Fail(this->StateWhere() + ": state without tidemark::StateCodec cannot be restored");
    }
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) { this->ForEachTableWindow(table_, note); });
  }

  // --- introspection, for tests ---
  // The event-time timers WindowOperator would hold.
  size_t num_event_time_timers() const override {
    return timers_.NumEventTimeTimers() + this->TableTimers(table_);
  }
  // (key, window) pairs that hold contents.
  size_t num_windows_with_contents() const { return table_.size(); }
  // Bytes allocated for the window contents and timers.
  size_t StateBytes() const { return timers_.StateBytes() + table_.StateBytes(); }
  size_t num_keys_with_sessions() const { return 0; }

 private:
  using Base::timers_;

  KeyFn key_;
  Assigner assigner_;
  TimeWindowTable<K, Value> table_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_FAST_WINDOW_OPERATOR_H_
