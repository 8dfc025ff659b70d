// runtime/task/source.h
//
// Source<T>: where records come from.  The executor creates one instance per
// source subtask (from a factory) and polls it:
//
//   Open(ctx)            once, with the subtask index and parallelism;
//   Poll(out, budget)    emits up to about `budget` records and says whether
//                        more are available now, nothing is available yet
//                        (poll again at RetryAt(), or when WaitFd() becomes
//                        readable), or the input has ended (bounded sources);
//   Close()              once.
//
// Checkpoints: a source that can start again from a position (a file at a
// byte offset, a generator at an index) says so with Replayable() and writes
// that position in SnapshotPosition(), called between polls; a restored job
// hands it back to RestorePosition() after Open() and before the first Poll.
// A source that cannot replay (a socket, stdin) makes the job at-most-once:
// what it had emitted after the last checkpoint is gone on a restore.
//
// Non-blocking sources (collections, generators) run on the arena's workers
// with everything else, so Poll must return promptly.  Sources doing blocking
// I/O return true from NeedsOwnThread() and get a dedicated thread; even they
// should not block in Poll for long: cancellation waits for Poll to return.
// A source reports a fatal error (missing file, refused connection, malformed
// line under the `fail` policy) by throwing; the job then fails with that
// message.
#ifndef TM_RUNTIME_SOURCE_H_
#define TM_RUNTIME_SOURCE_H_

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tidemark/runtime/core/clock.h"
#include "tidemark/runtime/core/generalized_watermark.h"
#include "tidemark/runtime/core/stream_element.h"
#include "tidemark/runtime/core/time.h"

namespace tidemark {

template <typename T>
class SourceOutput {
 public:
  virtual ~SourceOutput() = default;
  // A record without a timestamp (kNoTimestamp).
  virtual void Collect(T&& value) = 0;
  virtual void CollectWithTimestamp(T&& value, Timestamp ts) = 0;
  // The record make() returns (make: () -> T), with timestamp `ts`
  // (kNoTimestamp: none), the same as CollectWithTimestamp(make(), ts) but
  // built where the output keeps it: inside a job the value is made straight
  // in the subtask's run of records, without a virtual call or a move of it.
  // For sources whose records are many or large (a generator, a variant of
  // events).  make() is called once, before CollectInPlace returns.
  // Returns !Backpressured(): false once the source should stop emitting and
  // return from Poll.  While the record only joined the run (the run was not
  // handed on), it is true without asking the virtual Backpressured(): only
  // sending records on finds a full channel.  A cancellation that arrives
  // meanwhile is seen at the next hand-on, at most a run's length (256
  // records) later; after the source's own watermark, idleness or split
  // release (which send the run on first), at the next record.
  template <typename Make>
  bool CollectInPlace(Make&& make, Timestamp ts = kNoTimestamp) {
    if (run_ != nullptr) {
      internal::AppendMadeRecord(*run_, make, ts);
      if (run_->size() < run_limit_) return true;
      RunFull();
    } else {
      CollectWithTimestamp(make(), ts);
    }
    return !Backpressured();
  }
  // CollectInPlace for up to n records, make_at(k) for k = 0, 1, ...: the
  // same records, watermarks and questions as n calls (make_at(k) only once
  // the call for k - 1 returned true), but the run is filled in one loop.
  // Returns how many were made; fewer than n only when the last made found
  // the output back-pressured (CollectInPlace returned false).
  template <typename MakeAt>
  size_t CollectManyInPlace(size_t n, MakeAt&& make_at, Timestamp ts = kNoTimestamp) {
    size_t made = 0;
    while (made < n) {
      if (run_ == nullptr) {
        const size_t k = made++;
        CollectWithTimestamp(make_at(k), ts);
        if (Backpressured()) return made;
        continue;
      }
      std::vector<internal::Record<T>>& run = *run_;
      // Below the limit the records join the run; at or past it (a limit
      // lowered to ask at the next record) one joins and RunFull is asked.
      const size_t room = run_limit_ > run.size() ? run_limit_ - run.size() : 1;
      const size_t m = std::min(n - made, room);
      for (const size_t end = made + m; made < end;) {
        const size_t k = made++;
        auto make = [&] { return make_at(k); };
        internal::AppendMadeRecord(run, make, ts);
      }
      if (run.size() >= run_limit_) {
        RunFull();
        if (Backpressured()) return made;
      }
    }
    return made;
  }
  // Watermarks produced by the source itself (most sources leave this to a
  // WatermarkStrategy).
  virtual void EmitWatermark(Timestamp watermark) = 0;
  virtual void MarkIdle() = 0;
  // A generalized watermark (runtime/core/generalized_watermark.h), after
  // the records emitted so far, e.g. backlog=true while catching up.  The
  // default (outputs outside a job) drops it.
  virtual void EmitGeneralizedWatermark(const GeneralizedWatermark& w) { (void)w; }
  // True once an output channel is full: stop emitting and return from Poll.
  virtual bool Backpressured() const = 0;
  // Per-split outputs (Flink's ReaderOutput#createOutputForSplit): a source
  // reading several splits (files, partitions) emits each split's records
  // through that split's output.  When the job's WatermarkStrategy was given
  // to from_source, every split then gets a watermark generator of its own
  // and the subtask emits the minimum over its splits that are not idle
  // (docs/semantics.md, 2.7); otherwise the splits are one stream.  The same
  // output for the same id until ReleaseSplit(id); valid while the source is
  // open.  The default (outputs that know no splits) is this output.
  virtual SourceOutput<T>& ForSplit(const std::string& split_id) {
    (void)split_id;
    return *this;
  }
  // The split has ended (Flink's releaseOutputForSplit): it no longer holds
  // the subtask's watermark back.  Releasing the last split changes neither
  // the subtask's watermark nor its status: a source that stays open with no
  // split marks itself idle (MarkIdle on this output), or it holds the
  // watermark (and its alignment group) where it was.  After a restore,
  // every split the subtask held at the checkpoint holds its watermark again
  // until the source reads it past that or releases it: a source that does
  // not take such a split back releases it here.
  virtual void ReleaseSplit(const std::string& split_id) { (void)split_id; }

