// tests/incremental_checkpoint_test.cc
//
// Incremental checkpoints (issue 26, docs/checkpoints.md "Incremental
// checkpoints"):
// - the storage cuts state into content-defined chunks; a checkpoint writes
//   only the chunks no retained checkpoint holds, and a load follows the
//   references back to the same bytes;
// - keyed state written grouped by key group: touching 1 of 128 key groups
//   makes the next checkpoint write a small fraction of the state;
// - retention deletes exactly the shared files no retained checkpoint refers
//   to, also after a restart that counts the references from disk, and the
//   files of a checkpoint cut short;
// - a missing shared file makes `latest` fall back to the previous checkpoint;
// - a savepoint's storage stays full;
// - a job restored and rescaled (2 -> 3 -> 2) from incremental chains commits
//   the output of a run without failure.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/partitioning/key_groups.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

namespace fs = std::filesystem;
using internal::CheckpointStorage;
using internal::StateFileInfo;

std::set<std::string> SharedFiles(const CheckpointStorage& s) {
  std::set<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(s.SharedDir(), ec), end; !ec && it != end; it.increment(ec))
    out.insert(it->path().filename().string());
  return out;
}

std::set<std::string> Referenced(const CheckpointStorage& s) {
  auto refs = s.SharedFileReferences();
  EXPECT_TRUE(refs.ok()) << refs.status();
  std::set<std::string> out;
  if (refs.ok())
    for (const auto& [f, n] : *refs) out.insert(f);
  return out;
}

// Pseudo-random bytes (incompressible, no repeats).
std::string Random(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 1;
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x >> 24);
  }
  return s;
}

StateFileInfo Write(const CheckpointStorage& s, int64_t id, const std::string& name,
                    const std::string& bytes) {
  auto info = s.WriteState(id, name, bytes);
  EXPECT_TRUE(info.ok()) << info.status();
  return info.ok() ? *info : StateFileInfo{};
}

