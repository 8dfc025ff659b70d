// runtime/state/detail/snapshot_pool.h
//
// The threads that run the asynchronous part of checkpoints
// (docs/checkpoints.md, "The snapshot's phases").  A task's synchronous part
// takes copy-on-write views of its operators' state on the task thread and
// leaves the rest as deferred parts (StateWriter::Defer); the task then hands
// one piece of work per snapshot to SnapshotPool::Shared(), which encodes the
// parts and acknowledges the checkpoint to the coordinator.
//
// AsyncSnapshots counts one task's snapshots in flight, so that the task can
// wait for them before it hands over its final snapshot (which must come
// after every acknowledgement of the task) and before it ends (a piece of
// work acknowledges to the coordinator, which lives as long as the tasks
// run).
//
// Thread safety: both classes are thread-safe.
#ifndef TM_RUNTIME_STATE_SNAPSHOT_POOL_H_
#define TM_RUNTIME_STATE_SNAPSHOT_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "tidemark/runtime/core/detail/mutex.h"

namespace tidemark::internal {

class SnapshotPool {
 public:
  // The process's pool: max(1, min(4, cores / 2)) threads, started on first
  // use, never destroyed (its threads wait for work until the process ends).
  // Every job of the process shares it.
  static SnapshotPool& Shared();

  explicit SnapshotPool(int threads);
  // Runs what was submitted, then joins.
  ~SnapshotPool();
  SnapshotPool(const SnapshotPool&) = delete;
  SnapshotPool& operator=(const SnapshotPool&) = delete;

  // Runs `work` on one of the threads, in submission order per thread; it
  // must not throw.
  void Submit(std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  CondVar cv_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

class AsyncSnapshots {
 public:
  // On the task thread, before submitting a snapshot's work.
  void Begin() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    ++in_flight_;
  }
  // At the end of that work, on the pool's thread.
  // Signals under the lock: once AwaitAll has seen none in flight it may
  // destroy this object, so End must not touch the condition variable after
  // releasing the lock (ThreadSanitizer saw pthread_cond_broadcast race with
  // the destructor).
  void End() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    if (--in_flight_ == 0) cv_.SignalAll();
  }
  // Blocks until every snapshot begun has ended.
  void AwaitAll() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    while (in_flight_ > 0) cv_.Wait(&mu_);
  }
  int in_flight() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    return in_flight_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_STATE_SNAPSHOT_POOL_H_
