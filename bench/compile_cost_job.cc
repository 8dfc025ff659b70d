// The one-window job whose compile cost issue 11 tracks (bench/compile_cost.sh):
// a collection source, timestamps and watermarks, key_by, a tumbling window
// with reduce, and a sink.
#include <tidemark/tidemark.h>
using namespace tidemark;
using namespace std::chrono_literals;
struct Ev {
  std::string key;
  int64_t ts;
  int64_t v;
};
int main() {
  StreamExecutionEnvironment env;
  env.from_elements(Ev{"a", 1, 1}, Ev{"b", 2, 2})
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Ev>::for_bounded_out_of_orderness(1s).with_timestamp_assigner(
              [](const Ev& e) { return e.ts; }))
      .key_by([](const Ev& e) { return e.key; })
      .window(TumblingEventTimeWindows::of(5s))
      .reduce([](const Ev& a, const Ev& b) {
        return Ev{a.key, a.ts, a.v + b.v};
      })
      .add_sink([](Ev&&) {});
  return env.execute().ok() ? 0 : 1;
}
