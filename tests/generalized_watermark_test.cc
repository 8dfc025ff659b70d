// Generalized watermarks (runtime/core/generalized_watermark.h, Flink 2's
// FLIP-467): the declarations' builder, the combiners (min, max, and, or;
// waiting for every channel or not; idle channels left out or not), the input
// gate that feeds them from channels, the remote codec, and jobs in which
// parallel sources report a bool "backlog" (combined with OR, Flink's
// FLIP-309 use) and a long "progress" (combined with MAX) to parallel process
// functions that read them, emit their own and forward them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/io/detail/remote_codec.h"
#include "tidemark/testing/harness.h"
#include "tidemark/tidemark.h"
#include "tools/cli/trace.h"

namespace tidemark {
namespace {

using internal::Control;
using internal::ControlKind;

// Waiting for every channel: "no backlog" is said only once every upstream
// subtask has said so (without waiting, a channel that has not reported yet
// counts as false, OR's identity, as in Flink).
const BoolWatermarkDeclaration kBacklog = WatermarkDeclarations::new_builder("backlog")
                                              .type_bool()
                                              .combine_function_or()
                                              .combine_wait_for_all_channels(true)
                                              .build();
const LongWatermarkDeclaration kProgress = WatermarkDeclarations::new_builder("progress")
                                               .type_long()
                                               .combine_function_max()
                                               .combine_wait_for_all_channels(true)
                                               .build();

// --- declarations -----------------------------------------------------------

TEST(WatermarkDeclarations, BuildsWithFlinksDefaultsAndInternsEqualDeclarations) {
  const LongWatermarkDeclaration d = WatermarkDeclarations::new_builder("x").type_long().build();
  EXPECT_EQ(d.identifier(), "x");
  EXPECT_EQ(d.value_type(), WatermarkValueType::kLong);
  EXPECT_EQ(d.combination_function(), WatermarkCombinationFunction::kMin);  // Flink's default
  EXPECT_FALSE(d.combine_wait_for_all_channels());
  EXPECT_FALSE(d.ignore_idle_channels());
  EXPECT_EQ(d.default_handling_strategy(), WatermarkHandlingStrategy::kForward);
  const BoolWatermarkDeclaration b = WatermarkDeclarations::new_builder("x").type_bool().build();
  EXPECT_EQ(b.combination_function(), WatermarkCombinationFunction::kAnd);  // Flink's default
  // Equal declarations are one kind; another policy under the same name is
  // another kind.
  EXPECT_EQ(WatermarkDeclarations::new_builder("x").type_long().build().spec(), d.spec());
  EXPECT_NE(b.spec(), d.spec());
  EXPECT_TRUE(d.matches(d.new_watermark(3)));
  EXPECT_FALSE(b.matches(d.new_watermark(3)));
  EXPECT_EQ(kBacklog.new_watermark(true).ToString(), "backlog=true");
  EXPECT_EQ(kProgress.new_watermark(-7).ToString(), "progress=-7");
}

TEST(WatermarkDeclarations, RejectsAFunctionThatDoesNotFitTheType) {
  internal::WatermarkSpec s;
  s.identifier = "bad";
  s.type = WatermarkValueType::kBool;
  s.function = WatermarkCombinationFunction::kMax;
  try {
    internal::InternWatermarkSpec(s);
    FAIL() << "accepted max for a bool";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "watermark 'bad': combination function max does not fit a bool watermark");
  }
  EXPECT_THROW(WatermarkDeclarations::new_builder("").type_long().build(), std::invalid_argument);
}

// --- combiners --------------------------------------------------------------

// Feeds a combiner and collects what it emits (nullopt: nothing).
std::vector<std::optional<int64_t>> Feed(WatermarkCombiner& k,
                                         const std::vector<std::pair<int, int64_t>>& in) {
  std::vector<std::optional<int64_t>> out;
  for (const auto& [c, v] : in) out.push_back(k.Input(c, v));
  return out;
}

using Opt = std::optional<int64_t>;
constexpr std::nullopt_t kNone = std::nullopt;

TEST(WatermarkCombiner, LongMaxEmitsAtOnceAndOnlyWhenTheCombinedValueChanges) {
  const auto d = WatermarkDeclarations::new_builder("m").type_long().combine_function_max().build();
  WatermarkCombiner k(d.spec(), 3);
  EXPECT_EQ(Feed(k, {{0, 5}, {1, 3}, {1, 7}, {2, 7}, {0, 6}, {1, 2}, {2, 1}}),
            (std::vector<Opt>{5, kNone, 7, kNone, kNone, kNone, 6}));
  // It may go down: a generalized watermark need not be monotonic.
  EXPECT_EQ(k.last_emitted(), 6);
}

TEST(WatermarkCombiner, LongMinCountsChannelsThatHaveNotReportedAsTheIdentity) {
  const auto d = WatermarkDeclarations::new_builder("m").type_long().combine_function_min().build();
  WatermarkCombiner k(d.spec(), 2);
  EXPECT_EQ(Feed(k, {{0, 10}, {1, 20}, {1, 4}, {0, 4}, {0, 30}, {1, 50}}),
            (std::vector<Opt>{10, kNone, 4, kNone, kNone, 30}));
}

TEST(WatermarkCombiner, WaitForAllChannelsEmitsNothingUntilEveryChannelHasReported) {
  WatermarkCombiner k(kProgress.spec(), 3);
  EXPECT_EQ(Feed(k, {{0, 10}, {0, 30}, {1, 20}, {2, 5}, {2, 40}, {1, 35}}),
            (std::vector<Opt>{kNone, kNone, kNone, 30, 40, kNone}));
}

TEST(WatermarkCombiner, BoolOrIsTrueWhileAnyChannelIsTrue) {
  const auto d = WatermarkDeclarations::new_builder("o").type_bool().combine_function_or().build();
  WatermarkCombiner k(d.spec(), 2);
  EXPECT_EQ(Feed(k, {{0, 1}, {1, 1}, {0, 0}, {1, 0}, {1, 0}, {0, 1}}),
            (std::vector<Opt>{1, kNone, kNone, 0, kNone, 1}));
  // Not waiting, a channel that has not reported counts as false.
  WatermarkCombiner early(d.spec(), 2);
  EXPECT_EQ(Feed(early, {{0, 1}, {0, 0}, {1, 1}, {1, 0}}), (std::vector<Opt>{1, 0, 1, 0}));
  // Waiting, nothing is said until both have reported.
  WatermarkCombiner waiting(kBacklog.spec(), 2);
  EXPECT_EQ(Feed(waiting, {{0, 1}, {0, 0}, {1, 1}, {1, 0}}),
            (std::vector<Opt>{kNone, kNone, 1, 0}));
}

TEST(WatermarkCombiner, BoolAndIsTrueOnlyWhenEveryChannelIsTrue) {
  const auto d = WatermarkDeclarations::new_builder("a").type_bool().combine_function_and().build();
  WatermarkCombiner k(d.spec(), 2);
  // Flink: a channel that has not reported counts as true (AND's identity).
  EXPECT_EQ(Feed(k, {{0, 1}, {1, 0}, {1, 1}, {0, 0}}), (std::vector<Opt>{1, 0, 1, 0}));
  const auto w = WatermarkDeclarations::new_builder("a")
                     .type_bool()
                     .combine_function_and()
                     .combine_wait_for_all_channels(true)
                     .build();
  WatermarkCombiner waiting(w.spec(), 2);
  EXPECT_EQ(Feed(waiting, {{0, 1}, {0, 1}, {1, 1}, {1, 0}}),
            (std::vector<Opt>{kNone, kNone, 1, 0}));
}

TEST(WatermarkCombiner, IdleChannelsCountUnlessTheDeclarationLeavesThemOut) {
  const auto counted = WatermarkDeclarations::new_builder("i").type_long().build();  // min
  WatermarkCombiner k(counted.spec(), 2);
  EXPECT_EQ(Feed(k, {{0, 5}, {1, 9}}), (std::vector<Opt>{5, kNone}));
  EXPECT_EQ(k.SetIdle(0, true), kNone);  // Flink's: idleness changes nothing
  EXPECT_EQ(k.Input(1, 12), kNone);      // channel 0's 5 still holds the minimum

  const auto left_out = WatermarkDeclarations::new_builder("i")
                            .type_long()
                            .combine_wait_for_all_channels(true)
                            .ignore_idle_channels(true)
                            .build();
  WatermarkCombiner j(left_out.spec(), 3);
  EXPECT_EQ(j.SetIdle(2, true), kNone);  // nothing reported yet: nothing to say
  EXPECT_EQ(Feed(j, {{0, 5}, {1, 9}}), (std::vector<Opt>{kNone, 5}));  // 2 need not report
  EXPECT_EQ(j.SetIdle(0, true), 9);       // 0 idle: left out, the minimum is 1's
  EXPECT_EQ(j.SetIdle(2, false), kNone);  // 2 active and never reported: wait for it
  EXPECT_EQ(j.Input(2, 7), 7);
  EXPECT_EQ(j.SetIdle(0, false), 5);  // 0 active again: its last value counts again
  // Every channel idle: all count again (the combination of every last value).
  EXPECT_EQ(j.SetIdle(0, true), 7);
  EXPECT_EQ(j.SetIdle(1, true), kNone);
  EXPECT_EQ(j.SetIdle(2, true), 5);
}

// --- the input gate ----------------------------------------------------------

// A one-input gate over 2 channels, fed control elements by hand.
class GateTest : public ::testing::Test {
 protected:
  struct Gate : internal::InputGateCore {
    using InputGateCore::HandleControl;
    using InputGateCore::InputGateCore;
  };
  GateTest() : metrics_("g", 0, 1, 2), gate_(2, &out_, &metrics_, nullptr) {}
  void Send(int c, const GeneralizedWatermark& w) {
    gate_.HandleControl(c, Control{0, ControlKind::kGeneralized, w.spec().id, w.raw_value()});
  }
  void Status(int c, WatermarkStatus s) {
    gate_.HandleControl(c, Control{0, ControlKind::kStatus, 0, static_cast<int64_t>(s)});
  }
  std::vector<std::string> Seen() const {
    std::vector<std::string> v;
    for (const GeneralizedWatermark& w : out_.generalized_watermarks()) v.push_back(w.ToString());
    return v;
  }
  harness::RecordingOutput<int> out_;
  SubtaskMetrics metrics_;
  Gate gate_;
};

TEST_F(GateTest, CombinesEachKindOverTheChannelsOnItsOwn) {
  Send(0, kBacklog.new_watermark(true));
  Send(1, kProgress.new_watermark(10));  // waits for channel 0
  Send(1, kBacklog.new_watermark(true));
  Send(0, kProgress.new_watermark(4));
  Send(0, kBacklog.new_watermark(false));
  Send(1, kProgress.new_watermark(12));
  Send(1, kBacklog.new_watermark(false));
  EXPECT_EQ(Seen(), (std::vector<std::string>{"backlog=true", "progress=10", "progress=12",
                                              "backlog=false"}));
  EXPECT_TRUE(out_.events().empty());  // no event-time watermark came of it
}

TEST_F(GateTest, AnIdleOrEndedChannelIsLeftOutWhenTheDeclarationSaysSo) {
  const auto busy = WatermarkDeclarations::new_builder("busy")
                        .type_bool()
                        .combine_function_and()
                        .combine_wait_for_all_channels(true)
                        .ignore_idle_channels(true)
                        .build();
  Status(1, WatermarkStatus::kIdle);    // before any watermark of the kind
  Send(0, busy.new_watermark(true));    // channel 1 idle: need not report
  Status(1, WatermarkStatus::kActive);  // active, never reported: wait for it
  Send(1, busy.new_watermark(false));
  Status(1, WatermarkStatus::kIdle);    // idle: its false no longer counts
  Status(1, WatermarkStatus::kActive);  // active: it counts again from its next watermark
  EXPECT_EQ(Seen(), (std::vector<std::string>{"busy=true", "busy=false", "busy=true"}));
  gate_.HandleControl(1, Control{0, ControlKind::kWatermark, 0, 5});
  gate_.HandleControl(1, Control{0, ControlKind::kEndOfInput, 0, 0});  // ended: left out
  EXPECT_EQ(Seen(), (std::vector<std::string>{"busy=true", "busy=false", "busy=true", "busy=false",
                                              "busy=true"}));
}

// A source that ends while idle sends ACTIVE, W(MAX) and its end (so that
// W(MAX) is not ignored as an idle channel's): its stale value must not
// count for that instant.  It made a MIN send 3, then 10 again.
TEST_F(GateTest, AnIdleChannelThatEndsDoesNotCountForAnInstant) {
  const auto low = WatermarkDeclarations::new_builder("low")
                       .type_long()
                       .combine_function_min()
                       .ignore_idle_channels(true)
                       .build();
  Send(0, low.new_watermark(10));
  Send(1, low.new_watermark(3));
  Status(1, WatermarkStatus::kIdle);  // left out: 10
  Status(1, WatermarkStatus::kActive);
  gate_.HandleControl(1, Control{0, ControlKind::kWatermark, 0, kMaxWatermark});
  gate_.HandleControl(1, Control{0, ControlKind::kEndOfInput, 0, 0});
  Send(0, low.new_watermark(10));
  EXPECT_EQ(Seen(), (std::vector<std::string>{"low=10", "low=3", "low=10"}));
  // A value from a channel that turned active counts it again at once.
  Status(0, WatermarkStatus::kIdle);    // every channel idle or ended: all count, 3
  Status(0, WatermarkStatus::kActive);  // 0 not counted again yet: still all out, 3
  Send(0, low.new_watermark(12));       // 0 counts: 12
  EXPECT_EQ(Seen(), (std::vector<std::string>{"low=10", "low=3", "low=10", "low=3", "low=12"}));
}

// A two-input gate (channels 0 and 1: input 1; channel 2: input 2) combines
// each input on its own: input 2's channel does not count for input 1's wait.
TEST(TwoInputGate, CombinesEachInputOnItsOwn) {
  struct Gate : internal::InputGateCore {
    using InputGateCore::HandleControl;
    using InputGateCore::InputGateCore;
  };
  harness::RecordingOutput<int> out;
  SubtaskMetrics metrics("co", 0, 1, 3);
  Gate gate(3, &out, &metrics, nullptr, {0, 0, 1});
  auto send = [&](int c, const GeneralizedWatermark& w) {
    gate.HandleControl(c, Control{0, ControlKind::kGeneralized, w.spec().id, w.raw_value()});
  };
  send(2, kBacklog.new_watermark(true));   // input 2's only channel: passed on
  send(0, kBacklog.new_watermark(false));  // input 1 waits for channel 1
  send(1, kBacklog.new_watermark(false));
  send(2, kBacklog.new_watermark(false));
  std::vector<std::string> seen;
  for (const GeneralizedWatermark& w : out.generalized_watermarks()) seen.push_back(w.ToString());
  EXPECT_EQ(seen, (std::vector<std::string>{"backlog=true", "backlog=false", "backlog=false"}));
}

// A two-input task's gate sends each input's combined values to that
// input's head, so that the operator hears which input they come from (they
// all went to one head: a co-process function could not tell them apart).
TEST(TwoInputGate, SendsEachInputsValuesToItsOwnHead) {
  struct Gate : internal::InputGateCore {
    using InputGateCore::HandleControl;
    using InputGateCore::InputGateCore;
    using InputGateCore::set_generalized_heads;
  };
  harness::RecordingOutput<int> combined, first, second;
  SubtaskMetrics metrics("co", 0, 1, 3);
  Gate gate(3, &combined, &metrics, nullptr, {0, 0, 1});
  gate.set_generalized_heads({&first, &second});
  auto send = [&](int c, const GeneralizedWatermark& w) {
    gate.HandleControl(c, Control{0, ControlKind::kGeneralized, w.spec().id, w.raw_value()});
  };
  send(2, kProgress.new_watermark(7));  // input 2's only channel
  send(0, kProgress.new_watermark(3));  // input 1 waits for channel 1
  send(1, kProgress.new_watermark(5));
  send(2, kProgress.new_watermark(9));
  auto seen = [](const harness::RecordingOutput<int>& o) {
    std::vector<std::string> v;
    for (const GeneralizedWatermark& w : o.generalized_watermarks()) v.push_back(w.ToString());
    return v;
  };
  EXPECT_EQ(seen(first), (std::vector<std::string>{"progress=5"}));
  EXPECT_EQ(seen(second), (std::vector<std::string>{"progress=7", "progress=9"}));
  EXPECT_TRUE(seen(combined).empty());
}

// --- the remote codec --------------------------------------------------------

TEST(GeneralizedWatermarkCodec, ADeclarationCrossesRanksWithItsWatermark) {
  internal::Channel<int64_t> from(4), to(4);
  auto b = from.AcquireBatch();
  b->records.push_back({1, 100});
  const GeneralizedWatermark w = kProgress.new_watermark(-42);
  b->AddControl(ControlKind::kGeneralized, w.raw_value(), w.spec().id);
  from.Push(std::move(b));
  internal::RemoteBatchCodec<int64_t> codec;
  std::string bytes;
  int64_t records = 0;
  ASSERT_TRUE(codec.PopEncode(&from, &bytes, &records));
  // The identifier travels, not this process's id.
  EXPECT_NE(bytes.find("progress"), std::string::npos);
  ASSERT_TRUE(codec.DecodePush(bytes, &to).ok());
  auto got = to.Pop();
  ASSERT_EQ(got->controls.size(), 1u);
  EXPECT_EQ(got->controls[0].kind, ControlKind::kGeneralized);
  EXPECT_EQ(got->controls[0].tag, kProgress.spec()->id);
  EXPECT_EQ(got->controls[0].value, -42);
  EXPECT_EQ(got->controls[0].position, 1u);

  // A declaration whose function does not fit its type is an error.
  std::string bad = bytes;
  const size_t at = bad.find("progress") + 8;  // type, function, flags, strategy follow
  bad[at + 1] = static_cast<char>(WatermarkCombinationFunction::kOr);
  const absl::Status s = codec.DecodePush(bad, &to);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(std::string(s.message()).find("combination function or does not fit a long"),
            std::string::npos)
      << s;
}

// --- jobs ---------------------------------------------------------------------

constexpr int kRecords = 40;

// Reports backlog=true, then its records with progress watermarks (subtask
// s: (s + 1) * 10, (s + 1) * 20, ...), then backlog=false: a source catching
// up, FLIP-309's isProcessingBacklog.  Also an "ignored" kind that a process
// function peeks at and the framework drops.
class CatchingUp final : public Source<int64_t> {
 public:
  void Open(const SourceContext& ctx) override { s_ = ctx.subtask_index; }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    out.EmitGeneralizedWatermark(kBacklog.new_watermark(true));
    out.EmitGeneralizedWatermark(Ignored().new_watermark(1));
    for (int i = 1; i <= kRecords; ++i) {
      out.CollectWithTimestamp(s_ * 1000 + i, i);
      if (i % 10 == 0) out.EmitGeneralizedWatermark(kProgress.new_watermark((s_ + 1) * i));
    }
    out.EmitGeneralizedWatermark(kBacklog.new_watermark(false));
    return PollStatus::kEndOfInput;
  }
  static LongWatermarkDeclaration Ignored() {
    return WatermarkDeclarations::new_builder("ignored")
        .type_long()
        .default_handling_strategy_ignore()
        .build();
  }

