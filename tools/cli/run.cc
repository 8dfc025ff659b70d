#include "tools/cli/run.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/job_compiler.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/task/detail/job_graph.h"
#include "tidemark/tidemark.h"
#include "tools/cli/generators.h"
#include "tools/cli/live_view.h"

namespace tidemark::cli {
namespace {

// --backlog-watermark (docs/generalized-watermarks.md, "In the CLI"): chained
// to each source subtask, it sends the generalized bool watermark "backlog"
// (FLIP-309's isProcessingBacklog: the source is catching up on data that
// already exists).  A file read unpaced is backlog from its first record to
// its end (it is read as fast as the job goes, faster than it was written);
// with --rate the input keeps a pace, and is backlog only while it is more
// than a second behind it (the pacer then lets it read at full speed to catch
// up); a socket without --rate is live input, never backlog.  At the end of
// input (the watermark MAX) it says false.  Records pass through unchanged.
class BacklogOperator final
    : public internal::BatchedOperator<BacklogOperator, CliRecord, CliRecord> {
 public:
  static constexpr double kBehindMs = 1000;
  BacklogOperator(bool unpaced_file, double rate) : unpaced_file_(unpaced_file), rate_(rate) {}

  void ProcessElement(CliRecord&& r, Timestamp ts) override {
    const auto now = std::chrono::steady_clock::now();
    if (records_ == 0) first_ = now;
    bool backlog = unpaced_file_;
    if (rate_ > 0) {
      // Record n (from 0) is due n / rate seconds after the first.
      const double elapsed = std::chrono::duration<double, std::milli>(now - first_).count();
      const double due = static_cast<double>(records_) * 1000.0 / rate_;
      backlog = elapsed - due > kBehindMs;
    }
    ++records_;
    Send(backlog);
    this->output().Collect(std::move(r), ts);
  }
  void ProcessWatermark(Timestamp w) override {
    if (w == kMaxWatermark && sent_) Send(false);  // the input ended: nothing left to catch up on
    this->ForwardWatermark(w);
  }

 private:
  static const BoolWatermarkDeclaration& Declaration() {
    static const BoolWatermarkDeclaration backlog =
        WatermarkDeclarations::new_builder("backlog").type_bool().combine_function_or().build();
    return backlog;
  }
  void Send(bool backlog) {
    if (sent_ && backlog == last_) return;  // changes only
    sent_ = true;
    last_ = backlog;
    this->ForwardGeneralizedWatermark(Declaration().new_watermark(backlog));
  }

  const bool unpaced_file_;
  const double rate_;
  int64_t records_ = 0;
  std::chrono::steady_clock::time_point first_;
  bool sent_ = false, last_ = false;
};

// Accumulator of every aggregate the CLI offers.  Integer values (see
// CliRecord) are kept exactly: their sum in 128 bits (it cannot overflow
// before 2^64 records), their minimum and maximum as int64; decimal values
// apart, in doubles.  AggregateValue() combines the two.
struct Acc {
  __int128 int_sum = 0;  // sum of the integer values
  double dec_sum = 0;    // sum of the decimal values
  int64_t count = 0;
  int64_t ints = 0;  // how many values were integers
  int64_t int_min = 0, int_max = 0;
  double dec_min = 0, dec_max = 0;
  Timestamp first = kMaxTimestamp;
  Timestamp last = kMinTimestamp;
};

struct CliAggregate {
  Acc create_accumulator() const { return Acc{}; }
  Acc add(const CliRecord& r, Acc a) const {
    if (r.is_integer) {
      a.int_min = a.ints == 0 ? r.int_value : std::min(a.int_min, r.int_value);
      a.int_max = a.ints == 0 ? r.int_value : std::max(a.int_max, r.int_value);
      a.int_sum += r.int_value;
      a.ints += 1;
    } else {
      const bool first_decimal = a.count == a.ints;
      a.dec_min = first_decimal ? r.value : std::min(a.dec_min, r.value);
      a.dec_max = first_decimal ? r.value : std::max(a.dec_max, r.value);
      a.dec_sum += r.value;
    }
    a.count += 1;
    a.first = std::min(a.first, r.ts);
    a.last = std::max(a.last, r.ts);
    return a;
  }
  Acc get_result(const Acc& a) const { return a; }
  Acc merge(Acc a, const Acc& b) const {
    if (b.count == 0) return a;
    if (a.count == 0) return b;
    if (b.ints > 0) {
      a.int_min = a.ints == 0 ? b.int_min : std::min(a.int_min, b.int_min);
      a.int_max = a.ints == 0 ? b.int_max : std::max(a.int_max, b.int_max);
    }
    if (b.count > b.ints) {
      const bool none = a.count == a.ints;
      a.dec_min = none ? b.dec_min : std::min(a.dec_min, b.dec_min);
      a.dec_max = none ? b.dec_max : std::max(a.dec_max, b.dec_max);
    }
    a.int_sum += b.int_sum;
    a.dec_sum += b.dec_sum;
    a.ints += b.ints;
    a.count += b.count;
    a.first = std::min(a.first, b.first);
    a.last = std::max(a.last, b.last);
    return a;
  }
};

struct CliResult {
  std::string key;
  Timestamp start = 0;
  Timestamp end = 0;
  Acc acc;
  std::string firing;
  Timestamp watermark = kMinTimestamp;
  int subtask = 0;
};

}  // namespace
}  // namespace tidemark::cli

// Results cross MPI ranks to the printing sink on rank 0.
template <>
struct tidemark::StateCodec<tidemark::cli::CliResult> {
  static void Encode(internal::StateWriter& w, const cli::CliResult& r) {
    internal::Encode(w, r.key);
    internal::Encode(w, r.start);
    internal::Encode(w, r.end);
    internal::Encode(w, r.acc);  // trivially copyable
    internal::Encode(w, r.firing);
    internal::Encode(w, r.watermark);
    internal::Encode(w, r.subtask);
  }
  static cli::CliResult Decode(internal::StateReader& r) {
    cli::CliResult c;
    c.key = internal::Decode<std::string>(r);
    c.start = internal::Decode<Timestamp>(r);
    c.end = internal::Decode<Timestamp>(r);
    c.acc = internal::Decode<cli::Acc>(r);
    c.firing = internal::Decode<std::string>(r);
    c.watermark = internal::Decode<Timestamp>(r);
    c.subtask = internal::Decode<int>(r);
    return c;
  }
};

