// tools/cli/trace.h
//
// What `tidemark run --trace=watermarks` prints and `--timeline=FILE.html`
// draws.  A TraceRecorder is the job's WatermarkListener: it sees every
// watermark a source subtask sends and every change on every input channel of
// the window subtasks (tasks whose name starts with "window"; with the aligned minimum and the
// channel holding it back), plus, from the CLI's own operators, every record's watermark line and
// every window firing and late record.  It prints them as they happen (text or
// JSON Lines) and keeps them, stamped with processing time, for the timeline:
// every one up to TimelineBound::exact_events, then what a TimelineSummary
// keeps of them (bounded memory however long the run).
//
// Thread safety: all methods may be called from any subtask thread.
#ifndef TM_TOOLS_CLI_TRACE_H_
#define TM_TOOLS_CLI_TRACE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark::cli {

// Writes whole lines to a stream, one at a time.
class LinePrinter {
 public:
  // `to_rank0`: on a rank other than 0 under mpirun, lines go to rank 0,
  // which prints them whole (internal::ForwardLineToRank0), while a job runs.
  explicit LinePrinter(std::ostream* out, bool to_rank0 = false) : out_(out), to_rank0_(to_rank0) {}
  void Print(const std::string& line);

 private:
  const bool to_rank0_ = false;
  internal::Mutex mu_;
  std::ostream* const out_ ABSL_PT_GUARDED_BY(mu_);
};

enum class OutputFormat { kText, kJsonl };

struct TimelineEvent {
  // kSourcePause: watermark alignment paused (idle = true) or resumed a source
  // subtask; watermark: its watermark, aligned: the max allowed.
  enum class Kind {
    kSourceWatermark,
    kSourceIdle,
    kChannel,
    kFiring,
    kLate,
    kBarrier,
    kSourcePause,
    kGeneralized
  };
  Kind kind;
  double t_ms;  // processing time since the job started
  int subtask = 0;
  int channel = -1;
  Timestamp watermark = kMinTimestamp;  // source / channel watermark, or the firing watermark
  Timestamp aligned = kMinTimestamp;
  bool idle = false;
  int holding = -1;
  // kChannel: whether the channel counts in the aligned minimum (the valve's
  // status; false while a channel back from idleness catches up, and while
  // it is idle).
  bool channel_aligned = true;
  // firings and late records
  std::string key;
  Timestamp start = 0, end = 0, ts = 0;
  std::string firing;  // on_time, late, end_of_input
  std::string value;
  // barriers: the checkpoint, whether a source sent it (else a window subtask
  // aligned it), and how long the alignment took
  int64_t checkpoint = -1;
  bool source = false;
  bool gw_input = false;  // kGeneralized (below); here, where it takes no room
  double alignment_ms = 0;
  // Under mpirun: the rank of the subtask, and of a channel's upstream
  // subtask (-1 on one rank).
  int rank = -1;
  int channel_rank = -1;
  // Lines read so far by this process's sources, all together, when the
  // event was kept (the timeline's records axis).
  int64_t records = 0;
  // How many events this one stands for (1 unless a TimelineSummary merged
  // some): kFiring, kLate, kBarrier: that many marks; kSourceWatermark: that
  // many watermarks; kSourceIdle / kSourcePause / kChannel with idle = true
  // (the start of a stretch): that many idle or paused stretches.
  int64_t count = 1;
  // kGeneralized: a generalized watermark (docs/generalized-watermarks.md)
  // that `gw->task`'s subtask sent (gw_input false) or that its input
  // combined and passed on (gw_input true; `channel`: the channel whose
  // arrival made it).  A bool's value is 0 or 1.  What does not change from
  // one watermark of a lane to the next (the task, the identifier and the
  // declaration: its combination function, "min", "max", "and" or "or", and
  // whether it waits for every channel) is shared between the events (the
  // recorder keeps one per task and declaration), so an event stays as small
  // as before but for `gw_value` and a pointer.  Past the bound a summary
  // keeps, per lane (task, subtask, identifier, direction), a long's
  // first/lowest/highest/last point per bucket (`count`: the watermarks it
  // stands for) and a bool's true stretches.
  struct Generalized {
    std::string task;
    std::string identifier;
    std::string function;
    bool is_bool = false;
    bool wait_for_all = false;
  };
  std::shared_ptr<const Generalized> gw;  // kGeneralized only
  int64_t gw_value = 0;

