// runtime/exec/job_compiler.cc: the planning steps (1-3), PhysicalPlan::Explain,
// then the runtime-building steps (4-6).
#include "tidemark/runtime/exec/job_compiler.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tidemark/runtime/exec/executor.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/task/detail/node_ops.h"

namespace tidemark::internal {

const std::vector<int>& PhysicalPlan::Consumers(int node, const std::string& tag) const {
  static const std::vector<int> kNone;
  auto it = consumers.find({node, tag});
  return it == consumers.end() ? kNone : it->second;
}

std::vector<int> PhysicalPlan::NetworkEdges() const {
  std::vector<int> out;
  for (int e = 0; e < static_cast<int>(edges.size()); ++e)
    if (!edges[e].chained) out.push_back(e);
  return out;
}

int PhysicalPlan::TaskCount() const {
  int n = 0;
  for (const PlanChain& c : chains) n += c.parallelism;
  return n;
}

namespace {

// The input channels of subtask `s` of node `id` (a chain head).
int InputChannels(const PhysicalPlan& plan, int id, int s) {
  int n = 0;
  for (int e : plan.nodes[id].inputs) {
    const PlanEdge& pe = plan.edges[e];
    const int pu = plan.nodes[pe.from].parallelism, pd = plan.nodes[id].parallelism;
    for (int u = 0; u < pu; ++u) n += Connected(pe.strategy, u, s, pu, pd) ? 1 : 0;
  }
  return n;
}

std::string Partitioning(const PhysicalPlan& plan, const PlanEdge& e) {
  switch (e.strategy) {
    case ShipStrategy::kKeyGroups:
      return absl::StrCat("HASH(key groups, maxP=", plan.nodes[e.to].max_parallelism, ")");
    case ShipStrategy::kCustom:
      return "CUSTOM(partitioner)";
    default:
      return ToString(e.strategy);
  }
}

}  // namespace

std::string PhysicalPlan::Explain() const {
  std::string out;
  for (int c = 0; c < static_cast<int>(chains.size()); ++c) {
    const PlanChain& chain = chains[c];
    std::vector<int> max_ps;
    for (int id : chain.nodes) max_ps.push_back(nodes[id].max_parallelism);
    const bool uniform = std::set<int>(max_ps.begin(), max_ps.end()).size() == 1;
    absl::StrAppend(
        &out, "Chain ", c, " \"", chain.task_name, "\" p=", chain.parallelism, " maxP=",
        uniform ? absl::StrCat(max_ps[0]) : absl::StrCat("[", absl::StrJoin(max_ps, ", "), "]"),
        ", tasks: ", chain.task_name);
    for (int s = 0; s < chain.parallelism; ++s)
      absl::StrAppend(&out, s == 0 ? " (" : ", (", s, "/", chain.parallelism, ")");
    absl::StrAppend(&out, "\n");
  }
  int k = 0;
  for (int e : NetworkEdges()) {
    const PlanEdge& edge = edges[e];
    const PlanNode& from = nodes[edge.from];
    const PlanNode& to = nodes[edge.to];
    absl::StrAppend(&out, "Edge ", k++, ": ", from.name, " (p=", from.parallelism, ")",
                    edge.tag.empty() ? "" : absl::StrCat(" side output '", edge.tag, "'"), " --",
                    Partitioning(*this, edge), "--> ", to.name, " (p=", to.parallelism, "), ",
                    edge.channels, " channel(s)\n");
  }
  for (const std::string& w : AssignerWarnings()) absl::StrAppend(&out, "Warning: ", w, "\n");
  return out;
}

std::vector<std::string> PhysicalPlan::AssignerWarnings() const {
  std::vector<std::string> out;
  for (const PlanNode& node : nodes) {
    if (!node.assigns_timestamps) continue;
    // The nearest non-forward edge upstream, breadth first.
    std::vector<int> frontier = {node.id};
    std::set<int> seen = {node.id};
    const PlanEdge* found = nullptr;
    while (!frontier.empty() && found == nullptr) {
      std::vector<int> next;
      for (int id : frontier) {
        for (int e : nodes[id].inputs) {
          const PlanEdge& edge = edges[e];
          if (edge.strategy != ShipStrategy::kForward) {
            found = &edge;
            break;
          }
          if (seen.insert(edge.from).second) next.push_back(edge.from);
        }
        if (found != nullptr) break;
      }
      frontier = std::move(next);
    }
    if (found == nullptr) continue;
    const PlanNode& from = nodes[found->from];
    const PlanNode& to = nodes[found->to];
    out.push_back(absl::StrCat(
        "timestamp/watermark assigner '", node.name, "' (p=", node.parallelism,
        ") runs behind a non-forward edge, ", from.name, " (p=", from.parallelism, ") --",
        Partitioning(*this, *found), "--> ", to.name, " (p=", to.parallelism,
        "): its watermark generators see the records of several source subtasks in another "
        "order than the sources read them, so watermarks and late records differ from "
        "generating them in the source; give the strategy to the source: "
        "env.from_source(source, strategy, name)"));
  }
  return out;
}

JobCompiler::JobCompiler(const std::vector<std::unique_ptr<StreamNode>>& nodes,
                         JobCompilerOptions options)
    : nodes_(nodes), options_(options) {}

absl::StatusOr<PhysicalPlan> JobCompiler::Plan() const {
  PhysicalPlan plan;
  // uids (Flink's) identify operators in checkpoints: one operator each.
  std::map<std::string, const std::string*> uids;
  for (const auto& node : nodes_) {
    if (node->uid.empty()) continue;
    auto [it, fresh] = uids.emplace(node->uid, &node->name);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat("uid '", node->uid, "' is set on both '",
                                                     *it->second, "' and '", node->name,
                                                     "': a uid names one operator"));
    }
  }
  if (absl::Status s = ResolveParallelism(plan); !s.ok()) return s;
  if (absl::Status s = ResolveEdges(plan); !s.ok()) return s;
  Chain(plan);
  if (absl::Status s = CheckOutputs(plan); !s.ok()) return s;
  return plan;
}

