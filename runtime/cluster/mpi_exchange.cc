#include "tidemark/runtime/cluster/mpi_exchange.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/cluster/detail/mpi_wait.h"
#include "tidemark/runtime/cluster/mpi_cluster.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {

// Message tags.
enum Tag : int {
  kData = 1,     // u32 channel, a batch
  kCredit = 2,   // (u32 channel, u32 credits)*
  kFailure = 3,  // u32 status code, message
  kBye = 4,      // nothing more from this rank
  // Checkpoints: rank 0 to a task's rank, (u32 task, u32 subtask, i64 id)
  kTrigger = 5,
  kComplete = 6,
  // A subtask's snapshot, to rank 0 (EncodeSubtaskSnapshot)
  kAck = 7,
  kTaskFinished = 8,
  // Watermark alignment: a group's minimum over the sender's members (bytes
  // group, i64 minimum), to every other rank
  kAlign = 9,
  // Lines for rank 0's standard output, each ended by '\n'
  // (ForwardLineToRank0)
  kLines = 10,
  // Stop-with-savepoint with drain: rank 0 to a source's rank, (u32 task,
  // u32 subtask, i64 0); the source ends its input now
  kEndInput = 11,
  // Stop-with-savepoint without drain: rank 0 to a source's rank, (u32 task,
  // u32 subtask, i64 n): the source reads nothing after checkpoint n's
  // barrier (n = CheckpointParticipant::kNoSuspend: it reads on)
  kSuspend = 12,
  // Rank 0 to every rank, (i64 n, bytes path): savepoint n is complete and
  // every task was told (kComplete, sent before); the job ends OK
  kStop = 13,
};

// How long the ranks wait for each other at the start of a job, and for the
// goodbyes of a failed one.
constexpr auto kStartDeadline = std::chrono::seconds(60);
constexpr auto kFailedGoodbyeDeadline = std::chrono::seconds(10);
// The sleep between two polls of a busy exchange (a message moved within
// kBusyFor), and the longest of an idle one.
constexpr auto kBusyPollSleep = std::chrono::microseconds(20);
constexpr auto kBusyFor = std::chrono::microseconds(5000);
constexpr auto kMaxPollSleep = std::chrono::microseconds(5000);

