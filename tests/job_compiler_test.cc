// Tests of the job compiler (runtime/exec/job_compiler.h): parallelism resolution,
// ship strategies and channel counts of the physical edges, the chaining
// decisions, and the text of explain().  Jobs are built with the fluent API
// and planned without running, except the last test, which runs one.
#include "tidemark/runtime/exec/job_compiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Names = std::vector<std::string>;

DataStream<int64_t> Numbers(StreamExecutionEnvironment& env, const std::string& name = "Numbers") {
  return env.from_generator<int64_t>([](int64_t i) { return i; }, 100, 0, name);
}

int64_t Identity(const int64_t& v) { return v; }

PhysicalPlan PlanOf(const StreamExecutionEnvironment& env) {
  absl::StatusOr<PhysicalPlan> plan = StreamAccess::Plan(env);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *std::move(plan) : PhysicalPlan{};
}

// The node names of each chain, in chain order.
std::vector<Names> Chains(const PhysicalPlan& plan) {
  std::vector<Names> out;
  for (const PlanChain& c : plan.chains) {
    Names names;
    for (int id : c.nodes) names.push_back(plan.nodes[id].name);
    out.push_back(names);
  }
  return out;
}

// The network edge from `from` to `to` (by node name); fails if not exactly one.
PlanEdge NetworkEdge(const PhysicalPlan& plan, const std::string& from, const std::string& to) {
  std::vector<PlanEdge> found;
  for (int e : plan.NetworkEdges()) {
    const PlanEdge& edge = plan.edges[e];
    if (plan.nodes[edge.from].name == from && plan.nodes[edge.to].name == to) found.push_back(edge);
  }
  EXPECT_EQ(found.size(), 1u) << from << " -> " << to;
  return found.empty() ? PlanEdge{} : found[0];
}

const PlanNode& NodeNamed(const PhysicalPlan& plan, const std::string& name) {
  for (const PlanNode& n : plan.nodes)
    if (n.name == name) return n;
  ADD_FAILURE() << "no node " << name;
  static const PlanNode kNone;
  return kNone;
}

// --- parallelism ---

TEST(JobCompilerParallelismTest, DefaultExplicitAndFixed) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto gen = Numbers(env, "Gen");
  gen.map(&Identity).name("Default").set_parallelism(3);
  gen.map(&Identity).name("Explicit").set_parallelism(5);
  env.from_elements<int64_t>(1, 2, 3).map(&Identity).name("AfterCollection");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_EQ(NodeNamed(plan, "Source: Gen").parallelism, 3);
  EXPECT_EQ(NodeNamed(plan, "Default").parallelism, 3);
  EXPECT_EQ(NodeNamed(plan, "Explicit").parallelism, 5);
  EXPECT_EQ(NodeNamed(plan, "Source: Collection Source").parallelism, 1);  // fixed
  EXPECT_EQ(NodeNamed(plan, "AfterCollection").parallelism, 3);
}

TEST(JobCompilerParallelismTest, VirtualNodesHaveNoParallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env).rebalance().map(&Identity);
  const PhysicalPlan plan = PlanOf(env);
  for (const PlanNode& n : plan.nodes) {
    if (n.physical()) {
      EXPECT_EQ(n.parallelism, 2) << n.name;
    } else {
      EXPECT_EQ(n.parallelism, 0) << n.name;
      EXPECT_EQ(n.chain, -1) << n.name;
    }
  }
}

TEST(JobCompilerParallelismTest, ReadTextFilesHasOneSubtaskPerFile) {
  StreamExecutionEnvironment env;
  env.set_parallelism(4);
  env.read_text_files({"/nonexistent/a", "/nonexistent/b"}).map([](const std::string& s) {
    return s;
  });
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_EQ(NodeNamed(plan, "Source: Files").parallelism, 2);
  EXPECT_EQ(NodeNamed(plan, "Map").parallelism, 4);
}