absl::StatusOr<std::shared_ptr<JobExecution>> JobCompiler::Compile() const {
  absl::StatusOr<PhysicalPlan> plan = Plan();
  if (!plan.ok()) return plan.status();
  return Build(*plan);
}

// 1. Parallelism.
absl::Status JobCompiler::ResolveParallelism(PhysicalPlan& plan) const {
  const int n = static_cast<int>(nodes_.size());
  plan.nodes.assign(n, PlanNode{});
  for (int i = 0; i < n; ++i) {
    const StreamNode& node = *nodes_[i];
    PlanNode& pn = plan.nodes[i];
    pn.id = i;
    pn.name = node.name;
    pn.uid = node.uid;
    pn.kind = node.kind;
    if (!pn.physical()) continue;
    const int p = node.parallelism > 0 ? node.parallelism : options_.parallelism;
    const int max_p = node.max_parallelism > 0       ? node.max_parallelism
                      : options_.max_parallelism > 0 ? options_.max_parallelism
                                                     : DefaultMaxParallelism(p);
    if (absl::Status s = ValidateParallelism(p, max_p); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("operator '", node.name, "': ", s.message()));
    }
    pn.parallelism = p;
    pn.max_parallelism = max_p;
    pn.assigns_timestamps = node.assigns_timestamps;
  }
  return absl::OkStatus();
}

// The physical inputs behind the logical edge `e`: looks through virtual nodes
// (union, partitioning) and side-output nodes.  The first partitioning met on
// the way up (the one nearest the consumer) wins.
absl::Status JobCompiler::ResolveInput(const EdgeSpec& e, ShipStrategy s,
                                       std::shared_ptr<PartitionerFactoryBase> part,
                                       std::vector<PlanEdge>& out) const {
  if (s == ShipStrategy::kDefault) {
    s = e.strategy;
    part = e.partitioner;
  }
  const StreamNode& up = *nodes_[e.from];
  PlanEdge edge;
  edge.strategy = s;
  edge.partitioner = part;
  edge.gate_input = e.gate_input;
  switch (up.kind) {
    case StreamNode::Kind::kVirtual:
      for (EdgeSpec in : up.inputs) {
        in.gate_input = e.gate_input;
        if (absl::Status st = ResolveInput(in, s, part, out); !st.ok()) return st;
      }
      return absl::OkStatus();
    case StreamNode::Kind::kSideOutput: {
      const EdgeSpec& in = up.inputs.at(0);
      const StreamNode::Kind k = nodes_[in.from]->kind;
      if (k != StreamNode::Kind::kSource && k != StreamNode::Kind::kOperator) {
        return absl::InvalidArgumentError(
            absl::StrCat("side output '", up.side_tag, "' must be taken from an operator"));
      }
      edge.from = in.from;
      edge.tag = up.side_tag;
      out.push_back(std::move(edge));
      return absl::OkStatus();
    }
    default:
      edge.from = e.from;
      out.push_back(std::move(edge));
      return absl::OkStatus();
  }
}

