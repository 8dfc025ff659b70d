// operators/top_n.h
//
// Two keyed operators that Flink's SQL plans and the DataStream API lacks,
// behind KeyedStream::top_n and KeyedStream::over_rows (api/keyed_process.h):
//
// Top-N (Flink's Rank operator, ROW_NUMBER() OVER (PARTITION BY key ORDER BY
// ...) WHERE rownum <= n, without the rank number in its output; with n = 1
// and an order on time it is Flink's deduplication, keep first or keep last
// row): per key, the n best records under `less` (less(a, b): a ranks before
// b), as a changelog.  A record that enters the top n is emitted as
// Changelog{kInsert, record}, after the record it pushes out as {kDelete,
// record} (delete first, as Flink's AppendOnlyTopNFunction and its
// deduplication's update-before / update-after: a sink that applies the
// changes by key never holds two rows of one key).  A record equal in rank
// to one already kept ranks after it (first come, first kept), so for a
// deterministic result `less` should be a total order.  With n = 1 that
// differs from Flink's keep-last-row deduplication in one case: a row with
// the same time as the kept one replaces it in Flink (its time is compared
// with <=) and not here, unless `less` ranks it first by something else.
// Applying the changelog in order (insert adds one row, delete removes one
// equal row) gives the current top n of every key.
//
// With the rank number in the output (top_n(n, less, &T::rank): Flink's Rank
// with outputRankNumber, ROW_NUMBER() as a column), each emitted row carries
// its rank, 1 to n, in that field, and a record that enters at rank r moves
// every kept row from rank r on down one: each of them is retracted at its
// old rank and inserted again at its new one (the one pushed past n only
// retracted).  This is Flink's retract mode (an update-before and an
// update-after per rank whose row changes); to a sink that takes upserts by
// (key, rank), as nexmark-flink's blackhole sink does, Flink sends only the
// update-afters, about half as many rows.  The rows are the list
// state "top-n rows", in rank order; with n = 1 that state is instead a
// value state holding an optional row, as Flink's deduplication keeps one
// row per key (one lookup per record, no list).  Its bytes are those of a
// list of at most one row (a count of 0 or 1 is the optional's tag), so
// checkpoints of either layout restore into the other
// (TopN.TopOneStateHasTheBytesOfAOneRowList).
//
// OVER ... ROWS BETWEEN `preceding` PRECEDING AND CURRENT ROW ordered by event
// time (Flink's RowTimeRowsBoundedPrecedingFunction): records of a key wait
// until the watermark passes their timestamp and are then taken in timestamp
// order (equal timestamps by `tie`, else in arrival order); each is emitted
// with the aggregate of itself and the up to `preceding` records before it,
// as std::pair<T, Result>.  The aggregate is an AggregateFunction
// (create_accumulator, add(const T&, Acc) -> Acc, get_result(const Acc&)),
// recomputed over the rows in the frame (no retraction needed).  A record
// not later than its key's last emitted timestamp (0 before the first, as
// Flink's lastTriggeringTs starts) is late: it is dropped and counted in the
// subtask counter "numLateRecordsDropped", as Flink drops it.  A record at
// or below the watermark but later than that waits for the next watermark,
// as in Flink.  `preceding` may be SIZE_MAX (every earlier row of the key:
// UNBOUNDED PRECEDING).
//
// Both keep their rows in keyed state (checkpointed when T has a
// tidemark::StateCodec) and are tested in tests/nexmark_test.cc.
#ifndef TM_OPERATORS_TOP_N_H_
#define TM_OPERATORS_TOP_N_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/operators/keyed_process.h"

namespace tidemark {

// The kind of a changelog row (Flink's RowKind, retract mode: an update is a
// delete of the old row and an insert of the new one).
enum class RowKind : uint8_t { kInsert, kDelete };

template <typename T>
struct Changelog {
  RowKind kind = RowKind::kInsert;
  T row;
  bool operator==(const Changelog&) const = default;
};

template <typename T>
requires requires(std::ostream& os, const T& t) { os << t; }
std::ostream& operator<<(std::ostream& os, const Changelog<T>& c) {
  return os << (c.kind == RowKind::kInsert ? "+I" : "-D") << "(" << c.row << ")";
}

template <typename T>
struct StateCodec<Changelog<T>> {
  static void Encode(internal::StateWriter& w, const Changelog<T>& c) {
    internal::Encode(w, static_cast<uint8_t>(c.kind));
    internal::Encode(w, c.row);
  }
  static Changelog<T> Decode(internal::StateReader& r) {
    Changelog<T> c;
    c.kind = static_cast<RowKind>(internal::Decode<uint8_t>(r));
    c.row = internal::Decode<T>(r);
    return c;
  }
};

namespace internal {

template <typename K, typename T, typename Less>
class TopNFunction {
 public:
  using OutputType = Changelog<T>;
  TopNFunction(size_t n, Less less) : n_(n), less_(std::move(less)) {
    if (n_ == 0) throw std::invalid_argument("top_n: n must be at least 1");
  }
  // The record is moved in (the operator owns it): one copy goes into the
  // key's list, which changes in place, the record itself on as the insert.
  void process_element(T&& v, KeyedProcessContext<K>& ctx, Collector<Changelog<T>>& out) {
    if (n_ == 1) {  // deduplication: the key's one row, changed in place
      std::optional<T>& cur =
          ctx.template get_state<std::optional<T>>("top-n rows").mutable_value();
      if (cur && !less_(v, *cur)) return;
      std::optional<T> pushed = std::move(cur);
      cur.emplace(v);
      if (pushed) out.collect(Changelog<T>{RowKind::kDelete, std::move(*pushed)});
      out.collect(Changelog<T>{RowKind::kInsert, std::move(v)});
      return;
    }
    auto state = ctx.template get_list_state<T>("top-n rows");
    const std::vector<T>& cur = state.get();
    // Not better than the worst of a full top n: nothing changes.
    if (cur.size() >= n_ && !less_(v, cur.back())) return;
    std::vector<T>& rows = state.mutable_list();
    auto pos = std::upper_bound(rows.begin(), rows.end(), v,
                                [this](const T& a, const T& b) { return less_(a, b); });
    rows.insert(pos, v);
    std::optional<T> pushed_out;
    if (rows.size() > n_) {
      pushed_out.emplace(std::move(rows.back()));
      rows.pop_back();
    }
    if (pushed_out) out.collect(Changelog<T>{RowKind::kDelete, std::move(*pushed_out)});
    out.collect(Changelog<T>{RowKind::kInsert, std::move(v)});
  }

