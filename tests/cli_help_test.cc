// tests/cli_help_test.cc: help as people expect it (issue 23, item 7):
// per-command help, --version, "did you mean" for a mistyped flag, one-line
// flag errors pointing to --help, tidemark-bench --help, and a progress line
// that redraws itself with '\r' only on a terminal.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli_test_util.h"
#include "tools/cli/run.h"

namespace tidemark {
namespace {

using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunTidemark;

// The version in CMakeLists.txt's project() line.
std::string ProjectVersion() {
  const std::string cmake = testing::ReadFile(std::string(TIDEMARK_SOURCE_DIR) + "/CMakeLists.txt");
  std::smatch m;
  if (!std::regex_search(cmake, m, std::regex(R"(project\(tidemark VERSION ([0-9.]+))")))
    return "?";
  return m[1];
}

TEST(CliHelpTest, RunHelpListsTheFlagsOfRunOnly) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"run", "--help"},
                                               {"help", "run"},
                                               {"run", "-h"},
                                               {"run", "--input=x", "--help"}}) {
    CliRun r = RunTidemark(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << " " << args[1];
    EXPECT_EQ(r.err, "");
    EXPECT_THAT(r.out, HasSubstr("usage: tidemark run"));
    for (const char* flag : {"--input ", "--parallelism ", "--socket-retries ", "--window ",
                             "--allow-extra-fields ", "--skip-header ", "--timeline "})
      EXPECT_THAT(r.out, HasSubstr(flag));
    for (const char* demo_only :
         {"--duration ", "--sources ", "--progress ", "--alignment ", "--scene "})
      EXPECT_THAT(r.out, Not(HasSubstr(demo_only)));
  }
  EXPECT_EQ(RunTidemark({"run", "--help"}).out, RunTidemark({"help", "run"}).out);
}

