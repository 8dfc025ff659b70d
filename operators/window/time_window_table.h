// operators/window/time_window_table.h
//
// TimeWindowTable<K, V>: the window-major state of a window operator whose
// assigner is non-merging and event-time (tumbling, sliding), whose trigger
// is EventTimeTrigger and whose contents are one value per (key, window)
// (reduce, aggregate).  FastWindowOperator (fast_window_operator.h) keeps
// its contents in one where WindowOperator has (key, window)-keyed contents
// plus one timer per (key, window, timestamp); the windowed stream builds it
// when those three hold.  The observable behaviour is the same, the cost per
// record is one hash probe instead of three (contents, trigger timer,
// cleanup timer) and no timer is stored at all.
//
// Why that is exact: with EventTimeTrigger every (key, window) that holds
// contents has, until the watermark reaches the window's max timestamp, a
// trigger timer at max_timestamp and (allowed lateness > 0) a cleanup timer at
// max_timestamp + lateness, registered when its first element arrived; no
// other timer exists.  All keys of one window therefore share their timer
// times, and the timers of a window fire in registration order, which is the
// order in which the window's keys first arrived.  So the table keeps, per
// window, its keys in arrival order (`slots`) with a hash index, and the
// windows ordered by max timestamp: a watermark fires the windows in
// timestamp order and, within one, the keys in arrival order, exactly as the
// timer queue would.
//
// Memory: per live (key, window) one Slot (key + value) in a SlotList and
// one 32-bit position in an index that hashes and compares the positions by
// the key of their slot (looked up by key, heterogeneously), so the key is
// stored once.  The index is an ExtendibleHashSet (extendible_hash_set.h):
// past ~100 000 keys a window's index grows a shard at a time, so that a
// window of tens of millions of keys never stops its task to rehash them all
// at once (issue 12: 1.3 s without source progress at 63 M keys before).  The SlotList is chunked
// (16, 32, 64, 128 slots, then chunks of 256): slots never move, nothing is copied as a window
// grows, and at most one chunk is partly empty.  A new window's index
// reserves as many entries as the window before it ended with, so it does
// not rehash as it fills in a steady stream.  StateBytes() counts the
// allocated capacity.  (Issue 12 tried the values inline in one
// flat_hash_map per window plus the arrival order: about 5% faster on W1,
// but 62-67 bytes per (key, window) instead of 41, over issue 6's 64.)
//
// Not in the KeyedStateStore: WindowOperator keeps its keyed state in the
// operator's KeyedStateStore (operators/keyed/keyed_state_store.h), as Flink
// keeps window state in its keyed state backend; this table is deliberately a
// separate, specialised state layout (window-major, timers implicit) for the
// one case above, the hot path of tumbling and sliding windows.
//
// Checkpoints: SnapshotTo writes the windows in order, each with its fired
// flag and its keys and values in arrival order; RestoreFrom rebuilds them,
// keeping the keys of a key-group range, appending to what is there (a
// second restore's keys come after the first's in a window they share).
//
// Thread safety: none; owned by one operator instance (one task thread).
#ifndef TM_OPERATORS_WINDOW_TIME_WINDOW_TABLE_H_
#define TM_OPERATORS_WINDOW_TIME_WINDOW_TABLE_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "tidemark/operators/keyed/cow_epoch.h"
#include "tidemark/operators/keyed/heap_keys.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/window/extendible_hash_set.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::internal {

// CowEpoch (copy-on-write bookkeeping of the chunks): operators/keyed/cow_epoch.h.

// An append-only sequence of T in chunks that never move (see above).  T
// needs no default constructor: slots are constructed as they are appended.
//
// Copy-on-write (CowEpoch above): Share() returns a View of the slots so far
// that holds their chunks; Mutable(pos, epoch) copies the chunk of `pos`
// first when a live snapshot may read it.  Appending never copies: a new slot
// lies past every View's size, in memory no View reads.  A slot written
// through Mutable may therefore move (to the chunk's copy) when a snapshot
// was taken since it was last reached.
template <typename T>
class SlotList {
  struct Chunk {
    Chunk(T* d, size_t cap) : data(d), capacity(cap) {}
    Chunk(const Chunk&) = delete;
    Chunk& operator=(const Chunk&) = delete;
    ~Chunk() {
      for (uint32_t i = 0; i < constructed; ++i) std::destroy_at(data + i);
      std::allocator<T>().deallocate(data, capacity);
    }
    T* data;
    size_t capacity;
    uint32_t constructed = 0;  // written by the list's owner only
  };

