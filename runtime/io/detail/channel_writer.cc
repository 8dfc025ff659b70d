#include "tidemark/runtime/io/detail/channel_writer.h"

namespace tidemark::internal {

ChannelWriterCore::ChannelWriterCore(size_t num_channels, size_t batch_size, WriterSignals* signals,
                                     SubtaskMetrics* metrics, WatermarkListener* listener,
                                     bool report_watermarks, std::string blame)
    : batch_size_(std::max<size_t>(1, batch_size)),
      signals_(signals),
      metrics_(metrics),
      started_(num_channels),
      listener_(listener),
      report_(report_watermarks),
      blame_(std::move(blame)) {}

ChannelWriterCore::~ChannelWriterCore() = default;

void ChannelWriterCore::ReportWatermark(Timestamp w) {
  if (!report_) return;
  metrics_->output_watermark.store(w, std::memory_order_relaxed);
  if (listener_) listener_->OnOutputWatermark(metrics_->task_name(), metrics_->subtask(), w);
}

void ChannelWriterCore::ReportStatus(WatermarkStatus s) {
  if (!report_) return;
  metrics_->idle.store(s == WatermarkStatus::kIdle, std::memory_order_relaxed);
  if (listener_) listener_->OnOutputStatus(metrics_->task_name(), metrics_->subtask(), s);
}

void ChannelWriterCore::PublishCount() {
  if (count_ != 0) {
    metrics_->records_out.Inc(count_);
    count_ = 0;
  }
}

void ChannelWriterCore::PartitionerFailed() const {
  RethrowAsOperatorError(blame_, metrics_->subtask(), metrics_->parallelism());
}

}  // namespace tidemark::internal
