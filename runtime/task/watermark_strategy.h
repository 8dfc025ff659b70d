// runtime/task/watermark_strategy.h
//
// Watermark generation, as Flink's WatermarkStrategy / WatermarkGenerator
// (docs/semantics.md, section 2).  Every subtask of the operator that
// assigns timestamps and watermarks gets its own generator instance from the
// strategy, and its own periodic timer: source subtasks generate watermarks
// independently of each other.
//
//   auto strategy = WatermarkStrategy<Event>::for_bounded_out_of_orderness(2s)
//                       .with_timestamp_assigner([](const Event& e, Timestamp) { return e.ts; })
//                       .with_idleness(5s);
//
// Periodic generators emit in OnPeriodicEmit(), called every auto-watermark
// interval (JobConfig, 200 ms by default; 0 turns periodic emission off) on the
// subtask's own clock; punctuated ones emit in OnEvent().  The operator drops
// every watermark that does not advance, so generators may emit the same value
// again and again.
#ifndef TM_RUNTIME_WATERMARK_STRATEGY_H_
#define TM_RUNTIME_WATERMARK_STRATEGY_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/stream_element.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

class WatermarkOutput {
 public:
  virtual ~WatermarkOutput() = default;
  virtual void EmitWatermark(Timestamp watermark) = 0;
  virtual void MarkIdle() = 0;
  virtual void MarkActive() = 0;
};

// What a watermark generator does that does not depend on the record type,
// so the operator that drives generators keeps that part out of its template
// (operators/basic.cc).
class WatermarkGeneratorBase {
 public:
  virtual ~WatermarkGeneratorBase() = default;
  // On the periodic timer.
  virtual void OnPeriodicEmit(WatermarkOutput& out) = 0;
  // Checkpoints: the generator's state (the maximum timestamp seen, ...), so
  // that a restored job emits the watermarks it would have emitted (see
  // docs/checkpoints.md).  A generator that keeps none restarts from scratch.
  // (internal::StateWriter / StateReader are tidemark::StateWriter /
  // StateReader, runtime/state/state_codec.h: override with those names.)
  virtual void SnapshotState(internal::StateWriter& /*w*/) const {}
  virtual void RestoreState(internal::StateReader& /*r*/) {}
};

template <typename T>
class WatermarkGenerator : public WatermarkGeneratorBase {
 public:
  // Every record, after its timestamp has been assigned.
  virtual void OnEvent(const T& event, Timestamp timestamp, WatermarkOutput& out) = 0;
};

// forBoundedOutOfOrderness(d): watermark = max_ts - d - 1, starting at
// kMinTimestamp before any record (never wraps).
template <typename T>
class BoundedOutOfOrdernessWatermarks : public WatermarkGenerator<T> {
 public:
  explicit BoundedOutOfOrdernessWatermarks(Duration max_out_of_orderness)
      : delay_(ToMillis(max_out_of_orderness)),
        max_ts_(SaturatingAdd(SaturatingAdd(kMinTimestamp, delay_), 1)) {
    if (delay_ < 0) throw std::invalid_argument("maxOutOfOrderness cannot be negative");
  }
  void OnEvent(const T&, Timestamp ts, WatermarkOutput&) override {
    if (ts > max_ts_) max_ts_ = ts;
  }
  void OnPeriodicEmit(WatermarkOutput& out) override {
    out.EmitWatermark(SaturatingSub(SaturatingSub(max_ts_, delay_), 1));
  }
  Timestamp max_timestamp() const { return max_ts_; }
  void SnapshotState(internal::StateWriter& w) const override { w.PutI64(max_ts_); }
  void RestoreState(internal::StateReader& r) override { max_ts_ = r.GetI64("max timestamp"); }

 private:
  int64_t delay_;
  Timestamp max_ts_;
};

// Flink's IdlenessTimer: idle once a periodic probe finds no activity for
// strictly more than `timeout` since the first quiet probe.
class IdlenessTimer {
 public:
  IdlenessTimer(const Clock* clock, Duration timeout)
      : clock_(clock), timeout_(ToMillis(timeout)) {}
  void Activity() { counter_++; }
  bool CheckIfIdle() {
    if (counter_ != last_counter_) {
      last_counter_ = counter_;
      start_ = kNoStart;
      return false;
    }
    const Timestamp now = clock_->NowMillis();
    if (start_ == kNoStart) {
      start_ = now;
      return false;
    }
    return now - start_ > timeout_;
  }