 public:
  // The slots of a list when Share() was called, in order; they never
  // change, whatever the list does afterwards.  Any thread may read it.
  class View {
   public:
    View() = default;
    uint32_t size() const { return size_; }
    template <typename F>
    void ForEach(F&& f) const {
      uint32_t left = size_;
      for (size_t c = 0; c < chunks_.size() && left > 0; ++c) {
        const auto n = static_cast<uint32_t>(std::min<size_t>(left, ChunkSize(c)));
        for (uint32_t i = 0; i < n; ++i) f(static_cast<const T&>(chunks_[c]->data[i]));
        left -= n;
      }
    }

   private:
    friend class SlotList;
    std::vector<std::shared_ptr<const Chunk>> chunks_;
    uint32_t size_ = 0;
  };

  SlotList() = default;
  SlotList(const SlotList&) = delete;
  SlotList& operator=(const SlotList&) = delete;

  const T& operator[](uint32_t pos) const {
    const auto [chunk, offset] = Locate(pos);
    return data_[chunk][offset];
  }
  // The slot at `pos`, to be written: its chunk is copied first while a
  // snapshot taken under `epoch` may read it.
  T& Mutable(uint32_t pos, CowEpoch& epoch) {
    const auto [chunk, offset] = Locate(pos);
    // Slots that cannot be copied are never shared (SnapshotTo encodes them
    // synchronously).
    if constexpr (std::is_copy_constructible_v<T>) {
      if (epoch.MustCopy(versions_[chunk])) [[unlikely]]
        CopyChunk(chunk, epoch.version());
    }
    return data_[chunk][offset];
  }
  // Appends; a new chunk gets `version` (CowEpoch::version()).
  T& push_back(T v, uint64_t version = 0) {
    const auto [chunk, offset] = Locate(size_);
    if (chunk == data_.size()) {
      const size_t cap = ChunkSize(chunk);
      std::allocator<T> alloc;
      T* mem = alloc.allocate(cap);
      std::shared_ptr<Chunk> owner;
      try {
        owner = std::make_shared<Chunk>(mem, cap);
      } catch (...) {
        alloc.deallocate(mem, cap);
        throw;
      }
      data_.reserve(data_.size() + 1);
      owners_.reserve(owners_.size() + 1);
      versions_.reserve(versions_.size() + 1);
      data_.push_back(mem);
      owners_.push_back(std::move(owner));
      versions_.push_back(version);
    }
    T* slot = std::construct_at(data_[chunk] + offset, std::move(v));
    ++owners_[chunk]->constructed;
    ++size_;
    return *slot;
  }
  // Removes the last slot (undoes a push_back).
  void pop_back() {
    const auto [chunk, offset] = Locate(size_ - 1);
    std::destroy_at(data_[chunk] + offset);
    --owners_[chunk]->constructed;
    --size_;
  }
  uint32_t size() const { return size_; }
  size_t capacity() const {
    size_t n = 0;
    for (size_t c = 0; c < data_.size(); ++c) n += ChunkSize(c);
    return n;
  }
  size_t num_chunks() const { return data_.size(); }
  // f(slot) for every slot, in order.
  template <typename F>
  void ForEach(F&& f) const {
    uint32_t left = size_;
    for (size_t c = 0; c < data_.size() && left > 0; ++c) {
      const auto n = static_cast<uint32_t>(std::min<size_t>(left, ChunkSize(c)));
      for (uint32_t i = 0; i < n; ++i) f(static_cast<const T&>(data_[c][i]));
      left -= n;
    }
  }
  // The slots so far, for a snapshot (see the class comment; call
  // CowEpoch::BeginSnapshot first).  Copies one pointer per chunk.
  View Share() const {
    View v;
    v.chunks_.assign(owners_.begin(), owners_.end());
    v.size_ = size_;
    return v;
  }

