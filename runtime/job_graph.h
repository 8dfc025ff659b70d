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
#include "runtime/channel.h"
#include "runtime/operator.h"
#include "runtime/stream_task.h"

namespace tidemark {

struct EdgeSpec {
  int from = -1;
  ShipStrategy strategy = ShipStrategy::kDefault;
  std::shared_ptr<PartitionerFactoryBase> partitioner;  // kKeyGroups / kCustom
};

// Operations on streams of one element type, for the executor.
class NodeOps {
 public:
  virtual ~NodeOps() = default;
  virtual std::unique_ptr<ChannelBase> NewChannel(size_t capacity) const = 0;
  // A writer over `channels` (all Channel<T>); stores the WriterBase in
  // *writer.
  virtual std::unique_ptr<OutputBase> NewWriter(const std::vector<ChannelBase*>& channels,
                                                const EdgeSpec& edge, int subtask,
                                                int downstream_max_parallelism, StreamTask* task,
                                                WatermarkListener* listener, bool report,
                                                const std::string& blame,
                                                WriterBase** writer) const = 0;
  virtual std::unique_ptr<OutputBase> NewChainOutput(OperatorBase* next,
                                                     const OperatorContext* next_ctx) const = 0;
  virtual std::unique_ptr<OutputBase> NewFanOut(const std::vector<OutputBase*>& outs) const = 0;
  virtual std::unique_ptr<OutputBase> NewDiscard() const = 0;
  virtual std::unique_ptr<TaskInput> NewInputGate(const std::vector<ChannelBase*>& channels,
                                                  OutputBase* head, StreamTask* task,
                                                  WatermarkListener* listener) const = 0;
};

template <typename T>
class TypedNodeOps final : public NodeOps {
 public:
  std::unique_ptr<ChannelBase> NewChannel(size_t capacity) const override {
    return std::make_unique<Channel<T>>(capacity);
  }
  std::unique_ptr<OutputBase> NewWriter(const std::vector<ChannelBase*>& channels,
                                        const EdgeSpec& edge, int subtask, int max_p,
                                        StreamTask* task, WatermarkListener* listener, bool report,
                                        const std::string& blame,
                                        WriterBase** writer) const override {
    std::vector<Channel<T>*> typed;
    for (auto* c : channels) typed.push_back(static_cast<Channel<T>*>(c));
    std::unique_ptr<Partitioner<T>> p;
    const int n = static_cast<int>(channels.size());
    if (edge.partitioner) {
      p = static_cast<PartitionerFactory<T>*>(edge.partitioner.get())->Make(n, subtask, max_p);
    } else {
      p = MakeBuiltinPartitioner<T>(edge.strategy, n, subtask);
    }
    auto w = std::make_unique<ChannelWriter<T>>(std::move(typed), std::move(p),
                                                task->config().batch_size, task->signals(),
                                                task->metrics(), listener, report, blame);
    *writer = w.get();
    return w;
  }
  std::unique_ptr<OutputBase> NewChainOutput(OperatorBase* next,
                                             const OperatorContext* ctx) const override {
    return std::make_unique<ChainOutput<T>>(static_cast<InputOperator<T>*>(next), ctx);
  }
  std::unique_ptr<OutputBase> NewFanOut(const std::vector<OutputBase*>& outs) const override {
    std::vector<Output<T>*> typed;
    for (auto* o : outs) typed.push_back(static_cast<Output<T>*>(o));
    return std::make_unique<FanOutOutput<T>>(std::move(typed));
  }
  std::unique_ptr<OutputBase> NewDiscard() const override {
    return std::make_unique<DiscardOutput<T>>();
  }
  std::unique_ptr<TaskInput> NewInputGate(const std::vector<ChannelBase*>& channels,
                                          OutputBase* head, StreamTask* task,
                                          WatermarkListener* listener) const override {
    std::vector<Channel<T>*> typed;
    for (auto* c : channels) typed.push_back(static_cast<Channel<T>*>(c));
    return std::make_unique<InputGate<T>>(std::move(typed), static_cast<Output<T>*>(head),
                                          task->metrics(), listener);
  }
};

struct SourceBuildArgs {
  OutputBase* head;
  SourceContext ctx;
  std::string name;
  WriterSignals* signals;
  SubtaskMetrics* metrics;
  size_t budget;
};

struct StreamNode {
  enum class Kind { kSource, kOperator, kVirtual, kSideOutput };
  int id = -1;
  Kind kind = Kind::kOperator;
  std::string name;
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

}  // namespace tidemark

#endif  // TM_RUNTIME_JOB_GRAPH_H_
