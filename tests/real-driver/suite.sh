#!/bin/sh
# bfperf's suite on the real mlxbf-pmc driver, inside the guest, against the PMC
# model (tests/real-driver/qemu/bfpmc.c), whose rates are the truth: an event
# numbered E counts E * 10^7 a second on any counter, a register at byte offset R
# counts (R / 8 + 1) * 10^6 a second (offsets are the numbers event_list gives).
# On the first block of every kind: program by name and by number, read back,
# stat's counts against those rates (within 1 %), the device byte for byte as before,
# clear and stop; the mission's `bfperf program tile2 3 HNF_REQUESTS`; registers
# counted at their rates; a 32-bit crspace counter counting past its wrap; snapshot
# and diff; the exporter's totals; top in a terminal; completion from the driver's
# event_list.
#
#   suite.sh GEN BLOCKS_FILE
#
# BLOCKS_FILE has a line per block: NAME BASE SIZE COUNTERS TYPE (acpi.py's stderr).
# Prints `ok`/`not ok`/`skip` lines, `counted against known rates: KINDS`, and, last,
# `kernel VERSION: N passed, M failed, K skipped`.
gen=$1 blocks=$2
pass=0 fail=0 skip=0
dev=$(for h in /sys/class/hwmon/hwmon*; do [ "$(cat "$h/name" 2>/dev/null)" = bfperf ] && echo "$h"; done)
export BFPERF_STATE_DIR=/tmp/bfperf-state
mkdir -p -m 700 $BFPERF_STATE_DIR
EVENT_UNIT=10000000 REG_UNIT=1000000

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; [ -s /tmp/out ] && sed 's/^/#   /' /tmp/out | head -20; }
skip() { skip=$((skip + 1)); echo "skip - $1: $2"; }
# check DESCRIPTION COMMAND...: the command exits 0.
check() { d=$1; shift; if "$@" >/tmp/out 2>&1; then ok "$d"; else not_ok "$d"; fi; }
# refused DESCRIPTION COMMAND...: the command fails.
refused() { d=$1; shift; if "$@" >/tmp/out 2>&1; then not_ok "$d"; else ok "$d"; fi; }
# has DESCRIPTION PATTERN FILE: the file has a line matching the pattern.
has() { if grep -q -- "$2" "$3"; then ok "$1"; else [ "$3" = /tmp/out ] || cp "$3" /tmp/out; not_ok "$1 (no '$2')"; fi; }
# state: every event and enable file of the device, for byte-for-byte checks.
state() { for f in "$dev"/*/event[0-9]* "$dev"/*/enable; do [ -f "$f" ] && echo "$f $(cat "$f" 2>&1)"; done; }
# unchanged DESCRIPTION BEFORE AFTER: two states are the same, or the difference is shown.
unchanged() { if [ "$2" = "$3" ]; then ok "$1"; else
  echo "$2" >/tmp/pre; echo "$3" >/tmp/post; diff /tmp/pre /tmp/post >/tmp/out 2>&1; not_ok "$1"; fi; }
field() { awk -v b="$1" -v f="$2" '$1 == b { print $f }' "$blocks"; }
# within VALUE TRUTH PERCENT
within() { awk -v v="$1" -v t="$2" -v p="$3" 'BEGIN { d = v - t; if (d < 0) d = -d; exit !(t > 0 && d <= t * p / 100) }'; }
# rate_of JSON EVENT: a stat --json total's value over its time, per second.
rate_of() { grep "\"event\":\"$2\"" "$1" | grep '"record":"total"' | head -1 \
  | sed -n 's/.*"time_s":\([0-9.e-]*\).*"value":\([0-9.e+]*\).*/\2 \1/p' | awk '{ if ($2 > 0) printf "%.0f", $1 / $2 }'; }
