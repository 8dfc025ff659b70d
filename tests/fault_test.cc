// Faults, repeated with random parallelism and configuration:
//   * a user function (map, or a window aggregate) that throws at a random
//     record: execute() returns an error naming the operator and carrying the
//     exception's message; every operator instance is destroyed and no thread
//     is left behind; nothing hangs; the window results that did arrive are
//     exact (no record counted twice, no partial window);
//   * a slow sink behind a fast source (back-pressure): the number of records
//     in flight stays below a bound set by the channel sizes, independent of
//     the input size (a count, not a timing), and the result is complete;
//   * cancellation in the middle of a windowed run: CANCELLED, and the
//     results that arrived are exact and unique.
// Conservation: in every run, each record appears at most once in what
// arrived, and exactly once when the job completes.
//
// Nothing here synchronizes by sleeping: "slow" sinks sleep to be slow, and a
// watchdog (a generous limit) only turns a deadlock into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_util.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;

// Threads of this process (Linux).
int ThreadCount() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("Threads:", 0) == 0) return std::stoi(line.substr(8));
  return -1;
}

using tidemark::testing::WaitWithWatchdog;

struct Ev {
  int64_t id = 0;
  int64_t key = 0;
};

struct Count {
  int64_t count = 0;
  int64_t id_sum = 0;
};

struct CountAgg {
  std::shared_ptr<const int64_t> bad;  // throw at this id (-1: never)
  Count create_accumulator() const { return {}; }
  Count add(const Ev& e, Count c) const {
    if (e.id == *bad) throw std::runtime_error("window boom at " + std::to_string(e.id));
    c.count += 1;
    c.id_sum += e.id;
    return c;
  }
  Count get_result(const Count& c) const { return c; }
  Count merge(Count a, const Count& b) const {
    a.count += b.count;
    a.id_sum += b.id_sum;
    return a;
  }
};

struct WinOut {
  int64_t key, start, end, count, id_sum;
};

// Record i: key i % keys, timestamp i (per generator subtask increasing), so a
// window fires only once every subtask is past it and holds exactly the ids
// i in [start, end) with i % keys == key (and i < n for bounded inputs).
std::pair<int64_t, int64_t> ExpectedWindow(int64_t key, int64_t start, int64_t end, int64_t keys,
                                           int64_t n) {
  int64_t count = 0, sum = 0;
  for (int64_t i = std::max<int64_t>(start, 0); i < end && (n < 0 || i < n); ++i) {
    if (i % keys == key) {
      ++count;
      sum += i;
    }
  }
  return {count, sum};
}

// Checks that window results are unique and exact; returns the number of
// records they count.
int64_t CheckWindows(const std::vector<WinOut>& got, int64_t keys, int64_t n,
                     const std::string& where) {
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  int64_t counted = 0;
  for (const WinOut& w : got) {
    EXPECT_TRUE(seen.insert({w.key, w.start, w.end}).second)
        << where << ": window fired twice: key " << w.key << " [" << w.start << "," << w.end << ")";
    auto [count, sum] = ExpectedWindow(w.key, w.start, w.end, keys, n);
    EXPECT_EQ(w.count, count) << where << ": key " << w.key << " [" << w.start << "," << w.end
                              << ")";
    EXPECT_EQ(w.id_sum, sum) << where << ": key " << w.key << " [" << w.start << "," << w.end
                             << ")";
    counted += w.count;
  }
  return counted;
}

