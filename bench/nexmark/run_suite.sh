#!/bin/sh
# bench/nexmark/run_suite.sh BINARY OUT.jsonl [tidemark-nexmark flags...]
#
# Runs the Nexmark suite RUNS (default 3) times as separate processes with
# --json, appends every run's objects (with a "run" field) to OUT.jsonl, and
# prints the median of each query's numbers over the runs as a Markdown table
# with the geometric means of the ratios to Flink and to the loop.
#   bench/nexmark/run_suite.sh build/bench/nexmark/tidemark-nexmark /tmp/nx.jsonl \
#       --queries=all --events=2M --parallelism=2 --checkpoint-interval=10s
set -eu
bin=$1
out=$2
shift 2
runs=${RUNS:-3}
: > "$out"
i=1
while [ "$i" -le "$runs" ]; do
  "$bin" --json "$@" | sed "s/^{/{\"run\":$i,/" >> "$out"
  i=$((i + 1))
done
python3 - "$out" <<'PY'
import json, math, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["query"], []).append(r)
order = sorted(by, key=lambda q: int(q[1:]))
print("| query | events | cores | time (s) | cores x time | throughput/core | Flink/core | x Flink | 1-thread loop | / loop | equal |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
xf, xl = [], []
for q in order:
    rs = by[q]
    med = lambda k: statistics.median(r[k] for r in rs)
    tpc, flink, ref = med("throughput_per_core"), rs[0]["flink_per_core"], med("reference_per_core")
    eq = all(r["results_equal"] for r in rs)
    fx = tpc / flink if flink else None
    lx = tpc / ref if ref else None
    if fx: xf.append(fx)
    if lx: xl.append(lx)
    print("| %s | %d | %.2f | %.2f | %.2f | %.0f K/s | %s | %s | %.0f K/s | %s | %s |" % (
        q, rs[0]["events"], med("cores"), med("seconds"), med("cores") * med("seconds"), tpc / 1e3,
        "%.0f K/s" % (flink / 1e3) if flink else "-", "%.1fx" % fx if fx else "-",
        ref / 1e3, "%.2f" % lx if lx else "-", "yes" if eq else "NO"))
g = lambda v: math.exp(sum(map(math.log, v)) / len(v)) if v else float("nan")
print()
print("Geometric mean over the queries: %.1fx Flink's Throughput/Cores (%d queries with a Flink figure), "
      "%.2f of the single-thread loop per core (%d runs per query, median)." % (g(xf), len(xf), g(xl), len(rows) // len(order)))
PY
