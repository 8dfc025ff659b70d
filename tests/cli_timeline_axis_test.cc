// Timelines for any input (issue 27 item 4): `--rate=N/s` paces any input
// (files included) per source subtask; the timeline's x axis may count the
// records read instead of processing time; ticks fall on round values; the
// legend wraps, names every kind of line, band and mark, with swatches drawn
// as the things themselves.
//
// The paced runs assert loose bounds on real time (real time is the subject:
// a pace), never a speed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli_test_util.h"
#include "tools/cli/trace.h"

namespace tidemark {
namespace {

using cli::TimelineEvent;
using K = TimelineEvent::Kind;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::TempPath;
using testing::WriteFile;

std::string Lines(int n, const std::string& key, int64_t step) {
  std::string s;
  for (int i = 0; i < n; ++i) absl::StrAppend(&s, key, i % 3, ",", 1000 + i * step, "\n");
  return s;
}

TEST(CliRate, APacedRunTakesAboutItsRecordsOverTheRate) {
  // Two files, each its own source subtask, each paced at 200 lines a
  // second: the longer one (300 lines) takes about 1.5 s; the shorter (100)
  // does not slow it down (a pace per source).
  const std::string a = TempPath("rate_a.txt"), b = TempPath("rate_b.txt");
  WriteFile(a, Lines(300, "a", 50));
  WriteFile(b, Lines(100, "b", 150));
  const auto t0 = std::chrono::steady_clock::now();
  testing::CliRun r =
      testing::RunTidemark({"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                            "--parallelism=2", "--window=tumbling:1s", "--rate=200/s"});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("400 records"));
  std::printf("[measured] 300 lines at --rate=200/s (and 100 beside them): %.2f s\n", s);
  // 300 / 200 = 1.5 s, the first line at once: at least 1.4 s.
  EXPECT_GE(s, 1.4);
  EXPECT_LT(s, 15.0);  // loose: a loaded machine
}

TEST(CliRate, ARateIsNPerSecond) {
  const std::string in = TempPath("rate_bad.txt");
  WriteFile(in, "k,1000\n");
  for (const char* bad : {"--rate=200", "--rate=0/s", "--rate=-5/s", "--rate=abc/s", "--rate=/s"}) {
    testing::CliRun r = testing::RunTidemark({"run", "--input=" + in, "--fields=key,ts", bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("expected N/s")) << bad;
    EXPECT_EQ(r.out, "") << bad;
  }
  testing::CliRun r =
      testing::RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--timeline-axis=records"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--timeline-axis needs --timeline"));
}

TEST(CliTimelineAxis, RecordsReadSpreadAFileOverThePage) {
  const std::string in = TempPath("axis_in.txt"), page = TempPath("axis.html");
  WriteFile(in, Lines(605, "k", 40));
  testing::CliRun r =
      testing::RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--window=tumbling:1s",
                            "--watermark-interval=per-record", "--rate=500/s", "--timeline=" + page,
                            "--timeline-axis=records"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = ReadFile(page);
  EXPECT_THAT(html, HasSubstr("records read (all sources together)"));
  // x ticks: whole, round numbers of records, up to the 605 read.
  std::vector<double> xs;
  const std::regex tick("class='tick x' data-value='([0-9.e+-]+)'");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tick); it != std::sregex_iterator();
       ++it) {
    double v = 0;
    ASSERT_TRUE(absl::SimpleAtod((*it)[1].str(), &v));
    xs.push_back(v);
  }
  ASSERT_GE(xs.size(), 4u) << html;
  for (double v : xs) EXPECT_EQ(std::fmod(v, 100), 0) << v;
  EXPECT_EQ(xs.back(), 600);
  // The firings spread over the axis: marks at many distinct x positions (by
  // processing time, unpaced, they all fell in the last fraction of a
  // millisecond).  Paced, the sources do not run ahead of the windows by
  // what the channels buffer.
  std::set<std::string> firing_x;
  const std::regex firing("class='mark firing [a-z_]+'(?: data-count='\\d+')? cx='([0-9.]+)'");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), firing);
       it != std::sregex_iterator(); ++it)
    firing_x.insert((*it)[1].str());
  EXPECT_GE(firing_x.size(), 10u);
}

