// SourceOutput<T>::CollectInPlace: the record is made straight in the
// output's run (no move of the value, no virtual call) where the output has
// one, and is otherwise CollectWithTimestamp(make(), ts).  Inside a job the
// run is the source driver's, mixed with records collected the other ways,
// with split outputs and with the source's own watermarks: the order, the
// timestamps and the records-in count must be as if each had been collected
// one by one.
#include <gtest/gtest.h>

#include <algorithm>
#include <any>
#include <atomic>
#include <future>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

// Counts the copies and moves of its values.
struct Tracked {
  static inline int copies = 0;
  static inline int moves = 0;
  int64_t v = 0;
  explicit Tracked(int64_t x) : v(x) {}
  Tracked(const Tracked& o) : v(o.v) { ++copies; }
  Tracked(Tracked&& o) noexcept : v(o.v) { ++moves; }
  Tracked& operator=(const Tracked& o) {
    v = o.v;
    ++copies;
    return *this;
  }
  Tracked& operator=(Tracked&& o) noexcept {
    v = o.v;
    ++moves;
    return *this;
  }
};

// An output that gathers its records as the source driver does: a run of
// at most `limit`, handed on (here: appended to `sent`) when full.  With
// limit 0 it has no run and every record takes CollectWithTimestamp.
class RunOutput final : public SourceOutput<Tracked> {
 public:
  explicit RunOutput(size_t run_length) : limit(run_length) {
    run.reserve(limit);
    if (limit > 0) {
      run_ = &run;
      run_limit_ = limit;
    }
  }
  void Collect(Tracked&& v) override { CollectWithTimestamp(std::move(v), kNoTimestamp); }
  void CollectWithTimestamp(Tracked&& v, Timestamp ts) override {
    ++virtual_calls;
    sent.emplace_back(v.v, ts);
  }
  void EmitWatermark(Timestamp) override {}
  void MarkIdle() override {}
  bool Backpressured() const override {
    ++backpressured_calls;
    return backpressured;
  }
  // As the source driver: a full run is handed on; RunFull at a limit
  // lowered below it (AskAtNextRecord) only restores the limit.
  void RunFull() override {
    ++runs_full;
    if (run.size() >= limit) {
      for (auto& r : run) sent.emplace_back(r.value.v, r.timestamp);
      run.clear();
    }
    run_limit_ = limit;
  }
  void AskAtNextRecord() { run_limit_ = 1; }

  const size_t limit;
  std::vector<internal::Record<Tracked>> run;
  std::vector<std::pair<int64_t, Timestamp>> sent;
  int virtual_calls = 0;
  int runs_full = 0;
  bool backpressured = false;
  mutable int backpressured_calls = 0;
};

// CollectInPlace answers whether to go on.  A record that only joined the
// run leaves downstream as it was, so the answer is true without asking
// Backpressured(); when the run is handed on, or without a run, it is
// !Backpressured().
TEST(SourceOutput, CollectInPlaceAsksBackpressuredOnlyWhenTheRunIsHandedOn) {
  RunOutput out(3);
  out.backpressured = true;  // seen at the next hand-on, not before
  EXPECT_TRUE(out.CollectInPlace([] { return Tracked(1); }));
  EXPECT_TRUE(out.CollectInPlace([] { return Tracked(2); }));
  EXPECT_EQ(out.backpressured_calls, 0);
  EXPECT_FALSE(out.CollectInPlace([] { return Tracked(3); })) << "the run of 3 was handed on";
  EXPECT_EQ(out.backpressured_calls, 1);
  EXPECT_EQ(out.runs_full, 1);
  out.backpressured = false;
  EXPECT_TRUE(out.CollectInPlace([] { return Tracked(4); }));
  EXPECT_TRUE(out.CollectInPlace([] { return Tracked(5); }));
  EXPECT_TRUE(out.CollectInPlace([] { return Tracked(6); }));
  EXPECT_EQ(out.backpressured_calls, 2);

  RunOutput direct(0);  // no run: asked at every record
  EXPECT_TRUE(direct.CollectInPlace([] { return Tracked(1); }));
  direct.backpressured = true;
  EXPECT_FALSE(direct.CollectInPlace([] { return Tracked(2); }));
  EXPECT_EQ(direct.backpressured_calls, 2);
  EXPECT_EQ(direct.sent.size(), 2u);
}

