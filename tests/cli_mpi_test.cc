// Jobs across MPI ranks, run under `mpirun -n 2, 3, 4` on this machine
// (loopback / shared memory), against the same jobs in one process:
//   * the seed scenarios S1-S8 through the `tidemark` binary: exactly the
//     single-process output (each output stream in its order);
//   * three inputs on three ranks: the valve of a window subtask takes its
//     channels from sources on other ranks with the local semantics, and the
//     trace and the timeline name every channel's rank;
//   * a sample of the differential cases (mpi/mpi_job.cc): the reference
//     model's results;
//   * backpressure across ranks: a blocked consumer stops its producer on
//     another rank with a bounded number of batches in flight;
//   * failure: an exception on one rank fails the job on every rank, naming
//     the rank, operator and subtask; a rank killed with SIGKILL ends the job
//     on every other rank within 10 s.
#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli_scenario_args.h"
#include "cli_test_util.h"
#include "test_util.h"

namespace tidemark {
namespace {

using testing::CliProcess;
using testing::CliRun;
using ::testing::ContainsRegex;
using testing::Doc001Args;
using testing::Filter;
using ::testing::HasSubstr;
using testing::InputFile;
using ::testing::Not;
using testing::RunTidemark;
using testing::S8Args;
using testing::S8Lines;
using testing::TempPath;
using testing::VcLines;
using testing::WriteFile;

using namespace std::chrono_literals;

// mpirun's own arguments: oversubscribed (2 cores, up to 4 ranks), as root
// allowed explicitly, and shared memory between the ranks (one machine),
// copied through the shared segment (cross-memory attach needs ptrace rights
// a container may not give).
std::vector<std::string> MpirunArgs(int ranks) {
  std::vector<std::string> a = {"--oversubscribe",
                                "--mca",
                                "btl",
                                "self,vader",
                                "--mca",
                                "btl_vader_single_copy_mechanism",
                                "none"};
  if (geteuid() == 0) a.push_back("--allow-run-as-root");
  a.push_back("-n");
  a.push_back(std::to_string(ranks));
  return a;
}

// What a run of mpirun gave.
struct MpiRun {
  int exit_code = -1;
  std::string out, err;
  double seconds = 0;
  std::vector<std::string> OutLines() const {
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    return lines;
  }
};
// Runs mpirun with the arguments `all` to the end (at most `limit`).
MpiRun RunMpirun(const std::vector<std::string>& all, std::chrono::seconds limit) {
  const auto t0 = std::chrono::steady_clock::now();
  CliProcess p(TIDEMARK_MPIEXEC, all, CliProcess::kStdinClosed);
  MpiRun r;
  r.exit_code = p.Wait(limit);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.out = p.out();
  r.err = p.err();
  return r;
}

// `mpirun -n ranks program args...`.
MpiRun RunMpi(int ranks, const std::string& program, const std::vector<std::string>& args,
              std::chrono::seconds limit = 120s) {
  std::vector<std::string> all = MpirunArgs(ranks);
  all.push_back(program);
  all.insert(all.end(), args.begin(), args.end());
  return RunMpirun(all, limit);
}

// mpirun with each rank's own command line (`-n 1 program args0 : -n 1
// program args1 ...`), to the end (at most `limit`).
MpiRun RunMpiEach(const std::string& program, const std::vector<std::vector<std::string>>& per_rank,
                  std::chrono::seconds limit = 120s) {
  std::vector<std::string> all = MpirunArgs(1);
  for (size_t i = 0; i < per_rank.size(); ++i) {
    if (i > 0) all.insert(all.end(), {":", "-n", "1"});
    all.push_back(program);
    all.insert(all.end(), per_rank[i].begin(), per_rank[i].end());
  }
  return RunMpirun(all, limit);
}

// --- the seed scenarios (the command lines of cli_test.cc) ---

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::map<std::string, std::vector<std::string>> SeedScenarios() {
  std::map<std::string, std::vector<std::string>> s;
  s["S1"] = {"run",
             "--input=" + InputFile("mpi_s1.txt", {"0001,1538359882000", "0001,1538359886000",
                                                   "0001,1538359892000", "0001,1538359893000",
                                                   "0001,1538359894000", "0001,1538359896000",
                                                   "0001,1538359897000", "0001,1538359899000",
                                                   "0001,1538359891000", "0001,1538359903000"}),
             "--fields=key,ts",
             "--watermarks=lag:10s",
             "--watermark-interval=per-record",
             "--window=tumbling:3s",
             "--aggregate=list",
             "--timezone=Asia/Shanghai",
             "--parallelism=2"};
  std::vector<std::string> s2;
  for (int t : {22, 25, 28, 30, 31, 35, 38, 40, 51, 88, 85, 87, 90, 100, 89})
    s2.push_back(absl::StrCat("0001 ", 1569895860000 + t * 1000));
  s["S2"] = {"run",
             "--input=" + InputFile("mpi_s2.txt", s2),
             "--delimiter= ",
             "--fields=key,ts",
             "--watermarks=lag:10s",
             "--watermark-interval=per-record",
             "--window=tumbling:10s",
             "--aggregate=list",
             "--timezone=Asia/Shanghai",
             "--parallelism=2"};
  s["S3a"] = Doc001Args(InputFile("mpi_s3a.txt", VcLines({1, 2, 3, 5, 6, 9})), "tumbling:5s");
  s["S3b"] = Doc001Args(InputFile("mpi_s3b.txt", VcLines({1, 2, 3, 5, 1, 2, 9})), "tumbling:5s");
  s["S4"] =
      Doc001Args(InputFile("mpi_s4.txt", VcLines({1, 2, 3, 8, 1, 2, 3, 9, 1, 2})), "tumbling:5s");
  s["S4"].push_back("--allowed-lateness=2s");
  s["S4"].push_back("--late=side");
  s["S5"] = Doc001Args(InputFile("mpi_s5.txt", VcLines({1, 8, 12})), "sliding:6s,2s");
  s["S6"] = Doc001Args(InputFile("mpi_s6.txt", VcLines({2, 7, 14})), "session:5s");
  s["S7"] =
      Doc001Args(InputFile("mpi_s7.txt", VcLines({1, 2, 12})), "tumbling:5s", "punctuated:2s");
  s["S8a"] = S8Args(
      InputFile("mpi_s8a.txt", S8Lines({"01", "02", "03", "04", "05", "04.989", "08", "10"})),
      "0s");
  s["S8b"] = S8Args(InputFile("mpi_s8b.txt", S8Lines({"01", "02", "03", "04", "05", "04.989", "08",
                                                      "04.999", "10", "04.123", "12"})),
                    "2s");
  // With the summary, which must count the same on every rank count.
  for (auto& [name, args] : s) std::erase(args, std::string("--summary=false"));
  return s;
}

TEST(MpiSeedScenarios, EveryScenarioGivesTheSingleProcessResultsOnTwoThreeAndFourRanks) {
  for (const auto& [name, args] : SeedScenarios()) {
    const CliRun one = RunTidemark(args);
    ASSERT_EQ(one.exit_code, 0) << name << ": " << one.err;
    ASSERT_FALSE(one.OutLines().empty()) << name;
    for (int ranks : {2, 3, 4}) {
      std::vector<std::string> run_args = args;
      MpiRun many = RunMpi(ranks, TIDEMARK_BINARY, run_args);
      ASSERT_EQ(many.exit_code, 0) << name << " on " << ranks << " ranks: " << many.err;
      // Each output stream (results, late side output) in its order; the
      // summary (stderr, from rank 0 only) counts the same.
      // ("Side> ", or "Side:<subtask>> " above parallelism 1.)
      EXPECT_EQ(Filter(many.OutLines(), "Side", false), Filter(one.OutLines(), "Side", false))
          << name << " on " << ranks << " ranks";
      EXPECT_EQ(Filter(many.OutLines(), "Side", true), Filter(one.OutLines(), "Side", true))
          << name << " on " << ranks << " ranks";
      EXPECT_EQ(Filter(Lines(many.err), "tidemark:", true),
                Filter(Lines(one.err), "tidemark:", true))
          << name << " on " << ranks << " ranks";
    }
  }
}

// --- three inputs on three ranks: alignment over the network ---

int64_t Field(const std::string& line, const std::string& name) {
  const size_t at = line.find("\"" + name + "\":");
  if (at == std::string::npos) return INT64_MIN;
  std::string rest = line.substr(at + name.size() + 3);
  int64_t v = 0;
  if (!absl::SimpleAtoi(rest.substr(0, rest.find_first_of(",}")), &v)) return INT64_MIN;
  return v;
}

TEST(MpiAlignment, WindowSubtasksTakeTheMinimumOverChannelsFromOtherRanks) {
  const std::string a = InputFile(
      "mpi_al_a.txt", {"k1,1000", "#watermark 6000", "k2,7000", "#watermark 20000", "k3,21000"});
  const std::string b = InputFile(
      "mpi_al_b.txt",
      {"k2,2000", "#watermark 3000", "k1,4000", "#watermark 5500", "k3,9000", "#watermark 12000"});
  const std::string c = InputFile("mpi_al_c.txt", {"k3,500", "#watermark 7000", "k1,8000"});
  const std::string timeline = TempPath("mpi_timeline.html");
  std::vector<std::string> args = {"run",
                                   "--input=" + a,
                                   "--input=" + b,
                                   "--input=" + c,
                                   "--fields=key,ts",
                                   "--watermarks=marker",
                                   "--window=tumbling:5s",
                                   "--aggregate=count",
                                   "--output=jsonl",
                                   "--trace=watermarks",
                                   "--parallelism=3",
                                   "--timeline=" + timeline};
  const CliRun one = RunTidemark(args);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  MpiRun many = RunMpi(3, TIDEMARK_BINARY, args);
  ASSERT_EQ(many.exit_code, 0) << many.err;

  // The window results: those of one process.  (Which watermark fired a
  // window depends on how fast each file is read, in one process as across
  // ranks: the key, window and aggregate do not.)
  auto results = [](const std::vector<std::string>& lines) {
    std::multiset<std::string> out;
    for (const auto& l : lines) {
      if (!absl::StrContains(l, "\"kind\":\"window\"")) continue;
      out.insert(l.substr(0, l.find(",\"firing\"")));
    }
    return out;
  };
  EXPECT_EQ(results(many.OutLines()), results(one.OutLines()));
  EXPECT_EQ(results(one.OutLines()).size(), 7u);

  // Per window subtask, in its own order (each rank prints its subtasks'
  // trace lines in order): the aligned watermark is the minimum over the
  // channels, never goes back, and every channel c comes from rank c (source
  // subtask c) to the subtask's own rank (subtask s on rank s).
  std::map<int64_t, std::map<int64_t, int64_t>> channels;  // subtask -> channel -> watermark
  std::map<int64_t, int64_t> aligned;
  int checked = 0;
  std::set<std::pair<int64_t, int64_t>> cross_rank;  // (channel rank, subtask rank) seen
  for (const std::string& line : many.OutLines()) {
    if (!absl::StrContains(line, "\"kind\":\"watermark\"")) continue;
    const int64_t s = Field(line, "subtask"), ch = Field(line, "channel");
    EXPECT_EQ(Field(line, "rank"), s) << line;
    EXPECT_EQ(Field(line, "channel_rank"), ch) << line;
    cross_rank.insert({ch, s});
    channels[s][ch] = Field(line, "channel_watermark");
    int64_t min = INT64_MAX;
    for (auto& [k, w] : channels[s]) min = std::min(min, w);
    if (channels[s].size() < 3) min = INT64_MIN;  // a channel still holds MIN
    EXPECT_EQ(Field(line, "aligned"), min) << line;
    if (aligned.count(s)) EXPECT_GE(Field(line, "aligned"), aligned[s]) << line;
    aligned[s] = Field(line, "aligned");
    ++checked;
  }
  EXPECT_GE(checked, 3 * 3 * 2);
  // Every window subtask heard from every source rank, its own and the others.
  EXPECT_EQ(cross_rank.size(), 9u);

  // The timeline (written by rank 0 with every rank's events) names the ranks.
  const std::string page = testing::ReadFile(timeline);
  for (int s = 0; s < 3; ++s) {
    EXPECT_THAT(page, HasSubstr(absl::StrCat("window subtask ", s, " (rank ", s, ")")));
    EXPECT_THAT(page, HasSubstr(absl::StrCat("<title>source subtask ", s, " (rank ", s, ")")));
  }
  EXPECT_THAT(page, HasSubstr("input channel 2 from rank 2"));
}

TEST(MpiAlignment, TextTraceNamesTheRanksAndOutputPerRankWritesEachRanksResults) {
  const std::string a = InputFile("mpi_tr_a.txt", {"k1,1000", "k2,7000", "k3,21000"});
  const std::string b = InputFile("mpi_tr_b.txt", {"k2,2000", "k1,4000", "k3,9000"});
  const std::string prefix = TempPath("mpi_per_rank");
  MpiRun many = RunMpi(2, TIDEMARK_BINARY,
                       {"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                        "--window=tumbling:5s", "--aggregate=count", "--trace=watermarks",
                        "--parallelism=2", "--output-per-rank=" + prefix});
  ASSERT_EQ(many.exit_code, 0) << many.err;
  // Each rank's lines (its subtasks' trace, its window subtask's results) in
  // its file: the trace names the ranks.
  std::vector<std::string> files = {testing::ReadFile(prefix + ".0"),
                                    testing::ReadFile(prefix + ".1")};
  EXPECT_THAT(files[1], HasSubstr("[watermark] window subtask 1 (rank 1) channel 0 (from rank 0)"));
  EXPECT_THAT(files[0], HasSubstr("[watermark] window subtask 0 (rank 0) channel 1 (from rank 1)"));
  EXPECT_THAT(files[1], HasSubstr("[watermark] source subtask 1 (rank 1) emits"));
  // The results: each rank's window subtask's; together those of one process.
  const CliRun one = RunTidemark({"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                                  "--window=tumbling:5s", "--aggregate=count", "--parallelism=2"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  std::multiset<std::string> got;
  for (int r = 0; r < 2; ++r) {
    for (absl::string_view l : absl::StrSplit(files[r], '\n', absl::SkipEmpty())) {
      if (absl::StartsWith(l, "[watermark]") || absl::StartsWith(l, "key:")) continue;
      // Subtask s runs on rank s: its lines start "s+1> ".
      EXPECT_TRUE(absl::StartsWith(l, absl::StrCat(r + 1, "> "))) << l;
      got.insert(std::string(l));
    }
  }
  std::vector<std::string> want = one.OutLines();
  EXPECT_EQ(got, std::multiset<std::string>(want.begin(), want.end()));
  EXPECT_TRUE(many.out.empty()) << many.out;
}

// Generalized watermarks in the text trace name the rank too.
TEST(MpiAlignment, TextTraceOfGeneralizedWatermarksNamesTheRanks) {
  const std::string a = InputFile("mpi_gtr_a.txt", {"k1,1000", "k2,2000"});
  const std::string b = InputFile("mpi_gtr_b.txt", {"k1,1500", "k2,2500"});
  MpiRun r = RunMpi(2, TIDEMARK_BINARY,
                    {"run", "--input=" + a, "--input=" + b, "--fields=key,ts", "--parallelism=2",
                     "--backlog-watermark", "--trace=watermarks"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int s = 0; s < 2; ++s) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[watermark] window subtask ", s, " (rank ", s,
                                              ") combined (channel 0) backlog=")));
  }
}

// Alignment is job-wide (docs/distribution.md): source subtask 0 runs on rank
// 0 and source subtask 1 on rank 1, each rank's coordinator holding only its
// own; the first pauses while it is more than the drift ahead of the second,
// which only rank 1 knows, and resumes when the second catches up.  The inputs
// are FIFOs the test writes, so each step waits for what the previous one
// caused (as CliAlignment's test in one process).
TEST(MpiAlignment, ASourceAheadOfASourceOnAnotherRankPausesUntilItCatchesUp) {
  testing::FifoInputs inputs("mpi_align", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> all = MpirunArgs(2);
  for (const std::string& a :
       {std::string(TIDEMARK_BINARY), std::string("run"), std::string("--fields=key,ts"),
        std::string("--parallelism=2"), std::string("--watermarks=bounded:0s"),
        std::string("--watermark-interval=per-record"), std::string("--window=tumbling:1s"),
        std::string("--alignment-max-drift=1s"), std::string("--alignment-update-interval=10ms"),
        std::string("--trace=watermarks")})
    all.push_back(a);
  for (const std::string& a : inputs.Args()) all.push_back(a);
  CliProcess p(TIDEMARK_MPIEXEC, all, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  auto write_line = [&](int input, const std::string& line) {
    ASSERT_TRUE(inputs.Write(static_cast<size_t>(input), line));
  };
  write_line(0, "a,100");
  write_line(1, "b,100");
  ASSERT_TRUE(p.WaitForOut("source subtask 1 (rank 1) emits", 60s)) << p.out() << p.err();
  ASSERT_TRUE(p.WaitForOut("source subtask 0 (rank 0) emits", 60s)) << p.out() << p.err();
  // Input 0 jumps to 5 s: 4.999 > 0.099 + 1 s, and 0.099 is rank 1's.
  write_line(0, "a,5000");
  ASSERT_TRUE(p.WaitForOut("[alignment] source subtask 0 (rank 0) pauses", 60s))
      << p.out() << p.err();
  EXPECT_THAT(p.out(), ::testing::Not(HasSubstr("[alignment] source subtask 0 (rank 0) resumes")));
  // Input 1 catches up to 4.5 s on rank 1: the limit becomes 5.499 s on rank 0.
  write_line(1, "b,4500");
  ASSERT_TRUE(p.WaitForOut("[alignment] source subtask 0 (rank 0) resumes", 60s))
      << p.out() << p.err();
  inputs.Close();
  EXPECT_EQ(p.Wait(60s), 0) << p.err();
}

// Every rank prints a line per record and per watermark (20 000 records per
// rank): mpirun reads each rank's pipe in chunks of its own size and copies
// them out as they come, which tore about one line in 150 mid-line when every
// rank printed its own; the other ranks' lines now reach rank 0 as MPI
// messages and it prints them whole, in each rank's order.
TEST(MpiTrace, EveryLineFromEveryRankComesOutWhole) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 20000; ++i) {
    a.push_back(absl::StrCat("k", i % 37, ",", i * 10));
    b.push_back(absl::StrCat("k", i % 41, ",", i * 10 + 1));
  }
  const std::string in0 = InputFile("mpi_whole_0.txt", a);
  const std::string in1 = InputFile("mpi_whole_1.txt", b);
  MpiRun r = RunMpi(2, TIDEMARK_BINARY,
                    {"run", "--input=" + in0, "--input=" + in1, "--fields=key,ts",
                     "--window=tumbling:1s", "--aggregate=count", "--trace=watermarks",
                     "--parallelism=2", "--watermark-interval=per-record"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex whole(
      "\\[watermark\\] (window subtask [01] \\(rank [01]\\) channel [01] \\(from rank [01]\\) -> "
      ".*|source subtask [01] \\(rank [01]\\) emits (-?[0-9]+|MAX) \\(.*\\))|"
      "key:k[0-9]+,eventtime:\\[[0-9]+\\|[-0-9: .]+\\],currentMaxTimestamp:\\[[0-9]+\\|[-0-9: "
      ".]+\\],watermark:\\[-?[0-9]+\\|[-0-9: .]+\\]|[12]> .*|window:.*");
  int torn = 0, records = 0, from_rank1 = 0;
  std::string first_torn;
  for (const std::string& line : r.OutLines()) {
    if (!std::regex_match(line, whole)) {
      if (torn++ == 0) first_torn = line;
    }
    if (absl::StartsWith(line, "key:")) ++records;
    if (absl::StrContains(line, "source subtask 1 (rank 1) emits")) ++from_rank1;
  }
  EXPECT_EQ(torn, 0) << "first: " << first_torn;
  EXPECT_EQ(records, 40000);
  EXPECT_GT(from_rank1, 1000);
}

// --- differential cases and the API ---

TEST(MpiDifferential, ASampleOfCasesGivesTheModelsResults) {
  for (int ranks : {2, 3, 4}) {
    for (const char* kind : {"tumbling", "sliding", "session"}) {
      MpiRun r = RunMpi(ranks, TIDEMARK_MPI_JOB, {"differential", kind, "1", "12"});
      EXPECT_EQ(r.exit_code, 0) << kind << " on " << ranks << " ranks:\n" << r.out << r.err;
      EXPECT_THAT(r.out, HasSubstr("cases 12 failed 0")) << kind << " on " << ranks;
    }
  }
}

TEST(MpiRecords, AUserTypeTravelsWithItsStateCodecAndATypeWithoutOneIsAnError) {
  MpiRun ok = RunMpi(3, TIDEMARK_MPI_JOB, {"usertype"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("status OK"));
  EXPECT_THAT(ok.out, HasSubstr("sums OK"));
  EXPECT_THAT(ok.out, ::testing::Not(HasSubstr("remote records 0\n")));
  MpiRun bad = RunMpi(2, TIDEMARK_MPI_JOB, {"nocodec"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.out, HasSubstr("INVALID_ARGUMENT: records of type tidemark::{anonymous}::Opaque"))
      << bad.out << bad.err;
  EXPECT_THAT(bad.out, HasSubstr("has no tidemark::StateCodec"));
}

// Generalized watermarks (docs/generalized-watermarks.md) cross ranks with
// their declarations: a bool backlog combined with OR and a long progress
// combined with MAX, from sources on every rank to functions on every rank.
TEST(MpiGeneralizedWatermarks, BacklogOrAndProgressMaxAcrossRanks) {
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB, {"generalized"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("status OK"));
  EXPECT_THAT(r.out, HasSubstr("generalized OK")) << r.out << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("remote records 0\n")));
}

TEST(MpiBackpressure, ABlockedConsumerStopsItsProducerOnAnotherRank) {
  const std::string release = TempPath("mpi_release");
  std::filesystem::remove(release);
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB, {"backpressure", release});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<std::string, int64_t> v;
  for (const auto& line : r.OutLines()) {
    std::vector<std::string> kv = absl::StrSplit(line, ' ');
    int64_t x;
    if (kv.size() == 2 && absl::SimpleAtoi(kv[1], &x)) v[kv[0]] = x;
  }
  // While the sink was blocked the generator stopped after a bounded number
  // of records: 64-record batches, channel capacity 4: the batch being
  // filled, the local queue, the credits in flight and the remote queue, and
  // the one the sink holds, far below the 200 000 it would emit unchecked.
  ASSERT_TRUE(v.count("emitted_while_blocked")) << r.out;
  EXPECT_GT(v["emitted_while_blocked"], 0);
  EXPECT_LE(v["emitted_while_blocked"], 64 * (1 + 4 + 4 + 4 + 2)) << r.out;
  // Credits: never more batches of the channel in flight than its capacity.
  EXPECT_GE(v["max_in_flight_batches"], 1);
  EXPECT_LE(v["max_in_flight_batches"], 4);
  // And nothing was lost once the sink went on.
  EXPECT_EQ(v["received"], 200000);
  EXPECT_EQ(v["records"], 200000);
}

TEST(MpiFailure, AnExceptionOnOneRankFailsTheJobOnEveryRankNamingRankOperatorAndSubtask) {
  MpiRun r = RunMpi(3, TIDEMARK_MPI_JOB, {"fail", "1"}, 60s);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.seconds, 30) << r.err;  // not the 60 s of a hang (mpirun start-up included)
  // Every rank's job failed with rank 1's error.
  for (int rank = 0; rank < 3; ++rank) {
    const std::string want = absl::StrCat("status rank ", rank, ": ");
    const size_t at = r.err.find(want);
    ASSERT_NE(at, std::string::npos) << r.err;
    const std::string line = r.err.substr(at, r.err.find('\n', at) - at);
    EXPECT_THAT(line, HasSubstr("rank 1: ")) << line;
    EXPECT_THAT(line, HasSubstr("Exploding map")) << line;
    EXPECT_THAT(line, HasSubstr("subtask 1 of 3")) << line;
    EXPECT_THAT(line, HasSubstr("boom on purpose")) << line;
  }
}

// --- restarts across ranks (docs/distribution.md, "Restarts") ---

// Every rank's "restart rank R ..." line of `mpi_job restart` (by rank).
std::map<int, std::string> RestartLines(const std::string& err) {
  std::map<int, std::string> out;
  for (const std::string& line : Lines(err)) {
    int rank;
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "restart rank ")) continue;
    const size_t sp = rest.find(' ');
    if (sp != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, sp), &rank))
      out[rank] = std::string(rest.substr(sp + 1));
  }
  return out;
}

