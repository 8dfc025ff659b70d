// Tests for partitioning/: Java hashCode, Flink's murmur hash, key groups,
// key-group ranges, default max parallelism, and the partitioners.
//
// Expected murmur / key-group values were computed with an independent
// re-implementation of Flink's MathUtils.murmurHash and Java's
// String.hashCode (docs/semantics.md section 8), not with tidemark.
#include "tidemark/partitioning/key_groups.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tidemark/partitioning/partitioner.h"

namespace tidemark {
using namespace internal;
namespace {

TEST(JavaStringHashCode, KnownValues) {
  EXPECT_EQ(JavaStringHashCode(""), 0);
  EXPECT_EQ(JavaStringHashCode("a"), 97);
  EXPECT_EQ(JavaStringHashCode("hello"), 99162322);
  EXPECT_EQ(JavaStringHashCode("Flink"), 67968320);
  EXPECT_EQ(JavaStringHashCode("key-1"), 101943363);
  EXPECT_EQ(JavaStringHashCode("sensor_7"), 1262115058);
  // the classic collision
  EXPECT_EQ(JavaStringHashCode("Aa"), 2112);
  EXPECT_EQ(JavaStringHashCode("BB"), 2112);
  // overflow wraps like Java's int
  EXPECT_EQ(JavaStringHashCode("polygenelubricants"), INT32_MIN);
}

TEST(JavaStringHashCode, NonAscii) {
  EXPECT_EQ(JavaStringHashCode("\xC3\xA9"), 233);                     // é, U+00E9
  EXPECT_EQ(JavaStringHashCode("\xE6\x97\xA5\xE6\x9C\xAC"), 835047);  // 日本
  // U+1F600 is the surrogate pair D83D DE00 in UTF-16
  EXPECT_EQ(JavaStringHashCode("\xF0\x9F\x98\x80"), 0xD83D * 31 + 0xDE00);
  EXPECT_EQ(JavaStringHashCode("\xF0\x9F\x98\x80"), 1772899);
  EXPECT_EQ(JavaStringHashCode("a\xF0\x9F\x98\x80"
                               "b"),
            57849694);
  // a malformed byte counts as U+FFFD
  EXPECT_EQ(JavaStringHashCode("\xFF"), 0xFFFD);
  EXPECT_EQ(JavaStringHashCode("a\x80"), 97 * 31 + 0xFFFD);
}

TEST(KeyHash, JavaHashCodesOfBoxedTypes) {
  EXPECT_EQ(KeyHash<int>{}(42), 42);
  EXPECT_EQ(KeyHash<int>{}(-7), -7);
  EXPECT_EQ(KeyHash<int16_t>{}(static_cast<int16_t>(-3)), -3);
  EXPECT_EQ(KeyHash<bool>{}(true), 1231);
  EXPECT_EQ(KeyHash<bool>{}(false), 1237);
  // Long.hashCode = (int)(v ^ (v >>> 32))
  EXPECT_EQ(KeyHash<int64_t>{}(0), 0);
  EXPECT_EQ(KeyHash<int64_t>{}(1), 1);
  EXPECT_EQ(KeyHash<int64_t>{}(-1), 0);
  EXPECT_EQ(KeyHash<int64_t>{}(int64_t{1} << 32), 1);
  EXPECT_EQ(KeyHash<int64_t>{}((int64_t{1} << 40) + 5), 261);
  EXPECT_EQ(KeyHash<int64_t>{}(1538359894000), 761601686);
  EXPECT_EQ(KeyHash<std::string>{}("hello"), 99162322);
  EXPECT_EQ(KeyHash<std::string_view>{}("hello"), 99162322);
}

TEST(FlinkMurmurHash, KnownValues) {
  EXPECT_EQ(FlinkMurmurHash(0), 593689054);
  EXPECT_EQ(FlinkMurmurHash(1), 68075478);
  EXPECT_EQ(FlinkMurmurHash(2), 1085422463);
  EXPECT_EQ(FlinkMurmurHash(42), 1134849565);
  EXPECT_EQ(FlinkMurmurHash(-1), 1982413648);
  EXPECT_EQ(FlinkMurmurHash(INT32_MAX), 1653689534);
  EXPECT_EQ(FlinkMurmurHash(INT32_MIN), 1718298732);
  EXPECT_EQ(FlinkMurmurHash(99162322), 1715862179);  // "hello"
}

TEST(FlinkMurmurHash, IntMinResultBecomesZero) {
  // The only input whose mixed value is Integer.MIN_VALUE (found by an
  // exhaustive search over all 2^32 inputs): Java maps it to 0.
  EXPECT_EQ(FlinkMurmurHash(-2089875627), 0);
  EXPECT_EQ(ComputeKeyGroup(-2089875627, 128), 0);
}

TEST(FlinkMurmurHash, NeverNegative) {
  for (int64_t i = -200000; i <= 200000; i += 7) {
    ASSERT_GE(FlinkMurmurHash(static_cast<int32_t>(i * 10007)), 0);
  }
}

TEST(KeyGroups, KnownKeyGroupsAndSubtasks) {
  struct Case {
    std::string key;
    int group128;
    int subtask_p4;
    int subtask_p3;
  };
  const std::vector<Case> cases = {
      {"hello", 35, 1, 0},    {"", 94, 2, 2},
      {"a", 81, 2, 1},        {"Aa", 108, 3, 2},
      {"BB", 108, 3, 2},      {"Flink", 127, 3, 2},
      {"key-1", 54, 1, 1},    {"sensor_7", 96, 3, 2},
      {"\xC3\xA9", 30, 0, 0}, {"\xF0\x9F\x98\x80", 54, 1, 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(KeyGroupOf(c.key, 128), c.group128) << c.key;
    EXPECT_EQ(SubtaskForKey(c.key, 128, 4), c.subtask_p4) << c.key;
    EXPECT_EQ(SubtaskForKey(c.key, 128, 3), c.subtask_p3) << c.key;
  }
  EXPECT_EQ(KeyGroupOf(0, 128), 94);
  EXPECT_EQ(KeyGroupOf(1, 128), 86);
  EXPECT_EQ(KeyGroupOf(42, 128), 29);
  EXPECT_EQ(KeyGroupOf(-7, 128), 33);
  EXPECT_EQ(SubtaskForKey(42, 128, 4), 0);
  EXPECT_EQ(KeyGroupOf(int64_t{1538359894000}, 128), 0);
  EXPECT_EQ(ComputeKeyGroup(99162322, 128), 1715862179 % 128);
  EXPECT_EQ(ComputeKeyGroup(99162322, 1000), 1715862179 % 1000);
}

TEST(KeyGroups, SubtaskOfKeyGroup) {
  // keyGroup * p / maxP
  EXPECT_EQ(KeyGroupToSubtask(0, 128, 4), 0);
  EXPECT_EQ(KeyGroupToSubtask(31, 128, 4), 0);
  EXPECT_EQ(KeyGroupToSubtask(32, 128, 4), 1);
  EXPECT_EQ(KeyGroupToSubtask(127, 128, 4), 3);
  EXPECT_EQ(KeyGroupToSubtask(42, 128, 3), 0);
  EXPECT_EQ(KeyGroupToSubtask(43, 128, 3), 1);
  EXPECT_EQ(KeyGroupToSubtask(85, 128, 3), 1);
  EXPECT_EQ(KeyGroupToSubtask(86, 128, 3), 2);
  // no overflow near the upper bound
  EXPECT_EQ(KeyGroupToSubtask(32767, 32768, 32768), 32767);
}

TEST(KeyGroups, RangesAreContiguousCoverAllAndMatchTheMapping) {
  for (int max_p : {1, 2, 7, 128, 256, 1000, 32768}) {
    for (int p : {1, 2, 3, 4, 5, 7, 8, 13, 85, 86, 128}) {
      if (p > max_p) continue;
      int expected_start = 0;
      for (int s = 0; s < p; ++s) {
        const int start = KeyGroupRangeStart(s, max_p, p);
        const int end = KeyGroupRangeEnd(s, max_p, p);
        ASSERT_EQ(start, expected_start) << "maxP=" << max_p << " p=" << p << " s=" << s;
        ASSERT_LE(start, end) << "every subtask owns at least one key group";
        // sizes differ by at most one
        ASSERT_LE(end - start + 1, (max_p + p - 1) / p);
        ASSERT_GE(end - start + 1, max_p / p);
        if (max_p <= 1000) {
          for (int g = start; g <= end; ++g) ASSERT_EQ(KeyGroupToSubtask(g, max_p, p), s);
        } else {
          ASSERT_EQ(KeyGroupToSubtask(start, max_p, p), s);
          ASSERT_EQ(KeyGroupToSubtask(end, max_p, p), s);
        }
        expected_start = end + 1;
      }
      ASSERT_EQ(expected_start, max_p) << "ranges cover every key group";
    }
  }
  // Flink's example: maxP 128, p 3 -> [0,42], [43,85], [86,127]
  EXPECT_EQ(KeyGroupRangeStart(0, 128, 3), 0);
  EXPECT_EQ(KeyGroupRangeEnd(0, 128, 3), 42);
  EXPECT_EQ(KeyGroupRangeStart(1, 128, 3), 43);
  EXPECT_EQ(KeyGroupRangeEnd(1, 128, 3), 85);
  EXPECT_EQ(KeyGroupRangeStart(2, 128, 3), 86);
  EXPECT_EQ(KeyGroupRangeEnd(2, 128, 3), 127);
}

// Rescaling: the old subtasks whose state a new subtask restores are exactly
// those owning one of its key groups, checked key group by key group.
TEST(KeyGroups, OverlappingSubtasksAreTheOldOwnersOfTheNewRange) {
  for (int max_p : {1, 2, 7, 128, 300}) {
    for (int p = 1; p <= 12 && p <= max_p; ++p) {
      for (int old_p = 1; old_p <= 12 && old_p <= max_p; ++old_p) {
        std::vector<int> old_count(static_cast<size_t>(old_p), 0);
        for (int s = 0; s < p; ++s) {
          std::set<int> owners;
          for (int g = KeyGroupRangeStart(s, max_p, p); g <= KeyGroupRangeEnd(s, max_p, p); ++g)
            owners.insert(KeyGroupToSubtask(g, max_p, old_p));
          const std::vector<int> got = OverlappingSubtasks(s, p, old_p, max_p);
          ASSERT_EQ(got, std::vector<int>(owners.begin(), owners.end()))
              << "maxP=" << max_p << " p=" << p << " old p=" << old_p << " s=" << s;
          for (int k : got) ++old_count[static_cast<size_t>(k)];
        }
        // Every old state is restored somewhere.
        for (int k = 0; k < old_p; ++k) ASSERT_GE(old_count[static_cast<size_t>(k)], 1);
      }
    }
  }
  // maxP 128: old p 2 owns [0,63], [64,127]; new p 3 owns [0,42], [43,85],
  // [86,127].
  EXPECT_EQ(OverlappingSubtasks(0, 3, 2, 128), std::vector<int>({0}));
  EXPECT_EQ(OverlappingSubtasks(1, 3, 2, 128), std::vector<int>({0, 1}));
  EXPECT_EQ(OverlappingSubtasks(2, 3, 2, 128), std::vector<int>({1}));
  // 3 -> 1: everything; same parallelism: itself.
  EXPECT_EQ(OverlappingSubtasks(0, 1, 3, 128), std::vector<int>({0, 1, 2}));
  for (int s = 0; s < 5; ++s) EXPECT_EQ(OverlappingSubtasks(s, 5, 5, 128), std::vector<int>({s}));
}

TEST(KeyGroups, DefaultMaxParallelism) {
  EXPECT_EQ(DefaultMaxParallelism(1), 128);
  EXPECT_EQ(DefaultMaxParallelism(4), 128);
  EXPECT_EQ(DefaultMaxParallelism(85), 128);
  EXPECT_EQ(DefaultMaxParallelism(86), 256);
  EXPECT_EQ(DefaultMaxParallelism(170), 256);
  EXPECT_EQ(DefaultMaxParallelism(171), 256);
  EXPECT_EQ(DefaultMaxParallelism(172), 512);
  EXPECT_EQ(DefaultMaxParallelism(20000), 32768);
  EXPECT_EQ(DefaultMaxParallelism(32768), 32768);
  EXPECT_EQ(kDefaultMaxParallelism, 128);
  EXPECT_EQ(kUpperBoundMaxParallelism, 32768);
}

TEST(KeyGroups, ValidateParallelism) {
  EXPECT_TRUE(ValidateParallelism(1, 128).ok());
  EXPECT_TRUE(ValidateParallelism(128, 128).ok());
  EXPECT_TRUE(ValidateParallelism(32768, 32768).ok());
  EXPECT_EQ(ValidateParallelism(129, 128).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateParallelism(0, 128).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateParallelism(1, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateParallelism(1, 32769).code(), absl::StatusCode::kInvalidArgument);
}

TEST(KeyGroups, StableAndSpreadAcrossSubtasks) {
  // The same key always maps to the same subtask; 10 000 keys spread over
  // every subtask, roughly evenly.
  for (int p : {2, 3, 4, 8}) {
    std::vector<int> counts(p, 0);
    for (int i = 0; i < 10000; ++i) {
      const std::string key = "key-" + std::to_string(i);
      const int s = SubtaskForKey(key, 128, p);
      ASSERT_GE(s, 0);
      ASSERT_LT(s, p);
      ASSERT_EQ(s, SubtaskForKey(std::string(key), 128, p));
      ++counts[s];
    }
    for (int s = 0; s < p; ++s) {
      EXPECT_GT(counts[s], 10000 / p / 2) << "p=" << p << " subtask " << s;
      EXPECT_LT(counts[s], 10000 / p * 2) << "p=" << p << " subtask " << s;
    }
  }
  // integer keys too, and every key group is used by some key
  std::set<int> groups;
  for (int i = 0; i < 10000; ++i) groups.insert(KeyGroupOf(i, 128));
  EXPECT_EQ(groups.size(), 128u);
}

// Key types other than strings and integers, and the compile-time rejection
// of types with no Java-compatible hashCode: tests/java_key_hash_test.cc and
// the key_hash_rejects_* tests.

TEST(Partitioner, KeyGroupPartitionerMatchesSubtaskForKey) {
  auto key = [](const std::pair<std::string, int>& v) { return v.first; };
  KeyGroupPartitioner<std::pair<std::string, int>, decltype(key)> part(key, 5, 128);
  for (int i = 0; i < 1000; ++i) {
    std::pair<std::string, int> v{"k" + std::to_string(i), i};
    EXPECT_EQ(part.Select(v), SubtaskForKey(v.first, 128, 5));
  }
  EXPECT_FALSE(part.IsBroadcast());
}

TEST(Partitioner, RebalanceIsRoundRobinFromOwnIndex) {
  RebalancePartitioner<int> p(3, 1);
  std::vector<int> got;
  for (int i = 0; i < 7; ++i) got.push_back(p.Select(i));
  EXPECT_EQ(got, (std::vector<int>{1, 2, 0, 1, 2, 0, 1}));
  RebalancePartitioner<int> q(3, 5);  // start taken modulo the channels
  EXPECT_EQ(q.Select(0), 2);
  EXPECT_EQ(q.Select(0), 0);
  auto made = MakeBuiltinPartitioner<int>(ShipStrategy::kRebalance, 4, 2);
  EXPECT_EQ(made->Select(0), 2);
  EXPECT_EQ(made->Select(0), 3);
  EXPECT_EQ(made->Select(0), 0);
}

TEST(Partitioner, BroadcastAndForward) {
  auto b = MakeBuiltinPartitioner<int>(ShipStrategy::kBroadcast, 4, 0);
  EXPECT_TRUE(b->IsBroadcast());
  auto f = MakeBuiltinPartitioner<int>(ShipStrategy::kForward, 1, 3);
  EXPECT_FALSE(f->IsBroadcast());
  EXPECT_EQ(f->Select(17), 0);
}

TEST(Partitioner, CustomPartitionerCallsUserFunctionAndChecksRange) {
  auto key = [](const int& v) { return v; };
  auto part = [](int k, int n) { return k % n; };
  CustomPartitioner<int, decltype(key), decltype(part)> p(key, part, 4);
  EXPECT_EQ(p.Select(9), 1);
  EXPECT_EQ(p.Select(12), 0);
  auto bad = [](int k, int) { return k; };
  CustomPartitioner<int, decltype(key), decltype(bad)> q(key, bad, 4);
  EXPECT_EQ(q.Select(3), 3);
  EXPECT_THROW(q.Select(4), std::out_of_range);
  EXPECT_THROW(q.Select(-1), std::out_of_range);
}

TEST(Partitioner, ShipStrategyNames) {
  EXPECT_STREQ(ToString(ShipStrategy::kForward), "FORWARD");
  EXPECT_STREQ(ToString(ShipStrategy::kRebalance), "REBALANCE");
  EXPECT_STREQ(ToString(ShipStrategy::kBroadcast), "BROADCAST");
  EXPECT_STREQ(ToString(ShipStrategy::kKeyGroups), "HASH");
  EXPECT_STREQ(ToString(ShipStrategy::kCustom), "CUSTOM");
}

}  // namespace
}  // namespace tidemark
