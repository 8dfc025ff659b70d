// tests/window_without_rocksdb.cc: see window_without_rocksdb.h.
#include "window_without_rocksdb.h"

#include <algorithm>
#include <tuple>

#ifdef TIDEMARK_ROCKSDB_WINDOWS
#error \
    "window_without_rocksdb must be compiled without TIDEMARK_ROCKSDB_WINDOWS (tests/CMakeLists.txt)"
#endif

namespace tidemark::testing {
namespace {
using Rec = std::tuple<int64_t, int64_t, int64_t>;  // key, timestamp, value
struct Max {
  int64_t create_accumulator() const { return 0; }
  int64_t add(const Rec& r, int64_t acc) const { return std::max(acc, std::get<2>(r)); }
  int64_t get_result(int64_t acc) const { return acc; }
  int64_t merge(int64_t a, int64_t b) const { return std::max(a, b); }
};
}  // namespace

std::shared_ptr<CollectedResults<std::string>> AddWindowsBuiltWithoutRocksDb(
    StreamExecutionEnvironment& env, int64_t n, const std::string& sums, const std::string& maxes) {
  auto keyed = env.from_generator<Rec>(
                      [](int64_t i) {
                        return Rec{i % 13, i, i % 7};
                      },
                      n)
                   .assign_timestamps_and_watermarks(
                       WatermarkStrategy<Rec>::for_monotonous_timestamps().with_timestamp_assigner(
                           [](const Rec& r, Timestamp) { return std::get<1>(r); }))
                   .key_by([](const Rec& r) { return std::get<0>(r); });
  auto line = [](const std::string& name) {
    return [name](const int64_t& key, const TimeWindow& w, const int64_t& v, WindowContext&,
                  Collector<std::string>& out) {
      out.collect(name + " " + std::to_string(key) + " " + std::to_string(w.start) + " " +
                  std::to_string(v));
    };
  };
  auto a = keyed.window(TumblingEventTimeWindows::of(Duration(100)))
               .reduce<std::string>(
                   [](const Rec& x, const Rec& y) {
                     return Rec{std::get<0>(x), std::get<1>(x), std::get<2>(x) + std::get<2>(y)};
                   },
                   [f = line(sums)](const int64_t& key, const TimeWindow& w, const Rec& r,
                                    WindowContext& ctx, Collector<std::string>& out) {
                     f(key, w, std::get<2>(r), ctx, out);
                   })
               .name(sums);
  auto b = keyed.window(SlidingEventTimeWindows::of(Duration(100), Duration(50)))
               .aggregate<std::string>(Max{}, line(maxes))
               .name(maxes);
  return a.union_with(b).collect();
}

}  // namespace tidemark::testing
