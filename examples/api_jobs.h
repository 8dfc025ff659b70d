// examples/api_jobs.h
//
// The jobs of the API examples (examples/*_example.cc), shared with
// tests/api_examples_test.cc, which runs each at parallelism 1 and 3 on
// generated data and checks it against a reference computation.
//
//   connect_example      two inputs, keyed state and event-time timers
//                        (KeyedCoProcessFunction): orders and their payments
//   broadcast_example    broadcast state (KeyedBroadcastProcessFunction):
//                        sensor readings checked against limits pushed to
//                        every subtask
//   join_example         the interval join (clicks and the page views
//                        around them) and the window join (clicks and views
//                        in the same tumbling window)
//   split_example        DataStream::process on a stream that is not keyed,
//                        splitting it with side outputs
//
// Each job reads collections and returns the stream the example prints; the
// data generators make the same input for the program and the test.
#ifndef TM_EXAMPLES_API_JOBS_H_
#define TM_EXAMPLES_API_JOBS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tidemark/tidemark.h"

namespace tidemark::examples {

// The jobs are in examples/api_jobs.cc (compiled once for the programs and the
// test, not in each file that includes this header).

// --- connect: orders and payments ---------------------------------------

struct Order {
  int64_t id;
  Timestamp ts;
};
struct Payment {
  int64_t id;
  Timestamp ts;
  int64_t cents;
};

std::vector<Order> MakeOrders(int n);
// In time order: a third never paid, a third in time, a third too late.
std::vector<Payment> MakePayments(int n);

// An order is paid when a payment of its id comes at most 50 ms after it.
// At the deadline (an event-time timer at order + 50) the job says "paid ID
// CENTS" (the first such payment) or "unpaid ID" (a KeyedCoProcessFunction,
// PaymentCheck in api_jobs.cc).
DataStream<std::string> PaymentsJob(StreamExecutionEnvironment& env,
                                    const std::vector<Order>& orders,
                                    const std::vector<Payment>& payments);

// --- broadcast: readings and limits ------------------------------------

struct Reading {
  std::string sensor;
  Timestamp ts;
  int64_t value;
};
struct Limit {
  std::string sensor;  // "*": every sensor
  Timestamp ts;        // from this time on
  int64_t max;
};

std::vector<Reading> MakeReadings(int rounds);
std::vector<Limit> MakeLimits();

// "SENSOR@TS>MAX" for a reading above the limit in force at its time (the
// sensor's own or "*", the later one), from broadcast state
// (KeyedBroadcastProcessFunction, LimitCheck in api_jobs.cc).
DataStream<std::string> LimitsJob(StreamExecutionEnvironment& env,
                                  const std::vector<Reading>& readings,
                                  const std::vector<Limit>& limits);

// --- interval join: clicks and views ------------------------------------

struct Click {
  int64_t user;
  Timestamp ts;
};
struct View {
  int64_t user;
  Timestamp ts;
  std::string page;
};

std::vector<Click> MakeClicks(int n);
std::vector<View> MakeViews(int n);

// "USER CLICK_TS PAGE VIEW_TS" for every view of the user from `before` ms
// before the click to `after` ms after it (inclusive).
DataStream<std::string> ClickViewJob(StreamExecutionEnvironment& env,
                                     const std::vector<Click>& clicks,
                                     const std::vector<View>& views, Timestamp before,
                                     Timestamp after);
// "USER WINDOW_START CLICK_TS PAGE VIEW_TS" for every click and view of a
// user in the same 50 ms tumbling window (the window join).
DataStream<std::string> ClickViewWindowJob(StreamExecutionEnvironment& env,
                                           const std::vector<Click>& clicks,
                                           const std::vector<View>& views);

// --- split: one stream into three ---------------------------------------

const OutputTag<std::string>& ErrorsTag();
const OutputTag<int64_t>& LargeTag();
// Lines of numbers: a number of at most 1000 goes on, doubled; a larger one
// to the "large" side output; a line that is not a number to "errors".
DataStream<int64_t> SplitJob(StreamExecutionEnvironment& env,
                             const std::vector<std::string>& lines);
std::vector<std::string> MakeLines(int n);

}  // namespace tidemark::examples

#endif  // TM_EXAMPLES_API_JOBS_H_
