#!/usr/bin/env bash
# The exporter's scrape against a floor (benches/scrape-floor.c), on the bf2 fixture
# in tmpfs with every counter programmed and every register exported: keep-alive
# scrape latency (p50, p99, max over 2,000 back-to-back scrapes) and server CPU per
# scrape (bfperf answers scrapes that come within 100 ms of a sweep from that sweep,
# so back-to-back scrapes share sweeps; `cargo bench --bench stat` times one full
# sweep and exposition).
# Then eight keep-alive scrapers at once: scrapes per second and the slowest.
# Run from the repository: bash benches/scrape.sh   (needs cc)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
[ -x "$bin" ] || cargo build --release -q
work=$(mktemp -d /dev/shm/bfperf-scrape.XXXXXX 2>/dev/null || mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
cc -O2 -o "$work/floor" benches/scrape-floor.c
cp -a fixtures/bf2/. "$work/root"
dev="$work/root/class/hwmon/hwmon3"
export BFPERF_LOCK_FILE="$work/lock" BFPERF_STATE_DIR="$work/state"
mkdir -m 700 "$work/state"

# Every counter of every counter block (its first events), as the exporter's config.
events=()
while IFS=, read -r block kind mechanism counters _; do
  [ "$block" = block ] || [ "$mechanism" = registers ] || [ "$counters" = 0 ] && continue
  list=$("$bin" --sysfs-root "$work/root" events "$block" --csv | awk -F, 'NR>1 && $3!="DISABLE" {print $3}' | head -n "$counters" | paste -sd,)
  events+=("\"$block/$list/\"")
done < <("$bin" --sysfs-root "$work/root" blocks --csv)
printf 'events = [%s]\n' "$(IFS=,; echo "${events[*]}")" > "$work/exporter.toml"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # name pid port
  local t0 t1 hz
  hz=$(getconf CLK_TCK)
  "$work/floor" client "$3" 200 > /dev/null
  t0=$(cpu_ticks "$2")
  echo "$1: $("$work/floor" client "$3" 2000)"
  t1=$(cpu_ticks "$2")
  echo "$1: server CPU per scrape $(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN {printf "%.0f", (b - a) / hz / 2000 * 1e6}') us"
  local s e clients=()
  s=$(date +%s%N)
  for i in 1 2 3 4 5 6 7 8; do "$work/floor" client "$3" 500 > "$work/par$i" & clients+=($!); done
  wait "${clients[@]}"
  e=$(date +%s%N)
  echo "$1: 8 keep-alive scrapers x 500: $(awk -v s="$s" -v e="$e" 'BEGIN {printf "%.0f", 4000 / ((e - s) / 1e9)}') scrapes/s; slowest: $(cat "$work"/par* | awk '{print $8}' | sort -n | tail -1) us"
}

"$bin" --sysfs-root "$work/root" exporter --config "$work/exporter.toml" --listen 127.0.0.1:19839 2> "$work/exporter.log" &
pids+=($!)
sleep 1
files=()
for d in "$dev"/*/; do
  b=$(basename "$d")
  [ -L "${d%/}" ] && continue
  case "$b" in
    power) ;;
    pcie*|ecc) for f in "$d"*; do files+=("$f"); done ;;
    *) for f in "$d"counter*; do [ -e "$f" ] && files+=("$f"); done ;;
  esac
done
"$work/floor" serve 19840 "${files[@]}" &
pids+=($!)
sleep 0.5
echo "values per scrape: ${#files[@]}"
measure bfperf "${pids[0]}" 19839
measure floor "${pids[1]}" 19840
