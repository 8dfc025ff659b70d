// Tests for the task's scheduling state machine (runtime/core/detail/task.h): the
// transitions one by one (Notify, BeginRun, BeginRunOnOwnThread, EndRun,
// DeadlineToRegister), then, with real threads, that a task notified from many
// threads is never run by two threads at once and loses no Notify(), under a
// plain worker pool, a DedicatedThread (runtime/exec/dedicated_thread.h) and the
// ArenaScheduler with its WakeupTimer (runtime/exec/arena_scheduler.h,
// runtime/exec/wakeup_timer.h), and the job's WorkerPool (runtime/exec/worker_pool.h):
// the same, plus that tasks keep their worker while every worker is busy,
// that an idle worker takes queued work from a busy one, and that an idle
// pool sleeps.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <ctime>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tidemark/runtime/core/detail/task.h"
#include "tidemark/runtime/exec/arena_scheduler.h"
#include "tidemark/runtime/exec/dedicated_thread.h"
#include "tidemark/runtime/exec/wakeup_timer.h"
#include "tidemark/runtime/exec/worker_pool.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using testing::StressIterations;

// --- the transitions, one thread ----------------------------------------------

class ScriptedTask final : public Task, public Dispatcher {
 public:
  ScriptedTask() : Task("scripted") { set_dispatcher(this); }
  Result RunSlice() override { return Result::kWait; }
  SteadyTime WakeupDeadline() const override { return deadline; }
  void Dispatch(Task*) override { ++dispatched; }
  int dispatched = 0;
  SteadyTime deadline = SteadyTime::max();
};

TEST(TaskStateTest, NotifyWhileIdleDispatchesOnce) {
  ScriptedTask t;
  t.Notify();
  t.Notify();
  t.Notify();
  EXPECT_EQ(t.dispatched, 1);
  EXPECT_EQ(t.state().load(), Task::kScheduled);
}

TEST(TaskStateTest, BeginRunOnlyWhenScheduled) {
  ScriptedTask t;
  EXPECT_FALSE(t.BeginRun());  // idle
  t.Notify();
  EXPECT_TRUE(t.BeginRun());
  EXPECT_EQ(t.state().load(), Task::kRunning);
  EXPECT_FALSE(t.BeginRun());  // already running
}

TEST(TaskStateTest, WaitWithoutNotifyGoesIdle) {
  ScriptedTask t;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  EXPECT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);
  EXPECT_EQ(t.state().load(), Task::kIdle);
  t.Notify();
  EXPECT_EQ(t.dispatched, 2);
}

TEST(TaskStateTest, NotifyWhileRunningRunsAgain) {
  ScriptedTask t;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  t.Notify();
  t.Notify();
  EXPECT_EQ(t.state().load(), Task::kRunningNotified);
  EXPECT_EQ(t.dispatched, 1);  // the runner runs it again, Notify does not
  EXPECT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kRunAgain);
  EXPECT_EQ(t.state().load(), Task::kScheduled);
  EXPECT_TRUE(t.BeginRun());
  EXPECT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);
}

TEST(TaskStateTest, YieldRunsAgainAndConsumesNotify) {
  ScriptedTask t;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  EXPECT_EQ(t.EndRun(Task::Result::kYield), Task::Next::kRunAgain);
  EXPECT_EQ(t.state().load(), Task::kScheduled);
  t.Notify();  // scheduled: nothing to do
  EXPECT_EQ(t.dispatched, 1);
  ASSERT_TRUE(t.BeginRun());
  t.Notify();
  EXPECT_EQ(t.EndRun(Task::Result::kYield), Task::Next::kRunAgain);
  ASSERT_TRUE(t.BeginRun());
  // The notification came before the slice that just began: no extra run.
  EXPECT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);
  EXPECT_EQ(t.dispatched, 1);
}

TEST(TaskStateTest, FinishedIgnoresNotify) {
  ScriptedTask t;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  t.Notify();  // even a pending notification does not run it again
  EXPECT_EQ(t.EndRun(Task::Result::kFinished), Task::Next::kFinished);
  EXPECT_EQ(t.state().load(), Task::kFinishedState);
  t.Notify();
  EXPECT_EQ(t.dispatched, 1);
  EXPECT_FALSE(t.BeginRun());
}

