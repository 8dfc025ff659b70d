// operators/window/session_window_operator.h
// (Longer than 600 lines: the sorted per-key form and the general per-key form it hands a key over
// to are two halves of one port of WindowOperator's rules and are checked against each other.)
//
// FastSessionWindowOperator: the window operator for event-time sessions
// in the common case, key-major.  It applies
// (FastSessionWindowOperatorApplies) to a merging event-time assigner of
// TimeWindows (EventTimeSessionWindows, DynamicEventTimeSessionWindows), the
// default EventTimeTrigger and contents that keep one value per window
// (reduce, aggregate, with or without a process function over that value;
// no evictor); api/windowed_stream.h builds it then and WindowOperator
// (window_operator.h, the plain port of Flink's WindowOperator) otherwise.
// Its output (values, timestamps, order), late side output, counters,
// failures and timer / contents / session counts are WindowOperator's for
// the same job (tests/window_session_fast_path_test.cc compares the two on
// random inputs; tests/differential_test.cc runs it against the reference
// model).
//
// It is WindowOperator specialised, not another algorithm: every step of
// WindowOperator's processElement / onEventTime (Flink's WindowOperator.java)
// happens in the same order, with EventTimeTrigger's rules (Flink's
// EventTimeTrigger.java) written in place of the trigger calls:
//   - the window set is Flink's MergingWindowSet (merging_window_set.h,
//     MergingWindowSet.java): `new` merges with every in-flight window it
//     intersects (touching counts); the cover takes the state window of the
//     first (by start); when `new` equals an in-flight window its state
//     window is reset to itself (mapping.put), the contents merged so far
//     staying behind, never emitted nor cleaned;
//   - the merge callback fails the job when the cover is late (lateness.h
//     IsMergeLate, processElement's check), registers the cover's timer at
//     max_timestamp when the watermark has not reached it (onMerge), deletes
//     the merged windows' trigger timers (clear) and cleanup timers, and
//     merges their contents into the cover's state window (the sources in
//     order, then the target first: the heap state's mergeNamespaces, as
//     window_contents.h);
//   - a window late after the merge is retired and skipped; otherwise the
//     element is added to its state window's contents, onElement fires the
//     window at once when the watermark has reached max_timestamp (fired by
//     element) or registers the timer at max_timestamp, and the cleanup
//     timer is registered at CleanupTime (none when that is MAX);
//   - an element no window accepted that is also late goes to the late side
//     output or is counted (window_operator_base.h);
//   - a timer at max_timestamp fires the window's contents (if any); a timer
//     at CleanupTime clears the contents, deletes the trigger timer and
//     retires the window (onEventTime, clearAllState).
//
// The state, per key (one hash lookup per record: key -> a slot of a slab):
//   - sorted form (every key starts so): the in-flight windows sorted by
//     start, each a Session holding its state window, the value of its
//     contents and whether its two timers ((window, max_timestamp) and
//     (window, CleanupTime)) are live; plus the orphaned contents of the
//     state-window reset above.  While every window is valid (start <= end)
//     in-flight windows are disjoint and do not touch (the
//     MergingWindowSet's fast path says why), so the windows `new`
//     intersects are one run of neighbours, found by galloping from the back
//     (records mostly extend the newest sessions), merged in place; the
//     oldest session (timers fire it first) leaves by moving a head index;
//   - general form: WindowOperator's state for the one key (a
//     MergingWindowSet, contents by state window, live timers by (window,
//     timestamp)).  A key is handed over (ToGeneral) when a window wraps
//     (start > end, within the gap of MAX: the set then sweeps, as Flink's),
//     when a merge is late (the job fails, and the state is left as
//     WindowOperator leaves it) and when a retired window still has a live
//     timer; it stays general until its slot is freed.
//   - the timers are KeyedTimerService's (operators/keyed/timer_service.h)
//     set of (timestamp, key, window) triples that fire in (timestamp,
//     registration) order: registering a live triple does nothing,
//     registering another appends an entry (slot, slot generation, window) to
//     the bucket of its timestamp (TimerEntryQueue), deleting clears the
//     triple's liveness in the key's state only (the entry goes stale), and
//     a watermark takes the entries <= it in order and fires those whose
//     triple is live, clearing it first.  That is TimerQueue's lazy deletion
//     exactly (a deleted and re-registered timer fires at its earliest
//     entry), with liveness kept where the key's state is instead of in a
//     hash set of triples.  A slot is freed when its key has no window,
//     contents or timer left; its generation then changes, which makes its
//     old entries stale.
//
// Counters: the state size at peak counts (key, state window) contents, as
// WindowOperator's do (orphans included); windows left open at close are the
// in-flight windows with contents (window_operator_base.h).  num_trigger_states
// is 0 (EventTimeTrigger keeps no state).
//
// Checkpoints: per key (its slot and generation, for the timer entries) its
// form with everything in it (sorted: the in-flight sessions from head, with
// value and timer flags, and the orphans; general: the window set, contents
// and live timers), then the timer entries in (timestamp, registration)
// order, stale ones included (a deleted timer registered again fires at its
// earliest entry), but for those of freed slots, which can never fire.  On
// restore keys outside the instance's key groups are skipped, the others get
// new slots (generation 0) and their entries follow them; the state counts
// are recomputed.
//
// Asynchronous snapshots (docs/checkpoints.md, "The snapshot's phases"): the
// keys' states live in a copy-on-write SlotList (time_window_table.h; chunks
// of 256 slots) and the timer entries in a queue copy-on-write per timestamp
// bucket (TimerEntryQueue), under one CowEpoch.  SnapshotState takes a view
// of both (one pointer per chunk and per bucket) and defers the encoding
// (StateWriter::Defer) to the snapshot threads.  While the view is read, the
// first write to a key of a chunk copies the chunk (each key's sessions,
// orphans and general form with it) and the first push to a bucket copies
// its entries not popped; new keys and new buckets copy nothing.  The bytes
// are those of the format above (keys in slot order), so restore, rescaling
// and savepoints are unchanged.  A key or value type that cannot be copied
// is encoded on the task thread.
//
// Thread safety: one task thread calls every method; a snapshot's deferred
// part reads its view on a snapshot thread.
#ifndef TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/time_order.h"
#include "tidemark/operators/window/fast_window_operator.h"
#include "tidemark/operators/window/merging_window_set.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/time_window_table.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark::internal {

