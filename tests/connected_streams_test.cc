// Two-input operators (DataStream::connect, api/connected_streams.h): the
// gate's watermark over two inputs (one valve per input, Flink's combined
// watermark with idleness per input), co-map / co-flat-map / co-process,
// keyed co-process with state and timers, and broadcast state.  Jobs run at
// parallelism 1 and 3 and are checked against reference computations written
// here, independently of the operators.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/test_util.h"
#include "tests/window_harness.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using internal::Control;
using internal::ControlKind;
using testing::Emitted;
using testing::RecordingOutput;

// --- the gate: one valve per input, combined as Flink combines them -----

// Channels 0 and 1 feed input 1, channel 2 feeds input 2.
class TwoInputGateCoreTest : public ::testing::Test {
 protected:
  struct Gate : internal::InputGateCore {
    using InputGateCore::HandleControl;
    using InputGateCore::InputGateCore;
  };
  TwoInputGateCoreTest()
      : metrics_("co", 0, 1, 3), gate_(3, &out_, &metrics_, nullptr, {0, 0, 1}) {}

  void Wm(int c, Timestamp w) { gate_.HandleControl(c, Control{0, ControlKind::kWatermark, 0, w}); }
  void Idle(int c) {
    gate_.HandleControl(
        c, Control{0, ControlKind::kStatus, 0, static_cast<int64_t>(WatermarkStatus::kIdle)});
  }
  void Active(int c) {
    gate_.HandleControl(
        c, Control{0, ControlKind::kStatus, 0, static_cast<int64_t>(WatermarkStatus::kActive)});
  }
  void End(int c) { gate_.HandleControl(c, Control{0, ControlKind::kEndOfInput, 0, 0}); }
  // What the gate emitted since the last call: watermarks as numbers,
  // statuses as -1 (idle) / -2 (active).
  std::vector<Timestamp> Take() {
    std::vector<Timestamp> out;
    auto& ev = out_.events();
    for (size_t i = taken_; i < ev.size(); ++i) {
      if (ev[i].kind == Emitted<int>::kWatermark) out.push_back(ev[i].ts);
      if (ev[i].kind == Emitted<int>::kStatus)
        out.push_back(static_cast<WatermarkStatus>(ev[i].ts) == WatermarkStatus::kIdle ? -1 : -2);
    }
    taken_ = ev.size();
    return out;
  }

  RecordingOutput<int> out_;
  SubtaskMetrics metrics_;
  Gate gate_;
  size_t taken_ = 0;
};

TEST_F(TwoInputGateCoreTest, TheWatermarkIsTheMinimumOfTheTwoInputsAndALaggingInputHoldsItBack) {
  Wm(0, 10);
  Wm(1, 20);
  EXPECT_EQ(Take(), std::vector<Timestamp>{}) << "input 2 is still at MIN";
  Wm(2, 5);
  EXPECT_EQ(Take(), std::vector<Timestamp>{5});
  Wm(2, 15);
  EXPECT_EQ(Take(), std::vector<Timestamp>{10}) << "input 1 (min of its channels, 10) lags";
  Wm(0, 30);
  EXPECT_EQ(Take(), std::vector<Timestamp>{15}) << "now input 2 lags";
  Wm(2, 14);
  EXPECT_EQ(Take(), std::vector<Timestamp>{}) << "a channel's watermark never goes back";
  EXPECT_EQ(gate_.output_watermark(), 15);
  EXPECT_EQ(gate_.valve(0).last_output_watermark(), 20);
  EXPECT_EQ(gate_.valve(1).last_output_watermark(), 15);
}

TEST_F(TwoInputGateCoreTest, AnIdleInputDoesNotHoldTheOtherBack) {
  Wm(0, 10);
  Wm(1, 20);
  Wm(2, 5);
  Take();
  Idle(2);
  EXPECT_EQ(Take(), std::vector<Timestamp>{10}) << "input 2 idle: input 1 alone (FLINK-18934)";
  Wm(0, 40);
  Wm(1, 50);
  EXPECT_EQ(Take(), (std::vector<Timestamp>{20, 40}));
  // Input 2 comes back behind: it counts once its valve emits again, and the
  // combined watermark never goes back.
  Active(2);
  EXPECT_EQ(Take(), std::vector<Timestamp>{});
  Wm(2, 30);
  EXPECT_EQ(Take(), std::vector<Timestamp>{}) << "30 < 40: nothing";
  Wm(2, 45);
  Wm(0, 60);
  EXPECT_EQ(Take(), std::vector<Timestamp>{45});
}

