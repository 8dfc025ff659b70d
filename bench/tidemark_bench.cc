// bench/tidemark_bench.cc: tidemark-bench, the end-to-end benchmark harness.
// (Longer than 600 lines: one program: the jobs W1-W6, their baseline loops, the result comparison
// and the report (a split into files is due with the performance issue).)
//
// Runs one job on generator sources with bounded disorder and, in the same
// process, a plain single-threaded loop that computes the same results from
// the same generated input; compares the results and reports records/s of
// both, their ratio, whether the results are equal, watermark-to-result
// latency, peak memory and the window state's bytes per live (key, window).
//
//   tidemark-bench --job=W1-core --sources=2 --windows=2 --keys=10000
//                  --records=50000000 [--json] [--repeat=3]   (one line)
//
// Jobs (--job; --list_jobs prints them).  Every job reads the same sources:
// generator sources (--sources subtasks, --rate records/s in all) ->
// assign_timestamps_and_watermarks (bounded out of orderness,
// --watermark_delay_ms) -> key_by(key); the window jobs end in a sink that
// keeps every (key, window) result.  Each baseline is a plain loop over the
// same records in index order, with the watermark a single-threaded
// implementation has (max timestamp so far - watermark delay - 1).
//   W1-core  keyed running sum (KeyedStream::reduce, --windows subtasks) -> a
//            sink that counts records and keeps the last value per key.
//            Baseline: sums[key] += value in an absl::flat_hash_map.
//   W1       tumbling event-time window (--window_ms) reduce sum.
//            Baseline: open windows in a std::map<start, flat_hash_map<key,
//            sum>>, each emitted when the watermark reaches its max timestamp
//            (end - 1), the rest at the end of the input.
//   K2       W4's sums (1 000 000 keys) in a keyed process function: MapState
//            of (window max timestamp -> sum) per key and one event-time timer
//            per (key, window) that emits and removes the sum (many timers).
//            Baseline: W1's.
//   W2       sliding event-time window (--window_ms every --slide_ms, default
//            slide window_ms / 10) reduce sum.  Baseline: as W1, each record
//            added to each of the size / slide windows it belongs to.
//   W3       event-time session window (--gap_ms) reduce sum.  Baseline: per
//            key the in-flight sessions; a record's window [ts, ts + gap)
//            merges with every session it intersects (touching counts, as
//            Flink's TimeWindow.intersects), so a late-arriving record can
//            bridge two sessions; a min-heap of (session max timestamp, key)
//            timers emits a session when the watermark reaches its max
//            timestamp (timers of sessions merged away are skipped).
//   W4       W1 with 1 000 000 keys (unless --keys is given).  Baseline: W1's.
//   W5       W1 with a punctuated watermark generator: after every record it
//            emits max timestamp - watermark delay - 1 (and nothing on the
//            periodic timer).  Baseline: W1's.
//   W6       W1 with allowed lateness (--lateness_ms), a watermark delay below
//            the disorder (default disorder / 2) and a watermark interval of
//            5 ms (default), so that records arrive after their window fired
//            and re-fire it (at 200 ms the watermark trails the sources by
//            seconds of event time at full speed and no record ever does),
//            and very late records (--very_late_fraction) to the late-data
//            side output, read by a second sink.  The sinks keep the last
//            result per (key, window).  Baseline: as W1, but a window is
//            emitted when the watermark reaches its max timestamp, emitted
//            again for every record that arrives later within the lateness,
//            and dropped at max timestamp + lateness; records of dropped
//            windows go to a late list.
// The window jobs name their window operator "<job> <assigner> window sum",
// which the latency probe looks for.
//
// The input: record i (0 <= i < --records) is a pure function of i (Input::At),
// so the job's sources (which split the indices round robin) and the baseline
// see exactly the same records.  Event time advances --events_per_ms records
// per millisecond; each record's timestamp is pulled back by a pseudo-random
// amount in [0, disorder_ms], so the stream is out of order by at most
// --disorder_ms.  Values are in [1, 256], never 0, so a lost or duplicated
// record always changes a sum.
//
// Why the results do not depend on timing (results_equal is meaningful):
//   * A source's watermark never exceeds its own max timestamp - delay - 1,
//     and a window subtask's watermark is the minimum over the sources; so
//     when record i arrives, the window operator's watermark is at most the
//     baseline's watermark at record i.  With delay >= disorder (W1..W5) no
//     record is late, in the job or in the baseline, and a window fires only
//     after all of its records arrived.
//   * Sessions (W3) need delay > disorder (default disorder + 1): with delay
//     == disorder a record with timestamp exactly a closed session's end is
//     not late but would have merged (touching) had it come earlier, which
//     depends on timing.  With delay > disorder it cannot arrive after the
//     session closed, and the sessions are the connected components of the
//     records' windows, whatever the order.
//   * W6: with lateness + delay >= disorder no ordinary record is too late,
//     so each window's final sum (the sinks keep the last firing) is fixed;
//     whether a record is on time or re-fires its window depends on timing,
//     the final sum does not.  Very late records (Input: a pure function of
//     i picks them; their timestamp is pulled back a further 10 minutes) are
//     dropped once the job's watermark has passed their window's cleanup
//     time; before the sources' first watermarks it has not, and the job
//     accepts them (a later watermark fires their old window).  Which of
//     them the job drops depends on timing, so the comparison reconciles: the job's side output
//     must be a sub-multiset of the baseline's late list (the job's watermark never runs ahead of
//     the baseline's), and the late records the job accepted are added to the baseline's sums
//     before the results are compared.  Together with the numLateRecordsDropped counter being 0,
//     every record is accounted for: in a window sum or in the side output, once.
//
// Latency (window jobs): the time from the moment a window subtask's aligned
// input watermark passes a window's end to the moment the window's result
// reaches the sink (see WindowWatermarkProbe).  W6's firings caused by a late
// record are not watermark-caused; they are counted (element_firings), not
// measured.  For "at half load", run once unlimited and then with --rate at
// half the records/s measured.
//
// Memory: the window operator publishes per subtask "windowPeakLiveKeyWindows"
// (the most live (key, window) pairs it held, sampled at each watermark) and
// "windowStateBytesAtPeak" (its window state's bytes then);
// bytes_per_key_window is the ratio of their totals over the subtasks.
// bytes_per_key_window_rss is a coarser estimate: (the job's peak RSS - RSS
// before the job) / peak live key windows; it includes everything else the
// job allocated (channels, the sinks' result tables).  null when the counters
// are absent or 0.
//
// Across MPI ranks: the same binary runs unchanged under `mpirun -n N`
// (runtime/exec/cluster.h): every rank runs the job, subtask i of each operator on
// rank i mod N; each rank's sinks collect that rank's results, which rank 0
// gathers (GatherAtRank0) before it alone runs the baseline, compares and
// reports; the other ranks print nothing.  The report then adds the traffic
// between the ranks (ranks, bytes_per_record = bytes sent between ranks per
// input record, remote_records, remote_batches, credit_messages); CPU time,
// peak RSS and the latencies are every rank's (CPU and RSS summed), the
// source progress rank 0's source subtasks only, --threads is per rank.
//
//   mpirun -n 2 tidemark-bench --job=W1 --sources=2 --windows=2 --threads=1
//
// Output: a table, or with --json one JSON object on stdout.  With --repeat=N
// job and baseline each run N times (alternating); the best run of each is
// reported and every run is listed.  Peak RSS is the process's VmHWM during
// the job (the high-water mark is reset before each job run where the kernel
// allows it, see /proc/self/clear_refs).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/prime_memory.h"
#include "tidemark/tidemark.h"

#if __has_include("operators/window/windows.h")
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#define TM_BENCH_HAVE_WINDOWS 1
#endif

ABSL_FLAG(std::string, job, "W1-core", "which job to run (--list_jobs lists them)");
ABSL_FLAG(bool, list_jobs, false, "print the jobs and exit");
ABSL_FLAG(int, sources, 1, "source parallelism");
ABSL_FLAG(int, windows, 1, "parallelism of the keyed operator (and its sink)");
ABSL_FLAG(int64_t, keys, 0, "number of distinct keys (0: the job's default, 10000; W4 1000000)");
ABSL_FLAG(int64_t, records, 20000000, "records in all (over all source subtasks)");
ABSL_FLAG(double, rate, 0,
          "records per second over all sources (each source gets rate / sources); 0: unlimited");
ABSL_FLAG(int64_t, disorder_ms, 100,
          "bounded disorder: timestamps are out of order by at most this");
ABSL_FLAG(int64_t, watermark_delay_ms, -1,
          "the watermark strategy's max out of orderness (-1: the job's default: disorder_ms; "
          "W3 disorder_ms + 1; W6 disorder_ms / 2)");
ABSL_FLAG(int64_t, events_per_ms, 1000, "records per millisecond of event time");
ABSL_FLAG(int64_t, window_ms, 1000, "window size of the tumbling and sliding window jobs");
ABSL_FLAG(int64_t, slide_ms, 0, "W2: window slide (0: window_ms / 10)");
ABSL_FLAG(int64_t, gap_ms, 0,
          "W3: session gap (0: twice the mean time between two records of a key, "
          "2 * keys / events_per_ms, at least 1; 20 ms with the defaults)");
ABSL_FLAG(int64_t, lateness_ms, 200, "W6: allowed lateness");
ABSL_FLAG(double, very_late_fraction, 0.01,
          "W6: fraction of records pulled back 10 minutes, for the late-data side output");
ABSL_FLAG(int64_t, batch_size, 1024, "records per channel batch");
ABSL_FLAG(int64_t, buffer_timeout_ms, 100, "flush timeout of a partly filled batch");
ABSL_FLAG(int64_t, channel_capacity, 4, "batches a channel holds before backpressure");
ABSL_FLAG(int64_t, watermark_interval_ms, -1,
          "auto-watermark interval (0: off; -1: the job's default, 200 ms; W6 5 ms)");
ABSL_FLAG(int, threads, 0, "worker threads (0: the number of cores)");
ABSL_FLAG(std::string, scheduler, "pool",
          "who runs the tasks: 'pool' (the job's workers, tasks keep a home worker) or 'arena' "
          "(oneTBB's task_arena)");
ABSL_FLAG(std::string, timestamps, "assigner",
          "'assigner': WatermarkStrategy::with_timestamp_assigner reads the event's "
          "timestamp (what a Flink user writes); 'source': the generator attaches it");
