// tools/main.cc: the `tidemark` command line.
//
//   tidemark run  [flags]   a windowed job built from flags (see --help);
//                           --explain prints its physical plan instead
//   tidemark demo [flags]   the built-in demo: no input needed
//
// Flags are Abseil flags, given as --name=value (--input may repeat).  An
// unknown flag or a bad value is a one-line error and exit status 2, before
// anything runs.
//
// At start-up fds 0, 1 and 2 are made sure to be open (/dev/null on a closed
// one), so no descriptor the job opens later (an eventfd, a file) becomes
// "standard input"; `run` then refuses to read a closed standard input
// (exit 2).  `run` blocks SIGINT and SIGTERM before any thread starts; its
// own thread takes them (tools/cli/run.h: handle_signals).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tools/cli/run.h"

ABSL_FLAG(std::string, socket, "", "read lines from HOST:PORT (like Flink's socketTextStream)");
ABSL_FLAG(int64_t, socket_retries, 0,
          "with --socket: retry a failed or closed connection every 500 ms, this many times in "
          "all (-1: forever; Flink's maxRetry)");
ABSL_FLAG(std::string, input, "",
          "read lines from a file (repeatable: one source subtask per file; - is stdin)");
ABSL_FLAG(std::string, delimiter, ",", "field delimiter (use ' ' for space-separated lines)");
ABSL_FLAG(std::string, fields, "key,ts,value", "names of the columns, in order");
ABSL_FLAG(std::string, key, "key", "field used as the key");
ABSL_FLAG(std::string, timestamp, "ts", "field holding the event time");
ABSL_FLAG(std::string, value, "", "field holding the value to aggregate (empty: 1 per record)");
ABSL_FLAG(std::string, where, "", "keep only records with FIELD=VALUE");
ABSL_FLAG(std::string, time_format, "ms", "ms, s, or a pattern such as '%Y-%m-%d %H:%M:%E*S'");
ABSL_FLAG(std::string, timezone, "UTC",
          "time zone for patterns and printing (IANA name or +08:00)");
ABSL_FLAG(std::string, watermarks, "bounded:0s",
          "bounded:D | monotonous | lag:D | punctuated:D | marker");
ABSL_FLAG(std::string, watermark_interval, "200ms", "periodic watermark interval, or per-record");
ABSL_FLAG(std::string, idleness, "", "mark a source idle after this long without records");
ABSL_FLAG(std::string, alignment_max_drift, "",
          "watermark alignment (FLIP-182): a source subtask more than this ahead of the slowest "
          "stops reading until it catches up (empty: off)");
ABSL_FLAG(std::string, alignment_update_interval, "1s",
          "how often source subtasks report their watermarks for alignment");
ABSL_FLAG(int, source_parallelism, 0,
          "source subtasks for the --input files (0: one per file); fewer than files: file i is "
          "read by subtask i mod N, a subtask's files interleaved line by line, each a split");
ABSL_FLAG(bool, per_split_watermarks, true,
          "with --source-parallelism: one watermark generator per file (split), the subtask "
          "emitting the minimum over its active splits, as Flink's fromSource; false: one "
          "generator over the merged lines");
ABSL_FLAG(std::string, flush_after, "",
          "after this long without records, a source's watermark advances with processing time "
          "(closes a quiet stream's last windows; later records may be late)");
ABSL_FLAG(std::string, max_future_skew, "",
          "records dated more than this ahead of the clock go to the future side output "
          "(Future> lines), not to the watermarks or windows");
ABSL_FLAG(std::string, window, "tumbling:5s",
          "tumbling:SIZE[,OFFSET] | sliding:SIZE,SLIDE[,OFFSET] | session:GAP");
ABSL_FLAG(std::string, allowed_lateness, "0s", "allowed lateness of the windows");
ABSL_FLAG(std::string, late, "drop", "drop (count) or side (print the late side output)");
ABSL_FLAG(std::string, aggregate, "sum", "sum | count | min | max | list");
ABSL_FLAG(int, parallelism, 1, "parallelism of the window operator");
ABSL_FLAG(std::string, output, "text", "text or jsonl (JSON Lines; see the notes below)");
ABSL_FLAG(std::string, output_dir, "",
          "exactly-once output: committed JSON-lines files (part-*, late-*) in this directory "
          "(hidden .part-* files are not committed yet)");
ABSL_FLAG(std::string, placement, "modulo",
          "under mpirun: modulo (subtask i on rank i mod ranks) or block (contiguous subtasks "
          "per rank)");
ABSL_FLAG(std::string, output_per_rank, "",
          "under mpirun: each rank writes the results of its window subtasks to PREFIX.RANK "
          "instead of rank 0 printing them all");
