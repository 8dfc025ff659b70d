// tools/main.cc: the `tidemark` command line.
//
//   tidemark run  [flags]   a windowed job built from flags (see --help);
//                           --explain prints its physical plan instead
//   tidemark demo [flags]   the built-in demo: no input needed
//
// Flags are Abseil flags, given as --name=value (--input may repeat).  An
// unknown flag or a bad value is a one-line error and exit status 2, before
// anything runs (under mpirun said once, by rank 0, unless each rank has a
// command line of its own: ErrorStream below).
//
// At start-up fds 0, 1 and 2 are made sure to be open (/dev/null on a closed
// one), so no descriptor the job opens later (an eventfd, a file) becomes
// "standard input"; `run` then refuses to read a closed standard input
// (exit 2).  `run` blocks SIGINT and SIGTERM before any thread starts; its
// own thread takes them (tools/cli/run.h: handle_signals).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tools/cli/run.h"

ABSL_FLAG(std::string, socket, "", "read lines from HOST:PORT (like Flink's socketTextStream)");
ABSL_FLAG(int64_t, socket_retries, 0,
          "with --socket: Flink's maxRetry: after a closed (or refused) connection, connect "
          "again 500 ms later while fewer than this many attempts were made (0 and 1: one "
          "connection; -1: forever); then the input ends and every window fires");
ABSL_FLAG(std::string, input, "",
          "read lines from a file (repeatable: one source subtask per file; - is stdin)");
ABSL_FLAG(std::string, delimiter, ",",
          "field delimiter (use ' ' for space-separated lines, where a run of spaces separates as "
          "one; any other delimiter separates at each, so two in a row make an empty field)");
ABSL_FLAG(std::string, fields, "key,ts,value", "names of the columns, in order");
ABSL_FLAG(std::string, key, "key", "field used as the key");
ABSL_FLAG(std::string, timestamp, "ts", "field holding the event time");
ABSL_FLAG(std::string, value, "",
          "field holding the value to aggregate (empty: 1 per record); an integer literal is "
          "an exact 64-bit integer, any other number a double");
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
          "with --alignment-max-drift: how often source subtasks report their watermarks for "
          "alignment");
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
ABSL_FLAG(bool, local_aggregation, false,
          "pre-aggregate per (key, window) in the source subtasks before the key_by shuffle "
          "(tumbling and sliding windows; the same results, decimal sums up to rounding)");
ABSL_FLAG(std::string, late, "drop", "drop (count) or side (print the late side output)");
ABSL_FLAG(std::string, aggregate, "sum",
          "sum | count | min | max | avg | list (list: count, first and last timestamp of each "
          "window, as document 000 prints them)");
ABSL_FLAG(int, parallelism, 1, "parallelism of the window operator");
ABSL_FLAG(std::string, output, "text", "text or jsonl (JSON Lines; see the notes below)");
ABSL_FLAG(std::string, output_dir, "",
          "exactly-once output: committed JSON-lines files (part-*, late-*) in this directory "
          "(hidden .part-* files are not committed yet)");
ABSL_FLAG(std::string, placement, "modulo",
          "under mpirun: modulo (subtask i on rank i mod ranks) or block (contiguous subtasks "
          "per rank)");
ABSL_FLAG(std::string, output_per_rank, "",
          "under mpirun: each rank writes the results of its window subtasks, and its "
          "--trace lines, to PREFIX.RANK instead of rank 0 printing them all");
ABSL_FLAG(std::string, checkpoint_dir, "", "take checkpoints into this directory");
ABSL_FLAG(std::string, checkpoint_interval, "", "time between checkpoints (default 1s)");
ABSL_FLAG(int, tolerable_failed_checkpoints, 0,
          "with --checkpoint-dir: how many checkpoints in a row may fail before the job fails "
          "(Flink's default 0: the first failure fails it)");
ABSL_FLAG(std::string, restart_strategy, "none",
          "restart after a failure, from the latest checkpoint: none, fixed-delay:ATTEMPTS:DELAY, "
          "exponential-delay[:INITIAL:MAX:MULTIPLIER:RESET_THRESHOLD:JITTER[:ATTEMPTS]], "
          "failure-rate:MAX_FAILURES:INTERVAL:DELAY");
ABSL_FLAG(std::string, checkpoint_timeout, "10min",
          "with --checkpoint-dir or --savepoint-dir: a checkpoint not complete and durable this "
          "long after it started fails (expires)");
ABSL_FLAG(std::string, restore, "",
          "start from a checkpoint: latest (in --checkpoint-dir; a fresh start when there is "
          "none), a checkpoint directory DIR/chk-N or a savepoint directory");
