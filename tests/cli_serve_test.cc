// `tidemark run --serve`: the live view of a running job.  The job reads two
// FIFOs the test keeps open, so it runs until the test closes them; the test
// writes a line to each now and then (the writer's pace, not a way of
// waiting: every wait is for a condition, with a generous limit).  The server
// binds port 0 and prints the port it got on stderr.  Checked: the JSON state
// holds both window subtasks' channels with their watermarks, headless
// Chromium renders them in the page, the state says "finished" while the
// server lingers (--serve-linger), and a signal ends the lingering cleanly.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using namespace std::chrono_literals;
using testing::CliProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::ShellQuote;
using testing::TempPath;

// Waits for `p` to print its live view's address ("live view at
// http://127.0.0.1:PORT/") and reads the port.
::testing::AssertionResult LiveViewPort(CliProcess& p, int* port) {
  if (!p.WaitForErr("live view at http://127.0.0.1:", 60s) || !p.WaitForErr("/\n", 10s))
    return ::testing::AssertionFailure() << "no live view address in: " << p.err();
  std::smatch m;
  const std::string err = p.err();
  if (!std::regex_search(err, m, std::regex("live view at http://127\\.0\\.0\\.1:(\\d+)/")) ||
      !absl::SimpleAtoi(m[1].str(), port))
    return ::testing::AssertionFailure() << "no port in: " << err;
  return ::testing::AssertionSuccess();
}

std::string Chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::system(absl::StrCat("test -x ", c).c_str()) == 0) return c;
  }
  const std::string setup = absl::StrCat(TIDEMARK_SOURCE_DIR, "/tools/setup.sh --with-chromium");
  if (std::system((setup + " > /dev/null 2>&1").c_str()) != 0) return "";
  return std::system("test -x /usr/bin/chromium") == 0 ? "/usr/bin/chromium" : "";
}

// GET `path`; "" when the server did not answer 200.
std::string Get(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  auto res = client.Get(path.c_str());
  return res && res->status == 200 ? res->body : "";
}

TEST(CliServe, RefusesAnAddressThatIsNotLoopback) {
  const std::string in = TempPath("serve_refuse.txt");
  testing::WriteFile(in, "k,1000\n");
  for (const char* bad : {"0.0.0.0:8080", "192.168.1.10:8080", "[::]:8080", "example.com:80"}) {
    testing::CliRun r = testing::RunTidemark(
        {"run", "--input=" + in, "--fields=key,ts", absl::StrCat("--serve=", bad)});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("loopback address only")) << bad;
    EXPECT_EQ(r.out, "") << "nothing may run: " << bad;
  }
  testing::CliRun r =
      testing::RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--serve-linger=1s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--serve-linger needs --serve"));
}

