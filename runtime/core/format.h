// runtime/core/format.h
//
// Format(value): the text print() and write_as_text() use for a record, like
// Java's toString.  Strings print as they are, integers as numbers, double
// and float as Java's Double.toString / Float.toString (1.0, 0.1, 1.0E-7),
// char as the character, bool as
// true/false, pairs and tuples as "(a,b)" (Flink's Tuple2.toString), and any
// type with an operator<< through it.  Other types need a formatter passed to
// the sink.
#ifndef TM_RUNTIME_FORMAT_H_
#define TM_RUNTIME_FORMAT_H_

#include <functional>
#include <ostream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tidemark {

namespace internal {
template <typename T, typename = void>
struct IsStreamable : std::false_type {};
template <typename T>
struct IsStreamable<
    T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>>
    : std::true_type {};

template <typename T>
struct IsTupleLike : std::false_type {};
template <typename... A>
struct IsTupleLike<std::tuple<A...>> : std::true_type {};
template <typename A, typename B>
struct IsTupleLike<std::pair<A, B>> : std::true_type {};

template <typename T>
constexpr bool kFormattable = std::is_arithmetic_v<T> || std::is_convertible_v<T, std::string> ||
                              IsTupleLike<T>::value || IsStreamable<T>::value;

// The text `write` puts on a stream for `value` (format.cc): out of line,
// so that <sstream> is not in the reach of every job (compile cost, issue 24).
std::string StreamedText(void (*write)(std::ostream& os, const void* value), const void* value);
// Java's Double.toString and Float.toString (format.cc): 0.30000000000000004,
// 1234567.89, 1.0E-7, 1.23456789E8, 100.0, NaN, Infinity, -0.0.
std::string JavaDoubleString(double v);
std::string JavaFloatString(float v);

template <typename T>
std::string Format(const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_convertible_v<const T&, std::string>) {
    return std::string(v);
  } else if constexpr (std::is_same_v<T, char>) {
    return std::string(1, v);  // a Java char prints as itself
  } else if constexpr (std::is_same_v<T, float>) {
    return JavaFloatString(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    return JavaDoubleString(static_cast<double>(v));
  } else if constexpr (std::is_arithmetic_v<T>) {
    return absl::StrCat(v);
  } else if constexpr (IsTupleLike<T>::value) {
    std::string out = "(";
    bool first = true;
    std::apply(
        [&](const auto&... parts) {
          ((out += (first ? "" : ","), out += Format(parts), first = false), ...);
        },
        v);
    return out + ")";
  } else if constexpr (IsStreamable<T>::value) {
    return StreamedText([](std::ostream& os, const void* p) { os << *static_cast<const T*>(p); },
                        &v);
  } else {
    static_assert(IsStreamable<T>::value,
                  "tidemark::Format: give this type an operator<< or pass a formatter");
    return {};
  }
}

}  // namespace internal
// The formatter print() and write_as_text() use when none is given.  Only
// instantiated where it is used, so a type without operator<< compiles as
// long as a formatter is passed.
template <typename T>
std::function<std::string(const T&)> DefaultFormatter() {
  static_assert(internal::kFormattable<T>,
                "tidemark: this record type has no operator<<; pass a formatter: "
                ".print(name, [](const T& v) { return ...; })");
  return [](const T& v) { return internal::Format(v); };
}

}  // namespace tidemark

#endif  // TM_RUNTIME_FORMAT_H_
