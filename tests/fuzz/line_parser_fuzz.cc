// libFuzzer target: the `tidemark run` line parser (tools/cli/line_format.h).
// The first byte picks a line format (delimiter, time format, where filter);
// the rest is the line.  The parser must never crash, hang or read out of
// bounds, and what it accepts must be a well-formed record.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tools/cli/line_format.h"

namespace {

using tidemark::cli::LineFormat;
using tidemark::cli::LineFormatOptions;

const LineFormat& FormatFor(uint8_t selector) {
  static LineFormat* formats[4] = {nullptr, nullptr, nullptr, nullptr};
  const int i = selector % 4;
  if (formats[i] == nullptr) {
    LineFormatOptions o;
    switch (i) {
      case 0:  // key,ts(ms),value; "#watermark T" markers
        o.value_field = "value";
        o.markers = true;
        break;
      case 1:  // id ts(s) vc, space separated
        o.delimiter = ' ';
        o.fields = {"id", "ts", "vc"};
        o.key_field = "id";
        o.value_field = "vc";
        o.time_format = "s";
        break;
      case 2:  // document 002's format
        o.fields = {"sid", "callType", "ts", "duration"};
        o.key_field = "sid";
        o.value_field = "duration";
        o.where = {{"callType", "success"}};
        o.time_format = "%Y-%m-%d %H:%M:%E*S";
        o.timezone = "+08:00";
        break;
      default:  // short lines; '#' comments and markers
        o.max_line_length = 64;
        o.markers = true;
        o.comment_prefix = "#";
        break;
    }
    formats[i] = new LineFormat(*LineFormat::Make(o));
  }
  return *formats[i];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const LineFormat& format = FormatFor(data[0]);
  const std::string line(reinterpret_cast<const char*>(data + 1), size - 1);
  tidemark::cli::DroppedLine dropped;
  auto r = format.Parse(line, &dropped);
  if (dropped != tidemark::cli::DroppedLine::kNone && !(r.ok() && !r->has_value())) std::abort();
  if (r.ok() && r->has_value()) {
    const auto& rec = **r;
    if (!rec.is_marker() && rec.ts == tidemark::kNoTimestamp) std::abort();
    if (rec.line != line) std::abort();
  }
  return 0;
}