TEST(CliServe, PageShowsTheRunningJobsChannelsAndWatermarks) {
  testing::FifoInputs inputs("serve", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=50ms",
                                   "--window=tumbling:1s",
                                   "--serve=127.0.0.1:0",
                                   "--serve-linger=120s"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  int64_t ts = 1000;
  auto write_lines = [&] {
    ts += 400;
    for (size_t i = 0; i < inputs.size(); ++i) {
      // Source 1 runs behind: it holds the aligned minimum back.
      ASSERT_TRUE(inputs.Write(i, absl::StrCat("k", ts % 7, ",", i == 0 ? ts : ts / 2)));
    }
  };
  write_lines();

  // The port the server got, from stderr.
  int port = 0;
  ASSERT_TRUE(LiveViewPort(p, &port));

  // The state of the running job: both window subtasks, each with both
  // channels at a real watermark, and who holds the minimum back.
  std::string state;
  auto has_channels = [&](const std::string& s) {
    return s.find("\"status\":\"running\"") != std::string::npos &&
           std::regex_search(s, std::regex("\"windows\":\\[\\{\"subtask\":0,.*\"channels\":\\[\\{"
                                           "\"channel\":0,\"watermark\":\\d+.*\\{\"channel\":1,"
                                           "\"watermark\":\\d+.*\\{\"subtask\":1,.*\"channel\":1,"
                                           "\"watermark\":\\d+"));
  };
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!has_channels(state) && std::chrono::steady_clock::now() < deadline) {
    write_lines();
    std::this_thread::sleep_for(200ms);  // the writer's pace
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_TRUE(has_channels(state)) << state;
  EXPECT_THAT(state, HasSubstr("\"sources\":[{\"subtask\":0,\"watermark\":"));
  EXPECT_THAT(state, HasSubstr("\"holding\":1"));
  EXPECT_THAT(state, HasSubstr("\"watermark_text\":\"1970-01-01 00:00:"));
  const std::string events = Get(port, "/api/events?since=0");
  EXPECT_THAT(events, HasSubstr("\"kind\":\"channel\""));
  EXPECT_THAT(events, HasSubstr("\"kind\":\"source_watermark\""));

  // The page in headless Chromium, while the job runs: the script drew a
  // row per channel with its watermark.
  const std::string chromium = Chromium();
  ASSERT_FALSE(chromium.empty()) << "chromium could not be installed";
  const std::string dom_file = TempPath("serve.dom");
  const std::string cmd =
      absl::StrCat(chromium,
                   " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                   " --disable-background-networking --disable-component-update --disable-sync"
                   " --virtual-time-budget=3000 --user-data-dir=",
                   ShellQuote(TempPath("serve_profile")), " --dump-dom http://127.0.0.1:", port,
                   "/ > ", ShellQuote(dom_file), " 2>/dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string dom = ReadFile(dom_file);
  EXPECT_THAT(dom, HasSubstr("data-status=\"running\""));
  for (int ws = 0; ws < 2; ++ws) {
    for (int ch = 0; ch < 2; ++ch) {
      EXPECT_TRUE(std::regex_search(
          dom, std::regex(absl::StrCat(
                   "<tr class=\"channel-row[^\"]*\" data-subtask=\"", ws, "\" data-channel=\"", ch,
                   "\" data-watermark=\"\\d+\" data-aligned=\"(true|false)\"><td>", ch,
                   "</td><td class=\"wm\">1970-01-01 00:00:"))))
          << "window " << ws << " channel " << ch << " in\n"
          << dom;
    }
  }
  EXPECT_THAT(dom, HasSubstr("holds the minimum back"));
  EXPECT_THAT(dom, HasSubstr("class=\"source-row"));
  EXPECT_EQ(dom.find("src=\"http"), std::string::npos) << "nothing from the network";

  // End of input: the job finishes, the server lingers with the final state.
  inputs.Close();
  const auto end_deadline = std::chrono::steady_clock::now() + 60s;
  while (state.find("\"status\":\"finished\"") == std::string::npos &&
         std::chrono::steady_clock::now() < end_deadline) {
    std::this_thread::sleep_for(100ms);
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  EXPECT_THAT(state, HasSubstr("\"status\":\"finished\""));
  EXPECT_THAT(state, HasSubstr("\"end_of_input\":"));
  ASSERT_TRUE(p.WaitForErr("(--serve-linger)", 30s)) << p.err();
  // A signal ends the lingering; the server stops and the process exits.
  kill(p.pid(), SIGINT);
  EXPECT_EQ(p.Wait(30s), 0) << p.err();
  EXPECT_THAT(p.err(), HasSubstr("window results"));
}

// GET / in headless Chromium; the DOM after the page's script ran.
std::string DumpDom(const std::string& chromium, int port, const std::string& name) {
  const std::string dom_file = TempPath(name + ".dom");
  const std::string cmd =
      absl::StrCat(chromium,
                   " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                   " --disable-background-networking --disable-component-update --disable-sync"
                   " --virtual-time-budget=3000 --user-data-dir=",
                   ShellQuote(TempPath(name + "_profile")), " --dump-dom http://127.0.0.1:", port,
                   "/ > ", ShellQuote(dom_file), " 2>/dev/null");
  if (std::system(cmd.c_str()) != 0) return "";
  return ReadFile(dom_file);
}

// Issue 27 item 1: the valve's status.  Source 1 goes idle while source 0
// runs on, then comes back far behind: Flink's valve keeps its channel
// unaligned (not counted) until it catches up.  The state says so per
// channel ("aligned": false), "held back by" names channel 0 (the lowest
// aligned channel), never the unaligned one below it, and the page shows
// both.  After the end of input the page says the input ended (it said "MAX
// (held back by channel 0)").
TEST(CliServe, AChannelBackFromIdlenessIsShownUnalignedAndTheEndAsSuch) {
  testing::FifoInputs inputs("serveidle", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=20ms",
                                   "--idleness=2s",  // far above a stall of the writer
                                   "--window=tumbling:1s",
                                   "--serve=127.0.0.1:0",
                                   "--serve-linger=120s"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  int port = 0;
  ASSERT_TRUE(LiveViewPort(p, &port));

  // Channel 1 of both window subtasks: idle, then active and unaligned.
  auto channel1 = [](const std::string& idle, const std::string& aligned) {
    return std::regex(
        "\\{\"channel\":1,\"watermark\":\\d+,\"watermark_text\":\"[^\"]*\",\"idle\":" + idle +
        ",\"aligned\":" + aligned + "\\}");
  };
  auto both = [](const std::string& s, const std::regex& r) {
    return std::distance(std::sregex_iterator(s.begin(), s.end(), r), std::sregex_iterator()) == 2;
  };
  int64_t ts0 = 1000;
  ASSERT_TRUE(inputs.Write(1, "b,1000"));
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!both(state, channel1("true", "false")) && std::chrono::steady_clock::now() < deadline) {
    ts0 += 200;
    ASSERT_TRUE(inputs.Write(0, absl::StrCat("a", ts0 % 5, ",", ts0)));
    std::this_thread::sleep_for(50ms);  // the writer's pace: source 1 writes nothing
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_TRUE(both(state, channel1("true", "false"))) << "source 1 never went idle: " << state;

  const std::string chromium = Chromium();
  ASSERT_FALSE(chromium.empty()) << "chromium could not be installed";
  // Back, far behind: a writer at its pace keeps both sources active, source
  // 0 well ahead (source 1 never catches up while it runs).
  std::atomic<bool> stop{false};
  std::atomic<int64_t> ts0_now{ts0 + 10000};
  std::thread writer([&] {
    int64_t ts1 = 1500, t0 = ts0_now.load();
    while (!stop.load()) {
      t0 += 400;
      ts1 += 10;
      if (!inputs.Write(0, absl::StrCat("a", t0 % 5, ",", t0)) ||
          !inputs.Write(1, absl::StrCat("b", ts1 % 5, ",", ts1)))
        return;
      std::this_thread::sleep_for(50ms);  // the writer's pace (idleness is 2 s)
    }
  });
  deadline = std::chrono::steady_clock::now() + 60s;
  while (!both(state, channel1("false", "false")) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  EXPECT_TRUE(both(state, channel1("false", "false"))) << state;
  // Channel 0 is aligned and holds the minimum, in both window subtasks.
  EXPECT_TRUE(both(state, std::regex("\\{\"channel\":0,\"watermark\":\\d+,\"watermark_text\":\"["
                                     "^\"]*\",\"idle\":false,\"aligned\":true\\}")))
      << state;
  EXPECT_TRUE(both(state, std::regex("\"holding\":0,\"idle\":false,\"input_ended\":false")))
      << state;
  EXPECT_EQ(state.find("\"holding\":1"), std::string::npos) << state;

  const std::string dom = DumpDom(chromium, port, "serveidle");
  stop = true;
  writer.join();
  for (int ws = 0; ws < 2; ++ws) {
    EXPECT_TRUE(std::regex_search(
        dom, std::regex(absl::StrCat("<tr class=\"channel-row unaligned\" data-subtask=\"", ws,
                                     "\" data-channel=\"1\" data-watermark=\"\\d+\" "
                                     "data-aligned=\"false\">.*?unaligned: back from idleness"))))
        << "window " << ws << "\n"
        << dom;
    EXPECT_TRUE(std::regex_search(
        dom, std::regex(absl::StrCat("<tr class=\"channel-row holding\" data-subtask=\"", ws,
                                     "\" data-channel=\"0\" data-watermark=\"\\d+\" "
                                     "data-aligned=\"true\">"))))
        << "window " << ws << "\n"
        << dom;
  }
  EXPECT_THAT(dom, HasSubstr("(held back by channel 0)"));
  EXPECT_THAT(dom, Not(HasSubstr("held back by channel 1)")));

  // The end of input.
  inputs.Close();
  deadline = std::chrono::steady_clock::now() + 60s;
  while (state.find("\"status\":\"finished\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_THAT(state, HasSubstr("\"status\":\"finished\""));
  EXPECT_TRUE(both(state, std::regex("\"holding\":-1,\"idle\":false,\"input_ended\":true")))
      << state;
  const std::string end_dom = DumpDom(chromium, port, "serveidle_end");
  EXPECT_THAT(end_dom, HasSubstr("data-status=\"finished\""));
  for (int ws = 0; ws < 2; ++ws) {
    EXPECT_TRUE(std::regex_search(
        end_dom, std::regex(absl::StrCat("<p class=\"aligned\" data-subtask=\"", ws,
                                         "\" data-watermark=\"\\d+\" data-ended=\"true\">input "
                                         "ended: every channel is at its end \\(MAX\\)"))))
        << end_dom;
  }
  // (The script's own text has "held back by channel ' + ...".)
  EXPECT_THAT(end_dom, Not(HasSubstr("held back by channel 0)")));
  EXPECT_THAT(end_dom, Not(HasSubstr("held back by channel 1)")));
  kill(p.pid(), SIGINT);
  EXPECT_EQ(p.Wait(30s), 0) << p.err();
}

// Input 0 ends (MAX) while input 1 is idle: the valve leaves the idle
// channel out, so the windows' minimum is MAX, as in Flink; but input 1 has
// not ended (its later records come late), and the state says so: the input
// ended only once every channel is at MAX.
TEST(CliServe, AnEndedInputBesideAnIdleOneIsNotTheEndOfTheInput) {
  testing::FifoInputs inputs("serveended", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=20ms",
                                   "--idleness=300ms",
                                   "--window=tumbling:1s",
                                   "--serve=127.0.0.1:0",
                                   "--serve-linger=120s"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  int port = 0;
  ASSERT_TRUE(LiveViewPort(p, &port));
  auto count = [](const std::string& s, const std::string& re) {
    const std::regex r(re);
    return std::distance(std::sregex_iterator(s.begin(), s.end(), r), std::sregex_iterator());
  };
  const std::string at_max = "\"aligned\":9223372036854775807,[^{]*\"holding\":-1,";
  ASSERT_TRUE(inputs.Write(1, "b,100"));
  ASSERT_TRUE(inputs.Write(0, "a,1000"));
  // Input 0 ends once its source has read the line: closed before the
  // source opened it, the FIFO would drop the line and never end.
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  const std::string read_0 = "\\{\"subtask\":0,[^}]*\"records\":1\\}";
  while (count(state, read_0) != 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_EQ(count(state, read_0), 1) << state;
  inputs.CloseInput(0);
  deadline = std::chrono::steady_clock::now() + 60s;
  while (count(state, at_max) != 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_EQ(count(state, at_max), 2) << state;
  EXPECT_EQ(count(state, "\"input_ended\":false"), 2) << state;
  EXPECT_EQ(state.find("\"input_ended\":true"), std::string::npos) << state;

  inputs.Close();
  deadline = std::chrono::steady_clock::now() + 60s;
  while (state.find("\"status\":\"finished\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_THAT(state, HasSubstr("\"status\":\"finished\""));
  EXPECT_EQ(count(state, "\"input_ended\":true"), 2) << state;
}

// Issue 23 item 3: a failed checkpoint reaches the live view when it fails:
// an event in the feed, counted in the state's kinds.  Checkpoint 1 is
// written through a link to /dev/full (a full disk); one failure is
// tolerated, so the job goes on (its input, a FIFO, stays open meanwhile).
TEST(CliServe, AFailedCheckpointIsInTheLiveView) {
  const std::string chk = TempPath("serve-chk");
  std::filesystem::remove_all(chk);
  std::filesystem::create_directories(chk + "/chk-1");
  std::filesystem::create_symlink("/dev/full", chk + "/chk-1/.0-0.state.tmp");
  testing::FifoInputs inputs("servechk", 1);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--window=tumbling:1s",
                                   "--checkpoint-dir=" + chk,
                                   "--checkpoint-interval=5ms",
                                   "--tolerable-failed-checkpoints=1",
                                   "--serve=127.0.0.1:0"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  ASSERT_TRUE(inputs.Write(0, "a,1000"));
  ASSERT_TRUE(p.WaitForErr("tidemark: checkpoint failed: checkpoint 1: ", 60s)) << p.err();
  std::smatch m;
  const std::string err = p.err();
  ASSERT_TRUE(std::regex_search(err, m, std::regex("live view at http://127\\.0\\.0\\.1:(\\d+)/")));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(m[1].str(), &port));
  // The listener published the event before it returned; the line on
  // stderr came first, so wait for the state to show it.
  std::string state;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (state.find("\"checkpoint_failed\":1") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  EXPECT_THAT(state, HasSubstr("\"checkpoint_failed\":1"));
  EXPECT_THAT(state, HasSubstr("\"status\":\"running\""));
  const std::string events = Get(port, "/api/events?since=0");
  EXPECT_THAT(events, HasSubstr("\"kind\":\"checkpoint_failed\""));
  EXPECT_THAT(events, HasSubstr("No space left on device"));
  inputs.Close();
  EXPECT_EQ(p.Wait(60s), 0) << p.err();
  std::filesystem::remove_all(chk);
}

// Issue 27 item 1: the job graph, the checkpoints and the live charts of a
// running job.  Two FIFO inputs the test keeps open (a writer at its pace),
// checkpoints every 100 ms, late records to a side output.  /api/state holds
// the graph (the source chain, "window -> print" and "late"; a HASH edge of
// 4 channels and the side output's FORWARD edge of 2; every subtask's
// watermark and back-pressure), the checkpoints (completed ones, the last
// with its time, duration, size and alignment) and the history of each
// channel's watermark and of the aligned minimum, whose last values are the
// ones the window tables show.  Headless Chromium draws them: the DOM holds
// the vertices, the edges, a polyline per channel and the aligned minimum
// (legend colours matching), the checkpoint panel; a screenshot goes to
// build/tests/artifacts/live-view.png (its path printed).
TEST(CliServe, GraphCheckpointsAndChartsOfARunningJob) {
  const std::string chk = TempPath("serve-graph-chk");
  std::filesystem::remove_all(chk);
  testing::FifoInputs inputs("servegraph", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=20ms",
                                   "--window=tumbling:1s",
                                   "--late=side",
                                   "--checkpoint-dir=" + chk,
                                   "--checkpoint-interval=100ms",
                                   "--serve=127.0.0.1:0",
                                   "--serve-linger=120s"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  int port = 0;
  ASSERT_TRUE(LiveViewPort(p, &port));

  // The writer: source 0 ahead, source 1 behind (it holds the minimum).
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    int64_t ts = 1000;
    while (!stop.load()) {
      ts += 100;
      if (!inputs.Write(0, absl::StrCat("a", ts % 5, ",", ts)) ||
          !inputs.Write(1, absl::StrCat("b", ts % 3, ",", ts / 2)))
        return;
      std::this_thread::sleep_for(20ms);  // the writer's pace
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& t;
    ~Join() {
      stop = true;
      if (t.joinable()) t.join();
    }
  } join{stop, writer};

  auto count = [](const std::string& s, const std::string& re) {
    const std::regex r(re);
    return std::distance(std::sregex_iterator(s.begin(), s.end(), r), std::sregex_iterator());
  };
  // Ready: two checkpoints completed, and each window subtask's channels and
  // aligned minimum have a history of a few points past MIN.
  auto ready = [&](const std::string& s) {
    std::smatch c;
    if (!std::regex_search(s, c,
                           std::regex("\"checkpoints\":\\{\"enabled\":true,\"in_progress\":-?"
                                      "\\d+,\"in_progress_ms\":[0-9.]+,\"completed\":(\\d+)")))
      return false;
    if (std::stoi(c[1]) < 2) return false;
    return count(s,
                 "\\{\"kind\":\"event_time\",\"subtask\":[01],\"channel\":(-1|0|1),\"points\":"
                 "\\[(\\[[0-9.]+,-?\\d+\\],){2,}\\[[0-9.]+,\\d+\\]\\]") == 6;
  };
  std::string state;
  auto deadline = std::chrono::steady_clock::now() + 90s;
  while (!ready(state) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_TRUE(ready(state)) << state;

  // The graph.
  EXPECT_THAT(state, HasSubstr("\"graph\":{\"vertices\":[{\"id\":0,\"name\":\"Source: input -> "
                               "Timestamps/Watermarks -> Drop markers\",\"operators\":[\"Source: "
                               "input\",\"Timestamps/Watermarks\",\"Drop markers\"],"
                               "\"parallelism\":2,\"source\":true,"));
  EXPECT_THAT(state, HasSubstr("{\"id\":1,\"name\":\"window -> print\",\"operators\":[\"window\","
                               "\"print\"],\"parallelism\":2,\"source\":false,"));
  EXPECT_THAT(state, HasSubstr("{\"id\":2,\"name\":\"late\",\"operators\":[\"late\"],"
                               "\"parallelism\":2,\"source\":false,"));
  EXPECT_THAT(state,
              HasSubstr("\"edges\":[{\"id\":0,\"from\":0,\"to\":1,\"ship_strategy\":\"HASH\","
                        "\"partitioning\":\"HASH(key groups, maxP=128)\","
                        "\"side_output\":\"\",\"channels\":4,\"fill\":"));
  EXPECT_THAT(state, HasSubstr("{\"id\":1,\"from\":1,\"to\":2,\"ship_strategy\":\"FORWARD\","
                               "\"partitioning\":\"FORWARD\",\"side_output\":\"late\","
                               "\"channels\":2,\"fill\":"));
  // Every subtask (2 + 2 + 2) with a watermark, fills and a level; the
  // window subtasks past MIN.
  const std::string sub =
      "\\{\"subtask\":[01],\"watermark\":-?\\d+,\"watermark_text\":\"[^\"]*\",\"input_fill\":[0-9."
      "]+,\"output_fill\":[0-9.]+,\"backpressure\":\"(ok|low|high)\",\"records_in\":\\d+,"
      "\"records_out\":\\d+,\"finished\":false\\}";
  EXPECT_EQ(count(state, sub), 6) << state;
  EXPECT_TRUE(std::regex_search(
      state, std::regex("\"id\":1,\"name\":\"window -> print\"[^\\]]*\\],\"parallelism\":2,"
                        "\"source\":false,\"watermark\":\\d+,[^\\]]*\"subtasks\":\\[\\{"
                        "\"subtask\":0,\"watermark\":\\d+,[^\\]]*\\{\"subtask\":1,"
                        "\"watermark\":\\d+,")))
      << state;
  EXPECT_EQ(count(state, "\"backpressure\":\"(ok|low|high)\""), 3 + 6 + 2) << state;

  // The checkpoints: the last completed just now, nothing failed.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      state, m,
      std::regex("\"completed\":\\d+,\"failed\":0,\"last_completed\":\\{\"id\":\\d+,"
                 "\"at_unix_ms\":(\\d+),\"at_text\":\"\\d{4}-\\d\\d-\\d\\d [^\"]+\","
                 "\"duration_ms\":[0-9.]+,\"size_bytes\":[1-9]\\d*,\"alignment_ms\":[0-9.]+\\}")))
      << state;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  EXPECT_LE(std::abs(now_ms - std::stoll(m[1])), 300'000) << state;
  EXPECT_THAT(state, HasSubstr("\"last_failure\":\"\""));

  // The history ends with the values the window tables show (both come
  // from one state, under one lock).
  for (int ws = 0; ws < 2; ++ws) {
    std::smatch w;
    ASSERT_TRUE(std::regex_search(
        state, w,
        std::regex(absl::StrCat("\\{\"subtask\":", ws,
                                ",\"aligned\":(\\d+),.*?\"channels\":\\[\\{\"channel\":0,"
                                "\"watermark\":(\\d+),.*?\\{\"channel\":1,\"watermark\":(\\d+),"))))
        << state;
    for (int ch = -1; ch <= 1; ++ch) {
      std::smatch h;
      ASSERT_TRUE(std::regex_search(
          state, h,
          std::regex(absl::StrCat("\\{\"kind\":\"event_time\",\"subtask\":", ws,
                                  ",\"channel\":", ch, ",\"points\":\\[[^\\}]*,(\\d+)\\]\\]\\}"))))
          << state;
      EXPECT_EQ(h[1].str(), w[ch + 2].str()) << "window " << ws << " channel " << ch;
    }
  }

  // The page in headless Chromium.
  const std::string chromium = Chromium();
  if (!chromium.empty()) {
    const std::string dom = DumpDom(chromium, port, "servegraph");
    for (int v = 0; v < 3; ++v) {
      EXPECT_THAT(dom, HasSubstr(absl::StrCat("<g class=\"vertex\" data-vertex=\"", v,
                                              "\" data-parallelism=\"2\"")))
          << dom;
    }
    EXPECT_THAT(dom, HasSubstr(">window</text>"));
    EXPECT_THAT(dom, HasSubstr("<g class=\"edge\" data-edge=\"0\" data-from=\"0\" data-to=\"1\" "
                               "data-ship-strategy=\"HASH\""));
    EXPECT_THAT(dom, HasSubstr("<g class=\"edge\" data-edge=\"1\" data-from=\"1\" data-to=\"2\" "
                               "data-ship-strategy=\"FORWARD\""));
    EXPECT_TRUE(std::regex_search(dom, std::regex("<g class=\"subtask\" data-vertex=\"1\" "
                                                  "data-subtask=\"1\" data-watermark=\"\\d+\" "
                                                  "data-backpressure=\"(ok|low|high)\"")))
        << dom;
    for (int ws = 0; ws < 2; ++ws) {
      for (int ch = 0; ch < 2; ++ch) {
        std::smatch line;
        ASSERT_TRUE(std::regex_search(
            dom, line,
            std::regex(absl::StrCat("<polyline class=\"series channel\" data-kind=\"event_time\" "
                                    "data-subtask=\"",
                                    ws, "\" data-channel=\"", ch,
                                    "\" points=\"[0-9.]+,[0-9.]+ [^\"]+\" fill=\"none\" "
                                    "stroke=\"(#[0-9a-f]{6})\""))))
            << "window " << ws << " channel " << ch << "\n"
            << dom;
        // The legend's swatch has the line's colour.
        EXPECT_TRUE(std::regex_search(
            dom,
            std::regex(absl::StrCat("<div class=\"legend\" data-kind=\"event_time\" "
                                    "data-subtask=\"",
                                    ws, "\">.*?<span class=\"legend-item\" data-channel=\"", ch,
                                    "\" data-colour=\"", line[1].str(),
                                    "\"><svg[^>]*><line [^>]*stroke=\"", line[1].str(), "\""))))
            << "legend of window " << ws << " channel " << ch;
      }
      EXPECT_TRUE(std::regex_search(
          dom,
          std::regex(absl::StrCat("<polyline class=\"series aligned\" data-kind=\"event_time\" "
                                  "data-subtask=\"",
                                  ws, "\" data-channel=\"-1\" points=\"[0-9.]+,[0-9.]+ "))))
          << dom;
    }
    EXPECT_THAT(dom, HasSubstr("aligned minimum</span>"));
    EXPECT_TRUE(std::regex_search(
        dom,
        std::regex("<table id=\"checkpoints\" data-enabled=\"true\" data-in-progress=\"-?\\d+\" "
                   "data-completed=\"[1-9]\\d*\" data-failed=\"0\">")))
        << dom;
    EXPECT_THAT(dom, HasSubstr("last completed</th><td class=\"v\">checkpoint "));
    EXPECT_EQ(dom.find("src=\"http"), std::string::npos) << "nothing from the network";

    const std::string artifacts = absl::StrCat(TIDEMARK_BINARY_DIR, "/artifacts");
    std::filesystem::create_directories(artifacts);
    const std::string png = artifacts + "/live-view.png";
    std::filesystem::remove(png);
    const std::string shot = absl::StrCat(
        chromium,
        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
        " --disable-background-networking --disable-component-update --disable-sync"
        " --hide-scrollbars --window-size=1280,1300 --virtual-time-budget=3000 --user-data-dir=",
        ShellQuote(TempPath("servegraph_shot")), " --screenshot=", ShellQuote(png),
        " http://127.0.0.1:", port, "/ > /dev/null 2>&1");
    EXPECT_EQ(std::system(shot.c_str()), 0);
    EXPECT_GT(ReadFile(png).size(), 10000u) << "screenshot missing or empty: " << png;
    std::cout << "live view screenshot: " << png << std::endl;
  }

  // The end: every subtask finished, no checkpoint in progress.
  stop = true;
  writer.join();
  inputs.Close();
  deadline = std::chrono::steady_clock::now() + 60s;
  while (state.find("\"status\":\"finished\"") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);  // polling the server
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_THAT(state, HasSubstr("\"status\":\"finished\""));
  EXPECT_EQ(count(state, "\"finished\":true\\}"), 6) << state;
  EXPECT_THAT(state, HasSubstr("\"checkpoints\":{\"enabled\":true,\"in_progress\":-1,"));
  kill(p.pid(), SIGINT);
  EXPECT_EQ(p.Wait(30s), 0) << p.err();
  std::filesystem::remove_all(chk);
  if (chromium.empty()) GTEST_SKIP() << "no chromium: the page was not checked";
}

// Issue 27 item 7: generalized watermarks in the live view.  With
// --backlog-watermark each source subtask says backlog=true with its first
// record (FIFOs are read as files: unpaced, backlog until their end); the
// state has, per (task, subtask), the last value sent and combined, and each
// window input channel's value (what its source subtask sent); the page shows
// them in its table; after the end of input every one is false.
TEST(CliServe, BacklogWatermarksAreInTheStateAndThePage) {
  testing::FifoInputs inputs("servebacklog", 2);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",
                                   "--fields=key,ts",
                                   "--parallelism=2",
                                   "--watermarks=bounded:0s",
                                   "--watermark-interval=20ms",
                                   "--window=tumbling:1s",
                                   "--backlog-watermark",
                                   "--serve=127.0.0.1:0",
                                   "--serve-linger=120s"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  CliProcess p(args, CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  int port = 0;
  ASSERT_TRUE(LiveViewPort(p, &port));

  // Window subtask `ws` combined `value`, both its channels carry `value`.
  auto window = [](int ws, const std::string& value) {
    return std::regex(absl::StrCat(
        "\\{\"task\":\"window[^\"]*\",\"subtask\":", ws,
        ",\"identifier\":\"backlog\",\"type\":\"bool\",\"function\":\"or\","
        "\"wait_for_all_channels\":false,\"sent\":null,\"combined\":",
        value,
        ",\"combined_channel\":[01],\"channels\":\\[\\{\"channel\":0,\"from_task\":"
        "\"Source: [^\"]*\",\"from_subtask\":0,\"value\":",
        value,
        "\\},\\{\"channel\":1,\"from_task\":\"Source: [^\"]*\",\"from_subtask\":1,\"value\":",
        value, "\\}\\]\\}"));
  };
  auto source = [](int s, const std::string& value) {
    return std::regex(absl::StrCat("\\{\"task\":\"Source: [^\"]*\",\"subtask\":", s,
                                   ",\"identifier\":\"backlog\",\"type\":\"bool\",\"function\":"
                                   "\"or\",\"wait_for_all_channels\":false,\"sent\":",
                                   value, ",\"combined\":null"));
  };
  auto all = [&](const std::string& s, const std::string& value) {
    return std::regex_search(s, window(0, value)) && std::regex_search(s, window(1, value)) &&
           std::regex_search(s, source(0, value)) && std::regex_search(s, source(1, value));
  };
  std::string state;
  int64_t ts = 1000;
  auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!all(state, "true") && std::chrono::steady_clock::now() < deadline) {
    ts += 100;
    for (size_t i = 0; i < inputs.size(); ++i)
      ASSERT_TRUE(inputs.Write(i, absl::StrCat("k", ts % 5, ",", ts)));
    std::this_thread::sleep_for(50ms);  // the writer's pace
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  ASSERT_TRUE(all(state, "true")) << state;
  EXPECT_THAT(state, HasSubstr("\"status\":\"running\""));
  EXPECT_THAT(Get(port, "/api/events?since=0"), HasSubstr("\"kind\":\"generalized_watermark\""));

  const std::string chromium = Chromium();
  if (!chromium.empty()) {
    const std::string dom = DumpDom(chromium, port, "servebacklog");
    EXPECT_TRUE(std::regex_search(
        dom, std::regex("<tr class=\"gw-row\" data-task=\"window[^\"]*\" data-subtask=\"0\" "
                        "data-identifier=\"backlog\" data-sent=\"-\" data-combined=\"true\">")))
        << dom;
    EXPECT_THAT(dom, HasSubstr("<td class=\"per-channel\">0: true, 1: true</td>"));
  } else {
    std::cerr << "chromium absent: the page's table is not checked\n";
  }

  // The end of input: every source says false, and so the windows.
  inputs.Close();
  deadline = std::chrono::steady_clock::now() + 60s;
  while (!(state.find("\"status\":\"finished\"") != std::string::npos && all(state, "false")) &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
    p.ReadAvailable();
    state = Get(port, "/api/state");
  }
  EXPECT_THAT(state, HasSubstr("\"status\":\"finished\""));
  EXPECT_TRUE(all(state, "false")) << state;
  ASSERT_TRUE(p.WaitForErr("(--serve-linger)", 30s)) << p.err();
  kill(p.pid(), SIGINT);
  EXPECT_EQ(p.Wait(30s), 0) << p.err();
}

}  // namespace
}  // namespace tidemark