// A keyed tumbling-window job over ids [0, n) (n < 0: unbounded); `bad` makes
// the aggregate throw.  Returns the results' sink and sets up `env`.
std::shared_ptr<CollectedResults<WinOut>> WindowJob(StreamExecutionEnvironment& env, int64_t n,
                                                    int64_t keys, int64_t size,
                                                    std::shared_ptr<const int64_t> bad,
                                                    std::shared_ptr<std::atomic<int>> alive) {
  auto events =
      env.from_generator<Ev>(
             [keys](int64_t i, SourceOutput<Ev>& out) {
               out.CollectWithTimestamp(Ev{i, i % keys}, i);
             },
             n)
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<Ev>::for_monotonous_timestamps().with_periodic_emit_per_record());
  return events.key_by([](const Ev& e) { return e.key; })
      .window(TumblingEventTimeWindows::of(Duration(size)))
      .aggregate(CountAgg{bad},
                 [alive](const int64_t& key, const TimeWindow& w, const Count& c, WindowContext&,
                         Collector<WinOut>& out) {
                   (void)alive;  // held by every instance: counts live copies
                   out.collect(WinOut{key, w.start, w.end, c.count, c.id_sum});
                 })
      .name("Exploding Window")
      .collect();
}

TEST(Fault, ThrowingUserFunctionFailsCleanlyAndNothingIsCountedTwice) {
  std::mt19937_64 rng(20261129);
  const int reps = testing::StressIterations(60);
  int threads_after_warmup = -1;
  for (int rep = 0; rep < reps; ++rep) {
    const int p = 1 + static_cast<int>(rng() % 6);
    const int workers = 1 + static_cast<int>(rng() % 3);
    const int64_t n = 2000 + static_cast<int64_t>(rng() % 20000);
    const int64_t keys = 1 + static_cast<int64_t>(rng() % 50);
    const int64_t size = 10 + static_cast<int64_t>(rng() % 500);
    const int64_t bad_id = static_cast<int64_t>(rng() % n);
    const bool in_window = rep % 2 == 0;
    const std::string where = "rep " + std::to_string(rep) + " p=" + std::to_string(p) +
                              " n=" + std::to_string(n) + " bad=" + std::to_string(bad_id) +
                              (in_window ? " (window)" : " (map)");

    // `alive` is captured by every copy of the user functions: its use count
    // says whether the operator instances were destroyed.
    auto alive = std::make_shared<std::atomic<int>>(0);
    auto bad = std::make_shared<const int64_t>(in_window ? bad_id : -1);
    std::shared_ptr<CollectedResults<WinOut>> windows;
    std::shared_ptr<CollectedResults<int64_t>> passed;
    {
      StreamExecutionEnvironment env;
      env.set_parallelism(p).set_worker_threads(workers).set_batch_size(1 + rng() % 64);
      env.set_channel_capacity(1 + rng() % 4);
      if (in_window) {
        windows = WindowJob(env, n, keys, size, bad, alive);
      } else {
        passed = env.from_generator<int64_t>([](int64_t i) { return i; }, n)
                     .rebalance()
                     .map([bad_id, alive](const int64_t& v) -> int64_t {
                       if (v == bad_id)
                         throw std::runtime_error("map boom at " + std::to_string(v));
                       return v;
                     })
                     .name("Exploding Map")
                     .collect();
      }
      bool hung = false;
      JobClient client = env.execute_async("fault");
      JobResult r = WaitWithWatchdog(client, &hung);
      ASSERT_FALSE(hung) << where;
      ASSERT_FALSE(r.ok()) << where;
      const std::string msg(r.status.message());
      const std::string name = in_window ? "Exploding Window" : "Exploding Map";
      const std::string boom =
          (in_window ? "window boom at " : "map boom at ") + std::to_string(bad_id);
      EXPECT_NE(msg.find(name), std::string::npos) << where << ": " << msg;
      EXPECT_NE(msg.find(boom), std::string::npos) << where << ": " << msg;
      EXPECT_TRUE(client.done()) << where;
    }
    // Every operator instance (and its copy of the functions) is gone.
    EXPECT_EQ(alive.use_count(), 1) << where;

    // What arrived before the failure: exact and unique.
    if (in_window) {
      CheckWindows(windows->values(), keys, n, where);
    } else {
      std::set<int64_t> ids;
      for (int64_t v : passed->values()) {
        EXPECT_TRUE(ids.insert(v).second) << where << ": record " << v << " twice";
        EXPECT_NE(v, bad_id) << where;
      }
    }
    // No thread left behind: the count does not grow from job to job (the
    // oneTBB pool may still grow by a few workers after the first jobs; one
    // leaked thread per job would pass this bound within a few dozen jobs).
    if (rep == 5) threads_after_warmup = ThreadCount();
    if (rep > 5) EXPECT_LE(ThreadCount(), threads_after_warmup + 8) << where;
  }
}

