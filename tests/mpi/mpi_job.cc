// tests/mpi/mpi_job.cc: jobs that mpi_test.cc runs under `mpirun -n N`.
//
//   mpi_job differential KIND FIRST COUNT
//       COUNT differential cases (differential_cases.h) from seed FIRST, KIND
//       tumbling | sliding | session, across the ranks: the round barrier
//       hears of every rank's window subtasks (their channel events are sent
//       to every rank over a communicator of the test's own), and the firings
//       and late records are gathered at rank 0, which compares them with the
//       reference model.  Rank 0 prints one line per case and "cases N
//       failed F"; exit 1 when a case failed.
//   mpi_job backpressure RELEASE_FILE
//       A generator on rank 0 feeds a sink on rank 1 that blocks until
//       RELEASE_FILE exists.  Rank 0 waits until the generator stops (the
//       exchange has no credits left), prints "emitted_while_blocked N",
//       creates the file; at the end rank 0 prints "received N",
//       "max_in_flight_batches N" and "records N".
//   mpi_job usertype
//       Records of a user type with its own StateCodec (a string and a vector)
//       cross ranks through key_by and a window; rank 0 prints "sums OK" when
//       every key's sum is what it must be.
//   mpi_job nocodec
//       The same with a type that has no codec: rank 0 prints the job's error.
//   mpi_job crash RANK
//       The same map raises SIGSEGV instead: the launcher ends every rank.
//   mpi_job generalized
//       Generalized watermarks across ranks: sources at parallelism `size`
//       report backlog (bool, OR, waiting for every channel) and progress
//       (long, MAX, waiting) to process functions at parallelism `size`
//       behind a rebalance, so every function subtask has a channel from
//       every rank.  Rank 0 gathers what each function subtask saw and prints
//       "generalized OK" (or what was wrong) and one line per subtask.
//   mpi_job fail RANK
//       A job whose map throws on the subtask placed on RANK; every rank
//       prints its job's status ("status ..." on stderr) and exits 3.
//   mpi_job restart none|fixed|rate OUT CHK R1,R2,...
//       A generator of records 0..23999 (20 000 a second, on rank 0) feeds a
//       map at parallelism 2 (record v to subtask v % 2, so on rank v % 2)
//       that throws at record Rk in the k-th attempt (counted by the restart
//       listener: each record throws once, and only one per attempt), then a
//       keyed running sum (key v % 14: the records of a key pass one map subtask, in order) into
//       exactly-once files in OUT, with a checkpoint every 100 ms into CHK and the restart strategy
//       none, fixed-delay (10 attempts, 100 ms) or failure-rate (2 failures in a minute, no delay).
//       Every rank prints one line on stderr: "restart rank R status S restarts N told T failures F
//       restored C last <cause>" (C: the checkpoint the last attempt restored, -1 none).
//   mpi_job drain OUT CHK SAVEPOINTS
//       Records 0, 1, ... (20 000 a second, on rank 0) through a map at
//       parallelism 2 into a keyed running sum; after 600 ms rank 0 stops the
//       job without drain into a directory under a file (it fails, the job
//       goes on: "nodrain <error>"), then with drain.  Every rank prints "drain rank R status S
//       savepoint P".
//   mpi_job stop OUT CHK SAVEPOINTS
//       The window job below (WindowJob) at parallelism 2; after 600 ms rank 0
//       stops it with a savepoint without drain.  Every rank prints "stop rank
//       R status S savepoint P stopped Q" (P: what stop_with_savepoint
//       returned, rank 0 only; Q: the job result's stopped_with_savepoint).
//   mpi_job resume OUT CHK SAVEPOINT P
//       The same job at parallelism P restored from SAVEPOINT, to the end of
//       its records.  Every rank prints "resume rank R status S restored ID".
//   mpi_job stopfail CHK SAVEPOINTS
//       A source at parallelism `size` whose subtask on rank 1 fails in its
//       snapshot; no periodic checkpoint, so the first snapshot is the
//       savepoint of rank 0's stop without drain.  Rank 0 prints "stopfail
//       <what stop_with_savepoint returned>"; every rank prints "stopfail
//       rank R status S".
#include <mpi.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_split.h"
#include "differential_cases.h"
#include "failing_source.h"
#include "tidemark/runtime/cluster/mpi_cluster.h"

