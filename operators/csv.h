// operators/csv.h
//
// CSV in and out (Flink's CsvReaderFormat / CsvBulkWriter), RFC 4180:
// fields separated by a delimiter (',' by default), a field may be quoted
// ("a, b"), a quote inside a quoted field is doubled ("say ""hi"""), and a
// quoted field may hold delimiters and line ends: such a record spans lines.
//
// CsvFormat<T> says how a record of type T maps to the columns: a tuple (or
// pair) is one column per element, a struct is the members given to
// CsvFormat<T>::of(&T::a, &T::b, ...), anything else a pair of user
// functions (CsvFormat<T>::custom).  Columns of type std::string, bool,
// integers, floating point and std::optional of those (an empty field is
// nullopt) are converted by the format.  Column names (with_column_names)
// are the header line of a sink and match a source's header by name.
//
// Reading (StreamExecutionEnvironment::read_csv, CsvSource below):
//   - A file is read whole by one subtask (Flink's CSV format is not
//     splittable either: a split could start inside a quoted line end); give
//     several files for several subtasks.
//   - Records are assembled from lines: a line that ends inside a quoted
//     field continues with the next, and the line end becomes "\n" in the
//     field (a "\r\n" inside quotes is read as "\n": the line reader drops
//     the '\r' before each '\n').  Blank lines outside a record are skipped.
//     A record is at most max_record_length bytes.
//   - Header: kNone (every line is data), kSkip (the first record is
//     skipped), kByName (the first record names the columns; the format's
//     column names are looked up in it, so the file may order its columns
//     differently and have more of them).
//   - Bad records (an unterminated quote at the end of the file, a character
//     after a closing quote, a quote inside an unquoted field, a wrong number
//     of fields, a field that does not convert) fail the job with
//     "<file>:<line>: <what>" (kFail, the default), or with kSkip are
//     counted in the source subtask's counter "numRecordsInErrors" (Flink's
//     source metric) and given to on_bad_record when set: none is lost
//     silently.
//   - Checkpoints: the position of the next record's first line, so a
//     restored job reads from a record boundary.
//
// Writing (DataStream::sink_to_csv: exactly-once part files, each starting
// with the header line when asked; DataStream::write_as_csv: one file at
// parallelism 1): a field is quoted when it holds the delimiter, the quote,
// a line end, or starts or ends with a blank, and quotes inside are doubled;
// floating point is written shortest round-trip (std::to_chars).
#ifndef TM_OPERATORS_CSV_H_
#define TM_OPERATORS_CSV_H_

#include <charconv>
#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/operators/sources.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/source.h"

