// The API examples' jobs (examples/api_jobs.h) at parallelism 1 and 3,
// against reference computations written here from the examples' stated
// rules, independently of the operators.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "examples/api_jobs.h"
#include "tests/test_util.h"

namespace tidemark::examples {
namespace {

template <typename T>
std::vector<std::pair<T, Timestamp>> Items(const std::shared_ptr<CollectedResults<T>>& results) {
  std::vector<std::pair<T, Timestamp>> v;
  for (const auto& item : results->items()) v.emplace_back(item.value, item.timestamp);
  std::sort(v.begin(), v.end());
  return v;
}

class ApiExamplesTest : public ::testing::TestWithParam<int> {
 protected:
  StreamExecutionEnvironment env_;
  void SetUp() override { env_.set_parallelism(GetParam()); }
};

// The two-input jobs run several times: their results must not depend on how
// the two inputs interleave (the decisions wait for event-time timers).
void CheckPayments(int parallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  const auto orders = MakeOrders(90);
  const auto payments = MakePayments(90);
  auto out = PaymentsJob(env, orders, payments).collect();
  JobResult r = env.execute("connect example");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::pair<std::string, Timestamp>> expected;
  for (const Order& o : orders) {
    std::optional<Payment> first;
    for (const Payment& p : payments)
      if (p.id == o.id && p.ts >= o.ts && p.ts <= o.ts + 50 && (!first || p.ts < first->ts))
        first = p;
    const std::string id = std::to_string(o.id);
    expected.emplace_back(
        first ? "paid " + id + " " + std::to_string(first->cents) : "unpaid " + id, o.ts + 50);
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Items(out), expected);
}

TEST_P(ApiExamplesTest, ConnectPaymentsMatchesTheRuleOnTimestamps) {
  for (int rep = 0; rep < testing::StressIterations(10); ++rep) {
    SCOPED_TRACE(rep);
    CheckPayments(GetParam());
  }
}

void CheckLimits(int parallelism) {
  StreamExecutionEnvironment env;
  env.set_parallelism(parallelism);
  const auto readings = MakeReadings(100);
  const auto limits = MakeLimits();
  auto out = LimitsJob(env, readings, limits).collect();
  JobResult r = env.execute("broadcast example");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::pair<std::string, Timestamp>> expected;
  for (const Reading& rd : readings) {
    std::optional<int64_t> max;
    Timestamp since = kMinTimestamp;
    for (const Limit& l : limits)
      if ((l.sensor == rd.sensor || l.sensor == "*") && l.ts <= rd.ts && l.ts >= since) {
        since = l.ts;
        max = l.max;
      }
    if (max && rd.value > *max)
      expected.emplace_back(rd.sensor + "@" + std::to_string(rd.ts) + ">" + std::to_string(*max),
                            rd.ts);
  }
  std::sort(expected.begin(), expected.end());
  ASSERT_GT(expected.size(), 20u);
  EXPECT_EQ(Items(out), expected);
}

TEST_P(ApiExamplesTest, BroadcastLimitsMatchTheLimitInForceAtEachReading) {
  for (int rep = 0; rep < testing::StressIterations(10); ++rep) {
    SCOPED_TRACE(rep);
    CheckLimits(GetParam());
  }
}

TEST_P(ApiExamplesTest, ClickViewJoinMatchesNestedLoops) {
  const auto clicks = MakeClicks(80);
  const auto views = MakeViews(100);
  auto out = ClickViewJob(env_, clicks, views, 10, 20).collect();
  JobResult r = env_.execute("join example");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::pair<std::string, Timestamp>> expected;
  for (const Click& c : clicks)
    for (const View& v : views)
      if (c.user == v.user && v.ts >= c.ts - 10 && v.ts <= c.ts + 20)
        expected.emplace_back(std::to_string(c.user) + " " + std::to_string(c.ts) + " " + v.page +
                                  " " + std::to_string(v.ts),
                              std::max(c.ts, v.ts));
  std::sort(expected.begin(), expected.end());
  ASSERT_GT(expected.size(), 50u);
  EXPECT_EQ(Items(out), expected);
}

TEST_P(ApiExamplesTest, ClickViewWindowJoinMatchesNestedLoopsPerWindow) {
  const auto clicks = MakeClicks(80);
  const auto views = MakeViews(100);
  auto out = ClickViewWindowJob(env_, clicks, views).collect();
  JobResult r = env_.execute("window join example");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<std::pair<std::string, Timestamp>> expected;
  for (const Click& c : clicks)
    for (const View& v : views)
      if (c.user == v.user && c.ts / 50 == v.ts / 50)
        expected.emplace_back(std::to_string(c.user) + " " + std::to_string(c.ts / 50 * 50) + " " +
                                  std::to_string(c.ts) + " " + v.page + " " + std::to_string(v.ts),
                              c.ts / 50 * 50 + 49);
  std::sort(expected.begin(), expected.end());
  ASSERT_GT(expected.size(), 50u);
  EXPECT_EQ(Items(out), expected);
}

TEST_P(ApiExamplesTest, SplitSendsEveryLineToExactlyOneOutput) {
  const auto lines = MakeLines(200);
  auto main_out = SplitJob(env_, lines);
  auto ok = main_out.collect();
  auto large = main_out.get_side_output(LargeTag()).collect();
  auto errors = main_out.get_side_output(ErrorsTag()).collect();
  JobResult r = env_.execute("split example");
  ASSERT_TRUE(r.ok()) << r.status;
  std::vector<int64_t> want_ok, want_large, got_ok, got_large;
  std::vector<std::string> want_errors, got_errors;
  for (const std::string& l : lines) {
    const bool digits = !l.empty() && std::all_of(l.begin(), l.end(), ::isdigit);
    if (!digits) {
      want_errors.push_back("not a number: '" + l + "'");
    } else if (std::stoll(l) > 1000) {
      want_large.push_back(std::stoll(l));
    } else {
      want_ok.push_back(std::stoll(l) * 2);
    }
  }
  for (const auto& [v, ts] : Items(ok)) got_ok.push_back(v);
  for (const auto& [v, ts] : Items(large)) got_large.push_back(v);
  for (const auto& [v, ts] : Items(errors)) got_errors.push_back(v);
  for (auto* v : {&want_ok, &want_large}) std::sort(v->begin(), v->end());
  std::sort(want_errors.begin(), want_errors.end());
  EXPECT_EQ(got_ok, want_ok);
  EXPECT_EQ(got_large, want_large);
  EXPECT_EQ(got_errors, want_errors);
  EXPECT_EQ(got_ok.size() + got_large.size() + got_errors.size(), lines.size());
}

INSTANTIATE_TEST_SUITE_P(Parallelism, ApiExamplesTest, ::testing::Values(1, 3));

}  // namespace
}  // namespace tidemark::examples
