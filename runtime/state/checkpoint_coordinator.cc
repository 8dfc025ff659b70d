#include "tidemark/runtime/state/checkpoint_coordinator.h"

#include <algorithm>
#include <filesystem>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {
constexpr uint32_t kSnapshotMagic = 0x544d5353;  // "TMSS"
constexpr uint32_t kSnapshotVersion = 1;

}  // namespace

std::shared_ptr<SharedFileSink> CheckpointCoordinator::SharedFileSinkFor(int64_t id) {
  if (storage_ == nullptr || !storage_->incremental()) return nullptr;
  MutexLock lock(&mu_);
  if (!pending_ || pending_->id != id || !pending_->savepoint_path.empty()) return nullptr;
  return storage_->SharedFileSinkFor(id);
}

std::string SubtaskStateFileName(int task_index, int subtask) {
  return absl::StrCat(task_index, "-", subtask, ".state");
}

std::vector<std::string_view> EncodeSubtaskSnapshotPieces(const SubtaskSnapshot& s,
                                                          std::deque<std::string>* scratch) {
  std::vector<std::string_view> pieces;
  std::string buf;  // the small parts since the last large one
  StateWriter w(&buf);
  // PutBytes, with bytes past a few KB referred to rather than copied.
  auto put_bytes = [&](const std::string& bytes) {
    if (bytes.size() < 4096) {
      w.PutBytes(bytes);
      return;
    }
    w.PutVarint(bytes.size());
    scratch->push_back(std::move(buf));  // a deque: earlier pieces stay where they are
    buf.clear();
    pieces.emplace_back(scratch->back());
    pieces.emplace_back(bytes);
  };
  w.PutU32(kSnapshotMagic);
  w.PutU32(kSnapshotVersion);
  w.PutI64(s.checkpoint_id);
  w.PutVarint(static_cast<uint64_t>(s.task_index));
  w.PutBytes(s.task_name);
  w.PutVarint(static_cast<uint64_t>(s.subtask));
  w.PutVarint(static_cast<uint64_t>(s.parallelism));
  w.PutU8(s.finished ? 1 : 0);
  w.PutU8(s.has_source ? 1 : 0);
  put_bytes(s.input_state);
  w.PutVarint(s.operators.size());
  for (const OperatorSnapshot& op : s.operators) {
    w.PutBytes(op.name);
    put_bytes(op.state);
  }
  // Unaligned checkpoints: the channel state, only when there is one (so
  // every other file is as before).
  if (!s.channel_state.empty()) put_bytes(s.channel_state);
  if (!buf.empty()) {
    scratch->push_back(std::move(buf));
    pieces.emplace_back(scratch->back());
  }
  return pieces;
}

namespace {
// The large strings of snapshots no longer needed, back to the encoding
// buffers' pool (state_codec.h, TakeEncodeBuffer).
void RecycleSnapshotBuffers(std::vector<SubtaskSnapshot> snapshots) {
  for (SubtaskSnapshot& s : snapshots) {
    RecycleEncodeBuffer(std::move(s.input_state));
    for (OperatorSnapshot& op : s.operators) RecycleEncodeBuffer(std::move(op.state));
    RecycleEncodeBuffer(std::move(s.channel_state));
  }
}
}  // namespace

std::string EncodeSubtaskSnapshot(const SubtaskSnapshot& s) {
  std::deque<std::string> scratch;
  const std::vector<std::string_view> pieces = EncodeSubtaskSnapshotPieces(s, &scratch);
  size_t size = 0;
  for (std::string_view p : pieces) size += p.size();
  std::string out;
  out.reserve(size);
  for (std::string_view p : pieces) out.append(p);
  return out;
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
  if (r.ok() && !r.AtEnd()) s.channel_state = std::string(r.GetBytes("channel state"));
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
  std::string abandoned_savepoint;
  {
    MutexLock lock(&mu_);
    if (pending_) {
      abandoned = pending_->id;
      abandoned_savepoint = pending_->savepoint_path;
    }
    pending_.reset();
  }
  if (!abandoned_savepoint.empty()) {
    CheckpointStorage::ForSavepoint(abandoned_savepoint).Abort(*abandoned);
  } else if (abandoned && storage_) {
    storage_->Abort(*abandoned);
  }
  // A drained stop-with-savepoint whose subtasks finished after the
  // thread's last look: made of their final snapshots, here.
  PersistFinalSavepoint();
  // The encodings' buffers kept for the next checkpoint are not needed now.
  ReleaseEncodeBuffers();
  {
    MutexLock lock(&mu_);
    if (savepoint_ && !savepoint_->done) {
      FinishSavepointLocked(
          absl::FailedPreconditionError("the job ended before the savepoint was complete"));
    }
  }
  cv_.SignalAll();
}

