// tests/unaligned_checkpoint_test.cc
//
// Unaligned checkpoints (FLIP-76, issue 26 item 6; docs/checkpoints.md,
// "Unaligned checkpoints"):
// - the gate, driven by hand: a barrier on a channel's priority lane
//   overtakes the batches queued ahead of it; the task snapshots before any
//   of them is processed; they (and, on the other channels, what arrives
//   before their barrier) become the channel state, which a restore queues
//   ahead of the new input;
// - whole jobs under back-pressure (a slow sink), with real threads: every
//   unaligned checkpoint is a consistent cut once its channel state is
//   counted (records emitted = records counted + records in flight), and it
//   completes before the sink has drained the records before its barrier,
//   which an aligned checkpoint never does;
// - exactly once: a job cancelled under back-pressure after a checkpoint
//   with channel state, restored from it, commits the output of a run
//   without failure; the same with a map that throws and a restart strategy.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gate_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "tidemark/runtime/io/detail/channel.h"
#include "tidemark/runtime/io/detail/input_gate.h"
#include "tidemark/runtime/state/checkpoint_coordinator.h"
#include "tidemark/runtime/state/checkpoint_storage.h"
#include "tidemark/runtime/state/state_codec.h"
#include "tidemark/tidemark.h"

namespace tidemark {
namespace {

using internal::Batch;
using internal::Channel;
using internal::ControlKind;
using internal::InputGate;
using internal::Record;
using Events = std::vector<std::string>;

// --- the gate, driven by hand -----------------------------------------------

// Records what reaches the head of the chain, the snapshots and the channel
// state.
struct Recorder final : Output<int>, internal::BarrierHandler {
  Events events;
  std::map<int64_t, std::string> channel_state;
  void Collect(int&& v, Timestamp) override { events.push_back(std::to_string(v)); }
  void EmitWatermark(Timestamp w) override { events.push_back("W" + std::to_string(w)); }
  void EmitStatus(WatermarkStatus) override {}
  void EmitGeneralizedWatermark(const GeneralizedWatermark& w) override {
    events.push_back("G" + w.ToString());
  }
  void OnBarrierAligned(int64_t id, int64_t) override {
    events.push_back("ALIGNED" + std::to_string(id));
  }
  void OnUnalignedBarrier(int64_t id) override { events.push_back("SNAP" + std::to_string(id)); }
  void OnChannelStateComplete(int64_t id, std::string bytes) override {
    events.push_back("STATE" + std::to_string(id));
    channel_state[id] = std::move(bytes);
  }
};

struct GateFixture : testing::GateFixtureBase<Recorder> {
  explicit GateFixture(int n) : GateFixtureBase(n, 2) {}
  // What a writer does for an unaligned barrier: the last batch, ending in
  // the marker, and the priority barrier in one step.
  void PushWithBarrier(int c, std::vector<std::string> items, int64_t id) {
    items.push_back("M" + std::to_string(id));
    channels[static_cast<size_t>(c)]->PushBatchWithPriorityBarrier(testing::MakeBatch(items), id);
  }
  // What a writer does at the end of input: the last batch, ending in the
  // end, and "ended" in one step.
  void PushLast(int c, std::vector<std::string> items) {
    items.push_back("E");
    channels[static_cast<size_t>(c)]->PushLastBatch(testing::MakeBatch(items));
  }
  // What a task does: the priority lanes before every step.
  void Drain() {
    for (;;) {
      gate->PollPriority();
      if (gate->RunStep() != internal::TaskInput::Step::kMore) break;
    }
  }
};

TEST(UnalignedGate, ThePriorityBarrierOvertakesTheQueuedBatchesWhichBecomeChannelState) {
  GateFixture f(1);
  f.Push(0, {"1", "2", "3"});
  f.Push(0, {"4", "W7", "5"});
  f.PushWithBarrier(0, {"6"}, 1);
  // The channel is over capacity (a barrier never waits for room) and the
  // consumer has processed nothing yet.
  EXPECT_EQ(f.channels[0]->SizeApprox(), 3u);
  f.gate->PollPriority();
  // Snapshot first, then the channel state is complete at once: every batch
  // up to the marker was recorded where it is, none processed.
  EXPECT_EQ(f.rec.events, (Events{"SNAP1", "STATE1"}));
  EXPECT_EQ(f.channels[0]->SizeApprox(), 3u);  // still queued: back-pressure is unchanged
  ASSERT_FALSE(f.rec.channel_state[1].empty());
  // Then the records are processed in order, the marker changes nothing.
  f.Push(0, {"8"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"SNAP1", "STATE1", "1", "2", "3", "4", "W7", "5", "6", "8"}));

