// The timeline's recorder stays bounded however long the run
// (docs/timeline.md, "Bounded size"): past TimelineBound::exact_events it
// keeps a TimelineSummary (the page's per-pixel downsampling, done while
// recording).  A synthetic hour at 200 firings a second, fed through the
// recorder's own entry points with a simulated clock, keeps its retained size
// under a fixed bound that stops growing after the first minutes, and the page
// drawn from what it kept still counts every firing, late record, barrier,
// watermark, idle stretch and pause fed; the page from the summary accounts
// for what the page from the full list does; and the edge cases of merging
// buckets (an idle stretch across merges, stretches within a bucket, a late
// record in a firing's bucket, the records axis, events a little out of order).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>
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

using ::testing::HasSubstr;

using testing::CountMarks;

size_t Occurrences(const std::string& html, const std::string& needle) {
  size_t n = 0;
  for (size_t at = html.find(needle); at != std::string::npos; at = html.find(needle, at + 1)) ++n;
  return n;
}

// The values of the event-time axis's ticks, in order: the same range.
std::vector<std::string> YTicks(const std::string& html) {
  std::vector<std::string> out;
  const std::regex tick("class='tick y' data-value='(-?[0-9]+)'");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), tick); it != std::sregex_iterator();
       ++it)
    out.push_back((*it)[1].str());
  return out;
}

// What was fed, to compare with what the page counts.
struct Fed {
  int64_t on_time = 0, late_firings = 0, end_of_input = 0, late = 0;
  int64_t source_idle = 0, channel_idle = 0, pauses = 0;
  int64_t source_barriers = 0, window_barriers = 0;
  std::map<int, int64_t> source_watermarks;
  std::map<int, Timestamp> last_source_watermark;
  int64_t events = 0;
};

const std::string kSourceTask = "Source: lines";
const std::string kWindowTask = "window";

