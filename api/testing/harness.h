// api/testing/harness.h (installed as <tidemark/testing/harness.h>)
//
// Test harnesses for one operator or user function, without a job (Flink's
// OneInputStreamOperatorTestHarness, KeyedOneInputStreamOperatorTestHarness,
// KeyedTwoInputStreamOperatorTestHarness and ProcessFunctionTestHarnesses).
// The test is the task: it feeds records, watermarks and processing time one
// by one, on its own thread, and reads what the operator emitted, its timers
// and its keyed state; it can snapshot the operator and restore the snapshot
// into a fresh one.  Nothing runs in the background: no threads, no sleeps.
//
//   #include <tidemark/testing/harness.h>
//   using namespace tidemark;
//
//   auto h = harness::ProcessFunctionTestHarnesses::for_keyed_process_function<Event>(
//       MyAlarm(), [](const Event& e) { return e.id; });
//   h.open();
//   h.process_element(Event{"a", 1}, 1000);   // value, event timestamp
//   h.process_watermark(2000);                 // fires event-time timers <= 2000
//   h.set_processing_time(5000);               // fires processing-time timers < 5000
//   EXPECT_EQ(h.extract_output_values(), std::vector<std::string>{"a idle at 2000"});
//   EXPECT_EQ(h.num_event_time_timers(), 0u);
//   EXPECT_EQ(h.get_state<Timestamp>("a", "last"), 1000);
//   harness::OperatorSnapshot snap = h.snapshot();
//   h.close();
//
//   auto restored = harness::ProcessFunctionTestHarnesses::for_keyed_process_function<Event>(
//       MyAlarm(), [](const Event& e) { return e.id; });
//   restored.initialize_state(snap);           // before open()
//   restored.open();  // opens the operator, then restores (the runtime's
//                     // order; Flink restores before the function's open())
//
// Harnesses, all with the members of OperatorTestHarnessBase below:
//   OneInputOperatorTestHarness<In, Out>         any OneInputOperator<In, Out>
//   KeyedOneInputOperatorTestHarness<In, Out, K>  + keyed state of a keyed operator
//   TwoInputOperatorTestHarness<In1, In2, Out>   any TwoInputOperator<In1, In2, Out>
//   KeyedTwoInputOperatorTestHarness<In1, In2, Out, K>  + keyed state
// made from an operator, from a user function (ProcessFunctionTestHarnesses:
// map, flat_map, process, keyed process, co-process, keyed co-process, keyed
// broadcast process) or from the operator a DataStream was built with
// (harness_for<In>(stream): window operators through the windowed stream,
// exactly as the job would run them).
//
// Semantics are the runtime's, where they differ from Flink's harness:
//   - Processing time is a manual clock.  set_processing_time(t) moves it and
//     fires every processing-time timer registered for a time < t: a timer
//     at T fires at set_processing_time(T + 1) or later, as in tidemark's
//     runtime (runtime/core/processing_time_service.h; Flink's harness fires it
//     already at T).
//   - Watermarks reach the operator only when they advance (the task's
//     valve drops the others); a two-input harness hands the operator the
//     minimum of its inputs' watermarks, leaving out an idle input
//     (process_watermark_status1 / 2), as the task's input gate does.
//   - A side output is kept only if the test asks for it before open()
//     (add_side_output(tag)), as a job keeps it only when a stream reads it:
//     a side output nobody reads is dropped (late window data then counts
//     in "numLateRecordsDropped" / "numLateRecordsToUnconsumedSideOutput").
//   - Records a process function emits from a processing-time timer carry
//     no timestamp (kNoTimestamp), as in current Flink (a processing-time
//     window's results carry the window's max timestamp, as in Flink).
//   - A snapshot keeps the input watermark the operator had reached and
//     whether its input was idle (each input's, in a two-input harness), and
//     open() hands them to the restored operator after restoring its state
//     and before any record, as the runtime's input gate does
//     (docs/checkpoints.md, "Watermarks are restored, unlike in Flink"): a
//     record late before the snapshot is late after it, and a window kept
//     for its allowed lateness fires again.  (Flink's harness restarts at
//     MIN.)  Rescaled (snapshots of other subtasks, or several), every input
//     starts at the lowest of their watermarks, active, as a rescaled gate
//     does.
//   - Restoring at another parallelism picks the snapshots as the runtime
//     does, by the operator's state_rescaling(): a keyed operator takes them
//     all and keeps its own key groups, a watermark assigner none, a
//     round-robin one those of the old subtasks s, s + p, ...; one that cannot
//     be rescaled but has state is refused.  A snapshot of another max
//     parallelism is refused.
//
// The namespace is tidemark::harness, not "testing": with `using namespace
// tidemark;` a tidemark::testing would make GoogleTest's `testing::` ambiguous.
//
// Thread safety: none; one test thread drives a harness.
#ifndef TM_API_TESTING_HARNESS_H_
#define TM_API_TESTING_HARNESS_H_

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/api/connected_streams.h"
#include "tidemark/api/environment.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/operators/basic.h"
#include "tidemark/operators/co_process.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/keyed_process.h"
#include "tidemark/operators/process.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/job_config.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/core/processing_time_service.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::harness {

// A record as the operator emitted it (Flink's StreamRecord).
template <typename T>
struct StreamRecord {
  T value;
  Timestamp timestamp = kNoTimestamp;  // kNoTimestamp: the record has none
  bool operator==(const StreamRecord&) const = default;
};
template <typename T>
StreamRecord<T> stream_record(T value, Timestamp timestamp = kNoTimestamp) {
  return StreamRecord<T>{std::move(value), timestamp};
}
// A watermark in an expected output (Flink's Watermark).
struct WatermarkElement {
  Timestamp timestamp;
};
inline WatermarkElement watermark(Timestamp t) { return WatermarkElement{t}; }

