#include "runtime/executor.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "oneapi/tbb/global_control.h"
#include "oneapi/tbb/task_arena.h"

namespace tidemark {

// Lives as long as the process; a global with external linkage keeps it
// reachable, so leak checkers report no leak.
tbb::global_control* g_tbb_control = nullptr;

namespace {

// One arena per worker count, shared by all jobs and never destroyed, so no
// arena is torn down while a worker may still be inside one of its tasks.
tbb::task_arena* ArenaFor(int threads) {
  static std::mutex mu;
  static std::map<int, tbb::task_arena*>* arenas = new std::map<int, tbb::task_arena*>();
  // TBB's default global limit is the number of cores, counting the main
  // thread; our arenas reserve no slot for the main thread, so lift the limit.
  static std::once_flag once;
  std::call_once(once, [] {
    g_tbb_control = new tbb::global_control(tbb::global_control::max_allowed_parallelism, 512);
  });
  std::lock_guard<std::mutex> lock(mu);
  auto& a = (*arenas)[threads];
  if (a == nullptr) {
    a = new tbb::task_arena(threads, /*reserved_for_masters=*/0);
    a->initialize();
  }
  return a;
}

// The tasks ready to run on the arena of a given worker count.  Dispatch()
// pushes a task here and enqueues a closure that captures nothing; the closure
// pops one task.  Handing tasks over through this mutex (rather than through
// captures copied by TBB's uninstrumented internals) keeps the handoff visible
// to ThreadSanitizer, and costs one lock per slice, not per record.
struct ReadyQueue {
  std::mutex mu;
  std::deque<std::pair<std::shared_ptr<JobExecution>, Task*>> tasks;
};

ReadyQueue* ReadyQueueFor(int threads) {
  static std::mutex mu;
  static auto* queues = new std::map<int, ReadyQueue*>();
  std::lock_guard<std::mutex> lock(mu);
  auto& q = (*queues)[threads];
  if (q == nullptr) q = new ReadyQueue();
  return q;
}

}  // namespace

void JobExecution::RunOneReady() {
  // Runs on an arena worker: the arena's concurrency names its queue.
  thread_local int cached_threads = -1;
  thread_local ReadyQueue* cached = nullptr;
  const int threads = tbb::this_task_arena::max_concurrency();
  if (threads != cached_threads) {
    cached = ReadyQueueFor(threads);
    cached_threads = threads;
  }
  std::pair<std::shared_ptr<JobExecution>, Task*> item;
  {
    std::lock_guard<std::mutex> lock(cached->mu);
    if (cached->tasks.empty()) return;
    item = std::move(cached->tasks.front());
    cached->tasks.pop_front();
  }
  item.first->RunArenaTask(item.second);
}

int64_t JobResult::CounterTotal(const std::string& name) const {
  int64_t total = 0;
  for (const auto& m : metrics) {
    auto it = m.counters.find(name);
    if (it != m.counters.end()) total += it->second;
  }
  return total;
}

// A task with a thread of its own; Notify() writes to its eventfd.
class JobExecution::ThreadSlot final : public Dispatcher {
 public:
  explicit ThreadSlot(Task* t) : task(t), efd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~ThreadSlot() override {
    if (efd >= 0) close(efd);
  }
  void Dispatch(Task*) override {
    const uint64_t one = 1;
    ssize_t n = write(efd, &one, sizeof(one));
    (void)n;
  }
  void Drain() {
    uint64_t v;
    while (read(efd, &v, sizeof(v)) > 0) {
    }
  }
  Task* task;
  int efd;
  std::thread thread;
};

JobExecution::JobExecution(int worker_threads) : worker_threads_(std::max(1, worker_threads)) {}

JobExecution::~JobExecution() {
  if (timer_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(timer_mu_);
      timer_stop_ = true;
    }
    timer_cv_.notify_all();
    timer_thread_.join();
  }
  for (auto& s : thread_slots_)
    if (s->thread.joinable()) s->thread.join();
}

StreamTask* JobExecution::AddTask(std::unique_ptr<StreamTask> task) {
  tasks_.push_back(std::move(task));
  return tasks_.back().get();
}

void JobExecution::Start() {
  start_time_ = std::chrono::steady_clock::now();
  arena_ = ArenaFor(worker_threads_);
  ready_ = ReadyQueueFor(static_cast<tbb::task_arena*>(arena_)->max_concurrency());
  timer_thread_ = std::thread([this] { TimerMain(); });
  std::vector<Task*> arena_tasks;
  for (auto& t : tasks_) {
    if (t->NeedsOwnThread()) {
      thread_slots_.push_back(std::make_unique<ThreadSlot>(t.get()));
      t->set_dispatcher(thread_slots_.back().get());
      t->state().store(Task::kRunning, std::memory_order_release);
    } else {
      t->set_dispatcher(this);
      arena_tasks.push_back(t.get());
    }
  }
  {
    // From here on Cancel() may notify tasks: every dispatcher is set.
    std::lock_guard<std::mutex> lock(mu_);
    remaining_ = static_cast<int>(tasks_.size());
    started_ = true;
    if (tasks_.empty()) done_cv_.notify_all();
  }
  for (auto& slot : thread_slots_) {
    ThreadSlot* s = slot.get();
    slot->thread = std::thread([this, s] { ThreadMain(s); });
  }
  for (Task* t : arena_tasks) t->Notify();
}

