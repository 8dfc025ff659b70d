// A user's program as the README recommends it: `#include <tidemark/tidemark.h>` and
// `using namespace tidemark;` at file scope, with the user's own types named
// like tidemark's internals (Counter, Record, Batch, Channel, Task, ...) and
// used unqualified.  That this file compiles is the test: before the
// internals moved to tidemark::internal, every unqualified use below was
// ambiguous.  The job run checks the names resolve to the user's types.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tidemark/tidemark.h"

using namespace tidemark;

// Named like runtime/core/stream_element.h, runtime/core/metrics.h, runtime/io/detail/channel.h,
// runtime/core/detail/task.h, runtime/task/detail/stream_task.h, runtime/io/detail/input_gate.h ...
struct Record {
  std::string key;
  int64_t value = 0;
  Timestamp ts = 0;
};
struct Batch {
  std::vector<Record> records;
};
struct Control {
  bool stop = false;
};
struct Counter {
  int64_t n = 0;
  void Inc() { ++n; }
};
struct Channel {
  std::string name;
};
struct Task {
  int id = 0;
};
struct StreamTask {};
struct InputGate {};
struct Dispatcher {};
struct JobExecution {};
struct JobConfig {};
struct StreamNode {};
struct EdgeSpec {};
struct PhysicalPlan {};
struct Partitioner {};
struct ShipStrategy {};
struct MapOperator {};
struct SinkOperator {};
struct StateTable {};
struct VoidNamespace {};
struct TimerQueue {};
struct WakeupTimer {};
struct OperatorError {};
struct CallableArgs {};
struct MergingWindowSet {};
struct WindowOperator {};
struct PausableRelativeClock {};
// Functions too: runtime/core/metrics.h had Snapshot(), runtime/core/format.h Format().
int Snapshot(const Counter& c) { return static_cast<int>(c.n); }
std::string Format(const Record& r) { return r.key + "=" + std::to_string(r.value); }

TEST(UserNamespace, UserTypesNamedLikeInternalsResolveToTheUsers) {
  // Each user type used unqualified, as a user would.
  Batch batch;
  for (int i = 0; i < 6; ++i)
    batch.records.push_back(Record{i % 2 == 0 ? "even" : "odd", i, Timestamp{i}});
  Counter seen;
  Channel channel{"in"};
  Task task{7};
  Control control;
  [[maybe_unused]] StreamTask st;
  [[maybe_unused]] InputGate gate;
  [[maybe_unused]] Dispatcher dispatcher;
  [[maybe_unused]] JobExecution execution;
  [[maybe_unused]] JobConfig config;
  [[maybe_unused]] StreamNode node;
  [[maybe_unused]] EdgeSpec edge;
  [[maybe_unused]] PhysicalPlan plan;
  [[maybe_unused]] Partitioner partitioner;
  [[maybe_unused]] ShipStrategy strategy;
  [[maybe_unused]] MapOperator map_op;
  [[maybe_unused]] SinkOperator sink_op;
  [[maybe_unused]] StateTable table;
  [[maybe_unused]] VoidNamespace ns;
  [[maybe_unused]] TimerQueue timers;
  [[maybe_unused]] WakeupTimer wakeup;
  [[maybe_unused]] OperatorError error;
  [[maybe_unused]] CallableArgs args;
  [[maybe_unused]] MergingWindowSet windows;
  [[maybe_unused]] WindowOperator window_op;
  [[maybe_unused]] PausableRelativeClock clock;
  EXPECT_EQ(channel.name, "in");
  EXPECT_EQ(task.id, 7);
  EXPECT_FALSE(control.stop);

  // A small keyed, windowed job over the user's Record.
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto sums =
      env.from_collection(batch.records)
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<Record>::for_monotonous_timestamps().with_timestamp_assigner(
                  [](const Record& r, Timestamp) { return r.ts; }))
          .map([](Record r) {
            r.value *= 10;
            return r;
          })
          .key_by([](const Record& r) { return r.key; })
          .window(TumblingEventTimeWindows::of(Duration(100)))
          .reduce([](Record a, const Record& b) {
            a.value += b.value;
            return a;
          })
          .collect();
  JobResult result = env.execute("user namespace");
  ASSERT_TRUE(result.ok()) << result.status;

  std::vector<std::string> lines;
  for (const Record& r : sums->values()) {
    seen.Inc();
    lines.push_back(Format(r));
  }
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"even=60", "odd=90"}));
  EXPECT_EQ(Snapshot(seen), 2);
}