// One element of an output, in emission order: a record, a watermark or a
// watermark status (Flink's output queue).  Compares equal to an expected
// stream_record(v, ts) or watermark(w).
template <typename T>
struct Emitted {
  enum Kind { kRecord, kWatermark, kStatus };
  Kind kind = kRecord;
  std::optional<T> value;       // records only
  Timestamp ts = kNoTimestamp;  // the record's timestamp, the watermark, or the status

  Emitted() = default;
  Emitted(Kind k, std::optional<T> v, Timestamp t) : kind(k), value(std::move(v)), ts(t) {}
  template <typename U>
  requires std::constructible_from<T, U> Emitted(
      StreamRecord<U> r)  // NOLINT: implicit, for expected outputs
      : kind(kRecord), value(T(std::move(r.value))), ts(r.timestamp) {}
  Emitted(WatermarkElement w) : kind(kWatermark), ts(w.timestamp) {}  // NOLINT
  bool operator==(const Emitted&) const = default;
};

template <typename T>
std::ostream& operator<<(std::ostream& os, const StreamRecord<T>& r) requires
    requires(std::ostream& o, const T& v) {
  o << v;
}
{
  os << "Record(" << r.value;
  if (r.timestamp != kNoTimestamp) os << " @ " << r.timestamp;
  return os << ")";
}
inline std::ostream& operator<<(std::ostream& os, const WatermarkElement& w) {
  return os << "Watermark(" << w.timestamp << ")";
}
template <typename T>
std::ostream& operator<<(std::ostream& os, const Emitted<T>& e) requires
    requires(std::ostream& o, const T& v) {
  o << v;
}
{
  switch (e.kind) {
    case Emitted<T>::kRecord:
      return os << StreamRecord<T>{*e.value, e.ts};
    case Emitted<T>::kWatermark:
      return os << WatermarkElement{e.ts};
    case Emitted<T>::kStatus:
      return os << "Status(" << ToString(static_cast<WatermarkStatus>(e.ts)) << ")";
  }
  return os;
}

// Records everything an operator emits on one output, in order.
template <typename T>
class RecordingOutput final : public Output<T> {
 public:
  void Collect(T&& v, Timestamp ts) override {
    events_.emplace_back(Emitted<T>::kRecord, std::move(v), ts);
  }
  void EmitWatermark(Timestamp w) override {
    events_.emplace_back(Emitted<T>::kWatermark, std::nullopt, w);
  }
  void EmitStatus(WatermarkStatus s) override {
    events_.emplace_back(Emitted<T>::kStatus, std::nullopt, static_cast<Timestamp>(s));
  }
  // Generalized watermarks are kept apart from the events, in order.
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    generalized_.push_back(w);
  }
  const std::vector<GeneralizedWatermark>& generalized_watermarks() const { return generalized_; }
  std::vector<Emitted<T>>& events() { return events_; }
  const std::vector<Emitted<T>>& events() const { return events_; }

  // Every record, as (value, timestamp).
  std::vector<StreamRecord<T>> Records() const {
    std::vector<StreamRecord<T>> out;
    for (const Emitted<T>& e : events_)
      if (e.kind == Emitted<T>::kRecord) out.push_back(StreamRecord<T>{*e.value, e.ts});
    return out;
  }
  std::vector<T> Values() const {
    std::vector<T> out;
    for (const Emitted<T>& e : events_)
      if (e.kind == Emitted<T>::kRecord) out.push_back(*e.value);
    return out;
  }
  // The records emitted since the last call, as (value, timestamp).
  std::vector<std::pair<T, Timestamp>> TakeRecords() {
    std::vector<std::pair<T, Timestamp>> out;
    for (size_t i = taken_; i < events_.size(); ++i)
      if (events_[i].kind == Emitted<T>::kRecord)
        out.emplace_back(*events_[i].value, events_[i].ts);
    taken_ = events_.size();
    return out;
  }
  std::vector<Timestamp> Watermarks() const {
    std::vector<Timestamp> out;
    for (const auto& e : events_)
      if (e.kind == Emitted<T>::kWatermark) out.push_back(e.ts);
    return out;
  }
  void Clear() {
    events_.clear();
    generalized_.clear();
    taken_ = 0;
  }

 private:
  std::vector<Emitted<T>> events_;
  std::vector<GeneralizedWatermark> generalized_;
  size_t taken_ = 0;
};

// Where the operator runs: which subtask of how many (that decides the key
// groups a restore keeps: Flink's max parallelism, subtask index and
// parallelism), the clock's start, and the operator's name in errors.
struct HarnessOptions {
  int subtask = 0;
  int parallelism = 1;
  int max_parallelism = 128;
  Timestamp processing_time = 0;
  std::string operator_name = "operator-under-test";
  // Where the operator's keyed state lives (StateBackend::rocksdb(): the
  // program links tidemark::rocksdb).
  StateBackend state_backend;
};

// An operator's state at a checkpoint (Flink's OperatorSubtaskState): the
// bytes its SnapshotState wrote and the subtask that wrote them.
struct OperatorSnapshot {
  std::string bytes;
  int64_t checkpoint_id = 0;
  int subtask = 0;
  int parallelism = 1;
  int max_parallelism = 128;
  // The input watermark each input had reached and whether each input was
  // idle (what the task's input gate snapshots beside the operator); open()
  // hands them back (OperatorTestHarnessBase::RestoreInputs).  Empty: MIN,
  // and active.
  std::vector<Timestamp> input_watermarks;
  std::vector<bool> input_idle;
};

