// A keyed process job whose state is about records * payload bytes (each
// key's ValueState<std::string> holds every payload the key received), for
// rocksdb_state_test's memory limit test: run under `ulimit -v`, it fails on
// the heap and completes on RocksDB.  Prints per key "key length checksum",
// sorted, then "done".  With window-heap|window-rocksdb (rocksdb_window_test)
// the state is window contents instead: one tumbling window over every
// record, a reduce appending the payloads per key, fired at the end; per key
// "key records length checksum".
//   rocksdb_memory_job [window-]heap|[window-]rocksdb KEYS RECORDS PAYLOAD [DIR] [FLAGS]
// Flags: --write-buffer-size=BYTES, --max-write-buffer-number=N,
// --block-cache-size=BYTES, --max-open-files=N, --cache-index-and-filter-blocks
// (StateBackend::rocksdb_options), --cache-entries=N (default 256),
// --batch-size=RECORDS (the job's batch size), --peak-file=PATH (writes
// "VmPeak VmHWM" in kB from /proc/self/status there at the end, so a test
// can size its memory limit from what the run really used).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// "VmPeak VmHWM" in kB, from /proc/self/status.
std::string PeakMemory() {
  std::ifstream in("/proc/self/status");
  std::string line, peak = "?", hwm = "?";
  while (std::getline(in, line)) {
    auto value = [&line] {
      std::string v = line.substr(line.find(':') + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      return v.substr(0, v.find(' '));
    };
    if (line.rfind("VmPeak:", 0) == 0) peak = value();
    if (line.rfind("VmHWM:", 0) == 0) hwm = value();
  }
  return peak + " " + hwm;
}
}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args, flags;
  for (int i = 1; i < argc; ++i)
    (std::string(argv[i]).rfind("--", 0) == 0 ? flags : args).push_back(argv[i]);
  if (args.size() < 4) {
    std::cerr << "usage: rocksdb_memory_job [window-]heap|[window-]rocksdb KEYS RECORDS PAYLOAD "
                 "[DIR] [FLAGS]\n";
    return 2;
  }
  std::string backend = args[0];
  const bool window = backend.rfind("window-", 0) == 0;
  if (window) backend = backend.substr(7);
  const int64_t keys = std::atoll(args[1].c_str());
  const int64_t records = std::atoll(args[2].c_str());
  Append f;
  f.payload = static_cast<size_t>(std::atoll(args[3].c_str()));
  StreamExecutionEnvironment env;
  env.set_parallelism(1);
  StateBackend rocks = StateBackend::rocksdb(args.size() > 4 ? args[4] : "");
  rocks.cache_entries = 256;  // of 4 000-byte values: 1 MB
  std::string peak_file;
  for (const std::string& flag : flags) {
    const size_t eq = flag.find('=');
    const std::string name = flag.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : flag.substr(eq + 1);
    const int64_t n = std::atoll(value.c_str());
    RocksDbOptions& o = rocks.rocksdb_options;
    if (name == "--write-buffer-size") {
      o.write_buffer_size = static_cast<size_t>(n);
    } else if (name == "--max-write-buffer-number") {
      o.max_write_buffer_number = static_cast<int>(n);
    } else if (name == "--block-cache-size") {
      o.block_cache_size = static_cast<size_t>(n);
    } else if (name == "--max-open-files") {
      o.max_open_files = static_cast<int>(n);
    } else if (name == "--cache-index-and-filter-blocks") {
      o.cache_index_and_filter_blocks = true;
    } else if (name == "--cache-entries") {
      rocks.cache_entries = static_cast<size_t>(n);
    } else if (name == "--batch-size") {
      env.set_batch_size(static_cast<size_t>(n));
    } else if (name == "--peak-file") {
      peak_file = value;
    } else {
      std::cerr << "rocksdb_memory_job: unknown flag " << flag << "\n";
      return 2;
    }
  }
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
  if (!peak_file.empty()) std::ofstream(peak_file) << PeakMemory() << "\n";
  return 0;
}