namespace tidemark {
namespace {

// Forwards a window subtask's channel events to the round barrier of every
// rank, so that sources on any rank wait for window subtasks on any rank.
class RankBarrier final : public WatermarkListener {
 public:
  explicit RankBarrier(std::shared_ptr<RoundBarrier> local) : local_(std::move(local)) {
    const ClusterInfo c = ThisCluster();
    rank_ = c.rank;
    size_ = c.size;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    receiver_ = std::thread([this] { Receive(); });
  }
  // After the job: every rank's events were received (each rank says done
  // after its last event; MPI keeps their order).
  ~RankBarrier() override {
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) continue;
      std::lock_guard<std::mutex> lock(mu_);
      MPI_Send(nullptr, 0, MPI_BYTE, peer, kDone, comm_);
    }
    receiver_.join();
    MPI_Comm_free(&comm_);
  }

  void OnInputChannel(const ChannelEvent& e) override {
    local_->OnInputChannel(e);
    if (e.task_name->rfind("Window(", 0) != 0) return;
    const int64_t msg[6] = {e.subtask,      e.channel, e.channel_watermark,
                            e.channel_idle, e.aligned, e.subtask_idle};
    std::lock_guard<std::mutex> lock(mu_);
    for (int peer = 0; peer < size_; ++peer)
      if (peer != rank_) MPI_Send(msg, 6, MPI_INT64_T, peer, kEvent, comm_);
  }

 private:
  enum : int { kEvent = 1, kDone = 2 };

  void Receive() {
    const std::string name = "Window(remote)";
    int done = 0;
    while (done < size_ - 1) {
      int flag = 0;
      MPI_Status st;
      {
        std::lock_guard<std::mutex> lock(mu_);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st);
        if (flag) {
          int64_t msg[6] = {};
          MPI_Recv(msg, st.MPI_TAG == kEvent ? 6 : 0, MPI_INT64_T, st.MPI_SOURCE, st.MPI_TAG, comm_,
                   MPI_STATUS_IGNORE);
          if (st.MPI_TAG == kDone) {
            ++done;
            continue;
          }
          ChannelEvent e{&name,
                         static_cast<int>(msg[0]),
                         static_cast<int>(msg[1]),
                         msg[2],
                         msg[3] != 0,
                         msg[4],
                         msg[5] != 0,
                         -1};
          local_->OnInputChannel(e);
          continue;
        }
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // polling MPI
    }
  }

  std::shared_ptr<RoundBarrier> local_;
  int rank_ = 0, size_ = 1;
  MPI_Comm comm_;
  std::mutex mu_;  // MPI calls on comm_
  std::thread receiver_;
};

// Firings and late records of every rank, at rank 0 (both trivially copyable).
template <typename T>
std::vector<T> GatherItems(const std::vector<T>& mine) {
  static_assert(std::is_trivially_copyable_v<T>);
  std::string bytes(reinterpret_cast<const char*>(mine.data()), mine.size() * sizeof(T));
  std::vector<T> all;
  for (const std::string& b : GatherAtRank0(bytes)) {
    const size_t n = b.size() / sizeof(T);
    const size_t at = all.size();
    all.resize(at + n);
    std::memcpy(static_cast<void*>(all.data() + at), b.data(), n * sizeof(T));
  }
  return all;
}

