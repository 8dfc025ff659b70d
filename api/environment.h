// api/environment.h
//
// The job API: a typed, fluent DataStream API that reads like Flink's.
//
//   using namespace tidemark;
//   StreamExecutionEnvironment env;
//   env.set_parallelism(2);
//   auto results = env.socket_text_stream("localhost", 9999)
//       .map([](const std::string& line) { return ParseEvent(line); })
//       .assign_timestamps_and_watermarks(
//           WatermarkStrategy<Event>::for_bounded_out_of_orderness(2s)
//               .with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; }))
//       .key_by([](const Event& e) { return e.id; })
//       .reduce([](const Event& a, const Event& b) { return a.Plus(b); })
//       .collect();
//   JobResult r = env.execute("my job");   // returns when every bounded input has ended
//
// Handles (DataStream<T>, KeyedStream<T, KeyFn>) are cheap values pointing
// into the environment's graph; name(), set_parallelism() change the node they
// point at.  Nothing runs until execute() (or execute_async()), which builds
// the physical graph with the job compiler (runtime/exec/job_compiler.h: chains of
// operators per subtask, one channel per upstream/downstream subtask pair on
// each edge), runs it, and returns a JobResult saying success or the first
// error (naming operator and subtask).  explain() prints that physical plan
// without running anything.
//
// Mistakes in building a job (a bad parallelism, forward between different
// parallelisms, invalid window parameters) throw std::invalid_argument where
// they are made, or make execute() return INVALID_ARGUMENT, before anything
// runs.
//
// Method names follow Flink's, in snake_case; `union` is a C++ keyword, so
// union is union_with().
#ifndef TM_API_ENVIRONMENT_H_
#define TM_API_ENVIRONMENT_H_

#include <concepts>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "tidemark/operators/basic.h"
#include "tidemark/operators/csv.h"
#include "tidemark/operators/file_sink.h"
#include "tidemark/operators/process.h"
#include "tidemark/operators/sinks.h"
#include "tidemark/operators/sources.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tidemark/runtime/exec/job_result.h"
#include "tidemark/runtime/exec/restart_strategy.h"
#include "tidemark/runtime/task/detail/node_ops.h"
#include "tidemark/runtime/task/detail/source_driver.h"
#include "tidemark/runtime/task/watermark_strategy.h"

namespace tidemark {

template <typename T>
class DataStream;
template <typename T, typename KeyFn>
class KeyedStream;
template <typename T, typename KeyFn, typename Assigner, typename TriggerT, typename EvictorT,
          bool kLocal>
class WindowedStream;
template <typename UK, typename UV>
struct MapStateDescriptor;
template <typename T>
class BroadcastStream;
namespace internal {
struct ArrivalOrder;
}

namespace internal {
// The build internals of the environment and of stream handles (graph nodes,
// the physical plan, the execution), for the CLI, tests and benchmarks.  Not
// API.  Defined below.
struct StreamAccess;
class JobExecution;
class RestartingJob;
struct JobCompilerOptions;
struct PhysicalPlan;
using OperatorFactory = std::function<std::unique_ptr<OperatorBase>()>;
using SourceFactory = std::function<std::unique_ptr<TaskInput>(const SourceBuildArgs&)>;
}  // namespace internal

// A running (or finished) job; copies share it.  The job runs while a
// JobClient refers to it: when the last one goes away without wait(), the
// job is cancelled and its threads joined (Flink's JobClient is only a
// handle and its job runs on in the cluster; here the process owns it).
class JobClient {
 public:
  JobClient();
  explicit JobClient(std::shared_ptr<internal::JobExecution> exec);
  explicit JobClient(absl::Status build_error);
  explicit JobClient(std::shared_ptr<internal::RestartingJob> restarting);
  JobClient(const JobClient&);
  JobClient(JobClient&&) noexcept;
  JobClient& operator=(const JobClient&);
  JobClient& operator=(JobClient&&) noexcept;
  ~JobClient();
  // Stops the job; wait() then returns CANCELLED.  Thread-safe.
  void cancel();
  // Blocks until the job has ended.  Any thread, any number of times: every
  // call returns the same result.
  JobResult wait();
  bool done() const;
  // Live metrics of every subtask.
  std::vector<SubtaskMetricsSnapshot> metrics() const;
  // Checkpoints (with enable_checkpointing): starts one now, unless one is
  // in progress or every source has finished; its id, or -1.
  int64_t trigger_checkpoint();
  // Blocks until checkpoint `id` is complete and durable, or `timeout`
  // passes; true when it is.
  bool wait_for_checkpoint(int64_t id, Duration timeout);
  // What checkpointing has done so far (in the current attempt).
  CheckpointSummary checkpoints() const;
  // What the restart strategy has done so far (numRestarts, the last cause).
  RestartSummary restarts() const;
  // Savepoints (Flink's; docs/checkpoints.md, "Savepoints"), with
  // checkpointing on: a consistent snapshot of the whole job, written
  // self-contained into a new directory under `dir`
  // (DIR/savepoint-<id>-<hex>), never deleted by retention; restore from it
  // with restore_from(path) / --restore=path, also at another parallelism
  // or after the job changed.  Each returns the savepoint's directory, or
  // the error (the job goes on after a failed one).
  // trigger_savepoint: the job goes on.
  absl::StatusOr<std::string> trigger_savepoint(const std::string& dir,
                                                Duration timeout = std::chrono::minutes(10));
  // stop_with_savepoint: the sources stop at the savepoint's barrier, the
  // operators hear it is complete (sink_to_files commits), and the job ends
  // (wait() gives OK, CheckpointSummary::stopped_with_savepoint) without
  // firing its open windows: they are in the savepoint.  With `drain`
  // (Flink's --drain) the sources end their input first, so the MAX
  // watermark fires every window, and the savepoint holds the finished job.
  // Not across MPI ranks.
  absl::StatusOr<std::string> stop_with_savepoint(const std::string& dir, bool drain = false,
                                                  Duration timeout = std::chrono::minutes(10));

 private:
  // The running attempt (the one the restart supervisor started last).
  std::shared_ptr<internal::JobExecution> current() const;

  std::shared_ptr<internal::JobExecution> exec_;
  std::shared_ptr<internal::RestartingJob> restarting_;  // with a restart strategy
  absl::Status build_error_;
};

// A built-in source as a value, for env.from_source(source, strategy, name)
// (Flink's fromSource: the watermark strategy runs inside the source's
// subtasks) and env.add_source(source, name).  Made by the functions in
// namespace tidemark::sources below.
template <typename T>
struct SourceDescriptor {
  // Makes one subtask's reader (called once per subtask).
  std::function<std::unique_ptr<Source<T>>()> factory;
  std::string name;  // the default name of the source node
  // false: one subtask (a collection, a socket); fixed_parallelism > 0:
  // exactly that many (one per file); otherwise the environment's.
  bool parallel = true;
  int fixed_parallelism = 0;
};

namespace sources {
// The elements of `data`, in order; one subtask.
template <typename T>
SourceDescriptor<T> collection(std::vector<T> data) {
  auto shared = std::make_shared<const std::vector<T>>(std::move(data));
  return {[shared]() -> std::unique_ptr<Source<T>> {
            return std::unique_ptr<Source<T>>(new CollectionSource<T>(shared));
          },
          "Collection Source", /*parallel=*/false, 0};
}
// f(index) for index in [0, count) (count < 0: forever), split over the
// subtasks; `rate_per_second` > 0 paces each subtask.  f may instead take
// (index, SourceOutput<T>&) and emit itself.
template <typename T, typename F>
SourceDescriptor<T> generator(F f, int64_t count, double rate_per_second = 0) {
  return {[f, count, rate_per_second]() -> std::unique_ptr<Source<T>> {
            return std::unique_ptr<Source<T>>(new GeneratorSource<T, F>(f, count, rate_per_second));
          },
          "Generator", /*parallel=*/true, 0};
}
// The general line source (LineSource<T>::Spec): files, splits, a socket,
// with a parser that sees each line's file and line.
template <typename T>
SourceDescriptor<T> lines(typename LineSource<T>::Spec spec,
                          typename LineSource<T>::Parser parser) {
  using Kind = typename LineSource<T>::Spec::Kind;
  SourceDescriptor<T> d{[spec, parser]() -> std::unique_ptr<Source<T>> {
                          return std::unique_ptr<Source<T>>(new LineSource<T>(spec, parser));
                        },
                        "Lines", spec.kind != Kind::kSocket, 0};
  if (spec.kind == Kind::kFilePerSubtask) d.fixed_parallelism = static_cast<int>(spec.paths.size());
  return d;
}
// Lines from host:port (StreamExecutionEnvironment::socket_text_stream).
SourceDescriptor<std::string> socket_text(const std::string& host, int port, char delimiter = '\n',
                                          int64_t max_retries = 0);
// Lines of one file split among the subtasks by byte ranges (read_text_file).
SourceDescriptor<std::string> text_file(const std::string& path);
// One file per subtask (read_text_files).
SourceDescriptor<std::string> text_files(const std::vector<std::string>& paths);
// Records of CSV files, one subtask per file (read_csv; operators/csv.h).
template <typename T>
SourceDescriptor<T> csv(std::vector<std::string> paths, CsvFormat<T> format,
                        CsvReadOptions options = {}) {
  if (paths.empty()) throw std::invalid_argument("read_csv needs at least one file");
  // Checks the options now, not when the job runs.
  CsvSource<T>(paths, format, options);
  const int files = static_cast<int>(paths.size());
  std::string name = files == 1 ? "CSV " + paths[0] : "CSV files";
  return {[paths, format, options]() -> std::unique_ptr<Source<T>> {
            return std::unique_ptr<Source<T>>(new CsvSource<T>(paths, format, options));
          },
          std::move(name), /*parallel=*/true, files};
}
template <typename T>
SourceDescriptor<T> csv(std::string path, CsvFormat<T> format, CsvReadOptions options = {}) {
  return csv<T>(std::vector<std::string>{std::move(path)}, std::move(format), std::move(options));
}
}  // namespace sources

class StreamExecutionEnvironment {
 public:
  StreamExecutionEnvironment();
  ~StreamExecutionEnvironment();
  StreamExecutionEnvironment(const StreamExecutionEnvironment&) = delete;
  StreamExecutionEnvironment& operator=(const StreamExecutionEnvironment&) = delete;

