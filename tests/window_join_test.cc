// Window join and co-group (api/joined_streams.h, Flink's JoinedStreams /
// CoGroupedStreams): results against nested loops over the inputs by window,
// written here independently, at parallelism 1 and 3, for tumbling, sliding
// and session windows; one-sided windows; late records dropped and counted
// (or joined within the allowed lateness); a checkpoint and restore.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "test_util.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

struct L {
  int key;
  int64_t ts;
  int id;
};
struct R {
  int key;
  int64_t ts;
  int id;
};

// Opens a source at a point of its script (see ScriptedSource).
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  int reached = 0;
  bool open = false;
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
  }
  bool IsOpen() {
    std::lock_guard<std::mutex> lock(mu);
    return open;
  }
  void Reached() {
    {
      std::lock_guard<std::mutex> lock(mu);
      ++reached;
    }
    cv.notify_all();
  }
  void WaitReached(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return reached >= n; });
  }
};

// One step of a script: a record at its timestamp, or a watermark.
template <typename T>
struct Step {
  std::optional<T> value;
  Timestamp ts;
};

// Emits its script's steps i with i % parallelism == subtask (records with
// their timestamps, watermarks as the source's own); stops before step
// `gate_at` until the gate opens.  Replayable: its position is the step.
template <typename T>
class ScriptedSource final : public Source<T> {
 public:
  ScriptedSource(std::shared_ptr<const std::vector<Step<T>>> steps, size_t gate_at,
                 std::shared_ptr<Gate> gate)
      : steps_(std::move(steps)), gate_at_(gate_at), gate_(std::move(gate)) {}
  void Open(const SourceContext& ctx) override {
    subtask_ = ctx.subtask_index;
    parallelism_ = ctx.parallelism;
  }
  PollStatus Poll(SourceOutput<T>& out, size_t budget) override {
    for (size_t k = 0; k < budget && next_ < steps_->size() && !out.Backpressured(); ++k) {
      if (next_ == gate_at_ && gate_ != nullptr && !gate_->IsOpen()) {
        if (!reported_) gate_->Reached();
        reported_ = true;
        retry_at_ = SystemClock().NowMillis() + 1;
        return PollStatus::kNothingAvailable;
      }
      const size_t i = next_++;
      if (static_cast<int>(i % static_cast<size_t>(parallelism_)) != subtask_) continue;
      const Step<T>& s = (*steps_)[i];
      if (s.value) {
        out.CollectWithTimestamp(T(*s.value), s.ts);
      } else {
        out.EmitWatermark(s.ts);
      }
    }
    return next_ < steps_->size() ? PollStatus::kMoreAvailable : PollStatus::kEndOfInput;
  }
  Timestamp RetryAt() const override { return retry_at_; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override {
    w.PutI64(static_cast<int64_t>(next_));
  }
  void RestorePosition(internal::StateReader& r) override {
    next_ = static_cast<size_t>(r.GetI64());
  }

 private:
  std::shared_ptr<const std::vector<Step<T>>> steps_;
  size_t gate_at_;
  std::shared_ptr<Gate> gate_;
  int subtask_ = 0;
  int parallelism_ = 1;
  size_t next_ = 0;
  bool reported_ = false;
  Timestamp retry_at_ = kMaxTimestamp;
};

template <typename T>
DataStream<T> Scripted(StreamExecutionEnvironment& env, std::vector<Step<T>> steps, int p,
                       const std::string& name, size_t gate_at = SIZE_MAX,
                       std::shared_ptr<Gate> gate = nullptr) {
  auto shared = std::make_shared<const std::vector<Step<T>>>(std::move(steps));
  return env
      .add_source<T>(
          [shared, gate_at, gate]() -> std::unique_ptr<Source<T>> {
            return std::make_unique<ScriptedSource<T>>(shared, gate_at, gate);
          },
          name)
      .set_parallelism(p);
}

template <typename T>
std::vector<Step<T>> RecordsOf(const std::vector<T>& v) {
  std::vector<Step<T>> out;
  for (const T& x : v) out.push_back({x, x.ts});
  return out;
}

// --- the reference -------------------------------------------------------

struct Win {
  int64_t start, end;
  friend bool operator<(const Win& a, const Win& b) {
    return std::tie(a.start, a.end) < std::tie(b.start, b.end);
  }
};

std::vector<Win> TumblingOf(int64_t ts, int64_t size) {
  const int64_t s = ts - ((ts % size) + size) % size;
  return {{s, s + size}};
}
std::vector<Win> SlidingOf(int64_t ts, int64_t size, int64_t slide) {
  std::vector<Win> out;
  const int64_t last = ts - ((ts % slide) + slide) % slide;
  for (int64_t s = last; s > ts - size; s -= slide) out.push_back({s, s + size});
  return out;
}

// Per (key, window): the lefts and rights in input order.
using Grouped = std::map<std::pair<int, Win>, std::pair<std::vector<L>, std::vector<R>>>;

template <typename WindowsOf>
Grouped GroupByWindow(const std::vector<L>& ls, const std::vector<R>& rs, WindowsOf windows_of) {
  Grouped g;
  for (const L& l : ls)
    for (const Win& w : windows_of(l.ts)) g[{l.key, w}].first.push_back(l);
  for (const R& r : rs)
    for (const Win& w : windows_of(r.ts)) g[{r.key, w}].second.push_back(r);
  return g;
}

// Sessions: per key, the timestamps of both sides sorted, merged while the
// next one is at most the session's end (TimeWindow::intersects).
Grouped GroupBySession(const std::vector<L>& ls, const std::vector<R>& rs, int64_t gap) {
  std::map<int, std::vector<int64_t>> ts;
  for (const L& l : ls) ts[l.key].push_back(l.ts);
  for (const R& r : rs) ts[r.key].push_back(r.ts);
  std::map<int, std::vector<Win>> sessions;
  for (auto& [key, v] : ts) {
    std::sort(v.begin(), v.end());
    for (int64_t t : v) {
      auto& s = sessions[key];
      if (!s.empty() && t <= s.back().end) {
        s.back().end = std::max(s.back().end, t + gap);
      } else {
        s.push_back({t, t + gap});
      }
    }
  }
  auto find = [&](int key, int64_t t) {
    for (const Win& w : sessions[key])
      if (t >= w.start && t < w.end) return w;
    ADD_FAILURE() << "no session";
    return Win{};
  };
  Grouped g;
  for (const L& l : ls) g[{l.key, find(l.key, l.ts)}].first.push_back(l);
  for (const R& r : rs) g[{r.key, find(r.key, r.ts)}].second.push_back(r);
  return g;
}

std::string Pair(int key, const Win& w, const L& l, const R& r) {
  return std::to_string(key) + "|" + std::to_string(w.start) + "-" + std::to_string(w.end) + "|" +
         std::to_string(l.id) + "x" + std::to_string(r.id) + "@" + std::to_string(w.end - 1);
}

// Per (key, window), the pairs in Flink's order: lefts outer, rights inner.
std::map<std::string, std::vector<std::string>> ExpectedJoin(const Grouped& g) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [kw, sides] : g) {
    const auto& [key, w] = kw;
    for (const L& l : sides.first)
      for (const R& r : sides.second)
        out[std::to_string(key) + "|" + std::to_string(w.start)].push_back(Pair(key, w, l, r));
  }
  return out;
}

