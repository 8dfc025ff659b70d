// runtime/exec/cluster.h
//
// The processes one job runs on.  A program started by `mpirun -n N` (or any
// MPI launcher) is N ranks: every rank builds the same job graph, runs the
// subtasks the placement gives it on its own executor, and the channels
// between subtasks on different ranks go over MPI (runtime/cluster/mpi_exchange.h)
// with the contract of local ones.  A program started any other way is one
// rank, and never initialises MPI: the same binary runs unchanged either way.
//
//   mpirun -n 3 ./my_job            # every rank runs main(); execute() is
//                                   # collective: each runs its third
//
// Rules for a distributed program: every rank builds and executes the same
// jobs in the same order (the ranks check that their plans match); records
// that cross ranks need a tidemark::StateCodec (runtime/state/state_codec.h:
// trivially copyable types travel as they are); side effects of a sink happen
// on the rank of its subtask.
#ifndef TM_RUNTIME_CLUSTER_H_
#define TM_RUNTIME_CLUSTER_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tidemark {

struct ClusterInfo {
  int rank = 0;
  int size = 1;
  bool distributed() const { return size > 1; }
};

// This process's rank and the number of ranks, from the launcher's
// environment (Open MPI's OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE; PMI_RANK
// / PMI_SIZE of MPICH's Hydra and Slurm), read once.  Does not initialise MPI.
ClusterInfo ThisCluster();

// Where one subtask runs.  Every subtask of a chain of operators runs on one
// rank, with the whole chain.
struct PlacementRequest {
  std::string task_name;  // the chain, "Window(...) -> Sink: print"
  int task = 0;           // the chain's index in the plan (ExplainPlan's "Chain N")
  int subtask = 0;
  int parallelism = 1;
  int ranks = 1;
};
// Returns a rank in [0, ranks); must give every rank the same answer.
using PlacementFunction = std::function<int(const PlacementRequest&)>;

// The default: subtask i of every task on rank i mod ranks.
int ModuloPlacement(const PlacementRequest& r);
// Contiguous blocks: subtask i on rank i * ranks / parallelism.
int BlockPlacement(const PlacementRequest& r);

// Collective: every rank calls it at the same point (after the same jobs).
// Rank 0 receives every rank's `mine` in rank order; the other ranks an
// empty vector.  One rank: {mine}.  Across ranks it needs tidemark::mpi
// linked (throws std::runtime_error saying so otherwise).  For gathering what a program collected
// itself (the CLI's timeline events); a job's metrics are gathered already.
std::vector<std::string> GatherAtRank0(std::string_view mine);

}  // namespace tidemark

#endif  // TM_RUNTIME_CLUSTER_H_