uint64_t Fingerprint(std::string_view s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (char c : s) {
    h ^= static_cast<uint8_t>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// Waits for `r` with a deadline; false when it passed.
bool WaitFor(MPI_Request* r, std::chrono::steady_clock::duration deadline) {
  return MpiWaitUntil(r, std::chrono::steady_clock::now() + deadline);
}

}  // namespace

struct MpiExchange::Link {
  uint32_t id = 0;
  int peer = 0;
  bool outbound = false;
  ChannelBase* channel = nullptr;
  std::unique_ptr<RemoteCodec> codec;
  int64_t credits = 0;    // outbound: batches the receiver has room for
  int64_t granted = 0;    // inbound: credits given so far
  int64_t delivered = 0;  // inbound: batches pushed onto the channel
};

struct MpiExchange::Pending {
  MPI_Request request = MPI_REQUEST_NULL;
  std::string bytes;
};

struct MpiExchange::Comm {
  MPI_Comm comm = MPI_COMM_NULL;
};

// Stands in for the task at the other end of the remote channels: their
// Notify() wakes the exchange's thread.
class MpiExchange::Waker final : public Task, private Dispatcher {
 public:
  explicit Waker(MpiExchange* x) : Task("MPI exchange"), x_(x) { set_dispatcher(this); }
  Result RunSlice() override { return Result::kWait; }
  // The next Notify() wakes the thread again.
  void Rearm() { state().exchange(kIdle, std::memory_order_acq_rel); }

 private:
  void Dispatch(Task*) override {
    MutexLock lock(&x_->mu_);
    x_->woken_ = true;
    x_->cv_.Signal();
  }
  MpiExchange* x_;
};

// On rank 0: a subtask of another rank, as the coordinator sees it.
class MpiExchange::RemoteTask final : public CheckpointParticipant {
 public:
  RemoteTask(MpiExchange* x, int rank, int task, int subtask, bool source)
      : x_(x), rank_(rank), task_(task), subtask_(subtask), source_(source) {}
  bool is_source() const override { return source_; }
  // Its rank reports at the end whether its input can be replayed.
  bool replayable() const override { return true; }
  void RequestCheckpoint(int64_t id) override { x_->Queue(rank_, kTrigger, Message(id)); }
  void NotifyCheckpointComplete(int64_t id) override { x_->Queue(rank_, kComplete, Message(id)); }
  // Stop-with-savepoint (the coordinator calls them on sources): with
  // drain, and without (the source's rank suspends it after the barrier).
  void EndInputNow() override { x_->Queue(rank_, kEndInput, Message(0)); }
  bool can_stop() const override { return true; }
  void SuspendAfter(int64_t id) override { x_->Queue(rank_, kSuspend, Message(id)); }

 private:
  std::string Message(int64_t id) const {
    std::string b;
    StateWriter w(&b);
    w.PutU32(static_cast<uint32_t>(task_));
    w.PutU32(static_cast<uint32_t>(subtask_));
    w.PutI64(id);
    return b;
  }
  MpiExchange* x_;
  const int rank_, task_, subtask_;
  const bool source_;
};

MpiExchange::MpiExchange(ClusterInfo cluster, size_t capacity)
    : cluster_(cluster),
      capacity_(std::max<size_t>(1, capacity)),
      waker_(std::make_unique<Waker>(this)),
      comm_(std::make_unique<Comm>()) {
  stats_.ranks = cluster.size;
}

MpiExchange::~MpiExchange() {
  if (alignment_ != nullptr) alignment_->SetPublisher(nullptr);
  if (forwarding_lines_) SetLineForwarder(nullptr);
  if (thread_.joinable()) {
    {
      MutexLock lock(&mu_);
      finishing_ = true;
      if (local_status_.ok()) local_status_ = absl::CancelledError("job abandoned");
      woken_ = true;
    }
    cv_.Signal();
    thread_.join();
  }
  if (comm_->comm != MPI_COMM_NULL && !broken_) MPI_Comm_free(&comm_->comm);
}

void MpiExchange::AddOutbound(uint32_t id, int peer, ChannelBase* channel,
                              std::unique_ptr<RemoteCodec> codec) {
  auto l = std::make_unique<Link>();
  l->id = id;
  l->peer = peer;
  l->outbound = true;
  l->channel = channel;
  l->codec = std::move(codec);
  l->credits = static_cast<int64_t>(capacity_);
  channel->set_consumer(waker_.get());
  by_id_[id] = l.get();
  outbound_.push_back(std::move(l));
  ++stats_.remote_channels;
}

void MpiExchange::AddInbound(uint32_t id, int peer, ChannelBase* channel,
                             std::unique_ptr<RemoteCodec> codec) {
  auto l = std::make_unique<Link>();
  l->id = id;
  l->peer = peer;
  l->channel = channel;
  l->codec = std::move(codec);
  l->granted = static_cast<int64_t>(capacity_);
  channel->set_producer(waker_.get());
  channel->set_notify_producer_on_every_pop();
  by_id_[id] = l.get();
  inbound_.push_back(std::move(l));
}

void MpiExchange::AddLocalTask(int task, int subtask, CheckpointParticipant* t) {
  local_tasks_[{task, subtask}] = t;
  if (!t->replayable()) local_at_most_once_ = true;
}

CheckpointParticipant* MpiExchange::AddRemoteTask(int rank, int task, int subtask, bool source) {
  remote_tasks_.push_back(std::make_unique<RemoteTask>(this, rank, task, subtask, source));
  return remote_tasks_.back().get();
}

void MpiExchange::Acknowledge(SubtaskSnapshot s) { Queue(0, kAck, EncodeSubtaskSnapshot(s)); }

void MpiExchange::SubtaskFinished(SubtaskSnapshot final_state) {
  Queue(0, kTaskFinished, EncodeSubtaskSnapshot(final_state));
}

void MpiExchange::Queue(int peer, int tag, std::string bytes) {
  {
    MutexLock lock(&mu_);
    outbox_.emplace_back(peer, tag, std::move(bytes));
    woken_ = true;
  }
  cv_.Signal();
}

void MpiExchange::SetTaskOrder(std::vector<std::string> names) { task_order_ = std::move(names); }

void MpiExchange::SetAlignment(AlignmentCoordinator* alignment) {
  alignment_ = alignment;
  if (alignment_ == nullptr) return;
  alignment_->SetPublisher([this](const std::string& group, Timestamp minimum) {
    std::string b;
    StateWriter w(&b);
    w.PutBytes(group);
    w.PutI64(minimum);
    for (int peer = 0; peer < cluster_.size; ++peer)
      if (peer != cluster_.rank) Queue(peer, kAlign, b);
  });
}

absl::Status MpiExchange::Open(const std::string& plan) {
  EnsureMpiInitialized();
  MPI_Request r;
  MPI_Comm_idup(MPI_COMM_WORLD, &comm_->comm, &r);
  if (!WaitFor(&r, kStartDeadline)) {
    broken_ = true;
    MarkClusterBroken();
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", cluster_.rank, ": not every one of the ", cluster_.size,
                     " ranks started the job within 60 s (every rank must execute the same jobs)"));
  }
  MPI_Comm_set_errhandler(comm_->comm, MPI_ERRORS_RETURN);
  const uint64_t h = Fingerprint(plan);
  uint64_t mine[2] = {h, ~h};
  uint64_t all[2] = {0, 0};
  MPI_Iallreduce(mine, all, 2, MPI_UINT64_T, MPI_MAX, comm_->comm, &r);
  if (!WaitFor(&r, kStartDeadline)) {
    broken_ = true;
    MarkClusterBroken();
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", cluster_.rank, ": the ranks did not agree on the job within 60 s"));
  }
  if (all[0] != mine[0] || all[1] != mine[1]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", cluster_.rank, ": the ", cluster_.size,
        " ranks built different jobs (their plans, placements, restored checkpoints or settings "
        "differ): every rank must build and execute the same jobs in the same order, from the "
        "same checkpoint"));
  }
  // From here on this rank's lines go to rank 0 (queued until the thread
  // runs): the tasks start after this.
  if (cluster_.rank != 0) {
    SetLineForwarder([this](std::string_view line) {
      MutexLock lock(&mu_);
      lines_.append(line);
      lines_.push_back('\n');
      woken_ = true;
      cv_.Signal();
    });
    forwarding_lines_ = true;
  }
  return absl::OkStatus();
}

