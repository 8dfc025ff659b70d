// operators/window/local_aggregate_operator.h
//
// Local pre-aggregation of a keyed event-time window (Flink SQL's
// local-global aggregation with mini-batch): LocalAggregateOperator runs in
// the *sending* subtasks, chained before the key_by shuffle of a window with
// reduce or a mergeable aggregate, and combines the records of each (key,
// pane) into one partial, so that the shuffle carries one record per (key,
// pane) and subtask instead of one per input record.  The window operator
// downstream combines the partials as it combines records (reduce) or merges
// them into its accumulator (aggregate: LocalAggregateRecord and
// GlobalAggregate below).  api/windowed_stream.h builds it for
// `.window(...).local_aggregation().reduce(f)` / `.aggregate(agg)`.
//
// Panes: tumbling windows are their own panes; sliding windows of size s
// every slide d are cut into panes of gcd(s, d) aligned with the offset (as
// SlicedWindowOperator cuts them), so the records of one pane belong to
// exactly the same windows.  A partial is emitted with the pane's max
// timestamp (end - 1), which the downstream assigner puts into exactly those
// windows.
//
// Never changes which records are late or how often a window fires.  The
// watermark of the window operator downstream never exceeds the last
// watermark W this subtask sent on its channel (the channel's records and
// watermarks arrive in order, and the downstream watermark is the minimum
// over the active channels).  So:
//   - a record whose pane ends at or before W (pane max timestamp <= W:
//     one of its windows may have fired downstream, it may be late or
//     re-fire a window within the allowed lateness) passes alone,
//     unchanged, with its own timestamp; so does one in no window at all
//     (sliding windows shorter than their slide), whose lateness downstream
//     depends on its own timestamp;
//   - any other record is combined into its (key, pane) partial: none of its
//     windows can have fired downstream yet;
//   - before a watermark W' is forwarded, every partial whose pane max
//     timestamp is <= W' is emitted (the windows that W' fires downstream
//     then see all of their records, as on the plain path), and partials of
//     later panes stay (they are still combinable after W');
//   - the kMaxWatermark at the end of the input emits every partial before it
//     goes down; so does a checkpoint barrier (PrepareSnapshotPreBarrier),
//     so the snapshot holds no partials: only W and whether the output went
//     idle, because the window operator downstream restores its watermark,
//     and a restored subtask that started again from MIN would combine
//     records that are late there (a late record within the allowed
//     lateness then re-fires its window once for several records, and the
//     late side output gets a partial instead of the records).  Rescaled,
//     a subtask takes the largest W and any idleness of the old subtasks it
//     is given (each old W is at least the downstream watermark restored
//     from it); a state without them (a checkpoint from before they were
//     kept) makes every record pass alone;
//   - when the number of partials held reaches `max_partials`, all are
//     emitted (they are not late downstream: their panes end after W);
//   - when a pane opens that starts after every pane opened before it, the
//     panes that start further back from it than any record has reached
//     since the last watermark (at least one pane, or what the panes open
//     after that watermark span: tumbling windows keep the pane before) are
//     emitted early.
//     Without a watermark for a while (the periodic interval, 200 ms, is a
//     long time at millions of records a second) they would otherwise wait
//     for the bound, held in memory the next panes could use, and reach the
//     window downstream in one burst.  A record of a pane sent early starts
//     a new partial of it (combined downstream like any other; it is not
//     late there either) and widens the reach, so a stream whose records
//     come that far back keeps that many panes open until the next
//     watermark;
//   - once the subtask's output goes idle, the downstream watermark may pass
//     W on the other channels, so every partial is emitted before the idle
//     status and from then on every record passes alone.
// The function must be associative and commutative (sum, count, min, max):
// the downstream window combines partials from several subtasks in arrival
// order (and a reduce with the plain path does so too at parallelism > 1).
// A reduce must also keep the key: its partial is keyed downstream by its
// own; one that changes it fails the task (std::logic_error, saying so).
//
// Counters (per subtask): localAggregationRecordsCombined (records folded
// into a partial), localAggregationRecordsPassed (records sent alone),
// localAggregationPartialsSent, localAggregationSizeFlushes (flushes for the
// memory bound).
//
// Thread safety: one instance per subtask, called by its task's thread only.
#ifndef TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_OPERATOR_H_
#define TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_OPERATOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <new>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/window/assigners.h"
#include "tidemark/operators/window/local_aggregate_record.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/runtime/core/operator.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

