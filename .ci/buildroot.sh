# Sourced by .ci/aarch64 and .ci/rust-floor: a Debian 13 build root holding Debian's
# packaged Rust (1.85, bfperf's rust-version), the arm64 standard library, the aarch64
# cross linker and qemu-user, made once and cached outside the clone (BFPERF_CI_CACHE,
# default ~/.cache/bfperf-ci); a change to the recipe below makes it anew. Needs root.
#
# Binaries link against Debian 12's glibc (2.36, in /opt/glibc-2.36 of the root), not
# the root's own (2.41): a program linked against a glibc records the version of every
# symbol it finds there, weak ones included, and the loader refuses to start it where
# that version is missing. Linked against 2.41, Rust's standard library asks for
# GLIBC_2.39 (pidfd_spawnp) and the binary does not start on Ubuntu 22.04 or 24.04.
#
# Before sourcing, set `step` (the name messages begin with).
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${BFPERF_CI_CACHE:-$HOME/.cache/bfperf-ci}
root=$cache/trixie-root

say() { printf '%s: %s\n' "$step" "$*" >&2; }
fail() { say "$*"; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root (debootstrap, chroot)"

# The Debian archive and its security archive this machine's apt is configured with
# (a site's mirror where it has one): packages come from there, and no address is
# written here. BFPERF_DEBIAN_MIRROR and BFPERF_SECURITY_MIRROR override them (a
# machine whose apt knows no Debian archive, such as Ubuntu's).
apt_archive() {
  apt-get indextargets --format '$(REPO_URI) $(LABEL)' 2>/dev/null \
    | awk -v l="$1" '$2 == l { sub(/\/$/, "", $1); print $1; exit }'
}
mirror=${BFPERF_DEBIAN_MIRROR:-$(apt_archive Debian)}
security_mirror=${BFPERF_SECURITY_MIRROR:-$(apt_archive Debian-Security)}
[ -n "$mirror" ] || fail "this machine's apt configuration names no Debian archive; set BFPERF_DEBIAN_MIRROR to one"
[ -n "$security_mirror" ] || security_mirror=${mirror%/debian}/debian-security

# What the root holds; a change here makes the root anew.
root_packages="rustc cargo libstd-rust-dev:arm64 libc6:arm64 gcc-aarch64-linux-gnu
  libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user ca-certificates"
glibc_packages="libc6-arm64-cross libc6-dev-arm64-cross libgcc-s1-arm64-cross
  libc6-amd64-cross libc6-dev-amd64-cross libgcc-s1-amd64-cross"
glibc=/opt/glibc-2.36
recipe="trixie 2 $(echo $root_packages) bookworm $(echo $glibc_packages)"

make_root() {
  command -v debootstrap >/dev/null || {
    (timeout 600 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq debootstrap) >/dev/null
  }
  say "making the Debian 13 build root in $root"
  rm -rf "$root.new"
  timeout 1800 debootstrap --variant=minbase --include=ca-certificates trixie "$root.new" \
    "$mirror" >"$cache/debootstrap.log" 2>&1 \
    || fail "debootstrap failed; see $cache/debootstrap.log"
  cp /etc/resolv.conf "$root.new/etc/resolv.conf"
  # The host's CA bundle, for cargo to reach crates.io from inside the root (the
  # host may trust authorities the root does not know).
  cp /etc/ssl/certs/ca-certificates.crt "$root.new/etc/ssl/certs/host-ca-certificates.crt"
  chroot "$root.new" dpkg --add-architecture arm64
  unshare -m --propagation private sh -c "mount -t proc proc '$root.new/proc' &&
    chroot '$root.new' sh -c 'timeout 600 apt-get update -qq &&
      DEBIAN_FRONTEND=noninteractive timeout 1800 apt-get install -y -qq --no-install-recommends $(echo $root_packages)'" \
    >"$cache/root-packages.log" 2>&1 || fail "installing the root's packages failed; see $cache/root-packages.log"
  make_glibc_sysroot "$root.new"
  echo "$recipe" >"$root.new/.bfperf-recipe"
  rm -rf "$root"
  mv "$root.new" "$root"
}

# Debian 12's glibc for both targets, unpacked (not installed) into $glibc, and a
# linker for each target that links against it.
make_glibc_sysroot() {
  local r=$1 p
  echo "deb $mirror bookworm main" >"$r/etc/apt/sources.list.d/bookworm.list"
  unshare -m --propagation private sh -c "mount -t proc proc '$r/proc' &&
    chroot '$r' sh -c 'timeout 600 apt-get update -qq && mkdir -p /tmp/glibc && cd /tmp/glibc &&
      timeout 1200 apt-get download -qq $(for p in $glibc_packages; do printf '%s/bookworm ' "$p"; done) &&
      mkdir -p $glibc && for d in *.deb; do dpkg-deb -x \$d $glibc; done && rm -rf /tmp/glibc'" \
    >>"$cache/root-packages.log" 2>&1 || fail "unpacking Debian 12's glibc failed; see $cache/root-packages.log"
  rm "$r/etc/apt/sources.list.d/bookworm.list"
  # Where qemu-user's loader looks (QEMU_LD_PREFIX=$root$glibc): /lib.
  ln -s usr/aarch64-linux-gnu/lib "$r$glibc/lib"
  for p in aarch64-linux-gnu:aarch64-linux-gnu-gcc x86_64-linux-gnu:gcc; do
    printf '#!/bin/sh\nexec %s --sysroot=%s -B%s/ -L%s "$@"\n' "${p#*:}" "$glibc" \
      "$glibc/usr/${p%%:*}/lib" "$glibc/usr/${p%%:*}/lib" >"$r/usr/local/bin/${p%%-*}-glibc-floor-cc"
    chmod 755 "$r/usr/local/bin/${p%%-*}-glibc-floor-cc"
  done
}

# Makes the root unless the cached one was made from the same recipe.
ensure_root() {
  mkdir -p "$cache"
  if [ "$(cat "$root/.bfperf-recipe" 2>/dev/null)" != "$recipe" ]; then
    make_root
  else
    say "reusing the build root in $root"
  fi
}

# in_root_at DIR AT COMMAND: a shell command in the root with /proc and the host's
# DIR mounted at AT (made in the root if need be), in a mount namespace of its own.
in_root_at() {
  mkdir -p "$root$2"
  unshare -m --propagation private sh -c "mount -t proc proc '$root/proc'; mount --bind '$1' '$root$2' && chroot '$root' sh -c '$3'"
}

# in_root TARGET_DIR COMMAND...: runs a shell command in the root, with the clone and
# TARGET_DIR at the same paths as outside, so the paths compiled into the tests
# (the package root, the bfperf binary) hold on the host too.
in_root() {
  local target_dir=$1
  shift
  mkdir -p "$root$src" "$root$target_dir" "$target_dir"
  unshare -m --propagation private sh -c '
    root=$1 src=$2 target_dir=$3; shift 3
    mount -t proc proc "$root/proc"
    mount --rbind /dev "$root/dev"
    mount --bind "$src" "$root$src"
    mount --bind "$target_dir" "$root$target_dir"
    exec chroot "$root" env -i PATH=/usr/bin:/bin HOME=/root \
      CARGO_HOME=/var/cache/bfperf-cargo CARGO_TARGET_DIR="$target_dir" \
      CARGO_HTTP_CAINFO=/etc/ssl/certs/host-ca-certificates.crt \
      CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=/usr/local/bin/aarch64-glibc-floor-cc \
      CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=/usr/local/bin/x86_64-glibc-floor-cc \
      CARGO_TERM_COLOR=never \
      sh -c "cd \"$src\" && $*"' sh "$root" "$src" "$target_dir" "$@"
}
