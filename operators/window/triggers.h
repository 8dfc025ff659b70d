// operators/window/triggers.h
//
// Triggers decide when a window's contents are emitted (FIRE) and/or
// discarded (PURGE); docs/semantics.md section 7.
//
// A trigger is any copyable object with these members (the WindowOperator
// calls them statically, so built-ins cost no virtual call); T is the element
// type, W the window type:
//
//   TriggerResult on_element(const T& element, Timestamp ts, const W& window, TriggerContext& ctx);
//   TriggerResult on_event_time(Timestamp time, const W& window, TriggerContext& ctx);
//   TriggerResult on_processing_time(Timestamp time, const W& window, TriggerContext& ctx);
//   void clear(const W& window, TriggerContext& ctx);
//   bool can_merge() const;
//   void on_merge(const W& window, OnMergeContext& ctx);
//
// Users implement one by deriving from Trigger<T, W> (virtual methods with
// exactly those signatures) and passing an instance to
// WindowedStream::trigger(); every subtask gets its own copy.  A trigger keeps
// no per-window data in its members: per-(key, window) data lives in the
// context's state (get_state / get_or_create_state / clear_state), which the
// operator keeps, merges (on_merge + merge_state) and drops with the window.
//
// Built-ins: EventTimeTrigger (the default of event-time assigners; FIRE, not
// purge, so late firings accumulate), ProcessingTimeTrigger, CountTrigger,
// ContinuousEventTimeTrigger (current Flink, with the max_timestamp clamp and
// the late-element FIRE), PurgingTrigger, NeverTrigger (GlobalWindows).
//
// Thread safety: a trigger instance and its contexts belong to one operator
// instance and are used only by its task thread.
#ifndef TM_OPERATORS_WINDOW_TRIGGERS_H_
#define TM_OPERATORS_WINDOW_TRIGGERS_H_

#include <algorithm>
#include <any>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

enum class TriggerResult : uint8_t { kContinue = 0, kFire = 1, kPurge = 2, kFireAndPurge = 3 };

constexpr bool IsFire(TriggerResult r) { return (static_cast<uint8_t>(r) & 1) != 0; }
constexpr bool IsPurge(TriggerResult r) { return (static_cast<uint8_t>(r) & 2) != 0; }
const char* ToString(TriggerResult r);

namespace internal {
// Named values of one trigger for one (key, window).  Few names per window,
// so a vector searched linearly.
//
// Checkpoints (StateCodec<TriggerState> below): each value is written with
// the codec of the type it was created with (GetOrCreate remembers how); a
// restored value stays as its bytes until Find / GetOrCreate names its type
// again, and is written back as those bytes by a snapshot before that.  A
// value whose type has no codec throws at snapshot (NoStateCodecError).
class TriggerState {
 public:
  template <typename V>
  V* Find(std::string_view name) {
    for (Entry& e : entries_) {
      if (e.name != name) continue;
      if (e.bytes) Materialize<V>(e);
      return std::any_cast<V>(&e.value);
    }
    return nullptr;
  }
  template <typename V>
  V& GetOrCreate(std::string_view name, V init) {
    if (V* p = Find<V>(name)) return *p;
    entries_.push_back(Entry{std::string(name), std::any(std::move(init)), &EncodeAny<V>, {}});
    return *std::any_cast<V>(&entries_.back().value);
  }
  // Out of line (triggers.cc), with the copies and the destructor: inline,
  // they instantiated the vector of entries in every job (compile cost,
  // issue 24).
  void Erase(std::string_view name);
  bool empty() const { return entries_.empty(); }

  // --- checkpoints (StateCodec<TriggerState>) ---
  void EncodeTo(StateWriter& w) const;
  static TriggerState DecodeFrom(StateReader& r);

  TriggerState();
  TriggerState(const TriggerState&);
  TriggerState(TriggerState&&) noexcept;
  TriggerState& operator=(const TriggerState&);
  TriggerState& operator=(TriggerState&&) noexcept;
  ~TriggerState();

