#include "tidemark/runtime/core/operator.h"

#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/detail/task_host.h"

namespace tidemark {

internal::OperatorError::OperatorError(const std::string& operator_name, int subtask,
                                       int parallelism, const std::string& what)
    : std::runtime_error(absl::StrCat("operator '", operator_name, "' (subtask ", subtask, " of ",
                                      parallelism, ") failed: ", what)),
      operator_name_(operator_name),
      subtask_(subtask) {}

void internal::ThrowSideOutputOfAnotherType(const std::string& id) {
  throw std::logic_error(absl::StrCat(
      "side output '", id,
      "': a record of another type than the side output's (an OutputTag of this id with "
      "another type; side output ids must be unique)"));
}

void OperatorContext::Notice(std::string line) {
  if (host_ != nullptr) host_->Notice(std::move(line));
}

OperatorBase::OperatorBase() = default;
OperatorBase::~OperatorBase() = default;

void OperatorBase::Open(OperatorContext& ctx) { ctx_ = &ctx; }
void OperatorBase::ProcessWatermark(Timestamp watermark) { ForwardWatermark(watermark); }
void OperatorBase::ProcessStatus(WatermarkStatus status) { ForwardStatus(status); }
void OperatorBase::ProcessGeneralizedWatermark(const GeneralizedWatermark& w) {
  ForwardGeneralizedWatermark(w);
}

void OperatorBase::set_side_output(const std::string& tag, internal::OutputBase* out) {
  side_outputs_[tag] = out;
}

void OperatorBase::ForwardWatermark(Timestamp w) {
  if (output_base_) output_base_->EmitWatermark(w);
  for (auto& [tag, out] : side_outputs_) out->EmitWatermark(w);
}

void OperatorBase::ForwardStatus(WatermarkStatus s) {
  if (output_base_) output_base_->EmitStatus(s);
  for (auto& [tag, out] : side_outputs_) out->EmitStatus(s);
}

void OperatorBase::ForwardGeneralizedWatermark(const GeneralizedWatermark& w) {
  if (output_base_) output_base_->EmitGeneralizedWatermark(w);
  for (auto& [tag, out] : side_outputs_) out->EmitGeneralizedWatermark(w);
}

internal::OutputBase* OperatorBase::FindSideOutput(const std::string& tag) const {
  auto it = side_outputs_.find(tag);
  return it == side_outputs_.end() ? nullptr : it->second;
}

namespace internal {
SubtaskMetricsSnapshot Snapshot(const SubtaskMetrics& m) {
  SubtaskMetricsSnapshot s;
  s.task_name = m.task_name();
  s.subtask = m.subtask();
  s.parallelism = m.parallelism();
  s.records_in = m.records_in.Get();
  s.records_out = m.records_out.Get();
  s.input_watermark = m.input_watermark.load(std::memory_order_relaxed);
  s.output_watermark = m.output_watermark.load(std::memory_order_relaxed);
  s.idle = m.idle.load(std::memory_order_relaxed);
  s.finished = m.finished.load(std::memory_order_relaxed);
  s.last_checkpoint = m.last_checkpoint.load(std::memory_order_relaxed);
  s.last_alignment_ns = m.last_alignment_ns.load(std::memory_order_relaxed);
  s.max_alignment_ns = m.max_alignment_ns.load(std::memory_order_relaxed);
  for (int i = 0; i < m.num_input_channels(); ++i) {
    s.channel_watermarks.push_back(m.channel(i).watermark.load(std::memory_order_relaxed));
    s.channel_idle.push_back(m.channel(i).idle.load(std::memory_order_relaxed));
    const InputChannelMetrics& c = m.channel(i);
    s.channel_fill.push_back(c.queued != nullptr && c.capacity > 0
                                 ? static_cast<double>(c.queued->load(std::memory_order_relaxed)) /
                                       static_cast<double>(c.capacity)
                                 : 0.0);
  }
  s.counters = m.CounterValues();
  s.gauges = m.GaugeValues();
  s.histograms = m.HistogramValues();
  return s;
}

}  // namespace internal

std::string FormatTimestamp(Timestamp ts) {
  if (ts == kMinTimestamp) return "MIN";
  if (ts == kMaxTimestamp) return "MAX";
  return absl::StrCat(ts);
}

}  // namespace tidemark
