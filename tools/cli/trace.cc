#include "tools/cli/trace.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "tidemark/runtime/exec/remote_exchange.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tools/cli/line_format.h"

namespace tidemark::cli {

void LinePrinter::Print(const std::string& line) {
  if (to_rank0_ && internal::ForwardLineToRank0(line)) return;
  internal::MutexLock lock(&mu_);
  (*out_) << line << '\n';
  out_->flush();
}

namespace {

// The length of the well-formed UTF-8 sequence starting at s[i] (Unicode
// table 3-7), or 0 with *bad set to the length (>= 1) of the maximal
// ill-formed subpart starting there.
size_t Utf8SequenceAt(absl::string_view s, size_t i, size_t* bad) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c == 0xE0) {
    n = 3;
    lo = 0xA0;
  } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
    n = 3;
  } else if (c == 0xED) {
    n = 3;
    hi = 0x9F;
  } else if (c == 0xF0) {
    n = 4;
    lo = 0x90;
  } else if (c >= 0xF1 && c <= 0xF3) {
    n = 4;
  } else if (c == 0xF4) {
    n = 4;
    hi = 0x8F;
  } else {
    *bad = 1;  // 80..C1, F5..FF never start a sequence
    return 0;
  }
  size_t k = 1;
  for (; k < n && i + k < s.size(); ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if (d < lo || d > hi) break;
    lo = 0x80;
    hi = 0xBF;
  }
  if (k == n) return n;
  *bad = k;
  return 0;
}

}  // namespace

