#include "tidemark/runtime/cluster/mpi_cluster.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tidemark/runtime/cluster/detail/mpi_wait.h"
#include "tidemark/runtime/cluster/mpi_exchange.h"
#include "tidemark/runtime/exec/cluster.h"
#include "tidemark/runtime/exec/remote_exchange.h"

int tidemark_mpi_link_anchor = 0;  // extern "C": mpi_cluster.h

namespace tidemark::internal {
namespace {

std::atomic<bool> g_broken{false};

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || g_broken.load()) return;
  MPI_Finalize();
}

std::vector<std::string> MpiGatherAtRank0(std::string_view mine) {
  const ClusterInfo c = ThisCluster();
  EnsureMpiInitialized();
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(c.size), offsets(c.size);
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (c.rank == 0) {
    int total = 0;
    for (int r = 0; r < c.size; ++r) {
      offsets[r] = total;
      total += sizes[r];
    }
    all.resize(total);
  }
  MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  if (c.rank != 0) return {};
  std::vector<std::string> out;
  for (int r = 0; r < c.size; ++r) out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

// Every rank's report to rank 0 (two gathers), rank 0's answer to every rank
// (two broadcasts), each step with the one deadline.  Nonblocking
// collectives polled, so a rank that never comes is an error, not a hang.
absl::StatusOr<std::string> MpiDecideAtRank0(std::string_view mine, const DecideFn& decide,
                                             std::chrono::milliseconds deadline) {
  const ClusterInfo c = ThisCluster();
  EnsureMpiInitialized();
  const auto end = std::chrono::steady_clock::now() + deadline;
  auto missed = [&] {
    MarkClusterBroken();  // a rank that never came would make MPI_Finalize wait
    return absl::DeadlineExceededError(absl::StrCat("rank ", c.rank, ": not every one of the ",
                                                    c.size, " ranks reached the decision within ",
                                                    deadline.count(), " ms"));
  };
  int n = static_cast<int>(mine.size());
  std::vector<int> sizes(c.size), offsets(c.size);
  MPI_Request r;
  MPI_Igather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD, &r);
  if (!MpiWaitUntil(&r, end)) return missed();
  std::string all;
  if (c.rank == 0) {
    int total = 0;
    for (int k = 0; k < c.size; ++k) {
      offsets[k] = total;
      total += sizes[k];
    }
    all.resize(total);
  }
  MPI_Igatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), offsets.data(), MPI_BYTE, 0,
               MPI_COMM_WORLD, &r);
  if (!MpiWaitUntil(&r, end)) return missed();
  std::string answer;
  if (c.rank == 0) {
    std::vector<std::string> reports;
    for (int k = 0; k < c.size; ++k) reports.push_back(all.substr(offsets[k], sizes[k]));
    answer = decide(reports);
  }
  int64_t size = static_cast<int64_t>(answer.size());
  MPI_Ibcast(&size, 1, MPI_INT64_T, 0, MPI_COMM_WORLD, &r);
  if (!MpiWaitUntil(&r, end)) return missed();
  answer.resize(static_cast<size_t>(size));
  MPI_Ibcast(answer.data(), static_cast<int>(size), MPI_BYTE, 0, MPI_COMM_WORLD, &r);
  if (!MpiWaitUntil(&r, end)) return missed();
  return answer;
}

std::unique_ptr<RemoteExchange> MakeMpiExchange(const ClusterInfo& cluster, size_t capacity) {
  return std::make_unique<MpiExchange>(cluster, capacity);
}

[[maybe_unused]] const bool g_registered = [] {
  RegisterRemotePlane(RemotePlane{&MakeMpiExchange, &MpiGatherAtRank0, &MpiDecideAtRank0});
  return true;
}();

}  // namespace

void EnsureMpiInitialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
      throw std::runtime_error("tidemark: MPI_Init_thread failed");
    // One thread per job calls MPI at a time, but not always the same one.
    if (provided < MPI_THREAD_SERIALIZED) {
      throw std::runtime_error(absl::StrCat("tidemark: the MPI library gives thread level ",
                                            provided,
                                            ", tidemark needs MPI_THREAD_SERIALIZED or more"));
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    std::atexit(FinalizeAtExit);
  });
}

void MarkClusterBroken() { g_broken.store(true); }

}  // namespace tidemark::internal
