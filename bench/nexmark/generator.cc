// bench/nexmark/generator.cc: see generator.h.
#include "bench/nexmark/generator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "tidemark/runtime/state/state_codec.h"

namespace nexmark {

namespace {
constexpr const char* kUsStates[] = {"AZ", "CA", "ID", "OR", "WA", "WY"};
constexpr const char* kUsCities[] = {"Phoenix",  "Los Angeles", "San Francisco", "Boise",
                                     "Portland", "Bend",        "Redmond",       "Seattle",
                                     "Kent",     "Cheyenne"};
constexpr const char* kFirstNames[] = {"Peter", "Paul",  "Luke",  "John",   "Saul",  "Vicky",
                                       "Kate",  "Julie", "Sarah", "Deiter", "Walter"};
constexpr const char* kLastNames[] = {"Shultz", "Abrams", "Spencer", "White", "Bartels",
                                      "Walton", "Smith",  "Jones",   "Noris"};
constexpr const char* kHotChannels[] = {"Google", "Facebook", "Baidu", "Apple"};
constexpr int kHotChannelsRatio = 2;
constexpr int kChannelsNumber = 10000;
constexpr int kHotAuctionRatio100 = 100;  // hot ids are multiples of 100
constexpr int kHotSellerRatio100 = 100;
constexpr int kHotBidderRatio100 = 100;
constexpr int kPersonIdLead = 10;
constexpr int kAuctionIdLead = 10;
constexpr int kMinStringLength = 3;
template <typename T, size_t N>
constexpr int Len(const T (&)[N]) {
  return static_cast<int>(N);
}
}  // namespace

// SplitMix64: a fast, well-mixed stream from a 64-bit seed (the event number).
class Generator::Random {
 public:
  explicit Random(uint64_t seed) : s_(seed * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), n > 0.
  int64_t NextLong(int64_t n) {
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>(Next()) * static_cast<uint64_t>(n)) >> 64);
  }
  int NextInt(int n) { return static_cast<int>(NextLong(n)); }
  double NextDouble() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

namespace {
// Random letters come several from one 64-bit draw: x / 2^64 read as a
// fraction, each letter is its next digit in base 26 (x * 26: the digit is
// the high word, the rest the low word).  After k digits about 64 - 4.7k bits
// of x are left, so 8 digits per draw stay uniform to about 26 / 2^26.
constexpr int kLettersPerDraw = 8;
inline char NextDigitLetter(uint64_t& x) {
  const unsigned __int128 m = static_cast<unsigned __int128>(x) * 26;
  x = static_cast<uint64_t>(m);
  return static_cast<char>('a' + static_cast<int>(m >> 64));
}
// StringsGenerator.nextString: 3 .. max_length - 1 letters, one in 13 the
// special character, trimmed of spaces.  Each character is one digit in base
// 338 = 13 * 26 of a draw (6 per draw): digits below 26 (1 in 13) are the
// special character, the others a uniform letter.
template <typename R>
std::string NextString(R& r, int max_length, char special = ' ') {
  const int len = kMinStringLength + r.NextInt(max_length - kMinStringLength);
  char buf[128];
  char* const end = buf + std::min<int>(len, sizeof buf);
  char* p = buf;
  while (p < end) {
    uint64_t x = r.Next();
    for (int k = 0; k < 6 && p < end; ++k) {
      const unsigned __int128 m = static_cast<unsigned __int128>(x) * 338;
      x = static_cast<uint64_t>(m);
      const int d = static_cast<int>(m >> 64);
      *p++ = d < 26 ? special : static_cast<char>('a' + (d - 26) % 26);
    }
  }
  const char* b = buf;
  const char* e = end;
  while (b < e && *b == ' ') ++b;
  while (e > b && e[-1] == ' ') --e;
  return std::string(b, e);
}
template <typename R>
std::string NextExactString(R& r, int length) {
  std::string s(static_cast<size_t>(std::max(length, 0)), 'a');
  char* p = s.data();
  char* const end = p + s.size();
  while (p < end) {
    uint64_t x = r.Next();
    for (int k = 0; k < kLettersPerDraw && p < end; ++k) *p++ = NextDigitLetter(x);
  }
  return s;
}
// StringsGenerator.nextExtra: pads current_size to about desired (+-20%).
template <typename R>
std::string NextExtra(R& r, int current_size, int desired_average_size) {
  if (current_size > desired_average_size) return {};
  int desired = desired_average_size - current_size;
  const int delta = static_cast<int>(std::lround(desired * 0.2));
  const int min_size = desired - delta;
  desired = min_size + r.NextInt(2 * delta + 1);
  return NextExactString(r, desired);
}
// PriceGenerator.nextPrice: cents, log-uniform over [1, 1e6) dollars.
template <typename R>
int64_t NextPrice(R& r) {
  return std::llround(std::pow(10.0, r.NextDouble() * 6.0) * 100.0);
}
template <typename R>
std::string BaseUrl(R& r) {
  return "https://www.nexmark.com/" + NextString(r, 5, '_') + "/" + NextString(r, 5, '_') + "/" +
         NextString(r, 5, '_') + "/item.htm?query=1";
}
int32_t ReverseBits(int32_t v) {
  uint32_t x = static_cast<uint32_t>(v);
  uint32_t out = 0;
  for (int i = 0; i < 32; ++i) {
    out = (out << 1) | (x & 1);
    x >>= 1;
  }
  return static_cast<int32_t>(out);
}
}  // namespace

