// runtime/task/detail/source_driver.h
//
// Data in for source tasks: SourceDriver<T> polls a Source<T> into the head of
// its chain, turns its errors into OperatorErrors naming the source, stops it
// on back-pressure or cancellation, and sends kMaxWatermark at the end of
// input.  Touched only by the thread running the task.
#ifndef TM_RUNTIME_SOURCE_DRIVER_H_
#define TM_RUNTIME_SOURCE_DRIVER_H_

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "tidemark/runtime/core/detail/error_guard.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/io/detail/channel_writer.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/task/source.h"
#include "tidemark/runtime/task/watermark_alignment.h"

namespace tidemark::internal {

// The part of a source driver that does not depend on the record type
// (source_driver.cc): watermarks and idleness towards the chain, the poll's
// outcome, back-pressure and cancellation.
class SourceDriverCore {
 protected:
  SourceDriverCore(OutputBase* head, SourceContext ctx, std::string name, WriterSignals* signals,
                   SubtaskMetrics* metrics, size_t budget, OperatorBase* head_op);
  // Not virtual (SourceDriver<T> is never deleted through it): no
  // destructor thunk in every job.
  ~SourceDriverCore();

  // A split's output, whatever the record type: its index at the head
  // (-1 when the head does not generate per split).
  struct SplitOutputBase {
    virtual ~SplitOutputBase();
    int index = -1;
  };
  // The output of split `split_id`, made (NewSplitOutput) and registered
  // with the head on first use; and its release.
  SplitOutputBase& SplitFor(const std::string& split_id);
  void DropSplit(const std::string& split_id);
  virtual std::unique_ptr<SplitOutputBase> NewSplitOutput() = 0;
  // Sends the records collected so far down the chain.
  virtual void FlushRun() = 0;

  // What a poll that returned `st` means for the task; counts what it emitted.
  TaskInput::Step AfterPoll(PollStatus st, int64_t emitted_before);
  void ForwardWatermark(Timestamp w);
  void ForwardIdle();
  // The source's own watermark or idleness, of split `split` (-1: of the
  // subtask).  Where the head generates watermarks in the source (from_source,
  // Flink's SourceOutputWithWatermarks), they go into the output its
  // generator (the split's, or the subtask's) writes to; else downstream.
  void SourceWatermark(int split, Timestamp w);
  void SourceIdle(int split);
  bool StopRequested() const {
    return signals_->backpressured || signals_->cancelled->load(std::memory_order_relaxed);
  }

  OutputBase* head_base_;
  SourceContext ctx_;
  std::string name_;
  WriterSignals* signals_;
  SubtaskMetrics* metrics_;
  size_t budget_;
  int64_t emitted_ = 0;
  SplitWatermarkInput* splits_ = nullptr;  // when the head generates per split

 private:
  std::map<std::string, std::unique_ptr<SplitOutputBase>> split_outputs_;
  Timestamp last_watermark_ = kMinTimestamp;
  bool idle_ = false;
};

// Drives a Source<T> into the head of its chain.  At the end of input it
// sends kMaxWatermark through the chain (firing every remaining event-time
// timer downstream), as Flink's sources do.
template <typename T>
class SourceDriver final : public TaskInput, private SourceOutput<T>, private SourceDriverCore {
 public:
  SourceDriver(std::unique_ptr<Source<T>> source, Output<T>* head, SourceContext ctx,
               std::string name, WriterSignals* signals, SubtaskMetrics* metrics, size_t budget,
               OperatorBase* head_op = nullptr, SourceAlignment* alignment = nullptr)
      : SourceDriverCore(head, ctx, std::move(name), signals, metrics, budget, head_op),
        source_(std::move(source)),
        head_(head),
        alignment_(alignment) {}

  void Open() override {
    GuardUserCall(name_, ctx_.subtask_index, ctx_.parallelism, [&] { source_->Open(ctx_); });
  }
  void Close() override { source_->Close(); }

  Step RunStep() override {
    // Watermark alignment: a paused subtask does not read; the coordinator's
    // next announcement wakes the task (its timers keep running and report).
    if (Aligned() && alignment_->ShouldPause()) return Step::kNothing;
    const int64_t before = emitted_;
    // pending_ is empty between polls: it is the run of split -1 (none).
    pending_split_ = -1;
    OpenRun();
    const PollStatus st = GuardUserCall(name_, ctx_.subtask_index, ctx_.parallelism,
                                        [&] { return source_->Poll(*this, budget_); });
    this->run_ = nullptr;
    FlushPending();
    return AfterPoll(st, before);
  }
  bool IsSource() const override { return true; }
  void EndInputNow() override {
    FlushPending();
    ForwardWatermark(kMaxWatermark);
  }
  bool Replayable() const override { return source_->Replayable(); }
  // Between polls: every record polled so far has gone down the chain.
  void SnapshotPosition(StateWriter& w) const override { source_->SnapshotPosition(w); }
  void RestorePosition(StateReader& r) override {
    GuardUserCall(name_, ctx_.subtask_index, ctx_.parallelism,
                  [&] { source_->RestorePosition(r); });
  }
  Timestamp RetryAt() const override {
    return Aligned() && alignment_->paused() ? kMaxTimestamp : source_->RetryAt();
  }
  bool NeedsOwnThread() const override { return source_->NeedsOwnThread(); }
  // Paused by alignment, the task waits for the announcement (Notify), not
  // for input it would not read: a readable descriptor would wake it in a loop.
  int WaitFd() const override { return Aligned() && alignment_->paused() ? -1 : source_->WaitFd(); }