bool IsValidUtf8(absl::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t bad = 0;
    const size_t n = Utf8SequenceAt(s, i, &bad);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string JsonString(absl::string_view s) {
  std::string out = "\"";
  out.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t bad = 0;
      const size_t n = Utf8SequenceAt(s, i, &bad);
      if (n == 0) {
        out += "\\ufffd";
        i += bad;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    ++i;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string JsonField(absl::string_view name, absl::string_view value) {
  std::string out = absl::StrCat(JsonString(name), ":", JsonString(value));
  if (!IsValidUtf8(value)) {
    absl::StrAppend(&out, ",", JsonString(absl::StrCat(name, "_hex")), ":\"",
                    absl::BytesToHexString(value), "\"");
  }
  return out;
}

TraceRecorder::TraceRecorder(LinePrinter* printer, OutputFormat format, bool print_trace,
                             bool keep_events, absl::TimeZone zone)
    : printer_(printer),
      format_(format),
      print_trace_(print_trace),
      keep_(keep_events),
      zone_(zone),
      start_(std::chrono::steady_clock::now()) {}

double TraceRecorder::NowMs() const {
  if (clock_) return clock_();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
      .count();
}

std::string TraceRecorder::Time(Timestamp ts) const { return FormatTime(ts, zone_); }

void TraceRecorder::Keep(TimelineEvent e) {
  e.records = lines_read_.load(std::memory_order_relaxed);
  if (observer_ != nullptr) observer_->OnTimelineEvent(e);
  if (!keep_) return;
  internal::MutexLock lock(&mu_);
  if (summary_ != nullptr) {
    summary_->Add(e);
    return;
  }
  events_.push_back(std::move(e));
  if (events_.size() >= bound_.exact_events) {
    // Past the bound: the summary takes over, from every event so far.
    summary_ = std::make_unique<TimelineSummary>(by_records_, bound_.buckets);
    for (const TimelineEvent& kept : events_) summary_->Add(kept);
    std::vector<TimelineEvent>().swap(events_);
  }
}

std::vector<TimelineEvent> TraceRecorder::events() const {
  internal::MutexLock lock(&mu_);
  if (summary_ != nullptr) return summary_->Events();
  return events_;
}

namespace {

size_t HeapBytes(const std::string& s) {
  return s.capacity() > std::string().capacity() ? s.capacity() + 1 : 0;
}

size_t HeapBytes(const TimelineEvent& e) {
  // A kGeneralized event's shared part is one per lane's task and
  // declaration: not counted per event.
  return HeapBytes(e.key) + HeapBytes(e.firing) + HeapBytes(e.value);
}

}  // namespace

size_t TraceRecorder::RetainedBytes() const {
  internal::MutexLock lock(&mu_);
  if (summary_ != nullptr) return summary_->RetainedBytes();
  size_t bytes = events_.capacity() * sizeof(TimelineEvent);
  for (const TimelineEvent& e : events_) bytes += HeapBytes(e);
  return bytes;
}

size_t TraceRecorder::RetainedEntries() const {
  internal::MutexLock lock(&mu_);
  return summary_ != nullptr ? summary_->RetainedEntries() : events_.size();
}

bool TraceRecorder::summarizing() const {
  internal::MutexLock lock(&mu_);
  return summary_ != nullptr;
}

std::string EncodeTimelineEvents(const std::vector<TimelineEvent>& events) {
  using internal::Encode;
  std::string out;
  internal::StateWriter w(&out);
  w.PutVarint(events.size());
  for (const TimelineEvent& e : events) {
    Encode(w, static_cast<int>(e.kind));
    Encode(w, e.t_ms);
    Encode(w, e.subtask);
    Encode(w, e.channel);
    Encode(w, e.watermark);
    Encode(w, e.aligned);
    Encode(w, e.idle);
    Encode(w, e.holding);
    Encode(w, e.key);
    Encode(w, e.start);
    Encode(w, e.end);
    Encode(w, e.ts);
    Encode(w, e.firing);
    Encode(w, e.value);
    Encode(w, e.checkpoint);
    Encode(w, e.source);
    Encode(w, e.alignment_ms);
    Encode(w, e.rank);
    Encode(w, e.channel_rank);
    Encode(w, e.channel_aligned);
    Encode(w, e.records);
    Encode(w, e.count);
    Encode(w, e.gw != nullptr);
    if (e.gw != nullptr) {
      Encode(w, e.gw->task);
      Encode(w, e.gw->identifier);
      Encode(w, e.gw->function);
      Encode(w, e.gw->is_bool);
      Encode(w, e.gw->wait_for_all);
      Encode(w, e.gw_value);
      Encode(w, e.gw_input);
    }
  }
  return out;
}

bool DecodeTimelineEvents(std::string_view bytes, std::vector<TimelineEvent>* events) {
  using internal::Decode;
  internal::StateReader r(bytes);
  std::map<std::tuple<std::string, std::string, std::string, bool, bool>,
           std::shared_ptr<const TimelineEvent::Generalized>>
      shared;
  const uint64_t n = r.GetCount("events");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    TimelineEvent e{static_cast<TimelineEvent::Kind>(Decode<int>(r)), 0};
    e.t_ms = Decode<double>(r);
    e.subtask = Decode<int>(r);
    e.channel = Decode<int>(r);
    e.watermark = Decode<Timestamp>(r);
    e.aligned = Decode<Timestamp>(r);
    e.idle = Decode<bool>(r);
    e.holding = Decode<int>(r);
    e.key = Decode<std::string>(r);
    e.start = Decode<Timestamp>(r);
    e.end = Decode<Timestamp>(r);
    e.ts = Decode<Timestamp>(r);
    e.firing = Decode<std::string>(r);
    e.value = Decode<std::string>(r);
    e.checkpoint = Decode<int64_t>(r);
    e.source = Decode<bool>(r);
    e.alignment_ms = Decode<double>(r);
    e.rank = Decode<int>(r);
    e.channel_rank = Decode<int>(r);
    e.channel_aligned = Decode<bool>(r);
    e.records = Decode<int64_t>(r);
    e.count = Decode<int64_t>(r);
    if (Decode<bool>(r)) {
      TimelineEvent::Generalized g;
      g.task = Decode<std::string>(r);
      g.identifier = Decode<std::string>(r);
      g.function = Decode<std::string>(r);
      g.is_bool = Decode<bool>(r);
      g.wait_for_all = Decode<bool>(r);
      // Shared between the events of one task and declaration, as kept.
      auto key = std::make_tuple(g.task, g.identifier, g.function, g.is_bool, g.wait_for_all);
      auto it = shared.find(key);
      if (it == shared.end())
        it = shared.emplace(key, std::make_shared<const TimelineEvent::Generalized>(std::move(g)))
                 .first;
      e.gw = it->second;
      e.gw_value = Decode<int64_t>(r);
      e.gw_input = Decode<bool>(r);
    }
    events->push_back(std::move(e));
  }
  return r.ok() && r.AtEnd();
}

// ---------------------------------------------------------------------------
// TimelineSummary (trace.h): the page's downsampling, done while recording.

struct TimelineSummary::Impl {
  using K = TimelineEvent::Kind;

  // Where an event is: processing time, records read, and its place in the
  // order events came (ties along the axis keep that order).
  struct At {
    double t = 0;
    int64_t records = 0;
    uint64_t seq = 0;
  };
  struct SourceSample {
    At at;
    Timestamp wm = kMinTimestamp;
  };
  // A real channel event: a point of its channel's lane and of its window
  // subtask's aligned minimum.
  struct ChannelSample {
    At at;
    Timestamp wm = kMinTimestamp, aligned = kMinTimestamp;
    int channel = 0, holding = -1;
    bool idle = false, channel_aligned = true;
  };
  struct PauseSample {
    At at;
    Timestamp wm = kMinTimestamp, aligned = kMinTimestamp;
  };
  // One bucket of a watermark lane: its first, lowest, highest and last point
  // and how many points it held.
  template <typename S>
  struct Slots {
    int64_t index;
    S first, lo, hi, last;
    int64_t count;
  };
  // An idle (or paused) stretch: [from, until), or open; `count` stretches.
  template <typename S>
  struct Stretch {
    S from, until;
    bool open;
    int64_t count;
  };
  template <typename S>
  struct Stretches {
    bool now = false;  // as the page: a lane starts active
    std::vector<Stretch<S>> list;
  };
  struct SourceLane {
    int rank = -1;
    std::vector<Slots<SourceSample>> points;
  };
  struct ChannelLane {
    int rank = -1, channel_rank = -1;
    std::vector<Slots<ChannelSample>> points;
    Stretches<ChannelSample> idle;
  };
  struct SourceStatus {
    int rank = -1;
    Stretches<SourceSample> idle;
    Stretches<PauseSample> paused;
  };
  // A mark standing for `count` events: the first of them, at height y (a
  // firing's window end, a late record's timestamp); the kind, subtask,
  // firing and source are its lane's.
  struct Rep {
    At at;
    int64_t count = 1;
    Timestamp y = 0;
    Timestamp start = 0;
    Timestamp watermark = 0;  // a firing's, or a barrier's checkpoint
    double alignment_ms = 0;
    std::string key, value;
  };
  struct MarkBucket {
    int64_t index;
    std::vector<Rep> reps;  // by (y, window start)
  };
  static constexpr size_t kRepsPerBucket = 4;
  // A lane of marks (a kind at a subtask) holds at most this many: past it,
  // its own buckets double (the page draws at most max(300, 3000 / panels)
  // marks a panel, merging the rest, as this does).
  static constexpr size_t kMarksPerLane = 1024;
  struct MarkLane {
    int extra = 0;  // its buckets are 2 * width * 2^extra wide
    size_t reps = 0;
    std::vector<MarkBucket> buckets;
  };
  // (subtask, kind, firing, source)
  using MarkKey = std::tuple<int, int, std::string, bool>;
  // Generalized watermarks: a lane per (task, subtask, identifier, combined
  // at the input); a long's points as a watermark lane's, a bool's true
  // stretches as idle stretches (and its first value, so a lane that stays
  // false is drawn).
  struct GwSample {
    At at;
    int64_t v = 0;
    int channel = -1;
  };
  struct GwLane {
    int rank = -1;
    std::shared_ptr<const TimelineEvent::Generalized> info;
    bool has_first = false;
    GwSample first;
    std::vector<Slots<GwSample>> points;
    Stretches<GwSample> on;
  };
  using GwKey = std::tuple<std::string, int, std::string, bool>;

  bool by_records;
  int64_t buckets;
  double width;
  uint64_t next_seq = 0;
  std::map<int, SourceLane> sources;
  std::map<int, SourceStatus> statuses;
  std::map<std::pair<int, int>, ChannelLane> channels;
  std::map<int, std::vector<Slots<ChannelSample>>> aligned;
  std::map<MarkKey, MarkLane> marks;
  std::map<GwKey, GwLane> generalized;

  Impl(bool by_records_axis, size_t max_buckets)
      : by_records(by_records_axis),
        buckets(static_cast<int64_t>(std::max<size_t>(max_buckets, 2))),
        // The finest bucket: a record, or a microsecond.  It doubles as the
        // run grows.
        width(by_records_axis ? 1.0 : 1.0 / 1024) {}

  double X(const At& a) const { return by_records ? static_cast<double>(a.records) : a.t; }
  int64_t Index(const At& a, double w) const {
    return static_cast<int64_t>(std::floor(std::max(0.0, X(a)) / w));
  }
  bool Before(const At& a, const At& b) const {
    const double xa = X(a), xb = X(b);
    return xa < xb || (xa == xb && a.seq < b.seq);
  }

  // --- watermark lanes ---
  template <typename S, typename V>
  void AddPoint(std::vector<Slots<S>>* lane, const S& s, V value, int64_t count = 1) {
    const int64_t index = Index(s.at, width);
    if (lane->empty() || lane->back().index < index) {
      lane->push_back({index, s, s, s, s, count});
      return;
    }
    auto it = std::lower_bound(lane->begin(), lane->end(), index,
                               [](const Slots<S>& b, int64_t i) { return b.index < i; });
    if (it == lane->end() || it->index != index) {  // an event a little out of order
      lane->insert(it, Slots<S>{index, s, s, s, s, count});
      return;
    }
    Slots<S>& b = *it;
    b.count += count;
    if (Before(s.at, b.first.at)) b.first = s;
    if (!Before(s.at, b.last.at)) b.last = s;
    if (value(s) < value(b.lo)) b.lo = s;
    if (value(s) > value(b.hi)) b.hi = s;
  }
  template <typename S, typename V>
  void CoarsenPoints(std::vector<Slots<S>>* lane, int shift, V value) {
    size_t out = 0;
    for (size_t i = 0; i < lane->size(); ++i) {
      Slots<S> b = (*lane)[i];
      b.index >>= shift;
      if (out > 0 && (*lane)[out - 1].index == b.index) {
        Slots<S>& a = (*lane)[out - 1];
        a.count += b.count;
        if (Before(b.first.at, a.first.at)) a.first = b.first;
        if (!Before(b.last.at, a.last.at)) a.last = b.last;
        if (value(b.lo) < value(a.lo)) a.lo = b.lo;
        if (value(b.hi) > value(a.hi)) a.hi = b.hi;
      } else {
        (*lane)[out++] = b;
      }
    }
    lane->erase(lane->begin() + static_cast<std::ptrdiff_t>(out), lane->end());
  }
  // The bucket's distinct points, in order, the first carrying the count of
  // those not kept.
  template <typename S>
  std::vector<std::pair<S, int64_t>> Kept(const Slots<S>& b) const {
    std::vector<S> v = {b.first, b.lo, b.hi, b.last};
    std::sort(v.begin(), v.end(), [&](const S& x, const S& y) { return Before(x.at, y.at); });
    v.erase(std::unique(v.begin(), v.end(),
                        [](const S& x, const S& y) { return x.at.seq == y.at.seq; }),
            v.end());
    std::vector<std::pair<S, int64_t>> out;
    for (size_t i = 0; i < v.size(); ++i)
      out.emplace_back(v[i], i == 0 ? b.count - static_cast<int64_t>(v.size()) + 1 : 1);
    return out;
  }

  // --- idle stretches and pauses ---
  template <typename S>
  void Change(Stretches<S>* st, const S& s, bool idle, int64_t count) {
    if (idle == st->now) return;  // the page draws changes only
    st->now = idle;
    if (!idle) {
      st->list.back().until = s;
      st->list.back().open = false;
    } else if (!st->list.empty() && Index(st->list.back().until.at, width) == Index(s.at, width)) {
      // Active for less than a bucket: the same stretch goes on.
      st->list.back().open = true;
      st->list.back().count += count;
    } else {
      st->list.push_back({s, s, true, count});
    }
  }
  template <typename S>
  void CoarsenStretches(Stretches<S>* st) {
    auto& list = st->list;
    size_t out = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (out > 0 && !list[out - 1].open &&
          Index(list[out - 1].until.at, width) == Index(list[i].from.at, width)) {
        Stretch<S>& a = list[out - 1];
        a.until = list[i].until;
        a.open = list[i].open;
        a.count += list[i].count;
      } else {
        list[out++] = list[i];
      }
    }
    list.erase(list.begin() + static_cast<std::ptrdiff_t>(out), list.end());
  }

  // --- marks ---
  // At most kRepsPerBucket: the two closest in height merge (into the one with
  // more events), never the lowest with the highest or the earliest window
  // start.
  static void Reduce(std::vector<Rep>* reps) {
    while (reps->size() > kRepsPerBucket) {
      const size_t n = reps->size();
      size_t earliest = 0;
      for (size_t i = 1; i < n; ++i)
        if ((*reps)[i].start < (*reps)[earliest].start) earliest = i;
      auto fixed = [&](size_t i) { return i == 0 || i + 1 == n || i == earliest; };
      size_t best = n;
      double best_gap = 0;
      for (size_t i = 0; i + 1 < n; ++i) {
        if (fixed(i) && fixed(i + 1)) continue;
        const double gap =
            static_cast<double>((*reps)[i + 1].y) - static_cast<double>((*reps)[i].y);
        if (best == n || gap < best_gap) {
          best = i;
          best_gap = gap;
        }
      }
      const size_t keep = fixed(best)                                      ? best
                          : fixed(best + 1)                                ? best + 1
                          : (*reps)[best].count >= (*reps)[best + 1].count ? best
                                                                           : best + 1;
      const size_t drop = keep == best ? best + 1 : best;
      (*reps)[keep].count += (*reps)[drop].count;
      reps->erase(reps->begin() + static_cast<std::ptrdiff_t>(drop));
    }
  }
  static void AddRep(std::vector<Rep>* reps, Rep r) {
    for (Rep& x : *reps) {
      if (x.y == r.y && x.start == r.start) {
        x.count += r.count;
        return;
      }
    }
    auto it = std::upper_bound(reps->begin(), reps->end(), r, [](const Rep& a, const Rep& b) {
      return std::tie(a.y, a.start) < std::tie(b.y, b.start);
    });
    if (reps->size() == reps->capacity()) {
      // Room for one more than kept, never more (a vector would double to 8).
      const size_t at = static_cast<size_t>(it - reps->begin());
      reps->reserve(std::min(std::max<size_t>(1, 2 * reps->size()), kRepsPerBucket + 1));
      it = reps->begin() + static_cast<std::ptrdiff_t>(at);
    }
    reps->insert(it, std::move(r));
    Reduce(reps);
  }
  void AddMark(const TimelineEvent& e, uint64_t seq) {
    const Timestamp y = e.kind == K::kFiring ? e.end : e.kind == K::kLate ? e.ts : 0;
    MarkLane& ml = marks[MarkKey{e.subtask, static_cast<int>(e.kind),
                                 e.kind == K::kFiring ? e.firing : std::string(),
                                 e.kind == K::kBarrier && e.source}];
    auto& lane = ml.buckets;
    // Buckets two wide (the page's smallest cell is 2 px), or wider.
    const int64_t index =
        Index(At{e.t_ms, e.records, seq}, 2 * width * static_cast<double>(int64_t{1} << ml.extra));
    auto it = std::lower_bound(lane.begin(), lane.end(), index,
                               [](const MarkBucket& b, int64_t i) { return b.index < i; });
    if (it == lane.end() || it->index != index) it = lane.insert(it, MarkBucket{index, {}});
    const size_t before = it->reps.size();
    Rep r;
    r.at = At{e.t_ms, e.records, seq};
    r.count = e.count;
    r.y = y;
    r.start = e.start;
    r.watermark = e.kind == K::kBarrier ? e.checkpoint : e.watermark;
    r.alignment_ms = e.alignment_ms;
    r.key = e.key;
    r.value = e.value;
    AddRep(&it->reps, std::move(r));
    ml.reps += it->reps.size() - before;
    while (ml.reps > kMarksPerLane && ml.extra < 62) {
      ++ml.extra;
      CoarsenMarks(&ml, 1);
    }
  }
  void CoarsenMarks(MarkLane* ml, int shift) {
    std::vector<MarkBucket>* lane = &ml->buckets;
    size_t out = 0;
    for (size_t i = 0; i < lane->size(); ++i) {
      MarkBucket& b = (*lane)[i];
      b.index >>= shift;
      if (out > 0 && (*lane)[out - 1].index == b.index) {
        for (Rep& r : b.reps) AddRep(&(*lane)[out - 1].reps, std::move(r));
      } else if (out != i) {
        (*lane)[out++] = std::move(b);
      } else {
        ++out;
      }
    }
    lane->erase(lane->begin() + static_cast<std::ptrdiff_t>(out), lane->end());
    ml->reps = 0;
    for (const MarkBucket& b : *lane) ml->reps += b.reps.size();
  }

  static Timestamp Wm(const SourceSample& s) { return s.wm; }
  static Timestamp ChannelWm(const ChannelSample& s) { return s.wm; }
  static Timestamp Aligned(const ChannelSample& s) { return s.aligned; }
  static int64_t GwV(const GwSample& s) { return s.v; }

  // Doubles the width until `at` falls within the buckets; merges.
  void Fit(const At& at) {
    int shift = 0;
    while (Index(at, width * static_cast<double>(int64_t{1} << shift)) >= buckets) ++shift;
    if (shift == 0) return;
    width *= static_cast<double>(int64_t{1} << shift);
    for (auto& [_, lane] : sources) CoarsenPoints(&lane.points, shift, Wm);
    for (auto& [_, lane] : channels) {
      CoarsenPoints(&lane.points, shift, ChannelWm);
      CoarsenStretches(&lane.idle);
    }
    for (auto& [_, lane] : aligned) CoarsenPoints(&lane, shift, Aligned);
    for (auto& [_, st] : statuses) {
      CoarsenStretches(&st.idle);
      CoarsenStretches(&st.paused);
    }
    for (auto& [_, lane] : marks) CoarsenMarks(&lane, shift);
    for (auto& [_, lane] : generalized) {
      CoarsenPoints(&lane.points, shift, GwV);
      CoarsenStretches(&lane.on);
    }
  }

  void Add(const TimelineEvent& e) {
    const At at{e.t_ms, e.records, next_seq++};
    Fit(at);
    switch (e.kind) {
      case K::kSourceWatermark: {
        SourceLane& lane = sources[e.subtask];
        lane.rank = e.rank;
        AddPoint(&lane.points, SourceSample{at, e.watermark}, Wm, e.count);
        break;
      }
      case K::kSourceIdle: {
        SourceStatus& st = statuses[e.subtask];
        if (e.rank >= 0) st.rank = e.rank;
        Change(&st.idle, SourceSample{at, e.watermark}, e.idle, e.count);
        break;
      }
      case K::kSourcePause: {
        SourceStatus& st = statuses[e.subtask];
        if (e.rank >= 0) st.rank = e.rank;
        Change(&st.paused, PauseSample{at, e.watermark, e.aligned}, e.idle, e.count);
        break;
      }
      case K::kChannel: {
        ChannelLane& lane = channels[{e.subtask, e.channel}];
        lane.rank = e.rank;
        lane.channel_rank = e.channel_rank;
        const ChannelSample s{at,        e.watermark, e.aligned,        e.channel,
                              e.holding, e.idle,      e.channel_aligned};
        AddPoint(&lane.points, s, ChannelWm);
        AddPoint(&aligned[e.subtask], s, Aligned);
        Change(&lane.idle, s, e.idle, e.count);
        break;
      }
      case K::kFiring:
      case K::kLate:
      case K::kBarrier:
        AddMark(e, at.seq);
        break;
      case K::kGeneralized: {
        if (e.gw == nullptr) break;
        GwLane& lane = generalized[GwKey{e.gw->task, e.subtask, e.gw->identifier, e.gw_input}];
        lane.rank = e.rank;
        lane.info = e.gw;
        const GwSample g{at, e.gw_value, e.channel};
        if (!lane.has_first) {
          lane.has_first = true;
          lane.first = g;
        }
        if (e.gw->is_bool) {
          Change(&lane.on, g, e.gw_value != 0, e.count);
        } else {
          AddPoint(&lane.points, g, GwV, e.count);
        }
        break;
      }
    }
  }

  std::vector<TimelineEvent> Events() const {
    std::vector<std::pair<At, TimelineEvent>> out;
    auto event = [&](K kind, const At& at, int subtask) {
      TimelineEvent e{kind, at.t};
      e.records = at.records;
      e.subtask = subtask;
      return e;
    };
    for (const auto& [subtask, lane] : sources) {
      for (const auto& b : lane.points) {
        for (const auto& [s, count] : Kept(b)) {
          TimelineEvent e = event(K::kSourceWatermark, s.at, subtask);
          e.watermark = s.wm;
          e.rank = lane.rank;
          e.count = count;
          out.emplace_back(s.at, std::move(e));
        }
      }
    }
    for (const auto& [subtask, st] : statuses) {
      for (const auto& x : st.idle.list) {
        TimelineEvent e = event(K::kSourceIdle, x.from.at, subtask);
        e.idle = true;
        e.count = x.count;
        e.rank = st.rank;
        out.emplace_back(x.from.at, e);
        if (x.open) continue;
        e = event(K::kSourceIdle, x.until.at, subtask);
        e.rank = st.rank;
        out.emplace_back(x.until.at, std::move(e));
      }
      for (const auto& x : st.paused.list) {
        for (bool start : {true, false}) {
          if (!start && x.open) continue;
          const PauseSample& p = start ? x.from : x.until;
          TimelineEvent e = event(K::kSourcePause, p.at, subtask);
          e.idle = start;
          e.count = start ? x.count : 1;
          e.watermark = p.wm;
          e.aligned = p.aligned;
          e.rank = st.rank;
          out.emplace_back(p.at, std::move(e));
        }
      }
    }
    // Channel events: each lane's kept points and stretch ends, and the
    // aligned minimum's kept points (real events of some channel), once each;
    // idle as the stretches kept say.
    std::map<std::pair<int, int>, std::map<uint64_t, ChannelSample>> kept;
    for (const auto& [key, lane] : channels) {
      auto& mine = kept[key];
      for (const auto& b : lane.points)
        for (const auto& [s, count] : Kept(b)) mine.emplace(s.at.seq, s);
      for (const auto& x : lane.idle.list) {
        mine.emplace(x.from.at.seq, x.from);
        if (!x.open) mine.emplace(x.until.at.seq, x.until);
      }
    }
    for (const auto& [subtask, lane] : aligned)
      for (const auto& b : lane)
        for (const auto& [s, count] : Kept(b)) kept[{subtask, s.channel}].emplace(s.at.seq, s);
    for (const auto& [key, samples] : kept) {
      const ChannelLane& lane = channels.at(key);
      std::vector<ChannelSample> v;
      for (const auto& [seq, s] : samples) v.push_back(s);
      std::sort(v.begin(), v.end(),
                [&](const ChannelSample& a, const ChannelSample& b) { return Before(a.at, b.at); });
      const auto& stretches = lane.idle.list;
      size_t j = 0;
      for (const ChannelSample& s : v) {
        while (j < stretches.size() && !stretches[j].open && !Before(s.at, stretches[j].until.at))
          ++j;
        const bool idle = j < stretches.size() && !Before(s.at, stretches[j].from.at);
        TimelineEvent e = event(K::kChannel, s.at, key.first);
        e.channel = key.second;
        e.watermark = s.wm;
        e.aligned = s.aligned;
        e.holding = s.holding;
        e.idle = idle;
        e.channel_aligned = s.channel_aligned;
        e.rank = lane.rank;
        e.channel_rank = lane.channel_rank;
        if (idle && j < stretches.size() && s.at.seq == stretches[j].from.at.seq)
          e.count = stretches[j].count;
        out.emplace_back(s.at, std::move(e));
      }
    }
    for (const auto& [key, lane] : marks)
      for (const MarkBucket& b : lane.buckets)
        for (const Rep& r : b.reps) {
          const auto& [subtask, kind, firing, source] = key;
          TimelineEvent e = event(static_cast<K>(kind), r.at, subtask);
          e.count = r.count;
          e.key = r.key;
          e.value = r.value;
          if (e.kind == K::kFiring) {
            e.firing = firing;
            e.start = r.start;
            e.end = r.y;
            e.watermark = r.watermark;
          } else if (e.kind == K::kLate) {
            e.ts = r.y;
          } else {
            e.source = source;
            e.checkpoint = r.watermark;
            e.alignment_ms = r.alignment_ms;
          }
          out.emplace_back(r.at, std::move(e));
        }
    for (const auto& entry : generalized) {
      // Named, not structured bindings: clang 14 cannot capture those.
      const auto& key = entry.first;
      const auto& lane = entry.second;
      const bool input = std::get<3>(key);
      auto gw = [&, input](const GwSample& g, int64_t count) {
        TimelineEvent e = event(K::kGeneralized, g.at, std::get<1>(key));
        e.gw = lane.info;
        e.gw_input = input;
        e.gw_value = g.v;
        e.channel = g.channel;
        e.rank = lane.rank;
        e.count = count;
        out.emplace_back(g.at, std::move(e));
      };
      if (!lane.info->is_bool) {
        for (const auto& b : lane.points)
          for (const auto& [g, count] : Kept(b)) gw(g, count);
        continue;
      }
      // A bool: its first value, then each true stretch's start and end.
      if (lane.has_first &&
          (lane.on.list.empty() || lane.on.list[0].from.at.seq != lane.first.at.seq))
        gw(lane.first, 1);
      for (const auto& x : lane.on.list) {
        GwSample from = x.from;
        from.v = 1;
        gw(from, x.count);
        if (x.open) continue;
        GwSample until = x.until;
        until.v = 0;
        gw(until, 1);
      }
    }
    std::sort(out.begin(), out.end(),
              [&](const auto& a, const auto& b) { return Before(a.first, b.first); });
    std::vector<TimelineEvent> events;
    events.reserve(out.size());
    for (auto& [at, e] : out) events.push_back(std::move(e));
    return events;
  }

  size_t RetainedBytes() const {
    constexpr size_t kNode = 48;  // a map node's own bookkeeping, about
    size_t bytes = sizeof(*this);
    for (const auto& [_, lane] : sources)
      bytes += kNode + sizeof(lane) + lane.points.capacity() * sizeof(lane.points[0]);
    for (const auto& [_, lane] : channels)
      bytes += kNode + sizeof(lane) + lane.points.capacity() * sizeof(lane.points[0]) +
               lane.idle.list.capacity() * sizeof(lane.idle.list[0]);
    for (const auto& [_, lane] : aligned)
      bytes += kNode + sizeof(lane) + lane.capacity() * sizeof(lane[0]);
    for (const auto& [_, st] : statuses)
      bytes += kNode + sizeof(st) + st.idle.list.capacity() * sizeof(st.idle.list[0]) +
               st.paused.list.capacity() * sizeof(st.paused.list[0]);
    for (const auto& [key, lane] : marks) {
      bytes += kNode + sizeof(key) + HeapBytes(std::get<2>(key)) + sizeof(lane) +
               lane.buckets.capacity() * sizeof(MarkBucket);
      for (const MarkBucket& b : lane.buckets) {
        bytes += b.reps.capacity() * sizeof(Rep);
        for (const Rep& r : b.reps) bytes += HeapBytes(r.key) + HeapBytes(r.value);
      }
    }
    for (const auto& [key, lane] : generalized)
      bytes += kNode + sizeof(key) + HeapBytes(std::get<0>(key)) + HeapBytes(std::get<2>(key)) +
               sizeof(lane) +
               (lane.info ? HeapBytes(lane.info->task) + HeapBytes(lane.info->identifier) : 0) +
               lane.points.capacity() * sizeof(lane.points[0]) +
               lane.on.list.capacity() * sizeof(lane.on.list[0]);
    return bytes;
  }

  size_t RetainedEntries() const {
    size_t n = 0;
    for (const auto& [_, lane] : sources) n += lane.points.size();
    for (const auto& [_, lane] : channels) n += lane.points.size() + lane.idle.list.size();
    for (const auto& [_, lane] : aligned) n += lane.size();
    for (const auto& [_, st] : statuses) n += st.idle.list.size() + st.paused.list.size();
    for (const auto& [_, lane] : marks) n += lane.reps;
    for (const auto& [_, lane] : generalized) n += lane.points.size() + lane.on.list.size();
    return n;
  }
};

TimelineSummary::TimelineSummary(bool by_records, size_t buckets)
    : impl_(std::make_unique<Impl>(by_records, buckets)) {}
TimelineSummary::~TimelineSummary() = default;
void TimelineSummary::Add(const TimelineEvent& e) { impl_->Add(e); }
std::vector<TimelineEvent> TimelineSummary::Events() const { return impl_->Events(); }
size_t TimelineSummary::RetainedBytes() const { return impl_->RetainedBytes(); }
size_t TimelineSummary::RetainedEntries() const { return impl_->RetainedEntries(); }
double TimelineSummary::bucket_width() const { return impl_->width; }

void TraceRecorder::SetCluster(int rank, std::function<int(int)> source_rank,
                               std::function<int(int)> window_rank) {
  rank_ = rank;
  source_rank_ = std::move(source_rank);
  window_rank_ = std::move(window_rank);
}

std::string TraceRecorder::RankOf(bool source, int subtask) const {
  if (rank_ < 0) return "";
  return absl::StrCat(" (rank ", source ? source_rank_(subtask) : window_rank_(subtask), ")");
}

void TraceRecorder::OnInputChannel(const ChannelEvent& e) {
  // Only the window operator's subtasks: the sinks of the late side output
  // have input channels too, but they are not what a reader studies.
  if (e.task_name->rfind("window", 0) != 0) return;
  TimelineEvent ev{TimelineEvent::Kind::kChannel, NowMs()};
  ev.subtask = e.subtask;
  ev.channel = e.channel;
  ev.watermark = e.channel_watermark;
  ev.aligned = e.aligned;
  ev.idle = e.channel_idle;
  ev.holding = e.holding_channel;
  ev.channel_aligned = e.channel_aligned;
  if (rank_ >= 0) {
    ev.rank = window_rank_(e.subtask);
    ev.channel_rank = source_rank_(e.channel);
  }
  if (print_trace_) {
    if (format_ == OutputFormat::kJsonl) {
      printer_->Print(absl::StrCat(
          "{\"kind\":\"watermark\",\"operator\":\"window\",\"subtask\":", e.subtask,
          rank_ >= 0 ? absl::StrCat(",\"rank\":", ev.rank, ",\"channel_rank\":", ev.channel_rank)
                     : std::string(),
          ",\"channel\":", e.channel, ",\"channel_watermark\":", e.channel_watermark,
          ",\"aligned\":", e.aligned, ",\"idle\":", e.channel_idle ? "true" : "false",
          ",\"subtask_idle\":", e.subtask_idle ? "true" : "false", ",\"holding_channel\":",
          e.holding_channel, ",\"channel_aligned\":", e.channel_aligned ? "true" : "false",
          ",\"t_ms\":", absl::StrFormat("%.3f", ev.t_ms), "}"));
    } else {
      printer_->Print(absl::StrCat(
          "[watermark] window subtask ", e.subtask, RankOf(false, e.subtask), " channel ",
          e.channel,
          rank_ >= 0 ? absl::StrCat(" (from rank ", ev.channel_rank, ")") : std::string(), " -> ",
          FormatTimestamp(e.channel_watermark), " (", Time(e.channel_watermark), ")",
          e.channel_idle ? " idle" : "", "; aligned = ", FormatTimestamp(e.aligned), " (",
          Time(e.aligned), ")", e.subtask_idle ? " [subtask idle]" : "",
          e.holding_channel >= 0 ? absl::StrCat("; held back by channel ", e.holding_channel)
                                 : std::string()));
    }
  }
  Keep(std::move(ev));
}

void TraceRecorder::OnOutputWatermark(const std::string& task, int subtask, Timestamp w) {
  if (task.rfind("Source", 0) != 0) return;  // window subtasks are covered by channel events
  TimelineEvent ev{TimelineEvent::Kind::kSourceWatermark, NowMs()};
  ev.subtask = subtask;
  ev.watermark = w;
  if (rank_ >= 0) ev.rank = source_rank_(subtask);
  if (print_trace_) {
    if (format_ == OutputFormat::kJsonl) {
      printer_->Print(absl::StrCat("{\"kind\":\"source_watermark\",\"subtask\":", subtask,
                                   rank_ >= 0 ? absl::StrCat(",\"rank\":", ev.rank) : std::string(),
                                   ",\"watermark\":", w,
                                   ",\"t_ms\":", absl::StrFormat("%.3f", ev.t_ms), "}"));
    } else {
      printer_->Print(absl::StrCat("[watermark] source subtask ", subtask, RankOf(true, subtask),
                                   " emits ", FormatTimestamp(w), " (", Time(w), ")"));
    }
  }
  Keep(std::move(ev));
}

void TraceRecorder::OnCheckpointBarrier(const std::string& task, int subtask, int64_t checkpoint_id,
                                        int64_t alignment_ns) {
  const bool source = task.rfind("Source", 0) == 0;
  if (!source && task.rfind("window", 0) != 0) return;
  TimelineEvent ev{TimelineEvent::Kind::kBarrier, NowMs()};
  ev.subtask = subtask;
  ev.checkpoint = checkpoint_id;
  ev.source = source;
  ev.alignment_ms = static_cast<double>(alignment_ns) / 1e6;
  if (rank_ >= 0) ev.rank = source ? source_rank_(subtask) : window_rank_(subtask);
  if (print_trace_) {
    if (format_ == OutputFormat::kJsonl) {
      printer_->Print(absl::StrCat("{\"kind\":\"barrier\",\"task\":\"",
                                   source ? "source" : "window", "\",\"subtask\":", subtask,
                                   rank_ >= 0 ? absl::StrCat(",\"rank\":", ev.rank) : std::string(),
                                   ",\"checkpoint\":", checkpoint_id,
                                   absl::StrFormat(",\"alignment_ms\":%.3f", ev.alignment_ms),
                                   absl::StrFormat(",\"t_ms\":%.3f", ev.t_ms), "}"));
    } else if (source) {
      printer_->Print(absl::StrCat("[checkpoint] source subtask ", subtask, RankOf(true, subtask),
                                   " sends barrier ", checkpoint_id));
    } else {
      printer_->Print(absl::StrCat("[checkpoint] window subtask ", subtask, RankOf(false, subtask),
                                   " aligned barrier ", checkpoint_id,
                                   absl::StrFormat(" in %.3f ms", ev.alignment_ms),
                                   " and took its snapshot"));
    }
  }
  Keep(std::move(ev));
}

void TraceRecorder::OnSourceAlignment(const std::string& task, int subtask, bool paused,
                                      Timestamp watermark, Timestamp max_allowed) {
  (void)task;
  TimelineEvent ev{TimelineEvent::Kind::kSourcePause, NowMs()};
  ev.subtask = subtask;
  ev.idle = paused;
  ev.watermark = watermark;
  ev.aligned = max_allowed;
  if (rank_ >= 0) ev.rank = source_rank_(subtask);
  Keep(ev);
  if (!print_trace_) return;
  if (format_ == OutputFormat::kJsonl) {
    printer_->Print(absl::StrCat("{\"kind\":\"source_alignment\",\"subtask\":", subtask,
                                 rank_ >= 0 ? absl::StrCat(",\"rank\":", ev.rank) : std::string(),
                                 ",\"paused\":", paused ? "true" : "false",
                                 ",\"watermark\":", watermark, ",\"max_allowed\":", max_allowed,
                                 absl::StrFormat(",\"t_ms\":%.3f", NowMs()), "}"));
  } else {
    printer_->Print(absl::StrCat(
        "[alignment] source subtask ", subtask, RankOf(true, subtask),
        paused ? " pauses: watermark " : " resumes: watermark ", FormatTimestamp(watermark),
        paused ? " > " : " <= ", "max allowed ", FormatTimestamp(max_allowed)));
  }
}

void TraceRecorder::OnOutputStatus(const std::string& task, int subtask, WatermarkStatus s) {
  if (task.rfind("Source", 0) != 0) return;
  TimelineEvent ev{TimelineEvent::Kind::kSourceIdle, NowMs()};
  ev.subtask = subtask;
  ev.idle = s == WatermarkStatus::kIdle;
  if (rank_ >= 0) ev.rank = source_rank_(subtask);
  if (print_trace_) {
    if (format_ == OutputFormat::kJsonl) {
      printer_->Print(absl::StrCat("{\"kind\":\"source_status\",\"subtask\":", subtask,
                                   rank_ >= 0 ? absl::StrCat(",\"rank\":", ev.rank) : std::string(),
                                   ",\"idle\":", ev.idle ? "true" : "false",
                                   absl::StrFormat(",\"t_ms\":%.3f", ev.t_ms), "}"));
    } else {
      printer_->Print(absl::StrCat("[watermark] source subtask ", subtask, RankOf(true, subtask),
                                   " is ", ev.idle ? "idle" : "active"));
    }
  }
  Keep(std::move(ev));
}

void TraceRecorder::OnSplitWatermark(const std::string& task, int subtask, const std::string& split,
                                     Timestamp w, bool idle) {
  if (!print_trace_ || task.rfind("Source", 0) != 0) return;
  if (format_ == OutputFormat::kJsonl) {
    printer_->Print(absl::StrCat(
        "{\"kind\":\"split_watermark\",\"subtask\":", subtask,
        rank_ >= 0 ? absl::StrCat(",\"rank\":", source_rank_(subtask)) : std::string(), ",",
        JsonField("split", split), ",\"watermark\":", w, ",\"idle\":", idle ? "true" : "false",
        ",\"t_ms\":", absl::StrFormat("%.3f", NowMs()), "}"));
  } else {
    printer_->Print(absl::StrCat("[watermark] source subtask ", subtask, RankOf(true, subtask),
                                 " split ", split, " -> ", FormatTimestamp(w), " (", Time(w), ")",
                                 idle ? " idle" : ""));
  }
}

void TraceRecorder::OnGeneralizedWatermark(const std::string& task, int subtask, bool input,
                                           int channel, const GeneralizedWatermark& w) {
  TimelineEvent ev{TimelineEvent::Kind::kGeneralized, NowMs()};
  ev.subtask = subtask;
  ev.channel = input ? channel : -1;
  {
    internal::MutexLock lock(&gw_mu_);
    auto& info = gw_info_[{task, &w.spec()}];
    if (info == nullptr) {
      TimelineEvent::Generalized g;
      g.task = task;
      g.identifier = w.identifier();
      g.function = tidemark::ToString(w.spec().function);
      g.is_bool = w.is_bool();
      g.wait_for_all = w.spec().wait_for_all_channels;
      info = std::make_shared<const TimelineEvent::Generalized>(std::move(g));
    }
    ev.gw = info;
  }
  ev.gw_value = w.is_bool() ? (w.bool_value() ? 1 : 0) : w.long_value();
  ev.gw_input = input;
  ev.rank = rank_;  // the listener runs where the subtask does
  Keep(std::move(ev));
  if (!print_trace_) return;
  const std::string value =
      w.is_bool() ? (w.bool_value() ? "true" : "false") : absl::StrCat(w.long_value());
  if (format_ == OutputFormat::kJsonl) {
    printer_->Print(absl::StrCat(
        "{\"kind\":\"generalized_watermark\",", JsonField("task", task), ",\"subtask\":", subtask,
        rank_ >= 0 ? absl::StrCat(",\"rank\":", rank_) : std::string(), ",\"direction\":\"",
        input ? "in" : "out", "\"", input ? absl::StrCat(",\"channel\":", channel) : std::string(),
        ",", JsonField("identifier", w.identifier()), ",\"value\":", value,
        ",\"t_ms\":", absl::StrFormat("%.3f", NowMs()), "}"));
  } else {
    printer_->Print(absl::StrCat(
        "[watermark] ", task, " subtask ", subtask,
        rank_ >= 0 ? absl::StrCat(" (rank ", rank_, ")") : std::string(),
        input ? absl::StrCat(" combined (channel ", channel, ") ") : std::string(" sent "),
        w.identifier(), "=", value));
  }
}

void TraceRecorder::OnRecord(int source, const std::string& key, Timestamp ts, Timestamp max_ts,
                             Timestamp watermark) {
  if (!print_trace_) return;
  if (format_ == OutputFormat::kJsonl) {
    printer_->Print(absl::StrCat("{\"kind\":\"record\",\"source\":", source, ",",
                                 JsonField("key", key), ",\"timestamp\":", ts,
                                 ",\"max_timestamp\":", max_ts, ",\"watermark\":", watermark, "}"));
  } else {
    // The line the documents print (document 000).
    printer_->Print(absl::StrCat("key:", key, ",eventtime:[", ts, "|", Time(ts),
                                 "],currentMaxTimestamp:[", max_ts, "|", Time(max_ts),
                                 "],watermark:[", watermark, "|", Time(watermark), "]"));
  }
}

TimelineEvent TimelineEvent::Firing(int subtask, std::string key, Timestamp start, Timestamp end,
                                    Timestamp watermark, std::string firing, std::string value) {
  TimelineEvent e{Kind::kFiring, 0};
  e.subtask = subtask;
  e.key = std::move(key);
  e.start = start;
  e.end = end;
  e.watermark = watermark;
  e.firing = std::move(firing);
  e.value = std::move(value);
  return e;
}

TimelineEvent TimelineEvent::Late(int subtask, std::string key, Timestamp ts, std::string value) {
  TimelineEvent e{Kind::kLate, 0};
  e.subtask = subtask;
  e.key = std::move(key);
  e.ts = ts;
  e.value = std::move(value);
  return e;
}

void TraceRecorder::OnFiring(const TimelineEvent& e) {
  TimelineEvent ev = e;
  ev.t_ms = NowMs();
  Keep(std::move(ev));
}

void TraceRecorder::OnLate(const TimelineEvent& e) {
  TimelineEvent ev = e;
  ev.t_ms = NowMs();
  Keep(std::move(ev));
}

// ---------------------------------------------------------------------------
// Timeline page.

namespace {

const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                          "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728"};
// Generalized watermarks' lanes (a palette of its own: they are not
// channels).
const char* kGwPalette[] = {"#e6550d", "#3182bd", "#31a354", "#756bb1", "#636363",
                            "#fd8d3c", "#6baed6", "#74c476", "#9e9ac8", "#969696"};

std::string Esc(const std::string& s) {
  return absl::StrReplaceAll(s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// A double (event time as a coordinate) back to a timestamp, clamped to the
// range: a cast of a double outside it would be undefined.
Timestamp ClampToTimestamp(double v) {
  if (!(v > -9.2233720368547758e18)) return kMinTimestamp;  // also NaN
  if (v >= 9.2233720368547758e18) return kMaxTimestamp;
  return static_cast<Timestamp>(v);
}

}  // namespace

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> out;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi)) {
    if (std::isfinite(lo)) out.push_back(lo);
    return out;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10 * p;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * p >= raw) {
      step = m * p;
      break;
    }
  }
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) {
    out.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
    if (out.size() > static_cast<size_t>(4 * target + 4)) break;
  }
  return out;
}

