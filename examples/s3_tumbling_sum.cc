// s3_tumbling_sum: document 001, 3.1 (SCENARIOS.md S3): tumbling 5 s windows,
// forBoundedOutOfOrderness(2 s), reduce = sum of vc.
// Input lines "id,ts_seconds,vc"; every window result is printed as the
// document's WaterSensor.toString().
//
//   nc -lk 9999                       # then type the lines of tests/data/s3_in_order.txt
//   s3_tumbling_sum --port=9999
//   s3_tumbling_sum --input=tests/data/s3_in_order.txt
//   s3_tumbling_sum --input=tests/data/s3_out_of_order.txt
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9999, "port to read lines from (the document uses 9999)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S3 (document 001, 3.1): tumbling 5 s, bounded out-of-orderness 2 s, sum of vc",
      env);
  BuildS3(OpenLines(env), o).print();
  return RunExample(env, "EventTimeTumbling");
}