ABSL_FLAG(std::string, checkpoint_dir, "", "take checkpoints into this directory");
ABSL_FLAG(std::string, checkpoint_interval, "", "time between checkpoints (default 1s)");
ABSL_FLAG(int, tolerable_failed_checkpoints, 0,
          "how many checkpoints in a row may fail before the job fails (Flink's default 0: the "
          "first failure fails it)");
ABSL_FLAG(std::string, restart_strategy, "none",
          "restart after a failure, from the latest checkpoint: none, fixed-delay:ATTEMPTS:DELAY, "
          "exponential-delay[:INITIAL:MAX:MULTIPLIER:RESET_THRESHOLD:JITTER[:ATTEMPTS]], "
          "failure-rate:MAX_FAILURES:INTERVAL:DELAY");
ABSL_FLAG(std::string, checkpoint_timeout, "10min",
          "a checkpoint not complete and durable this long after it started fails (expires)");
ABSL_FLAG(std::string, restore, "",
          "start from a checkpoint: latest (in --checkpoint-dir; a fresh start when there is "
          "none) or a checkpoint directory DIR/chk-N");
ABSL_FLAG(std::string, trace, "", "watermarks: trace every record and channel watermark");
ABSL_FLAG(std::string, timeline, "", "write the watermark timeline page (HTML) to this path");
ABSL_FLAG(std::string, serve, "",
          "serve a live view of the job's watermarks at HOST:PORT (loopback only; port 0: any "
          "free port, printed on stderr)");
ABSL_FLAG(std::string, serve_linger, "",
          "with --serve: keep serving for this long after the job ended");
ABSL_FLAG(std::string, bad_lines, "fail", "fail (stop at the first malformed line) or skip");
ABSL_FLAG(std::string, comments, "",
          "lines starting with this prefix (e.g. '#') are comments: skipped and counted "
          "(empty: no comments; every line is data)");
ABSL_FLAG(std::string, dead_letter, "", "with --bad-lines=skip: write skipped lines here");
ABSL_FLAG(int64_t, max_line_length, 1 << 20, "longest accepted input line, in bytes");
ABSL_FLAG(bool, summary, true, "print a summary line on stderr at the end");
ABSL_FLAG(bool, explain, false,
          "print the job's physical plan (chains, tasks, partitioning of each edge) and exit "
          "without running it");
ABSL_FLAG(std::string, duration, "8s", "demo: how long the demo runs");
ABSL_FLAG(int, sources, 3, "demo: number of source subtasks");
ABSL_FLAG(bool, progress, true, "demo: live progress line");
ABSL_FLAG(std::string, alignment, "500ms",
          "demo: run again with watermark alignment at this max drift and compare (off: once)");

