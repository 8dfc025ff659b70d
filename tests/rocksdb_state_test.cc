// The RocksDB state backend (runtime/rocksdb/, docs/checkpoints.md "State
// backends"): each keyed state kind on RocksDB behaves as on the heap
// (random operations on both, compared read by read, with a cache small
// enough that entries go to RocksDB and back all the time); checkpoints are
// the heap's format, so a heap snapshot restores into RocksDB, a RocksDB one
// into the heap, and a restore keeps the key groups of its range (rescaling);
// a keyed process job gives the same results on both backends at parallelism
// 1 and 3; and a job whose state is several times the memory it may use
// fails on the heap and completes on RocksDB with the heap's results.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using namespace std::chrono_literals;
using Key = int64_t;
using Items = MapState<int64_t, std::string, int64_t>::Storage;

struct Avg {
  std::pair<int64_t, int64_t> create_accumulator() const { return {0, 0}; }
  std::pair<int64_t, int64_t> add(int64_t v, std::pair<int64_t, int64_t> acc) const {
    return {acc.first + v, acc.second + 1};
  }
  double get_result(const std::pair<int64_t, int64_t>& acc) const {
    return static_cast<double>(acc.first) / static_cast<double>(acc.second);
  }
};
auto Sum = [](int64_t a, int64_t b) { return a + b; };

constexpr int kMaxParallelism = 128;

std::unique_ptr<KvStore> OpenTestStore() {
  return OpenKvStore(StateBackend::rocksdb(), "rocksdb_state_test");
}

// Runs the same random operations on every state kind of `a` and `b` and
// returns a line per read, so two stores can be compared read by read.
struct Driver {
  KeyedStateStore<Key>* store;
  Key key = 0;
  std::vector<std::string> reads;

  void Step(int op, int64_t x) {
    ValueState<Key, std::string> v(&store->HandleTable<std::string>("value"), &key);
    ListState<Key, int64_t> l(&store->HandleTable<std::vector<int64_t>>("list"), &key);
    MapState<Key, std::string, int64_t> m(&store->HandleTable<Items>("map"), &key);
    ReducingState<Key, int64_t, decltype(Sum)> r(&store->HandleTable<int64_t>("reducing"), &key,
                                                 Sum);
    AggregatingState<Key, Avg> g(&store->HandleTable<std::pair<int64_t, int64_t>>("agg"), &key,
                                 Avg{});
    const std::string k = std::to_string(key) + ": ";
    switch (op) {
      case 0:
        if (x % 3 == 0)
          v.update("v" + std::to_string(x));
        else if (x % 3 == 1)
          v.mutable_value() = "m" + std::to_string(x);  // in place, written back by Trim
        else
          v.mutable_value() += "+";  // appends to what the key has, or to ""
        break;
      case 1:
        reads.push_back(k + v.value_or("none"));
        break;
      case 2:
        v.clear();
        break;
      case 3:
        l.add(x);
        break;
      case 4: {
        std::string s = k;
        for (int64_t e : l.get()) s += std::to_string(e) + ",";
        reads.push_back(s);
        break;
      }
      case 5:
        l.update(x % 3 == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{x, x + 1});
        break;
      case 6:
        m.put("u" + std::to_string(x % 5), x);
        break;
      case 7:
        m.remove("u" + std::to_string(x % 5));
        break;
      case 8: {
        std::string s = k + (m.is_empty() ? "empty " : "");
        for (const auto& [uk, uv] : m.entries()) s += uk + "=" + std::to_string(uv) + ",";
        s += m.contains("u1") ? " has u1" : "";
        reads.push_back(s);
        break;
      }
      case 9:
        r.add(x);
        break;
      case 10:
        reads.push_back(k + std::to_string(r.get().value_or(-1)));
        break;
      case 11:
        g.add(x);
        break;
      case 12:
        reads.push_back(k + std::to_string(g.get().value_or(-1.0)));
        break;
      case 13:
        r.clear();
        break;
      default:
        m.clear();
        break;
    }
    store->Trim();
  }
};

void RunRandom(KeyedStateStore<Key>& store, Driver& d, uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  for (int i = 0; i < steps; ++i) {
    d.key = static_cast<Key>(rng() % 40);
    d.Step(static_cast<int>(rng() % 15), static_cast<int64_t>(rng() % 1000));
  }
  (void)store;
}

