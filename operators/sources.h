// operators/sources.h
//
// Built-in sources:
//   CollectionSource  - the elements of a vector, in order (non-parallel);
//   GeneratorSource   - f(index) for index 0..count-1 (or forever), split
//                       round-robin over the subtasks, optionally rate limited;
//   LineSource        - lines of text files or of a TCP socket (Flink's
//                       readTextFile / socketTextStream), each line turned into a
//                       record by a parser that knows where the line came from
//                       (file and line number), so bad input can be reported
//                       precisely.  These run on threads of their own, and
//                       wait for input in poll() with their timers, never in
//                       a blocking read().
#ifndef TM_OPERATORS_SOURCES_H_
#define TM_OPERATORS_SOURCES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/runtime/task/source.h"

namespace tidemark {

template <typename T>
class CollectionSource final : public Source<T> {
 public:
  explicit CollectionSource(std::shared_ptr<const std::vector<T>> data) : data_(std::move(data)) {}
  void Open(const SourceContext& ctx) override {
    // Elements are split round-robin when the source runs in parallel.
    index_ = static_cast<size_t>(ctx.subtask_index);
    stride_ = static_cast<size_t>(ctx.parallelism);
  }
  PollStatus Poll(SourceOutput<T>& out, size_t budget) override {
    // The position stays in a register while the loop runs and is written
    // back once per poll (SnapshotPosition is called between polls): a
    // subtask's source is a small object, likely on the same cache line as
    // another subtask's, and a write per element made both threads wait on
    // that line.
    size_t index = index_;
    for (size_t n = 0; n < budget && index < data_->size(); ++n) {
      const size_t i = index;
      index += stride_;  // before a break: the element is emitted exactly once
      if (!out.CollectInPlace([&] { return T((*data_)[i]); })) break;
    }
    index_ = index;
    return index_ < data_->size() ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutU64(index_); }
  void RestorePosition(internal::StateReader& r) override {
    index_ = static_cast<size_t>(r.GetU64("collection index"));
  }

 private:
  std::shared_ptr<const std::vector<T>> data_;
  size_t index_ = 0;
  size_t stride_ = 1;
};

// Paces a source at `rate` records per second: how many records may go now,
// and, when none may, when to poll again.  The allowance is counted from the
// start (not per wake-up), so the average rate is exact; the next poll is
// always in the future (at least the next millisecond) and lets a chunk of
// about kChunkMs worth of records go, so a paced source wakes at most about
// 1000 / kChunkMs times a second whatever its rate, and uses CPU in
// proportion to the records it emits rather than spinning until their time.
class RatePacer {
 public:
  static constexpr int64_t kChunkMs = 2;

  RatePacer() = default;  // unlimited
  RatePacer(double rate_per_second, Timestamp start_ms)
      : rate_(rate_per_second), start_(start_ms) {}

  bool limited() const { return rate_ > 0; }
  // Records that may be emitted at `now_ms` beyond those already emitted
  // (the first goes at once).
  int64_t Allowance(Timestamp now_ms) const {
    if (!limited()) return std::numeric_limits<int64_t>::max();
    const double due = static_cast<double>(now_ms - start_) * rate_ / 1000.0;
    return std::max<int64_t>(0, static_cast<int64_t>(due) + 1 - emitted_);
  }
  void Emitted(int64_t n) { emitted_ += n; }
  int64_t emitted() const { return emitted_; }
  // The source asks to be polled again at `at_ms` (its next chunk is due,
  // or now: it stopped with allowance left).  A poll that comes more than
  // kLateMs after that gives the delay no allowance: the task held the
  // source back (back-pressure, watermark alignment), and the source must
  // not read all that time's worth at once when it resumes (an aligned
  // source ran 8 s of event time past its drift).  A source polled on time
  // that finds nothing to read (a quiet FIFO) asks for nothing, and so
  // still catches up with its pace.
  static constexpr int64_t kLateMs = 20;
  void Expect(Timestamp at_ms) { expected_at_ = at_ms; }
  // At the start of each poll.
  void Polled(Timestamp now_ms) {
    if (expected_at_ == kNotExpected) return;
    if (now_ms - expected_at_ > kLateMs) start_ += now_ms - expected_at_;
    expected_at_ = kNotExpected;
  }
  // When the allowance is used up: the time (> now_ms) at which the next chunk
  // of records is due.
  Timestamp NextPollAt(Timestamp now_ms) const {
    if (!limited()) return now_ms + 1;
    const auto chunk =
        std::max<int64_t>(1, static_cast<int64_t>(rate_ * static_cast<double>(kChunkMs) / 1000.0));
    // Allowance(t) >= chunk  <=>  (t - start) * rate / 1000 >= emitted + chunk - 1.
    const double at_ms = std::ceil(static_cast<double>(emitted_ + chunk - 1) * 1000.0 / rate_);
    const Timestamp t = start_ + static_cast<Timestamp>(std::min(at_ms, 9.0e15));
    return std::max(t, now_ms + 1);
  }