std::vector<double> NiceTimeTicks(double lo_ms, double hi_ms, int target, double* step_ms) {
  static constexpr double kSteps[] = {
      1,      2,      5,       10,      20,      50,       100,      200,      500,
      1000,   2000,   5000,    10000,   15000,   30000,    60000,    120000,   300000,
      600000, 900000, 1800000, 3600000, 7200000, 10800000, 21600000, 43200000, 86400000};
  std::vector<double> out;
  *step_ms = 1;
  if (!(hi_ms > lo_ms) || !std::isfinite(lo_ms) || !std::isfinite(hi_ms)) {
    if (std::isfinite(lo_ms)) out.push_back(lo_ms);
    return out;
  }
  const double raw = (hi_ms - lo_ms) / std::max(1, target);
  double step = 0;
  for (double c : kSteps) {
    if (c >= raw) {
      step = c;
      break;
    }
  }
  if (step == 0) {  // days: 1, 2 or 5 times a power of ten
    const double days = raw / 86400000.0;
    const double p = std::pow(10.0, std::floor(std::log10(days)));
    step = 10 * p;
    for (double m : {1.0, 2.0, 5.0}) {
      if (m * p >= days) {
        step = m * p;
        break;
      }
    }
    step *= 86400000.0;
  }
  *step_ms = step;
  for (double v = std::ceil(lo_ms / step) * step; v <= hi_ms; v += step) {
    out.push_back(v);
    if (out.size() > static_cast<size_t>(4 * target + 4)) break;
  }
  return out;
}

