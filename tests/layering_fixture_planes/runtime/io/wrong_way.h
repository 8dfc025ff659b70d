// An io-plane header that reaches up into the execution plane:
// cmake/check_layers.cmake must reject it (ctest
// layering_check_rejects_wrong_way_plane_include).
#include "tidemark/runtime/exec/job_result.h"
#include "tidemark/runtime/state/state_codec.h"