TEST(JobCompilerParallelismTest, MaxParallelismFollowsFlinksDefaultUnlessSet) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto gen = Numbers(env, "Gen");
  gen.map(&Identity).name("P85").set_parallelism(85);
  gen.map(&Identity).name("P86").set_parallelism(86);
  gen.map(&Identity).name("P300").set_parallelism(300);
  gen.map(&Identity).name("Own").set_max_parallelism(64);
  PhysicalPlan plan = PlanOf(env);
  // Flink: roundUpToPowerOfTwo(p + p / 2), at least 128, at most 32768.
  EXPECT_EQ(NodeNamed(plan, "Source: Gen").max_parallelism, 128);
  EXPECT_EQ(NodeNamed(plan, "P85").max_parallelism, 128);
  EXPECT_EQ(NodeNamed(plan, "P86").max_parallelism, 256);
  EXPECT_EQ(NodeNamed(plan, "P300").max_parallelism, 512);
  EXPECT_EQ(NodeNamed(plan, "Own").max_parallelism, 64);

  env.set_max_parallelism(1000);  // the environment's, unless the node has its own
  plan = PlanOf(env);
  EXPECT_EQ(NodeNamed(plan, "P86").max_parallelism, 1000);
  EXPECT_EQ(NodeNamed(plan, "Own").max_parallelism, 64);
}

TEST(JobCompilerParallelismTest, ParallelismAboveMaxParallelismIsInvalid) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env).map(&Identity).name("Wide").set_parallelism(10).set_max_parallelism(8);
  absl::StatusOr<PhysicalPlan> plan = StreamAccess::Plan(env);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(plan.status()));
  EXPECT_THAT(plan.status().message(), HasSubstr("operator 'Wide'"));
}

// --- edges and channels ---

TEST(JobCompilerEdgeTest, DefaultIsForwardForEqualParallelismElseRebalance) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.disable_operator_chaining();  // keep every edge a network edge
  auto a = Numbers(env, "A").map(&Identity).name("Same");
  a.map(&Identity).name("Wider").set_parallelism(3);
  const PhysicalPlan plan = PlanOf(env);
  const PlanEdge same = NetworkEdge(plan, "Source: A", "Same");
  EXPECT_EQ(same.strategy, ShipStrategy::kForward);
  EXPECT_EQ(same.channels, 2);  // forward: one channel per subtask
  const PlanEdge wider = NetworkEdge(plan, "Same", "Wider");
  EXPECT_EQ(wider.strategy, ShipStrategy::kRebalance);
  EXPECT_EQ(wider.channels, 6);  // all-to-all: 2 * 3
}

TEST(JobCompilerEdgeTest, ChannelCountsOfEachPartitioning) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  auto gen = Numbers(env, "Gen").set_parallelism(2);
  gen.rebalance().map(&Identity).name("Rebalanced");
  gen.broadcast().map(&Identity).name("Broadcast");
  gen.key_by([](const int64_t& v) { return v; })
      .reduce([](const int64_t& x, const int64_t& y) { return x + y; })
      .name("Keyed")
      .set_parallelism(4);
  gen.partition_custom([](int64_t k, int n) { return static_cast<int>(k % n); },
                       [](const int64_t& v) { return v; })
      .map(&Identity)
      .name("Custom");
  const PhysicalPlan plan = PlanOf(env);
  const PlanEdge rebalanced = NetworkEdge(plan, "Source: Gen", "Rebalanced");
  EXPECT_EQ(rebalanced.strategy, ShipStrategy::kRebalance);
  EXPECT_EQ(rebalanced.channels, 6);
  EXPECT_EQ(rebalanced.partitioner, nullptr);
  const PlanEdge broadcast = NetworkEdge(plan, "Source: Gen", "Broadcast");
  EXPECT_EQ(broadcast.strategy, ShipStrategy::kBroadcast);
  EXPECT_EQ(broadcast.channels, 6);
  const PlanEdge keyed = NetworkEdge(plan, "Source: Gen", "Keyed");
  EXPECT_EQ(keyed.strategy, ShipStrategy::kKeyGroups);
  EXPECT_EQ(keyed.channels, 8);
  EXPECT_NE(keyed.partitioner, nullptr);
  const PlanEdge custom = NetworkEdge(plan, "Source: Gen", "Custom");
  EXPECT_EQ(custom.strategy, ShipStrategy::kCustom);
  EXPECT_EQ(custom.channels, 6);
  EXPECT_NE(custom.partitioner, nullptr);
  // Each task of "Keyed" reads one channel per upstream subtask.
  EXPECT_EQ(plan.chains[NodeNamed(plan, "Keyed").chain].input_channels, 2);
}

