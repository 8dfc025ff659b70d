// RemoteBatchCodec: a batch crosses ranks as bytes and comes back exactly:
// records and every kind of control, in order, for types that travel as
// their bytes and types with a StateCodec; malformed bytes are an error,
// never a crash or a partial batch.
#include "tidemark/runtime/io/detail/remote_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "absl/status/status.h"

namespace tidemark::internal {
namespace {

struct Point {
  int64_t x;
  double y;
};

template <typename T>
std::unique_ptr<Batch<T>> RoundTrip(Channel<T>& from, Channel<T>& to, std::string* bytes) {
  RemoteBatchCodec<T> codec;
  int64_t records = 0;
  EXPECT_TRUE(codec.PopEncode(&from, bytes, &records));
  const absl::Status s = codec.DecodePush(*bytes, &to);
  EXPECT_TRUE(s.ok()) << s;
  return to.Pop();
}

TEST(RemoteCodec, RecordsAndEveryControlComeBackInOrder) {
  Channel<Point> from(4), to(4);
  auto b = from.AcquireBatch();
  b->AddControl(ControlKind::kStatus, 1);
  b->records.push_back({Point{1, 1.5}, 100});
  b->AddControl(ControlKind::kWatermark, 99);
  b->records.push_back({Point{2, -2.5}, kNoTimestamp});
  b->AddControl(ControlKind::kBarrier, 7);
  b->AddControl(ControlKind::kEndOfInput, 0);
  from.Push(std::move(b));
  std::string bytes;
  auto got = RoundTrip(from, to, &bytes);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(got->records.size(), 2u);
  EXPECT_EQ(got->records[0].value.x, 1);
  EXPECT_EQ(got->records[0].value.y, 1.5);
  EXPECT_EQ(got->records[0].timestamp, 100);
  EXPECT_EQ(got->records[1].value.y, -2.5);
  EXPECT_EQ(got->records[1].timestamp, kNoTimestamp);
  ASSERT_EQ(got->controls.size(), 4u);
  const std::vector<std::tuple<uint32_t, ControlKind, Timestamp>> want = {
      {0, ControlKind::kStatus, 1},
      {1, ControlKind::kWatermark, 99},
      {2, ControlKind::kBarrier, 7},
      {2, ControlKind::kEndOfInput, 0}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got->controls[i].position, std::get<0>(want[i]));
    EXPECT_EQ(got->controls[i].kind, std::get<1>(want[i]));
    EXPECT_EQ(got->controls[i].value, std::get<2>(want[i]));
  }
  EXPECT_EQ(from.SizeApprox(), 0u);  // popped and recycled
}

TEST(RemoteCodec, TypesWithAStateCodecTravelThroughIt) {
  Channel<std::pair<std::string, std::vector<int>>> from(4), to(4);
  auto b = from.AcquireBatch();
  b->records.push_back({{"k\xff\0y", {1, 2, 3}}, 5});
  b->records.push_back({{"", {}}, 6});
  b->AddControl(ControlKind::kWatermark, 6);
  from.Push(std::move(b));
  std::string bytes;
  auto got = RoundTrip(from, to, &bytes);
  ASSERT_EQ(got->records.size(), 2u);
  EXPECT_EQ(got->records[0].value.first, std::string("k\xff\0y"));
  EXPECT_EQ(got->records[0].value.second, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(got->records[1].value.first, "");
  EXPECT_EQ(got->records[1].timestamp, 6);
  EXPECT_EQ(got->controls.size(), 1u);
}

TEST(RemoteCodec, MalformedBytesAreAnErrorAndPushNothing) {
  Channel<std::string> from(4), to(4);
  auto b = from.AcquireBatch();
  b->records.push_back({"hello", 1});
  b->AddControl(ControlKind::kWatermark, 1);
  from.Push(std::move(b));
  RemoteBatchCodec<std::string> codec;
  std::string bytes;
  int64_t records = 0;
  ASSERT_TRUE(codec.PopEncode(&from, &bytes, &records));
  EXPECT_EQ(records, 1);
  // Every truncation fails.
  for (size_t n = 0; n < bytes.size(); ++n) {
    const absl::Status s = codec.DecodePush(bytes.substr(0, n), &to);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << n;
    EXPECT_FALSE(s.message().empty());
  }
  // Trailing garbage fails.
  absl::Status s = codec.DecodePush(bytes + "x", &to);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("after the batch"));
  // An unknown control kind fails.
  std::string bad;
  StateWriter w(&bad);
  w.PutVarint(0);
  w.PutVarint(1);
  w.PutVarint(0);
  w.PutU8(42);
  w.PutI64(0);
  s = codec.DecodePush(bad, &to);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("invalid"));
  EXPECT_EQ(to.SizeApprox(), 0u);
  // The intact bytes still decode.
  s = codec.DecodePush(bytes, &to);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(to.Pop()->records[0].value, "hello");
}

}  // namespace
}  // namespace tidemark::internal
