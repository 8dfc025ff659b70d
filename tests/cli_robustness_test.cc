// The `tidemark run` command line at its edges (issue 10): timestamps at the
// ends of the 64-bit range on the timeline, a closed standard input, lines
// starting with '#', JSON output of keys that are not valid UTF-8, and output
// paths that cannot be written.  Processes started here are waited for with
// deadlines (tests/cli_test_util.h: CliProcess), never with sleeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli_test_util.h"
#include "tidemark/runtime/core/time.h"
#include "tools/cli/trace.h"

namespace tidemark {
namespace {

using testing::CliProcess;
using testing::CliRun;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ReadFile;
using testing::RunTidemark;
using testing::TempPath;
using testing::WriteFile;

constexpr auto kLimit = std::chrono::seconds(60);

// --- a strict UTF-8 check and a strict JSON parser, independent of the CLI ---

bool StrictUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t n = 0;
    uint32_t cp = 0;
    if ((c >> 5) == 0x6) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n;
  }
  return true;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// RFC 8259, for the flat objects the CLI prints: an object whose values are
// strings (returned decoded), numbers, true, false or null (returned as
// written).  nullopt for anything invalid, including duplicate names and
// trailing text.
class JsonObjectParser {
 public:
  static std::optional<std::map<std::string, std::string>> Parse(std::string_view s) {
    if (!StrictUtf8(s)) return std::nullopt;
    JsonObjectParser p(s);
    std::map<std::string, std::string> members;
    if (!p.Object(&members)) return std::nullopt;
    return members;
  }

 private:
  explicit JsonObjectParser(std::string_view s) : s_(s) {}

  bool Object(std::map<std::string, std::string>* members) {
    Ws();
    if (!Eat('{')) return false;
    Ws();
    if (Eat('}')) return AtEnd();
    for (;;) {
      std::string name, value;
      Ws();
      if (!String(&name)) return false;
      Ws();
      if (!Eat(':')) return false;
      Ws();
      if (!Value(&value)) return false;
      if (!members->emplace(name, value).second) return false;
      Ws();
      if (Eat(',')) continue;
      if (Eat('}')) return AtEnd();
      return false;
    }
  }
  bool AtEnd() {
    Ws();
    return i_ == s_.size();
  }
  void Ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool Eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool Literal(std::string_view word, std::string* out) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    *out = std::string(word);
    return true;
  }
  bool Value(std::string* out) {
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '"') return String(out);
    if (c == 't') return Literal("true", out);
    if (c == 'f') return Literal("false", out);
    if (c == 'n') return Literal("null", out);
    return Number(out);
  }
  bool Digits() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    return i_ > start;
  }
  bool Number(std::string* out) {
    const size_t start = i_;
    Eat('-');
    if (Eat('0')) {
    } else if (i_ < s_.size() && s_[i_] >= '1' && s_[i_] <= '9') {
      Digits();
    } else {
      return false;
    }
    if (Eat('.') && !Digits()) return false;
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (!Eat('+')) Eat('-');
      if (!Digits()) return false;
    }
    *out = std::string(s_.substr(start, i_ - start));
    return true;
  }
  bool Hex4(uint32_t* v) {
    if (i_ + 4 > s_.size()) return false;
    *v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      *v <<= 4;
      if (c >= '0' && c <= '9') {
        *v |= c - '0';
      } else if (c >= 'a' && c <= 'f') {
        *v |= c - 'a' + 10;
      } else if (c >= 'A' && c <= 'F') {
        *v |= c - 'A' + 10;
      } else {
        return false;
      }
    }
    return true;
  }
  bool String(std::string* out) {
    if (!Eat('"')) return false;
    out->clear();
    for (;;) {
      if (i_ >= s_.size()) return false;
      const unsigned char c = static_cast<unsigned char>(s_[i_++]);
      if (c == '"') return true;
      if (c < 0x20) return false;  // raw control characters are not allowed
      if (c != '\\') {
        *out += static_cast<char>(c);
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          *out += e;
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(&cp)) return false;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return false;  // lone low surrogate
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo = 0;
            if (!Eat('\\') || !Eat('u') || !Hex4(&lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          return false;
      }
    }
  }

  std::string_view s_;
  size_t i_ = 0;
};

