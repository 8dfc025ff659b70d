// runtime/exec/job_compiler.h
//
// The job compiler: turns the logical graph the fluent API builds (StreamNode,
// runtime/task/detail/job_graph.h) into a PhysicalPlan that can be inspected and printed,
// and the plan into a runnable JobExecution.  Steps, in order:
//
//   1. ResolveParallelism - each source/operator gets its parallelism (its own,
//      else the environment's) and max parallelism (its own, else the
//      environment's, else Flink's default for the parallelism:
//      DefaultMaxParallelism, 128 for parallelism <= 85).
//   2. ResolveEdges       - physical edges between sources/operators, looking
//      through virtual nodes (union, partitioning) and side-output nodes; the
//      default ship strategy becomes FORWARD when both sides have the same
//      parallelism, else REBALANCE (Flink's rule); an explicit forward() between
//      different parallelisms is INVALID_ARGUMENT.
//   3. Chain              - an operator is chained to its upstream (same task,
//      direct calls, no channel) when chaining is on and it has exactly one
//      input, that input is the upstream's main output (not a side output),
//      shipped FORWARD, the upstream's main output has no other consumer, and
//      both have the same parallelism.  Sources are always chain heads.
//   4. CreateTasks        - one StreamTask per chain and subtask.
//   5. CreateChannels     - per network edge, one channel per pair of
//      upstream/downstream subtasks (FORWARD: only u == d).
//   6. Wire               - operators, chain outputs, writers and input gates.
//   7. Checkpoints        - the coordinator, and what each task restores.
// Across ranks (options.cluster, runtime/exec/cluster.h), step 4 starts by placing
// every subtask on a rank and makes only this rank's; a channel whose ends are
// on different ranks is made on both, as a local queue that the job's
// MpiExchange drains or fills (runtime/cluster/mpi_exchange.h).
//
// Steps 1-3 (Plan()) touch nothing at run time; StreamExecutionEnvironment's
// ExplainPlan() prints their result (PhysicalPlan::Explain, format below).
#ifndef TM_RUNTIME_JOB_COMPILER_H_
#define TM_RUNTIME_JOB_COMPILER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tidemark/runtime/exec/executor.h"
#include "tidemark/runtime/task/detail/job_graph.h"

namespace tidemark::internal {

// What the compiler needs from the environment besides the graph.
struct JobCompilerOptions {
  int parallelism = 1;      // default parallelism
  int max_parallelism = 0;  // 0: Flink's default per operator
  bool chaining = true;     // false: disable_operator_chaining()
  int worker_threads = 1;
  // Must outlive the JobExecution (the environment owns them).
  const JobConfig* config = nullptr;
  const Clock* clock = nullptr;
  WatermarkListener* listener = nullptr;
  // The ranks the job runs on (runtime/exec/cluster.h) and where each subtask
  // goes (null: ModuloPlacement).  With more than one rank, Build() makes
  // only this rank's tasks; channels to and from other ranks go through an
  // MpiExchange.
  ClusterInfo cluster;
  PlacementFunction placement;
};

// One logical node.  Virtual and side-output nodes have no physical presence:
// parallelism 0, chain -1.
struct PlanNode {
  int id = -1;
  std::string name;
  std::string uid;  // empty: none
  StreamNode::Kind kind = StreamNode::Kind::kOperator;
  int parallelism = 0;
  int max_parallelism = 0;
  std::vector<int> inputs;                    // indices into PhysicalPlan::edges, in input order
  int chain = -1;                             // index into PhysicalPlan::chains
  int position = -1;                          // position in that chain (0: the head)
  bool assigns_timestamps = false;            // StreamNode::assigns_timestamps
  bool aligned = false;                       // StreamNode::aligned
  std::string alignment_group;                // StreamNode::alignment_group
  bool window_contents_on_heap_only = false;  // StreamNode's

  bool physical() const {
    return kind == StreamNode::Kind::kSource || kind == StreamNode::Kind::kOperator;
  }
};

// One physical input of a source/operator.
struct PlanEdge {
  int from = -1;       // producing node (source/operator)
  int to = -1;         // consuming node (operator)
  int input = 0;       // index among `to`'s inputs
  int gate_input = 0;  // the logical input of a two-input operator it feeds (0 or 1)
  std::string tag;     // side output tag; "" for the main output
  ShipStrategy strategy = ShipStrategy::kForward;  // resolved: never kDefault
  // The key_by (kKeyGroups) or partition_custom (kCustom) partitioner.
  std::shared_ptr<PartitionerFactoryBase> partitioner;
  bool chained = false;  // inside a chain: no channels
  // Channels of a network edge: FORWARD p, RESCALE max(p(from), p(to)),
  // otherwise p(from) * p(to); 0 when chained.
  int channels = 0;
};

// One chain of operators, run as `parallelism` tasks.
struct PlanChain {
  int head = -1;
  std::vector<int> nodes;  // head first
  int parallelism = 0;
  std::string task_name;  // node names joined by " -> "
  // The most channels one of its tasks reads (FORWARD inputs 1, RESCALE
  // inputs a few, others p(from); partitioning/partitioner.h Connected).
  int input_channels = 0;
};

struct PhysicalPlan {
  std::vector<PlanNode> nodes;    // by logical node id
  std::vector<PlanEdge> edges;    // by consumer id, then input index
  std::vector<PlanChain> chains;  // by head id
  // Edges (indices) reading the output `tag` ("" main) of a node, in order.
  std::map<std::pair<int, std::string>, std::vector<int>> consumers;

