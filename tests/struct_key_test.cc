// A key type of one's own (README, "Custom key types"): the struct below is
// the README's example, verbatim.  It keys a windowed job, lands on the key
// group Flink gives the Java key whose hashCode() JavaHashCode returns, and
// counts as two keys only when operator== says so.  What happens when one of
// the three functions is missing is tests/compile_fail/key_type_rejects.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/api/windowed_stream.h"
#include "tidemark/tidemark.h"

namespace user {
// --- README example begins ---
// The Flink job keys by a POJO Cell(x, y) whose hashCode() is
// java.util.Objects.hash(x, y).
struct Cell {
  int32_t x = 0;
  int32_t y = 0;
  bool operator==(const Cell&) const = default;  // equal keys
  template <typename H>
  friend H AbslHashValue(H h, const Cell& c) {  // tidemark's own hash tables
    return H::combine(std::move(h), c.x, c.y);
  }
  friend int32_t JavaHashCode(const Cell& c) {  // Objects.hash(x, y): the key group
    uint32_t h = 1;                             // (Java int arithmetic wraps)
    h = 31 * h + static_cast<uint32_t>(c.x);
    h = 31 * h + static_cast<uint32_t>(c.y);
    return static_cast<int32_t>(h);
  }
};
// --- README example ends ---
}  // namespace user

namespace tidemark {
namespace {

using user::Cell;

struct Reading {
  Cell cell;
  int64_t ts = 0;
  int64_t v = 0;
};

TEST(StructKeyTest, JavaHashCodeDecidesTheKeyGroup) {
  // Objects.hash(1, 2) = 31 * (31 * 1 + 1) + 2 = 994, as Integer 994 hashes.
  EXPECT_EQ(JavaHashCode(Cell{1, 2}), 994);
  EXPECT_EQ(KeyGroupOf(Cell{1, 2}, 128), KeyGroupOf(int32_t{994}, 128));
  EXPECT_EQ(JavaHashCode(Cell{-5, 2147483647}), -2147482843);
}

TEST(StructKeyTest, WindowsPerCellOnTheSubtaskFlinkChooses) {
  StreamExecutionEnvironment env;
  env.set_parallelism(3);
  std::vector<Reading> in;
  for (int i = 0; i < 60; ++i) in.push_back({Cell{i % 3, i % 2}, i * 100, i});
  auto sums =
      env.from_collection(in)
          .assign_timestamps_and_watermarks(
              WatermarkStrategy<Reading>::for_monotonous_timestamps().with_timestamp_assigner(
                  [](const Reading& r, Timestamp) { return r.ts; }))
          .key_by([](const Reading& r) { return r.cell; })
          .window(TumblingEventTimeWindows::of(Duration(10000)))
          .process([](const Cell& key, const TimeWindow&, const std::vector<Reading>& rs,
                      WindowContext& ctx, Collector<std::string>& out) {
            int64_t sum = 0;
            for (const Reading& r : rs) sum += r.v;
            out.collect(std::to_string(key.x) + "," + std::to_string(key.y) + ":" +
                        std::to_string(sum) + "@" + std::to_string(ctx.subtask_index()));
          });
  auto got = sums.collect();
  ASSERT_TRUE(env.execute("struct key").ok());
  std::vector<std::string> lines;
  for (const auto& item : got->items()) lines.push_back(item.value);
  std::sort(lines.begin(), lines.end());
  std::vector<std::string> expected;
  for (int x = 0; x < 3; ++x) {
    for (int y = 0; y < 2; ++y) {
      int64_t sum = 0;
      for (int i = 0; i < 60; ++i)
        if (i % 3 == x && i % 2 == y) sum += i;
      expected.push_back(std::to_string(x) + "," + std::to_string(y) + ":" + std::to_string(sum) +
                         "@" + std::to_string(SubtaskForKey(Cell{x, y}, 128, 3)));
    }
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(lines, expected);
}

}  // namespace
}  // namespace tidemark