Generator::Generator(GeneratorConfig config) : config_(config) {
  if (config_.events_per_second <= 0)
    throw std::invalid_argument("nexmark: the event rate must be positive");
  if (config_.person_proportion < 1 || config_.auction_proportion < 1 || config_.bid_proportion < 1)
    throw std::invalid_argument("nexmark: every proportion must be at least 1");
  // The channel and url caches (nexmark-flink's BidGenerator), from a fixed
  // seed so that every process generates the same events.
  Random r(0x6e65786d61726bULL);
  for (int i = 0; i < Len(kHotChannels); ++i) hot_urls_.push_back(BaseUrl(r));
  channel_urls_.reserve(kChannelsNumber);
  for (int i = 0; i < kChannelsNumber; ++i) {
    std::string url = BaseUrl(r);
    if (r.NextInt(10) > 0) url += "&channel_id=" + std::to_string(std::abs(ReverseBits(i)));
    channel_urls_.push_back(std::move(url));
  }
}

int64_t Generator::TimestampOf(int64_t n) const {
  // base + n * inter-event delay (us) / 1000, in exact integer arithmetic
  // when the rate is whole.
  const double rate = config_.events_per_second;
  if (rate == std::floor(rate) && rate < 9e15) {
    const int64_t r = static_cast<int64_t>(rate);
    const __int128 us = static_cast<__int128>(n) * 1000000 / r;
    return config_.base_time + static_cast<int64_t>(us / 1000);
  }
  return config_.base_time + static_cast<int64_t>(static_cast<double>(n) * 1000.0 / rate);
}

int64_t Generator::LastBase0PersonId(int64_t n) const {
  const int total = config_.total_proportion();
  const int64_t epoch = n / total;
  int64_t offset = n % total;
  if (offset >= config_.person_proportion) offset = config_.person_proportion - 1;
  return epoch * config_.person_proportion + offset;
}

int64_t Generator::LastBase0AuctionId(int64_t n) const {
  const int total = config_.total_proportion();
  int64_t epoch = n / total;
  int64_t offset = n % total;
  if (offset < config_.person_proportion) {
    --epoch;  // about to generate a person: the last epoch's last auction
    offset = config_.auction_proportion - 1;
  } else if (offset >= config_.person_proportion + config_.auction_proportion) {
    offset = config_.auction_proportion - 1;  // about to generate a bid
  } else {
    offset -= config_.person_proportion;
  }
  return epoch * config_.auction_proportion + offset;
}

int64_t Generator::NextBase0PersonId(int64_t n, Random& r) const {
  const int64_t num_people = LastBase0PersonId(n) + 1;
  const int64_t active = std::min<int64_t>(num_people, config_.num_active_people);
  const int64_t k = r.NextLong(active + kPersonIdLead);
  return num_people - active + k;
}

int64_t Generator::NextBase0AuctionId(int64_t n, Random& r) const {
  const int64_t max_auction = LastBase0AuctionId(n);
  const int64_t min_auction = std::max<int64_t>(max_auction - config_.num_in_flight_auctions, 0);
  return min_auction + r.NextLong(max_auction - min_auction + 1 + kAuctionIdLead);
}

Event Generator::Make(int64_t n) const {
  Random r(static_cast<uint64_t>(n));
  const int64_t ts = TimestampOf(n);
  const int64_t rem = n % config_.total_proportion();
  if (rem < config_.person_proportion) return Event{MakePerson(n, ts, r)};
  if (rem < config_.person_proportion + config_.auction_proportion)
    return Event{MakeAuction(n, ts, r)};
  return Event{MakeBid(n, ts, r)};
}

Person Generator::MakePerson(int64_t n, int64_t ts, Random& r) const {
  Person p;
  p.id = LastBase0PersonId(n) + kFirstPersonId;
  p.name = std::string(kFirstNames[r.NextInt(Len(kFirstNames))]) + " " +
           kLastNames[r.NextInt(Len(kLastNames))];
  p.emailAddress = NextString(r, 7) + "@" + NextString(r, 5) + ".com";
  char cc[24];
  std::snprintf(cc, sizeof cc, "%04d %04d %04d %04d", r.NextInt(10000), r.NextInt(10000),
                r.NextInt(10000), r.NextInt(10000));
  p.creditCard = cc;
  p.city = kUsCities[r.NextInt(Len(kUsCities))];
  p.state = kUsStates[r.NextInt(Len(kUsStates))];
  p.dateTime = Millis{ts};
  const int size = 8 + static_cast<int>(p.name.size() + p.emailAddress.size() +
                                        p.creditCard.size() + p.city.size() + p.state.size());
  p.extra = NextExtra(r, size, config_.avg_person_byte_size);
  return p;
}

