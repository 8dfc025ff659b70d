// tests/cli_checkpoint_test.cc
//
// A job outlives `kill -9` (issue 13): `tidemark run` over a file, with
// checkpoints and exactly-once output files, is killed with SIGKILL at random
// moments and started again with --restore=latest until it completes; the
// committed output then equals, line for line, the output of a run that was
// never killed: no result lost, none written twice.  Tumbling, sliding and
// session windows with allowed lateness and the late side output, window
// parallelism 1 and 3.  Killed after a checkpoint and restored at another
// parallelism (2 -> 3, 3 -> 1: the windows' keyed state moves by key groups,
// the file sinks' pending parts round robin), the committed output equals
// that of a run never killed but for the subtask that fired each window.
// And the command line's own checks: a damaged checkpoint is passed over
// with a message, flags are checked.
//
// Real time is the subject here (when the process is killed), so the test
// sleeps between start and kill; nothing else waits on time.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli_test_util.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/runtime/state/checkpoint_storage.h"

namespace tidemark::testing {
namespace {

namespace fs = std::filesystem;

// key,ts,value lines: time advances 2 ms a line with up to 3 s of disorder,
// and one line in a thousand 20 s late (past the allowed lateness).
std::string WriteInput(const std::string& dir, int64_t lines) {
  std::mt19937_64 rng(20261201);
  const std::string path = dir + "/in.txt";
  std::ofstream out(path);
  for (int64_t i = 0; i < lines; ++i) {
    int64_t ts = 1'000'000 + i * 2 - static_cast<int64_t>(rng() % 3000);
    if (rng() % 1000 == 0) ts -= 20'000;
    out << "k" << rng() % 400 << "," << ts << "," << 1 + rng() % 100 << "\n";
  }
  return path;
}

std::vector<std::string> JobArgs(const std::string& input, const std::string& window,
                                 int parallelism) {
  // One input file and per-record watermarks: the output of an
  // uninterrupted run is deterministic, so the comparison can be exact.
  return {"run",
          "--input=" + input,
          "--window=" + window,
          "--allowed-lateness=2s",
          "--late=side",
          "--watermarks=bounded:1s",
          "--watermark-interval=per-record",
          absl::StrCat("--parallelism=", parallelism),
          "--summary=false"};
}

struct CrashCase {
  const char* window;
  int parallelism;
  bool incremental = false;  // --incremental-checkpoints
  int kills = 20;
  bool rocksdb = false;    // --state-backend=rocksdb
  bool unaligned = false;  // --unaligned-checkpoints
};
// For ctest's test names (stable, unlike the bytes gtest prints otherwise).
void PrintTo(const CrashCase& c, std::ostream* os) {
  *os << c.window << " p" << c.parallelism << (c.incremental ? " incremental" : "")
      << (c.rocksdb ? " rocksdb" : "") << (c.unaligned ? " unaligned" : "");
}

class CliCrash : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CliCrash, KilledAtRandomMomentsAndRestoredTheCommittedOutputIsExactlyOnce) {
  const CrashCase c = GetParam();
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 400'000);
  const std::vector<std::string> args = JobArgs(input, c.window, c.parallelism);

  // The reference: one run, never killed.
  std::vector<std::string> ref_args = args;
  ref_args.push_back("--output-dir=" + dir.Path("ref"));
  CliRun ref = RunTidemark(ref_args);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  int hidden = 0;
  const std::vector<std::string> expected = CommittedLines(dir.Path("ref"), &hidden);
  ASSERT_GT(expected.size(), 1000u);
  ASSERT_EQ(hidden, 0);

