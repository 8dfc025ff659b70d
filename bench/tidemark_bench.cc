// bench/tidemark_bench.cc: tidemark-bench, the end-to-end benchmark harness.
//
// Runs one job on generator sources with bounded disorder and, in the same
// process, a plain single-threaded loop that computes the same results from
// the same generated input; compares the results and reports records/s of
// both, their ratio, whether the results are equal, and peak memory.
//
//   tidemark-bench --job=W1-core --sources=2 --windows=2 --keys=10000
//                  --records=50000000 [--json] [--repeat=3]   (one line)
//
// Jobs (--job; --list_jobs prints them):
//   W1-core  generator sources (--sources) -> assign_timestamps_and_watermarks
//            (bounded out of orderness, --disorder_ms) -> key_by(key) ->
//            KeyedStream::reduce running sum (--windows subtasks) -> a
//            discarding sink that counts records and keeps the last value per
//            key.  Baseline: sums[key] += value in an absl::flat_hash_map.
//   W1       the same sources -> key_by -> tumbling event-time window
//            (--window_ms) reduce sum -> a sink that keeps every
//            (key, window) result.  Baseline: open windows in a
//            std::map<start, flat_hash_map<key, sum>>, each emitted when the
//            bounded-out-of-orderness watermark passes its end (built only
//            when operators/window/windows.h is there).
//            Reports p50/p99 watermark-to-result latency (WindowWatermarkProbe).
// The other window jobs of issue 6 (W2..W6) go into kJobs the same way: a
// job runner and a baseline over the same Input.  bytes_per_key_window is not
// measured yet (null).
//
// The input: record i (0 <= i < --records) is a pure function of i (Input::At),
// so the job's sources (which split the indices round robin) and the baseline
// see exactly the same records.  Event time advances --events_per_ms records
// per millisecond; each record's timestamp is pulled back by a pseudo-random
// amount in [0, disorder_ms], so the stream is out of order by at most
// --disorder_ms and, with a bounded-out-of-orderness watermark of the same
// bound, no record is late.
//
// Output: a table, or with --json one JSON object on stdout.  With --repeat=N
// job and baseline each run N times (alternating); the best run of each is
// reported and every run is listed.  Peak RSS is the process's VmHWM during
// the job (the high-water mark is reset before each job run where the kernel
// allows it, see /proc/self/clear_refs).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "tidemark.h"

#if __has_include("operators/window/windows.h")
#include "operators/window/windows.h"
#define TM_BENCH_HAVE_WINDOWS 1
#endif

ABSL_FLAG(std::string, job, "W1-core", "which job to run (--list_jobs lists them)");
ABSL_FLAG(bool, list_jobs, false, "print the jobs and exit");
ABSL_FLAG(int, sources, 1, "source parallelism");
ABSL_FLAG(int, windows, 1, "parallelism of the keyed operator (and its sink)");
ABSL_FLAG(int64_t, keys, 10000, "number of distinct keys");
ABSL_FLAG(int64_t, records, 20000000, "records in all (over all source subtasks)");
ABSL_FLAG(int64_t, disorder_ms, 100,
          "bounded disorder: timestamps are out of order by at most this; also the "
          "watermark strategy's max out of orderness");
ABSL_FLAG(int64_t, events_per_ms, 1000, "records per millisecond of event time");
ABSL_FLAG(int64_t, window_ms, 1000, "window size of the window jobs (W1: tumbling)");
ABSL_FLAG(int64_t, batch_size, 1024, "records per channel batch");
ABSL_FLAG(int64_t, buffer_timeout_ms, 100, "flush timeout of a partly filled batch");
ABSL_FLAG(int64_t, channel_capacity, 4, "batches a channel holds before backpressure");
ABSL_FLAG(int64_t, watermark_interval_ms, 200, "auto-watermark interval (0: off)");
ABSL_FLAG(int, threads, 0, "arena worker threads (0: the number of cores)");
ABSL_FLAG(std::string, timestamps, "assigner",
          "'assigner': WatermarkStrategy::with_timestamp_assigner reads the event's "
          "timestamp (what a Flink user writes); 'source': the generator attaches it");
