#!/usr/bin/env bash
# Sets up, builds (Release) and runs the main demo: `tidemark demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
./tools/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DTIDEMARK_BUILD_TESTS=OFF
cmake --build build/release -j "$(nproc)"
exec ./build/release/tools/tidemark demo "$@"