// Every table of a snapshot, restored into a heap store, as sorted lines.
std::vector<std::string> Contents(const std::string& snapshot) {
  KeyedStateStore<Key> heap;
  StateReader r(snapshot);
  heap.Restore(r, KeyGroupRange::All());
  EXPECT_TRUE(r.ok()) << r.error();
  std::vector<std::string> out;
  for (const auto& [k, v] : heap.Table<std::string>("value").map)
    out.push_back("value " + std::to_string(k) + " " + v);
  for (const auto& [k, v] : heap.Table<std::vector<int64_t>>("list").map) {
    std::string s = "list " + std::to_string(k);
    for (int64_t e : v) s += " " + std::to_string(e);
    out.push_back(s);
  }
  for (const auto& [k, v] : heap.Table<Items>("map").map) {
    std::string s = "map " + std::to_string(k);
    // In key order: the hash map's own order is its own.
    for (const auto& [uk, uv] : std::map<std::string, int64_t>(v.begin(), v.end()))
      s += " " + uk + "=" + std::to_string(uv);
    out.push_back(s);
  }
  for (const auto& [k, v] : heap.Table<int64_t>("reducing").map)
    out.push_back("reducing " + std::to_string(k) + " " + std::to_string(v));
  for (const auto& [k, v] : heap.Table<std::pair<int64_t, int64_t>>("agg").map)
    out.push_back("agg " + std::to_string(k) + " " + std::to_string(v.first) + "/" +
                  std::to_string(v.second));
  std::sort(out.begin(), out.end());
  return out;
}

std::string Snap(KeyedStateStore<Key>& store) {
  StateWriter w;
  store.Snapshot(w, "test");
  return w.Release();
}

TEST(RocksDbStateBackend, EveryStateKindReadsAsOnTheHeap) {
  for (size_t cache : {size_t{1}, size_t{3}, size_t{1000}}) {
    KeyedStateStore<Key> heap, rocks;
    rocks.UseKvStore(OpenTestStore(), kMaxParallelism, cache);
    ASSERT_TRUE(rocks.on_rocksdb());
    Driver dh{&heap}, dr{&rocks};
    RunRandom(heap, dh, 7, 4000);
    RunRandom(rocks, dr, 7, 4000);
    ASSERT_GT(dh.reads.size(), 1000u);
    EXPECT_EQ(dr.reads, dh.reads) << "cache " << cache;
    // The snapshots hold the same entries, in the same format.
    const std::vector<std::string> expected = Contents(Snap(heap));
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(Contents(Snap(rocks)), expected) << "cache " << cache;
    // The cache stays within its size between records.
    if (cache < 1000) EXPECT_LE(rocks.Table<std::string>("value").map.size(), cache);
  }
}

TEST(RocksDbStateBackend, HeapSnapshotRestoresIntoRocksDbAndBackByKeyGroup) {
  KeyedStateStore<Key> heap;
  Driver dh{&heap};
  RunRandom(heap, dh, 11, 3000);
  const std::string snap = Snap(heap);
  const std::vector<std::string> all = Contents(snap);
  // Rescale to 2 instances on RocksDB: each keeps its key groups only.
  std::vector<std::string> merged;
  for (int subtask = 0; subtask < 2; ++subtask) {
    KeyedStateStore<Key> rocks;
    rocks.UseKvStore(OpenTestStore(), kMaxParallelism, 4);
    StateReader r(snap);
    const KeyGroupRange range = KeyGroupRange::Of(subtask, 2, kMaxParallelism);
    rocks.Restore(r, range);
    ASSERT_TRUE(r.ok()) << r.error();
    // Reads go through the handles, which create the tables on RocksDB.
    Driver dr{&rocks};
    for (Key k = 0; k < 40; ++k) {
      dr.key = k;
      dr.Step(1, 0);
    }
    int owned = 0;
    for (Key k = 0; k < 40; ++k) {
      const bool mine = range.Contains(k);
      owned += mine;
      if (!mine) EXPECT_EQ(dr.reads[k], std::to_string(k) + ": none");
    }
    EXPECT_GT(owned, 5);
    EXPECT_LT(owned, 35);
    const std::vector<std::string> part = Contents(Snap(rocks));
    merged.insert(merged.end(), part.begin(), part.end());
  }
  std::sort(merged.begin(), merged.end());
  EXPECT_EQ(merged, all);  // and back on the heap, from RocksDB snapshots
}

