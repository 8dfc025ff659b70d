// SIGINT / SIGTERM on `tidemark run` (issue 10, item 12): the job reads
// standard input from a pipe the test keeps open, so it would run forever;
// once its first result is out (read from its stdout, no sleeping) the test
// signals it.  The first signal stops the sources and the job reports what it
// left open, writes the summary and the timeline, and exits 128 + signal; a
// second signal exits at once.  Every wait has a deadline (a hang fails).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using testing::CliProcess;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::TempPath;

constexpr auto kLimit = std::chrono::seconds(60);

// A running `tidemark run --input=-` that has printed its first window: k's
// window [0, 5 s) fired by the watermark of k,6000, whose own window
// [5 s, 10 s) stays open.
struct RunningJob {
  explicit RunningJob(const std::string& page) {
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    proc = std::make_unique<CliProcess>(
        std::vector<std::string>{"run", "--input=-", "--fields=key,ts", "--aggregate=count",
                                 "--window=tumbling:5s", "--watermark-interval=per-record",
                                 "--timeline=" + page},
        in[0]);
    close(in[0]);
    const std::string lines = "k,1000\nk,6000\n";
    EXPECT_EQ(write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  }
  ~RunningJob() { close(in[1]); }
  int in[2] = {-1, -1};
  std::unique_ptr<CliProcess> proc;
};

void ExpectInterrupted(const std::string& signal_name, int signo, int exit_code) {
  const std::string page = TempPath("signal_" + signal_name + ".html");
  std::remove(page.c_str());
  RunningJob job(page);
  ASSERT_TRUE(job.proc->started());
  ASSERT_TRUE(job.proc->WaitForOutLine(kLimit)) << job.proc->err();
  EXPECT_EQ(job.proc->out(), "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1\n");
  ASSERT_EQ(kill(job.proc->pid(), signo), 0);
  const int code = job.proc->Wait(kLimit);
  ASSERT_NE(code, CliProcess::kTimedOut) << "still running after " << signal_name;
  EXPECT_EQ(code, exit_code) << job.proc->err();
  const std::string& err = job.proc->err();
  // What was left open: k's window [5 s, 10 s).
  EXPECT_TRUE(std::regex_search(
      err, std::regex(absl::StrCat("tidemark: interrupted \\(", signal_name,
                                   "\\): 1 window not fired \\(1 key\\), [0-9]+ records? in "
                                   "flight\n"))))
      << err;
  // Then the usual summary and the page.
  EXPECT_THAT(err, HasSubstr("tidemark: 2 records, 1 window result, 0 late (side output), 0 late "
                             "dropped, 0 bad lines skipped, timeline written to " +
                             page + "\n"));
  EXPECT_LT(err.find("interrupted"), err.find("2 records")) << err;
  EXPECT_THAT(ReadFile(page), HasSubstr("</svg>"));
  // No window was fired by the interruption.
  EXPECT_EQ(job.proc->out(), "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1\n");
}

TEST(CliSignalTest, SigintStopsTheJobReportsWhatWasOpenAndExits130) {
  ExpectInterrupted("SIGINT", SIGINT, 130);
}

TEST(CliSignalTest, SigtermStopsTheJobReportsWhatWasOpenAndExits143) {
  ExpectInterrupted("SIGTERM", SIGTERM, 143);
}

// Two signals in a row: whether the second arrives while the first is being
// handled (immediate exit) or the two merge into one, the process ends
// promptly with 130.
TEST(CliSignalTest, TwoSignalsInARowStillExit130Promptly) {
  for (int round = 0; round < 3; ++round) {
    const std::string page = TempPath("signal_twice.html");
    RunningJob job(page);
    ASSERT_TRUE(job.proc->started());
    ASSERT_TRUE(job.proc->WaitForOutLine(kLimit)) << job.proc->err();
    ASSERT_EQ(kill(job.proc->pid(), SIGINT), 0);
    ASSERT_EQ(kill(job.proc->pid(), SIGINT), 0);
    const auto start = std::chrono::steady_clock::now();
    const int code = job.proc->Wait(kLimit);
    ASSERT_NE(code, CliProcess::kTimedOut);
    EXPECT_EQ(code, 130) << job.proc->err();
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
    EXPECT_THAT(job.proc->err(), ::testing::AnyOf(HasSubstr("tidemark: interrupted (SIGINT)"),
                                                  HasSubstr("second signal (SIGINT)")));
  }
}

// True once a thread of process `pid` sleeps in a pipe write (its stdout pipe
// is full).  Reads /proc/<pid>/task/*/wchan ("pipe_write" or
// "anon_pipe_write", depending on the kernel).
bool SomeThreadBlockedInPipeWrite(pid_t pid) {
  std::error_code ec;
  for (const auto& t :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), ec)) {
    std::ifstream in(t.path() / "wchan");
    std::string wchan;
    std::getline(in, wchan);
    if (wchan.find("pipe_write") != std::string::npos) return true;
  }
  return false;
}

// The second signal while the first is being handled: the job cannot stop
// because its print sink is blocked writing to a full stdout pipe (2000
// results, far more than the pipe holds, which the test does not read), so
// only the second signal ends it (stdout is not read until then).  The first
// signal is sent only once the sink is seen blocked: before that, the cancel
// would land at the sink's next record and the job would stop by itself.
TEST(CliSignalTest, SecondSignalWhileTheFirstIsHandledExitsAtOnce) {
  int in[2];
  ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
  CliProcess proc({"run", "--input=-", "--fields=key,ts", "--aggregate=count",
                   "--window=tumbling:5s", "--watermark-interval=per-record"},
                  in[0]);
  close(in[0]);
  ASSERT_TRUE(proc.started());
  std::string lines;
  for (int i = 0; i < 2000; ++i) absl::StrAppend(&lines, "key", i, ",1000\n");
  lines += "z,6000\n";  // fires the 2000 windows in one go
  ASSERT_EQ(write(in[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  // The firing has begun; it blocks once the pipe is full, and never ends.
  ASSERT_TRUE(proc.WaitForOutReadable(kLimit));
  const auto deadline = std::chrono::steady_clock::now() + kLimit;
  while (!SomeThreadBlockedInPipeWrite(proc.pid())) {
    if (std::chrono::steady_clock::now() > deadline) {
      close(in[1]);
      GTEST_SKIP() << "no thread seen in pipe_write (is /proc/<pid>/task/*/wchan readable?)";
    }
    std::this_thread::yield();  // polling the process state, not waiting on time
  }
  ASSERT_EQ(kill(proc.pid(), SIGINT), 0);
  ASSERT_TRUE(proc.WaitForErr("tidemark: SIGINT: stopping the job", kLimit)) << proc.err();
  ASSERT_EQ(kill(proc.pid(), SIGINT), 0);
  // Only stderr until the second signal is said: reading stdout now would
  // unblock the sink, and the cancelled job could then end on its own before
  // the signal thread took the second signal (seen under load).
  ASSERT_TRUE(proc.WaitForErr("tidemark: second signal (SIGINT): exiting at once\n", kLimit))
      << proc.err();
  const int code = proc.Wait(kLimit);
  ASSERT_NE(code, CliProcess::kTimedOut);
  EXPECT_EQ(code, 130);
  EXPECT_THAT(proc.err(), HasSubstr("tidemark: second signal (SIGINT): exiting at once\n"));
  EXPECT_THAT(proc.err(), ::testing::Not(HasSubstr("interrupted (SIGINT)")));
  close(in[1]);
}

}  // namespace
}  // namespace tidemark
