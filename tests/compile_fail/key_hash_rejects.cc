// Key types with no Java-compatible hashCode must not compile as keys: each
// key_hash_rejects_<case> ctest (tests/CMakeLists.txt) builds this file with
// one TIDEMARK_REJECT_<case> defined and passes when the compiler prints
// tidemark's message for that case.  Never built by default.
#include <array>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

#include "tidemark/partitioning/key_groups.h"

namespace {
struct NoJavaHashCode {
  int a = 0;
};
enum class Color { kRed };
}  // namespace

int main() {
  int g = 0;
#if defined(TIDEMARK_REJECT_user_type)
  g = tidemark::KeyGroupOf(NoJavaHashCode{}, 128);
#elif defined(TIDEMARK_REJECT_unsigned)
  g = tidemark::KeyGroupOf(uint32_t{1}, 128);
#elif defined(TIDEMARK_REJECT_uint64)
  g = tidemark::SubtaskForKey(uint64_t{1}, 128, 4);
#elif defined(TIDEMARK_REJECT_enum)
  g = tidemark::KeyGroupOf(Color::kRed, 128);
#elif defined(TIDEMARK_REJECT_long_double)
  g = tidemark::KeyGroupOf(1.0L, 128);
#elif defined(TIDEMARK_REJECT_char32)
  g = tidemark::KeyGroupOf(U'x', 128);
#elif defined(TIDEMARK_REJECT_pair_field)
  g = tidemark::KeyGroupOf(std::pair<std::string, unsigned>("a", 1u), 128);
#elif defined(TIDEMARK_REJECT_tuple26)
  g = tidemark::KeyGroupOf(std::tuple_cat(std::tuple<int, int>(), std::array<int, 24>{}), 128);
#else
#error "define one TIDEMARK_REJECT_<case>"
#endif
  return g;
}
