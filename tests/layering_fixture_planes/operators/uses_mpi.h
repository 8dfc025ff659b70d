// An operator header that includes the MPI plane, which only its own files may.
#include "tidemark/runtime/cluster/mpi_exchange.h"
#include "tidemark/runtime/core/operator.h"
