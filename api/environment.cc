#include "tidemark/api/environment.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tidemark/runtime/exec/executor.h"
#include "tidemark/runtime/exec/job_compiler.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/detail/job_graph.h"

namespace tidemark {
using namespace internal;

namespace internal {

// Runs a job under a restart strategy: a supervisor thread waits for each
// attempt; when one fails and the strategy allows, it waits the backoff and
// builds and starts the next attempt, restored from the latest checkpoint.
class RestartingJob {
 public:
  // Builds an attempt that starts from `restore_from`.
  using BuildFn =
      std::function<absl::StatusOr<std::shared_ptr<JobExecution>>(const std::string& restore_from)>;

  RestartingJob(BuildFn build, const RestartStrategyConfiguration& config, bool checkpointing,
                std::string checkpoint_dir, std::string first_restore,
                std::function<void(int64_t, const std::string&)> on_restart)
      : build_(std::move(build)),
        on_restart_(std::move(on_restart)),
        strategy_(MakeRestartStrategy(config, SystemClock::Get())),
        checkpointing_(checkpointing),
        checkpoint_dir_(std::move(checkpoint_dir)),
        first_restore_(std::move(first_restore)) {
    summary_.strategy = config.Describe();
  }
  // The last JobClient went away: the job is cancelled and its thread
  // joined (see JobClient).
  ~RestartingJob() {
    std::call_once(joined_, [this] {
      if (thread_.joinable()) {
        Cancel();
        thread_.join();
      }
    });
  }

  // `first` is built and not started; this starts it.
  void Start(std::shared_ptr<JobExecution> first) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      current_ = first;
    }
    start_ = std::chrono::steady_clock::now();
    first->Start();
    if (cancelled()) first->Cancel();  // a cancel() that came before current_ was set
    thread_ = std::thread([this] { Supervise(); });
  }