// A paced job as the CLI's recorder sees it, `seconds` of processing time in
// steps of 10 ms on a simulated clock: 4 source subtasks stepping their
// watermark every 200 ms (source s lags by s seconds), each step reaching the
// 2 window subtasks' channel s (with the aligned minimum); source 3 idle for
// 10 s of every 60 s (its channels too); source 2 paused by alignment for 1 s
// of every 120 s; 100 keys per window subtask firing each second (200
// firings/s), one of them late every 10 s; a late record every 500 ms; a
// checkpoint every 10 s (a barrier per source and per window subtask); 2,000
// lines read a second.  `each_minute` is called after every simulated minute.
void FeedPacedJob(TraceRecorder* rec, double* now, int seconds, Fed* fed,
                  const std::function<void(int)>& each_minute = nullptr) {
  constexpr int kSources = 4, kWindows = 2, kKeys = 100;
  std::vector<Timestamp> wm(kSources, kMinTimestamp);
  std::vector<bool> idle(kSources, false), paused(kSources, false);
  auto channel = [&](int ws, int ch) {
    Timestamp aligned = kMaxTimestamp;
    int holding = -1;
    for (int c = 0; c < kSources; ++c) {
      if (idle[c] || wm[c] == kMinTimestamp) continue;
      if (wm[c] < aligned) {
        aligned = wm[c];
        holding = c;
      }
    }
    if (holding < 0) aligned = kMinTimestamp;
    WatermarkListener::ChannelEvent e{&kWindowTask, ws,    ch,      wm[ch],   idle[ch],
                                      aligned,      false, holding, !idle[ch]};
    rec->OnInputChannel(e);
    ++fed->events;
  };
  const Timestamp epoch = 1700000000000;
  int64_t checkpoint = 0;
  for (int64_t t = 0; t < int64_t{seconds} * 1000; t += 10) {
    *now = static_cast<double>(t);
    for (int i = 0; i < 20; ++i) rec->OnLineRead();
    const int64_t sec = t / 1000;
    // Source 3 idle for [50, 60) s of each minute; its channels say so.
    const bool idle3 = sec % 60 >= 50;
    if (idle3 != idle[3]) {
      idle[3] = idle3;
      rec->OnOutputStatus(kSourceTask, 3,
                          idle3 ? WatermarkStatus::kIdle : WatermarkStatus::kActive);
      ++fed->events;
      if (idle3) ++fed->source_idle;
      for (int ws = 0; ws < kWindows; ++ws) {
        channel(ws, 3);
        if (idle3) ++fed->channel_idle;
      }
    }
    // Source 2 paused for [100, 101) s of each two minutes.
    const bool paused2 = sec % 120 == 100;
    if (paused2 != paused[2]) {
      paused[2] = paused2;
      rec->OnSourceAlignment(kSourceTask, 2, paused2, wm[2], wm[0] + 500);
      ++fed->events;
      if (paused2) ++fed->pauses;
    }
    if (t % 200 == 0) {
      for (int s = 0; s < kSources; ++s) {
        if (idle[s]) continue;
        wm[s] = epoch + t - 1000 * s - 1;
        rec->OnOutputWatermark(kSourceTask, s, wm[s]);
        ++fed->events;
        ++fed->source_watermarks[s];
        fed->last_source_watermark[s] = wm[s];
        for (int ws = 0; ws < kWindows; ++ws) channel(ws, s);
      }
    }
    if (t % 1000 == 0 && t > 0) {
      for (int ws = 0; ws < kWindows; ++ws) {
        for (int k = 0; k < kKeys; ++k) {
          const bool late = k == 0 && sec % 10 == 0;
          const Timestamp end = epoch + t - 3000 - (late ? 5000 : 0);
          rec->OnFiring(TimelineEvent::Firing(ws, absl::StrCat("key", k), end - 1000, end,
                                              wm[3] > wm[0] ? wm[0] : wm[3],
                                              late ? "late" : "on_time", "count 10, sum 10"));
          ++fed->events;
          ++(late ? fed->late_firings : fed->on_time);
        }
      }
    }
    if (t % 500 == 250) {
      rec->OnLate(TimelineEvent::Late(static_cast<int>(sec % kWindows), "key7",
                                      epoch + t - 9000 - (t / 250) % 7 * 100, "key7,late"));
      ++fed->events;
      ++fed->late;
    }
    if (t % 10000 == 5000) {
      ++checkpoint;
      for (int s = 0; s < kSources; ++s) {
        rec->OnCheckpointBarrier(kSourceTask, s, checkpoint, 0);
        ++fed->source_barriers;
        ++fed->events;
      }
      for (int ws = 0; ws < kWindows; ++ws) {
        rec->OnCheckpointBarrier(kWindowTask, ws, checkpoint, 1500000);
        ++fed->window_barriers;
        ++fed->events;
      }
    }
    if (each_minute && (t + 10) % 60000 == 0) each_minute(static_cast<int>((t + 10) / 60000));
  }
  *now = static_cast<double>(int64_t{seconds} * 1000);
  for (int ws = 0; ws < kWindows; ++ws) {
    for (int k = 0; k < kKeys; ++k) {
      rec->OnFiring(TimelineEvent::Firing(
          ws, absl::StrCat("key", k), epoch + int64_t{seconds} * 1000,
          epoch + int64_t{seconds} * 1000 + 1000, kMaxWatermark, "end_of_input", "count 1, sum 1"));
      ++fed->events;
      ++fed->end_of_input;
    }
  }
}

// The page counts everything fed.
void ExpectThePageCountsEverything(const std::string& html, const Fed& fed) {
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing on_time'"), fed.on_time);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing late'"), fed.late_firings);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing end_of_input'"), fed.end_of_input);
  EXPECT_EQ(CountMarks(html, "<path class='mark late'"), fed.late);
  EXPECT_EQ(CountMarks(html, "<g class='mark barrier'"), fed.source_barriers + fed.window_barriers);
  EXPECT_EQ(CountMarks(html, "<rect class='idle source'"), fed.source_idle);
  EXPECT_EQ(CountMarks(html, "<rect class='idle channel'"), fed.channel_idle);
  EXPECT_EQ(CountMarks(html, "<rect class='paused source'"), fed.pauses);
  for (const auto& [s, n] : fed.source_watermarks) {
    EXPECT_THAT(html, HasSubstr(absl::StrCat(
                          "source subtask ", s, ": ", n, " watermarks, last ",
                          FormatTime(fed.last_source_watermark.at(s), absl::UTCTimeZone()))));
  }
}