// 2. Physical edges and their ship strategies.
absl::Status JobCompiler::ResolveEdges(PhysicalPlan& plan) const {
  const int n = static_cast<int>(nodes_.size());
  for (int i = 0; i < n; ++i) {
    if (!plan.nodes[i].physical()) continue;
    std::vector<PlanEdge> inputs;
    for (const EdgeSpec& e : nodes_[i]->inputs) {
      if (absl::Status st = ResolveInput(e, ShipStrategy::kDefault, nullptr, inputs); !st.ok())
        return st;
    }
    for (int k = 0; k < static_cast<int>(inputs.size()); ++k) {
      PlanEdge& pe = inputs[k];
      pe.to = i;
      pe.input = k;
      const int pu = plan.nodes[pe.from].parallelism, pd = plan.nodes[i].parallelism;
      if (pe.strategy == ShipStrategy::kDefault) {
        pe.strategy = pu == pd ? ShipStrategy::kForward : ShipStrategy::kRebalance;
      } else if (pe.strategy == ShipStrategy::kForward && pu != pd) {
        return absl::InvalidArgumentError(absl::StrCat(
            "forward partitioning needs equal parallelism, but '", nodes_[pe.from]->name, "' has ",
            pu, " and '", nodes_[i]->name, "' has ", pd));
      }
      pe.channels = 0;
      for (int u = 0; u < pu; ++u)
        for (int d = 0; d < pd; ++d) pe.channels += Connected(pe.strategy, u, d, pu, pd) ? 1 : 0;
      const int index = static_cast<int>(plan.edges.size());
      plan.consumers[{pe.from, pe.tag}].push_back(index);
      plan.nodes[i].inputs.push_back(index);
      plan.edges.push_back(std::move(pe));
    }
    if (nodes_[i]->kind == StreamNode::Kind::kOperator && inputs.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator '", nodes_[i]->name, "' has no input"));
    }
  }
  return absl::OkStatus();
}

// 3. Chaining: one forward input from the main output of a node that has no
//    other consumer of it, same parallelism.
void JobCompiler::Chain(PhysicalPlan& plan) const {
  const int n = static_cast<int>(plan.nodes.size());
  std::vector<int> chained_next(n, -1);
  std::vector<bool> chained_in(n, false);
  if (options_.chaining) {
    for (int i = 0; i < n; ++i) {
      const PlanNode& node = plan.nodes[i];
      if (node.kind != StreamNode::Kind::kOperator || node.inputs.size() != 1) continue;
      if (nodes_[i]->make_two_input_gate) continue;  // heads its task
      PlanEdge& pe = plan.edges[node.inputs[0]];
      if (!pe.tag.empty() || pe.strategy != ShipStrategy::kForward) continue;
      if (plan.Consumers(pe.from, "").size() != 1) continue;
      if (plan.nodes[pe.from].parallelism != node.parallelism) continue;
      pe.chained = true;
      pe.channels = 0;
      chained_next[pe.from] = i;
      chained_in[i] = true;
    }
  }
  for (int i = 0; i < n; ++i) {
    if (!plan.nodes[i].physical() || chained_in[i]) continue;
    PlanChain chain;
    chain.head = i;
    chain.parallelism = plan.nodes[i].parallelism;
    std::vector<std::string> names;
    for (int x = i; x >= 0; x = chained_next[x]) {
      plan.nodes[x].chain = static_cast<int>(plan.chains.size());
      plan.nodes[x].position = static_cast<int>(chain.nodes.size());
      chain.nodes.push_back(x);
      names.push_back(plan.nodes[x].name);
    }
    chain.task_name = absl::StrJoin(names, " -> ");
    for (int s = 0; s < chain.parallelism; ++s)
      chain.input_channels = std::max(chain.input_channels, InputChannels(plan, i, s));
    plan.chains.push_back(std::move(chain));
  }
}

const NodeOps* JobCompiler::EdgeOps(const PlanEdge& e) const {
  const StreamNode& up = *nodes_[e.from];
  if (e.tag.empty()) return up.out.get();
  auto it = up.side_outs.find(e.tag);
  return it == up.side_outs.end() ? nullptr : it->second.get();
}

absl::Status JobCompiler::CheckOutputs(const PhysicalPlan& plan) const {
  for (const PlanChain& chain : plan.chains) {
    for (int e : plan.nodes[chain.head].inputs) {
      const PlanEdge& pe = plan.edges[e];
      if (EdgeOps(pe) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", nodes_[pe.from]->name, "' has no output"));
      }
    }
  }
  return absl::OkStatus();
}

// --- steps 4-6: tasks, channels, wiring ---

struct JobCompiler::Assembly {
  std::shared_ptr<JobExecution> exec;
  // [chain][subtask]; null for the subtasks of other ranks.
  std::vector<std::vector<StreamTask*>> tasks;
  std::vector<std::vector<int>> rank;        // [chain][subtask]: where it runs
  std::unique_ptr<RemoteExchange> exchange;  // across ranks only
  absl::Status error;                        // of CreateChannels
  // [edge][upstream subtask][downstream subtask]; null where there is no
  // channel (FORWARD, u != d); empty for chained edges.
  std::vector<std::vector<std::vector<ChannelBase*>>> channels;
};