 private:
  static constexpr uint32_t kFirst = 16;       // slots in chunk 0
  static constexpr size_t kGrowing = 4;        // chunks 0..3 hold 16 << c slots
  static constexpr uint32_t kGrown = 16 * 15;  // slots in chunks 0..3
  static constexpr uint32_t kLargeShift = 8;   // then 256 slots a chunk
  static size_t ChunkSize(size_t chunk) {
    return chunk < kGrowing ? size_t{kFirst} << chunk : size_t{1} << kLargeShift;
  }
  static std::pair<size_t, uint32_t> Locate(uint32_t pos) {
    if (pos < kGrown) {
      // Chunk c starts at 16 * (2^c - 1).
      const int c = std::bit_width(pos / kFirst + 1) - 1;
      return {static_cast<size_t>(c), pos - kFirst * ((1u << c) - 1)};
    }
    const uint32_t rest = pos - kGrown;
    return {kGrowing + (rest >> kLargeShift), rest & ((1u << kLargeShift) - 1)};
  }
  // Replaces chunk `c` by a copy of its slots (the old one stays with the
  // snapshots that hold it).
  [[gnu::noinline]] void CopyChunk(size_t c,
                                   uint64_t version) requires std::is_copy_constructible_v<T> {
    const Chunk& old = *owners_[c];
    std::allocator<T> alloc;
    T* mem = alloc.allocate(old.capacity);
    std::shared_ptr<Chunk> owner;
    try {
      owner = std::make_shared<Chunk>(mem, old.capacity);  // frees mem from here on
    } catch (...) {
      alloc.deallocate(mem, old.capacity);
      throw;
    }
    for (uint32_t i = 0; i < old.constructed; ++i) {
      std::construct_at(mem + i, static_cast<const T&>(old.data[i]));
      ++owner->constructed;
    }
    owners_[c] = std::move(owner);
    data_[c] = mem;
    versions_[c] = version;
  }

  std::vector<T*> data_;                        // chunk c's slots (owners_[c]->data)
  std::vector<std::shared_ptr<Chunk>> owners_;  // shared with snapshot Views
  std::vector<uint64_t> versions_;              // CowEpoch version of chunk c
  uint32_t size_ = 0;
};

// The index of a TimeWindowTable window: slot positions hashed and compared
// by their slots' keys.  Only the lookup knows the key type (Find, inline on
// the per-record path); growing, splitting and inserting see positions and a
// hash function behind a pointer, so they are compiled once
// (time_window_table.cc), not once per key and value type.
class PositionIndex {
 public:
  // The hash of the key of slot `pos` in `slots` (a SlotList), and a
  // prefetch of that slot.
  using HashAt = size_t (*)(const void* slots, uint32_t pos);
  using PrefetchAt = void (*)(const void* slots, uint32_t pos);
  // A key to look up: HashedKey below, with its hash and
  // Matches(slots, pos) (does slot `pos` hold this key?).
  struct Hash {
    using is_transparent = void;
    const void* slots;
    HashAt hash_at;
    PrefetchAt prefetch_at;
    size_t operator()(uint32_t pos) const { return hash_at(slots, pos); }
    template <typename Key>
    size_t operator()(const Key& k) const {
      return k.hash;
    }
    void Prefetch(uint32_t pos) const { prefetch_at(slots, pos); }
  };
  struct Eq {
    using is_transparent = void;
    const void* slots;
    bool operator()(uint32_t a, uint32_t b) const { return a == b; }
    template <typename Key>
    bool operator()(const Key& k, uint32_t pos) const {
      return k.Matches(slots, pos);
    }
    template <typename Key>
    bool operator()(uint32_t pos, const Key& k) const {
      return k.Matches(slots, pos);
    }
  };
  using Set = ExtendibleHashSet<uint32_t, Hash, Eq>;

  PositionIndex(const void* slots, HashAt hash_at, PrefetchAt prefetch_at);
  ~PositionIndex();
  PositionIndex(const PositionIndex&) = delete;
  PositionIndex& operator=(const PositionIndex&) = delete;

  // The position of the slot holding `key` (whose hash is `hash`), or null.
  template <typename Key>
  const uint32_t* Find(const Key& key, size_t hash) {
    return set_.Find(key, hash);
  }
  // Adds `pos`, whose key (hash `hash`) is not in the index yet.
  void InsertNew(uint32_t pos, size_t hash);
  void Reserve(size_t n);
  size_t size() const { return set_.size(); }
  size_t num_shards() const { return set_.num_shards(); }
  size_t AllocatedBytes() const;

 private:
  Set set_;
};

template <typename K, typename V>
class TimeWindowTable {
 public:
  struct Slot {
    K key;
    V value;
  };
  // A key with its hash, computed once per lookup (PositionIndex's lookup
  // type).
  struct HashedKey {
    const K* key;
    size_t hash;
    bool Matches(const void* slots, uint32_t pos) const {
      return HeapKeyEquals((*static_cast<const SlotList<Slot>*>(slots))[pos].key, *key);
    }
  };
  static size_t HashKey(const K& key) { return HeapKeyHash(key); }
  struct Window {
    Window() : index(&slots, &HashAt, &PrefetchAt) {}
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;