struct Recorder {
  explicit Recorder(TimelineBound bound = {}, bool by_records = false)
      : printer(&sink), rec(&printer, OutputFormat::kText, false, true, absl::UTCTimeZone()) {
    rec.SetClockForTesting([this] { return now; });
    rec.SetTimelineBound(bound);
    rec.SetTimelineAxis(by_records);
  }
  std::ostringstream sink;
  LinePrinter printer;
  TraceRecorder rec;
  double now = 0;
};

TEST(TimelineRecorder, AnHourAtTwoHundredFiringsASecondStaysFlatAndThePageCountsEveryEvent) {
  Recorder r;
  Fed fed;
  std::vector<size_t> bytes(61, 0);  // after minute m
  FeedPacedJob(&r.rec, &r.now, 3600, &fed, [&](int minute) {
    bytes[minute] = r.rec.RetainedBytes();
    std::printf("[recorder] minute %2d: %zu bytes, %zu entries\n", minute, bytes[minute],
                r.rec.RetainedEntries());
  });
  ASSERT_GT(fed.events, 900000);  // ~260 events a second
  std::printf("[recorder] an event is %zu bytes\n", sizeof(TimelineEvent));
  ASSERT_TRUE(r.rec.summarizing());
  // Under a fixed bound: what the full list would hold (about 200 bytes an
  // event) is 180 MB.
  constexpr size_t kBound = 8 << 20;
  const size_t peak = *std::max_element(bytes.begin(), bytes.end());
  EXPECT_LT(peak, kBound);
  // Flat after the first minutes: the second half hour holds no more than the
  // first (buckets merge in pairs when full, so the size saws between half
  // and all of the buckets; each stretch of minutes 5-30 and 30-60 holds a
  // merge).
  const size_t early = *std::max_element(bytes.begin() + 5, bytes.begin() + 31);
  const size_t late = *std::max_element(bytes.begin() + 31, bytes.end());
  EXPECT_LE(late, early + early / 10) << early << " then " << late;
  const std::vector<TimelineEvent> kept = r.rec.events();
  std::printf("[recorder] %lld events fed, %zu kept, %zu bytes at the end (peak %zu)\n",
              static_cast<long long>(fed.events), kept.size(), r.rec.RetainedBytes(), peak);
  EXPECT_LT(kept.size(), 100000u);
  const std::string html = RenderTimelineHtml(kept, "an hour", absl::UTCTimeZone());
  ExpectThePageCountsEverything(html, fed);
}

TEST(TimelineRecorder, ThePageFromTheSummaryAccountsForWhatThePageFromEveryEventDoes) {
  Recorder full(TimelineBound{size_t{1} << 40, 2048});
  Recorder summary(TimelineBound{1000, 2048});
  Fed fed_full, fed_summary;
  FeedPacedJob(&full.rec, &full.now, 240, &fed_full);
  FeedPacedJob(&summary.rec, &summary.now, 240, &fed_summary);
  ASSERT_FALSE(full.rec.summarizing());
  ASSERT_TRUE(summary.rec.summarizing());
  const std::vector<TimelineEvent> all = full.rec.events();
  ASSERT_EQ(static_cast<int64_t>(all.size()), fed_full.events);
  const std::vector<TimelineEvent> kept = summary.rec.events();
  EXPECT_LT(kept.size() * 4, all.size());
  const std::string a = RenderTimelineHtml(all, "t", absl::UTCTimeZone());
  const std::string b = RenderTimelineHtml(kept, "t", absl::UTCTimeZone());
  ExpectThePageCountsEverything(a, fed_full);
  ExpectThePageCountsEverything(b, fed_summary);
  // The same axes (the event-time range is kept: lowest and highest of every
  // lane and mark), lanes, legend and idle stretches (none merged here: they
  // are seconds apart).
  EXPECT_EQ(YTicks(a), YTicks(b));
  EXPECT_FALSE(YTicks(a).empty());
  for (const std::string& needle :
       {"<path class='lane source'", "<path class='lane channel'", "<path class='lane aligned'",
        "<g class='legend-entry'", "<rect class='idle source'", "<rect class='idle channel'",
        "<rect class='paused source'", "class='tick x'"})
    EXPECT_EQ(Occurrences(a, needle), Occurrences(b, needle)) << needle;
  // Each channel lane and aligned minimum ends at the same value.
  const std::regex last(
      "data-info=\"(window subtask [0-9]+(, channel [0-9]+: | aligned watermark, )last [^\"]*)\"");
  std::map<std::string, std::string> la, lb;
  for (auto [html, out] : {std::pair{&a, &la}, std::pair{&b, &lb}})
    for (auto it = std::sregex_iterator(html->begin(), html->end(), last);
         it != std::sregex_iterator(); ++it)
      (*out)[(*it)[1].str()] = (*it)[0].str();
  EXPECT_EQ(la.size(), 2u * 4 + 2);
  EXPECT_EQ(la, lb);
}