// CollectManyInPlace(n, make_at) is n calls of CollectInPlace that stop at
// the first false: the same records, hand-ons and questions, make_at(k) called
// once for each record made and never after the stop.
TEST(SourceOutput, CollectManyInPlaceIsCollectInPlaceUntilItReturnsFalse) {
  std::vector<size_t> asked;
  auto make_at = [&](size_t k) {
    asked.push_back(k);
    return Tracked(static_cast<int64_t>(k) * 10);
  };
  RunOutput out(3);
  out.backpressured = true;  // seen at the first hand-on
  EXPECT_EQ(out.CollectManyInPlace(7, make_at, 5), 3u);
  EXPECT_EQ(asked, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(out.backpressured_calls, 1);
  EXPECT_EQ(out.runs_full, 1);
  EXPECT_EQ(out.sent, (std::vector<std::pair<int64_t, Timestamp>>{{0, 5}, {10, 5}, {20, 5}}));
  out.backpressured = false;
  asked.clear();
  EXPECT_EQ(out.CollectManyInPlace(7, make_at), 7u);
  EXPECT_EQ(out.runs_full, 3) << "handed on at 3 and 6 more records";
  EXPECT_EQ(out.backpressured_calls, 3);
  ASSERT_EQ(out.run.size(), 1u) << "the seventh waits in the run";
  EXPECT_EQ(out.run[0].value.v, 60);
  EXPECT_EQ(out.run[0].timestamp, kNoTimestamp);
  EXPECT_EQ(out.virtual_calls, 0);

  RunOutput direct(0);  // no run: asked at every record
  direct.backpressured = true;
  EXPECT_EQ(direct.CollectManyInPlace(4, make_at, 1), 1u);
  EXPECT_EQ(direct.virtual_calls, 1);
  direct.backpressured = false;
  EXPECT_EQ(direct.CollectManyInPlace(4, make_at, 1), 4u);
  EXPECT_EQ(direct.backpressured_calls, 5);
  EXPECT_EQ(direct.sent.size(), 5u);
  EXPECT_EQ(direct.CollectManyInPlace(0, make_at), 0u);
}

// A limit lowered below the run's size (the driver asks at the next record
// after a watermark sent the run on): the next record joins the run and the
// question is asked at once, as CollectInPlace asks it.
TEST(SourceOutput, CollectManyInPlaceAsksAtTheNextRecordAfterTheLimitIsLowered) {
  auto make_at = [](size_t k) { return Tracked(static_cast<int64_t>(k)); };
  RunOutput out(4);
  EXPECT_EQ(out.CollectManyInPlace(2, make_at), 2u);
  EXPECT_EQ(out.backpressured_calls, 0);
  out.AskAtNextRecord();
  out.backpressured = true;
  EXPECT_EQ(out.CollectManyInPlace(5, make_at), 1u) << "stopped after the record that asked";
  EXPECT_EQ(out.backpressured_calls, 1);
  EXPECT_EQ(out.run.size(), 3u) << "not handed on: the run is not full";
  EXPECT_TRUE(out.sent.empty());
  out.backpressured = false;
  EXPECT_EQ(out.CollectManyInPlace(5, make_at), 5u);
  EXPECT_EQ(out.sent.size(), 8u) << "the run of 4 filled twice";
  EXPECT_TRUE(out.run.empty());
}

// from_generator's and from_collection's sources end their poll at the first
// hand-on of the run that finds back-pressure, and the next poll goes on
// from the record after it: none is lost or repeated.
TEST(SourceOutput, SourcesEndThePollWhenAHandedOnRunFindsBackPressure) {
  const SourceContext ctx{0, 1, nullptr, nullptr};
  auto make = [](int64_t i) { return Tracked(i); };
  GeneratorSource<Tracked, decltype(make)> generator(make, 100, 0);
  std::vector<Tracked> elements;
  for (int64_t i = 0; i < 100; ++i) elements.emplace_back(i);
  CollectionSource<Tracked> collection(
      std::make_shared<const std::vector<Tracked>>(std::move(elements)));
  for (Source<Tracked>* source : std::initializer_list<Source<Tracked>*>{&generator, &collection}) {
    source->Open(ctx);
    RunOutput out(4);
    out.backpressured = true;
    EXPECT_EQ(source->Poll(out, 50), PollStatus::kMoreAvailable);
    ASSERT_EQ(out.sent.size(), 4u) << "stopped at the first run of 4, not at the budget of 50";
    out.backpressured = false;
    EXPECT_EQ(source->Poll(out, 50), PollStatus::kMoreAvailable);
    ASSERT_EQ(out.sent.size(), 52u) << "48 handed on, 2 in the open run";
    for (size_t i = 0; i < out.sent.size(); ++i) EXPECT_EQ(out.sent[i].first, int64_t(i));
    EXPECT_EQ(out.run.size(), 2u);
    EXPECT_EQ(out.run[0].value.v, 52);
  }
}

// from_generator's source asks for the indices left at once: its own
// (subtask + k * parallelism) below the count, none past it, and no overflow
// for an endless count (INT64_MAX) at parallelism 2.
TEST(SourceOutput, AGeneratorPollsItsOwnIndicesUpToTheCount) {
  auto make = [](int64_t i) { return Tracked(i); };
  for (int64_t count : {int64_t{7}, std::numeric_limits<int64_t>::max()}) {
    for (int subtask : {0, 1}) {
      SCOPED_TRACE(testing::Message() << "count " << count << ", subtask " << subtask);
      GeneratorSource<Tracked, decltype(make)> generator(make, count, 0);
      generator.Open(SourceContext{subtask, 2, nullptr, nullptr});
      RunOutput out(4);
      const PollStatus status = generator.Poll(out, 10);
      std::vector<int64_t> got;  // handed on, then what waits in the run
      for (const auto& [v, ts] : out.sent) got.push_back(v);
      for (const auto& r : out.run) got.push_back(r.value.v);
      std::vector<int64_t> expected;
      for (int64_t i = subtask; i < std::min<int64_t>(count, subtask + 20); i += 2)
        expected.push_back(i);
      EXPECT_EQ(got, expected);
      EXPECT_EQ(status, count == 7 ? PollStatus::kEndOfInput : PollStatus::kMoreAvailable);
    }
  }
}

TEST(SourceOutput, CollectInPlaceMakesTheValueInTheRunAndHandsTheRunOnWhenFull) {
  Tracked::copies = Tracked::moves = 0;
  RunOutput out(3);
  for (int64_t i = 0; i < 7; ++i) out.CollectInPlace([&] { return Tracked(i * 10); }, 100 + i);
  EXPECT_EQ(out.virtual_calls, 0);
  EXPECT_EQ(out.runs_full, 2) << "handed on at 3 and 6 records";
  ASSERT_EQ(out.run.size(), 1u);
  EXPECT_EQ(out.run[0].value.v, 60);
  EXPECT_EQ(out.run[0].timestamp, 106);
  ASSERT_EQ(out.sent.size(), 6u);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(out.sent[i].first, i * 10);
    EXPECT_EQ(out.sent[i].second, 100 + i);
  }
  EXPECT_EQ(Tracked::copies, 0);
#if defined(__cpp_aggregate_paren_init) && __cpp_aggregate_paren_init >= 201902L
  EXPECT_EQ(Tracked::moves, 0) << "made in its slot, never moved";
#else
  EXPECT_LE(Tracked::moves, 7) << "at most one move each without paren aggregate init";
#endif
}

