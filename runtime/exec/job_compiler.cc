// runtime/exec/job_compiler.cc: the planning steps (1-3), PhysicalPlan::Explain,
// then the runtime-building steps (4-6).
#include "tidemark/runtime/exec/job_compiler.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
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
  // Watermark alignment pauses source subtasks: an aligned assigner outside
  // a source's task (after a union, a shuffle, or unchained) joins no group,
  // and a group of one source subtask has nothing to pause.
  std::map<std::string, int> group_subtasks;
  for (const PlanNode& node : nodes) {
    if (!node.aligned) continue;
    const bool in_source =
        node.chain >= 0 && nodes[chains[node.chain].head].kind == StreamNode::Kind::kSource;
    if (in_source) {
      group_subtasks[node.alignment_group] += node.parallelism;
      continue;
    }
    out.push_back(absl::StrCat(
        "the watermark alignment of assigner '", node.name, "' (group '", node.alignment_group,
        "') does not apply: it runs in task '",
        node.chain >= 0 ? chains[node.chain].task_name : node.name,
        "', not in a source's, and alignment pauses sources; give the strategy to the source "
        "(env.from_source(source, strategy, name)), as Flink applies alignment only there"));
  }
  for (const auto& [group, subtasks] : group_subtasks) {
    if (subtasks != 1) continue;
    out.push_back(absl::StrCat(
        "watermark alignment group '", group,
        "' has one source subtask: nothing is paused (tidemark pauses whole source subtasks, "
        "not the splits or files of one; docs/semantics.md 2.7a)"));
  }
  return out;
}

std::vector<std::string> PhysicalPlan::StateBackendWarnings(const StateBackend& backend) const {
  std::vector<std::string> out;
  if (!backend.is_rocksdb()) return out;
  for (const PlanNode& node : nodes) {
    if (!node.window_contents_on_heap_only) continue;
    out.push_back(absl::StrCat(
        "window operator '", node.name, "' (p=", node.parallelism,
        ") keeps its contents on the heap although the job's state backend is RocksDB: the code "
        "that built it (window(...)) was compiled without TIDEMARK_ROCKSDB_WINDOWS; link "
        "tidemark::rocksdb, which defines it, to the target that compiles that code "
        "(target_link_libraries(<target> PRIVATE tidemark::rocksdb)) and rebuild. Until then its "
        "contents take heap memory, and its checkpoints have the heap operator's layout, which "
        "the window restores on RocksDB only for a tumbling window or a sliding aggregate without "
        "merge (docs/checkpoints.md, \"State backends\")"));
  }
  return out;
}

JobCompiler::JobCompiler(const std::vector<std::unique_ptr<StreamNode>>& nodes,
                         JobCompilerOptions options)
    : nodes_(nodes), options_(options) {}

