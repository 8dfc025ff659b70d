// runtime/io/detail/input_gate.h
//
// Data in (the network plane, receiving side): TaskInput is what a task reads
// from; InputGate<T> takes batches from the task's input channels in turn,
// drives the WatermarkValve with their watermarks, statuses and ends of input,
// reports every channel change (metrics, WatermarkListener) before the valve's
// output reaches the operators, and passes records to the head of the chain.
//
// Barrier alignment (Flink's aligned checkpoints): when checkpoint barrier n
// arrives on a channel, that channel is blocked: the rest of its batch and
// everything after it wait, while the other channels go on, until barrier n
// has arrived on every channel that has not ended.  Then the gate calls its
// BarrierHandler (the task snapshots its operators and sends barrier n on),
// unblocks every channel and carries on where each one stopped.  A channel
// that ends counts as aligned, so a finished upstream never holds a
// checkpoint back; an idle channel still carries barriers (its upstream task
// runs and forwards them), so idleness does not either.  A gate with one
// channel aligns at once.
//
// Unaligned checkpoints (FLIP-76; docs/checkpoints.md, "Unaligned
// checkpoints"): a barrier whose control is tagged kUnalignedBarrier came
// ahead of the queued batches on its channel's priority lane
// (channel.h); the in-band one only marks where it stood.  The gate checks
// the priority lanes before every batch it reads (PollPriority).  At the
// first barrier of unaligned checkpoint n, on any channel, it calls the
// handler's OnUnalignedBarrier at once (the task snapshots and sends n on,
// unaligned); nothing is blocked.  From then on it stores, per channel, the
// channel state of n: the records and controls (watermarks, statuses,
// generalized watermarks) before that channel's marker of n that the
// operators had not processed at the snapshot.  Those that the gate reads
// before it meets the channel's priority barrier are recorded as they are
// delivered; when the priority barrier arrives, every batch queued up to the
// marker is recorded at once, where it is (under the channel's lock; the
// batches stay queued, the producer back-pressured, and are processed in
// turn).  A
// channel is done at its priority barrier, at its marker or when it ends;
// when every channel is done the handler gets the channel state
// (OnChannelStateComplete).  On restore (RestoreChannelState) the stored
// records and controls are queued ahead of each channel's new input.
//
// A two-input operator's gate (TwoInputGate) reads the channels of both
// inputs, keeps a valve per input and aligns barriers across all of them.
//
// Generalized watermarks (runtime/core/generalized_watermark.h) are combined
// per logical input, one WatermarkCombiner per declared kind, and what a
// combiner emits goes to the head of the chain; channel idleness (the
// valve's) and ends of input reach the combiners that leave idle channels out.
//
// Touched only by the thread running the task.
#ifndef TM_RUNTIME_INPUT_GATE_H_
#define TM_RUNTIME_INPUT_GATE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/watermark_combiner.h"
#include "tidemark/runtime/io/watermark_valve.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

// Told when a checkpoint barrier has arrived on every input channel.
class BarrierHandler {
 public:
  // Barrier `checkpoint_id` has arrived on every channel that has not ended;
  // `alignment_ns`: from its first arrival to now.  The records before it on
  // every channel have been processed, none after it.
  virtual void OnBarrierAligned(int64_t checkpoint_id, int64_t alignment_ns) = 0;
  // The first barrier of unaligned checkpoint `checkpoint_id` has arrived
  // on some channel: snapshot now and send the barrier on.  The records
  // before the barriers that are not processed yet are the channel state,
  // handed over once complete by OnChannelStateComplete (the same id).
  virtual void OnUnalignedBarrier(int64_t /*checkpoint_id*/) {}
  virtual void OnChannelStateComplete(int64_t /*checkpoint_id*/, std::string /*channel_state*/) {}

 protected:
  ~BarrierHandler() = default;
};