int Differential(const std::string& kind_name, uint64_t first, int count) {
  const m::WindowKind kind = kind_name == "tumbling"  ? m::WindowKind::kTumbling
                             : kind_name == "sliding" ? m::WindowKind::kSliding
                                                      : m::WindowKind::kSession;
  const ClusterInfo cluster = ThisCluster();
  RunHooks hooks;
  std::shared_ptr<RankBarrier> forwarder;
  hooks.listener = [&](std::shared_ptr<RoundBarrier> b) {
    forwarder = std::make_shared<RankBarrier>(std::move(b));
    return forwarder;
  };
  hooks.after = [&](Actual& a) {
    forwarder.reset();  // every rank's events are in
    // Fire holds a std::string-free layout: copy the fields.
    struct Flat {
      int64_t key, start, end, count, sum;
      uint64_t id_hash;
      bool by_element;
      Timestamp watermark;
      int subtask;
    };
    std::vector<Flat> flat;
    for (const Fire& f : a.firings)
      flat.push_back(
          {f.key, f.start, f.end, f.count, f.sum, f.id_hash, f.by_element, f.watermark, f.subtask});
    a.firings.clear();
    a.firing_timestamps.clear();  // this rank's only: not checked
    for (const Flat& f : GatherItems(flat)) {
      Fire x;
      x.key = f.key;
      x.start = f.start;
      x.end = f.end;
      x.count = f.count;
      x.sum = f.sum;
      x.id_hash = f.id_hash;
      x.by_element = f.by_element;
      x.watermark = f.watermark;
      x.subtask = f.subtask;
      a.firings.push_back(x);
    }
    a.late = GatherItems(a.late);
  };
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    const Case c = Generate(seed, kind);
    const Outcome o = RunCase(c, hooks);
    if (cluster.rank != 0) continue;
    std::cout << "case " << seed << " " << kind_name << " sources=" << c.sources
              << " windows=" << c.window_parallelism << ": " << (o.errors.empty() ? "ok" : "FAILED")
              << "\n";
    for (const auto& e : o.errors) std::cout << "  " << e << "\n";
    if (!o.errors.empty()) ++failed;
  }
  if (cluster.rank == 0) std::cout << "cases " << count << " failed " << failed << std::endl;
  return failed == 0 ? 0 : 1;
}

int Backpressure(const std::string& release) {
  const ClusterInfo cluster = ThisCluster();
  constexpr int64_t kRecords = 200000;
  static std::atomic<int64_t> emitted{0};
  static std::atomic<int64_t> received{0};
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.set_batch_size(64);
  env.set_channel_capacity(4);
  env.set_buffer_timeout(Duration(1));
  env.disable_operator_chaining();
  env.set_placement([](const PlacementRequest& r) {
    return r.task_name.find("Slow sink") != std::string::npos ? 1 : 0;
  });
  env.from_generator<int64_t>(
         [](int64_t i) {
           emitted.fetch_add(1, std::memory_order_relaxed);
           return i;
         },
         kRecords)
      .add_sink(
          [release](int64_t&&) {
            // Blocked until rank 0 has seen the generator stop.
            while (!std::filesystem::exists(release))
              std::this_thread::sleep_for(std::chrono::milliseconds(5));  // an external event
            received.fetch_add(1, std::memory_order_relaxed);
          },
          "Slow sink");
  std::thread watcher;
  if (cluster.rank == 0) {
    watcher = std::thread([&] {
      // The generator has stopped once its count holds still for 300 ms.
      int64_t last = -1;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // watching real time
        const int64_t now = emitted.load();
        if (now == last && now > 0) break;
        last = now;
      }
      std::cout << "emitted_while_blocked " << emitted.load() << std::endl;
      std::ofstream(release) << "go\n";
    });
  }
  JobResult r = env.execute("backpressure");
  if (watcher.joinable()) watcher.join();
  std::string mine = std::to_string(received.load());
  std::vector<std::string> all = GatherAtRank0(mine);
  if (cluster.rank == 0) {
    int64_t total = 0;
    for (const auto& s : all) total += std::stoll(s);
    std::cout << "status " << r.status << "\n"
              << "received " << total << "\n"
              << "max_in_flight_batches " << r.network.max_in_flight_batches << "\n"
              << "records " << r.network.records_sent << std::endl;
  }
  return r.ok() ? 0 : 1;
}

