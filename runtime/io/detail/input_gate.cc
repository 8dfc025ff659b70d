#include "tidemark/runtime/io/detail/input_gate.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/io/detail/remote_codec.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {
namespace {
// A control in channel state (an unaligned checkpoint's in-flight data).  A
// generalized watermark's tag is this process's number for its declaration
// (generalized_watermark.h): the declaration itself is stored, as across
// ranks (remote_codec.h), so a restore in another process reads the same kind.
void EncodeControl(StateWriter& w, const Control& ctl) {
  w.PutU8(1);
  w.PutU8(static_cast<uint8_t>(ctl.kind));
  if (ctl.kind == ControlKind::kGeneralized) {
    EncodeWatermarkSpec(w, ctl.tag);
  } else {
    w.PutVarint(ctl.tag);
  }
  w.PutI64(ctl.value);
}
}  // namespace

TaskInput::~TaskInput() = default;
void TaskInput::Open() {}
void TaskInput::Close() {}
Timestamp TaskInput::RetryAt() const { return kMaxTimestamp; }
bool TaskInput::NeedsOwnThread() const { return false; }
int TaskInput::WaitFd() const { return -1; }
bool TaskInput::IsSource() const { return false; }
bool TaskInput::Replayable() const { return true; }
void TaskInput::SnapshotPosition(StateWriter& /*w*/) const {}
void TaskInput::RestorePosition(StateReader& /*r*/) {}
absl::Status TaskInput::RestoreRescaled(const std::vector<const std::string*>& /*old*/) {
  return absl::OkStatus();
}
void TaskInput::SetBarrierHandler(BarrierHandler* /*h*/) {}
absl::Status TaskInput::RestoreChannelState(std::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  return absl::DataLossError("the checkpoint has channel state for an input without channels");
}

GateInputBase::~GateInputBase() = default;
void GateInputBase::SetBarrierHandler(BarrierHandler* h) { set_barrier_handler(h); }
void GateInputBase::SnapshotPosition(StateWriter& w) const { SnapshotValve(w); }
void GateInputBase::RestorePosition(StateReader& r) { RestoreValve(r); }
absl::Status GateInputBase::RestoreRescaled(const std::vector<const std::string*>& old) {
  return RestoreRescaledValve(old);
}

void GateInputBase::PollPriority() {
  int first = 0;
  for (GateChannelsCore* p : parts_) {
    p->PollPriority(*this, first);
    first += static_cast<int>(p->size());
  }
}

namespace {
constexpr uint32_t kChannelStateMagic = 0x544d4353;  // "TMCS"
// 2: a generalized watermark stores its declaration (1: this process's tag).
constexpr uint32_t kChannelStateVersion = 2;
}  // namespace

// Channel state format (docs/checkpoints.md, "Unaligned checkpoints"): u32
// magic, u32 version, varint number of channels stored, then per channel:
// varint gate channel, varint entries, bytes (the entries: u8 0, i64
// timestamp, the record's StateCodec; or u8 1, u8 control kind, varint tag
// -- for a generalized watermark its declaration (EncodeWatermarkSpec) --,
// i64 value).
absl::Status GateInputBase::RestoreChannelState(std::string_view bytes) {
  if (bytes.empty()) return absl::OkStatus();
  StateReader r(bytes);
  const uint32_t magic = r.GetU32("channel state magic");
  const uint32_t version = r.GetU32("channel state version");
  if (r.ok() && (magic != kChannelStateMagic || version < 1 || version > kChannelStateVersion)) {
    return absl::DataLossError(absl::StrCat("channel state: not of this format (magic ", magic,
                                            ", version ", version, ")"));
  }
  const uint64_t n = r.GetCount("channels");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    const uint64_t c = r.GetVarint("channel");
    const uint64_t entries = r.GetVarint("entries");
    const std::string_view data = r.GetBytes("channel state");
    if (!r.ok()) break;
    if (c >= num_channels()) {
      return absl::DataLossError(absl::StrCat("channel state of channel ", c, ": the gate has ",
                                              num_channels(), " channels"));
    }
    size_t local = c;
    for (GateChannelsCore* p : parts_) {
      if (local < p->size()) {
        if (absl::Status st = p->RestoreChannel(local, data, entries, version); !st.ok()) {
          return absl::DataLossError(
              absl::StrCat("channel state of channel ", c, ": ", st.message()));
        }
        break;
      }
      local -= p->size();
    }
  }
  if (!r.ok()) return absl::DataLossError(absl::StrCat("channel state: ", r.error()));
  return absl::OkStatus();
}

