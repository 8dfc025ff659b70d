#include "tidemark/api/environment.h"

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tidemark/runtime/exec/executor.h"
#include "tidemark/runtime/exec/job_compiler.h"
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
                std::string first_restore,
                std::function<void(int64_t, const std::string&)> on_restart)
      : build_(std::move(build)),
        on_restart_(std::move(on_restart)),
        strategy_(MakeRestartStrategy(config, SystemClock::Get())),
        checkpointing_(checkpointing),
        first_restore_(std::move(first_restore)) {
    summary_.strategy = config.Describe();
  }
  ~RestartingJob() {
    if (thread_.joinable()) {
      Cancel();
      thread_.join();
    }
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

  JobResult Wait() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return done_; });
    }
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(mu_);
    return result_;
  }

  RestartSummary Summary() const {
    std::lock_guard<std::mutex> lock(mu_);
    return summary_;
  }

 private:
  void Supervise() {
    bool any_completed = false;  // some attempt completed a checkpoint
    for (;;) {
      const std::shared_ptr<JobExecution> exec = current();
      JobResult r = exec->Wait();
      if (r.checkpoints.completed > 0) any_completed = true;
      bool cancelled;
      {
        std::lock_guard<std::mutex> lock(mu_);
        cancelled = cancelled_;
      }
      if (!r.ok() && r.status.code() != absl::StatusCode::kCancelled && !cancelled) {
        {
          std::lock_guard<std::mutex> lock(mu_);
          summary_.last_failure = std::string(r.status.message());
          summary_.failures.push_back(r.status.ToString());
        }
        strategy_->NotifyFailure();
        if (strategy_->CanRestart()) {
          const int64_t backoff = strategy_->BackoffMillis();
          if (on_restart_) on_restart_(summary_.num_restarts + 1, std::string(r.status.message()));
          {
            std::unique_lock<std::mutex> lock(mu_);
            cv_.wait_for(lock, std::chrono::milliseconds(backoff), [this] { return cancelled_; });
            cancelled = cancelled_;
          }
          if (!cancelled) {
            // The latest checkpoint this job completed; none yet: where it
            // started from.
            const std::string restore = checkpointing_ && any_completed ? "latest" : first_restore_;
            absl::StatusOr<std::shared_ptr<JobExecution>> next = build_(restore);
            if (next.ok()) {
              std::unique_lock<std::mutex> lock(mu_);
              if (!cancelled_) {
                current_ = *next;
                ++summary_.num_restarts;
                lock.unlock();
                (*next)->Start();
                continue;
              }
              cancelled = true;
            } else {
              r.status = absl::Status(next.status().code(),
                                      absl::StrCat("restarting after '", r.status.message(),
                                                   "' failed: ", next.status().message()));
            }
          }
          if (cancelled) r.status = absl::CancelledError("job cancelled while restarting");
        } else if (summary_.strategy != "none") {
          r.status = absl::Status(
              r.status.code(),
              absl::StrCat(r.status.message(), " (no restart: restart strategy ", summary_.strategy,
                           ", ", summary_.num_restarts, " restarts)"));
        }
      }
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      std::lock_guard<std::mutex> lock(mu_);
      r.restarts = summary_;
      result_ = std::move(r);
      done_ = true;
      cv_.notify_all();
      return;
    }
  }

  const BuildFn build_;
  const std::function<void(int64_t, const std::string&)> on_restart_;
  const std::unique_ptr<RestartBackoffTimeStrategy> strategy_;
  const bool checkpointing_;
  const std::string first_restore_;
  std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<JobExecution> current_;
  bool cancelled_ = false;
  bool done_ = false;
  RestartSummary summary_;
  JobResult result_;
  std::thread thread_;
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

absl::StatusOr<std::string> JobClient::trigger_savepoint(const std::string& dir, Duration timeout) {
  const std::shared_ptr<JobExecution> e = current();
  if (!e) return absl::FailedPreconditionError("savepoint: no job");
  return e->TriggerSavepoint(dir, timeout);
}

absl::StatusOr<std::string> JobClient::stop_with_savepoint(const std::string& dir, bool drain,
                                                           Duration timeout) {
  const std::shared_ptr<JobExecution> e = current();
  if (!e) return absl::FailedPreconditionError("stop-with-savepoint: no job");
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
  node(input).side_outs[tag] = std::move(producer_side);
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
  // An assigner behind a non-forward edge: said once per job, on stderr
  // (by one rank).
  if (absl::StatusOr<PhysicalPlan> plan = Plan(); plan.ok() && ThisCluster().rank == 0) {
    for (const std::string& w : plan->AssignerWarnings())
      std::cerr << "tidemark: warning: " << w << "\n";
  }
  if (restart_strategy_.kind != RestartStrategyConfiguration::Kind::kNone) {
    if (ThisCluster().distributed()) {
      return JobClient(absl::InvalidArgumentError(absl::StrCat(
          "restart strategy ", restart_strategy_.Describe(),
          ": not supported across MPI ranks (a failed job ends the run; restart it with "
          "--restore=latest)")));
    }
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
    auto restarting =
        std::make_shared<RestartingJob>(std::move(build), restart_strategy_,
                                        config_.checkpointing(), config_.restore_from, on_restart_);
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
