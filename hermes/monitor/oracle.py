"""The oracle's capacities: what each processor will really offer in the coming phase.

The ``oracle`` monitor source (:mod:`hermes.monitor.series`) is the comparison point for the others: the
capacities a balancer would use if it knew the future load. "The future" needs a horizon; we take the one
that makes the answer self-consistent. Let ``A_i(H)`` be the work processor ``i`` can do for a
continuously computing application over ``[t0, t0 + H]`` (the extra-load model's
:meth:`~hermes.extraload.sharing.ProcessorLoad.available_work`; non-decreasing and continuous in ``H``).
The equal-finish horizon ``H*`` solves ``Σ_i A_i(H*) = W`` for the phase's total work ``W``; with loads
``A_i(H*)`` every processor finishes its work at ``t0 + H*`` exactly, and the capacities
``c_i = A_i(H*) / W`` are what a perfect balancer would assign. (Exact for the phase's computation
when the application computes without waiting; its messages and reductions make it approximate.)

Under MPI each evaluation of ``Σ_i A_i(H)`` is one allgather of the ranks' own ``A_i``; every rank runs
the same root finder on the same numbers, so they agree without further communication.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["equal_finish"]


def equal_finish(available: Callable[[float], NDArray[np.float64]], total_work: float, guess: float, *,
                 rtol: float = 1e-12, max_doublings: int = 200) -> tuple[float, NDArray[np.float64]]:
    """The equal-finish horizon ``H*`` and the capacities ``A_i(H*) / W`` (see the module docstring).

    Parameters
    ----------
    available : callable
        ``H ↦ (A_0(H), ..., A_{p−1}(H))``, work each processor can do over the next ``H`` seconds.
    total_work : float
        ``W`` > 0, the work of the coming phase (all processors).
    guess : float
        A horizon to start bracketing from (e.g. the nominal phase time ``W / Σ rates``).

    Returns
    -------
    H : float
    capacities : (p,) array summing to 1 (up to the root's tolerance ``rtol``).
    """
    W = float(total_work)
    if not W > 0:
        raise ValueError(f"total work must be positive, got {total_work!r}")

    def f(h: float) -> float:
        return float(np.sum(available(h))) - W

    hi = max(float(guess), np.finfo(float).tiny)
    n = 0
    while f(hi) < 0:
        hi *= 2.0
        n += 1
        if n > max_doublings:
            raise ValueError("the processors cannot do the work in any horizon (no capacity left)")
    lo = hi / 2.0
    while lo > 0 and f(lo) >= 0 and n < max_doublings:
        hi, lo = lo, lo / 2.0
        n += 1
    from scipy.optimize import brentq  # here, not at import: scipy.optimize costs every rank 0.3 s of CPU

    h = brentq(f, lo, hi, rtol=rtol, xtol=1e-300) if f(hi) != 0 else hi
    work = np.asarray(available(h), dtype=np.float64)
    return h, work / work.sum()