// What every harness has: the operator's surroundings (clock, timers,
// metrics), its outputs, snapshot and restore.
template <typename Out>
class OperatorTestHarnessBase {
 public:
  OperatorTestHarnessBase(const OperatorTestHarnessBase&) = delete;
  OperatorTestHarnessBase& operator=(const OperatorTestHarnessBase&) = delete;
  // The operator goes first: it may cancel timers in the service.
  virtual ~OperatorTestHarnessBase() { op_.reset(); }

  // --- before open() ---
  // Keeps what the operator emits to side output `tag` (get_side_output);
  // returns the recording output itself.
  template <typename V>
  RecordingOutput<V>& add_side_output(const OutputTag<V>& tag) {
    RequireNotOpen("add_side_output");
    auto out = std::make_unique<SideOutput<V>>();
    RecordingOutput<V>& recorder = out->output;
    op_->set_side_output(tag.id(), &recorder);
    side_[tag.id()] = std::move(out);
    return recorder;
  }
  // The state open() restores, as after a failure: one snapshot, or several
  // (those of other subtasks, to test rescaling: a keyed operator keeps the
  // keys of its own key groups, HarnessOptions).
  void initialize_state(OperatorSnapshot snapshot) {
    initialize_state(std::vector<OperatorSnapshot>{std::move(snapshot)});
  }
  void initialize_state(std::vector<OperatorSnapshot> snapshots) {
    RequireNotOpen("initialize_state");
    restore_ = std::move(snapshots);
  }

  // --- the lifecycle (runtime/core/operator.h) ---
  // Opens the operator (and the user function), then restores the state
  // given to initialize_state.  Throws std::runtime_error when a snapshot
  // does not read back.
  void open() {
    RequireNotOpen("open");
    const size_t inputs = InputWatermarks().size();
    for (const OperatorSnapshot& s : restore_) {
      const size_t had =
          !s.input_watermarks.empty() ? s.input_watermarks.size() : s.input_idle.size();
      if ((!s.input_watermarks.empty() && s.input_watermarks.size() != inputs) ||
          (!s.input_idle.empty() && s.input_idle.size() != inputs))
        throw std::invalid_argument("initialize_state: a snapshot of an operator with " +
                                    std::to_string(had) + " input(s) restored into one with " +
                                    std::to_string(inputs));
    }
    const std::vector<const OperatorSnapshot*> picked = SnapshotsToRestore();
    op_->Open(ctx_);
    opened_ = true;
    for (const OperatorSnapshot* snapshot : picked) {
      const OperatorSnapshot& s = *snapshot;
      internal::StateReader r(s.bytes);
      op_->RestoreState(r);
      if (!r.AtEnd())
        throw std::runtime_error(
            "restoring operator '" + options_.operator_name + "': " +
            (r.ok() ? std::string("bytes left over (is the snapshot another operator's, or of "
                                  "another state layout?)")
                    : r.error()));
    }
    RestoreInputs();
    restore_.clear();
  }
  // The end of a bounded input, as the runtime ends it: the final
  // watermark (kMaxTimestamp: every event-time timer fires), then Finish().
  // Records, watermarks, statuses, processing time or a second end_input()
  // after it are errors (the runtime drops the processing-time timers not
  // yet due at the end of input).
  void end_input() {
    RequireInput("end_input");
    ended_ = true;
    DeliverWatermark(kMaxTimestamp);
    op_->Finish();
  }
  // Closes the operator (and the user function).
  void close() {
    RequireOpen("close");
    op_->Close();
    closed_ = true;
  }

  // --- processing time ---
  // Moves the clock to `t` and fires every processing-time timer due, i.e.
  // registered for a time < t (see the file comment).  Before open() it only
  // sets the clock; after end_input() or close() it is an error (the runtime
  // drops the timers not yet due when the input ends, and the operator is
  // gone after close()).
  void set_processing_time(Timestamp t) {
    if (closed_) throw std::logic_error("set_processing_time() after close()");
    if (ended_)
      throw std::logic_error(
          "set_processing_time() after end_input() (the runtime drops the processing-time "
          "timers not yet due at the end of input)");
    clock_.Set(t);
    timers_.FireDue(t);
  }
  Timestamp get_processing_time() const { return clock_.NowMillis(); }

  // --- checkpoints ---
  // The operator's state now (after PrepareSnapshotPreBarrier, as at a
  // barrier); give it to another harness's initialize_state.
  OperatorSnapshot snapshot(int64_t checkpoint_id = 0) {
    RequireOpen("snapshot");
    op_->PrepareSnapshotPreBarrier(checkpoint_id);
    internal::StateWriter w;
    op_->SnapshotState(w);
    return OperatorSnapshot{w.Release(),
                            checkpoint_id,
                            options_.subtask,
                            options_.parallelism,
                            options_.max_parallelism,
                            InputWatermarks(),
                            InputsIdle()};
  }
  void notify_checkpoint_complete(int64_t checkpoint_id) {
    op_->NotifyCheckpointComplete(checkpoint_id);
  }