ABSL_FLAG(int64_t, checkpoint_interval_ms, 0,
          "take a checkpoint every this many ms (0: no checkpoints)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "where checkpoints go (default: a fresh directory under /tmp, removed afterwards)");
ABSL_FLAG(bool, incremental_checkpoints, false,
          "with --checkpoint_interval_ms: incremental checkpoints (each writes only the state "
          "that changed; the JSON's checkpoint_sizes_bytes lists what each one wrote)");
ABSL_FLAG(bool, unaligned_checkpoints, false,
          "with --checkpoint_interval_ms: unaligned checkpoints (barriers overtake the queued "
          "records, which are stored as channel state)");
ABSL_FLAG(bool, skip_result_merge, false,
          "window jobs: the sinks count the results and time them but do not keep them, and no "
          "per-(key, window) table is built after the job (no duplicate check, distinct_keys_out "
          "0): at millions of results that takes longer than the job, and keeping them grows "
          "the sinks' memory while windows fire; for timing runs with --skip_baseline");
ABSL_FLAG(int64_t, latency_every, 8,
          "window jobs: the sink times one result in this many for the watermark-to-result "
          "latency (1: every result; timing one costs a clock read, about 20 ns, which at W1's "
          "one result per 100 records was 2% of its CPU with local aggregation)");
ABSL_FLAG(int64_t, sink_delay_us, 0,
          "W1-core and K1: the sink sleeps this many microseconds per record (a slow sink: "
          "back-pressure, to compare aligned and unaligned checkpoints under it)");
ABSL_FLAG(std::string, state_backend, "heap",
          "where keyed state lives: heap or rocksdb (K1's process state; the window jobs' "
          "contents, in the general window operator on RocksDB; W1-core's rolling reduce stays "
          "on the heap either way)");
ABSL_FLAG(std::string, state_backend_dir, "", "RocksDB's working directory (default: temp)");
ABSL_FLAG(int, repeat, 1, "run job and baseline this many times; report the best");
ABSL_FLAG(bool, json, false, "print one JSON object instead of the table");
ABSL_FLAG(bool, require_equal, false, "exit with status 1 when the results differ");
ABSL_FLAG(bool, skip_baseline, false, "do not run the baseline loop");
ABSL_FLAG(double, prime_memory_gb, 0,
          "before each timed run (the job's and the baseline's), touch and release this many GB "
          "of fresh memory (huge pages; not timed), so that the run's first touches of new "
          "memory cost what they cost on a host that does not take freed memory back "
          "(bench/prime_memory.h); 0: off");
ABSL_FLAG(bool, local_aggregation, false,
          "W1, W2, W4, W5, W6: pre-aggregate per (key, window) in the source subtasks before the "
          "key_by (WindowedStream::local_aggregation)");

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
  // W6: record i is very late when Mix(Mix(i)) < very_late_threshold (0: no
  // record is); its timestamp is pulled back a further kVeryLatePullbackMs.
  uint64_t very_late_threshold = 0;
  static constexpr Timestamp kBase = 1'700'000'000'000;  // 2023-11-14, epoch ms
  static constexpr int64_t kVeryLatePullbackMs = 10 * 60 * 1000;

  Event At(int64_t i) const {
    const uint64_t h = Mix(static_cast<uint64_t>(i));
    // Multiply-shift ranges (no division): key in [0, keys), back in
    // [0, disorder], value in [1, 256].
    const auto key = static_cast<int64_t>(((h & 0xffffffffu) * keys) >> 32);
    const auto back =
        static_cast<int64_t>(((h >> 48) * static_cast<uint64_t>(disorder_ms + 1)) >> 16);
    const auto value = static_cast<int64_t>((h >> 32) & 0xff) + 1;
    Timestamp ts = kBase + i / events_per_ms - back;
    if (very_late_threshold != 0 && Mix(h) < very_late_threshold) ts -= kVeryLatePullbackMs;
    return Event{key, value, ts};
  }
};

// --- memory ---------------------------------------------------------------------

// A "VmXXX:" line of /proc/self/status in bytes (0 when unreadable).
int64_t ProcStatusBytes(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const std::string prefix = absl::StrCat(field, ":");
  while (std::getline(f, line)) {
    if (line.rfind(prefix, 0) == 0) {
      return std::stoll(line.substr(prefix.size())) * 1024;  // "VmHWM:   1234 kB"
    }
  }
  return 0;
}

// VmHWM of this process in bytes (0 when unreadable).
int64_t PeakRssBytes() {
  if (const int64_t hwm = ProcStatusBytes("VmHWM"); hwm > 0) return hwm;
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

// The window operator's counters (operators/window/window_operator.h), summed
// over subtasks; a runtime that does not publish them gives 0.
constexpr char kPeakLiveKeyWindowsCounter[] = "windowPeakLiveKeyWindows";
constexpr char kStateBytesAtPeakCounter[] = "windowStateBytesAtPeak";
constexpr char kLateDroppedCounter[] = "numLateRecordsDropped";
constexpr char kLateUnconsumedCounter[] = "numLateRecordsToUnconsumedSideOutput";

// --- options and results ---------------------------------------------------------------

// Which window parameters a job uses (and reports).
enum class WindowKind { kNone, kTumbling, kSliding, kSession };

// How the job's watermark delay relates to the disorder, which decides what
// "late" means for it (see the file comment).
enum class Lateness {
  kNone,            // delay >= disorder: no record is late (default delay: disorder)
  kNoSessionTouch,  // delay > disorder: no record can touch a closed session (disorder + 1)
  kAllowed,         // lateness + delay >= disorder, very late records (disorder / 2)
};

struct Options {
  std::string job;
  int sources;
  int windows;
  Input input;
  double rate;  // records/s over all sources, 0: unlimited
  int64_t watermark_delay_ms;
  int64_t window_ms;
  int64_t slide_ms;
  int64_t gap_ms;
  int64_t lateness_ms;
  double very_late_fraction;
  size_t batch_size;
  int64_t buffer_timeout_ms;
  size_t channel_capacity;
  int64_t watermark_interval_ms;
  int threads;
  bool tbb_arena;
  bool source_timestamps;
  int64_t checkpoint_interval_ms;
  std::string checkpoint_dir;  // set when checkpoint_interval_ms > 0
  bool incremental_checkpoints;
  bool unaligned_checkpoints;
  std::string state_backend = "heap";  // heap | rocksdb
  std::string state_backend_dir;
  bool local_aggregation;  // window(...).local_aggregation() (not W1-core, W3)
};

// The results of a job: one number per (key, window), the window named by
// its max timestamp (W1-core has no windows: window 0, the final sum).
using ResultKey = std::pair<int64_t, Timestamp>;
using KeyResults = absl::flat_hash_map<ResultKey, int64_t>;

// How steadily the sources emitted while the job ran: a stall anywhere
// downstream (a table rehashing at once, a long firing) backs up into the
// sources through backpressure and shows here.
struct SourceProgress {
  double longest_pause_ms = 0;  // the longest time no source subtask emitted a record
  // Source records per second over 100 ms spans (after the first record,
  // until every source finished): the slowest span and the median one.
  double slowest_span_rate = 0;
  double median_span_rate = 0;
};

struct JobRun {
  bool ok = false;
  // Watermark-to-result latencies in ms (window jobs), and how many results
  // could not be attributed to a watermark advance.
  std::vector<double> latencies_ms;
  int64_t latency_unmeasured = 0;
  // Results a record fired (W6: a late record within the allowed lateness);
  // not watermark-caused, so not in the latencies.
  int64_t element_firings = 0;
  std::string error;
  double seconds = 0;
  double cpu_seconds = 0;  // process CPU time during the job (all threads)
  int64_t sink_records = 0;
  int64_t expected_sink_records = -1;  // -1: not known in advance
  int64_t rss_before_bytes = 0;
  int64_t peak_rss_bytes = 0;
  bool peak_rss_reset = false;  // peak_rss_bytes covers the job only
  int64_t peak_live_key_windows = 0;
  SourceProgress source_progress;
  CheckpointSummary checkpoints;
  int64_t window_state_bytes_at_peak = 0;
  int64_t late_dropped = 0;     // late records dropped, not to a (consumed) side output
  bool duplicate_keys = false;  // a result reached a sink twice (or two subtasks)
  KeyResults results;
  std::vector<Event> late;  // W6: the late-data side output
  // Traffic between ranks (all zero on one rank).  Under mpirun everything
  // above that the sinks collected, the latencies, CPU time and RSS are every
  // rank's (gathered at rank 0, see GatherAtRank0Run); source_progress is
  // rank 0's source subtasks only.
  NetworkSummary network;
};

// A result as emitted, in order: appending it costs the same in the job's
// sink and in the baseline loop, and the lookup table (KeyResults) is built
// after the clock stopped, so neither side is timed building a hash map.
struct Emitted {
  int64_t key;
  Timestamp window_max_ts;
  int64_t value;
};

// Builds the results from what was emitted in order (a later result of the
// same (key, window) replaces the earlier one: re-firing with lateness);
// returns whether any (key, window) came twice.
bool BuildResults(const std::vector<Emitted>& emitted, KeyResults& results) {
  bool repeated = false;
  results.reserve(results.size() + emitted.size());
  for (const Emitted& e : emitted) {
    auto [it, inserted] = results.try_emplace(ResultKey{e.key, e.window_max_ts}, e.value);
    if (!inserted) {
      repeated = true;
      it->second = e.value;
    }
  }
  return repeated;
}

// How much memory result tables may be given before a run: a quarter of
// the machine's, at least 1 GiB.
size_t MaxPreparedBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  return std::max(size_t{1} << 30, pages > 0 && page_size > 0 ? static_cast<size_t>(pages) / 4 *
                                                                    static_cast<size_t>(page_size)
                                                              : 0);
}

struct BaselineRun {
  double seconds = 0;
  double cpu_seconds = 0;        // process CPU time of the baseline call (one thread)
  std::vector<Emitted> emitted;  // filled by the timed loop
  KeyResults results;            // built from `emitted` afterwards
  std::vector<Event> late;       // W6: records of windows already dropped
  void Emit(int64_t key, Timestamp window_max_ts, int64_t value) {
    emitted.push_back(Emitted{key, window_max_ts, value});
  }
  // Before the clock starts: room for `expected` results, its memory
  // touched, as the job's sink tables get theirs (WindowSinkRegistry).  The
  // loop's vector grew by doubling inside its timed loop, page faults and
  // copies the job did not pay: W4's loop ran ~1.4x slower for it.
  void Prepare(size_t expected) {
    emitted.resize(std::min(expected / 4 * 5 + 16, MaxPreparedBytes() / sizeof(Emitted)));
    emitted.clear();
  }
};

// --- sinks ------------------------------------------------------------------------

