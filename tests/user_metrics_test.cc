// User gauges and histograms (RuntimeContext::gauge / histogram, Flink's
// Gauge and Histogram): per operator and subtask in JobResult::metrics, read
// live through JobClient::metrics while the job runs, and printed by
// FormatUserMetrics (the CLI summary's user metrics).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

// Tags each record with its subtask; a gauge function counts the records it
// saw, a settable gauge holds the largest, a histogram gets every value.
struct MeasuringMap {
  int subtask = -1;
  int64_t seen = 0;
  std::optional<UserGauge> largest;
  std::optional<UserHistogram> values;
  void open(const RuntimeContext& ctx) {
    subtask = ctx.subtask_index();
    ctx.gauge("seen", [this] { return seen; });
    largest.emplace(ctx.gauge("largest"));
    values.emplace(ctx.histogram("values", /*window=*/1 << 20));
  }
  std::pair<int, int64_t> operator()(const int64_t& v) {
    ++seen;
    if (v > largest->value()) largest->set(static_cast<double>(v));
    values->update(v);
    return {subtask, v};
  }
};

TEST(UserMetrics, GaugesAndHistogramsPerOperatorAndSubtaskInTheResult) {
  constexpr int64_t kRecords = 3000;
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto tagged = env.from_generator<int64_t>([](int64_t i) { return (i * 7919) % 1009; }, kRecords)
                    .map(MeasuringMap{})
                    .name("Measure");
  auto collected = tagged.collect();
  JobResult r = env.execute("user-metrics");
  ASSERT_TRUE(r.ok()) << r.status;

  // The reference: the values each subtask saw, from the collected output.
  std::map<int, std::vector<int64_t>> by_subtask;
  for (const auto& item : collected->items())
    by_subtask[item.value.first].push_back(item.value.second);
  ASSERT_EQ(by_subtask.size(), 3u);

  int subtasks_with_metrics = 0;
  for (const SubtaskMetricsSnapshot& m : r.metrics) {
    if (m.gauges.empty()) continue;
    ++subtasks_with_metrics;
    std::vector<int64_t> vals = by_subtask.at(m.subtask);
    std::sort(vals.begin(), vals.end());
    ASSERT_EQ(m.gauges.size(), 2u);
    // Sorted by operator, then name.
    EXPECT_EQ(m.gauges[0].operator_name, "Measure");
    EXPECT_EQ(m.gauges[0].name, "largest");
    EXPECT_EQ(m.gauges[0].value, static_cast<double>(vals.back()));
    EXPECT_EQ(m.gauges[1].name, "seen");
    EXPECT_EQ(m.gauges[1].value, static_cast<double>(vals.size()));

    ASSERT_EQ(m.histograms.size(), 1u);
    EXPECT_EQ(m.histograms[0].operator_name, "Measure");
    EXPECT_EQ(m.histograms[0].name, "values");
    const HistogramStatistics& s = m.histograms[0].statistics;
    EXPECT_EQ(s.count, static_cast<int64_t>(vals.size()));
    EXPECT_EQ(s.size, static_cast<int64_t>(vals.size()));
    EXPECT_EQ(s.min, vals.front());
    EXPECT_EQ(s.max, vals.back());
    const double sum = std::accumulate(vals.begin(), vals.end(), 0.0);
    EXPECT_NEAR(s.mean, sum / vals.size(), 1e-9);
    // The median of an even count lies between the two middle values.
    EXPECT_GE(s.p50, static_cast<double>(vals[(vals.size() - 1) / 2]));
    EXPECT_LE(s.p50, static_cast<double>(vals[vals.size() / 2]));
    EXPECT_LE(s.p50, s.p95);
    EXPECT_LE(s.p95, s.p99);
    EXPECT_LE(s.p99, static_cast<double>(vals.back()));
  }
  EXPECT_EQ(subtasks_with_metrics, 3);
  // The source subtasks' chains have none.
  EXPECT_NE(FormatUserMetrics(r.metrics).find("Measure[2] seen = "), std::string::npos);
}

