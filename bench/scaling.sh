#!/usr/bin/env bash
# bench/scaling.sh: tidemark-bench throughput against parallelism, as JSON
# lines and an SVG line chart (issue 6 item 4).
#
#   bench/scaling.sh BUILD_DIR [RECORDS] [REPEAT] [EXTRA tidemark-bench FLAGS...]
#
# For each job in $JOB and each p in $P_LIST runs
#   BUILD_DIR/bench/tidemark-bench --job=JOB --sources=p --windows=p
#       --records=RECORDS --repeat=REPEAT --json [EXTRA FLAGS...]
# appends its JSON line to OUT_DIR/scaling-JOB.jsonl (rewritten per run of
# this script), and draws every job's records/s (best run; whiskers over the
# runs) against p, with the baseline loop's records/s as a dashed horizontal
# line, into $SVG (bench/plot_scaling.awk; no Python or jq needed).
#
# Environment:
#   JOB      jobs, space separated (default "W1"; JOB="W1 W1-core" plots both)
#   P_LIST   parallelism values (default "1 2 4 8")
#   OUT_DIR  where the .jsonl files go (default: this script's directory)
#   SVG      the chart (default OUT_DIR/scaling.svg)
#   THREADS  "cores" (default): the arena has one worker thread per core at
#            every p; "p": also a second series with --threads=p, where the
#            threads outnumber the cores from p = 4 on here (the runtime must
#            not collapse: no busy spinning); "cores p" runs both
#   PLOT_ONLY=1  redraw $SVG from the existing .jsonl files without running
#
# Defaults: RECORDS 50000000, REPEAT 3.  Run it on a quiet machine: the
# load average before and after is printed.  A job that fails (or whose
# results differ from the baseline's) is reported and the run goes on.
set -euo pipefail

usage() { sed -n '2,/^set -e/p' "$0" | sed -n 's/^# \{0,1\}//p' >&2; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD_DIR=$1
RECORDS=${2:-50000000}
REPEAT=${3:-3}
shift $(( $# < 3 ? $# : 3 ))
JOBS=${JOB:-W1}
P_LIST=${P_LIST:-1 2 4 8}
OUT_DIR=${OUT_DIR:-$HERE}
SVG=${SVG:-$OUT_DIR/scaling.svg}
BIN="$BUILD_DIR/bench/tidemark-bench"
mkdir -p "$OUT_DIR"

THREADS=${THREADS:-cores}
# series_file JOB MODE: the .jsonl file of a series.
series_file() {
  if [ "$2" = p ]; then echo "$OUT_DIR/scaling-$1-threads-p.jsonl"; else echo "$OUT_DIR/scaling-$1.jsonl"; fi
}
files=()
for job in $JOBS; do for mode in $THREADS; do files+=("$(series_file "$job" "$mode")"); done; done

if [ "${PLOT_ONLY:-0}" != 1 ]; then
  [ -x "$BIN" ] || { echo "no $BIN: build it first (ninja -C $BUILD_DIR tidemark-bench)" >&2; exit 1; }
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  failed=0
  for job in $JOBS; do
    for mode in $THREADS; do
      out=$(series_file "$job" "$mode")
      : > "$out"
      for p in $P_LIST; do
        rc=0
        extra=()
        label=$job
        if [ "$mode" = p ]; then extra=(--threads="$p"); label="$job, $p worker threads"; fi
        line=$("$BIN" --job="$job" --sources="$p" --windows="$p" --records="$RECORDS" \
          --repeat="$REPEAT" --json "${extra[@]}" "$@") || rc=$?
        if [ -n "$line" ] && [ "$mode" = p ]; then
          line="{\"series\": \"$job, p worker threads\", ${line#\{}"
        elif [ -n "$line" ] && [ "$THREADS" != cores ]; then
          line="{\"series\": \"$job, one worker thread per core\", ${line#\{}"
        fi
        if [ -z "$line" ]; then
          echo "$job p=$p: tidemark-bench printed nothing (exit $rc)" >&2
          failed=1
          continue
        fi
        printf '%s\n' "$line" >> "$out"
        # A one-line summary from the flat JSON (sed: no jq needed).
        field() { printf '%s\n' "$line" | sed -n "s/.*\"$1\": *\([^,}]*\).*/\1/p"; }
        echo "$label p=$p: job $(field records_per_s) records/s, baseline $(field baseline_records_per_s)," \
          "ratio $(field ratio), results_equal $(field results_equal), CPU $(field cpu_ns_per_record) ns/record" \
          "(exit $rc)" >&2
        [ "$rc" = 0 ] || failed=1
        # Results that differ from the baseline's fail the script (the
        # summary line alone did not).
        # (null: not compared, --skip_baseline.)
        [ "$(field results_equal)" != false ] || { echo "$label p=$p: results differ" >&2; failed=1; }
      done
      echo "wrote $out" >&2
    done
  done
  echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
fi

awk -f "$HERE/plot_scaling.awk" -v date="$(date -u '+%Y-%m-%d')" "${files[@]}" > "$SVG"
echo "wrote $SVG" >&2
exit "${failed:-0}"