TEST(TaskStateTest, OwnThreadBeginsFromIdleOrScheduled) {
  ScriptedTask t;
  t.BeginRunOnOwnThread();  // woken by its descriptor or deadline
  EXPECT_EQ(t.state().load(), Task::kRunning);
  EXPECT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);
  t.Notify();  // woken by Notify
  EXPECT_EQ(t.dispatched, 1);
  t.BeginRunOnOwnThread();
  EXPECT_EQ(t.state().load(), Task::kRunning);
  EXPECT_EQ(t.EndRun(Task::Result::kYield), Task::Next::kRunAgain);
  t.BeginRunOnOwnThread();
  EXPECT_EQ(t.EndRun(Task::Result::kFinished), Task::Next::kFinished);
}

TEST(TaskStateTest, DeadlineRegisteredOnceUntilItPasses) {
  ScriptedTask t;
  const SteadyTime far = std::chrono::steady_clock::now() + 1h;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  EXPECT_EQ(t.DeadlineToRegister(), SteadyTime::max());  // no deadline
  t.deadline = far;
  EXPECT_EQ(t.DeadlineToRegister(), far);
  EXPECT_EQ(t.DeadlineToRegister(), SteadyTime::max());  // already pending
  t.deadline = far + 1s;
  EXPECT_EQ(t.DeadlineToRegister(), SteadyTime::max());  // the earlier one will wake it
  t.deadline = far - 1s;
  EXPECT_EQ(t.DeadlineToRegister(), far - 1s);  // earlier: register it too
  ASSERT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);

  // A registered deadline that has passed is forgotten when the task runs.
  const SteadyTime past = std::chrono::steady_clock::now() - 1ms;
  t.deadline = past;
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  EXPECT_EQ(t.DeadlineToRegister(), past);
  ASSERT_EQ(t.EndRun(Task::Result::kWait), Task::Next::kIdle);
  t.Notify();
  ASSERT_TRUE(t.BeginRun());
  EXPECT_EQ(t.DeadlineToRegister(), past);
}

// --- real threads ---------------------------------------------------------------

// Counts the slices that overlap (must be none) and remembers how many
// notifications had been sent when the last slice began: once the notifiers
// stop, a later slice must see them all (no Notify() is lost).
class CountingTask : public Task {
 public:
  CountingTask() : Task("counting") {}

  // A notifier: count, then notify.
  void CountAndNotify() {
    // Read-modify-writes on both sides: if a slice's read came before this
    // count, this one reads from it, so Notify() below sees the task running
    // (or later) and it runs again.
    notifies_.fetch_add(1, std::memory_order_acq_rel);
    Notify();
  }

  Result RunSlice() override {
    if (in_slice_.fetch_add(1, std::memory_order_acq_rel) != 0) {
      overlaps_.fetch_add(1, std::memory_order_relaxed);
    }
    const int64_t seen = notifies_.fetch_add(0, std::memory_order_acq_rel);
    ++slices_;  // plain: ThreadSanitizer reports two unsynchronised runners
    for (int i = 0; i < 50; ++i) spin_.fetch_add(1, std::memory_order_relaxed);
    const Result r = Decide();
    slices_seen_.store(slices_, std::memory_order_release);
    last_seen_.store(seen, std::memory_order_release);
    in_slice_.fetch_sub(1, std::memory_order_acq_rel);
    return r;
  }

  // Waits until a slice has begun after every notification so far.
  bool CaughtUp() const {
    const int64_t total = notifies_.load();
    const auto give_up = std::chrono::steady_clock::now() + 20s;
    while (last_seen_.load(std::memory_order_acquire) != total) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::yield();
    }
    return true;
  }

  void RequestFinish() { finish_.store(true, std::memory_order_release); }
  int overlaps() const { return overlaps_.load(); }
  int64_t slices() const { return slices_seen_.load(std::memory_order_acquire); }
  int64_t notifies() const { return notifies_.load(); }

 protected:
  virtual Result Decide() {
    if (finish_.load(std::memory_order_acquire)) return Result::kFinished;
    return slices_ % 5 == 0 ? Result::kYield : Result::kWait;
  }

 private:
  std::atomic<int64_t> notifies_{0};
  std::atomic<int64_t> last_seen_{0};
  std::atomic<int> in_slice_{0};
  std::atomic<int> overlaps_{0};
  std::atomic<int> spin_{0};
  std::atomic<bool> finish_{false};
  std::atomic<int64_t> slices_seen_{0};
  int64_t slices_ = 0;
};

