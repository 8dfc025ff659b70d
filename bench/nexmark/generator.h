// bench/nexmark/generator.h
//
// The Nexmark event generator, written from the model of nexmark-flink's
// GeneratorConfig / NexmarkGenerator / PersonGenerator / AuctionGenerator /
// BidGenerator / PriceGenerator / StringsGenerator (and Beam's Nexmark
// Generator, whose rules they share):
//   - event n is a person, an auction or a bid by n mod 50 (proportions
//     1 : 3 : 46), person and auction ids numbered densely from 1000 in that
//     order (lastBase0PersonId / lastBase0AuctionId);
//   - an auction's seller is a hot seller (a multiple of 100 among the people
//     so far) 3 times in 4, else one of the last 1000 people (10 ids of lead);
//     a bid's auction is a hot auction 1 time in 2, else one of the last 100
//     auctions (10 ids of lead: bids may name an auction generated later); its
//     bidder a hot bidder 3 times in 4, else one of the active people, its
//     id base0 + 2000: nexmark-flink's BidGenerator adds FIRST_PERSON_ID
//     twice (Beam's once), and this follows nexmark-flink, whose figures
//     are compared; no query joins a bidder to a person;
//   - prices 10^(6u) * 100 cents rounded; categories 10..14; an auction
//     expires 1 .. 2 * (the time 100 auctions take) after it starts;
//   - channels: one of 4 hot ones (Google, Facebook, Baidu, Apple) 1 time in
//     2, else channel-<0..9999>, each with a fixed url, 9 in 10 of them with
//     "&channel_id=<reversed id>";
//   - `extra` pads each record to about the average sizes 200 / 500 / 100
//     bytes (-20% .. +20%, the top excluded: nextInt(2 * delta)): random
//     letters, a slice of a 64 KiB buffer of random
//     letters made once per process (see NextExtra in generator.cc); a
//     bid's is one of 256 slices per length whose hashes are computed once
//     (NextBidExtra);
//   - names, emails, item names and descriptions: StringsGenerator's
//     nextString (3 .. max - 1 characters, one in 13 a space, trimmed) as a
//     slice of a 64 KiB buffer of such characters (NextWords), the event's
//     stream advanced as if drawn letter by letter, so that its ids, prices
//     and times do not depend on how its strings are made;
//   - event n's time is base_time + n * 1e6 / rate microseconds (one
//     generator at `rate` events per second, the events split over the
//     subtasks), so that event times do not depend on the parallelism.
// Every event is a pure function of (config, n): its random numbers come from
// a SplitMix64 stream seeded with n (as Beam's generator seeds
// java.util.Random with n; nexmark-flink draws from one unseeded
// SplittableRandom per generator, so its events are not reproducible), so
// subtask i of p emits events i, i + p, ... and a restored source resumes at
// the next index it snapshotted.  The random numbers are not Java's: the
// values differ from nexmark-flink's event for event, the distributions and
// proportions do not.
#ifndef TM_BENCH_NEXMARK_GENERATOR_H_
#define TM_BENCH_NEXMARK_GENERATOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/nexmark/model.h"
#include "tidemark/tidemark.h"

namespace nexmark {

struct GeneratorConfig {
  int64_t events = 1000000;           // 0 or negative: unbounded
  double events_per_second = 1e7;     // event-time rate (nexmark-flink's TPS default: 10 M)
  int64_t base_time = 1436918400000;  // 2015-07-15T00:00:00Z, Beam's BASE_TIME
  int person_proportion = 1;
  int auction_proportion = 3;
  int bid_proportion = 46;
  int num_active_people = 1000;
  int num_in_flight_auctions = 100;
  int hot_auction_ratio = 2;
  int hot_sellers_ratio = 4;
  int hot_bidders_ratio = 4;
  int avg_person_byte_size = 200;
  int avg_auction_byte_size = 500;
  int avg_bid_byte_size = 100;
  int total_proportion() const { return person_proportion + auction_proportion + bid_proportion; }
};

inline constexpr int64_t kFirstPersonId = 1000;
inline constexpr int64_t kFirstAuctionId = 1000;
inline constexpr int64_t kFirstCategoryId = 10;
inline constexpr int kNumCategories = 5;

class Generator {
 public:
  explicit Generator(GeneratorConfig config);
  const GeneratorConfig& config() const { return config_; }
  // Event number n (0-based).
  Event Make(int64_t n) const;
  // The same, its time ts = TimestampOf(n) known.
  Event Make(int64_t n, int64_t ts) const;
  // Its event time (ms).
  int64_t TimestampOf(int64_t n) const;

