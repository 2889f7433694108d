#!/usr/bin/env bash
# bfperf side by side with a C floor (benches/floor.c), on fixture copies in tmpfs:
#   1. `bfperf snapshot all` to stdout against a C program that opens, reads and
#      closes the same files and prints them (200 runs each, wall time per run);
#   2. `bfperf stat -I 100` of two specs for 20 s against a C sampler of the same
#      counters (files opened once, pread each tick, absolute-deadline sleeps):
#      CPU time (user + system) of each.
# Run from the repository: bash benches/floor.sh   (needs cc; BFPERF=path to override)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-floor.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/floor" benches/floor.c

per_run() { # N command... -> ms per run
  local n=$1; shift
  local t0 t1
  t0=$(date +%s%N)
  for ((i = 0; i < n; i++)); do "$@" > /dev/null; done
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN {printf "%.3f", (b - a) / n / 1e6}'
}

for gen in bf2 bf3; do
  cp -a "fixtures/$gen/." "$work/$gen"
  dev="$work/$gen/class/hwmon/hwmon3"
  mapfile -t files < <(cd "$dev" && find . -mindepth 2 -maxdepth 2 -type f \
    \( -name 'counter*' -o -name 'event[0-9]*' -o -name enable -o -name count_clock -o -path './pcie*' -o -path './ecc/*' -o -path './clock_measure/*' \) | sort | sed "s|^\.|$dev|")
  b=$(per_run 200 "$bin" --sysfs-root "$work/$gen" snapshot all)
  c=$(per_run 200 "$work/floor" snapshot "${files[@]}")
  echo "$gen snapshot all (${#files[@]} files): bfperf $b ms, C floor $c ms: $(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')x"
done

# Sampling: two specs on the bf2 copy, 20 s at -I 100.
dev="$work/bf2/class/hwmon/hwmon3"
export BFPERF_LOCK_FILE="$work/lock"
"$bin" --sysfs-root "$work/bf2" program tile0 0=MEMORY_READS 1=MEMORY_WRITES > /dev/null
cpu_ms() { # command... -> CPU milliseconds (perf's task-clock, or time's 10 ms ticks)
  if perf stat -x, -e task-clock -o "$work/cpu" "$@" > /dev/null 2>&1; then
    awk -F, '/task-clock/ {printf "%.1f", $1}' "$work/cpu"
  else
    /usr/bin/time -f '%U %S' -o "$work/cpu" "$@" > /dev/null
    awk '{printf "%.1f", ($1 + $2) * 1000}' "$work/cpu"
  fi
}
b=$(cpu_ms "$bin" --sysfs-root "$work/bf2" stat \
  -e 'tile/MEMORY_READS,MEMORY_WRITES/' -e 'pcie/*_BYTE_CNT/' -I 100 --duration 20s -o /dev/null)
samples=()
for t in 0 1 2 3; do samples+=("$dev/tile$t/counter0" "$dev/tile$t/counter1"); done
for p in 0 1; do for r in IN_P IN_NP IN_C OUT_P OUT_NP OUT_C; do samples+=("$dev/pcie$p/${r}_BYTE_CNT"); done; done
c=$(cpu_ms "$work/floor" sample 100 20 "${samples[@]}")
echo "stat -I 100 for 20 s, ${#samples[@]} values: bfperf $b ms CPU, C floor $c ms CPU: $(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')x"
