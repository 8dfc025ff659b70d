// Integration tests on real threads: parallel sources that each emit their own
// (Longer than 600 lines: one suite of real-thread jobs that share their recorder operators and
// sources.)
// records and watermarks, key_by into parallel downstream subtasks, and the
// other ship strategies.  Checked: every aligned watermark equals the minimum
// of what the subtask's channels had delivered at that moment, never
// decreases, is never repeated; no record lost or duplicated; per-key order
// from one source subtask kept; every key on the subtask SubtaskForKey names.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

struct Ev {
  int src = 0;
  int64_t seq = 0;
  std::string key;
};

// Each subtask emits `count` records whose event time advances at a speed of
// its own, and a watermark (ts - lag) every few records, a few records per
// poll so that the subtasks interleave.
class WmSource final : public Source<Ev> {
 public:
  WmSource(int64_t count, int keys, int src_offset = 0)
      : count_(count), keys_(keys), offset_(src_offset) {}
  void Open(const SourceContext& ctx) override {
    src_ = offset_ + ctx.subtask_index;
    step_ = 1 + src_ * 3;
    every_ = 3 + src_ % 4;
  }
  PollStatus Poll(SourceOutput<Ev>& out, size_t budget) override {
    const size_t n = std::min<size_t>(budget, 1 + (seq_ + src_) % 7);
    for (size_t i = 0; i < n && seq_ < count_; ++i) {
      const Timestamp ts = 1000 + seq_ * step_;
      Ev e{src_, seq_, "key-" + std::to_string((seq_ * 31 + src_ * 7) % keys_)};
      out.CollectWithTimestamp(std::move(e), ts);
      ++seq_;
      if (seq_ % every_ == 0) out.EmitWatermark(ts - 5 - src_);
    }
    return seq_ < count_ ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }

 private:
  int64_t count_;
  int keys_;
  int offset_;
  int src_ = 0;
  int64_t step_ = 1;
  int64_t every_ = 3;
  int64_t seq_ = 0;
};

// What the downstream subtasks observed.
struct Observed {
  std::mutex mu;
  std::map<int, std::vector<Timestamp>> watermarks;  // by subtask, from ProcessWatermark
  std::vector<Ev> records;
  std::vector<std::string> errors;
  void Error(std::string e) {
    std::lock_guard<std::mutex> lock(mu);
    if (errors.size() < 20) errors.push_back(std::move(e));
  }
};

// Records every watermark it gets and checks, per record, the key's subtask
// and the per-(source subtask, key) order.
class RecorderOp final : public OneInputOperator<Ev, Ev> {
 public:
  explicit RecorderOp(std::shared_ptr<Observed> obs) : obs_(std::move(obs)) {}
  void ProcessElement(Ev&& e, Timestamp ts) override {
    const int owner = SubtaskForKey(e.key, ctx().max_parallelism(), ctx().parallelism());
    if (owner != ctx().subtask_index()) {
      obs_->Error("key " + e.key + " at subtask " + std::to_string(ctx().subtask_index()) +
                  ", owner " + std::to_string(owner));
    }
    auto [it, fresh] = last_seq_.try_emplace({e.src, e.key}, e.seq);
    if (!fresh) {
      if (e.seq <= it->second) obs_->Error("order broken for key " + e.key);
      it->second = e.seq;
    }
    (void)ts;
    records_.push_back(e);
    output().Collect(std::move(e), ts);
  }
  void ProcessWatermark(Timestamp w) override {
    if (!wms_.empty() && w <= wms_.back()) obs_->Error("watermark did not increase");
    wms_.push_back(w);
    ForwardWatermark(w);
  }
  void Finish() override {
    std::lock_guard<std::mutex> lock(obs_->mu);
    obs_->watermarks[ctx().subtask_index()] = wms_;
    for (auto& r : records_) obs_->records.push_back(std::move(r));
  }

 private:
  std::shared_ptr<Observed> obs_;
  std::map<std::pair<int, std::string>, int64_t> last_seq_;
  std::vector<Ev> records_;
  std::vector<Timestamp> wms_;
};

