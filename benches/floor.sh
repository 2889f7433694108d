#!/usr/bin/env bash
# bfperf side by side with its floors, on fixture copies in tmpfs, each ratio beside
# its goal:
#   1. start-up: `bfperf --version` against a minimal Rust program (one println!),
#      built here by the same rustc with the release profile's options (goal 1.3x),
#      and both against a minimal C program (references: a process's start);
#   2. on the BlueField-2 and -3 fixtures, `read BLOCK`, `blocks`, `events BLOCK` and
#      `snapshot all` against benches/floor.c doing the same file work and printing
#      it: the block's value files read; the device and block directories listed;
#      the block's event_list printed; every value file read (goal 1.3x);
#   3. `bfperf stat -I 100` of two specs for 20 s against a C sampler of the same
#      counters (files opened once, pread each tick, absolute-deadline sleeps)
#      (goal 1.5x).
# 1 and 2 are processor time per run (user + system, perf's task-clock over RUNS
# runs), in five interleaved rounds, with the median of the rounds' ratios: processor
# time, unlike wall time, does not grow when other programs share the cores. Without
# perf, wall time per run. 3 is the processor time of each whole run.
# Run from the repository: bash benches/floor.sh [--busy]
#   --busy  keeps both cores busy (two `yes`) while it measures, as the goals ask
#   needs cc and rustc; BFPERF=path to another binary, RUNS=runs a round (200)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
runs=${RUNS:-200}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-floor.XXXXXX 2>/dev/null || mktemp -d)
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
echo 'fn main() { println!("minimal 0.1.0"); }' > "$work/minimal.rs"
rustc --edition 2021 -C opt-level=3 -C strip=symbols -o "$work/minimal" "$work/minimal.rs"
printf '#include <stdio.h>\nint main(void) { puts("minimal 0.1.0"); return 0; }\n' > "$work/minimal.c"
cc -O2 -o "$work/minimal-c" "$work/minimal.c"

per_run() { # N command... -> ms of processor time per run (wall time without perf)
  local n=$1; shift
  if perf stat -x, -r "$n" -e task-clock -o "$work/cpu" "$@" > /dev/null 2>&1; then
    awk -F, '/task-clock/ {printf "%.3f", $1}' "$work/cpu"
    return
  fi
  local t0 t1
  t0=$(date +%s%N)
  for ((i = 0; i < n; i++)); do "$@" > /dev/null; done
  t1=$(date +%s%N)
  awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN {printf "%.3f", (b - a) / n / 1e6}'
}

verdict() { # RATIO GOAL (- for a reference without one)
  [ "$2" = - ] && { printf 'a reference, no goal'; return; }
  awk -v r="$1" -v g="$2" 'BEGIN {printf "%s (goal %sx)", (r <= g ? "within goal" : "OVER"), g}'
}

side_by_side() { # LABEL GOAL -- bfperf command... -- floor command... : five interleaved rounds
  local label=$1 goal=$2 a=() c=() ratios=() rb rc
  shift 3
  while [ "$1" != -- ]; do a+=("$1"); shift; done
  shift
  c=("$@")
  for _ in 1 2 3 4 5; do
    rb=$(per_run "$runs" "${a[@]}")
    rc=$(per_run "$runs" "${c[@]}")
    ratios+=("$rb $rc $(awk -v b="$rb" -v c="$rc" 'BEGIN {printf "%.3f", b / c}')")
  done
  printf '%s\n' "${ratios[@]}" | sort -k3 -n | sed -n 3p | {
    read -r rb rc r
    echo "$label: bfperf $rb ms, floor $rc ms: ${r}x, $(verdict "$r" "$goal")"
  }
}

# What the one-shot goals stand on: a process's start. A C program that prints one
# line is the least any of the floors below costs.
side_by_side "reference: a minimal Rust program against a minimal C one" - -- "$work/minimal" -- "$work/minimal-c"
side_by_side "start-up (--version against a minimal Rust program)" 1.3 -- "$bin" --version -- "$work/minimal"
side_by_side "start-up (--version against a minimal C program)" - -- "$bin" --version -- "$work/minimal-c"

for gen in bf2 bf3; do
  cp -a "fixtures/$gen/." "$work/$gen"
  dev="$work/$gen/class/hwmon/hwmon3"
  block=$([ "$gen" = bf2 ] && echo tile0 || echo llt0)
  values() { # DIR... -> read:FILE for each value file (counters, events, registers)
    find "$@" -mindepth 1 -maxdepth 1 -type f \
      \( -name 'counter*' -o -name 'event[0-9]*' -o -name enable -o -name count_clock \
         -o -path '*/pcie*/*' -o -path '*/ecc/*' -o -path '*/clock_measure/*' \) \
      ! -name event_list ! -name uevent | sort | sed 's/^/read:/'
  }
  mapfile -t one < <(values "$dev/$block")
  side_by_side "$gen read $block (${#one[@]} files)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" read "$block" -- "$work/floor" do "${one[@]}"
  mapfile -t dirs < <(find "$dev" -mindepth 1 -maxdepth 1 -type d ! -name power ! -name subsystem | sort)
  side_by_side "$gen blocks (${#dirs[@]} directories listed)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" blocks -- "$work/floor" list "$dev" "${dirs[@]}"
  side_by_side "$gen events $block (its event_list)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" events "$block" -- "$work/floor" cat "$dev/$block/event_list"
  mapfile -t all < <(values "${dirs[@]}")
  side_by_side "$gen snapshot all (${#all[@]} files)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" snapshot all -- "$work/floor" do "${all[@]}"
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
r=$(awk -v b="$b" -v c="$c" 'BEGIN {printf "%.2f", b / c}')
echo "stat -I 100 for 20 s, ${#samples[@]} values: bfperf $b ms CPU, C floor $c ms CPU: ${r}x, $(verdict "$r" 1.5)"
