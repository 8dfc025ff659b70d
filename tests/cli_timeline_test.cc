// The timeline page (`tidemark run --timeline=FILE.html`) opened in headless
// Chromium: the rendered page must hold a lane per source subtask, a lane per
// input channel of each window subtask, the aligned minimum, firing marks and
// late-record marks.  A screenshot is saved as a test artifact
// (build/tests/artifacts/timeline.png).  Chromium comes from Debian's package,
// installed by tools/setup.sh --with-chromium the first time this test runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli_test_util.h"

namespace tidemark {
namespace {

using ::testing::HasSubstr;
using testing::ReadFile;
using testing::ShellQuote;
using testing::TempPath;
using testing::WriteFile;

std::string Chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (std::system(absl::StrCat("test -x ", c).c_str()) == 0) return c;
  }
  const std::string setup = absl::StrCat(TIDEMARK_SOURCE_DIR, "/tools/setup.sh --with-chromium");
  if (std::system((setup + " > /dev/null 2>&1").c_str()) != 0) return "";
  return std::system("test -x /usr/bin/chromium") == 0 ? "/usr/bin/chromium" : "";
}

std::string Headless(const std::string& chromium, const std::string& profile) {
  return absl::StrCat(chromium,
                      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                      " --disable-background-networking --disable-component-update --disable-sync"
                      " --user-data-dir=",
                      ShellQuote(profile));
}

TEST(CliTimelineTest, RenderedPageShowsLanesAndMarks) {
  const std::string a = TempPath("tl_a.txt"), b = TempPath("tl_b.txt");
  WriteFile(a, "k1,1000\nk2,1500\n#watermark 6000\nk1,7000\n#watermark 20000\nk1,1200\n");
  // k1,1200 and k1,1300 come after their own file's high watermark; the
  // window subtask of k1 sees at least one of them after both channels
  // passed 4999, so at least one late mark is certain.
  WriteFile(
      b,
      "k1,2000\n#watermark 3000\nk2,4000\n#watermark 5500\nk2,9000\n#watermark 12000\nk1,1300\n");
  const std::string page = TempPath("timeline.html");
  testing::CliRun r = testing::RunTidemark(
      {"run", "--input=" + a, "--input=" + b, "--fields=key,ts", "--watermarks=marker",
       "--window=tumbling:5s", "--late=side", "--parallelism=2", "--timeline=" + page});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string html = ReadFile(page);
  ASSERT_THAT(html, HasSubstr("<svg"));
  EXPECT_EQ(html.find("http://") == std::string::npos ||
                html.find("http://www.w3.org/2000/svg") != std::string::npos,
            true)
      << "the page must not load anything from the network";

  const std::string chromium = Chromium();
  ASSERT_FALSE(chromium.empty()) << "chromium could not be installed";
  const std::string dom_file = TempPath("timeline.dom");
  const std::string cmd =
      absl::StrCat(Headless(chromium, TempPath("profile1")), " --dump-dom ",
                   ShellQuote("file://" + page), " > ", ShellQuote(dom_file), " 2>/dev/null");
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  const std::string dom = ReadFile(dom_file);
  // One lane per source subtask (the two files).
  EXPECT_THAT(dom, HasSubstr("class=\"lane source\" data-subtask=\"0\""));
  EXPECT_THAT(dom, HasSubstr("class=\"lane source\" data-subtask=\"1\""));
  // Each window subtask: a lane per input channel and the aligned minimum.
  for (int ws = 0; ws < 2; ++ws) {
    for (int ch = 0; ch < 2; ++ch) {
      EXPECT_THAT(dom, HasSubstr(absl::StrCat("class=\"lane channel\" data-subtask=\"", ws,
                                              "\" data-channel=\"", ch, "\"")));
    }
    EXPECT_THAT(dom, HasSubstr(absl::StrCat("class=\"lane aligned\" data-subtask=\"", ws, "\"")));
  }
  EXPECT_THAT(dom, HasSubstr("class=\"mark firing on_time\""));
  EXPECT_THAT(dom, HasSubstr("class=\"mark late\""));  // k1,1200 after the watermark passed 4999
  EXPECT_THAT(dom, HasSubstr("id=\"details\""));

  const std::string artifacts = absl::StrCat(TIDEMARK_BINARY_DIR, "/artifacts");
  std::system(absl::StrCat("mkdir -p ", ShellQuote(artifacts)).c_str());
  const std::string png = artifacts + "/timeline.png";
  std::remove(png.c_str());
  const std::string shot =
      absl::StrCat(Headless(chromium, TempPath("profile2")),
                   " --hide-scrollbars --window-size=1250,900 --screenshot=", ShellQuote(png), " ",
                   ShellQuote("file://" + page), " > /dev/null 2>&1");
  ASSERT_EQ(std::system(shot.c_str()), 0);
  EXPECT_GT(ReadFile(png).size(), 10000u) << "screenshot missing or empty: " << png;
}

}  // namespace
}  // namespace tidemark