inline constexpr char kLocalAggregationRecordsCombined[] = "localAggregationRecordsCombined";
inline constexpr char kLocalAggregationRecordsPassed[] = "localAggregationRecordsPassed";
inline constexpr char kLocalAggregationPartialsSent[] = "localAggregationPartialsSent";
inline constexpr char kLocalAggregationSizeFlushes[] = "localAggregationSizeFlushes";

// The default bound on the partials one subtask holds.
inline constexpr size_t kDefaultLocalAggregationMaxPartials = 100000;

namespace internal {

// The pane geometry of an assigner that local aggregation supports.
struct LocalPanes {
  int64_t size = 0;    // pane length, ms
  int64_t offset = 0;  // alignment
  // Sliding windows shorter than their slide leave gaps that no window
  // covers (their records are late or ignored downstream, one by one): the
  // slide and the window size then, else 0.
  int64_t gap_slide = 0;
  int64_t window_size = 0;
  // How far from a pane the window arithmetic of its records reaches (window
  // size + slide + |offset|; 0: twice the pane plus |offset|, tumbling).
  // Near MIN or MAX that arithmetic wraps as Java's does, and the records
  // of one pane may get other windows than its last timestamp, which a
  // partial carries: records of panes within this of either end pass alone.
  int64_t reach = 0;
};
// a + b + |c| for a, b > 0, saturated at MAX (which makes every pane pass
// alone: such windows span most of the range).
inline int64_t LocalPanesReach(int64_t a, int64_t b, int64_t c) {
  const uint64_t abs_c = c < 0 ? 0 - static_cast<uint64_t>(c) : static_cast<uint64_t>(c);
  const uint64_t sum = static_cast<uint64_t>(a) + static_cast<uint64_t>(b) + abs_c;
  const uint64_t max = static_cast<uint64_t>(kMaxTimestamp);
  return sum > max || sum < abs_c ? kMaxTimestamp : static_cast<int64_t>(sum);
}
inline LocalPanes LocalPanesOf(const TumblingEventTimeWindows& a) {
  return {a.size(), a.offset(), 0, 0, LocalPanesReach(a.size(), a.size(), a.offset())};
}
inline LocalPanes LocalPanesOf(const SlidingEventTimeWindows& a) {
  LocalPanes p{std::gcd(a.size(), a.slide()), a.offset()};
  if (a.size() < a.slide()) {
    p.gap_slide = a.slide();
    p.window_size = a.size();
  }
  p.reach = LocalPanesReach(a.size(), a.slide(), a.offset());
  return p;
}

// The key of a LocalAggregateRecord downstream: the partial's, or the
// record's under the user's key selector.
template <typename KeyFn>
struct LocalAggregateKey {
  KeyFn key;
  template <typename T, typename K, typename Acc>
  K operator()(const LocalAggregateRecord<T, K, Acc>& r) const {
    if (r.partial()) return std::get<1>(r.value).first;
    return key(std::get<0>(r.value));
  }
};

// The downstream window's aggregate over LocalAggregateRecord: a record is
// added, a partial merged.
template <typename Agg, typename Carrier>
struct GlobalAggregate {
  Agg agg;
  auto create_accumulator() { return agg.create_accumulator(); }
  template <typename Acc>
  Acc add(const Carrier& c, Acc acc) {
    if (c.partial()) return agg.merge(std::move(acc), Acc(std::get<1>(c.value).second));
    return agg.add(std::get<0>(c.value), std::move(acc));
  }
  template <typename Acc>
  auto get_result(const Acc& acc) {
    return agg.get_result(acc);
  }
  template <typename Acc>
  Acc merge(Acc a, Acc b) {
    return agg.merge(std::move(a), std::move(b));
  }
};

// Combiners: how records of one (key, pane) fold into a partial, and what is
// sent.  Reduce: the partial is a T, sent as is.
template <typename T, typename K, typename ReduceFn>
struct LocalReduceCombiner {
  static constexpr bool kIsReduce = true;
  using Out = T;
  using Partial = T;
  ReduceFn f;
  Partial Start(T&& v) { return std::move(v); }
  void Add(Partial& p, T&& v) { p = Combined(p, std::move(v)); }
  Partial Combined(const Partial& p, T&& v) {
    return f(static_cast<const T&>(p), static_cast<const T&>(v));
  }
  Out Raw(T&& v) { return std::move(v); }
  Out Sent(const K&, Partial&& p) { return std::move(p); }
};

// Aggregate: the partial is an accumulator, sent with its key.
template <typename T, typename K, typename Agg>
struct LocalAggregateCombiner {
  static constexpr bool kIsReduce = false;
  using Acc = AccumulatorOf<Agg>;
  using Out = LocalAggregateRecord<T, K, Acc>;
  using Partial = Acc;
  Agg agg;
  Partial Start(T&& v) { return agg.add(static_cast<const T&>(v), agg.create_accumulator()); }
  void Add(Partial& p, T&& v) { p = agg.add(static_cast<const T&>(v), std::move(p)); }
  Out Raw(T&& v) {
    return Out{std::variant<T, std::pair<K, Acc>>(std::in_place_index<0>, std::move(v))};
  }
  Out Sent(const K& k, Partial&& p) {
    return Out{std::variant<T, std::pair<K, Acc>>(std::in_place_index<1>, k, std::move(p))};
  }
};

// A reduce's partials as a set of records found by their key (KeyFn), not a
// map from the key to the record: a slot is the record alone (W1's 24 bytes
// instead of 32), a smaller table for the same keys.  Every probe and rehash
// calls KeyFn, so only for keys that are cheap to make (trivially copied and
// destroyed: numbers, enums, pairs and small structs of them; a string key
// keeps the map) and a KeyFn callable as const (a `mutable` lambda keeps the
// map); the key must not be the record's own type (a lookup by key would be
// ambiguous) and has no float or double in it (heap state's key equality;
// those keep the map).
template <typename T, typename K, typename KeyFn>
struct PartialByKey {
  KeyFn key;
  using is_transparent = void;
  size_t operator()(const T& t) const { return HeapKeyHash(key(t)); }
  size_t operator()(const K& k) const { return HeapKeyHash(k); }
  bool operator()(const T& a, const T& b) const { return key(a) == key(b); }
  bool operator()(const T& a, const K& k) const { return key(a) == k; }
  bool operator()(const K& k, const T& a) const { return key(a) == k; }
};
template <typename T, typename K, typename KeyFn, typename Combiner>
inline constexpr bool kPartialsAsSet =
    Combiner::kIsReduce && !std::is_same_v<K, T> && std::is_trivially_copy_constructible_v<K> &&
    std::is_trivially_destructible_v<K> && !kHasFloatingField<K> &&
    std::is_copy_constructible_v<T> && std::is_invocable_r_v<K, const KeyFn&, const T&>;

// The memory of the pane tables freed last, kept for the next panes'.  A
// pane's table is made when its first record comes and freed when the pane is
// sent, each table mostly the size the largest pane of the last flush reached
// (FindPane's hint, bounded by the partials the bound still allows; W1: 10 000
// keys, 400 KiB; a watermark or a newer pane sends one or two at a time, a
// size flush all of them).  Taken again at
// once, they need no fresh pages (a page fault every 4 KiB) and are still in
// the cache.  Only blocks freed after set_keeping(true) (the operator keeps
// while it sends a pane, not while a table grows) of at least kMinBytes
// (malloc keeps smaller ones at hand itself), at most kMaxBlocks, each taken
// only for exactly its size, the one freed last first; Release() frees them
// all (the output went idle, or the input ended: no pane comes again).
// Single-threaded, as its operator.
class PaneBlocks {
 public:
  static constexpr size_t kMaxBlocks = 16;
  static constexpr size_t kMinBytes = size_t{64} << 10;
  PaneBlocks() = default;
  PaneBlocks(const PaneBlocks&) = delete;
  PaneBlocks& operator=(const PaneBlocks&) = delete;
  ~PaneBlocks() { Release(); }