namespace {

constexpr char kUsage[] =
    "usage: tidemark run [--socket=HOST:PORT | --input=FILE ...] [flags]\n"
    "       tidemark demo [--duration=8s] [--timeline=FILE.html] [--alignment=500ms|off]\n"
    "Run `tidemark help` for the flags.\n";

constexpr char kNotes[] =
    "\nnotes:\n"
    "  Lines: a line starting with '#' is data like any other (key '#tag1'), unless\n"
    "    --comments=# makes it a comment (skipped, counted in the summary) or, with\n"
    "    --watermarks=marker, it is a '#watermark <ts>' marker.\n"
    "  --output=jsonl is always valid UTF-8 JSON: '\"' and '\\' are escaped, control\n"
    "    characters and DEL are written as \\n, \\t, ... or \\u00XX, and each maximal\n"
    "    invalid UTF-8 byte sequence becomes one \\ufffd (as Java decodes it); a string\n"
    "    that had invalid bytes also gets its original bytes in hex beside it:\n"
    "    key 0xC3 0x28 -> \"key\":\"\\ufffd(\",\"key_hex\":\"c328\" (likewise line_hex).\n"
    "  Standard input (--input=-, or no --input and no --socket) that is closed is an\n"
    "    error (exit 2), not an empty input.\n"
    "  --timeline and --dead-letter files are opened before the job runs; an\n"
    "    unwritable one is an error (exit 2) and nothing is read.\n"
    "  SIGINT / SIGTERM stop the job: it says how many windows had not fired and how\n"
    "    many records were in flight, writes the summary and the timeline, and exits\n"
    "    130 / 143; a second signal exits at once.\n"
    "  Across processes: `mpirun -n N tidemark run ...` runs the job on N ranks\n"
    "    (--placement: subtask i on rank i mod N, or in blocks); each rank reads the\n"
    "    inputs of its source subtasks, and rank 0 prints every result once (or each\n"
    "    rank writes its own, --output-per-rank=PREFIX), the summary and the timeline.\n"
    "    Traces name the rank of every subtask and channel; --dead-letter files get\n"
    "    the suffix .RANK; checkpoints are written by rank 0 (the directory must be\n"
    "    reachable from every rank).  As root add --allow-run-as-root, with more ranks\n"
    "    than cores --oversubscribe.\n";

int Usage(const std::string& msg) {
  std::cerr << "tidemark: " << msg << "\n" << kUsage;
  return 2;
}

void PrintHelp() {
  std::cout << kUsage << "\nflags:\n";
  for (const char* name : {"socket",
                           "input",
                           "delimiter",
                           "fields",
                           "key",
                           "timestamp",
                           "value",
                           "where",
                           "time_format",
                           "timezone",
                           "watermarks",
                           "watermark_interval",
                           "idleness",
                           "alignment_max_drift",
                           "alignment_update_interval",
                           "source_parallelism",
                           "per_split_watermarks",
                           "flush_after",
                           "max_future_skew",
                           "window",
                           "allowed_lateness",
                           "late",
                           "aggregate",
                           "parallelism",
                           "output",
                           "trace",
                           "timeline",
                           "serve",
                           "serve_linger",
                           "bad_lines",
                           "dead_letter",
                           "max_line_length",
                           "comments",
                           "summary",
                           "duration",
                           "sources",
                           "progress",
                           "socket_retries",
                           "explain",
                           "output_dir",
                           "checkpoint_dir",
                           "checkpoint_interval",
                           "tolerable_failed_checkpoints",
                           "checkpoint_timeout",
                           "restart_strategy",
                           "restore",
                           "placement",
                           "output_per_rank"}) {
    absl::CommandLineFlag* f = absl::FindCommandLineFlag(name);
    std::string dashed = name;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    std::cout << "  --" << dashed << " (default '" << f->DefaultValue() << "'): " << f->Help()
              << "\n";
  }
  std::cout << kNotes;
}

// Parses argv[first..]; returns false (after printing) on a bad flag.
bool ParseFlags(int argc, char** argv, int first, std::vector<std::string>* inputs) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      Usage(absl::StrCat("unexpected argument '", arg, "' (flags are --name=value)"));
      return false;
    }
    arg = arg.substr(2);
    std::string name = arg, value;
    bool has_value = false;
    if (const size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      has_value = true;
    }
    std::replace(name.begin(), name.end(), '-', '_');
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !has_value && name.rfind("no", 0) == 0) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) {
        value = "false";
        has_value = true;
      } else {
        flag = nullptr;
      }
    }
    if (flag == nullptr) {
      Usage(absl::StrCat("unknown flag --", arg.substr(0, arg.find('='))));
      return false;
    }
    if (!has_value) {
      if (!flag->IsOfType<bool>()) {
        Usage(absl::StrCat("flag --", name, " needs a value (--", name, "=...)"));
        return false;
      }
      value = "true";
    }
    if (name == "input") {
      inputs->push_back(value);
      continue;
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      Usage(absl::StrCat("bad value for --", name, ": ", error));
      return false;
    }
  }
  return true;
}

// Opens /dev/null on each of fds 0, 1, 2 that is closed.  Returns whether fd 0
// was.
bool GuardStandardDescriptors() {
  bool stdin_closed = false;
  for (int fd = 0; fd <= 2; ++fd) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    if (fd == 0) stdin_closed = true;
    // The lowest free descriptor: fd itself, as the lower ones are open.
    const int null_fd = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null_fd >= 0 && null_fd != fd) {
      dup2(null_fd, fd);
      close(null_fd);
    }
  }
  return stdin_closed;
}

}  // namespace