InputGateCore::~InputGateCore() = default;

InputGateCore::InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                             WatermarkListener* listener, std::vector<int> channel_inputs)
    : head_(head),
      metrics_(metrics),
      listener_(listener),
      input_of_(std::move(channel_inputs)),
      ended_channel_(static_cast<size_t>(num_channels)),
      blocked_(static_cast<size_t>(num_channels)),
      ua_done_(static_cast<size_t>(num_channels), -1),
      ua_bytes_(static_cast<size_t>(num_channels)),
      ua_entries_(static_cast<size_t>(num_channels), 0) {
  if (input_of_.empty()) input_of_.assign(static_cast<size_t>(num_channels), 0);
  const int inputs = input_of_.empty() ? 1 : input_of_.back() + 1;
  std::vector<int> counts(static_cast<size_t>(inputs), 0);
  first_of_.assign(static_cast<size_t>(inputs), 0);
  for (size_t c = 0; c < input_of_.size(); ++c) {
    const int i = input_of_[c];
    if (counts[static_cast<size_t>(i)] == 0)
      first_of_[static_cast<size_t>(i)] = static_cast<int>(c);
    local_of_.push_back(counts[static_cast<size_t>(i)]++);
  }
  valves_.reserve(static_cast<size_t>(inputs));
  emitters_.reserve(static_cast<size_t>(inputs));
  for (int i = 0; i < inputs; ++i) {
    valves_.emplace_back(counts[static_cast<size_t>(i)]);
    emitters_.emplace_back(this, i);
  }
  partial_watermark_.assign(static_cast<size_t>(inputs), kMinTimestamp);
  partial_idle_.assign(static_cast<size_t>(inputs), false);
  combiners_.resize(static_cast<size_t>(inputs));
}

bool InputGateCore::HandleControl(int c, const Control& ctl) {
  if (ctl.kind == ControlKind::kBarrier) {
    if (ctl.tag == kUnalignedBarrier) {
      OnUnalignedMarker(c, ctl.value);
      return false;
    }
    return OnBarrier(c, ctl.value);
  }
  const size_t i = static_cast<size_t>(input_of_[static_cast<size_t>(c)]);
  const int l = local_of_[static_cast<size_t>(c)];
  WatermarkValve& valve = valves_[i];
  const Timestamp before_wm = valve.channel_watermark(l);
  const bool before_idle = valve.channel_idle(l);
  const Timestamp before_out = output_watermark_;
  current_channel_ = c;
  notified_ = false;
  switch (ctl.kind) {
    case ControlKind::kWatermark:
      valve.InputWatermark(l, ctl.value, emitters_[i]);
      break;
    case ControlKind::kStatus:
      valve.InputStatus(l, static_cast<WatermarkStatus>(ctl.value), emitters_[i]);
      break;
    case ControlKind::kEndOfInput: {
      const bool was_recording = recording(c);
      valve.InputEnd(l, emitters_[i]);
      ++ended_;
      ended_channel_[static_cast<size_t>(c)] = true;
      // An ended channel's channel state is complete.
      if (was_recording && --ua_open_ == 0) CompleteUnaligned();
      break;
    }
    case ControlKind::kBarrier:
      break;  // handled above
    case ControlKind::kGeneralized:
      OnGeneralized(i, l, c, ctl);
      current_channel_ = -1;
      return false;
  }
  // Generalized watermarks' idleness (ignore_idle_channels): a channel is
  // left out when it turns idle or ends, and counts again from the first
  // watermark it sends after turning active, not at the status itself: a
  // source that ends while idle sends ACTIVE, W(MAX) and its end, and must
  // not count for that instant (docs/generalized-watermarks.md).
  if (!combiners_[i].empty()) {
    if (((ctl.kind == ControlKind::kStatus || ctl.kind == ControlKind::kEndOfInput) &&
         (valve.channel_idle(l) || valve.channel_ended(l))) ||
        (ctl.kind == ControlKind::kWatermark && ctl.value < kMaxWatermark)) {
      GeneralizedIdleness(i, l, c);
    }
  }
  if (!notified_ && (valve.channel_watermark(l) != before_wm ||
                     valve.channel_idle(l) != before_idle || output_watermark_ != before_out)) {
    Notify(c);
  }
  current_channel_ = -1;
  // An ended channel no longer holds an alignment back.
  if (ctl.kind == ControlKind::kEndOfInput) MaybeCompleteAlignment();
  return false;
}

