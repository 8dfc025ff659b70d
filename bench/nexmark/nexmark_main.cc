// tidemark-nexmark: runs Nexmark's queries on tidemark and prints Nexmark's
// table beside Flink's published Throughput/Cores and a single-threaded loop
// computing the same answer.
//
//   tidemark-nexmark --queries=all --events=10M --parallelism=2
//       [--checkpoint-interval=10s] [--json] [--dump-events=PATH] [--results=DIR]
//       [--sink=blackhole|digest] [--prime-memory-gb=G]
//
// Per query: the job runs over the generator's events (event i on source
// subtask i mod p) into a blackhole sink that only counts the rows (Nexmark's
// Flink runs write into a blackhole table), timed; then, untimed, again into
// a sink keeping an order-independent digest of the rows (append-only
// queries) or of the final table (updating ones), which is compared with the
// reference loop's.  The loop runs in the same process over the same events,
// timed counting its rows as the timed job does.  With --sink=digest the
// timed run digests (one run of the job).  "Cores" is
// measured as Nexmark measures it: the process's CPU time during the job over
// its wall time; Throughput/Cores = events / (Cores * Time).
//
// --prime-memory-gb=G touches and releases G GB of fresh memory before each
// timed run, untimed: on a host whose hypervisor takes freed memory back (this
// project's VMs), the first touch of new memory otherwise costs a memory-heavy
// query (q16, q18, q19) up to half its speed, depending on what ran before it
// (bench/RESULTS.md, "the host takes freed memory back").
//
// Flags may be written with '-' or '_' (--checkpoint-interval or
// --checkpoint_interval).
//
// Under an MPI launcher (`mpirun -n 2 tidemark-nexmark ...`, when built with
// tidemark::mpi) every rank runs every query's job, with its subtasks placed
// over the ranks (subtask i on rank i mod N: the source's events, the keyed
// operators' key groups and the sinks spread over the ranks); each rank's
// sink digests (and rows) are gathered at rank 0, which runs the reference,
// compares and prints.  "Cores" is then rank 0's process alone.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/nexmark/generator.h"
#include "bench/nexmark/queries.h"
#include "bench/prime_memory.h"
#include "tidemark/tidemark.h"

ABSL_FLAG(std::string, queries, "all", "comma-separated queries (q0..q22), or all");
ABSL_FLAG(std::string, events, "1M", "events to generate (suffix K or M)");
ABSL_FLAG(double, rate, 1e7, "event-time rate of the generator, events per second (Nexmark's TPS)");
ABSL_FLAG(int, parallelism, 2, "parallelism of every operator");
ABSL_FLAG(std::string, checkpoint_interval, "0",
          "take a checkpoint (in memory) this often, e.g. 10s; 0: none");
ABSL_FLAG(bool, json, false, "print one JSON object per query instead of the table");
ABSL_FLAG(std::string, dump_events, "", "write the generated events to this file as JSON lines");
ABSL_FLAG(
    std::string, results, "",
    "write each query's results (rows; for updating queries the final table) to DIR/<q>.jsonl");
ABSL_FLAG(bool, reference, true, "also run the single-threaded reference and compare");
ABSL_FLAG(std::string, sink, "blackhole",
          "the timed runs' sink: blackhole (counts the rows, as Nexmark's Flink runs write into a "
          "blackhole table; the results are then checked in a second, untimed run) or digest "
          "(hashes every row in the timed run)");
ABSL_FLAG(bool, require_equal, false,
          "exit 1 when a job fails or its results differ from the reference");
ABSL_FLAG(double, prime_memory_gb, 0,
          "before each timed run (the job's and the loop's), touch and release this many GB of "
          "fresh memory (huge pages; not timed), so that the run's first touches of new memory "
          "cost what they cost on a host that does not take freed memory back (this VM's "
          "hypervisor does: bench/RESULTS.md, \"the host takes freed memory back\"); 0: off");