void MpiExchange::Start(TaskHost* job) {
  job_ = job;
  thread_ = std::thread([this] { Loop(); });
}

void MpiExchange::Post(int peer, int tag, std::string bytes) {
  auto p = std::make_unique<Pending>();
  p->bytes = std::move(bytes);
  MPI_Isend(p->bytes.data(), static_cast<int>(p->bytes.size()), MPI_BYTE, peer, tag, comm_->comm,
            &p->request);
  pending_.push_back(std::move(p));
}

bool MpiExchange::CompleteSends() {
  bool any = false;
  for (size_t i = 0; i < pending_.size();) {
    int done = 0;
    MPI_Test(&pending_[i]->request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      ++i;
      continue;
    }
    any = true;
    std::string b = std::move(pending_[i]->bytes);
    if (free_buffers_.size() < 64) {
      b.clear();
      free_buffers_.push_back(std::move(b));
    }
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
  return any;
}

bool MpiExchange::SendOutbound() {
  bool any = false;
  for (auto& l : outbound_) {
    while (l->credits > 0 && l->channel->SizeApprox() > 0) {
      std::string buf;
      if (!free_buffers_.empty()) {
        buf = std::move(free_buffers_.back());
        free_buffers_.pop_back();
      }
      StateWriter w(&buf);
      w.PutU32(l->id);
      if (!l->codec->PopEncode(l->channel, &buf, &stats_.records_sent)) break;
      --l->credits;
      ++stats_.batches_sent;
      stats_.bytes_sent += static_cast<int64_t>(buf.size());
      stats_.max_in_flight_batches =
          std::max(stats_.max_in_flight_batches, static_cast<int64_t>(capacity_) - l->credits);
      Post(l->peer, kData, std::move(buf));
      any = true;
    }
  }
  return any;
}

bool MpiExchange::GrantCredits() {
  const int64_t cap = static_cast<int64_t>(capacity_);
  const int64_t threshold = std::max<int64_t>(1, cap / 2);
  std::map<int, std::string> grants;  // by peer
  for (auto& l : inbound_) {
    const int64_t queued = static_cast<int64_t>(l->channel->SizeApprox());
    const int64_t free = cap - queued - (l->granted - l->delivered);
    if (free < threshold) continue;
    StateWriter w(&grants[l->peer]);
    w.PutU32(l->id);
    w.PutU32(static_cast<uint32_t>(free));
    l->granted += free;
  }
  for (auto& [peer, bytes] : grants) {
    ++stats_.credit_messages;
    Post(peer, kCredit, std::move(bytes));
  }
  return !grants.empty();
}

void MpiExchange::FailJob(const absl::Status& s) {
  if (remote_failure_.ok() && !reported_failure_) {
    remote_failure_ = s;
    job_->Fail(s);
  }
}

bool MpiExchange::Receive() {
  bool any = false;
  for (int k = 0; k < 256; ++k) {
    int flag = 0;
    MPI_Message msg;
    MPI_Status st;
    MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_->comm, &flag, &msg, &st);
    if (!flag) break;
    int n = 0;
    MPI_Get_count(&st, MPI_BYTE, &n);
    recv_buffer_.resize(static_cast<size_t>(n));
    MPI_Mrecv(recv_buffer_.data(), n, MPI_BYTE, &msg, &st);
    any = true;
    const int from = st.MPI_SOURCE;
    StateReader r(recv_buffer_);
    switch (st.MPI_TAG) {
      case kData: {
        // The job is over (failed, or stopped with a savepoint: what comes
        // now is after its barrier): nobody will read it.
        if (failed() || stopped()) break;
        const uint32_t id = r.GetU32("channel");
        auto it = by_id_.find(id);
        Link* l = it == by_id_.end() ? nullptr : it->second;
        absl::Status decoded;
        if (l == nullptr || l->outbound || l->peer != from) {
          decoded = absl::DataLossError(absl::StrCat("no channel ", id, " from rank ", from));
        } else {
          decoded = l->codec->DecodePush(std::string_view(recv_buffer_).substr(4), l->channel);
          if (decoded.ok()) {
            ++l->delivered;
            break;
          }
        }
        FailJob(absl::DataLossError(absl::StrCat("rank ", cluster_.rank,
                                                 ": a malformed batch from rank ", from,
                                                 " on channel ", id, ": ", decoded.message())));
        break;
      }
      case kCredit:
        while (r.ok() && !r.AtEnd()) {
          const uint32_t id = r.GetU32("channel");
          const uint32_t c = r.GetU32("credits");
          auto it = by_id_.find(id);
          if (r.ok() && it != by_id_.end() && it->second->outbound) it->second->credits += c;
        }
        break;
      case kFailure: {
        const int code = static_cast<int>(r.GetU32("code"));
        FailJob(absl::Status(static_cast<absl::StatusCode>(code),
                             std::string(r.GetRaw(r.remaining(), "message"))));
        break;
      }
      case kBye:
        ++byes_received_;
        break;
      default:
        Deliver(from, st.MPI_TAG, recv_buffer_);
        break;
    }
  }
  return any;
}

