// tests/reference_model.h
// (Longer than 600 lines: the whole reference model, to be read as one unit against
// docs/semantics.md.)
//
// A sequential reference model of tidemark's event-time windowing, written
// for obviousness rather than speed and sharing no code with the runtime (it
// does not include a single runtime or window header): its own watermark
// valve (docs/semantics.md 3.2), its own window assignment (5.1-5.4),
// its own window operator with the default EventTimeTrigger (6, 7), and a
// driver that replays a scripted job.  The differential test
// (differential_test.cc) runs the same script on the real, multi-threaded
// runtime and compares.
//
// ---------------------------------------------------------------------------
// The scripted job and why its result does not depend on thread timing
// ---------------------------------------------------------------------------
// S source subtasks feed P window subtasks (key_by).  The script is cut into
// rounds r = 0..R-1 with one global, strictly increasing watermark sequence
// W_0 < W_1 < ... .  In each round every source subtask s does one of:
//
//   kActive   records..., then EmitWatermark(W_r)
//   kSilent   nothing (it stays active and keeps its older watermark, so it
//             can hold the minimum back: "lagging source")
//   kGoIdle   records..., then MarkIdle()              (only when active)
//   kStayIdle nothing                                  (only when idle)
//   kResume   records... (emitted while still idle), then EmitWatermark(W_r),
//             which first sends ACTIVE                 (only when idle)
//
// with at least one source active at the end of every round.  At the end each
// source emits W(MAX) and ends.
//
// Let O_r be the minimum watermark over the sources active at the end of round
// r (O_{-1} = MIN).  Every active channel is then aligned (a resuming channel
// re-enters with W_r, which is >= anything the valve can have output in round
// r), so after the window subtask's valve has consumed all of round r its
// output is exactly O_r, and every channel's state (watermark, idle) is known.
//
// THE BARRIER.  A source emits nothing of round r+1 (and does not end) before
// every window subtask's valve has reached the state the model predicts for
// the end of round r: every channel's (watermark, idle) and the valve's
// output.  The sources observe this through the runtime's public
// WatermarkListener (OnInputChannel, called on the window subtask's thread
// before it goes on to anything else).  Every channel that sent anything in
// round r ends that round with an element that changes its state (W_r is new
// for it; IDLE follows ACTIVE), so "state reached" implies "every element of
// round r was consumed".  Hence:
//
//   * LOWER BOUND: a record of round r is processed at watermark >= O_{r-1}.
//   * UPPER BOUND: a record on a channel that is active while it sends it
//     (kActive, kGoIdle) is processed at watermark <= that channel's own
//     watermark c.wm (the valve output is a minimum over aligned channels, and
//     the channel is aligned), and never above O_r (the valve cannot pass O_r
//     before the barrier, and the record precedes the barrier).  A record of a
//     resuming (still idle) channel only has the bound O_r.
//
// So each record e has a range [L_e, U_e] of watermarks at which it can be
// processed, L_e = O_{r-1}, U_e = min(c.wm, O_r) or O_r.  With no lagging or
// resuming source L_e == U_e and the result is fully determined.  Otherwise
// the generator only emits records whose treatment is the same for every
// watermark in [L_e, U_e] ("stable"), which the model checks for every
// record it processes (so a generator mistake fails loudly, it does not make
// a flaky test):
//
//   Tumbling / sliding: for each assigned window w, none of max_timestamp(w),
//     cleanup_time(w), and for the element ts + lateness lies in (L_e, U_e].
//     Then for any wm in the range the element is skipped / accepted / fires
//     the window by element identically, and it is added before the window's
//     main (timer) firing exactly when max_timestamp(w) > U_e.
//   Sessions: merging makes the order of elements of one key matter, so
//     - a record is SAFE if ts >= O_r + 2: every window touching its window
//       [ts, ts+gap) has max_timestamp >= ts - 1 > any watermark of the
//       round, so it never fires, is never late, and commutes with every other
//       element and timer of the round;
//     - an UNSAFE record must have L_e == U_e, and all unsafe records of one
//       (key, round) come from one source subtask (so their relative order is
//       that channel's FIFO order).
//
// What remains interleaving-dependent is reported as unknown, never compared:
//   * the intermediate values of the running sum of a window's late firings
//     in one round when their records come from several channels (the counts
//     are still determined: each accepted late element fires once, adding 1;
//     the last firing of the round has the full, determined sum);
//   * the watermark a firing saw, when more than one valve output value is
//     possible (ranges with L < U; intermediate outputs while lagging sources
//     catch up).
// Everything else is compared exactly: the multiset of firings (key, window,
// count, fired-by-element), the late side output, the dropped counter.
//
// The model replays one canonical interleaving (Interleaving below); the
// differential test also replays others and requires the determined parts to
// agree, which checks the argument above on every generated case.
#ifndef TM_TESTS_REFERENCE_MODEL_H_
#define TM_TESTS_REFERENCE_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace tidemark::model {

