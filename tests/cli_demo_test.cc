// `tidemark demo` tells the story the README tells (issue 27, item 5): in the
// drift scene, watermark alignment bounds the windows kept open, so the peak
// of live (key, window) pairs and of window state drops; the idle-return scene
// is the second, explained case.  The demo paces its sources in real time
// (real time is the subject: how far sources drift apart while they run).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>

#include "cli_test_util.h"

namespace tidemark {
namespace {

using ::testing::HasSubstr;
using testing::RunTidemark;
using testing::TempPath;

struct Change {
  int64_t before = -1;
  int64_t after = -1;
};

// "<what> 160 -> 100" in the summary of what alignment changed.
Change Parse(const std::string& out, const std::string& what) {
  std::smatch m;
  Change c;
  if (std::regex_search(out, m, std::regex(what + " ([0-9]+) -> ([0-9]+)"))) {
    c.before = std::stoll(m[1]);
    c.after = std::stoll(m[2]);
  }
  return c;
}

// Drift: one source is 1.5x, another 0.5x the event-time speed of the first.
// Without alignment the window operator keeps every window the fast ones
// opened until the slowest one's watermark reaches it: after 4 s that is about
// 4 s of event time more than with a 500 ms drift, for each of 20 keys.
TEST(CliDemoTest, InTheDriftSceneAlignmentBoundsTheLiveWindows) {
  const std::string page = TempPath("demo_drift.html");
  testing::CliRun r = RunTidemark(
      {"demo", "--scene=drift", "--duration=4s", "--progress=false", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("scene 1 of 2")));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("goes quiet")));
  const Change live = Parse(r.out, "peak live \\(key, window\\) pairs");
  const Change bytes = Parse(r.out, "window state at the peak");
  ASSERT_GT(live.before, 0) << r.out;
  ASSERT_GT(bytes.before, 0) << r.out;
  // At least a second of event time of 20 keys fewer (in practice about four).
  EXPECT_LT(live.after, live.before - 20) << r.out;
  EXPECT_LT(bytes.after, bytes.before) << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("source subtasks paused [1-9][0-9]* times"));
  EXPECT_THAT(r.out, HasSubstr("the live windows stay within a few seconds of event time"));
  EXPECT_THAT(testing::ReadFile(page), HasSubstr("</svg>"));
  EXPECT_THAT(testing::ReadFile(TempPath("demo_drift-aligned.html")), HasSubstr("</svg>"));
}

TEST(CliDemoTest, BothScenesRunInOrderAndTheIdleReturnIsExplained) {
  const std::string page = TempPath("demo_both.html");
  testing::CliRun r =
      RunTidemark({"demo", "--duration=2s", "--progress=false", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const size_t one = r.out.find("scene 1 of 2, drift");
  const size_t two = r.out.find("scene 2 of 2, idle return");
  ASSERT_NE(one, std::string::npos) << r.out;
  ASSERT_NE(two, std::string::npos) << r.out;
  EXPECT_LT(one, two);
  EXPECT_THAT(r.out.substr(two), HasSubstr("the slowest goes quiet for a while"));
  EXPECT_THAT(r.out.substr(two), HasSubstr("an idle source holds nothing back"));
  for (const char* suffix : {"", "-aligned", "-idle", "-idle-aligned"})
    EXPECT_THAT(r.out,
                HasSubstr("timeline: " + TempPath(std::string("demo_both") + suffix + ".html")));
}

// Idle return (8 s: the slowest is quiet from 2.4 s to 4.8 s, idle after 1 s
// of it): without alignment the fast sources were seconds ahead when the
// slowest went quiet, so the windows' watermark jumped there and what it reads
// after coming back is late; with alignment they were within the drift.
TEST(CliDemoTest, InTheIdleReturnSceneAlignmentKeepsTheReturningSourceOnTime) {
  const std::string page = TempPath("demo_idle.html");
  testing::CliRun r = RunTidemark(
      {"demo", "--scene=idle-return", "--duration=8s", "--progress=false", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Change late = Parse(r.out, "late records");
  ASSERT_GT(late.before, 0) << r.out;
  EXPECT_LT(late.after * 2, late.before) << r.out;
  EXPECT_THAT(r.out, HasSubstr("changed when a source comes back from idleness"));
}

TEST(CliDemoTest, AnUnknownSceneIsAnError) {
  testing::CliRun r = RunTidemark({"demo", "--scene=fast"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--scene: 'fast' is not drift, idle-return or both"));
}

}  // namespace
}  // namespace tidemark
