// Native incremental checkpoints of the RocksDB state backend
// (docs/checkpoints.md, "Incremental checkpoints", RocksDB native): a
// checkpoint of keyed state on RocksDB into an incremental storage is a
// RocksDB checkpoint (flushed, SST files hard-linked) whose SST files go to
// DIR/shared once and are referred to by later checkpoints; the n-th
// checkpoint's new bytes follow the state that changed; retention deletes a
// file once no retained checkpoint refers to it; a restore at the same key
// groups opens the database from the files, one at other key groups reads
// their ranges; and a keyed process job on RocksDB killed with SIGKILL at
// random moments, with full and incremental checkpoints, commits exactly the
// output of a run never killed.
//
// The kill test sleeps between start and kill: real time is its subject.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#ifndef TIDEMARK_BINARY
#define TIDEMARK_BINARY ""
#endif
#include "cli_test_util.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/kv_store.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

namespace fs = std::filesystem;
using Key = int64_t;
constexpr int kMaxParallelism = 128;
constexpr int64_t kKeys = 40'000;

std::string Payload(Key k, int version) {
  std::string s = absl::StrCat("k", k, "v", version, ":");
  s.resize(120, static_cast<char>('a' + (k + version) % 26));
  return s;
}

std::unique_ptr<KvStore> OpenTestStore() {
  return OpenKvStore(StateBackend::rocksdb(), "rocksdb_incremental_test");
}

void Put(KeyedStateStore<Key>& store, Key k, int version) {
  Key key = k;
  ValueState<Key, std::string> v(&store.HandleTable<std::string>("value"), &key);
  v.update(Payload(k, version));
  MapState<Key, int64_t, int64_t> m(
      &store.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("map"), &key);
  m.put(k % 5, version);
  store.Trim();
}

std::optional<std::string> Get(KeyedStateStore<Key>& store, Key k) {
  Key key = k;
  ValueState<Key, std::string> v(&store.HandleTable<std::string>("value"), &key);
  MapState<Key, int64_t, int64_t> m(
      &store.HandleTable<MapState<int64_t, int64_t, int64_t>::Storage>("map"), &key);
  std::optional<std::string> s = v.value();
  if (!s) return s;
  return *s + "|" + std::to_string(m.get(k % 5).value_or(-1));
}

struct Taken {
  std::string bytes;  // the store's snapshot (the native descriptor inside)
  uint64_t uploaded = 0;
  uint64_t referred = 0;  // bytes of every file it refers to
  size_t files = 0;
};

// Checkpoint `id` of `store` into `storage`, committed: what a subtask's
// snapshot and the coordinator do.
Taken Checkpoint(KeyedStateStore<Key>& store, const CheckpointStorage& storage, int64_t id) {
  std::shared_ptr<SharedFileSink> sink = storage.SharedFileSinkFor(id);
  EXPECT_NE(sink, nullptr);
  StateWriter w;
  w.set_shared_file_sink(sink);
  store.Snapshot(w, "test");
  Taken t;
  t.bytes = w.Release();
  t.uploaded = sink->uploaded_bytes();
  std::vector<SharedChunkRef> refs;
  for (const auto& [file, size] : sink->Files()) {
    SharedChunkRef r;
    r.file = file;
    r.size = size;
    refs.push_back(r);
    t.referred += size;
  }
  t.files = refs.size();
  absl::StatusOr<StateFileInfo> info = storage.WriteState(id, "0-0.state", t.bytes, refs);
  EXPECT_TRUE(info.ok()) << info.status();
  absl::Status s = storage.Commit(id, {{"job", "test"}}, {*info});
  EXPECT_TRUE(s.ok()) << s;
  return t;
}

std::set<std::string> SharedFiles(const CheckpointStorage& s) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(s.SharedDir(), ec))
    out.insert(e.path().filename().string());
  return out;
}

// The store's entries, read through the handles.
std::map<Key, std::string> ReadAll(KeyedStateStore<Key>& store, const KeyGroupRange& range) {
  std::map<Key, std::string> out;
  for (Key k = 0; k < kKeys; ++k) {
    if (!range.Contains(k)) continue;
    if (std::optional<std::string> v = Get(store, k)) out.emplace(k, *v);
  }
  return out;
}