 private:
  int s_ = 0;
};

const LongWatermarkDeclaration kSeen =
    WatermarkDeclarations::new_builder("seen").type_long().combine_function_min().build();

// What one subtask of a function saw, in order.
struct Log {
  std::mutex mu;
  std::map<int, std::vector<std::string>> seen;    // subtask -> watermarks
  std::map<int, std::vector<int>> records_before;  // subtask -> records before each
  void Add(int subtask, const GeneralizedWatermark& w, int records) {
    std::lock_guard<std::mutex> lock(mu);
    seen[subtask].push_back(w.ToString());
    records_before[subtask].push_back(records);
  }
};

// The first stages' on_watermark (Stage1, KeyedStage): logs w, takes each
// progress watermark (kPoll) and emits its own "seen" one in its place;
// peeks at the others.
template <typename Ctx>
WatermarkHandlingResult TakeProgress(Log& log, int subtask, int records,
                                     const GeneralizedWatermark& w, Ctx& ctx) {
  log.Add(subtask, w, records);
  if (!kProgress.matches(w)) return WatermarkHandlingResult::kPeek;
  ctx.emit_watermark(kSeen.new_watermark(w.long_value()));
  return WatermarkHandlingResult::kPoll;
}

// The first stage: takes each progress watermark (kPoll) and emits its own
// "seen" one in its place; peeks at the others.
struct Stage1 : ProcessFunction<int64_t, int64_t> {
  std::shared_ptr<Log> log;
  int subtask = 0;
  int records = 0;
  explicit Stage1(std::shared_ptr<Log> l) : log(std::move(l)) {}
  void open(const RuntimeContext& ctx) override { subtask = ctx.subtask_index(); }
  void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
    ++records;
    out.collect(v);
  }
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context& ctx) override {
    return TakeProgress(*log, subtask, records, w, ctx);
  }
};

