// DataStream::uid (Flink's uid): unique in a job, and a checkpoint restores
// a task whose operators all have uids by those uids, so the job around it
// may change (tasks added, moved to other indices, renamed).
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using KV = std::pair<int64_t, int64_t>;

TEST(Uid, DuplicateUidsAreRefusedWhenTheJobIsBuilt) {
  StreamExecutionEnvironment env;
  auto s = env.from_elements<int64_t>(1, 2, 3).uid("src");
  s.map([](const int64_t& v) { return v + 1; }).name("Inc").uid("same").add_sink([](int64_t&&) {});
  s.map([](const int64_t& v) { return v * 2; }).name("Twice").uid("same").add_sink([](int64_t&&) {
  });
  JobResult r = env.execute("dup");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("uid 'same' is set on both 'Inc' and 'Twice'"),
            std::string::npos)
      << r.status;
  EXPECT_THROW(s.uid(""), std::invalid_argument);
  EXPECT_THROW(s.uid("a,b"), std::invalid_argument);
  // Two operators of one name: told apart by their place in the job.
  StreamExecutionEnvironment env2;
  auto s2 = env2.from_elements<int64_t>(1, 2, 3);
  s2.map([](const int64_t& v) { return v + 1; }).uid("m").add_sink([](int64_t&&) {});
  s2.map([](const int64_t& v) { return v * 2; }).uid("m").add_sink([](int64_t&&) {});
  JobResult r2 = env2.execute("dup");
  ASSERT_FALSE(r2.ok());
  EXPECT_TRUE(std::regex_search(
      std::string(r2.status.message()),
      std::regex("uid 'm' is set on both 'Map' \\(operator [0-9]+ of the job\\) and 'Map' "
                 "\\(operator [0-9]+\\)")))
      << r2.status;
}

struct Sums {
  std::mutex mu;
  std::vector<KV> out;
};

// source(s) -> [map] -> key_by -> rolling sum (uid "sum") -> sink, every
// operator its own task.
JobResult RunJob(const std::string& chk, bool restore, const std::vector<KV>& a,
                 const std::vector<KV>* b, Sums* sums) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.disable_operator_chaining();
  env.enable_checkpointing(Duration(0), chk);
  if (restore) env.restore_from("latest");
  DataStream<KV> in = env.from_collection(a).name("A").uid("source-a");
  if (b != nullptr) {
    // The changed job: a second source and a map before the sum, which move
    // the sum's task to another index.
    in = in.union_with(env.from_collection(*b).name("B").uid("source-b"))
             .map([](const KV& kv) { return kv; })
             .name("Pass")
             .uid("pass");
  }
  in.key_by([](const KV& kv) { return kv.first; })
      .reduce([](const KV& x, const KV& y) {
        return KV{x.first, x.second + y.second};
      })
      .name(b != nullptr ? "Renamed sum" : "Sum")
      .uid("sum")
      .add_sink(
          [sums](KV&& kv) {
            std::lock_guard<std::mutex> lock(sums->mu);
            sums->out.push_back(kv);
          },
          "Sink")
      .uid("sink");
  return env.execute(restore ? "after" : "before");
}

TEST(Uid, AChangedJobRestoresTheOperatorWithTheSameUid) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  std::vector<KV> a, b;
  for (int64_t i = 0; i < 40; ++i) a.push_back({i % 4, i});
  for (int64_t i = 0; i < 12; ++i) b.push_back({i % 3, 100 + i});
  Sums before;
  JobResult r1 = RunJob(chk, false, a, nullptr, &before);
  ASSERT_TRUE(r1.ok()) << r1.status;
  ASSERT_GE(r1.checkpoints.completed, 1);  // the final one

  Sums after;
  JobResult r2 = RunJob(chk, true, a, &b, &after);
  ASSERT_TRUE(r2.ok()) << r2.status;
  EXPECT_GE(r2.checkpoints.restored_id, 1);
  // Source A was restored at its end: it sends nothing again.  B's records
  // reach sums that start from A's totals (the restored state).
  std::map<int64_t, int64_t> expected;
  for (const KV& kv : a) expected[kv.first] += kv.second;
  std::map<int64_t, int64_t> last;
  for (const KV& kv : b) expected[kv.first] += kv.second;
  ASSERT_EQ(after.out.size(), b.size());
  for (const KV& kv : after.out) last[kv.first] = std::max(last[kv.first], kv.second);
  for (const auto& [k, v] : last) EXPECT_EQ(v, expected[k]) << "key " << k;
  EXPECT_EQ(last.size(), 3u);
}