  // Restored, the channel state comes before the new input.
  GateFixture g(1);
  ASSERT_TRUE(g.gate->RestoreChannelState(f.rec.channel_state[1]).ok());
  g.Push(0, {"9"});
  g.Drain();
  EXPECT_EQ(g.rec.events, (Events{"1", "2", "3", "4", "W7", "5", "6", "9"}));
}

TEST(UnalignedGate, OtherChannelsAreRecordedUntilTheirBarrierAndNothingIsBlocked) {
  GateFixture f(2);
  f.Push(1, {"10", "11"});
  f.PushWithBarrier(0, {"1", "2"}, 5);
  f.Drain();
  // Snapshot at the first barrier; channel 1 is not blocked, and what it
  // delivers before its barrier is channel state.
  EXPECT_EQ(f.rec.events, (Events{"SNAP5", "1", "2", "10", "11"}));
  EXPECT_FALSE(f.gate->blocked(1));
  f.Push(1, {"12"});
  f.PushWithBarrier(1, {"W3", "13"}, 5);
  f.Push(1, {"14"});
  f.Drain();
  // (W3 stays in the valve: channel 0 has no watermark yet.)
  EXPECT_EQ(f.rec.events, (Events{"SNAP5", "1", "2", "10", "11", "STATE5", "12", "13", "14"}));

  // The state: channel 0's 1, 2; channel 1's 10, 11 (recorded as
  // delivered), 12, W3, 13 (captured from the queue); 14 is after the
  // barrier.  Restored, each channel replays its own, in order.
  GateFixture g(2);
  ASSERT_TRUE(g.gate->RestoreChannelState(f.rec.channel_state[5]).ok());
  g.Drain();
  Events ch0, ch1;
  for (const std::string& e : g.rec.events) {
    if (e == "1" || e == "2")
      ch0.push_back(e);
    else
      ch1.push_back(e);
  }
  EXPECT_EQ(ch0, (Events{"1", "2"}));
  // W3 reaches the chain only once both channels are past it (the valve).
  EXPECT_EQ(ch1, (Events{"10", "11", "12", "13"}));
}

TEST(UnalignedGate, AMarkerReadBeforeItsPriorityBarrierStartsTheCheckpointThere) {
  GateFixture f(2);
  f.Push(1, {"20"});
  // The gate reads the batch before it checks the priority lane: records
  // before the marker are processed before the snapshot.
  f.PushWithBarrier(0, {"1", "2"}, 3);
  f.gate->RunStep();  // channel 0 first
  EXPECT_EQ(f.rec.events, (Events{"1", "2", "SNAP3"}));
  f.Drain();
  f.PushWithBarrier(1, {}, 3);
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"1", "2", "SNAP3", "20", "STATE3"}));
  // Channel 0 had nothing in flight; channel 1 had 20.
  GateFixture g(2);
  ASSERT_TRUE(g.gate->RestoreChannelState(f.rec.channel_state[3]).ok());
  g.Drain();
  EXPECT_EQ(g.rec.events, (Events{"20"}));
}

TEST(UnalignedGate, AChannelThatEndsBeforeItsBarrierCompletesItsChannelState) {
  GateFixture f(2);
  f.PushWithBarrier(0, {"1"}, 2);
  f.Push(1, {"7", "E"});
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"SNAP2", "1", "7", "STATE2"}));
  GateFixture g(2);
  ASSERT_TRUE(g.gate->RestoreChannelState(f.rec.channel_state[2]).ok());
  g.Drain();
  EXPECT_EQ(g.rec.events, (Events{"1", "7"}));
}

