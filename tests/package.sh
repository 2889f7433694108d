#!/usr/bin/env bash
# The Debian package, built and installed for real: `cargo deb`, `dpkg -i`, then what
# an operator relies on is where it belongs, the installed default config starts the
# exporter on a simulated BlueField-1, -2 and -3 (promtool accepts each exposition),
# the unit passes `systemd-analyze verify` where that tool exists, and the package
# is removed cleanly. Needs root (dpkg), cargo-deb, man and promtool; .ci/run
# installs them. Run from the repository: bash tests/package.sh
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
         /usr/share/doc/bfperf/copyright; do
  [ -s "$f" ] || fail "$f is missing"
done
[ -s /etc/bfperf/exporter.toml ] || fail "/etc/bfperf/exporter.toml is missing"
dpkg-query -W -f='${Conffiles}\n' bfperf | grep -q '/etc/bfperf/exporter.toml' \
  || fail "/etc/bfperf/exporter.toml is not a conffile"
dpkg-query -W -f='${Conffiles}\n' bfperf | grep -q '/etc/default/bfperf-exporter' \
  || fail "/etc/default/bfperf-exporter is not a conffile"
grep -q '^EnvironmentFile=-/etc/default/bfperf-exporter' /usr/lib/systemd/system/bfperf-exporter.service \
  || fail "the unit reads no /etc/default/bfperf-exporter"
grep -q '^ExecStart=/usr/bin/bfperf exporter' /usr/lib/systemd/system/bfperf-exporter.service \
  || fail "the unit does not run /usr/bin/bfperf"
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

dpkg -r bfperf >/dev/null
[ ! -e /usr/bin/bfperf ] || fail "dpkg -r left /usr/bin/bfperf"
dpkg --purge bfperf >/dev/null
[ ! -e /etc/bfperf/exporter.toml ] || fail "dpkg --purge left /etc/bfperf/exporter.toml"
echo "package test: $deb installs, works on bf1, bf2 and bf3, and removes cleanly"
