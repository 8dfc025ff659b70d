// operators/keyed/timer_buckets.h
//
// TimerBuckets<Entry>: the registrations of a TimerQueue (timer_service.h) by
// timestamp -- per timestamp a bucket of entries in the order they were
// pushed, the buckets in time order (TimeOrder, time_order.h), a small
// direct-mapped cache of recent timestamps' buckets -- with the entries of a
// bucket in chunks that never move (4, 8, ..., 128 entries, then 256 a
// chunk), so that a snapshot can share them
// (asynchronous snapshots, docs/checkpoints.md "The snapshot's phases"):
//   - Share() takes a copy-on-write view: per bucket its timestamp, the range
//     of entries not popped yet and one shared pointer per chunk of it;
//   - pushing appends past every view's end, in memory no view reads: no
//     copy;
//   - popping only moves a bucket's head (the entry is copied out, not moved,
//     while a view may read its chunk); a released bucket's chunks live on in
//     the views that hold them;
//   - Mutable(pos) (the timer queue's "live" flag) copies the entry's chunk
//     first while a snapshot reads it (CowEpoch, cow_epoch.h);
//   - a released bucket's first chunk that no snapshot can read is kept
//     for the next new bucket (at most as many as there are buckets, or 64).
// Each push returns the entry's position (bucket, index), valid until the
// entry is popped.
//
// Thread safety: one task thread; a View is read on any thread (it holds the
// chunks it reads, which the task never writes again).
#ifndef TM_OPERATORS_KEYED_TIMER_BUCKETS_H_
#define TM_OPERATORS_KEYED_TIMER_BUCKETS_H_

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tidemark/operators/keyed/cow_epoch.h"
#include "tidemark/operators/keyed/time_order.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

// Where an entry of TimerBuckets is.
struct BucketPos {
  uint32_t bucket = 0;
  uint32_t index = 0;
  friend bool operator==(const BucketPos&, const BucketPos&) = default;
};

template <typename Entry>
class TimerBuckets {
  static_assert(std::is_copy_constructible_v<Entry>);
  struct Chunk {
    Chunk(Entry* d, size_t cap) : data(d), capacity(cap) {}
    Chunk(const Chunk&) = delete;
    Chunk& operator=(const Chunk&) = delete;
    ~Chunk() {
      for (uint32_t i = 0; i < constructed; ++i) std::destroy_at(data + i);
      std::allocator<Entry>().deallocate(data, capacity);
    }
    Entry* data;
    size_t capacity;
    uint32_t constructed = 0;  // written by the owner of the buckets only
  };
  struct ChunkRef {
    Entry* data;
    std::shared_ptr<Chunk> owner;  // shared with views
    uint64_t version;              // CowEpoch version
  };

 public:
  // The buckets when Share() was called: per bucket its timestamp and the
  // entries not popped then.  Never changes; any thread may read it.
  class View {
   public:
    struct Bucket {
      Timestamp ts;
      uint32_t head;                                     // index of the first entry
      uint32_t size;                                     // index past the last one
      std::vector<std::shared_ptr<const Chunk>> chunks;  // from head's chunk on
      size_t first_chunk;
      // f(entry) for each entry, in push order.
      template <typename F>
      void ForEach(F&& f) const {
        for (uint32_t i = head; i < size; ++i) {
          const auto [c, off] = Locate(i);
          f(static_cast<const Entry&>(chunks[c - first_chunk]->data[off]));
        }
      }
      uint32_t count() const { return size - head; }
    };
    // The buckets in timestamp order.
    const std::vector<Bucket>& buckets() const { return buckets_; }

   private:
    friend class TimerBuckets;
    std::shared_ptr<const void> guard_;  // keeps the chunks unwritten
    std::vector<Bucket> buckets_;
  };

  TimerBuckets() = default;
  TimerBuckets(const TimerBuckets&) = delete;
  TimerBuckets& operator=(const TimerBuckets&) = delete;

