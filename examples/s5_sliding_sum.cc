// s5_sliding_sum: document 001, 3.3 (SCENARIOS.md S5): sliding 6 s windows every 2 s,
// forBoundedOutOfOrderness(2 s), reduce = sum of vc.
// Input lines "id,ts_seconds,vc"; every window result is printed as the
// document's WaterSensor.toString().
//
//   nc -lk 9999                       # then type the lines of tests/data/s5.txt
//   s5_sliding_sum --port=9999
//   s5_sliding_sum --input=tests/data/s5.txt
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9999, "port to read lines from (the document uses 9999)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv,
      "S5 (document 001, 3.3): sliding 6 s / 2 s, bounded out-of-orderness 2 s, sum of vc", env);
  BuildS5(OpenLines(env), o).print();
  return RunExample(env, "EventTimeSliding");
}
