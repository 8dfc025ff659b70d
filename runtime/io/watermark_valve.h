// runtime/io/watermark_valve.h
//
// WatermarkValve: combines the watermarks and watermark statuses arriving on
// the input channels of one subtask into the subtask's own input watermark,
// following Flink's StatusWatermarkValve rule for rule (see
// docs/semantics.md, section 3.2):
//
//   * each channel keeps its latest watermark (starts at kMinTimestamp), its
//     status (starts ACTIVE) and whether it is "aligned" (counts in the
//     minimum; starts true);
//   * the valve's watermark is the minimum over aligned channels, emitted only
//     when it strictly increases: it never goes back and is never repeated;
//   * an idle channel does not hold the minimum back; when every channel is
//     idle the valve flushes the maximum channel watermark and reports IDLE;
//   * a channel that becomes active again counts only once it has caught up
//     with the valve's last output;
//   * a channel that has ended counts as being at kMaxWatermark.
//
// Thread safety: none.  A valve belongs to one subtask and is driven by the
// thread that runs it.  It is a pure state machine, tested without threads.
#ifndef TM_RUNTIME_WATERMARK_VALVE_H_
#define TM_RUNTIME_WATERMARK_VALVE_H_

#include <vector>

#include "tidemark/runtime/core/time.h"

namespace tidemark {
namespace internal {
class StateWriter;  // runtime/state/state_codec.h
class StateReader;
}  // namespace internal

class WatermarkValve {
 public:
  // Receives what the valve emits, in order.
  class Emitter {
   public:
    virtual ~Emitter() = default;
    virtual void EmitWatermark(Timestamp watermark) = 0;
    virtual void EmitStatus(WatermarkStatus status) = 0;
  };

  explicit WatermarkValve(int num_channels);

  void InputWatermark(int channel, Timestamp watermark, Emitter& out);
  void InputStatus(int channel, WatermarkStatus status, Emitter& out);
  // The channel has ended: it counts as active at kMaxWatermark from now on.
  void InputEnd(int channel, Emitter& out);

  int num_channels() const { return static_cast<int>(channels_.size()); }
  Timestamp channel_watermark(int c) const { return channels_[c].watermark; }
  bool channel_idle(int c) const { return channels_[c].status == WatermarkStatus::kIdle; }
  bool channel_aligned(int c) const { return channels_[c].aligned; }
  bool channel_ended(int c) const { return channels_[c].ended; }
  Timestamp last_output_watermark() const { return last_output_watermark_; }
  WatermarkStatus last_output_status() const { return last_output_status_; }

  // Checkpoints: every channel's watermark and status and the last output
  // (runtime/state/state_codec.h).  A channel that had ended is restored as active
  // at kMaxWatermark (the same for the minimum): its upstream ends it again.
  void Snapshot(internal::StateWriter& w) const;
  // False (and nothing changed) when the state has another channel count.
  bool Restore(internal::StateReader& r);
  // Restoring at another channel count (a rescaled job): the channels stay
  // at MIN, the output starts at `watermark` (lower ones are not forwarded).
  void RestoreOutput(Timestamp watermark) { last_output_watermark_ = watermark; }
  // The last output watermark a Snapshot recorded (r's error set if the
  // state is damaged).
  static Timestamp SnapshotOutputWatermark(internal::StateReader& r);

  // The aligned channel whose watermark is the current minimum (the one holding
  // the subtask's watermark back), or -1 when no channel is aligned below
  // MAX (an ended channel holds nothing back: after the end of input, none
  // does).  Ties go to the lowest index.
  int HoldingChannel() const;

 private:
  struct Channel {
    Timestamp watermark = kMinTimestamp;
    WatermarkStatus status = WatermarkStatus::kActive;
    bool aligned = true;
    bool ended = false;
  };

  bool AnyActive() const;
  void FindAndOutputNewMin(Emitter& out);
  void FindAndOutputMaxAcrossAll(Emitter& out);

  std::vector<Channel> channels_;
  Timestamp last_output_watermark_ = kMinTimestamp;
  WatermarkStatus last_output_status_ = WatermarkStatus::kActive;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_WATERMARK_VALVE_H_