// --- a keyed process job on both backends ---

struct Ev {
  Key key = 0;
  int64_t item = 0;
  Timestamp ts = 0;
};
constexpr int64_t kCount = 6000;
constexpr Timestamp kReportAt = 1'000'000'000;
Ev MakeEvent(int64_t i) { return Ev{(i * 7919) % 301, (i * 37 + i / 11) % 50, i}; }

struct AllStates : KeyedProcessFunction<Key, Ev, std::string> {
  void process_element(const Ev& e, Context& ctx, Collector<std::string>& out) override {
    auto count = ctx.get_state<int64_t>("count");
    auto last = ctx.get_list_state<int64_t>("last");
    auto seen = ctx.get_map_state<int64_t, int64_t>("seen");
    auto sum = ctx.get_reducing_state<int64_t>("sum", Sum);
    auto avg = ctx.get_aggregating_state("avg", Avg{});
    count.update(count.value_or(0) + 1);
    last.add(e.item);
    if (last.get().size() > 3) {
      std::vector<int64_t> l = last.get();
      l.erase(l.begin());
      last.update(l);
    }
    seen.put(e.item, seen.get(e.item).value_or(0) + 1);
    sum.add(e.item);
    avg.add(e.item);
    // What does not depend on the order of a key's records (at parallelism
    // 3 the sources interleave differently on each run).
    out.collect(std::to_string(ctx.get_current_key()) + " n" + std::to_string(*count.value()) +
                " l" + std::to_string(last.get().size()));
    ctx.timer_service().register_event_time_timer(kReportAt);
  }
  void on_timer(Timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    auto seen = ctx.get_map_state<int64_t, int64_t>("seen");
    auto avg = ctx.get_aggregating_state("avg", Avg{});
    auto sum = ctx.get_reducing_state<int64_t>("sum", Sum);
    std::string s = std::to_string(ctx.get_current_key()) + " final";
    for (const auto& [k, v] : seen.entries())
      s += " " + std::to_string(k) + "x" + std::to_string(v);
    out.collect(s + " sum" + std::to_string(sum.get().value_or(-1)) + " avg" +
                std::to_string(avg.get().value_or(-1)));
    seen.clear();
  }
};

std::vector<std::string> RunJob(int parallelism, StateBackend backend) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  env.set_auto_watermark_interval(5ms);
  env.set_state_backend(backend);
  auto results = env.from_generator<Ev>(MakeEvent, kCount)
                     .assign_timestamps_and_watermarks(
                         WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                             [](const Ev& e, Timestamp) { return e.ts; }))
                     .key_by([](const Ev& e) { return e.key; })
                     .process(AllStates())
                     .collect();
  JobResult r = env.execute("all states");
  EXPECT_TRUE(r.ok()) << r.status;
  std::vector<std::string> out;
  for (const auto& item : results->items()) out.push_back(item.value);
  std::sort(out.begin(), out.end());
  return out;
}

// A process killed with -9 leaves its database directory behind, and pids
// are reused: a later process must not open a database it finds under the
// name it picks.  The directories the next stores would have been given
// before (owner-pid-counter) are taken here by databases left behind, as a
// killed process with this pid would leave them; the stores still open,
// empty, each in a directory of its own.  (CI hit this in the RocksDB crash
// test: "exists (error_if_exists is true)".)
TEST(RocksDbStateBackend, ADatabaseLeftBehindByAKilledProcessWithTheSamePidIsNotOpened) {
  namespace fs = std::filesystem;
  const fs::path base =
      fs::temp_directory_path() / ("tidemark-rocksdb-stale-test-" + std::to_string(::getpid()));
  fs::remove_all(base);
  const StateBackend b = StateBackend::rocksdb(base.string());
  // The counter the store names end with so far: "stale-<pid>-<n>...".
  std::unique_ptr<KvStore> probe = OpenKvStore(b, "stale");
  const std::string probe_name = fs::path(probe->path()).filename().string();
  const std::string prefix = "stale-" + std::to_string(::getpid()) + "-";
  ASSERT_EQ(probe_name.rfind(prefix, 0), 0u) << probe_name;
  const int n = std::stoi(probe_name.substr(prefix.size()));
  probe.reset();
  for (int k = n + 1; k <= n + 4; ++k) {
    const fs::path stale = base / (prefix + std::to_string(k));
    fs::create_directories(stale);
    std::ofstream(stale / "CURRENT") << "MANIFEST-000001\n";  // a database's marker
  }
  for (int k = n + 1; k <= n + 4; ++k) {
    std::unique_ptr<KvStore> store;
    ASSERT_NO_THROW(store = OpenKvStore(b, "stale")) << "store " << k;
    EXPECT_TRUE(fs::exists(fs::path(store->path()) / "CURRENT"));
    EXPECT_NE(fs::path(store->path()).filename().string(), prefix + std::to_string(k))
        << "a fresh directory, not the one left behind";
  }
  fs::remove_all(base);
}

