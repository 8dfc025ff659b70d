// operators/window/sliced_window_operator.h
// SlicedWindowOperator: stream slicing for sliding event-time windows.  It
// applies (SlicedWindowOperatorApplies) to SlidingEventTimeWindows with the
// default EventTimeTrigger and contents that keep one value per window and
// can merge two values (ReduceContents; AggregateContents whose
// AggregateFunction has merge), with or without a process function;
// api/windowed_stream.h builds it then, FastWindowOperator
// (fast_window_operator.h) for the other single-value jobs, WindowOperator
// (window_operator.h) otherwise.
//
// The idea (panes, Li et al., "No pane, no gain", SIGMOD Record 2005; general
// stream slicing, Traub et al., EDBT 2019): the time axis is cut into panes of
// g = gcd(size, slide), aligned with the assigner's offset, so every window
// [s, s + size) is exactly size / g consecutive panes.  A record updates one
// (key, pane) value, instead of the size / slide (key, window) values of the
// per-window path; when a window fires, each key's value is the merge of its
// panes in the window, in pane (time) order, then the process function (if
// any) sees it as the per-window path would show it.
//
// Output, side output and counters are FastWindowOperator's (and so
// WindowOperator's) for the same job, provided the reduce function / the
// aggregate's add and merge are associative and commutative (sum, count,
// min, max, ...): the per-window path folds a window's records in arrival
// order, this one folds each pane in arrival order and then the panes in time
// order.  For a function that is not (keep the first / last record, a
// floating-point sum that rounds differently) the values can differ; such a
// job should build FastWindowOperator or WindowOperator directly.  Checked by
// tests/sliced_window_operator_test.cc (against both, random inputs) and
// tests/differential_test.cc (whole jobs against tests/reference_model.h).
//
// Rules, each the per-window one (docs/semantics.md section 6; Flink's
// WindowOperator#processElement, #onEventTime, #isWindowLate,
// #isElementLate, #cleanupTime):
//   - a record at ts belongs to the windows with start s = offset + k * slide,
//     ts - size < s <= ts; the newest one has the latest cleanup time, so if
//     it is late (lateness.h) every one is and the record is skipped (late
//     side output or numLateRecordsDropped, window_operator_base.h); else
//     every window of the record that is not late accepts it, and since a
//     window that is not late now was not late at any earlier record, every
//     record in a pane of a live window was accepted by that window;
//   - a window fires when the watermark reaches its max timestamp (end - 1),
//     once, windows in start order (= max-timestamp order, all have one size)
//     and within a window its keys in the order of their first record in it
//     (the smallest arrival number over the key's panes in the window): the
//     order of the fast operator's table (time_window_table.h);
//   - a record that arrives when some of its windows have fired but are not
//     cleaned up re-fires those for its key, newest window first (the
//     assigner's order), with the merge of all the key's panes in each;
//   - a window is dropped at its cleanup time (max timestamp + lateness, MAX
//     when that overflows: then never, as in the fast operator); a pane is
//     dropped with the newest window that holds it, the last one to need it.
//
// State, pane-major: per pane its (key, arrival number of the key's first
// record in the pane, value) slots, in arrival order, in chunks that never
// move, with a hash index of their positions by key (TimeWindowTable's layout,
// time_window_table.h: SlotList and PositionIndex); the panes by start, with a
// small cache of recent ones (a record nearly always goes to one of the newest
// two, whose tables stay in cache); per window with contents the number of its
// keys.  A window's firing merges its panes' slots into a scratch table (keys
// by first arrival, then sorted), and dropping panes frees whole tables.
//
// Counters: windowPeakLiveKeyWindows counts (key, window) pairs, as the
// per-window path would hold them: per window the number of keys with a
// record in it is kept exactly (when a key gets a new pane, the windows that
// hold the pane but neither of the key's nearest panes before and after it
// gain the key).  windowsNotFiredAtClose, windowKeysNotFiredAtClose and the
// timer introspection are derived from the same per-window key counts.
// windowStateBytesAtPeak is this operator's own state (pane tables and
// per-window counts): smaller than the per-window path's, which is the point;
// it is the one number that differs.
//
// Near the ends of the range: the assigner works in Java long arithmetic and
// within about size + slide of MIN or MAX its windows wrap or are missing
// (assigners.h, AssignSliding).  Records there are not sliced: at the first
// such record the operator turns, for good, into the per-window operator
// (the window-major TimeWindowTable of fast_window_operator.h, built from
// the panes in the same key order), and runs FastWindowOperator's loop from
// then on.  A record at MIN lands there too, and the assigner fails the job.
//
// Checkpoints: whether the operator is sliced; sliced, the panes (each key's
// value and arrival number) and the windows with contents (start, fired), the
// per-window key counts being recomputed from the panes on restore (so that
// a restore that keeps only some key groups counts right); per-window, the
// window-major table.  A sliced snapshot restored into an operator that has
// gone per-window is turned into its table, a per-window one turns a sliced
// operator per-window first.  Asynchronous (docs/checkpoints.md "The
// snapshot's phases"): the synchronous part takes a copy-on-write view (one
// pointer per chunk of each pane's slots, the windows' flags copied) and the
// snapshot threads encode it; while a snapshot reads, the task's first write to
// a chunk the view holds copies the chunk (CowEpoch), new keys are appended
// past the view, and a dropped pane lives on in the view.  Same bytes as a
// synchronous encoding; slots that cannot be copied are encoded at once.
//
// Thread safety: one task thread calls every method; a snapshot's deferred
// part reads only the chunks its view holds, which the task never writes.
#ifndef TM_OPERATORS_WINDOW_SLICED_WINDOW_OPERATOR_H_
#define TM_OPERATORS_WINDOW_SLICED_WINDOW_OPERATOR_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/window/assigners.h"
#include "tidemark/operators/window/fast_window_operator.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/time_window_table.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

