// bench/nexmark/model.h
//
// The Nexmark data model (Person, Auction, Bid and the Event that holds one of
// them), as nexmark-flink's model classes and Beam's Nexmark define it, and
// the small reflection the suite uses for every row type it moves: a row
// lists its fields once with NEXMARK_FIELDS(a, b, c), which gives it
//   Tie()            the fields as a tuple of references (const and not),
//   a JSON object    nexmark::ToJson(row), field names as written,
//   a hash           nexmark::RowHash(row), order-independent digests,
//   equality         operator==,
//   a StateCodec     so rows can sit in checkpointed keyed state.
// Times are epoch milliseconds (UTC); JSON prints them as Nexmark's
// "yyyy-MM-dd HH:mm:ss.SSS".
#ifndef TM_BENCH_NEXMARK_MODEL_H_
#define TM_BENCH_NEXMARK_MODEL_H_

#include <compare>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tidemark/tidemark.h"

namespace nexmark {

// A field that JSON prints as a date-time rather than a number.
struct Millis {
  int64_t ms = 0;
  friend bool operator==(const Millis&, const Millis&) = default;
  friend auto operator<=>(const Millis&, const Millis&) = default;
};

// An exact decimal with three places, as Flink's DECIMAL(23, 3) that q1 and
// q14's `0.908 * price` gives (a BIGINT times DECIMAL(4, 3)): JSON prints it
// as 90.800, not as the double 90.799999999999997.
struct Decimal3 {
  int64_t thousandths = 0;
  friend bool operator==(const Decimal3&, const Decimal3&) = default;
  friend auto operator<=>(const Decimal3&, const Decimal3&) = default;
};

// The text of the generated fields that every bid carries (channel, url,
// extra), and of an auction's item name, description and extra and a
// person's extra: an immutable string that is either a view of characters living as
// long as the process (the generator's pools: the channel names, their urls,
// one buffer of pseudorandom letters that each `extra` is a slice of, one of
// words with spaces that item names and descriptions are slices of) or
// its own heap copy (text from anywhere else: decoded from a checkpoint or
// another rank, built by a query).  Copying a view copies two words, so a bid
// costs no allocation to generate, to move or to copy into a result row.  A
// view of a pool entry also carries the entry's hash (HashBytes of its
// characters, computed once per process), so that digesting a bid does not
// read its url from a pool of 10 000.
uint64_t HashBytes(std::string_view s);
class Text {
 public:
  Text() = default;
  // A copy of `s` (owned).
  explicit Text(std::string_view s) { Assign(s); }
  // A view of `s`, whose characters must outlive every copy (static pools).
  static Text View(std::string_view s) {
    Text t;
    t.data_ = s.data();
    t.size_ = static_cast<uint32_t>(s.size());
    return t;
  }
  // The same, with hash == HashBytes(s) known.
  static Text View(std::string_view s, uint64_t hash) {
    Text t = View(s);
    t.hash_ = hash;
    t.hashed_ = true;
    return t;
  }
  Text(const Text& o) : hashed_(o.hashed_), hash_(o.hash_) {
    if (o.owned_) {
      Assign(o.view());
    } else {
      data_ = o.data_;
      size_ = o.size_;
    }
  }
  Text(Text&& o) noexcept
      : data_(o.data_), size_(o.size_), owned_(o.owned_), hashed_(o.hashed_), hash_(o.hash_) {
    o.data_ = "";
    o.size_ = 0;
    o.owned_ = false;
    o.hashed_ = false;
  }
  Text& operator=(const Text& o) {
    if (this != &o) {
      Text t(o);
      Swap(t);
    }
    return *this;
  }
  Text& operator=(Text&& o) noexcept {
    Text t(std::move(o));
    Swap(t);
    return *this;
  }
  ~Text() {
    if (owned_) delete[] data_;
  }

  std::string_view view() const { return std::string_view(data_, size_); }
  operator std::string_view() const { return view(); }  // NOLINT: implicit by design
  std::string str() const { return std::string(data_, size_); }
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const char* begin() const { return data_; }
  const char* end() const { return data_ + size_; }
  char operator[](size_t i) const { return data_[i]; }
  bool owned() const { return owned_; }
  // HashBytes(view()).
  uint64_t Hash() const { return hashed_ ? hash_ : HashBytes(view()); }