using Ts = int64_t;
inline constexpr Ts kMin = std::numeric_limits<Ts>::min();
inline constexpr Ts kMax = std::numeric_limits<Ts>::max();

inline std::string TsStr(Ts t) {
  if (t == kMin) return "MIN";
  if (t == kMax) return "MAX";
  return std::to_string(t);
}

// A fingerprint of a record id; sums of fingerprints identify multisets.
inline uint64_t IdHash(int64_t id) {
  uint64_t z = static_cast<uint64_t>(id) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// --------------------------------------------------------------------------
// The job.

enum class WindowKind { kTumbling, kSliding, kSession };

inline const char* Name(WindowKind k) {
  switch (k) {
    case WindowKind::kTumbling:
      return "tumbling";
    case WindowKind::kSliding:
      return "sliding";
    case WindowKind::kSession:
      return "session";
  }
  return "?";
}

struct WindowSpec {
  WindowKind kind = WindowKind::kTumbling;
  int64_t size = 1000;   // tumbling, sliding
  int64_t slide = 1000;  // sliding
  int64_t offset = 0;    // tumbling, sliding
  int64_t gap = 1000;    // sessions
  int64_t lateness = 0;
  bool side_output = false;

  std::string ToString() const {
    std::ostringstream o;
    o << Name(kind);
    if (kind == WindowKind::kSession) {
      o << " gap=" << gap;
    } else {
      o << " size=" << size;
      if (kind == WindowKind::kSliding) o << " slide=" << slide;
      o << " offset=" << offset;
    }
    o << " lateness=" << lateness << " side_output=" << (side_output ? "on" : "off");
    return o.str();
  }
};

struct Rec {
  int64_t id = 0;
  int64_t key = 0;
  Ts ts = 0;
  int64_t value = 0;
};

enum class Mode { kActive, kSilent, kGoIdle, kStayIdle, kResume };

inline const char* Name(Mode m) {
  switch (m) {
    case Mode::kActive:
      return "active";
    case Mode::kSilent:
      return "silent";
    case Mode::kGoIdle:
      return "go-idle";
    case Mode::kStayIdle:
      return "stay-idle";
    case Mode::kResume:
      return "resume";
  }
  return "?";
}
inline bool SendsRecords(Mode m) {
  return m == Mode::kActive || m == Mode::kGoIdle || m == Mode::kResume;
}
inline bool EmitsWatermark(Mode m) { return m == Mode::kActive || m == Mode::kResume; }

struct SourceRound {
  Mode mode = Mode::kActive;
  std::vector<Rec> records;
};

struct Script {
  int sources = 1;
  std::vector<Ts> watermarks;                    // W_r, strictly increasing
  std::vector<std::vector<SourceRound>> rounds;  // [round][source]

  int num_rounds() const { return static_cast<int>(rounds.size()); }
  size_t num_records() const {
    size_t n = 0;
    for (const auto& r : rounds)
      for (const auto& s : r) n += s.records.size();
    return n;
  }
};

// What every channel of a window subtask looks like, and the valve's output,
// once round r has been consumed.
struct ChannelState {
  Ts watermark = kMin;
  bool idle = false;
  bool operator==(const ChannelState& o) const {
    return watermark == o.watermark && idle == o.idle;
  }
};
struct RoundEnd {
  std::vector<ChannelState> channels;
  Ts output = kMin;  // O_r
};

// Channel states and O_r after every round; throws std::logic_error for a
// script that breaks the rules (mode sequence, at least one active source,
// increasing watermarks).
inline std::vector<RoundEnd> ExpectedRoundEnds(const Script& s) {
  std::vector<RoundEnd> out;
  std::vector<ChannelState> ch(static_cast<size_t>(s.sources));
  for (size_t i = 1; i < s.watermarks.size(); ++i)
    if (s.watermarks[i] <= s.watermarks[i - 1]) throw std::logic_error("W not increasing");
  for (int r = 0; r < s.num_rounds(); ++r) {
    if (static_cast<int>(s.rounds[r].size()) != s.sources) throw std::logic_error("bad round");
    for (int c = 0; c < s.sources; ++c) {
      const SourceRound& sr = s.rounds[r][c];
      const bool was_idle = ch[c].idle;
      const bool needs_idle = sr.mode == Mode::kStayIdle || sr.mode == Mode::kResume;
      if (needs_idle != was_idle)
        throw std::logic_error("mode " + std::string(Name(sr.mode)) +
                               " after idle=" + (was_idle ? "true" : "false"));
      if (!SendsRecords(sr.mode) && !sr.records.empty())
        throw std::logic_error("records in a round without a closing control");
      if (EmitsWatermark(sr.mode)) {
        ch[c].watermark = s.watermarks[r];
        ch[c].idle = false;
      } else if (sr.mode == Mode::kGoIdle) {
        ch[c].idle = true;
      }
    }
    RoundEnd e;
    e.channels = ch;
    bool any_active = false;
    e.output = kMax;
    for (const auto& c : ch) {
      if (c.idle) continue;
      any_active = true;
      e.output = std::min(e.output, c.watermark);
    }
    if (!any_active) throw std::logic_error("no active source at the end of a round");
    out.push_back(std::move(e));
  }
  return out;
}

// --------------------------------------------------------------------------
// Window assignment (Flink's TimeWindow helpers, restated).

struct Window {
  Ts start = 0;
  Ts end = 0;
  Ts max_ts() const { return end - 1; }
  bool operator<(const Window& o) const { return std::tie(start, end) < std::tie(o.start, o.end); }
  bool operator==(const Window& o) const { return start == o.start && end == o.end; }
  // Touching windows intersect.
  bool Intersects(const Window& o) const { return start <= o.end && end >= o.start; }
};

// The start of the window of length `size` holding ts, windows aligned to
// `offset`: floor((ts - offset) / size) * size + offset.
inline Ts WindowStart(Ts ts, int64_t offset, int64_t size) {
  int64_t r = (ts - offset) % size;  // C++ % truncates like Java's
  if (r < 0) r += size;
  return ts - r;
}

inline std::vector<Window> AssignWindows(const WindowSpec& spec, Ts ts) {
  std::vector<Window> out;
  switch (spec.kind) {
    case WindowKind::kTumbling: {
      const Ts start = WindowStart(ts, spec.offset, spec.size);
      out.push_back({start, start + spec.size});
      break;
    }
    case WindowKind::kSliding: {
      // Descending start order, like Flink.
      for (Ts start = WindowStart(ts, spec.offset, spec.slide); start > ts - spec.size;
           start -= spec.slide)
        out.push_back({start, start + spec.size});
      break;
    }
    case WindowKind::kSession:
      out.push_back({ts, ts + spec.gap});
      break;
  }
  return out;
}

inline Ts CleanupTime(const WindowSpec& spec, const Window& w) {
  const Ts m = w.max_ts();
  if (spec.lateness > 0 && m > kMax - spec.lateness) return kMax;
  return m + spec.lateness;
}

// ts + lateness with Java's wrapping long addition.
inline Ts ElementLatePoint(const WindowSpec& spec, Ts ts) {
  return static_cast<Ts>(static_cast<uint64_t>(ts) + static_cast<uint64_t>(spec.lateness));
}

// True when `point <= wm` has the same answer for every wm in [lo, hi].
inline bool SameSide(Ts point, Ts lo, Ts hi) { return !(point > lo && point <= hi); }

// The stability rule for tumbling / sliding windows (see the file comment).
inline bool StableNonMerging(const WindowSpec& spec, Ts ts, Ts lo, Ts hi) {
  if (lo == hi) return true;
  if (!SameSide(ElementLatePoint(spec, ts), lo, hi)) return false;
  for (const Window& w : AssignWindows(spec, ts)) {
    if (!SameSide(w.max_ts(), lo, hi) || !SameSide(CleanupTime(spec, w), lo, hi)) return false;
  }
  return true;
}

// Sessions: SAFE records commute with everything in their round.
inline bool SafeSessionRecord(Ts ts, Ts round_output) {
  return round_output <= kMax - 2 && ts >= round_output + 2;
}

// --------------------------------------------------------------------------
// The watermark valve, restated from docs/semantics.md 3.2.

class Valve {
 public:
  explicit Valve(int n) : ch_(static_cast<size_t>(n)) {}

  // Each returns the new output watermark, if one was emitted.
  bool Watermark(int c, Ts w, Ts* emitted) {
    Ch& x = ch_[c];
    if (idle_ || x.idle) return false;
    if (w <= x.wm) return false;
    x.wm = w;
    if (!x.aligned && w >= out_) x.aligned = true;
    return NewMin(emitted);
  }
  bool Idle(int c, Ts* emitted) {
    Ch& x = ch_[c];
    if (x.idle) return false;
    x.idle = true;
    x.aligned = false;
    bool any_active = false;
    for (const Ch& y : ch_) any_active = any_active || !y.idle;
    bool out = false;
    if (!any_active) {
      Ts m = kMin;
      for (const Ch& y : ch_) m = std::max(m, y.wm);
      if (m > out_) {
        out_ = m;
        *emitted = m;
        out = true;
      }
      idle_ = true;
    } else if (x.wm == out_) {
      out = NewMin(emitted);
    }
    return out;
  }
  bool Active(int c, Ts* emitted) {
    Ch& x = ch_[c];
    if (!x.idle) return false;
    x.idle = false;
    idle_ = false;
    if (x.wm >= out_) {
      x.aligned = true;
      return NewMin(emitted);
    }
    return false;
  }
  Ts output() const { return out_; }
  ChannelState state(int c) const { return {ch_[c].wm, ch_[c].idle}; }

 private:
  struct Ch {
    Ts wm = kMin;
    bool idle = false;
    bool aligned = true;
  };
  bool NewMin(Ts* emitted) {
    bool any = false;
    Ts m = kMax;
    for (const Ch& y : ch_) {
      if (!y.aligned) continue;
      any = true;
      m = std::min(m, y.wm);
    }
    if (any && m > out_) {
      out_ = m;
      *emitted = m;
      return true;
    }
    return false;
  }
  std::vector<Ch> ch_;
  Ts out_ = kMin;
  bool idle_ = false;
};

// --------------------------------------------------------------------------
// Results.

struct Firing {
  int64_t key = 0;
  Window window;
  int64_t count = 0;
  int64_t sum = 0;
  uint64_t id_hash = 0;  // sum of IdHash over the window's records
  bool by_element = false;
  Ts watermark = kMin;
  // Model annotations.
  bool watermark_known = true;
  bool sum_known = true;
  int round = -1;   // element firings: the round of the record; timer firings: -1 for the end
  int source = -1;  // element firings: the source of the record

  std::string ToString() const {
    std::ostringstream o;
    o << "key=" << key << " [" << window.start << "," << window.end << ") count=" << count
      << " sum=" << (sum_known ? std::to_string(sum) : "?") << " "
      << (by_element ? "element" : "timer") << " wm=" << (watermark_known ? TsStr(watermark) : "?");
    return o.str();
  }
};

struct Result {
  std::vector<Firing> firings;
  std::vector<Rec> late;     // side output
  std::vector<Rec> dropped;  // counted in numLateRecordsDropped
};

// --------------------------------------------------------------------------
// The window operator with EventTimeTrigger, for one (any) window subtask:
// keys never interact, and every window subtask sees the same watermarks.

class WindowModel {
 public:
  explicit WindowModel(WindowSpec spec) : spec_(spec) {}

  // The record `rec` of source `source`, round `round`, processed at the
  // current watermark, which the driver guarantees is in [lo, hi];
  // `round_output` = O_round.
  void Element(const Rec& rec, int source, int round, Ts lo, Ts hi, Ts round_output, Result* out) {
    if (wm_ < lo || wm_ > hi)
      throw std::logic_error("model: watermark " + TsStr(wm_) + " outside [" + TsStr(lo) + ", " +
                             TsStr(hi) + "]");
    Ctx ctx{&rec, source, round, lo == hi};
    bool skipped = true;
    if (spec_.kind == WindowKind::kSession) {
      if (!SafeSessionRecord(rec.ts, round_output)) {
        if (lo != hi)
          throw std::logic_error("model: unsafe session record id=" + std::to_string(rec.id) +
                                 " with a watermark range");
        auto [it, fresh] = unsafe_owner_.try_emplace({rec.key, round}, source);
        if (!fresh && it->second != source)
          throw std::logic_error("model: unsafe session records of key " + std::to_string(rec.key) +
                                 " from two sources in round " + std::to_string(round));
      }
      skipped = !SessionElement(rec, ctx, out);
    } else {
      if (!StableNonMerging(spec_, rec.ts, lo, hi))
        throw std::logic_error("model: record id=" + std::to_string(rec.id) +
                               " is not stable over [" + TsStr(lo) + ", " + TsStr(hi) + "]");
      for (const Window& w : AssignWindows(spec_, rec.ts)) {
        if (CleanupTime(spec_, w) <= wm_) continue;  // late window
        skipped = false;
        State& st = windows_[{rec.key, w}];
        Add(st, rec);
        if (w.max_ts() <= wm_) {
          Fire(rec.key, w, st, true, ctx, out);  // late firing
        } else {
          st.timer = true;
        }
      }
    }
    if (skipped && ElementLatePoint(spec_, rec.ts) <= wm_) {
      if (spec_.side_output) {
        out->late.push_back(rec);
      } else {
        out->dropped.push_back(rec);
      }
    }
  }

  // The valve emitted `w`; `known` says whether the firings it causes can
  // only have happened at exactly this watermark value.
  void Advance(Ts w, const std::set<Ts>& candidates, Ts phase_lo, Ts phase_hi, Result* out) {
    wm_ = w;
    std::vector<Key> gone;
    std::vector<std::pair<Key, Window>> fired;
    auto fire_and_clean = [&](int64_t key, const Window& win, State& st) -> bool {
      if (st.timer && win.max_ts() <= w) {
        st.timer = false;
        Ctx ctx{nullptr, -1, -1, UniqueCandidate(candidates, win.max_ts(), phase_lo, phase_hi)};
        Fire(key, win, st, false, ctx, out);
      }
      const Ts c = CleanupTime(spec_, win);
      return c != kMax && c <= w;  // the cleanup timer (none at MAX)
    };
    if (spec_.kind == WindowKind::kSession) {
      for (auto it = sessions_.begin(); it != sessions_.end();) {
        auto& list = it->second;
        for (size_t i = 0; i < list.size();) {
          if (fire_and_clean(it->first, list[i].first, list[i].second)) {
            list.erase(list.begin() + static_cast<long>(i));
          } else {
            ++i;
          }
        }
        it = list.empty() ? sessions_.erase(it) : std::next(it);
      }
    } else {
      for (auto it = windows_.begin(); it != windows_.end();) {
        it = fire_and_clean(it->first.first, it->first.second, it->second) ? windows_.erase(it)
                                                                           : std::next(it);
      }
    }
  }

  Ts watermark() const { return wm_; }

 private:
  using Key = std::pair<int64_t, Window>;
  struct State {
    int64_t count = 0;
    int64_t sum = 0;
    uint64_t id_hash = 0;
    bool timer = false;  // the trigger's timer at max_ts() is pending
  };
  struct Ctx {
    const Rec* rec;
    int source;
    int round;
    bool watermark_known;
  };

  static void Add(State& st, const Rec& r) {
    st.count += 1;
    st.sum += r.value;
    st.id_hash += IdHash(r.id);
  }
  void Fire(int64_t key, const Window& w, const State& st, bool by_element, const Ctx& ctx,
            Result* out) {
    Firing f;
    f.key = key;
    f.window = w;
    f.count = st.count;
    f.sum = st.sum;
    f.id_hash = st.id_hash;
    f.by_element = by_element;
    f.watermark = wm_;
    f.watermark_known = ctx.watermark_known;
    f.round = ctx.round;
    f.source = ctx.source;
    out->firings.push_back(f);
  }

  // Whether only one valve output in (phase_lo, phase_hi] can be the first
  // one >= t.
  static bool UniqueCandidate(const std::set<Ts>& candidates, Ts t, Ts phase_lo, Ts phase_hi) {
    const Ts from = std::max(t, phase_lo == kMax ? kMax : phase_lo + 1);
    int n = 0;
    for (auto it = candidates.lower_bound(from); it != candidates.end() && *it <= phase_hi; ++it)
      ++n;
    return n == 1;
  }

  // Flink's MergingWindowSet + WindowOperator for sessions, restated for the
  // invariant that in-flight windows never intersect.  Returns whether the
  // element was accepted.
  bool SessionElement(const Rec& rec, const Ctx& ctx, Result* out) {
    const Window n = AssignWindows(spec_, rec.ts).front();
    auto& list = sessions_[rec.key];
    std::vector<size_t> group;
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].first.Intersects(n)) group.push_back(i);
    Window actual = n;
    size_t index = 0;  // of `actual` in `list`
    if (group.empty()) {
      if (CleanupTime(spec_, n) <= wm_) {  // late: retired at once
        if (list.empty()) sessions_.erase(rec.key);
        return false;
      }
      list.push_back({n, State{}});
      index = list.size() - 1;
    } else {
      Window cover = n;
      for (size_t i : group) {
        cover.start = std::min(cover.start, list[i].first.start);
        cover.end = std::max(cover.end, list[i].first.end);
      }
      if (group.size() == 1 && list[group[0]].first == cover) {
        index = group[0];  // inside an existing session: nothing merges
      } else {
        if (CleanupTime(spec_, cover) <= wm_)
          throw std::logic_error("model: merging into a late session");
        State merged;
        for (size_t i : group) {
          merged.count += list[i].second.count;
          merged.sum += list[i].second.sum;
          merged.id_hash += list[i].second.id_hash;
        }
        // EventTimeTrigger.onMerge registers max_ts only if it is ahead;
        // the merged windows' timers are deleted.
        merged.timer = cover.max_ts() > wm_;
        for (auto it = group.rbegin(); it != group.rend(); ++it)
          list.erase(list.begin() + static_cast<long>(*it));
        list.push_back({cover, merged});
        index = list.size() - 1;
      }
      actual = cover;
    }
    State& st = list[index].second;
    Add(st, rec);
    if (actual.max_ts() <= wm_) {
      Fire(rec.key, actual, st, true, ctx, out);
    } else {
      st.timer = true;
    }
    return true;
  }

  WindowSpec spec_;
  Ts wm_ = kMin;
  std::map<Key, State> windows_;
  std::map<int64_t, std::vector<std::pair<Window, State>>> sessions_;
  std::map<std::pair<int64_t, int>, int> unsafe_owner_;
};

