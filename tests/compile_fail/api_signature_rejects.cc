// Wrong function signatures in the job API must fail with tidemark's one-line
// message saying what is expected: each api_signature_rejects_<case> ctest
// (tests/CMakeLists.txt) builds this file with one TIDEMARK_REJECT_<case>
// defined and passes when the compiler prints that message.  Never built by
// default.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidemark/tidemark.h"

namespace {
using namespace tidemark;
using namespace std::chrono_literals;
struct E {
  int64_t k;
  int64_t v;
};
struct OnlyMap1 {
  int64_t map1(const E& e) { return e.v; }
};
}  // namespace

int main() {
  StreamExecutionEnvironment env;
  auto s = env.from_collection(std::vector<E>{{1, 1}});
  auto keyed = s.key_by([](const E& e) { return e.k; });
#if defined(TIDEMARK_REJECT_window_process)
  // The window's elements missing: (key, window, ctx, out).
  keyed.window(TumblingEventTimeWindows::of(1s))
      .process([](const int64_t&, const TimeWindow&, WindowContext&, Collector<int64_t>&) {});
#elif defined(TIDEMARK_REJECT_window_reduce)
  keyed.window(TumblingEventTimeWindows::of(1s)).reduce([](const E& a) { return a; });
#elif defined(TIDEMARK_REJECT_co_map)
  s.connect(s).map(OnlyMap1());
#elif defined(TIDEMARK_REJECT_interval_join)
  keyed.interval_join(keyed).between(-1s, 1s).process([](const E&, Collector<int64_t>&) {});
#elif defined(TIDEMARK_REJECT_open_signature)
  // open(RuntimeContext&): not callable with the const context it gets.
  struct BadOpen {
    void open(RuntimeContext&) {}
    int64_t operator()(const E& e) const { return e.v; }
  };
  s.map(BadOpen());
#elif defined(TIDEMARK_REJECT_key_string_view)
  // A key pointing into the record (windows and state keep keys).
  env.from_collection(std::vector<std::string>{"a"}).key_by([](const std::string& v) {
    return std::string_view(v);
  });
#elif defined(TIDEMARK_REJECT_key_char_pointer)
  env.from_collection(std::vector<std::string>{"a"}).key_by([](const std::string& v) {
    return std::make_pair(v.c_str(), 1);
  });
#else
#error "define one TIDEMARK_REJECT_<case>"
#endif
  return 0;
}