// Collects the input-channel events of the tasks whose name starts with
// `prefix`.
class ChannelLog final : public WatermarkListener {
 public:
  explicit ChannelLog(std::string prefix) : prefix_(std::move(prefix)) {}
  struct Event {
    int channel;
    Timestamp channel_wm;
    bool channel_idle;
    Timestamp aligned;
    bool subtask_idle;
  };
  void OnInputChannel(const ChannelEvent& e) override {
    if (e.task_name->rfind(prefix_, 0) != 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    events_[e.subtask].push_back(
        Event{e.channel, e.channel_watermark, e.channel_idle, e.aligned, e.subtask_idle});
  }
  std::map<int, std::vector<Event>> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }

 private:
  std::string prefix_;
  std::mutex mu_;
  std::map<int, std::vector<Event>> events_;
};

// `sources` subtasks of one source (plus, when union_sources > 0, a second
// source of that parallelism unioned with it) -> key_by -> Recorder.
void RunKeyedJob(int sources, int downstream, int64_t per_source, int workers, bool chaining,
                 int union_sources = 0) {
  SCOPED_TRACE("sources=" + std::to_string(sources) + "+" + std::to_string(union_sources) +
               " downstream=" + std::to_string(downstream) + " workers=" + std::to_string(workers) +
               " chaining=" + std::to_string(chaining));
  auto obs = std::make_shared<Observed>();
  auto log = std::make_shared<ChannelLog>("Recorder");
  StreamExecutionEnvironment env;
  env.set_parallelism(downstream)
      .set_worker_threads(workers)
      .set_batch_size(8)
      .set_channel_capacity(2);
  env.set_auto_watermark_interval(Duration(0));
  env.set_watermark_listener(log);
  if (!chaining) env.disable_operator_chaining();
  const int keys = 37;
  auto sink_count = std::make_shared<std::atomic<int64_t>>(0);
  DataStream<Ev> in =
      env.add_source<Ev>(
             [per_source, keys] { return std::make_unique<WmSource>(per_source, keys); },
             "wm source")
          .set_parallelism(sources);
  if (union_sources > 0) {
    in = in.union_with(
        env.add_source<Ev>(
               [per_source, keys] { return std::make_unique<WmSource>(per_source, keys, 100); },
               "second source")
            .set_parallelism(union_sources));
  }
  in.key_by([](const Ev& e) { return e.key; })
      .transform<Ev>("Recorder",
                     [obs]() -> std::unique_ptr<OneInputOperator<Ev, Ev>> {
                       return std::make_unique<RecorderOp>(obs);
                     })
      .add_sink([sink_count](Ev&&) { sink_count->fetch_add(1); });
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;

  std::lock_guard<std::mutex> lock(obs->mu);
  for (const auto& e : obs->errors) ADD_FAILURE() << e;
  ASSERT_TRUE(obs->errors.empty());

  // No record lost or duplicated.
  const int channels = sources + union_sources;
  const int64_t total = per_source * channels;
  ASSERT_EQ(static_cast<int64_t>(obs->records.size()), total);
  EXPECT_EQ(sink_count->load(), total);
  std::set<std::pair<int, int64_t>> ids;
  for (const Ev& e : obs->records) ids.insert({e.src, e.seq});
  ASSERT_EQ(static_cast<int64_t>(ids.size()), total) << "duplicates";
  for (int s = 0; s < channels; ++s) {
    const int src = s < sources ? s : 100 + (s - sources);
    ASSERT_EQ(*ids.lower_bound({src, 0}), std::make_pair(src, int64_t{0}));
    ASSERT_TRUE(ids.count({src, per_source - 1}));
  }

  // Watermarks: replay each subtask's channel events.
  auto events = log->events();
  ASSERT_EQ(static_cast<int>(events.size()), downstream);
  for (auto& [subtask, evs] : events) {
    SCOPED_TRACE("subtask " + std::to_string(subtask));
    std::vector<Timestamp> ch(channels, kMinTimestamp);
    std::vector<Timestamp> aligned_changes;
    Timestamp last_aligned = kMinTimestamp;
    for (const auto& e : evs) {
      ASSERT_GE(e.channel, 0);
      ASSERT_LT(e.channel, channels);
      ASSERT_GE(e.channel_wm, ch[e.channel]) << "a channel's watermark went back";
      ch[e.channel] = e.channel_wm;
      const Timestamp min = *std::min_element(ch.begin(), ch.end());
      ASSERT_EQ(e.aligned, min) << "aligned must be the minimum over the channels";
      ASSERT_GE(e.aligned, last_aligned);
      ASSERT_FALSE(e.channel_idle);
      ASSERT_FALSE(e.subtask_idle);
      if (e.aligned != last_aligned) aligned_changes.push_back(e.aligned);
      last_aligned = e.aligned;
    }
    EXPECT_EQ(last_aligned, kMaxWatermark);
    // What the operator saw is exactly the sequence of aligned changes.
    EXPECT_EQ(obs->watermarks[subtask], aligned_changes);
    ASSERT_FALSE(aligned_changes.empty());
    EXPECT_EQ(aligned_changes.back(), kMaxWatermark);
    for (size_t i = 1; i < aligned_changes.size(); ++i)
      ASSERT_LT(aligned_changes[i - 1], aligned_changes[i]) << "never decreases, never repeats";
  }
  // Metrics after the run agree with the counts.
  int64_t in_total = 0;
  for (const auto& m : r.metrics) {
    if (m.task_name.rfind("Recorder", 0) == 0) {
      in_total += m.records_in;
      EXPECT_TRUE(m.finished);
      EXPECT_EQ(m.input_watermark, kMaxWatermark);
      EXPECT_EQ(static_cast<int>(m.channel_watermarks.size()), channels);
    }
  }
  EXPECT_EQ(in_total, total);
}