void InputGateCore::OnGeneralized(size_t input, int local, int c, const Control& ctl) {
  std::vector<std::unique_ptr<WatermarkCombiner>>& list = combiners_[input];
  WatermarkCombiner* k = nullptr;
  for (auto& have : list)
    if (have->spec().id == ctl.tag) k = have.get();
  if (k == nullptr) {
    const WatermarkSpec* spec = LookupWatermarkSpec(ctl.tag);
    if (spec == nullptr)
      throw std::logic_error(absl::StrCat("a generalized watermark of unknown kind ", ctl.tag));
    const WatermarkValve& v = valves_[input];
    k = list.emplace_back(std::make_unique<WatermarkCombiner>(spec, v.num_channels())).get();
    for (int l = 0; l < v.num_channels(); ++l)
      k->SetIdle(l, v.channel_idle(l) || v.channel_ended(l));
  }
  // A value from a channel that turned active counts it again (the other
  // kinds' combiners too), then combines.
  const WatermarkValve& v = valves_[input];
  if (!v.channel_idle(local) && !v.channel_ended(local)) {
    for (auto& other : list) {
      if (other.get() == k) {
        k->SetIdle(local, false, /*combine=*/false);
      } else if (std::optional<int64_t> out = other->SetIdle(local, false)) {
        EmitGeneralized(input, *other, c, *out);
      }
    }
  }
  if (std::optional<int64_t> out = k->Input(local, ctl.value)) EmitGeneralized(input, *k, c, *out);
}

void InputGateCore::GeneralizedIdleness(size_t input, int local, int c) {
  const WatermarkValve& v = valves_[input];
  const bool idle = v.channel_idle(local) || v.channel_ended(local);
  for (auto& k : combiners_[input])
    if (std::optional<int64_t> out = k->SetIdle(local, idle)) EmitGeneralized(input, *k, c, *out);
}

void InputGateCore::EmitGeneralized(size_t input, const WatermarkCombiner& k, int c,
                                    int64_t value) {
  const GeneralizedWatermark w(&k.spec(), value);
  if (listener_)
    listener_->OnGeneralizedWatermark(metrics_->task_name(), metrics_->subtask(), true, c, w);
  (generalized_heads_.empty() ? head_ : generalized_heads_[input])->EmitGeneralizedWatermark(w);
}

// Snapshot format: one input: its valve (WatermarkValve::Snapshot); two: both
// valves, then the combined watermark and idleness.
void InputGateCore::SnapshotValve(StateWriter& w) const {
  for (const WatermarkValve& v : valves_) v.Snapshot(w);
  if (valves_.size() > 1) {
    w.PutI64(output_watermark_);
    w.PutU8(output_idle_ ? 1 : 0);
  }
}

