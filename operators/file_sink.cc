#include "tidemark/operators/file_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {

constexpr size_t kWriteChunk = 1 << 16;

[[noreturn]] void Fail(const std::string& what, const std::string& file) {
  throw std::runtime_error(absl::StrCat(what, " ", file, ": ", std::strerror(errno)));
}

void SyncDir(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) Fail("cannot open directory", dir);
  fsync(fd);
  close(fd);
}

void WriteAll(int fd, std::string_view bytes, const std::string& file) {
  while (!bytes.empty()) {
    const ssize_t n = write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail("cannot write", file);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// `dir` as an absolute, normal path (how a snapshot names the directory).
std::string AbsoluteDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(dir, ec);
  if (ec) p = dir;
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

}  // namespace

TwoPhaseCommitFiles::TwoPhaseCommitFiles() = default;

TwoPhaseCommitFiles::~TwoPhaseCommitFiles() {
  if (fd_ >= 0) close(fd_);
}

void TwoPhaseCommitFiles::Open(std::string dir, std::string prefix, int subtask,
                               bool checkpointing) {
  dir_ = std::move(dir);
  prefix_ = std::move(prefix);
  subtask_ = subtask;
  checkpointing_ = checkpointing;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) {
    throw std::runtime_error(
        absl::StrCat("cannot create the output directory ", dir_, ": ", ec.message()));
  }
}

std::string TwoPhaseCommitFiles::Hidden(int subtask, int64_t seq, std::string_view state) const {
  return absl::StrCat(dir_, "/.", prefix_, "-", subtask, "-", seq, ".", std::string(state));
}

std::string TwoPhaseCommitFiles::Visible(int subtask, int64_t seq) const {
  return absl::StrCat(dir_, "/", prefix_, "-", subtask, "-", seq);
}

void TwoPhaseCommitFiles::CleanUp() {
  if (cleaned_) return;
  cleaned_ = true;
  next_seq_ = std::max(next_seq_, CleanUpSubtask(subtask_, pending_));
}

int64_t TwoPhaseCommitFiles::CleanUpSubtask(int subtask, const std::vector<Pending>& keep,
                                            int64_t rollback_from) {
  int64_t next = 0;
  std::vector<std::string> removed;
  const std::string visible = absl::StrCat(prefix_, "-", subtask, "-");
  const std::string hidden = absl::StrCat(".", visible);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(visible, 0) == 0) {
      int64_t seq = 0;
      if (!absl::SimpleAtoi(name.substr(visible.size()), &seq)) continue;
      next = std::max(next, seq + 1);
      if (seq >= rollback_from) {
        // Committed by a checkpoint after the one restored from.
        std::error_code rm;
        std::filesystem::remove(entry.path(), rm);
        if (rm) {
          throw std::runtime_error(
              absl::StrCat("cannot roll back ", entry.path().string(),
                           " (committed after the checkpoint restored from): ", rm.message()));
        }
        removed.push_back(entry.path().string());
      }
      continue;
    }
    if (name.rfind(hidden, 0) != 0) continue;
    // .part-<subtask>-<seq>.<state>: kept only when pending in the state.
    // Any other name is not this sink's (another sink's prefix may extend
    // this one: "part-0" beside "part" writes .part-0-0-<seq>.inprogress).
    const std::string rest = name.substr(hidden.size());
    int64_t seq = -1;
    const size_t dot = rest.find('.');
    if (dot == std::string::npos || !absl::SimpleAtoi(rest.substr(0, dot), &seq) ||
        rest.substr(0, dot).find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string state = rest.substr(dot + 1);
    if (state != "pending" && state != "inprogress") continue;
    const bool kept =
        state == "pending" &&
        std::any_of(keep.begin(), keep.end(), [seq](const Pending& p) { return p.seq == seq; });
    next = std::max(next, seq + 1);
    if (!kept) std::filesystem::remove(entry.path(), ec);
  }
  std::sort(removed.begin(), removed.end());
  rolled_back_.insert(rolled_back_.end(), removed.begin(), removed.end());
  return next;
}

void TwoPhaseCommitFiles::Write(std::string_view line) {
  if (fd_ < 0) {
    CleanUp();
    current_seq_ = next_seq_++;
    const std::string file = Hidden(subtask_, current_seq_, "inprogress");
    fd_ = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) Fail("cannot create", file);
    if (!header_.empty()) {
      buffer_.append(header_);
      buffer_.push_back('\n');
    }
  }
  buffer_.append(line.data(), line.size());
  buffer_.push_back('\n');
  if (buffer_.size() >= kWriteChunk) {
    WriteAll(fd_, buffer_, Hidden(subtask_, current_seq_, "inprogress"));
    buffer_.clear();
  }
}