TEST(UnalignedGate, AChannelWhoseProducerEndedIsStoredUpToItsEndAtOnce) {
  GateFixture f(2);
  f.Push(1, {"7", "8"});
  f.PushLast(1, {"9"});
  f.PushWithBarrier(0, {"1"}, 4);
  f.gate->PollPriority();
  // No barrier will come on channel 1 (its producer has ended): its queue
  // up to the end is channel state at once, not once it has drained.
  EXPECT_EQ(f.rec.events, (Events{"SNAP4", "STATE4"}));
  f.Drain();
  EXPECT_EQ(f.rec.events, (Events{"SNAP4", "STATE4", "1", "7", "8", "9"}));
  GateFixture g(2);
  ASSERT_TRUE(g.gate->RestoreChannelState(f.rec.channel_state[4]).ok());
  g.Drain();
  EXPECT_EQ(g.rec.events, (Events{"1", "7", "8", "9"}));
}

TEST(UnalignedGate, DamagedChannelStateIsRefused) {
  GateFixture f(1);
  f.PushWithBarrier(0, {"1", "2"}, 1);
  f.Drain();
  std::string bytes = f.rec.channel_state[1];
  ASSERT_FALSE(bytes.empty());
  GateFixture g(1);
  absl::Status s = g.gate->RestoreChannelState(bytes.substr(0, bytes.size() - 3));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  GateFixture h(1);
  s = h.gate->RestoreChannelState("not channel state");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

// A generalized watermark in flight is stored with its declaration, not
// with this process's number for it (which another process gives to
// whichever declaration it builds first): restored, it is the same kind.
// Channel state of the earlier format, which stored the number, is refused
// when it holds one.
TEST(UnalignedGate, AGeneralizedWatermarkInFlightIsStoredWithItsDeclaration) {
  internal::WatermarkSpec spec;
  spec.identifier = "unaligned-progress";
  spec.function = WatermarkCombinationFunction::kMax;
  const internal::WatermarkSpec* progress = internal::InternWatermarkSpec(spec);
  GateFixture f(1);
  auto b = testing::MakeBatch({"1"});
  b->AddControl(ControlKind::kGeneralized, 42, progress->id);
  b->records.push_back(internal::Record<int>{2, 0});
  f.channels[0]->Push(std::move(b));
  f.PushWithBarrier(0, {"3"}, 1);
  f.gate->PollPriority();
  ASSERT_EQ(f.rec.events, (Events{"SNAP1", "STATE1"}));
  const std::string bytes = f.rec.channel_state[1];
  EXPECT_NE(bytes.find("unaligned-progress"), std::string::npos);

  GateFixture g(1);
  ASSERT_TRUE(g.gate->RestoreChannelState(bytes).ok());
  g.Drain();
  EXPECT_EQ(g.rec.events, (Events{"1", "Gunaligned-progress=42", "2", "3"}));

  // The earlier format (version 1): the number alone.
  std::string old;
  internal::StateWriter w(&old);
  w.PutU32(0x544d4353);
  w.PutU32(1);
  w.PutVarint(1);  // channels
  w.PutVarint(0);  // channel 0
  w.PutVarint(1);  // one entry
  std::string entry;
  internal::StateWriter e(&entry);
  e.PutU8(1);
  e.PutU8(static_cast<uint8_t>(ControlKind::kGeneralized));
  e.PutVarint(progress->id);
  e.PutI64(42);
  w.PutBytes(entry);
  GateFixture h(1);
  const absl::Status st = h.gate->RestoreChannelState(old);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("stored by an earlier version"));
}

// --- whole jobs under back-pressure -----------------------------------------

// Counts its records (its state) and passes them on.
class PassCounter final : public OneInputOperator<int64_t, int64_t> {
 public:
  void ProcessElement(int64_t&& v, Timestamp ts) override {
    ++count_;
    output().Collect(std::move(v), ts);
  }
  void SnapshotState(internal::StateWriter& w) override { w.PutI64(count_); }
  void RestoreState(internal::StateReader& r) override { count_ = r.GetI64("count"); }