// Checkpoint and alignment messages.
void MpiExchange::Deliver(int from, int tag, std::string_view bytes) {
  StateReader r(bytes);
  if (tag == kLines) {
    size_t start = 0;
    while (start < bytes.size()) {
      const size_t end = bytes.find('\n', start);
      if (end == std::string_view::npos) break;
      DeliverForwardedLine(bytes.substr(start, end - start));
      start = end + 1;
    }
    return;
  }
  if (tag == kAlign) {
    const std::string group(r.GetBytes("group"));
    const Timestamp minimum = r.GetI64("minimum");
    if (r.ok() && alignment_ != nullptr) alignment_->RemoteReport(from, group, minimum);
    return;
  }
  if (tag == kStop) {
    const int64_t id = r.GetI64("savepoint");
    std::string path(r.GetBytes("path"));
    if (!r.ok()) return;
    {
      MutexLock lock(&mu_);
      stop_path_ = path;
    }
    // Before the job is told: its cancellation is then no failure to report.
    stopping_.store(true, std::memory_order_release);
    job_->StopAfterSavepoint(id, std::move(path));
    return;
  }
  if (tag == kTrigger || tag == kComplete || tag == kEndInput || tag == kSuspend) {
    const int task = static_cast<int>(r.GetU32("task"));
    const int subtask = static_cast<int>(r.GetU32("subtask"));
    const int64_t id = r.GetI64("checkpoint");
    auto it = local_tasks_.find({task, subtask});
    if (!r.ok() || it == local_tasks_.end()) return;
    if (tag == kTrigger) {
      it->second->RequestCheckpoint(id);
    } else if (tag == kEndInput) {
      it->second->EndInputNow();
    } else if (tag == kSuspend) {
      it->second->SuspendAfter(id);
    } else {
      it->second->NotifyCheckpointComplete(id);
    }
    return;
  }
  if ((tag == kAck || tag == kTaskFinished) && coordinator_ != nullptr) {
    absl::StatusOr<SubtaskSnapshot> snap =
        DecodeSubtaskSnapshot(bytes, absl::StrCat("a snapshot from rank ", from));
    if (!snap.ok()) {
      FailJob(
          absl::DataLossError(absl::StrCat("rank ", cluster_.rank, ": ", snap.status().message())));
    } else if (tag == kAck) {
      coordinator_->Acknowledge(*std::move(snap));
    } else {
      coordinator_->SubtaskFinished(*std::move(snap));
    }
  }
}

