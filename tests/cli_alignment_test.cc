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