// A value type whose constructor takes anything (std::any) must hold make()'s
// result, not the converter that carries it to the slot.
TEST(SourceOutput, AValueThatTakesAnyArgumentHoldsWhatMakeReturned) {
  std::vector<internal::Record<std::any>> run;
  auto make = [] { return std::any(int64_t{42}); };
  internal::AppendMadeRecord(run, make, 7);
  ASSERT_EQ(run.size(), 1u);
  ASSERT_EQ(run[0].value.type(), typeid(int64_t));
  EXPECT_EQ(std::any_cast<int64_t>(run[0].value), 42);
  EXPECT_EQ(run[0].timestamp, 7);
}

TEST(SourceOutput, WithoutARunCollectInPlaceIsCollectWithTimestamp) {
  RunOutput out(0);
  out.CollectInPlace([] { return Tracked(5); }, 50);
  out.CollectInPlace([] { return Tracked(6); });
  EXPECT_EQ(out.virtual_calls, 2);
  EXPECT_EQ(out.runs_full, 0);
  EXPECT_EQ(out.sent, (std::vector<std::pair<int64_t, Timestamp>>{{5, 50}, {6, kNoTimestamp}}));
}

// Emits 0 .. n-1 with timestamp 3 * i, each through one of four paths in a
// fixed pattern: CollectInPlace, Collect, a split's output and
// CollectInPlace again right after a split's record, with the source's own
// watermark every 97 records.  Polls stop at `budget`, so runs end at poll
// boundaries as well as at full runs.
struct MixedSource final : Source<int64_t> {
  int64_t n;
  int64_t i = 0;
  explicit MixedSource(int64_t count) : n(count) {}
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    for (size_t k = 0; k < budget && i < n; ++k, ++i) {
      const int64_t v = i;
      switch (i % 13) {
        case 4:
          out.CollectWithTimestamp(int64_t{v}, 3 * v);
          break;
        case 7:
        case 8:
          out.ForSplit(i % 2 == 0 ? "even" : "odd").CollectWithTimestamp(int64_t{v}, 3 * v);
          break;
        default:
          out.CollectInPlace([v] { return v; }, 3 * v);
      }
      if (i % 97 == 96) out.EmitWatermark(3 * v);
    }
    return i < n ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
};

