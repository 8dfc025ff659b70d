// The live view's server cannot be held (issue 27 item 2), with real sockets:
// stalled connections do not delay other requests, Stop() returns at once
// whatever clients do (and so a finished job's process exits), and requests
// whose Host is not a loopback name or address get 403.
//
// Before, cpp-httplib's three pool threads each blocked in a read with a 5 s
// per-read timeout and stop() joined them: three stalled connections made
// every other request wait 6-7 s, and clients sending a byte a second kept
// the process alive indefinitely.  The bounds asserted here are generous
// (1 s, 3 s) so the tests stay stable on a loaded machine; the figures
// measured are printed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli_test_util.h"
#include "tools/cli/live_view.h"

namespace tidemark {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// A connected socket to 127.0.0.1:port, or -1.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Sends `request` and reads the whole response (the server closes the
// connection after it); "" after `limit` without the end of it.
std::string Exchange(int port, const std::string& request, Clock::duration limit = 10s) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  std::string out;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return "";
  }
  const auto deadline = Clock::now() + limit;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      out.clear();
      break;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

std::string GetRequest(const std::string& path, const std::string& host) {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", host, "\r\n\r\n");
}

class LiveServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto started = cli::LiveServer::Start("127.0.0.1", 0, &state_, "test");
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    port_ = server_->port();
    host_ = absl::StrCat("127.0.0.1:", port_);
  }
  cli::LiveState state_{absl::UTCTimeZone()};
  std::unique_ptr<cli::LiveServer> server_;
  int port_ = 0;
  std::string host_;
};

TEST(LiveServerHost, LoopbackNamesAndAddressesOnly) {
  for (const char* ok : {"localhost", "localhost:8080", "LOCALHOST", "localhost.", "127.0.0.1",
                         "127.0.0.1:41179", "127.1.2.3", "[::1]", "[::1]:80", " 127.0.0.1:80 "}) {
    EXPECT_TRUE(cli::IsLoopbackHost(ok)) << ok;
  }
  for (const char* bad :
       {"evil.example", "evil.example:80", "127.0.0.1.evil.example", "localhost.evil.example",
        "0.0.0.0", "10.0.0.1:80", "::1", "[::2]", "[::1", "[::1]x", "localhost:http",
        "localhost:99999", "", "128.0.0.1", "[::ffff:127.0.0.1]x"}) {
    EXPECT_FALSE(cli::IsLoopbackHost(bad)) << bad;
  }
}