// The input side of a task: a source or an input gate.
class TaskInput {
 public:
  enum class Step { kMore, kNothing, kEnd };
  virtual ~TaskInput();  // the defaults below: input_gate.cc
  virtual void Open();
  // One step: one batch or one poll.
  virtual Step RunStep() = 0;
  virtual void Close();
  // After kNothing: processing time at which to retry (kMaxTimestamp: when
  // notified).
  virtual Timestamp RetryAt() const;
  virtual bool NeedsOwnThread() const;
  virtual int WaitFd() const;
  // A source asked to end now (stop-with-savepoint with drain): sends the
  // MAX watermark down its chain, as at its natural end; RunStep is not
  // called again.
  virtual void EndInputNow() {}
  // Checkpoints: a source's position or a gate's watermark valve; a gate's
  // barrier alignment.
  virtual bool IsSource() const;
  virtual bool Replayable() const;
  virtual void SnapshotPosition(StateWriter& w) const;
  virtual void RestorePosition(StateReader& r);
  // A rescaled job (this task's channels changed): restores what can be
  // from every old subtask's state (`old`); DATA_LOSS when one cannot be
  // read.  By default: nothing to restore.
  virtual absl::Status RestoreRescaled(const std::vector<const std::string*>& old);
  virtual void SetBarrierHandler(BarrierHandler* h);
  // Unaligned checkpoints: checks the input channels' priority lanes (a
  // gate; nothing for a source).  Called before every step, and before the
  // task waits for room on its outputs.
  virtual void PollPriority() {}
  // Restores the channel state of an unaligned checkpoint (see the top of
  // this file): queued ahead of every channel's new input.  A source has
  // none; DATA_LOSS when the bytes cannot be read.
  virtual absl::Status RestoreChannelState(std::string_view bytes);
};