// The last stage: records what arrives.
struct Stage2 : ProcessFunction<int64_t, int64_t> {
  std::shared_ptr<Log> log;
  int subtask = 0;
  int records = 0;
  explicit Stage2(std::shared_ptr<Log> l) : log(std::move(l)) {}
  void open(const RuntimeContext& ctx) override { subtask = ctx.subtask_index(); }
  void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
    ++records;
    out.collect(v);
  }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context&) override {
    log->Add(subtask, w, records);
    return WatermarkHandlingResult::kPeek;
  }
};

std::vector<std::string> OfKind(const std::vector<std::string>& seen, const std::string& id) {
  std::vector<std::string> v;
  for (const std::string& s : seen)
    if (s.rfind(id + "=", 0) == 0) v.push_back(s.substr(id.size() + 1));
  return v;
}

// The catching-up source at parallelism 2, then `first` (a stage at
// parallelism 2, given the source's stream), then Stage2 alone; the records
// that reach the end.
template <typename First>
std::shared_ptr<CollectedResults<int64_t>> RunStages(First first, const std::shared_ptr<Log>& log2,
                                                     const char* name) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto out =
      first(env.add_source<int64_t>([] { return std::make_unique<CatchingUp>(); }, "catching-up"))
          .rebalance()
          .process(Stage2(log2))
          .name("stage2")
          .set_parallelism(1)
          .collect();
  JobResult r = env.execute(name);
  EXPECT_TRUE(r.ok()) << r.status;
  return out;
}

