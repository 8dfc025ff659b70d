#include "tools/cli/live_view.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <string_view>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/job_compiler.h"
#include "tools/cli/line_format.h"

namespace tidemark::cli {
namespace {

std::string Bool(bool b) { return b ? "true" : "false"; }
std::string Ms(double ms) { return absl::StrFormat("%.1f", ms); }

}  // namespace

LiveEvent ToLiveEvent(const TimelineEvent& e, const absl::TimeZone& zone) {
  using K = TimelineEvent::Kind;
  auto time = [&](Timestamp ts) { return JsonString(FormatTime(ts, zone)); };
  LiveEvent l;
  l.t_ms = e.t_ms;
  l.subtask = e.subtask;
  auto& f = l.fields;
  switch (e.kind) {
    case K::kSourceWatermark:
      l.kind = "source_watermark";
      f = {{"watermark", absl::StrCat(e.watermark)}, {"watermark_text", time(e.watermark)}};
      break;
    case K::kSourceIdle:
      l.kind = "source_status";
      f = {{"idle", Bool(e.idle)}};
      break;
    case K::kChannel:
      l.kind = "channel";
      l.channel = e.channel;
      f = {{"watermark", absl::StrCat(e.watermark)},
           {"watermark_text", time(e.watermark)},
           {"idle", Bool(e.idle)},
           {"aligned", absl::StrCat(e.aligned)},
           {"aligned_text", time(e.aligned)},
           {"holding", absl::StrCat(e.holding)},
           {"channel_aligned", Bool(e.channel_aligned)}};
      break;
    case K::kFiring:
      l.kind = "firing";
      f = {{"firing", JsonString(e.firing)},      {"key", JsonString(e.key)},
           {"start_text", time(e.start)},         {"end_text", time(e.end)},
           {"watermark_text", time(e.watermark)}, {"value", JsonString(e.value)}};
      break;
    case K::kLate:
      l.kind = "late";
      f = {{"key", JsonString(e.key)}, {"ts_text", time(e.ts)}, {"value", JsonString(e.value)}};
      break;
    case K::kBarrier:
      l.kind = "barrier";
      f = {{"checkpoint", absl::StrCat(e.checkpoint)},
           {"source", Bool(e.source)},
           {"alignment_ms", absl::StrFormat("%.3f", e.alignment_ms)}};
      break;
    case K::kSourcePause:
      l.kind = "source_pause";
      f = {{"paused", Bool(e.idle)},
           {"watermark", absl::StrCat(e.watermark)},
           {"watermark_text", time(e.watermark)},
           {"max_allowed", absl::StrCat(e.aligned)},
           {"max_allowed_text", time(e.aligned)}};
      break;
    case K::kGeneralized:
      l.kind = "generalized_watermark";
      l.channel = e.gw_input ? e.channel : -1;
      if (e.gw == nullptr) break;
      f = {{"task", JsonString(e.gw->task)},
           {"identifier", JsonString(e.gw->identifier)},
           {"type", e.gw->is_bool ? "\"bool\"" : "\"long\""},
           {"direction", e.gw_input ? "\"in\"" : "\"out\""},
           {"value", e.gw->is_bool ? Bool(e.gw_value != 0) : absl::StrCat(e.gw_value)}};
      break;
    default:  // a kind added later: shown generically until it has a case here
      l.kind = absl::StrCat("event_", static_cast<int>(e.kind));
      l.channel = e.channel;
      break;
  }
  return l;
}

LiveGraph LiveGraphFromPlan(const internal::PhysicalPlan& plan) {
  LiveGraph g;
  for (size_t c = 0; c < plan.chains.size(); ++c) {
    const internal::PlanChain& chain = plan.chains[c];
    LiveGraph::Vertex v;
    v.id = static_cast<int>(c);
    v.name = chain.task_name;
    for (int id : chain.nodes) v.operators.push_back(plan.nodes[id].name);
    v.parallelism = chain.parallelism;
    v.source = plan.nodes[chain.head].kind == internal::StreamNode::Kind::kSource;
    g.vertices.push_back(std::move(v));
  }
  std::map<int, int> graph_edge;  // plan edge -> graph edge
  for (int e : plan.NetworkEdges()) {
    const internal::PlanEdge& pe = plan.edges[e];
    LiveGraph::Edge edge;
    edge.from = plan.nodes[pe.from].chain;
    edge.to = plan.nodes[pe.to].chain;
    edge.ship_strategy = ToString(pe.strategy);
    edge.partitioning =
        pe.strategy == internal::ShipStrategy::kKeyGroups
            ? absl::StrCat("HASH(key groups, maxP=", plan.nodes[pe.to].max_parallelism, ")")
        : pe.strategy == internal::ShipStrategy::kCustom ? std::string("CUSTOM(partitioner)")
                                                         : edge.ship_strategy;
    edge.side_output = pe.tag;
    edge.channels = pe.channels;
    graph_edge[e] = static_cast<int>(g.edges.size());
    g.edges.push_back(std::move(edge));
  }
  // Each subtask's input channels in the order the job compiler gives them
  // to its gate, which is the order of its metrics: the head's input edges
  // in order (a two-input head: its first input's, then its second's), per
  // edge the connected upstream subtasks in order (WireInputGate,
  // WireTwoInputGate).
  for (LiveGraph::Vertex& v : g.vertices) {
    const internal::PlanNode& head = plan.nodes[plan.chains[v.id].head];
    std::vector<int> inputs = head.inputs;
    std::stable_sort(inputs.begin(), inputs.end(), [&](int a, int b) {
      return plan.edges[a].gate_input < plan.edges[b].gate_input;
    });
    v.inputs.resize(v.parallelism);
    for (int s = 0; s < v.parallelism; ++s) {
      for (int e : inputs) {
        const internal::PlanEdge& pe = plan.edges[e];
        const int pu = plan.nodes[pe.from].parallelism;
        auto it = graph_edge.find(e);
        for (int u = 0; u < pu; ++u) {
          if (Connected(pe.strategy, u, s, pu, v.parallelism))
            v.inputs[s].emplace_back(it == graph_edge.end() ? -1 : it->second, u);
        }
      }
    }
  }
  return g;
}

const char* BackPressureLevel(double fill) {
  return fill >= 1.0 ? "high" : fill >= 0.5 ? "low" : "ok";
}

WatermarkHistory::WatermarkHistory(double window_ms, double interval_ms)
    : window_ms_(window_ms > 0 ? window_ms : 1), interval_ms_(interval_ms > 0 ? interval_ms : 1) {}

size_t WatermarkHistory::MaxPointsPerSeries() const {
  return static_cast<size_t>(window_ms_ / interval_ms_) + 2;
}

size_t WatermarkHistory::Points(const Key& key) const {
  auto it = series_.find(key);
  return it == series_.end() ? 0 : it->second.size();
}

void WatermarkHistory::Record(const Key& key, double t_ms, int64_t value) {
  auto& points = series_[key];
  if (!points.empty() &&
      std::floor(points.back().first / interval_ms_) >= std::floor(t_ms / interval_ms_)) {
    points.back().second = value;  // the last value of the interval
  } else {
    points.emplace_back(t_ms, value);
  }
  // The points before the window go, but the last of them: where the
  // window's line starts.
  while (points.size() >= 2 && points[1].first <= t_ms - window_ms_) points.pop_front();
  while (points.size() > MaxPointsPerSeries()) points.pop_front();
}

std::string WatermarkHistory::Json(double now_ms) const {
  std::string j = absl::StrCat("{\"window_ms\":", Ms(window_ms_),
                               ",\"interval_ms\":", Ms(interval_ms_), ",\"series\":[");
  bool first = true;
  for (const auto& [key, points] : series_) {
    absl::StrAppend(&j, first ? "" : ",", "{\"kind\":", JsonString(key.kind),
                    ",\"subtask\":", key.subtask, ",\"channel\":", key.channel, ",\"points\":[");
    first = false;
    size_t from = 0;
    while (from + 1 < points.size() && points[from + 1].first <= now_ms - window_ms_) ++from;
    for (size_t i = from; i < points.size(); ++i)
      absl::StrAppend(&j, i == from ? "" : ",", "[", Ms(points[i].first), ",", points[i].second,
                      "]");
    j += "]}";
  }
  return j + "]}";
}

LiveState::LiveState(absl::TimeZone zone, size_t max_events, double history_ms, double sample_ms)
    : zone_(zone), max_events_(max_events == 0 ? 1 : max_events), history_(history_ms, sample_ms) {}

std::string LiveState::Time(Timestamp ts) const { return JsonString(FormatTime(ts, zone_)); }

void LiveState::OnTimelineEvent(const TimelineEvent& e) {
  const LiveEvent l = ToLiveEvent(e, zone_);  // formatted outside the lock
  internal::MutexLock lock(&mu_);
  Apply(e);
  Append(l);
}

void LiveState::Publish(const LiveEvent& e) {
  internal::MutexLock lock(&mu_);
  if (e.kind == "source_pause" && e.subtask >= 0) {
    for (const auto& [name, value] : e.fields)
      if (name == "paused") sources_[e.subtask].paused = value == "true";
  }
  if (e.kind == "restart") {
    // numRestarts and the last cause (the restart listener's event, whose
    // "cause" is JSON already).
    for (const auto& [name, value] : e.fields) {
      int64_t n = 0;
      if (name == "restart" && absl::SimpleAtoi(value, &n))
        num_restarts_ = std::max(num_restarts_, n);
      if (name == "cause") last_restart_cause_ = value;
    }
  }
  Append(e);
}

void LiveState::Apply(const TimelineEvent& e) {
  using K = TimelineEvent::Kind;
  switch (e.kind) {
    case K::kSourceWatermark: {
      Source& s = sources_[e.subtask];
      s.watermark = e.watermark;
      ++s.watermarks;
      break;
    }
    case K::kSourceIdle:
      sources_[e.subtask].idle = e.idle;
      break;
    case K::kChannel: {
      Window& w = windows_[e.subtask];
      w.channels[e.channel] = Channel{e.watermark, e.idle, e.channel_aligned};
      w.aligned = e.aligned;
      w.holding = e.holding;
      // The live charts: the channel's watermark and the aligned minimum.
      history_.Record({"event_time", e.subtask, e.channel}, e.t_ms, e.watermark);
      history_.Record({"event_time", e.subtask, -1}, e.t_ms, e.aligned);
      break;
    }
    case K::kFiring:
      ++windows_[e.subtask].firings[e.firing];
      break;
    case K::kLate:
      ++windows_[e.subtask].late_records;
      break;
    case K::kSourcePause:
      sources_[e.subtask].paused = e.idle;
      break;
    case K::kGeneralized: {
      if (e.gw == nullptr) break;
      Generalized& g = generalized_[GeneralizedKey{e.gw->task, e.subtask, e.gw->identifier}];
      g.is_bool = e.gw->is_bool;
      g.function = e.gw->function;
      g.wait_for_all = e.gw->wait_for_all;
      if (e.gw_input) {
        g.has_combined = true;
        g.combined = e.gw_value;
        g.combined_channel = e.channel;
      } else {
        g.has_sent = true;
        g.sent = e.gw_value;
      }
      break;
    }
    default:
      break;
  }
}

void LiveState::Append(const LiveEvent& e) {
  const uint64_t seq = first_seq_ + events_.size();
  std::string json =
      absl::StrCat("{\"seq\":", seq, ",\"kind\":", JsonString(e.kind), ",\"t_ms\":", Ms(e.t_ms));
  if (e.subtask >= 0) absl::StrAppend(&json, ",\"subtask\":", e.subtask);
  if (e.channel >= 0) absl::StrAppend(&json, ",\"channel\":", e.channel);
  for (const auto& [name, value] : e.fields)
    absl::StrAppend(&json, ",", JsonString(name), ":", value);
  json += "}";
  events_.push_back(std::move(json));
  if (events_.size() > max_events_) {
    events_.pop_front();
    ++first_seq_;
  }
  ++kinds_[e.kind];
}

void LiveState::SetMetricsSource(std::function<std::vector<SubtaskMetricsSnapshot>()> source) {
  std::function<std::vector<SubtaskMetricsSnapshot>()> old;
  {
    internal::MutexLock lock(&mu_);
    old = std::move(metrics_);
    metrics_ = std::move(source);
  }
  // `old` (and what it holds) goes here, outside the lock.
}

void LiveState::SetCheckpointSource(std::function<CheckpointSummary()> source) {
  std::function<CheckpointSummary()> old;
  {
    internal::MutexLock lock(&mu_);
    old = std::move(checkpoints_);
    checkpoints_ = std::move(source);
  }
}

void LiveState::SetGraph(LiveGraph graph) {
  internal::MutexLock lock(&mu_);
  graph_ = std::move(graph);
}

std::string LiveState::GraphJson(const std::vector<SubtaskMetricsSnapshot>& metrics) const {
  struct Sub {
    const SubtaskMetricsSnapshot* m = nullptr;
    double in_fill = 0, out_fill = 0;
  };
  const std::vector<LiveGraph::Vertex>& vs = graph_.vertices;
  std::vector<std::vector<Sub>> subs(vs.size());
  for (size_t v = 0; v < vs.size(); ++v) subs[v].resize(vs[v].parallelism);
  std::vector<double> edge_fill(graph_.edges.size(), 0);
  for (const SubtaskMetricsSnapshot& m : metrics) {
    size_t v = 0;
    while (v < vs.size() && !(vs[v].name == m.task_name && vs[v].parallelism == m.parallelism)) ++v;
    if (v == vs.size() || m.subtask < 0 || m.subtask >= vs[v].parallelism) continue;
    Sub& sub = subs[v][m.subtask];
    sub.m = &m;
    const auto& inputs = vs[v].inputs[m.subtask];
    for (size_t c = 0; c < m.channel_fill.size(); ++c) {
      const double fill = m.channel_fill[c];
      sub.in_fill = std::max(sub.in_fill, fill);
      if (c >= inputs.size() || inputs[c].first < 0) continue;
      // The same channel is an output of its producer: back-pressure there.
      const int e = inputs[c].first, u = inputs[c].second;
      edge_fill[e] = std::max(edge_fill[e], fill);
      const int from = graph_.edges[e].from;
      if (from >= 0 && from < static_cast<int>(subs.size()) &&
          u < static_cast<int>(subs[from].size()))
        subs[from][u].out_fill = std::max(subs[from][u].out_fill, fill);
    }
  }
  std::string j = "{\"vertices\":[";
  for (size_t v = 0; v < vs.size(); ++v) {
    Timestamp low = kMaxWatermark;
    double fill = 0;
    bool any = false;
    for (const Sub& sub : subs[v]) {
      fill = std::max(fill, sub.out_fill);
      if (sub.m == nullptr) continue;
      any = true;
      low = std::min(low, vs[v].source ? sub.m->output_watermark : sub.m->input_watermark);
    }
    if (!any) low = kMinTimestamp;
    absl::StrAppend(&j, v == 0 ? "" : ",", "{\"id\":", vs[v].id,
                    ",\"name\":", JsonString(vs[v].name), ",\"operators\":[");
    for (size_t o = 0; o < vs[v].operators.size(); ++o)
      absl::StrAppend(&j, o == 0 ? "" : ",", JsonString(vs[v].operators[o]));
    absl::StrAppend(&j, "],\"parallelism\":", vs[v].parallelism, ",\"source\":", Bool(vs[v].source),
                    ",\"watermark\":", low, ",\"watermark_text\":", Time(low),
                    ",\"output_fill\":", absl::StrFormat("%.2f", fill), ",\"backpressure\":\"",
                    BackPressureLevel(fill), "\",\"subtasks\":[");
    for (size_t s = 0; s < subs[v].size(); ++s) {
      const Sub& sub = subs[v][s];
      const Timestamp wm = sub.m == nullptr ? kMinTimestamp
                           : vs[v].source   ? sub.m->output_watermark
                                            : sub.m->input_watermark;
      absl::StrAppend(&j, s == 0 ? "" : ",", "{\"subtask\":", s, ",\"watermark\":", wm,
                      ",\"watermark_text\":", Time(wm),
                      ",\"input_fill\":", absl::StrFormat("%.2f", sub.in_fill),
                      ",\"output_fill\":", absl::StrFormat("%.2f", sub.out_fill),
                      ",\"backpressure\":\"", BackPressureLevel(sub.out_fill),
                      "\",\"records_in\":", sub.m ? sub.m->records_in : 0,
                      ",\"records_out\":", sub.m ? sub.m->records_out : 0,
                      ",\"finished\":", Bool(sub.m != nullptr && sub.m->finished));
      // Only when it has any (the graph's JSON is unchanged for jobs without).
      const std::string gw = GeneralizedJson(&vs[v].name, static_cast<int>(s));
      if (gw != "[]") absl::StrAppend(&j, ",\"generalized_watermarks\":", gw);
      j += "}";
    }
    j += "]}";
  }
  j += "],\"edges\":[";
  for (size_t e = 0; e < graph_.edges.size(); ++e) {
    const LiveGraph::Edge& edge = graph_.edges[e];
    absl::StrAppend(&j, e == 0 ? "" : ",", "{\"id\":", e, ",\"from\":", edge.from,
                    ",\"to\":", edge.to, ",\"ship_strategy\":", JsonString(edge.ship_strategy),
                    ",\"partitioning\":", JsonString(edge.partitioning),
                    ",\"side_output\":", JsonString(edge.side_output),
                    ",\"channels\":", edge.channels,
                    ",\"fill\":", absl::StrFormat("%.2f", edge_fill[e]), ",\"backpressure\":\"",
                    BackPressureLevel(edge_fill[e]), "\"}");
  }
  return j + "]}";
}

std::string LiveState::GeneralizedJson(const std::string* task, int subtask) const {
  auto value = [](bool is_bool, bool has, int64_t v) {
    return !has ? std::string("null") : is_bool ? Bool(v != 0) : absl::StrCat(v);
  };
  std::string j = "[";
  bool first = true;
  for (const auto& [key, g] : generalized_) {
    const auto& [t, st, identifier] = key;
    if (task != nullptr && (t != *task || st != subtask)) continue;
    absl::StrAppend(&j, first ? "" : ",", "{\"task\":", JsonString(t), ",\"subtask\":", st,
                    ",\"identifier\":", JsonString(identifier), ",\"type\":\"",
                    g.is_bool ? "bool" : "long", "\",\"function\":", JsonString(g.function),
                    ",\"wait_for_all_channels\":", Bool(g.wait_for_all),
                    ",\"sent\":", value(g.is_bool, g.has_sent, g.sent),
                    ",\"combined\":", value(g.is_bool, g.has_combined, g.combined),
                    ",\"combined_channel\":", g.combined_channel, ",\"channels\":[");
    first = false;
    // Each input channel carries what its producer sent (a generalized
    // watermark is broadcast on every channel of an edge): from the graph.
    const LiveGraph::Vertex* vertex = nullptr;
    for (const LiveGraph::Vertex& v : graph_.vertices)
      if (v.name == t && st < static_cast<int>(v.inputs.size())) vertex = &v;
    if (vertex != nullptr) {
      const auto& inputs = vertex->inputs[st];
      bool first_ch = true;
      for (size_t c = 0; c < inputs.size(); ++c) {
        const auto [edge, producer] = inputs[c];
        if (edge < 0 || edge >= static_cast<int>(graph_.edges.size())) continue;
        const int from = graph_.edges[edge].from;
        std::string from_name;
        for (const LiveGraph::Vertex& v : graph_.vertices)
          if (v.id == from) from_name = v.name;
        auto it = generalized_.find(GeneralizedKey{from_name, producer, identifier});
        const bool has = it != generalized_.end() && it->second.has_sent;
        absl::StrAppend(&j, first_ch ? "" : ",", "{\"channel\":", c,
                        ",\"from_task\":", JsonString(from_name), ",\"from_subtask\":", producer,
                        ",\"value\":", value(g.is_bool, has, has ? it->second.sent : 0), "}");
        first_ch = false;
      }
    }
    j += "]}";
  }
  return j + "]";
}

std::string LiveState::CheckpointsJson(const std::optional<CheckpointSummary>& c) const {
  if (!c || !c->enabled) return "{\"enabled\":false}";
  std::string j =
      absl::StrCat("{\"enabled\":true,\"in_progress\":", c->in_progress_id,
                   ",\"in_progress_ms\":", Ms(c->in_progress_ms), ",\"completed\":", c->completed,
                   ",\"failed\":", c->failed, ",\"last_completed\":");
  if (c->last_id >= 0) {
    absl::StrAppend(
        &j, "{\"id\":", c->last_id, ",\"at_unix_ms\":", c->last_completed_unix_ms,
        ",\"at_text\":", c->last_completed_unix_ms > 0 ? Time(c->last_completed_unix_ms) : "\"\"",
        ",\"duration_ms\":", Ms(c->last_duration_ms), ",\"size_bytes\":", c->last_size_bytes,
        ",\"alignment_ms\":", absl::StrFormat("%.3f", c->last_alignment_ms), "}");
  } else {
    j += "null";
  }
  absl::StrAppend(&j, ",\"max_duration_ms\":", Ms(c->max_duration_ms),
                  ",\"max_alignment_ms\":", absl::StrFormat("%.3f", c->max_alignment_ms),
                  ",\"last_failure\":", JsonString(c->last_error),
                  ",\"restored_id\":", c->restored_id, "}");
  return j;
}

void LiveState::SetEnded(const std::string& status, const std::string& message) {
  internal::MutexLock lock(&mu_);
  status_ = status;
  message_ = message;
  ended_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

std::string LiveState::StateJson() const {
  std::function<std::vector<SubtaskMetricsSnapshot>()> source;
  std::function<CheckpointSummary()> checkpoint_source;
  {
    internal::MutexLock lock(&mu_);
    source = metrics_;
    checkpoint_source = checkpoints_;
  }
  std::vector<SubtaskMetricsSnapshot> metrics;
  if (source) metrics = source();
  std::optional<CheckpointSummary> checkpoints;
  if (checkpoint_source) checkpoints = checkpoint_source();
  std::map<int, int64_t> source_records;
  std::map<int, int64_t> dropped_by_subtask;  // the window operator's, per subtask
  int64_t records = 0, late_dropped = 0;
  for (const auto& m : metrics) {
    if (m.task_name.rfind("Source", 0) == 0) {
      source_records[m.subtask] = m.records_in;
      records += m.records_in;
    }
    if (auto it = m.counters.find("numLateRecordsDropped"); it != m.counters.end()) {
      late_dropped += it->second;
      // The window's own (another operator may count under the same name).
      if (m.task_name.find("Window(") != std::string::npos)
        dropped_by_subtask[m.subtask] += it->second;
    }
    if (auto it = m.counters.find(kWatermarkMarkersCounter); it != m.counters.end())
      records -= it->second;
  }
  const double now =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();

  internal::MutexLock lock(&mu_);
  std::string j =
      absl::StrCat("{\"status\":", JsonString(status_), ",\"message\":", JsonString(message_),
                   ",\"t_ms\":", Ms(now), ",\"ended_ms\":", Ms(ended_ms_),
                   ",\"zone\":", JsonString(zone_.name()), ",\"sources\":[");
  std::map<int, Source> sources = sources_;
  for (const auto& [subtask, n] : source_records) sources.try_emplace(subtask);
  bool first = true;
  for (const auto& [subtask, s] : sources) {
    absl::StrAppend(&j, first ? "" : ",", "{\"subtask\":", subtask, ",\"watermark\":", s.watermark,
                    ",\"watermark_text\":", Time(s.watermark), ",\"idle\":", Bool(s.idle),
                    ",\"paused\":", Bool(s.paused), ",\"watermarks\":", s.watermarks,
                    ",\"records\":", source_records.count(subtask) ? source_records[subtask] : 0,
                    "}");
    first = false;
  }
  j += "],\"windows\":[";
  int64_t results = 0, late_side = 0;
  first = true;
  for (const auto& [subtask, w] : windows_) {
    bool all_idle = !w.channels.empty();
    for (const auto& [c, ch] : w.channels) all_idle = all_idle && ch.idle;
    // Every channel at its end: nothing holds the minimum back any more.
    // (The minimum also reaches MAX when the other channels are idle: those
    // have not ended, and their records will come late.)
    bool ended = !w.channels.empty();
    for (const auto& [c, ch] : w.channels) ended = ended && ch.watermark == kMaxWatermark;
    absl::StrAppend(&j, first ? "" : ",", "{\"subtask\":", subtask, ",\"aligned\":", w.aligned,
                    ",\"aligned_text\":", Time(w.aligned),
                    ",\"holding\":", w.aligned == kMaxWatermark ? -1 : w.holding,
                    ",\"idle\":", Bool(all_idle), ",\"input_ended\":", Bool(ended),
                    ",\"channels\":[");
    first = false;
    bool first_ch = true;
    for (const auto& [c, ch] : w.channels) {
      absl::StrAppend(&j, first_ch ? "" : ",", "{\"channel\":", c, ",\"watermark\":", ch.watermark,
                      ",\"watermark_text\":", Time(ch.watermark), ",\"idle\":", Bool(ch.idle),
                      ",\"aligned\":", Bool(ch.aligned), "}");
      first_ch = false;
    }
    j += "],\"firings\":{";
    bool first_f = true;
    for (const char* kind : {"on_time", "late", "end_of_input"}) {
      auto it = w.firings.find(kind);
      const int64_t n = it == w.firings.end() ? 0 : it->second;
      results += n;
      absl::StrAppend(&j, first_f ? "" : ",", "\"", kind, "\":", n);
      first_f = false;
    }
    late_side += w.late_records;
    // Late records to the side output (each one seen), and dropped ones
    // (--late=drop: counted by the operator only).
    absl::StrAppend(&j, "},\"late_records\":", w.late_records,
                    ",\"late_dropped\":", dropped_by_subtask[subtask], "}");
  }
  absl::StrAppend(&j, "],\"totals\":{\"records\":", records, ",\"window_results\":", results,
                  ",\"late_side\":", late_side, ",\"late_dropped\":", late_dropped,
                  "},\"kinds\":{");
  first = true;
  for (const auto& [kind, n] : kinds_) {
    absl::StrAppend(&j, first ? "" : ",", JsonString(kind), ":", n);
    first = false;
  }
  // The zone's offset, for the charts' event-time axis: at the newest
  // watermark shown (or now).
  Timestamp newest = kMinTimestamp;
  for (const auto& [subtask, w] : windows_)
    if (w.aligned != kMaxWatermark) newest = std::max(newest, w.aligned);
  const absl::Time at = newest == kMinTimestamp ? absl::Now() : absl::FromUnixMillis(newest);
  absl::StrAppend(&j, "},\"next_event\":", first_seq_ + events_.size(),
                  ",\"zone_offset_ms\":", int64_t{zone_.At(at).offset} * 1000,
                  ",\"graph\":", GraphJson(metrics),
                  ",\"generalized_watermarks\":", GeneralizedJson(nullptr, -1),
                  ",\"checkpoints\":", CheckpointsJson(checkpoints),
                  ",\"restarts\":{\"num_restarts\":", num_restarts_,
                  ",\"last_cause\":", last_restart_cause_, "}",
                  ",\"history\":", history_.Json(ended_ms_ >= 0 ? ended_ms_ : now), "}");
  return j;
}

std::string LiveState::EventsJson(uint64_t since, size_t max) const {
  internal::MutexLock lock(&mu_);
  const uint64_t end = first_seq_ + events_.size();
  const uint64_t from = std::max(since, first_seq_);
  const uint64_t to = std::min<uint64_t>(end, from + max);
  std::string j = absl::StrCat("{\"next\":", to, ",\"dropped\":", from - std::min(since, from),
                               ",\"events\":[");
  for (uint64_t s = from; s < to; ++s)
    absl::StrAppend(&j, s == from ? "" : ",", events_[s - first_seq_]);
  return j + "]}";
}

absl::Status ParseServeAddress(const std::string& spec, std::string* host, int* port) {
  std::string h, p;
  if (!spec.empty() && spec[0] == '[') {
    const size_t close = spec.find("]:");
    if (close == std::string::npos)
      return absl::InvalidArgumentError(
          absl::StrCat("--serve=", spec, ": expected HOST:PORT ([::1]:PORT for IPv6)"));
    h = spec.substr(1, close - 1);
    p = spec.substr(close + 2);
  } else {
    const size_t colon = spec.rfind(':');
    if (colon == std::string::npos || spec.find(':') != colon)
      return absl::InvalidArgumentError(
          absl::StrCat("--serve=", spec, ": expected HOST:PORT, such as 127.0.0.1:8080"));
    h = spec.substr(0, colon);
    p = spec.substr(colon + 1);
  }
  int n = -1;
  if (!absl::SimpleAtoi(p, &n) || n < 0 || n > 65535)
    return absl::InvalidArgumentError(
        absl::StrCat("--serve=", spec, ": the port must be 0 to 65535 (0: any free port)"));
  bool loopback = false;
  in_addr v4;
  in6_addr v6;
  if (h == "localhost") {
    h = "127.0.0.1";
    loopback = true;
  } else if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    loopback = (ntohl(v4.s_addr) >> 24) == 127;
  } else if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    loopback = IN6_IS_ADDR_LOOPBACK(&v6);
  }
  if (!loopback)
    return absl::InvalidArgumentError(absl::StrCat(
        "--serve=", spec,
        ": the live view serves on a loopback address only (127.0.0.1, ::1 or localhost): it "
        "has no authentication and is meant for this machine"));
  *host = h;
  *port = n;
  return absl::OkStatus();
}