  // Killed at random moments, restarted from the latest checkpoint until a
  // run completes; compared; again from scratch until the job has been
  // killed `kills` times in all.
  std::vector<std::string> run_args = args;
  run_args.push_back("--output-dir=" + dir.Path("out"));
  run_args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  run_args.push_back("--checkpoint-interval=30ms");
  run_args.push_back("--restore=latest");
  if (c.incremental) run_args.push_back("--incremental-checkpoints");
  if (c.rocksdb) {
    run_args.push_back("--state-backend=rocksdb");
    // The killed runs' RocksDB directories stay in the test's own directory.
    run_args.push_back("--state-backend-dir=" + dir.Path("rocksdb"));
  }
  if (c.unaligned) run_args.push_back("--unaligned-checkpoints");
  std::mt19937 rng(static_cast<unsigned>(c.parallelism * 131 + c.window[1] + c.incremental +
                                         7 * c.rocksdb + 11 * c.unaligned));
  const int kills = StressIterations(c.kills);
  int killed = 0;
  int episodes = 0;
  while (killed < kills) {
    ++episodes;
    fs::remove_all(dir.Path("out"));
    fs::remove_all(dir.Path("chk"));
    int killed_here = 0;
    for (;;) {
      CliProcess p(run_args, CliProcess::kStdinClosed);
      ASSERT_TRUE(p.started());
      if (killed < kills) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10 + rng() % 300));
        kill(p.pid(), SIGKILL);
      }
      const int code = p.Wait(std::chrono::seconds(120));
      if (code == 128 + SIGKILL) {
        ++killed;
        ++killed_here;
        continue;
      }
      ASSERT_EQ(code, 0) << p.err();  // completed (before the kill, or not killed)
      break;
    }
    const std::vector<std::string> got = CommittedLines(dir.Path("out"), &hidden);
    EXPECT_EQ(hidden, 0);
    ASSERT_EQ(got.size(), expected.size())
        << "episode " << episodes << ", killed " << killed_here << " times";
    ASSERT_TRUE(got == expected) << "episode " << episodes << ", killed " << killed_here
                                 << " times";
  }
}

INSTANTIATE_TEST_SUITE_P(Windows, CliCrash,
                         ::testing::Values(CrashCase{"tumbling:1s", 1}, CrashCase{"tumbling:1s", 3},
                                           CrashCase{"sliding:2s,500ms", 3},
                                           CrashCase{"session:300ms", 1},
                                           CrashCase{"session:300ms", 3},
                                           // Incremental checkpoints: restored through
                                           // their chains of shared files (fewer kills
                                           // here; TIDEMARK_STRESS_SCALE=3.34 makes 20).
                                           CrashCase{"tumbling:1s", 3, true, 6},
                                           CrashCase{"session:300ms", 1, true, 6},
                                           // The RocksDB state backend (its keyed state;
                                           // window contents where they are on it),
                                           // full and incremental checkpoints.
                                           CrashCase{"tumbling:1s", 3, false, 3, true},
                                           CrashCase{"tumbling:1s", 3, true, 3, true},
                                           // Unaligned checkpoints: restored with their
                                           // channel state (the records in flight).
                                           CrashCase{"tumbling:1s", 3, false, 6, false, true},
                                           CrashCase{"session:300ms", 3, false, 6, false, true}));