  std::shared_ptr<JobExecution> current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }

  void Cancel() {
    std::shared_ptr<JobExecution> exec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      exec = current_;
    }
    cv_.notify_all();
    if (exec) exec->Cancel();
  }

  bool done() const {
    std::lock_guard<std::mutex> lock(mu_);
    return done_;
  }
  bool cancelled() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }

  // Any thread, any number of times.
  JobResult Wait() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return done_; });
    }
    std::call_once(joined_, [this] {
      if (thread_.joinable()) thread_.join();
    });
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }

  RestartSummary Summary() const {
    std::lock_guard<std::mutex> lock(mu_);
    return summary_;
  }

 private:
  // How long the ranks wait for each other at a decision (past the backoff).
  static constexpr std::chrono::milliseconds kDecisionDeadline{60'000};

  // What each rank tells rank 0 when an attempt ended.
  struct Report {
    bool cancelled = false;  // cancel() was called on this rank
    absl::Status status;     // the attempt's, across ranks as this rank saw it
  };
  static std::string EncodeReport(const Report& r) {
    std::string b;
    StateWriter w(&b);
    Encode(w, r.cancelled);
    Encode(w, static_cast<int32_t>(r.status.code()));
    Encode(w, std::string(r.status.message()));
    return b;
  }
  static Report DecodeReport(std::string_view bytes) {
    StateReader rd(bytes);
    Report r;
    r.cancelled = Decode<bool>(rd);
    const auto code = static_cast<absl::StatusCode>(Decode<int32_t>(rd));
    const std::string message = Decode<std::string>(rd);
    r.status = absl::Status(code, message);
    if (!rd.ok()) r.status = absl::DataLossError("a malformed report from a rank");
    return r;
  }

  // What rank 0 decided; every rank acts on it, so all restart together,
  // from the same checkpoint, and count the same restarts and causes.
  struct Decision {
    enum Action : int32_t { kFinished = 0, kFail = 1, kRestart = 2 };
    int32_t action = kFinished;
    absl::Status status;     // kFail: the job's final status
    bool counted = false;    // a failure the strategy was told of
    std::string cause;       // its message (RestartSummary::last_failure)
    std::string failure;     // its line (RestartSummary::failures)
    int64_t restart = 0;     // kRestart: its number (1, 2, ...)
    int64_t backoff_ms = 0;  // kRestart: the wait before it
    std::string restore;     // kRestart: where the next attempt starts
  };
  static std::string EncodeDecision(const Decision& d) {
    std::string b;
    StateWriter w(&b);
    Encode(w, d.action);
    Encode(w, static_cast<int32_t>(d.status.code()));
    Encode(w, std::string(d.status.message()));
    Encode(w, d.counted);
    Encode(w, d.cause);
    Encode(w, d.failure);
    Encode(w, d.restart);
    Encode(w, d.backoff_ms);
    Encode(w, d.restore);
    return b;
  }
  static absl::StatusOr<Decision> DecodeDecision(std::string_view bytes) {
    StateReader rd(bytes);
    Decision d;
    d.action = Decode<int32_t>(rd);
    const auto code = static_cast<absl::StatusCode>(Decode<int32_t>(rd));
    const std::string message = Decode<std::string>(rd);
    d.status = absl::Status(code, message);
    d.counted = Decode<bool>(rd);
    d.cause = Decode<std::string>(rd);
    d.failure = Decode<std::string>(rd);
    d.restart = Decode<int64_t>(rd);
    d.backoff_ms = Decode<int64_t>(rd);
    d.restore = Decode<std::string>(rd);
    if (!rd.ok()) return absl::DataLossError("a malformed restart decision from rank 0");
    return d;
  }

  // Rank 0 (or the only rank): the attempt ended with `reports` of every
  // rank (its own first).  Only here is the strategy consulted.
  Decision Decide(const std::vector<std::string>& reports) {
    Decision d;
    bool cancelled = false;
    absl::Status failure;  // rank 0's view first: the first failure it heard of
    for (const std::string& bytes : reports) {
      const Report r = DecodeReport(bytes);
      cancelled = cancelled || r.cancelled;
      if (failure.ok() && !r.status.ok()) failure = r.status;
    }
    if (failure.ok()) return d;  // every rank finished
    d.action = Decision::kFail;
    d.status = failure;
    if (failure.code() == absl::StatusCode::kCancelled) return d;
    // Cancelled as the attempt failed: the job ends CANCELLED, as in Flink,
    // not with the failure the cancel raced with.
    if (cancelled) {
      d.status = absl::CancelledError(
          absl::StrCat("job cancelled (as it failed: ", failure.message(), ")"));
      return d;
    }
    d.counted = true;
    d.cause = std::string(failure.message());
    d.failure = failure.ToString();
    strategy_->NotifyFailure();
    if (strategy_->CanRestart()) {
      d.action = Decision::kRestart;
      d.restart = restarts_decided_ + 1;
      d.backoff_ms = strategy_->BackoffMillis();
      // The latest checkpoint this job completed; none yet: where it started
      // from.
      d.restore = checkpointing_ && any_completed_ ? LatestCheckpoint() : first_restore_;
      restarts_decided_ = d.restart;
    } else if (summary_.strategy != "none") {
      d.status = absl::Status(
          failure.code(), absl::StrCat(failure.message(), " (no restart: restart strategy ",
                                       summary_.strategy, ", ", restarts_decided_, " restarts)"));
    }
    return d;
  }

  // "latest" on one rank; across ranks rank 0 names the checkpoint itself
  // (its failed attempt has ended: nothing is written any more), so every
  // rank restores the same one whatever its view of the directory.
  std::string LatestCheckpoint() const {
    if (!ThisCluster().distributed() || checkpoint_dir_.empty()) return "latest";
    std::vector<std::string> problems;
    absl::StatusOr<LoadedCheckpoint> latest =
        CheckpointStorage(checkpoint_dir_).LoadLatest(&problems);
    return latest.ok() ? latest->path.string() : "latest";  // none usable: each rank says so
  }

  void Supervise() {
    // An attempt whose rebuild failed (it never ran): decided on as any
    // failed attempt.
    std::optional<JobResult> unstarted;
    for (;;) {
      JobResult r;
      if (unstarted) {
        r = std::move(*unstarted);
        unstarted.reset();
      } else {
        r = current()->Wait();
      }
      if (r.checkpoints.completed > 0) any_completed_ = true;
      // Every rank's attempt has ended (a failure on one reached the others
      // before their goodbyes, runtime/cluster/mpi_exchange.h): rank 0 hears
      // from each and decides for all.
      Report mine{cancelled(), r.status};
      absl::StatusOr<std::string> answer = DecideAtRank0(
          EncodeReport(mine),
          [this](const std::vector<std::string>& reports) {
            return EncodeDecision(Decide(reports));
          },
          kDecisionDeadline);
      absl::StatusOr<Decision> decided =
          answer.ok() ? DecodeDecision(*answer) : absl::StatusOr<Decision>(answer.status());
      if (!decided.ok()) {
        r.status =
            absl::Status(decided.status().code(),
                         absl::StrCat(r.status.ok() ? "" : absl::StrCat(r.status.message(), "; "),
                                      "deciding on a restart: ", decided.status().message()));
        return Finish(std::move(r));
      }
      const Decision& d = *decided;
      if (d.counted) {
        std::lock_guard<std::mutex> lock(mu_);
        summary_.last_failure = d.cause;
        summary_.failures.push_back(d.failure);
        // Counted when decided, as Flink's numRestarts (ExecutionFailureHandler).
        if (d.action == Decision::kRestart) summary_.num_restarts = d.restart;
      }
      if (d.action == Decision::kFinished) return Finish(std::move(r));
      if (d.action == Decision::kFail) {
        r.status = d.status;
        return Finish(std::move(r));
      }
      if (on_restart_) on_restart_(d.restart, d.cause);
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(d.backoff_ms), [this] { return cancelled_; });
      }
      // A cancel on any rank during the backoff ends the job on all.
      absl::StatusOr<std::string> go = DecideAtRank0(
          EncodeReport(Report{cancelled(), absl::OkStatus()}),
          [](const std::vector<std::string>& reports) {
            bool cancelled = false;
            for (const std::string& b : reports) cancelled = cancelled || DecodeReport(b).cancelled;
            return std::string(cancelled ? "c" : "g");
          },
          kDecisionDeadline + std::chrono::milliseconds(d.backoff_ms));
      if (!go.ok()) {
        r.status = absl::Status(go.status().code(),
                                absl::StrCat(d.cause, "; restarting: ", go.status().message()));
        return Finish(std::move(r));
      }
      if (*go != "g") {
        r.status = absl::CancelledError("job cancelled while restarting");
        return Finish(std::move(r));
      }
      absl::StatusOr<std::shared_ptr<JobExecution>> next = build_(d.restore);
      if (!next.ok()) {
        // As Flink, a failure to deploy the restarted job goes to the
        // strategy too (a checkpoint directory briefly unwritable, ...), as
        // a failure of its own (its cause not nested in the next one's).
        // Across ranks the others' attempts may have started: the job ends.
        if (!ThisCluster().distributed()) {
          r.status = absl::Status(next.status().code(),
                                  absl::StrCat("rebuilding the job for restart ", d.restart,
                                               " failed: ", next.status().message()));
          unstarted = std::move(r);
          continue;
        }
        r.status = absl::Status(
            next.status().code(),
            absl::StrCat("restarting after '", d.cause, "' failed: ", next.status().message()));
        return Finish(std::move(r));
      }
      std::unique_lock<std::mutex> lock(mu_);
      current_ = *next;
      summary_.num_restarts = d.restart;
      const bool cancelled_now = cancelled_;
      lock.unlock();
      (*next)->Start();
      if (cancelled_now) (*next)->Cancel();  // cancelled across ranks through its exchange
    }
  }

  void Finish(JobResult r) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::lock_guard<std::mutex> lock(mu_);
    r.restarts = summary_;
    result_ = std::move(r);
    done_ = true;
    cv_.notify_all();
  }

  const BuildFn build_;
  const std::function<void(int64_t, const std::string&)> on_restart_;
  const std::unique_ptr<RestartBackoffTimeStrategy> strategy_;
  const bool checkpointing_;
  const std::string checkpoint_dir_;
  const std::string first_restore_;
  // The supervisor's own.
  bool any_completed_ = false;    // some attempt completed a checkpoint
  int64_t restarts_decided_ = 0;  // rank 0: restarts the strategy allowed
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<JobExecution> current_;
  bool cancelled_ = false;
  bool done_ = false;
  RestartSummary summary_;
  JobResult result_;
  std::thread thread_;
  std::once_flag joined_;  // thread_ is joined once, by Wait() or the destructor
};

}  // namespace internal

