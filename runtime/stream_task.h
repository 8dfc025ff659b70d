// runtime/stream_task.h
//
// StreamTask: one chain of operators at one subtask index, the unit the
// executor schedules.  Its input is either a source (SourceDriver<T>) or an
// input gate (InputGate<T>: the task's input channels, a WatermarkValve, and
// the head of the chain); its outputs are ChannelWriter<T>s, one per
// downstream edge, that fill batches and hand them to channels.
//
// What one RunSlice() does: fire due processing-time timers; then, while every
// output channel has space, take one step of input (one batch from a channel,
// or one poll of the source) through the chain; flush batches older than the
// buffer timeout; yield after a bounded number of steps so that tasks share
// the workers fairly.  When there is no input or no space it flushes every
// partial batch (so a slow stream is never held back) and waits.
//
// Thread safety: everything here is touched only by the thread running the
// task, except the channels (channel.h) and the metrics (metrics.h).
#ifndef TM_RUNTIME_STREAM_TASK_H_
#define TM_RUNTIME_STREAM_TASK_H_

#include <algorithm>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "partitioning/partitioner.h"
#include "runtime/channel.h"
#include "runtime/error_guard.h"
#include "runtime/metrics.h"
#include "runtime/operator.h"
#include "runtime/source.h"
#include "runtime/task.h"
#include "runtime/watermark_valve.h"

namespace tidemark {

class JobExecution;

// Passes elements to the next operator of a chain; turns an exception from
// that operator into an OperatorError naming it (error_guard.h).  Once the job
// is cancelled, the next element throws TaskCancelled instead, so a cancel
// lands within one user call even in the middle of a batch or a firing.
template <typename T>
class ChainOutput final : public Output<T> {
 public:
  ChainOutput(InputOperator<T>* next, const OperatorContext* ctx) : next_(next), ctx_(ctx) {}
  void Collect(T&& v, Timestamp ts) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    GuardUserCall(*ctx_, [&] { next_->ProcessElement(std::move(v), ts); });
  }
  void EmitWatermark(Timestamp w) override {
    if (ctx_->cancelled()) throw TaskCancelled{};
    GuardUserCall(*ctx_, [&] { next_->ProcessWatermark(w); });
  }
  void EmitStatus(WatermarkStatus s) override {
    GuardUserCall(*ctx_, [&] { next_->ProcessStatus(s); });
  }

 private:
  InputOperator<T>* next_;
  const OperatorContext* ctx_;
};

template <typename T>
class FanOutOutput final : public Output<T> {
 public:
  explicit FanOutOutput(std::vector<Output<T>*> outs) : outs_(std::move(outs)) {}
  void Collect(T&& v, Timestamp ts) override {
    for (size_t i = 0; i + 1 < outs_.size(); ++i) outs_[i]->CollectCopy(v, ts);
    outs_.back()->Collect(std::move(v), ts);
  }
  void EmitWatermark(Timestamp w) override {
    for (auto* o : outs_) o->EmitWatermark(w);
  }
  void EmitStatus(WatermarkStatus s) override {
    for (auto* o : outs_) o->EmitStatus(s);
  }

 private:
  std::vector<Output<T>*> outs_;
};

template <typename T>
class DiscardOutput final : public Output<T> {
 public:
  void Collect(T&&, Timestamp) override {}
  void EmitWatermark(Timestamp) override {}
  void EmitStatus(WatermarkStatus) override {}
};

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
  SteadyTime now;  // the task's current slice time
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
  const bool broadcast_;  // partitioner_->IsBroadcast(), asked once
  const std::string blame_;  // names the partitioner in errors
  int64_t count_ = 0;
};

// The input side of a task: a source or an input gate.
class TaskInput {
 public:
  enum class Step { kMore, kNothing, kEnd };
  virtual ~TaskInput() = default;
  virtual void Open() {}
  // One step: one batch or one poll.
  virtual Step RunStep() = 0;
  virtual void Close() {}
  // After kNothing: processing time at which to retry (kMaxTimestamp: when
  // notified).
  virtual Timestamp RetryAt() const { return kMaxTimestamp; }
  virtual bool NeedsOwnThread() const { return false; }
  virtual int WaitFd() const { return -1; }
};

template <typename T>
class InputGate final : public TaskInput, private WatermarkValve::Emitter {
 public:
  InputGate(std::vector<Channel<T>*> channels, Output<T>* head, SubtaskMetrics* metrics,
            WatermarkListener* listener)
      : channels_(std::move(channels)),
        head_(head),
        metrics_(metrics),
        listener_(listener),
        valve_(static_cast<int>(channels_.size())) {}