// Whether FastSessionWindowOperator applies to a job with this assigner,
// trigger and contents (see the file comment).
template <typename Assigner, typename TriggerT, typename Contents>
inline constexpr bool FastSessionWindowOperatorApplies = Assigner::kIsEventTime&&
    Assigner::kIsMerging&& std::is_same_v<typename Assigner::WindowType, TimeWindow>&&
        std::is_same_v<TriggerT, EventTimeTrigger>&& SingleValueContents<Contents>;

// The event-time timer entries of FastSessionWindowOperator: buckets by
// timestamp as TimerQueue's (TimerBuckets, operators/keyed/timer_buckets.h),
// in the same time order (TimeOrder), but one vector per bucket (entries are trivially copyable,
// and a vector pushes and pops about twice as cheaply as TimerBuckets' chunks: W3 lost about 15% on
// them, bench/RESULTS.md), without the live set (the operator decides whether an entry is live),
// and copy-on-write per bucket for asynchronous snapshots: Share() returns a View of the entries
// not popped yet that never changes, whatever the queue does afterwards.  Entries are only appended
// to a bucket and popped from its front, so a bucket's entries vector is written only by a push; a
// push to a bucket that a live snapshot may read (CowEpoch, as SlotList's chunks:
// time_window_table.h) first copies the entries not popped into a new vector, and a bucket released
// while a snapshot reads it leaves its vector to the snapshot. Entry is trivially copyable.
//
// Thread safety: the task thread owns the queue; a View may be read on any
// thread (under its snapshot's CowEpoch guard).
template <typename Entry>
class TimerEntryQueue {
  static_assert(std::is_trivially_copyable_v<Entry>);
  using Entries = std::vector<Entry>;

 public:
  // The entries not popped at Share(), by bucket.
  class View {
   public:
    // f(ts, entry) for every entry, in (ts, push) order.
    template <typename F>
    void ForEachInOrder(F&& f) const {
      std::vector<size_t> order(buckets_.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(),
                [&](size_t a, size_t b) { return buckets_[a].ts < buckets_[b].ts; });
      for (size_t i : order) {
        const SharedBucket& b = buckets_[i];
        for (size_t j = b.head; j < b.end; ++j) f(b.ts, static_cast<const Entry&>((*b.entries)[j]));
      }
    }

   private:
    friend class TimerEntryQueue;
    struct SharedBucket {
      Timestamp ts;
      std::shared_ptr<const Entries> entries;
      size_t head, end;  // the entries [head, end) of *entries
    };
    std::vector<SharedBucket> buckets_;
  };

  void Push(Timestamp ts, const Entry& e, CowEpoch& epoch) {
    Bucket& b = BucketFor(ts, epoch);
    if (epoch.MustCopy(b.version)) [[unlikely]]
      CopyBucket(b, epoch.version());
    b.entries->push_back(e);
  }
  bool empty() const { return times_.empty(); }
  Timestamp front_time() const { return times_.front().first; }
  // f(ts, entry) for every entry with ts <= limit, in (ts, push) order,
  // including entries f pushes.
  template <typename F>
  void PopUpTo(Timestamp limit, CowEpoch& epoch, F&& f) {
    while (!empty() && front_time() <= limit) {
      const Timestamp ts = front_time();
      Bucket& b = buckets_[times_.front().second];
      const Entry e = (*b.entries)[b.head++];
      if (b.head == b.entries->size()) ReleaseFront(epoch);
      f(ts, e);
    }
  }
  // The entries not popped yet (see the class comment; call
  // CowEpoch::BeginSnapshot first when the view outlives the next push).
  // Copies one pointer per bucket.
  View Share() const {
    View v;
    v.buckets_.reserve(times_.size());
    times_.ForEach([&](Timestamp ts, uint32_t slot) {
      const Bucket& b = buckets_[slot];
      v.buckets_.push_back(typename View::SharedBucket{ts, b.entries, b.head, b.entries->size()});
    });
    return v;
  }
  // Bytes allocated: the buckets, their entries, index and heap.
  size_t StateBytes() const {
    size_t bytes = times_.CapacityBytes() +
                   index_.capacity() * (sizeof(std::pair<Timestamp, uint32_t>) + 1) +
                   buckets_.capacity() * sizeof(Bucket) + free_.capacity() * sizeof(uint32_t);
    for (const Bucket& b : buckets_)
      if (b.entries) bytes += sizeof(Entries) + b.entries->capacity() * sizeof(Entry);
    return bytes;
  }

 private:
  // Pushes of one timestamp, in order; entries before `head` are popped.  A
  // bucket in the heap has an entry not popped.  `entries` is made with
  // CowEpoch version `version`.
  struct Bucket {
    size_t head = 0;
    uint64_t version = 0;
    std::shared_ptr<Entries> entries;
  };
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  // Released buckets keep their memory for the next timestamp up to this.
  static constexpr size_t kKeepCapacity = 4096;
  static constexpr size_t kCacheSize = 256;
  struct CacheEntry {
    Timestamp ts = 0;
    uint32_t slot = kNoSlot;
  };