// The n-th checkpoint uploads what changed: 1% of the keys touched between
// checkpoints uploads a small fraction of the state (until a compaction
// rewrites files, which is then counted too: printed).  Retention keeps
// exactly the referenced files.  Restored at the same key groups, the store
// is opened from the files and its next checkpoint refers to them.
TEST(RocksDbNativeIncremental, NthCheckpointUploadsTheChangedStateAndRetentionFollowsReferences) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"), /*retain=*/2);
  storage.set_incremental(true);
  KeyedStateStore<Key> store;
  store.UseKvStore(OpenTestStore(), kMaxParallelism, 1000);
  for (Key k = 0; k < kKeys; ++k) Put(store, k, 0);
  std::mt19937 rng(7);
  std::vector<Taken> taken;
  taken.push_back(Checkpoint(store, storage, 1));
  std::cout << "checkpoint 1: uploaded " << taken[0].uploaded << " of " << taken[0].referred
            << " bytes (" << taken[0].files << " files)\n";
  EXPECT_GT(taken[0].uploaded, uint64_t{kKeys} * 120);
  std::map<Key, int> version;
  for (int64_t id = 2; id <= 8; ++id) {
    for (int i = 0; i < kKeys / 100; ++i) {
      const Key k = static_cast<Key>(rng() % kKeys);
      Put(store, k, version[k] = static_cast<int>(id));
    }
    taken.push_back(Checkpoint(store, storage, id));
    const Taken& t = taken.back();
    std::cout << "checkpoint " << id << ": uploaded " << t.uploaded << " of " << t.referred
              << " bytes (" << t.files << " files)\n";
    // Retention: the shared directory holds exactly what the retained
    // checkpoints (the last two) refer to.
    absl::StatusOr<std::map<std::string, int>> refs = storage.SharedFileReferences();
    ASSERT_TRUE(refs.ok()) << refs.status();
    std::set<std::string> referenced;
    for (const auto& [f, n] : *refs) referenced.insert(f);
    EXPECT_EQ(SharedFiles(storage), referenced) << "after checkpoint " << id;
  }
  // 1% of the keys changed: checkpoints 2 and 3 (before RocksDB compacts
  // its first level-0 files) upload under a tenth of the state.
  for (size_t i : {size_t{1}, size_t{2}}) {
    EXPECT_LT(taken[i].uploaded * 10, taken[i].referred)
        << "checkpoint " << i + 1 << " uploaded " << taken[i].uploaded << " of "
        << taken[i].referred;
  }
  // Over the seven, far less than seven full copies.
  uint64_t sum = 0;
  for (size_t i = 1; i < taken.size(); ++i) sum += taken[i].uploaded;
  EXPECT_LT(sum, 3 * taken[0].uploaded) << sum;

  // Restore from the latest checkpoint (loaded as a restore does) at the
  // same key groups: the database is opened from the files.
  absl::StatusOr<LoadedCheckpoint> loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->id, 8);
  const std::map<Key, std::string> expected = ReadAll(store, KeyGroupRange::All());
  ASSERT_EQ(expected.size(), static_cast<size_t>(kKeys));
  const KeyGroupRange all{0, kMaxParallelism - 1, kMaxParallelism};
  KeyedStateStore<Key> restored;
  restored.UseKvStore(OpenTestStore(), kMaxParallelism, 1000);
  {
    StateReader r(loaded->states.at("0-0.state"));
    restored.Restore(r, all);
    ASSERT_TRUE(r.ok()) << r.error();
  }
  EXPECT_TRUE(restored.restored_natively());
  // Its next checkpoint refers to the restored SST files.  (Before reading
  // every key: the cache writes back every entry it holds, read or written.)
  for (Key k = 0; k < kKeys / 100; ++k) Put(restored, k, 99);
  const Taken next = Checkpoint(restored, storage, 9);
  std::cout << "checkpoint 9 (after the restore): uploaded " << next.uploaded << " of "
            << next.referred << " bytes\n";
  EXPECT_LT(next.uploaded * 10, next.referred);
  std::map<Key, std::string> changed = expected;
  for (Key k = 0; k < kKeys / 100; ++k) changed[k] = Payload(k, 99) + "|99";
  EXPECT_EQ(ReadAll(restored, all), changed);
}