ABSL_FLAG(int, repeat, 1, "run job and baseline this many times; report the best");
ABSL_FLAG(bool, json, false, "print one JSON object instead of the table");
ABSL_FLAG(bool, require_equal, false, "exit with status 1 when the results differ");
ABSL_FLAG(bool, skip_baseline, false, "do not run the baseline loop");

namespace tidemark::bench {
namespace {

// --- input ---------------------------------------------------------------------

struct Event {
  int64_t key;
  int64_t value;
  Timestamp ts;
};

inline uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Record i of the input, a pure function of i.
struct Input {
  int64_t records;
  uint64_t keys;
  int64_t disorder_ms;
  int64_t events_per_ms;
  static constexpr Timestamp kBase = 1'700'000'000'000;  // 2023-11-14, epoch ms

  Event At(int64_t i) const {
    const uint64_t h = Mix(static_cast<uint64_t>(i));
    // Multiply-shift ranges (no division): key in [0, keys), back in
    // [0, disorder].
    const auto key = static_cast<int64_t>(((h & 0xffffffffu) * keys) >> 32);
    const auto back =
        static_cast<int64_t>(((h >> 48) * static_cast<uint64_t>(disorder_ms + 1)) >> 16);
    const auto value = static_cast<int64_t>((h >> 32) & 0xff);
    return Event{key, value, kBase + i / events_per_ms - back};
  }
};

// --- peak memory ------------------------------------------------------------------

// VmHWM of this process in bytes (0 when unreadable).
int64_t PeakRssBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
    }
  }
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) == 0) return static_cast<int64_t>(ru.ru_maxrss) * 1024;
  return 0;
}

// CPU time (user + system) of the whole process so far, in seconds.  On a
// shared machine CPU time per record is steadier than wall time.
double ProcessCpuSeconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

// Resets the peak RSS to the current RSS (Linux >= 4.0); false if not allowed.
bool ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

// --- options and results ---------------------------------------------------------------

struct Options {
  std::string job;
  int sources;
  int windows;
  Input input;
  int64_t window_ms;
  size_t batch_size;
  int64_t buffer_timeout_ms;
  size_t channel_capacity;
  int64_t watermark_interval_ms;
  int threads;
  bool source_timestamps;
};

// The results of a job: one number per (key, window), the window named by
// its max timestamp (W1-core has no windows: window 0, the final sum).
using ResultKey = std::pair<int64_t, Timestamp>;
using KeyResults = absl::flat_hash_map<ResultKey, int64_t>;

struct JobRun {
  bool ok = false;
  // Watermark-to-result latencies in ms (window jobs), and how many results
  // could not be attributed to a watermark advance.
  std::vector<double> latencies_ms;
  int64_t latency_unmeasured = 0;
  std::string error;
  double seconds = 0;
  double cpu_seconds = 0;  // process CPU time during the job (all threads)
  int64_t sink_records = 0;
  int64_t expected_sink_records = -1;  // -1: not known in advance
  int64_t peak_rss_bytes = 0;
  bool duplicate_keys = false;  // a result reached a sink twice (or two subtasks)
  KeyResults results;
};

struct BaselineRun {
  double seconds = 0;
  KeyResults results;
};

// --- sinks ------------------------------------------------------------------------

// What the sink subtasks of a job leave behind: per subtask, the number of
// records and the last value seen per key.  A table belongs to one sink
// subtask (one thread at a time); the registry lock is taken once per subtask.
struct SinkTable {
  explicit SinkTable(size_t keys) : last(keys, kUnset) {}
  static constexpr int64_t kUnset = INT64_MIN;
  int64_t records = 0;
  std::vector<int64_t> last;  // indexed by key (keys are 0..keys-1)
};

