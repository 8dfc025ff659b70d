// `tidemark demo`: the main job on an embedded input, in two scenes, each run
// twice: without and with watermark alignment (FLIP-182), and a summary of
// what alignment changed.
//
// Several generator source subtasks produce sensor readings for 20 keys, each
// on its own event-time speed (every reading moves subtask s's event time on
// by 1.0, 0.5, 1.5, ... times its share of real time, as a backlog being
// replayed at different speeds would), with up to 1.5 s of disorder and,
// rarely, a reading 6 s late.  Watermarks: bounded out-of-orderness 2 s,
// periodic every 200 ms, idleness 1 s.  key_by into tumbling 1 s event-time
// windows (sum), late records to a side output.
//
// Scene 1, drift: without alignment the fast sources run ahead of the slow one
// and the window operator keeps every window they opened until the slow one
// catches up, so the live (key, window) pairs grow with the run; with
// alignment (--alignment=500ms, the group's allowed drift) a source more than
// that ahead pauses, so the live windows stay within the drift: the peak of
// live pairs and of window state drops.
// Scene 2, idle return: the slowest source (subtask 1) goes quiet for a
// stretch in the middle, so idleness shows: once it is marked idle its
// channels stop holding the windows back, and when it comes back behind the
// others its readings are late.  Without alignment the others were seconds
// ahead when it went quiet, so nearly all it reads afterwards is late; with
// alignment they were within the drift, and they wait for it once it is back
// (an idle source leaves the alignment group's minimum, a returning one joins
// it again).
// A live progress line shows records/s and every subtask's watermark; a
// summary per run, the comparison, and the timeline pages' paths are printed.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/tidemark.h"
#include "tools/cli/run.h"

namespace tidemark::cli {
namespace {

constexpr Timestamp kBase = 1767225600000;  // 2026-01-01 00:00:00 UTC
constexpr int kKeys = 20;

struct Reading {
  std::string key;
  Timestamp ts = 0;
  double value = 0;
};

class DemoSource final : public Source<Reading> {
 public:
  DemoSource(int64_t duration_ms, double rate, bool idle_return)
      : duration_ms_(duration_ms), rate_(rate), idle_return_(idle_return) {}
  void Open(const SourceContext& ctx) override {
    subtask_ = ctx.subtask_index;
    // Scene 2: the slowest source goes quiet: once it is idle it stops
    // holding the windows back, and when it comes back its readings are late.
    quiet_ = idle_return_ && ctx.parallelism > 1 && subtask_ == 1;
    speed_ = 1.0 + 0.5 * ((subtask_ % 3) == 1 ? -1 : (subtask_ % 3) == 2 ? 1 : 0);
    clock_ = ctx.clock;
    start_ = clock_->NowMillis();
    pacer_ = RatePacer(rate_, start_);
    rng_.seed(1234 + subtask_);
  }
  PollStatus Poll(SourceOutput<Reading>& out, size_t budget) override {
    const int64_t elapsed = clock_->NowMillis() - start_;
    if (elapsed >= duration_ms_) return PollStatus::kEndOfInput;
    if (quiet_ && elapsed >= duration_ms_ * 3 / 10 && elapsed < duration_ms_ * 6 / 10) {
      retry_ = start_ + duration_ms_ * 6 / 10;
      return PollStatus::kNothingAvailable;
    }
    const Timestamp now = start_ + elapsed;
    // Event time moves with the readings emitted, not with the clock: a
    // source that pauses (alignment) or goes quiet falls behind.
    const double ms_per_reading = 1000.0 / rate_ * speed_;
    int64_t due = pacer_.Allowance(now);
    if (due > static_cast<int64_t>(rate_ / 20)) {
      // More than 50 ms behind its pace: the source was paused (alignment)
      // or starved of CPU.  It goes on at its pace from now rather than
      // replaying what it missed in one burst, which would carry its event
      // time far past the drift before the next alignment check.
      pacer_ = RatePacer(rate_, now);
      due = pacer_.Allowance(now);
    }
    if (due <= 0) {
      retry_ = pacer_.NextPollAt(now);
      return PollStatus::kNothingAvailable;
    }
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(budget), due);
    std::uniform_int_distribution<int> disorder(0, 1500);
    std::uniform_int_distribution<int> rare(0, 4999);
    for (int64_t i = 0; i < n; ++i, ++emitted_) {
      Reading r;
      r.key = absl::StrCat("sensor-", (emitted_ * 7 + subtask_) % kKeys);
      Timestamp ts = kBase +
                     static_cast<Timestamp>(static_cast<double>(emitted_) * ms_per_reading) -
                     disorder(rng_);
      if (rare(rng_) == 0) ts -= 6000;  // a very late reading
      r.ts = ts;
      r.value = 1 + (emitted_ % 10);
      out.CollectWithTimestamp(std::move(r), ts);
    }
    pacer_.Emitted(n);
    if (n == due) {  // all that is due went out: sleep until the next chunk
      retry_ = pacer_.NextPollAt(now);
      return PollStatus::kNothingAvailable;
    }
    return PollStatus::kMoreAvailable;
  }
  Timestamp RetryAt() const override { return retry_; }