TEST(Uid, WithoutUidsTheChangedJobIsRefused) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  auto run = [&](bool restore, bool extra) {
    StreamExecutionEnvironment env;
    env.disable_operator_chaining();
    env.enable_checkpointing(Duration(0), chk);
    if (restore) env.restore_from("latest");
    DataStream<int64_t> s = env.from_elements<int64_t>(1, 2, 3);
    if (extra) s = s.map([](const int64_t& v) { return v; });
    s.add_sink([](int64_t&&) {});
    return env.execute("job");
  };
  ASSERT_TRUE(run(false, false).ok());
  JobResult r = run(true, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("it was taken of another job"), std::string::npos)
      << r.status;
}

TEST(Uid, StateOfAnOperatorMissingFromTheJobIsNotDroppedSilently) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  auto run = [&](bool restore, const std::string& sum_uid, const std::string& sink_uid) {
    StreamExecutionEnvironment env;
    env.disable_operator_chaining();
    env.enable_checkpointing(Duration(0), chk);
    if (restore) env.restore_from("latest");
    env.from_collection(std::vector<KV>{{1, 2}, {1, 3}})
        .uid("src")
        .key_by([](const KV& kv) { return kv.first; })
        .reduce([](const KV& x, const KV& y) {
          return KV{x.first, x.second + y.second};
        })
        .uid(sum_uid)
        .add_sink([](KV&&) {})
        .uid(sink_uid);
    return env.execute("job");
  };
  ASSERT_TRUE(run(false, "sum-1", "sink-1").ok());
  // A stateless operator (the sink) may change its uid: it had no state.
  JobResult ok = run(true, "sum-1", "sink-2");
  EXPECT_TRUE(ok.ok()) << ok.status;
  // The sum's state has nowhere to go.
  JobResult r = run(true, "sum-2", "sink-2");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message()).find("(uids sum-1) is not in the job"),
            std::string::npos)
      << r.status;
}

// State is matched per task (chain): an operator added to a chain changes
// its uid list.  The old task's state is refused, naming where its
// operators are now, even with --allow-non-restored-state, which dropped it
// silently although its operators were in the job (a review found the counts
// restarted from zero).
TEST(Uid, AChainChangedAroundItsOperatorsIsRefusedEvenWhenStateMayBeLeftOut) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  auto run = [&](bool restore, bool extra_map, bool allow) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), chk);
    if (restore) env.restore_from("latest");
    if (allow) env.set_allow_non_restored_state();
    DataStream<KV> sums = env.from_collection(std::vector<KV>{{1, 2}, {1, 3}})
                              .uid("src")
                              .key_by([](const KV& kv) { return kv.first; })
                              .reduce([](const KV& x, const KV& y) {
                                return KV{x.first, x.second + y.second};
                              })
                              .uid("sum");
    if (extra_map) sums = sums.map([](const KV& kv) { return kv; }).uid("m2");
    sums.add_sink([](KV&&) {}).uid("sink");
    return env.execute("job");
  };
  ASSERT_TRUE(run(false, false, false).ok());
  for (bool allow : {false, true}) {
    JobResult r = run(true, true, allow);
    ASSERT_FALSE(r.ok()) << "allow " << allow;
    EXPECT_NE(std::string(r.status.message())
                  .find("(uids sum,sink) is chained otherwise in the job: its operators with "
                        "state (sum) are now in"),
              std::string::npos)
        << r.status;
    EXPECT_NE(std::string(r.status.message()).find("(uids sum,m2,sink)"), std::string::npos)
        << r.status;
  }
  // The job as it was restores.
  JobResult same = run(true, false, false);
  EXPECT_TRUE(same.ok()) << same.status;
}