  void* Take(size_t bytes, size_t align) {
    for (size_t i = blocks_.size(); i-- > 0;) {
      if (blocks_[i].bytes == bytes && blocks_[i].align == align) {
        void* p = blocks_[i].p;
        blocks_.erase(blocks_.begin() + static_cast<ptrdiff_t>(i));
        return p;
      }
    }
    return ::operator new(bytes, std::align_val_t(align));
  }
  void Give(void* p, size_t bytes, size_t align) noexcept {
    if (!keeping_ || bytes < kMinBytes) {
      Free(Block{p, bytes, align});
      return;
    }
    if (blocks_.size() == kMaxBlocks) {
      Free(blocks_.front());
      blocks_.erase(blocks_.begin());
    }
    blocks_.push_back(Block{p, bytes, align});  // capacity reserved: no throw
  }
  size_t held_blocks() const { return blocks_.size(); }
  void set_keeping(bool keeping) { keeping_ = keeping; }
  void Release() noexcept {
    for (const Block& b : blocks_) Free(b);
    blocks_.clear();
  }

 private:
  struct Block {
    void* p;
    size_t bytes;
    size_t align;
  };
  static void Free(const Block& b) noexcept {
    // Unsized: clang declares no sized delete unless -fsized-deallocation.
    ::operator delete(b.p, std::align_val_t(b.align));
  }
  bool keeping_ = false;
  std::vector<Block> blocks_ = [] {
    std::vector<Block> v;
    v.reserve(kMaxBlocks);
    return v;
  }();
};

// The allocator of the pane tables: a block PaneBlocks kept, of the size
// asked for, else new memory.
template <typename U>
struct PaneAllocator {
  using value_type = U;
  PaneBlocks* blocks;
  explicit PaneAllocator(PaneBlocks* b) noexcept : blocks(b) {}
  template <typename V>
  PaneAllocator(const PaneAllocator<V>& other) noexcept : blocks(other.blocks) {}
  U* allocate(size_t n) {
    if (n > std::numeric_limits<size_t>::max() / sizeof(U)) throw std::bad_array_new_length();
    return static_cast<U*>(blocks->Take(n * sizeof(U), alignof(U)));
  }
  void deallocate(U* p, size_t n) noexcept { blocks->Give(p, n * sizeof(U), alignof(U)); }
  template <typename V>
  bool operator==(const PaneAllocator<V>& other) const noexcept {
    return blocks == other.blocks;
  }
};

// T: input; K: key; KeyFn: const T& -> K; Combiner: LocalReduceCombiner /
// LocalAggregateCombiner.
template <typename T, typename K, typename KeyFn, typename Combiner>
class LocalAggregateOperator final
    : public BatchedOperator<LocalAggregateOperator<T, K, KeyFn, Combiner>, T,
                             typename Combiner::Out> {
 public:
  using Out = typename Combiner::Out;
  using Partial = typename Combiner::Partial;

  // Throws std::invalid_argument for a pane size <= 0 or max_partials == 0.
  LocalAggregateOperator(KeyFn key, LocalPanes panes, Combiner combiner, size_t max_partials)
      : key_(std::move(key)),
        panes_(panes),
        combiner_(std::move(combiner)),
        max_partials_(max_partials) {
    if (panes_.size <= 0) throw std::invalid_argument("local aggregation: pane size must be > 0");
    if (max_partials_ == 0)
      throw std::invalid_argument("local aggregation: the partials' bound must be > 0");
    panes_.reach = std::max(panes_.reach, LocalPanesReach(panes_.size, panes_.size, panes_.offset));
    keep_back_ = panes_.size;
  }

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    combined_ = ctx.counter(kLocalAggregationRecordsCombined);
    passed_ = ctx.counter(kLocalAggregationRecordsPassed);
    sent_ = ctx.counter(kLocalAggregationPartialsSent);
    size_flushes_ = ctx.counter(kLocalAggregationSizeFlushes);
  }