// `lines` without the "subtask" field of each result: which subtask fires a
// window depends on the parallelism.
std::vector<std::string> WithoutSubtask(std::vector<std::string> lines) {
  for (std::string& l : lines) {
    const size_t at = l.find(",\"subtask\":");
    if (at == std::string::npos) continue;
    size_t end = at + 11;
    while (end < l.size() && l[end] >= '0' && l[end] <= '9') ++end;
    l.erase(at, end - at);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

bool HasCompleteCheckpoint(const std::string& dir) {
  if (!fs::exists(dir)) return false;
  internal::CheckpointStorage storage(dir);
  for (int64_t id : storage.ListCheckpointIds())
    if (storage.IsComplete(id)) return true;
  return false;
}

struct RescaleCase {
  const char* window;
  int from;
  int to;
};

class CliRescale : public ::testing::TestWithParam<RescaleCase> {};

TEST_P(CliRescale, KilledAfterACheckpointAndRestoredAtAnotherParallelismIsExactlyOnce) {
  const RescaleCase c = GetParam();
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 400'000);

  std::vector<std::string> ref_args = JobArgs(input, c.window, c.from);
  ref_args.push_back("--output-dir=" + dir.Path("ref"));
  CliRun ref = RunTidemark(ref_args);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  int hidden = 0;
  const std::vector<std::string> expected =
      WithoutSubtask(CommittedLines(dir.Path("ref"), &hidden));
  ASSERT_GT(expected.size(), 1000u);

  auto with_state = [&](std::vector<std::string> args) {
    args.push_back("--output-dir=" + dir.Path("out"));
    args.push_back("--checkpoint-dir=" + dir.Path("chk"));
    args.push_back("--checkpoint-interval=30ms");
    args.push_back("--restore=latest");
    return args;
  };
  // Killed with SIGKILL once a checkpoint is complete.  When to kill is the
  // subject here: a run killed before its first checkpoint, or one that
  // completed first, is tried again from scratch, later or sooner.
  int wait_ms = 200;
  bool killed_after_checkpoint = false;
  for (int attempt = 0; attempt < 8 && !killed_after_checkpoint; ++attempt) {
    fs::remove_all(dir.Path("out"));
    fs::remove_all(dir.Path("chk"));
    CliProcess p(with_state(JobArgs(input, c.window, c.from)), CliProcess::kStdinClosed);
    ASSERT_TRUE(p.started());
    std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
    kill(p.pid(), SIGKILL);
    const int code = p.Wait(std::chrono::seconds(120));
    if (code == 0) {
      wait_ms /= 2;
    } else {
      ASSERT_EQ(code, 128 + SIGKILL) << p.err();
      killed_after_checkpoint = HasCompleteCheckpoint(dir.Path("chk"));
      wait_ms *= 2;
    }
  }
  ASSERT_TRUE(killed_after_checkpoint);
  const size_t before = CommittedLines(dir.Path("out"), &hidden).size();

  std::vector<std::string> args = with_state(JobArgs(input, c.window, c.to));
  for (std::string& a : args)
    if (a == "--summary=false") a = "--summary=true";
  CliRun restored = RunTidemark(args);
  ASSERT_EQ(restored.exit_code, 0) << restored.err;
  EXPECT_NE(restored.err.find("restored from checkpoint "), std::string::npos) << restored.err;
  const std::vector<std::string> got = WithoutSubtask(CommittedLines(dir.Path("out"), &hidden));
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size()) << before << " committed before the kill";
  EXPECT_TRUE(got == expected);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, CliRescale,
                         ::testing::Values(RescaleCase{"tumbling:1s", 2, 3},
                                           RescaleCase{"tumbling:1s", 3, 1},
                                           RescaleCase{"session:300ms", 2, 3},
                                           RescaleCase{"sliding:2s,500ms", 3, 1}));

TEST(CliCheckpoint, SummarySaysCheckpointsAndRestore) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 20'000);
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 2);
  args.back() = "--summary=true";
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=10ms");
  args.push_back("--output-dir=" + dir.Path("out"));
  CliRun first = RunTidemark(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.err.find(" (last chk-"), std::string::npos) << first.err;
  args.push_back("--restore=latest");
  CliRun second = RunTidemark(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("restored from checkpoint "), std::string::npos) << second.err;
}

