// bench/nexmark/query_util.h: what the query files share (sinks, the
// projections of events).  Internal to bench/nexmark.
#ifndef TM_BENCH_NEXMARK_QUERY_UTIL_H_
#define TM_BENCH_NEXMARK_QUERY_UTIL_H_

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "absl/container/flat_hash_map.h"
#include "bench/nexmark/queries.h"
#include "tidemark/tidemark.h"

namespace nexmark {

using tidemark::Changelog;
using tidemark::Collector;
using tidemark::DataStream;
using tidemark::RowKind;
using tidemark::Timestamp;

template <Row R>
class AppendWriter final : public tidemark::SinkWriter<R> {
 public:
  explicit AppendWriter(std::shared_ptr<ResultSet> rs)
      : rs_(std::move(rs)), acc_(rs_->keep_rows(), rs_->mode()) {}
  void write(const R& r, Timestamp) override { acc_.Add(r, 1); }
  void close() override { rs_->Merge(acc_); }

 private:
  std::shared_ptr<ResultSet> rs_;
  RowAccumulator acc_;
};

template <Row R>
class ChangelogWriter final : public tidemark::SinkWriter<Changelog<R>> {
 public:
  explicit ChangelogWriter(std::shared_ptr<ResultSet> rs)
      : rs_(std::move(rs)), acc_(rs_->keep_rows(), rs_->mode()) {}
  void write(const Changelog<R>& c, Timestamp) override {
    acc_.Add(c.row, c.kind == RowKind::kInsert ? 1 : -1);
  }
  void close() override { rs_->Merge(acc_); }

 private:
  std::shared_ptr<ResultSet> rs_;
  RowAccumulator acc_;
};

template <Row R>
void SinkAppend(const DataStream<R>& s, std::shared_ptr<ResultSet> rs) {
  s.sink_to(
      [rs]() -> std::unique_ptr<tidemark::SinkWriter<R>> {
        return std::make_unique<AppendWriter<R>>(rs);
      },
      "Sink");
}
template <Row R>
void SinkChangelog(const DataStream<Changelog<R>>& s, std::shared_ptr<ResultSet> rs) {
  s.sink_to(
      [rs]() -> std::unique_ptr<tidemark::SinkWriter<Changelog<R>>> {
        return std::make_unique<ChangelogWriter<R>>(rs);
      },
      "Sink");
}

inline DataStream<Bid> Bids(const DataStream<Event>& e) {
  return e
      .flat_map([](Event&& ev, Collector<Bid>& out) {
        if (Bid* b = std::get_if<Bid>(&ev.v)) out.collect(std::move(*b));
      })
      .name("Bids");
}
// fn(Bid&&, Collector<R>&) on each bid, in the flat_map that takes the bids
// out of the events: one operator chained to the source, as Flink's planner
// fuses a query's projections, filters and scalar functions into one Calc
// chained to the source (Bids(e).map(f) moved each bid once more and ran a
// second operator).
template <typename R, typename Fn>
DataStream<R> BidsFlatMap(const DataStream<Event>& e, Fn fn, const char* name = "Bids") {
  return e
      .flat_map([fn](Event&& ev, Collector<R>& out) mutable {
        if (Bid* b = std::get_if<Bid>(&ev.v)) fn(std::move(*b), out);
      })
      .name(name);
}
// The columns of each bid that a query reads (`project(Bid&&)` returns
// them), projected there, before any shuffle, as Flink plans it: its
// exchanges carry only those columns (for q12 the bidder, not the three
// strings of the whole bid).
template <typename Project>
auto BidColumns(const DataStream<Event>& e, Project project) {
  using R = std::invoke_result_t<Project&, Bid&&>;
  return BidsFlatMap<R>(
      e, [project](Bid&& b, Collector<R>& out) mutable { out.collect(project(std::move(b))); },
      "Bids (projected)");
}
// The numeric columns of a bid (q12, q15, q17).
struct BidNumbers {
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  Millis dateTime;
  NEXMARK_FIELDS(auction, bidder, price, dateTime);
  static BidNumbers Of(Bid&& b) { return BidNumbers{b.auction, b.bidder, b.price, b.dateTime}; }
};
// The same and the channel (q16).
struct BidChannelNumbers {
  Text channel;
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  Millis dateTime;
  NEXMARK_FIELDS(channel, auction, bidder, price, dateTime);
  static BidChannelNumbers Of(Bid&& b) {
    return BidChannelNumbers{std::move(b.channel), b.auction, b.bidder, b.price, b.dateTime};
  }
};
// The bidder alone (q12).
struct Bidder {
  int64_t bidder = 0;
  NEXMARK_FIELDS(bidder);
};

// The local phase of a two-phase group aggregate (Flink's
// MiniBatchLocalGroupAggFunction, which Nexmark's Flink runs use: mini-batch
// on, so the planner's AUTO agg-phase strategy splits the group aggregates of
// q15-q17 into a local and a global one).  Chained before the shuffle, it
// combines its subtask's records per group key into partials and sends the
// partials on when it holds `max_held` entries, before each watermark it
// forwards, before each checkpoint barrier, before it says its input is idle
// and at the end of the input, so it holds no state at a checkpoint and none
// while its input is idle.  (Flink's also sends them when its mini-batch's
// latency, 2 s in Nexmark's configuration, has passed in processing time;
// this one waits for the next watermark, which Nexmark's sources send every
// 200 ms, or for idleness.)  The global phase merges the partials into the
// group's row; any split of a group's records into partials gives the same
// row, since every aggregate merged is associative and commutative (counts,
// min, max, sum, and the union of distinct values, which a partial carries as
// a map, as Flink's local distinct aggregates do).  key(in) -> K;
// add(in, partial, fresh) folds a record in and returns the entries it added
// (void: a group is one entry).
template <typename In, typename K, typename P, typename KeyFn, typename AddFn>
class LocalGroupCombine final : public tidemark::OneInputOperator<In, P> {
 public:
  LocalGroupCombine(KeyFn key, AddFn add, size_t max_held)
      : key_(std::move(key)), add_(std::move(add)), max_held_(max_held) {}
  void ProcessElement(In&& in, Timestamp ts) override {
    auto [it, fresh] = groups_.try_emplace(key_(in));
    if constexpr (std::is_void_v<std::invoke_result_t<AddFn&, const In&, P&, bool>>) {
      add_(in, it->second.partial, fresh);
      held_ += fresh ? 1 : 0;
    } else {
      held_ += add_(in, it->second.partial, fresh);
    }
    it->second.ts = std::max(fresh ? ts : it->second.ts, ts);
    if (held_ >= max_held_) Flush();
  }
  void ProcessWatermark(Timestamp watermark) override {
    Flush();
    tidemark::OneInputOperator<In, P>::ProcessWatermark(watermark);
  }
  // An idle input sends no watermark for a while: its partials go now, so
  // that the groups downstream do not wait for it to become active again.
  void ProcessStatus(tidemark::WatermarkStatus status) override {
    if (status == tidemark::WatermarkStatus::kIdle) Flush();
    tidemark::OneInputOperator<In, P>::ProcessStatus(status);
  }
  void PrepareSnapshotPreBarrier(int64_t) override { Flush(); }
  void Finish() override { Flush(); }