// What the sink subtasks of a job leave behind: per subtask, the number of
// records and the last value seen per key.  A table belongs to one sink
// subtask (one thread at a time); the registry lock is taken once per subtask.
// Each sink subtask's table is written on its task's thread for every
// result: a cache line of its own (kSinkTableAlign), so that two tables
// allocated one after the other do not share one (see WindowSinkTable).
inline constexpr size_t kSinkTableAlign = 64;
struct alignas(kSinkTableAlign) SinkTable {
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

// --sink_delay_us (set once, before any job runs).
int64_t g_sink_delay_us = 0;
// --skip_result_merge (set once, before any job runs).
bool g_skip_result_merge = false;
// --latency_every (set once, before any job runs).
int64_t g_latency_every = 8;

// The add_sink function: the environment copies it once per sink subtask, so
// each copy takes a table of its own on its first record.
struct LastValueSink {
  std::shared_ptr<SinkRegistry> registry;
  SinkTable* table = nullptr;
  void operator()(Event&& e) {
    if (table == nullptr) [[unlikely]]
      table = registry->NewTable();
    if (g_sink_delay_us > 0) [[unlikely]]
      std::this_thread::sleep_for(std::chrono::microseconds(g_sink_delay_us));
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
  env.use_tbb_arena_scheduler(o.tbb_arena);
  if (o.checkpoint_interval_ms > 0)
    env.enable_checkpointing(Duration(o.checkpoint_interval_ms), o.checkpoint_dir);
  env.enable_incremental_checkpoints(o.incremental_checkpoints);
  env.enable_unaligned_checkpoints(o.unaligned_checkpoints);
  if (o.state_backend == "rocksdb")
    env.set_state_backend(StateBackend::rocksdb(o.state_backend_dir));
}

WatermarkStrategy<Event> BoundedOutOfOrderness(const Options& o) {
  return WatermarkStrategy<Event>::for_bounded_out_of_orderness(Duration(o.watermark_delay_ms));
}

// Generator sources (--sources, --rate) -> assign_timestamps_and_watermarks.
DataStream<Event> TimestampedSource(StreamExecutionEnvironment& env, const Options& o,
                                    WatermarkStrategy<Event> strategy) {
  const Input in = o.input;
  const double rate_per_source = o.rate / o.sources;
  DataStream<Event> s = [&] {
    if (o.source_timestamps) {
      // The generator attaches the timestamp; the strategy keeps it.
      return env.from_generator<Event>(
          [in](int64_t i, SourceOutput<Event>& out) {
            Event e = in.At(i);
            const Timestamp ts = e.ts;
            out.CollectWithTimestamp(std::move(e), ts);
          },
          in.records, rate_per_source, "Events");
    }
    strategy = strategy.with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; });
    return env.from_generator<Event>([in](int64_t i) { return in.At(i); }, in.records,
                                     rate_per_source, "Events");
  }();
  s.set_parallelism(o.sources);
  return s.assign_timestamps_and_watermarks(strategy).set_parallelism(o.sources);
}

struct EventKey {
  int64_t operator()(const Event& e) const { return e.key; }
};

// The reduce function of every job: sums the values.
struct SumValues {
  Event operator()(const Event& acc, const Event& e) const {
    return Event{acc.key, acc.value + e.value, std::max(acc.ts, e.ts)};
  }
};

// Samples the source subtasks' output every 10 ms until they have all
// finished (or the job ends).
inline SourceProgress SampleSourceProgress(const JobClient& client) {
  using Clock = std::chrono::steady_clock;
  static constexpr auto kSample = std::chrono::milliseconds(10);
  static constexpr auto kSpan = std::chrono::milliseconds(100);
  SourceProgress p;
  int64_t last_out = 0;
  auto last_change = Clock::now();
  int64_t span_start_out = 0;
  auto span_start = Clock::now();
  std::vector<double> span_rates;
  while (!client.done()) {
    std::this_thread::sleep_for(kSample);
    int64_t out = 0;
    bool all_finished = true;
    bool any_source = false;
    for (const SubtaskMetricsSnapshot& m : client.metrics()) {
      if (!m.channel_watermarks.empty()) continue;  // not a source
      any_source = true;
      out += m.records_out;
      all_finished = all_finished && m.finished;
    }
    const auto now = Clock::now();
    if (any_source && all_finished) break;  // the last span is partial: not counted
    if (out != last_out) {
      if (last_out > 0) {  // not the start-up
        p.longest_pause_ms =
            std::max(p.longest_pause_ms,
                     std::chrono::duration<double, std::milli>(now - last_change).count());
      } else {
        span_start = now;
        span_start_out = out;
      }
      last_out = out;
      last_change = now;
    }
    if (last_out > 0 && now - span_start >= kSpan) {
      span_rates.push_back(static_cast<double>(out - span_start_out) /
                           std::chrono::duration<double>(now - span_start).count());
      span_start = now;
      span_start_out = out;
    }
  }
  if (!span_rates.empty()) {
    std::sort(span_rates.begin(), span_rates.end());
    p.slowest_span_rate = span_rates.front();
    p.median_span_rate = span_rates[span_rates.size() / 2];
  }
  return p;
}

// --- across MPI ranks ---------------------------------------------------------------
//
// Under mpirun every rank runs the same job (runtime/exec/cluster.h) and its sinks
// collect only their rank's part of the results; each rank encodes what it
// collected, rank 0 gathers every rank's bytes and merges them as the
// registries merge their tables (a (key, window) from two ranks is a
// duplicate).  Every rank calls it once per job run, right after the job.

class ByteWriter {
 public:
  template <typename T>
  void Put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void PutVector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    Put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  template <typename T>
  T Get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v{};
    if (in_.size() < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, in_.data(), sizeof(T));
    in_.remove_prefix(sizeof(T));
    return v;
  }
  template <typename T>
  void AppendVector(std::vector<T>& v) {
    const auto n = Get<uint64_t>();
    if (!ok_ || n > in_.size() / sizeof(T)) {
      ok_ = false;
      return;
    }
    const size_t old = v.size();
    v.resize(old + n);
    std::memcpy(v.data() + old, in_.data(), n * sizeof(T));
    in_.remove_prefix(n * sizeof(T));
  }
  bool ok() const { return ok_ && in_.empty(); }

 private:
  std::string_view in_;
  bool ok_ = true;
};

// What a rank's sinks collected, its latencies and its process's CPU and
// memory (RSS is summed over the ranks: the job's memory on all of them).
std::string EncodeRankPart(const JobRun& run) {
  ByteWriter w;
  w.Put<int64_t>(run.sink_records);
  w.Put<int64_t>(run.element_firings);
  w.Put<int64_t>(run.latency_unmeasured);
  w.Put<uint8_t>(run.duplicate_keys ? 1 : 0);
  w.Put<uint8_t>(run.peak_rss_reset ? 1 : 0);
  w.Put<double>(run.cpu_seconds);
  w.Put<int64_t>(run.rss_before_bytes);
  w.Put<int64_t>(run.peak_rss_bytes);
  std::vector<Emitted> results;
  results.reserve(run.results.size());
  for (const auto& [k, v] : run.results) results.push_back(Emitted{k.first, k.second, v});
  w.PutVector(results);
  w.PutVector(run.late);
  w.PutVector(run.latencies_ms);
  return std::move(w.bytes());
}

// Merges one rank's part into `run`; false if the bytes are damaged.
bool MergeRankPart(std::string_view bytes, JobRun& run) {
  ByteReader r(bytes);
  run.sink_records += r.Get<int64_t>();
  run.element_firings += r.Get<int64_t>();
  run.latency_unmeasured += r.Get<int64_t>();
  run.duplicate_keys = run.duplicate_keys || r.Get<uint8_t>() != 0;
  run.peak_rss_reset = run.peak_rss_reset && r.Get<uint8_t>() != 0;
  run.cpu_seconds += r.Get<double>();
  run.rss_before_bytes += r.Get<int64_t>();
  run.peak_rss_bytes += r.Get<int64_t>();
  std::vector<Emitted> results;
  r.AppendVector(results);
  run.results.reserve(run.results.size() + results.size());
  for (const Emitted& e : results)
    if (!run.results.emplace(ResultKey{e.key, e.window_max_ts}, e.value).second)
      run.duplicate_keys = true;
  r.AppendVector(run.late);
  r.AppendVector(run.latencies_ms);
  return r.ok();
}

// Collective (every rank, once per job run): rank 0's `run` becomes the
// whole job's; the other ranks' loses what they collected.
void GatherAtRank0Run(JobRun& run) {
  const std::vector<std::string> parts = GatherAtRank0(EncodeRankPart(run));
  run.results = {};
  run.late = {};
  run.latencies_ms = {};
  if (parts.empty()) return;  // not rank 0
  run.sink_records = run.element_firings = run.latency_unmeasured = 0;
  run.duplicate_keys = false;
  run.peak_rss_reset = true;
  run.cpu_seconds = 0;
  run.rss_before_bytes = run.peak_rss_bytes = 0;
  for (size_t rank = 0; rank < parts.size(); ++rank) {
    if (!MergeRankPart(parts[rank], run)) {
      run.ok = false;
      if (run.error.empty()) run.error = absl::StrCat("rank ", rank, "'s results are damaged");
    }
  }
}

// Runs the job; each registry (anything with Merge(JobRun&)) fills in its
// part of the results.
template <typename... Registry>
JobRun Execute(StreamExecutionEnvironment& env, const std::shared_ptr<Registry>&... registries) {
  JobRun run;
  run.rss_before_bytes = ProcStatusBytes("VmRSS");
  run.peak_rss_reset = ResetPeakRss();
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  JobClient client = env.execute_async("tidemark-bench");
  const auto started = std::chrono::steady_clock::now();  // built and started
  run.source_progress = SampleSourceProgress(client);
  JobResult r = client.wait();
  // From execute_async to the job's own end (its start-up, graph build and
  // final drain included), not to when the sampler, which sleeps 10 ms at a
  // time, noticed it: that added up to 10 ms (5-9% of a 0.12-0.19 s run).
  // JobResult::seconds leaves that wait out (before 2026-12-06 it did not).
  run.seconds =
      std::min(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
               std::chrono::duration<double>(started - t0).count() + r.seconds);
  run.cpu_seconds = ProcessCpuSeconds() - cpu0;
  run.peak_rss_bytes = PeakRssBytes();
  run.ok = r.ok();
  if (!r.ok()) run.error = std::string(r.status.ToString());
  run.peak_live_key_windows = r.CounterTotal(kPeakLiveKeyWindowsCounter);
  run.window_state_bytes_at_peak = r.CounterTotal(kStateBytesAtPeakCounter);
  run.late_dropped = r.CounterTotal(kLateDroppedCounter) + r.CounterTotal(kLateUnconsumedCounter);
  run.checkpoints = r.checkpoints;
  run.network = r.network;
  (registries->Merge(run), ...);
  if (ThisCluster().distributed()) GatherAtRank0Run(run);
  return run;
}

// --- W1-core: keyed running sum -------------------------------------------------------

JobRun RunW1Core(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry = std::make_shared<SinkRegistry>(static_cast<size_t>(o.input.keys));
  TimestampedSource(env, o, BoundedOutOfOrderness(o))
      .key_by(EventKey{})
      .reduce(SumValues{})
      .name("Keyed running sum")
      .set_parallelism(o.windows)
      .add_sink(LastValueSink{registry, nullptr}, "Discarding sink")
      .set_parallelism(o.windows);
  JobRun run = Execute(env, registry);
  run.expected_sink_records = o.input.records;  // the running sum emits once per record
  return run;
}

// --- K1: W1-core's running sum in a keyed process function's ReducingState --------------
// (the state a --state_backend holds: on RocksDB it lives there; W1-core's
// rolling reduce and the window jobs keep theirs on the heap whatever the
// backend).  Baseline: W1-core's.