  friend bool operator==(const Text& a, const Text& b) { return a.view() == b.view(); }
  friend bool operator==(const Text& a, std::string_view b) { return a.view() == b; }
  friend auto operator<=>(const Text& a, const Text& b) { return a.view() <=> b.view(); }

 private:
  void Assign(std::string_view s) {
    if (s.empty()) return;
    char* p = new char[s.size()];
    std::memcpy(p, s.data(), s.size());
    data_ = p;
    size_ = static_cast<uint32_t>(s.size());
    owned_ = true;
  }
  void Swap(Text& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(owned_, o.owned_);
    std::swap(hash_, o.hash_);
    std::swap(hashed_, o.hashed_);
  }
  const char* data_ = "";
  uint32_t size_ = 0;  // text of 4 GiB or more is not generated
  bool owned_ = false;
  bool hashed_ = false;
  uint64_t hash_ = 0;
};

#define NEXMARK_FIELDS(...)                                \
  auto Tie() const { return std::tie(__VA_ARGS__); }       \
  auto Tie() { return std::tie(__VA_ARGS__); }             \
  static constexpr const char* kFieldNames = #__VA_ARGS__; \
  using NexmarkRowTag = void

template <typename T>
concept Row = requires {
  typename T::NexmarkRowTag;
};

template <Row R>
bool operator==(const R& a, const R& b) {
  return a.Tie() == b.Tie();
}

struct Person {
  int64_t id = 0;
  std::string name;
  std::string emailAddress;
  std::string creditCard;
  std::string city;
  std::string state;
  Millis dateTime;
  Text extra;
  NEXMARK_FIELDS(id, name, emailAddress, creditCard, city, state, dateTime, extra);
};

struct Auction {
  int64_t id = 0;
  Text itemName;
  Text description;
  int64_t initialBid = 0;
  int64_t reserve = 0;
  Millis dateTime;
  Millis expires;
  int64_t seller = 0;
  int64_t category = 0;
  Text extra;
  NEXMARK_FIELDS(id, itemName, description, initialBid, reserve, dateTime, expires, seller,
                 category, extra);
};

struct Bid {
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  Text channel;
  Text url;
  Millis dateTime;
  Text extra;
  NEXMARK_FIELDS(auction, bidder, price, channel, url, dateTime, extra);
};

// One generated event: exactly one of the three (nexmark-flink's Event with
// its event_type).
struct Event {
  std::variant<Person, Auction, Bid> v;
  int type() const { return static_cast<int>(v.index()); }  // 0 person, 1 auction, 2 bid
  const Person* person() const { return std::get_if<Person>(&v); }
  const Auction* auction() const { return std::get_if<Auction>(&v); }
  const Bid* bid() const { return std::get_if<Bid>(&v); }
  int64_t timestamp() const;
  bool operator==(const Event&) const = default;
};

// --- JSON and hashing ------------------------------------------------------

// "2015-07-15 00:00:00.000" (UTC).
std::string FormatDateTime(int64_t ms);
// "2015-07-15" / "00:00" (UTC), as Flink's DATE_FORMAT(ts, 'yyyy-MM-dd') / 'HH:mm'.
std::string FormatDate(int64_t ms);
std::string FormatHourMinute(int64_t ms);
void AppendJsonString(std::string& out, std::string_view s);
// Nexmark's event JSON: {"event_type":2,"person":null,"auction":null,"bid":{...}}.
std::string EventToJson(const Event& e);

inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

namespace detail {
inline void AppendValue(std::string& out, int64_t v) { out += std::to_string(v); }
inline void AppendValue(std::string& out, int v) { out += std::to_string(v); }
inline void AppendValue(std::string& out, bool v) { out += v ? "true" : "false"; }
void AppendValue(std::string& out, double v);
inline void AppendValue(std::string& out, const std::string& v) { AppendJsonString(out, v); }
inline void AppendValue(std::string& out, const Text& v) { AppendJsonString(out, v.view()); }
inline void AppendValue(std::string& out, const Millis& v) {
  AppendJsonString(out, FormatDateTime(v.ms));
}
void AppendValue(std::string& out, const Decimal3& v);
template <Row R>
void AppendValue(std::string& out, const R& r);
template <typename V>
void AppendValue(std::string& out, const std::vector<V>& v) {
  out += '[';
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ',';
    AppendValue(out, v[i]);
  }
  out += ']';
}

std::vector<std::string_view> FieldNames(const char* names);

template <Row R>
void AppendValue(std::string& out, const R& r) {
  static const std::vector<std::string_view> names = FieldNames(R::kFieldNames);
  out += '{';
  size_t i = 0;
  std::apply(
      [&](const auto&... f) {
        ((out += (i ? ",\"" : "\""), out += names[i], out += "\":", AppendValue(out, f), ++i), ...);
      },
      r.Tie());
  out += '}';
}

inline uint64_t HashValue(int64_t v) { return Mix(static_cast<uint64_t>(v)); }
inline uint64_t HashValue(int v) { return Mix(static_cast<uint64_t>(v)); }
inline uint64_t HashValue(bool v) { return Mix(v ? 1 : 2); }
inline uint64_t HashValue(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return Mix(b);
}
inline uint64_t HashValue(const std::string& v) { return HashBytes(v); }
inline uint64_t HashValue(const Text& v) { return v.Hash(); }
inline uint64_t HashValue(const Millis& v) { return Mix(static_cast<uint64_t>(v.ms) ^ 0x5555); }
inline uint64_t HashValue(const Decimal3& v) {
  return Mix(static_cast<uint64_t>(v.thousandths) ^ 0xdec3);
}
// The fields' hashes are independent of each other (they run in parallel);
// only a multiply-add chains them, in field order, before one final mix.
template <Row R>
uint64_t HashValue(const R& r) {
  uint64_t h = 0x1234567;
  std::apply([&](const auto&... f) { ((h = h * 0x9e3779b97f4a7c15ULL + HashValue(f)), ...); },
             r.Tie());
  return Mix(h);
}
}  // namespace detail

