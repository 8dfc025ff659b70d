// s6_session_sum: document 001, 3.4 (SCENARIOS.md S6): event-time session windows with a 5 s
// gap, forBoundedOutOfOrderness(2 s), reduce = sum of vc.
// Input lines "id,ts_seconds,vc"; every window result is printed as the
// document's WaterSensor.toString().
//
//   nc -lk 9999                       # then type the lines of tests/data/s6.txt
//   s6_session_sum --port=9999
//   s6_session_sum --input=tests/data/s6.txt
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9999, "port to read lines from (the document uses 9999)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv,
      "S6 (document 001, 3.4): session windows, gap 5 s, bounded out-of-orderness 2 s, sum of vc",
      env);
  BuildS6(OpenLines(env), o).print();
  return RunExample(env, "EventTimeSession");
}
