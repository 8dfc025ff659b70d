// runtime/channel.h
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
#include <mutex>
#include <vector>

#include "runtime/stream_element.h"
#include "runtime/task.h"

namespace tidemark::internal {

class ChannelBase {
 public:
  explicit ChannelBase(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
  virtual ~ChannelBase() = default;
  ChannelBase(const ChannelBase&) = delete;
  ChannelBase& operator=(const ChannelBase&) = delete;

  void set_producer(Task* t) { producer_ = t; }
  void set_consumer(Task* t) { consumer_ = t; }
  size_t capacity() const { return capacity_; }

  // Approximate number of queued batches; exact only while both sides are
  // quiet.  Used to skip empty channels without taking the lock.
  size_t SizeApprox() const { return size_.load(std::memory_order_relaxed); }

  // Producer side: true when below capacity; otherwise the producer is
  // registered for a Notify() once there is space again, and false returned.
  bool HasSpace() {
    std::lock_guard<std::mutex> lock(mu_);
    if (size_.load(std::memory_order_relaxed) < capacity_) return true;
    producer_waiting_ = true;
    return false;
  }

 protected:
  std::mutex mu_;
  std::atomic<size_t> size_{0};
  bool producer_waiting_ = false;  // guarded by mu_
  const size_t capacity_;
  Task* producer_ = nullptr;
  Task* consumer_ = nullptr;
};

template <typename T>
class Channel final : public ChannelBase {
 public:
  using BatchPtr = std::unique_ptr<Batch<T>>;

  explicit Channel(size_t capacity) : ChannelBase(capacity) {}

  // Producer side: an empty batch to fill, recycled when possible.
  BatchPtr AcquireBatch() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        BatchPtr b = std::move(free_.back());
        free_.pop_back();
        return b;
      }
    }
    return std::make_unique<Batch<T>>();
  }

  // Producer side: hands `batch` to the consumer.  Returns false when the
  // channel is now full (the producer will be notified when it drains).
  bool Push(BatchPtr batch) {
    bool wake_consumer = false;
    bool has_space = true;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t n = size_.load(std::memory_order_relaxed);
      wake_consumer = (n == 0);
      queue_.push_back(std::move(batch));
      size_.store(n + 1, std::memory_order_relaxed);
      if (n + 1 >= capacity_) {
        producer_waiting_ = true;
        has_space = false;
      }
    }
    if (wake_consumer && consumer_ != nullptr) consumer_->Notify();
    return has_space;
  }

  // Consumer side: the oldest batch, or nullptr when there is none.
  BatchPtr Pop() {
    BatchPtr b;
    bool wake_producer = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return nullptr;
      b = std::move(queue_.front());
      queue_.pop_front();
      const size_t n = queue_.size();
      size_.store(n, std::memory_order_relaxed);
      if (producer_waiting_ && n < capacity_) {
        producer_waiting_ = false;
        wake_producer = true;
      }
    }
    if (wake_producer && producer_ != nullptr) producer_->Notify();
    return b;
  }

  // Consumer side: returns a processed batch for reuse.
  void Recycle(BatchPtr b) {
    b->clear();
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < capacity_ + 1) free_.push_back(std::move(b));
  }

 private:
  std::deque<BatchPtr> queue_;  // guarded by mu_
  std::vector<BatchPtr> free_;  // guarded by mu_
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_CHANNEL_H_