  // --- configuration ---
  StreamExecutionEnvironment& set_parallelism(int p);
  int parallelism() const { return parallelism_; }
  // 0 (default): Flink's default per operator (128 for parallelism <= 85).
  StreamExecutionEnvironment& set_max_parallelism(int p);
  // Periodic watermark interval; 0 turns periodic emission off.  Default 200 ms.
  StreamExecutionEnvironment& set_auto_watermark_interval(Duration d);
  // How long a partly filled batch may wait before it is sent.  Default 100 ms.
  StreamExecutionEnvironment& set_buffer_timeout(Duration d);
  StreamExecutionEnvironment& set_batch_size(size_t records);
  StreamExecutionEnvironment& set_channel_capacity(size_t batches);
  // Worker threads of the arena; default: the number of cores.
  StreamExecutionEnvironment& set_worker_threads(int n);
  StreamExecutionEnvironment& set_clock(const Clock* clock);
  // Under mpirun (runtime/exec/cluster.h): which rank runs each subtask.  Every
  // rank must set the same placement.  Default: ModuloPlacement (subtask i
  // on rank i mod ranks).
  StreamExecutionEnvironment& set_placement(PlacementFunction placement);
  // Under mpirun, before the job starts, the ranks compare the plans they
  // built (operators, parallelism, partitioning, placement) and the
  // checkpoint each restores; a rank that differs fails the job on every
  // rank.  `settings` adds what the plan does not show and every rank must
  // give alike: the window sizes, delays and other arguments a program builds
  // its job from (the command line passes its flags).
  StreamExecutionEnvironment& set_rank_settings(std::string settings);
  // The ranks this program runs on (one without mpirun).
  static ClusterInfo cluster() { return ThisCluster(); }
  StreamExecutionEnvironment& set_watermark_listener(std::shared_ptr<WatermarkListener> l);
  // One operator to a task, except from_source's timestamps and watermarks,
  // which stay in their source's task (part of the source, as in Flink).
  StreamExecutionEnvironment& disable_operator_chaining();
  // Runs the tasks on oneTBB's task_arena instead of the job's own workers
  // (the default, which keeps each task on one worker; runtime/exec/worker_pool.h).
  StreamExecutionEnvironment& use_tbb_arena_scheduler(bool on = true);
  // Checkpoints (Flink's enableCheckpointing): one every `interval` into
  // `dir` (one directory chk-<n> per checkpoint, the newest `retain` kept;
  // empty: kept in memory, nothing survives the process), with aligned
  // barriers: exactly-once state.  Sources that cannot replay (a socket,
  // stdin) make a restored job at-most-once (CheckpointSummary says so).
  StreamExecutionEnvironment& enable_checkpointing(Duration interval, std::string dir = "",
                                                   int retain = 3);
  // Incremental checkpoints (Flink's incremental RocksDB checkpoints, for the
  // heap state): each checkpoint writes only the chunks of state that no
  // retained checkpoint holds, into DIR/shared, and refers to the retained
  // checkpoints' files for the rest; retention deletes a shared file once no
  // retained checkpoint refers to it.  Savepoints stay full.  Needs a
  // checkpoint directory (without one it changes nothing).
  // docs/checkpoints.md, "Incremental checkpoints".
  StreamExecutionEnvironment& enable_incremental_checkpoints(bool on = true);
  // Unaligned checkpoints (Flink's
  // getCheckpointConfig().enableUnalignedCheckpoints(), FLIP-76): a barrier
  // overtakes the records queued in the channels, so a checkpoint completes
  // under back-pressure without waiting for them to drain; those records are
  // stored with the checkpoint (channel state) and replayed on restore.
  // Savepoints stay aligned.  A job across MPI ranks refuses it, and a
  // checkpoint with channel state cannot be restored at another parallelism.
  // docs/checkpoints.md, "Unaligned checkpoints".
  StreamExecutionEnvironment& enable_unaligned_checkpoints(bool on = true);
  // Starts the job from a checkpoint: "latest" (the newest usable one in the
  // checkpoint directory; the job starts fresh when none was ever completed,
  // and passes over damaged ones, listed in CheckpointSummary), or the path
  // of a checkpoint directory (DIR/chk-<n>) or of a savepoint.
  StreamExecutionEnvironment& restore_from(std::string checkpoint);
  // Restoring from a checkpoint or savepoint of a changed job: the state of
  // an operator the job no longer has is skipped (said in
  // CheckpointSummary::notices) instead of refused (Flink's
  // allowNonRestoredState; --allow-non-restored-state).
  StreamExecutionEnvironment& set_allow_non_restored_state(bool allow = true);
  // Failed checkpoints (Flink's CheckpointConfig): the job fails once more
  // than `n` checkpoints in a row have failed (default 0, Flink's: the first
  // failed checkpoint fails the job; a completed one resets the count).
  StreamExecutionEnvironment& set_tolerable_checkpoint_failure_number(int n);
  // A checkpoint not complete and durable `timeout` after it started fails
  // (expires; Flink's checkpoint timeout, default 10 min).  0: no limit.
  StreamExecutionEnvironment& set_checkpoint_timeout(Duration timeout);
  // Where keyed state lives (docs/checkpoints.md "State backends"):
  //   env.set_state_backend(StateBackend::rocksdb("/var/tmp/state"));
  // StateBackend::heap() (Flink's HashMapStateBackend, the default) or
  // StateBackend::rocksdb(dir) (EmbeddedRocksDBStateBackend; the program
  // links tidemark::rocksdb, else the job fails at start saying so).  On
  // RocksDB the state of keyed process functions and window contents live
  // on disk; the other operators' state stays on the heap.  RocksDB's own
  // memory per operator instance: backend.rocksdb_options (memtables, block
  // cache, open files; std::invalid_argument here for a value out of range).
  // Keyed state has the same format on both: a job restores from either,
  // except the contents of windows with reduce / aggregate, which run
  // another operator on each backend (docs/checkpoints.md, "State
  // backends").
  StreamExecutionEnvironment& set_state_backend(StateBackend backend);
  // Told of every failed checkpoint when it fails, on the checkpoint
  // coordinator's thread: its id and a line naming it and what went wrong
  // (e.g. "checkpoint 4: write state: ...: No space left on device").  Must
  // be quick and must not call back into the job.
  // Restarts after a task failure (a user function's exception, more failed
  // checkpoints in a row than tolerated, ...), as Flink's restart strategies:
  //   env.set_restart_strategy(RestartStrategies::fixed_delay_restart(3, 1s));
  // A restart rebuilds the job in this process and restores it from the
  // latest checkpoint it completed (from its start, or from what it was
  // restored from, when none completed yet; without checkpointing, from the
  // beginning).  Default none.  With checkpointing it needs a checkpoint
  // directory.  Under mpirun every rank restarts together: rank 0 decides
  // (its strategy) and names the checkpoint for all; a killed rank still ends
  // the run.  The environment must outlive the job.  docs/checkpoints.md,
  // "Restarts".
  StreamExecutionEnvironment& set_restart_strategy(RestartStrategyConfiguration strategy);
  // Told of each restart when the strategy has decided on it (before its
  // backoff), on the restart supervisor's thread: its number (1, 2, ...) and
  // the error that failed the attempt.  Must not block.  Under mpirun every
  // rank is told, with the same number and cause.
  StreamExecutionEnvironment& set_restart_listener(
      std::function<void(int64_t restart, const std::string& cause)> listener);
  StreamExecutionEnvironment& set_checkpoint_failure_listener(
      std::function<void(int64_t checkpoint_id, const std::string& error)> listener);
  // Where print() writes (default std::cout).
  StreamExecutionEnvironment& set_print_stream(std::ostream* out);
  const Clock* clock() const { return clock_; }
  std::ostream* print_stream() const { return print_stream_; }