int Fail(int rank, bool crash) {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.set_parallelism(cluster.size);
  env.from_generator<int64_t>([](int64_t i) { return i; }, -1)  // forever
      .rebalance()
      .map([rank, crash, n = int64_t{0}](const int64_t& v) mutable {
        if (ThisCluster().rank == rank && ++n == 5000) {
          if (crash) raise(SIGSEGV);  // a crash: no exception, no goodbye
          throw std::runtime_error("boom on purpose");
        }
        return v;
      })
      .name("Exploding map")
      .add_sink([](int64_t&&) {});
  JobResult r = env.execute("fail");
  // One write: the ranks' standard errors meet in mpirun's.
  const std::string line =
      absl::StrCat("status rank ", cluster.rank, ": ", r.status.ToString(), "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return 3;
}

struct Reading {
  std::string sensor;
  std::vector<int64_t> values;
};
struct Opaque {  // no StateCodec
  std::string sensor;
};

}  // namespace
}  // namespace tidemark

template <>
struct tidemark::StateCodec<tidemark::Reading> {
  static void Encode(internal::StateWriter& w, const Reading& r) {
    internal::Encode(w, r.sensor);
    internal::Encode(w, r.values);
  }
  static Reading Decode(internal::StateReader& r) {
    Reading x;
    x.sensor = internal::Decode<std::string>(r);
    x.values = internal::Decode<std::vector<int64_t>>(r);
    return x;
  }
};

namespace tidemark {
namespace {

int UserType() {
  const ClusterInfo cluster = ThisCluster();
  constexpr int64_t kRecords = 30000;
  StreamExecutionEnvironment env;
  env.set_parallelism(cluster.size);
  auto sums =
      env.from_generator<Reading>(
             [](int64_t i) {
               return Reading{"sensor-" + std::to_string(i % 17), {i, 1}};
             },
             kRecords)
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<Reading>::for_monotonous_timestamps().with_timestamp_assigner(
                  [](const Reading& r, Timestamp) { return r.values[0]; }))
          .key_by([](const Reading& r) { return r.sensor; })
          .window(TumblingEventTimeWindows::of(Duration(1000)))
          .reduce([](const Reading& a, const Reading& b) {
            return Reading{a.sensor, {a.values[0] + b.values[0], a.values[1] + b.values[1]}};
          })
          .collect();
  // collect() runs on every rank at parallelism `size`: gather the sums.
  JobResult r = env.execute("usertype");
  std::map<std::string, std::pair<int64_t, int64_t>> mine;
  for (const auto& item : sums->items()) {
    mine[item.value.sensor].first += item.value.values[0];
    mine[item.value.sensor].second += item.value.values[1];
  }
  std::string bytes;
  internal::StateWriter w(&bytes);
  internal::Encode(w, mine);
  std::vector<std::string> all = GatherAtRank0(bytes);
  if (cluster.rank != 0) return r.ok() ? 0 : 1;
  std::map<std::string, std::pair<int64_t, int64_t>> got, want;
  for (const auto& b : all) {
    internal::StateReader rd(b);
    for (auto& [k, v] : internal::Decode<std::map<std::string, std::pair<int64_t, int64_t>>>(rd)) {
      got[k].first += v.first;
      got[k].second += v.second;
    }
  }
  for (int64_t i = 0; i < kRecords; ++i) {
    want["sensor-" + std::to_string(i % 17)].first += i;
    want["sensor-" + std::to_string(i % 17)].second += 1;
  }
  std::cout << "status " << r.status << "\nremote records " << r.network.records_sent << "\n"
            << (got == want ? "sums OK" : "sums WRONG") << std::endl;
  return r.ok() && got == want ? 0 : 1;
}

const BoolWatermarkDeclaration& Backlog() {
  static const BoolWatermarkDeclaration d = WatermarkDeclarations::new_builder("backlog")
                                                .type_bool()
                                                .combine_function_or()
                                                .combine_wait_for_all_channels(true)
                                                .build();
  return d;
}
const LongWatermarkDeclaration& Progress() {
  static const LongWatermarkDeclaration d = WatermarkDeclarations::new_builder("progress")
                                                .type_long()
                                                .combine_function_max()
                                                .combine_wait_for_all_channels(true)
                                                .build();
  return d;
}

constexpr int kGeneralizedRecords = 200;

// Backlog while it emits its records, progress (s + 1) * i every 50.
class CatchingUp final : public Source<int64_t> {
 public:
  void Open(const SourceContext& ctx) override { s_ = ctx.subtask_index; }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    out.EmitGeneralizedWatermark(Backlog().new_watermark(true));
    for (int i = 1; i <= kGeneralizedRecords; ++i) {
      out.CollectWithTimestamp(i, i);
      if (i % 50 == 0) out.EmitGeneralizedWatermark(Progress().new_watermark((s_ + 1) * i));
    }
    out.EmitGeneralizedWatermark(Backlog().new_watermark(false));
    return PollStatus::kEndOfInput;
  }

