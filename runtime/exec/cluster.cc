#include "tidemark/runtime/exec/cluster.h"

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tidemark/runtime/core/detail/mutex.h"
#include "tidemark/runtime/exec/remote_exchange.h"

namespace tidemark {
namespace {

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  int out;
  if (v == nullptr || !absl::SimpleAtoi(v, &out)) return fallback;
  return out;
}

// Constant-initialised, so a registration from another library's static
// initialiser is never overwritten.
internal::RemotePlane g_remote_plane;

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

void RegisterRemotePlane(const RemotePlane& plane) { g_remote_plane = plane; }

const RemotePlane& RegisteredRemotePlane() { return g_remote_plane; }

namespace {

// The forwarder and the sink are called under their lock, so that once a
// setter returned the function it replaced is never called again.
struct LineHooks {
  Mutex mu;
  std::function<void(std::string_view)> forward ABSL_GUARDED_BY(mu);
  Mutex sink_mu;
  std::function<void(std::string_view)> sink ABSL_GUARDED_BY(sink_mu);
};

LineHooks& Hooks() {
  static LineHooks* hooks = new LineHooks;
  return *hooks;
}

}  // namespace

bool ForwardLineToRank0(std::string_view line) {
  LineHooks& h = Hooks();
  MutexLock lock(&h.mu);
  if (!h.forward) return false;
  h.forward(line);
  return true;
}

void SetLineForwarder(std::function<void(std::string_view)> forward) {
  LineHooks& h = Hooks();
  MutexLock lock(&h.mu);
  h.forward = std::move(forward);
}

void SetForwardedLineSink(std::function<void(std::string_view)> sink) {
  LineHooks& h = Hooks();
  MutexLock lock(&h.sink_mu);
  h.sink = std::move(sink);
}

void DeliverForwardedLine(std::string_view line) {
  LineHooks& h = Hooks();
  MutexLock lock(&h.sink_mu);
  if (h.sink) {
    h.sink(line);
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

absl::StatusOr<std::string> DecideAtRank0(std::string_view mine, const DecideFn& decide,
                                          std::chrono::milliseconds deadline) {
  const ClusterInfo c = ThisCluster();
  if (!c.distributed()) return decide({std::string(mine)});
  if (g_remote_plane.decide_at_rank0 == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", c.rank, " of ", c.size,
                     ": deciding across ranks needs the program linked with tidemark::mpi"));
  }
  return g_remote_plane.decide_at_rank0(mine, decide, deadline);
}

}  // namespace internal

std::vector<std::string> GatherAtRank0(std::string_view mine) {
  const ClusterInfo c = ThisCluster();
  if (!c.distributed()) return {std::string(mine)};
  if (g_remote_plane.gather_at_rank0 == nullptr) {
    throw std::runtime_error(absl::StrCat("tidemark: GatherAtRank0 on rank ", c.rank, " of ",
                                          c.size,
                                          ", but the program is not linked with "
                                          "tidemark::mpi"));
  }
  return g_remote_plane.gather_at_rank0(mine);
}

}  // namespace tidemark