class SinkRegistry {
 public:
  explicit SinkRegistry(size_t keys) : keys_(keys) {}
  SinkTable* NewTable() {
    std::lock_guard<std::mutex> lock(mu_);
    tables_.push_back(std::make_unique<SinkTable>(keys_));
    return tables_.back().get();
  }
  // After the job: merges the tables.
  void Merge(JobRun& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<int64_t> merged(keys_, SinkTable::kUnset);
    for (const auto& t : tables_) {
      run.sink_records += t->records;
      for (size_t k = 0; k < keys_; ++k) {
        if (t->last[k] == SinkTable::kUnset) continue;
        if (merged[k] != SinkTable::kUnset) run.duplicate_keys = true;
        merged[k] = t->last[k];
      }
    }
    for (size_t k = 0; k < keys_; ++k)
      if (merged[k] != SinkTable::kUnset) run.results[{static_cast<int64_t>(k), 0}] = merged[k];
  }

 private:
  const size_t keys_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<SinkTable>> tables_;
};

// The add_sink function: the environment copies it once per sink subtask, so
// each copy takes a table of its own on its first record.
struct LastValueSink {
  std::shared_ptr<SinkRegistry> registry;
  SinkTable* table = nullptr;
  void operator()(Event&& e) {
    if (table == nullptr) [[unlikely]]
      table = registry->NewTable();
    ++table->records;
    table->last[static_cast<size_t>(e.key)] = e.value;
  }
};

// --- environment common to all jobs -------------------------------------------------

void Configure(StreamExecutionEnvironment& env, const Options& o) {
  env.set_parallelism(o.windows);
  env.set_batch_size(o.batch_size);
  env.set_buffer_timeout(Duration(o.buffer_timeout_ms));
  env.set_channel_capacity(o.channel_capacity);
  env.set_auto_watermark_interval(Duration(o.watermark_interval_ms));
  if (o.threads > 0) env.set_worker_threads(o.threads);
}

// Generator sources -> assign_timestamps_and_watermarks, at --sources.
DataStream<Event> TimestampedSource(StreamExecutionEnvironment& env, const Options& o) {
  const Input in = o.input;
  auto strategy = WatermarkStrategy<Event>::for_bounded_out_of_orderness(Duration(in.disorder_ms));
  DataStream<Event> s = [&] {
    if (o.source_timestamps) {
      // The generator attaches the timestamp; the strategy keeps it.
      return env.from_generator<Event>(
          [in](int64_t i, SourceOutput<Event>& out) {
            Event e = in.At(i);
            const Timestamp ts = e.ts;
            out.CollectWithTimestamp(std::move(e), ts);
          },
          in.records, 0, "Events");
    }
    strategy = strategy.with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; });
    return env.from_generator<Event>([in](int64_t i) { return in.At(i); }, in.records, 0, "Events");
  }();
  s.set_parallelism(o.sources);
  return s.assign_timestamps_and_watermarks(strategy).set_parallelism(o.sources);
}

// Runs the job; the registry (SinkRegistry or another with Merge(JobRun&))
// fills in the results.
template <typename Registry>
JobRun Execute(StreamExecutionEnvironment& env, const std::shared_ptr<Registry>& registry) {
  JobRun run;
  ResetPeakRss();
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  JobResult r = env.execute("tidemark-bench");
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  run.cpu_seconds = ProcessCpuSeconds() - cpu0;
  run.peak_rss_bytes = PeakRssBytes();
  run.ok = r.ok();
  if (!r.ok()) run.error = std::string(r.status.ToString());
  registry->Merge(run);
  return run;
}

// --- W1-core: keyed running sum -------------------------------------------------------