  // The common case, a record of the current pane whose key holds a
  // partial, is small enough to inline into the batch loop; a new pane, a
  // record that passes alone and a key's first record are out of line.
  void ProcessElement(T&& value, Timestamp ts) override {
    // The range is empty while no pane is current (Uncache).
    if (ts < cur_start_ || ts >= cur_end_) [[unlikely]] {
      if (!FindPane(ts)) {
        PassAlone(std::move(value), ts);
        return;
      }
    }
    K key = key_(static_cast<const T&>(value));
    ++combined_count_;
    auto it = cur_->find(key);
    if (it == cur_->end()) [[unlikely]] {
      StartPartial(std::move(key), std::move(value));
      return;
    }
    Partial* partial;
    if constexpr (kAsSet) {
      partial = &const_cast<T&>(*it);
    } else {
      partial = &it->second;
    }
    if constexpr (kChecksKey) {
      // A reduce's partial is keyed downstream by its own key: one that
      // changed it would go to another key (and, in the set, sit where its
      // new key is not looked for).  Checked before it replaces the partial,
      // which stays as it was; compiled away where the reduce visibly keeps
      // the key.
      Partial next = combiner_.Combined(*partial, std::move(value));
      if (!HeapKeyEquals<K>(key_(static_cast<const T&>(next)), key)) [[unlikely]]
        KeyChanged();
      *partial = std::move(next);
    } else {
      combiner_.Add(*partial, std::move(value));
    }
  }

