"""Helper for test_real.py: a parent that starts wall-clock external tasks, prints their pids, then waits.

Usage: python real_parent.py LOG_DIR [exit|raise]  — with no mode it sleeps until it is killed.
"""

from __future__ import annotations

import json
import sys
import time

from hermes.extraload.real import RealLoad
from hermes.extraload.tasks import parse_tasks

TASKS = parse_tasks([
    {"name": "burn", "processor": 0, "repeat": "forever", "script": [{"work": 2.0e4, "wait": 0.05}]},
    {"name": "stream", "processor": 0, "repeat": "forever", "script": [{"data": [[1, 1.0e5]], "wait": 0.05}]},
])

mode = sys.argv[2] if len(sys.argv) > 2 else "sleep"
load = RealLoad(TASKS, [0, 1], log_dir=sys.argv[1])
print(json.dumps(load.pids()), flush=True)
time.sleep(0.2)
if mode == "exit":
    sys.exit(0)  # atexit must end the children
if mode == "raise":
    raise RuntimeError("crash")  # an uncaught exception: atexit as well
time.sleep(600)
