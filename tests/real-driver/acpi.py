#!/usr/bin/env python3
"""The ACPI table (ASL, for iasl) describing a BlueField PMC device to the mlxbf-pmc
driver, with the blocks of bfperf's simulator so that the driver and the model serve
the same device.

    acpi.py GEN TREE BASE ACCESS > pmc.asl

GEN is bf2 or bf3; TREE the device directory of `bfperf sim export` (its blocks and
their counterN files give the block list and each block's counter count); BASE the
physical address of the first block (each block gets 64 KiB after it). Prints the
ASL on stdout and, on stderr, one line per block: NAME BASE SIZE COUNTERS TYPE.

The properties are those the driver's probe reads (mlxbf_pmc_probe and
mlxbf_pmc_map_counters): block_num, block_name, one {base, size, counters, type}
array per block, then tile_num (BlueField-1/2) or llt_enable and mss_enable
(BlueField-3). ACCESS `mmio` leaves sec_reg_block out (the driver maps the registers
with ioremap); `smc` gives it, and the driver then reaches every register through
the SiP service's SMCs, with physical addresses.
"""
import os
import re
import sys

HID = {"bf1": "MLNXBFD0", "bf2": "MLNXBFD1", "bf3": "MLNXBFD2"}
BLOCK_SIZE = 0x10000
# The driver's block types: 0 register, 1 counter, 2 crspace.
REGISTER, COUNTER, CRSPACE = 0, 1, 2


def block_type(gen, name):
    kind = re.sub(r"\d+$", "", name)
    if kind in ("ecc", "pcie", "clock_measure"):
        return REGISTER
    if gen == "bf3" and kind in ("llt", "llt_miss", "mss"):
        return CRSPACE
    return COUNTER


def blocks(tree):
    names = sorted(
        e for e in os.listdir(tree)
        if os.path.isdir(os.path.join(tree, e))
        and e not in ("device", "power", "subsystem")
    )
    for name in names:
        files = os.listdir(os.path.join(tree, name))
        yield name, sum(1 for f in files if re.fullmatch(r"counter\d+", f))


def main():
    gen, tree, base, access = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), sys.argv[4]
    if access not in ("mmio", "smc"):
        sys.exit(f"acpi.py: ACCESS is mmio or smc, not {access!r}")
    listed = list(blocks(tree))
    props = [
        f'Package () {{ "block_num", {len(listed)} }}',
        'Package () { "block_name", Package () { %s } }'
        % ", ".join(f'"{n}"' for n, _ in listed),
    ]
    for i, (name, counters) in enumerate(listed):
        addr = base + i * BLOCK_SIZE
        kind = block_type(gen, name)
        props.append(
            f'Package () {{ "{name}", Package () {{ 0x{addr:x}, 0x{BLOCK_SIZE:x}, {counters}, {kind} }} }}'
        )
        print(f"{name} 0x{addr:x} 0x{BLOCK_SIZE:x} {counters} {kind}", file=sys.stderr)
    if access == "smc":
        # The table of secure registers the firmware checks accesses against.
        props.append('Package () { "sec_reg_block", 1 }')
    if gen == "bf3":
        props.append('Package () { "llt_enable", 0xff }')
        props.append('Package () { "mss_enable", 0xff }')
    else:
        tiles = sum(1 for n, _ in listed if re.fullmatch(r"tile\d+", n))
        props.append(f'Package () {{ "tile_num", {tiles} }}')
    body = ",\n          ".join(props)
    print(f"""DefinitionBlock ("", "SSDT", 2, "BFPERF", "PMCTEST", 1)
{{
  Scope (\\_SB)
  {{
    Device (PMC0)
    {{
      Name (_HID, "{HID[gen]}")
      Name (_UID, 0)
      Name (_DSD, Package ()
      {{
        ToUUID ("daffd814-6eba-4d8c-8a91-bc9bbf4aa301"),
        Package ()
        {{
          {body}
        }}
      }})
    }}
  }}
}}""")


main()