TEST(JobCompilerEdgeTest, ExplicitForwardBetweenDifferentParallelismIsInvalid) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env, "A").forward().map(&Identity).name("B").set_parallelism(3);
  absl::StatusOr<PhysicalPlan> plan = StreamAccess::Plan(env);
  ASSERT_FALSE(plan.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(plan.status()));
  EXPECT_THAT(plan.status().message(),
              HasSubstr("forward partitioning needs equal parallelism, but 'Source: A' has 2 and "
                        "'B' has 3"));
  absl::StatusOr<std::string> text = env.ExplainPlan();
  ASSERT_FALSE(text.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(text.status()));
  EXPECT_THAT(env.explain(), HasSubstr("invalid job: forward partitioning needs equal"));
  EXPECT_TRUE(absl::IsInvalidArgument(env.execute().status));
}

TEST(JobCompilerEdgeTest, PartitioningNearestTheConsumerWins) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env, "A").broadcast().rebalance().map(&Identity).name("B");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_EQ(NetworkEdge(plan, "Source: A", "B").strategy, ShipStrategy::kRebalance);
}

// --- chaining ---

TEST(JobCompilerChainingTest, ForwardWithSameParallelismChains) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env, "A")
      .map(&Identity)
      .name("M")
      .filter([](const int64_t&) { return true; })
      .name("F")
      .add_sink([](int64_t&&) {}, "S");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A", "M", "F", "S"}));
  EXPECT_EQ(plan.chains[0].task_name, "Source: A -> M -> F -> S");
  EXPECT_EQ(plan.chains[0].parallelism, 2);
  EXPECT_TRUE(plan.NetworkEdges().empty());
  EXPECT_EQ(plan.TaskCount(), 2);
  for (const PlanEdge& e : plan.edges) {
    EXPECT_TRUE(e.chained);
    EXPECT_EQ(e.channels, 0);
  }
  EXPECT_EQ(NodeNamed(plan, "F").chain, 0);
  EXPECT_EQ(NodeNamed(plan, "F").position, 2);
}

TEST(JobCompilerChainingTest, ExplicitForwardChains) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env, "A").forward().map(&Identity).name("M");
  EXPECT_THAT(Chains(PlanOf(env)), ElementsAre(Names{"Source: A", "M"}));
}

TEST(JobCompilerChainingTest, DifferentParallelismDoesNotChain) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  Numbers(env, "A").map(&Identity).name("M").set_parallelism(3).map(&Identity).name("N");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A"}, Names{"M"}, Names{"N"}));
  EXPECT_EQ(plan.TaskCount(), 2 + 3 + 2);
}