std::vector<std::string> Flatten(const std::map<std::string, std::vector<std::string>>& m) {
  std::vector<std::string> out;
  for (const auto& [k, v] : m) out.insert(out.end(), v.begin(), v.end());
  std::sort(out.begin(), out.end());
  return out;
}

// The job's output grouped like ExpectedJoin (keeping arrival order), with
// each record's timestamp.
std::map<std::string, std::vector<std::string>> GroupOutput(
    const std::vector<CollectedResults<std::string>::Item>& items) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& item : items) {
    const std::string& v = item.value;
    const size_t dash = v.find('-');
    out[v.substr(0, dash)].push_back(v + "@" + std::to_string(item.timestamp));
  }
  return out;
}

// Deterministic pseudo-random inputs: `n` records a side, keys 0..4,
// timestamps in [0, span).
std::pair<std::vector<L>, std::vector<R>> Inputs(int n, int64_t span, uint64_t seed) {
  uint64_t x = seed;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  std::vector<L> ls;
  std::vector<R> rs;
  for (int i = 0; i < n; ++i)
    ls.push_back({static_cast<int>(next() % 5), static_cast<int64_t>(next() % span), i});
  for (int i = 0; i < n; ++i)
    rs.push_back({static_cast<int>(next() % 5), static_cast<int64_t>(next() % span), 1000 + i});
  return {ls, rs};
}

auto KeyL = [](const L& l) { return l.key; };
auto KeyR = [](const R& r) { return r.key; };