TEST(TimelineTicks, RoundValues) {
  // Processing time: 1, 2 or 5 times a power of ten.
  const std::vector<double> t = cli::NiceTicks(0, 1234.5, 8);
  ASSERT_FALSE(t.empty());
  const double step = t.size() > 1 ? t[1] - t[0] : 0;
  EXPECT_EQ(step, 200);
  EXPECT_EQ(t.front(), 0);
  EXPECT_EQ(t.back(), 1200);
  EXPECT_EQ(cli::NiceTicks(3, 17, 4), (std::vector<double>{5, 10, 15}));
  // Event time: round durations, multiples of the step.  The page
  // had 23:59:51.450.
  double ms = 0;
  const double lo = 86400000.0 - 8550, hi = 86400000.0 + 3000;
  const std::vector<double> e = cli::NiceTimeTicks(lo, hi, 8, &ms);
  EXPECT_EQ(ms, 2000);
  ASSERT_GE(e.size(), 3u);
  for (double v : e) {
    EXPECT_EQ(std::fmod(v, ms), 0) << v;
    EXPECT_GE(v, lo);
    EXPECT_LE(v, hi);
  }
  cli::NiceTimeTicks(0, 3 * 3600000.0, 5, &ms);
  EXPECT_EQ(ms, 3600000);
  cli::NiceTimeTicks(0, 20 * 86400000.0, 5, &ms);
  EXPECT_EQ(ms, 5 * 86400000.0);
}

// A run with everything a page can draw.
std::vector<TimelineEvent> EveryKind() {
  std::vector<TimelineEvent> ev;
  auto at = [&](K kind, double t, int subtask) -> TimelineEvent& {
    ev.push_back(TimelineEvent{kind, t});
    ev.back().subtask = subtask;
    ev.back().records = static_cast<int64_t>(t);
    return ev.back();
  };
  for (int i = 0; i < 20; ++i) {
    const double t = 10.0 * i;
    at(K::kSourceWatermark, t, 0).watermark = 86400000 - 9000 + 500 * i;
    at(K::kSourceWatermark, t + 1, 1).watermark = 86400000 - 9000 + 300 * i;
    for (int ch = 0; ch < 2; ++ch) {
      TimelineEvent& c = at(K::kChannel, t + 2, 0);
      c.channel = ch;
      c.watermark = 86400000 - 9000 + (ch == 0 ? 500 : 300) * i;
      c.aligned = 86400000 - 9000 + 300 * i;
      c.idle = ch == 1 && i >= 8 && i < 12;
      c.holding = 1;
    }
  }
  at(K::kSourceIdle, 80, 1).idle = true;
  at(K::kSourceIdle, 120, 1).idle = false;
  at(K::kSourcePause, 50, 0).idle = true;
  at(K::kSourcePause, 90, 0).idle = false;
  ev.push_back(TimelineEvent::Firing(0, "k", 86400000 - 9000, 86400000 - 8000, 86400000 - 8000,
                                     "on_time", "1"));
  ev.back().t_ms = 30;
  ev.push_back(TimelineEvent::Firing(0, "k", 86400000 - 9000, 86400000 - 8000, 86400000 - 7000,
                                     "late", "2"));
  ev.back().t_ms = 60;
  ev.push_back(TimelineEvent::Firing(0, "k", 86400000 - 5000, 86400000 - 4000, kMaxWatermark,
                                     "end_of_input", "3"));
  ev.back().t_ms = 199;
  ev.push_back(TimelineEvent::Late(0, "k", 86400000 - 8500, "k,late"));
  ev.back().t_ms = 70;
  TimelineEvent& b = at(K::kBarrier, 100, 0);
  b.checkpoint = 1;
  b.alignment_ms = 0.5;
  return ev;
}