TEST_F(TwoInputGateCoreTest, WhenBothInputsAreIdleTheMaximumIsFlushedAndTheGateIsIdle) {
  Wm(0, 10);
  Wm(1, 20);
  Wm(2, 50);
  EXPECT_EQ(Take(), std::vector<Timestamp>{10});
  Idle(0);
  EXPECT_EQ(Take(), std::vector<Timestamp>{20});
  Idle(1);  // input 1 idle: its valve flushes 20 (its max), then IDLE
  EXPECT_EQ(Take(), std::vector<Timestamp>{50}) << "input 1 idle: input 2 alone";
  EXPECT_FALSE(gate_.output_idle());
  Idle(2);
  EXPECT_EQ(Take(), std::vector<Timestamp>{-1}) << "both idle: max(20, 50) = 50 already out";
  EXPECT_TRUE(gate_.output_idle());
  Active(0);
  EXPECT_EQ(Take(), std::vector<Timestamp>{-2});
  EXPECT_FALSE(gate_.output_idle());
  Wm(0, 70);
  EXPECT_EQ(Take(), std::vector<Timestamp>{70}) << "channel 0 is input 1's only active channel";
}

TEST_F(TwoInputGateCoreTest, BothIdleFlushesTheMaximumOfTheInputs) {
  Wm(0, 10);
  Wm(1, 10);
  Wm(2, 90);
  EXPECT_EQ(Take(), std::vector<Timestamp>{10});
  Idle(2);
  Idle(0);
  Idle(1);
  // Input 2 idle first (input 1 alone, at 10), then input 1 idle: both idle,
  // the maximum over the inputs (90) is flushed, as current Flink does.
  EXPECT_EQ(Take(), (std::vector<Timestamp>{90, -1}));
}

TEST_F(TwoInputGateCoreTest, AnEndedInputCountsAsMaxAndTheOtherDecides) {
  Wm(2, 5);
  End(2);
  Wm(0, 10);
  EXPECT_EQ(Take(), std::vector<Timestamp>{}) << "channel 1 of input 1 is still at MIN";
  Wm(1, 12);
  EXPECT_EQ(Take(), std::vector<Timestamp>{10});
  End(0);
  EXPECT_EQ(Take(), std::vector<Timestamp>{12});
  End(1);
  EXPECT_EQ(Take(), std::vector<Timestamp>{kMaxWatermark});
}

TEST_F(TwoInputGateCoreTest, SnapshotAndRestoreKeepBothValvesAndTheCombinedWatermark) {
  Wm(0, 10);
  Wm(1, 20);
  Wm(2, 15);
  Idle(2);
  Take();
  std::string bytes;
  internal::StateWriter w(&bytes);
  gate_.SnapshotValve(w);

  RecordingOutput<int> out2;
  SubtaskMetrics m2("co", 0, 1, 3);
  Gate restored(3, &out2, &m2, nullptr, {0, 0, 1});
  internal::StateReader r(bytes);
  restored.RestoreValve(r);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(restored.output_watermark(), 10);
  EXPECT_EQ(out2.Watermarks(), std::vector<Timestamp>{10});
  EXPECT_TRUE(restored.valve(1).channel_idle(0));
  // Input 2 is still idle after the restore: input 1 alone moves it.
  restored.HandleControl(0, Control{0, ControlKind::kWatermark, 0, 25});
  EXPECT_EQ(out2.Watermarks(), (std::vector<Timestamp>{10, 20}));

  // A gate with another split of channels refuses the state.
  RecordingOutput<int> out3;
  SubtaskMetrics m3("co", 0, 1, 3);
  Gate other(3, &out3, &m3, nullptr, {0, 1, 1});
  internal::StateReader r3(bytes);
  other.RestoreValve(r3);
  EXPECT_FALSE(r3.ok());
}

// --- co-map, co-flat-map, co-process ------------------------------------