 private:
  int64_t count_ = 0;
};

struct Cut {
  int64_t emitted = 0;     // by the sources, from their positions
  int64_t counted = 0;     // by the counters
  int64_t in_flight = 0;   // records in the counters' channel state
  bool any_state = false;  // some subtask has channel state
};

// The records in a channel state (internal/input_gate.cc's format; int64
// records).
int64_t RecordsIn(const std::string& channel_state) {
  if (channel_state.empty()) return 0;
  internal::StateReader r(channel_state);
  r.GetU32();
  r.GetU32();
  int64_t records = 0;
  const uint64_t channels = r.GetVarint();
  for (uint64_t i = 0; i < channels && r.ok(); ++i) {
    r.GetVarint();
    const uint64_t entries = r.GetVarint();
    internal::StateReader e(r.GetBytes());
    for (uint64_t k = 0; k < entries && e.ok(); ++k) {
      if (e.GetU8() == 0) {
        e.GetI64();
        e.GetI64();
        ++records;
      } else {
        e.GetU8();
        e.GetVarint();
        e.GetI64();
      }
    }
    EXPECT_TRUE(e.AtEnd()) << e.error();
  }
  EXPECT_TRUE(r.AtEnd()) << r.error();
  return records;
}

Cut ReadCut(const internal::LoadedCheckpoint& chk) {
  Cut cut;
  for (const auto& [name, bytes] : chk.states) {
    absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, name);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) continue;
    if (s->has_source) {
      internal::StateReader r(s->input_state);
      const int64_t next = r.GetI64();
      cut.emitted += (next - s->subtask) / s->parallelism;
    }
    cut.any_state = cut.any_state || !s->channel_state.empty();
    for (const auto& op : s->operators) {
      if (op.name != "Counter") continue;
      internal::StateReader r(op.state);
      cut.counted += r.GetI64();
      cut.in_flight += RecordsIn(s->channel_state);
    }
  }
  return cut;
}

struct CheckpointSeen {
  int64_t id = 0;
  int64_t sink_seen = 0;  // records the sink had processed when the checkpoint completed
};