TEST(JsonObjectParserTest, AcceptsValidAndRejectsInvalid) {
  EXPECT_TRUE(JsonObjectParser::Parse(R"({"a":"x\u00e9\ud83d\ude00","b":-1.5e3,"c":true})"));
  EXPECT_EQ((*JsonObjectParser::Parse(R"({"a":"\u0000\"\\"})"))["a"], std::string("\0\"\\", 3));
  EXPECT_FALSE(JsonObjectParser::Parse("{\"a\":\"\x80\"}"));    // invalid UTF-8
  EXPECT_FALSE(JsonObjectParser::Parse("{\"a\":\"\x01\"}"));    // raw control character
  EXPECT_FALSE(JsonObjectParser::Parse(R"({"a":"\ud800"})"));   // lone surrogate
  EXPECT_FALSE(JsonObjectParser::Parse(R"({"a":1,"a":2})"));    // duplicate name
  EXPECT_FALSE(JsonObjectParser::Parse(R"({"a":"x"} extra)"));  // trailing text
  EXPECT_FALSE(JsonObjectParser::Parse(R"({"a":"\x41"})"));     // no \x escape in JSON
}

// --- item 6: the timeline and the traces at the ends of the range ---

// The page drawn over events whose event times sit at MIN, MIN + 1, MAX - 1,
// MAX (kMaxWatermark) and zero, in every kind of event: no exception, and
// every coordinate a finite number.
TEST(CliTimelineExtremesTest, RendererDrawsEventsAtEveryInt64Extreme) {
  using cli::TimelineEvent;
  using K = TimelineEvent::Kind;
  const std::vector<Timestamp> extremes = {kMinTimestamp, kMinTimestamp + 1, 0, kMaxTimestamp - 1,
                                           kMaxWatermark};
  // Ranges: all at the extremes, both ends at once, and one end with zero.
  const std::vector<std::vector<Timestamp>> sets = {extremes,
                                                    {kMinTimestamp + 1, kMaxTimestamp - 1},
                                                    {kMaxTimestamp - 1},
                                                    {kMinTimestamp + 1},
                                                    {kMinTimestamp},
                                                    {kMaxTimestamp},
                                                    {0, kMaxTimestamp - 1}};
  for (const auto& values : sets) {
    std::vector<TimelineEvent> events;
    double t = 0;
    for (Timestamp v : values) {
      TimelineEvent w{K::kSourceWatermark, t += 1};
      w.watermark = v;
      events.push_back(w);
      TimelineEvent c{K::kChannel, t += 1};
      c.watermark = v;
      c.aligned = v;
      c.channel = 0;
      events.push_back(c);
      TimelineEvent f{K::kFiring, t += 1};
      f.key = "k";
      f.start = v;
      f.end = v;  // end - 1 at MIN must not wrap
      f.watermark = v;
      f.firing = "end_of_input";
      events.push_back(f);
      TimelineEvent l{K::kLate, t += 1};
      l.ts = v;
      l.key = "k";
      events.push_back(l);
    }
    std::string html;
    ASSERT_NO_THROW(html = cli::RenderTimelineHtml(events, "extremes", absl::UTCTimeZone()))
        << absl::StrJoin(values, ",");
    EXPECT_THAT(html, HasSubstr("</svg>"));
    // Every number in a coordinate attribute or path is finite.
    for (const char* bad : {"nan", "inf", "NaN", "Infinity"}) {
      for (const char* attr : {"x='", "y='", "cx='", "cy='", "width='", "d='M", " H", " V"}) {
        EXPECT_THAT(html, Not(HasSubstr(absl::StrCat(attr, bad)))) << absl::StrJoin(values, ",");
        EXPECT_THAT(html, Not(HasSubstr(absl::StrCat(attr, "-", bad))))
            << absl::StrJoin(values, ",");
      }
    }
  }
}

