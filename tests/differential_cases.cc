// tests/differential_cases.cc: the generator, the runner and the comparison
// of the randomized differential tests (differential_cases.h), compiled once
// for the three programs that run them.  (Longer than 600 lines: they belong
// together; every case replays from its seed.)
#include "differential_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace tidemark {
inline namespace differential {

namespace {  // helpers of this file

Fire MakeFire(int64_t key, const TimeWindow& w, int64_t count, int64_t sum, uint64_t h,
              WindowContext& ctx) {
  Fire f;
  f.key = key;
  f.start = w.start;
  f.end = w.end;
  f.count = count;
  f.sum = sum;
  f.id_hash = h;
  f.by_element = ctx.fired_by_element();
  f.watermark = ctx.current_watermark();
  f.subtask = ctx.subtask_index();
  return f;
}

}  // namespace

const char* Name(Function f) {
  switch (f) {
    case Function::kAggregate:
      return "aggregate";
    case Function::kReduce:
      return "reduce";
    case Function::kProcess:
      return "process";
  }
  return "?";
}

namespace {  // helpers of this file

int64_t Uniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}
bool Chance(std::mt19937_64& rng, double p) { return std::bernoulli_distribution(p)(rng); }
int64_t LogUniform(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  const double x = std::uniform_real_distribution<double>(
      std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi) + 1))(rng);
  return std::clamp<int64_t>(static_cast<int64_t>(std::exp(x)), lo, hi);
}

}  // namespace

