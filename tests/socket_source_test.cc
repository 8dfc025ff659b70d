// Line sources: socket_text_stream against a local listening socket fed by a
// test thread (Flink's socketTextStream, read until the peer closes), a
// refused connection, and the file sources.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

// A listening socket on 127.0.0.1 with a kernel-chosen port.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_GE(fd_, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(listen(fd_, 4), 0);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~Listener() {
    if (fd_ >= 0) close(fd_);
  }
  int port() const { return port_; }
  int Accept() { return accept(fd_, nullptr, nullptr); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = write(fd, s.data() + off, s.size() - off);
    ASSERT_GT(n, 0);
    off += static_cast<size_t>(n);
  }
}

TEST(SocketSource, ReadsLinesUntilThePeerCloses) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(5); ++rep) {
    Listener listener;
    std::vector<std::string> expected;
    std::thread feeder([&] {
      const int conn = listener.Accept();
      ASSERT_GE(conn, 0);
      // Lines in pieces: a line split across writes, CRLF, an empty line, a
      // long line, and a last line without a newline.
      WriteAll(conn, "hello\nwor");
      WriteAll(conn, "ld\r\n\n");
      std::string many;
      for (int i = 0; i < 2000; ++i) many += "line " + std::to_string(i) + "\n";
      WriteAll(conn, many);
      WriteAll(conn, std::string(100000, 'x') + "\n");
      WriteAll(conn, "last without newline");
      close(conn);
    });
    expected = {"hello", "world", ""};
    for (int i = 0; i < 2000; ++i) expected.push_back("line " + std::to_string(i));
    expected.push_back(std::string(100000, 'x'));
    expected.push_back("last without newline");

    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2);
    auto out = env.socket_text_stream("127.0.0.1", listener.port()).collect();
    JobResult r = env.execute();
    feeder.join();
    ASSERT_TRUE(r.ok()) << r.status;
    // non-parallel source chained to a parallelism-1... the collect sink has
    // parallelism 2 and gets the lines by rebalance; order per subtask kept.
    auto items = out->items();
    ASSERT_EQ(items.size(), expected.size());
    std::vector<std::string> got;
    for (const auto& it : items) got.push_back(it.value);
    std::vector<std::string> a = got, b = expected;
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b);
  }
}

TEST(SocketSource, SlowPeerLinesArriveBeforeTheEnd) {
  // A person typing: each line must reach the sink while the connection is
  // still open (the feeder waits for the sink before it writes the next).
  Listener listener;
  auto count = std::make_shared<std::atomic<int>>(0);
  std::thread feeder([&] {
    const int conn = listener.Accept();
    ASSERT_GE(conn, 0);
    for (int i = 0; i < 5; ++i) {
      WriteAll(conn, "typed " + std::to_string(i) + "\n");
      while (count->load() <= i) std::this_thread::yield();
    }
    close(conn);
  });
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  std::vector<std::string> got;
  env.socket_text_stream("127.0.0.1", listener.port())
      .map([](const std::string& s) { return s; })
      .rebalance()
      .add_sink([count](std::string) { count->fetch_add(1); });
  JobResult r = env.execute();
  feeder.join();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(count->load(), 5);
}

TEST(SocketSource, OrderKeptWithParallelismOne) {
  Listener listener;
  std::thread feeder([&] {
    const int conn = listener.Accept();
    ASSERT_GE(conn, 0);
    for (int i = 0; i < 500; ++i) WriteAll(conn, std::to_string(i) + "\n");
    close(conn);
  });
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  auto out = env.socket_text_stream("127.0.0.1", listener.port()).collect();
  JobResult r = env.execute();
  feeder.join();
  ASSERT_TRUE(r.ok()) << r.status;
  auto v = out->values();
  ASSERT_EQ(v.size(), 500u);
  for (int i = 0; i < 500; ++i) EXPECT_EQ(v[i], std::to_string(i));
}