absl::StatusOr<PhysicalPlan> JobCompiler::Plan() const {
  PhysicalPlan plan;
  // uids (Flink's) identify operators in checkpoints: one operator each.
  std::map<std::string, const StreamNode*> uids;
  for (const auto& node : nodes_) {
    if (node->uid.empty()) continue;
    auto [it, fresh] = uids.emplace(node->uid, node.get());
    if (!fresh) {
      // Two operators may have one name ("Map"): the message says which by
      // their place in the job too.
      const StreamNode& first = *it->second;
      const bool same_name = first.name == node->name;
      return absl::InvalidArgumentError(absl::StrCat(
          "uid '", node->uid, "' is set on both '", first.name, "'",
          same_name ? absl::StrCat(" (operator ", first.id, " of the job)") : std::string(),
          " and '", node->name, "'",
          same_name ? absl::StrCat(" (operator ", node->id, ")") : std::string(),
          ": a uid names one operator"));
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
    int p = node.parallelism > 0 ? node.parallelism : options_.parallelism;
    // reinterpret_as_keyed_stream's check runs in its input operator's
    // subtasks (chained to it), unless a partitioning comes between.
    if (node.max_parallelism_of_consumer && node.parallelism <= 0 && node.inputs.size() == 1) {
      const int from = node.inputs[0].from;
      if (from < i && nodes_[from]->kind != StreamNode::Kind::kVirtual &&
          plan.nodes[from].parallelism > 0) {
        p = plan.nodes[from].parallelism;
      }
    }
    const int max_p = node.max_parallelism > 0       ? node.max_parallelism
                      : options_.max_parallelism > 0 ? options_.max_parallelism
                                                     : DefaultMaxParallelism(p);
    if (absl::Status s = ValidateParallelism(p, max_p); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("operator '", node.name, "': ", s.message()));
    }
    pn.parallelism = p;
    pn.max_parallelism = max_p;
    pn.assigns_timestamps = node.assigns_timestamps;
    pn.aligned = node.aligned;
    pn.alignment_group = node.alignment_group;
    pn.window_contents_on_heap_only = node.window_contents_on_heap_only;
  }
  // A node that takes its consumers' max parallelism: all of them must have
  // the same.
  std::vector<int> taken_from(n, -1);
  for (int j = 0; j < n; ++j) {
    if (!plan.nodes[j].physical()) continue;
    for (const EdgeSpec& e : nodes_[j]->inputs) {
      int from = e.from;
      while (nodes_[from]->kind == StreamNode::Kind::kVirtual && nodes_[from]->inputs.size() == 1)
        from = nodes_[from]->inputs[0].from;
      if (!nodes_[from]->max_parallelism_of_consumer) continue;
      PlanNode& check = plan.nodes[from];
      if (taken_from[from] < 0) {
        check.max_parallelism = plan.nodes[j].max_parallelism;
        taken_from[from] = j;
      } else if (check.max_parallelism != plan.nodes[j].max_parallelism) {
        return absl::InvalidArgumentError(absl::StrCat(
            "operators '", nodes_[taken_from[from]]->name, "' and '", nodes_[j]->name,
            "' consume one keyed stream (", nodes_[from]->name, ") with max parallelism ",
            check.max_parallelism, " and ", plan.nodes[j].max_parallelism,
            ": its key groups are checked for one of them; give both the same"));
      }
    }
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
//    other consumer of it, same parallelism.  With chaining disabled, only
//    from_source's assigner, which is part of its source.
void JobCompiler::Chain(PhysicalPlan& plan) const {
  const int n = static_cast<int>(plan.nodes.size());
  std::vector<int> chained_next(n, -1);
  std::vector<bool> chained_in(n, false);
  for (int i = 0; i < n; ++i) {
    const PlanNode& node = plan.nodes[i];
    if (!options_.chaining && !nodes_[i]->in_source_chain) continue;
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
  // What it restores (SetUpCheckpoints): for the ranks to compare (the id
  // and the directory's name: hosts may mount the directory at other paths),
  // and for the message.
  std::string restored_id = "none";
  std::string restored = "no checkpoint";
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
    // Every rank must have built this very plan and placement, restore the
    // same checkpoint and give the same settings.
    std::string fingerprint = plan.Explain();
    std::vector<std::string> names;
    for (size_t c = 0; c < plan.chains.size(); ++c) {
      names.push_back(plan.chains[c].task_name);
      absl::StrAppend(&fingerprint, "placement ", c, ":", absl::StrJoin(a.rank[c], ","), "\n");
    }
    absl::StrAppend(&fingerprint, "restore: ", a.restored_id,
                    "\nsettings: ", options_.config->rank_settings, "\n");
    a.exchange->SetTaskOrder(std::move(names));
    if (absl::Status s = a.exchange->Open(fingerprint); !s.ok()) {
      if (s.code() != absl::StatusCode::kFailedPrecondition) return s;
      return absl::FailedPreconditionError(
          absl::StrCat(s.message(), " (this rank restores ", a.restored, ")"));
    }
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

// What wiring one subtask builds up; WireSubtask's steps share it.
struct JobCompiler::SubtaskWiring {
  const PhysicalPlan& plan;
  Assembly& a;
  const PlanChain& chain;
  int subtask;
  StreamTask* task;
  WatermarkListener* listener;
  bool reported = false;  // a writer reports the subtask's output watermarks
  // A source task's watermark alignment, which its watermark operator may join.
  SourceAlignment* alignment = nullptr;
  // Set by WireChainOperators: the head operator (null for a source) and its
  // context; a source's output.
  OperatorBase* head_op = nullptr;
  OperatorContext* head_ctx = nullptr;
  OutputBase* source_head = nullptr;
};

// One task: its operators (last to first, each writing to the next one, to
// its network consumers or to both), the writers, and its input (a source, or
// the input gate over its channels).
void JobCompiler::WireSubtask(const PhysicalPlan& plan, Assembly& a, int c, int s) const {
  SubtaskWiring w{plan, a, plan.chains[c], s, a.tasks[c][s], options_.listener};
  const StreamNode& head = *nodes_[w.chain.head];
  if (head.kind == StreamNode::Kind::kSource)
    w.alignment = w.task->EnableAlignment(a.exec->alignment(), w.listener);
  WireChainOperators(w);
  if (head.kind == StreamNode::Kind::kSource) {
    WireSourceInput(w);
  } else if (head.make_two_input_gate) {
    WireTwoInputGate(w);
  } else {
    WireInputGate(w);
  }
}

// Writers for the network consumers of (node, tag), appended to `outs`.
void JobCompiler::AddNetworkOutputs(SubtaskWiring& w, int node_id, const std::string& tag,
                                    const NodeOps* ops, std::vector<OutputBase*>& outs) const {
  const int s = w.subtask;
  for (int e : w.plan.Consumers(node_id, tag)) {
    const PlanEdge& pe = w.plan.edges[e];
    if (pe.chained) continue;
    std::vector<ChannelBase*> list;
    for (ChannelBase* ch : w.a.channels[e][s])
      if (ch != nullptr) list.push_back(ch);
    WriterBase* writer = nullptr;
    EdgeSpec edge{node_id, pe.strategy, pe.partitioner};
    // Errors in the partitioner (a key selector) are the key_by's.
    const char* api = pe.strategy == ShipStrategy::kKeyGroups ? "key_by"
                      : pe.strategy == ShipStrategy::kCustom  ? "partition_custom"
                                                              : "partitioning";
    const std::string blame = absl::StrCat(api, " (", ToString(pe.strategy), " partitioner) into '",
                                           nodes_[pe.to]->name, "'");
    auto out = ops->NewWriter(list, edge, s, w.plan.nodes[pe.to].max_parallelism, w.task,
                              w.listener, !w.reported, blame, &writer);
    w.reported = true;
    outs.push_back(out.get());
    w.task->AddWriter(writer);
    w.task->AddOutputObject(std::move(out));
  }
}

// One output over `outs`: a discarding one when empty, the one, or a fan-out.
OutputBase* JobCompiler::CombineOutputs(SubtaskWiring& w, const NodeOps* ops,
                                        std::vector<OutputBase*>& outs) const {
  if (outs.empty()) {
    auto d = ops->NewDiscard();
    OutputBase* raw = d.get();
    w.task->AddOutputObject(std::move(d));
    return raw;
  }
  if (outs.size() == 1) return outs[0];
  auto f = ops->NewFanOut(outs);
  OutputBase* raw = f.get();
  w.task->AddOutputObject(std::move(f));
  return raw;
}

// The chain's operators, made and wired from the last to the first (each
// writes to the next one, to its network consumers or both; side outputs to
// theirs), then added to the task head first.  A source node ends the walk:
// its output is the source's.
void JobCompiler::WireChainOperators(SubtaskWiring& w) const {
  const int s = w.subtask;
  const int p = w.chain.parallelism;
  std::vector<std::pair<std::unique_ptr<OperatorBase>, OperatorContext*>> ops_rev;
  for (int idx = static_cast<int>(w.chain.nodes.size()) - 1; idx >= 0; --idx) {
    const int id = w.chain.nodes[idx];
    const StreamNode& node = *nodes_[id];
    OutputBase* main = nullptr;
    if (node.out) {
      std::vector<OutputBase*> outs;
      if (w.head_op != nullptr) {
        auto co = node.out->NewChainOutput(w.head_op, w.head_ctx);
        outs.push_back(co.get());
        w.task->AddOutputObject(std::move(co));
      }
      AddNetworkOutputs(w, id, "", node.out.get(), outs);
      main = CombineOutputs(w, node.out.get(), outs);
    }
    if (node.kind == StreamNode::Kind::kSource) {
      w.source_head = main;
      break;
    }
    std::unique_ptr<OperatorBase> op = node.make_operator_on_rocksdb &&
                                               options_.config != nullptr &&
                                               options_.config->state_backend.is_rocksdb()
                                           ? node.make_operator_on_rocksdb()
                                           : node.make_operator();
    op->set_output(main);
    for (auto& [tag, side_ops] : node.side_outs) {
      std::vector<OutputBase*> outs;
      AddNetworkOutputs(w, id, tag, side_ops.get(), outs);
      if (!outs.empty()) op->set_side_output(tag, CombineOutputs(w, side_ops.get(), outs));
    }
    OperatorContext* ctx = w.task->AddContext(std::make_unique<OperatorContext>(
        node.name, s, p, w.plan.nodes[id].max_parallelism, w.task->metrics(), &w.task->timers(),
        options_.config, w.listener));
    ctx->set_source_alignment(w.alignment);
    w.head_op = op.get();
    w.head_ctx = ctx;
    ops_rev.emplace_back(std::move(op), ctx);
  }
  for (auto it = ops_rev.rbegin(); it != ops_rev.rend(); ++it)
    w.task->AddOperator(std::move(it->first), it->second);
}

// A source task's input: the source, writing to the chain's head.
void JobCompiler::WireSourceInput(SubtaskWiring& w) const {
  const StreamNode& head = *nodes_[w.chain.head];
  SourceBuildArgs args{
      w.source_head,     SourceContext{w.subtask, w.chain.parallelism, options_.clock},
      head.name,         w.task->signals(),
      w.task->metrics(), options_.config->batch_size};
  args.head_op = w.head_op;
  args.alignment = w.alignment;
  w.task->SetInput(head.make_source(args));
}

namespace {
// Each input channel's queue into the subtask's metrics (gate order), for
// back-pressure: read lock-free by whoever snapshots the metrics.
void PublishQueues(SubtaskMetrics* m, const std::vector<ChannelBase*>& channels, int first) {
  for (size_t i = 0; i < channels.size(); ++i) {
    const int c = first + static_cast<int>(i);
    if (c >= m->num_input_channels()) return;
    m->channel(c).queued = channels[i]->size_counter();
    m->channel(c).capacity = channels[i]->capacity();
  }
}
}  // namespace

// A two-input head's gate over the subtask's channels of each input.
void JobCompiler::WireTwoInputGate(SubtaskWiring& w) const {
  const StreamNode& head = *nodes_[w.chain.head];
  TwoInputGateArgs args{{}, {}, w.head_op, w.head_ctx, w.task, w.listener};
  for (int e : w.plan.nodes[w.chain.head].inputs) {
    auto& list = w.plan.edges[e].gate_input == 0 ? args.first : args.second;
    for (auto& row : w.a.channels[e])
      if (row[w.subtask] != nullptr) list.push_back(row[w.subtask]);
  }
  PublishQueues(w.task->metrics(), args.first, 0);
  PublishQueues(w.task->metrics(), args.second, static_cast<int>(args.first.size()));
  w.task->SetInput(head.make_two_input_gate(args));
}

// A one-input head's gate over the subtask's channels of every input edge.
void JobCompiler::WireInputGate(SubtaskWiring& w) const {
  const std::vector<int>& inputs = w.plan.nodes[w.chain.head].inputs;
  std::vector<ChannelBase*> in;
  for (int e : inputs) {
    for (auto& row : w.a.channels[e])
      if (row[w.subtask] != nullptr) in.push_back(row[w.subtask]);
  }
  PublishQueues(w.task->metrics(), in, 0);
  const NodeOps* in_ops = EdgeOps(w.plan.edges[inputs[0]]);
  auto head_out = in_ops->NewChainOutput(w.head_op, w.head_ctx);
  OutputBase* head_raw = head_out.get();
  w.task->AddOutputObject(std::move(head_out));
  w.task->SetInput(in_ops->NewInputGate(in, head_raw, w.task, w.listener));
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

// The tasks upstream of chain c's input edges, in the order of its input
// gate's channels: with their parallelisms they lay out its channels, which
// an unaligned checkpoint's channel state is stored by.
std::string ChainInputs(const PhysicalPlan& plan, size_t c) {
  std::vector<int> ups;
  for (int e : plan.nodes[plan.chains[c].head].inputs)
    ups.push_back(plan.nodes[plan.edges[e].from].chain);
  return absl::StrJoin(ups, ",");
}

// The metadata every checkpoint's manifest carries: the task count, and each
// task's name, parallelism, max parallelism, (when every operator has one)
// uids and (when it has inputs) the tasks upstream of them.
std::map<std::string, std::string> CheckpointMetadata(const PhysicalPlan& plan) {
  std::map<std::string, std::string> metadata;
  metadata["job.tasks"] = absl::StrCat(plan.chains.size());
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    metadata[absl::StrCat("task.", c, ".name")] = plan.chains[c].task_name;
    metadata[absl::StrCat("task.", c, ".parallelism")] = absl::StrCat(plan.chains[c].parallelism);
    metadata[absl::StrCat("task.", c, ".max_parallelism")] = ChainMaxParallelism(plan, c);
    const std::string uids = ChainUids(plan, c);
    if (!uids.empty()) metadata[absl::StrCat("task.", c, ".uids")] = uids;
    if (const std::string inputs = ChainInputs(plan, c); !inputs.empty())
      metadata[absl::StrCat("task.", c, ".inputs")] = inputs;
  }
  return metadata;
}

// The checkpoint to restore from (config.restore_from: "latest" in
// `storage`, or a checkpoint's directory), or none.  `problems` collects what
// was wrong with the checkpoints "latest" skipped.
absl::StatusOr<std::optional<LoadedCheckpoint>> LoadCheckpointToRestore(
    const JobConfig& config, CheckpointStorage* storage, std::vector<std::string>* problems) {
  if (config.restore_from == "latest") {
    if (storage == nullptr) {
      return absl::InvalidArgumentError(
          "restoring from the latest checkpoint needs a checkpoint directory");
    }
    absl::StatusOr<LoadedCheckpoint> loaded = storage->LoadLatest(problems);
    if (loaded.ok()) return std::optional<LoadedCheckpoint>(*std::move(loaded));
    // No checkpoint was ever completed (none, or only ones a crash cut
    // short): the job starts fresh.  Complete ones that are all damaged
    // are an error: starting fresh would redo output already committed.
    for (int64_t id : storage->ListCheckpointIds()) {
      if (storage->IsComplete(id)) {
        return absl::DataLossError(absl::StrCat("no usable checkpoint in ", config.checkpoint_dir,
                                                ": ", absl::StrJoin(*problems, "; ")));
      }
    }
    return std::optional<LoadedCheckpoint>();
  }
  if (!config.restore_from.empty()) {
    CheckpointStorage reader(config.restore_from);
    absl::StatusOr<LoadedCheckpoint> loaded = reader.Load(config.restore_from);
    if (!loaded.ok()) return loaded.status();
    return std::optional<LoadedCheckpoint>(*std::move(loaded));
  }
  return std::optional<LoadedCheckpoint>();
}

// Restored from an older checkpoint of the job's own directory: the ones
// after it are set aside (CheckpointStorage::AbandonAfter), so that the
// restored job's line is what "latest" finds; each is named in the notices.
absl::Status AbandonLaterCheckpoints(const LoadedCheckpoint& restore, CheckpointStorage& storage,
                                     JobExecution& exec) {
  std::error_code ec1, ec2;
  const std::filesystem::path restored_dir =
      std::filesystem::weakly_canonical(restore.path.parent_path(), ec1);
  const std::filesystem::path own_dir = std::filesystem::weakly_canonical(storage.dir(), ec2);
  if (ec1 || ec2 || restored_dir != own_dir) return absl::OkStatus();
  absl::StatusOr<std::vector<std::string>> abandoned = storage.AbandonAfter(restore.id);
  if (!abandoned.ok()) return abandoned.status();
  for (std::string& line : *abandoned) exec.Notice(std::move(line));
  return absl::OkStatus();
}

// The id of the job's first checkpoint: after every id in `storage` and the
// restored one.
int64_t FirstCheckpointId(const CheckpointStorage* storage,
                          const std::optional<LoadedCheckpoint>& restore) {
  int64_t first_id = 1;
  if (storage != nullptr) {
    for (int64_t id : storage->ListCommittedIds()) first_id = std::max(first_id, id + 1);
  }
  if (restore) first_id = std::max(first_id, restore->id + 1);
  return first_id;
}

// A checkpoint being restored, as the steps below read it.
struct RestoreSource {
  const LoadedCheckpoint& checkpoint;
  std::string where;  // "checkpoint N (PATH)", for errors
  // Its metadata entry `k`, "" when absent.
  std::string Meta(const std::string& k) const {
    auto it = checkpoint.metadata.find(k);
    return it == checkpoint.metadata.end() ? "" : it->second;
  }
};

// Which old task each task restores from.
struct TaskMatch {
  int old_tasks = 0;
  std::vector<int> from;     // [chain]: its old task, -1: none (it starts fresh)
  std::vector<bool> by_uid;  // [chain]: matched by its operators' uids
};

// Which old task each task restores from (-1: none, it starts fresh).  A
// task whose operators all have uids is matched by them, wherever it is in
// either job; one whose uids are not in the checkpoint is new and starts
// fresh.  Any other task is matched by its index, and then the two jobs must
// have as many tasks (the names are checked by OldParallelisms).  No old task
// may be restored twice.
absl::StatusOr<TaskMatch> MatchRestoredTasks(const PhysicalPlan& plan, const RestoreSource& rs,
                                             const std::string& job_tasks) {
  TaskMatch m;
  if (!absl::SimpleAtoi(rs.Meta("job.tasks"), &m.old_tasks) || m.old_tasks < 0) {
    return absl::DataLossError(absl::StrCat(rs.where, ": no valid task count"));
  }
  std::map<std::string, int> old_by_uids;
  for (int k = 0; k < m.old_tasks; ++k) {
    const std::string u = rs.Meta(absl::StrCat("task.", k, ".uids"));
    if (!u.empty()) old_by_uids.emplace(u, k);
  }
  m.from.assign(plan.chains.size(), -1);
  m.by_uid.assign(plan.chains.size(), false);
  bool all_by_uid = true;
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const std::string u = ChainUids(plan, c);
    if (u.empty()) {
      all_by_uid = false;
      m.from[c] = static_cast<int>(c);
    } else {
      m.by_uid[c] = true;
      auto it = old_by_uids.find(u);
      if (it != old_by_uids.end()) m.from[c] = it->second;
    }
  }
  if (!all_by_uid && rs.Meta("job.tasks") != job_tasks) {
    return absl::FailedPreconditionError(absl::StrCat(rs.where, " has ", rs.Meta("job.tasks"),
                                                      " tasks, the job ", job_tasks,
                                                      ": it was taken of another job"));
  }
  std::vector<bool> restored(static_cast<size_t>(m.old_tasks), false);
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    if (m.from[c] < 0) continue;
    if (restored[m.from[c]]) {
      return absl::FailedPreconditionError(
          absl::StrCat(rs.where, ": its task ", m.from[c], " would be restored twice (to '",
                       plan.chains[c].task_name, "'): give every operator of the job a uid"));
    }
    restored[m.from[c]] = true;
  }
  return m;
}

// An old task nobody restores is fine when it had no state (Flink's
// savepoints hold no stateless operators); otherwise its state would be
// lost, and that is an error.
absl::Status CheckNoStateLost(const PhysicalPlan& plan, const TaskMatch& m, const RestoreSource& rs,
                              bool allow_lost, std::vector<std::string>* skipped) {
  // The job's uids, and the chain of each.
  std::map<std::string, size_t> job_uids;
  for (size_t c = 0; c < plan.chains.size(); ++c)
    for (int id : plan.chains[c].nodes)
      if (!plan.nodes[id].uid.empty()) job_uids.emplace(plan.nodes[id].uid, c);
  std::vector<bool> restored(static_cast<size_t>(m.old_tasks), false);
  for (int k : m.from)
    if (k >= 0) restored[k] = true;
  for (int k = 0; k < m.old_tasks; ++k) {
    if (restored[k]) continue;
    int old_pk = 0;
    (void)absl::SimpleAtoi(rs.Meta(absl::StrCat("task.", k, ".parallelism")), &old_pk);
    // Which of its operators had state in any subtask (a missing file: all
    // of them, said so later); a source's position and records in flight
    // (an unaligned checkpoint's channel state, state too as in Flink's
    // OperatorSubtaskState#hasState) are its head's.
    bool all_stateful = false;
    std::vector<bool> op_stateful;
    for (int s = 0; s < old_pk && !all_stateful; ++s) {
      const std::string file = SubtaskStateFileName(k, s);
      auto it = rs.checkpoint.states.find(file);
      if (it == rs.checkpoint.states.end()) {
        all_stateful = true;
        break;
      }
      absl::StatusOr<SubtaskSnapshot> snap =
          DecodeSubtaskSnapshot(it->second, absl::StrCat(rs.where, ": ", file));
      if (!snap.ok()) return snap.status();
      op_stateful.resize(std::max(op_stateful.size(), std::max<size_t>(snap->operators.size(), 1)));
      if (snap->has_source || !snap->channel_state.empty()) op_stateful[0] = true;
      for (size_t j = 0; j < snap->operators.size(); ++j)
        if (!snap->operators[j].state.empty()) op_stateful[j] = true;
    }
    auto had_state = [&](size_t j) {
      return all_stateful || (j < op_stateful.size() && op_stateful[j]);
    };
    bool stateful = all_stateful;
    for (size_t j = 0; j < op_stateful.size(); ++j) stateful = stateful || op_stateful[j];
    if (!stateful) continue;
    const std::string u = rs.Meta(absl::StrCat("task.", k, ".uids"));
    const std::string task =
        absl::StrCat("its task '", rs.Meta(absl::StrCat("task.", k, ".name")), "'",
                     u.empty() ? std::string() : absl::StrCat(" (uids ", u, ")"));
    // Operators of that task with state, still in the job, chained
    // otherwise: state is matched per task (chain), so theirs would be
    // lost, never to be skipped, even with --allow-non-restored-state
    // (Flink matches per operator and would restore them).  A stateless one
    // still in the job loses nothing.
    std::vector<std::string> still;
    std::vector<std::string> now_in;
    const std::vector<std::string> old_uids = absl::StrSplit(u, ',', absl::SkipEmpty());
    for (size_t j = 0; j < old_uids.size(); ++j) {
      const std::string& uid = old_uids[j];
      auto it = job_uids.find(uid);
      if (it == job_uids.end() || !had_state(j)) continue;
      still.push_back(uid);
      const std::string chain_uids = ChainUids(plan, it->second);
      now_in.push_back(absl::StrCat(
          "'", plan.chains[it->second].task_name, "'",
          chain_uids.empty() ? std::string() : absl::StrCat(" (uids ", chain_uids, ")")));
    }
    if (!still.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          rs.where, ": ", task, " is chained otherwise in the job: its operators with state (",
          absl::StrJoin(still, ", "), ") are now in ", absl::StrJoin(now_in, ", "),
          ". State is matched per task (chain), not per operator as in Flink "
          "(docs/checkpoints.md), so their state would be lost: restore with the chains as "
          "they were (a job meant to change can run with disable_operator_chaining(), one "
          "operator to a task)"));
    }
    if (allow_lost) {
      // Flink's allowNonRestoredState: skipped, and said.
      skipped->push_back(absl::StrCat(rs.where, ": ", task,
                                      " is not in the job: its state was not restored "
                                      "(--allow-non-restored-state)"));
      continue;
    }
    return absl::FailedPreconditionError(absl::StrCat(
        rs.where, ": ", task,
        " is not in the job: its state would be lost (restore anyway, without it, with "
        "--allow-non-restored-state / set_allow_non_restored_state)"));
  }
  return absl::OkStatus();
}