 private:
  // SourceOutput<T>.  Records are handed to the chain in runs of up to
  // kRun (one call each); a watermark or idleness from the source, and the
  // end of each poll, first send the run so far, so the order is kept.
  // Called through SourceOutput<T>, a second base: out of line, so that
  // the this-adjusting thunks jump here instead of repeating the bodies.
  [[gnu::noinline]] void Collect(T&& value) override {
    CollectForSplit(-1, std::move(value), kNoTimestamp);
  }
  [[gnu::noinline]] void CollectWithTimestamp(T&& value, Timestamp ts) override {
    CollectForSplit(-1, std::move(value), ts);
  }
  [[gnu::noinline]] void EmitWatermark(Timestamp w) override { EmitWatermarkOf(-1, w); }
  [[gnu::noinline]] void MarkIdle() override { MarkIdleOf(-1); }
  void EmitWatermarkOf(int split, Timestamp w) {
    FlushPending();
    SourceWatermark(split, w);
    AskAtNextRecord();
  }
  void MarkIdleOf(int split) {
    FlushPending();
    SourceIdle(split);
    AskAtNextRecord();
  }
  [[gnu::noinline]] void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    FlushPending();
    head_->EmitGeneralizedWatermark(w);
    AskAtNextRecord();
  }
  SourceOutput<T>& ForSplit(const std::string& split_id) override {
    return static_cast<SplitOutput&>(SplitFor(split_id));
  }
  void ReleaseSplit(const std::string& split_id) override {
    DropSplit(split_id);
    AskAtNextRecord();
  }
  std::unique_ptr<SplitOutputBase> NewSplitOutput() override {
    return std::unique_ptr<SplitOutputBase>(new SplitOutput(this));
  }
  [[gnu::noinline]] void FlushRun() override { FlushPending(); }

  // Records of split `index` (-1: of none).  A run holds records of one
  // split only, so the head knows whose they are.
  void CollectForSplit(int index, T&& value, Timestamp ts) {
    if (index != pending_split_) {
      FlushPending();
      pending_split_ = index;
      // CollectInPlace appends to pending_ only while it holds no split's
      // records.
      if (index == -1) {
        OpenRun();
      } else {
        this->run_ = nullptr;
      }
    }
    AppendRecord(pending_, std::move(value), ts);
    // Aligned, each record goes down the chain at once, so that the check
    // after it (Backpressured) sees the watermark it made, as Flink checks
    // after each record.
    if (pending_.size() >= kRun || Aligned()) FlushPending();
  }

  // For the split outputs: one copy of CollectForSplit for both of their
  // Collect calls, instead of one inlined into each.
  [[gnu::noinline]] void CollectForSplitOutOfLine(int index, T&& value, Timestamp ts) {
    CollectForSplit(index, std::move(value), ts);
  }

  // CollectInPlace's fast path (SourceOutput<T>::run_): records made
  // straight in pending_, sent on at kRun.  Not while aligned, where each
  // record goes down the chain at once.  A poll that starts stopped (a
  // checkpoint barrier between polls found a full channel) asks at its first
  // record.
  void OpenRun() {
    if (Aligned()) return;
    this->run_ = &pending_;
    this->run_limit_ = StopRequested() ? 1 : kRun;
  }
  // CollectInPlace asks Backpressured() when the run reaches run_limit_:
  // at kRun the run is sent on; at a lower limit (AskAtNextRecord) it stays,
  // and only the question is asked.
  [[gnu::noinline]] void RunFull() override {
    if (pending_.size() >= kRun) FlushPending();
    this->run_limit_ = kRun;
  }
  // After the source's own watermark, idleness or split release went down
  // the chain (and sent the run on before it, which may have found a full
  // channel or a cancellation), the next CollectInPlace asks: a source that
  // emits them more often than every kRun records would otherwise never
  // fill a run, and would go on to the end of its poll's budget.
  void AskAtNextRecord() { this->run_limit_ = 1; }

  void FlushPending() {
    if (pending_.empty()) return;
    emitted_ += static_cast<int64_t>(pending_.size());
    if (splits_ != nullptr) splits_->SetCurrentSplit(pending_split_);
    head_->CollectBatch(std::span<Record<T>>(pending_));
    pending_.clear();
  }

  // A split's output: its records go down marked with its index.
  class SplitOutput final : public SourceOutput<T>, public SplitOutputBase {
   public:
    explicit SplitOutput(SourceDriver* d) : d_(d) {}
    void Collect(T&& value) override { CollectWithTimestamp(std::move(value), kNoTimestamp); }
    void CollectWithTimestamp(T&& value, Timestamp ts) override {
      d_->CollectForSplitOutOfLine(index, std::move(value), ts);
    }
    void EmitWatermark(Timestamp w) override { d_->EmitWatermarkOf(index, w); }
    void MarkIdle() override { d_->MarkIdleOf(index); }
    void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
      d_->EmitGeneralizedWatermark(w);
    }
    bool Backpressured() const override { return d_->Backpressured(); }
    SourceOutput<T>& ForSplit(const std::string& id) override { return d_->ForSplit(id); }
    void ReleaseSplit(const std::string& id) override { d_->ReleaseSplit(id); }

   private:
    SourceDriver* d_;
  };

  // Records per run: small enough that back-pressure (seen when a run
  // reaches a full channel) stops the source within a few hundred records.
  static constexpr size_t kRun = 256;
  // Also true once the job is cancelled, so a source stops emitting at once.
  // And true while watermark alignment pauses the subtask.
  bool Backpressured() const override {
    return StopRequested() || (Aligned() && alignment_->ShouldPause());
  }
  bool Aligned() const { return alignment_ != nullptr && alignment_->joined(); }

  std::unique_ptr<Source<T>> source_;
  Output<T>* head_;
  std::vector<Record<T>> pending_;
  SourceAlignment* alignment_;
  int pending_split_ = -1;  // the split of the records in pending_
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_SOURCE_DRIVER_H_