TEST(RuntimeIntegration, SourcesTimesDownstreamKeyedWatermarks) {
  const std::vector<std::pair<int, int>> shapes = {{1, 1}, {1, 4}, {2, 3}, {3, 2}, {4, 4},
                                                   {8, 1}, {5, 7}, {8, 8}, {2, 8}, {7, 3}};
  for (int rep = 0; rep < tidemark::testing::StressIterations(6); ++rep) {
    for (auto [s, d] : shapes) {
      RunKeyedJob(s, d, 1000, 1 + (rep + s) % 4, /*chaining=*/(rep % 2) == 0);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(RuntimeIntegration, UnionedSourcesAlignOverAllChannels) {
  const std::vector<std::tuple<int, int, int>> shapes = {
      {1, 1, 1}, {2, 3, 2}, {3, 1, 4}, {4, 2, 2}};
  for (int rep = 0; rep < tidemark::testing::StressIterations(4); ++rep) {
    for (auto [a, b, d] : shapes) {
      RunKeyedJob(a, d, 500, 2, rep % 2 == 0, b);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(RuntimeIntegration, ManyRepetitionsSmallJobs) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(100); ++rep) {
    RunKeyedJob(1 + rep % 4, 1 + (rep * 3) % 5, 200, 2, true);
    if (HasFatalFailure()) return;
  }
}

// A source subtask that goes idle does not hold the downstream watermark back:
// the others' watermarks get through before it ends.  The others start only
// once every downstream subtask has seen subtask 0's channel idle (`go`, set
// by the test from the job's metrics), so the idleness is there before their
// watermarks, whatever the threads' timing.
class IdleUntilOthersEnd final : public Source<Ev> {
 public:
  IdleUntilOthersEnd(std::shared_ptr<std::atomic<int>> done, std::shared_ptr<std::atomic<bool>> go,
                     int others, int64_t count)
      : done_(std::move(done)), go_(std::move(go)), others_(others), count_(count) {}
  void Open(const SourceContext& ctx) override {
    src_ = ctx.subtask_index;
    clock_ = ctx.clock;
  }
  PollStatus Poll(SourceOutput<Ev>& out, size_t) override {
    if (src_ == 0) {
      out.MarkIdle();
      if (done_->load() == others_) return PollStatus::kEndOfInput;
      retry_ = clock_->NowMillis() + 1;
      return PollStatus::kNothingAvailable;
    }
    if (!go_->load()) {
      retry_ = clock_->NowMillis() + 1;
      return PollStatus::kNothingAvailable;
    }
    for (int i = 0; i < 5 && seq_ < count_; ++i, ++seq_) {
      out.CollectWithTimestamp(Ev{src_, seq_, "k" + std::to_string(seq_ % 5)}, seq_ * 10);
      out.EmitWatermark(seq_ * 10);
    }
    if (seq_ < count_) return PollStatus::kMoreAvailable;
    done_->fetch_add(1);
    return PollStatus::kEndOfInput;
  }
  Timestamp RetryAt() const override { return retry_; }

 private:
  std::shared_ptr<std::atomic<int>> done_;
  std::shared_ptr<std::atomic<bool>> go_;
  int others_;
  int64_t count_;
  int src_ = 0;
  int64_t seq_ = 0;
  const Clock* clock_ = nullptr;
  Timestamp retry_ = kMaxTimestamp;
};

TEST(RuntimeIntegration, IdleSourceSubtaskDoesNotHoldBackTheWatermark) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(10); ++rep) {
    auto obs = std::make_shared<Observed>();
    auto done = std::make_shared<std::atomic<int>>(0);
    auto go = std::make_shared<std::atomic<bool>>(false);
    const int sources = 3;
    const int64_t count = 200;
    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2).set_batch_size(4);
    env.add_source<Ev>(
           [done, go, count] {
             return std::make_unique<IdleUntilOthersEnd>(done, go, sources - 1, count);
           },
           "idle source")
        .set_parallelism(sources)
        .key_by([](const Ev& e) { return e.key; })
        .transform<Ev>("Recorder",
                       [obs]() -> std::unique_ptr<OneInputOperator<Ev, Ev>> {
                         return std::make_unique<RecorderOp>(obs);
                       })
        .add_sink([](Ev&&) {});
    JobClient client = env.execute_async();
    // Both Recorder subtasks see channel 0 (source subtask 0) idle: let the
    // other sources go.
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
      int idle = 0;
      for (const auto& m : client.metrics())
        if (m.task_name.find("Recorder") != std::string::npos && !m.channel_idle.empty() &&
            m.channel_idle[0])
          ++idle;
      if (idle == 2) break;
      ASSERT_LT(std::chrono::steady_clock::now(), give_up) << "channel 0 never went idle";
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    go->store(true);
    JobResult r = client.wait();
    ASSERT_TRUE(r.ok()) << r.status;
    std::lock_guard<std::mutex> lock(obs->mu);
    for (const auto& e : obs->errors) ADD_FAILURE() << e;
    ASSERT_EQ(obs->records.size(), static_cast<size_t>(count * (sources - 1)));
    for (int s = 0; s < 2; ++s) {
      const auto& w = obs->watermarks[s];
      ASSERT_GE(w.size(), 2u);
      EXPECT_EQ(w.back(), kMaxWatermark);
      // before the MAX, the watermark reached the active sources' last one
      EXPECT_EQ(w[w.size() - 2], (count - 1) * 10) << "subtask " << s;
    }
    // The idle source subtask became active again to send its final MAX.
    for (const auto& m : r.metrics) {
      if (m.task_name.rfind("Source: idle source", 0) != 0) continue;
      EXPECT_FALSE(m.idle) << m.task_name << " " << m.subtask;
      EXPECT_EQ(m.output_watermark, kMaxWatermark);
    }
  }
}

// ---------------------------------------------------------------------------
// Other ship strategies.

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}
std::vector<int64_t> Range(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(RuntimeIntegration, UnionOfStreamsWithDifferentParallelism) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(10); ++rep) {
    StreamExecutionEnvironment env;
    env.set_parallelism(3).set_worker_threads(2);
    auto a = env.from_generator<int64_t>([](int64_t i) { return i; }, 500).set_parallelism(2);
    auto b = env.from_generator<int64_t>([](int64_t i) { return 500 + i; }, 300).set_parallelism(3);
    auto c = env.from_collection<int64_t>({800, 801, 802});
    auto out = a.union_with(b, c).map([](const int64_t& v) { return v; }).collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    ASSERT_EQ(Sorted(out->values()), Range(803));
  }
}

