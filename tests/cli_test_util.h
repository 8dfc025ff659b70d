// tests/cli_test_util.h: running the built `tidemark` binary from tests.
#ifndef TM_TESTS_CLI_TEST_UTIL_H_
#define TM_TESTS_CLI_TEST_UTIL_H_

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace tidemark::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::vector<std::string> OutLines() const {
    std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
    return lines;
  }
};

inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'')
      q += "'\\''";
    else
      q += c;
  }
  return q + "'";
}

inline std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string base = dir ? dir : "/tmp";
  return base + "/tidemark_" + std::to_string(getpid()) + "_" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// Runs `tidemark args...` (stdin from `stdin_text` when given).
inline CliRun RunTidemark(const std::vector<std::string>& args,
                          const std::string* stdin_text = nullptr) {
  static int counter = 0;
  const std::string stem = TempPath("cli" + std::to_string(++counter));
  std::string cmd = ShellQuote(TIDEMARK_BINARY);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  if (stdin_text) {
    WriteFile(stem + ".in", *stdin_text);
    cmd += " < " + ShellQuote(stem + ".in");
  } else {
    cmd += " < /dev/null";
  }
  cmd += " > " + ShellQuote(stem + ".out") + " 2> " + ShellQuote(stem + ".err");
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFile(stem + ".out");
  r.err = ReadFile(stem + ".err");
  std::remove((stem + ".out").c_str());
  std::remove((stem + ".err").c_str());
  std::remove((stem + ".in").c_str());
  return r;
}

}  // namespace tidemark::testing

#endif  // TM_TESTS_CLI_TEST_UTIL_H_