TEST(TimelineRecorder, AShortRunKeepsEveryEventAsItCame) {
  Recorder r;
  Fed fed;
  FeedPacedJob(&r.rec, &r.now, 20, &fed);  // ~5,000 events: under the bound
  EXPECT_FALSE(r.rec.summarizing());
  const std::vector<TimelineEvent> kept = r.rec.events();
  ASSERT_EQ(static_cast<int64_t>(kept.size()), fed.events);
  EXPECT_EQ(r.rec.RetainedEntries(), kept.size());
  for (const TimelineEvent& e : kept) EXPECT_EQ(e.count, 1);
}

// A summary fed directly: `count` events of each kind at t, in order.
TimelineEvent At(TimelineEvent::Kind kind, double t, int subtask = 0) {
  TimelineEvent e{kind, t};
  e.subtask = subtask;
  return e;
}

TimelineEvent ChannelAt(double t, Timestamp wm, bool idle) {
  TimelineEvent e = At(TimelineEvent::Kind::kChannel, t);
  e.channel = 0;
  e.watermark = wm;
  e.aligned = wm;
  e.idle = idle;
  return e;
}

TEST(TimelineRecorder, AnIdleStretchAcrossBucketMergesStaysOneStretchFromWhereItBegan) {
  TimelineSummary s(false, 64);
  s.Add(ChannelAt(0, 1000, false));
  s.Add(ChannelAt(10, 1000, true));  // idle from 10 ms
  TimelineEvent src = At(TimelineEvent::Kind::kSourceIdle, 10, 1);
  src.idle = true;
  s.Add(src);
  // Watermarks of another source push the axis to 100 s: many doublings.
  for (int i = 1; i <= 10000; ++i) {
    TimelineEvent w = At(TimelineEvent::Kind::kSourceWatermark, i * 10.0, 0);
    w.watermark = i;
    s.Add(w);
  }
  const double width_before_end = s.bucket_width();
  EXPECT_GE(width_before_end, 100000.0 / 64);
  s.Add(ChannelAt(90000, 2000, false));  // active again at 90 s
  const std::vector<TimelineEvent> kept = s.Events();
  std::vector<std::pair<double, bool>> channel_changes, source_changes;
  bool prev = false;
  for (const TimelineEvent& e : kept) {
    if (e.kind == TimelineEvent::Kind::kChannel && e.idle != prev) {
      channel_changes.emplace_back(e.t_ms, e.idle);
      prev = e.idle;
    }
    if (e.kind == TimelineEvent::Kind::kSourceIdle) source_changes.emplace_back(e.t_ms, e.idle);
  }
  EXPECT_EQ(channel_changes, (std::vector<std::pair<double, bool>>{{10, true}, {90000, false}}));
  EXPECT_EQ(source_changes, (std::vector<std::pair<double, bool>>{{10, true}}));  // still idle
  const std::string html = RenderTimelineHtml(kept, "t", absl::UTCTimeZone());
  EXPECT_EQ(Occurrences(html, "<rect class='idle channel'"), 1u);
  EXPECT_EQ(Occurrences(html, "<rect class='idle source'"), 1u);
  EXPECT_EQ(CountMarks(html, "<rect class='idle channel'"), 1);
}