// Contents whose values of two parts of a window merge (MergeValue).
template <typename Contents>
concept MergeableValueContents = SingleValueContents<Contents> && Contents::kCanMergeValues;

// Whether SlicedWindowOperator applies (see the file comment).  (clang-format
// would take these && for rvalue references.)
// clang-format off
template <typename Assigner, typename TriggerT, typename Contents>
inline constexpr bool SlicedWindowOperatorApplies =
    std::is_same_v<Assigner, SlidingEventTimeWindows> &&
    std::is_same_v<TriggerT, EventTimeTrigger> && MergeableValueContents<Contents>;
// clang-format on

// T: input; K: key; KeyFn: const T& -> K; Assigner: SlidingEventTimeWindows;
// Contents: ReduceContents / AggregateContents with kCanMergeValues.
template <typename T, typename K, typename KeyFn, typename Assigner, typename Contents>
class SlicedWindowOperator final
    : public SingleValueWindowOperator<T, K, Contents, /*kMerging=*/false> {
  static_assert(SlicedWindowOperatorApplies<Assigner, EventTimeTrigger, Contents>);
  using Base = SingleValueWindowOperator<T, K, Contents, false>;
  // ReadWindowLayout
  static constexpr std::string_view kLayout = "sliced";

 public:
  using typename Base::Out;
  using typename Base::Value;
  using typename Base::W;

  // The trigger is EventTimeTrigger; taken for WindowOperator's signature.
  SlicedWindowOperator(KeyFn key, Assigner assigner, EventTimeTrigger /*trigger*/,
                       Contents contents, WindowOperatorConfig<T> config)
      : Base(std::move(contents), std::move(config)),
        key_(std::move(key)),
        assigner_(std::move(assigner)),
        size_(assigner_.size()),
        slide_(assigner_.slide()),
        offset_(assigner_.offset()),
        pane_(std::gcd(size_, slide_)) {
    // Timestamps at least `margin` from both ends: no window bound, start
    // computation or cleanup-time sum of theirs wraps, and the assigner's
    // windows are exactly offset + k * slide in (ts - size, ts].
    const __int128 margin = static_cast<__int128>(size_) + 2 * static_cast<__int128>(slide_) +
                            (offset_ < 0 ? -static_cast<__int128>(offset_) : offset_) + 1;
    if (margin < static_cast<__int128>(kMaxTimestamp) / 2) {
      safe_lo_ = static_cast<Timestamp>(kMinTimestamp + margin);
      safe_hi_ = static_cast<Timestamp>(kMaxTimestamp - margin);
    } else {
      per_window_ = true;  // no timestamp is far enough from the ends
    }
  }

  void ProcessElement(T&& value, Timestamp ts) override {
    if (!per_window_ && (ts < safe_lo_ || ts > safe_hi_)) [[unlikely]]
      SwitchToPerWindow();
    if (per_window_) [[unlikely]] {
      const K key = key_(static_cast<const T&>(value));
      this->AddToTable(table_, assigner_, key, std::move(value), ts);
      return;
    }
    const int64_t r = FloorMod(ts - offset_, slide_);
    const Timestamp newest = ts - r;  // start of the record's newest window
    // No window (size < slide, ts in a gap), or the newest one, and so every
    // one, late.
    if (r >= size_ || this->IsWindowLate(Window(newest))) {
      this->HandleSkippedElement(std::move(value), ts);
      return;
    }
    const Timestamp start = pane_ == slide_ ? newest : ts - r % pane_;
    const K key = key_(static_cast<const T&>(value));
    Pane& pane = GetPane(start);
    // One probe; the value is made only when the key is new in the pane.
    const HashedKey hk{&key, HashKey(key)};
    if (const uint32_t* pos = pane.index.Find(hk, hk.hash)) [[likely]] {
      contents_.AddTo(pane.slots.Mutable(*pos, cow_).value, value);
    } else {
      AddToPane(pane, hk, seq_++, [&] { return contents_.NewValue(value); });
      AddKeyToWindows(hk, start, newest);
    }
    // EventTimeTrigger.on_element: the windows the watermark has reached
    // fire for this key at once (each window of ts ends after ts).
    if (ts <= timers_.current_watermark()) [[unlikely]]
      FireForElement(key, ts, newest);
  }

  // A run of records: one virtual call, ProcessElement inlined.
  void ProcessBatch(std::span<Record<T>> records) override {
    ProcessEachInline(*this, records, this->ctx().cancel_flag());
  }

  void ProcessWatermark(Timestamp watermark) override {
    this->NoteStateSize(num_windows_with_contents(), [this] { return StateBytes(); });
    timers_.AdvanceWatermark(watermark);
    if (per_window_) {
      this->FireTable(table_, watermark);
    } else {
      FireAndDrop(watermark);
    }
    this->ForwardWatermark(watermark);
  }

  // See "Checkpoints" in the file comment.
  void SnapshotState(StateWriter& w) override {
    if constexpr (HasStateCodec<K> && HasStateCodec<Value>) {
      this->SnapshotKeyedState(w);
      WriteWindowLayout(w, kLayout);
      Encode(w, per_window_);
      if (per_window_) {
        table_.SnapshotTo(w);
        return;
      }
      // A copy-on-write view of the panes (one pointer per chunk of slots)
      // and a copy of the windows' flags; encoded off the task thread when
      // the slots can be copied (docs/checkpoints.md "The snapshot's
      // phases"), the same bytes either way.
      auto view = std::make_shared<SlicedView>();
      if constexpr (std::is_copy_constructible_v<PaneSlot>) view->guard = cow_.BeginSnapshot();
      view->panes.reserve(panes_.size());
      for (const auto& [start, pane] : panes_) view->panes.emplace_back(start, pane.slots.Share());
      view->windows.reserve(open_.size());
      for (const auto& [start, info] : open_) view->windows.emplace_back(start, info.fired);
      view->seq = seq_;
      if constexpr (std::is_copy_constructible_v<PaneSlot>) {
        w.Defer([view = std::move(view)](StateWriter& out) { EncodeSliced(out, *view); });
      } else {
        EncodeSliced(w, *view);
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
      const bool per_window = Decode<bool>(r);
      if (!r.ok()) return;
      if (per_window) {
        if (!per_window_) SwitchToPerWindow();
        table_.RestoreFrom(r, range);
        return;
      }
      RestoreSliced(r, range);
    } else {
      r.Fail(this->StateWhere() + ": state without tidemark::StateCodec cannot be restored");
    }
  }

  // See "Left open" in window_operator_base.h.
  void Close() override {
    this->PublishNotFired([this](auto&& note) {
      if (per_window_) {
        this->ForEachTableWindow(table_, note);
        return;
      }
      for (const auto& [s, info] : open_) {
        MergeWindow(s);
        for (const Merged& m : merged_) note(*m.key, Window(s));
      }
    });
  }

  // --- introspection, for tests ---
  // The event-time timers WindowOperator would hold.
  size_t num_event_time_timers() const override {
    if (per_window_) return this->TableTimers(table_);
    size_t n = 0;
    for (const auto& [s, info] : open_) n += info.keys * TimersPerKey(Window(s), info.fired);
    return n;
  }
  // (key, window) pairs that hold contents, as the per-window path has them.
  size_t num_windows_with_contents() const { return per_window_ ? table_.size() : live_pairs_; }
  // (key, pane) pairs held.
  size_t num_panes() const {
    size_t n = 0;
    for (const auto& [start, pane] : panes_) n += pane.slots.size();
    return n;
  }
  // Snapshots whose deferred part still reads the panes (for tests).
  int live_snapshots() const { return cow_.live_snapshots(); }
  bool sliced() const { return !per_window_; }
  // Bytes allocated for the panes, the per-window key counts and the timers.
  size_t StateBytes() const {
    if (per_window_) return timers_.StateBytes() + table_.StateBytes();
    size_t bytes = 0;
    for (const auto& [start, pane] : panes_) {
      bytes += sizeof(typename decltype(panes_)::value_type) + 4 * sizeof(void*);
      bytes += pane.slots.capacity() * sizeof(PaneSlot) + pane.slots.num_chunks() * sizeof(void*);
      bytes += pane.index.AllocatedBytes();
    }
    bytes += open_.size() * (sizeof(typename decltype(open_)::value_type) + 4 * sizeof(void*));
    return bytes;
  }
  size_t num_keys_with_sessions() const { return 0; }

 private:
  using Base::contents_;
  using Base::EmitValue;
  using Base::timers_;
  using Base::TimersPerKey;

  // One key's value in one pane, with the arrival number of its first record.
  struct PaneSlot {
    K key;
    uint64_t seq;
    Value value;
  };
  using PaneSlots = SlotList<PaneSlot>;
  // A key with its hash, computed once per record (PositionIndex's lookup
  // type, as in TimeWindowTable).
  struct HashedKey {
    const K* key;
    size_t hash;
    bool Matches(const void* slots, uint32_t pos) const {
      return HeapKeyEquals((*static_cast<const PaneSlots*>(slots))[pos].key, *key);
    }
  };
  static size_t HashKey(const K& key) { return HeapKeyHash(key); }
  static size_t HashAt(const void* slots, uint32_t pos) {
    return HashKey((*static_cast<const PaneSlots*>(slots))[pos].key);
  }
  static void PrefetchAt(const void* slots, uint32_t pos) {
    __builtin_prefetch(&(*static_cast<const PaneSlots*>(slots))[pos].key);
  }
  // A pane's keys and values: the slots in order of each key's first record
  // in the pane (chunks that never move, copied on write while a snapshot
  // reads them), and their positions hashed by key (TimeWindowTable's
  // layout, time_window_table.h).
  struct Pane {
    Pane() : index(&slots, &HashAt, &PrefetchAt) {}
    Pane(const Pane&) = delete;
    Pane& operator=(const Pane&) = delete;
    // The slot of the key, null when none (for reading).
    const PaneSlot* Find(const HashedKey& hk) {
      const uint32_t* pos = index.Find(hk, hk.hash);
      return pos == nullptr ? nullptr : &slots[*pos];
    }
    PaneSlots slots;
    PositionIndex index;
  };
  // What a snapshot's deferred part encodes (SnapshotState).
  struct SlicedView {
    std::shared_ptr<const void> guard;  // keeps the chunks unwritten; released last
    std::vector<std::pair<Timestamp, typename PaneSlots::View>> panes;
    std::vector<std::pair<Timestamp, bool>> windows;  // (start, fired)
    uint64_t seq = 0;
  };
  // The sliced checkpoint format (see "Checkpoints" in the file comment).
  static void EncodeSliced(StateWriter& w, const SlicedView& v) {
    w.PutVarint(v.panes.size());
    for (const auto& [start, slots] : v.panes) {
      Encode(w, start);
      w.PutVarint(slots.size());
      slots.ForEach([&](const PaneSlot& slot) {
        Encode(w, slot.key);
        Encode(w, slot.seq);
        Encode(w, slot.value);
      });
    }
    w.PutVarint(v.windows.size());
    for (const auto& [start, fired] : v.windows) {
      Encode(w, start);
      Encode(w, fired);
    }
    Encode(w, v.seq);
  }
  struct WindowInfo {
    size_t keys = 0;     // keys with a record in the window
    bool fired = false;  // the watermark has reached its max timestamp
  };
  // One key's merged value of one window, for a firing.
  struct Merged {
    const K* key;
    uint64_t seq;
    Value value;
  };
  struct KeyPtrHash {
    size_t operator()(const K* k) const { return HeapKeyHash(*k); }
  };
  struct KeyPtrEq {
    bool operator()(const K* a, const K* b) const { return HeapKeyEquals(*a, *b); }
  };

  static int64_t FloorMod(int64_t a, int64_t m) {
    const int64_t r = a % m;
    return r < 0 ? r + m : r;
  }
  W Window(Timestamp start) const { return W(start, start + size_); }

  // The pane starting at `start`, created empty if there is none.
  Pane& GetPane(Timestamp start) {
    auto& cached = cache_[CacheIndex(start)];
    if (cached.pane != nullptr && cached.start == start) [[likely]]
      return *cached.pane;
    auto [it, created] = panes_.try_emplace(start);
    // Sized like the last pane dropped: no rehash as a pane fills in a steady
    // stream.
    if (created) it->second.index.Reserve(last_pane_keys_);
    cached = {start, &it->second};
    return it->second;
  }
  static size_t CacheIndex(Timestamp start) {
    return static_cast<size_t>((static_cast<uint64_t>(start) * 0x9e3779b97f4a7c15ull) >> 61);
  }

  // A new (key, pane): its slot, then its position in the index (make() may
  // throw: a user function).
  template <typename Make>
  [[gnu::noinline]] void AddToPane(Pane& pane, const HashedKey& hk, uint64_t seq, Make&& make) {
    const uint32_t next = pane.slots.size();
    pane.slots.push_back(PaneSlot{*hk.key, seq, make()}, cow_.version());
    try {
      pane.index.InsertNew(next, hk.hash);
    } catch (...) {
      pane.slots.pop_back();
      throw;
    }
  }

  // A new (key, pane): the key's windows that hold the pane but none of the
  // key's other panes (the nearest before and after it suffice: windows are
  // intervals) and are not late gain the key.  Newest first, down to the
  // first late one.
  void AddKeyToWindows(const HashedKey& key, Timestamp start, Timestamp newest) {
    // The nearest panes holding the key that share a window with this one:
    // before it down to start - size, after it up to newest + size; MIN and
    // MAX for none (no pane starts there: panes lie in the sliced range).
    Timestamp prev = kMinTimestamp;
    Timestamp next = kMaxTimestamp;
    auto here = panes_.find(start);
    for (auto it = here; it != panes_.begin();) {
      --it;
      if (it->first <= start - size_) break;
      if (it->second.Find(key) != nullptr) {
        prev = it->first;
        break;
      }
    }
    for (auto it = std::next(here); it != panes_.end() && it->first < newest + size_; ++it) {
      if (it->second.Find(key) != nullptr) {
        next = it->first;
        break;
      }
    }
    const Timestamp watermark = timers_.current_watermark();
    auto hint = open_.end();
    for (Timestamp s = newest; s > start - size_; s -= slide_) {
      if (s <= prev) break;                      // holds prev too (and so do older ones)
      if (s > next - size_) continue;            // holds next too
      if (this->IsWindowLate(Window(s))) break;  // older ones are later still
      hint = open_.try_emplace(hint, s);
      WindowInfo& info = hint->second;
      if (info.keys == 0) info.fired = s + size_ - 1 <= watermark;
      ++info.keys;
      ++live_pairs_;
    }
  }

  // merged_ := the window starting at s per key: the merge of the key's pane
  // values in pane order, with the smallest arrival number among them;
  // sorted by it (the per-window path's order of keys).
  void MergeWindow(Timestamp s) {
    const size_t last = merged_.size();
    merged_.clear();
    scratch_.clear();  // frees a large table: keep last time's size
    scratch_.reserve(last);
    const Timestamp end = s + size_;
    for (auto it = panes_.lower_bound(s); it != panes_.end() && it->first < end; ++it) {
      it->second.slots.ForEach([&](const PaneSlot& slot) {
        auto [pos, inserted] = scratch_.try_emplace(&slot.key, merged_.size());
        if (inserted) {
          merged_.push_back(Merged{&slot.key, slot.seq, slot.value});
        } else {
          Merged& m = merged_[pos->second];
          contents_.MergeValue(m.value, slot.value);
          m.seq = std::min(m.seq, slot.seq);
        }
      });
    }
    std::sort(merged_.begin(), merged_.end(),
              [](const Merged& a, const Merged& b) { return a.seq < b.seq; });
  }

  // A record's windows that the watermark has reached and that are not late
  // re-fire for its key, newest first (the per-window path's order), each
  // with the merge of the key's panes in it.
  void FireForElement(const K& key, Timestamp ts, Timestamp newest) {
    const Timestamp watermark = timers_.current_watermark();
    const HashedKey hk{&key, HashKey(key)};
    for (Timestamp s = newest; s > ts - size_; s -= slide_) {
      const W w = Window(s);
      if (this->IsWindowLate(w)) break;
      if (w.max_timestamp() > watermark) continue;
      std::optional<Value> acc;
      for (auto it = panes_.lower_bound(s); it != panes_.end() && it->first < s + size_; ++it) {
        const PaneSlot* e = it->second.Find(hk);
        if (e == nullptr) continue;
        if (acc) {
          contents_.MergeValue(*acc, e->value);
        } else {
          acc.emplace(e->value);
        }
      }
      if (!acc) continue;  // cannot happen: the record's pane is in it
      this->EmitByElement(key, w, *acc);
    }
  }

  // Whether the window starting at s is dropped at `watermark`: its cleanup
  // time has come and is not MAX (fast_window_operator.h's FireWindows; in
  // the sliced range no window's max timestamp is MAX).
  bool Dropped(Timestamp s, Timestamp watermark) const {
    const __int128 cleanup = static_cast<__int128>(s) + size_ - 1 + this->allowed_lateness();
    return cleanup <= std::min<__int128>(watermark, kMaxTimestamp - 1);
  }

  // The watermark's firings and drops: every window the watermark reached
  // fires once (start order; keys by first arrival), windows at their
  // cleanup time go, and so do the panes whose newest window went.
  void FireAndDrop(Timestamp watermark) {
    bool dropped = false;
    for (auto it = open_.begin(); it != open_.end() && it->first + size_ - 1 <= watermark;) {
      const W w = Window(it->first);
      if (!it->second.fired) {
        it->second.fired = true;
        MergeWindow(it->first);
        for (const Merged& m : merged_) EmitValue(*m.key, w, m.value);
      }
      if (!Dropped(it->first, watermark)) {
        ++it;
        continue;
      }
      if (this->HasWindowFunctionState()) {
        for (auto p = panes_.lower_bound(it->first); p != panes_.end() && p->first < w.end; ++p)
          p->second.slots.ForEach(
              [&](const PaneSlot& slot) { this->DropWindowFunctionState(slot.key, w); });
      }
      live_pairs_ -= it->second.keys;
      it = open_.erase(it);
      dropped = true;
    }
    if (!dropped) return;
    // Panes whose newest window is dropped: start < floor_slide(X) + slide,
    // X the newest window start that Dropped says is dropped.
    const __int128 x =
        std::min<__int128>(watermark, kMaxTimestamp - 1) - this->allowed_lateness() - size_ + 1;
    __int128 rx = (x - offset_) % slide_;
    if (rx < 0) rx += slide_;
    const __int128 keep_from = x - rx + slide_;
    for (auto it = panes_.begin(); it != panes_.end() && it->first < keep_from;) {
      for (auto& c : cache_)
        if (c.pane == &it->second) c = {};
      last_pane_keys_ = it->second.slots.size();
      it = panes_.erase(it);
    }
  }

  // Adds a sliced snapshot's panes and windows (of `range`'s keys) to the
  // sliced state, recounts every window's keys, and, when the operator is
  // per-window already, turns the result into its table.
  void RestoreSliced(StateReader& r, const KeyGroupRange& range) {
    const bool was_per_window = per_window_;
    per_window_ = false;
    const uint64_t np = r.GetCount("panes");
    for (uint64_t i = 0; i < np && r.ok(); ++i) {
      const auto start = Decode<Timestamp>(r);
      const uint64_t n = r.GetCount("pane keys");
      for (uint64_t j = 0; j < n && r.ok(); ++j) {
        K key = Decode<K>(r);
        const auto seq = Decode<uint64_t>(r);
        Value value = Decode<Value>(r);
        if (!r.ok() || !range.Contains(key)) continue;
        Pane& pane = panes_[start];
        const HashedKey hk{&key, HashKey(key)};
        if (const uint32_t* pos = pane.index.Find(hk, hk.hash)) {
          PaneSlot& slot = pane.slots.Mutable(*pos, cow_);
          slot.seq = seq;
          slot.value = std::move(value);
        } else {
          AddToPane(pane, hk, seq, [&] { return std::move(value); });
        }
      }
    }
    const uint64_t nw = r.GetCount("windows");
    for (uint64_t i = 0; i < nw && r.ok(); ++i) {
      const auto start = Decode<Timestamp>(r);
      const bool fired = Decode<bool>(r);
      if (!r.ok()) break;
      WindowInfo& info = open_[start];
      info.fired = info.fired || fired;
    }
    seq_ = std::max(seq_, Decode<uint64_t>(r));
    // The key counts, from the panes: a window's keys are those of its panes
    // (every record in a pane of a live window was accepted by it).
    live_pairs_ = 0;
    KeySet<K> keys;
    for (auto it = open_.begin(); it != open_.end();) {
      keys.clear();
      for (auto p = panes_.lower_bound(it->first);
           p != panes_.end() && p->first < it->first + size_; ++p)
        p->second.slots.ForEach([&](const PaneSlot& slot) { keys.insert(slot.key); });
      if (keys.empty()) {
        it = open_.erase(it);
        continue;
      }
      it->second.keys = keys.size();
      live_pairs_ += keys.size();
      ++it;
    }
    cache_ = {};
    if (was_per_window) SwitchToPerWindow();
  }

  // --- near the ends of the range: the per-window path ---------------------

  // Rebuilds the state window-major, each window's keys in the order of
  // their first record in it, and stays per-window from now on.
  // A window's fired flag is the watermark's verdict (max timestamp <=
  // watermark) when it was last checked; it is passed on as is, since after a
  // restore the watermark is MIN again.
  void SwitchToPerWindow() {
    for (const auto& [s, info] : open_) {
      MergeWindow(s);
      const Timestamp fired_at = info.fired ? kMaxTimestamp : kMinTimestamp;
      for (Merged& e : merged_)
        table_.FindOrCreate(*e.key, Window(s), fired_at, [&] { return std::move(e.value); });
    }
    merged_.clear();
    scratch_.clear();
    cache_ = {};
    panes_.clear();
    open_.clear();
    live_pairs_ = 0;
    per_window_ = true;
  }

  KeyFn key_;
  Assigner assigner_;
  const int64_t size_;
  const int64_t slide_;
  const int64_t offset_;
  const int64_t pane_;  // gcd(size, slide)
  Timestamp safe_lo_ = 0;
  Timestamp safe_hi_ = -1;
  bool per_window_ = false;

  // Sliced state (see the file comment).
  std::map<Timestamp, Pane> panes_;  // by start
  struct CachedPane {
    Timestamp start = 0;
    Pane* pane = nullptr;
  };
  std::array<CachedPane, 8> cache_{};     // recent panes, by pane number
  std::map<Timestamp, WindowInfo> open_;  // windows with contents, by start
  size_t live_pairs_ = 0;                 // sum of open_'s keys
  size_t last_pane_keys_ = 0;             // keys of the last pane dropped
  uint64_t seq_ = 0;                      // arrival number of the next new (key, pane)
  CowEpoch cow_;  // copy-on-write of the panes' slots while a snapshot reads them
  // Scratch of MergeWindow.
  std::vector<Merged> merged_;
  absl::flat_hash_map<const K*, size_t, KeyPtrHash, KeyPtrEq> scratch_;

  // Per-window state, after SwitchToPerWindow.
  TimeWindowTable<K, Value> table_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_SLICED_WINDOW_OPERATOR_H_