 private:
  struct Entry {
    std::string name;
    std::any value;
    void (*encode)(StateWriter&, const std::any&, std::string_view name);
    std::optional<std::string> bytes;  // restored, not decoded yet
  };
  template <typename V>
  static void EncodeAny(StateWriter& w, const std::any& a, std::string_view name) {
    if constexpr (HasStateCodec<V>) {
      Encode(w, *std::any_cast<V>(&a));
    } else {
      throw NoStateCodecError<V>("trigger / window function state '" + std::string(name) + "'");
    }
  }
  template <typename V>
  static void Materialize(Entry& e) {
    if constexpr (HasStateCodec<V>) {
      StateReader r(*e.bytes);
      V v = Decode<V>(r);
      if (!r.AtEnd())
        throw std::runtime_error("restoring trigger / window function state '" + e.name + "' as " +
                                 TypeName<V>() + ": " +
                                 (r.ok() ? std::string("bytes left over") : r.error()));
      e.value = std::move(v);
      e.encode = &EncodeAny<V>;
      e.bytes.reset();
    } else {
      throw NoStateCodecError<V>("restoring trigger / window function state '" + e.name + "'");
    }
  }

  std::vector<Entry> entries_;
};

// What the window operator provides to trigger contexts; every call is for
// the operator's current key and the context's current window.
class TriggerHost {
 public:
  virtual ~TriggerHost() = default;
  virtual Timestamp HostWatermark() const = 0;
  virtual Timestamp HostProcessingTime() const = 0;
  virtual void HostRegisterEventTimeTimer(Timestamp t) = 0;
  virtual void HostRegisterProcessingTimeTimer(Timestamp t) = 0;
  virtual void HostDeleteEventTimeTimer(Timestamp t) = 0;
  virtual void HostDeleteProcessingTimeTimer(Timestamp t) = 0;
  // The current window's trigger state; nullptr when it has none and
  // !create.
  virtual TriggerState* HostState(bool create) = 0;
  virtual void HostDropStateIfEmpty() = 0;
  // During on_merge: the trigger states of the windows being merged (some
  // may be nullptr).
  virtual size_t HostNumMerged() const { return 0; }
  virtual TriggerState* HostMergedState(size_t) { return nullptr; }
};

}  // namespace internal

template <>
struct StateCodec<internal::TriggerState> {
  static void Encode(internal::StateWriter& w, const internal::TriggerState& s) { s.EncodeTo(w); }
  static internal::TriggerState Decode(internal::StateReader& r) {
    return internal::TriggerState::DecodeFrom(r);
  }
};

// A trigger's view of its surroundings (Flink's Trigger.TriggerContext),
// bound to the current key and window.
class TriggerContext {
 public:
  explicit TriggerContext(internal::TriggerHost* host) : host_(host) {}
  Timestamp get_current_watermark() const { return host_->HostWatermark(); }
  Timestamp get_current_processing_time() const { return host_->HostProcessingTime(); }
  // Timers for (current key, current window); a set: registering twice keeps
  // one.
  void register_event_time_timer(Timestamp t) { host_->HostRegisterEventTimeTimer(t); }
  void register_processing_time_timer(Timestamp t) { host_->HostRegisterProcessingTimeTimer(t); }
  void delete_event_time_timer(Timestamp t) { host_->HostDeleteEventTimeTimer(t); }
  void delete_processing_time_timer(Timestamp t) { host_->HostDeleteProcessingTimeTimer(t); }

  // Per-(key, window) state of the trigger, by name.  get_state returns
  // nullptr when absent.  The pointer stays valid until the next call on this
  // context.
  template <typename V>
  V* get_state(std::string_view name) {
    internal::TriggerState* s = host_->HostState(false);
    return s ? s->Find<V>(name) : nullptr;
  }
  template <typename V>
  V& get_or_create_state(std::string_view name, V init) {
    return host_->HostState(true)->GetOrCreate<V>(name, std::move(init));
  }
  void clear_state(std::string_view name) {
    if (internal::TriggerState* s = host_->HostState(false)) {
      s->Erase(name);
      host_->HostDropStateIfEmpty();
    }
  }

 protected:
  internal::TriggerHost* host_;
};