// The server: one thread and poll(2), for this small read-only API.
// cpp-httplib (used before) gives each connection a pool thread that blocks
// in reads with a per-read timeout and joins them all on stop(): a client
// sending a byte a second kept a finished job alive, and three stalled
// connections made every other request wait.  Here nothing blocks: every
// socket is non-blocking, a connection has a deadline for its whole request
// and response (kConnectionDeadline), a request has a size limit, the number
// of connections is capped (the oldest is dropped past it), each response
// closes its connection, and Stop() wakes the loop through a pipe, which
// closes every socket and returns at once whatever the clients do.
namespace {

constexpr auto kConnectionDeadline = std::chrono::seconds(2);
constexpr size_t kMaxRequestBytes = 16 * 1024;
constexpr size_t kMaxConnections = 128;

struct Connection {
  int fd = -1;
  std::string in;
  std::string out;
  size_t out_off = 0;
  bool writing = false;
  std::chrono::steady_clock::time_point deadline;
};

std::string Response(int status, const char* reason, const std::string& type,
                     const std::string& body, bool head) {
  return absl::StrCat("HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff"
                      "\r\nConnection: close\r\n\r\n",
                      head ? std::string() : body);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool IsLoopbackHost(const std::string& host_header) {
  std::string h = host_header;
  while (!h.empty() && (h.back() == ' ' || h.back() == '\t')) h.pop_back();
  while (!h.empty() && (h.front() == ' ' || h.front() == '\t')) h.erase(0, 1);
  auto port_ok = [](const std::string& p) {
    int n = 0;
    return p.empty() || (absl::SimpleAtoi(p, &n) && n >= 0 && n <= 65535 &&
                         p.find_first_not_of("0123456789") == std::string::npos);
  };
  std::string name;
  if (!h.empty() && h[0] == '[') {
    const size_t close = h.find(']');
    if (close == std::string::npos) return false;
    name = h.substr(1, close - 1);
    const std::string rest = h.substr(close + 1);
    if (!rest.empty() && (rest[0] != ':' || !port_ok(rest.substr(1)))) return false;
    in6_addr v6;
    return inet_pton(AF_INET6, name.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
  }
  const size_t colon = h.find(':');
  if (colon != std::string::npos) {
    if (h.find(':', colon + 1) != std::string::npos) return false;  // IPv6 needs brackets
    if (!port_ok(h.substr(colon + 1))) return false;
    name = h.substr(0, colon);
  } else {
    name = h;
  }
  name = Lower(name);
  if (!name.empty() && name.back() == '.') name.pop_back();  // "localhost."
  if (name == "localhost") return true;
  in_addr v4;
  return inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

struct LiveServer::Impl {
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // Stop() writes to wake[1]
  std::thread thread;
  bool stopped = false;  // Stop() ran (by the owner's thread)
  LiveState* state = nullptr;
  std::string title;

  ~Impl() {
    for (int fd : {listen_fd, wake[0], wake[1]})
      if (fd >= 0) close(fd);
  }
  void Loop();
  // The response to the complete request `head` (request line and headers).
  std::string Handle(const std::string& head);
};

std::string LiveServer::Impl::Handle(const std::string& head) {
  const size_t eol = head.find("\r\n");
  const std::string line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? std::string::npos : line.find(' ', sp1 + 1);
  if (sp2 == std::string::npos)
    return Response(400, "Bad Request", "text/plain", "bad request line\n", false);
  const std::string method = line.substr(0, sp1);
  const std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const bool is_head = method == "HEAD";
  if (method != "GET" && !is_head)
    return Response(405, "Method Not Allowed", "text/plain", "GET only\n", false);
  // The Host header: a loopback name or address only (no DNS rebinding: a
  // page of another site whose name resolves to 127.0.0.1 sends its own
  // name here).
  std::string host;
  int hosts = 0;
  for (size_t at = eol; at != std::string::npos && at + 2 < head.size();) {
    const size_t next = head.find("\r\n", at + 2);
    const std::string h =
        head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    const size_t colon = h.find(':');
    if (colon != std::string::npos && Lower(h.substr(0, colon)) == "host") {
      host = h.substr(colon + 1);
      ++hosts;
    }
    at = next;
  }
  if (hosts != 1 || !IsLoopbackHost(host))
    return Response(403, "Forbidden", "text/plain",
                    "the live view answers requests to a loopback host only (localhost, "
                    "127.0.0.1, [::1])\n",
                    is_head);
  const size_t q = target.find('?');
  const std::string path = target.substr(0, q);
  const std::string query = q == std::string::npos ? "" : target.substr(q + 1);
  if (path == "/")
    return Response(200, "OK", "text/html; charset=utf-8",
                    RenderLivePage(title, state->StateJson()), is_head);
  if (path == "/api/state")
    return Response(200, "OK", "application/json", state->StateJson(), is_head);
  if (path == "/api/events") {
    uint64_t since = 0;
    for (const absl::string_view kv : absl::StrSplit(query, '&')) {
      if (absl::StartsWith(kv, "since=") && !absl::SimpleAtoi(kv.substr(6), &since))
        return Response(400, "Bad Request", "application/json",
                        "{\"error\":\"since must be a number\"}", is_head);
    }
    return Response(200, "OK", "application/json", state->EventsJson(since, 1000), is_head);
  }
  return Response(404, "Not Found", "text/plain", "not found\n", is_head);
}

void LiveServer::Impl::Loop() {
  std::deque<Connection> conns;  // oldest first
  std::vector<pollfd> fds;
  // Out of descriptors (EMFILE) with no connection to close: the listening
  // socket stays readable, so it is left out of the poll until then (it
  // made the loop spin at full CPU).
  auto accept_paused_until = std::chrono::steady_clock::time_point::min();
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    // Past their deadline: closed.
    for (auto it = conns.begin(); it != conns.end();) {
      if (it->deadline <= now) {
        close(it->fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    auto next = now + std::chrono::seconds(60);
    fds.clear();
    fds.push_back({wake[0], POLLIN, 0});
    const bool accepting = now >= accept_paused_until;
    fds.push_back({accepting ? listen_fd : -1, POLLIN, 0});
    if (!accepting) next = std::min(next, accept_paused_until);
    for (const Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.writing ? POLLOUT : POLLIN), 0});
      next = std::min(next, c.deadline);
    }
    const int timeout_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1);
    if (poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;  // Stop()
    // Serve the ready connections (in the order of fds, before accepting, so
    // that the indices still match).
    size_t i = 2;
    for (auto it = conns.begin(); it != conns.end(); ++i) {
      Connection& c = *it;
      const short ev = fds[i].revents;
      bool done = false;
      if (ev & (POLLERR | POLLNVAL)) {
        done = true;
      } else if (!c.writing && (ev & (POLLIN | POLLHUP))) {
        char buf[4096];
        const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          done = true;
        } else if (n > 0) {
          c.in.append(buf, static_cast<size_t>(n));
          // The end of the header: a blank line, CRLF or (RFC 9112 section
          // 2.2 lets a recipient take it) a bare LF.
          size_t end = c.in.find("\r\n\r\n");
          if (const size_t lf = c.in.find("\n\n"); lf != std::string::npos && lf < end) end = lf;
          if (end != std::string::npos) {
            // Lines end in CRLF for Handle, whichever the client sent.
            std::string head;
            for (char ch : std::string_view(c.in).substr(0, end)) {
              if (ch == '\r') continue;
              if (ch == '\n') head += '\r';
              head += ch;
            }
            c.out = Handle(head);
            c.writing = true;
          } else if (c.in.size() > kMaxRequestBytes) {
            c.out = Response(431, "Request Header Fields Too Large", "text/plain",
                             "request too large\n", false);
            c.writing = true;
          }
        }
      }
      if (!done && c.writing && (ev & POLLOUT || c.out_off == 0)) {
        const ssize_t n =
            send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
        if (n > 0) c.out_off += static_cast<size_t>(n);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) done = true;
        if (c.out_off == c.out.size()) {
          shutdown(c.fd, SHUT_WR);
          done = true;
        }
      }
      if (done) {
        close(c.fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    if (fds[1].revents & POLLIN) {
      // The deadline counts from now, not from before the poll (which may
      // have waited for a minute).
      const auto accepted = std::chrono::steady_clock::now();
      for (;;) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
          // Out of descriptors: the oldest connection goes to make room, or,
          // with none, accepting waits a little.
          if (!conns.empty()) {
            close(conns.front().fd);
            conns.pop_front();
            continue;
          }
          accept_paused_until = accepted + std::chrono::milliseconds(100);
          break;
        }
        if (fd < 0) break;  // EAGAIN (none left) or an error on that one connection
        if (conns.size() >= kMaxConnections) {  // the oldest goes
          close(conns.front().fd);
          conns.pop_front();
        }
        conns.push_back(Connection{fd, {}, {}, 0, false, accepted + kConnectionDeadline});
      }
    }
  }
  for (const Connection& c : conns) close(c.fd);
}

absl::StatusOr<std::unique_ptr<LiveServer>> LiveServer::Start(const std::string& host, int port,
                                                              LiveState* state, std::string title) {
  std::unique_ptr<LiveServer> s(new LiveServer());
  s->impl_ = std::make_unique<Impl>();
  s->host_ = host;
  Impl* impl = s->impl_.get();
  impl->state = state;
  impl->title = std::move(title);
  auto fail = [&](const std::string& what) {
    return absl::UnavailableError(absl::StrCat("--serve: cannot listen on ", host, ":", port, " (",
                                               what, ": ", std::strerror(errno), ")"));
  };
  sockaddr_storage addr{};
  socklen_t len = 0;
  in_addr v4;
  in6_addr v6;
  const std::string h = host == "localhost" ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1) {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr = v4;
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = v6;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(sockaddr_in6);
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--serve: not an address: ", host));
  }
  impl->listen_fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (impl->listen_fd < 0) return fail("socket");
  // SO_REUSEADDR only (no SO_REUSEPORT: no other process may bind the port).
  int yes = 1;
  setsockopt(impl->listen_fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  if (bind(impl->listen_fd, reinterpret_cast<sockaddr*>(&addr), len) != 0)
    return fail("bind, is the port in use?");
  if (listen(impl->listen_fd, 64) != 0) return fail("listen");
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  if (getsockname(impl->listen_fd, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0)
    return fail("getsockname");
  s->port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (pipe2(impl->wake, O_CLOEXEC | O_NONBLOCK) != 0) return fail("pipe");
  impl->thread = std::thread([impl] { impl->Loop(); });
  return s;
}

std::string LiveServer::url() const {
  return host_.find(':') != std::string::npos ? absl::StrCat("http://[", host_, "]:", port_, "/")
                                              : absl::StrCat("http://", host_, ":", port_, "/");
}

void LiveServer::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  if (!impl_->thread.joinable()) return;
  const char byte = 1;
  while (write(impl_->wake[1], &byte, 1) < 0 && errno == EINTR) {
  }
  impl_->thread.join();
  close(impl_->listen_fd);  // the port is free again
  impl_->listen_fd = -1;
}

LiveServer::~LiveServer() { Stop(); }

namespace {

// The page's drawing of the job graph, the checkpoints and the live charts
// (plain SVG made by the script: nothing from the network).
constexpr const char* kLiveGraphScript = R"JS(
  var SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, children) {
    var e = document.createElementNS(SVG, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  // Back-pressure levels, coloured as Flink's web UI does.
  var BP = {ok: '#52a552', low: '#f0a030', high: '#d9443f'};
  var BP_LIGHT = {ok: '#e3f2e3', low: '#fdf0d8', high: '#f8dcdb'};
  // Series colours: input channel c is PALETTE[c], as in the timeline page.
  var PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf',
                 '#bcbd22', '#7f7f7f', '#aec7e8'];
  // The aligned minimum: a wide grey band under the channels' lines, so the
  // channel that holds it shows inside it.
  var ALIGNED = {stroke: '#000', width: 8, opacity: 0.18};
  function short(text) {  // "1970-01-01 00:00:01.400" -> "00:00:01.400"
    var i = text.indexOf(' ');
    return i > 0 ? text.substring(i + 1) : text;
  }
  function clip(text, n) { return text.length > n ? text.substring(0, n - 1) + '…' : text; }
  var legendDone = false;
  function renderGraph(s) {
    var root = document.getElementById('graph');
    root.textContent = '';
    var g = s.graph;
    if (!g || !g.vertices.length) return;
    if (!legendDone) {
      legendDone = true;
      var lg = document.getElementById('bp-legend');
      lg.appendChild(document.createTextNode('back-pressure (how full a subtask’s output channels are): '));
      [['ok', 'ok: below half full'], ['low', 'low: half full or more'],
       ['high', 'high: a channel is full, the producer waits']].forEach(function (l) {
        lg.appendChild(el('span', {'class': 'legend-item bp-' + l[0]}, [
          (function () { var sw = svg('svg', {width: 14, height: 10});
                         sw.appendChild(svg('rect', {x: 0, y: 0, width: 14, height: 10, fill: BP[l[0]]}));
                         return sw; })(), l[1]]));
      });
    }
    var depth = {};
    g.vertices.forEach(function (v) { depth[v.id] = 0; });
    for (var round = 0; round < g.vertices.length; ++round) {
      g.edges.forEach(function (e) {
        if (depth[e.to] < depth[e.from] + 1) depth[e.to] = depth[e.from] + 1;
      });
    }
    var W = 270, GAP = 170, ROW = 17, MAX_ROWS = 8;
    var box = {}, colY = {}, width = 0, height = 0;
    g.vertices.forEach(function (v) {
      var rows = Math.min(v.subtasks.length, MAX_ROWS) + (v.subtasks.length > MAX_ROWS ? 1 : 0);
      var head = 10 + 15 * v.operators.length + 18;
      var h = head + ROW * rows + 8;
      var d = depth[v.id];
      var y = colY[d] === undefined ? 10 : colY[d];
      var x = 10 + d * (W + GAP);
      box[v.id] = {x: x, y: y, h: h, head: head};
      colY[d] = y + h + 30;
      width = Math.max(width, x + W + 10);
      height = Math.max(height, y + h + 10);
    });
    root.setAttribute('width', width);
    root.setAttribute('height', height);
    var pairs = {};
    g.edges.forEach(function (e) {
      var a = box[e.from], b = box[e.to];
      if (!a || !b) return;
      var key = e.from + '-' + e.to;
      var k = pairs[key] = (pairs[key] || 0) + 1;
      var x1 = a.x + W, y1 = a.y + a.h / 2 + (k - 1) * 12, x2 = b.x, y2 = b.y + b.h / 2 + (k - 1) * 12;
      var mx = (x1 + x2) / 2;
      var colour = e.backpressure === 'ok' ? '#888' : BP[e.backpressure];
      var ge = svg('g', {'class': 'edge', 'data-edge': e.id, 'data-from': e.from, 'data-to': e.to,
                         'data-ship-strategy': e.ship_strategy, 'data-backpressure': e.backpressure});
      ge.appendChild(svg('path', {d: 'M' + x1 + ',' + y1 + ' C' + mx + ',' + y1 + ' ' + mx + ',' + y2 +
                                     ' ' + x2 + ',' + y2,
                                  fill: 'none', stroke: colour, 'stroke-width': 2}));
      ge.appendChild(svg('path', {d: 'M' + (x2 - 8) + ',' + (y2 - 5) + ' L' + x2 + ',' + y2 + ' L' +
                                     (x2 - 8) + ',' + (y2 + 5) + ' Z', fill: colour}));
      var ly = (y1 + y2) / 2 - 6;
      ge.appendChild(svg('text', {x: mx, y: ly, 'text-anchor': 'middle', 'font-size': 12,
                                  'font-weight': 'bold', fill: '#333', 'class': 'ship-strategy', stroke: '#fff', 'stroke-width': 4, 'paint-order': 'stroke'},
                         [e.ship_strategy]));
      ge.appendChild(svg('text', {x: mx, y: ly + 13, 'text-anchor': 'middle', 'font-size': 10, fill: '#666', stroke: '#fff', 'stroke-width': 4, 'paint-order': 'stroke'},
                         [(e.side_output ? 'side output ‘' + e.side_output + '’, ' : '') +
                          e.channels + ' channel' + (e.channels === 1 ? '' : 's') +
                          (e.fill > 0 ? ', ' + Math.round(e.fill * 100) + '% full' : '')]));
      ge.appendChild(svg('title', {}, [e.partitioning]));
      root.appendChild(ge);
    });
    g.vertices.forEach(function (v) {
      var b = box[v.id];
      var gv = svg('g', {'class': 'vertex', 'data-vertex': v.id, 'data-parallelism': v.parallelism,
                         'data-backpressure': v.backpressure,
                         transform: 'translate(' + b.x + ',' + b.y + ')'});
      gv.appendChild(svg('title', {}, [v.name]));
      gv.appendChild(svg('rect', {x: 0, y: 0, width: W, height: b.h, rx: 5, fill: '#fff',
                                  stroke: BP[v.backpressure], 'stroke-width': 2}));
      gv.appendChild(svg('rect', {x: 1, y: 1, width: W - 2, height: b.head - 4, rx: 4,
                                  fill: BP_LIGHT[v.backpressure]}));
      v.operators.forEach(function (op, i) {
        gv.appendChild(svg('text', {x: 8, y: 18 + 15 * i, 'font-size': 12, 'font-weight': i ? 'normal' : 'bold',
                                    'class': 'operator'},
                           [(i ? '→ ' : '') + clip(op, 36)]));
      });
      gv.appendChild(svg('text', {x: 8, y: b.head - 9, 'font-size': 11, fill: '#444'},
                         ['parallelism ' + v.parallelism + ' · ' +
                          (v.source ? 'output' : 'input') + ' watermark ' + short(v.watermark_text)]));
      v.subtasks.slice(0, MAX_ROWS).forEach(function (st, i) {
        var y = b.head + ROW * i + 10;
        var row = svg('g', {'class': 'subtask', 'data-vertex': v.id, 'data-subtask': st.subtask,
                            'data-watermark': st.watermark, 'data-backpressure': st.backpressure,
                            'data-output-fill': st.output_fill, 'data-input-fill': st.input_fill});
        row.appendChild(svg('text', {x: 8, y: y, 'font-size': 11, 'font-family': 'monospace'},
                            ['#' + st.subtask + (st.finished ? ' done ' : '  ') + short(st.watermark_text)]));
        row.appendChild(svg('rect', {x: 170, y: y - 9, width: 60, height: 10, fill: '#eee', stroke: '#ccc'}));
        row.appendChild(svg('rect', {x: 170, y: y - 9, width: 60 * Math.min(1, st.output_fill), height: 10,
                                     fill: BP[st.backpressure]}));
        row.appendChild(svg('text', {x: 236, y: y, 'font-size': 10, fill: BP[st.backpressure]},
                            [st.backpressure.toUpperCase()]));
        row.appendChild(svg('title', {}, ['subtask ' + st.subtask + ': watermark ' + st.watermark_text +
                                          ', output channels ' + Math.round(st.output_fill * 100) +
                                          '% full, input channels ' + Math.round(st.input_fill * 100) +
                                          '% full, records in ' + st.records_in + ', out ' + st.records_out +
                                          (st.generalized_watermarks || []).map(function (g) {
                                            return '; ' + g.identifier + ' sent ' + g.sent +
                                                ', combined ' + g.combined;
                                          }).join('')]));
        gv.appendChild(row);
      });
      if (v.subtasks.length > MAX_ROWS)
        gv.appendChild(svg('text', {x: 8, y: b.head + ROW * MAX_ROWS + 10, 'font-size': 11, fill: '#666'},
                           ['+' + (v.subtasks.length - MAX_ROWS) + ' more subtasks']));
      root.appendChild(gv);
    });
  }
  function renderCheckpoints(s) {
    var c = s.checkpoints || {enabled: false};
    var t = document.getElementById('checkpoints');
    t.setAttribute('data-enabled', String(c.enabled));
    var body = t.querySelector('tbody');
    body.textContent = '';
    function row(k, v, cls) {
      body.appendChild(el('tr', {'class': cls || ''}, [el('th', {}, [k]), el('td', {'class': 'v'}, [String(v)])]));
    }
    var r = s.restarts || {num_restarts: 0};
    if (r.num_restarts > 0) row('numRestarts', r.num_restarts + ', last cause: ' + r.last_cause, 'restarts flag on');
    if (!c.enabled) { row('checkpointing', 'off (--checkpoint-dir turns it on)'); return; }
    t.setAttribute('data-in-progress', c.in_progress);
    t.setAttribute('data-completed', c.completed);
    t.setAttribute('data-failed', c.failed);
    row('in progress', c.in_progress >= 0 ? 'checkpoint ' + c.in_progress + ' for ' + c.in_progress_ms + ' ms' : 'none', 'in-progress');
    row('completed', c.completed, 'completed');
    var l = c.last_completed;
    row('last completed', l ? 'checkpoint ' + l.id + ' at ' + l.at_text + ', took ' + l.duration_ms + ' ms, ' +
        l.size_bytes + ' bytes, alignment ' + l.alignment_ms + ' ms' : 'none yet', 'last-completed');
    row('longest', c.max_duration_ms + ' ms; alignment ' + c.max_alignment_ms + ' ms', 'longest');
    row('failed', c.failed + (c.last_failure ? ', last: ' + c.last_failure : ''), 'failed' + (c.failed ? ' flag on' : ''));
    if (c.restored_id >= 0) row('restored from', 'checkpoint ' + c.restored_id, 'restored');
  }
  function pad(n, w) { n = String(n); while (n.length < w) n = '0' + n; return n; }
  function timeLabel(ms, offset, step) {
    var d = new Date(ms + offset);
    var t = pad(d.getUTCHours(), 2) + ':' + pad(d.getUTCMinutes(), 2) + ':' + pad(d.getUTCSeconds(), 2);
    return step < 1000 ? t + '.' + pad(d.getUTCMilliseconds(), 3) : t;
  }
  function niceStep(range, n) {
    var raw = range / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  var NONE = 9.2e18;  // watermarks at MIN (none yet) or MAX (the end) are not drawn as values
  function renderCharts(s) {
    var root = document.getElementById('charts');
    root.textContent = '';
    var h = s.history;
    if (!h) return;
    document.getElementById('charts-title').textContent =
        'Watermarks of each input channel and the aligned minimum, last ' + Math.round(h.window_ms / 1000) + ' s';
    var now = s.ended_ms >= 0 ? s.ended_ms : s.t_ms;
    // The last window_ms, or since the start while the job is younger.
    var x0 = Math.max(0, now - h.window_ms), span = Math.max(1000, now - x0);
    var groups = {}, order = [];
    h.series.forEach(function (se) {
      var key = se.kind + '/' + se.subtask;
      if (!groups[key]) { groups[key] = []; order.push(key); }
      groups[key].push(se);
    });
    order.forEach(function (key) {
      var series = groups[key];
      var kind = series[0].kind, subtask = series[0].subtask;
      var lo = Infinity, hi = -Infinity;
      series.forEach(function (se) {
        se.points.forEach(function (p) {
          if (Math.abs(p[1]) < NONE) { lo = Math.min(lo, p[1]); hi = Math.max(hi, p[1]); }
        });
      });
      var W = 900, H = 230, L = 100, R = 20, T = 12, B = 28;
      var chart = svg('svg', {'class': 'chart', 'data-kind': kind, 'data-subtask': subtask,
                              width: W, height: H, xmlns: SVG});
      chart.appendChild(svg('rect', {x: L, y: T, width: W - L - R, height: H - T - B, fill: '#fcfcfc', stroke: '#ccc'}));
      if (lo === Infinity) { lo = 0; hi = 1; }
      if (hi - lo < 1) { lo -= 500; hi += 500; }
      var yspan = hi - lo; lo -= yspan * 0.05; hi += yspan * 0.05;
      function X(t) { return L + (Math.max(t, x0) - x0) / span * (W - L - R); }
      function Y(v) { return T + (hi - v) / (hi - lo) * (H - T - B); }
      var ystep = niceStep(hi - lo, 4);
      for (var v = Math.ceil(lo / ystep) * ystep; v <= hi; v += ystep) {
        chart.appendChild(svg('line', {x1: L, x2: W - R, y1: Y(v), y2: Y(v), stroke: '#e6e6e6'}));
        chart.appendChild(svg('text', {x: L - 6, y: Y(v) + 4, 'text-anchor': 'end', 'font-size': 10, fill: '#555'},
                              [kind === 'event_time' ? timeLabel(v, s.zone_offset_ms || 0, ystep) : String(v)]));
      }
      // Seconds before now, on round values.
      var xstep = niceStep(span / 1000, 6);
      for (var ago = 0; ago * 1000 <= span + 1; ago += xstep) {
        chart.appendChild(svg('text', {x: X(now - ago * 1000), y: H - 10, 'text-anchor': 'middle',
                                       'font-size': 10, fill: '#555'},
                              [ago === 0 ? 'now' : '-' + (+ago.toFixed(3)) + ' s']));
      }
      // The aligned minimum first (a band under the channels' lines).
      series.sort(function (a, b) { return (b.channel < 0) - (a.channel < 0) || a.channel - b.channel; });
      var legend = el('div', {'class': 'legend', 'data-kind': kind, 'data-subtask': subtask});
      series.forEach(function (se) {
        var style = se.channel < 0 ? ALIGNED : {stroke: PALETTE[se.channel % PALETTE.length], width: 1.6};
        var pts = [], last = null, ended = false;
        se.points.forEach(function (p) {
          if (ended) return;
          var t = p[0], v = p[1];
          if (v <= -NONE) return;  // no watermark yet
          if (v >= NONE) { if (last !== null) pts.push(X(t) + ',' + Y(last)); ended = true; return; }
          if (last !== null) pts.push(X(t) + ',' + Y(last));
          pts.push(X(t) + ',' + Y(v));
          last = v;
        });
        if (!ended && last !== null) pts.push(X(now) + ',' + Y(last));
        var attrs = {'class': se.channel < 0 ? 'series aligned' : 'series channel', 'data-kind': kind,
                     'data-subtask': subtask, 'data-channel': se.channel, points: pts.join(' '),
                     fill: 'none', stroke: style.stroke, 'stroke-width': style.width};
        if (style.opacity) attrs['stroke-opacity'] = style.opacity;
        chart.appendChild(svg('polyline', attrs));
        var sw = svg('svg', {width: 30, height: 10});
        var la = {x1: 0, x2: 30, y1: 5, y2: 5, stroke: style.stroke, 'stroke-width': style.width};
        if (style.opacity) la['stroke-opacity'] = style.opacity;
        sw.appendChild(svg('line', la));
        legend.appendChild(el('span', {'class': 'legend-item', 'data-channel': se.channel, 'data-colour': style.stroke},
                              [sw, se.channel < 0 ? 'aligned minimum' : 'channel ' + se.channel]));
      });
      root.appendChild(el('h4', {}, [(kind === 'event_time' ? 'Event-time watermarks' : kind + ' watermarks') +
                                     ' of window subtask ' + subtask]));
      root.appendChild(chart);
      root.appendChild(legend);
    });
  }
)JS";

}  // namespace

std::string RenderLivePage(const std::string& title, const std::string& state_json) {
  // The state inside a <script> element: no "</script>" may appear in it.
  const std::string embedded = absl::StrReplaceAll(state_json, {{"<", "\\u003c"}});
  const std::string t = absl::StrReplaceAll(title, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}});
  return absl::StrCat(R"(<!DOCTYPE html>
<html><head><meta charset='utf-8'><title>)",
                      t, R"(</title>
<style>
body{font-family:sans-serif;margin:16px;color:#222}
table{border-collapse:collapse;margin:4px 0 12px}
th,td{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}
th{background:#f3f3f3}
.idle{color:#999}
.holding td{background:#fff3cd}
.unaligned td.valve{color:#a33}
.flag{font-size:11px;padding:1px 4px;border-radius:3px;background:#eee}
.flag.on{background:#f8d7da}
#status{padding:6px;border:1px solid #e0d890;background:#fffbe6;margin-bottom:10px}
#log{font-family:monospace;font-size:12px;max-height:320px;overflow:auto;border:1px solid #ddd;
padding:4px;list-style:none;margin:0}
#log li.unknown{color:#7a3e9d}
svg text{font-family:sans-serif}
#graph-wrap,#charts{overflow-x:auto}
.legend{font-size:12px;margin:2px 0 14px}
.legend-item{display:inline-block;margin-right:14px;white-space:nowrap}
.legend-item svg{vertical-align:middle;margin-right:4px}
#checkpoints td.v{font-family:monospace}
</style></head><body>
<h2>)",
                      t, R"(</h2>
<div id='status'>loading</div>
<h3>Job graph</h3>
<div id='graph-wrap'><svg id='graph' xmlns='http://www.w3.org/2000/svg' width='10' height='10'></svg></div>
<div class='legend' id='bp-legend'></div>
<h3>Checkpoints</h3>
<table id='checkpoints'><tbody></tbody></table>
<h3 id='charts-title'>Watermarks</h3>
<div id='charts'></div>
<h3>Sources</h3>
<table id='sources'><thead><tr><th>source subtask</th><th>watermark</th><th>idle</th>
<th>paused</th><th>records</th></tr></thead><tbody></tbody></table>
<div id='windows'></div>
<h3 id='gw-title'>Generalized watermarks</h3>
<table id='generalized'><thead><tr><th>task</th><th>subtask</th><th>watermark</th>
<th>combined by</th><th>sent</th><th>combined (input)</th><th>per input channel</th></tr></thead>
<tbody></tbody></table>
<h3>Events</h3>
<label><input type='checkbox' id='steps'> show every watermark step</label>
<ul id='log'></ul>
<script id='initial' type='application/json'>)",
                      embedded, R"(</script>
<script>
(function () {
  'use strict';
  function el(tag, attrs, children) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    (children || []).forEach(function (c) {
      e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c);
    });
    return e;
  }
  function flag(on, text) { return el('span', {'class': on ? 'flag on' : 'flag'}, [on ? text : '-']); }
)",
                      kLiveGraphScript, R"(
  function render(s) {
    renderGraph(s);
    renderCheckpoints(s);
    renderCharts(s);
    var status = s.status + (s.message ? ': ' + s.message : '') + ' - ' +
        (s.ended_ms >= 0 ? 'ended after ' + (s.ended_ms / 1000).toFixed(1) + ' s'
                         : (s.t_ms / 1000).toFixed(1) + ' s') +
        ' - ' + s.totals.records + ' records, ' + s.totals.window_results + ' window results, ' +
        s.totals.late_side + ' late (side output), ' + s.totals.late_dropped + ' late dropped';
    var st = document.getElementById('status');
    st.textContent = status;
    st.setAttribute('data-status', s.status);
    var body = document.querySelector('#sources tbody');
    body.textContent = '';
    s.sources.forEach(function (src) {
      body.appendChild(el('tr', {'class': 'source-row' + (src.idle ? ' idle' : ''),
                                 'data-subtask': src.subtask, 'data-watermark': src.watermark},
        [el('td', {}, [String(src.subtask)]), el('td', {'class': 'wm'}, [src.watermark_text]),
         el('td', {}, [flag(src.idle, 'idle')]), el('td', {}, [flag(src.paused, 'paused')]),
         el('td', {}, [String(src.records)])]));
    });
    var gbody = document.querySelector('#generalized tbody');
    gbody.textContent = '';
    (s.generalized_watermarks || []).forEach(function (g) {
      var shown = function (v) { return v === null ? '-' : String(v); };
      gbody.appendChild(el('tr', {'class': 'gw-row', 'data-task': g.task, 'data-subtask': g.subtask,
                                  'data-identifier': g.identifier, 'data-sent': shown(g.sent),
                                  'data-combined': shown(g.combined)},
        [el('td', {}, [g.task]), el('td', {}, [String(g.subtask)]),
         el('td', {}, [g.identifier + ' (' + g.type + ')']),
         el('td', {}, [g.function + (g.wait_for_all_channels ? ', waits for all channels' : '')]),
         el('td', {'class': 'sent'}, [shown(g.sent)]),
         el('td', {'class': 'combined'}, [shown(g.combined) +
             (g.combined_channel >= 0 ? ' (last from channel ' + g.combined_channel + ')' : '')]),
         el('td', {'class': 'per-channel'}, [g.channels.map(function (c) {
           return c.channel + ': ' + shown(c.value);
         }).join(', ')])]));
    });
    var windows = document.getElementById('windows');
    windows.textContent = '';
    s.windows.forEach(function (w) {
      windows.appendChild(el('h3', {}, ['Window subtask ' + w.subtask]));
      var head = w.input_ended
          ? ['input ended: every channel is at its end (MAX), nothing holds the windows back']
          : ['aligned minimum: ', el('b', {}, [w.aligned_text]),
             w.holding >= 0 ? ' (held back by channel ' + w.holding + ')' : '',
             w.idle ? ' - all channels idle' : ''];
      windows.appendChild(el('p', {'class': 'aligned', 'data-subtask': w.subtask,
                                   'data-watermark': w.aligned,
                                   'data-ended': w.input_ended ? 'true' : 'false'},
        head.concat([' - fired on time ' + w.firings.on_time + ', late ' + w.firings.late +
         ', at the MAX watermark ' + w.firings.end_of_input + '; late records ' + w.late_records +
         ' to the side output, ' + w.late_dropped + ' dropped'])));
      var rows = w.channels.map(function (c) {
        var holding = c.channel === w.holding;
        return el('tr', {'class': 'channel-row' + (c.idle ? ' idle' : '') + (holding ? ' holding' : '') +
                                   (c.aligned ? '' : ' unaligned'),
                         'data-subtask': w.subtask, 'data-channel': c.channel,
                         'data-watermark': c.watermark, 'data-aligned': String(c.aligned)},
          [el('td', {}, [String(c.channel)]), el('td', {'class': 'wm'}, [c.watermark_text]),
           el('td', {}, [flag(c.idle, 'idle')]),
           el('td', {'class': 'valve'}, [c.aligned ? 'aligned'
               : c.idle ? 'not counted (idle)'
               : 'unaligned: back from idleness, not counted until it catches up']),
           el('td', {}, [holding ? 'holds the minimum back' : ''])]);
      });
      windows.appendChild(el('table', {'class': 'channels', 'data-subtask': w.subtask},
        [el('thead', {}, [el('tr', {}, [el('th', {}, ['input channel']), el('th', {}, ['watermark']),
                                         el('th', {}, ['idle']), el('th', {}, ['valve']),
                                         el('th', {}, [''])])]),
         el('tbody', {}, rows)]));
    });
  }
  // How each kind of event reads in the log; any other kind is shown with
  // its fields as they came.
  var describe = {
    source_watermark: function (e) { return 'source ' + e.subtask + ' watermark ' + e.watermark_text; },
    source_status: function (e) { return 'source ' + e.subtask + (e.idle ? ' is idle' : ' is active'); },
    source_pause: function (e) { return 'source ' + e.subtask + (e.paused ? ' paused' : ' resumed'); },
    channel: function (e) {
      return 'window ' + e.subtask + ' channel ' + e.channel + ' -> ' + e.watermark_text +
          (e.idle ? ' (idle)' : e.channel_aligned ? '' : ' (unaligned)') + '; aligned ' + e.aligned_text +
          (e.holding >= 0 ? ', held back by channel ' + e.holding : '');
    },
    firing: function (e) {
      return 'window ' + e.subtask + ' fired ' + e.firing + ': key ' + e.key + ' [' + e.start_text +
          ', ' + e.end_text + ') ' + e.value;
    },
    late: function (e) { return 'late record on window ' + e.subtask + ': key ' + e.key + ' at ' + e.ts_text; },
    barrier: function (e) {
      return (e.source ? 'source ' : 'window ') + e.subtask + ' barrier ' + e.checkpoint +
          (e.source ? '' : ' aligned in ' + e.alignment_ms + ' ms');
    },
    generalized_watermark: function (e) {
      return e.task + ' subtask ' + e.subtask +
          (e.direction === 'in' ? ' combined (channel ' + e.channel + ') ' : ' sent ') +
          e.identifier + '=' + e.value;
    }
  };
  var steps = {source_watermark: true, channel: true};
  function line(e) {
    var f = describe[e.kind];
    if (f) return f(e);
    var rest = {};
    for (var k in e) if (k !== 'seq' && k !== 'kind' && k !== 't_ms') rest[k] = e[k];
    return e.kind + ' ' + JSON.stringify(rest);
  }
  var log = document.getElementById('log');
  function add(e) {
    if (steps[e.kind] && !document.getElementById('steps').checked) return;
    var li = el('li', {'class': (describe[e.kind] ? 'known ' : 'unknown ') + e.kind,
                       'data-kind': e.kind},
                [(e.t_ms / 1000).toFixed(3) + ' s  ' + line(e)]);
    log.insertBefore(li, log.firstChild);
    while (log.childNodes.length > 300) log.removeChild(log.lastChild);
  }
  var state = JSON.parse(document.getElementById('initial').textContent);
  render(state);
  var next = 0;
  function poll() {
    Promise.all([
      fetch('/api/state', {cache: 'no-store'}).then(function (r) { return r.json(); }).then(render),
      fetch('/api/events?since=' + next, {cache: 'no-store'}).then(function (r) { return r.json(); })
        .then(function (d) {
          if (d.dropped > 0) add({kind: 'dropped', t_ms: 0, events: d.dropped});
          d.events.forEach(add);
          next = d.next;
        })
    ]).catch(function () {
      document.getElementById('status').setAttribute('data-connection', 'lost');
    }).then(function () { setTimeout(poll, 500); });
  }
  poll();
})();
</script>
</body></html>
)");
}

}  // namespace tidemark::cli
