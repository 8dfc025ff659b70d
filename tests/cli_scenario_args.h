// tests/cli_scenario_args.h: input files and the command lines of the seed
// scenarios S3-S8 (documents 001 and 002), for cli_test (one process) and
// cli_mpi_test (the same under mpirun).
#ifndef TM_TESTS_CLI_SCENARIO_ARGS_H_
#define TM_TESTS_CLI_SCENARIO_ARGS_H_

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli_test_util.h"

namespace tidemark::testing {

// A temporary input file of these lines.
inline std::string InputFile(const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = TempPath(name);
  WriteFile(path, absl::StrJoin(lines, "\n") + "\n");
  return path;
}

// The lines that start with `prefix` (keep) or the others, in order.
inline std::vector<std::string> Filter(const std::vector<std::string>& lines,
                                       const std::string& prefix, bool keep) {
  std::vector<std::string> out;
  for (const auto& l : lines)
    if (absl::StartsWith(l, prefix) == keep) out.push_back(l);
  return out;
}

// Document 001: id,ts_seconds,vc lines of sensor ws_001 at these seconds of
// 2020-01-01 10:00 (Asia/Shanghai), vc 1.
inline std::vector<std::string> VcLines(const std::vector<int>& secs) {
  std::vector<std::string> lines;
  for (int s : secs) lines.push_back(absl::StrCat("ws_001,", 1577844000 + s, ",1"));
  return lines;
}

inline std::vector<std::string> Doc001Args(const std::string& input, const std::string& window,
                                           const std::string& watermarks = "bounded:2s") {
  return {"run",
          "--input=" + input,
          "--fields=id,ts,vc",
          "--key=id",
          "--timestamp=ts",
          "--value=vc",
          "--time-format=s",
          "--watermarks=" + watermarks,
          "--watermark-interval=per-record",
          "--window=" + window,
          "--timezone=Asia/Shanghai",
          "--parallelism=2",
          "--summary=false"};
}

// Document 002: sid,callType,ts,duration, tumbling 5 s with `lateness`.
inline std::vector<std::string> S8Args(const std::string& input, const std::string& lateness) {
  return {"run",
          "--input=" + input,
          "--fields=sid,callType,ts,duration",
          "--key=sid",
          "--timestamp=ts",
          "--value=duration",
          "--where=callType=success",
          "--time-format=%Y-%m-%d %H:%M:%E*S",
          "--timezone=Asia/Shanghai",
          "--watermarks=bounded:0s",
          "--watermark-interval=per-record",
          "--window=tumbling:5s",
          "--allowed-lateness=" + lateness,
          "--parallelism=2"};
}

inline std::vector<std::string> S8Lines(const std::vector<std::string>& times) {
  std::vector<std::string> lines;
  for (const auto& t : times) lines.push_back("sid_1,success,2030-12-01 10:10:" + t + ",1");
  return lines;
}

}  // namespace tidemark::testing

#endif  // TM_TESTS_CLI_SCENARIO_ARGS_H_