TEST(Fault, SlowSinkKeepsInFlightRecordsBoundedAndGetsEverything) {
  std::mt19937_64 rng(4242);
  const int reps = testing::StressIterations(8);
  for (int rep = 0; rep < reps; ++rep) {
    const int p = 1 + static_cast<int>(rng() % 3);
    const size_t batch = 4 + rng() % 29;
    const size_t capacity = 1 + rng() % 3;
    const bool keyed = rep % 2 == 0;
    // Channels between the source and the sink's task; each holds at most
    // capacity + 1 batches plus the one being filled, and each consuming task
    // works on one batch.  Double it for slack: an unbounded queue would
    // reach n.
    const int64_t channels = static_cast<int64_t>(p) * p;
    const int64_t bound = 2 * (channels * static_cast<int64_t>((capacity + 2) * batch) +
                               p * static_cast<int64_t>(batch));
    const int64_t n = std::max<int64_t>(20000, 30 * bound);
    const std::string where = "rep " + std::to_string(rep) + " p=" + std::to_string(p) +
                              " batch=" + std::to_string(batch) +
                              " capacity=" + std::to_string(capacity) +
                              " bound=" + std::to_string(bound);

    auto produced = std::make_shared<std::atomic<int64_t>>(0);
    auto consumed = std::make_shared<std::atomic<int64_t>>(0);
    auto max_in_flight = std::make_shared<std::atomic<int64_t>>(0);
    auto sum = std::make_shared<std::atomic<int64_t>>(0);
    StreamExecutionEnvironment env;
    env.set_parallelism(p).set_worker_threads(2).set_batch_size(batch).set_channel_capacity(
        capacity);
    auto src = env.from_generator<int64_t>(
        [produced, consumed, max_in_flight](int64_t i) {
          const int64_t in_flight = produced->fetch_add(1) + 1 - consumed->load();
          int64_t m = max_in_flight->load();
          while (in_flight > m && !max_in_flight->compare_exchange_weak(m, in_flight)) {
          }
          return i;
        },
        n);
    DataStream<int64_t> routed =
        keyed ? src.key_by([](const int64_t& v) { return v % 17; }).stream() : src.rebalance();
    routed.map([](const int64_t& v) { return v; }).add_sink([consumed, sum](int64_t v) {
      // A slow sink: real time is the subject here.
      if (v % 64 == 0) std::this_thread::sleep_for(100us);
      sum->fetch_add(v);
      consumed->fetch_add(1);
    });
    bool hung = false;
    JobClient client = env.execute_async("slow sink");
    JobResult r = WaitWithWatchdog(client, &hung);
    ASSERT_FALSE(hung) << where;
    ASSERT_TRUE(r.ok()) << where << ": " << r.status;
    EXPECT_EQ(consumed->load(), n) << where;
    EXPECT_EQ(sum->load(), n * (n - 1) / 2) << where;
    EXPECT_LE(max_in_flight->load(), bound) << where;
    RecordProperty("max_in_flight_" + std::to_string(rep), static_cast<int>(max_in_flight->load()));
    std::cout << "[slow sink] " << where << " n=" << n << " max in flight " << max_in_flight->load()
              << std::endl;
  }
}