namespace tidemark {

// A record the CSV source could not read (CsvReadOptions::on_bad_record).
struct CsvError {
  std::string file;
  int64_t line = 0;     // the record's first line, 1-based
  std::string message;  // what is wrong
  std::string text;     // the record's text (bounded)
  // "<file>:<line>: <message>"
  std::string Describe() const { return absl::StrCat(file, ":", line, ": ", message); }
};

struct CsvReadOptions {
  enum class Header { kNone, kSkip, kByName };
  Header header = Header::kNone;
  enum class OnError { kFail, kSkip };
  OnError on_error = OnError::kFail;
  // With kSkip: told about each skipped record, on the source's thread.
  std::function<void(const CsvError&)> on_bad_record;
  size_t max_record_length = kDefaultMaxLineLength;
};

struct CsvWriteOptions {
  // The format's column names first: by default when the format has them
  // (with_column_names); true without them is refused.
  std::optional<bool> header;
  std::string sink_name = "CSV sink";
  std::string prefix = "part";  // sink_to_csv's part files
};

namespace internal {

// A field that does not convert: the converters throw this; the source adds
// file, line and column.
struct CsvFieldError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// A field's text for an error message: control bytes escaped (\0, \n,
// \x01, ...), so that a NUL does not cut the message short where it is read
// as a C string (what()).  Inline: the CLI's line parser uses it too, in
// programs (its fuzzer) that do not link the operators' library.
inline std::string CsvShownText(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\0') {
      out += "\\0";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out;
}
// A decimal number beyond X's range, rounded as Java does: infinity above
// the largest finite value, zero (or the nearest subnormal) below the
// smallest.
float CsvRoundOutOfRange(std::string_view decimal, float);
double CsvRoundOutOfRange(std::string_view decimal, double);
long double CsvRoundOutOfRange(std::string_view decimal, long double);

// Field conversions.
template <typename X>
struct CsvField;

template <>
struct CsvField<std::string> {
  static std::string Parse(std::string_view s) { return std::string(s); }
  static void Format(const std::string& v, std::string* out) { out->append(v); }
};
template <>
struct CsvField<bool> {
  static bool Parse(std::string_view s) {
    if (s == "true" || s == "TRUE" || s == "True" || s == "1") return true;
    if (s == "false" || s == "FALSE" || s == "False" || s == "0") return false;
    throw CsvFieldError("cannot parse '" + CsvShownText(s) + "' as a boolean");
  }
  static void Format(bool v, std::string* out) { out->append(v ? "true" : "false"); }
};
template <typename X>
requires(std::is_integral_v<X> && !std::is_same_v<X, bool>) struct CsvField<X> {
  static X Parse(std::string_view s) {
    X v{};
    // A leading '+', as Java's Long.parseLong takes it.
    std::string_view digits = s;
    if (digits.size() > 1 && digits[0] == '+' && digits[1] != '-') digits.remove_prefix(1);
    const auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || p != digits.data() + digits.size() || s.empty()) {
      throw CsvFieldError("cannot parse '" + CsvShownText(s) + "' as an integer" +
                          (ec == std::errc::result_out_of_range ? " (out of range)" : ""));
    }
    return v;
  }
  static void Format(X v, std::string* out) { absl::StrAppend(out, v); }
};
template <typename X>
requires std::is_floating_point_v<X>
struct CsvField<X> {
  // Decimal numbers as Java's Double.parseDouble reads them: a sign ('+'
  // too), "Infinity" and "NaN" by those names only (std::from_chars also
  // takes "inf", "nan", which Java refuses), and a number beyond the range
  // rounded to infinity or zero, not refused.  (Java's hexadecimal form and
  // 'd'/'f' suffixes are not read.)
  static X Parse(std::string_view s) {
    std::string_view body = s;
    const bool negative = !body.empty() && body[0] == '-';
    if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
    if (body == "Infinity")
      return negative ? -std::numeric_limits<X>::infinity() : std::numeric_limits<X>::infinity();
    if (body == "NaN") return std::numeric_limits<X>::quiet_NaN();
    X v{};
    const bool starts_numeric =
        !body.empty() && ((body[0] >= '0' && body[0] <= '9') || body[0] == '.');
    const auto [p, ec] = std::from_chars(body.data(), body.data() + body.size(), v);
    if (!starts_numeric || p != body.data() + body.size() ||
        (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      throw CsvFieldError("cannot parse '" + CsvShownText(s) + "' as a number");
    }
    if (ec == std::errc::result_out_of_range) v = CsvRoundOutOfRange(body, X{});
    return negative ? -v : v;
  }
  static void Format(X v, std::string* out) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
};
template <typename X>
struct CsvField<std::optional<X>> {
  static std::optional<X> Parse(std::string_view s) {
    if (s.empty()) return std::nullopt;
    return CsvField<X>::Parse(s);
  }
  static void Format(const std::optional<X>& v, std::string* out) {
    if (v) CsvField<X>::Format(*v, out);
  }
};

template <typename X>
concept CsvConvertible = requires(std::string_view s, const X& x, std::string* out) {
  { CsvField<X>::Parse(s) } -> std::convertible_to<X>;
  CsvField<X>::Format(x, out);
};

template <typename T>
struct IsCsvTuple : std::false_type {};
template <typename... Ts>
struct IsCsvTuple<std::tuple<Ts...>> : std::bool_constant<(CsvConvertible<Ts> && ...)> {};
template <typename A, typename B>
struct IsCsvTuple<std::pair<A, B>> : std::bool_constant<CsvConvertible<A> && CsvConvertible<B>> {};

// Appends `field` to `line`, quoted when it needs to be.
void AppendCsvField(std::string_view field, char delimiter, char quote, std::string* line);

// Assembles RFC 4180 records from lines (the lines without their line end).
class CsvRecordParser {
 public:
  CsvRecordParser(char delimiter, char quote) : delimiter_(delimiter), quote_(quote) {}
  enum class State { kComplete, kNeedMore, kError, kBlank };
  // Feeds the next line.  kComplete: fields() is the record; kNeedMore: a
  // quoted field goes on past this line; kError: error() says why (the
  // record is dropped); kBlank: a blank line outside a record.
  State Feed(std::string_view line);
  // At the end of the input: true when a record is still open (an
  // unterminated quoted field).
  bool pending() const { return pending_; }
  size_t pending_bytes() const { return pending_bytes_; }
  void Reset();
  const std::vector<std::string>& fields() const { return fields_; }
  std::vector<std::string>& mutable_fields() { return fields_; }
  const std::string& error() const { return error_; }

