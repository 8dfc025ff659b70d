#!/usr/bin/env bash
# Sets up, builds and runs every test: clang's thread-safety analysis over
# the libraries, the normal build under ctest, the parsers under libFuzzer,
# then the concurrency tests again under ThreadSanitizer.
#   TIDEMARK_SKIP_TSAN=1 skips the sanitizer pass; FUZZ_SECONDS sets how long
#   each libFuzzer target runs (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's wall time, printed as it ends (CI's time is a budget).
stage_start=$SECONDS
stage() {
  echo "test.sh: $1 took $((SECONDS - stage_start)) s (total $SECONDS s)"
  stage_start=$SECONDS
}
./tools/setup.sh
jobs=$(nproc)

# The timeline test renders its page in headless Chromium.
./tools/setup.sh --with-chromium
# clang: the thread-safety stage below, its compile-fail tests (configured
# only when clang++ is found) and the fuzzers.
./tools/setup.sh --with-fuzz
stage "setup"

# Clang's thread-safety analysis (runtime/core/detail/mutex.h) over the libraries and the
# CLI, as errors: a plain compile (-O0, no debug info, no tests), about a
# minute and a half of CPU.
cmake -S . -B build/thread-safety -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=None \
  -DCMAKE_CXX_FLAGS="-O0 -g0" -DTIDEMARK_THREAD_SAFETY_ANALYSIS=ON -DTIDEMARK_BUILD_TESTS=OFF \
  -DTIDEMARK_BUILD_BENCHMARKS=OFF -DTIDEMARK_BUILD_EXAMPLES=OFF
cmake --build build/thread-safety -j "$jobs" --target tidemark_api tidemark_cli
stage "thread-safety analysis"

# Line tables only (-g1): backtraces keep their files and lines, and the
# build takes about a fifth less time than with full debug info (-g).  -O1:
# this build is most of CI's time, and most of it is the tests' own files,
# each of which instantiates whole jobs for its lambdas; -O1 compiles them
# in 0.7-0.9 of their -O2 time (bench/RESULTS.md, "CI's build").  Speed is
# measured on the Release build (tools/bench.sh), never on this one.
cmake -S . -B build/test -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG"
cmake --build build/test -j "$jobs"
stage "build"
ctest --test-dir build/test --output-on-failure -j "$jobs" -E '^Differential\.'
stage "ctest"
# The randomized differential tests, with their case counts and seed ranges
# shown.
ctest --test-dir build/test --output-on-failure -j "$jobs" -R '^Differential\.' -V |
  grep -E '\[differential\]|tests passed|tests failed|Failed|FAILED|Error'
stage "differential tests"

# The line and flag parsers under libFuzzer, briefly (FUZZ_SECONDS each).
FUZZ_SECONDS=${FUZZ_SECONDS:-20} ./tools/fuzz.sh
stage "fuzzers"

if [ "${TIDEMARK_SKIP_TSAN:-0}" != "1" ]; then
  cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIDEMARK_SANITIZE=thread \
    -DTIDEMARK_BUILD_BENCHMARKS=OFF -DTIDEMARK_BUILD_EXAMPLES=OFF
  # Only the binaries of the concurrency tests (the rest never run here).
  cmake --build build/tsan -j "$jobs" --target tidemark_concurrency_tests
  stage "ThreadSanitizer build"
  # Concurrency tests only; a reduced case count keeps this within CI's time.
  # tests/tsan.supp names the false positives of uninstrumented system
  # libraries (oneTBB's task pool, Abseil's Status reference counts).
  TIDEMARK_STRESS_SCALE=0.2 \
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/tests/tsan.supp" \
    ctest --test-dir build/tsan --output-on-failure -j "$jobs" -L concurrency
  stage "ThreadSanitizer tests"
fi
