// operators/keyed/cow_epoch.h
//
// CowEpoch: the copy-on-write bookkeeping of asynchronous snapshots
// (docs/checkpoints.md "The snapshot's phases") for state kept in chunks that
// a snapshot shares: TimeWindowTable's and the sliced window operator's
// SlotLists (operators/window/time_window_table.h) and the timer queues'
// buckets (timer_buckets.h).
//
// Thread safety: see the class comment.
#ifndef TM_OPERATORS_KEYED_COW_EPOCH_H_
#define TM_OPERATORS_KEYED_COW_EPOCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace tidemark::internal {

// Counts one more snapshot reader in `readers` for as long as the returned
// guard lives (copy-on-write tables keep what a live snapshot reads).
inline std::shared_ptr<const void> SnapshotReaderGuard(
    const std::shared_ptr<std::atomic<int>>& readers) {
  readers->fetch_add(1, std::memory_order_relaxed);
  struct Guard {
    explicit Guard(std::shared_ptr<std::atomic<int>> r) : readers(std::move(r)) {}
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    ~Guard() { readers->fetch_sub(1, std::memory_order_release); }
    const std::shared_ptr<std::atomic<int>> readers;
  };
  return std::make_shared<const Guard>(readers);
}

// Copy-on-write bookkeeping for asynchronous snapshots (Flink's
// CopyOnWriteStateMap, by chunk instead of by entry), shared by the SlotLists
// of one table.  Every chunk carries the version current when it was made;
// BeginSnapshot() makes every existing chunk "required" by the snapshot that
// starts (version < required_) and hands out a guard the snapshot holds while
// it reads.  A write to a required chunk copies it first while a snapshot
// still reads (MustCopy): the snapshot keeps the old chunk, unchanged, and
// the task writes the copy.  Once every snapshot has let go of its guard no
// chunk is copied any more.
//
// Thread safety: everything on the task thread, except the guard, which the
// snapshot thread drops (release) and MustCopy reads (acquire): the
// snapshot's reads of a chunk happen before the task's later writes to it.
class CowEpoch {
 public:
  CowEpoch() : readers_(std::make_shared<std::atomic<int>>(0)) {}
  CowEpoch(const CowEpoch&) = delete;
  CowEpoch& operator=(const CowEpoch&) = delete;

  // The version of a chunk made now.
  uint64_t version() const { return version_; }
  // Whether a chunk of `version` must be copied before it is written.
  bool MustCopy(uint64_t version) {
    if (version >= required_) [[likely]]
      return false;
    if (readers_->load(std::memory_order_acquire) == 0) {
      required_ = 0;  // no snapshot reads any chunk: nothing to copy until the next
      return false;
    }
    return true;
  }
  // A snapshot starts: the chunks made so far stay as they are while the
  // returned guard lives.
  std::shared_ptr<const void> BeginSnapshot() {
    required_ = ++version_;
    return SnapshotReaderGuard(readers_);
  }
  // Snapshots that still read (for tests).
  int live_snapshots() const { return readers_->load(std::memory_order_acquire); }

 private:
  uint64_t version_ = 0;
  uint64_t required_ = 0;  // chunks of a lower version may be read by a snapshot
  std::shared_ptr<std::atomic<int>> readers_;
};

}  // namespace tidemark::internal

#endif  // TM_OPERATORS_KEYED_COW_EPOCH_H_
