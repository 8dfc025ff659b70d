// runtime/cluster/mpi_cluster.h
//
// The MPI plane's process-wide part (library tidemark_mpi, CMake target
// tidemark::mpi).  Linking it registers the MPI exchange and GatherAtRank0
// with the execution plane (runtime/exec/remote_exchange.h): a program that
// runs across ranks links tidemark::mpi, one that never does needs neither
// MPI's headers nor its libraries.
#ifndef TM_RUNTIME_MPI_CLUSTER_H_
#define TM_RUNTIME_MPI_CLUSTER_H_

namespace tidemark::internal {

// MPI_Init_thread once per process (MPI_THREAD_MULTIPLE), finalised at exit
// unless MarkClusterBroken() was called (a peer that vanished would make
// MPI_Finalize wait for it).  Only called when ThisCluster().distributed().
void EnsureMpiInitialized();
void MarkClusterBroken();

}  // namespace tidemark::internal

// Referenced by the link options of tidemark::mpi ("-u"), so the linker keeps
// the object whose static initialiser registers the plane even though the
// program calls nothing in it.
extern "C" int tidemark_mpi_link_anchor;

#endif  // TM_RUNTIME_MPI_CLUSTER_H_