void InputGateCore::RestoreValve(StateReader& r) {
  for (size_t i = 0; i < valves_.size(); ++i) {
    if (!valves_[i].Restore(r)) {
      if (r.ok()) {
        r.Fail(
            absl::StrCat("the checkpoint's input gate has another number of channels than this "
                         "one (",
                         valves_[i].num_channels(),
                         valves_.size() > 1 ? absl::StrCat(" on input ", i + 1) : "", ")"));
      }
      return;
    }
  }
  if (valves_.size() > 1) {
    output_watermark_ = r.GetI64("gate watermark");
    output_idle_ = r.GetU8("gate idle") != 0;
    if (!r.ok()) return;
    for (size_t i = 0; i < valves_.size(); ++i) {
      partial_watermark_[i] = valves_[i].last_output_watermark();
      partial_idle_[i] = valves_[i].last_output_status() == WatermarkStatus::kIdle;
    }
  } else {
    output_watermark_ = valves_[0].last_output_watermark();
    output_idle_ = valves_[0].last_output_status() == WatermarkStatus::kIdle;
  }
  for (int c = 0; c < static_cast<int>(input_of_.size()); ++c) {
    const WatermarkValve& v = valves_[static_cast<size_t>(input_of_[static_cast<size_t>(c)])];
    const int l = local_of_[static_cast<size_t>(c)];
    InputChannelMetrics& m = metrics_->channel(c);
    m.watermark.store(v.channel_watermark(l), std::memory_order_relaxed);
    m.idle.store(v.channel_idle(l), std::memory_order_relaxed);
  }
  if (output_watermark_ > kMinTimestamp) {
    metrics_->input_watermark.store(output_watermark_, std::memory_order_relaxed);
    head_->EmitWatermark(output_watermark_);
  }
  if (output_idle_) head_->EmitStatus(WatermarkStatus::kIdle);
}

absl::Status InputGateCore::RestoreRescaledValve(const std::vector<const std::string*>& old) {
  Timestamp lowest = kMaxWatermark;
  for (size_t k = 0; k < old.size(); ++k) {
    StateReader r(*old[k]);
    Timestamp w = WatermarkValve::SnapshotOutputWatermark(r);
    if (valves_.size() > 1) {
      r.GetU8("valve idle");
      for (size_t i = 1; i < valves_.size(); ++i) {
        WatermarkValve::SnapshotOutputWatermark(r);
        r.GetU8("valve idle");
      }
      w = r.GetI64("gate watermark");
    }
    if (!r.ok()) return absl::DataLossError(absl::StrCat("old subtask ", k, ": ", r.error()));
    lowest = std::min(lowest, w);
  }
  if (old.empty() || lowest == kMinTimestamp) return absl::OkStatus();
  for (WatermarkValve& v : valves_) v.RestoreOutput(lowest);
  for (Timestamp& p : partial_watermark_) p = lowest;
  output_watermark_ = lowest;
  metrics_->input_watermark.store(lowest, std::memory_order_relaxed);
  head_->EmitWatermark(lowest);
  return absl::OkStatus();
}

void InputGateCore::OnInputWatermark(int input, Timestamp w) {
  if (valves_.size() == 1) return Emit(w);
  // Flink's PartialWatermark::setWatermark: a watermark clears the idleness.
  const size_t i = static_cast<size_t>(input);
  partial_idle_[i] = false;
  partial_watermark_[i] = std::max(partial_watermark_[i], w);
  if (UpdateCombined()) Emit(output_watermark_);
}

void InputGateCore::OnInputStatus(int input, WatermarkStatus s) {
  if (valves_.size() == 1) return Emit(s);
  const bool was_idle = output_idle_;
  partial_idle_[static_cast<size_t>(input)] = s == WatermarkStatus::kIdle;
  if (UpdateCombined()) Emit(output_watermark_);
  if (output_idle_ != was_idle) Emit(s);
}

bool InputGateCore::UpdateCombined() {
  Timestamp max_all = kMinTimestamp, min_active = kMaxTimestamp;
  bool all_idle = true;
  for (size_t i = 0; i < valves_.size(); ++i) {
    max_all = std::max(max_all, partial_watermark_[i]);
    if (!partial_idle_[i]) {
      min_active = std::min(min_active, partial_watermark_[i]);
      all_idle = false;
    }
  }
  output_idle_ = all_idle;
  // Every input idle: the maximum is flushed (current Flink's
  // CombinedWatermarkStatus, as the valve does over channels).
  const Timestamp combined = all_idle ? max_all : min_active;
  if (combined > output_watermark_) {
    output_watermark_ = combined;
    return true;
  }
  return false;
}