  // --- sources ---
  // The elements of `data`, in order; non-parallel.
  template <typename T>
  DataStream<T> from_collection(std::vector<T> data);
  template <typename T, typename... Rest>
  DataStream<T> from_elements(T first, Rest... rest) {
    return from_collection(std::vector<T>{std::move(first), T(std::move(rest))...});
  }
  // f(index) for index in [0, count) (count < 0: forever), split over the
  // subtasks; `rate_per_second` > 0 limits each subtask.  f may instead take
  // (index, SourceOutput<T>&) and emit itself.
  template <typename T, typename F>
  DataStream<T> from_generator(F f, int64_t count, double rate_per_second = 0,
                               std::string name = "Generator");
  // The same with T taken from f(index)'s result (give T for an f that
  // emits itself).
  template <typename F>
  requires std::is_invocable_v<F&, int64_t>
  auto from_generator(F f, int64_t count, double rate_per_second = 0,
                      std::string name = "Generator") {
    using T = std::decay_t<std::invoke_result_t<F&, int64_t>>;
    return from_generator<T>(std::move(f), count, rate_per_second, std::move(name));
  }
  // A user source; `factory` is called once per subtask.
  template <typename T>
  DataStream<T> add_source(std::function<std::unique_ptr<Source<T>>()> factory, std::string name,
                           bool parallel = true);
  // A source with its watermark strategy (Flink's fromSource): as add_source
  // followed by assign_timestamps_and_watermarks, except that a source
  // reading several splits (SourceOutput::ForSplit) gets one watermark
  // generator per split, the subtask's watermark being the minimum over its
  // splits that are not idle (docs/semantics.md 2.7).
  template <typename T>
  DataStream<T> from_source(std::function<std::unique_ptr<Source<T>>()> factory,
                            WatermarkStrategy<T> strategy, std::string name);
  // Any built-in source (namespace sources) with its watermark strategy,
  // Flink's fromSource(source, strategy, name): the timestamp assigner and
  // the watermark generators run in the source's subtasks (chained to it,
  // at its parallelism, which set_parallelism on the result changes too), so
  // each generator sees its subtask's (or split's) records in the order they
  // were read.  Assigning them behind a rebalance (from_collection(...)
  // .assign_timestamps_and_watermarks(...) at a parallelism above 1) mixes
  // the subtasks' records first and can change what is late; explain() and
  // a warning on stderr at execute() say so.  An empty name: the source's.
  //   env.from_source(sources::csv(path, format), strategy, "readings")
  //   env.from_source(sources::socket_text("localhost", 9999), strategy, "lines")
  template <typename T>
  DataStream<T> from_source(SourceDescriptor<T> source, WatermarkStrategy<T> strategy,
                            std::string name = "");
  // A built-in source without a strategy (what read_csv, from_collection, ...
  // return).  An empty name: the source's.
  template <typename T>
  DataStream<T> add_source(SourceDescriptor<T> source, std::string name = "");
  // Lines from host:port until the peer closes (Flink's socketTextStream).
  // max_retries (Flink's maxRetry, counted as Flink's SocketTextStreamFunction
  // does): 0 (default) and 1 make one connection (a refused one fails the
  // job; a closed one ends the input); N > 1 retries a failed connection and
  // reconnects after a closed one, every 500 ms, until N attempts in all, and
  // then the input ends normally (the final watermark fires every window) or,
  // if the last attempt failed, the job fails; -1 forever.  Attempts are
  // counted in the source subtask's
  // "socketConnectAttempts" counter.  (LineSource in operators/sources.h.)
  DataStream<std::string> socket_text_stream(const std::string& host, int port,
                                             char delimiter = '\n', int64_t max_retries = 0);
  // Lines of one file, split among the subtasks by byte ranges.  A path that
  // is not a regular file (a FIFO, /dev/stdin) is read by the first subtask.
  // A directory: its files (not those in its subdirectories, nor those named
  // .* or _* or *_COPYING_*, as Flink's default FilePathFilter), each a
  // split, the splits shared round-robin among the subtasks.
  DataStream<std::string> read_text_file(const std::string& path);
  // One file per subtask (parallelism = number of files).
  DataStream<std::string> read_text_files(const std::vector<std::string>& paths);
  // These fail the job on a line longer than kDefaultMaxLineLength (16 MiB),
  // naming file and line; read_lines takes another limit and what to do
  // with such lines (Spec::max_line_length, Spec::on_over_long).
  //
  // The general forms, with a parser that sees each line's file and line.
  template <typename T>
  DataStream<T> read_lines(typename LineSource<T>::Spec spec, typename LineSource<T>::Parser parser,
                           std::string name);
  // Records of CSV files (Flink's CsvReaderFormat; operators/csv.h): one
  // subtask per file, each read whole.  Bad records fail the job naming file
  // and line, or with options.on_error = kSkip are counted
  // ("numRecordsInErrors") and given to options.on_bad_record.
  template <typename T>
  DataStream<T> read_csv(std::vector<std::string> paths, CsvFormat<T> format,
                         CsvReadOptions options = {});
  template <typename T>
  DataStream<T> read_csv(std::string path, CsvFormat<T> format, CsvReadOptions options = {}) {
    return read_csv<T>(std::vector<std::string>{std::move(path)}, std::move(format),
                       std::move(options));
  }

  // --- execution ---
  // Once per environment: a second call fails (FAILED_PRECONDITION) rather
  // than running every sink of the first job again (Flink clears the graph
  // after execute and runs only what was added since; build the next job on
  // a new environment).
  JobResult execute(const std::string& job_name = "tidemark job");
  JobClient execute_async(const std::string& job_name = "tidemark job");
  // Cancels the job this environment started last.  Thread-safe.
  void cancel();
  // The physical plan execute() would run, as text (like Flink's
  // getExecutionPlan()/explain()); see ExplainPlan().  An invalid job gives
  // "invalid job: <why>".
  std::string explain() const;

  // The physical plan as text (PhysicalPlan::Explain: one line per chain with
  // its tasks, one per network edge with its partitioning), or the error.
  absl::StatusOr<std::string> ExplainPlan() const;

 private:
  // Build internals: DataStream, KeyedStream and internal::StreamAccess.
  template <typename T>
  friend class DataStream;
  template <typename T, typename KeyFn>
  friend class KeyedStream;
  friend struct internal::StreamAccess;

