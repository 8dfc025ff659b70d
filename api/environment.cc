#include "api/environment.h"

#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tidemark {

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
      clock_(SystemClock::Get()) {}

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
StreamExecutionEnvironment& StreamExecutionEnvironment::set_clock(const Clock* clock) {
  clock_ = clock;
  return *this;
}
StreamExecutionEnvironment& StreamExecutionEnvironment::set_watermark_listener(
    std::shared_ptr<WatermarkListener> l) {
  listener_ = std::move(l);
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

namespace {

struct PhysEdge {
  int from;         // a real (source/operator) node
  std::string tag;  // "" for the main output
  ShipStrategy strategy;
  std::shared_ptr<PartitionerFactoryBase> partitioner;
};

// Everything Build() derives from the logical graph.
struct Plan {
  std::vector<int> parallelism;
  std::vector<int> max_parallelism;
  std::vector<std::vector<PhysEdge>> inputs;  // per real node
  // consumers of (node, tag): (consumer node, index into its inputs)
  std::map<std::pair<int, std::string>, std::vector<std::pair<int, int>>> consumers;
  std::vector<int> chained_next;  // node chained after this one, -1 if none
  std::vector<bool> chained_in;   // chained to its upstream
};

}  // namespace

absl::StatusOr<std::shared_ptr<JobExecution>> StreamExecutionEnvironment::Build(
    const std::string& job_name) {
  (void)job_name;
  const int n = static_cast<int>(nodes_.size());
  Plan plan;
  plan.parallelism.assign(n, 0);
  plan.max_parallelism.assign(n, 0);
  plan.inputs.resize(n);
  plan.chained_next.assign(n, -1);
  plan.chained_in.assign(n, false);
  auto is_real = [&](int id) {
    return nodes_[id]->kind == StreamNode::Kind::kSource ||
           nodes_[id]->kind == StreamNode::Kind::kOperator;
  };

  // 1. Parallelism.
  for (int i = 0; i < n; ++i) {
    if (!is_real(i)) continue;
    StreamNode& node = *nodes_[i];
    const int p = node.parallelism > 0 ? node.parallelism : parallelism_;
    int max_p = node.max_parallelism > 0 ? node.max_parallelism
                : max_parallelism_ > 0   ? max_parallelism_
                                         : DefaultMaxParallelism(p);
    if (absl::Status s = ValidateParallelism(p, max_p); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("operator '", node.name, "': ", s.message()));
    }
    plan.parallelism[i] = p;
    plan.max_parallelism[i] = max_p;
  }

  // 2. Physical inputs: look through virtual and side-output nodes.
  std::function<absl::Status(int, const EdgeSpec&, ShipStrategy,
                             std::shared_ptr<PartitionerFactoryBase>, std::vector<PhysEdge>&)>
      resolve = [&](int consumer, const EdgeSpec& e, ShipStrategy s,
                    std::shared_ptr<PartitionerFactoryBase> part,
                    std::vector<PhysEdge>& out) -> absl::Status {
    if (s == ShipStrategy::kDefault) {
      s = e.strategy;
      part = e.partitioner;
    }
    const StreamNode& up = *nodes_[e.from];
    switch (up.kind) {
      case StreamNode::Kind::kVirtual:
        for (const EdgeSpec& in : up.inputs) {
          if (absl::Status st = resolve(consumer, in, s, part, out); !st.ok()) return st;
        }
        return absl::OkStatus();
      case StreamNode::Kind::kSideOutput: {
        const EdgeSpec& in = up.inputs.at(0);
        if (!is_real(in.from)) {
          return absl::InvalidArgumentError(
              absl::StrCat("side output '", up.side_tag, "' must be taken from an operator"));
        }
        out.push_back(PhysEdge{in.from, up.side_tag, s, part});
        return absl::OkStatus();
      }
      default:
        out.push_back(PhysEdge{e.from, "", s, part});
        return absl::OkStatus();
    }
  };
  for (int i = 0; i < n; ++i) {
    if (!is_real(i)) continue;
    for (const EdgeSpec& e : nodes_[i]->inputs) {
      if (absl::Status st = resolve(i, e, ShipStrategy::kDefault, nullptr, plan.inputs[i]);
          !st.ok())
        return st;
    }
    for (int k = 0; k < static_cast<int>(plan.inputs[i].size()); ++k) {
      PhysEdge& pe = plan.inputs[i][k];
      const int pu = plan.parallelism[pe.from], pd = plan.parallelism[i];
      if (pe.strategy == ShipStrategy::kDefault) {
        pe.strategy = pu == pd ? ShipStrategy::kForward : ShipStrategy::kRebalance;
      } else if (pe.strategy == ShipStrategy::kForward && pu != pd) {
        return absl::InvalidArgumentError(absl::StrCat(
            "forward partitioning needs equal parallelism, but '", nodes_[pe.from]->name, "' has ",
            pu, " and '", nodes_[i]->name, "' has ", pd));
      }
      plan.consumers[{pe.from, pe.tag}].emplace_back(i, k);
    }
    if (nodes_[i]->kind == StreamNode::Kind::kOperator && plan.inputs[i].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator '", nodes_[i]->name, "' has no input"));
    }
  }

  // 3. Chaining: one forward input from an operator whose main output has no
  //    other consumer, same parallelism.
  if (chaining_) {
    for (int i = 0; i < n; ++i) {
      if (!is_real(i) || nodes_[i]->kind != StreamNode::Kind::kOperator) continue;
      if (plan.inputs[i].size() != 1) continue;
      const PhysEdge& pe = plan.inputs[i][0];
      if (!pe.tag.empty() || pe.strategy != ShipStrategy::kForward) continue;
      if (plan.consumers[{pe.from, ""}].size() != 1) continue;
      if (plan.parallelism[pe.from] != plan.parallelism[i]) continue;
      plan.chained_next[pe.from] = i;
      plan.chained_in[i] = true;
    }
  }

  auto exec = std::make_shared<JobExecution>(worker_threads_);
  WatermarkListener* listener = listener_.get();

  // 4. Tasks: one per chain head and subtask.
  struct ChainTasks {
    std::vector<int> nodes;
    std::vector<StreamTask*> tasks;
  };
  std::map<int, ChainTasks> chains;  // by head node
  std::vector<int> head_of(n, -1);
  for (int i = 0; i < n; ++i) {
    if (!is_real(i) || plan.chained_in[i]) continue;
    ChainTasks& c = chains[i];
    for (int x = i; x >= 0; x = plan.chained_next[x]) {
      c.nodes.push_back(x);
      head_of[x] = i;
    }
    std::vector<std::string> names;
    for (int x : c.nodes) names.push_back(nodes_[x]->name);
    const std::string task_name = absl::StrJoin(names, " -> ");
    int channels_in = 0;
    for (const PhysEdge& pe : plan.inputs[i]) {
      channels_in += pe.strategy == ShipStrategy::kForward ? 1 : plan.parallelism[pe.from];
    }
    for (int s = 0; s < plan.parallelism[i]; ++s) {
      auto metrics =
          std::make_unique<SubtaskMetrics>(task_name, s, plan.parallelism[i], channels_in);
      c.tasks.push_back(exec->AddTask(std::make_unique<StreamTask>(
          task_name, exec.get(), std::move(metrics), clock_, &config_)));
    }
  }

  // 5. Channels for every network edge: chan[(head, k)][up][down].
  std::map<std::pair<int, int>, std::vector<std::vector<ChannelBase*>>> chans;
  for (auto& [head, chain] : chains) {
    for (int k = 0; k < static_cast<int>(plan.inputs[head].size()); ++k) {
      const PhysEdge& pe = plan.inputs[head][k];
      const int pu = plan.parallelism[pe.from], pd = plan.parallelism[head];
      const StreamNode& up = *nodes_[pe.from];
      const NodeOps* ops = pe.tag.empty() ? up.out.get() : up.side_outs.at(pe.tag).get();
      if (ops == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("'", up.name, "' has no output"));
      }
      auto& grid = chans[{head, k}];
      grid.assign(pu, std::vector<ChannelBase*>(pd, nullptr));
      StreamTask* up_tasks_dummy = nullptr;
      (void)up_tasks_dummy;
      for (int u = 0; u < pu; ++u) {
        for (int d = 0; d < pd; ++d) {
          if (pe.strategy == ShipStrategy::kForward && u != d) continue;
          ChannelBase* ch = exec->AddChannel(ops->NewChannel(config_.channel_capacity));
          ch->set_consumer(chain.tasks[d]);
          ch->set_producer(chains[head_of[pe.from]].tasks[u]);
          grid[u][d] = ch;
        }
      }
    }
  }

  // 6. Wire each task: operators, chain outputs, writers, input.
  for (auto& [head, chain] : chains) {
    const int p = plan.parallelism[head];
    for (int s = 0; s < p; ++s) {
      StreamTask* task = chain.tasks[s];
      bool reported = false;
      // Writers for the consumers of (node, tag) over the network.
      auto network_outputs = [&](int node_id, const std::string& tag, const NodeOps* ops,
                                 std::vector<OutputBase*>& outs) {
        auto it = plan.consumers.find({node_id, tag});
        if (it == plan.consumers.end()) return;
        for (auto [consumer, k] : it->second) {
          if (tag.empty() && plan.chained_in[consumer]) continue;  // chained, not networked
          const PhysEdge& pe = plan.inputs[consumer][k];
          auto& grid = chans[{consumer, k}];
          std::vector<ChannelBase*> list;
          for (ChannelBase* ch : grid[s])
            if (ch != nullptr) list.push_back(ch);
          WriterBase* writer = nullptr;
          EdgeSpec edge{node_id, pe.strategy, pe.partitioner};
          // Errors in the partitioner (a key selector) are the key_by's.
          const char* api = pe.strategy == ShipStrategy::kKeyGroups ? "key_by"
                            : pe.strategy == ShipStrategy::kCustom  ? "partition_custom"
                                                                    : "partitioning";
          const std::string blame = absl::StrCat(api, " (", ToString(pe.strategy),
                                                 " partitioner) into '", nodes_[consumer]->name,
                                                 "'");
          auto w = ops->NewWriter(list, edge, s, plan.max_parallelism[consumer], task, listener,
                                  !reported, blame, &writer);
          reported = true;
          outs.push_back(w.get());
          task->AddWriter(writer);
          task->AddOutputObject(std::move(w));
        }
      };
      auto combine = [&](const NodeOps* ops, std::vector<OutputBase*>& outs) -> OutputBase* {
        if (outs.empty()) {
          auto d = ops->NewDiscard();
          OutputBase* raw = d.get();
          task->AddOutputObject(std::move(d));
          return raw;
        }
        if (outs.size() == 1) return outs[0];
        auto f = ops->NewFanOut(outs);
        OutputBase* raw = f.get();
        task->AddOutputObject(std::move(f));
        return raw;
      };

      std::vector<std::pair<std::unique_ptr<OperatorBase>, OperatorContext*>> ops_rev;
      OperatorBase* next_op = nullptr;
      OperatorContext* next_ctx = nullptr;
      OutputBase* source_head = nullptr;
      for (int idx = static_cast<int>(chain.nodes.size()) - 1; idx >= 0; --idx) {
        const int id = chain.nodes[idx];
        StreamNode& node = *nodes_[id];
        OutputBase* main = nullptr;
        if (node.out) {
          std::vector<OutputBase*> outs;
          if (next_op != nullptr) {
            auto co = node.out->NewChainOutput(next_op, next_ctx);
            outs.push_back(co.get());
            task->AddOutputObject(std::move(co));
          }
          network_outputs(id, "", node.out.get(), outs);
          main = combine(node.out.get(), outs);
        }
        if (node.kind == StreamNode::Kind::kSource) {
          source_head = main;
          break;
        }
        std::unique_ptr<OperatorBase> op = node.make_operator();
        op->set_output(main);
        for (auto& [tag, side_ops] : node.side_outs) {
          std::vector<OutputBase*> outs;
          network_outputs(id, tag, side_ops.get(), outs);
          if (!outs.empty()) op->set_side_output(tag, combine(side_ops.get(), outs));
        }
        OperatorContext* ctx = task->AddContext(std::make_unique<OperatorContext>(
            node.name, s, p, plan.max_parallelism[id], task->metrics(), &task->timers(), &config_,
            listener));
        next_op = op.get();
        next_ctx = ctx;
        ops_rev.emplace_back(std::move(op), ctx);
      }
      for (auto it = ops_rev.rbegin(); it != ops_rev.rend(); ++it)
        task->AddOperator(std::move(it->first), it->second);

      StreamNode& head_node = *nodes_[head];
      if (head_node.kind == StreamNode::Kind::kSource) {
        SourceBuildArgs args{source_head,     SourceContext{s, p, clock_},
                             head_node.name,  task->signals(),
                             task->metrics(), config_.batch_size};
        task->SetInput(head_node.make_source(args));
      } else {
        std::vector<ChannelBase*> in;
        for (int k = 0; k < static_cast<int>(plan.inputs[head].size()); ++k) {
          auto& grid = chans[{head, k}];
          for (auto& row : grid)
            if (row[s] != nullptr) in.push_back(row[s]);
        }
        const PhysEdge& pe0 = plan.inputs[head][0];
        const StreamNode& up = *nodes_[pe0.from];
        const NodeOps* in_ops = pe0.tag.empty() ? up.out.get() : up.side_outs.at(pe0.tag).get();
        auto head_out = in_ops->NewChainOutput(next_op, next_ctx);
        OutputBase* head_raw = head_out.get();
        task->AddOutputObject(std::move(head_out));
        task->SetInput(in_ops->NewInputGate(in, head_raw, task, listener));
      }
    }
  }
  return exec;
}

absl::StatusOr<std::string> StreamExecutionEnvironment::ExplainPlan() {
  std::string out;
  for (const auto& n : nodes_) {
    absl::StrAppend(&out, n->id, ": ", n->name, " p=", n->parallelism, " inputs=[");
    for (const auto& e : n->inputs) absl::StrAppend(&out, e.from, ":", ToString(e.strategy), " ");
    absl::StrAppend(&out, "]\n");
  }
  return out;
}

JobClient StreamExecutionEnvironment::execute_async(const std::string& job_name) {
  auto exec = Build(job_name);
  if (!exec.ok()) return JobClient(exec.status());
  {
    // Published before it starts, so a cancel() racing with the start is
    // never lost (JobExecution::Cancel() handles a job not yet started).
    std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    e = running_.lock();
  }
  if (e) e->Cancel();
}

}  // namespace tidemark
