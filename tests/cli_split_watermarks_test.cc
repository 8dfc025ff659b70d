// `tidemark run` with several files in one source subtask (per-split
// watermarks), the future-timestamp guard and the flags of issue 16 items
// 2-4 (docs/semantics.md 2.7, 2.9, 2.10).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli_test_util.h"

namespace tidemark::testing {
namespace {

int CountPrefix(const std::vector<std::string>& lines, const std::string& prefix) {
  return static_cast<int>(std::count_if(
      lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

// fast.txt advances 1000 ms a line, slow.txt 250 ms; read by one subtask a
// line from each in turn.
struct TwoSpeedFiles {
  std::string fast = TempPath("split_fast.txt");
  std::string slow = TempPath("split_slow.txt");
  static constexpr int kLines = 20;
  TwoSpeedFiles() {
    std::string f, s;
    for (int i = 0; i < kLines; ++i) {
      absl::StrAppend(&f, "f,", i * 1000, "\n");
      absl::StrAppend(&s, "s,", i * 250, "\n");
    }
    WriteFile(fast, f);
    WriteFile(slow, s);
  }
  // The late records of the merged stream (one bounded:0 generator over the
  // interleaved lines; tumbling 2 s): a record is late when its window's
  // last millisecond is at or below the maximum timestamp so far - 1.
  static int MergedLate() {
    int late = 0;
    int64_t max_ts = -1;
    bool any = false;
    for (int i = 0; i < 2 * kLines; ++i) {
      const int64_t ts = (i / 2) * (i % 2 == 0 ? 1000 : 250);
      if (any && ts - ts % 2000 + 1999 <= max_ts - 1) ++late;
      max_ts = std::max(max_ts, ts);
      any = true;
    }
    return late;
  }
  std::vector<std::string> Args(std::vector<std::string> more) const {
    std::vector<std::string> a = {"run",
                                  "--input=" + fast,
                                  "--input=" + slow,
                                  "--source-parallelism=1",
                                  "--fields=key,ts",
                                  "--watermarks=bounded:0s",
                                  "--watermark-interval=per-record",
                                  "--window=tumbling:2s",
                                  "--late=side",
                                  "--aggregate=count"};
    a.insert(a.end(), more.begin(), more.end());
    return a;
  }
};

TEST(CliSplitWatermarks, PerSplitGenerationDropsNothingTheMergedOneDrops) {
  TwoSpeedFiles files;
  ASSERT_GT(TwoSpeedFiles::MergedLate(), 0);
  const CliRun per_split = RunTidemark(files.Args({}));
  ASSERT_EQ(per_split.exit_code, 0) << per_split.err;
  EXPECT_EQ(CountPrefix(per_split.OutLines(), "Side> "), 0) << per_split.out;
  EXPECT_NE(per_split.err.find("40 records"), std::string::npos) << per_split.err;
  EXPECT_NE(per_split.err.find(" 0 late (side output)"), std::string::npos) << per_split.err;

  const CliRun merged = RunTidemark(files.Args({"--per-split-watermarks=false"}));
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(CountPrefix(merged.OutLines(), "Side> s,"), TwoSpeedFiles::MergedLate()) << merged.out;
  EXPECT_EQ(CountPrefix(merged.OutLines(), "Side> f,"), 0);
}

TEST(CliSplitWatermarks, TheTraceShowsEachSplitsWatermark) {
  TwoSpeedFiles files;
  const CliRun r = RunTidemark(files.Args({"--trace=watermarks"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("[watermark] source subtask 0 split " + files.fast + " -> 18999"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("[watermark] source subtask 0 split " + files.slow + " -> 4749"),
            std::string::npos);
  // The subtask's own watermark is the minimum: never beyond the slow split's
  // before its end.
  EXPECT_EQ(r.out.find("[watermark] source subtask 0 emits 18999"), std::string::npos);
  // Both files end: the subtask emits MAX, without going idle and active
  // again around it when its last split is released (no --idleness here).
  EXPECT_NE(r.out.find("[watermark] source subtask 0 emits MAX"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[watermark] source subtask 0 is idle"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("[watermark] source subtask 0 is active"), std::string::npos) << r.out;
  const CliRun json = RunTidemark(files.Args({"--trace=watermarks", "--output=jsonl"}));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("{\"kind\":\"split_watermark\",\"subtask\":0,\"split\":\"" + files.slow +
                          "\",\"watermark\":4749,\"idle\":false"),
            std::string::npos)
      << json.out;
}

TEST(CliSplitWatermarks, FilesSpreadOverFewerSubtasks) {
  // Three files over two subtasks: files 0 and 2 in subtask 0.
  TwoSpeedFiles files;
  const std::string third = TempPath("split_third.txt");
  WriteFile(third, "t,0\nt,100\n");
  std::vector<std::string> args = files.Args({"--input=" + third, "--source-parallelism=2"});
  const CliRun r = RunTidemark(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("42 records"), std::string::npos) << r.err;
  const CliRun plan =
      RunTidemark(files.Args({"--input=" + third, "--source-parallelism=2", "--explain"}));
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_NE(plan.out.find("Source: input -> Timestamps/Watermarks -> Drop markers\" p=2"),
            std::string::npos)
      << plan.out;
}

TEST(CliFutureSkew, ARecordFromTheFutureGoesToTheSideOutputAndMovesNoWatermark) {
  // 4102444800000 is 2100-01-01: far more than an hour ahead of any clock
  // this test runs on; the others are in 1970.
  const std::string in = TempPath("future.txt");
  WriteFile(in, "a,1000\na,4102444800000\na,2000\na,7000\n");
  const std::vector<std::string> base = {"run",
                                         "--input=" + in,
                                         "--fields=key,ts",
                                         "--watermarks=bounded:0s",
                                         "--watermark-interval=per-record",
                                         "--window=tumbling:5s",
                                         "--late=side",
                                         "--aggregate=count"};
  std::vector<std::string> guarded = base;
  guarded.push_back("--max-future-skew=1h");
  const CliRun r = RunTidemark(guarded);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = r.OutLines();
  EXPECT_EQ(CountPrefix(lines, "Future> a,4102444800000"), 1) << r.out;
  EXPECT_EQ(CountPrefix(lines, "Side> "), 0) << "a,2000 is on time: the watermark did not jump";
  EXPECT_NE(r.out.find("window:[1970-01-01 00:00:00--1970-01-01 00:00:05]-<a>--count: 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("1 future (side output)"), std::string::npos) << r.err;
  // Without the guard the record jumps the watermark and 2000 and 7000 are late.
  const CliRun unguarded = RunTidemark(base);
  ASSERT_EQ(unguarded.exit_code, 0) << unguarded.err;
  EXPECT_EQ(CountPrefix(unguarded.OutLines(), "Side> "), 2) << unguarded.out;
  // JSON lines.
  guarded.push_back("--output=jsonl");
  const CliRun json = RunTidemark(guarded);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("{\"kind\":\"future\",\"key\":\"a\",\"timestamp\":4102444800000,"),
            std::string::npos)
      << json.out;
}

TEST(CliIssue16Flags, BadValuesAreOneLineErrors) {
  const std::string in = TempPath("flags16.txt");
  WriteFile(in, "a,1\n");
  struct Case {
    std::string flag, message;
  };
  for (const Case& c : std::vector<Case>{
           {"--flush-after=0s", "--flush-after must be greater than 0"},
           {"--flush-after=soon", "--flush-after: bad duration"},
           {"--max-future-skew=-1s", "--max-future-skew must not be negative"},
           {"--source-parallelism=2", "--source-parallelism=2 is more than the 1 input(s)"},
           {"--source-parallelism=-1", "--source-parallelism must not be negative"}}) {
    const CliRun r = RunTidemark({"run", "--input=" + in, "--fields=key,ts", c.flag});
    EXPECT_EQ(r.exit_code, 2) << c.flag;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.flag << ": " << r.err;
  }
  const CliRun ok = RunTidemark(
      {"run", "--input=" + in, "--fields=key,ts", "--flush-after=2s", "--max-future-skew=0s"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

}  // namespace
}  // namespace tidemark::testing
