#include "tidemark/operators/sources.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tidemark {
using namespace internal;

std::string OverLongLine::Message() const {
  return absl::StrCat("line is longer than ", max_length, " bytes (",
                      length >= 0 ? absl::StrCat(length) : absl::StrCat("more than ", max_length),
                      ")");
}

std::string OverLongLine::QuotedPrefix() const {
  const bool more = length < 0 || static_cast<size_t>(length) > prefix.size();
  return absl::StrCat(absl::CHexEscape(absl::string_view(prefix.data(), prefix.size())),
                      more ? "..." : "");
}

std::string OverLongLine::Describe() const {
  return absl::StrCat(std::string(where.source), ":", where.line_number, ": ", Message(), ": '",
                      QuotedPrefix(), "'");
}

namespace {

constexpr size_t kReadChunk = 1 << 16;

// Splits a byte stream from a descriptor into lines.  `limit` bounds how far a
// split file reader may start lines (its byte range end).
//
// Linear: scan_ remembers how far the partial line at pos_ has been searched
// for the delimiter, so each byte is examined once; a partial line is moved to
// the front of the buffer at most once.  Bounded: a line is reported as
// over-long as soon as it passes max_line_length, and the rest of it is
// dropped as it arrives, so the buffer never holds more than
// max_line_length + 1 + kReadChunk bytes.
class FdLineReader final : public LineReader {
 public:
  // How reads wait: kRegularFile never waits (fd() is -1); kPollFirst reads
  // only what poll() says is there (pipes, FIFOs, terminals, and stdin,
  // whose file description we share and must not make non-blocking);
  // kNonBlocking reads an O_NONBLOCK socket (EAGAIN: nothing yet).
  enum class Mode { kRegularFile, kPollFirst, kNonBlocking };

