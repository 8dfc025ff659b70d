// Reading a timeline page (tools/cli/trace.cc) in tests: how many events its
// marks stand for.
#ifndef TIDEMARK_TESTS_TIMELINE_PAGE_UTIL_H_
#define TIDEMARK_TESTS_TIMELINE_PAGE_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/numbers.h"

namespace tidemark::testing {

// Sum of data-count (1 where absent) over the elements whose opening tag
// starts with `prefix` (a merged mark says how many events it stands for;
// an unreadable count makes the sum hugely negative, so a test fails).
inline int64_t CountMarks(const std::string& html, const std::string& prefix) {
  int64_t total = 0;
  for (size_t at = html.find(prefix); at != std::string::npos; at = html.find(prefix, at + 1)) {
    const std::string tag = html.substr(at, html.find('>', at) - at);
    const size_t c = tag.find("data-count='");
    int64_t n = 1;
    if (c != std::string::npos) {
      const size_t from = c + 12;
      if (!absl::SimpleAtoi(tag.substr(from, tag.find('\'', from) - from), &n)) n = -1000000;
    }
    total += n;
  }
  return total;
}

}  // namespace tidemark::testing

#endif  // TIDEMARK_TESTS_TIMELINE_PAGE_UTIL_H_
