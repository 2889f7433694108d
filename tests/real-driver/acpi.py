#!/usr/bin/env python3
"""The ACPI table (ASL, for iasl) describing a BlueField PMC device to the mlxbf-pmc
driver, built from NVIDIA's listings in tests/inventory (never from bfperf).

    acpi.py GEN KERNEL BASE ACCESS [as-listed] > pmc.asl

GEN is bf2 or bf3; KERNEL the kernel's version (6.12): a kind written `from` a later
version in tests/inventory/acpi.txt is left out of its table, unless `as-listed` asks
for the table as NVIDIA lists the device. BASE is the physical address of the first
block (each block gets 64 KiB after it). Prints the ASL on stdout and, on stderr, one
line per block: NAME BASE SIZE COUNTERS TYPE.

The properties are those the driver's probe reads (mlxbf_pmc_probe and
mlxbf_pmc_map_counters): block_num, block_name, one {base, size, counters, type}
array per block, then tile_num (BlueField-1/2) or llt_enable, mss_enable and
apt_enable (BlueField-3). ACCESS `mmio` leaves sec_reg_block out (the driver maps
the registers with ioremap); `smc` gives it, and the driver then reaches every
register through the SiP service's SMCs, with physical addresses.
"""
import os
import re
import sys

HID = {"bf1": "MLNXBFD0", "bf2": "MLNXBFD1", "bf3": "MLNXBFD2"}
BLOCK_SIZE = 0x10000
# The driver's block types.
TYPES = {"register": 0, "counter": 1, "crspace": 2}
INVENTORY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "inventory")


def facts(path):
    """The lines of an inventory file, comments and blanks left out, as word lists."""
    for line in open(path):
        line = line.split("#", 1)[0].strip()
        if line:
            yield line.split()


def version(v):
    return tuple(int(x) for x in re.findall(r"\d+", v)[:2])


def choices(gen):
    """acpi.txt's facts for GEN: {(kind, what): value}."""
    got = {}
    for words in facts(os.path.join(INVENTORY, "acpi.txt")):
        if len(words) != 4 or words[2] not in ("counters", "blocks", "type", "from"):
            sys.exit(f"acpi.py: acpi.txt: cannot read {' '.join(words)!r}")
        if words[0] == gen:
            got[(words[1], words[2])] = words[3]
    return got


def kind_of(name):
    return re.sub(r"\d+$", "", name)


def bf2_blocks(chosen):
    """bf2.txt's blocks: NAME, COUNTERS or None."""
    for words in facts(os.path.join(INVENTORY, "bf2.txt")):
        after = {words[i]: words[i + 1] for i in range(1, len(words) - 1, 2)}
        counters = after.get("counters") or chosen.get((kind_of(words[0]), "counters"))
        yield words[0], counters


def bf3_blocks(chosen):
    """bf3.txt's kinds, their numbers from its rules and acpi.txt's choices."""
    numbers = {}
    for words in facts(os.path.join(INVENTORY, "bf3.txt")):
        kind, rule = words[1], words[2:]
        if rule[:1] == ["with"]:
            numbers[kind] = list(numbers[rule[1]])
        elif rule[:1] == ["per"]:
            n = int(rule[2])
            numbers[kind] = [m * n + i for m in numbers[rule[1]] for i in range(n)]
        elif (kind, "blocks") in chosen:
            count = int(chosen[(kind, "blocks")])
            if rule[:1] == ["max"] and count > int(rule[1]):
                sys.exit(f"acpi.py: {kind}: {count} blocks, bf3.txt allows {rule[1]}")
            numbers[kind] = list(range(count))
        else:
            numbers[kind] = [None]
    for kind, ns in numbers.items():
        for n in ns:
            yield (kind if n is None else f"{kind}{n}"), chosen.get((kind, "counters"), "0")


def main():
    if len(sys.argv) not in (5, 6) or sys.argv[4] not in ("mmio", "smc"):
        sys.exit("usage: acpi.py GEN KERNEL BASE mmio|smc [as-listed]")
    gen, kernel, base, access = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), sys.argv[4]
    as_listed = sys.argv[5:] == ["as-listed"]
    chosen = choices(gen)
    listed = sorted(bf2_blocks(chosen) if gen == "bf2" else bf3_blocks(chosen))
    if not as_listed:
        listed = [
            (n, c) for (n, c) in listed
            if version(kernel) >= version(chosen.get((kind_of(n), "from"), "0.0"))
        ]
    props = [
        f'Package () {{ "block_num", {len(listed)} }}',
        'Package () { "block_name", Package () { %s } }'
        % ", ".join(f'"{n}"' for n, _ in listed),
    ]
    for i, (name, counters) in enumerate(listed):
        addr = base + i * BLOCK_SIZE
        kind = TYPES[chosen.get((kind_of(name), "type"), "counter")]
        counters = int(counters or 0)
        props.append(
            f'Package () {{ "{name}", Package () {{ 0x{addr:x}, 0x{BLOCK_SIZE:x}, {counters}, {kind} }} }}'
        )
        print(f"{name} 0x{addr:x} 0x{BLOCK_SIZE:x} {counters} {kind}", file=sys.stderr)
    if access == "smc":
        # The table of secure registers the firmware checks accesses against.
        props.append('Package () { "sec_reg_block", 1 }')
    if gen == "bf3":
        # The masks of the blocks present: bit N for llt<N>, mss<N>, apt<N>.
        for mask, kind in (("llt_enable", "llt"), ("mss_enable", "mss"), ("apt_enable", "apt")):
            bits = sum(1 << int(n[len(kind):]) for n, _ in listed if re.fullmatch(kind + r"\d+", n))
            if bits or kind != "apt":
                props.append(f'Package () {{ "{mask}", 0x{bits:x} }}')
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