JobRun RunW1Core(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry = std::make_shared<SinkRegistry>(static_cast<size_t>(o.input.keys));
  TimestampedSource(env, o)
      .key_by([](const Event& e) { return e.key; })
      .reduce([](const Event& acc, const Event& e) {
        return Event{acc.key, acc.value + e.value, std::max(acc.ts, e.ts)};
      })
      .name("Keyed running sum")
      .set_parallelism(o.windows)
      .add_sink(LastValueSink{registry, nullptr}, "Discarding sink")
      .set_parallelism(o.windows);
  JobRun run = Execute(env, registry);
  run.expected_sink_records = o.input.records;  // the running sum emits once per record
  return run;
}

BaselineRun BaselineW1Core(const Options& o) {
  BaselineRun run;
  const Input in = o.input;
  const auto t0 = std::chrono::steady_clock::now();
  absl::flat_hash_map<int64_t, int64_t> sums;
  Timestamp max_ts = kMinTimestamp;  // what the watermark generator tracks
  for (int64_t i = 0; i < in.records; ++i) {
    const Event e = in.At(i);
    max_ts = std::max(max_ts, e.ts);
    sums[e.key] += e.value;
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (max_ts == kMinTimestamp && in.records > 0) std::fprintf(stderr, "no timestamps?\n");
  run.results.reserve(sums.size());
  for (const auto& [k, v] : sums) run.results[{k, 0}] = v;
  return run;
}

#ifdef TM_BENCH_HAVE_WINDOWS
// --- W1: keyed tumbling event-time window sum ------------------------------------------

// Watermark-to-result latency: from the moment the aligned input watermark of
// a window subtask passes a window's end to the moment the window's result
// reaches the sink.  The runtime calls the watermark listener on the
// subtask's own thread when a channel's watermark changes, before the valve's
// new watermark reaches the operators (runtime/stream_task.h, InputGate), and
// the window operator then fires synchronously on that thread into the
// chained sink.  So the listener notes (aligned watermark, time) in a
// thread_local, and the sink, on the same thread, subtracts.  A result whose
// window end the noted watermark has not reached (a runtime that notifies
// only after firing) is counted as unmeasured instead.
constexpr const char* kWindowOperatorName = "W1 tumbling window sum";

struct WatermarkMoment {
  Timestamp aligned = kMinTimestamp;
  std::chrono::steady_clock::time_point at{};
};
thread_local WatermarkMoment tl_window_watermark;

class WindowWatermarkProbe final : public WatermarkListener {
 public:
  void OnInputChannel(const ChannelEvent& e) override {
    if (e.task_name == nullptr || e.task_name->find(kWindowOperatorName) == std::string::npos)
      return;
    if (e.aligned != tl_window_watermark.aligned) {
      tl_window_watermark.aligned = e.aligned;
      tl_window_watermark.at = std::chrono::steady_clock::now();
    }
  }
};

// Per sink subtask: the result of every (key, window) it received.
struct WindowSinkTable {
  int64_t records = 0;
  bool duplicates = false;
  KeyResults results;
  std::vector<double> latencies_ms;
  int64_t unmeasured = 0;
};

class WindowSinkRegistry {
 public:
  WindowSinkTable* NewTable() {
    std::lock_guard<std::mutex> lock(mu_);
    tables_.push_back(std::make_unique<WindowSinkTable>());
    return tables_.back().get();
  }
  void Merge(JobRun& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : tables_) {
      run.sink_records += t->records;
      run.duplicate_keys = run.duplicate_keys || t->duplicates;
      for (const auto& [k, v] : t->results)
        if (!run.results.emplace(k, v).second) run.duplicate_keys = true;
      run.latencies_ms.insert(run.latencies_ms.end(), t->latencies_ms.begin(),
                              t->latencies_ms.end());
      run.latency_unmeasured += t->unmeasured;
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<WindowSinkTable>> tables_;
};

// Window results arrive timestamped with the window's max timestamp.
struct WindowResultSink {
  std::shared_ptr<WindowSinkRegistry> registry;
  WindowSinkTable* table = nullptr;
  void operator()(Event&& e, Timestamp window_max_ts) {
    if (table == nullptr) [[unlikely]]
      table = registry->NewTable();
    ++table->records;
    if (!table->results.emplace(ResultKey{e.key, window_max_ts}, e.value).second)
      table->duplicates = true;
    const WatermarkMoment& wm = tl_window_watermark;
    if (wm.aligned >= window_max_ts) {
      table->latencies_ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wm.at)
              .count());
    } else {
      ++table->unmeasured;
    }
  }
};