TEST(JobCompilerChainingTest, KeyByRebalanceBroadcastAndCustomBreakChains) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto src = Numbers(env, "A");
  src.key_by([](const int64_t& v) { return v; })
      .reduce([](const int64_t& x, const int64_t& y) { return x + y; })
      .name("Keyed");
  src.rebalance().map(&Identity).name("Rebalanced");
  src.broadcast().map(&Identity).name("Broadcast");
  src.partition_custom([](int64_t k, int n) { return static_cast<int>(k % n); },
                       [](const int64_t& v) { return v; })
      .map(&Identity)
      .name("Custom");
  EXPECT_THAT(Chains(PlanOf(env)),
              ElementsAre(Names{"Source: A"}, Names{"Keyed"}, Names{"Rebalanced"},
                          Names{"Broadcast"}, Names{"Custom"}));
  // Each alone, so that the upstream has one consumer: still not chained.
  for (int which = 0; which < 4; ++which) {
    StreamExecutionEnvironment e;
    e.set_parallelism(2);
    auto s = Numbers(e, "A");
    if (which == 0) s.key_by([](const int64_t& v) { return v; }).stream().map(&Identity).name("B");
    if (which == 1) s.rebalance().map(&Identity).name("B");
    if (which == 2) s.broadcast().map(&Identity).name("B");
    if (which == 3)
      s.partition_custom([](int64_t k, int n) { return static_cast<int>(k % n); },
                         [](const int64_t& v) { return v; })
          .map(&Identity)
          .name("B");
    EXPECT_THAT(Chains(PlanOf(e)), ElementsAre(Names{"Source: A"}, Names{"B"})) << which;
  }
}

TEST(JobCompilerChainingTest, DisableOperatorChaining) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.disable_operator_chaining();
  Numbers(env, "A").map(&Identity).name("M").add_sink([](int64_t&&) {}, "S");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A"}, Names{"M"}, Names{"S"}));
  ASSERT_EQ(plan.NetworkEdges().size(), 2u);
  for (int e : plan.NetworkEdges()) {
    EXPECT_EQ(plan.edges[e].strategy, ShipStrategy::kForward);
    EXPECT_EQ(plan.edges[e].channels, 2);
  }
}

TEST(JobCompilerChainingTest, NodeConsumedTwiceChainsNeitherConsumer) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto m = Numbers(env, "A").map(&Identity).name("M");
  m.map(&Identity).name("X");
  m.map(&Identity).name("Y");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A", "M"}, Names{"X"}, Names{"Y"}));
  EXPECT_EQ(NetworkEdge(plan, "M", "X").strategy, ShipStrategy::kForward);
  EXPECT_EQ(NetworkEdge(plan, "M", "Y").channels, 2);
  EXPECT_THAT(plan.Consumers(NodeNamed(plan, "M").id, ""), ::testing::SizeIs(2));
}

TEST(JobCompilerChainingTest, UnionDoesNotChain) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto a = Numbers(env, "A");
  auto b = Numbers(env, "B");
  a.union_with(b).map(&Identity).name("U");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A"}, Names{"Source: B"}, Names{"U"}));
  EXPECT_EQ(NodeNamed(plan, "U").inputs.size(), 2u);
  EXPECT_EQ(NetworkEdge(plan, "Source: A", "U").strategy, ShipStrategy::kForward);
  EXPECT_EQ(NetworkEdge(plan, "Source: B", "U").strategy, ShipStrategy::kForward);
  EXPECT_EQ(plan.chains[NodeNamed(plan, "U").chain].input_channels, 2);  // 1 per input
}

TEST(JobCompilerChainingTest, SideOutputConsumerIsNotChainedButTheMainOneIs) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto m = Numbers(env, "A").map(&Identity).name("M");
  m.add_sink([](int64_t&&) {}, "Main");
  m.get_side_output(OutputTag<int64_t>("odd")).add_sink([](int64_t&&) {}, "Odd");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: A", "M", "Main"}, Names{"Odd"}));
  const PlanEdge side = NetworkEdge(plan, "M", "Odd");
  EXPECT_EQ(side.tag, "odd");
  EXPECT_EQ(side.strategy, ShipStrategy::kForward);
  EXPECT_EQ(side.channels, 2);
}