# rated DESCRIPTION GOT WANT: a rate within 1 % of the model's.
rated() { if within "${2:-0}" "$3" 1; then ok "$1 ($2/s, the model's $3/s)"; else not_ok "$1: ${2:-none}/s, the model's $3/s"; fi; }
# events BLOCK: its event_list as NUMBER NAME lines (decimal), names trimmed.
events() { sed -n 's/^\(0x[0-9a-fA-F]*\): *\([^ ]*\).*/\1 \2/p' "$dev/$1/event_list" | while read -r n name; do echo "$((n)) $name"; done; }

if [ -z "$dev" ]; then
  not_ok "the driver made a bfperf hwmon device"
  echo "kernel $(uname -r): $pass passed, $fail failed, $skip skipped"
  exit 0
fi
ok "the driver made a bfperf hwmon device ($dev)"
check "info finds the device" bfperf info
has "info names the generation" "$(echo "$gen" | sed 's/bf/BlueField-/')" /tmp/out
check "blocks lists the blocks" bfperf blocks
check "list lists the device's events" bfperf list

# The first block of each kind the driver made.
firsts=$(for d in "$dev"/*/; do basename "$d"; done | sort -V | awk '{ k = $1; sub(/[0-9]+$/, "", k); if (!(k in seen)) { seen[k] = 1; print $1 } }')
counted=""

# counter_kind BLOCK: programming, counting at the model's rates, clear, stop, restore.
counter_kind() {
  blk=$1 type=$(field "$1" 5) kind=$(echo "$1" | sed 's/[0-9]*$//')
  [ -f "$dev/$blk/event_list" ] || { skip "$blk" "no event_list"; return; }
  # Two events that count: the highest-numbered (fast: a crspace counter wraps in
  # seconds) and one below it, by name and by number; L3 selects are 6 bits.
  max=255; [ "$kind" = l3cachehalf ] && max=63
  events "$blk" | awk -v m=$max '$1 > 0 && $1 < m' | sort -n | tail -2 >/tmp/ev
  n1=$(sed -n 2p /tmp/ev | cut -d' ' -f1) name1=$(sed -n 2p /tmp/ev | cut -d' ' -f2)
  n2=$(sed -n 1p /tmp/ev | cut -d' ' -f1)
  [ -n "$n2" ] || { skip "$blk" "fewer than two events that count"; return; }
  hex2=$(printf '0x%x' "$n2")
  check "$blk: program by name" bfperf program "$blk" 0 "$name1"
  has "$blk: event0 reads $name1 back" "^$(printf '0x%x' "$n1"): *$name1" "$dev/$blk/event0"
  if [ "$(field "$blk" 4)" -ge 2 ]; then
    check "$blk: program by number" bfperf program "$blk" 1 "$hex2"
    has "$blk: event1 reads $hex2 back" "^$hex2:" "$dev/$blk/event1"
  fi
  pre=$(state)
  bfperf stat --json -o /tmp/stat.json -e "$blk/$name1/" -e "$blk/$hex2/" -- sleep 1 >/tmp/out 2>&1
  post=$(state)
  unchanged "$blk: stat puts the device back byte for byte" "$pre" "$post"
  rated "$blk: stat counts $name1 at the model's rate" "$(rate_of /tmp/stat.json "$name1")" $((n1 * EVENT_UNIT))
  name2=$(events "$blk" | awk -v n="$n2" '$1 == n { print $2; exit }')
  rated "$blk: stat counts $hex2 at the model's rate" "$(rate_of /tmp/stat.json "$name2")" $((n2 * EVENT_UNIT))
  counted="$counted $kind"
  # clear: a running counter restarts from 0 (an L3's counters only by enable).
  bfperf program "$blk" 0 "$name1" >/dev/null 2>&1
  bfperf start "$blk" >/dev/null 2>&1
  sleep 1
  before=$(($(cat "$dev/$blk/counter0")))
  if [ "$kind" = l3cachehalf ]; then
    refused "$blk: clear of an L3 block is refused" bfperf clear "$blk"
  else
    check "$blk: clear" bfperf clear "$blk"
    after=$(($(cat "$dev/$blk/counter0")))
    if [ "$after" -lt $((before / 4)) ]; then ok "$blk: clear restarts counter0 ($before, then $after)"; else
      : >/tmp/out; not_ok "$blk: clear restarts counter0: $before, then $after"; fi
  fi
  # A kernel that validates event numbers refuses 0xff, and an SMGEN block (gic,
  # smmu, triogen) has no DISABLE: it cannot be stopped there, and bfperf says so.
  if bfperf stop "$blk" >/tmp/out 2>&1; then
    ok "$blk: stop"
    a=$(cat "$dev/$blk/counter0"); sleep 0.3; b=$(cat "$dev/$blk/counter0")
    if [ "$a" = "$b" ]; then ok "$blk: stopped, counter0 stays at $a"; else : >/tmp/out; not_ok "$blk: stopped, counter0 still counts: $a, then $b"; fi
  elif grep -q "DISABLE" "$dev/$blk/event_list"; then
    not_ok "$blk: stop"
  else
    has "$blk: stop refused where the kernel takes no 0xff and the block has no DISABLE, saying so" "cannot be stopped on this kernel" /tmp/out
  fi
}

# register_kind BLOCK: its registers count at the model's rates.
register_kind() {
  blk=$1 kind=$(echo "$1" | sed 's/[0-9]*$//')
  # Register blocks have no event_list: their names and offsets from bfperf's catalog.
  bfperf events "$blk" | awk 'NR > 1 && $2 != "DISABLE" { print $1, $2; exit }' >/tmp/ev
  r1=$(cut -d' ' -f2 /tmp/ev) o1=$(($(cut -d' ' -f1 /tmp/ev)))
  [ -n "$r1" ] || { skip "$blk" "no registers listed"; return; }
  bfperf stat --json -o /tmp/stat.json -e "$blk/$r1/" -- sleep 1 >/tmp/out 2>&1
  rated "$blk: stat counts register $r1 at the model's rate" "$(rate_of /tmp/stat.json "$r1")" $(((o1 / 8 + 1) * REG_UNIT))
  counted="$counted $kind"
}

for blk in $firsts; do
  case $(field "$blk" 5) in
    0) register_kind "$blk" ;;
    1|2) counter_kind "$blk" ;;
  esac
done

# The mission's command, exactly.
if [ "$gen" = bf2 ]; then
  check "bfperf program tile2 3 HNF_REQUESTS" bfperf program tile2 3 HNF_REQUESTS
  has "tile2's event3 reads HNF_REQUESTS" "^0x45: HNF_REQUESTS" "$dev/tile2/event3"
  a=$(($(cat "$dev/tile2/counter3"))); sleep 1; b=$(($(cat "$dev/tile2/counter3")))
  if [ "$b" -gt "$a" ]; then ok "tile2's counter3 counts ($a, then $b)"; else : >/tmp/out; not_ok "tile2's counter3 counts: $a, then $b"; fi
  bfperf stop tile2 >/dev/null 2>&1
fi

# A 32-bit crspace counter past its wrap: 6 s of the fastest event is more than 2^32,
# counted right through windows that never wrap.
if [ "$gen" = bf3 ]; then
  top_event=$(events llt0 | sort -n | tail -1)
  n=${top_event%% *} name=${top_event#* }
  bfperf stat --json -o /tmp/stat.json -e "llt0/$name/" -- sleep 6 >/tmp/out 2>&1
  rated "llt0: $name counted past its 32-bit wrap ($((n * EVENT_UNIT * 6)) in 6 s)" "$(rate_of /tmp/stat.json "$name")" $((n * EVENT_UNIT))
fi
echo "counted against known rates:$counted"

# The Arm cores in the same window as the blocks: the kernel's PMU (armv8_pmuv3 on
# `-cpu max`) counts cycles and instructions; ipc is computed from them.
if [ "$gen" = bf3 ]; then metrics=ddr,llc; else metrics=l3; fi
bfperf stat --json -o /tmp/perf.json -e cycles,instructions -M "$metrics" -- sleep 1 >/tmp/out 2>&1
value() { grep "\"$1\":\"$2\"" /tmp/perf.json | head -1 | sed -n 's/.*"value":\([0-9.eE+-]*\).*/\1/p'; }
cycles=$(value event cycles) instructions=$(value event instructions) ipc=$(value metric ipc)
echo "arm cores: cycles ${cycles:-<not counted>}, instructions ${instructions:-<not supported>}, ipc ${ipc:-none}"
# TCG's PMU counts instructions where QEMU counts them precisely (the stage boots
# with -icount shift=0): both counted, and ipc their ratio, never a made-up one.
ratio_ok() { awk -v i="$1" -v c="$2" -v r="$3" 'BEGIN { e = i / c; exit !(c > 0 && i > 0 && (r - e) / e < 1e-6 && (e - r) / e < 1e-6) }'; }
if [ -n "$cycles" ] && [ -n "$instructions" ] && [ -n "$ipc" ] && ratio_ok "$instructions" "$cycles" "$ipc"; then
  ok "the Arm cores' cycles and instructions beside -M $metrics, ipc their ratio"; else
  { cat /tmp/out; ls /sys/bus/event_source/devices; dmesg | grep -i -e pmu -e perf | tail -5; } >/tmp/pmu 2>&1; mv /tmp/pmu /tmp/out
  not_ok "the Arm cores' cycles, instructions and ipc beside -M $metrics"; fi

# The floor on the driver (BlueField-2 only, one boot is enough): bfperf's sampler
# against benches/floor.c preading the same counters (files opened once), both at
# -I 100 for 10 s, their CPU time by the kernel's task-clock.
if [ "$gen" = bf2 ]; then
  files=""; for t in 0 1 2 3; do files="$files $dev/tile$t/counter0 $dev/tile$t/counter1"; done
  cpu() { awk -F, '/task-clock/ { printf "%.1f", $1; exit }' "$1"; }
  bfperf program tile0 0 MEMORY_READS >/dev/null 2>&1
  # shellcheck disable=SC2086
  bfperf stat --per-process -x, -e task-clock -o /tmp/floor.csv -- floor sample 100 10 $files >/tmp/floor.out 2>&1
  bfperf stat --per-process -x, -e task-clock -o /tmp/bfperf.csv -- \
    bfperf stat -x, -e 'tile/MEMORY_READS,MEMORY_WRITES/' -I 100 --duration 10s -o /tmp/bfperf.out >/tmp/out 2>&1
  f=$(cpu /tmp/floor.csv) b=$(cpu /tmp/bfperf.csv)
  # Both ran their 10 s: 100 intervals (bfperf: a line per tile per event).
  fl=$(awk '{ print $1 }' /tmp/floor.out | sort -u | grep -c .) bl=$(grep -c MEMORY_READS /tmp/bfperf.out)
  echo "floor on the driver: stat -I 100 for 10 s of 8 tile counters ($bl and $fl intervals): bfperf ${b:-?} ms CPU, C floor ${f:-?} ms: $(awk -v b="$b" -v f="$f" 'BEGIN { if (f > 0) printf "%.2f", b / f; else print "?" }')x"
  if [ -n "$b" ] && [ -n "$f" ] && [ "$fl" -ge 95 ] && [ "$bl" -ge 95 ]; then ok "the floor on the driver was measured over 10 s on both sides"; else
    cat /tmp/floor.csv /tmp/bfperf.out >>/tmp/out; not_ok "the floor on the driver was measured over 10 s on both sides"; fi
fi

# Snapshot and diff, the change between them shown.
if [ "$gen" = bf3 ]; then blk=llt0; else blk=l3cachehalf0; fi
name=$(events "$blk" | awk '$1 > 0 { print $2; exit }')
check "snapshot" bfperf snapshot all -o /tmp/snap1.json
if bfperf program "$blk" 2 "$name" >/tmp/out 2>&1; then ok "program between the snapshots"; else not_ok "program between the snapshots"; fi
check "snapshot again" bfperf snapshot all -o /tmp/snap2.json
check "diff of two snapshots" bfperf diff /tmp/snap1.json /tmp/snap2.json
has "diff shows the event programmed" "$name" /tmp/out

# Completion from the driver's own event_list.
bfperf __complete --index 2 -- bfperf program "" >/tmp/out 2>&1
has "completion offers the driver's blocks" "^$blk\$" /tmp/out
bfperf __complete --index 4 -- bfperf program "$blk" 0 "" >/tmp/out 2>&1
has "completion offers $blk's events" "^$name\$" /tmp/out

# The exporter, scraped over loopback: its totals of a block's two counters grow at
# the model's rates (the span between scrapes taken by the shell: within 5 %).
ip link set lo up 2>/dev/null
before=$(state)
if [ "$gen" = bf3 ]; then blk=llt0; else blk=tile0; fi
bfperf exporter --listen 127.0.0.1:9839 >/tmp/exporter.log 2>&1 &
exporter=$!
n=0; while [ $n -lt 50 ] && ! wget -q -O /tmp/metrics http://127.0.0.1:9839/metrics 2>/dev/null; do sleep 0.2; n=$((n + 1)); done
has "the exporter serves /metrics" "^bfperf_" /tmp/metrics
up() { cut -d' ' -f1 /proc/uptime; }
line() { grep '^bfperf_events_total{' "$1" | grep "block=\"$blk\"" | grep "counter=\"$2\"" | head -1; }
t1=$(up); wget -q -O /tmp/m1 http://127.0.0.1:9839/metrics
sleep 4
t2=$(up); wget -q -O /tmp/m2 http://127.0.0.1:9839/metrics
ev=$(line /tmp/m2 0 | sed -n 's/.*event="\([^"]*\)".*/\1/p')
n=$(events "$blk" | awk -v e="$ev" '$2 == e { print $1; exit }')
d=$(awk -v a="$(line /tmp/m1 0 | awk '{ print $NF }')" -v b="$(line /tmp/m2 0 | awk '{ print $NF }')" 'BEGIN { printf "%.0f", b - a }')
span=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
want=$(awk -v s="$span" -v n="${n:-0}" -v u=$EVENT_UNIT 'BEGIN { printf "%.0f", s * n * u }')
if within "$d" "$want" 5; then ok "the exporter's $blk $ev total grows at the model's rate ($d in $span s)"; else
  cp /tmp/m2 /tmp/out; not_ok "the exporter's $blk $ev total grows at the model's rate: $d in $span s, the model's $want"; fi
kill $exporter; wait $exporter 2>/dev/null
after=$(state)
unchanged "the exporter put the device back as it found it" "$before" "$after"

# top in a terminal (tests/real-driver/pty.c): it draws its panels, ends on q and puts
# the device back.
panel="L3 cache"; [ "$gen" = bf3 ] && panel=LLC
before=$(state)
pty 4 100 30 bfperf top -i 500ms -e "$blk/$ev/" >/tmp/top.raw 2>&1; rc=$?
after=$(state)
if [ $rc = 0 ]; then ok "top ends on q"; else cp /tmp/top.raw /tmp/out; not_ok "top ends on q (status $rc)"; fi
# Its screen as text: cursor moves (over cells already blank) become spaces.
tr -d '\033' </tmp/top.raw | sed 's/\[[0-9;?]*[A-Za-z]/ /g' >/tmp/top.txt
has "top draws its header" "bfperf top" /tmp/top.txt
has "top draws the $panel panel" " $panel " /tmp/top.txt
unchanged "top put the device back as it found it" "$before" "$after"

echo "kernel $(uname -r): $pass passed, $fail failed, $skip skipped"
