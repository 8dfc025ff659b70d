// Waiting for a nonblocking MPI request with a deadline (runtime/cluster/):
// MPI_Test polled with a backoff from 10 us to 2 ms, so that a rank that
// never answers is an error after the deadline, not a hang.  Internal to the
// cluster plane's .cc files; not installed.
#ifndef TIDEMARK_RUNTIME_CLUSTER_DETAIL_MPI_WAIT_H_
#define TIDEMARK_RUNTIME_CLUSTER_DETAIL_MPI_WAIT_H_

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <thread>

namespace tidemark::internal {

// Waits for `r` until `end`; false when it passed first.
inline bool MpiWaitUntil(MPI_Request* r, std::chrono::steady_clock::time_point end) {
  auto sleep = std::chrono::microseconds(10);
  for (;;) {
    int done = 0;
    MPI_Test(r, &done, MPI_STATUS_IGNORE);
    if (done) return true;
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(sleep);
    sleep = std::min<std::chrono::microseconds>(sleep * 2, std::chrono::milliseconds(2));
  }
}

}  // namespace tidemark::internal

#endif  // TIDEMARK_RUNTIME_CLUSTER_DETAIL_MPI_WAIT_H_