int main(int argc, char** argv) {
  const bool stdin_closed = GuardStandardDescriptors();
  if (argc < 2) return Usage("missing command");
  const std::string command = argv[1];
  if (command == "help" || command == "--help" || command == "-h") {
    PrintHelp();
    return 0;
  }
  std::vector<std::string> inputs;
  if (command != "run" && command != "demo")
    return Usage(absl::StrCat("unknown command '", command, "'"));
  if (!ParseFlags(argc, argv, 2, &inputs)) return 2;

  if (command == "demo") {
    tidemark::cli::DemoOptions d;
    d.duration = absl::GetFlag(FLAGS_duration);
    if (!absl::GetFlag(FLAGS_timeline).empty()) d.timeline = absl::GetFlag(FLAGS_timeline);
    d.sources = absl::GetFlag(FLAGS_sources);
    d.parallelism = absl::GetFlag(FLAGS_parallelism) > 1 ? absl::GetFlag(FLAGS_parallelism) : 2;
    d.progress = absl::GetFlag(FLAGS_progress);
    d.alignment = absl::GetFlag(FLAGS_alignment);
    return tidemark::cli::DemoCommand(d, std::cout, std::cerr);
  }

  tidemark::cli::RunOptions o;
  o.socket = absl::GetFlag(FLAGS_socket);
  o.socket_retries = absl::GetFlag(FLAGS_socket_retries);
  o.inputs = inputs;
  const std::string delim = absl::GetFlag(FLAGS_delimiter);
  if (delim.size() != 1) return Usage("--delimiter must be one character");
  o.format.delimiter = delim[0];
  o.format.fields = absl::StrSplit(absl::GetFlag(FLAGS_fields), ',');
  o.format.key_field = absl::GetFlag(FLAGS_key);
  o.format.timestamp_field = absl::GetFlag(FLAGS_timestamp);
  o.format.value_field = absl::GetFlag(FLAGS_value);
  const std::string where = absl::GetFlag(FLAGS_where);
  if (!where.empty()) {
    const size_t eq = where.find('=');
    if (eq == std::string::npos || eq == 0) return Usage("--where must be FIELD=VALUE");
    o.format.where.emplace_back(where.substr(0, eq), where.substr(eq + 1));
  }
  o.format.time_format = absl::GetFlag(FLAGS_time_format);
  o.format.timezone = absl::GetFlag(FLAGS_timezone);
  o.watermarks = absl::GetFlag(FLAGS_watermarks);
  o.watermark_interval = absl::GetFlag(FLAGS_watermark_interval);
  o.idleness = absl::GetFlag(FLAGS_idleness);
  o.alignment_max_drift = absl::GetFlag(FLAGS_alignment_max_drift);
  o.alignment_update_interval = absl::GetFlag(FLAGS_alignment_update_interval);
  o.source_parallelism = absl::GetFlag(FLAGS_source_parallelism);
  o.per_split_watermarks = absl::GetFlag(FLAGS_per_split_watermarks);
  o.flush_after = absl::GetFlag(FLAGS_flush_after);
  o.max_future_skew = absl::GetFlag(FLAGS_max_future_skew);
  o.window = absl::GetFlag(FLAGS_window);
  o.allowed_lateness = absl::GetFlag(FLAGS_allowed_lateness);
  o.late = absl::GetFlag(FLAGS_late);
  o.aggregate = absl::GetFlag(FLAGS_aggregate);
  o.parallelism = absl::GetFlag(FLAGS_parallelism);
  o.output = absl::GetFlag(FLAGS_output);
  o.output_dir = absl::GetFlag(FLAGS_output_dir);
  o.placement = absl::GetFlag(FLAGS_placement);
  o.output_per_rank = absl::GetFlag(FLAGS_output_per_rank);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.checkpoint_interval = absl::GetFlag(FLAGS_checkpoint_interval);
  o.tolerable_failed_checkpoints = absl::GetFlag(FLAGS_tolerable_failed_checkpoints);
  o.checkpoint_timeout = absl::GetFlag(FLAGS_checkpoint_timeout);
  o.restore = absl::GetFlag(FLAGS_restore);
  o.restart_strategy = absl::GetFlag(FLAGS_restart_strategy);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.timeline = absl::GetFlag(FLAGS_timeline);
  o.serve = absl::GetFlag(FLAGS_serve);
  o.serve_linger = absl::GetFlag(FLAGS_serve_linger);
  o.bad_lines = absl::GetFlag(FLAGS_bad_lines);
  o.dead_letter = absl::GetFlag(FLAGS_dead_letter);
  o.summary = absl::GetFlag(FLAGS_summary);
  o.comments = absl::GetFlag(FLAGS_comments);
  o.explain = absl::GetFlag(FLAGS_explain);
  o.stdin_closed = stdin_closed;
  if (absl::GetFlag(FLAGS_max_line_length) <= 0) return Usage("--max-line-length must be positive");
  o.format.max_line_length = static_cast<size_t>(absl::GetFlag(FLAGS_max_line_length));
  // SIGINT / SIGTERM: blocked here, before the job starts any thread (they all
  // inherit the mask), and taken by RunCommand's signal thread.  A signal
  // ignored by whoever started us (nohup, `cmd &` in a script) stays ignored.
  sigset_t signals;
  sigemptyset(&signals);
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && current.sa_handler != SIG_IGN)
      sigaddset(&signals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  o.handle_signals = true;
  return tidemark::cli::RunCommand(o, std::cout, std::cerr);
}