// Makes the case of `seed`; `kind` forces the window kind.
Case Generate(uint64_t seed, m::WindowKind kind) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 17);
  Case c;
  c.seed = seed;
  c.sources = static_cast<int>(Uniform(rng, 1, 8));
  c.window_parallelism = static_cast<int>(Uniform(rng, 1, 8));
  c.keys = LogUniform(rng, 1, 10000);
  c.spec.kind = kind;
  int64_t scale = 0;
  switch (kind) {
    case m::WindowKind::kTumbling:
      c.spec.size = LogUniform(rng, 2, 5000);
      c.spec.slide = c.spec.size;
      c.spec.offset = Chance(rng, 0.5) ? 0 : Uniform(rng, -(c.spec.size - 1), c.spec.size - 1);
      scale = c.spec.size;
      break;
    case m::WindowKind::kSliding:
      c.spec.slide = LogUniform(rng, 1, 2000);
      c.spec.size =
          Chance(rng, 0.7) ? c.spec.slide * Uniform(rng, 1, 5) : Uniform(rng, 1, c.spec.slide * 4);
      c.spec.offset = Chance(rng, 0.5) ? 0 : Uniform(rng, -(c.spec.slide - 1), c.spec.slide - 1);
      scale = c.spec.size;
      break;
    case m::WindowKind::kSession:
      c.spec.gap = LogUniform(rng, 1, 2000);
      scale = c.spec.gap * 2;
      break;
  }
  c.spec.lateness = Chance(rng, 0.4) ? 0 : LogUniform(rng, 1, scale * 2);
  c.spec.side_output = Chance(rng, 0.5);
  c.function = static_cast<Function>(Uniform(rng, 0, 2));
  static const size_t kBatches[] = {1, 2, 7, 64, 1024};
  c.batch_size = kBatches[Uniform(rng, 0, 4)];
  static const size_t kCapacities[] = {1, 2, 4, 16};
  c.channel_capacity = kCapacities[Uniform(rng, 0, 3)];
  static const int64_t kTimeouts[] = {0, 1, 5, 100};
  c.buffer_timeout_ms = kTimeouts[Uniform(rng, 0, 3)];
  c.worker_threads = static_cast<int>(Uniform(rng, 1, 3));
  c.chaining = Chance(rng, 0.8);

  // Rounds, watermarks and modes.
  m::Script& s = c.script;
  s.sources = c.sources;
  const int rounds = static_cast<int>(Uniform(rng, 1, 12));
  const int64_t base = Chance(rng, 0.3) ? 0 : Uniform(rng, -1'000'000'000'000, 1'000'000'000'000);
  const int64_t step = std::max<int64_t>(1, Uniform(rng, scale / 4, scale * 2));
  const int64_t wm_delay = Chance(rng, 0.4) ? 0 : Uniform(rng, 0, scale);
  const double p_silent = Chance(rng, 0.5) ? 0.0 : 0.2;
  const double p_idle = Chance(rng, 0.5) ? 0.0 : 0.2;
  std::vector<bool> idle(static_cast<size_t>(c.sources), false);
  Timestamp last_w = m::kMin;
  for (int r = 0; r < rounds; ++r) {
    const int64_t frontier = base + (r + 1) * step;
    Timestamp w = frontier - wm_delay - Uniform(rng, 0, step / 2);
    if (w <= last_w) w = last_w + 1;
    s.watermarks.push_back(w);
    last_w = w;
    std::vector<m::SourceRound> round(static_cast<size_t>(c.sources));
    bool any_active = false;
    for (int src = 0; src < c.sources; ++src) {
      m::Mode mode;
      if (idle[src]) {
        mode = Chance(rng, 0.5) ? m::Mode::kResume : m::Mode::kStayIdle;
      } else if (Chance(rng, p_idle)) {
        mode = m::Mode::kGoIdle;
      } else if (Chance(rng, p_silent)) {
        mode = m::Mode::kSilent;
      } else {
        mode = m::Mode::kActive;
      }
      round[src].mode = mode;
      any_active = any_active || mode == m::Mode::kActive || mode == m::Mode::kSilent ||
                   mode == m::Mode::kResume;
    }
    if (!any_active) round[0].mode = idle[0] ? m::Mode::kResume : m::Mode::kActive;
    for (int src = 0; src < c.sources; ++src) {
      if (round[src].mode == m::Mode::kGoIdle) idle[src] = true;
      if (round[src].mode == m::Mode::kResume) idle[src] = false;
    }
    s.rounds.push_back(std::move(round));
  }
  const std::vector<m::RoundEnd> ends = m::ExpectedRoundEnds(s);

  // Records.
  const int64_t total = Chance(rng, 0.05) ? LogUniform(rng, 200, 2000) : LogUniform(rng, 1, 300);
  const int64_t disorder = Chance(rng, 0.3) ? 0 : Uniform(rng, 0, scale * 2);
  const double p_very_late = Chance(rng, 0.5) ? 0.03 : 0.0;
  const bool hot_keys = Chance(rng, 0.3);
  int64_t next_id = 1;
  std::map<std::pair<int64_t, int>, int> session_owner;  // unsafe (key, round) -> source
  for (int64_t i = 0; i < total; ++i) {
    const int r = static_cast<int>(Uniform(rng, 0, rounds - 1));
    std::vector<int> senders;
    for (int src = 0; src < c.sources; ++src)
      if (m::SendsRecords(s.rounds[r][src].mode)) senders.push_back(src);
    if (senders.empty()) continue;
    const Timestamp lo = r == 0 ? m::kMin : ends[r - 1].output;
    const Timestamp round_out = ends[r].output;
    auto range_hi = [&](int src) {
      if (s.rounds[r][src].mode == m::Mode::kResume) return round_out;
      const Timestamp own = r == 0 ? m::kMin : ends[r - 1].channels[src].watermark;
      return std::min(own, round_out);
    };
    m::Rec rec;
    rec.id = next_id;
    rec.key = hot_keys ? std::min<int64_t>(LogUniform(rng, 1, c.keys) - 1, c.keys - 1)
                       : Uniform(rng, 0, c.keys - 1);
    rec.value = Uniform(rng, 1, 100);
    bool placed = false;
    for (int attempt = 0; attempt < 8 && !placed; ++attempt) {
      const int64_t frontier = base + r * step;
      rec.ts = frontier + Uniform(rng, 0, step) - Uniform(rng, 0, disorder);
      if (Chance(rng, p_very_late)) rec.ts -= Uniform(rng, scale, scale * 10);
      int src = senders[Uniform(rng, 0, static_cast<int64_t>(senders.size()) - 1)];
      if (kind == m::WindowKind::kSession) {
        if (!m::SafeSessionRecord(rec.ts, round_out)) {
          auto it = session_owner.find({rec.key, r});
          if (it != session_owner.end()) {
            src = it->second;
          } else {
            std::vector<int> fixed;
            for (int x : senders)
              if (range_hi(x) == lo) fixed.push_back(x);
            if (fixed.empty()) continue;
            src = fixed[Uniform(rng, 0, static_cast<int64_t>(fixed.size()) - 1)];
            session_owner[{rec.key, r}] = src;
          }
        }
      } else if (!m::StableNonMerging(c.spec, rec.ts, lo, range_hi(src))) {
        continue;
      }
      s.rounds[r][src].records.push_back(rec);
      placed = true;
    }
    if (placed) ++next_id;
  }
  return c;
}