  void ProcessWatermark(Timestamp watermark) override {
    // Panes whose windows the watermark may fire downstream go first.
    size_t largest = 0;
    while (!panes_open_.empty() && PaneMax(panes_open_.begin()->first) <= watermark)
      largest = std::max(largest, FlushPane(panes_open_.begin()));
    NotePaneSize(largest);
    ShrinkReach();
    // Never back: after a rescaled restore the input gate hands the lowest
    // of the old subtasks' watermarks, and the state restored the largest.
    last_watermark_ = std::max(last_watermark_, watermark);
    PublishCounts();
    this->ForwardWatermark(watermark);
  }

  void ProcessStatus(WatermarkStatus status) override {
    if (status == WatermarkStatus::kIdle) {
      FlushAll();
      passthrough_ = true;  // see the file comment
      blocks_.Release();    // no table is made again
    }
    this->ForwardStatus(status);
  }

  void PrepareSnapshotPreBarrier(int64_t) override {
    FlushAll();
    PublishCounts();
  }

  void SnapshotState(StateWriter& w) override {
    w.PutI64(last_watermark_);
    w.PutU8(passthrough_ ? 1 : 0);
  }
  void RestoreState(StateReader& r) override {
    if (r.AtEnd()) {  // kept by a version that had no state here
      passthrough_ = true;
      return;
    }
    last_watermark_ = std::max(last_watermark_, r.GetI64("local aggregation watermark"));
    passthrough_ = r.GetU8("local aggregation idle") != 0 || passthrough_;
  }
  // Every new subtask gets at least one old state.
  StateRescaling state_rescaling() const override { return StateRescaling::kKeyGroups; }

  void Finish() override {
    FlushAll();  // empty after the kMaxWatermark; kept for safety
    PublishCounts();
    blocks_.Release();
  }
  void Close() override { PublishCounts(); }

  // --- introspection, for tests ---
  size_t held_partials() const { return held_; }
  // The current pane's table's capacity (0: no pane is current).
  size_t current_pane_capacity() const { return cur_ != nullptr ? cur_->capacity() : 0; }
  // Freed pane tables' blocks kept for the next panes (PaneBlocks).
  size_t kept_pane_blocks() const { return blocks_.held_blocks(); }
  Timestamp last_watermark() const { return last_watermark_; }

 private:
  static constexpr bool kAsSet = kPartialsAsSet<T, K, KeyFn, Combiner>;
  // Keys compare as heap state's do (KeyEquals: floats as Java's equals()).
  static constexpr bool kChecksKey = Combiner::kIsReduce;
  using ByKey = PartialByKey<T, K, KeyFn>;
  using Table =
      std::conditional_t<kAsSet, absl::flat_hash_set<T, ByKey, ByKey, PaneAllocator<T>>,
                         absl::flat_hash_map<K, Partial, typename KeyMap<K, Partial>::hasher,
                                             typename KeyMap<K, Partial>::key_equal,
                                             PaneAllocator<std::pair<const K, Partial>>>>;
  using Panes = std::map<Timestamp, Table>;  // by pane start

  // The pane max timestamp (end - 1) of the pane starting at `start`; MIN
  // when its end overflows (such records pass alone).
  Timestamp PaneMax(Timestamp start) const {
    Timestamp end = 0;
    if (__builtin_add_overflow(start, panes_.size, &end)) return kMaxTimestamp;
    return end - 1;
  }

  [[gnu::noinline]] void StartPartial(K&& key, T&& value) {
    if constexpr (kAsSet) {
      cur_->insert(combiner_.Start(std::move(value)));
    } else {
      cur_->emplace(std::move(key), combiner_.Start(std::move(value)));
    }
    ++held_;
    if (held_ >= max_partials_) [[unlikely]] {
      size_flushes_->Inc();
      FlushAll();
    }
  }

