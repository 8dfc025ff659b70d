// bench/nexmark/queries_a.cc: q0-q11 and their references (queries.h).
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>
#include <vector>

#include "bench/nexmark/query_util.h"

namespace nexmark {

using namespace std::chrono_literals;
using tidemark::KeyedProcessContext;
using tidemark::TimeWindow;

inline namespace queries_a {

// --- q1, q2 rows -------------------------------------------------------------
// q0's rows: nexmark_q0 (auction, bidder, price, dateTime, extra).
struct Q0 {
  int64_t auction = 0;
  int64_t bidder = 0;
  int64_t price = 0;
  Millis dateTime;
  Text extra;
  NEXMARK_FIELDS(auction, bidder, price, dateTime, extra);
};
Q0 ToQ0(Bid&& b) { return Q0{b.auction, b.bidder, b.price, b.dateTime, std::move(b.extra)}; }

struct Q1 {
  int64_t auction = 0;
  int64_t bidder = 0;
  Decimal3 price;  // DECIMAL(23, 3), exact
  Millis dateTime;
  Text extra;
  NEXMARK_FIELDS(auction, bidder, price, dateTime, extra);
};
Q1 ToQ1(const Bid& b) {
  return Q1{b.auction, b.bidder, Decimal3{908 * b.price}, b.dateTime, b.extra};
}

struct Q2 {
  int64_t auction = 0;
  int64_t price = 0;
  NEXMARK_FIELDS(auction, price);
};

// --- q3 ----------------------------------------------------------------------
struct Q3 {
  std::string name;
  std::string city;
  std::string state;
  int64_t id = 0;
  NEXMARK_FIELDS(name, city, state, id);
};
bool Q3State(const std::string& s) { return s == "OR" || s == "ID" || s == "CA"; }

// A person as q3 needs it; `match` false: the person is not in the states
// (its auctions are dropped as they come, person ids being unique).
struct PersonInfo {
  std::string name, city, state;
  bool match = false;
  NEXMARK_FIELDS(name, city, state, match);
};

// Regular inner join auction.seller = person.id, keyed by person id.
struct Q3Join : tidemark::KeyedCoProcessFunction<int64_t, Person, Auction, Q3> {
  void process_element1(const Person& p, Context& ctx, Collector<Q3>& out) override {
    PersonInfo info{p.name, p.city, p.state, Q3State(p.state)};
    auto pending = ctx.get_list_state<int64_t>("auctions");
    if (info.match)
      for (int64_t a : pending.get()) out.collect(Q3{info.name, info.city, info.state, a});
    pending.clear();
    ctx.get_state<PersonInfo>("person").update(std::move(info));
  }
  void process_element2(const Auction& a, Context& ctx, Collector<Q3>& out) override {
    const PersonInfo* person = ctx.get_state<PersonInfo>("person").value_ptr();
    if (person == nullptr) {
      ctx.get_list_state<int64_t>("auctions").add(a.id);
    } else if (person->match) {
      out.collect(Q3{person->name, person->city, person->state, a.id});
    }
  }
};

// --- q4, q6, q9: auctions joined with their bids in [dateTime, expires] -------
struct AuctionLite {
  int64_t id = 0, seller = 0, category = 0, dateTime = 0, expires = 0;
  NEXMARK_FIELDS(id, seller, category, dateTime, expires);
};
AuctionLite Lite(const Auction& a) {
  return AuctionLite{a.id, a.seller, a.category, a.dateTime.ms, a.expires.ms};
}
struct BidLite {
  int64_t auction = 0, price = 0, dateTime = 0;
  NEXMARK_FIELDS(auction, price, dateTime);
};
BidLite BidColumnsLite(const Bid& b) { return BidLite{b.auction, b.price, b.dateTime.ms}; }
bool InAuction(const AuctionLite& a, int64_t bid_time) {
  return a.dateTime <= bid_time && bid_time <= a.expires;
}

// q4's inner query: MAX(price) per auction (GROUP BY A.id, A.category).
struct Q4Max {
  int64_t auction = 0;
  int64_t category = 0;
  int64_t final_price = 0;
  NEXMARK_FIELDS(auction, category, final_price);
};
struct Q4 {
  int64_t category = 0;
  int64_t avg = 0;  // AVG over BIGINT: truncated, as Flink's
  NEXMARK_FIELDS(category, avg);
};

struct MaxBidJoin
    : tidemark::KeyedCoProcessFunction<int64_t, AuctionLite, BidLite, Changelog<Q4Max>> {
  void process_element1(const AuctionLite& a, Context& ctx,
                        Collector<Changelog<Q4Max>>& out) override {
    ctx.get_state<AuctionLite>("auction").update(a);
    auto pending = ctx.get_list_state<BidLite>("bids");
    int64_t best = -1;
    for (const BidLite& b : pending.get())
      if (InAuction(a, b.dateTime)) best = std::max(best, b.price);
    pending.clear();
    if (best >= 0) {
      ctx.get_state<int64_t>("max").update(best);
      out.collect({RowKind::kInsert, Q4Max{a.id, a.category, best}});
    }
  }
  void process_element2(const BidLite& b, Context& ctx, Collector<Changelog<Q4Max>>& out) override {
    auto a = ctx.get_state<AuctionLite>("auction").value();
    if (!a) {
      ctx.get_list_state<BidLite>("bids").add(b);
      return;
    }
    if (!InAuction(*a, b.dateTime)) return;
    auto max = ctx.get_state<int64_t>("max");
    const auto cur = max.value();
    if (cur && *cur >= b.price) return;
    if (cur) out.collect({RowKind::kDelete, Q4Max{a->id, a->category, *cur}});
    max.update(b.price);
    out.collect({RowKind::kInsert, Q4Max{a->id, a->category, b.price}});
  }
};

struct CategoryAvg : tidemark::KeyedProcessFunction<int64_t, Changelog<Q4Max>, Changelog<Q4>> {
  void process_element(const Changelog<Q4Max>& c, Context& ctx,
                       Collector<Changelog<Q4>>& out) override {
    auto st = ctx.get_state<std::pair<int64_t, int64_t>>("sum count");
    auto [sum, count] = st.value_or({0, 0});
    if (count > 0) out.collect({RowKind::kDelete, Q4{c.row.category, sum / count}});
    if (c.kind == RowKind::kInsert) {
      sum += c.row.final_price;
      ++count;
    } else {
      sum -= c.row.final_price;
      --count;
    }
    if (count > 0) out.collect({RowKind::kInsert, Q4{c.row.category, sum / count}});
    st.update({sum, count});
  }
};

// The per-auction maximum of the bids in [dateTime, expires] (q4, q6, q9's
// join condition), computed by a plain loop.
struct AuctionMax {
  AuctionLite a;
  bool known = false;
  int64_t max = -1;
};
std::unordered_map<int64_t, AuctionMax> AuctionMaxes(const Generator& gen) {
  std::unordered_map<int64_t, AuctionMax> m;
  std::vector<BidLite> bids;
  ForEachEvent(gen, [&](const Event& e) {
    if (const Auction* a = e.auction()) {
      auto& x = m[a->id];
      x.a = Lite(*a);
      x.known = true;
    } else if (const Bid* b = e.bid()) {
      bids.push_back(BidLite{b->auction, b->price, b->dateTime.ms});
    }
  });
  for (const BidLite& b : bids) {
    auto it = m.find(b.auction);
    if (it == m.end() || !InAuction(it->second.a, b.dateTime)) continue;
    it->second.max = std::max(it->second.max, b.price);
  }
  return m;
}

// --- q5 ----------------------------------------------------------------------
struct AuctionCount {
  int64_t auction = 0, num = 0, starttime = 0, endtime = 0;
  NEXMARK_FIELDS(auction, num, starttime, endtime);
};
struct CountAgg {
  template <typename T>
  int64_t add(const T&, int64_t acc) const {
    return acc + 1;
  }
  int64_t create_accumulator() const { return 0; }
  int64_t get_result(int64_t acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return a + b; }
};
// The auctions with the most bids of each window.
// q5's rows: nexmark_q5 (auction, num); the window is not a column.
struct Q5 {
  int64_t auction = 0, num = 0;
  NEXMARK_FIELDS(auction, num);
};
struct HotItems : tidemark::KeyedProcessFunction<int64_t, AuctionCount, Q5> {
  void process_element(const AuctionCount& c, Context& ctx, Collector<Q5>&) override {
    ctx.get_list_state<AuctionCount>("counts").add(c);
    ctx.timer_service().register_event_time_timer(c.endtime - 1);
  }
  void on_timer(Timestamp, Context& ctx, Collector<Q5>& out) override {
    auto st = ctx.get_list_state<AuctionCount>("counts");
    int64_t max = 0;
    for (const auto& c : st.get()) max = std::max(max, c.num);
    for (const auto& c : st.get())
      if (c.num >= max) out.collect(Q5{c.auction, c.num});
    st.clear();
  }
};

// --- q6 ----------------------------------------------------------------------
struct Winner {
  int64_t seller = 0, auction = 0, price = 0, closed = 0;
  NEXMARK_FIELDS(seller, auction, price, closed);
};
struct Q6 {
  int64_t seller = 0;
  int64_t auction = 0;
  int64_t closed = 0;
  int64_t avg = 0;  // over this and the up to 10 preceding closed auctions
  NEXMARK_FIELDS(seller, auction, closed, avg);
};
// Closes each auction at its expiry (event time) with its highest bid.  An
// auction's state is one value (one lookup per bid, changed in place), as a
// Flink user keeps one ValueState of a POJO: what the winner needs of the
// auction, its highest bid so far, whether it arrived and whether it closed.
// Bids that arrive before their auction wait in a list.
struct OpenAuction {
  int64_t seller = 0, dateTime = 0, expires = 0;
  int64_t max = -1;  // the highest bid in [dateTime, expires] so far
  bool known = false, closed = false;
  NEXMARK_FIELDS(seller, dateTime, expires, max, known, closed);
};
struct WinningBid : tidemark::KeyedCoProcessFunction<int64_t, AuctionLite, BidLite, Winner> {
  void process_element1(const AuctionLite& a, Context& ctx, Collector<Winner>&) override {
    auto pending = ctx.get_list_state<BidLite>("bids");
    int64_t best = -1;
    for (const BidLite& b : pending.get())
      if (InAuction(a, b.dateTime)) best = std::max(best, b.price);
    pending.clear();
    OpenAuction& s = ctx.get_state<OpenAuction>("auction").mutable_value();
    s = OpenAuction{a.seller, a.dateTime, a.expires, best, true, false};
    ctx.timer_service().register_event_time_timer(a.expires);
  }
  void process_element2(const BidLite& b, Context& ctx, Collector<Winner>&) override {
    OpenAuction& s = ctx.get_state<OpenAuction>("auction").mutable_value();
    if (s.closed) return;
    if (!s.known) {
      ctx.get_list_state<BidLite>("bids").add(b);
      return;
    }
    if (s.dateTime <= b.dateTime && b.dateTime <= s.expires) s.max = std::max(s.max, b.price);
  }
  void on_timer(Timestamp t, Context& ctx, Collector<Winner>& out) override {
    OpenAuction& s = ctx.get_state<OpenAuction>("auction").mutable_value();
    if (s.known && s.max >= 0) out.collect(Winner{s.seller, ctx.get_current_key(), s.max, t});
    s = OpenAuction{};
    s.closed = true;
  }
};
struct AvgPrice {
  std::pair<int64_t, int64_t> create_accumulator() const { return {0, 0}; }
  std::pair<int64_t, int64_t> add(const Winner& w, std::pair<int64_t, int64_t> acc) const {
    return {acc.first + w.price, acc.second + 1};
  }
  int64_t get_result(const std::pair<int64_t, int64_t>& acc) const {
    return acc.second ? acc.first / acc.second : 0;
  }
};

// --- q7 ----------------------------------------------------------------------
struct Q7 {
  int64_t auction = 0;
  int64_t price = 0;
  int64_t bidder = 0;
  Millis dateTime;
  Text extra;
  NEXMARK_FIELDS(auction, price, bidder, dateTime, extra);
};
// The window's input: a bid, or (edge) a bid at the window's end, which the
// query's BETWEEN window_end - 10 s AND window_end also joins to the window
// when its price is the window's highest, without counting toward it.
struct Q7Candidate {
  Q7 bid;
  bool edge = false;
  NEXMARK_FIELDS(bid, edge);
};
// The highest price, every bid at it, and the bids at the window's end at
// least as dear (those cheaper can never be at the highest price).
struct MaxBids {
  int64_t max = -1;
  std::vector<Q7> bids;
  std::vector<Q7> edge;
  NEXMARK_FIELDS(max, bids, edge);
};
struct MaxBidsAgg {
  MaxBids create_accumulator() const { return {}; }
  static void Put(MaxBids& acc, const Q7& b) {
    if (b.price > acc.max) {
      acc.max = b.price;
      acc.bids.clear();
      std::erase_if(acc.edge, [&](const Q7& e) { return e.price < acc.max; });
    }
    if (b.price == acc.max) acc.bids.push_back(b);
  }
  static void PutEdge(MaxBids& acc, const Q7& b) {
    if (b.price >= acc.max) acc.edge.push_back(b);
  }
  MaxBids add(const Q7Candidate& c, MaxBids acc) const {
    if (c.edge) {
      PutEdge(acc, c.bid);
    } else {
      Put(acc, c.bid);
    }
    return acc;
  }
  MaxBids add(const MaxBids& m, MaxBids acc) const {
    for (const Q7& b : m.bids) Put(acc, b);
    for (const Q7& b : m.edge) PutEdge(acc, b);
    return acc;
  }
  MaxBids get_result(const MaxBids& acc) const { return acc; }
  MaxBids merge(MaxBids a, const MaxBids& b) const { return add(b, std::move(a)); }
};

// --- q8 ----------------------------------------------------------------------
struct Q8 {
  int64_t id = 0;
  std::string name;
  Millis starttime;
  NEXMARK_FIELDS(id, name, starttime);
};
struct PersonLite {
  int64_t id = 0;
  std::string name;
  int64_t dateTime = 0;
  NEXMARK_FIELDS(id, name, dateTime);
};
int64_t TumbleStart(int64_t t, int64_t size) { return t - ((t % size) + size) % size; }

// --- q9 ----------------------------------------------------------------------
struct Q9 {
  int64_t id = 0;
  Text itemName, description;
  int64_t initialBid = 0, reserve = 0;
  Millis dateTime, expires;
  int64_t seller = 0, category = 0;
  Text extra;
  int64_t auction = 0, bidder = 0, price = 0;
  Millis bid_dateTime;
  Text bid_extra;
  NEXMARK_FIELDS(id, itemName, description, initialBid, reserve, dateTime, expires, seller,
                 category, extra, auction, bidder, price, bid_dateTime, bid_extra);
};
Q9 MakeQ9(const Auction& a, const Bid& b) {
  return Q9{a.id,       a.itemName, a.description, a.initialBid, a.reserve,
            a.dateTime, a.expires,  a.seller,      a.category,   a.extra,
            b.auction,  b.bidder,   b.price,       b.dateTime,   b.extra};
}
// ORDER BY B.price DESC, B.dateTime ASC, and (ours, for a total order) the
// bidder and extra.
bool Q9Before(const Q9& x, const Q9& y) {
  if (x.price != y.price) return x.price > y.price;
  if (x.bid_dateTime.ms != y.bid_dateTime.ms) return x.bid_dateTime.ms < y.bid_dateTime.ms;
  if (x.bidder != y.bidder) return x.bidder < y.bidder;
  return x.bid_extra < y.bid_extra;
}
// Regular join on A.id = B.auction with B.dateTime BETWEEN A.dateTime AND A.expires.
struct AuctionBidJoin : tidemark::KeyedCoProcessFunction<int64_t, Auction, Bid, Q9> {
  void process_element1(const Auction& a, Context& ctx, Collector<Q9>& out) override {
    auto pending = ctx.get_list_state<Bid>("bids");
    for (const Bid& b : pending.get())
      if (a.dateTime.ms <= b.dateTime.ms && b.dateTime.ms <= a.expires.ms)
        out.collect(MakeQ9(a, b));
    pending.clear();
    ctx.get_state<Auction>("auction").update(a);
  }
  void process_element2(const Bid& b, Context& ctx, Collector<Q9>& out) override {
    const Auction* a = ctx.get_state<Auction>("auction").value_ptr();
    if (a == nullptr) {
      ctx.get_list_state<Bid>("bids").add(b);
    } else if (a->dateTime.ms <= b.dateTime.ms && b.dateTime.ms <= a->expires.ms) {
      out.collect(MakeQ9(*a, b));
    }
  }
};

// --- q10, q11 -------------------------------------------------------------------
struct Q10 {
  int64_t auction = 0, bidder = 0, price = 0;
  Millis dateTime;
  Text extra;
  std::string dt;  // DATE_FORMAT(dateTime, 'yyyy-MM-dd')
  std::string hm;  // DATE_FORMAT(dateTime, 'HH:mm')
  NEXMARK_FIELDS(auction, bidder, price, dateTime, extra, dt, hm);
};
struct Q11 {
  int64_t bidder = 0, bid_count = 0;
  Millis starttime, endtime;
  NEXMARK_FIELDS(bidder, bid_count, starttime, endtime);
};

}  // namespace queries_a

void AddQueriesA(std::vector<QueryDef>& qs) {
  // q0: pass through.
  qs.push_back(QueryDef{
      "q0", false, 155e3, "pass-through: every bid",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        SinkAppend(BidsFlatMap<Q0>(
                       e, [](Bid&& b, Collector<Q0>& out) { out.collect(ToQ0(std::move(b))); }),
                   rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        ForEachEvent(gen, [&](const Event& e) {
          if (const Bid* b = e.bid()) out.Add(ToQ0(Bid(*b)));
        });
      }});
  // q1: currency conversion.
  qs.push_back(QueryDef{
      "q1", false, 158e3, "currency conversion: 0.908 * price",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        SinkAppend(BidsFlatMap<Q1>(e, [](Bid&& b, Collector<Q1>& out) { out.collect(ToQ1(b)); }),
                   rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        ForEachEvent(gen, [&](const Event& e) {
          if (const Bid* b = e.bid()) out.Add(ToQ1(*b));
        });
      }});
  // q2: selection.
  qs.push_back(QueryDef{"q2", false, 175e3, "selection: auction % 123 = 0",
                        [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                          SinkAppend(e.flat_map([](const Event& ev, Collector<Q2>& out) {
                            const Bid* b = ev.bid();
                            if (b && b->auction % 123 == 0) out.collect(Q2{b->auction, b->price});
                          }),
                                     rs);
                        },
                        [](const Generator& gen, RowAccumulator& out) {
                          ForEachEvent(gen, [&](const Event& e) {
                            const Bid* b = e.bid();
                            if (b && b->auction % 123 == 0) out.Add(Q2{b->auction, b->price});
                          });
                        }});
  // q3: local item suggestion (regular join).
  qs.push_back(QueryDef{
      "q3", false, 152e3, "local item suggestion: auctions of category 10 by sellers in OR/ID/CA",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [all_auctions, persons] = SplitEvents<Auction, Person>(e);
        auto auctions = all_auctions.filter([](const Auction& a) { return a.category == 10; });
        auto joined = persons.key_by([](const Person& p) { return p.id; })
                          .connect(auctions.key_by([](const Auction& a) { return a.seller; }))
                          .process(Q3Join());
        SinkAppend(joined, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::unordered_map<int64_t, Person> persons;
        std::vector<std::pair<int64_t, int64_t>> auctions;  // seller, id
        ForEachEvent(gen, [&](const Event& e) {
          if (const Person* p = e.person()) persons[p->id] = *p;
          if (const Auction* a = e.auction())
            if (a->category == 10) auctions.emplace_back(a->seller, a->id);
        });
        for (auto [seller, id] : auctions) {
          auto it = persons.find(seller);
          if (it != persons.end() && Q3State(it->second.state))
            out.Add(Q3{it->second.name, it->second.city, it->second.state, id});
        }
      }});
  // q4: average winning price per category (updating).
  qs.push_back(QueryDef{
      "q4", true, 34e3, "average price per category of each auction's highest bid (updating)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [bids, auctions] = SplitEventsProjected<Bid, Auction>(
            e, [](Bid&& b) { return BidColumnsLite(b); }, [](Auction&& a) { return Lite(a); });
        auto maxes = auctions.key_by([](const AuctionLite& a) { return a.id; })
                         .connect(bids.key_by([](const BidLite& b) { return b.auction; }))
                         .process(MaxBidJoin());
        auto avgs = maxes.key_by([](const Changelog<Q4Max>& c) { return c.row.category; })
                        .process(CategoryAvg());
        SinkChangelog(avgs, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::map<int64_t, std::pair<int64_t, int64_t>> cat;
        for (const auto& [id, m] : AuctionMaxes(gen)) {
          if (!m.known || m.max < 0) continue;
          auto& [sum, count] = cat[m.a.category];
          sum += m.max;
          ++count;
        }
        for (const auto& [c, sc] : cat) out.Add(Q4{c, sc.first / sc.second});
      }});
  // q5: hot items (sliding window, then the max per window).
  qs.push_back(QueryDef{
      "q5", false, 22e3, "hot items: auctions with the most bids per 10 s window sliding by 2 s",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto counts =
            Bids(e)
                .key_by([](const Bid& b) { return b.auction; })
                .window(tidemark::SlidingEventTimeWindows::of(10s, 2s))
                .local_aggregation()  // Flink's runs: local-global aggregation
                .template aggregate<AuctionCount>(
                    CountAgg(), [](const int64_t& auction, const TimeWindow& w, const int64_t& n,
                                   auto&, Collector<AuctionCount>& out) {
                      out.collect(AuctionCount{auction, n, w.start, w.end});
                    });
        auto hot =
            counts.key_by([](const AuctionCount& c) { return c.endtime; }).process(HotItems());
        SinkAppend(hot, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        // Counts per 2 s pane (one hash-map update a bid), each 10 s window
        // the sum of its five panes, as a careful loop would: a count in
        // each of the five windows' ordered maps made this loop several
        // times slower than the job's work, and its "/ loop" figure
        // flattering.
        std::map<int64_t, std::unordered_map<int64_t, int64_t>> panes;  // start -> auction -> n
        ForEachEvent(gen, [&](const Event& e) {
          const Bid* b = e.bid();
          if (!b) return;
          panes[TumbleStart(b->dateTime.ms, 2000)][b->auction]++;
        });
        if (panes.empty()) return;
        std::unordered_map<int64_t, int64_t> counts;
        const int64_t last = panes.rbegin()->first;
        for (int64_t s = panes.begin()->first - 8000; s <= last; s += 2000) {
          counts.clear();
          for (auto it = panes.lower_bound(s); it != panes.end() && it->first < s + 10000; ++it)
            for (const auto& [a, n] : it->second) counts[a] += n;
          int64_t max = 0;
          for (const auto& [a, n] : counts) max = std::max(max, n);
          for (const auto& [a, n] : counts)
            if (n >= max) out.Add(Q5{a, n});
        }
      }});
  // q6: average selling price per seller over its last closed auctions.
  qs.push_back(QueryDef{
      "q6", false, 0,
      "average winning price of each seller's last 11 closed auctions (OVER ROWS 10 PRECEDING)",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [bids, auctions] = SplitEventsProjected<Bid, Auction>(
            e, [](Bid&& b) { return BidColumnsLite(b); }, [](Auction&& a) { return Lite(a); });
        auto winners = auctions.key_by([](const AuctionLite& a) { return a.id; })
                           .connect(bids.key_by([](const BidLite& b) { return b.auction; }))
                           .process(WinningBid());
        auto avgs =
            winners.key_by([](const Winner& w) { return w.seller; })
                .over_rows(10, AvgPrice(),
                           [](const Winner& a, const Winner& b) { return a.auction < b.auction; })
                .map([](const std::pair<Winner, int64_t>& p) {
                  return Q6{p.first.seller, p.first.auction, p.first.closed, p.second};
                });
        SinkAppend(avgs, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::map<int64_t, std::vector<Winner>> by_seller;
        for (const auto& [id, m] : AuctionMaxes(gen))
          if (m.known && m.max >= 0)
            by_seller[m.a.seller].push_back(Winner{m.a.seller, id, m.max, m.a.expires});
        for (auto& [seller, ws] : by_seller) {
          std::sort(ws.begin(), ws.end(), [](const Winner& a, const Winner& b) {
            return a.closed != b.closed ? a.closed < b.closed : a.auction < b.auction;
          });
          for (size_t i = 0; i < ws.size(); ++i) {
            const size_t from = i >= 10 ? i - 10 : 0;
            int64_t sum = 0;
            for (size_t j = from; j <= i; ++j) sum += ws[j].price;
            out.Add(
                Q6{seller, ws[i].auction, ws[i].closed, sum / static_cast<int64_t>(i - from + 1)});
          }
        }
      }});
  // q7: highest bid per 10 s window.
  qs.push_back(
      QueryDef{"q7", false, 12e3, "highest bid: the bids at the highest price of each 10 s window",
               [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                 // One group per window (the query has no GROUP BY key): each
                 // source subtask keeps the window's highest bids (local
                 // aggregation), and one subtask merges the partials, as
                 // Flink's plan does (a local window aggregate, then a
                 // singleton exchange to the global one).
                 // A bid at a window's end also goes to that window as an edge
                 // candidate, timestamped just inside it.
                 auto top = Bids(e)
                                .flat_map([](const Bid& b, Collector<Q7Candidate>& out) {
                                  const Q7 q{b.auction, b.price, b.bidder, b.dateTime, b.extra};
                                  if (b.dateTime.ms % 10000 == 0)
                                    out.collect_with_timestamp({q, true}, b.dateTime.ms - 1);
                                  out.collect_with_timestamp({q, false}, b.dateTime.ms);
                                })
                                .key_by([](const Q7Candidate&) { return int64_t{0}; })
                                .window(tidemark::TumblingEventTimeWindows::of(10s))
                                .local_aggregation()  // as Flink's local-global aggregation
                                .aggregate(MaxBidsAgg())
                                .flat_map([](const MaxBids& m, Collector<Q7>& out) {
                                  for (const Q7& b : m.bids) out.collect(b);
                                  for (const Q7& b : m.edge)
                                    if (b.price == m.max) out.collect(b);
                                });
                 SinkAppend(top, rs);
               },
               [](const Generator& gen, RowAccumulator& out) {
                 // Each window's highest bids; then the bids at its end
                 // (B.dateTime = window_end) at that price.
                 std::map<int64_t, MaxBids> windows;
                 std::map<int64_t, std::vector<Q7>> at_end;  // by the window's start
                 ForEachEvent(gen, [&](const Event& e) {
                   const Bid* b = e.bid();
                   if (!b) return;
                   const Q7 q{b->auction, b->price, b->bidder, b->dateTime, b->extra};
                   MaxBidsAgg::Put(windows[TumbleStart(b->dateTime.ms, 10000)], q);
                   if (b->dateTime.ms % 10000 == 0) at_end[b->dateTime.ms - 10000].push_back(q);
                 });
                 for (const auto& [s, m] : windows) {
                   for (const Q7& b : m.bids) out.Add(b);
                   for (const Q7& b : at_end[s])
                     if (b.price == m.max) out.Add(b);
                 }
               }});
  // q8: monitor new users (window join).
  qs.push_back(QueryDef{
      "q8", false, 146e3, "new users: persons who opened an auction in the 10 s window they joined",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [all_auctions, all_persons] = SplitEvents<Auction, Person>(e);
        auto persons = all_persons.map([](const Person& p) {
          return PersonLite{p.id, p.name, p.dateTime.ms};
        });
        auto sellers = all_auctions.map([](const Auction& a) { return a.seller; });
        auto joined =
            persons.co_group(sellers)
                .where([](const PersonLite& p) { return p.id; })
                .equal_to([](const int64_t& s) { return s; })
                .window(tidemark::TumblingEventTimeWindows::of(10s))
                .apply([](const std::vector<PersonLite>& ps, const std::vector<int64_t>& as,
                          Collector<Q8>& out) {
                  if (ps.empty() || as.empty()) return;
                  std::set<int64_t> seen;
                  for (const PersonLite& p : ps)
                    if (seen.insert(p.id).second)
                      out.collect(Q8{p.id, p.name, Millis{TumbleStart(p.dateTime, 10000)}});
                });
        SinkAppend(joined, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::map<std::pair<int64_t, int64_t>, std::string> persons;  // (window, id) -> name
        std::set<std::pair<int64_t, int64_t>> sellers;
        ForEachEvent(gen, [&](const Event& e) {
          if (const Person* p = e.person())
            persons[{TumbleStart(p->dateTime.ms, 10000), p->id}] = p->name;
          if (const Auction* a = e.auction())
            sellers.insert({TumbleStart(a->dateTime.ms, 10000), a->seller});
        });
        for (const auto& [k, name] : persons)
          if (sellers.contains(k)) out.Add(Q8{k.second, name, Millis{k.first}});
      }});
  // q9: winning bids (join, then top-1 per auction; updating).
  qs.push_back(QueryDef{
      "q9", true, 14e3, "winning bids: each auction with its highest bid in [dateTime, expires]",
      [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
        auto [all_bids, all_auctions] = SplitEvents<Bid, Auction>(e);
        auto joined = all_auctions.key_by([](const Auction& a) { return a.id; })
                          .connect(all_bids.key_by([](const Bid& b) { return b.auction; }))
                          .process(AuctionBidJoin());
        // The join's output is partitioned by the auction id already: Flink's
        // planner ships it to the Rank without an exchange, as this does.
        auto top = joined.reinterpret_as_keyed_stream([](const Q9& r) { return r.id; })
                       .top_n(1, &Q9Before);
        SinkChangelog(top, rs);
      },
      [](const Generator& gen, RowAccumulator& out) {
        std::unordered_map<int64_t, Auction> auctions;
        std::vector<Bid> bids;
        ForEachEvent(gen, [&](const Event& e) {
          if (const Auction* a = e.auction()) auctions[a->id] = *a;
          if (const Bid* b = e.bid()) bids.push_back(*b);
        });
        std::unordered_map<int64_t, Q9> best;
        for (const Bid& b : bids) {
          auto it = auctions.find(b.auction);
          if (it == auctions.end()) continue;
          const Auction& a = it->second;
          if (b.dateTime.ms < a.dateTime.ms || b.dateTime.ms > a.expires.ms) continue;
          Q9 r = MakeQ9(a, b);
          auto [bi, inserted] = best.try_emplace(a.id, r);
          if (!inserted && Q9Before(r, bi->second)) bi->second = r;
        }
        for (const auto& [id, r] : best) out.Add(r);
      }});
  // q10: log to the file system (partition columns).
  qs.push_back(
      QueryDef{"q10", false, 58e3, "bids with their date and hour:minute partition columns",
               [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                 SinkAppend(Bids(e).map([](const Bid& b) {
                   return Q10{b.auction,
                              b.bidder,
                              b.price,
                              b.dateTime,
                              b.extra,
                              FormatDate(b.dateTime.ms),
                              FormatHourMinute(b.dateTime.ms)};
                 }),
                            rs);
               },
               [](const Generator& gen, RowAccumulator& out) {
                 ForEachEvent(gen, [&](const Event& e) {
                   if (const Bid* b = e.bid())
                     out.Add(Q10{b->auction, b->bidder, b->price, b->dateTime, b->extra,
                                 FormatDate(b->dateTime.ms), FormatHourMinute(b->dateTime.ms)});
                 });
               }});
  // q11: user sessions.
  qs.push_back(QueryDef{"q11", false, 40e3, "user sessions: bids per bidder per session (gap 10 s)",
                        [](auto&, DataStream<Event> e, std::shared_ptr<ResultSet> rs) {
                          auto sessions =
                              Bids(e)
                                  .key_by([](const Bid& b) { return b.bidder; })
                                  .window(tidemark::EventTimeSessionWindows::with_gap(10s))
                                  .template aggregate<Q11>(
                                      CountAgg(), [](const int64_t& bidder, const TimeWindow& w,
                                                     const int64_t& n, auto&, Collector<Q11>& out) {
                                        out.collect(Q11{bidder, n, Millis{w.start}, Millis{w.end}});
                                      });
                          SinkAppend(sessions, rs);
                        },
                        [](const Generator& gen, RowAccumulator& out) {
                          std::map<int64_t, std::vector<int64_t>> times;
                          ForEachEvent(gen, [&](const Event& e) {
                            if (const Bid* b = e.bid()) times[b->bidder].push_back(b->dateTime.ms);
                          });
                          for (auto& [bidder, ts] : times) {
                            std::sort(ts.begin(), ts.end());
                            int64_t start = ts[0], end = ts[0] + 10000, n = 0;
                            for (int64_t t : ts) {
                              // Sessions that touch merge (TimeWindow.intersects:
                              // start <= other.end && end >= other.start).
                              if (t > end) {
                                out.Add(Q11{bidder, n, Millis{start}, Millis{end}});
                                start = t;
                                n = 0;
                              }
                              ++n;
                              end = std::max(end, t + 10000);
                            }
                            out.Add(Q11{bidder, n, Millis{start}, Millis{end}});
                          }
                        }});
}

}  // namespace nexmark