  FdLineReader(int fd, std::string name, const LineReaderOptions& options, Mode mode,
               int64_t first_line, int64_t start_offset, int64_t limit)
      : fd_(fd),
        name_(std::move(name)),
        delim_(options.delimiter),
        max_(options.max_line_length),
        mode_(mode),
        line_no_(first_line - 1),
        offset_(start_offset),
        limit_(limit) {}
  ~FdLineReader() override {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const override { return mode_ == Mode::kRegularFile ? -1 : fd_; }
  const OverLongLine& over_long() const override { return over_; }
  Stats stats() const override {
    Stats s = stats_;
    s.buffer_capacity = buf_.capacity();
    return s;
  }
  int64_t line_number() const { return line_no_; }

  // Regular files only: where the next line starts.
  bool Seekable() const override { return mode_ == Mode::kRegularFile; }
  Position position() const override { return Position{offset_, line_no_, discarding_}; }
  void Seek(const Position& p) override {
    if (!Seekable()) throw std::logic_error(absl::StrCat(name_, ": cannot seek"));
    if (lseek(fd_, p.offset, SEEK_SET) < 0) {
      throw std::runtime_error(absl::StrCat("cannot seek in ", name_, " to byte ", p.offset, ": ",
                                            std::strerror(errno)));
    }
    buf_.clear();
    pos_ = 0;
    scan_ = 0;
    eof_ = false;
    offset_ = p.offset;
    line_no_ = p.lines_before;
    discarding_ = p.discarding;
  }

  Result Next(std::string_view* line, LineLocation* where) override {
    for (;;) {
      const size_t size = buf_.size();
      const char* base = buf_.data();
      if (discarding_) {
        // The rest of an over-long line: drop it, up to its delimiter.
        const void* hit = Find(pos_);
        const size_t end =
            hit ? static_cast<size_t>(static_cast<const char*>(hit) - base) + 1 : size;
        stats_.bytes_scanned += static_cast<int64_t>(end - pos_);
        Consume(end);
        if (hit != nullptr || eof_) {
          discarding_ = false;
          continue;
        }
      } else {
        if (limit_ >= 0 && offset_ >= limit_) return Result::kEnd;  // past this split
        const void* hit = Find(scan_);
        if (hit != nullptr) {
          const size_t nl = static_cast<size_t>(static_cast<const char*>(hit) - base);
          stats_.bytes_scanned += static_cast<int64_t>(nl + 1 - scan_);
          return TakeLine(nl, nl + 1, line, where);
        }
        stats_.bytes_scanned += static_cast<int64_t>(size - scan_);
        scan_ = size;
        const size_t partial = size - pos_;
        if (eof_) {
          if (partial == 0) return Result::kEnd;
          return TakeLine(size, size, line, where);  // the last line, without a delimiter
        }
        // Over the limit already (a trailing '\r' may still be stripped):
        // report it now, and drop the rest as it comes.
        if (partial > max_ + 1 || (partial == max_ + 1 && buf_[size - 1] != '\r')) {
          const size_t start = pos_;
          Consume(size);
          discarding_ = true;
          return OverLong(start, partial, -1, where);
        }
      }
      // Need more bytes: compact, then read.
      if (pos_ > 0) {
        const size_t keep = size - pos_;
        if (keep > 0) std::memmove(buf_.data(), buf_.data() + pos_, keep);
        buf_.resize(keep);
        scan_ -= pos_;
        pos_ = 0;
      }
      if (mode_ == Mode::kPollFirst) {
        // Read only what is there, so the task waits in poll() (with its
        // timers) rather than in read().  A FIFO opened before any writer
        // reports neither POLLIN nor POLLHUP until one has come and gone,
        // so "no writer yet" reads as "nothing yet", not as the end.
        pollfd p{fd_, POLLIN, 0};
        int rc;
        do {
          rc = poll(&p, 1, 0);
        } while (rc < 0 && errno == EINTR);
        if (rc < 0) {
          throw std::runtime_error(
              absl::StrCat("poll on ", name_, " failed: ", std::strerror(errno)));
        }
        if (rc == 0) return Result::kNothing;
      }
      const size_t old = buf_.size();
      Reserve(old + kReadChunk);
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
      stats_.bytes_read += n;
      stats_.buffer_peak = std::max(stats_.buffer_peak, buf_.size());
      if (n == 0) eof_ = true;
    }
  }

 private:
  // The first delimiter in buf_[from, size), or null.
  const void* Find(size_t from) const {
    return from < buf_.size() ? std::memchr(buf_.data() + from, delim_, buf_.size() - from)
                              : nullptr;
  }

  // Moves the start of the current line to `end` (bytes before it are done).
  void Consume(size_t end) {
    offset_ += static_cast<int64_t>(end - pos_);
    pos_ = end;
    scan_ = end;
  }

  // The line [pos_, line_end) (a trailing '\r' stripped); the next starts at
  // `next`.
  Result TakeLine(size_t line_end, size_t next, std::string_view* line, LineLocation* where) {
    size_t start = pos_;
    size_t len = line_end - start;
    if (len > 0 && buf_[start + len - 1] == '\r') --len;
    // A UTF-8 byte-order mark at the start of the stream is not text (else
    // it would become part of the first field: a key "\xEF\xBB\xBFa" beside
    // "a").  Only at offset 0: a split starting mid-file has none.
    if (offset_ == 0 && len >= 3 && std::memcmp(buf_.data() + start, "\xEF\xBB\xBF", 3) == 0) {
      start += 3;
      len -= 3;
    }
    Consume(next);
    if (len > max_) return OverLong(start, len, static_cast<int64_t>(len), where);
    *line = std::string_view(buf_.data() + start, len);
    *where = LineLocation{name_, ++line_no_};
    return Result::kLine;
  }

  // Reports the line starting at buf_[start] (`seen` bytes of it here) as
  // over-long; copies a bounded prefix.
  Result OverLong(size_t start, size_t seen, int64_t length, LineLocation* where) {
    over_prefix_.assign(buf_.data() + start, std::min(seen, OverLongLine::kPrefixBytes));
    over_.where = LineLocation{name_, ++line_no_};
    over_.max_length = max_;
    over_.length = length;
    over_.prefix = over_prefix_;
    *where = over_.where;
    return Result::kOverLong;
  }

  // Grows the buffer's capacity geometrically, but never past what the
  // longest acceptable line and one read need.
  void Reserve(size_t need) {
    if (buf_.capacity() >= need) return;
    const size_t bound = max_ > SIZE_MAX / 2 ? SIZE_MAX / 2 : max_ + 1 + kReadChunk;
    buf_.reserve(std::max(need, std::min(2 * buf_.capacity(), bound)));
  }

  int fd_;
  std::string name_;
  char delim_;
  size_t max_;
  Mode mode_;
  int64_t line_no_;
  int64_t offset_;  // stream offset of buf_[pos_]
  int64_t limit_;
  std::vector<char> buf_;  // a vector: reserve() gives exactly what is asked
  size_t pos_ = 0;         // start of the current (partial) line
  size_t scan_ = 0;        // [pos_, scan_) holds no delimiter
  bool eof_ = false;
  bool discarding_ = false;
  OverLongLine over_;
  std::string over_prefix_;
  Stats stats_;
};

// The part of a stream a subtask other than the first gets: nothing.
class EmptyLineReader final : public LineReader {
 public:
  Result Next(std::string_view*, LineLocation*) override { return Result::kEnd; }
  bool Seekable() const override { return true; }
  void Seek(const Position&) override {}
  int fd() const override { return -1; }
  const OverLongLine& over_long() const override { return over_; }
  Stats stats() const override { return {}; }

