// operators/window/extendible_hash_set.h
//
// ExtendibleHashSet<V, Hash, Eq>: a hash set that grows a little at a time.
//
// One absl::flat_hash_set doubles its table when it fills: every element is
// moved in one step.  At tens of millions of elements that step takes
// seconds, and a window operator that takes it stops its task that long: the
// sources stop behind it (issue 12 measured 1.3 s without any source
// progress at 63 M live keys).  This set is a directory of shards, each an
// absl::flat_hash_set, addressed by the top bits of the element's hash
// (extendible hashing, Fagin et al., 1979): a shard grows as usual up to
// (at most) kSplitSize elements and is then split in two by the next bit of the hash,
// so no step ever moves more than kSplitSize elements (a few milliseconds),
// whatever the size of the set.  The directory doubles when a shard whose
// depth equals the directory's splits, which copies pointers only.  Each
// shard splits at its own size, drawn between kSplitSize / 2 and kSplitSize,
// so that shards do not all split at once (see NewShard).
//
// Until its first split it is one flat_hash_set held inline (no directory
// on the way), which is all a window of up to ~100 000 keys ever uses.
//
// Lookups take the element's hash along (the caller computes it once, and
// Hash must return the same value for the lookup argument, which is how the
// caller's lookup type carries it; see TimeWindowTable).
//
// Thread safety: none; owned by one operator instance.
#ifndef TM_OPERATORS_WINDOW_EXTENDIBLE_HASH_SET_H_
#define TM_OPERATORS_WINDOW_EXTENDIBLE_HASH_SET_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace tidemark::internal {

template <typename V, typename Hash, typename Eq>
class ExtendibleHashSet {
 public:
  using Set = absl::flat_hash_set<V, Hash, Eq>;
  // A shard splits when it holds this many elements; it is below the
  // growth limit of a table of 2^17 slots (7/8 full), so a shard never
  // grows past that table, and each half of a split starts in such a table.
  static constexpr size_t kSplitSize = size_t{3} << 15;
  // No shard splits deeper (a directory of 2^kMaxDepth entries): a hash
  // function that gives most elements the same top bits makes a shard grow
  // instead of the directory doubling without end.
  static constexpr int kMaxDepth = 16;

  explicit ExtendibleHashSet(Hash hash = Hash(), Eq eq = Eq())
      : hash_(hash), eq_(eq), first_(0, kSplitSize, hash, eq) {}
  ExtendibleHashSet(const ExtendibleHashSet&) = delete;
  ExtendibleHashSet& operator=(const ExtendibleHashSet&) = delete;

  // Makes room for `n` elements in an empty set, in as many shards as that
  // takes (each half full), so that a set that is expected to reach `n`
  // neither grows nor splits on the way.
  void Reserve(size_t n) {
    if (size_ != 0 || depth_ != 0) return;
    int depth = 0;
    while ((n >> depth) > kSplitSize / 2 && depth < kMaxDepth) ++depth;
    if (depth == 0) {
      first_.set.reserve(n);
      return;
    }
    std::vector<std::unique_ptr<Shard>> shards;
    std::vector<Shard*> dir;
    for (size_t i = 0; i < (size_t{1} << depth); ++i) {
      shards.push_back(NewShard(depth));
      shards.back()->set.reserve(n >> depth);
      dir.push_back(shards.back().get());
    }
    shards_ = std::move(shards);
    dir_ = std::move(dir);
    depth_ = depth;
  }

  // The element equal to `key` (whose hash is `hash`, as Hash gives it), or
  // null.
  template <typename Key>
  [[gnu::always_inline]] const V* Find(const Key& key, size_t hash) {
    Shard* shard = ShardOf(hash);
    auto it = shard->set.find(key);
    return it != shard->set.end() ? &*it : nullptr;
  }

  // Finds the element equal to `key` (whose hash is `hash`, as Hash gives
  // it); if there is none, make(ctor) constructs it by calling ctor(args...)
  // (absl's lazy_emplace).  Returns the element and whether it was made; the
  // pointer is valid until the next insertion.
  template <typename Key, typename Make>
  std::pair<const V*, bool> LazyEmplace(const Key& key, size_t hash, Make&& make) {
    Shard* shard = ShardOf(hash);
    // Found: the common case, one probe.
    if (auto it = shard->set.find(key); it != shard->set.end()) [[likely]]
      return {&*it, false};
    if (shard->set.size() >= shard->split_at && shard->depth < kMaxDepth) [[unlikely]] {
      Split(shard);
      shard = ShardOf(hash);
    }
    auto it = shard->set.lazy_emplace(key, [&](const auto& ctor) { make(ctor); });
    ++size_;
    return {&*it, true};
  }

  // Removes the element equal to `key` (hash `hash`), if any.
  template <typename Key>
  void Erase(const Key& key, size_t hash) {
    size_ -= ShardOf(hash)->set.erase(key);
  }

