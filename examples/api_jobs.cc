// examples/api_jobs.cc: the jobs of the API examples (examples/api_jobs.h).
#include "examples/api_jobs.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tidemark::examples {
namespace {

// A collection of records with a `ts` member, in time order, as a stream with
// those timestamps and a watermark after every record, generated in the
// source's subtask (Flink's fromSource: the generator sees the records in the
// order they are read, never behind a rebalance).
template <typename T>
DataStream<T> InTimeOrder(StreamExecutionEnvironment& env, const std::vector<T>& records) {
  return env.from_source(sources::collection(records),
                         WatermarkStrategy<T>::for_monotonous_timestamps()
                             .with_timestamp_assigner([](const T& x, Timestamp) { return x.ts; })
                             .with_periodic_emit_per_record(),
                         "records");
}

}  // namespace

// --- connect: orders and payments ---------------------------------------

// An order is paid when a payment of its id comes at most `within` ms after
// it.  At the deadline (an event-time timer at order + within) the function
// says "paid ID CENTS" (the first such payment) or "unpaid ID".  It decides on
// the timestamps alone: the timer fires once both inputs' watermarks have
// passed the deadline, so every payment up to it has arrived, however the two
// inputs interleave.
struct PaymentCheck : KeyedCoProcessFunction<int64_t, Order, Payment, std::string> {
  Timestamp within = 50;
  void process_element1(const Order& o, Context& ctx, Collector<std::string>&) override {
    ctx.get_state<Timestamp>("order").update(o.ts);
    ctx.timer_service().register_event_time_timer(o.ts + within);
  }
  void process_element2(const Payment& p, Context& ctx, Collector<std::string>&) override {
    ctx.get_map_state<Timestamp, int64_t>("payments").put(p.ts, p.cents);
  }
  void on_timer(Timestamp t, OnTimerContext& ctx, Collector<std::string>& out) override {
    auto order = ctx.get_state<Timestamp>("order");
    const auto& paid = ctx.get_map_state<Timestamp, int64_t>("payments").entries();
    const std::string id = std::to_string(ctx.get_current_key());
    auto it = paid.lower_bound(*order.value());
    if (it != paid.end() && it->first <= t) {
      out.collect("paid " + id + " " + std::to_string(it->second));
    } else {
      out.collect("unpaid " + id);
    }
    order.clear();
  }
};

std::vector<Order> MakeOrders(int n) {
  std::vector<Order> v;
  for (int64_t id = 0; id < n; ++id) v.push_back({id, id * 10});
  return v;
}
// In time order: a third never paid, a third in time, a third too late.
std::vector<Payment> MakePayments(int n) {
  std::vector<Payment> v;
  for (int64_t id = 0; id < n; ++id) {
    if (id % 3 == 0) continue;
    v.push_back({id, id * 10 + (id % 3 == 1 ? 20 : 70), 100 + id});
  }
  std::sort(v.begin(), v.end(), [](const Payment& a, const Payment& b) { return a.ts < b.ts; });
  return v;
}

DataStream<std::string> PaymentsJob(StreamExecutionEnvironment& env,
                                    const std::vector<Order>& orders,
                                    const std::vector<Payment>& payments) {
  auto os = InTimeOrder(env, orders);
  auto ps = InTimeOrder(env, payments);
  return os.key_by([](const Order& o) { return o.id; })
      .connect(ps.key_by([](const Payment& p) { return p.id; }))
      .process(PaymentCheck());
}

// --- broadcast: readings and limits ------------------------------------

// Sensor (or "*") -> the limits by the time they start.
const MapStateDescriptor<std::string, std::map<Timestamp, int64_t>>& LimitsState() {
  static const MapStateDescriptor<std::string, std::map<Timestamp, int64_t>> d("limits");
  return d;
}

// "SENSOR@TS>MAX" for a reading above the limit in force at its time (the
// sensor's own or "*", the later one).  Readings wait in keyed state for an
// event-time timer at their time, when every limit up to it has arrived.
struct LimitCheck : KeyedBroadcastProcessFunction<std::string, Reading, Limit, std::string> {
  void process_element(const Reading& r, ReadOnlyContext& ctx, Collector<std::string>&) override {
    ctx.get_map_state<Timestamp, int64_t>("pending").put(r.ts, r.value);
    ctx.timer_service().register_event_time_timer(r.ts);
  }
  void process_broadcast_element(const Limit& l, Context& ctx, Collector<std::string>&) override {
    auto limits = ctx.get_broadcast_state(LimitsState());
    auto versions = limits.get(l.sensor).value_or(std::map<Timestamp, int64_t>{});
    versions[l.ts] = l.max;
    limits.put(l.sensor, versions);
  }
  void on_timer(Timestamp t, ReadOnlyContext& ctx, Collector<std::string>& out) override {
    auto pending = ctx.get_map_state<Timestamp, int64_t>("pending");
    const int64_t value = *pending.get(t);
    pending.remove(t);
    auto limits = ctx.get_broadcast_state(LimitsState());
    std::optional<int64_t> max;
    Timestamp since = kMinTimestamp;
    for (const std::string& s : {ctx.get_current_key(), std::string("*")}) {
      auto versions = limits.get(s);
      if (!versions) continue;
      auto it = versions->upper_bound(t);
      if (it == versions->begin()) continue;
      --it;
      if (it->first >= since) {
        since = it->first;
        max = it->second;
      }
    }
    if (max && value > *max)
      out.collect(ctx.get_current_key() + "@" + std::to_string(t) + ">" + std::to_string(*max));
  }
};