TEST(GeneralizedWatermarkJob, BacklogOrAndProgressMaxAcrossParallelChannels) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    auto log1 = std::make_shared<Log>();
    auto log2 = std::make_shared<Log>();
    auto out = RunStages(
        [&](DataStream<int64_t> in) { return in.rebalance().process(Stage1(log1)).name("stage1"); },
        log2, "generalized");
    ASSERT_EQ(out->items().size(), static_cast<size_t>(2 * kRecords));
    ASSERT_EQ(log1->seen.size(), 2u);
    int total1 = 0;
    for (auto& [subtask, seen] : log1->seen) {
      SCOPED_TRACE(subtask);
      // OR over the two source channels: true once, false once both are.
      EXPECT_EQ(OfKind(seen, "backlog"), (std::vector<std::string>{"true", "false"}));
      // false came after every record of both sources (they send it last).
      const size_t last = seen.size() - 1;
      EXPECT_EQ(seen[last], "backlog=false");
      total1 += log1->records_before[subtask][last];
      // MAX over the channels, once both had reported: at least the larger
      // first value (subtask 1's 20), rising, ending at subtask 1's 80.
      std::vector<int64_t> progress;
      for (const std::string& v : OfKind(seen, "progress")) progress.push_back(std::stoll(v));
      ASSERT_FALSE(progress.empty());
      EXPECT_GE(progress.front(), 20);
      EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
      EXPECT_EQ(std::adjacent_find(progress.begin(), progress.end()), progress.end());
      EXPECT_EQ(progress.back(), 2 * kRecords);
      // The ignored kind reached the function (combined: 1).
      EXPECT_EQ(OfKind(seen, "ignored"), (std::vector<std::string>{"1"}));
    }
    EXPECT_EQ(total1, 2 * kRecords);
    // Stage 2 (one subtask, two channels): the forwarded backlog, ORed again;
    // no progress (stage 1 took it), its "seen" instead, combined with MIN
    // over stage 1's subtasks, ending at 80; nothing of the ignored kind.
    const std::vector<std::string>& seen2 = log2->seen[0];
    EXPECT_EQ(OfKind(seen2, "backlog"), (std::vector<std::string>{"true", "false"}));
    EXPECT_TRUE(OfKind(seen2, "progress").empty());
    EXPECT_TRUE(OfKind(seen2, "ignored").empty());
    const std::vector<std::string> s = OfKind(seen2, "seen");
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(s.back(), std::to_string(2 * kRecords));
    // Stage 1 forwarded backlog=false after all its records.
    for (size_t i = 0; i < seen2.size(); ++i)
      if (seen2[i] == "backlog=false") EXPECT_EQ(log2->records_before[0][i], 2 * kRecords);
  }
}

TEST(GeneralizedWatermarkJob, EmittingAnUndeclaredKindFailsTheJobSayingWhich) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  struct Rogue : ProcessFunction<int64_t, int64_t> {
    void process_element(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
      ctx.emit_watermark(kBacklog.new_watermark(true));
      out.collect(v);
    }
    std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  };
  env.from_collection(std::vector<int64_t>{1, 2}).process(Rogue()).name("rogue").collect();
  JobResult r = env.execute("rogue");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("operator 'rogue'"), std::string::npos)
      << r.status;
  EXPECT_NE(std::string(r.status.message())
                .find("watermark 'backlog' is emitted but not declared: add its declaration to "
                      "the function's declare_watermarks()"),
            std::string::npos)
      << r.status;
}

// ctx.emit_watermark(w) from a CoProcessFunction goes downstream, as from a
// ProcessFunction (its context had no emitter: the watermarks were dropped).
TEST(GeneralizedWatermarkJob, ACoProcessFunctionEmitsWatermarksDownstream) {
  struct Co : CoProcessFunction<int64_t, int64_t, int64_t> {
    void process_element1(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
      ctx.emit_watermark(kProgress.new_watermark(v));
      out.collect(v);
    }
    void process_element2(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
      ctx.emit_watermark(kProgress.new_watermark(v));
      out.collect(v);
    }
  };
  auto log = std::make_shared<Log>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto a = env.from_collection(std::vector<int64_t>{1, 2});
  auto b = env.from_collection(std::vector<int64_t>{10, 20});
  a.connect(b).process(Co()).process(Stage2(log)).add_sink([](int64_t&&) {});
  JobResult r = env.execute("co-process emits");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::string> all;
  for (const auto& [subtask, seen] : log->seen) all.insert(all.end(), seen.begin(), seen.end());
  std::vector<std::string> progress = OfKind(all, "progress");
  std::sort(progress.begin(), progress.end());
  // Each one emitted, from either input (chained: nothing combines them).
  EXPECT_EQ(progress, (std::vector<std::string>{"1", "10", "2", "20"}));
}

