// tests/window_without_rocksdb.h
//
// Window jobs built by a library compiled without TIDEMARK_ROCKSDB_WINDOWS
// (tests/CMakeLists.txt: window_without_rocksdb links tidemark only), for
// rocksdb_window_test: a program that links tidemark::rocksdb and runs such
// a window on the RocksDB backend keeps its contents on the heap, and the
// job says so at start (docs/checkpoints.md, "State backends").
#ifndef TM_TESTS_WINDOW_WITHOUT_ROCKSDB_H_
#define TM_TESTS_WINDOW_WITHOUT_ROCKSDB_H_

#include <cstdint>
#include <memory>
#include <string>

#include "tidemark/tidemark.h"

namespace tidemark::testing {

// n records (key i % 13, timestamp i, value i % 7) -> key_by -> a tumbling 100 ms reduce
// window named `sums` and a sliding aggregate window named `maxes`, each
// collected as "name key window-start value" lines.
std::shared_ptr<CollectedResults<std::string>> AddWindowsBuiltWithoutRocksDb(
    StreamExecutionEnvironment& env, int64_t n, const std::string& sums, const std::string& maxes);

}  // namespace tidemark::testing

#endif  // TM_TESTS_WINDOW_WITHOUT_ROCKSDB_H_