ABSL_FLAG(std::string, savepoint_dir, "",
          "where savepoints go (--savepoint-on, --stop-with-savepoint-on)");
ABSL_FLAG(std::string, savepoint_on, "",
          "SIGUSR1 or SIGUSR2: on this signal take a savepoint into --savepoint-dir; the job "
          "goes on");
ABSL_FLAG(std::string, stop_with_savepoint_on, "",
          "SIGUSR1 or SIGUSR2: on this signal stop the job with a savepoint into "
          "--savepoint-dir (open windows stay in it, unfired)");
ABSL_FLAG(bool, drain, false,
          "with --stop-with-savepoint-on: send the MAX watermark first (every window fires), "
          "as Flink's stop --drain");
ABSL_FLAG(bool, incremental_checkpoints, false,
          "incremental checkpoints: each checkpoint writes only the state that changed since "
          "the retained ones and refers to their files for the rest (savepoints stay full)");
ABSL_FLAG(bool, unaligned_checkpoints, false,
          "unaligned checkpoints (FLIP-76): barriers overtake the records queued in the "
          "channels, which are stored with the checkpoint and replayed on restore; a checkpoint "
          "completes under back-pressure without waiting for them (savepoints stay aligned; "
          "not across MPI ranks)");
ABSL_FLAG(std::string, state_backend, "heap",
          "where keyed process state lives: heap or rocksdb (an embedded RocksDB per operator "
          "instance; window contents stay on the heap)");
ABSL_FLAG(std::string, state_backend_dir, "",
          "with --state-backend=rocksdb: RocksDB's working directory (default: the temp "
          "directory)");
ABSL_FLAG(bool, allow_non_restored_state, false,
          "restoring: skip the state of operators the job no longer has instead of refusing it");
ABSL_FLAG(std::string, trace, "", "watermarks: trace every record and channel watermark");
ABSL_FLAG(std::string, timeline, "", "write the watermark timeline page (HTML) to this path");
ABSL_FLAG(std::string, timeline_axis, "time",
          "the timeline's horizontal axis: time (processing time since the start) or records "
          "(records read so far, all sources together)");
ABSL_FLAG(std::string, rate, "",
          "pace the input: each source subtask reads at most N lines a second (N/s), files "
          "included; for studying a run as it unfolds (empty: as fast as it can)");
ABSL_FLAG(bool, backlog_watermark, false,
          "each source subtask sends a generalized bool watermark 'backlog' (combined with OR): "
          "true while it reads a file as fast as it can, or with --rate while it is more than a "
          "second behind its pace; false at the end of its input (shown by --trace=watermarks, "
          "--timeline and --serve)");
ABSL_FLAG(std::string, serve, "",
          "serve a live view of the job's watermarks at HOST:PORT (loopback only; port 0: any "
          "free port, printed on stderr)");
ABSL_FLAG(std::string, serve_linger, "",
          "with --serve: keep serving for this long after the job ended");
ABSL_FLAG(std::string, bad_lines, "fail", "fail (stop at the first malformed line) or skip");
ABSL_FLAG(std::string, comments, "",
          "lines starting with this prefix (e.g. '#') are comments: skipped and counted "
          "(empty: no comments; every line is data)");
ABSL_FLAG(bool, allow_extra_fields, false,
          "lines with more fields than --fields names are accepted, the extra ones ignored "
          "(default: an error naming file and line)");
ABSL_FLAG(bool, trim_spaces, false,
          "accept spaces around the timestamp field (' 1000'); default: an error naming file "
          "and line (keys and values are always trimmed)");
ABSL_FLAG(bool, skip_header, false,
          "the first line of each input is a header: skipped and counted in the summary");
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
          "demo: run each scene again with watermark alignment at this max drift and compare "
          "(off: once)");
ABSL_FLAG(std::string, scene, "both",
          "demo: drift (sources at different event-time speeds: alignment bounds the windows "
          "kept open), idle-return (the slowest also goes quiet in the middle) or both");