 private:
  OverLongLine over_;
};

// A connection to host:port being made without blocking the task (Flink's
// cancel() closes the socket a blocking connect() waits in; here the task
// waits for the descriptor in poll(), where a cancellation wakes it): the
// addresses are tried in turn, each with a non-blocking connect().
class PendingConnection {
 public:
  PendingConnection(std::string host, int port, std::string where)
      : host_(std::move(host)), port_(port), where_(std::move(where)) {}
  ~PendingConnection() {
    if (fd_ >= 0) close(fd_);
  }
  PendingConnection(const PendingConnection&) = delete;
  PendingConnection& operator=(const PendingConnection&) = delete;

  enum class State { kConnected, kWaiting, kFailed };
  // Resolves and starts the first address.
  State Start() {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int gai = getaddrinfo(host_.c_str(), absl::StrCat(port_).c_str(), &hints, &res);
    if (gai != 0) {
      error_ = absl::StrCat("cannot resolve ", where_, ": ", gai_strerror(gai));
      return State::kFailed;
    }
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
      Address a;
      std::memcpy(&a.addr, ai->ai_addr, ai->ai_addrlen);
      a.len = ai->ai_addrlen;
      a.family = ai->ai_family;
      a.socktype = ai->ai_socktype;
      a.protocol = ai->ai_protocol;
      addresses_.push_back(a);
    }
    freeaddrinfo(res);
    return TryNext();
  }
  // After kWaiting, once fd() is ready (or whenever): where it stands.
  State Poll() {
    pollfd p{fd_, POLLOUT, 0};
    int rc;
    do {
      rc = poll(&p, 1, 0);
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) return State::kWaiting;
    int err = 0;
    socklen_t len = sizeof(err);
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err == 0) return State::kConnected;
    err_ = err;
    close(fd_);
    fd_ = -1;
    return TryNext();
  }
  // The connected (or connecting) descriptor, owned until Release().
  int fd() const { return fd_; }
  int Release() { return std::exchange(fd_, -1); }
  const std::string& error() const { return error_; }

 private:
  struct Address {
    sockaddr_storage addr{};
    socklen_t len = 0;
    int family = 0, socktype = 0, protocol = 0;
  };
  State TryNext() {
    while (next_ < addresses_.size()) {
      const Address& a = addresses_[next_++];
      fd_ = socket(a.family, a.socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.protocol);
      if (fd_ < 0) {
        err_ = errno;
        continue;
      }
      if (connect(fd_, reinterpret_cast<const sockaddr*>(&a.addr), a.len) == 0) {
        return State::kConnected;
      }
      if (errno == EINPROGRESS) return State::kWaiting;
      err_ = errno;
      close(fd_);
      fd_ = -1;
    }
    error_ = absl::StrCat("cannot connect to ", where_, ": ", std::strerror(err_));
    return State::kFailed;
  }