  const internal::JobConfig& config() const { return config_; }
  internal::StreamNode& node(int id);
  int AddNode(std::unique_ptr<internal::StreamNode> n);
  // The graph building of the handles, not templates (environment.cc).
  // A node consuming `input`; `out` null: a sink.
  int AddOperatorNode(int input, std::string name, std::shared_ptr<internal::NodeOps> out,
                      internal::OperatorFactory factory, bool keyed);
  int AddPartitionNode(int input, internal::ShipStrategy s,
                       std::shared_ptr<internal::PartitionerFactoryBase> p);
  int AddUnionNode(const std::vector<int>& inputs);
  // `producer_side` is what the producing node needs to emit on `tag`.
  int AddSideOutputNode(int input, const std::string& tag,
                        std::shared_ptr<internal::NodeOps> producer_side,
                        std::shared_ptr<internal::NodeOps> out);
  int AddSourceNode(std::string name, std::shared_ptr<internal::NodeOps> out, bool parallel,
                    internal::SourceFactory make);
  void SetNodeName(int id, std::string name);
  void SetNodeUid(int id, std::string uid);
  void SetNodeParallelism(int id, int p);
  void SetNodeMaxParallelism(int id, int p);
  // One subtask per file (read_lines with one file per subtask).
  void FixNodeParallelism(int id, int p);
  // Marks `assigner` as assigning timestamps (PhysicalPlan::AssignerWarnings);
  // with a `source` (>= 0), as running in that source's subtasks: at its
  // parallelism, set_parallelism on either setting both.
  void MarkAssigner(int assigner, int source = -1);
  // The assigner's strategy aligns watermarks in `group`.
  void MarkAligned(int assigner, std::string group);
  std::map<int, int> source_of_assigner_;  // MarkAssigner's pairs
  // The physical plan (runtime/exec/job_compiler.h): parallelism, ship strategies,
  // chains; INVALID_ARGUMENT for an invalid graph.
  absl::StatusOr<internal::PhysicalPlan> Plan() const;
  // Builds tasks and channels; INVALID_ARGUMENT for an invalid graph.
  absl::StatusOr<std::shared_ptr<internal::JobExecution>> Build(const std::string& job_name);
  // Build with `config` instead of config_ (a restarted attempt).
  absl::StatusOr<std::shared_ptr<internal::JobExecution>> BuildWith(
      const internal::JobConfig* config);
  internal::JobCompilerOptions CompilerOptions() const;

  int parallelism_;
  int max_parallelism_ = 0;
  int worker_threads_;
  internal::JobConfig config_;
  RestartStrategyConfiguration restart_strategy_;
  std::function<void(int64_t, const std::string&)> on_restart_;
  const Clock* clock_;
  std::shared_ptr<WatermarkListener> listener_;
  bool chaining_ = true;
  PlacementFunction placement_;
  std::ostream* print_stream_;  // std::cout unless set
  std::vector<std::unique_ptr<internal::StreamNode>> nodes_;
  internal::Mutex mu_;
  // What cancel() stops: the last job started, and its restart supervisor.
  std::weak_ptr<internal::JobExecution> running_ ABSL_GUARDED_BY(mu_);
  std::weak_ptr<internal::RestartingJob> running_restarts_ ABSL_GUARDED_BY(mu_);
  bool executed_ ABSL_GUARDED_BY(mu_) = false;  // execute / execute_async was called
  // Configurations of restarted attempts (their tasks point at them).
  std::vector<std::unique_ptr<internal::JobConfig>> attempt_configs_ ABSL_GUARDED_BY(mu_);
};

namespace internal {
// CallableArgs and CollectorType: operators/basic.h.
// Whether Out can be deduced from F's Collector<Out>& parameter `I` (the
// last one), or is given: so that a wrong signature fails in one
// static_assert, not deep in a template.
template <typename Out, typename F, size_t I>
constexpr bool OutDeducible() {
  if constexpr (!std::is_void_v<Out>) {
    return true;
  } else if constexpr (std::is_class_v<F> && !requires { &F::operator(); }) {
    return false;  // a generic lambda or an overloaded call: give Out explicitly
  } else if constexpr (!requires { typename CallableArgs<F>::args; }) {
    return false;
  } else {
    using Args = typename CallableArgs<F>::args;
    if constexpr (std::tuple_size_v<Args> != I + 1) {
      return false;
    } else {
      return requires { typename CollectorType<std::tuple_element_t<I, Args>>::type; };
    }
  }
}
}  // namespace internal
template <typename T>
class DataStream {
  static_assert(std::is_copy_constructible_v<T>,
                "tidemark: a stream's records must be copyable (they are copied where a stream "
                "fans out, into collections and into state): hold a non-copyable member through "
                "a std::shared_ptr");

 public:
  using value_type = T;

  StreamExecutionEnvironment& env() const { return *env_; }

  // --- node properties ---
  DataStream name(std::string n) const {
    env_->SetNodeName(id_, std::move(n));
    return *this;
  }
  DataStream set_parallelism(int p) const {
    env_->SetNodeParallelism(id_, p);
    return *this;
  }
  // A stable id for this operator (Flink's uid): a checkpoint restores a
  // task whose operators all have uids by those uids, so the job may change
  // around it (docs/checkpoints.md).  Unique in a job (checked when it is
  // built); not empty, no ',' or line end.
  DataStream uid(std::string u) const {
    env_->SetNodeUid(id_, std::move(u));
    return *this;
  }
  DataStream set_max_parallelism(int p) const {
    env_->SetNodeMaxParallelism(id_, p);
    return *this;
  }

  // --- transformations ---
  template <typename F>
  auto map(F f) const {
    constexpr bool kCallable = std::is_invocable_v<F&, const T&> || std::is_invocable_v<F&, T&&>;
    static_assert(kCallable,
                  "tidemark: map(f) needs f(const T&) -> Out or f(T&&) -> Out, T the stream's "
                  "record type");
    if constexpr (!kCallable) {
      return *this;
    } else {
      using Out = typename internal::MapResult<F, T>::type;
      static_assert(!std::is_void_v<Out>,
                    "tidemark: map(f)'s f returns void: a map emits one record for each record "
                    "(use add_sink to consume records, flat_map to emit any number)");
      if constexpr (std::is_void_v<Out>) {
        return *this;
      } else {
        return Add<Out>("Map", [f] {
          return std::unique_ptr<OperatorBase>(new internal::MapOperator<T, Out, F>(f));
        });
      }
    }
  }
  template <typename F>
  DataStream<T> filter(F f) const {
    static_assert(std::is_invocable_r_v<bool, F&, const T&>,
                  "tidemark: filter(f) needs f(const T&) -> bool, T the stream's record type");
    if constexpr (!std::is_invocable_r_v<bool, F&, const T&>) {
      return *this;
    } else {
      return Add<T>("Filter", [f] {
        return std::unique_ptr<OperatorBase>(new internal::FilterOperator<T, F>(f));
      });
    }
  }
  // f(const T&, Collector<Out>&); Out is deduced for non-generic lambdas.
  // map, flat_map and process: a function whose record parameter is T&&
  // gets the record moved in (the operator owns it), so that it can move
  // parts of it (strings) into its output instead of copying them.
  template <typename Out = void, typename F>
  auto flat_map(F f) const {
    constexpr bool kDeducible = !std::is_void_v<Out> || requires { typename F::OutputType; }
    || requires { typename internal::LastCollectorOut<internal::CallOperator<F>>; };
    static_assert(kDeducible,
                  "tidemark: flat_map(f) needs f(const T&, Collector<Out>&) or f(T&&, "
                  "Collector<Out>&), which emits through out.collect(...) and returns nothing (a "
                  "function returning a collection is not taken; for a generic lambda give "
                  "flat_map<Out>(f))");
    if constexpr (!kDeducible) {
      return *this;
    } else {
      using O = typename internal::FunctionOutputOr<Out, F, internal::CallOperator>::type;
      constexpr bool kCallable = std::is_invocable_v<F&, const T&, Collector<O>&> ||
                                 std::is_invocable_v<F&, T&&, Collector<O>&>;
      static_assert(kCallable,
                    "tidemark: flat_map(f) needs f(const T&, Collector<Out>&) or f(T&&, "
                    "Collector<Out>&), T the stream's record type");
      if constexpr (!kCallable) {
        return *this;
      } else {
        return Add<O>("Flat Map", [f] {
          return std::unique_ptr<OperatorBase>(new internal::FlatMapOperator<T, O, F>(f));
        });
      }
    }
  }
  // Replaces timestamps and watermarks from here on.
  // Flink's ProcessFunction (operators/process.h): f(const T&, ProcessContext&,
  // Collector<Out>&), or a ProcessFunction<T, Out>; side outputs through
  // ctx.output(tag, value).
  template <typename Function>
  auto process(Function f) const {
    static_assert(
        requires { typename Function::OutputType; } || requires { &Function::process_element; } ||
            requires { &Function::operator(); },
        "tidemark: process(f) takes a ProcessFunction<In, Out>, an object with "
        "process_element(const In&, ProcessContext&, Collector<Out>&), or a lambda "
        "(const In&, ProcessContext&, Collector<Out>&)");
    static_assert(
        !requires { typename Function::KeyType; },
        "tidemark: a KeyedProcessFunction runs on a keyed stream: "
        "key_by(...).process(f)");
    using Out = internal::FunctionOutput<Function, internal::ProcessElementMember>;
    return this->template Add<Out>("Process", [f]() -> std::unique_ptr<OperatorBase> {
      return std::unique_ptr<OperatorBase>(new internal::ProcessOperator<T, Function, Out>(f));
    });
  }