// The committed output of `mpi_job restart` without failures: every running
// sum of the keys v % 14 over records 0..23999, sorted as CommittedLines.
std::vector<std::string> RestartJobOutput() {
  std::vector<std::string> lines;
  int64_t sums[14] = {};
  for (int64_t v = 0; v < 24'000; ++v) lines.push_back(std::to_string(sums[v % 14] += v));
  std::sort(lines.begin(), lines.end());
  return lines;
}

// A map throws at five records on either rank (one per attempt); every rank
// restarts together, from the checkpoint rank 0 names, and the committed
// output is that of a run without failures.
TEST(MpiRestart, AMapThrowingAtFiveRecordsOnEitherRankRestartsEveryRankToTheFailureFreeOutput) {
  testing::TempDir dir;
  // Five records 2000 to 5000 apart (a checkpoint restored after one failure
  // lies before the next), on rank (record % 2).
  std::mt19937_64 rng(20261203);
  std::vector<std::string> records;
  std::set<int> ranks;
  int64_t at = 1000;
  for (int k = 0; k < 5; ++k) {
    at += 2000 + static_cast<int64_t>(rng() % 3000);
    records.push_back(std::to_string(at));
    ranks.insert(static_cast<int>(at % 2));
  }
  ASSERT_EQ(ranks.size(), 2u) << "the seed puts every failure on one rank";
  ASSERT_LT(at, 24'000) << "the seed puts a failure past the last record";
  MpiRun r = RunMpi(
      2, TIDEMARK_MPI_JOB,
      {"restart", "fixed", dir.Path("out"), dir.Path("chk"), absl::StrJoin(records, ",")}, 120s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::map<int, std::string> lines = RestartLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  for (const auto& [rank, line] : lines) {
    EXPECT_THAT(line, HasSubstr("status OK restarts 5 told 5 failures 5 restored ")) << line;
    EXPECT_THAT(line, HasSubstr(absl::StrCat(" last rank ", records[4].back() % 2,
                                             ": operator 'Flaky map'")))
        << line;
    EXPECT_THAT(line, HasSubstr("injected failure at record " + records[4])) << line;
  }
  // Rank 0 decided: both ranks count the same restarts and causes, and
  // restored the same checkpoint.
  EXPECT_EQ(lines.at(0), lines.at(1));
  std::cout << "rank 0: " << lines.at(0) << "\n";
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(dir.Path("out"), &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), 24'000u);
  EXPECT_TRUE(got == RestartJobOutput());
}

TEST(MpiRestart, WithoutARestartStrategyAFailureEndsBothRanksWithTheCause) {
  testing::TempDir dir;
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB,
                    {"restart", "none", dir.Path("out"), dir.Path("chk"), "3001,7002"}, 60s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::map<int, std::string> lines = RestartLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  for (const auto& [rank, line] : lines) {
    EXPECT_THAT(line, HasSubstr("rank 1: operator 'Flaky map' (subtask 1 of 2) failed: "
                                "injected failure at record 3001"))
        << line;
    EXPECT_THAT(line, HasSubstr("restarts 0 told 0 failures 0")) << line;
  }
}

// failure-rate:2 in a minute: two failures restart (as Flink's keeps 2 + 1
// failure times); the third (on rank 1) ends both ranks.
TEST(MpiRestart, AnExhaustedFailureRateEndsBothRanksSayingWhy) {
  testing::TempDir dir;
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB,
                    {"restart", "rate", dir.Path("out"), dir.Path("chk"), "3001,7002,11003"}, 60s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::map<int, std::string> lines = RestartLines(r.err);
  ASSERT_EQ(lines.size(), 2u) << r.err;
  for (const auto& [rank, line] : lines) {
    EXPECT_THAT(line, HasSubstr("rank 1: operator 'Flaky map' (subtask 1 of 2) failed: "
                                "injected failure at record 11003 (no restart: restart strategy "
                                "failure-rate"))
        << line;
    EXPECT_THAT(line, HasSubstr("restarts 2 told 2 failures 3 restored ")) << line;
  }
  EXPECT_EQ(lines.at(0), lines.at(1));
}

// Through the command line: a bad line fails every attempt; rank 0 says each
// restart once, and the job fails on every rank saying why.
TEST(MpiRestart, TheFlagRestartsEveryRankAndRankZeroSaysEachRestartOnce) {
  const std::string a = InputFile("mpi_restart_a.txt", {"k1,1000", "k2,2000"});
  const std::string b = InputFile("mpi_restart_b.txt", {"k1,1000", "k2,not-a-time"});
  MpiRun r = RunMpi(2, TIDEMARK_BINARY,
                    {"run", "--input=" + a, "--input=" + b, "--fields=key,ts", "--parallelism=2",
                     "--restart-strategy=fixed-delay:2:0ms"},
                    60s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  for (const std::string said :
       {"tidemark: restarting (1): rank 1: ", "tidemark: restarting (2): rank 1: ",
        "(no restart: restart "
        "strategy fixed-delay (2 attempts, delay 0 ms), 2 restarts)"}) {
    std::vector<std::string> parts = absl::StrSplit(r.err, said);
    EXPECT_EQ(parts.size(), 2u) << said << "\n" << r.err;
  }
  EXPECT_THAT(r.err, HasSubstr("mpi_restart_b.txt:2:"));
  EXPECT_THAT(r.err, Not(HasSubstr("restarting (3)")));
}

// Before the job starts the ranks compare what they built: a rank given
// another window (which the plan's text does not show), or restoring another
// checkpoint than rank 0 (its --checkpoint-dir not shared, so "latest" is
// none), fails the job on every rank before any record is read; an error
// only one rank meets (its input file) is said by that rank.
TEST(MpiAgreement, RanksGivenAnotherWindowFailTheJobBeforeItStarts) {
  const std::string a = InputFile("mpi_agree_a.txt", {"k1,1000", "k2,2000"});
  const std::string b = InputFile("mpi_agree_b.txt", {"k1,1500", "k2,2500"});
  const std::vector<std::string> common = {"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                                           "--parallelism=2"};
  auto with = [&](const std::string& flag) {
    std::vector<std::string> args = common;
    args.push_back(flag);
    return args;
  };
  MpiRun same = RunMpiEach(TIDEMARK_BINARY,
                           {with("--window=tumbling:1s"), with("--window=tumbling:1s")}, 60s);
  EXPECT_EQ(same.exit_code, 0) << same.err;
  MpiRun other = RunMpiEach(TIDEMARK_BINARY,
                            {with("--window=tumbling:1s"), with("--window=tumbling:2s")}, 60s);
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_THAT(other.err,
              HasSubstr("tidemark: rank 0: the 2 ranks built different jobs (their plans, "
                        "placements, restored checkpoints or settings differ)"));
  EXPECT_EQ(other.out, "");
  MpiRun lateness = RunMpiEach(TIDEMARK_BINARY,
                               {with("--allowed-lateness=1s"), with("--allowed-lateness=2s")}, 60s);
  EXPECT_EQ(lateness.exit_code, 2) << lateness.err;
  EXPECT_THAT(lateness.err, HasSubstr("built different jobs"));
}

// A command-line error every rank meets (an unknown flag, a flag without
// the one it needs, an unknown command) is said once, by rank 0, as the
// job's own errors are; every rank exits 2.  Before, each rank printed it.
// With a command line per rank, each rank says its own.
TEST(MpiAgreement, ACommandLineErrorIsSaidOnceByRankZero) {
  auto count = [](const std::string& text, const std::string& what) {
    std::vector<std::string> parts = absl::StrSplit(text, what);
    return parts.size() - 1;
  };
  MpiRun unknown = RunMpi(2, TIDEMARK_BINARY, {"run", "--no-such-flag=1"}, 60s);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  EXPECT_EQ(count(unknown.err, "tidemark: unknown flag --no-such-flag"), 1u) << unknown.err;
  MpiRun unpartnered =
      RunMpi(2, TIDEMARK_BINARY, {"run", "--input=x", "--checkpoint-timeout=5s"}, 60s);
  EXPECT_EQ(unpartnered.exit_code, 2) << unpartnered.err;
  EXPECT_EQ(count(unpartnered.err, "tidemark: --checkpoint-timeout needs --checkpoint-dir"), 1u)
      << unpartnered.err;
  MpiRun command = RunMpi(2, TIDEMARK_BINARY, {"rnu"}, 60s);
  EXPECT_EQ(command.exit_code, 2) << command.err;
  EXPECT_EQ(count(command.err, "tidemark: unknown command 'rnu'"), 1u) << command.err;
  // A command line of each rank's own (mpirun's `:`): only rank 1's is
  // wrong, and rank 1 says so, naming itself.
  const std::string a = InputFile("mpi_flag_error.txt", {"k1,1000", "k2,2000"});
  MpiRun one = RunMpiEach(TIDEMARK_BINARY,
                          {{"run", "--input=" + a, "--fields=key,ts"},
                           {"run", "--input=" + a, "--fields=key,ts", "--no-such-flag=1"}},
                          90s);
  EXPECT_NE(one.exit_code, 0);
  EXPECT_EQ(count(one.err, "tidemark: rank 1: unknown flag --no-such-flag"), 1u) << one.err;
}

TEST(MpiAgreement, ARankRestoringAnotherCheckpointFailsTheJobNamingRankZerosCheckpoint) {
  testing::TempDir dir;
  const std::string a = InputFile("mpi_agree_restore_a.txt", {"k1,1000", "k2,2000"});
  const std::string b = InputFile("mpi_agree_restore_b.txt", {"k1,1500", "k2,2500"});
  auto args = [&](const std::string& chk, bool restore) {
    std::vector<std::string> v = {"run",
                                  "--input=" + a,
                                  "--input=" + b,
                                  "--fields=key,ts",
                                  "--parallelism=2",
                                  "--checkpoint-dir=" + chk,
                                  "--checkpoint-interval=1h"};  // only the final checkpoint
    if (restore) v.push_back("--restore=latest");
    return v;
  };
  MpiRun first = RunMpi(2, TIDEMARK_BINARY, args(dir.Path("chk"), false), 60s);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(std::filesystem::exists(dir.Path("chk/chk-1")));
  std::filesystem::create_directories(dir.Path("empty"));
  // Printing to standard output, one process chains print to the window:
  // the checkpoint of two ranks does not restore there, and the error says why.
  std::vector<std::string> one = args(dir.Path("chk"), false);
  one.push_back("--restore=" + dir.Path("chk/chk-1"));
  CliRun single = RunTidemark(one);
  EXPECT_EQ(single.exit_code, 2) << single.err;
  EXPECT_THAT(single.err, HasSubstr("it was taken of another job (printing to standard output, the "
                                    "command line prints from a task of its own under mpirun"));
  MpiRun both = RunMpi(2, TIDEMARK_BINARY, args(dir.Path("chk"), true), 60s);
  EXPECT_EQ(both.exit_code, 0) << both.err;
  MpiRun split = RunMpiEach(TIDEMARK_BINARY,
                            {args(dir.Path("chk"), true), args(dir.Path("empty"), true)}, 60s);
  EXPECT_EQ(split.exit_code, 2) << split.err;
  EXPECT_THAT(split.err, HasSubstr("built different jobs"));
  // (the run that restored both wrote the final checkpoint 2)
  EXPECT_THAT(split.err, ContainsRegex("\\(this rank restores checkpoint 2 of /.*/chk/chk-2\\)"));
  EXPECT_EQ(split.out, "");
}

TEST(MpiAgreement, AnInputFileOnlyOneRankCannotOpenIsSaidByThatRank) {
  const std::string a = InputFile("mpi_agree_input.txt", {"k1,1000", "k2,2000"});
  const std::vector<std::string> good = {"run", "--input=" + a, "--fields=key,ts"};
  const std::vector<std::string> bad = {"run", "--input=/nonexistent/b.csv", "--fields=key,ts"};
  MpiRun r = RunMpiEach(TIDEMARK_BINARY, {good, bad}, 90s);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("tidemark: rank 1: cannot open input file /nonexistent/b.csv: No "
                               "such file or directory"));
}

// Unaligned checkpoints are one process only (docs/checkpoints.md): under
// mpirun the flag is refused before the job starts, saying why.
TEST(MpiUnaligned, UnalignedCheckpointsAreRefusedAcrossRanks) {
  const std::string a = InputFile("mpi_unaligned.txt", {"k1,1000", "k2,2000"});
  MpiRun r = RunMpi(2, TIDEMARK_BINARY,
                    {"run", "--input=" + a, "--fields=key,ts", "--parallelism=2",
                     "--checkpoint-dir=" + ::testing::TempDir() + "/mpi_unaligned_chk",
                     "--unaligned-checkpoints"},
                    60s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--unaligned-checkpoints is not supported across MPI ranks"));
}

// Stop-with-savepoint with drain across ranks: rank 0's coordinator ends
// the input of every source (on any rank); the savepoint holds the final
// state and every rank's job ends OK with the committed output of the
// records read, exactly once.  A stop without drain before it, whose
// savepoint cannot be written, fails and the job goes on (its sources read
// on: no record is lost).
TEST(MpiSavepoint, StopWithDrainEndsEveryRankWithTheSavepointAndExactOutput) {
  testing::TempDir dir;
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB,
                    {"drain", dir.Path("out"), dir.Path("chk"), dir.Path("sp")}, 120s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("nodrain ")) << r.err;
  EXPECT_THAT(r.err, Not(HasSubstr("nodrain OK"))) << r.err;
  EXPECT_THAT(r.err, HasSubstr(dir.Path("sp") + "-file")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("drain rank 1 status OK savepoint -")) << r.err;
  const size_t at = r.err.find("drain rank 0 status OK savepoint ");
  ASSERT_NE(at, std::string::npos) << r.err;
  const size_t from = at + std::string("drain rank 0 status OK savepoint ").size();
  const std::string savepoint = r.err.substr(from, r.err.find('\n', from) - from);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(savepoint) / "_manifest")) << savepoint;
  // The records read were a prefix 0..n-1: every running sum of it, once.
  int hidden = 0;
  const std::vector<std::string> got = testing::CommittedLines(dir.Path("out"), &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_GT(got.size(), 1000u);
  std::vector<std::string> want;
  int64_t sums[14] = {};
  for (int64_t v = 0; v < static_cast<int64_t>(got.size()); ++v)
    want.push_back(std::to_string(sums[v % 14] += v));
  std::sort(want.begin(), want.end());
  EXPECT_TRUE(got == want) << got.size() << " lines";
}

// --- stop-with-savepoint without drain across ranks (docs/distribution.md) ---

// The committed "key,window start,sum" lines of `mpi_job stop` / `resume`
// run to the end without a stop: records 0..39999, key v % 14, tumbling
// windows of 500 (event time = the record), sorted as CommittedLines.
std::vector<std::string> WindowJobOutput() {
  std::map<std::pair<int64_t, int64_t>, int64_t> sums;
  for (int64_t v = 0; v < 40'000; ++v) sums[{v % 14, v / 500 * 500}] += v;
  std::vector<std::string> lines;
  for (const auto& [kw, sum] : sums)
    lines.push_back(absl::StrCat(kw.first, ",", kw.second, ",", sum));
  std::sort(lines.begin(), lines.end());
  return lines;
}

// `mpi_job stop` on 2 ranks; returns the savepoint's directory (empty on
// failure, with the test failed) and the committed lines in *committed.
std::string StopOnTwoRanks(const testing::TempDir& dir, const std::string& out,
                           std::vector<std::string>* committed) {
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB, {"stop", out, dir.Path("chk"), dir.Path("sp")}, 120s);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string key = "stop rank 0 status OK savepoint ";
  const size_t at = r.err.find(key);
  EXPECT_NE(at, std::string::npos) << r.err;
  if (at == std::string::npos) return "";
  const size_t from = at + key.size();
  const std::string savepoint = r.err.substr(from, r.err.find(' ', from) - from);
  // Both ranks ended OK, stopped with the same savepoint (rank 1 heard it
  // from rank 0), not cancelled.
  EXPECT_THAT(r.err, HasSubstr(absl::StrCat(key, savepoint, " stopped ", savepoint, "\n")));
  EXPECT_THAT(
      r.err, HasSubstr(absl::StrCat("stop rank 1 status OK savepoint - stopped ", savepoint, "\n")))
      << r.err;
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(savepoint) / "_manifest")) << savepoint;
  int hidden = 0;
  *committed = testing::CommittedLines(out, &hidden);
  return savepoint;
}

// Stopped without drain on 2 ranks: the savepoint is complete on every rank
// (the windows of both ranks' subtasks), no MAX watermark fired the open
// windows (every committed window has its full sum, and some are missing),
// and both ranks end OK.  Restored on 2 ranks at parallelism 2 and on 1
// rank at parallelism 3, the committed output equals a run without the stop.
TEST(MpiSavepoint,
     StopWithoutDrainOnTwoRanksThenRestoreOnTwoAndOneRankGivesTheUninterruptedOutput) {
  testing::TempDir dir;
  const std::vector<std::string> expected = WindowJobOutput();
  std::vector<std::string> before;
  const std::string savepoint = StopOnTwoRanks(dir, dir.Path("out"), &before);
  ASSERT_FALSE(savepoint.empty());
  ASSERT_FALSE(before.empty());
  EXPECT_LT(before.size(), expected.size());
  for (const std::string& line : before)
    EXPECT_TRUE(std::binary_search(expected.begin(), expected.end(), line))
        << line << ": a window fired before it was complete";
  // The same output directory goes on: once on 2 ranks, once on 1.
  std::filesystem::copy(dir.Path("out"), dir.Path("out1"),
                        std::filesystem::copy_options::recursive);
  for (const auto& [ranks, parallelism, out] :
       {std::tuple{2, 2, dir.Path("out")}, std::tuple{1, 3, dir.Path("out1")}}) {
    MpiRun r = RunMpi(ranks, TIDEMARK_MPI_JOB,
                      {"resume", out, dir.Path(absl::StrCat("chk", ranks)), savepoint,
                       std::to_string(parallelism)},
                      120s);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    for (int rank = 0; rank < ranks; ++rank)
      EXPECT_THAT(r.err, HasSubstr(absl::StrCat("resume rank ", rank, " status OK restored ")))
          << r.err;
    int hidden = 0;
    const std::vector<std::string> got = testing::CommittedLines(out, &hidden);
    EXPECT_EQ(hidden, 0);
    EXPECT_EQ(got.size(), expected.size()) << ranks << " ranks";
    EXPECT_TRUE(got == expected) << ranks << " ranks";
  }
}

// A rank whose subtask fails while the savepoint is taken (its source's
// snapshot throws on rank 1): the stop fails at once with the cause (it does
// not wait for its 30 s timeout), every rank's job fails naming rank 1, and
// no savepoint is left.
TEST(MpiSavepoint, ARankFailingDuringStopWithoutDrainFailsTheStopAndEveryRankWithTheCause) {
  testing::TempDir dir;
  MpiRun r = RunMpi(2, TIDEMARK_MPI_JOB, {"stopfail", dir.Path("chk"), dir.Path("sp")}, 60s);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("stopfail ABORTED: savepoint: the job failed before it was "
                               "complete: rank 1: task 'Source: fails-in-snapshot' (subtask 1 of "
                               "2) failed: snapshot failed on purpose"))
      << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_THAT(r.err, HasSubstr(absl::StrCat("stopfail rank ", rank,
                                              " status ABORTED: rank 1: task 'Source: "
                                              "fails-in-snapshot' (subtask 1 of 2) failed: "
                                              "snapshot failed on purpose")))
        << r.err;
  }
  std::error_code ec;
  EXPECT_TRUE(!std::filesystem::exists(dir.Path("sp"), ec) ||
              std::filesystem::is_empty(dir.Path("sp"), ec));
}

