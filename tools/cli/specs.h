// tools/cli/specs.h
//
// The small languages of the `tidemark run` flags, parsed into values with a
// one-line error when they make no sense:
//   durations   "250ms", "2s", "5min", "1h" (a bare "0" is zero)
//   windows     "tumbling:5s[,offset]", "sliding:6s,2s[,offset]", "session:5s"
//   watermarks  "bounded:2s", "monotonous", "lag:10s", "punctuated:2s", "marker"
//   aggregates  "sum", "count", "min", "max", "avg", "list"
//   restarts    "none", "fixed-delay:ATTEMPTS:DELAY",
//               "exponential-delay[:INITIAL:MAX:MULTIPLIER:RESET:JITTER[:ATTEMPTS]]",
//               "failure-rate:MAX_FAILURES:INTERVAL:DELAY"
#ifndef TM_TOOLS_CLI_SPECS_H_
#define TM_TOOLS_CLI_SPECS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/exec/restart_strategy.h"

namespace tidemark::cli {

absl::StatusOr<Duration> ParseDuration(absl::string_view text);

// --restart-strategy (runtime/exec/restart_strategy.h); checked with Validate().
absl::StatusOr<RestartStrategyConfiguration> ParseRestartStrategy(absl::string_view text);

struct WindowSpec {
  enum class Kind { kTumbling, kSliding, kSession } kind = Kind::kTumbling;
  Duration size{0};
  Duration slide{0};
  Duration offset{0};
  Duration gap{0};
};
absl::StatusOr<WindowSpec> ParseWindowSpec(absl::string_view text);

struct WatermarkSpec {
  enum class Kind { kBounded, kMonotonous, kLag, kPunctuated, kMarker } kind = Kind::kBounded;
  Duration delay{0};
};
absl::StatusOr<WatermarkSpec> ParseWatermarkSpec(absl::string_view text);

enum class AggregateKind { kSum, kCount, kMin, kMax, kAvg, kList };
absl::StatusOr<AggregateKind> ParseAggregate(absl::string_view text);
const char* ToString(AggregateKind k);

}  // namespace tidemark::cli

#endif  // TM_TOOLS_CLI_SPECS_H_