  // Windows over the whole stream, at parallelism 1 (Flink's windowAll;
  // api/windowed_stream.h, AllWindowedStream).
  template <typename Assigner>
  auto window_all(Assigner assigner) const;

  // Window join and co-group with another stream (Flink's JoinedStreams /
  // CoGroupedStreams; api/joined_streams.h):
  // join(other).where(key).equal_to(other_key).window(assigner).apply(f).
  template <typename U>
  auto join(const DataStream<U>& other) const;
  template <typename U>
  auto co_group(const DataStream<U>& other) const;

  DataStream<T> assign_timestamps_and_watermarks(WatermarkStrategy<T> strategy) const {
    DataStream<T> s = Add<T>("Timestamps/Watermarks", [strategy] {
      return std::unique_ptr<OperatorBase>(
          new internal::TimestampsAndWatermarksOperator<T>(strategy));
    });
    env_->MarkAssigner(s.id());
    if (strategy.aligned()) env_->MarkAligned(s.id(), strategy.alignment_group());
    return s;
  }
  // A user operator (OneInputOperator<T, Out>), made once per subtask.
  template <typename Out>
  DataStream<Out> transform(
      std::string name, std::function<std::unique_ptr<OneInputOperator<T, Out>>()> factory) const {
    return Add<Out>(std::move(name),
                    [factory] { return std::unique_ptr<OperatorBase>(factory()); });
  }

  // --- partitioning ---
  // KeyFn: const T& -> K.  K needs a Java-compatible hashCode (built in for
  // strings, signed integers, ...; `int32_t JavaHashCode(const K&)` found by
  // ADL for a type of one's own), Abseil hashing (`AbslHashValue`) and
  // `operator==`; one static_assert here names whatever a K lacks.
  template <typename KeyFn>
  auto key_by(KeyFn key) const;
  // Flink's DataStreamUtils.reinterpretAsKeyedStream: this stream, already
  // partitioned as key_by(key) would partition it (the output of an operator
  // keyed by the same key, at the same parallelism and max parallelism), as a
  // keyed stream without a shuffle, so that the keyed operator after it runs
  // in this stream's task.  Each record's key group is checked against those
  // its subtask owns in the keyed operator after it (that operator's
  // parallelism and max parallelism); a record outside them fails the job, as
  // in Flink's heap backend (api/keyed_process.h).
  template <typename KeyFn>
  auto reinterpret_as_keyed_stream(KeyFn key) const;
  DataStream<T> rebalance() const { return Partition(internal::ShipStrategy::kRebalance, nullptr); }
  DataStream<T> broadcast() const { return Partition(internal::ShipStrategy::kBroadcast, nullptr); }
  DataStream<T> forward() const { return Partition(internal::ShipStrategy::kForward, nullptr); }
  // Round robin over a few downstream subtasks (pointwise: at 2 -> 4 each
  // upstream subtask feeds two, at 4 -> 2 two feed each), Flink's rescale().
  DataStream<T> rescale() const { return Partition(internal::ShipStrategy::kRescale, nullptr); }
  // A uniformly random downstream subtask per record.
  DataStream<T> shuffle() const { return Partition(internal::ShipStrategy::kShuffle, nullptr); }
  // Every record to downstream subtask 0.
  DataStream<T> global() const { return Partition(internal::ShipStrategy::kGlobal, nullptr); }
  // part(key, num_channels) -> channel.
  template <typename PartFn, typename KeyFn>
  DataStream<T> partition_custom(PartFn part, KeyFn key) const {
    auto factory = std::make_shared<internal::PartitionerFactory<T>>([part, key](int n, int, int) {
      return std::unique_ptr<internal::Partitioner<T>>(
          new internal::CustomPartitioner<T, KeyFn, PartFn>(key, part, n));
    });
    return Partition(internal::ShipStrategy::kCustom, factory);
  }
  // Two inputs in one operator (api/connected_streams.h): ConnectedStreams<T, U>.
  template <typename U>
  auto connect(const DataStream<U>& other) const;
  // A broadcast input with broadcast state, to a BroadcastProcessFunction
  // (api/connected_streams.h).
  template <typename U>
  auto connect(const BroadcastStream<U>& other) const;
  // This stream to every subtask of the operator it is connected to, with
  // broadcast state (api/connected_streams.h): BroadcastStream<T>.
  template <typename UK, typename UV, typename... More>
  auto broadcast(const MapStateDescriptor<UK, UV>& state, const More&... more) const;
  template <typename... More>
  DataStream<T> union_with(const DataStream<T>& other, const More&... more) const {
    return DataStream<T>(env_, env_->AddUnionNode({id_, other.id(), more.id()...}));
  }
  // The side output `tag` of this stream's operator.
  template <typename U>
  DataStream<U> get_side_output(const OutputTag<U>& tag) const {
    return DataStream<U>(env_, env_->AddSideOutputNode(id_, tag.id(), internal::NodeOpsOf<U>(),
                                                       internal::NodeOpsOf<U>()));
  }

