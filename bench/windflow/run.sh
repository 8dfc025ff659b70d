#!/usr/bin/env bash
# W1 on tidemark beside W1 on WindFlow (issue 25 item 7: "3x WindFlow"), in
# alternated separate processes on the same records; prints each run and the
# medians of the records/s and of the per-round ratios.
#
#   bench/windflow/run.sh WINDFLOW_DIR FASTFLOW_DIR [ROUNDS] [RECORDS] [tidemark-bench]
#
# WINDFLOW_DIR holds WindFlow's wf/ (https://github.com/ParaGroup/WindFlow),
# FASTFLOW_DIR FastFlow's ff/ (https://github.com/fastflow/fastflow); neither
# is a Debian package, so neither is a build dependency: this script compiles
# bench/windflow/w1_windflow.cc against them (g++ -O3, FastFlow's blocking
# queues and no thread pinning: the jobs run more threads than this 2-core
# machine has cores, where spinning queues starve the others).  Each round runs
# tidemark-bench --job=W1, WindFlow's Keyed_Windows and WindFlow's Ffat_Windows
# once, in that order, all with --sources=2 --windows=2 --keys=10000 (WindFlow
# with batches of 1024 records, as tidemark's, and a watermark every 1024
# records per source: its faster settings here).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
wf="${1:?WINDFLOW_DIR}"
ff="${2:?FASTFLOW_DIR}"
rounds="${3:-5}"
records="${4:-10000000}"
bench="${5:-$root/build/bench/tidemark-bench}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
bin="$out/w1_windflow"
g++ -std=c++17 -O3 -DNDEBUG -DNO_DEFAULT_MAPPING -DBLOCKING_MODE -I"$wf/wf" -I"$ff" -pthread \
  "$root/bench/windflow/w1_windflow.cc" -o "$bin" \
  -labsl_hash -labsl_city -labsl_low_level_hash -labsl_raw_hash_set
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1); $(nproc) cores; $(date -u +%FT%TZ)"
common=(--sources=2 --windows=2 --keys=10000 --records="$records")
# The same allocator on both sides: if tidemark-bench links jemalloc (it
# keeps glibc's malloc since ccc418c, see CMakeLists.txt), WindFlow's program
# gets it preloaded.
preload=""
if jemalloc=$(ldd "$bench" | awk '/libjemalloc/ {print $3}') && [ -n "$jemalloc" ]; then
  preload="$jemalloc"
fi
echo "allocator: ${preload:-glibc malloc} on both sides"
for r in $(seq "$rounds"); do
  # Each program's output is parsed after it has ended: a python3 started
  # beside it in a pipe takes a core for tens of milliseconds of a 0.1 s job.
  j=$("$bench" --job=W1 "${common[@]}" --json)
  t=$(python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["results_equal"]; print(d["records_per_s"])' <<<"$j")
  j=$(LD_PRELOAD="$preload" "$bin" "${common[@]}" --batch=1024 --watermark_every=1024 --operator=keyed 2>/dev/null)
  k=$(tail -1 <<<"$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["results_equal"]; print(d["job_records_per_s"])')
  j=$(LD_PRELOAD="$preload" "$bin" "${common[@]}" --batch=1024 --watermark_every=1024 --operator=ffat 2>/dev/null)
  f=$(tail -1 <<<"$j" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["results_equal"]; print(d["job_records_per_s"])')
  echo "round $r: tidemark $t, windflow keyed $k, windflow ffat $f records/s (load $(cut -d' ' -f1 /proc/loadavg))"
  echo "$t $k $f" >> "$out/rates"
done
python3 - "$out/rates" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
med = lambda xs: statistics.median(xs)
t, k, f = (med([r[i] for r in rows]) for i in range(3))
print(f"median records/s: tidemark {t/1e6:.2f} M, WindFlow Keyed_Windows {k/1e6:.2f} M, "
      f"WindFlow Ffat_Windows {f/1e6:.2f} M")
print(f"median of the per-round ratios: tidemark / Keyed_Windows {med([r[0]/r[1] for r in rows]):.2f}x, "
      f"tidemark / Ffat_Windows {med([r[0]/r[2] for r in rows]):.2f}x")
EOF