 private:
  static constexpr Timestamp kNotExpected = std::numeric_limits<Timestamp>::min();
  double rate_ = 0;
  Timestamp start_ = 0;
  int64_t emitted_ = 0;
  Timestamp expected_at_ = kNotExpected;
};

// f(index) -> T for the indices this subtask owns (index % parallelism ==
// subtask).  count < 0 means unbounded.  rate_per_second > 0 limits each
// subtask to that many records per second on average (RatePacer: a few
// milliseconds' worth at a time, sleeping in between).
template <typename T, typename F>
class GeneratorSource final : public Source<T> {
 public:
  GeneratorSource(F f, int64_t count, double rate_per_second)
      : f_(std::move(f)), count_(count), rate_(rate_per_second) {}
  void Open(const SourceContext& ctx) override {
    next_ = ctx.subtask_index;
    stride_ = ctx.parallelism;
    clock_ = ctx.clock;
    if (rate_ > 0) pacer_ = RatePacer(rate_, clock_->NowMillis());
  }
  PollStatus Poll(SourceOutput<T>& out, size_t budget) override {
    Timestamp now = 0;
    int64_t allowed = 0;
    if (pacer_.limited()) {
      now = clock_->NowMillis();
      pacer_.Polled(now);
      allowed = pacer_.Allowance(now);
      if (allowed <= 0) {
        retry_at_ = pacer_.NextPollAt(now);
        pacer_.Expect(retry_at_);
        return PollStatus::kNothingAvailable;
      }
      budget = std::min<size_t>(budget, static_cast<size_t>(allowed));
    }
    size_t n = 0;
    int64_t next = next_;  // written back once per poll, as CollectionSource's
    if constexpr (std::is_invocable_v<F&, int64_t, SourceOutput<T>&>) {
      for (; n < budget; ++n) {
        if (count_ >= 0 && next >= count_) break;
        f_(next, out);  // the function emits itself (may attach timestamps)
        next += stride_;
        if (out.Backpressured()) {
          ++n;
          break;
        }
      }
    } else {
      // The indices left, at most the budget: one loop fills the run.
      size_t want = budget;
      if (count_ >= 0) {
        const int64_t left = next >= count_ ? 0 : (count_ - next - 1) / stride_ + 1;
        want = std::min<size_t>(want, static_cast<size_t>(left));
      }
      const int64_t first = next;
      const int64_t stride = stride_;
      n = out.CollectManyInPlace(
          want, [&](size_t k) { return f_(first + static_cast<int64_t>(k) * stride); });
      next = first + static_cast<int64_t>(n) * stride;
    }
    next_ = next;
    if (count_ >= 0 && next_ >= count_) return PollStatus::kEndOfInput;
    if (pacer_.limited()) {
      pacer_.Emitted(static_cast<int64_t>(n));
      // Everything due went out: sleep until the next chunk is due, rather
      // than being polled again at once only to find nothing due.
      if (static_cast<int64_t>(n) >= allowed) {
        retry_at_ = pacer_.NextPollAt(now);
        pacer_.Expect(retry_at_);
        return PollStatus::kNothingAvailable;
      }
      pacer_.Expect(now);  // allowance left: to be polled again at once
    }
    return PollStatus::kMoreAvailable;
  }
  Timestamp RetryAt() const override { return retry_at_; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override { w.PutI64(next_); }
  void RestorePosition(internal::StateReader& r) override { next_ = r.GetI64("generator index"); }

 private:
  F f_;
  int64_t count_;
  double rate_;
  int64_t next_ = 0;
  int64_t stride_ = 1;
  const Clock* clock_ = nullptr;
  RatePacer pacer_;
  Timestamp retry_at_ = kMaxTimestamp;
};

// Where a line of text came from.
struct LineLocation {
  std::string_view source;  // file path, or "host:port"
  int64_t line_number;      // 1-based
};

// The longest line a line source accepts unless told otherwise.  A longer line
// is rejected as soon as it passes the limit, without being buffered: the
// reader keeps at most this many bytes (plus one read chunk) of a line.
inline constexpr size_t kDefaultMaxLineLength = size_t{16} << 20;  // 16 MiB

// A line longer than the source's max_line_length.  Reported as soon as the
// limit is passed (its length is then only known to be more than the limit,
// unless the whole line was already read); its bytes are not kept, and the
// reader skips them up to the next delimiter.
struct OverLongLine {
  static constexpr size_t kPrefixBytes = 64;
  LineLocation where;
  size_t max_length = 0;
  int64_t length = -1;      // the line's length when known, else -1
  std::string_view prefix;  // its first bytes (at most kPrefixBytes)
  // "line is longer than 1048576 bytes (1048577)", or "(more than 1048576)"
  // when the length is not known.
  std::string Message() const;
  // The prefix, C-escaped, with "..." when the line goes on: bounded text to
  // quote in an error.
  std::string QuotedPrefix() const;
  // "<source>:<line>: <Message()>: '<QuotedPrefix()>'".
  std::string Describe() const;
};

// Reads lines from files, pipes, FIFOs, terminals or a socket.  The parser
// turns a line into a record (nullopt to skip it) or throws to fail the job;
// the job's error then names the source.
//
// Nothing here blocks the subtask: a descriptor that is not a regular file
// (pipe, FIFO, terminal, socket) is read only when poll() says it is readable,
// and otherwise the task waits in poll() on it together with its timers, so
// periodic watermarks and idleness keep going while the input is quiet.  A
// FIFO is opened without waiting for a writer; until one connects it reads as
// empty (not ended), and it ends when the last writer closes it.
//
// Socket retries (Flink's socketTextStream maxRetry, SocketTextStreamFunction
// rule for rule): when the peer closes the connection, the source counts it
// (Flink's `attempt`) and reconnects after retry_delay_ms (Flink's
// delayBetweenRetries, 500 ms) if max_retries == -1 or attempt < max_retries;
// otherwise the input ends normally, as Flink's source returns from run():
// the last unterminated line is emitted, the source ends and the final
// watermark (MAX) fires every open window.  So max_retries 0 and 1 both mean
// one connection, N > 1 at most N connections, -1 forever.  Two extensions:
// a connection attempt that fails (refused, unreachable, name not resolved)
// is retried the same way and counts as an attempt too (Flink's source fails
// at once); when the attempts are used up it fails the job.  And a line is
// never joined across two connections (Flink's buffer would join a partial
// last line with the next connection's first).  The waits are not sleeps:
// the source returns nothing until the retry time.  The
// subtask's counter "socketConnectAttempts" counts every attempt.
class LineReader;  // sources.cc

template <typename T>
class LineSource final : public Source<T> {
 public:
  using Parser = std::function<std::optional<T>(std::string_view line, const LineLocation& where)>;
  struct Spec {
    // kFileSplits: each path is a split; path i goes to subtask i %
    // parallelism, and a subtask with several reads them interleaved, a line
    // from each in turn (as a reader of several partitions does), each
    // through its split's output (SourceOutput::ForSplit(path), split ids
    // made unique with "#i" when a path repeats) and released at its end.
    // A split with nothing to read yet (a FIFO) holds the others up until
    // it has.
    enum class Kind { kFilePerSubtask, kSplitFile, kSocket, kFileSplits } kind;
    // kFilePerSubtask: one per subtask; kSplitFile: one; kFileSplits: any
    std::vector<std::string> paths;
    std::string host;  // kSocket
    int port = 0;
    char delimiter = '\n';
    // Lines longer than this (without the delimiter) are over-long: passed
    // to on_over_long, which may throw to fail the job or return to skip
    // the line; without it the job fails (OverLongLine::Describe()).
    size_t max_line_length = kDefaultMaxLineLength;
    std::function<void(const OverLongLine&)> on_over_long;
    // kSocket: see above.  0: no retry (Flink's default); -1: forever.
    int64_t max_retries = 0;
    int64_t retry_delay_ms = 500;
    // kSocket, optional: told about each failed or closed connection that
    // will be retried ("cannot connect to h:p: Connection refused; retry 1 of
    // 3 in 500 ms").  Called on the source's thread.
    std::function<void(const std::string&)> on_retry;
    // > 0: each subtask reads at most this many lines a second on average
    // (RatePacer: the first at once, then a few milliseconds' worth at a
    // time, sleeping in between), whatever the input: files, FIFOs, stdin,
    // sockets.  For studying a run at a pace (`tidemark run --rate=N/s`).
    double rate_per_second = 0;
  };
  LineSource(Spec spec, Parser parser);
  ~LineSource() override;
  void Open(const SourceContext& ctx) override;
  PollStatus Poll(SourceOutput<T>& out, size_t budget) override;
  void Close() override;
  bool NeedsOwnThread() const override { return true; }
  int WaitFd() const override;
  Timestamp RetryAt() const override;
  // Files can be read again from a position; sockets, stdin and pipes
  // cannot (the job is then at-most-once on a restore).
  bool Replayable() const override;
  void SnapshotPosition(internal::StateWriter& w) const override;
  void RestorePosition(internal::StateReader& r) override;

