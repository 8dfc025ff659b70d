// runtime/core/operator.h
//
// The operator model.  A job is a graph of operators; at run time each
// operator has one instance per subtask, created from a factory, owned by one
// task and only ever called by the thread running that task, so operator code
// needs no locks.  Operators of one subtask that are connected by a forward
// edge are chained: they call each other directly through Output<T>.
//
// Lifecycle of an instance, in this order:
//   Open(ctx)              once, before any element;
//   ProcessElement(v, ts)  for each record (OneInputOperator);
//   ProcessWatermark(w)    for each watermark that advances the subtask's
//                          input watermark (strictly increasing);
//   ProcessStatus(s)       when the input becomes idle or active again;
//   timers registered with ctx.timers() fire between the calls above;
//   Finish()               once, after the end of every input (the
//                          kMaxWatermark has already been processed);
//   Close()                once, also after failure or cancellation.
// With checkpointing on, between any two of the calls above:
//   SnapshotState(w)       write the operator's state for a checkpoint (the
//                          records before the barrier are in it, none after);
//   NotifyCheckpointComplete(id)  every subtask has snapshotted checkpoint id;
// and, when the job is restored, RestoreState(r) right after Open(), with
// what SnapshotState wrote.
//
// Checkpoints of keyed operators (key groups, partitioning/key_groups.h):
// keyed state (entries, timers, window contents) is written so that it can be
// read back at another parallelism.  RestoreState may be called more than
// once, once per old subtask whose key groups intersect this instance's
// (OperatorContext subtask / parallelism / max_parallelism give its range);
// each call keeps only the entries whose key's group is in this instance's
// range and merges them with what earlier calls restored.  Keys of one group
// live in one old state, so merged states never share a key; the relative
// order of two old states' keys that fire at one time (a window's keys,
// equal-time timers) is unspecified, as in Flink.  What is not keyed (a
// source's position) is restored by its own rules.  The watermark is not
// restored: it starts at MIN again (sources replay and rebuild it, as in
// Flink); state of windows that fired stays until their cleanup time.
// Restoring at another parallelism (rescaling, docs/checkpoints.md) hands
// each instance the old states its StateRescaling() names: every old
// subtask's whose key groups intersect its own (keyed operators, above),
// old subtask k's to new subtask k % parallelism (operator list state,
// Flink's round robin: the exactly-once file sink), or none (the state is
// dropped and rebuilt: the watermark generator).  An operator that says
// nothing can be rescaled only while its state is empty.
// Metrics (counters) are not state.  An operator whose state has a type with
// no tidemark::StateCodec throws from SnapshotState, naming the type
// (runtime/state/state_codec.h's HasStateCodec), so a job that never checkpoints
// needs no codec.
// Each may emit through output(); an exception thrown from any of them fails
// the job with the operator's name and subtask index.
//
// Default behaviour forwards watermarks and statuses to the main output and to
// every side output, which is what Flink does.
#ifndef TM_RUNTIME_OPERATOR_H_
#define TM_RUNTIME_OPERATOR_H_

#include <atomic>
#include <concepts>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/generalized_watermark.h"
#include "tidemark/runtime/core/job_config.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/processing_time_service.h"
#include "tidemark/runtime/core/stream_element.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

