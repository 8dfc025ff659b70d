// Generalized watermarks (docs/generalized-watermarks.md) shown in the trace,
// the timeline and the live view (issue 27, item 7): the recorder keeps each
// one as a TimelineEvent of kind kGeneralized with its declaration; the rank
// exchange carries them; a TimelineSummary keeps a long lane's extremes per
// bucket and a bool lane's true stretches, bounded; the page draws a band
// where a bool is true and a step line for a long, with legend entries of the
// same colours; LiveState keeps the last value sent and combined per (task,
// subtask, identifier) with each input channel's value; and a CLI run with
// --backlog-watermark shows "backlog" in the trace and the timeline.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cli_test_util.h"
#include "tidemark/runtime/core/generalized_watermark.h"
#include "tools/cli/live_view.h"
#include "tools/cli/trace.h"

namespace tidemark::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using K = TimelineEvent::Kind;

const BoolWatermarkDeclaration& Backlog() {
  static const BoolWatermarkDeclaration d =
      WatermarkDeclarations::new_builder("backlog").type_bool().combine_function_or().build();
  return d;
}
const LongWatermarkDeclaration& Progress() {
  static const LongWatermarkDeclaration d = WatermarkDeclarations::new_builder("progress")
                                                .type_long()
                                                .combine_function_max()
                                                .combine_wait_for_all_channels(true)
                                                .build();
  return d;
}

struct Recorder {
  LinePrinter printer{nullptr};
  double now = 0;
  TraceRecorder rec{&printer, OutputFormat::kText, false, true, absl::UTCTimeZone()};
  Recorder() {
    rec.SetClockForTesting([this] { return now; });
  }
};

size_t Occurrences(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

TEST(GeneralizedViews, TheRecorderKeepsThemWithTheirDeclarationAndTheRanksExchangeCarriesThem) {
  Recorder r;
  r.now = 5;
  r.rec.OnGeneralizedWatermark("Source: a", 1, false, -1, Backlog().new_watermark(true));
  r.now = 7;
  r.rec.OnGeneralizedWatermark("window", 0, true, 1, Progress().new_watermark(-42));
  r.now = 9;
  r.rec.OnGeneralizedWatermark("Source: a", 1, false, -1, Backlog().new_watermark(false));
  const std::vector<TimelineEvent> kept = r.rec.events();
  ASSERT_EQ(kept.size(), 3u);
  // One task and declaration: one shared part.
  EXPECT_EQ(kept[0].gw, kept[2].gw);
  EXPECT_EQ(kept[2].gw_value, 0);
  std::vector<TimelineEvent> back;
  ASSERT_TRUE(DecodeTimelineEvents(EncodeTimelineEvents(kept), &back));
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].gw, back[2].gw);
  for (const std::vector<TimelineEvent>* v :
       {&kept, const_cast<const std::vector<TimelineEvent>*>(&back)}) {
    const TimelineEvent& b = (*v)[0];
    EXPECT_EQ(b.kind, K::kGeneralized);
    ASSERT_NE(b.gw, nullptr);
    EXPECT_EQ(b.t_ms, 5);
    EXPECT_EQ(b.gw->task, "Source: a");
    EXPECT_EQ(b.subtask, 1);
    EXPECT_EQ(b.gw->identifier, "backlog");
    EXPECT_TRUE(b.gw->is_bool);
    EXPECT_EQ(b.gw_value, 1);
    EXPECT_FALSE(b.gw_input);
    EXPECT_EQ(b.gw->function, "or");
    EXPECT_FALSE(b.gw->wait_for_all);
    const TimelineEvent& p = (*v)[1];
    EXPECT_EQ(p.kind, K::kGeneralized);
    ASSERT_NE(p.gw, nullptr);
    EXPECT_EQ(p.gw->task, "window");
    EXPECT_EQ(p.gw->identifier, "progress");
    EXPECT_FALSE(p.gw->is_bool);
    EXPECT_EQ(p.gw_value, -42);
    EXPECT_TRUE(p.gw_input);
    EXPECT_EQ(p.channel, 1);
    EXPECT_EQ(p.gw->function, "max");
    EXPECT_TRUE(p.gw->wait_for_all);
  }
}

TimelineEvent Gw(double t, const std::string& task, int subtask, const std::string& id,
                 bool is_bool, int64_t v, bool input) {
  TimelineEvent e{K::kGeneralized, t};
  TimelineEvent::Generalized g;
  g.task = task;
  g.identifier = id;
  g.is_bool = is_bool;
  g.function = is_bool ? "or" : "max";
  e.gw = std::make_shared<const TimelineEvent::Generalized>(g);
  e.subtask = subtask;
  e.gw_value = v;
  e.gw_input = input;
  e.channel = input ? 0 : -1;
  return e;
}

