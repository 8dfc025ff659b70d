// s1_tumbling_lag: document 000 (SCENARIOS.md S1).  Tumbling 3 s event-time
// windows over "key,epoch_ms" lines, with the document's hand-written periodic
// watermark max_ts - 10 s.  Prints, like the document, a trace line for every
// record (key, event time, current max timestamp, watermark) and, for every
// window firing, "(key),count,first,last,window start,window end".
//
//   nc -lk 9000                       # then type the lines of tests/data/s1.txt
//   s1_tumbling_lag --port=9000
//   s1_tumbling_lag --input=tests/data/s1.txt
//   # section 4 (late data): tests/data/s1_late.txt, s1_lateness.txt with
//   s1_tumbling_lag --input=tests/data/s1_lateness.txt --allowed_lateness=2s
//   s1_tumbling_lag --input=tests/data/s1_late.txt --side_output_late_data
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9000, "port to read lines from (the document uses 9000)");
ABSL_FLAG(absl::Duration, allowed_lateness, absl::ZeroDuration(),
          "allowedLateness of the window (document section 4.2 uses 2s)");
ABSL_FLAG(bool, side_output_late_data, false,
          "send records too late for their window to a side output and print it (section 4.3)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S1 (document 000): tumbling 3 s windows, watermark max_ts - 10 s", env);
  o.allowed_lateness = Duration(absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_allowed_lateness)));
  o.side_output_late_data = absl::GetFlag(FLAGS_side_output_late_data);
  const absl::TimeZone tz = o.tz;
  o.on_record = [tz](const std::string& key, const WatermarkTrace& t) {
    PrintLine(FormatS1Trace(key, t, tz));
  };
  SeedStreams<std::string, KeyedEvent> job = BuildS1(OpenLines(env), o);
  job.results.print();
  // The document prints the late records with a plain print(): "(0001,1538359890000)".
  if (job.late) job.late->print();
  return RunExample(env, "eventtime-watermark");
}