TEST(SocketSource, ConnectionRefusedNamesHostAndPort) {
  int port = 0;
  {
    Listener l;  // take a free port, then close it: nobody listens there
    port = l.port();
  }
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.socket_text_stream("127.0.0.1", port).add_sink([](std::string) {});
  JobResult r = env.execute();
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status.message());
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("Socket Stream"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
}

TEST(SocketSource, APortOutOfRangeIsRefusedWhenTheJobIsBuilt) {
  StreamExecutionEnvironment env;
  // getaddrinfo would take 70000 as 4464 and connect there.
  for (int port : {70000, 65536, 0, -1}) {
    EXPECT_THROW(env.socket_text_stream("127.0.0.1", port), std::invalid_argument) << port;
  }
}

TEST(SocketSource, CancelWhileConnectingToAPeerThatDoesNotAnswer) {
  // A listener whose accept queue is full drops the source's SYN: connect()
  // would block for minutes (the kernel's SYN retries).  Cancelling must
  // still end the job at once, as Flink's cancel() closes the socket.
  const int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(l, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(l, 0), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(l, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::vector<int> fillers;
  for (int i = 0; i < 4; ++i) {
    const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    ASSERT_GE(c, 0);
    connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers.push_back(c);
  }
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.socket_text_stream("127.0.0.1", ntohs(addr.sin_port)).add_sink([](std::string) {});
  JobClient client = env.execute_async("connecting");
  // Until the source has started its connection attempt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool attempting = false;
  while (!attempting && std::chrono::steady_clock::now() < deadline) {
    for (const SubtaskMetricsSnapshot& m : client.metrics()) {
      auto it = m.counters.find("socketConnectAttempts");
      if (it != m.counters.end() && it->second > 0) attempting = true;
    }
    if (!attempting) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(attempting);
  client.cancel();
  // Real time is the subject: the blocking connect() gave up only after
  // about two minutes.
  std::atomic<bool> ended{false};
  JobResult r;
  std::thread waiter([&] {
    r = client.wait();
    ended = true;
  });
  const auto bound = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!ended && std::chrono::steady_clock::now() < bound) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(ended) << "the job did not end within 30 s of cancel()";
  waiter.join();
  EXPECT_TRUE(absl::IsCancelled(r.status)) << r.status;
  for (int c : fillers) close(c);
  close(l);
}

TEST(SocketSource, CancelWhileWaitingForThePeer) {
  // The peer sends one line and then keeps the connection open and silent:
  // the source sleeps waiting for data, and cancellation must still end it.
  for (int rep = 0; rep < tidemark::testing::StressIterations(5); ++rep) {
    Listener listener;
    auto count = std::make_shared<std::atomic<int>>(0);
    std::atomic<bool> release{false};
    std::thread feeder([&] {
      const int conn = listener.Accept();
      ASSERT_GE(conn, 0);
      WriteAll(conn, "only line\n");
      while (!release.load()) std::this_thread::yield();
      close(conn);
    });
    StreamExecutionEnvironment env;
    env.set_parallelism(1).set_worker_threads(2);
    env.socket_text_stream("127.0.0.1", listener.port()).rebalance().add_sink([count](std::string) {
      count->fetch_add(1);
    });
    JobClient client = env.execute_async();
    while (count->load() < 1) std::this_thread::yield();
    client.cancel();
    JobResult r = client.wait();
    release = true;
    feeder.join();
    EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
    EXPECT_EQ(count->load(), 1);
  }
}

// ---------------------------------------------------------------------------
// Retries (Flink's socketTextStream maxRetry).

// A free port nobody listens on (taken from the kernel, then closed).
int ClosedPort() {
  Listener l;
  return l.port();
}

int64_t Attempts(const std::vector<SubtaskMetricsSnapshot>& metrics) {
  int64_t n = 0;
  for (const auto& m : metrics) {
    auto it = m.counters.find("socketConnectAttempts");
    if (it != m.counters.end()) n += it->second;
  }
  return n;
}

// Listens on 127.0.0.1:port (a port that was free a moment ago).
int ListenOn(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(SocketSource, NoRetryByDefaultOneAttemptFailsAtOnce) {
  const int port = ClosedPort();
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.socket_text_stream("127.0.0.1", port).add_sink([](std::string) {});
  JobResult r = env.execute();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.CounterTotal("socketConnectAttempts"), 1);
  const std::string msg(r.status.message());
  EXPECT_NE(
      msg.find("cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused"),
      std::string::npos)
      << msg;
  EXPECT_EQ(msg.find("retr"), std::string::npos) << "no retry was made: " << msg;
}

TEST(SocketSource, RetriesEvery500msUntilTheListenerOpens) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(2); ++rep) {
    const int port = ClosedPort();
    auto received = std::make_shared<std::atomic<int>>(0);
    StreamExecutionEnvironment env;
    env.set_parallelism(1).set_worker_threads(2);
    env.socket_text_stream("127.0.0.1", port, '\n', /*max_retries=*/-1)
        .rebalance()
        .add_sink([received](std::string s) {
          EXPECT_EQ(s, "hello");
          received->fetch_add(1);
        });
    JobClient client = env.execute_async();
    // Wait until a second attempt has begun, which proves the first was
    // refused (an attempt is counted before its connect(), so a count of 1
    // could still connect to the listener opened next), then listen.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (Attempts(client.metrics()) < 2 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ASSERT_GE(Attempts(client.metrics()), 2);
    const int listener = ListenOn(port);
    ASSERT_GE(listener, 0) << "port " << port << " was taken meanwhile";
    const int conn = accept(listener, nullptr, nullptr);
    ASSERT_GE(conn, 0);
    WriteAll(conn, "hello\n");
    while (received->load() < 1 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Retrying forever, the source would reconnect after this connection
    // closes: end the job by cancelling it.
    client.cancel();
    JobResult r = client.wait();
    close(conn);
    close(listener);
    EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
    EXPECT_EQ(received->load(), 1);
    EXPECT_GE(r.CounterTotal("socketConnectAttempts"), 2);
  }
}

TEST(SocketSource, ReconnectsAfterThePeerClosesWhileRetriesLast) {
  // max_retries = 2 (Flink's maxRetry): attempt 1 ends, 1 < 2, so one
  // reconnection; when the second ends, 2 < 2 fails and the input ends.
  Listener listener;
  std::thread server([&] {
    for (const char* text : {"first\npartial", "second\n"}) {
      const int conn = listener.Accept();
      ASSERT_GE(conn, 0);
      WriteAll(conn, text);
      close(conn);
    }
  });
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = "127.0.0.1";
  spec.port = listener.port();
  spec.max_retries = 2;
  spec.retry_delay_ms = 50;
  auto log = std::make_shared<std::vector<std::string>>();
  spec.on_retry = [log](const std::string& m) { log->push_back(m); };
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  auto out = env.read_lines<std::string>(
                    spec,
                    [](std::string_view l, const LineLocation& where) {
                      return std::string(l) + "@" + std::to_string(where.line_number);
                    },
                    "retrying socket")
                 .collect();
  JobResult r = env.execute();
  server.join();
  ASSERT_TRUE(r.ok()) << r.status;
  // A line is not joined across connections; line numbers go on.
  EXPECT_EQ(out->values(), (std::vector<std::string>{"first@1", "partial@2", "second@3"}));
  EXPECT_EQ(r.CounterTotal("socketConnectAttempts"), 2);
  ASSERT_EQ(log->size(), 2u);
  const std::string where = "127.0.0.1:" + std::to_string(listener.port());
  EXPECT_EQ((*log)[0], "connection to " + where + " closed by the peer; attempt 2 of 2 in 50 ms");
  EXPECT_EQ((*log)[1], "connection to " + where +
                           " closed by the peer after 2 connections (--socket-retries=2): end "
                           "of input");
}

TEST(SocketSource, MaxRetriesOneIsOneConnectionAsInFlink) {
  // Flink's SocketTextStreamFunction: after the first connection ends,
  // attempt = 1 and 1 < maxNumRetries (1) is false: the source ends without
  // reconnecting.  The listener stays open (a reconnection would be
  // accepted by the kernel and wait for ever), so a second connection would
  // hang the job.
  Listener listener;
  std::thread server([&] {
    const int conn = listener.Accept();
    ASSERT_GE(conn, 0);
    WriteAll(conn, "only\n");
    close(conn);
  });
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = "127.0.0.1";
  spec.port = listener.port();
  spec.max_retries = 1;
  spec.retry_delay_ms = 50;
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  auto out = env.read_lines<std::string>(
                    spec, [](std::string_view l, const LineLocation&) { return std::string(l); },
                    "one connection")
                 .collect();
  JobClient client = env.execute_async();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!client.done() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool ended = client.done();
  if (!ended) client.cancel();  // the failure below says why
  JobResult r = client.wait();
  server.join();
  ASSERT_TRUE(ended) << "the source reconnected instead of ending";
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(out->values(), (std::vector<std::string>{"only"}));
  EXPECT_EQ(r.CounterTotal("socketConnectAttempts"), 1);
}

TEST(SocketSource, GivesUpAfterMaxRetriesAndSaysSo) {
  const int port = ClosedPort();
  auto log = std::make_shared<std::vector<std::string>>();
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = "127.0.0.1";
  spec.port = port;
  spec.max_retries = 2;
  spec.on_retry = [log](const std::string& m) { log->push_back(m); };
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.read_lines<std::string>(
         spec, [](std::string_view l, const LineLocation&) { return std::string(l); }, "s")
      .add_sink([](std::string) {});
  JobResult r = env.execute();
  ASSERT_FALSE(r.ok());
  // Two attempts in all, as Flink counts maxRetry.
  EXPECT_EQ(r.CounterTotal("socketConnectAttempts"), 2);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  EXPECT_NE(std::string(r.status.message())
                .find("cannot connect to " + where +
                      ": Connection refused (gave up after 2 attempts, 500 ms apart)"),
            std::string::npos)
      << r.status;
  ASSERT_EQ(log->size(), 1u);
  EXPECT_EQ((*log)[0],
            "cannot connect to " + where + ": Connection refused; attempt 2 of 2 in 500 ms");
}

TEST(SocketSource, CancelWhileWaitingToRetry) {
  const int port = ClosedPort();
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.socket_text_stream("127.0.0.1", port, '\n', -1).add_sink([](std::string) {});
  JobClient client = env.execute_async();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (Attempts(client.metrics()) < 1 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  client.cancel();
  JobResult r = client.wait();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled) << r.status;
}

// ---------------------------------------------------------------------------
// Over-long lines.

TEST(SocketSource, OverLongLineFailsTheJobAsSoonAsItPassesTheLimit) {
  // The peer sends 8 MiB of one line and keeps the connection open: the job
  // fails once 1 MiB has passed, without waiting for the line to end, and
  // the error quotes a bounded prefix.
  Listener listener;
  std::atomic<bool> done{false};
  std::thread feeder([&] {
    const int conn = listener.Accept();
    ASSERT_GE(conn, 0);
    const std::string block(1 << 16, 'z');
    for (int i = 0; i < 128; ++i)
      if (send(conn, block.data(), block.size(), MSG_NOSIGNAL) < 0) break;
    while (!done.load()) std::this_thread::yield();
    close(conn);
  });
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kSocket;
  spec.host = "127.0.0.1";
  spec.port = listener.port();
  spec.max_line_length = 1 << 20;
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2);
  env.read_lines<std::string>(
         spec, [](std::string_view l, const LineLocation&) { return std::string(l); }, "long")
      .add_sink([](std::string) {});
  JobResult r = env.execute();
  done = true;
  feeder.join();
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status.message());
  EXPECT_LT(msg.size(), 1024u);
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(listener.port()) +
                     ":1: line is longer than 1048576 bytes (more than 1048576): 'zzzz"),
            std::string::npos)
      << msg;
}

