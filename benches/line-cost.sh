#!/usr/bin/env bash
# What the memory a tick touches costs a sampler that sleeps 100 ms between
# ticks, beside `bfperf stat -I 100`: floor.sh's stat row (10 s, 20 values and 8
# `event<N>` read back, on a copy of the bf2 fixture), with the C sampler as it is
# and touching more each tick (benches/floor.c's touch:, chase: and code:):
#   LINES lines ten to a 4 KiB page (spread as a bfperf tick's are), each load
#   independent of the others; the same lines packed 64 to a page; one line on each
#   of LINES/10 pages; a chain through CHASE lines, ten to a page in a shuffled
#   order, each load waiting for the last; CODE functions of a line each, eight to
#   a page, called in a shuffled order (generated here).
# All seven are taken in turn (benches/interleave.c), RUNS runs each. Prints each
# one's median processor time and what each kind of line, and a page, costs a
# tick. A tick that wakes on a core another program kept busy finds its lines gone
# from the caches and its pages from the TLB; benches/tick-pages.py counts how many
# of each a bfperf tick touches.
# Run from the repository: bash benches/line-cost.sh [--busy]
#   --busy  keeps both cores busy (two `yes`) while it measures
#   needs cc; BFPERF=path to another binary, LINES=lines (760: bfperf's tick
#   touched 935 against the C sampler's 176), CHASE=lines (400), CODE=functions
#   (300), RUNS=runs of each (5)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
lines=${LINES:-760}
chase=${CHASE:-400}
code=${CODE:-300}
runs=${RUNS:-5}
[ -x "$bin" ] || cargo build --release -q
. benches/lib.sh
bench_start line-cost "${1:-}"
# CODE functions, each alone on its line and eight to a page (aligned to 512
# bytes), called through a table in a shuffled order.
awk -v n="$code" 'BEGIN {
  srand(1)
  for (i = 0; i < n; i++) { order[i] = i; printf "__attribute__((noinline, aligned(512))) unsigned long long f%d(unsigned long long x) { return x * %d + %d; }\n", i, 2 * i + 3, i }
  for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = order[i]; order[i] = order[j]; order[j] = t }
  printf "static unsigned long long (*const table[])(unsigned long long) = {"
  for (i = 0; i < n; i++) printf "%sf%d", (i ? ", " : ""), order[i]
  print "};"
  print "unsigned long long run_code(long n) { unsigned long long x = 1; for (long i = 0; i < n; i++) x = table[i](x); return x; }"
}' > "$work/code.c"
cc -O2 -o "$work/floor" benches/floor.c
cc -O2 -DCODE_LINES -o "$work/floor-code" benches/floor.c "$work/code.c"
cc -O2 -o "$work/interleave" benches/interleave.c
cp -a fixtures/bf2/. "$work/bf2"
stat_row
pages=$((lines / 10))
"$work/interleave" "$runs" \
  -- "$work/floor" sample 100 10 "${samples[@]}" \
  -- "$work/floor" sample 100 10 "touch:$lines" "${samples[@]}" \
  -- "$work/floor" sample 100 10 "touch:$lines:64" "${samples[@]}" \
  -- "$work/floor" sample 100 10 "touch:$pages:1" "${samples[@]}" \
  -- "$work/floor" sample 100 10 "chase:$chase" "${samples[@]}" \
  -- "$work/floor-code" sample 100 10 "code:$code" "${samples[@]}" \
  -- "$bin" --sysfs-root "$work/bf2" stat "${stat_specs[@]}" -I 100 --duration 10s -o /dev/null |
  awk -v n="$lines" -v p="$pages" -v c="$chase" -v f="$code" '{ m[NR] = $1 } END {
    ns = 1e6 / 100 # ms over 100 ticks, in ns a tick
    printf "C sampler %.2f ms; bfperf %.2f ms (%.2fx)\n", m[1], m[7], m[7] / m[1]
    printf "%d more lines a tick, ten to a page: %.2f ms (%.0f ns a line)\n", n, m[2], (m[2] - m[1]) / n * ns
    printf "the same packed, 64 to a page: %.2f ms (%.0f ns a line)\n", m[3], (m[3] - m[1]) / n * ns
    printf "one line on each of %d more pages: %.2f ms (%.0f ns a page)\n", p, m[4], (m[4] - m[1]) / p * ns
    printf "a chain through %d lines: %.2f ms (%.0f ns a line)\n", c, m[5], (m[5] - m[1]) / c * ns
    printf "%d functions a line each: %.2f ms (%.0f ns a line of code)\n", f, m[6], (m[6] - m[1]) / f * ns }'