// A collection source stopped by back-pressure resumes after the element it
// emitted last: every element arrives exactly once (it used to emit the
// element at which it stopped again).
TEST(RuntimeIntegration, CollectionSourceEmitsEachElementOnceUnderBackpressure) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(5); ++rep) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1)
        .set_worker_threads(2)
        .set_batch_size(1 + rep % 4)
        .set_channel_capacity(1);
    auto out = env.from_collection(Range(2000))
                   .rebalance()
                   .map([](const int64_t& v) { return v; })
                   .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(Sorted(out->values()), Range(2000)) << "rep " << rep;
  }
}

TEST(RuntimeIntegration, RebalanceIsRoundRobin) {
  StreamExecutionEnvironment env;
  env.set_parallelism(4).set_worker_threads(2);
  std::vector<int64_t> data = Range(100);
  auto out =
      env.from_collection(data).rebalance().map([](const int64_t& v) { return v; }).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  auto items = out->items();
  ASSERT_EQ(items.size(), 100u);
  for (const auto& it : items) EXPECT_EQ(it.subtask, it.value % 4) << it.value;
  // order within each subtask is the source's order
  std::map<int, int64_t> last;
  for (const auto& it : items) {
    if (last.count(it.subtask)) EXPECT_GT(it.value, last[it.subtask]);
    last[it.subtask] = it.value;
  }
}

