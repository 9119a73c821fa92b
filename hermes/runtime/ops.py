"""What both runtime communicators share: reductions folded in rank order, and waiting for requests.

A reduction of Python objects (``allreduce``, ``scan``, ``exscan``) and hermes' own stamped reduction
(:meth:`~hermes.runtime.communicator.Communicator.reduce_stamped`) are computed from every processor's contribution in
rank order, left to right, by the same functions in both implementations, so a result never depends on which
implementation ran it nor on how many processes host the processors (MPI's own reduction order may differ).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["waitall"]


def waitall(requests) -> None:
    """Wait for every request (hosted or mpi4py's): ``MPI.Request.Waitall`` for either kind."""
    for q in requests:
        q.Wait()


def _reduce_rows(rows: list, op: str) -> np.ndarray:
    """``op`` over the rows in rank order, as :func:`hermes.runtime.comm.allreduce` folds them: a sum left to right
    starting from 0.0 (bit for bit), else numpy's max/min."""
    if op == "sum":
        out = np.zeros(rows[0].size) if rows else np.zeros(0)
        for v in rows:
            out += v
        return out
    stacked = np.vstack(rows)
    return stacked.max(axis=0) if op == "max" else stacked.min(axis=0)


def _fold(values: list, op) -> Any:
    """``op`` folded left to right (rank order); ``op`` None or mpi4py's SUM: ``+``."""
    acc = values[0]
    for v in values[1:]:
        acc = _apply(op, acc, v)
    return acc


def _apply(op, a, b):
    if op is None:
        return a + b
    name = _op_name(op)
    if name == "sum":
        return a + b
    if name == "max":
        return b if b > a else a
    if name == "min":
        return b if b < a else a
    if name == "prod":
        return a * b
    return op(a, b)


def _op_name(op) -> str | None:
    if isinstance(op, str):
        return op
    try:
        from mpi4py import MPI
    except ImportError:  # pragma: no cover - mpi4py is a dependency
        return None
    return {id(MPI.SUM): "sum", id(MPI.MAX): "max", id(MPI.MIN): "min", id(MPI.PROD): "prod"}.get(id(op))


def _prefix(values: list, op, exclusive: bool) -> list:
    """Each rank's (exclusive) prefix of ``values`` under ``op`` in rank order (an exclusive prefix of rank 0:
    None, as mpi4py's ``exscan``)."""
    out, acc = [], None
    for r, v in enumerate(values):
        if exclusive:
            out.append(acc)
        acc = v if r == 0 else _apply(op, acc, v)
        if not exclusive:
            out.append(acc)
    return out