absl::StatusOr<std::shared_ptr<JobExecution>> JobCompiler::Build(const PhysicalPlan& plan) const {
  Assembly a;
  a.exec = std::make_shared<JobExecution>(options_.worker_threads, options_.config->scheduler);
  if (absl::Status s = Place(plan, a); !s.ok()) return s;
  CreateTasks(plan, a);
  CreateChannels(plan, a);
  if (!a.error.ok()) return a.error;
  Wire(plan, a);
  if (options_.config->checkpointing()) {
    if (absl::Status s = SetUpCheckpoints(plan, a); !s.ok()) return s;
  }
  if (a.exchange) {
    // Every rank must have built this very plan and placement.
    std::string fingerprint = plan.Explain();
    std::vector<std::string> names;
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      names.push_back(plan.chains[c].task_name);
      absl::StrAppend(&fingerprint, "placement ", c, ":", absl::StrJoin(a.rank[c], ","), "\n");
    }
    a.exchange->SetTaskOrder(std::move(names));
    if (absl::Status s = a.exchange->Open(fingerprint); !s.ok()) return s;
    a.exec->SetExchange(std::move(a.exchange));
  }
  return a.exec;
}

// 4a. Placement: the rank of every subtask (all 0 on one rank).
absl::Status JobCompiler::Place(const PhysicalPlan& plan, Assembly& a) const {
  const ClusterInfo& cluster = options_.cluster;
  a.rank.resize(plan.chains.size());
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const PlanChain& chain = plan.chains[c];
    a.rank[c].assign(chain.parallelism, 0);
    if (!cluster.distributed()) continue;
    for (int s = 0; s < chain.parallelism; ++s) {
      PlacementRequest r{chain.task_name, static_cast<int>(c), s, chain.parallelism, cluster.size};
      const int rank = options_.placement ? options_.placement(r) : ModuloPlacement(r);
      if (rank < 0 || rank >= cluster.size) {
        return absl::InvalidArgumentError(absl::StrCat("the placement put '", chain.task_name,
                                                       "' (", s, "/", chain.parallelism,
                                                       ") on rank ", rank, " of ", cluster.size));
      }
      a.rank[c][s] = rank;
    }
  }
  if (!cluster.distributed()) return absl::OkStatus();
  const RemotePlane& remote = RegisteredRemotePlane();
  if (remote.make_exchange == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this process is rank ", cluster.rank, " of ", cluster.size,
        " (started by an MPI launcher), but the program is not linked with tidemark::mpi "
        "(CMake: target_link_libraries(<target> tidemark::mpi)); link it to run across ranks"));
  }
  a.exchange = remote.make_exchange(cluster, options_.config->channel_capacity);
  return absl::OkStatus();
}

// 4. Tasks: one per chain and subtask.
void JobCompiler::CreateTasks(const PhysicalPlan& plan, Assembly& a) const {
  a.tasks.resize(plan.chains.size());
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const PlanChain& chain = plan.chains[c];
    for (int s = 0; s < chain.parallelism; ++s) {
      if (a.rank[c][s] != options_.cluster.rank) {
        a.tasks[c].push_back(nullptr);  // another rank's
        continue;
      }
      auto metrics = std::make_unique<SubtaskMetrics>(chain.task_name, s, chain.parallelism,
                                                      InputChannels(plan, chain.head, s));
      a.tasks[c].push_back(a.exec->AddTask(std::make_unique<StreamTask>(
          chain.task_name, a.exec.get(), std::move(metrics), options_.clock, options_.config)));
    }
  }
}