// `notifiers` threads notify every task in `tasks` in bursts; after each round
// every task must catch up.
void NotifyInRounds(const std::vector<CountingTask*>& tasks, int notifiers, int rounds) {
  std::barrier sync(notifiers + 1);
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int n = 0; n < notifiers; ++n) {
    threads.emplace_back([&, n] {
      for (int round = 0;; ++round) {
        sync.arrive_and_wait();
        if (stop.load()) return;
        const int burst = 1 + (round + n) % 3;
        for (int b = 0; b < burst; ++b)
          for (CountingTask* t : tasks) t->CountAndNotify();
        sync.arrive_and_wait();
      }
    });
  }
  for (int round = 0; round < rounds; ++round) {
    sync.arrive_and_wait();  // go
    sync.arrive_and_wait();  // every notifier is done
    bool ok = true;
    for (CountingTask* t : tasks) ok = ok && t->CaughtUp();
    EXPECT_TRUE(ok) << "a Notify() was lost in round " << round;
    if (!ok) break;
  }
  stop.store(true);
  sync.arrive_and_wait();
  for (auto& t : threads) t.join();
  for (CountingTask* t : tasks) EXPECT_EQ(t->overlaps(), 0) << "two runners at once";
}

// A plain pool of workers that runs tasks through the transitions, as the
// arena does, and checks that a task is never queued twice.
class PlainPool final : public Dispatcher {
 public:
  explicit PlainPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { Main(); });
  }
  ~PlainPool() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  void Dispatch(Task* task) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (Task* q : queue_)
        if (q == task) ++double_queued_;
      queue_.push_back(task);
    }
    cv_.notify_one();
  }
  int double_queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return double_queued_;
  }
  int failed_begins() const { return failed_begins_.load(); }
  int finished() const { return finished_.load(); }

 private:
  void Main() {
    for (;;) {
      Task* task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = queue_.front();
        queue_.pop_front();
      }
      if (!task->BeginRun()) {
        failed_begins_.fetch_add(1);
        continue;
      }
      switch (task->EndRun(task->RunSlice())) {
        case Task::Next::kRunAgain:
          Dispatch(task);
          break;
        case Task::Next::kIdle:
          break;
        case Task::Next::kFinished:
          finished_.fetch_add(1);
          break;
      }
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task*> queue_;
  bool stop_ = false;
  int double_queued_ = 0;
  std::atomic<int> failed_begins_{0};
  std::atomic<int> finished_{0};
  std::vector<std::thread> threads_;
};

bool WaitFor(const std::function<bool()>& pred) {
  const auto give_up = std::chrono::steady_clock::now() + 20s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > give_up) return false;
    std::this_thread::sleep_for(100us);
  }
  return true;
}

TEST(TaskStateConcurrencyTest, PlainPoolNeverTwoRunnersNoLostNotify) {
  PlainPool pool(4);
  CountingTask a, b;
  a.set_dispatcher(&pool);
  b.set_dispatcher(&pool);
  NotifyInRounds({&a, &b}, /*notifiers=*/4, StressIterations(10000));
  EXPECT_EQ(pool.double_queued(), 0);
  EXPECT_EQ(pool.failed_begins(), 0);

  // Finished: later notifications are ignored.
  a.RequestFinish();
  b.RequestFinish();
  a.Notify();
  b.Notify();
  ASSERT_TRUE(WaitFor([&] { return pool.finished() == 2; }));
  const int64_t slices = a.slices();
  std::vector<std::thread> late;
  for (int i = 0; i < 4; ++i)
    late.emplace_back([&] {
      for (int j = 0; j < 100; ++j) a.Notify();
    });
  for (auto& t : late) t.join();
  std::this_thread::sleep_for(10ms);
  EXPECT_EQ(a.slices(), slices);
  EXPECT_EQ(a.state().load(), Task::kFinishedState);
  EXPECT_EQ(pool.finished(), 2);
}

class Completions final : public CompletionListener {
 public:
  void TaskFinished(Task*) override { count.fetch_add(1); }
  std::atomic<int> count{0};
};

TEST(TaskStateConcurrencyTest, DedicatedThreadNeverTwoRunnersNoLostNotify) {
  CountingTask task;
  Completions done;
  DedicatedThread thread(&task, &done);
  thread.Start();
  NotifyInRounds({&task}, /*notifiers=*/4, StressIterations(10000));
  task.RequestFinish();
  task.Notify();
  thread.Join();
  EXPECT_EQ(done.count.load(), 1);
  EXPECT_EQ(task.state().load(), Task::kFinishedState);
  task.Notify();  // no thread to wake: a no-op
}