TEST(JobCompilerChainingTest, FixedParallelismSourceFeedingTwoSubtasks) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.from_elements<int64_t>(1, 2, 3).map(&Identity).name("M").add_sink([](int64_t&&) {}, "S");
  const PhysicalPlan plan = PlanOf(env);
  EXPECT_THAT(Chains(plan), ElementsAre(Names{"Source: Collection Source"}, Names{"M", "S"}));
  const PlanEdge e = NetworkEdge(plan, "Source: Collection Source", "M");
  EXPECT_EQ(e.strategy, ShipStrategy::kRebalance);
  EXPECT_EQ(e.channels, 2);
  EXPECT_EQ(plan.TaskCount(), 1 + 2);
}

// --- explain ---

TEST(JobCompilerExplainTest, NamesChainsTasksAndEachEdgesPartitioning) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto src = env.from_elements<int64_t>(1, 2, 3).name("Source: A");
  auto slow = src.rebalance().map(&Identity).name("Slow map").set_parallelism(1);
  auto sums = slow.key_by([](const int64_t& v) { return v % 2; })
                  .reduce([](const int64_t& x, const int64_t& y) { return x + y; })
                  .name("Sum");
  sums.add_sink([](int64_t&&) {}, "Sink");
  sums.get_side_output(OutputTag<int64_t>("late")).add_sink([](int64_t&&) {}, "Late sink");
  const std::string text = env.explain();
  EXPECT_EQ(text, *env.ExplainPlan());
  EXPECT_THAT(text, Not(HasSubstr("p=0")));
  EXPECT_EQ(text,
            "Chain 0 \"Source: A\" p=1 maxP=128, tasks: Source: A (0/1)\n"
            "Chain 1 \"Slow map\" p=1 maxP=128, tasks: Slow map (0/1)\n"
            "Chain 2 \"Sum -> Sink\" p=2 maxP=128, tasks: Sum -> Sink (0/2), (1/2)\n"
            "Chain 3 \"Late sink\" p=2 maxP=128, tasks: Late sink (0/2), (1/2)\n"
            "Edge 0: Source: A (p=1) --REBALANCE--> Slow map (p=1), 1 channel(s)\n"
            "Edge 1: Slow map (p=1) --HASH(key groups, maxP=128)--> Sum (p=2), 2 channel(s)\n"
            "Edge 2: Sum (p=2) side output 'late' --FORWARD--> Late sink (p=2), 2 channel(s)\n");
}

TEST(JobCompilerExplainTest, ChainWithDifferentMaxParallelismListsEach) {
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  Numbers(env, "A").map(&Identity).name("M").set_max_parallelism(256);
  EXPECT_EQ(env.explain(),
            "Chain 0 \"Source: A -> M\" p=1 maxP=[128, 256], tasks: Source: A -> M (0/1)\n");
}

// --- the compiler alone, step by step ---