namespace {  // helpers of this file

// The scripted source.

class ScriptedSource final : public Source<Ev> {
 public:
  ScriptedSource(std::shared_ptr<const m::Script> script, std::shared_ptr<RoundBarrier> barrier)
      : script_(std::move(script)), barrier_(std::move(barrier)) {}

  void Open(const SourceContext& ctx) override {
    me_ = ctx.subtask_index;
    clock_ = ctx.clock;
  }

  PollStatus Poll(SourceOutput<Ev>& out, size_t budget) override {
    const int rounds = script_->num_rounds();
    for (;;) {
      if (!started_) {
        // Nothing of round r (nor the end) before everyone consumed r-1.
        if (!barrier_->Passed(round_ - 1)) return Wait();
        if (round_ == rounds) return PollStatus::kEndOfInput;
        started_ = true;
        index_ = 0;
      }
      const m::SourceRound& sr = script_->rounds[round_][me_];
      while (index_ < sr.records.size()) {
        if (budget == 0 || out.Backpressured()) return PollStatus::kMoreAvailable;
        --budget;
        const m::Rec& r = sr.records[index_++];
        Ev e;
        e.id = r.id;
        e.key = r.key;
        e.value = r.value;
        e.id_hash = m::IdHash(r.id);
        out.CollectWithTimestamp(std::move(e), r.ts);
      }
      if (m::EmitsWatermark(sr.mode)) {
        out.EmitWatermark(script_->watermarks[round_]);
      } else if (sr.mode == m::Mode::kGoIdle) {
        out.MarkIdle();
      }
      ++round_;
      started_ = false;
    }
  }
  Timestamp RetryAt() const override { return retry_at_; }

 private:
  PollStatus Wait() {
    // Poll again in a millisecond: the barrier is opened by other threads.
    retry_at_ = clock_->NowMillis() + 1;
    return PollStatus::kNothingAvailable;
  }