TEST(RuntimeIntegration, BroadcastSendsEveryRecordToEverySubtask) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3).set_worker_threads(2);
  auto out =
      env.from_collection(Range(50)).broadcast().map([](const int64_t& v) { return v; }).collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  std::map<int, std::vector<int64_t>> by;
  for (const auto& it : out->items()) by[it.subtask].push_back(it.value);
  ASSERT_EQ(by.size(), 3u);
  for (auto& [s, v] : by) EXPECT_EQ(v, Range(50)) << "subtask " << s;
}

TEST(RuntimeIntegration, ForwardKeepsTheSubtask) {
  for (bool chaining : {true, false}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(3).set_worker_threads(2);
    if (!chaining) env.disable_operator_chaining();
    auto out = env.from_generator<int64_t>([](int64_t i) { return i; }, 300)
                   .forward()
                   .map([](const int64_t& v) { return v; })
                   .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    auto items = out->items();
    ASSERT_EQ(items.size(), 300u);
    // the generator's subtask s owns the indices i with i % 3 == s
    for (const auto& it : items) EXPECT_EQ(it.subtask, it.value % 3);
  }
}

TEST(RuntimeIntegration, ForwardWithUnequalParallelismIsRejected) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto out = env.from_generator<int64_t>([](int64_t i) { return i; }, 10)
                 .forward()
                 .map([](const int64_t& v) { return v; })
                 .set_parallelism(3)
                 .collect();
  JobResult r = env.execute();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kInvalidArgument) << r.status;
  EXPECT_NE(r.status.message().find("forward"), std::string::npos) << r.status;
  EXPECT_EQ(out->size(), 0u);
}

TEST(RuntimeIntegration, CustomPartitioner) {
  StreamExecutionEnvironment env;
  env.set_parallelism(4).set_worker_threads(2);
  auto out =
      env.from_collection(Range(200))
          .partition_custom([](int64_t key, int n) { return static_cast<int>((key / 10) % n); },
                            [](const int64_t& v) { return v; })
          .map([](const int64_t& v) { return v; })
          .collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  auto items = out->items();
  ASSERT_EQ(items.size(), 200u);
  for (const auto& it : items) EXPECT_EQ(it.subtask, (it.value / 10) % 4);
}

TEST(RuntimeIntegration, KeyByPlacesKeysWhereSubtaskForKeySays) {
  for (int p : {1, 2, 3, 5}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(p).set_worker_threads(2);
    std::vector<std::string> words;
    for (int i = 0; i < 300; ++i) words.push_back("w" + std::to_string(i % 60));
    auto out = env.from_collection(words)
                   .key_by([](const std::string& s) { return s; })
                   .reduce([](const std::string& a, const std::string&) { return a; })
                   .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    auto items = out->items();
    ASSERT_EQ(items.size(), 300u);
    for (const auto& it : items) EXPECT_EQ(it.subtask, SubtaskForKey(it.value, 128, p)) << it.value;
  }
}

TEST(RuntimeIntegration, ChainingOnAndOffGiveTheSameResult) {
  std::vector<std::vector<int64_t>> results;
  std::vector<size_t> tasks;
  for (bool chaining : {true, false}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2);
    if (!chaining) env.disable_operator_chaining();
    auto out = env.from_generator<int64_t>([](int64_t i) { return i; }, 1000)
                   .map([](const int64_t& v) { return v * 3; })
                   .filter([](const int64_t& v) { return v % 2 == 0; })
                   .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    results.push_back(Sorted(out->values()));
    tasks.push_back(r.metrics.size());
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0].size(), 500u);
  EXPECT_EQ(tasks[0], 2u) << "source -> map -> filter -> sink chained";
  EXPECT_EQ(tasks[1], 8u) << "one task per operator and subtask";
}

