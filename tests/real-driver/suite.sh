#!/bin/sh
# bfperf's suite on the real mlxbf-pmc driver, inside the guest: discovery, list and
# events, program by name and number, start/stop/clear, snapshot and diff, stat with
# restore (the device byte for byte as before), counts against the traffic helper's
# known rates, the exporter scraped over loopback (its totals against the same rates),
# and top in a terminal.
#
#   suite.sh GEN BLOCKS_FILE
#
# BLOCKS_FILE has a line per block: NAME BASE SIZE COUNTERS TYPE (acpi.py's stderr).
# Prints `ok`/`not ok`/`skip` lines and, last, `kernel VERSION: N passed, M failed,
# K skipped`.
gen=$1 blocks=$2
pass=0 fail=0 skip=0
dev=$(for h in /sys/class/hwmon/hwmon*; do [ "$(cat "$h/name" 2>/dev/null)" = bfperf ] && echo "$h"; done)
export BFPERF_STATE_DIR=/tmp/bfperf-state
mkdir -p -m 700 $BFPERF_STATE_DIR

ok() { pass=$((pass + 1)); echo "ok - $1"; }
not_ok() { fail=$((fail + 1)); echo "not ok - $1"; [ -s /tmp/out ] && sed 's/^/#   /' /tmp/out | head -20; }
skip() { skip=$((skip + 1)); echo "skip - $1: $2"; }
# check DESCRIPTION COMMAND...: the command exits 0.
check() { d=$1; shift; if "$@" >/tmp/out 2>&1; then ok "$d"; else not_ok "$d"; fi; }
# has DESCRIPTION PATTERN FILE: the file has a line matching the pattern.
has() { if grep -q -- "$2" "$3"; then ok "$1"; else [ "$3" = /tmp/out ] || cp "$3" /tmp/out; not_ok "$1 (no '$2')"; fi; }
# state: every event, enable and register file of the device, for byte-for-byte checks.
state() { for f in "$dev"/*/event[0-9]* "$dev"/*/enable; do [ -f "$f" ] && echo "$f $(cat "$f" 2>&1)"; done; }
# unchanged DESCRIPTION BEFORE AFTER: two states are the same, or the difference is shown.
unchanged() { if [ "$2" = "$3" ]; then ok "$1"; else
  echo "$2" >/tmp/pre; echo "$3" >/tmp/post; diff /tmp/pre /tmp/post >/tmp/out 2>&1; not_ok "$1"; fi; }
# traffic_on: the helper advances the block's counters at the known rate, until killed.
traffic_on() { traffic $kind "$base" "$(counters_of $blk)" $rate >/dev/null 2>&1 & helper=$!; }
base_of() { awk -v b="$1" '$1 == b { print $2 }' "$blocks"; }
counters_of() { awk -v b="$1" '$1 == b { print $4 }' "$blocks"; }
within() { awk -v v="$1" -v t="$2" -v p="$3" 'BEGIN { d = v - t; if (d < 0) d = -d; exit !(t > 0 && d <= t * p / 100) }'; }

if [ -z "$dev" ]; then
  not_ok "the driver made a bfperf hwmon device"
  echo "kernel $(uname -r): $pass passed, $fail failed, $skip skipped"
  exit 0
fi
ok "the driver made a bfperf hwmon device ($dev)"

check "info finds the device" bfperf info
has "info names the generation" "$(echo "$gen" | sed 's/bf/BlueField-/')" /tmp/out
check "blocks lists the blocks" bfperf blocks
if [ "$gen" = bf3 ]; then
  blk=llt0 name=HNF0_REQS_RECEIVED num=0x1 other=0x2 kind=crspace
else
  blk=l3cachehalf0 name=HITS_BANK0 num=0x1 other=0x2 kind=l3
fi
has "blocks lists $blk" "$blk" /tmp/out
check "list lists the device's events" bfperf list
has "list has $name" "$name" /tmp/out
check "events reads $blk's event_list" bfperf events $blk
has "events has $name" "$name" /tmp/out


check "program by name" bfperf program $blk 0 $name
has "event0 reads the name back" "$name" "$dev/$blk/event0"
check "program by number" bfperf program $blk 1 $other
has "event1 reads the number back" "^$other:" "$dev/$blk/event1"
check "start" bfperf start $blk
has "start enables" "^1" "$dev/$blk/enable"
check "stop" bfperf stop $blk
has "stop disables" "^0" "$dev/$blk/enable"
if [ "$kind" = l3 ]; then
  # The driver refuses every write to an L3 counter; bfperf says so before writing.
  if bfperf clear $blk >/tmp/out 2>&1; then not_ok "clear of an L3 block is refused"; else
    has "clear of an L3 block is refused, with what to do instead" "bfperf start $blk" /tmp/out; fi
else
  check "clear" bfperf clear $blk
  has "clear zeroes counter0" "^0x0$" "$dev/$blk/counter0"
fi
check "read" bfperf read $blk
has "read shows event0 by name" "$name" /tmp/out