// The context of on_merge: the current window is the merge result.
class OnMergeContext : public TriggerContext {
 public:
  using TriggerContext::TriggerContext;
  // Combines the state `name` of every merged window with `f(V, V) -> V`
  // into the current window (Flink's mergePartitionedState).  No-op when
  // none of them has it.
  template <typename V, typename F>
  void merge_state(std::string_view name, F f) {
    bool have = false;
    V acc{};
    for (size_t i = 0; i < host_->HostNumMerged(); ++i) {
      internal::TriggerState* s = host_->HostMergedState(i);
      V* v = s ? s->Find<V>(name) : nullptr;
      if (!v) continue;
      acc = have ? f(std::move(acc), *v) : *v;
      have = true;
    }
    if (have) {
      V* cur = get_state<V>(name);
      if (cur) {
        *cur = f(std::move(*cur), acc);
      } else {
        get_or_create_state<V>(name, std::move(acc));
      }
    }
  }
};

// The interface users implement.
template <typename T, typename W>
class Trigger {
 public:
  virtual ~Trigger() = default;
  virtual TriggerResult on_element(const T& element, Timestamp ts, const W& window,
                                   TriggerContext& ctx) = 0;
  virtual TriggerResult on_event_time(Timestamp time, const W& window, TriggerContext& ctx) = 0;
  virtual TriggerResult on_processing_time(Timestamp time, const W& window,
                                           TriggerContext& ctx) = 0;
  virtual void clear(const W& window, TriggerContext& ctx) = 0;
  virtual bool can_merge() const { return false; }
  virtual void on_merge(const W& /*window*/, OnMergeContext& /*ctx*/) {
    throw std::logic_error("this trigger does not support merging");
  }
};

// Fires once the watermark passes the window's end (Flink's EventTimeTrigger).
class EventTimeTrigger {
 public:
  static EventTimeTrigger create() { return {}; }
  template <typename T, typename W>
  TriggerResult on_element(const T&, Timestamp, const W& w, TriggerContext& ctx) const {
    if (w.max_timestamp() <= ctx.get_current_watermark()) return TriggerResult::kFire;
    ctx.register_event_time_timer(w.max_timestamp());
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp t, const W& w, TriggerContext&) const {
    return t == w.max_timestamp() ? TriggerResult::kFire : TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  void clear(const W& w, TriggerContext& ctx) const {
    ctx.delete_event_time_timer(w.max_timestamp());
  }
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W& w, OnMergeContext& ctx) const {
    // Only if the watermark has not passed it: otherwise on_element fires the
    // merged window, and a timer would fire it a second time.
    if (w.max_timestamp() > ctx.get_current_watermark())
      ctx.register_event_time_timer(w.max_timestamp());
  }
};

// Fires when processing time reaches the window's end.
class ProcessingTimeTrigger {
 public:
  static ProcessingTimeTrigger create() { return {}; }
  template <typename T, typename W>
  TriggerResult on_element(const T&, Timestamp, const W& w, TriggerContext& ctx) const {
    ctx.register_processing_time_timer(w.max_timestamp());
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kFire;
  }
  template <typename W>
  void clear(const W& w, TriggerContext& ctx) const {
    ctx.delete_processing_time_timer(w.max_timestamp());
  }
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W& w, OnMergeContext& ctx) const {
    if (w.max_timestamp() > ctx.get_current_processing_time())
      ctx.register_processing_time_timer(w.max_timestamp());
  }
};

// Never fires (the default of GlobalWindows).
class NeverTrigger {
 public:
  template <typename T, typename W>
  TriggerResult on_element(const T&, Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  void clear(const W&, TriggerContext&) const {}
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W&, OnMergeContext&) const {}
};

// Fires every `n` elements of a window (count reset at each firing).  Counts
// of merged windows add up.  Never reacts to time.
class CountTrigger {
 public:
  static CountTrigger of(int64_t n) {
    if (n <= 0) throw std::invalid_argument("CountTrigger::of: the count must be positive");
    return CountTrigger(n);
  }
  template <typename T, typename W>
  TriggerResult on_element(const T&, Timestamp, const W&, TriggerContext& ctx) const {
    int64_t& count = ctx.get_or_create_state<int64_t>(kName, 0);
    if (++count >= max_count_) {
      ctx.clear_state(kName);
      return TriggerResult::kFire;
    }
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  void clear(const W&, TriggerContext& ctx) const {
    ctx.clear_state(kName);
  }
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W&, OnMergeContext& ctx) const {
    ctx.merge_state<int64_t>(kName, [](int64_t a, int64_t b) { return a + b; });
  }
  int64_t max_count() const { return max_count_; }

