"""The bounds every number of a run lives within (their derivation: hermes/scenario.py, "Bounds").

A module of constants only, below every other part of hermes, so that any layer may check against them
without importing the scenario.
"""

from __future__ import annotations

__all__ = ["BIG", "TINY", "MAX_PROCESSORS", "MAX_PHASES", "MAX_ITERATIONS", "MAX_SEED"]

#: largest load, time or byte count a run may produce; smallest cell weight
BIG = 1e100
TINY = 1e-100
MAX_PROCESSORS = 100_000
#: phases and solver iterations per phase: far beyond the seeds' experiments (≤ 30 phases, 20 iterations),
#: finite so that per-phase records and loops stay bounded
MAX_PHASES = 100_000
MAX_ITERATIONS = 1_000_000
#: METIS' seed option is a C int (pymetis truncates larger seeds silently)
MAX_SEED = 2**31 - 1

#: the most tasks per phase hermes writes into a trace of a run (``output.lbdatafile``): 10⁶ cells with four
#: neighbours each are 8·10⁶ communications, gigabytes of JSON; beyond, blocks of cells (``cells_per_block``)
MAX_TRACE_TASKS = 200_000
#: what hermes reads of a vt LBDatafile trace (docs/TRACES.md, "Limits"): phases (10⁶ empty ones are 28 MB, read
#: in seconds), rank files (as many as processors), distinct ``user_defined`` number keys (each is an array over
#: a phase's tasks when a phase is replayed; vt writes six, hermes three)
MAX_TRACE_PHASES = 1_000_000
MAX_TRACE_RANKS = MAX_PROCESSORS
MAX_TRACE_KEYS = 100
