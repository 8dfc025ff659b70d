#include "tidemark/runtime/state/checkpoint_coordinator.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {
constexpr uint32_t kSnapshotMagic = 0x544d5353;  // "TMSS"
constexpr uint32_t kSnapshotVersion = 1;
}  // namespace

std::string SubtaskStateFileName(int task_index, int subtask) {
  return absl::StrCat(task_index, "-", subtask, ".state");
}

std::string EncodeSubtaskSnapshot(const SubtaskSnapshot& s) {
  StateWriter w;
  w.PutU32(kSnapshotMagic);
  w.PutU32(kSnapshotVersion);
  w.PutI64(s.checkpoint_id);
  w.PutVarint(static_cast<uint64_t>(s.task_index));
  w.PutBytes(s.task_name);
  w.PutVarint(static_cast<uint64_t>(s.subtask));
  w.PutVarint(static_cast<uint64_t>(s.parallelism));
  w.PutU8(s.finished ? 1 : 0);
  w.PutU8(s.has_source ? 1 : 0);
  w.PutBytes(s.input_state);
  w.PutVarint(s.operators.size());
  for (const OperatorSnapshot& op : s.operators) {
    w.PutBytes(op.name);
    w.PutBytes(op.state);
  }
  return w.Release();
}

absl::StatusOr<SubtaskSnapshot> DecodeSubtaskSnapshot(std::string_view bytes,
                                                      const std::string& file) {
  StateReader r(bytes);
  SubtaskSnapshot s;
  const uint32_t magic = r.GetU32("magic");
  const uint32_t version = r.GetU32("version");
  if (r.ok() && (magic != kSnapshotMagic || version != kSnapshotVersion)) {
    return absl::DataLossError(absl::StrCat(file, ": not a subtask snapshot of this format (magic ",
                                            magic, ", version ", version, ")"));
  }
  s.checkpoint_id = r.GetI64("checkpoint id");
  s.task_index = static_cast<int>(r.GetVarint("task index"));
  s.task_name = std::string(r.GetBytes("task name"));
  s.subtask = static_cast<int>(r.GetVarint("subtask"));
  s.parallelism = static_cast<int>(r.GetVarint("parallelism"));
  s.finished = r.GetU8("finished") != 0;
  s.has_source = r.GetU8("has source") != 0;
  s.input_state = std::string(r.GetBytes("input state"));
  const uint64_t n = r.GetCount("operators");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    OperatorSnapshot op;
    op.name = std::string(r.GetBytes("operator name"));
    op.state = std::string(r.GetBytes("operator state"));
    s.operators.push_back(std::move(op));
  }
  if (!r.ok()) return absl::DataLossError(absl::StrCat(file, ": ", r.error()));
  if (!r.AtEnd()) {
    return absl::DataLossError(absl::StrCat(file, ": ", r.remaining(), " bytes after the end"));
  }
  return s;
}

CheckpointCoordinator::CheckpointCoordinator(Duration interval,
                                             std::unique_ptr<CheckpointStorage> storage,
                                             std::map<std::string, std::string> metadata,
                                             int64_t first_id)
    : interval_(interval),
      storage_(std::move(storage)),
      metadata_(std::move(metadata)),
      next_id_(std::max<int64_t>(1, first_id)) {
  summary_.enabled = true;
}

CheckpointCoordinator::~CheckpointCoordinator() { Stop(); }

void CheckpointCoordinator::SetFailurePolicy(
    int tolerable, Duration timeout, std::function<void(int64_t, const std::string&)> report,
    std::function<void(const absl::Status&)> fail_job) {
  tolerable_failures_ = std::max(0, tolerable);
  timeout_ = timeout;
  report_failure_ = std::move(report);
  fail_job_ = std::move(fail_job);
}

void CheckpointCoordinator::RecordFailure(int64_t id, const std::string& error, bool final) {
  // Storage errors name the checkpoint already.
  const std::string prefix = absl::StrCat("checkpoint ", id, ": ");
  const std::string line = error.rfind(prefix, 0) == 0 ? error : absl::StrCat(prefix, error);
  int64_t in_a_row = 0;
  {
    MutexLock lock(&mu_);
    ++summary_.failed;
    summary_.last_error = line;
    in_a_row = ++failed_in_a_row_;
  }
  cv_.SignalAll();
  if (report_failure_) report_failure_(id, line);
  if (!final && in_a_row > tolerable_failures_ && fail_job_) {
    fail_job_(absl::AbortedError(absl::StrCat(
        line, " (", in_a_row, in_a_row == 1 ? " checkpoint" : " checkpoints",
        " failed in a row; the job tolerates ", tolerable_failures_,
        ": --tolerable-failed-checkpoints / set_tolerable_checkpoint_failure_number)")));
  }
}