// Every restored task's parallelism in the checkpoint ([chain]; 0 for a new
// task), checked before any state is handed out (a task's input state is
// restored only where no task upstream was rescaled either): the names of
// tasks matched by index agree, the max parallelism is unchanged (key groups
// are fixed by it), and no source task is rescaled.
absl::StatusOr<std::vector<int>> OldParallelisms(const PhysicalPlan& plan, const TaskMatch& m,
                                                 const RestoreSource& rs) {
  std::vector<int> old_p(plan.chains.size());
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const PlanChain& chain = plan.chains[c];
    const int k = m.from[c];
    if (k < 0) continue;
    const std::string name = rs.Meta(absl::StrCat("task.", k, ".name"));
    if (!m.by_uid[c] && name != chain.task_name) {
      return absl::FailedPreconditionError(absl::StrCat(
          rs.where, ": task ", c, " is '", name, "' there and '", chain.task_name,
          "' in the job: a task without a uid on each of its operators is matched by its index "
          "and name, and state is matched per task (chain), not per operator as in Flink "
          "(docs/checkpoints.md): restore with the job's tasks as they were, or give every "
          "operator of the changed tasks a uid"));
    }
    const std::string p = rs.Meta(absl::StrCat("task.", k, ".parallelism"));
    if (!absl::SimpleAtoi(p, &old_p[c]) || old_p[c] <= 0) {
      return absl::DataLossError(absl::StrCat(rs.where, ": task '", chain.task_name,
                                              "' has no valid parallelism ('", p, "')"));
    }
    // Key groups are fixed by the max parallelism: changing it would move
    // keys to groups (and subtasks) other than their state's.  Checkpoints
    // that predate the entry are not checked.
    const std::string max_p = rs.Meta(absl::StrCat("task.", k, ".max_parallelism"));
    if (!max_p.empty() && max_p != ChainMaxParallelism(plan, c)) {
      return absl::FailedPreconditionError(
          absl::StrCat(rs.where, ": task '", chain.task_name, "' ran with max parallelism ", max_p,
                       ", the job has ", ChainMaxParallelism(plan, c),
                       "; keyed state cannot move to other key groups"));
    }
    if (old_p[c] != chain.parallelism && plan.nodes[chain.head].kind == StreamNode::Kind::kSource) {
      return absl::UnimplementedError(absl::StrCat(
          rs.where, ": task '", chain.task_name, "' ran at parallelism ", old_p[c],
          ", the job has ", chain.parallelism,
          "; a source task cannot be restored at another parallelism (its positions are per "
          "subtask)"));
    }
  }
  return old_p;
}