// Source (p 2) -> key_by -> Counter (p 2) -> a slow sink (p 1), with small
// batches and channels so that the channels are full (back-pressure).
// Triggers checkpoints one after the other while the job runs; for each, what
// the sink had processed when it was complete.
std::vector<CheckpointSeen> RunSlowSinkJob(bool unaligned, const std::string& dir, int64_t n) {
  StreamExecutionEnvironment env;
  env.set_worker_threads(3).set_batch_size(16).set_channel_capacity(2);
  env.enable_checkpointing(Duration(0), dir, /*retain=*/1000);
  if (unaligned) env.enable_unaligned_checkpoints();
  auto sink_seen = std::make_shared<std::atomic<int64_t>>(0);
  env.from_generator<int64_t>([](int64_t i) { return i; }, n)
      .set_parallelism(2)
      .key_by([](const int64_t& v) { return v % 97; })
      .transform<int64_t>("Counter",
                          [] { return std::unique_ptr<OperatorBase>(new PassCounter()); })
      .set_parallelism(2)
      .add_sink(
          [sink_seen](int64_t&&, Timestamp) {
            // The slow sink: real time is the subject here (back-pressure).
            std::this_thread::sleep_for(std::chrono::microseconds(100));
            sink_seen->fetch_add(1, std::memory_order_relaxed);
          },
          "Slow Sink")
      .set_parallelism(1);
  JobClient client = env.execute_async(unaligned ? "unaligned" : "aligned");
  std::vector<CheckpointSeen> seen;
  while (!client.done()) {
    const int64_t id = client.trigger_checkpoint();
    if (id < 0) break;
    EXPECT_TRUE(client.wait_for_checkpoint(id, Duration(60'000))) << "checkpoint " << id;
    seen.push_back(CheckpointSeen{id, sink_seen->load(std::memory_order_relaxed)});
    if (seen.size() >= 8) break;
  }
  client.cancel();
  bool hung = false;
  testing::WaitWithWatchdog(client, &hung);
  EXPECT_FALSE(hung);
  return seen;
}

TEST(UnalignedJob, UnderBackPressureACheckpointCompletesBeforeTheRecordsBeforeItsBarrierDrain) {
  const int64_t n = 200'000;  // more than the run lets through: cancelled after 8 checkpoints
  for (bool unaligned : {false, true}) {
    SCOPED_TRACE(unaligned ? "unaligned" : "aligned");
    testing::TempDir dir;
    const std::vector<CheckpointSeen> seen = RunSlowSinkJob(unaligned, dir.path(), n);
    ASSERT_GE(seen.size(), 3u);
    internal::CheckpointStorage storage(dir.path());
    int ahead_of_the_sink = 0, with_state = 0;
    for (const CheckpointSeen& c : seen) {
      absl::StatusOr<internal::LoadedCheckpoint> chk = storage.Load(storage.CheckpointPath(c.id));
      ASSERT_TRUE(chk.ok()) << chk.status();
      const Cut cut = ReadCut(*chk);
      // A consistent cut: every record the sources had emitted is counted or
      // in flight in the channel state, exactly once.
      EXPECT_EQ(cut.emitted, cut.counted + cut.in_flight) << "checkpoint " << c.id;
      if (!unaligned) {
        EXPECT_FALSE(cut.any_state);
        // Aligned: the sink had processed every record before the barrier
        // before the checkpoint could complete.
        EXPECT_GE(c.sink_seen, cut.emitted) << "checkpoint " << c.id;
      }
      with_state += cut.in_flight > 0 ? 1 : 0;
      ahead_of_the_sink += c.sink_seen < cut.emitted ? 1 : 0;
    }
    if (unaligned) {
      // The barriers overtook records queued in the full channels: they are
      // in the checkpoints, and the checkpoints completed before the sink
      // had processed them.
      EXPECT_GT(with_state, 0);
      EXPECT_GT(ahead_of_the_sink, 0);
    }
  }
}

// --- exactly once -------------------------------------------------------------

// A keyed running sum into exactly-once files, with a slow map before the
// sink (back-pressure) and a map that may throw.  `two_inputs`: the records
// come half from each of two sources through a two-input operator (its gate
// stores the channel state of both inputs), and, their order being free, the
// records themselves are written instead of running sums.
// With `uids`, every operator has a uid (tasks are matched by them); with
// `front` too, an unrelated source and sink come first, so every task of the
// job has another index than in a checkpoint taken without it; without
// `tail` the slow map and the file sink are replaced by a sink of the sums
// that discards them (uid "other-sink").
struct SumJobShape {
  bool uids = false;
  bool front = false;
  bool tail = true;
};

void BuildSumJob(StreamExecutionEnvironment& env, const std::string& out, int64_t n,
                 std::shared_ptr<testing::InjectedFailures> failures, int slow_us,
                 int tail_parallelism = 2, bool two_inputs = false, SumJobShape shape = {}) {
  env.set_batch_size(16).set_channel_capacity(2);
  // Matched by uid, every operator its own task: the slow map's task holds
  // no state but its records in flight.
  if (shape.uids) env.disable_operator_chaining();
  auto uid = [&shape](auto stream, const char* id) {
    if (shape.uids) stream.uid(id);
    return stream;
  };
  if (shape.front) {
    env.from_generator<int64_t>([](int64_t i) { return i; }, 10)
        .set_parallelism(1)
        .uid("front-source")
        .add_sink([](int64_t&&, Timestamp) {}, "Front Sink")
        .uid("front-sink");
  }
  DataStream<int64_t> input =
      uid(env.from_generator<int64_t>([](int64_t i) { return i; }, n).set_parallelism(1), "source");
  if (two_inputs) {
    const int64_t half = n / 2;
    input =
        env.from_generator<int64_t>([](int64_t i) { return i; }, half)
            .set_parallelism(1)
            .connect(env.from_generator<int64_t>([half](int64_t i) { return half + i; }, n - half)
                         .set_parallelism(1))
            .map([](const int64_t& v) { return v; }, [](const int64_t& v) { return v; })
            .set_parallelism(2)
            .name("Co Map")
            .rebalance();
  }
  DataStream<int64_t> mapped = uid(input
                                       .map([failures](const int64_t& v) -> int64_t {
                                         if (failures) failures->MaybeThrow(v);
                                         return v;
                                       })
                                       .set_parallelism(1)
                                       .name("Flaky Map"),
                                   "flaky-map");
  DataStream<int64_t> sums =
      two_inputs ? mapped
                 : uid(mapped.key_by([](const int64_t& v) { return v % 7; })
                           .reduce([](const int64_t& a, const int64_t& b) { return a + b; })
                           .set_parallelism(3),
                       "sums");
  if (!shape.tail) {
    sums.rebalance().add_sink([](int64_t&&, Timestamp) {}, "Other Sink").uid("other-sink");
    return;
  }
  DataStream<int64_t> slow =
      uid(sums.rebalance()
              .map([slow_us](const int64_t& v) -> int64_t {
                if (slow_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(slow_us));
                return v;
              })
              .set_parallelism(tail_parallelism)
              .name("Slow Map"),
          "slow-map");
  auto sink = slow.sink_to_files(out, [](const int64_t& v) { return std::to_string(v); })
                  .set_parallelism(tail_parallelism);
  if (shape.uids) sink.uid("sink");
}

std::vector<int64_t> CleanRun(int64_t n, bool two_inputs = false) {
  testing::TempDir out;
  StreamExecutionEnvironment env;
  BuildSumJob(env, out.path(), n, nullptr, 0, 2, two_inputs);
  JobResult r = env.execute("clean");
  EXPECT_TRUE(r.ok()) << r.status;
  int hidden = 0;
  return testing::CommittedInts(out.path(), &hidden);
}

// Runs BuildSumJob (`n` records, the slow map at 200 us) with unaligned
// checkpoints into `chk`, checkpointing until one holds channel state of a
// task whose name contains `task`, then cancels the job ("fails" it);
// *restore_id is that checkpoint (-1: none before the job ended).
void CheckpointUntilChannelState(const std::string& chk, const std::string& out, int64_t n,
                                 bool two_inputs, const std::string& task, int64_t* restore_id,
                                 SumJobShape shape = {}) {
  StreamExecutionEnvironment env;
  env.set_worker_threads(3);
  env.enable_checkpointing(Duration(0), chk, /*retain=*/1000);
  env.enable_unaligned_checkpoints();
  BuildSumJob(env, out, n, nullptr, 200, 2, two_inputs, shape);
  JobClient client = env.execute_async("first");
  internal::CheckpointStorage storage(chk);
  while (!client.done() && *restore_id < 0) {
    const int64_t id = client.trigger_checkpoint();
    if (id < 0) break;
    ASSERT_TRUE(client.wait_for_checkpoint(id, Duration(60'000)));
    absl::StatusOr<internal::LoadedCheckpoint> c = storage.Load(storage.CheckpointPath(id));
    ASSERT_TRUE(c.ok()) << c.status();
    for (const auto& [name, bytes] : c->states) {
      absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, name);
      ASSERT_TRUE(s.ok());
      if (!s->channel_state.empty() && s->task_name.find(task) != std::string::npos)
        *restore_id = id;
    }
  }
  client.cancel();
  bool hung = false;
  testing::WaitWithWatchdog(client, &hung);
  ASSERT_FALSE(hung);
}

void CancelRestoreRun(bool two_inputs) {
  const int64_t n = 6'000;
  const std::vector<int64_t> expected = CleanRun(n, two_inputs);
  ASSERT_EQ(expected.size(), static_cast<size_t>(n));
  const int reps = testing::StressIterations(2);
  // The task whose channel state the restored checkpoint must have.
  const std::string task = two_inputs ? "Co Map" : "";
  for (int rep = 0; rep < reps; ++rep) {
    testing::TempDir chk;
    testing::TempDir out;
    int64_t restore_id = -1;
    ASSERT_NO_FATAL_FAILURE(
        CheckpointUntilChannelState(chk.path(), out.path(), n, two_inputs, task, &restore_id));
    ASSERT_GE(restore_id, 0) << "no checkpoint had records in flight";
    StreamExecutionEnvironment env;
    env.set_worker_threads(3);
    env.enable_checkpointing(Duration(0), chk.path(), /*retain=*/1000);
    env.enable_unaligned_checkpoints();
    env.restore_from(internal::CheckpointStorage(chk.path()).CheckpointPath(restore_id).string());
    BuildSumJob(env, out.path(), n, nullptr, 0, 2, two_inputs);
    JobResult r = env.execute("restored");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(r.checkpoints.restored_id, restore_id);
    int hidden = 0;
    EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), expected) << "rep " << rep;
    EXPECT_EQ(hidden, 0);
  }
}

TEST(UnalignedJob, CancelledUnderBackPressureAndRestoredFromChannelStateCommitsTheCleanOutput) {
  CancelRestoreRun(/*two_inputs=*/false);
}

TEST(UnalignedJob, TheSameThroughATwoInputOperator) { CancelRestoreRun(/*two_inputs=*/true); }

TEST(UnalignedJob, AMapThrowingAtFiveRandomRecordsRestartsToTheFailureFreeOutput) {
  const int64_t n = 6'000;
  const std::vector<int64_t> expected = CleanRun(n);
  const int reps = testing::StressIterations(2);
  for (int rep = 0; rep < reps; ++rep) {
    std::mt19937_64 rng(777 + rep);
    auto failures = std::make_shared<testing::InjectedFailures>();
    failures->PickRandom(rng, n, 5);
    const std::set<int64_t> chosen = failures->pending;
    testing::TempDir chk;
    testing::TempDir out;
    StreamExecutionEnvironment env;
    env.enable_checkpointing(Duration(20), chk.path());
    env.enable_unaligned_checkpoints();
    env.set_restart_strategy(RestartStrategies::fixed_delay_restart(10, Duration(5)));
    BuildSumJob(env, out.path(), n, failures, 50);
    JobResult r = env.execute("flaky");
    ASSERT_TRUE(r.ok()) << r.status;
    EXPECT_EQ(failures->thrown, chosen);
    EXPECT_EQ(r.restarts.num_restarts, 5);
    int hidden = 0;
    EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), expected) << "rep " << rep;
    EXPECT_EQ(hidden, 0);
  }
}

TEST(UnalignedJob, RestoringChannelStateAtAnotherParallelismIsRefused) {
  const int64_t n = 6'000;
  testing::TempDir chk;
  testing::TempDir out;
  int64_t restore_id = -1;
  // The slow map's channel state (task 3, after the rebalance).
  ASSERT_NO_FATAL_FAILURE(
      CheckpointUntilChannelState(chk.path(), out.path(), n, false, "Slow Map", &restore_id));
  ASSERT_GE(restore_id, 0) << "no checkpoint had records in flight";
  // The slow map at 3 instead of 2: its channels changed.
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk.path(), /*retain=*/1000);
  env.restore_from(internal::CheckpointStorage(chk.path()).CheckpointPath(restore_id).string());
  BuildSumJob(env, out.path(), n, nullptr, 0, /*tail_parallelism=*/3);
  JobResult r = env.execute("rescaled");
  ASSERT_FALSE(r.ok());
  // Before the job starts, naming the task.
  EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
  EXPECT_THAT(std::string(r.status.message()), ::testing::HasSubstr("task 'Slow Map"));
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("has channel state (records in flight, stored by an unaligned "
                                   "checkpoint)"));
  EXPECT_THAT(std::string(r.status.message()),
              ::testing::HasSubstr("rescaling with channel state is not done"));
}

