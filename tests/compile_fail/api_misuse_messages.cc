// The job API's static_asserts for the mistakes a review found unclear or
// silent: all in one file, built by the api_misuse_messages ctest
// (tests/CMakeLists.txt), which passes when the compiler prints every
// message listed there.  Never built by default.
#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tidemark/tidemark.h"

namespace {
using namespace tidemark;
using namespace std::chrono_literals;
struct E {
  int64_t k;
  int64_t v;
  std::string name;
};
// on_timer with another Collector than the function's Out: hides the base's
// and was never called.
struct WrongOnTimer : KeyedProcessFunction<int64_t, E, std::string> {
  void process_element(const E&, Context&, Collector<std::string>&) override {}
  void on_timer(Timestamp, OnTimerContext&, Collector<int>&) {}
};
// Flink's name for it.
struct FlinkOnTimer : KeyedProcessFunction<int64_t, E, std::string> {
  void process_element(const E&, Context&, Collector<std::string>&) override {}
  void onTimer(Timestamp, OnTimerContext&, Collector<std::string>&) {}
};
// Declared for another key type, and for another record type, than the
// stream's.
struct StringKeyed : KeyedProcessFunction<std::string, E, std::string> {
  void process_element(const E&, Context&, Collector<std::string>&) override {}
};
struct OtherInput : KeyedProcessFunction<int64_t, int64_t, std::string> {
  void process_element(const int64_t&, Context&, Collector<std::string>&) override {}
};
// Flink's argument order for add.
struct ReversedAdd {
  int64_t create_accumulator() const { return 0; }
  int64_t add(int64_t acc, const E&) const { return acc + 1; }
  int64_t get_result(const int64_t& acc) const { return acc; }
};
struct NoMerge {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const E&, int64_t acc) const { return acc + 1; }
  int64_t get_result(const int64_t& acc) const { return acc; }
};
struct MoveOnly {
  std::unique_ptr<int> p;
};
}  // namespace

int main() {
  StreamExecutionEnvironment env;
  auto s = env.from_collection(std::vector<E>{{1, 1, "a"}});
  auto keyed = s.key_by([](const E& e) { return e.k; });
  keyed.process(WrongOnTimer());
  keyed.process(FlinkOnTimer());
  keyed.process(StringKeyed());
  keyed.process(OtherInput());
  keyed.process([](const E&, KeyedProcessContext<int64_t>&, Collector<int>&) {});
  s.process(WrongOnTimer());
  s.map([](const E&) {});
  s.map([](const std::string&) { return 1; });
  s.filter([](const E& e) { return e.name; });
  s.flat_map([](const E& e) { return std::vector<int64_t>{e.v}; });
  s.flat_map([](const std::string&, Collector<int>&) {});
  s.add_sink([](E&) {});
  keyed.reduce([](const E& a, const E&) { return a.v; });
  keyed.sum(&E::name);
  keyed.window(TumblingEventTimeWindows::of(1s)).aggregate(ReversedAdd());
  keyed.window(EventTimeSessionWindows::with_gap(1s)).aggregate(NoMerge());
  s.key_by(0);
  env.from_collection(std::vector<MoveOnly>{});
  return 0;
}
