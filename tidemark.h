// tidemark.h: the whole public API in one include.
#ifndef TM_TIDEMARK_H_
#define TM_TIDEMARK_H_

#include "api/connected_streams.h"
#include "api/environment.h"
#include "api/joined_streams.h"
#include "api/keyed_process.h"
#include "api/windowed_stream.h"
#include "operators/basic.h"
#include "operators/co_process.h"
#include "operators/interval_join.h"
#include "operators/keyed_process.h"
#include "operators/sinks.h"
#include "operators/sources.h"
#include "operators/window/windows.h"
#include "partitioning/key_groups.h"
#include "partitioning/partitioner.h"
#include "runtime/time.h"
#include "runtime/watermark_strategy.h"
#include "runtime/watermark_valve.h"

#endif  // TM_TIDEMARK_H_
