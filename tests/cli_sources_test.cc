// `tidemark run` on over-long lines.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using Clock = std::chrono::steady_clock;
using testing::CliRun;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunTidemark;

constexpr auto kPatience = std::chrono::seconds(20);  // for events due in milliseconds

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tidemark-cli-XXXXXX").string();
    char* p = mkdtemp(tmpl.data());
    EXPECT_NE(p, nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string Path(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------
// Over-long lines: rejected as soon as they pass --max-line-length, never
// buffered whole, quoted with a bounded prefix.

std::string WriteInputWithLongLine(const std::string& path, size_t long_bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << "k,1000\n";
  const std::string block(1 << 20, 'x');
  for (size_t left = long_bytes; left > 0;) {
    const size_t n = std::min(left, block.size());
    out.write(block.data(), static_cast<std::streamsize>(n));
    left -= n;
  }
  out << "\nk,2000\nk,3000\n";
  return path;
}

TEST(CliOverLongLineTest, SkippedLineIsCountedAndTheLinesAfterItAreRead) {
  TempDir dir;
  // 8 MiB without a newline against the default limit of 1 MiB.
  const std::string input = WriteInputWithLongLine(dir.Path("long.txt"), 8 << 20);
  const std::string dead = dir.Path("dead.txt");
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts", "--bad-lines=skip",
                          "--dead-letter=" + dead, "--aggregate=count", "--window=tumbling:10s"});
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr("3 records, 1 window results, 0 late (side output), 0 late dropped, "
                               "1 bad lines skipped"));
  EXPECT_EQ(r.out, "window:[1970-01-01 00:00:00--1970-01-01 00:00:10]-<k>--count: 3\n");
  const std::string dead_text = ReadFile(dead);
  EXPECT_LT(dead_text.size(), 1024u) << "the dead letter quotes a bounded prefix";
  EXPECT_EQ(dead_text, input + ":2: line is longer than 1048576 bytes (more than 1048576): " +
                           std::string(64, 'x') + "...\n");
}

TEST(CliOverLongLineTest, FailStopsWithABoundedMessage) {
  TempDir dir;
  const std::string input = WriteInputWithLongLine(dir.Path("long.txt"), 8 << 20);
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 1024u) << "the error quotes a bounded prefix";
  EXPECT_EQ(r.err, "tidemark: operator 'Source: input' (subtask 0 of 1) failed: " + input +
                       ":2: line is longer than 1048576 bytes (more than 1048576): '" +
                       std::string(64, 'x') + "...'\n");
}

TEST(CliOverLongLineTest, ParseErrorQuotesABoundedPrefixOfALongLine) {
  // A malformed line under the limit is still quoted only in part.
  TempDir dir;
  const std::string input = dir.Path("wide.txt");
  testing::WriteFile(input, "k,1000\nk,bad," + std::string(5000, 'y') + "\n");
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 1024u) << r.err;
  EXPECT_THAT(r.err, HasSubstr(input + ":2: field 'ts': timestamp 'bad' is not an integer"));
  EXPECT_THAT(r.err, HasSubstr(": 'k,bad,yyy"));
  EXPECT_THAT(r.err, HasSubstr("y... (5006 bytes)'"));
}

}  // namespace
}  // namespace tidemark
