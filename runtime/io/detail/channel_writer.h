// runtime/io/detail/channel_writer.h
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
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/core/detail/error_guard.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/io/detail/channel.h"

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
  // Checkpoint barrier `id` to every channel, after everything emitted so
  // far, and sent at once (not held for the buffer timeout).  `unaligned`:
  // the barrier also goes ahead of the queued batches on each channel's
  // priority lane (ChannelBase::PushBatchWithPriorityBarrier); the in-band
  // one marks where it stood.
  virtual void EmitBarrier(int64_t checkpoint_id, bool unaligned) = 0;
};

// Shared by a task's writers: set when a push filled a channel.
struct WriterSignals {
  bool backpressured = false;
  SteadyTime now;                                // the task's current slice time
  const std::atomic<bool>* cancelled = nullptr;  // the job's cancel flag
};

// How a writer picks the channel of a record.  The strategies that need no
// user function route without a Partitioner<T>.
struct WriterRoute {
  // kForward, kBroadcast, kRescale, kShuffle, kGlobal; else rebalance
  ShipStrategy strategy = ShipStrategy::kForward;
  int subtask = 0;  // rebalance starts here (and seeds shuffle)
};

// The half of a writer that does not depend on the record type
// (channel_writer.cc): the channels and their current batches, the control
// path (watermarks, statuses, barriers, end of input, flushing), the reports
// of its output watermark and status, the record count, the batches' ages.
// ChannelWriter<T> adds only what touches a record: routing and appending.
class ChannelWriterCore : public WriterBase {
 public:
  bool HasSpace() override;
  void FlushAll() override;
  void FlushOlderThan(SteadyTime cutoff) override;
  void EndOfInput() override;
  void EmitBarrier(int64_t checkpoint_id, bool unaligned) override;

 protected:
  // `channels`: all Channel<T> of one T.  `has_partitioner`: the records are
  // routed by a Partitioner<T> (`broadcast`: one that broadcasts); else by
  // `route`.
  ChannelWriterCore(const std::vector<ChannelBase*>& channels, bool has_partitioner, bool broadcast,
                    WriterRoute route, size_t batch_size, WriterSignals* signals,
                    SubtaskMetrics* metrics, WatermarkListener* listener, bool report_watermarks,
                    std::string_view blame);
  ~ChannelWriterCore() override;

