// Built against an installed tidemark by the find_package test: runs a small
// keyed job and checks its result.
#include <tidemark/testing/harness.h>
#include <tidemark/tidemark.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "runtime/time.h"  // the consumer's own (tests/consumer/runtime/time.h)

int main() {
  using namespace tidemark;
  if (std::string(consumer::TimeHeaderOwner()) != "consumer") return 1;
  static_assert(kMaxWatermark > 0, "tidemark's runtime/core/time.h is reached too");
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  std::vector<std::string> words = {"a", "b", "a", "c", "a", "b"};
  auto out =
      env.from_collection(words)
          .map([](const std::string& w) { return std::make_pair(w, 1); })
          .key_by([](const std::pair<std::string, int>& p) { return p.first; })
          .reduce([](const std::pair<std::string, int>& x, const std::pair<std::string, int>& y) {
            return std::make_pair(x.first, x.second + y.second);
          })
          .collect();
  JobResult r = env.execute("consumer");
  if (!r.ok()) {
    std::fprintf(stderr, "job failed: %s\n", std::string(r.status.message()).c_str());
    return 1;
  }
  int max_a = 0;
  for (const auto& p : out->values())
    if (p.first == "a" && p.second > max_a) max_a = p.second;
  if (out->size() != words.size() || max_a != 3) {
    std::fprintf(stderr, "unexpected result: %zu records, a=%d\n", out->size(), max_a);
    return 1;
  }
  // The installed test harness (api/testing/harness.h) drives one function.
  auto h = harness::ProcessFunctionTestHarnesses::for_map<std::string>(
      [](const std::string& w) { return w.size(); });
  h.open();
  h.process_element("four", 7);
  if (h.extract_output_values() != std::vector<size_t>{4}) {
    std::fprintf(stderr, "the test harness did not see the map's output\n");
    return 1;
  }
  std::printf("tidemark consumer ok (key group of \"hello\": %d)\n",
              KeyGroupOf(std::string("hello"), 128));
  return 0;
}