Auction Generator::MakeAuction(int64_t n, int64_t ts, Random& r) const {
  Auction a;
  a.id = LastBase0AuctionId(n) + kFirstAuctionId;
  int64_t seller;
  if (r.NextInt(config_.hot_sellers_ratio) > 0) {
    seller = (LastBase0PersonId(n) / kHotSellerRatio100) * kHotSellerRatio100;
  } else {
    seller = NextBase0PersonId(n, r);
  }
  a.seller = seller + kFirstPersonId;
  a.category = kFirstCategoryId + r.NextInt(kNumCategories);
  a.initialBid = NextPrice(r);
  // nextAuctionLengthMs: up to twice the time the next in-flight auctions
  // take to be generated.
  const int64_t events_for_auctions =
      (static_cast<int64_t>(config_.num_in_flight_auctions) * config_.total_proportion()) /
      config_.auction_proportion;
  const int64_t horizon = TimestampOf(n + events_for_auctions) - ts;
  a.dateTime = Millis{ts};
  a.expires = Millis{ts + 1 + r.NextLong(std::max<int64_t>(horizon * 2, 1))};
  a.itemName = NextString(r, 20);
  a.description = NextString(r, 100);
  a.reserve = a.initialBid + NextPrice(r);
  const int size = 8 + static_cast<int>(a.itemName.size() + a.description.size()) + 8 * 5;
  a.extra = NextExtra(r, size, config_.avg_auction_byte_size);
  return a;
}

Bid Generator::MakeBid(int64_t n, int64_t ts, Random& r) const {
  Bid b;
  int64_t auction;
  if (r.NextInt(config_.hot_auction_ratio) > 0) {
    auction = (LastBase0AuctionId(n) / kHotAuctionRatio100) * kHotAuctionRatio100;
  } else {
    auction = NextBase0AuctionId(n, r);
  }
  b.auction = auction + kFirstAuctionId;
  int64_t bidder;
  if (r.NextInt(config_.hot_bidders_ratio) > 0) {
    bidder = (LastBase0PersonId(n) / kHotBidderRatio100) * kHotBidderRatio100 + 1;
  } else {
    bidder = NextBase0PersonId(n, r);
  }
  b.bidder = bidder + kFirstPersonId;
  b.price = NextPrice(r);
  if (r.NextInt(kHotChannelsRatio) > 0) {
    const int i = r.NextInt(Len(kHotChannels));
    b.channel = kHotChannels[i];
    b.url = hot_urls_[i];
  } else {
    const int i = r.NextInt(kChannelsNumber);
    b.channel = "channel-" + std::to_string(i);
    b.url = channel_urls_[i];
  }
  b.dateTime = Millis{ts};
  b.extra = NextExtra(r, 32, config_.avg_bid_byte_size);
  return b;
}

// --- the source ---------------------------------------------------------------

void NexmarkSource::Open(const tidemark::SourceContext& ctx) {
  next_ = ctx.subtask_index;
  stride_ = ctx.parallelism;
}

tidemark::PollStatus NexmarkSource::Poll(tidemark::SourceOutput<Event>& out, size_t budget) {
  const int64_t count = gen_->config().events;
  for (size_t i = 0; i < budget; ++i) {
    if (count > 0 && next_ >= count) break;
    const int64_t ts = gen_->TimestampOf(next_);
    out.CollectWithTimestamp(gen_->Make(next_), ts);
    next_ += stride_;
    if (out.Backpressured()) break;
  }
  if (count > 0 && next_ >= count) return tidemark::PollStatus::kEndOfInput;
  return tidemark::PollStatus::kMoreAvailable;
}

void NexmarkSource::SnapshotPosition(tidemark::internal::StateWriter& w) const { w.PutI64(next_); }
void NexmarkSource::RestorePosition(tidemark::internal::StateReader& r) {
  next_ = r.GetI64("nexmark event index");
}

tidemark::DataStream<Event> NexmarkEvents(tidemark::StreamExecutionEnvironment& env,
                                          std::shared_ptr<const Generator> gen) {
  using namespace std::chrono_literals;
  return env.from_source<Event>(
      [gen]() -> std::unique_ptr<tidemark::Source<Event>> {
        return std::make_unique<NexmarkSource>(gen);
      },
      tidemark::WatermarkStrategy<Event>::for_bounded_out_of_orderness(4s), "Nexmark source");
}

int64_t Event::timestamp() const {
  return std::visit([](const auto& x) { return x.dateTime.ms; }, v);
}

}  // namespace nexmark
