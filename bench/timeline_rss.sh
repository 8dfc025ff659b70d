#!/bin/bash
# The timeline recorder's memory over a paced run (bench/RESULTS.md, "The
# timeline recorder's memory"): `tidemark run` on 4 generated files of
# `key,ts` lines (100 keys, 1 ms of event time a line) at --rate=2000/s per
# source, tumbling 1 s windows over 2 window subtasks (about 200 firings a
# second), watermarks every 50 ms, --timeline; the process's VmRSS sampled
# every 10 s.  Usage: bench/timeline_rss.sh TIDEMARK_BINARY SECONDS [DIR]
set -euo pipefail
bin=$1
seconds=$2
dir=${3:-$(mktemp -d)}
lines=$((2000 * seconds))
for s in 0 1 2 3; do
  [ -s "$dir/in$s.$lines" ] || awk -v s=$s -v n=$lines \
    'BEGIN{for(i=0;i<n;i++) printf "k%d,%d\n", (i*7+s)%100, i + s*37}' > "$dir/in$s.$lines"
done
"$bin" run --input="$dir/in0.$lines" --input="$dir/in1.$lines" --input="$dir/in2.$lines" \
  --input="$dir/in3.$lines" --fields=key,ts --parallelism=2 --window=tumbling:1s \
  --rate=2000/s --watermark-interval=50ms --timeline="$dir/timeline.$$.html" \
  > /dev/null 2> "$dir/err.$$" &
pid=$!
start=$(date +%s)
while kill -0 $pid 2> /dev/null; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2> /dev/null || true)
  [ -n "$rss" ] && echo "t=$(($(date +%s) - start))s VmRSS=${rss}kB"
  sleep 10
done
wait $pid
cat "$dir/err.$$"
echo "page: $(stat -c %s "$dir/timeline.$$.html") bytes"
