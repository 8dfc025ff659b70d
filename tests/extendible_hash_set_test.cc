// tests/extendible_hash_set_test.cc
//
// ExtendibleHashSet (operators/window/extendible_hash_set.h): every element
// stays findable through splits, no shard's table grows past the split
// size (which is what keeps each growth step small), Reserve presizes, and a
// hash that gives every element the same top bits does not make the
// directory grow without end.  And TimeWindowTable over it: a window of
// 500 000 keys keeps each key's value and its arrival order.
#include "tidemark/operators/window/extendible_hash_set.h"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "absl/hash/hash.h"
#include "gtest/gtest.h"
#include "tidemark/operators/window/time_window_table.h"

namespace tidemark::internal {
namespace {

// Elements are int64; lookups carry the hash along as TimeWindowTable's do.
struct Lookup {
  int64_t v;
  size_t hash;
};
template <bool kDegenerate>
struct TestHash {
  using is_transparent = void;
  size_t operator()(int64_t v) const {
    // Degenerate: every element has the same top 40 bits.
    return kDegenerate ? absl::Hash<int64_t>{}(v) & ((uint64_t{1} << 24) - 1)
                       : absl::Hash<int64_t>{}(v);
  }
  size_t operator()(const Lookup& l) const { return l.hash; }
};
struct TestEq {
  using is_transparent = void;
  bool operator()(int64_t a, int64_t b) const { return a == b; }
  bool operator()(const Lookup& l, int64_t v) const { return l.v == v; }
  bool operator()(int64_t v, const Lookup& l) const { return l.v == v; }
};

template <bool kDegenerate>
using TestSet = ExtendibleHashSet<int64_t, TestHash<kDegenerate>, TestEq>;

template <bool kDegenerate>
bool Insert(TestSet<kDegenerate>& set, int64_t v) {
  const size_t h = TestHash<kDegenerate>{}(v);
  return set.LazyEmplace(Lookup{v, h}, h, [v](const auto& ctor) { ctor(v); }).second;
}
template <bool kDegenerate>
bool Contains(TestSet<kDegenerate>& set, int64_t v) {
  const size_t h = TestHash<kDegenerate>{}(v);
  bool made = false;
  const int64_t* found = set.LazyEmplace(Lookup{v, h}, h,
                                         [&](const auto& ctor) {
                                           made = true;
                                           ctor(v);
                                         })
                             .first;
  if (made) set.Erase(Lookup{v, h}, h);
  return !made && *found == v;
}

// The largest table a shard may have: the one kSplitSize elements fill at
// most 7/8 of (2^17 - 1 slots).
constexpr size_t kMaxShardCapacity = (size_t{1} << 17) - 1;

TEST(ExtendibleHashSet, EveryElementStaysFindableThroughSplits) {
  TestSet<false> set;
  constexpr int64_t kN = 1'000'000;
  for (int64_t i = 0; i < kN; ++i) ASSERT_TRUE(Insert(set, i * 7 + 3)) << i;
  EXPECT_EQ(set.size(), static_cast<size_t>(kN));
  // Inserting again makes nothing.
  for (int64_t i = 0; i < kN; i += 97) EXPECT_FALSE(Insert(set, i * 7 + 3));
  for (int64_t i = 0; i < kN; ++i) ASSERT_TRUE(Contains(set, i * 7 + 3)) << i;
  EXPECT_FALSE(Contains(set, 1));
  EXPECT_EQ(set.size(), static_cast<size_t>(kN));
  // 1 M elements in shards of at most kSplitSize: at least 11 shards, each
  // table no larger than 2^17 slots, so no growth step moved more than
  // kSplitSize elements.
  EXPECT_GE(set.num_shards(), kN / TestSet<false>::kSplitSize);
  EXPECT_LE(set.capacity(), set.num_shards() * kMaxShardCapacity);
}

TEST(ExtendibleHashSet, SmallSetIsOneShard) {
  TestSet<false> set;
  for (int64_t i = 0; i < 50'000; ++i) Insert(set, i);
  EXPECT_EQ(set.num_shards(), 1u);
  EXPECT_EQ(set.size(), 50'000u);
}

TEST(ExtendibleHashSet, ReservePresizesSoNothingSplitsOnTheWay) {
  TestSet<false> set;
  constexpr size_t kN = 600'000;
  set.Reserve(kN);
  const size_t shards = set.num_shards();
  const size_t capacity = set.capacity();
  EXPECT_GT(shards, 1u);
  for (size_t i = 0; i < kN; ++i) Insert(set, static_cast<int64_t>(i));
  EXPECT_EQ(set.num_shards(), shards);
  EXPECT_EQ(set.capacity(), capacity);
  for (size_t i = 0; i < kN; i += 101) EXPECT_TRUE(Contains(set, static_cast<int64_t>(i)));
}

TEST(ExtendibleHashSet, SameTopBitsStopSplittingAtTheMaximumDepth) {
  TestSet<true> set;
  constexpr int64_t kN = 300'000;
  for (int64_t i = 0; i < kN; ++i) ASSERT_TRUE(Insert(set, i));
  for (int64_t i = 0; i < kN; i += 13) ASSERT_TRUE(Contains(set, i));
  // Every element is in the first shard; splits stopped at kMaxDepth, one
  // new (empty) shard each.
  EXPECT_LE(set.num_shards(), static_cast<size_t>(TestSet<true>::kMaxDepth) + 1);
  EXPECT_EQ(set.size(), static_cast<size_t>(kN));
}

TEST(TimeWindowTable, LargeWindowKeepsValuesAndArrivalOrder) {
  TimeWindowTable<int64_t, int64_t> table;
  const TimeWindow w{0, 1000};
  constexpr int64_t kKeys = 500'000;
  // Keys arrive in a scrambled order, twice each.
  auto key_at = [](int64_t i) { return (i * 7919) % kKeys; };
  for (int round = 0; round < 2; ++round) {
    for (int64_t i = 0; i < kKeys; ++i) {
      const int64_t k = key_at(i);
      auto [v, made] = table.FindOrCreate(k, w, kMinTimestamp, [] { return int64_t{0}; });
      ASSERT_EQ(made, round == 0);
      *v += k + 1;
    }
  }
  EXPECT_EQ(table.size(), static_cast<size_t>(kKeys));
  ASSERT_EQ(table.num_windows(), 1u);
  auto& win = table.begin()->second;
  int64_t i = 0;
  bool in_order = true;
  win.slots.ForEach([&](const auto& slot) {
    in_order = in_order && slot.key == key_at(i) && slot.value == 2 * (slot.key + 1);
    ++i;
  });
  EXPECT_EQ(i, kKeys);
  EXPECT_TRUE(in_order);
  EXPECT_GT(win.index.num_shards(), 1u);
}

// A value whose making throws (a user function) leaves no trace: the key is
// absent afterwards and can be created again.
TEST(TimeWindowTable, ThrowingMakeLeavesNoEntry) {
  TimeWindowTable<int64_t, int64_t> table;
  const TimeWindow w{0, 1000};
  for (int64_t k = 0; k < 100; ++k) table.FindOrCreate(k, w, kMinTimestamp, [] { return 1; });
  EXPECT_THROW(table.FindOrCreate(int64_t{500}, w, kMinTimestamp,
                                  []() -> int64_t { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_EQ(table.size(), 100u);
  auto [v, made] = table.FindOrCreate(int64_t{500}, w, kMinTimestamp, [] { return int64_t{7}; });
  EXPECT_TRUE(made);
  EXPECT_EQ(*v, 7);
  int64_t slots = 0;
  table.begin()->second.slots.ForEach([&](const auto&) { ++slots; });
  EXPECT_EQ(slots, 101);
}

}  // namespace
}  // namespace tidemark::internal
