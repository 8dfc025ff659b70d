// Local pre-aggregation of keyed event-time windows
// (operators/window/local_aggregate_operator.h, WindowedStream::
// local_aggregation in api/windowed_stream.h): the operator alone in the test
// harness (what it combines, what passes alone, when partials are sent), the
// API's checks, the plan it builds (explain), and small jobs whose results
// equal the plain path's.  The randomized comparison against the reference
// model, with late records, allowed lateness and a late side output, is
// Differential.*LocalAggregation (differential_test.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/api/testing/harness.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/local_aggregate_operator.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/tidemark.h"
#include "window_test_functions.h"

namespace tidemark {
using namespace internal;
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tidemark::testing::CountSum;
using tidemark::testing::E;
using tidemark::testing::KeyOfE;
using tidemark::testing::SumE;

using ReduceOp =
    LocalAggregateOperator<E, std::string, KeyOfE, LocalReduceCombiner<E, std::string, SumE>>;
using ReduceHarness = harness::OneInputOperatorTestHarness<E, E>;

std::unique_ptr<ReduceHarness> MakeReduce(LocalPanes panes, size_t max_partials = 1000) {
  auto h = std::make_unique<ReduceHarness>(std::make_unique<ReduceOp>(
      KeyOfE{}, panes, LocalReduceCombiner<E, std::string, SumE>{SumE{}}, max_partials));
  h->open();
  return h;
}

std::vector<harness::StreamRecord<E>> Sorted(std::vector<harness::StreamRecord<E>> v) {
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return std::tie(a.timestamp, a.value) < std::tie(b.timestamp, b.value);
  });
  return v;
}

TEST(LocalAggregateOperator, CombinesPerKeyAndPaneAndSendsThePaneBeforeTheWatermarkThatEndsIt) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 1);
  h->process_element(E("a", 2), 3);
  h->process_element(E("b", 5), 4);
  h->process_element(E("a", 4), 12);  // the next pane
  EXPECT_TRUE(h->get_output().empty());
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 3u);

  h->process_watermark(9);  // ends [0, 10): its partials, at its max timestamp, then the watermark
  ASSERT_EQ(h->get_output().size(), 3u);
  EXPECT_EQ(h->get_output().back(), harness::Emitted<E>(harness::watermark(9)));
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 3), 9),
                                                   harness::stream_record(E("b", 5), 9)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 1u);  // [10, 20) stays combinable
  EXPECT_EQ(h->counter(kLocalAggregationRecordsCombined), 4);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsPassed), 0);
  EXPECT_EQ(h->counter(kLocalAggregationPartialsSent), 2);

  h->clear_output();
  h->process_watermark(15);  // [10, 20) has not ended: nothing sent
  EXPECT_EQ(h->extract_output_records().size(), 0u);
  h->process_watermark(19);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 4), 19)}));
}

// With local aggregation a reduce must keep the key: the window downstream
// keys each partial by its own.  One that changes it fails, saying so,
// instead of sending the partial to another key.
struct RenamingSum {
  E operator()(const E& a, const E& b) const { return E(a.first + "'", a.second + b.second); }
};

TEST(LocalAggregateOperator, AReduceThatChangesTheKeyFailsSayingSo) {
  using Combiner = LocalReduceCombiner<E, std::string, RenamingSum>;
  using Op = LocalAggregateOperator<E, std::string, KeyOfE, Combiner>;
  ReduceHarness h(std::make_unique<Op>(KeyOfE{}, LocalPanes{10, 0}, Combiner{RenamingSum{}}, 1000));
  h.open();
  h.process_element(E("a", 1), 1);
  h.process_element(E("b", 1), 2);
  try {
    h.process_element(E("a", 2), 3);
    FAIL() << "no error";
  } catch (const std::logic_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("the reduce function returned a record with another key"));
  }
  // The partial stays as it was before the failed combine.
  h.process_watermark(9);
  EXPECT_EQ(Sorted(h.extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 9),
                                                   harness::stream_record(E("b", 1), 9)}));
}

// An aggregate whose accumulator is of the input's type is no reduce: its
// accumulators are kept by key and sent with it, and nothing checks their
// key (a sum of int64 records keyed by v % 10: 3 + 13 = 16 for key 3).
struct Mod10 {
  int64_t operator()(const int64_t& v) const { return v % 10; }
};
struct SumI64 {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const int64_t& v, int64_t acc) const { return acc + v; }
  int64_t get_result(const int64_t& acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};
using P = std::pair<int64_t, int64_t>;  // key, value
struct FirstOfP {
  int64_t operator()(const P& p) const { return p.first; }
};
struct SumP {  // accumulator (count, sum): the input's type
  P create_accumulator() const { return {0, 0}; }
  P add(const P& v, P acc) const { return {acc.first + 1, acc.second + v.second}; }
  P get_result(const P& acc) const { return acc; }
  P merge(P a, P b) const { return {a.first + b.first, a.second + b.second}; }
};

