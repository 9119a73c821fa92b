"""LBAF interoperability: the per-rank LBDatafile JSON of DARMA's Load Balancing Analysis Framework.

A trace is one file per rank, ``<stem>.<rank>.json``::

    {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r},
     "phases": [{"id": 0,
                 "tasks": [{"entity": {"type": "object", "seq_id": 2, "collection_id": 0, "home": 1,
                                       "migratable": true},
                            "node": 1, "resource": "cpu", "time": 2.0}, ...],
                 "communications": [{"type": "SendRecv", "from": {"type": "object", "seq_id": 2},
                                     "to": {"type": "object", "seq_id": 7}, "messages": 1, "bytes": 64.0}]}]}

(the minimal form LBAF was checked to accept, see ANCHORS.md; ``communications`` is optional). The
reader takes object ids from ``seq_id`` or ``id``, the task's rank from the file name, its load from
``time``; it ignores what hermes does not model (``user_defined``, ``subphases``, LBAF's output
``lb_iterations``) and non-object communications. The writer produces exactly the form above, so a
hermes assignment (e.g. the result of :func:`hermes.balance.gossip.grapevine`) can be fed to LBAF
with ``from_data: {data_stem: <stem>, phase_ids: [<phase>]}`` and an LBAF trace can be balanced by
hermes (``hermes gossip --loads lbaf:<stem>``). Brotli-compressed traces are not supported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.errors import MeshError
from hermes.results import write_atomic

__all__ = ["LBDataset", "dataset_from_assignment", "read_lbdatafile", "write_lbdatafile", "lbdatafile_paths"]


@dataclass(frozen=True, eq=False)
class LBDataset:
    """One phase of an LBAF trace (arrays over tasks, sorted by object id).

    Attributes
    ----------
    n_ranks : int
    ids : int64 array
        Object ids (LBAF ``seq_id`` / ``id``), unique.
    loads : float64 array
        Task times.
    ranks : int64 array
        Rank holding the task (the file it is listed in).
    home : int64 array
    migratable : bool array
    phase : int
        LBAF phase id.
    comm_from, comm_to : int64 arrays
        Object ids of the ``SendRecv`` object-to-object communications (the reader sorts them by
        (from, to)).
    comm_messages : int64 array
    comm_bytes : float64 array
    """

    n_ranks: int
    ids: NDArray[np.int64]
    loads: NDArray[np.float64]
    ranks: NDArray[np.int64]
    home: NDArray[np.int64]
    migratable: NDArray[np.bool_]
    phase: int = 0
    comm_from: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm_to: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm_messages: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    comm_bytes: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    def with_ranks(self, ranks: ArrayLike) -> LBDataset:
        """The same tasks on new ranks (homes unchanged), e.g. after balancing."""
        r = np.asarray(ranks, dtype=np.int64).ravel()
        if r.shape != self.ids.shape or (r.size and (r.min() < 0 or r.max() >= self.n_ranks)):
            raise MeshError(f"new ranks must be {self.ids.size} integers in 0..{self.n_ranks - 1}")
        return replace(self, ranks=r)


def dataset_from_assignment(loads: ArrayLike, ranks: ArrayLike, n_ranks: int, *, ids: ArrayLike | None = None,
                            home: ArrayLike | None = None, phase: int = 0) -> LBDataset:
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
    return LBDataset(int(n_ranks), i[o], ell[o], r[o], h[o], np.ones(ell.size, dtype=bool), int(phase))


def lbdatafile_paths(stem: str | Path, n_ranks: int) -> list[Path]:
    """``<stem>.0.json`` ... ``<stem>.<n−1>.json``."""
    return [Path(f"{stem}.{r}.json") for r in range(n_ranks)]


def _entity_id(ent: dict[str, Any], where: str) -> int:
    v = ent.get("seq_id", ent.get("id"))
    if not isinstance(v, int) or isinstance(v, bool):
        raise MeshError(f"{where}: entity without an integer seq_id or id")
    return v


def read_lbdatafile(stem: str | Path, *, phase: int | None = None, n_ranks: int | None = None) -> LBDataset:
    """Read the LBDatafile trace ``<stem>.<r>.json`` (r = 0, 1, ... while the files exist).

    Parameters
    ----------
    stem : str or Path
    phase : int, optional
        Phase id to read (default: the first phase listed by rank 0).
    n_ranks : int, optional
        Number of files to read (default: all consecutive ones).

    Raises
    ------
    MeshError
        Missing or unreadable file, wrong type, rank mismatch, missing phase, duplicate object ids.
    """
    if n_ranks is None:
        n_ranks = 0
        while Path(f"{stem}.{n_ranks}.json").is_file():
            n_ranks += 1
        if n_ranks == 0:
            raise MeshError(f"no LBDatafile {stem}.0.json")
    docs = []
    for r, path in enumerate(lbdatafile_paths(stem, n_ranks)):
        try:
            doc = json.loads(path.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            raise MeshError(f"missing LBDatafile {path}") from None
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise MeshError(f"{path}: not JSON (brotli-compressed LBAF traces are not supported)") from None
        if not isinstance(doc, dict) or doc.get("type", doc.get("metadata", {}).get("type")) != "LBDatafile":
            raise MeshError(f"{path}: not an LBDatafile (type must be 'LBDatafile')")
        meta_rank = doc.get("metadata", {}).get("rank", r)
        if meta_rank != r:
            raise MeshError(f"{path}: metadata says rank {meta_rank}")
        docs.append(doc)
    if phase is None:
        first = docs[0].get("phases") or [{"id": 0}]
        phase = int(first[0]["id"])
    ids, loads, ranks, home, mig = [], [], [], [], []
    cf, ct, cm, cb = [], [], [], []
    for r, doc in enumerate(docs):
        where = f"{stem}.{r}.json"
        phases = [ph for ph in doc.get("phases", []) if ph.get("id") == phase]
        if not phases and doc.get("phases"):
            raise MeshError(f"{where}: no phase {phase}")
        for ph in phases:
            for task in ph.get("tasks", []):
                ent = task.get("entity", {})
                ids.append(_entity_id(ent, where))
                try:
                    loads.append(float(task["time"]))
                except (KeyError, TypeError, ValueError):
                    raise MeshError(f"{where}: task {ids[-1]} without a numeric time") from None
                ranks.append(r)
                home.append(int(ent.get("home", r)))
                mig.append(bool(ent.get("migratable", True)))
            for c in ph.get("communications", []) or []:
                src, dst = c.get("from", {}), c.get("to", {})
                if c.get("type") == "SendRecv" and src.get("type") == "object" and dst.get("type") == "object":
                    cf.append(_entity_id(src, where))
                    ct.append(_entity_id(dst, where))
                    cm.append(int(c.get("messages", 1)))
                    cb.append(float(c.get("bytes", 0.0)))
    i = np.asarray(ids, dtype=np.int64)
    if np.unique(i).size != i.size:
        raise MeshError(f"{stem}: an object id appears twice in phase {phase}")
    o = np.argsort(i, kind="stable")
    h = np.asarray(home, dtype=np.int64)[o]
    if h.size and (h.min() < 0 or h.max() >= n_ranks):
        raise MeshError(f"{stem}: a task's home is not one of the {n_ranks} ranks")
    cf, ct = np.asarray(cf, dtype=np.int64), np.asarray(ct, dtype=np.int64)
    c = np.lexsort((ct, cf))  # communications in (from, to) order, whichever file listed them
    return LBDataset(n_ranks, i[o], np.asarray(loads, dtype=np.float64)[o], np.asarray(ranks, dtype=np.int64)[o], h,
                     np.asarray(mig, dtype=bool)[o], phase, cf[c], ct[c], np.asarray(cm, dtype=np.int64)[c],
                     np.asarray(cb, dtype=np.float64)[c])


def _entity(oid: int, home: int, migratable: bool) -> dict[str, Any]:
    return {"type": "object", "seq_id": int(oid), "collection_id": 0, "home": int(home), "migratable": bool(migratable)}


def write_lbdatafile(stem: str | Path, data: LBDataset) -> list[Path]:
    """Write ``data`` as ``<stem>.<r>.json`` for every rank (empty ranks get an empty task list).

    A communication is listed in the file of the rank that holds its sending object. Files are
    written atomically.
    """
    where = {int(i): (int(r), int(h), bool(m)) for i, r, h, m in zip(data.ids, data.ranks, data.home,
                                                                   data.migratable)}
    tasks: list[list[dict[str, Any]]] = [[] for _ in range(data.n_ranks)]
    for oid, ell, r, h, m in zip(data.ids.tolist(), data.loads.tolist(), data.ranks.tolist(), data.home.tolist(),
                                 data.migratable.tolist()):
        tasks[r].append({"entity": _entity(oid, h, m), "node": r, "resource": "cpu", "time": float(ell)})
    comms: list[list[dict[str, Any]]] = [[] for _ in range(data.n_ranks)]
    for a, b, nm, nb in zip(data.comm_from.tolist(), data.comm_to.tolist(), data.comm_messages.tolist(),
                            data.comm_bytes.tolist()):
        ra, rb = where.get(a, (0, 0, True)), where.get(b, (0, 0, True))
        comms[ra[0]].append({"type": "SendRecv", "from": _entity(a, ra[1], ra[2]), "to": _entity(b, rb[1], rb[2]),
                             "messages": int(nm), "bytes": float(nb)})
    paths = lbdatafile_paths(stem, data.n_ranks)
    for r, path in enumerate(paths):
        ph: dict[str, Any] = {"id": int(data.phase), "tasks": tasks[r]}
        if comms[r]:
            ph["communications"] = comms[r]
        doc = {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r}, "phases": [ph]}
        write_atomic(path, json.dumps(doc, indent=1) + "\n")
    return paths