 private:
  PollStatus PollSplits(SourceOutput<T>& out, size_t budget);
  PollStatus PollLines(SourceOutput<T>& out, size_t budget);

  Spec spec_;
  Parser parser_;
  // --rate: the pace, and when the next lines are due while waiting for it
  // (kMinTimestamp: not waiting for the pace).
  RatePacer pacer_;
  const Clock* clock_ = nullptr;
  Timestamp paced_until_ = kMinTimestamp;
  int64_t read_ = 0;  // lines read by the current poll
  std::unique_ptr<LineReader> reader_;
  // kFileSplits: this subtask's splits, their ids, which have ended, whose
  // turn is next, and the one waited on.
  std::vector<std::unique_ptr<LineReader>> split_readers_;
  std::vector<std::string> split_ids_;
  std::vector<uint8_t> split_done_;
  size_t next_split_ = 0;
  size_t waiting_split_ = 0;
  SourceOutput<T>* outs_for_ = nullptr;  // the output split_outs_ came from
  std::vector<SourceOutput<T>*> split_outs_;
};

// Type-independent part: produces lines.
class LineReader {
 public:
  virtual ~LineReader() = default;
  enum class Result { kLine, kNothing, kEnd, kOverLong };
  // Next complete line (without the delimiter or a trailing '\r'), valid
  // until the next call.  kNothing: nothing to read now (wait for fd() to
  // be readable, or until retry_at()).  kOverLong: over_long() says which
  // line was too long; the reader skips it.
  virtual Result Next(std::string_view* line, LineLocation* where) = 0;
  // The descriptor to wait on after kNothing, -1 if none.
  virtual int fd() const = 0;
  // After kNothing: processing time at which to call Next() again.
  virtual Timestamp retry_at() const { return kMaxTimestamp; }
  // After kOverLong, valid until the next call.
  virtual const OverLongLine& over_long() const = 0;

