#include "runtime/stream_task.h"

#include "absl/strings/str_cat.h"
#include "runtime/executor.h"

namespace tidemark {
namespace {
constexpr int kStepsPerSlice = 32;
}  // namespace

StreamTask::StreamTask(std::string name, JobExecution* job, std::unique_ptr<SubtaskMetrics> metrics,
                       const Clock* clock, const JobConfig* config)
    : Task(std::move(name)),
      job_(job),
      metrics_(std::move(metrics)),
      clock_(clock),
      config_(config),
      timers_(clock) {}

StreamTask::~StreamTask() = default;

OperatorContext* StreamTask::AddContext(std::unique_ptr<OperatorContext> ctx) {
  contexts_.push_back(std::move(ctx));
  return contexts_.back().get();
}

void StreamTask::AddOperator(std::unique_ptr<OperatorBase> op, OperatorContext* ctx) {
  operators_.emplace_back(std::move(op), ctx);
}

Task::Result StreamTask::Wait(Timestamp now_ms) {
  // A source that had nothing and asks to be polled again now (or in the
  // past) is polled in a millisecond, not at once: the task must not spin.
  const Timestamp retry = std::max(input_->RetryAt(), SaturatingAdd(now_ms, 1));
  Timestamp next = std::min(timers_.NextTimerTime(), retry);
  if (next == kMaxTimestamp) {
    wakeup_ = SteadyTime::max();
  } else {
    if (next <= now_ms) return Result::kYield;
    wakeup_ = signals_.now + std::chrono::milliseconds(next - now_ms);
  }
  return Result::kWait;
}

Task::Result StreamTask::RunSlice() {
  if (job_->cancelled()) {
    CloseAll();
    return Result::kFinished;
  }
  try {
    if (!opened_) {
      opened_ = true;
      // Open from the tail to the head, so an operator's outputs are ready
      // when it opens.
      for (auto it = operators_.rbegin(); it != operators_.rend(); ++it) {
        try {
          it->first->Open(*it->second);
        } catch (const OperatorError&) {
          throw;
        } catch (const std::exception& e) {
          throw OperatorError(it->second->operator_name(), it->second->subtask_index(),
                              it->second->parallelism(), e.what());
        }
      }
      input_->Open();
    }
    signals_.now = std::chrono::steady_clock::now();
    const Timestamp now_ms = clock_->NowMillis();
    timers_.set_slice_processing_time(now_ms);
    timers_.FireDue(now_ms);
    bool check_space = true;
    for (int step = 0; step < kStepsPerSlice; ++step) {
      if (check_space || signals_.backpressured) {
        signals_.backpressured = false;
        check_space = false;
        for (WriterBase* w : writers_) {
          if (!w->HasSpace()) {
            for (WriterBase* x : writers_) x->FlushAll();
            return Wait(now_ms);
          }
        }
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
  } catch (const OperatorError& e) {
    job_->Fail(absl::AbortedError(e.what()));
  } catch (const std::exception& e) {
    job_->Fail(
        absl::AbortedError(absl::StrCat("task '", name(), "' (subtask ", metrics_->subtask(),
                                        " of ", metrics_->parallelism(), ") failed: ", e.what())));
  }
  CloseAll();
  return Result::kFinished;
}

void StreamTask::FinishChain() {
  for (auto& [op, ctx] : operators_) {
    try {
      op->Finish();
    } catch (const OperatorError&) {
      throw;
    } catch (const std::exception& e) {
      throw OperatorError(ctx->operator_name(), ctx->subtask_index(), ctx->parallelism(), e.what());
    }
  }
}

void StreamTask::CloseAll() {
  if (closed_) return;
  closed_ = true;
  if (!opened_) return;
  for (auto& [op, ctx] : operators_) {
    try {
      op->Close();
    } catch (...) {
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

}  // namespace tidemark