  // The model's id arithmetic (base 0), exposed for the tests.
  int64_t LastBase0PersonId(int64_t n) const;
  int64_t LastBase0AuctionId(int64_t n) const;

 private:
  class Random;
  Person MakePerson(int64_t n, int64_t ts, Random& r) const;
  Auction MakeAuction(int64_t n, int64_t ts, Random& r) const;
  void MakeBid(int64_t n, int64_t ts, Random& r, Bid& b) const;
  // StringsGenerator.nextExtra for a bid (whose other fields count 32
  // bytes): NextExtra's length draw, then one of kBidExtraSlots slices of
  // that length of the letter pool, whose hashes were computed once.
  Text NextBidExtra(Random& r) const;
  static size_t BidExtraOffset(int len, int slot);
  static constexpr int kBidFixedSize = 32;
  static constexpr int kBidExtraSlots = 256;
  // From LastBase0PersonId(n) / LastBase0AuctionId(n), computed once per event.
  int64_t NextBase0PersonId(int64_t last_person, Random& r) const;
  int64_t NextBase0AuctionId(int64_t last_auction, Random& r) const;

  // n / d for a fixed d and n >= 0 with one multiplication, exact where
  // n * d < 2^64 (floor(n * ceil(2^64 / d) / 2^64): the error n / 2^64 is
  // below 1 / d), a division beyond.
  class Divisor {
   public:
    Divisor() = default;
    explicit Divisor(uint64_t d);
    uint64_t Of(uint64_t n) const {
      if (n <= limit_) return static_cast<uint64_t>((static_cast<unsigned __int128>(n) * m_) >> 64);
      return n / d_;
    }

   private:
    uint64_t d_ = 1, m_ = 0, limit_ = 0;  // d < 2: n <= 0 by the product, else n / d
  };

  GeneratorConfig config_;
  int64_t ms_divisor_ = 0;  // rate / 1000 when that is whole, else 0
  Divisor ms_div_, total_div_;
  int bid_extra_min_ = 0, bid_extra_lengths_ = 0;
  std::vector<uint64_t> bid_extra_hash_;  // empty: NextExtra (sizes beyond the pool's half)
};

// PriceGenerator.nextPrice for the uniform draw u in [0, 1): cents,
// log-uniform over [1, 1e6) dollars; exactly llround(pow(10, 6u) * 100),
// computed without pow.
int64_t PriceOf(double u);
// The channel_id of channel `channel`'s url: Java's
// Math.abs(Integer.reverse(channel)), so channel 1's is -2147483648.
int64_t ChannelIdOf(int channel);

// The generator as a checkpointable tidemark source: subtask i of p emits
// events i, i + p, ... with their event times; its position is the next
// index.
// Each subtask's source on a cache line of its own, and its position kept in
// a register while it polls: two subtasks' sources allocated side by side
// shared a line that both wrote once per event (the position), which cost
// the cheap queries up to a third of their CPU, depending on where the
// allocator put the two (bench/RESULTS.md, 2026-12-04).
class alignas(64) NexmarkSource final : public tidemark::Source<Event> {
 public:
  explicit NexmarkSource(std::shared_ptr<const Generator> gen) : gen_(std::move(gen)) {}
  void Open(const tidemark::SourceContext& ctx) override;
  tidemark::PollStatus Poll(tidemark::SourceOutput<Event>& out, size_t budget) override;
  bool Replayable() const override { return true; }
  void SnapshotPosition(tidemark::internal::StateWriter& w) const override;
  void RestorePosition(tidemark::internal::StateReader& r) override;

 private:
  std::shared_ptr<const Generator> gen_;
  int64_t next_ = 0;
  int64_t stride_ = 1;
};

// The events of `gen` with Nexmark's watermarks (dateTime - 4 s, bounded
// out-of-orderness), at the environment's parallelism.
tidemark::DataStream<Event> NexmarkEvents(tidemark::StreamExecutionEnvironment& env,
                                          std::shared_ptr<const Generator> gen);

}  // namespace nexmark

#endif  // TM_BENCH_NEXMARK_GENERATOR_H_