// Hands every subtask of each restored task (`tasks`: [chain][subtask], null
// on other ranks) its old task's snapshots, decoded.
absl::Status HandOutRestoreStates(const PhysicalPlan& plan, const TaskMatch& m,
                                  const std::vector<int>& old_p, const RestoreSource& rs,
                                  const std::vector<std::vector<StreamTask*>>& tasks) {
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const PlanChain& chain = plan.chains[c];
    if (m.from[c] < 0) continue;  // a new task: starts fresh
    auto old = std::make_shared<std::vector<SubtaskSnapshot>>();
    for (int s = 0; s < old_p[c]; ++s) {
      const std::string file = SubtaskStateFileName(m.from[c], s);
      auto it = rs.checkpoint.states.find(file);
      if (it == rs.checkpoint.states.end()) {
        return absl::DataLossError(absl::StrCat(rs.where, ": ", file, " is missing"));
      }
      absl::StatusOr<SubtaskSnapshot> snap =
          DecodeSubtaskSnapshot(it->second, absl::StrCat(rs.where, ": ", file));
      if (!snap.ok()) return snap.status();
      old->push_back(*std::move(snap));
    }
    SubtaskRestore r;
    r.checkpoint_id = rs.checkpoint.id;
    r.old_parallelism = old_p[c];
    r.old = std::move(old);
    r.matched_by_uid = m.by_uid[c];
    r.restore_input = old_p[c] == chain.parallelism;
    // A source's position, or an input gate's channels: the latter only
    // where the task's channels are laid out as they were: the same tasks
    // upstream, in the same order, at their old parallelism (else its input
    // starts as a rescaled one: the lowest old watermark).  Checkpoints
    // written before the upstream tasks were recorded: the task and its
    // upstream tasks at their old indices.
    const std::vector<int>& edges = plan.nodes[chain.head].inputs;
    if (!edges.empty()) {
      const std::string recorded = rs.Meta(absl::StrCat("task.", m.from[c], ".inputs"));
      std::vector<int> mapped;
      for (int e : edges) {
        const int up = plan.nodes[plan.edges[e].from].chain;
        mapped.push_back(m.from[up]);
        if (m.from[up] < 0 || old_p[up] != plan.chains[up].parallelism) r.restore_input = false;
        if (recorded.empty() && m.from[up] != up) r.restore_input = false;
      }
      if (recorded.empty() ? m.from[c] != static_cast<int>(c)
                           : recorded != absl::StrJoin(mapped, ","))
        r.restore_input = false;
    }
    // Records in flight can only go back into the channels they were in:
    // refused before the job starts (docs/checkpoints.md, "Not done").
    if (!r.restore_input && !edges.empty()) {
      for (size_t k = 0; k < r.old->size(); ++k) {
        if ((*r.old)[k].channel_state.empty()) continue;
        return absl::FailedPreconditionError(absl::StrCat(
            rs.where, ": task '", chain.task_name, "', old subtask ", k,
            ", has channel state (records in flight, stored by an unaligned checkpoint), which "
            "cannot be restored where this task's input channels changed (its parallelism, or "
            "the tasks upstream of it or their parallelism; rescaling with channel state is not "
            "done: restore at the same parallelism, or from a savepoint, which is aligned)"));
      }
    }
    for (StreamTask* t : tasks[c])
      if (t != nullptr) t->SetRestoreState(r);
  }
  return absl::OkStatus();
}