// The CLI under mpirun: the launcher forwards SIGUSR1 and SIGUSR2 to every
// rank; rank 0 takes the savepoint (the job goes on), then stops the job
// with one (every rank ends OK, the open windows unfired); the other rank
// says nothing.  Restored on 3 ranks at parallelism 3, the open windows go
// on from the savepoint's counts.
TEST(MpiSavepoint, TheCliTakesASavepointOnSigusr1AndStopsWithoutDrainOnSigusr2UnderMpirun) {
  testing::TempDir dir;
  const std::vector<std::string> job = {"run",
                                        "--input=-",
                                        "--fields=key,ts",
                                        "--aggregate=count",
                                        "--window=tumbling:5s",
                                        "--watermark-interval=per-record",
                                        "--parallelism=2"};
  std::vector<std::string> all = MpirunArgs(2);
  all.push_back(TIDEMARK_BINARY);
  all.insert(all.end(), job.begin(), job.end());
  for (const std::string& a :
       {"--savepoint-dir=" + dir.Path("sp"), std::string("--savepoint-on=SIGUSR1"),
        std::string("--stop-with-savepoint-on=SIGUSR2")})
    all.push_back(a);
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  CliProcess mpirun(TIDEMARK_MPIEXEC, all, in[0]);
  close(in[0]);
  ASSERT_TRUE(mpirun.started());
  // Four keys: window subtasks on both ranks hold state.
  const std::string lines = "a,1000\nb,1000\nc,1000\nd,1000\na,6000\nb,6000\nc,6000\nd,6000\n";
  ASSERT_EQ(write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  for (const char* key : {"<a>", "<b>", "<c>", "<d>"})
    ASSERT_TRUE(mpirun.WaitForOut(absl::StrCat(key, "--count: 1"), 60s)) << mpirun.err();
  ASSERT_EQ(kill(mpirun.pid(), SIGUSR1), 0);
  ASSERT_TRUE(mpirun.WaitForErr(" complete\n", 60s)) << mpirun.err();
  ASSERT_EQ(kill(mpirun.pid(), SIGUSR2), 0);
  const int code = mpirun.Wait(60s);
  close(in[1]);
  ASSERT_NE(code, CliProcess::kTimedOut) << mpirun.err();
  EXPECT_EQ(code, 0) << mpirun.err();
  const std::string err = mpirun.err();
  // Rank 0 alone speaks: one of each line, no failure from rank 1.
  for (const std::string said :
       {"tidemark: SIGUSR1: taking a savepoint into ", "tidemark: SIGUSR2: stopping the job"}) {
    std::vector<std::string> parts = absl::StrSplit(err, said);
    EXPECT_EQ(parts.size(), 2u) << said << "\n" << err;
  }
  EXPECT_THAT(err, Not(HasSubstr("savepoint failed"))) << err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(err, m, std::regex("tidemark: savepoint (\\S+) complete; the job stops")))
      << err;
  const std::string savepoint = m[1];
  EXPECT_THAT(err, HasSubstr(", stopped with savepoint " + savepoint)) << err;
  // The summary names the savepoints as one process's does (the checkpoint
  // summary crossed the ranks without them).
  std::smatch first;
  ASSERT_TRUE(std::regex_search(err, first, std::regex("tidemark: savepoint (\\S+) complete\n")))
      << err;
  EXPECT_THAT(err, HasSubstr(", savepoint " + std::string(first[1]))) << err;
  // The windows [5 s, 10 s) did not fire.
  EXPECT_THAT(mpirun.out(), Not(HasSubstr("00:00:05--"))) << mpirun.out();
  // Restored on 3 ranks with the window at parallelism 3 (under mpirun the
  // CLI prints at rank 0, from a print task of its own, so the job differs
  // from one process's, where print is chained to the window: a savepoint
  // of one restores under mpirun, on any number of ranks): [5 s, 10 s)
  // holds each key's record of the savepoint, and a's one more.
  std::vector<std::string> again = MpirunArgs(3);
  again.push_back(TIDEMARK_BINARY);
  again.insert(again.end(), job.begin(), job.end());
  again.back() = "--parallelism=3";
  again.push_back("--restore=" + savepoint);
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  CliProcess restored(TIDEMARK_MPIEXEC, again, in[0]);
  close(in[0]);
  ASSERT_EQ(write(in[1], "a,8000\n", 7), 7);
  close(in[1]);
  ASSERT_EQ(restored.Wait(60s), 0) << restored.err();
  EXPECT_THAT(restored.err(), HasSubstr("(" + savepoint + ")")) << restored.err();
  std::vector<std::string> got;
  for (const std::string& l : Lines(restored.out())) got.push_back(l.substr(l.find("window:")));
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{
                     "window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<a>--count: 2",
                     "window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<b>--count: 1",
                     "window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<c>--count: 1",
                     "window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<d>--count: 1"}))
      << restored.out();
}

