#include "tidemark/runtime/state/detail/snapshot_pool.h"

#include <algorithm>
#include <utility>

namespace tidemark::internal {

SnapshotPool& SnapshotPool::Shared() {
  static SnapshotPool* const pool = [] {
    const int cores = static_cast<int>(std::thread::hardware_concurrency());
    return new SnapshotPool(std::max(1, std::min(4, cores / 2)));
  }();
  return *pool;
}

SnapshotPool::SnapshotPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Run(); });
}

SnapshotPool::~SnapshotPool() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  for (std::thread& t : threads_) t.join();
}

void SnapshotPool::Submit(std::function<void()> work) {
  {
    MutexLock lock(&mu_);
    queue_.push_back(std::move(work));
  }
  cv_.Signal();
}

void SnapshotPool::Run() {
  for (;;) {
    std::function<void()> work;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !stop_) cv_.Wait(&mu_);
      if (queue_.empty()) return;
      work = std::move(queue_.front());
      queue_.pop_front();
    }
    work();
  }
}

}  // namespace tidemark::internal