 protected:
  // An output that gathers records in a vector (the source driver's run)
  // points run_ at it while CollectInPlace may append there, and is called
  // at RunFull() once it holds run_limit_ records (the run's length, or less
  // where the output wants the next record to ask Backpressured(); RunFull
  // then hands on only a full run).  Null: CollectInPlace goes through
  // CollectWithTimestamp.
  std::vector<internal::Record<T>>* run_ = nullptr;
  size_t run_limit_ = 0;
  virtual void RunFull() {}
};

class SubtaskMetrics;  // runtime/core/metrics.h
namespace internal {
class StateWriter;  // runtime/state/state_codec.h
class StateReader;
}  // namespace internal

struct SourceContext {
  int subtask_index = 0;
  int parallelism = 1;
  const Clock* clock = nullptr;
  // The subtask's metrics, for a source's own named counters
  // (GetCounter("...")); null outside a running job.
  SubtaskMetrics* metrics = nullptr;
};

enum class PollStatus { kMoreAvailable, kNothingAvailable, kEndOfInput };

template <typename T>
class Source {
 public:
  virtual ~Source() = default;
  virtual void Open(const SourceContext& ctx) { (void)ctx; }
  virtual PollStatus Poll(SourceOutput<T>& out, size_t budget) = 0;
  virtual void Close() {}
  // After kNothingAvailable: processing time (ms) at which to poll again;
  // kMaxTimestamp means "when WaitFd() is readable or never".  A time that is
  // not in the future counts as "in a millisecond" (the task never spins).
  virtual Timestamp RetryAt() const { return kMaxTimestamp; }
  virtual bool NeedsOwnThread() const { return false; }
  virtual int WaitFd() const { return -1; }
  // Checkpoints (see above).
  virtual bool Replayable() const { return false; }
  virtual void SnapshotPosition(internal::StateWriter& /*w*/) const {}
  virtual void RestorePosition(internal::StateReader& /*r*/) {}
};

}  // namespace tidemark

#endif  // TM_RUNTIME_SOURCE_H_
