#include "tidemark/runtime/exec/restart_strategy.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tidemark {

absl::Status RestartStrategyConfiguration::Validate() const {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("restart strategy: ", what));
  };
  switch (kind) {
    case Kind::kNone:
      return absl::OkStatus();
    case Kind::kFixedDelay:
      if (attempts < 0) return bad("fixed-delay attempts must not be negative");
      if (delay.count() < 0) return bad("fixed-delay delay must not be negative");
      return absl::OkStatus();
    case Kind::kExponentialDelay:
      if (initial_backoff.count() < 1) return bad("initial backoff must be at least 1 ms");
      if (max_backoff.count() < 1) return bad("max backoff must be at least 1 ms");
      if (initial_backoff > max_backoff)
        return bad("initial backoff must not be higher than max backoff");
      if (!(backoff_multiplier > 1)) return bad("backoff multiplier must be greater than 1");
      if (reset_backoff_threshold.count() < 1)
        return bad("reset backoff threshold must be at least 1 ms");
      if (!(jitter_factor >= 0 && jitter_factor <= 1))
        return bad("jitter factor must be in [0, 1]");
      if (attempts_before_reset_backoff < 1)
        return bad("attempts before reset backoff must be at least 1");
      return absl::OkStatus();
    case Kind::kFailureRate:
      if (max_failures_per_interval < 1) return bad("max failures per interval must be at least 1");
      if (failure_rate_interval.count() < 1)
        return bad("failure rate interval must be at least 1 ms");
      if (delay.count() < 0) return bad("failure-rate delay must not be negative");
      return absl::OkStatus();
  }
  return bad("unknown kind");
}

std::string RestartStrategyConfiguration::Describe() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kFixedDelay:
      return absl::StrCat("fixed-delay (", attempts, " attempts, delay ", delay.count(), " ms)");
    case Kind::kExponentialDelay:
      return absl::StrCat("exponential-delay (initial ", initial_backoff.count(), " ms, max ",
                          max_backoff.count(), " ms, x", backoff_multiplier, ", reset after ",
                          reset_backoff_threshold.count(), " ms, jitter ", jitter_factor,
                          attempts_before_reset_backoff == 2147483647
                              ? std::string()
                              : absl::StrCat(", ", attempts_before_reset_backoff, " attempts"),
                          ")");
    case Kind::kFailureRate:
      return absl::StrCat("failure-rate (", max_failures_per_interval, " failures per ",
                          failure_rate_interval.count(), " ms, delay ", delay.count(), " ms)");
  }
  return "?";
}

RestartStrategyConfiguration RestartStrategies::no_restart() { return {}; }

RestartStrategyConfiguration RestartStrategies::fixed_delay_restart(int attempts, Duration delay) {
  RestartStrategyConfiguration c;
  c.kind = RestartStrategyConfiguration::Kind::kFixedDelay;
  c.attempts = attempts;
  c.delay = delay;
  return c;
}

RestartStrategyConfiguration RestartStrategies::exponential_delay_restart(
    Duration initial_backoff, Duration max_backoff, double backoff_multiplier,
    Duration reset_backoff_threshold, double jitter_factor, int attempts_before_reset_backoff) {
  RestartStrategyConfiguration c;
  c.kind = RestartStrategyConfiguration::Kind::kExponentialDelay;
  c.initial_backoff = initial_backoff;
  c.max_backoff = max_backoff;
  c.backoff_multiplier = backoff_multiplier;
  c.reset_backoff_threshold = reset_backoff_threshold;
  c.jitter_factor = jitter_factor;
  c.attempts_before_reset_backoff = attempts_before_reset_backoff;
  return c;
}

RestartStrategyConfiguration RestartStrategies::exponential_delay_restart() {
  RestartStrategyConfiguration c;
  c.kind = RestartStrategyConfiguration::Kind::kExponentialDelay;
  return c;
}

RestartStrategyConfiguration RestartStrategies::failure_rate_restart(int max_failures_per_interval,
                                                                     Duration failure_rate_interval,
                                                                     Duration delay) {
  RestartStrategyConfiguration c;
  c.kind = RestartStrategyConfiguration::Kind::kFailureRate;
  c.max_failures_per_interval = max_failures_per_interval;
  c.failure_rate_interval = failure_rate_interval;
  c.delay = delay;
  return c;
}

namespace internal {
namespace {

class NoRestart final : public RestartBackoffTimeStrategy {
 public:
  bool NotifyFailure() override { return true; }
  bool CanRestart() const override { return false; }
  int64_t BackoffMillis() const override { return 0; }
};

// Restarts while the failures so far are at most `attempts`.
class FixedDelay final : public RestartBackoffTimeStrategy {
 public:
  FixedDelay(int attempts, int64_t delay_ms) : attempts_(attempts), delay_ms_(delay_ms) {}
  bool NotifyFailure() override {
    ++failures_;
    return true;
  }
  bool CanRestart() const override { return failures_ <= attempts_; }
  int64_t BackoffMillis() const override { return delay_ms_; }