template <Row R>
std::string ToJson(const R& r) {
  std::string out;
  detail::AppendValue(out, r);
  return out;
}
template <Row R>
uint64_t RowHash(const R& r) {
  return detail::HashValue(r);
}

}  // namespace nexmark

// Checkpointed state of any row type: its fields in order.
template <typename T>
struct tidemark::StateCodec<T, std::enable_if_t<nexmark::Row<T>>> {
  static void Encode(internal::StateWriter& w, const T& v) {
    std::apply([&](const auto&... f) { (internal::Encode(w, f), ...); }, v.Tie());
  }
  static T Decode(internal::StateReader& r) {
    T v;
    std::apply(
        [&](auto&... f) { ((f = internal::Decode<std::remove_reference_t<decltype(f)>>(r)), ...); },
        v.Tie());
    return v;
  }
};
template <>
struct tidemark::StateCodec<nexmark::Text> {
  static void Encode(internal::StateWriter& w, const nexmark::Text& v) { w.PutBytes(v.view()); }
  static nexmark::Text Decode(internal::StateReader& r) {
    return nexmark::Text(r.GetBytes("text"));
  }
};
template <>
struct tidemark::StateCodec<nexmark::Millis> {
  static void Encode(internal::StateWriter& w, const nexmark::Millis& v) {
    internal::Encode(w, v.ms);
  }
  static nexmark::Millis Decode(internal::StateReader& r) {
    return nexmark::Millis{internal::Decode<int64_t>(r)};
  }
};
template <>
struct tidemark::StateCodec<nexmark::Decimal3> {
  static void Encode(internal::StateWriter& w, const nexmark::Decimal3& v) {
    internal::Encode(w, v.thousandths);
  }
  static nexmark::Decimal3 Decode(internal::StateReader& r) {
    return nexmark::Decimal3{internal::Decode<int64_t>(r)};
  }
};
template <>
struct tidemark::StateCodec<nexmark::Event> {
  static void Encode(internal::StateWriter& w, const nexmark::Event& v) {
    internal::Encode(w, v.v);
  }
  static nexmark::Event Decode(internal::StateReader& r) {
    return nexmark::Event{
        internal::Decode<std::variant<nexmark::Person, nexmark::Auction, nexmark::Bid>>(r)};
  }
};

#endif  // TM_BENCH_NEXMARK_MODEL_H_
