// bench/nexmark/model.cc: see model.h.
#include "bench/nexmark/model.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>

namespace nexmark {

namespace {
struct Civil {
  int64_t y;
  int m, d, hh, mm, ss, ms;
};
// Howard Hinnant's days_from_civil inverse (proleptic Gregorian, UTC).
Civil ToCivil(int64_t t) {
  int64_t days = t >= 0 ? t / 86400000 : -((-t + 86399999) / 86400000);
  int64_t rem = t - days * 86400000;
  Civil c;
  c.ms = static_cast<int>(rem % 1000);
  rem /= 1000;
  c.ss = static_cast<int>(rem % 60);
  rem /= 60;
  c.mm = static_cast<int>(rem % 60);
  c.hh = static_cast<int>(rem / 60);
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  c.d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  c.m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  c.y = yoe + era * 400 + (c.m <= 2);
  return c;
}
}  // namespace

std::string FormatDateTime(int64_t ms) {
  const Civil c = ToCivil(ms);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%04" PRId64 "-%02d-%02d %02d:%02d:%02d.%03d", c.y, c.m, c.d, c.hh,
                c.mm, c.ss, c.ms);
  return buf;
}
// The per-record formats (q15-q17 key by the day, q16 keeps the minute):
// written digit by digit, not through snprintf.
namespace {
inline void Put2(char* p, int v) {
  p[0] = static_cast<char>('0' + v / 10);
  p[1] = static_cast<char>('0' + v % 10);
}
}  // namespace
std::string FormatDate(int64_t ms) {
  const Civil c = ToCivil(ms);
  if (c.y < 0 || c.y > 9999) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%04" PRId64 "-%02d-%02d", c.y, c.m, c.d);
    return buf;
  }
  char buf[10];
  const int y = static_cast<int>(c.y);
  Put2(buf, y / 100);
  Put2(buf + 2, y % 100);
  buf[4] = '-';
  Put2(buf + 5, c.m);
  buf[7] = '-';
  Put2(buf + 8, c.d);
  return std::string(buf, sizeof buf);
}
std::string FormatHourMinute(int64_t ms) {
  const Civil c = ToCivil(ms);
  char buf[5];
  Put2(buf, c.hh);
  buf[2] = ':';
  Put2(buf + 3, c.mm);
  return std::string(buf, sizeof buf);
}

void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

std::string EventToJson(const Event& e) {
  std::string out = "{\"event_type\":" + std::to_string(e.type());
  out += ",\"person\":";
  if (const Person* p = e.person()) {
    detail::AppendValue(out, *p);
  } else {
    out += "null";
  }
  out += ",\"auction\":";
  if (const Auction* a = e.auction()) {
    detail::AppendValue(out, *a);
  } else {
    out += "null";
  }
  out += ",\"bid\":";
  if (const Bid* b = e.bid()) {
    detail::AppendValue(out, *b);
  } else {
    out += "null";
  }
  out += '}';
  return out;
}

uint64_t HashBytes(std::string_view s) {
  // Sixteen bytes a step in two independent lanes (one multiply each, so the
  // two chains overlap), the tail zero-padded, then mixed: the same in every
  // process (the digests of MPI ranks are added up).
  uint64_t h1 = 0xcbf29ce484222325ULL ^ (s.size() * 0x9e3779b97f4a7c15ULL);
  uint64_t h2 = 0x84222325cbf29ce4ULL;
  const char* p = s.data();
  size_t n = s.size();
  for (; n >= 16; p += 16, n -= 16) {
    uint64_t w1, w2;
    std::memcpy(&w1, p, 8);
    std::memcpy(&w2, p + 8, 8);
    h1 = (h1 ^ w1) * 0xff51afd7ed558ccdULL;
    h2 = (h2 ^ w2) * 0xc4ceb9fe1a85ec53ULL;
    h1 ^= h1 >> 29;
    h2 ^= h2 >> 31;
  }
  if (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h1 = (h1 ^ w) * 0xff51afd7ed558ccdULL;
    h1 ^= h1 >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h2 = (h2 ^ w) * 0xc4ceb9fe1a85ec53ULL;
  }
  return Mix(h1 ^ Mix(h2));
}

namespace detail {
void AppendValue(std::string& out, const Decimal3& v) {
  const int64_t t = v.thousandths;
  const uint64_t a = t < 0 ? 0 - static_cast<uint64_t>(t) : static_cast<uint64_t>(t);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", t < 0 ? "-" : "",
                static_cast<unsigned long long>(a / 1000),
                static_cast<unsigned long long>(a % 1000));
  out += buf;
}

void AppendValue(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

std::vector<std::string_view> FieldNames(const char* names) {
  std::vector<std::string_view> out;
  std::string_view s(names);
  while (!s.empty()) {
    const size_t comma = s.find(',');
    std::string_view f = s.substr(0, comma);
    while (!f.empty() && (f.front() == ' ' || f.front() == '\n')) f.remove_prefix(1);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\n')) f.remove_suffix(1);
    out.push_back(f);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}
}  // namespace detail

}  // namespace nexmark