 private:
  static constexpr Timestamp kNoStart = kMinTimestamp;
  const Clock* clock_;
  int64_t timeout_;
  uint64_t counter_ = 0;
  uint64_t last_counter_ = 0;
  Timestamp start_ = kNoStart;
};

// withIdleness(timeout): marks the output idle when no record arrived for the
// timeout; the next emitted watermark makes it active again.
template <typename T>
class WatermarksWithIdleness : public WatermarkGenerator<T> {
 public:
  WatermarksWithIdleness(std::unique_ptr<WatermarkGenerator<T>> inner, Duration timeout,
                         const Clock* clock)
      : inner_(std::move(inner)), timer_(clock, timeout) {
    if (ToMillis(timeout) <= 0) throw std::invalid_argument("idle timeout must be greater than 0");
  }
  void OnEvent(const T& event, Timestamp ts, WatermarkOutput& out) override {
    inner_->OnEvent(event, ts, out);
    timer_.Activity();
    is_idle_now_ = false;
  }
  void SnapshotState(internal::StateWriter& w) const override { inner_->SnapshotState(w); }
  void RestoreState(internal::StateReader& r) override { inner_->RestoreState(r); }
  void OnPeriodicEmit(WatermarkOutput& out) override {
    if (timer_.CheckIfIdle()) {
      if (!is_idle_now_) {
        out.MarkIdle();
        is_idle_now_ = true;
      }
    } else {
      inner_->OnPeriodicEmit(out);
    }
  }

 private:
  std::unique_ptr<WatermarkGenerator<T>> inner_;
  IdlenessTimer timer_;
  bool is_idle_now_ = false;
};

// with_flush_after(d), a tidemark extension for quiet streams
// (docs/semantics.md, 2.9): once no record has come for more than `d` of
// processing time (on the input activity clock, which stands still under
// back-pressure), the watermark advances as processing time does:
//   W = W_last + (now - t_last - d)
// where W_last is the highest watermark the wrapped generator emitted and
// t_last the time of the last record.  So a quiet stream's last windows
// close, at the price of completeness: a record that comes after the flush
// with a timestamp at or below the flushed watermark is late.  The watermark
// never goes back (the operator drops watermarks that do not advance); a
// record resets the quiet time.  Nothing flushes before the first record, and
// nothing while the stream is idle-marked (with_idleness wraps this
// generator and does not ask it for watermarks while idle).
template <typename T>
class WatermarksWithFlush : public WatermarkGenerator<T> {
 public:
  WatermarksWithFlush(std::unique_ptr<WatermarkGenerator<T>> inner, Duration after,
                      const Clock* clock)
      : inner_(std::move(inner)), after_(ToMillis(after)), clock_(clock) {
    if (after_ <= 0) throw std::invalid_argument("flush-after must be greater than 0");
  }
  void OnEvent(const T& event, Timestamp ts, WatermarkOutput& out) override {
    Tap tap(&out, &inner_wm_);
    inner_->OnEvent(event, ts, tap);
    last_record_ = clock_->NowMillis();
    seen_ = true;
  }
  void OnPeriodicEmit(WatermarkOutput& out) override {
    Tap tap(&out, &inner_wm_);
    inner_->OnPeriodicEmit(tap);
    if (!seen_ || inner_wm_ == kMinTimestamp) return;
    const int64_t quiet = clock_->NowMillis() - last_record_;
    if (quiet <= after_) return;
    out.EmitWatermark(SaturatingAdd(inner_wm_, quiet - after_));
  }
  void SnapshotState(internal::StateWriter& w) const override { inner_->SnapshotState(w); }
  void RestoreState(internal::StateReader& r) override { inner_->RestoreState(r); }

 private:
  // Passes everything on, remembering the highest watermark.
  class Tap final : public WatermarkOutput {
   public:
    Tap(WatermarkOutput* out, Timestamp* max) : out_(out), max_(max) {}
    void EmitWatermark(Timestamp w) override {
      if (w > *max_) *max_ = w;
      out_->EmitWatermark(w);
    }
    void MarkIdle() override { out_->MarkIdle(); }
    void MarkActive() override { out_->MarkActive(); }

   private:
    WatermarkOutput* out_;
    Timestamp* max_;
  };

  std::unique_ptr<WatermarkGenerator<T>> inner_;
  int64_t after_;
  const Clock* clock_;
  Timestamp inner_wm_ = kMinTimestamp;
  Timestamp last_record_ = 0;
  bool seen_ = false;
};