namespace tidemark::cli {
namespace {

// A double in the shortest form that reads back to the same double
// ("0.30000000000000004", "1234567.5", "1e+21").
std::string Number(double v) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

std::string Int128ToString(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  std::string digits;
  while (v != 0) {
    const int d = static_cast<int>(v % 10);
    digits.push_back(static_cast<char>('0' + (d < 0 ? -d : d)));
    v /= 10;
  }
  if (negative) digits.push_back('-');
  return std::string(digits.rbegin(), digits.rend());
}

// A window's aggregate: an exact integer or a double.
struct AggregateNumber {
  bool is_integer = true;
  int64_t integer = 0;
  double decimal = 0;
  std::string ToString() const { return is_integer ? absl::StrCat(integer) : Number(decimal); }
};

// The value of `kind` over `a` (not for kList).  The rule: count is an
// integer; sum, min and max over integer values only are exact integers (a
// sum outside the 64-bit range is an error, never wrapped or rounded); with
// any decimal value in the window, sum is computed in doubles and min / max
// is the smallest / largest value, printed as it was read (an integer stays
// an integer); avg is always a double (sum / count, rounded once when every
// value is an integer).
absl::StatusOr<AggregateNumber> AggregateValue(AggregateKind kind, const Acc& a) {
  AggregateNumber n;
  const bool all_ints = a.ints == a.count;
  switch (kind) {
    case AggregateKind::kCount:
      n.integer = a.count;
      return n;
    case AggregateKind::kSum:
      if (all_ints) {
        if (a.int_sum > std::numeric_limits<int64_t>::max() ||
            a.int_sum < std::numeric_limits<int64_t>::min()) {
          return absl::OutOfRangeError(absl::StrCat("sum ", Int128ToString(a.int_sum),
                                                    " is outside the 64-bit integer range"));
        }
        n.integer = static_cast<int64_t>(a.int_sum);
        return n;
      }
      n.is_integer = false;
      n.decimal = static_cast<double>(a.int_sum) + a.dec_sum;
      if (!std::isfinite(n.decimal))
        return absl::OutOfRangeError("sum is outside the range of a double");
      return n;
    case AggregateKind::kMin:
    case AggregateKind::kMax: {
      const bool min = kind == AggregateKind::kMin;
      const int64_t i = min ? a.int_min : a.int_max;
      const double d = min ? a.dec_min : a.dec_max;
      // long double holds every int64 exactly (x86-64's 64-bit mantissa).
      const bool take_int =
          a.ints > 0 &&
          (all_ints || (min ? static_cast<long double>(i) <= d : static_cast<long double>(i) >= d));
      n.is_integer = take_int;
      n.integer = take_int ? i : 0;
      n.decimal = take_int ? 0 : d;
      return n;
    }
    case AggregateKind::kAvg:
      n.is_integer = false;
      if (a.count == 0) return n;
      n.decimal = all_ints
                      ? static_cast<double>(static_cast<long double>(a.int_sum) /
                                            static_cast<long double>(a.count))
                      : (static_cast<double>(a.int_sum) + a.dec_sum) / static_cast<double>(a.count);
      if (!std::isfinite(n.decimal))
        return absl::OutOfRangeError("avg is outside the range of a double");
      return n;
    case AggregateKind::kList:
      break;
  }
  return n;
}

// Everything the job's functions share; outlives the job.
struct Shared {
  LineFormat format;
  AggregateKind aggregate;
  OutputFormat output;
  int parallelism = 1;
  LinePrinter* printer;
  TraceRecorder* recorder;
  std::atomic<int64_t> skipped{0};
  std::atomic<int64_t> comments{0};
  std::atomic<int64_t> headers{0};
  std::atomic<int64_t> filtered{0};
  std::atomic<int64_t> fired{0};
  std::atomic<int64_t> late{0};
  std::atomic<int64_t> future{0};
  internal::Mutex dead_mu;
  std::ofstream dead_letter ABSL_GUARDED_BY(dead_mu);
  internal::Mutex err_mu;
  std::ostream* err ABSL_PT_GUARDED_BY(err_mu) = nullptr;
};

// A line quoted in an error: at most this many bytes of it.
constexpr size_t kQuotedLineBytes = 256;
std::string Quoted(std::string_view line) {
  if (line.size() <= kQuotedLineBytes) return std::string(line);
  return absl::StrCat(absl::string_view(line.data(), kQuotedLineBytes), "... (", line.size(),
                      " bytes)");
}

std::string FormatResult(const Shared& sh, const CliResult& r) {
  const absl::TimeZone& z = sh.format.zone();
  if (sh.output == OutputFormat::kJsonl) {
    std::string s = absl::StrCat("{\"kind\":\"window\",", JsonField("key", r.key),
                                 ",\"start\":", r.start, ",\"end\":", r.end);
    if (sh.aggregate == AggregateKind::kList) {
      absl::StrAppend(&s, ",\"first\":", r.acc.first, ",\"last\":", r.acc.last);
    } else {
      // Checked when the window fired (BuildWindows).
      absl::StatusOr<AggregateNumber> v = AggregateValue(sh.aggregate, r.acc);
      absl::StrAppend(&s, ",\"value\":", v.ok() ? v->ToString() : "null");
    }
    absl::StrAppend(&s, ",\"count\":", r.acc.count, ",\"firing\":\"", r.firing,
                    "\",\"watermark\":", r.watermark, ",\"subtask\":", r.subtask, "}");
    return s;
  }
  const std::string prefix = sh.parallelism > 1 ? absl::StrCat(r.subtask + 1, "> ") : "";
  if (sh.aggregate == AggregateKind::kList) {
    // Document 000's window function output.
    return absl::StrCat(prefix, "(", r.key, "),", r.acc.count, ",", FormatTime(r.acc.first, z), ",",
                        FormatTime(r.acc.last, z), ",", FormatTime(r.start, z), ",",
                        FormatTime(r.end, z));
  }
  absl::StatusOr<AggregateNumber> v = AggregateValue(sh.aggregate, r.acc);
  // Document 002's window function output.
  return absl::StrCat(prefix, "window:[", FormatTime(r.start, z, false), "--",
                      FormatTime(r.end, z, false), "]-<", r.key, ">--", ToString(sh.aggregate),
                      ": ", v.ok() ? v->ToString() : std::string(v.status().message()));
}

template <typename Assigner>
DataStream<CliResult> BuildWindows(
    const KeyedStream<CliRecord, std::string (*)(const CliRecord&)>& keyed, Assigner assigner,
    Duration lateness, const std::optional<OutputTag<CliRecord>>& late_tag,
    std::shared_ptr<Shared> sh, bool local_aggregation = false) {
  auto windowed =
      keyed.window(assigner).allowed_lateness(lateness).local_aggregation_if(local_aggregation);
  if (late_tag) windowed = windowed.side_output_late_data(*late_tag);
  return windowed.aggregate(CliAggregate{}, [sh](const std::string& key, const TimeWindow& w,
                                                 const Acc& acc, WindowContext& ctx,
                                                 Collector<CliResult>& out) {
    if (sh->aggregate != AggregateKind::kList) {
      // An aggregate that has no exact value fails the job, naming the key and
      // the window (never a wrapped or rounded number).
      absl::StatusOr<AggregateNumber> v = AggregateValue(sh->aggregate, acc);
      if (!v.ok()) {
        const absl::TimeZone& z = sh->format.zone();
        throw std::runtime_error(absl::StrCat("key '", key, "', window [", FormatTime(w.start, z),
                                              ", ", FormatTime(w.end, z),
                                              "): ", v.status().message()));
      }
    }
    CliResult r;
    r.key = key;
    r.start = w.start;
    r.end = w.end;
    r.acc = acc;
    r.watermark = ctx.current_watermark();
    r.subtask = ctx.subtask_index();
    r.firing = ctx.current_watermark() == kMaxWatermark ? "end_of_input"
               : ctx.fired_by_element() && w.max_timestamp() <= ctx.current_watermark() ? "late"
                                                                                        : "on_time";
    out.collect(std::move(r));
  });
}

std::string KeyOf(const CliRecord& r) { return r.key; }

// Drops the marker lines once they made their watermark, counting them
// (kWatermarkMarkersCounter).
struct DropMarkers {
  void open(const RuntimeContext& ctx) { markers.emplace(ctx.counter(kWatermarkMarkersCounter)); }
  bool operator()(const CliRecord& r) {
    if (!r.is_marker()) return true;
    markers->inc();
    return false;
  }
  std::optional<UserCounter> markers;
};

const char* SignalName(int sig) {
  switch (sig) {
    case SIGINT:
      return "SIGINT";
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "signal";
  }
}

}  // namespace

int SavepointSignal(const std::string& name) {
  if (name.empty()) return 0;
  if (name == "SIGUSR1" || name == "USR1") return SIGUSR1;
  if (name == "SIGUSR2" || name == "USR2") return SIGUSR2;
  return -1;
}

namespace {

// "1 window", "2 windows".
std::string Count(int64_t n, const char* one, const char* many) {
  return absl::StrCat(n, " ", n == 1 ? one : many);
}

// Takes SIGINT and SIGTERM, as far as the caller blocked them in every thread,
// through a signalfd on a thread of its own (so no worker thread is ever
// interrupted and nothing runs in a signal handler).  The first signal cancels
// the attached environment's job; a second one ends the process at once.
//
// Savepoints: `savepoint_signal` (take one into `savepoint_dir`, the job goes
// on) and `stop_signal` (stop the job with one; `drain`: fire every window
// first), when the caller blocked them; each is taken on a thread of its
// own, so SIGINT still works while it is written, and said on stderr.
class SignalWatcher {
 public:
  SignalWatcher(int savepoint_signal = 0, int stop_signal = 0, std::string savepoint_dir = "",
                bool drain = false)
      : savepoint_signal_(savepoint_signal),
        stop_signal_(stop_signal),
        savepoint_dir_(std::move(savepoint_dir)),
        drain_(drain) {
    sigset_t blocked;
    sigemptyset(&blocked);
    pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, savepoint_signal, stop_signal})
      if (sig > 0 && sigismember(&blocked, sig) == 1) sigaddset(&set_, sig);
    signal_fd_ = signalfd(-1, &set_, SFD_CLOEXEC);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    kick_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (signal_fd_ < 0 || stop_fd_ < 0 || kick_fd_ < 0) return;
    thread_ = std::thread([this] { Main(); });
  }
  ~SignalWatcher() {
    if (thread_.joinable()) {
      const uint64_t one = 1;
      if (write(stop_fd_, &one, sizeof(one)) < 0) {
      }
      thread_.join();
    }
    if (savepoint_thread_.joinable()) savepoint_thread_.join();
    if (signal_fd_ >= 0) close(signal_fd_);
    if (stop_fd_ >= 0) close(stop_fd_);
    if (kick_fd_ >= 0) close(kick_fd_);
  }
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // The job to cancel at the first signal (nullptr: none any more).  When a
  // signal came before, cancels it now.
  void Attach(StreamExecutionEnvironment* env) {
    internal::MutexLock lock(&mu_);
    env_ = env;
    if (env_ != nullptr && signal_ != 0) env_->cancel();
  }
  // The running job, for the savepoint signals (nullopt: none any more).
  // A savepoint signal that came before the client (the job printed before
  // execute_async returned) is taken now, on the watcher's thread.
  void AttachClient(std::optional<JobClient> client) {
    internal::MutexLock lock(&mu_);
    client_ = std::move(client);
    if (client_ && early_signal_ != 0 && kick_fd_ >= 0) {
      const uint64_t one = 1;
      if (write(kick_fd_, &one, sizeof(one)) < 0) {
      }
    }
  }
  // The first signal taken, 0 if none.
  int signal() const {
    internal::MutexLock lock(&mu_);
    return signal_;
  }