bool CheckpointCoordinator::AllFinishedLocked() const {
  for (const auto& [task, key] : tasks_)
    if (!finished_.contains(key)) return false;
  return true;
}

void CheckpointCoordinator::FinishSavepointLocked(absl::Status status) {
  if (!savepoint_ || savepoint_->done) return;
  savepoint_->done = true;
  savepoint_->status = std::move(status);
  if (savepoint_->status.ok()) {
    summary_.savepoints.push_back(savepoint_->path);
  } else {
    summary_.last_savepoint_error = std::string(savepoint_->status.message());
  }
}

void CheckpointCoordinator::PersistFinalSavepoint() {
  Pending p;
  {
    MutexLock lock(&mu_);
    if (!savepoint_ || savepoint_->mode != SavepointMode::kStopAndDrain || savepoint_->started ||
        savepoint_->done || pending_ || persisting_ || !AllFinishedLocked()) {
      return;
    }
    savepoint_->started = true;
    persisting_ = true;
    p.id = NextIdLocked();
    savepoint_->id = p.id;
    savepoint_->path = (std::filesystem::path(savepoint_->target_dir) /
                        absl::StrCat("savepoint-", p.id, "-", savepoint_->suffix))
                           .string();
    p.savepoint_path = savepoint_->path;
    p.started = std::chrono::steady_clock::now();
    persisting_id_ = p.id;
    persisting_started_ = p.started;
    for (const auto& [task, key] : tasks_) {
      SubtaskSnapshot s = finished_.at(key);
      s.checkpoint_id = p.id;
      p.acks[key] = std::move(s);
    }
  }
  Persist(std::move(p), /*notify_tasks=*/false);
}