  // --- what it emitted ---
  // Everything on the main output, in order: records, watermarks, statuses.
  const std::vector<Emitted<Out>>& get_output() const { return main_.events(); }
  // The main output's records (Flink's extractOutputStreamRecords) and
  // their values (extractOutputValues).
  std::vector<StreamRecord<Out>> extract_output_records() const { return main_.Records(); }
  std::vector<Out> extract_output_values() const { return main_.Values(); }
  // The watermarks the operator forwarded.
  std::vector<Timestamp> get_emitted_watermarks() const { return main_.Watermarks(); }
  // Forgets what was emitted so far (main and side outputs).
  void clear_output() {
    main_.Clear();
    for (auto& [tag, out] : side_) out->Clear();
  }
  // The records on side output `tag` (registered with add_side_output).
  template <typename V>
  std::vector<StreamRecord<V>> get_side_output(const OutputTag<V>& tag) const {
    auto it = side_.find(tag.id());
    if (it == side_.end())
      throw std::logic_error("side output '" + tag.id() +
                             "' was not registered: call add_side_output(tag) before open()");
    auto* out = dynamic_cast<SideOutput<V>*>(it->second.get());
    if (out == nullptr)
      throw std::logic_error("side output '" + tag.id() + "' was registered with another type");
    return out->output.Records();
  }

  // --- timers, metrics, the operator ---
  // Timers registered and not yet fired or deleted, of an operator with
  // keyed timers (keyed process, co-process, interval join, windows).
  size_t num_event_time_timers() const { return Timers().num_event_time_timers(); }
  size_t num_processing_time_timers() const { return Timers().num_processing_time_timers(); }
  // The subtask's counter `name` (0 if nothing counted it).
  int64_t counter(const std::string& name) { return metrics_.GetCounter(name)->Get(); }
  OperatorBase& get_operator() { return *op_; }
  template <typename Op>
  Op& get_operator() {
    auto* op = dynamic_cast<Op*>(op_.get());
    if (op == nullptr) throw std::logic_error("the operator under test is not of that type");
    return *op;
  }
  // For the runtime's own tests.
  internal::ProcessingTimeService& processing_time_service() { return timers_; }
  RecordingOutput<Out>& main_output() { return main_; }
  // Delivers watermark status `s` (idle / active) as the task would (the
  // two-input harness: of both inputs, or of one with
  // process_watermark_status1 / 2).
  void process_watermark_status(WatermarkStatus s) {
    RequireInput("process_watermark_status");
    idle_ = s == WatermarkStatus::kIdle;
    op_->ProcessStatus(s);
  }
  // Delivers generalized watermark `w` (docs/generalized-watermarks.md) as
  // the task would once its input's channels combined it; what the operator
  // sends on is in generalized_watermarks() of the output.
  void process_generalized_watermark(const GeneralizedWatermark& w) {
    this->RequireInput("process_generalized_watermark");
    op_->ProcessGeneralizedWatermark(w);
  }

 protected:
  OperatorTestHarnessBase(std::unique_ptr<OperatorBase> op, HarnessOptions options)
      : options_(std::move(options)),
        op_(std::move(op)),
        clock_(options_.processing_time),
        timers_(&clock_),
        metrics_(options_.operator_name, options_.subtask, options_.parallelism, 1),
        ctx_(options_.operator_name, options_.subtask, options_.parallelism,
             options_.max_parallelism, &metrics_, &timers_, &config_, nullptr) {
    if (op_ == nullptr) throw std::invalid_argument("test harness: no operator");
    config_.state_backend = options_.state_backend;
    op_->set_output(&main_);
  }