// Matched by uid, a task whose index moved (a new branch in front) has the
// same channels: its records in flight are restored and the output is exact.
TEST(UnalignedJob, TasksThatOnlyMovedIndexRestoreTheirChannelState) {
  const int64_t n = 6'000;
  const std::vector<int64_t> expected = CleanRun(n);
  testing::TempDir chk;
  testing::TempDir out;
  int64_t restore_id = -1;
  ASSERT_NO_FATAL_FAILURE(CheckpointUntilChannelState(chk.path(), out.path(), n, false, "Slow Map",
                                                      &restore_id, {.uids = true}));
  ASSERT_GE(restore_id, 0) << "no checkpoint had records in flight";
  StreamExecutionEnvironment env;
  env.enable_checkpointing(Duration(0), chk.path(), /*retain=*/1000);
  env.restore_from(internal::CheckpointStorage(chk.path()).CheckpointPath(restore_id).string());
  BuildSumJob(env, out.path(), n, nullptr, 0, 2, false, {.uids = true, .front = true});
  JobResult r = env.execute("moved");
  ASSERT_TRUE(r.ok()) << r.status;
  EXPECT_EQ(r.checkpoints.restored_id, restore_id);
  int hidden = 0;
  EXPECT_EQ(testing::CommittedInts(out.path(), &hidden), expected);
  EXPECT_EQ(hidden, 0);
}