TEST(MpiFailure, ARankThatCrashesEndsTheJobOnEveryRankWithinTenSeconds) {
  MpiRun r = RunMpi(3, TIDEMARK_MPI_JOB, {"crash", "2"}, 60s);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, CliProcess::kTimedOut);
  EXPECT_LT(r.seconds, 10) << r.err;
  EXPECT_THAT(r.err, HasSubstr("rank 2")) << r.err;
  EXPECT_THAT(r.err, HasSubstr("signal 11")) << r.err;
}

TEST(MpiFailure, AMalformedLineOnOneRanksInputIsReportedOnceWithRankFileAndLine) {
  const std::string a = InputFile("mpi_bad_a.txt", {"k1,1000", "k2,2000"});
  const std::string b = InputFile("mpi_bad_b.txt", {"k1,1000", "k2,not-a-time"});
  MpiRun r =
      RunMpi(2, TIDEMARK_BINARY,
             {"run", "--input=" + a, "--input=" + b, "--fields=key,ts", "--parallelism=2"}, 60s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tidemark: rank 1: "));
  EXPECT_THAT(r.err, HasSubstr("mpi_bad_b.txt:2:"));
  EXPECT_THAT(r.err, HasSubstr("subtask 1 of 2"));
  // Said once (rank 0 speaks for the job).
  std::vector<std::string> parts = absl::StrSplit(r.err, "tidemark: rank 1: ");
  EXPECT_EQ(parts.size(), 2u) << r.err;
}

// The pids of the processes mpirun started, by rank (their environment says
// OMPI_COMM_WORLD_RANK).
std::map<int, pid_t> RankPids(pid_t mpirun) {
  std::map<int, pid_t> out;
  DIR* d = opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    std::string stat = testing::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
    int ppid;
    if (f.size() < 2 || !absl::SimpleAtoi(f[1], &ppid) || ppid != mpirun) continue;
    const std::string env = testing::ReadFile(absl::StrCat("/proc/", pid, "/environ"));
    for (absl::string_view kv : absl::StrSplit(env, '\0')) {
      int rank;
      if (absl::ConsumePrefix(&kv, "OMPI_COMM_WORLD_RANK=") && absl::SimpleAtoi(kv, &rank))
        out[rank] = pid;
    }
  }
  closedir(d);
  return out;
}

