#!/usr/bin/env bash
# What bfperf's jobs cost in the measures that do not move with the machine's load:
# user-space instructions (valgrind's callgrind) and page faults (perf), per job of
# benches/floor.sh, and for `stat -I 100` its start and each tick (the difference
# between a 4 s and a 1 s run, over the 30 ticks between), in a table and as
# perf's CSV (`-x,`, four tiles' two events: the row the real-driver stage's guest
# measures). Beside each, the same for the floor's programs. Run from the
# repository: bash benches/counts.sh
#   needs valgrind, perf, cc and rustc; BFPERF=path to another binary
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-counts.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
export BFPERF_LOCK_FILE="$work/lock" BFPERF_STATE_DIR="$work/state"
cc -O2 -o "$work/floor" benches/floor.c
echo 'fn main() { println!("minimal 0.1.0"); }' > "$work/minimal.rs"
rustc --edition 2021 -C opt-level=3 -C strip=symbols -o "$work/minimal" "$work/minimal.rs"
instructions() { # command... -> millions of user-space instructions
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 > /dev/null |
    awk '/refs:/ {gsub(",", "", $NF); printf "%.2f", $NF / 1e6}'
}
faults() { # command... -> page faults of one run
  perf stat -x, -e page-faults "$@" 2>&1 > /dev/null | awk -F, '/page-faults/ {print $1}'
}
row() { # LABEL command...
  local label=$1; shift
  printf '%-34s %6s M instructions, %4s page faults\n' "$label" "$(instructions "$@")" "$(faults "$@")"
}
row "minimal Rust program" "$work/minimal"
row "bfperf --version" "$bin" --version
for gen in bf2 bf3; do
  cp -a "fixtures/$gen/." "$work/$gen"
  block=$([ "$gen" = bf2 ] && echo tile0 || echo llt0)
  row "$gen read $block" "$bin" --sysfs-root "$work/$gen" read "$block"
  row "$gen blocks" "$bin" --sysfs-root "$work/$gen" blocks
  row "$gen events $block" "$bin" --sysfs-root "$work/$gen" events "$block"
  row "$gen snapshot all" "$bin" --sysfs-root "$work/$gen" snapshot all
done
"$bin" --sysfs-root "$work/bf2" program tile0 0=MEMORY_READS 1=MEMORY_WRITES > /dev/null
stat_run() { # SECONDS -> millions of instructions
  instructions "$bin" --sysfs-root "$work/bf2" stat -e 'tile/MEMORY_READS,MEMORY_WRITES/' \
    -e 'pcie/*_BYTE_CNT/' -I 100 --duration "$1s" -o /dev/null
}
csv_run() { # SECONDS -> millions of instructions
  instructions "$bin" --sysfs-root "$work/bf2" stat -x, -e 'tile[0-3]/MEMORY_READS,MEMORY_WRITES/' \
    -I 100 --duration "$1s" -o /dev/null
}
split() { # LABEL 1s 4s
  awk -v l="$1" -v a="$2" -v b="$3" 'BEGIN {
    tick = (b - a) / 30; printf "%s: %.2f M instructions to start, %.1f k a tick\n", l, a - 10 * tick, tick * 1000 }'
}
split "stat -I 100, 20 values" "$(stat_run 1)" "$(stat_run 4)"
split "stat -x, -I 100, 4 tiles' 2 events" "$(csv_run 1)" "$(csv_run 4)"
dev="$work/bf2/class/hwmon/hwmon3"
samples=()
for t in 0 1 2 3; do
  samples+=("$dev/tile$t/counter0" "$dev/tile$t/counter1" "check:$dev/tile$t/event0" "check:$dev/tile$t/event1")
done
for p in 0 1; do for r in IN_P IN_NP IN_C OUT_P OUT_NP OUT_C; do samples+=("$dev/pcie$p/${r}_BYTE_CNT"); done; done
one=$(instructions "$work/floor" sample 100 1 "${samples[@]}")
four=$(instructions "$work/floor" sample 100 4 "${samples[@]}")
awk -v a="$one" -v b="$four" 'BEGIN {
  tick = (b - a) / 30; printf "C sampler, the same 28 reads: %.2f M instructions to start, %.1f k a tick\n", a - 10 * tick, tick * 1000 }'
