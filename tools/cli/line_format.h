// tools/cli/line_format.h
//
// How `tidemark run` reads a line of text into a record: split by a delimiter
// into named fields (--fields=id,ts,vc), pick the key, the event timestamp and
// the value by name, keep only lines matching --where=FIELD=VALUE, and parse
// the timestamp as epoch ms, epoch seconds, or a strftime-style pattern in a
// time zone (absl::ParseTime, e.g. "%Y-%m-%d %H:%M:%E*S", which reads both
// "10:10:01" and "10:10:04.989").
//
// With `markers` (--watermarks=marker) a line "#watermark <ts>" is a marker.
// With a `comment_prefix` (--comments=#, off by default) a line starting with
// it (after leading blanks; a marker wins) is a comment: no record, reported
// as such so the caller counts it.  Otherwise a line starting with '#' is an
// ordinary line: "#tag1,1000" is a record with key "#tag1".
#ifndef TM_TOOLS_CLI_LINE_FORMAT_H_
#define TM_TOOLS_CLI_LINE_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::cli {

struct CliRecord {
  std::string key;
  Timestamp ts = kNoTimestamp;
  // The value column: an integer literal ([+-]digits) is read as an exact
  // int64 (`is_integer`, `int_value`); any other number as a double (`value`).
  // Without a value column every record counts 1.
  double value = 1;
  int64_t int_value = 1;
  bool is_integer = true;
  std::string line;
  Timestamp marker = kMinTimestamp;  // the watermark of a "#watermark" line
  int source = 0;                    // index of the input it came from
  bool is_marker() const { return marker != kMinTimestamp; }
};

struct LineFormatOptions {
  char delimiter = ',';
  std::vector<std::string> fields = {"key", "ts", "value"};
  std::string key_field = "key";
  std::string timestamp_field = "ts";
  std::string value_field;  // empty: every record counts 1
  std::vector<std::pair<std::string, std::string>> where;
  std::string time_format = "ms";  // "ms", "s" or a pattern
  std::string timezone = "UTC";
  size_t max_line_length = 1 << 20;
  bool markers = false;        // "#watermark <ts>" lines are markers
  std::string comment_prefix;  // empty: no line is a comment
  // More fields than --fields names are an error unless allowed (then the
  // extra ones are ignored; Jackson's IGNORE_TRAILING_UNMAPPABLE, which
  // Flink's CSV format sets).
  bool allow_extra_fields = false;
  // Spaces around the timestamp field (" 1000") are an error unless allowed
  // (Jackson's TRIM_SPACES).  Keys and values are always trimmed.
  bool trim_spaces = false;
};

// Why LineFormat::Parse() returned no record.
enum class DroppedLine { kNone, kComment, kFiltered };

class LineFormat {
 public:
  // Checks the options (fields named by key/timestamp/value/where exist, the
  // time zone is known).
  static absl::StatusOr<LineFormat> Make(const LineFormatOptions& options);

  // The record for `line`, nullopt when the line is filtered out (--where) or
  // a comment (then `*dropped`, when given, says which; else kNone), or an
  // error saying what is wrong with it (without the location; the caller adds
  // file and line).
  absl::StatusOr<std::optional<CliRecord>> Parse(absl::string_view line,
                                                 DroppedLine* dropped = nullptr) const;

  // Parses a timestamp field as configured.
  absl::StatusOr<Timestamp> ParseTimestamp(absl::string_view text) const;

  const absl::TimeZone& zone() const { return zone_; }

 private:
  LineFormatOptions options_;
  absl::TimeZone zone_;
  int key_index_ = -1;
  int ts_index_ = -1;
  int value_index_ = -1;
  std::vector<std::pair<int, std::string>> where_;
};

// Loads an IANA zone ("Asia/Shanghai", "UTC") or a fixed offset ("+08:00").
absl::StatusOr<absl::TimeZone> LoadZone(const std::string& name);

// "2018-10-01 10:11:22.000" in `zone`; "MIN"/"MAX" at the ends of the range.
std::string FormatTime(Timestamp ts, const absl::TimeZone& zone, bool millis = true);

}  // namespace tidemark::cli

// Records cross MPI ranks (and checkpoints) with this codec.
template <>
struct tidemark::StateCodec<tidemark::cli::CliRecord> {
  static void Encode(internal::StateWriter& w, const cli::CliRecord& r) {
    internal::Encode(w, r.key);
    internal::Encode(w, r.ts);
    internal::Encode(w, r.value);
    internal::Encode(w, r.int_value);
    internal::Encode(w, r.is_integer);
    internal::Encode(w, r.line);
    internal::Encode(w, r.marker);
    internal::Encode(w, r.source);
  }
  static cli::CliRecord Decode(internal::StateReader& r) {
    cli::CliRecord c;
    c.key = internal::Decode<std::string>(r);
    c.ts = internal::Decode<Timestamp>(r);
    c.value = internal::Decode<double>(r);
    c.int_value = internal::Decode<int64_t>(r);
    c.is_integer = internal::Decode<bool>(r);
    c.line = internal::Decode<std::string>(r);
    c.marker = internal::Decode<Timestamp>(r);
    c.source = internal::Decode<int>(r);
    return c;
  }
};

#endif  // TM_TOOLS_CLI_LINE_FORMAT_H_
