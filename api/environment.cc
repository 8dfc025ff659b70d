#include "api/environment.h"

#include <iostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/executor.h"
#include "runtime/job_compiler.h"
#include "runtime/job_graph.h"

namespace tidemark {
using namespace internal;

JobClient::JobClient() = default;
JobClient::JobClient(std::shared_ptr<JobExecution> exec) : exec_(std::move(exec)) {}
JobClient::JobClient(absl::Status build_error) : build_error_(std::move(build_error)) {}
JobClient::JobClient(const JobClient&) = default;
JobClient::JobClient(JobClient&&) noexcept = default;
JobClient& JobClient::operator=(const JobClient&) = default;
JobClient& JobClient::operator=(JobClient&&) noexcept = default;
JobClient::~JobClient() = default;

void JobClient::cancel() {
  if (exec_) exec_->Cancel();
}

bool JobClient::done() const { return !exec_ || exec_->done(); }

std::vector<SubtaskMetricsSnapshot> JobClient::metrics() const {
  return exec_ ? exec_->Metrics() : std::vector<SubtaskMetricsSnapshot>{};
}

int64_t JobClient::trigger_checkpoint() {
  CheckpointCoordinator* c = exec_ ? exec_->checkpoint_coordinator() : nullptr;
  return c != nullptr ? c->TriggerCheckpoint() : -1;
}

bool JobClient::wait_for_checkpoint(int64_t id, Duration timeout) {
  CheckpointCoordinator* c = exec_ ? exec_->checkpoint_coordinator() : nullptr;
  return c != nullptr && c->AwaitCompleted(id, timeout);
}

CheckpointSummary JobClient::checkpoints() const {
  CheckpointCoordinator* c = exec_ ? exec_->checkpoint_coordinator() : nullptr;
  return c != nullptr ? c->Summary() : CheckpointSummary{};
}

JobResult JobClient::wait() {
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

DataStream<std::string> StreamExecutionEnvironment::socket_text_stream(const std::string& host,
                                                                       int port, char delimiter,
                                                                       int64_t max_retries) {
  if (max_retries < -1)
    throw std::invalid_argument("socket_text_stream: max_retries must be -1 (forever) or more");
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = host;
  spec.port = port;
  spec.delimiter = delimiter;
  spec.max_retries = max_retries;
  return read_lines<std::string>(
      spec, [](std::string_view line, const LineLocation&) { return std::string(line); },
      "Socket Stream");
}

DataStream<std::string> StreamExecutionEnvironment::read_text_file(const std::string& path) {
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSplitFile;
  spec.paths = {path};
  return read_lines<std::string>(
      spec, [](std::string_view line, const LineLocation&) { return std::string(line); },
      "File " + path);
}

DataStream<std::string> StreamExecutionEnvironment::read_text_files(
    const std::vector<std::string>& paths) {
  if (paths.empty()) throw std::invalid_argument("read_text_files needs at least one file");
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kFilePerSubtask;
  spec.paths = paths;
  return read_lines<std::string>(
      spec, [](std::string_view line, const LineLocation&) { return std::string(line); }, "Files");
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

absl::StatusOr<std::string> StreamExecutionEnvironment::ExplainPlan() const {
  absl::StatusOr<PhysicalPlan> plan = Plan();
  if (!plan.ok()) return plan.status();
  std::string text = plan->Explain();
  const ClusterInfo cluster = ThisCluster();
  if (cluster.distributed()) {
    // Where every subtask runs (runtime/cluster.h).
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
  auto exec = Build(job_name);
  if (!exec.ok()) return JobClient(exec.status());
  {
    // Published before it starts, so a cancel() racing with the start is
    // never lost (JobExecution::Cancel() handles a job not yet started).
    internal::MutexLock lock(&mu_);
    running_ = *exec;
  }
  (*exec)->Start();
  return JobClient(*exec);
}

JobResult StreamExecutionEnvironment::execute(const std::string& job_name) {
  return execute_async(job_name).wait();
}

void StreamExecutionEnvironment::cancel() {
  std::shared_ptr<JobExecution> e;
  {
    internal::MutexLock lock(&mu_);
    e = running_.lock();
  }
  if (e) e->Cancel();
}

}  // namespace tidemark
