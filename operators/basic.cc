#include "tidemark/operators/basic.h"

namespace tidemark::internal {

void TimestampsEmitter::EmitWatermark(Timestamp w) {
  if (deferring_) return Defer(Action::kWatermark, w);
  if (w <= last_emitted_) return;
  if (idle_) {
    idle_ = false;
    out_->EmitStatus(WatermarkStatus::kActive);
  }
  last_emitted_ = w;
  out_->EmitWatermark(w);
}

void TimestampsEmitter::MarkIdle() {
  if (deferring_) return Defer(Action::kIdle, 0);
  if (idle_) return;
  idle_ = true;
  out_->EmitStatus(WatermarkStatus::kIdle);
}

void TimestampsEmitter::MarkActive() {
  if (deferring_) return Defer(Action::kActive, 0);
  if (!idle_) return;
  idle_ = false;
  out_->EmitStatus(WatermarkStatus::kActive);
}

void TimestampsEmitter::Defer(Action what, Timestamp w) {
  pending_.emplace_back(what, w);
  has_pending_ = true;
}

void TimestampsEmitter::ApplyPending() {
  has_pending_ = false;
  auto actions = std::move(pending_);
  pending_.clear();
  for (auto [what, w] : actions) {
    switch (what) {
      case Action::kWatermark:
        EmitWatermark(w);
        break;
      case Action::kIdle:
        MarkIdle();
        break;
      case Action::kActive:
        MarkActive();
        break;
    }
  }
}

int SplitWatermarks::Add(std::string id) {
  splits_.push_back(Split{std::move(id)});
  return static_cast<int>(splits_.size()) - 1;
}

int SplitWatermarks::Find(const std::string& id) const {
  for (size_t i = 0; i < splits_.size(); ++i)
    if (splits_[i].id == id) return static_cast<int>(i);
  return -1;
}

// Flink's CombinedWatermarkStatus#updateCombinedWatermark, with one
// difference: when every split is idle, the flushed maximum is emitted and
// then IDLE at once (Flink's multiplexer emits the watermark now and IDLE at
// its next update), as the valve does (3.2).
void SplitWatermarks::Update(WatermarkOutput& out) {
  Timestamp max_all = kMinTimestamp;
  Timestamp min_active = kMaxTimestamp;
  bool any = false;
  bool all_idle = true;
  for (const Split& s : splits_) {
    if (s.released) continue;
    any = true;
    max_all = std::max(max_all, s.watermark);
    if (!s.idle) {
      min_active = std::min(min_active, s.watermark);
      all_idle = false;
    }
  }
  // Every split released (or none registered): nothing changes, as in
  // Flink, whose CombinedWatermarkStatus does not update without outputs.
  // The subtask keeps its watermark and status until a split is added or
  // the input ends (kMaxWatermark).
  if (!any) return;
  const Timestamp c = all_idle ? max_all : min_active;
  if (c > combined_) {
    combined_ = c;
    out.EmitWatermark(c);
  }
  if (all_idle) {
    out.MarkIdle();
  } else {
    out.MarkActive();  // a split came back: so is the subtask
  }
}

TimestampsAndWatermarksCore::TimestampsAndWatermarksCore(bool per_split) : per_split_(per_split) {}
TimestampsAndWatermarksCore::~TimestampsAndWatermarksCore() = default;

void TimestampsAndWatermarksCore::OpenCore(OperatorContext& ctx, Settings settings) {
  ctx_ = &ctx;
  periodic_per_record_ = settings.periodic_per_record;
  generator_ = NewGenerator();
  forwarder_.op = this;
  emitter_.set_out(&forwarder_);
  interval_ = ToMillis(ctx.config().auto_watermark_interval);
  if (interval_ > 0 && !periodic_per_record_) ScheduleNext();
  // Watermark alignment: join the group, report every update interval.
  if (settings.aligned && ctx.source_alignment() != nullptr) {
    align_ = ctx.source_alignment();
    alignment_interval_ = settings.alignment_interval_ms;
    align_->Join(settings.alignment_group, settings.alignment_drift_ms);
    ScheduleReport();
  }
  if (settings.skew_ms >= 0) {
    skew_ = settings.skew_ms;
    future_ = ctx.counter("numFutureRecords");
    future_dropped_ = ctx.counter("numFutureRecordsDropped");
  }
}

void TimestampsAndWatermarksCore::FinishCore() {
  PeriodicEmit();
  if (align_ != nullptr) align_->Report(/*idle_or_finished=*/true);
}

void TimestampsAndWatermarksCore::CountFuture(bool diverted) {
  future_->Inc();
  if (!diverted) future_dropped_->Inc();
}

int TimestampsAndWatermarksCore::RegisterSplit(const std::string& split_id) {
  int i = combined_.Find(split_id);
  if (i >= 0 && !combined_.at(i).released) return i;
  if (i < 0) {
    i = combined_.Add(split_id);
    split_state_.push_back(std::make_unique<SplitState>());
  } else {
    combined_.at(i) = SplitWatermarks::Split{split_id};
  }
  SplitState& st = *split_state_[static_cast<size_t>(i)];
  st.op = this;
  st.index = i;
  st.generator = NewGenerator();
  // A restored job: the split's generator continues where it was.
  auto restored = restored_splits_.find(split_id);
  if (restored != restored_splits_.end()) {
    StateReader r(restored->second.generator);
    st.generator->RestoreState(r);
    combined_.at(i).watermark = restored->second.watermark;
    restored_splits_.erase(restored);
  }
  return i;
}

void TimestampsAndWatermarksCore::SetCurrentSplit(int index) {
  // Records of no split: the subtask's own generator while the source
  // has named no split (the single-generator path), else the split
  // "(main)".
  if (index < 0 && combined_.size() > 0) index = MainSplit();
  current_ = index;
}

void TimestampsAndWatermarksCore::ReleaseSplit(int index) {
  if (index < 0 || index >= combined_.size() || combined_.at(index).released) return;
  combined_.at(index).released = true;
  split_state_[static_cast<size_t>(index)]->generator.reset();
  if (current_ == index) current_ = -1;
  combined_.Update(emitter_);
}

void TimestampsAndWatermarksCore::ReleaseSplitIfHeld(const std::string& split_id) {
  if (const int i = combined_.Find(split_id); i >= 0) ReleaseSplit(i);
}

void TimestampsAndWatermarksCore::SnapshotCore(StateWriter& w) {
  w.PutI64(emitter_.last_emitted());
  w.PutU8(emitter_.idle() ? 1 : 0);
  StateWriter g;
  generator_->SnapshotState(g);
  w.PutBytes(g.data());
  if (!per_split_) return;
  uint64_t live = 0;
  for (int i = 0; i < combined_.size(); ++i) live += combined_.at(i).released ? 0 : 1;
  w.PutU64(live);
  for (int i = 0; i < combined_.size(); ++i) {
    if (combined_.at(i).released) continue;
    w.PutBytes(combined_.at(i).id);
    w.PutI64(combined_.at(i).watermark);
    StateWriter sg;
    split_state_[static_cast<size_t>(i)]->generator->SnapshotState(sg);
    w.PutBytes(sg.data());
  }
}

void TimestampsAndWatermarksCore::RestoreCore(StateReader& r) {
  const Timestamp last = r.GetI64("last watermark");
  const bool idle = r.GetU8("idle") != 0;
  const std::string_view g = r.GetBytes("generator state");
  if (!r.ok()) return;
  emitter_.Restore(last, idle);
  // Aligned, the restored watermark is the subtask's: it reports it and
  // pauses when it is ahead of the group (RestoreState follows Open, which
  // joined the group).  Otherwise a restored subtask reported nothing until
  // the source went past it, and neither paused nor held the others back.
  if (align_ != nullptr && last != kMinTimestamp) align_->OnWatermark(last);
  StateReader gr(g);
  generator_->RestoreState(gr);
  if (!gr.ok()) r.Fail(absl::StrCat("watermark generator: ", gr.error()));
  if (!per_split_) return;
  const uint64_t n = r.GetU64("splits");
  std::vector<std::string> ids;
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    std::string id(r.GetBytes("split id"));
    RestoredSplit rs;
    rs.watermark = r.GetI64("split watermark");
    rs.generator = std::string(r.GetBytes("split generator"));
    ids.push_back(id);
    restored_splits_[id] = std::move(rs);
  }
  if (!r.ok()) return;
  // Every split the subtask held at the checkpoint counts again at once,
  // with its watermark, as it did before: the source reads its splits back
  // one after another, and the first one read must not move the subtask's
  // watermark past one not yet read (a record of that one would then be
  // late where a run without the restore took it on time).  A split stops
  // counting when the source releases it (SourceDriverCore::DropSplit
  // releases a restored split the source ends before any record of it).
  for (const std::string& id : ids) RegisterSplit(id);
}

