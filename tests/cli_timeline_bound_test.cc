// The timeline page stays bounded however long the run (docs/timeline.md):
// a synthetic ten-minute stream of watermark steps, firings, late records and
// idle changes renders to a page under kTimelineBoundBytes, and the page still
// accounts for every firing and late record (a merged mark says how many it
// stands for) and draws every idle stretch.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "timeline_page_util.h"
#include "tools/cli/line_format.h"
#include "tools/cli/trace.h"

namespace tidemark::cli {
namespace {

constexpr size_t kTimelineBoundBytes = 3 << 20;

using testing::CountMarks;

size_t Occurrences(const std::string& html, const std::string& needle) {
  size_t n = 0;
  for (size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1)) ++n;
  return n;
}

struct Stream {
  std::vector<TimelineEvent> events;
  int64_t on_time = 0, late_firings = 0, end_of_input = 0, late = 0;
  size_t source_idle = 0, channel_idle = 0;  // idle stretches begun
  Timestamp last_source_watermark = 0;
};

// `seconds` of processing time: 3 sources stepping their watermark every
// `step_ms`, 4 window subtasks with 3 channels each, 20 keys firing per
// second per window subtask, a late record every few ms, source 2 idle for 5 s
// of every 30 s.
Stream Synthetic(int seconds, int step_ms) {
  using K = TimelineEvent::Kind;
  Stream st;
  std::mt19937 rng(7);
  std::vector<std::vector<Timestamp>> channel_wm(4, std::vector<Timestamp>(3, kMinTimestamp));
  std::vector<std::vector<bool>> channel_idle(4, std::vector<bool>(3, false));
  bool idle2 = false;
  for (int64_t t = 0; t < int64_t{seconds} * 1000; t += step_ms) {
    const double t_ms = static_cast<double>(t);
    const bool idle_now = (t / 1000) % 30 >= 25;
    if (idle_now != idle2) {
      idle2 = idle_now;
      TimelineEvent e{K::kSourceIdle, t_ms};
      e.subtask = 2;
      e.idle = idle_now;
      st.events.push_back(e);
      if (idle_now) ++st.source_idle;
    }
    for (int src = 0; src < 3; ++src) {
      if (src == 2 && idle2) continue;
      // Different speeds; a jittery lane (source 1) moves by random steps.
      const Timestamp w =
          t * (src + 1) + (src == 1 ? static_cast<Timestamp>(rng() % 500) : Timestamp{0});
      TimelineEvent e{K::kSourceWatermark, t_ms};
      e.subtask = src;
      e.watermark = w;
      st.events.push_back(e);
      if (src == 0) st.last_source_watermark = w;
      for (int ws = 0; ws < 4; ++ws) {
        channel_wm[ws][src] = w;
        channel_idle[ws][2] = idle2;
        Timestamp aligned = kMaxTimestamp;
        int holding = -1;
        for (int c = 0; c < 3; ++c) {
          if (channel_idle[ws][c]) continue;
          if (channel_wm[ws][c] < aligned) {
            aligned = channel_wm[ws][c];
            holding = c;
          }
        }
        TimelineEvent ce{K::kChannel, t_ms};
        ce.subtask = ws;
        ce.channel = src;
        ce.watermark = w;
        ce.aligned = aligned;
        ce.holding = holding;
        st.events.push_back(ce);
      }
    }
    // Channel 2's idle status reaches every window subtask.
    if (t > 0 && ((t / 1000) % 30 == 25 || (t / 1000) % 30 == 0) && t % 1000 == 0) {
      for (int ws = 0; ws < 4; ++ws) {
        TimelineEvent ce{K::kChannel, t_ms};
        ce.subtask = ws;
        ce.channel = 2;
        ce.watermark = channel_wm[ws][2];
        ce.aligned = channel_wm[ws][0];
        ce.idle = idle2;
        st.events.push_back(ce);
        if (idle2) ++st.channel_idle;
      }
    }
    if (t % 1000 == 0) {
      for (int ws = 0; ws < 4; ++ws) {
        for (int k = 0; k < 20; ++k) {
          TimelineEvent f{K::kFiring, t_ms};
          f.subtask = ws;
          f.key = absl::StrCat("key", k);
          f.start = t - 1000;
          f.end = t;
          f.watermark = t;
          f.firing = k % 7 == 0 ? "late" : "on_time";
          f.value = "count 3, sum 3";
          (k % 7 == 0 ? st.late_firings : st.on_time) += 1;
          st.events.push_back(f);
        }
      }
    }
    if (rng() % 3 == 0) {
      TimelineEvent l{K::kLate, t_ms};
      l.subtask = static_cast<int>(rng() % 4);
      l.key = "late";
      l.ts = t - static_cast<Timestamp>(rng() % 20000);
      l.value = "late,1";
      st.events.push_back(l);
      ++st.late;
    }
  }
  for (int ws = 0; ws < 4; ++ws) {
    TimelineEvent f{K::kFiring, static_cast<double>(seconds) * 1000};
    f.subtask = ws;
    f.key = "last";
    f.end = int64_t{seconds} * 1000;
    f.watermark = kMaxWatermark;
    f.firing = "end_of_input";
    st.events.push_back(f);
    ++st.end_of_input;
  }
  return st;
}

TEST(TimelineBound, TenMinutesOfEventsStayUnderTheBoundAndKeepEveryFiringLateAndIdleChange) {
  const Stream st = Synthetic(600, 10);
  ASSERT_GT(st.events.size(), 900000u);
  const std::string html = RenderTimelineHtml(st.events, "bound", absl::UTCTimeZone());
  EXPECT_LT(html.size(), kTimelineBoundBytes) << "page of " << html.size() << " bytes";
  std::printf("[timeline] %zu events, page of %zu bytes\n", st.events.size(), html.size());
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing on_time'"), st.on_time);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing late'"), st.late_firings);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing end_of_input'"), st.end_of_input);
  EXPECT_EQ(CountMarks(html, "<path class='mark late'"), st.late);
  EXPECT_EQ(Occurrences(html, "<rect class='idle source'"), st.source_idle);
  EXPECT_EQ(Occurrences(html, "<rect class='idle channel'"), st.channel_idle);
  // The lanes end where the stream ended.
  EXPECT_THAT(html, ::testing::HasSubstr(
                        absl::StrCat("source subtask 0: ", 60000, " watermarks, last ",
                                     FormatTime(st.last_source_watermark, absl::UTCTimeZone()))));
}

TEST(TimelineBound, TheBoundDoesNotGrowWithTheRun) {
  const std::string one = RenderTimelineHtml(Synthetic(60, 10).events, "b", absl::UTCTimeZone());
  const std::string ten = RenderTimelineHtml(Synthetic(600, 10).events, "b", absl::UTCTimeZone());
  // Ten times the events, at most a little more page (only idle stretches and
  // mark counts grow).
  EXPECT_LT(ten.size(), one.size() * 2) << one.size() << " vs " << ten.size();
}

TEST(TimelineBound, AShortRunKeepsEveryWatermarkStep) {
  const Stream st = Synthetic(2, 100);  // 20 steps a lane: under any budget
  const std::string html = RenderTimelineHtml(st.events, "short", absl::UTCTimeZone());
  std::smatch m;
  const std::regex lane("class='lane source' data-subtask='0' d='([^']*)'");
  const std::string s = html;
  ASSERT_TRUE(std::regex_search(s, m, lane));
  EXPECT_EQ(Occurrences(m[1].str(), " V"), 19u);  // one step per distinct watermark after the first
}

}  // namespace
}  // namespace tidemark::cli