// Records in flight are state (Flink's OperatorSubtaskState#hasState): a task
// the job no longer has that holds them is refused, before the job starts,
// unless non-restored state is allowed, which says so.
TEST(UnalignedJob, ARemovedTaskWithRecordsInFlightIsRefusedUnlessAllowed) {
  const int64_t n = 6'000;
  testing::TempDir chk;
  testing::TempDir out;
  int64_t restore_id = -1;
  ASSERT_NO_FATAL_FAILURE(CheckpointUntilChannelState(chk.path(), out.path(), n, false, "Slow Map",
                                                      &restore_id, {.uids = true}));
  ASSERT_GE(restore_id, 0) << "no checkpoint had records in flight";
  for (bool allow : {false, true}) {
    testing::TempDir out2;
    StreamExecutionEnvironment env;
    env.restore_from(internal::CheckpointStorage(chk.path()).CheckpointPath(restore_id).string());
    if (allow) env.set_allow_non_restored_state(true);
    BuildSumJob(env, out2.path(), n, nullptr, 0, 2, false, {.uids = true, .tail = false});
    JobResult r = env.execute("removed");
    if (!allow) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status.code(), absl::StatusCode::kFailedPrecondition) << r.status;
      EXPECT_THAT(std::string(r.status.message()),
                  ::testing::HasSubstr("its task 'Slow Map' (uids slow-map) is not in the job"));
    } else {
      ASSERT_TRUE(r.ok()) << r.status;
      EXPECT_THAT(r.checkpoints.notices,
                  ::testing::Contains(::testing::HasSubstr("its task 'Slow Map' (uids slow-map) is "
                                                           "not in the job: its state was not "
                                                           "restored")));
    }
  }
}