 private:
  enum class S { kFieldStart, kUnquoted, kQuoted, kQuoteInQuoted };
  const char delimiter_;
  const char quote_;
  S s_ = S::kFieldStart;
  bool pending_ = false;
  size_t pending_bytes_ = 0;
  std::string field_;
  std::vector<std::string> fields_;
  std::string error_;
};

// Reads CSV records of one file (the type-independent part of CsvSource).
class CsvRecordReader {
 public:
  struct Options {
    char delimiter = ',';
    char quote = '"';
    CsvReadOptions read;
    std::vector<std::string> column_names;  // the format's, for Header::kByName
    size_t num_columns = 0;                 // 0: any number of fields
  };
  // `paths`: one file per subtask.  Throws std::invalid_argument for
  // options that do not fit together.
  CsvRecordReader(std::vector<std::string> paths, Options options);
  ~CsvRecordReader();
  void Open(const SourceContext& ctx);
  enum class Result { kRecord, kNothing, kEnd };
  // The next good record's fields, in the format's column order.
  Result Next();
  std::vector<std::string>& fields() { return out_; }
  // A record whose fields did not convert: fails (throws) or skips and counts.
  void Bad(const std::string& message);
  int fd() const;
  Timestamp retry_at() const;
  bool Replayable() const;
  void SnapshotPosition(StateWriter& w) const;
  void RestorePosition(StateReader& r);

 private:
  // Fails or skips the current record; `text` is its text.
  void Reject(int64_t line, const std::string& message);
  bool MapColumns();  // the header just read; false: a bad header was reported

  std::vector<std::string> paths_;
  std::string path_;  // this subtask's
  Options options_;
  std::unique_ptr<LineReader> reader_;
  CsvRecordParser parser_;
  Counter* errors_ = nullptr;
  bool header_done_ = false;
  std::vector<std::string> header_;  // kByName: the header's names
  std::vector<int> index_;           // kByName: the header column of each format column
  size_t expected_fields_ = 0;       // 0: any
  int64_t record_line_ = 0;          // the first line of the current record
  // With OnError::kSkip: the rest of a record rejected as too long inside a
  // quoted field is skipped up to the line where that field (and any other
  // quoted field opened after it) closes, so that its text is not read as
  // records; `skip_in_quote_` is the quote state after the last skipped line.
  bool skipping_quoted_ = false;
  bool skip_in_quote_ = false;
  LineReader::Position record_start_;
  std::string record_text_;  // the current record's first bytes, for errors
  std::vector<std::string> out_;
};

}  // namespace internal

// How records of type T are columns of a CSV file (see the top of the file).
template <typename T>
class CsvFormat {
 public:
  using FromFields = std::function<T(std::vector<std::string>& fields)>;
  using ToFields = std::function<void(const T&, std::vector<std::string>* fields)>;

  // A tuple or pair of convertible types: one column per element.
  CsvFormat() requires internal::IsCsvTuple<T>::value {
    num_columns_ = std::tuple_size_v<T>;
    from_ = [](std::vector<std::string>& f) {
      return [&]<size_t... I>(std::index_sequence<I...>) {
        return T{ParseColumn<std::tuple_element_t<I, T>>(f, I)...};
      }
      (std::make_index_sequence<std::tuple_size_v<T>>());
    };
    to_ = [](const T& v, std::vector<std::string>* f) {
      [&]<size_t... I>(std::index_sequence<I...>) { (FormatColumn(std::get<I>(v), &(*f)[I]), ...); }
      (std::make_index_sequence<std::tuple_size_v<T>>());
    };
  }
  // A struct: the given members, in column order.
  template <typename... M>
  requires(sizeof...(M) > 0 && (internal::CsvConvertible<M> && ...) &&
           std::is_default_constructible_v<T>) static CsvFormat of(M T::*... members) {
    CsvFormat f(sizeof...(M));
    f.from_ = [=](std::vector<std::string>& fields) {
      T v{};
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((v.*members = ParseColumn<M>(fields, I)), ...);
      }
      (std::index_sequence_for<M...>());
      return v;
    };
    f.to_ = [=](const T& v, std::vector<std::string>* fields) {
      [&]<size_t... I>(std::index_sequence<I...>) {
        (FormatColumn(v.*members, &(*fields)[I]), ...);
      }
      (std::index_sequence_for<M...>());
    };
    return f;
  }
  // Any T: `from` makes a record of the fields (num_columns of them, or any
  // number when 0; it may throw std::invalid_argument to reject the record),
  // `to` fills `fields` (num_columns of them, empty, when given).
  static CsvFormat custom(size_t num_columns, FromFields from, ToFields to) {
    CsvFormat f(num_columns);
    f.from_ = std::move(from);
    f.to_ = std::move(to);
    return f;
  }

