// Savepoints from the CLI (issue 26 item 5, docs/checkpoints.md
// "Savepoints"): `tidemark run` reads standard input from a pipe the test
// keeps open; once its first result is out (read from its stdout, no
// sleeping) the test sends --savepoint-on's SIGUSR1 (the job goes on) or
// --stop-with-savepoint-on's SIGUSR2 (the job stops, its open window
// unfired), then restores a new run from the savepoint: the open window's
// count goes on from the savepoint's.  Every wait has a deadline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using testing::CliProcess;
using ::testing::HasSubstr;
using testing::RunTidemark;
using testing::TempPath;

constexpr auto kLimit = std::chrono::seconds(60);
const char kFirst[] = "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1\n";

std::vector<std::string> JobArgs() {
  return {"run",
          "--input=-",
          "--fields=key,ts",
          "--aggregate=count",
          "--window=tumbling:5s",
          "--watermark-interval=per-record"};
}

// A running job that has printed k's window [0, 5 s); [5 s, 10 s) holds one
// record.
struct RunningJob {
  explicit RunningJob(std::vector<std::string> extra) {
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    std::vector<std::string> args = JobArgs();
    args.insert(args.end(), extra.begin(), extra.end());
    proc = std::make_unique<CliProcess>(args, in[0]);
    close(in[0]);
    Write("k,1000\nk,6000\n");
  }
  ~RunningJob() { CloseInput(); }
  void Write(const std::string& lines) {
    EXPECT_EQ(write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  }
  void CloseInput() {
    if (in[1] >= 0) close(in[1]);
    in[1] = -1;
  }
  int in[2] = {-1, -1};
  std::unique_ptr<CliProcess> proc;
};

// The savepoint's directory, from "tidemark: savepoint PATH complete".
std::string SavepointPath(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex("tidemark: savepoint (\\S+) complete"))) return "";
  return m[1];
}

TEST(CliSavepointTest, Sigusr1TakesASavepointTheJobGoesOnAndARestoreStartsFromIt) {
  const std::string sp = TempPath("cli_savepoint_usr1");
  std::filesystem::remove_all(sp);
  std::string savepoint;
  {
    RunningJob job({"--savepoint-dir=" + sp, "--savepoint-on=SIGUSR1"});
    ASSERT_TRUE(job.proc->started());
    ASSERT_TRUE(job.proc->WaitForOutLine(kLimit)) << job.proc->err();
    EXPECT_EQ(job.proc->out(), kFirst);
    ASSERT_EQ(kill(job.proc->pid(), SIGUSR1), 0);
    ASSERT_TRUE(job.proc->WaitForErr(" complete", kLimit)) << job.proc->err();
    savepoint = SavepointPath(job.proc->err());
    ASSERT_FALSE(savepoint.empty()) << job.proc->err();
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(savepoint) / "_manifest"));
    // The job goes on: one more record, then the end of input fires [5, 10).
    job.Write("k,7000\n");
    job.CloseInput();
    const int code = job.proc->Wait(kLimit);
    ASSERT_EQ(code, 0) << job.proc->err();
    EXPECT_EQ(job.proc->out(), absl::StrCat(kFirst,
                                            "window:[1970-01-01 00:00:05--1970-01-01 "
                                            "00:00:10]-<k>--count: 2\n"));
    EXPECT_THAT(job.proc->err(), HasSubstr("tidemark: SIGUSR1: taking a savepoint into " + sp));
    EXPECT_THAT(job.proc->err(), HasSubstr(", savepoint " + savepoint));
  }
  // Restored: [5, 10) holds the savepoint's one record, plus this one.
  const std::string input = "k,8000\n";
  std::vector<std::string> args = JobArgs();
  args.push_back("--restore=" + savepoint);
  testing::CliRun r = RunTidemark(args, &input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<k>--count: 2\n") << r.err;
  EXPECT_THAT(r.err, HasSubstr("restored from savepoint "));
  EXPECT_THAT(r.err, HasSubstr("(" + savepoint + ")"));
}

TEST(CliSavepointTest, Sigusr2StopsTheJobWithASavepointAndARestoreAtParallelism2FiresTheRest) {
  const std::string sp = TempPath("cli_savepoint_usr2");
  std::filesystem::remove_all(sp);
  std::string savepoint;
  {
    RunningJob job({"--savepoint-dir=" + sp, "--stop-with-savepoint-on=SIGUSR2"});
    ASSERT_TRUE(job.proc->started());
    ASSERT_TRUE(job.proc->WaitForOutLine(kLimit)) << job.proc->err();
    ASSERT_EQ(kill(job.proc->pid(), SIGUSR2), 0);
    // It stops by itself, the input still open.
    const int code = job.proc->Wait(kLimit);
    ASSERT_NE(code, CliProcess::kTimedOut) << job.proc->err();
    EXPECT_EQ(code, 0) << job.proc->err();
    savepoint = SavepointPath(job.proc->err());
    ASSERT_FALSE(savepoint.empty()) << job.proc->err();
    EXPECT_THAT(job.proc->err(), HasSubstr(", stopped with savepoint " + savepoint));
    // The open window [5, 10) did not fire: it is in the savepoint.
    EXPECT_EQ(job.proc->out(), kFirst);
  }
  const std::string input = "k,8000\n";
  std::vector<std::string> args = JobArgs();
  args.push_back("--restore=" + savepoint);
  args.push_back("--parallelism=2");
  testing::CliRun r = RunTidemark(args, &input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // k's key group is on window subtask 1 of 2 ("1> ", as Flink's print).
  EXPECT_EQ(r.out, "1> window:[1970-01-01 00:00:05--1970-01-01 00:00:10]-<k>--count: 2\n") << r.err;
}

TEST(CliSavepointTest, BadSavepointFlagsAreErrorsBeforeTheJob) {
  const std::string input = "k,1000\n";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = JobArgs();
    args.insert(args.end(), extra.begin(), extra.end());
    return RunTidemark(args, &input);
  };
  testing::CliRun r = run({"--savepoint-dir=/tmp/x", "--savepoint-on=SIGHUP"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--savepoint-on=SIGHUP: give SIGUSR1 or SIGUSR2"));
  r = run({"--savepoint-on=SIGUSR1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("need --savepoint-dir"));
  r = run({"--savepoint-dir=/tmp/x", "--savepoint-on=SIGUSR1", "--drain"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--drain needs --stop-with-savepoint-on"));
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace tidemark