TEST(LocalAggregateOperator, AnAggregateWithTheInputsTypeAsAccumulatorIsNoReduce) {
  {
    using Combiner = LocalAggregateCombiner<int64_t, int64_t, SumI64>;
    using Op = LocalAggregateOperator<int64_t, int64_t, Mod10, Combiner>;
    harness::OneInputOperatorTestHarness<int64_t, Combiner::Out> h(
        std::make_unique<Op>(Mod10{}, LocalPanes{10, 0}, Combiner{SumI64{}}, 100));
    h.open();
    h.process_element(3, 1);
    h.process_element(13, 2);
    h.process_watermark(9);
    const auto out = h.extract_output_records();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(out[0].value.partial());
    EXPECT_EQ(std::get<1>(out[0].value.value), std::make_pair(int64_t{3}, int64_t{16}));
  }
  {
    using Combiner = LocalAggregateCombiner<P, int64_t, SumP>;
    using Op = LocalAggregateOperator<P, int64_t, FirstOfP, Combiner>;
    harness::OneInputOperatorTestHarness<P, Combiner::Out> h(
        std::make_unique<Op>(FirstOfP{}, LocalPanes{10, 0}, Combiner{SumP{}}, 100));
    h.open();
    h.process_element({7, 5}, 1);
    h.process_element({7, 6}, 2);
    h.process_watermark(9);
    const auto out = h.extract_output_records();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_TRUE(out[0].value.partial());
    EXPECT_EQ(std::get<1>(out[0].value.value), std::make_pair(int64_t{7}, P{2, 11}));
  }
}

// The same on the set of partials (a trivially copyable key) and on the map
// of a float key (compared as heap state does).
struct ShiftingSumP {
  P operator()(const P& a, const P& b) const { return {a.first + 1, a.second + b.second}; }
};
using D = std::pair<double, int64_t>;
struct FirstOfD {
  double operator()(const D& d) const { return d.first; }
};
struct ShiftingSumD {
  D operator()(const D& a, const D& b) const { return {a.first + 1, a.second + b.second}; }
};

template <typename T, typename KeyFn, typename F>
void ExpectKeyChangeFailsAndKeepsThePartial(T first, T second, KeyFn key, F f) {
  using K = std::invoke_result_t<KeyFn, const T&>;
  using Combiner = LocalReduceCombiner<T, K, F>;
  using Op = LocalAggregateOperator<T, K, KeyFn, Combiner>;
  harness::OneInputOperatorTestHarness<T, T> h(
      std::make_unique<Op>(key, LocalPanes{10, 0}, Combiner{f}, 1000));
  h.open();
  h.process_element(first, 1);
  EXPECT_THROW(h.process_element(second, 2), std::logic_error);
  h.process_watermark(9);
  EXPECT_EQ(h.extract_output_records(),
            (std::vector<harness::StreamRecord<T>>{harness::stream_record(first, 9)}));
}

TEST(LocalAggregateOperator, AReduceThatChangesTheKeyFailsForEveryKeyType) {
  static_assert(
      kPartialsAsSet<P, int64_t, FirstOfP, LocalReduceCombiner<P, int64_t, ShiftingSumP>>);
  ExpectKeyChangeFailsAndKeepsThePartial(P{7, 5}, P{7, 6}, FirstOfP{}, ShiftingSumP{});
  static_assert(!kPartialsAsSet<D, double, FirstOfD, LocalReduceCombiner<D, double, ShiftingSumD>>);
  ExpectKeyChangeFailsAndKeepsThePartial(D{1.0, 5}, D{1.0, 6}, FirstOfD{}, ShiftingSumD{});
}

// Which keys get the set: pairs of numbers do; a key selector that is not
// const-callable (a `mutable` lambda) keeps the map (and a window reduce
// keyed by one compiles: LocalAggregationJob.AMutableKeySelectorCompiles).
TEST(LocalAggregateOperator, PairKeysGetTheSetAndMutableKeySelectorsTheMap) {
  using PP = std::pair<std::pair<int64_t, int64_t>, int64_t>;
  struct FirstOfPP {
    std::pair<int64_t, int64_t> operator()(const PP& p) const { return p.first; }
  };
  struct SumPP {
    PP operator()(const PP& a, const PP& b) const { return {a.first, a.second + b.second}; }
  };
  static_assert(kPartialsAsSet<PP, std::pair<int64_t, int64_t>, FirstOfPP,
                               LocalReduceCombiner<PP, std::pair<int64_t, int64_t>, SumPP>>);
  auto counting = [n = int64_t{0}](const E& e) mutable {
    ++n;
    return e.first;
  };
  static_assert(!kPartialsAsSet<E, std::string, decltype(counting),
                                LocalReduceCombiner<E, std::string, SumE>>);
  struct CountingInt64 {
    int64_t n = 0;
    int64_t operator()(const P& p) {
      ++n;
      return p.first;
    }
  };
  static_assert(
      !kPartialsAsSet<P, int64_t, CountingInt64, LocalReduceCombiner<P, int64_t, ShiftingSumP>>);
}

TEST(LocalAggregateOperator, ARecordWhoseWindowMayHaveFiredDownstreamPassesAloneUnchanged) {
  auto h = MakeReduce({10, 0});
  h->process_watermark(9);
  h->clear_output();
  // Pane [0, 10) ends at 9 <= the watermark sent: late, or re-firing within
  // the allowed lateness downstream.  It goes on at once, with its own
  // timestamp, uncombined.
  h->process_element(E("a", 7), 5);
  h->process_element(E("a", 1), 9);
  h->process_element(E("a", 2), 10);  // [10, 20): combinable
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 7), 5),
                                                   harness::stream_record(E("a", 1), 9)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 1u);
  h->process_watermark(kMaxTimestamp);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsPassed), 2);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsCombined), 1);
}