void CheckpointCoordinator::AddTask(CheckpointParticipant* task, int task_index, int subtask) {
  tasks_.emplace_back(task, Key{task_index, subtask});
  MutexLock lock(&mu_);
  if (!task->replayable()) summary_.at_most_once = true;
}

void CheckpointCoordinator::Start() {
  thread_ = std::thread([this] { Run(); });
}

void CheckpointCoordinator::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  std::optional<int64_t> abandoned;
  {
    MutexLock lock(&mu_);
    if (pending_) abandoned = pending_->id;
    pending_.reset();
  }
  if (abandoned && storage_) storage_->Abort(*abandoned);
}

int64_t CheckpointCoordinator::TriggerCheckpoint() {
  std::vector<CheckpointParticipant*> sources;
  int64_t id;
  {
    MutexLock lock(&mu_);
    if (stop_ || pending_ || persisting_) return -1;
    for (auto& [task, key] : tasks_)
      if (task->is_source() && !finished_.contains(key)) sources.push_back(task);
    if (sources.empty()) return -1;  // nothing will change any more
    id = NextIdLocked();
    pending_.emplace(Pending{});
    pending_->id = id;
    pending_->started = std::chrono::steady_clock::now();
  }
  // The coordinator's thread may be asleep without a deadline (no periodic
  // trigger): it must learn of the new pending checkpoint's timeout.
  cv_.SignalAll();
  // Outside the lock: a task may acknowledge at once, on another thread.
  for (CheckpointParticipant* t : sources) t->RequestCheckpoint(id);
  return id;
}

int64_t CheckpointCoordinator::NextIdLocked() {
  // A directory of that id with a manifest (a damaged checkpoint passed over,
  // or a stray one) is left alone: the id is skipped.
  while (storage_ && storage_->IsComplete(next_id_)) ++next_id_;
  return next_id_++;
}

bool CheckpointCoordinator::PendingCompleteLocked() const {
  if (!pending_) return false;
  for (const auto& [task, key] : tasks_)
    if (!pending_->acks.contains(key) && !finished_.contains(key)) return false;
  return true;
}

void CheckpointCoordinator::Acknowledge(SubtaskSnapshot s) {
  {
    MutexLock lock(&mu_);
    if (!pending_ || pending_->id != s.checkpoint_id) return;  // abandoned
    const Key key{s.task_index, s.subtask};
    summary_.max_alignment_ms =
        std::max(summary_.max_alignment_ms, static_cast<double>(s.alignment_ns) / 1e6);
    summary_.max_sync_ms = std::max(summary_.max_sync_ms, static_cast<double>(s.sync_ns) / 1e6);
    pending_->acks[key] = std::move(s);
    if (!PendingCompleteLocked()) return;
    pending_ready_ = true;
  }
  cv_.SignalAll();
}

void CheckpointCoordinator::SubtaskFinished(SubtaskSnapshot final_state) {
  {
    MutexLock lock(&mu_);
    const Key key{final_state.task_index, final_state.subtask};
    finished_[key] = std::move(final_state);
    if (!PendingCompleteLocked()) return;
    pending_ready_ = true;
  }
  cv_.SignalAll();
}

void CheckpointCoordinator::Run() {
  using Clock = std::chrono::steady_clock;
  const bool periodic = interval_.count() > 0;
  Clock::time_point next_trigger = Clock::now() + interval_;
  MutexLock lock(&mu_);
  while (!stop_) {
    if (pending_ready_) {
      pending_ready_ = false;
      Pending p = std::move(*pending_);
      // No longer pending (late reports find nothing to complete), but the
      // next checkpoint waits until this one is durable.
      pending_.reset();
      persisting_ = true;
      // The snapshots of finished subtasks stand for them.
      for (const auto& [task, key] : tasks_) {
        if (!p.acks.contains(key)) {
          SubtaskSnapshot s = finished_.at(key);
          s.checkpoint_id = p.id;
          p.acks[key] = std::move(s);
        }
      }
      mu_.Unlock();
      Persist(std::move(p), /*notify_tasks=*/true);
      mu_.Lock();
      continue;
    }
    // Real time is the subject here: a checkpoint every interval.
    if (periodic && !pending_ && !persisting_ && Clock::now() >= next_trigger) {
      mu_.Unlock();
      TriggerCheckpoint();  // -1 (none started) once every source has finished
      mu_.Lock();
      next_trigger = Clock::now() + interval_;
      continue;
    }
    // A pending checkpoint past its timeout expires (Flink's "Checkpoint
    // expired before completing").  Real time is the subject here.
    const bool expires = pending_ && timeout_.count() > 0;
    const Clock::time_point expiry = expires ? pending_->started + timeout_ : Clock::time_point{};
    if (expires && Clock::now() >= expiry) {
      const int64_t id = pending_->id;
      pending_.reset();  // late acknowledgements find nothing
      mu_.Unlock();
      if (storage_) storage_->Abort(id);
      RecordFailure(id,
                    absl::StrCat("expired before completing: not complete within the checkpoint "
                                 "timeout of ",
                                 timeout_.count(), " ms (--checkpoint-timeout)"),
                    /*final=*/false);
      mu_.Lock();
      next_trigger = Clock::now() + interval_;
      continue;
    }
    if (expires) {
      cv_.WaitUntil(&mu_, periodic ? std::min(next_trigger, expiry) : expiry);
    } else if (periodic && !pending_) {
      cv_.WaitUntil(&mu_, next_trigger);
    } else {
      cv_.Wait(&mu_);
    }
  }
}

