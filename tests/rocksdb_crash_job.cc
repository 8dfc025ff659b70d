// A keyed process job whose state is on the RocksDB state backend (or the
// heap), checkpointed every 30 ms into CHK (restored from the latest
// checkpoint there) with exactly-once part files in OUT, for
// rocksdb_incremental_test's kill -9 test: killed at random moments and
// started again, its committed output must equal a run never killed.
// Each record adds its value to its key's ValueState and MapState and
// appends to its ListState; every record emits "key,count,sum,list size".
//   rocksdb_crash_job heap|rocksdb full|incremental CHK OUT RECORDS RATE PARALLELISM [DBDIR]
// DBDIR: where RocksDB's working directories go (default: the system's temp
// directory); a killed run leaves its own there.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/tidemark.h"

namespace {
using namespace tidemark;
using Rec = std::pair<int64_t, int64_t>;  // key, value

struct Count : KeyedProcessFunction<int64_t, Rec, std::string> {
  void process_element(const Rec& r, Context& ctx, Collector<std::string>& out) override {
    auto count = ctx.get_state<int64_t>("count");
    auto recent = ctx.get_list_state<int64_t>("recent");
    auto sums = ctx.get_map_state<int64_t, int64_t>("sum by value mod 7");
    const int64_t n = count.value_or(0) + 1;
    count.update(n);
    recent.add(r.second);
    if (n % 8 == 0) recent.clear();  // lists grow and shrink
    const int64_t m = r.second % 7;
    sums.put(m, sums.get(m).value_or(0) + r.second);
    int64_t total = 0;
    for (const auto& [k, v] : sums.entries()) total += v;
    int64_t size = 0;
    for (int64_t x : recent.get()) size += x >= 0 ? 1 : 0;
    out.collect(absl::StrCat(r.first, ",", n, ",", total, ",", size));
  }
};
}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    std::cerr << "usage: rocksdb_crash_job heap|rocksdb full|incremental CHK OUT RECORDS RATE "
                 "PARALLELISM [DBDIR]\n";
    return 2;
  }
  const bool rocksdb = std::string(argv[1]) == "rocksdb";
  const bool incremental = std::string(argv[2]) == "incremental";
  const std::string chk = argv[3], out = argv[4];
  const int64_t records = std::atoll(argv[5]);
  const double rate = std::atof(argv[6]);
  const int p = std::atoi(argv[7]);
  StreamExecutionEnvironment env;
  if (rocksdb) {
    StateBackend b = StateBackend::rocksdb(argc > 8 ? argv[8] : "");
    b.cache_entries = 64;  // entries go to RocksDB and back all the time
    env.set_state_backend(b);
  }
  if (!chk.empty() && chk != "-") {
    env.enable_checkpointing(Duration(30), chk).restore_from("latest");
    if (incremental) env.enable_incremental_checkpoints();
  }
  env.from_generator<Rec>(
         [](int64_t i) {
           uint64_t x = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
           x ^= x >> 29;
           return Rec{static_cast<int64_t>(x % 3000), static_cast<int64_t>((x >> 20) % 1000)};
         },
         records, rate)
      .set_parallelism(1)
      .key_by([](const Rec& r) { return r.first; })
      .process(Count{})
      .name("Counts")
      .set_parallelism(p)
      .sink_to_files(out, [](const std::string& s) { return s; })
      .set_parallelism(p);
  JobResult r = env.execute("rocksdb crash job");
  if (!r.ok()) {
    std::cerr << "job failed: " << r.status << "\n";
    return 1;
  }
  return 0;
}