// A process killed with -9 leaves its databases' directories behind, and its
// native checkpoints' beside them: the next process that opens a database
// under the same directory removes them, and only them: not a directory
// whose process lives, nor one whose database a process holds open (as a
// process of the same pid on another host sharing the directory would), nor
// a name that is not one of ours.
TEST(RocksDbStateBackend, DirectoriesLeftByKilledProcessesAreRemovedByTheNextOne) {
  namespace fs = std::filesystem;
  testing::TempDir dir;
  const fs::path base = dir.Path("rocksdb");
  // A pid no process has: a child's that has exited and been waited for.
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  const std::string dead = std::to_string(gone);
  auto make = [&](const std::string& name, bool database) {
    fs::create_directories(base / name);
    if (database) {
      std::ofstream(base / name / "CURRENT") << "MANIFEST-000001\n";
      std::ofstream(base / name / "LOCK");
    }
  };
  const std::string held = "Held-" + dead + "-1-Lk45jh";
  make("Killed-" + dead + "-0-aB3xYz", true);
  make("Killed-" + dead + "-0-aB3xYz.chk-4", false);
  make("restore-" + dead + "-2-Qw12er", true);
  make("Living-1-0-Zx98cv", true);  // pid 1 is alive
  make("not-ours", false);
  make(held, true);
  make(held + ".chk-2", false);
  // A child holds `held`'s LOCK as RocksDB does while the database is open.
  int ready[2], stop[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(stop), 0);
  const std::string lock_file = (base / held / "LOCK").string();
  const pid_t holder = fork();
  if (holder == 0) {
    // Only the parent writes `stop`: if the test ends early, the read below
    // sees the end of the pipe and the child exits.
    close(stop[1]);
    close(ready[0]);
    const int fd = open(lock_file.c_str(), O_RDWR);
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    const char ok = fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0 ? 'y' : 'n';
    if (write(ready[1], &ok, 1) != 1) _exit(1);
    char c;
    if (read(stop[0], &c, 1) < 0) _exit(1);
    _exit(0);
  }
  ASSERT_GT(holder, 0);
  char locked = 0;
  ASSERT_EQ(read(ready[0], &locked, 1), 1);
  ASSERT_EQ(locked, 'y');

  std::unique_ptr<KvStore> store = OpenKvStore(StateBackend::rocksdb(base.string()), "Opener");
  const char c = 'x';
  EXPECT_EQ(write(stop[1], &c, 1), 1);
  EXPECT_EQ(waitpid(holder, nullptr, 0), holder);
  for (int fd : {ready[0], ready[1], stop[0], stop[1]}) close(fd);

  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(base)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{fs::path(store->path()).filename().string(),
                                         "Living-1-0-Zx98cv", "not-ours", held, held + ".chk-2"}));
}