    TimeWindow window;
    // The watermark has reached max_timestamp: the (implicit) trigger timers
    // have fired; a late element fires its own key at once.
    bool fired = false;
    SlotList<Slot> slots;  // in order of each key's first element
    // Positions in slots, by their slot's key; grows a shard at a time.
    PositionIndex index;
  };

  // The value of (key, w), created with make() if there is none; the bool
  // says whether it was created.  A window created when `watermark` has
  // already reached its max timestamp starts fired.  The pointer stays valid
  // until the window is erased or a snapshot is taken (copy-on-write may then
  // move the slot).
  template <typename Make>
  std::pair<V*, bool> FindOrCreate(const K& key, const TimeWindow& w, Timestamp watermark,
                                   Make&& make) {
    Window& win = GetWindow(w, watermark);
    const HashedKey hk{&key, HashKey(key)};
    if (const uint32_t* pos = win.index.Find(hk, hk.hash)) [[likely]]
      return {&win.slots.Mutable(*pos, cow_).value, false};
    return {Create(win, hk, std::forward<Make>(make)), true};
  }

  // Windows in ascending max timestamp (then start).
  auto begin() { return windows_.begin(); }
  auto end() { return windows_.end(); }
  auto begin() const { return windows_.begin(); }
  auto end() const { return windows_.end(); }
  bool empty() const { return windows_.empty(); }

  // Drops a window and its contents; returns the iterator after it.
  auto Erase(typename std::map<std::pair<Timestamp, Timestamp>, Window>::iterator it) {
    Window& win = it->second;
    live_ -= win.slots.size();
    last_closed_size_ = win.slots.size();
    for (Window*& c : cache_)
      if (c == &win) c = nullptr;
    return windows_.erase(it);
  }

  // See "Checkpoints" in the file comment; K and V have codecs.  With
  // copyable keys and values the synchronous part takes a copy-on-write view
  // (windows, fired flags, one pointer per chunk of slots) and the encoding
  // is deferred (StateWriter::Defer); the bytes are the same either way.
  void SnapshotTo(StateWriter& w) {
    if constexpr (std::is_copy_constructible_v<Slot>) {
      struct WindowView {
        TimeWindow window;
        bool fired;
        typename SlotList<Slot>::View slots;
      };
      struct View {
        std::shared_ptr<const void> guard;  // keeps the chunks unwritten
        std::vector<WindowView> windows;
      };
      auto view = std::make_shared<View>();
      view->guard = cow_.BeginSnapshot();
      view->windows.reserve(windows_.size());
      for (const auto& [k, win] : windows_)
        view->windows.push_back(WindowView{win.window, win.fired, win.slots.Share()});
      w.Defer([view = std::move(view)](StateWriter& out) {
        // One allocation for the whole encoding (exact for keys and values
        // written as their raw bytes, as int64_t and plain structs are; at
        // most 512 MiB at first, a guess is no reason to fail).
        size_t slots = 0;
        for (const WindowView& win : view->windows) slots += win.slots.size();
        out.Reserve(std::min<size_t>(size_t{512} << 20,
                                     16 + view->windows.size() * (sizeof(TimeWindow) + 16) +
                                         slots * (sizeof(K) + sizeof(V))));
        out.PutVarint(view->windows.size());
        for (const WindowView& win : view->windows) {
          Encode(out, win.window);
          Encode(out, win.fired);
          out.PutVarint(win.slots.size());
          win.slots.ForEach([&](const Slot& slot) {
            Encode(out, slot.key);
            Encode(out, slot.value);
          });
        }
      });
    } else {
      w.PutVarint(windows_.size());
      for (const auto& [k, win] : windows_) {
        Encode(w, win.window);
        Encode(w, win.fired);
        w.PutVarint(win.slots.size());
        win.slots.ForEach([&](const Slot& slot) {
          Encode(w, slot.key);
          Encode(w, slot.value);
        });
      }
    }
  }
  // Snapshots whose deferred part still reads the table (for tests).
  int live_snapshots() const { return cow_.live_snapshots(); }
  void RestoreFrom(StateReader& r, const KeyGroupRange& range) {
    Window* win = nullptr;
    ForEachSnapshotEntry(r, range, [&](const TimeWindow& w, bool fired, K&& key, V&& value) {
      if (win == nullptr || !(win->window == w)) {
        auto [it, inserted] = windows_.try_emplace({w.max_timestamp(), w.start});
        win = &it->second;
        if (inserted) win->window = w;
      }
      win->fired = win->fired || fired;
      const HashedKey hk{&key, HashKey(key)};
      if (const uint32_t* pos = win->index.Find(hk, hk.hash)) {
        win->slots.Mutable(*pos, cow_).value = std::move(value);
      } else {
        Create(*win, hk, [&] { return std::move(value); });
      }
    });
  }
  // Reads a SnapshotTo encoding one entry at a time: f(window, fired, key,
  // value) for each (key, window) whose key is in `range`, the windows in
  // max-timestamp order and each window's keys in arrival order.  RestoreFrom
  // and the general WindowOperator's restore from this layout (on RocksDB)
  // read it through here.
  template <typename F>
  static void ForEachSnapshotEntry(StateReader& r, const KeyGroupRange& range, F&& f) {
    const uint64_t n = r.GetCount("windows");
    for (uint64_t i = 0; i < n && r.ok(); ++i) {
      const auto w = Decode<TimeWindow>(r);
      const bool fired = Decode<bool>(r);
      const uint64_t keys = r.GetCount("window keys");
      for (uint64_t j = 0; j < keys && r.ok(); ++j) {
        K key = Decode<K>(r);
        V value = Decode<V>(r);
        if (!r.ok() || !range.Contains(key)) continue;
        f(w, fired, std::move(key), std::move(value));
      }
    }
  }

