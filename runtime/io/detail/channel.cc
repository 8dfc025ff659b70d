#include "tidemark/runtime/io/detail/channel.h"

namespace tidemark::internal {

ChannelBase::ChannelBase(size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}

ChannelBase::~ChannelBase() = default;

std::unique_ptr<BatchBase> ChannelBase::AcquireAnyBatch() {
  if (std::unique_ptr<BatchBase> b = TakeFree()) return b;
  return NewBatch();
}

void ChannelBase::RecycleAnyBatch(std::unique_ptr<BatchBase> batch) {
  batch->Clear();
  RecycleBatch(std::move(batch));
}

bool ChannelBase::HasSpace() {
  MutexLock lock(&mu_);
  if (size_.load(std::memory_order_relaxed) < capacity_) return true;
  producer_waiting_ = true;
  return false;
}

std::unique_ptr<BatchBase> ChannelBase::TakeFree() {
  MutexLock lock(&mu_);
  if (free_.empty()) return nullptr;
  std::unique_ptr<BatchBase> b = std::move(free_.back());
  free_.pop_back();
  return b;
}

bool ChannelBase::PushBatch(std::unique_ptr<BatchBase> batch) {
  return Push(std::move(batch), -1, false);
}

bool ChannelBase::PushBatchWithPriorityBarrier(std::unique_ptr<BatchBase> batch,
                                               int64_t checkpoint_id) {
  return Push(std::move(batch), checkpoint_id, false);
}

void ChannelBase::PushLastBatch(std::unique_ptr<BatchBase> batch) {
  Push(std::move(batch), -1, true);
}

bool ChannelBase::Push(std::unique_ptr<BatchBase> batch, int64_t priority, bool last) {
  bool wake_consumer = false;
  bool has_space = true;
  {
    MutexLock lock(&mu_);
    const size_t n = size_.load(std::memory_order_relaxed);
    wake_consumer = (n == 0);
    queue_.push_back(std::move(batch));
    size_.store(n + 1, std::memory_order_relaxed);
    if (n + 1 >= capacity_) {
      producer_waiting_ = true;
      has_space = false;
    }
    if (priority > priority_barrier_.load(std::memory_order_relaxed)) {
      priority_barrier_.store(priority, std::memory_order_release);
      wake_consumer = true;  // a barrier is taken at once, queue or not
    }
    if (last) producer_ended_.store(true, std::memory_order_release);
  }
  if (wake_consumer && consumer_ != nullptr) consumer_->Notify();
  return has_space;
}

void ChannelBase::VisitQueued(absl::FunctionRef<bool(const BatchBase&)> visit) {
  MutexLock lock(&mu_);
  for (const std::unique_ptr<BatchBase>& b : queue_)
    if (visit(*b)) return;
}

std::unique_ptr<BatchBase> ChannelBase::PopBatch() {
  std::unique_ptr<BatchBase> b;
  bool wake_producer = false;
  {
    MutexLock lock(&mu_);
    if (queue_.empty()) return nullptr;
    b = std::move(queue_.front());
    queue_.pop_front();
    const size_t n = queue_.size();
    size_.store(n, std::memory_order_relaxed);
    if (producer_waiting_ && n < capacity_) {
      producer_waiting_ = false;
      wake_producer = true;
    }
    wake_producer = wake_producer || notify_every_pop_;
  }
  if (wake_producer && producer_ != nullptr) producer_->Notify();
  return b;
}

void ChannelBase::RecycleBatch(std::unique_ptr<BatchBase> batch) {
  MutexLock lock(&mu_);
  if (free_.size() < capacity_ + 1) free_.push_back(std::move(batch));
}

}  // namespace tidemark::internal
