// tools/cli/generators.h
//
// The watermark generators `tidemark run --watermarks=...` offers, each
// reporting every record's trace line (key, event time, max timestamp,
// watermark) to the TraceRecorder:
//   bounded:D     Flink's forBoundedOutOfOrderness: max_ts - D - 1, periodic;
//   monotonous    bounded:0;
//   lag:D         the documents' hand-written periodic generator: max_ts - D,
//                 max_ts starting at 0 (so the first watermark is -D);
//   punctuated:D  max_ts - D emitted on every record (document 001, 4.2);
//   marker        a "#watermark T" line emits T; nothing else emits.
#ifndef TM_TOOLS_CLI_GENERATORS_H_
#define TM_TOOLS_CLI_GENERATORS_H_

#include <functional>
#include <memory>

#include "tidemark/runtime/task/watermark_strategy.h"
#include "tools/cli/line_format.h"
#include "tools/cli/specs.h"
#include "tools/cli/trace.h"

namespace tidemark::cli {

class CliGenerator final : public WatermarkGenerator<CliRecord> {
 public:
  CliGenerator(WatermarkSpec spec, TraceRecorder* recorder)
      : spec_(spec), delay_(ToMillis(spec.delay)), recorder_(recorder) {
    switch (spec_.kind) {
      case WatermarkSpec::Kind::kBounded:
      case WatermarkSpec::Kind::kMonotonous:
        max_ts_ = SaturatingAdd(kMinTimestamp, delay_ + 1);
        break;
      case WatermarkSpec::Kind::kLag:
        max_ts_ = 0;
        break;
      default:
        max_ts_ = kMinTimestamp;
    }
  }

  void OnEvent(const CliRecord& r, Timestamp ts, WatermarkOutput& out) override {
    if (r.is_marker()) {
      if (spec_.kind == WatermarkSpec::Kind::kMarker) {
        marker_ = std::max(marker_, r.marker);
        out.EmitWatermark(r.marker);
      }
      return;
    }
    max_ts_ = std::max(max_ts_, ts);
    if (spec_.kind == WatermarkSpec::Kind::kPunctuated) out.EmitWatermark(Current());
    if (recorder_) recorder_->OnRecord(r.source, r.key, ts, max_ts_, Current());
  }
  void OnPeriodicEmit(WatermarkOutput& out) override {
    switch (spec_.kind) {
      case WatermarkSpec::Kind::kBounded:
      case WatermarkSpec::Kind::kMonotonous:
      case WatermarkSpec::Kind::kLag:
        out.EmitWatermark(Current());
        break;
      default:
        break;
    }
  }
  void SnapshotState(internal::StateWriter& w) const override {
    w.PutI64(max_ts_);
    w.PutI64(marker_);
  }
  void RestoreState(internal::StateReader& r) override {
    max_ts_ = r.GetI64("max timestamp");
    marker_ = r.GetI64("marker");
  }
  // The watermark this generator stands at (or would emit next).
  Timestamp Current() const {
    switch (spec_.kind) {
      case WatermarkSpec::Kind::kBounded:
      case WatermarkSpec::Kind::kMonotonous:
        return SaturatingSub(SaturatingSub(max_ts_, delay_), 1);
      case WatermarkSpec::Kind::kLag:
      case WatermarkSpec::Kind::kPunctuated:
        return SaturatingSub(max_ts_, delay_);
      case WatermarkSpec::Kind::kMarker:
        return marker_;
    }
    return kMinTimestamp;
  }

 private:
  WatermarkSpec spec_;
  int64_t delay_;
  TraceRecorder* recorder_;
  Timestamp max_ts_;
  Timestamp marker_ = kMinTimestamp;
};

inline std::function<std::unique_ptr<WatermarkGenerator<CliRecord>>()> MakeCliGeneratorFactory(
    WatermarkSpec spec, TraceRecorder* recorder) {
  return [spec, recorder] { return std::make_unique<CliGenerator>(spec, recorder); };
}

}  // namespace tidemark::cli

#endif  // TM_TOOLS_CLI_GENERATORS_H_
