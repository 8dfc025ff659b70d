#include "tools/cli/live_view.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
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
      w.channels[e.channel] = Channel{e.watermark, e.idle, e.channel_aligned};
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
    // Every channel at its end: nothing holds the minimum back any more.
    const bool ended = w.aligned == kMaxWatermark;
    absl::StrAppend(&j, first ? "" : ",", "{\"subtask\":", subtask, ",\"aligned\":", w.aligned,
                    ",\"aligned_text\":", Time(w.aligned), ",\"holding\":", ended ? -1 : w.holding,
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
    fds.push_back({listen_fd, POLLIN, 0});
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
          const size_t end = c.in.find("\r\n\r\n");
          if (end != std::string::npos) {
            c.out = Handle(c.in.substr(0, end));
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
      for (;;) {
        const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;  // EAGAIN (none left) or an error on that one connection
        if (conns.size() >= kMaxConnections) {  // the oldest goes
          close(conns.front().fd);
          conns.pop_front();
        }
        conns.push_back(Connection{fd, {}, {}, 0, false, now + kConnectionDeadline});
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
      var head = w.input_ended
          ? ['input ended: every channel is at its end (MAX), nothing holds the windows back']
          : ['aligned minimum: ', el('b', {}, [w.aligned_text]),
             w.holding >= 0 ? ' (held back by channel ' + w.holding + ')' : '',
             w.idle ? ' - all channels idle' : ''];
      windows.appendChild(el('p', {'class': 'aligned', 'data-subtask': w.subtask,
                                   'data-watermark': w.aligned,
                                   'data-ended': w.input_ended ? 'true' : 'false'},
        head.concat([' - fired on time ' + w.firings.on_time + ', late ' + w.firings.late +
         ', at end of input ' + w.firings.end_of_input + '; late records ' + w.late_records])));
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