  // --- sinks ---
  // Prints each record as Flink's print() does.  Without a formatter the type
  // needs an operator<< (or to be a string, number, pair or tuple); with one,
  // any type prints.
  DataStream<T> print(std::string sink_name = "") const {
    return print(std::move(sink_name), DefaultFormatter<T>());
  }
  DataStream<T> print(std::string sink_name, std::function<std::string(const T&)> fmt) const {
    if (!fmt) throw std::invalid_argument("print: the formatter is empty");
    std::ostream* out = env_->print_stream();
    return Sink("Print to Std. Out", [sink_name, out, fmt] {
      return std::unique_ptr<OperatorBase>(new internal::PrintSinkOperator<T>(sink_name, out, fmt));
    });
  }
  std::shared_ptr<CollectedResults<T>> collect() const {
    auto results = std::make_shared<CollectedResults<T>>();
    Sink("Collect", [results] {
      return std::unique_ptr<OperatorBase>(new internal::CollectSinkOperator<T>(results));
    });
    return results;
  }
  // f(T&&) or f(T&&, Timestamp), called on the sink subtask's thread.
  template <typename F>
  DataStream<T> add_sink(F f, std::string sink_name = "Sink") const {
    static_assert(std::is_invocable_v<F&, T&&, Timestamp> || std::is_invocable_v<F&, T&&>,
                  "tidemark: add_sink(f) needs f(T&&), f(const T&), f(T) or f(T&&, Timestamp), T "
                  "the stream's record type (not f(T&): the record is handed over, not lent)");
    return Sink(std::move(sink_name), [f] {
      return std::unique_ptr<OperatorBase>(new internal::FunctionSinkOperator<T, F>(f));
    });
  }
  // A sink of one's own (operators/basic.h, SinkWriter): `make` is called
  // once per subtask for its writer.
  DataStream<T> sink_to(std::function<std::unique_ptr<SinkWriter<T>>()> make,
                        std::string sink_name = "Sink") const {
    return Sink(std::move(sink_name), [make]() -> std::unique_ptr<OperatorBase> {
      return std::unique_ptr<OperatorBase>(new internal::WriterSinkOperator<T>(make()));
    });
  }
  // Exactly-once files (Flink's FileSink with checkpoints,
  // operators/file_sink.h): each sink subtask writes `fmt(record)` lines to
  // hidden part files in `dir` and makes them visible as
  // dir/<prefix>-<subtask>-<n> once the checkpoint after them is complete
  // everywhere (without checkpointing: at the end of input).  Two sinks
  // into one directory need two prefixes.
  DataStream<T> sink_to_files(std::string dir, std::function<std::string(const T&)> fmt,
                              std::string sink_name = "File sink",
                              std::string prefix = "part") const {
    if (!fmt) throw std::invalid_argument("sink_to_files: the formatter is empty");
    if (prefix.empty() || prefix.find('/') != std::string::npos || prefix[0] == '.')
      throw std::invalid_argument("sink_to_files: the prefix must be a plain file name");
    return Sink(std::move(sink_name), [dir, prefix, fmt] {
      return std::unique_ptr<OperatorBase>(
          new internal::ExactlyOnceFileSinkOperator<T>(dir, prefix, fmt));
    });
  }
  // CSV (operators/csv.h, Flink's CsvBulkWriter): exactly-once part files
  // in `dir` as sink_to_files, each starting with the header line (the
  // format's column names) when options.header (by default, when it has
  // them).
  DataStream<T> sink_to_csv(std::string dir, CsvFormat<T> format,
                            CsvWriteOptions options = {}) const {
    std::string header = CsvHeader(format, options);
    auto fmt = [format](const T& v) { return format.Format(v); };
    if (options.prefix.empty() || options.prefix.find('/') != std::string::npos ||
        options.prefix[0] == '.')
      throw std::invalid_argument("sink_to_csv: the prefix must be a plain file name");
    return Sink(std::move(options.sink_name), [dir, prefix = options.prefix, fmt, header] {
      return std::unique_ptr<OperatorBase>(
          new internal::ExactlyOnceFileSinkOperator<T>(dir, prefix, fmt, header));
    });
  }
  // CSV into one file `path` (parallelism 1, as write_as_text), the header
  // line first when options.header (by default, when it has them).
  DataStream<T> write_as_csv(std::string path, CsvFormat<T> format,
                             CsvWriteOptions options = {}) const {
    std::string header = CsvHeader(format, options);
    std::function<std::string(const T&)> fmt = [format](const T& v) { return format.Format(v); };
    return Sink(std::move(options.sink_name),
                [path, fmt, header] {
                  return std::unique_ptr<OperatorBase>(
                      new internal::TextFileSinkOperator<T>(path, fmt, header));
                })
        .set_parallelism(1);
  }
  DataStream<T> write_as_text(std::string path) const {
    return write_as_text(std::move(path), DefaultFormatter<T>());
  }
  DataStream<T> write_as_text(std::string path, std::function<std::string(const T&)> fmt) const {
    if (!fmt) throw std::invalid_argument("write_as_text: the formatter is empty");
    return Sink("Text file",
                [path, fmt] {
                  return std::unique_ptr<OperatorBase>(
                      new internal::TextFileSinkOperator<T>(path, fmt));
                })
        .set_parallelism(1);
  }

 private:
  static std::string CsvHeader(const CsvFormat<T>& format, const CsvWriteOptions& options) {
    if (!options.header.value_or(!format.column_names().empty())) return {};
    if (format.column_names().empty())
      throw std::invalid_argument(
          "CsvWriteOptions::header: a CSV header needs the format's column names "
          "(with_column_names)");
    return format.Header();
  }
  template <typename U>
  friend class DataStream;
  template <typename U, typename KeyFn>
  friend class KeyedStream;
  friend class StreamExecutionEnvironment;
  friend struct internal::StreamAccess;

  DataStream(StreamExecutionEnvironment* env, int id) : env_(env), id_(id) {}
  int id() const { return id_; }

  // A node consuming this stream (keyed: its input is partitioned by key).
  template <typename Out>
  DataStream<Out> Add(std::string name, internal::OperatorFactory factory,
                      bool keyed = false) const {
    return DataStream<Out>(env_,
                           env_->AddOperatorNode(id_, std::move(name), internal::NodeOpsOf<Out>(),
                                                 std::move(factory), keyed));
  }
  DataStream<T> Sink(std::string name, internal::OperatorFactory factory) const {
    return DataStream<T>(env_, env_->AddOperatorNode(id_, std::move(name), nullptr,
                                                     std::move(factory), /*keyed=*/false));
  }
  DataStream<T> Partition(internal::ShipStrategy s,
                          std::shared_ptr<internal::PartitionerFactoryBase> p) const {
    return DataStream<T>(env_, env_->AddPartitionNode(id_, s, std::move(p)));
  }

  StreamExecutionEnvironment* env_;
  int id_;
};

namespace internal {
// The rolling aggregations of KeyedStream.
enum class Aggregate { kSum, kMin, kMax, kMinBy, kMaxBy };
}  // namespace internal

// A stream partitioned by key.  KeyFn: const T& -> K.
template <typename T, typename KeyFn>
class KeyedStream {
 public:
  using Key = std::decay_t<std::invoke_result_t<KeyFn&, const T&>>;

  const KeyFn& key_selector() const { return key_; }
  // The partitioned stream (a virtual node whose consumers are keyed).
  const DataStream<T>& stream() const { return stream_; }
  StreamExecutionEnvironment& env() const { return stream_.env(); }

  // As in Flink, where a KeyedStream is a DataStream: the stateless
  // operations of the partitioned stream, run after the shuffle by key (in
  // the keyed operator's subtasks), their output no longer keyed.
  template <typename F>
  auto map(F f) const {
    return stream_.map(std::move(f));
  }
  template <typename F>
  DataStream<T> filter(F f) const {
    return stream_.filter(std::move(f));
  }
  template <typename Out = void, typename F>
  auto flat_map(F f) const {
    return stream_.template flat_map<Out>(std::move(f));
  }
  DataStream<T> print(std::string sink_name = "") const {
    return stream_.print(std::move(sink_name));
  }
  template <typename F>
  DataStream<T> add_sink(F f, std::string sink_name = "Sink") const {
    return stream_.add_sink(std::move(f), std::move(sink_name));
  }

  // Rolling reduce: emits the running reduction of each key for every record.
  template <typename ReduceFn>
  DataStream<T> reduce(ReduceFn f) const {
    static_assert(std::is_invocable_r_v<T, ReduceFn&, const T&, const T&>,
                  "tidemark: reduce(f) needs f(const T&, const T&) -> T, T the stream's record "
                  "type");
    KeyFn key = key_;
    return stream_.template Add<T>(
        "Keyed Reduce",
        [key, f] {
          return std::unique_ptr<OperatorBase>(
              new internal::RollingReduceOperator<T, Key, KeyFn, ReduceFn>(key, f));
        },
        /*keyed=*/true);
  }
  // Rolling aggregations on one field (Flink's KeyedStream sum / min / max /
  // minBy / maxBy), the field given as a member pointer (&Event::value) or,
  // for a std::pair / std::tuple, as an index (sum<1>()).  For every record
  // they emit the key's running aggregate:
  //   sum, min, max     the key's first record with the field replaced by the
  //                     sum / minimum / maximum so far (the other fields stay
  //                     the first record's, as in Flink);
  //   min_by, max_by    the record with the smallest / largest field so far;
  //                     of equal ones the first (first = true, Flink's
  //                     default) or the latest.
  template <typename F, typename C>
  DataStream<T> sum(F C::*field) const {
    static_assert(std::is_arithmetic_v<F> && !std::is_same_v<F, bool>,
                  "tidemark: sum(field) needs a numeric field (Flink refuses to sum others)");
    return Aggregation(Member(field), internal::Aggregate::kSum, true);
  }
  template <typename F, typename C>
  DataStream<T> min(F C::*field) const {
    return Aggregation(Member(field), internal::Aggregate::kMin, true);
  }
  template <typename F, typename C>
  DataStream<T> max(F C::*field) const {
    return Aggregation(Member(field), internal::Aggregate::kMax, true);
  }
  template <typename F, typename C>
  DataStream<T> min_by(F C::*field, bool first = true) const {
    return Aggregation(Member(field), internal::Aggregate::kMinBy, first);
  }
  template <typename F, typename C>
  DataStream<T> max_by(F C::*field, bool first = true) const {
    return Aggregation(Member(field), internal::Aggregate::kMaxBy, first);
  }
  template <size_t I>
  DataStream<T> sum() const {
    static_assert(std::is_arithmetic_v<std::decay_t<std::tuple_element_t<I, T>>> &&
                      !std::is_same_v<std::decay_t<std::tuple_element_t<I, T>>, bool>,
                  "tidemark: sum<I>() needs a numeric field (Flink refuses to sum others)");
    return Aggregation(Element<I>(), internal::Aggregate::kSum, true);
  }
  template <size_t I>
  DataStream<T> min() const {
    return Aggregation(Element<I>(), internal::Aggregate::kMin, true);
  }
  template <size_t I>
  DataStream<T> max() const {
    return Aggregation(Element<I>(), internal::Aggregate::kMax, true);
  }
  template <size_t I>
  DataStream<T> min_by(bool first = true) const {
    return Aggregation(Element<I>(), internal::Aggregate::kMinBy, first);
  }
  template <size_t I>
  DataStream<T> max_by(bool first = true) const {
    return Aggregation(Element<I>(), internal::Aggregate::kMaxBy, first);
  }

