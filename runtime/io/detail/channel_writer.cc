#include "tidemark/runtime/io/detail/channel_writer.h"

namespace tidemark::internal {

ChannelWriterCore::ChannelWriterCore(const std::vector<ChannelBase*>& channels,
                                     bool has_partitioner, bool broadcast, WriterRoute route,
                                     size_t batch_size, WriterSignals* signals,
                                     SubtaskMetrics* metrics, WatermarkListener* listener,
                                     bool report_watermarks, std::string_view blame)
    : channels_(channels),
      current_(channels_.size()),
      batch_size_(std::max<size_t>(1, batch_size)),
      signals_(signals),
      metrics_(metrics),
      started_(channels_.size()),
      broadcast_(has_partitioner ? broadcast : route.strategy == ShipStrategy::kBroadcast),
      rebalance_(!has_partitioner && route.strategy != ShipStrategy::kForward &&
                 route.strategy != ShipStrategy::kBroadcast &&
                 route.strategy != ShipStrategy::kShuffle &&
                 route.strategy != ShipStrategy::kGlobal),
      shuffle_(!has_partitioner && route.strategy == ShipStrategy::kShuffle),
      // Rebalance starts at the subtask's own index, rescale at its first
      // channel (Flink's RescalePartitioner); global sends to channel 0.
      next_(channels_.empty() || route.strategy == ShipStrategy::kRescale
                ? 0
                : route.subtask % static_cast<int>(channels_.size())),
      random_(static_cast<uint64_t>(route.subtask) + 1),
      listener_(listener),
      report_(report_watermarks),
      blame_(blame) {
  for (size_t i = 0; i < channels_.size(); ++i) current_[i] = channels_[i]->AcquireAnyBatch();
}

ChannelWriterCore::~ChannelWriterCore() = default;

bool ChannelWriterCore::HasSpace() {
  for (auto* ch : channels_)
    if (!ch->HasSpace()) return false;
  return true;
}

void ChannelWriterCore::FlushAll() {
  for (size_t c = 0; c < channels_.size(); ++c)
    if (current_[c]->NumRecords() != 0 || !current_[c]->controls.empty()) Flush(c);
  PublishCount();
}

void ChannelWriterCore::FlushOlderThan(SteadyTime cutoff) {
  for (size_t c = 0; c < channels_.size(); ++c)
    if ((current_[c]->NumRecords() != 0 || !current_[c]->controls.empty()) && started_[c] <= cutoff)
      Flush(c);
  PublishCount();
}

void ChannelWriterCore::EndOfInput() {
  for (size_t c = 0; c < channels_.size(); ++c) {
    AddControl(c, ControlKind::kEndOfInput, 0);
    channels_[c]->PushLastBatch(std::move(current_[c]));
    current_[c] = channels_[c]->AcquireAnyBatch();
  }
  PublishCount();
}

void ChannelWriterCore::EmitBarrier(int64_t checkpoint_id, bool unaligned) {
  if (!unaligned) {
    for (size_t c = 0; c < channels_.size(); ++c)
      AddControl(c, ControlKind::kBarrier, checkpoint_id);
    FlushAll();
    return;
  }
  for (size_t c = 0; c < channels_.size(); ++c) {
    AddControl(c, ControlKind::kBarrier, checkpoint_id, kUnalignedBarrier);
    if (!channels_[c]->PushBatchWithPriorityBarrier(std::move(current_[c]), checkpoint_id))
      signals_->backpressured = true;
    current_[c] = channels_[c]->AcquireAnyBatch();
  }
  PublishCount();
}

void ChannelWriterCore::WatermarkToAll(Timestamp w) {
  for (size_t c = 0; c < channels_.size(); ++c) AddControl(c, ControlKind::kWatermark, w);
  ReportWatermark(w);
}

void ChannelWriterCore::StatusToAll(WatermarkStatus s) {
  for (size_t c = 0; c < channels_.size(); ++c)
    AddControl(c, ControlKind::kStatus, static_cast<Timestamp>(s));
  ReportStatus(s);
}

void ChannelWriterCore::GeneralizedToAll(const GeneralizedWatermark& w) {
  for (size_t c = 0; c < channels_.size(); ++c)
    AddControl(c, ControlKind::kGeneralized, w.raw_value(), w.spec().id);
  // Sent at once, with what precedes it, as a checkpoint barrier is: Flink
  // sends a generalized watermark as an event (RecordWriter::broadcastEvent),
  // which ends the buffer it follows, where an event-time watermark waits
  // in the buffer like a record (the buffer timeout).
  FlushAll();
  if (report_ && listener_)
    listener_->OnGeneralizedWatermark(metrics_->task_name(), metrics_->subtask(), false, -1, w);
}

void ChannelWriterCore::Flush(size_t c) {
  if (!channels_[c]->PushBatch(std::move(current_[c]))) signals_->backpressured = true;
  current_[c] = channels_[c]->AcquireAnyBatch();
}

void ChannelWriterCore::AddControl(size_t c, ControlKind kind, Timestamp value, uint16_t tag) {
  BatchBase& b = *current_[c];
  const size_t n = b.NumRecords();
  if (n == 0 && b.controls.empty()) started_[c] = signals_->now;
  b.controls.push_back(Control{static_cast<uint32_t>(n), kind, tag, value});
}

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
