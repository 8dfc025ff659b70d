// runtime/core/stream_element.h
//
// What flows through a channel: batches.  A Batch<T> holds the records in
// arrival order plus the control elements (watermarks, watermark status
// changes, end of input, checkpoint barriers) interleaved with them.  Controls are rare, records
// are many, so records live in one contiguous vector and each control names the position (the
// number of records of this batch that precede it).  A consumer replays the batch in exactly the
// order the producer wrote it.
//
// One synchronisation per batch, none per record: a producer fills a batch
// privately and hands it over whole (see channel.h).
#ifndef TM_RUNTIME_STREAM_ELEMENT_H_
#define TM_RUNTIME_STREAM_ELEMENT_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "tidemark/runtime/core/time.h"

namespace tidemark::internal {

template <typename T>
struct Record {
  T value;
  Timestamp timestamp = kNoTimestamp;
};

// Appends a record to a batch, its value moved straight into the batch's
// slot: push_back(Record<T>{...}) moves the value twice (into the temporary,
// then into the slot) and destroys the temporary, which for a variant or a
// struct of strings costs a visit or a few stores per record on the hot
// paths (source runs, channel batches).  C++20's parenthesised aggregate
// initialisation does it in one; compilers without it (clang before 16) take
// the temporary.
template <typename T, typename U>
inline void AppendRecord(std::vector<Record<T>>& records, U&& value, Timestamp ts) {
#if defined(__cpp_aggregate_paren_init) && __cpp_aggregate_paren_init >= 201902L
  records.emplace_back(std::forward<U>(value), ts);
#else
  records.push_back(Record<T>{std::forward<U>(value), ts});
#endif
}

// A type that nothing converts to or from, for AppendMadeRecord's check.
struct NotAValue {};

// Appends the record whose value make() returns, built straight in the
// batch's slot: the conversion below hands make()'s result (a prvalue) to the
// slot's initialisation, so the value is neither a temporary nor moved.
// A T with a constructor that takes any argument (std::any, a forwarding
// template) would take the converter itself instead, so such a T, and
// compilers without parenthesised aggregate initialisation, move the value
// once.
template <typename T, typename Make>
inline void AppendMadeRecord(std::vector<Record<T>>& records, Make& make, Timestamp ts) {
#if defined(__cpp_aggregate_paren_init) && __cpp_aggregate_paren_init >= 201902L
  if constexpr (!std::is_constructible_v<T, NotAValue>) {
    struct Made {
      Make& make;
      operator T() const { return make(); }  // NOLINT: the point is the implicit conversion
    };
    records.emplace_back(Made{make}, ts);
    return;
  }
#endif
  AppendRecord(records, make(), ts);
}

enum class ControlKind : uint8_t {
  kWatermark,   // value = the watermark
  kStatus,      // value = WatermarkStatus (0 active, 1 idle)
  kEndOfInput,  // the producer will send nothing more on this channel
  kBarrier,     // value = checkpoint id: a checkpoint barrier (checkpoint_barrier.h)
  // A generalized watermark (runtime/core/generalized_watermark.h): tag = the
  // declaration's id in this process, value = the long (a bool: 0 or 1).
  kGeneralized,
};

struct Control {
  uint32_t position;  // number of records of the batch before this control
  ControlKind kind;
  // kGeneralized: the declaration's id; kBarrier: kUnalignedBarrier for the
  // in-band marker of an unaligned checkpoint's barrier, else 0 (in the
  // padding).
  uint16_t tag;
  Timestamp value;
};
// A kBarrier control's tag: the barrier of an unaligned checkpoint (its
// in-band marker; the barrier itself went ahead on the channel's priority
// lane, channel.h).  0: an aligned barrier.
inline constexpr uint16_t kUnalignedBarrier = 1;
// The tag lives in what was padding: a control is as small as before.
static_assert(sizeof(Control) == 16);

// The part of a batch that does not depend on the record type, so that the
// channels and the control path are not templates (channel.cc).
struct BatchBase {
  virtual ~BatchBase() = default;
  // Batch<T>'s records.size() and clear(), for the code that does not know T
  // (the writers' and gates' cores; not on the per-record path).
  virtual size_t NumRecords() const = 0;
  virtual void Clear() = 0;
  std::vector<Control> controls;  // ascending positions
};

template <typename T>
struct Batch final : BatchBase {
  std::vector<Record<T>> records;

  bool empty() const { return records.empty() && controls.empty(); }
  void clear() {
    records.clear();
    controls.clear();
  }
  size_t NumRecords() const override { return records.size(); }
  void Clear() override { clear(); }
  void AddControl(ControlKind kind, Timestamp value, uint16_t tag = 0) {
    controls.push_back(Control{static_cast<uint32_t>(records.size()), kind, tag, value});
  }
};

}  // namespace tidemark::internal

#endif  // TM_RUNTIME_STREAM_ELEMENT_H_
