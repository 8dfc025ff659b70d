// The live view's state without a server (issue 27 item 1): the charts'
// history stays bounded however long the job runs, the job graph comes from
// the physical plan with each subtask's input channels in the order of its
// metrics, and back-pressure lands on the subtask that produces into a full
// channel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/exec/job_compiler.h"
#include "tidemark/tidemark.h"
#include "tools/cli/live_view.h"

namespace tidemark {
namespace {

using cli::LiveGraph;
using cli::LiveState;
using cli::TimelineEvent;
using cli::WatermarkHistory;
using ::testing::HasSubstr;

TEST(WatermarkHistory, StaysBoundedOverAnHourAndKeepsTheWindowsStart) {
  WatermarkHistory h(/*window_ms=*/60'000, /*interval_ms=*/250);
  const WatermarkHistory::Key ch{"event_time", 0, 1}, aligned{"event_time", 0, -1};
  double t = 0;
  for (int64_t i = 0; t <= 3'600'000; ++i, t += 7) {  // an hour, an event every 7 ms
    h.Record(ch, t, 1000 + i);
    h.Record(aligned, t, 500 + i / 2);
    ASSERT_LE(h.Points(ch), h.MaxPointsPerSeries()) << "at " << t << " ms";
  }
  EXPECT_EQ(h.MaxPointsPerSeries(), 242u);
  EXPECT_GE(h.Points(ch), 235u);  // about one a 250 ms over the last minute
  EXPECT_LE(h.Points(aligned), h.MaxPointsPerSeries());
  // The JSON: the first point at or before the window's start, the next after
  // it; the last is the last value recorded.
  const double now = t;
  const std::string j = h.Json(now);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      j, m,
      std::regex(
          "\\{\"kind\":\"event_time\",\"subtask\":0,\"channel\":1,\"points\":\\[\\[([0-9.]+),"
          "\\d+\\],\\[([0-9.]+),")))
      << j.substr(0, 400);
  EXPECT_LE(std::stod(m[1]), now - 60'000);
  EXPECT_GT(std::stod(m[2]), now - 60'000);
  const int64_t last = 1000 + static_cast<int64_t>((t - 7) / 7);
  EXPECT_THAT(j, HasSubstr(absl::StrCat(",", last, "]]}")));
}

TEST(WatermarkHistory, KeepsTheLastValueOfEachInterval) {
  WatermarkHistory h(10'000, 1'000);
  const WatermarkHistory::Key k{"event_time", 0, 0};
  h.Record(k, 100, 1);
  h.Record(k, 900, 2);   // same interval: replaces
  h.Record(k, 1100, 3);  // next interval
  EXPECT_EQ(h.Points(k), 2u);
  EXPECT_THAT(h.Json(1200), HasSubstr("\"points\":[[100.0,2],[1100.0,3]]"));
}

TEST(LiveState, HistoryFollowsChannelEventsAndEndsWithTheCurrentValues) {
  LiveState state(absl::UTCTimeZone(), 100, /*history_ms=*/10'000, /*sample_ms=*/100);
  for (int i = 0; i < 50; ++i) {
    TimelineEvent e{TimelineEvent::Kind::kChannel, 50.0 * i};
    e.subtask = 1;
    e.channel = i % 2;
    e.watermark = 1000 * (i + 1);
    e.aligned = 1000 * i;
    e.holding = 1 - e.channel;
    state.OnTimelineEvent(e);
  }
  const std::string j = state.StateJson();
  EXPECT_THAT(j,
              HasSubstr("\"history\":{\"window_ms\":10000.0,\"interval_ms\":100.0,\"series\":["));
  // Channel 1's last watermark (event 49), channel 0's (event 48), the
  // aligned minimum's (event 49): the same values as the channel tables.
  EXPECT_THAT(j, HasSubstr("{\"kind\":\"event_time\",\"subtask\":1,\"channel\":1,\"points\":[["));
  EXPECT_THAT(j, HasSubstr(",50000]]}"));
  EXPECT_THAT(j, HasSubstr(",49000]]}"));
  EXPECT_THAT(j, HasSubstr("\"channel\":-1,\"points\":[[0.0,1000],"));
  EXPECT_THAT(j, HasSubstr("\"aligned\":49000,"));
  EXPECT_THAT(j, HasSubstr("\"checkpoints\":{\"enabled\":false}"));
}

// Two source subtasks into two window subtasks over a HASH edge: window 0's
// channel from source 0 is full, window 1's channel from source 0 half full.
LiveGraph TwoByTwo() {
  LiveGraph g;
  LiveGraph::Vertex src{0, "Src", {"Src"}, 2, true, {{}, {}}};
  LiveGraph::Vertex win{1, "Win -> Sink", {"Win", "Sink"}, 2, false, {}};
  win.inputs = {{{0, 0}, {0, 1}}, {{0, 0}, {0, 1}}};
  g.vertices = {src, win};
  g.edges = {LiveGraph::Edge{0, 1, "HASH", "HASH(key groups, maxP=128)", "", 4}};
  return g;
}

SubtaskMetricsSnapshot Snap(std::string name, int subtask, std::vector<double> fill) {
  SubtaskMetricsSnapshot m;
  m.task_name = std::move(name);
  m.subtask = subtask;
  m.parallelism = 2;
  m.input_watermark = 5000 + subtask;
  m.output_watermark = 7000 + subtask;
  m.channel_fill = std::move(fill);
  m.channel_watermarks.resize(m.channel_fill.size(), 5000);
  return m;
}

TEST(LiveState, BackPressureIsOnTheSubtaskThatProducesIntoAFullChannel) {
  LiveState state(absl::UTCTimeZone());
  state.SetGraph(TwoByTwo());
  state.SetMetricsSource([] {
    return std::vector<SubtaskMetricsSnapshot>{Snap("Src", 0, {}), Snap("Src", 1, {}),
                                               Snap("Win -> Sink", 0, {1.0, 0.0}),
                                               Snap("Win -> Sink", 1, {0.5, 0.25})};
  });
  const std::string j = state.StateJson();
  auto subtask = [](int s, int64_t wm, const char* in, const char* out, const char* level) {
    return absl::StrCat("{\"subtask\":", s, ",\"watermark\":", wm,
                        ",\"watermark_text\":\"1970-01-01 00:00:0", wm / 1000, ".00", wm % 1000,
                        "\",\"input_fill\":", in, ",\"output_fill\":", out, ",\"backpressure\":\"",
                        level, "\"");
  };
  // Sources show their output watermark; source 0 feeds the full channel.
  EXPECT_THAT(j, HasSubstr(subtask(0, 7000, "0.00", "1.00", "high"))) << j;
  EXPECT_THAT(j, HasSubstr(subtask(1, 7001, "0.00", "0.25", "ok"))) << j;
  // Window subtasks show their input watermark and how full their inputs are.
  EXPECT_THAT(j, HasSubstr(subtask(0, 5000, "1.00", "0.00", "ok"))) << j;
  EXPECT_THAT(j, HasSubstr(subtask(1, 5001, "0.50", "0.00", "ok"))) << j;
  EXPECT_THAT(j, HasSubstr("\"parallelism\":2,\"source\":true,\"watermark\":7000,"
                           "\"watermark_text\":\"1970-01-01 00:00:07.000\",\"output_fill\":1.00,"
                           "\"backpressure\":\"high\""));
  EXPECT_THAT(j, HasSubstr("\"edges\":[{\"id\":0,\"from\":0,\"to\":1,\"ship_strategy\":\"HASH\","
                           "\"partitioning\":\"HASH(key groups, maxP=128)\",\"side_output\":\"\","
                           "\"channels\":4,\"fill\":1.00,\"backpressure\":\"high\"}]"));
  EXPECT_STREQ(cli::BackPressureLevel(0.49), "ok");
  EXPECT_STREQ(cli::BackPressureLevel(0.5), "low");
  EXPECT_STREQ(cli::BackPressureLevel(1.0), "high");
}

// Dropped late records (--late=drop: counted by the window operator, never
// seen as events) per window subtask, from the window task's counter only;
// the total counts every operator's.
TEST(LiveState, DroppedLateRecordsArePerWindowSubtask) {
  LiveState state(absl::UTCTimeZone());
  for (int subtask : {0, 1}) {
    TimelineEvent e{TimelineEvent::Kind::kChannel, 10.0};
    e.subtask = subtask;
    e.channel = 0;
    e.watermark = 1000;
    e.aligned = 1000;
    state.OnTimelineEvent(e);
  }
  state.SetMetricsSource([] {
    SubtaskMetricsSnapshot w0 = Snap("Window(reduce) -> Sink", 0, {});
    w0.counters["numLateRecordsDropped"] = 3;
    SubtaskMetricsSnapshot w1 = Snap("Window(reduce) -> Sink", 1, {});
    w1.counters["numLateRecordsDropped"] = 5;
    SubtaskMetricsSnapshot other = Snap("Map", 0, {});
    other.counters["numLateRecordsDropped"] = 7;
    return std::vector<SubtaskMetricsSnapshot>{w0, w1, other};
  });
  const std::string j = state.StateJson();
  EXPECT_THAT(j, HasSubstr("\"late_records\":0,\"late_dropped\":3}")) << j;
  EXPECT_THAT(j, HasSubstr("\"late_records\":0,\"late_dropped\":5}")) << j;
  EXPECT_THAT(j, HasSubstr("\"late_dropped\":15")) << j;
}

TEST(LiveState, CheckpointsComeFromTheSummary) {
  LiveState state(absl::UTCTimeZone());
  state.SetCheckpointSource([] {
    CheckpointSummary c;
    c.enabled = true;
    c.completed = 3;
    c.failed = 1;
    c.last_id = 4;
    c.last_completed_unix_ms = 1'000'000;
    c.last_duration_ms = 12.5;
    c.last_size_bytes = 2048;
    c.last_alignment_ms = 0.25;
    c.in_progress_id = 5;
    c.in_progress_ms = 3;
    c.last_error = "checkpoint 2: disk full";
    return c;
  });
  EXPECT_THAT(
      state.StateJson(),
      HasSubstr("\"checkpoints\":{\"enabled\":true,\"in_progress\":5,\"in_progress_ms\":3.0,"
                "\"completed\":3,\"failed\":1,\"last_completed\":{\"id\":4,\"at_unix_ms\":"
                "1000000,\"at_text\":\"1970-01-01 00:16:40.000\",\"duration_ms\":12.5,"
                "\"size_bytes\":2048,\"alignment_ms\":0.250},"));
  EXPECT_THAT(state.StateJson(), HasSubstr("\"last_failure\":\"checkpoint 2: disk full\""));
}

// numRestarts and the last cause (issue 26 item 4): from the "restart" events
// the CLI's restart listener publishes; none before the first.
TEST(LiveState, RestartsCountAndTheLastCauseComeFromTheRestartEvents) {
  LiveState state(absl::UTCTimeZone());
  EXPECT_THAT(state.StateJson(),
              HasSubstr("\"restarts\":{\"num_restarts\":0,\"last_cause\":null}"));
  for (int n : {1, 2}) {
    state.Publish(cli::LiveEvent{
        "restart",
        10.0 * n,
        -1,
        -1,
        {{"restart", absl::StrCat(n)}, {"cause", absl::StrCat("\"map failed at ", n, "\"")}}});
  }
  EXPECT_THAT(state.StateJson(),
              HasSubstr("\"restarts\":{\"num_restarts\":2,\"last_cause\":\"map failed at 2\"}"));
  // And the feed has both events.
  EXPECT_THAT(state.EventsJson(0, 100), HasSubstr("\"cause\":\"map failed at 1\""));
}

// The graph of a real plan: a generator at parallelism 2, key_by into a reduce
// at 3 (HASH: each map subtask reads both generator subtasks), rebalance into
// a sink at 1, and a forward chain (the reduce's filter).
TEST(LiveGraph, FromAPhysicalPlan) {
  StreamExecutionEnvironment env;
  env.from_generator<int64_t>([](int64_t i) { return i; }, 10)
      .set_parallelism(2)
      .key_by([](const int64_t& v) { return v % 7; })
      .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
      .name("M")
      .set_parallelism(3)
      .filter([](const int64_t&) { return true; })
      .name("F")
      .set_parallelism(3)
      .rebalance()
      .add_sink([](int64_t&&, Timestamp) {}, "S")
      .set_parallelism(1);
  absl::StatusOr<internal::PhysicalPlan> plan = internal::StreamAccess::Plan(env);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const LiveGraph g = cli::LiveGraphFromPlan(*plan);
  ASSERT_EQ(g.vertices.size(), 3u);
  EXPECT_TRUE(g.vertices[0].source);
  EXPECT_EQ(g.vertices[1].operators, (std::vector<std::string>{"M", "F"}));
  EXPECT_EQ(g.vertices[1].parallelism, 3);
  ASSERT_EQ(g.edges.size(), 2u);
  EXPECT_EQ(g.edges[0].ship_strategy, "HASH");
  EXPECT_EQ(g.edges[0].channels, 6);
  EXPECT_EQ(g.edges[1].ship_strategy, "REBALANCE");
  EXPECT_EQ(g.edges[1].from, 1);
  EXPECT_EQ(g.edges[1].to, 2);
  const std::vector<std::pair<int, int>> from_both = {{0, 0}, {0, 1}};
  for (int s = 0; s < 3; ++s) EXPECT_EQ(g.vertices[1].inputs[s], from_both);
  const std::vector<std::pair<int, int>> from_three = {{1, 0}, {1, 1}, {1, 2}};
  EXPECT_EQ(g.vertices[2].inputs[0], from_three);
}

}  // namespace
}  // namespace tidemark