TEST(RuntimeIntegration, OneStreamConsumedTwice) {
  for (int rep = 0; rep < tidemark::testing::StressIterations(10); ++rep) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2).set_worker_threads(2);
    auto s =
        env.from_generator<int64_t>([](int64_t i) { return i; }, 400).map([](const int64_t& v) {
          return v;
        });
    auto all = s.map([](const int64_t& v) { return v; }).collect();
    auto even = s.filter([](const int64_t& v) { return v % 2 == 0; }).set_parallelism(3).collect();
    auto keyed = s.key_by([](const int64_t& v) { return v % 7; })
                     .reduce([](const int64_t& a, const int64_t& b) { return std::max(a, b); })
                     .collect();
    JobResult r = env.execute();
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(Sorted(all->values()), Range(400));
    std::vector<int64_t> evens;
    for (int64_t i = 0; i < 400; i += 2) evens.push_back(i);
    EXPECT_EQ(Sorted(even->values()), evens);
    EXPECT_EQ(keyed->size(), 400u);
  }
}

TEST(RuntimeIntegration, WatermarkStrategyAtTheSourceReachesDownstream) {
  // for_bounded_out_of_orderness at each source subtask; at the end every
  // downstream subtask has processed the MAX watermark after all records.
  StreamExecutionEnvironment env;
  env.set_parallelism(3).set_worker_threads(2).set_auto_watermark_interval(Duration(1));
  auto obs = std::make_shared<Observed>();
  env.from_generator<Ev>(
         [](int64_t i) {
           return Ev{static_cast<int>(i % 3), i, "k" + std::to_string(i % 11)};
         },
         3000)
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Ev>::for_bounded_out_of_orderness(Duration(5))
              .with_timestamp_assigner([](const Ev& e) -> Timestamp { return e.seq; }))
      .key_by([](const Ev& e) { return e.key; })
      .transform<Ev>("Recorder",
                     [obs]() -> std::unique_ptr<OneInputOperator<Ev, Ev>> {
                       return std::make_unique<RecorderOp>(obs);
                     })
      .add_sink([](Ev&&) {});
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  std::lock_guard<std::mutex> lock(obs->mu);
  for (const auto& e : obs->errors) ADD_FAILURE() << e;
  EXPECT_EQ(obs->records.size(), 3000u);
  for (int s = 0; s < 3; ++s) {
    ASSERT_FALSE(obs->watermarks[s].empty());
    EXPECT_EQ(obs->watermarks[s].back(), kMaxWatermark);
  }
}

TEST(RuntimeIntegration, MetricsAreReadableWhileTheJobRuns) {
  // An unbounded job with watermarks; the caller watches the downstream
  // subtasks' aligned watermark move through live metrics, then cancels.
  StreamExecutionEnvironment env;
  env.set_parallelism(2).set_worker_threads(2).set_auto_watermark_interval(Duration(0));
  env.from_generator<int64_t>(
         [](int64_t i, SourceOutput<int64_t>& out) {
           out.CollectWithTimestamp(int64_t{i}, i);
           out.EmitWatermark(i);
         },
         -1)
      .rebalance()
      .map([](const int64_t& v) { return v; })
      .name("Downstream")
      .add_sink([](int64_t) {});
  JobClient client = env.execute_async();
  // Wait until every downstream subtask has shown progress.
  for (int advanced = 0; advanced < 2;) {
    advanced = 0;
    for (const auto& m : client.metrics()) {
      if (m.task_name.rfind("Downstream", 0) != 0) continue;
      ASSERT_EQ(m.channel_watermarks.size(), 2u);
      if (m.input_watermark > 10000 && m.records_in > 0) ++advanced;
    }
    std::this_thread::yield();
  }
  client.cancel();
  JobResult r = client.wait();
  EXPECT_EQ(r.status.code(), absl::StatusCode::kCancelled);
  int downstream = 0;
  for (const auto& m : r.metrics) {
    if (m.task_name.rfind("Downstream", 0) != 0) continue;
    ++downstream;
    EXPECT_GT(m.records_in, 0);
    EXPECT_FALSE(m.finished);
    // the aligned watermark never exceeds what a channel has delivered
    EXPECT_LE(m.input_watermark, std::min(m.channel_watermarks[0], m.channel_watermarks[1]));
  }
  EXPECT_EQ(downstream, 2);
}

