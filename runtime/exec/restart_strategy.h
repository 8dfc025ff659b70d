// runtime/exec/restart_strategy.h
//
// Restart strategies (Flink's RestartBackoffTimeStrategy): after a task
// failure, whether the job may restart and how long to wait first.  The
// decisions follow Flink's NoRestart, FixedDelay, ExponentialDelay (Flink 2,
// FLIP-364) and FailureRate strategies:
//
//   none               never restarts.
//   fixed-delay        restarts while the failures so far are at most
//                      `attempts`, each after `delay`.
//   exponential-delay  restarts after initial_backoff * multiplier^n (n: the
//                      restarts since the last reset), at most max_backoff,
//                      +- jitter * that backoff; when the job ran
//                      reset_backoff_threshold past the last restart before it
//                      failed again, n goes back to 0; restarts while n is at
//                      most attempts_before_reset_backoff.  Failures before
//                      the pending restart's time are merged into it.
//   failure-rate       restarts after `delay` unless this failure is the
//                      max_failures_per_interval-th one within
//                      failure_rate_interval (Flink's rule: the job fails when
//                      the last max_failures_per_interval failures, this one
//                      included, lie within the interval).
//
// A strategy reads time from a Clock (tests use a ManualClock) and its jitter
// from a seeded generator, so every decision can be tested without sleeping.
// docs/checkpoints.md, "Restarts", says how a job restarts.
#ifndef TM_RUNTIME_RESTART_STRATEGY_H_
#define TM_RUNTIME_RESTART_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

// Which strategy and its settings (Flink's RestartStrategyConfiguration).
// Defaults are Flink 2's.
struct RestartStrategyConfiguration {
  enum class Kind { kNone, kFixedDelay, kExponentialDelay, kFailureRate };
  Kind kind = Kind::kNone;
  // fixed-delay
  int attempts = 1;
  // fixed-delay and failure-rate
  Duration delay{1000};
  // exponential-delay
  Duration initial_backoff{1000};
  Duration max_backoff{60000};
  double backoff_multiplier = 1.5;
  Duration reset_backoff_threshold{3600000};
  double jitter_factor = 0.1;
  int attempts_before_reset_backoff = 2147483647;
  // failure-rate
  int max_failures_per_interval = 1;
  Duration failure_rate_interval{60000};

  // INVALID_ARGUMENT naming the setting that is out of range.
  absl::Status Validate() const;
  // e.g. "fixed-delay (3 attempts, delay 1000 ms)".
  std::string Describe() const;
};

// Flink's names, in snake_case:
//   env.set_restart_strategy(RestartStrategies::fixed_delay_restart(3, 1s));
struct RestartStrategies {
  static RestartStrategyConfiguration no_restart();
  static RestartStrategyConfiguration fixed_delay_restart(int attempts, Duration delay);
  static RestartStrategyConfiguration exponential_delay_restart(
      Duration initial_backoff, Duration max_backoff, double backoff_multiplier,
      Duration reset_backoff_threshold, double jitter_factor,
      int attempts_before_reset_backoff = 2147483647);
  // Flink 2's default settings (1 s, 1 min, x1.5, reset after 1 h, jitter 0.1).
  static RestartStrategyConfiguration exponential_delay_restart();
  static RestartStrategyConfiguration failure_rate_restart(int max_failures_per_interval,
                                                           Duration failure_rate_interval,
                                                           Duration delay);
};

namespace internal {

// One job's restart decisions (Flink's RestartBackoffTimeStrategy).  Call
// NotifyFailure() at each failure, then CanRestart(), then BackoffMillis().
// Not thread-safe (one supervisor uses it).
class RestartBackoffTimeStrategy {
 public:
  virtual ~RestartBackoffTimeStrategy() = default;
  // Counts a failure; false when it was merged into a restart already pending
  // (exponential-delay only).
  virtual bool NotifyFailure() = 0;
  virtual bool CanRestart() const = 0;
  // How long to wait before restarting, in milliseconds.
  virtual int64_t BackoffMillis() const = 0;
};

// `clock` must outlive the strategy; `seed` drives the jitter.
std::unique_ptr<RestartBackoffTimeStrategy> MakeRestartStrategy(
    const RestartStrategyConfiguration& config, const Clock* clock, uint64_t seed = 0x7d1de);

}  // namespace internal
}  // namespace tidemark

#endif  // TM_RUNTIME_RESTART_STRATEGY_H_