namespace internal {
class StateWriter;  // runtime/state/state_codec.h
class StateReader;
class SourceAlignment;  // runtime/task/watermark_alignment.h
class TaskHost;         // runtime/core/detail/task_host.h

// Where an operator sends what it emits.
class OutputBase {
 public:
  virtual ~OutputBase() = default;
  virtual void EmitWatermark(Timestamp watermark) = 0;
  virtual void EmitStatus(WatermarkStatus status) = 0;
  // A generalized watermark (runtime/core/generalized_watermark.h): the
  // runtime's outputs pass it on (a channel writer broadcasts it to every
  // channel); the default drops it, for outputs that carry none.
  virtual void EmitGeneralizedWatermark(const GeneralizedWatermark& /*w*/) {}
};

}  // namespace internal
template <typename T>
class Output : public internal::OutputBase {
 public:
  virtual void Collect(T&& value, Timestamp ts) = 0;
  // A run of records, in order, as if each were Collect()ed (their values are
  // moved from).  The runtime's outputs take a run in one call; the default
  // collects one record at a time.
  virtual void CollectBatch(std::span<internal::Record<T>> records) {
    for (internal::Record<T>& r : records) Collect(std::move(r.value), r.timestamp);
  }
  void CollectCopy(const T& value, Timestamp ts) {
    T copy(value);
    Collect(std::move(copy), ts);
  }
};

// Names a side output of type T (Flink's OutputTag<T>).  Tags are compared by
// id.
template <typename T>
class OutputTag {
 public:
  explicit OutputTag(std::string id) : id_(std::move(id)) {}
  const std::string& id() const { return id_; }

 private:
  std::string id_;
};

namespace internal {
// The side output of tag `id` as an Output<V>.  One id with two types (a
// tag's records read as another type) throws instead: Flink routes side
// outputs by id too, and its cast fails the job.
[[noreturn]] void ThrowSideOutputOfAnotherType(const std::string& id);
template <typename V>
Output<V>* SideOutputAs(OutputBase* out, const std::string& id) {
  auto* typed = dynamic_cast<Output<V>*>(out);
  if (typed == nullptr) [[unlikely]]
    ThrowSideOutputOfAnotherType(id);
  return typed;
}

// The error an exception from user code becomes: it names the operator and
// subtask.
class OperatorError : public std::runtime_error {
 public:
  OperatorError(const std::string& operator_name, int subtask, int parallelism,
                const std::string& what);
  const std::string& operator_name() const { return operator_name_; }
  int subtask() const { return subtask_; }

 private:
  std::string operator_name_;
  int subtask_;
};

}  // namespace internal
// What an operator instance can see of its surroundings.
class OperatorContext {
 public:
  OperatorContext(std::string name, int subtask, int parallelism, int max_parallelism,
                  SubtaskMetrics* metrics, internal::ProcessingTimeService* timers,
                  const internal::JobConfig* config, WatermarkListener* listener)
      : name_(std::move(name)),
        subtask_(subtask),
        parallelism_(parallelism),
        max_parallelism_(max_parallelism),
        metrics_(metrics),
        timers_(timers),
        config_(config),
        listener_(listener) {}

  const std::string& operator_name() const { return name_; }
  int subtask_index() const { return subtask_; }
  int parallelism() const { return parallelism_; }
  int max_parallelism() const { return max_parallelism_; }
  SubtaskMetrics& metrics() { return *metrics_; }
  internal::Counter* counter(const std::string& name) { return metrics_->GetCounter(name); }
  internal::ProcessingTimeService& timers() { return *timers_; }
  const internal::JobConfig& config() const { return *config_; }
  WatermarkListener* listener() const { return listener_; }
  // The clock idleness is measured on (Flink's input activity clock): the
  // task's processing time with the time it spent back-pressured or paused
  // taken out.  The plain processing-time clock when the task sets none.
  const Clock* input_activity_clock() const {
    return activity_clock_ != nullptr ? activity_clock_ : timers_->clock();
  }
  void set_input_activity_clock(const Clock* c) { activity_clock_ = c; }
  // True once the job is cancelled or failed: an operator looping over many
  // user calls without emitting may stop early.
  bool cancelled() const {
    return cancel_flag_ != nullptr && cancel_flag_->load(std::memory_order_relaxed);
  }
  void set_cancel_flag(const std::atomic<bool>* flag) { cancel_flag_ = flag; }
  // In a source task: its watermark alignment (runtime/task/watermark_alignment.h),
  // which the chain's watermark operator joins; null elsewhere.
  internal::SourceAlignment* source_alignment() const { return source_alignment_; }
  void set_source_alignment(internal::SourceAlignment* a) { source_alignment_ = a; }
  const std::atomic<bool>* cancel_flag() const { return cancel_flag_; }
  // A line for the job's notices (JobResult's CheckpointSummary::notices; the
  // CLI prints them on stderr), e.g. a committed part file a restore rolled
  // back.  Thread-safe; dropped when the context belongs to no job.
  void Notice(std::string line);
  void set_task_host(internal::TaskHost* host) { host_ = host; }

