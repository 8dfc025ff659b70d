// bench/micro_bench.cc
// (Longer than 600 lines: every micro-benchmark in one binary, one section per hot part.)
//
// Google Benchmark micro-benchmarks for the hot parts of the runtime:
//
//   BM_Channel_Handoff/<batch>           producer thread fills batches of
//                                        `batch` records (1 to 4096) and
//                                        pushes them; the benchmark thread
//                                        pops, reads and recycles them
//                                        (items/s = records/s);
//   BM_KeyGroup_Assign_{Int64,String}    key -> key group -> subtask;
//   BM_Partitioner_KeyGroups/<channels>  KeyGroupPartitioner::Select through
//                                        the Partitioner<T> interface, as the
//                                        ChannelWriter calls it;
//   BM_Partitioner_Rebalance/<channels>  for comparison;
//   BM_Valve_InputWatermark/<channels>   one watermark per call, round robin
//                                        over the channels;
//   BM_WatermarkGenerator_BoundedOutOfOrderness
//                                        OnEvent per record through the
//                                        WatermarkGenerator<T> interface, plus
//                                        a periodic emit every 4096 records;
//   BM_TimestampsAndWatermarksOperator/<assigner>
//                                        the whole operator per record, with
//                                        (1) or without (0) a
//                                        with_timestamp_assigner function;
//   BM_RollingReduce/<keys>              KeyedStream::reduce's operator per
//                                        record (flat_hash_map update + copy);
//   BM_KeyedProcess_ValueState/<batched>/<keys>
//                                        a keyed process function's value
//                                        state per record, one record a call
//                                        or batches of 256 (the state entries
//                                        loaded ahead);
//   BM_PlainLoop_HashMapSum/<keys>       the same sums in a plain loop (what
//                                        the end-to-end baseline does);
//   BM_FusedLoop_W1Core/<channels>       W1-core's work fused into one loop;
//   BM_WindowAssign_{Tumbling,Sliding,Session}
//                                        an event-time assigner per record
//                                        (sliding: size = 10 x slide);
//   BM_SessionMerge_AddWindow            MergingWindowSet::add_window per
//                                        record, merging into the session;
//   BM_TimerService_{RegisterNew,RegisterDuplicate,Delete}/<keys>
//                                        KeyedTimerService<int64_t,
//                                        TimeWindow>, one timer per key live;
//   BM_TimerService_Fire/<keys>          AdvanceWatermark firing <keys>
//                                        timers (items/s = timers fired/s);
//   BM_WindowOperator_TumblingReduce/<keys>
//                                        the window operator of W1
//                                        (FastWindowOperator; 1 s
//                                        tumbling event-time sum) driven on
//                                        one thread, a watermark every 1024
//                                        records (items/s = records/s);
//   BM_WindowOperator_TumblingReduceGeneralPath/<keys>
//                                        the same with a trigger that is not
//                                        EventTimeTrigger by type, so the
//                                        general WindowOperator runs it
//                                        (per-(key, window) timers).
//   BM_WindowOperator_SessionReduce/<keys>
//   BM_WindowOperator_SessionReduceGeneralPath/<keys>
//                                        the same input into W3's 20 ms
//                                        event-time session window, a
//                                        watermark every 2^19 records, on
//                                        FastSessionWindowOperator and on
//                                        the general WindowOperator.
//   BM_WindowTable_SnapshotEncode/<keys>
//                                        the asynchronous part of a window
//                                        table's checkpoint: W4's table (int64
//                                        keys, 24-byte values) with <keys>
//                                        keys in each of two windows, encoded
//                                        (bytes/s = encoded bytes/s).
//
// The variants with 1M keys allocate ~100 MB and take a few seconds each;
// the ctest smoke run leaves them out (--benchmark_filter=-/1000000$).
//
// A smoke run under ctest (bench/CMakeLists.txt) keeps them building and
// running; no test asserts a time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tests/window_harness.h"
#include "tidemark/tidemark.h"

namespace tidemark {
using namespace internal;
namespace {

struct Event {
  int64_t key;
  int64_t value;
  Timestamp ts;
};

inline uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::vector<int64_t> IntKeys(size_t n, int64_t distinct) {
  std::vector<int64_t> keys(n);
  for (size_t i = 0; i < n; ++i)
    keys[i] = static_cast<int64_t>(Mix(i) % static_cast<uint64_t>(distinct));
  return keys;
}

std::vector<Event> Events(size_t n, int64_t distinct) {
  std::vector<Event> ev(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t h = Mix(i);
    ev[i] = Event{static_cast<int64_t>(h % static_cast<uint64_t>(distinct)),
                  static_cast<int64_t>((h >> 32) & 1023), static_cast<Timestamp>(i)};
  }
  return ev;
}

// --- channel handoff --------------------------------------------------------

// A side of the channel running on a plain thread: follows the Task state
// machine (task.h) so that no wake-up is lost, and sleeps on a semaphore, as
// the executor's dedicated threads sleep on an eventfd.
class ThreadSide final : public Task, public Dispatcher {
 public:
  ThreadSide() : Task("bench side") {
    set_dispatcher(this);
    state().store(kRunning, std::memory_order_relaxed);
  }
  Result RunSlice() override { return Result::kWait; }
  void Dispatch(Task*) override { sem_.release(); }
  // Sleeps until notified (returns at once when a notification came in
  // since the last wait).
  void Wait() {
    int expected = kRunning;
    if (state().compare_exchange_strong(expected, kIdle, std::memory_order_acq_rel)) {
      sem_.acquire();
    }
    state().store(kRunning, std::memory_order_release);
  }