// Restored at other key groups (rescaling 1 -> 2) and into the heap backend:
// each new instance reads its key-group range from the checkpoint's files.
TEST(RocksDbNativeIncremental, RescaledRestoresReadTheirKeyGroupRanges) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  KeyedStateStore<Key> store;
  store.UseKvStore(OpenTestStore(), kMaxParallelism, 100);
  for (Key k = 0; k < kKeys / 4; ++k) Put(store, k, static_cast<int>(k % 3));
  Checkpoint(store, storage, 1);
  for (Key k = 0; k < kKeys / 4; k += 10) Put(store, k, 7);
  Checkpoint(store, storage, 2);
  const KeyGroupRange all{0, kMaxParallelism - 1, kMaxParallelism};
  const std::map<Key, std::string> expected = ReadAll(store, all);
  absl::StatusOr<LoadedCheckpoint> loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::string& bytes = loaded->states.at("0-0.state");

  std::map<Key, std::string> merged;
  for (int sub = 0; sub < 2; ++sub) {
    const KeyGroupRange range = KeyGroupRange::Of(sub, 2, kMaxParallelism);
    KeyedStateStore<Key> part;
    part.UseKvStore(OpenTestStore(), kMaxParallelism, 100, range);
    StateReader r(bytes);
    part.Restore(r, range);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_FALSE(part.restored_natively());
    // Only its own key groups.
    const std::map<Key, std::string> mine = ReadAll(part, all);
    for (const auto& [k, v] : mine) {
      EXPECT_TRUE(range.Contains(k)) << k;
      merged.emplace(k, v);
    }
    EXPECT_GT(mine.size(), 0u);
  }
  EXPECT_EQ(merged, expected);

  // Into the heap backend: the same entries.
  KeyedStateStore<Key> heap;
  StateReader r(bytes);
  heap.Restore(r, all);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(ReadAll(heap, all), expected);
}

// A savepoint's storage (and a full one) has no sink: the state is written
// in the canonical format, self-contained.
TEST(RocksDbNativeIncremental, SavepointsAndFullCheckpointsGetNoSharedFileSink) {
  testing::TempDir dir;
  CheckpointStorage full(dir.Path("full"));
  EXPECT_EQ(full.SharedFileSinkFor(1), nullptr);
  CheckpointStorage sp = CheckpointStorage::ForSavepoint(dir.Path("sp"));
  sp.set_incremental(true);
  EXPECT_EQ(sp.SharedFileSinkFor(1), nullptr);
  // Without a sink a RocksDB store writes its entries (the heap's format).
  KeyedStateStore<Key> store;
  store.UseKvStore(OpenTestStore(), kMaxParallelism, 100);
  for (Key k = 0; k < 100; ++k) Put(store, k, 1);
  StateWriter w;
  store.Snapshot(w, "test");
  const std::string bytes = w.Release();
  KeyedStateStore<Key> heap;
  StateReader r(bytes);
  heap.Restore(r, KeyGroupRange::All());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(heap.Table<std::string>("value").map.size(), 100u);
}

// A missing SST file makes `latest` fall back to the previous checkpoint.
TEST(RocksDbNativeIncremental, AMissingSharedSstFileMakesLatestFallBack) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  KeyedStateStore<Key> store;
  store.UseKvStore(OpenTestStore(), kMaxParallelism, 100);
  for (Key k = 0; k < 1000; ++k) Put(store, k, 1);
  Checkpoint(store, storage, 1);
  for (Key k = 0; k < 1000; ++k) Put(store, k, 2);
  Checkpoint(store, storage, 2);
  bool removed = false;
  for (const std::string& f : SharedFiles(storage)) {
    if (f.rfind("2-", 0) == 0 && f.size() > 4 && f.substr(f.size() - 4) == ".sst") {
      fs::remove(storage.SharedDir() / f);
      removed = true;
      break;
    }
  }
  ASSERT_TRUE(removed);
  std::vector<std::string> problems;
  absl::StatusOr<LoadedCheckpoint> loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 1);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("missing"), std::string::npos) << problems[0];
}