namespace {

constexpr char kUsage[] =
    "usage: tidemark run [--socket=HOST:PORT | --input=FILE ...] [flags]\n"
    "       tidemark demo [--duration=8s] [--timeline=FILE.html] [--alignment=500ms|off]\n"
    "                     [--scene=drift|idle-return|both]\n"
    "       tidemark help [run | demo]     the flags of a command (or: tidemark run --help)\n"
    "       tidemark --version\n";

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
    "  Savepoints: --savepoint-on=SIGUSR1 takes one into --savepoint-dir and the job\n"
    "    goes on; --stop-with-savepoint-on=SIGUSR2 stops the job with one (open\n"
    "    windows stay in it; --drain fires them first). Restore with --restore=PATH.\n"
    "  Across processes: `mpirun -n N tidemark run ...` runs the job on N ranks\n"
    "    (--placement: subtask i on rank i mod N, or in blocks); each rank reads the\n"
    "    inputs of its source subtasks, and rank 0 prints every result once (or each\n"
    "    rank writes its own, --output-per-rank=PREFIX), the summary and the timeline.\n"
    "    Traces name the rank of every subtask and channel; --dead-letter files get\n"
    "    the suffix .RANK; checkpoints are written by rank 0 (the directory must be\n"
    "    reachable from every rank).  As root add --allow-run-as-root, with more ranks\n"
    "    than cores --oversubscribe.\n";

// The command whose flags are being parsed; errors point to its help.
std::string g_command = "run";

// Where a command-line error goes, and what it starts with.  Under mpirun
// with one command line for every rank, every rank meets the same error and
// rank 0 says it for all (as run.cc's own checks do); the others keep quiet.
// With several (`mpirun -n 1 tidemark run ... : -n 1 tidemark run ...`, Open
// MPI's OMPI_NUM_APP_CTX > 1) the command lines may differ, and every rank
// says its own, naming itself.  Read from the environment: MPI is not
// initialised yet.
bool SeveralCommandLines() {
  const char* n = std::getenv("OMPI_NUM_APP_CTX");
  return n != nullptr && std::atoi(n) > 1;
}
std::ostream& ErrorStream() {
  static std::ostream muted(nullptr);
  return tidemark::ThisCluster().rank == 0 || SeveralCommandLines() ? std::cerr : muted;
}
std::string ErrorStart() {
  const tidemark::ClusterInfo c = tidemark::ThisCluster();
  return c.distributed() && SeveralCommandLines()
             ? "tidemark: rank " + std::to_string(c.rank) + ": "
             : std::string("tidemark: ");
}

// One line on stderr and exit status 2; the line points to the command's help.
int Usage(const std::string& msg) {
  ErrorStream() << ErrorStart() << msg << "; see `tidemark " << g_command << " --help`\n";
  return 2;
}

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

// The flags defined in this file (not those of libraries linked in).
bool IsCliFlag(const absl::CommandLineFlag& f) {
  return absl::EndsWith(f.Filename(), "tools/main.cc");
}

// Which commands take a flag: flags whose help starts with "demo:" are the
// demo's; --timeline and --parallelism are both commands'; all others run's.
bool FlagIsFor(const absl::CommandLineFlag& f, const std::string& command) {
  const bool demo_only = absl::StartsWith(f.Help(), "demo:");
  if (command == "demo") return demo_only || f.Name() == "timeline" || f.Name() == "parallelism";
  return !demo_only;
}

// The flags of `command`, by name.
std::vector<absl::CommandLineFlag*> FlagsOf(const std::string& command) {
  std::vector<absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags())
    if (IsCliFlag(*flag) && FlagIsFor(*flag, command)) flags.push_back(flag);
  std::sort(flags.begin(), flags.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  return flags;
}

void PrintCommandHelp(const std::string& command) {
  if (command == "run") {
    std::cout << "usage: tidemark run [--socket=HOST:PORT | --input=FILE ...] [flags]\n"
                 "  a windowed job built from flags: lines -> timestamps and watermarks -> "
                 "key_by -> window -> aggregate -> print\n";
  } else {
    std::cout << "usage: tidemark demo [flags]\n"
                 "  the built-in demo: parallel generator sources at different event-time "
                 "speeds into parallel tumbling windows, without and with watermark alignment; "
                 "scene 2: one source goes idle and comes back behind\n";
  }
  std::cout << "\nflags of tidemark " << command << ":\n";
  for (const absl::CommandLineFlag* f : FlagsOf(command)) {
    std::string help = f->Help();
    if (absl::StartsWith(help, "demo: ")) help = help.substr(6);
    // --parallelism and --timeline are run's flags too: the demo's own
    // defaults differ from the flags'.
    std::string def = f->DefaultValue();
    if (command == "demo" && f->Name() == "parallelism") def = "2";
    if (command == "demo" && f->Name() == "timeline") def = tidemark::cli::DemoOptions().timeline;
    std::cout << "  --" << Dashed(std::string(f->Name())) << " (default '" << def << "'): " << help
              << "\n";
  }
  if (command == "run") std::cout << kNotes;
}

void PrintGeneralHelp() {
  std::cout << kUsage
            << "\ncommands:\n"
               "  run    a windowed job built from flags, over files, standard input or a "
               "socket\n"
               "  demo   the built-in demo (no input needed)\n"
               "  help   the flags of a command: tidemark help run\n";
}

// Levenshtein distance (for "did you mean").
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The flag of `command` nearest to `name` (dashed), or "" when none is near.
std::string NearestFlag(const std::string& name, const std::string& command) {
  std::string best;
  size_t best_distance = 0;
  for (const absl::CommandLineFlag* f : FlagsOf(command)) {
    const std::string candidate = Dashed(std::string(f->Name()));
    size_t d = EditDistance(name, candidate);
    // A prefix of a flag ("--parallel") is near whatever its length.
    if (name.size() >= 3 && absl::StartsWith(candidate, name)) d = std::min<size_t>(d, 1);
    if (best.empty() || d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  return best_distance <= limit ? best : "";
}

// A flag given without the one it works with would be accepted and do
// nothing; the first such, as "--X needs ...", or "" when there is none.
// (Those that run.cc checks on the options themselves are not repeated.)
std::string FlagWithoutWhatItNeeds(const std::set<std::string>& given) {
  const auto has = [&given](const char* name) { return given.count(name) > 0; };
  if (has("dead_letter") && absl::GetFlag(FLAGS_bad_lines) != "skip")
    return "--dead-letter needs --bad-lines=skip (only skipped lines are written there)";
  if (has("state_backend_dir") && absl::GetFlag(FLAGS_state_backend) != "rocksdb")
    return "--state-backend-dir needs --state-backend=rocksdb";
  if (has("alignment_update_interval") && absl::GetFlag(FLAGS_alignment_max_drift).empty())
    return "--alignment-update-interval needs --alignment-max-drift";
  if (has("per_split_watermarks") && absl::GetFlag(FLAGS_source_parallelism) <= 0)
    return "--per-split-watermarks needs --source-parallelism (without it each file is a "
           "subtask of its own)";
  if (has("tolerable_failed_checkpoints") && absl::GetFlag(FLAGS_checkpoint_dir).empty())
    return "--tolerable-failed-checkpoints needs --checkpoint-dir";
  if (has("socket_retries") && absl::GetFlag(FLAGS_socket).empty())
    return "--socket-retries needs --socket (files and standard input are not reconnected)";
  if (has("allow_non_restored_state") && absl::GetFlag(FLAGS_restore).empty())
    return "--allow-non-restored-state needs --restore";
  if (has("value") && !absl::GetFlag(FLAGS_value).empty() &&
      absl::GetFlag(FLAGS_aggregate) == "list")
    return "--value is not used by --aggregate=list (it counts the records and shows their "
           "timestamps)";
  if (has("checkpoint_timeout") && absl::GetFlag(FLAGS_checkpoint_dir).empty() &&
      absl::GetFlag(FLAGS_savepoint_dir).empty())
    return "--checkpoint-timeout needs --checkpoint-dir or --savepoint-dir";
  return "";
}

// Parses argv[first..] as flags of `command`; returns false (after printing)
// on a bad flag.
bool ParseFlags(int argc, char** argv, int first, const std::string& command,
                std::vector<std::string>* inputs, std::set<std::string>* given_names) {
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
    const std::string given = Dashed(name);
    std::replace(name.begin(), name.end(), '-', '_');
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag != nullptr && !IsCliFlag(*flag)) flag = nullptr;
    if (flag == nullptr && !has_value && name.rfind("no", 0) == 0) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && IsCliFlag(*flag) && flag->IsOfType<bool>()) {
        value = "false";
        has_value = true;
      } else {
        flag = nullptr;
      }
    }
    if (flag == nullptr) {
      const std::string nearest = NearestFlag(given, command);
      Usage(absl::StrCat("unknown flag --", given,
                         nearest.empty() ? "" : absl::StrCat(" (did you mean --", nearest, "?)")));
      return false;
    }
    if (!FlagIsFor(*flag, command)) {
      Usage(absl::StrCat("--", Dashed(std::string(flag->Name())), " is a flag of `tidemark ",
                         command == "run" ? "demo" : "run", "`, not of `tidemark ", command, "`"));
      return false;
    }
    if (!has_value) {
      if (!flag->IsOfType<bool>()) {
        Usage(absl::StrCat("flag --", given, " needs a value (--", given, "=...)"));
        return false;
      }
      value = "true";
    }
    // `--restore=` (say, from an unset shell variable) would otherwise read
    // as the flag left out: a job started afresh instead of restored, or run
    // without its checkpoints or output directory.  A string flag takes an
    // empty value only where its help says what empty means ("empty: ...").
    if (has_value && value.empty() && flag->IsOfType<std::string>() &&
        flag->Help().find("empty:") == std::string::npos) {
      Usage(absl::StrCat("flag --", given, " has an empty value; give one, or leave the flag out"));
      return false;
    }
    given_names->insert(std::string(flag->Name()));
    if (name == "input") {
      inputs->push_back(value);
      continue;
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      Usage(absl::StrCat("bad value for --", given, ": ", error));
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
  if (argc < 2) {
    ErrorStream() << ErrorStart() << "missing command\n" << kUsage;
    return 2;
  }
  const std::string command = argv[1];
  if (command == "--version" || command == "version") {
    std::cout << "tidemark " << TIDEMARK_VERSION << "\n";
    return 0;
  }
  if (command == "help" || command == "--help" || command == "-h") {
    if (argc < 3) {
      PrintGeneralHelp();
      return 0;
    }
    const std::string of = argv[2];
    if (of != "run" && of != "demo") {
      ErrorStream() << ErrorStart() << "no command '" << of << "' (commands: run, demo)\n";
      return 2;
    }
    PrintCommandHelp(of);
    return 0;
  }
  std::vector<std::string> inputs;
  if (command != "run" && command != "demo") {
    ErrorStream() << ErrorStart() << "unknown command '" << command
                  << "' (see `tidemark --help`)\n";
    return 2;
  }
  g_command = command;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "--helpfull") {
      PrintCommandHelp(command);
      return 0;
    }
  }
  std::set<std::string> given;
  if (!ParseFlags(argc, argv, 2, command, &inputs, &given)) return 2;
  if (command == "run") {
    if (const std::string why = FlagWithoutWhatItNeeds(given); !why.empty()) return Usage(why);
  }

  if (command == "demo") {
    tidemark::cli::DemoOptions d;
    d.duration = absl::GetFlag(FLAGS_duration);
    if (!absl::GetFlag(FLAGS_timeline).empty()) d.timeline = absl::GetFlag(FLAGS_timeline);
    d.sources = absl::GetFlag(FLAGS_sources);
    d.parallelism = absl::GetFlag(FLAGS_parallelism) > 1 ? absl::GetFlag(FLAGS_parallelism) : 2;
    d.progress = absl::GetFlag(FLAGS_progress);
    d.progress_on_terminal = isatty(STDERR_FILENO) == 1;
    d.alignment = absl::GetFlag(FLAGS_alignment);
    d.scene = absl::GetFlag(FLAGS_scene);
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
  o.format.allow_extra_fields = absl::GetFlag(FLAGS_allow_extra_fields);
  o.format.trim_spaces = absl::GetFlag(FLAGS_trim_spaces);
  o.skip_header = absl::GetFlag(FLAGS_skip_header);
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
  o.local_aggregation = absl::GetFlag(FLAGS_local_aggregation);
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
  o.savepoint_dir = absl::GetFlag(FLAGS_savepoint_dir);
  o.savepoint_on = absl::GetFlag(FLAGS_savepoint_on);
  o.stop_with_savepoint_on = absl::GetFlag(FLAGS_stop_with_savepoint_on);
  o.drain = absl::GetFlag(FLAGS_drain);
  o.allow_non_restored_state = absl::GetFlag(FLAGS_allow_non_restored_state);
  o.incremental_checkpoints = absl::GetFlag(FLAGS_incremental_checkpoints);
  o.unaligned_checkpoints = absl::GetFlag(FLAGS_unaligned_checkpoints);
  o.state_backend = absl::GetFlag(FLAGS_state_backend);
  o.state_backend_dir = absl::GetFlag(FLAGS_state_backend_dir);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.timeline = absl::GetFlag(FLAGS_timeline);
  o.timeline_axis = absl::GetFlag(FLAGS_timeline_axis);
  o.rate = absl::GetFlag(FLAGS_rate);
  o.backlog_watermark = absl::GetFlag(FLAGS_backlog_watermark);
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
  // The savepoint signals (--savepoint-on, --stop-with-savepoint-on) too,
  // only when asked for (otherwise SIGUSR1 keeps its default: it ends us).
  for (const std::string* name : {&o.savepoint_on, &o.stop_with_savepoint_on}) {
    const int sig = tidemark::cli::SavepointSignal(*name);
    if (sig > 0) sigaddset(&signals, sig);
  }
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  o.handle_signals = true;
  return tidemark::cli::RunCommand(o, std::cout, std::cerr);
}