// Runs a join of `ls` and `rs` over `assigner` at parallelism p (sources,
// taggers and window) and returns its output.
template <typename Assigner>
std::vector<CollectedResults<std::string>::Item> RunJoin(const std::vector<L>& ls,
                                                         const std::vector<R>& rs,
                                                         Assigner assigner, int p) {
  StreamExecutionEnvironment env;
  env.set_parallelism(p);
  auto left = Scripted(env, RecordsOf(ls), p, "left");
  auto right = Scripted(env, RecordsOf(rs), p, "right");
  auto out = left.join(right).where(KeyL).equal_to(KeyR).window(assigner).apply(
      [](const L& l, const R& r) {
        return std::to_string(l.key) + "|" + std::to_string(l.ts) + "x" + std::to_string(r.ts) +
               "|" + std::to_string(l.id) + "x" + std::to_string(r.id);
      });
  auto got = out.collect();
  JobResult r = env.execute("join");
  EXPECT_TRUE(r.ok()) << r.status;
  return got->items();
}

// The join's output with each record's timestamp (the window's max_timestamp), sorted.
std::vector<std::string> JoinPairs(const std::vector<CollectedResults<std::string>::Item>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.value + "@" + std::to_string(i.timestamp));
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> ExpectedPairs(const Grouped& g) {
  std::vector<std::string> out;
  for (const auto& [kw, sides] : g)
    for (const L& l : sides.first)
      for (const R& r : sides.second)
        out.push_back(std::to_string(l.key) + "|" + std::to_string(l.ts) + "x" +
                      std::to_string(r.ts) + "|" + std::to_string(l.id) + "x" +
                      std::to_string(r.id) + "@" + std::to_string(kw.second.end - 1));
  std::sort(out.begin(), out.end());
  return out;
}

class WindowJoinAtParallelism : public ::testing::TestWithParam<int> {};

