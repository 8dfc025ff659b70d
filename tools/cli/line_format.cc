#include "tools/cli/line_format.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tidemark/operators/csv.h"

namespace tidemark::cli {
namespace {

// [+-]?[0-9]+: read as an exact int64.
bool IsIntegerLiteral(absl::string_view v) {
  if (!v.empty() && (v.front() == '+' || v.front() == '-')) v.remove_prefix(1);
  if (v.empty()) return false;
  for (char c : v)
    if (c < '0' || c > '9') return false;
  return true;
}

// A field's text in a message, its control bytes escaped (a NUL cut the
// message short where it is read as a C string).
std::string Shown(absl::string_view text) {
  return internal::CsvShownText(std::string_view(text.data(), text.size()));
}

}  // namespace

absl::StatusOr<absl::TimeZone> LoadZone(const std::string& name) {
  absl::TimeZone tz;
  if (name == "UTC" || name.empty()) return absl::UTCTimeZone();
  if ((name[0] == '+' || name[0] == '-') && name.size() >= 3) {
    int h = 0, m = 0;
    const absl::string_view rest = absl::string_view(name).substr(1);
    std::vector<absl::string_view> parts = absl::StrSplit(rest, ':');
    if (absl::SimpleAtoi(parts[0], &h) && (parts.size() == 1 || absl::SimpleAtoi(parts[1], &m))) {
      const int secs = (h * 3600 + m * 60) * (name[0] == '-' ? -1 : 1);
      return absl::FixedTimeZone(secs);
    }
  }
  if (!absl::LoadTimeZone(name, &tz)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown time zone '", name, "' (an IANA name such as Asia/Shanghai, or +08:00)"));
  }
  return tz;
}

std::string FormatTime(Timestamp ts, const absl::TimeZone& zone, bool millis) {
  if (ts == kMinTimestamp) return "MIN";
  if (ts == kMaxTimestamp) return "MAX";
  return absl::FormatTime(millis ? "%Y-%m-%d %H:%M:%E3S" : "%Y-%m-%d %H:%M:%S",
                          absl::FromUnixMillis(ts), zone);
}

absl::StatusOr<LineFormat> LineFormat::Make(const LineFormatOptions& o) {
  LineFormat f;
  f.options_ = o;
  auto index_of = [&](const std::string& name, const char* what) -> absl::StatusOr<int> {
    auto it = std::find(o.fields.begin(), o.fields.end(), name);
    if (it == o.fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", what, "=", name, " is not one of --fields=", absl::StrJoin(o.fields, ",")));
    }
    return static_cast<int>(it - o.fields.begin());
  };
  if (o.fields.empty()) return absl::InvalidArgumentError("--fields must name at least one column");
  // A name twice would leave which column --key/--timestamp/--value mean to
  // the first match.
  for (size_t i = 0; i < o.fields.size(); ++i) {
    if (std::find(o.fields.begin(), o.fields.begin() + static_cast<std::ptrdiff_t>(i),
                  o.fields[i]) != o.fields.begin() + static_cast<std::ptrdiff_t>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("--fields=", absl::StrJoin(o.fields, ","),
                                                     " names '", o.fields[i], "' twice"));
    }
  }
  auto k = index_of(o.key_field, "key");
  if (!k.ok()) return k.status();
  f.key_index_ = *k;
  auto t = index_of(o.timestamp_field, "timestamp");
  if (!t.ok()) return t.status();
  f.ts_index_ = *t;
  if (!o.value_field.empty()) {
    auto v = index_of(o.value_field, "value");
    if (!v.ok()) return v.status();
    f.value_index_ = *v;
  }
  for (const auto& [name, value] : o.where) {
    auto w = index_of(name, "where");
    if (!w.ok()) return w.status();
    f.where_.emplace_back(*w, value);
  }
  auto zone = LoadZone(o.timezone);
  if (!zone.ok()) return zone.status();
  f.zone_ = *zone;
  return f;
}

absl::StatusOr<Timestamp> LineFormat::ParseTimestamp(absl::string_view text) const {
  text = absl::StripAsciiWhitespace(text);
  const std::string& fmt = options_.time_format;
  auto all_digits = [](absl::string_view t) {
    if (!t.empty() && (t[0] == '-' || t[0] == '+')) t.remove_prefix(1);
    return !t.empty() &&
           std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (fmt == "ms") {
    int64_t v = 0;
    if (!absl::SimpleAtoi(text, &v)) {
      if (all_digits(text)) {
        return absl::InvalidArgumentError(
            absl::StrCat("timestamp '", Shown(text), "' is out of range (64-bit milliseconds)"));
      }
      return absl::InvalidArgumentError(
          absl::StrCat("timestamp '", Shown(text), "' is not an integer number of milliseconds"));
    }
    return v;
  }
  if (fmt == "s") {
    int64_t v = 0;
    if (absl::SimpleAtoi(text, &v)) {
      int64_t ms = 0;
      if (__builtin_mul_overflow(v, int64_t{1000}, &ms)) {
        return absl::InvalidArgumentError(
            absl::StrCat("timestamp '", Shown(text), "' is out of range (64-bit milliseconds)"));
      }
      return ms;
    }
    if (all_digits(text)) {
      return absl::InvalidArgumentError(
          absl::StrCat("timestamp '", Shown(text), "' is out of range (64-bit milliseconds)"));
    }
    double d = 0;
    // No hexadecimal ("0x10" would read as 16 seconds): decimal seconds only.
    if (absl::StrContains(text, 'x') || absl::StrContains(text, 'X') ||
        !absl::SimpleAtod(text, &d) || !std::isfinite(d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("timestamp '", Shown(text), "' is not a number of seconds"));
    }
    if (std::fabs(d) > 9.2e15) {
      return absl::InvalidArgumentError(
          absl::StrCat("timestamp '", Shown(text), "' is out of range (64-bit milliseconds)"));
    }
    return static_cast<Timestamp>(std::llround(d * 1000));
  }
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(fmt, text, zone_, &t, &err)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timestamp '", Shown(text), "' does not match '", fmt, "': ", err));
  }
  // ToUnixMillis saturates (a year 300000000, or "infinite-future", which
  // the parser accepts): out of range is an error, as for milliseconds.
  if (t <= absl::FromUnixMillis(std::numeric_limits<int64_t>::min()) ||
      t >= absl::FromUnixMillis(std::numeric_limits<int64_t>::max()) + absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("timestamp '", Shown(text), "' is out of range (64-bit milliseconds)"));
  }
  return absl::ToUnixMillis(t);
}

