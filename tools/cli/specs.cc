#include "tools/cli/specs.h"

#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tidemark::cli {

absl::StatusOr<RestartStrategyConfiguration> ParseRestartStrategy(absl::string_view text) {
  const std::vector<std::string> f = absl::StrSplit(text, ':');
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--restart-strategy=", text, ": ", why));
  };
  auto duration = [&](size_t i, const char* what, Duration* out) -> absl::Status {
    absl::StatusOr<Duration> d = ParseDuration(f[i]);
    if (!d.ok()) return bad(absl::StrCat(what, ": ", d.status().message()));
    *out = *d;
    return absl::OkStatus();
  };
  auto integer = [&](size_t i, const char* what, int* out) -> absl::Status {
    if (!absl::SimpleAtoi(f[i], out))
      return bad(absl::StrCat(what, " '", f[i], "' is not a number"));
    return absl::OkStatus();
  };
  auto real = [&](size_t i, const char* what, double* out) -> absl::Status {
    if (!absl::SimpleAtod(f[i], out))
      return bad(absl::StrCat(what, " '", f[i], "' is not a number"));
    return absl::OkStatus();
  };
  RestartStrategyConfiguration c;
  using Kind = RestartStrategyConfiguration::Kind;
  const std::string& kind = f[0];
  absl::Status s;
  if (kind == "none" || kind == "off" || kind == "disable") {
    if (f.size() != 1) return bad("none takes no settings");
  } else if (kind == "fixed-delay") {
    if (f.size() != 3) return bad("expected fixed-delay:ATTEMPTS:DELAY, e.g. fixed-delay:3:1s");
    c.kind = Kind::kFixedDelay;
    if (s = integer(1, "attempts", &c.attempts); !s.ok()) return s;
    if (s = duration(2, "delay", &c.delay); !s.ok()) return s;
  } else if (kind == "exponential-delay") {
    c.kind = Kind::kExponentialDelay;
    if (f.size() != 1 && f.size() != 6 && f.size() != 7) {
      return bad(
          "expected exponential-delay (Flink's defaults) or "
          "exponential-delay:INITIAL:MAX:MULTIPLIER:RESET_THRESHOLD:JITTER[:ATTEMPTS], e.g. "
          "exponential-delay:1s:1min:1.5:1h:0.1");
    }
    if (f.size() > 1) {
      if (s = duration(1, "initial backoff", &c.initial_backoff); !s.ok()) return s;
      if (s = duration(2, "max backoff", &c.max_backoff); !s.ok()) return s;
      if (s = real(3, "backoff multiplier", &c.backoff_multiplier); !s.ok()) return s;
      if (s = duration(4, "reset backoff threshold", &c.reset_backoff_threshold); !s.ok()) return s;
      if (s = real(5, "jitter factor", &c.jitter_factor); !s.ok()) return s;
      if (f.size() == 7) {
        if (s = integer(6, "attempts before reset backoff", &c.attempts_before_reset_backoff);
            !s.ok())
          return s;
      }
    }
  } else if (kind == "failure-rate") {
    if (f.size() != 4) {
      return bad("expected failure-rate:MAX_FAILURES:INTERVAL:DELAY, e.g. failure-rate:3:5min:10s");
    }
    c.kind = Kind::kFailureRate;
    if (s = integer(1, "max failures per interval", &c.max_failures_per_interval); !s.ok())
      return s;
    if (s = duration(2, "failure rate interval", &c.failure_rate_interval); !s.ok()) return s;
    if (s = duration(3, "delay", &c.delay); !s.ok()) return s;
  } else {
    return bad(
        "expected none, fixed-delay:ATTEMPTS:DELAY, exponential-delay[:...] or "
        "failure-rate:MAX_FAILURES:INTERVAL:DELAY");
  }
  if (s = c.Validate(); !s.ok()) return bad(std::string(s.message()));
  return c;
}

