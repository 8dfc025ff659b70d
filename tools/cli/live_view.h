// tools/cli/live_view.h
//
// `tidemark run --serve=127.0.0.1:PORT`: a page, served while the job runs,
// showing each source's and each window input channel's watermark, idle
// flags, the aligned minimum and the channel holding it back, pauses, firings
// and late counts (docs/timeline.md, "The live view").
//
// LiveState is the shared state: the job's threads publish into it (through
// the TraceRecorder, as a TimelineObserver), the server's threads read it;
// one mutex guards it.  LiveServer serves it over HTTP from a thread of its
// own (poll(2), non-blocking sockets), on a loopback address only.
//
// The event feed is a list of JSON objects {"seq", "kind", "t_ms", ...} named
// by kind.  A new kind of event: a case in ToLiveEvent (its name and fields)
// and, when it changes what the page shows, in LiveState::Apply; or
// LiveState::Publish with a LiveEvent from anywhere.  The page draws the kinds
// it knows and shows any other kind generically (its name and fields).
// "source_pause" with a boolean field "paused" already sets a source's
// paused flag.
//
// Besides the feed, the state carries the job graph (LiveGraph: a vertex per
// chain, edges with their ship strategy; per subtask its watermark and how
// full its channels are, from the job's metrics), the checkpoints (from the
// coordinator's summary) and a bounded history of watermarks for the live
// charts (WatermarkHistory: series named by kind, subtask and channel, so a
// new kind of watermark is a new `kind` of series, drawn by the same code).
#ifndef TM_TOOLS_CLI_LIVE_VIEW_H_
#define TM_TOOLS_CLI_LIVE_VIEW_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/core/metrics.h"
#include "tidemark/runtime/state/checkpoint_summary.h"
#include "tools/cli/trace.h"

namespace tidemark::internal {
struct PhysicalPlan;
}

namespace tidemark::cli {

// The counter of "#watermark T" marker lines (--watermarks=marker), which
// the sources read as lines but which are no records: the summary and the
// live view count the sources' lines less these.
inline constexpr char kWatermarkMarkersCounter[] = "numWatermarkMarkers";

// One event of the feed.
struct LiveEvent {
  std::string kind;
  double t_ms = 0;
  int subtask = -1;
  int channel = -1;
  // Further fields: name, and value already written as JSON.
  std::vector<std::pair<std::string, std::string>> fields;
};

// The feed's form of a timeline event; a kind it does not know becomes
// "event_<number>" with its common fields.
LiveEvent ToLiveEvent(const TimelineEvent& e, const absl::TimeZone& zone);

// The job graph as the live view draws it (Flink's web UI): a vertex per
// chain of operators, an edge per network edge with its ship strategy.
struct LiveGraph {
  struct Vertex {
    int id = 0;                          // the chain's index in the plan
    std::string name;                    // the task name, "A -> B"
    std::vector<std::string> operators;  // the chain's operators, head first
    int parallelism = 1;
    bool source = false;  // headed by a source: its subtasks' watermark is their output's
    // Per subtask, its input channels in the order of its metrics
    // (SubtaskMetricsSnapshot::channel_fill): {edge index, producer subtask}.
    std::vector<std::vector<std::pair<int, int>>> inputs;
  };
  struct Edge {
    int from = 0, to = 0;       // vertex ids
    std::string ship_strategy;  // FORWARD, HASH, REBALANCE, BROADCAST, RESCALE, ...
    std::string partitioning;   // in full: "HASH(key groups, maxP=128)"
    std::string side_output;    // the tag, "" for the main output
    int channels = 0;
  };
  std::vector<Vertex> vertices;
  std::vector<Edge> edges;
};

// The graph of a physical plan (StreamAccess::Plan), for LiveState::SetGraph.
LiveGraph LiveGraphFromPlan(const internal::PhysicalPlan& plan);

// Back-pressure from how full a subtask's output channels are (queued
// batches / capacity): "high" when one is full (its producer waits), "low"
// from half full, else "ok".  Flink's UI colours these levels.
const char* BackPressureLevel(double fill);

// A bounded history of watermark-like values for the live charts: per
// series, at most one point per `interval_ms` (the last value in it), over
// the last `window_ms` of processing time (the point before the window is
// kept as its starting value).  Not thread-safe (LiveState locks).
class WatermarkHistory {
 public:
  struct Key {
    std::string kind;  // "event_time": the event-time watermark
    int subtask = -1;
    int channel = -1;  // -1: the subtask's combined (aligned) value
    auto operator<=>(const Key&) const = default;
  };
  WatermarkHistory(double window_ms, double interval_ms);
  void Record(const Key& key, double t_ms, int64_t value);
  // {"window_ms", "interval_ms", "series": [{"kind", "subtask", "channel",
  // "points": [[t_ms, value], ...]}, ...]}
  std::string Json(double now_ms) const;
  size_t MaxPointsPerSeries() const;
  size_t Points(const Key& key) const;

 private:
  const double window_ms_, interval_ms_;
  std::map<Key, std::deque<std::pair<double, int64_t>>> series_;
};

class LiveState final : public TimelineObserver {
 public:
  // Keeps the last `max_events` events for the feed, and the charts'
  // history over the last `history_ms` at one point per `sample_ms`.
  explicit LiveState(absl::TimeZone zone, size_t max_events = 4000, double history_ms = 60000,
                     double sample_ms = 250);

  // TimelineObserver: any thread.
  void OnTimelineEvent(const TimelineEvent& e) override;
  // An event of any kind, from any thread.
  void Publish(const LiveEvent& e);