// Out-of-order records near a pane's end alternate between two open panes
// (the operator keeps both at hand); once the watermark has sent one, a
// record of it passes alone, whichever pane came before.
TEST(LocalAggregateOperator, RecordsAlternatingBetweenTwoPanesCombineIntoEach) {
  auto h = MakeReduce({10, 0});
  for (int i = 0; i < 3; ++i) {
    h->process_element(E("a", 1), 9 - i);    // [0, 10)
    h->process_element(E("a", 10), 10 + i);  // [10, 20)
    h->process_element(E("b", 100), 5);      // [0, 10)
  }
  EXPECT_TRUE(h->get_output().empty());
  // [20, 30), a third pane: [0, 10), two panes back, further than any record
  // has reached, is sent early.
  h->process_element(E("a", 1000), 25);
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 3), 9),
                                                   harness::stream_record(E("b", 300), 9)}));
  h->clear_output();
  h->process_element(E("a", 1), 0);    // [0, 10) again: a new partial
  h->process_element(E("a", 10), 12);  // [10, 20): [0, 10) is the pane before
  EXPECT_TRUE(h->get_output().empty());
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 3u);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsCombined), 0);  // published at watermarks

  h->process_watermark(9);  // sends [0, 10), the pane before the current one
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 9)}));
  h->clear_output();
  // [0, 10) has been sent: its records pass alone, between records of
  // [10, 20), which still combine.
  h->process_element(E("a", 10), 15);
  h->process_element(E("a", 7), 8);
  h->process_element(E("a", 10), 11);
  h->process_element(E("b", 7), 3);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 7), 8),
                                                   harness::stream_record(E("b", 7), 3)}));
  h->clear_output();
  h->process_watermark(kMaxTimestamp);
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 60), 19),
                                                   harness::stream_record(E("a", 1000), 29)}));
  EXPECT_EQ(h->counter(kLocalAggregationRecordsCombined), 14);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsPassed), 2);
  EXPECT_EQ(h->counter(kLocalAggregationPartialsSent), 5);
}

// Without a watermark (the periodic interval is long at millions of records
// a second) the panes behind would wait for the bound, in memory and then in
// one burst downstream.  When a pane opens after every open one, those that
// start further back from it than any record has reached (at least one
// pane) are sent; a record of a sent pane starts a new partial of it and
// widens the reach.  None of this sends a watermark or changes what is late.
TEST(LocalAggregateOperator, APaneFurtherBackThanRecordsReachIsSentWhenANewerOneOpens) {
  auto h = MakeReduce({10, 0});
  auto& op = h->get_operator<ReduceOp>();
  h->process_element(E("a", 1), 1);
  h->process_element(E("b", 2), 2);
  h->process_element(E("a", 1), 11);  // [10, 20): [0, 10) is one pane back, kept
  EXPECT_TRUE(h->get_output().empty());
  h->process_element(E("a", 1), 21);  // [20, 30): [0, 10) is sent
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 9),
                                                   harness::stream_record(E("b", 2), 9)}));
  EXPECT_EQ(op.held_partials(), 2u);
  h->clear_output();

  h->process_element(E("a", 5), 5);  // two panes back: [0, 10) again, nothing sent
  h->process_element(E("a", 6), 3);
  EXPECT_TRUE(h->get_output().empty());
  EXPECT_EQ(op.held_partials(), 3u);
  h->process_element(E("a", 1), 31);  // [30, 40): two panes are kept now, [0, 10) is sent
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 11), 9)}));
  h->clear_output();
  h->process_element(E("a", 1), 41);  // [40, 50): [10, 20) is sent
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 19)}));
  EXPECT_EQ(op.held_partials(), 3u);
  EXPECT_EQ(h->counter(kLocalAggregationSizeFlushes), 0);
  for (const auto& e : h->get_output())
    EXPECT_EQ(e.kind, harness::Emitted<E>::kRecord) << "no watermark is sent";
  h->clear_output();

  // A watermark sends [20, 30); the reach goes back to what the open panes
  // span, one pane: [30, 40) is sent when [50, 60) opens.
  h->process_watermark(29);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 29)}));
  h->clear_output();
  h->process_element(E("a", 1), 51);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 39)}));
  EXPECT_EQ(op.held_partials(), 2u);

  h->process_watermark(kMaxTimestamp);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsCombined), 9);
  EXPECT_EQ(h->counter(kLocalAggregationRecordsPassed), 0);
  EXPECT_EQ(h->counter(kLocalAggregationPartialsSent), 8);
}

// A watermark that sends the current pane leaves the pane before it current,
// with its own range: a record of the sent pane then passes alone, one of the
// other combines into it.
TEST(LocalAggregateOperator, SendingTheCurrentPaneLeavesTheOtherCurrent) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 12);  // [10, 20)
  h->process_element(E("a", 2), 3);   // [0, 10): current, [10, 20) the pane before
  h->process_watermark(9);            // sends [0, 10), the current pane
  h->clear_output();
  h->process_element(E("a", 4), 5);   // [0, 10) has been sent: alone
  h->process_element(E("a", 8), 15);  // [10, 20)
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 4), 5)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 1u);
  h->clear_output();
  h->process_watermark(19);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 9), 19)}));
}

// The pane sent early gives its table's memory to the pane that opened, as
// one sent by a watermark does (ASentPanesTableMemoryGoesToTheNextPane).
TEST(LocalAggregateOperator, APaneSentEarlyGivesItsMemoryToThePaneThatOpened) {
  auto h = MakeReduce({10, 0}, /*max_partials=*/100000);
  auto& op = h->get_operator<ReduceOp>();
  for (int k = 0; k < 1000; ++k) h->process_element(E(absl::StrCat("k", k), 1), 1);
  h->process_element(E("k0", 1), 11);
  EXPECT_EQ(op.kept_pane_blocks(), 0u);
  h->process_element(E("k0", 1), 21);  // sends [0, 10), then sizes [20, 30) as it was
  EXPECT_EQ(h->extract_output_records().size(), 1000u);
  EXPECT_EQ(op.kept_pane_blocks(), 0u) << "[0, 10)'s table memory was not taken";
  EXPECT_GE(op.current_pane_capacity(), 1000u);
}

