#include "tools/cli/live_view.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "tidemark/runtime/core/detail/mutex.h"
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
           {"holding", absl::StrCat(e.holding)}};
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
    default:  // a kind added later: shown generically until it has a case here
      l.kind = absl::StrCat("event_", static_cast<int>(e.kind));
      l.channel = e.channel;
      break;
  }
  return l;
}

LiveState::LiveState(absl::TimeZone zone, size_t max_events)
    : zone_(zone), max_events_(max_events == 0 ? 1 : max_events) {}

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
      w.channels[e.channel] = Channel{e.watermark, e.idle};
      w.aligned = e.aligned;
      w.holding = e.holding;
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

void LiveState::SetEnded(const std::string& status, const std::string& message) {
  internal::MutexLock lock(&mu_);
  status_ = status;
  message_ = message;
  ended_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count();
}

std::string LiveState::StateJson() const {
  std::function<std::vector<SubtaskMetricsSnapshot>()> source;
  {
    internal::MutexLock lock(&mu_);
    source = metrics_;
  }
  std::vector<SubtaskMetricsSnapshot> metrics;
  if (source) metrics = source();
  std::map<int, int64_t> source_records;
  int64_t records = 0, late_dropped = 0;
  for (const auto& m : metrics) {
    if (m.task_name.rfind("Source", 0) == 0) {
      source_records[m.subtask] = m.records_in;
      records += m.records_in;
    }
    if (auto it = m.counters.find("numLateRecordsDropped"); it != m.counters.end())
      late_dropped += it->second;
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
    absl::StrAppend(&j, first ? "" : ",", "{\"subtask\":", subtask, ",\"aligned\":", w.aligned,
                    ",\"aligned_text\":", Time(w.aligned), ",\"holding\":", w.holding,
                    ",\"idle\":", Bool(all_idle), ",\"channels\":[");
    first = false;
    bool first_ch = true;
    for (const auto& [c, ch] : w.channels) {
      absl::StrAppend(&j, first_ch ? "" : ",", "{\"channel\":", c, ",\"watermark\":", ch.watermark,
                      ",\"watermark_text\":", Time(ch.watermark), ",\"idle\":", Bool(ch.idle), "}");
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
    absl::StrAppend(&j, "},\"late_records\":", w.late_records, "}");
  }
  absl::StrAppend(&j, "],\"totals\":{\"records\":", records, ",\"window_results\":", results,
                  ",\"late_side\":", late_side, ",\"late_dropped\":", late_dropped,
                  "},\"kinds\":{");
  first = true;
  for (const auto& [kind, n] : kinds_) {
    absl::StrAppend(&j, first ? "" : ",", JsonString(kind), ":", n);
    first = false;
  }
  absl::StrAppend(&j, "},\"next_event\":", first_seq_ + events_.size(), "}");
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

struct LiveServer::Impl {
  httplib::Server server;
  std::thread thread;
  internal::Mutex mu;
  internal::CondVar cv;
  bool done ABSL_GUARDED_BY(mu) = false;  // listen_after_bind returned
  bool stopped = false;                   // Stop() ran (by the owner's thread)
};

absl::StatusOr<std::unique_ptr<LiveServer>> LiveServer::Start(const std::string& host, int port,
                                                              LiveState* state, std::string title) {
  std::unique_ptr<LiveServer> s(new LiveServer());
  s->impl_ = std::make_unique<Impl>();
  s->host_ = host;
  Impl* impl = s->impl_.get();
  httplib::Server& svr = impl->server;
  // A few threads are plenty for a page polled by a browser or two.
  svr.new_task_queue = [] { return new httplib::ThreadPool(3); };
  // SO_REUSEADDR only: cpp-httplib's default adds SO_REUSEPORT, which would
  // let another process bind the same port.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  svr.set_keep_alive_timeout(1);  // bounds how long Stop() waits for an idle connection
  svr.set_read_timeout(5, 0);
  svr.set_write_timeout(5, 0);
  svr.Get("/", [state, title](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(RenderLivePage(title, state->StateJson()), "text/html; charset=utf-8");
  });
  svr.Get("/api/state", [state](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-store");
    res.set_content(state->StateJson(), "application/json");
  });
  svr.Get("/api/events", [state](const httplib::Request& req, httplib::Response& res) {
    uint64_t since = 0;
    if (req.has_param("since") && !absl::SimpleAtoi(req.get_param_value("since"), &since)) {
      res.status = 400;
      res.set_content("{\"error\":\"since must be a number\"}", "application/json");
      return;
    }
    res.set_header("Cache-Control", "no-store");
    res.set_content(state->EventsJson(since, 1000), "application/json");
  });
  const int bound =
      port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(
        absl::StrCat("--serve: cannot listen on ", host, ":", port, " (is the port in use?)"));
  }
  s->port_ = bound;
  impl->thread = std::thread([impl] {
    impl->server.listen_after_bind();
    internal::MutexLock lock(&impl->mu);
    impl->done = true;
    impl->cv.SignalAll();
  });
  return s;
}

std::string LiveServer::url() const {
  return host_.find(':') != std::string::npos ? absl::StrCat("http://[", host_, "]:", port_, "/")
                                              : absl::StrCat("http://", host_, ":", port_, "/");
}

void LiveServer::Stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  // stop() is lost when it comes before the listening loop has begun, so it
  // is repeated until that loop has ended.
  {
    internal::MutexLock lock(&impl_->mu);
    while (!impl_->done) {
      impl_->mu.Unlock();
      impl_->server.stop();
      impl_->mu.Lock();
      if (!impl_->done) impl_->cv.WaitFor(&impl_->mu, std::chrono::milliseconds(20));
    }
  }
  impl_->thread.join();
}