TEST(CliCheckpoint, DamagedLatestCheckpointIsPassedOverWithAMessage) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 20'000);
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 1);
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=5ms");
  args.push_back("--output-dir=" + dir.Path("out"));
  CliRun first = RunTidemark(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // A second run restored from the first one's last checkpoint ends with its
  // own final checkpoint: at least two complete ones, whatever the timing.
  args.push_back("--restore=latest");
  CliRun again = RunTidemark(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // Truncate a state file of the newest checkpoint.
  int64_t newest = -1;
  for (const auto& e : fs::directory_iterator(dir.Path("chk"))) {
    const std::string name = e.path().filename().string();
    if (name.rfind("chk-", 0) == 0) newest = std::max<int64_t>(newest, std::stoll(name.substr(4)));
  }
  ASSERT_GE(newest, 2);
  const std::string victim = dir.Path(absl::StrCat("chk/chk-", newest, "/0-0.state"));
  ASSERT_TRUE(fs::exists(victim));
  fs::resize_file(victim, fs::file_size(victim) / 2);
  CliRun second = RunTidemark(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("passed over a damaged checkpoint: checkpoint " +
                            std::to_string(newest) + ": 0-0.state"),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("truncated"), std::string::npos) << second.err;
}

// Issue 23 item 2: the newest checkpoint (the run's final one, which
// committed the parts written after the checkpoint before it) is damaged in
// one of six ways; --restore=latest passes over it and falls back to the one
// before, replays from there, and rolls back the parts the damaged one had
// committed, naming each: the committed output equals a failure-free run's,
// with no line twice.
enum class Damage {
  kTruncateState,
  kFlipStateByte,
  kFlipManifestByte,
  kDeleteManifest,
  kEmptyState,
  kDeleteState
};

std::string DamageName(const ::testing::TestParamInfo<Damage>& info) {
  switch (info.param) {
    case Damage::kTruncateState:
      return "TruncateStateFile";
    case Damage::kFlipStateByte:
      return "FlipStateFileByte";
    case Damage::kFlipManifestByte:
      return "FlipManifestByte";
    case Damage::kDeleteManifest:
      return "DeleteManifest";
    case Damage::kEmptyState:
      return "EmptyStateFile";
    case Damage::kDeleteState:
      return "DeleteStateFile";
  }
  return "?";
}

void FlipByte(const std::string& path, size_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(f.is_open()) << path;
  f.seekg(static_cast<std::streamoff>(at));
  char c = 0;
  f.get(c);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(c ^ 0x5a));
}

// The number before " window result(s)" in a run's summary line, -1 if none.
int64_t WindowResults(const std::string& err) {
  const size_t at = err.find(" window result");
  if (at == std::string::npos) return -1;
  size_t begin = at;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(err[begin - 1]))) --begin;
  return begin == at ? -1 : std::stoll(err.substr(begin, at - begin));
}

