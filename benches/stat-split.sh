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
work=$(mktemp -d /dev/shm/bfperf-split.XXXXXX 2>/dev/null || mktemp -d)
busy=()
cleanup() {
  [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
if [ "${1:-}" = --busy ]; then
  for _ in 1 2; do yes > /dev/null & busy+=($!); done
fi
cc -O2 -o "$work/floor" benches/floor.c
cp -a fixtures/bf2/. "$work/bf2"
dev="$work/bf2/class/hwmon/hwmon3"
export BFPERF_LOCK_FILE="$work/lock" BFPERF_STATE_DIR="$work/state"
"$bin" --sysfs-root "$work/bf2" program tile0 0=MEMORY_READS 1=MEMORY_WRITES > /dev/null
samples=()
for t in 0 1 2 3; do
  samples+=("$dev/tile$t/counter0" "$dev/tile$t/counter1" "check:$dev/tile$t/event0" "check:$dev/tile$t/event1")
done
for p in 0 1; do for r in IN_P IN_NP IN_C OUT_P OUT_NP OUT_C; do samples+=("$dev/pcie$p/${r}_BYTE_CNT"); done; done
short=1 long=11 ticks=100 # the -I 100 ticks between the two lengths
cpu_ms() { # command... -> ms of processor time
  perf stat -x, -e task-clock -o "$work/cpu" "$@" > /dev/null 2>&1
  awk -F, '/task-clock/ {printf "%.2f", $1}' "$work/cpu"
}
bfperf() { # SECONDS
  cpu_ms "$bin" --sysfs-root "$work/bf2" stat -e 'tile/MEMORY_READS,MEMORY_WRITES/' \
    -e 'pcie/*_BYTE_CNT/' -I 100 --duration "$1s" -o /dev/null
}
sampler() { cpu_ms "$work/floor" sample 100 "$1" "${samples[@]}"; }
for _ in $(seq "$rounds"); do
  b1=$(bfperf $short) c1=$(sampler $short) b2=$(bfperf $long) c2=$(sampler $long)
  awk -v b1="$b1" -v c1="$c1" -v b2="$b2" -v c2="$c2" -v n=$ticks -v s=$short -v l=$long 'BEGIN {
    printf "%d s: bfperf %.2f ms, C %.2f ms | a tick: bfperf %.1f us, C %.1f us | %d s: bfperf %.2f ms, C %.2f ms: %.2fx\n",
      s, b1, c1, (b2 - b1) / n * 1000, (c2 - c1) / n * 1000, l, b2, c2, b2 / c2 }'
done