 private:
  std::string name_;
  int subtask_;
  int parallelism_;
  int max_parallelism_;
  SubtaskMetrics* metrics_;
  internal::ProcessingTimeService* timers_;
  const internal::JobConfig* config_;
  WatermarkListener* listener_;
  const Clock* activity_clock_ = nullptr;
  const std::atomic<bool>* cancel_flag_ = nullptr;
  internal::SourceAlignment* source_alignment_ = nullptr;
  internal::TaskHost* host_ = nullptr;
};

// How an operator's state is split when a job is restored at another
// parallelism (the lifecycle comment above).
enum class StateRescaling {
  kNotRescalable,  // only an empty state (a stateless operator) may be rescaled
  kKeyGroups,      // each old state whose key-group range intersects this one's
  kRoundRobin,     // old subtask k's state goes to new subtask k % parallelism
  kBroadcast,      // new subtask s gets old subtask s % old parallelism's (all alike)
  kDropped,        // not restored when rescaled: starts fresh
};

class OperatorBase {
 public:
  OperatorBase();
  virtual ~OperatorBase();
  virtual void Open(OperatorContext& ctx);
  virtual void ProcessWatermark(Timestamp watermark);
  virtual void ProcessStatus(WatermarkStatus status);
  // A generalized watermark, as combined over the input's channels (each
  // time the combined value changes, or as the declaration says:
  // docs/generalized-watermarks.md).  Default: forwarded like a watermark.
  virtual void ProcessGeneralizedWatermark(const GeneralizedWatermark& w);
  virtual void Finish() {}
  virtual void Close() {}
  // Checkpoints: the operator's state (default: none), and the news that a
  // checkpoint is complete everywhere (a two-phase-commit sink commits then).
  // Right before SnapshotState for checkpoint `checkpoint_id` (Flink's
  // prepareSnapshotPreBarrier): a two-phase-commit sink pre-commits here.
  virtual void PrepareSnapshotPreBarrier(int64_t /*checkpoint_id*/) {}
  virtual void SnapshotState(internal::StateWriter& /*w*/) {}
  virtual void RestoreState(internal::StateReader& /*r*/) {}
  virtual void NotifyCheckpointComplete(int64_t /*checkpoint_id*/) {}
  // Which old states RestoreState is given when the job is rescaled.
  virtual StateRescaling state_rescaling() const { return StateRescaling::kNotRescalable; }

  // --- wiring, done by the executor before Open() ---
  // `out` is an Output<Out> of the operator's output type, or nullptr for
  // operators without output (sinks).
  void set_output(internal::OutputBase* out) { output_base_ = out; }
  void set_side_output(const std::string& tag, internal::OutputBase* out);

 protected:
  OperatorContext& ctx() { return *ctx_; }
  // To the main output and every side output.
  void ForwardWatermark(Timestamp w);
  void ForwardStatus(WatermarkStatus s);
  void ForwardGeneralizedWatermark(const GeneralizedWatermark& w);
  // The side output for `tag`, or nullptr when nobody consumes it; throws
  // std::logic_error when its consumer reads it as another type (one id,
  // one type, as Flink's OutputTag).
  template <typename T>
  Output<T>* side_output(const OutputTag<T>& tag) {
    internal::OutputBase* out = FindSideOutput(tag.id());
    return out == nullptr ? nullptr : internal::SideOutputAs<T>(out, tag.id());
  }
  internal::OutputBase* FindSideOutput(const std::string& tag) const;

