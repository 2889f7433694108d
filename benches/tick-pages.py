#!/usr/bin/env python3
"""The memory a `bfperf stat -I 100` tick touches, beside the C sampler of
benches/floor.sh doing the same reads: distinct 4 KiB pages and 64-byte lines of
code and of data, by mapping, in one tick well after the start. These counts do
not move with the machine's load.

A tick that sleeps 100 ms may come back to caches and TLBs that other work has
emptied, and each page it then touches costs a walk of the page tables. Whether
that is what a tick's processor time is made of is measured in
docs/performance.md: packing a tick's code from 42 pages into 22 did not move it.

Valgrind's lackey traces every instruction and data access; a tick is what runs
between two calls of the libc function the program sleeps in (`ppoll` for
bfperf, `clock_nanosleep` for the sampler).

Run from the repository: python3 benches/tick-pages.py [BFPERF]
(needs valgrind and cc; BFPERF defaults to target/release/bfperf)
"""

import collections
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stat_row(work, binary):
    """floor.sh's `stat` row, as benches/lib.sh defines it (which also programs
    tile0 of $work/bf2 as the row finds it): bfperf's -e, the sampler's 28 files,
    and the lock and state directory in $work."""
    show = 'stat_row && printf "%s\\n" "$BFPERF_LOCK_FILE" "$BFPERF_STATE_DIR" "${stat_specs[@]}" "" "${samples[@]}"'
    out = subprocess.run(
        ["bash", "-c", f". benches/lib.sh && {show}"],
        cwd=ROOT,
        env=dict(os.environ, work=work, bin=binary),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    blank = out.index("")
    return out[0], out[1], out[2:blank], out[blank + 1 :]


def read_maps(pid):
    maps = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            p = line.split()
            lo, hi = (int(x, 16) for x in p[0].split("-"))
            path = p[5] if len(p) > 5 else "[anon]"
            maps.append((lo, hi, p[1], path, int(p[2], 16)))
    return maps


def symbol(path, name):
    out = subprocess.run(["readelf", "-Ws", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        p = line.split()
        if len(p) >= 8 and p[3] == "FUNC" and p[7].split("@")[0] == name:
            return int(p[1], 16)
    sys.exit(f"tick-pages: no {name} in {path}")


def trace(argv, sleep_in, tick, env):
    """Pages and lines of tick number `tick`, by mapping, and its instructions."""
    r, w = os.pipe()
    cmd = ["valgrind", "--tool=lackey", "--trace-mem=yes", f"--log-fd={w}"] + argv
    proc = subprocess.Popen(cmd, pass_fds=(w,), env=env, stdout=subprocess.DEVNULL)
    os.close(w)
    maps = []

    def libc_mapped():
        return any(os.path.basename(m[3]).startswith("libc.so") for m in maps)

    def grab():
        # libc is mapped by the loader, long before the first sleep; the maps are
        # read again a second later, when the program's own mappings are all there.
        # Only the tool's: `valgrind` itself, which execs it, has a libc of its own.
        try:
            for _ in range(1000):
                with open(f"/proc/{proc.pid}/comm") as comm:
                    tool = comm.read().startswith("lackey")
                if tool:
                    maps[:] = read_maps(proc.pid)
                    if libc_mapped():
                        break
                time.sleep(0.01)
            time.sleep(1.0)
            maps[:] = read_maps(proc.pid)
        except OSError:
            pass

    grabber = threading.Thread(target=grab)
    grabber.start()
    windows, pages, lines, ins = 0, set(), set(), 0
    split = None
    with os.fdopen(r, errors="replace") as f:
        for line in f:
            kind = line[:2].strip()
            if kind not in ("I", "L", "S", "M"):
                continue
            addr = int(line[2:].split(",", 1)[0], 16)
            if kind == "I":
                if split is None and libc_mapped():
                    libc = next(m for m in maps if os.path.basename(m[3]).startswith("libc.so") and m[4] == 0)
                    split = libc[0] + symbol(libc[3], sleep_in)
                if addr == split:
                    windows += 1
                if windows == tick:
                    ins += 1
            if windows == tick:
                pages.add(("code" if kind == "I" else "data", addr >> 12))
                lines.add((kind == "I", addr >> 6))
    proc.wait()
    grabber.join()
    if windows <= tick:
        sys.exit(f"tick-pages: {argv[0]} slept {windows} times, fewer than {tick + 1}")

    def where(page):
        a = page << 12
        for lo, hi, perm, path, _ in maps:
            name = os.path.basename(path)
            if lo <= a < hi:
                # Valgrind gives the program's heap (its brk) as an anonymous
                # mapping that may be executed.
                return "heap" if (name, perm) == ("[anon]", "rwxp") else f"{name} {perm}"
        return "[valgrind's heap and stack]"

    by = collections.Counter(f"{k} {where(p)}" for k, p in pages)
    return len(pages), len(lines), ins, by


def main():
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/bfperf"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"tick-pages: no {binary}; build it (cargo build --release) or name one")
    for tool in ("valgrind", "cc", "readelf"):
        if not shutil.which(tool):
            sys.exit(f"tick-pages: needs {tool}")
    work = tempfile.mkdtemp(prefix="bfperf-tick-pages.", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        fixture = os.path.join(work, "bf2")
        shutil.copytree(os.path.join(ROOT, "fixtures/bf2"), fixture, symlinks=True)
        floor = os.path.join(work, "floor")
        subprocess.run(["cc", "-O2", "-o", floor, os.path.join(ROOT, "benches/floor.c")], check=True)
        lock, state, specs, files = stat_row(work, binary)
        env = dict(os.environ, BFPERF_LOCK_FILE=lock, BFPERF_STATE_DIR=state)
        root = ["--sysfs-root", fixture]
        runs = [
            ("bfperf", [binary, *root, "stat", *specs, "-I", "100", "--duration", "2s", "-o", "/dev/null"], "ppoll"),
            ("C", [floor, "sample", "100", "2", *files], "clock_nanosleep"),
        ]
        for name, argv, sleep_in in runs:
            pages, lines, ins, by = trace(argv, sleep_in, 10, env)
            print(f"{name}: a tick touches {pages} pages and {lines} lines, in {ins} instructions")
            for what, n in sorted(by.items(), key=lambda x: -x[1]):
                print(f"  {n:4d} {what}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
