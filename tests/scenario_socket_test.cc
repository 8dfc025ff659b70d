// tests/scenario_socket_test.cc
//
// S1 (document 000) as the document runs it: records typed into a socket one
// at a time, read with socket_text_stream, watermarks from the real periodic
// timer.  A local server (127.0.0.1, port 0) plays the person at `nc -lk`: it
// writes one record every kPace, much longer than the auto-watermark interval
// (kInterval), so the periodic generator is polled between every two records,
// as in the document, with no per-record shortcut.  Real time is the subject
// here, so the writer paces itself with sleeps; nothing else waits on time
// (the job ends when the writer closes the connection).
//
// The expectations are those of tests/scenarios_test.cc (S1), firing
// watermarks included: a window fired by a watermark that arrived one record
// late (a missed tick) would show a different watermark.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "examples/seed_jobs.h"
#include "tidemark/api/environment.h"

namespace tidemark::seeds {
namespace {

using ::testing::ElementsAreArray;
using namespace std::chrono_literals;

constexpr auto kPace = 400ms;
constexpr auto kInterval = 50ms;

// A listening socket on 127.0.0.1 with a kernel-chosen port; Serve() accepts
// one connection and writes `lines` to it, one every kPace, then closes it.
class PacedLineServer {
 public:
  PacedLineServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof(addr);
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
          ::listen(fd_, 1) == 0 &&
          ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    port_ = ntohs(addr.sin_port);
  }
  ~PacedLineServer() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  int port() const { return port_; }

  // Returns an error message, empty on success.  Gives up if nobody connects
  // within 60 s, so a job that never connects fails the test instead of
  // hanging it.
  std::string Serve(const std::vector<std::string>& lines) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 60000) != 1) return "nobody connected";
    const int conn = ::accept(fd_, nullptr, nullptr);
    if (conn < 0) return absl::StrCat("accept: ", std::strerror(errno));
    std::string error;
    for (const std::string& line : lines) {
      std::this_thread::sleep_for(kPace);  // a person typing
      const std::string data = line + "\n";
      if (::send(conn, data.data(), data.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(data.size())) {
        error = absl::StrCat("send: ", std::strerror(errno));
        break;
      }
    }
    // Let the last record's watermark tick happen before the end of input.
    std::this_thread::sleep_for(kPace);
    ::close(conn);
    return error;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  bool ok_ = false;
};

class Log {
 public:
  void Add(std::string line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

constexpr Timestamp S1(int second) { return 1538359860000 + second * 1000; }

std::string S1Line(int count, int first, int last, int start, int end) {
  auto t = [](int s) { return absl::StrCat("2018-10-01 10:11:", s, ".000"); };
  return absl::StrCat("(0001),", count, ",", t(first), ",", t(last), ",", t(start), ",", t(end));
}

std::string Fired(Timestamp start, Timestamp end, Timestamp watermark, const std::string& result) {
  return absl::StrCat("[", start, ",", end, ") at ",
                      watermark == kMaxWatermark ? std::string("end") : absl::StrCat(watermark),
                      ": ", result);
}

TEST(ScenarioSocket, S1TypedSlowlyWithThePeriodicTimer) {
  PacedLineServer server;
  ASSERT_TRUE(server.ok()) << std::strerror(errno);
  const std::vector<std::string> lines = {
      "0001,1538359882000", "0001,1538359886000", "0001,1538359892000", "0001,1538359893000",
      "0001,1538359894000", "0001,1538359896000", "0001,1538359897000", "0001,1538359899000",
      "0001,1538359891000", "0001,1538359903000"};

  StreamExecutionEnvironment env;
  env.set_parallelism(2);  // the window operator and the sink
  env.set_auto_watermark_interval(kInterval);
  SeedOptions o;
  o.tz = absl::FixedTimeZone(8 * 60 * 60);
  o.per_record_watermarks = false;  // the real periodic timer only
  auto fires = std::make_shared<Log>();
  o.on_fire = [fires](const std::string&, const TimeWindow& w, Timestamp wm) {
    fires->Add(absl::StrCat("[", w.start, ",", w.end, ") at ",
                            wm == kMaxWatermark ? std::string("end") : absl::StrCat(wm)));
  };
  auto trace = std::make_shared<Log>();
  o.on_record = [trace](const std::string&, const WatermarkTrace& t) {
    trace->Add(absl::StrCat(t.event_time, " ", t.max_timestamp, " ", t.watermark));
  };
  auto results = BuildS1(env.socket_text_stream("127.0.0.1", server.port()), o).results.collect();

  std::string server_error;
  std::thread writer([&] { server_error = server.Serve(lines); });
  JobResult r = env.execute("S1 over a socket");
  writer.join();
  ASSERT_TRUE(server_error.empty()) << server_error;
  ASSERT_TRUE(r.ok()) << r.status;

  // The document's table: event time, current max timestamp, watermark.
  const std::vector<std::vector<int>> table = {
      {22, 22, 12}, {26, 26, 16}, {32, 32, 22}, {33, 33, 23}, {34, 34, 24},
      {36, 36, 26}, {37, 37, 27}, {39, 39, 29}, {31, 39, 29}, {43, 43, 33}};
  std::vector<std::string> expected_trace;
  for (const auto& row : table) {
    expected_trace.push_back(absl::StrCat(S1(row[0]), " ", S1(row[1]), " ", S1(row[2])));
  }
  EXPECT_THAT(trace->lines(), ElementsAreArray(expected_trace));

  const std::vector<std::string> expected = {
      Fired(S1(21), S1(24), S1(24), S1Line(1, 22, 22, 21, 24)),
      Fired(S1(24), S1(27), S1(27), S1Line(1, 26, 26, 24, 27)),
      Fired(S1(30), S1(33), S1(33), S1Line(2, 31, 32, 30, 33)),
      // End of input (the writer closed the connection): W(MAX) flushes the
      // rest; the document's socket stays open, so it never shows these.
      Fired(S1(33), S1(36), kMaxWatermark, S1Line(2, 33, 34, 33, 36)),
      Fired(S1(36), S1(39), kMaxWatermark, S1Line(2, 36, 37, 36, 39)),
      Fired(S1(39), S1(42), kMaxWatermark, S1Line(1, 39, 39, 39, 42)),
      Fired(S1(42), S1(45), kMaxWatermark, S1Line(1, 43, 43, 42, 45)),
  };
  const std::vector<std::string> fired = fires->lines();
  const auto items = results->items();
  ASSERT_EQ(items.size(), fired.size()) << "one result per firing";
  std::vector<std::string> actual;
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i].subtask, items[0].subtask) << "a single key, a single window subtask";
    actual.push_back(absl::StrCat(fired[i], ": ", items[i].value));
  }
  EXPECT_THAT(actual, ElementsAreArray(expected));
}

}  // namespace
}  // namespace tidemark::seeds