TEST(LocalAggregateOperator, SlidingWindowsCombinePerPaneOfTheGcd) {
  // Sliding 10 every 4, offset 1: panes of 2 aligned to 1 ([-1, 1), [1, 3), ...).
  auto h =
      MakeReduce(LocalPanesOf(SlidingEventTimeWindows::of(Duration(10), Duration(4), Duration(1))));
  h->process_element(E("a", 1), 1);
  h->process_element(E("a", 2), 2);  // the same pane [1, 3)
  h->process_element(E("a", 4), 3);  // [3, 5)
  h->process_element(E("a", 8), 0);  // [-1, 1)
  h->process_watermark(2);           // ends [-1, 1) and [1, 3)
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 8), 0),
                                                   harness::stream_record(E("a", 3), 2)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 1u);
}

// Near MIN or MAX, Java's wrapping window arithmetic can give a pane's last
// timestamp, which a partial carries, other windows than its records have
// (tumbling 10 ms, offset -3: MAX - 5 is in [MAX - 10, MAX), MAX - 1 in
// [MAX - 4, MIN + 5), a window already late).  Records of panes within
// window size + slide + |offset| of either end pass alone, unchanged; the
// rest combine as before.
TEST(LocalAggregateOperator, RecordsNearTheEndsOfTheRangePassAlone) {
  auto tumbling =
      MakeReduce(LocalPanesOf(TumblingEventTimeWindows::of(Duration(10), Duration(-3))));
  tumbling->process_element(E("a", 1), 0);
  tumbling->process_element(E("a", 10), kMaxTimestamp - 5);
  tumbling->process_element(E("a", 20), kMaxTimestamp - 1);
  tumbling->process_element(E("a", 30), kMaxTimestamp - 30);  // [MAX - 30, MAX - 20): alone
  // [MAX - 43, MAX - 33): combined; the pane of 0, far behind it, is sent
  // (APaneFurtherBackThanRecordsReachIsSentWhenANewerOneOpens).
  tumbling->process_element(E("a", 40), kMaxTimestamp - 40);
  EXPECT_EQ(
      tumbling->extract_output_records(),
      (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 10), kMaxTimestamp - 5),
                                             harness::stream_record(E("a", 20), kMaxTimestamp - 1),
                                             harness::stream_record(E("a", 30), kMaxTimestamp - 30),
                                             harness::stream_record(E("a", 1), 6)}));
  EXPECT_EQ(tumbling->get_operator<ReduceOp>().held_partials(), 1u);

  // Offset 3 at MIN: MIN + 3's pane is [MIN + 1, MIN + 11), but MIN + 1's
  // window is [MAX - 4, MIN + 5); neither is combined, in either order.
  auto low = MakeReduce(LocalPanesOf(TumblingEventTimeWindows::of(Duration(10), Duration(3))));
  low->process_element(E("a", 1), kMinTimestamp + 3);
  low->process_element(E("a", 10), kMinTimestamp + 1);
  EXPECT_EQ(low->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{
                harness::stream_record(E("a", 1), kMinTimestamp + 3),
                harness::stream_record(E("a", 10), kMinTimestamp + 1)}));

  // Sliding 15 every 10, offset 3: MIN + 1 is in [MAX - 4, MIN + 10), its
  // pane's last timestamp MIN + 4 in no window.
  auto sliding = MakeReduce(
      LocalPanesOf(SlidingEventTimeWindows::of(Duration(15), Duration(10), Duration(3))));
  sliding->process_element(E("a", 1), kMinTimestamp + 1);
  EXPECT_EQ(sliding->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{
                harness::stream_record(E("a", 1), kMinTimestamp + 1)}));
  EXPECT_EQ(sliding->counter(kLocalAggregationRecordsPassed), 0)
      << "published at the next watermark";
  sliding->process_watermark(kMinTimestamp + 100);
  EXPECT_EQ(sliding->counter(kLocalAggregationRecordsPassed), 1);
}

TEST(LocalAggregateOperator, TheBoundOnPartialsSendsThemAll) {
  auto h = MakeReduce({10, 0}, /*max_partials=*/2);
  h->process_element(E("a", 1), 1);
  EXPECT_TRUE(h->get_output().empty());
  h->process_element(E("b", 2), 11);  // the second partial: all are sent
  EXPECT_EQ(Sorted(h->extract_output_records()),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 9),
                                                   harness::stream_record(E("b", 2), 19)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 0u);
  EXPECT_EQ(h->counter(kLocalAggregationSizeFlushes), 1);
  h->process_element(E("a", 5), 2);  // still combinable: the watermark is MIN
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 1u);
}