  Bucket& BucketFor(Timestamp ts, const CowEpoch& epoch) {
    CacheEntry& c = cache_[static_cast<uint64_t>(ts) & (kCacheSize - 1)];
    if (c.slot != kNoSlot && c.ts == ts) return buckets_[c.slot];
    auto [it, inserted] = index_.try_emplace(ts, kNoSlot);
    if (inserted) {
      uint32_t slot;
      if (!free_.empty()) {
        slot = free_.back();
        free_.pop_back();
      } else {
        slot = static_cast<uint32_t>(buckets_.size());
        buckets_.emplace_back();
      }
      Bucket& b = buckets_[slot];
      if (!b.entries) b.entries = std::make_shared<Entries>();
      b.version = epoch.version();  // a kept vector no snapshot reads, or a new one
      it->second = slot;
      times_.Push(ts, slot);
    }
    c.ts = ts;
    c.slot = it->second;
    return buckets_[c.slot];
  }
  // The bucket's entries not popped, into a vector of its own (the old one
  // stays with the snapshots that share it).
  [[gnu::noinline]] static void CopyBucket(Bucket& b, uint64_t version) {
    auto copy = std::make_shared<Entries>();
    copy->reserve(std::max<size_t>(2 * (b.entries->size() - b.head), 4));
    copy->assign(b.entries->begin() + static_cast<std::ptrdiff_t>(b.head), b.entries->end());
    b.entries = std::move(copy);
    b.head = 0;
    b.version = version;
  }
  void ReleaseFront(CowEpoch& epoch) {
    const auto [ts, slot] = times_.front();
    times_.Pop();
    index_.erase(ts);
    Bucket& b = buckets_[slot];
    b.head = 0;
    if (epoch.MustCopy(b.version) || b.entries->capacity() > kKeepCapacity) {
      b.entries.reset();  // a snapshot may still read it, or too large to keep
    } else {
      b.entries->clear();
    }
    free_.push_back(slot);
    CacheEntry& c = cache_[static_cast<uint64_t>(ts) & (kCacheSize - 1)];
    if (c.slot == slot) c.slot = kNoSlot;
  }

  std::vector<Bucket> buckets_;
  std::vector<uint32_t> free_;  // slots of released buckets
  absl::flat_hash_map<Timestamp, uint32_t> index_;
  TimeOrder times_;  // (timestamp, bucket) in time order
  std::array<CacheEntry, kCacheSize> cache_{};
};

