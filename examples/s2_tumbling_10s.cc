// s2_tumbling_10s: document 004 (SCENARIOS.md S2).  Tumbling 10 s event-time
// windows over "key epoch_ms" lines (space-separated), with the document's
// hand-written periodic watermark max_ts - 10 s.  Prints the document's trace
// line for every record and its sentence for every window firing.
//
//   nc -lk 9000                       # then type the lines of tests/data/s2.txt
//   s2_tumbling_10s --port=9000
//   s2_tumbling_10s --input=tests/data/s2.txt
#include <sys/syscall.h>
#include <unistd.h>

#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9000, "port to read lines from (the document uses 9000)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S2 (document 004): tumbling 10 s windows, watermark max_ts - 10 s", env);
  const absl::TimeZone tz = o.tz;
  o.on_record = [tz](const std::string& key, const WatermarkTrace& t) {
    // The document prints Java's Thread.getId(); the OS thread id is the
    // closest thing here.
    PrintLine(FormatS2Trace(std::to_string(::syscall(SYS_gettid)), key, t, tz));
  };
  BuildS2(OpenLines(env), o).print();
  return RunExample(env, "FlinkWaterMark2");
}