bool MpiExchange::failed() const { return !remote_failure_.ok() || reported_failure_; }

bool MpiExchange::stopped() const { return stopping_.load(std::memory_order_acquire); }

void MpiExchange::StopWithSavepoint(int64_t id, const std::string& path) {
  std::string b;
  StateWriter w(&b);
  w.PutI64(id);
  w.PutBytes(path);
  {
    MutexLock lock(&mu_);
    stop_path_ = path;
  }
  stopping_.store(true, std::memory_order_release);
  // After the kComplete messages the coordinator queued (one outbox, in
  // order; MPI keeps the order between two ranks).
  for (int peer = 0; peer < cluster_.size; ++peer)
    if (peer != cluster_.rank) Queue(peer, kStop, b);
}

bool MpiExchange::ReportLocalFailure() {
  if (failed()) return false;
  absl::Status s;
  {
    MutexLock lock(&mu_);
    if (finishing_) s = local_status_;
  }
  if (s.ok() && job_->cancelled()) {
    s = job_->FirstError();
    // Stopped with a savepoint: every rank ends OK.
    if (s.ok() && stopped()) return false;
    if (s.ok()) s = absl::CancelledError("job cancelled");
  }
  if (s.ok()) return false;
  own_failure_ = absl::Status(s.code(), absl::StrCat("rank ", cluster_.rank, ": ", s.message()));
  reported_failure_ = true;
  failed_since_ = std::chrono::steady_clock::now();
  for (int peer = 0; peer < cluster_.size; ++peer) {
    if (peer == cluster_.rank) continue;
    std::string bytes;
    StateWriter w(&bytes);
    w.PutU32(static_cast<uint32_t>(own_failure_.code()));
    w.PutRaw(own_failure_.message().data(), own_failure_.message().size());
    Post(peer, kFailure, std::move(bytes));
  }
  return true;
}

