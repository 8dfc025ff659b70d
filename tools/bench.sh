#!/usr/bin/env bash
# Sets up, builds (Release) and runs the benchmark matrix of bench/RESULTS.md:
# bench/run_matrix.sh (W1-core, W1..W6 beside their baseline loops, the
# half-load latency run, the scaling run and its SVG chart), then the
# micro-benchmarks.  Takes about 15 minutes on 2 cores; run it on a quiet
# machine.  Output: the tables on stdout, bench/matrix.jsonl,
# bench/scaling-W1.jsonl, bench/scaling.svg, bench/micro_bench.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDEMARK_BUILD_TESTS=OFF
cmake --build build/release -j "$(nproc)" --target tidemark-bench micro_bench
status=0
bench/run_matrix.sh build/release bench || status=$?
build/release/bench/micro_bench --benchmark_min_time=0.2 | tee bench/micro_bench.txt
exit "$status"