// One try of the scenario in fresh directories.  `*rolled_back` says whether
// the checkpoint before the newest was taken before some of the output was
// written, so that the restored run wrote results again and the parts the
// newest committed had to be rolled back: the test's point.  Whether it was
// depends on timing: a periodic checkpoint can complete after the last
// window fired and before the job's final one (then the final one commits
// nothing, the restored run writes nothing and there is nothing to roll
// back: also right, and checked).
void DamagedNewestTry(Damage damage, bool* rolled_back) {
  *rolled_back = false;
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 100'000);
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 2);
  std::vector<std::string> ref_args = args;
  ref_args.push_back("--output-dir=" + dir.Path("ref"));
  CliRun ref = RunTidemark(ref_args);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  int hidden = 0;
  const std::vector<std::string> expected = CommittedLines(dir.Path("ref"), &hidden);
  ASSERT_GT(expected.size(), 1000u);

  args.push_back("--output-dir=" + dir.Path("out"));
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=5ms");
  args.push_back("--restore=latest");
  CliRun first = RunTidemark(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(CommittedLines(dir.Path("out"), &hidden) == expected);
  std::vector<std::string> parts_before;
  for (const auto& e : fs::directory_iterator(dir.Path("out")))
    if (e.path().filename().string().rfind("part-", 0) == 0)
      parts_before.push_back(e.path().string());
  internal::CheckpointStorage storage(dir.Path("chk"));
  std::vector<int64_t> ids = storage.ListCheckpointIds();
  // The final checkpoint and at least one taken while the input was read;
  // otherwise (the run was quicker than a periodic checkpoint) there is
  // nothing to fall back to, and the caller tries again.
  if (ids.size() < 2) return;
  const int64_t newest = ids.back();
  const fs::path chk = storage.CheckpointPath(newest);
  const std::string state = (chk / "0-0.state").string();
  ASSERT_TRUE(fs::exists(state)) << state;
  switch (damage) {
    case Damage::kTruncateState:
      fs::resize_file(state, fs::file_size(state) / 2);
      break;
    case Damage::kFlipStateByte:
      FlipByte(state, fs::file_size(state) / 2);
      break;
    case Damage::kFlipManifestByte:
      FlipByte((chk / "_manifest").string(), fs::file_size(chk / "_manifest") / 2);
      break;
    case Damage::kDeleteManifest:
      fs::remove(chk / "_manifest");
      break;
    case Damage::kEmptyState:
      fs::resize_file(state, 0);
      break;
    case Damage::kDeleteState:
      fs::remove(state);
      break;
  }

  std::vector<std::string> again = args;
  for (std::string& a : again)
    if (a == "--summary=false") a = "--summary=true";
  CliRun second = RunTidemark(again);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find(absl::StrCat("passed over a damaged checkpoint: checkpoint ", newest)),
            std::string::npos)
      << second.err;
  EXPECT_NE(second.err.find("restored from checkpoint " + std::to_string(ids[ids.size() - 2])),
            std::string::npos)
      << second.err;
  const int64_t results = WindowResults(second.err);
  ASSERT_GE(results, 0) << second.err;
  // Each part file rolled back is named: every committed part of the first
  // run that is gone, and only those.
  std::vector<std::string> gone;
  for (const std::string& part : parts_before)
    if (!fs::exists(part)) gone.push_back(part);
  for (const std::string& part : parts_before) {
    const bool named = second.err.find("tidemark: rolled back " + part + ": ") != std::string::npos;
    EXPECT_EQ(named, !fs::exists(part)) << part << "\n" << second.err;
  }
  // The restored run wrote results again exactly when it rolled parts back.
  EXPECT_EQ(results > 0, !gone.empty()) << second.err;
  *rolled_back = !gone.empty();
  const std::vector<std::string> got = CommittedLines(dir.Path("out"), &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size()) << second.err;
  EXPECT_TRUE(got == expected);

  // And once more: the damaged checkpoint is still there, the restored run's
  // own final checkpoint is newer; nothing changes.
  CliRun third = RunTidemark(again);
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_TRUE(CommittedLines(dir.Path("out"), &hidden) == expected);
}

class CliDamagedNewest : public ::testing::TestWithParam<Damage> {};

// Up to five tries, until one falls back to a checkpoint taken before some
// of the output was written (about one try in a hundred does not, on a
// loaded 2-core machine); every try checks the output.
TEST_P(CliDamagedNewest, FallingBackRollsTheOutputBackAndNothingIsCommittedTwice) {
  bool rolled_back = false;
  for (int attempt = 0; attempt < 5 && !rolled_back; ++attempt) {
    DamagedNewestTry(GetParam(), &rolled_back);
    if (HasFailure()) return;
  }
  EXPECT_TRUE(rolled_back) << "no try fell back to a checkpoint taken before the end of the output";
}

INSTANTIATE_TEST_SUITE_P(Damages, CliDamagedNewest,
                         ::testing::Values(Damage::kTruncateState, Damage::kFlipStateByte,
                                           Damage::kFlipManifestByte, Damage::kDeleteManifest,
                                           Damage::kEmptyState, Damage::kDeleteState),
                         DamageName);

