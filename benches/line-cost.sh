#!/usr/bin/env bash
# What a cache line touched at each tick costs a sampler that sleeps 100 ms
# between ticks, beside `bfperf stat -I 100`: floor.sh's stat row (10 s, 20 values
# and 8 `event<N>` read back, on a copy of the bf2 fixture), with the C sampler as
# it is and touching LINES more lines of its own memory each tick (benches/floor.c's
# touch:LINES), all three taken in turn (benches/interleave.c), RUNS runs
# each. Prints each one's median processor time and what a line costs a tick. A
# tick that wakes on a core another program kept busy finds its lines gone from the
# caches; benches/tick-pages.py counts how many lines a tick touches.
# Run from the repository: bash benches/line-cost.sh [--busy]
#   --busy  keeps both cores busy (two `yes`) while it measures
#   needs cc; BFPERF=path to another binary, LINES=lines (760: bfperf's tick
#   touched 935 against the C sampler's 176), RUNS=runs of each (5)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
lines=${LINES:-760}
runs=${RUNS:-5}
[ -x "$bin" ] || cargo build --release -q
. benches/lib.sh
bench_start line-cost "${1:-}"
cc -O2 -o "$work/floor" benches/floor.c
cc -O2 -o "$work/interleave" benches/interleave.c
cp -a fixtures/bf2/. "$work/bf2"
stat_row
"$work/interleave" "$runs" \
  -- "$work/floor" sample 100 10 "${samples[@]}" \
  -- "$work/floor" sample 100 10 "touch:$lines" "${samples[@]}" \
  -- "$bin" --sysfs-root "$work/bf2" stat "${stat_specs[@]}" -I 100 --duration 10s -o /dev/null |
  awk -v n="$lines" '{ m[NR] = $1 } END {
    printf "C sampler %.2f ms; touching %d more lines a tick %.2f ms (%.0f ns a line, 100 ticks); bfperf %.2f ms\n",
      m[1], n, m[2], (m[2] - m[1]) / n / 100 * 1e6, m[3] }'