namespace {

// A tick label of the event-time axis, as precise as its step needs.
std::string TimeTickLabel(Timestamp ts, double step_ms, double span_ms,
                          const absl::TimeZone& zone) {
  if (ts == kMinTimestamp) return "MIN";
  if (ts == kMaxTimestamp) return "MAX";
  const char* format = step_ms < 1000       ? "%H:%M:%E3S"
                       : step_ms < 60000    ? "%H:%M:%S"
                       : span_ms < 86400000 ? "%H:%M"
                       : step_ms < 86400000 ? "%Y-%m-%d %H:%M"
                                            : "%Y-%m-%d";
  return absl::FormatTime(format, absl::FromUnixMillis(ts), zone);
}

// Every computation in doubles: event times anywhere in [MIN, MAX] (and
// ranges as wide as the whole of it) map to finite coordinates.
struct Scale {
  double t0, t1, x0, x1;
  double e0, e1;  // event time range (ms, as double)
  double X(double t) const { return x0 + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * (x1 - x0); }
  // y within a panel [top, top+h]
  double Y(Timestamp ts, double top, double h) const {
    if (ts == kMinTimestamp) return top + h;
    if (ts == kMaxTimestamp) return top;
    const double v = static_cast<double>(ts);
    const double f = e1 > e0 ? (v - e0) / (e1 - e0) : 0.5;
    return top + h - std::clamp(f, -0.02, 1.02) * h;
  }
};

// A step line through (t, value) points, held until `t_end`.
std::string StepPath(const std::vector<std::pair<double, Timestamp>>& pts, const Scale& s,
                     double top, double h, double t_end) {
  std::string d;
  for (size_t i = 0; i < pts.size(); ++i) {
    const double x = s.X(pts[i].first), y = s.Y(pts[i].second, top, h);
    if (i == 0) {
      absl::StrAppendFormat(&d, "M%.1f %.1f", x, y);
    } else {
      absl::StrAppendFormat(&d, " H%.1f V%.1f", x, y);
    }
  }
  if (!pts.empty()) absl::StrAppendFormat(&d, " H%.1f", s.X(t_end));
  return d;
}

// --- Bounded pages (docs/timeline.md) ---
// A watermark lane keeps the first point of each run of equal values; past
// its budget, per time bucket of the plot, the first, lowest, highest and last
// point: the step line is the same at pixel resolution (buckets are at least a
// pixel wide) and its extremes are kept.
using LanePoints = std::vector<std::pair<double, Timestamp>>;
LanePoints DownsampleLane(const LanePoints& in, const Scale& s, size_t budget) {
  LanePoints runs;
  for (const auto& p : in)
    if (runs.empty() || runs.back().second != p.second) runs.push_back(p);
  if (runs.size() <= budget) return runs;
  const double bucket_px = std::max(1.0, 4.0 * (s.x1 - s.x0) / static_cast<double>(budget));
  auto bucket = [&](size_t i) { return std::floor((s.X(runs[i].first) - s.x0) / bucket_px); };
  LanePoints out;
  for (size_t i = 0; i < runs.size();) {
    const double b = bucket(i);
    size_t j = i, lo = i, hi = i;
    for (; j < runs.size() && bucket(j) == b; ++j) {
      if (runs[j].second < runs[lo].second) lo = j;
      if (runs[j].second > runs[hi].second) hi = j;
    }
    std::array<size_t, 4> keep = {i, lo, hi, j - 1};
    std::sort(keep.begin(), keep.end());
    for (size_t k = 0; k < keep.size(); ++k)
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(runs[keep[k]]);
    i = j;
  }
  return out;
}

// A mark (firing, late record, barrier) where it is drawn.
struct Mark {
  double x, y;
  std::string group;  // marks merge only within a group
  bool vertical;      // a barrier: a line over the panel's height, merged by x only
  const TimelineEvent* e;
};

// Marks of one panel that fall in the same cell (per group) become one mark
// with a count; the cell starts at 2 px (marks are 9 px wide: two that close
// look like one) and doubles until the panel has at most `max_marks`.
std::vector<std::vector<const Mark*>> MergeMarks(const std::vector<Mark>& marks, size_t max_marks) {
  for (double cell = 2;; cell *= 2) {
    std::map<std::tuple<std::string, double, double>, size_t> index;
    std::vector<std::vector<const Mark*>> groups;
    for (const Mark& m : marks) {
      const auto key = std::make_tuple(m.group, std::floor(m.x / cell),
                                       m.vertical ? 0.0 : std::floor(m.y / cell));
      auto [it, added] = index.emplace(key, groups.size());
      if (added) groups.emplace_back();
      groups[it->second].push_back(&m);
    }
    if (groups.size() <= max_marks || cell > 1e6) return groups;
  }
}

}  // namespace