// The same for the directory a restore from native checkpoint files opens
// them in (a rescale): it was restore-<pid>-<n>, removed first, so a process
// with the same pid would delete a database another left, or was using,
// under that name.  Directories are put under the names the old scheme
// would give this process; opening files (none here: the open fails) must
// leave every one of them alone.
TEST(RocksDbStateBackend, ARestoreNeverDeletesADirectoryUnderTheNameItsPidWouldHaveHadBefore) {
  namespace fs = std::filesystem;
  const fs::path base = fs::temp_directory_path() / "tidemark-rocksdb";
  const std::string prefix = "restore-" + std::to_string(::getpid()) + "-";
  std::vector<fs::path> taken;
  for (int k = 0; k < 64; ++k) {
    const fs::path d = base / (prefix + std::to_string(k));
    if (fs::exists(d)) continue;
    fs::create_directories(d);
    std::ofstream(d / "CURRENT") << "MANIFEST-000001\n";
    taken.push_back(d);
  }
  testing::TempDir shared;
  EXPECT_ANY_THROW(OpenKvStoreFiles(shared.path(), {})) << "no files: nothing to open";
  for (const fs::path& d : taken) {
    EXPECT_TRUE(fs::exists(d / "CURRENT")) << d << " was deleted";
    fs::remove_all(d);
  }
}