// A new pane's table starts at the size the panes before it reached instead
// of growing from empty: the current pane's while none has been sent, and
// after a flush the largest pane sent (not the last one, which after a size
// flush is often one that had only begun); never more than the partials the
// bound still allows.
TEST(LocalAggregateOperator, ANewPanesTableStartsAtTheSizeThePanesBeforeItReached) {
  auto h = MakeReduce({10, 0}, /*max_partials=*/1000);
  auto& op = h->get_operator<ReduceOp>();
  for (int k = 0; k < 200; ++k) h->process_element(E(absl::StrCat("k", k), 1), 1);
  EXPECT_GE(op.current_pane_capacity(), 200u);
  h->process_element(E("k0", 1), 11);  // a second pane while the first is open
  EXPECT_GE(op.current_pane_capacity(), 200u) << "grew from empty";

  auto bounded = MakeReduce({10, 0}, /*max_partials=*/203);
  auto& bop = bounded->get_operator<ReduceOp>();
  for (int k = 0; k < 200; ++k) bounded->process_element(E(absl::StrCat("k", k), 1), 1);
  bounded->process_element(E("k0", 1), 11);
  EXPECT_LT(bop.current_pane_capacity(), 200u) << "3 partials left under the bound";
  bounded->process_element(E("k1", 1), 12);
  bounded->process_element(E("k2", 1), 13);  // the 203rd partial: a size flush
  EXPECT_EQ(bop.held_partials(), 0u);
  EXPECT_EQ(bounded->counter(kLocalAggregationSizeFlushes), 1);
  bounded->process_element(E("k0", 1), 21);  // a pane after the flush
  EXPECT_GE(bop.current_pane_capacity(), 200u)
      << "sized after the last pane sent (3 partials), not the largest (200)";
  EXPECT_EQ(Sorted(bounded->extract_output_records()).size(), 203u);
}

// A sent pane's table memory is kept for the next pane's table, which takes
// it; memory freed while a table grows is not kept, and idleness frees it all.
TEST(LocalAggregateOperator, ASentPanesTableMemoryGoesToTheNextPane) {
  auto h = MakeReduce({10, 0}, /*max_partials=*/100000);
  auto& op = h->get_operator<ReduceOp>();
  // 1 000 string keys: a table of 2 047 slots of 72 bytes, past PaneBlocks'
  // 64 KiB, grown from empty through smaller ones.
  for (int k = 0; k < 1000; ++k) h->process_element(E(absl::StrCat("k", k), 1), 1);
  EXPECT_EQ(op.kept_pane_blocks(), 0u) << "the blocks a growing table freed are not kept";
  h->process_watermark(9);  // sends [0, 10)
  EXPECT_EQ(op.kept_pane_blocks(), 1u);
  h->process_element(E("k0", 1), 11);  // the next pane, sized as the last: takes it
  EXPECT_EQ(op.kept_pane_blocks(), 0u);
  h->process_watermark(19);
  EXPECT_EQ(op.kept_pane_blocks(), 1u);
  h->process_watermark_status(WatermarkStatus::kIdle);
  EXPECT_EQ(op.kept_pane_blocks(), 0u) << "freed: records pass alone from now on";

  auto ended = MakeReduce({10, 0}, /*max_partials=*/100000);
  for (int k = 0; k < 1000; ++k) ended->process_element(E(absl::StrCat("k", k), 1), 1);
  ended->process_watermark(9);
  EXPECT_EQ(ended->get_operator<ReduceOp>().kept_pane_blocks(), 1u);
  ended->end_input();
  EXPECT_EQ(ended->get_operator<ReduceOp>().kept_pane_blocks(), 0u) << "freed at the end of input";
}

// The memory of a pane's table, kept for the next one: a block is taken again
// only for exactly its size; small ones, those freed while not keeping and
// those past the bound are freed.
TEST(PaneBlocks, KeepsLargeBlocksForTheSameSizeFreedLastFirst) {
  PaneBlocks blocks;
  constexpr size_t kBig = PaneBlocks::kMinBytes;
  void* unkept = blocks.Take(kBig, 8);
  blocks.Give(unkept, kBig, 8);
  EXPECT_EQ(blocks.held_blocks(), 0u) << "freed while not keeping";
  blocks.set_keeping(true);
  void* a = blocks.Take(kBig, 8);
  void* b = blocks.Take(kBig, 8);
  void* small = blocks.Take(64, 8);
  blocks.Give(a, kBig, 8);
  blocks.Give(b, kBig, 8);
  blocks.Give(small, 64, 8);
  EXPECT_EQ(blocks.held_blocks(), 2u) << "a small block is freed, not kept";
  void* again = blocks.Take(kBig, 8);
  EXPECT_EQ(again, b) << "the one freed last first";
  EXPECT_EQ(blocks.held_blocks(), 1u);
  void* other = blocks.Take(2 * kBig, 8);  // no block of that size: a new one
  EXPECT_EQ(blocks.held_blocks(), 1u);
  void* aligned = blocks.Take(kBig, 16);  // nor of that alignment
  EXPECT_EQ(blocks.held_blocks(), 1u);
  EXPECT_EQ(blocks.Take(kBig, 8), a);
  blocks.Give(a, kBig, 8);
  // At most kMaxBlocks: the oldest goes.
  std::vector<void*> many;
  for (size_t i = 0; i < PaneBlocks::kMaxBlocks + 2; ++i)
    many.push_back(::operator new(kBig, std::align_val_t(8)));
  for (void* p : many) blocks.Give(p, kBig, 8);
  EXPECT_EQ(blocks.held_blocks(), PaneBlocks::kMaxBlocks);
  EXPECT_EQ(blocks.Take(kBig, 8), many.back());
  blocks.Give(many.back(), kBig, 8);
  blocks.Give(again, kBig, 8);
  blocks.Give(other, 2 * kBig, 8);
  blocks.Give(aligned, kBig, 16);
  EXPECT_EQ(blocks.held_blocks(), PaneBlocks::kMaxBlocks);
  blocks.Release();
  EXPECT_EQ(blocks.held_blocks(), 0u);
}

TEST(LocalAggregateOperator, ACheckpointBarrierFindsNoPartials) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 1);
  h->process_element(E("a", 2), 2);
  harness::OperatorSnapshot snap = h->snapshot(1);  // PrepareSnapshotPreBarrier, then the state
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 3), 9)}));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 0u);
  EXPECT_EQ(snap.bytes.size(), 9u) << "no partials: the last watermark sent and the idle flag";
}

