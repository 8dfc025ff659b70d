// tidemark.h: the whole public API in one include.
#ifndef TM_TIDEMARK_H_
#define TM_TIDEMARK_H_

#include "tidemark/api/connected_streams.h"
#include "tidemark/api/environment.h"
#include "tidemark/api/joined_streams.h"
#include "tidemark/api/keyed_process.h"
#include "tidemark/api/windowed_stream.h"
#include "tidemark/operators/basic.h"
#include "tidemark/operators/co_process.h"
#include "tidemark/operators/interval_join.h"
#include "tidemark/operators/keyed_process.h"
#include "tidemark/operators/sinks.h"
#include "tidemark/operators/sources.h"
#include "tidemark/operators/window/windows.h"
#include "tidemark/partitioning/key_groups.h"
#include "tidemark/partitioning/partitioner.h"
#include "tidemark/runtime/core/generalized_watermark.h"
#include "tidemark/runtime/core/time.h"
#include "tidemark/runtime/io/watermark_combiner.h"
#include "tidemark/runtime/io/watermark_valve.h"
#include "tidemark/runtime/task/watermark_strategy.h"

#endif  // TM_TIDEMARK_H_
