// Restarts inside the process (env.set_restart_strategy, docs/checkpoints.md
// "Restarts"): a failed attempt is rebuilt and restored from the latest
// checkpoint, and the committed output is the failure-free run's.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

// One source, a map that may throw, a keyed running sum (state a restore must
// bring back exactly) and exactly-once files.
void BuildJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n, double rate,
              std::shared_ptr<testing::InjectedFailures> failures) {
  env.from_generator<int64_t>([](int64_t i) { return i; }, n, rate)
      .set_parallelism(1)
      .map([failures](const int64_t& v) -> int64_t {
        if (failures) failures->MaybeThrow(v);
        return v;
      })
      .set_parallelism(1)
      .name("Flaky Map")
      .key_by([](const int64_t& v) { return v % 7; })
      .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
      .set_parallelism(3)
      .sink_to_files(out, [](const int64_t& v) { return std::to_string(v); })
      .set_parallelism(3);
}

TEST(Restart, AMapThrowingAtFiveRandomRecordsEndsWithTheFailureFreeOutput) {
  const int64_t n = 30'000;
  testing::TempDir clean_out;
  {
    StreamExecutionEnvironment env;
    BuildJob(env, clean_out.path(), n, 0, nullptr);
    JobResult r = env.execute("clean");
    ASSERT_TRUE(r.ok()) << r.status;
  }
  int hidden = 0;
  const std::vector<int64_t> expected = testing::CommittedInts(clean_out.path(), &hidden);
  ASSERT_EQ(expected.size(), static_cast<size_t>(n));

  const int reps = testing::StressIterations(2);
  for (int rep = 0; rep < reps; ++rep) {
    std::mt19937_64 rng(1234 + rep);
    auto failures = std::make_shared<testing::InjectedFailures>();
    failures->PickRandom(rng, n, 5);
    const std::set<int64_t> chosen = failures->pending;

    testing::TempDir chk;
    testing::TempDir out;
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(20), chk.path());
    env.set_restart_strategy(RestartStrategies::fixed_delay_restart(10, Duration(5)));
    std::vector<std::string> told;
    std::mutex told_mu;
    env.set_restart_listener([&](int64_t restart, const std::string& cause) {
      std::lock_guard<std::mutex> lock(told_mu);
      told.push_back(std::to_string(restart) + ": " + cause);
    });
    BuildJob(env, out.path(), n, 60'000.0, failures);
    JobResult r = env.execute("flaky");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(failures->thrown, chosen);
    EXPECT_EQ(r.restarts.num_restarts, 5);
    ASSERT_EQ(r.restarts.failures.size(), 5u);
    EXPECT_NE(r.restarts.last_failure.find("injected failure at record"), std::string::npos)
        << r.restarts.last_failure;
    EXPECT_NE(r.restarts.last_failure.find("Flaky Map"), std::string::npos)
        << r.restarts.last_failure;
    EXPECT_EQ(told.size(), 5u);
    // Where the last attempt started (-1: fresh, when the last failure came
    // before any checkpoint completed); either way the output must be exact.
    std::cout << "rep " << rep << ": the last attempt restored checkpoint "
              << r.checkpoints.restored_id << "\n";
    EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), expected) << "rep " << rep;
    EXPECT_EQ(hidden, 0);
  }
}

// write_as_text is at least once: a restored attempt appends to its file
// (it emptied it, so every line written before the checkpoint was lost).
TEST(Restart, AWriteAsTextSinkRestoredFromACheckpointKeepsWhatItWrote) {
  const int64_t n = 4000;
  testing::TempDir chk;
  testing::TempDir out;
  const std::string file = out.Path("text.txt");
  auto progress = std::make_shared<testing::Progress>();
  auto fail_next = std::make_shared<std::atomic<bool>>(false);
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.enable_checkpointing(Duration(0), chk.path());
  env.set_restart_strategy(RestartStrategies::fixed_delay_restart(1, Duration(5)));
  env.from_generator<int64_t>([](int64_t i) { return i; }, n, 20'000.0)
      .map([fail_next](const int64_t& v) -> int64_t {
        if (fail_next->exchange(false)) throw std::runtime_error("injected failure");
        return v;
      })
      .write_as_text(file, [progress](const int64_t& v) {
        progress->Add();
        return std::to_string(v);
      });
  JobClient client = env.execute_async("text");
  ASSERT_TRUE(progress->WaitFor(500));
  const int64_t id = client.trigger_checkpoint();
  ASSERT_GE(id, 0);
  ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
  fail_next->store(true);
  JobResult r = client.wait();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.restarts.num_restarts, 1);
  EXPECT_EQ(r.checkpoints.restored_id, id);
  std::set<int64_t> seen;
  std::ifstream in(file);
  std::string line;
  int64_t lines = 0;
  while (std::getline(in, line)) {
    seen.insert(std::stoll(line));
    ++lines;
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(n));
  EXPECT_TRUE(seen.empty() || (*seen.begin() == 0 && *seen.rbegin() == n - 1));
  EXPECT_GE(lines, n);  // the records after the checkpoint, up to the failure, twice
}