namespace {

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int64_t ParseCount(const std::string& s) {
  if (s.empty()) throw std::invalid_argument("--events is empty");
  double mult = 1;
  std::string num = s;
  const char last = static_cast<char>(std::toupper(static_cast<unsigned char>(s.back())));
  if (last == 'K') mult = 1e3;
  if (last == 'M') mult = 1e6;
  if (last == 'G' || last == 'B') mult = 1e9;
  if (mult != 1) num.pop_back();
  double v;
  if (!absl::SimpleAtod(num, &v) || v <= 0)
    throw std::invalid_argument("--events=" + s + ": not a positive count (e.g. 100000, 10M)");
  return static_cast<int64_t>(std::llround(v * mult));
}

struct Measured {
  std::string query;
  int64_t events = 0;
  double seconds = 0, cores = 0, ref_seconds = 0, ref_cpu = 0;
  double flink = 0;
  bool ok = false, equal = false, checked = false;
  std::string error;
  int64_t rows = 0;
  int64_t checkpoints = 0;
  double throughput_per_core() const { return events / std::max(cores * seconds, 1e-9); }
  double reference_per_core() const { return ref_cpu > 0 ? events / ref_cpu : 0; }
};

std::string Rate(double v) {
  if (v <= 0) return "-";
  if (v >= 1e6) return absl::StrFormat("%.2f M/s", v / 1e6);
  return absl::StrFormat("%.1f K/s", v / 1e3);
}

void WriteRows(const std::string& path, const std::vector<std::string>& rows) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  for (const std::string& r : rows) out << r << '\n';
}

}  // namespace

// jemalloc's options, when the program is linked with it (TIDEMARK_JEMALLOC;
// MALLOC_CONF in the environment still overrides them): transparent huge
// pages for its memory, since the system's THP mode is often "madvise".  The
// large keyed tables (q16-q19: a hash table that doubles as it grows) then
// take a page fault per 2 MiB instead of per 4 KiB; on the 2-core VMs here a
// fault costs about 10 us, and these faults were 15-25% of q17's and q18's
// CPU (bench/RESULTS.md).  The single-thread loops run in the same process
// with the same allocator.
extern "C" const char* malloc_conf;
const char* malloc_conf = "thp:always";

