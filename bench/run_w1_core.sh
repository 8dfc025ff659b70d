#!/usr/bin/env bash
# bench/run_w1_core.sh: the W1-core runs of bench/RESULTS.md.
#
#   bench/run_w1_core.sh [BUILD_DIR] [RECORDS] [REPEAT] [EXTRA FLAGS...]
#
# Runs tidemark-bench --job=W1-core at sources/windows 1/1, 2/2, 4/4 and 8/8
# (P_LIST="1 2 4" to choose),
# REPEAT times each (job and baseline alternate inside one process), and prints
# one markdown table row per configuration: best / median / worst job
# records/s, CPU ns per record of the best run, best baseline records/s, the
# ratio of the bests, results_equal and peak RSS.  Needs python3.
set -euo pipefail
BUILD_DIR=${1:-build-bench}
RECORDS=${2:-50000000}
REPEAT=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
BIN="$BUILD_DIR/bench/tidemark-bench"
[ -x "$BIN" ] || { echo "no $BIN: build it first (ninja -C $BUILD_DIR tidemark-bench)" >&2; exit 1; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| sources/windows | job Mrec/s best | median | worst | CPU ns/rec (best run) | baseline Mrec/s best | ratio (bests) | results_equal | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|---|---|"
for p in ${P_LIST:-1 2 4 8}; do
  "$BIN" --job=W1-core --sources=$p --windows=$p --records="$RECORDS" --repeat="$REPEAT" --json "$@" |
    python3 -c '
import json, statistics, sys
d = json.load(sys.stdin)
j = d["job_records_per_s_runs"]; b = d["baseline_records_per_s_runs"]
print("| %d/%d | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %s | %.1f |" % (
    d["sources"], d["windows"], max(j) / 1e6, statistics.median(j) / 1e6, min(j) / 1e6,
    d["cpu_ns_per_record"], max(b) / 1e6 if b else 0, d["ratio"] or 0,
    str(d["results_equal"]).lower(), d["peak_rss_bytes"] / 2**20))
'
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
