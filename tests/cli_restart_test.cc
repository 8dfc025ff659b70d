// tests/cli_restart_test.cc
//
// `tidemark run --restart-strategy=...` (docs/checkpoints.md, "Restarts"):
// every form of the flag parses into Flink's settings, a bad one is refused
// saying which field is wrong; a job that keeps failing is restarted as the
// strategy allows, each restart said on stderr, then fails saying why.
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tools/cli/specs.h"

namespace tidemark {
namespace {

using Kind = RestartStrategyConfiguration::Kind;
using testing::CliRun;
using testing::RunTidemark;

TEST(RestartStrategyFlag, EveryFormParses) {
  auto none = cli::ParseRestartStrategy("none");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->kind, Kind::kNone);

  auto fixed = cli::ParseRestartStrategy("fixed-delay:3:1s");
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->kind, Kind::kFixedDelay);
  EXPECT_EQ(fixed->attempts, 3);
  EXPECT_EQ(fixed->delay, Duration(1000));

  auto exp_default = cli::ParseRestartStrategy("exponential-delay");
  ASSERT_TRUE(exp_default.ok()) << exp_default.status();
  EXPECT_EQ(exp_default->kind, Kind::kExponentialDelay);
  EXPECT_EQ(exp_default->initial_backoff, Duration(1000));
  EXPECT_EQ(exp_default->max_backoff, Duration(60'000));

  auto exp = cli::ParseRestartStrategy("exponential-delay:100ms:10s:2:1h:0.2:5");
  ASSERT_TRUE(exp.ok()) << exp.status();
  EXPECT_EQ(exp->initial_backoff, Duration(100));
  EXPECT_EQ(exp->max_backoff, Duration(10'000));
  EXPECT_DOUBLE_EQ(exp->backoff_multiplier, 2.0);
  EXPECT_EQ(exp->reset_backoff_threshold, Duration(3'600'000));
  EXPECT_DOUBLE_EQ(exp->jitter_factor, 0.2);
  EXPECT_EQ(exp->attempts_before_reset_backoff, 5);

  auto rate = cli::ParseRestartStrategy("failure-rate:3:5min:10s");
  ASSERT_TRUE(rate.ok()) << rate.status();
  EXPECT_EQ(rate->kind, Kind::kFailureRate);
  EXPECT_EQ(rate->max_failures_per_interval, 3);
  EXPECT_EQ(rate->failure_rate_interval, Duration(300'000));
  EXPECT_EQ(rate->delay, Duration(10'000));
}

TEST(RestartStrategyFlag, BadFormsSayWhatIsWrong) {
  auto msg = [](const std::string& text) {
    auto r = cli::ParseRestartStrategy(text);
    return r.ok() ? std::string("ok") : std::string(r.status().message());
  };
  EXPECT_NE(msg("sometimes").find("none, fixed-delay"), std::string::npos) << msg("sometimes");
  EXPECT_NE(msg("fixed-delay:3").find("fixed-delay:ATTEMPTS:DELAY"), std::string::npos);
  EXPECT_NE(msg("fixed-delay:x:1s").find("attempts"), std::string::npos) << msg("fixed-delay:x:1s");
  EXPECT_NE(msg("fixed-delay:3:1parsec").find("duration"), std::string::npos);
  EXPECT_NE(msg("failure-rate:0:1s:1s").find("max failures"), std::string::npos);
  EXPECT_NE(msg("exponential-delay:1s:2s:0.5:1h:0").find("multiplier"), std::string::npos);
}

TEST(CliRestart, AJobThatKeepsFailingIsRestartedThenFailsSayingWhy) {
  testing::TempDir dir;
  const std::string input = dir.File("in.txt", "k,1000\nk,notatime\nk,3000\n");
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts",
                          "--checkpoint-dir=" + dir.Path("chk"), "--checkpoint-interval=10ms",
                          "--restart-strategy=fixed-delay:2:0ms"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tidemark: restarting (1): operator 'Source: input' (subtask 0 of 1) "
                       "failed: " +
                       input + ":2: field 'ts'"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tidemark: restarting (2): "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("restarting (3)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(no restart: restart strategy fixed-delay (2 attempts, delay 0 ms), 2 "
                       "restarts)"),
            std::string::npos)
      << r.err;
}

TEST(CliRestart, ABadStrategyIsRefusedBeforeTheJob) {
  testing::TempDir dir;
  const std::string input = dir.File("in.txt", "k,1000\n");
  CliRun r = RunTidemark(
      {"run", "--input=" + input, "--fields=key,ts", "--restart-strategy=fixed-delay:three:1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--restart-strategy=fixed-delay:three:1s: attempts 'three' is not a number"),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace tidemark