  size_t size() const { return size_; }
  size_t num_shards() const { return depth_ == 0 ? 1 : shards_.size(); }
  // Table slots allocated over all shards (each one V and one control byte).
  size_t capacity() const {
    size_t n = first_.set.capacity();
    for (const auto& s : shards_) n += s->set.capacity();
    return n;
  }
  // Bytes allocated: the tables, the shards and the directory.
  size_t AllocatedBytes() const {
    return capacity() * (sizeof(V) + 1) + shards_.size() * (sizeof(Shard) + sizeof(void*)) +
           dir_.capacity() * sizeof(Shard*);
  }

 private:
  struct Shard {
    Shard(int d, size_t split, const Hash& hash, const Eq& eq)
        : depth(d), split_at(split), set(0, hash, eq) {}
    int depth;        // the shard holds the elements whose top `depth` hash bits are its own
    size_t split_at;  // in [kSplitSize / 2, kSplitSize]
    Set set;
  };

  // A shard's split size is drawn from [kSplitSize / 2, kSplitSize]: with
  // one size, shards that a uniform hash fills at the same rate would all
  // split within a few thousand insertions of each other, a burst as long as
  // one big rehash; drawn sizes spread the splits out.
  std::unique_ptr<Shard> NewShard(int depth) {
    seq_ += 0x9e3779b97f4a7c15ull;  // splitmix64
    uint64_t z = seq_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const size_t split = kSplitSize / 2 + static_cast<size_t>(z % (kSplitSize / 2 + 1));
    return std::make_unique<Shard>(depth, split, hash_, eq_);
  }
  // The shard of a hash: first_ at depth 0, else the directory entry of its
  // top depth_ bits.
  Shard* ShardOf(size_t hash) {
    if (depth_ == 0) [[likely]]
      return &first_;
    return dir_[static_cast<size_t>(static_cast<uint64_t>(hash) >> (64 - depth_))];
  }

  // Splits `shard` by hash bit `shard->depth` (from the top) into two new
  // shards; builds both before changing anything, so an allocation failure
  // leaves the set as it was.
  [[gnu::noinline]] void Split(Shard* shard) {
    const int d = shard->depth;
    shards_.reserve(shards_.size() + 2);
    auto low = NewShard(d + 1);
    auto high = NewShard(d + 1);
    low->set.reserve(low->split_at);
    high->set.reserve(high->split_at);
    // Hashing an element may read memory elsewhere (TimeWindowTable hashes
    // a position by its slot's key): with a Prefetch(v) in Hash, the
    // elements kPrefetchAhead on are prefetched while one is moved.
    static constexpr size_t kPrefetchAhead = 16;
    std::vector<V> ahead;
    if constexpr (requires(const V& v) { hash_.Prefetch(v); }) ahead.reserve(kPrefetchAhead);
    auto move = [&](const V& v) {
      const auto h = static_cast<uint64_t>(hash_(v));
      Set& to = ((h >> (63 - d)) & 1) != 0 ? high->set : low->set;
      to.insert(v);
    };
    size_t next = 0;  // ring position in `ahead`
    for (const V& v : shard->set) {
      if constexpr (requires { hash_.Prefetch(v); }) {
        hash_.Prefetch(v);
        if (ahead.size() < kPrefetchAhead) {
          ahead.push_back(v);
          continue;
        }
        move(ahead[next]);
        ahead[next] = v;
        next = (next + 1) % kPrefetchAhead;
      } else {
        move(v);
      }
    }
    for (size_t i = 0; i < ahead.size(); ++i) move(ahead[(next + i) % ahead.size()]);
    std::vector<Shard*> dir;
    if (depth_ == 0) {
      // The first split: the directory starts, and first_ is emptied below.
      dir_.assign(1, &first_);
    }
    if (d == depth_) dir.resize(dir_.size() * 2);
    // Nothing below allocates.
    if (d == depth_) {
      // Double the directory: entry i becomes 2i and 2i + 1.
      for (size_t i = 0; i < dir.size(); ++i) dir[i] = dir_[i >> 1];
      dir_.swap(dir);
      ++depth_;
    }
    // The entries that pointed to `shard` share their top d bits; bit d
    // (from the top of depth_ bits) picks the half.
    for (size_t i = 0; i < dir_.size(); ++i) {
      if (dir_[i] != shard) continue;
      dir_[i] = ((i >> (depth_ - 1 - d)) & 1) != 0 ? high.get() : low.get();
    }
    if (shard == &first_) {
      shards_.push_back(std::move(low));
      first_.set = Set(0, hash_, eq_);  // frees its table
    } else {
      for (auto& s : shards_) {
        if (s.get() == shard) {
          s = std::move(low);
          break;
        }
      }
    }
    shards_.push_back(std::move(high));
  }

  Hash hash_;
  Eq eq_;
  // The only shard while depth_ is 0 (no directory: one indirection less on
  // the common path); empty and unused after the first split or Reserve.
  Shard first_;
  std::vector<std::unique_ptr<Shard>> shards_;  // the shards once depth_ > 0
  std::vector<Shard*> dir_;                     // 2^depth_ entries once depth_ > 0
  int depth_ = 0;
  size_t size_ = 0;
  uint64_t seq_ = 0;  // NewShard's generator state
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_WINDOW_EXTENDIBLE_HASH_SET_H_
