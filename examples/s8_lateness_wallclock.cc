// s8_lateness_wallclock: document 002 (SCENARIOS.md S8).  Call records
// "sid,callType,yyyy-MM-dd HH:mm:ss[.SSS],duration" (times read in --timezone),
// only callType success, forBoundedOutOfOrderness(0), tumbling 5 s per sid,
// allowedLateness from the flag; prints "window:[start--end]-<sid>--总时长：N".
//
//   nc -lk 8888                       # then type the lines of tests/data/s8_lateness0.txt
//   s8_lateness_wallclock --port=8888
//   s8_lateness_wallclock --input=tests/data/s8_lateness0.txt
//   s8_lateness_wallclock --input=tests/data/s8_lateness2.txt --allowed_lateness=2s
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 8888, "port to read lines from (the document uses 8888)");
ABSL_FLAG(absl::Duration, allowed_lateness, absl::ZeroDuration(),
          "allowedLateness of the window (the document runs 0 and 2s)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S8 (document 002): allowed lateness with a wall-clock time column", env);
  o.allowed_lateness = Duration(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_allowed_lateness)));
  BuildS8(OpenLines(env), o).print();
  return RunExample(env, "EventTimeWindowAllowedLatenessDemo");
}
