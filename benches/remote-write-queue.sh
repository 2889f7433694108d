#!/usr/bin/env bash
# What remote write's queue costs while the receiver refuses everything (HTTP 503):
# the exporter of the bf3 simulator with every default event, pushing every second,
# its queue filled to N samples (default 20,000, about 4 minutes at the default set's
# 96 series a sweep; QUEUE=100000, the default bound, takes about 18),
# its resident memory read from /proc before the first push and once the queue holds
# N. Against the floor: a sample as a series number and a value, 16 bytes.
# Run from the repository: bash benches/remote-write-queue.sh   (needs perl)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BFPERF:-target/release/bfperf}
[ -x "$bin" ] || cargo build --release -q
want=${QUEUE:-20000}
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT
# The receiver: binds a port of its own, says which, answers 503 to everything.
perl -MIO::Socket::INET -e '$| = 1;
  my $l = IO::Socket::INET->new(LocalAddr => "127.0.0.1:0", Listen => 8) or die;
  print $l->sockport, "\n";
  while (my $c = $l->accept) { while (my $h = <$c>) { last if $h eq "\r\n" }
    print $c "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"; close $c }' \
  >"$work/port" &
pids+=($!)
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(head -1 "$work/port")
queue=$((want + want / 10))
printf 'events = ["default"]\n[remote_write]\nurl = "http://127.0.0.1:%s/w"\ninterval = "1s"\nqueue_samples = %s\n' \
  "$port" "$queue" >"$work/exporter.toml"
"$bin" --sim bf3 --lock-file "$work/lock" exporter --config "$work/exporter.toml" --textfile "$work/m.prom" \
  --interval 1s 2>"$work/exporter.log" &
pid=$!
pids+=($pid)
rss() { awk '/^VmRSS/ {print $2 * 1024}' "/proc/$pid/status"; }
metric() { awk -v n="$1" '$1 == n {print $2}' "$work/m.prom" 2>/dev/null; }
for _ in $(seq 100); do [ -s "$work/m.prom" ] && break; sleep 0.05; done
first=$(rss)
start=$(date +%s)
while :; do
  q=$(metric bfperf_remote_write_queue_samples); q=${q:-0}
  awk -v q="$q" -v w="$want" 'BEGIN { exit !(q >= w) }' && break
  [ $(($(date +%s) - start)) -lt $((want / 50 + 60)) ] || { echo "the queue never reached $want: $q" >&2; exit 1; }
  sleep 1
done
last=$(rss)
bytes=$(metric bfperf_remote_write_queue_bytes)
awk -v q="$q" -v a="$first" -v b="$last" -v g="$bytes" 'BEGIN {
  printf "queue of %d samples: resident memory +%.1f MiB, %.0f bytes a sample (the queue counts %.0f); floor 16\n",
    q, (b - a) / 1048576, (b - a) / q, g / q }'