// T: input; K: key; KeyFn: const T& -> K; Assigner: a session assigner
// (assigners.h); Contents: ReduceContents / AggregateContents
// (window_contents.h).
template <typename T, typename K, typename KeyFn, typename Assigner, typename Contents>
class FastSessionWindowOperator final
    : public SingleValueWindowOperator<T, K, Contents, /*kMerging=*/true> {
  static_assert(FastSessionWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  using Base = SingleValueWindowOperator<T, K, Contents, true>;
  // ReadWindowLayout
  static constexpr std::string_view kLayout = "session";

 public:
  using typename Base::Out;
  using typename Base::Value;
  using typename Base::W;

  // The trigger is EventTimeTrigger; taken for WindowOperator's signature.
  FastSessionWindowOperator(KeyFn key, Assigner assigner, EventTimeTrigger /*trigger*/,
                            Contents contents, WindowOperatorConfig<T> config)
      : Base(std::move(contents), std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)) {}

  void ProcessElement(T&& value, Timestamp ts) override {
    const K key = key_(static_cast<const T&>(value));
    current_key_ = &key;
    this->AssignWindows(assigner_, static_cast<const T&>(value), ts);
    bool skipped = true;
    const uint32_t slot = SlotOf(key);
    for (const W& w : windows_) {
      KeyState& ks = Key(slot);
      if (!ks.general && w.start > w.end) ToGeneral(ks);  // a wrapped window: the sweep
      const bool accepted = ks.general ? AddGeneral(ks, slot, w, static_cast<const T&>(value))
                                       : AddSorted(ks, slot, w, static_cast<const T&>(value));
      if (accepted) skipped = false;
    }
    MaybeFree(slot);
    if (skipped) this->HandleSkippedElement(std::move(value), ts);
    current_key_ = nullptr;
  }

  // A run of records: one virtual call, ProcessElement inlined.
  void ProcessBatch(std::span<Record<T>> records) override {
    ProcessEachInline(*this, records, this->ctx().cancel_flag());
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    queue_.PopUpTo(watermark, cow_, [this](Timestamp t, const TimerEntry& e) {
      if (keys_[e.slot].gen != e.gen) return;  // the slot was freed since: stale
      KeyState& ks = Key(e.slot);
      if (ks.general) {
        if (RemoveTimer(*ks.general, e.window, t)) OnEventTimeGeneral(e.slot, e.window, t);
      } else {
        const size_t i = FindSession(ks, e.window);
        if (i != kNone && TakeTimer(ks.sessions[i], t)) OnEventTimeSorted(e.slot, i, t);
      }
    });
    this->ForwardWatermark(watermark);
  }

  // See "Checkpoints" and "Asynchronous snapshots" in the file comment.
  void SnapshotState(StateWriter& w) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      this->SnapshotKeyedState(w);
      WriteWindowLayout(w, kLayout);
      if constexpr (kCopyableState) {
        struct View {
          std::shared_ptr<const void> guard;  // keeps the chunks and buckets unwritten
          typename SlotList<KeyState>::View keys;
          typename TimerEntryQueue<TimerEntry>::View timers;
        };
        auto view = std::make_shared<View>();
        view->guard = cow_.BeginSnapshot();
        view->keys = keys_.Share();
        view->timers = queue_.Share();
        w.Defer([view = std::move(view)](StateWriter& out) {
          EncodeState(out, view->keys, view->timers);
        });
      } else {
        EncodeState(w, keys_, queue_.Share());
      }
    } else {
      ThrowFirstMissingCodec<K, Value>(this->StateWhere());
    }
  }
  void RestoreState(StateReader& r) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      if (SnapshotHasState(r, kTriggerState)) {
        r.Fail(this->StateWhere() + ": " + kWindowLayoutMismatch);
        return;
      }
      this->RestoreKeyedState(r);
      if (!ReadWindowLayout(r, kLayout, this->StateWhere())) return;
      const KeyGroupRange range = KeyGroupRange::Of(this->ctx());
      // (old slot, old generation) -> new slot, for the keys kept.
      absl::flat_hash_map<std::pair<uint32_t, uint32_t>, uint32_t> slots;
      const uint64_t nk = r.GetCount("session keys");
      for (uint64_t i = 0; i < nk && r.ok(); ++i) {
        const auto old_slot = Decode<uint32_t>(r);
        const auto old_gen = Decode<uint32_t>(r);
        K key = Decode<K>(r);
        const bool general = Decode<bool>(r);
        auto g = std::make_unique<GeneralState>();
        std::vector<Session> sessions;
        std::vector<std::pair<W, Value>> orphans;
        if (general) {
          g->set = Decode<MergingWindowSet>(r);
          g->contents = Decode<std::vector<std::pair<W, Value>>>(r);
          g->timers = Decode<std::vector<std::pair<W, Timestamp>>>(r);
        } else {
          const uint64_t n = r.GetCount("sessions");
          for (uint64_t j = 0; j < n && r.ok(); ++j) {
            const auto window = Decode<W>(r);
            const auto state_window = Decode<W>(r);
            Session ss(window, state_window);
            ss.trigger_timer = Decode<bool>(r);
            ss.cleanup_timer = Decode<bool>(r);
            if (Decode<bool>(r)) ss.Emplace(Decode<Value>(r));
            sessions.push_back(std::move(ss));
          }
          orphans = Decode<std::vector<std::pair<W, Value>>>(r);
        }
        if (!r.ok() || !range.Contains(key)) continue;
        const uint32_t slot = SlotOf(key);
        slots[{old_slot, old_gen}] = slot;
        KeyState& ks = Key(slot);
        if (general) {
          live_contents_ += g->contents.size();
          live_timers_ += g->timers.size();
          ks.general = std::move(g);
          continue;
        }
        for (Session& ss : sessions) {
          live_contents_ += ss.has_value;
          live_timers_ += size_t{ss.trigger_timer} + size_t{ss.cleanup_timer};
          ks.sessions.push_back(std::move(ss));
        }
        if (!orphans.empty()) {
          live_contents_ += orphans.size();
          Orphans(ks) = std::move(orphans);
        }
      }
      const uint64_t ne = r.GetCount("session timer entries");
      for (uint64_t i = 0; i < ne && r.ok(); ++i) {
        const auto ts = Decode<Timestamp>(r);
        const auto old_slot = Decode<uint32_t>(r);
        const auto old_gen = Decode<uint32_t>(r);
        const auto window = Decode<W>(r);
        if (!r.ok()) break;
        auto it = slots.find(std::make_pair(old_slot, old_gen));
        if (it == slots.end()) continue;
        queue_.Push(ts, TimerEntry{it->second, keys_[it->second].gen, window}, cow_);
      }
    } else {
      r.Fail(this->StateWhere() + ": state without tidemark::StateCodec cannot be restored");
    }
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) {
      for (const auto& [k, slot] : index_) {
        const KeyState& ks = keys_[slot];
        if (ks.general) {
          for (const auto& [window, state_window] : ks.general->set.windows())
            if (FindContents(ks.general->contents, state_window) != ks.general->contents.size())
              note(ks.key, window);
        } else {
          for (size_t i = ks.head; i < ks.sessions.size(); ++i)
            if (ks.sessions[i].has_value) note(ks.key, ks.sessions[i].window);
        }
      }
    });
  }

  // --- introspection, for tests (WindowOperator's) ---
  size_t num_event_time_timers() const override { return live_timers_; }
  // (key, state window) pairs that hold contents.
  size_t num_windows_with_contents() const { return live_contents_; }
  // Bytes allocated for the keys' state and the timer entries.
  size_t StateBytes() const {
    size_t bytes = index_.capacity() * (sizeof(std::pair<K, uint32_t>) + 1) +
                   keys_.capacity() * sizeof(KeyState) + free_.capacity() * sizeof(uint32_t) +
                   queue_.StateBytes();
    for (const auto& [k, slot] : index_) {
      const KeyState& ks = keys_[slot];
      bytes += ks.sessions.capacity() * sizeof(Session);
      if (ks.orphans) bytes += ks.orphans->capacity() * sizeof(std::pair<W, Value>);
      if (ks.general) {
        bytes += sizeof(GeneralState) +
                 ks.general->set.windows().capacity() * sizeof(std::pair<W, W>) +
                 ks.general->contents.capacity() * sizeof(std::pair<W, Value>) +
                 ks.general->timers.capacity() * sizeof(std::pair<W, Timestamp>);
      }
    }
    return bytes;
  }
  // Snapshots whose deferred part still reads the state (for tests).
  int live_snapshots() const { return cow_.live_snapshots(); }
  size_t num_keys_with_sessions() const {
    size_t n = 0;
    for (const auto& [k, slot] : index_) {
      const KeyState& ks = keys_[slot];
      n += ks.general ? !ks.general->set.empty() : ks.sessions.size() > ks.head;
    }
    return n;
  }

 private:
  using Base::contents_;
  using Base::current_key_;
  using Base::EmitByElement;
  using Base::EmitValue;
  using Base::timers_;
  using Base::windows_;

  static constexpr size_t kNone = ~size_t{0};

  static constexpr bool kTrivialValue =
      std::is_trivially_copyable_v<Value> && std::is_trivially_destructible_v<Value>;
  static constexpr size_t kSessionAlign =
      2 * sizeof(W) + sizeof(Value) + 3 <= 64 && alignof(Value) <= 64 ? 64 : alignof(W);
  // The members of a session; SessionOf<true> is trivially copyable (moved
  // by memmove) and is used when the value is.
  template <bool kTrivial>
  struct alignas(W) alignas(Value) alignas(kSessionAlign) SessionOf {
    SessionOf(const W& w, const W& sw) : window(w), state_window(sw) {}
    template <typename... A>
    Value& Emplace(A&&... a) {
      Reset();
      std::construct_at(&store.value, std::forward<A>(a)...);
      has_value = true;
      return store.value;
    }
    void Reset() {
      if (!has_value) return;
      if constexpr (!kTrivial) std::destroy_at(&store.value);
      has_value = false;
    }

    W window;
    W state_window;
    // The contents of state_window, when has_value.
    union TrivialStorage {
      TrivialStorage() {}
      Value value;
    };
    union Storage {
      Storage() {}
      ~Storage() {}
      Value value;
    };
    std::conditional_t<kTrivial, TrivialStorage, Storage> store;
    bool has_value = false;
    bool trigger_timer = false;  // timer (window, window.max_timestamp()) is live
    bool cleanup_timer = false;  // timer (window, cleanup time) is live, when another
  };
  struct MovableSession : SessionOf<false> {
    using SessionOf<false>::SessionOf;
    // For copy-on-write (a chunk of keys_ a snapshot reads, when written).
    MovableSession(const MovableSession& o) requires std::is_copy_constructible_v<Value>
        : SessionOf<false>(o.window, o.state_window) {
      this->trigger_timer = o.trigger_timer;
      this->cleanup_timer = o.cleanup_timer;
      if (o.has_value) this->Emplace(static_cast<const Value&>(o.store.value));
    }
    MovableSession(MovableSession&& o) noexcept(std::is_nothrow_move_constructible_v<Value>)
        : SessionOf<false>(o.window, o.state_window) {
      this->trigger_timer = o.trigger_timer;
      this->cleanup_timer = o.cleanup_timer;
      if (o.has_value) this->Emplace(std::move(o.store.value));
    }
    MovableSession& operator=(MovableSession&& o) noexcept(
        std::is_nothrow_move_constructible_v<Value>) {
      if (this == &o) return *this;
      this->Reset();
      this->window = o.window;
      this->state_window = o.state_window;
      this->trigger_timer = o.trigger_timer;
      this->cleanup_timer = o.cleanup_timer;
      if (o.has_value) this->Emplace(std::move(o.store.value));
      return *this;
    }
    ~MovableSession() { this->Reset(); }
  };
  // A key's in-flight window in the sorted form (see the file comment), with
  // the contents of its state window inline: one cache line when the value
  // is small (the bench's 24-byte event: 64 bytes).
  using Session = std::conditional_t<kTrivialValue, SessionOf<true>, MovableSession>;
  static_assert(!kTrivialValue || std::is_trivially_copyable_v<Session>);
  static_assert(kSessionAlign != 64 || sizeof(Session) == 64);
  // A key's state in the general form: WindowOperator's, per key.
  struct GeneralState {
    MergingWindowSet set;
    std::vector<std::pair<W, Value>> contents;    // state window -> value
    std::vector<std::pair<W, Timestamp>> timers;  // live timers
  };
  // Whether the keys' state can be copied, hence snapshotted asynchronously.
  static constexpr bool kCopyableState =
      std::is_copy_constructible_v<K> && std::is_copy_constructible_v<Value>;
  struct KeyState {
    explicit KeyState(const K& k) : key(k) {}
    KeyState(KeyState&&) noexcept = default;
    // A copy (copy-on-write of a chunk of keys_) without the sessions taken
    // from the front.
    KeyState(const KeyState& o) requires kCopyableState
        : key(o.key),
          gen(o.gen),
          used(o.used),
          sessions(o.sessions.begin() + static_cast<std::ptrdiff_t>(o.head), o.sessions.end()),
          orphans(o.orphans ? std::make_unique<std::vector<std::pair<W, Value>>>(*o.orphans)
                            : nullptr),
          general(o.general ? std::make_unique<GeneralState>(*o.general) : nullptr) {}
    K key;
    uint32_t gen = 0;  // changes when the slot is freed
    bool used = true;  // false while the slot is free
    // Sorted form: in-flight windows by start (disjoint, not touching) and
    // the contents of state windows no window maps to any more.
    // sessions[head..] are in flight; those before head were taken from
    // the front (timers fire the oldest first) and are compacted away later.
    std::vector<Session> sessions;
    uint32_t head = 0;
    std::unique_ptr<std::vector<std::pair<W, Value>>> orphans;  // rare: made when needed
    // General form, once set: everything of the key is here.
    std::unique_ptr<GeneralState> general;
  };
  struct TimerEntry {
    uint32_t slot;
    uint32_t gen;
    W window;
  };

  // --- slots ---

  // The state of `slot`, to be written: copied first (with its chunk) while
  // a snapshot reads it.  References into it stay valid until the next
  // snapshot.
  KeyState& Key(uint32_t slot) { return keys_.Mutable(slot, cow_); }

  // The state after SnapshotKeyedState's (see "Checkpoints" in the file
  // comment) from `keys` (keys_ or a view of it) and the timer entries.
  // Static: it may run on a snapshot thread after the operator is gone.
  template <typename Keys>
  static void EncodeState(StateWriter& w, const Keys& keys,
                          const typename TimerEntryQueue<TimerEntry>::View& timers) {
    std::vector<uint32_t> gens;  // by slot
    gens.reserve(keys.size());
    uint64_t used = 0;
    keys.ForEach([&](const KeyState& ks) {
      gens.push_back(ks.gen);
      used += ks.used;
    });
    w.PutVarint(used);
    uint32_t slot = 0;
    keys.ForEach([&](const KeyState& ks) {
      const uint32_t this_slot = slot++;
      if (!ks.used) return;
      Encode(w, this_slot);
      Encode(w, ks.gen);
      Encode(w, ks.key);
      Encode(w, ks.general != nullptr);
      if (ks.general) {
        Encode(w, ks.general->set);
        Encode(w, ks.general->contents);
        Encode(w, ks.general->timers);
        return;
      }
      w.PutVarint(ks.sessions.size() - ks.head);
      for (size_t i = ks.head; i < ks.sessions.size(); ++i) {
        const Session& ss = ks.sessions[i];
        Encode(w, ss.window);
        Encode(w, ss.state_window);
        Encode(w, ss.trigger_timer);
        Encode(w, ss.cleanup_timer);
        Encode(w, ss.has_value);
        if (ss.has_value) Encode(w, ss.store.value);
      }
      if (ks.orphans) {
        Encode(w, *ks.orphans);
      } else {
        w.PutVarint(0);
      }
    });
    // The entries of slots not freed since (the others can never fire).
    uint64_t live = 0;
    timers.ForEachInOrder([&](Timestamp, const TimerEntry& e) { live += gens[e.slot] == e.gen; });
    w.PutVarint(live);
    timers.ForEachInOrder([&](Timestamp ts, const TimerEntry& e) {
      if (gens[e.slot] != e.gen) return;
      Encode(w, ts);
      Encode(w, e.slot);
      Encode(w, e.gen);
      Encode(w, e.window);
    });
  }

  // The slot of `key`, created when absent.
  uint32_t SlotOf(const K& key) {
    auto [it, inserted] = index_.try_emplace(key, 0);
    if (!inserted) return it->second;
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
      KeyState& ks = Key(slot);
      ks.key = key;
      ks.used = true;
    } else {
      slot = keys_.size();
      keys_.push_back(KeyState(key), cow_.version());
    }
    it->second = slot;
    return slot;
  }
  // Frees the slot of a key with no window, contents or timer left.
  void MaybeFree(uint32_t slot) {
    const KeyState& now = keys_[slot];
    if (now.general) {
      const GeneralState& g = *now.general;
      if (!g.set.empty() || !g.contents.empty() || !g.timers.empty()) return;
    } else if (now.sessions.size() > now.head || now.orphans) {
      return;
    }
    KeyState& ks = Key(slot);
    ks.general.reset();
    ks.sessions.clear();
    ks.head = 0;
    ks.used = false;
    index_.erase(ks.key);
    ++ks.gen;
    free_.push_back(slot);
  }

  static std::vector<std::pair<W, Value>>& Orphans(KeyState& ks) {
    if (!ks.orphans) ks.orphans = std::make_unique<std::vector<std::pair<W, Value>>>();
    return *ks.orphans;
  }

  void CheckMergeNotLate(const W& cover) const {
    const Timestamp watermark = timers_.current_watermark();
    if (this->lateness_.IsMergeLate(cover, watermark)) {
      throw std::logic_error(
          "The end timestamp of an event-time window cannot become earlier than the current "
          "watermark by merging. Current watermark: " +
          FormatTimestamp(watermark) + " window: " + cover.ToString());
    }
  }

  // --- the sorted form ---

  // The first index of ss at which below(s) is false (below: true, then
  // false), galloping from the front or the back: a key has tens of
  // sessions, records mostly land in the last few and timers fire the first
  // few, so this touches a few neighbouring sessions instead of a binary
  // search's scattered ones.
  template <typename Below>
  static size_t PartitionFromFront(const std::vector<Session>& ss, size_t first, Below&& below) {
    size_t lo = first, step = 1;
    while (lo < ss.size() && below(ss[lo])) {  // ss[..lo] below
      const size_t next = lo + step;
      if (next >= ss.size() || !below(ss[next])) {
        return static_cast<size_t>(
            std::partition_point(
                ss.begin() + static_cast<std::ptrdiff_t>(lo) + 1,
                ss.begin() + static_cast<std::ptrdiff_t>(std::min(next, ss.size())), below) -
            ss.begin());
      }
      lo = next;
      step *= 2;
    }
    return lo;
  }
  template <typename Below>
  static size_t PartitionFromBack(const std::vector<Session>& ss, size_t first, Below&& below) {
    size_t hi = ss.size(), step = 1;  // ss[hi..] not below
    while (hi > first && !below(ss[hi - 1])) {
      const size_t next = hi - first > step ? hi - step : first;
      if (next == first || below(ss[next - 1])) {
        return static_cast<size_t>(
            std::partition_point(ss.begin() + static_cast<std::ptrdiff_t>(next),
                                 ss.begin() + static_cast<std::ptrdiff_t>(hi) - 1, below) -
            ss.begin());
      }
      hi = next;
      step *= 2;
    }
    return hi;
  }

  // Removes session i: the first live one by moving head on (compacting
  // when the dead ones are the larger part), any other by erasing it.
  static void EraseSession(KeyState& ks, size_t i) {
    auto& ss = ks.sessions;
    if (i != ks.head) {
      ss.erase(ss.begin() + static_cast<std::ptrdiff_t>(i));
      return;
    }
    ss[i].Reset();
    ++ks.head;
    if (ks.head == ss.size()) {
      ss.clear();
      ks.head = 0;
    } else if (ks.head >= 8 && 2 * size_t{ks.head} >= ss.size()) {
      ss.erase(ss.begin(), ss.begin() + ks.head);
      ks.head = 0;
    }
  }

  // The session whose window is `w`, or kNone (timers: from the front).
  static size_t FindSession(const KeyState& ks, const W& w) {
    const auto& ss = ks.sessions;
    const size_t i =
        PartitionFromFront(ss, ks.head, [&](const Session& s) { return s.window.start < w.start; });
    if (i == ss.size() || ss[i].window != w) return kNone;
    return i;
  }
  // Registers timer (session window, t), t its max timestamp or cleanup time.
  void RegisterTimer(Session& s, uint32_t slot, uint32_t gen, Timestamp t) {
    bool& live = t == s.window.max_timestamp() ? s.trigger_timer : s.cleanup_timer;
    if (live) return;
    live = true;
    ++live_timers_;
    queue_.Push(t, TimerEntry{slot, gen, s.window}, cow_);
  }
  // Deletes timer (session window, t); returns whether it was live.
  bool TakeTimer(Session& s, Timestamp t) {
    bool* live = nullptr;
    if (t == s.window.max_timestamp()) {
      live = &s.trigger_timer;
    } else if (t == this->CleanupTime(s.window)) {
      live = &s.cleanup_timer;
    }
    if (live == nullptr || !*live) return false;
    *live = false;
    --live_timers_;
    return true;
  }

  // MergingWindowSet.add_window on the sorted form, then WindowOperator's
  // processElement for the result; returns whether a window took it.
  bool AddSorted(KeyState& ks, uint32_t slot, const W& n, const T& value) {
    auto& ss = ks.sessions;
    // The in-flight windows n intersects (touching counts) are
    // [lo, hi): disjoint and sorted, so their ends are sorted too.
    const size_t lo =
        PartitionFromBack(ss, ks.head, [&](const Session& s) { return s.window.end < n.start; });
    size_t hi = lo;
    while (hi < ss.size() && ss[hi].window.start <= n.end) ++hi;
    size_t i = lo;
    if (lo == hi) {
      // No group: n is in flight with itself as state window.
      ss.insert(ss.begin() + static_cast<std::ptrdiff_t>(lo), Session{n, n});
    } else if (hi - lo == 1 && ss[lo].window == n) {
      // n is in flight already; its state window is reset to itself (Flink's
      // mapping.put): the contents of the old one stay, orphaned.
      Session& s = ss[lo];
      if (s.state_window != n) {
        if (s.has_value) {
          Orphans(ks).emplace_back(s.state_window, std::move(s.store.value));
          s.Reset();
        }
        s.state_window = n;
      }
    } else {
      W cover = n;
      for (size_t j = lo; j < hi; ++j) cover = cover.cover(ss[j].window);
      // A single window that covers n: no merge (and no callback).
      if (!(hi - lo == 1 && ss[lo].window == cover)) {
        if (this->lateness_.IsMergeLate(cover, timers_.current_watermark())) {
          // Fails the job, leaving the state as WindowOperator leaves it (the
          // window set updated, contents and timers not): the general form.
          ToGeneral(ks);
          return AddGeneral(ks, slot, n, value);
        }
        MergeSorted(ks, slot, cover, lo, hi);
      }
    }
    Session& s = ss[i];
    const W actual = s.window;
    if (this->IsWindowLate(actual)) {
      // Retired; its contents stay, orphaned (timers it cannot have: its
      // cleanup time is past, or MAX and the watermark MAX).
      if (s.trigger_timer || s.cleanup_timer) {
        ToGeneral(ks);
        ks.general->set.retire_window(actual);
        return false;
      }
      if (s.has_value) Orphans(ks).emplace_back(s.state_window, std::move(s.store.value));
      EraseSession(ks, i);
      return false;
    }
    if (s.has_value) {
      contents_.AddTo(s.store.value, value);
    } else {
      s.Emplace(contents_.NewValue(value));
      ++live_contents_;
    }
    // EventTimeTrigger.onElement, then the cleanup timer.
    if (actual.max_timestamp() <= timers_.current_watermark()) {
      EmitByElement(ks.key, actual, s.store.value);
    } else {
      RegisterTimer(s, slot, ks.gen, actual.max_timestamp());
    }
    const Timestamp cleanup = this->CleanupTime(actual);
    if (cleanup != kMaxTimestamp) RegisterTimer(s, slot, ks.gen, cleanup);
    return true;
  }

  // The merge of sessions [lo, hi) (and the new window) into `cover`, which
  // takes the state window of the first: WindowOperator's merge callback.
  // The cover is not late (AddSorted checked).
  void MergeSorted(KeyState& ks, uint32_t slot, const W& cover, size_t lo, size_t hi) {
    auto& ss = ks.sessions;
    // The merged windows' timers are deleted (EventTimeTrigger.clear and the
    // cleanup timers); their contents merge: the sources in order, then the
    // target first.
    std::optional<Value> acc;
    for (size_t j = lo; j < hi; ++j) {
      live_timers_ -= size_t{ss[j].trigger_timer} + size_t{ss[j].cleanup_timer};
      if (j == lo || !ss[j].has_value) continue;
      if (acc) {
        contents_.Combine(*acc, std::move(ss[j].store.value));
      } else {
        acc.emplace(std::move(ss[j].store.value));
      }
      --live_contents_;
    }
    Session& target = ss[lo];
    if (acc) {
      if (target.has_value) {
        contents_.Combine(target.store.value, std::move(*acc));
      } else {
        target.Emplace(std::move(*acc));
        ++live_contents_;
      }
    }
    target.window = cover;
    target.trigger_timer = false;
    target.cleanup_timer = false;
    ss.erase(ss.begin() + static_cast<std::ptrdiff_t>(lo) + 1,
             ss.begin() + static_cast<std::ptrdiff_t>(hi));
    // EventTimeTrigger.onMerge.
    if (cover.max_timestamp() > timers_.current_watermark())
      RegisterTimer(target, slot, ks.gen, cover.max_timestamp());
  }

  // WindowOperator's onEventTime for the live timer (session i, t), already
  // taken.
  void OnEventTimeSorted(uint32_t slot, size_t i, Timestamp t) {
    KeyState& ks = Key(slot);
    Session& s = ks.sessions[i];
    current_key_ = &ks.key;
    if (t == s.window.max_timestamp() && s.has_value) EmitValue(ks.key, s.window, s.store.value);
    if (t == this->CleanupTime(s.window)) {
      if (s.has_value) --live_contents_;
      TakeTimer(s, s.window.max_timestamp());
      EraseSession(ks, i);
    }
    current_key_ = nullptr;
    MaybeFree(slot);
  }

  // Hands the key's state over to the general form.
  void ToGeneral(KeyState& ks) {
    auto g = std::make_unique<GeneralState>();
    for (size_t i = ks.head; i < ks.sessions.size(); ++i) {
      Session& s = ks.sessions[i];
      g->set.restore_window(s.window, s.state_window);
      if (s.has_value) g->contents.emplace_back(s.state_window, std::move(s.store.value));
      if (s.trigger_timer) g->timers.emplace_back(s.window, s.window.max_timestamp());
      if (s.cleanup_timer) g->timers.emplace_back(s.window, this->CleanupTime(s.window));
    }
    if (ks.orphans)
      for (auto& o : *ks.orphans) g->contents.push_back(std::move(o));
    ks.sessions.clear();
    ks.head = 0;
    ks.orphans.reset();
    ks.general = std::move(g);
  }

  // --- the general form: WindowOperator per key ---

  static size_t FindContents(const std::vector<std::pair<W, Value>>& c, const W& sw) {
    for (size_t i = 0; i < c.size(); ++i)
      if (c[i].first == sw) return i;
    return c.size();
  }
  void EraseContents(GeneralState& g, size_t i) {
    g.contents.erase(g.contents.begin() + static_cast<std::ptrdiff_t>(i));
    --live_contents_;
  }
  void RegisterTimer(GeneralState& g, uint32_t slot, uint32_t gen, const W& window, Timestamp t) {
    for (const auto& [w, ts] : g.timers)
      if (ts == t && w == window) return;
    g.timers.emplace_back(window, t);
    ++live_timers_;
    queue_.Push(t, TimerEntry{slot, gen, window}, cow_);
  }
  bool RemoveTimer(GeneralState& g, const W& window, Timestamp t) {
    for (size_t i = 0; i < g.timers.size(); ++i) {
      if (g.timers[i].second == t && g.timers[i].first == window) {
        g.timers.erase(g.timers.begin() + static_cast<std::ptrdiff_t>(i));
        --live_timers_;
        return true;
      }
    }
    return false;
  }

  bool AddGeneral(KeyState& ks, uint32_t slot, const W& w, const T& value) {
    GeneralState& g = *ks.general;
    W state_window;
    const W actual = g.set.add_window(
        w, merge_scratch_,
        [&](const W& cover, const std::vector<W>& merged, const W& sw,
            const std::vector<W>& merged_state_windows) {
          OnMergeGeneral(g, slot, ks.gen, cover, merged, sw, merged_state_windows);
        },
        &state_window);
    if (this->IsWindowLate(actual)) {
      g.set.retire_window(actual);
      return false;
    }
    size_t i = FindContents(g.contents, state_window);
    if (i == g.contents.size()) {
      g.contents.emplace_back(state_window, contents_.NewValue(value));
      ++live_contents_;
    } else {
      contents_.AddTo(g.contents[i].second, value);
    }
    if (actual.max_timestamp() <= timers_.current_watermark()) {
      EmitByElement(ks.key, actual, g.contents[i].second);
    } else {
      RegisterTimer(g, slot, ks.gen, actual, actual.max_timestamp());
    }
    const Timestamp cleanup = this->CleanupTime(actual);
    if (cleanup != kMaxTimestamp) RegisterTimer(g, slot, ks.gen, actual, cleanup);
    return true;
  }

  void OnMergeGeneral(GeneralState& g, uint32_t slot, uint32_t gen, const W& cover,
                      const std::vector<W>& merged, const W& state_window,
                      const std::vector<W>& merged_state_windows) {
    CheckMergeNotLate(cover);
    if (cover.max_timestamp() > timers_.current_watermark())
      RegisterTimer(g, slot, gen, cover, cover.max_timestamp());
    for (const W& m : merged) {
      RemoveTimer(g, m, m.max_timestamp());
      const Timestamp cleanup = this->CleanupTime(m);
      if (cleanup != kMaxTimestamp) RemoveTimer(g, m, cleanup);
    }
    std::optional<Value> acc;
    for (const W& src : merged_state_windows) {
      const size_t i = FindContents(g.contents, src);
      if (i == g.contents.size()) continue;
      if (acc) {
        contents_.Combine(*acc, std::move(g.contents[i].second));
      } else {
        acc.emplace(std::move(g.contents[i].second));
      }
      EraseContents(g, i);
    }
    if (!acc) return;
    const size_t t = FindContents(g.contents, state_window);
    if (t == g.contents.size()) {
      g.contents.emplace_back(state_window, std::move(*acc));
      ++live_contents_;
    } else {
      contents_.Combine(g.contents[t].second, std::move(*acc));
    }
  }

  void OnEventTimeGeneral(uint32_t slot, const W& window, Timestamp t) {
    KeyState& ks = Key(slot);
    GeneralState& g = *ks.general;
    current_key_ = &ks.key;
    if (const W* sw = g.set.get_state_window(window)) {  // else merged away
      const W state_window = *sw;
      if (t == window.max_timestamp()) {
        const size_t i = FindContents(g.contents, state_window);
        if (i != g.contents.size()) EmitValue(ks.key, window, g.contents[i].second);
      }
      if (t == this->CleanupTime(window)) {
        const size_t i = FindContents(g.contents, state_window);
        if (i != g.contents.size()) EraseContents(g, i);
        RemoveTimer(g, window, window.max_timestamp());
        g.set.retire_window(window);
      }
    }
    current_key_ = nullptr;
    MaybeFree(slot);
  }

  KeyFn key_;
  Assigner assigner_;
  KeyMap<K, uint32_t> index_;  // key -> slot in keys_
  // The keys' state by slot and the timer entries, copy-on-write while a
  // snapshot reads them (cow_).
  SlotList<KeyState> keys_;
  std::vector<uint32_t> free_;  // freed slots
  TimerEntryQueue<TimerEntry> queue_;
  CowEpoch cow_;
  MergingWindowSet::Scratch merge_scratch_;
  size_t live_contents_ = 0;
  size_t live_timers_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_SESSION_WINDOW_OPERATOR_H_