  std::string host_;
  int port_;
  std::string where_;
  std::vector<Address> addresses_;
  size_t next_ = 0;
  int fd_ = -1;
  int err_ = 0;
  std::string error_;
};

// Lines from host:port, reconnecting as SocketReaderOptions say (see
// LineSource in sources.h for the semantics).
class SocketLineReader final : public LineReader {
 public:
  SocketLineReader(std::string host, int port, const LineReaderOptions& options,
                   SocketReaderOptions socket)
      : host_(std::move(host)),
        port_(port),
        where_(absl::StrCat(host_, ":", port)),
        options_(options),
        socket_(std::move(socket)) {}

  // Makes the first attempt; throws when it fails and there is no retry.
  void Start() { TryConnect(); }

  Result Next(std::string_view* line, LineLocation* where) override {
    if (ended_) return Result::kEnd;
    if (conn_ == nullptr) {
      if (connecting_ != nullptr) {
        if (!Connected(connecting_->Poll())) return Result::kNothing;
      } else {
        if (Now() < retry_at_) return Result::kNothing;
        if (!TryConnect()) return Result::kNothing;
      }
    }
    const Result r = conn_->Next(line, where);
    if (r != Result::kEnd) return r;
    // The peer closed the connection (its last, unterminated line was
    // returned before kEnd, as Flink collects its trailing data).  As Flink's
    // SocketTextStreamFunction: attempt++, and reconnect after the delay if
    // maxNumRetries == -1 || attempt < maxNumRetries; else the input ends
    // normally (end of input, the final watermark MAX fires every window).
    ++attempts_;
    lines_ = conn_->line_number();
    last_stats_ = conn_->stats();
    if (!RetryLeft()) {
      if (socket_.max_retries != 0 && socket_.on_retry) {
        socket_.on_retry(absl::StrCat("connection to ", where_, " closed by the peer after ",
                                      attempts_, attempts_ == 1 ? " connection" : " connections",
                                      " (--socket-retries=", socket_.max_retries,
                                      "): end of input"));
      }
      ended_ = true;
      return Result::kEnd;
    }
    conn_.reset();
    UseRetry(absl::StrCat("connection to ", where_, " closed by the peer"));
    return Result::kNothing;
  }
  // While connecting: the socket, which poll() reports readable or in error
  // once the connection is made and data comes, or it failed.
  int fd() const override {
    if (conn_) return conn_->fd();
    return connecting_ ? connecting_->fd() : -1;
  }
  Timestamp retry_at() const override { return conn_ || connecting_ ? kMaxTimestamp : retry_at_; }
  const OverLongLine& over_long() const override { return conn_->over_long(); }
  Stats stats() const override { return conn_ ? conn_->stats() : last_stats_; }

 private:
  Timestamp Now() const {
    return (socket_.clock ? socket_.clock : SystemClock::Get())->NowMillis();
  }
  // Flink's test after a lost connection: maxNumRetries == -1 || attempt <
  // maxNumRetries, with attempt counting the connections lost (here also the
  // attempts that failed).  So 0 and 1 both mean one connection, N > 1 at
  // most N.
  bool RetryLeft() const { return socket_.max_retries < 0 || attempts_ < socket_.max_retries; }

  // Starts an attempt; true once connected (at once, or later in Next()).
  bool TryConnect() {
    if (socket_.attempts != nullptr) socket_.attempts->Inc();
    connecting_ = std::make_unique<PendingConnection>(host_, port_, where_);
    return Connected(connecting_->Start());
  }

  // Where the attempt stands: true when connected; a failed attempt is
  // retried after the delay, or thrown when no retry is left.
  bool Connected(PendingConnection::State state) {
    if (state == PendingConnection::State::kWaiting) return false;
    if (state == PendingConnection::State::kConnected) {
      conn_ = std::make_unique<FdLineReader>(connecting_->Release(), where_, options_,
                                             FdLineReader::Mode::kNonBlocking, lines_ + 1, 0, -1);
      connecting_.reset();
      return true;
    }
    std::string error = connecting_->error();
    connecting_.reset();
    ++attempts_;
    if (!RetryLeft()) {
      if (attempts_ > 1) {
        absl::StrAppend(&error, " (gave up after ", attempts_, " attempts, ",
                        socket_.retry_delay_ms, " ms apart)");
      }
      throw std::runtime_error(error);
    }
    UseRetry(error);
    return false;
  }

