// partitioning/partitioner.h
//
// Partitioners decide which downstream channel a record goes to.  They route
// records only: watermarks, watermark statuses and end of input are sent to
// every channel by the runtime, whatever the partitioner.
//
//   forward    - subtask i sends to subtask i (equal parallelism only; checked
//                when the job is built);
//   rebalance  - round robin over all channels, starting at the sender's own
//                index so runs are repeatable;
//   broadcast  - every record to every channel;
//   key groups - key_by: Flink's key-group assignment (key_groups.h);
//   custom     - a user function (key, num_channels) -> channel.
//
// A partitioner instance belongs to one sending subtask; no locks.
#ifndef TM_PARTITIONING_PARTITIONER_H_
#define TM_PARTITIONING_PARTITIONER_H_

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/partitioning/key_groups.h"

namespace tidemark::internal {

enum class ShipStrategy {
  kDefault,  // forward when parallelism matches, else rebalance (Flink's rule)
  kForward,
  kRebalance,
  kBroadcast,
  kKeyGroups,
  kCustom,
  kRescale,  // round robin over a few downstream subtasks (pointwise, below)
  kShuffle,  // a uniformly random downstream subtask per record
  kGlobal,   // every record to downstream subtask 0
};

const char* ToString(ShipStrategy s);

// Which channels an edge has between upstream subtask u of pu and
// downstream subtask d of pd.  FORWARD and RESCALE are pointwise, as Flink's
// EdgeManagerBuildUtil.connectPointwise: at equal parallelism u feeds d = u;
// with more upstream subtasks, d reads u in [d*pu/pd, (d+1)*pu/pd); with
// fewer, u feeds d in [ceil(u*pd/pu), ceil((u+1)*pd/pu)).  Every other
// strategy connects all to all.
bool IsPointwise(ShipStrategy s);
bool Connected(ShipStrategy s, int u, int d, int pu, int pd);

template <typename T>
class Partitioner {
 public:
  virtual ~Partitioner() = default;
  // Index of the channel for `value`.  Not called for broadcast.
  virtual int Select(const T& value) = 0;
  // The channels of n values at once: value k is at `first` plus k * `stride`
  // bytes (a run of records); out[k] = Select(value k).
  virtual void SelectEach(const T* first, size_t stride, size_t n, int* out) {
    const char* p = reinterpret_cast<const char*>(first);
    for (size_t k = 0; k < n; ++k) out[k] = Select(*reinterpret_cast<const T*>(p + k * stride));
  }
  virtual bool IsBroadcast() const { return false; }
};

template <typename T>
class ForwardPartitioner final : public Partitioner<T> {
 public:
  int Select(const T&) override { return 0; }
};

template <typename T>
class BroadcastPartitioner final : public Partitioner<T> {
 public:
  int Select(const T&) override { return 0; }
  bool IsBroadcast() const override { return true; }
};

template <typename T>
class RebalancePartitioner final : public Partitioner<T> {
 public:
  RebalancePartitioner(int num_channels, int start)
      : n_(num_channels), next_(start % num_channels) {}
  int Select(const T&) override {
    const int c = next_;
    if (++next_ == n_) next_ = 0;
    return c;
  }

 private:
  int n_;
  int next_;
};

template <typename T, typename KeyFn>
class KeyGroupPartitioner final : public Partitioner<T> {
 public:
  using Key = std::decay_t<std::invoke_result_t<KeyFn&, const T&>>;
  KeyGroupPartitioner(KeyFn key, int num_channels, int max_parallelism)
      : key_(std::move(key)),
        max_p_(max_parallelism),
        mask_((max_parallelism & (max_parallelism - 1)) == 0 ? max_parallelism - 1 : -1),
        owner_(static_cast<size_t>(max_parallelism)) {
    for (int g = 0; g < max_parallelism; ++g)
      owner_[static_cast<size_t>(g)] =
          static_cast<uint16_t>(KeyGroupToSubtask(g, max_parallelism, num_channels));
  }
  // KeyGroupToSubtask(KeyGroupOf(key)) with the owner of each key group
  // precomputed, and a mask instead of the modulo for the usual power-of-two
  // max parallelism (the murmur hash is never negative).
  int Select(const T& value) override { return SelectOne(value); }
  // Key groups for a whole run: one virtual call, the key selector and the
  // hash inlined.
  void SelectEach(const T* first, size_t stride, size_t n, int* out) override {
    const char* p = reinterpret_cast<const char*>(first);
    for (size_t k = 0; k < n; ++k) out[k] = SelectOne(*reinterpret_cast<const T*>(p + k * stride));
  }

 private:
  int SelectOne(const T& value) {
    const int32_t h = FlinkMurmurHash(KeyHash<Key>{}(key_(value)));
    const int group = mask_ >= 0 ? (h & mask_) : h % max_p_;
    return owner_[static_cast<size_t>(group)];
  }

  KeyFn key_;
  int max_p_;
  int mask_;                     // max_p_ - 1 when max_p_ is a power of two, else -1
  std::vector<uint16_t> owner_;  // key group -> subtask (parallelism <= 32768)
};

template <typename T, typename KeyFn, typename PartFn>
class CustomPartitioner final : public Partitioner<T> {
 public:
  CustomPartitioner(KeyFn key, PartFn part, int num_channels)
      : key_(std::move(key)), part_(std::move(part)), n_(num_channels) {}
  int Select(const T& value) override {
    const int c = part_(key_(value), n_);
    if (c < 0 || c >= n_) {
      throw std::out_of_range(
          absl::StrCat("custom partitioner returned channel ", c, ", not in [0, ", n_, ")"));
    }
    return c;
  }

 private:
  KeyFn key_;
  PartFn part_;
  int n_;
};

// Makes the partitioner of one sending subtask.
class PartitionerFactoryBase {
 public:
  virtual ~PartitionerFactoryBase() = default;
};

template <typename T>
class PartitionerFactory : public PartitionerFactoryBase {
 public:
  // (num_channels, sending subtask index, downstream max parallelism)
  using Fn = std::function<std::unique_ptr<Partitioner<T>>(int, int, int)>;
  explicit PartitionerFactory(Fn fn) : fn_(std::move(fn)) {}
  std::unique_ptr<Partitioner<T>> Make(int num_channels, int subtask, int max_parallelism) const {
    return fn_(num_channels, subtask, max_parallelism);
  }

 private:
  Fn fn_;
};

// The partitioner for a strategy that needs no user function.
template <typename T>
std::unique_ptr<Partitioner<T>> MakeBuiltinPartitioner(ShipStrategy s, int num_channels,
                                                       int subtask) {
  switch (s) {
    case ShipStrategy::kForward:
      return std::unique_ptr<Partitioner<T>>(new ForwardPartitioner<T>());
    case ShipStrategy::kBroadcast:
      return std::unique_ptr<Partitioner<T>>(new BroadcastPartitioner<T>());
    default:
      return std::unique_ptr<Partitioner<T>>(new RebalancePartitioner<T>(num_channels, subtask));
  }
}

}  // namespace tidemark::internal

#endif  // TM_PARTITIONING_PARTITIONER_H_