TEST(IncrementalStorage, CutsDependOnTheBytesNearThemOnly) {
  const std::string a = Random(400'000, 1);
  std::string b = a;
  b[200'000] ^= 0x55;                   // one byte changed
  b.insert(300'000, "inserted bytes");  // and some inserted
  const std::vector<size_t> ca = internal::ContentDefinedCuts(a);
  const std::vector<size_t> cb = internal::ContentDefinedCuts(b);
  ASSERT_GT(ca.size(), 20u);
  EXPECT_EQ(ca.back(), a.size());
  EXPECT_EQ(cb.back(), b.size());
  for (size_t i = 1; i < ca.size(); ++i) {
    EXPECT_GE(ca[i] - ca[i - 1], 1u);
    EXPECT_LE(ca[i] - ca[i - 1], 16384u);
  }
  // Cuts before the change are the same; after the insertion they are
  // shifted by its length.
  std::set<size_t> sb(cb.begin(), cb.end());
  size_t same = 0;
  size_t outside = 0;  // cuts away from the change and the insertion
  for (size_t c : ca) {
    if (c < 199'000) {
      ++outside;
      if (sb.contains(c)) ++same;
    } else if (c > 301'000) {
      ++outside;
      if (sb.contains(c + 14)) ++same;
    }
  }
  ASSERT_GE(outside, 20u);
  // The cuts resynchronise within a chunk or two after a change.
  EXPECT_GE(same + 3, outside) << same << " of " << outside;
}

// (a) 1 of 128 key groups touched: the second checkpoint writes a small
// fraction of the first, and loads back to the whole state.
TEST(IncrementalStorage, TouchingOneKeyGroupWritesLittle) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  internal::KeyedStateStore<int64_t> store;
  auto& table = store.Table<int64_t>("count");
  constexpr int kMaxParallelism = 128;
  for (int64_t k = 0; k < 40'000; ++k) table.map[k] = k * 3;
  auto snapshot = [&] {
    internal::StateWriter w;
    w.set_key_group_hint(kMaxParallelism);
    store.Snapshot(w, "test");
    return w.Release();
  };
  const std::string first = snapshot();
  const StateFileInfo f1 = Write(storage, 1, "0-0.state", first);
  ASSERT_TRUE(storage.Commit(1, {}, {f1}).ok());
  EXPECT_EQ(f1.full_size, first.size());
  EXPECT_GE(f1.shared_bytes, first.size() * 9 / 10);  // all new

  int touched = 0;
  for (auto& [k, v] : table.map) {
    if (ComputeKeyGroup(KeyHash<int64_t>{}(k), kMaxParallelism) == 17) {
      v += 1;
      ++touched;
    }
  }
  ASSERT_GT(touched, 100);
  const std::string second = snapshot();
  ASSERT_EQ(second.size(), first.size());
  const StateFileInfo f2 = Write(storage, 2, "0-0.state", second);
  ASSERT_TRUE(storage.Commit(2, {}, {f2}).ok());
  // Proportional to the changed key group (1/128 of the state, about 5 KB)
  // plus up to a chunk on either side and the reference file.
  std::cout << "state " << first.size() << " bytes; after touching 1 of 128 key groups (" << touched
            << " keys) the checkpoint wrote " << f2.shared_bytes << " bytes of chunks and a "
            << f2.size << "-byte reference file\n";
  EXPECT_LT(f2.shared_bytes + f2.size, first.size() / 10)
      << f2.shared_bytes << " + " << f2.size << " of " << first.size();
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 2);
  EXPECT_EQ(loaded->states.at("0-0.state"), second);
  // Restored, the table is the same.
  internal::KeyedStateStore<int64_t> restored;
  internal::StateReader r(loaded->states.at("0-0.state"));
  restored.Restore(r, internal::KeyGroupRange::All());
  ASSERT_TRUE(r.AtEnd()) << r.error();
  EXPECT_EQ(restored.Table<int64_t>("count").map, table.map);
  // And split over three subtasks (a rescale), each keeps its key groups.
  size_t total = 0;
  for (int s = 0; s < 3; ++s) {
    internal::KeyedStateStore<int64_t> part;
    internal::StateReader pr(loaded->states.at("0-0.state"));
    const auto range = internal::KeyGroupRange::Of(s, 3, kMaxParallelism);
    part.Restore(pr, range);
    ASSERT_TRUE(pr.AtEnd()) << pr.error();
    for (const auto& [k, v] : part.Table<int64_t>("count").map) {
      EXPECT_TRUE(range.Contains(k));
      EXPECT_EQ(v, table.map.at(k));
      ++total;
    }
  }
  EXPECT_EQ(total, table.map.size());
  // Checkpoint 2 refers to checkpoint 1's shared file.
  EXPECT_TRUE(Referenced(storage).contains("1-0-0.state"));
}

// (b) Retention deletes exactly the unreferenced shared files.
TEST(IncrementalStorage, RetentionDeletesExactlyTheUnreferencedFilesAlsoAfterARestart) {
  testing::TempDir dir;
  const std::string base = Random(200'000, 7);  // never changes: stays in 1's file
  auto state = [&](int64_t id) { return base + Random(50'000, 100 + id); };
  {
    CheckpointStorage storage(dir.Path("chk"), /*retain=*/2);
    storage.set_incremental(true);
    for (int64_t id = 1; id <= 4; ++id) {
      const StateFileInfo f = Write(storage, id, "0-0.state", state(id));
      if (id > 1) EXPECT_LT(f.shared_bytes, 100'000u) << id;
      ASSERT_TRUE(storage.Commit(id, {}, {f}).ok());
      EXPECT_EQ(SharedFiles(storage), Referenced(storage)) << "after " << id;
    }
    // 1's file holds the unchanged part: kept; 2's only the part that
    // changed since: gone with checkpoint 2.
    EXPECT_EQ(storage.ListCommittedIds(), (std::vector<int64_t>{3, 4}));
    EXPECT_TRUE(SharedFiles(storage).contains("1-0-0.state"));
    EXPECT_FALSE(SharedFiles(storage).contains("2-0-0.state"));
    EXPECT_TRUE(SharedFiles(storage).contains("4-0-0.state"));
  }
  // A checkpoint cut short by a crash: its shared file, no manifest.
  {
    CheckpointStorage storage(dir.Path("chk"), 2);
    storage.set_incremental(true);
    Write(storage, 5, "0-0.state", Random(60'000, 555));
  }
  // A restart: the references are counted from disk.
  CheckpointStorage storage(dir.Path("chk"), 2);
  storage.set_incremental(true);
  EXPECT_TRUE(SharedFiles(storage).contains("5-0-0.state"));
  const StateFileInfo f6 = Write(storage, 6, "0-0.state", state(6));
  EXPECT_LT(f6.shared_bytes, 100'000u) << "the retained chunks are reused after a restart";
  ASSERT_TRUE(storage.Commit(6, {}, {f6}).ok());
  EXPECT_EQ(SharedFiles(storage), Referenced(storage));
  EXPECT_FALSE(SharedFiles(storage).contains("5-0-0.state"));  // cut short: gone
  EXPECT_TRUE(SharedFiles(storage).contains("1-0-0.state"));
  EXPECT_FALSE(SharedFiles(storage).contains("3-0-0.state"));
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->states.at("0-0.state"), state(6));
  // Every retained checkpoint loads.
  auto four = storage.Load(storage.CheckpointPath(4));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->states.at("0-0.state"), state(4));
}

TEST(IncrementalStorage, AMissingSharedFileMakesLatestFallBackToThePreviousCheckpoint) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  ASSERT_TRUE(storage.Commit(1, {}, {Write(storage, 1, "0-0.state", Random(100'000, 1))}).ok());
  ASSERT_TRUE(storage.Commit(2, {}, {Write(storage, 2, "0-0.state", Random(100'000, 2))}).ok());
  fs::remove(storage.SharedDir() / "2-0-0.state");
  std::vector<std::string> problems;
  auto loaded = storage.LoadLatest(&problems);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 1);
  EXPECT_EQ(loaded->states.at("0-0.state"), Random(100'000, 1));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("checkpoint 2: 0-0.state: shared/2-0-0.state: missing"),
            std::string::npos)
      << problems[0];
}

TEST(IncrementalStorage, AnAbortedCheckpointsSharedFileIsDeletedAndNeverReferredTo) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  ASSERT_TRUE(storage.Commit(1, {}, {Write(storage, 1, "0-0.state", Random(60'000, 1))}).ok());
  const std::string next = Random(60'000, 1) + Random(30'000, 2);
  // Checkpoint 2's new chunks are written, then its reference file fails.
  storage.set_fault_injector([](std::string_view, const fs::path& p) {
    return p.string().find("chk-2") != std::string::npos
               ? absl::ResourceExhaustedError("No space left on device (injected)")
               : absl::OkStatus();
  });
  auto failed = storage.WriteState(2, "0-0.state", next);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(SharedFiles(storage).contains("2-0-0.state"));
  storage.Abort(2);
  EXPECT_FALSE(SharedFiles(storage).contains("2-0-0.state"));
  storage.set_fault_injector(nullptr);
  // Checkpoint 3 writes those chunks again rather than refer to the deleted file.
  const StateFileInfo f3 = Write(storage, 3, "0-0.state", next);
  EXPECT_GE(f3.shared_bytes, 25'000u);
  ASSERT_TRUE(storage.Commit(3, {}, {f3}).ok());
  EXPECT_EQ(SharedFiles(storage), (std::set<std::string>{"1-0-0.state", "3-0-0.state"}));
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->states.at("0-0.state"), next);
}

// A task whose write finishes after its checkpoint was aborted (timed out,
// or failed elsewhere): its new shared file is not kept as pending for good
// (found by a review: it was, so such files were never deleted), and the
// next retention deletes it.
TEST(IncrementalStorage, ASharedFileWrittenAfterItsCheckpointWasAbortedIsDeletedAtTheNextCommit) {
  testing::TempDir dir;
  CheckpointStorage storage(dir.Path("chk"));
  storage.set_incremental(true);
  ASSERT_TRUE(storage.Commit(1, {}, {Write(storage, 1, "0-0.state", Random(60'000, 1))}).ok());
  storage.Abort(2);
  ASSERT_TRUE(storage.WriteState(2, "0-1.state", Random(40'000, 7)).ok());  // late
  EXPECT_TRUE(SharedFiles(storage).contains("2-0-1.state"));
  const StateFileInfo f3 = Write(storage, 3, "0-0.state", Random(60'000, 1) + Random(20'000, 3));
  ASSERT_TRUE(storage.Commit(3, {}, {f3}).ok());
  EXPECT_EQ(SharedFiles(storage), (std::set<std::string>{"1-0-0.state", "3-0-0.state"}));
  auto loaded = storage.LoadLatest(nullptr);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->id, 3);
}

TEST(IncrementalStorage, ASavepointStaysFullAndAFullCheckpointBesideIncrementalOnesLoads) {
  testing::TempDir dir;
  CheckpointStorage sp = CheckpointStorage::ForSavepoint(dir.Path("sp"));
  sp.set_incremental(true);
  EXPECT_FALSE(sp.incremental());
  // Full and incremental checkpoints in one directory (a job restarted
  // with the option changed): each loads as it was written.
  {
    CheckpointStorage full(dir.Path("chk"));
    ASSERT_TRUE(full.Commit(1, {}, {Write(full, 1, "0-0.state", Random(50'000, 1))}).ok());
  }
  CheckpointStorage inc(dir.Path("chk"));
  inc.set_incremental(true);
  ASSERT_TRUE(inc.Commit(2, {}, {Write(inc, 2, "0-0.state", Random(50'000, 2))}).ok());
  auto one = inc.Load(inc.CheckpointPath(1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->states.at("0-0.state"), Random(50'000, 1));
  auto two = inc.LoadLatest(nullptr);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(two->states.at("0-0.state"), Random(50'000, 2));
  EXPECT_EQ(two->metadata.at(std::string(CheckpointStorage::kIncrementalKey)), "1");
}

// --- a job restored and rescaled from incremental chains ---

using testing::Progress;

using Rec = std::pair<int64_t, int64_t>;  // key, running count

// Records 0..kKeys-1 create kKeys keys; the rest touch only the keys of key
// group 17 (of 128): later checkpoints refer to earlier files for the rest.
constexpr int64_t kKeys = 20'000;
const std::vector<int64_t>& HotKeys() {
  static const std::vector<int64_t> keys = [] {
    std::vector<int64_t> k;
    for (int64_t i = 0; i < kKeys; ++i)
      if (ComputeKeyGroup(KeyHash<int64_t>{}(i), 128) == 17) k.push_back(i);
    return k;
  }();
  return keys;
}

void BuildJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n, double rate,
              int p, std::shared_ptr<Progress> progress = nullptr) {
  env.from_generator<Rec>(
         [](int64_t i) {
           const int64_t key = i < kKeys ? i : HotKeys()[static_cast<size_t>(i) % HotKeys().size()];
           return Rec{key, 1};
         },
         n, rate)
      .set_parallelism(1)
      .key_by([](const Rec& r) { return r.first; })
      .reduce([](const Rec& a, const Rec& b) {
        return Rec{a.first, a.second + b.second};
      })
      .name("Counts")
      .set_parallelism(p)
      .sink_to_files(out,
                     [progress](const Rec& r) {
                       if (progress) progress->Add();
                       return absl::StrCat(r.first, ",", r.second);
                     })
      .set_parallelism(p);
}

// (c) Restored 2 -> 3 -> 2 from incremental checkpoints: the committed
// output equals a run without failure's (which a restore from full
// checkpoints also gives: tests/rescale_test.cc).
TEST(IncrementalJob, RestoredAndRescaledFromIncrementalChainsCommitsExactlyOnce) {
  const int64_t n = 60'000;
  testing::TempDir dir;
  std::vector<std::string> expected;
  {
    StreamExecutionEnvironment env;
    BuildJob(env, dir.Path("ref"), n, 0, 2);
    JobResult r = env.execute("reference");
    ASSERT_TRUE(r.ok()) << r.status;
    int hidden = 0;
    expected = testing::CommittedLines(dir.Path("ref"), &hidden);
    ASSERT_EQ(expected.size(), static_cast<size_t>(n));
  }
  const std::string out = dir.Path("out");
  const std::string chk = dir.Path("chk");
  const int parallelism[] = {2, 3};
  int64_t lines = 0;
  for (int run = 0; run < 2; ++run) {
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(0), chk).enable_incremental_checkpoints();
    if (run > 0) env.restore_from("latest");
    auto progress = std::make_shared<Progress>();
    BuildJob(env, out, n, 20'000.0, parallelism[run], progress);
    JobClient client = env.execute_async(absl::StrCat("run ", run));
    for (int k = 0; k < 3; ++k) {
      // Past the first kKeys records: only key group 17 changes.
      ASSERT_NO_FATAL_FAILURE(testing::CheckpointAfter(
          client, *progress, run == 0 ? kKeys + 2'000 * (k + 1) : 2'000 * (k + 1)));
    }
    client.cancel();
    JobResult r = client.wait();
    ASSERT_TRUE(absl::IsCancelled(r.status)) << r.status;
    ASSERT_GE(r.checkpoints.sizes_bytes.size(), 3u);
    std::cout << "run " << run << " at parallelism " << parallelism[run]
              << ": checkpoints wrote / stood for (bytes):";
    for (size_t i = 0; i < r.checkpoints.sizes_bytes.size(); ++i)
      std::cout << " " << r.checkpoints.sizes_bytes[i] << "/" << r.checkpoints.state_bytes[i];
    std::cout << "\n";
    // The last checkpoints wrote a fraction of the state they stand for.
    const size_t last = r.checkpoints.sizes_bytes.size() - 1;
    EXPECT_LT(r.checkpoints.sizes_bytes[last] * 4, r.checkpoints.state_bytes[last])
        << "run " << run << ": " << r.checkpoints.sizes_bytes[last] << " of "
        << r.checkpoints.state_bytes[last];
    // The newest checkpoint refers to files of earlier ones: a chain.
    CheckpointStorage storage(chk);
    const std::vector<int64_t> ids = storage.ListCommittedIds();
    ASSERT_FALSE(ids.empty());
    auto refs = storage.SharedFileReferences();
    ASSERT_TRUE(refs.ok()) << refs.status();
    bool older = false;
    for (const auto& [f, count] : *refs)
      if (f.rfind(absl::StrCat(ids.back(), "-"), 0) != 0) older = true;
    EXPECT_TRUE(older);
    int hidden = 0;
    lines = static_cast<int64_t>(testing::CommittedLines(out, &hidden).size());
    EXPECT_LT(lines, n) << "run " << run << " was to stop early";
  }
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk)
      .enable_incremental_checkpoints()
      .restore_from("latest");
  BuildJob(env, out, n, 0, 2);
  JobResult r = env.execute("back at 2");
  ASSERT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected);
}

}  // namespace
}  // namespace tidemark