namespace internal {
// WatermarkStrategy<T>'s settings that do not depend on T, copied and
// destroyed out of line (watermark_strategy.cc), not once per record type.
struct WatermarkStrategyOptions {
  WatermarkStrategyOptions();
  WatermarkStrategyOptions(const WatermarkStrategyOptions& other);
  WatermarkStrategyOptions(WatermarkStrategyOptions&& other) noexcept;
  WatermarkStrategyOptions& operator=(const WatermarkStrategyOptions& other);
  WatermarkStrategyOptions& operator=(WatermarkStrategyOptions&& other) noexcept;
  ~WatermarkStrategyOptions();

  Duration idleness{0};
  Duration flush_after{0};
  std::optional<Duration> max_future_skew;
  std::string future_tag;
  bool periodic_per_record = false;
  // with_watermark_alignment was called (any group name, "" too, as in
  // Flink, where only the drift turns it on).
  bool alignment_requested = false;
  std::string alignment_group;
  Duration alignment_drift{0};
  Duration alignment_interval{1000};
};
}  // namespace internal

template <typename T>
class WatermarkStrategy {
 public:
  using GeneratorFactory = std::function<std::unique_ptr<WatermarkGenerator<T>>()>;
  using TimestampAssigner = std::function<Timestamp(const T&, Timestamp previous)>;
  // The same function over a run of records, its call inlined in the loop:
  // one indirect call a run instead of one a record.  Returns the largest
  // timestamp it assigned (kMinTimestamp for an empty run), so that the
  // bounded-out-of-orderness generator needs no second pass over the run.
  using BatchAssigner = std::function<Timestamp(std::span<internal::Record<T>>)>;

  // Watermark = max_ts - d - 1.  Throws std::invalid_argument for d < 0.
  static WatermarkStrategy for_bounded_out_of_orderness(Duration d) {
    if (d.count() < 0) throw std::invalid_argument("maxOutOfOrderness cannot be negative");
    return for_generator([d] {
      return std::unique_ptr<WatermarkGenerator<T>>(new BoundedOutOfOrdernessWatermarks<T>(d));
    });
  }
  // Watermark = max_ts - 1 (bounded out of orderness with 0 delay).
  static WatermarkStrategy for_monotonous_timestamps() {
    return for_bounded_out_of_orderness(Duration(0));
  }
  // A user-written generator; `factory` is called once per subtask.
  static WatermarkStrategy for_generator(GeneratorFactory factory) {
    WatermarkStrategy s;
    s.factory_ = std::move(factory);
    return s;
  }
  // No watermarks at all (except kMaxWatermark at the end of input).
  static WatermarkStrategy no_watermarks() { return WatermarkStrategy(); }

  // `f(value, previous_timestamp)` or `f(value)` returns the event timestamp.
  template <typename F>
  WatermarkStrategy with_timestamp_assigner(F f) const {
    WatermarkStrategy s = *this;
    // Each holds its own copy of f; an operator calls only one of them (the
    // batch form where it takes runs whole), so a function with state sees
    // every record of its subtask in one copy.
    if constexpr (std::is_invocable_v<F, const T&, Timestamp>) {
      s.batch_assigner_ = [f](std::span<internal::Record<T>> records) mutable {
        Timestamp max_ts = kMinTimestamp;
        for (internal::Record<T>& r : records) {
          r.timestamp = f(std::as_const(r.value), r.timestamp);
          max_ts = std::max(max_ts, r.timestamp);
        }
        return max_ts;
      };
      s.assigner_ = std::move(f);
    } else {
      s.batch_assigner_ = [f](std::span<internal::Record<T>> records) mutable {
        Timestamp max_ts = kMinTimestamp;
        for (internal::Record<T>& r : records) {
          r.timestamp = f(std::as_const(r.value));
          max_ts = std::max(max_ts, r.timestamp);
        }
        return max_ts;
      };
      s.assigner_ = [f = std::move(f)](const T& v, Timestamp) -> Timestamp { return f(v); };
    }
    return s;
  }
  // Marks the stream idle after `timeout` without records.  Throws for
  // timeout <= 0.
  WatermarkStrategy with_idleness(Duration timeout) const {
    if (timeout.count() <= 0) throw std::invalid_argument("idle timeout must be greater than 0");
    WatermarkStrategy s = *this;
    s.o_.idleness = timeout;
    return s;
  }
  // tidemark extension for deterministic replays: ask the generator for a
  // periodic watermark right after every record (what a person typing into a
  // socket gets from a 200 ms timer), instead of on the timer.
  WatermarkStrategy with_periodic_emit_per_record() const {
    WatermarkStrategy s = *this;
    s.o_.periodic_per_record = true;
    return s;
  }