 private:
  const int64_t attempts_;
  const int64_t delay_ms_;
  int64_t failures_ = 0;
};

// As Flink's FailureRateRestartBackoffTimeStrategy: keeps the times of the
// last max_failures + 1 failures and fails when all of them lie within the
// interval, so up to max_failures failures in an interval restart (the
// default of 1 restarts once).
class FailureRate final : public RestartBackoffTimeStrategy {
 public:
  FailureRate(const Clock* clock, int max_failures, int64_t interval_ms, int64_t delay_ms)
      : clock_(clock),
        max_failures_(static_cast<size_t>(max_failures)),
        interval_ms_(interval_ms),
        delay_ms_(delay_ms) {}
  bool NotifyFailure() override {
    if (times_.size() > max_failures_) times_.pop_front();
    times_.push_back(clock_->NowMillis());
    return true;
  }
  bool CanRestart() const override {
    if (times_.size() <= max_failures_) return true;
    return clock_->NowMillis() - times_.front() > interval_ms_;
  }
  int64_t BackoffMillis() const override { return delay_ms_; }

 private:
  const Clock* clock_;
  const size_t max_failures_;
  const int64_t interval_ms_;
  const int64_t delay_ms_;
  std::deque<Timestamp> times_;
};

// Flink 2's (FLIP-364): the n-th restart since the last reset waits
// initial * multiplier^n (+- jitter), clamped to [initial, max]; a failure
// more than the reset threshold after the pending restart's time resets n.
class ExponentialDelay final : public RestartBackoffTimeStrategy {
 public:
  ExponentialDelay(const Clock* clock, const RestartStrategyConfiguration& c, uint64_t seed)
      : clock_(clock),
        initial_ms_(c.initial_backoff.count()),
        max_ms_(c.max_backoff.count()),
        multiplier_(c.backoff_multiplier),
        reset_ms_(c.reset_backoff_threshold.count()),
        jitter_(c.jitter_factor),
        attempts_(c.attempts_before_reset_backoff),
        rng_(seed) {}

  bool NotifyFailure() override {
    const int64_t now = clock_->NowMillis();
    // Merged into the pending restart: a failure before its time.  (Flink
    // merges at <=, failures of tasks still waiting for that restart;
    // tidemark restarts the whole job and starts the next attempt once the
    // backoff has passed, so a failure at the restart's time is that
    // attempt's, a new one: with <= a job failing within the same
    // millisecond was restarted again and again without a backoff.)
    if (has_next_ && now < next_restart_ms_) return false;
    if (has_next_ && now - next_restart_ms_ >= reset_ms_) attempt_ = 0;
    next_restart_ms_ = now + ActualBackoff();
    has_next_ = true;
    ++attempt_;
    return true;
  }
  bool CanRestart() const override { return attempt_ <= attempts_; }
  int64_t BackoffMillis() const override {
    return has_next_ ? std::max<int64_t>(0, next_restart_ms_ - clock_->NowMillis()) : 0;
  }

 private:
  // As Flink: the jitter is taken of the uncapped backoff, then the sum is
  // held within [initial, max].
  int64_t ActualBackoff() {
    const double raw = std::min(
        static_cast<double>(initial_ms_) * std::pow(multiplier_, static_cast<double>(attempt_)),
        9.0e18);
    int64_t jitter = 0;
    if (jitter_ > 0) {
      const int64_t offset = static_cast<int64_t>(raw * jitter_);
      jitter = std::uniform_int_distribution<int64_t>(-offset, offset)(rng_);
    }
    const double total = raw + static_cast<double>(jitter);
    return std::max(initial_ms_,
                    total >= static_cast<double>(max_ms_) ? max_ms_ : static_cast<int64_t>(total));
  }

  const Clock* clock_;
  const int64_t initial_ms_;
  const int64_t max_ms_;
  const double multiplier_;
  const int64_t reset_ms_;
  const double jitter_;
  const int64_t attempts_;
  std::mt19937_64 rng_;
  int64_t attempt_ = 0;  // restarts since the last reset
  bool has_next_ = false;
  Timestamp next_restart_ms_ = 0;
};

}  // namespace

std::unique_ptr<RestartBackoffTimeStrategy> MakeRestartStrategy(
    const RestartStrategyConfiguration& c, const Clock* clock, uint64_t seed) {
  using Kind = RestartStrategyConfiguration::Kind;
  switch (c.kind) {
    case Kind::kNone:
      break;
    case Kind::kFixedDelay:
      return std::make_unique<FixedDelay>(c.attempts, c.delay.count());
    case Kind::kExponentialDelay:
      return std::make_unique<ExponentialDelay>(clock, c, seed);
    case Kind::kFailureRate:
      return std::make_unique<FailureRate>(clock, c.max_failures_per_interval,
                                           c.failure_rate_interval.count(), c.delay.count());
  }
  return std::make_unique<NoRestart>();
}

}  // namespace internal
}  // namespace tidemark