// ---------------------------------------------------------------------------
// Files.

using tidemark::testing::TempDir;

TEST(FileSource, SplitFileGivesEveryLineExactlyOnce) {
  TempDir dir;
  for (int variant = 0; variant < 6; ++variant) {
    std::vector<std::string> lines;
    std::string content;
    const int n = variant == 0 ? 3 : 500 * variant;
    for (int i = 0; i < n; ++i) {
      // varied lengths, some empty lines, so split points fall anywhere
      std::string line = i % 17 == 0 ? "" : "line-" + std::to_string(i) + std::string(i % 23, '.');
      lines.push_back(line);
      content += line + "\n";
    }
    if (variant % 2 == 1) {  // last line without a newline
      lines.push_back("tail");
      content += "tail";
    }
    const std::string f = dir.File("split" + std::to_string(variant) + ".txt", content);
    for (int p : {1, 2, 3, 7}) {
      StreamExecutionEnvironment env;
      env.set_parallelism(p).set_worker_threads(2);
      auto out = env.read_text_file(f).collect();
      JobResult r = env.execute();
      ASSERT_TRUE(r.ok()) << r.status;
      auto got = out->values();
      std::sort(got.begin(), got.end());
      auto want = lines;
      std::sort(want.begin(), want.end());
      ASSERT_EQ(got, want) << "variant " << variant << " p=" << p;
    }
  }
}