LiveServer::~LiveServer() { Stop(); }

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
.flag{font-size:11px;padding:1px 4px;border-radius:3px;background:#eee}
.flag.on{background:#f8d7da}
#status{padding:6px;border:1px solid #e0d890;background:#fffbe6;margin-bottom:10px}
#log{font-family:monospace;font-size:12px;max-height:320px;overflow:auto;border:1px solid #ddd;
padding:4px;list-style:none;margin:0}
#log li.unknown{color:#7a3e9d}
</style></head><body>
<h2>)",
                      t, R"(</h2>
<div id='status'>loading</div>
<h3>Sources</h3>
<table id='sources'><thead><tr><th>source subtask</th><th>watermark</th><th>idle</th>
<th>paused</th><th>records</th></tr></thead><tbody></tbody></table>
<div id='windows'></div>
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
  function render(s) {
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
    var windows = document.getElementById('windows');
    windows.textContent = '';
    s.windows.forEach(function (w) {
      windows.appendChild(el('h3', {}, ['Window subtask ' + w.subtask]));
      windows.appendChild(el('p', {'class': 'aligned', 'data-subtask': w.subtask,
                                   'data-watermark': w.aligned},
        ['aligned minimum: ', el('b', {}, [w.aligned_text]),
         w.holding >= 0 ? ' (held back by channel ' + w.holding + ')' : '',
         w.idle ? ' - all channels idle' : '',
         ' - fired on time ' + w.firings.on_time + ', late ' + w.firings.late +
         ', at end of input ' + w.firings.end_of_input + '; late records ' + w.late_records]));
      var rows = w.channels.map(function (c) {
        var holding = c.channel === w.holding;
        return el('tr', {'class': 'channel-row' + (c.idle ? ' idle' : '') + (holding ? ' holding' : ''),
                         'data-subtask': w.subtask, 'data-channel': c.channel,
                         'data-watermark': c.watermark},
          [el('td', {}, [String(c.channel)]), el('td', {'class': 'wm'}, [c.watermark_text]),
           el('td', {}, [flag(c.idle, 'idle')]),
           el('td', {}, [holding ? 'holds the minimum back' : ''])]);
      });
      windows.appendChild(el('table', {'class': 'channels', 'data-subtask': w.subtask},
        [el('thead', {}, [el('tr', {}, [el('th', {}, ['input channel']), el('th', {}, ['watermark']),
                                         el('th', {}, ['idle']), el('th', {}, [''])])]),
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
          (e.idle ? ' (idle)' : '') + '; aligned ' + e.aligned_text +
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