 private:
  int64_t duration_ms_;
  double rate_;
  bool idle_return_;
  int subtask_ = 0;
  bool quiet_ = false;
  double speed_ = 1;
  const Clock* clock_ = nullptr;
  Timestamp start_ = 0;
  Timestamp retry_ = kMaxTimestamp;
  RatePacer pacer_;
  int64_t emitted_ = 0;
  std::mt19937 rng_;
};

struct Sum {
  std::string key;
  Timestamp start = 0, end = 0;
  Timestamp watermark = kMinTimestamp;
  int subtask = 0;
  bool late = false;
  double sum = 0;
  int64_t count = 0;
};

struct SumAgg {
  Sum create_accumulator() const { return {}; }
  Sum add(const Reading& r, Sum s) const {
    s.sum += r.value;
    s.count += 1;
    return s;
  }
  Sum get_result(const Sum& s) const { return s; }
  Sum merge(Sum a, const Sum& b) const {
    a.sum += b.sum;
    a.count += b.count;
    return a;
  }
};

std::string Short(Timestamp ts) {
  if (ts == kMinTimestamp) return "   -    ";
  if (ts == kMaxTimestamp) return "  end   ";
  return absl::FormatTime("%H:%M:%E1S", absl::FromUnixMillis(ts), absl::UTCTimeZone());
}

}  // namespace