absl::StatusOr<std::optional<CliRecord>> LineFormat::Parse(absl::string_view line,
                                                           DroppedLine* dropped) const {
  if (dropped != nullptr) *dropped = DroppedLine::kNone;
  if (line.size() > options_.max_line_length) {
    return absl::InvalidArgumentError(absl::StrCat("line is longer than ", options_.max_line_length,
                                                   " bytes (", line.size(), ")"));
  }
  const absl::string_view stripped = absl::StripAsciiWhitespace(line);
  if (stripped.empty()) return absl::InvalidArgumentError("empty line");
  constexpr absl::string_view kMarker = "#watermark";
  if (options_.markers && absl::StartsWith(stripped, kMarker)) {
    auto ts = ParseTimestamp(stripped.substr(kMarker.size()));
    if (!ts.ok()) return ts.status();
    if (*ts == kMinTimestamp) return absl::InvalidArgumentError("marker watermark out of range");
    CliRecord r;
    r.marker = *ts;
    r.line = std::string(line);
    return std::optional<CliRecord>(std::move(r));
  }
  if (!options_.comment_prefix.empty() && absl::StartsWith(stripped, options_.comment_prefix)) {
    if (dropped != nullptr) *dropped = DroppedLine::kComment;
    return std::optional<CliRecord>();
  }
  std::vector<absl::string_view> parts;
  if (options_.delimiter == ' ') {
    parts = absl::StrSplit(stripped, ' ', absl::SkipEmpty());
  } else {
    parts = absl::StrSplit(stripped, options_.delimiter);
  }
  if (parts.size() < options_.fields.size() ||
      (parts.size() > options_.fields.size() && !options_.allow_extra_fields)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", options_.fields.size(), " fields (", absl::StrJoin(options_.fields, ","),
        "), found ", parts.size(),
        parts.size() > options_.fields.size() ? " (--allow-extra-fields ignores the extra ones)"
                                              : ""));
  }
  for (const auto& [i, value] : where_) {
    if (absl::StripAsciiWhitespace(parts[i]) != value) {
      if (dropped != nullptr) *dropped = DroppedLine::kFiltered;
      return std::optional<CliRecord>();
    }
  }
  CliRecord r;
  r.key = std::string(absl::StripAsciiWhitespace(parts[key_index_]));
  const absl::string_view ts_text = parts[ts_index_];
  if (!options_.trim_spaces && absl::StripAsciiWhitespace(ts_text) != ts_text &&
      !absl::StripAsciiWhitespace(ts_text).empty()) {
    const bool leading = absl::ascii_isspace(static_cast<unsigned char>(ts_text.front()));
    return absl::InvalidArgumentError(absl::StrCat(
        "field '", options_.fields[ts_index_], "': timestamp '", Shown(ts_text), "' has a ",
        leading ? "leading" : "trailing", " space (--trim-spaces allows it)"));
  }
  auto ts = ParseTimestamp(ts_text);
  if (!ts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("field '", options_.fields[ts_index_], "': ", ts.status().message()));
  }
  if (*ts == kMinTimestamp) {
    return absl::InvalidArgumentError("timestamp is Long.MIN_VALUE (the no-timestamp marker)");
  }
  r.ts = *ts;
  if (value_index_ >= 0) {
    const absl::string_view v = absl::StripAsciiWhitespace(parts[value_index_]);
    if (IsIntegerLiteral(v)) {
      // Exact: an integer literal that does not fit in 64 bits is an error,
      // never a rounded double.
      if (!absl::SimpleAtoi(v, &r.int_value)) {
        return absl::InvalidArgumentError(absl::StrCat("field '", options_.fields[value_index_],
                                                       "': '", Shown(v),
                                                       "' is outside the 64-bit integer range"));
      }
      r.is_integer = true;
      r.value = static_cast<double>(r.int_value);
    } else {
      // No hexadecimal: "0x7FFFFFFFFFFFFFFF" would be read as a rounded double,
      // where the same integer in decimal is exact.
      if (absl::StrContains(v, 'x') || absl::StrContains(v, 'X') ||
          !absl::SimpleAtod(v, &r.value) || !std::isfinite(r.value)) {
        return absl::InvalidArgumentError(absl::StrCat("field '", options_.fields[value_index_],
                                                       "': '", Shown(v), "' is not a number"));
      }
      r.is_integer = false;
    }
  }
  r.line = std::string(line);
  return std::optional<CliRecord>(std::move(r));
}

}  // namespace tidemark::cli