 private:
  void Main() {
    for (;;) {
      pollfd fds[3] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {kick_fd_, POLLIN, 0}};
      if (poll(fds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      if (fds[2].revents != 0) {
        uint64_t n = 0;
        if (read(kick_fd_, &n, sizeof(n)) < 0) {
        }
        int early = 0;
        {
          internal::MutexLock lock(&mu_);
          std::swap(early, early_signal_);
        }
        if (early != 0) Savepoint(early);
        if (fds[0].revents == 0) continue;
      }
      signalfd_siginfo info;
      if (read(signal_fd_, &info, sizeof(info)) != static_cast<ssize_t>(sizeof(info))) continue;
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == savepoint_signal_ || sig == stop_signal_) {
        Savepoint(sig);
        continue;
      }
      internal::MutexLock lock(&mu_);
      if (signal_ != 0) {
        const std::string msg =
            absl::StrCat("tidemark: second signal (", SignalName(sig), "): exiting at once\n");
        if (write(STDERR_FILENO, msg.data(), msg.size()) < 0) {
        }
        _exit(128 + sig);
      }
      signal_ = sig;
      const std::string msg = absl::StrCat("tidemark: ", SignalName(sig),
                                           ": stopping the job (a second signal exits at once)\n");
      if (write(STDERR_FILENO, msg.data(), msg.size()) < 0) {
      }
      if (env_ != nullptr) env_->cancel();
    }
  }

  static void Say(const std::string& msg) {
    if (write(STDERR_FILENO, msg.data(), msg.size()) < 0) {
    }
  }

  // On the watcher's thread: starts the savepoint `sig` asks for on a
  // thread of its own, unless one is being taken.
  void Savepoint(int sig) {
    // Under mpirun the launcher forwards the signal to every rank: rank 0,
    // which has the checkpoint coordinator, takes the savepoint for the job
    // (and a stop reaches the other ranks from it); the others say nothing.
    if (ThisCluster().rank != 0) return;
    std::optional<JobClient> client;
    {
      internal::MutexLock lock(&mu_);
      client = client_;
      if (saving_) {
        Say(absl::StrCat("tidemark: ", SignalName(sig),
                         ": a savepoint is being taken already; ignored\n"));
        return;
      }
      if (signal_ != 0) {
        Say(absl::StrCat("tidemark: ", SignalName(sig), ": the job is stopping; ignored\n"));
        return;
      }
      if (!client) {
        early_signal_ = sig;  // the job is starting: taken once AttachClient has its client
        return;
      }
      saving_ = true;
    }
    if (savepoint_thread_.joinable()) savepoint_thread_.join();
    const bool stop = sig == stop_signal_;
    savepoint_thread_ = std::thread([this, sig, stop, client = *std::move(client)]() mutable {
      Say(absl::StrCat("tidemark: ", SignalName(sig), ": ",
                       stop ? (drain_ ? "draining the job (every window fires), then stopping it "
                                        "with a savepoint"
                                      : "stopping the job with a savepoint")
                            : "taking a savepoint",
                       " into ", savepoint_dir_, "\n"));
      absl::StatusOr<std::string> path = stop ? client.stop_with_savepoint(savepoint_dir_, drain_)
                                              : client.trigger_savepoint(savepoint_dir_);
      if (path.ok()) {
        Say(absl::StrCat("tidemark: savepoint ", *path, " complete", stop ? "; the job stops" : "",
                         "\n"));
      } else {
        Say(absl::StrCat("tidemark: savepoint failed: ", path.status().message(),
                         stop ? " (the job goes on)" : "", "\n"));
      }
      internal::MutexLock lock(&mu_);
      saving_ = false;
    });
  }

  const int savepoint_signal_;
  const int stop_signal_;
  const std::string savepoint_dir_;
  const bool drain_;
  std::thread savepoint_thread_;  // the watcher's thread only (and the destructor)
  sigset_t set_;
  int signal_fd_ = -1;
  int stop_fd_ = -1;
  int kick_fd_ = -1;  // AttachClient: an early savepoint signal to take
  std::thread thread_;
  mutable internal::Mutex mu_;
  StreamExecutionEnvironment* env_ ABSL_GUARDED_BY(mu_) = nullptr;
  int signal_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<JobClient> client_ ABSL_GUARDED_BY(mu_);
  bool saving_ ABSL_GUARDED_BY(mu_) = false;
  int early_signal_ ABSL_GUARDED_BY(mu_) = 0;
};

// What a cancelled job left open, from its final metrics.
std::string LeftOpen(const JobResult& result) {
  int64_t out = 0, in = 0;
  for (const auto& m : result.metrics) {
    out += m.records_out;
    if (m.task_name.rfind("Source", 0) != 0) in += m.records_in;
  }
  const int64_t windows = result.CounterTotal(internal::kWindowsNotFiredAtClose);
  const int64_t keys = result.CounterTotal(internal::kWindowKeysNotFiredAtClose);
  return absl::StrCat(Count(windows, "window", "windows"), " not fired (",
                      Count(keys, "key", "keys"), "), ",
                      Count(std::max<int64_t>(0, out - in), "record", "records"), " in flight");
}

}  // namespace

namespace {

// The flags that shape the job and that every rank must give alike under
// mpirun (StreamExecutionEnvironment::set_rank_settings): the plan the ranks
// compare shows the operators, not a window's size or a watermark's delay.
// Paths (inputs, outputs, directories) may differ between hosts.
std::string RankSettings(const RunOptions& o) {
  const LineFormatOptions& f = o.format;
  std::string where;
  for (const auto& [field, value] : f.where) absl::StrAppend(&where, field, "=", value, ";");
  return absl::StrCat(
      "inputs=", o.inputs.size(), " socket=", !o.socket.empty(),
      " delimiter=", std::string(1, f.delimiter), " fields=", absl::StrJoin(f.fields, ","),
      " key=", f.key_field, " ts=", f.timestamp_field, " value=", f.value_field, " where=", where,
      " time-format=", f.time_format, " timezone=", f.timezone,
      " max-line-length=", f.max_line_length, " comments=", o.comments,
      " allow-extra-fields=", f.allow_extra_fields, " trim-spaces=", f.trim_spaces,
      " watermarks=", o.watermarks, " watermark-interval=", o.watermark_interval,
      " idleness=", o.idleness, " alignment-max-drift=", o.alignment_max_drift,
      " alignment-update-interval=", o.alignment_update_interval,
      " source-parallelism=", o.source_parallelism,
      " per-split-watermarks=", o.per_split_watermarks, " flush-after=", o.flush_after,
      " max-future-skew=", o.max_future_skew, " window=", o.window,
      " allowed-lateness=", o.allowed_lateness, " local-aggregation=", o.local_aggregation,
      " late=", o.late, " aggregate=", o.aggregate, " output=", o.output,
      " checkpoint-interval=", o.checkpoint_interval,
      " incremental-checkpoints=", o.incremental_checkpoints, " state-backend=", o.state_backend,
      " restart-strategy=", o.restart_strategy, " placement=", o.placement, " rate=", o.rate,
      " backlog-watermark=", o.backlog_watermark, " bad-lines=", o.bad_lines,
      " skip-header=", o.skip_header);
}

}  // namespace