bool InputGateCore::OnBarrier(int c, int64_t id) {
  if (id <= last_aligned_) return false;  // not expected: a barrier of a completed checkpoint
  if (aligning_ >= 0 && id > aligning_) {
    // A newer checkpoint while one is being aligned: the older one can no
    // longer complete here (the coordinator does not start n + 1 before n has
    // completed, so this only follows an abandoned checkpoint); start over.
    std::fill(blocked_.begin(), blocked_.end(), false);
    num_blocked_ = 0;
    aligning_ = -1;
  }
  if (aligning_ < 0) {
    aligning_ = id;
    align_start_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  }
  if (!blocked_[static_cast<size_t>(c)]) {
    blocked_[static_cast<size_t>(c)] = true;
    ++num_blocked_;
  }
  MaybeCompleteAlignment();
  return blocked_[static_cast<size_t>(c)];
}

void InputGateCore::OnUnalignedMarker(int c, int64_t id) {
  if (unaligned_done(c, id)) return;  // its priority barrier came first
  // The first barrier of `id` here, in band (read before its priority lane
  // was checked): the records before it were processed before the snapshot.
  if (BeginUnaligned(id)) UnalignedChannelDone(c, id);
}

bool InputGateCore::BeginUnaligned(int64_t id) {
  if (id == ua_id_) return true;
  if (id <= ua_last_started_) return false;  // an older one, abandoned
  // (A newer one while one is being stored: that one was abandoned.)
  ua_id_ = id;
  ua_last_started_ = id;
  ua_open_ = 0;
  for (size_t c = 0; c < ua_done_.size(); ++c) {
    ua_bytes_[c].clear();
    ua_entries_[c] = 0;
    if (!ended_channel_[c] && ua_done_[c] < id) ++ua_open_;
  }
  if (barrier_handler_ != nullptr) barrier_handler_->OnUnalignedBarrier(id);
  return true;
}

void InputGateCore::UnalignedChannelDone(int c, int64_t id) {
  const size_t k = static_cast<size_t>(c);
  const bool counted = id == ua_id_ && ua_done_[k] < id && !ended_channel_[k];
  ua_done_[k] = std::max(ua_done_[k], id);
  if (counted && --ua_open_ == 0) CompleteUnaligned();
}

void InputGateCore::CompleteUnaligned() {
  const int64_t id = ua_id_;
  ua_id_ = -1;
  StateWriter w;
  w.PutU32(kChannelStateMagic);
  w.PutU32(kChannelStateVersion);
  size_t stored = 0;
  for (uint64_t e : ua_entries_) stored += e != 0 ? 1 : 0;
  w.PutVarint(stored);
  for (size_t c = 0; c < ua_bytes_.size(); ++c) {
    if (ua_entries_[c] == 0) continue;
    w.PutVarint(c);
    w.PutVarint(ua_entries_[c]);
    w.PutBytes(ua_bytes_[c]);
    std::string().swap(ua_bytes_[c]);
    ua_entries_[c] = 0;
  }
  if (barrier_handler_ != nullptr)
    barrier_handler_->OnChannelStateComplete(id, stored == 0 ? std::string() : w.Release());
}

void InputGateCore::MaybeCompleteAlignment() {
  if (aligning_ < 0 || num_blocked_ + ended_ < blocked_.size()) return;
  const int64_t id = aligning_;
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  std::fill(blocked_.begin(), blocked_.end(), false);
  num_blocked_ = 0;
  aligning_ = -1;
  last_aligned_ = id;
  if (barrier_handler_ != nullptr) barrier_handler_->OnBarrierAligned(id, now_ns - align_start_ns_);
}

