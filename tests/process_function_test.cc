// DataStream::process on a stream that is not keyed (Flink's
// ProcessFunction): records, timestamps, the operator's watermark, side
// outputs of other types through the context (splitting a stream), open and
// close once per subtask.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

TEST(ProcessFunction, SplitsAStreamIntoTheMainOutputAndSideOutputsOfOtherTypes) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  OutputTag<int64_t> odd("odd");
  OutputTag<std::string> negative("negative");
  std::vector<int64_t> in;
  for (int64_t i = -5; i < 20; ++i) in.push_back(i);
  auto even = env.from_collection(in).rebalance().process(
      [odd, negative](const int64_t& v, ProcessContext& ctx, Collector<int64_t>& out) {
        if (v < 0) {
          ctx.output(negative, "neg:" + std::to_string(v));
        } else if (v % 2 != 0) {
          ctx.output(odd, v);
        } else {
          out.collect(v * 10);
        }
      });
  auto main_out = even.collect();
  auto odd_out = even.get_side_output(odd).collect();
  auto neg_out = even.get_side_output(negative).collect();
  JobResult r = env.execute("split");
  ASSERT_TRUE(r.ok()) << r.status;
  auto values = [](const auto& results) {
    using V = std::decay_t<decltype(results->items()[0].value)>;
    std::vector<V> v;
    for (const auto& item : results->items()) v.push_back(item.value);
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(values(main_out), (std::vector<int64_t>{0, 20, 40, 60, 80, 100, 120, 140, 160, 180}));
  EXPECT_EQ(values(odd_out), (std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}));
  EXPECT_EQ(values(neg_out),
            (std::vector<std::string>{"neg:-1", "neg:-2", "neg:-3", "neg:-4", "neg:-5"}));
}

// One side output id, one type (Flink's getSideOutput refuses a second
// type; a record of another type fails the job instead of being read as the
// side output's type).
TEST(ProcessFunction, ASideOutputIdWithTwoTypesIsRefused) {
  const OutputTag<std::string> as_string("x");
  const OutputTag<int64_t> as_int("x");
  {
    StreamExecutionEnvironment env;
    auto o = env.from_collection(std::vector<int64_t>{1, 2, 3})
                 .process([as_string](const int64_t& v, ProcessContext& ctx, Collector<int64_t>&) {
                   ctx.output(as_string, std::string("s"));
                 });
    o.get_side_output(as_string).collect();
    try {
      o.get_side_output(as_int);
      ADD_FAILURE() << "a second type for side output x was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(std::string(e.what()),
                  ::testing::HasSubstr("a side output with this id was already requested"));
    }
  }
  StreamExecutionEnvironment env;
  auto o = env.from_collection(std::vector<int64_t>{1, 2, 3})
               .process([as_int](const int64_t& v, ProcessContext& ctx, Collector<int64_t>& out) {
                 ctx.output(as_int, v);
                 out.collect(v);
               });
  auto strings = o.get_side_output(as_string).collect();
  JobResult r = env.execute("two types");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("side output 'x': a record of another type"));
  EXPECT_TRUE(strings->items().empty());
}

// The same for the late side outputs of a window and of an interval join,
// whose types are known when the job is built: a get_side_output with
// another type is refused at once.  The window's was read as that type:
// a sink of int64_t printed the late record's bytes as a number.
TEST(ProcessFunction, ALateSideOutputReadAsAnotherTypeIsRefused) {
  struct Ev {
    int64_t key;
    int64_t ts;
  };
  const OutputTag<Ev> late("late");
  const OutputTag<int64_t> late_as_int("late");
  StreamExecutionEnvironment env;
  auto events = env.from_collection(std::vector<Ev>{{1, 5}, {1, 1}})
                    .assign_timestamps_and_watermarks(
                        WatermarkStrategy<Ev>::for_monotonous_timestamps().with_timestamp_assigner(
                            [](const Ev& e, Timestamp) { return e.ts; }));
  auto sums = events.key_by([](const Ev& e) { return e.key; })
                  .window(TumblingEventTimeWindows::of(Duration(2)))
                  .side_output_late_data(late)
                  .reduce([](const Ev& a, const Ev&) { return a; });
  EXPECT_NO_THROW(sums.get_side_output(late));
  try {
    sums.get_side_output(late_as_int);
    ADD_FAILURE() << "the window's late side output was read as int64_t";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(std::string(e.what()), ::testing::HasSubstr("side output ids must be unique"));
  }
  auto joined =
      events.key_by([](const Ev& e) { return e.key; })
          .interval_join(events.key_by([](const Ev& e) { return e.key; }))
          .between(Duration(-1), Duration(1))
          .side_output_left_late_data(late)
          .process([](const Ev& a, const Ev&, Collector<int64_t>& out) { out.collect(a.ts); });
  EXPECT_NO_THROW(joined.get_side_output(late));
  EXPECT_THROW(joined.get_side_output(late_as_int), std::invalid_argument);
}