// An hour of a long that climbs with a dip now and then, and a bool that
// flips every few minutes: the summary stays bounded, keeps each bucket's
// lowest and highest long, every true stretch of the bool, and every
// watermark in some kept point's count.
TEST(GeneralizedViews, TheSummaryKeepsALongsExtremesAndABoolsStretchesBounded) {
  TimelineSummary s(false, 256);
  int64_t fed_longs = 0;
  std::vector<std::pair<double, double>> true_stretches;
  for (int i = 0; i < 360000; ++i) {  // every 10 ms for an hour
    const double t = i * 10.0;
    const int64_t v = i % 1000 == 500 ? -7 : i;  // a dip to -7 now and then
    s.Add(Gw(t, "Source: a", 0, "progress", false, v, false));
    ++fed_longs;
    if (i % 30000 == 0) {  // every 5 minutes: true for a minute
      s.Add(Gw(t, "Source: a", 0, "backlog", true, 1, false));
      true_stretches.emplace_back(t, t + 60000);
    }
    if (i % 30000 == 6000) s.Add(Gw(t, "Source: a", 0, "backlog", true, 0, false));
  }
  EXPECT_LT(s.RetainedEntries(), 4u * 256 + 64);
  EXPECT_LT(s.RetainedBytes(), 256u * 1024);
  const std::vector<TimelineEvent> kept = s.Events();
  int64_t longs = 0;
  bool saw_dip = false, saw_max = false;
  std::vector<std::pair<double, bool>> bools;
  for (const TimelineEvent& e : kept) {
    ASSERT_EQ(e.kind, K::kGeneralized);
    if (e.gw->identifier == "progress") {
      longs += e.count;
      saw_dip = saw_dip || e.gw_value == -7;
      saw_max = saw_max || e.gw_value == 359999;
    } else {
      bools.emplace_back(e.t_ms, e.gw_value != 0);
    }
  }
  EXPECT_EQ(longs, fed_longs);
  EXPECT_TRUE(saw_dip);
  EXPECT_TRUE(saw_max);
  // Every stretch, from where it began to where it ended.
  std::vector<std::pair<double, bool>> expected;
  for (const auto& [from, until] : true_stretches) {
    expected.emplace_back(from, true);
    expected.emplace_back(until, false);
  }
  EXPECT_EQ(bools, expected);

  const std::string html = RenderTimelineHtml(kept, "t", absl::UTCTimeZone());
  EXPECT_EQ(Occurrences(html, "<rect class='gw-band'"), true_stretches.size());
  EXPECT_EQ(Occurrences(html, "<path class='lane gw-long'"), 1u);
}

// The page: a band per true stretch of a bool lane and a step line per long
// lane, each lane in its own colour, and a legend entry per lane drawn in the
// same colour.
TEST(GeneralizedViews, ThePageDrawsBandsAndStepLinesWithMatchingLegendEntries) {
  std::vector<TimelineEvent> events;
  TimelineEvent w{K::kSourceWatermark, 0};
  w.watermark = 1000;
  events.push_back(w);
  events.push_back(Gw(1, "Source: a", 0, "backlog", true, 1, false));
  events.push_back(Gw(2, "window", 1, "backlog", true, 1, true));
  events.push_back(Gw(3, "Source: a", 0, "progress", false, 10, false));
  events.push_back(Gw(40, "Source: a", 0, "progress", false, 30, false));
  events.push_back(Gw(50, "Source: a", 0, "backlog", true, 0, false));
  events.push_back(Gw(60, "window", 1, "backlog", true, 0, true));
  events.push_back(Gw(70, "Source: a", 0, "backlog", true, 1, false));  // true to the end
  const std::string html = RenderTimelineHtml(events, "t", absl::UTCTimeZone());
  EXPECT_THAT(html, HasSubstr(">generalized watermarks</text>"));
  EXPECT_EQ(Occurrences(html,
                        "<rect class='gw-band' data-identifier='backlog' data-task='Source: "
                        "a' data-subtask='0' data-direction='out'"),
            2u);
  EXPECT_EQ(Occurrences(html,
                        "<rect class='gw-band' data-identifier='backlog' data-task='window' "
                        "data-subtask='1' data-direction='in'"),
            1u);
  EXPECT_EQ(Occurrences(html, "<path class='lane gw-long' data-identifier='progress'"), 1u);
  // Legend: one entry per lane, its swatch in the colour of what it names.
  const std::regex band(
      "<rect class='gw-band' data-identifier='(\\w+)' data-task='([^']*)' "
      "data-subtask='(\\d)' data-direction='(\\w+)'[^>]* fill='(#[0-9a-f]+)'");
  std::set<std::string> band_colours;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), band); it != std::sregex_iterator();
       ++it)
    band_colours.insert((*it)[5].str());
  EXPECT_EQ(band_colours.size(), 2u) << "two bool lanes, two colours";
  const std::regex bool_entry(
      "data-kind='gw-bool'[^>]*><rect [^>]*fill='(#[0-9a-f]+)' "
      "opacity='0.45'/><text x='30' y='4'>([^<]*)</text>");
  std::set<std::string> entry_colours;
  std::vector<std::string> labels;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), bool_entry);
       it != std::sregex_iterator(); ++it) {
    entry_colours.insert((*it)[1].str());
    labels.push_back((*it)[2].str());
  }
  EXPECT_EQ(entry_colours, band_colours);
  EXPECT_THAT(labels, ::testing::UnorderedElementsAre(
                          "backlog (bool, or) at Source: a subtask 0 sent: true",
                          "backlog (bool, or) at window subtask 1 combined: true"));
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(html, m,
                        std::regex("data-kind='gw-long'[^>]*><line [^>]*stroke='(#[0-9a-f]+)"
                                   "' stroke-width='2'/><text x='30' y='4'>progress")));
  EXPECT_THAT(html, HasSubstr(absl::StrCat("<path class='lane gw-long' data-identifier='progress' "
                                           "data-task='Source: a' data-subtask='0' "
                                           "data-direction='out' d='")));
  EXPECT_TRUE(std::regex_search(
      html, std::regex(absl::StrCat("<path class='lane gw-long'[^>]* stroke='", m[1].str(), "'"))));
  // Without any, no panel and no entries.
  const std::string plain = RenderTimelineHtml({w}, "t", absl::UTCTimeZone());
  EXPECT_THAT(plain, Not(HasSubstr("generalized watermarks")));
  EXPECT_THAT(plain, Not(HasSubstr("gw-")));
}