// Records released one at a time by the test (no timestamps: processing
// time), then the end of input.
struct Release {
  std::vector<int> values;
  std::atomic<int> released{0};
  std::atomic<bool> end{false};
};
class ReleasedSource final : public Source<std::pair<std::string, int>> {
 public:
  explicit ReleasedSource(std::shared_ptr<Release> r) : r_(std::move(r)) {}
  void Open(const SourceContext& ctx) override { clock_ = ctx.clock; }
  PollStatus Poll(SourceOutput<std::pair<std::string, int>>& out, size_t) override {
    const int n = r_->released.load();
    for (; emitted_ < n; ++emitted_) out.Collect({"a", r_->values[static_cast<size_t>(emitted_)]});
    if (r_->end.load() && emitted_ == static_cast<int>(r_->values.size()))
      return PollStatus::kEndOfInput;
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return clock_->NowMillis() + 1; }

 private:
  std::shared_ptr<Release> r_;
  const Clock* clock_ = nullptr;
  int emitted_ = 0;
};

// Item 3 of issue 10 on real threads: a processing-time window [0, 1000)
// with records seen at clock 500 and 999 fires once, with both, when the
// clock reaches 1000 (its timer at 999 is due at 1000: Flink's
// ProcessingTimeServiceUtil.getProcessingTimeDelay adds 1 ms).  The clock is a
// ManualClock; the test moves it only after the window task has counted the
// record in (records_in is counted after the record was processed).
TEST(RuntimeIntegration, ProcessingTimeWindowFiresOnceWithARecordSeenAtItsLastMillisecond) {
  ManualClock clock(0);
  auto release = std::make_shared<Release>();
  release->values = {1, 2};
  auto results = std::make_shared<std::vector<int>>();
  auto mu = std::make_shared<std::mutex>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2).set_clock(&clock);
  env.add_source<std::pair<std::string, int>>(
         [release] { return std::make_unique<ReleasedSource>(release); }, "Released", false)
      .key_by([](const std::pair<std::string, int>& e) { return e.first; })
      .window(TumblingProcessingTimeWindows::of(Duration(1000)))
      .reduce([](const std::pair<std::string, int>& a, const std::pair<std::string, int>& b) {
        return std::make_pair(a.first, a.second + b.second);
      })
      .name("PtWindow")
      .add_sink([results, mu](const std::pair<std::string, int>& r) {
        std::lock_guard<std::mutex> lock(*mu);
        results->push_back(r.second);
      });
  JobClient client = env.execute_async();
  auto window_records_in = [&] {
    for (const auto& m : client.metrics())
      if (m.task_name.find("PtWindow") != std::string::npos) return m.records_in;
    return int64_t{-1};
  };
  auto num_results = [&] {
    std::lock_guard<std::mutex> lock(*mu);
    return results->size();
  };
  // Waits for a condition the job makes true (a watchdog ends a hang).
  auto await = [&](auto&& done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "timed out waiting for " << what;
        return false;
      }
      std::this_thread::yield();
    }
    return true;
  };
  clock.Set(500);
  release->released = 1;
  bool ok = await([&] { return window_records_in() == 1; }, "the record at 500");
  clock.Set(999);
  release->released = 2;
  ok = ok && await([&] { return window_records_in() == 2; }, "the record at 999");
  clock.Set(1000);
  ok = ok && await([&] { return num_results() >= 1; }, "the firing at 1000");
  release->end = true;
  bool hung = false;
  JobResult r = testing::WaitWithWatchdog(client, &hung);
  ASSERT_FALSE(hung);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_TRUE(ok);
  std::lock_guard<std::mutex> lock(*mu);
  EXPECT_EQ(*results, std::vector<int>{3}) << "one firing of [0, 1000) with both records";
}