void MpiExchange::Loop() {
  auto last_progress = std::chrono::steady_clock::now();
  for (;;) {
    waker_->Rearm();
    bool finishing;
    std::vector<std::tuple<int, int, std::string>> outbox;
    std::string lines;
    {
      MutexLock lock(&mu_);
      finishing = finishing_;
      outbox.swap(outbox_);
      lines.swap(lines_);
    }
    // Every line taken since the last round, in one message.
    if (!lines.empty()) outbox.emplace_back(0, kLines, std::move(lines));
    const bool was_failed = failed();
    bool progress = !outbox.empty();
    for (auto& [peer, tag, bytes] : outbox) Post(peer, tag, std::move(bytes));
    progress |= Receive();
    progress |= ReportLocalFailure();
    if (!was_failed && failed() && !reported_failure_)
      failed_since_ = std::chrono::steady_clock::now();
    if (!failed() && !stopped()) {
      progress |= SendOutbound();
      progress |= GrantCredits();
    }
    progress |= CompleteSends();
    if (finishing) {
      bool drained = true;
      if (!failed() && !stopped()) {
        for (auto& l : outbound_) drained = drained && l->channel->SizeApprox() == 0;
      }
      {
        // Messages other threads queued go before the goodbye.
        MutexLock lock(&mu_);
        drained = drained && outbox_.empty() && lines_.empty();
      }
      if (drained && pending_.empty() && !byes_sent_) {
        for (int peer = 0; peer < cluster_.size; ++peer)
          if (peer != cluster_.rank) Post(peer, kBye, std::string());
        byes_sent_ = true;
        progress = true;
      }
      if (byes_sent_ && pending_.empty() && byes_received_ == cluster_.size - 1) break;
      if (failed() && std::chrono::steady_clock::now() - failed_since_ > kFailedGoodbyeDeadline) {
        broken_ = true;  // a rank is gone: its goodbye will never come
        MarkClusterBroken();
        break;
      }
    }
    const auto now = std::chrono::steady_clock::now();
    if (progress) {
      last_progress = now;
      continue;
    }
    // Polls every kBusyPollSleep while messages moved within kBusyFor; after
    // that the sleep grows with the time nothing moved (a quarter of it, up
    // to kMaxPollSleep): an idle exchange wakes rarely, and the first message
    // after a pause waits at most a quarter of the pause.
    const auto idle = std::chrono::duration_cast<std::chrono::microseconds>(now - last_progress);
    const auto sleep =
        idle < kBusyFor ? kBusyPollSleep : std::clamp(idle / 4, kBusyPollSleep, kMaxPollSleep);
    const auto deadline = std::chrono::steady_clock::now() + sleep;
    MutexLock lock(&mu_);
    while (!woken_ && !cv_.WaitUntil(&mu_, deadline)) {
    }
    woken_ = false;
  }
}

absl::Status MpiExchange::Finish(const absl::Status& local, const FinishHooks& hooks) {
  // Lines printed from here on are printed here (the tasks are done: only
  // the summary is left); those taken before go before the goodbye.
  if (forwarding_lines_) SetLineForwarder(nullptr);
  forwarding_lines_ = false;
  {
    MutexLock lock(&mu_);
    finishing_ = true;
    local_status_ = local;
    woken_ = true;
  }
  cv_.Signal();
  if (thread_.joinable()) thread_.join();
  absl::Status status;
  if (!remote_failure_.ok() && !reported_failure_) {
    status = remote_failure_;
  } else if (reported_failure_) {
    status = own_failure_;
  }
  if (broken_) {
    *hooks.network = stats_;
    return status.ok() ? absl::UnavailableError(absl::StrCat("rank ", cluster_.rank,
                                                             ": a rank did not finish the job"))
                       : status;
  }
  // Every rank has said goodbye: each knows of every failure, so all take
  // the same branch here.  The final checkpoint, written by rank 0.
  // A job stopped with a savepoint has none (every rank heard of the stop
  // before rank 0's goodbye, so all take the same branch).
  if (hooks.stopped_with_savepoint != nullptr && stopped()) {
    MutexLock lock(&mu_);
    *hooks.stopped_with_savepoint = stop_path_;
  }
  if (hooks.final_checkpoint && status.ok() && !stopped()) {
    int64_t id = cluster_.rank == 0 ? hooks.final_checkpoint() : -1;
    MPI_Bcast(&id, 1, MPI_INT64_T, 0, comm_->comm);
    *hooks.final_checkpoint_id = id;
  }
  // Every rank's metrics (and checkpoint summary), to every rank.
  CheckpointSummary mine_cp;
  if (hooks.checkpoint_summary) mine_cp = hooks.checkpoint_summary();
  mine_cp.at_most_once = mine_cp.at_most_once || local_at_most_once_;
  const std::string mine = EncodeMetrics(*hooks.metrics, stats_, mine_cp);
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(cluster_.size), offsets(cluster_.size);
  MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_->comm);
  int total = 0;
  for (int r = 0; r < cluster_.size; ++r) {
    offsets[r] = total;
    total += sizes[r];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE,
                 comm_->comm);
  std::vector<SubtaskMetricsSnapshot> merged;
  NetworkSummary sum;
  sum.ranks = cluster_.size;
  CheckpointSummary job_cp;
  for (int r = 0; r < cluster_.size; ++r) {
    std::vector<SubtaskMetricsSnapshot> m;
    NetworkSummary s;
    CheckpointSummary c;
    if (absl::Status d =
            DecodeMetrics(std::string_view(all).substr(offsets[r], sizes[r]), &m, &s, &c);
        !d.ok() && status.ok()) {
      status = absl::DataLossError(absl::StrCat("the metrics of rank ", r, ": ", d.message()));
    }
    for (auto& x : m) merged.push_back(std::move(x));
    sum.remote_channels += s.remote_channels;
    sum.batches_sent += s.batches_sent;
    sum.records_sent += s.records_sent;
    sum.bytes_sent += s.bytes_sent;
    sum.credit_messages += s.credit_messages;
    sum.max_in_flight_batches = std::max(sum.max_in_flight_batches, s.max_in_flight_batches);
    if (r == 0) {
      job_cp = c;  // the coordinator's: checkpoints, savepoints, restore
    } else {
      job_cp.at_most_once = job_cp.at_most_once || c.at_most_once;
      // What each rank's operators had to say (a rolled-back part file).
      job_cp.notices.insert(job_cp.notices.end(), c.notices.begin(), c.notices.end());
    }
  }
  // In the plan's order, as a job on one rank lists them.
  auto order = [this](const std::string& name) {
    auto it = std::find(task_order_.begin(), task_order_.end(), name);
    return it - task_order_.begin();
  };
  std::stable_sort(merged.begin(), merged.end(), [&](const auto& a, const auto& b) {
    const auto oa = order(a.task_name), ob = order(b.task_name);
    return oa != ob ? oa < ob : a.subtask < b.subtask;
  });
  *hooks.metrics = std::move(merged);
  *hooks.network = sum;
  if (hooks.checkpoints != nullptr) *hooks.checkpoints = job_cp;
  return status;
}

