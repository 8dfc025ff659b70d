#!/usr/bin/env bash
# What a user pays to compile a one-window job (issue 11): wall and user
# seconds and peak memory of `g++ -std=c++20 -O2 -c` on
# bench/compile_cost_job.cc, N separate runs (default 5), and the number of
# preprocessed lines.  Run on a quiet machine; report the median.
#   bench/compile_cost.sh [N] [compiler]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-5}"
cxx="${2:-g++}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "compiler: $("$cxx" --version | head -1)"
echo "preprocessed lines: $("$cxx" -std=c++20 -O2 -I"$root" -E "$root/bench/compile_cost_job.cc" | wc -l)"
for i in $(seq "$n"); do
  /usr/bin/time -f "run $i: %e s wall, %U s user, %M KB peak" \
    "$cxx" -std=c++20 -O2 -I"$root" -c "$root/bench/compile_cost_job.cc" -o "$tmp/job.o"
done
