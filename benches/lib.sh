# Shared by benches/floor.sh, benches/stat-split.sh and benches/tick-pages.py,
# sourced from the repository with $bin naming the bfperf binary.

# A scratch directory in tmpfs, $work, removed on exit with the two `yes` that
# --busy starts to keep both cores busy. $bin (and bfperf-exporter beside it) is
# measured as installed: copied whole into a scratch directory on the disk, in
# the repository's target/, and run from there. On a virtual machine, the same
# binary's `stat` took twice the processor time run from tmpfs, and some 15 %
# more run from the file the linker wrote, than from a copy on the disk
# (docs/performance.md).
bench_start() { # NAME [--busy]
  work=$(mktemp -d "/dev/shm/bfperf-$1.XXXXXX" 2> /dev/null || mktemp -d)
  busy=()
  bins=
  trap bench_cleanup EXIT
  mkdir -p target
  bins=$(mktemp -d target/bench-bin.XXXXXX)
  cp "$bin" "$bins/bfperf"
  [ ! -x "$(dirname "$bin")/bfperf-exporter" ] || cp "$(dirname "$bin")/bfperf-exporter" "$bins/"
  bin=$bins/bfperf
  if [ "${2:-}" = --busy ]; then
    for _ in 1 2; do yes > /dev/null & busy+=($!); done
  fi
}

bench_cleanup() {
  [ ${#busy[@]} -eq 0 ] || kill "${busy[@]}" 2> /dev/null || true
  rm -rf "$work"
  [ -z "$bins" ] || rm -rf "$bins"
}

# floor.sh's `stat` row on the bf2 copy in $work/bf2, the lock and journal in
# $work: tile0 programmed as the row finds it; stat_specs, the row's -e; samples,
# what the C sampler reads a tick (the 20 values, and the 8 `event<N>` bfperf reads
# back to catch another program's writes).
stat_row() {
  local dev="$work/bf2/class/hwmon/hwmon3" t p r
  export BFPERF_LOCK_FILE="$work/lock" BFPERF_STATE_DIR="$work/state"
  "$bin" --sysfs-root "$work/bf2" program tile0 0=MEMORY_READS 1=MEMORY_WRITES > /dev/null
  stat_specs=(-e 'tile/MEMORY_READS,MEMORY_WRITES/' -e 'pcie/*_BYTE_CNT/')
  samples=()
  for t in 0 1 2 3; do
    samples+=("$dev/tile$t/counter0" "$dev/tile$t/counter1" "check:$dev/tile$t/event0" "check:$dev/tile$t/event1")
  done
  for p in 0 1; do for r in IN_P IN_NP IN_C OUT_P OUT_NP OUT_C; do samples+=("$dev/pcie$p/${r}_BYTE_CNT"); done; done
}