  // A keyed operator built by the caller (windows, process functions).
  template <typename Out>
  DataStream<Out> transform(std::string name,
                            std::function<std::unique_ptr<OperatorBase>()> factory) const {
    return stream_.template Add<Out>(std::move(name), std::move(factory), /*keyed=*/true);
  }

  // Defined by operators/window headers.
  template <typename Assigner>
  auto window(Assigner assigner) const;
  // Count windows (Flink's countWindow): per key, every `size` records (a
  // purging CountTrigger over GlobalWindows), or every `slide` records over
  // the last `size` (CountTrigger and CountEvictor).  A count window that is
  // not full at the end of the input does not fire, as in Flink.
  auto count_window(int64_t size) const;
  auto count_window(int64_t size, int64_t slide) const;
  template <typename Function>
  auto process(Function f) const;
  // Top-N per key (Flink's Rank / ROW_NUMBER() <= n; n = 1 with an order on
  // time is deduplication): a changelog of Changelog<T> rows, {kInsert, r}
  // when r enters the key's n best under less(a, b) (a before b), {kDelete,
  // r} when r is pushed out (operators/top_n.h).
  template <typename Less>
  auto top_n(size_t n, Less less) const;
  // The same with the rank number (1 to n) in each row's field `rank` (Flink's
  // ROW_NUMBER() as a column): a row whose rank changes is retracted at its
  // old rank and inserted at its new one.
  template <typename Less, typename R, typename C>
  auto top_n(size_t n, Less less, R C::*rank) const;
  // OVER (PARTITION BY key ORDER BY event time ROWS BETWEEN `preceding`
  // PRECEDING AND CURRENT ROW): each record, in event-time order once the
  // watermark passes it, with the aggregate of its frame, as
  // std::pair<T, Result> (operators/top_n.h).  `tie` orders records of equal
  // timestamps (default: arrival order).
  template <typename Agg, typename Tie = internal::ArrivalOrder>
  auto over_rows(size_t preceding, Agg agg, Tie tie = Tie()) const;
  // Two keyed inputs, keyed by the same key type (api/connected_streams.h).
  template <typename U, typename KeyFn2>
  auto connect(const KeyedStream<U, KeyFn2>& other) const;
  // A broadcast input with broadcast state (api/connected_streams.h).
  template <typename U>
  auto connect(const BroadcastStream<U>& other) const;
  // The interval join (api/connected_streams.h): call between(lower, upper).
  template <typename U, typename KeyFn2>
  auto interval_join(const KeyedStream<U, KeyFn2>& other) const;

 private:
  friend class DataStream<T>;
  friend struct internal::StreamAccess;

  KeyedStream(DataStream<T> partitioned, KeyFn key) : stream_(partitioned), key_(std::move(key)) {}

  // The field of a record, const or not.
  // (C is T: a member of another class does not compile.)
  template <typename F, typename C>
  static auto Member(F C::*field) {
    static_assert(std::is_same_v<C, T>,
                  "tidemark: the field must be a member of the stream's type");
    return [field](auto& t) -> auto& { return t.*field; };
  }
  template <size_t I>
  static auto Element() {
    static_assert(I < std::tuple_size_v<T>,
                  "tidemark: the index of sum<I>() etc. is past the end of the tuple");
    return [](auto& t) -> auto& { return std::get<I>(t); };
  }
  template <typename Get>
  DataStream<T> Aggregation(Get get, internal::Aggregate kind, bool first) const {
    KeyFn key = key_;
    auto f = [get, kind, first](const T& acc, const T& v) -> T {
      const auto& a = get(acc);
      const auto& b = get(v);
      switch (kind) {
        case internal::Aggregate::kSum: {
          T out = acc;
          get(out) = a + b;
          return out;
        }
        case internal::Aggregate::kMin:
        case internal::Aggregate::kMax: {
          const bool replace = kind == internal::Aggregate::kMin ? b < a : a < b;
          if (!replace) return acc;
          T out = acc;
          get(out) = b;
          return out;
        }
        case internal::Aggregate::kMinBy:
        case internal::Aggregate::kMaxBy: {
          const bool better = kind == internal::Aggregate::kMinBy ? b < a : a < b;
          const bool equal = !(a < b) && !(b < a);
          return better || (equal && !first) ? v : acc;
        }
      }
      return acc;
    };
    return stream_.template Add<T>(
        "Keyed Aggregation",
        [key, f] {
          return std::unique_ptr<OperatorBase>(
              new internal::RollingReduceOperator<T, Key, KeyFn, decltype(f)>(key, f));
        },
        /*keyed=*/true);
  }