struct RunningSumFunction : KeyedProcessFunction<int64_t, Event, Event> {
  void process_element(const Event& e, Context& ctx, Collector<Event>& out) override {
    auto sum = ctx.get_reducing_state<int64_t>("sum", [](int64_t a, int64_t b) { return a + b; });
    sum.add(e.value);
    out.collect(Event{e.key, *sum.get(), e.ts});
  }
};

JobRun RunK1(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry = std::make_shared<SinkRegistry>(static_cast<size_t>(o.input.keys));
  TimestampedSource(env, o, BoundedOutOfOrderness(o))
      .key_by(EventKey{})
      .process(RunningSumFunction{})
      .name("Keyed running sum (ReducingState)")
      .set_parallelism(o.windows)
      .add_sink(LastValueSink{registry, nullptr}, "Discarding sink")
      .set_parallelism(o.windows);
  JobRun run = Execute(env, registry);
  run.expected_sink_records = o.input.records;
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
// --- window jobs: latency probe and sinks ------------------------------------------------

// Watermark-to-result latency: from the moment the aligned input watermark of
// a window subtask passes a window's end to the moment the window's result
// reaches the sink.  The runtime calls the watermark listener on the
// subtask's own thread when a channel's watermark changes, before the valve's
// new watermark reaches the operators (runtime/task/detail/stream_task.h, InputGate), and
// the window operator then fires synchronously on that thread into the
// chained sink.  So the listener notes (aligned watermark, time) in a
// thread_local, and the sink, on the same thread, subtracts.  A result whose
// window end the noted watermark has not reached (a runtime that notifies
// only after firing) is counted as unmeasured instead.  The listener knows
// the window subtasks by this part of their task's name (every window job
// names its window operator "<job> <assigner> window sum").
constexpr char kWindowOperatorMarker[] = " window sum";

std::string WindowOperatorName(const Options& o, const char* assigner) {
  return absl::StrCat(o.job, " ", assigner, kWindowOperatorMarker);
}

// The window subtask whose watermark last changed on this thread, its
// aligned value and when.  The subtask too: every window subtask gets the
// same watermarks, so one that reached an aligned value another subtask on
// the thread had reached before kept that one's time (results timed from
// the other's arrival, p50 up to 2x too high).
struct WatermarkMoment {
  int subtask = -1;
  Timestamp aligned = kMinTimestamp;
  std::chrono::steady_clock::time_point at{};
};
thread_local WatermarkMoment tl_window_watermark;
// Set by W6's window function just before it emits a result: whether a
// record (not the watermark) fired the window.
thread_local bool tl_fired_by_element = false;

class WindowWatermarkProbe final : public WatermarkListener {
 public:
  void OnInputChannel(const ChannelEvent& e) override {
    if (e.task_name == nullptr || e.task_name->find(kWindowOperatorMarker) == std::string::npos)
      return;
    if (e.aligned != tl_window_watermark.aligned || e.subtask != tl_window_watermark.subtask) {
      tl_window_watermark.subtask = e.subtask;
      tl_window_watermark.aligned = e.aligned;
      tl_window_watermark.at = std::chrono::steady_clock::now();
    }
  }
};

// Per sink subtask: the result of every (key, window) it received.
// On cache lines of its own: the registry allocates the tables one after the
// other, and an 80-byte table shared a line with the next one, so each sink
// subtask's count and latency appends contended with the other's on every
// result (on the Intel VM the sink then took 18% of W4's samples instead of
// 3%).
struct alignas(kSinkTableAlign) WindowSinkTable {
  int64_t records = 0;
  bool refiring = false;  // a (key, window) may come more than once
  int64_t element_firings = 0;
  std::vector<Emitted> emitted;  // in order
  std::vector<double> latencies_ms;
  int64_t unmeasured = 0;
  int64_t until_timed = 0;  // results to pass before the next one is timed
};

// About how many results a window job emits at most: per key and window of
// event time one (re-firing aside), and never more than one per record and
// window it belongs to.  Session jobs pass the gap as `window_ms` (a session
// is at least one gap long).
size_t ResultCapacityHint(const Options& o, int64_t window_ms, int64_t windows_per_record) {
  const double span_ms =
      static_cast<double>(o.input.records) / static_cast<double>(o.input.events_per_ms);
  const double windows =
      (span_ms / static_cast<double>(window_ms) + 2) * static_cast<double>(windows_per_record);
  const double per_records =
      static_cast<double>(o.input.records) * static_cast<double>(windows_per_record);
  return static_cast<size_t>(std::min(per_records, static_cast<double>(o.input.keys) * windows));
}

class WindowSinkRegistry {
 public:
  WindowSinkRegistry() = default;
  // Prepares one table per sink subtask with room for its share of
  // `expected_results`, its memory touched now: the job's sinks then append
  // without reallocating or faulting pages in, as a real sink would hand its
  // results on instead of keeping them.  At most a quarter of the machine's
  // memory (at least 1 GiB) is prepared in all; past that the tables grow as
  // they fill, and a growth (copying the table into new pages) stalls the
  // firing window task and, through back-pressure, the sources.  With
  // --skip_result_merge the
  // results are only counted (WindowResultSink) and the tables hold only the
  // latencies, 8 bytes a result: W4's 36 M results at 5 M keys fit, where the
  // results themselves (32 bytes each with the latency) outgrew the tables in
  // the last seconds of the job and made its longest source pause.
  WindowSinkRegistry(int subtasks, size_t expected_results) {
    const size_t max_prepared_bytes = MaxPreparedBytes();
    const size_t n = static_cast<size_t>(std::max(1, subtasks));
    const size_t bytes_per_result = (g_skip_result_merge ? 0 : sizeof(Emitted)) + sizeof(double);
    const size_t per_table =
        std::min(expected_results / n * 5 / 4, max_prepared_bytes / n / bytes_per_result);
    for (int i = 0; i < subtasks; ++i) {
      auto t = std::make_unique<WindowSinkTable>();
      if (!g_skip_result_merge) {
        t->emitted.resize(per_table);
        t->emitted.clear();
      }
      t->latencies_ms.resize(per_table);
      t->latencies_ms.clear();
      spare_.push_back(std::move(t));
    }
  }
  WindowSinkTable* NewTable() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!spare_.empty()) {
      tables_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    } else {
      tables_.push_back(std::make_unique<WindowSinkTable>());
    }
    return tables_.back().get();
  }
  void Merge(JobRun& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : tables_) {
      run.sink_records += t->records;
      run.element_firings += t->element_firings;
      run.latency_unmeasured += t->unmeasured;
      run.latencies_ms.insert(run.latencies_ms.end(), t->latencies_ms.begin(),
                              t->latencies_ms.end());
      if (g_skip_result_merge) continue;
      // One key's results all come from one subtask, so a (key, window) of
      // two tables is a duplicate even with re-firing.
      KeyResults table_results;
      if (BuildResults(t->emitted, table_results) && !t->refiring) run.duplicate_keys = true;
      for (const auto& [k, v] : table_results)
        if (!run.results.emplace(k, v).second) run.duplicate_keys = true;
    }
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<WindowSinkTable>> tables_;
  std::vector<std::unique_ptr<WindowSinkTable>> spare_;  // prepared, not yet handed out
};

