#!/usr/bin/env python3
"""bench/nexmark/chart.py IN.jsonl OUT.svg [TITLE]

Draws tidemark's Nexmark Throughput/Cores per query beside Flink's published
figure (nexmark/nexmark, Flink 1.13) and the query's single-thread loop, as
log-scale horizontal bars, from the JSON lines run_suite.sh writes (the
median over the runs of each query).  Standard library only: the SVG is
written by hand.
"""
import json
import math
import statistics
import sys
from xml.sax.saxutils import escape


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    title = sys.argv[3] if len(sys.argv) > 3 else "Nexmark Throughput/Cores: tidemark vs Flink"
    by = {}
    for line in open(src):
        if line.strip():
            r = json.loads(line)
            by.setdefault(r["query"], []).append(r)
    if not by:
        sys.exit("chart.py: no rows in " + src)
    queries = sorted(by, key=lambda q: int(q[1:]))
    rows = []
    for q in queries:
        rs = by[q]
        rows.append((q,
                     statistics.median(r["throughput_per_core"] for r in rs),
                     rs[0]["flink_per_core"],
                     statistics.median(r["reference_per_core"] for r in rs)))

    series = [("tidemark", "#1f77b4", 1), ("1-thread loop", "#9ecae1", 3), ("Flink 1.13 (published)", "#ff7f0e", 2)]
    values = [v for row in rows for v in row[1:] if v > 0]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values)))
    left, right, top, bar, gap = 60, 150, 50, 7, 8
    width = 900
    plot_w = width - left - right
    group_h = bar * len(series) + gap
    height = top + group_h * len(rows) + 50

    def x(v):
        return left + plot_w * (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    def fmt(v):
        return "%.0f M/s" % (v / 1e6) if v >= 1e7 else "%.1f M/s" % (v / 1e6) if v >= 1e6 else "%.0f K/s" % (v / 1e3)

    s = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (width, height),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>' % (left, escape(title)),
         '<text x="%d" y="36" fill="#555">events per second per core used (log scale); %s</text>' % (
             left, escape("%d events per query, parallelism %s, median of %d runs" % (
                 by[queries[0]][0]["events"], by[queries[0]][0].get("parallelism", "?"), len(by[queries[0]]))))]
    decade = lo
    while decade <= hi * 1.0001:
        for m in range(1, 10):
            v = decade * m
            if v > hi * 1.0001:
                break
            xv = x(v)
            s.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s"/>' % (
                xv, top - 4, xv, top + group_h * len(rows), "#bbb" if m == 1 else "#eee"))
            if m == 1:
                s.append('<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>' % (
                    xv, top + group_h * len(rows) + 14, fmt(v)))
        decade *= 10
    for i, (q, tm, flink, loop) in enumerate(rows):
        y0 = top + i * group_h
        s.append('<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>' % (
            left - 6, y0 + bar * len(series) / 2, q))
        vals = {1: tm, 2: flink, 3: loop}
        for j, (name, color, idx) in enumerate(series):
            v = vals[idx]
            y = y0 + j * bar
            if v <= 0:
                s.append('<text x="%d" y="%d" font-size="8" fill="#888">no Flink figure</text>' % (left + 2, y + bar - 1))
                continue
            s.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %s</title></rect>' % (
                left, y, max(x(v) - left, 1), bar - 1, color, q, escape(name), fmt(v)))
        label = "%.0fx Flink" % (tm / flink) if flink > 0 else ""
        s.append('<text x="%.1f" y="%d" font-size="9">%s %s</text>' % (
            x(tm) + 4, y0 + bar - 1, fmt(tm), label))
    ly = top + group_h * len(rows) + 30
    for j, (name, color, _) in enumerate(series):
        s.append('<rect x="%d" y="%d" width="12" height="8" fill="%s"/><text x="%d" y="%d">%s</text>' % (
            left + j * 200, ly, color, left + j * 200 + 16, ly + 8, escape(name)))
    s.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(s) + "\n")


if __name__ == "__main__":
    main()