  // Live (key, window) pairs.
  size_t size() const { return live_; }
  size_t num_windows() const { return windows_.size(); }
  // Bytes allocated for the contents: slots, index and per-window overhead
  // (heap allocations made by V itself are not seen).
  size_t StateBytes() const {
    size_t bytes = 0;
    for (const auto& [k, win] : windows_) {
      bytes += sizeof(std::pair<const std::pair<Timestamp, Timestamp>, Window>) + 4 * sizeof(void*);
      bytes += win.slots.capacity() * sizeof(Slot) + win.slots.num_chunks() * sizeof(void*);
      bytes += win.index.AllocatedBytes();
    }
    return bytes;
  }

 private:
  static size_t HashAt(const void* slots, uint32_t pos) {
    return HashKey((*static_cast<const SlotList<Slot>*>(slots))[pos].key);
  }
  static void PrefetchAt(const void* slots, uint32_t pos) {
    __builtin_prefetch(&(*static_cast<const SlotList<Slot>*>(slots))[pos].key);
  }

  Window& GetWindow(const TimeWindow& w, Timestamp watermark) {
    // A record belongs to one window (tumbling) or size/slide windows
    // (sliding); a small direct-mapped cache of recent windows by start saves
    // the ordered-map lookup for nearly every record.
    Window*& cached = cache_[CacheIndex(w.start)];
    if (cached != nullptr && cached->window == w) [[likely]]
      return *cached;
    return FindOrCreateWindow(w, watermark, cached);
  }
  // A new (key, window): its position in the index, then its slot.
  template <typename Make>
  [[gnu::noinline]] V* Create(Window& win, const HashedKey& hk, Make&& make) {
    // The slot first: make() may throw (a user function), and the index
    // must only hold positions that have a slot.
    const uint32_t next = win.slots.size();
    Slot& slot = win.slots.push_back(Slot{*hk.key, make()}, cow_.version());
    try {
      win.index.InsertNew(next, hk.hash);
    } catch (...) {
      win.slots.pop_back();
      throw;
    }
    ++live_;
    return &slot.value;
  }
  [[gnu::noinline]] Window& FindOrCreateWindow(const TimeWindow& w, Timestamp watermark,
                                               Window*& cached) {
    auto [it, inserted] = windows_.try_emplace({w.max_timestamp(), w.start});
    Window& win = it->second;
    if (inserted) {
      win.window = w;
      win.fired = w.max_timestamp() <= watermark;
      win.index.Reserve(last_closed_size_);
    }
    cached = &win;
    return win;
  }
  static size_t CacheIndex(Timestamp start) {
    return static_cast<size_t>((static_cast<uint64_t>(start) * 0x9e3779b97f4a7c15ull) >> 59);
  }

  std::map<std::pair<Timestamp, Timestamp>, Window> windows_;  // by (max timestamp, start)
  std::array<Window*, 32> cache_{};
  CowEpoch cow_;  // copy-on-write of the slots while a snapshot reads them
  size_t live_ = 0;
  size_t last_closed_size_ = 0;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_TIME_WINDOW_TABLE_H_
