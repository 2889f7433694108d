# Sourced by .ci/real-driver: qemu-system-aarch64 built from Debian 13's QEMU source
# with the BlueField PMC model (tests/real-driver/qemu: the device, and the one hook
# by which QEMU's SMC handling reaches its SiP service), cached in $cache/qemu-model
# (at /qm in the build root, where its build tree's paths point).
# The source is fetched once from the machine's own Debian archive; a change to the
# hook or the configuration extracts and configures it anew, a change to the model
# only recompiles the model. Sets $qemu_model to the binary.
#
# Needs, from the sourcing scripts: say, fail, in_root_at, $root, $cache, $mirror, and
# $qemu_build_packages installed in the root.
qemu_configure="--target-list=aarch64-softmmu --without-default-features --without-default-devices
  --with-devices-aarch64=minimal --disable-docs --disable-werror --disable-download
  --disable-install-blobs --enable-fdt=system --enable-tcg"
qemu_build_packages="dpkg-dev build-essential meson ninja-build python3-venv pkg-config
  libglib2.0-dev libpixman-1-dev libfdt-dev zlib1g-dev flex bison"

# in_root_qm COMMAND: a shell command in the build root, with $cache/qemu-model at /qm.
in_root_qm() { in_root_at "$cache/qemu-model" /qm "$1"; }

ensure_qemu_model() {
  local qm=$cache/qemu-model model=tests/real-driver/qemu
  local src_key key
  src_key=$( (cat "$model/psci-sip.patch"; echo "$qemu_configure") | sha256sum | cut -c1-16)
  key=$( (echo "$src_key"; cat "$model/bfpmc.c" "$model/bfpmc.h") | sha256sum | cut -c1-16)
  qemu_model=$qm/bin/qemu-system-aarch64
  if [ -x "$qemu_model" ] && [ "$(cat "$qm/bin/key" 2>/dev/null)" = "$key" ]; then
    say "reusing the QEMU with the PMC model in $qm"
    return
  fi
  mkdir -p "$qm/dl" "$qm/bin"
  if ! ls "$qm"/dl/qemu_*.dsc >/dev/null 2>&1; then
    say "fetching Debian 13's QEMU source"
    # Against a source list and lists of its own: the root's apt configuration is
    # never written.
    mkdir -p "$qm/apt/lists/partial" "$qm/apt/cache/archives/partial" "$qm/apt/parts"
    echo "deb-src $mirror trixie main" >"$qm/apt/sources.list"
    local opts="-o Dir::Etc::SourceList=/qm/apt/sources.list -o Dir::Etc::SourceParts=/qm/apt/parts
      -o Dir::State::Lists=/qm/apt/lists -o Dir::Cache=/qm/apt/cache"
    in_root_qm "timeout 600 apt-get $(echo $opts) update -qq && cd /qm/dl &&
        timeout 1800 apt-get $(echo $opts) source -qq --download-only qemu/trixie" >"$qm/fetch.log" 2>&1 \
      || { rm -rf "$qm/dl"; fail "fetching QEMU's source failed; see $qm/fetch.log"; }
  fi
  if [ "$(cat "$qm/src/.bfperf-src-key" 2>/dev/null)" != "$src_key" ]; then
    say "extracting, patching and configuring QEMU (the model's hook changed, or first run)"
    rm -rf "$qm/src"
    in_root_qm "cd /qm && timeout 600 dpkg-source -x dl/qemu_*.dsc src" >"$qm/extract.log" 2>&1 \
      || fail "extracting QEMU's source failed; see $qm/extract.log"
    patch -d "$qm/src" -p1 --quiet <"$model/psci-sip.patch" || fail "the PMC model's hook does not apply to this QEMU"
    echo "system_ss.add(files('bfpmc.c'))" >>"$qm/src/hw/misc/meson.build"
    cp "$model/bfpmc.c" "$qm/src/hw/misc/" && cp "$model/bfpmc.h" "$qm/src/include/hw/misc/"
    in_root_qm "mkdir -p /qm/src/build && cd /qm/src/build &&
        timeout 900 ../configure $(echo $qemu_configure)" >"$qm/configure.log" 2>&1 \
      || fail "configuring QEMU failed; see $qm/configure.log"
    echo "$src_key" >"$qm/src/.bfperf-src-key"
  fi
  cp "$model/bfpmc.c" "$qm/src/hw/misc/" && cp "$model/bfpmc.h" "$qm/src/include/hw/misc/"
  say "building qemu-system-aarch64 with the PMC model"
  in_root_qm "cd /qm/src/build && timeout 3000 nice ninja -j$(nproc) qemu-system-aarch64" \
    >"$qm/build.log" 2>&1 || fail "building QEMU failed; see $qm/build.log"
  cp "$qm/src/build/qemu-system-aarch64" "$qemu_model"
  echo "$key" >"$qm/bin/key"
}
