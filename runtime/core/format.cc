// runtime/core/format.cc
#include "tidemark/runtime/core/format.h"

#include <charconv>
#include <cmath>
#include <sstream>
#include <string_view>
#include <system_error>

namespace tidemark::internal {

std::string StreamedText(void (*write)(std::ostream& os, const void* value), const void* value) {
  std::ostringstream os;
  write(os, value);
  return os.str();
}

namespace {

// The significant digits (no leading or trailing zeros) and the decimal
// exponent of the first digit of `a` > 0 written by to_chars in scientific
// form, shortest (precision < 0) or with `precision` digits after the point.
template <typename F>
void ScientificDigits(F a, int precision, std::string* digits, int* exponent) {
  char buf[64];
  const std::to_chars_result r =
      precision < 0
          ? std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific)
          : std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific, precision);
  const std::string_view s(buf, static_cast<size_t>(r.ptr - buf));
  const size_t e = s.find('e');
  digits->clear();
  for (char c : s.substr(0, e))
    if (c != '.') digits->push_back(c);
  while (digits->size() > 1 && digits->back() == '0') digits->pop_back();
  int exp = 0;
  std::string_view x = s.substr(e + 1);
  if (!x.empty() && x.front() == '+') x.remove_prefix(1);
  std::from_chars(x.data(), x.data() + x.size(), exp);
  *exponent = exp;
}

// Java's Double.toString / Float.toString (JDK 19 and later; JDK 17 prints
// a digit more for some values: about 5 in 60 000 random doubles but 7% of
// random floats, so a Flink on Java 11 or 17 prints many floats otherwise): the
// shortest decimal that reads back as the value (of one or two digits, the
// closest, when one would do); plain from 10^-3 up to 10^7, else
// d.dddE<n>; at least one digit after the point.
template <typename F>
std::string JavaFloating(F v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  const F a = std::fabs(v);
  std::string digits;
  int exp = 0;
  ScientificDigits(a, -1, &digits, &exp);
  if (digits.size() == 1) {
    // Java takes the closest decimal of one or two digits that reads back
    // as the value (Double.MIN_VALUE is 4.9E-324, not 5.0E-324).
    std::string two;
    int exp2 = 0;
    ScientificDigits(a, 1, &two, &exp2);
    char buf[64];
    const std::to_chars_result r =
        std::to_chars(buf, buf + sizeof buf, a, std::chars_format::scientific, 1);
    F back = 0;
    std::from_chars(buf, r.ptr, back, std::chars_format::scientific);
    if (back == a) {
      digits = two;
      exp = exp2;
    }
  }
  std::string out = v < 0 ? "-" : "";
  if (a >= static_cast<F>(1e-3) && a < static_cast<F>(1e7)) {
    const int point = exp + 1;  // digits before the decimal point
    if (point <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-point), '0');
      out += digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(point) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(point));
      out += '.';
      out += digits.substr(static_cast<size_t>(point));
    }
  } else {
    out += digits[0];
    out += '.';
    out += digits.size() > 1 ? digits.substr(1) : "0";
    out += 'E';
    out += std::to_string(exp);
  }
  return out;
}

}  // namespace

std::string JavaDoubleString(double v) { return JavaFloating(v); }
std::string JavaFloatString(float v) { return JavaFloating(v); }

}  // namespace tidemark::internal