TEST_P(WindowJoinAtParallelism, TumblingEqualsNestedLoopsByWindow) {
  auto [ls, rs] = Inputs(120, 30'000, 1);
  auto items = RunJoin(ls, rs, TumblingEventTimeWindows::of(Duration(4000)), GetParam());
  const auto expected =
      ExpectedPairs(GroupByWindow(ls, rs, [](int64_t t) { return TumblingOf(t, 4000); }));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(JoinPairs(items), expected);
}

TEST_P(WindowJoinAtParallelism, SlidingEqualsNestedLoopsByWindow) {
  auto [ls, rs] = Inputs(100, 30'000, 2);
  auto items =
      RunJoin(ls, rs, SlidingEventTimeWindows::of(Duration(6000), Duration(2000)), GetParam());
  const auto expected =
      ExpectedPairs(GroupByWindow(ls, rs, [](int64_t t) { return SlidingOf(t, 6000, 2000); }));
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(JoinPairs(items), expected);
}

TEST_P(WindowJoinAtParallelism, SessionEqualsNestedLoopsBySession) {
  auto [ls, rs] = Inputs(80, 60'000, 3);
  auto items = RunJoin(ls, rs, EventTimeSessionWindows::with_gap(Duration(700)), GetParam());
  const Grouped g = GroupBySession(ls, rs, 700);
  // Some sessions with one side only, some with both.
  int one_sided = 0;
  for (const auto& [kw, sides] : g) one_sided += sides.first.empty() || sides.second.empty();
  EXPECT_GT(one_sided, 0);
  const auto expected = ExpectedPairs(g);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(JoinPairs(items), expected);
}

// The flat join (a Collector) and the co-group, with the window in the
// output; at parallelism 1 the pairs of each window come in Flink's order
// (lefts in arrival order outer, rights inner).
TEST_P(WindowJoinAtParallelism, FlatJoinAndCoGroupSeeTheWindowsElementsInArrivalOrder) {
  const int p = GetParam();
  auto [ls, rs] = Inputs(90, 20'000, 4);
  StreamExecutionEnvironment env;
  env.set_parallelism(p);
  auto left = Scripted(env, RecordsOf(ls), p, "left");
  auto right = Scripted(env, RecordsOf(rs), p, "right");
  auto flat = left.join(right)
                  .where(KeyL)
                  .equal_to(KeyR)
                  .window(TumblingEventTimeWindows::of(Duration(3000)))
                  .apply([](const L& l, const R& r, Collector<std::string>& out) {
                    const int64_t s = l.ts - l.ts % 3000;
                    out.collect(std::to_string(l.key) + "|" + std::to_string(s) + "-" +
                                std::to_string(s + 3000) + "|" + std::to_string(l.id) + "x" +
                                std::to_string(r.id));
                  })
                  .collect();
  auto groups = left.co_group(right)
                    .where(KeyL)
                    .equal_to(KeyR)
                    .window(TumblingEventTimeWindows::of(Duration(3000)))
                    .apply([](const std::vector<L>& l, const std::vector<R>& r,
                              Collector<std::tuple<int, size_t, size_t>>& out) {
                      const int key = l.empty() ? r.front().key : l.front().key;
                      out.collect({key, l.size(), r.size()});
                    })
                    .collect();
  JobResult r = env.execute("flat join and co-group");
  ASSERT_TRUE(r.ok()) << r.status;
  const Grouped g = GroupByWindow(ls, rs, [](int64_t t) { return TumblingOf(t, 3000); });
  const auto expected = ExpectedJoin(g);
  const auto got = GroupOutput(flat->items());
  EXPECT_EQ(Flatten(got), Flatten(expected));
  if (p == 1) {
    // Sources at parallelism 1: each side arrives in input order.
    EXPECT_EQ(got, expected);
  }
  // The co-group sees every (key, window) with elements, one side or both,
  // with all of each side's elements.
  std::vector<std::string> cg, cg_expected;
  for (const auto& item : groups->items()) {
    const auto& [key, nl, nr] = item.value;
    cg.push_back(std::to_string(key) + "@" + std::to_string(item.timestamp) + ":" +
                 std::to_string(nl) + "," + std::to_string(nr));
  }
  for (const auto& [kw, sides] : g)
    cg_expected.push_back(std::to_string(kw.first) + "@" + std::to_string(kw.second.end - 1) + ":" +
                          std::to_string(sides.first.size()) + "," +
                          std::to_string(sides.second.size()));
  std::sort(cg.begin(), cg.end());
  std::sort(cg_expected.begin(), cg_expected.end());
  EXPECT_EQ(cg, cg_expected);
}

INSTANTIATE_TEST_SUITE_P(P, WindowJoinAtParallelism, ::testing::Values(1, 3));

// A window (and key) with records of one side only emits nothing from the
// join; the co-group is called for it with an empty side.
TEST(WindowJoin, OneSidedWindowsEmitNothing) {
  // Key 1: left in [0, 5000), right in [5000, 10000); key 2: both in [0, 5000).
  std::vector<L> ls{{1, 100, 1}, {1, 4000, 2}, {2, 300, 3}};
  std::vector<R> rs{{1, 5100, 11}, {2, 4999, 12}, {2, 200, 13}};
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  auto left = Scripted(env, RecordsOf(ls), 1, "left");
  auto right = Scripted(env, RecordsOf(rs), 1, "right");
  auto joined = left.join(right)
                    .where(KeyL)
                    .equal_to(KeyR)
                    .window(TumblingEventTimeWindows::of(Duration(5000)))
                    .apply([](const L& l, const R& r) { return std::make_pair(l.id, r.id); })
                    .collect();
  auto sides = left.co_group(right)
                   .where(KeyL)
                   .equal_to(KeyR)
                   .window(TumblingEventTimeWindows::of(Duration(5000)))
                   .apply([](const std::vector<L>& l, const std::vector<R>& r,
                             Collector<std::pair<size_t, size_t>>& out) {
                     out.collect({l.size(), r.size()});
                   })
                   .collect();
  ASSERT_TRUE(env.execute("one-sided").ok());
  std::vector<std::pair<int, int>> pairs;
  for (const auto& i : joined->items()) {
    pairs.push_back(i.value);
    EXPECT_EQ(i.timestamp, 4999);
  }
  std::sort(pairs.begin(), pairs.end());
  EXPECT_EQ(pairs, (std::vector<std::pair<int, int>>{{3, 12}, {3, 13}}));
  auto groups = sides->values();
  std::sort(groups.begin(), groups.end());
  EXPECT_EQ(groups, (std::vector<std::pair<size_t, size_t>>{{0, 1}, {1, 2}, {2, 0}}));
}

// Left: 1000 and 6000, watermark 5999 (window [0, 5000) fires: the right
// side has ended), then, once the sink has seen that window's result, 2000
// (late) and 7000.  Without lateness 2000 is dropped and counted; with 2 s
// of allowed lateness it joins, and the window fires again with every pair
// (Flink's join emits the whole window on each firing).
std::vector<std::string> RunLate(Duration lateness, int64_t* dropped) {
  auto gate = std::make_shared<Gate>();
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  std::vector<Step<L>> lsteps{{L{1, 1000, 1}, 1000},
                              {L{1, 6000, 2}, 6000},
                              {std::nullopt, 5999},
                              {L{1, 2000, 3}, 2000},
                              {L{1, 7000, 4}, 7000}};
  auto left = Scripted(env, lsteps, 1, "left", /*gate_at=*/3, gate);
  auto right = Scripted(env, RecordsOf(std::vector<R>{{1, 1500, 11}, {1, 6500, 12}}), 1, "right");
  auto seen = std::make_shared<std::mutex>();
  auto lines = std::make_shared<std::vector<std::string>>();
  left.join(right)
      .where(KeyL)
      .equal_to(KeyR)
      .window(TumblingEventTimeWindows::of(Duration(5000)))
      .allowed_lateness(lateness)
      .apply(
          [](const L& l, const R& r) { return std::to_string(l.id) + "x" + std::to_string(r.id); })
      .add_sink([gate, seen, lines](std::string&& v, Timestamp ts) {
        std::lock_guard<std::mutex> lock(*seen);
        lines->push_back(v + "@" + std::to_string(ts));
        if (ts == 4999) gate->Open();
      });
  JobResult r = env.execute("late");
  EXPECT_TRUE(r.ok()) << r.status;
  *dropped = r.CounterTotal("numLateRecordsDropped");
  return *lines;
}

TEST(WindowJoin, LateRecordsAreDroppedAndCounted) {
  int64_t dropped = -1;
  auto lines = RunLate(Duration(0), &dropped);
  EXPECT_EQ(lines, (std::vector<std::string>{"1x11@4999", "2x12@9999", "4x12@9999"}));
  EXPECT_EQ(dropped, 1);
}

TEST(WindowJoin, ARecordWithinTheAllowedLatenessFiresTheWindowAgain) {
  int64_t dropped = -1;
  auto lines = RunLate(Duration(2000), &dropped);
  EXPECT_EQ(lines, (std::vector<std::string>{"1x11@4999", "1x11@4999", "3x11@4999", "2x12@9999",
                                             "4x12@9999"}));
  EXPECT_EQ(dropped, 0);
}

// The tagged union's codec: both alternatives, also of the same type.
TEST(WindowJoin, TaggedUnionRoundTripsThroughTheStateCodec) {
  std::string bytes;
  internal::StateWriter w(&bytes);
  using U = TaggedUnion<std::string, std::string>;
  std::vector<U> v{U(std::in_place_index<1>, "b"), U(std::in_place_index<0>, "a")};
  internal::Encode(w, v);
  internal::StateReader r(bytes);
  auto back = internal::Decode<std::vector<U>>(r);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(back, v);
  EXPECT_EQ(back[0].index(), 1u);
  // A bad index fails the reader.
  std::string bad;
  internal::StateWriter bw(&bad);
  bw.PutVarint(2);
  internal::StateReader br(bad);
  (void)internal::Decode<U>(br);
  EXPECT_FALSE(br.ok());
}

// A checkpoint taken while both sources wait halfway (nothing fired: no
// watermark yet), the job cancelled, a second one restored from it: the
// restored job's output is the join of all the input.
TEST(WindowJoin, RestoredJobJoinsWhatWasInTheWindowsAtTheCheckpoint) {
  testing::TempDir dir;
  auto [ls, rs] = Inputs(60, 20'000, 5);
  const size_t half = 30;
  auto run = [&](bool restore, std::shared_ptr<Gate> gate, JobResult* result) {
    StreamExecutionEnvironment env;
    env.set_parallelism(2);
    env.enable_checkpointing(Duration(0), dir.path(), 3);
    if (restore) env.restore_from("latest");
    auto left = Scripted(env, RecordsOf(ls), 1, "left", half, gate);
    auto right = Scripted(env, RecordsOf(rs), 1, "right", half, gate);
    auto got = left.join(right)
                   .where(KeyL)
                   .equal_to(KeyR)
                   .window(TumblingEventTimeWindows::of(Duration(4000)))
                   .apply([](const L& l, const R& r) {
                     return std::to_string(l.key) + "|" + std::to_string(l.ts) + "x" +
                            std::to_string(r.ts) + "|" + std::to_string(l.id) + "x" +
                            std::to_string(r.id);
                   })
                   .collect();
    JobClient client = env.execute_async("join checkpoint");
    if (!restore) {
      gate->WaitReached(2);
      const int64_t id = client.trigger_checkpoint();
      EXPECT_GE(id, 0);
      EXPECT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
      client.cancel();
    }
    bool hung = false;
    *result = testing::WaitWithWatchdog(client, &hung);
    EXPECT_FALSE(hung);
    return got->items();
  };
  JobResult first, second;
  auto before = run(false, std::make_shared<Gate>(), &first);
  EXPECT_TRUE(before.empty());
  auto open = std::make_shared<Gate>();
  open->Open();
  auto after = run(true, open, &second);
  ASSERT_TRUE(second.ok()) << second.status;
  EXPECT_EQ(JoinPairs(after),
            ExpectedPairs(GroupByWindow(ls, rs, [](int64_t t) { return TumblingOf(t, 4000); })));
}

}  // namespace
}  // namespace tidemark