// Publishes channel `c`'s state (metrics, listener).
void InputGateCore::Notify(int c) {
  notified_ = true;
  const WatermarkValve& v = valves_[static_cast<size_t>(input_of_[static_cast<size_t>(c)])];
  const int l = local_of_[static_cast<size_t>(c)];
  InputChannelMetrics& m = metrics_->channel(c);
  m.watermark.store(v.channel_watermark(l), std::memory_order_relaxed);
  m.idle.store(v.channel_idle(l), std::memory_order_relaxed);
  if (listener_) {
    WatermarkListener::ChannelEvent e{
        &metrics_->task_name(), metrics_->subtask(), c,
        v.channel_watermark(l), v.channel_idle(l),   output_watermark_,
        output_idle_,           HoldingChannel(),    v.channel_aligned(l)};
    listener_->OnInputChannel(e);
  }
}

int InputGateCore::HoldingChannel() const {
  if (valves_.size() == 1) return valves_[0].HoldingChannel();
  // The input with the lowest watermark among the active ones (ties: the
  // first), and its valve's holding channel.
  int best = -1;
  for (size_t i = 0; i < valves_.size(); ++i) {
    if (partial_idle_[i]) continue;
    if (best < 0 || partial_watermark_[i] < partial_watermark_[static_cast<size_t>(best)])
      best = static_cast<int>(i);
  }
  if (best < 0) return -1;
  const int l = valves_[static_cast<size_t>(best)].HoldingChannel();
  return l < 0 ? -1 : first_of_[static_cast<size_t>(best)] + l;
}

void InputGateCore::Emit(Timestamp w) {
  output_watermark_ = w;
  metrics_->input_watermark.store(w, std::memory_order_relaxed);
  if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
  head_->EmitWatermark(w);
}

void InputGateCore::Emit(WatermarkStatus s) {
  output_idle_ = s == WatermarkStatus::kIdle;
  if (current_channel_ >= 0 && !notified_) Notify(current_channel_);
  head_->EmitStatus(s);
}

GateChannelsCore::GateChannelsCore(std::vector<ChannelBase*> channels, OutputBase* head,
                                   Deliver deliver, Codec codec)
    : channels_(std::move(channels)),
      head_(head),
      deliver_(deliver),
      codec_(std::move(codec)),
      held_(channels_.size()),
      ahead_(channels_.size()) {}

GateChannelsCore::~GateChannelsCore() = default;
GateChannelsCore::GateChannelsCore(GateChannelsCore&&) noexcept = default;

GateChannelsCore::Took GateChannelsCore::Step(GateInputBase& gate, size_t k, int c) {
  Held& held = held_[k];
  if (held.batch) {
    // The rest of a batch that a barrier held back.
    auto batch = std::move(held.batch);
    if (!Process(gate, k, c, batch, held.control, held.position))
      channels_[k]->RecycleAnyBatch(std::move(batch));
    return Took::kBatch;
  }
  if (!ahead_[k].empty()) [[unlikely]] {
    // Taken out ahead of its turn (a captured priority barrier's, or
    // restored channel state).
    auto batch = std::move(ahead_[k].front());
    ahead_[k].pop_front();
    if (!Process(gate, k, c, batch, 0, 0)) channels_[k]->RecycleAnyBatch(std::move(batch));
    return Took::kBatch;
  }
  if (channels_[k]->SizeApprox() == 0) return Took::kNothing;
  auto batch = channels_[k]->PopBatch();
  if (!batch) return Took::kNothing;
  if (!Process(gate, k, c, batch, 0, 0)) channels_[k]->RecycleAnyBatch(std::move(batch));
  return Took::kBatch;
}

