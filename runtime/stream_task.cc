#include "runtime/stream_task.h"

#include "absl/strings/str_cat.h"

namespace tidemark::internal {
namespace {
constexpr int kStepsPerSlice = 32;
}  // namespace

StreamTask::StreamTask(std::string name, TaskHost* host, std::unique_ptr<SubtaskMetrics> metrics,
                       const Clock* clock, const JobConfig* config)
    : Task(std::move(name)),
      host_(host),
      cancel_flag_(host->cancel_flag()),
      metrics_(std::move(metrics)),
      clock_(clock),
      config_(config),
      timers_(clock),
      activity_clock_(clock) {
  signals_.cancelled = cancel_flag_;
}

StreamTask::~StreamTask() = default;

OperatorContext* StreamTask::AddContext(std::unique_ptr<OperatorContext> ctx) {
  ctx->set_input_activity_clock(&activity_clock_);
  ctx->set_cancel_flag(cancel_flag_);
  contexts_.push_back(std::move(ctx));
  return contexts_.back().get();
}

void StreamTask::AddOperator(std::unique_ptr<OperatorBase> op, OperatorContext* ctx) {
  operators_.emplace_back(std::move(op), ctx);
}

Task::Result StreamTask::Wait(Timestamp now_ms) {
  // A timer at T is due at clock T + 1 (ProcessingTimeService).  A source
  // that had nothing and asks to be polled again now (or in the past) is
  // polled in a millisecond, not at once: the task must not spin.
  const Timestamp retry = std::max(input_->RetryAt(), SaturatingAdd(now_ms, 1));
  Timestamp next = std::min(timers_.NextFiringTime(), retry);
  if (next == kMaxTimestamp) {
    wakeup_ = SteadyTime::max();
  } else {
    if (next <= now_ms) return Result::kYield;
    wakeup_ = signals_.now + std::chrono::milliseconds(next - now_ms);
  }
  return Result::kWait;
}

void StreamTask::SetBackpressured(bool blocked) {
  if (blocked == paused_by_backpressure_) return;
  paused_by_backpressure_ = blocked;
  if (blocked) {
    activity_clock_.Pause();
  } else {
    activity_clock_.Resume();
  }
}

bool StreamTask::AnyWriterFull() {
  for (WriterBase* w : writers_)
    if (!w->HasSpace()) return true;
  return false;
}

Task::Result StreamTask::RunSlice() {
  if (cancelled()) {
    CloseAll();
    return Result::kFinished;
  }
  try {
    if (!opened_) {
      opened_ = true;
      // Open from the tail to the head, so an operator's outputs are ready
      // when it opens.
      for (auto it = operators_.rbegin(); it != operators_.rend(); ++it) {
        OperatorBase* op = it->first.get();
        OperatorContext* ctx = it->second;
        GuardUserCall(*ctx, [&] { op->Open(*ctx); });
      }
      input_->Open();
    }
    signals_.now = std::chrono::steady_clock::now();
    // Still blocked on output since the last slice?  Then the timers below see
    // a stopped input activity clock.
    if (paused_by_backpressure_) SetBackpressured(AnyWriterFull());
    const Timestamp now_ms = clock_->NowMillis();
    timers_.set_slice_processing_time(now_ms);
    timers_.FireDue(now_ms);
    bool check_space = true;
    for (int step = 0; step < kStepsPerSlice; ++step) {
      if (cancelled()) break;
      if (check_space || signals_.backpressured) {
        signals_.backpressured = false;
        check_space = false;
        if (AnyWriterFull()) {
          SetBackpressured(true);
          for (WriterBase* x : writers_) x->FlushAll();
          return Wait(now_ms);
        }
        SetBackpressured(false);
      }
      switch (input_->RunStep()) {
        case TaskInput::Step::kMore:
          break;
        case TaskInput::Step::kNothing:
          for (WriterBase* w : writers_) w->FlushAll();
          return Wait(now_ms);
        case TaskInput::Step::kEnd:
          FinishChain();
          for (WriterBase* w : writers_) w->EndOfInput();
          metrics_->finished.store(true, std::memory_order_relaxed);
          CloseAll();
          return Result::kFinished;
      }
    }
    const SteadyTime cutoff = signals_.now - config_->buffer_timeout;
    for (WriterBase* w : writers_) w->FlushOlderThan(cutoff);
    return Result::kYield;
  } catch (const TaskCancelled&) {
    // The job was cancelled in the middle of a chain; nothing to report.
  } catch (const OperatorError& e) {
    host_->Fail(absl::AbortedError(e.what()));
  } catch (...) {
    host_->Fail(absl::AbortedError(
        absl::StrCat("task '", name(), "' (subtask ", metrics_->subtask(), " of ",
                     metrics_->parallelism(), ") failed: ", DescribeCurrentException())));
  }
  CloseAll();
  return Result::kFinished;
}

void StreamTask::FinishChain() {
  for (auto& [op, ctx] : operators_) {
    OperatorBase* o = op.get();
    GuardUserCall(*ctx, [o] { o->Finish(); });
  }
}

void StreamTask::CloseAll() {
  if (closed_) return;
  closed_ = true;
  SetBackpressured(false);
  if (!opened_) return;
  for (auto& [op, ctx] : operators_) {
    try {
      op->Close();
    } catch (...) {
      // The job has already ended or failed; Close() errors add nothing.
    }
  }
  try {
    if (input_) input_->Close();
  } catch (...) {
  }
}

void StreamTask::Release() {
  input_.reset();
  operators_.clear();
  outputs_.clear();
  writers_.clear();
}

}  // namespace tidemark::internal