std::string EncodeMetrics(const std::vector<SubtaskMetricsSnapshot>& m, const NetworkSummary& n,
                          const CheckpointSummary& c) {
  std::string out;
  StateWriter w(&out);
  Encode(w, c.enabled);
  Encode(w, c.completed);
  Encode(w, c.failed);
  Encode(w, c.last_id);
  Encode(w, c.last_duration_ms);
  Encode(w, c.max_duration_ms);
  Encode(w, c.last_size_bytes);
  Encode(w, c.max_size_bytes);
  Encode(w, c.max_alignment_ms);
  Encode(w, c.max_sync_ms);
  Encode(w, c.last_error);
  Encode(w, c.restored_id);
  Encode(w, c.restored_path);
  Encode(w, c.restore_problems);
  Encode(w, c.at_most_once);
  // The rest of the summary: the CLI prints its savepoints and notices.
  Encode(w, c.sizes_bytes);
  Encode(w, c.state_bytes);
  Encode(w, c.last_completed_unix_ms);
  Encode(w, c.last_alignment_ms);
  Encode(w, c.notices);
  Encode(w, c.savepoints);
  Encode(w, c.last_savepoint_error);
  Encode(w, c.stopped_with_savepoint);
  Encode(w, n.remote_channels);
  Encode(w, n.batches_sent);
  Encode(w, n.records_sent);
  Encode(w, n.bytes_sent);
  Encode(w, n.credit_messages);
  Encode(w, n.max_in_flight_batches);
  w.PutVarint(m.size());
  for (const SubtaskMetricsSnapshot& s : m) {
    Encode(w, s.task_name);
    Encode(w, s.subtask);
    Encode(w, s.parallelism);
    Encode(w, s.records_in);
    Encode(w, s.records_out);
    Encode(w, s.input_watermark);
    Encode(w, s.output_watermark);
    Encode(w, s.idle);
    Encode(w, s.finished);
    Encode(w, s.last_checkpoint);
    Encode(w, s.last_alignment_ns);
    Encode(w, s.max_alignment_ns);
    Encode(w, s.channel_watermarks);
    w.PutVarint(s.channel_idle.size());
    for (bool b : s.channel_idle) Encode(w, b);
    Encode(w, s.counters);
    w.PutVarint(s.gauges.size());
    for (const UserGaugeSnapshot& g : s.gauges) {
      Encode(w, g.operator_name);
      Encode(w, g.name);
      Encode(w, g.value);
    }
    w.PutVarint(s.histograms.size());
    for (const UserHistogramSnapshot& h : s.histograms) {
      Encode(w, h.operator_name);
      Encode(w, h.name);
      const HistogramStatistics& t = h.statistics;
      for (int64_t v : {t.count, t.size, t.min, t.max}) Encode(w, v);
      for (double v : {t.mean, t.stddev, t.p50, t.p95, t.p99}) Encode(w, v);
    }
  }
  return out;
}

