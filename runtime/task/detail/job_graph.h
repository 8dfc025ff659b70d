// runtime/task/detail/job_graph.h
//
// The logical job graph the fluent API builds, and the type-erased pieces the
// executor needs to turn it into tasks and channels.
//
// Nodes:
//   kSource    - makes one Source<T> per subtask;
//   kOperator  - makes one operator instance per subtask;
//   kVirtual   - no runtime presence: a union of streams, or a partitioning
//                choice (key_by, rebalance, broadcast, forward, custom) that
//                applies to the edges into the next operator;
//   kSideOutput- selects the side output `side_tag` of its input node.
// A two-input operator (connect, interval join) has two logical inputs: its
// edges say which one they feed (EdgeSpec::gate_input).
// An edge says how records are shipped: ShipStrategy plus, for key_by and
// custom partitioning, a typed partitioner factory.
#ifndef TM_RUNTIME_JOB_GRAPH_H_
#define TM_RUNTIME_JOB_GRAPH_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

struct EdgeSpec {
  int from = -1;
  ShipStrategy strategy = ShipStrategy::kDefault;
  std::shared_ptr<PartitionerFactoryBase> partitioner;  // kKeyGroups / kCustom
  // Which input of a two-input operator the edge feeds (0 or 1); what lies
  // behind it (a union, a partitioning) feeds the same input.
  int gate_input = 0;
};

// Per-element-type factories (runtime/task/detail/node_ops.h) and what a source node
// needs to build its task input.
class NodeOps;
class TaskInput;
struct SourceBuildArgs;
class ChannelBase;
class StreamTask;

// What a two-input operator's gate is built from (runtime/task/detail/node_ops.h,
// MakeTwoInputGate): the subtask's channels of each input, and the head
// operator (a TwoInputOperatorBase) of the task.
struct TwoInputGateArgs {
  std::vector<ChannelBase*> first;
  std::vector<ChannelBase*> second;
  OperatorBase* head;
  const OperatorContext* head_ctx;
  StreamTask* task;
  WatermarkListener* listener;
};

struct StreamNode {
  enum class Kind { kSource, kOperator, kVirtual, kSideOutput };
  int id = -1;
  Kind kind = Kind::kOperator;
  std::string name;
  // A stable id (DataStream::uid, Flink's uid): checkpoints match a task
  // whose operators all have one by their uids (docs/checkpoints.md).
  std::string uid;
  int parallelism = 0;             // 0: the environment's default
  int max_parallelism = 0;         // 0: the environment's, else Flink's default for the parallelism
  bool fixed_parallelism = false;  // non-parallel sources (collection, socket)
  bool keyed = false;              // consumes a key_by edge (needs max parallelism)
  // Assigns timestamps and watermarks (assign_timestamps_and_watermarks,
  // from_source): PhysicalPlan::AssignerWarnings() says when one runs behind
  // a non-forward edge.
  bool assigns_timestamps = false;
  // from_source's assigner: part of its source, as Flink's SourceOperator
  // generates watermarks itself, so chained to it even with chaining
  // disabled (per-split generation and alignment need the source's task).
  bool in_source_chain = false;
  // The assigner's strategy has watermark alignment in this group
  // (PhysicalPlan::AssignerWarnings says where it cannot apply).
  bool aligned = false;
  std::string alignment_group;
  // Takes the max parallelism of the operator that consumes it
  // (reinterpret_as_keyed_stream's check: the key groups it checks are those
  // of the keyed operator after it).
  bool max_parallelism_of_consumer = false;
  std::vector<EdgeSpec> inputs;
  std::shared_ptr<NodeOps> out;                               // null for sinks
  std::map<std::string, std::shared_ptr<NodeOps>> side_outs;  // by tag
  std::string side_tag;                                       // kSideOutput
  std::function<std::unique_ptr<OperatorBase>()> make_operator;
  // The operator to make instead when the job's state backend is RocksDB
  // (JobConfig::state_backend); empty: make_operator whatever the backend.
  // Window operators whose heap layout is specialised (window-major, sliced,
  // key-major sessions) set it to the general WindowOperator, whose contents
  // live in its keyed state store and so on RocksDB (docs/checkpoints.md,
  // "State backends").
  std::function<std::unique_ptr<OperatorBase>()> make_operator_on_rocksdb;
  // A window operator with a specialised heap layout built where
  // TIDEMARK_ROCKSDB_WINDOWS was not defined (the translation unit that built
  // it does not link tidemark::rocksdb), so make_operator_on_rocksdb is
  // empty: on RocksDB its contents stay on the heap, which the job says at
  // start (PhysicalPlan::StateBackendWarnings).
  bool window_contents_on_heap_only = false;
  std::function<std::unique_ptr<TaskInput>(const SourceBuildArgs&)> make_source;
  // Two-input operators: builds the task's gate over both inputs' channels
  // (the edges' gate_input says which is which); such a node heads a task.
  std::function<std::unique_ptr<TaskInput>(const TwoInputGateArgs&)> make_two_input_gate;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_GRAPH_H_