bool GateChannelsCore::Process(GateInputBase& gate, size_t k, int c,
                               std::unique_ptr<BatchBase>& batch, size_t first_control,
                               uint32_t done) {
  BatchBase& b = *batch;
  const auto nr = static_cast<uint32_t>(b.NumRecords());
  const uint32_t start = done;
  for (size_t i = first_control; i < b.controls.size(); ++i) {
    const Control& ctl = b.controls[i];
    if (ctl.position > done) {
      RecordRun(gate, c, b, done, ctl.position);
      deliver_(head_, b, done, ctl.position);
      done = ctl.position;
    }
    if (ctl.kind != ControlKind::kBarrier && ctl.kind != ControlKind::kEndOfInput &&
        gate.recording(c)) [[unlikely]] {
      StateWriter w(gate.channel_state_buffer(c));
      EncodeControl(w, ctl);
      gate.add_channel_state_entries(c, 1);
    }
    if (gate.OnControl(c, ctl)) {
      if (done > start) gate.CountIn(done - start);
      held_[k] = Held{std::move(batch), i + 1, done};
      return true;
    }
  }
  if (done < nr) {
    RecordRun(gate, c, b, done, nr);
    deliver_(head_, b, done, nr);
  }
  if (nr > start) gate.CountIn(nr - start);
  return false;
}

void GateChannelsCore::RecordRun(GateInputBase& gate, int c, const BatchBase& b, uint32_t from,
                                 uint32_t to) {
  if (!gate.recording(c)) [[likely]]
    return;
  NeedCodec();
  StateWriter w(gate.channel_state_buffer(c));
  codec_.encode(b, from, to, w);
  gate.add_channel_state_entries(c, to - from);
}

void GateChannelsCore::NeedCodec() const {
  if (codec_.encode == nullptr) {
    throw std::runtime_error(
        absl::StrCat("unaligned checkpoint: the records in flight are of type ", codec_.type,
                     ", which has no StateCodec (specialise tidemark::StateCodec for it, or use "
                     "aligned checkpoints)"));
  }
}

bool GateChannelsCore::EncodeUntilMarker(const BatchBase& b, size_t first_control, uint32_t from,
                                         int64_t id, StateWriter& w, uint64_t* entries) const {
  uint32_t done = from;
  for (size_t i = first_control; i < b.controls.size(); ++i) {
    const Control& ctl = b.controls[i];
    if (ctl.position > done) {
      codec_.encode(b, done, ctl.position, w);
      *entries += ctl.position - done;
      done = ctl.position;
    }
    if (ctl.kind == ControlKind::kBarrier) {
      if (ctl.tag == kUnalignedBarrier && ctl.value == id) return true;
      continue;
    }
    if (ctl.kind == ControlKind::kEndOfInput) return true;  // nothing comes after it
    EncodeControl(w, ctl);
    ++*entries;
  }
  const auto nr = static_cast<uint32_t>(b.NumRecords());
  if (done < nr) {
    codec_.encode(b, done, nr, w);
    *entries += nr - done;
  }
  return false;
}

void GateChannelsCore::PollPriority(GateInputBase& gate, int first) {
  for (size_t k = 0; k < channels_.size(); ++k) {
    const int64_t id = channels_[k]->PriorityBarrier();
    if (id < 0) [[likely]]
      continue;
    const int c = first + static_cast<int>(k);
    if (!gate.unaligned_done(c, id)) {
      if (gate.BeginUnaligned(id)) Capture(gate, k, c, id);
      gate.UnalignedChannelDone(c, id);
    }
  }
  // A channel whose producer has ended gets no barrier: while a checkpoint
  // is being stored, its channel state is its queue up to the end (which
  // may be long under back-pressure), taken now rather than as it drains.
  const int64_t current = gate.unaligned_checkpoint();
  if (current < 0) [[likely]]
    return;
  for (size_t k = 0; k < channels_.size(); ++k) {
    const int c = first + static_cast<int>(k);
    if (gate.unaligned_done(c, current) || !channels_[k]->ProducerEnded()) continue;
    if (channels_[k]->PriorityBarrier() >= current) continue;  // its marker is queued: above
    Capture(gate, k, c, current);
    gate.UnalignedChannelDone(c, current);
    if (gate.unaligned_checkpoint() != current) return;  // complete
  }
}

