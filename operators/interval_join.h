// operators/interval_join.h
//
// The interval join (Flink's IntervalJoinOperator), behind
//   left.key_by(k1).interval_join(right.key_by(k2)).between(lower, upper).process(f)
// (api/connected_streams.h).  For every key, a left record at time l and a
// right record at time r are joined when
//   l + lower <= r <= l + upper
// (each bound exclusive on request: lower_bound_exclusive() makes it
// l + lower < r, by moving the bound by one millisecond as Flink does).  Both
// inputs are keyed by the same key type; the operator is a two-input keyed
// operator on the combined watermark (runtime/io/detail/input_gate.h).
//
// Flink's rules, one by one:
//   * a record without a timestamp fails the job (interval joins need event
//     time);
//   * a record is late when the operator's watermark has started (is not
//     MIN) and its timestamp is below it; a late record is not joined and
//     goes to the left (right) late side output when one is set, else it is
//     dropped and counted in the subtask counter "numLateRecordsDropped";
//   * otherwise it is buffered under its key and timestamp, and joined with
//     every buffered record of the other side whose timestamp is in range,
//     the other side's buckets in timestamp order, a bucket's records in
//     arrival order; f(left, right, ctx, out) is called for each pair, and
//     its output is timestamped max(l, r) (ctx.left_timestamp(),
//     ctx.right_timestamp(), ctx.timestamp());
//   * cleanup: a left record at l is kept until the watermark reaches
//     l + upper (l when upper <= 0), a right record at r until r - lower (r
//     when lower >= 0): after that no record of the other side can join it
//     without being late.  An event-time timer per (key, side, time) drops
//     the whole bucket.
// f may also be a function (const L&, const R&, Collector<Out>&).
//
// Checkpoints: both buffers and the cleanup timers, by key group.
//
// Thread safety: one task thread per operator instance.
#ifndef TM_OPERATORS_INTERVAL_JOIN_H_
#define TM_OPERATORS_INTERVAL_JOIN_H_

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/operators/basic.h"
#include "tidemark/operators/co_process.h"
#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/window/window_operator_base.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark {

// What the join function sees of the pair.
class ProcessJoinContext {
 public:
  explicit ProcessJoinContext(const std::map<std::string, internal::OutputBase*>* side_outputs)
      : side_outputs_(side_outputs) {}
  Timestamp left_timestamp() const { return left_; }
  Timestamp right_timestamp() const { return right_; }
  // The pair's: max(left, right).
  Timestamp timestamp() const { return std::max(left_, right_); }
  template <typename V>
  void output(const OutputTag<V>& tag, std::type_identity_t<V> value) {
    auto it = side_outputs_->find(tag.id());
    if (it == side_outputs_->end()) return;
    internal::SideOutputAs<V>(it->second, tag.id())->Collect(std::move(value), timestamp());
  }

  // --- for the operator ---
  void Set(Timestamp left, Timestamp right) {
    left_ = left;
    right_ = right;
  }

 private:
  const std::map<std::string, internal::OutputBase*>* side_outputs_;
  Timestamp left_ = kNoTimestamp;
  Timestamp right_ = kNoTimestamp;
};

// Base class for join functions (optional: any object with the same member,
// or a (const L&, const R&, Collector<Out>&) function, works).
template <typename L, typename R, typename Out>
class ProcessJoinFunction {
 public:
  using OutputType = Out;
  using Context = ProcessJoinContext;
  virtual ~ProcessJoinFunction() = default;
  virtual void process_element(const L& left, const R& right, Context& ctx,
                               Collector<Out>& out) = 0;
};