TEST(TimelineRecorder, IdleStretchesWithinABucketMergeAndAreCounted) {
  TimelineSummary s(false, 64);
  // The axis reaches 64 s at once: buckets of at least a second.
  TimelineEvent w = At(TimelineEvent::Kind::kSourceWatermark, 60000, 0);
  w.watermark = 5;
  s.Add(w);
  ASSERT_GE(s.bucket_width(), 1000.0);
  // 300 stretches of 1 ms with 2 ms active between, from 60 000 ms: within
  // one or two buckets.  Then one more, 3 s later.
  int stretches = 0;
  double t = 60000;
  for (int i = 0; i < 300; ++i, t += 3, ++stretches) {
    TimelineEvent on = At(TimelineEvent::Kind::kSourceIdle, t, 1);
    on.idle = true;
    s.Add(on);
    TimelineEvent off = At(TimelineEvent::Kind::kSourceIdle, t + 1, 1);
    s.Add(off);
    s.Add(ChannelAt(t, 7, true));
    s.Add(ChannelAt(t + 1, 7, false));
  }
  for (double from : {t + 3000}) {
    TimelineEvent on = At(TimelineEvent::Kind::kSourceIdle, from, 1);
    on.idle = true;
    s.Add(on);
    s.Add(ChannelAt(from, 7, true));
    ++stretches;
  }
  EXPECT_LT(s.RetainedEntries(), 20u);
  const std::string html = RenderTimelineHtml(s.Events(), "t", absl::UTCTimeZone());
  EXPECT_LE(Occurrences(html, "<rect class='idle source'"), 3u);
  EXPECT_GE(Occurrences(html, "<rect class='idle source'"), 2u);
  EXPECT_EQ(CountMarks(html, "<rect class='idle source'"), stretches);
  EXPECT_EQ(CountMarks(html, "<rect class='idle channel'"), stretches);
  EXPECT_THAT(html, HasSubstr("stretches, each within a pixel of the next"));
}

TEST(TimelineRecorder, ALateRecordInAFiringsBucketKeepsItsOwnMarkAndCount) {
  TimelineSummary s(false, 64);
  TimelineEvent w = At(TimelineEvent::Kind::kSourceWatermark, 64000, 0);
  w.watermark = 100000;
  s.Add(w);
  for (int k = 0; k < 50; ++k)
    s.Add(TimelineEvent::Firing(0, absl::StrCat("k", k), 9000, 10000, 10000, "on_time", "v"));
  TimelineEvent late = TimelineEvent::Late(0, "k3", 4000, "k3,4000");
  s.Add(late);
  s.Add(TimelineEvent::Firing(0, "k9", 9000, 10000, 10500, "late", "v"));
  std::vector<TimelineEvent> kept = s.Events();
  int64_t on_time = 0, late_firings = 0, lates = 0;
  for (const TimelineEvent& e : kept) {
    if (e.kind == TimelineEvent::Kind::kFiring)
      (e.firing == "on_time" ? on_time : late_firings) += e.count;
    if (e.kind == TimelineEvent::Kind::kLate) {
      lates += e.count;
      EXPECT_EQ(e.ts, 4000);
      EXPECT_EQ(e.key, "k3");
    }
  }
  EXPECT_EQ(on_time, 50);
  EXPECT_EQ(late_firings, 1);
  EXPECT_EQ(lates, 1);
  const std::string html = RenderTimelineHtml(kept, "t", absl::UTCTimeZone());
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing on_time'"), 50);
  EXPECT_EQ(Occurrences(html, "<circle class='mark firing on_time'"), 1u);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing late'"), 1);
  EXPECT_EQ(CountMarks(html, "<path class='mark late'"), 1);
  EXPECT_THAT(html, HasSubstr("50 windows fired on_time here: key k0 window"));
  EXPECT_THAT(html, HasSubstr("and 49 more"));
}