void GateChannelsCore::Capture(GateInputBase& gate, size_t k, int c, int64_t id) {
  NeedCodec();
  StateWriter w(gate.channel_state_buffer(c));
  uint64_t entries = 0;
  bool found = false;
  if (held_[k].batch)
    found =
        EncodeUntilMarker(*held_[k].batch, held_[k].control, held_[k].position, id, w, &entries);
  for (size_t i = 0; i < ahead_[k].size() && !found; ++i)
    found = EncodeUntilMarker(*ahead_[k][i], 0, 0, id, w, &entries);
  // Encoded where they are: the batches stay queued (and the producer
  // back-pressured), to be processed in turn.
  if (!found) {
    channels_[k]->VisitQueued([&](const BatchBase& b) {
      found = EncodeUntilMarker(b, 0, 0, id, w, &entries);
      return found;
    });
  }
  if (!found) {
    // The marker is pushed with the priority barrier, and the end with
    // ProducerEnded, in one critical section each (channel.h).
    throw std::logic_error(absl::StrCat("unaligned checkpoint ", id, ": channel ", c,
                                        " has neither its marker nor its end queued"));
  }
  gate.add_channel_state_entries(c, entries);
}

absl::Status GateChannelsCore::RestoreChannel(size_t k, std::string_view bytes, uint64_t entries,
                                              uint32_t version) {
  if (codec_.decode == nullptr) {
    return absl::DataLossError(
        absl::StrCat("the records are of type ", codec_.type, ", which has no StateCodec"));
  }
  constexpr size_t kBatchRecords = 1024;
  StateReader r(bytes);
  std::unique_ptr<BatchBase> b = channels_[k]->AcquireAnyBatch();
  for (uint64_t e = 0; e < entries && r.ok(); ++e) {
    const uint8_t what = r.GetU8("entry kind");
    if (what == 0) {
      codec_.decode(*b, r);
      if (b->NumRecords() >= kBatchRecords) {
        ahead_[k].push_back(std::move(b));
        b = channels_[k]->AcquireAnyBatch();
      }
    } else if (what == 1) {
      Control ctl{};
      ctl.position = static_cast<uint32_t>(b->NumRecords());
      const uint8_t kind = r.GetU8("control kind");
      if (kind > static_cast<uint8_t>(ControlKind::kGeneralized) ||
          kind == static_cast<uint8_t>(ControlKind::kBarrier) ||
          kind == static_cast<uint8_t>(ControlKind::kEndOfInput)) {
        r.Fail(absl::StrCat("entry ", e, ": control kind ", kind, " is not stored"));
        break;
      }
      if (kind == static_cast<uint8_t>(ControlKind::kGeneralized)) {
        if (version < 2) {
          r.Fail(absl::StrCat("entry ", e,
                              ": a generalized watermark stored by an earlier version (by its "
                              "number in that process, not its declaration) cannot be restored"));
          break;
        }
        ctl.tag = DecodeWatermarkSpec(r);
      } else {
        ctl.tag = static_cast<uint16_t>(r.GetVarint("control tag"));
      }
      ctl.value = r.GetI64("control value");
      ctl.kind = static_cast<ControlKind>(kind);
      b->controls.push_back(ctl);
    } else if (r.ok()) {
      r.Fail(absl::StrCat("entry ", e, ": unknown kind ", what));
    }
  }
  if (!r.ok()) return absl::DataLossError(r.error());
  if (!r.AtEnd()) return absl::DataLossError(absl::StrCat(r.remaining(), " bytes after the end"));
  if (b->NumRecords() != 0 || !b->controls.empty()) ahead_[k].push_back(std::move(b));
  return absl::OkStatus();
}

OneInputGate::OneInputGate(GateChannelsCore in, SubtaskMetrics* metrics,
                           WatermarkListener* listener, OutputBase* head)
    : GateInputBase(static_cast<int>(in.size()), head, metrics, listener), in_(std::move(in)) {
  set_parts({&in_});
}

OneInputGate::~OneInputGate() = default;

TaskInput::Step OneInputGate::RunStep() {
  return Round([this](size_t c) {
    return in_.Step(*this, c, static_cast<int>(c)) == GateChannelsCore::Took::kBatch;
  });
}

}  // namespace tidemark::internal
