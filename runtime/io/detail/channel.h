// runtime/io/detail/channel.h
//
// Channel<T>: the connection between one upstream subtask and one downstream
// subtask.  It moves whole batches (stream_element.h): the producer fills a
// batch privately (no lock, no atomic per record) and hands it over with
// Push(); the consumer takes it with Pop(), replays it, and gives the emptied
// batch back with Recycle() so its memory is reused.
//
// Bounded: a channel holds at most `capacity` batches before it reports
// itself full.  Push() never blocks and never fails; it returns false when the
// channel is now full, and from then on HasSpace() is false until the consumer
// has drained it below capacity, at which point the producer task is notified.
// The producer stops producing while any of its channels is full (it may
// finish the record or input batch at hand, so a channel can briefly exceed
// capacity by what one step produces): memory stays bounded and a fast
// producer waits for a slow consumer (backpressure), without spinning.
//
// Pushing onto an empty channel notifies the consumer task.  Records keep
// their order: the channel is FIFO.
//
// Thread safety: one producer thread and one consumer thread at a time; all
// methods are safe to call concurrently with the other side's.  One mutex
// acquisition per batch.
#ifndef TM_RUNTIME_CHANNEL_H_
#define TM_RUNTIME_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/core/stream_element.h"

namespace tidemark::internal {

// The channel itself, for batches of any type (channel.cc); Channel<T> only
// names the type.
class ChannelBase {
 public:
  explicit ChannelBase(size_t capacity);
  virtual ~ChannelBase();
  ChannelBase(const ChannelBase&) = delete;
  ChannelBase& operator=(const ChannelBase&) = delete;

  void set_producer(Task* t) { producer_ = t; }
  void set_consumer(Task* t) { consumer_ = t; }
  // The producer is notified after every Pop(), not only when the channel
  // had been full: the MPI exchange (mpi_exchange.h), which produces into
  // the channels it receives, returns a credit to the remote sender for
  // every batch the consumer takes.
  void set_notify_producer_on_every_pop() { notify_every_pop_ = true; }
  size_t capacity() const { return capacity_; }

  // Approximate number of queued batches; exact only while both sides are
  // quiet.  Used to skip empty channels without taking the lock.
  size_t SizeApprox() const { return size_.load(std::memory_order_relaxed); }
  // The counter behind SizeApprox(), for a reader that outlives no channel
  // (InputChannelMetrics::queued: back-pressure in the live view).
  const std::atomic<size_t>* size_counter() const { return &size_; }

  // Producer side: true when below capacity; otherwise the producer is
  // registered for a Notify() once there is space again, and false returned.
  bool HasSpace();

  // Producer side: an empty batch to fill (a Batch<T>), recycled when
  // possible; for the writers' type-independent half (channel_writer.h).
  std::unique_ptr<BatchBase> AcquireAnyBatch();
  // Producer side: hands `batch` (a Batch<T> of this channel's T) to the
  // consumer; false when the channel is now full.
  bool PushBatch(std::unique_ptr<BatchBase> batch);
  // Consumer side: the oldest batch or nullptr; and a processed batch back
  // for reuse (cleared here).
  std::unique_ptr<BatchBase> PopBatch();
  void RecycleAnyBatch(std::unique_ptr<BatchBase> batch);

  // Unaligned checkpoints (docs/checkpoints.md, "Unaligned checkpoints"): the
  // priority lane.  Producer side: hands `batch`, whose last control is
  // barrier `checkpoint_id` (the in-band marker: where the barrier stands
  // among the records), to the consumer like PushBatch, and in the same
  // critical section raises the channel's priority barrier to
  // `checkpoint_id`, so a consumer that sees the priority barrier finds its
  // marker in the queue (or has already taken it).  The consumer is always
  // notified.  False when the channel is now full (it may exceed capacity by
  // this batch: a barrier never waits for room).
  bool PushBatchWithPriorityBarrier(std::unique_ptr<BatchBase> batch, int64_t checkpoint_id);
  // Producer side: hands over its last batch (ending in the end of input),
  // and in the same critical section says that the producer has ended, so a
  // consumer that sees ProducerEnded() finds the end in the queue (or has
  // read it).  Unaligned checkpoints: a channel whose producer has ended
  // gets no barrier any more; its channel state is the queue up to the end.
  void PushLastBatch(std::unique_ptr<BatchBase> batch);
  bool ProducerEnded() const { return producer_ended_.load(std::memory_order_acquire); }
  // Consumer side: the highest checkpoint id pushed with
  // PushBatchWithPriorityBarrier (-1: none).  Lock-free; the consumer checks
  // it before each batch it reads.
  int64_t PriorityBarrier() const { return priority_barrier_.load(std::memory_order_acquire); }
  // Consumer side: shows the queued batches, oldest first, to `visit`
  // until it returns true, under the channel's lock (the producer's next
  // push waits that long).  They stay queued.  For reading a priority
  // barrier's channel state without taking the batches out of the queue,
  // so that back-pressure stays as it is.
  void VisitQueued(absl::FunctionRef<bool(const BatchBase&)> visit);

 protected:
  // A new, empty Batch<T>.
  virtual std::unique_ptr<BatchBase> NewBatch() const = 0;
  // PushBatch, PushBatchWithPriorityBarrier (`priority` >= 0) and
  // PushLastBatch (`last`).
  bool Push(std::unique_ptr<BatchBase> batch, int64_t priority, bool last);
  // A recycled batch, or nullptr when there is none.
  std::unique_ptr<BatchBase> TakeFree();
  // See Channel<T>::Recycle.
  void RecycleBatch(std::unique_ptr<BatchBase> batch);

 private:
  Mutex mu_;
  std::atomic<size_t> size_{0};
  std::atomic<int64_t> priority_barrier_{-1};
  std::atomic<bool> producer_ended_{false};
  bool producer_waiting_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<BatchBase>> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<BatchBase>> free_ ABSL_GUARDED_BY(mu_);
  const size_t capacity_;
  Task* producer_ = nullptr;
  Task* consumer_ = nullptr;
  bool notify_every_pop_ = false;
};

template <typename T>
class Channel final : public ChannelBase {
 public:
  using BatchPtr = std::unique_ptr<Batch<T>>;

  explicit Channel(size_t capacity) : ChannelBase(capacity) {}

  // Producer side: an empty batch to fill, recycled when possible.
  BatchPtr AcquireBatch() { return Typed(AcquireAnyBatch()); }

  // Producer side: hands `batch` to the consumer.  Returns false when the
  // channel is now full (the producer will be notified when it drains).
  bool Push(BatchPtr batch) { return PushBatch(std::move(batch)); }

  // Consumer side: the oldest batch, or nullptr when there is none.
  BatchPtr Pop() { return Typed(PopBatch()); }

  // Consumer side: returns a processed batch for reuse.
  void Recycle(BatchPtr b) {
    b->clear();
    RecycleBatch(std::move(b));
  }

 private:
  std::unique_ptr<BatchBase> NewBatch() const override {
    return std::unique_ptr<BatchBase>(new Batch<T>());
  }
  // Every batch of this channel is a Batch<T>.
  static BatchPtr Typed(std::unique_ptr<BatchBase> b) {
    return BatchPtr(static_cast<Batch<T>*>(b.release()));
  }
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHANNEL_H_