// Whether `pid` has ended (gone, or a zombie waiting for its new parent)
// within `limit`.
bool Gone(pid_t pid, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const std::string stat = testing::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (stat.empty() || (close != std::string::npos && stat.substr(close + 2, 1) == "Z"))
      return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);  // polling /proc
  }
}

// Waits for the launcher `p` started with `ranks` (at most `limit`), as
// CliProcess::Wait does, with one more outcome: kLauncherHung when every rank
// has ended (gone, or a zombie mpirun does not reap) and mpirun still runs
// 15 s later.  Open MPI 4.1's mpirun sometimes does that after a rank is
// SIGKILLed: it prints "process rank N with PID 0 ... exited on signal 9" and
// "PMIX ERROR: UNREACHABLE", and waits for its children for ever without
// reaping them (docs/distribution.md, "When mpirun itself hangs").  mpirun is
// then killed.  A rank that hangs is still a timeout: the ranks must have
// ended.  `*ranks_ended`, when given, is when every rank was first seen ended
// (to within 100 ms), or when mpirun ended.
constexpr int kLauncherHung = -4;
int WaitForLauncher(CliProcess& p, const std::map<int, pid_t>& ranks, std::chrono::seconds limit,
                    std::chrono::steady_clock::time_point* ranks_ended = nullptr) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit;
  std::optional<Clock::time_point> all_ended;
  for (;;) {
    // Real time is the subject: how long mpirun outlives its ranks.
    if (Clock::now() >= deadline) return p.Wait(0s);
    const int code = p.WaitAtMost(100ms);
    if (code != CliProcess::kRunning) {
      if (ranks_ended != nullptr) *ranks_ended = all_ended.value_or(Clock::now());
      return code;
    }
    bool ended = !ranks.empty();
    for (const auto& [rank, pid] : ranks) ended = ended && Gone(pid, 0s);
    if (!ended) {
      all_ended.reset();
    } else if (!all_ended) {
      all_ended = Clock::now();
    } else if (Clock::now() - *all_ended > 15s) {
      if (ranks_ended != nullptr) *ranks_ended = *all_ended;
      kill(p.pid(), SIGKILL);  // init reaps the ranks
      p.Wait(10s);
      return kLauncherHung;
    }
  }
}