  // Harness records as the runtime's batch (process_elements).
  template <typename T>
  static std::vector<internal::Record<T>> ToBatch(std::vector<StreamRecord<T>> records) {
    std::vector<internal::Record<T>> batch;
    batch.reserve(records.size());
    for (StreamRecord<T>& r : records)
      batch.push_back(internal::Record<T>{std::move(r.value), r.timestamp});
    return batch;
  }
  // Hands `w` to the operator if it advances the watermark (the valve's rule).
  void DeliverWatermark(Timestamp w) {
    if (w <= watermark_) return;
    watermark_ = w;
    op_->ProcessWatermark(w);
  }
  void RequireOpen(const char* what) const {
    if (!opened_) throw std::logic_error(std::string(what) + "() before open()");
    if (closed_) throw std::logic_error(std::string(what) + "() after close()");
  }
  // What an input takes (records, watermarks): open, and its input not ended.
  void RequireInput(const char* what) const {
    RequireOpen(what);
    if (ended_) throw std::logic_error(std::string(what) + "() after end_input()");
  }
  // Each input's watermark, for a snapshot; and setting them after a restore
  // (one per input), handing the operator what that makes its watermark.
  // One input here; the two-input harness has two.
  virtual std::vector<Timestamp> InputWatermarks() const { return {watermark_}; }
  virtual std::vector<bool> InputsIdle() const { return {idle_}; }
  // Rescaled: every input at `w`, active.
  virtual void SetInputWatermarks(const std::vector<Timestamp>& w) { DeliverWatermark(w.at(0)); }
  // The subtask's own snapshot: each input's watermark and idleness (either
  // may be empty: MIN, active), handed on as the gate's restored valves are:
  // the combined watermark, then IDLE when the operator's input is idle.
  virtual void RestoreInputState(const std::vector<Timestamp>& w, const std::vector<bool>& idle) {
    if (!w.empty()) DeliverWatermark(w.at(0));
    if (!idle.empty() && idle.at(0)) {
      idle_ = true;
      op_->ProcessStatus(WatermarkStatus::kIdle);
    }
  }
  // What the input gate restores besides the operator's state
  // (runtime/io/detail/input_gate.cc): restored at the same parallelism from
  // this subtask's own snapshot, each input's watermark and the status;
  // otherwise (rescaled: other subtasks, several snapshots) every input at
  // the lowest of the snapshots' watermarks, active.  Handed to the operator
  // after its state and before any record.  A snapshot without watermarks
  // (made by hand) counts as MIN.
  void RestoreInputs() {
    const size_t inputs = InputWatermarks().size();
    if (restore_.empty()) return;
    const OperatorSnapshot& first = restore_.front();
    if (restore_.size() == 1 && first.parallelism == options_.parallelism &&
        first.subtask == options_.subtask) {
      RestoreInputState(first.input_watermarks, first.input_idle);
      return;
    }
    Timestamp lowest = kMaxTimestamp;
    for (const OperatorSnapshot& s : restore_) {
      Timestamp combined = s.input_watermarks.empty() ? kMinTimestamp : kMaxTimestamp;
      for (Timestamp w : s.input_watermarks) combined = std::min(combined, w);
      lowest = std::min(lowest, combined);
    }
    if (lowest > kMinTimestamp) SetInputWatermarks(std::vector<Timestamp>(inputs, lowest));
  }
  // The snapshots open() restores (see "Restoring at another parallelism"
  // in the file comment; the runtime's StreamTask::OldStatesFor).
  std::vector<const OperatorSnapshot*> SnapshotsToRestore() const {
    std::vector<const OperatorSnapshot*> all;
    for (const OperatorSnapshot& s : restore_) {
      if (s.max_parallelism != options_.max_parallelism) {
        throw std::invalid_argument(
            "initialize_state: a snapshot of max parallelism " + std::to_string(s.max_parallelism) +
            " restored at max parallelism " + std::to_string(options_.max_parallelism) +
            " (the key groups differ)");
      }
      if (s.parallelism != restore_.front().parallelism) {
        throw std::invalid_argument("initialize_state: snapshots of different parallelisms (" +
                                    std::to_string(restore_.front().parallelism) + " and " +
                                    std::to_string(s.parallelism) + ")");
      }
      all.push_back(&s);
    }
    if (all.empty() || all.front()->parallelism == options_.parallelism) return all;
    const int p = options_.parallelism, sub = options_.subtask;
    const int old_p = all.front()->parallelism;
    std::vector<const OperatorSnapshot*> picked;
    switch (op_->state_rescaling()) {
      case StateRescaling::kKeyGroups:
        return all;
      case StateRescaling::kRoundRobin:
        for (const OperatorSnapshot* s : all)
          if (s->subtask % p == sub) picked.push_back(s);
        return picked;
      case StateRescaling::kBroadcast:
        for (const OperatorSnapshot* s : all)
          if (s->subtask == sub % old_p) picked.push_back(s);
        return picked;
      case StateRescaling::kDropped:
        return picked;
      case StateRescaling::kNotRescalable:
        for (const OperatorSnapshot* s : all) {
          if (!s->bytes.empty()) {
            throw std::invalid_argument("initialize_state: operator '" + options_.operator_name +
                                        "' has state (old subtask " + std::to_string(s->subtask) +
                                        ") and cannot be restored at another parallelism");
          }
        }
        return picked;
    }
    return picked;
  }
  void RequireNotOpen(const char* what) const {
    if (opened_) throw std::logic_error(std::string(what) + "() after open()");
  }
  const internal::TimerIntrospection& Timers() const {
    auto* t = dynamic_cast<const internal::TimerIntrospection*>(op_.get());
    if (t == nullptr)
      throw std::logic_error("the operator under test has no keyed timers to count");
    return *t;
  }

  HarnessOptions options_;
  std::unique_ptr<OperatorBase> op_;
  Timestamp watermark_ = kMinTimestamp;

 private:
  struct SideOutputBase {
    virtual ~SideOutputBase() = default;
    virtual void Clear() = 0;
  };
  template <typename V>
  struct SideOutput final : SideOutputBase {
    void Clear() override { output.Clear(); }
    RecordingOutput<V> output;
  };

  ManualClock clock_;
  internal::ProcessingTimeService timers_;
  SubtaskMetrics metrics_;
  internal::JobConfig config_;
  OperatorContext ctx_;
  RecordingOutput<Out> main_;
  std::map<std::string, std::unique_ptr<SideOutputBase>> side_;
  std::vector<OperatorSnapshot> restore_;
  bool opened_ = false;
  bool closed_ = false;
  bool ended_ = false;
  bool idle_ = false;  // the last status given (process_watermark_status)
};

// One operator with one input (Flink's OneInputStreamOperatorTestHarness).
template <typename In, typename Out>
class OneInputOperatorTestHarness : public OperatorTestHarnessBase<Out> {
 public:
  explicit OneInputOperatorTestHarness(std::unique_ptr<OperatorBase> op,
                                       HarnessOptions options = {})
      : OperatorTestHarnessBase<Out>(std::move(op), std::move(options)),
        input_(dynamic_cast<internal::InputOperator<In>*>(this->op_.get())) {
    if (input_ == nullptr)
      throw std::invalid_argument(
          "test harness: the operator does not take records of the harness's input type");
  }

  // A record with event timestamp `ts` (kNoTimestamp: none).
  void process_element(In value, Timestamp ts = kNoTimestamp) {
    this->RequireInput("process_element");
    input_->ProcessElement(std::move(value), ts);
  }
  void process_element(StreamRecord<In> r) { process_element(std::move(r.value), r.timestamp); }
  // The records as one batch, as the task hands the operator what arrived
  // together (Flink's processElements): the runtime's operators take a
  // batch in one call, and some work on it as a whole (the keyed ones load
  // the state of the next records while one is processed).
  void process_elements(std::vector<StreamRecord<In>> records) {
    this->RequireInput("process_elements");
    std::vector<internal::Record<In>> batch = this->ToBatch(std::move(records));
    input_->ProcessBatch(std::span<internal::Record<In>>(batch));
  }
  // The input's watermark: fires event-time timers <= w, then (by default
  // operators) forwards it.  Ignored unless it advances.
  void process_watermark(Timestamp w) {
    this->RequireInput("process_watermark");
    this->DeliverWatermark(w);
  }