JobRun RunW1(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry = std::make_shared<WindowSinkRegistry>();
  env.set_watermark_listener(std::make_shared<WindowWatermarkProbe>());
  TimestampedSource(env, o)
      .key_by([](const Event& e) { return e.key; })
      .window(TumblingEventTimeWindows::of(Duration(o.window_ms)))
      .reduce([](const Event& acc, const Event& e) {
        return Event{acc.key, acc.value + e.value, std::max(acc.ts, e.ts)};
      })
      .name(kWindowOperatorName)
      .set_parallelism(o.windows)
      .add_sink(WindowResultSink{registry, nullptr}, "Discarding sink")
      .set_parallelism(o.windows);
  return Execute(env, registry);
}

// Flink's TimeWindow.getWindowStartWithOffset.
inline Timestamp WindowStart(Timestamp ts, int64_t size) {
  const int64_t rem = (ts + size) % size;  // offset 0
  return rem < 0 ? ts - (rem + size) : ts - rem;
}

// The plain loop: open windows by start, each a key -> sum table; a window is
// emitted (moved to the results) once the bounded-out-of-orderness watermark
// (max_ts - disorder - 1) reaches its max timestamp, as the job's operator
// fires it; the rest at the end of the input.
BaselineRun BaselineW1(const Options& o) {
  BaselineRun run;
  const Input in = o.input;
  const int64_t size = o.window_ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::map<Timestamp, absl::flat_hash_map<int64_t, int64_t>> open;
  Timestamp cur_start = kMinTimestamp;
  absl::flat_hash_map<int64_t, int64_t>* cur = nullptr;
  Timestamp max_ts = kMinTimestamp;
  auto emit_first = [&] {
    auto it = open.begin();
    const Timestamp max_of_window = it->first + size - 1;
    for (const auto& [k, v] : it->second) run.results[{k, max_of_window}] = v;
    if (it->first == cur_start) cur = nullptr, cur_start = kMinTimestamp;
    open.erase(it);
  };
  for (int64_t i = 0; i < in.records; ++i) {
    const Event e = in.At(i);
    const Timestamp start = WindowStart(e.ts, size);
    if (start != cur_start) {
      cur_start = start;
      cur = &open[start];
    }
    (*cur)[e.key] += e.value;
    if (e.ts > max_ts) {
      max_ts = e.ts;
      const Timestamp wm = max_ts - in.disorder_ms - 1;
      while (!open.empty() && open.begin()->first + size - 1 <= wm) emit_first();
    }
  }
  while (!open.empty()) emit_first();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}
#endif  // TM_BENCH_HAVE_WINDOWS

// --- job registry ----------------------------------------------------------------------

struct JobSpec {
  const char* name;
  const char* description;
  JobRun (*run)(const Options&);
  BaselineRun (*baseline)(const Options&);
};

constexpr JobSpec kJobs[] = {
    {"W1-core",
     "generator sources -> timestamps/watermarks (bounded out of orderness) -> key_by -> "
     "keyed running sum (reduce) -> discarding sink",
     &RunW1Core, &BaselineW1Core},
#ifdef TM_BENCH_HAVE_WINDOWS
    {"W1",
     "generator sources -> timestamps/watermarks (bounded out of orderness) -> key_by -> "
     "tumbling event-time window (--window_ms) reduce sum -> discarding sink",
     &RunW1, &BaselineW1},
#endif
};

const JobSpec* FindJob(const std::string& name) {
  for (const JobSpec& j : kJobs)
    if (name == j.name) return &j;
  return nullptr;
}

