# bench/plot_scaling.awk: an SVG line chart of tidemark-bench --json lines.
#
#   awk -f bench/plot_scaling.awk [-v date=YYYY-MM-DD] [-v title=TEXT] \
#       scaling-W1.jsonl [scaling-W1-core.jsonl ...] > scaling.svg
#
# Input: one tidemark-bench --json object per line (flat JSON; parsed with
# match(), so no jq or Python is needed).  Lines are grouped by "job"; each
# job is one line of records_per_s (the best run) against "sources" (the
# parallelism), a whisker over the range of its runs (job_records_per_s_runs)
# when there are several, and a dashed horizontal line at the best
# baseline_records_per_s (the single-threaded plain loop) over its lines.
# The x axis spaces the parallelism values evenly (1 2 4 8: a log2 axis);
# a dotted vertical line marks the machine's core count when it falls inside.
# Title: the job names, the machine (cores, CPU) and the date.  Lines whose
# "ok" is false, or that are not JSON objects, are skipped with a warning on
# stderr.  POSIX awk (mawk, gawk, busybox).

function num(line, key,    re, s) {
  re = "\"" key "\": *-?[0-9][0-9.eE+-]*"
  if (!match(line, re)) return ""
  s = substr(line, RSTART, RLENGTH)
  sub(/^"[^"]*": */, "", s)
  return s + 0
}
function str(line, key,    re, s) {
  re = "\"" key "\": *\"[^\"]*\""
  if (!match(line, re)) return ""
  s = substr(line, RSTART, RLENGTH)
  sub(/^"[^"]*": *"/, "", s)
  sub(/"$/, "", s)
  return s
}
# The numbers of a flat array value, space separated.
function list(line, key,    re, s) {
  re = "\"" key "\": *\\[[^]]*\\]"
  if (!match(line, re)) return ""
  s = substr(line, RSTART, RLENGTH)
  sub(/^"[^"]*": *\[/, "", s)
  sub(/\]$/, "", s)
  gsub(/,/, " ", s)
  return s
}
function xml(s) {
  gsub(/&/, "\\&amp;", s)
  gsub(/</, "\\&lt;", s)
  gsub(/>/, "\\&gt;", s)
  gsub(/"/, "\\&quot;", s)
  return s
}
# 12345678 -> "12.3M"
function human(v) {
  if (v >= 1e9) return sprintf("%.3gG", v / 1e9)
  if (v >= 1e6) return sprintf("%.3gM", v / 1e6)
  if (v >= 1e3) return sprintf("%.3gk", v / 1e3)
  return sprintf("%.3g", v)
}
# A 1-2-2.5-5 step giving about `n` intervals up to `max`.
function nice_step(max, n,    raw, mag, f) {
  raw = max / n
  mag = 1
  while (mag * 10 <= raw) mag *= 10
  while (mag > raw) mag /= 10
  f = raw / mag
  if (f <= 1) return mag
  if (f <= 2) return 2 * mag
  if (f <= 2.5) return 2.5 * mag
  if (f <= 5) return 5 * mag
  return 10 * mag
}
function xpos(p,    i) {
  for (i = 1; i <= np; i++)
    if (ps[i] == p) return px0 + (np == 1 ? pw / 2 : xpad + (i - 1) * (pw - 2 * xpad) / (np - 1))
  return px0
}
function ypos(v) { return py0 + ph - v / ymax * ph }

BEGIN { nj = 0; np = 0; lines = 0 }

/^[ \t]*{/ {
  if ($0 ~ /"ok": *false/) {
    printf("plot_scaling: %s:%d: job failed (%s), skipped\n", FILENAME, FNR, str($0, "error")) > "/dev/stderr"
    next
  }
  job = str($0, "series")  # a named series, else the job
  if (job == "") job = str($0, "job")
  p = num($0, "sources")
  r = num($0, "records_per_s")
  if (job == "" || p == "" || r == "") {
    printf("plot_scaling: %s:%d: no job/sources/records_per_s, skipped\n", FILENAME, FNR) > "/dev/stderr"
    next
  }
  if (!(job in jobidx)) { jobidx[job] = ++nj; jobs[nj] = job; basejob[nj] = str($0, "job") }
  j = jobidx[job]
  if (!(p in pseen)) { pseen[p] = 1; ps[++np] = p }
  rate[j, p] = r
  n = split(list($0, "job_records_per_s_runs"), runs, " ")
  lo[j, p] = r; hi[j, p] = r
  for (k = 1; k <= n; k++) {
    if (runs[k] + 0 < lo[j, p]) lo[j, p] = runs[k] + 0
    if (runs[k] + 0 > hi[j, p]) hi[j, p] = runs[k] + 0
  }
  nruns[j, p] = n
  b = num($0, "baseline_records_per_s")
  if (b != "" && b > base[j]) base[j] = b
  if (windows_differ == "" && num($0, "windows") != p) windows_differ = 1
  cores = num($0, "cores"); cpu = str($0, "cpu")
  records = num($0, "records"); keys = num($0, "keys"); repeat = num($0, "repeat")
  lines++
  next
}
{ if ($0 !~ /^[ \t]*$/) printf("plot_scaling: %s:%d: not a JSON object, skipped\n", FILENAME, FNR) > "/dev/stderr" }

END {
  if (lines == 0) { print "plot_scaling: no data" > "/dev/stderr"; exit 1 }
  # Parallelism values in ascending order (insertion sort; a handful).
  for (i = 2; i <= np; i++) {
    v = ps[i]
    for (k = i - 1; k >= 1 && ps[k] > v; k--) ps[k + 1] = ps[k]
    ps[k + 1] = v
  }
  ymax = 0
  for (j = 1; j <= nj; j++) {
    if (base[j] > ymax) ymax = base[j]
    for (i = 1; i <= np; i++)
      if ((j, ps[i]) in hi && hi[j, ps[i]] > ymax) ymax = hi[j, ps[i]]
  }
  if (ymax <= 0) ymax = 1
  # Series of the same job share one baseline: the best, drawn with the first.
  for (j = 1; j <= nj; j++)
    for (k = 1; k < j; k++)
      if (basejob[k] == basejob[j]) {
        if (base[j] > base[k]) base[k] = base[j]
        base[j] = 0
        break
      }
  step = nice_step(ymax * 1.12, 5)
  ymax = step * int(ymax * 1.12 / step + 0.999)

  W = 720
  px0 = 84; py0 = 78; pw = W - px0 - 120; ph = 262; xpad = 28
  H = py0 + ph + 68 + 22 * nj + 18
  split("#1f6fb4 #d9480f #2f9e44 #7048e8 #c2255c #0c8599", color, " ")
  font = "-apple-system, BlinkMacSystemFont, 'Segoe UI', Helvetica, Arial, sans-serif"

  jobnames = basejob[1]
  for (j = 2; j <= nj; j++) {
    for (k = 1; k < j && basejob[k] != basejob[j]; k++) ;
    if (k == j) jobnames = jobnames ", " basejob[j]
  }
  if (title == "") title = "tidemark-bench " jobnames ": throughput vs parallelism"
  sub_t = cores " cores"
  if (cpu != "") sub_t = sub_t " (" cpu ")"
  if (date != "") sub_t = sub_t " · " date
  sub_t = sub_t " · " human(records) " records, " human(keys) " keys, " (repeat > 1 ? "best of " repeat " runs" : "1 run")

  printf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"%s\" font-size=\"13\">\n", W, H, W, H, font)
  printf("<title>%s</title>\n", xml(title))
  printf("<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n", W, H)
  printf("<text x=\"%d\" y=\"30\" font-size=\"17\" font-weight=\"600\" fill=\"#212529\">%s</text>\n", px0 - 60, xml(title))
  printf("<text x=\"%d\" y=\"52\" font-size=\"12.5\" fill=\"#495057\">%s</text>\n", px0 - 60, xml(sub_t))

  # Grid and y axis.
  printf("<g stroke=\"#e9ecef\" stroke-width=\"1\">\n")
  for (v = step; v <= ymax + step / 1000; v += step)
    printf("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", px0, ypos(v), px0 + pw, ypos(v))
  printf("</g>\n")
  printf("<g fill=\"#495057\" font-size=\"12\" text-anchor=\"end\">\n")
  for (v = 0; v <= ymax + step / 1000; v += step)
    printf("<text x=\"%d\" y=\"%.1f\">%s</text>\n", px0 - 8, ypos(v) + 4, v == 0 ? "0" : human(v))
  printf("</g>\n")
  printf("<text transform=\"translate(%d %.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#212529\">records/s</text>\n", px0 - 56, py0 + ph / 2)

  # x axis.
  printf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#868e96\"/>\n", px0, py0 + ph, px0 + pw, py0 + ph)
  printf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#868e96\"/>\n", px0, py0, px0, py0 + ph)
  printf("<g fill=\"#495057\" font-size=\"12\" text-anchor=\"middle\">\n")
  for (i = 1; i <= np; i++) {
    x = xpos(ps[i])
    printf("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#868e96\"/>\n", x, py0 + ph, x, py0 + ph + 5)
    printf("<text x=\"%.1f\" y=\"%d\">%s</text>\n", x, py0 + ph + 20, ps[i])
  }
  printf("</g>\n")
  xl = windows_differ ? "parallelism (sources)" : "parallelism (sources = window subtasks)"
  printf("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" fill=\"#212529\">%s</text>\n", px0 + pw / 2, py0 + ph + 42, xl)

  # The core count, where it falls between two parallelism values (log2 axis).
  if (np > 1 && cores > ps[1] && cores <= ps[np]) {
    for (i = 2; i <= np && ps[i] < cores; i++) ;
    xa = xpos(ps[i - 1]); xb = xpos(ps[i])
    x = xa + (xb - xa) * (log(cores / ps[i - 1]) / log(ps[i] / ps[i - 1]))
    printf("<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#adb5bd\" stroke-dasharray=\"2 3\"/>\n", x, py0, x, py0 + ph)
    printf("<text x=\"%.1f\" y=\"%d\" font-size=\"11\" fill=\"#868e96\" text-anchor=\"middle\">%d cores</text>\n", x, py0 - 6, cores)
  }

  # Baselines (dashed), then the jobs: whiskers, line, points, values.
  for (j = 1; j <= nj; j++) {
    c = color[(j - 1) % 6 + 1]
    if (base[j] > 0) {
      y = ypos(base[j])
      printf("<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\" opacity=\"0.8\"/>\n", px0, y, px0 + pw, y, c)
      # The label right of the plot, moved down clear of the labels before it.
      ly = y + 4
      for (moved = 1; moved;) {
        moved = 0
        for (k = 1; k < j; k++)
          if ((k in label_y) && ly > label_y[k] - 14 && ly < label_y[k] + 14) { ly = label_y[k] + 14; moved = 1 }
      }
      label_y[j] = ly
      printf("<text x=\"%d\" y=\"%.1f\" font-size=\"11.5\" fill=\"%s\">baseline %s</text>\n", px0 + pw + 6, ly, c, human(base[j]))
    }
  }
  for (j = 1; j <= nj; j++) {
    c = color[(j - 1) % 6 + 1]
    pts = ""
    for (i = 1; i <= np; i++) {
      if (!((j, ps[i]) in rate)) continue
      pts = pts sprintf("%s%.1f,%.1f", pts == "" ? "" : " ", xpos(ps[i]), ypos(rate[j, ps[i]]))
    }
    for (i = 1; i <= np; i++) {
      p = ps[i]
      if (!((j, p) in rate) || nruns[j, p] < 2 || hi[j, p] - lo[j, p] <= 0) continue
      x = xpos(p)
      printf("<g stroke=\"%s\" stroke-width=\"1.2\" opacity=\"0.7\"><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/></g>\n", c, x, ypos(lo[j, p]), x, ypos(hi[j, p]), x - 4, ypos(lo[j, p]), x + 4, ypos(lo[j, p]), x - 4, ypos(hi[j, p]), x + 4, ypos(hi[j, p]))
    }
    printf("<polyline points=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"2.5\" stroke-linejoin=\"round\"/>\n", pts, c)
    for (i = 1; i <= np; i++) {
      p = ps[i]
      if (!((j, p) in rate)) continue
      x = xpos(p); y = ypos(rate[j, p])
      printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"#ffffff\" stroke=\"%s\" stroke-width=\"2\"/>\n", x, y, c)
      # The value above the point, unless another job's point is just above
      # it (its label goes there): then below, or right where the axis is near.
      crowded = 0
      for (k = 1; k <= nj; k++)
        if (k != j && ((k, p) in rate) && (rate[k, p] > rate[j, p] || (rate[k, p] == rate[j, p] && k < j)) && ypos(rate[k, p]) > y - 20)
          crowded = 1
      if (!crowded) { tx = x; ty = y - 10; anchor = "middle" }
      else if (y + 19 < py0 + ph - 2) { tx = x; ty = y + 19; anchor = "middle" }
      else { tx = x + 9; ty = y + 4; anchor = "start" }
      printf("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11.5\" font-weight=\"600\" fill=\"%s\" text-anchor=\"%s\" paint-order=\"stroke\" stroke=\"#ffffff\" stroke-width=\"3\">%s</text>\n", tx, ty, c, anchor, human(rate[j, p]))
    }
  }

  # Legend, under the x axis label: a row per job, the job then its baseline;
  # then a note on what the marks mean.
  ly = py0 + ph + 68
  for (j = 1; j <= nj; j++) {
    c = color[(j - 1) % 6 + 1]
    lx = px0 - 60
    printf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2.5\"/>\n", lx, ly, lx + 26, ly, c)
    printf("<circle cx=\"%d\" cy=\"%d\" r=\"4\" fill=\"#ffffff\" stroke=\"%s\" stroke-width=\"2\"/>\n", lx + 13, ly, c)
    printf("<text x=\"%d\" y=\"%d\" fill=\"#212529\">%s</text>\n", lx + 34, ly + 4, xml(jobs[j]))
    if (base[j] > 0) {
      lx = px0 + 290
      printf("<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"6 4\"/>\n", lx, ly, lx + 26, ly, c)
      printf("<text x=\"%d\" y=\"%d\" fill=\"#212529\">%s baseline (plain single-threaded loop)</text>\n", lx + 34, ly + 4, xml(basejob[j]))
    }
    ly += 22
  }
  note = "Points: " (repeat > 1 ? "best of " repeat " runs (whiskers: their range)" : "one run") "; dashed: best run of a plain loop computing the same results."
  printf("<text x=\"%d\" y=\"%d\" font-size=\"11.5\" fill=\"#868e96\">%s</text>\n", px0 - 60, ly + 6, xml(note))
  printf("</svg>\n")
}