// ctx.emit_watermark(w) from both contexts of a (non-keyed)
// BroadcastProcessFunction goes downstream, as from a CoProcessFunction.
TEST(GeneralizedWatermarkJob, ABroadcastProcessFunctionEmitsWatermarksFromBothSides) {
  struct Bcast : BroadcastProcessFunction<int64_t, int64_t, int64_t> {
    void process_element(const int64_t& v, ReadOnlyContext& ctx, Collector<int64_t>& out) override {
      ctx.emit_watermark(kProgress.new_watermark(v));
      out.collect(v);
    }
    void process_broadcast_element(const int64_t& v, Context& ctx,
                                   Collector<int64_t>& out) override {
      ctx.emit_watermark(kProgress.new_watermark(v));
      out.collect(v);
    }
  };
  auto log = std::make_shared<Log>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto a = env.from_collection(std::vector<int64_t>{1, 2});
  auto rules = env.from_collection(std::vector<int64_t>{10, 20})
                   .broadcast(MapStateDescriptor<std::string, int64_t>("rules"));
  a.connect(rules).process(Bcast()).process(Stage2(log)).add_sink([](int64_t&&) {});
  JobResult r = env.execute("broadcast process emits");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::string> all;
  for (const auto& [subtask, seen] : log->seen) all.insert(all.end(), seen.begin(), seen.end());
  std::vector<std::string> progress = OfKind(all, "progress");
  std::sort(progress.begin(), progress.end());
  EXPECT_EQ(progress, (std::vector<std::string>{"1", "10", "2", "20"}));
}

// The CLI's trace (--trace=watermarks) prints each one the runtime reports:
// sent by a subtask, or combined at a subtask's input.
// A keyed process function handles generalized watermarks as a process
// function does (Flink's keyed process operator is the non-keyed one with a
// key): it peeks at them, takes them (kPoll) and emits its own; a kind
// declared "ignore" stops at it.  It was never called, and forwarded all of
// them, the ignored kind too.
struct KeyedStage : KeyedProcessFunction<int64_t, int64_t, int64_t> {
  std::shared_ptr<Log> log;
  int subtask = 0;
  int records = 0;
  explicit KeyedStage(std::shared_ptr<Log> l) : log(std::move(l)) {}
  void open(const RuntimeContext& ctx) { subtask = ctx.subtask_index(); }
  void process_element(const int64_t& v, Context& ctx, Collector<int64_t>& out) override {
    ++records;
    ctx.get_state<int64_t>("count").update(ctx.get_state<int64_t>("count").value().value_or(0) + 1);
    out.collect(v);
  }
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                       Context& ctx) override {
    return TakeProgress(*log, subtask, records, w, ctx);
  }
};

TEST(GeneralizedWatermarkJob, AKeyedProcessFunctionPeeksTakesAndEmitsThem) {
  auto log1 = std::make_shared<Log>();
  auto log2 = std::make_shared<Log>();
  auto out = RunStages(
      [&](DataStream<int64_t> in) {
        return in.key_by([](const int64_t& v) { return v % 7; })
            .process(KeyedStage(log1))
            .name("keyed");
      },
      log2, "generalized keyed");
  ASSERT_EQ(out->items().size(), static_cast<size_t>(2 * kRecords));
  ASSERT_EQ(log1->seen.size(), 2u);
  for (auto& [subtask, seen] : log1->seen) {
    SCOPED_TRACE(subtask);
    EXPECT_EQ(OfKind(seen, "backlog"), (std::vector<std::string>{"true", "false"}));
    EXPECT_EQ(OfKind(seen, "ignored"), (std::vector<std::string>{"1"}));
    EXPECT_FALSE(OfKind(seen, "progress").empty());
  }
  const std::vector<std::string>& seen2 = log2->seen[0];
  EXPECT_EQ(OfKind(seen2, "backlog"), (std::vector<std::string>{"true", "false"}));
  EXPECT_TRUE(OfKind(seen2, "progress").empty()) << "taken by the keyed function (kPoll)";
  EXPECT_TRUE(OfKind(seen2, "ignored").empty()) << "declared ignore: dropped after the peek";
  const std::vector<std::string> s = OfKind(seen2, "seen");
  ASSERT_FALSE(s.empty());
  EXPECT_EQ(s.back(), std::to_string(2 * kRecords));
}

// In on_watermark there is no current key: keyed state and timers there
// fail the job with a message saying so (they read through a null key).
TEST(GeneralizedWatermarkJob, KeyedStateInOnWatermarkFailsTheJobSayingThereIsNoKey) {
  for (int what = 0; what < 3; ++what) {
    SCOPED_TRACE(what);
    struct StateOnWatermark : KeyedProcessFunction<int64_t, int64_t, int64_t> {
      int what = 0;
      void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
        out.collect(v);
      }
      WatermarkHandlingResult on_watermark(const GeneralizedWatermark&, Collector<int64_t>&,
                                           Context& ctx) override {
        if (what == 0) ctx.get_state<int64_t>("x").update(1);
        if (what == 1) ctx.timer_service().register_event_time_timer(5);
        if (what == 2) (void)ctx.get_current_key();
        return WatermarkHandlingResult::kPeek;
      }
    };
    StateOnWatermark f;
    f.what = what;
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.add_source<int64_t>([] { return std::make_unique<CatchingUp>(); }, "catching-up")
        .key_by([](const int64_t& v) { return v; })
        .process(f)
        .add_sink([](int64_t&&) {});
    JobResult r = env.execute("no key");
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status.message()),
                ::testing::HasSubstr("no current key in on_watermark"));
  }
}

