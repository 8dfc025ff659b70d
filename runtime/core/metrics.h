// runtime/core/metrics.h
//
// Metrics a running job publishes and anybody may read while it runs (the CLI
// progress line, traces, charts, tests).
//
// Every value has exactly one writer: the thread running the subtask.  Writers
// publish with relaxed stores (no read-modify-write per record: counters are
// kept in plain locals on the hot path and published once per batch), readers
// use relaxed loads and get a recent, possibly slightly stale, value.
#ifndef TM_RUNTIME_METRICS_H_
#define TM_RUNTIME_METRICS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/generalized_watermark.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

namespace internal {
// A single-writer counter.
class Counter {
 public:
  void Inc(int64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void Set(int64_t n) { v_.store(n, std::memory_order_relaxed); }
  int64_t Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

// A settable gauge (RuntimeContext::gauge(name)): one writer, any reader.
class Gauge {
 public:
  void Set(double v) { v_.store(v, std::memory_order_relaxed); }
  double Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

}  // namespace internal

// What a histogram (RuntimeContext::histogram) says at a moment.  Like
// Flink's DescriptiveStatisticsHistogram: `count` is every update ever; the
// rest is over the window of the last `size` values (at most the window size
// the histogram was made with): min, max, mean, the sample standard
// deviation, and the quantiles with Apache Commons Math's Percentile
// (Flink's; position p * (n + 1), linear between neighbours, clamped to the
// smallest and largest).  All zero while the window is empty.
struct HistogramStatistics {
  int64_t count = 0;
  int64_t size = 0;
  int64_t min = 0;
  int64_t max = 0;
  double mean = 0;
  double stddev = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  // The quantile q (0 < q <= 1) of sorted `values`, as p50 / p95 / p99 are.
  static double Quantile(const std::vector<int64_t>& sorted, double q);
  static HistogramStatistics Of(int64_t count, std::vector<int64_t> window);
};

namespace internal {
// A histogram over a sliding window of the last `window` values.  Updated by
// the subtask's thread, read by any: a mutex (uncontended on the update path)
// guards the window.
class Histogram {
 public:
  explicit Histogram(size_t window) : window_(window == 0 ? 1 : window) {}
  void Update(int64_t v) {
    internal::MutexLock lock(&mu_);
    if (values_.size() < window_) {
      values_.push_back(v);
    } else {
      values_[next_] = v;
      next_ = (next_ + 1) % window_;
    }
    ++count_;
  }
  int64_t Count() const {
    internal::MutexLock lock(&mu_);
    return count_;
  }
  HistogramStatistics Statistics() const;

 private:
  const size_t window_;
  mutable internal::Mutex mu_;
  std::vector<int64_t> values_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
};
}  // namespace internal

// One user gauge or histogram of one operator at one subtask, in a snapshot.
struct UserGaugeSnapshot {
  std::string operator_name;
  std::string name;
  double value = 0;
};
struct UserHistogramSnapshot {
  std::string operator_name;
  std::string name;
  HistogramStatistics statistics;
};

struct InputChannelMetrics {
  std::atomic<Timestamp> watermark{kMinTimestamp};
  std::atomic<bool> idle{false};
  // The channel's queue, for back-pressure (the live view): the number of
  // batches it holds (the channel's own relaxed counter, read lock-free) and
  // how many it holds before its producer waits.  Set once while the job is
  // built, before any task runs; null for none.
  const std::atomic<size_t>* queued = nullptr;
  size_t capacity = 0;
};

// One subtask (one chain of operators at one index).
class SubtaskMetrics {
 public:
  // Out of line (metrics.cc), with the destructor: an inline one would
  // instantiate the maps' members in every file that includes this one.
  SubtaskMetrics(std::string task_name, int subtask, int parallelism, int num_input_channels);
  ~SubtaskMetrics();

  const std::string& task_name() const { return task_name_; }
  int subtask() const { return subtask_; }
  int parallelism() const { return parallelism_; }

  internal::Counter records_in;
  internal::Counter records_out;
  std::atomic<Timestamp> input_watermark{kMinTimestamp};   // aligned minimum
  std::atomic<Timestamp> output_watermark{kMinTimestamp};  // last watermark sent downstream
  std::atomic<bool> idle{false};                           // output status
  std::atomic<bool> finished{false};
  // Checkpoints: the last this subtask snapshotted, and barrier alignment
  // (from the first barrier of a checkpoint to the last) in nanoseconds.
  std::atomic<int64_t> last_checkpoint{-1};
  std::atomic<int64_t> last_alignment_ns{0};
  std::atomic<int64_t> max_alignment_ns{0};

  int num_input_channels() const { return static_cast<int>(channels_.size()); }
  InputChannelMetrics& channel(int i) { return channels_[i]; }
  const InputChannelMetrics& channel(int i) const { return channels_[i]; }

  // Named counters of the operators in this subtask ("numLateRecordsDropped",
  // ...).  Registration happens while the job starts; the returned pointer is
  // stable.
  internal::Counter* GetCounter(const std::string& name);
  std::map<std::string, int64_t> CounterValues() const;

  // User gauges and histograms (RuntimeContext), per operator of the chain.
  // A settable gauge is written by the subtask and read by anybody.  A gauge
  // function is registered and called only on the subtask's own thread (the
  // task calls RefreshGaugeFunctions after each slice of work and before it
  // closes its operators), which publishes its value like a settable gauge:
  // so the function may read its object's state without locks.
  internal::Gauge* GetGauge(const std::string& op, const std::string& name);
  void AddGaugeFunction(const std::string& op, const std::string& name, std::function<double()> f);
  void RefreshGaugeFunctions() {
    if (!gauge_functions_.empty()) RefreshGaugeFunctionsSlow();
  }
  internal::Histogram* GetHistogram(const std::string& op, const std::string& name, size_t window);
  std::vector<UserGaugeSnapshot> GaugeValues() const;
  std::vector<UserHistogramSnapshot> HistogramValues() const;

 private:
  void RefreshGaugeFunctionsSlow();

  const std::string task_name_;
  const int subtask_;
  const int parallelism_;
  std::vector<InputChannelMetrics> channels_;
  mutable internal::Mutex mu_;
  std::map<std::string, std::unique_ptr<internal::Counter>> counters_ ABSL_GUARDED_BY(mu_);
  using UserKey = std::pair<std::string, std::string>;  // operator, name
  std::map<UserKey, std::unique_ptr<internal::Gauge>> gauges_ ABSL_GUARDED_BY(mu_);
  std::map<UserKey, std::unique_ptr<internal::Histogram>> histograms_ ABSL_GUARDED_BY(mu_);
  // The subtask's thread only.
  std::vector<std::pair<internal::Gauge*, std::function<double()>>> gauge_functions_;
};

// A copy of one subtask's metrics at a moment.
struct SubtaskMetricsSnapshot {
  std::string task_name;
  int subtask = 0;
  int parallelism = 1;
  int64_t records_in = 0;
  int64_t records_out = 0;
  Timestamp input_watermark = kMinTimestamp;
  Timestamp output_watermark = kMinTimestamp;
  bool idle = false;
  bool finished = false;
  int64_t last_checkpoint = -1;
  int64_t last_alignment_ns = 0;
  int64_t max_alignment_ns = 0;
  std::vector<Timestamp> channel_watermarks;
  std::vector<bool> channel_idle;
  // Per input channel: queued batches / capacity (1: full, its producer
  // waits; briefly above 1 by what one step produces); 0 when unknown.
  std::vector<double> channel_fill;
  std::map<std::string, int64_t> counters;
  std::vector<UserGaugeSnapshot> gauges;          // by operator, then name
  std::vector<UserHistogramSnapshot> histograms;  // by operator, then name
};

// The user gauges and histograms of a job's subtasks, one line each
// ("  Map[1] queue_depth = 3", "  Map[0] latency: count 10, min 1, ...");
// empty when there are none.  The CLI's summary prints it.
std::string FormatUserMetrics(const std::vector<SubtaskMetricsSnapshot>& metrics);

namespace internal {
SubtaskMetricsSnapshot Snapshot(const SubtaskMetrics& m);

}  // namespace internal
// Observes watermark movement as it happens, for traces and charts.  Called on
// the thread of the subtask concerned, so implementations must be thread-safe
// and quick.  All methods default to doing nothing.
class WatermarkListener {
 public:
  virtual ~WatermarkListener() = default;
  struct ChannelEvent {
    const std::string* task_name;
    int subtask;
    int channel;                  // input channel index at that subtask
    Timestamp channel_watermark;  // the channel's watermark after the change
    bool channel_idle;
    Timestamp aligned;  // the subtask's aligned input watermark after the change
    bool subtask_idle;
    int holding_channel;  // channel holding the minimum back, -1 if none
    // Whether the channel counts in the minimum (the valve's status): a
    // channel back from idleness stays unaligned until its watermark catches
    // up with the subtask's (Flink's StatusWatermarkValve); an idle channel is
    // unaligned, an ended one aligned (at MAX).
    bool channel_aligned = true;
  };
  // A watermark, status or end arrived on an input channel.
  virtual void OnInputChannel(const ChannelEvent&) {}
  // A subtask sent a watermark (or status) downstream.
  virtual void OnOutputWatermark(const std::string& /*task_name*/, int /*subtask*/,
                                 Timestamp /*watermark*/) {}
  virtual void OnOutputStatus(const std::string& /*task_name*/, int /*subtask*/,
                              WatermarkStatus /*status*/) {}
  // A source subtask that generates watermarks per split (docs/semantics.md
  // 2.7): split `split`'s watermark advanced or its idleness changed.
  virtual void OnSplitWatermark(const std::string& /*task_name*/, int /*subtask*/,
                                const std::string& /*split*/, Timestamp /*watermark*/,
                                bool /*idle*/) {}
  // A subtask snapshotted checkpoint `checkpoint_id` and sent its barrier on;
  // `alignment_ns`: how long its input channels were aligned (0 for sources).
  virtual void OnCheckpointBarrier(const std::string& /*task_name*/, int /*subtask*/,
                                   int64_t /*checkpoint_id*/, int64_t /*alignment_ns*/) {}
  // Watermark alignment (runtime/task/watermark_alignment.h): a source subtask
  // paused (its watermark above the group's limit) or resumed.
  // A generalized watermark (runtime/core/generalized_watermark.h): `input`
  // true: the combined value the subtask's input gate handed to its chain
  // (`channel`: the channel whose arrival changed it); false: the subtask
  // sent it downstream (`channel` -1).
  virtual void OnGeneralizedWatermark(const std::string& /*task_name*/, int /*subtask*/,
                                      bool /*input*/, int /*channel*/,
                                      const GeneralizedWatermark& /*w*/) {}
  virtual void OnSourceAlignment(const std::string& /*task_name*/, int /*subtask*/, bool /*paused*/,
                                 Timestamp /*watermark*/, Timestamp /*max_allowed*/) {}
};

}  // namespace tidemark

#endif  // TM_RUNTIME_METRICS_H_
