// s7_punctuated: document 001, 4.2 (SCENARIOS.md S7).  The document's
// hand-written punctuated generator (max_ts - 2 s on every record, printing
// "取数据中最大的时间戳"); tumbling 5 s windows; sum of vc.  --periodic runs
// its periodic twin of 4.1 instead, which also prints "生成WaterMark<w>" on
// every periodic emission.
//
//   nc -lk 9999                       # then type the lines of tests/data/s7.txt
//   s7_punctuated --port=9999
//   s7_punctuated --input=tests/data/s7.txt
#include "absl/flags/flag.h"
#include "examples/example_main.h"

ABSL_FLAG(int, port, 9999, "port to read lines from (the document uses 9999)");
ABSL_FLAG(bool, periodic, false, "use the periodic generator of section 4.1 (MyPeriod)");

int main(int argc, char** argv) {
  using namespace tidemark;
  using namespace tidemark::seeds;
  StreamExecutionEnvironment env;
  SeedOptions o = ParseExampleFlags(
      argc, argv, "S7 (document 001, 4.2): punctuated watermark max_ts - 2 s", env);
  o.on_record = [](const std::string&, const WatermarkTrace&) { PrintLine(kS7EventLine); };
  const bool periodic = absl::GetFlag(FLAGS_periodic);
  if (periodic) o.on_periodic_emit = [](Timestamp w) { PrintLine(FormatS7PeriodicLine(w)); };
  BuildS7(OpenLines(env), o, periodic ? S7Generator::kPeriodic : S7Generator::kPunctuated).print();
  return RunExample(env,
                    periodic ? "EventTimeTumblingCustomerPeriod" : "EventTimeTumblingCustomerPunt");
}
