#include "tidemark/runtime/exec/worker_pool.h"

#include <deque>
#include <thread>

#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/wakeup_timer.h"

namespace tidemark::internal {

// Padded to a cache line of its own: workers touch each other's only to
// queue or steal.
struct alignas(64) WorkerPool::Worker {
  Mutex mu;
  CondVar cv;
  std::deque<Task*> queue ABSL_GUARDED_BY(mu);
  bool sleeping ABSL_GUARDED_BY(mu) = false;
  bool woken ABSL_GUARDED_BY(mu) = false;  // asked to look for work to steal
  std::thread thread;
};

namespace {
// The pool and worker index of the current thread (-1 outside a pool).
thread_local const WorkerPool* tl_pool = nullptr;
thread_local int tl_worker = -1;
}  // namespace

WorkerPool::WorkerPool(int workers) {
  const int n = workers < 1 ? 1 : workers;
  for (int i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>());
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Start(WakeupTimer* timer, CompletionListener* listener) {
  timer_ = timer;
  listener_ = listener;
  started_ = true;
  for (int i = 0; i < num_workers(); ++i)
    workers_[static_cast<size_t>(i)]->thread = std::thread([this, i] { Main(i); });
}

void WorkerPool::Stop() {
  if (!started_) return;
  stop_.store(true, std::memory_order_seq_cst);
  for (auto& w : workers_) {
    MutexLock lock(&w->mu);
    w->cv.SignalAll();
  }
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  started_ = false;
}

int WorkerPool::HomeOf(const Task* task) const { return task->home_worker(); }

void WorkerPool::Dispatch(Task* task) {
  int home = task->home_worker();
  if (home < 0) {
    home = next_home_.fetch_add(1, std::memory_order_relaxed) % num_workers();
    task->set_home_worker(home);
  }
  Worker& w = *workers_[static_cast<size_t>(home)];
  bool home_sleeping;
  size_t queued;
  {
    MutexLock lock(&w.mu);
    w.queue.push_back(task);
    home_sleeping = w.sleeping;
    queued = w.queue.size();
    if (home_sleeping) w.cv.Signal();
  }
  if (home_sleeping) return;
  // The home worker is busy.  When it is this thread, between two slices, it
  // takes the task next itself unless others wait before it; otherwise a
  // sleeping worker may take it.
  const bool self = tl_pool == this && tl_worker == home;
  if ((!self || queued > 1) && sleepers_.load(std::memory_order_seq_cst) > 0) WakeOneSleeper(home);
}

void WorkerPool::WakeOneSleeper(int except) {
  for (int i = 0; i < num_workers(); ++i) {
    if (i == except) continue;
    Worker& w = *workers_[static_cast<size_t>(i)];
    MutexLock lock(&w.mu);
    if (w.sleeping && !w.woken) {
      w.woken = true;
      w.cv.Signal();
      return;
    }
  }
}

Task* WorkerPool::TakeOwn(int w) {
  Worker& me = *workers_[static_cast<size_t>(w)];
  MutexLock lock(&me.mu);
  if (me.queue.empty()) return nullptr;
  Task* t = me.queue.front();
  me.queue.pop_front();
  return t;
}

Task* WorkerPool::Steal(int w) {
  const int n = num_workers();
  for (int k = 1; k < n; ++k) {
    const int victim = (w + k) % n;
    Worker& v = *workers_[static_cast<size_t>(victim)];
    Task* t = nullptr;
    {
      MutexLock lock(&v.mu);
      if (v.queue.empty()) continue;
      t = v.queue.front();
      v.queue.pop_front();
    }
    t->set_home_worker(w);
    steals_.fetch_add(1, std::memory_order_relaxed);
    return t;
  }
  return nullptr;
}

void WorkerPool::Main(int w) {
  tl_pool = this;
  tl_worker = w;
  Worker& me = *workers_[static_cast<size_t>(w)];
  while (!stop_.load(std::memory_order_acquire)) {
    Task* t = TakeOwn(w);
    if (t == nullptr) t = Steal(w);
    if (t != nullptr) {
      RunSlice(t);
      continue;
    }
    // Nothing anywhere.  Count as a sleeper before looking once more, so a
    // Dispatch() that queued a task on a busy worker after that look sees us
    // and wakes us (see Dispatch).
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    t = Steal(w);
    if (t == nullptr) {
      MutexLock lock(&me.mu);
      me.sleeping = true;
      while (me.queue.empty() && !me.woken && !stop_.load(std::memory_order_acquire))
        me.cv.Wait(&me.mu);
      me.sleeping = false;
      me.woken = false;
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
    if (t != nullptr) RunSlice(t);
  }
  tl_pool = nullptr;
  tl_worker = -1;
}

void WorkerPool::RunSlice(Task* task) { RunSharedSlice(task, timer_, this, listener_); }

}  // namespace tidemark::internal
