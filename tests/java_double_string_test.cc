// print() and write_as_text() write a double or a float as Java's
// Double.toString / Float.toString does (Flink prints String.valueOf), checked
// against what the JDK itself wrote: tests/data/java_double_string_vectors.txt
// (from tests/java/JavaDoubleStringVectors.java; the file says how to
// regenerate it).  Java is not needed here.
//
// The vectors come from OpenJDK 17, whose algorithm (before JDK 19, bug
// JDK-4511638) sometimes prints digits beyond the shortest that reads back:
// 1.0E23 as 9.999999999999999E22, or of two shortest texts not the closest.
// JDK 19 and later print the shortest and closest, as tidemark does; where
// JDK 17 printed another text for the same value, the test checks that
// tidemark's reads back as the same value and is shorter, or as short and
// closer.
#include <gtest/gtest.h>

#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>
#include <tuple>
#include <utility>

#include "tidemark/tidemark.h"

#ifndef TIDEMARK_SOURCE_DIR
#error "TIDEMARK_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace tidemark {
namespace {

// The significant digits of a Java number's text ("-1.25E7" -> "125").
std::string Digits(const std::string& s) {
  std::string d;
  for (char c : s.substr(0, s.find('E')))
    if (c >= '0' && c <= '9') d += c;
  const size_t first = d.find_first_not_of('0');
  d = first == std::string::npos ? "" : d.substr(first);
  while (!d.empty() && d.back() == '0') d.pop_back();
  return d;
}

TEST(JavaDoubleString, EveryVectorAsTheJdkPrintsItOrItsShortestForm) {
  std::ifstream in(TIDEMARK_SOURCE_DIR "/tests/data/java_double_string_vectors.txt");
  ASSERT_TRUE(in) << "cannot open the vectors file";
  std::string line;
  int doubles = 0, floats = 0, jdk17_longer = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t a = line.find(' '), b = line.find(' ', a + 1);
    ASSERT_NE(b, std::string::npos) << line;
    const std::string hex = line.substr(a + 1, b - a - 1), java = line.substr(b + 1);
    uint64_t bits = 0;
    ASSERT_EQ(std::from_chars(hex.data(), hex.data() + hex.size(), bits, 16).ec, std::errc())
        << line;
    std::string got;
    bool same_value = false;
    long double exact = 0;
    if (line[0] == 'd') {
      const double v = std::bit_cast<double>(bits);
      got = internal::Format(v);
      same_value = std::strtod(got.c_str(), nullptr) == std::strtod(java.c_str(), nullptr);
      exact = v;
      ++doubles;
    } else {
      const float v = std::bit_cast<float>(static_cast<uint32_t>(bits));
      got = internal::Format(v);
      same_value = std::strtof(got.c_str(), nullptr) == std::strtof(java.c_str(), nullptr);
      exact = v;
      ++floats;
    }
    if (got == java) continue;
    // JDK 17's text where it is not the shortest, or of the shortest not
    // the closest to the value: tidemark's reads back as the same value and
    // has fewer digits, or as many and is closer (JDK 19's rule).
    ++jdk17_longer;
    const size_t got_digits = Digits(got).size(), java_digits = Digits(java).size();
    const long double got_off = std::fabs(std::strtold(got.c_str(), nullptr) - exact);
    const long double java_off = std::fabs(std::strtold(java.c_str(), nullptr) - exact);
    EXPECT_TRUE(same_value && java.find('E') != std::string::npos &&
                (got_digits < java_digits || (got_digits == java_digits && got_off < java_off)))
        << line << ": tidemark prints " << got;
  }
  EXPECT_GT(doubles, 4000);
  EXPECT_GT(floats, 2000);
  // Rare for doubles, frequent for large floats in JDK 17.
  EXPECT_LT(jdk17_longer, (doubles + floats) / 10);
}

TEST(JavaDoubleString, RecordsPrintAsFlinkPrintsThem) {
  EXPECT_EQ(internal::Format(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(internal::Format(35.0), "35.0");
  EXPECT_EQ(internal::Format(1e-7), "1.0E-7");
  EXPECT_EQ(internal::Format(123456789.0), "1.23456789E8");
  EXPECT_EQ(internal::Format(1e23), "1.0E23");  // JDK 19 and later (JDK 17: 9.999999999999999E22)
  EXPECT_EQ(internal::Format(4.9e-324), "4.9E-324");
  EXPECT_EQ(internal::Format(-0.0), "-0.0");
  EXPECT_EQ(internal::Format(0.1f), "0.1");
  EXPECT_EQ(internal::Format(16777216.0f), "1.6777216E7");
  EXPECT_EQ(internal::Format('x'), "x");                       // a char as the character, as Java's
  EXPECT_EQ(internal::Format(static_cast<int8_t>(65)), "65");  // a byte as a number
  EXPECT_EQ(internal::Format(std::make_pair(std::string("sum"), 1234567.89)), "(sum,1234567.89)");
  EXPECT_EQ(internal::Format(std::make_tuple(1, 2.5, true)), "(1,2.5,true)");
}

}  // namespace
}  // namespace tidemark
