#include "tidemark/runtime/io/watermark_valve.h"

#include <algorithm>

#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

WatermarkValve::WatermarkValve(int num_channels) : channels_(num_channels) {}

bool WatermarkValve::AnyActive() const {
  return std::any_of(channels_.begin(), channels_.end(),
                     [](const Channel& c) { return c.status == WatermarkStatus::kActive; });
}

int WatermarkValve::HoldingChannel() const {
  int best = -1;
  for (int i = 0; i < num_channels(); ++i) {
    // An unaligned channel does not count; one at MAX (ended) holds nothing
    // back.
    if (!channels_[i].aligned || channels_[i].watermark == kMaxWatermark) continue;
    if (best < 0 || channels_[i].watermark < channels_[best].watermark) best = i;
  }
  return best;
}

void WatermarkValve::InputWatermark(int c, Timestamp watermark, Emitter& out) {
  Channel& ch = channels_[c];
  // Watermarks of idle channels (or while the whole valve is idle) are ignored:
  // an idle channel's stored watermark is not updated either.
  if (last_output_status_ == WatermarkStatus::kIdle || ch.status == WatermarkStatus::kIdle) return;
  if (watermark <= ch.watermark) return;  // a channel's watermark never decreases
  ch.watermark = watermark;
  if (!ch.aligned && watermark >= last_output_watermark_) ch.aligned = true;
  FindAndOutputNewMin(out);
}

void WatermarkValve::InputStatus(int c, WatermarkStatus status, Emitter& out) {
  Channel& ch = channels_[c];
  if (status == WatermarkStatus::kIdle && ch.status == WatermarkStatus::kActive) {
    ch.status = WatermarkStatus::kIdle;
    ch.aligned = false;
    if (!AnyActive()) {
      // Flush the maximum whatever the order the channels went idle in, even
      // when the last one was unaligned (Flink, FLINK-7728); only an advancing
      // maximum is emitted.
      FindAndOutputMaxAcrossAll(out);
      last_output_status_ = WatermarkStatus::kIdle;
      out.EmitStatus(WatermarkStatus::kIdle);
    } else if (ch.watermark <= last_output_watermark_) {
      // It may have held the minimum: at the last output, or (after a
      // rescaled restore, RestoreOutput) still at MIN below it.
      FindAndOutputNewMin(out);
    }
  } else if (status == WatermarkStatus::kActive && ch.status == WatermarkStatus::kIdle) {
    ch.status = WatermarkStatus::kActive;
    if (last_output_status_ == WatermarkStatus::kIdle) {
      last_output_status_ = WatermarkStatus::kActive;
      out.EmitStatus(WatermarkStatus::kActive);
    }
    if (ch.watermark >= last_output_watermark_) {
      ch.aligned = true;
      // It may now be the only aligned channel, above the last output.
      FindAndOutputNewMin(out);
    }
  }
}

void WatermarkValve::InputEnd(int c, Emitter& out) {
  if (channels_[c].ended) return;
  InputStatus(c, WatermarkStatus::kActive, out);
  InputWatermark(c, kMaxWatermark, out);
  channels_[c].ended = true;
}

void WatermarkValve::FindAndOutputNewMin(Emitter& out) {
  bool any_aligned = false;
  Timestamp min = kMaxTimestamp;
  for (const Channel& ch : channels_) {
    if (!ch.aligned) continue;
    any_aligned = true;
    min = std::min(min, ch.watermark);
  }
  if (any_aligned && min > last_output_watermark_) {
    last_output_watermark_ = min;
    out.EmitWatermark(min);
  }
}

void WatermarkValve::FindAndOutputMaxAcrossAll(Emitter& out) {
  Timestamp max = kMinTimestamp;
  for (const Channel& ch : channels_) max = std::max(max, ch.watermark);
  if (max > last_output_watermark_) {
    last_output_watermark_ = max;
    out.EmitWatermark(max);
  }
}

void WatermarkValve::Snapshot(internal::StateWriter& w) const {
  w.PutVarint(channels_.size());
  for (const Channel& c : channels_) {
    w.PutI64(c.ended ? kMaxWatermark : c.watermark);
    w.PutU8(!c.ended && c.status == WatermarkStatus::kIdle ? 1 : 0);
    w.PutU8(c.ended || c.aligned ? 1 : 0);
  }
  w.PutI64(last_output_watermark_);
  w.PutU8(last_output_status_ == WatermarkStatus::kIdle ? 1 : 0);
}

Timestamp WatermarkValve::SnapshotOutputWatermark(internal::StateReader& r) {
  const uint64_t n = r.GetCount("valve channels");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    r.GetI64("channel watermark");
    r.GetU8("channel idle");
    r.GetU8("channel aligned");
  }
  return r.GetI64("valve watermark");
}

bool WatermarkValve::Restore(internal::StateReader& r) {
  const uint64_t n = r.GetCount("valve channels");
  if (!r.ok() || n != channels_.size()) return false;
  std::vector<Channel> channels(channels_.size());
  for (Channel& c : channels) {
    c.watermark = r.GetI64("channel watermark");
    c.status = r.GetU8("channel idle") != 0 ? WatermarkStatus::kIdle : WatermarkStatus::kActive;
    c.aligned = r.GetU8("channel aligned") != 0;
  }
  const Timestamp last = r.GetI64("valve watermark");
  const bool idle = r.GetU8("valve idle") != 0;
  if (!r.ok()) return false;
  channels_ = std::move(channels);
  last_output_watermark_ = last;
  last_output_status_ = idle ? WatermarkStatus::kIdle : WatermarkStatus::kActive;
  return true;
}

}  // namespace tidemark