// 5. Channels for every network edge, grid[up][down].
void JobCompiler::CreateChannels(const PhysicalPlan& plan, Assembly& a) const {
  a.channels.resize(plan.edges.size());
  const int me = options_.cluster.rank;
  uint32_t id = 0;  // numbers every channel of the plan alike on every rank
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    for (int e : plan.nodes[plan.chains[c].head].inputs) {
      const PlanEdge& pe = plan.edges[e];
      const int pu = plan.nodes[pe.from].parallelism, pd = plan.nodes[pe.to].parallelism;
      const NodeOps* ops = EdgeOps(pe);  // not null: CheckOutputs
      const std::vector<StreamTask*>& producers = a.tasks[plan.nodes[pe.from].chain];
      auto& grid = a.channels[e];
      grid.assign(pu, std::vector<ChannelBase*>(pd, nullptr));
      for (int u = 0; u < pu; ++u) {
        for (int d = 0; d < pd; ++d) {
          if (!Connected(pe.strategy, u, d, pu, pd)) continue;
          const uint32_t channel_id = id++;
          const int ru = a.rank[plan.nodes[pe.from].chain][u], rd = a.rank[c][d];
          if (ru != me && rd != me) continue;  // between two other ranks
          ChannelBase* ch = a.exec->AddChannel(ops->NewChannel(options_.config->channel_capacity));
          grid[u][d] = ch;
          if (ru == rd) {
            ch->set_consumer(a.tasks[c][d]);
            ch->set_producer(producers[u]);
            continue;
          }
          std::unique_ptr<RemoteCodec> codec = ops->NewRemoteCodec();
          if (!codec && a.error.ok()) {
            a.error = absl::InvalidArgumentError(absl::StrCat(
                "records of type ", ops->TypeName(), " from '", nodes_[pe.from]->name, "' to '",
                nodes_[pe.to]->name, "' cross from rank ", ru, " to rank ", rd,
                ", and the type has no tidemark::StateCodec to travel with: specialise it (see "
                "runtime/state/state_codec.h) or place both subtasks on one rank"));
          }
          if (!codec) continue;
          if (ru == me) {
            ch->set_producer(producers[u]);
            a.exchange->AddOutbound(channel_id, rd, ch, std::move(codec));
          } else {
            ch->set_consumer(a.tasks[c][d]);
            a.exchange->AddInbound(channel_id, ru, ch, std::move(codec));
          }
        }
      }
    }
  }
}

// 6. Wiring.
void JobCompiler::Wire(const PhysicalPlan& plan, Assembly& a) const {
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    for (int s = 0; s < plan.chains[c].parallelism; ++s)
      if (a.tasks[c][s] != nullptr) WireSubtask(plan, a, static_cast<int>(c), s);
  }
}