std::string RenderTimelineHtml(const std::vector<TimelineEvent>& input, const std::string& title,
                               const absl::TimeZone& zone, const TimelineOptions& options) {
  using K = TimelineEvent::Kind;
  // By records: the same drawing with the records read as the x coordinate.
  std::vector<TimelineEvent> by_records;
  if (options.by_records) {
    by_records = input;
    for (TimelineEvent& e : by_records) e.t_ms = static_cast<double>(e.records);
  }
  const std::vector<TimelineEvent>& events = options.by_records ? by_records : input;
  // Ranges.
  double t_end = 1;
  Timestamp e_min = kMaxTimestamp, e_max = kMinTimestamp;
  auto see = [&](Timestamp v) {
    if (v == kMinTimestamp || v == kMaxTimestamp) return;
    e_min = std::min(e_min, v);
    e_max = std::max(e_max, v);
  };
  std::set<int> sources, window_subtasks;
  std::map<int, std::set<int>> channels;
  // Under mpirun: the rank of each window subtask and of each channel's
  // upstream subtask, named in the labels.
  std::map<int, int> window_rank;
  std::map<std::pair<int, int>, int> channel_rank;
  std::map<int, int> source_rank;
  for (const auto& e : events) {
    if (e.kind == K::kChannel && e.rank >= 0) {
      window_rank[e.subtask] = e.rank;
      channel_rank[{e.subtask, e.channel}] = e.channel_rank;
    }
    if (e.kind == K::kSourceWatermark && e.rank >= 0) source_rank[e.subtask] = e.rank;
  }
  auto source_label = [&](int src) {
    auto it = source_rank.find(src);
    return it == source_rank.end() ? std::string() : absl::StrCat(" (rank ", it->second, ")");
  };
  auto window_label = [&](int ws) {
    auto it = window_rank.find(ws);
    return it == window_rank.end() ? std::string() : absl::StrCat(" (rank ", it->second, ")");
  };
  auto channel_label = [&](int ws, int ch) {
    auto it = channel_rank.find({ws, ch});
    return it == channel_rank.end() ? std::string() : absl::StrCat(" from rank ", it->second);
  };
  for (const auto& e : events) {
    t_end = std::max(t_end, e.t_ms);
    switch (e.kind) {
      case K::kSourceWatermark:
        see(e.watermark);
        sources.insert(e.subtask);
        break;
      case K::kSourceIdle:
      case K::kSourcePause:
        sources.insert(e.subtask);
        break;
      case K::kChannel:
        see(e.watermark);
        see(e.aligned);
        window_subtasks.insert(e.subtask);
        channels[e.subtask].insert(e.channel);
        break;
      case K::kFiring:
        see(e.end);
        see(e.start);
        window_subtasks.insert(e.subtask);
        break;
      case K::kLate:
        see(e.ts);
        window_subtasks.insert(e.subtask);
        break;
      case K::kBarrier:
        (e.source ? sources : window_subtasks).insert(e.subtask);
        break;
      case K::kGeneralized:
        break;
    }
  }
  // Generalized watermarks (docs/generalized-watermarks.md): a lane per
  // (task, subtask, identifier, direction), drawn in a panel of their own
  // below the others: a shaded band where a bool is true, a step line (on
  // the longs' own scale) for a long.
  struct GwLane {
    bool is_bool = false;
    bool wait_for_all = false;
    std::string function;
    int rank = -1;
    LanePoints pts;  // (t, value)
    int64_t watermarks = 0;
    int colour = 0;
  };
  using GwKey = std::tuple<std::string, int, std::string, bool>;
  std::map<GwKey, GwLane> gw_lanes;
  int64_t gw_lo = std::numeric_limits<int64_t>::max(), gw_hi = std::numeric_limits<int64_t>::min();
  for (const auto& e : events) {
    if (e.kind != K::kGeneralized || e.gw == nullptr) continue;
    GwLane& lane = gw_lanes[GwKey{e.gw->task, e.subtask, e.gw->identifier, e.gw_input}];
    lane.is_bool = e.gw->is_bool;
    lane.wait_for_all = e.gw->wait_for_all;
    lane.function = e.gw->function;
    lane.rank = e.rank;
    if (lane.pts.empty() || lane.pts.back().second != e.gw_value)
      lane.pts.emplace_back(e.t_ms, e.gw_value);
    lane.watermarks += e.count;
    if (!e.gw->is_bool) {
      gw_lo = std::min(gw_lo, e.gw_value);
      gw_hi = std::max(gw_hi, e.gw_value);
    }
  }
  int gw_bools = 0, gw_longs = 0;
  for (auto& [key, lane] : gw_lanes) {
    lane.colour = (gw_bools + gw_longs) % 10;
    ++(lane.is_bool ? gw_bools : gw_longs);
  }
  auto gw_name = [](const GwKey& key, const GwLane& lane) {
    const auto& [task, subtask, identifier, input] = key;
    return absl::StrCat(identifier, " (", lane.is_bool ? "bool" : "long", ", ", lane.function,
                        lane.wait_for_all ? ", waits for all channels" : "", ") at ", task,
                        " subtask ", subtask,
                        lane.rank >= 0 ? absl::StrCat(" (rank ", lane.rank, ")") : std::string(),
                        input ? " combined" : " sent");
  };
  constexpr double kGwRow = 16, kGwLongH = 110;
  const double gw_panel_h =
      gw_lanes.empty() ? 0 : gw_bools * kGwRow + (gw_longs > 0 ? kGwLongH + 10 : 0) + 10;
  if (e_min > e_max) {
    e_min = 0;
    e_max = 1;
  }
  // In doubles: e_max - e_min overflows int64 for, say, MIN + 1 and MAX - 1.
  const double pad =
      std::max(1.0, (static_cast<double>(e_max) - static_cast<double>(e_min)) * 0.05);
  t_end *= 1.02;
  const double width = 1200, left = 150, right = 30;
  const double panel_h = 170, gap = 50;
  const int panels = 1 + static_cast<int>(window_subtasks.size());

  // The legend: every kind of line, band and mark the page draws, each
  // swatch drawn as the thing itself (same colour, opacity, dashes); entries
  // for a lane's colour only for the lanes there are.  Laid out left to
  // right, wrapping at the plot's width.
  std::set<int> colours;  // palette indices of the lanes (source s, channel s)
  std::set<int> idle_colours, paused_sources;
  for (const auto& e : events) {
    if (e.kind == K::kSourceWatermark) colours.insert(e.subtask % 10);
    if (e.kind == K::kChannel) colours.insert(e.channel % 10);
    if (e.kind == K::kSourceIdle && e.idle) idle_colours.insert(e.subtask % 10);
    if (e.kind == K::kChannel && e.idle) idle_colours.insert(e.channel % 10);
    if (e.kind == K::kSourcePause && e.idle) paused_sources.insert(e.subtask);
  }
  struct Entry {
    std::string swatch;  // drawn at (0, 0), 24 px wide
    std::string label;
    std::string kind;
  };
  std::vector<Entry> entries;
  for (int c : colours) {
    entries.push_back({absl::StrCat("<line x1='0' y1='0' x2='24' y2='0' stroke='", kPalette[c],
                                    "' stroke-width='2'/>"),
                       absl::StrCat("watermark of source subtask ", c, " / input channel ", c),
                       "lane"});
  }
  entries.push_back(
      {"<line x1='0' y1='0' x2='24' y2='0' stroke='black' stroke-width='3' "
       "stroke-dasharray='6 3'/>",
       "aligned minimum (a window subtask's watermark)", "aligned"});
  for (int c : idle_colours) {
    entries.push_back({absl::StrCat("<rect x='2' y='-6' width='20' height='12' fill='", kPalette[c],
                                    "' opacity='0.15'/>"),
                       absl::StrCat("idle: source subtask ", c, " / input channel ", c), "idle"});
  }
  for (int src : paused_sources) {
    entries.push_back(
        {absl::StrCat("<rect x='0' y='-3' width='24' height='6' fill='", kPalette[src % 10],
                      "' opacity='0.6' stroke='#333' stroke-dasharray='2 1'/>"),
         absl::StrCat("source subtask ", src, " paused by watermark alignment"), "paused"});
  }
  entries.push_back({"<circle cx='12' cy='0' r='4.5' fill='#2ca02c' stroke='white'/>",
                     "fired on time", "on_time"});
  entries.push_back(
      {"<circle cx='12' cy='0' r='4.5' fill='#ff7f0e' stroke='white'/>", "late firing", "late"});
  entries.push_back({"<circle cx='12' cy='0' r='4.5' fill='#1f77b4' stroke='white'/>",
                     "fired by the MAX watermark (end of input, or every other input idle)",
                     "end_of_input"});
  entries.push_back({"<path d='M8 -4 l8 8 m0 -8 l-8 8' stroke='#d62728' stroke-width='2'/>",
                     "late record to the side output (dropped ones, --late=drop, are counted only)",
                     "late_record"});
  entries.push_back(
      {"<line x1='12' y1='-7' x2='12' y2='7' stroke='#9467bd' stroke-width='1.5' "
       "stroke-dasharray='2 2'/>",
       "checkpoint barrier (its number beside it)", "barrier"});
  entries.push_back({"<circle cx='12' cy='0' r='6' fill='#2ca02c' stroke='white'/>",
                     "a larger mark: several merged (hover for how many)", "merged"});
  for (const auto& [key, lane] : gw_lanes) {
    const char* c = kGwPalette[lane.colour];
    if (lane.is_bool) {
      entries.push_back({absl::StrCat("<rect x='2' y='-6' width='20' height='12' fill='", c,
                                      "' opacity='0.45'/>"),
                         absl::StrCat(gw_name(key, lane), ": true"), "gw-bool"});
    } else {
      entries.push_back(
          {absl::StrCat("<line x1='0' y1='0' x2='24' y2='0' stroke='", c, "' stroke-width='2'/>"),
           gw_name(key, lane), "gw-long"});
    }
  }
  std::string legend;
  double lx = 0, ly = 0;
  const double legend_width = width - left - right;
  for (const Entry& en : entries) {
    // 6 px a character at font-size 11 (sans-serif averages less): a
    // generous estimate, so entries never overlap.
    const double w = 24 + 6 + 6.0 * static_cast<double>(en.label.size()) + 18;
    if (lx > 0 && lx + w > legend_width) {
      lx = 0;
      ly += 18;
    }
    absl::StrAppendFormat(&legend,
                          "<g class='legend-entry' data-kind='%s' transform='translate(%.0f,%.0f)'>"
                          "%s<text x='30' y='4'>%s</text></g>\n",
                          en.kind, lx, ly, en.swatch, Esc(en.label));
    lx += w;
  }
  const double top0 = 20 + ly + 18 + 32;
  const double height =
      top0 + panels * (panel_h + gap) + 40 + (gw_lanes.empty() ? 0 : gw_panel_h + gap);
  Scale s{0,
          t_end,
          left,
          width - right,
          static_cast<double>(e_min) - pad,
          static_cast<double>(e_max) + pad};

  std::string svg;
  absl::StrAppendFormat(&svg,
                        "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' "
                        "font-family='sans-serif' font-size='11'>\n",
                        width, height);
  absl::StrAppend(&svg, "<g class='legend' transform='translate(", left, ",20)'>\n", legend,
                  "</g>\n");

  auto panel_frame = [&](double top, const std::string& label) {
    absl::StrAppendFormat(&svg,
                          "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' "
                          "stroke='#ccc'/>\n<text x='8' y='%.1f' font-weight='bold'>%s</text>\n",
                          left, top, width - left - right, panel_h, top - 6, Esc(label));
    double step = 1;
    for (const double v : NiceTimeTicks(s.e0, s.e1, 6, &step)) {
      const Timestamp ts = ClampToTimestamp(v);
      const double y = s.Y(ts, top, panel_h);
      absl::StrAppendFormat(&svg,
                            "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#eee'/>"
                            "<text class='tick y' data-value='%d' x='%.1f' y='%.1f' "
                            "text-anchor='end' fill='#666'>%s</text>\n",
                            left, width - right, y, y, ts, left - 4, y + 4,
                            Esc(TimeTickLabel(ts, step, s.e1 - s.e0, zone)));
    }
  };
  auto info = [](const std::string& text) {
    return absl::StrCat(" data-info=\"", Esc(text), "\"");
  };

  // One pass over the events: each lane's points, idle changes and each
  // panel's marks.
  // An idle (or paused) change; a stretch that starts here stands for `count`
  // (a TimelineSummary merges those within a bucket).
  struct Change {
    double t;
    bool on;
    int64_t count;
  };
  struct Lane {
    LanePoints pts;
    int64_t watermarks = 0;      // what pts stand for
    std::vector<Change> idle;    // changes only
    std::vector<Change> paused;  // watermark alignment; changes only
    static void Add(std::vector<Change>* v, double t, bool now, int64_t count) {
      if (v->empty() ? now : v->back().on != now) v->push_back({t, now, count});
    }
    void Idle(double t, bool idle_now, int64_t count) { Add(&idle, t, idle_now, count); }
    void Pause(double t, bool now, int64_t count) { Add(&paused, t, now, count); }
  };
  std::map<int, Lane> source_lanes;
  std::map<std::pair<int, int>, Lane> channel_lanes;  // (window subtask, channel)
  std::map<int, LanePoints> aligned_lanes;
  std::vector<const TimelineEvent*> source_barriers;
  std::map<int, std::vector<const TimelineEvent*>> window_marks;
  for (const auto& e : events) {
    switch (e.kind) {
      case K::kSourceWatermark:
        source_lanes[e.subtask].pts.emplace_back(e.t_ms, e.watermark);
        source_lanes[e.subtask].watermarks += e.count;
        break;
      case K::kSourceIdle:
        source_lanes[e.subtask].Idle(e.t_ms, e.idle, e.count);
        break;
      case K::kSourcePause:
        source_lanes[e.subtask].Pause(e.t_ms, e.idle, e.count);
        break;
      case K::kChannel: {
        Lane& lane = channel_lanes[{e.subtask, e.channel}];
        lane.pts.emplace_back(e.t_ms, e.watermark);
        lane.Idle(e.t_ms, e.idle, e.count);
        LanePoints& aligned = aligned_lanes[e.subtask];
        if (aligned.empty() || aligned.back().second != e.aligned)
          aligned.emplace_back(e.t_ms, e.aligned);
        break;
      }
      case K::kFiring:
      case K::kLate:
        window_marks[e.subtask].push_back(&e);
        break;
      case K::kBarrier:
        if (e.source) {
          source_barriers.push_back(&e);
        } else {
          window_marks[e.subtask].push_back(&e);
        }
        break;
      case K::kGeneralized:
        break;
    }
  }
  // The point budget, shared by the lanes.
  const size_t lane_count =
      std::max<size_t>(1, source_lanes.size() + channel_lanes.size() + aligned_lanes.size());
  const size_t lane_budget = std::clamp<size_t>(kTimelinePointBudget / lane_count, 64,
                                                static_cast<size_t>(4 * (width - left - right)));
  const size_t marks_budget = std::max<size_t>(kTimelineMinMarksPerPanel,
                                               kTimelineMarkBudget / static_cast<size_t>(panels));

  auto mark_text = [&](const TimelineEvent& e) -> std::string {
    switch (e.kind) {
      case K::kFiring:
        return absl::StrCat("key ", e.key, " window [", FormatTime(e.start, zone), ", ",
                            FormatTime(e.end, zone), ") fired ", e.firing, " at watermark ",
                            FormatTime(e.watermark, zone), ": ", e.value);
      case K::kLate:
        return absl::StrCat("late record key ", e.key, " at ", FormatTime(e.ts, zone), ": ",
                            e.value);
      case K::kBarrier:
        return e.source ? absl::StrCat("source subtask ", e.subtask, " sent barrier ", e.checkpoint)
                        : absl::StrCat("window subtask ", e.subtask, " aligned barrier ",
                                       e.checkpoint, absl::StrFormat(" in %.3f ms", e.alignment_ms),
                                       " and took its snapshot");
      default:
        return "";
    }
  };
  // How many events a group of marks stands for (a summary's mark may stand
  // for several).
  auto group_count = [](const std::vector<const Mark*>& group) {
    int64_t n = 0;
    for (const Mark* m : group) n += m->e->count;
    return n;
  };
  // A merged mark says how many it stands for and the first few.
  auto merged_text = [&](const std::vector<const Mark*>& group) {
    const int64_t total = group_count(group);
    if (total == 1) return mark_text(*group[0]->e);
    const TimelineEvent& first = *group[0]->e;
    std::string text = first.kind == K::kFiring
                           ? absl::StrCat(total, " windows fired ", first.firing, " here: ")
                       : first.kind == K::kLate ? absl::StrCat(total, " late records here: ")
                                                : absl::StrCat(total, " barriers here: ");
    size_t shown = 0;
    for (; shown < group.size() && shown < 3; ++shown)
      absl::StrAppend(&text, shown > 0 ? "; " : "", mark_text(*group[shown]->e));
    if (total > static_cast<int64_t>(shown))
      absl::StrAppend(&text, "; ... and ", total - static_cast<int64_t>(shown), " more");
    return text;
  };
  auto draw_marks = [&](const std::vector<const TimelineEvent*>& evs, double top) {
    std::vector<Mark> marks;
    marks.reserve(evs.size());
    for (const TimelineEvent* e : evs) {
      if (e->kind == K::kFiring) {
        marks.push_back({s.X(e->t_ms), s.Y(SaturatingSub(e->end, 1), top, panel_h),
                         "firing " + e->firing, false, e});
      } else if (e->kind == K::kLate) {
        marks.push_back({s.X(e->t_ms), s.Y(e->ts, top, panel_h), "late", false, e});
      } else {
        marks.push_back({s.X(e->t_ms), top, "barrier", true, e});
      }
    }
    for (const auto& group : MergeMarks(marks, marks_budget)) {
      const Mark& m = *group[0];
      const TimelineEvent& e = *m.e;
      const std::string text = merged_text(group);
      const int64_t total = group_count(group);
      const bool merged = total > 1;
      const std::string count = merged ? absl::StrCat(" data-count='", total, "'") : std::string();
      if (e.kind == K::kFiring) {
        const char* color = e.firing == "on_time" ? "#2ca02c"
                            : e.firing == "late"  ? "#ff7f0e"
                                                  : "#1f77b4";
        absl::StrAppendFormat(&svg,
                              "<circle class='mark firing %s'%s cx='%.1f' cy='%.1f' r='%.1f' "
                              "fill='%s' stroke='white'%s><title>%s</title></circle>\n",
                              e.firing, count, m.x, m.y, merged ? 6.0 : 4.5, color, info(text),
                              Esc(text));
      } else if (e.kind == K::kLate) {
        absl::StrAppendFormat(&svg,
                              "<path class='mark late'%s d='M%.1f %.1f l8 8 m0 -8 l-8 8' "
                              "stroke='#d62728' stroke-width='%d'%s><title>%s</title></path>\n",
                              count, m.x - 4, m.y - 4, merged ? 3 : 2, info(text), Esc(text));
      } else {
        absl::StrAppendFormat(&svg,
                              "<g class='mark barrier' data-checkpoint='%d'%s%s><line x1='%.1f' "
                              "x2='%.1f' y1='%.1f' y2='%.1f' stroke='#9467bd' stroke-width='1.5' "
                              "stroke-dasharray='2 2'/><text x='%.1f' y='%.1f' fill='#9467bd' "
                              "font-size='9'>%d</text><title>%s</title></g>\n",
                              e.checkpoint, count, info(text), m.x, m.x, top, top + panel_h,
                              m.x + 2, top + 10, e.checkpoint, Esc(text));
      }
    }
  };
  auto idle_rects = [&](const Lane& lane, double top, const char* color, double opacity,
                        const std::string& cls, const std::string& label) {
    for (size_t i = 0; i < lane.idle.size(); ++i) {
      if (!lane.idle[i].on) continue;
      const double from = lane.idle[i].t;
      const double until = i + 1 < lane.idle.size() ? lane.idle[i + 1].t : t_end;
      const int64_t n = lane.idle[i].count;
      const std::string text =
          n > 1 ? absl::StrCat(label, " (", n, " stretches, each within a pixel of the next)")
                : label;
      absl::StrAppendFormat(&svg,
                            "<rect class='idle %s'%s x='%.1f' y='%.1f' width='%.1f' "
                            "height='%.1f' fill='%s' opacity='%.2f'%s><title>%s</title></rect>\n",
                            cls, n > 1 ? absl::StrCat(" data-count='", n, "'") : std::string(),
                            s.X(from), top, std::max(1.0, s.X(until) - s.X(from)), panel_h, color,
                            opacity, info(text), Esc(text));
    }
  };

  // Sources panel.
  double top = top0;
  panel_frame(top, "sources");
  draw_marks(source_barriers, top);
  for (int src : sources) {
    const Lane& lane = source_lanes[src];
    const LanePoints pts = DownsampleLane(lane.pts, s, lane_budget);
    const char* color = kPalette[src % 10];
    absl::StrAppendFormat(
        &svg,
        "<path class='lane source' data-subtask='%d' d='%s' fill='none' "
        "stroke='%s' stroke-width='2'%s><title>source subtask %d%s</title></path>\n",
        src, StepPath(pts, s, top, panel_h, t_end), color,
        info(absl::StrCat("source subtask ", src, source_label(src), ": ", lane.watermarks,
                          " watermarks, last ",
                          pts.empty() ? "none" : FormatTime(pts.back().second, zone))),
        src, source_label(src));
    idle_rects(lane, top, color, 0.15, "source", absl::StrCat("source subtask ", src, " idle"));
    // Paused by watermark alignment: a hatched band along the bottom.
    for (size_t i = 0; i < lane.paused.size(); ++i) {
      if (!lane.paused[i].on) continue;
      const double from = lane.paused[i].t;
      const double until = i + 1 < lane.paused.size() ? lane.paused[i + 1].t : t_end;
      const int64_t n = lane.paused[i].count;
      const std::string label = absl::StrCat(
          "source subtask ", src, " paused by watermark alignment",
          n > 1 ? absl::StrCat(" (", n, " pauses, each within a pixel of the next)") : "");
      absl::StrAppendFormat(&svg,
                            "<rect class='paused source' data-subtask='%d'%s x='%.1f' y='%.1f' "
                            "width='%.1f' height='6' fill='%s' opacity='0.6' "
                            "stroke='#333' stroke-dasharray='2 1'%s><title>%s</title></rect>\n",
                            src, n > 1 ? absl::StrCat(" data-count='", n, "'") : std::string(),
                            s.X(from), top + panel_h - 6 - 2 * (src % 4),
                            std::max(1.0, s.X(until) - s.X(from)), color, info(label), Esc(label));
    }
  }
  // One panel per window subtask.
  for (int ws : window_subtasks) {
    top += panel_h + gap;
    panel_frame(top, absl::StrCat("window subtask ", ws, window_label(ws)));
    for (int ch : channels[ws]) {
      const Lane& lane = channel_lanes[{ws, ch}];
      const LanePoints pts = DownsampleLane(lane.pts, s, lane_budget);
      const char* color = kPalette[ch % 10];
      absl::StrAppendFormat(
          &svg,
          "<path class='lane channel' data-subtask='%d' data-channel='%d' d='%s' fill='none' "
          "stroke='%s' stroke-width='1.5' opacity='0.8'%s><title>window %d, input channel "
          "%d%s</title></path>\n",
          ws, ch, StepPath(pts, s, top, panel_h, t_end), color,
          info(absl::StrCat("window subtask ", ws, ", channel ", ch, channel_label(ws, ch),
                            ": last ", pts.empty() ? "none" : FormatTime(pts.back().second, zone))),
          ws, ch, channel_label(ws, ch));
      idle_rects(lane, top, color, 0.15, "channel", absl::StrCat("channel ", ch, " idle"));
    }
    const LanePoints aligned = DownsampleLane(aligned_lanes[ws], s, lane_budget);
    absl::StrAppendFormat(
        &svg,
        "<path class='lane aligned' data-subtask='%d' d='%s' fill='none' "
        "stroke='black' stroke-width='3' stroke-dasharray='6 3'%s>"
        "<title>window %d aligned watermark (minimum over active channels)</title></path>\n",
        ws, StepPath(aligned, s, top, panel_h, t_end),
        info(absl::StrCat("window subtask ", ws, " aligned watermark, last ",
                          aligned.empty() ? "none" : FormatTime(aligned.back().second, zone))),
        ws);
    draw_marks(window_marks[ws], top);
  }
  double last_h = panel_h;
  if (!gw_lanes.empty()) {
    top += panel_h + gap;
    last_h = gw_panel_h;
    absl::StrAppendFormat(&svg,
                          "<rect class='gw-panel' x='%.1f' y='%.1f' width='%.1f' height='%.1f' "
                          "fill='none' stroke='#ccc'/>\n<text x='8' y='%.1f' "
                          "font-weight='bold'>generalized watermarks</text>\n",
                          left, top, width - left - right, gw_panel_h, top - 6);
    double row_y = top + 5;
    for (const auto& [key, lane] : gw_lanes) {
      if (!lane.is_bool) continue;
      const auto& [task, subtask, identifier, input] = key;
      const char* c = kGwPalette[lane.colour];
      const std::string name = gw_name(key, lane);
      absl::StrAppendFormat(&svg,
                            "<text class='gw-row' x='%.1f' y='%.1f' text-anchor='end' "
                            "fill='%s'>%s</text>\n",
                            left - 4, row_y + kGwRow - 5, c,
                            Esc(absl::StrCat(identifier, " ", input ? "in" : "out", " ", subtask)));
      for (size_t i = 0; i < lane.pts.size(); ++i) {
        if (lane.pts[i].second == 0) continue;
        const double from = lane.pts[i].first;
        const double until = i + 1 < lane.pts.size() ? lane.pts[i + 1].first : t_end;
        const std::string text = absl::StrCat(name, ": true");
        absl::StrAppendFormat(
            &svg,
            "<rect class='gw-band' data-identifier='%s' data-task='%s' data-subtask='%d' "
            "data-direction='%s' x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s' "
            "opacity='0.45'%s><title>%s</title></rect>\n",
            Esc(identifier), Esc(task), subtask, input ? "in" : "out", s.X(from), row_y,
            std::max(1.0, s.X(until) - s.X(from)), kGwRow - 3, c, info(text), Esc(text));
      }
      row_y += kGwRow;
    }
    if (gw_longs > 0) {
      // The longs' own vertical scale.
      const double lo = static_cast<double>(gw_lo), hi = static_cast<double>(gw_hi);
      const double ltop = row_y + 5, lh = kGwLongH;
      auto y_of = [&](int64_t v) {
        const double f = hi > lo ? (static_cast<double>(v) - lo) / (hi - lo) : 0.5;
        return ltop + lh - f * lh;
      };
      for (const double v : NiceTicks(lo, hi, 3)) {
        absl::StrAppendFormat(&svg,
                              "<text class='tick gw' x='%.1f' y='%.1f' text-anchor='end' "
                              "fill='#666'>%g</text>\n",
                              left - 4, y_of(static_cast<int64_t>(v)) + 4, v);
      }
      for (const auto& [key, lane] : gw_lanes) {
        if (lane.is_bool) continue;
        const auto& [task, subtask, identifier, input] = key;
        const LanePoints pts = DownsampleLane(lane.pts, s, lane_budget);
        std::string d;
        for (size_t i = 0; i < pts.size(); ++i) {
          const double x = s.X(pts[i].first), y = y_of(pts[i].second);
          if (i == 0) {
            absl::StrAppendFormat(&d, "M%.1f %.1f", x, y);
          } else {
            absl::StrAppendFormat(&d, " H%.1f V%.1f", x, y);
          }
        }
        if (!pts.empty()) absl::StrAppendFormat(&d, " H%.1f", s.X(t_end));
        const std::string text =
            absl::StrCat(gw_name(key, lane), ": ", lane.watermarks, " watermarks, last ",
                         pts.empty() ? std::string("none") : absl::StrCat(pts.back().second));
        absl::StrAppendFormat(
            &svg,
            "<path class='lane gw-long' data-identifier='%s' data-task='%s' data-subtask='%d' "
            "data-direction='%s' d='%s' fill='none' stroke='%s' stroke-width='2'%s>"
            "<title>%s</title></path>\n",
            Esc(identifier), Esc(task), subtask, input ? "in" : "out", d, kGwPalette[lane.colour],
            info(text), Esc(text));
      }
    }
  }
  // Processing-time axis.
  const double axis_y = top + last_h + 18;
  std::vector<double> xticks = NiceTicks(0, t_end, 8);
  if (options.by_records) {  // whole records only
    xticks.erase(
        std::remove_if(xticks.begin(), xticks.end(), [](double v) { return v != std::floor(v); }),
        xticks.end());
  }
  const double xstep = xticks.size() > 1 ? xticks[1] - xticks[0] : 1;
  for (const double t : xticks) {
    const std::string label = options.by_records ? absl::StrFormat("%.0f", t)
                              : xstep >= 1000    ? absl::StrFormat("%g s", t / 1000)
                                                 : absl::StrFormat("%g ms", t);
    absl::StrAppendFormat(&svg,
                          "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#999'/>"
                          "<text class='tick x' data-value='%g' x='%.1f' y='%.1f' "
                          "text-anchor='middle' fill='#666'>%s</text>\n",
                          s.X(t), s.X(t), axis_y - 18, axis_y - 13, t, s.X(t), axis_y, label);
  }
  absl::StrAppendFormat(
      &svg, "<text x='%.1f' y='%.1f' text-anchor='middle'>%s</text>\n", (left + width - right) / 2,
      axis_y + 16,
      options.by_records ? "records read (all sources together)" : "processing time since start");
  svg += "</svg>\n";

  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>", Esc(title),
      "</title>\n<style>body{font-family:sans-serif;margin:16px}#details{position:sticky;top:0;"
      "background:#fffbe6;border:1px solid #e0d890;padding:6px;min-height:1.4em}"
      "[data-info]:hover{opacity:1;stroke-width:4}</style></head><body>\n<h2>",
      Esc(title), "</h2>\n<p>Event time (vertical, in ", Esc(zone.name()), ") against ",
      options.by_records ? "records read" : "processing time",
      " (horizontal). Each window subtask takes the minimum of its "
      "active input channels: the dashed black line. The channel whose line sits on it is the "
      "one holding windows back.</p>\n<div id='details'>hover over a line or mark for "
      "details</div>\n",
      svg,
      "<script>\ndocument.querySelectorAll('[data-info]').forEach(function(el){\n"
      "  el.addEventListener('mouseover',function(){document.getElementById('details').textContent="
      "el.getAttribute('data-info');});\n});\n</script>\n</body></html>\n");
  return html;
}

}  // namespace tidemark::cli