int main(int argc, char** argv) {
  // --checkpoint-interval and --checkpoint_interval alike.
  std::vector<std::string> args(argv, argv + argc);
  for (size_t i = 1; i < args.size(); ++i) {
    std::string& a = args[i];
    if (a.rfind("--", 0) != 0) continue;
    const size_t eq = a.find('=');
    std::replace(a.begin() + 2, eq == std::string::npos ? a.end() : a.begin() + eq, '-', '_');
  }
  std::vector<char*> argp;
  for (std::string& a : args) argp.push_back(a.data());
  absl::SetProgramUsageMessage(
      "tidemark-nexmark --queries=all --events=10M --parallelism=2 [--checkpoint-interval=10s] "
      "[--json] [--dump-events=PATH] [--results=DIR] [--sink=blackhole|digest]");
  absl::ParseCommandLine(static_cast<int>(argp.size()), argp.data());

  nexmark::GeneratorConfig config;
  std::vector<const nexmark::QueryDef*> queries;
  absl::Duration checkpoint;
  bool blackhole = true;
  try {
    const std::string sink = absl::GetFlag(FLAGS_sink);
    if (sink != "blackhole" && sink != "digest")
      throw std::invalid_argument("--sink=" + sink + ": blackhole or digest");
    blackhole = sink == "blackhole";
    config.events = ParseCount(absl::GetFlag(FLAGS_events));
    config.events_per_second = absl::GetFlag(FLAGS_rate);
    const std::string qs = absl::GetFlag(FLAGS_queries);
    if (qs == "all") {
      for (const auto& q : nexmark::Queries()) queries.push_back(&q);
    } else {
      for (absl::string_view name : absl::StrSplit(qs, ',', absl::SkipEmpty())) {
        const nexmark::QueryDef* q = nexmark::FindQuery(std::string(name));
        if (!q)
          throw std::invalid_argument("--queries: unknown query '" + std::string(name) +
                                      "' (q0..q22, q13-broadcast, or all)");
        queries.push_back(q);
      }
    }
    const std::string ci = absl::GetFlag(FLAGS_checkpoint_interval);
    if (ci == "0") {
      checkpoint = absl::ZeroDuration();
    } else if (!absl::ParseDuration(ci, &checkpoint) || checkpoint < absl::ZeroDuration()) {
      throw std::invalid_argument("--checkpoint-interval=" + ci + ": not a duration (e.g. 10s)");
    }
    if (absl::GetFlag(FLAGS_parallelism) < 1)
      throw std::invalid_argument("--parallelism must be at least 1");
  } catch (const std::exception& e) {
    std::cerr << "tidemark-nexmark: " << e.what() << "\n";
    return 2;
  }
  auto gen = std::make_shared<const nexmark::Generator>(config);
  const tidemark::ClusterInfo cluster = tidemark::ThisCluster();
  const bool rank0 = cluster.rank == 0;

  const std::string dump = absl::GetFlag(FLAGS_dump_events);
  if (!dump.empty() && rank0) {
    std::ofstream out(dump);
    if (!out) {
      std::cerr << "tidemark-nexmark: cannot write " << dump << "\n";
      return 2;
    }
    for (int64_t n = 0; n < config.events; ++n) out << nexmark::EventToJson(gen->Make(n)) << '\n';
  }
  const std::string results_dir = absl::GetFlag(FLAGS_results);
  if (!results_dir.empty()) std::filesystem::create_directories(results_dir);
  const bool keep_rows = !results_dir.empty();
  const int p = absl::GetFlag(FLAGS_parallelism);
  const bool json = absl::GetFlag(FLAGS_json);

  // One run of q's job into `rs`; its status and checkpoints.
  struct Ran {
    bool ok = false;
    std::string error;
    tidemark::CheckpointSummary checkpoints;
  };
  auto run_job = [&](const nexmark::QueryDef& q, const std::shared_ptr<nexmark::ResultSet>& rs) {
    Ran ran;
    tidemark::StreamExecutionEnvironment env;
    env.set_parallelism(p);
    if (checkpoint > absl::ZeroDuration())
      env.enable_checkpointing(absl::ToChronoMilliseconds(checkpoint));
    q.build(env, nexmark::NexmarkEvents(env, gen), rs);
    tidemark::JobResult r = env.execute("nexmark " + q.name);
    ran.ok = r.ok();
    if (!ran.ok) ran.error = r.status.ToString();
    ran.checkpoints = r.checkpoints;
    return ran;
  };
  // Every rank's results at rank 0 (collective: every rank calls it for
  // every run); null on the other ranks.
  auto gather = [&](std::shared_ptr<nexmark::ResultSet> rs) -> std::shared_ptr<nexmark::ResultSet> {
    if (!cluster.distributed()) return rs;
    const std::vector<std::string> parts = tidemark::GatherAtRank0(rs->Encode());
    if (!rank0) return nullptr;
    auto merged = std::make_shared<nexmark::ResultSet>(rs->keep_rows(), rs->mode());
    for (const std::string& part : parts) merged->MergeEncoded(part);
    return merged;
  };
  const nexmark::SinkMode timed_mode =
      blackhole ? nexmark::SinkMode::kCount : nexmark::SinkMode::kDigest;

  std::vector<Measured> all;
  for (const nexmark::QueryDef* q : queries) {
    Measured m;
    m.query = q->name;
    m.events = config.events;
    m.flink = q->flink_per_core;
    // The timed run: into a blackhole sink that counts the rows (as Nexmark's
    // Flink runs write into a blackhole table), or into the digest.
    auto timed = std::make_shared<nexmark::ResultSet>(keep_rows, timed_mode);
    tidemark::bench::PrimeMemory(absl::GetFlag(FLAGS_prime_memory_gb));
    const double c0 = CpuSeconds(), t0 = Now();
    const Ran ran = run_job(*q, timed);
    const double t1 = Now(), c1 = CpuSeconds();
    m.seconds = t1 - t0;
    m.cores = (c1 - c0) / std::max(m.seconds, 1e-9);
    m.ok = ran.ok;
    m.error = ran.error;
    m.checkpoints = ran.checkpoints.completed;
    if (ran.checkpoints.failed > 0) {
      m.ok = false;
      m.error = "checkpoint failed: " + ran.checkpoints.last_error;
    }
    timed = gather(timed);
    // The checked results: the timed run's when it digested them, else a
    // second, untimed run into the digest (and the rows, with --results).
    std::shared_ptr<nexmark::ResultSet> checked;
    const bool check = absl::GetFlag(FLAGS_reference);
    if (!blackhole) {
      checked = timed;
    } else if (check || keep_rows) {
      checked = std::make_shared<nexmark::ResultSet>(keep_rows, nexmark::SinkMode::kDigest);
      const Ran again = run_job(*q, checked);
      if (m.ok && !again.ok) {
        m.ok = false;
        m.error = "the checking run failed: " + again.error;
      } else if (m.ok && again.checkpoints.failed > 0) {
        m.ok = false;
        m.error = "a checkpoint of the checking run failed: " + again.checkpoints.last_error;
      }
      checked = gather(checked);
    }
    if (!rank0) continue;
    m.rows = timed->digest().count;
    if (keep_rows) WriteRows(results_dir + "/" + q->name + ".jsonl", checked->Rows());
    if (check) {
      tidemark::bench::PrimeMemory(absl::GetFlag(FLAGS_prime_memory_gb));  // as for the timed run
      const double rc0 = CpuSeconds(), rt0 = Now();
      auto loop = nexmark::RunReference(*q, *gen, false, timed_mode);
      m.ref_seconds = Now() - rt0;
      m.ref_cpu = CpuSeconds() - rc0;
      auto want = blackhole ? nexmark::RunReference(*q, *gen, false) : loop;
      m.checked = true;
      // Equal: the digests, and the timed run gave as many rows.
      m.equal = m.ok && want->digest() == checked->digest() &&
                timed->digest().count == want->digest().count;
    }
    if (json) {
      std::cout << absl::StrFormat(
          "{\"query\":\"%s\",\"events\":%d,\"parallelism\":%d,\"cores\":%.3f,\"seconds\":%.3f,"
          "\"throughput_per_core\":%.0f,\"reference_per_core\":%.0f,\"flink_per_core\":%.0f,"
          "\"results_equal\":%s,\"result_rows\":%d,\"checkpoint_interval_ms\":%d,"
          "\"checkpoints\":%d,\"ranks\":%d,\"sink\":\"%s\",\"ok\":%s}\n",
          m.query, m.events, p, m.cores, m.seconds, m.throughput_per_core(), m.reference_per_core(),
          m.flink, m.checked ? (m.equal ? "true" : "false") : "null", m.rows,
          absl::ToInt64Milliseconds(checkpoint), m.checkpoints, cluster.size,
          blackhole ? "blackhole" : "digest", m.ok ? "true" : "false");
      std::cout.flush();
    }
    if (!m.ok) std::cerr << "tidemark-nexmark: " << q->name << " failed: " << m.error << "\n";
    all.push_back(m);
  }

  if (!rank0) return 0;  // rank 0 compared and reports
  if (!json) {
    std::cout << absl::StrFormat(
        "Nexmark on tidemark: %d events, parallelism %d, checkpoints %s, %s sink%s\n",
        config.events, p,
        checkpoint > absl::ZeroDuration() ? absl::FormatDuration(checkpoint) : std::string("off"),
        blackhole ? "blackhole" : "digest",
        cluster.distributed() ? absl::StrFormat(", %d MPI ranks", cluster.size) : std::string());
    // The query column as wide as the longest name (q13-broadcast).
    size_t qw = 5;
    for (const Measured& m : all) qw = std::max(qw, m.query.size());
    const std::string rule =
        "+" + std::string(qw + 2, '-') +
        "+------------+-------+---------+-----------------+------------------+-"
        "-----------------+------------------+-------+\n";
    std::cout << rule
              << absl::StrFormat(
                     "| %-*s | Events Num | Cores | Time(s) | Cores * Time(s) | "
                     "Throughput/Cores | Flink Thr./Cores | 1-thread loop    | Equal |\n",
                     static_cast<int>(qw), "Query")
              << rule;
    for (const Measured& m : all) {
      std::cout << absl::StrFormat(
          "| %-*s | %10d | %5.2f | %7.3f | %15.3f | %16s | %16s | %16s | %-5s |\n",
          static_cast<int>(qw), m.query, m.events, m.cores, m.seconds, m.cores * m.seconds,
          Rate(m.throughput_per_core()), Rate(m.flink), Rate(m.reference_per_core()),
          !m.ok        ? "FAIL"
          : !m.checked ? "-"
          : m.equal    ? "yes"
                       : "NO");
    }
    std::cout << rule;
  }
  bool bad = false;
  for (const Measured& m : all) bad |= !m.ok || (m.checked && !m.equal);
  return absl::GetFlag(FLAGS_require_equal) && bad ? 1 : 0;
}