JobClient::JobClient() = default;
JobClient::JobClient(std::shared_ptr<JobExecution> exec) : exec_(std::move(exec)) {}
JobClient::JobClient(absl::Status build_error) : build_error_(std::move(build_error)) {}
JobClient::JobClient(std::shared_ptr<RestartingJob> restarting)
    : restarting_(std::move(restarting)) {}
JobClient::JobClient(const JobClient&) = default;
JobClient::JobClient(JobClient&&) noexcept = default;
JobClient& JobClient::operator=(const JobClient&) = default;
JobClient& JobClient::operator=(JobClient&&) noexcept = default;
JobClient::~JobClient() = default;

std::shared_ptr<JobExecution> JobClient::current() const {
  return restarting_ ? restarting_->current() : exec_;
}

void JobClient::cancel() {
  if (restarting_)
    restarting_->Cancel();
  else if (exec_)
    exec_->Cancel();
}

bool JobClient::done() const {
  if (restarting_) return restarting_->done();
  return !exec_ || exec_->done();
}

std::vector<SubtaskMetricsSnapshot> JobClient::metrics() const {
  const std::shared_ptr<JobExecution> e = current();
  return e ? e->Metrics() : std::vector<SubtaskMetricsSnapshot>{};
}

int64_t JobClient::trigger_checkpoint() {
  const std::shared_ptr<JobExecution> e = current();
  CheckpointCoordinator* c = e ? e->checkpoint_coordinator() : nullptr;
  return c != nullptr ? c->TriggerCheckpoint() : -1;
}