// After a restore the window operator downstream has its watermark back, so
// the restored pre-aggregation must know the last watermark it sent (and
// whether it went idle): a record whose pane ended at or before it passes
// alone, as it would have without the failure.  (Found by a review: from
// MIN, two late records within the allowed lateness were combined, and the
// window re-fired once instead of twice.)
TEST(LocalAggregateOperator, ARestoredSubtaskPassesAloneWhatWasLateBeforeTheCheckpoint) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 1);
  h->process_watermark(20);
  harness::OperatorSnapshot snap = h->snapshot(1);

  auto restored = std::make_unique<ReduceHarness>(std::make_unique<ReduceOp>(
      KeyOfE{}, LocalPanes{10, 0}, LocalReduceCombiner<E, std::string, SumE>{SumE{}}, 1000));
  restored->initialize_state(snap);
  restored->open();
  EXPECT_EQ(restored->get_operator<ReduceOp>().last_watermark(), 20);
  restored->process_element(E("a", 10), 3);  // [0, 10): fired downstream
  restored->process_element(E("a", 20), 4);  // alone too
  restored->process_element(E("a", 5), 25);  // [20, 30): combinable
  EXPECT_EQ(restored->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 10), 3),
                                                   harness::stream_record(E("a", 20), 4)}));
  EXPECT_EQ(restored->get_operator<ReduceOp>().held_partials(), 1u);

  // Idle before the checkpoint: every record alone after it, as before it.
  auto idle = MakeReduce({10, 0});
  idle->process_watermark_status(WatermarkStatus::kIdle);
  harness::OperatorSnapshot idle_snap = idle->snapshot(2);
  auto restored_idle = std::make_unique<ReduceHarness>(std::make_unique<ReduceOp>(
      KeyOfE{}, LocalPanes{10, 0}, LocalReduceCombiner<E, std::string, SumE>{SumE{}}, 1000));
  restored_idle->initialize_state(idle_snap);
  restored_idle->open();
  restored_idle->process_element(E("a", 1), 50);
  EXPECT_EQ(restored_idle->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 1), 50)}));

  // Rescaled: the largest watermark of the old subtasks given.
  auto other = MakeReduce({10, 0});
  other->process_watermark(40);
  harness::OperatorSnapshot other_snap = other->snapshot(1);
  auto merged = std::make_unique<ReduceHarness>(std::make_unique<ReduceOp>(
      KeyOfE{}, LocalPanes{10, 0}, LocalReduceCombiner<E, std::string, SumE>{SumE{}}, 1000));
  merged->initialize_state(std::vector<harness::OperatorSnapshot>{snap, other_snap});
  merged->open();
  EXPECT_EQ(merged->get_operator<ReduceOp>().last_watermark(), 40);
  // The input gate hands the lowest of the old subtasks' watermarks; the
  // operator's own never goes back.
  EXPECT_EQ(merged->get_emitted_watermarks(), std::vector<Timestamp>{20});
}

TEST(LocalAggregateOperator, IdlenessSendsThePartialsAndThenEveryRecordPassesAlone) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 1);
  h->process_watermark_status(WatermarkStatus::kIdle);
  ASSERT_EQ(h->get_output().size(), 2u);
  EXPECT_EQ(h->get_output()[0], harness::Emitted<E>(harness::stream_record(E("a", 1), 9)));
  EXPECT_EQ(h->get_output()[1].kind, harness::Emitted<E>::kStatus);
  h->clear_output();
  // Downstream's watermark may have passed ours on other channels meanwhile.
  h->process_watermark_status(WatermarkStatus::kActive);
  h->process_element(E("a", 2), 50);
  h->process_element(E("a", 3), 51);
  EXPECT_EQ(h->extract_output_records(),
            (std::vector<harness::StreamRecord<E>>{harness::stream_record(E("a", 2), 50),
                                                   harness::stream_record(E("a", 3), 51)}));
}

TEST(LocalAggregateOperator, TheEndOfInputSendsEveryPartialBeforeTheLastWatermark) {
  auto h = MakeReduce({10, 0});
  h->process_element(E("a", 1), 1);
  h->process_element(E("b", 1), 100);
  h->process_watermark(kMaxTimestamp);
  ASSERT_EQ(h->get_output().size(), 3u);
  EXPECT_EQ(h->get_output()[2], harness::Emitted<E>(harness::watermark(kMaxTimestamp)));
  EXPECT_EQ(h->get_operator<ReduceOp>().held_partials(), 0u);
}

TEST(LocalAggregateOperator, AnAggregateSendsKeyedAccumulatorsAndRecordsAlone) {
  using Combiner = LocalAggregateCombiner<E, std::string, CountSum>;
  using Carrier = Combiner::Out;
  using Op = LocalAggregateOperator<E, std::string, KeyOfE, Combiner>;
  harness::OneInputOperatorTestHarness<E, Carrier> h(
      std::make_unique<Op>(KeyOfE{}, LocalPanes{10, 0}, Combiner{CountSum{}}, 100));
  h.open();
  h.process_element(E("a", 1), 1);
  h.process_element(E("a", 2), 2);
  h.process_watermark(9);
  h.process_element(E("a", 5), 3);  // alone
  const auto out = h.extract_output_records();
  ASSERT_EQ(out.size(), 2u);
  ASSERT_TRUE(out[0].value.partial());
  EXPECT_EQ(std::get<1>(out[0].value.value),
            std::make_pair(std::string("a"), std::make_pair(2, 3)));
  EXPECT_EQ(out[0].timestamp, 9);
  ASSERT_FALSE(out[1].value.partial());
  EXPECT_EQ(std::get<0>(out[1].value.value), E("a", 5));
  EXPECT_EQ(out[1].timestamp, 3);
  // Downstream: a record is added, a partial merged.
  GlobalAggregate<CountSum, Carrier> global{CountSum{}};
  auto acc = global.add(out[0].value, global.create_accumulator());
  acc = global.add(out[1].value, acc);
  EXPECT_EQ(global.get_result(acc), "3/8");
  // The carrier crosses ranks with its codec.
  StateWriter w;
  Encode(w, out[0].value);
  const std::string bytes = w.Release();
  StateReader r(bytes);
  EXPECT_EQ(Decode<Carrier>(r).value, out[0].value.value);
}

