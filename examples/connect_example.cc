// connect_example: Orders and their payments (connect + KeyedCoProcessFunction with state and
// event-time timers). The job is examples/api_jobs.h's; tests/api_examples_test.cc checks it
// against a reference computation.
//
//   connect_example [--n=N] [--parallelism=P]
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
      "Orders and their payments (connect + KeyedCoProcessFunction with state and event-time "
      "timers)");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_n);
  StreamExecutionEnvironment env;
  env.set_parallelism(absl::GetFlag(FLAGS_parallelism));
  PaymentsJob(env, MakeOrders(n), MakePayments(n)).print();
  JobResult r = env.execute("connect_example");
  if (!r.ok()) {
    std::cerr << r.status << "\n";
    return 1;
  }
  return 0;
}