  CsvFormat& with_column_names(std::vector<std::string> names) {
    if (num_columns_ != 0 && names.size() != num_columns_) {
      throw std::invalid_argument(absl::StrCat("CsvFormat: ", names.size(), " column names for ",
                                               num_columns_, " columns"));
    }
    names_ = std::move(names);
    return *this;
  }
  CsvFormat& with_delimiter(char d) {
    delimiter_ = d;
    return *this;
  }
  CsvFormat& with_quote(char q) {
    quote_ = q;
    return *this;
  }
  const std::vector<std::string>& column_names() const { return names_; }
  size_t num_columns() const { return num_columns_; }
  char delimiter() const { return delimiter_; }
  char quote() const { return quote_; }

  // The record of `fields` (in column order); throws std::invalid_argument.
  T Parse(std::vector<std::string>& fields) const {
    if (!from_) throw std::invalid_argument("CsvFormat: no way to read records");
    return from_(fields);
  }
  // `v` as one CSV line (without the line end).
  std::string Format(const T& v) const {
    if (!to_) throw std::invalid_argument("CsvFormat: no way to write records");
    std::vector<std::string> fields(num_columns_);
    to_(v, &fields);
    return Join(fields);
  }
  // The header line (the column names).
  std::string Header() const { return Join(names_); }
  std::string Join(const std::vector<std::string>& fields) const {
    std::string line;
    // One empty column: quoted, else the line is blank and a reader skips it.
    if (fields.size() == 1 && fields[0].empty()) return std::string(2, quote_);
    for (size_t i = 0; i < fields.size(); ++i) {
      if (i > 0) line.push_back(delimiter_);
      internal::AppendCsvField(fields[i], delimiter_, quote_, &line);
    }
    return line;
  }

 private:
  explicit CsvFormat(size_t n) : num_columns_(n) {}
  template <typename X>
  static X ParseColumn(std::vector<std::string>& f, size_t i) {
    if constexpr (std::is_same_v<X, std::string>) {
      return std::move(f[i]);
    } else {
      try {
        return internal::CsvField<X>::Parse(f[i]);
      } catch (const internal::CsvFieldError& e) {
        throw internal::CsvFieldError(absl::StrCat("column ", i + 1, ": ", e.what()));
      }
    }
  }
  template <typename X>
  static void FormatColumn(const X& v, std::string* out) {
    internal::CsvField<X>::Format(v, out);
  }

  size_t num_columns_ = 0;
  std::vector<std::string> names_;
  char delimiter_ = ',';
  char quote_ = '"';
  FromFields from_;
  ToFields to_;
};

// Records of CSV files, one file per subtask (env.read_csv).
template <typename T>
class CsvSource final : public Source<T> {
 public:
  CsvSource(std::vector<std::string> paths, CsvFormat<T> format, CsvReadOptions options)
      : format_(std::move(format)),
        reader_(std::move(paths), internal::CsvRecordReader::Options{
                                      format_.delimiter(), format_.quote(), std::move(options),
                                      format_.column_names(), format_.num_columns()}) {}
  void Open(const SourceContext& ctx) override { reader_.Open(ctx); }
  PollStatus Poll(SourceOutput<T>& out, size_t budget) override {
    for (size_t n = 0; n < budget; ++n) {
      switch (reader_.Next()) {
        case internal::CsvRecordReader::Result::kEnd:
          return PollStatus::kEndOfInput;
        case internal::CsvRecordReader::Result::kNothing:
          return PollStatus::kNothingAvailable;
        case internal::CsvRecordReader::Result::kRecord:
          break;
      }
      std::optional<T> rec;
      try {
        rec.emplace(format_.Parse(reader_.fields()));
      } catch (const std::invalid_argument& e) {
        reader_.Bad(e.what());
        continue;
      }
      out.Collect(std::move(*rec));
      if (out.Backpressured()) break;
    }
    return PollStatus::kMoreAvailable;
  }
  bool NeedsOwnThread() const override { return true; }
  int WaitFd() const override { return reader_.fd(); }
  Timestamp RetryAt() const override { return reader_.retry_at(); }
  bool Replayable() const override { return reader_.Replayable(); }
  void SnapshotPosition(internal::StateWriter& w) const override { reader_.SnapshotPosition(w); }
  void RestorePosition(internal::StateReader& r) override { reader_.RestorePosition(r); }

 private:
  CsvFormat<T> format_;
  internal::CsvRecordReader reader_;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_CSV_H_
