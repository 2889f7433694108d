#!/usr/bin/env bash
# bfperf side by side with its floors, on fixture copies in tmpfs, each ratio beside
# its goal:
#   1. start-up: `bfperf --version` against a minimal Rust program (one println!),
#      built here by the same rustc with the release profile's options (goal 1.2x),
#      and both against a minimal C program (references: a process's start);
#   2. on the BlueField-2 and -3 fixtures, `read BLOCK`, `blocks`, `events BLOCK` and
#      `snapshot all` against Rust's start counted once and C's work: the minimal
#      Rust program's time plus what benches/floor.c spends above a minimal C
#      program doing the same file work and printing it (the block's value files
#      read; the device and block directories listed, each block's enable read and
#      one event_list a kind printed; the block's event_list printed; every value
#      file read) (goal 1.3x);
#   3. `bfperf stat -I 100` of two specs (20 values) for 10 s against a C sampler
#      doing the same reads: the 20 values and the 8 `event<N>` bfperf reads back
#      to catch another program's writes (files opened once, pread each tick,
#      absolute-deadline sleeps) (goal 1.3x).
# Processor time (user + system) per run, from the kernel's accounting of each
# child (benches/interleave.c): the programs of a row run in turn, run by run, so
# that each meets the machine as the others do, and each row gives each program's
# median over RUNS runs (`stat`: RUNS_STAT runs of 10 s). Processor time, unlike
# wall time, does not grow when other programs share the cores; taking the
# programs in turn and the median keeps a burst of the machine's own load, which
# moves a millisecond's job by half its time, out of the ratio.
# bfperf runs from a copy on the disk, as installed (benches/lib.sh says why).
# Run from the repository: bash benches/floor.sh [--busy]
#   --busy  keeps both cores busy (two `yes`) while it measures, as the goals ask
#   needs cc and rustc; BFPERF=path to another binary, RUNS=runs of each one-shot
#   program (400), RUNS_STAT=runs of each 10 s sampler (5)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
runs=${RUNS:-400}
runs_stat=${RUNS_STAT:-5}
[ -x "$bin" ] || cargo build --release -q
. benches/lib.sh
bench_start floor "${1:-}"
cc -O2 -o "$work/floor" benches/floor.c
cc -O2 -o "$work/interleave" benches/interleave.c
echo 'fn main() { println!("minimal 0.1.0"); }' > "$work/minimal.rs"
rustc --edition 2021 -C opt-level=3 -C strip=symbols -o "$work/minimal" "$work/minimal.rs"
printf '#include <stdio.h>\nint main(void) { puts("minimal 0.1.0"); return 0; }\n' > "$work/minimal.c"
cc -O2 -o "$work/minimal-c" "$work/minimal.c"

verdict() { # RATIO GOAL (- for a reference without one)
  [ "$2" = - ] && { printf 'a reference, no goal'; return; }
  awk -v r="$1" -v g="$2" 'BEGIN {printf "%s (goal %sx)", (r <= g ? "within goal" : "OVER"), g}'
}