TEST(FileSource, ThreeSubtasksShareTheFileAndKeepLocalOrder) {
  TempDir dir;
  std::string content;
  for (int i = 0; i < 3000; ++i) content += std::to_string(i) + "\n";
  const std::string f = dir.File("numbers.txt", content);
  StreamExecutionEnvironment env;
  env.set_parallelism(3).set_worker_threads(2);
  auto out = env.read_text_file(f).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  std::map<int, std::vector<int>> by;
  for (const auto& it : out->items()) by[it.subtask].push_back(std::stoi(it.value));
  ASSERT_EQ(by.size(), 3u) << "every subtask reads a part";
  size_t total = 0;
  for (auto& [s, v] : by) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end())) << "subtask " << s;
    total += v.size();
  }
  EXPECT_EQ(total, 3000u);
}

// A directory is read as Flink's readTextFile reads one: every file in it,
// not its subdirectories' files nor the hidden ones (".*", "_*",
// "*_COPYING_*"); an empty directory is an empty input (it failed with "Is
// a directory").
TEST(FileSource, ADirectoryIsReadFileByFileLeavingOutHiddenFilesAndSubdirectories) {
  TempDir dir;
  std::vector<std::string> want;
  for (int k = 0; k < 5; ++k) {
    std::string content;
    for (int i = 0; i < 50 + k; ++i) {
      const std::string line = "f" + std::to_string(k) + ":" + std::to_string(i);
      content += line + "\n";
      want.push_back(line);
    }
    dir.File("part-" + std::to_string(k), content);
  }
  dir.File(".hidden", "h1\n");
  dir.File("_SUCCESS", "h2\n");
  dir.File("part-9._COPYING_", "h3\n");
  std::filesystem::create_directory(dir.Path("nested"));
  dir.File("nested/deeper.txt", "h4\n");
  std::sort(want.begin(), want.end());
  for (int p : {1, 2, 3}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(p).set_worker_threads(2);
    auto out = env.read_text_file(dir.Path("")).collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    std::vector<std::string> got = out->values();
    std::map<std::string, std::vector<int>> by_file;
    for (const std::string& line : got) {
      const size_t colon = line.find(':');
      by_file[line.substr(0, colon)].push_back(std::stoi(line.substr(colon + 1)));
    }
    for (const auto& [file, numbers] : by_file)
      EXPECT_TRUE(std::is_sorted(numbers.begin(), numbers.end())) << file << " p=" << p;
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << "p=" << p;
  }
  TempDir empty;
  StreamExecutionEnvironment env;
  env.set_parallelism(2).set_worker_threads(2);
  auto out = env.read_text_file(empty.Path("")).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(out->values().empty());
}