void JobExecution::Dispatch(Task* task) {
  {
    auto* q = static_cast<ReadyQueue*>(ready_);
    std::lock_guard<std::mutex> lock(q->mu);
    q->tasks.emplace_back(shared_from_this(), task);
  }
  static_cast<tbb::task_arena*>(arena_)->enqueue([] { RunOneReady(); });
}

void JobExecution::RunArenaTask(Task* task) {
  int expected = Task::kScheduled;
  if (!task->state().compare_exchange_strong(expected, Task::kRunning, std::memory_order_acq_rel)) {
    return;
  }
  if (std::chrono::steady_clock::now() >= task->registered_deadline)
    task->registered_deadline = SteadyTime::max();
  const Task::Result r = task->RunSlice();
  switch (r) {
    case Task::Result::kFinished:
      task->state().store(Task::kFinishedState, std::memory_order_release);
      TaskFinished();
      return;
    case Task::Result::kYield:
      task->state().store(Task::kScheduled, std::memory_order_release);
      Dispatch(task);
      return;
    case Task::Result::kWait:
      AfterWait(task);
      return;
  }
}

void JobExecution::AfterWait(Task* task) {
  const SteadyTime deadline = task->WakeupDeadline();
  if (deadline != SteadyTime::max() && deadline < task->registered_deadline) {
    task->registered_deadline = deadline;
    ScheduleWakeup(task, deadline);
  }
  int expected = Task::kRunning;
  if (task->state().compare_exchange_strong(expected, Task::kIdle, std::memory_order_acq_rel))
    return;
  // Notified while running: run again.
  task->state().store(Task::kScheduled, std::memory_order_release);
  Dispatch(task);
}

void JobExecution::ThreadMain(ThreadSlot* slot) {
  Task* task = slot->task;
  for (;;) {
    if (std::chrono::steady_clock::now() >= task->registered_deadline)
      task->registered_deadline = SteadyTime::max();
    const Task::Result r = task->RunSlice();
    if (r == Task::Result::kFinished) {
      task->state().store(Task::kFinishedState, std::memory_order_release);
      TaskFinished();
      return;
    }
    if (r == Task::Result::kYield) continue;
    int expected = Task::kRunning;
    if (!task->state().compare_exchange_strong(expected, Task::kIdle, std::memory_order_acq_rel)) {
      task->state().store(Task::kRunning, std::memory_order_release);
      continue;
    }
    const SteadyTime deadline = task->WakeupDeadline();
    int timeout_ms = -1;
    if (deadline != SteadyTime::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(left.count() + 1, 0, 1 << 30));
    }
    pollfd fds[2];
    fds[0] = {slot->efd, POLLIN, 0};
    int nfds = 1;
    const int io_fd = task->WaitFd();
    if (io_fd >= 0) fds[nfds++] = {io_fd, POLLIN, 0};
    int rc;
    do {
      rc = poll(fds, nfds, timeout_ms);
    } while (rc < 0 && errno == EINTR);
    slot->Drain();
    task->state().exchange(Task::kRunning, std::memory_order_acq_rel);
  }
}

void JobExecution::ScheduleWakeup(Task* task, SteadyTime deadline) {
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_queue_.emplace(deadline, task);
  }
  timer_cv_.notify_one();
}

void JobExecution::TimerMain() {
  std::unique_lock<std::mutex> lock(timer_mu_);
  while (!timer_stop_) {
    if (timer_queue_.empty()) {
      timer_cv_.wait(lock);
      continue;
    }
    const SteadyTime next = timer_queue_.top().first;
    if (std::chrono::steady_clock::now() < next) {
      timer_cv_.wait_until(lock, next);
      continue;
    }
    Task* t = timer_queue_.top().second;
    timer_queue_.pop();
    lock.unlock();
    t->Notify();
    lock.lock();
  }
}

void JobExecution::TaskFinished() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--remaining_ == 0) done_cv_.notify_all();
}

bool JobExecution::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_ && remaining_ == 0;
}

void JobExecution::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  {
    // Before Start() the tasks cannot be notified yet; they see the flag at
    // their first slice.
    std::lock_guard<std::mutex> lock(mu_);
    if (!started_) return;
  }
  for (auto& t : tasks_) t->Notify();
}

void JobExecution::Fail(const absl::Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = status;
  }
  Cancel();
}

JobResult JobExecution::Wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return started_ && remaining_ == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(timer_mu_);
    timer_stop_ = true;
  }
  timer_cv_.notify_all();
  if (timer_thread_.joinable()) timer_thread_.join();
  for (auto& s : thread_slots_)
    if (s->thread.joinable()) s->thread.join();
  JobResult result;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time_).count();
  result.metrics = Metrics();
  for (auto& t : tasks_) t->Release();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!first_error_.ok()) {
      result.status = first_error_;
    } else if (cancelled()) {
      result.status = absl::CancelledError("job cancelled");
    }
  }
  return result;
}

std::vector<SubtaskMetricsSnapshot> JobExecution::Metrics() const {
  std::vector<SubtaskMetricsSnapshot> out;
  out.reserve(tasks_.size());
  for (const auto& t : tasks_) out.push_back(Snapshot(*t->metrics()));
  return out;
}

}  // namespace tidemark
