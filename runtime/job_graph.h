// runtime/job_graph.h
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
// An edge says how records are shipped: ShipStrategy plus, for key_by and
// custom partitioning, a typed partitioner factory.
#ifndef TM_RUNTIME_JOB_GRAPH_H_
#define TM_RUNTIME_JOB_GRAPH_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "partitioning/partitioner.h"
#include "runtime/operator.h"

namespace tidemark::internal {

struct EdgeSpec {
  int from = -1;
  ShipStrategy strategy = ShipStrategy::kDefault;
  std::shared_ptr<PartitionerFactoryBase> partitioner;  // kKeyGroups / kCustom
};

// Per-element-type factories (runtime/node_ops.h) and what a source node
// needs to build its task input.
class NodeOps;
class TaskInput;
struct SourceBuildArgs;

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
  std::vector<EdgeSpec> inputs;
  std::shared_ptr<NodeOps> out;                               // null for sinks
  std::map<std::string, std::shared_ptr<NodeOps>> side_outs;  // by tag
  std::string side_tag;                                       // kSideOutput
  std::function<std::unique_ptr<OperatorBase>()> make_operator;
  std::function<std::unique_ptr<TaskInput>(const SourceBuildArgs&)> make_source;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_JOB_GRAPH_H_