 private:
  struct Entry {
    P partial;
    Timestamp ts = 0;
  };
  void Flush() {
    for (auto& [k, e] : groups_) this->output().Collect(std::move(e.partial), e.ts);
    // clear() frees a large table; the next round holds about as many
    // groups, so the table is made at that size at once instead of growing
    // to it step by step (each step rehashing every group).
    const size_t n = groups_.size();
    groups_.clear();
    groups_.reserve(n);
    held_ = 0;
  }
  KeyFn key_;
  AddFn add_;
  size_t max_held_;
  size_t held_ = 0;
  absl::flat_hash_map<K, Entry> groups_;
};
template <typename In, typename P, typename KeyFn, typename AddFn>
DataStream<P> LocalCombine(const DataStream<In>& s, KeyFn key, AddFn add, size_t max_held = 4096) {
  using K = std::invoke_result_t<KeyFn&, const In&>;
  return s.template transform<P>(
      "LocalGroupAggregate",
      [key, add, max_held]() -> std::unique_ptr<tidemark::OneInputOperator<In, P>> {
        return std::make_unique<LocalGroupCombine<In, K, P, KeyFn, AddFn>>(key, add, max_held);
      });
}

// SPLIT_INDEX(s, sep, i) for i = first .. first + count - 1 in one pass
// (q22): out[k] is piece first + k (0-based), "" where s has fewer pieces
// (Flink's SQL gives NULL there; the query's rows carry "").  It finds the
// separators 16 bytes at a time (SSE2) up to the last one needed: q22's
// memchr per piece took a fifth of its time, and a byte loop, whose branch
// on each separator the CPU cannot predict, as much.
inline void SplitPieces(std::string_view s, char sep, int first, int count, std::string_view* out) {
  for (int k = 0; k < count; ++k) out[k] = std::string_view();
  const char* const p = s.data();
  const size_t n = s.size();
  const int last = first + count - 1;
  size_t from = 0;
  int piece = 0;
  // The separator at `pos` ends piece `piece`; true once the last is out.
  auto ends_piece = [&](size_t pos) {
    if (piece >= first) out[piece - first] = std::string_view(p + from, pos - from);
    from = pos + 1;
    return ++piece > last;
  };
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i seps = _mm_set1_epi8(sep);
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    for (unsigned m = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(bytes, seps))); m != 0;
         m &= m - 1)
      if (ends_piece(i + static_cast<size_t>(__builtin_ctz(m)))) return;
  }