bool JobClient::wait_for_checkpoint(int64_t id, Duration timeout) {
  const std::shared_ptr<JobExecution> e = current();
  CheckpointCoordinator* c = e ? e->checkpoint_coordinator() : nullptr;
  return c != nullptr && c->AwaitCompleted(id, timeout);
}

CheckpointSummary JobClient::checkpoints() const {
  const std::shared_ptr<JobExecution> e = current();
  CheckpointCoordinator* c = e ? e->checkpoint_coordinator() : nullptr;
  return c != nullptr ? c->Summary() : CheckpointSummary{};
}

// Between two attempts (the restart's backoff) no task runs: as Flink
// (NOT_ALL_REQUIRED_TASKS_RUNNING), not "the job has ended".
static bool Restarting(const std::shared_ptr<RestartingJob>& r,
                       const std::shared_ptr<JobExecution>& e) {
  return r && e && e->done() && !r->done();
}

absl::StatusOr<std::string> JobClient::trigger_savepoint(const std::string& dir, Duration timeout) {
  const std::shared_ptr<JobExecution> e = current();
  if (!e) return absl::FailedPreconditionError("savepoint: no job");
  if (Restarting(restarting_, e)) {
    return absl::FailedPreconditionError(
        "savepoint: not all tasks are running (the job is restarting)");
  }
  return e->TriggerSavepoint(dir, timeout);
}

absl::StatusOr<std::string> JobClient::stop_with_savepoint(const std::string& dir, bool drain,
                                                           Duration timeout) {
  const std::shared_ptr<JobExecution> e = current();
  if (!e) return absl::FailedPreconditionError("stop-with-savepoint: no job");
  if (Restarting(restarting_, e)) {
    return absl::FailedPreconditionError(
        "stop-with-savepoint: not all tasks are running (the job is restarting)");
  }
  return e->StopWithSavepoint(dir, drain, timeout);
}

RestartSummary JobClient::restarts() const {
  return restarting_ ? restarting_->Summary() : RestartSummary{};
}

JobResult JobClient::wait() {
  if (restarting_) return restarting_->Wait();
  if (!exec_) {
    JobResult r;
    r.status = build_error_.ok() ? absl::FailedPreconditionError("no job") : build_error_;
    return r;
  }
  return exec_->Wait();
}

StreamExecutionEnvironment::StreamExecutionEnvironment()
    : parallelism_(std::max(1u, std::thread::hardware_concurrency())),
      worker_threads_(std::max(1u, std::thread::hardware_concurrency())),
      clock_(SystemClock::Get()),
      print_stream_(&std::cout) {}

StreamExecutionEnvironment::~StreamExecutionEnvironment() = default;

StreamNode& StreamExecutionEnvironment::node(int id) { return *nodes_.at(static_cast<size_t>(id)); }

int StreamExecutionEnvironment::AddOperatorNode(int input, std::string name,
                                                std::shared_ptr<NodeOps> out,
                                                OperatorFactory factory, bool keyed) {
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kOperator;
  n->name = std::move(name);
  n->out = std::move(out);
  n->inputs.push_back(EdgeSpec{input, ShipStrategy::kDefault, nullptr});
  n->make_operator = std::move(factory);
  n->keyed = keyed;
  return AddNode(std::move(n));
}

int StreamExecutionEnvironment::AddPartitionNode(int input, ShipStrategy s,
                                                 std::shared_ptr<PartitionerFactoryBase> p) {
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kVirtual;
  n->name = ToString(s);
  n->out = node(input).out;
  n->inputs.push_back(EdgeSpec{input, s, std::move(p)});
  return AddNode(std::move(n));
}

