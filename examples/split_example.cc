// split_example: One stream split three ways by a ProcessFunction with side outputs.
// The job is examples/api_jobs.h's; tests/api_examples_test.cc checks it
// against a reference computation.
//
//   split_example [--n=N] [--parallelism=P]
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
      "One stream split three ways by a ProcessFunction with side outputs");
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_n);
  StreamExecutionEnvironment env;
  env.set_parallelism(absl::GetFlag(FLAGS_parallelism));
  {
    auto main_out = SplitJob(env, MakeLines(n));
    main_out.print("ok");
    main_out.get_side_output(LargeTag()).print("large");
    main_out.get_side_output(ErrorsTag()).print("error");
  }
  JobResult r = env.execute("split_example");
  if (!r.ok()) {
    std::cerr << r.status << "\n";
    return 1;
  }
  return 0;
}