template <typename T>
std::vector<T> Values(const std::shared_ptr<CollectedResults<T>>& results) {
  std::vector<T> v;
  for (const auto& item : results->items()) v.push_back(item.value);
  std::sort(v.begin(), v.end());
  return v;
}

class ConnectedStreamsTest : public ::testing::TestWithParam<int> {};

TEST_P(ConnectedStreamsTest, CoMapSendsEachInputToItsOwnFunction) {
  StreamExecutionEnvironment env;
  env.set_parallelism(GetParam());
  std::vector<int64_t> numbers;
  std::vector<std::string> words;
  for (int i = 0; i < 200; ++i) numbers.push_back(i);
  for (int i = 0; i < 150; ++i) words.push_back("w" + std::to_string(i));
  auto out = env.from_collection(numbers)
                 .rebalance()
                 .connect(env.from_collection(words))
                 .map([](const int64_t& n) { return "n" + std::to_string(n * 2); },
                      [](const std::string& w) { return w + "!"; })
                 .collect();
  JobResult r = env.execute("co-map");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::string> expected;
  for (int64_t n : numbers) expected.push_back("n" + std::to_string(n * 2));
  for (const std::string& w : words) expected.push_back(w + "!");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Values(out), expected);
}

// A CoFlatMapFunction class with open(): counts per subtask.
struct Splitter : CoFlatMapFunction<std::string, int64_t, std::string> {
  int subtask = -1;
  void open(const RuntimeContext& ctx) { subtask = ctx.subtask_index(); }
  void flat_map1(const std::string& line, Collector<std::string>& out) override {
    size_t start = 0;
    while (start <= line.size()) {
      size_t end = line.find(' ', start);
      if (end == std::string::npos) end = line.size();
      if (end > start) out.collect(line.substr(start, end - start));
      start = end + 1;
    }
  }
  void flat_map2(const int64_t& n, Collector<std::string>& out) override {
    for (int64_t i = 0; i < n; ++i) out.collect("#" + std::to_string(n));
  }
};

TEST_P(ConnectedStreamsTest, CoFlatMapWithAFunctionClassAndWithTwoLambdas) {
  StreamExecutionEnvironment env;
  env.set_parallelism(GetParam());
  std::vector<std::string> lines = {"a b c", "", "dd ee", "f"};
  std::vector<int64_t> counts = {0, 1, 2, 3};
  auto lines_s = env.from_collection(lines);
  auto counts_s = env.from_collection(counts);
  auto with_class = lines_s.connect(counts_s).flat_map(Splitter()).collect();
  auto with_lambdas =
      lines_s.rebalance()
          .connect(counts_s.rebalance())
          .flat_map([](const std::string& l,
                       Collector<int64_t>& out) { out.collect(static_cast<int64_t>(l.size())); },
                    [](const int64_t& n, Collector<int64_t>& out) {
                      if (n % 2 == 1) out.collect(-n);
                    })
          .collect();
  JobResult r = env.execute("co-flat-map");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(Values(with_class), (std::vector<std::string>{"#1", "#2", "#2", "#3", "#3", "#3", "a",
                                                          "b", "c", "dd", "ee", "f"}));
  EXPECT_EQ(Values(with_lambdas), (std::vector<int64_t>{-3, -1, 0, 1, 5, 5}));
}

struct Tagger : CoProcessFunction<int64_t, std::string, std::string> {
  OutputTag<int64_t> negatives{"negatives"};
  void process_element1(const int64_t& v, Context& ctx, Collector<std::string>& out) override {
    if (v < 0) {
      ctx.output(negatives, v);
    } else {
      out.collect("1:" + std::to_string(v) + "@" + std::to_string(ctx.timestamp()));
    }
  }
  void process_element2(const std::string& v, Context& ctx, Collector<std::string>& out) override {
    out.collect("2:" + v + "@" + std::to_string(ctx.timestamp()));
  }
};