TEST_F(LiveServerTest, AForeignHostGets403) {
  const std::string ok = Exchange(port_, GetRequest("/api/state", host_));
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(ok, HasSubstr("\"status\":\"running\""));
  EXPECT_THAT(Exchange(port_, GetRequest("/api/state", "localhost")), StartsWith("HTTP/1.1 200"));
  for (const char* bad : {"evil.example", "evil.example:80", "127.0.0.1.nip.io"}) {
    const std::string r = Exchange(port_, GetRequest("/api/state", bad));
    EXPECT_THAT(r, StartsWith("HTTP/1.1 403 Forbidden\r\n")) << bad;
    EXPECT_EQ(r.find("\"status\""), std::string::npos) << "no state for " << bad;
  }
  for (const char* path : {"/", "/api/events?since=0"}) {
    EXPECT_THAT(Exchange(port_, GetRequest(path, "evil.example")), StartsWith("HTTP/1.1 403"))
        << path;
  }
  // No Host at all, or two: refused as well.
  EXPECT_THAT(Exchange(port_, "GET /api/state HTTP/1.0\r\n\r\n"), StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(Exchange(port_,
                       "GET /api/state HTTP/1.1\r\nHost: localhost\r\nHost: evil.example"
                       "\r\n\r\n"),
              StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(Exchange(port_, GetRequest("/nothing", host_)), StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(Exchange(port_, "POST /api/state HTTP/1.1\r\nHost: localhost\r\n\r\n"),
              StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(Exchange(port_, GetRequest("/api/events?since=x", host_)),
              StartsWith("HTTP/1.1 400"));
}

TEST_F(LiveServerTest, StalledConnectionsDoNotDelayOthers) {
  // 20 connections: 10 that send nothing, 10 stopped in the middle of their
  // request line.
  std::vector<int> stalled;
  for (int i = 0; i < 20; ++i) {
    const int fd = Connect(port_);
    ASSERT_GE(fd, 0);
    if (i % 2 == 1) ASSERT_EQ(send(fd, "GET /api/st", 11, MSG_NOSIGNAL), 11);
    stalled.push_back(fd);
  }
  double worst = 0;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    const std::string r = Exchange(port_, GetRequest(i % 2 ? "/api/state" : "/", host_));
    const double ms = Ms(Clock::now() - t0);
    worst = std::max(worst, ms);
    ASSERT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n")) << "request " << i;
  }
  std::printf("[measured] 20 requests beside 20 stalled connections: slowest %.2f ms\n", worst);
  // A stalled connection holds the server up to its 2 s deadline; a loaded
  // machine can stall a request for a second.
  EXPECT_LT(worst, 1900) << "a stalled connection delayed another request";
  for (int fd : stalled) close(fd);
}

// A request whose lines end in a bare LF (RFC 9112 lets a server take it)
// is answered; it got nothing and was closed after 2 s.
TEST_F(LiveServerTest, ARequestWithBareLineFeedsIsAnswered) {
  const std::string r =
      Exchange(port_, absl::StrCat("GET /api/state HTTP/1.1\nHost: ", host_, "\n\n"), 1500ms);
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("\"status\":\"running\""));
}

// Out of descriptors with nobody to close, the server must not spin on its
// readable listening socket (it burnt a core: 350 ticks in 4 s).  Real time
// is the subject: the process's CPU time over a second of it.  The limit
// leaves one descriptor, which the client's socket takes, so the server's
// accept fails with EMFILE while the connection waits in the backlog.
TEST_F(LiveServerTest, OutOfDescriptorsTheServerDoesNotSpin) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  // Every descriptor number below the limit taken, then one given back.
  std::vector<int> fillers;
  for (int f; (f = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fillers.push_back(f);
  ASSERT_FALSE(fillers.empty());
  close(fillers.back());
  fillers.pop_back();
  const int fd = Connect(port_);
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(1s);
  getrusage(RUSAGE_SELF, &after);
  for (int f : fillers) close(f);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_GE(fd, 0) << "the client's socket needs the one descriptor left";
  auto cpu_ms = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000.0 +
           (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1000.0;
  };
  const double used = cpu_ms(after) - cpu_ms(before);
  std::printf("[measured] out of descriptors for 1 s: %.1f ms of CPU\n", used);
  EXPECT_LT(used, 300) << "the server spun on its listening socket";
  // With descriptors again, it answers.
  EXPECT_THAT(Exchange(port_, GetRequest("/api/state", host_)), StartsWith("HTTP/1.1 200 OK"));
  close(fd);
}

TEST_F(LiveServerTest, AStalledConnectionIsClosedAfterItsDeadline) {
  const int fd = Connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(send(fd, "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL), 16);
  // The server closes it (end of stream) after its deadline of 2 s; a
  // generous limit here.
  pollfd p{fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 30000), 1);
  char c;
  EXPECT_EQ(recv(fd, &c, 1, 0), 0);
  close(fd);
}

// A server idle for longer than a connection's deadline still answers the
// next request: each connection's deadline counts from its accept (it
// counted from before the poll that waited, so after 2 s of quiet the next
// connection was already past its deadline and closed unanswered: a
// browser's first load of the page got an empty reply).  Real time is the
// subject: the server must sit idle past the deadline.
TEST_F(LiveServerTest, AnswersTheFirstRequestAfterIdlingPastTheDeadline) {
  ASSERT_THAT(Exchange(port_, GetRequest("/api/state", host_)), StartsWith("HTTP/1.1 200 OK"));
  std::this_thread::sleep_for(2500ms);  // idle: longer than the 2 s deadline
  EXPECT_THAT(Exchange(port_, GetRequest("/", host_)), StartsWith("HTTP/1.1 200 OK"));
}

TEST_F(LiveServerTest, StopReturnsAtOnceWhateverClientsDo) {
  // Five clients sending a byte every 100 ms (each reconnecting when the
  // server closes it), and one that sent a request and never reads.
  std::atomic<bool> quit{false};
  std::vector<std::thread> tricklers;
  std::atomic<int> sent{0};
  for (int i = 0; i < 5; ++i) {
    tricklers.emplace_back([&, i] {
      const std::string req = GetRequest("/api/state", host_);
      while (!quit.load()) {
        const int fd = Connect(port_);
        if (fd < 0) return;  // the server has stopped
        for (size_t k = 0; k < req.size() - 1 && !quit.load(); ++k) {
          if (send(fd, &req[k], 1, MSG_NOSIGNAL) != 1) break;
          ++sent;
          std::this_thread::sleep_for(100ms + std::chrono::milliseconds(i));  // the trickle
        }
        close(fd);
      }
    });
  }
  const int reader = Connect(port_);
  ASSERT_GE(reader, 0);
  const std::string req = GetRequest("/", host_);
  ASSERT_EQ(send(reader, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  while (sent.load() < 10) std::this_thread::sleep_for(10ms);  // the clients are at it
  const auto t0 = Clock::now();
  server_->Stop();
  const double ms = Ms(Clock::now() - t0);
  std::printf("[measured] Stop() with 5 trickling clients and a non-reader: %.2f ms\n", ms);
  EXPECT_LT(ms, 1900);  // under the connections' 2 s deadline
  // Stopped: no new connection is accepted.
  EXPECT_LT(Connect(port_), 0);
  quit = true;
  for (auto& t : tricklers) t.join();
  close(reader);
}

// A real job: five clients trickle bytes at its live view while it runs; the
// input ends, and the process exits promptly (it used to stay alive as long
// as the clients kept trickling).
TEST(LiveServerJob, AFinishedJobExitsWhateverClientsDo) {
  testing::FifoInputs inputs("livesrv", 1);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run", "--fields=key,ts", "--window=tumbling:1s",
                                   "--serve=127.0.0.1:0"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  testing::CliProcess p(args, testing::CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  ASSERT_TRUE(inputs.Write(0, "a,1000"));
  ASSERT_TRUE(p.WaitForErr("live view at http://127.0.0.1:", 60s)) << p.err();
  ASSERT_TRUE(p.WaitForErr("/\n", 10s)) << p.err();
  std::smatch m;
  const std::string err = p.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("live view at http://127\\.0\\.0\\.1:(\\d+)/")));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(m[1].str(), &port));
  std::atomic<bool> quit{false};
  std::atomic<int> sent{0};
  std::vector<std::thread> tricklers;
  for (int i = 0; i < 5; ++i) {
    tricklers.emplace_back([&] {
      const std::string req = GetRequest("/api/state", "localhost");
      while (!quit.load()) {
        const int fd = Connect(port);
        if (fd < 0) return;
        for (size_t k = 0; k < req.size() - 1 && !quit.load(); ++k) {
          if (send(fd, &req[k], 1, MSG_NOSIGNAL) != 1) break;
          ++sent;
          std::this_thread::sleep_for(100ms);  // the trickle
        }
        close(fd);
      }
    });
  }
  while (sent.load() < 10) std::this_thread::sleep_for(10ms);
  const auto t0 = Clock::now();
  inputs.Close();  // the end of input: the job finishes
  const int code = p.Wait(60s);
  const double ms = Ms(Clock::now() - t0);
  quit = true;
  for (auto& t : tricklers) t.join();
  EXPECT_EQ(code, 0) << p.err();
  std::printf("[measured] end of input to exit, 5 trickling clients: %.0f ms\n", ms);
  EXPECT_LT(ms, 5000) << "the clients held the finished job's process";
}

}  // namespace
}  // namespace tidemark