  // A window firing, for TraceRecorder::OnFiring (which sets t_ms): the
  // window [start, end) of `key` at `subtask`, the watermark it fired at, how
  // (on_time, late, end_of_input), and the result as text.
  static TimelineEvent Firing(int subtask, std::string key, Timestamp start, Timestamp end,
                              Timestamp watermark, std::string firing, std::string value);
  // A late record, for TraceRecorder::OnLate: its key, timestamp, the window
  // subtask that dropped it, and the record as text.
  static TimelineEvent Late(int subtask, std::string key, Timestamp ts, std::string value);
};

// The events as bytes, for gathering every rank's at rank 0.
std::string EncodeTimelineEvents(const std::vector<TimelineEvent>& events);
bool DecodeTimelineEvents(std::string_view bytes, std::vector<TimelineEvent>* events);

// Sees every event a TraceRecorder makes (kept for the timeline or not), on
// the thread that made it: implementations must be thread-safe and quick.
class TimelineObserver {
 public:
  virtual ~TimelineObserver() = default;
  virtual void OnTimelineEvent(const TimelineEvent& e) = 0;
};

// The recorder's bound (docs/timeline.md, "Bounded size"): the events are
// kept as they come until there are `exact_events` (a power of two: the
// vector's last doubling; about 4 MB); then a TimelineSummary with at most
// `buckets` buckets along the page's horizontal axis takes over.
struct TimelineBound {
  size_t exact_events = 16384;
  size_t buckets = 2048;
};

// The timeline's events reduced, while they come, to what the page draws at
// its resolution (the page's own per-pixel downsampling, done while
// recording), in memory that does not grow with the run.  The axis (processing
// time, or records read) is cut into buckets of a width that doubles, merging
// neighbours in pairs, whenever an event falls past `buckets` of them (so at
// the end there are between buckets / 2 and buckets: with 2048, a bucket is at
// most a pixel of the 1020 px plot).  Per bucket it keeps:
//   - each watermark lane (a source subtask, an input channel, a window
//     subtask's aligned minimum): the first, lowest, highest and last point
//     (real events: a channel event is a point of its channel's lane and of the
//     aligned minimum), with how many watermarks the bucket held;
//   - marks, per window subtask (sources for their barriers) and kind (firing
//     on_time / late / end_of_input, late record, barrier), in buckets two
//     wide (the page's smallest cell is 2 px): events at the same height (the
//     window's end, the late record's timestamp) merge into one with a
//     `count`; at most four per bucket, the closest heights merging first,
//     keeping the lowest and highest (and the firing with the earliest window
//     start, so the page's event-time range is the same);
//   - idle stretches (sources and channels) and alignment pauses as intervals:
//     one that starts in the bucket where the previous one ended continues it
//     (`count` stretches), so at most one per bucket.
// Every firing, late record, barrier, watermark and idle stretch is counted in
// the `count` of some event of Events().
class TimelineSummary {
 public:
  // `by_records`: the axis is TimelineEvent::records (else t_ms).
  TimelineSummary(bool by_records, size_t buckets);
  ~TimelineSummary();
  TimelineSummary(const TimelineSummary&) = delete;
  TimelineSummary& operator=(const TimelineSummary&) = delete;

