// S1 (document 000) over a real socket, as the document ran it: the test
// listens on 127.0.0.1 like `nc -lk`, `tidemark run --socket` connects, and
// the test types the records with a pace (150 ms) longer than the periodic
// watermark interval (50 ms), so the real periodic generator emits a
// watermark between every two records; the test also waits for that
// watermark (--trace=watermarks) before it types the next record, so a
// stalled process cannot read two records in one go.  Real time is the
// subject here, so the writer keeps the pace; nothing else waits on time.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli_test_util.h"
#include "tidemark/partitioning/key_groups.h"

namespace tidemark {
namespace {

TEST(CliSocketTest, S1OverASocketWithThePeriodicGenerator) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);

  testing::CliProcess p(
      {"run", absl::StrCat("--socket=127.0.0.1:", port), "--fields=key,ts", "--watermarks=lag:10s",
       "--watermark-interval=50ms", "--window=tumbling:3s", "--aggregate=list",
       "--timezone=Asia/Shanghai", "--output=jsonl", "--trace=watermarks", "--summary=false"},
      -1);
  ASSERT_TRUE(p.started());
  pollfd ready{listener, POLLIN, 0};
  ASSERT_EQ(poll(&ready, 1, 60'000), 1) << "tidemark never connected";
  const int conn = accept(listener, nullptr, nullptr);
  ASSERT_GE(conn, 0);
  int64_t max_ts = INT64_MIN;
  for (int64_t ts : {1538359882000, 1538359886000, 1538359892000, 1538359893000, 1538359894000,
                     1538359896000, 1538359897000, 1538359899000, 1538359891000, 1538359903000}) {
    const auto written = std::chrono::steady_clock::now();
    const std::string line = absl::StrCat("0001,", ts, "\n");
    ASSERT_EQ(write(conn, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    // The periodic generator's watermark after this record (max - 10 s) is
    // out before the next record is typed, whatever the scheduling: the
    // document's table has one watermark per record.
    if (ts > max_ts) {
      max_ts = ts;
      ASSERT_TRUE(p.WaitForOut(
          absl::StrCat("\"kind\":\"source_watermark\",\"subtask\":0,\"watermark\":", ts - 10'000,
                       ","),
          std::chrono::seconds(60)))
          << p.out() << p.err();
    }
    std::this_thread::sleep_until(written + std::chrono::milliseconds(150));  // the pace
  }
  close(conn);
  close(listener);
  ASSERT_EQ(p.Wait(std::chrono::seconds(60)), 0) << p.err();
  const std::vector<std::string> lines = absl::StrSplit(p.out(), '\n', absl::SkipEmpty());
  // The three windows of the document fire on time, while the input is still
  // open, in this order; the rest fire at the end of input.
  std::vector<std::string> on_time;
  for (const auto& l : lines)
    if (l.find("\"on_time\"") != std::string::npos) on_time.push_back(l);
  ASSERT_EQ(on_time.size(), 3u) << p.out();
  EXPECT_THAT(on_time[0],
              ::testing::HasSubstr("\"start\":1538359881000,\"end\":1538359884000,\"first\":"
                                   "1538359882000,\"last\":1538359882000,\"count\":1"));
  EXPECT_THAT(on_time[1],
              ::testing::HasSubstr("\"start\":1538359884000,\"end\":1538359887000,\"first\":"
                                   "1538359886000,\"last\":1538359886000,\"count\":1"));
  EXPECT_THAT(on_time[2],
              ::testing::HasSubstr("\"start\":1538359890000,\"end\":1538359893000,\"first\":"
                                   "1538359891000,\"last\":1538359892000,\"count\":2"));
  // Fired by the watermarks the document's table shows (max - 10 s).
  EXPECT_THAT(on_time[0], ::testing::HasSubstr("\"watermark\":1538359884000"));
  EXPECT_THAT(on_time[1], ::testing::HasSubstr("\"watermark\":1538359887000"));
  EXPECT_THAT(on_time[2], ::testing::HasSubstr("\"watermark\":1538359893000"));
}

// --socket-retries=2 as Flink's SocketTextStreamFunction counts maxRetry: the
// peer closes the first connection (attempt 1 < 2: reconnect after 500 ms),
// then the second (attempt 2 < 2 is false): the input ends normally, the last
// unterminated line is read, and the final watermark fires the open window,
// exit 0.  The listener is closed after the second connection, so a third
// attempt would be refused and fail the job.
TEST(CliSocketTest, RetriesUsedUpAfterThePeerClosedEndTheInputAndFireTheWindows) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  std::thread server([listener] {
    for (const char* text : {"a,1000\na,2000\n", "a,3000\nb,5000"}) {
      const int conn = accept(listener, nullptr, nullptr);
      if (conn < 0) break;
      const std::string t = text;
      if (write(conn, t.data(), t.size()) < 0) {
      }
      close(conn);
    }
    close(listener);
  });
  const std::string where = absl::StrCat("127.0.0.1:", port);
  testing::CliRun r = testing::RunTidemark(
      {"run", "--socket=" + where, "--socket-retries=2", "--fields=key,ts", "--window=tumbling:10s",
       "--aggregate=count", "--output=jsonl", "--summary=false"});
  server.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(),
              ::testing::UnorderedElementsAre(
                  ::testing::AllOf(::testing::HasSubstr("\"key\":\"a\",\"start\":0,\"end\":10000"),
                                   ::testing::HasSubstr("\"count\":3"),
                                   ::testing::HasSubstr("\"firing\":\"end_of_input\"")),
                  ::testing::AllOf(::testing::HasSubstr("\"key\":\"b\",\"start\":0,\"end\":10000"),
                                   ::testing::HasSubstr("\"count\":1"),
                                   ::testing::HasSubstr("\"firing\":\"end_of_input\""))));
  const std::vector<std::string> err = absl::StrSplit(r.err, '\n', absl::SkipEmpty());
  EXPECT_THAT(
      err, ::testing::ElementsAre(
               "tidemark: connection to " + where + " closed by the peer; attempt 2 of 2 in 500 ms",
               "tidemark: connection to " + where +
                   " closed by the peer after 2 connections (--socket-retries=2): end of "
                   "input"));
}

}  // namespace
}  // namespace tidemark
