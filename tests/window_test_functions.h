// tests/window_test_functions.h: the key selector, reduce function and
// aggregate shared by the window operator tests over (key, value) pairs.
#ifndef TM_TESTS_WINDOW_TEST_FUNCTIONS_H_
#define TM_TESTS_WINDOW_TEST_FUNCTIONS_H_

#include <string>
#include <utility>

namespace tidemark::testing {

using E = std::pair<std::string, int>;

struct KeyOfE {
  std::string operator()(const E& e) const { return e.first; }
};
struct SumE {
  E operator()(const E& a, const E& b) const { return E(a.first, a.second + b.second); }
};

// An aggregate: (count, sum) -> "count/sum".
struct CountSum {
  std::pair<int, int> create_accumulator() const { return {0, 0}; }
  std::pair<int, int> add(const E& e, std::pair<int, int> acc) const {
    return {acc.first + 1, acc.second + e.second};
  }
  std::string get_result(const std::pair<int, int>& acc) const {
    return std::to_string(acc.first) + "/" + std::to_string(acc.second);
  }
  std::pair<int, int> merge(std::pair<int, int> a, std::pair<int, int> b) const {
    return {a.first + b.first, a.second + b.second};
  }
};

}  // namespace tidemark::testing

#endif  // TM_TESTS_WINDOW_TEST_FUNCTIONS_H_