// The live view keeps the last value each subtask sent and combined, and
// gives each input channel the value its producer sent (from the graph).
TEST(GeneralizedViews, TheLiveStateHasTheLastValuesPerSubtaskAndChannel) {
  LiveState state(absl::UTCTimeZone());
  LiveGraph g;
  LiveGraph::Vertex src;
  src.id = 0;
  src.name = "Source: a";
  src.parallelism = 2;
  src.source = true;
  src.inputs = {{}, {}};
  LiveGraph::Vertex win;
  win.id = 1;
  win.name = "window";
  win.parallelism = 1;
  win.inputs = {{{0, 0}, {0, 1}}};
  g.vertices = {src, win};
  LiveGraph::Edge edge;
  edge.from = 0;
  edge.to = 1;
  edge.ship_strategy = "HASH";
  edge.channels = 2;
  g.edges = {edge};
  state.SetGraph(g);
  state.OnTimelineEvent(Gw(1, "Source: a", 0, "backlog", true, 1, false));
  state.OnTimelineEvent(Gw(2, "Source: a", 1, "backlog", true, 1, false));
  state.OnTimelineEvent(Gw(3, "window", 0, "backlog", true, 1, true));
  state.OnTimelineEvent(Gw(4, "Source: a", 0, "backlog", true, 0, false));
  TimelineEvent combined = Gw(5, "window", 0, "backlog", true, 1, true);
  state.OnTimelineEvent(combined);  // channel 1 still says true
  const std::string json = state.StateJson();
  EXPECT_THAT(json, HasSubstr("\"generalized_watermarks\":[{\"task\":\"Source: a\",\"subtask\":0,"
                              "\"identifier\":\"backlog\",\"type\":\"bool\",\"function\":\"or\","
                              "\"wait_for_all_channels\":false,\"sent\":false,\"combined\":null,"
                              "\"combined_channel\":-1,\"channels\":[]}"));
  EXPECT_THAT(json, HasSubstr("{\"task\":\"window\",\"subtask\":0,\"identifier\":\"backlog\","
                              "\"type\":\"bool\",\"function\":\"or\",\"wait_for_all_channels\":"
                              "false,\"sent\":null,\"combined\":true,\"combined_channel\":0,"
                              "\"channels\":[{\"channel\":0,\"from_task\":\"Source: a\","
                              "\"from_subtask\":0,\"value\":false},{\"channel\":1,\"from_task\":"
                              "\"Source: a\",\"from_subtask\":1,\"value\":true}]}"));
  // On the graph's subtasks too.
  EXPECT_TRUE(std::regex_search(
      json, std::regex("\"subtasks\":\\[\\{\"subtask\":0,[^\\]]*\"generalized_watermarks\":\\[\\{"
                       "\"task\":\"window\",\"subtask\":0,\"identifier\":\"backlog\"")))
      << json;
  const std::string events = state.EventsJson(0, 100);
  EXPECT_THAT(events, HasSubstr("\"kind\":\"generalized_watermark\",\"t_ms\":5.0,\"subtask\":0,"
                                "\"channel\":0,\"task\":\"window\",\"identifier\":\"backlog\","
                                "\"type\":\"bool\",\"direction\":\"in\",\"value\":true"));
}