int64_t CheckpointCoordinator::CompleteFinal() {
  Pending p;
  {
    MutexLock lock(&mu_);
    for (const auto& [task, key] : tasks_)
      if (!finished_.contains(key)) return -1;
    p.id = NextIdLocked();
    p.started = std::chrono::steady_clock::now();
    for (const auto& [task, key] : tasks_) {
      SubtaskSnapshot s = finished_.at(key);
      s.checkpoint_id = p.id;
      p.acks[key] = std::move(s);
    }
  }
  const int64_t id = p.id;
  return Persist(std::move(p), /*notify_tasks=*/false) ? id : -1;
}

bool CheckpointCoordinator::Persist(Pending p, bool notify_tasks) {
  const int64_t id = p.id;
  std::vector<SubtaskSnapshot> snapshots;
  snapshots.reserve(p.acks.size());
  for (auto& [key, s] : p.acks) snapshots.push_back(std::move(s));
  absl::Status status;
  int64_t bytes = 0;
  if (storage_) {
    std::vector<StateFileInfo> files;
    std::map<std::string, std::string> metadata = metadata_;
    metadata["checkpoint"] = absl::StrCat(id);
    for (const SubtaskSnapshot& s : snapshots) {
      const std::string name = SubtaskStateFileName(s.task_index, s.subtask);
      absl::StatusOr<StateFileInfo> f = storage_->WriteState(id, name, EncodeSubtaskSnapshot(s));
      if (!f.ok()) {
        status = f.status();
        break;
      }
      bytes += static_cast<int64_t>(f->size);
      files.push_back(*std::move(f));
    }
    // Written too late: it expires rather than completes (Flink's timeout
    // covers the asynchronous part too).
    if (status.ok() && timeout_.count() > 0 &&
        std::chrono::steady_clock::now() > p.started + timeout_) {
      status = absl::DeadlineExceededError(
          absl::StrCat("expired before completing: its state files were written after the "
                       "checkpoint timeout of ",
                       timeout_.count(), " ms (--checkpoint-timeout)"));
    }
    if (status.ok()) status = storage_->Commit(id, metadata, files);
    if (!status.ok()) storage_->Abort(id);
  } else {
    for (const SubtaskSnapshot& s : snapshots)
      bytes += static_cast<int64_t>(EncodeSubtaskSnapshot(s).size());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p.started)
          .count();
  {
    MutexLock lock(&mu_);
    persisting_ = false;
    if (status.ok()) {
      ++summary_.completed;
      summary_.last_id = id;
      summary_.last_duration_ms = ms;
      summary_.max_duration_ms = std::max(summary_.max_duration_ms, ms);
      summary_.last_size_bytes = bytes;
      summary_.max_size_bytes = std::max(summary_.max_size_bytes, bytes);
      last_completed_ = std::move(snapshots);
      failed_in_a_row_ = 0;
    }
  }
  cv_.SignalAll();
  if (!status.ok()) RecordFailure(id, std::string(status.message()), /*final=*/!notify_tasks);
  if (status.ok() && notify_tasks) {
    for (auto& [task, key] : tasks_) task->NotifyCheckpointComplete(id);
  }
  return status.ok();
}

bool CheckpointCoordinator::AwaitCompleted(int64_t id, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  while (summary_.last_id < id) {
    if (cv_.WaitUntil(&mu_, deadline)) return summary_.last_id >= id;
  }
  return true;
}

CheckpointSummary CheckpointCoordinator::Summary() const {
  MutexLock lock(&mu_);
  return summary_;
}

std::vector<SubtaskSnapshot> CheckpointCoordinator::LastCompleted() const {
  MutexLock lock(&mu_);
  return last_completed_;
}

}  // namespace tidemark::internal