// A generalized watermark leaves its task at once, with the records before
// it, as Flink sends it as an event; it waited for the buffer timeout (here
// an hour) like an event-time watermark.
TEST(GeneralizedWatermarkJob, AWatermarkIsSentAtOnceNotAfterTheBufferTimeout) {
  // One record and the watermark, then busy with nothing to send until told
  // to end (a task that goes to sleep sends what it holds, so the source
  // stays busy, as a source reading input that it filters out would).
  class OneThenBusy final : public Source<int64_t> {
   public:
    explicit OneThenBusy(std::shared_ptr<std::atomic<bool>> stop) : stop_(std::move(stop)) {}
    PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
      if (!sent_) {
        out.CollectWithTimestamp(7, 1);
        out.EmitGeneralizedWatermark(kBacklog.new_watermark(true));
      }
      sent_ = true;
      return stop_->load() ? PollStatus::kEndOfInput : PollStatus::kMoreAvailable;
    }

   private:
    std::shared_ptr<std::atomic<bool>> stop_;
    bool sent_ = false;
  };
  auto stop = std::make_shared<std::atomic<bool>>(false);
  struct Arrived {
    std::mutex mu;
    std::condition_variable cv;
    int records = 0;
    bool watermark = false;
  };
  auto arrived = std::make_shared<Arrived>();
  struct Watch : ProcessFunction<int64_t, int64_t> {
    std::shared_ptr<Arrived> a;
    void process_element(const int64_t& v, Context&, Collector<int64_t>& out) override {
      std::lock_guard<std::mutex> lock(a->mu);
      ++a->records;
      out.collect(v);
    }
    WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>&,
                                         Context&) override {
      std::lock_guard<std::mutex> lock(a->mu);
      if (kBacklog.matches(w)) a->watermark = true;
      a->cv.notify_all();
      return WatermarkHandlingResult::kPeek;
    }
  };
  Watch watch;
  watch.a = arrived;
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_buffer_timeout(std::chrono::hours(1));
  env.add_source<int64_t>([stop] { return std::make_unique<OneThenBusy>(stop); }, "one")
      .rebalance()
      .process(watch)
      .add_sink([](int64_t&&) {});
  JobClient client = env.execute_async("at once");
  bool came;
  int records;
  {
    std::unique_lock<std::mutex> lock(arrived->mu);
    // (The limit only stops a hang: before the fix it came after an hour.)
    came = arrived->cv.wait_for(lock, std::chrono::seconds(60), [&] { return arrived->watermark; });
    records = arrived->records;
  }
  stop->store(true);
  const JobResult r = client.wait();
  EXPECT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(came);
  EXPECT_EQ(records, 1) << "the record before it came with it";
}

// A record collected in on_watermark carries the collector's timestamp as
// it is (Flink's output collector): none before the first record, then the
// last record's; after an event-time timer, the timer's.
struct CollectOnWatermark : ProcessFunction<int64_t, int64_t> {
  void process_element(const int64_t&, Context&, Collector<int64_t>&) override {}
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>& out,
                                       Context&) override {
    out.collect(w.long_value());
    return WatermarkHandlingResult::kPoll;
  }
};

struct KeyedCollectOnWatermark : KeyedProcessFunction<int64_t, int64_t, int64_t> {
  void process_element(const int64_t& v, Context& ctx, Collector<int64_t>&) override {
    ctx.timer_service().register_event_time_timer(v + 100);
  }
  void on_timer(Timestamp, OnTimerContext&, Collector<int64_t>&) override {}
  WatermarkHandlingResult on_watermark(const GeneralizedWatermark& w, Collector<int64_t>& out,
                                       Context&) override {
    out.collect(w.long_value());
    return WatermarkHandlingResult::kPoll;
  }
};

TEST(GeneralizedWatermarkHarness, OnWatermarkCollectsWithTheLastRecordsTimestamp) {
  auto h =
      harness::ProcessFunctionTestHarnesses::for_process_function<int64_t>(CollectOnWatermark{});
  h.open();
  h.process_generalized_watermark(kProgress.new_watermark(1));
  h.process_element(5, 42);
  h.process_generalized_watermark(kProgress.new_watermark(2));
  EXPECT_EQ(h.extract_output_records(),
            (std::vector<harness::StreamRecord<int64_t>>{{1, kNoTimestamp}, {2, 42}}));
  EXPECT_TRUE(h.main_output().generalized_watermarks().empty());  // taken (kPoll)

  auto k = harness::ProcessFunctionTestHarnesses::for_keyed_process_function<int64_t>(
      KeyedCollectOnWatermark{}, [](int64_t v) { return v; });
  k.open();
  k.process_element(7, 7);
  k.process_generalized_watermark(kProgress.new_watermark(1));
  k.process_watermark(107);  // fires the timer at 107
  k.process_generalized_watermark(kProgress.new_watermark(2));
  EXPECT_EQ(k.extract_output_records(),
            (std::vector<harness::StreamRecord<int64_t>>{{1, 7}, {2, 107}}));
}

// --- two-input process functions: each input's watermarks --------------------

// Each input's handler as Flink's two-input process functions have them
// (onWatermarkFromFirstInput / SecondInput, ...FromNonBroadcastInput /
// BroadcastInput): logs "<input>:<watermark>", collects the value (with the
// collector's timestamp as it stands), takes progress (kPoll) and emits a
// "seen" watermark for it, peeks at the rest.  Before, both inputs' values
// reached no function: the operator forwarded them all, the ignored kind too.
template <typename Ctx>
WatermarkHandlingResult OnInput(std::vector<std::string>& log, const char* input,
                                const GeneralizedWatermark& w, Collector<int64_t>& out, Ctx& ctx) {
  log.push_back(std::string(input) + ":" + w.ToString());
  if (!kProgress.matches(w)) return WatermarkHandlingResult::kPeek;
  out.collect(w.long_value());
  ctx.emit_watermark(kSeen.new_watermark(w.long_value()));
  return WatermarkHandlingResult::kPoll;
}

using HookLog = std::shared_ptr<std::vector<std::string>>;

struct CoHooks : CoProcessFunction<int64_t, int64_t, int64_t> {
  HookLog log = std::make_shared<std::vector<std::string>>();
  void process_element1(const int64_t&, Context&, Collector<int64_t>&) override {}
  void process_element2(const int64_t&, Context&, Collector<int64_t>&) override {}
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark_from_first_input(const GeneralizedWatermark& w,
                                                        Collector<int64_t>& out,
                                                        Context& ctx) override {
    EXPECT_EQ(ctx.timestamp(), kNoTimestamp);
    return OnInput(*log, "1", w, out, ctx);
  }
  WatermarkHandlingResult on_watermark_from_second_input(const GeneralizedWatermark& w,
                                                         Collector<int64_t>& out,
                                                         Context& ctx) override {
    return OnInput(*log, "2", w, out, ctx);
  }
};

std::vector<std::string> Sent(const harness::RecordingOutput<int64_t>& o) {
  std::vector<std::string> v;
  for (const GeneralizedWatermark& w : o.generalized_watermarks()) v.push_back(w.ToString());
  return v;
}