  Step RunStep() override {
    const size_t n = channels_.size();
    for (size_t k = 0; k < n; ++k) {
      const size_t c = next_;
      if (++next_ == n) next_ = 0;
      if (channels_[c]->SizeApprox() == 0) continue;
      auto batch = channels_[c]->Pop();
      if (!batch) continue;
      Process(static_cast<int>(c), *batch);
      channels_[c]->Recycle(std::move(batch));
      return ended_ == n ? Step::kEnd : Step::kMore;
    }
    return ended_ == n ? Step::kEnd : Step::kNothing;
  }

  const WatermarkValve& valve() const { return valve_; }

 private:
  void Process(int c, Batch<T>& b) {
    size_t ci = 0;
    const size_t nr = b.records.size();
    for (size_t r = 0; r < nr; ++r) {
      while (ci < b.controls.size() && b.controls[ci].position == r)
        HandleControl(c, b.controls[ci++]);
      head_->Collect(std::move(b.records[r].value), b.records[r].timestamp);
    }
    while (ci < b.controls.size()) HandleControl(c, b.controls[ci++]);
    if (nr != 0) metrics_->records_in.Inc(static_cast<int64_t>(nr));
  }

  void HandleControl(int c, const Control& ctl) {
    const Timestamp before_wm = valve_.channel_watermark(c);
    const bool before_idle = valve_.channel_idle(c);
    const Timestamp before_aligned = valve_.last_output_watermark();
    current_channel_ = c;
    notified_ = false;
    switch (ctl.kind) {
      case ControlKind::kWatermark:
        valve_.InputWatermark(c, ctl.value, *this);
        break;
      case ControlKind::kStatus:
        valve_.InputStatus(c, static_cast<WatermarkStatus>(ctl.value), *this);
        break;
      case ControlKind::kEndOfInput:
        valve_.InputEnd(c, *this);
        ++ended_;
        break;
    }
    if (!notified_ &&
        (valve_.channel_watermark(c) != before_wm || valve_.channel_idle(c) != before_idle ||
         valve_.last_output_watermark() != before_aligned)) {
      Notify(c);
    }
    current_channel_ = -1;
  }

  // Publishes channel `c`'s state (metrics, listener).  Called before the
  // valve's output reaches the operators, so a trace shows the channel change
  // before the window firings it causes.
  void Notify(int c) {
    notified_ = true;
    InputChannelMetrics& m = metrics_->channel(c);
    m.watermark.store(valve_.channel_watermark(c), std::memory_order_relaxed);
    m.idle.store(valve_.channel_idle(c), std::memory_order_relaxed);
    if (listener_) {
      WatermarkListener::ChannelEvent e{&metrics_->task_name(),
                                        metrics_->subtask(),
                                        c,
                                        valve_.channel_watermark(c),
                                        valve_.channel_idle(c),
                                        valve_.last_output_watermark(),
                                        valve_.last_output_status() == WatermarkStatus::kIdle,
                                        valve_.HoldingChannel()};
      listener_->OnInputChannel(e);
    }
  }

  // WatermarkValve::Emitter
  void EmitWatermark(Timestamp w) override {
    metrics_->input_watermark.store(w, std::memory_order_relaxed);
    if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
    head_->EmitWatermark(w);
  }
  void EmitStatus(WatermarkStatus s) override {
    if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
    head_->EmitStatus(s);
  }

  std::vector<Channel<T>*> channels_;
  Output<T>* head_;
  SubtaskMetrics* metrics_;
  WatermarkListener* listener_;
  WatermarkValve valve_;
  size_t next_ = 0;
  size_t ended_ = 0;
  int current_channel_ = -1;
  bool notified_ = false;
};

// Drives a Source<T> into the head of its chain.  At the end of input it
// sends kMaxWatermark through the chain (firing every remaining event-time
// timer downstream), as Flink's sources do.
template <typename T>
class SourceDriver final : public TaskInput, private SourceOutput<T> {
 public:
  SourceDriver(std::unique_ptr<Source<T>> source, Output<T>* head, SourceContext ctx,
               std::string name, WriterSignals* signals, SubtaskMetrics* metrics, size_t budget)
      : source_(std::move(source)),
        head_(head),
        ctx_(ctx),
        name_(std::move(name)),
        signals_(signals),
        metrics_(metrics),
        budget_(std::max<size_t>(1, budget)) {
    if (ctx_.metrics == nullptr) ctx_.metrics = metrics_;
  }

  void Open() override {
    GuardUserCall(name_, ctx_.subtask_index, ctx_.parallelism, [&] { source_->Open(ctx_); });
  }
  void Close() override { source_->Close(); }

