// runtime/channel_writer.h
//
// Data out (the network plane, sending side): ChannelWriter<T> partitions a
// task's output records over the channels of one downstream edge, fills
// batches, broadcasts watermarks and statuses to every channel, and hands full
// batches to the channels; a full channel sets WriterSignals::backpressured.
// Touched only by the thread running the task (the channels are the
// thread-safe part, channel.h).
#ifndef TM_RUNTIME_CHANNEL_WRITER_H_
#define TM_RUNTIME_CHANNEL_WRITER_H_

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "partitioning/partitioner.h"
#include "runtime/channel.h"
#include "runtime/error_guard.h"
#include "runtime/metrics.h"
#include "runtime/operator.h"
#include "runtime/task.h"

namespace tidemark::internal {

// What a task needs from each of its network outputs.
class WriterBase {
 public:
  virtual ~WriterBase() = default;
  // True when every channel has room; otherwise the task is registered to be
  // notified when there is.
  virtual bool HasSpace() = 0;
  virtual void FlushAll() = 0;
  virtual void FlushOlderThan(SteadyTime cutoff) = 0;
  virtual void EndOfInput() = 0;
};

// Shared by a task's writers: set when a push filled a channel.
struct WriterSignals {
  bool backpressured = false;
  SteadyTime now;                                // the task's current slice time
  const std::atomic<bool>* cancelled = nullptr;  // the job's cancel flag
};

template <typename T>
class ChannelWriter final : public Output<T>, public WriterBase {
 public:
  ChannelWriter(std::vector<Channel<T>*> channels, std::unique_ptr<Partitioner<T>> partitioner,
                size_t batch_size, WriterSignals* signals, SubtaskMetrics* metrics,
                WatermarkListener* listener, bool report_watermarks, std::string blame = "")
      : channels_(std::move(channels)),
        partitioner_(std::move(partitioner)),
        batch_size_(std::max<size_t>(1, batch_size)),
        signals_(signals),
        metrics_(metrics),
        listener_(listener),
        report_(report_watermarks),
        current_(channels_.size()),
        started_(channels_.size()),
        broadcast_(partitioner_ != nullptr && partitioner_->IsBroadcast()),
        blame_(std::move(blame)) {
    for (size_t i = 0; i < channels_.size(); ++i) current_[i] = channels_[i]->AcquireBatch();
  }

  void Collect(T&& v, Timestamp ts) override {
    if (channels_.size() == 1) return Append(0, std::move(v), ts);
    if (broadcast_) {
      for (size_t c = 0; c + 1 < channels_.size(); ++c) Append(c, T(v), ts);
      return Append(channels_.size() - 1, std::move(v), ts);
    }
    // The partitioner runs user code (a key selector): its errors are the
    // key_by's, not the upstream operator's.
    const int c = GuardUserCall(blame_, metrics_->subtask(), metrics_->parallelism(),
                                [&] { return partitioner_->Select(v); });
    Append(static_cast<size_t>(c), std::move(v), ts);
  }

  void EmitWatermark(Timestamp w) override {
    for (size_t c = 0; c < channels_.size(); ++c) AddControl(c, ControlKind::kWatermark, w);
    if (report_) {
      metrics_->output_watermark.store(w, std::memory_order_relaxed);
      if (listener_) listener_->OnOutputWatermark(metrics_->task_name(), metrics_->subtask(), w);
    }
  }
  void EmitStatus(WatermarkStatus s) override {
    for (size_t c = 0; c < channels_.size(); ++c)
      AddControl(c, ControlKind::kStatus, static_cast<Timestamp>(s));
    if (report_) {
      metrics_->idle.store(s == WatermarkStatus::kIdle, std::memory_order_relaxed);
      if (listener_) listener_->OnOutputStatus(metrics_->task_name(), metrics_->subtask(), s);
    }
  }

  bool HasSpace() override {
    for (auto* ch : channels_)
      if (!ch->HasSpace()) return false;
    return true;
  }
  void FlushAll() override {
    for (size_t c = 0; c < channels_.size(); ++c)
      if (!current_[c]->empty()) Flush(c);
    PublishCount();
  }
  void FlushOlderThan(SteadyTime cutoff) override {
    for (size_t c = 0; c < channels_.size(); ++c)
      if (!current_[c]->empty() && started_[c] <= cutoff) Flush(c);
    PublishCount();
  }
  void EndOfInput() override {
    for (size_t c = 0; c < channels_.size(); ++c) AddControl(c, ControlKind::kEndOfInput, 0);
    FlushAll();
  }

 private:
  void Append(size_t c, T&& v, Timestamp ts) {
    Batch<T>& b = *current_[c];
    if (b.empty()) started_[c] = signals_->now;
    b.records.push_back(Record<T>{std::move(v), ts});
    ++count_;
    if (b.records.size() >= batch_size_) Flush(c);
  }
  void AddControl(size_t c, ControlKind kind, Timestamp value) {
    Batch<T>& b = *current_[c];
    if (b.empty()) started_[c] = signals_->now;
    b.AddControl(kind, value);
  }
  void Flush(size_t c) {
    if (!channels_[c]->Push(std::move(current_[c]))) signals_->backpressured = true;
    current_[c] = channels_[c]->AcquireBatch();
  }
  void PublishCount() {
    if (count_ != 0) {
      metrics_->records_out.Inc(count_);
      count_ = 0;
    }
  }

  std::vector<Channel<T>*> channels_;
  std::unique_ptr<Partitioner<T>> partitioner_;
  const size_t batch_size_;
  WriterSignals* signals_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  const bool report_;
  std::vector<std::unique_ptr<Batch<T>>> current_;
  std::vector<SteadyTime> started_;
  const bool broadcast_;     // partitioner_->IsBroadcast(), asked once
  const std::string blame_;  // names the partitioner in errors
  int64_t count_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHANNEL_WRITER_H_
