"""LBAF interoperability: the per-rank LBDatafile JSON of DARMA's Load Balancing Analysis Framework.

A trace is one file per rank, ``<stem>.<rank>.json``::

    {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r},
     "phases": [{"id": 0,
                 "tasks": [{"entity": {"type": "object", "seq_id": 2, "collection_id": 0, "home": 1,
                                       "migratable": true},
                            "node": 1, "resource": "cpu", "time": 2.0}, ...],
                 "communications": [{"type": "SendRecv", "from": {"type": "object", "seq_id": 2},
                                     "to": {"type": "object", "seq_id": 7}, "messages": 1, "bytes": 64.0}]}]}

(the minimal form LBAF was checked to accept, see ANCHORS.md; ``communications`` is optional). Every
file is checked against LBAF's schema (its ``LBDatafile_schema.py``, written here as pydantic models:
required keys, strict types, int64 ranges, finite non-negative times), so a malformed trace is one line
naming the file and the key path, never a traceback. The reader takes object ids from ``seq_id`` or
``id``, the task's rank from the file name, its load from ``time``; it ignores what hermes does not
model (``user_defined``, ``subphases``, LBAF's output ``lb_iterations``) and non-object communications. The writer produces exactly the form above, so a
hermes assignment (e.g. the result of :func:`hermes.balance.gossip.grapevine`) can be fed to LBAF
with ``from_data: {data_stem: <stem>, phase_ids: [<phase>]}`` and an LBAF trace can be balanced by
hermes (``hermes gossip --loads lbaf:<stem>``). Brotli-compressed traces are not supported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from hermes.bounds import BIG
from hermes.errors import MeshError, validation_message
from hermes.loaders import parse_json, read_bytes
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


# -- the LBDatafile schema (LBAF's src/lbaf/imported/LBDatafile_schema.py, as pydantic models) --------------
_I64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
_ID = Annotated[int, Field(ge=0, le=2**63 - 1)]
#: a task's time and a message's bytes: finite, at most BIG (the lab's sums and squares stay finite)
_TIME = Annotated[float, Field(ge=0, le=BIG)]


class _Part(BaseModel):
    # strict: no "1" → 1 nor 1.5 → int nor true → 1; finite floats only; keys LBAF adds later are ignored
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow", populate_by_name=True)


class _Entity(_Part):
    """An object (or other entity) reference: LBAF's ``validate_ids`` — ``seq_id`` or ``id``, and a
    migratable object with a ``seq_id`` has a ``collection_id``."""

    type: str
    id: _ID | None = None
    seq_id: _ID | None = None
    home: _I64 | None = None
    collection_id: _I64 | None = None
    migratable: bool | None = None
    index: list[_I64] | None = None
    objgroup_id: _I64 | None = None

    @model_validator(mode="after")
    def _ids(self):
        if self.seq_id is None and self.id is None:
            raise ValueError("either id (bit-encoded) or seq_id must be given")
        if self.migratable and self.seq_id is not None and self.collection_id is None:
            raise ValueError("a migratable entity with a seq_id needs a collection_id")
        return self

    @property
    def oid(self) -> int:
        return self.seq_id if self.seq_id is not None else self.id


class _TaskEntity(_Entity):
    home: _I64
    migratable: bool


class _Subphase(_Part):
    id: _I64
    time: _TIME


class _Task(_Part):
    entity: _TaskEntity
    node: _I64
    resource: str
    time: _TIME
    subphases: list[_Subphase] | None = None
    user_defined: dict | None = None
    attributes: dict | None = None


class _Communication(_Part):
    type: str
    to: _Entity
    from_: _Entity = Field(alias="from")
    messages: Annotated[int, Field(ge=0, le=2**63 - 1)]
    bytes: Annotated[float, Field(ge=0, le=BIG)]


class _Iteration(_Part):
    id: _I64
    tasks: list[_Task]
    communications: list[_Communication] | None = None
    user_defined: dict | None = None


class _Phase(_Iteration):
    lb_iterations: list[_Iteration] | None = None


class _SharedNode(_Part):
    id: _I64
    size: _I64
    rank: _I64
    num_nodes: _I64


class _PhaseSet(_Part):
    list: list[_I64]
    range: list[list[_I64]]


class _PhasesMeta(_Part):
    count: _I64 | None = None
    skipped: _PhaseSet
    identical_to_previous: _PhaseSet


class _Metadata(_Part):
    type: Literal["LBDatafile"] | None = None
    rank: _I64 | None = None
    shared_node: _SharedNode | None = None
    phases: _PhasesMeta | None = None
    attributes: dict | None = None


class _LBDatafile(_Part):
    """One rank's file. LBAF's schema makes ``type`` optional; hermes needs it at the top or in
    ``metadata`` (it tells an LBDatafile from LBAF's other JSON files)."""

    type: Literal["LBDatafile"] | None = None
    metadata: _Metadata | None = None
    phases: list[_Phase]


#: the largest LBDatafile hermes reads (a rank's file of a real application is a few MB to a few hundred)
MAX_TRACE_BYTES = 256 * 2**20


def _read_doc(path: Path, r: int) -> _LBDatafile:
    """One rank's file, parsed as strict JSON and checked against the schema (MeshError in one line)."""
    if not path.exists():
        raise MeshError(f"missing LBDatafile {path}")
    data = read_bytes(path, "LBDatafile", max_bytes=MAX_TRACE_BYTES, error=MeshError)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise MeshError(f"{path}: not JSON (brotli-compressed LBAF traces are not supported)") from None
    doc = parse_json(data, str(path), error=MeshError)
    if not isinstance(doc, dict):
        raise MeshError(f"{path}: not an LBDatafile (the file must hold a JSON object)")
    kinds = {doc.get("type"), doc["metadata"].get("type") if isinstance(doc.get("metadata"), dict) else None}
    if "LBDatafile" not in kinds:
        raise MeshError(f"{path}: not an LBDatafile (type must be 'LBDatafile')")
    try:
        data = _LBDatafile.model_validate(doc)
    except ValidationError as err:
        raise MeshError(f"{path}: {validation_message(err)}") from None
    meta_rank = data.metadata.rank if data.metadata is not None and data.metadata.rank is not None else r
    if meta_rank != r:
        raise MeshError(f"{path}: metadata says rank {meta_rank}")
    return data


def read_lbdatafile(stem: str | Path, *, phase: int | None = None, n_ranks: int | None = None) -> LBDataset:
    """Read the LBDatafile trace ``<stem>.<r>.json`` (r = 0, 1, ... while the files exist).

    Every file is checked against LBAF's LBDatafile schema (``LBDatafile_schema.py`` of DARMA's
    LB-analysis-framework, written here as pydantic models): required keys, types (strict: an integer
    field takes neither ``1.5`` nor ``"1"`` nor ``true``), integers within int64, finite non-negative
    times, bytes and message counts, ``seq_id`` or ``id`` on every entity. Keys the schema does not
    know are ignored.

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
        One line naming the file and the key path (``t.1.json: phases.0.tasks.2.entity.home: ...``):
        missing or unreadable file, not JSON, not an LBDatafile, a field of the wrong type or range,
        rank mismatch, missing phase, duplicate object ids, a home outside the ranks.
    """
    if n_ranks is None:
        n_ranks = 0
        try:
            while Path(f"{stem}.{n_ranks}.json").is_file():
                n_ranks += 1
        except (OSError, ValueError):  # a stem too long to be a path
            n_ranks = 0
        if n_ranks == 0:
            raise MeshError(f"no LBDatafile {stem}.0.json")
    docs = [_read_doc(path, r) for r, path in enumerate(lbdatafile_paths(stem, n_ranks))]
    if phase is None:
        phase = docs[0].phases[0].id if docs[0].phases else 0
    ids, loads, ranks, home, mig = [], [], [], [], []
    cf, ct, cm, cb = [], [], [], []
    for r, doc in enumerate(docs):
        where = f"{stem}.{r}.json"
        phases = [ph for ph in doc.phases if ph.id == phase]
        if not phases and doc.phases:
            raise MeshError(f"{where}: no phase {phase}")
        for ph in phases:
            for task in ph.tasks:
                ids.append(task.entity.oid)
                loads.append(task.time)
                ranks.append(r)
                home.append(task.entity.home)
                mig.append(task.entity.migratable)
            for c in ph.communications or []:
                if c.type == "SendRecv" and c.from_.type == "object" and c.to.type == "object":
                    cf.append(c.from_.oid)
                    ct.append(c.to.oid)
                    cm.append(c.messages)
                    cb.append(c.bytes)
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
