// The numbers `tidemark run` prints (issue 23, item 1): integer aggregates are
// exact over the whole 64-bit range, an overflow fails the job naming the key
// and the window, decimals print in the shortest form that reads back to the
// same double, in text, jsonl and --output-dir files alike; --aggregate=avg.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli_scenario_args.h"
#include "cli_test_util.h"
#include "test_util.h"

namespace tidemark {
namespace {

using testing::CliRun;
using testing::CommittedLines;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::InputFile;
using testing::RunTidemark;
using testing::TempDir;

// One window [0, 5 s) per key: every record at 1 s.
std::vector<std::string> Args(const std::string& input, const std::string& aggregate,
                              const std::string& output = "text") {
  return {"run",
          "--input=" + input,
          "--value=value",
          "--aggregate=" + aggregate,
          "--window=tumbling:5s",
          "--output=" + output,
          "--summary=false"};
}

std::string TextLine(const std::string& key, const std::string& aggregate,
                     const std::string& value) {
  return absl::StrCat("window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<", key, ">--", aggregate,
                      ": ", value);
}

// The value of `key` printed by `tidemark run` with `aggregate` over `values`.
std::string Printed(const std::vector<std::string>& values, const std::string& aggregate) {
  std::vector<std::string> lines;
  for (const std::string& v : values) lines.push_back("a,1000," + v);
  CliRun r = RunTidemark(Args(InputFile("numbers.txt", lines), aggregate));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string prefix = TextLine("a", aggregate, "");
  for (const std::string& l : r.OutLines())
    if (l.rfind(prefix, 0) == 0) return l.substr(prefix.size());
  ADD_FAILURE() << "no result line in:\n" << r.out << r.err;
  return "";
}

TEST(CliNumbersTest, IntegerSumIsExactInTextJsonlAndOutputFiles) {
  const std::string input = InputFile("exact.txt", {"a,1000,1234567"});
  CliRun text = RunTidemark(Args(input, "sum"));
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.OutLines(), ElementsAre(TextLine("a", "sum", "1234567")));

  CliRun jsonl = RunTidemark(Args(input, "sum", "jsonl"));
  ASSERT_EQ(jsonl.exit_code, 0) << jsonl.err;
  ASSERT_EQ(jsonl.OutLines().size(), 1u) << jsonl.out;
  EXPECT_THAT(jsonl.out, HasSubstr("\"value\":1234567,"));

  TempDir dir;
  std::vector<std::string> args = Args(input, "sum");
  args.push_back("--output-dir=" + dir.Path("out"));
  CliRun files = RunTidemark(args);
  ASSERT_EQ(files.exit_code, 0) << files.err;
  int hidden = 0;
  const std::vector<std::string> lines = CommittedLines(dir.Path("out"), &hidden);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("\"value\":1234567,"));
}

TEST(CliNumbersTest, IntegersStayExactAtTheEndsOfThe64BitRange) {
  EXPECT_EQ(Printed({"9223372036854775806", "1"}, "sum"), "9223372036854775807");
  EXPECT_EQ(Printed({"-9223372036854775807", "-1"}, "sum"), "-9223372036854775808");
  // Past the range and back: the sum is exact, so it fits again.
  EXPECT_EQ(Printed({"9223372036854775807", "1", "-1"}, "sum"), "9223372036854775807");
  EXPECT_EQ(Printed({"9223372036854775807", "9223372036854775806"}, "max"), "9223372036854775807");
  EXPECT_EQ(Printed({"9223372036854775807", "9223372036854775806"}, "min"), "9223372036854775806");
  EXPECT_EQ(Printed({"-9223372036854775808", "5"}, "min"), "-9223372036854775808");
  EXPECT_EQ(Printed({"9007199254740993", "0"}, "sum"), "9007199254740993");  // 2^53 + 1
  EXPECT_EQ(Printed({"7", "8", "9"}, "count"), "3");
}

TEST(CliNumbersTest, IntegerOverflowFailsNamingKeyAndWindow) {
  const std::string input =
      InputFile("overflow.txt", {"a,1000,9223372036854775807", "b,1000,1", "a,2000,1"});
  CliRun r = RunTidemark(Args(input, "sum"));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_THAT(r.err, HasSubstr("key 'a', window [1970-01-01 00:00:00.000, 1970-01-01 "
                               "00:00:05.000): sum 9223372036854775808 is outside the 64-bit "
                               "integer range"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("<a>")));  // never a wrapped or rounded value

  CliRun under = RunTidemark(
      Args(InputFile("underflow.txt", {"a,1000,-9223372036854775808", "a,2000,-1"}), "sum"));
  EXPECT_EQ(under.exit_code, 2);
  EXPECT_THAT(under.err, HasSubstr("sum -9223372036854775809 is outside the 64-bit integer range"));
}

TEST(CliNumbersTest, IntegerLiteralOutsideTheRangeIsABadLineWithItsPlace) {
  const std::string input = InputFile("big.txt", {"a,1000,1", "a,2000,9223372036854775808"});
  CliRun r = RunTidemark(Args(input, "sum"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(input + ":2: field 'value': '9223372036854775808' is outside the "
                                       "64-bit integer range"));
}

TEST(CliNumbersTest, DecimalsPrintInTheShortestFormThatReadsBack) {
  EXPECT_EQ(Printed({"0.1", "0.2"}, "sum"), "0.30000000000000004");
  EXPECT_EQ(Printed({"1234567.5"}, "sum"), "1234567.5");
  EXPECT_EQ(Printed({"0.1"}, "sum"), "0.1");
  EXPECT_EQ(Printed({"1e21", "1e21"}, "sum"), "2e+21");
  EXPECT_EQ(Printed({"123456789.125", "1"}, "sum"), "123456790.125");
  // Mixed: the extreme is printed as it was read.
  EXPECT_EQ(Printed({"2", "2.5"}, "min"), "2");
  EXPECT_EQ(Printed({"2", "2.5"}, "max"), "2.5");
  EXPECT_EQ(Printed({"1.0", "-3"}, "min"), "-3");
}

TEST(CliNumbersTest, Average) {
  EXPECT_EQ(Printed({"1", "2"}, "avg"), "1.5");
  EXPECT_EQ(Printed({"4", "4"}, "avg"), "4");
  EXPECT_EQ(Printed({"0.1", "0.2", "0.3"}, "avg"), "0.20000000000000004");
  // Exact integer sum beyond the 64-bit range, divided once.
  EXPECT_EQ(Printed({"9223372036854775807", "9223372036854775807"}, "avg"),
            "9223372036854775808");  // a double: 2^63
  // Without --value every record counts 1.
  CliRun r = RunTidemark({"run", "--input=" + InputFile("ones.txt", {"a,1000", "a,2000"}),
                          "--fields=key,ts", "--aggregate=avg", "--summary=false"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.OutLines(), ElementsAre(TextLine("a", "avg", "1")));
  CliRun bad = RunTidemark({"run", "--input=-", "--aggregate=median"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("expected sum, count, min, max, avg or list"));
}

}  // namespace
}  // namespace tidemark
