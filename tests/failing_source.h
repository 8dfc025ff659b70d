// tests/failing_source.h: a source whose snapshot throws, shared by
// savepoint_test and the MPI job binary (tests/mpi/mpi_job.cc).
#ifndef TM_TESTS_FAILING_SOURCE_H_
#define TM_TESTS_FAILING_SOURCE_H_

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <utility>

#include "tidemark/tidemark.h"

namespace tidemark::testing {

// Records forever, one a millisecond (record i at time i); its snapshot
// throws whenever `fails()` says so at that moment.
class FailsInSnapshot final : public Source<int64_t> {
 public:
  explicit FailsInSnapshot(std::function<bool()> fails) : fails_(std::move(fails)) {}
  void Open(const SourceContext& ctx) override { clock_ = ctx.clock; }
  PollStatus Poll(SourceOutput<int64_t>& out, size_t) override {
    out.CollectWithTimestamp(int64_t{next_}, next_);
    ++next_;
    return PollStatus::kNothingAvailable;
  }
  Timestamp RetryAt() const override { return clock_->NowMillis() + 1; }
  bool Replayable() const override { return true; }
  void SnapshotPosition(internal::StateWriter& w) const override {
    if (fails_()) throw std::runtime_error("snapshot failed on purpose");
    w.PutI64(next_);
  }
  void RestorePosition(internal::StateReader& r) override { next_ = r.GetI64("next"); }

 private:
  std::function<bool()> fails_;
  const Clock* clock_ = nullptr;
  int64_t next_ = 0;
};

}  // namespace tidemark::testing

#endif  // TM_TESTS_FAILING_SOURCE_H_