// Kills rank 1 of a job on three ranks reading FIFOs that never end, once it
// runs, and checks that the run ends within 10 s on every rank.
void KillRankOneAndExpectTheRunToEnd(const std::vector<std::string>& extra) {
  // Three FIFOs that never end: the job runs until something stops it.
  std::vector<std::string> fifos;
  std::vector<std::string> args = {"run", "--fields=key,ts", "--parallelism=3",
                                   "--watermarks=bounded:0s"};
  args.insert(args.end(), extra.begin(), extra.end());
  for (int i = 0; i < 3; ++i) {
    fifos.push_back(TempPath(absl::StrCat("mpi_kill_", i, ".fifo")));
    std::filesystem::remove(fifos.back());
    ASSERT_EQ(mkfifo(fifos.back().c_str(), 0600), 0);
    args.push_back("--input=" + fifos.back());
  }
  std::vector<std::string> all = MpirunArgs(3);
  all.push_back(TIDEMARK_BINARY);
  all.insert(all.end(), args.begin(), args.end());
  CliProcess mpirun(TIDEMARK_MPIEXEC, all, CliProcess::kStdinClosed);
  ASSERT_TRUE(mpirun.started());
  // Writers keep the FIFOs open (O_RDWR: no wait for the reader).
  std::vector<int> fds;
  for (const auto& f : fifos) {
    const int fd = open(f.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
    const std::string lines = "k1,1000\nk2,2000\nk3,3000\n";
    ASSERT_EQ(write(fd, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  }
  // The three ranks are up, and every rank has read its FIFO's lines (the
  // window results of the first records need all three watermarks).
  std::map<int, pid_t> ranks;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (ranks.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    ranks = RankPids(mpirun.pid());
    std::this_thread::sleep_for(20ms);  // polling /proc
  }
  ASSERT_EQ(ranks.size(), 3u);
  for (int fd : fds) {
    const std::string more = "k1,9000\n";
    ASSERT_EQ(write(fd, more.data(), more.size()), static_cast<ssize_t>(more.size()));
  }
  ASSERT_TRUE(mpirun.WaitForOutLine(30s)) << mpirun.err();  // a window fired: the job runs

  ASSERT_EQ(kill(ranks[1], SIGKILL), 0);
  const auto killed = std::chrono::steady_clock::now();
  // Every rank must end within 10 s, and mpirun with them, unless it hangs
  // as WaitForLauncher describes (Open MPI's, not the ranks').
  std::chrono::steady_clock::time_point ended;
  const int code = WaitForLauncher(mpirun, ranks, 45s, &ended);
  const double took = std::chrono::duration<double>(ended - killed).count();
  for (int fd : fds) close(fd);
  EXPECT_NE(code, 0);
  EXPECT_NE(code, CliProcess::kTimedOut) << mpirun.err();
  EXPECT_LT(took, 10.0) << mpirun.err();
  if (code == kLauncherHung) std::cerr << "mpirun outlived its ranks by 15 s: killed\n";
  // mpirun names the rank that died, and no rank is left behind.
  EXPECT_THAT(mpirun.err(), HasSubstr("rank 1"));
  for (const auto& [rank, pid] : ranks) EXPECT_TRUE(Gone(pid, 5s)) << "rank " << rank << " runs on";
}

TEST(MpiFailure, ARankKilledWithSigkillEndsTheJobOnEveryOtherRankWithinTenSeconds) {
  KillRankOneAndExpectTheRunToEnd({});
}

// A restart strategy restarts after failures, not after a dead rank: the
// launcher ends the run (docs/distribution.md, "Restarts across ranks").
TEST(MpiRestart, ARankKilledWithSigkillStillEndsTheRunWithARestartStrategy) {
  testing::TempDir dir;
  KillRankOneAndExpectTheRunToEnd({"--restart-strategy=fixed-delay:10:0ms",
                                   "--checkpoint-dir=" + dir.Path("chk"),
                                   "--checkpoint-interval=50ms"});
}

// --- checkpoints across ranks: a job outlives kill -9 of any of its ranks ---

TEST(MpiCheckpoint, ARankKilledAtRandomAndTheJobRestoredWritesTheOutputExactlyOnce) {
  testing::TempDir dir;
  // key,ts,value lines, 2 ms apart with up to 3 s of disorder, one in a
  // thousand too late.
  std::mt19937_64 rng(20261201);
  const std::string input = dir.Path("in.txt");
  {
    std::ofstream out(input);
    for (int64_t i = 0; i < 300'000; ++i) {
      int64_t ts = 1'000'000 + i * 2 - static_cast<int64_t>(rng() % 3000);
      if (rng() % 1000 == 0) ts -= 20'000;
      out << "k" << rng() % 400 << "," << ts << "," << 1 + rng() % 100 << "\n";
    }
  }
  const std::vector<std::string> args = {"run",
                                         "--input=" + input,
                                         "--window=tumbling:1s",
                                         "--allowed-lateness=2s",
                                         "--late=side",
                                         "--watermarks=bounded:1s",
                                         "--watermark-interval=per-record",
                                         "--parallelism=3",
                                         "--summary=false"};
  // The reference: one process, never killed.
  std::vector<std::string> ref_args = args;
  ref_args.push_back("--output-dir=" + dir.Path("ref"));
  CliRun ref = RunTidemark(ref_args);
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  int hidden = 0;
  const std::vector<std::string> expected = testing::CommittedLines(dir.Path("ref"), &hidden);
  ASSERT_GT(expected.size(), 1000u);

  // Three ranks (the source on rank 0, a window subtask and a file sink on
  // each); one rank, picked at random, killed at a random moment; started
  // again from the latest checkpoint until a run completes.
  std::vector<std::string> all = MpirunArgs(3);
  all.push_back(TIDEMARK_BINARY);
  all.insert(all.end(), args.begin(), args.end());
  all.push_back("--output-dir=" + dir.Path("out"));
  all.push_back("--checkpoint-dir=" + dir.Path("chk"));
  all.push_back("--checkpoint-interval=30ms");
  all.push_back("--restore=latest");
  std::mt19937 pick(14);
  int killed = 0, runs = 0, launcher_hung = 0;
  const int kills = testing::StressIterations(4);
  for (;;) {
    ASSERT_LT(++runs, 40);
    CliProcess p(TIDEMARK_MPIEXEC, all, CliProcess::kStdinClosed);
    ASSERT_TRUE(p.started());
    std::map<int, pid_t> ranks;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (ranks.size() < 3 && std::chrono::steady_clock::now() < deadline &&
           p.WaitAtMost(0s) == CliProcess::kRunning) {
      ranks = RankPids(p.pid());
      std::this_thread::sleep_for(5ms);  // polling /proc
    }
    bool kill_sent = false;
    if (killed < kills) {
      // Real time is the subject: when the rank dies.
      std::this_thread::sleep_for(std::chrono::milliseconds(100 + pick() % 400));
      if (ranks.size() == 3) kill_sent = kill(ranks[static_cast<int>(pick() % 3)], SIGKILL) == 0;
    }
    const int code = WaitForLauncher(p, ranks, 120s);
    ASSERT_NE(code, CliProcess::kTimedOut) << p.err();
    if (code == kLauncherHung) {
      // Only after a kill: a run nobody killed must end by itself.
      ASSERT_TRUE(kill_sent) << p.err();
      ++launcher_hung;
    }
    if (code != 0) {
      ++killed;
      continue;
    }
    break;
  }
  if (launcher_hung > 0) std::cerr << "mpirun hung after " << launcher_hung << " kill(s)\n";
  EXPECT_GE(killed, 1);
  const std::vector<std::string> got = testing::CommittedLines(dir.Path("out"), &hidden);
  EXPECT_EQ(hidden, 0);
  ASSERT_EQ(got.size(), expected.size()) << "killed " << killed << " times";
  EXPECT_TRUE(got == expected) << "killed " << killed << " times";
}

// Whether `pid` takes `sig` itself (its /proc status: blocked, for the CLI's
// signalfd, or caught): a signal sent before would have killed it.
bool CatchesSignal(pid_t pid, int sig) {
  const std::string status = testing::ReadFile(absl::StrCat("/proc/", pid, "/status"));
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, "SigBlk:") && !absl::ConsumePrefix(&line, "SigCgt:")) continue;
    uint64_t mask = 0;
    if (absl::SimpleHexAtoi(absl::StripAsciiWhitespace(line), &mask) && (mask >> (sig - 1) & 1))
      return true;
  }
  return false;
}

