#!/usr/bin/env python3
"""The exporter's basic auth under password guessing, measured: on the bf2 fixture in
tmpfs, on loopback, one user with a bcrypt hash of cost 10 (htpasswd -nBC 10).

1. How long a refusal takes for a user that exists (wrong password) and for one that
   does not (median of 30 each, taken in turns, new credentials every time).
2. 80 keep-alive connections guessing passwords (a new one each time, so each costs
   a bcrypt check), reconnecting whenever closed, for 20 s; meanwhile a scraper with
   the right password, from another address (127.0.0.2), on its own keep-alive
   connection scrapes every 200 ms (its first scrape needs a check too; retrying once
   on a new connection when its connection was closed, as Prometheus' client does):
   its scrapes within 1 s, latency p50 / worst, the guesses answered, RSS.

Run from the repository: python3 benches/auth.py   (builds target/release/bfperf)
Needs libcrypt (libxcrypt) with bcrypt, as Debian and Ubuntu ship it.
"""
import base64
import ctypes
import os
import socket
import statistics
import sys
import threading
import time

from exporter_harness import exporter, rss_kib
PORT = 19852
ATTACKERS = 80
SCRAPER = "127.0.0.2"  # another loopback address: another client
SECONDS = 20


def bcrypt_hash(password, cost=10):
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt_gensalt.restype = ctypes.c_char_p
    salt = lib.crypt_gensalt(b"$2b$", cost, None, 0)
    return lib.crypt(password.encode(), salt).decode()


def connect(source="127.0.0.1"):
    s = socket.create_connection(("127.0.0.1", PORT), timeout=20, source_address=(source, 0))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def get(s, user_pass):
    """One keep-alive GET; the status, or None when the connection was closed."""
    auth = base64.b64encode(user_pass.encode()).decode()
    try:
        s.sendall(f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                return None
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        while len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                return None
            body += chunk
        return int(head.split(b" ")[1])
    except OSError:
        return None


def refusal_ms(user_pass):
    with connect() as s:
        t0 = time.perf_counter()
        status = get(s, user_pass)
        ms = (time.perf_counter() - t0) * 1e3
    assert status == 401, status
    return ms


def attacker(n, stop, counts):
    i = 0
    while not stop.is_set():
        try:
            s = connect()
        except OSError:
            continue
        with s:
            while not stop.is_set():
                i += 1
                status = get(s, f"alice:guess-{n}-{i}")
                if status is None:
                    break
                counts[n][status] = counts[n].get(status, 0) + 1


def main():
    web = f"basic_auth_users:\n  alice: {bcrypt_hash('s3cret')}\n"
    with exporter(PORT, ["tile/MEMORY_READS,MEMORY_WRITES/"], {"web.yml": web},
                  ["--web.config.file", "{work}/web.yml"]) as proc:
        return measure(proc)


def measure(proc):
    known, unknown = [], []
    for i in range(30):
        known.append(refusal_ms(f"alice:wrong{i}"))
        unknown.append(refusal_ms(f"mallory{i}:wrong{i}"))
    print("| refused | median of 30 |")
    print("|---|---|")
    print(f"| a user that exists, wrong password | {statistics.median(known):.1f} ms |")
    print(f"| a user that does not exist | {statistics.median(unknown):.1f} ms |")
    print()

    stop = threading.Event()
    counts = [dict() for _ in range(ATTACKERS)]
    threads = [threading.Thread(target=attacker, args=(n, stop, counts), daemon=True)
               for n in range(ATTACKERS)]
    for t in threads:
        t.start()
    time.sleep(1)
    # The scraper comes from another address, as Prometheus would; its first
    # request (the password never checked before) is counted too.
    times, on_time, total = [], 0, 0
    scraper = connect(SCRAPER)
    end = time.monotonic() + SECONDS
    while time.monotonic() < end:
        t0 = time.perf_counter()
        status = get(scraper, "alice:s3cret")
        if status is None:
            scraper.close()
            scraper = connect(SCRAPER)
            status = get(scraper, "alice:s3cret")
        ms = (time.perf_counter() - t0) * 1e3
        total += 1
        times.append(ms)
        if status == 200 and ms <= 1000:
            on_time += 1
        time.sleep(0.2)
    rss = rss_kib(proc.pid)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    print(f"| {ATTACKERS} keep-alive connections guessing, {SECONDS} s | |")
    print("|---|---|")
    print(f"| scrapes with the right password within 1 s | {on_time} of {total} |")
    print(f"| their latency p50 / worst | {statistics.median(times):.2f} / {max(times):.1f} ms |")
    checked = sum(c.get(401, 0) for c in counts)
    busy = sum(c.get(429, 0) for c in counts)
    print(f"| wrong guesses checked (401) | {checked} ({checked / SECONDS:.0f}/s) |")
    print(f"| guesses answered 429 without a check (address has 2 pending) | {busy} |")
    print(f"| exporter RSS | {rss / 1024:.1f} MiB |")
    if proc.poll() is not None:
        print(f"exporter exited with {proc.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