void TwoPhaseCommitFiles::PreCommit(int64_t id) {
  CleanUp();
  if (fd_ < 0) return;  // nothing written since the last checkpoint
  const std::string from = Hidden(subtask_, current_seq_, "inprogress");
  WriteAll(fd_, buffer_, from);
  buffer_.clear();
  if (fsync(fd_) != 0) Fail("cannot sync", from);
  close(fd_);
  fd_ = -1;
  const std::string to = Hidden(subtask_, current_seq_, "pending");
  if (rename(from.c_str(), to.c_str()) != 0) Fail("cannot rename", from);
  pending_.push_back(Pending{current_seq_, id});
  current_seq_ = -1;
}

void TwoPhaseCommitFiles::CommitOne(int subtask, const Pending& p) {
  const std::string from = Hidden(subtask, p.seq, "pending");
  const std::string to = Visible(subtask, p.seq);
  if (rename(from.c_str(), to.c_str()) != 0) {
    // Committed before (a restore commits what the checkpoint lists, and the
    // run that wrote it may have committed it already).
    if (errno == ENOENT && access(to.c_str(), F_OK) == 0) return;
    Fail("cannot commit", from);
  }
}

void TwoPhaseCommitFiles::Commit(int64_t id) {
  bool any = false;
  std::vector<Pending> left;
  for (const Pending& p : pending_) {
    if (p.checkpoint <= id) {
      CommitOne(subtask_, p);
      any = true;
    } else {
      left.push_back(p);
    }
  }
  pending_ = std::move(left);
  if (any) SyncDir(dir_);
}

void TwoPhaseCommitFiles::Finish() {
  PreCommit(kFinalCheckpoint);
  // Without checkpoints there is no final checkpoint to wait for.
  if (!checkpointing_) CommitFinal();
}

void TwoPhaseCommitFiles::CommitFinal() { Commit(kFinalCheckpoint); }

void TwoPhaseCommitFiles::Snapshot(StateWriter& w) const {
  w.PutI64(next_seq_);
  w.PutVarint(pending_.size());
  for (const Pending& p : pending_) {
    w.PutI64(p.seq);
    w.PutI64(p.checkpoint);
  }
  // The subtask whose files these are (a rescaled restore hands them to
  // another one).
  w.PutVarint(static_cast<uint64_t>(subtask_));
  // And where they are: a job restored to write elsewhere still commits
  // them there (Flink's committables hold their paths).
  w.PutBytes(AbsoluteDir(dir_));
}

void TwoPhaseCommitFiles::Restore(StateReader& r) {
  const int64_t next = r.GetI64("next part");
  const uint64_t n = r.GetCount("pending parts");
  std::vector<Pending> pending;
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    Pending p;
    p.seq = r.GetI64("part");
    p.checkpoint = r.GetI64("part checkpoint");
    pending.push_back(p);
  }
  // States written before the owner was recorded are this subtask's own
  // (they restore only at the same parallelism).
  int owner = subtask_;
  if (r.ok() && !r.AtEnd()) {
    const uint64_t k = r.GetVarint("subtask");
    if (r.ok() && k > static_cast<uint64_t>(INT32_MAX)) r.Fail("subtask out of range");
    owner = static_cast<int>(k);
  }
  // States written before the directory was recorded: this one.
  std::string old_dir = AbsoluteDir(dir_);
  if (r.ok() && !r.AtEnd()) old_dir = std::string(r.GetBytes("directory"));
  if (!r.ok()) return;
  if (old_dir != AbsoluteDir(dir_)) {
    // Restored to write elsewhere: the checkpoint's pending parts are
    // committed where they were written, and what was written there after
    // it is taken back (the replay writes it again, here).  This
    // directory is cleaned up at the first write, as in a fresh run.
    const std::string current = std::exchange(dir_, old_dir);
    try {
      CleanUpSubtask(owner, pending, next);
      for (const Pending& p : pending) CommitOne(owner, p);
      SyncDir(dir_);
    } catch (...) {
      dir_ = current;
      throw;
    }
    dir_ = current;
    return;
  }
  // The checkpoint is complete: what it lists as pending is output; the
  // other hidden files of `owner` are replayed.  So are its committed parts
  // from `next` on: started after the checkpoint's barrier, they were
  // committed by a later checkpoint (restored from an older one because the
  // newer ones are damaged, or named).  Deleting them makes the committed
  // output that of the checkpoint, and the replay writes them again.
  const int64_t seen = CleanUpSubtask(owner, pending, next);
  if (owner == subtask_) {
    next_seq_ = std::max({next_seq_, next, seen});
    cleaned_ = true;
  }
  for (const Pending& p : pending) CommitOne(owner, p);
  SyncDir(dir_);
}

}  // namespace tidemark::internal