// --------------------------------------------------------------------------
// The driver: one canonical interleaving of the sources' elements.

enum class Interleaving {
  kSourceBySource,  // each round: source 0's elements, then source 1's, ...
  kReverse,         // each round: source S-1 first
  kRecordsFirst,    // each round: every record (in source order), then every control
};

inline Result Run(const WindowSpec& spec, const Script& script, Interleaving order) {
  const std::vector<RoundEnd> ends = ExpectedRoundEnds(script);
  Result out;
  WindowModel win(spec);
  Valve valve(script.sources);
  std::set<Ts> candidates(script.watermarks.begin(), script.watermarks.end());
  candidates.insert(kMax);
  Ts phase_lo = kMin, phase_hi = kMin;
  Ts e = 0;  // the watermark the valve emitted
  auto advance = [&] { win.Advance(e, candidates, phase_lo, phase_hi, &out); };
  auto control = [&](int c, Mode m, Ts w) {
    if (EmitsWatermark(m)) {
      if (valve.state(c).idle && valve.Active(c, &e)) advance();
      if (valve.Watermark(c, w, &e)) advance();
    } else if (m == Mode::kGoIdle) {
      if (valve.Idle(c, &e)) advance();
    }
  };
  std::vector<ChannelState> before(static_cast<size_t>(script.sources));
  for (int r = 0; r < script.num_rounds(); ++r) {
    const Ts lo = r == 0 ? kMin : ends[r - 1].output;
    const Ts round_output = ends[r].output;
    phase_lo = lo;
    phase_hi = round_output;
    for (int c = 0; c < script.sources; ++c) before[c] = valve.state(c);
    auto records = [&](int c) {
      const SourceRound& sr = script.rounds[r][c];
      const Ts hi =
          sr.mode == Mode::kResume ? round_output : std::min(before[c].watermark, round_output);
      for (const Rec& rec : sr.records) win.Element(rec, c, r, lo, hi, round_output, &out);
    };
    std::vector<int> seq;
    for (int c = 0; c < script.sources; ++c) seq.push_back(c);
    if (order == Interleaving::kReverse) std::reverse(seq.begin(), seq.end());
    if (order == Interleaving::kRecordsFirst) {
      for (int c : seq) records(c);
      for (int c : seq) control(c, script.rounds[r][c].mode, script.watermarks[r]);
    } else {
      for (int c : seq) {
        records(c);
        control(c, script.rounds[r][c].mode, script.watermarks[r]);
      }
    }
    if (valve.output() != round_output)
      throw std::logic_error("model: valve output " + TsStr(valve.output()) + " after round " +
                             std::to_string(r) + ", expected " + TsStr(round_output));
    for (int c = 0; c < script.sources; ++c)
      if (!(valve.state(c) == ends[r].channels[c]))
        throw std::logic_error("model: channel state after round " + std::to_string(r));
  }
  // End of input: every source emits W(MAX) (becoming active first).
  phase_lo = script.num_rounds() == 0 ? kMin : ends.back().output;
  phase_hi = kMax;
  for (int c = 0; c < script.sources; ++c) control(c, Mode::kActive, kMax);
  if (valve.output() != kMax) throw std::logic_error("model: valve did not reach MAX");

  // Intermediate sums of a window's element firings within one round are
  // known only when they all come from one source; the last is always known.
  // Likewise which record caused which of them: their watermarks are known
  // only when every record of the group had a fixed watermark.
  struct Group {
    std::set<int> sources;
    int64_t max_count = 0;
    bool watermarks_known = true;
  };
  std::map<std::tuple<int64_t, Window, int>, Group> groups;
  for (const Firing& f : out.firings) {
    if (!f.by_element) continue;
    Group& g = groups[{f.key, f.window, f.round}];
    g.sources.insert(f.source);
    g.max_count = std::max(g.max_count, f.count);
    g.watermarks_known = g.watermarks_known && f.watermark_known;
  }
  for (Firing& f : out.firings) {
    if (!f.by_element) continue;
    const Group& g = groups[{f.key, f.window, f.round}];
    f.sum_known = g.sources.size() == 1 || f.count == g.max_count;
    f.watermark_known = g.watermarks_known;
  }
  return out;
}

}  // namespace tidemark::model

#endif  // TM_TESTS_REFERENCE_MODEL_H_