// Waits on a pipe and, after its first slice, on a deadline.
class FdTask final : public CountingTask {
 public:
  FdTask() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
    read_fd = fds[0];
    write_fd = fds[1];
  }
  ~FdTask() override {
    close(read_fd);
    close(write_fd);
  }
  int WaitFd() const override { return read_fd; }
  SteadyTime WakeupDeadline() const override { return deadline_; }
  int read_fd, write_fd;
  std::atomic<int> bytes{0};
  std::atomic<bool> use_deadline{false};

 protected:
  Result Decide() override {
    char buf[16];
    ssize_t n;
    while ((n = read(read_fd, buf, sizeof(buf))) > 0) bytes.fetch_add(static_cast<int>(n));
    deadline_ = use_deadline.load() ? std::chrono::steady_clock::now() + 2ms : SteadyTime::max();
    return CountingTask::Decide();
  }

 private:
  SteadyTime deadline_ = SteadyTime::max();
};

TEST(TaskStateConcurrencyTest, DedicatedThreadWakesOnDescriptorAndDeadline) {
  FdTask task;
  Completions done;
  DedicatedThread thread(&task, &done);
  thread.Start();
  ASSERT_TRUE(WaitFor([&] { return task.slices() >= 1; }));
  // Readable descriptor, no Notify().
  const char byte = 'x';
  ASSERT_EQ(write(task.write_fd, &byte, 1), 1);
  EXPECT_TRUE(WaitFor([&] { return task.bytes.load() == 1; }));
  // A deadline, no Notify(): the task runs again and again.
  task.use_deadline.store(true);
  ASSERT_EQ(write(task.write_fd, &byte, 1), 1);
  const int64_t before = task.slices();
  EXPECT_TRUE(WaitFor([&] { return task.slices() >= before + 5; }));
  task.RequestFinish();
  task.Notify();
  thread.Join();
  EXPECT_EQ(done.count.load(), 1);
}

// What a job gives the arena: the scheduler, its timer and its tasks, owned
// together (the queued slices share that ownership).
struct ArenaJob final : CompletionListener {
  explicit ArenaJob(int tasks) : arena(2) {
    for (int i = 0; i < tasks; ++i) this->tasks.push_back(std::make_unique<FdTask>());
  }
  ~ArenaJob() { timer.Stop(); }
  void TaskFinished(Task*) override { finished.fetch_add(1); }
  ArenaScheduler arena;
  WakeupTimer timer;
  std::vector<std::unique_ptr<FdTask>> tasks;
  std::atomic<int> finished{0};
};

TEST(TaskStateConcurrencyTest, ArenaSchedulerNeverTwoRunnersNoLostNotify) {
  auto job = std::make_shared<ArenaJob>(3);
  job->arena.Start(std::shared_ptr<ArenaScheduler>(job, &job->arena), &job->timer, job.get());
  job->timer.Start();
  std::vector<CountingTask*> tasks;
  for (auto& t : job->tasks) {
    t->set_dispatcher(&job->arena);
    tasks.push_back(t.get());
  }
  NotifyInRounds(tasks, /*notifiers=*/3, StressIterations(5000));

  // Wake-ups through the timer: a task that waits with a deadline runs again
  // without being notified.
  FdTask& timed = *job->tasks[0];
  timed.use_deadline.store(true);
  timed.Notify();
  const int64_t before = timed.slices();
  EXPECT_TRUE(WaitFor([&] { return timed.slices() >= before + 5; }));
  timed.use_deadline.store(false);

  for (auto& t : job->tasks) {
    t->RequestFinish();
    t->Notify();
  }
  EXPECT_TRUE(WaitFor([&] { return job->finished.load() == 3; }));
  job->timer.Stop();
  // A slice still on its way out holds the job; it is freed there or here.
}

// --- the job's WorkerPool ------------------------------------------------------

TEST(TaskStateConcurrencyTest, JobWorkerPoolNeverTwoRunnersNoLostNotify) {
  std::vector<std::unique_ptr<FdTask>> tasks;
  for (int i = 0; i < 3; ++i) tasks.push_back(std::make_unique<FdTask>());
  Completions done;
  WakeupTimer timer;
  WorkerPool pool(2);
  pool.Start(&timer, &done);
  timer.Start();
  std::vector<CountingTask*> counting;
  for (auto& t : tasks) {
    t->set_dispatcher(&pool);
    counting.push_back(t.get());
  }
  NotifyInRounds(counting, /*notifiers=*/3, StressIterations(5000));

  // Wake-ups through the timer.
  FdTask& timed = *tasks[0];
  timed.use_deadline.store(true);
  timed.Notify();
  const int64_t before = timed.slices();
  EXPECT_TRUE(WaitFor([&] { return timed.slices() >= before + 5; }));
  timed.use_deadline.store(false);

  for (auto& t : tasks) {
    t->RequestFinish();
    t->Notify();
  }
  EXPECT_TRUE(WaitFor([&] { return done.count.load() == 3; }));
  timer.Stop();
  pool.Stop();
}

