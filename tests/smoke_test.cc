#include <gtest/gtest.h>

#include "tidemark/tidemark.h"
using namespace tidemark;
TEST(Smoke, MapKeyByReduce) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto out = env.from_generator<int64_t>([](int64_t i) { return i; }, 1000)
                 .map([](const int64_t& v) { return std::make_pair(v % 10, v); })
                 .key_by([](const std::pair<int64_t, int64_t>& p) { return p.first; })
                 .reduce([](const auto& a, const auto& b) {
                   return std::make_pair(a.first, a.second + b.second);
                 })
                 .collect();
  JobResult r = env.execute();
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(out->size(), 1000u);
}