absl::StatusOr<CheckpointCoordinator::Savepoint> CheckpointCoordinator::TakeSavepoint(
    const std::string& dir, SavepointMode mode, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (dir.empty()) return absl::InvalidArgumentError("savepoint: no target directory given");
  std::vector<CheckpointParticipant*> sources;
  int64_t id = -1;
  {
    MutexLock lock(&mu_);
    if (!ending_.ok()) {
      // Flink: CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING.
      return absl::FailedPreconditionError(
          absl::StrCat("savepoint: not all tasks are running (", ending_.message(), ")"));
    }
    if (savepoint_) return absl::FailedPreconditionError("savepoint: one is being taken already");
    if (stopping_) return absl::FailedPreconditionError("savepoint: the job is being stopped");
    // Draining ends the sources' input, stopping without drain suspends them
    // after the savepoint's barrier: both relayed to other ranks by their
    // stand-ins (mpi_exchange.h).
    if (mode == SavepointMode::kStop) {
      for (auto& [task, key] : tasks_) {
        if (!task->can_stop()) {
          return absl::UnimplementedError(absl::StrCat(
              "stop-with-savepoint: subtask ", key.second, " of task ", key.first,
              " cannot be stopped without drain (stop it with drain, or take a savepoint and "
              "cancel the job)"));
        }
      }
    }
    // One checkpoint at a time: a checkpoint in progress completes first.
    while (!stop_ && (pending_ || persisting_)) {
      if (cv_.WaitUntil(&mu_, deadline)) {
        return absl::DeadlineExceededError(
            "savepoint: the checkpoint in progress did not complete within the timeout");
      }
    }
    if (stop_) return absl::FailedPreconditionError("savepoint: the job has ended");
    for (auto& [task, key] : tasks_)
      if (task->is_source() && !finished_.contains(key)) sources.push_back(task);
    if (sources.empty() && mode != SavepointMode::kStopAndDrain) {
      return absl::FailedPreconditionError(
          "savepoint: every source has finished: the job is ending (its final checkpoint holds "
          "its state)");
    }
    savepoint_ = SavepointRequest{};
    savepoint_->mode = mode;
    std::random_device rd;
    const std::string suffix = absl::StrFormat("%06x", rd() & 0xffffffu);
    savepoint_->target_dir = dir;
    savepoint_->suffix = suffix;
    if (mode == SavepointMode::kStopAndDrain) {
      // Named once its id is known (PersistFinalSavepoint).
      stopping_ = true;
    } else {
      id = NextIdLocked();
      savepoint_->id = id;
      savepoint_->path =
          (std::filesystem::path(dir) / absl::StrCat("savepoint-", id, "-", suffix)).string();
      pending_.emplace(Pending{});
      pending_->id = id;
      pending_->started = std::chrono::steady_clock::now();
      pending_->savepoint_path = savepoint_->path;
      if (mode == SavepointMode::kStop) stopping_ = true;
    }
  }
  cv_.SignalAll();
  // Outside the lock: a task may acknowledge at once, on another thread.
  if (mode == SavepointMode::kStopAndDrain) {
    for (CheckpointParticipant* t : sources) t->EndInputNow();
    PersistFinalSavepoint();  // every source had finished already
  } else {
    if (mode == SavepointMode::kStop)
      for (CheckpointParticipant* t : sources) t->SuspendAfter(id);
    for (CheckpointParticipant* t : sources) t->RequestSavepoint(id);
  }
  MutexLock lock(&mu_);
  bool timed_out = false;
  while (!savepoint_->done) {
    if (timed_out) {
      cv_.Wait(&mu_);  // being written: the disk decides
      continue;
    }
    if (!cv_.WaitUntil(&mu_, deadline)) continue;
    timed_out = true;
    if (savepoint_->done) break;
    if (pending_ && pending_->id == savepoint_->id && !savepoint_->path.empty()) {
      // Abandoned: late acknowledgements find nothing.
      pending_.reset();
      const std::string path = savepoint_->path;
      mu_.Unlock();
      CheckpointStorage::ForSavepoint(path).Abort(id);
      mu_.Lock();
      FinishSavepointLocked(absl::DeadlineExceededError(
          absl::StrCat("savepoint ", id, ": not complete within the timeout")));
    } else if (mode == SavepointMode::kStopAndDrain && !savepoint_->started) {
      FinishSavepointLocked(absl::DeadlineExceededError(
          "savepoint: the job did not finish draining within the timeout"));
    }
    // Otherwise it is being written: wait for the disk.
  }
  SavepointRequest r = std::move(*savepoint_);
  savepoint_.reset();
  if (!r.status.ok() && mode == SavepointMode::kStop) {
    // The job goes on (Flink: a failed stop-with-savepoint leaves it running).
    stopping_ = false;
    mu_.Unlock();
    for (CheckpointParticipant* t : sources) t->SuspendAfter(CheckpointParticipant::kNoSuspend);
    mu_.Lock();
  }
  if (!r.status.ok()) return r.status;
  return Savepoint{r.id, r.path};
}

void CheckpointCoordinator::AbortSavepoint(const absl::Status& why) {
  std::string abandoned;
  int64_t id = -1;
  {
    MutexLock lock(&mu_);
    if (ending_.ok()) ending_ = why.ok() ? absl::CancelledError("the job is ending") : why;
    if (!savepoint_ || savepoint_->done || savepoint_->started) return;
    if (persisting_ && persisting_id_ == savepoint_->id) return;  // the disk decides
    if (pending_ && pending_->id == savepoint_->id && !pending_->savepoint_path.empty()) {
      abandoned = pending_->savepoint_path;
      id = pending_->id;
      pending_.reset();  // late acknowledgements find nothing
    }
    FinishSavepointLocked(why);
  }
  cv_.SignalAll();
  if (!abandoned.empty()) CheckpointStorage::ForSavepoint(abandoned).Abort(id);
}