int RunCommand(const RunOptions& o, std::ostream& out, std::ostream& err_stream) {
  // Under mpirun every rank runs this; rank 0 speaks for the job (errors name
  // the rank they happened on), the others keep quiet.
  const ClusterInfo cluster = ThisCluster();
  std::ostringstream muted;
  std::ostream& err = cluster.rank == 0 ? err_stream : muted;
  auto fail = [&](const std::string& msg) {
    err << "tidemark: " << msg << "\n";
    return 2;
  };
  // An error only this rank can meet (its own files): said by this rank,
  // naming it (through rank 0's muted stream it was never seen).
  auto fail_on_this_rank = [&](const std::string& msg) {
    err_stream << "tidemark: "
               << (cluster.distributed() ? absl::StrCat("rank ", cluster.rank, ": ") : "") << msg
               << "\n";
    return 2;
  };
  // --- check everything before anything runs ---
  auto wm = ParseWatermarkSpec(o.watermarks);
  LineFormatOptions format_options = o.format;
  // "#watermark T" lines are markers only for --watermarks=marker.
  format_options.markers = wm.ok() && wm->kind == WatermarkSpec::Kind::kMarker;
  format_options.comment_prefix = o.comments;
  auto format = LineFormat::Make(format_options);
  if (!format.ok()) return fail(std::string(format.status().message()));
  if (!wm.ok()) return fail(std::string(wm.status().message()));
  bool per_record = o.watermark_interval == "per-record";
  Duration interval{200};
  if (!per_record) {
    auto d = ParseDuration(o.watermark_interval);
    if (!d.ok()) return fail(absl::StrCat("--watermark-interval: ", d.status().message()));
    if (d->count() < 0) return fail("--watermark-interval must not be negative");
    interval = *d;
  }
  // --rate=N/s: lines a second per source subtask.
  double rate = 0;
  if (!o.rate.empty()) {
    absl::string_view r = o.rate;
    const bool per_second = absl::ConsumeSuffix(&r, "/s");
    if (!per_second || !absl::SimpleAtod(r, &rate) || !(rate > 0) || !std::isfinite(rate))
      return fail(absl::StrCat("--rate=", o.rate,
                               ": expected N/s, lines a second per source subtask (N > 0), such "
                               "as --rate=200/s"));
  }
  if (o.timeline_axis != "time" && o.timeline_axis != "records")
    return fail(absl::StrCat("--timeline-axis=", o.timeline_axis, ": expected time or records"));
  if (o.timeline_axis != "time" && o.timeline.empty())
    return fail("--timeline-axis needs --timeline");
  std::optional<Duration> idleness;
  if (!o.idleness.empty()) {
    auto d = ParseDuration(o.idleness);
    if (!d.ok()) return fail(absl::StrCat("--idleness: ", d.status().message()));
    if (d->count() <= 0) return fail("--idleness must be greater than 0");
    idleness = *d;
  }
  std::optional<Duration> drift;
  Duration update_interval{1000};
  if (!o.alignment_max_drift.empty()) {
    auto d = ParseDuration(o.alignment_max_drift);
    if (!d.ok()) return fail(absl::StrCat("--alignment-max-drift: ", d.status().message()));
    if (d->count() < 0) return fail("--alignment-max-drift must not be negative");
    drift = *d;
    auto u = ParseDuration(o.alignment_update_interval);
    if (!u.ok()) return fail(absl::StrCat("--alignment-update-interval: ", u.status().message()));
    if (u->count() <= 0) return fail("--alignment-update-interval must be greater than 0");
    update_interval = *u;
  }
  auto optional_duration = [](const std::string& flag, const std::string& text,
                              std::optional<Duration>* d) -> absl::Status {
    if (text.empty()) return absl::OkStatus();
    auto v = ParseDuration(text);
    if (!v.ok())
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", v.status().message()));
    *d = *v;
    return absl::OkStatus();
  };
  std::optional<Duration> flush_after, max_future_skew;
  if (absl::Status e = optional_duration("flush-after", o.flush_after, &flush_after); !e.ok())
    return fail(std::string(e.message()));
  if (flush_after && flush_after->count() <= 0) return fail("--flush-after must be greater than 0");
  if (absl::Status e = optional_duration("max-future-skew", o.max_future_skew, &max_future_skew);
      !e.ok())
    return fail(std::string(e.message()));
  if (max_future_skew && max_future_skew->count() < 0)
    return fail("--max-future-skew must not be negative");
  auto window = ParseWindowSpec(o.window);
  if (!window.ok()) return fail(std::string(window.status().message()));
  auto lateness = ParseDuration(o.allowed_lateness);
  if (!lateness.ok())
    return fail(absl::StrCat("--allowed-lateness: ", lateness.status().message()));
  if (lateness->count() < 0) return fail("--allowed-lateness must not be negative");
  if (o.late != "drop" && o.late != "side") return fail("--late must be drop or side");
  if (o.local_aggregation && window->kind == WindowSpec::Kind::kSession)
    return fail("--local-aggregation applies to tumbling and sliding windows, not sessions");
  auto aggregate = ParseAggregate(o.aggregate);
  if (!aggregate.ok()) return fail(std::string(aggregate.status().message()));
  if (o.parallelism <= 0) return fail("--parallelism must be positive");
  if (o.output != "text" && o.output != "jsonl") return fail("--output must be text or jsonl");
  if (o.placement != "modulo" && o.placement != "block")
    return fail("--placement must be modulo or block");
  if (!o.output_per_rank.empty() && !cluster.distributed()) {
    return fail(
        "--output-per-rank is for jobs under mpirun (each rank writes PREFIX.RANK); without "
        "mpirun the results go to standard output, or to --output-dir");
  }
  if (o.incremental_checkpoints && o.checkpoint_dir.empty())
    return fail("--incremental-checkpoints needs --checkpoint-dir");
  if (o.unaligned_checkpoints && o.checkpoint_dir.empty())
    return fail("--unaligned-checkpoints needs --checkpoint-dir");
  if (o.unaligned_checkpoints && cluster.distributed()) {
    return fail(
        "--unaligned-checkpoints is not supported across MPI ranks (the channel state of "
        "channels between ranks is not captured); use aligned checkpoints under mpirun");
  }
  Duration checkpoint_interval{0};
  if (!o.checkpoint_interval.empty() || !o.checkpoint_dir.empty()) {
    if (o.checkpoint_dir.empty()) return fail("--checkpoint-interval needs --checkpoint-dir");
    auto d = ParseDuration(o.checkpoint_interval.empty() ? "1s" : o.checkpoint_interval);
    if (!d.ok()) return fail(absl::StrCat("--checkpoint-interval: ", d.status().message()));
    if (d->count() <= 0) return fail("--checkpoint-interval must be greater than 0");
    checkpoint_interval = *d;
  }
  const int savepoint_signal = SavepointSignal(o.savepoint_on);
  const int stop_signal = SavepointSignal(o.stop_with_savepoint_on);
  if (savepoint_signal < 0)
    return fail(absl::StrCat("--savepoint-on=", o.savepoint_on, ": give SIGUSR1 or SIGUSR2"));
  if (stop_signal < 0) {
    return fail(absl::StrCat("--stop-with-savepoint-on=", o.stop_with_savepoint_on,
                             ": give SIGUSR1 or SIGUSR2"));
  }
  if (savepoint_signal > 0 && savepoint_signal == stop_signal)
    return fail("--savepoint-on and --stop-with-savepoint-on name the same signal");
  if ((savepoint_signal > 0 || stop_signal > 0) && o.savepoint_dir.empty())
    return fail("--savepoint-on and --stop-with-savepoint-on need --savepoint-dir");
  if (!o.savepoint_dir.empty() && savepoint_signal == 0 && stop_signal == 0) {
    return fail(
        "--savepoint-dir needs --savepoint-on=SIGUSR1 or --stop-with-savepoint-on=SIGUSR2 (when "
        "to take one)");
  }
  if (o.drain && stop_signal == 0) return fail("--drain needs --stop-with-savepoint-on");
  if (!o.restore.empty() && o.checkpoint_dir.empty() && o.restore == "latest")
    return fail("--restore=latest needs --checkpoint-dir");
  if (o.tolerable_failed_checkpoints < 0)
    return fail("--tolerable-failed-checkpoints must not be negative");
  auto checkpoint_timeout = ParseDuration(o.checkpoint_timeout);
  if (!checkpoint_timeout.ok())
    return fail(absl::StrCat("--checkpoint-timeout: ", checkpoint_timeout.status().message()));
  if (checkpoint_timeout->count() <= 0) return fail("--checkpoint-timeout must be greater than 0");
  if (!o.restore.empty() && o.restore != "latest" && !o.explain) {
    std::error_code ec;
    if (!std::filesystem::is_directory(o.restore, ec)) {
      return fail_on_this_rank(absl::StrCat(
          "--restore=", o.restore, ": no such checkpoint (",
          std::filesystem::exists(o.restore, ec) ? "not a directory" : "it does not exist",
          "); give a checkpoint directory, DIR/chk-<n>, a savepoint directory, or "
          "--restore=latest with --checkpoint-dir"));
    }
  }
  auto restart_strategy = ParseRestartStrategy(o.restart_strategy);
  if (!restart_strategy.ok()) return fail(std::string(restart_strategy.status().message()));
  if (o.state_backend != "heap" && o.state_backend != "rocksdb")
    return fail("--state-backend must be heap or rocksdb");
  if (!o.trace.empty() && o.trace != "watermarks") return fail("--trace must be watermarks");
  if (o.bad_lines != "fail" && o.bad_lines != "skip")
    return fail("--bad-lines must be fail or skip");
  if (!o.socket.empty() && !o.inputs.empty())
    return fail("give either --socket or --input, not both");
  if (o.socket_retries < -1) return fail("--socket-retries must be -1 (forever) or more");
  std::string host;
  int port = 0;
  if (!o.socket.empty()) {
    const size_t colon = o.socket.rfind(':');
    if (colon == std::string::npos || !absl::SimpleAtoi(o.socket.substr(colon + 1), &port) ||
        port <= 0 || port > 65535) {
      return fail(absl::StrCat("--socket=", o.socket, ": expected HOST:PORT"));
    }
    host = o.socket.substr(0, colon);
  }
  std::vector<std::string> inputs = o.inputs;
  if (o.socket.empty() && inputs.empty()) inputs = {"-"};
  for (const std::string& path : inputs) {
    if (path == "-") continue;
    // Not opened here: opening a FIFO would wait for its writer, and closing
    // it again would cut a writer off (the source opens it without waiting).
    if (access(path.c_str(), R_OK) != 0) {
      return fail_on_this_rank(
          absl::StrCat("cannot open input file ", path, ": ", std::strerror(errno)));
    }
  }
  if (std::count(inputs.begin(), inputs.end(), "-") > 1) return fail("stdin (-) can be read once");
  if (o.source_parallelism < 0) return fail("--source-parallelism must not be negative");
  if (o.source_parallelism > 0 && !o.socket.empty())
    return fail("--source-parallelism is for --input files, not --socket");
  if (o.source_parallelism > static_cast<int>(inputs.size()))
    return fail(absl::StrCat("--source-parallelism=", o.source_parallelism, " is more than the ",
                             inputs.size(), " input(s)"));
  if (o.stdin_closed && !o.explain && std::count(inputs.begin(), inputs.end(), "-") > 0) {
    return fail(o.inputs.empty() ? "standard input is closed (and no --input or --socket was given)"
                                 : "--input=-: standard input is closed");
  }

  // Where the results go, checked before anything runs.
  std::ofstream timeline_page;
  if (!o.timeline.empty() && !o.explain && cluster.rank == 0) {
    timeline_page.open(o.timeline, std::ios::out | std::ios::trunc);
    if (!timeline_page) {
      return fail(absl::StrCat("--timeline=", o.timeline,
                               ": cannot open for writing: ", std::strerror(errno)));
    }
  }
  // The checkpoint directory: created and checked for writing before the job
  // starts, as the timeline is (rank 0 writes every checkpoint).
  if (!o.checkpoint_dir.empty() && !o.explain && cluster.rank == 0) {
    internal::CheckpointStorage storage(o.checkpoint_dir);
    if (absl::Status st = storage.CheckWritable(); !st.ok())
      return fail(absl::StrCat("--checkpoint-dir=", o.checkpoint_dir, ": ", st.message()));
  }
  // --serve: checked (a loopback address only) before anything runs.
  std::string serve_host;
  int serve_port = 0;
  std::optional<Duration> serve_linger;
  if (!o.serve.empty()) {
    if (absl::Status st = ParseServeAddress(o.serve, &serve_host, &serve_port); !st.ok())
      return fail(std::string(st.message()));
    if (cluster.distributed())
      return fail("--serve is not supported under mpirun (each rank sees only its own subtasks)");
  }
  if (!o.serve_linger.empty()) {
    if (o.serve.empty()) return fail("--serve-linger needs --serve");
    auto d = ParseDuration(o.serve_linger);
    if (!d.ok()) return fail(absl::StrCat("--serve-linger: ", d.status().message()));
    if (d->count() < 0) return fail("--serve-linger must not be negative");
    serve_linger = *d;
  }
  auto sh = std::make_shared<Shared>();
  sh->format = *format;
  sh->aggregate = *aggregate;
  sh->output = o.output == "jsonl" ? OutputFormat::kJsonl : OutputFormat::kText;
  sh->parallelism = o.parallelism;
  sh->err = &err;
  if (!o.dead_letter.empty() && !o.explain) {
    // Under mpirun each rank writes the lines its sources skipped to its own
    // file, DEAD_LETTER.RANK.  (No task runs yet; the lock is for the
    // analysis.)
    internal::MutexLock lock(&sh->dead_mu);
    sh->dead_letter.open(
        cluster.distributed() ? absl::StrCat(o.dead_letter, ".", cluster.rank) : o.dead_letter,
        std::ios::out | std::ios::trunc);
    if (!sh->dead_letter) {
      return fail_on_this_rank(absl::StrCat("--dead-letter=", o.dead_letter,
                                            ": cannot open for writing: ", std::strerror(errno)));
    }
  }
  // --output-per-rank: this rank's results into PREFIX.RANK.
  std::ofstream rank_output;
  if (!o.output_per_rank.empty() && !o.explain) {
    const std::string path = absl::StrCat(o.output_per_rank, ".", cluster.rank);
    rank_output.open(path, std::ios::out | std::ios::trunc);
    if (!rank_output) {
      return fail_on_this_rank(absl::StrCat("--output-per-rank: cannot open ", path,
                                            " for writing: ", std::strerror(errno)));
    }
  }
  // Under mpirun, the lines of the other ranks are printed by rank 0, whole
  // (internal::ForwardLineToRank0), unless each rank writes its own file.
  const bool lines_to_rank0 = cluster.distributed() && !rank_output.is_open();
  LinePrinter printer(rank_output.is_open() ? static_cast<std::ostream*>(&rank_output) : &out,
                      lines_to_rank0 && cluster.rank != 0);
  sh->printer = &printer;
  struct SinkReset {
    bool set;
    ~SinkReset() {
      if (set) internal::SetForwardedLineSink(nullptr);
    }
  } sink_reset{lines_to_rank0 && cluster.rank == 0};
  if (sink_reset.set)
    internal::SetForwardedLineSink(
        [&printer](std::string_view line) { printer.Print(std::string(line)); });
  auto recorder = std::make_shared<TraceRecorder>(&printer, sh->output, o.trace == "watermarks",
                                                  !o.timeline.empty(), sh->format.zone());
  // Past its bound the recorder summarises along the page's axis.
  recorder->SetTimelineAxis(o.timeline_axis == "records");
  sh->recorder = recorder.get();
  // The live view: its state is fed by the recorder (from the job's threads)
  // and read by the server's threads.  Declared before the job, so it
  // outlives it; the server stops before the state goes.
  std::unique_ptr<LiveState> live;
  std::unique_ptr<LiveServer> server;
  if (!o.serve.empty() && !o.explain) {
    live = std::make_unique<LiveState>(sh->format.zone());
    recorder->SetObserver(live.get());
    auto started = LiveServer::Start(serve_host, serve_port, live.get(), "tidemark run: live view");
    if (!started.ok()) return fail(std::string(started.status().message()));
    server = *std::move(started);
    err << "tidemark: live view at " << server->url() << "\n" << std::flush;
  }

  // --- the job ---
  StreamExecutionEnvironment env;
  env.set_parallelism(o.parallelism);
  env.set_auto_watermark_interval(per_record ? Duration(0) : interval);
  env.set_watermark_listener(recorder);
  const PlacementFunction placement = o.placement == "block" ? PlacementFunction(BlockPlacement)
                                                             : PlacementFunction(ModuloPlacement);
  env.set_placement(placement);
  if (!o.checkpoint_dir.empty()) env.enable_checkpointing(checkpoint_interval, o.checkpoint_dir);
  // Savepoints need the barriers: without a checkpoint directory, in memory
  // and none periodic.
  if (o.checkpoint_dir.empty() && !o.savepoint_dir.empty()) env.enable_checkpointing(Duration(0));
  if (o.allow_non_restored_state) env.set_allow_non_restored_state();
  if (o.incremental_checkpoints) env.enable_incremental_checkpoints();
  if (o.unaligned_checkpoints) env.enable_unaligned_checkpoints();
  if (o.state_backend == "rocksdb")
    env.set_state_backend(StateBackend::rocksdb(o.state_backend_dir));
  env.set_tolerable_checkpoint_failure_number(o.tolerable_failed_checkpoints);
  env.set_checkpoint_timeout(*checkpoint_timeout);
  // Each failed checkpoint is said when it fails (and shown by the live
  // view), not only in the summary.
  env.set_checkpoint_failure_listener([sh, live = live.get(), rec = recorder.get()](
                                          int64_t id, const std::string& error) {
    {
      internal::MutexLock lock(&sh->err_mu);
      *sh->err << "tidemark: checkpoint failed: " << error << "\n" << std::flush;
    }
    // The live view's feed, and its count of "checkpoint_failed" events.
    if (live != nullptr) {
      live->Publish(LiveEvent{"checkpoint_failed",
                              rec->NowMs(),
                              -1,
                              -1,
                              {{"checkpoint", absl::StrCat(id)}, {"error", JsonString(error)}}});
    }
  });
  if (!o.restore.empty()) env.restore_from(o.restore);
  env.set_rank_settings(RankSettings(o));
  env.set_restart_strategy(*restart_strategy);
  // Each restart is said when it is decided, and shown by the live view.
  // Under mpirun every rank is told of every restart (rank 0 decides them
  // for all, api/environment.cc): rank 0 says it.
  env.set_restart_listener([sh, live = live.get(), rec = recorder.get(), rank = cluster.rank](
                               int64_t restart, const std::string& cause) {
    if (rank == 0) {
      internal::MutexLock lock(&sh->err_mu);
      *sh->err << "tidemark: restarting (" << restart << "): " << cause << "\n" << std::flush;
    }
    if (live != nullptr) {
      live->Publish(LiveEvent{"restart",
                              rec->NowMs(),
                              -1,
                              -1,
                              {{"restart", absl::StrCat(restart)}, {"cause", JsonString(cause)}}});
    }
  });

  using Spec = LineSource<CliRecord>::Spec;
  Spec spec;
  if (!o.socket.empty()) {
    spec.kind = Spec::Kind::kSocket;
    spec.host = host;
    spec.port = port;
    spec.max_retries = o.socket_retries;
    spec.on_retry = [sh](const std::string& msg) {
      internal::MutexLock lock(&sh->err_mu);
      *sh->err << "tidemark: " << msg << "\n" << std::flush;
    };
  } else {
    spec.kind = o.source_parallelism > 0 ? Spec::Kind::kFileSplits : Spec::Kind::kFilePerSubtask;
    spec.paths = inputs;
  }
  spec.rate_per_second = rate;
  const bool skip = o.bad_lines == "skip";
  auto parser = [sh, skip, inputs, skip_header = o.skip_header, rec_counter = recorder.get()](
                    std::string_view line, const LineLocation& where) -> std::optional<CliRecord> {
    rec_counter->OnLineRead();  // the timeline's records axis
    if (skip_header && where.line_number == 1) {
      sh->headers.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
    DroppedLine dropped = DroppedLine::kNone;
    auto r = sh->format.Parse(absl::string_view(line.data(), line.size()), &dropped);
    if (r.ok()) {
      if (dropped == DroppedLine::kComment) sh->comments.fetch_add(1, std::memory_order_relaxed);
      if (dropped == DroppedLine::kFiltered) sh->filtered.fetch_add(1, std::memory_order_relaxed);
      std::optional<CliRecord> rec = *std::move(r);
      if (rec) {
        // The input it came from (standard input, "-", reads as "<stdin>").
        for (size_t i = 0; i < inputs.size(); ++i) {
          if (where.source == (inputs[i] == "-" ? std::string_view("<stdin>") : inputs[i])) {
            rec->source = static_cast<int>(i);
            break;
          }
        }
      }
      return rec;
    }
    if (!skip) {
      throw std::runtime_error(absl::StrCat(std::string(where.source), ":", where.line_number, ": ",
                                            r.status().message(), ": '", Quoted(line), "'"));
    }
    sh->skipped.fetch_add(1, std::memory_order_relaxed);
    internal::MutexLock lock(&sh->dead_mu);
    if (sh->dead_letter.is_open()) {
      sh->dead_letter << where.source << ":" << where.line_number << ": " << r.status().message()
                      << ": " << line << "\n";
    }
    return std::nullopt;
  };
  // A line over --max-line-length is rejected by the reader as soon as it
  // passes the limit, without being buffered, under the same policy.
  spec.max_line_length = o.format.max_line_length;
  spec.on_over_long = [sh, skip](const OverLongLine& l) {
    if (!skip) throw std::runtime_error(l.Describe());
    sh->skipped.fetch_add(1, std::memory_order_relaxed);
    internal::MutexLock lock(&sh->dead_mu);
    if (sh->dead_letter.is_open()) {
      sh->dead_letter << l.where.source << ":" << l.where.line_number << ": " << l.Message() << ": "
                      << l.QuotedPrefix() << "\n";
    }
  };
  DataStream<CliRecord> lines = env.read_lines<CliRecord>(spec, parser, "input");
  const int source_p = !o.socket.empty()          ? 1
                       : o.source_parallelism > 0 ? o.source_parallelism
                                                  : static_cast<int>(inputs.size());
  if (o.source_parallelism > 0) lines = lines.set_parallelism(source_p);
  // Under mpirun standard input reaches rank 0 only (the other ranks read
  // /dev/null): a stdin input read on another rank lost its records without
  // a word.
  if (cluster.distributed() && o.socket.empty()) {
    const auto dash = std::find(inputs.begin(), inputs.end(), "-");
    if (dash != inputs.end()) {
      if (o.source_parallelism > 0) {
        return fail(
            "--input=- with --source-parallelism under mpirun: its split may be read on any rank, "
            "and standard input reaches rank 0 only (give a file)");
      }
      const int subtask = static_cast<int>(dash - inputs.begin());
      const int rank = placement(PlacementRequest{"", 0, subtask, source_p, cluster.size});
      if (rank != 0) {
        return fail(
            absl::StrCat("--input=-: under mpirun standard input reaches rank 0 only, and input ",
                         subtask + 1, " is read by source subtask ", subtask, " on rank ", rank,
                         " (list --input=- first, or give a file)"));
      }
    }
  }
  if (cluster.distributed()) {
    // Traces and the timeline name the rank of every subtask and channel.
    recorder->SetCluster(
        cluster.rank,
        [=](int s) {
          return placement(PlacementRequest{"", 0, s, source_p, cluster.size});
        },
        [=, p = o.parallelism](int s) {
          return placement(PlacementRequest{"", 0, s, p, cluster.size});
        });
  }

  WatermarkStrategy<CliRecord> strategy =
      WatermarkStrategy<CliRecord>::for_generator(MakeCliGeneratorFactory(*wm, recorder.get()))
          .with_timestamp_assigner(
              [](const CliRecord& r, Timestamp) { return r.is_marker() ? r.marker : r.ts; });
  if (idleness) strategy = strategy.with_idleness(*idleness);
  if (drift) strategy = strategy.with_watermark_alignment("sources", *drift, update_interval);
  if (per_record) strategy = strategy.with_periodic_emit_per_record();
  if (flush_after) strategy = strategy.with_flush_after(*flush_after);
  OutputTag<CliRecord> future_tag("future");
  if (max_future_skew) strategy = strategy.with_max_future_skew(*max_future_skew, future_tag);
  // Splits (several files in one subtask) get a generator each, as Flink's
  // fromSource does, unless --per-split-watermarks=false.
  const bool per_split = o.source_parallelism > 0 && o.per_split_watermarks;
  auto with_ts =
      lines
          .transform<CliRecord>(
              "Timestamps/Watermarks",
              [strategy, per_split]() -> std::unique_ptr<OneInputOperator<CliRecord, CliRecord>> {
                return std::make_unique<internal::TimestampsAndWatermarksOperator<CliRecord>>(
                    strategy, per_split);
              })
          .set_parallelism(source_p);
  // At the source's parallelism, chained to it (Flink's fromSource); marked
  // so that explain() would warn if that ever changed, and, aligned, where
  // alignment has nothing to pause (one source subtask).
  {
    internal::StreamNode& node =
        internal::StreamAccess::Node(env, internal::StreamAccess::Id(with_ts));
    node.assigns_timestamps = true;
    node.in_source_chain = true;
    node.aligned = strategy.aligned();
    node.alignment_group = strategy.alignment_group();
  }
  if (o.backlog_watermark) {
    with_ts = with_ts
                  .transform<CliRecord>(
                      "Backlog",
                      [unpaced_file = o.socket.empty() && rate <= 0,
                       rate]() -> std::unique_ptr<OneInputOperator<CliRecord, CliRecord>> {
                        return std::make_unique<BacklogOperator>(unpaced_file, rate);
                      })
                  .set_parallelism(source_p);
  }
  auto stamped = with_ts.filter(DropMarkers()).name("Drop markers").set_parallelism(source_p);
  auto keyed = stamped.key_by(&KeyOf);

  std::optional<OutputTag<CliRecord>> late_tag;
  if (o.late == "side") late_tag.emplace("late");
  DataStream<CliResult> results = [&]() {
    switch (window->kind) {
      case WindowSpec::Kind::kTumbling:
        return BuildWindows(keyed, TumblingEventTimeWindows::of(window->size, window->offset),
                            *lateness, late_tag, sh, o.local_aggregation);
      case WindowSpec::Kind::kSliding:
        return BuildWindows(
            keyed, SlidingEventTimeWindows::of(window->size, window->slide, window->offset),
            *lateness, late_tag, sh, o.local_aggregation);
      case WindowSpec::Kind::kSession:
        break;
    }
    return BuildWindows(keyed, EventTimeSessionWindows::with_gap(window->gap), *lateness, late_tag,
                        sh);
  }();
  results = results.name("window").set_parallelism(o.parallelism);
  // Across ranks the results are printed once, by one sink subtask on rank 0
  // (their records travel there like any other), unless each rank writes its
  // own (--output-per-rank).
  const int print_p = cluster.distributed() && o.output_per_rank.empty() ? 1 : o.parallelism;
  // With --output-dir the results go to committed files (JSON lines, as
  // --output=jsonl prints them); the counting and the timeline stay here.
  const bool to_files = !o.output_dir.empty();
  auto json = std::make_shared<Shared>();
  json->format = sh->format;
  json->aggregate = sh->aggregate;
  json->output = OutputFormat::kJsonl;
  json->parallelism = sh->parallelism;
  if (to_files) {
    results.sink_to_files(
        o.output_dir, [json](const CliResult& r) { return FormatResult(*json, r); },
        "results to files", "part");
  }
  results
      .add_sink(
          [sh, to_files](CliResult&& r) {
            sh->fired.fetch_add(1, std::memory_order_relaxed);
            if (!to_files) sh->printer->Print(FormatResult(*sh, r));
            absl::StatusOr<AggregateNumber> sum = AggregateValue(AggregateKind::kSum, r.acc);
            sh->recorder->OnFiring(
                TimelineEvent::Firing(r.subtask, r.key, r.start, r.end, r.watermark, r.firing,
                                      absl::StrCat("count ", r.acc.count, ", sum ",
                                                   sum.ok() ? sum->ToString() : "out of range")));
          },
          "print")
      .set_parallelism(print_p);
  if (late_tag) {
    if (to_files) {
      results.get_side_output(*late_tag)
          .sink_to_files(
              o.output_dir,
              [](const CliRecord& r) {
                return absl::StrCat("{\"kind\":\"late\",", JsonField("key", r.key),
                                    ",\"timestamp\":", r.ts, ",", JsonField("line", r.line), "}");
              },
              "late to files", "late")
          .set_parallelism(o.parallelism);
    }
    results.get_side_output(*late_tag)
        .add_sink(
            [sh, to_files](CliRecord&& r) {
              sh->late.fetch_add(1, std::memory_order_relaxed);
              // The window subtask that sent it on (its key's).
              const int subtask =
                  SubtaskForKey(r.key, DefaultMaxParallelism(sh->parallelism), sh->parallelism);
              if (to_files) {
                // Written by the file sink.
              } else if (sh->output == OutputFormat::kJsonl) {
                sh->printer->Print(absl::StrCat("{\"kind\":\"late\",", JsonField("key", r.key),
                                                ",\"timestamp\":", r.ts, ",",
                                                JsonField("line", r.line), "}"));
              } else {
                // Flink's print("Side") after the window: "Side:<subtask>> "
                // above parallelism 1, as the results carry "<subtask>> ".
                sh->printer->Print(sh->parallelism > 1
                                       ? absl::StrCat("Side:", subtask + 1, "> ", r.line)
                                       : absl::StrCat("Side> ", r.line));
              }
              sh->recorder->OnLate(TimelineEvent::Late(subtask, r.key, r.ts, r.line));
            },
            "late")
        .set_parallelism(print_p);
  }

  if (max_future_skew) {
    // Records dated more than --max-future-skew ahead of the clock: neither
    // windows nor watermarks see them; printed as late records are.
    auto future = with_ts.get_side_output(future_tag);
    if (to_files) {
      future
          .sink_to_files(
              o.output_dir,
              [](const CliRecord& r) {
                return absl::StrCat("{\"kind\":\"future\",", JsonField("key", r.key),
                                    ",\"timestamp\":", r.ts, ",", JsonField("line", r.line), "}");
              },
              "future to files", "future")
          .set_parallelism(source_p);
    }
    future
        .add_sink(
            [sh, to_files](CliRecord&& r) {
              sh->future.fetch_add(1, std::memory_order_relaxed);
              if (to_files) {
                // Written by the file sink.
              } else if (sh->output == OutputFormat::kJsonl) {
                sh->printer->Print(absl::StrCat("{\"kind\":\"future\",", JsonField("key", r.key),
                                                ",\"timestamp\":", r.ts, ",",
                                                JsonField("line", r.line), "}"));
              } else {
                sh->printer->Print(absl::StrCat("Future> ", r.line));
              }
            },
            "future")
        .set_parallelism(cluster.distributed() && o.output_per_rank.empty() ? 1 : source_p);
  }

  if (o.explain) {
    absl::StatusOr<std::string> plan = env.ExplainPlan();
    if (!plan.ok()) return fail(std::string(plan.status().message()));
    if (cluster.rank == 0) out << *plan << std::flush;  // every rank has the same
    return 0;
  }

  std::optional<SignalWatcher> signals;
  if (o.handle_signals) {
    signals.emplace(savepoint_signal, stop_signal, o.savepoint_dir, o.drain);
    signals->Attach(&env);
  }
  // The live view's job graph: the plan the job is about to run.
  if (live) {
    if (absl::StatusOr<internal::PhysicalPlan> plan = internal::StreamAccess::Plan(env); plan.ok())
      live->SetGraph(LiveGraphFromPlan(*plan));
  }
  JobClient job = env.execute_async("tidemark run");
  if (signals) {
    signals->Attach(&env);  // a signal during the start cancels it now
    signals->AttachClient(job);
  }
  if (live) {
    live->SetMetricsSource([job] { return job.metrics(); });
    live->SetCheckpointSource([job] { return job.checkpoints(); });
  }
  JobResult result = job.wait();
  // What remains, in a function: the live view may linger after it.
  auto finish = [&]() -> int {
    for (const std::string& p : result.checkpoints.restore_problems)
      err << "tidemark: passed over a damaged checkpoint: " << p << "\n";
    for (const std::string& n : result.checkpoints.notices) err << "tidemark: " << n << "\n";
    if (signals) {
      signals->Attach(nullptr);
      signals->AttachClient(std::nullopt);
    }
    int signal = signals ? signals->signal() : 0;
    const bool cancelled = absl::IsCancelled(result.status);
    std::vector<TimelineEvent> events = recorder->events();
    // Across ranks, when the job finished or was cancelled (a failure or a
    // cancel on one rank reaches the others with its code), one collective
    // with a deadline takes every rank's counts and timeline events to rank
    // 0 and agrees on a signal: a signal may reach one rank only (mpirun
    // gives each rank a process group of its own), and every rank then ends
    // as interrupted by it (rank 0 alone signalled waited for ever in a
    // gather the others never reached).  A rank that does not come within
    // the deadline leaves the others' counts as they are.
    if (cluster.distributed() && (result.ok() || cancelled)) {
      std::string mine;
      internal::StateWriter w(&mine);
      w.PutI64(signal);
      for (const auto* c : {&sh->fired, &sh->late, &sh->skipped, &sh->comments, &sh->filtered,
                            &sh->future, &sh->headers})
        w.PutI64(c->load());
      mine += EncodeTimelineEvents(events);
      std::vector<std::string> all;
      absl::StatusOr<std::string> agreed = internal::DecideAtRank0(
          mine,
          [&all](const std::vector<std::string>& reports) {
            all = reports;
            for (const std::string& bytes : reports) {
              internal::StateReader r(bytes);
              const int64_t s = r.GetI64();
              if (r.ok() && s != 0) return std::to_string(s);
            }
            return std::string("0");
          },
          std::chrono::seconds(60));
      int any = 0;
      if (agreed.ok() && absl::SimpleAtoi(*agreed, &any) && signal == 0) signal = any;
      if (cluster.rank == 0 && !all.empty()) {
        events.clear();
        for (auto* c : {&sh->fired, &sh->late, &sh->skipped, &sh->comments, &sh->filtered,
                        &sh->future, &sh->headers})
          c->store(0);
        for (const std::string& bytes : all) {
          internal::StateReader r(bytes);
          r.GetI64();  // the signal
          for (auto* c : {&sh->fired, &sh->late, &sh->skipped, &sh->comments, &sh->filtered,
                          &sh->future, &sh->headers})
            c->fetch_add(r.GetI64());
          if (!r.ok() || !DecodeTimelineEvents(bytes.substr(r.position()), &events))
            return fail("the counts gathered from the ranks are damaged");
        }
        std::stable_sort(
            events.begin(), events.end(),
            [](const TimelineEvent& a, const TimelineEvent& b) { return a.t_ms < b.t_ms; });
      }
    }
    // Interrupted: the job was cancelled by the signal (a job that had failed
    // already reports its error).
    const bool interrupted = signal != 0 && (result.ok() || cancelled);
    if (live) {
      live->SetMetricsSource([m = result.metrics] { return m; });
      live->SetCheckpointSource([c = result.checkpoints] { return c; });
      live->SetEnded(interrupted   ? "interrupted"
                     : result.ok() ? "finished"
                                   : "failed",
                     result.ok() || interrupted ? "" : std::string(result.status.message()));
    }
    if (timeline_page.is_open()) {
      TimelineOptions topt;
      topt.by_records = o.timeline_axis == "records";
      timeline_page << RenderTimelineHtml(events, "tidemark run: watermark timeline",
                                          sh->format.zone(), topt);
      timeline_page.close();
      if (!timeline_page) return fail(absl::StrCat("cannot write timeline ", o.timeline));
    }
    if (!result.ok() && !interrupted) {
      std::string message(result.status.message());
      // The print task is the one difference a user cannot see (flags equal).
      if (!o.restore.empty() && o.output_dir.empty() && o.output_per_rank.empty() &&
          absl::StrContains(message, "it was taken of another job")) {
        absl::StrAppend(&message,
                        " (printing to standard output, the command line prints from a task of "
                        "its own under mpirun and chains printing to the window in one process: "
                        "a savepoint or checkpoint taken under mpirun restores under mpirun, one "
                        "taken in one process in one process; with --output-dir either restores "
                        "in both)");
      }
      return fail(message);
    }
    if (interrupted) {
      err << "tidemark: interrupted (" << SignalName(signal) << "): " << LeftOpen(result) << "\n";
    }
    if (o.summary) {
      // Lines the sources read, less the marker lines (no records).
      int64_t records = -result.CounterTotal(kWatermarkMarkersCounter);
      for (const auto& m : result.metrics)
        if (m.task_name.rfind("Source", 0) == 0) records += m.records_in;
      err << "tidemark: " << Count(records, "record", "records") << ", "
          << Count(sh->fired.load(), "window result", "window results") << ", " << sh->late.load()
          << " late (side output), " << result.CounterTotal("numLateRecordsDropped")
          << " late dropped, " << Count(sh->skipped.load(), "bad line", "bad lines") << " skipped";
      if (!o.comments.empty())
        err << ", " << Count(sh->comments.load(), "comment line", "comment lines") << " skipped";
      if (o.skip_header)
        err << ", " << Count(sh->headers.load(), "header line", "header lines") << " skipped";
      if (max_future_skew) err << ", " << sh->future.load() << " future (side output)";
      // Records no result will show, said only when there are some: in no
      // window (a sliding window's gap), in windows that never fired (a
      // processing-time or count window at the end of the input).
      if (const int64_t n = result.CounterTotal(internal::kNumRecordsInNoWindow); n > 0)
        err << ", " << n << " in no window";
      // (Interrupted, the line above says them already.)
      if (const int64_t n = result.CounterTotal(internal::kWindowsNotFiredAtClose);
          n > 0 && !interrupted)
        err << ", " << Count(n, "window", "windows") << " not fired";
      if (!o.format.where.empty())
        err << ", " << Count(sh->filtered.load(), "line", "lines") << " filtered out";
      if (format_options.markers) {
        err << ", "
            << Count(result.CounterTotal(kWatermarkMarkersCounter), "watermark marker",
                     "watermark markers");
      }
      if (!o.timeline.empty()) err << ", timeline written to " << o.timeline;
      if (result.checkpoints.enabled) {
        const CheckpointSummary& c = result.checkpoints;
        err << ", " << Count(c.completed, "checkpoint", "checkpoints");
        if (c.completed > 0) {
          // The last one by its directory's name (after a restore the ids go
          // on from the restored one's, so "last 2" read as a count); kept in
          // memory (savepoints without --checkpoint-dir), by its id.
          err << absl::StrFormat(" (last %s%d: %d bytes, %.1f ms; longest alignment %.1f ms)",
                                 o.checkpoint_dir.empty() ? "in memory, id " : "chk-", c.last_id,
                                 c.last_size_bytes, c.last_duration_ms, c.max_alignment_ms);
        }
        if (c.failed > 0) err << ", " << c.failed << " failed (" << c.last_error << ")";
        if (c.restored_id >= 0) {
          const bool from_savepoint =
              std::filesystem::path(c.restored_path).filename().string().rfind("savepoint-", 0) ==
              0;
          err << ", restored from " << (from_savepoint ? "savepoint " : "checkpoint ")
              << c.restored_id << " (" << c.restored_path << ")";
        }
        for (const std::string& sp : c.savepoints) err << ", savepoint " << sp;
        if (!c.stopped_with_savepoint.empty())
          err << ", stopped with savepoint " << c.stopped_with_savepoint;
        if (c.at_most_once) err << ", at-most-once (the input cannot be replayed)";
      }
      if (result.restarts.num_restarts > 0) {
        err << ", numRestarts " << result.restarts.num_restarts
            << " (last cause: " << result.restarts.last_failure
            << "; records are the last attempt's, read from its restore point; window results "
               "and late records are every attempt's, those replayed after a restore included)";
      }
      err << "\n";
      const std::string user_metrics = FormatUserMetrics(result.metrics);
      if (!user_metrics.empty()) err << "tidemark: user metrics:\n" << user_metrics;
    }
    if (interrupted) return 128 + signal;
    return 0;
  };
  const int code = finish();
  if (server) {
    if (serve_linger && serve_linger->count() > 0) {
      err << "tidemark: the live view stays up for " << o.serve_linger << " at " << server->url()
          << " (--serve-linger)\n"
          << std::flush;
      const auto deadline = std::chrono::steady_clock::now() + *serve_linger;
      const int before = signals ? signals->signal() : 0;
      while (std::chrono::steady_clock::now() < deadline &&
             (!signals || signals->signal() == before))
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a signal ends it early
    }
    server->Stop();
  }
  return code;
}

}  // namespace tidemark::cli