  BucketPos Push(Timestamp ts, Entry e) {
    const uint32_t slot = BucketFor(ts);
    Bucket& b = buckets_[slot];
    const auto [c, off] = Locate(b.size);
    if (c == b.chunks.size()) AddChunk(b);
    std::construct_at(b.chunks[c].data + off, std::move(e));
    ++b.chunks[c].owner->constructed;
    return BucketPos{slot, b.size++};
  }
  bool empty() const { return times_.empty(); }
  // The earliest timestamp, its first entry and that entry's position (not
  // empty()).
  Timestamp front_time() const { return times_.front().first; }
  const Entry& front() const {
    const Bucket& b = buckets_[times_.front().second];
    return At(b, b.head);
  }
  BucketPos front_pos() const {
    const uint32_t slot = times_.front().second;
    return BucketPos{slot, buckets_[slot].head};
  }
  // Removes the earliest entry and returns it (a copy while a snapshot may
  // read it).
  Entry PopFront() {
    Bucket& b = buckets_[times_.front().second];
    const auto [c, off] = Locate(b.head);
    ChunkRef& ref = b.chunks[c];
    Entry e = epoch_.MustCopy(ref.version) ? Entry(static_cast<const Entry&>(ref.data[off]))
                                           : Entry(std::move(ref.data[off]));
    if (++b.head == b.size) ReleaseFront();
    return e;
  }
  void DropFront() {
    Bucket& b = buckets_[times_.front().second];
    if (++b.head == b.size) ReleaseFront();
  }
  // The entry at `pos` (pushed, not popped), to be written: its chunk is
  // copied first while a snapshot may read it.
  Entry& Mutable(BucketPos pos) {
    Bucket& b = buckets_[pos.bucket];
    const auto [c, off] = Locate(pos.index);
    if (epoch_.MustCopy(b.chunks[c].version)) [[unlikely]]
      CopyChunk(b.chunks[c]);
    return b.chunks[c].data[off];
  }
  size_t num_buckets() const { return times_.size(); }
  // The view of a snapshot (see the file comment).  O(buckets + chunks).
  View Share() {
    View v;
    v.guard_ = epoch_.BeginSnapshot();
    v.buckets_.reserve(num_buckets());
    auto share = [&](Timestamp ts, uint32_t slot) {
      const Bucket& b = buckets_[slot];
      typename View::Bucket vb{ts, b.head, b.size, {}, 0};
      const size_t first = Locate(b.head).first;
      const size_t last = Locate(b.size - 1).first;
      vb.first_chunk = first;
      vb.chunks.reserve(last - first + 1);
      for (size_t c = first; c <= last; ++c) vb.chunks.push_back(b.chunks[c].owner);
      v.buckets_.push_back(std::move(vb));
    };
    times_.ForEach(share);
    std::sort(v.buckets_.begin(), v.buckets_.end(),
              [](const auto& a, const auto& b) { return a.ts < b.ts; });
    return v;
  }
  // Snapshots that still read (for tests).
  int live_snapshots() const { return epoch_.live_snapshots(); }
  // Released first chunks kept for new buckets (for tests).
  size_t spare_chunks() const { return spare_.size(); }
  // Bytes allocated: the chunks, the buckets, their index and heap.
  size_t StateBytes() const {
    return times_.CapacityBytes() +
           index_.capacity() * (sizeof(std::pair<Timestamp, uint32_t>) + 1) +
           buckets_.capacity() * sizeof(Bucket) + free_.capacity() * sizeof(uint32_t) +
           chunks_ * (sizeof(ChunkRef) + sizeof(Chunk) + 4 * sizeof(void*)) +
           entry_capacity_ * sizeof(Entry) + spare_.capacity() * sizeof(std::shared_ptr<Chunk>) +
           spare_.size() * (sizeof(Chunk) + 4 * sizeof(void*) + kFirst * sizeof(Entry));
  }

 private:
  struct Bucket {
    uint32_t head = 0;  // entries before it are popped
    uint32_t size = 0;  // entries pushed
    std::vector<ChunkRef> chunks;
  };
  static constexpr uint32_t kNoSlot = ~uint32_t{0};
  static constexpr size_t kCacheSize = 256;
  static constexpr uint32_t kFirst = 4;       // entries in chunk 0
  static constexpr size_t kGrowing = 6;       // chunks 0..5 hold 4 << c entries
  static constexpr uint32_t kGrown = 4 * 63;  // entries in chunks 0..5
  static constexpr uint32_t kLargeShift = 8;  // then 256 entries a chunk
  struct CacheEntry {
    Timestamp ts = 0;
    uint32_t slot = kNoSlot;
  };

  static size_t ChunkSize(size_t chunk) {
    return chunk < kGrowing ? size_t{kFirst} << chunk : size_t{1} << kLargeShift;
  }
  static std::pair<size_t, uint32_t> Locate(uint32_t i) {
    if (i < kGrown) {
      // Chunk c starts at 4 * (2^c - 1).
      const int c = std::bit_width(i / kFirst + 1) - 1;
      return {static_cast<size_t>(c), i - kFirst * ((1u << c) - 1)};
    }
    const uint32_t rest = i - kGrown;
    return {kGrowing + (rest >> kLargeShift), rest & ((1u << kLargeShift) - 1)};
  }
  static const Entry& At(const Bucket& b, size_t i) {
    const auto [c, off] = Locate(static_cast<uint32_t>(i));
    return b.chunks[c].data[off];
  }

