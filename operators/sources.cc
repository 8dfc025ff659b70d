#include "operators/sources.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace tidemark {
namespace {

constexpr size_t kReadChunk = 1 << 16;

// Splits a byte stream from a descriptor into lines.  `limit` bounds how far a
// split file reader may start lines (its byte range end).
class FdLineReader : public LineReader {
 public:
  FdLineReader(int fd, std::string name, char delimiter, bool nonblocking, int64_t first_line,
               int64_t start_offset, int64_t limit)
      : fd_(fd),
        name_(std::move(name)),
        delim_(delimiter),
        nonblocking_(nonblocking),
        line_no_(first_line - 1),
        offset_(start_offset),
        limit_(limit) {}
  ~FdLineReader() override {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const override { return nonblocking_ || poll_first_ ? fd_ : -1; }
  void set_poll_first() { poll_first_ = true; }

  Result Next(std::string_view* line, LineLocation* where) override {
    for (;;) {
      if (limit_ >= 0 && offset_ >= limit_) return Result::kEnd;  // past this split
      const size_t nl = buf_.find(delim_, pos_);
      if (nl != std::string::npos) {
        size_t len = nl - pos_;
        if (len > 0 && buf_[pos_ + len - 1] == '\r') --len;
        *line = std::string_view(buf_).substr(pos_, len);
        offset_ += static_cast<int64_t>(nl + 1 - pos_);
        pos_ = nl + 1;
        *where = LineLocation{name_, ++line_no_};
        return Result::kLine;
      }
      if (eof_) {
        if (pos_ < buf_.size()) {  // last line without a delimiter
          size_t len = buf_.size() - pos_;
          if (len > 0 && buf_[pos_ + len - 1] == '\r') --len;
          *line = std::string_view(buf_).substr(pos_, len);
          offset_ += static_cast<int64_t>(buf_.size() - pos_);
          pos_ = buf_.size();
          *where = LineLocation{name_, ++line_no_};
          return Result::kLine;
        }
        return Result::kEnd;
      }
      // Need more bytes: compact, then read.
      if (pos_ > 0) {
        buf_.erase(0, pos_);
        pos_ = 0;
      }
      if (poll_first_) {
        // stdin: read only what is there, so a waiting reader can be
        // cancelled (the task then waits in poll() on fd()).
        pollfd p{fd_, POLLIN, 0};
        int rc;
        do {
          rc = poll(&p, 1, 0);
        } while (rc < 0 && errno == EINTR);
        if (rc == 0) return Result::kNothing;
      }
      const size_t old = buf_.size();
      buf_.resize(old + kReadChunk);
      ssize_t n;
      do {
        n = read(fd_, buf_.data() + old, kReadChunk);
      } while (n < 0 && errno == EINTR);
      if (n < 0) {
        buf_.resize(old);
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Result::kNothing;
        throw std::runtime_error(
            absl::StrCat("read from ", name_, " failed: ", std::strerror(errno)));
      }
      buf_.resize(old + static_cast<size_t>(n));
      if (n == 0) eof_ = true;
    }
  }

 private:
  int fd_;
  std::string name_;
  char delim_;
  bool nonblocking_;
  int64_t line_no_;
  int64_t offset_;
  int64_t limit_;
  std::string buf_;
  size_t pos_ = 0;
  bool eof_ = false;
  bool poll_first_ = false;
};

}  // namespace

std::unique_ptr<LineReader> OpenFileReader(const std::string& path, int subtask, int parallelism,
                                           bool split) {
  const int fd = path == "-" ? dup(STDIN_FILENO) : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const std::string name = path == "-" ? "<stdin>" : path;
  if (!split || parallelism <= 1 || path == "-") {
    auto reader = std::make_unique<FdLineReader>(fd, name, '\n', false, 1, 0, -1);
    if (path == "-") reader->set_poll_first();
    return reader;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    throw std::runtime_error(absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
  }
  const int64_t size = st.st_size;
  int64_t start = size * subtask / parallelism;
  const int64_t end = size * (subtask + 1) / parallelism;
  // Count lines before `start` (for line numbers) and move `start` to the
  // beginning of the first line that starts inside [start, end).
  int64_t line = 1;
  std::string chunk(kReadChunk, '\0');
  int64_t off = 0;
  while (off < start) {
    const ssize_t n = pread(fd, chunk.data(), std::min<int64_t>(kReadChunk, start - off), off);
    if (n <= 0) break;
    line += std::count(chunk.data(), chunk.data() + n, '\n');
    off += n;
  }
  if (start > 0) {
    char prev = 0;
    if (pread(fd, &prev, 1, start - 1) == 1 && prev != '\n') {
      // Skip the rest of a line that began in the previous split.
      for (;;) {
        const ssize_t n = pread(fd, chunk.data(), kReadChunk, start);
        if (n <= 0) {
          start = size;
          break;
        }
        const char* p =
            static_cast<const char*>(memchr(chunk.data(), '\n', static_cast<size_t>(n)));
        if (p) {
          start += (p - chunk.data()) + 1;
          ++line;
          break;
        }
        start += n;
      }
    }
  }
  if (lseek(fd, start, SEEK_SET) < 0) {
    close(fd);
    throw std::runtime_error(absl::StrCat("cannot seek in ", path, ": ", std::strerror(errno)));
  }
  // Lines starting before `end` belong to this split.
  return std::make_unique<FdLineReader>(fd, name, '\n', false, line, start, std::max(start, end));
}

std::unique_ptr<LineReader> OpenSocketReader(const std::string& host, int port, char delimiter) {
  const std::string where = absl::StrCat(host, ":", port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int gai = getaddrinfo(host.c_str(), absl::StrCat(port).c_str(), &hints, &res);
  if (gai != 0) {
    throw std::runtime_error(absl::StrCat("cannot resolve ", where, ": ", gai_strerror(gai)));
  }
  int fd = -1;
  int err = 0;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    throw std::runtime_error(absl::StrCat("cannot connect to ", where, ": ", std::strerror(err)));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return std::make_unique<FdLineReader>(fd, where, delimiter, true, 1, 0, -1);
}

}  // namespace tidemark
