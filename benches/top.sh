#!/usr/bin/env bash
# The cost of `bfperf top` left running: a full simulated BlueField-3 (every block,
# served over FUSE by `bfperf sim mount` in another process) at the default 1 s
# refresh, in a tmux terminal, for SECONDS (default 600): top's CPU as a share of one
# core, and its resident memory at the start and the end.
# Run from the repository: bash benches/top.sh [SECONDS]   (needs tmux and /dev/fuse)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
bin=${BFPERF:-target/release/bfperf}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-top.XXXXXX 2>/dev/null || mktemp -d)
sock="bfperf-bench-$$"
mkdir "$work/root"
"$bin" sim mount --gen 3 "$work/root" 2>/dev/null &
sim=$!
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null || true
  kill "$sim" 2>/dev/null || true
  for _ in $(seq 50); do grep -q " $work/root " /proc/mounts || break; sleep 0.1; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 50); do [ -e "$work/root/class/hwmon/hwmon3/name" ] && break; sleep 0.1; done
mkdir -m 700 "$work/state"
tmux -L "$sock" -f /dev/null new-session -d -s top -x 120 -y 40 \
  "BFPERF_STATE_DIR=$work/state exec $bin --sysfs-root $work/root top"
sleep 3
pid=$(pgrep -f "$bin --sysfs-root $work/root top" | head -1)
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
rss() { awk '/VmRSS/ {print $2}' "/proc/$pid/status"; }
t0=$(ticks); r0=$(rss); s0=$(date +%s.%N)
sleep "$secs"
t1=$(ticks); r1=$(rss); s1=$(date +%s.%N)
tmux -L "$sock" capture-pane -p -t top | head -8
awk -v a="$t0" -v b="$t1" -v hz="$hz" -v s="$s0" -v e="$s1" -v r0="$r0" -v r1="$r1" -v n="$secs" 'BEGIN {
  printf "bfperf top, simulated BF3 over FUSE, 1 s refresh, %d s: %.2f %% of one core; RSS %.1f MiB at the start, %.1f MiB at the end\n",
    n, (b - a) / hz / (e - s) * 100, r0 / 1024, r1 / 1024 }'