// Window results arrive timestamped with the window's max timestamp.  A
// window fires once, except with allowed lateness (W6: `refiring`), where
// every late record within the lateness fires it again: the sink then keeps
// the last result, which is the window's final sum (one key's results all
// come from one subtask, in order).
struct WindowResultSink {
  std::shared_ptr<WindowSinkRegistry> registry;
  bool refiring = false;
  WindowSinkTable* table = nullptr;
  void operator()(Event&& e, Timestamp window_max_ts) {
    if (table == nullptr) [[unlikely]] {
      table = registry->NewTable();
      table->refiring = refiring;
    }
    ++table->records;
    if (!g_skip_result_merge) table->emitted.push_back(Emitted{e.key, window_max_ts, e.value});
    if (tl_fired_by_element) {
      tl_fired_by_element = false;
      ++table->element_firings;
      return;
    }
    // One result in --latency_every is timed: a sample of the latencies.
    if (table->until_timed > 0) {
      --table->until_timed;
      return;
    }
    table->until_timed = g_latency_every - 1;
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

// The window jobs but W6: sources -> key_by -> window(assigner) -> reduce sum
// -> WindowResultSink.
template <typename Assigner>
JobRun RunWindowSum(const Options& o, WatermarkStrategy<Event> strategy, Assigner assigner,
                    const char* assigner_name, size_t expected_results) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry = std::make_shared<WindowSinkRegistry>(o.windows, expected_results);
  env.set_watermark_listener(std::make_shared<WindowWatermarkProbe>());
  auto windowed = TimestampedSource(env, o, std::move(strategy))
                      .key_by(EventKey{})
                      .window(std::move(assigner))
                      .local_aggregation_if(o.local_aggregation);
  windowed.reduce(SumValues{})
      .name(WindowOperatorName(o, assigner_name))
      .set_parallelism(o.windows)
      .add_sink(WindowResultSink{registry}, "Discarding sink")
      .set_parallelism(o.windows);
  return Execute(env, registry);
}

// Flink's TimeWindow.getWindowStartWithOffset (offset 0).
inline Timestamp WindowStart(Timestamp ts, int64_t size) {
  const int64_t rem = (ts + size) % size;
  return rem < 0 ? ts - (rem + size) : ts - rem;
}

using KeySums = absl::flat_hash_map<int64_t, int64_t>;

// --- W1 (and W4): keyed tumbling event-time window sum ---------------------------------

JobRun RunW1(const Options& o) {
  return RunWindowSum(o, BoundedOutOfOrderness(o),
                      TumblingEventTimeWindows::of(Duration(o.window_ms)), "tumbling",
                      ResultCapacityHint(o, o.window_ms, 1));
}

// --- K2: W1 as a keyed process function with one event-time timer per (key, window) ------
// Sums per (key, window end) in MapState and an event-time timer at each
// window's max timestamp that emits the key's sum and removes it: the timers
// (one per key and open window, 1 000 000 keys by default) are the state a
// checkpoint of this job is mostly made of.  Baseline: W1's.

struct TimerWindowSumFunction : KeyedProcessFunction<int64_t, Event, Event> {
  int64_t window_ms = 0;
  void process_element(const Event& e, Context& ctx, Collector<Event>& out) override {
    (void)out;
    const Timestamp max_ts = WindowStart(e.ts, window_ms) + window_ms - 1;
    auto sums = ctx.get_map_state<int64_t, int64_t>("sums");
    sums.put(max_ts, sums.get(max_ts).value_or(0) + e.value);
    ctx.timer_service().register_event_time_timer(max_ts);
  }
  void on_timer(Timestamp ts, OnTimerContext& ctx, Collector<Event>& out) override {
    auto sums = ctx.get_map_state<int64_t, int64_t>("sums");
    const std::optional<int64_t> sum = sums.get(ts);
    if (!sum) return;
    sums.remove(ts);
    out.collect(Event{ctx.get_current_key(), *sum, ts});
  }
};

JobRun RunK2(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto registry =
      std::make_shared<WindowSinkRegistry>(o.windows, ResultCapacityHint(o, o.window_ms, 1));
  env.set_watermark_listener(std::make_shared<WindowWatermarkProbe>());
  TimerWindowSumFunction f;
  f.window_ms = o.window_ms;
  TimestampedSource(env, o, BoundedOutOfOrderness(o))
      .key_by(EventKey{})
      .process(f)
      .name(WindowOperatorName(o, "timers"))
      .set_parallelism(o.windows)
      .add_sink(WindowResultSink{registry}, "Discarding sink")
      .set_parallelism(o.windows);
  return Execute(env, registry);
}

// The plain loop: open windows by start, each a key -> sum table; a window is
// emitted (moved to the results) once the bounded-out-of-orderness watermark
// (max_ts - delay - 1) reaches its max timestamp, as the job's operator
// fires it; the rest at the end of the input.
BaselineRun BaselineW1(const Options& o) {
  BaselineRun run;
  run.Prepare(ResultCapacityHint(o, o.window_ms, 1));
  const Input in = o.input;
  const int64_t size = o.window_ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::map<Timestamp, KeySums> open;
  Timestamp cur_start = kMinTimestamp;
  KeySums* cur = nullptr;
  Timestamp max_ts = kMinTimestamp;
  auto emit_first = [&] {
    auto it = open.begin();
    const Timestamp max_of_window = it->first + size - 1;
    for (const auto& [k, v] : it->second) run.Emit(k, max_of_window, v);
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
      const Timestamp wm = max_ts - o.watermark_delay_ms - 1;
      while (!open.empty() && open.begin()->first + size - 1 <= wm) emit_first();
    }
  }
  while (!open.empty()) emit_first();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

// --- W2: keyed sliding event-time window sum ----------------------------------------------

JobRun RunW2(const Options& o) {
  return RunWindowSum(o, BoundedOutOfOrderness(o),
                      SlidingEventTimeWindows::of(Duration(o.window_ms), Duration(o.slide_ms)),
                      "sliding", ResultCapacityHint(o, o.window_ms, o.window_ms / o.slide_ms + 1));
}

// As BaselineW1, but each record goes into every window that contains it:
// starts last, last - slide, ... > ts - size, with last the start of the
// slide-sized window of ts (Flink's SlidingEventTimeWindows.assignWindows).
// The iterator of the last-used newest window is cached, the older ones are
// reached by walking the ordered map backwards.
BaselineRun BaselineW2(const Options& o) {
  BaselineRun run;
  run.Prepare(ResultCapacityHint(o, o.window_ms, o.window_ms / o.slide_ms + 1));
  const Input in = o.input;
  const int64_t size = o.window_ms;
  const int64_t slide = o.slide_ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::map<Timestamp, KeySums> open;
  auto cur = open.end();  // the window starting at cur_start
  Timestamp cur_start = kMinTimestamp;
  Timestamp max_ts = kMinTimestamp;
  auto emit_first = [&] {
    auto it = open.begin();
    const Timestamp max_of_window = it->first + size - 1;
    for (const auto& [k, v] : it->second) run.Emit(k, max_of_window, v);
    if (it == cur) cur = open.end(), cur_start = kMinTimestamp;
    open.erase(it);
  };
  for (int64_t i = 0; i < in.records; ++i) {
    const Event e = in.At(i);
    const Timestamp last = WindowStart(e.ts, slide);
    if (last != cur_start) {
      cur_start = last;
      cur = open.try_emplace(last).first;
    }
    auto it = cur;
    for (Timestamp s = last;;) {
      it->second[e.key] += e.value;
      s -= slide;
      if (s <= e.ts - size) break;
      if (it != open.begin() && std::prev(it)->first == s) {
        --it;
      } else {
        it = open.emplace_hint(it, s, KeySums{});
      }
    }
    if (e.ts > max_ts) {
      max_ts = e.ts;
      const Timestamp wm = max_ts - o.watermark_delay_ms - 1;
      while (!open.empty() && open.begin()->first + size - 1 <= wm) emit_first();
    }
  }
  while (!open.empty()) emit_first();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

// --- W3: keyed event-time session window sum -------------------------------------------------

JobRun RunW3(const Options& o) {
  return RunWindowSum(o, BoundedOutOfOrderness(o),
                      EventTimeSessionWindows::with_gap(Duration(o.gap_ms)), "session",
                      ResultCapacityHint(o, o.gap_ms, 1));
}

// Per key, the in-flight sessions [start, end) (pairwise not intersecting,
// as they would have merged); a record's window [ts, ts + gap) absorbs every
// one it intersects, as Flink's MergingWindowSet.  Timers (session max
// timestamp, key) in a min-heap emit a session when the watermark reaches
// its max timestamp; a timer whose session has merged into a later-ending
// one finds no session with that end and is skipped.
BaselineRun BaselineW3(const Options& o) {
  struct Session {
    Timestamp start;
    Timestamp end;  // exclusive
    int64_t sum;
  };
  using Timer = std::pair<Timestamp, int64_t>;  // (session max timestamp, key)
  BaselineRun run;
  run.Prepare(ResultCapacityHint(o, o.gap_ms, 1));
  const Input in = o.input;
  const int64_t gap = o.gap_ms;
  const auto t0 = std::chrono::steady_clock::now();
  absl::flat_hash_map<int64_t, std::vector<Session>> open;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers;
  auto fire_until = [&](Timestamp wm) {
    while (!timers.empty() && timers.top().first <= wm) {
      const auto [max_of_session, key] = timers.top();
      timers.pop();
      std::vector<Session>& sessions = open.find(key)->second;  // keys stay in `open`
      for (size_t j = 0; j < sessions.size(); ++j) {
        if (sessions[j].end - 1 != max_of_session) continue;
        run.Emit(key, max_of_session, sessions[j].sum);
        sessions[j] = sessions.back();
        sessions.pop_back();
        break;
      }
    }
  };
  Timestamp max_ts = kMinTimestamp;
  for (int64_t i = 0; i < in.records; ++i) {
    const Event e = in.At(i);
    std::vector<Session>& sessions = open[e.key];
    Session s{e.ts, e.ts + gap, e.value};
    Timestamp merged_end = kMinTimestamp;  // the latest end among the merged sessions
    for (size_t j = 0; j < sessions.size();) {
      const Session& x = sessions[j];
      if (x.start <= s.end && x.end >= s.start) {  // TimeWindow.intersects
        s.start = std::min(s.start, x.start);
        merged_end = std::max(merged_end, x.end);
        s.sum += x.sum;
        sessions[j] = sessions.back();
        sessions.pop_back();
      } else {
        ++j;
      }
    }
    // The merged session keeps the timer of a merged one with the same end.
    if (merged_end < s.end) timers.emplace(s.end - 1, e.key);
    s.end = std::max(s.end, merged_end);
    sessions.push_back(s);
    if (e.ts > max_ts) {
      max_ts = e.ts;
      fire_until(max_ts - o.watermark_delay_ms - 1);
    }
  }
  fire_until(kMaxTimestamp);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

// --- W5: W1 with a punctuated watermark after every record -------------------------------------

// The bounded-out-of-orderness watermark (max timestamp - delay - 1), emitted
// after every record instead of on the periodic timer.
class PunctuatedBoundedWatermarks final : public WatermarkGenerator<Event> {
 public:
  explicit PunctuatedBoundedWatermarks(int64_t delay) : delay_(delay) {}
  void OnEvent(const Event&, Timestamp ts, WatermarkOutput& out) override {
    max_ts_ = std::max(max_ts_, ts);
    out.EmitWatermark(max_ts_ - delay_ - 1);
  }
  void OnPeriodicEmit(WatermarkOutput&) override {}

 private:
  const int64_t delay_;
  Timestamp max_ts_ = kMinTimestamp;
};

JobRun RunW5(const Options& o) {
  const int64_t delay = o.watermark_delay_ms;
  return RunWindowSum(o, WatermarkStrategy<Event>::for_generator([delay] {
                        return std::make_unique<PunctuatedBoundedWatermarks>(delay);
                      }),
                      TumblingEventTimeWindows::of(Duration(o.window_ms)), "tumbling",
                      ResultCapacityHint(o, o.window_ms, 1));
}

// --- W6: W1 with allowed lateness and a late-data side output -----------------------------------

// Per sink subtask of the side output: the late records.
class LateRecordRegistry {
 public:
  std::vector<Event>* NewTable() {
    std::lock_guard<std::mutex> lock(mu_);
    tables_.push_back(std::make_unique<std::vector<Event>>());
    return tables_.back().get();
  }
  void Merge(JobRun& run) const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& t : tables_) run.late.insert(run.late.end(), t->begin(), t->end());
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<std::vector<Event>>> tables_;
};

struct LateRecordSink {
  std::shared_ptr<LateRecordRegistry> registry;
  std::vector<Event>* table = nullptr;
  void operator()(Event&& e) {
    if (table == nullptr) [[unlikely]]
      table = registry->NewTable();
    table->push_back(e);
  }
};

// The window function of W6: passes the sum on, noting for the sink whether a
// record (a late one within the lateness) or the watermark fired the window.
struct NoteFiringCause {
  void operator()(const int64_t&, const TimeWindow&, const Event& sum, WindowContext& ctx,
                  Collector<Event>& out) const {
    tl_fired_by_element = ctx.fired_by_element();
    out.collect(sum);
  }
};

JobRun RunW6(const Options& o) {
  StreamExecutionEnvironment env;
  Configure(env, o);
  auto results =
      std::make_shared<WindowSinkRegistry>(o.windows, ResultCapacityHint(o, o.window_ms, 1));
  auto late = std::make_shared<LateRecordRegistry>();
  env.set_watermark_listener(std::make_shared<WindowWatermarkProbe>());
  const OutputTag<Event> late_tag("late");
  auto windowed = TimestampedSource(env, o, BoundedOutOfOrderness(o))
                      .key_by(EventKey{})
                      .window(TumblingEventTimeWindows::of(Duration(o.window_ms)))
                      .allowed_lateness(Duration(o.lateness_ms))
                      .side_output_late_data(late_tag)
                      .local_aggregation_if(o.local_aggregation);
  DataStream<Event> sums = windowed.reduce(SumValues{}, NoteFiringCause{})
                               .name(WindowOperatorName(o, "tumbling"))
                               .set_parallelism(o.windows);
  sums.add_sink(WindowResultSink{results, /*refiring=*/true}, "Discarding sink")
      .set_parallelism(o.windows);
  sums.get_side_output(late_tag)
      .add_sink(LateRecordSink{late}, "Late data sink")
      .set_parallelism(o.windows);
  return Execute(env, results, late);
}

// BaselineW1 with allowed lateness: a window is emitted when the watermark
// reaches its max timestamp, emitted again for each record that arrives
// later, and dropped when the watermark reaches max timestamp + lateness;
// a record whose window has been dropped (Flink: the window is late) goes
// to run.late.
BaselineRun BaselineW6(const Options& o) {
  BaselineRun run;
  run.Prepare(ResultCapacityHint(o, o.window_ms, 1));
  const Input in = o.input;
  const int64_t size = o.window_ms;
  const int64_t lateness = o.lateness_ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::map<Timestamp, KeySums> open;
  Timestamp cur_start = kMinTimestamp;
  KeySums* cur = nullptr;
  Timestamp max_ts = kMinTimestamp;
  Timestamp wm = kMinTimestamp;
  // Fires the windows new_wm passes, drops those past their cleanup time.
  auto advance = [&](Timestamp new_wm) {
    for (auto it = open.begin(); it != open.end();) {
      const Timestamp max_of_window = it->first + size - 1;
      if (max_of_window > new_wm) break;
      if (max_of_window > wm) {
        for (const auto& [k, v] : it->second) run.Emit(k, max_of_window, v);
      }
      if (max_of_window + lateness <= new_wm) {
        if (it->first == cur_start) cur = nullptr, cur_start = kMinTimestamp;
        it = open.erase(it);
      } else {
        ++it;
      }
    }
    wm = new_wm;
  };
  for (int64_t i = 0; i < in.records; ++i) {
    const Event e = in.At(i);
    const Timestamp start = WindowStart(e.ts, size);
    const Timestamp max_of_window = start + size - 1;
    if (max_of_window + lateness <= wm) {
      run.late.push_back(e);
      continue;
    }
    if (start != cur_start) {
      cur_start = start;
      cur = &open[start];
    }
    const int64_t sum = (*cur)[e.key] += e.value;
    if (max_of_window <= wm) run.Emit(e.key, max_of_window, sum);  // fires again
    if (e.ts > max_ts) {
      max_ts = e.ts;
      advance(max_ts - o.watermark_delay_ms - 1);
    }
  }
  advance(kMaxTimestamp);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return run;
}

// Which late records the job dropped depends on when its watermarks came;
// its watermark never runs ahead of the baseline's, so it may only drop what
// the baseline dropped.  Checks that (false if not) and adds the records the
// job accepted anyway to the baseline's window sums.
bool ReconcileLateData(const Options& o, const JobRun& job, BaselineRun& base) {
  using Identity = std::tuple<int64_t, Timestamp, int64_t>;  // (key, ts, value)
  // The baseline's late records (a multiset) less the job's: those the job
  // accepted.
  absl::flat_hash_map<Identity, int64_t> accepted;
  for (const Event& e : base.late) ++accepted[Identity{e.key, e.ts, e.value}];
  for (const Event& e : job.late) {
    auto it = accepted.find(Identity{e.key, e.ts, e.value});
    if (it == accepted.end() || it->second == 0) return false;
    --it->second;
  }
  for (const auto& [id, n] : accepted) {
    if (n == 0) continue;
    const auto& [key, ts, value] = id;
    base.results[{key, WindowStart(ts, o.window_ms) + o.window_ms - 1}] += n * value;
  }
  return true;
}
#endif  // TM_BENCH_HAVE_WINDOWS

// --- job registry ----------------------------------------------------------------------

struct JobSpec {
  const char* name;
  const char* description;
  JobRun (*run)(const Options&);
  BaselineRun (*baseline)(const Options&);
  WindowKind windows = WindowKind::kNone;
  Lateness lateness = Lateness::kNone;
  int64_t default_keys = 10'000;
  int64_t default_watermark_interval_ms = 200;
  // Makes the baseline's results comparable with the job's where the job may
  // legitimately differ with timing (W6's late data); false when the job's
  // results are wrong whatever the timing.
  bool (*reconcile)(const Options&, const JobRun&, BaselineRun&) = nullptr;
};

constexpr JobSpec kJobs[] = {
    {.name = "W1-core",
     .description = "generator sources -> timestamps/watermarks (bounded out of orderness) -> "
                    "key_by -> keyed running sum (reduce) -> discarding sink",
     .run = &RunW1Core,
     .baseline = &BaselineW1Core},
    {.name = "K1",
     .description = "W1-core with the running sum in a keyed process function's ReducingState "
                    "(the state --state_backend holds)",
     .run = &RunK1,
     .baseline = &BaselineW1Core},
#ifdef TM_BENCH_HAVE_WINDOWS
    {.name = "W1",
     .description = "generator sources -> timestamps/watermarks (bounded out of orderness) -> "
                    "key_by -> tumbling event-time window (--window_ms) reduce sum -> "
                    "discarding sink",
     .run = &RunW1,
     .baseline = &BaselineW1,
     .windows = WindowKind::kTumbling},
    {.name = "K2",
     .description = "W4 as a keyed process function: sums in MapState, one event-time timer "
                    "per (key, window) that emits the window's sum",
     .run = &RunK2,
     .baseline = &BaselineW1,
     .windows = WindowKind::kTumbling,
     .default_keys = 1'000'000},
    {.name = "W2",
     .description = "W1 with a sliding event-time window (--window_ms every --slide_ms)",
     .run = &RunW2,
     .baseline = &BaselineW2,
     .windows = WindowKind::kSliding},
    {.name = "W3",
     .description = "W1 with an event-time session window (--gap_ms); watermark delay "
                    "disorder + 1",
     .run = &RunW3,
     .baseline = &BaselineW3,
     .windows = WindowKind::kSession,
     .lateness = Lateness::kNoSessionTouch},
    {.name = "W4",
     .description = "W1 with 1000000 keys",
     .run = &RunW1,
     .baseline = &BaselineW1,
     .windows = WindowKind::kTumbling,
     .default_keys = 1'000'000},
    {.name = "W5",
     .description = "W1 with a punctuated watermark (max_ts - delay - 1) after every record",
     .run = &RunW5,
     .baseline = &BaselineW1,
     .windows = WindowKind::kTumbling},
    {.name = "W6",
     .description = "W1 with allowed lateness (--lateness_ms), watermark delay disorder / 2, "
                    "watermark interval 5 ms and very late records (--very_late_fraction) to a "
                    "side output sink",
     .run = &RunW6,
     .baseline = &BaselineW6,
     .windows = WindowKind::kTumbling,
     .lateness = Lateness::kAllowed,
     .default_watermark_interval_ms = 5,
     .reconcile = &ReconcileLateData},
#endif
};

const JobSpec* FindJob(const std::string& name) {
  for (const JobSpec& j : kJobs)
    if (name == j.name) return &j;
  return nullptr;
}

// How the job's results differ from the baseline's: counts and a few
// examples, for stderr.
std::string DescribeDifference(const KeyResults& job, const KeyResults& base) {
  int64_t missing = 0, extra = 0, different = 0;
  std::vector<std::string> examples;
  auto example = [&](const ResultKey& k, const std::string& what) {
    if (examples.size() < 5)
      examples.push_back(absl::StrCat("(", k.first, ", ", k.second, "): ", what));
  };
  for (const auto& [k, v] : base) {
    auto it = job.find(k);
    if (it == job.end()) {
      ++missing;
      example(k, absl::StrCat("missing, baseline ", v));
    } else if (it->second != v) {
      ++different;
      example(k, absl::StrCat("job ", it->second, ", baseline ", v));
    }
  }
  for (const auto& [k, v] : job) {
    if (!base.contains(k)) {
      ++extra;
      example(k, absl::StrCat("job ", v, ", not in the baseline"));
    }
  }
  return absl::StrCat(missing, " results missing, ", extra, " extra, ", different,
                      " different; e.g. ", absl::StrJoin(examples, "; "));
}

// Whether the job's results equal the baseline's (after reconciling); says
// why not on stderr.
bool ResultsEqual(const JobSpec& spec, const Options& o, const JobRun& job, BaselineRun& base) {
  if (spec.reconcile != nullptr && !spec.reconcile(o, job, base)) {
    std::fprintf(stderr, "results differ: the job's late data is not the baseline's\n");
    return false;
  }
  if (job.results == base.results) return true;
  std::fprintf(stderr, "results differ: %s\n",
               DescribeDifference(job.results, base.results).c_str());
  return false;
}

// --- options ---------------------------------------------------------------------------

// Reads the flags and fills in the job's defaults; an error message when they
// are invalid.
std::optional<std::string> ReadOptions(const JobSpec& job, Options& o) {
  o.job = job.name;
  o.sources = absl::GetFlag(FLAGS_sources);
  o.windows = absl::GetFlag(FLAGS_windows);
  o.rate = absl::GetFlag(FLAGS_rate);
  o.input.records = absl::GetFlag(FLAGS_records);
  const int64_t keys = absl::GetFlag(FLAGS_keys);
  o.input.keys = static_cast<uint64_t>(keys == 0 ? job.default_keys : keys);
  o.input.disorder_ms = absl::GetFlag(FLAGS_disorder_ms);
  o.input.events_per_ms = absl::GetFlag(FLAGS_events_per_ms);
  o.window_ms = absl::GetFlag(FLAGS_window_ms);
  o.slide_ms = absl::GetFlag(FLAGS_slide_ms);
  if (o.slide_ms == 0) o.slide_ms = std::max<int64_t>(1, o.window_ms / 10);
  o.gap_ms = absl::GetFlag(FLAGS_gap_ms);
  if (o.gap_ms == 0 && o.input.events_per_ms > 0)
    o.gap_ms = std::max<int64_t>(1, 2 * static_cast<int64_t>(o.input.keys) / o.input.events_per_ms);
  const bool allowed_lateness = job.lateness == Lateness::kAllowed;
  o.lateness_ms = allowed_lateness ? absl::GetFlag(FLAGS_lateness_ms) : 0;
  o.very_late_fraction = allowed_lateness ? absl::GetFlag(FLAGS_very_late_fraction) : 0;
  const int64_t disorder = o.input.disorder_ms;
  o.watermark_delay_ms = absl::GetFlag(FLAGS_watermark_delay_ms);
  if (o.watermark_delay_ms == -1) {
    switch (job.lateness) {
      case Lateness::kNone:
        o.watermark_delay_ms = disorder;
        break;
      case Lateness::kNoSessionTouch:
        o.watermark_delay_ms = disorder + 1;
        break;
      case Lateness::kAllowed:
        o.watermark_delay_ms = disorder / 2;
        break;
    }
  }
  o.batch_size = static_cast<size_t>(absl::GetFlag(FLAGS_batch_size));
  o.buffer_timeout_ms = absl::GetFlag(FLAGS_buffer_timeout_ms);
  o.channel_capacity = static_cast<size_t>(absl::GetFlag(FLAGS_channel_capacity));
  o.watermark_interval_ms = absl::GetFlag(FLAGS_watermark_interval_ms);
  if (o.watermark_interval_ms == -1) o.watermark_interval_ms = job.default_watermark_interval_ms;
  o.threads = absl::GetFlag(FLAGS_threads);
  o.tbb_arena = absl::GetFlag(FLAGS_scheduler) == "arena";
  o.checkpoint_interval_ms = absl::GetFlag(FLAGS_checkpoint_interval_ms);
  o.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  o.incremental_checkpoints = absl::GetFlag(FLAGS_incremental_checkpoints);
  o.unaligned_checkpoints = absl::GetFlag(FLAGS_unaligned_checkpoints);
  g_sink_delay_us = absl::GetFlag(FLAGS_sink_delay_us);
  g_skip_result_merge = absl::GetFlag(FLAGS_skip_result_merge);
  g_latency_every = absl::GetFlag(FLAGS_latency_every);
  if (g_latency_every < 1) return "--latency_every must be at least 1";
  o.state_backend = absl::GetFlag(FLAGS_state_backend);
  if (o.state_backend != "heap" && o.state_backend != "rocksdb") {
    std::fprintf(stderr, "--state_backend must be heap or rocksdb, not '%s'\n",
                 o.state_backend.c_str());
    std::exit(2);
  }
  o.state_backend_dir = absl::GetFlag(FLAGS_state_backend_dir);
  o.local_aggregation = absl::GetFlag(FLAGS_local_aggregation);
  if (o.local_aggregation &&
      (job.windows == WindowKind::kNone || job.windows == WindowKind::kSession))
    return "--local_aggregation applies to the tumbling and sliding window jobs (W1, W2, W4-W6)";
  const std::string ts_mode = absl::GetFlag(FLAGS_timestamps);
  if (ts_mode != "assigner" && ts_mode != "source")
    return "--timestamps must be 'assigner' or 'source'";
  o.source_timestamps = ts_mode == "source";

  if (o.sources <= 0 || o.windows <= 0 || o.input.records < 0 || keys < 0 ||
      o.input.keys > (uint64_t{1} << 32) || disorder < 0 || disorder > 65535 ||
      o.input.events_per_ms <= 0 || o.window_ms <= 0 || o.slide_ms <= 0 || o.gap_ms <= 0 ||
      o.batch_size == 0 || o.channel_capacity == 0 || o.buffer_timeout_ms < 0 ||
      o.watermark_interval_ms < 0 || o.watermark_delay_ms < 0 || o.lateness_ms < 0 ||
      !(o.rate >= 0) || !(o.very_late_fraction >= 0 && o.very_late_fraction <= 1)) {
    return "invalid parameters: need sources, windows, events_per_ms, window_ms, slide_ms, "
           "gap_ms, batch_size, channel_capacity > 0; keys <= 2^32; records, rate, "
           "buffer_timeout_ms, watermark_interval_ms, watermark_delay_ms, lateness_ms >= 0; "
           "0 <= disorder_ms <= 65535; 0 <= very_late_fraction <= 1";
  }
  // The comparison with the baseline holds only when no record is late by
  // timing (see the file comment).
  switch (job.lateness) {
    case Lateness::kNone:
      if (o.watermark_delay_ms < disorder)
        return "--watermark_delay_ms < --disorder_ms makes records late (only W6 allows that)";
      break;
    case Lateness::kNoSessionTouch:
      if (o.watermark_delay_ms <= disorder)
        return "sessions need --watermark_delay_ms > --disorder_ms (a record at a closed "
               "session's end would merge or not depending on timing)";
      break;
    case Lateness::kAllowed:
      if (o.lateness_ms + o.watermark_delay_ms < disorder)
        return "W6 needs --lateness_ms + --watermark_delay_ms >= --disorder_ms (else records "
               "other than the very late ones are dropped depending on timing)";
      break;
  }
  o.input.very_late_threshold = o.very_late_fraction >= 1
                                    ? UINT64_MAX
                                    : static_cast<uint64_t>(std::ldexp(o.very_late_fraction, 64));
  return std::nullopt;
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

// The value with one decimal, or null.
std::string JsonNumber(std::optional<double> v) { return v ? absl::StrFormat("%.1f", *v) : "null"; }

// Window state per live (key, window), from the window operator's counters
// and from RSS (see the file comment); nullopt when not computable.
std::optional<double> BytesPerKeyWindow(const JobRun& run) {
  if (run.peak_live_key_windows <= 0 || run.window_state_bytes_at_peak <= 0) return std::nullopt;
  return static_cast<double>(run.window_state_bytes_at_peak) /
         static_cast<double>(run.peak_live_key_windows);
}
std::optional<double> RssBytesPerKeyWindow(const JobRun& run) {
  if (run.peak_live_key_windows <= 0 || !run.peak_rss_reset || run.rss_before_bytes <= 0 ||
      run.peak_rss_bytes <= run.rss_before_bytes)
    return std::nullopt;
  return static_cast<double>(run.peak_rss_bytes - run.rss_before_bytes) /
         static_cast<double>(run.peak_live_key_windows);
}

int Main() {
  // Under mpirun every rank runs the job; rank 0 alone runs the baseline,
  // compares and reports (the others print nothing).
  const ClusterInfo cluster = ThisCluster();
  const bool reporter = cluster.rank == 0;
  if (absl::GetFlag(FLAGS_list_jobs)) {
    if (reporter)
      for (const JobSpec& j : kJobs) std::printf("%-8s %s\n", j.name, j.description);
    return 0;
  }
  const std::string job_name = absl::GetFlag(FLAGS_job);
  const JobSpec* job = FindJob(job_name);
  if (job == nullptr) {
    if (reporter)
      std::fprintf(stderr, "unknown job '%s' (--list_jobs lists them)\n", job_name.c_str());
    return 2;
  }
  Options o;
  if (std::optional<std::string> invalid = ReadOptions(*job, o)) {
    if (reporter) std::fprintf(stderr, "%s\n", invalid->c_str());
    return 2;
  }
  // Checkpoints go to a fresh directory unless one is given; it is removed
  // at the end.
  std::optional<std::string> owned_checkpoint_dir;
  if (o.checkpoint_interval_ms > 0 && o.checkpoint_dir.empty()) {
    std::string tmpl = "/tmp/tidemark-bench-chk-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "cannot create a checkpoint directory under /tmp\n");
      return 2;
    }
    o.checkpoint_dir = tmpl;
    owned_checkpoint_dir = tmpl;
  }
  struct RemoveDir {
    std::optional<std::string>* dir;
    ~RemoveDir() {
      if (*dir) {
        std::error_code ec;
        std::filesystem::remove_all(**dir, ec);
      }
    }
  } remove_dir{&owned_checkpoint_dir};
  const char* ts_mode = o.source_timestamps ? "source" : "assigner";
  const int repeat = std::max(1, absl::GetFlag(FLAGS_repeat));
  const bool skip_baseline = absl::GetFlag(FLAGS_skip_baseline);
  // Across ranks the other ranks wait in the next job's start while rank 0
  // runs the baseline (at most 60 s, the exchange's start deadline).
  const bool run_baseline = !skip_baseline && reporter;

  // Across ranks: initialise MPI (else the first execute() would, inside the
  // timed job) and start the ranks together.
  if (cluster.distributed()) GatherAtRank0("");

  std::vector<double> job_rates, base_rates;
  JobRun best_job;
  double best_job_rate = -1;
  BaselineRun best_base;
  double best_base_rate = -1;
  bool all_equal = true;
  std::string error;
  const double prime_gb = absl::GetFlag(FLAGS_prime_memory_gb);
  // Peak RSS is the first run's: later runs start with what earlier job and
  // loop runs freed but the allocator kept, and the peak counter can only be
  // reset to the current RSS (with --repeat=3 W4's peak read 522 MB instead
  // of 232 MB, and its RSS bytes per key-window went missing).
  int64_t first_peak = 0, first_before = 0;
  bool first_reset = false;
  for (int r = 0; r < repeat; ++r) {
    PrimeMemory(prime_gb);
    JobRun jr = job->run(o);
    if (!jr.ok) {
      error = jr.error;
      all_equal = false;
      break;
    }
    if (r == 0) {
      first_peak = jr.peak_rss_bytes;
      first_before = jr.rss_before_bytes;
      first_reset = jr.peak_rss_reset;
    }
    const double rate = jr.seconds > 0 ? static_cast<double>(o.input.records) / jr.seconds : 0;
    job_rates.push_back(rate);
    // Nothing lost silently: every late record reached a consumed side output.
    bool equal = (jr.expected_sink_records < 0 || jr.sink_records == jr.expected_sink_records) &&
                 !jr.duplicate_keys && jr.late_dropped == 0;
    if (run_baseline) {
      PrimeMemory(prime_gb);
      const double base_cpu0 = ProcessCpuSeconds();
      BaselineRun br = job->baseline(o);
      br.cpu_seconds = ProcessCpuSeconds() - base_cpu0;
      BuildResults(br.emitted, br.results);
      br.emitted = {};
      const double brate = br.seconds > 0 ? static_cast<double>(o.input.records) / br.seconds : 0;
      base_rates.push_back(brate);
      equal = equal && ResultsEqual(*job, o, jr, br);
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
  best_job.peak_rss_bytes = first_peak;
  best_job.rss_before_bytes = first_before;
  best_job.peak_rss_reset = first_reset;
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
  const std::optional<double> bytes_per_kw = BytesPerKeyWindow(best_job);
  const std::optional<double> rss_bytes_per_kw = RssBytesPerKeyWindow(best_job);
  const bool lateness = job->lateness == Lateness::kAllowed;
  if (!reporter) return error.empty() ? 0 : 1;
  // Across ranks: the traffic between them, per record of the input.
  const NetworkSummary& net = best_job.network;
  const bool across_ranks = net.ranks > 1;
  const double bytes_per_record = o.input.records > 0 ? static_cast<double>(net.bytes_sent) /
                                                            static_cast<double>(o.input.records)
                                                      : 0;

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
      absl::StrAppend(&j,
                      ", \"baseline_records_per_s\": null, \"baseline_seconds\": null, "
                      "\"baseline_cpu_seconds\": null",
                      ", \"ratio\": null, \"results_equal\": null");
    } else {
      absl::StrAppend(
          &j, absl::StrFormat(", \"baseline_records_per_s\": %.1f", std::max(0.0, best_base_rate)),
          absl::StrFormat(", \"baseline_seconds\": %.6f", best_base.seconds),
          absl::StrFormat(", \"baseline_cpu_seconds\": %.6f", best_base.cpu_seconds),
          absl::StrFormat(", \"ratio\": %.4f", ratio),
          ", \"results_equal\": ", all_equal ? "true" : "false");
    }
    // Latency: window jobs only (null otherwise).
    if (p50 >= 0) {
      absl::StrAppend(
          &j, absl::StrFormat(", \"p50_latency_ms\": %.4f, \"p99_latency_ms\": %.4f", p50, p99),
          ", \"latency_results\": ", best_job.latencies_ms.size(),
          ", \"latency_unmeasured\": ", best_job.latency_unmeasured,
          ", \"latency_every\": ", g_latency_every);
    } else {
      absl::StrAppend(&j, ", \"p50_latency_ms\": null, \"p99_latency_ms\": null");
    }
    absl::StrAppend(
        &j, ", \"bytes_per_key_window\": ", JsonNumber(bytes_per_kw),
        ", \"bytes_per_key_window_rss\": ", JsonNumber(rss_bytes_per_kw),
        ", \"peak_live_key_windows\": ", best_job.peak_live_key_windows,
        ", \"window_state_bytes_at_peak\": ", best_job.window_state_bytes_at_peak,
        ", \"rss_before_job_bytes\": ", best_job.rss_before_bytes,
        absl::StrFormat(", \"longest_source_pause_ms\": %.1f",
                        best_job.source_progress.longest_pause_ms),
        absl::StrFormat(", \"slowest_100ms_source_rate\": %.1f",
                        best_job.source_progress.slowest_span_rate),
        absl::StrFormat(", \"median_100ms_source_rate\": %.1f",
                        best_job.source_progress.median_span_rate),
        ", \"checkpoints\": ", best_job.checkpoints.completed,
        ", \"checkpoint_interval_ms\": ", o.checkpoint_interval_ms,
        ", \"checkpoint_last_bytes\": ", best_job.checkpoints.last_size_bytes,
        ", \"checkpoint_max_bytes\": ", best_job.checkpoints.max_size_bytes,
        absl::StrFormat(", \"checkpoint_last_ms\": %.3f, \"checkpoint_max_ms\": %.3f",
                        best_job.checkpoints.last_duration_ms,
                        best_job.checkpoints.max_duration_ms),
        absl::StrFormat(", \"checkpoint_max_alignment_ms\": %.3f",
                        best_job.checkpoints.max_alignment_ms),
        absl::StrFormat(", \"checkpoint_sync_max_ms\": %.3f", best_job.checkpoints.max_sync_ms),
        ", \"incremental_checkpoints\": ", o.incremental_checkpoints ? "true" : "false",
        ", \"unaligned_checkpoints\": ", o.unaligned_checkpoints ? "true" : "false",
        ", \"checkpoint_sizes_bytes\": [", absl::StrJoin(best_job.checkpoints.sizes_bytes, ", "),
        "], \"checkpoint_state_bytes\": [", absl::StrJoin(best_job.checkpoints.state_bytes, ", "),
        "]");
    absl::StrAppend(&j, ", \"peak_rss_bytes\": ", peak,
                    ", \"sink_records\": ", best_job.sink_records,
                    ", \"distinct_keys_out\": ", best_job.results.size(),
                    ", \"late_dropped\": ", best_job.late_dropped, ", \"sources\": ", o.sources,
                    ", \"windows\": ", o.windows, ", \"keys\": ", o.input.keys,
                    ", \"local_aggregation\": ", o.local_aggregation ? "true" : "false",
                    ", \"disorder_ms\": ", o.input.disorder_ms,
                    ", \"watermark_delay_ms\": ", o.watermark_delay_ms,
                    ", \"events_per_ms\": ", o.input.events_per_ms,
                    absl::StrFormat(", \"rate\": %.1f", o.rate));
    switch (job->windows) {
      case WindowKind::kNone:
        break;
      case WindowKind::kTumbling:
        absl::StrAppend(&j, ", \"window_ms\": ", o.window_ms);
        break;
      case WindowKind::kSliding:
        absl::StrAppend(&j, ", \"window_ms\": ", o.window_ms, ", \"slide_ms\": ", o.slide_ms);
        break;
      case WindowKind::kSession:
        absl::StrAppend(&j, ", \"gap_ms\": ", o.gap_ms);
        break;
    }
    if (lateness) {
      absl::StrAppend(&j, ", \"lateness_ms\": ", o.lateness_ms,
                      absl::StrFormat(", \"very_late_fraction\": %g", o.very_late_fraction),
                      ", \"late_records\": ", best_job.late.size(), ", \"baseline_late_records\": ",
                      skip_baseline ? "null" : absl::StrCat(best_base.late.size()),
                      ", \"element_firings\": ", best_job.element_firings);
    }
    absl::StrAppend(&j, ", \"batch_size\": ", o.batch_size,
                    ", \"buffer_timeout_ms\": ", o.buffer_timeout_ms,
                    ", \"channel_capacity\": ", o.channel_capacity,
                    ", \"watermark_interval_ms\": ", o.watermark_interval_ms,
                    ", \"worker_threads\": ", threads, ", \"timestamps\": \"", ts_mode, "\"",
                    ", \"repeat\": ", repeat, ", \"job_records_per_s_runs\": ", JsonList(job_rates),
                    ", \"baseline_records_per_s_runs\": ", JsonList(base_rates));
    if (across_ranks) {
      // CPU, RSS, results and latencies above are every rank's; the source
      // progress rank 0's source subtasks'; worker_threads is per rank.
      absl::StrAppend(&j, ", \"ranks\": ", net.ranks,
                      absl::StrFormat(", \"bytes_per_record\": %.3f", bytes_per_record),
                      ", \"remote_records\": ", net.records_sent,
                      ", \"remote_bytes\": ", net.bytes_sent,
                      ", \"remote_batches\": ", net.batches_sent,
                      ", \"credit_messages\": ", net.credit_messages,
                      ", \"remote_channels\": ", net.remote_channels,
                      ", \"max_in_flight_batches\": ", net.max_in_flight_batches,
                      ", \"source_progress_of\": \"rank 0\"");
    }
    absl::StrAppend(&j, ", \"cores\": ", cores, ", \"cpu\": \"", JsonEscape(Machine()), "\"}");
    std::printf("%s\n", j.c_str());
  } else {
    std::printf("tidemark-bench  job %s: %s\n", o.job.c_str(), job->description);
    std::printf(
        "  sources %d, windows %d, keys %llu, records %lld, disorder %lld ms, watermark delay "
        "%lld ms, rate %s, batch %zu, buffer timeout %lld ms, channel capacity %zu, watermark "
        "interval %lld ms, worker threads %d, timestamps from %s, repeat %d\n",
        o.sources, o.windows, static_cast<unsigned long long>(o.input.keys),
        static_cast<long long>(o.input.records), static_cast<long long>(o.input.disorder_ms),
        static_cast<long long>(o.watermark_delay_ms),
        o.rate > 0 ? absl::StrFormat("%.4g records/s", o.rate).c_str() : "unlimited", o.batch_size,
        static_cast<long long>(o.buffer_timeout_ms), o.channel_capacity,
        static_cast<long long>(o.watermark_interval_ms), threads, ts_mode, repeat);
    switch (job->windows) {
      case WindowKind::kNone:
        break;
      case WindowKind::kTumbling:
        std::printf("  window %lld ms", static_cast<long long>(o.window_ms));
        if (lateness) {
          std::printf(", allowed lateness %lld ms, very late fraction %g",
                      static_cast<long long>(o.lateness_ms), o.very_late_fraction);
        }
        std::printf("\n");
        break;
      case WindowKind::kSliding:
        std::printf("  window %lld ms, slide %lld ms\n", static_cast<long long>(o.window_ms),
                    static_cast<long long>(o.slide_ms));
        break;
      case WindowKind::kSession:
        std::printf("  session gap %lld ms\n", static_cast<long long>(o.gap_ms));
        break;
    }
    std::printf("  machine: %u cores, %s\n", cores, Machine().c_str());
    if (across_ranks) {
      std::printf(
          "  across %d MPI ranks (worker threads per rank; CPU, RSS, results and latencies of "
          "every rank, source progress of rank 0's sources)\n",
          net.ranks);
    }
    std::printf("\n");
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
    std::printf("  sink records           %lld (%zu distinct results)\n",
                static_cast<long long>(best_job.sink_records), best_job.results.size());
    if (lateness) {
      std::printf(
          "  late records           %zu to the side output (baseline: %s), %lld firings "
          "by late records\n",
          best_job.late.size(), skip_baseline ? "-" : absl::StrCat(best_base.late.size()).c_str(),
          static_cast<long long>(best_job.element_firings));
    }
    if (best_job.late_dropped != 0) {
      std::printf("  LATE RECORDS DROPPED   %lld\n", static_cast<long long>(best_job.late_dropped));
    }
    if (across_ranks) {
      std::printf(
          "  network                %.2f bytes per record; %lld records, %lld bytes in %lld "
          "batches over %lld remote channels; %lld credit messages; at most %lld batches in "
          "flight\n",
          bytes_per_record, static_cast<long long>(net.records_sent),
          static_cast<long long>(net.bytes_sent), static_cast<long long>(net.batches_sent),
          static_cast<long long>(net.remote_channels), static_cast<long long>(net.credit_messages),
          static_cast<long long>(net.max_in_flight_batches));
    }
    std::printf("  peak RSS (job)         %.1f MiB\n", static_cast<double>(peak) / (1 << 20));
    if (best_job.peak_live_key_windows > 0) {
      std::printf("  live key windows       %lld at the peak; %s bytes each (state), %s (RSS)\n",
                  static_cast<long long>(best_job.peak_live_key_windows),
                  JsonNumber(bytes_per_kw).c_str(), JsonNumber(rss_bytes_per_kw).c_str());
    }
    if (best_job.checkpoints.enabled) {
      const CheckpointSummary& c = best_job.checkpoints;
      std::printf(
          "  checkpoints            %lld every %lld ms (%lld failed); largest %lld bytes; last "
          "%.1f ms start to durable, longest %.1f ms; longest alignment %.3f ms; longest "
          "synchronous part %.3f ms\n",
          static_cast<long long>(c.completed), static_cast<long long>(o.checkpoint_interval_ms),
          static_cast<long long>(c.failed), static_cast<long long>(c.max_size_bytes),
          c.last_duration_ms, c.max_duration_ms, c.max_alignment_ms, c.max_sync_ms);
    }
    std::printf(
        "  source progress        longest pause %.1f ms; per 100 ms: slowest %.3g/s, median "
        "%.3g/s\n",
        best_job.source_progress.longest_pause_ms, best_job.source_progress.slowest_span_rate,
        best_job.source_progress.median_span_rate);
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
  // --help lists this program's flags (Abseil's own --help lists only flags of
  // a file named after the program, and exits 1).
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h" || a == "--helpshort" || a == "--helpfull") {
      std::cout << absl::ProgramUsageMessage() << "\n\nflags:\n";
      std::vector<absl::CommandLineFlag*> flags;
      for (const auto& [name, flag] : absl::GetAllFlags())
        if (absl::EndsWith(flag->Filename(), "tidemark_bench.cc")) flags.push_back(flag);
      std::sort(flags.begin(), flags.end(),
                [](const auto* x, const auto* y) { return x->Name() < y->Name(); });
      for (const absl::CommandLineFlag* f : flags)
        std::cout << "  --" << f->Name() << " (default '" << f->DefaultValue()
                  << "'): " << f->Help() << "\n";
      return 0;
    }
  }
  absl::ParseCommandLine(argc, argv);
  return tidemark::bench::Main();
}
