#!/usr/bin/env bash
# The Debian package, built and installed for real: `cargo deb`, `dpkg -i`, then what
# an operator relies on is where it belongs, the installed default config starts the
# exporter on a simulated BlueField-1, -2 and -3 (promtool accepts each exposition),
# the unit passes `systemd-analyze verify` where that tool exists, and the package
# is removed cleanly. With two config lines and a web config it answers a TLS scrape
# with basic auth on a non-loopback address of a network namespace. Needs root (dpkg,
# ip netns), cargo-deb, man, promtool, openssl, curl and iproute2; .ci/run installs
# them. Run from the repository: bash tests/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "package test: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (dpkg -i)"
command -v cargo-deb >/dev/null || fail "needs cargo-deb (cargo install cargo-deb --locked)"

cargo deb --quiet
deb=$(ls -t target/debian/bfperf_*.deb | head -1)
dpkg -i "$deb" >/dev/null
trap 'dpkg --purge bfperf >/dev/null 2>&1 || true' EXIT

[ "$(/usr/bin/bfperf --version)" = "bfperf $(awk -F'"' '/^version/ {print $2; exit}' Cargo.toml)" ] \
  || fail "bfperf --version: $(/usr/bin/bfperf --version)"
for page in bfperf bfperf-stat bfperf-exporter bfperf-metrics; do
  man -w "$page" >/dev/null || fail "man -w $page finds nothing"
done
for f in /usr/share/bash-completion/completions/bfperf \
         /usr/share/zsh/vendor-completions/_bfperf \
         /usr/share/fish/vendor_completions.d/bfperf.fish \
         /usr/lib/systemd/system/bfperf-exporter.service \
         /usr/share/bfperf/prometheus/bfperf.rules.yml \
         /usr/share/bfperf/grafana/bfperf.json \
         /usr/share/doc/bfperf/copyright \
         /usr/share/doc/bfperf/examples/workloads/burst.toml; do
  [ -s "$f" ] || fail "$f is missing"
done
[ -s /etc/bfperf/exporter.toml ] || fail "/etc/bfperf/exporter.toml is missing"
dpkg-query -W -f='${Conffiles}\n' bfperf | grep -q '/etc/bfperf/exporter.toml' \
  || fail "/etc/bfperf/exporter.toml is not a conffile"
dpkg-query -W -f='${Conffiles}\n' bfperf | grep -q '/etc/default/bfperf-exporter' \
  || fail "/etc/default/bfperf-exporter is not a conffile"
grep -q '^EnvironmentFile=-/etc/default/bfperf-exporter' /usr/lib/systemd/system/bfperf-exporter.service \
  || fail "the unit reads no /etc/default/bfperf-exporter"
grep -q '^ExecStart=/usr/bin/bfperf-exporter ' /usr/lib/systemd/system/bfperf-exporter.service \
  || fail "the unit does not run /usr/bin/bfperf-exporter"
if command -v systemd-analyze >/dev/null; then
  if ! out=$(systemd-analyze verify /usr/lib/systemd/system/bfperf-exporter.service 2>&1); then
    # Only a machine without systemd running is excused.
    echo "$out" | grep -q -E 'has not been booted with systemd|Failed to connect to bus' \
      || fail "systemd-analyze verify: $out"
  fi
fi
/usr/bin/promtool check rules /usr/share/bfperf/prometheus/bfperf.rules.yml >/dev/null

# The installed config, unchanged, on each generation's simulator.
work=$(mktemp -d)
trap 'rm -rf "$work"; dpkg --purge bfperf >/dev/null 2>&1 || true' EXIT
declare -A want=(
  [bf1]='^bfperf_events_total\{block="l3cache0half0",.*event="HITS_BANK0"\} [1-9]'
  [bf2]='^bfperf_events_total\{block="tile0",.*event="MEMORY_READS"\} [1-9]'
  [bf3]='^bfperf_events_total\{block="mss0",.*event="SKYLIB_DDN_TX_FLITS"\} [1-9]'
)
for gen in bf1 bf2 bf3; do
  BFPERF_STATE_DIR="$work/state-$gen" timeout -s INT 3 /usr/bin/bfperf --sim "$gen" exporter \
    --config /etc/bfperf/exporter.toml --textfile "$work/$gen.prom" --interval 1s 2>"$work/$gen.log" || true
  [ -s "$work/$gen.prom" ] || fail "$gen: no exposition: $(cat "$work/$gen.log")"
  /usr/bin/promtool check metrics < "$work/$gen.prom" || fail "$gen: promtool refuses the exposition"
  grep -q -E "${want[$gen]}" "$work/$gen.prom" || fail "$gen: nothing matches ${want[$gen]}"
done
[ "$(grep -c '^bfperf_pll_frequency_hertz' "$work/bf3.prom")" -ge 14 ] || fail "bf3: PLL frequencies missing"

# README's fleet setup, as an operator does it: two lines of the installed config and
# a web config beside it; the exporter then answers a TLS scrape with basic auth on a
# non-loopback address. The network is a veth pair between two namespaces this test
# makes (the DPU's and the Prometheus server's), never a real one.
ns_dpu=bfperf-test-dpu.$$ ns_prom=bfperf-test-prom.$$
cleanup_netns() {
  [ -n "${exporter_pid:-}" ] && kill "$exporter_pid" 2>/dev/null && wait "$exporter_pid" 2>/dev/null
  ip netns del "$ns_dpu" 2>/dev/null; ip netns del "$ns_prom" 2>/dev/null
  rm -f /etc/bfperf/web.yml /etc/bfperf/server.crt /etc/bfperf/server.key
  rm -rf "$work"; dpkg --purge bfperf >/dev/null 2>&1 || true
}
trap cleanup_netns EXIT
ip netns add "$ns_dpu" && ip netns add "$ns_prom" || fail "cannot make network namespaces"
ip -n "$ns_dpu" link add mgmt0 type veth peer name eth0 netns "$ns_prom"
ip -n "$ns_dpu" addr add 10.251.0.1/24 dev mgmt0
ip -n "$ns_prom" addr add 10.251.0.2/24 dev eth0
for ns in "$ns_dpu" "$ns_prom"; do ip -n "$ns" link set lo up; done
ip -n "$ns_dpu" link set mgmt0 up; ip -n "$ns_prom" link set eth0 up
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=dpu-01 -addext subjectAltName=IP:10.251.0.1 \
  -keyout /etc/bfperf/server.key -out /etc/bfperf/server.crt 2>/dev/null \
  || fail "openssl cannot make a certificate"
chmod 600 /etc/bfperf/server.key
# bcrypt of "s3cret", as htpasswd -B makes it.
cat > /etc/bfperf/web.yml <<'YML'
tls_server_config:
  cert_file: server.crt
  key_file: server.key
basic_auth_users:
  prometheus: $2b$10$TK0S30lt43pYMeQz4zMtGeTcG6u7DD0WK77PU.16yTOa8W3RO5QDa
YML
printf 'listen = "0.0.0.0:9839"\nweb_config_file = "web.yml"\n' >> /etc/bfperf/exporter.toml
# The unit's command line; --sim stands in for the device this machine lacks.
BFPERF_STATE_DIR="$work/state-netns" ip netns exec "$ns_dpu" \
  /usr/bin/bfperf-exporter --sim bf3 --config /etc/bfperf/exporter.toml 2>"$work/netns.log" &
exporter_pid=$!
scrape() {
  ip netns exec "$ns_prom" curl -s -o "$work/scrape" -w '%{http_code}' --max-time 5 "$@" || true
}
for _ in $(seq 50); do
  [ "$(scrape --cacert /etc/bfperf/server.crt https://10.251.0.1:9839/metrics)" = 401 ] && break
  sleep 0.2
done
[ "$(scrape --cacert /etc/bfperf/server.crt https://10.251.0.1:9839/metrics)" = 401 ] \
  || fail "no TLS answer on 10.251.0.1:9839: $(cat "$work/netns.log")"
[ "$(scrape --cacert /etc/bfperf/server.crt -u prometheus:guess https://10.251.0.1:9839/metrics)" = 401 ] \
  || fail "a wrong password is let in"
[ "$(scrape --cacert /etc/bfperf/server.crt -u prometheus:s3cret https://10.251.0.1:9839/metrics)" = 200 ] \
  || fail "the scraper's password is refused"
grep -q -E "${want[bf3]}" "$work/scrape" || fail "the TLS scrape has no DDR counts"
/usr/bin/promtool check metrics < "$work/scrape" || fail "promtool refuses the TLS scrape"
[ "$(scrape http://10.251.0.1:9839/metrics)" = 000 ] || fail "plain HTTP is answered"
grep -q -i 'warning' "$work/netns.log" && fail "the exporter warns with a web config: $(cat "$work/netns.log")"
kill "$exporter_pid"; wait "$exporter_pid" || fail "the exporter failed on SIGTERM: $(cat "$work/netns.log")"
exporter_pid=
rm -f /etc/bfperf/web.yml /etc/bfperf/server.crt /etc/bfperf/server.key

dpkg -r bfperf >/dev/null
for p in bfperf bfperf-exporter; do
  [ ! -e /usr/bin/$p ] || fail "dpkg -r left /usr/bin/$p"
done
dpkg --purge bfperf >/dev/null
[ ! -e /etc/bfperf/exporter.toml ] || fail "dpkg --purge left /etc/bfperf/exporter.toml"
echo "package test: $deb installs, works on bf1, bf2 and bf3, answers a TLS scrape with basic auth across a network namespace, and removes cleanly"