  Step RunStep() override {
    const int64_t before = emitted_;
    const PollStatus st = GuardUserCall(name_, ctx_.subtask_index, ctx_.parallelism,
                                        [&] { return source_->Poll(*this, budget_); });
    if (emitted_ != before) metrics_->records_in.Inc(emitted_ - before);
    switch (st) {
      case PollStatus::kMoreAvailable:
        return Step::kMore;
      case PollStatus::kNothingAvailable:
        return Step::kNothing;
      case PollStatus::kEndOfInput:
        // Through our own EmitWatermark, so an idle source first becomes
        // ACTIVE again: W(MAX) is not ignored downstream as coming from an
        // idle channel.
        EmitWatermark(kMaxWatermark);
        return Step::kEnd;
    }
    return Step::kEnd;
  }
  Timestamp RetryAt() const override { return source_->RetryAt(); }
  bool NeedsOwnThread() const override { return source_->NeedsOwnThread(); }
  int WaitFd() const override { return source_->WaitFd(); }

 private:
  // SourceOutput<T>
  void Collect(T&& value) override {
    ++emitted_;
    head_->Collect(std::move(value), kNoTimestamp);
  }
  void CollectWithTimestamp(T&& value, Timestamp ts) override {
    ++emitted_;
    head_->Collect(std::move(value), ts);
  }
  void EmitWatermark(Timestamp w) override {
    if (w <= last_watermark_) return;
    if (idle_) {
      idle_ = false;
      head_->EmitStatus(WatermarkStatus::kActive);
    }
    last_watermark_ = w;
    head_->EmitWatermark(w);
  }
  void MarkIdle() override {
    if (idle_) return;
    idle_ = true;
    head_->EmitStatus(WatermarkStatus::kIdle);
  }
  // Also true once the job is cancelled, so a source stops emitting at once.
  bool Backpressured() const override {
    return signals_->backpressured || signals_->cancelled->load(std::memory_order_relaxed);
  }

  std::unique_ptr<Source<T>> source_;
  Output<T>* head_;
  SourceContext ctx_;
  std::string name_;
  WriterSignals* signals_;
  SubtaskMetrics* metrics_;
  size_t budget_;
  int64_t emitted_ = 0;
  Timestamp last_watermark_ = kMinTimestamp;
  bool idle_ = false;
};

// One chain of operators at one subtask index.
class StreamTask final : public Task {
 public:
  StreamTask(std::string name, JobExecution* job, std::unique_ptr<SubtaskMetrics> metrics,
             const Clock* clock, const JobConfig* config);
  ~StreamTask() override;

  // --- assembly, by the executor, before the job starts ---
  ProcessingTimeService& timers() { return timers_; }
  // Processing time without the time spent back-pressured (idleness runs on
  // it; see PausableRelativeClock).
  PausableRelativeClock& input_activity_clock() { return activity_clock_; }
  SubtaskMetrics* metrics() { return metrics_.get(); }
  WriterSignals* signals() { return &signals_; }
  const JobConfig& config() const { return *config_; }
  // Operators in chain order (head first); contexts are owned here.
  OperatorContext* AddContext(std::unique_ptr<OperatorContext> ctx);
  void AddOperator(std::unique_ptr<OperatorBase> op, OperatorContext* ctx);
  void AddOutputObject(std::unique_ptr<OutputBase> out) { outputs_.push_back(std::move(out)); }
  void AddWriter(WriterBase* w) { writers_.push_back(w); }
  void SetInput(std::unique_ptr<TaskInput> input) { input_ = std::move(input); }

  // --- Task ---
  Result RunSlice() override;
  SteadyTime WakeupDeadline() const override { return wakeup_; }
  bool NeedsOwnThread() const override { return input_ && input_->NeedsOwnThread(); }
  int WaitFd() const override { return input_ ? input_->WaitFd() : -1; }
  void Release() override;

 private:
  Result Wait(Timestamp now_ms);
  // Blocked on a full output channel: the input activity clock stands still
  // until the task can write again.
  void SetBackpressured(bool blocked);
  bool AnyWriterFull();
  void FinishChain();
  void CloseAll();

  JobExecution* job_;
  std::unique_ptr<SubtaskMetrics> metrics_;
  const Clock* clock_;
  const JobConfig* config_;
  ProcessingTimeService timers_;
  PausableRelativeClock activity_clock_;
  bool paused_by_backpressure_ = false;
  WriterSignals signals_;
  std::vector<std::unique_ptr<OperatorContext>> contexts_;
  std::vector<std::pair<std::unique_ptr<OperatorBase>, OperatorContext*>> operators_;
  std::vector<std::unique_ptr<OutputBase>> outputs_;  // chain outputs and writers
  std::vector<WriterBase*> writers_;
  std::unique_ptr<TaskInput> input_;
  bool opened_ = false;
  bool closed_ = false;
  SteadyTime wakeup_ = SteadyTime::max();
};

}  // namespace tidemark

#endif  // TM_RUNTIME_STREAM_TASK_H_