// --- the API ---

using Timed = std::pair<E, Timestamp>;
// A watermark (the largest timestamp so far - 1) after every record.
struct EveryRecord : WatermarkGenerator<Timed> {
  Timestamp max = kMinTimestamp;
  void OnEvent(const Timed&, Timestamp ts, WatermarkOutput& out) override {
    if (ts <= max) return;
    max = ts;
    out.EmitWatermark(ts - 1);
  }
  void OnPeriodicEmit(WatermarkOutput&) override {}
};

DataStream<E> Events(StreamExecutionEnvironment& env, std::vector<Timed> data) {
  return env.from_collection(std::move(data))
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Timed>::for_generator([] {
            return std::make_unique<EveryRecord>();
          }).with_timestamp_assigner([](const std::pair<E, Timestamp>& p, Timestamp) {
            return p.second;
          }))
      .set_parallelism(1)
      .map([](const std::pair<E, Timestamp>& p) { return p.first; })
      .set_parallelism(1);
}

struct CountNoMerge {
  int create_accumulator() const { return 0; }
  int add(const E&, int acc) const { return acc + 1; }
  int get_result(int acc) const { return acc; }
};

TEST(LocalAggregationApi, RejectsWhatItDoesNotApplyTo) {
  StreamExecutionEnvironment env;
  auto keyed = Events(env, {{E("a", 1), 1}}).key_by(KeyOfE{});
  auto process = [](const std::string&, const TimeWindow&, const std::vector<E>&, WindowContext&,
                    Collector<int>&) {};
  EXPECT_THROW(
      keyed.window(TumblingEventTimeWindows::of(Duration(10))).local_aggregation().process(process),
      std::invalid_argument);
  EXPECT_THROW(keyed.window(EventTimeSessionWindows::with_gap(Duration(10)))
                   .local_aggregation()
                   .reduce(SumE{}),
               std::invalid_argument);
  EXPECT_THROW(keyed.window(TumblingEventTimeWindows::of(Duration(10)))
                   .trigger(CountTrigger::of(2))
                   .local_aggregation()
                   .reduce(SumE{}),
               std::invalid_argument);
  EXPECT_THROW(
      keyed.window(TumblingEventTimeWindows::of(Duration(10), Duration(0), WindowStagger::kRandom))
          .local_aggregation()
          .reduce(SumE{}),
      std::invalid_argument);
  EXPECT_THROW(keyed.window(TumblingEventTimeWindows::of(Duration(10))).local_aggregation(0),
               std::invalid_argument);
  // An aggregate without merge, and a window whose assigner reads the
  // record (dynamic session gaps): a clear error, and the job still
  // compiles without local aggregation.
  EXPECT_THROW(keyed.window(TumblingEventTimeWindows::of(Duration(10)))
                   .local_aggregation()
                   .aggregate(CountNoMerge{}),
               std::invalid_argument);
  auto gap = [](const E& e) { return int64_t{e.second}; };
  EXPECT_THROW(keyed.window(EventTimeSessionWindows::with_dynamic_gap(gap))
                   .local_aggregation()
                   .aggregate(CountSum{}),
               std::invalid_argument);
  keyed.window(TumblingEventTimeWindows::of(Duration(10))).aggregate(CountNoMerge{});
  // Kept through trigger() with the default trigger's type.
  auto w = keyed.window(TumblingEventTimeWindows::of(Duration(10))).local_aggregation();
  EXPECT_TRUE(w.trigger(EventTimeTrigger{}).local_aggregation_enabled());
  EXPECT_THROW(
      keyed.window(TumblingEventTimeWindows::of(Duration(10))).local_aggregation_if(true, 0),
      std::invalid_argument);
}

// The local path is compiled only into a stream that asked for it (its own
// type), and local_aggregation_if chooses at run time with one type.
TEST(LocalAggregationApi, IsATypeOfItsOwnWithARunTimeSwitch) {
  StreamExecutionEnvironment env;
  auto keyed = env.from_elements(E("k", 1)).key_by(KeyOfE{});
  auto plain = keyed.window(TumblingEventTimeWindows::of(Duration(10)));
  static_assert(!std::is_same_v<decltype(plain), decltype(plain.local_aggregation())>);
  static_assert(std::is_same_v<decltype(plain.local_aggregation()),
                               decltype(plain.local_aggregation_if(false))>);
  EXPECT_FALSE(plain.local_aggregation_enabled());
  EXPECT_TRUE(plain.local_aggregation_if(true).local_aggregation_enabled());
  EXPECT_FALSE(plain.local_aggregation_if(false).local_aggregation_enabled());
  // Off: process is allowed, and reduce adds no pre-aggregation node.
  auto off = plain.local_aggregation_if(false);
  off.reduce(SumE{}).name("Sum").add_sink([](E&&) {}, "Sink");
  off.process([](const std::string&, const TimeWindow&, const std::vector<E>&, WindowContext&,
                 Collector<E>&) {});
  EXPECT_THAT(env.explain(), Not(HasSubstr("LocalAggregate")));
  plain.local_aggregation_if(true).reduce(SumE{}).add_sink([](E&&) {}, "Sink2");
  EXPECT_THAT(env.explain(), HasSubstr("LocalAggregate(reduce)"));
}

