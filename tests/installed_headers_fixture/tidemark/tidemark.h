// A broken install tree for installed_headers_check_rejects: it lacks
// runtime/core/time.h (a source header that this tidemark.h includes) and holds
// extra.h, which nothing includes.
#include <string>

#include "absl/status/status.h"
#include "tidemark/runtime/core/time.h"