  // Points cur_ at ts's pane, creating it; false when the record must pass
  // alone (its pane has ended at or before the last watermark sent, or after
  // idleness, or at the ends of the time range).
  [[gnu::noinline]] bool FindPane(Timestamp ts) {
    if (passthrough_ || ts == kNoTimestamp) return false;
    // Near a pane's end out-of-order records alternate between it and the
    // next: the pane before the current one is kept too (both are open,
    // ending after the last watermark, see FlushPane and Uncache).
    if (ts >= prev_start_ && ts < prev_end_) {
      std::swap(cur_, prev_);
      std::swap(cur_start_, prev_start_);
      std::swap(cur_end_, prev_end_);
      return true;
    }
    const Timestamp start = GetWindowStartWithOffset(ts, panes_.offset, panes_.size);
    Timestamp end = 0;
    if (start > ts || __builtin_add_overflow(start, panes_.size, &end)) return false;
    // Near either end of the range (see LocalPanes::reach): alone.
    Timestamp below = 0, above = 0;
    if (__builtin_sub_overflow(start, panes_.reach, &below) ||
        __builtin_add_overflow(end, panes_.reach, &above))
      return false;
    if (end - 1 <= last_watermark_) return false;
    if (panes_.gap_slide > 0) {
      // In a gap between windows: no window takes it (see LocalPanes).
      const Timestamp window_start =
          GetWindowStartWithOffset(start, panes_.offset, panes_.gap_slide);
      if (window_start > start || start - window_start >= panes_.window_size) return false;
    }
    // How far back from the newest pane records reach (the panes kept
    // open when a newer one opens, SendPanesBehind).
    if (start < newest_start_) {
      Timestamp back = 0;
      if (__builtin_sub_overflow(newest_start_, start, &back)) back = kMaxTimestamp;
      keep_back_ = std::max(keep_back_, back);
    }
    auto [pane, created] = NewPane(start);
    if (created && start > newest_start_) {
      newest_start_ = start;
      SendPanesBehind(start);  // before the hint below: their size is known
    }
    // A new pane's table starts at the size the last ones reached, rather
    // than growing to it by rehashing (the keys of one pane are mostly those
    // of the next): the larger of the largest pane of the last flush and the
    // current pane (until the first pane is sent, the only size known).
    // At most the partials the bound still allows, so that many open panes
    // do not each reserve the largest one's size.
    if (created) {
      const size_t hint = std::min(std::max(last_pane_size_, cur_ != nullptr ? cur_->size() : 0),
                                   max_partials_ - held_);
      if (hint > 0) pane->second.reserve(hint);
    }
    if (cur_ != nullptr) {
      prev_ = cur_;
      prev_start_ = cur_start_;
      prev_end_ = cur_end_;
    }
    cur_ = &pane->second;
    cur_start_ = start;
    cur_end_ = end;
    return true;
  }

  // After a watermark no record comes to the panes it sent: the reach goes
  // back to what the open panes span (at least one pane), so that one record
  // that came from far back does not keep every later pane open.
  void ShrinkReach() {
    Timestamp span = 0;
    if (panes_open_.empty() || newest_start_ < panes_open_.begin()->first ||
        __builtin_sub_overflow(newest_start_, panes_open_.begin()->first, &span))
      span = 0;
    keep_back_ = std::max(panes_.size, span);
  }

  // Sends the panes that start more than keep_back_ before `newest` (see
  // the file comment); their tables' memory goes to the next panes.
  void SendPanesBehind(Timestamp newest) {
    Timestamp oldest_kept = 0;
    if (__builtin_sub_overflow(newest, keep_back_, &oldest_kept)) return;
    size_t largest = 0;
    while (!panes_open_.empty() && panes_open_.begin()->first < oldest_kept)
      largest = std::max(largest, FlushPane(panes_open_.begin()));
    NotePaneSize(largest);
  }

  std::pair<typename Panes::iterator, bool> NewPane(Timestamp start) {
    const typename Table::allocator_type alloc(&blocks_);
    if constexpr (kAsSet) {
      const ByKey by_key{key_};
      return panes_open_.try_emplace(start, 0, by_key, by_key, alloc);
    } else {
      return panes_open_.try_emplace(start, 0, typename Table::hasher{},
                                     typename Table::key_equal{}, alloc);
    }
  }