TEST_P(ConnectedStreamsTest, CoProcessSeesTimestampsAndWritesSideOutputs) {
  StreamExecutionEnvironment env;
  env.set_parallelism(GetParam());
  auto a = env.from_collection(std::vector<int64_t>{5, -3, 7, -1})
               .assign_timestamps_and_watermarks(
                   WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
                       [](const int64_t& v, Timestamp) { return v < 0 ? -v * 100 : v * 100; }));
  auto b =
      env.from_collection(std::vector<std::string>{"x", "yy"})
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<std::string>::for_monotonous_timestamps().with_timestamp_assigner(
                  [](const std::string& s, Timestamp) {
                    return static_cast<Timestamp>(s.size()) * 1000;
                  }));
  Tagger f;
  auto main_out = a.connect(b).process(f);
  auto out = main_out.collect();
  auto neg = main_out.get_side_output(f.negatives).collect();
  JobResult r = env.execute("co-process");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(Values(out), (std::vector<std::string>{"1:5@500", "1:7@700", "2:x@1000", "2:yy@2000"}));
  EXPECT_EQ(Values(neg), (std::vector<int64_t>{-3, -1}));
}

// --- keyed co-process: state and timers on the combined watermark -------

struct Order {
  int64_t id;
  Timestamp ts;
};
struct Payment {
  int64_t id;
  Timestamp ts;
  int64_t cents;
};

// Keyed co-process with state and event-time timers, and broadcast state,
// against references at parallelism 1 and 3 and repeated: the API examples'
// jobs, tests/api_examples_test.cc.

// The same job in two forms: connect(...).key_by(ka, kb) keys both inputs.
TEST_P(ConnectedStreamsTest, ConnectThenKeyByIsTheSameAsKeyByThenConnect) {
  StreamExecutionEnvironment env;
  env.set_parallelism(GetParam());
  std::vector<Order> orders;
  std::vector<Payment> payments;
  for (int64_t id = 0; id < 30; ++id) {
    orders.push_back({id, id});
    payments.push_back({id, id + 1, id});
  }
  auto out = env.from_collection(orders)
                 .connect(env.from_collection(payments))
                 .key_by([](const Order& o) { return o.id % 7; },
                         [](const Payment& p) { return p.id % 7; })
                 .process([] {
                   struct Count {
                     using OutputType = std::string;
                     void process_element1(const Order&, KeyedProcessContext<int64_t>& ctx,
                                           Collector<std::string>& out) {
                       auto n = ctx.get_state<int64_t>("n");
                       n.update(n.value_or(0) + 1);
                       out.collect(std::to_string(ctx.get_current_key()) + ":" +
                                   std::to_string(*n.value()));
                     }
                     void process_element2(const Payment&, KeyedProcessContext<int64_t>& ctx,
                                           Collector<std::string>& out) {
                       auto n = ctx.get_state<int64_t>("n");
                       n.update(n.value_or(0) + 1);
                       out.collect(std::to_string(ctx.get_current_key()) + ":" +
                                   std::to_string(*n.value()));
                     }
                   };
                   return Count{};
                 }())
                 .collect();
  JobResult r = env.execute("connect key_by");
  ASSERT_TRUE(r.ok()) << r.status;
  // Per key k (0..6), records of both inputs count 1..n, n = 2 * |{id : id % 7 == k}|.
  std::vector<std::string> expected;
  for (int64_t k = 0; k < 7; ++k) {
    int64_t n = 0;
    for (int64_t id = 0; id < 30; ++id) n += id % 7 == k ? 2 : 0;
    for (int64_t i = 1; i <= n; ++i)
      expected.push_back(std::to_string(k) + ":" + std::to_string(i));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Values(out), expected);
}

// An input that goes quiet and marks itself idle does not hold the other
// back (FLINK-18934): the keyed co-process's timers fire on the other input's
// watermark alone, while the quiet source stays open.
// With `watermark`, it sends W(1000) of its own at each poll instead (past
// every timer of the other input).
class QuietSource : public Source<int64_t> {
 public:
  explicit QuietSource(bool watermark = false) : watermark_(watermark) {}
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    if (!sent_) {
      out.CollectWithTimestamp(7, 5);
      sent_ = true;
    }
    if (watermark_) {
      out.EmitWatermark(1000);
    } else {
      out.MarkIdle();
    }
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return kMaxTimestamp; }

 private:
  bool watermark_;
  bool sent_ = false;
};