absl::StatusOr<Duration> ParseDuration(absl::string_view text) {
  absl::string_view t = absl::StripAsciiWhitespace(text);
  size_t i = 0;
  if (i < t.size() && t[i] == '-') ++i;
  while (i < t.size() && absl::ascii_isdigit(static_cast<unsigned char>(t[i]))) ++i;
  const absl::string_view number = t.substr(0, i), unit = t.substr(i);
  int64_t n = 0;
  if (number.empty() || number == "-" || !absl::SimpleAtoi(number, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration '", text, "': expected a number and a unit (ms, s, min, h)"));
  }
  int64_t factor = 0;
  if (unit == "ms")
    factor = 1;
  else if (unit == "s")
    factor = 1000;
  else if (unit == "min" || unit == "m")
    factor = 60'000;
  else if (unit == "h")
    factor = 3'600'000;
  else if (unit.empty() && n == 0)
    factor = 1;
  else {
    return absl::InvalidArgumentError(
        absl::StrCat("bad duration '", text, "': unit must be ms, s, min or h"));
  }
  int64_t ms = 0;
  if (__builtin_mul_overflow(n, factor, &ms)) {
    return absl::InvalidArgumentError(absl::StrCat("bad duration '", text, "': too large"));
  }
  return Duration(ms);
}

absl::StatusOr<WindowSpec> ParseWindowSpec(absl::string_view text) {
  const size_t colon = text.find(':');
  const absl::string_view kind = text.substr(0, colon);
  std::vector<absl::string_view> args;
  if (colon != absl::string_view::npos) args = absl::StrSplit(text.substr(colon + 1), ',');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad window '", text, "': ", why));
  };
  std::vector<Duration> d;
  for (absl::string_view a : args) {
    auto v = ParseDuration(a);
    if (!v.ok()) return bad(v.status().message());
    d.push_back(*v);
  }
  WindowSpec w;
  if (kind == "tumbling") {
    if (d.empty() || d.size() > 2) return bad("expected tumbling:SIZE[,OFFSET]");
    w.kind = WindowSpec::Kind::kTumbling;
    w.size = d[0];
    if (d.size() == 2) w.offset = d[1];
    if (w.size.count() <= 0) return bad("size must be > 0");
    if (std::abs(w.offset.count()) >= w.size.count()) return bad("|offset| must be < size");
  } else if (kind == "sliding") {
    if (d.size() < 2 || d.size() > 3) return bad("expected sliding:SIZE,SLIDE[,OFFSET]");
    w.kind = WindowSpec::Kind::kSliding;
    w.size = d[0];
    w.slide = d[1];
    if (d.size() == 3) w.offset = d[2];
    if (w.size.count() <= 0) return bad("size must be > 0");
    if (w.slide.count() <= 0) return bad("slide must be > 0");
    if (std::abs(w.offset.count()) >= w.slide.count()) return bad("|offset| must be < slide");
  } else if (kind == "session") {
    if (d.size() != 1) return bad("expected session:GAP");
    w.kind = WindowSpec::Kind::kSession;
    w.gap = d[0];
    if (w.gap.count() <= 0) return bad("gap must be > 0");
  } else {
    return bad("kind must be tumbling, sliding or session");
  }
  return w;
}

absl::StatusOr<WatermarkSpec> ParseWatermarkSpec(absl::string_view text) {
  const size_t colon = text.find(':');
  const absl::string_view kind = text.substr(0, colon);
  WatermarkSpec w;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad watermarks '", text, "': ", why));
  };
  if (kind == "monotonous" || kind == "marker") {
    if (colon != absl::string_view::npos) return bad("takes no argument");
    w.kind = kind == "marker" ? WatermarkSpec::Kind::kMarker : WatermarkSpec::Kind::kMonotonous;
    return w;
  }
  if (kind == "bounded")
    w.kind = WatermarkSpec::Kind::kBounded;
  else if (kind == "lag")
    w.kind = WatermarkSpec::Kind::kLag;
  else if (kind == "punctuated")
    w.kind = WatermarkSpec::Kind::kPunctuated;
  else
    return bad("expected bounded:D, monotonous, lag:D, punctuated:D or marker");
  if (colon == absl::string_view::npos) return bad("needs a duration, e.g. bounded:2s");
  auto d = ParseDuration(text.substr(colon + 1));
  if (!d.ok()) return bad(d.status().message());
  if (d->count() < 0) return bad("the delay must not be negative");
  w.delay = *d;
  return w;
}

absl::StatusOr<AggregateKind> ParseAggregate(absl::string_view text) {
  if (text == "sum") return AggregateKind::kSum;
  if (text == "count") return AggregateKind::kCount;
  if (text == "min") return AggregateKind::kMin;
  if (text == "max") return AggregateKind::kMax;
  if (text == "avg") return AggregateKind::kAvg;
  if (text == "list") return AggregateKind::kList;
  return absl::InvalidArgumentError(
      absl::StrCat("bad aggregate '", text, "': expected sum, count, min, max, avg or list"));
}

const char* ToString(AggregateKind k) {
  switch (k) {
    case AggregateKind::kSum:
      return "sum";
    case AggregateKind::kCount:
      return "count";
    case AggregateKind::kMin:
      return "min";
    case AggregateKind::kMax:
      return "max";
    case AggregateKind::kAvg:
      return "avg";
    case AggregateKind::kList:
      return "list";
  }
  return "?";
}

}  // namespace tidemark::cli