#endif
  for (; i < n; ++i)
    if (p[i] == sep && ends_piece(i)) return;
  if (piece >= first) out[piece - first] = std::string_view(p + from, n - from);
}

// `piece` (a view into `whole`) as a Text of its own: a view as well when
// `whole` is one (of the generator's static pools), a copy when `whole` owns
// its characters (restored from a checkpoint, decoded from another rank),
// which go away with it.
inline Text PieceOf(const Text& whole, std::string_view piece) {
  return whole.owned() ? Text(piece) : Text::View(piece);
}

inline DataStream<Auction> Auctions(const DataStream<Event>& e) {
  return e
      .flat_map([](Event&& ev, Collector<Auction>& out) {
        if (Auction* a = std::get_if<Auction>(&ev.v)) out.collect(std::move(*a));
      })
      .name("Auctions");
}
inline DataStream<Person> Persons(const DataStream<Event>& e) {
  return e
      .flat_map([](Event&& ev, Collector<Person>& out) {
        if (Person* p = std::get_if<Person>(&ev.v)) out.collect(std::move(*p));
      })
      .name("Persons");
}

// Bids(), Auctions(), Persons() and SplitEvents take the event by rvalue: the
// operator moves it in, and its strings move on instead of being copied.

// Two kinds of events from one operator: MainT on its main output, SideT on a
// side output, so that the source's records have one consumer (a chained
// operator with two consumers copies each record, strings and all, for each).
template <typename MainT, typename SideT>
std::pair<DataStream<MainT>, DataStream<SideT>> SplitEvents(const DataStream<Event>& e) {
  const tidemark::OutputTag<SideT> tag("split");
  auto main = e.process([tag](Event&& ev, tidemark::ProcessContext& ctx, Collector<MainT>& out) {
                 if (MainT* m = std::get_if<MainT>(&ev.v)) {
                   out.collect(std::move(*m));
                 } else if (SideT* s = std::get_if<SideT>(&ev.v)) {
                   ctx.output(tag, std::move(*s));
                 }
               }).name("Split events");
  return {main, main.get_side_output(tag)};
}

// SplitEvents with each kind projected to the columns the query reads
// (main(MainT&&), side(SideT&&)) in the same operator, before any shuffle, as
// Flink's planner fuses the projection into the Calc chained to the source
// (a map after the split ran a second operator and moved each event's whole
// record once more).
template <typename MainT, typename SideT, typename PMain, typename PSide>
auto SplitEventsProjected(const DataStream<Event>& e, PMain main_cols, PSide side_cols) {
  using M = std::invoke_result_t<const PMain&, MainT&&>;
  using S = std::invoke_result_t<const PSide&, SideT&&>;
  const tidemark::OutputTag<S> tag("split");
  auto main = e.process([tag, main_cols, side_cols](Event&& ev, tidemark::ProcessContext& ctx,
                                                    Collector<M>& out) {
                 if (MainT* m = std::get_if<MainT>(&ev.v)) {
                   out.collect(main_cols(std::move(*m)));
                 } else if (SideT* s = std::get_if<SideT>(&ev.v)) {
                   ctx.output(tag, side_cols(std::move(*s)));
                 }
               }).name("Split events (projected)");
  return std::pair<DataStream<M>, DataStream<S>>{main, main.get_side_output(tag)};
}

// Loops over the generator's events (the references).
template <typename F>
void ForEachEvent(const Generator& gen, F f) {
  const int64_t n = gen.config().events;
  for (int64_t i = 0; i < n; ++i) f(gen.Make(i));
}

// The day of an event time (ms, UTC) as days since the epoch: q15 and q17
// group by DATE_FORMAT(dateTime, 'yyyy-MM-dd'), which maps days one to one,
// so they key by this number and format a group's day once (DayString).
inline int64_t DayOf(int64_t ms) {
  return ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
}
inline std::string DayString(int64_t day) { return FormatDate(day * 86400000); }

// Flink's price bands of q15-q17.
inline int PriceRank(int64_t price) { return price < 10000 ? 1 : price < 1000000 ? 2 : 3; }

}  // namespace nexmark

#endif  // TM_BENCH_NEXMARK_QUERY_UTIL_H_