// How the quiet input is made: add_source, or from_source with a watermark
// strategy, whose generator then runs in the source and the source's own
// idleness and watermarks go where it writes (Flink's
// SourceOutputWithWatermarks), so they reach the co-process all the same.
enum class Quiet { kAddSourceIdle, kFromSourceIdle, kFromSourceWatermark };

void IdleInputRun(int parallelism, Quiet how) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  const bool watermark = how == Quiet::kFromSourceWatermark;
  auto factory = [watermark] { return std::make_unique<QuietSource>(watermark); };
  DataStream<int64_t> quiet =
      how == Quiet::kAddSourceIdle
          ? env.add_source<int64_t>(factory, "quiet", /*parallel=*/false)
          : env.from_source<int64_t>(
                   factory,
                   WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
                       [](const int64_t&, Timestamp ts) { return ts; }),
                   "quiet")
                .set_parallelism(1);
  std::vector<int64_t> ticks;
  for (int64_t t = 0; t < 100; ++t) ticks.push_back(t * 10);
  auto busy = env.from_collection(ticks).assign_timestamps_and_watermarks(
      WatermarkStrategy<int64_t>::for_monotonous_timestamps()
          .with_timestamp_assigner([](const int64_t& v, Timestamp) { return v; })
          .with_periodic_emit_per_record());
  struct Fire {
    using OutputType = int64_t;
    void process_element1(const int64_t&, KeyedProcessContext<int64_t>&, Collector<int64_t>&) {}
    void process_element2(const int64_t& v, KeyedProcessContext<int64_t>& ctx,
                          Collector<int64_t>&) {
      ctx.timer_service().register_event_time_timer(v + 1);
    }
    void on_timer(Timestamp t, KeyedProcessContext<int64_t>&, Collector<int64_t>& out) {
      out.collect(t);
    }
  };
  struct Fired {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int64_t> times;
  };
  auto fired = std::make_shared<Fired>();
  quiet.key_by([](const int64_t& v) { return v % 4; })
      .connect(busy.key_by([](const int64_t& v) { return v % 4; }))
      .process(Fire())
      .add_sink([fired](int64_t&& t) {
        std::lock_guard<std::mutex> lock(fired->mu);
        fired->times.push_back(t);
        fired->cv.notify_all();
      });
  JobClient client = env.execute_async("idle input");
  // The busy input ends (MAX), the quiet one is idle: every timer fires,
  // while the quiet source is still open.  (The limit only stops a hang.)
  std::vector<int64_t> times;
  {
    std::unique_lock<std::mutex> lock(fired->mu);
    fired->cv.wait_for(lock, std::chrono::seconds(60),
                       [&] { return fired->times.size() >= ticks.size(); });
    times = fired->times;
  }
  EXPECT_FALSE(client.done()) << "the quiet source never ends";
  client.cancel();
  client.wait();
  std::sort(times.begin(), times.end());
  std::vector<int64_t> expected;
  for (int64_t t : ticks) expected.push_back(t + 1);
  EXPECT_EQ(times, expected);
}

TEST_P(ConnectedStreamsTest, AnIdleInputDoesNotHoldBackTheTimersOfTheOther) {
  IdleInputRun(GetParam(), Quiet::kAddSourceIdle);
}
TEST_P(ConnectedStreamsTest, AnIdleFromSourceInputDoesNotHoldBackTheTimersOfTheOther) {
  IdleInputRun(GetParam(), Quiet::kFromSourceIdle);
}
TEST_P(ConnectedStreamsTest, AFromSourceInputsOwnWatermarkPassesItsGenerators) {
  IdleInputRun(GetParam(), Quiet::kFromSourceWatermark);
}

INSTANTIATE_TEST_SUITE_P(Parallelism, ConnectedStreamsTest, ::testing::Values(1, 3));

// --- the broadcast operator without a job: apply_to_keyed_state and its
// checkpoint ----------------------------------------------------------------

struct KeyCounter : KeyedBroadcastProcessFunction<std::string, std::string, int64_t, std::string> {
  void process_element(const std::string& k, ReadOnlyContext& ctx,
                       Collector<std::string>& out) override {
    auto n = ctx.template get_state<int64_t>("n");
    n.update(n.value_or(0) + 1);
    auto factor = ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).get("x");
    out.collect(k + "=" + std::to_string(*n.value() * factor.value_or(1)));
  }
  void process_broadcast_element(const int64_t& v, Context& ctx, Collector<std::string>&) override {
    if (v == 0) {
      // Reset every key's count.
      ctx.template apply_to_keyed_state<int64_t>(
          "n", [](const std::string&, ValueState<std::string, int64_t>& s) { s.clear(); });
    } else {
      ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).put("x", v);
    }
  }
};

