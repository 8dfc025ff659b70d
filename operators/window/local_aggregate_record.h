// operators/window/local_aggregate_record.h
//
// LocalAggregateRecord: what crosses the key_by shuffle of a window
// aggregate with local pre-aggregation (local_aggregate_operator.h), and its
// codec.  Apart so that window_operator_base.h can route a late one to the
// late side output as the record it carries.
#ifndef TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_RECORD_H_
#define TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_RECORD_H_

#include <type_traits>
#include <utility>
#include <variant>

#include "tidemark/runtime/state/state_codec.h"

namespace tidemark {

// What crosses the shuffle of a locally pre-aggregated window aggregate: a
// record passed alone (index 0) or a key's partial accumulator (index 1).
template <typename T, typename K, typename Acc>
struct LocalAggregateRecord {
  using Record = T;
  std::variant<T, std::pair<K, Acc>> value;
  bool partial() const { return value.index() == 1; }
};

template <typename T, typename K, typename Acc>
struct StateCodec<LocalAggregateRecord<T, K, Acc>> {
  static void Encode(internal::StateWriter& w, const LocalAggregateRecord<T, K, Acc>& r) {
    internal::Encode(w, r.value);
  }
  static LocalAggregateRecord<T, K, Acc> Decode(internal::StateReader& r) {
    return {internal::Decode<std::variant<T, std::pair<K, Acc>>>(r)};
  }
};

namespace internal {
template <typename T, typename K, typename Acc>
struct HasStateCodecTrait<LocalAggregateRecord<T, K, Acc>>
    : std::bool_constant<HasStateCodec<T> && HasStateCodec<K> && HasStateCodec<Acc>> {};

template <typename T>
struct IsLocalAggregateRecord : std::false_type {};
template <typename T, typename K, typename Acc>
struct IsLocalAggregateRecord<LocalAggregateRecord<T, K, Acc>> : std::true_type {};
// What a window's late side output carries for input records of type T:
// T, or behind local aggregation the record a partial was made from.
template <typename T>
struct LateRecordOf {
  using type = T;
};
template <typename T, typename K, typename Acc>
struct LateRecordOf<LocalAggregateRecord<T, K, Acc>> {
  using type = T;
};

}  // namespace internal
}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_LOCAL_AGGREGATE_RECORD_H_