// from_generator without its record type: taken from f(index)'s result.
TEST(ProcessFunction, FromGeneratorTakesTheRecordTypeFromTheFunction) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto doubled = env.from_generator([](int64_t i) { return i * 2; }, 5);
  static_assert(std::is_same_v<decltype(doubled), DataStream<int64_t>>);
  auto out = doubled.collect();
  // A function object's own member named close (here a number) is its own:
  // not taken for the lifecycle's close().
  struct Above {
    int64_t close = 0;
    bool operator()(const int64_t& v) const { return v > close; }
  };
  auto above = doubled.filter(Above{4}).collect();
  ASSERT_TRUE(env.execute("generator").ok());
  std::vector<int64_t> got = out->values();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{0, 2, 4, 6, 8}));
  got = above->values();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int64_t>{6, 8}));
  // A second execute would run the job again: refused.
  JobResult again = env.execute("again");
  EXPECT_EQ(again.status.code(), absl::StatusCode::kFailedPrecondition) << again.status;
  EXPECT_EQ(out->values().size(), 5u);
}

// An environment with nothing in it is refused, as Flink refuses to run
// an empty topology (it ran and said OK).
TEST(ProcessFunction, AnEmptyJobIsRefused) {
  StreamExecutionEnvironment env;
  JobResult r = env.execute("empty");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
  EXPECT_NE(std::string(r.status.message()).find("the job has no operators"), std::string::npos)
      << r.status;
}

// ctx.output(tag, value) converts its value to the tag's type (a string
// literal to a std::string tag failed to deduce).
TEST(ProcessFunction, ASideOutputTakesAValueConvertibleToItsType) {
  const OutputTag<std::string> notes("notes");
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  auto main = env.from_elements<int64_t>(1, 2).process(
      [&notes](const int64_t& v, ProcessContext& ctx, Collector<int64_t>& out) {
        ctx.output(notes, "seen");
        out.collect(v);
      });
  auto side = main.get_side_output(notes).collect();
  ASSERT_TRUE(env.execute("literal").ok());
  EXPECT_EQ(side->values(), (std::vector<std::string>{"seen", "seen"}));
}

struct Event {
  int64_t ts;
};

// A ProcessFunction class: sees each record's timestamp and the watermark
// the operator had when the record came, opens and closes once per subtask.
struct Stamp : ProcessFunction<Event, std::string> {
  std::atomic<int>* opened;
  std::atomic<int>* closed;
  int subtask = -1;
  Stamp(std::atomic<int>* o, std::atomic<int>* c) : opened(o), closed(c) {}
  void open(const RuntimeContext& ctx) override {
    subtask = ctx.subtask_index();
    opened->fetch_add(1);
  }
  void process_element(const Event& e, Context& ctx, Collector<std::string>& out) override {
    out.collect(std::to_string(ctx.timestamp()) + "@" + std::to_string(ctx.current_watermark()) +
                "/" + std::to_string(subtask) + "/" + std::to_string(ctx.parallelism()) + " " +
                std::to_string(e.ts));
  }
  void close() override { closed->fetch_add(1); }
};

TEST(ProcessFunction, SeesTimestampsAndTheWatermarkAndOpensAndClosesOncePerSubtask) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  std::atomic<int> opened{0}, closed{0};
  auto out = env.from_collection(std::vector<Event>{{1000}, {5000}, {7000}})
                 .assign_timestamps_and_watermarks(
                     WatermarkStrategy<Event>::for_monotonous_timestamps()
                         .with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; })
                         .with_periodic_emit_per_record())
                 .process(Stamp(&opened, &closed))
                 .collect();
  JobResult r = env.execute("stamp");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::string> got;
  for (const auto& item : out->items()) got.push_back(item.value);
  // Monotonous, a watermark after every record: ts - 1 of the one before.
  EXPECT_EQ(got, (std::vector<std::string>{"1000@" + std::to_string(kMinTimestamp) + "/0/1 1000",
                                           "5000@999/0/1 5000", "7000@4999/0/1 7000"}));
  EXPECT_EQ(opened.load(), 1);
  EXPECT_EQ(closed.load(), 1);
  // The output keeps the record's timestamp.
  EXPECT_EQ(out->items()[1].timestamp, 5000);
}

}  // namespace
}  // namespace tidemark
