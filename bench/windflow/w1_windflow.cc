// W1 on WindFlow (https://github.com/ParaGroup/WindFlow), for the comparison
// issue 25 asks for ("3x WindFlow"): the same records as tidemark-bench's W1
// (record i is the same pure function of i, Input::At in
// bench/tidemark_bench.cc), split round robin over --sources source replicas,
// a keyed tumbling event-time window sum (Keyed_Windows, incremental) over
// --windows replicas, and a sink chained to it that keeps every result.  The
// results are compared with a single-threaded loop over the same records run
// in the same process, and both rates are printed as one JSON line.
//
// Not built by CMake (WindFlow and FastFlow are not Debian packages):
// bench/windflow/run.sh builds it against checkouts of both and alternates it
// with tidemark-bench.
//
//   w1_windflow --records=20000000 --keys=10000 --sources=2 --windows=2
//               [--batch=0] [--operator=keyed|ffat] [--watermark_every=1]
//               [--window_ms=1000] [--disorder_ms=100]
//
// Time: WindFlow's timestamps are microseconds counted from its windows'
// origin (per key it keeps, and fires, every window from id 0 on, so epoch
// timestamps would make it allocate 1.7e9 windows): a record's time is
// (ts - origin) * 1000 us, with origin = kBase - window_ms (a multiple of
// window_ms; the earliest record, pulled back by at most disorder_ms <
// window_ms, is in window 0), and the window length window_ms * 1000 us, so
// the windows are tidemark's.  A key absent from a window between two it is
// in gets an empty result (sum 0) from WindFlow; those are counted apart
// (every real sum is at least 1).  Watermarks: each source replica sets
// max_ts - delay - 1 (delay = disorder, as W1's default) after every record:
// WindFlow sends a watermark with each batch or punctuation it emits, so this
// costs a store per record (tidemark's is periodic, every 200 ms).
#include <absl/container/flat_hash_map.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>
#include <windflow.hpp>

namespace {

struct Options {
  int64_t records = 20'000'000;
  uint64_t keys = 10'000;
  int sources = 2;
  int windows = 2;
  size_t batch = 0;
  int64_t window_ms = 1000;
  int64_t disorder_ms = 100;
  int64_t events_per_ms = 1000;
  std::string op = "keyed";     // keyed: Keyed_Windows (incremental); ffat: Ffat_Windows
  int64_t watermark_every = 1;  // a source replica sets its watermark every N records
};

// bench/tidemark_bench.cc's Mix and Input::At, so that both see the same
// records.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

struct Event {
  int64_t key;
  int64_t value;
  int64_t ts;  // ms
};

constexpr int64_t kBase = 1'700'000'000'000;
int64_t Origin(const Options& o) { return kBase - o.window_ms; }

Event At(const Options& o, int64_t i) {
  const uint64_t h = Mix(static_cast<uint64_t>(i));
  const auto key = static_cast<int64_t>(((h & 0xffffffffu) * o.keys) >> 32);
  const auto back =
      static_cast<int64_t>(((h >> 48) * static_cast<uint64_t>(o.disorder_ms + 1)) >> 16);
  const auto value = static_cast<int64_t>((h >> 32) & 0xff) + 1;
  return Event{key, value, kBase + i / o.events_per_ms - back};
}

struct Tuple {
  size_t key = 0;
  uint64_t id = 0;
  int64_t value = 0;
  Tuple() = default;
  Tuple(size_t k, uint64_t i) : key(k), id(i) {}
};

using Results = absl::flat_hash_map<std::pair<int64_t, int64_t>, int64_t>;  // (key, start) -> sum

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto val = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      if (std::strncmp(a, name, n) == 0 && a[n] == '=') return a + n + 1;
      return nullptr;
    };
    if (const char* v = val("--records"))
      o.records = std::atoll(v);
    else if (const char* v = val("--keys"))
      o.keys = std::strtoull(v, nullptr, 10);
    else if (const char* v = val("--sources"))
      o.sources = std::atoi(v);
    else if (const char* v = val("--windows"))
      o.windows = std::atoi(v);
    else if (const char* v = val("--batch"))
      o.batch = std::strtoull(v, nullptr, 10);
    else if (const char* v = val("--window_ms"))
      o.window_ms = std::atoll(v);
    else if (const char* v = val("--disorder_ms"))
      o.disorder_ms = std::atoll(v);
    else if (const char* v = val("--operator"))
      o.op = v;
    else if (const char* v = val("--watermark_every"))
      o.watermark_every = std::atoll(v);
    else {
      std::fprintf(stderr, "w1_windflow: unknown argument %s\n", a);
      std::exit(2);
    }
  }
  return o;
}

