// tools/cli/run.h
//
// `tidemark run`: a windowed job built from flags.  RunCommand() checks every
// option first (nothing starts when one is wrong), builds
//   lines (socket / files / stdin) -> parse -> timestamps and watermarks
//     -> key_by(key) -> window -> aggregate -> print
//   (+ the late side output, + traces and the timeline)
// runs it (or, with --explain, prints its plan), and returns the process exit
// status: 0 on success, 2 on any error
// (after one line on `err` saying what and where), 128 + the signal number
// when interrupted (see handle_signals).
#ifndef TM_TOOLS_CLI_RUN_H_
#define TM_TOOLS_CLI_RUN_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tools/cli/line_format.h"
#include "tools/cli/specs.h"
#include "tools/cli/trace.h"

namespace tidemark::cli {

struct RunOptions {
  std::string socket;               // HOST:PORT
  int64_t socket_retries = 0;       // -1: forever (Flink's maxRetry)
  std::vector<std::string> inputs;  // files, "-" for stdin
  LineFormatOptions format;
  std::string watermarks = "bounded:0s";
  std::string watermark_interval = "200ms";  // or "per-record"
  std::string idleness;                      // empty: none
  // Watermark alignment of the source subtasks (empty: off).
  std::string alignment_max_drift;
  std::string alignment_update_interval = "1s";
  // Source subtasks for the --input files (0: one per file).  Fewer than
  // files: file i is read by subtask i % N, a subtask's files interleaved
  // line by line, each a split with its own watermark generator unless
  // per_split_watermarks is false (then one generator over the merged lines).
  int source_parallelism = 0;
  bool per_split_watermarks = true;
  std::string flush_after;      // empty: none (WatermarkStrategy::with_flush_after)
  std::string max_future_skew;  // empty: none (WatermarkStrategy::with_max_future_skew)
  std::string window = "tumbling:5s";
  std::string allowed_lateness = "0s";
  // Pre-aggregate in the source subtasks before the key_by
  // (WindowedStream::local_aggregation; tumbling and sliding windows).
  bool local_aggregation = false;
  std::string late = "drop";  // drop | side
  std::string aggregate = "sum";
  int parallelism = 1;
  std::string output = "text";  // text | jsonl
  // Exactly-once output: committed JSON-lines part files in this directory
  // (results; late records in late-* files) instead of standard output.
  std::string output_dir;
  // Checkpoints: into this directory, every checkpoint_interval ("1s"; empty
  // with a directory: 1s); restore: "" | latest | a checkpoint directory.
  std::string checkpoint_dir;
  std::string checkpoint_interval;
  // Failed checkpoints tolerated in a row (0: the first fails the job), and
  // how long a checkpoint may take ("10min", Flink's default).
  int tolerable_failed_checkpoints = 0;
  std::string checkpoint_timeout = "10min";
  std::string restore;
  // Savepoints (docs/checkpoints.md, "Savepoints"): written under
  // savepoint_dir when the signal named by savepoint_on arrives (the job goes
  // on) or by stop_with_savepoint_on (the job stops with one; with drain the
  // MAX watermark fires every window first).  "SIGUSR1" / "SIGUSR2" (or
  // "USR1", "USR2"); the caller blocks them (SavepointSignal).  Without
  // --checkpoint-dir checkpoints are kept in memory, none periodic.
  std::string savepoint_dir;
  std::string savepoint_on;
  std::string stop_with_savepoint_on;
  bool drain = false;
  // Restoring a changed job: skip the state of operators it no longer has.
  bool allow_non_restored_state = false;
  bool incremental_checkpoints = false;  // --incremental-checkpoints
  bool unaligned_checkpoints = false;    // --unaligned-checkpoints
  // --state-backend: "heap" or "rocksdb" (in --state-backend-dir).
  std::string state_backend = "heap";
  std::string state_backend_dir;
  // --restart-strategy (tools/cli/specs.h): "none" or e.g. "fixed-delay:3:1s".
  std::string restart_strategy = "none";
  // Under mpirun (runtime/exec/cluster.h): where subtasks run (modulo | block),
  // and, when set, each rank writes its own results to PREFIX.RANK instead
  // of rank 0 printing every rank's.
  std::string placement = "modulo";
  std::string output_per_rank;
  std::string trace;                   // "" | watermarks
  std::string timeline;                // path of the HTML page
  std::string timeline_axis = "time";  // time | records
  // --rate=N/s: each source subtask reads at most N lines a second (any
  // input); empty: unpaced.
  std::string rate;
  // --backlog-watermark: each source subtask sends a generalized bool
  // watermark "backlog" (OR over channels; FLIP-309's isProcessingBacklog):
  // true while it reads a file unpaced (or, with --rate, while it is more than
  // a second behind its pace), false when it ends or keeps its pace
  // (docs/generalized-watermarks.md, "In the CLI").
  bool backlog_watermark = false;
  // --serve=HOST:PORT: the live view while the job runs (a loopback address
  // only; port 0: a free one, printed on stderr); --serve-linger=D: keep
  // serving for D after the job ended (a signal ends it early).
  std::string serve;
  std::string serve_linger;
  std::string bad_lines = "fail";  // fail | skip
  std::string dead_letter;         // with skip: file receiving skipped lines
  bool summary = true;
  std::string comments;  // --comments: prefix of comment lines; empty: none
  // --skip-header: the first line of each input (of a socket: its first
  // line) is a header, skipped and counted (Flink's CsvReader
  // ignoreFirstLine).
  bool skip_header = false;
  // Standard input was closed when the process started (main() then put
  // /dev/null on fd 0): reading "-" is an error, not an empty input.
  bool stdin_closed = false;
  // SIGINT and SIGTERM, those of them that the caller blocked in every
  // thread (before starting any), are taken by a thread of RunCommand's own:
  // the first cancels the job, which then reports what it left open (windows
  // not fired, records in flight), writes the summary and the timeline, and
  // RunCommand returns 128 + the signal (130, 143); a second one ends the
  // process at once with _exit(128 + signal).
  bool handle_signals = false;
  // --explain: check the options, print the job's physical plan on `out`
  // (StreamExecutionEnvironment::ExplainPlan) and return 0 without running it:
  // no input is read and no output file (--timeline, --dead-letter) is opened.
  bool explain = false;
};

// SIGUSR1 / SIGUSR2 for "SIGUSR1", "USR1", "SIGUSR2", "USR2"; 0 for "" and
// -1 for anything else.
int SavepointSignal(const std::string& name);

int RunCommand(const RunOptions& options, std::ostream& out, std::ostream& err);

// `tidemark demo`.
struct DemoOptions {
  std::string duration = "8s";
  std::string timeline = "/tmp/tidemark-demo-timeline.html";
  int sources = 3;
  int parallelism = 2;
  bool progress = true;
  // The progress line is redrawn in place (\r) only on a terminal; elsewhere
  // (a file, a pipe, a CI log) it is a plain line every few seconds.
  bool progress_on_terminal = false;
  // The max drift of the second, aligned run of each scene ("off": one run
  // per scene, unaligned).
  std::string alignment = "500ms";
  // "drift" (sources at different event-time speeds), "idle-return" (the
  // slowest also goes quiet in the middle) or "both", one after the other.
  std::string scene = "both";
};
int DemoCommand(const DemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace tidemark::cli

#endif  // TM_TOOLS_CLI_RUN_H_