 private:
  static constexpr std::string_view kName = "count";
  explicit CountTrigger(int64_t n) : max_count_(n) {}
  int64_t max_count_;
};

// Fires at epoch-aligned multiples of `interval` while the window is open and
// at its end (current Flink ContinuousEventTimeTrigger: fire times clamped to
// max_timestamp; an element for a window the watermark has passed fires it).
class ContinuousEventTimeTrigger {
 public:
  static ContinuousEventTimeTrigger of(Duration interval) {
    if (ToMillis(interval) <= 0)
      throw std::invalid_argument("ContinuousEventTimeTrigger::of: the interval must be positive");
    return ContinuousEventTimeTrigger(ToMillis(interval));
  }
  template <typename T, typename W>
  TriggerResult on_element(const T&, Timestamp ts, const W& w, TriggerContext& ctx) const {
    if (w.max_timestamp() <= ctx.get_current_watermark()) return TriggerResult::kFire;
    ctx.register_event_time_timer(w.max_timestamp());
    if (ctx.get_state<Timestamp>(kName) == nullptr) {
      const Timestamp start = ts - (ts % interval_);
      const Timestamp next = std::min(SaturatingAdd(start, interval_), w.max_timestamp());
      ctx.get_or_create_state<Timestamp>(kName, next);
      ctx.register_event_time_timer(next);
    }
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp t, const W& w, TriggerContext& ctx) const {
    if (t == w.max_timestamp()) return TriggerResult::kFire;
    Timestamp* fire = ctx.get_state<Timestamp>(kName);
    if (fire != nullptr && *fire == t) {
      const Timestamp next = std::min(SaturatingAdd(t, interval_), w.max_timestamp());
      *fire = next;
      ctx.register_event_time_timer(next);
      return TriggerResult::kFire;
    }
    return TriggerResult::kContinue;
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp, const W&, TriggerContext&) const {
    return TriggerResult::kContinue;
  }
  template <typename W>
  void clear(const W&, TriggerContext& ctx) const {
    if (Timestamp* fire = ctx.get_state<Timestamp>(kName)) {
      const Timestamp t = *fire;
      ctx.delete_event_time_timer(t);
      ctx.clear_state(kName);
    }
  }
  bool can_merge() const { return true; }
  template <typename W>
  void on_merge(const W&, OnMergeContext& ctx) const {
    ctx.merge_state<Timestamp>(kName, [](Timestamp a, Timestamp b) { return std::min(a, b); });
    if (Timestamp* fire = ctx.get_state<Timestamp>(kName)) ctx.register_event_time_timer(*fire);
  }
  int64_t interval() const { return interval_; }

 private:
  static constexpr std::string_view kName = "fire-time";
  explicit ContinuousEventTimeTrigger(int64_t interval) : interval_(interval) {}
  int64_t interval_;
};

// Turns every FIRE of `Inner` into FIRE_AND_PURGE.
template <typename Inner>
class PurgingTrigger {
 public:
  explicit PurgingTrigger(Inner inner) : inner_(std::move(inner)) {}
  static PurgingTrigger of(Inner inner) { return PurgingTrigger(std::move(inner)); }

  template <typename T, typename W>
  TriggerResult on_element(const T& e, Timestamp ts, const W& w, TriggerContext& ctx) {
    return Purge(inner_.on_element(e, ts, w, ctx));
  }
  template <typename W>
  TriggerResult on_event_time(Timestamp t, const W& w, TriggerContext& ctx) {
    return Purge(inner_.on_event_time(t, w, ctx));
  }
  template <typename W>
  TriggerResult on_processing_time(Timestamp t, const W& w, TriggerContext& ctx) {
    return Purge(inner_.on_processing_time(t, w, ctx));
  }
  template <typename W>
  void clear(const W& w, TriggerContext& ctx) {
    inner_.clear(w, ctx);
  }
  bool can_merge() const { return inner_.can_merge(); }
  template <typename W>
  void on_merge(const W& w, OnMergeContext& ctx) {
    inner_.on_merge(w, ctx);
  }

 private:
  static TriggerResult Purge(TriggerResult r) {
    return IsFire(r) ? TriggerResult::kFireAndPurge : r;
  }
  Inner inner_;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_TRIGGERS_H_