// The half of an input gate that does not depend on the record type
// (input_gate.cc): the valves, their inputs (watermarks, statuses, ends of
// input) and the reports of every channel change (metrics, WatermarkListener),
// published before the valves' output reaches the operators so that a trace
// shows the channel change before the window firings it causes.
//
// Two-input operators (TwoInputGate below): the channels are numbered across
// both inputs (the first input's first), and each logical input has a valve
// of its own over its channels.  The gate's watermark combines the inputs'
// as Flink's two-input operators do (IndexedCombinedWatermarkStatus): the
// minimum over the inputs that are not idle, emitted only when it advances;
// an idle input does not hold the other back (FLINK-18934); when both are
// idle the maximum of the two is flushed and the gate reports IDLE, active
// again as soon as one input is.  With one input the valve's output is the
// gate's, unchanged.
class InputGateCore {
 public:
  // `channel_inputs[c]`: the logical input (0 or 1) of channel c, in
  // ascending order; empty: `num_channels` channels of one input.
  InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                WatermarkListener* listener, std::vector<int> channel_inputs = {});
  ~InputGateCore();
  int num_inputs() const { return static_cast<int>(valves_.size()); }
  const WatermarkValve& valve(int input = 0) const { return valves_[static_cast<size_t>(input)]; }
  // The gate's output watermark (the combined one with two inputs).
  Timestamp output_watermark() const { return output_watermark_; }
  bool output_idle() const { return output_idle_; }
  void set_barrier_handler(BarrierHandler* h) { barrier_handler_ = h; }
  // The checkpoint being aligned (-1: none) and whether channel c is held.
  int64_t aligning_checkpoint() const { return aligning_; }
  bool blocked(int c) const { return blocked_[static_cast<size_t>(c)]; }
  // Checkpoints: the valves' state.  Restoring it also hands the gate's
  // watermark (and idleness) to the chain, so the operators are where they
  // were at the checkpoint before any replayed record arrives.
  void SnapshotValve(StateWriter& w) const;
  void RestoreValve(StateReader& r);
  // Rescaled, the channels are others: they start at MIN (as in Flink), but
  // the gate's output starts at the lowest output watermark of the old
  // subtasks (`old`: their valves' states), handed to the chain like a
  // restored valve's.  Every record replayed here was behind at least that
  // watermark in the run that took the checkpoint, so none becomes late that
  // was not; over an all-to-all edge from tasks that were not rescaled every
  // old subtask had the same watermark, so lateness is decided as without
  // the restore.  (At MIN, a window that had fired before the checkpoint
  // would take a replayed late record as on time and never fire it again:
  // docs/checkpoints.md.)  DATA_LOSS, naming the old subtask, when one
  // cannot be read.
  absl::Status RestoreRescaledValve(const std::vector<const std::string*>& old);

  // --- Unaligned checkpoints (the top of this file), for GateChannelsCore ---
  // The unaligned checkpoint whose channel state is being stored (-1: none).
  int64_t unaligned_checkpoint() const { return ua_id_; }
  // Channel c has met the barrier of unaligned checkpoint `id` (or a later
  // one), or has ended.
  bool unaligned_done(int c, int64_t id) const {
    return ua_done_[static_cast<size_t>(c)] >= id || ended_channel_[static_cast<size_t>(c)];
  }
  // What is delivered from channel c now belongs to the channel state.
  bool recording(int c) const {
    return ua_id_ >= 0 && ua_done_[static_cast<size_t>(c)] < ua_id_ &&
           !ended_channel_[static_cast<size_t>(c)];
  }
  // Channel c's channel state so far, and its number of entries.
  std::string* channel_state_buffer(int c) { return &ua_bytes_[static_cast<size_t>(c)]; }
  void add_channel_state_entries(int c, uint64_t n) { ua_entries_[static_cast<size_t>(c)] += n; }
  // Starts unaligned checkpoint `id` (the handler snapshots) unless it has
  // started; false for an older one (abandoned: ignored).  A newer one
  // replaces one being stored (that one was abandoned).
  bool BeginUnaligned(int64_t id);
  // Channel c has met the barrier of `id`: its channel state is complete;
  // once every channel's is, the handler gets them.
  void UnalignedChannelDone(int c, int64_t id);

 protected:
  // A control element that arrived on channel `c`; true when it blocked the
  // channel (a barrier that others have not delivered yet).
  bool HandleControl(int c, const Control& ctl);
  // Two inputs: where each input's generalized watermarks go (its head, so
  // that the operator hears which input a value combines).
  void set_generalized_heads(std::vector<OutputBase*> heads) {
    generalized_heads_ = std::move(heads);
  }
  // The number of channels that have ended.
  size_t ended() const { return ended_; }
  size_t num_channels() const { return blocked_.size(); }
  SubtaskMetrics* metrics() const { return metrics_; }

 private:
  // What input `input`'s valve emits.
  class InputEmitter final : public WatermarkValve::Emitter {
   public:
    InputEmitter(InputGateCore* gate, int input) : gate_(gate), input_(input) {}
    void EmitWatermark(Timestamp w) override { gate_->OnInputWatermark(input_, w); }
    void EmitStatus(WatermarkStatus s) override { gate_->OnInputStatus(input_, s); }

   private:
    InputGateCore* gate_;
    int input_;
  };
  // Barrier `id` on channel c: blocks it, or completes the alignment.
  bool OnBarrier(int c, int64_t id);
  // The in-band marker of unaligned checkpoint `id` on channel c.
  void OnUnalignedMarker(int c, int64_t id);
  // Every channel's channel state is complete: to the handler.
  void CompleteUnaligned();
  // Every channel not ended has delivered the barrier being aligned?
  void MaybeCompleteAlignment();
  void Notify(int c);
  // The valves' outputs, combined.
  void OnInputWatermark(int input, Timestamp w);
  void OnInputStatus(int input, WatermarkStatus s);
  // True when the combined watermark advanced (two inputs).
  bool UpdateCombined();
  void Emit(Timestamp w);
  void Emit(WatermarkStatus s);
  // The aligned channel (gate numbering) holding the gate's watermark back,
  // or -1.
  int HoldingChannel() const;
  // Generalized watermarks (runtime/io/watermark_combiner.h): one combiner
  // per declared kind seen on an input, made when its first watermark
  // arrives; what they emit goes to the head (and the listener).
  void OnGeneralized(size_t input, int local, int c, const Control& ctl);
  void GeneralizedIdleness(size_t input, int local, int c);
  void EmitGeneralized(size_t input, const WatermarkCombiner& k, int c, int64_t value);

  OutputBase* head_;
  // Two inputs: each input's head, which takes that input's generalized
  // watermarks (set_generalized_heads); empty: head_ takes them.
  std::vector<OutputBase*> generalized_heads_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  std::vector<WatermarkValve> valves_;
  std::vector<InputEmitter> emitters_;
  std::vector<int> input_of_;  // channel -> its input
  std::vector<int> local_of_;  // channel -> its index in its input's valve
  std::vector<int> first_of_;  // input -> its first channel
  // Two inputs: each input's last watermark and idleness (Flink's partial
  // watermarks), and the gate's output.
  std::vector<Timestamp> partial_watermark_;
  std::vector<bool> partial_idle_;
  // Per input: its generalized watermark combiners (usually none).
  std::vector<std::vector<std::unique_ptr<WatermarkCombiner>>> combiners_;
  Timestamp output_watermark_ = kMinTimestamp;
  bool output_idle_ = false;
  size_t ended_ = 0;
  int current_channel_ = -1;
  bool notified_ = false;
  // Alignment.
  BarrierHandler* barrier_handler_ = nullptr;
  std::vector<bool> ended_channel_;
  std::vector<bool> blocked_;
  size_t num_blocked_ = 0;
  int64_t aligning_ = -1;       // the checkpoint id being aligned
  int64_t last_aligned_ = -1;   // the last completed
  int64_t align_start_ns_ = 0;  // steady clock, at the first barrier
  // Unaligned checkpoints.
  int64_t ua_id_ = -1;                 // being stored
  int64_t ua_last_started_ = -1;       // the last started
  std::vector<int64_t> ua_done_;       // per channel: the last barrier met
  size_t ua_open_ = 0;                 // channels not done with ua_id_
  std::vector<std::string> ua_bytes_;  // per channel: its channel state
  std::vector<uint64_t> ua_entries_;   // and its number of entries
};

