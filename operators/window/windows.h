// operators/window/windows.h: everything window-related in one include
// (window types, assigners, triggers, evictors, the window operators, the
// WindowedStream API with KeyedStream::window, and KeyedStream::process).
#ifndef TM_OPERATORS_WINDOW_WINDOWS_H_
#define TM_OPERATORS_WINDOW_WINDOWS_H_

#include "operators/keyed/keyed_state_store.h"
#include "operators/keyed/timer_service.h"
#include "operators/keyed_process.h"
#include "operators/window/assigners.h"
#include "operators/window/evictors.h"
#include "operators/window/fast_window_operator.h"
#include "operators/window/lateness.h"
#include "operators/window/merging_window_set.h"
#include "operators/window/sliced_window_operator.h"
#include "operators/window/time_window.h"
#include "operators/window/triggers.h"
#include "operators/window/window_contents.h"
#include "operators/window/window_context.h"
#include "operators/window/window_operator.h"
#include "operators/window/window_operator_base.h"

#endif  // TM_OPERATORS_WINDOW_WINDOWS_H_