 private:
  internal::InputOperator<In>* input_;
};

// Reads a keyed operator's keyed state (KeyedProcessContext's state).
template <typename K>
class KeyedStateReader {
 public:
  explicit KeyedStateReader(OperatorBase* op)
      : store_(dynamic_cast<internal::KeyedStateIntrospection<K>*>(op)) {}
  // Value state `name` of `key`; nullopt when the key has none, or no state
  // of that name exists yet (reading does not make it: the function's first
  // use decides its type).  V must be the type the function uses: reading
  // state the function made, or restored state it has not read yet, with
  // another type is an error (std::logic_error / std::runtime_error).
  template <typename V>
  std::optional<V> get_state(const K& key, std::string_view name) {
    if (!Store().Contains(name)) return std::nullopt;
    return ValueState<K, V>(&Store().template HandleTable<V>(name), &key).value();
  }
  template <typename V>
  std::vector<V> get_list_state(const K& key, std::string_view name) {
    if (!Store().Contains(name)) return {};
    return ListState<K, V>(&Store().template HandleTable<std::vector<V>>(name), &key).get();
  }
  template <typename UK, typename UV>
  std::map<UK, UV, KeyLess<UK>> get_map_state(const K& key, std::string_view name) {
    if (!Store().Contains(name)) return {};
    // Through the handle: after a snapshot the entries may sit in the
    // table's copy-on-write layers, not in its map.
    using M = MapState<K, UK, UV>;
    return std::map<UK, UV, KeyLess<UK>>(
        M(&Store().template HandleTable<typename M::Storage>(name), &key).entries());
  }

 private:
  internal::KeyedStateStore<K>& Store() {
    if (store_ == nullptr)
      throw std::logic_error("the operator under test has no keyed state of this key type");
    return store_->keyed_state_store();
  }
  internal::KeyedStateIntrospection<K>* store_;
};

// A keyed operator with one input (Flink's
// KeyedOneInputStreamOperatorTestHarness): the operator keys records itself
// (its key selector); the harness adds reading its keyed state.
template <typename In, typename Out, typename K>
class KeyedOneInputOperatorTestHarness : public OneInputOperatorTestHarness<In, Out>,
                                         public KeyedStateReader<K> {
 public:
  explicit KeyedOneInputOperatorTestHarness(std::unique_ptr<OperatorBase> op,
                                            HarnessOptions options = {})
      : OneInputOperatorTestHarness<In, Out>(std::move(op), std::move(options)),
        KeyedStateReader<K>(this->op_.get()) {}
};

// One operator with two inputs (Flink's TwoInputStreamOperatorTestHarness).
template <typename In1, typename In2, typename Out>
class TwoInputOperatorTestHarness : public OperatorTestHarnessBase<Out> {
 public:
  explicit TwoInputOperatorTestHarness(std::unique_ptr<OperatorBase> op,
                                       HarnessOptions options = {})
      : OperatorTestHarnessBase<Out>(std::move(op), std::move(options)),
        input_(dynamic_cast<TwoInputOperatorBase<In1, In2>*>(this->op_.get())) {
    if (input_ == nullptr)
      throw std::invalid_argument(
          "test harness: the operator does not take the harness's two input types");
  }

  void process_element1(In1 value, Timestamp ts = kNoTimestamp) {
    this->RequireInput("process_element1");
    input_->ProcessElement1(std::move(value), ts);
  }
  void process_element2(In2 value, Timestamp ts = kNoTimestamp) {
    this->RequireInput("process_element2");
    input_->ProcessElement2(std::move(value), ts);
  }
  // Each input's records as one batch (OneInputOperatorTestHarness::
  // process_elements).
  void process_elements1(std::vector<StreamRecord<In1>> records) {
    this->RequireInput("process_elements1");
    std::vector<internal::Record<In1>> batch = this->ToBatch(std::move(records));
    input_->ProcessBatch1(std::span<internal::Record<In1>>(batch));
  }
  void process_elements2(std::vector<StreamRecord<In2>> records) {
    this->RequireInput("process_elements2");
    std::vector<internal::Record<In2>> batch = this->ToBatch(std::move(records));
    input_->ProcessBatch2(std::span<internal::Record<In2>>(batch));
  }
  // Each input's watermark; the operator gets the minimum over the inputs
  // that are not idle when it advances (the input gate's rule; Flink's
  // CombinedWatermarkStatus).  A watermark makes its input active again.
  void process_watermark1(Timestamp w) {
    this->RequireInput("process_watermark1");
    OnInputWatermark(0, w);
  }
  void process_watermark2(Timestamp w) {
    this->RequireInput("process_watermark2");
    OnInputWatermark(1, w);
  }
  // Both inputs at `w`.
  void process_watermark(Timestamp w) {
    this->RequireInput("process_watermark");
    w1_ = std::max(w1_, w);
    w2_ = std::max(w2_, w);
    idle1_ = idle2_ = false;
    Combine();
  }
  // Each input's status (Flink's processWatermarkStatus1 / 2): an idle input
  // no longer holds the other back; the operator hears IDLE once both are
  // idle (after the flushed maximum of the two), and ACTIVE when one comes
  // back, as the runtime's two-input gate tells it.
  void process_watermark_status1(WatermarkStatus s) {
    this->RequireInput("process_watermark_status1");
    OnInputStatus(0, s);
  }
  void process_watermark_status2(WatermarkStatus s) {
    this->RequireInput("process_watermark_status2");
    OnInputStatus(1, s);
  }
  // Both inputs' status.
  void process_watermark_status(WatermarkStatus s) {
    this->RequireInput("process_watermark_status");
    const bool was_idle = out_idle_;
    idle1_ = idle2_ = s == WatermarkStatus::kIdle;
    Combine();
    if (out_idle_ != was_idle) this->op_->ProcessStatus(s);
  }
  // Generalized watermark `w` as the task delivers it once the first
  // (second) input's channels combined it: to that input's handler (a
  // function's on_watermark_from_first_input, ..._non_broadcast_input; the
  // second's, ..._broadcast_input).
  void process_generalized_watermark1(const GeneralizedWatermark& w) {
    this->RequireInput("process_generalized_watermark1");
    input_->ProcessGeneralizedWatermark1(w);
  }
  void process_generalized_watermark2(const GeneralizedWatermark& w) {
    this->RequireInput("process_generalized_watermark2");
    input_->ProcessGeneralizedWatermark2(w);
  }
  // A two-input operator hears each input's values (above): the task never
  // hands one over without its input.
  void process_generalized_watermark(const GeneralizedWatermark& w) = delete;