class GateInputBase;

// Channel state (unaligned checkpoints): records [from, to) of a Batch<T>
// encoded into `w` (each: u8 0, i64 timestamp, StateCodec<T>), and one record
// decoded from `r` and appended to a Batch<T>.  Null: T has no StateCodec
// (`type` names it).
struct GateRecordCodec {
  void (*encode)(const BatchBase& batch, uint32_t from, uint32_t to, StateWriter& w) = nullptr;
  void (*decode)(BatchBase& batch, StateReader& r) = nullptr;
  std::string type;
};

// The channels of one logical input, read a batch at a time: the records go
// to the head a run at a time (the runs between the batch's controls, through
// `deliver`, the only part that knows the record type: GateChannels<T>), the
// controls to the gate.  A barrier that blocks the channel keeps the rest of
// the batch here until the alignment completes (input_gate.cc).
class GateChannelsCore {
 public:
  // Records [from, to) of `batch` (a Batch<T>) to `head` (an Output<T>).
  using Deliver = void (*)(OutputBase* head, BatchBase& batch, uint32_t from, uint32_t to);
  using Codec = GateRecordCodec;
  GateChannelsCore(std::vector<ChannelBase*> channels, OutputBase* head, Deliver deliver,
                   Codec codec = {});
  ~GateChannelsCore();
  GateChannelsCore(GateChannelsCore&&) noexcept;
  size_t size() const { return channels_.size(); }

