// examples/example_main.h
//
// What every seed example program shares: its command-line flags, where its
// lines come from, and how it runs.  Include it from the program's one source
// file (it defines flags); the program defines --port itself, with its
// document's default:
//
//   ABSL_FLAG(int, port, 9000, "...");
//
// Flags:
//   --host, --port   the socket to read lines from, as the documents'
//                    socketTextStream (start `nc -lk PORT` there first and type
//                    into it);
//   --input=PATH     read the lines from this file instead;
//   --timezone       zone of the wall-clock times printed (default
//                    Asia/Shanghai = UTC+8, as the documents);
//   --watermarks     per_record | periodic | auto: see examples/seed_jobs.h,
//                    "Typing slowly".  auto (default): per_record for --input,
//                    periodic for the socket;
//   --auto_watermark_interval  the periodic interval (Flink's default 200ms);
//   --parallelism    of the window operator and the printing (the documents
//                    use 1, which prints without "N> " prefixes).
#ifndef TM_EXAMPLES_EXAMPLE_MAIN_H_
#define TM_EXAMPLES_EXAMPLE_MAIN_H_

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "examples/seed_jobs.h"
#include "tidemark/api/environment.h"
#include "tidemark/operators/sinks.h"

ABSL_DECLARE_FLAG(int, port);
ABSL_FLAG(std::string, host, "localhost",
          "host to read lines from (run `nc -lk PORT` there and type the records)");
ABSL_FLAG(std::string, input, "", "read the lines from this file instead of the socket");
ABSL_FLAG(std::string, timezone, tidemark::seeds::kDefaultTimeZone,
          "time zone of the printed wall-clock times (the documents use UTC+8)");
ABSL_FLAG(std::string, watermarks, "auto",
          "per_record: a periodic watermark right after every record (what typing into nc "
          "gives); periodic: only on the auto-watermark timer; auto: per_record for --input, "
          "periodic for the socket");
ABSL_FLAG(absl::Duration, auto_watermark_interval, absl::Milliseconds(200),
          "interval of periodic watermarks");
ABSL_FLAG(int, parallelism, 1, "parallelism of the window operator and of printing");

namespace tidemark::seeds {

// Parses the flags and sets up `env`; returns the options for BuildSn.
// Exits with status 2 on a bad flag.
inline SeedOptions ParseExampleFlags(int argc, char** argv, const char* usage,
                                     StreamExecutionEnvironment& env) {
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
  SeedOptions o;
  std::string note;
  absl::StatusOr<absl::TimeZone> tz = LoadSeedTimeZone(absl::GetFlag(FLAGS_timezone), &note);
  if (!tz.ok()) {
    std::cerr << "--timezone: " << tz.status().message() << "\n";
    std::exit(2);
  }
  if (!note.empty()) std::cerr << "note: " << note << "\n";
  o.tz = *tz;
  const std::string mode = absl::GetFlag(FLAGS_watermarks);
  if (mode == "auto") {
    o.per_record_watermarks = !absl::GetFlag(FLAGS_input).empty();
  } else if (mode == "per_record" || mode == "periodic") {
    o.per_record_watermarks = mode == "per_record";
  } else {
    std::cerr << "--watermarks must be per_record, periodic or auto, not '" << mode << "'\n";
    std::exit(2);
  }
  const int p = absl::GetFlag(FLAGS_parallelism);
  const absl::Duration interval = absl::GetFlag(FLAGS_auto_watermark_interval);
  if (p <= 0 || interval < absl::ZeroDuration()) {
    std::cerr << "--parallelism must be positive and --auto_watermark_interval not negative\n";
    std::exit(2);
  }
  env.set_parallelism(p);
  env.set_auto_watermark_interval(Duration(absl::ToInt64Milliseconds(interval)));
  return o;
}

// The input lines: the file of --input (read by one subtask, in order), or
// the socket --host:--port.
inline DataStream<std::string> OpenLines(StreamExecutionEnvironment& env) {
  const std::string path = absl::GetFlag(FLAGS_input);
  if (!path.empty()) return env.read_text_file(path).set_parallelism(1);
  return env.socket_text_stream(absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port));
}

// Prints one whole line to standard output, never interleaved with print()
// sinks.
inline void PrintLine(const std::string& line) {
  std::lock_guard<std::mutex> lock(PrintMutex());
  std::cout << line << "\n" << std::flush;
}

// Runs the job; prints its error and returns 1 if it failed.
inline int RunExample(StreamExecutionEnvironment& env, const std::string& job_name) {
  JobResult r = env.execute(job_name);
  if (!r.ok()) {
    std::cerr << job_name << " failed: " << r.status << "\n";
    return 1;
  }
  return 0;
}

}  // namespace tidemark::seeds

#endif  // TM_EXAMPLES_EXAMPLE_MAIN_H_