  // Where live metrics come from (per subtask records, late records dropped);
  // called by the server's threads, outside the lock.
  void SetMetricsSource(std::function<std::vector<SubtaskMetricsSnapshot>()> source);
  // Where checkpoint statistics come from (null: checkpointing off);
  // called by the server's thread, outside the lock.
  void SetCheckpointSource(std::function<CheckpointSummary()> source);
  // The job's graph (before the job starts).
  void SetGraph(LiveGraph graph);
  // The job ended: "finished", "failed" or "interrupted", and what to say.
  void SetEnded(const std::string& status, const std::string& message);

  // {"status", "t_ms", "sources": [...], "windows": [...], "totals", ...,
  // "graph", "checkpoints", "restarts": {"num_restarts", "last_cause"},
  // "history"} (docs/timeline.md, "The live view").
  std::string StateJson() const;
  // {"next", "dropped", "events": [...]}: up to `max` events from seq `since`.
  std::string EventsJson(uint64_t since, size_t max) const;

 private:
  struct Source {
    Timestamp watermark = kMinTimestamp;
    bool idle = false;
    bool paused = false;
    int64_t watermarks = 0;
  };
  struct Channel {
    Timestamp watermark = kMinTimestamp;
    bool idle = false;
    bool aligned = true;  // counts in the minimum (the valve's status)
  };
  // A generalized watermark kind at a subtask of a task: the last value the
  // subtask sent and the last its input combined (docs/generalized-watermarks.md).
  struct Generalized {
    bool is_bool = false;
    std::string function;
    bool wait_for_all = false;
    bool has_sent = false, has_combined = false;
    int64_t sent = 0, combined = 0;
    int combined_channel = -1;  // whose arrival made the last combined value
  };
  // (task, subtask, identifier)
  using GeneralizedKey = std::tuple<std::string, int, std::string>;
  struct Window {
    std::map<int, Channel> channels;
    Timestamp aligned = kMinTimestamp;
    int holding = -1;
    std::map<std::string, int64_t> firings;  // on_time, late, end_of_input
    int64_t late_records = 0;
  };
  void Apply(const TimelineEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Append(const LiveEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Time(Timestamp ts) const;
  std::string GraphJson(const std::vector<SubtaskMetricsSnapshot>& metrics) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string CheckpointsJson(const std::optional<CheckpointSummary>& c) const;
  // The generalized watermarks of `task`'s subtask (every task's when `task`
  // is null), each with the last value on each input channel (what the
  // channel's producer last sent, from the graph) when the graph is known.
  std::string GeneralizedJson(const std::string* task, int subtask) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const absl::TimeZone zone_;
  const size_t max_events_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable internal::Mutex mu_;
  std::map<int, Source> sources_ ABSL_GUARDED_BY(mu_);
  std::map<int, Window> windows_ ABSL_GUARDED_BY(mu_);
  std::map<GeneralizedKey, Generalized> generalized_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> kinds_ ABSL_GUARDED_BY(mu_);  // events seen, by kind
  std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);        // JSON, seq first_seq_ ...
  uint64_t first_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::string status_ ABSL_GUARDED_BY(mu_) = "running";
  std::string message_ ABSL_GUARDED_BY(mu_);
  double ended_ms_ ABSL_GUARDED_BY(mu_) = -1;
  std::function<std::vector<SubtaskMetricsSnapshot>()> metrics_ ABSL_GUARDED_BY(mu_);
  std::function<CheckpointSummary()> checkpoints_ ABSL_GUARDED_BY(mu_);
  LiveGraph graph_ ABSL_GUARDED_BY(mu_);
  WatermarkHistory history_ ABSL_GUARDED_BY(mu_);
  // From the "restart" events (Publish): numRestarts and the last cause
  // (JSON; null before the first).
  int64_t num_restarts_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_restart_cause_ ABSL_GUARDED_BY(mu_) = "null";
};

// Splits --serve=HOST:PORT ("[::1]:PORT" for IPv6) and refuses any host
// that is not a loopback address (127.0.0.0/8, ::1, localhost).
absl::Status ParseServeAddress(const std::string& spec, std::string* host, int* port);

// Whether an HTTP Host header names this machine's loopback: "localhost",
// 127.x.y.z or [::1], each with or without ":PORT".  The server answers
// anything else with 403 (a DNS-rebinding page sends its own name).
bool IsLoopbackHost(const std::string& host_header);

// A small poll(2) server on one thread (docs/timeline.md, "The live view"):
// no client can hold it or delay another, and Stop() returns at once.
class LiveServer {
 public:
  // Binds (port 0: a free port the system picks) and starts serving.
  static absl::StatusOr<std::unique_ptr<LiveServer>> Start(const std::string& host, int port,
                                                           LiveState* state, std::string title);
  ~LiveServer();  // Stop()
  LiveServer(const LiveServer&) = delete;
  LiveServer& operator=(const LiveServer&) = delete;

  int port() const { return port_; }
  std::string url() const;
  // Stops: closes the listening socket and every connection (a response
  // half sent is cut) and joins the server's thread, at once whatever the
  // clients do.  Idempotent.
  void Stop();

 private:
  struct Impl;
  LiveServer() = default;
  std::unique_ptr<Impl> impl_;
  std::string host_;
  int port_ = 0;
};

// The page (inline style and script, nothing from the network); `state_json`
// is drawn at once, then the page polls /api/state and /api/events.
std::string RenderLivePage(const std::string& title, const std::string& state_json);

}  // namespace tidemark::cli

#endif  // TM_TOOLS_CLI_LIVE_VIEW_H_