  // What the reader did so far (tests and diagnostics).
  struct Stats {
    int64_t bytes_read = 0;
    int64_t bytes_scanned = 0;   // bytes examined when looking for delimiters
    size_t buffer_peak = 0;      // most bytes buffered at once
    size_t buffer_capacity = 0;  // the buffer's current capacity
  };
  virtual Stats stats() const = 0;

  // Checkpoints: where the next line starts (its byte offset in the stream
  // and the number of lines before it; `discarding`: inside an over-long
  // line whose start was reported), for readers that can go back there
  // (regular files, and the empty reader); Seek() goes there.
  struct Position {
    int64_t offset = 0;
    int64_t lines_before = 0;
    bool discarding = false;
  };
  virtual bool Seekable() const { return false; }
  virtual Position position() const { return {}; }
  virtual void Seek(const Position& /*p*/) {
    throw std::logic_error("this line reader cannot seek");
  }
};

struct LineReaderOptions {
  char delimiter = '\n';
  size_t max_line_length = kDefaultMaxLineLength;
};

struct SocketReaderOptions {
  int64_t max_retries = 0;  // -1: forever
  int64_t retry_delay_ms = 500;
  const Clock* clock = nullptr;           // for retry times; the system clock when null
  internal::Counter* attempts = nullptr;  // counts connection attempts, when given
  std::function<void(const std::string&)> on_retry;
};

// Opens the reader for one subtask; throws std::runtime_error with a clear
// message (missing file, refused connection and no retries).
std::unique_ptr<LineReader> OpenFileReader(const std::string& path, int subtask, int parallelism,
                                           bool split, const LineReaderOptions& options = {});
std::unique_ptr<LineReader> OpenSocketReader(const std::string& host, int port,
                                             const LineReaderOptions& options,
                                             SocketReaderOptions socket = {});

template <typename T>
LineSource<T>::LineSource(Spec spec, Parser parser)
    : spec_(std::move(spec)), parser_(std::move(parser)) {}
template <typename T>
LineSource<T>::~LineSource() = default;

template <typename T>
void LineSource<T>::Open(const SourceContext& ctx) {
  using K = typename Spec::Kind;
  LineReaderOptions options;
  options.delimiter = spec_.delimiter;
  options.max_line_length = spec_.max_line_length;
  clock_ = ctx.clock;
  if (spec_.rate_per_second > 0 && clock_ != nullptr)
    pacer_ = RatePacer(spec_.rate_per_second, clock_->NowMillis());
  switch (spec_.kind) {
    case K::kFilePerSubtask:
      reader_ = OpenFileReader(spec_.paths.at(static_cast<size_t>(ctx.subtask_index)), 0, 1, false,
                               options);
      break;
    case K::kSplitFile:
      reader_ =
          OpenFileReader(spec_.paths.at(0), ctx.subtask_index, ctx.parallelism, true, options);
      break;
    case K::kFileSplits: {
      for (size_t i = static_cast<size_t>(ctx.subtask_index); i < spec_.paths.size();
           i += static_cast<size_t>(ctx.parallelism)) {
        split_readers_.push_back(OpenFileReader(spec_.paths[i], 0, 1, false, options));
        std::string id = spec_.paths[i];
        if (std::count(spec_.paths.begin(), spec_.paths.end(), id) > 1)
          id += "#" + std::to_string(i);
        split_ids_.push_back(std::move(id));
      }
      split_done_.assign(split_readers_.size(), 0);
      break;
    }
    case K::kSocket: {
      SocketReaderOptions socket;
      socket.max_retries = spec_.max_retries;
      socket.retry_delay_ms = spec_.retry_delay_ms;
      socket.clock = ctx.clock;
      socket.attempts = ctx.metrics ? ctx.metrics->GetCounter("socketConnectAttempts") : nullptr;
      socket.on_retry = spec_.on_retry;
      reader_ = OpenSocketReader(spec_.host, spec_.port, options, std::move(socket));
      break;
    }
  }
}

template <typename T>
PollStatus LineSource<T>::PollSplits(SourceOutput<T>& out, size_t budget) {
  if (outs_for_ != &out) {
    outs_for_ = &out;
    split_outs_.assign(split_readers_.size(), nullptr);
  }
  std::string_view line;
  LineLocation where{};
  size_t nothing = 0;  // splits in a row that had nothing to read
  for (size_t n = 0; n < budget;) {
    size_t live = 0;
    for (uint8_t d : split_done_) live += d ? 0 : 1;
    if (live == 0) return PollStatus::kEndOfInput;
    if (nothing >= live) return PollStatus::kNothingAvailable;
    const size_t i = next_split_;
    next_split_ = (next_split_ + 1) % split_readers_.size();
    if (split_done_[i]) continue;
    switch (split_readers_[i]->Next(&line, &where)) {
      case LineReader::Result::kEnd:
        split_done_[i] = 1;
        out.ReleaseSplit(split_ids_[i]);
        split_outs_[i] = nullptr;
        continue;
      case LineReader::Result::kNothing:
        waiting_split_ = i;
        ++nothing;
        continue;
      case LineReader::Result::kOverLong:
        if (!spec_.on_over_long)
          throw std::runtime_error(split_readers_[i]->over_long().Describe());
        spec_.on_over_long(split_readers_[i]->over_long());
        continue;
      case LineReader::Result::kLine:
        break;
    }
    nothing = 0;
    ++n;
    ++read_;
    std::optional<T> rec = parser_(line, where);
    if (rec) {
      if (split_outs_[i] == nullptr) split_outs_[i] = &out.ForSplit(split_ids_[i]);
      split_outs_[i]->Collect(std::move(*rec));
    }
    if (out.Backpressured()) break;
  }
  return PollStatus::kMoreAvailable;
}

template <typename T>
PollStatus LineSource<T>::Poll(SourceOutput<T>& out, size_t budget) {
  paced_until_ = kMinTimestamp;
  if (!pacer_.limited()) {
    return spec_.kind == Spec::Kind::kFileSplits ? PollSplits(out, budget) : PollLines(out, budget);
  }
  // Paced: at most the allowance now, counted in lines read (those parsed
  // into nothing too); past it, sleep until the next chunk is due.
  const Timestamp now = clock_->NowMillis();
  pacer_.Polled(now);
  const int64_t allowed = pacer_.Allowance(now);
  if (allowed <= 0) {
    paced_until_ = pacer_.NextPollAt(now);
    pacer_.Expect(paced_until_);
    return PollStatus::kNothingAvailable;
  }
  budget = std::min<size_t>(budget, static_cast<size_t>(allowed));
  read_ = 0;
  const PollStatus st =
      spec_.kind == Spec::Kind::kFileSplits ? PollSplits(out, budget) : PollLines(out, budget);
  pacer_.Emitted(read_);
  if (st == PollStatus::kMoreAvailable && read_ >= allowed) {
    paced_until_ = pacer_.NextPollAt(now);
    pacer_.Expect(paced_until_);
    return PollStatus::kNothingAvailable;
  }
  // Allowance left: to be polled again at once.
  if (st == PollStatus::kMoreAvailable) pacer_.Expect(now);
  return st;
}

template <typename T>
PollStatus LineSource<T>::PollLines(SourceOutput<T>& out, size_t budget) {
  std::string_view line;
  LineLocation where{};
  for (size_t n = 0; n < budget; ++n) {
    switch (reader_->Next(&line, &where)) {
      case LineReader::Result::kEnd:
        return PollStatus::kEndOfInput;
      case LineReader::Result::kNothing:
        return PollStatus::kNothingAvailable;
      case LineReader::Result::kOverLong:
        if (!spec_.on_over_long) throw std::runtime_error(reader_->over_long().Describe());
        spec_.on_over_long(reader_->over_long());
        continue;
      case LineReader::Result::kLine:
        break;
    }
    ++read_;
    std::optional<T> rec = parser_(line, where);
    if (rec) out.Collect(std::move(*rec));
    if (out.Backpressured()) break;
  }
  return PollStatus::kMoreAvailable;
}

// Whether every path of a file spec names a regular file (not stdin, a
// pipe or a FIFO).
bool AllRegularFiles(const std::vector<std::string>& paths);

template <typename T>
bool LineSource<T>::Replayable() const {
  return spec_.kind != Spec::Kind::kSocket && AllRegularFiles(spec_.paths);
}

template <typename T>
void LineSource<T>::SnapshotPosition(internal::StateWriter& w) const {
  if (spec_.kind == Spec::Kind::kFileSplits) {
    w.PutU64(next_split_);
    w.PutU64(split_readers_.size());
    for (size_t i = 0; i < split_readers_.size(); ++i) {
      const LineReader::Position p = split_readers_[i]->position();
      w.PutU8(split_done_[i]);
      w.PutI64(p.offset);
      w.PutI64(p.lines_before);
      w.PutU8(p.discarding ? 1 : 0);
    }
    return;
  }
  const bool seekable = reader_ && reader_->Seekable();
  w.PutU8(seekable ? 1 : 0);
  if (!seekable) return;
  const LineReader::Position p = reader_->position();
  w.PutI64(p.offset);
  w.PutI64(p.lines_before);
  w.PutU8(p.discarding ? 1 : 0);
}

template <typename T>
void LineSource<T>::RestorePosition(internal::StateReader& r) {
  if (spec_.kind == Spec::Kind::kFileSplits) {
    const uint64_t next = r.GetU64("next split");
    const uint64_t n = r.GetU64("splits");
    if (!r.ok() || n != split_readers_.size()) {
      r.Fail("the checkpoint's files do not match this subtask's");
      return;
    }
    next_split_ = static_cast<size_t>(next) % std::max<size_t>(1, n);
    for (size_t i = 0; i < n; ++i) {
      split_done_[i] = r.GetU8("split done");
      LineReader::Position p;
      p.offset = r.GetI64("offset");
      p.lines_before = r.GetI64("lines before");
      p.discarding = r.GetU8("discarding") != 0;
      if (r.ok() && split_readers_[i]->Seekable()) split_readers_[i]->Seek(p);
    }
    return;
  }
  if (r.GetU8("seekable") == 0) return;  // not replayable: starts where the input is now
  LineReader::Position p;
  p.offset = r.GetI64("offset");
  p.lines_before = r.GetI64("lines before");
  p.discarding = r.GetU8("discarding") != 0;
  if (r.ok() && reader_ && reader_->Seekable()) reader_->Seek(p);
}

template <typename T>
void LineSource<T>::Close() {
  reader_.reset();
  split_readers_.clear();
}

template <typename T>
int LineSource<T>::WaitFd() const {
  if (paced_until_ != kMinTimestamp) return -1;  // waiting for the pace, not for input
  if (!split_readers_.empty()) return split_readers_[waiting_split_]->fd();
  return reader_ ? reader_->fd() : -1;
}

template <typename T>
Timestamp LineSource<T>::RetryAt() const {
  if (paced_until_ != kMinTimestamp) return paced_until_;
  if (!split_readers_.empty()) return split_readers_[waiting_split_]->retry_at();
  return reader_ ? reader_->retry_at() : kMaxTimestamp;
}

}  // namespace tidemark

#endif  // TM_OPERATORS_SOURCES_H_
