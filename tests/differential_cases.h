// tests/differential_cases.h: the cases of the randomized differential tests
// (differential_test.cc; a sample also runs across MPI ranks, mpi/mpi_job.cc).
// The types and declarations; the generator, the runner and the comparison
// are in differential_cases.cc.
//
// Scripted jobs run on the real multi-threaded runtime and on the sequential reference model
// (reference_model.h, whose file comment explains why the compared results cannot depend on thread
// timing), compared result by result.
//
// Each case is made from a seed: 1-8 source subtasks, 1-8 window subtasks,
// 1-10 000 keys, tumbling / sliding (with offsets) / session windows, lateness
// 0 or more, late side output on or off, aggregate / reduce / process window
// functions, bounded disorder and occasional very late records, lagging and
// idle sources (MarkIdle, then later records and watermarks), small batches
// and channels (back-pressure), chaining on or off, 1-3 worker threads.
//
// Compared: the multiset of window firings (key, window, count, fired by
// element or timer; sum, record fingerprint and watermark where the model says
// they are determined), per-key order (a window's firings in increasing count;
// a key's timer firings in increasing window end; one subtask per key), the
// late side output (ids and timestamps), numLateRecordsDropped.  Conservation
// (tumbling): every record is counted exactly once in the last firing of its
// window, the side output or the dropped counter.
//
// Environment:
//   TIDEMARK_STRESS_SCALE  scales the number of cases (long mode: e.g. 20);
//   TIDEMARK_DIFF_SEED     runs only that seed (as printed by a failure);
//   TIDEMARK_DIFF_FIRST_SEED  first seed of the range (default 1).
// A failing case prints its seed, a shrunk reproduction (parameters and every
// source's script) and the differences.
#ifndef TM_TESTS_DIFFERENTIAL_CASES_H_
#define TM_TESTS_DIFFERENTIAL_CASES_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "reference_model.h"
#include "test_util.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
// Inline: the including tests name these tidemark::X, as before.
inline namespace differential {

using namespace std::chrono_literals;
namespace m = model;

// ---------------------------------------------------------------------------
// Records and outputs.

struct Ev {
  int64_t id = 0;
  int64_t key = 0;
  int64_t value = 0;
  // Reduce accumulates in the record itself.
  int64_t count = 1;
  uint64_t id_hash = 0;
};

struct Fire {
  int64_t key = 0;
  int64_t start = 0;
  int64_t end = 0;
  int64_t count = 0;
  int64_t sum = 0;
  uint64_t id_hash = 0;
  bool by_element = false;
  Timestamp watermark = 0;
  int subtask = 0;
  std::string ToString() const {
    std::ostringstream o;
    o << "key=" << key << " [" << start << "," << end << ") count=" << count << " sum=" << sum
      << " " << (by_element ? "element" : "timer") << " wm=" << m::TsStr(watermark)
      << " subtask=" << subtask;
    return o.str();
  }
};

struct Acc {
  int64_t count = 0;
  int64_t sum = 0;
  uint64_t id_hash = 0;
};
struct SumAgg {
  Acc create_accumulator() const { return {}; }
  Acc add(const Ev& e, Acc a) const {
    a.count += 1;
    a.sum += e.value;
    a.id_hash += m::IdHash(e.id);
    return a;
  }
  Acc get_result(const Acc& a) const { return a; }
  Acc merge(Acc a, const Acc& b) const {
    a.count += b.count;
    a.sum += b.sum;
    a.id_hash += b.id_hash;
    return a;
  }
};

enum class Function { kAggregate, kReduce, kProcess };
const char* Name(Function f);

// ---------------------------------------------------------------------------
// A case.

struct Case {
  uint64_t seed = 0;
  int sources = 1;
  int window_parallelism = 1;
  int64_t keys = 1;
  m::WindowSpec spec;
  Function function = Function::kAggregate;
  size_t batch_size = 1024;
  size_t channel_capacity = 4;
  int64_t buffer_timeout_ms = 100;
  int worker_threads = 2;
  bool chaining = true;
  // Local pre-aggregation before the key_by (reduce / aggregate, tumbling /
  // sliding only; 0: off), with this bound on the partials held.
  size_t local_aggregation = 0;
  // Where the window's state lives (rocksdb_window_test: RocksDB, at several
  // cache sizes).
  StateBackend backend;
  m::Script script;

  std::string Describe() const {
    std::ostringstream o;
    o << "seed=" << seed << " sources=" << sources << " window_parallelism=" << window_parallelism
      << " keys=" << keys << " window: " << spec.ToString() << " function=" << Name(function)
      << " batch=" << batch_size << " capacity=" << channel_capacity
      << " buffer_timeout=" << buffer_timeout_ms << "ms workers=" << worker_threads
      << " chaining=" << (chaining ? "on" : "off");
    if (local_aggregation > 0) o << " local_aggregation(max_partials=" << local_aggregation << ")";
    if (backend.is_rocksdb())
      o << " backend=rocksdb(cache_entries=" << backend.cache_entries << ")";
    o << " rounds=" << script.num_rounds() << " records=" << script.num_records();
    return o.str();
  }
  std::string DescribeScript() const {
    std::ostringstream o;
    for (int r = 0; r < script.num_rounds(); ++r) {
      o << "  round " << r << " W=" << m::TsStr(script.watermarks[r]) << "\n";
      for (int s = 0; s < sources; ++s) {
        const m::SourceRound& sr = script.rounds[r][s];
        if (sr.mode == m::Mode::kSilent || sr.mode == m::Mode::kStayIdle) {
          o << "    source " << s << ": " << m::Name(sr.mode) << "\n";
          continue;
        }
        o << "    source " << s << ": " << m::Name(sr.mode);
        if (!sr.records.empty()) o << " records(id,key,ts,value):";
        for (const m::Rec& rec : sr.records)
          o << " (" << rec.id << "," << rec.key << "," << rec.ts << "," << rec.value << ")";
        o << (m::EmitsWatermark(sr.mode) ? " then W" : " then IDLE") << "\n";
      }
    }
    o << "  then every source: W(MAX), end\n";
    return o.str();
  }
};

// ---------------------------------------------------------------------------
// The round barrier (the scripted source is in differential_cases.cc).

class RoundBarrier final : public WatermarkListener {
 public:
  RoundBarrier(int window_subtasks, int sources, std::vector<m::RoundEnd> ends)
      : ends_(std::move(ends)),
        channels_(static_cast<size_t>(window_subtasks),
                  std::vector<m::ChannelState>(static_cast<size_t>(sources))),
        outputs_(static_cast<size_t>(window_subtasks), kMinTimestamp),
        subtask_passed_(static_cast<size_t>(window_subtasks), -1) {}

  void OnInputChannel(const ChannelEvent& e) override {
    if (e.task_name->rfind("Window(", 0) != 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (e.subtask < 0 || e.subtask >= static_cast<int>(channels_.size()) || e.channel < 0 ||
        e.channel >= static_cast<int>(channels_[0].size())) {
      bad_event_ = true;
      return;
    }
    channels_[e.subtask][e.channel] = {e.channel_watermark, e.channel_idle};
    outputs_[e.subtask] = e.aligned;
    AdvanceLocked();
  }

  // Whether every window subtask has consumed round `r` (r < 0: trivially).
  bool Passed(int r) {
    if (r < 0 || passed_.load(std::memory_order_acquire) >= r) return true;
    std::lock_guard<std::mutex> lock(mu_);
    AdvanceLocked();
    return passed_.load(std::memory_order_relaxed) >= r;
  }
  bool bad_event() {
    std::lock_guard<std::mutex> lock(mu_);
    return bad_event_;
  }

 private:
  // Each subtask passes round r once its valve shows round r's end; the job
  // has passed r when every subtask has.  (Per subtask, not all at one
  // instant: across MPI ranks the events of other ranks' subtasks arrive
  // later, when a subtask may already be in the next round.)
  void AdvanceLocked() {
    int all = static_cast<int>(ends_.size());
    for (size_t j = 0; j < channels_.size(); ++j) {
      for (;;) {
        const int next = subtask_passed_[j] + 1;
        if (next >= static_cast<int>(ends_.size())) break;
        const m::RoundEnd& want = ends_[next];
        bool match = outputs_[j] == want.output;
        for (size_t c = 0; match && c < want.channels.size(); ++c)
          match = channels_[j][c] == want.channels[c];
        if (!match) break;
        subtask_passed_[j] = next;
      }
      all = std::min(all, subtask_passed_[j]);
    }
    if (all > passed_.load(std::memory_order_relaxed))
      passed_.store(all, std::memory_order_release);
  }

  const std::vector<m::RoundEnd> ends_;
  std::mutex mu_;
  std::vector<std::vector<m::ChannelState>> channels_;  // [window subtask][channel]
  std::vector<Timestamp> outputs_;
  std::vector<int> subtask_passed_;  // the last round each subtask has passed
  std::atomic<int> passed_{-1};
  bool bad_event_ = false;
};

// ---------------------------------------------------------------------------
// Running a case on the runtime.

struct LateItem {
  int64_t id;
  Timestamp ts;
  bool operator<(const LateItem& o) const { return std::tie(id, ts) < std::tie(o.id, o.ts); }
  bool operator==(const LateItem& o) const { return id == o.id && ts == o.ts; }
};

struct Actual {
  absl::Status status;
  bool hung = false;
  bool bad_listener_event = false;
  std::vector<Fire> firings;  // in collection order
  // Each firing's record timestamp (Flink: the window's max timestamp,
  // end - 1); empty where the results came from elsewhere (other ranks).
  std::vector<Timestamp> firing_timestamps;
  std::vector<LateItem> late;
  int64_t dropped = 0;
  int64_t combined = 0;  // local aggregation: records folded into partials
};

// What a run across MPI ranks changes (mpi/mpi_job.cc): the listener the job
// gets (the round barrier, told of other ranks' window subtasks too), the
// placement, and what happens with the results once the job ended (gathered
// at rank 0).  Empty on one process.
struct RunHooks {
  std::function<std::shared_ptr<WatermarkListener>(std::shared_ptr<RoundBarrier>)> listener;
  PlacementFunction placement;
  std::function<void(Actual&)> after;
};

struct Outcome {
  std::vector<std::string> errors;
  // What the case exercised (from the model).
  size_t timer_firings = 0, element_firings = 0, late = 0, dropped = 0;
  int64_t combined = 0;  // local aggregation (the runtime's counter)
};

// The functions below are in differential_cases.cc (compiled once, linked by
// differential_test, rocksdb_window_test and mpi_job).
// The case of `seed`: its parameters and every source's script.
Case Generate(uint64_t seed, m::WindowKind kind);
// Runs the case on the runtime.
Actual Run(const Case& c, const RunHooks& hooks = {});
// The model's results, or `problem` set when the model rejects the case.
m::Result ModelResult(const Case& c, std::string* problem);
// What differs between the model's results and the runtime's.
std::vector<std::string> Compare(const Case& c, const m::Result& want, const Actual& got);
// Runs the case on the model and the runtime and compares.
Outcome RunCase(const Case& c, const RunHooks& hooks = {});
// Removes records while the case still fails (at most `budget` runs).
Case Shrink(Case c, int budget);
// The value of environment variable `name`, if set.
std::optional<uint64_t> EnvSeed(const char* name);
// Runs the cases of `kind` (TIDEMARK_DIFF_SEED, TIDEMARK_DIFF_FIRST_SEED,
// TIDEMARK_STRESS_SCALE) and reports failures to GoogleTest.  `adjust`
// changes each generated case (e.g. turns local aggregation on).  Returns
// the total of the localAggregationRecordsCombined counters.
int64_t RunCases(m::WindowKind kind, int normal_count,
                 const std::function<void(Case&)>& adjust = nullptr);
}  // namespace differential
}  // namespace tidemark

#endif  // TM_TESTS_DIFFERENTIAL_CASES_H_