  internal::OutputBase* output_base_ = nullptr;
  OperatorContext* ctx_ = nullptr;
  std::map<std::string, internal::OutputBase*> side_outputs_;
};

namespace internal {
// The first operator of a source's chain when it generates watermarks per
// split (from_source's TimestampsAndWatermarksOperator, docs/semantics.md
// 2.7): the source driver registers the splits its source names
// (SourceOutput::ForSplit), says which split each run of records it hands
// down comes from, and releases ended splits.  Called on the task's thread.
class SplitWatermarkInput {
 public:
  // False: the operator generates one watermark stream for the subtask, and
  // the driver need not say anything.
  virtual bool per_split() const = 0;
  // A split's index, registering it on first use.
  virtual int RegisterSplit(const std::string& split_id) = 0;
  // The split of the records handed down next; -1: records not of a split.
  virtual void SetCurrentSplit(int index) = 0;
  virtual void ReleaseSplit(int index) = 0;
  // Releases the split `split_id` if the operator holds it (a split restored
  // from a checkpoint that the source ends before any record of it); a
  // split it never had stays unknown.
  virtual void ReleaseSplitIfHeld(const std::string& split_id) = 0;

 protected:
  // Not deleted through this pointer: no virtual destructor, so the
  // operator's needs no thunk for it.
  ~SplitWatermarkInput() = default;
};

// Thrown by a chain output (and a batched operator's loop) once the job is cancelled, so that an
// operator in the middle of emitting (a window firing thousands of results into a slow sink) stops
// at its next emission instead of finishing the batch.  Not a std::exception on purpose: user code
// that catches std::exception does not swallow it.  The task catches it and finishes.
struct TaskCancelled {};

// Throws TaskCancelled once `flag` (the job's cancel flag, or null) is set.
// Checked at every record of a batch: the check is inlined (GCC kept the
// function with its throw out of line, a call per record), the throw is not.
[[noreturn, gnu::cold, gnu::noinline]] inline void ThrowTaskCancelled() { throw TaskCancelled{}; }
[[gnu::always_inline]] inline void ThrowIfCancelled(const std::atomic<bool>* flag) {
  if (flag != nullptr && flag->load(std::memory_order_relaxed)) [[unlikely]]
    ThrowTaskCancelled();
}

// An operator with one (logical) input of type In.
template <typename In>
class InputOperator : public OperatorBase {
 public:
  virtual void ProcessElement(In&& value, Timestamp ts) = 0;
  // A run of records, in order: one call per batch.  The default processes
  // one element at a time; BatchedOperator (below) makes the loop call the
  // operator's own ProcessElement directly, so it inlines.
  virtual void ProcessBatch(std::span<Record<In>> records) {
    for (Record<In>& r : records) ProcessElement(std::move(r.value), r.timestamp);
  }
};

}  // namespace internal
// An operator from In to Out.
template <typename In, typename Out>
class OneInputOperator : public internal::InputOperator<In> {
 public:
  using InputType = In;
  using OutputType = Out;

 protected:
  Output<Out>& output() { return *static_cast<Output<Out>*>(this->output_base_); }
};