// Yields until told to stop, recording the thread of each slice.
class YieldingTask final : public Task {
 public:
  explicit YieldingTask(std::chrono::microseconds work) : Task("yielding"), work_(work) {}
  Result RunSlice() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      threads_.push_back(std::this_thread::get_id());
    }
    const auto until = std::chrono::steady_clock::now() + work_;
    while (std::chrono::steady_clock::now() < until) {
    }
    return stop_.load() ? Result::kFinished : Result::kYield;
  }
  void Stop() { stop_.store(true); }
  size_t slices() {
    std::lock_guard<std::mutex> lock(mu_);
    return threads_.size();
  }
  // The threads of slices [from, to).
  std::set<std::thread::id> ThreadsOf(size_t from, size_t to) {
    std::lock_guard<std::mutex> lock(mu_);
    return {threads_.begin() + static_cast<std::ptrdiff_t>(from),
            threads_.begin() + static_cast<std::ptrdiff_t>(std::min(to, threads_.size()))};
  }

 private:
  std::chrono::microseconds work_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<std::thread::id> threads_;
};

TEST(TaskStateConcurrencyTest, JobWorkerPoolKeepsBusyTasksOnTheirWorkers) {
  // As many always-ready tasks as workers: once they have spread over the
  // workers (within a few slices), each stays on its own.  A worker steals
  // only when its own queue is empty, and a worker with a task of its own
  // always has it queued or running.
  for (int iter = 0; iter < StressIterations(10); ++iter) {
    Completions done;
    WakeupTimer timer;
    WorkerPool pool(2);
    pool.Start(&timer, &done);
    YieldingTask a(20us), b(20us);
    a.set_dispatcher(&pool);
    b.set_dispatcher(&pool);
    a.Notify();
    b.Notify();
    // Spread: each on its own worker (a steal may be needed at the start).
    ASSERT_TRUE(WaitFor(
        [&] { return pool.HomeOf(&a) != pool.HomeOf(&b) && a.slices() > 0 && b.slices() > 0; }));
    const int64_t steals_settled = pool.steals();
    const size_t a0 = a.slices() + 1, b0 = b.slices() + 1;
    ASSERT_TRUE(WaitFor([&] { return a.slices() >= a0 + 300 && b.slices() >= b0 + 300; }));
    const auto ta = a.ThreadsOf(a0, a0 + 300);
    const auto tb = b.ThreadsOf(b0, b0 + 300);
    EXPECT_EQ(pool.steals(), steals_settled) << "a task moved while both workers were busy";
    a.Stop();
    b.Stop();
    ASSERT_TRUE(WaitFor([&] { return done.count.load() == 2; }));
    pool.Stop();
    EXPECT_EQ(ta.size(), 1u);
    EXPECT_EQ(tb.size(), 1u);
    EXPECT_NE(*ta.begin(), *tb.begin());
  }
}

TEST(TaskStateConcurrencyTest, JobWorkerPoolIdleWorkerTakesQueuedWork) {
  // Two tasks homed at worker 0: the other worker takes one of them.
  for (int iter = 0; iter < StressIterations(10); ++iter) {
    Completions done;
    WakeupTimer timer;
    WorkerPool pool(2);
    pool.Start(&timer, &done);
    YieldingTask a(100us), b(100us);
    a.set_home_worker(0);
    b.set_home_worker(0);
    a.set_dispatcher(&pool);
    b.set_dispatcher(&pool);
    a.Notify();
    b.Notify();
    EXPECT_TRUE(WaitFor([&] { return pool.HomeOf(&a) != pool.HomeOf(&b); }))
        << "both tasks stayed on one worker";
    a.Stop();
    b.Stop();
    ASSERT_TRUE(WaitFor([&] { return done.count.load() == 2; }));
    pool.Stop();
    EXPECT_GE(pool.steals(), 1);
  }
}

TEST(TaskStateConcurrencyTest, JobWorkerPoolSleepsWhenIdle) {
  // Real time is the subject: an idle pool must not spin.
  Completions done;
  WakeupTimer timer;
  WorkerPool pool(2);
  pool.Start(&timer, &done);
  const std::clock_t cpu_before = std::clock();
  std::this_thread::sleep_for(300ms);
  const double cpu_ms = 1000.0 * static_cast<double>(std::clock() - cpu_before) / CLOCKS_PER_SEC;
  pool.Stop();
  EXPECT_LT(cpu_ms, 30.0) << "an idle pool used " << cpu_ms << " ms of CPU in 300 ms";
}

}  // namespace
}  // namespace tidemark
