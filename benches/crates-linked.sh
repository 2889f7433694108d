#!/usr/bin/env bash
# Which crates each program links: a release build with its symbols kept, and for
# every crate of the dependency tree, whether any function of it is in the binary
# (the linker keeps only what is reached, so a crate the program never calls is
# not there, whatever the package depends on).
# Usage: bash benches/crates-linked.sh   (prints "PROGRAM: N crates" and the lists)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
target=${CARGO_TARGET_DIR:-target}/symbols
CARGO_PROFILE_RELEASE_STRIP=none timeout 1800 cargo build --quiet --release --locked \
  --target-dir "$target" --bins
# The crates of the tree, by the name their symbols carry (dashes become underscores).
timeout 120 cargo tree --locked -e normal --prefix none --format '{lib}' \
  | sed 's/ .*//; s/-/_/g' | grep -v '^$' | sort -u > "$work/crates"
for program in bfperf bfperf-exporter; do
  nm --demangle "$target/release/$program" | sed 's/^[^ ]* [^ ]* //' > "$work/symbols"
  while read -r crate; do
    grep -qE "(^|[^:[:alnum:]_])$crate::" "$work/symbols" && echo "$crate"
  done < "$work/crates" > "$work/$program"
  echo "$program: $(wc -l < "$work/$program") crates: $(tr '\n' ' ' < "$work/$program")"
done
for group in "async runtime, HTTP, TLS, protobuf:tokio hyper http rustls ring prost" \
             "TUI, plotting, FUSE:ratatui crossterm plotters fuser"; do
  echo "${group%%:*}:"
  for program in bfperf bfperf-exporter; do
    found=$(for c in ${group#*:}; do grep -qx "$c" "$work/$program" && echo -n "$c "; done; true)
    echo "  $program: ${found:-none}"
  done
done