TEST(Fault, CancellingAWindowedRunReturnsCancelledWithExactPartialResults) {
  std::mt19937_64 rng(777);
  const int reps = testing::StressIterations(20);
  for (int rep = 0; rep < reps; ++rep) {
    const int p = 1 + static_cast<int>(rng() % 4);
    const int64_t keys = 1 + static_cast<int64_t>(rng() % 20);
    const int64_t size = 50 + static_cast<int64_t>(rng() % 200);
    const size_t wanted = 5 + rng() % 50;
    const std::string where = "rep " + std::to_string(rep) + " p=" + std::to_string(p);

    auto alive = std::make_shared<std::atomic<int>>(0);
    auto never = std::make_shared<const int64_t>(-1);
    std::mutex mu;
    std::condition_variable cv;
    size_t fired = 0;
    std::shared_ptr<CollectedResults<WinOut>> windows;
    {
      StreamExecutionEnvironment env;
      env.set_parallelism(p).set_worker_threads(2).set_batch_size(1 + rng() % 64);
      // An unbounded input; the sink below tells the test when enough windows
      // fired.
      auto events =
          env.from_generator<Ev>(
                 [keys](int64_t i, SourceOutput<Ev>& out) {
                   out.CollectWithTimestamp(Ev{i, i % keys}, i);
                 },
                 -1)
              .assign_timestamps_and_watermarks(WatermarkStrategy<Ev>::for_monotonous_timestamps()
                                                    .with_periodic_emit_per_record());
      windows = std::make_shared<CollectedResults<WinOut>>();
      auto sink_results = windows;
      events.key_by([](const Ev& e) { return e.key; })
          .window(TumblingEventTimeWindows::of(Duration(size)))
          .aggregate(CountAgg{never},
                     [alive](const int64_t& key, const TimeWindow& w, const Count& c,
                             WindowContext&, Collector<WinOut>& out) {
                       (void)alive;
                       out.collect(WinOut{key, w.start, w.end, c.count, c.id_sum});
                     })
          .add_sink([sink_results, &mu, &cv, &fired](WinOut w, Timestamp ts) {
            sink_results->Add(std::move(w), ts, 0);
            std::lock_guard<std::mutex> lock(mu);
            ++fired;
            cv.notify_all();
          });
      bool hung = false;
      JobClient client = env.execute_async("cancel windows");
      std::thread canceller([&] {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return fired >= wanted; });
        lock.unlock();
        client.cancel();
      });
      JobResult r = WaitWithWatchdog(client, &hung);
      canceller.join();
      ASSERT_FALSE(hung) << where;
      EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << where << ": " << r.status;
    }
    EXPECT_EQ(alive.use_count(), 1) << where;
    const auto got = windows->values();
    EXPECT_GE(got.size(), wanted) << where;
    CheckWindows(got, keys, /*n=*/-1, where);
  }
}

// The same windowed job run to completion: conservation over everything.
TEST(Fault, CompletedWindowedRunCountsEveryRecordOnce) {
  std::mt19937_64 rng(99);
  const int reps = testing::StressIterations(10);
  for (int rep = 0; rep < reps; ++rep) {
    const int p = 1 + static_cast<int>(rng() % 6);
    const int64_t n = 1000 + static_cast<int64_t>(rng() % 30000);
    const int64_t keys = 1 + static_cast<int64_t>(rng() % 100);
    const int64_t size = 10 + static_cast<int64_t>(rng() % 1000);
    auto alive = std::make_shared<std::atomic<int>>(0);
    auto never = std::make_shared<const int64_t>(-1);
    StreamExecutionEnvironment env;
    env.set_parallelism(p).set_worker_threads(1 + static_cast<int>(rng() % 3));
    auto windows = WindowJob(env, n, keys, size, never, alive);
    bool hung = false;
    JobClient client = env.execute_async("complete");
    JobResult r = WaitWithWatchdog(client, &hung);
    ASSERT_FALSE(hung);
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(r.CounterTotal(kNumLateRecordsDropped), 0);
    EXPECT_EQ(CheckWindows(windows->values(), keys, n, "rep " + std::to_string(rep)), n);
  }
}

}  // namespace
}  // namespace tidemark
