// bench/nexmark/generator.cc: see generator.h.
#include "bench/nexmark/generator.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <type_traits>
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

namespace {
// SplitMix64: a fast, well-mixed stream from a 64-bit seed (the event number).
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL) {}
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
  // The stream after k more draws (as k calls of Next, in O(1)).
  void Skip(uint64_t k) { s_ += k * 0x9e3779b97f4a7c15ULL; }

 private:
  uint64_t s_;
};

// What every generator shares, made once per process from fixed seeds and
// never changed after (a bid's channel, url and extra are views of it):
// nexmark-flink's BidGenerator channel and url caches, and the letters that
// `extra` is cut from.
struct GenPools {
  std::vector<std::string> hot_urls;       // of the 4 hot channels
  std::vector<std::string> channel_names;  // "channel-<i>"
  std::vector<std::string> channel_urls;   // channel-<i> -> its url
  // The hot channels' names and urls as views with their hashes.
  struct Hot {
    Text name, url;
  };
  std::vector<Hot> hot;
  // Channel i's url and both hashes in 32 bytes (the table a bid picks from
  // at random, 320 KB, stays in a core's L2); its name is at names + 16 i.
  struct alignas(32) Channel {
    const char* url;
    uint64_t url_hash, name_hash;
    uint32_t url_size, name_size;
  };
  std::vector<Channel> channels;
  std::string names;    // 16 bytes per channel
  std::string letters;  // kLetterPoolSize uniform random 'a'..'z'
  // kLetterPoolSize characters of StringsGenerator.nextString's alphabet:
  // one in 13 a space, the others a uniform letter (names, emails, item
  // names and descriptions are slices of it).
  std::string words;
};
const GenPools& Pools();
}  // namespace