check "snapshot" bfperf snapshot all -o /tmp/snap1.json
bfperf program $blk 2 $name >/dev/null 2>&1
check "snapshot again" bfperf snapshot all -o /tmp/snap2.json
check "diff of two snapshots" bfperf diff /tmp/snap1.json /tmp/snap2.json
has "diff shows the change" "$blk" /tmp/out

# Traffic at known rates: counter i counts RATE * (i + 1) per second while enabled.
rate=1000000
base=$(base_of $blk)
traffic_on
sleep 1
pre=$(state)
bfperf stat -x, -e "$blk/$name/" -e "$blk/$other/" -- sleep 2 >/tmp/out 2>&1
post=$(state)
unchanged "stat restores the device byte for byte" "$pre" "$post"
# The two events land on counters 0 and 1 (rates 1 and 2 M/s) over about 2 s.
c0=$(grep "$name" /tmp/out | head -1 | cut -d, -f1)
c1=$(grep "$other\|$(grep "^$other:" "$dev/$blk/event_list" | sed 's/^[^:]*: *//')" /tmp/out | head -1 | cut -d, -f1)
echo "# stat counted $c0 and $c1"
if within "${c0:-0}" $((rate * 2)) 10; then ok "stat's count of counter 0 is the helper's (2 s at 1 M/s, within 10 %)"; else
  not_ok "stat's count of counter 0 is the helper's: ${c0:-none}"; fi
if within "${c1:-0}" $((rate * 4)) 10; then ok "stat's count of counter 1 is the helper's (2 s at 2 M/s, within 10 %)"; else
  not_ok "stat's count of counter 1 is the helper's: ${c1:-none}"; fi
kill $helper

# The exporter, scraped over loopback.
ip link set lo up 2>/dev/null
before=$(state)
bfperf exporter --listen 127.0.0.1:9839 >/tmp/exporter.log 2>&1 &
exporter=$!
n=0; while [ $n -lt 50 ] && ! wget -q -O /tmp/metrics http://127.0.0.1:9839/metrics 2>/dev/null; do sleep 0.2; n=$((n + 1)); done
has "the exporter serves /metrics" "^bfperf_" /tmp/metrics
# Its running totals against the helper's rates: over about 4 s, counters 1 and 2 of
# the block grow by 2 and 3 M/s (within 10 %: the scrapes' times are the shell's), and
# by 3 to 2 of each other (within 5 %).
traffic_on
sleep 1
up() { cut -d' ' -f1 /proc/uptime; }
total() { grep "block=\"$blk\"" "$1" | grep "counter=\"$2\"" | head -1 | awk '{ print $NF }'; }
t1=$(up); wget -q -O /tmp/m1 http://127.0.0.1:9839/metrics
sleep 4
t2=$(up); wget -q -O /tmp/m2 http://127.0.0.1:9839/metrics
kill $helper
a1=$(total /tmp/m1 1) b1=$(total /tmp/m2 1) a2=$(total /tmp/m1 2) b2=$(total /tmp/m2 2)
d1=$(( ${b1:-0} - ${a1:-0} )) d2=$(( ${b2:-0} - ${a2:-0} ))
span=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
echo "# the exporter's counters 1 and 2 grew by $d1 and $d2 in $span s"
if within "$d1" "$(awk -v s="$span" -v r=$rate 'BEGIN { printf "%d", s * r * 2 }')" 10; then
  ok "the exporter's counter 1 grows at the helper's rate"; else not_ok "the exporter's counter 1 grows at the helper's rate: $d1 in $span s"; fi
if within "$(( d2 * 2 ))" "$(( d1 * 3 ))" 5; then ok "the exporter's counters 2 and 1 grow as 3 to 2"; else
  not_ok "the exporter's counters 2 and 1 grow as 3 to 2: $d2, $d1"; fi
kill $exporter; wait $exporter 2>/dev/null
after=$(state)
unchanged "the exporter put the device back as it found it" "$before" "$after"

# top in a terminal (tests/real-driver/pty.c): it draws its panels, ends on q and puts
# the device back.
panel="L3 cache"; [ "$gen" = bf3 ] && panel=LLC
before=$(state)
pty 4 100 30 bfperf top -i 500ms -e "$blk/$name/" >/tmp/top.raw 2>&1; rc=$?
after=$(state)
if [ $rc = 0 ]; then ok "top ends on q"; else cp /tmp/top.raw /tmp/out; not_ok "top ends on q (status $rc)"; fi
# Its screen as text: cursor moves (over cells already blank) become spaces.
tr -d '\033' </tmp/top.raw | sed 's/\[[0-9;?]*[A-Za-z]/ /g' >/tmp/top.txt
has "top draws its header" "bfperf top" /tmp/top.txt
has "top draws the $panel panel" " $panel " /tmp/top.txt
unchanged "top put the device back as it found it" "$before" "$after"

echo "kernel $(uname -r): $pass passed, $fail failed, $skip skipped"
