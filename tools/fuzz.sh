#!/usr/bin/env bash
# Builds the libFuzzer targets with clang and runs each for a fixed time
# (default 20 s; FUZZ_SECONDS overrides).  Exits non-zero on any finding.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh --with-fuzz
seconds=${FUZZ_SECONDS:-20}
CXX=clang++ cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DTIDEMARK_BUILD_FUZZERS=ON
cmake --build build/fuzz -j "$(nproc)"
for target in line_parser_fuzz flag_parser_fuzz; do
  corpus=tests/fuzz/corpus/${target%_fuzz}
  corpus=${corpus/line_parser/line}
  corpus=${corpus/flag_parser/flags}
  work=$(mktemp -d)
  cp "$corpus"/* "$work"/
  echo "fuzz: $target for ${seconds}s"
  ./build/fuzz/tests/fuzz/$target -max_total_time="$seconds" -max_len=4096 -timeout=10 \
    -print_final_stats=1 "$work" 2>&1 | tail -n 8
  rm -rf "$work"
done
