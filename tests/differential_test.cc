// Randomized differential tests: the cases of differential_cases.h, run on the
// real multi-threaded runtime and on the sequential reference model, and the
// model's own facts.
#include "differential_cases.h"

namespace tidemark {
using namespace internal;
namespace {

namespace m = model;

// ---------------------------------------------------------------------------
// The model on its own: facts from docs/semantics.md.

m::Script OneSource(std::vector<std::pair<std::vector<m::Rec>, m::Ts>> rounds) {
  m::Script s;
  s.sources = 1;
  for (auto& [recs, w] : rounds) {
    s.watermarks.push_back(w);
    s.rounds.push_back({m::SourceRound{m::Mode::kActive, recs}});
  }
  return s;
}

TEST(ReferenceModel, WindowStartsFollowTheDocument) {
  EXPECT_EQ(m::WindowStart(-8, 0, 7), -14);
  EXPECT_EQ(m::WindowStart(-7, 0, 7), -7);
  EXPECT_EQ(m::WindowStart(-1, 0, 7), -7);
  EXPECT_EQ(m::WindowStart(6, 0, 7), 0);
  EXPECT_EQ(m::WindowStart(2, 3, 7), -4);
  EXPECT_EQ(m::WindowStart(3, 3, 7), 3);
  EXPECT_EQ(m::WindowStart(-3, -2, 7), -9);
  EXPECT_EQ(m::WindowStart(4, -2, 7), -2);
  EXPECT_EQ(m::WindowStart(7, -2, 7), 5);
  EXPECT_EQ(m::WindowStart(1470902048450, -28800000, 86400000), 1470844800000);
  m::WindowSpec sliding{m::WindowKind::kSliding, 10, 5, 0};
  auto ws = m::AssignWindows(sliding, 12);
  ASSERT_EQ(ws.size(), 2u);
  EXPECT_EQ(ws[0].start, 10);  // descending start
  EXPECT_EQ(ws[1].start, 5);
}

TEST(ReferenceModel, ValveTakesTheMinimumAndFlushesWhenAllIdle) {
  m::Valve v(2);
  m::Ts e = 0;
  EXPECT_FALSE(v.Watermark(0, 29, &e));  // channel 1 still at MIN
  EXPECT_TRUE(v.Watermark(1, 14, &e));
  EXPECT_EQ(e, 14);
  EXPECT_FALSE(v.Watermark(1, 14, &e));  // not advancing
  EXPECT_TRUE(v.Idle(1, &e));            // the other channel alone now
  EXPECT_EQ(e, 29);
  EXPECT_FALSE(v.Idle(0, &e));    // all idle: max is 29, not above the output
  EXPECT_FALSE(v.Active(1, &e));  // 14 < 29: unaligned until it catches up
  EXPECT_FALSE(v.Watermark(1, 20, &e));
  EXPECT_TRUE(v.Watermark(1, 40, &e));
  EXPECT_EQ(e, 40);
}

// S5 of the document (lateness 2 s, side output): vc=3,4,5,6 then the side
// outputs ts 1000 and 2000.
TEST(ReferenceModel, LatenessRefiresAccumulatingThenSideOutputs) {
  m::WindowSpec spec{m::WindowKind::kTumbling, 5000, 5000, 0};
  spec.lateness = 2000;
  spec.side_output = true;
  auto rec = [](int64_t id, m::Ts ts) { return m::Rec{id, 0, ts, 1}; };
  // Watermarks as forBoundedOutOfOrderness(2 s) would give after each record.
  m::Script s = OneSource({{{rec(1, 1000), rec(2, 2000), rec(3, 3000)}, 4999},
                           {{rec(4, 1000)}, 4999 + 1},
                           {{rec(5, 2000)}, 5001},
                           {{rec(6, 3000)}, 6999},
                           {{rec(7, 1000), rec(8, 2000)}, 7000}});
  m::Result r = m::Run(spec, s, m::Interleaving::kSourceBySource);
  ASSERT_EQ(r.firings.size(), 4u);
  EXPECT_EQ(r.firings[0].count, 3);
  EXPECT_FALSE(r.firings[0].by_element);
  EXPECT_EQ(r.firings[0].watermark, 4999);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(r.firings[i].count, 3 + i);
    EXPECT_TRUE(r.firings[i].by_element);
  }
  ASSERT_EQ(r.late.size(), 2u);
  EXPECT_EQ(r.late[0].ts, 1000);
  EXPECT_EQ(r.late[1].ts, 2000);
  EXPECT_TRUE(r.dropped.empty());
}

// Sessions (document 5.4 and 6): elements 2 and 7 with gap 5 merge into
// [2,12); a late element within the lateness merges into the fired session
// and fires it at once (accumulating); after the cleanup time a record is
// dropped.
TEST(ReferenceModel, SessionsMergeAndRefireWithinLateness) {
  m::WindowSpec spec;
  spec.kind = m::WindowKind::kSession;
  spec.gap = 5;
  spec.lateness = 10;
  auto rec = [](int64_t id, m::Ts ts) { return m::Rec{id, 7, ts, 1}; };
  m::Script s = OneSource(
      {{{rec(1, 2), rec(2, 7)}, 20}, {{rec(3, 10)}, 21}, {{rec(4, 0)}, 40}, {{rec(5, 1)}, 41}});
  m::Result r = m::Run(spec, s, m::Interleaving::kSourceBySource);
  ASSERT_EQ(r.firings.size(), 3u);
  EXPECT_EQ(r.firings[0].window.start, 2);
  EXPECT_EQ(r.firings[0].window.end, 12);
  EXPECT_EQ(r.firings[0].count, 2);
  EXPECT_FALSE(r.firings[0].by_element);
  EXPECT_EQ(r.firings[0].watermark, 20);
  EXPECT_EQ(r.firings[1].window.start, 2);
  EXPECT_EQ(r.firings[1].window.end, 15);  // [10,15) merged in at watermark 20
  EXPECT_EQ(r.firings[1].count, 3);
  EXPECT_TRUE(r.firings[1].by_element);
  EXPECT_EQ(r.firings[2].window.start, 0);  // [0,5) touches [2,15): cleanup 24 > 21
  EXPECT_EQ(r.firings[2].window.end, 15);
  EXPECT_EQ(r.firings[2].count, 4);
  EXPECT_EQ(r.firings[2].watermark, 21);
  ASSERT_EQ(r.dropped.size(), 1u);  // ts 1 at watermark 40: [1,6) is late
  EXPECT_EQ(r.dropped[0].id, 5);
}

TEST(Differential, GeneratedCasesAreValidAndTimingIndependentInTheModel) {
  // The generator and the model alone, many more cases than the runtime runs.
  const int n = testing::StressIterations(2000);
  size_t cases = 0, idle_cases = 0, lagging_cases = 0, records = 0, ranged = 0, resumed = 0;
  for (int i = 0; i < n; ++i) {
    for (m::WindowKind kind :
         {m::WindowKind::kTumbling, m::WindowKind::kSliding, m::WindowKind::kSession}) {
      const Case c = Generate(1000000 + static_cast<uint64_t>(i), kind);
      // Coverage of the interleaving-sensitive parts.
      const auto ends = m::ExpectedRoundEnds(c.script);
      bool idle = false, lagging = false;
      for (int r = 0; r < c.script.num_rounds(); ++r) {
        for (int src = 0; src < c.sources; ++src) {
          const m::SourceRound& sr = c.script.rounds[r][src];
          idle = idle || sr.mode == m::Mode::kGoIdle;
          lagging = lagging || sr.mode == m::Mode::kSilent;
          records += sr.records.size();
          const m::Ts lo = r == 0 ? m::kMin : ends[r - 1].output;
          const m::Ts own = r == 0 ? m::kMin : ends[r - 1].channels[src].watermark;
          const m::Ts hi =
              sr.mode == m::Mode::kResume ? ends[r].output : std::min(own, ends[r].output);
          if (hi != lo) ranged += sr.records.size();
          if (sr.mode == m::Mode::kResume) resumed += sr.records.size();
        }
      }
      ++cases;
      idle_cases += idle;
      lagging_cases += lagging;
      std::string problem;
      try {
        ModelResult(c, &problem);
      } catch (const std::exception& e) {
        problem = e.what();
      }
      ASSERT_TRUE(problem.empty()) << problem << "\n" << c.Describe() << "\n" << c.DescribeScript();
    }
  }
  std::cout << "[differential] generator: " << cases << " cases, " << idle_cases
            << " with idle sources, " << lagging_cases << " with lagging sources; " << records
            << " records, " << ranged << " with a watermark range, " << resumed
            << " sent while idle" << std::endl;
}

// About 4000 cases; each kind is its own ctest test, so they run in parallel.
TEST(Differential, Tumbling) { RunCases(m::WindowKind::kTumbling, 1600); }
TEST(Differential, Sliding) { RunCases(m::WindowKind::kSliding, 1200); }
TEST(Differential, Sessions) { RunCases(m::WindowKind::kSession, 1200); }

// Local pre-aggregation (window(...).local_aggregation()) must not change any
// firing, late record or drop: the same cases against the same model, with
// reduce or aggregate, the window at parallelism 1, 2 or 4, and a tiny bound
// on the partials in some cases (flushes by size).
void LocalAggregation(Case& c) {
  if (c.function == Function::kProcess)
    c.function = c.seed % 2 == 0 ? Function::kReduce : Function::kAggregate;
  static const int kParallelism[] = {1, 2, 4};
  c.window_parallelism = kParallelism[c.seed % 3];
  c.local_aggregation = c.seed % 4 == 0 ? 2 : kDefaultLocalAggregationMaxPartials;
}
TEST(Differential, TumblingLocalAggregation) {
  const int64_t combined = RunCases(m::WindowKind::kTumbling, 600, LocalAggregation);
  EXPECT_GT(combined, 0) << "no record was combined: the cases do not exercise it";
}
TEST(Differential, SlidingLocalAggregation) {
  const int64_t combined = RunCases(m::WindowKind::kSliding, 500, LocalAggregation);
  EXPECT_GT(combined, 0) << "no record was combined: the cases do not exercise it";
}

}  // namespace
}  // namespace tidemark