// --- reporting ---------------------------------------------------------------------------

std::string Machine() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto pos = line.find(':');
      if (pos != std::string::npos) return line.substr(pos + 2);
    }
  }
  return "unknown";
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
      continue;
    }
    out += c;
  }
  return out;
}

std::string JsonList(const std::vector<double>& v) {
  return absl::StrCat("[",
                      absl::StrJoin(v, ", ",
                                    [](std::string* out, double d) {
                                      absl::StrAppend(out, absl::StrFormat("%.6g", d));
                                    }),
                      "]");
}

int Main() {
  if (absl::GetFlag(FLAGS_list_jobs)) {
    for (const JobSpec& j : kJobs) std::printf("%-8s %s\n", j.name, j.description);
    return 0;
  }
  Options o;
  o.job = absl::GetFlag(FLAGS_job);
  o.sources = absl::GetFlag(FLAGS_sources);
  o.windows = absl::GetFlag(FLAGS_windows);
  o.input.records = absl::GetFlag(FLAGS_records);
  o.input.keys = static_cast<uint64_t>(absl::GetFlag(FLAGS_keys));
  o.input.disorder_ms = absl::GetFlag(FLAGS_disorder_ms);
  o.input.events_per_ms = absl::GetFlag(FLAGS_events_per_ms);
  o.window_ms = absl::GetFlag(FLAGS_window_ms);
  o.batch_size = static_cast<size_t>(absl::GetFlag(FLAGS_batch_size));
  o.buffer_timeout_ms = absl::GetFlag(FLAGS_buffer_timeout_ms);
  o.channel_capacity = static_cast<size_t>(absl::GetFlag(FLAGS_channel_capacity));
  o.watermark_interval_ms = absl::GetFlag(FLAGS_watermark_interval_ms);
  o.threads = absl::GetFlag(FLAGS_threads);
  const std::string ts_mode = absl::GetFlag(FLAGS_timestamps);
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  const bool skip_baseline = absl::GetFlag(FLAGS_skip_baseline);

  const JobSpec* job = FindJob(o.job);
  if (job == nullptr) {
    std::fprintf(stderr, "unknown job '%s' (--list_jobs lists them)\n", o.job.c_str());
    return 2;
  }
  if (ts_mode != "assigner" && ts_mode != "source") {
    std::fprintf(stderr, "--timestamps must be 'assigner' or 'source'\n");
    return 2;
  }
  o.source_timestamps = ts_mode == "source";
  if (o.sources <= 0 || o.windows <= 0 || o.input.records < 0 || o.input.keys == 0 ||
      o.input.keys > (uint64_t{1} << 32) || o.input.disorder_ms < 0 ||
      o.input.disorder_ms > 65535 || o.input.events_per_ms <= 0 || o.window_ms <= 0 ||
      o.batch_size == 0 || o.channel_capacity == 0 || o.buffer_timeout_ms < 0 ||
      o.watermark_interval_ms < 0) {
    std::fprintf(
        stderr,
        "invalid parameters: need sources, windows, keys (<= 2^32), events_per_ms, window_ms, "
        "batch_size, channel_capacity > 0; records, buffer_timeout_ms, "
        "watermark_interval_ms >= 0; 0 <= disorder_ms <= 65535\n");
    return 2;
  }

  std::vector<double> job_rates, base_rates;
  JobRun best_job;
  double best_job_rate = -1;
  BaselineRun best_base;
  double best_base_rate = -1;
  bool all_equal = true;
  std::string error;
  for (int r = 0; r < repeat; ++r) {
    JobRun jr = job->run(o);
    if (!jr.ok) {
      error = jr.error;
      all_equal = false;
      break;
    }
    const double rate = jr.seconds > 0 ? static_cast<double>(o.input.records) / jr.seconds : 0;
    job_rates.push_back(rate);
    bool equal = (jr.expected_sink_records < 0 || jr.sink_records == jr.expected_sink_records) &&
                 !jr.duplicate_keys;
    if (!skip_baseline) {
      BaselineRun br = job->baseline(o);
      const double brate = br.seconds > 0 ? static_cast<double>(o.input.records) / br.seconds : 0;
      base_rates.push_back(brate);
      equal = equal && jr.results == br.results;
      if (brate > best_base_rate) {
        best_base_rate = brate;
        best_base = std::move(br);
      }
    }
    all_equal = all_equal && equal;
    if (rate > best_job_rate) {
      best_job_rate = rate;
      best_job = std::move(jr);
    }
  }

  const double ratio = best_base_rate > 0 && best_job_rate > 0 ? best_job_rate / best_base_rate : 0;
  const int64_t peak = best_job.peak_rss_bytes;
  // Latency percentiles of the best run (-1: none measured).
  double p50 = -1, p99 = -1;
  if (!best_job.latencies_ms.empty()) {
    std::vector<double>& l = best_job.latencies_ms;
    std::sort(l.begin(), l.end());
    auto pct = [&](double q) {
      const auto idx = static_cast<size_t>(q * static_cast<double>(l.size() - 1) + 0.5);
      return l[std::min(idx, l.size() - 1)];
    };
    p50 = pct(0.50);
    p99 = pct(0.99);
  }
  const double cpu_ns_per_record =
      o.input.records > 0 ? best_job.cpu_seconds * 1e9 / static_cast<double>(o.input.records) : 0;
  const unsigned cores = std::thread::hardware_concurrency();
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, cores));

  if (absl::GetFlag(FLAGS_json)) {
    std::string j = absl::StrCat("{\"job\": \"", JsonEscape(o.job),
                                 "\", \"ok\": ", error.empty() ? "true" : "false");
    if (!error.empty()) absl::StrAppend(&j, ", \"error\": \"", JsonEscape(error), "\"");
    absl::StrAppend(&j, ", \"records\": ", o.input.records,
                    absl::StrFormat(", \"seconds\": %.6f", best_job.seconds),
                    absl::StrFormat(", \"records_per_s\": %.1f", std::max(0.0, best_job_rate)),
                    absl::StrFormat(", \"cpu_seconds\": %.6f", best_job.cpu_seconds),
                    absl::StrFormat(", \"cpu_ns_per_record\": %.3f", cpu_ns_per_record));
    if (skip_baseline) {
      absl::StrAppend(&j, ", \"baseline_records_per_s\": null, \"baseline_seconds\": null",
                      ", \"ratio\": null, \"results_equal\": null");
    } else {
      absl::StrAppend(
          &j, absl::StrFormat(", \"baseline_records_per_s\": %.1f", std::max(0.0, best_base_rate)),
          absl::StrFormat(", \"baseline_seconds\": %.6f", best_base.seconds),
          absl::StrFormat(", \"ratio\": %.4f", ratio),
          ", \"results_equal\": ", all_equal ? "true" : "false");
    }
    // Latency: window jobs only (null otherwise); state size: not measured yet.
    if (p50 >= 0) {
      absl::StrAppend(
          &j, absl::StrFormat(", \"p50_latency_ms\": %.4f, \"p99_latency_ms\": %.4f", p50, p99),
          ", \"latency_results\": ", best_job.latencies_ms.size(),
          ", \"latency_unmeasured\": ", best_job.latency_unmeasured);
    } else {
      absl::StrAppend(&j, ", \"p50_latency_ms\": null, \"p99_latency_ms\": null");
    }
    absl::StrAppend(&j, ", \"bytes_per_key_window\": null");
    absl::StrAppend(
        &j, ", \"peak_rss_bytes\": ", peak, ", \"sink_records\": ", best_job.sink_records,
        ", \"distinct_keys_out\": ", best_job.results.size(), ", \"sources\": ", o.sources,
        ", \"windows\": ", o.windows, ", \"keys\": ", o.input.keys,
        ", \"disorder_ms\": ", o.input.disorder_ms, ", \"events_per_ms\": ", o.input.events_per_ms,
        ", \"batch_size\": ", o.batch_size, ", \"buffer_timeout_ms\": ", o.buffer_timeout_ms,
        ", \"channel_capacity\": ", o.channel_capacity,
        ", \"watermark_interval_ms\": ", o.watermark_interval_ms, ", \"worker_threads\": ", threads,
        ", \"timestamps\": \"", ts_mode, "\"", ", \"repeat\": ", repeat,
        ", \"job_records_per_s_runs\": ", JsonList(job_rates),
        ", \"baseline_records_per_s_runs\": ", JsonList(base_rates), ", \"cores\": ", cores,
        ", \"cpu\": \"", JsonEscape(Machine()), "\"}");
    std::printf("%s\n", j.c_str());
  } else {
    std::printf("tidemark-bench  job %s: %s\n", o.job.c_str(), job->description);
    std::printf(
        "  sources %d, windows %d, keys %llu, records %lld, disorder %lld ms, batch %zu, "
        "buffer timeout %lld ms, channel capacity %zu, watermark interval %lld ms, "
        "worker threads %d, timestamps from %s, repeat %d\n",
        o.sources, o.windows, static_cast<unsigned long long>(o.input.keys),
        static_cast<long long>(o.input.records), static_cast<long long>(o.input.disorder_ms),
        o.batch_size, static_cast<long long>(o.buffer_timeout_ms), o.channel_capacity,
        static_cast<long long>(o.watermark_interval_ms), threads, ts_mode.c_str(), repeat);
    std::printf("  machine: %u cores, %s\n\n", cores, Machine().c_str());
    if (!error.empty()) std::printf("  JOB FAILED: %s\n\n", error.c_str());
    std::printf("  %-22s %14s %10s\n", "", "records/s", "seconds");
    std::printf("  %-22s %14.4g %10.3f\n", "tidemark job (best)", std::max(0.0, best_job_rate),
                best_job.seconds);
    if (!skip_baseline) {
      std::printf("  %-22s %14.4g %10.3f\n", "baseline loop (best)", std::max(0.0, best_base_rate),
                  best_base.seconds);
      std::printf("\n  ratio job/baseline     %.3f\n", ratio);
      std::printf("  results equal          %s\n", all_equal ? "yes" : "NO");
    }
    std::printf("  job CPU                %.3f s (%.1f ns per record, all threads)\n",
                best_job.cpu_seconds, cpu_ns_per_record);
    std::printf("  sink records           %lld\n", static_cast<long long>(best_job.sink_records));
    std::printf("  peak RSS (job)         %.1f MiB\n", static_cast<double>(peak) / (1 << 20));
    if (p50 >= 0) {
      std::printf(
          "  watermark-to-result    p50 %.3f ms, p99 %.3f ms (%zu results, %lld unmeasured)\n", p50,
          p99, best_job.latencies_ms.size(), static_cast<long long>(best_job.latency_unmeasured));
    }
    if (repeat > 1) {
      auto fmt = [](std::string* out, double d) {
        absl::StrAppend(out, absl::StrFormat("%.4g", d));
      };
      std::printf("  job runs (records/s)   %s\n", absl::StrJoin(job_rates, " ", fmt).c_str());
      if (!skip_baseline)
        std::printf("  baseline runs          %s\n", absl::StrJoin(base_rates, " ", fmt).c_str());
    }
  }
  if (!error.empty()) return 1;
  if (absl::GetFlag(FLAGS_require_equal) && !skip_baseline && !all_equal) return 1;
  return 0;
}

}  // namespace
}  // namespace tidemark::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tidemark end-to-end benchmark: a job beside a plain-loop baseline.\n"
      "  tidemark-bench --job=W1-core --sources=2 --windows=2 --keys=10000 --records=50000000 "
      "--json");
  absl::ParseCommandLine(argc, argv);
  return tidemark::bench::Main();
}
