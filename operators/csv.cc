#include "tidemark/operators/csv.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "absl/strings/escaping.h"
#include "absl/strings/str_join.h"

namespace tidemark::internal {

namespace {
constexpr size_t kErrorTextBytes = 200;
}  // namespace

void AppendCsvField(std::string_view field, char delimiter, char quote, std::string* line) {
  bool needs = false;
  for (char c : field) {
    if (c == delimiter || c == quote || c == '\n' || c == '\r') {
      needs = true;
      break;
    }
  }
  if (!field.empty() && (field.front() == ' ' || field.front() == '\t' || field.back() == ' ' ||
                         field.back() == '\t')) {
    needs = true;
  }
  if (!needs) {
    line->append(field);
    return;
  }
  line->push_back(quote);
  for (char c : field) {
    if (c == quote) line->push_back(quote);
    line->push_back(c);
  }
  line->push_back(quote);
}

void CsvRecordParser::Reset() {
  s_ = S::kFieldStart;
  pending_ = false;
  pending_bytes_ = 0;
  field_.clear();
}

CsvRecordParser::State CsvRecordParser::Feed(std::string_view line) {
  if (!pending_) {
    fields_.clear();
    field_.clear();
    s_ = S::kFieldStart;
    pending_bytes_ = 0;
    if (line.empty()) return State::kBlank;
  } else {
    field_.push_back('\n');  // inside a quoted field: the line end is data
  }
  pending_bytes_ += line.size() + 1;
  auto fail = [&](std::string message) {
    error_ = std::move(message);
    Reset();
    return State::kError;
  };
  for (char c : line) {
    switch (s_) {
      case S::kFieldStart:
        if (c == quote_) {
          s_ = S::kQuoted;
        } else if (c == delimiter_) {
          fields_.push_back(std::move(field_));
          field_.clear();
        } else {
          field_.push_back(c);
          s_ = S::kUnquoted;
        }
        break;
      case S::kUnquoted:
        if (c == delimiter_) {
          fields_.push_back(std::move(field_));
          field_.clear();
          s_ = S::kFieldStart;
        } else if (c == quote_) {
          return fail(absl::StrCat("a quote inside unquoted field ", fields_.size() + 1,
                                   " (a field with quotes must be quoted, its quotes doubled)"));
        } else {
          field_.push_back(c);
        }
        break;
      case S::kQuoted:
        if (c == quote_) {
          s_ = S::kQuoteInQuoted;
        } else {
          field_.push_back(c);
        }
        break;
      case S::kQuoteInQuoted:
        if (c == quote_) {  // "" : an escaped quote
          field_.push_back(c);
          s_ = S::kQuoted;
        } else if (c == delimiter_) {
          fields_.push_back(std::move(field_));
          field_.clear();
          s_ = S::kFieldStart;
        } else {
          return fail(absl::StrCat("'", absl::CEscape(std::string(1, c)),
                                   "' after the closing quote of field ", fields_.size() + 1,
                                   " (a quote inside a quoted field is written \"\")"));
        }
        break;
    }
  }
  if (s_ == S::kQuoted) {
    pending_ = true;
    return State::kNeedMore;
  }
  fields_.push_back(std::move(field_));
  field_.clear();
  pending_ = false;
  return State::kComplete;
}

CsvRecordReader::CsvRecordReader(std::vector<std::string> paths, Options options)
    : paths_(std::move(paths)),
      options_(std::move(options)),
      parser_(options_.delimiter, options_.quote) {
  if (options_.delimiter == options_.quote || options_.delimiter == '\n' ||
      options_.quote == '\n') {
    throw std::invalid_argument("CSV: the delimiter, the quote and the line end must differ");
  }
  if (options_.read.header == CsvReadOptions::Header::kByName && options_.column_names.empty()) {
    throw std::invalid_argument(
        "CSV: a header read by name needs the format's column names (with_column_names)");
  }
  expected_fields_ = options_.num_columns;
}

CsvRecordReader::~CsvRecordReader() = default;

void CsvRecordReader::Open(const SourceContext& ctx) {
  LineReaderOptions lo;
  lo.delimiter = '\n';
  lo.max_line_length = options_.read.max_record_length;
  path_ = paths_.at(static_cast<size_t>(ctx.subtask_index));
  reader_ = OpenFileReader(path_, 0, 1, /*split=*/false, lo);
  if (ctx.metrics != nullptr) errors_ = ctx.metrics->GetCounter("numRecordsInErrors");
}

void CsvRecordReader::Reject(int64_t line, const std::string& message) {
  CsvError e;
  e.file = path_;
  e.line = line;
  e.message = message;
  e.text = record_text_;
  if (options_.read.on_error == CsvReadOptions::OnError::kFail) {
    throw std::runtime_error(absl::StrCat(e.Describe(), ": '", absl::CEscape(e.text),
                                          record_text_.size() >= kErrorTextBytes ? "...'" : "'"));
  }
  if (errors_ != nullptr) errors_->Inc();
  if (options_.read.on_bad_record) options_.read.on_bad_record(e);
}

void CsvRecordReader::Bad(const std::string& message) { Reject(record_line_, message); }

bool CsvRecordReader::MapColumns() {
  index_.clear();
  for (const std::string& name : options_.column_names) {
    auto it = std::find(header_.begin(), header_.end(), name);
    if (it == header_.end()) {
      // Not a bad record but a file that does not fit the format: fails
      // whatever on_error says.
      throw std::runtime_error(absl::StrCat(path_, ":", record_line_,
                                            ": the header has no column '", name,
                                            "' (it has: ", absl::StrJoin(header_, ", "), ")"));
    }
    index_.push_back(static_cast<int>(it - header_.begin()));
  }
  expected_fields_ = header_.size();
  return true;
}

CsvRecordReader::Result CsvRecordReader::Next() {
  using Header = CsvReadOptions::Header;
  for (;;) {
    if (!parser_.pending() && !skipping_quoted_ && reader_->Seekable())
      record_start_ = reader_->position();
    std::string_view line;
    LineLocation where{};
    switch (reader_->Next(&line, &where)) {
      case LineReader::Result::kNothing:
        return Result::kNothing;
      case LineReader::Result::kEnd:
        skipping_quoted_ = false;  // rejected already
        if (parser_.pending()) {
          parser_.Reset();
          Reject(record_line_, "unterminated quoted field (the file ends inside it)");
        }
        return Result::kEnd;
      case LineReader::Result::kOverLong: {
        const OverLongLine& o = reader_->over_long();
        const bool inside_quotes = parser_.pending() || skipping_quoted_;
        const int64_t at = parser_.pending() ? record_line_ : o.where.line_number;
        if (!inside_quotes) record_text_ = std::string(o.prefix);
        parser_.Reset();
        if (!skipping_quoted_) {
          Reject(at,
                 absl::StrCat("record is longer than ", options_.read.max_record_length, " bytes"));
        }
        if (inside_quotes) {
          // The line's bytes were not kept, so where the quoted field ends
          // is unknown: going on would read the field's text as records.
          throw std::runtime_error(
              absl::StrCat(path_, ":", o.where.line_number, ": a line longer than ",
                           options_.read.max_record_length,
                           " bytes inside a quoted field: the end of the record cannot be found"));
        }
        continue;
      }
      case LineReader::Result::kLine:
        break;
    }
    if (skipping_quoted_) {
      for (char c : line)
        if (c == options_.quote) skip_in_quote_ = !skip_in_quote_;
      if (!skip_in_quote_) skipping_quoted_ = false;  // the rejected record ends here
      continue;
    }
    if (!parser_.pending()) {
      record_line_ = where.line_number;
      record_text_.clear();
    } else if (record_text_.size() < kErrorTextBytes) {
      record_text_.push_back('\n');
    }
    if (record_text_.size() < kErrorTextBytes) {
      record_text_.append(line.substr(0, kErrorTextBytes - record_text_.size()));
    }
    // The bytes of the record's earlier lines (each with its line end).
    const size_t carried = parser_.pending() ? parser_.pending_bytes() : 0;
    switch (parser_.Feed(line)) {
      case CsvRecordParser::State::kBlank:
        continue;
      case CsvRecordParser::State::kNeedMore:
        if (parser_.pending_bytes() > options_.read.max_record_length) {
          parser_.Reset();
          Reject(record_line_,
                 absl::StrCat("record is longer than ", options_.read.max_record_length, " bytes"));
          skipping_quoted_ = true;  // this line ended inside a quoted field
          skip_in_quote_ = true;
        }
        continue;
      case CsvRecordParser::State::kError:
        Reject(record_line_, parser_.error());
        continue;
      case CsvRecordParser::State::kComplete:
        // A record of several lines whose last line takes it past the limit
        // (a single line past it is the line reader's kOverLong).
        if (carried > 0 && carried + line.size() > options_.read.max_record_length) {
          Reject(record_line_,
                 absl::StrCat("record is longer than ", options_.read.max_record_length, " bytes"));
          continue;
        }
        break;
    }
    std::vector<std::string>& f = parser_.mutable_fields();
    if (!header_done_ && options_.read.header != Header::kNone) {
      header_done_ = true;
      if (options_.read.header == Header::kByName) {
        header_ = std::move(f);
        MapColumns();
      }
      continue;
    }
    header_done_ = true;
    if (expected_fields_ != 0 && f.size() != expected_fields_) {
      Reject(record_line_,
             absl::StrCat("expected ", expected_fields_, " fields, found ", f.size()));
      continue;
    }
    if (options_.read.header == Header::kByName) {
      out_.resize(index_.size());
      for (size_t i = 0; i < index_.size(); ++i) out_[i] = std::move(f[index_[i]]);
    } else {
      out_.swap(f);
    }
    return Result::kRecord;
  }
}

int CsvRecordReader::fd() const { return reader_ ? reader_->fd() : -1; }

Timestamp CsvRecordReader::retry_at() const {
  return reader_ ? reader_->retry_at() : kMaxTimestamp;
}

bool CsvRecordReader::Replayable() const { return AllRegularFiles(paths_); }

void CsvRecordReader::SnapshotPosition(StateWriter& w) const {
  const bool seekable = reader_ && reader_->Seekable();
  w.PutU8(seekable ? 1 : 0);
  if (!seekable) return;
  // Inside a record (a quoted line end, or a pipe that has not sent the rest
  // yet): from the record's first line again.
  const LineReader::Position p = parser_.pending() ? record_start_ : reader_->position();
  w.PutI64(p.offset);
  w.PutI64(p.lines_before);
  w.PutU8(p.discarding ? 1 : 0);
  w.PutU8(header_done_ ? 1 : 0);
  Encode(w, header_);
}

void CsvRecordReader::RestorePosition(StateReader& r) {
  if (r.GetU8("seekable") == 0) return;
  LineReader::Position p;
  p.offset = r.GetI64("offset");
  p.lines_before = r.GetI64("lines before");
  p.discarding = r.GetU8("discarding") != 0;
  const bool header_done = r.GetU8("header done") != 0;
  std::vector<std::string> header = Decode<std::vector<std::string>>(r);
  if (!r.ok() || !reader_ || !reader_->Seekable()) return;
  reader_->Seek(p);
  parser_.Reset();
  header_done_ = header_done;
  header_ = std::move(header);
  if (header_done_ && options_.read.header == CsvReadOptions::Header::kByName) MapColumns();
}

float CsvRoundOutOfRange(std::string_view decimal, float) {
  return std::strtof(std::string(decimal).c_str(), nullptr);
}
double CsvRoundOutOfRange(std::string_view decimal, double) {
  return std::strtod(std::string(decimal).c_str(), nullptr);
}
long double CsvRoundOutOfRange(std::string_view decimal, long double) {
  return std::strtold(std::string(decimal).c_str(), nullptr);
}

}  // namespace tidemark::internal