// The single-threaded loop: the same sums, in a hash map (the comparison
// needs only the final table; tidemark-bench's W1 baseline also emits in
// watermark order, which this loop does not need to).
Results Baseline(const Options& o, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  Results r;
  for (int64_t i = 0; i < o.records; ++i) {
    const Event e = At(o, i);
    const int64_t start = e.ts - e.ts % o.window_ms;
    r[{e.key, start}] += e.value;
  }
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  if (o.disorder_ms >= o.window_ms || kBase % o.window_ms != 0) {
    std::fprintf(stderr, "w1_windflow: needs disorder_ms < window_ms dividing %lld\n",
                 static_cast<long long>(kBase));
    return 2;
  }
  std::mutex mu;
  std::vector<std::vector<Tuple>> per_replica(o.windows);

  wf::PipeGraph graph("w1_windflow", wf::Execution_Mode_t::DEFAULT, wf::Time_Policy_t::EVENT_TIME);
  auto source_fn = [&o](wf::Source_Shipper<Tuple>& shipper, wf::RuntimeContext& ctx) {
    const int64_t p = static_cast<int64_t>(ctx.getParallelism());
    const int64_t origin = Origin(o);
    int64_t max_ts = INT64_MIN;
    int64_t last_wm = -1;  // WindFlow's watermarks are unsigned and must increase
    int64_t n = 0;
    for (int64_t i = static_cast<int64_t>(ctx.getReplicaIndex()); i < o.records; i += p) {
      const Event e = At(o, i);
      Tuple t(static_cast<size_t>(e.key), 0);
      t.value = e.value;
      const int64_t rel = e.ts - origin;
      shipper.pushWithTimestamp(std::move(t), static_cast<uint64_t>(rel) * 1000);
      if (rel > max_ts) max_ts = rel;
      if (++n % o.watermark_every == 0) {
        const int64_t wm = max_ts - o.disorder_ms - 1;
        if (wm > last_wm) {
          last_wm = wm;
          shipper.setNextWatermark(static_cast<uint64_t>(wm) * 1000 + 999);
        }
      }
    }
  };
  wf::Source source = wf::Source_Builder(source_fn)
                          .withName("source")
                          .withParallelism(o.sources)
                          .withOutputBatchSize(o.batch)
                          .build();
  wf::MultiPipe& mp = graph.add_source(source);
  const auto len = std::chrono::microseconds(o.window_ms * 1000);
  auto key_of = [](const Tuple& t) -> size_t { return t.key; };
  if (o.op == "ffat") {
    auto lift = [](const Tuple& t, Tuple& r) { r.value = t.value; };
    auto combine = [](const Tuple& a, const Tuple& b, Tuple& r) { r.value = a.value + b.value; };
    wf::Ffat_Windows fw = wf::Ffat_Windows_Builder(lift, combine)
                              .withName("w1 tumbling window sum")
                              .withParallelism(o.windows)
                              .withKeyBy(key_of)
                              .withTBWindows(len, len)
                              .withOutputBatchSize(o.batch)
                              .build();
    mp.add(fw);
  } else {
    auto win_fn = [](const Tuple& t, Tuple& result) { result.value += t.value; };
    wf::Keyed_Windows kw = wf::Keyed_Windows_Builder(win_fn)
                               .withName("w1 tumbling window sum")
                               .withParallelism(o.windows)
                               .withKeyBy(key_of)
                               .withTBWindows(len, len)
                               .withOutputBatchSize(o.batch)
                               .build();
    mp.add(kw);
  }
  auto sink_fn = [&per_replica](std::optional<Tuple>& r, wf::RuntimeContext& ctx) {
    if (r) per_replica[ctx.getReplicaIndex()].push_back(*r);
  };
  wf::Sink sink = wf::Sink_Builder(sink_fn).withName("sink").withParallelism(o.windows).build();
  mp.chain_sink(sink);

  const auto t0 = std::chrono::steady_clock::now();
  graph.run();
  const double job_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // WindFlow's window id is the window's index from its origin.
  Results job;
  int64_t results = 0;
  int64_t empty_results = 0;
  bool duplicate = false;
  for (const auto& v : per_replica) {
    for (const Tuple& t : v) {
      if (t.value == 0) {
        ++empty_results;
        continue;
      }
      ++results;
      const int64_t start = Origin(o) + static_cast<int64_t>(t.id) * o.window_ms;
      duplicate |= !job.try_emplace({static_cast<int64_t>(t.key), start}, t.value).second;
    }
  }
  double base_s = 0;
  const Results expected = Baseline(o, &base_s);
  const bool equal = !duplicate && job == expected;
  std::printf(
      "{\"system\":\"windflow\",\"operator\":\"%s\",\"job\":\"W1\",\"records\":%lld,\"keys\":%llu,"
      "\"sources\":%d,"
      "\"windows\":%d,\"batch\":%zu,\"job_seconds\":%.4f,\"job_records_per_s\":%.0f,"
      "\"baseline_records_per_s\":%.0f,\"ratio_to_baseline\":%.3f,\"results\":%lld,"
      "\"empty_results\":%lld,\"results_equal\":%s}\n",
      o.op.c_str(), static_cast<long long>(o.records), static_cast<unsigned long long>(o.keys),
      o.sources, o.windows, o.batch, job_s, o.records / job_s, o.records / base_s,
      (o.records / job_s) / (o.records / base_s), static_cast<long long>(results),
      static_cast<long long>(empty_results), equal ? "true" : "false");
  return equal ? 0 : 1;
}