TEST(UserMetrics, HistogramPercentilesAreCommonsMathsOverTheLastWindowValues) {
  // Apache Commons Math's Percentile (Flink's DescriptiveStatisticsHistogram)
  // of 1..100: p50 = 50.5, p95 = 95.95, p99 = 99.99.
  internal::Histogram h(100);
  for (int64_t v = -50; v <= 0; ++v) h.Update(v * 1000);  // pushed out of the window
  std::vector<int64_t> later(100);
  std::iota(later.begin(), later.end(), 1);
  std::reverse(later.begin(), later.end());
  for (int64_t v : later) h.Update(v);
  const HistogramStatistics s = h.Statistics();
  EXPECT_EQ(s.count, 151);
  EXPECT_EQ(s.size, 100);
  EXPECT_EQ(s.min, 1);
  EXPECT_EQ(s.max, 100);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_NEAR(s.stddev, std::sqrt(100.0 * 101.0 / 12.0), 1e-9);  // sample stddev of 1..n
  EXPECT_DOUBLE_EQ(s.p50, 50.5);
  EXPECT_NEAR(s.p95, 95.95, 1e-9);
  EXPECT_NEAR(s.p99, 99.99, 1e-9);
  // Small windows clamp to the extremes.
  internal::Histogram one(4);
  one.Update(7);
  const HistogramStatistics t = one.Statistics();
  EXPECT_EQ(t.p50, 7);
  EXPECT_EQ(t.p99, 7);
  EXPECT_EQ(t.stddev, 0);
  EXPECT_EQ(internal::Histogram(3).Statistics().size, 0);
}

struct SlowGauge {
  int64_t seen = 0;
  std::optional<UserHistogram> h;
  void open(const RuntimeContext& ctx) {
    ctx.gauge("seen", [this] { return seen; });
    h.emplace(ctx.histogram("v", 64));
  }
  bool operator()(const int64_t& v) {
    ++seen;
    h->update(v);
    return true;
  }
};

TEST(UserMetrics, ReadLiveWhileTheJobRunsAndNeverGoBack) {
  constexpr int64_t kRecords = 200000;
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.from_generator<int64_t>([](int64_t i) { return i; }, kRecords)
      .filter(SlowGauge{})
      .name("Live")
      .add_sink([](int64_t&&) {});
  JobClient client = env.execute_async("live");
  std::map<int, double> last_seen;
  std::map<int, int64_t> last_count;
  while (!client.done()) {
    for (const SubtaskMetricsSnapshot& m : client.metrics()) {
      for (const auto& g : m.gauges) {
        EXPECT_GE(g.value, last_seen[m.subtask]);
        last_seen[m.subtask] = g.value;
      }
      for (const auto& h : m.histograms) {
        EXPECT_GE(h.statistics.count, last_count[m.subtask]);
        EXPECT_LE(h.statistics.size, 64);
        last_count[m.subtask] = h.statistics.count;
      }
    }
  }
  JobResult r = client.wait();
  ASSERT_TRUE(r.ok()) << r.status;
  double total_seen = 0;
  int64_t total_count = 0;
  for (const SubtaskMetricsSnapshot& m : r.metrics) {
    for (const auto& g : m.gauges) total_seen += g.value;
    for (const auto& h : m.histograms) total_count += h.statistics.count;
  }
  // The gauge functions' last values (refreshed before close) and the
  // histograms' counts cover every record.
  EXPECT_EQ(total_seen, static_cast<double>(kRecords));
  EXPECT_EQ(total_count, kRecords);
}

TEST(UserMetrics, FormatUserMetricsOneLinePerMetric) {
  SubtaskMetricsSnapshot a;
  a.task_name = "Source -> Map";
  a.subtask = 1;
  a.gauges.push_back({"Map", "queue", 3});
  a.gauges.push_back({"Map", "ratio", 0.25});
  HistogramStatistics s;
  s.count = 10;
  s.size = 10;
  s.min = 1;
  s.max = 10;
  s.mean = 5.5;
  s.p50 = 5.5;
  s.p95 = 10;
  s.p99 = 10;
  a.histograms.push_back({"Map", "latency", s});
  SubtaskMetricsSnapshot b;  // no user metrics
  b.subtask = 0;
  EXPECT_EQ(FormatUserMetrics({b}), "");
  EXPECT_EQ(FormatUserMetrics({b, a}),
            "  Map[1] queue = 3\n"
            "  Map[1] ratio = 0.25\n"
            "  Map[1] latency: count 10, min 1, max 10, mean 5.5, p50 5.5, p95 10, p99 10\n");
}

}  // namespace
}  // namespace tidemark