  const std::vector<int>& Consumers(int node, const std::string& tag) const;
  // Indices of the edges that are not chained, in order.
  std::vector<int> NetworkEdges() const;
  int TaskCount() const;

  // The plan as text, one line per chain, then one per network edge:
  //
  //   Chain 0 "Source: A -> Map" p=1 maxP=128, tasks: Source: A -> Map (0/1)
  //   Chain 1 "Window(...) -> Sink" p=2 maxP=128, tasks: Window(...) -> Sink (0/2), (1/2)
  //   Edge 0: Map (p=1) --HASH(key groups, maxP=128)--> Window(...) (p=2), 2 channel(s)
  //   Edge 1: Window(...) (p=2) side output 'late' --FORWARD--> Late sink (p=2), 2 channel(s)
  //
  // Chains are numbered by head node id; tasks are "name (subtask/parallelism)",
  // subtasks counted from 0 as in error messages; maxP is the max parallelism,
  // one value per chain node ("maxP=[128, 256]") when they differ.  Edges are
  // numbered in the order of their consumers; the partitioning is FORWARD,
  // REBALANCE, BROADCAST, HASH(key groups, maxP=N) (key_by; N: the consumer's
  // max parallelism, the number of key groups) or CUSTOM(partitioner)
  // (partition_custom).  Chained edges have no line of their own: they are
  // the " -> " in the chain's name.  Then one line "Warning: ..." per
  // AssignerWarnings().
  std::string Explain() const;
  // One sentence per timestamp/watermark assigner with a non-forward edge
  // (REBALANCE, HASH, ...) between it and a source: records of several
  // source subtasks (or in another order) reach its generators, so their
  // watermarks, and what is late, differ from a generator in the source
  // subtask (Flink's fromSource), which is what the sentence recommends.
  // Then one per assigner with watermark alignment outside a source's task
  // (it joins no group), and one per alignment group of a single source
  // subtask (nothing to pause).
  std::vector<std::string> AssignerWarnings() const;
  // On the RocksDB state backend: one sentence per window operator that
  // keeps its contents on the heap because the code that built it was
  // compiled without TIDEMARK_ROCKSDB_WINDOWS
  // (StreamNode::window_contents_on_heap_only), naming it and what to link.
  // Empty on the heap backend.
  std::vector<std::string> StateBackendWarnings(const StateBackend& backend) const;
};

class JobCompiler {
 public:
  // `nodes` (indexed by id) and the option pointers must outlive the compiler.
  JobCompiler(const std::vector<std::unique_ptr<StreamNode>>& nodes, JobCompilerOptions options);

  // Steps 1-3 and the checks that need them; INVALID_ARGUMENT for an invalid
  // graph.
  absl::StatusOr<PhysicalPlan> Plan() const;
  // Plan() and steps 4-6.
  absl::StatusOr<std::shared_ptr<JobExecution>> Compile() const;
  // Steps 4-7 over a plan made by Plan() (7 fails when the checkpoint to
  // restore from cannot be read or does not match the job).
  absl::StatusOr<std::shared_ptr<JobExecution>> Build(const PhysicalPlan& plan) const;

  // --- the steps, for tests ---
  absl::Status ResolveParallelism(PhysicalPlan& plan) const;
  absl::Status ResolveEdges(PhysicalPlan& plan) const;
  void Chain(PhysicalPlan& plan) const;
  // Every network edge's producer has an output of that edge's element type.
  absl::Status CheckOutputs(const PhysicalPlan& plan) const;

 private:
  struct Assembly;
  absl::Status ResolveInput(const EdgeSpec& e, ShipStrategy s,
                            std::shared_ptr<PartitionerFactoryBase> part,
                            std::vector<PlanEdge>& out) const;
  const NodeOps* EdgeOps(const PlanEdge& e) const;
  void CreateTasks(const PhysicalPlan& plan, Assembly& a) const;
  void CreateChannels(const PhysicalPlan& plan, Assembly& a) const;
  void Wire(const PhysicalPlan& plan, Assembly& a) const;
  // 6, per subtask: WireChainOperators, then its input (WireSourceInput,
  // WireTwoInputGate or WireInputGate).
  struct SubtaskWiring;
  void WireSubtask(const PhysicalPlan& plan, Assembly& a, int chain, int subtask) const;
  void WireChainOperators(SubtaskWiring& w) const;
  void AddNetworkOutputs(SubtaskWiring& w, int node_id, const std::string& tag, const NodeOps* ops,
                         std::vector<OutputBase*>& outs) const;
  OutputBase* CombineOutputs(SubtaskWiring& w, const NodeOps* ops,
                             std::vector<OutputBase*>& outs) const;
  void WireSourceInput(SubtaskWiring& w) const;
  void WireTwoInputGate(SubtaskWiring& w) const;
  void WireInputGate(SubtaskWiring& w) const;
  // 7: the coordinator, the participants, and the states to restore (the
  // steps in job_compiler.cc: CheckpointMetadata, LoadCheckpointToRestore,
  // FirstCheckpointId, ConnectCheckpointParticipants, AssignRestoreStates).
  absl::Status SetUpCheckpoints(const PhysicalPlan& plan, Assembly& a) const;
  void ConnectCheckpointParticipants(const PhysicalPlan& plan, Assembly& a,
                                     CheckpointCoordinator* coordinator) const;
  absl::Status Place(const PhysicalPlan& plan, Assembly& a) const;

  const std::vector<std::unique_ptr<StreamNode>>& nodes_;
  JobCompilerOptions options_;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_COMPILER_H_