namespace {

// What one run of the demo job did.
struct DemoRun {
  bool ok = false;
  int64_t records = 0;
  int64_t fired = 0;
  int64_t late = 0;
  int64_t dropped = 0;
  int64_t peak_live = 0;   // live (key, window) pairs, the window subtasks' peaks summed
  int64_t peak_bytes = 0;  // their state bytes at those peaks
  int64_t pauses = 0;      // alignment pauses of the source subtasks
  int64_t paused_ms = 0;
  double seconds = 0;
};

// Runs the job once; `drift` > 0: with watermark alignment; `idle_return`:
// scene 2 (the slowest source goes quiet in the middle).
DemoRun RunDemo(const DemoOptions& o, int64_t ms, Duration drift, bool idle_return,
                const std::string& timeline, std::ostream& out, std::ostream& err) {
  DemoRun run;
  LinePrinter printer(&out);
  auto recorder = std::make_shared<TraceRecorder>(&printer, OutputFormat::kText, false, true,
                                                  absl::UTCTimeZone());
  StreamExecutionEnvironment env;
  env.set_parallelism(o.parallelism);
  env.set_watermark_listener(recorder);
  auto strategy = WatermarkStrategy<Reading>::for_bounded_out_of_orderness(std::chrono::seconds(2))
                      .with_idleness(std::chrono::seconds(1));
  if (drift.count() > 0)
    strategy = strategy.with_watermark_alignment("demo", drift, std::chrono::milliseconds(100));
  auto readings =
      env.add_source<Reading>(
             [ms, idle_return] { return std::make_unique<DemoSource>(ms, 20000.0, idle_return); },
             "demo generator")
          .set_parallelism(o.sources)
          .assign_timestamps_and_watermarks(strategy)
          .set_parallelism(o.sources);
  OutputTag<Reading> late_tag("late");
  std::atomic<int64_t> fired{0}, late{0};
  auto sums = readings.key_by([](const Reading& r) { return r.key; })
                  .window(TumblingEventTimeWindows::of(std::chrono::seconds(1)))
                  .side_output_late_data(late_tag)
                  .aggregate(SumAgg{},
                             [](const std::string& key, const TimeWindow& w, const Sum& s,
                                WindowContext& ctx, Collector<Sum>& c) {
                               Sum r = s;
                               r.key = key;
                               r.watermark = ctx.current_watermark();
                               r.subtask = ctx.subtask_index();
                               r.late = ctx.fired_by_element();
                               r.start = w.start;
                               r.end = w.end;
                               c.collect(std::move(r));
                             })
                  .name("window");
  TraceRecorder* rec = recorder.get();
  sums.add_sink([&fired, rec](Sum&& s, Timestamp) {
    fired.fetch_add(1, std::memory_order_relaxed);
    rec->OnFiring(
        TimelineEvent::Firing(s.subtask, s.key, s.start, s.end, s.watermark,
                              s.watermark == kMaxWatermark ? "end_of_input"
                              : s.late                     ? "late"
                                                           : "on_time",
                              absl::StrCat("sum ", s.sum, " over ", s.count, " readings")));
  });
  const int p = o.parallelism;
  sums.get_side_output(late_tag).add_sink([&late, rec, p](Reading&& r) {
    late.fetch_add(1, std::memory_order_relaxed);
    rec->OnLate(TimelineEvent::Late(SubtaskForKey(r.key, DefaultMaxParallelism(p), p), r.key, r.ts,
                                    absl::StrCat("value ", r.value)));
  });

  out << "tidemark demo: " << o.sources << " sources (event-time speeds differ"
      << (idle_return ? "; the slowest goes quiet for a while" : "") << "), key_by 20 keys into "
      << o.parallelism << " tumbling 1 s window subtasks, for " << o.duration
      << (drift.count() > 0
              ? absl::StrCat(", with watermark alignment (max drift ", drift.count(), " ms)")
              : std::string(", without watermark alignment"))
      << "\n";
  JobClient client = env.execute_async("tidemark demo");
  internal::Mutex mu;
  internal::CondVar cv;
  bool done = false;  // under mu
  std::thread progress([&] {
    if (!o.progress) return;
    int64_t last_records = 0;
    int64_t ticks = 0;
    auto last = std::chrono::steady_clock::now();
    internal::MutexLock lock(&mu);
    for (;;) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
      while (!done && !cv.WaitUntil(&mu, deadline)) {
      }
      if (done) break;
      int64_t records = 0;
      std::string srcs, wins;
      for (const auto& m : client.metrics()) {
        if (m.task_name.rfind("Source", 0) == 0) {
          records += m.records_in;
          absl::StrAppend(&srcs, " ", Short(m.output_watermark), m.idle ? "(idle)" : "");
        } else if (m.task_name.rfind("window", 0) == 0) {
          absl::StrAppend(&wins, " ", Short(m.input_watermark));
        }
      }
      const auto now = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(now - last).count();
      const double rate = secs > 0 ? static_cast<double>(records - last_records) / secs : 0;
      last_records = records;
      last = now;
      const std::string line =
          absl::StrFormat("%9d records %8.0f/s | sources:%s | windows:%s | fired %d late %d",
                          records, rate, srcs, wins, fired.load(), late.load());
      if (o.progress_on_terminal) {
        err << "\r" << line << " " << std::flush;
      } else if (++ticks % 8 == 1) {  // at once, then every 2 s: a line of its own
        err << line << "\n" << std::flush;
      }
    }
    if (o.progress_on_terminal) err << "\n";
  });
  JobResult r = client.wait();
  {
    internal::MutexLock lock(&mu);
    done = true;
  }
  cv.SignalAll();
  progress.join();
  if (!r.ok()) {
    err << "tidemark: " << r.status.message() << "\n";
    return run;
  }
  for (const auto& m : r.metrics)
    if (m.task_name.rfind("Source", 0) == 0) run.records += m.records_in;
  run.fired = fired.load();
  run.late = late.load();
  run.dropped = r.CounterTotal("numLateRecordsDropped");
  run.peak_live = r.CounterTotal(internal::kWindowPeakLiveKeyWindows);
  run.peak_bytes = r.CounterTotal(internal::kWindowStateBytesAtPeak);
  run.pauses = r.CounterTotal(internal::kAlignmentPauses);
  run.paused_ms = r.CounterTotal(internal::kAlignmentPausedMs);
  run.seconds = r.seconds;
  std::ofstream page(timeline, std::ios::out | std::ios::trunc);
  page << RenderTimelineHtml(recorder->events(),
                             drift.count() > 0
                                 ? "tidemark demo: watermark timeline, with watermark alignment"
                                 : "tidemark demo: watermark timeline",
                             absl::UTCTimeZone());
  out << "records " << run.records << ", windows fired " << run.fired
      << ", late records (side output) " << run.late << ", dropped " << run.dropped << ", in "
      << absl::StrFormat("%.2f", run.seconds) << " s; peak live (key, window) pairs "
      << run.peak_live << ", window state at the peak " << run.peak_bytes << " bytes\n";
  if (page) {
    out << "timeline: " << timeline << "\n";
  } else {
    err << "tidemark: cannot write " << timeline << "\n";
    return run;
  }
  run.ok = true;
  return run;
}

