#!/usr/bin/env bash
# System calls and CPU of `bfperf stat` sampling every counter and register of the
# bf2 fixture on tmpfs:
#   1. strace -c over a 3 s run at -I 100: read/pread64 per value per tick, and no
#      open/close/getdents/stat after setup;
#   2. CPU (user + system) of a 60 s run at -I 100, as a share of one core.
# Run from the repository after `cargo build --release`: bash benches/stat-syscalls.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
work=$(mktemp -d /dev/shm/bfperf-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -a fixtures/bf2/. "$work"
export BFPERF_LOCK_FILE="$work/lock"
dev=(--sysfs-root "$work")

# One spec per block: its first events (one per counter), or all its registers.
specs=()
values=0
while IFS=, read -r block kind mechanism counters registers _; do
  [ "$block" = block ] && continue
  if [ "$mechanism" = registers ]; then
    specs+=(-e "$block/*/"); values=$((values + registers))
  else
    events=$("$bin" "${dev[@]}" events "$block" --csv | awk -F, 'NR>1 && $3!="DISABLE" {print $3}' | head -n "$counters" | paste -sd,)
    specs+=(-e "$block/$events/"); values=$((values + counters))
  fi
done < <("$bin" "${dev[@]}" blocks --csv)
echo "values sampled per tick: $values"

strace -f -c -o "$work/strace" "$bin" "${dev[@]}" stat "${specs[@]}" -I 100 --duration 3s -o /dev/null
ticks=30
for call in read pread64 pwrite64 write openat close getdents64 newfstatat statx fstat; do
  n=$(awk -v c="$call" '$NF==c {print $4}' "$work/strace")
  printf '%-10s %6s calls\n' "$call" "${n:-0}"
done
preads=$(awk '$NF=="pread64" {print $4}' "$work/strace")
echo "pread64 per value per tick: $(awk -v p="$preads" -v v="$values" -v t="$ticks" 'BEGIN {printf "%.2f", p / (v * (t + 1))}')"

/usr/bin/time -f '%U %S %e' -o "$work/time" "$bin" "${dev[@]}" stat "${specs[@]}" -I 100 --duration 60s -o /dev/null
read -r user sys wall < "$work/time"
echo "60 s at -I 100: user ${user} s, system ${sys} s, wall ${wall} s: $(awk -v u="$user" -v s="$sys" -v w="$wall" 'BEGIN {printf "%.3f", (u + s) / w * 100}') % of one core"
