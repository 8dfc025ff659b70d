# Builds TARGET (an object library of a file that must not compile) and
# fails unless the build fails and its output holds every message below
# (one compile for all of a file's cases).
#   cmake -DBINARY_DIR=<build dir> -DTARGET=<target> -P expect_messages.cmake
set(MESSAGES
  "tidemark: a keyed process function's on_timer must be on_timer(Timestamp, its timer context"
  "tidemark: the timer callback is on_timer(Timestamp, OnTimerContext&, Collector<Out>&), not Flink's onTimer"
  "tidemark: a keyed stream's process(f) takes a KeyedProcessFunction<K, In, Out>"
  "tidemark: the KeyedProcessFunction<K, In, Out>'s K must be the key type that the key_by selector returns"
  "tidemark: the KeyedProcessFunction<K, In, Out>'s In must be the stream's record type"
  "tidemark: a KeyedProcessFunction runs on a keyed stream: key_by(...).process(f)"
  "tidemark: map(f)'s f returns void"
  "tidemark: map(f) needs f(const T&) -> Out or f(T&&) -> Out"
  "tidemark: filter(f) needs f(const T&) -> bool"
  "tidemark: flat_map(f) needs f(const T&, Collector<Out>&) or f(T&&, Collector<Out>&), which emits"
  "tidemark: flat_map(f) needs f(const T&, Collector<Out>&) or f(T&&, Collector<Out>&), T the stream's"
  "tidemark: add_sink(f) needs f(T&&), f(const T&), f(T) or f(T&&, Timestamp)"
  "tidemark: reduce(f) needs f(const T&, const T&) -> T"
  "tidemark: sum(field) needs a numeric field"
  "tidemark: aggregate(agg) needs agg.create_accumulator() -> Acc, agg.add(const T&, Acc) -> Acc"
  "tidemark: aggregate(agg) on merging windows (sessions) needs agg.merge(Acc, Acc) -> Acc"
  "tidemark: key_by(f) needs a key selector f(const T&) -> K"
  "tidemark: a stream's records must be copyable")
# Nor may a case's message be followed by the compiler's own error on what
# it names (the library stops at the static_assert).  Regular expressions:
# the quotes are the locale's.
set(FORBIDDEN
  "has no member named [^ ]*merge[^ ]*")
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} --target ${TARGET}
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled; every case in it must fail")
endif()
set(all "${out}${err}")
set(missing 0)
foreach(m IN LISTS MESSAGES)
  string(FIND "${all}" "${m}" at)
  if(at EQUAL -1)
    message(SEND_ERROR "not printed: ${m}")
    set(missing 1)
  endif()
endforeach()
foreach(m IN LISTS FORBIDDEN)
  string(REGEX MATCH "${m}" found "${all}")
  if(found)
    message(SEND_ERROR "printed, after the library's message: ${found}")
    set(missing 1)
  endif()
endforeach()
if(missing)
  message(FATAL_ERROR "the compiler's output:\n${all}")
endif()
message(STATUS "every message printed")
