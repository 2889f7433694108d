#!/usr/bin/env bash
# The exporter's systemd unit, least privilege checked two ways:
# - `systemd-analyze security --offline=true` rates it 2.0 or lower;
# - the exporter works under the unit's restrictions, applied here by hand as the
#   unit states them (no systemd runs the test): uid 0 with no capability and no new
#   privileges (setpriv), every file system read-only but the device and a private
#   /run/bfperf (a mount namespace), and no system call outside the unit's filter
#   (every call it makes, traced with strace, against systemd's own lists). The device
#   is a FUSE simulator, mounted with the kernel's permission checks as sysfs has
#   them (root's files, mode 0644). It serves a scrape, counts a root client beside
#   it, reloads on SIGHUP and puts the device back on SIGTERM.
# Needs root, systemd-analyze (systemd 250 or later), setpriv, unshare, strace, curl,
# perl and /dev/fuse; .ci/run installs them. Usage: bash tests/unit-sandbox.sh [BFPERF]
set -euo pipefail
cd "$(dirname "$0")/.."
unit=contrib/bfperf-exporter.service
bfperf=$(realpath "${1:-target/debug/bfperf}")

fail() { echo "unit sandbox test: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root"
for tool in systemd-analyze setpriv unshare strace curl perl; do
  command -v "$tool" >/dev/null || fail "needs $tool"
done
[ -x "$bfperf" ] || fail "no bfperf at $bfperf (cargo build)"

# The score.
score=$(timeout 60 systemd-analyze security --offline=true "$unit" 2>&1 | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
[ -n "$score" ] || fail "systemd-analyze gave no score for $unit"
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$unit is rated $score, above 2.0"
echo "unit sandbox test: systemd-analyze security rates $unit $score"

# The restrictions the lines below stand for; if the unit changes, so must they.
for line in User=root CapabilityBoundingSet= NoNewPrivileges=yes ProtectSystem=strict \
  RuntimeDirectory=bfperf SystemCallFilter=@system-service \
  'SystemCallFilter=~@privileged @resources' SystemCallFilter=fchownat \
  'RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6'; do
  grep -qxF "$line" "$unit" || fail "$unit no longer says $line; update this test with it"
done

work=$(mktemp -d)
# The member runs a copy of bfperf from here.
chmod 0755 "$work"
cp "$bfperf" "$work/bfperf"
mounted=
cleanup() {
  [ -n "${sim_pid:-}" ] && kill -INT "$sim_pid" 2>/dev/null && wait "$sim_pid" 2>/dev/null
  [ -n "$mounted" ] && grep -q " $work/sys fuse" /proc/mounts && umount "$work/sys" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir "$work/sys" "$work/out"
timeout 300 "$bfperf" sim mount --gen bf2 "$work/sys" 2>"$work/sim.log" &
sim_pid=$! mounted=1
for _ in $(seq 100); do
  grep -q " $work/sys fuse" /proc/mounts && [ -e "$work/sys/class/hwmon/hwmon3/name" ] && break
  sleep 0.1
done
grep -q " $work/sys fuse" /proc/mounts || fail "the simulator did not mount: $(cat "$work/sim.log")"
dev=$work/sys/class/hwmon/hwmon3
[ "$(cat "$dev/name")" = bfperf ] || fail "$dev/name is not bfperf"
state() { (cd "$dev" && for f in */event* */enable; do [ -f "$f" ] && echo "$f $(cat "$f" 2>&1)"; done); }
state >"$work/before"

# The config: socket_group a group of its own number, remote write with basic auth
# to a receiver on loopback (perl: answers 204 to each request, and says so).
group=4243
rw_port=$((20000 + RANDOM % 20000))
printf 'pw\n' >"$work/password"
chmod 0600 "$work/password"
printf '%s\n' 'events = ["default"]' "socket_group = \"$group\"" '[remote_write]' \
  "url = \"http://127.0.0.1:$rw_port/api/v1/write\"" 'interval = "1s"' \
  "basic_auth = { username = \"dpu\", password_file = \"$work/password\" }" >"$work/exporter.toml"
cat >"$work/receiver.pl" <<'PERL'
use IO::Socket::INET;
$| = 1;
my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1:$ARGV[0]", Listen => 8, ReuseAddr => 1) or die "listen: $!";
while (my $c = $l->accept) {
  my $n = 0;
  while (my $h = <$c>) { $n = $1 if $h =~ /^content-length: *(\d+)/i; last if $h eq "\r\n"; }
  read($c, my $body, $n);
  print $c "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
  close $c;
  print "push\n";
}
PERL

# Inside a mount namespace: every mount read-only but /proc, /sys, /dev and the
# simulator's (it stands for /sys), and a tmpfs on /run/bfperf (the unit's
# RuntimeDirectory), so the machine's own /run/bfperf is never touched.
port=$((20000 + RANDOM % 20000))
cat >"$work/inside.sh" <<EOF
set -eu
# /run a tmpfs of the namespace's own, so that nothing is made in the machine's.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -m 0755 /run/bfperf
# The test's own records (a bind mount of their own, left writable).
mount --bind $work/out $work/out
awk '{print \$2}' /proc/self/mounts | sort -u | while read -r m; do
  case \$m in /proc|/proc/*|/sys|/sys/*|/dev|/dev/*|/run|$work/sys|$work/sys/*|$work/out) continue ;; esac
  mount -o remount,bind,ro "\$m" 2>/dev/null || true
done
touch /usr/.bfperf-rw 2>/dev/null && { echo "/usr is still writable" >&2; exit 1; }
cd /
timeout 60 perl $work/receiver.pl $rw_port >$work/out/pushes 2>$work/out/receiver.err &
receiver=\$!
# SupplementaryGroups= of the unit's drop-in: the exporter is in the group.
strace -f -qq -o $work/out/trace setpriv --groups $group --bounding-set -all --inh-caps -all \\
  --ambient-caps -all --no-new-privs -- $bfperf --sysfs-root $work/sys exporter \\
  --config $work/exporter.toml --listen 127.0.0.1:$port --interval 1s 2>$work/out/exporter.log &
tracer=\$!
for _ in \$(seq 100); do curl -sf http://127.0.0.1:$port/metrics >$work/out/scrape 2>/dev/null && break; sleep 0.2; done
# The exporter is strace's child (setpriv exec'd it).
pid=\$(pgrep -P \$tracer)
stat -c '%a %g' /run/bfperf/*.sock >$work/out/socket
# A root client beside it, counted by the exporter; then a member of the group.
$bfperf --sysfs-root $work/sys stat -x, -o $work/out/client.csv -e tile0/MEMORY_READS/ -- sleep 1 2>$work/out/client.err || true
setpriv --reuid 65534 --regid 65534 --groups $group $work/bfperf --sysfs-root $work/sys stat -x, -o - \\
  -e tile1/MEMORY_WRITES/ -- sleep 1 >$work/out/member.csv 2>$work/out/member.err || true
sleep 1
kill -HUP \$pid; sleep 1.5
curl -sf http://127.0.0.1:$port/metrics >$work/out/scrape2 || true
kill -TERM \$pid; wait \$tracer; echo \$? >$work/out/exporter.rc
kill \$receiver 2>/dev/null || true
EOF
timeout 120 unshare -m --propagation private sh "$work/inside.sh" || fail "the sandboxed run failed: $(cat "$work/out/exporter.log" 2>/dev/null)"

[ "$(cat "$work/out/socket")" = "660 $group" ] \
  || fail "the sharing socket is not the group's (mode, group: $(cat "$work/out/socket")): $(cat "$work/out/exporter.log")"
grep -q -E '^[0-9]+,,MEMORY_WRITES|tile1/MEMORY_WRITES/' "$work/out/member.csv" 2>/dev/null \
  || fail "the member's stat beside it counted nothing: $(cat "$work/out/member.err" "$work/out/member.csv" 2>/dev/null)"
grep -q '<not counted>' "$work/out/member.csv" && fail "the member was not counted: $(cat "$work/out/member.csv")"
grep -q 'owned by the exporter' "$work/out/member.err" || fail "the member was not counted by the exporter: $(cat "$work/out/member.err")"
[ "$(grep -c push "$work/out/pushes")" -ge 1 ] \
  || fail "the receiver got no push: $(cat "$work/out/receiver.err" "$work/out/exporter.log")"

grep -q -E '^bfperf_events_total\{block="tile0",.*event="MEMORY_READS"\} [1-9]' "$work/out/scrape" \
  || fail "the sandboxed exporter served no count: $(head -c 2000 "$work/out/exporter.log")"
grep -q -E '^bfperf_events_total' "$work/out/scrape2" || fail "no scrape after SIGHUP: $(cat "$work/out/exporter.log")"
grep -q -i 'reload' "$work/out/exporter.log" || fail "SIGHUP was not reported as a reload: $(cat "$work/out/exporter.log")"
[ "$(cat "$work/out/exporter.rc")" = 0 ] || fail "the exporter exited $(cat "$work/out/exporter.rc"): $(cat "$work/out/exporter.log")"
grep -q -E '^[0-9]+,,MEMORY_READS|tile0/MEMORY_READS/' "$work/out/client.csv" 2>/dev/null \
  || fail "the client beside it counted nothing: $(cat "$work/out/client.err" "$work/out/client.csv" 2>/dev/null)"
grep -q '<not counted>' "$work/out/client.csv" && fail "the client beside it was not counted: $(cat "$work/out/client.csv")"
state >"$work/after"
diff "$work/before" "$work/after" >&2 || fail "the device was not put back as it was"

# Every system call bfperf made (after setpriv exec'd it) is one the unit allows.
expand() {
  timeout 30 systemd-analyze syscall-filter "$1" | sed '1d' | sed 's/^ *//' | grep -v -e '^#' -e '^$' |
    while read -r s; do case $s in @*) expand "$s" ;; *) echo "$s" ;; esac; done
}
# The unit's SystemCallFilter= lines in order, merged as systemd merges them: the
# first, an allow list, sets what is allowed; a `~` line takes its calls away; a
# later allow line adds its calls back.
calls() { case $1 in @*) expand "$1" ;; *) echo "$1" ;; esac; }
: >"$work/allowed"
grep '^SystemCallFilter=' "$unit" | sed 's/^SystemCallFilter=//' | while read -r line; do
  case $line in
    "~"*)
      for g in ${line#\~}; do calls "$g"; done | sort -u >"$work/denied"
      comm -23 "$work/allowed" "$work/denied" >"$work/kept" ;;
    *) { cat "$work/allowed"; for g in $line; do calls "$g"; done; } | sort -u >"$work/kept" ;;
  esac
  mv "$work/kept" "$work/allowed"
done
grep -qx fchownat "$work/allowed" || fail "the unit's filter, merged here, lacks fchownat"
grep -qx -e setuid -e chown -e lchown "$work/allowed" && fail "the unit's filter, merged here, allows more of @privileged"
first=$(grep -n "execve(\"$bfperf\"" "$work/out/trace" | head -1 | cut -d: -f1)
[ -n "$first" ] || fail "strace saw no execve of bfperf"
tail -n +"$first" "$work/out/trace" | sed -n -E 's/^[0-9]+ +([a-z0-9_]+)\(.*/\1/p; s/^[0-9]+ +<\.\.\. ([a-z0-9_]+) resumed>.*/\1/p' \
  | sort -u >"$work/used"
outside=$(comm -23 "$work/used" "$work/allowed")
[ -z "$outside" ] || fail "system calls the unit's filter refuses: $(echo $outside)"
echo "unit sandbox test: the exporter served, handed its socket to a group, counted root and a member beside it, pushed $(grep -c push "$work/out/pushes") times, reloaded and restored the device with no capability, a read-only system and $(wc -l <"$work/used") system calls, all in the unit's filter"
