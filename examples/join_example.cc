// join_example: Clicks and the page views 10 ms before to 20 ms after them (interval join), and in
// the same 50 ms window (window join). The job is examples/api_jobs.h's; tests/api_examples_test.cc
// checks it against a reference computation.
//
//   join_example [--n=N] [--parallelism=P]
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "examples/api_jobs.h"

ABSL_FLAG(int, n, 60, "how many records to generate");
ABSL_FLAG(int, parallelism, 2, "the job's parallelism");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::examples;
  absl::SetProgramUsageMessage(
      "Clicks and the page views 10 ms before to 20 ms after them (interval join), and in the same "
      "50 ms window (window join)");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_n);
  StreamExecutionEnvironment env;
  env.set_parallelism(absl::GetFlag(FLAGS_parallelism));
  ClickViewJob(env, MakeClicks(n), MakeViews(n), 10, 20).print("interval");
  ClickViewWindowJob(env, MakeClicks(n), MakeViews(n)).print("window");
  JobResult r = env.execute("join_example");
  if (!r.ok()) {
    std::cerr << r.status << "\n";
    return 1;
  }
  return 0;
}