// The stateful operator of a chain removed, its stateless sink kept with its
// uid: the old task's state is the removed operator's, which
// --allow-non-restored-state drops as Flink does (the sink still in the job
// loses nothing), and without it the restore is refused.
TEST(Uid, AStatelessOperatorLeftFromAnOldChainDoesNotHoldItsStateBack) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  auto run = [&](bool restore, bool without_sum, bool allow) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), chk);
    if (restore) env.restore_from("latest");
    if (allow) env.set_allow_non_restored_state();
    DataStream<KV> in = env.from_collection(std::vector<KV>{{1, 2}, {1, 3}}).uid("src");
    DataStream<KV> out = without_sum
                             ? in.rebalance().map([](const KV& kv) { return kv; }).uid("pass")
                             : in.key_by([](const KV& kv) { return kv.first; })
                                   .reduce([](const KV& x, const KV& y) {
                                     return KV{x.first, x.second + y.second};
                                   })
                                   .uid("sum");
    out.add_sink([](KV&&) {}).uid("sink");
    return env.execute("job");
  };
  ASSERT_TRUE(run(false, false, false).ok());
  JobResult refused = run(true, true, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(std::string(refused.status.message()).find("(uids sum,sink) is not in the job"),
            std::string::npos)
      << refused.status;
  JobResult allowed = run(true, true, true);
  EXPECT_TRUE(allowed.ok()) << allowed.status;
}

// A state read back as another type is refused, naming both types (Flink's
// StateMigrationException); its bytes were decoded as the new type (a count
// of 1220 came back as the double 6.0276e-321).
template <typename V>
struct CountAs : KeyedProcessFunction<int64_t, KV, std::string> {
  void process_element(const KV& kv, Context& ctx, Collector<std::string>& out) override {
    auto count = ctx.get_state<V>("count");
    count.update(count.value_or(V{}) + V{1});
    out.collect(std::to_string(kv.first));
  }
};
template <typename V>
JobResult RunCount(const std::string& chk, bool restore) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  env.enable_checkpointing(Duration(0), chk);
  if (restore) env.restore_from("latest");
  DataStream<KV> in = env.from_collection(std::vector<KV>{{1, 1}, {2, 1}, {1, 1}}).uid("src");
  // Restored at its end, that source sends nothing again: records that
  // read the state come from a second one.
  if (restore) in = in.union_with(env.from_collection(std::vector<KV>{{1, 1}}).uid("src2"));
  in.key_by([](const KV& kv) { return kv.first; })
      .process(CountAs<V>())
      .uid("count")
      .add_sink([](std::string&&) {})
      .uid("sink");
  return env.execute("count");
}

TEST(Uid, AStateReadBackAsAnotherTypeIsRefusedNamingBoth) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  ASSERT_TRUE(RunCount<int64_t>(chk, false).ok());
  JobResult r = RunCount<double>(chk, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message())
                .find("restoring state 'count': it was checkpointed with values of type long and "
                      "is read now as double: a state's type cannot change across a restore"),
            std::string::npos)
      << r.status;
  JobResult same = RunCount<int64_t>(chk, true);
  EXPECT_TRUE(same.ok()) << same.status;
}

// A window whose assigner changed (tumbling to sliding) runs another
// operator whose layout differs: refused naming both (it failed with
// "truncated at byte ..."); the same window restores.
TEST(Uid, AWindowRestoredIntoAnotherLayoutIsRefusedNamingBoth) {
  testing::TempDir dir;
  const std::string chk = dir.Path("chk");
  auto run = [&](bool restore, bool sliding) {
    StreamExecutionEnvironment env;
    env.set_parallelism(1);
    env.enable_checkpointing(Duration(0), chk);
    if (restore) env.restore_from("latest");
    std::vector<KV> in;
    for (int64_t i = 0; i < 20; ++i) in.push_back({i % 3, i * 100});
    auto keyed = env.from_collection(in)
                     .uid("src")
                     .assign_timestamps_and_watermarks(
                         WatermarkStrategy<KV>::for_monotonous_timestamps().with_timestamp_assigner(
                             [](const KV& kv) { return kv.second; }))
                     .uid("ts")
                     .key_by([](const KV& kv) { return kv.first; });
    auto sum = [](const KV& x, const KV& y) { return KV{x.first, x.second + y.second}; };
    DataStream<KV> out =
        sliding
            ? keyed.window(SlidingEventTimeWindows::of(Duration(1000), Duration(500))).reduce(sum)
            : keyed.window(TumblingEventTimeWindows::of(Duration(1000))).reduce(sum);
    out.uid("win").add_sink([](KV&&) {}).uid("sink");
    return env.execute("windows");
  };
  ASSERT_TRUE(run(false, false).ok());
  JobResult r = run(true, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(std::string(r.status.message())
                .find("the checkpoint holds the windows of a window-major (tumbling or sliding, "
                      "one value per window) window operator and the job now runs a pane "
                      "(sliding, combined from panes) one"),
            std::string::npos)
      << r.status;
  JobResult same = run(true, false);
  EXPECT_TRUE(same.ok()) << same.status;
}

}  // namespace
}  // namespace tidemark