TEST(GeneralizedWatermarkTwoInput, ACoProcessFunctionHearsEachInputOnItsOwn) {
  CoHooks f;
  const HookLog log = f.log;
  auto h = harness::ProcessFunctionTestHarnesses::for_co_process_function<int64_t, int64_t>(f);
  h.open();
  h.process_generalized_watermark1(kProgress.new_watermark(1));
  h.process_element2(0, 42);
  h.process_generalized_watermark2(kProgress.new_watermark(2));
  h.process_generalized_watermark2(kBacklog.new_watermark(true));
  h.process_generalized_watermark1(CatchingUp::Ignored().new_watermark(3));
  EXPECT_EQ(*log, (std::vector<std::string>{"1:progress=1", "2:progress=2", "2:backlog=true",
                                            "1:ignored=3"}));
  EXPECT_EQ(h.extract_output_records(),
            (std::vector<harness::StreamRecord<int64_t>>{{1, kNoTimestamp}, {2, 42}}));
  // Taken progress is replaced by "seen"; backlog peeked and forwarded; the
  // ignored kind peeked and dropped (its declaration).
  EXPECT_EQ(Sent(h.main_output()), (std::vector<std::string>{"seen=1", "seen=2", "backlog=true"}));

  // A function without the members is as one that peeks: each value goes
  // on, unless its declaration says ignore (as from a ProcessFunction).
  struct NoHooks {
    void process_element1(const int64_t&, ProcessContext&, Collector<int64_t>&) {}
    void process_element2(const int64_t&, ProcessContext&, Collector<int64_t>&) {}
  };
  auto plain =
      harness::ProcessFunctionTestHarnesses::for_co_process_function<int64_t, int64_t>(NoHooks{});
  plain.open();
  plain.process_generalized_watermark1(CatchingUp::Ignored().new_watermark(3));
  plain.process_generalized_watermark2(kProgress.new_watermark(4));
  plain.process_generalized_watermark1(kProgress.new_watermark(5));
  EXPECT_EQ(Sent(plain.main_output()), (std::vector<std::string>{"progress=4", "progress=5"}));
}

// The keyed one: the same, with no current key in the handlers (keyed state
// there fails saying so); its context's emit_watermark reaches the output
// (it was dropped without a word: the keyed operators set no emitter).
struct KeyedCoHooks : KeyedCoProcessFunction<int64_t, int64_t, int64_t, int64_t> {
  HookLog log = std::make_shared<std::vector<std::string>>();
  void process_element1(const int64_t& v, Context& ctx, Collector<int64_t>&) override {
    ctx.emit_watermark(kSeen.new_watermark(100 + v));
  }
  void process_element2(const int64_t&, Context&, Collector<int64_t>&) override {}
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark_from_first_input(const GeneralizedWatermark& w,
                                                        Collector<int64_t>& out,
                                                        Context& ctx) override {
    if (kBacklog.matches(w)) ctx.get_state<int64_t>("x").update(1);  // no key: throws
    return OnInput(*log, "1", w, out, ctx);
  }
  WatermarkHandlingResult on_watermark_from_second_input(const GeneralizedWatermark& w,
                                                         Collector<int64_t>& out,
                                                         Context& ctx) override {
    return OnInput(*log, "2", w, out, ctx);
  }
};

TEST(GeneralizedWatermarkTwoInput, AKeyedCoProcessFunctionHearsEachInputWithNoKey) {
  KeyedCoHooks f;
  const HookLog log = f.log;
  auto key = [](const int64_t& v) { return v % 3; };
  auto h = harness::ProcessFunctionTestHarnesses::for_keyed_co_process_function<int64_t, int64_t>(
      f, key, key);
  h.open();
  h.process_element1(7, 70);  // emits seen=107
  h.process_generalized_watermark2(kProgress.new_watermark(2));
  h.process_generalized_watermark1(kProgress.new_watermark(1));
  EXPECT_EQ(*log, (std::vector<std::string>{"2:progress=2", "1:progress=1"}));
  EXPECT_EQ(h.extract_output_records(),
            (std::vector<harness::StreamRecord<int64_t>>{{2, 70}, {1, 70}}));
  EXPECT_EQ(Sent(h.main_output()), (std::vector<std::string>{"seen=107", "seen=2", "seen=1"}));
  try {
    h.process_generalized_watermark1(kBacklog.new_watermark(true));
    ADD_FAILURE() << "keyed state with no current key did not throw";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("no current key in on_watermark"));
  }
}

// Broadcast process functions: the first input's to the non-broadcast
// handler, the broadcast input's to the broadcast one; the keyed one's
// broadcast context emits too (it had no emit_watermark).
struct BroadcastHooks : BroadcastProcessFunction<int64_t, int64_t, int64_t> {
  HookLog log = std::make_shared<std::vector<std::string>>();
  void process_element(const int64_t&, ReadOnlyContext&, Collector<int64_t>&) override {}
  void process_broadcast_element(const int64_t&, Context&, Collector<int64_t>&) override {}
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark_from_non_broadcast_input(const GeneralizedWatermark& w,
                                                                Collector<int64_t>& out,
                                                                ReadOnlyContext& ctx) override {
    return OnInput(*log, "data", w, out, ctx);
  }
  WatermarkHandlingResult on_watermark_from_broadcast_input(const GeneralizedWatermark& w,
                                                            Collector<int64_t>& out,
                                                            Context& ctx) override {
    return OnInput(*log, "broadcast", w, out, ctx);
  }
};

struct KeyedBroadcastHooks : KeyedBroadcastProcessFunction<int64_t, int64_t, int64_t, int64_t> {
  HookLog log = std::make_shared<std::vector<std::string>>();
  void process_element(const int64_t&, ReadOnlyContext&, Collector<int64_t>&) override {}
  void process_broadcast_element(const int64_t& v, Context& ctx, Collector<int64_t>&) override {
    ctx.emit_watermark(kSeen.new_watermark(100 + v));
  }
  std::vector<WatermarkDeclaration> declare_watermarks() const override { return {kSeen}; }
  WatermarkHandlingResult on_watermark_from_non_broadcast_input(const GeneralizedWatermark& w,
                                                                Collector<int64_t>& out,
                                                                ReadOnlyContext& ctx) override {
    if (kBacklog.matches(w)) (void)ctx.get_current_key();  // no key: throws
    return OnInput(*log, "data", w, out, ctx);
  }
  WatermarkHandlingResult on_watermark_from_broadcast_input(const GeneralizedWatermark& w,
                                                            Collector<int64_t>& out,
                                                            Context& ctx) override {
    return OnInput(*log, "broadcast", w, out, ctx);
  }
};