class Generator::Random : public SplitMix {
 public:
  using SplitMix::SplitMix;
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
// Fills [p, end) with characters of NextString's alphabet (`special` one
// time in 13, else a letter), six from each draw of `r`.
template <typename R>
void FillWordCharacters(R& r, char* p, char* const end, char special) {
  while (p < end) {
    uint64_t x = r.Next();
    for (int k = 0; k < 6 && p < end; ++k) {
      const unsigned __int128 m = static_cast<unsigned __int128>(x) * 338;
      x = static_cast<uint64_t>(m);
      const int d = static_cast<int>(m >> 64);
      *p++ = d < 26 ? special : static_cast<char>('a' + (d - 26) % 26);
    }
  }
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
  FillWordCharacters(r, p, end, special);
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
// The characters of NextString's alphabet, `n` of them, drawn as NextString
// draws them (the pool StringsGenerator's strings are cut from).
template <typename R>
std::string NextWordCharacters(R& r, size_t n, char special = ' ') {
  std::string s(n, 'a');
  char* p = s.data();
  char* const end = p + n;
  FillWordCharacters(r, p, end, special);
  return s;
}
// StringsGenerator.nextString for the events: the same length draw as
// NextString, then a slice of that length of Pools().words (characters drawn
// as NextString draws them) at an offset from the first of the draws
// NextString took for its letters, trimmed of spaces; the stream is then
// advanced past the draws NextString took (Skip), so that every later draw
// of the event (its ids, prices, times) is the same as with NextString.  No
// draw per letter, no allocation: a view of the pool.
std::string_view NextWords(SplitMix& r, int max_length);
// StringsGenerator.nextExtra: pads current_size to about desired (+-20%),
// with `desired` random letters: a slice, at an offset drawn from the event's
// own stream, of one buffer of pseudorandom letters made once per process
// from a fixed seed (Pools()), so that it costs neither an allocation nor a
// draw per letter and is still a function of the event number.  A length
// beyond half the buffer (an average size set above 512 KiB) is drawn letter
// by letter into its own copy.
template <typename R>
Text NextExtra(R& r, int current_size, int desired_average_size) {
  if (current_size > desired_average_size) return {};
  int desired = desired_average_size - current_size;
  const int delta = static_cast<int>(std::lround(desired * 0.2));
  const int min_size = desired - delta;
  desired = min_size + (delta == 0 ? 0 : r.NextInt(2 * delta));  // nextInt(2 * delta)
  if (desired <= 0) return {};
  const std::string& letters = Pools().letters;
  const size_t len = static_cast<size_t>(desired);
  if (len > letters.size() / 2) return Text(NextExactString(r, desired));
  const size_t at = static_cast<size_t>(r.NextLong(static_cast<int64_t>(letters.size() - len + 1)));
  return Text::View(std::string_view(letters).substr(at, len));
}
// PriceGenerator.nextPrice: cents, log-uniform over [1, 1e6) dollars.
template <typename R>
int64_t NextPrice(R& r) {
  return PriceOf(r.NextDouble());
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

int64_t ChannelIdOf(int channel) {
  // Java's Math.abs(Integer.reverse(i)): Integer.MIN_VALUE (channel 1) stays
  // negative (std::abs of it is undefined behaviour: -O2 gave 0).
  const int32_t rev = ReverseBits(channel);
  return rev == std::numeric_limits<int32_t>::min() ? int64_t{rev} : std::abs(int64_t{rev});
}

namespace {

// 64 KiB: large enough that extras cut from it at random offsets do not
// repeat a pattern a query could see, small enough to stay in a core's L2
// (1 MiB was: reading the slices to digest them then missed the caches).
constexpr size_t kLetterPoolSize = size_t{1} << 16;

const GenPools& Pools() {
  // Built in place and never freed: views of it live as long as the process.
  static const GenPools* const pools = [] {
    auto* pp = new GenPools;
    GenPools& p = *pp;
    // The caches as the generator made them per instance before: the same
    // seed and order, so the same urls.
    SplitMix r(0x6e65786d61726bULL);
    for (int i = 0; i < Len(kHotChannels); ++i) p.hot_urls.push_back(BaseUrl(r));
    p.channel_names.reserve(kChannelsNumber);
    p.channel_urls.reserve(kChannelsNumber);
    for (int i = 0; i < kChannelsNumber; ++i) {
      p.channel_names.push_back("channel-" + std::to_string(i));
      std::string url = BaseUrl(r);
      if (r.NextInt(10) > 0) url += "&channel_id=" + std::to_string(ChannelIdOf(i));
      p.channel_urls.push_back(std::move(url));
    }
    SplitMix letters(0x6c657474657273ULL);
    p.letters = NextExactString(letters, static_cast<int>(kLetterPoolSize));
    SplitMix words(0x776f726473ULL);
    p.words = NextWordCharacters(words, kLetterPoolSize);
    auto text = [](std::string_view s) { return Text::View(s, HashBytes(s)); };
    for (int i = 0; i < Len(kHotChannels); ++i)
      p.hot.push_back({text(kHotChannels[i]), text(p.hot_urls[i])});
    p.names.assign(16 * static_cast<size_t>(kChannelsNumber), '\0');
    for (int i = 0; i < kChannelsNumber; ++i) {
      const std::string& name = p.channel_names[i];
      const std::string& url = p.channel_urls[i];
      name.copy(p.names.data() + 16 * i, 16);
      p.channels.push_back({url.data(), HashBytes(url), HashBytes(name),
                            static_cast<uint32_t>(url.size()), static_cast<uint32_t>(name.size())});
    }
    return pp;
  }();
  return *pools;
}

std::string_view NextWords(SplitMix& r, int max_length) {
  const int len = kMinStringLength + r.NextInt(max_length - kMinStringLength);
  const uint64_t x = r.Next();
  r.Skip(static_cast<uint64_t>((len + 5) / 6 - 1));
  const std::string& words = Pools().words;
  const size_t n = static_cast<size_t>(len);
  const size_t at = static_cast<size_t>(
      (static_cast<unsigned __int128>(x) * static_cast<uint64_t>(words.size() - n + 1)) >> 64);
  std::string_view s(words.data() + at, n);
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// 10^(j / 256), j = 0 .. 255, and 100 * 10^k, k = 0 .. 5 (exact).
struct PriceTables {
  double frac[256];
  double whole[6];
  PriceTables() {
    for (int j = 0; j < 256; ++j) frac[j] = std::pow(10.0, j / 256.0);
    double w = 100.0;
    for (int k = 0; k < 6; ++k, w *= 10.0) whole[k] = w;
  }
};
const PriceTables kPriceTables;
}  // namespace

// llround(pow(10, 6u) * 100) without pow: x = 6u = k + j / 256 + f / 256
// (k, j whole, f in [0, 1): x * 256 is exact), 10^x = 10^k * 10^(j / 256) *
// e^(f ln 10 / 256), the last by its Taylor polynomial to degree 6 (argument
// below 0.009: remainder below 1e-18).  The product is within a few ulps of
// pow's (below 1e-7 at the largest price, 1e8 cents); only where it lies
// within 1e-6 of a rounding boundary (about 2 draws in a million) is pow
// itself asked, so the result is pow's, draw for draw (the test compares
// them over millions of draws).
int64_t PriceOf(double u) {
  const double x = u * 6.0;
  const double y = x * 256.0;
  const int i = static_cast<int>(y);
  if (i < 0 || i >= 6 * 256) return std::llround(std::pow(10.0, x) * 100.0);
  const double g = (y - i) * (2.302585092994045684 / 256.0);
  // Estrin's scheme: three short chains instead of one of six.
  const double g2 = g * g;
  const double e = (1.0 + g) + g2 * ((1.0 / 2 + g * (1.0 / 6)) +
                                     g2 * ((1.0 / 24 + g * (1.0 / 120)) + g2 * (1.0 / 720)));
  const double v = kPriceTables.whole[i >> 8] * kPriceTables.frac[i & 255] * e;
  const int64_t whole = static_cast<int64_t>(v);  // v >= 99.99..., positive
  const double frac = v - static_cast<double>(whole);
  if (frac > 0.5 - 1e-6 && frac < 0.5 + 1e-6) return std::llround(std::pow(10.0, x) * 100.0);
  return whole + (frac > 0.5 ? 1 : 0);
}

Generator::Generator(GeneratorConfig config) : config_(config) {
  if (config_.events_per_second <= 0)
    throw std::invalid_argument("nexmark: the event rate must be positive");
  if (config_.person_proportion < 1 || config_.auction_proportion < 1 || config_.bid_proportion < 1)
    throw std::invalid_argument("nexmark: every proportion must be at least 1");
  // The channel and url caches (nexmark-flink's BidGenerator), from a fixed
  // seed so that every process generates the same events.
  Pools();
  // Event times: base + floor(floor(n * 1e6 / rate) / 1000) ms, which is
  // floor(n / (rate / 1000)) when the rate is a whole multiple of 1000 (one
  // 64-bit division per event instead of a 128-bit one).
  const double rate = config_.events_per_second;
  if (rate == std::floor(rate) && rate < 9e15 && std::fmod(rate, 1000.0) == 0)
    ms_divisor_ = static_cast<int64_t>(rate) / 1000;
  if (ms_divisor_ > 0) ms_div_ = Divisor(static_cast<uint64_t>(ms_divisor_));
  total_div_ = Divisor(static_cast<uint64_t>(config_.total_proportion()));
  // The bids' extras (NextBidExtra): NextExtra's lengths for a bid, and
  // kBidExtraSlots slices of the letter pool per length with their hashes.
  const int avg = config_.avg_bid_byte_size;
  if (avg >= kBidFixedSize) {
    const int desired = avg - kBidFixedSize;
    const int delta = static_cast<int>(std::lround(desired * 0.2));
    const int max_len = desired + delta;
    if (max_len <= static_cast<int>(kLetterPoolSize / 2)) {
      bid_extra_min_ = desired - delta;
      bid_extra_lengths_ = delta == 0 ? 1 : 2 * delta;  // as NextExtra draws them
      const std::string& letters = Pools().letters;
      bid_extra_hash_.resize(static_cast<size_t>(bid_extra_lengths_) * kBidExtraSlots);
      for (int i = 0; i < bid_extra_lengths_; ++i) {
        const int len = bid_extra_min_ + i;
        if (len <= 0) continue;
        for (int slot = 0; slot < kBidExtraSlots; ++slot)
          bid_extra_hash_[static_cast<size_t>(i) * kBidExtraSlots + static_cast<size_t>(slot)] =
              HashBytes(std::string_view(letters.data() + BidExtraOffset(len, slot),
                                         static_cast<size_t>(len)));
      }
    }
  }
}

size_t Generator::BidExtraOffset(int len, int slot) {
  // Slots start kSlotStride bytes apart in the first half of the pool,
  // shifted by the length so that slices of one slot differ beyond their
  // length.
  constexpr size_t kSlotStride = kLetterPoolSize / 2 / kBidExtraSlots;
  return static_cast<size_t>(slot) * kSlotStride + static_cast<size_t>(len) * 13 % kSlotStride;
}

Generator::Divisor::Divisor(uint64_t d) : d_(d) {
  if (d >= 2) {
    m_ = static_cast<uint64_t>((static_cast<unsigned __int128>(1) << 64) / d) + 1;
    limit_ = ~uint64_t{0} / d;
  }
}

int64_t Generator::TimestampOf(int64_t n) const {
  // base + n * inter-event delay (us) / 1000, in exact integer arithmetic
  // when the rate is whole.
  if (ms_divisor_ > 0 && n >= 0)
    return config_.base_time + static_cast<int64_t>(ms_div_.Of(static_cast<uint64_t>(n)));
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
  const int64_t epoch = n >= 0 ? static_cast<int64_t>(total_div_.Of(n)) : n / total;
  int64_t offset = n - epoch * total;
  if (offset >= config_.person_proportion) offset = config_.person_proportion - 1;
  return epoch * config_.person_proportion + offset;
}

int64_t Generator::LastBase0AuctionId(int64_t n) const {
  const int total = config_.total_proportion();
  int64_t epoch = n >= 0 ? static_cast<int64_t>(total_div_.Of(n)) : n / total;
  int64_t offset = n - epoch * total;
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

int64_t Generator::NextBase0PersonId(int64_t last_person, Random& r) const {
  const int64_t num_people = last_person + 1;
  const int64_t active = std::min<int64_t>(num_people, config_.num_active_people);
  const int64_t k = r.NextLong(active + kPersonIdLead);
  return num_people - active + k;
}

int64_t Generator::NextBase0AuctionId(int64_t last_auction, Random& r) const {
  const int64_t max_auction = last_auction;
  const int64_t min_auction = std::max<int64_t>(max_auction - config_.num_in_flight_auctions, 0);
  return min_auction + r.NextLong(max_auction - min_auction + 1 + kAuctionIdLead);
}

Event Generator::Make(int64_t n) const { return Make(n, TimestampOf(n)); }

Event Generator::Make(int64_t n, int64_t ts) const {
  Random r(static_cast<uint64_t>(n));
  const int total = config_.total_proportion();
  const int64_t rem = n >= 0 ? n - static_cast<int64_t>(total_div_.Of(n)) * total : n % total;
  if (rem < config_.person_proportion) return Event{MakePerson(n, ts, r)};
  if (rem < config_.person_proportion + config_.auction_proportion)
    return Event{MakeAuction(n, ts, r)};
  // The bid built in place, in the event that is returned (no move of it).
  Event e{std::variant<Person, Auction, Bid>(std::in_place_type<Bid>)};
  MakeBid(n, ts, r, *std::get_if<Bid>(&e.v));
  return e;
}

Person Generator::MakePerson(int64_t n, int64_t ts, Random& r) const {
  Person p;
  p.id = LastBase0PersonId(n) + kFirstPersonId;
  const char* first = kFirstNames[r.NextInt(Len(kFirstNames))];
  p.name.append(first).append(1, ' ').append(kLastNames[r.NextInt(Len(kLastNames))]);
  {
    // name@domain.com: at most 6 + 1 + 4 + 4 characters (no allocation).
    char buf[32];
    const std::string_view user = NextWords(r, 7);
    const std::string_view domain = NextWords(r, 5);
    char* q = std::copy(user.begin(), user.end(), buf);
    *q++ = '@';
    q = std::copy(domain.begin(), domain.end(), q);
    q = std::copy_n(".com", 4, q);
    p.emailAddress.assign(buf, q);
  }
  {
    // "%04d %04d %04d %04d", the groups drawn in order.
    char cc[19];
    for (int g = 0; g < 4; ++g) {
      int v = r.NextInt(10000);
      char* d = cc + 5 * g;
      for (int k = 3; k >= 0; --k, v /= 10) d[k] = static_cast<char>('0' + v % 10);
      if (g < 3) d[4] = ' ';
    }
    p.creditCard.assign(cc, sizeof cc);
  }
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
  const int64_t last_person = LastBase0PersonId(n);
  int64_t seller;
  if (r.NextInt(config_.hot_sellers_ratio) > 0) {
    seller = (last_person / kHotSellerRatio100) * kHotSellerRatio100;
  } else {
    seller = NextBase0PersonId(last_person, r);
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
  a.itemName = Text::View(NextWords(r, 20));
  a.description = Text::View(NextWords(r, 100));
  a.reserve = a.initialBid + NextPrice(r);
  const int size = 8 + static_cast<int>(a.itemName.size() + a.description.size()) + 8 * 5;
  a.extra = NextExtra(r, size, config_.avg_auction_byte_size);
  return a;
}

void Generator::MakeBid(int64_t n, int64_t ts, Random& r, Bid& b) const {
  const int64_t last_auction = LastBase0AuctionId(n);
  const int64_t last_person = LastBase0PersonId(n);
  int64_t auction;
  if (r.NextInt(config_.hot_auction_ratio) > 0) {
    auction = (last_auction / kHotAuctionRatio100) * kHotAuctionRatio100;
  } else {
    auction = NextBase0AuctionId(last_auction, r);
  }
  b.auction = auction + kFirstAuctionId;
  int64_t bidder;
  if (r.NextInt(config_.hot_bidders_ratio) > 0) {
    bidder = (last_person / kHotBidderRatio100) * kHotBidderRatio100 + 1;
  } else {
    bidder = NextBase0PersonId(last_person, r);
  }
  // nexmark-flink's BidGenerator.nextBid adds FIRST_PERSON_ID twice.
  b.bidder = bidder + 2 * kFirstPersonId;
  b.price = NextPrice(r);
  const GenPools& pools = Pools();
  if (r.NextInt(kHotChannelsRatio) > 0) {
    const int i = r.NextInt(Len(kHotChannels));
    b.channel = pools.hot[i].name;
    b.url = pools.hot[i].url;
  } else {
    const int i = r.NextInt(kChannelsNumber);
    const GenPools::Channel& c = pools.channels[i];
    b.channel = Text::View(std::string_view(pools.names.data() + 16 * i, c.name_size), c.name_hash);
    b.url = Text::View(std::string_view(c.url, c.url_size), c.url_hash);
  }
  b.dateTime = Millis{ts};
  b.extra = NextBidExtra(r);
}

Text Generator::NextBidExtra(Random& r) const {
  if (bid_extra_hash_.empty()) return NextExtra(r, kBidFixedSize, config_.avg_bid_byte_size);
  const int len = bid_extra_min_ + r.NextInt(bid_extra_lengths_);
  if (len <= 0) return {};
  const int slot = r.NextInt(kBidExtraSlots);
  return Text::View(std::string_view(Pools().letters.data() + BidExtraOffset(len, slot),
                                     static_cast<size_t>(len)),
                    bid_extra_hash_[static_cast<size_t>(len - bid_extra_min_) * kBidExtraSlots +
                                    static_cast<size_t>(slot)]);
}

// --- the source ---------------------------------------------------------------

void NexmarkSource::Open(const tidemark::SourceContext& ctx) {
  next_ = ctx.subtask_index;
  stride_ = ctx.parallelism;
}

// CollectInPlace makes each event in the driver's run (AppendMadeRecord's
// in-place path, which a type constructible from anything would not take).
static_assert(!std::is_constructible_v<Event, tidemark::internal::NotAValue>);

tidemark::PollStatus NexmarkSource::Poll(tidemark::SourceOutput<Event>& out, size_t budget) {
  const int64_t count = gen_->config().events;
  int64_t next = next_;  // written back once per poll (see the class)
  for (size_t i = 0; i < budget; ++i) {
    if (count > 0 && next >= count) break;
    const int64_t ts = gen_->TimestampOf(next);
    const bool more = out.CollectInPlace([&] { return gen_->Make(next, ts); }, ts);
    next += stride_;
    if (!more) break;
  }
  next_ = next;
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
