#!/usr/bin/env python3
"""Sorts the lines of a conformance diff (probe.sh on the simulator `<`, on the real
driver `>`) into documented gaps and open differences.

    gaps.py KERNEL GEN GAPS_FILE DIFF_FILE

GAPS_FILE holds entries of one line each, `KERNELS GENS REGEX`, after the comment
lines that explain them: KERNELS and GENS are comma lists (or `*`), REGEX a Python
regular expression searched in the diff line. Prints `gap LINE` or `open LINE` per
diff line.
"""
import re
import sys


def entries(path):
    for line in open(path):
        line = line.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        kernels, gens, regex = line.split(None, 2)
        yield kernels.split(","), gens.split(","), re.compile(regex)


def main():
    kernel, gen, gaps, diff = sys.argv[1:5]
    rules = [
        r for (ks, gs, r) in entries(gaps)
        if ("*" in ks or kernel in ks) and ("*" in gs or gen in gs)
    ]
    for line in open(diff):
        line = line.rstrip("\n")
        documented = any(r.search(line) for r in rules)
        print(("gap " if documented else "open ") + line)


main()