TEST(CliHelpTest, DemoHelpListsTheFlagsOfDemoOnly) {
  CliRun r = RunTidemark({"demo", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("usage: tidemark demo"));
  for (const char* flag : {"--duration ", "--sources ", "--timeline ", "--alignment "})
    EXPECT_THAT(r.out, HasSubstr(flag));
  for (const char* run_only : {"--input ", "--socket ", "--window "})
    EXPECT_THAT(r.out, Not(HasSubstr(run_only)));
  // The demo's own defaults, not run's, for the flags both commands take.
  EXPECT_THAT(r.out, HasSubstr("--parallelism (default '2')"));
  EXPECT_THAT(r.out, HasSubstr("--timeline (default '/tmp/tidemark-demo-timeline.html')"));
  EXPECT_THAT(r.out, HasSubstr("--scene (default 'both')"));
  EXPECT_EQ(r.out, RunTidemark({"help", "demo"}).out);
}

TEST(CliHelpTest, GeneralHelpListsTheCommands) {
  CliRun r = RunTidemark({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("tidemark help [run | demo]"));
  EXPECT_THAT(r.out, HasSubstr("--version"));
  CliRun bad = RunTidemark({"help", "frobnicate"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("no command 'frobnicate'"));
}

TEST(CliHelpTest, VersionIsTheProjectVersion) {
  CliRun r = RunTidemark({"--version"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "tidemark " + ProjectVersion() + "\n");
}

TEST(CliHelpTest, AMistypedFlagSuggestsTheNearestInOneLine) {
  struct Case {
    std::vector<std::string> args;
    std::string line;
  } cases[] = {
      {{"run", "--paralelism=2"},
       "tidemark: unknown flag --paralelism (did you mean --parallelism?); see `tidemark run "
       "--help`"},
      {{"run", "--paralellism=2"},
       "tidemark: unknown flag --paralellism (did you mean --parallelism?); see `tidemark run "
       "--help`"},
      {{"run", "--socket_retry=2"},
       "tidemark: unknown flag --socket-retry (did you mean --socket-retries?); see `tidemark "
       "run --help`"},
      {{"run", "--alowed-lateness=2s"},
       "tidemark: unknown flag --alowed-lateness (did you mean --allowed-lateness?); see "
       "`tidemark run --help`"},
      {{"run", "--zzzzzzzzzz=1"}, "tidemark: unknown flag --zzzzzzzzzz; see `tidemark run --help`"},
      {{"demo", "--duraton=1s"},
       "tidemark: unknown flag --duraton (did you mean --duration?); see `tidemark demo --help`"},
      {{"run", "--duration=5s"},
       "tidemark: --duration is a flag of `tidemark demo`, not of `tidemark run`; see "
       "`tidemark run --help`"},
  };
  for (const Case& c : cases) {
    CliRun r = RunTidemark(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[1];
    EXPECT_EQ(r.err, c.line + "\n") << c.args[1];
    EXPECT_EQ(r.out, "") << c.args[1];
  }
  CliRun bad = RunTidemark({"run", "--parallelism=two"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, ::testing::StartsWith("tidemark: bad value for --parallelism: "));
  EXPECT_THAT(bad.err, ::testing::EndsWith("; see `tidemark run --help`\n"));
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
}

// `--restore=$DIR` with DIR unset must not read as the flag left out (a job
// started afresh instead of restored); an empty value is refused, in one line,
// before anything runs, except where a flag's help says what empty means.
TEST(CliHelpTest, AnEmptyValueIsRefusedUnlessTheFlagSaysWhatEmptyMeans) {
  const std::string in = testing::TempPath("empty_value.txt");
  testing::WriteFile(in, "k,1000\n");
  for (const char* flag : {"restore", "checkpoint-dir", "output-dir", "savepoint-dir", "input",
                           "timeline", "state-backend-dir", "delimiter"}) {
    CliRun r =
        RunTidemark({"run", "--input=" + in, "--fields=key,ts", absl::StrCat("--", flag, "=")});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_EQ(r.err, absl::StrCat("tidemark: flag --", flag,
                                  " has an empty value; give one, or leave the flag out; see "
                                  "`tidemark run --help`\n"))
        << flag;
    EXPECT_EQ(r.out, "") << flag;
  }
  // "(empty: 1 per record)", "(empty: no comments; ...)", "(empty: off)".
  for (const char* flag : {"value", "comments", "alignment-max-drift", "rate"}) {
    CliRun r =
        RunTidemark({"run", "--input=" + in, "--fields=key,ts", absl::StrCat("--", flag, "=")});
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
  }
}

// A flag that only works with another one is refused without it, in one line,
// before anything runs: accepted, it would do nothing.
TEST(CliHelpTest, AFlagWithoutTheOneItWorksWithIsRefused) {
  const std::string in = testing::TempPath("needs_flag.txt");
  testing::WriteFile(in, "k,1000\n");
  const std::string dir = testing::TempPath("needs_flag_dir");
  struct Case {
    std::vector<std::string> flags;
    std::string why;
  } cases[] = {
      {{"--dead-letter=" + dir + ".dead"},
       "--dead-letter needs --bad-lines=skip (only skipped lines are written there)"},
      {{"--state-backend-dir=" + dir}, "--state-backend-dir needs --state-backend=rocksdb"},
      {{"--alignment-update-interval=2s"},
       "--alignment-update-interval needs --alignment-max-drift"},
      {{"--per-split-watermarks=false"},
       "--per-split-watermarks needs --source-parallelism (without it each file is a subtask "
       "of its own)"},
      {{"--tolerable-failed-checkpoints=3"},
       "--tolerable-failed-checkpoints needs --checkpoint-dir"},
      {{"--checkpoint-timeout=1s"},
       "--checkpoint-timeout needs --checkpoint-dir or --savepoint-dir"},
      {{"--socket-retries=3"},
       "--socket-retries needs --socket (files and standard input are not reconnected)"},
      {{"--allow-non-restored-state"}, "--allow-non-restored-state needs --restore"},
      {{"--aggregate=list", "--value=ts"},
       "--value is not used by --aggregate=list (it counts the records and shows their "
       "timestamps)"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", "--input=" + in, "--fields=key,ts"};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    CliRun r = RunTidemark(args);
    EXPECT_EQ(r.exit_code, 2) << c.flags[0];
    EXPECT_EQ(r.err, "tidemark: " + c.why + "; see `tidemark run --help`\n") << c.flags[0];
    EXPECT_EQ(r.out, "") << c.flags[0];
  }
  EXPECT_FALSE(std::filesystem::exists(dir + ".dead")) << "nothing may be created";
  // With what they work with, they run.
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--bad-lines=skip", "--dead-letter=" + dir + ".dl"},
           {"--alignment-max-drift=1s", "--alignment-update-interval=2s"},
           {"--source-parallelism=1", "--per-split-watermarks=false"},
           {"--aggregate=list", "--value="}}) {
    std::vector<std::string> args = {"run", "--input=" + in, "--fields=key,ts"};
    args.insert(args.end(), flags.begin(), flags.end());
    CliRun r = RunTidemark(args);
    EXPECT_EQ(r.exit_code, 0) << flags[0] << ": " << r.err;
  }
}

TEST(CliHelpTest, BenchHelpListsItsFlags) {
  const std::string out = testing::TempPath("bench_help.out");
  const int status = std::system(
      (testing::ShellQuote(TIDEMARK_BENCH_BINARY) + " --help > " + testing::ShellQuote(out))
          .c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const std::string text = testing::ReadFile(out);
  for (const char* flag : {"--job ", "--records ", "--list_jobs ", "--sources ", "--json "})
    EXPECT_THAT(text, HasSubstr(flag));
}

// Not on a terminal (stderr is a file here) the progress line is a plain
// line, never redrawn with '\r'.
TEST(CliHelpTest, ProgressUsesCarriageReturnOnlyOnATerminal) {
  const std::string page = testing::TempPath("progress.html");
  CliRun r = RunTidemark({"demo", "--duration=1s", "--alignment=off", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("records +[0-9]+/s \\| sources:"));

  // On a terminal (what main() finds with isatty) it is redrawn in place.
  cli::DemoOptions d;
  d.duration = "1s";
  d.alignment = "off";
  d.timeline = page;
  d.progress_on_terminal = true;
  std::ostringstream out, err;
  ASSERT_EQ(cli::DemoCommand(d, out, err), 0) << err.str();
  EXPECT_THAT(err.str(), HasSubstr("\r"));
}

}  // namespace
}  // namespace tidemark