TEST(UnalignedJob, SavepointsStayAligned) {
  testing::TempDir chk;
  testing::TempDir sp;
  testing::TempDir out;
  StreamExecutionEnvironment env;
  env.set_worker_threads(3);
  env.enable_checkpointing(Duration(0), chk.path());
  env.enable_unaligned_checkpoints();
  BuildSumJob(env, out.path(), 200'000, nullptr, 100);
  JobClient client = env.execute_async("savepoint");
  int savepoints = 0;
  for (int i = 0; i < 3 && !client.done(); ++i) {
    absl::StatusOr<std::string> path = client.trigger_savepoint(sp.path());
    ASSERT_TRUE(path.ok()) << path.status();
    ++savepoints;
    internal::CheckpointStorage storage(sp.path());
    absl::StatusOr<internal::LoadedCheckpoint> c = storage.Load(*path);
    ASSERT_TRUE(c.ok()) << c.status();
    for (const auto& [name, bytes] : c->states) {
      absl::StatusOr<internal::SubtaskSnapshot> s = internal::DecodeSubtaskSnapshot(bytes, name);
      ASSERT_TRUE(s.ok());
      EXPECT_TRUE(s->channel_state.empty()) << name;
    }
  }
  client.cancel();
  bool hung = false;
  testing::WaitWithWatchdog(client, &hung);
  ASSERT_FALSE(hung);
  EXPECT_GT(savepoints, 0);
}

}  // namespace
}  // namespace tidemark