 protected:
  std::vector<Timestamp> InputWatermarks() const override { return {w1_, w2_}; }
  std::vector<bool> InputsIdle() const override { return {idle1_, idle2_}; }
  void SetInputWatermarks(const std::vector<Timestamp>& w) override {
    w1_ = w.at(0);
    w2_ = w.at(1);
    idle1_ = idle2_ = false;
    Combine();
  }
  void RestoreInputState(const std::vector<Timestamp>& w, const std::vector<bool>& idle) override {
    if (!w.empty()) {
      w1_ = w.at(0);
      w2_ = w.at(1);
    }
    if (!idle.empty()) {
      idle1_ = idle.at(0);
      idle2_ = idle.at(1);
    }
    Combine();
    if (out_idle_) this->op_->ProcessStatus(WatermarkStatus::kIdle);
  }

 private:
  // runtime/io/detail/input_gate.cc, InputGateCore::OnInputWatermark /
  // OnInputStatus / UpdateCombined.
  void OnInputWatermark(int input, Timestamp w) {
    Timestamp& mine = input == 0 ? w1_ : w2_;
    mine = std::max(mine, w);
    (input == 0 ? idle1_ : idle2_) = false;
    Combine();
  }
  void OnInputStatus(int input, WatermarkStatus s) {
    const bool was_idle = out_idle_;
    (input == 0 ? idle1_ : idle2_) = s == WatermarkStatus::kIdle;
    Combine();
    if (out_idle_ != was_idle) this->op_->ProcessStatus(s);
  }
  // The combined watermark: the minimum over the active inputs, or, when
  // both are idle, the maximum of the two (the flush); delivered when it
  // advances.
  void Combine() {
    out_idle_ = idle1_ && idle2_;
    Timestamp combined = kMaxTimestamp;
    if (out_idle_) {
      combined = std::max(w1_, w2_);
    } else {
      if (!idle1_) combined = std::min(combined, w1_);
      if (!idle2_) combined = std::min(combined, w2_);
    }
    this->DeliverWatermark(combined);
  }

  TwoInputOperatorBase<In1, In2>* input_;
  Timestamp w1_ = kMinTimestamp;
  Timestamp w2_ = kMinTimestamp;
  bool idle1_ = false;
  bool idle2_ = false;
  bool out_idle_ = false;  // both inputs idle: the operator was told IDLE
};

// A keyed two-input operator (Flink's KeyedTwoInputStreamOperatorTestHarness).
template <typename In1, typename In2, typename Out, typename K>
class KeyedTwoInputOperatorTestHarness : public TwoInputOperatorTestHarness<In1, In2, Out>,
                                         public KeyedStateReader<K> {
 public:
  explicit KeyedTwoInputOperatorTestHarness(std::unique_ptr<OperatorBase> op,
                                            HarnessOptions options = {})
      : TwoInputOperatorTestHarness<In1, In2, Out>(std::move(op), std::move(options)),
        KeyedStateReader<K>(this->op_.get()) {}
};

