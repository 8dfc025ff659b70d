#include "tidemark/operators/window/assigners.h"

#include <random>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace tidemark {
namespace internal {

int64_t StaggerOffset(WindowStagger stagger, Timestamp processing_time, int64_t size) {
  switch (stagger) {
    case WindowStagger::kAligned:
      return 0;
    case WindowStagger::kRandom: {
      thread_local std::mt19937_64 rng{std::random_device{}()};
      return static_cast<int64_t>(std::uniform_real_distribution<double>(0.0, 1.0)(rng) *
                                  static_cast<double>(size));
    }
    case WindowStagger::kNatural: {
      const Timestamp start = GetWindowStartWithOffset(processing_time, 0, size);
      return std::max<int64_t>(0, processing_time - start);
    }
  }
  return 0;
}

void ThrowEndlessSlidingLoop(Timestamp t, int64_t size, int64_t slide, int64_t offset) {
  throw std::runtime_error(absl::StrCat(
      "sliding window assignment of timestamp ", t, " (size ", size, " ms, slide ", slide,
      " ms, offset ", offset,
      " ms): Flink's window loop wraps around the long range here and never ends (it walks "
      "about 2^64 / slide window starts until memory runs out), so the job fails"));
}

}  // namespace internal
}  // namespace tidemark
