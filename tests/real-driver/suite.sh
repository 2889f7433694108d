#!/bin/sh
# bfperf's suite on the real mlxbf-pmc driver, inside the guest, against the PMC
# model (tests/real-driver/qemu/bfpmc.c), whose rates are the truth. A counter of
# the block on line r + 1 of BLOCKS_FILE (r from 0), index c, counting event E (256:
# clock cycles, half a step up: 1.01^(key + 1/2)) counts round(5 * 10^8 * 1.01^key)
# a second with key = (97 E + 41 c + 29 r) mod 128; a register at byte offset R (offsets are the numbers event_list and
# `bfperf events` give) counts round(5 * 10^6 * 1.01^key) with key = (53 R/4 + 29 r
# + 17) mod 128; an event the driver's table names DISABLE counts nothing.
# Every (block, counter, event) and register the suite measures has a key of its own:
# their rates differ by 1 % or more (cycles and an event by 0.5 %), ten times the
# 0.05 % the checks allow, so reading the wrong counter, event, block or register
# fails a check. Keys are kept in half steps: an event's 2 key, cycles' 2 key + 1.
# On the first block of every kind (and the second, for two blocks of a kind): program
# by name and by number, read back, stat's counts against those rates, the device
# byte for byte as before (pre-programmed with events other than those measured),
# clear, stop, and an L3's start; the mission's `bfperf program tile2 3
# HNF_REQUESTS`; registers in pairs; a 32-bit crspace counter counting past its wrap;
# count_clock's cycles; snapshot and diff; the exporter's totals; top in a terminal;
# completion from the driver's event_list.
#
#   suite.sh GEN BLOCKS_FILE
#
# BLOCKS_FILE has a line per block: NAME BASE SIZE COUNTERS TYPE (acpi.py's stderr).
# Prints `ok`/`not ok`/`skip` lines, `counted against known rates: KINDS`, `rates:`
# (how far apart the measured rates are), and, last, `kernel VERSION: N passed, M
# failed, K skipped`.
gen=$1 blocks=$2
pass=0 fail=0 skip=0
dev=$(for h in /sys/class/hwmon/hwmon*; do [ "$(cat "$h/name" 2>/dev/null)" = bfperf ] && echo "$h"; done)
export BFPERF_STATE_DIR=/tmp/bfperf-state
mkdir -p -m 700 $BFPERF_STATE_DIR
# What a rate check allows: with -icount the guest's clock and the model's are one.
TOLERANCE=0.05
: >/tmp/keys.event; : >/tmp/keys.register

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; [ -s /tmp/out ] && sed 's/^/#   /' /tmp/out | head -20; }
skip() { skip=$((skip + 1)); echo "skip - $1: $2"; }
# check DESCRIPTION COMMAND...: the command exits 0.
check() { d=$1; shift; if "$@" >/tmp/out 2>&1; then ok "$d"; else not_ok "$d"; fi; }
# refused DESCRIPTION COMMAND...: the command fails.
refused() { d=$1; shift; if "$@" >/tmp/out 2>&1; then not_ok "$d"; else ok "$d"; fi; }
# has DESCRIPTION PATTERN FILE: the file has a line matching the pattern.
has() { if grep -q -- "$2" "$3"; then ok "$1"; else [ "$3" = /tmp/out ] || cp "$3" /tmp/out; not_ok "$1 (no '$2')"; fi; }
# state: every event, enable and count_clock file of the device, for byte-for-byte checks.
state() { for f in "$dev"/*/event[0-9]* "$dev"/*/enable "$dev"/*/count_clock; do [ -f "$f" ] && echo "$f $(cat "$f" 2>&1)"; done; }
# unchanged DESCRIPTION BEFORE AFTER: two states are the same, or the difference is shown.
unchanged() { if [ "$2" = "$3" ]; then ok "$1"; else
  echo "$2" >/tmp/pre; echo "$3" >/tmp/post; diff /tmp/pre /tmp/post >/tmp/out 2>&1; not_ok "$1"; fi; }
field() { awk -v b="$1" -v f="$2" '$1 == b { print $f }' "$blocks"; }
# within VALUE TRUTH PERCENT
within() { awk -v v="$1" -v t="$2" -v p="$3" 'BEGIN { d = v - t; if (d < 0) d = -d; exit !(t > 0 && d <= t * p / 100) }'; }
# rate_of JSON BLOCK EVENT: a stat --json total's value over its time, per second.
rate_of() { grep "\"block\":\"$2\"" "$1" | grep "\"event\":\"$3\"" | grep '"record":"total"' | head -1 \
  | sed -n 's/.*"time_s":\([0-9.e-]*\).*"value":\([0-9.e+]*\).*/\2 \1/p' | awk '{ if ($2 > 0) printf "%.0f", $1 / $2 }'; }
# value_of JSON BLOCK EVENT: a stat --json total's value.
value_of() { grep "\"block\":\"$2\"" "$1" | grep "\"event\":\"$3\"" | grep '"record":"total"' | head -1 \
  | sed -n 's/.*"value":\([0-9.e+]*\).*/\1/p' | awk '{ printf "%.0f", $1 }'; }
# rated DESCRIPTION GOT WANT [PERCENT]: a rate within TOLERANCE % (or PERCENT) of the model's.
rated() { if within "${2:-0}" "$3" "${4:-$TOLERANCE}"; then ok "$1 ($2/s, the model's $3/s)"; else not_ok "$1: ${2:-none}/s, the model's $3/s"; fi; }
# events BLOCK: its event_list as NUMBER NAME lines (decimal), names trimmed.
events() { sed -n 's/^\(0x[0-9a-fA-F]*\): *\([^ ]*\).*/\1 \2/p' "$dev/$1/event_list" | while read -r n name; do echo "$((n)) $name"; done; }
# The model's rates (bfpmc.c): a block's place in BLOCKS_FILE, keys, rates.
place() { awk -v b="$1" '$1 == b { print NR - 1; exit }' "$blocks"; }
event_key() { echo $(( (97 * $3 + 41 * $2 + 29 * $(place "$1")) % 128 )); }
register_key() { echo $(( (53 * ($2 / 4) + 29 * $(place "$1") + 17) % 128 )); }
# (busybox's awk has no exp: 1.01^key by multiplication, within 10^-13 of pow's)
key_rate() { awk -v k="$1" -v b="$2" 'BEGIN { r = b; for (i = 0; i < k % 128; i++) r *= 1.01; printf "%.0f", r }'; }
event_rate() { key_rate "$(event_key "$1" "$2" "$3")" 500000000; }
clock_rate() { awk -v r="$(event_rate "$1" "$2" 256)" 'BEGIN { printf "%.0f", r * 1.004987562112089 }'; }
# half KEY [1]: a key in half steps (cycles: 1).
half() { echo $((2 * $1 + ${2:-0})); }
register_rate() { key_rate "$(register_key "$1" "$2")" 5000000; }
register_level() { key_rate "$(register_key "$1" "$2")" 100000; }
# measured DOMAIN KEY...: the keys become the suite's (a second use of one is a bug
# of the suite, and fails).
measured() { d=$1; shift; for k in "$@"; do
  if grep -qx "$k" /tmp/keys.$d; then : >/tmp/out; not_ok "two $d rates measured share key $k"; fi
  echo "$k" >>/tmp/keys.$d; done; }
free() { ! grep -qx "$2" /tmp/keys.$1; }

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

# The first block of each kind the driver made, and the second where there is one.
firsts=$(for d in "$dev"/*/; do basename "$d"; done | sort -V | awk '{ k = $1; sub(/[0-9]+$/, "", k); if (!(k in seen)) { seen[k] = 1; print $1 } }')
second_of() { for d in "$dev"/*/; do basename "$d"; done | sort -V | awk -v f="$1" '
  { k = $1; sub(/[0-9]+$/, "", k) } $1 == f { want = k; next } want != "" && k == want { print $1; exit }'; }
counted=""

# choose BLOCK SECOND C1 C2: two events, E1 for counter C1 (and SECOND's counter 0)
# and E2 for counter C2, whose keys are the suite's alone (cycles' keys, odd half
# steps, never meet an event's), event 0 first where the table names it (a real event), then from the highest
# number down; and two others, P1 and P2, to pre-program. Prints `E1 NAME1 E2 NAME2
# P1 P2` or nothing.
choose() {
  blk=$1 second=$2 c1=$3 c2=$4 max=254
  [ "$(echo "$blk" | sed 's/[0-9]*$//')" = l3cachehalf ] && max=63
  r=$(place "$blk") r2=$(place "${second:-$blk}")
  events "$blk" | awk -v m=$max '$1 <= m && $2 != "DISABLE"' | sort -n | awk -v r="$r" -v r2="$r2" \
    -v c1="$c1" -v c2="$c2" -v second="$second" -v keys="$(tr '\n' ' ' </tmp/keys.event)" '
    BEGIN { split(keys, k); for (i in k) used[k[i]] = 1 }
    { n[++count] = $1; name[count] = $2 }
    function key(r, c, e) { return 2 * ((97 * e + 41 * c + 29 * r) % 128) }
    END {
      # Event 0 first (where it is an event), then down from the highest.
      for (i = 1; i <= count; i++) order[i] = (n[1] == 0) ? (i == 1 ? 1 : count - i + 2) : count - i + 1
      for (i = 1; i <= count; i++) {
        a = order[i]; k1 = key(r, c1, n[a]); k1b = key(r2, 0, n[a])
        if ((k1 in used) || (second != "" && ((k1b in used) || k1 == k1b))) continue
        for (j = 1; j <= count; j++) {
          b = order[j]; if (b == a) continue
          k2 = key(r, c2, n[b])
          if ((k2 in used) || k2 == k1 || (second != "" && k2 == k1b)) continue
          p = 0; for (q = 1; q <= count && p < 2; q++) if (q != a && q != b) pick[++p] = q
          if (p < 2) continue
          print n[a], name[a], n[b], name[b], n[pick[1]], n[pick[2]]
          exit
        }
      }
    }'
}

# counter_kind BLOCK: programming, counting at the model's rates, clear, stop, restore.
counter_kind() {
  blk=$1 kind=$(echo "$1" | sed 's/[0-9]*$//') counters=$(field "$1" 4)
  [ -f "$dev/$blk/event_list" ] || { skip "$blk" "no event_list"; return; }
  second=$(second_of "$blk") clock="" c1=0 c2=1
  [ "$counters" -ge 2 ] || c2=0
  # count_clock's cycles, where the block has it, on counter 0 (stat hands cycles the
  # first counter), the events after it; only where that key is still the suite's.
  if [ -f "$dev/$blk/count_clock" ] && [ "$counters" -ge 3 ] && free event "$(half "$(event_key "$blk" 0 256)" 1)"; then
    clock=$(half "$(event_key "$blk" 0 256)" 1) c1=1 c2=2
  fi
  set -- $(choose "$blk" "$second" "$c1" "$c2")
  [ $# = 6 ] || { skip "$blk" "no two events whose rates are the suite's alone"; return; }
  n1=$1 name1=$2 n2=$3 name2=$4 p1=$5 p2=$6
  hex2=$(printf '0x%x' "$n2")
  check "$blk: program by name" bfperf program "$blk" 0 "$name1"
  has "$blk: event0 reads $name1 back" "^$(printf '0x%x' "$n1"): *$name1" "$dev/$blk/event0"
  if [ "$counters" -ge 2 ]; then
    check "$blk: program by number" bfperf program "$blk" 1 "$hex2"
    has "$blk: event1 reads $hex2 back" "^$hex2:" "$dev/$blk/event1"
  fi
  # Events other than those stat measures: its put-back must write them again.
  bfperf program "$blk" 0 "$p1" >/dev/null 2>&1
  [ "$counters" -ge 2 ] && bfperf program "$blk" 1 "$p2" >/dev/null 2>&1
  [ -n "$second" ] && bfperf program "$second" 0 "$p2" >/dev/null 2>&1
  set -- -e "$blk/$name1/" -e "$blk/$hex2/"
  [ -n "$clock" ] && set -- -e "$blk/cycles/" "$@"
  [ -n "$second" ] && set -- "$@" -e "$second/$name1/"
  pre=$(state)
  bfperf stat -A --json -o /tmp/stat.json "$@" -- sleep 1 >/tmp/out 2>&1
  post=$(state)
  unchanged "$blk: stat puts the device back byte for byte (other events than it measured)" "$pre" "$post"
  rated "$blk: stat counts $name1 on counter $c1 at the model's rate" "$(rate_of /tmp/stat.json "$blk" "$name1")" "$(event_rate "$blk" "$c1" "$n1")"
  rated "$blk: stat counts $hex2 on counter $c2 at the model's rate" "$(rate_of /tmp/stat.json "$blk" "$name2")" "$(event_rate "$blk" "$c2" "$n2")"
  measured event "$(half "$(event_key "$blk" "$c1" "$n1")")" "$(half "$(event_key "$blk" "$c2" "$n2")")"
  if [ -n "$clock" ]; then
    rated "$blk: stat counts cycles (count_clock) on counter 0 at the model's rate" "$(rate_of /tmp/stat.json "$blk" cycles)" "$(clock_rate "$blk" 0)"
    measured event "$clock"
  fi
  if [ -n "$second" ]; then
    rated "$second: stat counts $name1 on counter 0 beside $blk at the model's rate" "$(rate_of /tmp/stat.json "$second" "$name1")" "$(event_rate "$second" 0 "$n1")"
    measured event "$(half "$(event_key "$second" 0 "$n1")")"
  fi
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
  stopped=""
  if bfperf stop "$blk" >/tmp/out 2>&1; then
    ok "$blk: stop"
    a=$(cat "$dev/$blk/counter0"); sleep 0.3; b=$(cat "$dev/$blk/counter0")
    if [ "$a" = "$b" ]; then ok "$blk: stopped, counter0 stays at $a"; stopped=1; else : >/tmp/out; not_ok "$blk: stopped, counter0 still counts: $a, then $b"; fi
  elif grep -q "DISABLE" "$dev/$blk/event_list"; then
    not_ok "$blk: stop"
  else
    has "$blk: stop refused where the kernel takes no 0xff and the block has no DISABLE, saying so" "cannot be stopped on this kernel" /tmp/out
  fi
  # start: an all-at-once block (L3, crspace) stopped by its enable counts again, at
  # its event's rate (the rate helper reads counter0 twice, 2 s apart, by the guest's
  # clock).
  if [ -n "$stopped" ] && [ -f "$dev/$blk/enable" ]; then
    check "$blk: start" bfperf start "$blk"
    # counter0 holds name1: a triple measured already (c1 = 0), or a new one whose
    # key must be the suite's alone.
    k0=$(half "$(event_key "$blk" 0 "$n1")")
    if [ "$c1" = 0 ] || free event "$k0"; then
      [ "$c1" = 0 ] || measured event "$k0"
      eval "counter0_event_$kind=\"$n1 $name1\""
      set -- $(rate "$dev/$blk/counter0" 2)
      got=$(awk -v d="${1:-0}" -v ns="${2:-0}" 'BEGIN { if (ns > 0) printf "%.0f", d * 1e9 / ns }')
      rated "$blk: started, counter0 counts $name1 at the model's rate" "$got" "$(event_rate "$blk" 0 "$n1")"
    fi
    bfperf stop "$blk" >/dev/null 2>&1
  fi
}

# register_kind BLOCK: two of its registers (a pair where the table has one), and the
# first on the kind's second block, count at the model's rates.
register_kind() {
  blk=$1 kind=$(echo "$1" | sed 's/[0-9]*$//') second=$(second_of "$1")
  # Register blocks have no event_list: their names and offsets from bfperf's catalog,
  # each taken only where its key is the suite's alone.
  bfperf events "$blk" | awk 'NR > 1 && $2 != "DISABLE" { print $1, $2 }' >/tmp/regs
  picked=""
  while read -r off name; do
    k=$(register_key "$blk" $((off))) k2=""
    [ -z "$picked" ] && [ -n "$second" ] && k2=$(register_key "$second" $((off)))
    free register "$k" || continue
    [ -n "$k2" ] && { free register "$k2" && [ "$k2" != "$k" ] || continue; }
    picked="$picked $name:$((off))"; measured register "$k" $k2
    [ "$(echo $picked | wc -w)" = 2 ] && break
  done </tmp/regs
  [ -n "$picked" ] || { skip "$blk" "no registers listed"; return; }
  set --; for p in $picked; do set -- "$@" -e "$blk/${p%%:*}/"; done
  first=$(echo $picked | cut -d' ' -f1)
  [ -n "$second" ] && set -- "$@" -e "$second/${first%%:*}/"
  bfperf stat -A --json -o /tmp/stat.json "$@" -- sleep 1 >/tmp/out 2>&1
  for p in $picked; do
    if [ "$kind" = clock_measure ]; then
      # Level registers (a clock monitor's last count and its window): their value.
      rated "$blk: stat reads register ${p%%:*} at the model's level" "$(value_of /tmp/stat.json "$blk" "${p%%:*}")" "$(register_level "$blk" "${p#*:}")"
    else
      rated "$blk: stat counts register ${p%%:*} at the model's rate" "$(rate_of /tmp/stat.json "$blk" "${p%%:*}")" "$(register_rate "$blk" "${p#*:}")"
    fi
  done
  [ -n "$second" ] && rated "$second: stat counts register ${first%%:*} beside $blk at the model's rate" \
    "$(rate_of /tmp/stat.json "$second" "${first%%:*}")" "$(register_rate "$second" "${first#*:}")"
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

# A 32-bit crspace counter past its wrap, on llt0's counter 0 (its event a triple
# measured at start): stat counts it for longer than a wrap takes (each window of
# its reads shorter than one); and two snapshots that straddle one wrap, the first
# at about 0.6 of 2^32, the second 0.7 of 2^32 later, give diff the rate (a counter
# that stopped at 2^32 - 1 would not).
if [ "$gen" = bf3 ]; then
  if [ -z "${counter0_event_llt:-}" ]; then
    : >/tmp/out; not_ok "llt0: no event for counter 0 whose rate is the suite's alone, for the wrap checks"
  else
    n=${counter0_event_llt%% *} name=${counter0_event_llt#* } want=$(event_rate llt0 0 "${counter0_event_llt%% *}")
    secs=$(awk -v r="$want" 'BEGIN { printf "%d", 4294967296 / r + 2 }')
    bfperf stat -A --json -o /tmp/stat.json -e "llt0/$name/" -- sleep "$secs" >/tmp/out 2>&1
    rated "llt0: stat counts $name past its 32-bit wrap ($(awk -v r="$want" -v s="$secs" 'BEGIN { printf "%.0f", r * s }') in $secs s)" \
      "$(rate_of /tmp/stat.json llt0 "$name")" "$want"
    bfperf program llt0 0 "$name" >/dev/null 2>&1 && bfperf start llt0 >/dev/null 2>&1
    sleep "$(awk -v r="$want" 'BEGIN { printf "%.2f", 0.6 * 4294967296 / r }')"
    bfperf snapshot llt0 -o /tmp/wrap1.json >/tmp/out 2>&1
    sleep "$(awk -v r="$want" 'BEGIN { printf "%.2f", 0.7 * 4294967296 / r }')"
    bfperf snapshot llt0 -o /tmp/wrap2.json >>/tmp/out 2>&1
    bfperf diff --json /tmp/wrap1.json /tmp/wrap2.json >/tmp/wrap.json 2>>/tmp/out
    got=$(tr -d ' \n' </tmp/wrap.json | awk 'BEGIN { RS = "}" } /"block":"llt0","counter":0,/ {
      if (match($0, /"rate_per_s":[0-9.e+]*/)) { printf "%.0f", substr($0, RSTART + 13, RLENGTH - 13); exit } }')
    rated "llt0: diff of two snapshots across counter 0's 32-bit wrap gives $name's rate" "$got" "$want"
    bfperf stop llt0 >/dev/null 2>&1
  fi
fi
echo "counted against known rates:$counted"
# How far apart the rates measured are: the closest two keys of each domain (event
# keys in half steps, register keys in whole ones).
for d in event register; do
  step=1.01; [ $d = event ] && step=1.004987562112089
  sort -n /tmp/keys.$d | awk -v d=$d -v step=$step 'NR > 1 { g = $1 - p; if (min == "" || g < min) min = g } { p = $1; n++ }
    END { if (n > 1) printf "rates: %d %s rates measured, each its own; the closest two %.1f %% apart (checks allow %s %%)\n", n, d, pct(min), tol }
    function pct(k,  r, i) { r = 1; for (i = 0; i < k; i++) r *= step; return (r - 1) * 100 }' tol=$TOLERANCE
done

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

# The floor on the driver (once a kernel: the stage puts /floor in its first boot):
# bfperf's sampler against benches/floor.c preading the same files (opened once),
# both at -I 100 for 10 s, their CPU time by the kernel's task-clock; 8 counters,
# counter 0 and 1 of four tiles (BlueField-2) or llts (BlueField-3), and their 8
# `event<N>`, which bfperf reads back each tick and the floor reads and compares
# (check:FILE) as it does. An llt counts all at once: each tick bfperf also reads
# back its `enable` and `count_clock`, stops it to read its counters in one window
# and starts it again (the driver clears them as it does), and the floor does the
# same (write:FILE=VALUE) in the same order.
if [ -f /floor ]; then
  if [ "$gen" = bf3 ]; then
    fk=llt e1=$(events llt0 | sed -n 1p | cut -d' ' -f2) e2=$(events llt0 | sed -n 2p | cut -d' ' -f2)
  else
    fk=tile e1=MEMORY_READS e2=MEMORY_WRITES
  fi
  files=""; for t in 0 1 2 3; do
    b="$dev/$fk$t"
    # The events the floor reads back, as bfperf's stat programs them.
    bfperf program "$fk$t" 0="$e1" 1="$e2" >/dev/null 2>&1
    if [ "$fk" = llt ]; then
      echo 1 >"$b/enable"
      files="$files check:$b/enable"
      [ -f "$b/count_clock" ] && files="$files check:$b/count_clock"
      files="$files check:$b/event0 check:$b/event1 write:$b/enable=0 $b/counter0 $b/counter1 write:$b/enable=1"
    else
      files="$files $b/counter0 $b/counter1 check:$b/event0 check:$b/event1"
    fi
  done
  cpu() { awk -F, '/task-clock/ { printf "%.1f", $1; exit }' "$1"; }
  # Beside the time, the instructions it was made of, in user space and in the
  # kernel (TCG's PMU counts them as -icount does): where a gap between the two is.
  split=task-clock,instructions:u,instructions:k
  ins() { awk -F, -v e="$2" '$3 == e && $1 ~ /^[0-9]/ { printf "%.2f", $1 / 1e6; f = 1; exit } END { if (!f) printf "?" }' "$1"; }
  uk() { echo "$(ins "$1" instructions:u) + $(ins "$1" instructions:k) M"; }
  # Three runs of each, in turn; each side's median run (by its time) is the
  # row's: one run's kernel share moves by up to a tenth from run to run.
  for k in 1 2 3; do
    # shellcheck disable=SC2086
    bfperf stat --per-process -x, -e "$split" -o "/tmp/floor.$k.csv" -- floor sample 100 10 $files >"/tmp/floor.$k.out" 2>&1
    bfperf stat --per-process -x, -e "$split" -o "/tmp/bfperf.$k.csv" -- \
      bfperf stat -x, -e "$fk[0-3]/$e1,$e2/" -I 100 --duration 10s -o "/tmp/bfperf.$k.out" >/tmp/out 2>&1
  done
  median_run() { # NAME: /tmp/NAME.csv and .out become its median run's; prints the three times
    local k
    k=$(for k in 1 2 3; do echo "$(cpu "/tmp/$1.$k.csv") $k"; done | sort -n | sed -n '2p' | cut -d' ' -f2)
    cp "/tmp/$1.$k.csv" "/tmp/$1.csv" 2>/dev/null && cp "/tmp/$1.$k.out" "/tmp/$1.out" 2>/dev/null || true
    echo "$(cpu "/tmp/$1.1.csv"), $(cpu "/tmp/$1.2.csv") and $(cpu "/tmp/$1.3.csv")"
  }
  runs="bfperf $(median_run bfperf) ms, C $(median_run floor) ms"
  # The same for 1 s: the start and its first ticks, so that the 10 s runs tell
  # the start from a tick.
  # shellcheck disable=SC2086
  bfperf stat --per-process -x, -e "$split" -o /tmp/floor1.csv -- floor sample 100 1 $files >/dev/null 2>&1
  bfperf stat --per-process -x, -e "$split" -o /tmp/bfperf1.csv -- \
    bfperf stat -x, -e "$fk[0-3]/$e1,$e2/" -I 100 --duration 1s -o /dev/null >/dev/null 2>&1
  f=$(cpu /tmp/floor.csv) b=$(cpu /tmp/bfperf.csv) f1=$(cpu /tmp/floor1.csv) b1=$(cpu /tmp/bfperf1.csv)
  # Both ran their 10 s: 100 intervals (bfperf: a line per block per event).
  fl=$(awk '{ print $1 }' /tmp/floor.out | sort -u | grep -c .) bl=$(grep -c "$e1" /tmp/bfperf.out)
  echo "floor on the driver: stat -I 100 for 10 s of 8 $fk counters and their events ($bl and $fl intervals): bfperf ${b:-?} ms CPU, C floor ${f:-?} ms: $(awk -v b="$b" -v f="$f" 'BEGIN { if (f > 0) printf "%.2f", b / f; else print "?" }')x (the median of three runs in turn: $runs)"
  tick_us() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (b - a) / 90 * 1000 }'; } # 1 s ms, 10 s ms
  echo "floor on the driver: the same in instructions, user + kernel: 10 s bfperf $(uk /tmp/bfperf.csv), C $(uk /tmp/floor.csv); 1 s bfperf $(uk /tmp/bfperf1.csv), C $(uk /tmp/floor1.csv)"
  echo "floor on the driver: the same apart: 1 s (the start and 10 ticks) bfperf ${b1:-?} ms, C ${f1:-?} ms; a tick (10 s less 1 s, over 90) bfperf $(tick_us "$b1" "$b") us, C $(tick_us "$f1" "$f") us"
  # A start alone, against its floors: `bfperf --version`, a minimal Rust program
  # linked as bfperf is, a minimal C one linked as the C loop is (the mean of 5 runs).
  for p in "bfperf --version" minimal-rust minimal-c; do
    # shellcheck disable=SC2086
    bfperf stat -r 5 --per-process -x, -e task-clock -o /tmp/start.csv -- $p >/dev/null 2>&1
    awk -F, '/task-clock/ { printf "%.2f\n", $1; exit }' /tmp/start.csv
  done >/tmp/starts
  echo "floor on the driver: a start: bfperf --version $(sed -n 1p /tmp/starts) ms, a minimal Rust program $(sed -n 2p /tmp/starts) ms, a minimal C program $(sed -n 3p /tmp/starts) ms (static, as the C loop)"
  # The floor the one-shot rows are judged against, for this row too: the C loop's
  # work with Rust's start in place of C's (a minimal Rust program's time less a
  # minimal C one's added to the C loop's).
  echo "floor on the driver: against Rust's start once plus the C loop's work: $(awk -v b="$b" -v f="$f" -v r="$(sed -n 2p /tmp/starts)" -v c="$(sed -n 3p /tmp/starts)" 'BEGIN { if (f > 0 && r > 0 && c > 0) printf "bfperf %s ms, floor %.1f ms: %.2fx", b, f + r - c, b / (f + r - c); else print "?" }')"
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
# The block's first counter that counts an event (count_clock may hold counter 0).
c=$(grep '^bfperf_events_total{' /tmp/m2 | grep "block=\"$blk\"" | head -1 | sed -n 's/.*counter="\([0-9]*\)".*/\1/p')
ev=$(line /tmp/m2 "${c:-0}" | sed -n 's/.*event="\([^"]*\)".*/\1/p')
n=$(events "$blk" | awk -v e="$ev" '$2 == e { print $1; exit }')
d=$(awk -v a="$(line /tmp/m1 "${c:-0}" | awk '{ print $NF }')" -v b="$(line /tmp/m2 "${c:-0}" | awk '{ print $NF }')" 'BEGIN { printf "%.0f", b - a }')
span=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
want=$(awk -v s="$span" -v r="$(event_rate "$blk" "${c:-0}" "${n:-0}")" 'BEGIN { printf "%.0f", s * r }')
if within "$d" "$want" 5; then ok "the exporter's $blk $ev total grows at the model's rate ($d in $span s)"; else
  cp /tmp/m2 /tmp/out; not_ok "the exporter's $blk $ev total grows at the model's rate: $d in $span s, the model's $want"; fi
# The floor of a scrape (once a kernel, on BlueField-3's default set): the exporter
# scraped 40 times over one keep-alive connection by scrape-floor's client, 250 ms
# apart (it shares one sweep among scrapes within 100 ms), its processor time
# meanwhile summed over its threads from /proc/PID/task/*/schedstat (nanoseconds),
# else from /proc/PID/stat (clock ticks). Its floor, once it has stopped: C doing the
# same file work (benches/scrape-ops.awk), benches/scrape-floor.c for each scrape
# and benches/floor.c for the checks between scrapes, which the exporter makes
# whether scraped or not (another program's writes). Unscraped, the exporter is
# judged against C doing its checks every 100 ms and its sweep every second.
if [ -f /floor ] && [ "$gen" = bf3 ]; then
  bfperf blocks --csv | awk -F, 'NR > 1 { print $1, $3 }' >/tmp/mechanisms
  ops() { # probe|sweep -> the file work of one check or one sweep (benches/scrape-ops.awk)
    awk -v dev="$dev" -v what="$1" -f /scrape-ops.awk /tmp/mechanisms /tmp/m2
  }
  files=$(ops sweep) checks=$(ops probe)
  cpu_ns() { # PID -> its processor time so far, in nanoseconds
    if cat /proc/"$1"/task/*/schedstat >/tmp/schedstat 2>/dev/null && [ -s /tmp/schedstat ]; then
      awk '{ t += $1 } END { printf "%.0f", t }' /tmp/schedstat
    else
      awk -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" '{ printf "%.0f", ($14 + $15) * 1e9 / hz }' "/proc/$1/stat"
    fi
  }
  during() { # PID COMMAND... -> the ms of processor time PID spent while COMMAND ran, and the s it ran
    pid=$1; shift
    t0=$(cpu_ns "$pid") u0=$(up); "$@" >/tmp/during.out 2>&1 || return 1; t1=$(cpu_ns "$pid") u1=$(up)
    awk -v a="$t0" -v b="$t1" -v s="$u0" -v e="$u1" 'BEGIN { printf "%.1f %.2f", (b - a) / 1e6, e - s }'
  }
  # $1 $2: the exporter unscraped (ms, s); $3 $4: scraped.
  # shellcheck disable=SC2046
  set -- $(during "$exporter" sleep 10) $(during "$exporter" scrape-floor client 9839 40 250)
  exporter_cpu="$*"
fi
kill $exporter; wait $exporter 2>/dev/null
after=$(state)
unchanged "the exporter put the device back as it found it" "$before" "$after"
# The scrape's floors, with the exporter gone (their writes would be another
# program's to it): each all-at-once block started first, as the exporter had it.
if [ -n "${exporter_cpu:-}" ]; then
  for f in $files; do case $f in write:*=1) f=${f#write:}; echo 1 >"${f%=1}" ;; esac; done
  # shellcheck disable=SC2086
  scrape-floor serve 9840 $files >/tmp/scrape-floor.log 2>&1 &
  sfloor=$!
  n=0; while [ $n -lt 50 ] && ! wget -q -O /dev/null http://127.0.0.1:9840/metrics 2>/dev/null; do sleep 0.2; n=$((n + 1)); done
  # shellcheck disable=SC2046,SC2086
  set -- $exporter_cpu $(during "$sfloor" scrape-floor client 9840 40 250)
  kill "$sfloor"; wait "$sfloor" 2>/dev/null
  # The checks' floors: between two scrapes 250 ms apart the exporter checks twice
  # (100 and 200 ms after the sweep), the checks' reads every 125 ms; unscraped, it
  # checks every 100 ms and sweeps every second. The C programs do that file work
  # for 10 s, one after the other, each timed apart.
  # shellcheck disable=SC2086
  bfperf stat --per-process -x, -e task-clock -o /tmp/cfloor0.csv -- floor sample 125 10 $checks >/dev/null 2>/tmp/cfloor0.out
  # shellcheck disable=SC2086
  bfperf stat --per-process -x, -e task-clock -o /tmp/cfloor1.csv -- floor sample 100 10 $checks >/dev/null 2>/tmp/cfloor1.out
  # shellcheck disable=SC2086
  bfperf stat --per-process -x, -e task-clock -o /tmp/cfloor2.csv -- floor sample 1000 10 $files >/dev/null 2>/tmp/cfloor2.out
  task_ms() { # CSV... -> their task-clock milliseconds summed, once each was counted
    awk -F, -v want=$# '/task-clock/ { t += $1; n++ } END { if (n == want) printf "%.1f", t }' "$@"
  }
  between=$(task_ms /tmp/cfloor0.csv) idle=$(task_ms /tmp/cfloor1.csv /tmp/cfloor2.csv)
  # $1 $2: the exporter unscraped (ms, s); $3 $4: scraped; $5 $6: the C server scraped.
  # shellcheck disable=SC2086
  echo "floor on the driver: the exporter's scrape of the default set ($(echo $files | wc -w) file operations a scrape, 40 scrapes 250 ms apart, its checks between them included): bfperf-exporter ${3:-?} ms CPU; C ${5:-?} ms serving and ${between:-?} ms checking: $(awk -v b="${3:-0}" -v f="${5:-0}" -v c="${between:-0}" 'BEGIN { if (f > 0 && c > 0) printf "%.2f", b / (f + c); else print "?" }')x"
  echo "floor on the driver: the exporter unscraped for ${2:-?} s (checks every 100 ms, a sweep every second): ${1:-?} ms CPU; C ${idle:-?} ms for the same file work over 10 s: $(awk -v b="${1:-0}" -v s="${2:-1}" -v f="${idle:-0}" 'BEGIN { if (f > 0) printf "%.2f", b * 10 / s / f; else print "?" }')x"
  if [ $# -eq 6 ] && [ -n "$between" ] && [ -n "$idle" ] && awk -v a="$3" -v b="$5" 'BEGIN { exit !(a > 0 && b > 0) }'; then ok "the scrape's floor on the driver was measured on both sides"; else
    cat /tmp/during.out /tmp/scrape-floor.log /tmp/cfloor*.out >/tmp/out 2>/dev/null; not_ok "the scrape's floor on the driver was measured on both sides"; fi
fi

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
