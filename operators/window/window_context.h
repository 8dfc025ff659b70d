// operators/window/window_context.h
//
// WindowContext: what a window function (the process function of
// reduce(r, p) / aggregate(a, p), and process / apply functions) sees of its
// surroundings while one window fires: the window, the current watermark and
// processing time, and side outputs.  Valid only during the call it is
// passed to; owned by the window operator and used on its task thread only.
#ifndef TM_OPERATORS_WINDOW_WINDOW_CONTEXT_H_
#define TM_OPERATORS_WINDOW_WINDOW_CONTEXT_H_

#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "tidemark/operators/window/time_window.h"
#include "tidemark/operators/window/triggers.h"
#include "tidemark/runtime/core/operator.h"

namespace tidemark {

namespace internal {
// Implemented by the window operator: named per-(key, window) and per-key
// values of the window function, for the current key and window.
// (Not deleted through its pointer: no virtual destructor, so the operator's
// needs no thunk for it.)
class WindowStateHost {
 public:
  virtual TriggerState* WindowFunctionState(bool create) = 0;  // throws for sessions
  virtual TriggerState* GlobalFunctionState(bool create) = 0;

 protected:
  ~WindowStateHost() = default;
};

}  // namespace internal
class WindowContext {
 public:
  // The firing window.  window() is for TimeWindow assigners (all but
  // GlobalWindows) and throws std::logic_error otherwise; window_as<W>() is
  // the general form.
  const TimeWindow& window() const { return window_as<TimeWindow>(); }
  template <typename W>
  const W& window_as() const {
    if (window_type_ == nullptr || *window_type_ != typeid(W))
      throw std::logic_error("WindowContext::window_as: the window has another type");
    return *static_cast<const W*>(window_);
  }
  Timestamp current_watermark() const { return watermark_; }
  Timestamp current_processing_time() const { return processing_time_; }
  // The index of the window operator's subtask that fires.
  int subtask_index() const { return subtask_; }
  // True when a record caused this firing (a late record within the allowed
  // lateness, or an element trigger such as CountTrigger); false when a
  // timer did (the watermark or the clock reaching the window's time).
  bool fired_by_element() const { return by_element_; }
  // Emits `value` to side output `tag`, timestamped with the window's
  // max_timestamp() (as Flink); dropped when nobody consumes `tag`.
  template <typename V>
  void output(const OutputTag<V>& tag, std::type_identity_t<V> value) {
    if (side_outputs_ == nullptr) return;
    auto it = side_outputs_->find(tag.id());
    if (it == side_outputs_->end()) return;
    internal::SideOutputAs<V>(it->second, tag.id())->Collect(std::move(value), output_timestamp_);
  }

  // Per-window state of the function (Flink's windowState()): named values
  // of the current key and window, dropped when the window is cleaned up.
  // Not available with merging (session) windows (std::logic_error), as in
  // Flink.  References stay valid until the function returns.
  template <typename V>
  V& window_state(std::string_view name, V init = V()) {
    return state_host_->WindowFunctionState(true)->GetOrCreate<V>(name, std::move(init));
  }
  // Per-key state shared by all windows of the key (Flink's globalState()).
  template <typename V>
  V& global_state(std::string_view name, V init = V()) {
    return state_host_->GlobalFunctionState(true)->GetOrCreate<V>(name, std::move(init));
  }

  // --- for the operator ---
  void SetStateHost(internal::WindowStateHost* host) { state_host_ = host; }
  template <typename W>
  void Set(const W* window, Timestamp watermark, Timestamp processing_time) {
    window_ = window;
    window_type_ = &typeid(W);
    watermark_ = watermark;
    processing_time_ = processing_time;
    output_timestamp_ = window->max_timestamp();
  }
  void SetSideOutputs(const std::map<std::string, internal::OutputBase*>* outs) {
    side_outputs_ = outs;
  }
  void SetSubtask(int subtask) { subtask_ = subtask; }
  void SetFiredByElement(bool by_element) { by_element_ = by_element; }

 private:
  const void* window_ = nullptr;
  const std::type_info* window_type_ = nullptr;
  Timestamp watermark_ = kMinTimestamp;
  Timestamp processing_time_ = kMinTimestamp;
  Timestamp output_timestamp_ = kNoTimestamp;
  const std::map<std::string, internal::OutputBase*>* side_outputs_ = nullptr;
  int subtask_ = 0;
  bool by_element_ = false;
  internal::WindowStateHost* state_host_ = nullptr;
};

}  // namespace tidemark

#endif  // TM_OPERATORS_WINDOW_WINDOW_CONTEXT_H_