TEST(FileSource, OneFilePerSubtask) {
  TempDir dir;
  std::vector<std::string> files;
  for (int k = 0; k < 3; ++k) {
    std::string content;
    for (int i = 0; i < 100 + k; ++i)
      content += "f" + std::to_string(k) + ":" + std::to_string(i) + "\n";
    files.push_back(dir.File("part" + std::to_string(k), content));
  }
  StreamExecutionEnvironment env;
  env.set_parallelism(3).set_worker_threads(2);
  // the source's parallelism is the number of files; forward keeps each
  // file's lines on its subtask all the way to the sink
  auto out =
      env.read_text_files(files).forward().map([](const std::string& s) { return s; }).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  std::map<int, std::vector<std::string>> by;
  for (const auto& it : out->items()) by[it.subtask].push_back(it.value);
  ASSERT_EQ(by.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    ASSERT_EQ(by[k].size(), static_cast<size_t>(100 + k));
    for (int i = 0; i < 100 + k; ++i)
      EXPECT_EQ(by[k][i], "f" + std::to_string(k) + ":" + std::to_string(i));
  }
}

TEST(FileSource, MissingFileErrorNamesTheFile) {
  TempDir dir;
  const std::string missing = "/nonexistent-dir-tidemark/missing-input.txt";
  {
    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2);
    env.read_text_file(missing).add_sink([](std::string) {});
    JobResult r = env.execute();
    ASSERT_FALSE(r.ok());
    EXPECT_NE(std::string(r.status.message()).find(missing), std::string::npos) << r.status;
  }
  {
    const std::string ok = dir.File("ok.txt", "a\nb\n");
    StreamExecutionEnvironment env;
    env.set_worker_threads(2);
    env.read_text_files({ok, missing}).add_sink([](std::string) {});
    JobResult r = env.execute();
    ASSERT_FALSE(r.ok());
    const std::string msg(r.status.message());
    EXPECT_NE(msg.find(missing), std::string::npos) << msg;
    EXPECT_NE(msg.find("(subtask 1 of 2)"), std::string::npos) << msg;
  }
}