TEST(BroadcastOperator, AppliesToEveryKeysStateAndCheckpointsBroadcastState) {
  auto key = [](const std::string& s) { return s; };
  using Op = internal::KeyedBroadcastProcessOperator<std::string, int64_t, std::string,
                                                     decltype(key), KeyCounter, std::string>;
  testing::OperatorHarness<int, std::string> h(std::make_unique<Op>(key, KeyCounter()));
  h.Open();
  Op& op = h.op<Op>();
  op.ProcessElement1("a", 1);
  op.ProcessElement1("b", 2);
  op.ProcessElement2(10, 3);
  op.ProcessElement1("a", 4);
  EXPECT_EQ(h.TakeRecords(),
            (std::vector<std::pair<std::string, Timestamp>>{{"a=1", 1}, {"b=1", 2}, {"a=20", 4}}));
  op.ProcessElement2(0, 5);  // reset
  op.ProcessElement1("b", 6);
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{{"b=10", 6}}));

  std::string bytes;
  internal::StateWriter w(&bytes);
  op.SnapshotState(w);
  testing::OperatorHarness<int, std::string> h2(std::make_unique<Op>(key, KeyCounter()));
  h2.Open();
  internal::StateReader r(bytes);
  h2.op<Op>().RestoreState(r);
  ASSERT_TRUE(r.ok()) << r.error();
  h2.op<Op>().ProcessElement1("b", 7);
  h2.op<Op>().ProcessElement1("c", 8);
  EXPECT_EQ(h2.TakeRecords(),
            (std::vector<std::pair<std::string, Timestamp>>{{"b=20", 7}, {"c=10", 8}}));
}

// apply_to_keyed_*_state reaches every kind of keyed state, not only value
// state (Flink's applyToKeyedState takes any StateDescriptor): a broadcast
// record of 0 clears every key's list, map, reducing and aggregating state.
struct SumOfInts {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const std::string& s, int64_t acc) const {
    return acc + static_cast<int64_t>(s.size());
  }
  int64_t get_result(int64_t acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};
struct EveryStateKind
    : KeyedBroadcastProcessFunction<std::string, std::string, int64_t, std::string> {
  static int64_t Plus(const int64_t& a, const int64_t& b) { return a + b; }
  void process_element(const std::string& k, ReadOnlyContext& ctx,
                       Collector<std::string>& out) override {
    auto list = ctx.template get_list_state<std::string>("list");
    list.add(k);
    auto map = ctx.template get_map_state<std::string, int64_t>("map");
    map.put(k + std::to_string(list.get().size()), 1);
    auto reducing = ctx.template get_reducing_state<int64_t>("reducing", &Plus);
    reducing.add(10);
    auto aggregating = ctx.get_aggregating_state("aggregating", SumOfInts());
    aggregating.add(k);
    out.collect(absl::StrCat(k, " list=", list.get().size(), " map=", map.entries().size(),
                             " reducing=", reducing.get().value_or(0),
                             " aggregating=", aggregating.get().value_or(0)));
  }
  void process_broadcast_element(const int64_t& v, Context& ctx,
                                 Collector<std::string>& out) override {
    if (v != 0) return;
    int64_t seen = 0;
    ctx.template apply_to_keyed_list_state<std::string>(
        "list", [&](const std::string&, ListState<std::string, std::string>& s) {
          seen += static_cast<int64_t>(s.get().size());
          s.clear();
        });
    ctx.template apply_to_keyed_map_state<std::string, int64_t>(
        "map", [&](const std::string&, MapState<std::string, std::string, int64_t>& s) {
          seen += static_cast<int64_t>(s.entries().size());
          s.clear();
        });
    ctx.template apply_to_keyed_reducing_state<int64_t>("reducing", &Plus,
                                                        [&](const std::string&, auto& s) {
                                                          seen += s.get().value_or(0);
                                                          s.clear();
                                                        });
    ctx.apply_to_keyed_aggregating_state(
        "aggregating", SumOfInts(),
        [&](const std::string&, AggregatingState<std::string, SumOfInts>& s) {
          seen += s.get().value_or(0);
          s.clear();
        });
    out.collect(absl::StrCat("seen ", seen));
  }
};