  // A watermark or status to every channel, then reported.
  void WatermarkToAll(Timestamp w);
  void StatusToAll(WatermarkStatus s);
  // A generalized watermark to every channel (as watermarks are), then
  // reported to the listener.
  void GeneralizedToAll(const GeneralizedWatermark& w);
  // Hands channel c's current batch over and starts a new one.
  void Flush(size_t c);
  void AddControl(size_t c, ControlKind kind, Timestamp value, uint16_t tag = 0);
  void ReportWatermark(Timestamp w);
  void ReportStatus(WatermarkStatus s);
  void PublishCount();
  // Call inside a catch block: the user error of the partitioner (a key
  // selector), blamed on the key_by.
  [[noreturn]] void PartitionerFailed() const;
  uint64_t NextRandom() {
    uint64_t z = (random_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  std::vector<ChannelBase*> channels_;
  std::vector<std::unique_ptr<BatchBase>> current_;  // each a Batch<T>
  const size_t batch_size_;
  WriterSignals* signals_;
  SubtaskMetrics* metrics_;
  std::vector<SteadyTime> started_;  // when each channel's current batch got its first element
  int64_t count_ = 0;
  const bool broadcast_;
  const bool rebalance_;  // and rescale, over its own few channels
  const bool shuffle_;
  int next_;                // the next channel, for rebalance
  uint64_t random_;         // shuffle's generator state (SplitMix64: 8 bytes, no setup)
  std::vector<int> route_;  // scratch: the channels of a run

 private:
  WatermarkListener* listener_;
  const bool report_;
  const std::string blame_;  // names the partitioner in errors
};

template <typename T>
class ChannelWriter final : public Output<T>, public ChannelWriterCore {
 public:
  // `channels`: Channel<T>s.  `partitioner` routes the records; without one,
  // `route` does.
  ChannelWriter(const std::vector<ChannelBase*>& channels,
                std::unique_ptr<Partitioner<T>> partitioner, WriterRoute route, size_t batch_size,
                WriterSignals* signals, SubtaskMetrics* metrics, WatermarkListener* listener,
                bool report_watermarks, std::string_view blame = {})
      : ChannelWriterCore(channels, partitioner != nullptr,
                          partitioner != nullptr && partitioner->IsBroadcast(), route, batch_size,
                          signals, metrics, listener, report_watermarks, blame),
        partitioner_(std::move(partitioner)) {}

  void Collect(T&& v, Timestamp ts) override {
    if (channels_.size() == 1) return Append(0, std::move(v), ts);
    if (broadcast_) {
      for (size_t c = 0; c + 1 < channels_.size(); ++c) Append(c, T(v), ts);
      return Append(channels_.size() - 1, std::move(v), ts);
    }
    if (rebalance_) {
      const int c = next_;
      if (++next_ == static_cast<int>(channels_.size())) next_ = 0;
      return Append(static_cast<size_t>(c), std::move(v), ts);
    }
    if (shuffle_)
      return Append(static_cast<size_t>(NextRandom() % channels_.size()), std::move(v), ts);
    if (partitioner_ == nullptr) return Append(0, std::move(v), ts);  // forward, global
    // The partitioner runs user code (a key selector): its errors are the
    // key_by's, not the upstream operator's.
    int c;
    try {
      c = partitioner_->Select(v);
    } catch (...) {
      PartitionerFailed();
    }
    Append(static_cast<size_t>(c), std::move(v), ts);
  }

  void CollectBatch(std::span<Record<T>> records) override {
    if (partitioner_ == nullptr || broadcast_ || channels_.size() == 1) {
      for (Record<T>& r : records) ChannelWriter::Collect(std::move(r.value), r.timestamp);
      return;
    }
    // The channels of the whole run first (key groups in one loop), then the
    // records.
    const size_t n = records.size();
    if (n == 0) return;
    if (route_.size() < n) route_.resize(n);
    try {
      partitioner_->SelectEach(&records[0].value, sizeof(Record<T>), n, route_.data());
    } catch (...) {
      // One record at a time, so that what precedes the failing record is
      // sent and the error is the key_by's, as with Collect.
      for (Record<T>& r : records) ChannelWriter::Collect(std::move(r.value), r.timestamp);
      return;
    }
    AppendRouted(records);
  }

  void EmitWatermark(Timestamp w) override { WatermarkToAll(w); }
  void EmitStatus(WatermarkStatus s) override { StatusToAll(s); }
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override { GeneralizedToAll(w); }

 private:
  void Append(size_t c, T&& v, Timestamp ts) {
    Batch<T>& b = static_cast<Batch<T>&>(*current_[c]);
    if (b.empty()) started_[c] = signals_->now;
    AppendRecord(b.records, std::move(v), ts);
    ++count_;
    if (b.records.size() >= batch_size_) Flush(c);
  }

  // The run's records to the channels in route_: Append's steps with each
  // channel's batch at hand (a batch is replaced only where it is flushed).
  // Up to kRoutedChannels channels; more take Append.
  static constexpr size_t kRoutedChannels = 16;
  void AppendRouted(std::span<Record<T>> records) {
    const size_t channels = channels_.size();
    if (channels > kRoutedChannels) {
      for (size_t k = 0; k < records.size(); ++k)
        Append(static_cast<size_t>(route_[k]), std::move(records[k].value), records[k].timestamp);
      return;
    }
    Batch<T>* batches[kRoutedChannels];
    for (size_t c = 0; c < channels; ++c) batches[c] = &static_cast<Batch<T>&>(*current_[c]);
    const int* route = route_.data();
    for (size_t k = 0; k < records.size(); ++k) {
      const auto c = static_cast<size_t>(route[k]);
      Batch<T>& b = *batches[c];
      if (b.empty()) [[unlikely]]
        started_[c] = signals_->now;
      AppendRecord(b.records, std::move(records[k].value), records[k].timestamp);
      ++count_;
      if (b.records.size() >= batch_size_) [[unlikely]] {
        Flush(c);
        batches[c] = &static_cast<Batch<T>&>(*current_[c]);
      }
    }
  }

  std::unique_ptr<Partitioner<T>> partitioner_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHANNEL_WRITER_H_
