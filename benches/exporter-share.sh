#!/usr/bin/env bash
# The exporter's share of a core at a scrape interval, as an operator runs it: the
# default set of the BlueField-3 fixture (a copy in tmpfs), scraped every INTERVAL
# seconds (15, Prometheus' default) for DURATION seconds (60), its processor time
# taken from the kernel's accounting of the process (/proc/PID/stat's user and
# system time) over that span, after its start.
# Run from the repository: bash benches/exporter-share.sh [INTERVAL [DURATION]] [--busy]
set -euo pipefail
cd "$(dirname "$0")/.."
interval=${1:-15} duration=${2:-60}
bin=${BFPERF_EXPORTER:-target/release/bfperf-exporter}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-share.XXXXXX 2>/dev/null || mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
if [ "${3:-}" = --busy ]; then
  for _ in 1 2; do yes > /dev/null & pids+=($!); done
fi
cp -a fixtures/bf3/. "$work/root"
mkdir -m 700 "$work/state"
BFPERF_STATE_DIR="$work/state" BFPERF_LOCK_FILE="$work/lock" \
  "$bin" --sysfs-root "$work/root" --listen 127.0.0.1:0 2> "$work/log" &
pid=$!
pids+=("$pid")
for _ in $(seq 100); do
  address=$(grep -o 'serving http://[0-9.:]*' "$work/log" | cut -d/ -f3 || true)
  [ -n "$address" ] && break
  sleep 0.1
done
[ -n "$address" ] || { cat "$work/log" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
before=$(ticks)
for _ in $(seq $((duration / interval))); do
  curl -fsS "http://$address/metrics" > /dev/null
  sleep "$interval"
done
after=$(ticks)
awk -v t=$((after - before)) -v hz="$hz" -v d="$duration" -v i="$interval" -v cpus="$(nproc)" 'BEGIN {
  ms = t * 1000 / hz
  printf "exporter, scraped every %d s for %d s: %.0f ms of processor time, %.2f ms a second: %.3f %% of one core (%d cores here)\n", i, d, ms, ms / d, ms / d / 10, cpus
}'
rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
echo "resident memory: $((rss / 1024)) MB"
