// tests/cli_readme_test.cc: every shell command block of README.md runs as
// printed, so the README cannot drift from the program.
//
// At test time (not at build time: others edit the README) the test reads
// README.md, takes every ```sh block and splits it into commands (a line
// ending in '\' continues on the next; blank lines and '#' lines are
// skipped).  A block with lines starting with "$ " is a transcript: each "$ "
// command is followed by the standard output it prints, which must match line
// for line.  Each command runs under `bash -c`, bounded by kCommandSeconds,
// and must exit 0, in a directory that looks like the repository root after
// the README's first command (./tools/demo.sh): every top-level entry of the
// source tree linked in, and build/release/tools/tidemark and
// build/release/bench/tidemark-bench and
// build/release/bench/nexmark/tidemark-nexmark linked to the binaries under test.
// Files the commands write (checkpoints, output directories) stay there.
//
// Skipped, by the markers in kSkipMarkers (keep this list small; a command
// that needs a new one must say why here):
//   "./tools/"            the setup, build, test and benchmark scripts (the
//                         README's first command among them): minutes long;
//   "cmake "              building and installing (find_package_test does);
//   "mpirun "             ranks under MPI (cli_mpi_test runs such jobs);
//   "--records=50000000"  the benchmark harness on 50 million records.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

namespace fs = std::filesystem;

constexpr int kCommandSeconds = 60;
constexpr const char* kSkipMarkers[] = {"./tools/", "cmake ", "mpirun ", "--records=50000000"};

struct Command {
  std::string text;                   // for bash -c
  int line = 0;                       // in README.md
  bool transcript = false;            // a "$ " command: its output is shown
  std::vector<std::string> expected;  // the output shown after it
};

bool Skipped(const std::string& command) {
  for (const char* m : kSkipMarkers)
    if (absl::StrContains(command, m)) return true;
  return false;
}

// The commands of every ```sh block of `readme`.
std::vector<Command> ReadmeCommands(const std::string& readme) {
  std::vector<std::string> lines = absl::StrSplit(readme, '\n');
  std::vector<Command> commands;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (absl::StripAsciiWhitespace(lines[i]) != "```sh") continue;
    size_t end = i + 1;
    while (end < lines.size() && !absl::StartsWith(lines[end], "```")) ++end;
    bool transcript = false;
    for (size_t j = i + 1; j < end; ++j)
      if (absl::StartsWith(lines[j], "$ ")) transcript = true;
    for (size_t j = i + 1; j < end;) {
      std::string line = lines[j];
      const std::string stripped(absl::StripAsciiWhitespace(line));
      if (transcript ? !absl::StartsWith(line, "$ ") : stripped.empty() || stripped[0] == '#') {
        ++j;
        continue;
      }
      Command c;
      c.line = static_cast<int>(j) + 1;
      c.transcript = transcript;
      std::string text = transcript ? line.substr(2) : line;
      ++j;
      while (absl::EndsWith(absl::StripTrailingAsciiWhitespace(text), "\\") && j < end) {
        text = std::string(absl::StripTrailingAsciiWhitespace(text));
        text.pop_back();
        text = std::string(absl::StripTrailingAsciiWhitespace(text)) + " " +
               std::string(absl::StripLeadingAsciiWhitespace(lines[j]));
        ++j;
      }
      c.text = text;
      if (transcript) {
        while (j < end && !absl::StartsWith(lines[j], "$ ")) c.expected.push_back(lines[j++]);
        while (!c.expected.empty() && c.expected.back().empty()) c.expected.pop_back();
      }
      commands.push_back(std::move(c));
    }
    i = end;
  }
  return commands;
}

// A directory standing for the repository root after ./tools/demo.sh.
std::string MakeRoot() {
  const fs::path root = testing::TempPath("readme_root");
  fs::remove_all(root);
  fs::create_directories(root / "build/release/tools");
  fs::create_directories(root / "build/release/bench");
  for (const auto& entry : fs::directory_iterator(TIDEMARK_SOURCE_DIR)) {
    const std::string name = entry.path().filename().string();
    if (name == "build" || name == ".git") continue;
    fs::create_symlink(entry.path(), root / name);
  }
  fs::create_symlink(TIDEMARK_BINARY, root / "build/release/tools/tidemark");
  if (!std::string(TIDEMARK_BENCH_BINARY).empty())
    fs::create_symlink(TIDEMARK_BENCH_BINARY, root / "build/release/bench/tidemark-bench");
  if (!std::string(TIDEMARK_NEXMARK_BINARY).empty()) {
    fs::create_directories(root / "build/release/bench/nexmark");
    fs::create_symlink(TIDEMARK_NEXMARK_BINARY,
                       root / "build/release/bench/nexmark/tidemark-nexmark");
  }
  return root.string();
}

