// operators/window/windows.h: everything window-related in one include
// (window types, assigners, triggers, evictors, the window operators, the
// WindowedStream API with KeyedStream::window, and KeyedStream::process).
#ifndef TM_OPERATORS_WINDOW_WINDOWS_H_
#define TM_OPERATORS_WINDOW_WINDOWS_H_

#include "tidemark/operators/keyed/keyed_state_store.h"
#include "tidemark/operators/keyed/timer_service.h"
#include "tidemark/operators/keyed_process.h"
#include "tidemark/operators/window/assigners.h"
#include "tidemark/operators/window/evictors.h"
#include "tidemark/operators/window/fast_window_operator.h"
#include "tidemark/operators/window/lateness.h"
#include "tidemark/operators/window/merging_window_set.h"
#include "tidemark/operators/window/sliced_window_operator.h"
#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/operators/window/window_contents.h"
#include "tidemark/operators/window/window_context.h"
#include "tidemark/operators/window/window_operator.h"
#include "tidemark/operators/window/window_operator_base.h"

#endif  // TM_OPERATORS_WINDOW_WINDOWS_H_
