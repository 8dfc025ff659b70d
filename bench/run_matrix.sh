#!/usr/bin/env bash
# bench/run_matrix.sh: issue 6's benchmark matrix, as in bench/RESULTS.md.
#
#   bench/run_matrix.sh [BUILD_DIR] [OUT_DIR]
#
# With BUILD_DIR/bench/tidemark-bench (a Release build; tools/bench.sh makes
# one and calls this), runs at 2 source and 2 window subtasks, each job and
# its baseline loop REPEAT times (default 3; the best run of each counts):
#   W1-core, W1, W2, W3, W4 and W1 again at W4's record count (W4's target is
#   relative to W1 at the same size), W5, W6;
#   W1 at half of the W1 peak just measured (--rate), for the latency target;
#   W1 at p = 1, 2, 4, 8 (bench/scaling.sh), with one worker thread per core
#   and with p worker threads, drawn into OUT_DIR/scaling.svg.
# Writes every JSON line to OUT_DIR/matrix.jsonl and prints the markdown
# table of bench/RESULTS.md on stdout.  Environment: REPEAT, SCALE (multiplies
# every record count; 0.1 for a quick try), SKIP_SCALING=1.
# Run it on a quiet machine: the load average before and after is printed.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=${1:-build/release}
OUT_DIR=${2:-$HERE}
REPEAT=${REPEAT:-3}
SCALE=${SCALE:-1}
BIN="$BUILD_DIR/bench/tidemark-bench"
[ -x "$BIN" ] || { echo "no $BIN: build it first (tools/bench.sh does)" >&2; exit 1; }
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/matrix.jsonl"
: > "$OUT"

records() { awk -v n="$1" -v s="$SCALE" 'BEGIN { printf "%d", n * s }'; }
field() { printf '%s\n' "$1" | sed -n "s/.*\"$2\": *\([^,}]*\).*/\1/p"; }

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
failed=0
# run LABEL ARGS...: one tidemark-bench run, its JSON line tagged with LABEL.
run() {
  local label=$1 line rc=0
  shift
  line=$("$BIN" --sources=2 --windows=2 --repeat="$REPEAT" --json --require_equal "$@") || rc=$?
  if [ -z "$line" ]; then
    echo "$label: tidemark-bench printed nothing (exit $rc)" >&2
    failed=1
    return
  fi
  [ "$rc" = 0 ] || failed=1
  printf '{"label": "%s", %s\n' "$label" "${line#\{}" >> "$OUT"
  echo "$label: $(field "$line" records_per_s) records/s, ratio $(field "$line" ratio)," \
    "equal $(field "$line" results_equal), p99 $(field "$line" p99_latency_ms) ms (exit $rc)" >&2
  LAST=$line
}

run W1-core --job=W1-core --records="$(records 50000000)"
run W1 --job=W1 --records="$(records 50000000)"
w1_peak=$(field "$LAST" records_per_s)
run W2 --job=W2 --records="$(records 10000000)"
run W3 --job=W3 --records="$(records 5000000)"
run W1-at-W4-size --job=W1 --records="$(records 20000000)"
run W4 --job=W4 --records="$(records 20000000)"
run W5 --job=W5 --records="$(records 20000000)"
run W6 --job=W6 --records="$(records 50000000)"
half=$(awk -v r="$w1_peak" 'BEGIN { printf "%d", r / 2 }')
run W1-half-load --job=W1 --records="$(records 20000000)" --rate="$half"
echo "# load average after the matrix: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "wrote $OUT" >&2

# The table: one row per run.
awk '
function num(line, key,    re, s) {
  re = "\"" key "\": *-?[0-9.eE+-]+"
  if (!match(line, re)) return ""
  s = substr(line, RSTART, RLENGTH); sub(/^[^:]*: */, "", s); return s + 0
}
function str(line, key,    re, s) {
  re = "\"" key "\": *(\"[^\"]*\"|true|false|null)"
  if (!match(line, re)) return ""
  s = substr(line, RSTART, RLENGTH); sub(/^[^:]*: */, "", s); gsub(/"/, "", s); return s
}
function m(v) { return v == "" ? "-" : sprintf("%.1f", v / 1e6) }
function f(v, fmt) { return v == "" ? "-" : sprintf(fmt, v) }
BEGIN {
  print "| run | keys | records | job M rec/s | baseline M rec/s | ratio | results equal | CPU ns/rec | p50 / p99 latency ms | bytes per key-window | peak RSS MiB |"
  print "|---|---|---|---|---|---|---|---|---|---|---|"
}
{
  printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s |\n",
    str($0, "label"), num($0, "keys"), num($0, "records"), m(num($0, "records_per_s")),
    m(num($0, "baseline_records_per_s")), f(num($0, "ratio"), "%.2f"), str($0, "results_equal"),
    f(num($0, "cpu_ns_per_record"), "%.1f"), f(num($0, "p50_latency_ms"), "%.2f"),
    f(num($0, "p99_latency_ms"), "%.2f"), f(num($0, "bytes_per_key_window"), "%.1f"),
    f(num($0, "peak_rss_bytes") / 1048576, "%.0f")
}' "$OUT"

if [ "${SKIP_SCALING:-0}" != 1 ]; then
  OUT_DIR="$OUT_DIR" JOB=W1 THREADS="cores p" "$HERE/scaling.sh" "$BUILD_DIR" "$(records 50000000)" "$REPEAT" || failed=1
fi
exit "$failed"
