// runtime/task/detail/node_ops.h
//
// NodeOps: the operations the job compiler needs on streams of one element
// type, behind a virtual interface so the compiler itself is not a template:
// channels, writers (with their partitioner), chain outputs, fan-outs and
// input gates of type T.  The fluent API attaches a TypedNodeOps<T> to every
// node it creates.
#ifndef TM_RUNTIME_NODE_OPS_H_
#define TM_RUNTIME_NODE_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/channel_writer.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/io/detail/remote_codec.h"
#include "tidemark/runtime/task/detail/chain_output.h"
#include "tidemark/runtime/task/detail/job_graph.h"
#include "tidemark/runtime/task/source.h"

namespace tidemark::internal {

class StreamTask;
class SourceAlignment;

// What the typed operations below need of the task they wire
// (stream_task.cc): out of line, so that this header, which every job
// includes, does not include stream_task.h and what it reaches (compile
// cost, issue 24).
size_t TaskBatchSize(const StreamTask* task);
WriterSignals* TaskSignals(StreamTask* task);
SubtaskMetrics* TaskMetrics(StreamTask* task);
void TaskAddOutputObject(StreamTask* task, std::unique_ptr<OutputBase> out);

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
  // How batches of T cross ranks; null when T has no StateCodec.
  virtual std::unique_ptr<RemoteCodec> NewRemoteCodec() const = 0;
  // T as the compiler spells it, for errors.
  virtual std::string TypeName() const = 0;
};

template <typename T>
class TypedNodeOps final : public NodeOps {
 public:
  std::unique_ptr<ChannelBase> NewChannel(size_t capacity) const override {
    return std::unique_ptr<ChannelBase>(new Channel<T>(capacity));
  }
  std::unique_ptr<OutputBase> NewWriter(const std::vector<ChannelBase*>& channels,
                                        const EdgeSpec& edge, int subtask, int max_p,
                                        StreamTask* task, WatermarkListener* listener, bool report,
                                        const std::string& blame,
                                        WriterBase** writer) const override {
    std::unique_ptr<Partitioner<T>> p;
    const int n = static_cast<int>(channels.size());
    if (edge.partitioner)
      p = static_cast<PartitionerFactory<T>*>(edge.partitioner.get())->Make(n, subtask, max_p);
    auto* w = new ChannelWriter<T>(channels, std::move(p), WriterRoute{edge.strategy, subtask},
                                   TaskBatchSize(task), TaskSignals(task), TaskMetrics(task),
                                   listener, report, blame);
    std::unique_ptr<OutputBase> owned(w);
    *writer = w;
    return owned;
  }
  std::unique_ptr<OutputBase> NewChainOutput(OperatorBase* next,
                                             const OperatorContext* ctx) const override {
    return std::unique_ptr<OutputBase>(
        new ChainOutput<T>(static_cast<InputOperator<T>*>(next), ctx));
  }
  std::unique_ptr<OutputBase> NewFanOut(const std::vector<OutputBase*>& outs) const override {
    return std::unique_ptr<OutputBase>(new FanOutOutput<T>(outs));
  }
  std::unique_ptr<OutputBase> NewDiscard() const override {
    return std::unique_ptr<OutputBase>(new DiscardOutput<T>());
  }
  std::unique_ptr<TaskInput> NewInputGate(const std::vector<ChannelBase*>& channels,
                                          OutputBase* head, StreamTask* task,
                                          WatermarkListener* listener) const override {
    // A OneInputGate (not an InputGate<T>): no gate class per record type.
    return std::unique_ptr<TaskInput>(
        new OneInputGate(GateChannels<T>(channels, static_cast<Output<T>*>(head)),
                         TaskMetrics(task), listener, head));
  }
  std::unique_ptr<RemoteCodec> NewRemoteCodec() const override {
    if constexpr (HasStateCodec<T>) {
      return std::unique_ptr<RemoteCodec>(new RemoteBatchCodec<T>());
    } else {
      return nullptr;
    }
  }
  std::string TypeName() const override { return internal::TypeName<T>(); }
};

// The NodeOps of T: one per type, stateless and never freed, handed out
// without an owner (std::make_shared would instantiate a control block per
// type in every job: compile cost, issue 24).
template <typename T>
std::shared_ptr<NodeOps> NodeOpsOf() {
  static NodeOps* const ops = new TypedNodeOps<T>();
  return std::shared_ptr<NodeOps>(std::shared_ptr<NodeOps>(), ops);
}

// The gate of a two-input operator over inputs of A and B (StreamNode::
// make_two_input_gate).
template <typename A, typename B>
std::unique_ptr<TaskInput> MakeTwoInputGate(const TwoInputGateArgs& args) {
  auto* op = static_cast<TwoInputOperatorBase<A, B>*>(args.head);
  auto h1 = std::make_unique<TwoInputHeadOutput<0, A, B>>(op, args.head_ctx);
  auto h2 = std::make_unique<TwoInputHeadOutput<1, A, B>>(op, args.head_ctx);
  auto gate = std::make_unique<TwoInputGate<A, B>>(args.first, args.second, h1.get(), h2.get(),
                                                   h1.get(), TaskMetrics(args.task), args.listener);
  TaskAddOutputObject(args.task, std::move(h1));
  TaskAddOutputObject(args.task, std::move(h2));
  return gate;
}

struct SourceBuildArgs {
  OutputBase* head;
  SourceContext ctx;
  std::string name;
  WriterSignals* signals;
  SubtaskMetrics* metrics;
  size_t budget;
  // The first operator chained after the source (null when none): the
  // driver tells it the split of each record when it generates watermarks
  // per split (SplitWatermarkInput).
  OperatorBase* head_op = nullptr;
  SourceAlignment* alignment = nullptr;  // the task's (runtime/task/watermark_alignment.h)
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_NODE_OPS_H_
