// bench/nexmark/queries_b.cc: q12-q22 and their references (queries.h).
#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "bench/nexmark/query_util.h"

namespace nexmark {

using namespace std::chrono_literals;
using tidemark::KeyedProcessContext;
using tidemark::TimeWindow;

inline namespace queries_b {

struct CountAgg {
  template <typename T>
  int64_t add(const T&, int64_t acc) const {
    return acc + 1;
  }
  int64_t create_accumulator() const { return 0; }
  int64_t get_result(int64_t acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};

// --- q12 ---------------------------------------------------------------------
// Bids per bidder per 10 s of processing time.  Its windows depend on the
// machine, so its digest is the number of bids per bidder, summed over them.
struct Q12 {
  int64_t bidder = 0, bid_count = 0;
  Millis starttime, endtime;
  NEXMARK_FIELDS(bidder, bid_count, starttime, endtime);
  uint64_t DigestHash() const { return Mix(static_cast<uint64_t>(bidder)); }
  int64_t DigestWeight() const { return bid_count; }
};

// Flink's ProcessingTimeTrigger, and at the end of the input (the watermark
// MAX that a bounded source ends with) the windows still open fire too, so
// that the last bids are counted (an unbounded Nexmark source never ends).
struct ProcessingTimeOrEndTrigger {
  template <typename T, typename W>
  tidemark::TriggerResult on_element(const T&, Timestamp, const W& w,
                                     tidemark::TriggerContext& ctx) const {
    ctx.register_processing_time_timer(w.max_timestamp());
    ctx.register_event_time_timer(tidemark::kMaxTimestamp);
    return tidemark::TriggerResult::kContinue;
  }
  template <typename W>
  tidemark::TriggerResult on_event_time(Timestamp, const W&, tidemark::TriggerContext&) const {
    return tidemark::TriggerResult::kFireAndPurge;
  }
  template <typename W>
  tidemark::TriggerResult on_processing_time(Timestamp, const W&, tidemark::TriggerContext&) const {
    return tidemark::TriggerResult::kFire;
  }
  template <typename W>
  void clear(const W& w, tidemark::TriggerContext& ctx) const {
    ctx.delete_processing_time_timer(w.max_timestamp());
    ctx.delete_event_time_timer(tidemark::kMaxTimestamp);
  }
  bool can_merge() const { return false; }
};

// --- q13 ---------------------------------------------------------------------
inline constexpr int64_t kSideInputKeys = 10000;
// nexmark-flink's side input (SideInputGenerator.prepareSideInput, run by
// side_input_gen.sh --num 10000) is the lines "i,i": each key's value is the
// key as text.
std::string SideValue(int64_t key) { return std::to_string(key); }
struct SideRow {
  int64_t key = 0;
  std::string value;
  NEXMARK_FIELDS(key, value);
};
struct Q13 {
  int64_t auction = 0, bidder = 0, price = 0;
  Millis dateTime;
  std::string value;
  NEXMARK_FIELDS(auction, bidder, price, dateTime, value);
};
// Bids joined with the side table on auction % 10000, as Flink plans q13: a
// lookup join (`JOIN side_input FOR SYSTEM_TIME AS OF B.p_time`) chained to
// the source, whose lookup function loads the whole side table into a cache
// when it opens (Flink 1.13's CSV table source, whose lookup function reads
// its whole file into a map in open(), as Nexmark's side_input table is).  No
// shuffle: each source subtask joins its own bids.  A bid whose key the table
// lacks joins nothing (an inner join).
struct SideLookup {
  std::shared_ptr<const std::vector<SideRow>> table;
  std::unordered_map<int64_t, std::string> cache;
  void open(const tidemark::RuntimeContext&) {
    cache.clear();
    cache.reserve(table->size());
    for (const SideRow& r : *table) cache.insert_or_assign(r.key, r.value);
  }
  void operator()(const Bid& b, Collector<Q13>& out) const {
    auto it = cache.find(b.auction % kSideInputKeys);
    if (it != cache.end()) out.collect(Q13{b.auction, b.bidder, b.price, b.dateTime, it->second});
  }
};

// q13's join written with broadcast state instead ("q13-broadcast", not in
// the suite: it shuffles the bids by auction, which Flink's plan does not; kept
// so that broadcast state runs across ranks in ctest).  Bids that come before
// their side row wait in keyed state until the side input has ended (its end
// moves the operator's watermark past their time).
const tidemark::MapStateDescriptor<int64_t, std::string> kSide("side input");
struct SideJoin : tidemark::KeyedBroadcastProcessFunction<int64_t, Bid, SideRow, Q13> {
  void process_element(const Bid& b, ReadOnlyContext& ctx, Collector<Q13>& out) override {
    auto side = ctx.get_broadcast_state(kSide);
    if (auto v = side.get(b.auction % kSideInputKeys)) {
      out.collect(Q13{b.auction, b.bidder, b.price, b.dateTime, *v});
      return;
    }
    ctx.get_list_state<Bid>("waiting").add(b);
    ctx.timer_service().register_event_time_timer(b.dateTime.ms);
  }
  void process_broadcast_element(const SideRow& r, Context& ctx, Collector<Q13>&) override {
    ctx.get_broadcast_state(kSide).put(r.key, r.value);
  }
  void on_timer(Timestamp, ReadOnlyContext& ctx, Collector<Q13>& out) override {
    auto waiting = ctx.get_list_state<Bid>("waiting");
    auto side = ctx.get_broadcast_state(kSide);
    for (const Bid& b : waiting.get()) {
      auto v = side.get(b.auction % kSideInputKeys);
      if (v) out.collect(Q13{b.auction, b.bidder, b.price, b.dateTime, *v});
    }
    waiting.clear();
  }
};

std::vector<SideRow> SideRows() {
  std::vector<SideRow> rows;
  for (int64_t k = 0; k < kSideInputKeys; ++k) rows.push_back(SideRow{k, SideValue(k)});
  return rows;
}
// --- q14 ---------------------------------------------------------------------
struct Q14 {
  int64_t auction = 0, bidder = 0;
  Decimal3 price;  // 0.908 * price: DECIMAL(23, 3), exact
  std::string bidTimeType;
  Millis dateTime;
  Text extra;
  int64_t c_counts = 0;
  NEXMARK_FIELDS(auction, bidder, price, bidTimeType, dateTime, extra, c_counts);
};
std::optional<Q14> ToQ14(const Bid& b) {
  const Decimal3 price{908 * b.price};  // exact, as Flink's DECIMAL
  if (!(price.thousandths > 1'000'000'000 && price.thousandths < 50'000'000'000))
    return std::nullopt;
  const int64_t day_ms = ((b.dateTime.ms % 86400000) + 86400000) % 86400000;
  const int hour = static_cast<int>(day_ms / 3600000);
  const char* type = hour >= 8 && hour <= 18   ? "dayTime"
                     : hour <= 6 || hour >= 20 ? "nightTime"
                                               : "otherTime";
  return Q14{b.auction,
             b.bidder,
             price,
             type,
             b.dateTime,
             b.extra,
             static_cast<int64_t>(std::count(b.extra.begin(), b.extra.end(), 'c'))};
}

// --- q15, q16, q17: unwindowed group aggregates (updating) ---------------------
// The distinct counts of q15 / q16: per bidder (auction), the bands it was
// seen in, bit 0 any, bits 1-3 rank1-3.
struct BandCounts {
  int64_t total = 0, rank1 = 0, rank2 = 0, rank3 = 0;
  NEXMARK_FIELDS(total, rank1, rank2, rank3);
  void Add(int rank) {
    ++total;
    (rank == 1 ? rank1 : rank == 2 ? rank2 : rank3)++;
  }
  void Merge(const BandCounts& o) {
    total += o.total;
    rank1 += o.rank1;
    rank2 += o.rank2;
    rank3 += o.rank3;
  }
};
// Counts `id` in its bands the first time it is seen in each.
inline void AddDistinct(uint8_t& seen, int rank, BandCounts& c) {
  if (!(seen & 1)) ++c.total;
  const uint8_t bit = static_cast<uint8_t>(1u << rank);
  if (!(seen & bit)) (rank == 1 ? c.rank1 : rank == 2 ? c.rank2 : c.rank3)++;
  seen |= static_cast<uint8_t>(1u | bit);
}

struct Q15 {
  std::string day;
  BandCounts bids, bidders, auctions;
  NEXMARK_FIELDS(day, bids, bidders, auctions);
};
struct Q16 {
  std::string channel;
  std::string day;
  std::string minute;  // max(DATE_FORMAT(dateTime, 'HH:mm'))
  BandCounts bids, bidders, auctions;
  NEXMARK_FIELDS(channel, day, minute, bids, bidders, auctions);
};
// The partials of q15 and q16 (the local phase): the counts, and per bidder
// and auction the bands it was seen in (AddDistinct's bits), which the
// global phase merges into its distinct counts.
using DistinctBits = absl::flat_hash_map<int64_t, uint8_t>;
struct Q15Partial {
  int64_t day = 0;
  BandCounts bids;
  DistinctBits bidders, auctions;
  NEXMARK_FIELDS(day, bids, bidders, auctions);
};
struct Q16Partial {
  std::string channel;
  int64_t day = 0;      // DayOf(dateTime)
  int64_t last_ms = 0;  // the latest dateTime: its 'HH:mm' is the group's max (one day)
  BandCounts bids;
  DistinctBits bidders, auctions;
  NEXMARK_FIELDS(channel, day, last_ms, bids, bidders, auctions);
};
// A bid into a partial's counts and distinct bits; the entries it added.
inline size_t AddToPartial(int64_t bidder, int64_t auction, int rank, BandCounts& bids,
                           DistinctBits& bidders, DistinctBits& auctions) {
  bids.Add(rank);
  const uint8_t bits = static_cast<uint8_t>(1u | (1u << rank));
  auto [b, new_bidder] = bidders.try_emplace(bidder, 0);
  b->second |= bits;
  auto [a, new_auction] = auctions.try_emplace(auction, 0);
  a->second |= bits;
  return (new_bidder ? 1 : 0) + (new_auction ? 1 : 0);
}
struct Q17 {
  int64_t auction = 0;
  std::string day;
  BandCounts bids;
  int64_t min_price = 0, max_price = 0, avg_price = 0, sum_price = 0;
  NEXMARK_FIELDS(auction, day, bids, min_price, max_price, avg_price, sum_price);
};
// q17's partial aggregate of a group's bids (the local phase).
struct Q17Partial {
  int64_t auction = 0, day = 0;
  BandCounts bids;
  int64_t min_price = 0, max_price = 0, sum_price = 0;
  NEXMARK_FIELDS(auction, day, bids, min_price, max_price, sum_price);
};

// A group's row, whether a change of it waits for the next watermark (a
// timer at the watermark + 1 is registered for it) and whether a row of it
// was emitted.
template <typename R>
struct GroupRow {
  R row;
  bool pending = false;
  bool emitted = false;
  NEXMARK_FIELDS(row, pending, emitted);
};

// Keeps the group's row up to date per input and emits its change (delete
// of the last emitted row, insert of the new one) once per watermark advance
// (an event-time mini-batch, as Flink's runs use mini-batches): the final
// table is the same as with one change per record.  The first change of a
// group after it was emitted registers the timer and keeps the row as it was
// emitted (state "emitted", held only while the change waits, as Flink's
// mini-batch derives the retraction from the accumulator before the batch);
// later ones see `pending` (the timer at the old watermark + 1 has not
// fired, so the watermark has not advanced since) and register none.  The
// row changes in place (ValueState::mutable_value): one lookup per record.
template <typename K, typename Row, typename Update, typename In>
struct GroupAggregate : tidemark::KeyedProcessFunction<K, In, Changelog<Row>> {
  using Ctx = KeyedProcessContext<K>;
  explicit GroupAggregate(Update u) : update(std::move(u)) {}
  void process_element(const In& b, Ctx& ctx, Collector<Changelog<Row>>& out) override {
    (void)out;
    GroupRow<Row>& g = ctx.template get_state<GroupRow<Row>>("row").mutable_value();
    if (!g.pending) {
      g.pending = true;
      if (g.emitted) ctx.template get_state<Row>("emitted").update(g.row);
      ctx.timer_service().register_event_time_timer(ctx.current_watermark() + 1);
    }
    update(b, g.row, ctx);
  }
  void on_timer(Timestamp, Ctx& ctx, Collector<Changelog<Row>>& out) override {
    GroupRow<Row>& g = ctx.template get_state<GroupRow<Row>>("row").mutable_value();
    if (!g.pending) return;  // (a timer is only registered for a pending row)
    g.pending = false;
    if (g.emitted) {
      auto before = ctx.template get_state<Row>("emitted");
      std::optional<Row> last = before.value();
      before.clear();
      if (last && *last == g.row) return;
      if (last) out.collect({RowKind::kDelete, std::move(*last)});
    }
    g.emitted = true;
    out.collect({RowKind::kInsert, g.row});
  }
  Update update;
};
// In: what it aggregates, a local phase's partials (LocalCombine).
template <typename K, typename Row, typename In, typename Update>
GroupAggregate<K, Row, Update, In> MakeGroupAggregate(Update u) {
  return GroupAggregate<K, Row, Update, In>(std::move(u));
}

// A partial's distinct bits into the group's: the bands each id is new in.
template <typename Ctx>
void MergeDistinct(Ctx& ctx, const char* name, const DistinctBits& ids, BandCounts& c) {
  auto seen = ctx.template get_map_state<int64_t, uint8_t>(name);
  for (const auto& [id, bits] : ids) {
    const uint8_t s = seen.get(id).value_or(0);
    const uint8_t fresh = static_cast<uint8_t>(bits & ~s);
    if (fresh == 0) continue;
    if (fresh & 1) ++c.total;
    if (fresh & 2) ++c.rank1;
    if (fresh & 4) ++c.rank2;
    if (fresh & 8) ++c.rank3;
    seen.put(id, static_cast<uint8_t>(s | bits));
  }
}

// --- q18, q19 ---------------------------------------------------------------
// A total order on bids, after the query's own ORDER BY (for ties).
bool BidTieBreak(const Bid& a, const Bid& b) {
  return std::tie(a.bidder, a.auction, a.price, a.channel, a.url, a.extra) <
         std::tie(b.bidder, b.auction, b.price, b.channel, b.url, b.extra);
}
// q18's rows: a bid.  ROW_NUMBER() OVER (... ORDER BY dateTime DESC) <= 1 is
// Flink's row-time deduplication keeping the last row, which replaces the
// kept row when its time is <= the new one's
// (DeduplicateFunctionHelper.shouldKeepCurrentRow): of bids with the same
// time the one that arrives last wins.  Arrival order across source subtasks
// is not deterministic (in Flink neither), so the digest that checks the
// final table takes each row's key and time, which are; the rows themselves
// (--results, and the tests at rates without equal times) are whole.
struct Q18 : Bid {
  uint64_t DigestHash() const {
    return Mix(Mix(static_cast<uint64_t>(bidder)) * 31 + static_cast<uint64_t>(auction)) ^
           static_cast<uint64_t>(dateTime.ms);
  }
};
Q18 ToQ18(Bid&& b) { return Q18{std::move(b)}; }
// As Flink keeps the last row: a row at least as late as the kept one
// replaces it (top_n(1) asks only less(new, kept)).
bool AtLeastAsLate(const Q18& a, const Q18& b) { return a.dateTime.ms >= b.dateTime.ms; }
// q19: ORDER BY price DESC.
bool DearerFirst(const Bid& a, const Bid& b) {
  if (a.price != b.price) return a.price > b.price;
  if (a.dateTime.ms != b.dateTime.ms) return a.dateTime.ms < b.dateTime.ms;
  return BidTieBreak(a, b);
}
// q19's rows: SELECT *, ROW_NUMBER() OVER (...) AS rank_number.
struct Q19 {
  int64_t auction = 0, bidder = 0, price = 0;
  Text channel, url;
  Millis dateTime;
  Text extra;
  int64_t rank_number = 0;
  NEXMARK_FIELDS(auction, bidder, price, channel, url, dateTime, extra, rank_number);
};
Q19 MakeQ19(Bid&& b) {
  return Q19{b.auction,  b.bidder,           b.price, std::move(b.channel), std::move(b.url),
             b.dateTime, std::move(b.extra), 0};
}
bool Q19DearerFirst(const Q19& a, const Q19& b) {
  if (a.price != b.price) return a.price > b.price;
  if (a.dateTime.ms != b.dateTime.ms) return a.dateTime.ms < b.dateTime.ms;
  return std::tie(a.bidder, a.auction, a.price, a.channel, a.url, a.extra) <
         std::tie(b.bidder, b.auction, b.price, b.channel, b.url, b.extra);
}

// --- q20 ---------------------------------------------------------------------
struct Q20 {
  int64_t auction = 0, bidder = 0, price = 0;
  Text channel, url;
  Millis dateTime;
  Text extra;
  Text itemName, description;
  int64_t initialBid = 0, reserve = 0;
  Millis auction_dateTime, expires;
  int64_t seller = 0, category = 0;
  Text auction_extra;
  NEXMARK_FIELDS(auction, bidder, price, channel, url, dateTime, extra, itemName, description,
                 initialBid, reserve, auction_dateTime, expires, seller, category, auction_extra);
};
Q20 MakeQ20(const Bid& b, const Auction& a) {
  return Q20{b.auction, b.bidder,   b.price,       b.channel,    b.url,     b.dateTime,
             b.extra,   a.itemName, a.description, a.initialBid, a.reserve, a.dateTime,
             a.expires, a.seller,   a.category,    a.extra};
}
// bid JOIN auction ON bid.auction = auction.id WHERE auction.category = 10,
// keyed by auction id; an auction of another category drops its bids (ids are
// unique).
struct ExpandBid : tidemark::KeyedCoProcessFunction<int64_t, Bid, Auction, Q20> {
  void process_element1(const Bid& b, Context& ctx, Collector<Q20>& out) override {
    if (const Auction* a = ctx.get_state<Auction>("auction").value_ptr()) {
      out.collect(MakeQ20(b, *a));
    } else if (!ctx.get_state<bool>("other category").value()) {
      ctx.get_list_state<Bid>("bids").add(b);
    }
  }
  void process_element2(const Auction& a, Context& ctx, Collector<Q20>& out) override {
    auto bids = ctx.get_list_state<Bid>("bids");
    if (a.category == 10) {
      for (const Bid& b : bids.get()) out.collect(MakeQ20(b, a));
      ctx.get_state<Auction>("auction").update(a);
    } else {
      ctx.get_state<bool>("other category").update(true);
    }
    bids.clear();
  }
};

// --- q21, q22 --------------------------------------------------------------
struct Q21 {
  int64_t auction = 0, bidder = 0, price = 0;
  Text channel;
  std::string channel_id;
  NEXMARK_FIELDS(auction, bidder, price, channel, channel_id);
};
// REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2), nullopt when no match
// (a view of `url`).
std::optional<std::string_view> ChannelIdOf(std::string_view url) {
  constexpr std::string_view kKey = "channel_id=";
  size_t pos = 0;
  while ((pos = url.find(kKey, pos)) != std::string_view::npos) {
    if (pos == 0 || url[pos - 1] == '&') {
      const size_t b = pos + kKey.size();
      const size_t e = url.find('&', b);
      return url.substr(b, e == std::string_view::npos ? std::string_view::npos : e - b);
    }
    ++pos;
  }
  return std::nullopt;
}
// LOWER(s) = lower, for `lower` in lower case ASCII letters: without a
// lower-cased copy of s (an ASCII byte c lowers to lower[i] exactly when
// (c | 0x20) == lower[i], lower[i] being a letter).
bool LowerEquals(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if ((s[i] | 0x20) != lower[i]) return false;
  return true;
}
// CASE LOWER(channel) WHEN 'apple' THEN '0' WHEN 'google' THEN '1' WHEN
// 'facebook' THEN '2' WHEN 'baidu' THEN '3' ELSE REGEXP_EXTRACT(...) END.
std::optional<std::string_view> Q21ChannelId(const Bid& b) {
  const std::string_view c = b.channel.view();
  switch (c.size()) {
    case 5:
      if (LowerEquals(c, "apple")) return "0";
      if (LowerEquals(c, "baidu")) return "3";
      break;
    case 6:
      if (LowerEquals(c, "google")) return "1";
      break;
    case 8:
      if (LowerEquals(c, "facebook")) return "2";
      break;
    default:
      break;
  }
  return ChannelIdOf(b.url.view());
}
std::optional<Q21> ToQ21(const Bid& b) {
  const std::optional<std::string_view> id = Q21ChannelId(b);
  if (!id) return std::nullopt;
  return Q21{b.auction, b.bidder, b.price, b.channel, std::string(*id)};
}
struct Q22 {
  int64_t auction = 0, bidder = 0, price = 0;
  Text channel;
  Text dir1, dir2, dir3;  // views of the bid's url where it is one (the generator's pool)
  NEXMARK_FIELDS(auction, bidder, price, channel, dir1, dir2, dir3);
};
// SPLIT_INDEX(url, '/', 3), (.., 4), (.., 5).
Q22 ToQ22(const Bid& b) {
  std::string_view dirs[3];
  SplitPieces(b.url.view(), '/', 3, 3, dirs);
  return Q22{b.auction,
             b.bidder,
             b.price,
             b.channel,
             PieceOf(b.url, dirs[0]),
             PieceOf(b.url, dirs[1]),
             PieceOf(b.url, dirs[2])};
}

template <typename F>
void ForEachBid(const Generator& gen, F f) {
  ForEachEvent(gen, [&](const Event& e) {
    if (const Bid* b = e.bid()) f(*b);
  });
}

void Q13Reference(const Generator& gen, RowAccumulator& out) {
  std::unordered_map<int64_t, std::string> side;
  for (int64_t k = 0; k < kSideInputKeys; ++k) side[k] = SideValue(k);
  ForEachBid(gen, [&](const Bid& b) {
    out.Add(Q13{b.auction, b.bidder, b.price, b.dateTime, side.at(b.auction % kSideInputKeys)});
  });
}

}  // namespace queries_b

void AddQueriesB(std::vector<QueryDef>& qs) {
  // q12: processing-time windows.
  qs.push_back(QueryDef{
      "q12", false, 76e3, "bids per bidder per 10 s of processing time (checked per bidder)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto w = BidColumns(e, [](Bid&& b) { return Bidder{b.bidder}; })
                     .key_by([](const Bidder& b) { return b.bidder; })
                     .window(tidemark::TumblingProcessingTimeWindows::of(10s))
                     .trigger(ProcessingTimeOrEndTrigger())
                     .template aggregate<Q12>(
                         CountAgg(), [](const int64_t& bidder, const TimeWindow& w,
                                        const int64_t& n, auto&, Collector<Q12>& out) {
                           out.collect(Q12{bidder, n, Millis{w.start}, Millis{w.end}});
                         });
        SinkAppend(w, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::map<int64_t, int64_t> counts;
        ForEachBid(gen, [&](const Bid& b) { counts[b.bidder]++; });
        for (const auto& [bidder, n] : counts) out.Add(Q12{bidder, n, Millis{0}, Millis{0}});
      }});
  // q13: join with a bounded side input (a lookup join, as Flink's plan).
  qs.push_back(QueryDef{
      "q13", false, 131e3, "bids joined with a 10 000-row side input on auction % 10000",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto rows = std::make_shared<const std::vector<SideRow>>(SideRows());
        SinkAppend(Bids(e).flat_map(SideLookup{std::move(rows), {}}).name("Lookup join side input"),
                   rs);
      },
      Q13Reference});
  // q14: calculation (filter, CASE, a user function).
  qs.push_back(QueryDef{"q14", false, 161e3,
                        "bids in a price band with their time-of-day type and 'c' count",
                        [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                          SinkAppend(BidsFlatMap<Q14>(e,
                                                      [](Bid&& b, Collector<Q14>& out) {
                                                        if (auto r = ToQ14(b))
                                                          out.collect(std::move(*r));
                                                      }),
                                     rs);
                        },
                        [](const Generator& gen, RowAccumulator& out) {
                          ForEachBid(gen, [&](const Bid& b) {
                            if (auto r = ToQ14(b)) out.Add(*r);
                          });
                        }});
  // q15: bidding statistics per day (updating).
  qs.push_back(QueryDef{
      "q15", true, 72e3, "per day: bids, distinct bidders and auctions per price band (updating)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        // Two phases, as Flink's run plans it (mini-batch on): the local one
        // carries the distinct ids it saw, the global one merges them.
        auto local = LocalCombine<BidNumbers, Q15Partial>(
            BidColumns(e, BidNumbers::Of), [](const BidNumbers& b) { return DayOf(b.dateTime.ms); },
            [](const BidNumbers& b, Q15Partial& p, bool fresh) -> size_t {
              if (fresh) p.day = DayOf(b.dateTime.ms);
              return AddToPartial(b.bidder, b.auction, PriceRank(b.price), p.bids, p.bidders,
                                  p.auctions);
            });
        auto f = MakeGroupAggregate<int64_t, Q15, Q15Partial>(
            [](const Q15Partial& p, Q15& r, KeyedProcessContext<int64_t>& ctx) {
              if (r.day.empty()) r.day = DayString(p.day);
              r.bids.Merge(p.bids);
              MergeDistinct(ctx, "bidders", p.bidders, r.bidders);
              MergeDistinct(ctx, "auctions", p.auctions, r.auctions);
            });
        SinkChangelog(local.key_by([](const Q15Partial& p) { return p.day; }).process(f), rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        struct G {
          Q15 row;
          std::unordered_map<int64_t, uint8_t> bidders, auctions;
        };
        std::map<int64_t, G> groups;
        ForEachBid(gen, [&](const Bid& b) {
          const int64_t day = DayOf(b.dateTime.ms);
          G& g = groups[day];
          const int rank = PriceRank(b.price);
          if (g.row.day.empty()) g.row.day = DayString(day);
          g.row.bids.Add(rank);
          AddDistinct(g.bidders[b.bidder], rank, g.row.bidders);
          AddDistinct(g.auctions[b.auction], rank, g.row.auctions);
        });
        for (const auto& [k, g] : groups) out.Add(g.row);
      }});
  // q16: channel statistics per day (updating).
  qs.push_back(QueryDef{
      "q16", true, 19e3, "per channel and day: q15's statistics and the last minute (updating)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        // Keyed by the channel and the day's number (its date formatted once
        // per group, as q15 and q17 do): the same groups as by the two strings.
        using Key = std::pair<std::string, int64_t>;
        auto local = LocalCombine<BidChannelNumbers, Q16Partial>(
            BidColumns(e, BidChannelNumbers::Of),
            [](const BidChannelNumbers& b) { return Key(b.channel.str(), DayOf(b.dateTime.ms)); },
            [](const BidChannelNumbers& b, Q16Partial& p, bool fresh) -> size_t {
              if (fresh) {
                p.channel = b.channel.str();
                p.day = DayOf(b.dateTime.ms);
              }
              p.last_ms = fresh ? b.dateTime.ms : std::max(p.last_ms, b.dateTime.ms);
              return AddToPartial(b.bidder, b.auction, PriceRank(b.price), p.bids, p.bidders,
                                  p.auctions);
            });
        auto f = MakeGroupAggregate<Key, Q16, Q16Partial>(
            [](const Q16Partial& p, Q16& r, KeyedProcessContext<Key>& ctx) {
              if (r.bids.total == 0) {
                r.channel = p.channel;
                r.day = DayString(p.day);
              }
              r.minute = std::max(r.minute, FormatHourMinute(p.last_ms));
              r.bids.Merge(p.bids);
              MergeDistinct(ctx, "bidders", p.bidders, r.bidders);
              MergeDistinct(ctx, "auctions", p.auctions, r.auctions);
            });
        SinkChangelog(
            local.key_by([](const Q16Partial& p) { return Key(p.channel, p.day); }).process(f), rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        // Grouped by the channel and the day's number in hash maps, the date
        // formatted once per group and the last minute once at the end
        // (within a day the latest time has the greatest HH:mm), as a
        // careful loop would:
        // formatting both per bid made this loop 2.3-4.6x slower than the
        // job's work, and its "/ loop" figure flattering.
        struct G {
          Q16 row;
          int64_t last_ms = 0;
          absl::flat_hash_map<int64_t, uint8_t> bidders, auctions;
        };
        absl::flat_hash_map<std::pair<std::string, int64_t>, G> groups;
        ForEachBid(gen, [&](const Bid& b) {
          G& g = groups[{b.channel.str(), DayOf(b.dateTime.ms)}];
          const int rank = PriceRank(b.price);
          if (g.row.bids.total == 0) {
            g.row.channel = b.channel;
            g.row.day = FormatDate(b.dateTime.ms);
            g.last_ms = b.dateTime.ms;
          }
          g.last_ms = std::max(g.last_ms, b.dateTime.ms);
          g.row.bids.Add(rank);
          AddDistinct(g.bidders[b.bidder], rank, g.row.bidders);
          AddDistinct(g.auctions[b.auction], rank, g.row.auctions);
        });
        for (auto& [k, g] : groups) {
          g.row.minute = FormatHourMinute(g.last_ms);
          out.Add(g.row);
        }
      }});
  // q17: auction statistics per day (updating).
  qs.push_back(QueryDef{
      "q17", true, 117e3, "per auction and day: bids per band, min/max/avg/sum price (updating)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        using Key = std::pair<int64_t, int64_t>;  // auction, DayOf(dateTime)
        // Two phases, as Flink's run plans it: a local aggregate per
        // subtask before the shuffle, the global one after it.
        auto local = LocalCombine<BidNumbers, Q17Partial>(
            BidColumns(e, BidNumbers::Of),
            [](const BidNumbers& b) { return Key(b.auction, DayOf(b.dateTime.ms)); },
            [](const BidNumbers& b, Q17Partial& p, bool fresh) {
              if (fresh) {
                p.auction = b.auction;
                p.day = DayOf(b.dateTime.ms);
                p.min_price = p.max_price = b.price;
              }
              p.bids.Add(PriceRank(b.price));
              p.min_price = std::min(p.min_price, b.price);
              p.max_price = std::max(p.max_price, b.price);
              p.sum_price += b.price;
            });
        auto f = MakeGroupAggregate<Key, Q17, Q17Partial>(
            [](const Q17Partial& p, Q17& r, KeyedProcessContext<Key>&) {
              if (r.bids.total == 0) {
                r.auction = p.auction;
                r.day = DayString(p.day);
                r.min_price = p.min_price;
                r.max_price = p.max_price;
              }
              r.bids.Merge(p.bids);
              r.min_price = std::min(r.min_price, p.min_price);
              r.max_price = std::max(r.max_price, p.max_price);
              r.sum_price += p.sum_price;
              r.avg_price = r.sum_price / r.bids.total;
            });
        SinkChangelog(
            local.key_by([](const Q17Partial& p) { return Key(p.auction, p.day); }).process(f), rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::map<std::pair<int64_t, int64_t>, Q17> groups;
        ForEachBid(gen, [&](const Bid& b) {
          const int64_t day = DayOf(b.dateTime.ms);
          auto [it, fresh] = groups.try_emplace({b.auction, day});
          Q17& r = it->second;
          if (fresh) {
            r.auction = b.auction;
            r.day = DayString(day);
            r.min_price = r.max_price = b.price;
          }
          r.bids.Add(PriceRank(b.price));
          r.min_price = std::min(r.min_price, b.price);
          r.max_price = std::max(r.max_price, b.price);
          r.sum_price += b.price;
        });
        for (auto& [k, r] : groups) {
          r.avg_price = r.sum_price / r.bids.total;
          out.Add(r);
        }
      }});
  // q18: the last bid of each bidder on each auction (deduplication; updating).
  qs.push_back(QueryDef{
      "q18", true, 54e3, "last bid per (bidder, auction): ROW_NUMBER() ... <= 1 (updating)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        SinkChangelog(BidsFlatMap<Q18>(
                          e, [](Bid&& b, Collector<Q18>& out) { out.collect(ToQ18(std::move(b))); })
                          .key_by([](const Q18& b) {
                            return std::pair<int64_t, int64_t>(b.bidder, b.auction);
                          })
                          .top_n(1, &AtLeastAsLate),
                      rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        // In event order, as one source subtask sends them.
        std::map<std::pair<int64_t, int64_t>, Q18> last;
        ForEachBid(gen, [&](const Bid& b) {
          Q18 row = ToQ18(Bid(b));
          auto [it, fresh] = last.try_emplace({b.bidder, b.auction}, row);
          if (!fresh && AtLeastAsLate(row, it->second)) it->second = std::move(row);
        });
        for (const auto& [k, b] : last) out.Add(b);
      }});
  // q19: the 10 highest bids of each auction (top-N; updating).
  qs.push_back(QueryDef{"q19", true, 44e3,
                        "the 10 highest bids per auction: ROW_NUMBER() ... <= 10 (updating)",
                        [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                          SinkChangelog(BidColumns(e, &MakeQ19)
                                            .key_by([](const Q19& b) { return b.auction; })
                                            .top_n(10, &Q19DearerFirst, &Q19::rank_number),
                                        rs);
                        },
                        [](const Generator& gen, RowAccumulator& out) {
                          std::map<int64_t, std::vector<Bid>> groups;
                          ForEachBid(gen, [&](const Bid& b) { groups[b.auction].push_back(b); });
                          for (auto& [auction, bids] : groups) {
                            std::sort(bids.begin(), bids.end(), &DearerFirst);
                            for (size_t i = 0; i < bids.size() && i < 10; ++i) {
                              Bid b = bids[i];
                              Q19 row = MakeQ19(std::move(b));
                              row.rank_number = static_cast<int64_t>(i + 1);
                              out.Add(row);
                            }
                          }
                        }});
  // q20: bids expanded with their auction (regular join).
  qs.push_back(QueryDef{
      "q20", false, 19e3, "bids joined with their auction, auctions of category 10",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [all_bids, all_auctions] = SplitEvents<Bid, Auction>(e);
        auto joined = all_bids.key_by([](const Bid& b) { return b.auction; })
                          .connect(all_auctions.key_by([](const Auction& a) { return a.id; }))
                          .process(ExpandBid());
        SinkAppend(joined, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::unordered_map<int64_t, Auction> auctions;
        std::vector<Bid> bids;
        ForEachEvent(gen, [&](const Event& e) {
          if (const Auction* a = e.auction()) auctions[a->id] = *a;
          if (const Bid* b = e.bid()) bids.push_back(*b);
        });
        for (const Bid& b : bids) {
          auto it = auctions.find(b.auction);
          if (it != auctions.end() && it->second.category == 10) out.Add(MakeQ20(b, it->second));
        }
      }});
  // q21: channel ids (CASE, REGEXP_EXTRACT).
  qs.push_back(QueryDef{"q21", false, 98e3,
                        "bids with a channel id from the channel name or the url",
                        [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                          SinkAppend(BidsFlatMap<Q21>(e,
                                                      [](Bid&& b, Collector<Q21>& out) {
                                                        if (auto r = ToQ21(b))
                                                          out.collect(std::move(*r));
                                                      }),
                                     rs);
                        },
                        [](const Generator& gen, RowAccumulator& out) {
                          ForEachBid(gen, [&](const Bid& b) {
                            if (auto r = ToQ21(b)) out.Add(*r);
                          });
                        }});
  // q22: url directories (SPLIT_INDEX).
  qs.push_back(QueryDef{
      "q22", false, 130e3, "bids with the first three directories of their url",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        SinkAppend(BidsFlatMap<Q22>(e, [](Bid&& b, Collector<Q22>& out) { out.collect(ToQ22(b)); }),
                   rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        ForEachBid(gen, [&](const Bid& b) { out.Add(ToQ22(b)); });
      }});
}

void AddQueryVariantsB(std::vector<QueryDef>& qs) {
  // No Flink figure: Flink's 131 K/s is its lookup join's, q13's plan.
  qs.push_back(QueryDef{"q13-broadcast", false, 0,
                        "q13 with broadcast state: bids keyed by auction, the side input broadcast",
                        [](tidemark::StreamExecutionEnvironment& env, DataStream<Event> e,
                           std::shared_ptr<ResultSet> rs) {
                          auto side = env.from_collection(SideRows()).name("Side input");
                          auto joined = Bids(e)
                                            .key_by([](const Bid& b) { return b.auction; })
                                            .connect(side.broadcast(kSide))
                                            .process(SideJoin());
                          SinkAppend(joined, rs);
                        },
                        Q13Reference});
}

}  // namespace nexmark