TEST(TimelineRecorder, MarksAtManyHeightsInABucketKeepTheLowestAndHighestAndEveryCount) {
  TimelineSummary s(false, 64);
  Timestamp lowest = kMaxTimestamp, highest = kMinTimestamp;
  for (int i = 0; i < 1000; ++i) {  // all at t = 0: one bucket
    const Timestamp ts = 1000 + (i * 7919) % 100000;
    lowest = std::min(lowest, ts);
    highest = std::max(highest, ts);
    s.Add(TimelineEvent::Late(1, "k", ts, "v"));
  }
  Timestamp lo = kMaxTimestamp, hi = kMinTimestamp;
  int64_t total = 0, marks = 0;
  for (const TimelineEvent& e : s.Events()) {
    ASSERT_EQ(e.kind, TimelineEvent::Kind::kLate);
    lo = std::min(lo, e.ts);
    hi = std::max(hi, e.ts);
    total += e.count;
    ++marks;
  }
  EXPECT_EQ(total, 1000);
  EXPECT_LE(marks, 4);
  EXPECT_EQ(lo, lowest);
  EXPECT_EQ(hi, highest);
}

TEST(TimelineRecorder, TheRecordsAxisSummarisesAlongRecordsRead) {
  // A file read at once: every event within the same millisecond, the lines
  // read growing.  Bucketed by records, the marks still spread over the page.
  Recorder r(TimelineBound{500, 2048}, /*by_records=*/true);
  int64_t firings = 0;
  for (int i = 0; i < 20000; ++i) {
    r.rec.OnLineRead();
    r.rec.OnOutputWatermark(kSourceTask, 0, i);
    if (i % 10 == 0) {
      r.rec.OnFiring(TimelineEvent::Firing(0, "k", i - 10, i, i, "on_time", "v"));
      ++firings;
    }
  }
  ASSERT_TRUE(r.rec.summarizing());
  TimelineOptions o;
  o.by_records = true;
  const std::string html = RenderTimelineHtml(r.rec.events(), "t", absl::UTCTimeZone(), o);
  EXPECT_EQ(CountMarks(html, "<circle class='mark firing on_time'"), firings);
  std::set<std::string> xs;
  const std::regex cx("class='mark firing on_time'[^>]* cx='([0-9.]+)'");
  for (auto it = std::sregex_iterator(html.begin(), html.end(), cx); it != std::sregex_iterator();
       ++it)
    xs.insert((*it)[1].str());
  EXPECT_GT(xs.size(), 100u) << "the marks collapsed into " << xs.size() << " places";
  EXPECT_THAT(html, HasSubstr("source subtask 0: 20000 watermarks, last"));
  // The same stream summarised by processing time: one place.
  Recorder by_time(TimelineBound{500, 2048}, /*by_records=*/false);
  for (int i = 0; i < 20000; ++i) {
    by_time.rec.OnLineRead();
    if (i % 10 == 0)
      by_time.rec.OnFiring(TimelineEvent::Firing(0, "k", i - 10, i, i, "on_time", "v"));
  }
  ASSERT_TRUE(by_time.rec.summarizing());
  int64_t n = 0;
  std::set<double> places;
  for (const TimelineEvent& e : by_time.rec.events()) {
    n += e.count;
    places.insert(static_cast<double>(e.records));
  }
  EXPECT_EQ(n, firings);
  EXPECT_LE(places.size(), 4u);
}

TEST(TimelineRecorder, EventsALittleOutOfOrderAreCountedInTheirBuckets) {
  TimelineSummary s(false, 16);
  int64_t n = 0;
  for (int i = 0; i < 5000; ++i) {
    // Two sink threads' stamps interleave a few ms apart.
    const double t = i * 2.0 + (i % 2 == 0 ? 7.0 : 0.0);
    TimelineEvent f = TimelineEvent::Firing(0, "k", i * 100, i * 100 + 100, 0, "on_time", "v");
    f.t_ms = t;
    s.Add(f);
    ++n;
  }
  int64_t total = 0;
  double prev = -1;
  for (const TimelineEvent& e : s.Events()) {
    total += e.count;
    EXPECT_GE(e.t_ms, prev);  // in order along the axis
    prev = e.t_ms;
  }
  EXPECT_EQ(total, n);
}

TEST(TimelineRecorder, CountsTravelBetweenRanks) {
  TimelineEvent e = TimelineEvent::Late(2, "k", 5, "v");
  e.count = 42;
  std::vector<TimelineEvent> back;
  ASSERT_TRUE(DecodeTimelineEvents(EncodeTimelineEvents({e}), &back));
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].count, 42);
}

}  // namespace
}  // namespace tidemark::cli