// --trace shows the barriers (a source sends one, each window subtask aligns
// it) and the timeline draws them; standard input cannot be replayed, which
// the summary says.
TEST(CliCheckpoint, BarriersAreTracedAndDrawnAndStdinIsAtMostOnce) {
  TempDir dir;
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);  // the child must not hold the write end
  CliProcess p({"run", "--input=-", "--window=tumbling:1s", "--parallelism=2",
                "--checkpoint-dir=" + dir.Path("chk"), "--checkpoint-interval=5ms",
                "--trace=watermarks", "--timeline=" + dir.Path("t.html")},
               in[0]);
  close(in[0]);
  ASSERT_TRUE(p.started());
  const std::string lines = "a,1000,1\nb,2000,2\n";
  ASSERT_EQ(write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  // Read stdout until both window subtasks have aligned barrier 1 (the input
  // stays open meanwhile, so checkpoints keep coming).
  EXPECT_TRUE(
      p.WaitForOut("[checkpoint] window subtask 0 aligned barrier 1 ", std::chrono::seconds(60)));
  EXPECT_TRUE(
      p.WaitForOut("[checkpoint] window subtask 1 aligned barrier 1 ", std::chrono::seconds(60)));
  close(in[1]);
  ASSERT_EQ(p.Wait(std::chrono::seconds(60)), 0) << p.err();
  EXPECT_NE(p.out().find("[checkpoint] source subtask 0 sends barrier 1"), std::string::npos)
      << p.out();
  EXPECT_NE(p.out().find("[checkpoint] window subtask 0 aligned barrier 1 in "), std::string::npos);
  EXPECT_NE(p.out().find("[checkpoint] window subtask 1 aligned barrier 1 in "), std::string::npos);
  EXPECT_NE(p.err().find("at-most-once (the input cannot be replayed)"), std::string::npos)
      << p.err();
  const std::string html = ReadFile(dir.Path("t.html"));
  EXPECT_NE(html.find("class='mark barrier' data-checkpoint='1'"), std::string::npos);
  EXPECT_NE(html.find("window subtask 1 aligned barrier 1 in "), std::string::npos);
}

// Issue 23 item 3: the checkpoint directory is checked before the job
// starts, as --timeline is: one that cannot be created is exit 2, and
// nothing runs.
TEST(CliCheckpoint, ADirectoryThatCannotBeCreatedIsAnErrorBeforeTheJob) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 2'000);
  const std::string file = dir.File("plain", "a regular file\n");
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 1);
  args.push_back("--checkpoint-dir=" + file + "/chk");
  CliRun r = RunTidemark(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--checkpoint-dir=" + file + "/chk: checkpoint directory " + file +
                       "/chk: cannot create"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out.size() << " bytes on stdout: the job ran";

  // A directory that exists but takes no files, even from root: sysfs.
  if (fs::is_directory("/sys/kernel")) {
    args.back() = "--checkpoint-dir=/sys/kernel";
    r = RunTidemark(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--checkpoint-dir=/sys/kernel: checkpoint directory /sys/kernel: not "
                         "writable: create /sys/kernel/.tidemark-write-check.tmp: "),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out.size() << " bytes on stdout: the job ran";
  }
}

// A full disk, for real: checkpoint 1's state file is written through a
// link to /dev/full (ENOSPC).  Said on stderr when it fails; with the
// default of no tolerated failures the job fails.
void PoisonFirstCheckpoint(const std::string& chk_dir) {
  fs::create_directories(chk_dir + "/chk-1");
  fs::create_symlink("/dev/full", chk_dir + "/chk-1/.0-0.state.tmp");
}

// The committed output of the job on `input` without checkpoints (the
// reference the checkpointed runs below must equal).
std::vector<std::string> ReferenceOutput(TempDir& dir, const std::string& input) {
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 2);
  args.push_back("--output-dir=" + dir.Path("ref"));
  CliRun ref = RunTidemark(args);
  EXPECT_EQ(ref.exit_code, 0) << ref.err;
  int hidden = 0;
  return CommittedLines(dir.Path("ref"), &hidden);
}