TEST(TimelineLegend, NamesEveryMarkWithTheColoursDrawn) {
  const std::string html = cli::RenderTimelineHtml(EveryKind(), "t", absl::UTCTimeZone());
  // Every kind of line, band and mark has its legend entry.
  for (const char* kind : {"lane", "aligned", "idle", "paused", "on_time", "late", "end_of_input",
                           "late_record", "barrier", "merged"}) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat("<g class='legend-entry' data-kind='", kind, "'")))
        << kind;
  }
  EXPECT_THAT(html, HasSubstr("source subtask 0 paused by watermark alignment"));
  // A window fired by the MAX watermark need not be at the end of input.
  EXPECT_THAT(html,
              HasSubstr("fired by the MAX watermark (end of input, or every other input idle)"));
  EXPECT_THAT(html, HasSubstr("late record to the side output (dropped ones, --late=drop, are "
                              "counted only)"));
  // Each idle band and pause band drawn has a swatch of the same fill and
  // opacity in the legend (the idle swatch was grey, the bands peach).
  const std::string legend = html.substr(0, html.find("</g>\n<rect"));
  const std::regex band(
      "<rect class='(idle|paused) [a-z]+'[^>]* fill='(#[0-9a-f]{6})' "
      "opacity='([0-9.]+)'");
  int bands = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), band); it != std::sregex_iterator();
       ++it, ++bands) {
    const std::string swatch =
        absl::StrCat("fill='", (*it)[2].str(), "' opacity='", (*it)[3].str(), "'");
    EXPECT_THAT(legend, HasSubstr(swatch)) << (*it)[0].str();
  }
  EXPECT_GE(bands, 3);  // source 1 idle, channel 1 idle, source 0 paused
  // Firing colours as drawn.
  for (const char* c : {"#2ca02c", "#ff7f0e", "#1f77b4"}) {
    EXPECT_THAT(legend, HasSubstr(absl::StrCat("fill='", c, "'")));
  }
  // The legend wraps within the plot's width (1200 - 150 - 30 px): no entry
  // starts past it, and there is more than one row.
  std::set<int> rows;
  const std::regex entry(
      "<g class='legend-entry' data-kind='[a-z_]+' "
      "transform='translate\\(([0-9]+),([0-9]+)\\)'>");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), entry);
       it != std::sregex_iterator(); ++it) {
    EXPECT_LT(std::stoi((*it)[1].str()), 1020);
    rows.insert(std::stoi((*it)[2].str()));
  }
  EXPECT_GE(rows.size(), 2u);
  // Round event-time ticks: whole seconds here (a 9 s range).
  const std::regex ytick("class='tick y' data-value='(-?\\d+)'[^>]*>([^<]*)<");
  int yticks = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ytick);
       it != std::sregex_iterator(); ++it, ++yticks) {
    EXPECT_EQ(std::stoll((*it)[1].str()) % 1000, 0) << (*it)[0].str();
    EXPECT_THAT((*it)[2].str(), ::testing::MatchesRegex("[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"))
        << (*it)[2].str();
  }
  EXPECT_GE(yticks, 6);  // at least three per panel, two panels
}

TEST(TimelineAxis, ByRecordsUsesTheRecordCountsAsX) {
  cli::TimelineOptions o;
  o.by_records = true;
  const std::string html = cli::RenderTimelineHtml(EveryKind(), "t", absl::UTCTimeZone(), o);
  EXPECT_THAT(html, HasSubstr(">records read (all sources together)<"));
  EXPECT_THAT(html, HasSubstr("against records read"));
  EXPECT_THAT(html, Not(HasSubstr(" ms<")));
  EXPECT_THAT(html, HasSubstr("class='tick x' data-value='100'"));
}

}  // namespace
}  // namespace tidemark