// A job that fails at once after every restart: exponential-delay makes
// exactly its attempts, each after its backoff.  (A failure within the
// millisecond of its restart was taken as merged into that restart: the job
// restarted again at once, counted it, and went far past its attempts.)
TEST(Restart, ExponentialDelayMakesItsAttemptsWhenEveryAttemptFailsAtOnce) {
  for (int rep = 0; rep < testing::StressIterations(3); ++rep) {
    testing::TempDir chk;
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), chk.path());
    // initial 2 ms, max 20 ms, x2, reset after 1 h, no jitter, 4 attempts.
    env.set_restart_strategy(RestartStrategies::exponential_delay_restart(
        Duration(2), Duration(20), 2.0, Duration(3'600'000), 0.0, 4));
    std::vector<int64_t> told;
    std::mutex told_mu;
    env.set_restart_listener([&](int64_t restart, const std::string&) {
      std::lock_guard<std::mutex> lock(told_mu);
      told.push_back(restart);
    });
    env.from_generator<int64_t>([](int64_t i) { return i; }, 10)
        .map([](const int64_t&) -> int64_t { throw std::runtime_error("always"); })
        .add_sink([](int64_t) {});
    JobResult r = env.execute("always failing");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status.message()).find("always"), std::string::npos) << r.status;
    EXPECT_EQ(r.restarts.num_restarts, 4) << "rep " << rep;
    EXPECT_EQ(r.restarts.failures.size(), 5u);
    EXPECT_EQ(told, (std::vector<int64_t>{1, 2, 3, 4}));
  }
}

// A cancel that comes as an attempt fails ends the job CANCELLED, as in
// Flink, not with the failure it raced with, and nothing restarts.
TEST(Restart, ACancelAsTheAttemptFailsEndsTheJobCancelled) {
  testing::TempDir chk;
  auto client_ptr = std::make_shared<std::atomic<JobClient*>>(nullptr);
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.enable_checkpointing(Duration(0), chk.path());
  env.set_restart_strategy(RestartStrategies::fixed_delay_restart(5, Duration(0)));
  env.from_generator<int64_t>([](int64_t i) { return i; }, 1000)
      .map([client_ptr](const int64_t& v) -> int64_t {
        if (v == 10) {
          JobClient* c = nullptr;
          while ((c = client_ptr->load()) == nullptr) std::this_thread::yield();
          c->cancel();  // the cancel is in before the failure is reported
          throw std::runtime_error("broken");
        }
        return v;
      })
      .add_sink([](int64_t) {});
  JobClient client = env.execute_async("cancelled as it fails");
  client_ptr->store(&client);
  JobResult r = client.wait();
  EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
  EXPECT_EQ(r.restarts.num_restarts, 0);
}