// A ManualClock jump fires the timers it makes due at once: the window task
// computed its wait from the old reading (3 years of real time for a window
// of 10^11 ms at clock 3), and the jump wakes it (Clock::AddJumpListener).
TEST(RuntimeIntegration, AManualClockJumpFiresTheDueTimersAtOnce) {
  constexpr int64_t kSize = 100'000'000'000;  // 10^11 ms
  ManualClock clock(3);
  auto release = std::make_shared<Release>();
  release->values = {5};
  auto results = std::make_shared<std::atomic<int>>(0);
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_worker_threads(2).set_clock(&clock);
  env.add_source<std::pair<std::string, int>>(
         [release] { return std::make_unique<ReleasedSource>(release); }, "Released", false)
      .key_by([](const std::pair<std::string, int>& e) { return e.first; })
      .window(TumblingProcessingTimeWindows::of(Duration(kSize)))
      .reduce([](const std::pair<std::string, int>& a, const std::pair<std::string, int>& b) {
        return std::make_pair(a.first, a.second + b.second);
      })
      .name("PtWindow")
      .add_sink([results](const std::pair<std::string, int>& r) { results->fetch_add(r.second); });
  JobClient client = env.execute_async();
  auto window_records_in = [&] {
    for (const auto& m : client.metrics())
      if (m.task_name.find("PtWindow") != std::string::npos) return m.records_in;
    return int64_t{-1};
  };
  // Waits for a condition the job makes true (a watchdog ends a hang).
  auto await = [&](auto&& done, const char* what) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "timed out waiting for " << what;
        return false;
      }
      std::this_thread::yield();
    }
    return true;
  };
  release->released = 1;
  bool ok = await([&] { return window_records_in() == 1; }, "the record at clock 3");
  clock.Set(kSize);  // the window [0, 10^11) is due
  ok = ok && await([&] { return results->load() == 5; }, "the firing after the jump");
  release->end = true;
  bool hung = false;
  JobResult r = testing::WaitWithWatchdog(client, &hung);
  ASSERT_FALSE(hung);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_TRUE(ok);
  EXPECT_EQ(results->load(), 5);
}

// Processing-time timers that fall due while a task works through the last
// of its input fire before the task finishes, as Flink runs the timers
// already due before it finishes an operator; those not yet due are dropped.
// The task checks timers between slices, and the slice that reads the end of
// input was the last: the window [0, 1000), due once the reduce of record 2
// moved the clock to 5000, was never emitted.
TEST(RuntimeIntegration, ProcessingTimeTimersDueAtTheEndOfInputFire) {
  {
    ManualClock clock(0);
    auto sums = std::make_shared<std::vector<int>>();
    StreamExecutionEnvironment env;
    env.set_parallelism(1).set_clock(&clock);
    env.from_elements(1, 2, 3)
        .key_by([](const int&) { return 0; })
        .window(TumblingProcessingTimeWindows::of(Duration(1000)))
        .reduce([&clock](const int& a, const int& b) {
          if (b == 2) clock.Set(5000);  // record 2 takes until 5000
          return a + b;
        })
        .add_sink([sums](int&& s) { sums->push_back(s); });
    JobResult r = env.execute("window due at the end");
    ASSERT_TRUE(r.ok()) << r.status;
    // [0, 1000) holds 1 and 2; record 3 came at 5000: [5000, 6000) is not
    // due at the end, and is dropped.
    EXPECT_EQ(*sums, std::vector<int>{3});
  }
  {
    ManualClock clock(0);
    struct TimerThenBusy : KeyedProcessFunction<int, int, std::string> {
      ManualClock* clock = nullptr;
      void process_element(const int& v, Context& ctx, Collector<std::string>& out) override {
        if (v == 1) {
          ctx.timer_service().register_processing_time_timer(10);  // due at the end
          ctx.timer_service().register_processing_time_timer(60);  // not due: dropped
          clock->Set(50);                                          // a busy record
        }
        out.collect("record " + std::to_string(v));
      }
      void on_timer(Timestamp t, OnTimerContext&, Collector<std::string>& out) override {
        out.collect("timer " + std::to_string(t));
      }
    };
    TimerThenBusy f;
    f.clock = &clock;
    auto lines = std::make_shared<std::vector<std::string>>();
    StreamExecutionEnvironment env;
    env.set_parallelism(1).set_clock(&clock);
    env.from_elements(1, 2, 3)
        .key_by([](const int&) { return 0; })
        .process(f)
        .add_sink([lines](std::string&& s) { lines->push_back(std::move(s)); });
    JobResult r = env.execute("timer due at the end");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(std::count(lines->begin(), lines->end(), "timer 10"), 1);
    EXPECT_EQ(std::count(lines->begin(), lines->end(), "timer 60"), 0);
    EXPECT_EQ(lines->size(), 4u);
    // The dropped timer is counted, the one that fired is not.
    EXPECT_EQ(r.CounterTotal("processingTimeTimersDroppedAtEnd"), 1);
  }
}

}  // namespace
}  // namespace tidemark