// A broadcast state the stream was not broadcast with (a typo in the
// descriptor's name) fails the job naming it, on either side, as Flink's
// getBroadcastState throws; it read as an empty state without a word.
struct ReadsAnotherState
    : KeyedBroadcastProcessFunction<std::string, std::string, int64_t, std::string> {
  bool from_broadcast_side = false;
  void process_element(const std::string& v, ReadOnlyContext& ctx,
                       Collector<std::string>& out) override {
    if (!from_broadcast_side) {
      ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("rulez")).get("x");
    }
    out.collect(v);
  }
  void process_broadcast_element(const int64_t& v, Context& ctx, Collector<std::string>&) override {
    ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("rules")).put("x", v);
    if (from_broadcast_side) {
      ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("unregistered")).put("x", v);
    }
  }
};

TEST(BroadcastConnect, AStateNotGivenToBroadcastFailsTheJobNamingIt) {
  for (bool broadcast_side : {false, true}) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    auto rules =
        env.from_elements<int64_t>(7).broadcast(MapStateDescriptor<std::string, int64_t>("rules"));
    ReadsAnotherState f;
    f.from_broadcast_side = broadcast_side;
    env.from_elements<std::string>("a", "b")
        .key_by([](const std::string& s) { return s; })
        .connect(rules)
        .process(f)
        .add_sink([](std::string&&) {});
    JobResult r = env.execute("unregistered broadcast state");
    ASSERT_FALSE(r.ok()) << "broadcast side " << broadcast_side;
    const std::string name = broadcast_side ? "unregistered" : "rulez";
    EXPECT_NE(std::string(r.status.message()).find("broadcast state '" + name + "' does not exist"),
              std::string::npos)
        << r.status;
  }
}

TEST(BroadcastOperator, AppliesToEveryKindOfKeyedState) {
  auto key = [](const std::string& s) { return s; };
  using Op = internal::KeyedBroadcastProcessOperator<std::string, int64_t, std::string,
                                                     decltype(key), EveryStateKind, std::string>;
  testing::OperatorHarness<int, std::string> h(std::make_unique<Op>(key, EveryStateKind()));
  h.Open();
  Op& op = h.op<Op>();
  op.ProcessElement1("a", 1);
  op.ProcessElement1("bb", 2);
  op.ProcessElement1("a", 3);
  // list: 3 elements; map: a1, bb1, a2; reducing: 20 + 10; aggregating: 2 + 2.
  op.ProcessElement2(0, 4);
  op.ProcessElement1("a", 5);
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{
                                 {"a list=1 map=1 reducing=10 aggregating=1", 1},
                                 {"bb list=1 map=1 reducing=10 aggregating=2", 2},
                                 {"a list=2 map=2 reducing=20 aggregating=2", 3},
                                 {"seen 40", 4},
                                 {"a list=1 map=1 reducing=10 aggregating=1", 5}}));
}

// --- a non-keyed stream connected to a broadcast stream (Flink's
// BroadcastProcessFunction) ------------------------------------------------

// Multiplies each value by the broadcast factor "x" (1 until one came),
// marking whether it knew one; the broadcast side stores the factor and
// says which subtask got it.  Late values go to a side output by their sign.
const OutputTag<int64_t> kNegative("negative");
struct Scale : BroadcastProcessFunction<int64_t, int64_t, std::string> {
  void process_element(const int64_t& v, ReadOnlyContext& ctx,
                       Collector<std::string>& out) override {
    if (v < 0) {
      ctx.output(kNegative, v);
      return;
    }
    auto factor = ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).get("x");
    out.collect(absl::StrCat(v * factor.value_or(1), factor ? " known" : " unknown", " at ",
                             ctx.timestamp(), " wm ", ctx.current_watermark()));
  }
  void process_broadcast_element(const int64_t& v, Context& ctx,
                                 Collector<std::string>& out) override {
    ctx.get_broadcast_state(MapStateDescriptor<std::string, int64_t>("f")).put("x", v);
    out.collect(absl::StrCat("factor ", v, " at subtask ", ctx.subtask_index()));
  }
};

