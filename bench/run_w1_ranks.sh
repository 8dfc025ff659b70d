#!/usr/bin/env bash
# bench/run_w1_ranks.sh: issue 14's W1 across MPI ranks, as in bench/RESULTS.md.
#
#   bench/run_w1_ranks.sh [BUILD_DIR] [RECORDS] [RUNS]
#
# Runs tidemark-bench --job=W1 (2 sources, 2 window subtasks, 10 000 keys,
# RECORDS records, default 50 M: W1's size in the matrix) as
#   1 process x 2 worker threads      (--threads=2, no mpirun)
#   2 MPI ranks x 1 worker thread     (mpirun -n 2 ... --threads=1)
# RUNS separate processes of each (default 5), alternating, every one with
# --require_equal (rank 0 runs the baseline loop after the job and compares);
# prints every run, then per configuration the median and range of job
# records/s and of bytes sent between ranks per record.  Environment:
# MPIRUN (default mpirun), MPIRUN_FLAGS (default --oversubscribe; as root the
# script also allows mpirun to run as root), RANKS (default 2).  Needs python3.
set -euo pipefail
BUILD_DIR=${1:-build/release}
RECORDS=${2:-50000000}
RUNS=${3:-5}
RANKS=${RANKS:-2}
MPIRUN=${MPIRUN:-mpirun}
MPIRUN_FLAGS=${MPIRUN_FLAGS:---oversubscribe}
BIN="$BUILD_DIR/bench/tidemark-bench"
[ -x "$BIN" ] || { echo "no $BIN: build it first (ninja -C $BUILD_DIR tidemark-bench)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
FLAGS=(--job=W1 --sources=2 --windows=2 --keys=10000 --records="$RECORDS" --json --require_equal)
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
# run LABEL COMMAND...: one process (or one mpirun), its JSON line tagged.
run() {
  local label=$1 line rc=0
  shift
  line=$("$@") || rc=$?
  if [ -z "$line" ] || [ "$rc" != 0 ]; then
    echo "$label: exit $rc, output: $line" >&2
    failed=1
  fi
  [ -n "$line" ] && printf '%s\t%s\n' "$label" "$line" >> "$OUT"
  return 0
}
for _ in $(seq 1 "$RUNS"); do
  run "1 process x 2 threads" "$BIN" "${FLAGS[@]}" --threads=2
  # shellcheck disable=SC2086
  run "$RANKS ranks x 1 thread" "$MPIRUN" -n "$RANKS" $MPIRUN_FLAGS "$BIN" "${FLAGS[@]}" --threads=1
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$OUT" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    label, js = line.rstrip("\n").split("\t", 1)
    runs.setdefault(label, []).append(json.loads(js))
for label, ds in runs.items():
    for d in ds:
        print("%-22s %6.1f M records/s  %6.2f bytes/record  CPU %5.1f ns/record  equal %s  "
              "p99 %.2f ms  peak RSS %.0f MiB" % (
                  label, d["records_per_s"] / 1e6, d.get("bytes_per_record", 0.0),
                  d["cpu_ns_per_record"], str(d["results_equal"]).lower(),
                  d["p99_latency_ms"] or -1, d["peak_rss_bytes"] / 2**20))
print()
print("| configuration | runs | M records/s median | range | bytes/record median | range "
      "| remote records (median) | CPU ns/record median | results_equal |")
print("|---|---|---|---|---|---|---|---|---|")
for label, ds in runs.items():
    r = [d["records_per_s"] / 1e6 for d in ds]
    b = [d.get("bytes_per_record", 0.0) for d in ds]
    rr = [d.get("remote_records", 0) for d in ds]
    c = [d["cpu_ns_per_record"] for d in ds]
    eq = all(d["results_equal"] is True for d in ds)
    print("| %s | %d | %.1f | %.1f-%.1f | %.2f | %.2f-%.2f | %d | %.1f | %s |" % (
        label, len(ds), statistics.median(r), min(r), max(r), statistics.median(b), min(b),
        max(b), statistics.median(rr), statistics.median(c), str(eq).lower()))
EOF
exit "$failed"