// Restoring (docs/checkpoints.md): matches the job's tasks to the
// checkpoint's, checks that no state is lost and that every task can take its
// old state, then hands it out.  `job_tasks`: the job's task count as the
// metadata writes it.
absl::Status AssignRestoreStates(const PhysicalPlan& plan, const LoadedCheckpoint& checkpoint,
                                 const std::string& job_tasks, bool allow_non_restored_state,
                                 std::vector<std::string>* notices,
                                 const std::vector<std::vector<StreamTask*>>& tasks) {
  auto type = checkpoint.metadata.find("type");
  const bool savepoint = type != checkpoint.metadata.end() && type->second == "savepoint";
  const RestoreSource rs{checkpoint,
                         absl::StrCat(savepoint ? "savepoint " : "checkpoint ", checkpoint.id, " (",
                                      checkpoint.path.string(), ")")};
  absl::StatusOr<TaskMatch> match = MatchRestoredTasks(plan, rs, job_tasks);
  if (!match.ok()) return match.status();
  if (absl::Status s = CheckNoStateLost(plan, *match, rs, allow_non_restored_state, notices);
      !s.ok())
    return s;
  absl::StatusOr<std::vector<int>> old_p = OldParallelisms(plan, *match, rs);
  if (!old_p.ok()) return old_p.status();
  return HandOutRestoreStates(plan, *match, *old_p, rs, tasks);
}

}  // namespace