 private:
  int s_ = 0;
};

// One line per function subtask: "subtask S records R backlog V,V@R progress V,V,..."
std::mutex g_seen_mu;
std::map<int, std::string> g_seen;

struct Seeing : ProcessFunction<int64_t, int64_t> {
  int subtask = 0;
  int64_t records = 0;
  std::string backlog, progress;
  void open(const RuntimeContext& ctx) override { subtask = ctx.subtask_index(); }
  void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
    ++records;
    out.collect(v);
  }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context&) override {
    std::string& to = Backlog().matches(w) ? backlog : progress;
    if (!to.empty()) to += ",";
    to += w.is_bool() ? (w.bool_value() ? "true" : "false") : std::to_string(w.long_value());
    if (Backlog().matches(w)) to += "@" + std::to_string(records);
    return WatermarkHandlingResult::kPeek;
  }
  void close() override {
    std::lock_guard<std::mutex> lock(g_seen_mu);
    g_seen[subtask] = "subtask " + std::to_string(subtask) + " records " + std::to_string(records) +
                      " backlog " + backlog + " progress " + progress;
  }
};

int Generalized() {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.set_parallelism(cluster.size);
  env.add_source<int64_t>([] { return std::make_unique<CatchingUp>(); }, "catching-up")
      .rebalance()
      .process(Seeing())
      .name("seeing")
      .add_sink([](int64_t&&) {});
  JobResult r = env.execute("generalized");
  std::string mine;
  {
    std::lock_guard<std::mutex> lock(g_seen_mu);
    for (const auto& [subtask, line] : g_seen) mine += line + "\n";
  }
  std::vector<std::string> all = GatherAtRank0(mine);
  if (cluster.rank != 0) return r.ok() ? 0 : 1;
  std::vector<std::string> lines;
  for (const std::string& b : all) {
    size_t at = 0;
    for (size_t nl; (nl = b.find('\n', at)) != std::string::npos; at = nl + 1)
      lines.push_back(b.substr(at, nl - at));
  }
  // Each subtask: backlog true then false, false after all its records;
  // progress rising to size * 200.
  int64_t total = 0;
  bool ok = static_cast<int>(lines.size()) == cluster.size;
  for (const std::string& l : lines) {
    int64_t records = 0;
    char backlog[256] = {0}, progress[256] = {0};
    int subtask = 0;
    if (std::sscanf(l.c_str(), "subtask %d records %ld backlog %255s progress %255s", &subtask,
                    &records, backlog, progress) != 4) {
      ok = false;
      continue;
    }
    total += records;
    // "true@N,false@<all its records>": false only after every channel's.
    const std::string b = backlog;
    const size_t comma = b.find(',');
    if (b.rfind("true@", 0) != 0 || comma == std::string::npos ||
        b.substr(comma + 1) != "false@" + std::to_string(records)) {
      ok = false;
    }
    // Strictly rising, ending at the largest source's last.
    std::vector<int64_t> values;
    for (char* t = std::strtok(progress, ","); t != nullptr; t = std::strtok(nullptr, ","))
      values.push_back(std::atoll(t));
    if (values.empty() || values.back() != cluster.size * kGeneralizedRecords ||
        std::adjacent_find(values.begin(), values.end(),
                           [](int64_t a, int64_t b) { return a >= b; }) != values.end()) {
      ok = false;
    }
  }
  if (total != static_cast<int64_t>(cluster.size) * kGeneralizedRecords) ok = false;
  std::cout << "status " << r.status << "\nremote records " << r.network.records_sent << "\n";
  for (const std::string& l : lines) std::cout << l << "\n";
  std::cout << (ok ? "generalized OK" : "generalized WRONG") << std::endl;
  return r.ok() && ok ? 0 : 1;
}

