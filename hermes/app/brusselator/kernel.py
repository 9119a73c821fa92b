"""A compiled sweep of a Brusselator block over its whole time range (003 Alg. 2's ``Solve``), for the paper's form.

:func:`sweep` solves a block ``[lo, hi)`` over all the levels of a window with fixed ghost trajectories, implicit
Euler + Newton at each level, in one call compiled by numba: the 2 × 2 block-tridiagonal Newton system of a level
(interleaved (u, v), off-diagonal blocks ``−dt D I``) is solved by the block Thomas algorithm, whose work is
linear in the block's points. Newton starts either from the previous time level (``from_iterate=False``, as
:func:`hermes.app.brusselator.brusselator.implicit_step`) or from the block's previous iterate at the same level
(``from_iterate=True``, 003 Alg. 2 ``Ynew[j,t] = Solve(Yold[j,t])``), and stops as ``implicit_step`` does: when the
max-norm of the update is at most ``tol · max(1, ‖y‖∞)``. The Newton iterations it did at each level are returned:
the paper's form charges exactly those.

Why compiled: a Newton iteration of :func:`~hermes.app.brusselator.brusselator.implicit_step` costs ~50 µs of Python and
NumPy overhead whatever the block's size (measured: 52 µs at 200 points, 0.53 ms at 4,000), and the paper's form
needs thousands of sweeps of 200 levels; ``benchmarks/bahi_kernel.py`` measures the two side by side.

Block Thomas without pivoting between blocks: with ``c = −dt D`` the Schur complements are
``S_i = A_i − c² S_{i−1}⁻¹``; the diffusion part ``1 + 2 dt D`` of ``A_i`` dominates ``|c|`` and keeps them
invertible; a singular or non-finite pivot is reported (``info`` = level) and becomes a
:class:`~hermes.app.brusselator.brusselator.SolverError` in the caller.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numpy.typing import NDArray

from hermes.app.brusselator.brusselator import Brusselator, SolverError

__all__ = ["sweep", "solve_sweep"]


@njit(cache=True)
def _level(prev, start, left, right, dt, D, tol, max_newton, out, su, sv, g, inv):  # pragma: no cover - compiled
    """One implicit-Euler level by Newton from ``start``; writes ``out`` (n, 2); returns iterations (< 0: failure)."""
    n = prev.shape[0]
    for i in range(n):
        out[i, 0] = start[i, 0]
        out[i, 1] = start[i, 1]
    c = -dt * D
    for it in range(1, max_newton + 1):
        # forward elimination: S_i = A_i − c² S_{i−1}⁻¹, g_i = r_i − c S_{i−1}⁻¹ g_{i−1}
        for i in range(n):
            u = out[i, 0]
            v = out[i, 1]
            ul = left[0] if i == 0 else out[i - 1, 0]
            vl = left[1] if i == 0 else out[i - 1, 1]
            ur = right[0] if i == n - 1 else out[i + 1, 0]
            vr = right[1] if i == n - 1 else out[i + 1, 1]
            u2v = u * u * v
            fu = 1.0 + u2v - 4.0 * u + D * (ul - 2.0 * u + ur)
            fv = 3.0 * u - u2v + D * (vl - 2.0 * v + vr)
            r0 = prev[i, 0] - u + dt * fu
            r1 = prev[i, 1] - v + dt * fv
            uv2 = 2.0 * u * v
            a00 = 1.0 - dt * (uv2 - 4.0 - 2.0 * D)
            a01 = -dt * u * u
            a10 = -dt * (3.0 - uv2)
            a11 = 1.0 + dt * (u * u + 2.0 * D)
            if i > 0:
                a00 -= c * c * inv[i - 1, 0]
                a01 -= c * c * inv[i - 1, 1]
                a10 -= c * c * inv[i - 1, 2]
                a11 -= c * c * inv[i - 1, 3]
                r0 -= c * (inv[i - 1, 0] * g[i - 1, 0] + inv[i - 1, 1] * g[i - 1, 1])
                r1 -= c * (inv[i - 1, 2] * g[i - 1, 0] + inv[i - 1, 3] * g[i - 1, 1])
            det = a00 * a11 - a01 * a10
            if det == 0.0 or not math.isfinite(det):
                return -1
            inv[i, 0] = a11 / det
            inv[i, 1] = -a01 / det
            inv[i, 2] = -a10 / det
            inv[i, 3] = a00 / det
            g[i, 0] = r0
            g[i, 1] = r1
        # back substitution: d_i = S_i⁻¹ (g_i − c d_{i+1})
        step = 0.0
        big = 1.0
        du = 0.0
        dv = 0.0
        for i in range(n - 1, -1, -1):
            h0 = g[i, 0]
            h1 = g[i, 1]
            if i < n - 1:
                h0 -= c * du
                h1 -= c * dv
            du = inv[i, 0] * h0 + inv[i, 1] * h1
            dv = inv[i, 2] * h0 + inv[i, 3] * h1
            su[i] = du
            sv[i] = dv
        for i in range(n):
            out[i, 0] += su[i]
            out[i, 1] += sv[i]
            a = abs(su[i])
            b = abs(sv[i])
            if a > step:
                step = a
            if b > step:
                step = b
            a = abs(out[i, 0])
            b = abs(out[i, 1])
            if a > big:
                big = a
            if b > big:
                big = b
        if not math.isfinite(step):
            return -2
        if step <= tol * big:
            return it
    return -3


@njit(cache=True)
def _sweep(old, left, right, from_iterate, dt, D, tol, max_newton, new, newton):  # pragma: no cover - compiled
    m1, n = old.shape[0], old.shape[1]
    su = np.empty(n)
    sv = np.empty(n)
    g = np.empty((n, 2))
    inv = np.empty((n, 4))
    for i in range(n):
        new[0, i, 0] = old[0, i, 0]
        new[0, i, 1] = old[0, i, 1]
    for k in range(1, m1):
        start = old[k] if from_iterate else new[k - 1]
        its = _level(new[k - 1], start, left[k], right[k], dt, D, tol, max_newton, new[k], su, sv, g, inv)
        if its < 0:
            return -(4 * k - its)
        newton[k - 1] = its
    return 0


def sweep(old: NDArray[np.float64], left: NDArray[np.float64], right: NDArray[np.float64], problem: Brusselator,
          from_iterate: bool) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """The block's new trajectory (m + 1, n, 2) from its previous one and fixed ghosts; and Newton iterations (m,).

    ``old[0]`` is the window's starting state (copied); ``left`` / ``right`` (m + 1, 2) the ghost trajectories.
    Raises :class:`SolverError` as :func:`~hermes.app.brusselator.brusselator.implicit_step` does.
    """
    old = np.ascontiguousarray(old, dtype=np.float64)
    m1, n = old.shape[0], old.shape[1]
    new = np.empty_like(old)
    newton = np.zeros(m1 - 1, dtype=np.int64)
    if n == 0 or m1 < 2:
        new[...] = old
        return new, newton
    code = _sweep(old, np.ascontiguousarray(left, dtype=np.float64), np.ascontiguousarray(right, dtype=np.float64),
                  bool(from_iterate), float(problem.dt), float(problem.diffusion), float(problem.newton_tol),
                  int(problem.max_newton), new, newton)
    if code != 0:
        k, kind = divmod(-code, 4)
        why = {1: "singular Newton system", 2: "Newton did not converge (non-finite update)"}.get(
            kind, f"Newton did not converge ({problem.max_newton} iterations)")
        raise SolverError(f"{why} at step {k} of a {n}-point block")
    return new, newton


def solve_sweep(init: NDArray[np.float64], left: NDArray[np.float64], right: NDArray[np.float64],
                problem: Brusselator) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """:func:`hermes.app.brusselator.brusselator.solve_block` by the compiled kernel (Newton from the previous
    level)."""
    m1 = left.shape[0]
    old = np.broadcast_to(init, (m1,) + init.shape)
    return sweep(old, left, right, problem, from_iterate=False)