// FILE.html -> FILE<suffix>.html ("-aligned", "-idle", "-idle-aligned").
std::string SuffixedPath(const std::string& path, const std::string& suffix) {
  if (suffix.empty()) return path;
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + suffix;
  return path.substr(0, dot) + suffix + path.substr(dot);
}

std::string Percent(int64_t before, int64_t after) {
  if (before <= 0) return "";
  return absl::StrFormat(" (%+.0f%%)",
                         100.0 * static_cast<double>(after - before) / static_cast<double>(before));
}

// One scene: a run without alignment and, unless `drift` is 0, one with it
// and what alignment changed.  False when a run failed.
bool RunScene(const DemoOptions& o, int64_t ms, Duration drift, bool idle_return, std::ostream& out,
              std::ostream& err) {
  const std::string base = idle_return ? "-idle" : "";
  const DemoRun plain =
      RunDemo(o, ms, Duration(0), idle_return, SuffixedPath(o.timeline, base), out, err);
  if (!plain.ok) return false;
  if (drift.count() == 0) return true;
  out << "\n";
  const DemoRun aligned =
      RunDemo(o, ms, drift, idle_return, SuffixedPath(o.timeline, base + "-aligned"), out, err);
  if (!aligned.ok) return false;
  out << "\nwhat watermark alignment (max drift " << drift.count() << " ms) changed"
      << (idle_return ? " when a source comes back from idleness" : "") << ":\n"
      << "  peak live (key, window) pairs " << plain.peak_live << " -> " << aligned.peak_live
      << Percent(plain.peak_live, aligned.peak_live) << ", window state at the peak "
      << plain.peak_bytes << " -> " << aligned.peak_bytes << " bytes"
      << Percent(plain.peak_bytes, aligned.peak_bytes) << "\n"
      << "  source subtasks paused " << aligned.pauses << " times, "
      << absl::StrFormat("%.1f", static_cast<double>(aligned.paused_ms) / 1000.0)
      << " s in all: the fast ones waited for the slowest, so "
      << "records read " << plain.records << " -> " << aligned.records << "\n"
      << "  windows fired " << plain.fired << " -> " << aligned.fired << ", late records "
      << plain.late << " -> " << aligned.late
      << " (alignment only throttles reading: it changes no watermark)\n";
  if (idle_return) {
    out << "  when the slowest source went quiet, the windows' watermark moved on with the others "
           "(an idle source holds nothing back) from wherever they were: seconds ahead without "
           "alignment, within the drift with it; back from idleness, its readings behind that "
           "watermark are late, and with alignment the others wait until it catches up\n";
  } else {
    out << "  without alignment the fast sources open windows the slowest one keeps from "
           "firing, and the live pairs grow with the run; with it no source reads more than "
           "the drift ahead of the slowest, so the live windows stay within a few seconds of "
           "event time\n";
  }
  return true;
}

}  // namespace

int DemoCommand(const DemoOptions& o, std::ostream& out, std::ostream& err) {
  auto duration = ParseDuration(o.duration);
  if (!duration.ok() || duration->count() <= 0) {
    err << "tidemark: --duration: "
        << (duration.ok() ? "must be positive" : duration.status().message()) << "\n";
    return 2;
  }
  if (o.sources <= 0 || o.parallelism <= 0) {
    err << "tidemark: --sources and --parallelism must be positive\n";
    return 2;
  }
  Duration drift{0};
  if (o.alignment != "off") {
    auto d = ParseDuration(o.alignment);
    if (!d.ok() || d->count() <= 0) {
      err << "tidemark: --alignment: "
          << (d.ok() ? "must be positive (or off)" : d.status().message()) << "\n";
      return 2;
    }
    drift = *d;
  }
  if (o.scene != "both" && o.scene != "drift" && o.scene != "idle-return") {
    err << "tidemark: --scene: '" << o.scene << "' is not drift, idle-return or both\n";
    return 2;
  }
  const int64_t ms = duration->count();
  const bool both = o.scene == "both";
  if (o.scene != "idle-return") {
    if (both)
      out << "scene 1 of 2, drift: the sources replay a backlog at different event-time "
             "speeds\n\n";
    if (!RunScene(o, ms, drift, /*idle_return=*/false, out, err)) return 2;
  }
  if (o.scene != "drift") {
    if (both)
      out << "\nscene 2 of 2, idle return: the same, but the slowest source goes quiet in the "
             "middle\n\n";
    if (!RunScene(o, ms, drift, /*idle_return=*/true, out, err)) return 2;
  }
  return 0;
}

}  // namespace tidemark::cli