// A shared SST file with a byte changed (its size kept) is found by its
// CRC-32C, which the references keep from its upload: `latest` passes over
// every checkpoint that refers to it.  A storage opened again (a restarted
// job) reuses the retained checkpoints' files with the CRCs they were
// written with.
TEST(RocksDbNativeIncremental, ACorruptSharedSstFileMakesLatestFallBack) {
  testing::TempDir dir;
  KeyedStateStore<Key> store;
  store.UseKvStore(OpenTestStore(), kMaxParallelism, 100);
  {
    CheckpointStorage first(dir.Path("chk"));
    first.set_incremental(true);
    for (Key k = 0; k < kKeys / 4; ++k) Put(store, k, 1);
    Checkpoint(store, first, 1);
    for (Key k = 0; k < kKeys / 4; k += 2) Put(store, k, 2);
    Checkpoint(store, first, 2);
  }
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  absl::StatusOr<LoadedCheckpoint> loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->id, 2);
  KeyedStateStore<Key> restored;
  restored.UseKvStore(OpenTestStore(), kMaxParallelism, 100);
  {
    StateReader r(loaded->states.at("0-0.state"));
    restored.Restore(r, KeyGroupRange{0, kMaxParallelism - 1, kMaxParallelism});
    ASSERT_TRUE(r.ok()) << r.error();
  }
  ASSERT_TRUE(restored.restored_natively());
  for (Key k = 0; k < 100; ++k) Put(restored, k, 3);
  const Taken third = Checkpoint(restored, storage, 3);
  EXPECT_LT(third.uploaded * 10, third.referred)
      << "uploaded " << third.uploaded << " of " << third.referred;

  // Checkpoint 2's SST file, rewritten with one byte changed (a copy: the
  // shared file is a hard link of the stores' own files).
  std::string sst;
  for (const std::string& f : SharedFiles(storage)) {
    if (f.rfind("2-", 0) == 0 && f.size() > 4 && f.substr(f.size() - 4) == ".sst") sst = f;
  }
  ASSERT_FALSE(sst.empty());
  const fs::path path = storage.SharedDir() / sst;
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() / 2] ^= 0x20;
  {
    std::ofstream out(path.string() + ".bad", std::ios::binary);
    out << bytes;
  }
  fs::rename(path.string() + ".bad", path);

  std::vector<std::string> problems;
  loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 1);
  ASSERT_EQ(problems.size(), 2u);  // checkpoints 3 and 2
  for (const std::string& p : problems) {
    EXPECT_NE(p.find("shared/" + sst + ": crc32c"), std::string::npos) << p;
    EXPECT_NE(p.find("(corrupt)"), std::string::npos) << p;
  }
}

// --- a job ------------------------------------------------------------------

using Rec = std::pair<int64_t, int64_t>;  // key, value

struct RunningCount : KeyedProcessFunction<int64_t, Rec, std::string> {
  void process_element(const Rec& r, Context& ctx, Collector<std::string>& out) override {
    auto count = ctx.get_state<int64_t>("count");
    const int64_t n = count.value_or(0) + 1;
    count.update(n);
    out.collect(absl::StrCat(r.first, ",", n));
  }
};

void BuildCountJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n, double rate,
                   std::shared_ptr<testing::Progress> progress = nullptr, int p = 2) {
  env.from_generator<Rec>(
         [](int64_t i) {
           return Rec{(i * 7919) % 5'000, i};
         },
         n, rate)
      .set_parallelism(1)
      .key_by([](const Rec& r) { return r.first; })
      .process(RunningCount{})
      .name("Counts")
      .set_parallelism(p)
      .sink_to_files(out,
                     [progress](const std::string& s) {
                       if (progress) progress->Add();
                       return s;
                     })
      .set_parallelism(p);
}

// The committed lines of BuildCountJob over `n` records into `out`, run once
// without a stop: what every stopped and restored run must commit.
void ReferenceRun(const std::string& out, int64_t n, std::vector<std::string>* lines) {
  StreamExecutionEnvironment env;
  BuildCountJob(env, out, n, 0);
  JobResult r = env.execute("reference");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  *lines = testing::CommittedLines(out, &hidden);
}

// A job on RocksDB with incremental checkpoints checkpoints natively (SST
// files in DIR/shared), and a savepoint it takes is self-contained: with
// the checkpoint directory deleted, it restores into the heap backend and
// the job commits the output of a run never stopped.
TEST(RocksDbNativeIncremental, AJobsCheckpointsAreNativeAndItsSavepointIsSelfContained) {
  const int64_t n = 30'000;
  testing::TempDir dir;
  std::vector<std::string> expected;
  ASSERT_NO_FATAL_FAILURE(ReferenceRun(dir.Path("ref"), n, &expected));
  ASSERT_EQ(expected.size(), static_cast<size_t>(n));
  const std::string chk = dir.Path("chk"), out = dir.Path("out");
  std::string savepoint;
  {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk).enable_incremental_checkpoints();
    env.set_state_backend(StateBackend::rocksdb());
    auto progress = std::make_shared<testing::Progress>();
    BuildCountJob(env, out, n, 10'000.0, progress);  // slow: room for three operations
    JobClient client = env.execute_async("on rocksdb");
    for (int k = 1; k <= 2; ++k) {
      ASSERT_NO_FATAL_FAILURE(testing::CheckpointAfter(client, *progress, 3'000 * k));
    }
    absl::StatusOr<std::string> sp = client.trigger_savepoint(dir.Path("sp"));
    ASSERT_TRUE(sp.ok()) << sp.status();
    savepoint = *sp;
    client.cancel();
    JobResult r = client.wait();
    ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
  }
  // The checkpoints refer to SST files.
  CheckpointStorage storage(chk);
  absl::StatusOr<std::map<std::string, int>> refs = storage.SharedFileReferences();
  ASSERT_TRUE(refs.ok()) << refs.status();
  int sst = 0;
  for (const auto& [f, count] : *refs)
    if (f.size() > 4 && f.substr(f.size() - 4) == ".sst") ++sst;
  EXPECT_GT(sst, 0);
  // The savepoint does not: it is whole without the checkpoint directory.
  fs::remove_all(chk);
  absl::StatusOr<LoadedCheckpoint> loaded = storage.Load(savepoint);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->metadata.contains(std::string(CheckpointStorage::kIncrementalKey)));
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk).restore_from(savepoint);
  BuildCountJob(env, out, n, 0);
  JobResult r = env.execute("from the savepoint, on the heap");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

// Native checkpoints restored at another parallelism (2 -> 3 -> 2, RocksDB
// each time): each new subtask reads its key-group ranges from the old
// subtasks' files; the committed output equals a run never stopped.
TEST(RocksDbNativeIncremental, AJobRescaledFromNativeCheckpointsCommitsExactlyOnce) {
  const int64_t n = 30'000;
  testing::TempDir dir;
  std::vector<std::string> expected;
  ASSERT_NO_FATAL_FAILURE(ReferenceRun(dir.Path("ref"), n, &expected));
  const std::string chk = dir.Path("chk"), out = dir.Path("out");
  const int parallelism[] = {2, 3};
  for (int run = 0; run < 2; ++run) {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk).enable_incremental_checkpoints();
    env.set_state_backend(StateBackend::rocksdb());
    if (run > 0) env.restore_from("latest");
    auto progress = std::make_shared<testing::Progress>();
    BuildCountJob(env, out, n, 20'000.0, progress, parallelism[run]);
    JobClient client = env.execute_async(absl::StrCat("run ", run));
    for (int k = 1; k <= 2; ++k) {
      ASSERT_NO_FATAL_FAILURE(testing::CheckpointAfter(client, *progress, 2'000 * k));
    }
    client.cancel();
    JobResult r = client.wait();
    ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
  }
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk)
      .enable_incremental_checkpoints()
      .restore_from("latest");
  env.set_state_backend(StateBackend::rocksdb());
  BuildCountJob(env, out, n, 0, nullptr, 2);
  JobResult r = env.execute("back at 2");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

// --- kill -9 ---------------------------------------------------------------

struct CrashCase {
  bool incremental;
  int kills;
};
void PrintTo(const CrashCase& c, std::ostream* os) {
  *os << (c.incremental ? "incremental" : "full");
}

std::vector<std::string> JobArgs(const std::string& backend, const std::string& mode,
                                 const std::string& chk, const std::string& out, double rate) {
  return {backend, mode, chk, out, "60000", absl::StrCat(rate), "3"};
}

class RocksDbCrash : public ::testing::TestWithParam<CrashCase> {};

// The job on RocksDB, killed with SIGKILL at random moments and started
// again with --restore=latest until it completes, commits the output of a
// heap run never killed, line for line.
TEST_P(RocksDbCrash, KilledAtRandomMomentsAndRestoredTheCommittedOutputIsExactlyOnce) {
  const CrashCase c = GetParam();
  testing::TempDir dir;
  {
    testing::CliProcess ref(TIDEMARK_CRASH_JOB, JobArgs("heap", "full", "-", dir.Path("ref"), 0),
                            testing::CliProcess::kStdinClosed);
    ASSERT_TRUE(ref.started());
    ASSERT_EQ(ref.Wait(std::chrono::seconds(120)), 0) << ref.err();
  }
  int hidden = 0;
  const std::vector<std::string> expected = testing::CommittedLines(dir.Path("ref"), &hidden);
  ASSERT_EQ(expected.size(), 60'000u);
  std::vector<std::string> args = JobArgs("rocksdb", c.incremental ? "incremental" : "full",
                                          dir.Path("chk"), dir.Path("out"), 40'000);
  // The killed runs' RocksDB directories stay in the test's own directory
  // (removed with it), not in the system's temp directory.
  args.push_back(dir.Path("rocksdb"));
  std::mt19937 rng(c.incremental ? 11 : 5);
  const int kills = testing::StressIterations(c.kills);
  int killed = 0, episodes = 0, restores = 0;
  while (killed < kills) {
    ++episodes;
    fs::remove_all(dir.Path("out"));
    fs::remove_all(dir.Path("chk"));
    int killed_here = 0;
    for (;;) {
      // This run restores a checkpoint (rather than starting afresh)?
      if (!CheckpointStorage(dir.Path("chk")).ListCommittedIds().empty()) ++restores;
      testing::CliProcess p(TIDEMARK_CRASH_JOB, args, testing::CliProcess::kStdinClosed);
      ASSERT_TRUE(p.started());
      if (killed < kills) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 700));
        kill(p.pid(), SIGKILL);
      }
      const int code = p.Wait(std::chrono::seconds(120));
      if (code == 128 + SIGKILL) {
        ++killed;
        ++killed_here;
        continue;
      }
      ASSERT_EQ(code, 0) << p.err();
      break;
    }
    // The run that completed removed the directories the killed ones left,
    // and its own.
    std::vector<std::string> left;
    std::error_code ec;
    for (fs::directory_iterator it(dir.Path("rocksdb"), ec), end; !ec && it != end;
         it.increment(ec))
      left.push_back(it->path().filename().string());
    EXPECT_TRUE(left.empty()) << "episode " << episodes << ", killed " << killed_here
                              << " times, left: " << absl::StrJoin(left, " ");
    const std::vector<std::string> got = testing::CommittedLines(dir.Path("out"), &hidden);
    EXPECT_EQ(hidden, 0);
    ASSERT_EQ(got.size(), expected.size())
        << "episode " << episodes << ", killed " << killed_here << " times";
    ASSERT_TRUE(got == expected) << "episode " << episodes << ", killed " << killed_here
                                 << " times";
    std::cout << "episode " << episodes << ": killed " << killed_here << " times, exact\n";
  }
  std::cout << killed << " kills, " << restores << " runs restored from a checkpoint\n";
  EXPECT_GT(restores, 0);
}

// 4 kills each in ctest; TIDEMARK_STRESS_SCALE=5 makes 20.
INSTANTIATE_TEST_SUITE_P(Checkpoints, RocksDbCrash,
                         ::testing::Values(CrashCase{false, 4}, CrashCase{true, 4}));

}  // namespace
}  // namespace tidemark