// A CLI run with --backlog-watermark: each source subtask says backlog=true
// with its first record (a file read unpaced) and false at its end; the
// window subtasks combine them with OR.  The trace prints them, the timeline
// draws them.
TEST(GeneralizedViews, ACliRunShowsBacklogInTheTraceAndTheTimeline) {
  const std::string a = testing::TempPath("gw_backlog_a.txt");
  const std::string b = testing::TempPath("gw_backlog_b.txt");
  testing::WriteFile(a, "k,1000\nk,2000\nj,3000\n");
  testing::WriteFile(b, "k,1500\nj,2500\n");
  const std::string page = testing::TempPath("gw_backlog.html");
  testing::CliRun r = testing::RunTidemark(
      {"run", "--input=" + a, "--input=" + b, "--fields=key,ts", "--parallelism=2",
       "--window=tumbling:1s", "--backlog-watermark", "--trace=watermarks", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int s = 0; s < 2; ++s) {
    const std::string sent = absl::StrCat(" subtask ", s, " sent backlog=");
    const size_t on = r.out.find(sent + "true");
    const size_t off = r.out.find(sent + "false");
    EXPECT_NE(on, std::string::npos) << r.out;
    EXPECT_NE(off, std::string::npos) << r.out;
    EXPECT_LT(on, off) << "true first, false at the end";
    EXPECT_TRUE(
        std::regex_search(r.out, std::regex(absl::StrCat("\\[watermark\\] Source: [^\\n]* subtask ",
                                                         s, " sent backlog=true"))))
        << r.out;
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex(absl::StrCat("\\[watermark\\] window[^\\n]* subtask ", s,
                                       " combined \\(channel [01]\\) backlog=true"))))
        << r.out;
    EXPECT_TRUE(std::regex_search(
        r.out, std::regex(absl::StrCat("\\[watermark\\] window[^\\n]* subtask ", s,
                                       " combined \\(channel [01]\\) backlog=false"))))
        << r.out;
  }
  const std::string html = testing::ReadFile(page);
  EXPECT_THAT(html, HasSubstr(">generalized watermarks</text>"));
  EXPECT_GE(Occurrences(html, "<rect class='gw-band' data-identifier='backlog'"), 4u)
      << "two sources sent, two window subtasks combined";
  EXPECT_THAT(html, HasSubstr("data-kind='gw-bool'"));

  // Without the flag: none.
  testing::CliRun plain = testing::RunTidemark(
      {"run", "--input=" + a, "--fields=key,ts", "--window=tumbling:1s", "--trace=watermarks"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.out, Not(HasSubstr("backlog")));
}

// With --rate the input keeps a pace: backlog only while it is more than a
// second behind.  The first record is on schedule (false); the writer then
// stays silent for 3 s (real time is the subject here: the input falls
// behind its pace) and writes 30 lines at once, which the pacer lets through
// at full speed to catch up: the first of them is 2.9 s late (true), the
// 30th on schedule again (false).
TEST(GeneralizedViews, APacedInputIsBacklogOnlyWhileMoreThanASecondBehindItsPace) {
  testing::FifoInputs inputs("gwpaced", 1);
  ASSERT_TRUE(inputs.ok());
  std::vector<std::string> args = {"run",         "--fields=key,ts",     "--window=tumbling:1s",
                                   "--rate=10/s", "--backlog-watermark", "--trace=watermarks"};
  for (const std::string& a : inputs.Args()) args.push_back(a);
  testing::CliProcess p(args, testing::CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_TRUE(inputs.Open());
  ASSERT_TRUE(inputs.Write(0, "k,1000"));
  ASSERT_TRUE(p.WaitForOut("sent backlog=false", std::chrono::seconds(60))) << p.out();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (int i = 1; i <= 30; ++i) ASSERT_TRUE(inputs.Write(0, absl::StrCat("k,", 1000 + 100 * i)));
  inputs.Close();
  ASSERT_EQ(p.Wait(std::chrono::seconds(60)), 0) << p.err();
  std::vector<std::string> sent;
  const std::string out = p.out();
  const std::regex line("\\[watermark\\] Source: [^\\n]* subtask 0 sent backlog=(true|false)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it)
    sent.push_back((*it)[1].str());
  EXPECT_EQ(sent, (std::vector<std::string>{"false", "true", "false"})) << out;
}

}  // namespace
}  // namespace tidemark::cli