// A signal that reaches one rank only (mpirun gives each rank a process
// group of its own, so a kill(1) of one pid does that) interrupts the run on
// every rank: rank 0 says the interrupted line and the summary, writes the
// timeline, and every rank exits 143.  Rank 0 alone signalled waited for
// ever in the gather of the other ranks' counts; rank 1 alone made rank 0
// fail with "rank 1: job cancelled" and no summary.
TEST(MpiSignal, ASignalOnOneRankOnlyInterruptsTheRunOnEveryRank) {
  std::vector<std::string> a, b;
  for (int i = 0; i < 4000; ++i) {
    a.push_back(absl::StrCat("k", i % 7, ",", 1000 + i * 10));
    b.push_back(absl::StrCat("k", i % 5, ",", 1000 + i * 10));
  }
  const std::string in_a = InputFile("mpi_signal_a.txt", a);
  const std::string in_b = InputFile("mpi_signal_b.txt", b);
  for (int target : {0, 1}) {
    testing::TempDir dir;
    const std::string timeline = dir.Path("t.html");
    std::vector<std::string> all = MpirunArgs(2);
    all.push_back(TIDEMARK_BINARY);
    for (const std::string& arg :
         {std::string("run"), "--input=" + in_a, "--input=" + in_b, std::string("--fields=key,ts"),
          std::string("--parallelism=2"), std::string("--window=tumbling:1s"),
          std::string("--rate=1000/s"), "--timeline=" + timeline})
      all.push_back(arg);
    CliProcess p(TIDEMARK_MPIEXEC, all, CliProcess::kStdinClosed);
    ASSERT_TRUE(p.started());
    std::map<int, pid_t> ranks;
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < deadline &&
           p.WaitAtMost(0s) == CliProcess::kRunning &&
           !(ranks.size() == 2 && CatchesSignal(ranks[target], SIGTERM))) {
      ranks = RankPids(p.pid());
      std::this_thread::sleep_for(5ms);  // polling /proc
    }
    ASSERT_TRUE(ranks.size() == 2 && CatchesSignal(ranks[target], SIGTERM)) << p.err();
    ASSERT_EQ(kill(ranks[target], SIGTERM), 0);
    const int code = WaitForLauncher(p, ranks, 60s);
    ASSERT_NE(code, CliProcess::kTimedOut) << "rank " << target << "\n" << p.err();
    EXPECT_EQ(code, 143) << "rank " << target << "\n" << p.err();
    EXPECT_THAT(p.err(), HasSubstr("tidemark: interrupted (SIGTERM): ")) << target;
    EXPECT_THAT(p.err(), HasSubstr(", timeline written to " + timeline)) << target;
    EXPECT_THAT(p.err(), Not(HasSubstr("job cancelled"))) << target;
    EXPECT_TRUE(std::filesystem::exists(timeline)) << target;
  }
}

