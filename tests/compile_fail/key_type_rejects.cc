// A struct key that lacks what key_by needs (a Java-compatible hashCode,
// Abseil hashing, operator==) must fail with one static_assert naming all that
// is missing, and no pages of Abseil errors after it: each key_type_rejects_
// <case> ctest (tests/CMakeLists.txt) builds this file with one
// TIDEMARK_REJECT_<case> defined, passes when the compiler prints that message
// and fails when an error comes from Abseil's headers.  Never built by default.
#include <chrono>
#include <cstdint>
#include <utility>
#include <vector>

#include "tidemark/tidemark.h"

namespace user {
struct Point {
  int32_t x = 0;
  int32_t y = 0;
#if !defined(TIDEMARK_REJECT_no_equal) && !defined(TIDEMARK_REJECT_all_missing) && \
    !defined(TIDEMARK_REJECT_hash_and_equal)
  bool operator==(const Point&) const = default;
#endif
#if !defined(TIDEMARK_REJECT_no_hash) && !defined(TIDEMARK_REJECT_all_missing) && \
    !defined(TIDEMARK_REJECT_hash_and_equal)
  template <typename H>
  friend H AbslHashValue(H h, const Point& p) {
    return H::combine(std::move(h), p.x, p.y);
  }
#endif
};
#if !defined(TIDEMARK_REJECT_no_java) && !defined(TIDEMARK_REJECT_all_missing)
int32_t JavaHashCode(const Point& p) { return 31 * p.x + p.y; }
#endif
}  // namespace user

namespace {
struct Reading {
  user::Point at;
  int64_t ts = 0;
  int64_t v = 0;
};
}  // namespace

int main() {
  using namespace tidemark;
  using namespace std::chrono_literals;
  StreamExecutionEnvironment env;
  env.from_collection(std::vector<Reading>{})
      .key_by([](const Reading& r) { return r.at; })
      .window(TumblingEventTimeWindows::of(5s))
      .reduce([](const Reading& a, const Reading& b) {
        return Reading{a.at, a.ts, a.v + b.v};
      })
      .add_sink([](Reading&&) {});
#if !defined(TIDEMARK_REJECT_all_missing) && !defined(TIDEMARK_REJECT_no_java) && \
    !defined(TIDEMARK_REJECT_no_hash) && !defined(TIDEMARK_REJECT_no_equal) &&    \
    !defined(TIDEMARK_REJECT_hash_and_equal)
#error "define one TIDEMARK_REJECT_<case>"
#endif
  return 0;
}