// Every subtask takes part: a local one reports to the coordinator (on rank
// 0) or to the exchange (on the other ranks, which relays to rank 0); on rank
// 0 a subtask of another rank is represented by the exchange's stand-in.
void JobCompiler::ConnectCheckpointParticipants(const PhysicalPlan& plan, Assembly& a,
                                                CheckpointCoordinator* coordinator) const {
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const bool source = plan.nodes[plan.chains[c].head].kind == StreamNode::Kind::kSource;
    for (int s = 0; s < plan.chains[c].parallelism; ++s) {
      StreamTask* t = a.tasks[c][s];
      if (t != nullptr) {
        CheckpointAcknowledger* ack = coordinator != nullptr
                                          ? static_cast<CheckpointAcknowledger*>(coordinator)
                                          : a.exchange.get();
        t->EnableCheckpoints(ack, static_cast<int>(c), options_.listener);
        if (a.exchange) a.exchange->AddLocalTask(static_cast<int>(c), s, t);
        if (coordinator != nullptr) coordinator->AddTask(t, static_cast<int>(c), s);
      } else if (coordinator != nullptr) {
        coordinator->AddTask(
            a.exchange->AddRemoteTask(a.rank[c][s], static_cast<int>(c), s, source),
            static_cast<int>(c), s);
      }
    }
  }
}

