#!/usr/bin/env python3
"""Sorts the lines of a conformance diff (probe.sh on the simulator `<`, on the real
driver `>`) into documented gaps and open differences.

    gaps.py KERNEL GEN GAPS_FILE DIFF_FILE

GAPS_FILE holds entries of one line each, `KERNELS GENS SIDE TEXT`, after the
comment lines that explain them: KERNELS and GENS are comma lists (or `*`), SIDE is
`<` (the line the simulator prints) or `>` (the driver's), and TEXT the exact line
that side prints. An entry excuses every diff line of its side that is exactly its
text. Prints `gap LINE` or `open LINE` per diff line, then `dead ENTRY` for each
entry that applies to this kernel and generation and excused nothing: a rule that
no longer matches fails, so that the file never grows stale.
"""
import sys


def entries(path):
    for n, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        kernels, gens, side, text = line.split(" ", 3)
        if side not in ("<", ">"):
            sys.exit(f"{path}:{n}: the side is < (simulator) or > (driver), not {side!r}")
        yield n, kernels.split(","), gens.split(","), side + " " + text


def main():
    kernel, gen, gaps, diff = sys.argv[1:5]
    rules = [
        (n, text) for (n, ks, gs, text) in entries(gaps)
        if ("*" in ks or kernel in ks) and ("*" in gs or gen in gs)
    ]
    used = set()
    for line in open(diff):
        line = line.rstrip("\n")
        hit = [n for (n, text) in rules if text == line]
        used.update(hit)
        print(("gap " if hit else "open ") + line)
    for n, text in rules:
        if n not in used:
            print(f"dead {gaps}:{n}: {text}")


main()
