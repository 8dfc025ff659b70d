// The line reader under the file and socket sources: a line over the maximum
// length is rejected as soon as it passes the limit, without being buffered
// whole, and its error text is bounded; scanning for delimiters examines each
// byte once (before, a line without a newline was re-scanned from its start
// after every read: quadratic time, and 3-5x its size in memory).  Counts,
// not time: the reader's stats() say how many bytes it examined and the most
// it buffered.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kChunk = 1 << 16;  // the reader's read size

using tidemark::testing::TempDir;

// Writes `parts` to a file; a part with repeat > 0 is that many copies of c.
struct Part {
  std::string text;
  size_t repeat = 0;
  char c = 'x';
};
int64_t WriteParts(const std::string& path, const std::vector<Part>& parts) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  int64_t size = 0;
  for (const Part& p : parts) {
    if (p.repeat == 0) {
      out << p.text;
      size += static_cast<int64_t>(p.text.size());
      continue;
    }
    const std::string b(kMiB, p.c);
    for (size_t left = p.repeat; left > 0;) {
      const size_t n = std::min(left, b.size());
      out.write(b.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
    size += static_cast<int64_t>(p.repeat);
  }
  return size;
}

// Next() until it returns something other than kNothing, waiting in poll()
// on the reader's descriptor (as the executor does).
LineReader::Result NextWaiting(LineReader& r, std::string_view* line, LineLocation* where) {
  for (;;) {
    const LineReader::Result res = r.Next(line, where);
    if (res != LineReader::Result::kNothing) return res;
    pollfd p{r.fd(), POLLIN, 0};
    if (poll(&p, 1, 30000) == 0) return LineReader::Result::kNothing;  // stuck: fail
  }
}

TEST(LineReader, OverLongLineIsRejectedWithoutBufferingIt) {
  TempDir dir;
  const std::string path = dir.path() + "/long.txt";
  const size_t kLong = 64 * kMiB;
  const int64_t size = WriteParts(path, {{"first\n"}, {"", kLong}, {"\nafter\n"}});
  LineReaderOptions options;
  options.max_line_length = kMiB;
  auto reader = OpenFileReader(path, 0, 1, false, options);
  std::string_view line;
  LineLocation where{};
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "first");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kOverLong);
  EXPECT_EQ(where.line_number, 2);
  const OverLongLine& o = reader->over_long();
  EXPECT_EQ(o.where.line_number, 2);
  EXPECT_EQ(o.max_length, kMiB);
  EXPECT_EQ(o.length, -1) << "reported as soon as it passed the limit";
  EXPECT_EQ(o.prefix, std::string(OverLongLine::kPrefixBytes, 'x'));
  const std::string text = o.Describe();
  EXPECT_LT(text.size(), 1024u);
  EXPECT_EQ(text, path + ":2: line is longer than 1048576 bytes (more than 1048576): '" +
                      std::string(OverLongLine::kPrefixBytes, 'x') + "...'");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "after");
  EXPECT_EQ(where.line_number, 3);
  EXPECT_EQ(reader->Next(&line, &where), LineReader::Result::kEnd);

  const LineReader::Stats st = reader->stats();
  EXPECT_EQ(st.bytes_read, size);
  // Never more than the limit, a possible '\r' and one read.
  EXPECT_LE(st.buffer_peak, kMiB + 1 + kChunk);
  EXPECT_LE(st.buffer_capacity, kMiB + 1 + kChunk);
  EXPECT_EQ(st.bytes_scanned, size) << "each byte examined once";
}

TEST(LineReader, ScanningExaminesEachByteOnce) {
  // Lines just under the limit arrive in many reads; before, each read
  // re-scanned the line from its start (0.9 MiB / 64 KiB = 15 reads: ~7x).
  TempDir dir;
  const std::string path = dir.path() + "/lines.txt";
  std::vector<Part> parts;
  for (int i = 0; i < 4; ++i) {
    parts.push_back({"", 900 * 1024, static_cast<char>('a' + i)});
    parts.push_back({"\n"});
    for (int k = 0; k < 1000; ++k) parts.push_back({"short " + std::to_string(k) + "\r\n"});
  }
  parts.push_back({"", 3 * kMiB});  // over-long, unterminated at the end
  const int64_t size = WriteParts(path, parts);
  LineReaderOptions options;
  options.max_line_length = kMiB;
  auto reader = OpenFileReader(path, 0, 1, false, options);
  std::string_view line;
  LineLocation where{};
  int64_t lines = 0, long_lines = 0, over_long = 0;
  for (;;) {
    const LineReader::Result r = reader->Next(&line, &where);
    if (r == LineReader::Result::kEnd) break;
    ASSERT_NE(r, LineReader::Result::kNothing);
    if (r == LineReader::Result::kOverLong) {
      ++over_long;
      EXPECT_EQ(where.line_number, 4 * 1001 + 1);
      continue;
    }
    ++lines;
    if (line.size() == 900 * 1024) ++long_lines;
  }
  EXPECT_EQ(lines, 4 * 1001);
  EXPECT_EQ(long_lines, 4);
  EXPECT_EQ(over_long, 1);
  EXPECT_EQ(reader->stats().bytes_scanned, size);
  EXPECT_LE(reader->stats().buffer_peak, kMiB + 1 + kChunk);
}