TEST(SourceOutput, InAJobEveryPathKeepsTheOrderTheTimestampsAndTheCount) {
  constexpr int64_t kCount = 5000;  // about 20 runs of the driver's 256
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto out =
      env.add_source<int64_t>(
             [] { return std::unique_ptr<Source<int64_t>>(new MixedSource(kCount)); }, "mixed")
          .map([](int64_t v) { return v; })
          .collect();
  JobResult r = env.execute("mixed");
  ASSERT_TRUE(r.ok()) << r.status;
  ASSERT_EQ(out->items().size(), static_cast<size_t>(kCount));
  for (int64_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(out->items()[i].value, i) << "order at " << i;
    ASSERT_EQ(out->items()[i].timestamp, 3 * i) << "timestamp at " << i;
  }
  int64_t source_records = 0;
  for (const SubtaskMetricsSnapshot& m : r.metrics)
    if (m.task_name.find("mixed") != std::string::npos) source_records += m.records_in;
  EXPECT_EQ(source_records, kCount) << "each record counted once, whichever path it took";
}

// 2 000 records made in place in one poll, more than a run holds.
struct OnePollSource final : Source<int64_t> {
  static constexpr int64_t kCount = 2000;
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    for (int64_t i = 0; i < kCount; ++i) out.CollectInPlace([i] { return i; }, i);
    return PollStatus::kEndOfInput;
  }
};

// The operator chained to the source: the sizes of the runs it is handed.
class RunSizes final : public OneInputOperator<int64_t, int64_t> {
 public:
  explicit RunSizes(std::shared_ptr<std::vector<size_t>> sizes) : sizes_(std::move(sizes)) {}
  void ProcessBatch(std::span<internal::Record<int64_t>> records) override {
    sizes_->push_back(records.size());
    OneInputOperator<int64_t, int64_t>::ProcessBatch(records);
  }
  void ProcessElement(int64_t&& v, Timestamp ts) override { output().Collect(std::move(v), ts); }

 private:
  std::shared_ptr<std::vector<size_t>> sizes_;
};

// A full run goes down the chain at once, within a poll: the chain (and a
// full channel's back-pressure) sees the records 256 at a time, not a
// poll's worth at its end.
TEST(SourceOutput, AFullRunGoesDownTheChainWithinThePoll) {
  auto sizes = std::make_shared<std::vector<size_t>>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto out =
      env.add_source<int64_t>([] { return std::unique_ptr<Source<int64_t>>(new OnePollSource()); },
                              "one poll")
          .transform<int64_t>("run sizes",
                              [sizes]() -> std::unique_ptr<OneInputOperator<int64_t, int64_t>> {
                                return std::make_unique<RunSizes>(sizes);
                              })
          .collect();
  JobResult r = env.execute("one poll");
  ASSERT_TRUE(r.ok()) << r.status;
  ASSERT_EQ(out->items().size(), static_cast<size_t>(OnePollSource::kCount));
  ASSERT_FALSE(sizes->empty());
  size_t total = 0;
  for (size_t n : *sizes) {
    EXPECT_LE(n, 256u);
    total += n;
  }
  EXPECT_EQ(total, static_cast<size_t>(OnePollSource::kCount));
  EXPECT_GE(sizes->size(), 8u);
}

