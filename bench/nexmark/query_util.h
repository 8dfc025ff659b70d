// bench/nexmark/query_util.h: what the query files share (sinks, the
// projections of events).  Internal to bench/nexmark.
#ifndef TM_BENCH_NEXMARK_QUERY_UTIL_H_
#define TM_BENCH_NEXMARK_QUERY_UTIL_H_

#include <memory>
#include <string>
#include <utility>

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