absl::Status DecodeMetrics(std::string_view bytes, std::vector<SubtaskMetricsSnapshot>* m,
                           NetworkSummary* n, CheckpointSummary* c) {
  StateReader r(bytes);
  c->enabled = Decode<bool>(r);
  c->completed = Decode<int64_t>(r);
  c->failed = Decode<int64_t>(r);
  c->last_id = Decode<int64_t>(r);
  c->last_duration_ms = Decode<double>(r);
  c->max_duration_ms = Decode<double>(r);
  c->last_size_bytes = Decode<int64_t>(r);
  c->max_size_bytes = Decode<int64_t>(r);
  c->max_alignment_ms = Decode<double>(r);
  c->max_sync_ms = Decode<double>(r);
  c->last_error = Decode<std::string>(r);
  c->restored_id = Decode<int64_t>(r);
  c->restored_path = Decode<std::string>(r);
  c->restore_problems = Decode<std::vector<std::string>>(r);
  c->at_most_once = Decode<bool>(r);
  c->sizes_bytes = Decode<std::vector<int64_t>>(r);
  c->state_bytes = Decode<std::vector<int64_t>>(r);
  c->last_completed_unix_ms = Decode<int64_t>(r);
  c->last_alignment_ms = Decode<double>(r);
  c->notices = Decode<std::vector<std::string>>(r);
  c->savepoints = Decode<std::vector<std::string>>(r);
  c->last_savepoint_error = Decode<std::string>(r);
  c->stopped_with_savepoint = Decode<std::string>(r);
  n->remote_channels = Decode<int64_t>(r);
  n->batches_sent = Decode<int64_t>(r);
  n->records_sent = Decode<int64_t>(r);
  n->bytes_sent = Decode<int64_t>(r);
  n->credit_messages = Decode<int64_t>(r);
  n->max_in_flight_batches = Decode<int64_t>(r);
  const uint64_t count = r.GetCount("subtasks");
  for (uint64_t i = 0; i < count && r.ok(); ++i) {
    SubtaskMetricsSnapshot s;
    s.task_name = Decode<std::string>(r);
    s.subtask = Decode<int>(r);
    s.parallelism = Decode<int>(r);
    s.records_in = Decode<int64_t>(r);
    s.records_out = Decode<int64_t>(r);
    s.input_watermark = Decode<Timestamp>(r);
    s.output_watermark = Decode<Timestamp>(r);
    s.idle = Decode<bool>(r);
    s.finished = Decode<bool>(r);
    s.last_checkpoint = Decode<int64_t>(r);
    s.last_alignment_ns = Decode<int64_t>(r);
    s.max_alignment_ns = Decode<int64_t>(r);
    s.channel_watermarks = Decode<std::vector<Timestamp>>(r);
    const uint64_t k = r.GetCount("channels");
    for (uint64_t j = 0; j < k && r.ok(); ++j) s.channel_idle.push_back(Decode<bool>(r));
    s.counters = Decode<std::map<std::string, int64_t>>(r);
    const uint64_t gauges = r.GetCount("gauges");
    for (uint64_t j = 0; j < gauges && r.ok(); ++j) {
      UserGaugeSnapshot g;
      g.operator_name = Decode<std::string>(r);
      g.name = Decode<std::string>(r);
      g.value = Decode<double>(r);
      s.gauges.push_back(std::move(g));
    }
    const uint64_t histograms = r.GetCount("histograms");
    for (uint64_t j = 0; j < histograms && r.ok(); ++j) {
      UserHistogramSnapshot h;
      h.operator_name = Decode<std::string>(r);
      h.name = Decode<std::string>(r);
      HistogramStatistics& t = h.statistics;
      for (int64_t* v : {&t.count, &t.size, &t.min, &t.max}) *v = Decode<int64_t>(r);
      for (double* v : {&t.mean, &t.stddev, &t.p50, &t.p95, &t.p99}) *v = Decode<double>(r);
      s.histograms.push_back(std::move(h));
    }
    m->push_back(std::move(s));
  }
  if (r.ok() && !r.AtEnd()) return absl::DataLossError("bytes after the metrics");
  return r.status();
}

}  // namespace tidemark::internal