int StreamExecutionEnvironment::AddUnionNode(const std::vector<int>& inputs) {
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kVirtual;
  n->name = "Union";
  n->out = node(inputs.at(0)).out;
  for (int in : inputs) n->inputs.push_back(EdgeSpec{in, ShipStrategy::kDefault, nullptr});
  return AddNode(std::move(n));
}

int StreamExecutionEnvironment::AddSideOutputNode(int input, const std::string& tag,
                                                  std::shared_ptr<NodeOps> producer_side,
                                                  std::shared_ptr<NodeOps> out) {
  // As Flink's getSideOutput: one id, one type.
  auto& side_outs = node(input).side_outs;
  if (auto it = side_outs.find(tag);
      it != side_outs.end() && it->second->TypeName() != producer_side->TypeName()) {
    throw std::invalid_argument(absl::StrCat(
        "get_side_output('", tag, "'): a side output with this id was already requested with ",
        "type ", it->second->TypeName(), ", now with ", producer_side->TypeName(),
        "; side output ids must be unique"));
  }
  side_outs[tag] = std::move(producer_side);
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kSideOutput;
  n->name = "Side output " + tag;
  n->out = std::move(out);
  n->side_tag = tag;
  n->inputs.push_back(EdgeSpec{input, ShipStrategy::kDefault, nullptr});
  return AddNode(std::move(n));
}

int StreamExecutionEnvironment::AddSourceNode(std::string name, std::shared_ptr<NodeOps> out,
                                              bool parallel, SourceFactory make) {
  auto n = std::make_unique<StreamNode>();
  n->kind = StreamNode::Kind::kSource;
  n->name = "Source: " + name;
  n->out = std::move(out);
  if (!parallel) {
    n->parallelism = 1;
    n->fixed_parallelism = true;
  }
  n->make_source = std::move(make);
  return AddNode(std::move(n));
}

void StreamExecutionEnvironment::SetNodeName(int id, std::string name) {
  node(id).name = std::move(name);
}

void StreamExecutionEnvironment::SetNodeUid(int id, std::string uid) {
  StreamNode& n = node(id);
  if (uid.empty() || uid.find_first_of(",\n\r") != std::string::npos)
    throw std::invalid_argument("uid: not empty, without ',' or line ends");
  if (n.kind != StreamNode::Kind::kSource && n.kind != StreamNode::Kind::kOperator)
    throw std::invalid_argument("uid: only a source, an operator or a sink has one");
  n.uid = std::move(uid);
}

void StreamExecutionEnvironment::SetNodeParallelism(int id, int p) {
  StreamNode& n = node(id);
  if (p <= 0) throw std::invalid_argument("parallelism must be positive");
  if (n.fixed_parallelism && p != n.parallelism)
    throw std::invalid_argument("the parallelism of '" + n.name + "' is fixed at " +
                                std::to_string(n.parallelism));
  n.parallelism = p;
  // A source and the assigner running in its subtasks (from_source) keep
  // one parallelism.
  for (const auto& [assigner, source] : source_of_assigner_) {
    if (assigner == id) node(source).parallelism = p;
    if (source == id) node(assigner).parallelism = p;
  }
}

void StreamExecutionEnvironment::SetNodeMaxParallelism(int id, int p) {
  if (p <= 0 || p > kUpperBoundMaxParallelism)
    throw std::invalid_argument("max parallelism must be in (0, 32768]");
  node(id).max_parallelism = p;
}

void StreamExecutionEnvironment::FixNodeParallelism(int id, int p) {
  StreamNode& n = node(id);
  n.parallelism = p;
  n.fixed_parallelism = true;
}