TEST(FileSource, SplitFileOnAFifoIsReadWholeByTheFirstSubtask) {
  // A FIFO has no byte ranges to split: the first subtask reads it all, and
  // opening it does not wait for the writer.
  signal(SIGPIPE, SIG_IGN);
  TempDir dir;
  const std::string fifo = dir.File("placeholder", "") + ".fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int fd = -1;
    while (fd < 0 && !stop.load()) {  // until the job has opened it for reading
      fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (fd < 0) return;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::string text;
    for (int i = 0; i < 1000; ++i) text += std::to_string(i) + "\n";
    WriteAll(fd, text);
    close(fd);
  });
  StreamExecutionEnvironment env;
  env.set_parallelism(2).set_worker_threads(2);
  auto out = env.read_text_file(fifo).collect();
  JobResult r = env.execute();
  stop = true;
  writer.join();
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<int> got;
  for (const auto& it : out->items()) got.push_back(std::stoi(it.value));
  std::sort(got.begin(), got.end());
  ASSERT_EQ(got.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(got[i], i);
}

TEST(FileSource, EmptyFile) {
  TempDir dir;
  const std::string f = dir.File("empty.txt", "");
  StreamExecutionEnvironment env;
  env.set_parallelism(3).set_worker_threads(2);
  auto out = env.read_text_file(f).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(out->size(), 0u);
}

}  // namespace
}  // namespace tidemark