TEST(GeneralizedWatermarkTwoInput, BroadcastProcessFunctionsHearTheDataAndTheBroadcastInput) {
  {
    BroadcastHooks f;
    const HookLog log = f.log;
    auto h =
        harness::ProcessFunctionTestHarnesses::for_broadcast_process_function<int64_t, int64_t>(f);
    h.open();
    h.process_generalized_watermark2(kProgress.new_watermark(2));
    h.process_generalized_watermark1(kProgress.new_watermark(1));
    h.process_generalized_watermark1(kBacklog.new_watermark(true));
    EXPECT_EQ(*log, (std::vector<std::string>{"broadcast:progress=2", "data:progress=1",
                                              "data:backlog=true"}));
    EXPECT_EQ(Sent(h.main_output()),
              (std::vector<std::string>{"seen=2", "seen=1", "backlog=true"}));
  }
  {
    KeyedBroadcastHooks f;
    const HookLog log = f.log;
    auto h = harness::ProcessFunctionTestHarnesses::for_keyed_broadcast_process_function<int64_t,
                                                                                         int64_t>(
        f, [](const int64_t& v) { return v; });
    h.open();
    h.process_element2(5, 1);  // emits seen=105 from the broadcast side
    h.process_generalized_watermark2(kProgress.new_watermark(2));
    h.process_generalized_watermark1(kProgress.new_watermark(1));
    EXPECT_EQ(*log, (std::vector<std::string>{"broadcast:progress=2", "data:progress=1"}));
    EXPECT_EQ(Sent(h.main_output()), (std::vector<std::string>{"seen=105", "seen=2", "seen=1"}));
    try {
      h.process_generalized_watermark1(kBacklog.new_watermark(true));
      ADD_FAILURE() << "get_current_key() with no current key did not throw";
    } catch (const std::logic_error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("no current key in on_watermark"));
    }
  }
}

// In a job: the catching-up sources (parallelism 2) on the first input, a
// source of its own kind on the second; each input's values reach its
// handler, combined over that input's channels alone.
class Ticking final : public Source<int64_t> {
 public:
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    for (int i = 1; i <= 3; ++i) {
      out.CollectWithTimestamp(i, i);
      out.EmitGeneralizedWatermark(kTick.new_watermark(i));
    }
    return PollStatus::kEndOfInput;
  }
  static inline const LongWatermarkDeclaration kTick =
      WatermarkDeclarations::new_builder("tick").type_long().combine_function_max().build();
};

struct JobCoHooks : CoProcessFunction<int64_t, int64_t, int64_t> {
  std::shared_ptr<Log> log;
  int subtask = 0;
  explicit JobCoHooks(std::shared_ptr<Log> l) : log(std::move(l)) {}
  void open(const RuntimeContext& ctx) override { subtask = ctx.subtask_index(); }
  void process_element1(const int64_t&, Context&, Collector<int64_t>&) override {}
  void process_element2(const int64_t&, Context&, Collector<int64_t>&) override {}
  WatermarkHandlingResult on_watermark_from_first_input(const GeneralizedWatermark& w,
                                                        Collector<int64_t>&, Context&) override {
    log->Add(subtask, w, 1);
    return WatermarkHandlingResult::kPeek;
  }
  WatermarkHandlingResult on_watermark_from_second_input(const GeneralizedWatermark& w,
                                                         Collector<int64_t>&, Context&) override {
    log->Add(subtask, w, 2);
    return WatermarkHandlingResult::kPeek;
  }
};

TEST(GeneralizedWatermarkJob, ACoProcessFunctionHearsEachInputCombinedOnItsOwn) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(round);
    auto log = std::make_shared<Log>();
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    auto first =
        env.add_source<int64_t>([] { return std::make_unique<CatchingUp>(); }, "catching-up");
    auto second = env.add_source<int64_t>([] { return std::make_unique<Ticking>(); }, "ticking")
                      .set_parallelism(1);
    first.rebalance().connect(second.rebalance()).process(JobCoHooks(log)).add_sink([](int64_t&&) {
    });
    JobResult r = env.execute("co-process hears each input");
    ASSERT_TRUE(r.ok()) << r.status;
    ASSERT_EQ(log->seen.size(), 2u);
    for (auto& [subtask, seen] : log->seen) {
      SCOPED_TRACE(subtask);
      std::vector<std::string> from1, from2;
      for (size_t i = 0; i < seen.size(); ++i)
        (log->records_before[subtask][i] == 1 ? from1 : from2).push_back(seen[i]);
      // The first input: its two channels' backlog ORed, their progress
      // MAXed, ending at 80; nothing of the second's kind.
      EXPECT_EQ(OfKind(from1, "backlog"), (std::vector<std::string>{"true", "false"}));
      ASSERT_FALSE(OfKind(from1, "progress").empty());
      EXPECT_EQ(OfKind(from1, "progress").back(), std::to_string(2 * kRecords));
      EXPECT_TRUE(OfKind(from1, "tick").empty());
      // The second: its one channel's ticks, in order, and nothing else.
      EXPECT_EQ(from2, (std::vector<std::string>{"tick=1", "tick=2", "tick=3"}));
    }
  }
}

TEST(GeneralizedWatermarkTrace, TheTraceRecorderPrintsWhatSubtasksSendAndCombine) {
  for (const cli::OutputFormat format : {cli::OutputFormat::kText, cli::OutputFormat::kJsonl}) {
    std::ostringstream os;
    cli::LinePrinter printer(&os);
    auto recorder =
        std::make_shared<cli::TraceRecorder>(&printer, format, /*print_trace=*/true,
                                             /*keep_events=*/false, absl::UTCTimeZone());
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    env.set_watermark_listener(recorder);
    env.add_source<int64_t>([] { return std::make_unique<CatchingUp>(); }, "catching-up")
        .rebalance()
        .process([](const int64_t& v, ProcessContext&, Collector<int64_t>& out) { out.collect(v); })
        .name("follow")
        .add_sink([](int64_t&&) {});
    JobResult r = env.execute("trace");
    ASSERT_TRUE(r.ok()) << r.status;
    const std::string out = os.str();
    if (format == cli::OutputFormat::kText) {
      EXPECT_NE(out.find("[watermark] Source: catching-up subtask 1 sent progress=80\n"),
                std::string::npos)
          << out;
      EXPECT_NE(out.find("[watermark] Source: catching-up subtask 0 sent backlog=true\n"),
                std::string::npos)
          << out;
      EXPECT_NE(out.find(" combined (channel "), std::string::npos) << out;
      EXPECT_NE(out.find(") backlog=false\n"), std::string::npos) << out;
    } else {
      EXPECT_NE(
          out.find(
              "{\"kind\":\"generalized_watermark\",\"task\":\"Source: catching-up\",\"subtask\":1,"
              "\"direction\":\"out\",\"identifier\":\"progress\",\"value\":80,"),
          std::string::npos)
          << out;
      EXPECT_NE(out.find("\"direction\":\"in\",\"channel\":"), std::string::npos) << out;
      EXPECT_NE(out.find("\"identifier\":\"backlog\",\"value\":false,"), std::string::npos) << out;
    }
  }
}

}  // namespace
}  // namespace tidemark