// An operator with two inputs (Flink's TwoInputStreamOperator): records of the
// first input (In1) arrive at ProcessElement1, of the second (In2) at
// ProcessElement2, in the order the task reads them (interleaved, no order
// between the inputs).  Each input has its own valve; ProcessWatermark and
// ProcessStatus get the combined watermark (the minimum over the inputs that
// are not idle, runtime/io/detail/input_gate.h), so timers fire on it.  A two-input
// operator is always the head of its task.
template <typename In1, typename In2>
class TwoInputOperatorBase : public OperatorBase {
 public:
  using FirstInputType = In1;
  using SecondInputType = In2;
  virtual void ProcessElement1(In1&& value, Timestamp ts) = 0;
  virtual void ProcessElement2(In2&& value, Timestamp ts) = 0;
  virtual void ProcessBatch1(std::span<internal::Record<In1>> records) {
    for (internal::Record<In1>& r : records) ProcessElement1(std::move(r.value), r.timestamp);
  }
  virtual void ProcessBatch2(std::span<internal::Record<In2>> records) {
    for (internal::Record<In2>& r : records) ProcessElement2(std::move(r.value), r.timestamp);
  }
  // A generalized watermark as combined over the channels of the first
  // (second) input alone: each input combines its own, and the operator
  // hears each input's values (Flink's processWatermark1/2 of a two-input
  // operator).  Default: ProcessGeneralizedWatermark (forwarded).
  virtual void ProcessGeneralizedWatermark1(const GeneralizedWatermark& w) {
    ProcessGeneralizedWatermark(w);
  }
  virtual void ProcessGeneralizedWatermark2(const GeneralizedWatermark& w) {
    ProcessGeneralizedWatermark(w);
  }
};

template <typename In1, typename In2, typename Out>
class TwoInputOperator : public TwoInputOperatorBase<In1, In2> {
 public:
  using OutputType = Out;

 protected:
  Output<Out>& output() { return *static_cast<Output<Out>*>(this->output_base_); }
};

namespace internal {
// How many records ahead a batched loop lets the operator prefetch what a
// record will read (PrefetchFor): about a memory latency's worth of records.
inline constexpr size_t kPrefetchAhead = 4;

// The loop of a batched ProcessBatch: op.Op::ProcessElement for each record
// (a non-virtual call, so it inlines), checking `cancel` before each, so a
// cancel lands within one user call, as with one element per call.  An
// operator with PrefetchFor(const T&) and WantsPrefetch() (the keyed ones:
// the record's state entries, when the state is too large for the caches)
// is told of each record kPrefetchAhead records before it is processed, in
// the batches for which WantsPrefetch() says so.
template <typename Op, typename T>
void ProcessEachInline(Op& op, std::span<Record<T>> records, const std::atomic<bool>* cancel) {
  if constexpr (requires(const T& v) {
                  op.PrefetchFor(v);
                  { op.WantsPrefetch() } -> std::convertible_to<bool>;
                }) {
    if (op.WantsPrefetch()) {
      const size_t n = records.size();
      for (size_t i = 0; i < n && i < kPrefetchAhead; ++i)
        op.PrefetchFor(static_cast<const T&>(records[i].value));
      for (size_t i = 0; i < n; ++i) {
        ThrowIfCancelled(cancel);
        if (i + kPrefetchAhead < n)
          op.PrefetchFor(static_cast<const T&>(records[i + kPrefetchAhead].value));
        op.Op::ProcessElement(std::move(records[i].value), records[i].timestamp);
      }
      return;
    }
  }
  for (Record<T>& r : records) {
    ThrowIfCancelled(cancel);
    op.Op::ProcessElement(std::move(r.value), r.timestamp);
  }
}

// The runtime's operators derive from this: ProcessBatch loops over
// Derived::ProcessElement with a non-virtual call, so a batch costs one
// virtual call and the per-record work inlines into the loop.
template <typename Derived, typename In, typename Out>
class BatchedOperator : public OneInputOperator<In, Out> {
 public:
  void ProcessBatch(std::span<Record<In>> records) override {
    ProcessEachInline(static_cast<Derived&>(*this), records, this->ctx().cancel_flag());
  }
};

// Sinks: operators with no output.
template <typename In>
class SinkOperator : public InputOperator<In> {};

// A sink whose ProcessBatch calls Derived::ProcessElement directly (see
// BatchedOperator).
template <typename Derived, typename In>
class BatchedSinkOperator : public SinkOperator<In> {
 public:
  void ProcessBatch(std::span<Record<In>> records) override {
    ProcessEachInline(static_cast<Derived&>(*this), records, this->ctx().cancel_flag());
  }
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_RUNTIME_OPERATOR_H_