// The command line with such timestamps, --trace and --timeline: it runs to
// the end, writes the page, and the trace lines say MIN / MAX or a date.
TEST(CliTimelineExtremesTest, RunWithTimestampsAtInt64ExtremesWritesThePageAndReadableTraces) {
  const std::string input = TempPath("extremes.txt");
  WriteFile(input, "a,-9223372036854775807\nb,9223372036854775806\nc,9223372036854775807\nd,0\n");
  for (const std::string output : {"text", "jsonl"}) {
    const std::string page = TempPath("extremes_" + output + ".html");
    std::remove(page.c_str());
    CliRun r = RunTidemark({"run", "--input=" + input, "--fields=key,ts", "--window=session:5s",
                            "--watermark-interval=per-record", "--trace=watermarks",
                            "--output=" + output, "--timeline=" + page});
    ASSERT_EQ(r.exit_code, 0) << output << ": " << r.err;
    const std::string html = ReadFile(page);
    EXPECT_THAT(html, HasSubstr("<svg")) << output;
    EXPECT_THAT(html, HasSubstr("</html>")) << output;
    EXPECT_THAT(r.err, HasSubstr("timeline written to " + page));
    if (output == "text") {
      EXPECT_THAT(r.out, HasSubstr("key:a,eventtime:[-9223372036854775807|-292275055-05-16 "
                                   "16:47:04.193],currentMaxTimestamp:[-9223372036854775807|"
                                   "-292275055-05-16 16:47:04.193],watermark:["));
      EXPECT_THAT(r.out, HasSubstr("key:c,eventtime:[9223372036854775807|MAX]"));
      EXPECT_THAT(r.out, HasSubstr("key:b,eventtime:[9223372036854775806|292278994-08-17 "
                                   "07:12:55.806]"));
      EXPECT_THAT(r.out, HasSubstr("[watermark] source subtask 0 emits MAX (MAX)"));
    } else {
      int records = 0;
      for (const std::string& line : r.OutLines()) {
        auto obj = JsonObjectParser::Parse(line);
        ASSERT_TRUE(obj) << line;
        if ((*obj)["kind"] == "record") ++records;
      }
      EXPECT_EQ(records, 4);
      EXPECT_THAT(r.out, HasSubstr("\"timestamp\":-9223372036854775807,"));
      EXPECT_THAT(r.out, HasSubstr("\"timestamp\":9223372036854775807,"));
    }
  }
}

// --- item 7: standard input closed ---

// fd 0 closed when the process starts: with --input=- (or no input at all,
// which reads standard input) `run` says so and exits 2 at once instead of
// reading a descriptor the job opened itself; with a file it runs normally.
TEST(CliStdinTest, ClosedStandardInputIsAnErrorNotAnEndlessRead) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "--input=-", "--fields=key,ts"},
        std::vector<std::string>{"run", "--fields=key,ts"}}) {
    CliProcess p(args, CliProcess::kStdinClosed);
    ASSERT_TRUE(p.started());
    const int code = p.Wait(kLimit);
    ASSERT_NE(code, CliProcess::kTimedOut) << absl::StrJoin(args, " ") << ": still running";
    EXPECT_EQ(code, 2) << absl::StrJoin(args, " ");
    EXPECT_THAT(p.err(), HasSubstr("standard input is closed")) << absl::StrJoin(args, " ");
    EXPECT_EQ(p.out(), "");
  }
  const std::string input = TempPath("stdin_closed_file.txt");
  WriteFile(input, "k,1000\n");
  CliProcess p({"run", "--input=" + input, "--fields=key,ts", "--aggregate=count"},
               CliProcess::kStdinClosed);
  ASSERT_TRUE(p.started());
  ASSERT_EQ(p.Wait(kLimit), 0) << p.err();
  EXPECT_EQ(p.out(), "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1\n");
}

// --- item 8: '#' lines ---