  // Watermark alignment (Flink's withWatermarkAlignment, FLIP-182;
  // runtime/task/watermark_alignment.h): the source subtasks of every source with
  // this `group` report their watermarks every `update_interval` and a
  // subtask more than `max_drift` ahead of the group's minimum stops reading
  // until the group catches up.  Throws for a negative drift or a
  // non-positive interval; a drift of kMaxTimestamp ms disables it.
  WatermarkStrategy with_watermark_alignment(std::string group, Duration max_drift,
                                             Duration update_interval = Duration(1000)) const {
    if (max_drift.count() < 0) throw std::invalid_argument("max allowed drift cannot be negative");
    if (update_interval.count() <= 0)
      throw std::invalid_argument("the alignment update interval must be greater than 0");
    WatermarkStrategy s = *this;
    s.o_.alignment_requested = true;
    s.o_.alignment_group = std::move(group);
    s.o_.alignment_drift = max_drift;
    s.o_.alignment_interval = update_interval;
    return s;
  }

  // tidemark extension for quiet streams (WatermarksWithFlush above): after
  // `after` without records the watermark advances with processing time.
  // Throws for after <= 0.
  WatermarkStrategy with_flush_after(Duration after) const {
    if (after.count() <= 0) throw std::invalid_argument("flush-after must be greater than 0");
    WatermarkStrategy s = *this;
    s.o_.flush_after = after;
    return s;
  }
  // tidemark extension, a future-timestamp guard (docs/semantics.md, 2.10):
  // a record whose timestamp is more than `skew` ahead of the subtask's
  // processing time neither reaches the generator nor goes on: it goes to
  // the side output `tag` when given and read (get_side_output on the
  // stream this strategy makes), and is counted in "numFutureRecords" (and,
  // when it has nowhere to go, "numFutureRecordsDropped").  Throws for
  // skew < 0.
  WatermarkStrategy with_max_future_skew(Duration skew) const {
    if (skew.count() < 0) throw std::invalid_argument("max future skew must not be negative");
    WatermarkStrategy s = *this;
    s.o_.max_future_skew = skew;
    return s;
  }
  template <typename Tag>
  WatermarkStrategy with_max_future_skew(Duration skew, const Tag& tag) const {
    WatermarkStrategy s = with_max_future_skew(skew);
    s.o_.future_tag = tag.id();
    return s;
  }

  // --- for the operator ---
  // One generator: per subtask, or per split (from_source, 2.7).
  std::unique_ptr<WatermarkGenerator<T>> CreateGenerator(const Clock* clock) const {
    std::unique_ptr<WatermarkGenerator<T>> g;
    if (factory_) g = factory_();
    if (!g) g.reset(new NoWatermarks());
    if (o_.flush_after.count() > 0)
      g.reset(new WatermarksWithFlush<T>(std::move(g), o_.flush_after, clock));
    if (o_.idleness.count() > 0)
      g.reset(new WatermarksWithIdleness<T>(std::move(g), o_.idleness, clock));
    return g;
  }
  const TimestampAssigner& assigner() const { return assigner_; }
  const BatchAssigner& batch_assigner() const { return batch_assigner_; }
  bool periodic_per_record() const { return o_.periodic_per_record; }
  bool aligned() const {
    return o_.alignment_requested && o_.alignment_drift.count() != kMaxTimestamp;
  }
  const std::string& alignment_group() const { return o_.alignment_group; }
  Duration alignment_drift() const { return o_.alignment_drift; }
  Duration alignment_interval() const { return o_.alignment_interval; }
  const std::optional<Duration>& max_future_skew() const { return o_.max_future_skew; }
  // The id of the future records' side output tag, empty when none.
  const std::string& future_tag() const { return o_.future_tag; }

 private:
  class NoWatermarks : public WatermarkGenerator<T> {
   public:
    void OnEvent(const T&, Timestamp, WatermarkOutput&) override {}
    void OnPeriodicEmit(WatermarkOutput&) override {}
  };

  GeneratorFactory factory_;
  TimestampAssigner assigner_;
  BatchAssigner batch_assigner_;  // set with assigner_
  internal::WatermarkStrategyOptions o_;
};

}  // namespace tidemark

#endif  // TM_RUNTIME_WATERMARK_STRATEGY_H_