// Standard input reaches rank 0 only under mpirun: a stdin input that a
// subtask on another rank would read is refused (it read as empty, and its
// records were lost without a word).  Listed first, its subtask runs on
// rank 0 and it is read.
TEST(MpiInput, StandardInputReadOnAnotherRankIsRefused) {
  const std::string file = InputFile("mpi_stdin_file.txt", {"k1,1000", "k2,2000"});
  MpiRun r =
      RunMpi(2, TIDEMARK_BINARY,
             {"run", "--input=" + file, "--input=-", "--fields=key,ts", "--parallelism=2"}, 60s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--input=-: under mpirun standard input reaches rank 0 only, and "
                               "input 2 is read by source subtask 1 on rank 1"));
}

// An error only one rank meets (its own --output-per-rank file) is said by
// that rank, naming it; rank 0's muted stream swallowed it.
TEST(MpiInput, AnErrorOnAnotherRankIsSaidByThatRank) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.Path("per.1"));  // rank 1's file cannot be opened
  const std::string file = InputFile("mpi_per_rank_file.txt", {"k1,1000", "k2,2000"});
  MpiRun r = RunMpi(2, TIDEMARK_BINARY,
                    {"run", "--input=" + file, "--fields=key,ts", "--parallelism=2",
                     "--output-per-rank=" + dir.Path("per")},
                    60s);
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tidemark: rank 1: --output-per-rank: cannot open " +
                               dir.Path("per.1") + " for writing"));
}

}  // namespace
}  // namespace tidemark