  enum class Took { kNothing, kBatch };
  // One batch of local channel `k` (gate channel `c`), if it has one.
  Took Step(GateInputBase& gate, size_t k, int c);
  // Unaligned checkpoints: the priority lanes of these channels (gate
  // channels from `first` on).
  void PollPriority(GateInputBase& gate, int first);
  // Restores local channel k's channel state (`entries` entries).
  // `version`: the channel state format's (input_gate.cc).
  absl::Status RestoreChannel(size_t k, std::string_view bytes, uint64_t entries, uint32_t version);

 private:
  // Where a blocked channel stopped in its batch.
  struct Held {
    std::unique_ptr<BatchBase> batch;
    size_t control = 0;     // the next control to handle
    uint32_t position = 0;  // the next record
  };

  // From control `first_control` and record `done` on.  Returns true when a
  // barrier blocked the channel: the batch is then kept in held_[k].
  bool Process(GateInputBase& gate, size_t k, int c, std::unique_ptr<BatchBase>& batch,
               size_t first_control, uint32_t done);
  // Channel state: records [from, to) of `b` from channel c, while recording.
  void RecordRun(GateInputBase& gate, int c, const BatchBase& b, uint32_t from, uint32_t to);
  // Encodes `b` from control `first_control` and record `from` on into `w`,
  // up to the marker of unaligned checkpoint `id`; true when it was met.
  bool EncodeUntilMarker(const BatchBase& b, size_t first_control, uint32_t from, int64_t id,
                         StateWriter& w, uint64_t* entries) const;
  // The priority barrier `id` of local channel k (gate channel c): every
  // batch queued up to its marker encoded, left in the queue.
  void Capture(GateInputBase& gate, size_t k, int c, int64_t id);
  void NeedCodec() const;

  std::vector<ChannelBase*> channels_;
  OutputBase* head_;
  Deliver deliver_;
  Codec codec_;
  std::vector<Held> held_;
  // Per channel: restored channel state, read before the channel.
  std::vector<std::deque<std::unique_ptr<BatchBase>>> ahead_;
};

// The channels of one logical input of type T (see GateChannelsCore).
template <typename T>
class GateChannels : public GateChannelsCore {
 public:
  // `channels`: Channel<T>s.
  GateChannels(std::vector<ChannelBase*> channels, Output<T>* head)
      : GateChannelsCore(std::move(channels), head, &DeliverRun, MakeCodec()) {}

 private:
  static Codec MakeCodec() {
    Codec c;
    if constexpr (HasStateCodec<T>) {
      c.encode = &EncodeRun;
      c.decode = &DecodeOne;
    }
    c.type = TypeName<T>();
    return c;
  }
  static void EncodeRun(const BatchBase& batch, uint32_t from, uint32_t to, StateWriter& w) {
    const auto& records = static_cast<const Batch<T>&>(batch).records;
    for (uint32_t i = from; i < to; ++i) {
      w.PutU8(0);
      w.PutI64(records[i].timestamp);
      Encode(w, records[i].value);
    }
  }
  static void DecodeOne(BatchBase& batch, StateReader& r) {
    const Timestamp ts = r.GetI64("record timestamp");
    T v = Decode<T>(r);
    if (r.ok()) AppendRecord(static_cast<Batch<T>&>(batch).records, std::move(v), ts);
  }
  static void DeliverRun(OutputBase* head, BatchBase& batch, uint32_t from, uint32_t to) {
    std::span<Record<T>> records(static_cast<Batch<T>&>(batch).records);
    static_cast<Output<T>*>(head)->CollectBatch(records.subspan(from, to - from));
  }
};