  // Waits retry_delay_ms before the next attempt (Flink's
  // delayBetweenRetries, 500 ms), saying so.
  void UseRetry(const std::string& reason) {
    retry_at_ = SaturatingAdd(Now(), std::max<int64_t>(0, socket_.retry_delay_ms));
    if (socket_.on_retry) {
      socket_.on_retry(
          absl::StrCat(reason, "; attempt ", attempts_ + 1,
                       socket_.max_retries < 0 ? "" : absl::StrCat(" of ", socket_.max_retries),
                       " in ", socket_.retry_delay_ms, " ms"));
    }
  }

  std::string host_;
  int port_;
  std::string where_;
  LineReaderOptions options_;
  SocketReaderOptions socket_;
  std::unique_ptr<FdLineReader> conn_;
  std::unique_ptr<PendingConnection> connecting_;  // an attempt under way
  int64_t attempts_ = 0;                           // Flink's `attempt`: connections lost or failed
  bool ended_ = false;
  int64_t lines_ = 0;  // lines read on earlier connections
  Timestamp retry_at_ = kMinTimestamp;
  Stats last_stats_;
};

}  // namespace

bool AllRegularFiles(const std::vector<std::string>& paths) {
  for (const std::string& p : paths) {
    struct stat st {};
    if (p == "-" || stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  }
  return true;
}

std::unique_ptr<LineReader> OpenFileReader(const std::string& path, int subtask, int parallelism,
                                           bool split, const LineReaderOptions& options) {
  const bool is_stdin = path == "-";
  // O_NONBLOCK: opening a FIFO must not wait for a writer (the subtask would
  // wait there, without its timers).  Our own descriptor only: stdin's file
  // description is shared, so it stays as it is and is read after poll().
  const int fd = is_stdin ? fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
                          : open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw std::runtime_error(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  const std::string name = is_stdin ? "<stdin>" : path;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    throw std::runtime_error(absl::StrCat("cannot stat ", path, ": ", std::strerror(err)));
  }
  using Mode = FdLineReader::Mode;
  if (!S_ISREG(st.st_mode)) {
    // A pipe, FIFO, terminal or socket: read when readable.  It has no byte
    // ranges to split, so the first subtask reads it all.
    if (split && subtask > 0) {
      close(fd);
      return std::make_unique<EmptyLineReader>();
    }
    return std::make_unique<FdLineReader>(fd, name, options, Mode::kPollFirst, 1, 0, -1);
  }
  if (!split || parallelism <= 1 || is_stdin)
    return std::make_unique<FdLineReader>(fd, name, options, Mode::kRegularFile, 1, 0, -1);
  const char delim = options.delimiter;
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
    line += std::count(chunk.data(), chunk.data() + n, delim);
    off += n;
  }
  if (start > 0) {
    char prev = 0;
    if (pread(fd, &prev, 1, start - 1) == 1 && prev != delim) {
      // Skip the rest of a line that began in the previous split.
      for (;;) {
        const ssize_t n = pread(fd, chunk.data(), kReadChunk, start);
        if (n <= 0) {
          start = size;
          break;
        }
        const char* p =
            static_cast<const char*>(memchr(chunk.data(), delim, static_cast<size_t>(n)));
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
    const int err = errno;
    close(fd);
    throw std::runtime_error(absl::StrCat("cannot seek in ", path, ": ", std::strerror(err)));
  }
  // Lines starting before `end` belong to this split.
  return std::make_unique<FdLineReader>(fd, name, options, Mode::kRegularFile, line, start,
                                        std::max(start, end));
}

std::unique_ptr<LineReader> OpenSocketReader(const std::string& host, int port,
                                             const LineReaderOptions& options,
                                             SocketReaderOptions socket) {
  auto reader = std::make_unique<SocketLineReader>(host, port, options, std::move(socket));
  reader->Start();
  return reader;
}

}  // namespace tidemark
