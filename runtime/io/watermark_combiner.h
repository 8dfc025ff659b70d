// runtime/io/watermark_combiner.h
//
// WatermarkCombiner: combines one declared kind of generalized watermark
// (runtime/core/generalized_watermark.h) over the input channels of one
// subtask's input, as Flink 2's LongWatermarkCombiner and
// BoolWatermarkCombiner do:
//
//   * each channel keeps the last value it sent; a channel that has sent
//     none counts as the function's identity (min: +inf, max: -inf, and:
//     true, or: false);
//   * with combine_wait_for_all_channels, nothing is emitted until every
//     channel has sent a value at least once; after that (and without it, at
//     once) each arrival combines every channel's value;
//   * the combined value is emitted the first time and then only when it
//     differs from the last one emitted (so it may go down as well as up:
//     these are not event time, nothing makes them monotonic);
//   * tidemark's addition, ignore_idle_channels: an idle or ended channel is
//     left out (of the combination and of the wait), unless every channel is
//     idle, when all count again; an idleness change combines again.
//
// Flink's AlignedWatermarkCombiner (its internal declarations' isAligned,
// which blocks the channels that have delivered until all have, like a
// checkpoint barrier) is not offered: Flink 2's public builder cannot make
// one either.
//
// Thread safety: none; a pure state machine driven by the task's thread.
#ifndef TM_RUNTIME_WATERMARK_COMBINER_H_
#define TM_RUNTIME_WATERMARK_COMBINER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "tidemark/runtime/core/generalized_watermark.h"

namespace tidemark {

class WatermarkCombiner {
 public:
  WatermarkCombiner(const internal::WatermarkSpec* spec, int num_channels);

  // Channel `c` sent `value` (a bool as 0 or 1): the value to emit, if any.
  std::optional<int64_t> Input(int c, int64_t value);
  // Channel `c` became idle (or ended: idle for good) or active again: with
  // ignore_idle_channels, the value to emit if the combination changed.
  // With `combine` false only the flag changes (a value arriving on `c`
  // combines next).
  std::optional<int64_t> SetIdle(int c, bool idle, bool combine = true);

  const internal::WatermarkSpec& spec() const { return *spec_; }
  int num_channels() const { return static_cast<int>(values_.size()); }
  bool reported(int c) const { return reported_[static_cast<size_t>(c)]; }
  int64_t channel_value(int c) const { return values_[static_cast<size_t>(c)]; }
  // The last value emitted, if any.
  std::optional<int64_t> last_emitted() const {
    return emitted_ ? std::optional<int64_t>(last_) : std::nullopt;
  }

 private:
  std::optional<int64_t> Combine();

  const internal::WatermarkSpec* spec_;
  std::vector<int64_t> values_;
  std::vector<bool> reported_;
  std::vector<bool> idle_;
  bool any_reported_ = false;
  bool emitted_ = false;
  int64_t last_ = 0;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_WATERMARK_COMBINER_H_
