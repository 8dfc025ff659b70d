// A keyed process job whose state is about records * payload bytes (each
// key's ValueState<std::string> holds every payload the key received), for
// rocksdb_state_test's memory limit test: run under `ulimit -v`, it fails on
// the heap and completes on RocksDB.  Prints per key "key length checksum",
// sorted, then "done".  With window-heap|window-rocksdb (rocksdb_window_test)
// the state is window contents instead: one tumbling window over every
// record, a reduce appending the payloads per key, fired at the end; per key
// "key records length checksum".
//   rocksdb_memory_job [window-]heap|[window-]rocksdb KEYS RECORDS PAYLOAD [DIR]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <tuple>
#include <vector>

#include "tidemark/tidemark.h"

namespace {
using namespace tidemark;
constexpr Timestamp kReportAt = 1'000'000'000'000;  // after every record

struct Append : KeyedProcessFunction<int64_t, int64_t, std::string> {
  size_t payload = 0;
  void process_element(const int64_t& i, Context& ctx, Collector<std::string>&) override {
    auto s = ctx.get_state<std::string>("payloads");
    std::string v = s.value_or("");
    v.append(payload, static_cast<char>('a' + (i * 7 + i / 13) % 26));
    s.update(std::move(v));
    ctx.timer_service().register_event_time_timer(kReportAt);
  }
  void on_timer(Timestamp, OnTimerContext& ctx, Collector<std::string>& out) override {
    auto s = ctx.get_state<std::string>("payloads");
    const std::string v = s.value_or("");
    uint64_t h = 1469598103934665603ull;
    for (char c : v) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    out.collect(std::to_string(ctx.get_current_key()) + " " + std::to_string(v.size()) + " " +
                std::to_string(h));
    s.clear();
  }
};

uint64_t Checksum(const std::string& v) {
  uint64_t h = 1469598103934665603ull;
  for (char c : v) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// key, records, payloads
using Part = std::tuple<int64_t, int64_t, std::string>;

std::shared_ptr<CollectedResults<std::string>> WindowJob(StreamExecutionEnvironment& env,
                                                         int64_t keys, int64_t records,
                                                         size_t payload) {
  return env
      .from_generator<Part>(
          [keys, payload](int64_t i) {
            return Part{i % keys, 1,
                        std::string(payload, static_cast<char>('a' + (i * 7 + i / 13) % 26))};
          },
          records)
      .assign_timestamps_and_watermarks(
          WatermarkStrategy<Part>::for_monotonous_timestamps().with_timestamp_assigner(
              [](const Part&, Timestamp) { return Timestamp{1}; }))
      .key_by([](const Part& p) { return std::get<0>(p); })
      .window(TumblingEventTimeWindows::of(Duration(kReportAt)))
      .reduce(
          [](const Part& a, const Part& b) {
            return Part{std::get<0>(a), std::get<1>(a) + std::get<1>(b),
                        std::get<2>(a) + std::get<2>(b)};
          },
          [](const int64_t& key, const TimeWindow&, const Part& p, WindowContext&,
             Collector<std::string>& out) {
            out.collect(std::to_string(key) + " " + std::to_string(std::get<1>(p)) + " " +
                        std::to_string(std::get<2>(p).size()) + " " +
                        std::to_string(Checksum(std::get<2>(p))));
          })
      .collect();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::cerr << "usage: rocksdb_memory_job heap|rocksdb KEYS RECORDS PAYLOAD [DIR]\n";
    return 2;
  }
  std::string backend = argv[1];
  const bool window = backend.rfind("window-", 0) == 0;
  if (window) backend = backend.substr(7);
  const int64_t keys = std::atoll(argv[2]);
  const int64_t records = std::atoll(argv[3]);
  Append f;
  f.payload = static_cast<size_t>(std::atoll(argv[4]));
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  StateBackend rocks = StateBackend::rocksdb(argc > 5 ? argv[5] : "");
  rocks.cache_entries = 256;  // of 4 000-byte values: 1 MB
  env.set_state_backend(backend == "rocksdb" ? rocks : StateBackend::heap());
  auto results =
      window
          ? WindowJob(env, keys, records, f.payload)
          : env.from_generator<int64_t>([](int64_t i) { return i; }, records)
                .assign_timestamps_and_watermarks(
                    WatermarkStrategy<int64_t>::for_monotonous_timestamps().with_timestamp_assigner(
                        [](const int64_t& i, Timestamp) { return i; }))
                .key_by([keys](const int64_t& i) { return i % keys; })
                .process(f)
                .collect();
  JobResult r = env.execute("memory");
  if (!r.ok()) {
    std::cerr << "job failed: " << r.status << "\n";
    return 1;
  }
  std::vector<std::string> out;
  for (const auto& item : results->items()) out.push_back(item.value);
  std::sort(out.begin(), out.end());
  for (const std::string& line : out) std::cout << line << "\n";
  std::cout << "done\n";
  return 0;
}
