#include "tidemark/runtime/io/detail/input_gate.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

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

GateInputBase::~GateInputBase() = default;
void GateInputBase::SetBarrierHandler(BarrierHandler* h) { set_barrier_handler(h); }
void GateInputBase::SnapshotPosition(StateWriter& w) const { SnapshotValve(w); }
void GateInputBase::RestorePosition(StateReader& r) { RestoreValve(r); }
absl::Status GateInputBase::RestoreRescaled(const std::vector<const std::string*>& old) {
  return RestoreRescaledValve(old);
}

InputGateCore::~InputGateCore() = default;

InputGateCore::InputGateCore(int num_channels, OutputBase* head, SubtaskMetrics* metrics,
                             WatermarkListener* listener, std::vector<int> channel_inputs)
    : head_(head),
      metrics_(metrics),
      listener_(listener),
      input_of_(std::move(channel_inputs)),
      ended_channel_(static_cast<size_t>(num_channels)),
      blocked_(static_cast<size_t>(num_channels)) {
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
  if (ctl.kind == ControlKind::kBarrier) return OnBarrier(c, ctl.value);
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
    case ControlKind::kEndOfInput:
      valve.InputEnd(l, emitters_[i]);
      ++ended_;
      ended_channel_[static_cast<size_t>(c)] = true;
      break;
    case ControlKind::kBarrier:
      break;  // handled above
    case ControlKind::kGeneralized:
      OnGeneralized(i, l, c, ctl);
      current_channel_ = -1;
      return false;
  }
  if (!combiners_[i].empty() && ctl.kind != ControlKind::kWatermark) GeneralizedIdleness(i, l, c);
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
  if (std::optional<int64_t> out = k->Input(local, ctl.value)) EmitGeneralized(*k, c, *out);
}

void InputGateCore::GeneralizedIdleness(size_t input, int local, int c) {
  const WatermarkValve& v = valves_[input];
  const bool idle = v.channel_idle(local) || v.channel_ended(local);
  for (auto& k : combiners_[input])
    if (std::optional<int64_t> out = k->SetIdle(local, idle)) EmitGeneralized(*k, c, *out);
}

void InputGateCore::EmitGeneralized(const WatermarkCombiner& k, int c, int64_t value) {
  const GeneralizedWatermark w(&k.spec(), value);
  if (listener_)
    listener_->OnGeneralizedWatermark(metrics_->task_name(), metrics_->subtask(), true, c, w);
  head_->EmitGeneralizedWatermark(w);
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
                                   Deliver deliver)
    : channels_(std::move(channels)), head_(head), deliver_(deliver), held_(channels_.size()) {}

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
      deliver_(head_, b, done, ctl.position);
      done = ctl.position;
    }
    if (gate.OnControl(c, ctl)) {
      if (done > start) gate.CountIn(done - start);
      held_[k] = Held{std::move(batch), i + 1, done};
      return true;
    }
  }
  if (done < nr) deliver_(head_, b, done, nr);
  if (nr > start) gate.CountIn(nr - start);
  return false;
}

OneInputGate::OneInputGate(GateChannelsCore in, SubtaskMetrics* metrics,
                           WatermarkListener* listener, OutputBase* head)
    : GateInputBase(static_cast<int>(in.size()), head, metrics, listener), in_(std::move(in)) {}

OneInputGate::~OneInputGate() = default;

TaskInput::Step OneInputGate::RunStep() {
  return Round([this](size_t c) {
    return in_.Step(*this, c, static_cast<int>(c)) == GateChannelsCore::Took::kBatch;
  });
}

}  // namespace tidemark::internal