StreamNode& StreamAccess::Node(StreamExecutionEnvironment& env, int id) { return env.node(id); }
int StreamAccess::AddNode(StreamExecutionEnvironment& env, std::unique_ptr<StreamNode> n) {
  return env.AddNode(std::move(n));
}
const JobConfig& StreamAccess::Config(const StreamExecutionEnvironment& env) {
  return env.config();
}
absl::StatusOr<PhysicalPlan> StreamAccess::Plan(const StreamExecutionEnvironment& env) {
  return env.Plan();
}
absl::StatusOr<std::shared_ptr<JobExecution>> StreamAccess::Build(StreamExecutionEnvironment& env,
                                                                  const std::string& job_name) {
  return env.Build(job_name);
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_parallelism(int p) {
  if (p <= 0) throw std::invalid_argument("parallelism must be positive");
  parallelism_ = p;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_max_parallelism(int p) {
  if (p <= 0 || p > kUpperBoundMaxParallelism)
    throw std::invalid_argument("max parallelism must be in (0, 32768]");
  max_parallelism_ = p;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_auto_watermark_interval(Duration d) {
  if (d.count() < 0) throw std::invalid_argument("auto watermark interval must not be negative");
  config_.auto_watermark_interval = d;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_buffer_timeout(Duration d) {
  if (d.count() < 0) throw std::invalid_argument("buffer timeout must not be negative");
  config_.buffer_timeout = d;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_batch_size(size_t n) {
  if (n == 0) throw std::invalid_argument("batch size must be positive");
  config_.batch_size = n;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_channel_capacity(size_t n) {
  if (n == 0) throw std::invalid_argument("channel capacity must be positive");
  config_.channel_capacity = n;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_worker_threads(int n) {
  if (n <= 0) throw std::invalid_argument("worker threads must be positive");
  worker_threads_ = n;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_placement(PlacementFunction placement) {
  placement_ = std::move(placement);
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_rank_settings(std::string settings) {
  config_.rank_settings = std::move(settings);
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_clock(const Clock* clock) {
  clock_ = clock;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_watermark_listener(
    std::shared_ptr<WatermarkListener> l) {
  listener_ = std::move(l);
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::enable_checkpointing(Duration interval,
                                                                             std::string dir,
                                                                             int retain) {
  config_.checkpoints_enabled = true;
  config_.checkpoint_interval = interval;
  config_.checkpoint_dir = std::move(dir);
  config_.checkpoints_retained = retain;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::enable_incremental_checkpoints(bool on) {
  config_.incremental_checkpoints = on;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::enable_unaligned_checkpoints(bool on) {
  config_.unaligned_checkpoints = on;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::restore_from(std::string checkpoint) {
  config_.restore_from = std::move(checkpoint);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_allow_non_restored_state(bool allow) {
  config_.allow_non_restored_state = allow;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_tolerable_checkpoint_failure_number(
    int n) {
  if (n < 0) throw std::invalid_argument("tolerable checkpoint failure number must be >= 0");
  config_.tolerable_failed_checkpoints = n;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_state_backend(StateBackend backend) {
  if (backend.is_rocksdb()) backend.rocksdb_options.Validate();
  config_.state_backend = std::move(backend);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_checkpoint_timeout(Duration timeout) {
  if (timeout.count() < 0) throw std::invalid_argument("checkpoint timeout must not be negative");
  config_.checkpoint_timeout = timeout;
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_checkpoint_failure_listener(
    std::function<void(int64_t, const std::string&)> listener) {
  config_.on_checkpoint_failed = std::move(listener);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_restart_strategy(
    RestartStrategyConfiguration strategy) {
  if (absl::Status s = strategy.Validate(); !s.ok())
    throw std::invalid_argument(std::string(s.message()));
  restart_strategy_ = std::move(strategy);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::set_restart_listener(
    std::function<void(int64_t, const std::string&)> listener) {
  on_restart_ = std::move(listener);
  return *this;
}

StreamExecutionEnvironment& StreamExecutionEnvironment::use_tbb_arena_scheduler(bool on) {
  config_.scheduler = on ? JobConfig::Scheduler::kTbbArena : JobConfig::Scheduler::kWorkerPool;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::disable_operator_chaining() {
  chaining_ = false;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_print_stream(std::ostream* out) {
  print_stream_ = out;
  return *this;
}

int StreamExecutionEnvironment::AddNode(std::unique_ptr<StreamNode> n) {
  n->id = static_cast<int>(nodes_.size());
  nodes_.push_back(std::move(n));
  return nodes_.back()->id;
}

namespace sources {
namespace {
std::string SameLine(std::string_view line, const LineLocation&) { return std::string(line); }
}  // namespace

SourceDescriptor<std::string> socket_text(const std::string& host, int port, char delimiter,
                                          int64_t max_retries) {
  if (max_retries < -1)
    throw std::invalid_argument("socket_text_stream: max_retries must be -1 (forever) or more");
  // As Flink's SocketTextStreamFunction checks it (getaddrinfo would take
  // 70000 as 4464).
  if (port <= 0 || port >= 65536) {
    throw std::invalid_argument("socket_text_stream: port " + std::to_string(port) +
                                " is out of range (1-65535)");
  }
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = host;
  spec.port = port;
  spec.delimiter = delimiter;
  spec.max_retries = max_retries;
  SourceDescriptor<std::string> d = lines<std::string>(spec, &SameLine);
  d.name = "Socket Stream";
  return d;
}

SourceDescriptor<std::string> text_file(const std::string& path) {
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSplitFile;
  spec.paths = {path};
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    // A directory: its files, each a split, as Flink's readTextFile reads
    // one (not its subdirectories: nested enumeration is off by default;
    // not the files FilePathFilter's default filter leaves out, names that
    // start with '.' or '_' or hold "_COPYING_").  Listed when the job is
    // built, in name order.
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(path, ec)) {
      const std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.' || name[0] == '_' ||
          name.find("_COPYING_") != std::string::npos)
        continue;
      std::error_code type_ec;
      if (!e.is_regular_file(type_ec)) continue;
      files.push_back(e.path().string());
    }
    if (ec) {
      throw std::invalid_argument(
          absl::StrCat("read_text_file: cannot list the directory ", path, ": ", ec.message()));
    }
    std::sort(files.begin(), files.end());
    spec.kind = LineSource<std::string>::Spec::Kind::kFileSplits;
    spec.paths = std::move(files);
  }
  SourceDescriptor<std::string> d = lines<std::string>(spec, &SameLine);
  d.name = "File " + path;
  return d;
}

SourceDescriptor<std::string> text_files(const std::vector<std::string>& paths) {
  if (paths.empty()) throw std::invalid_argument("read_text_files needs at least one file");
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kFilePerSubtask;
  spec.paths = paths;
  SourceDescriptor<std::string> d = lines<std::string>(spec, &SameLine);
  d.name = "Files";
  return d;
}
}  // namespace sources

DataStream<std::string> StreamExecutionEnvironment::socket_text_stream(const std::string& host,
                                                                       int port, char delimiter,
                                                                       int64_t max_retries) {
  return add_source(sources::socket_text(host, port, delimiter, max_retries));
}

DataStream<std::string> StreamExecutionEnvironment::read_text_file(const std::string& path) {
  return add_source(sources::text_file(path));
}

DataStream<std::string> StreamExecutionEnvironment::read_text_files(
    const std::vector<std::string>& paths) {
  return add_source(sources::text_files(paths));
}

void StreamExecutionEnvironment::MarkAssigner(int assigner, int source) {
  StreamNode& a = node(assigner);
  a.assigns_timestamps = true;
  if (source < 0) return;
  a.in_source_chain = true;
  const StreamNode& src = node(source);
  if (src.fixed_parallelism) {
    // In the source's subtasks: at its parallelism, as fixed as it is.
    a.parallelism = src.parallelism;
    a.fixed_parallelism = true;
  } else {
    a.parallelism = src.parallelism;
    source_of_assigner_[assigner] = source;
  }
}

void StreamExecutionEnvironment::MarkAligned(int assigner, std::string group) {
  StreamNode& a = node(assigner);
  a.aligned = true;
  a.alignment_group = std::move(group);
}

JobCompilerOptions StreamExecutionEnvironment::CompilerOptions() const {
  JobCompilerOptions o;
  o.parallelism = parallelism_;
  o.max_parallelism = max_parallelism_;
  o.chaining = chaining_;
  o.worker_threads = worker_threads_;
  o.config = &config_;
  o.clock = clock_;
  o.listener = listener_.get();
  o.cluster = ThisCluster();
  o.placement = placement_;
  return o;
}

absl::StatusOr<PhysicalPlan> StreamExecutionEnvironment::Plan() const {
  return JobCompiler(nodes_, CompilerOptions()).Plan();
}

absl::StatusOr<std::shared_ptr<JobExecution>> StreamExecutionEnvironment::Build(
    const std::string& job_name) {
  (void)job_name;
  return JobCompiler(nodes_, CompilerOptions()).Compile();
}

absl::StatusOr<std::shared_ptr<JobExecution>> StreamExecutionEnvironment::BuildWith(
    const JobConfig* config) {
  JobCompilerOptions o = CompilerOptions();
  o.config = config;
  return JobCompiler(nodes_, o).Compile();
}

absl::StatusOr<std::string> StreamExecutionEnvironment::ExplainPlan() const {
  absl::StatusOr<PhysicalPlan> plan = Plan();
  if (!plan.ok()) return plan.status();
  std::string text = plan->Explain();
  for (const std::string& w : plan->StateBackendWarnings(config_.state_backend))
    absl::StrAppend(&text, "Warning: ", w, "\n");
  const ClusterInfo cluster = ThisCluster();
  if (cluster.distributed()) {
    // Where every subtask runs (runtime/exec/cluster.h).
    absl::StrAppend(&text, "Placement on ", cluster.size, " ranks:\n");
    for (size_t c = 0; c < plan->chains.size(); ++c) {
      const PlanChain& chain = plan->chains[c];
      std::vector<int> ranks;
      for (int s = 0; s < chain.parallelism; ++s) {
        PlacementRequest r{chain.task_name, static_cast<int>(c), s, chain.parallelism,
                           cluster.size};
        ranks.push_back(placement_ ? placement_(r) : ModuloPlacement(r));
      }
      absl::StrAppend(&text, "  Chain ", c, ": subtasks on ranks ", absl::StrJoin(ranks, ", "),
                      "\n");
    }
  }
  return text;
}

std::string StreamExecutionEnvironment::explain() const {
  absl::StatusOr<std::string> text = ExplainPlan();
  return text.ok() ? *text : absl::StrCat("invalid job: ", text.status().message(), "\n");
}

JobClient StreamExecutionEnvironment::execute_async(const std::string& job_name) {
  {
    internal::MutexLock lock(&mu_);
    if (executed_) {
      return JobClient(absl::FailedPreconditionError(
          "execute: this environment has run its job already; running it again would run every "
          "sink of that job again (Flink clears the job after execute and runs only what was "
          "added since): build the next job on a new StreamExecutionEnvironment"));
    }
    if (nodes_.empty()) {
      return JobClient(absl::FailedPreconditionError(
          "execute: the job has no operators: add a source and what reads it first (Flink: "
          "\"No operators defined in streaming topology. Cannot execute.\")"));
    }
    executed_ = true;
  }
  // An assigner behind a non-forward edge: said once per job, on stderr
  // (by one rank).
  if (absl::StatusOr<PhysicalPlan> plan = Plan(); plan.ok() && ThisCluster().rank == 0) {
    for (const std::string& w : plan->AssignerWarnings())
      std::cerr << "tidemark: warning: " << w << "\n";
    // A window whose contents stay on the heap on RocksDB: once per operator.
    for (const std::string& w : plan->StateBackendWarnings(config_.state_backend))
      std::cerr << "tidemark: warning: " << w << "\n";
  }
  if (restart_strategy_.kind != RestartStrategyConfiguration::Kind::kNone) {
    if (config_.checkpoints_enabled && config_.checkpoint_dir.empty()) {
      return JobClient(absl::InvalidArgumentError(absl::StrCat(
          "restart strategy ", restart_strategy_.Describe(),
          ": needs a checkpoint directory (checkpoints kept in memory do not outlive the failed "
          "attempt)")));
    }
  }
  auto exec = Build(job_name);
  if (exec.ok() && restart_strategy_.kind != RestartStrategyConfiguration::Kind::kNone) {
    auto build = [this](const std::string& restore) {
      auto config = std::make_unique<JobConfig>(config_);
      config->restore_from = restore;
      const JobConfig* raw = config.get();
      {
        internal::MutexLock lock(&mu_);
        attempt_configs_.push_back(std::move(config));
      }
      auto next = BuildWith(raw);
      if (next.ok()) {
        internal::MutexLock lock(&mu_);
        running_ = *next;
      }
      return next;
    };
    auto restarting = std::make_shared<RestartingJob>(
        std::move(build), restart_strategy_, config_.checkpointing(), config_.checkpoint_dir,
        config_.restore_from, on_restart_);
    {
      internal::MutexLock lock(&mu_);
      running_ = *exec;
      running_restarts_ = restarting;
    }
    restarting->Start(*exec);
    return JobClient(restarting);
  }
  if (!exec.ok()) return JobClient(exec.status());
  {
    // Published before it starts, so a cancel() racing with the start is
    // never lost (JobExecution::Cancel() handles a job not yet started).
    internal::MutexLock lock(&mu_);
    running_ = *exec;
  }
  (*exec)->WatchClock(clock_);
  (*exec)->Start();
  return JobClient(*exec);
}

JobResult StreamExecutionEnvironment::execute(const std::string& job_name) {
  return execute_async(job_name).wait();
}

void StreamExecutionEnvironment::cancel() {
  std::shared_ptr<JobExecution> e;
  std::shared_ptr<RestartingJob> r;
  {
    internal::MutexLock lock(&mu_);
    e = running_.lock();
    r = running_restarts_.lock();
  }
  if (r) r->Cancel();
  if (e) e->Cancel();
}

}  // namespace tidemark
