"""What the exporter benchmarks share: a release bfperf exporter on a copy of the bf2
fixture in tmpfs, serving on loopback, and its resident memory."""
import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("BFPERF", os.path.join(ROOT, "target/release/bfperf"))


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def exporter(port, events, files=None, args=()):
    """Runs `bfperf exporter` with a config of `events` (and `files`, name -> text,
    beside it; `args` may name them relative to the work directory as {work}/NAME)
    until the block ends; yields the process, serving on 127.0.0.1:port."""
    if not os.access(BIN, os.X_OK):
        subprocess.run(["cargo", "build", "--release", "-q"], cwd=ROOT, check=True)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    work = tempfile.mkdtemp(prefix="bfperf-bench.", dir=base)
    proc = None
    try:
        root = os.path.join(work, "root")
        shutil.copytree(os.path.join(ROOT, "fixtures/bf2"), root, symlinks=True)
        state = os.path.join(work, "state")
        os.mkdir(state, 0o700)
        with open(os.path.join(work, "exporter.toml"), "w") as f:
            f.write("events = [" + ", ".join(f'"{e}"' for e in events) + "]\n")
        for name, text in (files or {}).items():
            with open(os.path.join(work, name), "w") as f:
                f.write(text)
        proc = subprocess.Popen(
            [BIN, "--sysfs-root", root, "exporter", "--config", os.path.join(work, "exporter.toml"),
             "--listen", f"127.0.0.1:{port}"] + [a.format(work=work) for a in args],
            env=dict(os.environ, BFPERF_STATE_DIR=state), stderr=subprocess.DEVNULL)
        for _ in range(100):
            if proc.poll() is not None:
                raise RuntimeError("the exporter did not start")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield proc
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)