TEST(Restart, GivesUpWhenTheStrategyAllowsNoMoreAndSaysWhy) {
  testing::TempDir chk;
  testing::TempDir out;
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(20), chk.path());
  env.set_restart_strategy(RestartStrategies::fixed_delay_restart(2, Duration(0)));
  env.from_generator<int64_t>([](int64_t i) { return i; }, 1'000)
      .map([](const int64_t& v) -> int64_t {
        if (v == 500) throw std::runtime_error("always broken");
        return v;
      })
      .sink_to_files(out.path(), [](const int64_t& v) { return std::to_string(v); });
  JobResult r = env.execute("broken");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.restarts.num_restarts, 2);
  EXPECT_EQ(r.restarts.failures.size(), 3u);
  const std::string msg(r.status.message());
  EXPECT_NE(msg.find("always broken"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no restart: restart strategy fixed-delay (2 attempts"), std::string::npos)
      << msg;
}

// A restart whose rebuild fails (the checkpoint directory is briefly not a
// directory) goes back to the strategy, as in Flink, rather than ending the
// job while the strategy has attempts left; the next attempt runs, and the
// output is the failure-free run's.
// The committed output in `dir` is that of BuildJob's job over `n` records
// run without failures, and no hidden file is left.
void ExpectTheFailureFreeOutput(const std::string& dir, int64_t n) {
  testing::TempDir clean;
  StreamExecutionEnvironment env;
  BuildJob(env, clean.path(), n, 0, nullptr);
  ASSERT_TRUE(env.execute("clean").ok());
  int hidden = 0, clean_hidden = 0;
  EXPECT_EQ(testing::CommittedInts(dir, &hidden),
            testing::CommittedInts(clean.path(), &clean_hidden));
  EXPECT_EQ(hidden, 0);
}

TEST(Restart, ARebuildThatFailsIsRetriedByTheStrategy) {
  testing::TempDir chk;
  testing::TempDir out;
  const std::string dir = chk.Path("chk");
  const std::string aside = chk.Path("aside");
  auto failures = std::make_shared<testing::InjectedFailures>();
  failures->pending = {700};
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(20), dir);
  env.set_restart_strategy(RestartStrategies::fixed_delay_restart(3, Duration(0)));
  std::vector<std::string> causes;
  // Told before each rebuild, on the supervisor's thread: the first time the
  // directory becomes a file (the rebuild's writability check fails), the
  // second time it is put back.
  env.set_restart_listener([&](int64_t restart, const std::string& cause) {
    causes.push_back(cause);
    std::error_code ec;
    if (restart == 1) {
      std::filesystem::rename(dir, aside, ec);
      std::ofstream(dir) << "not a directory\n";
    } else if (restart == 2) {
      std::filesystem::remove(dir, ec);
      std::filesystem::rename(aside, dir, ec);
    }
  });
  BuildJob(env, out.path(), 2'000, 0, failures);
  JobResult r = env.execute("rebuild fails once");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.restarts.num_restarts, 2);
  ASSERT_EQ(causes.size(), 2u);
  EXPECT_NE(causes[1].find("rebuilding the job for restart 1 failed: "), std::string::npos)
      << causes[1];
  EXPECT_NE(causes[1].find("checkpoint directory"), std::string::npos) << causes[1];
  ExpectTheFailureFreeOutput(out.path(), 2'000);
}

TEST(Restart, WithoutCheckpointingAnExplicitStrategyRestartsFromTheBeginning) {
  testing::TempDir out;
  auto failures = std::make_shared<testing::InjectedFailures>();
  failures->pending = {700};
  StreamExecutionEnvironment env;
  env.set_restart_strategy(
      RestartStrategies::failure_rate_restart(3, Duration(60'000), Duration(0)));
  BuildJob(env, out.path(), 2'000, 0, failures);
  JobResult r = env.execute("from scratch");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.restarts.num_restarts, 1);
  EXPECT_EQ(r.checkpoints.restored_id, -1);
  // Compare with a run without the failure.
  ExpectTheFailureFreeOutput(out.path(), 2'000);
}

TEST(Restart, ACancelDuringTheBackoffEndsTheJobCancelled) {
  testing::TempDir chk;
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(20), chk.path());
  env.set_restart_strategy(RestartStrategies::fixed_delay_restart(5, Duration(3'600'000)));
  std::promise<void> restarting;
  env.set_restart_listener([&](int64_t, const std::string&) { restarting.set_value(); });
  env.from_generator<int64_t>([](int64_t i) { return i; }, 1'000)
      .map([](const int64_t& v) -> int64_t {
        if (v == 10) throw std::runtime_error("broken");
        return v;
      })
      .add_sink([](int64_t) {});
  JobClient client = env.execute_async("cancelled");
  restarting.get_future().wait();  // the first attempt failed; the backoff is 1 h
  EXPECT_EQ(client.restarts().failures.size(), 1u);
  client.cancel();
  JobResult r = client.wait();
  EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
  // Counted when decided, as Flink's numRestarts: the restart was decided.
  EXPECT_EQ(r.restarts.num_restarts, 1);
}

TEST(Restart, CheckpointsKeptInMemoryCannotBeRestartedFrom) {
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(20));
  env.set_restart_strategy(RestartStrategies::exponential_delay_restart());
  env.from_generator<int64_t>([](int64_t i) { return i; }, 10).add_sink([](int64_t) {});
  JobResult r = env.execute("in memory");
  EXPECT_TRUE(absl::IsInvalidArgument(r.status)) << r.status;
  EXPECT_NE(std::string(r.status.message()).find("checkpoint directory"), std::string::npos)
      << r.status;
}

TEST(Restart, AnInvalidStrategyIsRefusedWhenSet) {
  StreamExecutionEnvironment env;
  EXPECT_THROW(env.set_restart_strategy(RestartStrategies::fixed_delay_restart(-1, Duration(0))),
               std::invalid_argument);
}

}  // namespace
}  // namespace tidemark
