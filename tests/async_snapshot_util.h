// tests/async_snapshot_util.h: runs a snapshot's deferred part on the
// snapshot threads, as StreamTask does (asynchronous snapshots,
// docs/checkpoints.md "The snapshot's phases"), for the tests that write to an
// operator's state while the encoding runs.
#ifndef TM_TESTS_ASYNC_SNAPSHOT_UTIL_H_
#define TM_TESTS_ASYNC_SNAPSHOT_UTIL_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tidemark/runtime/state/detail/snapshot_pool.h"
#include "tidemark/runtime/state/state_codec.h"

namespace tidemark::testing {

// Takes `w`'s synchronous bytes and deferred parts (a snapshot just taken)
// and completes them on `pool` into *out, counted by `in_flight`; `done`
// (optional) is incremented, with release, once *out is written.
inline void CompleteOnPool(internal::StateWriter& w, internal::SnapshotPool& pool,
                           internal::AsyncSnapshots& in_flight, std::string* out,
                           std::atomic<int>* done = nullptr) {
  auto parts = std::make_shared<std::vector<internal::StateWriter::Deferred>>(w.TakeDeferred());
  auto sync = std::make_shared<std::string>(w.Release());
  in_flight.Begin();
  pool.Submit([&in_flight, out, done, parts, sync] {
    *out = internal::StateWriter::CompleteDeferred(std::move(*sync), std::move(*parts));
    parts->clear();
    if (done != nullptr) done->fetch_add(1, std::memory_order_release);
    in_flight.End();
  });
}

}  // namespace tidemark::testing

#endif  // TM_TESTS_ASYNC_SNAPSHOT_UTIL_H_