TEST(JobCompilerStepsTest, PlansALogicalGraphWithoutAnEnvironment) {
  std::vector<std::unique_ptr<StreamNode>> nodes;
  auto source = std::make_unique<StreamNode>();
  source->id = 0;
  source->kind = StreamNode::Kind::kSource;
  source->name = "S";
  source->out = std::make_shared<TypedNodeOps<int>>();
  nodes.push_back(std::move(source));
  auto op = std::make_unique<StreamNode>();
  op->id = 1;
  op->name = "Op";
  op->parallelism = 3;
  op->inputs.push_back(EdgeSpec{0, ShipStrategy::kDefault, nullptr});
  nodes.push_back(std::move(op));
  JobCompilerOptions options;
  options.parallelism = 2;
  options.max_parallelism = 512;
  JobCompiler compiler(nodes, options);

  PhysicalPlan plan;
  ASSERT_TRUE(compiler.ResolveParallelism(plan).ok());
  EXPECT_EQ(plan.nodes[0].parallelism, 2);
  EXPECT_EQ(plan.nodes[1].parallelism, 3);
  EXPECT_EQ(plan.nodes[1].max_parallelism, 512);
  ASSERT_TRUE(compiler.ResolveEdges(plan).ok());
  ASSERT_EQ(plan.edges.size(), 1u);
  EXPECT_EQ(plan.edges[0].strategy, ShipStrategy::kRebalance);  // 2 -> 3
  EXPECT_EQ(plan.edges[0].channels, 6);
  EXPECT_TRUE(plan.chains.empty());  // not yet
  compiler.Chain(plan);
  EXPECT_EQ(plan.chains.size(), 2u);
  EXPECT_EQ(plan.TaskCount(), 5);
  // "Op" has no output: fine, nothing reads it.
  EXPECT_TRUE(compiler.CheckOutputs(plan).ok());

  // An operator without input is an invalid graph.
  auto orphan = std::make_unique<StreamNode>();
  orphan->id = 2;
  orphan->name = "Orphan";
  nodes.push_back(std::move(orphan));
  absl::StatusOr<PhysicalPlan> invalid = JobCompiler(nodes, options).Plan();
  ASSERT_FALSE(invalid.ok());
  EXPECT_EQ(invalid.status().message(), "operator 'Orphan' has no input");
}

// --- building from the plan ---

TEST(JobCompilerBuildTest, RunsOneTaskPerChainAndSubtask) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto src = env.from_elements<int64_t>(1, 2, 3, 4, 5, 6);
  auto doubled = src.map([](const int64_t& v) { return 2 * v; }).name("Double");
  auto results = doubled.key_by([](const int64_t& v) { return v % 3; })
                     .reduce([](const int64_t& x, const int64_t& y) { return x + y; })
                     .collect();
  const PhysicalPlan plan = PlanOf(env);
  std::multiset<std::string> expected;
  for (const PlanChain& c : plan.chains)
    for (int s = 0; s < c.parallelism; ++s) expected.insert(c.task_name);
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  std::multiset<std::string> ran;
  for (const auto& m : r.metrics) ran.insert(m.task_name);
  EXPECT_EQ(ran, expected);
  // A rolling reduce emits one running sum per record; the largest is key 0's
  // (6 + 12) of 2, 4, ..., 12 keyed by v % 3.
  std::vector<int64_t> values = results->values();
  EXPECT_EQ(values.size(), 6u);
  int64_t max_sum = 0;
  for (int64_t v : values) max_sum = std::max(max_sum, v);
  EXPECT_EQ(max_sum, 18);  // 6 + 12
}

// A job across ranks needs the MPI plane (tidemark::mpi, which this test does
// not link): the compiler says so instead of running on one rank's share.
TEST(JobCompilerBuildTest, AcrossRanksWithoutTheMpiPlaneIsAnErrorNamingIt) {
  ASSERT_EQ(RegisteredRemotePlane().make_exchange, nullptr);
  std::vector<std::unique_ptr<StreamNode>> nodes;
  auto source = std::make_unique<StreamNode>();
  source->id = 0;
  source->kind = StreamNode::Kind::kSource;
  source->name = "S";
  source->out = std::make_shared<TypedNodeOps<int>>();
  nodes.push_back(std::move(source));
  auto op = std::make_unique<StreamNode>();
  op->id = 1;
  op->name = "Op";
  op->inputs.push_back(EdgeSpec{0, ShipStrategy::kDefault, nullptr});
  nodes.push_back(std::move(op));
  JobConfig config;
  JobCompilerOptions options;
  options.parallelism = 2;
  options.config = &config;
  options.cluster = ClusterInfo{0, 2};
  absl::StatusOr<std::shared_ptr<JobExecution>> built = JobCompiler(nodes, options).Compile();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(built.status().message(), HasSubstr("rank 0 of 2"));
  EXPECT_THAT(built.status().message(), HasSubstr("not linked with tidemark::mpi"));
}

}  // namespace
}  // namespace tidemark