 private:
  std::binary_semaphore sem_{0};
};

void BM_Channel_Handoff(benchmark::State& state) {
  const size_t batch = static_cast<size_t>(state.range(0));
  // 2^20 records per iteration, but at most 4096 batches, so that the small
  // batches (a thread wake-up per batch at worst) keep an iteration short.
  const size_t batches = std::min<size_t>(4096, (size_t{1} << 20) / batch);
  int64_t checksum = 0;
  for (auto _ : state) {
    Channel<Event> ch(/*capacity=*/4);
    ThreadSide producer, consumer;
    ch.set_producer(&producer);
    ch.set_consumer(&consumer);
    std::thread t([&] {
      for (size_t b = 0; b < batches; ++b) {
        auto bt = ch.AcquireBatch();
        bt->records.reserve(batch);
        for (size_t r = 0; r < batch; ++r) {
          const auto i = static_cast<int64_t>(b * batch + r);
          bt->records.push_back(Record<Event>{Event{i & 1023, i, i}, i});
        }
        if (b + 1 == batches) bt->AddControl(ControlKind::kEndOfInput, 0);
        if (!ch.Push(std::move(bt))) {
          while (!ch.HasSpace()) producer.Wait();
        }
      }
    });
    bool ended = false;
    while (!ended) {
      auto bt = ch.Pop();
      if (!bt) {
        consumer.Wait();
        continue;
      }
      for (const auto& r : bt->records) checksum += r.value.value;
      ended = !bt->controls.empty();
      ch.Recycle(std::move(bt));
    }
    t.join();
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batches * batch));
  state.counters["batches/s"] = benchmark::Counter(
      static_cast<double>(state.iterations() * batches), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Channel_Handoff)
    ->Arg(1)
    ->Arg(16)
    ->Arg(64)
    ->Arg(256)
    ->Arg(1024)
    ->Arg(4096)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// --- key groups ---------------------------------------------------------------

void BM_KeyGroup_Assign_Int64(benchmark::State& state) {
  const auto keys = IntKeys(4096, 10000);
  const int p = static_cast<int>(state.range(0));
  size_t i = 0;
  int64_t acc = 0;
  for (auto _ : state) {
    acc += SubtaskForKey<int64_t>(keys[i], kDefaultMaxParallelism, p);
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyGroup_Assign_Int64)->Arg(2)->Arg(8);

void BM_KeyGroup_Assign_String(benchmark::State& state) {
  const auto ints = IntKeys(4096, 10000);
  std::vector<std::string> keys;
  keys.reserve(ints.size());
  for (int64_t k : ints) keys.push_back("sensor-" + std::to_string(k));
  const int p = static_cast<int>(state.range(0));
  size_t i = 0;
  int64_t acc = 0;
  for (auto _ : state) {
    acc += SubtaskForKey<std::string>(keys[i], kDefaultMaxParallelism, p);
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyGroup_Assign_String)->Arg(2)->Arg(8);

// --- partitioners -------------------------------------------------------------

void BM_Partitioner_KeyGroups(benchmark::State& state) {
  const auto ev = Events(4096, 10000);
  auto key = [](const Event& e) { return e.key; };
  std::unique_ptr<Partitioner<Event>> part =
      std::make_unique<KeyGroupPartitioner<Event, decltype(key)>>(
          key, static_cast<int>(state.range(0)), kDefaultMaxParallelism);
  size_t i = 0;
  int64_t acc = 0;
  for (auto _ : state) {
    acc += part->Select(ev[i]);
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Partitioner_KeyGroups)->Arg(2)->Arg(4)->Arg(8)->Arg(64);

void BM_Partitioner_Rebalance(benchmark::State& state) {
  const auto ev = Events(4096, 10000);
  std::unique_ptr<Partitioner<Event>> part =
      std::make_unique<RebalancePartitioner<Event>>(static_cast<int>(state.range(0)), 0);
  size_t i = 0;
  int64_t acc = 0;
  for (auto _ : state) {
    acc += part->Select(ev[i]);
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Partitioner_Rebalance)->Arg(2)->Arg(8);

// --- watermark valve ------------------------------------------------------------

class CountingEmitter final : public WatermarkValve::Emitter {
 public:
  void EmitWatermark(Timestamp w) override {
    ++watermarks;
    last = w;
  }
  void EmitStatus(WatermarkStatus) override { ++statuses; }
  int64_t watermarks = 0;
  int64_t statuses = 0;
  Timestamp last = kMinTimestamp;
};

void BM_Valve_InputWatermark(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  WatermarkValve valve(n);
  CountingEmitter out;
  int c = 0;
  Timestamp w = 0;
  for (auto _ : state) {
    // Channel c advances by one round: the minimum advances once per round.
    valve.InputWatermark(c, w, out);
    if (++c == n) {
      c = 0;
      ++w;
    }
  }
  benchmark::DoNotOptimize(out.last);
  state.SetItemsProcessed(state.iterations());
  state.counters["emitted"] = static_cast<double>(out.watermarks);
}
BENCHMARK(BM_Valve_InputWatermark)->RangeMultiplier(2)->Range(2, 64);

// --- watermark generation ---------------------------------------------------------

class NullWatermarkOutput final : public WatermarkOutput {
 public:
  void EmitWatermark(Timestamp w) override { last = w; }
  void MarkIdle() override {}
  void MarkActive() override {}
  Timestamp last = kMinTimestamp;
};

void BM_WatermarkGenerator_BoundedOutOfOrderness(benchmark::State& state) {
  const auto ev = Events(4096, 10000);
  auto strategy = WatermarkStrategy<Event>::for_bounded_out_of_orderness(Duration(100));
  std::unique_ptr<WatermarkGenerator<Event>> gen = strategy.CreateGenerator(SystemClock::Get());
  NullWatermarkOutput out;
  size_t i = 0;
  Timestamp base = 0;
  for (auto _ : state) {
    gen->OnEvent(ev[i], base + ev[i].ts, out);
    if (++i == 4096) {
      i = 0;
      base += 4096;
      gen->OnPeriodicEmit(out);
    }
  }
  benchmark::DoNotOptimize(out.last);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WatermarkGenerator_BoundedOutOfOrderness);

// An Output<T> that keeps a checksum: the next element of a chain.
template <typename T>
class SumOutput final : public Output<T> {
 public:
  void Collect(T&& v, Timestamp ts) override {
    sum += v.value + ts;
    ++n;
  }
  void EmitWatermark(Timestamp w) override { last_wm = w; }
  void EmitStatus(WatermarkStatus) override {}
  int64_t sum = 0;
  int64_t n = 0;
  Timestamp last_wm = kMinTimestamp;
};

// Harness for running one operator outside a job.
struct OperatorHarness {
  OperatorHarness() : metrics("bench", 0, 1, 0), timers(SystemClock::Get()) {
    config.auto_watermark_interval = Duration(0);  // no periodic timer
  }
  OperatorContext Context() {
    return OperatorContext("bench op", 0, 1, 128, &metrics, &timers, &config, nullptr);
  }
  SubtaskMetrics metrics;
  ProcessingTimeService timers;
  JobConfig config;
};

void BM_TimestampsAndWatermarksOperator(benchmark::State& state) {
  const auto ev = Events(4096, 10000);
  auto strategy = WatermarkStrategy<Event>::for_bounded_out_of_orderness(Duration(100));
  if (state.range(0) == 1)
    strategy = strategy.with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; });
  OperatorHarness h;
  OperatorContext ctx = h.Context();
  TimestampsAndWatermarksOperator<Event> op(strategy);
  SumOutput<Event> out;
  op.set_output(&out);
  op.Open(ctx);
  InputOperator<Event>* in = &op;  // called through the interface, as a chain does
  size_t i = 0;
  for (auto _ : state) {
    Event e = ev[i];
    in->ProcessElement(std::move(e), e.ts);
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(out.sum);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(state.range(0) == 1 ? "with_timestamp_assigner" : "timestamps from source");
}
BENCHMARK(BM_TimestampsAndWatermarksOperator)->Arg(0)->Arg(1);

// --- keyed state ----------------------------------------------------------------------

void BM_RollingReduce(benchmark::State& state) {
  const int64_t keys = state.range(0);
  const size_t n = keys > 100000 ? (size_t{1} << 21) : (size_t{1} << 16);
  const auto ev = Events(n, keys);
  auto key = [](const Event& e) { return e.key; };
  auto sum = [](const Event& a, const Event& b) { return Event{a.key, a.value + b.value, b.ts}; };
  OperatorHarness h;
  OperatorContext ctx = h.Context();
  RollingReduceOperator<Event, int64_t, decltype(key), decltype(sum)> op(key, sum);
  SumOutput<Event> out;
  op.set_output(&out);
  op.Open(ctx);
  InputOperator<Event>* in = &op;
  size_t i = 0;
  for (auto _ : state) {
    Event e = ev[i];
    in->ProcessElement(std::move(e), e.ts);
    i = (i + 1) & (n - 1);
  }
  benchmark::DoNotOptimize(out.sum);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RollingReduce)->Arg(10000)->Arg(1000000);

void BM_PlainLoop_HashMapSum(benchmark::State& state) {
  const int64_t keys = state.range(0);
  const size_t n = keys > 100000 ? (size_t{1} << 21) : (size_t{1} << 16);
  const auto ev = Events(n, keys);
  absl::flat_hash_map<int64_t, int64_t> sums;
  size_t i = 0;
  for (auto _ : state) {
    sums[ev[i].key] += ev[i].value;
    i = (i + 1) & (n - 1);
  }
  benchmark::DoNotOptimize(sums.size());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_PlainLoop_HashMapSum)->Arg(10000)->Arg(1000000);

// A keyed process function's value state per record (a running sum kept in
// place, nothing emitted), records in random key order: per record with
// ProcessElement (batched 0, what a one-record call does) or in batches of
// 256 with ProcessBatch (batched 1, what the task does: the operator loads
// the state entries of the record four ahead, KeyedStateStore::Prefetch).
// Args: batched, keys.
struct RunningSumFunction : KeyedProcessFunction<int64_t, Event, Event> {
  void process_element(const Event& e, Context& ctx, Collector<Event>&) override {
    ctx.get_state<int64_t>("sum").mutable_value() += e.value;
  }
};
void BM_KeyedProcess_ValueState(benchmark::State& state) {
  const bool batched = state.range(0) != 0;
  const int64_t keys = state.range(1);
  const size_t n = keys > 100000 ? (size_t{1} << 21) : (size_t{1} << 16);
  const auto ev = Events(n, keys);
  auto key = [](const Event& e) { return e.key; };
  OperatorHarness h;
  OperatorContext ctx = h.Context();
  KeyedProcessOperator<Event, int64_t, decltype(key), RunningSumFunction, Event> op(
      key, RunningSumFunction());
  SumOutput<Event> out;
  op.set_output(&out);
  op.Open(ctx);
  // Every key's entry exists before timing: the table has its final size.
  for (const Event& e : ev) op.ProcessElement(Event(e), e.ts);
  constexpr size_t kBatch = 256;
  std::vector<Record<Event>> batch(kBatch);
  InputOperator<Event>* in = &op;
  size_t i = 0;
  for (auto _ : state) {
    // The copy in (the same in both modes) stands for the batch's arrival.
    for (size_t j = 0; j < kBatch; ++j) batch[j] = Record<Event>{ev[(i + j) & (n - 1)], 0};
    i = (i + kBatch) & (n - 1);
    if (batched) {
      in->ProcessBatch(std::span<Record<Event>>(batch));
    } else {
      for (Record<Event>& r : batch) in->ProcessElement(std::move(r.value), r.timestamp);
    }
  }
  benchmark::DoNotOptimize(out.sum);
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(kBatch));
}
BENCHMARK(BM_KeyedProcess_ValueState)
    ->Args({0, 10000})
    ->Args({1, 10000})
    ->Args({0, 1000000})
    ->Args({1, 1000000});

// W1-core's work without the runtime's per-record dispatch: on one thread,
// generate a record (as tidemark-bench's Input::At does), pick its channel
// by key group, append it to that channel's batch; when a batch is full,
// replay it into a flat_hash_map running sum and a last-value-per-key table
// (the sink).  Against tidemark-bench --threads=1 this shows what the
// virtual calls, std::function and chain outputs cost per record.  Arg: the
// number of downstream channels.
void BM_FusedLoop_W1Core(benchmark::State& state) {
  const int channels = static_cast<int>(state.range(0));
  constexpr uint64_t kKeys = 10000;
  constexpr size_t kBatch = 1024;
  std::vector<Batch<Event>> batches(static_cast<size_t>(channels));
  std::vector<absl::flat_hash_map<int64_t, Event>> state_of(static_cast<size_t>(channels));
  std::vector<std::vector<int64_t>> sink(static_cast<size_t>(channels),
                                         std::vector<int64_t>(kKeys));
  Timestamp max_ts = kMinTimestamp;
  auto replay = [&](int c) {
    auto& st = state_of[static_cast<size_t>(c)];
    auto& out = sink[static_cast<size_t>(c)];
    for (auto& r : batches[static_cast<size_t>(c)].records) {
      auto [it, inserted] = st.try_emplace(r.value.key, r.value);
      if (!inserted)
        it->second = Event{r.value.key, it->second.value + r.value.value,
                           std::max(it->second.ts, r.value.ts)};
      out[static_cast<size_t>(r.value.key)] = it->second.value;
    }
    batches[static_cast<size_t>(c)].clear();
  };
  int64_t i = 0;
  for (auto _ : state) {
    const uint64_t h = Mix(static_cast<uint64_t>(i));
    const auto key = static_cast<int64_t>(((h & 0xffffffffu) * kKeys) >> 32);
    const auto back = static_cast<int64_t>(((h >> 48) * 101u) >> 16);
    Event e{key, static_cast<int64_t>((h >> 32) & 0xff), 1'700'000'000'000 + i / 1000 - back};
    max_ts = std::max(max_ts, e.ts);  // the watermark generator's work
    const int c =
        channels == 1 ? 0 : SubtaskForKey<int64_t>(e.key, kDefaultMaxParallelism, channels);
    auto& b = batches[static_cast<size_t>(c)];
    b.records.push_back(Record<Event>{e, e.ts});
    if (b.records.size() >= kBatch) replay(c);
    ++i;
  }
  for (int c = 0; c < channels; ++c) replay(c);
  benchmark::DoNotOptimize(max_ts);
  benchmark::DoNotOptimize(sink[0][0]);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FusedLoop_W1Core)->Arg(1)->Arg(2);

// --- window assignment ------------------------------------------------------------------

// What the WindowOperator does per record before touching any state: the
// assigner appends the record's windows to a reused vector.  Timestamps
// advance 1000 per ms of event time (tidemark-bench's default), with up to
// 100 ms of disorder.
std::vector<Timestamp> Timestamps(size_t n) {
  std::vector<Timestamp> ts(n);
  for (size_t i = 0; i < n; ++i)
    ts[i] =
        1'700'000'000'000 + static_cast<Timestamp>(i / 1000) - static_cast<Timestamp>(Mix(i) % 101);
  return ts;
}

template <typename Assigner>
void RunAssigner(benchmark::State& state, const Assigner& assigner) {
  const auto ev = Events(4096, 10000);
  const auto ts = Timestamps(4096);
  std::vector<TimeWindow> windows;
  size_t i = 0;
  int64_t acc = 0;
  int64_t assigned = 0;
  for (auto _ : state) {
    windows.clear();
    assigner.assign_windows(ev[i], ts[i], /*processing_time=*/0, windows);
    acc += windows.front().start;
    assigned += static_cast<int64_t>(windows.size());
    i = (i + 1) & 4095;
  }
  benchmark::DoNotOptimize(acc);
  state.SetItemsProcessed(state.iterations());
  state.counters["windows/record"] =
      static_cast<double>(assigned) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

// The sizes come from the benchmark's arguments, i.e. at run time, as in a
// job (a compile-time size would turn the division in the window start into
// a multiplication).  Args: size (tumbling), size and slide (sliding), gap
// (sessions), in ms.
void BM_WindowAssign_Tumbling(benchmark::State& state) {
  RunAssigner(state, TumblingEventTimeWindows::of(Duration(state.range(0))));
}
BENCHMARK(BM_WindowAssign_Tumbling)->Arg(1000);

// size = 10 x slide: 10 windows per record.
void BM_WindowAssign_Sliding(benchmark::State& state) {
  RunAssigner(state,
              SlidingEventTimeWindows::of(Duration(state.range(0)), Duration(state.range(1))));
}
BENCHMARK(BM_WindowAssign_Sliding)->Args({10000, 1000});

void BM_WindowAssign_Session(benchmark::State& state) {
  RunAssigner(state, EventTimeSessionWindows::with_gap(Duration(state.range(0))));
}
BENCHMARK(BM_WindowAssign_Session)->Arg(100);

// Sessions also merge: per record, MergingWindowSet::add_window of one key,
// the new [ts, ts + gap) overlapping the key's in-flight session (the common
// case, a merge per record); every 1024 records the session is retired (as
// its cleanup timer would), so the set holds one window.
void BM_SessionMerge_AddWindow(benchmark::State& state) {
  constexpr int64_t kGap = 100;
  MergingWindowSet set;
  int64_t merges = 0;
  Timestamp t = 0;
  int64_t n = 0;
  TimeWindow last;
  auto on_merge = [&](const TimeWindow&, const std::vector<TimeWindow>&, const TimeWindow&,
                      const std::vector<TimeWindow>&) { ++merges; };
  for (auto _ : state) {
    last = set.add_window(TimeWindow(t, t + kGap), on_merge);
    ++t;
    if ((++n & 1023) == 0) {  // the session ends: a gap, and its cleanup
      set.retire_window(last);
      t += 10 * kGap;
    }
  }
  benchmark::DoNotOptimize(last);
  state.SetItemsProcessed(state.iterations());
  state.counters["merges/record"] =
      static_cast<double>(merges) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}
BENCHMARK(BM_SessionMerge_AddWindow);

// --- timer service ------------------------------------------------------------------------

// KeyedTimerService<K, TimeWindow> as the WindowOperator uses it: one
// event-time timer per (key, window) at the window's max timestamp.  Arg:
// the number of keys, i.e. of live timers (one tumbling window per key).
using BenchTimerService = KeyedTimerService<int64_t, TimeWindow>;

TimeWindow RoundWindow(int64_t round) { return TimeWindow(round * 1000, round * 1000 + 1000); }

// Registers a new timer per iteration: key k of round r registers (k, window
// r); after every key has one the round's timers are fired, untimed.  Live
// timers: up to `keys`.
void BM_TimerService_RegisterNew(benchmark::State& state) {
  const int64_t keys = state.range(0);
  BenchTimerService svc;
  int64_t fired = 0;
  svc.Init(
      nullptr, [&](const int64_t&, const TimeWindow&, Timestamp) { ++fired; },
      [](const int64_t&, const TimeWindow&, Timestamp) {});
  int64_t k = 0, round = 0;
  TimeWindow w = RoundWindow(round);
  for (auto _ : state) {
    svc.RegisterEventTimeTimer(k, w, w.max_timestamp());
    if (++k == keys) {
      state.PauseTiming();
      svc.AdvanceWatermark(w.max_timestamp());
      k = 0;
      w = RoundWindow(++round);
      state.ResumeTiming();
    }
  }
  benchmark::DoNotOptimize(fired);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerService_RegisterNew)->Arg(10000)->Arg(1000000);

// Registers a timer that is already there (what the window operator does for
// every record after a window's first: the trigger's timer and the cleanup
// timer are the same, registered twice per record).
void BM_TimerService_RegisterDuplicate(benchmark::State& state) {
  const int64_t keys = state.range(0);
  BenchTimerService svc;
  const TimeWindow w = RoundWindow(0);
  for (int64_t k = 0; k < keys; ++k) svc.RegisterEventTimeTimer(k, w, w.max_timestamp());
  const auto order = IntKeys(size_t{1} << 16, keys);  // random keys: cache misses as in a job
  size_t i = 0;
  for (auto _ : state) {
    svc.RegisterEventTimeTimer(order[i], w, w.max_timestamp());
    i = (i + 1) & 0xffff;
  }
  benchmark::DoNotOptimize(svc.NumEventTimeTimers());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerService_RegisterDuplicate)->Arg(10000)->Arg(1000000);

// Deletes one live timer per iteration (lazy: its queued entry stays until
// its timestamp comes up).  After every key's timer is deleted, untimed: the
// stale entries are dropped by AdvanceWatermark and the next round's timers
// registered.
void BM_TimerService_Delete(benchmark::State& state) {
  const int64_t keys = state.range(0);
  BenchTimerService svc;
  int64_t fired = 0;
  svc.Init(
      nullptr, [&](const int64_t&, const TimeWindow&, Timestamp) { ++fired; },
      [](const int64_t&, const TimeWindow&, Timestamp) {});
  int64_t round = 0;
  TimeWindow w = RoundWindow(round);
  for (int64_t k = 0; k < keys; ++k) svc.RegisterEventTimeTimer(k, w, w.max_timestamp());
  int64_t k = 0;
  for (auto _ : state) {
    svc.DeleteEventTimeTimer(k, w, w.max_timestamp());
    if (++k == keys) {
      state.PauseTiming();
      svc.AdvanceWatermark(w.max_timestamp());
      w = RoundWindow(++round);
      for (k = 0; k < keys; ++k) svc.RegisterEventTimeTimer(k, w, w.max_timestamp());
      k = 0;
      state.ResumeTiming();
    }
  }
  benchmark::DoNotOptimize(fired);  // stays 0
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerService_Delete)->Arg(10000)->Arg(1000000);

// AdvanceWatermark firing `keys` timers (one per key, same timestamp, as at
// the end of a tumbling window) through the std::function callback; the
// registration before each iteration is untimed.  items/s = timers fired/s.
void BM_TimerService_Fire(benchmark::State& state) {
  const int64_t keys = state.range(0);
  BenchTimerService svc;
  int64_t fired = 0;
  int64_t checksum = 0;
  svc.Init(
      nullptr,
      [&](const int64_t& key, const TimeWindow&, Timestamp) {
        ++fired;
        checksum += key;
      },
      [](const int64_t&, const TimeWindow&, Timestamp) {});
  int64_t round = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const TimeWindow w = RoundWindow(round++);
    for (int64_t k = 0; k < keys; ++k) svc.RegisterEventTimeTimer(k, w, w.max_timestamp());
    state.ResumeTiming();
    svc.AdvanceWatermark(w.max_timestamp());
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(fired);
}
BENCHMARK(BM_TimerService_Fire)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMicrosecond);

// A timer per key at a timestamp of its own, fired in order while new ones
// come (q6's auctions at their expiry, sessions, processing-time timeouts):
// each iteration registers one; every 1 000 the watermark advances past as
// many of the oldest, about `keys` timers staying live.  items/s = timers
// registered and fired/s.
void BM_TimerService_DistinctTimes(benchmark::State& state) {
  const int64_t keys = state.range(0);
  KeyedTimerService<int64_t, VoidNamespace> svc;
  int64_t fired = 0;
  svc.Init(
      nullptr, [&](const int64_t& key, const VoidNamespace&, Timestamp) { fired += key; },
      [](const int64_t&, const VoidNamespace&, Timestamp) {});
  int64_t t = 0;
  for (; t < keys; ++t) svc.RegisterEventTimeTimer(t, VoidNamespace{}, t);
  for (auto _ : state) {
    svc.RegisterEventTimeTimer(t, VoidNamespace{}, t);
    if (++t % 1000 == 0) svc.AdvanceWatermark(t - keys);
  }
  benchmark::DoNotOptimize(fired);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_TimerService_DistinctTimes)->Arg(1000)->Arg(100000);

// --- the window operator ------------------------------------------------------------------

// EventTimeTrigger under another type name: the window-major
// FastWindowOperator (fast_window_operator.h) applies only to EventTimeTrigger
// itself, so with this trigger the same job gets the general WindowOperator
// (contents keyed by (key, window), a trigger timer and a cleanup timer per
// (key, window) in the KeyedTimerService).
class GeneralPathEventTimeTrigger {
 public:
  template <typename T, typename W>
  TriggerResult on_element(const T& e, Timestamp ts, const W& w, TriggerContext& ctx) const {
    return EventTimeTrigger().on_element(e, ts, w, ctx);
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp t, const W& w, TriggerContext& ctx) const {
    return EventTimeTrigger().on_event_time(t, w, ctx);
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp t, const W& w, TriggerContext& ctx) const {
    return EventTimeTrigger().on_processing_time(t, w, ctx);
  }
  template <typename W>
  void clear(const W& w, TriggerContext& ctx) const {
    EventTimeTrigger().clear(w, ctx);
  }
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W& w, OnMergeContext& ctx) const {
    EventTimeTrigger().on_merge(w, ctx);
  }
};

// The window operator for a tumbling event-time window reduce (sum), driven
// directly on this thread as a task would drive it: records through
// InputOperator<T>::ProcessElement, a watermark (bounded out of orderness,
// 100 ms) every 1024 records, results into a checksum output.  The input is
// tidemark-bench W1's: 1000 records per ms of event time, disorder <= 100 ms,
// 1 s windows, so a window holds 1M records; with 10k keys that is ~100
// records per (key, window), with 1M keys ~1.6 (632k distinct keys per
// window, a result per 1.6 records).  items/s = records/s, results (window
// fires) included; counters: results per record, the share of the time spent
// in ProcessWatermark (firing), event-time timers (as the operator reports
// them) at the end.  Arg: keys.
//
// tests/window_harness.h builds the operator (MakeReduceWindowOperator); its
// OperatorHarness records every output, so the context here is the
// OperatorHarness above and the output a SumOutput.
template <typename Trigger, typename Assigner = TumblingEventTimeWindows>
void RunTumblingWindowOperator(benchmark::State& state, Trigger trigger,
                               Assigner assigner = TumblingEventTimeWindows::of(Duration(1000)),
                               int64_t watermark_every = 1024) {
  const int64_t keys = state.range(0);
  constexpr size_t kN = size_t{1} << 20;
  constexpr int64_t kEventsPerMs = 1000;
  constexpr int64_t kDisorderMs = 100;
  const auto ev = Events(kN, keys);
  std::vector<Timestamp> back(kN);
  for (size_t i = 0; i < kN; ++i) back[i] = static_cast<Timestamp>(Mix(i + kN) % (kDisorderMs + 1));
  auto key = [](const Event& e) { return e.key; };
  auto sum = [](const Event& a, const Event& b) {
    return Event{a.key, a.value + b.value, std::max(a.ts, b.ts)};
  };
  auto op = testing::MakeReduceWindowOperator<Event>(key, assigner, trigger, sum);
  OperatorHarness h;
  // As a task does at the start of each slice (see SliceProcessingTime).
  h.timers.set_slice_processing_time(SystemClock::Get()->NowMillis());
  OperatorContext ctx = h.Context();
  SumOutput<Event> out;
  op->set_output(&out);
  op->Open(ctx);
  InputOperator<Event>* in = op.get();
  OperatorBase* base = op.get();
  int64_t i = 0;
  Timestamp max_ts = kMinTimestamp;
  std::chrono::steady_clock::duration in_watermarks{0};
  auto one = [&] {
    const size_t j = static_cast<size_t>(i) & (kN - 1);
    const Timestamp ts = 1'700'000'000'000 + i / kEventsPerMs - back[j];
    max_ts = std::max(max_ts, ts);
    Event e{ev[j].key, ev[j].value, ts};
    in->ProcessElement(std::move(e), ts);
    if (++i % watermark_every == 0) {
      const auto t0 = std::chrono::steady_clock::now();
      base->ProcessWatermark(max_ts - kDisorderMs - 1);
      in_watermarks += std::chrono::steady_clock::now() - t0;
    }
  };
  // Warm up: for the large key counts one window's worth, so that the state
  // tables have grown to their steady size before timing starts.
  const int64_t warmup = keys > 100000 ? 1000 * kEventsPerMs : 65536;
  while (i < warmup) one();
  const int64_t results_before = out.n;
  in_watermarks = {};
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) one();
  const auto total = std::chrono::steady_clock::now() - start;
  benchmark::DoNotOptimize(out.sum);
  state.SetItemsProcessed(state.iterations());
  state.counters["results/record"] = static_cast<double>(out.n - results_before) /
                                     static_cast<double>(std::max<int64_t>(1, state.iterations()));
  state.counters["watermark_time_share"] =
      std::chrono::duration<double>(in_watermarks).count() /
      std::max(1e-9, std::chrono::duration<double>(total).count());
  state.counters["timers"] = static_cast<double>(op->num_event_time_timers());
}

// The default trigger: the window-major fast path where the operator has one.
void BM_WindowOperator_TumblingReduce(benchmark::State& state) {
  RunTumblingWindowOperator(state, EventTimeTrigger());
}
BENCHMARK(BM_WindowOperator_TumblingReduce)->Arg(10000)->Arg(1000000);

// The same job on the general path (per-(key, window) contents and timers).
void BM_WindowOperator_TumblingReduceGeneralPath(benchmark::State& state) {
  RunTumblingWindowOperator(state, GeneralPathEventTimeTrigger());
}
BENCHMARK(BM_WindowOperator_TumblingReduceGeneralPath)->Arg(10000)->Arg(1000000);

// W3's session window (gap 20 ms) on the same input and a watermark every
// 2^19 records (W3's periodic watermark covers ~0.5 M records of a subtask),
// so that a key has tens of sessions in flight: FastSessionWindowOperator
// (operators/window/session_window_operator.h) ...
void BM_WindowOperator_SessionReduce(benchmark::State& state) {
  RunTumblingWindowOperator(state, EventTimeTrigger(),
                            EventTimeSessionWindows::with_gap(Duration(20)), int64_t{1} << 19);
}
BENCHMARK(BM_WindowOperator_SessionReduce)->Arg(10000)->Arg(1000000);

// ... and the general WindowOperator (per-key MergingWindowSet, per-(key,
// window) contents and timers).
void BM_WindowOperator_SessionReduceGeneralPath(benchmark::State& state) {
  RunTumblingWindowOperator(state, GeneralPathEventTimeTrigger(),
                            EventTimeSessionWindows::with_gap(Duration(20)), int64_t{1} << 19);
}
BENCHMARK(BM_WindowOperator_SessionReduceGeneralPath)->Arg(10000)->Arg(1000000);

// --- the asynchronous part of a window table's snapshot ----------------------
struct W4Value {
  int64_t key;
  int64_t value;
  int64_t ts;
};

void BM_WindowTable_SnapshotEncode(benchmark::State& state) {
  const int64_t keys = state.range(0);
  internal::TimeWindowTable<int64_t, W4Value> table;
  for (int64_t w = 0; w < 2; ++w)
    for (int64_t k = 0; k < keys; ++k)
      table.FindOrCreate(k * 7919, TimeWindow(w * 1000, w * 1000 + 1000), kMinTimestamp, [&] {
        return W4Value{k, k, w * 1000};
      });
  size_t bytes = 0;
  for (auto _ : state) {
    internal::StateWriter w;
    table.SnapshotTo(w);
    auto parts = w.TakeDeferred();
    std::string out = internal::StateWriter::CompleteDeferred(w.Release(), std::move(parts));
    bytes += out.size();
    benchmark::DoNotOptimize(out.data());
    internal::RecycleEncodeBuffer(std::move(out));  // as the coordinator does
  }
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  internal::ReleaseEncodeBuffers();
}
BENCHMARK(BM_WindowTable_SnapshotEncode)->Arg(10000)->Arg(1000000)->Unit(benchmark::kMillisecond);

// The side-output type check (internal::SideOutputAs, a dynamic_cast) that
// ctx.output pays per side-output record, against the unchecked cast it
// replaced (arg 0: static_cast, 1: checked).
static void BM_SideOutput_TypeCheck(benchmark::State& state) {
  internal::DiscardOutput<std::string> discard;
  internal::OutputBase* volatile out = &discard;
  const std::string id = "x";
  for (auto _ : state) {
    Output<std::string>* typed = state.range(0) == 0 ? static_cast<Output<std::string>*>(out)
                                                     : internal::SideOutputAs<std::string>(out, id);
    benchmark::DoNotOptimize(typed);
  }
}
BENCHMARK(BM_SideOutput_TypeCheck)->Arg(0)->Arg(1);

}  // namespace
}  // namespace tidemark

BENCHMARK_MAIN();