// A source that emits its own watermark every 10 records sends its run on
// each time, so its runs never fill.  The record after each watermark asks
// Backpressured(): a cancellation stops the poll within 10 records, not at
// the end of the poll's budget (the batch size, 100 000 here).  The head of
// the chain is a network writer (rebalance), which does not look at the
// cancellation itself.
struct WatermarkEvery10Source final : Source<int64_t> {
  static constexpr int64_t kCancelAt = 105;
  std::shared_future<JobClient*> client;
  std::shared_ptr<std::atomic<int64_t>> made_after_cancel;
  int64_t i = 0;
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    for (size_t n = 0; n < budget; ++n) {
      const int64_t v = i++;
      if (v == kCancelAt) client.get()->cancel();
      if (v > kCancelAt) made_after_cancel->fetch_add(1);
      if (!out.CollectInPlace([v] { return v; }, v)) return PollStatus::kMoreAvailable;
      if (v % 10 == 9) out.EmitWatermark(v);
    }
    return PollStatus::kMoreAvailable;  // unbounded: only the cancellation ends it
  }
};

TEST(SourceOutput, ACancellationIsSeenAtTheRecordAfterTheSourcesOwnWatermark) {
  std::promise<JobClient*> client_promise;
  std::shared_future<JobClient*> client = client_promise.get_future().share();
  auto made_after_cancel = std::make_shared<std::atomic<int64_t>>(0);
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_batch_size(100000);
  env.add_source<int64_t>(
         [client, made_after_cancel] {
           auto s = std::make_unique<WatermarkEvery10Source>();
           s->client = client;
           s->made_after_cancel = made_after_cancel;
           return std::unique_ptr<Source<int64_t>>(std::move(s));
         },
         "watermark every 10")
      .rebalance()
      .add_sink([](int64_t&&) {});
  JobClient running = env.execute_async("cancelled");
  client_promise.set_value(&running);
  running.wait();
  // Records 106-109, then 110 finds the cancellation (the watermark at 109
  // sent the run on).  Before, the poll went on to its budget.
  EXPECT_LE(made_after_cancel->load(), 10);
}

// A slow split ("slow", 10 ms a record) and the source's main output (1 s a
// record, far ahead), one record each in turn, with a watermark generator
// per split.  A main record made in place right after a split's record
// must count for the main output: counted for "slow", it would take slow's
// watermark far ahead and make slow's next records late.
struct SlowSplitAndMain final : Source<int64_t> {
  static constexpr int64_t kEach = 600;
  int64_t i = 0;
  PollStatus Poll(SourceOutput<int64_t>& out, size_t budget) override {
    for (size_t k = 0; k < budget && i < kEach; ++k, ++i) {
      out.ForSplit("slow").CollectWithTimestamp(int64_t{i}, 10 * i);
      out.CollectInPlace([v = i] { return 1'000'000 + v; }, 100'000 + 1000 * i);
    }
    return i < kEach ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
};

TEST(SourceOutput, ARecordMadeInPlaceAfterASplitsRecordCountsForTheMainOutput) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1).set_auto_watermark_interval(Duration(0));
  auto strategy = WatermarkStrategy<int64_t>::for_bounded_out_of_orderness(Duration(0))
                      .with_periodic_emit_per_record();
  OutputTag<int64_t> late("late");
  auto sums = env.from_source<int64_t>(
                     [] { return std::unique_ptr<Source<int64_t>>(new SlowSplitAndMain()); },
                     strategy, "slow and main")
                  .key_by([](const int64_t& v) { return v >= 1'000'000 ? 1 : 0; })
                  .window(TumblingEventTimeWindows::of(Duration(1000)))
                  .side_output_late_data(late)
                  .reduce([](int64_t a, int64_t b) { return a + b; });
  auto late_records = sums.get_side_output(late).collect();
  auto results = sums.collect();
  JobResult r = env.execute("slow and main");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_TRUE(late_records->values().empty())
      << late_records->values().size() << " late, the first " << late_records->values().front();
  int64_t total = 0;
  for (int64_t v : results->values()) total += v;
  const int64_t n = SlowSplitAndMain::kEach;
  EXPECT_EQ(total, n * (n - 1) / 2 + n * 1'000'000 + n * (n - 1) / 2);
}

}  // namespace
}  // namespace tidemark
