// bench/micro_bench.cc
//
// Google Benchmark micro-benchmarks for the hot parts of the runtime:
//
//   BM_Channel_Handoff/<batch>           producer thread fills batches of
//                                        `batch` records and pushes them; the
//                                        benchmark thread pops, reads and
//                                        recycles them (items/s = records/s);
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
//   BM_PlainLoop_HashMapSum/<keys>       the same sums in a plain loop (what
//                                        the end-to-end baseline does).
//
// A smoke run under ctest (bench/CMakeLists.txt) keeps them building and
// running; no test asserts a time.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark.h"

namespace tidemark {
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
  constexpr size_t kRecordsPerIteration = 1 << 20;
  const size_t batches = kRecordsPerIteration / batch;
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
    ->RangeMultiplier(4)
    ->Range(64, 4096)
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

}  // namespace
}  // namespace tidemark

BENCHMARK_MAIN();
