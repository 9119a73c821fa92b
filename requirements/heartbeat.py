"""Run a command, pass its output through, and say a line after every 5 s it is silent.

    python3 requirements/heartbeat.py COMMAND [ARGS...]

The Makefile's set-up wraps pip in it: pip says each package it collects, but then installs them all (numpy,
scipy, gmsh, numba, ...) for 20-30 s without a word when its output is not a terminal. Standard library only
(it runs before any venv holds hermes); the command's exit status is this script's.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

EVERY = 5.0


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: heartbeat.py COMMAND [ARGS...]", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    last = [t0]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    done = threading.Event()

    def beat() -> None:
        while not done.wait(0.25):
            if time.monotonic() - last[0] >= EVERY:
                print(f"  ... still working: {argv[0].rsplit('/', 1)[-1]} {' '.join(argv[1:3])} "
                      f"({time.monotonic() - t0:.0f} s)", flush=True)
                last[0] = time.monotonic()

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    assert proc.stdout is not None
    for line in iter(proc.stdout.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        last[0] = time.monotonic()
    code = proc.wait()
    done.set()
    thread.join()
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