// The same job checkpointing every 5 ms into a checkpoint directory whose
// first checkpoint meets a full disk, with `flag` added.
CliRun RunWithPoisonedFirstCheckpoint(TempDir& dir, const std::string& input,
                                      const std::string& flag) {
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 2);
  args.back() = "--summary=true";
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=5ms");
  args.push_back("--output-dir=" + dir.Path("out"));
  args.push_back(flag);
  PoisonFirstCheckpoint(dir.Path("chk"));
  return RunTidemark(args);
}

TEST(CliCheckpoint, AFailedCheckpointIsSaidWhenItFailsAndFailsTheJobByDefault) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 100'000);
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 2);
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=5ms");
  args.push_back("--output-dir=" + dir.Path("out"));
  PoisonFirstCheckpoint(dir.Path("chk"));
  CliRun r = RunTidemark(args);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("tidemark: checkpoint failed: checkpoint 1: write state: write " +
                       dir.Path("chk") + "/chk-1/.0-0.state.tmp: No space left on device"),
            std::string::npos)
      << r.err;
}

TEST(CliCheckpoint, ToleratedFailedCheckpointsAreCountedAndTheJobGoesOn) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 100'000);
  const std::vector<std::string> expected = ReferenceOutput(dir, input);
  ASSERT_FALSE(expected.empty());
  int hidden = 0;
  CliRun r = RunWithPoisonedFirstCheckpoint(dir, input, "--tolerable-failed-checkpoints=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t failed_line = r.err.find("tidemark: checkpoint failed: checkpoint 1: ");
  const size_t summary = r.err.find(" records, ");
  ASSERT_NE(failed_line, std::string::npos) << r.err;
  ASSERT_NE(summary, std::string::npos) << r.err;
  EXPECT_LT(failed_line, summary) << r.err;  // said when it failed, before the summary
  EXPECT_NE(r.err.find(", 1 failed (checkpoint 1: "), std::string::npos) << r.err;
  // The next checkpoint committed what checkpoint 1 had pre-committed.
  EXPECT_TRUE(CommittedLines(dir.Path("out"), &hidden) == expected);
  EXPECT_EQ(hidden, 0);
}

// A checkpoint failure past the tolerable count fails the attempt; with a
// restart strategy the job restarts by itself (the failed checkpoint's
// directory, the poison with it, is gone) and ends with the output of a run
// without failures, the restart counted in the summary.
TEST(CliCheckpoint, AFailedCheckpointPastTheToleranceRestartsTheJobWithARestartStrategy) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 100'000);
  const std::vector<std::string> expected = ReferenceOutput(dir, input);
  ASSERT_FALSE(expected.empty());
  int hidden = 0;
  CliRun r = RunWithPoisonedFirstCheckpoint(dir, input, "--restart-strategy=fixed-delay:1:0ms");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("tidemark: restarting (1): "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(", numRestarts 1 (last cause: "), std::string::npos) << r.err;
  // What the summary's counts cover across attempts.
  EXPECT_NE(r.err.find("; records are the last attempt's, read from its restore point; window "
                       "results and late records are every attempt's"),
            std::string::npos)
      << r.err;
  const size_t restart_line = r.err.find("tidemark: restarting (1): ");
  EXPECT_NE(r.err.find("No space left on device", restart_line), std::string::npos) << r.err;
  EXPECT_TRUE(CommittedLines(dir.Path("out"), &hidden) == expected);
  EXPECT_EQ(hidden, 0);
}

