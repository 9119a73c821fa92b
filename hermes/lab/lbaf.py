"""LBAF interoperability for the gossip lab: one phase of an LBDatafile trace as arrays.

The reader and writer are :mod:`hermes.trace.lbdatafile` (every phase, brotli, subphases, communications,
``user_defined``); this module keeps the lab's one-phase view: :class:`LBDataset` is
:class:`hermes.trace.TracePhase`, :func:`read_lbdatafile` reads one phase (the first by default) and
:func:`write_lbdatafile` writes one, so a hermes assignment (e.g. the result of
:func:`hermes.balance.gossip.grapevine.grapevine`) can be fed to LBAF with ``from_data: {data_stem: <stem>, phase_ids:
[<phase>]}`` and an LBAF trace can be balanced by hermes (``hermes lab gossip --loads lbaf:<stem>``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from hermes.errors import MeshError
from hermes.trace.lbdatafile import MAX_TRACE_BYTES, read_trace, trace_paths, write_trace
from hermes.trace.trace_phase import TracePhase

__all__ = ["LBDataset", "dataset_from_assignment", "read_lbdatafile", "write_lbdatafile", "lbdatafile_paths",
           "MAX_TRACE_BYTES"]

#: one phase of a trace (the lab's name for :class:`hermes.trace.TracePhase`)
LBDataset = TracePhase
lbdatafile_paths = trace_paths


def dataset_from_assignment(loads: ArrayLike, ranks: ArrayLike, n_ranks: int, *, ids: ArrayLike | None = None,
                            home: ArrayLike | None = None, phase: int = 0) -> TracePhase:
    """An :class:`LBDataset` of migratable objects (ids 0..n−1 by default, home = current rank)."""
    ell = np.asarray(loads, dtype=np.float64).ravel()
    r = np.asarray(ranks, dtype=np.int64).ravel()
    i = np.arange(ell.size, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64).ravel()
    h = r.copy() if home is None else np.asarray(home, dtype=np.int64).ravel()
    if not (r.shape == i.shape == h.shape == ell.shape):
        raise MeshError("loads, ranks, ids and home must have one entry per object")
    if r.size and (min(r.min(), h.min()) < 0 or max(r.max(), h.max()) >= n_ranks):
        raise MeshError(f"ranks and homes must lie in 0..{n_ranks - 1}")
    if np.unique(i).size != i.size:
        raise MeshError("object ids must be unique")
    o = np.argsort(i, kind="stable")
    return TracePhase(int(n_ranks), i[o], ell[o], r[o], h[o], np.ones(ell.size, dtype=bool), int(phase))


def read_lbdatafile(stem: str | Path, *, phase: int | None = None, n_ranks: int | None = None) -> TracePhase:
    """One phase (default: the first) of the trace ``<stem>.<r>.json``; :func:`hermes.trace.read_trace` for the
    checks and the errors (:class:`hermes.trace.TraceError`, a :class:`~hermes.errors.MeshError`)."""
    trace = read_trace(stem, phases=phase, n_ranks=n_ranks)
    return trace.phases[0]


def write_lbdatafile(stem: str | Path, data: TracePhase) -> list[Path]:
    """Write ``data`` as ``<stem>.<r>.json`` for every rank (:func:`hermes.trace.write_trace`)."""
    return write_trace(stem, data)