int NoCodec() {
  StreamExecutionEnvironment env;
  env.set_parallelism(ThisCluster().size);
  env.from_generator<Opaque>([](int64_t i) { return Opaque{std::to_string(i)}; }, 100)
      .rebalance()
      .map([](const Opaque& o) { return o.sensor.size(); })
      .add_sink([](size_t&&) {});
  JobResult r = env.execute("nocodec");
  if (ThisCluster().rank == 0) std::cout << "status " << r.status << std::endl;
  return r.ok() ? 0 : 3;
}

int Restart(const std::string& strategy, const std::string& out, const std::string& chk,
            const std::string& records) {
  const ClusterInfo cluster = ThisCluster();
  std::vector<int64_t> throw_at;
  for (absl::string_view r : absl::StrSplit(records, ','))
    throw_at.push_back(std::stoll(std::string(r)));
  auto attempt = std::make_shared<std::atomic<int64_t>>(0);  // restarts so far
  auto told = std::make_shared<std::atomic<int64_t>>(0);     // listener calls
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.enable_checkpointing(Duration(100), chk);
  if (strategy == "fixed") {
    env.set_restart_strategy(RestartStrategies::fixed_delay_restart(10, Duration(100)));
  } else if (strategy == "rate") {
    env.set_restart_strategy(
        RestartStrategies::failure_rate_restart(2, Duration(60'000), Duration(0)));
  }
  env.set_restart_listener([attempt, told](int64_t restart, const std::string&) {
    told->fetch_add(1);
    attempt->store(restart);
  });
  env.from_generator<int64_t>([](int64_t i) { return i; }, 24'000, 20'000.0)
      .set_parallelism(1)
      .partition_custom([](const int64_t& key, int n) { return static_cast<int>(key % n); },
                        [](const int64_t& v) { return v; })
      .map([throw_at, attempt](const int64_t& v) -> int64_t {
        const int64_t k = attempt->load();
        if (k < static_cast<int64_t>(throw_at.size()) && throw_at[k] == v)
          throw std::runtime_error(absl::StrCat("injected failure at record ", v));
        return v;
      })
      .name("Flaky map")
      .key_by([](const int64_t& v) { return v % 14; })  // one map subtask per key: in order
      .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
      .sink_to_files(out, [](const int64_t& v) { return std::to_string(v); });
  JobResult r = env.execute("restart");
  // One write: the ranks' standard errors meet in mpirun's.
  const std::string line = absl::StrCat(
      "restart rank ", cluster.rank, " status ", r.status.ok() ? "OK" : r.status.ToString(),
      " restarts ", r.restarts.num_restarts, " told ", told->load(), " failures ",
      r.restarts.failures.size(), " restored ", r.checkpoints.restored_id, " last ",
      r.restarts.last_failure, "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return r.ok() ? 0 : 3;
}

int Drain(const std::string& out, const std::string& chk, const std::string& savepoints) {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.enable_checkpointing(Duration(100), chk);
  env.from_generator<int64_t>([](int64_t i) { return i; }, -1, 20'000.0)
      .set_parallelism(1)
      .partition_custom([](const int64_t& key, int n) { return static_cast<int>(key % n); },
                        [](const int64_t& v) { return v; })
      .map([](const int64_t& v) { return v; })
      .key_by([](const int64_t& v) { return v % 14; })
      .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
      .sink_to_files(out, [](const int64_t& v) { return std::to_string(v); });
  JobClient client = env.execute_async("drain");
  std::string path = "-";
  if (cluster.rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // real time: records flow
    // And the job is under way on every rank (a slow start under load): two
    // checkpoints complete, so windows have fired and parts are committed.
    for (int i = 0; i < 3000 && client.checkpoints().completed < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the job
    // A stop without drain whose savepoint cannot be written (its directory
    // would be under a file) fails, and the job goes on.
    const std::string file = savepoints + "-file";
    std::ofstream(file) << "not a directory\n";
    absl::StatusOr<std::string> failed = client.stop_with_savepoint(file, false, Duration(30'000));
    const std::string line =
        absl::StrCat("nodrain ", failed.ok() ? "OK" : failed.status().ToString(), "\n");
    if (write(2, line.data(), line.size()) < 0) return 4;
    absl::StatusOr<std::string> sp = client.stop_with_savepoint(savepoints, true, Duration(30'000));
    path = sp.ok() ? *sp : sp.status().ToString();
  }
  JobResult r = client.wait();
  const std::string line =
      absl::StrCat("drain rank ", cluster.rank, " status ",
                   r.status.ok() ? "OK" : r.status.ToString(), " savepoint ", path, "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return r.ok() ? 0 : 3;
}

// Records 0..kWindowRecords-1 (20 000 a second, on rank 0), event time =
// the record, keyed by v % 14 into tumbling windows of 500 ms summed at
// parallelism P, written exactly once as "key,window start,sum" to OUT.
// The records are in order, so none is late whenever the watermarks come:
// the output does not depend on timing.
constexpr int64_t kWindowRecords = 40'000;

void WindowJob(StreamExecutionEnvironment& env, const std::string& out, int parallelism) {
  using KV = std::pair<int64_t, int64_t>;  // key, value
  env.set_parallelism(parallelism);
  env.from_generator<int64_t>([](int64_t i) { return i; }, kWindowRecords, 20'000.0)
      .set_parallelism(1)
      .uid("src")
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
              [](const int64_t& v, Timestamp) { return v; }))
      .set_parallelism(1)
      .uid("ts")
      .map([](const int64_t& v) {
        return KV{v % 14, v};
      })
      .uid("kv")
      .key_by([](const KV& kv) { return kv.first; })
      .window(TumblingEventTimeWindows::of(Duration(500)))
      .process([](const int64_t& key, const TimeWindow& w, const std::vector<KV>& items,
                  WindowContext&, Collector<std::string>& out) {
        int64_t sum = 0;
        for (const KV& kv : items) sum += kv.second;
        out.collect(absl::StrCat(key, ",", w.start, ",", sum));
      })
      .uid("sums")
      .sink_to_files(out, [](const std::string& line) { return line; })
      .uid("sink");
}

int Stop(const std::string& out, const std::string& chk, const std::string& savepoints) {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(100), chk);
  WindowJob(env, out, 2);
  JobClient client = env.execute_async("stop");
  std::string path = "-";
  if (cluster.rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // real time: records flow
    // And the job is under way on every rank (a slow start under load): two
    // checkpoints complete, so windows have fired and parts are committed.
    for (int i = 0; i < 3000 && client.checkpoints().completed < 2; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the job
    absl::StatusOr<std::string> sp =
        client.stop_with_savepoint(savepoints, /*drain=*/false, Duration(30'000));
    path = sp.ok() ? *sp : sp.status().ToString();
  }
  JobResult r = client.wait();
  const std::string line = absl::StrCat(
      "stop rank ", cluster.rank, " status ", r.status.ok() ? "OK" : r.status.ToString(),
      " savepoint ", path, " stopped ",
      r.checkpoints.stopped_with_savepoint.empty() ? "-" : r.checkpoints.stopped_with_savepoint,
      "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return r.ok() ? 0 : 3;
}

int Resume(const std::string& out, const std::string& chk, const std::string& savepoint,
           int parallelism) {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(100), chk).restore_from(savepoint);
  WindowJob(env, out, parallelism);
  JobResult r = env.execute("resume");
  const std::string line = absl::StrCat("resume rank ", cluster.rank, " status ",
                                        r.status.ok() ? "OK" : r.status.ToString(), " restored ",
                                        r.checkpoints.restored_id, "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return r.ok() ? 0 : 3;
}

int StopFail(const std::string& chk, const std::string& savepoints) {
  const ClusterInfo cluster = ThisCluster();
  StreamExecutionEnvironment env;
  env.set_parallelism(cluster.size);
  env.enable_checkpointing(Duration(3'600'000), chk);  // none but the savepoint
  env.add_source<int64_t>(
         [] {
           return std::make_unique<testing::FailsInSnapshot>(
               [] { return ThisCluster().rank == 1; });
         },
         "fails-in-snapshot")
      .rebalance()
      .map([](const int64_t& v) { return v; })
      .add_sink([](int64_t&&) {});
  JobClient client = env.execute_async("stopfail");
  if (cluster.rank == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // real time: records flow
    absl::StatusOr<std::string> sp =
        client.stop_with_savepoint(savepoints, /*drain=*/false, Duration(30'000));
    const std::string line =
        absl::StrCat("stopfail ", sp.ok() ? "OK " + *sp : sp.status().ToString(), "\n");
    if (write(2, line.data(), line.size()) < 0) return 4;
  }
  JobResult r = client.wait();
  const std::string line = absl::StrCat("stopfail rank ", cluster.rank, " status ",
                                        r.status.ok() ? "OK" : r.status.ToString(), "\n");
  if (write(2, line.data(), line.size()) < 0) return 4;
  return r.ok() ? 0 : 3;
}

}  // namespace
}  // namespace tidemark

int main(int argc, char** argv) {
  using namespace tidemark;
  if (ThisCluster().distributed()) internal::EnsureMpiInitialized();
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "differential" && argc == 5)
    return Differential(argv[2], std::stoull(argv[3]), std::stoi(argv[4]));
  if (mode == "backpressure" && argc == 3) return Backpressure(argv[2]);
  if (mode == "fail" && argc == 3) return Fail(std::stoi(argv[2]), false);
  if (mode == "crash" && argc == 3) return Fail(std::stoi(argv[2]), true);
  if (mode == "usertype") return UserType();
  if (mode == "nocodec") return NoCodec();
  if (mode == "generalized") return Generalized();
  if (mode == "drain" && argc == 5) return Drain(argv[2], argv[3], argv[4]);
  if (mode == "stop" && argc == 5) return Stop(argv[2], argv[3], argv[4]);
  if (mode == "resume" && argc == 6) return Resume(argv[2], argv[3], argv[4], std::stoi(argv[5]));
  if (mode == "stopfail" && argc == 4) return StopFail(argv[2], argv[3]);
  if (mode == "restart" && argc == 6) return Restart(argv[2], argv[3], argv[4], argv[5]);
  std::cerr << "usage: mpi_job differential KIND FIRST COUNT | backpressure FILE | usertype | "
               "nocodec | generalized | fail RANK | crash RANK | restart none|fixed|rate OUT CHK "
               "RECORDS | drain OUT CHK SAVEPOINTS | stop OUT CHK SAVEPOINTS | resume OUT CHK "
               "SAVEPOINT P | "
               "stopfail CHK SAVEPOINTS\n";
  return 2;
}
