// Tests of the `tidemark` binary: every seed scenario S1-S8 as one command
// line over a file, compared exactly with what the documents show (see
// /shared/seeds/SCENARIOS.md), plus traces, alignment and errors.
//
// The documents' people typed records into `nc` one by one, so a periodic
// watermark followed every record; these tests reproduce that with
// --watermark-interval=per-record (the periodic generator is asked right
// after each record).  The same job over a real socket with a paced writer and
// the real 200 ms-style timer is in cli_socket_test.cc.
//
// The input files end, so at the end every window still open fires with the
// maximum watermark (Flink's end-of-input behaviour); those firings follow the
// documents' outputs in the expected text and are marked "end of input".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli_scenario_args.h"
#include "cli_test_util.h"
#include "tidemark/partitioning/key_groups.h"

namespace tidemark {
namespace {

using testing::CliRun;
using testing::Doc001Args;
using ::testing::ElementsAreArray;
using testing::Filter;
using ::testing::HasSubstr;
using testing::InputFile;
using testing::RunTidemark;
using testing::S8Args;
using testing::S8Lines;
using testing::TempPath;
using testing::VcLines;
using testing::WriteFile;

// "N> " as print() shows it for `key` at window parallelism 2.
std::string Prefix(const std::string& key) {
  return absl::StrCat(SubtaskForKey(key, DefaultMaxParallelism(2), 2) + 1, "> ");
}

std::vector<std::string> WithPrefix(const std::string& key, const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const auto& l : lines) out.push_back(Prefix(key) + l);
  return out;
}

// --- S1: document 000, tumbling 3 s, hand-written max_ts - 10 s generator ---
const std::vector<std::string> kS1 = {
    "0001,1538359882000", "0001,1538359886000", "0001,1538359892000", "0001,1538359893000",
    "0001,1538359894000", "0001,1538359896000", "0001,1538359897000", "0001,1538359899000",
    "0001,1538359891000", "0001,1538359903000"};

std::vector<std::string> S1Args(const std::string& input) {
  return {"run",
          "--input=" + input,
          "--fields=key,ts",
          "--watermarks=lag:10s",
          "--watermark-interval=per-record",
          "--window=tumbling:3s",
          "--aggregate=list",
          "--timezone=Asia/Shanghai",
          "--parallelism=2",
          "--summary=false"};
}

TEST(CliScenarioTest, S1TumblingWithLagGenerator) {
  CliRun r = RunTidemark(S1Args(InputFile("s1.txt", kS1)));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(), ElementsAreArray(WithPrefix(
                                "0001",
                                {// as the document shows, after 10:11:34, 10:11:37 and 10:11:43
                                 "(0001),1,2018-10-01 10:11:22.000,2018-10-01 "
                                 "10:11:22.000,2018-10-01 10:11:21.000,2018-10-01 10:11:24.000",
                                 "(0001),1,2018-10-01 10:11:26.000,2018-10-01 "
                                 "10:11:26.000,2018-10-01 10:11:24.000,2018-10-01 10:11:27.000",
                                 "(0001),2,2018-10-01 10:11:31.000,2018-10-01 "
                                 "10:11:32.000,2018-10-01 10:11:30.000,2018-10-01 10:11:33.000",
                                 // end of input
                                 "(0001),2,2018-10-01 10:11:33.000,2018-10-01 "
                                 "10:11:34.000,2018-10-01 10:11:33.000,2018-10-01 10:11:36.000",
                                 "(0001),2,2018-10-01 10:11:36.000,2018-10-01 "
                                 "10:11:37.000,2018-10-01 10:11:36.000,2018-10-01 10:11:39.000",
                                 "(0001),1,2018-10-01 10:11:39.000,2018-10-01 "
                                 "10:11:39.000,2018-10-01 10:11:39.000,2018-10-01 10:11:42.000",
                                 "(0001),1,2018-10-01 10:11:43.000,2018-10-01 "
                                 "10:11:43.000,2018-10-01 10:11:42.000,2018-10-01 10:11:45.000"})));
}

