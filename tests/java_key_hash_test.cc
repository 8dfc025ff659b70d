// Keys hash as Java does, for every key type key_by accepts: each test checks
// (Longer than 600 lines: one test per Java key type, all reading the one vectors file through
// shared parsing.)
// one C++ key type (or family) against the vectors that a Java program wrote
// with the JDK's own hashCode() and String decoder,
// tests/data/java_key_hash_vectors.txt (from tests/java/JavaKeyHashVectors.java;
// the file says how to regenerate it).  Java is not needed here: the test only
// reads the committed file.
//
// For every vector it checks the Java hashCode (KeyHash), the Flink key group
// (KeyGroupOf) at several max parallelisms, and the subtask at several
// parallelisms, both through SubtaskForKey and through the KeyGroupPartitioner
// that key_by uses.
#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <typeinfo>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/partitioning/key_groups.h"
#include "tidemark/partitioning/partitioner.h"

#ifndef TIDEMARK_SOURCE_DIR
#error "TIDEMARK_SOURCE_DIR must name the source tree (tests/CMakeLists.txt defines it)"
#endif

namespace tidemark {
using namespace internal;
namespace {

// ----------------------------------------------------------------- vectors

std::vector<std::string_view> Split(std::string_view text, char sep, bool skip_empty) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      if (!skip_empty || i > start) out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

template <typename T>
bool ParseDecimal(std::string_view text, T* out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

struct Vector {
  int line = 0;
  std::string category;
  std::string value;  // typed text, e.g. "(utf8:61,int:1)"
  int32_t hash = 0;
  std::vector<std::pair<int, int>> key_groups;  // max parallelism, key group
  std::vector<std::array<int, 3>> subtasks;     // max parallelism, parallelism, subtask
};

const char kVectorsPath[] = TIDEMARK_SOURCE_DIR "/tests/data/java_key_hash_vectors.txt";

std::vector<Vector> LoadVectors() {
  std::ifstream in(kVectorsPath);
  if (!in) ADD_FAILURE() << "cannot open " << kVectorsPath;
  std::vector<Vector> out;
  std::string text;
  int line = 0;
  while (std::getline(in, text)) {
    ++line;
    std::string_view body = text;
    body = body.substr(0, body.find('#'));
    std::vector<std::string_view> tokens = Split(body, ' ', /*skip_empty=*/true);
    if (tokens.empty()) continue;
    Vector v;
    v.line = line;
    bool has_hash = false;
    bool ok = tokens.size() >= 3;
    if (ok) {
      v.category = std::string(tokens[0]);
      v.value = std::string(tokens[1]);
    }
    for (size_t i = 2; ok && i < tokens.size(); ++i) {
      const std::string_view t = tokens[i];
      const size_t eq = t.find('=');
      ok = eq != std::string_view::npos;
      if (!ok) break;
      const std::string_view name = t.substr(0, eq);
      int value = 0;
      ok = ParseDecimal(t.substr(eq + 1), &value);
      std::vector<std::string_view> parts = Split(name, '/', /*skip_empty=*/false);
      std::vector<int> numbers;
      for (size_t k = 1; ok && k < parts.size(); ++k) {
        int n = 0;
        ok = ParseDecimal(parts[k], &n);
        numbers.push_back(n);
      }
      if (!ok) break;
      if (parts[0] == "hash" && numbers.empty()) {
        v.hash = value;
        has_hash = true;
      } else if (parts[0] == "kg" && numbers.size() == 1) {
        v.key_groups.push_back({numbers[0], value});
      } else if (parts[0] == "sub" && numbers.size() == 2) {
        v.subtasks.push_back({numbers[0], numbers[1], value});
      } else {
        ok = false;
      }
    }
    if (!ok || !has_hash || v.key_groups.empty() || v.subtasks.empty()) {
      ADD_FAILURE() << kVectorsPath << ":" << line << ": cannot parse: " << text;
      continue;
    }
    out.push_back(std::move(v));
  }
  return out;
}

const std::vector<Vector>& Vectors() {
  static const std::vector<Vector>* vectors = new std::vector<Vector>(LoadVectors());
  return *vectors;
}

// "(utf8:61,(int:1,double:...))" -> "(utf8,(int,double))"
std::string SignatureOf(std::string_view value) {
  std::string out;
  bool payload = false;
  for (const char c : value) {
    if (c == '(' || c == ')' || c == ',') {
      payload = false;
      out += c;
    } else if (c == ':') {
      payload = true;
    } else if (!payload) {
      out += c;
    }
  }
  return out;
}

// Splits "(a,b,(c,d))" into "a", "b", "(c,d)"; nullopt if not a tuple.
std::optional<std::vector<std::string_view>> TupleFields(std::string_view text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return std::nullopt;
  text = text.substr(1, text.size() - 2);
  std::vector<std::string_view> fields;
  if (text.empty()) return fields;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || (text[i] == ',' && depth == 0)) {
      fields.push_back(text.substr(start, i - start));
      start = i + 1;
    } else if (text[i] == '(') {
      ++depth;
    } else if (text[i] == ')') {
      --depth;
    }
  }
  return fields;
}

// The payload of "kind:payload", or nullopt for another kind.
std::optional<std::string_view> Payload(std::string_view text, std::string_view kind) {
  if (text.size() <= kind.size() || text.substr(0, kind.size()) != kind ||
      text[kind.size()] != ':') {
    return std::nullopt;
  }
  return text.substr(kind.size() + 1);
}

std::optional<uint64_t> Hex(std::string_view hex) {
  if (hex.empty() || hex.size() > 16) return std::nullopt;
  uint64_t v = 0;
  for (const char c : hex) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

// ------------------------------------------- C++ key types <-> vector values

template <typename T>
struct Codec;

template <typename T, typename Wide>
struct IntegerCodec {
  static std::optional<T> Parse(std::string_view text, std::string_view kind) {
    const auto p = Payload(text, kind);
    Wide v;
    if (!p || !ParseDecimal(*p, &v)) return std::nullopt;
    return static_cast<T>(v);
  }
};

template <>
struct Codec<std::string> {
  static std::string Signature() { return "utf8"; }
  static std::optional<std::string> Parse(std::string_view text) {
    const auto p = Payload(text, "utf8");
    if (!p) return text == "utf8:" ? std::optional<std::string>("") : std::nullopt;
    if (p->size() % 2 != 0) return std::nullopt;
    std::string out;
    for (size_t i = 0; i < p->size(); i += 2) {
      const auto b = Hex(p->substr(i, 2));
      if (!b) return std::nullopt;
      out += static_cast<char>(*b);
    }
    return out;
  }
};
template <>
struct Codec<std::u16string> {
  static std::string Signature() { return "utf16"; }
  static std::optional<std::u16string> Parse(std::string_view text) {
    const auto p = Payload(text, "utf16");
    if (!p) return text == "utf16:" ? std::optional<std::u16string>(u"") : std::nullopt;
    if (p->size() % 4 != 0) return std::nullopt;
    std::u16string out;
    for (size_t i = 0; i < p->size(); i += 4) {
      const auto u = Hex(p->substr(i, 4));
      if (!u) return std::nullopt;
      out += static_cast<char16_t>(*u);
    }
    return out;
  }
};
template <>
struct Codec<bool> {
  static std::string Signature() { return "boolean"; }
  static std::optional<bool> Parse(std::string_view text) {
    if (text == "boolean:true") return true;
    if (text == "boolean:false") return false;
    return std::nullopt;
  }
};
template <>
struct Codec<char16_t> {
  static std::string Signature() { return "char"; }
  static std::optional<char16_t> Parse(std::string_view text) {
    const auto p = Payload(text, "char");
    if (!p || p->size() != 4) return std::nullopt;
    const auto u = Hex(*p);
    if (!u) return std::nullopt;
    return static_cast<char16_t>(*u);
  }
};
template <>
struct Codec<char> {  // a Java Character 0..255 only
  static std::string Signature() { return "char"; }
  static std::optional<char> Parse(std::string_view text) {
    const auto u = Codec<char16_t>::Parse(text);
    if (!u || *u > 0xFF) return std::nullopt;
    return static_cast<char>(static_cast<unsigned char>(*u));
  }
};
template <>
struct Codec<int8_t> {
  static std::string Signature() { return "byte"; }
  static std::optional<int8_t> Parse(std::string_view text) {
    return IntegerCodec<int8_t, int32_t>::Parse(text, "byte");
  }
};
template <>
struct Codec<int16_t> {
  static std::string Signature() { return "short"; }
  static std::optional<int16_t> Parse(std::string_view text) {
    return IntegerCodec<int16_t, int32_t>::Parse(text, "short");
  }
};
template <>
struct Codec<int32_t> {
  static std::string Signature() { return "int"; }
  static std::optional<int32_t> Parse(std::string_view text) {
    return IntegerCodec<int32_t, int32_t>::Parse(text, "int");
  }
};
template <>
struct Codec<long> {
  static_assert(sizeof(long) == 8, "this test assumes LP64");
  static std::string Signature() { return "long"; }
  static std::optional<long> Parse(std::string_view text) {
    return IntegerCodec<long, int64_t>::Parse(text, "long");
  }
};
template <>
struct Codec<long long> {
  static std::string Signature() { return "long"; }
  static std::optional<long long> Parse(std::string_view text) {
    return IntegerCodec<long long, int64_t>::Parse(text, "long");
  }
};
template <>
struct Codec<float> {
  static std::string Signature() { return "float"; }
  static std::optional<float> Parse(std::string_view text) {
    const auto p = Payload(text, "float");
    const auto bits = p && p->size() == 8 ? Hex(*p) : std::nullopt;
    if (!bits) return std::nullopt;
    return std::bit_cast<float>(static_cast<uint32_t>(*bits));
  }
};
template <>
struct Codec<double> {
  static std::string Signature() { return "double"; }
  static std::optional<double> Parse(std::string_view text) {
    const auto p = Payload(text, "double");
    const auto bits = p && p->size() == 16 ? Hex(*p) : std::nullopt;
    if (!bits) return std::nullopt;
    return std::bit_cast<double>(*bits);
  }
};
template <typename... Ts>
struct Codec<std::tuple<Ts...>> {
  static std::string Signature() {
    std::string s = "(";
    size_t i = 0;
    ((s += (i++ == 0 ? "" : ",") + Codec<Ts>::Signature()), ...);
    return s + ")";
  }
  static std::optional<std::tuple<Ts...>> Parse(std::string_view text) {
    const auto fields = TupleFields(text);
    if (!fields || fields->size() != sizeof...(Ts)) return std::nullopt;
    return ParseFields(*fields, std::index_sequence_for<Ts...>{});
  }
  template <size_t... I>
  static std::optional<std::tuple<Ts...>> ParseFields(const std::vector<std::string_view>& f,
                                                      std::index_sequence<I...>) {
    std::tuple<std::optional<Ts>...> parsed{Codec<Ts>::Parse(f[I])...};
    if (!(std::get<I>(parsed).has_value() && ...)) return std::nullopt;
    return std::tuple<Ts...>(*std::get<I>(parsed)...);
  }
};
template <typename A, typename B>
struct Codec<std::pair<A, B>> {
  static std::string Signature() { return Codec<std::tuple<A, B>>::Signature(); }
  static std::optional<std::pair<A, B>> Parse(std::string_view text) {
    const auto t = Codec<std::tuple<A, B>>::Parse(text);
    if (!t) return std::nullopt;
    return std::pair<A, B>(std::get<0>(*t), std::get<1>(*t));
  }
};

// ----------------------------------------------------------------- checking

// Checks the vectors of one category against C++ key types, and that every
// one of them was checked by at least one type.
class CategoryChecker {
 public:
  explicit CategoryChecker(std::string category) : category_(std::move(category)) {
    for (const Vector& v : Vectors()) {
      if (v.category == category_) lines_.push_back(&v);
    }
    EXPECT_FALSE(lines_.empty()) << "no vectors of category " << category_;
  }
  ~CategoryChecker() {
    for (const Vector* v : lines_) {
      EXPECT_TRUE(checked_.contains(v->line))
          << kVectorsPath << ":" << v->line << ": no C++ key type checked " << v->value
          << " (signature " << SignatureOf(v->value) << ")";
    }
  }

  // Checks every vector whose value a `Stored` can hold, hashing it as a `Key`
  // made from it (a std::string_view from a std::string, ...).
  template <typename Key, typename Stored = Key>
  void Check() {
    const std::string signature = Codec<Stored>::Signature();
    int count = 0;
    for (const Vector* v : lines_) {
      if (SignatureOf(v->value) != signature) continue;
      const std::optional<Stored> stored = Codec<Stored>::Parse(v->value);
      if (!stored) continue;  // e.g. a Character above 255 for char
      const Key key(*stored);
      const std::string where =
          absl::StrCat(kVectorsPath, ":", v->line, ": ", v->value, " as ", typeid(Key).name());
      EXPECT_EQ(KeyHash<Key>{}(key), v->hash) << where;
      for (const auto& [max_p, group] : v->key_groups) {
        EXPECT_EQ(KeyGroupOf(key, max_p), group) << where << " max parallelism " << max_p;
      }
      for (const auto& [max_p, p, subtask] : v->subtasks) {
        EXPECT_EQ(SubtaskForKey(key, max_p, p), subtask)
            << where << " max parallelism " << max_p << " parallelism " << p;
        auto identity = [](const Key& k) -> const Key& { return k; };
        KeyGroupPartitioner<Key, decltype(identity)> partitioner(identity, p, max_p);
        EXPECT_EQ(partitioner.Select(key), subtask)
            << where << " KeyGroupPartitioner, max parallelism " << max_p << " parallelism " << p;
      }
      checked_.insert(v->line);
      ++count;
    }
    EXPECT_GT(count, 0) << "no vector of category " << category_ << " is a " << signature;
  }

 private:
  std::string category_;
  std::vector<const Vector*> lines_;
  std::set<int> checked_;
};

// ------------------------------------------------------------------- tests

// The categories the tests below check; a vector of any other category would
// be checked by none.
const std::set<std::string>& Categories() {
  static const std::set<std::string>* categories =
      new std::set<std::string>{"utf8-valid",     "utf8-supplementary",
                                "utf8-malformed", "utf8-random",
                                "utf16",          "boolean",
                                "char",           "byte",
                                "short",          "int",
                                "long",           "float",
                                "double",         "tuple2",
                                "tuple",          "tuple-nested"};
  return *categories;
}

TEST(JavaKeyHash, VectorsFileIsJavaGeneratedAndEveryCategoryIsTested) {
  std::ifstream in(kVectorsPath);
  std::string first;
  ASSERT_TRUE(std::getline(in, first)) << kVectorsPath;
  EXPECT_NE(first.find("Generated by tests/java/JavaKeyHashVectors.java"), std::string::npos);
  std::map<std::string, int> counts;
  for (const Vector& v : Vectors()) {
    ++counts[v.category];
    EXPECT_TRUE(Categories().contains(v.category))
        << kVectorsPath << ":" << v.line << ": no test checks category " << v.category;
  }
  for (const std::string& c : Categories()) EXPECT_GT(counts[c], 0) << c;
  EXPECT_GT(Vectors().size(), 800u);
}

TEST(JavaKeyHash, WellFormedUtf8StringHashesLikeJavaString) {
  CategoryChecker c("utf8-valid");
  c.Check<std::string>();
  c.Check<std::string_view, std::string>();
}

TEST(JavaKeyHash, SupplementaryCharacterHashesAsItsUtf16SurrogatePair) {
  CategoryChecker c("utf8-supplementary");
  c.Check<std::string>();
  c.Check<std::string_view, std::string>();
}

TEST(JavaKeyHash, MalformedUtf8DecodesLikeJavaNewStringUtf8) {
  CategoryChecker c("utf8-malformed");
  c.Check<std::string>();
  c.Check<std::string_view, std::string>();
}

TEST(JavaKeyHash, RandomBytesDecodeLikeJavaNewStringUtf8) {
  CategoryChecker c("utf8-random");
  c.Check<std::string>();
}

TEST(JavaKeyHash, U16StringHashesLikeJavaStringOfTheSameCodeUnits) {
  CategoryChecker c("utf16");
  c.Check<std::u16string>();
  c.Check<std::u16string_view, std::u16string>();
}

TEST(JavaKeyHash, BoolHashesLikeJavaBoolean) {
  CategoryChecker c("boolean");
  c.Check<bool>();
}

TEST(JavaKeyHash, CharHashesLikeJavaCharacterOfItsLatin1CodeUnit) {
  CategoryChecker c("char");
  c.Check<char>();
  c.Check<char16_t>();
}

TEST(JavaKeyHash, Int8HashesLikeJavaByte) {
  CategoryChecker c("byte");
  c.Check<int8_t>();
}

TEST(JavaKeyHash, Int16HashesLikeJavaShort) {
  CategoryChecker c("short");
  c.Check<int16_t>();
}

TEST(JavaKeyHash, Int32HashesLikeJavaInteger) {
  CategoryChecker c("int");
  c.Check<int32_t>();
}

TEST(JavaKeyHash, Int64HashesLikeJavaLong) {
  CategoryChecker c("long");
  c.Check<long>();
  c.Check<long long>();
}

TEST(JavaKeyHash, FloatHashesLikeJavaFloatWithCanonicalNaN) {
  CategoryChecker c("float");
  c.Check<float>();
}

TEST(JavaKeyHash, DoubleHashesLikeJavaDoubleWithCanonicalNaN) {
  CategoryChecker c("double");
  c.Check<double>();
}

TEST(JavaKeyHash, PairAndTwoFieldTupleHashLikeFlinkTuple2) {
  CategoryChecker c("tuple2");
  c.Check<std::pair<std::string, int32_t>>();
  c.Check<std::tuple<std::string, int32_t>>();
  c.Check<std::pair<std::string_view, int32_t>, std::pair<std::string, int32_t>>();
  c.Check<std::pair<int64_t, std::string>>();
  c.Check<std::tuple<int64_t, std::string>>();
  c.Check<std::pair<double, bool>>();
  c.Check<std::tuple<double, bool>>();
  c.Check<std::pair<int32_t, int32_t>>();
  c.Check<std::tuple<int32_t, int32_t>>();
}

TEST(JavaKeyHash, TupleHashesLikeFlinkTupleN) {
  CategoryChecker c("tuple");
  c.Check<std::tuple<>>();
  c.Check<std::tuple<std::string>>();
  c.Check<std::tuple<int32_t>>();
  c.Check<std::tuple<int32_t, int64_t, std::string>>();
  c.Check<std::tuple<float, char16_t, int16_t, int8_t, double>>();
  c.Check<std::tuple<float, char, int16_t, int8_t, double>>();
  using Int25 = decltype(std::tuple_cat(std::array<int32_t, 25>{}));
  static_assert(std::tuple_size_v<Int25> == 25);
  c.Check<Int25>();
}

TEST(JavaKeyHash, NestedTuplesHashRecursively) {
  CategoryChecker c("tuple-nested");
  c.Check<std::tuple<std::pair<std::string, int32_t>, int64_t>>();
  c.Check<std::pair<std::pair<std::string, int32_t>, int64_t>>();
  c.Check<std::tuple<std::tuple<std::string, int32_t>, int64_t>>();
  c.Check<std::tuple<int32_t, std::tuple<double, std::pair<std::string, bool>>>>();
  c.Check<std::pair<int32_t, std::pair<double, std::pair<std::string, bool>>>>();
  c.Check<std::pair<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>>>();
  c.Check<std::tuple<std::tuple<int32_t, int32_t>, std::tuple<int32_t, int32_t>>>();
}

// ------------------------------------------ key types beyond the vectors

TEST(JavaKeyHash, CStringHashesLikeTheStdString) {
  const char* hello = "hello";
  char buffer[] = "h\xC3\xA9llo";
  EXPECT_EQ(KeyHash<const char*>{}(hello), KeyHash<std::string>{}("hello"));
  EXPECT_EQ(KeyHash<char*>{}(buffer), KeyHash<std::string>{}("h\xC3\xA9llo"));
  EXPECT_EQ(KeyGroupOf("hello", 128), KeyGroupOf(std::string("hello"), 128));  // char[6]
  EXPECT_EQ(SubtaskForKey("hello", 128, 4), SubtaskForKey(std::string("hello"), 128, 4));
  EXPECT_EQ(KeyHash<const char*>{}(nullptr), 0);
  EXPECT_EQ((KeyHash<std::pair<const char*, int>>{}({"hello", 1})),
            (KeyHash<std::pair<std::string, int>>{}({"hello", 1})));
}

TEST(JavaKeyHash, TupleOfReferencesHashesLikeTheTupleOfValues) {
  const std::string s = "sensor_7";
  const int32_t i = -7;
  EXPECT_EQ((KeyHash<std::tuple<const std::string&, const int32_t&>>{}(std::tie(s, i))),
            (KeyHash<std::pair<std::string, int32_t>>{}({s, i})));
}

}  // namespace

// A user key type with the hashCode of its Java counterpart, found by ADL.
namespace user {
struct SensorKey {
  std::string station;
  int32_t sensor = 0;
  bool operator==(const SensorKey&) const = default;
};
// The Java class's hashCode: Objects.hash(station, sensor) = 31 * (31 + h(station)) + sensor.
int32_t JavaHashCode(const SensorKey& k) {
  const uint32_t h = 31 * (31 + static_cast<uint32_t>(JavaStringHashCode(k.station))) +
                     static_cast<uint32_t>(k.sensor);
  return static_cast<int32_t>(h);
}
struct Legacy {
  int64_t id = 0;
};
}  // namespace user

template <>
struct KeyHash<user::Legacy> {
  int32_t operator()(const user::Legacy& k) const { return KeyHash<int64_t>{}(k.id); }
};

namespace {

TEST(JavaKeyHash, TypeWithJavaHashCodeFoundByAdlHashesWithIt) {
  const user::SensorKey k{"hello", 7};
  const auto expected = static_cast<int32_t>(31u * (31u + 99162322u) + 7u);
  EXPECT_EQ(KeyHash<user::SensorKey>{}(k), expected);
  EXPECT_EQ(KeyGroupOf(k, 128), ComputeKeyGroup(expected, 128));
  // as a tuple field too
  EXPECT_EQ((KeyHash<std::pair<user::SensorKey, int32_t>>{}({k, 1})),
            static_cast<int32_t>(31u * static_cast<uint32_t>(expected) + 1u));
}

TEST(JavaKeyHash, SpecialisedKeyHashStillOverrides) {
  EXPECT_EQ(KeyHash<user::Legacy>{}(user::Legacy{int64_t{1} << 32}), 1);
  EXPECT_EQ(KeyGroupOf(user::Legacy{42}, 128), KeyGroupOf(int64_t{42}, 128));
}

}  // namespace
}  // namespace tidemark