namespace internal {

// The bounds as given, and whether each is inclusive.
struct IntervalJoinBounds {
  Timestamp lower = 0;
  Timestamp upper = 0;
  bool lower_inclusive = true;
  bool upper_inclusive = true;
};

// Which side a cleanup timer drops.
enum class JoinSide : int32_t { kLeft = 0, kRight = 1 };

template <typename L, typename R, typename K, typename KeyFn1, typename KeyFn2, typename F,
          typename Out>
class IntervalJoinOperator final
    : public KeyedOperator<
          BatchedTwoInputOperator<IntervalJoinOperator<L, R, K, KeyFn1, KeyFn2, F, Out>, L, R, Out>,
          K, int32_t> {
  using Base = KeyedOperator<BatchedTwoInputOperator<IntervalJoinOperator, L, R, Out>, K, int32_t>;

 public:
  using Bounds = IntervalJoinBounds;
  IntervalJoinOperator(KeyFn1 k1, KeyFn2 k2, F f, Bounds b, std::string left_late,
                       std::string right_late)
      : key1_(std::move(k1)),
        key2_(std::move(k2)),
        f_(std::move(f)),
        lower_(b.lower_inclusive ? b.lower : b.lower + 1),
        upper_(b.upper_inclusive ? b.upper : b.upper - 1),
        left_late_(std::move(left_late)),
        right_late_(std::move(right_late)) {}

  void Open(OperatorContext& ctx) override {
    OperatorBase::Open(ctx);
    collector_.emplace(&this->output());
    jctx_.emplace(&this->side_outputs_);
    left_ = &state_.template Table<Buffer<L>>("left-buffer");
    right_ = &state_.template Table<Buffer<R>>("right-buffer");
    dropped_ = ctx.counter(kNumLateRecordsDropped);
    timers_.Init(
        &ctx.timers(),
        [this](const K& key, const int32_t& side, Timestamp t) { Cleanup(key, side, t); },
        [](const K&, const int32_t&, Timestamp) {});
    OpenFunction(f_, ctx);
  }
  void Close() override { CloseFunction(f_); }

  void ProcessElement1(L&& v, Timestamp ts) override {
    const K key = key1_(static_cast<const L&>(v));
    Join<true>(key, std::move(v), ts, *left_, *right_, lower_, upper_);
  }
  void ProcessElement2(R&& v, Timestamp ts) override {
    const K key = key2_(static_cast<const R&>(v));
    Join<false>(key, std::move(v), ts, *right_, *left_, SatNeg(upper_), SatNeg(lower_));
  }
  // Watermarks (cleanup timers fire first) and checkpoints: KeyedOperator's.

  // For tests: the records buffered on each side.
  size_t buffered_left() const { return Count(*left_); }
  size_t buffered_right() const { return Count(*right_); }

 private:
  // Per key: timestamp -> the records of that time, in arrival order.
  template <typename T>
  using Buffer = std::map<Timestamp, std::vector<T>>;
  template <typename T>
  using Table = StateTable<K, VoidNamespace, Buffer<T>>;

  template <typename T>
  static size_t Count(const Table<T>& t) {
    size_t n = 0;
    for (const auto& [k, buf] : t.map)
      for (const auto& [ts, v] : buf) n += v.size();
    return n;
  }

  // `rel_lower` / `rel_upper`: the other side's range relative to this
  // record's time.
  template <bool kLeft, typename Ours, typename Others>
  void Join(const K& key, Ours&& value, Timestamp ts, Table<Ours>& ours, Table<Others>& others,
            Timestamp rel_lower, Timestamp rel_upper) {
    if (ts == kNoTimestamp) {
      throw std::runtime_error(
          "interval join: a record without a timestamp (interval joins need event time: assign "
          "timestamps and watermarks to both inputs)");
    }
    const Timestamp wm = timers_.current_watermark();
    if (wm != kMinTimestamp && ts < wm) {
      const std::string& tag = kLeft ? left_late_ : right_late_;
      OutputBase* side = tag.empty() ? nullptr : this->FindSideOutput(tag);
      if (side != nullptr) {
        SideOutputAs<Ours>(side, tag)->Collect(std::move(value), ts);
      } else {
        dropped_->Inc();
      }
      return;
    }
    Buffer<Ours>& mine = ours.map[key];
    std::vector<Ours>& bucket = mine[ts];
    bucket.push_back(std::move(value));
    const Ours& v = bucket.back();
    if (Buffer<Others>* theirs = others.Find(key, kVoidNamespace)) {
      // Saturating: bounds near the ends of time do not wrap.
      const Timestamp from = SatAdd(ts, rel_lower), to = SatAdd(ts, rel_upper);
      for (auto it = theirs->lower_bound(from); it != theirs->end() && it->first <= to; ++it) {
        for (const Others& o : it->second) {
          if constexpr (kLeft) {
            Emit(v, o, ts, it->first);
          } else {
            Emit(o, v, it->first, ts);
          }
        }
      }
    }
    const Timestamp cleanup = rel_upper > 0 ? SatAdd(ts, rel_upper) : ts;
    timers_.RegisterEventTimeTimer(
        key, static_cast<int32_t>(kLeft ? JoinSide::kLeft : JoinSide::kRight), cleanup);
  }

  void Emit(const L& l, const R& r, Timestamp lt, Timestamp rt) {
    jctx_->Set(lt, rt);
    collector_->set_timestamp(std::max(lt, rt));
    if constexpr (requires { f_.process_element(l, r, *jctx_, *collector_); }) {
      f_.process_element(l, r, *jctx_, *collector_);
    } else if constexpr (requires { f_(l, r, *jctx_, *collector_); }) {
      f_(l, r, *jctx_, *collector_);
    } else {
      f_(l, r, *collector_);
    }
  }

  // A cleanup timer at t drops every record of its side whose cleanup time
  // (Join: ts + rel_upper, saturated at MAX, or ts) is at most t.  In the
  // range where nothing saturates that is the one time t - rel_upper (the
  // earlier ones had their timers first), as Flink drops it; a time that
  // saturated at MAX cannot be undone by a subtraction, so at MAX every
  // record goes (none can join after the last watermark but one at MAX).
  void Cleanup(const K& key, int32_t side, Timestamp t) {
    const bool left = side == static_cast<int32_t>(JoinSide::kLeft);
    const Timestamp rel_upper = left ? upper_ : SatNeg(lower_);
    Timestamp last = t;
    if (t == kMaxTimestamp) {
      last = kMaxTimestamp;
    } else if (rel_upper > 0 && __builtin_sub_overflow(t, rel_upper, &last)) {
      return;  // below MIN: no record's cleanup time
    }
    if (left) {
      DropUpTo(*left_, key, last);
    } else {
      DropUpTo(*right_, key, last);
    }
  }
  template <typename T>
  static void DropUpTo(Table<T>& table, const K& key, Timestamp last) {
    Buffer<T>* buf = table.Find(key, kVoidNamespace);
    if (buf == nullptr) return;
    buf->erase(buf->begin(), buf->upper_bound(last));
    if (buf->empty()) table.Erase(key, kVoidNamespace);
  }
  static Timestamp SatAdd(Timestamp a, Timestamp b) {
    Timestamp r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMaxTimestamp : kMinTimestamp;
    return r;
  }
  // -x, with -MIN saturated at MAX (Java's -Long.MIN_VALUE wraps to MIN and
  // gives the right side an empty range: Flink then joins no right record
  // with earlier left ones under between(MIN, x)).
  static Timestamp SatNeg(Timestamp x) { return x == kMinTimestamp ? kMaxTimestamp : -x; }

  KeyFn1 key1_;
  KeyFn2 key2_;
  F f_;
  Timestamp lower_;
  Timestamp upper_;
  std::string left_late_;
  std::string right_late_;
  using Base::state_;
  using Base::timers_;
  Table<L>* left_ = nullptr;
  Table<R>* right_ = nullptr;
  Counter* dropped_ = nullptr;
  std::optional<ProcessJoinContext> jctx_;
  std::optional<Collector<Out>> collector_;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_INTERVAL_JOIN_H_
