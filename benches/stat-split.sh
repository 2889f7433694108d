#!/usr/bin/env bash
# `bfperf stat -I 100` taken apart into its start and its ticks, beside the C sampler
# of benches/floor.sh doing the same reads: a short and a long run of each (1 s and
# 11 s), interleaved, on a copy of the bf2 fixture with the 20 values and 8
# `event<N>` read back of floor.sh's stat row. Per round it prints the short runs
# (the start and its first ticks), a tick (the long run less the short one, over the
# ticks between) and the long runs with their ratio. Processor time from perf's
# task-clock. Run from the repository: bash benches/stat-split.sh [--busy]
#   --busy  keeps both cores busy (two `yes`) while it measures
#   needs cc and perf; BFPERF=path to another binary, ROUNDS=rounds (4)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
rounds=${ROUNDS:-4}
[ -x "$bin" ] || cargo build --release -q
. benches/lib.sh
bench_start split "${1:-}"
cc -O2 -o "$work/floor" benches/floor.c
cp -a fixtures/bf2/. "$work/bf2"
stat_row
short=1 long=11 ticks=100 # the -I 100 ticks between the two lengths
cpu_ms() { # command... -> ms of processor time
  perf stat -x, -e task-clock -o "$work/cpu" "$@" > /dev/null 2>&1
  awk -F, '/task-clock/ {printf "%.2f", $1}' "$work/cpu"
}
bfperf() { # SECONDS
  cpu_ms "$bin" --sysfs-root "$work/bf2" stat "${stat_specs[@]}" -I 100 --duration "$1s" -o /dev/null
}
sampler() { cpu_ms "$work/floor" sample 100 "$1" "${samples[@]}"; }
for _ in $(seq "$rounds"); do
  b1=$(bfperf $short) c1=$(sampler $short) b2=$(bfperf $long) c2=$(sampler $long)
  awk -v b1="$b1" -v c1="$c1" -v b2="$b2" -v c2="$c2" -v n=$ticks -v s=$short -v l=$long 'BEGIN {
    printf "%d s: bfperf %.2f ms, C %.2f ms | a tick: bfperf %.1f us, C %.1f us | %d s: bfperf %.2f ms, C %.2f ms: %.2fx\n",
      s, b1, c1, (b2 - b1) / n * 1000, (c2 - c1) / n * 1000, l, b2, c2, b2 / c2 }'
done
