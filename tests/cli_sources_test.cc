// `tidemark run` on inputs that are not plain files, on over-long lines, and
// on a socket that is not there yet.
//
// FIFOs: the source reads a FIFO without blocking its subtask, so periodic
// watermarks and idleness keep going between lines (before, a blocking read()
// stopped them until the next line or EOF).  The tests run the built binary
// with its stdout on a pipe and read its --trace=watermarks events as they
// come, writing the next line only after the expected event was seen; the
// 300 ms between lines is the writer's pace (real time is the subject), not a
// way of waiting for the job.
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
#include "test_util.h"

namespace tidemark {
namespace {

using Clock = std::chrono::steady_clock;
using testing::CliRun;
using ::testing::HasSubstr;
using testing::ReadFile;
using testing::RunTidemark;

constexpr auto kPatience = std::chrono::seconds(20);  // for events due in milliseconds

using tidemark::testing::TempDir;

// A running `tidemark` whose stdout the test reads line by line.
class Child {
 public:
  Child(const std::vector<std::string>& args, const std::string& err_path) {
    std::vector<std::string> argv_s = {TIDEMARK_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return;
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(null, 0);
      dup2(out[1], 1);
      dup2(err, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    close(err);
    close(null);
    out_ = out[0];
  }
  ~Child() {
    if (pid_ > 0 && !waited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  bool started() const { return pid_ > 0 && out_ >= 0; }

  // Reads stdout until a line satisfies `pred`; false at EOF or after
  // `patience`.  Every line read is kept in lines().
  bool WaitForLine(const std::function<bool(const std::string&)>& pred,
                   Clock::duration patience = kPatience) {
    const auto deadline = Clock::now() + patience;
    for (;;) {
      for (size_t nl; (nl = buf_.find('\n')) != std::string::npos;) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        lines_.push_back(line);
        if (pred(line)) return true;
      }
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof(chunk));
      if (n <= 0) return false;
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Waits for the exit (reading the rest of stdout); the exit status, -1 if
  // it did not exit normally.
  int Wait() {
    WaitForLine([](const std::string&) { return false; });
    int status = 0;
    waitpid(pid_, &status, 0);
    waited_ = true;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  bool exited() {
    if (waited_) return true;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      waited_ = true;
      return true;
    }
    return false;
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  bool waited_ = false;
  std::string buf_;
  std::vector<std::string> lines_;
};

// Opens the FIFO for writing once the job has opened it for reading (until
// then there is no reader and a non-blocking open fails with ENXIO).  -1 if
// that does not happen in time.
int OpenWriter(const std::string& fifo, Child& child) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline && !child.exited()) {
    const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return fd;
    }
    if (errno != ENXIO) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // polling for the reader
  }
  return -1;
}

bool WriteLine(int fd, const std::string& line) {
  const std::string s = line + "\n";
  return write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
}

auto SourceWatermark(int64_t w) {
  return [w](const std::string& l) {
    return l.find("\"kind\":\"source_watermark\"") != std::string::npos &&
           l.find(absl::StrCat("\"watermark\":", w, ",")) != std::string::npos;
  };
}
bool IsSourceIdle(const std::string& l) {
  // With the time it happened (t_ms), as every trace event.
  return l.find("{\"kind\":\"source_status\",\"subtask\":0,\"idle\":true,\"t_ms\":") !=
         std::string::npos;
}

class CliFifoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    signal(SIGPIPE, SIG_IGN);  // a write to a FIFO nobody reads fails, not kills
    fifo_ = dir_.Path("in.fifo");
    ASSERT_EQ(mkfifo(fifo_.c_str(), 0600), 0);
    err_ = dir_.Path("err.txt");
  }
  std::vector<std::string> Args(std::vector<std::string> extra) const {
    std::vector<std::string> a = {"run",
                                  "--input=" + fifo_,
                                  "--fields=key,ts",
                                  "--watermarks=bounded:0s",
                                  "--watermark-interval=50ms",
                                  "--window=tumbling:10s",
                                  "--aggregate=count",
                                  "--trace=watermarks",
                                  "--output=jsonl",
                                  "--summary=false"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  TempDir dir_;
  std::string fifo_;
  std::string err_;
};

TEST_F(CliFifoTest, PeriodicWatermarksAppearBetweenLinesWrittenToAFifo) {
  Child child(Args({}), err_);
  ASSERT_TRUE(child.started());
  const int w = OpenWriter(fifo_, child);
  ASSERT_GE(w, 0) << ReadFile(err_);
  for (int i = 1; i <= 3; ++i) {
    const auto written = Clock::now();
    ASSERT_TRUE(WriteLine(w, absl::StrCat("k,", i * 1000))) << ReadFile(err_);
    // bounded:0s: the periodic watermark after a record at ts is ts - 1.  It
    // must come while the FIFO is open and quiet, before the next line.
    ASSERT_TRUE(child.WaitForLine(SourceWatermark(i * 1000 - 1)))
        << "no periodic watermark after line " << i << " before the next one; stdout so far:\n"
        << absl::StrJoin(child.lines(), "\n") << "\nstderr: " << ReadFile(err_);
    std::this_thread::sleep_until(written + std::chrono::milliseconds(300));  // the pace
  }
  close(w);
  EXPECT_EQ(child.Wait(), 0) << ReadFile(err_);
  EXPECT_THAT(absl::StrJoin(child.lines(), "\n"),
              HasSubstr("\"kind\":\"window\",\"key\":\"k\",\"start\":0,\"end\":10000,"
                        "\"value\":3,\"count\":3"));
}

TEST_F(CliFifoTest, QuietFifoGoesIdleWhileItsWriterKeepsItOpen) {
  Child child(Args({"--idleness=300ms"}), err_);
  ASSERT_TRUE(child.started());
  const int w = OpenWriter(fifo_, child);
  ASSERT_GE(w, 0) << ReadFile(err_);
  ASSERT_TRUE(WriteLine(w, "k,1000"));
  ASSERT_TRUE(child.WaitForLine(SourceWatermark(999))) << ReadFile(err_);
  // The writer keeps the FIFO open and writes nothing: idle after 300 ms.
  ASSERT_TRUE(child.WaitForLine(IsSourceIdle))
      << "the source never went idle; stdout so far:\n"
      << absl::StrJoin(child.lines(), "\n") << "\nstderr: " << ReadFile(err_);
  ASSERT_TRUE(WriteLine(w, "k,2000"));  // and active again with a record
  EXPECT_TRUE(child.WaitForLine([](const std::string& l) {
    return l.rfind("{\"kind\":\"source_status\",\"subtask\":0,\"idle\":false,\"t_ms\":", 0) == 0;
  })) << ReadFile(err_);
  close(w);
  EXPECT_EQ(child.Wait(), 0) << ReadFile(err_);
}

TEST_F(CliFifoTest, WriterMayConnectAfterTheJobStarted) {
  // mkfifo f; tidemark run --input=f & producer > f
  Child child(Args({"--idleness=200ms"}), err_);
  ASSERT_TRUE(child.started());
  // No writer yet: the FIFO is not at its end, and the subtask's timers run
  // (it goes idle) rather than waiting in open().
  ASSERT_TRUE(child.WaitForLine(IsSourceIdle))
      << "no idleness before the writer came; stderr: " << ReadFile(err_);
  EXPECT_FALSE(child.exited()) << "a FIFO without a writer yet is not at its end";
  const int w = OpenWriter(fifo_, child);
  ASSERT_GE(w, 0) << ReadFile(err_);
  for (const char* line : {"k,1000", "k,2000", "k,12000"}) ASSERT_TRUE(WriteLine(w, line));
  close(w);  // the writer's end is the input's end
  EXPECT_EQ(child.Wait(), 0) << ReadFile(err_);
  const std::string out = absl::StrJoin(child.lines(), "\n");
  EXPECT_THAT(out, HasSubstr("\"start\":0,\"end\":10000,\"value\":2,\"count\":2"));
  EXPECT_THAT(out, HasSubstr("\"start\":10000,\"end\":20000,\"value\":1,\"count\":1"));
}

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
  EXPECT_THAT(r.err, HasSubstr("3 records, 1 window result, 0 late (side output), 0 late dropped, "
                               "1 bad line skipped"));
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
  testing::WriteFile(input, "k,1000,x\nk,bad," + std::string(5000, 'y') + "\n");
  CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts,pad"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_LT(r.err.size(), 1024u) << r.err;
  EXPECT_THAT(r.err, HasSubstr(input + ":2: field 'ts': timestamp 'bad' is not an integer"));
  EXPECT_THAT(r.err, HasSubstr(": 'k,bad,yyy"));
  EXPECT_THAT(r.err, HasSubstr("y... (5006 bytes)'"));
}

// ---------------------------------------------------------------------------
// --socket-retries.

TEST(CliSocketRetriesTest, EachFailedAttemptIsReportedThenTheJobGivesUp) {
  int port = 0;
  {
    // A free port, closed again: nobody listens there.
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    socklen_t len = sizeof(addr);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port = ntohs(addr.sin_port);
    close(fd);
  }
  const std::string where = absl::StrCat("127.0.0.1:", port);
  CliRun r = RunTidemark({"run", "--socket=" + where, "--socket-retries=3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  std::vector<std::string> err = absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  // Three attempts in all (Flink's maxRetry counting).
  EXPECT_THAT(
      err,
      ::testing::ElementsAre(
          "tidemark: cannot connect to " + where + ": Connection refused; attempt 2 of 3 in 500 ms",
          "tidemark: cannot connect to " + where + ": Connection refused; attempt 3 of 3 in 500 ms",
          "tidemark: operator 'Source: input' (subtask 0 of 1) failed: cannot "
          "connect to " +
              where + ": Connection refused (gave up after 3 attempts, 500 ms apart)"));
}

TEST(CliSocketRetriesTest, RejectsLessThanMinusOne) {
  CliRun r = RunTidemark({"run", "--socket=127.0.0.1:9", "--socket-retries=-2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--socket-retries must be -1 (forever) or more"));
}

}  // namespace
}  // namespace tidemark
