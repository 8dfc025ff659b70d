// tests/cli_input_format_test.cc: what `tidemark run` accepts in a line, and
// what it refuses unless a flag allows it (issue 23, item 5): extra fields,
// spaces around the timestamp, a header line; --output-per-rank without
// mpirun.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_scenario_args.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using testing::CliRun;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::InputFile;
using testing::RunTidemark;

TEST(CliInputFormatTest, ExtraFieldsAreAnErrorUnlessAllowed) {
  const std::string in = InputFile("extra.txt", {"k,1000,5", "k,2000,6,surplus"});
  CliRun r = RunTidemark({"run", "--input=" + in, "--fields=key,ts,value", "--value=value"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(in + ":2: expected 3 fields (key,ts,value), found 4 "
                                    "(--allow-extra-fields ignores the extra ones): "
                                    "'k,2000,6,surplus'"));
  EXPECT_EQ(r.out, "");
  CliRun ok = RunTidemark({"run", "--input=" + in, "--fields=key,ts,value", "--value=value",
                           "--allow-extra-fields", "--summary=false"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.OutLines(),
              ElementsAre("window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--sum: 11"));
}

TEST(CliInputFormatTest, ASpaceAroundTheTimestampIsAnErrorUnlessTrimmed) {
  const std::string in = InputFile("space.txt", {"k,1000", "k, 2000", "k,3000 "});
  CliRun r = RunTidemark({"run", "--input=" + in, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(in + ":2: field 'ts': timestamp ' 2000' has a leading space "
                                    "(--trim-spaces allows it)"));
  const std::string trailing = InputFile("space2.txt", {"k,3000 ,1"});
  CliRun t = RunTidemark({"run", "--input=" + trailing, "--fields=key,ts,value"});
  EXPECT_EQ(t.exit_code, 2);
  EXPECT_THAT(t.err, HasSubstr(trailing + ":1: field 'ts': timestamp '3000 ' has a trailing space "
                                          "(--trim-spaces allows it)"));
  CliRun ok = RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--trim-spaces",
                           "--aggregate=count", "--summary=false"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.OutLines(),
              ElementsAre("window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 3"));
}

TEST(CliInputFormatTest, SkipHeaderSkipsTheFirstLineOfEachInputAndCountsIt) {
  const std::string a = InputFile("header_a.csv", {"key,ts", "k,1000"});
  const std::string b = InputFile("header_b.csv", {"key,ts", "k,2000", "j,3000"});
  CliRun r = RunTidemark({"run", "--input=" + a, "--fields=key,ts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(a + ":1: field 'ts': timestamp 'ts' is not an integer"));
  CliRun ok = RunTidemark({"run", "--input=" + a, "--input=" + b, "--fields=key,ts",
                           "--skip-header", "--aggregate=count"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.OutLines(),
              ::testing::UnorderedElementsAre(
                  "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<k>--count: 2",
                  "window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<j>--count: 1"));
  EXPECT_THAT(ok.err, HasSubstr("2 header lines skipped"));
}

TEST(CliInputFormatTest, OutputPerRankWithoutMpirunIsAnError) {
  const std::string in = InputFile("per_rank.txt", {"k,1000"});
  const std::string prefix = testing::TempPath("per_rank_out");
  CliRun r =
      RunTidemark({"run", "--input=" + in, "--fields=key,ts", "--output-per-rank=" + prefix});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--output-per-rank is for jobs under mpirun"));
  EXPECT_EQ(r.out, "");
  EXPECT_NE(access((prefix + ".0").c_str(), F_OK), 0) << "nothing is written";
}

}  // namespace
}  // namespace tidemark