TEST(CliCommentsTest, HashLineIsARecordUnlessCommentsFlagSkipsAndCountsIt) {
  // Without --comments: '#tag1' is a key like any other.
  const std::string data = TempPath("hash_data.txt");
  WriteFile(data, "#tag1,1000\nk,2000\n");
  CliRun plain = RunTidemark(
      {"run", "--input=" + data, "--fields=key,ts", "--aggregate=count", "--window=tumbling:5s"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.OutLines(),
              ::testing::UnorderedElementsAre(
                  "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<#tag1>--count: 1",
                  "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1"));
  EXPECT_THAT(plain.err, HasSubstr("tidemark: 2 records, 2 window results"));

  // With --comments=#: such lines are skipped and counted.
  const std::string commented = TempPath("hash_comments.txt");
  WriteFile(commented, "#tag1,1000\nk,2000\n  # a note\n");
  CliRun skip = RunTidemark({"run", "--input=" + commented, "--fields=key,ts", "--comments=#",
                             "--aggregate=count", "--window=tumbling:5s"});
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_THAT(
      skip.OutLines(),
      ::testing::ElementsAre("window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 1"));
  EXPECT_THAT(skip.err, HasSubstr("tidemark: 1 record, 1 window result,"));
  EXPECT_THAT(skip.err, HasSubstr(", 2 comment lines skipped"));

  // A "#watermark" marker is special only with --watermarks=marker (and wins
  // over --comments); otherwise it is an ordinary, here malformed, line.
  const std::string marked = TempPath("hash_marker.txt");
  WriteFile(marked, "k,1000\n#watermark 6000\n# note\nk,7000\n");
  CliRun marker = RunTidemark({"run", "--input=" + marked, "--fields=key,ts", "--comments=#",
                               "--watermarks=marker", "--aggregate=count", "--window=tumbling:5s",
                               "--output=jsonl"});
  ASSERT_EQ(marker.exit_code, 0) << marker.err;
  EXPECT_THAT(marker.out, HasSubstr("\"start\":0,\"end\":5000,\"value\":1,\"count\":1,"
                                    "\"firing\":\"on_time\",\"watermark\":6000"));
  EXPECT_THAT(marker.err, HasSubstr(", 1 comment line skipped"));
  CliRun no_marker = RunTidemark({"run", "--input=" + marked, "--fields=key,ts"});
  EXPECT_EQ(no_marker.exit_code, 2);
  EXPECT_THAT(no_marker.err, HasSubstr(marked + ":2: expected 2 fields (key,ts), found 1"));
}

// --- item 10: JSON output of any key ---

TEST(CliJsonlTest, KeysWithInvalidUtf8AndControlBytesAreValidJson) {
  const std::string fffd = "\xEF\xBF\xBD";
  struct Key {
    std::string raw;
    std::string json;  // the decoded "key" value
    bool hex;          // whether "key_hex" is there
  };
  const std::vector<Key> keys = {
      {"a\x80", "a" + fffd, true},
      {"a\xFF", "a" + fffd, true},                        // differs from the one above by key_hex
      {"b\xC3\x28", "b" + fffd + "(", true},              // truncated 2-byte sequence
      {"e\xED\xA0\x80", "e" + fffd + fffd + fffd, true},  // an encoded surrogate: 3 subparts
      {"f\xE2\x82", "f" + fffd, true},                    // truncated 3-byte: one subpart
      {"g\xF0\x9F\x98", "g" + fffd, true},                // truncated 4-byte: one subpart
      {"h\xC0\xAF", "h" + fffd + fffd, true},             // overlong
      {std::string("n\0l", 3), std::string("n\0l", 3), false},
      {"q\"uo\\te", "q\"uo\\te", false},
      {"c\x01\x1f\x7f\b\f\t\rx", "c\x01\x1f\x7f\b\f\t\rx", false},
      {"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", false},
  };
  std::string input;
  for (const Key& k : keys) absl::StrAppend(&input, k.raw, ",1000\n");
  // Then a late record (side output: its key and line) after the watermark passed.
  const std::string late_line = "late\x80key,10";
  absl::StrAppend(&input, "z,100000\n", late_line, "\n");
  const std::string path = TempPath("jsonl_keys.txt");
  WriteFile(path, input);
  CliRun r = RunTidemark({"run", "--input=" + path, "--fields=key,ts", "--aggregate=count",
                          "--window=tumbling:5s", "--watermark-interval=per-record", "--late=side",
                          "--trace=watermarks", "--output=jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::map<std::string, std::string>> windows;  // by key_hex or key
  int records = 0, late = 0;
  for (const std::string& line : r.OutLines()) {
    auto obj = JsonObjectParser::Parse(line);
    ASSERT_TRUE(obj) << "not valid UTF-8 JSON: " << absl::CHexEscape(line);
    const std::string kind = (*obj)["kind"];
    if (kind == "record") ++records;
    if (kind == "window") {
      const std::string id = obj->count("key_hex") ? (*obj)["key_hex"] : (*obj)["key"];
      windows[id] = *obj;
    }
    if (kind == "late") {
      ++late;
      EXPECT_EQ((*obj)["key"], "late" + fffd + "key");
      EXPECT_EQ((*obj)["key_hex"], absl::BytesToHexString("late\x80key"));
      EXPECT_EQ((*obj)["line"], "late" + fffd + "key,10");
      EXPECT_EQ((*obj)["line_hex"], absl::BytesToHexString(late_line));
    }
  }
  EXPECT_EQ(records, static_cast<int>(keys.size()) + 2);
  EXPECT_EQ(late, 1);
  for (const Key& k : keys) {
    const std::string id = k.hex ? absl::BytesToHexString(k.raw) : k.json;
    ASSERT_EQ(windows.count(id), 1u) << absl::CHexEscape(k.raw);
    auto& w = windows[id];
    EXPECT_EQ(w["key"], k.json) << absl::CHexEscape(k.raw);
    EXPECT_EQ(w.count("key_hex"), k.hex ? 1u : 0u) << absl::CHexEscape(k.raw);
    EXPECT_EQ(w["count"], "1") << absl::CHexEscape(k.raw);
  }
  // The replacement is written as the escape \ufffd, and the help says how.
  EXPECT_THAT(r.out, HasSubstr(R"("key":"b\ufffd(","key_hex":"62c328")"));
  CliRun help = RunTidemark({"help", "run"});
  EXPECT_THAT(help.out, HasSubstr(R"("key":"\ufffd(","key_hex":"c328")"));
}

// --- item 11: output paths checked before the job runs ---

TEST(CliOutputPathTest, UnwritableTimelineOrDeadLetterFailsBeforeTheJobRuns) {
  const std::string regular = TempPath("a_regular_file");
  WriteFile(regular, "x");
  const std::vector<std::string> bad_paths = {
      "/nonexistent-tidemark-dir/out.html",  // no such directory
      regular + "/out.html",                 // under a regular file
      "/tmp",                                // a directory
  };
  const std::string input = TempPath("paths_input.txt");
  WriteFile(input, "k,1000\nk,7000\n");
  for (const std::string flag : {"timeline", "dead-letter"}) {
    for (const std::string& bad : bad_paths) {
      std::vector<std::string> args = {"run", "--input=" + input, "--fields=key,ts",
                                       absl::StrCat("--", flag, "=", bad)};
      if (flag == "dead-letter") args.push_back("--bad-lines=skip");
      CliRun r = RunTidemark(args);
      EXPECT_EQ(r.exit_code, 2) << flag << "=" << bad;
      EXPECT_THAT(r.err, ::testing::StartsWith(absl::StrCat("tidemark: --", flag, "=", bad,
                                                            ": cannot open for writing: ")))
          << flag << "=" << bad;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_EQ(r.out, "") << flag << "=" << bad;

      // Reading standard input that stays open: the error comes at once,
      // and nothing of the input has been read.
      int in[2];
      ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
      const std::string pending = "k,1000\nk,7000\n";
      ASSERT_EQ(write(in[1], pending.data(), pending.size()), static_cast<ssize_t>(pending.size()));
      std::vector<std::string> stdin_args = args;
      stdin_args[1] = "--input=-";
      CliProcess p(stdin_args, in[0]);
      ASSERT_TRUE(p.started());
      const int code = p.Wait(std::chrono::seconds(30));
      ASSERT_NE(code, CliProcess::kTimedOut) << flag << "=" << bad << ": the job ran";
      EXPECT_EQ(code, 2);
      EXPECT_EQ(p.out(), "");
      int unread = 0;
      ASSERT_EQ(ioctl(in[0], FIONREAD, &unread), 0);
      EXPECT_EQ(unread, static_cast<int>(pending.size())) << "input was consumed";
      close(in[0]);
      close(in[1]);
    }
  }
}

}  // namespace
}  // namespace tidemark
