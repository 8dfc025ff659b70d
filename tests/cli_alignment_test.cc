// `tidemark run --alignment-max-drift=D`: a source subtask that runs more
// than D ahead of the slowest pauses (and says so in the trace) until the
// slowest catches up.  The inputs are FIFOs the test writes, so each step
// waits for what the previous one caused, not for time.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/cli_test_util.h"

namespace tidemark {
namespace {

using namespace std::chrono_literals;
using testing::CliProcess;
using ::testing::HasSubstr;
using testing::TempPath;

TEST(CliAlignment, ASourceAheadByMoreThanTheDriftPausesUntilTheSlowestCatchesUp) {
  testing::FifoInputs inputs("align", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=per-record",
                                   "--window=tumbling:1s",
                                   "--alignment-max-drift=1s",
                                   "--alignment-update-interval=10ms",
                                   "--trace=watermarks"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  auto write_line = [&](int input, const std::string& line) {
    ASSERT_TRUE(inputs.Write(static_cast<size_t>(input), line));
  };
  // Both at 0.1 s; then input 0 jumps to 5 s: 4.999 > 0.099 + 1 s.
  write_line(0, "a,100");
  write_line(1, "b,100");
  ASSERT_TRUE(p.WaitForOut("source subtask 1 emits", 60s)) << p.out() << p.err();
  write_line(0, "a,5000");
  ASSERT_TRUE(p.WaitForOut("[alignment] source subtask 0 pauses", 60s)) << p.out() << p.err();
  EXPECT_THAT(p.out(), ::testing::Not(HasSubstr("[alignment] source subtask 0 resumes")));
  // Input 1 catches up to 4.5 s: the limit becomes 5.499 s and input 0 reads again.
  write_line(1, "b,4500");
  ASSERT_TRUE(p.WaitForOut("[alignment] source subtask 0 resumes", 60s)) << p.out() << p.err();
  inputs.Close();
  EXPECT_EQ(p.Wait(60s), 0) << p.err();
  // (Source 1 may pause too, for a moment: its jump to 4.5 s is above the
  // limit of the last announcement, 1.099 s, until its own next report.)
}

// One source subtask reading both files is a group of one: nothing to pause
// (tidemark pauses subtasks, not the files of one), which the run says.
TEST(CliAlignment, SaysWhenOneSourceSubtaskReadsEveryInput) {
  const std::string a = TempPath("align_one_a.txt");
  const std::string b = TempPath("align_one_b.txt");
  testing::WriteFile(a, "a,1000\na,2000\n");
  testing::WriteFile(b, "b,1000\nb,9000\n");
  const std::vector<std::string> base = {"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                                         "--alignment-max-drift=500ms"};
  std::vector<std::string> one = base;
  one.push_back("--source-parallelism=1");
  testing::CliRun r = testing::RunTidemark(one);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tidemark: warning: watermark alignment group 'sources' has one "
                               "source subtask: nothing is paused"));
  r = testing::RunTidemark(base);  // a subtask per file
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("warning")));
}

TEST(CliAlignment, RejectsABadDrift) {
  const std::string in = TempPath("align_bad.txt");
  testing::WriteFile(in, "a,1\n");
  testing::CliRun r = testing::RunTidemark(
      {"run", "--input=" + in, "--fields=key,ts", "--alignment-max-drift=-1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--alignment-max-drift"));
  r = testing::RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--alignment-max-drift=1s",
                            "--alignment-update-interval=0s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--alignment-update-interval"));
}

}  // namespace
}  // namespace tidemark