// Harnesses for user functions (Flink's ProcessFunctionTestHarnesses): each
// wraps the function in the operator the DataStream API would build for it.
// The input types are given (In, In1, In2, BIn); the output type comes from
// the function as in the API.
struct ProcessFunctionTestHarnesses {
  // map(f): f(const In&) -> Out.
  template <typename In, typename F>
  static auto for_map(F f, HarnessOptions options = {}) {
    using Out = typename internal::MapResult<F, In>::type;
    return OneInputOperatorTestHarness<In, Out>(
        std::make_unique<internal::MapOperator<In, Out, F>>(std::move(f)), std::move(options));
  }
  // flat_map(f): f(const In&, Collector<Out>&); give Out for a generic lambda.
  template <typename In, typename Out = void, typename F>
  static auto for_flat_map(F f, HarnessOptions options = {}) {
    using O = typename internal::FunctionOutputOr<Out, F, internal::CallOperator>::type;
    return OneInputOperatorTestHarness<In, O>(
        std::make_unique<internal::FlatMapOperator<In, O, F>>(std::move(f)), std::move(options));
  }
  // process(f) on a stream that is not keyed: a ProcessFunction<In, Out>.
  template <typename In, typename F>
  static auto for_process_function(F f, HarnessOptions options = {}) {
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    return OneInputOperatorTestHarness<In, Out>(
        std::make_unique<internal::ProcessOperator<In, F, Out>>(std::move(f)), std::move(options));
  }
  // key_by(key).process(f): a KeyedProcessFunction<K, In, Out>.
  template <typename In, typename F, typename KeyFn>
  static auto for_keyed_process_function(F f, KeyFn key, HarnessOptions options = {}) {
    using K = std::decay_t<std::invoke_result_t<KeyFn&, const In&>>;
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    using Op = internal::KeyedProcessOperator<In, K, KeyFn, F, Out>;
    return KeyedOneInputOperatorTestHarness<In, Out, K>(
        std::make_unique<Op>(std::move(key), std::move(f)), std::move(options));
  }
  // a.connect(b).process(f): a CoProcessFunction<In1, In2, Out>.
  template <typename In1, typename In2, typename F>
  static auto for_co_process_function(F f, HarnessOptions options = {}) {
    using Out = internal::FunctionOutput<F, internal::ProcessElement1Member>;
    return TwoInputOperatorTestHarness<In1, In2, Out>(
        std::make_unique<internal::CoProcessOperator<In1, In2, Out, F>>(std::move(f)),
        std::move(options));
  }
  // a.key_by(k1).connect(b.key_by(k2)).process(f): a
  // KeyedCoProcessFunction<K, In1, In2, Out>.
  template <typename In1, typename In2, typename F, typename KeyFn1, typename KeyFn2>
  static auto for_keyed_co_process_function(F f, KeyFn1 key1, KeyFn2 key2,
                                            HarnessOptions options = {}) {
    using K = std::decay_t<std::invoke_result_t<KeyFn1&, const In1&>>;
    static_assert(std::is_same_v<K, std::decay_t<std::invoke_result_t<KeyFn2&, const In2&>>>,
                  "tidemark: both inputs of a keyed co-process function have the same key type");
    using Out = internal::FunctionOutput<F, internal::ProcessElement1Member>;
    using Op = internal::KeyedCoProcessOperator<In1, In2, K, KeyFn1, KeyFn2, F, Out>;
    return KeyedTwoInputOperatorTestHarness<In1, In2, Out, K>(
        std::make_unique<Op>(std::move(key1), std::move(key2), std::move(f)), std::move(options));
  }
  // a.connect(b.broadcast(d)).process(f): a BroadcastProcessFunction<In,
  // BIn, Out>; the broadcast side is the second input.
  template <typename In, typename BIn, typename F>
  static auto for_broadcast_process_function(F f, HarnessOptions options = {}) {
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    return TwoInputOperatorTestHarness<In, BIn, Out>(
        std::make_unique<internal::BroadcastProcessOperator<In, BIn, Out, F>>(std::move(f)),
        std::move(options));
  }
  // keyed.connect(b.broadcast(d)).process(f): a
  // KeyedBroadcastProcessFunction<K, In, BIn, Out>; the broadcast side is
  // the second input.
  template <typename In, typename BIn, typename F, typename KeyFn>
  static auto for_keyed_broadcast_process_function(F f, KeyFn key, HarnessOptions options = {}) {
    using K = std::decay_t<std::invoke_result_t<KeyFn&, const In&>>;
    using Out = internal::FunctionOutput<F, internal::ProcessElementMember>;
    using Op = internal::KeyedBroadcastProcessOperator<In, BIn, K, KeyFn, F, Out>;
    return KeyedTwoInputOperatorTestHarness<In, BIn, Out, K>(
        std::make_unique<Op>(std::move(key), std::move(f)), std::move(options));
  }
};

// The operator `stream` was made with, in a one-input harness: e.g. a window
// operator built by key_by(...).window(...).reduce(...), exactly the one a
// job would run (the fast, sliced, session or general window operator).
// `In` is the operator's input type; the stream's environment is not run.
// Options' max parallelism defaults to the stream's, when it sets one.
template <typename In, typename Out>
OneInputOperatorTestHarness<In, Out> harness_for(const DataStream<Out>& stream,
                                                 HarnessOptions options = {}) {
  internal::StreamNode& node = internal::StreamAccess::Node(stream);
  if (!node.make_operator || node.inputs.size() != 1)
    throw std::invalid_argument("harness_for: stream '" + node.name +
                                "' is not made by a one-input operator");
  if (node.max_parallelism > 0) options.max_parallelism = node.max_parallelism;
  const bool rocksdb = options.state_backend.is_rocksdb() && node.make_operator_on_rocksdb;
  return OneInputOperatorTestHarness<In, Out>(
      rocksdb ? node.make_operator_on_rocksdb() : node.make_operator(), std::move(options));
}
// The same for a two-input operator (connect, interval join).
template <typename In1, typename In2, typename Out>
TwoInputOperatorTestHarness<In1, In2, Out> two_input_harness_for(const DataStream<Out>& stream,
                                                                 HarnessOptions options = {}) {
  internal::StreamNode& node = internal::StreamAccess::Node(stream);
  if (!node.make_operator || node.inputs.size() != 2)
    throw std::invalid_argument("two_input_harness_for: stream '" + node.name +
                                "' is not made by a two-input operator");
  if (node.max_parallelism > 0) options.max_parallelism = node.max_parallelism;
  return TwoInputOperatorTestHarness<In1, In2, Out>(node.make_operator(), std::move(options));
}

}  // namespace tidemark::harness

#endif  // TM_API_TESTING_HARNESS_H_
