"""The bounds every number of a run lives within (their derivation: hermes/scenario.py, "Bounds"), and the one
rule every number a user gives obeys.

A module of constants and one small rule, below every other part of hermes and importing nothing, so that any
layer — the input models (:class:`hermes.strict.Strict`, the balancers' parameters), the command line's
option types (:mod:`hermes.cli.parser`), the lab's and the replay's number lists — checks against them without
importing the scenario.

The rule for numbers (docs/PARAMETERS.md, "Numbers")
------------------------------------------------------
Every number a user gives is finite and is either 0 or of magnitude in [``TINY``, ``BIG``] = [1e-100, 1e100]:
no NaN, no infinity, no subnormal (below 2.2e-308, where a float has lost its precision) and nothing whose
square or product by another such number leaves the floats. Each key or option then has its own documented
range within it (:class:`NumberRange`), narrower where the model needs it: a tolerance of at least a few
machine epsilons, a relaxation factor far enough from where its iteration stalls, a weight whose products with
the other weights stay below ``BIG``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BIG", "TINY", "MAX_PROCESSORS", "MAX_PHASES", "MAX_ITERATIONS", "MAX_SEED", "MAX_TRACE_TASKS",
           "NumberRange", "number_problem", "shown", "RULE"]

#: largest load, time or byte count a run may produce; smallest cell weight; the largest and smallest magnitude
#: of a nonzero number a user gives (their squares, 1e±200, and sums of 1e5 of them stay normal floats)
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


#: the rule in words (what an error adds after a number it refuses)
RULE = f"0 or of magnitude {TINY:g} to {BIG:g}"


def shown(x: float) -> str:
    """A number as a user would write it: ``2``, ``1e+100``, ``1e+12``, ``1.999999``, ``5e-324`` (exactly: ``:g``
    would show 4.94066e-324)."""
    x = float(x)
    if math.isfinite(x) and x.is_integer():
        if abs(x) < 1e7:
            return str(int(x))
        g = f"{x:g}"
        if float(g) == x:
            return g
        if abs(x) < 1e16:
            return str(int(x))
    return repr(x)


def number_problem(x: float) -> str | None:
    """Why ``x`` breaks the rule for numbers (module docstring), or None: not finite, or nonzero of magnitude
    below ``TINY`` (a subnormal too) or above ``BIG``."""
    if not math.isfinite(x):
        return f"must be a finite number, got {shown(x)}"
    if x != 0 and not TINY <= abs(x) <= BIG:
        return f"must be {RULE} (hermes' range of numbers, docs/PARAMETERS.md), got {shown(x)}"
    return None


@dataclass(frozen=True)
class NumberRange:
    """The documented range of a number a user gives: ``lo`` to ``hi`` (an end excluded when ``lo_open`` /
    ``hi_open``), within the rule for numbers (:func:`number_problem`).

    >>> str(NumberRange(0, 2, lo_open=True, hi_open=True))
    '(0, 2)'
    >>> NumberRange(0, BIG).problem(5e-324)
    "must be 0 or of magnitude 1e-100 to 1e+100 (hermes' range of numbers, docs/PARAMETERS.md), got 5e-324"
    >>> NumberRange(1, BIG).problem(0.5)
    'must be a number in [1, 1e+100], got 0.5'
    """

    lo: float = -BIG
    hi: float = BIG
    lo_open: bool = False
    hi_open: bool = False

    def __str__(self) -> str:
        return f"{'(' if self.lo_open else '['}{shown(self.lo)}, {shown(self.hi)}{')' if self.hi_open else ']'}"

    def describe(self) -> str:
        """The range in words, with what the rule for numbers takes out of it: ``a number in [0, 1e+100] (0 or
        at least 1e-100)``."""
        lo, hi = self.lo, self.hi
        if not (lo < TINY and hi > -TINY):  # no number of the range is below the rule's TINY
            return f"a number in {self}"
        zero = "0 or " if (lo < 0 or (lo == 0 and not self.lo_open)) and (hi > 0 or (hi == 0 and not self.hi_open)) \
            else ""
        return f"a number in {self} ({zero}{'at least' if lo >= 0 else 'of magnitude at least'} {shown(TINY)})"

    def __contains__(self, x: float) -> bool:
        return self.problem(x) is None

    def problem(self, x: float) -> str | None:
        """Why ``x`` is outside this range (the rule first), or None."""
        rule = number_problem(x)
        if rule is not None:
            return rule
        low = x > self.lo if self.lo_open else x >= self.lo
        high = x < self.hi if self.hi_open else x <= self.hi
        return None if low and high else f"must be a number in {self}, got {shown(x)}"
