#!/usr/bin/env python3
"""The exporter under attack, measured: on the bf2 fixture in tmpfs, on loopback.

For each attack: connections the exporter keeps open (its socket descriptors), its
resident memory, and the latency of a normal scrape made while the attack is held
(median and worst of 20). Then the same after the attack is released.

Run from the repository: python3 benches/hostile.py   (builds target/release/bfperf)
"""
import os
import resource
import socket
import statistics
import sys
import time

from exporter_harness import exporter, rss_kib
PORT = 19851


def sockets(pid):
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n - 1  # the listener


def scrape():
    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", PORT), timeout=30) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    ms = (time.perf_counter() - t0) * 1e3
    if b" 200 " not in data.split(b"\r\n", 1)[0]:
        return float("inf")
    return ms


def scrapes(n=20):
    times = [scrape() for _ in range(n)]
    return statistics.median(times), max(times)


def report(name, pid):
    p50, worst = scrapes()
    print(f"| {name} | {sockets(pid)} | {rss_kib(pid) / 1024:.1f} MiB | "
          f"{p50:.2f} / {worst:.2f} ms |", flush=True)


def half_open(n):
    held = []
    for _ in range(n):
        try:
            s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
            held.append(s)
        except OSError:
            break
    return held


def slowloris(n, rounds):
    held = half_open(n)
    for _ in range(rounds):
        for s in held:
            try:
                s.sendall(b"X-a: b\r\n")
            except OSError:
                pass
        time.sleep(0.1)
    return held


def pipelined(n):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.setblocking(False)
    req = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * n
    try:
        s.send(req)
    except BlockingIOError:
        pass
    return [s]


def big_header():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    try:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX-big: " + b"a" * (1 << 20) + b"\r\n\r\n")
    except OSError:
        pass
    return [s]


def content_length():
    s = socket.create_connection(("127.0.0.1", PORT), timeout=5)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n")
    return [s]


def release(held):
    for s in held:
        s.close()
    time.sleep(0.3)


def main():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 20000), hard))
    events = ["tile/MEMORY_READS,MEMORY_WRITES/", "l3cachehalf*/HITS_BANK0,MISSES_BANK0/"]
    with exporter(PORT, events) as proc:
        return measure(proc)


def measure(proc):
    pid = proc.pid
    print("| while held | connections kept | RSS | scrape p50 / worst of 20 |")
    print("|---|---|---|---|")
    report("nothing (baseline)", pid)
    attacks = [
        ("5,000 half-open connections", lambda: half_open(5000)),
        ("1,000 slowloris connections (a header line each per 100 ms, 2 s)", lambda: slowloris(1000, 20)),
        ("2,000 pipelined requests on one connection, unread", lambda: pipelined(2000)),
        ("a 1 MiB header", big_header),
        ("a 1e11 Content-Length", content_length),
    ]
    for name, attack in attacks:
        held = attack()
        report(name, pid)
        release(held)
        report("  after releasing it", pid)
    if proc.poll() is not None:
        print(f"exporter exited with {proc.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