TEST(CliScenarioTest, S1TraceShowsTheDocumentsTable) {
  std::vector<std::string> args = S1Args(InputFile("s1t.txt", kS1));
  args.push_back("--trace=watermarks");
  CliRun r = RunTidemark(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> records = Filter(r.OutLines(), "key:", true);
  ASSERT_EQ(records.size(), 10u);
  // Rows 1, 9 and 10 of the document's table.
  EXPECT_EQ(
      records[0],
      "key:0001,eventtime:[1538359882000|2018-10-01 10:11:22.000],currentMaxTimestamp:["
      "1538359882000|2018-10-01 10:11:22.000],watermark:[1538359872000|2018-10-01 10:11:12.000]");
  EXPECT_EQ(
      records[8],
      "key:0001,eventtime:[1538359891000|2018-10-01 10:11:31.000],currentMaxTimestamp:["
      "1538359899000|2018-10-01 10:11:39.000],watermark:[1538359889000|2018-10-01 10:11:29.000]");
  EXPECT_EQ(
      records[9],
      "key:0001,eventtime:[1538359903000|2018-10-01 10:11:43.000],currentMaxTimestamp:["
      "1538359903000|2018-10-01 10:11:43.000],watermark:[1538359893000|2018-10-01 10:11:33.000]");
}

// --- S2: document 004, tumbling 10 s, space-separated, late record dropped ---
TEST(CliScenarioTest, S2TumblingTenSecondsOutOfOrder) {
  std::vector<std::string> lines;
  for (int s : {22, 25, 28, 30, 31, 35, 38, 40, 51})
    lines.push_back(absl::StrCat("0001 ", 1569895860000 + s * 1000));
  for (int s : {88, 85, 87, 90, 100, 89})  // 10:12:28, :25, :27, :30, :40, then :29 (too late)
    lines.push_back(absl::StrCat("0001 ", 1569895860000 + s * 1000));
  CliRun r = RunTidemark({"run", "--input=" + InputFile("s2.txt", lines),
                          "--delimiter= ", "--fields=key,ts", "--watermarks=lag:10s",
                          "--watermark-interval=per-record", "--window=tumbling:10s",
                          "--aggregate=list", "--timezone=Asia/Shanghai", "--parallelism=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(),
              ElementsAreArray(WithPrefix(
                  "0001", {"(0001),3,2019-10-01 10:11:22.000,2019-10-01 10:11:28.000,2019-10-01 "
                           "10:11:20.000,2019-10-01 10:11:30.000",
                           "(0001),4,2019-10-01 10:11:30.000,2019-10-01 10:11:38.000,2019-10-01 "
                           "10:11:30.000,2019-10-01 10:11:40.000",
                           "(0001),1,2019-10-01 10:11:40.000,2019-10-01 10:11:40.000,2019-10-01 "
                           "10:11:40.000,2019-10-01 10:11:50.000",
                           "(0001),1,2019-10-01 10:11:51.000,2019-10-01 10:11:51.000,2019-10-01 "
                           "10:11:50.000,2019-10-01 10:12:00.000",
                           "(0001),3,2019-10-01 10:12:25.000,2019-10-01 10:12:28.000,2019-10-01 "
                           "10:12:20.000,2019-10-01 10:12:30.000",
                           // end of input
                           "(0001),1,2019-10-01 10:12:30.000,2019-10-01 10:12:30.000,2019-10-01 "
                           "10:12:30.000,2019-10-01 10:12:40.000",
                           "(0001),1,2019-10-01 10:12:40.000,2019-10-01 10:12:40.000,2019-10-01 "
                           "10:12:40.000,2019-10-01 10:12:50.000"})));
  EXPECT_THAT(r.err, HasSubstr("1 late dropped"));
}

// --- S3-S7: document 001, id,ts_seconds,vc ---
// "window:[10:00:0a--10:00:0b]-<ws_001>--sum: v" for seconds a, b of 2020-01-01.
std::string Sum(int a, int b, int v) {
  auto t = [](int s) { return absl::StrCat("2020-01-01 10:00:", s < 10 ? "0" : "", s); };
  return absl::StrCat(Prefix("ws_001"), "window:[", t(a), "--", t(b), "]-<ws_001>--sum: ", v);
}

TEST(CliScenarioTest, S3TumblingSumInOrderAndOutOfOrder) {
  CliRun in_order =
      RunTidemark(Doc001Args(InputFile("s3a.txt", VcLines({1, 2, 3, 5, 6, 9})), "tumbling:5s"));
  ASSERT_EQ(in_order.exit_code, 0) << in_order.err;
  EXPECT_THAT(in_order.OutLines(),
              ElementsAreArray({Sum(0, 5, 3), /*end of input*/ Sum(5, 10, 3)}));
  CliRun out_of_order =
      RunTidemark(Doc001Args(InputFile("s3b.txt", VcLines({1, 2, 3, 5, 1, 2, 9})), "tumbling:5s"));
  ASSERT_EQ(out_of_order.exit_code, 0) << out_of_order.err;
  EXPECT_THAT(out_of_order.OutLines(), ElementsAreArray({Sum(0, 5, 5), Sum(5, 10, 2)}));
}

TEST(CliScenarioTest, S4AllowedLatenessAndSideOutput) {
  // The same with --local-aggregation: the re-firing and late records pass
  // the pre-aggregation alone.
  for (bool local : {false, true}) {
    SCOPED_TRACE(local ? "--local-aggregation" : "plain");
    std::vector<std::string> args =
        Doc001Args(InputFile("s4.txt", VcLines({1, 2, 3, 8, 1, 2, 3, 9, 1, 2})), "tumbling:5s");
    args.push_back("--allowed-lateness=2s");
    args.push_back("--late=side");
    if (local) args.push_back("--local-aggregation");
    CliRun r = RunTidemark(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The window output and the late side output are two streams; each keeps
    // its order.  At parallelism 2 (Doc001Args) the late lines carry the
    // window subtask, as Flink's print("Side") does ("Side:1> "), the same as
    // the key's results ("1> ").
    EXPECT_THAT(Filter(r.OutLines(), "Side", false),
                ElementsAreArray({Sum(0, 5, 3), Sum(0, 5, 4), Sum(0, 5, 5), Sum(0, 5, 6),
                                  /*end of input*/ Sum(5, 10, 2)}));
    EXPECT_THAT(Filter(r.OutLines(), "Side", true),
                ElementsAreArray({absl::StrCat("Side:", Prefix("ws_001"), "ws_001,1577844001,1"),
                                  absl::StrCat("Side:", Prefix("ws_001"), "ws_001,1577844002,1")}));
  }
  // At parallelism 1, as in the document: "Side> " and no subtask.
  std::vector<std::string> args =
      Doc001Args(InputFile("s4p.txt", VcLines({1, 2, 3, 8, 1, 2, 3, 9, 1, 2})), "tumbling:5s");
  args.push_back("--allowed-lateness=2s");
  args.push_back("--late=side");
  args.push_back("--parallelism=1");
  CliRun r = RunTidemark(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(Filter(r.OutLines(), "Side", true),
              ElementsAreArray({"Side> ws_001,1577844001,1", "Side> ws_001,1577844002,1"}));
  EXPECT_EQ(Filter(r.OutLines(), "Side", false).size(), 5u) << r.out;
}

TEST(CliScenarioTest, LocalAggregationIsRefusedForSessions) {
  std::vector<std::string> args =
      Doc001Args(InputFile("s6l.txt", VcLines({2, 7, 14})), "session:5s");
  args.push_back("--local-aggregation");
  CliRun r = RunTidemark(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, ::testing::HasSubstr("--local-aggregation applies to tumbling and sliding"));
}

TEST(CliScenarioTest, S5SlidingWindows) {
  CliRun r = RunTidemark(Doc001Args(InputFile("s5.txt", VcLines({1, 8, 12})), "sliding:6s,2s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string p = Prefix("ws_001");
  EXPECT_THAT(r.OutLines(),
              ElementsAreArray({
                  p + "window:[2020-01-01 09:59:56--2020-01-01 10:00:02]-<ws_001>--sum: 1",
                  p + "window:[2020-01-01 09:59:58--2020-01-01 10:00:04]-<ws_001>--sum: 1",
                  p + "window:[2020-01-01 10:00:00--2020-01-01 10:00:06]-<ws_001>--sum: 1",
                  p + "window:[2020-01-01 10:00:04--2020-01-01 10:00:10]-<ws_001>--sum: 1",
                  // end of input
                  p + "window:[2020-01-01 10:00:06--2020-01-01 10:00:12]-<ws_001>--sum: 1",
                  p + "window:[2020-01-01 10:00:08--2020-01-01 10:00:14]-<ws_001>--sum: 2",
                  p + "window:[2020-01-01 10:00:10--2020-01-01 10:00:16]-<ws_001>--sum: 1",
                  p + "window:[2020-01-01 10:00:12--2020-01-01 10:00:18]-<ws_001>--sum: 1",
              }));
}

TEST(CliScenarioTest, S6SessionWindows) {
  CliRun r = RunTidemark(Doc001Args(InputFile("s6.txt", VcLines({2, 7, 14})), "session:5s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(), ElementsAreArray({Sum(2, 12, 2), /*end of input*/ Sum(14, 19, 1)}));
}

TEST(CliScenarioTest, S7PunctuatedWatermarks) {
  CliRun r = RunTidemark(
      Doc001Args(InputFile("s7.txt", VcLines({1, 2, 12})), "tumbling:5s", "punctuated:2s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(), ElementsAreArray({Sum(0, 5, 2), /*end of input*/ Sum(10, 15, 1)}));
}

// --- S8: document 002, wall-clock timestamps, callType filter, lateness ---
std::string Total(const std::string& a, const std::string& b, int v) {
  return absl::StrCat(Prefix("sid_1"), "window:[2030-12-01 10:10:", a, "--2030-12-01 10:10:", b,
                      "]-<sid_1>--sum: ", v);
}

TEST(CliScenarioTest, S8WithoutLateness) {
  std::vector<std::string> lines = S8Lines({"01", "02", "03", "04", "05", "04.989", "08", "10"});
  lines.insert(lines.begin() + 2, "sid_1,fail,2030-12-01 10:10:02,7");  // filtered out
  CliRun r = RunTidemark(S8Args(InputFile("s8a.txt", lines), "0s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(), ElementsAreArray({Total("00", "05", 4), Total("05", "10", 2),
                                              /*end of input*/ Total("10", "15", 1)}));
  EXPECT_THAT(r.err, HasSubstr("1 late dropped"));
}

TEST(CliScenarioTest, S8WithTwoSecondsLateness) {
  CliRun r = RunTidemark(S8Args(
      InputFile("s8b.txt",
                S8Lines({"01", "02", "03", "04", "05", "04.456", "04.888", "07", "04.989", "10"})),
      "2s"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(),
              ElementsAreArray({Total("00", "05", 4), Total("00", "05", 5), Total("00", "05", 6),
                                Total("05", "10", 2), /*end of input*/ Total("10", "15", 1)}));
  EXPECT_THAT(r.err, HasSubstr("1 late dropped"));
}

// --- alignment: two files, scripted watermarks ---
TEST(CliAlignmentTest, AlignedWatermarkIsTheMinimumAndWindowsWaitForTheSlowerFile) {
  const std::string fast =
      InputFile("fast.txt", {"k,1000", "#watermark 6000", "k,7000", "#watermark 20000", "k,21000"});
  const std::string slow = InputFile("slow.txt", {"k,2000", "#watermark 3000", "k,4000",
                                                  "#watermark 5500", "k,9000", "#watermark 12000"});
  CliRun r = RunTidemark({"run", "--input=" + fast, "--input=" + slow, "--fields=key,ts",
                          "--watermarks=marker", "--window=tumbling:5s", "--aggregate=count",
                          "--output=jsonl", "--trace=watermarks", "--parallelism=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<int, int64_t> channel;  // channel -> latest watermark
  int64_t aligned = INT64_MIN;
  bool fired_first = false;
  int checked = 0;
  for (const std::string& line : r.OutLines()) {
    if (absl::StrContains(line, "\"kind\":\"watermark\"")) {
      auto field = [&](const std::string& name) {
        const size_t at = line.find("\"" + name + "\":");
        int64_t v = 0;
        std::string rest = line.substr(at + name.size() + 3);
        EXPECT_TRUE(absl::SimpleAtoi(rest.substr(0, rest.find_first_of(",}")), &v)) << line;
        return v;
      };
      channel[static_cast<int>(field("channel"))] = field("channel_watermark");
      int64_t min = INT64_MAX;
      for (auto& [c, w] : channel) min = std::min(min, w);
      if (channel.size() < 2) min = INT64_MIN;  // the other channel still holds MIN
      const int64_t a = field("aligned");
      EXPECT_EQ(a, min) << line;
      EXPECT_GE(a, aligned) << "aligned watermark went back: " << line;
      aligned = a;
      ++checked;
    }
    if (absl::StrContains(line, "\"kind\":\"window\"") && absl::StrContains(line, "\"start\":0,")) {
      // [0, 5000) fires only once both files' watermarks passed 4999, fired
      // by the aligned watermark of that moment.
      ASSERT_EQ(channel.size(), 2u) << line;
      for (auto& [c, w] : channel) EXPECT_GE(w, 4999) << "channel " << c << ": " << line;
      EXPECT_GE(aligned, 4999) << line;
      EXPECT_THAT(line, HasSubstr("\"firing\":\"on_time\""));
      EXPECT_THAT(line, HasSubstr(absl::StrCat("\"watermark\":", aligned, ",")));
      fired_first = true;
    }
  }
  EXPECT_TRUE(fired_first);
  EXPECT_GE(checked, 6);
}

// --- --explain: the physical plan, nothing run ---
TEST(CliExplainTest, PrintsThePlanAndRunsNothing) {
  // A malformed line: reading the input would fail (exit 2).
  const std::string input = InputFile("explain.txt", {"k,1000", "k,notatime"});
  const std::string timeline = TempPath("explain_timeline.html");
  std::remove(timeline.c_str());
  CliRun r = RunTidemark({"run", "--input=" + input, "--parallelism=2", "--late=side",
                          "--timeline=" + timeline, "--explain"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");  // no summary
  EXPECT_THAT(
      r.OutLines(),
      ElementsAreArray(std::vector<std::string>{
          "Chain 0 \"Source: input -> Timestamps/Watermarks -> Drop markers\" p=1 maxP=128, "
          "tasks: Source: input -> Timestamps/Watermarks -> Drop markers (0/1)",
          "Chain 1 \"window -> print\" p=2 maxP=128, tasks: window -> print (0/2), (1/2)",
          "Chain 2 \"late\" p=2 maxP=128, tasks: late (0/2), (1/2)",
          "Edge 0: Drop markers (p=1) --HASH(key groups, maxP=128)--> window (p=2), 2 channel(s)",
          "Edge 1: window (p=2) side output 'late' --FORWARD--> late (p=2), 2 channel(s)"}));
  EXPECT_FALSE(std::ifstream(timeline).good()) << "--explain opened the timeline file";

  // One source subtask per file; the window at the default parallelism 1.
  CliRun two = RunTidemark({"run", "--input=" + input, "--input=" + input, "--explain"});
  EXPECT_EQ(two.exit_code, 0) << two.err;
  EXPECT_THAT(two.out, HasSubstr("Drop markers\" p=2 maxP=128"));
  EXPECT_THAT(two.out, HasSubstr("Edge 0: Drop markers (p=2) --HASH(key groups, maxP=128)--> "
                                 "window (p=1), 2 channel(s)"));

  // Bad flags are still errors.
  CliRun bad = RunTidemark({"run", "--input=" + input, "--window=tumbling:0s", "--explain"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.out, "");
}

// --- errors: one line, exit status 2, nothing run ---
TEST(CliErrorTest, BadInvocationsSayWhatAndExitTwo) {
  const std::string ok = InputFile("ok.txt", {"k,1000"});
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{"run", "--nosuchflag=1"}, "unknown flag --nosuchflag"},
      {{"run", "--input=" + ok, "--window=tumbling:5parsecs"}, "bad window 'tumbling:5parsecs'"},
      {{"run", "--input=" + ok, "--allowed-lateness=soon"}, "bad duration 'soon'"},
      {{"run", "--input=" + ok, "--window=sliding:5s,0s"}, "slide must be > 0"},
      {{"run", "--input=" + ok, "--window=tumbling:5s,7s"}, "|offset| must be < size"},
      {{"run", "--input=" + ok, "--watermarks=sometimes"}, "bad watermarks 'sometimes'"},
      {{"run", "--input=/no/such/file.txt"}, "cannot open input file /no/such/file.txt"},
      {{"run", "--socket=127.0.0.1:1"}, "cannot connect to 127.0.0.1:1"},
      {{"run", "--input=" + ok, "--parallelism=zero"}, "bad value for --parallelism"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    CliRun r = RunTidemark(c.args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(r.err, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
    EXPECT_EQ(r.out, "") << absl::StrJoin(c.args, " ");
  }
}

TEST(CliErrorTest, MalformedLineNamesFileAndLine) {
  const std::string bad = InputFile("bad.txt", {"k,1000", "k,notatime", "k,3000"});
  CliRun r = RunTidemark({"run", "--input=" + bad, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(bad + ":2: field 'ts': timestamp 'notatime' is not an integer"));
  CliRun skip = RunTidemark({"run", "--input=" + bad, "--fields=key,ts", "--bad-lines=skip",
                             "--aggregate=count", "--window=tumbling:10s"});
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_THAT(skip.err, HasSubstr("1 bad line skipped"));
  EXPECT_THAT(
      skip.OutLines(),
      ElementsAreArray({"window:[1970-01-01 00:00:00--1970-01-01 00:00:10]-<k>--count: 2"}));
}

// Every class of malformed line: under --bad-lines=fail (the default) the job
// stops with one line naming the source, file, line number, what is wrong and
// the text; under --bad-lines=skip each is counted and, with --dead-letter,
// written out with its location.
TEST(CliBadInputTest, EachClassOfMalformedLine) {
  struct Case {
    std::string line;
    std::string message;
  } cases[] = {
      {"k", "expected 2 fields (key,ts), found 1"},
      {"k,12:00", "field 'ts': timestamp '12:00' is not an integer number of milliseconds"},
      {"k,99999999999999999999",
       "field 'ts': timestamp '99999999999999999999' is out of range (64-bit milliseconds)"},
      {"k,-9223372036854775808", "timestamp is Long.MIN_VALUE (the no-timestamp marker)"},
      {"", "empty line"},
      {"k,1000,and a lot more text here", "line is longer than 24 bytes (31)"},
  };
  for (const Case& c : cases) {
    const std::string path = InputFile("bad_class.txt", {"k,1000", c.line, "k,2000"});
    CliRun r = RunTidemark({"run", "--input=" + path, "--fields=key,ts", "--max-line-length=24"});
    EXPECT_EQ(r.exit_code, 2) << c.line;
    EXPECT_EQ(r.err, absl::StrCat("tidemark: operator 'Source: input' (subtask 0 of 1) failed: ",
                                  path, ":2: ", c.message, ": '", c.line, "'\n"))
        << c.line;
    EXPECT_EQ(r.out, "") << "nothing half-run: " << c.line;
  }
}

// Found by a review: a pattern time past the millisecond range was clamped
// to MAX (absl's ToUnixMillis saturates), hexadecimal seconds and values were
// read (the values as rounded doubles), and a UTF-8 byte-order mark became
// part of the first key.
TEST(CliBadInputTest, OutOfRangePatternTimesAndHexadecimalAreErrorsAndABomIsNotText) {
  const std::string far = InputFile("far.txt", {"k,300000000-01-01 00:00:00"});
  CliRun r =
      RunTidemark({"run", "--input=" + far, "--fields=key,ts", "--time-format=%Y-%m-%d %H:%M:%S"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(far + ":1: field 'ts': timestamp '300000000-01-01 00:00:00' is "
                                     "out of range (64-bit milliseconds)"));
  const std::string hex_s = InputFile("hex_s.txt", {"k,0x10"});
  r = RunTidemark({"run", "--input=" + hex_s, "--fields=key,ts", "--time-format=s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(hex_s + ":1: field 'ts': timestamp '0x10' is not a number of "
                                       "seconds"));
  // Seconds past the millisecond range are a number out of range (they
  // were "not a number of seconds").
  const std::string far_s = InputFile("far_s.txt", {"k,-9223372036854775.808"});
  r = RunTidemark({"run", "--input=" + far_s, "--fields=key,ts", "--time-format=s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(far_s + ":1: field 'ts': timestamp '-9223372036854775.808' is out "
                                       "of range (64-bit milliseconds)"));
  // A NUL in a field is escaped in the message (it cut the message short).
  const std::string nul = InputFile("nul.txt", {std::string("k,10\0"
                                                            "00",
                                                            7)});
  r = RunTidemark({"run", "--input=" + nul, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(nul + ":1: field 'ts': timestamp '10\\000' is not an integer "
                                     "number of milliseconds"));
  const std::string hex_v = InputFile("hex_v.txt", {"k,1000,0x7FFFFFFFFFFFFFFF"});
  r = RunTidemark({"run", "--input=" + hex_v, "--fields=key,ts,value", "--value=value"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(hex_v + ":1: field 'value': '0x7FFFFFFFFFFFFFFF' is not a number"));
  const std::string bom = InputFile("bom.txt", {"\xEF\xBB\xBFk,1000", "k,2000"});
  r = RunTidemark(
      {"run", "--input=" + bom, "--fields=key,ts", "--aggregate=count", "--window=tumbling:10s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(
      r.OutLines(),
      ElementsAreArray({"window:[1970-01-01 00:00:00--1970-01-01 00:00:10]-<k>--count: 2"}));
}

TEST(CliBadInputTest, AFieldNamedTwiceIsRefused) {
  const std::string file = InputFile("fields_twice.txt", {"a,1000,x"});
  CliRun r = RunTidemark({"run", "--input=" + file, "--fields=key,ts,key"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--fields=key,ts,key names 'key' twice"));
}

// A record's trace line names the input it came from, standard input ("-")
// too.
TEST(CliBadInputTest, TraceNamesStandardInputAsItsInput) {
  const std::string file = InputFile("trace_source_file.txt", {"a,1000"});
  const std::string in = "b,1000\n";
  CliRun r = RunTidemark({"run", "--input=" + file, "--input=-", "--fields=key,ts",
                          "--output=jsonl", "--trace=watermarks", "--watermark-interval=per-record",
                          "--window=tumbling:5s", "--aggregate=count"},
                         &in);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int seen = 0;
  for (const std::string& l : r.OutLines()) {
    if (l.rfind("{\"kind\":\"record\"", 0) != 0) continue;
    ++seen;
    const bool from_stdin = l.find("\"key\":\"b\"") != std::string::npos;
    EXPECT_THAT(l, HasSubstr(from_stdin ? "\"source\":1," : "\"source\":0,")) << l;
  }
  EXPECT_EQ(seen, 2) << r.out;
}

// "#watermark T" lines make watermarks and are no records: the summary
// counts them apart, so that records = window records + late ones.
TEST(CliBadInputTest, WatermarkMarkersAreCountedApartFromRecords) {
  const std::string path = InputFile("markers_count.txt", {"a,1000", "#watermark 6000", "a,2000"});
  CliRun r = RunTidemark({"run", "--input=" + path, "--fields=key,ts", "--watermarks=marker",
                          "--late=side", "--aggregate=count", "--window=tumbling:5s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tidemark: 2 records, 1 window result, 1 late (side output), "
                               "0 late dropped, 0 bad lines skipped, 1 watermark marker"));
}

TEST(CliBadInputTest, SkipCountsEveryBadLineAndWritesTheDeadLetterFile) {
  const std::string path =
      InputFile("bad_mix.txt", {"k,1000", "k", "", "k,x", "k,2000", "k,99999999999999999999"});
  const std::string dead = TempPath("dead_letter.txt");
  CliRun r = RunTidemark({"run", "--input=" + path, "--fields=key,ts", "--bad-lines=skip",
                          "--dead-letter=" + dead, "--aggregate=count", "--window=tumbling:10s"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("2 records, 1 window result, 0 late (side output), 0 late dropped, "
                               "4 bad lines skipped"));
  EXPECT_THAT(
      r.OutLines(),
      ElementsAreArray({"window:[1970-01-01 00:00:00--1970-01-01 00:00:10]-<k>--count: 2"}));
  std::vector<std::string> dead_lines =
      absl::StrSplit(testing::ReadFile(dead), '\n', absl::SkipEmpty());
  EXPECT_THAT(
      dead_lines,
      ElementsAreArray(
          {path + ":2: expected 2 fields (key,ts), found 1: k", path + ":3: empty line: ",
           path + ":4: field 'ts': timestamp 'x' is not an integer number of milliseconds: k,x",
           path + ":6: field 'ts': timestamp '99999999999999999999' is out of range (64-bit "
                  "milliseconds): k,99999999999999999999"}));
}

// --- timestamps at the ends of the long range (issue 10, item 4) ---

// The start and end of each window result of a jsonl run, in output order.
std::vector<std::pair<int64_t, int64_t>> WindowBounds(const CliRun& r) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const std::string& line : r.OutLines()) {
    auto field = [&](const std::string& name) {
      const size_t at = line.find("\"" + name + "\":");
      int64_t v = 0;
      if (at == std::string::npos) return v;
      const size_t b = at + name.size() + 3;
      EXPECT_TRUE(absl::SimpleAtoi(line.substr(b, line.find(',', b) - b), &v)) << line;
      return v;
    };
    out.emplace_back(field("start"), field("end"));
  }
  return out;
}

// `a,-9223372036854775807` (MIN + 1) with sliding 10 ms / 5 ms windows used to
// exhaust memory (the start saturated and the loop walked down to MIN).
// Flink's windows there have wrapped starts: [MAX - 1, MIN + 8) and
// [MAX - 6, MIN + 3), firing (by max timestamp, MIN + 2 first) at the end of
// input.
TEST(CliExtremeTimestampTest, SlidingWindowsOneAboveMinFinishWithFlinksWindows) {
  constexpr int64_t kMin = INT64_MIN, kMax = INT64_MAX;
  CliRun r = RunTidemark({"run", "--input=" + InputFile("min1.txt", {"a,-9223372036854775807"}),
                          "--fields=key,ts", "--window=sliding:10ms,5ms", "--output=jsonl",
                          "--summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(WindowBounds(r), ElementsAreArray({std::make_pair(kMax - 6, kMin + 3),
                                                 std::make_pair(kMax - 1, kMin + 8)}));
  // Near MAX the ends wrap instead (they used to saturate at MAX).
  r = RunTidemark({"run", "--input=" + InputFile("max.txt", {"a,9223372036854775807"}),
                   "--fields=key,ts", "--window=sliding:10ms,5ms", "--output=jsonl",
                   "--summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(WindowBounds(r), ElementsAreArray({std::make_pair(kMax - 7, kMin + 2),
                                                 std::make_pair(kMax - 2, kMin + 7)}));
}

// Where Flink's sliding loop would walk around the whole long range (size 1 ms
// < slide 5 ms at MIN + 1: the first start wraps, the bound does not), the job
// fails at once with a message instead of running out of memory.
TEST(CliExtremeTimestampTest, SlidingLoopThatWouldWrapAroundTheRangeFailsTheJob) {
  CliRun r = RunTidemark({"run", "--input=" + InputFile("min1b.txt", {"a,-9223372036854775807"}),
                          "--fields=key,ts", "--window=sliding:1ms,5ms", "--summary=false"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("wraps around the long range"));
}

}  // namespace
}  // namespace tidemark