TEST(LocalAggregationApi, ThePlanShowsThePreAggregationChainedBeforeTheShuffle) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.add_source<int64_t>(
         [] {
           return std::make_unique<CollectionSource<int64_t>>(
               std::make_shared<const std::vector<int64_t>>(std::vector<int64_t>{1}));
         },
         "A")
      .set_parallelism(2)
      .map([](const int64_t& v) { return E("k", static_cast<int>(v)); })
      .name("M")
      .key_by(KeyOfE{})
      .window(TumblingEventTimeWindows::of(Duration(10)))
      .local_aggregation()
      .reduce(SumE{})
      .name("Sum")
      .add_sink([](E&&) {}, "Sink");
  const std::string text = env.explain();
  EXPECT_THAT(text, HasSubstr("Chain 0 \"Source: A -> M -> LocalAggregate(reduce)\" p=2"));
  EXPECT_THAT(text, HasSubstr("LocalAggregate(reduce) (p=2) --HASH(key groups, maxP=128)--> Sum"));
}

// A job at window parallelism 2 with allowed lateness and a late side output:
// the same firings and late records with and without local aggregation.
struct JobOutput {
  std::vector<std::pair<std::string, Timestamp>> results;
  std::vector<std::pair<E, Timestamp>> late;
  int64_t combined = 0, passed = 0;
};

template <typename Build>
JobOutput RunJob(bool local, Build build) {
  StreamExecutionEnvironment env;
  env.set_parallelism(2);
  env.set_auto_watermark_interval(Duration(0));
  std::vector<std::pair<E, Timestamp>> data;
  for (int round = 0; round < 6; ++round) {
    for (int k = 0; k < 5; ++k) data.push_back({E("k" + std::to_string(k), round + k), round * 7});
    data.push_back({E("k1", 100 + round), round * 7 - 12});  // late, or within the lateness
  }
  OutputTag<E> late("late");
  auto windowed = Events(env, data)
                      .key_by(KeyOfE{})
                      .window(TumblingEventTimeWindows::of(Duration(10)))
                      .allowed_lateness(Duration(5))
                      .side_output_late_data(late)
                      .local_aggregation_if(local, 3);
  auto fired = build(windowed);
  auto results = fired.collect();
  auto late_results = fired.get_side_output(late).collect();
  JobResult r = env.execute("local aggregation");
  EXPECT_TRUE(r.status.ok()) << r.status;
  JobOutput o;
  for (const auto& item : results->items()) o.results.push_back({item.value, item.timestamp});
  for (const auto& item : late_results->items()) o.late.push_back({item.value, item.timestamp});
  std::sort(o.results.begin(), o.results.end());
  std::sort(o.late.begin(), o.late.end());
  o.combined = r.CounterTotal(kLocalAggregationRecordsCombined);
  o.passed = r.CounterTotal(kLocalAggregationRecordsPassed);
  return o;
}

template <typename Build>
void ExpectSameAsThePlainPath(Build build) {
  const JobOutput plain = RunJob(false, build);
  const JobOutput local = RunJob(true, build);
  EXPECT_EQ(local.results, plain.results);
  EXPECT_EQ(local.late, plain.late);
  EXPECT_FALSE(plain.late.empty());
  EXPECT_GT(local.combined, 0);
  EXPECT_GT(local.passed, 0);
  EXPECT_EQ(plain.combined, 0);
}

TEST(LocalAggregationJob, AggregateGivesThePlainPathsFiringsAndLateRecords) {
  ExpectSameAsThePlainPath([](auto windowed) { return windowed.aggregate(CountSum{}); });
}

TEST(LocalAggregationJob, ReduceWithAProcessFunctionGivesThePlainPathsFirings) {
  ExpectSameAsThePlainPath([](auto windowed) {
    return windowed.reduce(SumE{}, [](const std::string& key, const TimeWindow& w, const E& sum,
                                      WindowContext&, Collector<std::string>& out) {
      out.collect(key + "@" + std::to_string(w.start) + "=" + std::to_string(sum.second));
    });
  });
}

// A window reduce keyed by a `mutable` lambda compiles and runs: the set of
// partials, which calls the key selector as const, is not instantiated (it
// was, for every window reduce with a key the set takes).
TEST(LocalAggregationJob, AMutableKeySelectorCompiles) {
  // An int64 key (the length of the name), which would otherwise take the set.
  auto counting = [n = int64_t{0}](const E& e) mutable {
    ++n;
    return static_cast<int64_t>(e.first.size());
  };
  static_assert(
      !kPartialsAsSet<E, int64_t, decltype(counting), LocalReduceCombiner<E, int64_t, SumE>>);
  StreamExecutionEnvironment env;
  auto sums = Events(env, {{E("a", 1), 1}, {E("a", 2), 2}})
                  .key_by(counting)
                  .window(TumblingEventTimeWindows::of(Duration(10)))
                  .reduce(SumE{})
                  .collect();
  JobResult r = env.execute("mutable key selector");
  ASSERT_TRUE(r.ok()) << r.status;
  ASSERT_EQ(sums->items().size(), 1u);
  EXPECT_EQ(sums->items()[0].value, E("a", 3));
}

}  // namespace
}  // namespace tidemark