  [[noreturn, gnu::noinline]] void KeyChanged() {
    throw std::logic_error(
        "local aggregation: the reduce function returned a record with another key than its "
        "inputs' (under the key_by selector); with local_aggregation() it must keep the key, "
        "as the window operator downstream keys each partial by it");
  }

  [[gnu::noinline]] void PassAlone(T&& value, Timestamp ts) {
    ++passed_count_;
    this->output().Collect(combiner_.Raw(std::move(value)), ts);
  }

  // Sends the pane's partials and frees it; returns how many it held.
  size_t FlushPane(typename Panes::iterator it) {
    const Timestamp max_ts = PaneMax(it->first);
    // Out of the cache, keeping the other pane there (the current one stays
    // current when the one before it is sent).
    if (&it->second == prev_) {
      prev_ = nullptr;
      prev_start_ = kMaxTimestamp;
      prev_end_ = kMinTimestamp;
    } else if (&it->second == cur_) {
      cur_ = std::exchange(prev_, nullptr);
      cur_start_ = std::exchange(prev_start_, kMaxTimestamp);
      cur_end_ = std::exchange(prev_end_, kMinTimestamp);
    }
    batch_.reserve(it->second.size());
    if constexpr (kAsSet) {
      // Moved out: the table is erased below without another lookup.
      for (const T& p : it->second) AppendRecord(batch_, std::move(const_cast<T&>(p)), max_ts);
    } else {
      for (auto& [k, p] : it->second) AppendRecord(batch_, combiner_.Sent(k, std::move(p)), max_ts);
    }
    held_ -= it->second.size();
    const size_t partials = it->second.size();
    blocks_.set_keeping(true);  // its table's memory, for the next pane
    panes_open_.erase(it);
    blocks_.set_keeping(false);
    sent_count_ += batch_.size();
    if (!batch_.empty()) this->output().CollectBatch(std::span<Record<Out>>(batch_));
    batch_.clear();
    return partials;
  }

  void FlushAll() {
    size_t largest = 0;
    while (!panes_open_.empty()) largest = std::max(largest, FlushPane(panes_open_.begin()));
    NotePaneSize(largest);
    Uncache();
  }

  // The next panes' tables start at the size of the largest pane of the
  // last flush: not the last pane's, which after a size flush is often one
  // that had only begun (its tables would then grow by rehashing again).
  void NotePaneSize(size_t largest) {
    if (largest > 0) last_pane_size_ = std::min(largest, max_partials_);
  }

  // The current pane is checked before each record: an empty range never
  // matches.
  void Uncache() {
    cur_ = prev_ = nullptr;
    cur_start_ = prev_start_ = kMaxTimestamp;
    cur_end_ = prev_end_ = kMinTimestamp;
  }

  void PublishCounts() {
    if (combined_ == nullptr) return;
    combined_->Inc(combined_count_);
    passed_->Inc(passed_count_);
    sent_->Inc(sent_count_);
    combined_count_ = passed_count_ = sent_count_ = 0;
  }

  KeyFn key_;
  LocalPanes panes_;
  Combiner combiner_;
  size_t max_partials_;
  PaneBlocks blocks_;  // before panes_open_: outlives its tables
  Panes panes_open_;
  Table* cur_ = nullptr;
  Timestamp cur_start_ = kMaxTimestamp;
  Timestamp cur_end_ = kMinTimestamp;
  // The pane current before cur_ (FindPane); empty range when none.
  Table* prev_ = nullptr;
  Timestamp prev_start_ = kMaxTimestamp;
  Timestamp prev_end_ = kMinTimestamp;
  size_t held_ = 0;
  size_t last_pane_size_ = 0;  // see NotePaneSize
  // The start of the newest pane opened, and how far back from it records
  // have reached (at least one pane): see SendPanesBehind.
  Timestamp newest_start_ = kMinTimestamp;
  Timestamp keep_back_ = 0;
  Timestamp last_watermark_ = kMinTimestamp;
  bool passthrough_ = false;
  std::vector<Record<Out>> batch_;
  // Counted locally, published at watermarks, barriers and the end.
  int64_t combined_count_ = 0, passed_count_ = 0, sent_count_ = 0;
  Counter* combined_ = nullptr;
  Counter* passed_ = nullptr;
  Counter* sent_ = nullptr;
  Counter* size_flushes_ = nullptr;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_OPERATOR_H_
