// s4_lateness_side_output: document 001, 3.2 (SCENARIOS.md S4).  Tumbling 5 s
// windows, forBoundedOutOfOrderness(2 s), allowedLateness(2 s), late data to
// the side output "Side"; sum of vc.  Prints the results with print() and the
// side output with print("Side"), as the document.
//
//   nc -lk 9999                       # then type the lines of tests/data/s4.txt
//   s4_lateness_side_output --port=9999
//   s4_lateness_side_output --input=tests/data/s4.txt
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9999, "port to read lines from (the document uses 9999)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S4 (document 001, 3.2): allowed lateness 2 s and a late-data side output", env);
  SeedStreams<WaterSensor, WaterSensor> job = BuildS4(OpenLines(env), o);
  job.results.print();
  job.late->print("Side");
  return RunExample(env, "LateAndSideOutPut");
}
