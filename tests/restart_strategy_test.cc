// The restart strategies' decisions (runtime/exec/restart_strategy.h) on a manual
// clock, case by case against Flink's rules.
#include "tidemark/runtime/exec/restart_strategy.h"

#include <string>

#include "gtest/gtest.h"
#include "tidemark/runtime/core/clock.h"

namespace tidemark {
namespace {

using internal::MakeRestartStrategy;
using Kind = RestartStrategyConfiguration::Kind;

TEST(RestartStrategy, NoneNeverRestarts) {
  ManualClock clock;
  auto s = MakeRestartStrategy(RestartStrategies::no_restart(), &clock);
  s->NotifyFailure();
  EXPECT_FALSE(s->CanRestart());
}

TEST(RestartStrategy, FixedDelayRestartsUpToItsAttemptsEachAfterTheDelay) {
  ManualClock clock;
  auto s = MakeRestartStrategy(RestartStrategies::fixed_delay_restart(3, Duration(1500)), &clock);
  for (int failure = 1; failure <= 3; ++failure) {
    s->NotifyFailure();
    EXPECT_TRUE(s->CanRestart()) << "failure " << failure;
    EXPECT_EQ(s->BackoffMillis(), 1500);
    clock.Advance(100'000);  // time does not matter
  }
  s->NotifyFailure();
  EXPECT_FALSE(s->CanRestart());
}

TEST(RestartStrategy, FixedDelayWithZeroAttemptsNeverRestarts) {
  ManualClock clock;
  auto s = MakeRestartStrategy(RestartStrategies::fixed_delay_restart(0, Duration(0)), &clock);
  s->NotifyFailure();
  EXPECT_FALSE(s->CanRestart());
}

// Flink's FailureRateRestartBackoffTimeStrategy keeps max + 1 failure times:
// up to `max` failures in an interval restart, the (max + 1)-th within it
// does not (FailureRateRestartBackoffTimeStrategyTest.testFailuresExceedingRate).
TEST(RestartStrategy, FailureRateFailsWhenMoreThanMaxFailuresLieWithinTheInterval) {
  ManualClock clock(1'000'000);
  auto s = MakeRestartStrategy(
      RestartStrategies::failure_rate_restart(3, Duration(10'000), Duration(250)), &clock);
  s->NotifyFailure();  // t = 0
  EXPECT_TRUE(s->CanRestart());
  EXPECT_EQ(s->BackoffMillis(), 250);
  clock.Advance(4'000);
  s->NotifyFailure();  // t = 4 s
  EXPECT_TRUE(s->CanRestart());
  clock.Advance(5'000);
  s->NotifyFailure();  // t = 9 s: three failures, as many as allowed
  EXPECT_TRUE(s->CanRestart());
  clock.Advance(1'000);
  s->NotifyFailure();  // t = 10 s: four within 10 s (not more than 10 s apart)
  EXPECT_FALSE(s->CanRestart());
  // One ms later the oldest (t = 0) is more than the interval back.
  clock.Advance(1);
  EXPECT_TRUE(s->CanRestart());
}

// Flink's default (restart-strategy.failure-rate.max-failures-per-interval:
// 1) restarts once per interval (testManyFailuresWithinRate).
TEST(RestartStrategy, FailureRateWithOneFailurePerIntervalRestartsOnce) {
  ManualClock clock;
  auto s = MakeRestartStrategy(
      RestartStrategies::failure_rate_restart(1, Duration(1'000), Duration(0)), &clock);
  s->NotifyFailure();
  EXPECT_TRUE(s->CanRestart());
  clock.Advance(999);
  s->NotifyFailure();
  EXPECT_FALSE(s->CanRestart());
}

TEST(RestartStrategy, FailureRateKeepsRestartingWhileFailuresAreSparse) {
  ManualClock clock;
  auto s = MakeRestartStrategy(
      RestartStrategies::failure_rate_restart(2, Duration(1'000), Duration(0)), &clock);
  for (int i = 0; i < 50; ++i) {
    clock.Advance(501);
    s->NotifyFailure();  // two in any 1000 ms, never three
    EXPECT_TRUE(s->CanRestart()) << i;
  }
  clock.Advance(499);
  s->NotifyFailure();  // three within 1000 ms
  EXPECT_FALSE(s->CanRestart());
}

RestartStrategyConfiguration Exponential(int attempts = 2147483647) {
  // initial 100 ms, max 1 s, x2, reset after 10 s, no jitter.
  return RestartStrategies::exponential_delay_restart(Duration(100), Duration(1'000), 2.0,
                                                      Duration(10'000), 0.0, attempts);
}

TEST(RestartStrategy, ExponentialDelayGrowsByTheMultiplierUpToTheMax) {
  ManualClock clock(5'000);
  auto s = MakeRestartStrategy(Exponential(), &clock);
  const int64_t expected[] = {100, 200, 400, 800, 1'000, 1'000, 1'000};
  for (int64_t want : expected) {
    ASSERT_TRUE(s->NotifyFailure());
    EXPECT_TRUE(s->CanRestart());
    EXPECT_EQ(s->BackoffMillis(), want);
    // The restart happens after the backoff; the job fails again 1 s later.
    clock.Advance(want + 1'000);
  }
  // Far past the max (2^300 overflows any integer): still the max.
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(s->NotifyFailure());
    ASSERT_EQ(s->BackoffMillis(), 1'000) << i;
    clock.Advance(2'000);
  }
}

TEST(RestartStrategy, ExponentialDelayBackoffIsTheTimeLeftUntilTheRestart) {
  ManualClock clock;
  auto s = MakeRestartStrategy(Exponential(), &clock);
  s->NotifyFailure();
  clock.Advance(30);
  EXPECT_EQ(s->BackoffMillis(), 70);
  clock.Advance(500);
  EXPECT_EQ(s->BackoffMillis(), 0);
}

TEST(RestartStrategy, ExponentialDelayMergesFailuresBeforeThePendingRestart) {
  ManualClock clock;
  auto s = MakeRestartStrategy(Exponential(), &clock);
  ASSERT_TRUE(s->NotifyFailure());  // restart at t = 100
  clock.Advance(99);
  EXPECT_FALSE(s->NotifyFailure());  // before the restart's time: the same attempt
  EXPECT_EQ(s->BackoffMillis(), 1);
  clock.Advance(1);
  // At the restart's time the next attempt has started: its failure is a
  // new one, 200 ms (the whole job restarts; Flink merges at <= because its
  // tasks restart region by region).
  ASSERT_TRUE(s->NotifyFailure());
  EXPECT_EQ(s->BackoffMillis(), 200);
}

TEST(RestartStrategy, ExponentialDelayResetsAfterRunningPastTheThreshold) {
  ManualClock clock;
  auto s = MakeRestartStrategy(Exponential(), &clock);
  s->NotifyFailure();  // 100, restart at 100
  clock.Advance(100 + 500);
  s->NotifyFailure();  // 200, restart at 800
  EXPECT_EQ(s->BackoffMillis(), 200);
  clock.Advance(200 + 9'999);  // ran 9.999 s after the restart: no reset
  s->NotifyFailure();
  EXPECT_EQ(s->BackoffMillis(), 400);
  clock.Advance(400 + 10'000);  // ran 10 s: reset
  s->NotifyFailure();
  EXPECT_EQ(s->BackoffMillis(), 100);
}

TEST(RestartStrategy, ExponentialDelayStopsAfterItsAttemptsUnlessReset) {
  ManualClock clock;
  auto s = MakeRestartStrategy(Exponential(/*attempts=*/2), &clock);
  s->NotifyFailure();
  EXPECT_TRUE(s->CanRestart());
  clock.Advance(1'000);
  s->NotifyFailure();
  EXPECT_TRUE(s->CanRestart());
  clock.Advance(1'000);
  s->NotifyFailure();  // the third since the last reset
  EXPECT_FALSE(s->CanRestart());

  auto t = MakeRestartStrategy(Exponential(/*attempts=*/2), &clock);
  t->NotifyFailure();
  clock.Advance(1'000);
  t->NotifyFailure();
  clock.Advance(200 + 10'000);  // a long healthy run resets the count
  t->NotifyFailure();
  EXPECT_TRUE(t->CanRestart());
  EXPECT_EQ(t->BackoffMillis(), 100);
}

TEST(RestartStrategy, ExponentialDelayJitterStaysWithinTheFactorAndTheBounds) {
  ManualClock clock;
  const RestartStrategyConfiguration c = RestartStrategies::exponential_delay_restart(
      Duration(1'000), Duration(60'000), 2.0, Duration(3'600'000), 0.25);
  bool varied = false;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto s = MakeRestartStrategy(c, &clock, seed);
    s->NotifyFailure();
    const int64_t first = s->BackoffMillis();  // 1000 +- 250, at least the initial
    EXPECT_GE(first, 1'000);
    EXPECT_LE(first, 1'250);
    clock.Advance(first + 1);
    s->NotifyFailure();
    const int64_t second = s->BackoffMillis();  // 2000 +- 500
    EXPECT_GE(second, 1'500);
    EXPECT_LE(second, 2'500);
    varied |= second != 2'000;
    clock.Advance(second + 1);
  }
  EXPECT_TRUE(varied);
}

TEST(RestartStrategy, InvalidSettingsAreRefusedNamingTheSetting) {
  auto why = [](const RestartStrategyConfiguration& c) {
    return std::string(c.Validate().message());
  };
  EXPECT_NE(why(RestartStrategies::fixed_delay_restart(-1, Duration(0))).find("attempts"),
            std::string::npos);
  EXPECT_NE(why(RestartStrategies::exponential_delay_restart(Duration(100), Duration(10), 2.0,
                                                             Duration(1), 0))
                .find("initial backoff"),
            std::string::npos);
  EXPECT_NE(why(RestartStrategies::exponential_delay_restart(Duration(1), Duration(10), 1.0,
                                                             Duration(1), 0))
                .find("multiplier"),
            std::string::npos);
  EXPECT_NE(why(RestartStrategies::exponential_delay_restart(Duration(1), Duration(10), 2.0,
                                                             Duration(1), 1.5))
                .find("jitter"),
            std::string::npos);
  EXPECT_NE(why(RestartStrategies::failure_rate_restart(0, Duration(1), Duration(0)))
                .find("max failures"),
            std::string::npos);
  EXPECT_TRUE(RestartStrategies::exponential_delay_restart().Validate().ok());
}

}  // namespace
}  // namespace tidemark