  std::shared_ptr<const m::Script> script_;
  std::shared_ptr<RoundBarrier> barrier_;
  const Clock* clock_ = nullptr;
  int me_ = 0;
  int round_ = 0;
  bool started_ = false;
  size_t index_ = 0;
  Timestamp retry_at_ = kMaxTimestamp;
};

using tidemark::testing::WaitWithWatchdog;

template <typename Assigner>
Actual RunOnRuntime(const Case& c, Assigner assigner, const RunHooks& hooks) {
  StreamExecutionEnvironment env;
  env.set_parallelism(c.window_parallelism);
  env.set_batch_size(c.batch_size);
  env.set_channel_capacity(c.channel_capacity);
  env.set_buffer_timeout(Duration(c.buffer_timeout_ms));
  env.set_worker_threads(c.worker_threads);
  env.set_auto_watermark_interval(Duration(0));
  env.set_state_backend(c.backend);
  if (!c.chaining) env.disable_operator_chaining();
  auto barrier = std::make_shared<RoundBarrier>(c.window_parallelism, c.sources,
                                                m::ExpectedRoundEnds(c.script));
  env.set_watermark_listener(hooks.listener ? hooks.listener(barrier) : barrier);
  if (hooks.placement) env.set_placement(hooks.placement);
  auto script = std::make_shared<const m::Script>(c.script);
  auto events = env.add_source<Ev>(
                       [script, barrier]() -> std::unique_ptr<Source<Ev>> {
                         return std::make_unique<ScriptedSource>(script, barrier);
                       },
                       "Scripted")
                    .set_parallelism(c.sources);
  auto windowed = events.key_by([](const Ev& e) { return e.key; })
                      .window(assigner)
                      .local_aggregation_if(c.local_aggregation > 0, c.local_aggregation);
  if (c.spec.lateness > 0) windowed = windowed.allowed_lateness(Duration(c.spec.lateness));
  OutputTag<Ev> late_tag("late");
  if (c.spec.side_output) windowed = windowed.side_output_late_data(late_tag);

  std::optional<DataStream<Fire>> fired;
  switch (c.function) {
    case Function::kAggregate:
      fired = windowed.aggregate(SumAgg{}, [](const int64_t& key, const TimeWindow& w, const Acc& a,
                                              WindowContext& ctx, Collector<Fire>& out) {
        out.collect(MakeFire(key, w, a.count, a.sum, a.id_hash, ctx));
      });
      break;
    case Function::kReduce:
      fired = windowed.reduce(
          [](const Ev& a, const Ev& b) {
            Ev r = a;
            r.count += b.count;
            r.value += b.value;
            r.id_hash += b.id_hash;
            return r;
          },
          [](const int64_t& key, const TimeWindow& w, const Ev& e, WindowContext& ctx,
             Collector<Fire>& out) {
            out.collect(MakeFire(key, w, e.count, e.value, e.id_hash, ctx));
          });
      break;
    case Function::kProcess:
      fired = windowed.process([](const int64_t& key, const TimeWindow& w,
                                  const std::vector<Ev>& elements, WindowContext& ctx,
                                  Collector<Fire>& out) {
        int64_t sum = 0;
        uint64_t h = 0;
        for (const Ev& e : elements) {
          sum += e.value;
          h += m::IdHash(e.id);
        }
        out.collect(MakeFire(key, w, static_cast<int64_t>(elements.size()), sum, h, ctx));
      });
      break;
  }
  auto results = fired->collect();
  std::shared_ptr<CollectedResults<Ev>> late;
  if (c.spec.side_output) late = fired->get_side_output(late_tag).collect();

  Actual a;
  JobClient client = env.execute_async("differential " + std::to_string(c.seed));
  JobResult r = WaitWithWatchdog(client, &a.hung);
  a.status = r.status;
  a.bad_listener_event = barrier->bad_event();
  a.dropped = r.CounterTotal(kNumLateRecordsDropped);
  a.combined = r.CounterTotal(kLocalAggregationRecordsCombined);
  for (const auto& item : results->items()) {
    a.firings.push_back(item.value);
    a.firing_timestamps.push_back(item.timestamp);
  }
  if (late)
    for (const auto& item : late->items()) a.late.push_back({item.value.id, item.timestamp});
  if (hooks.after) hooks.after(a);
  return a;
}

}  // namespace

Actual Run(const Case& c, const RunHooks& hooks) {
  switch (c.spec.kind) {
    case m::WindowKind::kTumbling:
      return RunOnRuntime(
          c, TumblingEventTimeWindows::of(Duration(c.spec.size), Duration(c.spec.offset)), hooks);
    case m::WindowKind::kSliding:
      return RunOnRuntime(c,
                          SlidingEventTimeWindows::of(Duration(c.spec.size), Duration(c.spec.slide),
                                                      Duration(c.spec.offset)),
                          hooks);
    case m::WindowKind::kSession:
      return RunOnRuntime(c, EventTimeSessionWindows::with_gap(Duration(c.spec.gap)), hooks);
  }
  return {};
}

// ---------------------------------------------------------------------------
// Comparing.

using FireKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // key, start, end, count