// One task: its operators (last to first, each writing to the next one, to
// its network consumers or to both), the writers, and its input (a source, or
// the input gate over its channels).
void JobCompiler::WireSubtask(const PhysicalPlan& plan, Assembly& a, int c, int s) const {
  const PlanChain& chain = plan.chains[c];
  const int p = chain.parallelism;
  StreamTask* task = a.tasks[c][s];
  WatermarkListener* listener = options_.listener;
  bool reported = false;
  // Writers for the network consumers of (node, tag).
  auto network_outputs = [&](int node_id, const std::string& tag, const NodeOps* ops,
                             std::vector<OutputBase*>& outs) {
    for (int e : plan.Consumers(node_id, tag)) {
      const PlanEdge& pe = plan.edges[e];
      if (pe.chained) continue;
      std::vector<ChannelBase*> list;
      for (ChannelBase* ch : a.channels[e][s])
        if (ch != nullptr) list.push_back(ch);
      WriterBase* writer = nullptr;
      EdgeSpec edge{node_id, pe.strategy, pe.partitioner};
      // Errors in the partitioner (a key selector) are the key_by's.
      const char* api = pe.strategy == ShipStrategy::kKeyGroups ? "key_by"
                        : pe.strategy == ShipStrategy::kCustom  ? "partition_custom"
                                                                : "partitioning";
      const std::string blame = absl::StrCat(api, " (", ToString(pe.strategy),
                                             " partitioner) into '", nodes_[pe.to]->name, "'");
      auto w = ops->NewWriter(list, edge, s, plan.nodes[pe.to].max_parallelism, task, listener,
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

  // A source task's watermark alignment, which its watermark operator may join.
  SourceAlignment* alignment = nodes_[chain.head]->kind == StreamNode::Kind::kSource
                                   ? task->EnableAlignment(a.exec->alignment(), listener)
                                   : nullptr;
  std::vector<std::pair<std::unique_ptr<OperatorBase>, OperatorContext*>> ops_rev;
  OperatorBase* next_op = nullptr;
  OperatorContext* next_ctx = nullptr;
  OutputBase* source_head = nullptr;
  for (int idx = static_cast<int>(chain.nodes.size()) - 1; idx >= 0; --idx) {
    const int id = chain.nodes[idx];
    const StreamNode& node = *nodes_[id];
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
        node.name, s, p, plan.nodes[id].max_parallelism, task->metrics(), &task->timers(),
        options_.config, listener));
    ctx->set_source_alignment(alignment);
    next_op = op.get();
    next_ctx = ctx;
    ops_rev.emplace_back(std::move(op), ctx);
  }
  for (auto it = ops_rev.rbegin(); it != ops_rev.rend(); ++it)
    task->AddOperator(std::move(it->first), it->second);

  const StreamNode& head = *nodes_[chain.head];
  if (head.kind == StreamNode::Kind::kSource) {
    SourceBuildArgs args{source_head,     SourceContext{s, p, options_.clock},
                         head.name,       task->signals(),
                         task->metrics(), options_.config->batch_size};
    args.head_op = next_op;
    args.alignment = alignment;
    task->SetInput(head.make_source(args));
    return;
  }
  const std::vector<int>& inputs = plan.nodes[chain.head].inputs;
  if (head.make_two_input_gate) {
    TwoInputGateArgs args{{}, {}, next_op, next_ctx, task, listener};
    for (int e : inputs) {
      auto& list = plan.edges[e].gate_input == 0 ? args.first : args.second;
      for (auto& row : a.channels[e])
        if (row[s] != nullptr) list.push_back(row[s]);
    }
    task->SetInput(head.make_two_input_gate(args));
    return;
  }
  std::vector<ChannelBase*> in;
  for (int e : inputs) {
    for (auto& row : a.channels[e])
      if (row[s] != nullptr) in.push_back(row[s]);
  }
  const NodeOps* in_ops = EdgeOps(plan.edges[inputs[0]]);
  auto head_out = in_ops->NewChainOutput(next_op, next_ctx);
  OutputBase* head_raw = head_out.get();
  task->AddOutputObject(std::move(head_out));
  task->SetInput(in_ops->NewInputGate(in, head_raw, task, listener));
}

namespace {

// The max parallelism of a chain's operators, for the checkpoint's metadata:
// "128", or "128,256" where they differ.
std::string ChainMaxParallelism(const PhysicalPlan& plan, size_t c) {
  std::vector<int> max_ps;
  for (int id : plan.chains[c].nodes) max_ps.push_back(plan.nodes[id].max_parallelism);
  std::sort(max_ps.begin(), max_ps.end());
  max_ps.erase(std::unique(max_ps.begin(), max_ps.end()), max_ps.end());
  return absl::StrJoin(max_ps, ",");
}

// The uids of a chain's operators, "a,b", when every one has one; else "".
std::string ChainUids(const PhysicalPlan& plan, size_t c) {
  std::vector<std::string> uids;
  for (int id : plan.chains[c].nodes) {
    if (plan.nodes[id].uid.empty()) return "";
    uids.push_back(plan.nodes[id].uid);
  }
  return absl::StrJoin(uids, ",");
}

}  // namespace

// 7. Checkpoints: the coordinator, and the state each task starts from.
// Restoring at another parallelism (docs/checkpoints.md, "Rescaling"): every
// new subtask is handed all of its task's old snapshots and its operators
// pick theirs (StreamTask::Restore); source tasks cannot be rescaled.
absl::Status JobCompiler::SetUpCheckpoints(const PhysicalPlan& plan, Assembly& a) const {
  const JobConfig& config = *options_.config;
  std::unique_ptr<CheckpointStorage> storage;
  if (!config.checkpoint_dir.empty()) {
    storage = std::make_unique<CheckpointStorage>(config.checkpoint_dir,
                                                  std::max(1, config.checkpoints_retained));
    // Created and checked before the job starts (rank 0 writes every
    // checkpoint): an unusable directory is an error now, not a failed
    // checkpoint later.
    if (options_.cluster.rank == 0) {
      if (absl::Status s = storage->CheckWritable(); !s.ok()) return s;
    }
  }
  std::map<std::string, std::string> metadata;
  metadata["job.tasks"] = absl::StrCat(plan.chains.size());
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    metadata[absl::StrCat("task.", c, ".name")] = plan.chains[c].task_name;
    metadata[absl::StrCat("task.", c, ".parallelism")] = absl::StrCat(plan.chains[c].parallelism);
    metadata[absl::StrCat("task.", c, ".max_parallelism")] = ChainMaxParallelism(plan, c);
    const std::string uids = ChainUids(plan, c);
    if (!uids.empty()) metadata[absl::StrCat("task.", c, ".uids")] = uids;
  }

  // What to restore from.
  std::optional<LoadedCheckpoint> restore;
  std::vector<std::string> problems;
  if (config.restore_from == "latest") {
    if (!storage) {
      return absl::InvalidArgumentError(
          "restoring from the latest checkpoint needs a checkpoint directory");
    }
    absl::StatusOr<LoadedCheckpoint> loaded = storage->LoadLatest(&problems);
    if (loaded.ok()) {
      restore = *std::move(loaded);
    } else {
      // No checkpoint was ever completed (none, or only ones a crash cut
      // short): the job starts fresh.  Complete ones that are all damaged
      // are an error: starting fresh would redo output already committed.
      for (int64_t id : storage->ListCheckpointIds()) {
        if (storage->IsComplete(id)) {
          return absl::DataLossError(absl::StrCat("no usable checkpoint in ", config.checkpoint_dir,
                                                  ": ", absl::StrJoin(problems, "; ")));
        }
      }
    }
  } else if (!config.restore_from.empty()) {
    CheckpointStorage reader(config.restore_from);
    absl::StatusOr<LoadedCheckpoint> loaded = reader.Load(config.restore_from);
    if (!loaded.ok()) return loaded.status();
    restore = *std::move(loaded);
  }

  // Ids go on after the checkpoints this job's storage wrote (a valid
  // manifest): a stray chk-999999 or chk-abc neither shifts them nor counts
  // toward retention; it is named in the notices.
  int64_t first_id = 1;
  if (storage) {
    for (int64_t id : storage->ListCommittedIds()) first_id = std::max(first_id, id + 1);
    for (std::string& line : storage->StrayEntries()) a.exec->Notice(std::move(line));
  }
  if (restore) first_id = std::max(first_id, restore->id + 1);
  // Across ranks the coordinator runs on rank 0 and writes every checkpoint;
  // the other ranks' subtasks reach it through the exchange, which stands in
  // for them there and relays their snapshots to it (mpi_exchange.h).
  const int me = options_.cluster.rank;
  std::unique_ptr<CheckpointCoordinator> coordinator;
  if (me == 0) {
    coordinator = std::make_unique<CheckpointCoordinator>(config.checkpoint_interval,
                                                          std::move(storage), metadata, first_id);
    JobExecution* exec = a.exec.get();  // owns the coordinator
    coordinator->SetFailurePolicy(config.tolerable_failed_checkpoints, config.checkpoint_timeout,
                                  config.on_checkpoint_failed,
                                  [exec](const absl::Status& s) { exec->Fail(s); });
    if (a.exchange) a.exchange->SetCoordinator(coordinator.get());
  }
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const bool source = plan.nodes[plan.chains[c].head].kind == StreamNode::Kind::kSource;
    for (int s = 0; s < plan.chains[c].parallelism; ++s) {
      StreamTask* t = a.tasks[c][s];
      if (t != nullptr) {
        CheckpointAcknowledger* ack = coordinator
                                          ? static_cast<CheckpointAcknowledger*>(coordinator.get())
                                          : a.exchange.get();
        t->EnableCheckpoints(ack, static_cast<int>(c), options_.listener);
        if (a.exchange) a.exchange->AddLocalTask(static_cast<int>(c), s, t);
        if (coordinator) coordinator->AddTask(t, static_cast<int>(c), s);
      } else if (coordinator) {
        coordinator->AddTask(
            a.exchange->AddRemoteTask(a.rank[c][s], static_cast<int>(c), s, source),
            static_cast<int>(c), s);
      }
    }
  }

  if (restore) {
    const std::string where =
        absl::StrCat("checkpoint ", restore->id, " (", restore->path.string(), ")");
    auto meta = [&](const std::string& k) -> std::string {
      auto it = restore->metadata.find(k);
      return it == restore->metadata.end() ? "" : it->second;
    };
    // Which old task each task restores from (-1: none, it starts fresh).
    // A task whose operators all have uids is matched by them, wherever it
    // is in either job; one whose uids are not in the checkpoint is new and
    // starts fresh.  Any other task is matched by its index, and then the
    // two jobs must have as many tasks and the names must agree.
    int old_tasks = 0;
    if (!absl::SimpleAtoi(meta("job.tasks"), &old_tasks) || old_tasks < 0) {
      return absl::DataLossError(absl::StrCat(where, ": no valid task count"));
    }
    std::map<std::string, int> old_by_uids;
    for (int k = 0; k < old_tasks; ++k) {
      const std::string u = meta(absl::StrCat("task.", k, ".uids"));
      if (!u.empty()) old_by_uids.emplace(u, k);
    }
    std::vector<int> from(plan.chains.size(), -1);
    std::vector<bool> by_uid(plan.chains.size(), false);
    bool all_by_uid = true;
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      const std::string u = ChainUids(plan, c);
      if (u.empty()) {
        all_by_uid = false;
        from[c] = static_cast<int>(c);
      } else {
        by_uid[c] = true;
        auto it = old_by_uids.find(u);
        if (it != old_by_uids.end()) from[c] = it->second;
      }
    }
    if (!all_by_uid && meta("job.tasks") != metadata["job.tasks"]) {
      return absl::FailedPreconditionError(absl::StrCat(where, " has ", meta("job.tasks"),
                                                        " tasks, the job ", metadata["job.tasks"],
                                                        ": it was taken of another job"));
    }
    std::vector<bool> restored(static_cast<size_t>(old_tasks), false);
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      if (from[c] < 0) continue;
      if (restored[from[c]]) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": its task ", from[c], " would be restored twice (to '",
                         plan.chains[c].task_name, "'): give every operator of the job a uid"));
      }
      restored[from[c]] = true;
    }
    for (int k = 0; k < old_tasks; ++k) {
      if (restored[k]) continue;
      // A task nobody restores: fine when it had no state (Flink's
      // savepoints hold no stateless operators), else its state would go.
      int old_pk = 0;
      (void)absl::SimpleAtoi(meta(absl::StrCat("task.", k, ".parallelism")), &old_pk);
      bool stateful = false;
      for (int s = 0; s < old_pk && !stateful; ++s) {
        const std::string file = SubtaskStateFileName(k, s);
        auto it = restore->states.find(file);
        if (it == restore->states.end()) {
          stateful = true;
          break;
        }
        absl::StatusOr<SubtaskSnapshot> snap =
            DecodeSubtaskSnapshot(it->second, absl::StrCat(where, ": ", file));
        if (!snap.ok()) return snap.status();
        stateful = snap->has_source;
        for (const OperatorSnapshot& op : snap->operators)
          if (!op.state.empty()) stateful = true;
      }
      if (!stateful) continue;
      const std::string u = meta(absl::StrCat("task.", k, ".uids"));
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": its task '", meta(absl::StrCat("task.", k, ".name")), "'",
                       u.empty() ? std::string() : absl::StrCat(" (uids ", u, ")"),
                       " is not in the job: its state would be lost"));
    }
    // Every task's parallelism then, checked first: a task's input state
    // is restored only where no task upstream was rescaled either.
    std::vector<int> old_p(plan.chains.size());
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      const PlanChain& chain = plan.chains[c];
      const int k = from[c];
      if (k < 0) continue;
      const std::string name = meta(absl::StrCat("task.", k, ".name"));
      if (!by_uid[c] && name != chain.task_name) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, ": task ", c, " is '", name, "' there and '", chain.task_name, "' in the job"));
      }
      const std::string p = meta(absl::StrCat("task.", k, ".parallelism"));
      if (!absl::SimpleAtoi(p, &old_p[c]) || old_p[c] <= 0) {
        return absl::DataLossError(absl::StrCat(where, ": task '", chain.task_name,
                                                "' has no valid parallelism ('", p, "')"));
      }
      // Key groups are fixed by the max parallelism: changing it would move
      // keys to groups (and subtasks) other than their state's.  Checkpoints
      // that predate the entry are not checked.
      const std::string max_p = meta(absl::StrCat("task.", k, ".max_parallelism"));
      if (!max_p.empty() && max_p != ChainMaxParallelism(plan, c)) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": task '", chain.task_name, "' ran with max parallelism ", max_p,
                         ", the job has ", ChainMaxParallelism(plan, c),
                         "; keyed state cannot move to other key groups"));
      }
      if (old_p[c] != chain.parallelism &&
          plan.nodes[chain.head].kind == StreamNode::Kind::kSource) {
        return absl::UnimplementedError(absl::StrCat(
            where, ": task '", chain.task_name, "' ran at parallelism ", old_p[c], ", the job has ",
            chain.parallelism,
            "; a source task cannot be restored at another parallelism (its positions are per "
            "subtask)"));
      }
    }
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      const PlanChain& chain = plan.chains[c];
      if (from[c] < 0) continue;  // a new task: starts fresh
      auto old = std::make_shared<std::vector<SubtaskSnapshot>>();
      for (int s = 0; s < old_p[c]; ++s) {
        const std::string file = SubtaskStateFileName(from[c], s);
        auto it = restore->states.find(file);
        if (it == restore->states.end()) {
          return absl::DataLossError(absl::StrCat(where, ": ", file, " is missing"));
        }
        absl::StatusOr<SubtaskSnapshot> snap =
            DecodeSubtaskSnapshot(it->second, absl::StrCat(where, ": ", file));
        if (!snap.ok()) return snap.status();
        old->push_back(*std::move(snap));
      }
      SubtaskRestore r;
      r.checkpoint_id = restore->id;
      r.old_parallelism = old_p[c];
      r.old = std::move(old);
      r.matched_by_uid = by_uid[c];
      r.restore_input = old_p[c] == chain.parallelism;
      // A source's position, or an input gate's channels: the latter only
      // where the task and every task upstream are restored unchanged, at
      // their index and parallelism (else its input starts as a rescaled
      // one: the lowest old watermark).
      if (!plan.nodes[chain.head].inputs.empty() && from[c] != static_cast<int>(c))
        r.restore_input = false;
      for (int e : plan.nodes[chain.head].inputs) {
        const int up = plan.nodes[plan.edges[e].from].chain;
        if (from[up] != up || old_p[up] != plan.chains[up].parallelism) r.restore_input = false;
      }
      for (StreamTask* t : a.tasks[c])
        if (t != nullptr) t->SetRestoreState(r);
    }
  }
  a.exec->EnableCheckpoints(std::move(coordinator), restore ? restore->id : -1,
                            restore ? restore->path.string() : std::string(), std::move(problems));
  return absl::OkStatus();
}

}  // namespace tidemark::internal
