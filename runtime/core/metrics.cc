#include "tidemark/runtime/core/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tidemark {

SubtaskMetrics::SubtaskMetrics(std::string task_name, int subtask, int parallelism,
                               int num_input_channels)
    : task_name_(std::move(task_name)),
      subtask_(subtask),
      parallelism_(parallelism),
      channels_(num_input_channels) {}

SubtaskMetrics::~SubtaskMetrics() = default;

internal::Counter* SubtaskMetrics::GetCounter(const std::string& name) {
  internal::MutexLock lock(&mu_);
  auto& c = counters_[name];
  if (!c) c = std::make_unique<internal::Counter>();
  return c.get();
}

std::map<std::string, int64_t> SubtaskMetrics::CounterValues() const {
  internal::MutexLock lock(&mu_);
  std::map<std::string, int64_t> out;
  for (const auto& [k, v] : counters_) out[k] = v->Get();
  return out;
}

internal::Gauge* SubtaskMetrics::GetGauge(const std::string& op, const std::string& name) {
  internal::MutexLock lock(&mu_);
  auto& g = gauges_[{op, name}];
  if (!g) g = std::make_unique<internal::Gauge>();
  return g.get();
}

void SubtaskMetrics::AddGaugeFunction(const std::string& op, const std::string& name,
                                      std::function<double()> f) {
  internal::Gauge* g = GetGauge(op, name);
  g->Set(f());
  gauge_functions_.emplace_back(g, std::move(f));
}

void SubtaskMetrics::RefreshGaugeFunctionsSlow() {
  for (auto& [g, f] : gauge_functions_) g->Set(f());
}

internal::Histogram* SubtaskMetrics::GetHistogram(const std::string& op, const std::string& name,
                                                  size_t window) {
  internal::MutexLock lock(&mu_);
  auto& h = histograms_[{op, name}];
  if (!h) h = std::make_unique<internal::Histogram>(window);
  return h.get();
}

std::vector<UserGaugeSnapshot> SubtaskMetrics::GaugeValues() const {
  internal::MutexLock lock(&mu_);
  std::vector<UserGaugeSnapshot> out;
  for (const auto& [k, g] : gauges_) out.push_back({k.first, k.second, g->Get()});
  return out;
}

std::vector<UserHistogramSnapshot> SubtaskMetrics::HistogramValues() const {
  std::vector<std::pair<UserKey, const internal::Histogram*>> hs;
  {
    internal::MutexLock lock(&mu_);
    for (const auto& [k, h] : histograms_) hs.emplace_back(k, h.get());
  }
  std::vector<UserHistogramSnapshot> out;
  for (const auto& [k, h] : hs) out.push_back({k.first, k.second, h->Statistics()});
  return out;
}

double HistogramStatistics::Quantile(const std::vector<int64_t>& sorted, double q) {
  const size_t n = sorted.size();
  if (n == 0) return 0;
  if (n == 1) return static_cast<double>(sorted[0]);
  const double pos = q * static_cast<double>(n + 1);
  if (pos < 1) return static_cast<double>(sorted[0]);
  if (pos >= static_cast<double>(n)) return static_cast<double>(sorted[n - 1]);
  const double fpos = std::floor(pos);
  const double d = pos - fpos;
  const auto i = static_cast<size_t>(fpos);
  const double lower = static_cast<double>(sorted[i - 1]);
  const double upper = static_cast<double>(sorted[i]);
  return lower + d * (upper - lower);
}

HistogramStatistics HistogramStatistics::Of(int64_t count, std::vector<int64_t> window) {
  HistogramStatistics s;
  s.count = count;
  s.size = static_cast<int64_t>(window.size());
  if (window.empty()) return s;
  std::sort(window.begin(), window.end());
  s.min = window.front();
  s.max = window.back();
  double sum = 0;
  for (int64_t v : window) sum += static_cast<double>(v);
  s.mean = sum / static_cast<double>(window.size());
  if (window.size() > 1) {
    double sq = 0;
    for (int64_t v : window)
      sq += (static_cast<double>(v) - s.mean) * (static_cast<double>(v) - s.mean);
    s.stddev = std::sqrt(sq / static_cast<double>(window.size() - 1));
  }
  s.p50 = Quantile(window, 0.50);
  s.p95 = Quantile(window, 0.95);
  s.p99 = Quantile(window, 0.99);
  return s;
}

namespace internal {
HistogramStatistics Histogram::Statistics() const {
  std::vector<int64_t> window;
  int64_t count = 0;
  {
    internal::MutexLock lock(&mu_);
    window = values_;
    count = count_;
  }
  return HistogramStatistics::Of(count, std::move(window));
}
}  // namespace internal

std::string FormatUserMetrics(const std::vector<SubtaskMetricsSnapshot>& metrics) {
  std::string out;
  for (const SubtaskMetricsSnapshot& m : metrics) {
    for (const UserGaugeSnapshot& g : m.gauges) {
      absl::StrAppend(&out, "  ", g.operator_name, "[", m.subtask, "] ", g.name, " = ",
                      absl::StrFormat("%g", g.value), "\n");
    }
    for (const UserHistogramSnapshot& h : m.histograms) {
      const HistogramStatistics& s = h.statistics;
      absl::StrAppend(&out, "  ", h.operator_name, "[", m.subtask, "] ", h.name, ": count ",
                      s.count,
                      absl::StrFormat(", min %d, max %d, mean %.6g, p50 %.6g, p95 %.6g, p99 %.6g",
                                      s.min, s.max, s.mean, s.p50, s.p95, s.p99),
                      "\n");
    }
  }
  return out;
}

}  // namespace tidemark
