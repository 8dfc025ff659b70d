// A runtime header that reaches up into the API layer: cmake/check_layers.cmake
// must reject it (ctest layering_check_rejects_wrong_way_include).
#include "tidemark/api/environment.h"
#include "tidemark/runtime/core/time.h"