// What InputGate and TwoInputGate share: the TaskInput side of the core
// (barriers, the valves in checkpoints) and the round over the channels.
class GateInputBase : public TaskInput, public InputGateCore {
 public:
  using InputGateCore::InputGateCore;
  ~GateInputBase() override;
  // (input_gate.cc)
  void SetBarrierHandler(BarrierHandler* h) override;
  void SnapshotPosition(StateWriter& w) const override;
  void RestorePosition(StateReader& r) override;
  absl::Status RestoreRescaled(const std::vector<const std::string*>& old) override;
  void PollPriority() override;
  absl::Status RestoreChannelState(std::string_view bytes) override;
  // For GateChannels.
  bool OnControl(int c, const Control& ctl) { return HandleControl(c, ctl); }
  void CountIn(size_t n) { metrics()->records_in.Inc(static_cast<int64_t>(n)); }

 protected:
  // The channels of each logical input, in gate order (the subclass's).
  void set_parts(std::vector<GateChannelsCore*> parts) { parts_ = std::move(parts); }
  // One step: the channels in turn from where the last step stopped, the
  // blocked ones skipped, until take(c) takes a batch of channel c.
  template <typename Take>
  Step Round(Take&& take) {
    const size_t n = num_channels();
    for (size_t k = 0; k < n; ++k) {
      const size_t c = next_;
      if (++next_ == n) next_ = 0;
      if (blocked(static_cast<int>(c))) continue;
      if (take(c)) return ended() == n ? Step::kEnd : Step::kMore;
    }
    return ended() == n ? Step::kEnd : Step::kNothing;
  }

 private:
  size_t next_ = 0;
  std::vector<GateChannelsCore*> parts_;
};

// The gate of a one-input task, whatever its record type (input_gate.cc);
// InputGate<T> only supplies the record type's GateChannels.
class OneInputGate : public GateInputBase {
 public:
  OneInputGate(GateChannelsCore in, SubtaskMetrics* metrics, WatermarkListener* listener,
               OutputBase* head);
  ~OneInputGate() override;
  Step RunStep() override;

 private:
  GateChannelsCore in_;
};

template <typename T>
class InputGate final : public OneInputGate {
 public:
  // `channels`: Channel<T>s.
  InputGate(std::vector<ChannelBase*> channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : OneInputGate(GateChannels<T>(std::move(channels), head), metrics, listener, head) {}
  InputGate(const std::vector<Channel<T>*>& channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : InputGate(std::vector<ChannelBase*>(channels.begin(), channels.end()), head, metrics,
                  listener) {}
};

// The input of a two-input operator (TwoInputOperator, runtime/core/operator.h):
// the channels of its first input (records of A) and of its second (B), read
// in turn, one valve per input (InputGateCore).  Records of the first input go
// to `head1`, of the second to `head2`, and so do each input's generalized
// watermarks; the combined watermark and status to `head`.
template <typename A, typename B>
class TwoInputGate final : public GateInputBase {
 public:
  TwoInputGate(std::vector<ChannelBase*> first, std::vector<ChannelBase*> second, Output<A>* head1,
               Output<B>* head2, OutputBase* head, SubtaskMetrics* metrics,
               WatermarkListener* listener)
      : GateInputBase(static_cast<int>(first.size() + second.size()), head, metrics, listener,
                      Inputs(first.size(), second.size())),
        first_(GateChannels<A>(std::move(first), head1)),
        second_(GateChannels<B>(std::move(second), head2)) {
    set_parts({&first_, &second_});
    set_generalized_heads({head1, head2});
  }

  Step RunStep() override {
    const size_t n1 = first_.size();
    return Round([this, n1](size_t c) {
      return (c < n1 ? first_.Step(*this, c, static_cast<int>(c))
                     : second_.Step(*this, c - n1, static_cast<int>(c))) ==
             GateChannelsCore::Took::kBatch;
    });
  }

 private:
  static std::vector<int> Inputs(size_t n1, size_t n2) {
    std::vector<int> v(n1, 0);
    v.insert(v.end(), n2, 1);
    return v;
  }

  GateChannelsCore first_;
  GateChannelsCore second_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_INPUT_GATE_H_