  // The events in the order they came.
  void Add(const TimelineEvent& e);
  // What is kept, as events for RenderTimelineHtml, in order along the axis.
  std::vector<TimelineEvent> Events() const;
  // Bytes held (containers' capacities and strings' heap), and entries (points,
  // marks, stretches) kept.
  size_t RetainedBytes() const;
  size_t RetainedEntries() const;
  // The width of a bucket along the axis (ms or records).
  double bucket_width() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class TraceRecorder final : public WatermarkListener {
 public:
  TraceRecorder(LinePrinter* printer, OutputFormat format, bool print_trace, bool keep_events,
                absl::TimeZone zone);

  // WatermarkListener
  void OnInputChannel(const ChannelEvent& e) override;
  void OnOutputWatermark(const std::string& task, int subtask, Timestamp watermark) override;
  void OnOutputStatus(const std::string& task, int subtask, WatermarkStatus status) override;
  void OnSourceAlignment(const std::string& task, int subtask, bool paused, Timestamp watermark,
                         Timestamp max_allowed) override;
  // Per-split watermarks of a source subtask (--source-parallelism with
  // several files per subtask): printed in the trace, not kept.
  void OnSplitWatermark(const std::string& task, int subtask, const std::string& split,
                        Timestamp watermark, bool idle) override;
  // Generalized watermarks (docs/generalized-watermarks.md): one line each
  // in the trace, and kept for the timeline (TimelineEvent::Kind::kGeneralized).
  void OnGeneralizedWatermark(const std::string& task, int subtask, bool input, int channel,
                              const GeneralizedWatermark& w) override;
  // Checkpoint barriers: a source subtask sent one, or a window subtask
  // aligned one over its channels and snapshotted.
  void OnCheckpointBarrier(const std::string& task, int subtask, int64_t checkpoint_id,
                           int64_t alignment_ns) override;

  // The documents' per-record line: key, event time, max timestamp, watermark.
  void OnRecord(int source, const std::string& key, Timestamp ts, Timestamp max_ts,
                Timestamp watermark);
  void OnFiring(const TimelineEvent& e);  // kind kFiring
  void OnLate(const TimelineEvent& e);    // kind kLate

  // The events kept for the timeline: every one, or past the bound
  // (SetTimelineBound) what a TimelineSummary kept of them.
  std::vector<TimelineEvent> events() const;
  // What the timeline keeps in memory now: bytes and entries (events, or the
  // summary's points, marks and stretches), and whether the summary took over.
  size_t RetainedBytes() const;
  size_t RetainedEntries() const;
  bool summarizing() const;
  // The page's horizontal axis (--timeline-axis=records: lines read), which
  // the summary's buckets follow, and the bound.  Set before the job starts.
  void SetTimelineAxis(bool by_records) { by_records_ = by_records; }
  void SetTimelineBound(const TimelineBound& bound) { bound_ = bound; }
  // Processing time in ms since the start (a test's simulated clock when set).
  double NowMs() const;
  void SetClockForTesting(std::function<double()> now_ms) { clock_ = std::move(now_ms); }
  // A source read a line (any thread): counted for the records axis.
  void OnLineRead() { lines_read_.fetch_add(1, std::memory_order_relaxed); }
  // Every event also goes to `observer` (nullptr: none).  Set before the job
  // starts; it must outlive the job.
  void SetObserver(TimelineObserver* observer) { observer_ = observer; }

  // A job across MPI ranks: this process's rank, and the rank of a source
  // subtask and of a window subtask (a window's input channel c comes from
  // source subtask c).  Traces and the timeline then name them.
  void SetCluster(int rank, std::function<int(int)> source_rank,
                  std::function<int(int)> window_rank);

 private:
  void Keep(TimelineEvent e);
  std::string Time(Timestamp ts) const;
  // " (rank R)" for a subtask, "" on one rank.
  std::string RankOf(bool source, int subtask) const;

  int rank_ = -1;
  std::function<int(int)> source_rank_, window_rank_;

  LinePrinter* printer_;
  OutputFormat format_;
  bool print_trace_;
  bool keep_;
  TimelineObserver* observer_ = nullptr;
  absl::TimeZone zone_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> lines_read_{0};
  std::function<double()> clock_;
  bool by_records_ = false;
  TimelineBound bound_;
  mutable internal::Mutex mu_;
  std::vector<TimelineEvent> events_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<TimelineSummary> summary_ ABSL_GUARDED_BY(mu_);
  // The shared part of kGeneralized events, per (task, declaration).
  internal::Mutex gw_mu_;
  std::map<std::pair<std::string, const void*>, std::shared_ptr<const TimelineEvent::Generalized>>
      gw_info_ ABSL_GUARDED_BY(gw_mu_);
};

// A self-contained HTML page (inline SVG and script, no network) drawing, over
// processing time: each source subtask's watermark; for each window subtask,
// each input channel's watermark and the aligned minimum, idle stretches,
// window firings (on time / late / end of input), late records and
// checkpoint barriers (with their alignment time); with a legend and hover
// details.
//
// The page stays bounded whatever the run's length (docs/timeline.md): every
// idle/active change is drawn; the watermark lanes share a budget of
// kTimelinePointBudget points (each lane keeps the first point of each run of
// equal values and, past its share, the first, lowest, highest and last point
// per time bucket of at least a pixel); marks (firings, late records,
// barriers) that would be drawn within the same cell of a panel merge into one
// mark with `data-count`, the cell growing from 2 px until each panel has at
// most max(kTimelineMinMarksPerPanel, kTimelineMarkBudget / panels) marks.
inline constexpr size_t kTimelinePointBudget = 40000;
inline constexpr size_t kTimelineMarkBudget = 3000;
inline constexpr size_t kTimelineMinMarksPerPanel = 300;
//
// The horizontal axis is processing time since the start, or, with
// `by_records`, the number of lines the sources had read (so a file read in
// a millisecond spreads over the page).  Ticks fall on round values (1, 2 or
// 5 times a power of ten; on the event-time axis round seconds, minutes,
// hours); the legend names every kind of line, band and mark drawn, with
// swatches drawn as they are, and wraps to the page's width.
struct TimelineOptions {
  bool by_records = false;
};
std::string RenderTimelineHtml(const std::vector<TimelineEvent>& events, const std::string& title,
                               const absl::TimeZone& zone, const TimelineOptions& options = {});
// Round tick values in [lo, hi]: multiples of a step of 1, 2 or 5 times a
// power of ten, about `target` of them (at least two when lo < hi).
std::vector<double> NiceTicks(double lo, double hi, int target);
// The same for event time in milliseconds: steps of round durations (1, 2,
// 5, 10, 20, 50, 100, 200, 500 ms; 1, 2, 5, 10, 15, 30 s; 1, 2, 5, 10, 15,
// 30 min; 1, 2, 3, 6, 12 h; then days, 1, 2 or 5 times a power of ten).
std::vector<double> NiceTimeTicks(double lo_ms, double hi_ms, int target, double* step_ms);

// JSON output is always valid UTF-8 JSON (`tidemark help` says so):
// '"' and '\\' are escaped, control characters (U+0000..U+001F) and DEL are
// written as \b \f \n \r \t or \u00XX, valid UTF-8 is copied, and each
// maximal ill-formed subsequence of bytes (Unicode 15, section 3.9, "U+FFFD
// substitution of maximal subparts", what Java's decoder and so Flink produce
// for such input) becomes one \ufffd.

// JSON string literal for `s`, as above.
std::string JsonString(absl::string_view s);
// `"name":<JsonString(value)>`, followed, when `value` is not valid UTF-8 (so
// that some of it was replaced), by `,"name_hex":"<its bytes in lowercase
// hex>"`: two keys that differ only in invalid bytes stay distinguishable.
std::string JsonField(absl::string_view name, absl::string_view value);
// Whether `s` is well-formed UTF-8.
bool IsValidUtf8(absl::string_view s);

}  // namespace tidemark::cli

#endif  // TM_TOOLS_CLI_TRACE_H_
