#!/usr/bin/env bash
# bench/nexmark/run_suite.sh BINARY OUT.jsonl [tidemark-nexmark flags...]
#
# Runs the Nexmark suite RUNS (default 3) times as separate processes with
# --json, appends every run's objects (with a "run" field) to OUT.jsonl, and
# prints the median of each query's numbers over the runs as a Markdown table
# with the geometric means of the ratios to Flink and to the loop.  A run
# that fails (the binary's exit status) stops the script; a query whose
# results differ from its reference in any run is marked NO, left out of the
# means, and the script exits 1 (results not checked, --reference=false: "-").
# Give --require_equal to make the binary itself fail on unequal results.
#   bench/nexmark/run_suite.sh build/bench/nexmark/tidemark-nexmark /tmp/nx.jsonl \
#       --queries=all --events=2M --parallelism=2 --checkpoint-interval=10s
set -euo pipefail
bin=$1
out=$2
shift 2
runs=${RUNS:-3}
: > "$out"
i=1
while [ "$i" -le "$runs" ]; do
  if ! "$bin" --json "$@" | sed "s/^{/{\"run\":$i,/" >> "$out"; then
    echo "run_suite.sh: run $i failed (see $out for the queries it finished)" >&2
    exit 1
  fi
  i=$((i + 1))
done
python3 - "$out" <<'PY'
import json, math, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["query"], []).append(r)
# q0 ... q22, then variants such as q13-broadcast after their query.
def order_key(q):
    m = re.match(r"q(\d+)(.*)", q)
    return (int(m.group(1)), m.group(2)) if m else (10**6, q)
order = sorted(by, key=order_key)
print("| query | runs | events | cores | time (s) | cores x time | throughput/core | Flink/core | x Flink | 1-thread loop | / loop | equal |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
xf, xl = [], []
for q in order:
    rs = by[q]
    differs = any(r.get("results_equal") is False or r.get("ok") is False for r in rs)
    unchecked = all(r.get("results_equal") is None for r in rs)
    eq = not differs
    med = lambda k: statistics.median(r[k] for r in rs)
    tpc, flink, ref = med("throughput_per_core"), rs[0]["flink_per_core"], med("reference_per_core")
    fx = tpc / flink if flink else None
    lx = tpc / ref if ref else None
    if eq and fx: xf.append(fx)
    if eq and lx: xl.append(lx)
    print("| %s | %d | %d | %.2f | %.2f | %.2f | %.0f K/s | %s | %s | %.0f K/s | %s | %s |" % (
        q, len(rs), rs[0]["events"], med("cores"), med("seconds"), med("cores") * med("seconds"),
        tpc / 1e3, "%.0f K/s" % (flink / 1e3) if flink else "-", "%.1fx" % fx if fx else "-",
        ref / 1e3, "%.2f" % lx if lx else "-", "-" if unchecked and eq else "yes" if eq else "NO"))
g = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
print()
print("Geometric mean over the queries whose results did not differ: %.1fx Flink's Throughput/Cores "
      "(%d queries with a Flink figure), %.2f of the single-thread loop per core (medians over "
      "each query's runs)." % (g(xf), len(xf), g(xl)))
if any(r.get("results_equal") is False or r.get("ok") is False for r in rows):
    sys.exit(1)
PY