  // A new chunk at the end of `b`, of the current version.
  void AddChunk(Bucket& b) {
    const size_t cap = ChunkSize(b.chunks.size());
    if (cap == kFirst && !spare_.empty()) {
      std::shared_ptr<Chunk> owner = std::move(spare_.back());
      spare_.pop_back();
      Entry* mem = owner->data;
      b.chunks.push_back(ChunkRef{mem, std::move(owner), epoch_.version()});
      entry_capacity_ += cap;
      ++chunks_;
      return;
    }
    std::allocator<Entry> alloc;
    Entry* mem = alloc.allocate(cap);
    std::shared_ptr<Chunk> owner;
    try {
      owner = std::make_shared<Chunk>(mem, cap);  // frees mem from here on
    } catch (...) {
      alloc.deallocate(mem, cap);
      throw;
    }
    b.chunks.push_back(ChunkRef{mem, std::move(owner), epoch_.version()});
    entry_capacity_ += cap;
    ++chunks_;
  }
  // Replaces the chunk of `ref` by a copy (the old one stays with the views).
  [[gnu::noinline]] void CopyChunk(ChunkRef& ref) {
    const Chunk& old = *ref.owner;
    std::allocator<Entry> alloc;
    Entry* mem = alloc.allocate(old.capacity);
    std::shared_ptr<Chunk> owner;
    try {
      owner = std::make_shared<Chunk>(mem, old.capacity);
    } catch (...) {
      alloc.deallocate(mem, old.capacity);
      throw;
    }
    for (uint32_t i = 0; i < old.constructed; ++i) {
      std::construct_at(mem + i, static_cast<const Entry&>(old.data[i]));
      ++owner->constructed;
    }
    ref = ChunkRef{mem, std::move(owner), epoch_.version()};
  }
  uint32_t BucketFor(Timestamp ts) {
    CacheEntry& c = cache_[static_cast<uint64_t>(ts) & (kCacheSize - 1)];
    if (c.slot != kNoSlot && c.ts == ts) return c.slot;
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
      it->second = slot;
      times_.Push(ts, slot);
    }
    c.ts = ts;
    c.slot = it->second;
    return c.slot;
  }
  void ReleaseFront() {
    const auto [ts, slot] = times_.front();
    times_.Pop();
    index_.erase(ts);
    Bucket& b = buckets_[slot];
    for (ChunkRef& ref : b.chunks) {
      entry_capacity_ -= ref.owner->capacity;
      Recycle(ref);
    }
    chunks_ -= b.chunks.size();
    b.chunks.clear();  // views keep the chunks they share
    b.head = 0;
    b.size = 0;
    free_.push_back(slot);
    CacheEntry& c = cache_[static_cast<uint64_t>(ts) & (kCacheSize - 1)];
    if (c.slot == slot) c.slot = kNoSlot;
  }

  // A released bucket's first chunk is kept for the next new bucket when no
  // snapshot can read it (timers at timestamps of their own, as q6's at its
  // auctions' expiries, make a bucket per timer: two allocations and two
  // frees each otherwise).  Either check suffices: a chunk no snapshot
  // requires is held by no view.  At most as many are kept as there are
  // buckets (or 64): a watermark that releases thousands of buckets is
  // followed by as many new ones.
  void Recycle(ChunkRef& ref) {
    Chunk& c = *ref.owner;
    if (c.capacity != kFirst || spare_.size() >= std::max(kMinSpare, num_buckets()) ||
        epoch_.MustCopy(ref.version) || ref.owner.use_count() != 1)
      return;
    for (uint32_t i = 0; i < c.constructed; ++i) std::destroy_at(c.data + i);
    c.constructed = 0;
    spare_.push_back(std::move(ref.owner));
  }

  static constexpr size_t kMinSpare = 64;
  std::vector<Bucket> buckets_;
  std::vector<std::shared_ptr<Chunk>> spare_;  // first chunks to reuse, empty
  std::vector<uint32_t> free_;                 // slots of released buckets
  size_t entry_capacity_ = 0;                  // the chunks' capacity, in entries
  size_t chunks_ = 0;
  absl::flat_hash_map<Timestamp, uint32_t> index_;
  TimeOrder times_;  // (timestamp, bucket) in time order
  std::array<CacheEntry, kCacheSize> cache_{};
  CowEpoch epoch_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_KEYED_TIMER_BUCKETS_H_