TEST(BroadcastProcessOperator, ReadsTheStateTheBroadcastSideWroteAndCheckpointsIt) {
  using Op = internal::BroadcastProcessOperator<int64_t, int64_t, std::string, Scale>;
  testing::OperatorHarness<int, std::string> h(
      std::make_unique<Op>(Scale(), std::vector<std::string>{"f"}));
  RecordingOutput<int64_t>& negative = h.AddSideOutput(kNegative);
  h.Open();
  Op& op = h.op<Op>();
  op.ProcessElement1(3, 1);
  op.ProcessElement2(10, 2);
  op.ProcessWatermark(5);
  op.ProcessElement1(4, 6);
  op.ProcessElement1(-1, 7);
  EXPECT_EQ(h.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{
                                 {"3 unknown at 1 wm " + std::to_string(kMinTimestamp), 1},
                                 {"factor 10 at subtask 0", 2},
                                 {"40 known at 6 wm 5", 6}}));
  EXPECT_EQ(negative.TakeRecords(), (std::vector<std::pair<int64_t, Timestamp>>{{-1, 7}}));
  EXPECT_EQ(op.state_rescaling(), StateRescaling::kBroadcast);

  std::string bytes;
  internal::StateWriter w(&bytes);
  op.SnapshotState(w);
  testing::OperatorHarness<int, std::string> h2(
      std::make_unique<Op>(Scale(), std::vector<std::string>{"f"}));
  h2.Open();
  internal::StateReader r(bytes);
  h2.op<Op>().RestoreState(r);
  ASSERT_TRUE(r.ok()) << r.error();
  h2.op<Op>().ProcessElement1(5, 8);
  EXPECT_EQ(h2.TakeRecords(), (std::vector<std::pair<std::string, Timestamp>>{
                                  {"50 known at 8 wm " + std::to_string(kMinTimestamp), 8}}));
}

// In a job: every subtask of the operator gets the broadcast record, and
// every record of the other input is processed once.  (Which records come
// before the factor is open: there is no order between the two inputs.)
TEST_P(ConnectedStreamsTest, BroadcastProcessFunctionOnANonKeyedStream) {
  const int p = GetParam();
  for (int rep = 0; rep < testing::StressIterations(5); ++rep) {
    StreamExecutionEnvironment env;
    env.set_parallelism(p);
    std::vector<int64_t> values;
    for (int64_t v = 0; v < 200; ++v) values.push_back(v);
    MapStateDescriptor<std::string, int64_t> factors("f");
    DataStream<std::string> scaled = env.from_collection(values)
                                         .rebalance()
                                         .connect(env.from_elements<int64_t>(10).broadcast(factors))
                                         .process(Scale());
    auto out = scaled.collect();
    JobResult r = env.execute("broadcast process");
    ASSERT_TRUE(r.ok()) << r.status;
    std::vector<std::string> factor_lines;
    std::multiset<int64_t> seen;
    for (const std::string& line : Values(out)) {
      if (line.rfind("factor ", 0) == 0) {
        factor_lines.push_back(line);
        continue;
      }
      const int64_t n = std::stoll(line.substr(0, line.find(' ')));
      const bool known = line.find(" known") != std::string::npos;
      ASSERT_TRUE(known ? n % 10 == 0 : true) << line;
      seen.insert(known ? n / 10 : n);
    }
    std::vector<std::string> expected_factor_lines;
    for (int s = 0; s < p; ++s)
      expected_factor_lines.push_back(absl::StrCat("factor 10 at subtask ", s));
    EXPECT_EQ(factor_lines, expected_factor_lines);
    EXPECT_EQ(seen, std::multiset<int64_t>(values.begin(), values.end()));
  }
}

// Flink's nested names for the two contexts.
static_assert(std::is_same_v<Scale::ReadOnlyContext, ReadOnlyBroadcastProcessContext>);
static_assert(std::is_same_v<Scale::Context, BroadcastProcessContext>);

}  // namespace
}  // namespace tidemark