std::vector<Reading> MakeReadings(int rounds) {
  std::vector<Reading> v;
  for (Timestamp t = 0; t < rounds * 4; t += 4)
    for (int i = 0; i < 5; ++i)
      v.push_back({"s" + std::to_string(i + 1), t + i, (t * 7 + 13 * i) % 100});
  return v;
}
std::vector<Limit> MakeLimits() {
  return {{"*", 0, 90}, {"s2", 50, 40}, {"*", 150, 60}, {"s4", 200, 10}, {"s2", 300, 95}};
}

DataStream<std::string> LimitsJob(StreamExecutionEnvironment& env,
                                  const std::vector<Reading>& readings,
                                  const std::vector<Limit>& limits) {
  auto rs = InTimeOrder(env, readings);
  auto ls = InTimeOrder(env, limits);
  return rs.key_by([](const Reading& r) { return r.sensor; })
      .connect(ls.broadcast(LimitsState()))
      .process(LimitCheck());
}

// --- interval join: clicks and views ------------------------------------

std::vector<Click> MakeClicks(int n) {
  std::vector<Click> v;
  for (Timestamp t = 0; t < n * 7; t += 7) v.push_back({(t / 7) % 5, t});
  return v;
}
std::vector<View> MakeViews(int n) {
  std::vector<View> v;
  for (Timestamp t = 3; t < n * 5 + 3; t += 5)
    v.push_back({(t / 5) % 4, t, "p" + std::to_string(t % 11)});
  return v;
}

// "USER CLICK_TS PAGE VIEW_TS" for every view of the user from `before` ms
// before the click to `after` ms after it (inclusive).
DataStream<std::string> ClickViewJob(StreamExecutionEnvironment& env,
                                     const std::vector<Click>& clicks,
                                     const std::vector<View>& views, Timestamp before,
                                     Timestamp after) {
  auto cs = InTimeOrder(env, clicks);
  auto vs = InTimeOrder(env, views);
  return cs.key_by([](const Click& c) { return c.user; })
      .interval_join(vs.key_by([](const View& v) { return v.user; }))
      .between(Duration(-before), Duration(after))
      .process([](const Click& c, const View& v, Collector<std::string>& out) {
        out.collect(std::to_string(c.user) + " " + std::to_string(c.ts) + " " + v.page + " " +
                    std::to_string(v.ts));
      });
}

// "USER WINDOW_START CLICK_TS PAGE VIEW_TS" for every click and view of a
// user in the same 50 ms tumbling window (the window join).
DataStream<std::string> ClickViewWindowJob(StreamExecutionEnvironment& env,
                                           const std::vector<Click>& clicks,
                                           const std::vector<View>& views) {
  auto cs = InTimeOrder(env, clicks);
  auto vs = InTimeOrder(env, views);
  return cs.join(vs)
      .where([](const Click& c) { return c.user; })
      .equal_to([](const View& v) { return v.user; })
      .window(TumblingEventTimeWindows::of(Duration(50)))
      .apply([](const Click& c, const View& v) {
        return std::to_string(c.user) + " " + std::to_string(c.ts / 50 * 50) + " " +
               std::to_string(c.ts) + " " + v.page + " " + std::to_string(v.ts);
      });
}

// --- split: one stream into three ---------------------------------------

const OutputTag<std::string>& ErrorsTag() {
  static const OutputTag<std::string> t("errors");
  return t;
}
const OutputTag<int64_t>& LargeTag() {
  static const OutputTag<int64_t> t("large");
  return t;
}

// Lines of numbers: a number of at most 1000 goes on, doubled; a larger one
// to the "large" side output; a line that is not a number to "errors".
DataStream<int64_t> SplitJob(StreamExecutionEnvironment& env,
                             const std::vector<std::string>& lines) {
  OutputTag<std::string> errors = ErrorsTag();
  OutputTag<int64_t> large = LargeTag();
  return env.from_collection(lines).rebalance().process(
      [errors, large](const std::string& line, ProcessContext& ctx, Collector<int64_t>& out) {
        int64_t v = 0;
        size_t used = 0;
        try {
          v = std::stoll(line, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != line.size()) {
          ctx.output(errors, "not a number: '" + line + "'");
        } else if (v > 1000) {
          ctx.output(large, v);
        } else {
          out.collect(v * 2);
        }
      });
}

std::vector<std::string> MakeLines(int n) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) {
    if (i % 13 == 5) {
      v.push_back("x" + std::to_string(i));
    } else {
      v.push_back(std::to_string((i * 379) % 1500));
    }
  }
  return v;
}

}  // namespace tidemark::examples