TEST(LineReader, LimitIsTheLineWithoutDelimiterAndCarriageReturn) {
  TempDir dir;
  const std::string path = dir.path() + "/edge.txt";
  WriteParts(path, {{"12345678\n12345678\r\n123456789\nok\n123456789"}});
  LineReaderOptions options;
  options.max_line_length = 8;
  auto reader = OpenFileReader(path, 0, 1, false, options);
  std::string_view line;
  LineLocation where{};
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "12345678");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "12345678");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kOverLong);
  EXPECT_EQ(reader->over_long().length, 9) << "the whole line was there: its length is known";
  EXPECT_EQ(reader->over_long().Message(), "line is longer than 8 bytes (9)");
  EXPECT_EQ(reader->over_long().QuotedPrefix(), "123456789");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "ok");
  EXPECT_EQ(where.line_number, 4);
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kOverLong);
  EXPECT_EQ(where.line_number, 5);
  EXPECT_EQ(reader->Next(&line, &where), LineReader::Result::kEnd);
}

// A UTF-8 byte-order mark at the start of the file is not part of the first
// line; one anywhere else is text.
TEST(LineReader, AByteOrderMarkAtTheStartIsNotText) {
  TempDir dir;
  const std::string path = dir.path() + "/bom.txt";
  WriteParts(path, {{"\xEF\xBB\xBF"
                     "a,1\n\xEF\xBB\xBF"
                     "b,2\n"}});
  auto reader = OpenFileReader(path, 0, 1, false, LineReaderOptions{});
  std::string_view line;
  LineLocation where{};
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "a,1");
  ASSERT_EQ(reader->Next(&line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line,
            "\xEF\xBB\xBF"
            "b,2");
  EXPECT_EQ(where.line_number, 2);
}

TEST(LineReader, OverLongLineOnAPipeIsReportedBeforeItEnds) {
  // "As soon as it is exceeded": the writer sends 2 MiB of one line and then
  // waits; the reader must report the line while it is still being written,
  // then skip the rest of it and read on.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::atomic<bool> reported{false};
  std::thread writer([&] {
    auto write_all = [&](const std::string& s) {
      for (size_t off = 0; off < s.size();) {
        const ssize_t n = write(fds[1], s.data() + off, s.size() - off);
        if (n <= 0) return;
        off += static_cast<size_t>(n);
      }
    };
    write_all("before\n");
    write_all(std::string(2 * kMiB, 'y'));
    while (!reported.load()) std::this_thread::yield();
    write_all(std::string(kMiB, 'y') + "\nnext\n");
    close(fds[1]);
  });
  LineReaderOptions options;
  options.max_line_length = kMiB;
  auto reader = OpenFileReader("/dev/fd/" + std::to_string(fds[0]), 0, 1, false, options);
  close(fds[0]);  // the reader opened its own description of the pipe
  std::string_view line;
  LineLocation where{};
  ASSERT_EQ(NextWaiting(*reader, &line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "before");
  const LineReader::Result r = NextWaiting(*reader, &line, &where);
  reported = true;
  ASSERT_EQ(r, LineReader::Result::kOverLong);
  EXPECT_EQ(reader->over_long().length, -1);
  ASSERT_EQ(NextWaiting(*reader, &line, &where), LineReader::Result::kLine);
  EXPECT_EQ(line, "next");
  EXPECT_EQ(where.line_number, 3);
  EXPECT_EQ(NextWaiting(*reader, &line, &where), LineReader::Result::kEnd);
  writer.join();
  EXPECT_LE(reader->stats().buffer_peak, kMiB + 1 + kChunk);
}

TEST(LineReader, LibraryFileSourceFailsOnAnOverLongLineWithABoundedMessage) {
  // The library's default: no handler, so the job fails, naming file and line.
  TempDir dir;
  const std::string path = dir.path() + "/big.txt";
  WriteParts(path, {{"a\n"}, {"", 3 * kMiB}, {"\nb\n"}});
  LineSource<std::string>::Spec spec;
  spec.kind = LineSource<std::string>::Spec::Kind::kFilePerSubtask;
  spec.paths = {path};
  spec.max_line_length = kMiB;
  StreamExecutionEnvironment env;
  env.set_worker_threads(2);
  env.read_lines<std::string>(
         spec, [](std::string_view l, const LineLocation&) { return std::string(l); }, "big")
      .add_sink([](std::string) {});
  JobResult r = env.execute();
  ASSERT_FALSE(r.ok());
  const std::string msg(r.status.message());
  EXPECT_LT(msg.size(), 1024u);
  EXPECT_NE(msg.find(path + ":2: line is longer than 1048576 bytes (more than 1048576)"),
            std::string::npos)
      << msg;
}

TEST(LineReader, DefaultMaxLineLengthIsSixteenMiB) {
  EXPECT_EQ(kDefaultMaxLineLength, 16 * kMiB);
  EXPECT_EQ(LineSource<std::string>::Spec{}.max_line_length, kDefaultMaxLineLength);
}

}  // namespace
}  // namespace tidemark