side_by_side() { # LABEL GOAL -- bfperf command... -- floor command... [-- C base... -- Rust base...]
  # With the two bases, the floor is the Rust base's time plus what the floor
  # command spends above the C base (Rust's start, C's work). bfperf's median is
  # printed with its quartiles.
  local label=$1 goal=$2 b bq f r
  shift 3
  read -r b bq f r < <("$work/interleave" "$runs" -- "$@" | awk '
    { m[NR] = $1; q[NR] = "(" $2 "-" $3 ")" }
    END {
      floor = m[2]
      if (NR == 4) { w = m[2] - m[3]; floor = m[4] + (w > 0 ? w : 0) }
      printf "%.3f %s %.3f %.3f\n", m[1], q[1], floor, m[1] / floor
    }')
  echo "$label: bfperf $b ms $bq, floor $f ms: ${r}x, $(verdict "$r" "$goal")"
}

# What the one-shot goals stand on: a process's start. A C program that prints one
# line is the least any of the floors below costs.
side_by_side "reference: a minimal Rust program against a minimal C one" - -- "$work/minimal" -- "$work/minimal-c"
side_by_side "start-up (--version against a minimal Rust program)" 1.2 -- "$bin" --version -- "$work/minimal"
side_by_side "start-up (--version against a minimal C program)" - -- "$bin" --version -- "$work/minimal-c"

# Rust's start once, C's work: the floors of the one-shot commands.
bases="-- $work/minimal-c -- $work/minimal"
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
    -- "$bin" --sysfs-root "$work/$gen" read "$block" -- "$work/floor" do "${one[@]}" $bases
  mapfile -t dirs < <(find "$dev" -mindepth 1 -maxdepth 1 -type d ! -name power ! -name subsystem | sort)
  # `blocks` shows each block's `enable` and how many events it has: the floor lists
  # the directories, reads each `enable` and prints the first event_list of each
  # kind (a kind's blocks list the same events), as bfperf does.
  mapfile -t shown < <(printf '%s\n' "${dirs[@]}" | awk '{
      print "list:" $0
      if (system("test -f " $0 "/enable") == 0) print "read:" $0 "/enable"
      kind = $0; sub(/.*\//, "", kind); sub(/[0-9]+$/, "", kind)
      if (!(kind in seen) && system("test -f " $0 "/event_list") == 0) { seen[kind]; print "cat:" $0 "/event_list" }
    }')
  side_by_side "$gen blocks (${#dirs[@]} directories listed, their enable and event lists read)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" blocks -- "$work/floor" do "list:$dev" "${shown[@]}" $bases
  side_by_side "$gen events $block (its event_list)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" events "$block" -- "$work/floor" cat "$dev/$block/event_list" $bases
  mapfile -t all < <(values "${dirs[@]}")
  side_by_side "$gen snapshot all (${#all[@]} files)" 1.3 \
    -- "$bin" --sysfs-root "$work/$gen" snapshot all -- "$work/floor" do "${all[@]}" $bases
done

# Sampling: two specs on the bf2 copy, 10 s at -I 100.
stat_row
runs=$runs_stat side_by_side "stat -I 100 for 10 s, 20 values and 8 read back (${#samples[@]} reads a tick)" 1.3 \
  -- "$bin" --sysfs-root "$work/bf2" stat "${stat_specs[@]}" -I 100 --duration 10s -o /dev/null \
  -- "$work/floor" sample 100 10 "${samples[@]}"

# The exporter's scrape, as the real-driver stage judges it on the driver, here on
# the bf3 copy with its default set: bfperf-exporter scraped 40 times 250 ms apart
# by scrape-floor's client (one keep-alive connection), its checks between scrapes
# included, against C doing the same file work (benches/scrape-ops.awk):
# scrape-floor serving the same 40 scrapes, and floor.c doing the checks' reads
# every 125 ms for 10 s (between scrapes 250 ms apart the exporter checks twice).
# Processor time from each server's /proc/PID/task/*/schedstat, and the checks'
# floor's as the rows above take it; three rounds, the median ratio. Needs
# bfperf-exporter beside bfperf.
exporter="$(dirname "$bin")/bfperf-exporter"
if [ ! -x "$exporter" ]; then
  echo "the exporter's scrape: not measured, no bfperf-exporter beside the bfperf measured (copy it beside BFPERF)"
  exit 0
fi
cc -O2 -o "$work/scrape-floor" benches/scrape-floor.c
sched_ms() { awk '{t += $1} END {printf "%.1f", t / 1e6}' /proc/"$1"/task/*/schedstat; }
port_of() { # LOG -> the port a server said it serves on
  for _ in $(seq 50); do
    p=$(sed -n -e 's|.*serving http://127.0.0.1:\([0-9]*\)/metrics.*|\1|p' -e 's/^serving on port \([0-9]*\)$/\1/p' "$1")
    [ -n "$p" ] && { echo "$p"; return; }
    sleep 0.1
  done
  echo "no port in $1" >&2; return 1
}
get() { # PORT -> the exposition
  exec 3<>"/dev/tcp/127.0.0.1/$1"
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  sed '1,/^\r$/d' <&3
  exec 3<&-
}
dev="$work/bf3/class/hwmon/hwmon3"
"$bin" --sysfs-root "$work/bf3" blocks --csv | awk -F, 'NR > 1 {print $1, $3}' > "$work/mechanisms"
ratios=()
for _ in 1 2 3; do
  "$exporter" --sysfs-root "$work/bf3" --listen 127.0.0.1:0 2> "$work/exporter.log" &
  e=$!
  ep=$(port_of "$work/exporter.log")
  sleep 2
  get "$ep" > "$work/exposition"
  "$work/scrape-floor" client "$ep" 40 250 > /dev/null
  t0=$(sched_ms "$e")
  "$work/scrape-floor" client "$ep" 40 250 > /dev/null
  b=$(awk -v a="$t0" -v b="$(sched_ms "$e")" 'BEGIN {printf "%.1f", b - a}')
  kill "$e"; wait "$e" 2> /dev/null || true
  read -ra sweep < <(awk -v dev="$dev" -v what=sweep -f benches/scrape-ops.awk "$work/mechanisms" "$work/exposition")
  read -ra checks < <(awk -v dev="$dev" -v what=probe -f benches/scrape-ops.awk "$work/mechanisms" "$work/exposition")
  # The blocks started, as the exporter left them running, so that the checks hold.
  for f in "${sweep[@]}"; do case $f in write:*=1) f=${f#write:}; echo 1 > "${f%=1}" ;; esac; done
  "$work/scrape-floor" serve 0 "${sweep[@]}" > /dev/null 2> "$work/serve.log" &
  s=$!
  sp=$(port_of "$work/serve.log")
  "$work/scrape-floor" client "$sp" 5 0 > /dev/null
  t0=$(sched_ms "$s")
  "$work/scrape-floor" client "$sp" 40 250 > /dev/null
  c=$(awk -v a="$t0" -v b="$(sched_ms "$s")" 'BEGIN {printf "%.1f", b - a}')
  kill "$s"; wait "$s" 2> /dev/null || true
  k=$("$work/interleave" 1 -- "$work/floor" sample 125 10 "${checks[@]}" | awk '{printf "%.1f", $1}')
  ratios+=("$b $c $k $(awk -v b="$b" -v c="$c" -v k="$k" 'BEGIN {printf "%.2f", b / (c + k)}')")
done
printf '%s\n' "${ratios[@]}" | sort -k4 -n | sed -n 2p | {
  read -r b c k r
  echo "the exporter's scrape, bf3 default set (${#sweep[@]} file operations a scrape, 40 scrapes 250 ms apart, checks between them included): bfperf-exporter $b ms CPU, C $c ms serving and $k ms checking: ${r}x, $(verdict "$r" 1.5)"
}
