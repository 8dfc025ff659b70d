// tests/test_util.h: small helpers shared by tests.
#ifndef TM_TESTS_TEST_UTIL_H_
#define TM_TESTS_TEST_UTIL_H_

#include <algorithm>
#include <cstdlib>

namespace tidemark::testing {

// How many times to repeat a randomized or concurrency case: `n`, scaled by
// the environment variable TIDEMARK_STRESS_SCALE (e.g. 0.2 under
// ThreadSanitizer, 10 for a soak run); at least 1.
inline int StressIterations(int n) {
  const char* s = std::getenv("TIDEMARK_STRESS_SCALE");
  const double scale = s ? std::atof(s) : 1.0;
  return std::max(1, static_cast<int>(n * (scale > 0 ? scale : 1.0)));
}

}  // namespace tidemark::testing

#endif  // TM_TESTS_TEST_UTIL_H_