  DataStream<T> stream_;
  KeyFn key_;
};

namespace internal {
// Reaches the build internals of the job API (see the declaration above).
struct StreamAccess {
  // Out of line (environment.cc).
  static StreamNode& Node(StreamExecutionEnvironment& env, int id);
  static int AddNode(StreamExecutionEnvironment& env, std::unique_ptr<StreamNode> n);
  static const JobConfig& Config(const StreamExecutionEnvironment& env);
  static absl::StatusOr<PhysicalPlan> Plan(const StreamExecutionEnvironment& env);
  static absl::StatusOr<std::shared_ptr<JobExecution>> Build(StreamExecutionEnvironment& env,
                                                             const std::string& job_name);
  template <typename T>
  static int Id(const DataStream<T>& s) {
    return s.id();
  }
  template <typename T>
  static StreamNode& Node(const DataStream<T>& s) {
    return Node(s.env(), s.id());
  }
  template <typename T>
  static DataStream<T> Stream(StreamExecutionEnvironment& env, int id) {
    return DataStream<T>(&env, id);
  }
  // A node consuming `s`, made by `factory` once per subtask.
  template <typename Out, typename T>
  static DataStream<Out> Add(const DataStream<T>& s, std::string name,
                             std::function<std::unique_ptr<OperatorBase>()> factory,
                             bool keyed = false) {
    return s.template Add<Out>(std::move(name), std::move(factory), keyed);
  }
};
}  // namespace internal

// ---------------------------------------------------------------------------
// Template definitions.

namespace internal {

// What a key type K needs, checked at key_by so that one message names all
// that is missing before any hash table is instantiated with K (whose errors
// would be pages of Abseil's):
//   a Java-compatible hashCode   (built in, or JavaHashCode(const K&) by ADL)
//   Abseil hashing               (AbslHashValue, or a type absl::Hash knows)
//   equality                     (operator==)
template <typename K>
struct KeyRequirements {
  static constexpr bool kJava = KeyGroupComputable<K>;
  static constexpr bool kHash = std::is_default_constructible_v<absl::Hash<K>>;
  static constexpr bool kEqual = std::equality_comparable<K>;
  // A scalar (unsigned, enum, long double, ...) or a pair / tuple of them
  // that lacks only the hashCode is left to KeyHash's messages, which name
  // the exact fix for each such type.
  static constexpr bool kPlainClass = std::is_class_v<K> && !IsTupleLike<K>::value;
  static constexpr bool kReport = !kHash || !kEqual || (!kJava && kPlainClass);
};

template <typename K>
inline constexpr bool kDependentFalse = false;

// One static_assert per combination of what is missing, each naming all of
// it (a C++20 static_assert takes a literal only).
#define TM_KEY_JAVA_                                                                            \
  "`int32_t JavaHashCode(const K&)` found by argument-dependent lookup (the hashCode() of the " \
  "Java key), "
#define TM_KEY_HASH_                                                               \
  "`template <typename H> friend H AbslHashValue(H h, const K& k)` (e.g. `return " \
  "H::combine(std::move(h), k.a, k.b);`), "
#define TM_KEY_EQUAL_ "`bool operator==(const K&) const` (e.g. `= default`), "
#define TM_KEY_REPORT_(JAVA, HASH, EQUAL, MISSING)                              \
  template <typename K>                                                         \
  struct KeyRequirementReport<K, JAVA, HASH, EQUAL> {                           \
    static_assert(kDependentFalse<K>,                                           \
                  "tidemark: the key type of key_by lacks " MISSING             \
                  "which every key type needs (README, \"Custom key types\")"); \
  };
template <typename K, bool kJava, bool kHash, bool kEqual>
struct KeyRequirementReport {};
TM_KEY_REPORT_(false, false, false, TM_KEY_JAVA_ TM_KEY_HASH_ TM_KEY_EQUAL_)
TM_KEY_REPORT_(false, false, true, TM_KEY_JAVA_ TM_KEY_HASH_)
TM_KEY_REPORT_(false, true, false, TM_KEY_JAVA_ TM_KEY_EQUAL_)
TM_KEY_REPORT_(false, true, true, TM_KEY_JAVA_)
TM_KEY_REPORT_(true, false, false, TM_KEY_HASH_ TM_KEY_EQUAL_)
TM_KEY_REPORT_(true, false, true, TM_KEY_HASH_)
TM_KEY_REPORT_(true, true, false, TM_KEY_EQUAL_)
#undef TM_KEY_REPORT_
#undef TM_KEY_EQUAL_
#undef TM_KEY_HASH_
#undef TM_KEY_JAVA_

// A key that does not own its characters (std::string_view, const char*, a
// pair or tuple holding one): it points into the record, which is gone once
// the record has been processed, while windows and state keep their keys.
template <typename K>
inline constexpr bool kIsCharPointer =
    std::is_pointer_v<K> && (std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char8_t> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char16_t> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, char32_t> ||
                             std::is_same_v<std::remove_cv_t<std::remove_pointer_t<K>>, wchar_t>);
template <typename K>
struct IsNonOwningKey
    : std::bool_constant<
          kIsCharPointer<K> || std::is_same_v<K, std::string_view> ||
          std::is_same_v<K, std::u16string_view> || std::is_same_v<K, std::u32string_view> ||
          std::is_same_v<K, std::wstring_view> || std::is_same_v<K, std::u8string_view>> {};
template <typename A, typename B>
struct IsNonOwningKey<std::pair<A, B>>
    : std::bool_constant<IsNonOwningKey<A>::value || IsNonOwningKey<B>::value> {};
template <typename... E>
struct IsNonOwningKey<std::tuple<E...>> : std::bool_constant<(IsNonOwningKey<E>::value || ...)> {};

// The key selector key_by uses in place of one whose key type was rejected,
// so that the rest of the job compiles and the report above is the only
// error.
template <typename T>
struct RejectedKeySelector {
  int32_t operator()(const T&) const { return 0; }
};

}  // namespace internal

template <typename T>
template <typename KeyFn>
auto DataStream<T>::key_by(KeyFn key) const {
  static_assert(std::is_invocable_v<KeyFn&, const T&>,
                "tidemark: key_by(f) needs a key selector f(const T&) -> K, T the stream's record "
                "type (for Flink's field position key_by(0): [](const T& t) { return "
                "std::get<0>(t); })");
  using K = std::decay_t<std::invoke_result_t<KeyFn&, const T&>>;
  using Req = internal::KeyRequirements<K>;
  if constexpr (internal::IsNonOwningKey<K>::value) {
    static_assert(internal::kDependentFalse<K>,
                  "tidemark: key_by's key must own its data: a std::string_view or a char pointer "
                  "points into the record, which is gone once it has been processed, while "
                  "windows and keyed state keep the key (return std::string(...) instead)");
    using Rejected = internal::RejectedKeySelector<T>;
    return KeyedStream<T, Rejected>(Partition(internal::ShipStrategy::kKeyGroups, nullptr),
                                    Rejected{});
  } else if constexpr (Req::kReport) {
    [[maybe_unused]] internal::KeyRequirementReport<K, Req::kJava || !Req::kPlainClass, Req::kHash,
                                                    Req::kEqual>
        report;
    using Rejected = internal::RejectedKeySelector<T>;
    return KeyedStream<T, Rejected>(Partition(internal::ShipStrategy::kKeyGroups, nullptr),
                                    Rejected{});
  } else {
    auto factory = std::make_shared<internal::PartitionerFactory<T>>([key](int n, int, int max_p) {
      return std::unique_ptr<internal::Partitioner<T>>(
          new internal::KeyGroupPartitioner<T, KeyFn>(key, n, max_p));
    });
    return KeyedStream<T, KeyFn>(Partition(internal::ShipStrategy::kKeyGroups, factory), key);
  }
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::add_source(
    std::function<std::unique_ptr<Source<T>>()> factory, std::string name, bool parallel) {
  return DataStream<T>(
      this,
      AddSourceNode(
          std::move(name), internal::NodeOpsOf<T>(), parallel,
          [factory](const internal::SourceBuildArgs& a) -> std::unique_ptr<internal::TaskInput> {
            return std::unique_ptr<internal::TaskInput>(new internal::SourceDriver<T>(
                factory(), static_cast<Output<T>*>(a.head), a.ctx, a.name, a.signals, a.metrics,
                a.budget, a.head_op, a.alignment));
          }));
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::from_source(
    std::function<std::unique_ptr<Source<T>>()> factory, WatermarkStrategy<T> strategy,
    std::string name) {
  return from_source(SourceDescriptor<T>{std::move(factory), std::move(name), true, 0},
                     std::move(strategy));
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::add_source(SourceDescriptor<T> source, std::string name) {
  DataStream<T> s =
      add_source<T>(std::move(source.factory),
                    name.empty() ? std::move(source.name) : std::move(name), source.parallel);
  if (source.fixed_parallelism > 0) FixNodeParallelism(s.id(), source.fixed_parallelism);
  return s;
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::from_source(SourceDescriptor<T> source,
                                                      WatermarkStrategy<T> strategy,
                                                      std::string name) {
  // Flink's fromSource: the strategy runs at the source, one generator per
  // split the source names (SourceOutput::ForSplit; docs/semantics.md 2.7).
  DataStream<T> s = add_source(std::move(source), std::move(name));
  DataStream<T> stamped = s.template transform<T>(
      "Timestamps/Watermarks", [strategy]() -> std::unique_ptr<OneInputOperator<T, T>> {
        return std::unique_ptr<OneInputOperator<T, T>>(
            new internal::TimestampsAndWatermarksOperator<T>(strategy,
                                                             /*per_split=*/true));
      });
  MarkAssigner(stamped.id(), s.id());
  if (strategy.aligned()) MarkAligned(stamped.id(), strategy.alignment_group());
  return stamped;
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::from_collection(std::vector<T> data) {
  return add_source(sources::collection(std::move(data)));
}

template <typename T, typename F>
DataStream<T> StreamExecutionEnvironment::from_generator(F f, int64_t count, double rate,
                                                         std::string name) {
  return add_source(sources::generator<T>(std::move(f), count, rate), std::move(name));
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::read_lines(typename LineSource<T>::Spec spec,
                                                     typename LineSource<T>::Parser parser,
                                                     std::string name) {
  return add_source(sources::lines<T>(std::move(spec), std::move(parser)), std::move(name));
}

template <typename T>
DataStream<T> StreamExecutionEnvironment::read_csv(std::vector<std::string> paths,
                                                   CsvFormat<T> format, CsvReadOptions options) {
  return add_source(sources::csv<T>(std::move(paths), std::move(format), std::move(options)));
}

}  // namespace tidemark

#endif  // TM_API_ENVIRONMENT_H_