void TimestampsAndWatermarksCore::SplitState::EmitWatermark(Timestamp w) {
  SplitWatermarks::Split& s = op->combined_.at(index);
  const bool was_idle = s.idle;
  s.idle = false;
  if (w > s.watermark) {
    s.watermark = w;
  } else if (!was_idle) {
    return;
  }
  op->SplitChanged(index);
}

void TimestampsAndWatermarksCore::SplitState::MarkIdle() {
  SplitWatermarks::Split& s = op->combined_.at(index);
  if (s.idle) return;
  s.idle = true;
  op->SplitChanged(index);
}

void TimestampsAndWatermarksCore::SplitState::MarkActive() {
  SplitWatermarks::Split& s = op->combined_.at(index);
  if (!s.idle) return;
  s.idle = false;
  op->SplitChanged(index);
}

void TimestampsAndWatermarksCore::Forwarder::EmitWatermark(Timestamp w) {
  if (op->align_ != nullptr) op->align_->OnWatermark(w);
  op->ForwardOut(w);
}

int TimestampsAndWatermarksCore::MainSplit() {
  if (main_split_ < 0 || combined_.at(main_split_).released) main_split_ = RegisterSplit("(main)");
  return main_split_;
}

void TimestampsAndWatermarksCore::SplitChanged(int index) {
  const SplitWatermarks::Split& s = combined_.at(index);
  if (WatermarkListener* l = ctx_->listener())
    l->OnSplitWatermark(ctx_->metrics().task_name(), ctx_->subtask_index(), s.id, s.watermark,
                        s.idle);
  if (!in_periodic_) combined_.Update(emitter_);
}

void TimestampsAndWatermarksCore::PeriodicEmit() {
  if (combined_.size() == 0) {
    generator_->OnPeriodicEmit(emitter_);
    return;
  }
  in_periodic_ = true;
  for (auto& st : split_state_)
    if (st->generator) st->generator->OnPeriodicEmit(*st);
  in_periodic_ = false;
  combined_.Update(emitter_);
}

void TimestampsAndWatermarksCore::ScheduleNext() {
  auto& timers = ctx_->timers();
  timers.RegisterTimer(timers.CurrentProcessingTime() + interval_, [this](Timestamp) {
    PeriodicEmit();
    ScheduleNext();
  });
}

void TimestampsAndWatermarksCore::ScheduleReport() {
  auto& timers = ctx_->timers();
  timers.RegisterTimer(timers.CurrentProcessingTime() + alignment_interval_, [this](Timestamp) {
    align_->Report(emitter_.idle());
    ScheduleReport();
  });
}

}  // namespace tidemark::internal
