#include "tidemark/runtime/exec/cluster.h"

#include <mpi.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace tidemark {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) return fallback;
  return out;
}

std::atomic<bool> g_broken{false};

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || g_broken.load()) return;
  MPI_Finalize();
}

}  // namespace

ClusterInfo ThisCluster() {
  static const ClusterInfo info = [] {
    ClusterInfo c;
    c.size = EnvInt("OMPI_COMM_WORLD_SIZE", EnvInt("PMI_SIZE", 1));
    c.rank = EnvInt("OMPI_COMM_WORLD_RANK", EnvInt("PMI_RANK", 0));
    if (c.size < 1 || c.rank < 0 || c.rank >= c.size) c = ClusterInfo{};
    return c;
  }();
  return info;
}

int ModuloPlacement(const PlacementRequest& r) { return r.subtask % r.ranks; }

int BlockPlacement(const PlacementRequest& r) {
  return static_cast<int>(static_cast<int64_t>(r.subtask) * r.ranks / r.parallelism);
}

namespace internal {

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

}  // namespace internal

std::vector<std::string> GatherAtRank0(std::string_view mine) {
  const ClusterInfo c = ThisCluster();
  if (!c.distributed()) return {std::string(mine)};
  internal::EnsureMpiInitialized();
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

}  // namespace tidemark