// StateBackend::rocksdb_options reach the database (RocksDB writes the
// options it runs with into the OPTIONS file of its directory), and a value
// out of range is refused when the job is set up, naming it.
TEST(RocksDbStateBackend, RocksDbOptionsReachTheDatabaseAndBadOnesAreRefused) {
  StateBackend b = StateBackend::rocksdb();
  b.rocksdb_options.write_buffer_size = 2 << 20;
  b.rocksdb_options.max_write_buffer_number = 3;
  b.rocksdb_options.block_cache_size = 1 << 20;
  b.rocksdb_options.max_open_files = 64;
  b.rocksdb_options.max_background_jobs = 1;
  b.rocksdb_options.cache_index_and_filter_blocks = true;
  std::unique_ptr<KvStore> store = OpenKvStore(b, "options");
  std::string options;
  for (const auto& e : std::filesystem::directory_iterator(store->path())) {
    if (e.path().filename().string().rfind("OPTIONS-", 0) != 0) continue;
    std::ifstream in(e.path());
    options.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_FALSE(options.empty());
  for (const char* want :
       {"write_buffer_size=2097152", "max_write_buffer_number=3", "max_open_files=64",
        "max_background_jobs=1", "cache_index_and_filter_blocks=true"})
    EXPECT_NE(options.find(std::string("\n  ") + want + "\n"), std::string::npos) << want;
  store.reset();

  auto refused = [](void (*change)(RocksDbOptions&)) {
    StateBackend bad = StateBackend::rocksdb();
    change(bad.rocksdb_options);
    StreamExecutionEnvironment env;
    try {
      env.set_state_backend(bad);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(refused([](RocksDbOptions& o) { o.write_buffer_size = 1000; }),
            "RocksDbOptions::write_buffer_size must be at least 64 KiB, not 1000");
  EXPECT_NE(refused([](RocksDbOptions& o) {
              o.max_write_buffer_number = 1;
            }).find("RocksDbOptions::max_write_buffer_number must be at least 2"),
            std::string::npos);
  EXPECT_EQ(refused([](RocksDbOptions& o) { o.max_open_files = 5; }),
            "RocksDbOptions::max_open_files must be -1 or at least 20, not 5");
  EXPECT_NE(refused([](RocksDbOptions& o) {
              o.max_background_jobs = 0;
            }).find("RocksDbOptions::max_background_jobs"),
            std::string::npos);
  EXPECT_EQ(refused([](RocksDbOptions& o) { o.max_open_files = -1; }), "accepted");
  EXPECT_EQ(refused([](RocksDbOptions&) {}), "accepted");
}

TEST(RocksDbStateBackend, KeyedProcessJobEqualsHeapAtParallelismOneAndThree) {
  const std::vector<std::string> heap = RunJob(1, StateBackend::heap());
  ASSERT_EQ(heap.size(), static_cast<size_t>(kCount + 301));
  StateBackend rocks = StateBackend::rocksdb();
  rocks.cache_entries = 16;  // fewer than the keys: entries go to RocksDB and back
  EXPECT_EQ(RunJob(1, rocks), heap);
  EXPECT_EQ(RunJob(3, rocks), heap);
}

// --- state larger than the memory the job may use ---

// Runs rocksdb_memory_job with `backend` (60 000 keys of 4 000 bytes: 240 MB
// of state) under a limit of `limit_kb` of virtual memory (none: 0); see
// testing::RunUnderMemoryLimit.
std::string RunLimited(const std::string& backend, int64_t limit_kb, int* rc) {
  const std::string dir = (std::filesystem::temp_directory_path() / "tm-rocksdb-limit").string();
  return testing::RunUnderMemoryLimit(
      std::string(TIDEMARK_MEMORY_JOB) + " " + backend + " 60000 120000 2000 " + dir, limit_kb, rc);
}

TEST(RocksDbStateBackend, StateSeveralTimesTheMemoryLimitCompletesOnRocksDbOnly) {
  // 240 MB of state under a 96 MB limit (the program itself takes about
  // 40 MB of it): the heap run fails with bad_alloc, the RocksDB run
  // completes with what the heap gives without a limit.
  constexpr int64_t kLimitKb = 96 * 1024;
  int rc_heap = 0, rc_rocks = 0, rc_free = 0;
  const std::string heap_limited = RunLimited("heap", kLimitKb, &rc_heap);
  EXPECT_NE(rc_heap, 0) << heap_limited;
  EXPECT_NE(heap_limited.find("bad_alloc"), std::string::npos) << heap_limited;
  const std::string rocks_limited = RunLimited("rocksdb", kLimitKb, &rc_rocks);
  EXPECT_EQ(rc_rocks, 0) << rocks_limited.substr(0, 2000);
  const std::string heap_free = RunLimited("heap", 0, &rc_free);
  ASSERT_EQ(rc_free, 0) << heap_free.substr(0, 2000);
  EXPECT_NE(heap_free.find("\n59999 4000 "), std::string::npos);
  EXPECT_EQ(rocks_limited, heap_free);
}

// State TTL's cleanup in full snapshot on RocksDB, as on the heap
// (state_ttl_test.cc): a snapshot taken after expiry leaves expired values
// and list elements out.  (Found by a review: the RocksDB snapshot copied the
// stored bytes, so expired values came back after a restore.)
TEST(RocksDbState, TtlCleanupInFullSnapshotLeavesExpiredValuesOut) {
  tidemark::testing::TempDir dir;
  ManualClock clock(0);
  auto ttl_of = [](bool cleanup) {
    auto b = StateTtlConfig::new_builder(Duration(100)).return_expired_if_not_cleaned_up();
    if (cleanup) b.cleanup_full_snapshot();
    return b.build();
  };
  for (bool cleanup : {true, false}) {
    const StateTtlConfig ttl = ttl_of(cleanup);
    KeyedStateStore<int64_t> store;
    store.UseKvStore(OpenKvStore(StateBackend::rocksdb(dir.Path(cleanup ? "on" : "off")), "ttl"),
                     128, 16);
    const int64_t k = 1, j = 2;
    clock.Set(0);
    TtlValueState<int64_t, int>(&store.HandleTable<TtlValue<int>>("v"), &k, ttl, &clock).update(10);
    TtlListState<int64_t, int> l(&store.HandleTable<std::vector<TtlValue<int>>>("l"), &k, ttl,
                                 &clock);
    l.add(1);
    clock.Set(40);
    TtlValueState<int64_t, int>(&store.HandleTable<TtlValue<int>>("v"), &j, ttl, &clock).update(20);
    l.add(2);
    clock.Set(120);  // what was written at 0 has expired, what at 40 has not
    StateWriter w;
    store.Snapshot(w, "test");
    const std::string bytes = w.Release();

    KeyedStateStore<int64_t> heap;
    StateReader r(bytes);
    heap.Restore(r, KeyGroupRange::All());
    ASSERT_TRUE(r.ok()) << r.error();
    auto value = [&](const int64_t& key) {
      return TtlValueState<int64_t, int>(&heap.Table<TtlValue<int>>("v"), &key, ttl, &clock)
          .value();
    };
    const std::vector<int> list =
        TtlListState<int64_t, int>(&heap.Table<std::vector<TtlValue<int>>>("l"), &k, ttl, &clock)
            .get();
    EXPECT_EQ(value(k), cleanup ? std::nullopt : std::optional<int>(10)) << cleanup;
    EXPECT_EQ(value(j), 20);
    EXPECT_EQ(list, cleanup ? std::vector<int>{2} : (std::vector<int>{1, 2})) << cleanup;
  }
}

}  // namespace
}  // namespace tidemark