 private:
  size_t n_;
  Less less_;
};

// The top n with the rank number in each row's `rank` field (see the file
// comment): the kept rows are the list state "top-n rows", in rank order.
template <typename K, typename T, typename Less, typename R>
class TopNRankedFunction {
 public:
  using OutputType = Changelog<T>;
  TopNRankedFunction(size_t n, Less less, R T::*rank) : n_(n), less_(std::move(less)), rank_(rank) {
    if (n_ == 0) throw std::invalid_argument("top_n: n must be at least 1");
  }
  void process_element(T&& v, KeyedProcessContext<K>& ctx, Collector<Changelog<T>>& out) {
    auto state = ctx.template get_list_state<T>("top-n rows");
    const std::vector<T>& cur = state.get();
    if (cur.size() >= n_ && !less_(v, cur.back())) return;
    std::vector<T>& rows = state.mutable_list();
    const size_t at = static_cast<size_t>(
        std::upper_bound(rows.begin(), rows.end(), v,
                         [this](const T& a, const T& b) { return less_(a, b); }) -
        rows.begin());
    // The rows from rank at + 1 on, retracted at their old ranks.
    for (size_t j = at; j < rows.size(); ++j) out.collect(Ranked(RowKind::kDelete, rows[j], j));
    rows.insert(rows.begin() + static_cast<std::ptrdiff_t>(at), v);
    if (rows.size() > n_) rows.pop_back();
    v.*rank_ = static_cast<R>(at + 1);
    out.collect(Changelog<T>{RowKind::kInsert, std::move(v)});
    for (size_t j = at + 1; j < rows.size(); ++j) out.collect(Ranked(RowKind::kInsert, rows[j], j));
  }

 private:
  // `row` at rank j + 1.
  Changelog<T> Ranked(RowKind kind, const T& row, size_t j) const {
    Changelog<T> c{kind, row};
    c.row.*rank_ = static_cast<R>(j + 1);
    return c;
  }

  size_t n_;
  Less less_;
  R T::*rank_;
};

// Orders records of one timestamp in arrival order.
struct ArrivalOrder {
  template <typename T>
  bool operator()(const T&, const T&) const {
    return false;
  }
};

template <typename K, typename T, typename Agg, typename Tie>
class OverRowsFunction {
 public:
  using Result = std::decay_t<decltype(std::declval<Agg&>().get_result(
      std::declval<Agg&>().create_accumulator()))>;
  using OutputType = std::pair<T, Result>;
  OverRowsFunction(size_t preceding, Agg agg, Tie tie)
      : preceding_(preceding), agg_(std::move(agg)), tie_(std::move(tie)) {}

  void open(const RuntimeContext& ctx) { late_.emplace(ctx.counter("numLateRecordsDropped")); }

  void process_element(const T& v, KeyedProcessContext<K>& ctx, Collector<OutputType>& out) {
    (void)out;
    const Timestamp ts = ctx.timestamp();
    if (ts == kNoTimestamp)
      throw std::invalid_argument("over_rows: a record without a timestamp (assign them first)");
    // Flink's RowTimeRowsBoundedPrecedingFunction: late means not after the
    // key's last triggering time (per key, from 0), not the watermark.
    if (ts <= ctx.template get_state<Timestamp>("over last triggering").value().value_or(0)) {
      if (late_) late_->inc();
      return;
    }
    auto pending = ctx.template get_map_state<Timestamp, std::vector<T>>("over pending");
    std::vector<T> at = pending.get(ts).value_or(std::vector<T>{});
    at.push_back(v);
    pending.put(ts, std::move(at));
    ctx.timer_service().register_event_time_timer(ts);
  }

  void on_timer(Timestamp ts, KeyedProcessContext<K>& ctx, Collector<OutputType>& out) {
    auto pending = ctx.template get_map_state<Timestamp, std::vector<T>>("over pending");
    std::optional<std::vector<T>> rows = pending.get(ts);
    if (!rows) return;
    pending.remove(ts);
    ctx.template get_state<Timestamp>("over last triggering").update(ts);
    std::stable_sort(rows->begin(), rows->end(),
                     [this](const T& a, const T& b) { return tie_(a, b); });
    auto frame_state = ctx.template get_list_state<T>("over frame");
    std::vector<T> frame = frame_state.get();
    for (T& r : *rows) {
      frame.push_back(std::move(r));
      if (frame.size() - 1 > preceding_) frame.erase(frame.begin());  // no + 1: SIZE_MAX
      auto acc = agg_.create_accumulator();
      for (const T& f : frame) acc = agg_.add(f, std::move(acc));
      out.collect(OutputType{frame.back(), agg_.get_result(acc)});
    }
    frame_state.update(std::move(frame));
  }

 private:
  size_t preceding_;
  Agg agg_;
  Tie tie_;
  std::optional<UserCounter> late_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_TOP_N_H_
