#include "tidemark/runtime/exec/arena_scheduler.h"

#include <deque>
#include <map>
#include <mutex>
#include <utility>

#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/wakeup_timer.h"

namespace tidemark::internal {

// Lives as long as the process; a global with external linkage keeps it
// reachable, so leak checkers report no leak.
tbb::global_control* g_tbb_control = nullptr;

// The tasks ready to run on the arena of a given worker count.  Dispatch()
// pushes a task here and enqueues a closure that captures nothing; the closure
// pops one task.  Handing tasks over through this mutex (rather than through
// captures copied by TBB's uninstrumented internals) keeps the handoff visible
// to ThreadSanitizer (tests/tsan.supp), and costs one lock per slice, not per
// record.
struct ArenaScheduler::ReadyQueue {
  Mutex mu;
  std::deque<std::pair<std::shared_ptr<ArenaScheduler>, Task*>> tasks ABSL_GUARDED_BY(mu);
};

class ArenaScheduler::Arena final : public tbb::task_arena {
 public:
  using tbb::task_arena::task_arena;
};

// One arena per worker count, shared by all jobs and never destroyed, so no
// arena is torn down while a worker may still be inside one of its tasks.
ArenaScheduler::Arena* ArenaScheduler::ArenaFor(int threads) {
  static Mutex mu;
  static auto* arenas = new std::map<int, ArenaScheduler::Arena*>();
  // TBB's default global limit is the number of cores, counting the main
  // thread; our arenas reserve no slot for the main thread, so lift the limit.
  static std::once_flag once;
  std::call_once(once, [] {
    g_tbb_control = new tbb::global_control(tbb::global_control::max_allowed_parallelism, 512);
  });
  MutexLock lock(&mu);
  auto& a = (*arenas)[threads];
  if (a == nullptr) {
    a = new ArenaScheduler::Arena(threads, /*reserved_for_masters=*/0);
    a->initialize();
  }
  return a;
}

// Keyed by the arena's concurrency, which is what a worker inside the arena
// can see (RunOneReady).
ArenaScheduler::ReadyQueue* ArenaScheduler::ReadyQueueFor(int threads) {
  static Mutex mu;
  static auto* queues = new std::map<int, ArenaScheduler::ReadyQueue*>();
  MutexLock lock(&mu);
  auto& q = (*queues)[threads];
  if (q == nullptr) q = new ArenaScheduler::ReadyQueue();
  return q;
}

ArenaScheduler::ArenaScheduler(int worker_threads) : worker_threads_(worker_threads) {}

void ArenaScheduler::Start(std::weak_ptr<ArenaScheduler> self, WakeupTimer* timer,
                           CompletionListener* listener) {
  arena_ = ArenaFor(worker_threads_);
  ready_ = ReadyQueueFor(arena_->max_concurrency());
  self_ = std::move(self);
  timer_ = timer;
  listener_ = listener;
}

void ArenaScheduler::Dispatch(Task* task) {
  {
    MutexLock lock(&ready_->mu);
    ready_->tasks.emplace_back(self_.lock(), task);
  }
  arena_->enqueue([] { RunOneReady(); });
}

void ArenaScheduler::RunOneReady() {
  // Runs on an arena worker: the arena's concurrency names its queue.
  thread_local int cached_threads = -1;
  thread_local ReadyQueue* cached = nullptr;
  const int threads = tbb::this_task_arena::max_concurrency();
  if (threads != cached_threads) {
    cached = ReadyQueueFor(threads);
    cached_threads = threads;
  }
  std::pair<std::shared_ptr<ArenaScheduler>, Task*> item;
  {
    MutexLock lock(&cached->mu);
    if (cached->tasks.empty()) return;
    item = std::move(cached->tasks.front());
    cached->tasks.pop_front();
  }
  item.first->RunSlice(item.second);
}

void ArenaScheduler::RunSlice(Task* task) { RunSharedSlice(task, timer_, this, listener_); }

}  // namespace tidemark::internal
