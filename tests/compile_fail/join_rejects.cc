// Common mistakes in a window join or co-group must fail to compile with
// tidemark's one-line message: each join_rejects_<case> ctest
// (tests/CMakeLists.txt) builds this file with one TIDEMARK_REJECT_<case>
// defined and passes when the compiler prints that case's message.  Never
// built by default.
#include <string>
#include <vector>

#include "tidemark/tidemark.h"

namespace {
struct A {
  int key;
};
struct B {
  std::string key;
};
}  // namespace

int main() {
  using namespace tidemark;
  StreamExecutionEnvironment env;
  auto a = env.from_elements(A{1});
  auto b = env.from_elements(B{"1"});
#if defined(TIDEMARK_REJECT_key_types)
  // The two key selectors return different types.
  a.join(b).where([](const A& x) { return x.key; }).equal_to([](const B& y) { return y.key; });
#elif defined(TIDEMARK_REJECT_join_signature)
  // A join function that takes the inputs the other way round.
  a.join(b)
      .where([](const A& x) { return std::to_string(x.key); })
      .equal_to([](const B& y) { return y.key; })
      .window(TumblingEventTimeWindows::of(Duration(10)))
      .apply([](const B&, const A&) { return 1; });
#elif defined(TIDEMARK_REJECT_co_group_signature)
  // A co-group function without the collector.
  a.co_group(b)
      .where([](const A& x) { return std::to_string(x.key); })
      .equal_to([](const B& y) { return y.key; })
      .window(TumblingEventTimeWindows::of(Duration(10)))
      .apply([](const std::vector<A>&, const std::vector<B>&) { return 1; });
#else
#error "define one TIDEMARK_REJECT_<case>"
#endif
  return 0;
}