int64_t CheckpointCoordinator::TriggerCheckpoint() {
  std::vector<CheckpointParticipant*> sources;
  int64_t id;
  {
    MutexLock lock(&mu_);
    if (stop_ || stopping_ || pending_ || persisting_) return -1;
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
  // Declined: never complete (the decliner's final snapshot, taken after the
  // barrier, must not stand for the snapshot it could not finish).
  if (declined_ && declined_->first == pending_->id) return false;
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

bool CheckpointCoordinator::Decline(int64_t id, const std::string& error) {
  {
    MutexLock lock(&mu_);
    if (!pending_ || pending_->id != id) return true;      // abandoned already
    if (declined_ && declined_->first == id) return true;  // declined already
    declined_.emplace(id, error);  // (replaces one left from an earlier checkpoint)
    pending_ready_ = false;
  }
  cv_.SignalAll();
  return true;
}

void CheckpointCoordinator::SubtaskFinished(SubtaskSnapshot final_state) {
  {
    MutexLock lock(&mu_);
    const Key key{final_state.task_index, final_state.subtask};
    finished_[key] = std::move(final_state);
    // A drained stop-with-savepoint waits for the last one (Run).
    if (savepoint_ && savepoint_->mode == SavepointMode::kStopAndDrain && AllFinishedLocked()) {
      cv_.SignalAll();
    }
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
    // A subtask declined the pending checkpoint: it fails (a savepoint
    // fails alone), as one that expires.
    if (declined_) {
      const auto [id, error] = std::move(*declined_);
      declined_.reset();
      if (!pending_ || pending_->id != id) continue;
      const std::string savepoint_path = pending_->savepoint_path;
      pending_.reset();  // late acknowledgements find nothing
      if (!savepoint_path.empty()) {
        FinishSavepointLocked(absl::AbortedError(absl::StrCat("savepoint ", id, ": ", error)));
        mu_.Unlock();
        CheckpointStorage::ForSavepoint(savepoint_path).Abort(id);
      } else {
        mu_.Unlock();
        if (storage_) storage_->Abort(id);
        RecordFailure(id, error, /*final=*/false);
      }
      cv_.SignalAll();
      mu_.Lock();
      next_trigger = Clock::now() + interval_;
      continue;
    }
    if (pending_ready_) {
      pending_ready_ = false;
      Pending p = std::move(*pending_);
      // No longer pending (late reports find nothing to complete), but the
      // next checkpoint waits until this one is durable.
      pending_.reset();
      persisting_ = true;
      persisting_id_ = p.id;
      persisting_started_ = p.started;
      // The snapshots of finished subtasks stand for them.
      for (const auto& [task, key] : tasks_) {
        if (!p.acks.contains(key)) {
          SubtaskSnapshot s = finished_.at(key);
          s.checkpoint_id = p.id;
          p.acks[key] = std::move(s);
        }
      }
      // A savepoint tells the tasks only when the job stops with it (Flink's
      // synchronous savepoint); otherwise the next checkpoint commits.
      const bool notify =
          p.savepoint_path.empty() || (savepoint_ && savepoint_->mode == SavepointMode::kStop);
      mu_.Unlock();
      Persist(std::move(p), notify);
      mu_.Lock();
      continue;
    }
    if (savepoint_ && savepoint_->mode == SavepointMode::kStopAndDrain && !savepoint_->started &&
        !persisting_ && !pending_ && AllFinishedLocked()) {
      mu_.Unlock();
      PersistFinalSavepoint();
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
      const std::string savepoint_path = pending_->savepoint_path;
      pending_.reset();  // late acknowledgements find nothing
      if (!savepoint_path.empty()) {
        // A savepoint that expires fails alone: the job goes on.
        FinishSavepointLocked(absl::DeadlineExceededError(
            absl::StrCat("savepoint ", id,
                         ": expired before completing: not complete within the checkpoint "
                         "timeout of ",
                         timeout_.count(), " ms (--checkpoint-timeout)")));
        mu_.Unlock();
        CheckpointStorage::ForSavepoint(savepoint_path).Abort(id);
        cv_.SignalAll();
        mu_.Lock();
        next_trigger = Clock::now() + interval_;
        continue;
      }
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
    // The last use of the final snapshots (every task has finished and the
    // coordinator has stopped; a savepoint is refused once every source has
    // finished): moved, not copied.  A job's final state can be most of its
    // memory (Nexmark's q19 keeps 300 MB of top-10 lists), and a copy of it
    // doubled the process's footprint at its very end.
    for (const auto& [task, key] : tasks_) {
      SubtaskSnapshot& s = finished_.at(key);
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
  double alignment_ms = 0;  // the longest of its subtasks'
  for (auto& [key, s] : p.acks) {
    alignment_ms = std::max(alignment_ms, static_cast<double>(s.alignment_ns) / 1e6);
    snapshots.push_back(std::move(s));
  }
  absl::Status status;
  int64_t bytes = 0;
  int64_t state_bytes = 0;
  if (!p.savepoint_path.empty()) {
    // A savepoint: the same files and manifest, in a directory of its own.
    const CheckpointStorage target = CheckpointStorage::ForSavepoint(p.savepoint_path);
    std::vector<StateFileInfo> files;
    std::map<std::string, std::string> metadata = metadata_;
    metadata["checkpoint"] = absl::StrCat(id);
    metadata["type"] = "savepoint";
    std::error_code ec;
    if (std::filesystem::exists(p.savepoint_path, ec)) {
      status = absl::AlreadyExistsError(
          absl::StrCat("savepoint ", id, ": ", p.savepoint_path, " exists already"));
    }
    for (const SubtaskSnapshot& s : snapshots) {
      if (!status.ok()) break;
      std::deque<std::string> scratch;
      absl::StatusOr<StateFileInfo> f =
          target.WriteState(id, SubtaskStateFileName(s.task_index, s.subtask),
                            EncodeSubtaskSnapshotPieces(s, &scratch));
      if (!f.ok()) {
        status = f.status();
        break;
      }
      files.push_back(*std::move(f));
    }
    if (status.ok()) status = target.Commit(id, metadata, files);
    if (!status.ok() && !absl::IsAlreadyExists(status)) target.Abort(id);
    if (!status.ok()) {
      status = absl::Status(status.code(),
                            absl::StrCat("savepoint ", p.savepoint_path, ": ", status.message()));
    }
    {
      MutexLock lock(&mu_);
      persisting_ = false;
      if (savepoint_ && savepoint_->path == p.savepoint_path) {
        savepoint_->id = id;
        FinishSavepointLocked(status);
      }
    }
    cv_.SignalAll();
    RecycleSnapshotBuffers(std::move(snapshots));
    if (status.ok() && notify_tasks) {
      for (auto& [task, key] : tasks_) task->NotifyCheckpointComplete(id);
    }
    return status.ok();
  }
  if (storage_) {
    std::vector<StateFileInfo> files;
    std::map<std::string, std::string> metadata = metadata_;
    metadata["checkpoint"] = absl::StrCat(id);
    for (const SubtaskSnapshot& s : snapshots) {
      const std::string name = SubtaskStateFileName(s.task_index, s.subtask);
      std::vector<SharedChunkRef> referred;
      for (const auto& [file, size] : s.shared_files) {
        SharedChunkRef r;
        r.file = file;
        r.size = size;
        referred.push_back(std::move(r));
        state_bytes += static_cast<int64_t>(size);
      }
      // Written from the snapshot's own strings, not from one copy of them
      // all (the same bytes).
      std::deque<std::string> scratch;
      absl::StatusOr<StateFileInfo> f =
          storage_->WriteState(id, name, EncodeSubtaskSnapshotPieces(s, &scratch), referred);
      if (!f.ok()) {
        status = f.status();
        break;
      }
      bytes += static_cast<int64_t>(f->size + f->shared_bytes + s.shared_uploaded_bytes);
      state_bytes += static_cast<int64_t>(f->full_size);
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
    for (const SubtaskSnapshot& s : snapshots) {
      std::deque<std::string> scratch;
      for (std::string_view piece : EncodeSubtaskSnapshotPieces(s, &scratch))
        bytes += static_cast<int64_t>(piece.size());
    }
    state_bytes = bytes;
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
      summary_.sizes_bytes.push_back(bytes);
      summary_.state_bytes.push_back(state_bytes);
      summary_.last_completed_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count();
      summary_.last_alignment_ms = alignment_ms;
      std::swap(last_completed_, snapshots);  // the dropped ones are recycled below
      failed_in_a_row_ = 0;
    }
  }
  cv_.SignalAll();
  RecycleSnapshotBuffers(std::move(snapshots));
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
  CheckpointSummary s = summary_;
  const auto now = std::chrono::steady_clock::now();
  if (pending_ || persisting_) {
    s.in_progress_id = pending_ ? pending_->id : persisting_id_;
    s.in_progress_ms = std::chrono::duration<double, std::milli>(
                           now - (pending_ ? pending_->started : persisting_started_))
                           .count();
  }
  return s;
}

std::vector<SubtaskSnapshot> CheckpointCoordinator::LastCompleted() const {
  MutexLock lock(&mu_);
  return last_completed_;
}

}  // namespace tidemark::internal