TEST(CliCheckpoint, CheckpointFailureFlagsAreChecked) {
  TempDir dir;
  const std::string chk = "--checkpoint-dir=" + dir.Path("chk");
  CliRun r = RunTidemark({"run", "--input=/dev/null", chk, "--tolerable-failed-checkpoints=-1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--tolerable-failed-checkpoints must not be negative"), std::string::npos)
      << r.err;
  r = RunTidemark({"run", "--input=/dev/null", chk, "--checkpoint-timeout=0s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--checkpoint-timeout must be greater than 0"), std::string::npos) << r.err;
  r = RunTidemark({"run", "--input=/dev/null", chk, "--checkpoint-timeout=soon"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--checkpoint-timeout: "), std::string::npos) << r.err;
}

// Issue 23 item 5: stray directories neither shift the checkpoint ids nor
// count toward retention; each is named.  A named checkpoint that is not
// there says so.
TEST(CliCheckpoint, StrayCheckpointDirectoriesAreIgnoredAndNamed) {
  TempDir dir;
  const std::string input = WriteInput(dir.path(), 20'000);
  std::vector<std::string> args = JobArgs(input, "tumbling:1s", 1);
  args.back() = "--summary=true";
  args.push_back("--checkpoint-dir=" + dir.Path("chk"));
  args.push_back("--checkpoint-interval=1h");  // only the final checkpoint
  args.push_back("--output-dir=" + dir.Path("out"));
  fs::create_directories(dir.Path("chk/chk-999999"));
  fs::create_directories(dir.Path("chk/chk-abc"));
  CliRun r = RunTidemark(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // One checkpoint, the final one: its count in the singular, named by its
  // directory.
  EXPECT_NE(r.err.find(", 1 checkpoint (last chk-1: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tidemark: ignored " + dir.Path("chk/chk-999999") + ": no manifest"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tidemark: ignored " + dir.Path("chk/chk-abc") +
                       ": not a checkpoint directory (chk-<number>)"),
            std::string::npos)
      << r.err;
  args.push_back("--restore=latest");
  CliRun again = RunTidemark(args);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // After the restore the ids go on from the restored one's: one checkpoint
  // taken, chk-2.
  EXPECT_NE(again.err.find(", 1 checkpoint (last chk-2: "), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("restored from checkpoint 1 "), std::string::npos) << again.err;
  EXPECT_TRUE(fs::exists(dir.Path("chk/chk-999999")));
}

// With savepoints but no --checkpoint-dir the checkpoints are kept in memory:
// the summary names the last by its id, not by a chk- directory that is not
// there.
TEST(CliCheckpoint, SummaryNamesACheckpointKeptInMemoryByItsId) {
  TempDir dir;
  const std::string input = dir.Path("in.txt");
  WriteFile(input, "a,1000\na,2000\nb,7000\n");
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts",
                          "--savepoint-dir=" + dir.Path("sp"), "--savepoint-on=SIGUSR1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(", 1 checkpoint (last in memory, id 1: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("chk-"), std::string::npos) << r.err;
}

TEST(CliCheckpoint, RestoringFromACheckpointThatIsNotThereSaysSo) {
  CliRun r = RunTidemark({"run", "--input=/dev/null", "--restore=/no/such/chk-1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--restore=/no/such/chk-1: no such checkpoint (it does not exist)"),
            std::string::npos)
      << r.err;
}

TEST(CliCheckpoint, IncrementalCheckpointsNeedACheckpointDirectory) {
  CliRun r = RunTidemark({"run", "--input=/dev/null", "--incremental-checkpoints"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--incremental-checkpoints needs --checkpoint-dir"), std::string::npos)
      << r.err;
}

TEST(CliCheckpoint, UnalignedCheckpointsNeedACheckpointDirectory) {
  CliRun r = RunTidemark({"run", "--input=/dev/null", "--unaligned-checkpoints"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--unaligned-checkpoints needs --checkpoint-dir"), std::string::npos)
      << r.err;
}

TEST(CliCheckpoint, FlagsAreChecked) {
  CliRun r = RunTidemark({"run", "--input=/dev/null", "--restore=latest"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--restore=latest needs --checkpoint-dir"), std::string::npos) << r.err;
  r = RunTidemark({"run", "--input=/dev/null", "--checkpoint-interval=1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("needs --checkpoint-dir"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tidemark::testing