// 7. Checkpoints: the coordinator, and the state each task starts from.
// Restoring at another parallelism (docs/checkpoints.md, "Rescaling"): every
// new subtask is handed all of its task's old snapshots and its operators
// pick theirs (StreamTask::Restore); source tasks cannot be rescaled.
absl::Status JobCompiler::SetUpCheckpoints(const PhysicalPlan& plan, Assembly& a) const {
  const JobConfig& config = *options_.config;
  if (config.unaligned_checkpoints && options_.cluster.size > 1) {
    return absl::UnimplementedError(
        "unaligned checkpoints are not supported across MPI ranks (the channel state of the "
        "channels between ranks is not captured): use aligned checkpoints under mpirun");
  }
  std::unique_ptr<CheckpointStorage> storage;
  if (!config.checkpoint_dir.empty()) {
    storage = std::make_unique<CheckpointStorage>(config.checkpoint_dir,
                                                  std::max(1, config.checkpoints_retained));
    storage->set_incremental(config.incremental_checkpoints);
    // Created and checked before the job starts (rank 0 writes every
    // checkpoint): an unusable directory is an error now, not a failed
    // checkpoint later.
    if (options_.cluster.rank == 0) {
      if (absl::Status s = storage->CheckWritable(); !s.ok()) return s;
    }
  }
  std::map<std::string, std::string> metadata = CheckpointMetadata(plan);
  std::vector<std::string> problems;
  absl::StatusOr<std::optional<LoadedCheckpoint>> loaded =
      LoadCheckpointToRestore(config, storage.get(), &problems);
  if (!loaded.ok()) return loaded.status();
  std::optional<LoadedCheckpoint>& restore = *loaded;
  if (restore) {
    std::error_code ec;
    std::filesystem::path where = std::filesystem::weakly_canonical(restore->path, ec);
    if (ec) where = restore->path;
    a.restored = absl::StrCat("checkpoint ", restore->id, " of ", where.string());
    a.restored_id = absl::StrCat(restore->id, " ", where.filename().string());
  }
  if (restore && storage && options_.cluster.rank == 0) {
    if (absl::Status s = AbandonLaterCheckpoints(*restore, *storage, *a.exec); !s.ok()) return s;
  }
  const int64_t first_id = FirstCheckpointId(storage.get(), restore);

  // Ids go on after the checkpoints this job's storage wrote (a valid
  // manifest, FirstCheckpointId): a stray chk-999999 or chk-abc neither
  // shifts them nor counts toward retention; it is named in the notices.
  if (storage) {
    for (std::string& line : storage->StrayEntries()) a.exec->Notice(std::move(line));
  }
  // Across ranks the coordinator runs on rank 0 and writes every checkpoint;
  // the other ranks' subtasks reach it through the exchange, which stands in
  // for them there and relays their snapshots to it (mpi_exchange.h).
  std::unique_ptr<CheckpointCoordinator> coordinator;
  if (options_.cluster.rank == 0) {
    coordinator = std::make_unique<CheckpointCoordinator>(config.checkpoint_interval,
                                                          std::move(storage), metadata, first_id);
    JobExecution* exec = a.exec.get();  // owns the coordinator
    coordinator->SetFailurePolicy(config.tolerable_failed_checkpoints, config.checkpoint_timeout,
                                  config.on_checkpoint_failed,
                                  [exec](const absl::Status& s) { exec->Fail(s); });
    if (a.exchange) a.exchange->SetCoordinator(coordinator.get());
  }
  ConnectCheckpointParticipants(plan, a, coordinator.get());

  if (restore) {
    std::vector<std::string> skipped;
    if (absl::Status s = AssignRestoreStates(plan, *restore, metadata["job.tasks"],
                                             config.allow_non_restored_state, &skipped, a.tasks);
        !s.ok()) {
      return s;
    }
    for (std::string& line : skipped) a.exec->Notice(std::move(line));
  }
  a.exec->EnableCheckpoints(std::move(coordinator), restore ? restore->id : -1,
                            restore ? restore->path.string() : std::string(), std::move(problems));
  return absl::OkStatus();
}

}  // namespace tidemark::internal
