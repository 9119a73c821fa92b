"""The process of one wall-clock external task, or of a data sink (run as a script by :mod:`.real`).

Started as ``python runner.py`` with a JSON spec on one line of stdin; it imports nothing from hermes
(so it starts fast) and never outlives its parent:

- it asks the kernel for SIGKILL when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG)``) and then
  checks that the parent it was started by is still its parent (closing the race with an early death);
- a watchdog thread reads stdin, whose other end only the parent holds: end of file means the parent
  closed it or died (any OS), and the process exits at once;
- SIGTERM (sent by the controller to its process group) ends it.

Task spec: ``{"mode": "task", "name", "steps": [[kind, amount, [[dest, bytes], ...]], ...], "repeat": n|null,
"start_at": t, "stop_at": t|null (``time.monotonic()`` of the machine), "units_per_pass": 32, "scale": 1.0, "sinks": {dest: [host, port]},
"log": path|null, "parent": pid}``. Work burns ``amount · scale`` work units of real arithmetic (one pass
over a 4096-element buffer = 32 units, as :class:`hermes.runtime.clock.WallClock`); Wait sleeps; Data sends the
bytes of every pair concurrently (one TCP connection per pair) to the destination processor's sink.

Sink spec: ``{"mode": "sink", "host": "127.0.0.1", "log": path|null, "parent": pid}``; it prints its port
on stdout, then accepts connections and discards what they send (logging the bytes of each).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time

CHUNK = 1 << 16


def _die_with_parent(parent: int) -> None:
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(0)

    def watch() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


class _Log:
    def __init__(self, path: str | None):
        self.f = open(path, "a", buffering=1) if path else None
        self.lock = threading.Lock()

    def __call__(self, *words) -> None:
        if self.f is not None:
            with self.lock:
                self.f.write(" ".join(str(w) for w in words) + "\n")


def _burn(units: float, units_per_pass: float, deadline: float) -> bool:
    """Real arithmetic for ``units`` work units; False if the deadline came first."""
    import numpy as np  # imported once, before the task starts (run_task)

    x = np.linspace(0.0, 1.0, 4096)
    passes = int(np.ceil(units / units_per_pass))
    acc = 0.0
    for k in range(passes):
        acc += float(np.dot(x, x))
        if k % 64 == 0 and time.monotonic() >= deadline:
            return False
    return True


def _send(addr, nbytes: float, deadline: float, done: list, log: _Log, dest: int) -> None:
    left = int(nbytes)
    buf = b"\0" * CHUNK
    try:
        with socket.create_connection((addr[0], int(addr[1])), timeout=10) as s:
            while left > 0 and time.monotonic() < deadline:
                n = s.send(buf[: min(CHUNK, left)])
                left -= n
        done.append(int(nbytes) - left)
        log("data", dest, int(nbytes) - left)
    except OSError as err:
        log("data-error", dest, err.__class__.__name__)
        done.append(0)


def run_task(spec: dict) -> None:
    log = _Log(spec.get("log"))
    if any(kind == "work" for kind, _, _ in spec["steps"]):
        import numpy  # noqa: F401  (start-up cost paid before the start time, not inside a Work step)
    # absolute times on the system's monotonic clock (shared by all processes of the machine)
    deadline = float(spec["stop_at"]) if spec.get("stop_at") is not None else float("inf")
    delay = float(spec.get("start_at") or 0.0) - time.monotonic()
    if delay > 0:
        time.sleep(delay)
    log("start", spec["name"])
    sinks = {int(k): v for k, v in spec.get("sinks", {}).items()}
    scale = float(spec.get("scale", 1.0))
    upp = float(spec.get("units_per_pass", 32.0))
    repeat = spec.get("repeat")
    n = 0
    while (repeat is None or n < repeat) and time.monotonic() < deadline:
        for kind, amount, flows in spec["steps"]:
            if time.monotonic() >= deadline:
                break
            if kind == "work":
                if _burn(amount * scale, upp, deadline):
                    log("work", amount)
            elif kind == "wait":
                time.sleep(max(0.0, min(amount, deadline - time.monotonic())))
                log("wait", amount)
            else:
                done: list = []
                threads = [threading.Thread(target=_send, args=(sinks[int(d)], c, deadline, done, log, int(d)))
                           for d, c in flows]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
        n += 1
        log("pass", n)
    log("end", spec["name"])


def run_sink(spec: dict) -> None:
    log = _Log(spec.get("log"))
    srv = socket.create_server((spec.get("host", "127.0.0.1"), 0))
    print(srv.getsockname()[1], flush=True)

    def drain(conn: socket.socket) -> None:
        total = 0
        with conn:
            while True:
                try:
                    b = conn.recv(CHUNK)
                except OSError:
                    break
                if not b:
                    break
                total += len(b)
        log("received", total)

    while True:
        conn, _ = srv.accept()
        threading.Thread(target=drain, args=(conn,), daemon=True).start()


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    line = sys.stdin.buffer.readline()
    spec = json.loads(line)
    _die_with_parent(int(spec["parent"]))
    if spec["mode"] == "sink":
        run_sink(spec)
    else:
        run_task(spec)
    os._exit(0)


if __name__ == "__main__":
    main()