namespace {  // helpers of this file

// The determined parts of the model's result, for comparing interleavings.
std::vector<std::string> Normalize(const m::Result& r) {
  std::vector<std::string> out;
  for (const m::Firing& f : r.firings) {
    std::ostringstream o;
    o << "F " << f.key << " " << f.window.start << " " << f.window.end << " " << f.count << " "
      << f.by_element;
    if (f.watermark_known) o << " wm " << f.watermark;
    if (f.sum_known) o << " sum " << f.sum << " " << f.id_hash;
    out.push_back(o.str());
  }
  for (const m::Rec& x : r.late) out.push_back("L " + std::to_string(x.id));
  for (const m::Rec& x : r.dropped) out.push_back("D " + std::to_string(x.id));
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

// Differences between the runtime and the model (empty: agree).
std::vector<std::string> Compare(const Case& c, const m::Result& want, const Actual& got) {
  std::vector<std::string> errors;
  auto err = [&](const std::string& s) {
    if (errors.size() < 40) errors.push_back(s);
  };
  if (got.hung) err("the job did not finish within the watchdog limit (deadlock?)");
  if (!got.status.ok()) err("job failed: " + std::string(got.status.ToString()));
  if (got.bad_listener_event) err("listener reported an out-of-range subtask or channel");
  if (!errors.empty()) return errors;

  // A window's result carries its max timestamp (WindowOperator's
  // emitWindowContents: setAbsoluteTimestamp(window.maxTimestamp())).
  if (got.firing_timestamps.size() == got.firings.size()) {
    for (size_t i = 0; i < got.firings.size(); ++i) {
      if (got.firing_timestamps[i] != got.firings[i].end - 1)
        err("result timestamp " + m::TsStr(got.firing_timestamps[i]) +
            ", not the window's end - 1: " + got.firings[i].ToString());
    }
  }
  std::map<FireKey, const m::Firing*> expected;
  for (const m::Firing& f : want.firings) {
    FireKey k{f.key, f.window.start, f.window.end, f.count};
    if (!expected.emplace(k, &f).second) err("model: duplicate firing " + f.ToString());
  }
  std::map<FireKey, const Fire*> actual;
  for (const Fire& f : got.firings) {
    FireKey k{f.key, f.start, f.end, f.count};
    if (!actual.emplace(k, &f).second) err("duplicate firing: " + f.ToString());
  }
  for (const auto& [k, f] : expected) {
    auto it = actual.find(k);
    if (it == actual.end()) {
      err("missing firing: " + f->ToString());
      continue;
    }
    const Fire& a = *it->second;
    if (a.by_element != f->by_element)
      err("fired by " + std::string(a.by_element ? "element" : "timer") + ", expected " +
          f->ToString());
    if (f->watermark_known && a.watermark != f->watermark)
      err("watermark " + m::TsStr(a.watermark) + ", expected " + f->ToString());
    if (f->sum_known && (a.sum != f->sum || a.id_hash != f->id_hash))
      err("contents differ: got " + a.ToString() + ", expected " + f->ToString());
  }
  for (const auto& [k, a] : actual)
    if (!expected.count(k)) err("unexpected firing: " + a->ToString());

  // Per-key order and placement.
  std::map<int64_t, int> subtask_of;
  std::map<std::tuple<int64_t, int64_t, int64_t>, int64_t> last_count;
  std::map<int64_t, int64_t> last_timer_end;
  for (const Fire& f : got.firings) {
    auto [st, fresh] = subtask_of.emplace(f.key, f.subtask);
    if (!fresh && st->second != f.subtask)
      err("key " + std::to_string(f.key) + " fired on subtasks " + std::to_string(st->second) +
          " and " + std::to_string(f.subtask));
    auto [lc, fresh2] = last_count.emplace(std::make_tuple(f.key, f.start, f.end), f.count);
    if (!fresh2) {
      if (f.count <= lc->second) err("window firings out of order: " + f.ToString());
      lc->second = f.count;
    }
    if (!f.by_element) {
      auto [lt, fresh3] = last_timer_end.emplace(f.key, f.end);
      if (!fresh3) {
        if (f.end <= lt->second) err("timer firings of a key out of order: " + f.ToString());
        lt->second = f.end;
      }
    }
  }

  // Late side output and drops.
  std::vector<LateItem> want_late, got_late = got.late;
  for (const m::Rec& x : want.late) want_late.push_back({x.id, x.ts});
  std::sort(want_late.begin(), want_late.end());
  std::sort(got_late.begin(), got_late.end());
  if (want_late != got_late) {
    std::ostringstream o;
    o << "late side output differs: expected " << want_late.size() << " records, got "
      << got_late.size() << "; expected ids:";
    for (size_t i = 0; i < want_late.size() && i < 20; ++i) o << " " << want_late[i].id;
    o << "; got ids:";
    for (size_t i = 0; i < got_late.size() && i < 20; ++i) o << " " << got_late[i].id;
    err(o.str());
  }
  if (got.dropped != static_cast<int64_t>(want.dropped.size()))
    err("numLateRecordsDropped " + std::to_string(got.dropped) + ", expected " +
        std::to_string(want.dropped.size()));

  // Conservation (tumbling): each record exactly once in the last firing of
  // its window, the side output, or the dropped counter.  Model-free: it uses
  // only what the runtime produced.
  if (c.spec.kind == m::WindowKind::kTumbling) {
    std::map<std::tuple<int64_t, int64_t, int64_t>, const Fire*> last;
    for (const Fire& f : got.firings) {
      auto& p = last[{f.key, f.start, f.end}];
      if (p == nullptr || f.count > p->count) p = &f;
    }
    int64_t counted = 0;
    uint64_t hash = 0;
    for (const auto& [k, f] : last) {
      counted += f->count;
      hash += f->id_hash;
    }
    for (const LateItem& x : got.late) hash += m::IdHash(x.id);
    for (const m::Rec& x : want.dropped) hash += m::IdHash(x.id);
    uint64_t all = 0;
    for (const auto& round : c.script.rounds)
      for (const auto& sr : round)
        for (const m::Rec& x : sr.records) all += m::IdHash(x.id);
    const int64_t n = static_cast<int64_t>(c.script.num_records());
    if (counted + static_cast<int64_t>(got.late.size()) + got.dropped != n)
      err("conservation: " + std::to_string(counted) + " in final firings + " +
          std::to_string(got.late.size()) + " side output + " + std::to_string(got.dropped) +
          " dropped != " + std::to_string(n) + " records");
    else if (hash != all)
      err("conservation: the records counted are not the records sent (fingerprint)");
  }
  return errors;
}

// The model's result, after checking that the interleavings it can replay
// agree on everything it calls determined.
m::Result ModelResult(const Case& c, std::string* problem) {
  m::Result a = m::Run(c.spec, c.script, m::Interleaving::kSourceBySource);
  const auto na = Normalize(a);
  for (m::Interleaving other : {m::Interleaving::kReverse, m::Interleaving::kRecordsFirst}) {
    if (Normalize(m::Run(c.spec, c.script, other)) != na) {
      *problem = "the model's interleavings disagree: the case is not timing-independent";
      return a;
    }
  }
  return a;
}

Outcome RunCase(const Case& c, const RunHooks& hooks) {
  Outcome o;
  std::string problem;
  m::Result want;
  try {
    want = ModelResult(c, &problem);
  } catch (const std::exception& e) {
    problem = std::string("model rejected the case: ") + e.what();
  }
  if (!problem.empty()) {
    o.errors.push_back(problem);
    return o;
  }
  for (const m::Firing& f : want.firings) ++(f.by_element ? o.element_firings : o.timer_firings);
  o.late = want.late.size();
  o.dropped = want.dropped.size();
  const Actual got = Run(c, hooks);
  o.combined = got.combined;
  o.errors = Compare(c, want, got);
  return o;
}

// Removes records while the case still fails (at most `budget` runs).
Case Shrink(Case c, int budget) {
  auto fails = [&](const Case& x) { return !RunCase(x).errors.empty(); };
  struct Pos {
    int r, s;
    size_t i;
  };
  for (size_t chunk = std::max<size_t>(1, c.script.num_records() / 2); chunk >= 1 && budget > 0;
       chunk /= 2) {
    bool progress = true;
    while (progress && budget > 0) {
      progress = false;
      std::vector<Pos> all;
      for (int r = 0; r < c.script.num_rounds(); ++r)
        for (int s = 0; s < c.sources; ++s)
          for (size_t i = 0; i < c.script.rounds[r][s].records.size(); ++i)
            all.push_back({r, s, i});
      for (size_t from = 0; from < all.size() && budget > 0; from += chunk) {
        Case t = c;
        // Remove all[from, from+chunk), back to front.
        for (size_t k = std::min(all.size(), from + chunk); k-- > from;) {
          auto& v = t.script.rounds[all[k].r][all[k].s].records;
          v.erase(v.begin() + static_cast<long>(all[k].i));
        }
        --budget;
        if (fails(t)) {
          c = std::move(t);
          progress = true;
          break;
        }
      }
    }
    if (chunk == 1) break;
  }
  return c;
}

std::optional<uint64_t> EnvSeed(const char* name) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return std::nullopt;
  return std::strtoull(s, nullptr, 10);
}

// `adjust` changes each generated case (e.g. turns local aggregation on).
// Returns the total of the localAggregationRecordsCombined counters.
int64_t RunCases(m::WindowKind kind, int normal_count, const std::function<void(Case&)>& adjust) {
  std::vector<uint64_t> seeds;
  if (auto only = EnvSeed("TIDEMARK_DIFF_SEED")) {
    seeds.push_back(*only);
  } else {
    const uint64_t first = EnvSeed("TIDEMARK_DIFF_FIRST_SEED").value_or(1);
    const int n = testing::StressIterations(normal_count);
    for (int i = 0; i < n; ++i) seeds.push_back(first + static_cast<uint64_t>(i));
  }
  const auto t0 = std::chrono::steady_clock::now();
  int failures = 0;
  size_t records = 0;
  Outcome total;
  for (uint64_t seed : seeds) {
    Case c = Generate(seed, kind);
    if (adjust) adjust(c);
    records += c.script.num_records();
    Outcome o = RunCase(c);
    total.combined += o.combined;
    total.timer_firings += o.timer_firings;
    total.element_firings += o.element_firings;
    total.late += o.late;
    total.dropped += o.dropped;
    if (o.errors.empty()) continue;
    ++failures;
    std::ostringstream msg;
    msg << "differential case FAILED: " << m::Name(kind) << " " << c.Describe() << "\n";
    for (const auto& e : o.errors) msg << "  " << e << "\n";
    if (o.errors.front().rfind("model", 0) != 0 && o.errors.front().rfind("the model", 0) != 0) {
      const Case small = Shrink(c, 120);
      const Outcome so = RunCase(small);
      msg << "shrunk reproduction (" << small.script.num_records() << " of "
          << c.script.num_records() << " records"
          << (so.errors.empty() ? "; passed on re-run: timing-dependent" : "")
          << "): " << small.Describe() << "\n"
          << small.DescribeScript();
      for (const auto& e : so.errors) msg << "  " << e << "\n";
    } else {
      msg << c.DescribeScript();
    }
    msg << "rerun with TIDEMARK_DIFF_SEED=" << seed << " --gtest_filter=*"
        << ::testing::UnitTest::GetInstance()->current_test_info()->name() << "\n";
    ADD_FAILURE() << msg.str();
    if (failures >= 3) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[differential] " << m::Name(kind) << ": " << seeds.size() << " cases (seeds "
            << seeds.front() << ".." << seeds.back() << "), " << records << " records, "
            << total.timer_firings << " timer firings, " << total.element_firings
            << " late firings, " << total.late << " side-output, " << total.dropped << " dropped, "
            << failures << " failed, " << secs << " s";
  if (total.combined > 0) std::cout << ", " << total.combined << " combined locally";
  std::cout << std::endl;
  return total.combined;
}
}  // namespace differential
}  // namespace tidemark