TEST(ReadmeCommandsTest, ExtractsCommandsTranscriptsAndContinuations) {
  const std::string readme =
      "text\n```sh\n# a comment\nprog a \\\n  b\n\nprog c   # trailing\n```\n"
      "```cpp\nnot_a_command();\n```\n"
      "```sh\n$ prog d \\\n    e\nout 1\nout 2\n\n$ prog f\n```\n";
  std::vector<Command> c = ReadmeCommands(readme);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].text, "prog a b");
  EXPECT_EQ(c[0].line, 4);
  EXPECT_FALSE(c[0].transcript);
  EXPECT_EQ(c[1].text, "prog c   # trailing");
  EXPECT_EQ(c[2].text, "prog d e");
  EXPECT_TRUE(c[2].transcript);
  EXPECT_THAT(c[2].expected, ::testing::ElementsAre("out 1", "out 2"));
  EXPECT_EQ(c[3].text, "prog f");
  EXPECT_TRUE(c[3].expected.empty());
  EXPECT_TRUE(Skipped("./tools/demo.sh"));
  EXPECT_TRUE(Skipped("mpirun -n 3 build/release/tools/tidemark run"));
  EXPECT_FALSE(Skipped("build/release/tools/tidemark run --input=examples/data/s1.txt"));
}

TEST(ReadmeCommandsTest, EveryCommandRunsAsPrinted) {
  // (Appended, not `std::string(dir) + "/README.md"`: GCC 12 at -O1 warns
  // of a stringop overflow in that expression that cannot happen.)
  std::string readme_path = TIDEMARK_SOURCE_DIR;
  readme_path += "/README.md";
  const std::string readme = testing::ReadFile(readme_path);
  ASSERT_FALSE(readme.empty());
  const std::vector<Command> commands = ReadmeCommands(readme);
  const std::string root = MakeRoot();
  int ran = 0, transcripts = 0;
  for (const Command& c : commands) {
    if (Skipped(c.text)) continue;
    // A build without benchmarks (-DTIDEMARK_BUILD_BENCHMARKS=OFF) has none.
    if (std::string(TIDEMARK_NEXMARK_BINARY).empty() &&
        absl::StrContains(c.text, "tidemark-nexmark"))
      continue;  // benchmarks not built
    if (std::string(TIDEMARK_BENCH_BINARY).empty() && absl::StrContains(c.text, "tidemark-bench"))
      continue;
    ++ran;
    SCOPED_TRACE(absl::StrCat("README.md:", c.line, ": ", c.text));
    const std::string out = root + "/.stdout", err = root + "/.stderr";
    const std::string sh =
        absl::StrCat("cd ", testing::ShellQuote(root), " && timeout ", kCommandSeconds, " bash -c ",
                     testing::ShellQuote(c.text), " < /dev/null > ", testing::ShellQuote(out),
                     " 2> ", testing::ShellQuote(err));
    const int status = std::system(sh.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    const std::string stderr_text = testing::ReadFile(err);
    EXPECT_EQ(code, 0) << (code == 124 ? absl::StrCat("ran longer than ", kCommandSeconds, " s; ")
                           : code == 127
                               ? "command not found (the README's commands use "
                                 "build/release/tools/tidemark, which ./tools/demo.sh builds); "
                               : "")
                       << "stderr:\n"
                       << stderr_text;
    if (c.transcript) {
      ++transcripts;
      std::vector<std::string> got = absl::StrSplit(testing::ReadFile(out), '\n');
      while (!got.empty() && got.back().empty()) got.pop_back();
      EXPECT_EQ(absl::StrJoin(got, "\n"), absl::StrJoin(c.expected, "\n"))
          << "the output differs from the README's";
    }
  }
  // The README's CLI section alone has the eight seed scenarios and --explain:
  // far fewer means the blocks were not found.
  EXPECT_GE(ran, 9);
  EXPECT_GE(transcripts, 1);
  std::error_code ec;
  fs::remove_all(root, ec);
}

}  // namespace
}  // namespace tidemark
