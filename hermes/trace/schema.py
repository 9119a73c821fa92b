"""The schema of vt's LBDatafile (LBAF's ``src/lbaf/imported/LBDatafile_schema.py``) as strict pydantic models,
and the same checks made column by column (:func:`check_iterations`): what :mod:`hermes.trace.lbdatafile`
validates every rank file against, so that a malformed file is one line naming the file and the key path.

The models define the schema and word the errors; the column checks make them at the speed of a list
comprehension per field (a trace of 10⁶ phases or tasks), and hand the first phase that fails to the models
(:func:`explain`). ``tests/trace/test_lbdatafile.py`` checks that both accept and refuse the same documents."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes.bounds import BIG

__all__ = ["LBDatafileDoc", "PhaseDoc", "ColumnError", "check_iterations", "explain"]

# -- the schema (LBAF's LBDatafile_schema.py as pydantic models) ------------------------------------------------
_I64 = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)]
_ID = Annotated[int, Field(ge=0, le=2**63 - 1)]
#: a time or a byte count: finite, non-negative, at most BIG (sums and squares stay finite)
_AMOUNT = Annotated[float, Field(ge=0, le=BIG)]


class _Part(BaseModel):
    # strict: no "1" → 1 nor 1.5 → int nor true → 1; finite floats only; keys added by later vt versions are
    # accepted and ignored
    model_config = ConfigDict(strict=True, allow_inf_nan=False, extra="allow", populate_by_name=True)


class _Entity(_Part):
    """An object (or objgroup, or other entity) reference: ``seq_id`` or ``id``; a migratable object named by
    ``seq_id`` has a ``collection_id`` (LBAF's ``validate_ids``)."""

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
        """The object id as LBAF takes it: the (bit-encoded) ``id`` when given, else ``seq_id``."""
        return self.id if self.id is not None else self.seq_id


class _TaskEntity(_Entity):
    home: _I64
    migratable: bool


class _Subphase(_Part):
    id: _I64
    time: _AMOUNT


class _Task(_Part):
    entity: _TaskEntity
    node: _I64
    resource: str
    time: _AMOUNT
    subphases: list[_Subphase] | None = None
    user_defined: dict[str, Any] | None = None
    attributes: dict[str, Any] | None = None


class _Communication(_Part):
    type: str
    to: _Entity
    from_: _Entity = Field(alias="from")
    messages: Annotated[int, Field(ge=0, le=2**63 - 1)]
    bytes: _AMOUNT


class _Iteration(_Part):
    id: _I64
    tasks: list[_Task]
    communications: list[_Communication] | None = None
    user_defined: dict[str, Any] | None = None


class PhaseDoc(_Iteration):
    lb_iterations: list[_Iteration] | None = None


class _SharedNode(_Part):
    id: _I64
    size: _I64
    rank: _I64
    num_nodes: _I64


class _PhaseSet(_Part):
    list: list[_I64]
    range: list[list[_I64]]

    @model_validator(mode="after")
    def _ranges(self):
        for r in self.range:
            if len(r) != 2 or r[1] < r[0]:
                raise ValueError(f"a phase range must be [first, last] with first ≤ last, got {r}")
        return self


class _PhasesMeta(_Part):
    count: _I64 | None = None
    skipped: _PhaseSet
    identical_to_previous: _PhaseSet


class _Metadata(_Part):
    type: Literal["LBDatafile"] | None = None
    rank: _I64 | None = None
    #: the rank's α of LBAF's affine work model (default 1)
    rank_alpha: _AMOUNT | None = None
    shared_node: _SharedNode | None = None
    phases: _PhasesMeta | None = None
    attributes: dict[str, Any] | None = None


class LBDatafileDoc(_Part):
    """One rank's file. LBAF's schema makes ``type`` optional; hermes needs it at the top or in ``metadata``
    (it tells an LBDatafile from LBAF's other JSON files)."""

    type: Literal["LBDatafile"] | None = None
    metadata: _Metadata | None = None
    phases: list[PhaseDoc]


# -- what a trace is in memory -------------------------------------------------------------------------------------


# -- the same schema checked column by column ----------------------------------------------------------------------
# pydantic validates a task in tens of microseconds (70 µs in a file of 10⁵ tasks); a trace of 10⁶ tasks or 10⁶
# phases needs the checks at the speed of the list comprehensions that gather the columns. The models above stay
# the definition, and say what is wrong: when a column check fails, the phase that failed it is validated by
# them, and their message names the key path.
_NONE = type(None)
_MISSING = object()  # a required key that is absent: its type is allowed nowhere
_INT, _INT_OPT = frozenset({int}), frozenset({int, _NONE})
_NUM = frozenset({int, float})
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class ColumnError(Exception):
    """A column check failed at item ``k`` of the column (mapped to its phase by the caller)."""

    def __init__(self, level: str, k: int) -> None:
        super().__init__(level, k)
        self.level, self.k = level, int(k)


def _first(col: list, ok: frozenset) -> int:
    return next(k for k, x in enumerate(col) if type(x) not in ok)


def _types(level: str, col: list, ok: frozenset) -> set:
    kinds = set(map(type, col))
    if not kinds <= ok:
        raise ColumnError(level, _first(col, ok))
    return kinds


def _ints(level: str, col: list, lo: int = I64_MIN, hi: int = I64_MAX, *, optional: bool = False):
    """(int64 array, mask of the present values or None when all are) of a column of integers (JSON integers
    only: no bool, no float), each within [lo, hi]."""
    kinds = _types(level, col, _INT_OPT if optional else _INT)
    present = None
    if _NONE in kinds:
        present = np.fromiter((x is not None for x in col), dtype=bool, count=len(col))
        col = [0 if x is None else x for x in col]
    try:
        a = np.array(col, dtype=np.int64)
    except OverflowError:
        raise ColumnError(level, next(k for k, x in enumerate(col) if not lo <= x <= hi)) from None
    if a.size and (lo > I64_MIN or hi < I64_MAX):
        bad = (a < lo) | (a > hi)
        if present is not None:
            bad &= present
        if bad.any():
            raise ColumnError(level, int(np.argmax(bad)))
    return a, present


def _amounts(level: str, col: list) -> NDArray[np.float64]:
    """A column of times or byte counts: JSON numbers in [0, BIG]."""
    _types(level, col, _NUM)
    try:
        a = np.array(col, dtype=np.float64)
    except OverflowError:  # an integer beyond a float
        raise ColumnError(level, next(k for k, x in enumerate(col) if not 0 <= x <= BIG)) from None
    bad = ~((a >= 0) & (a <= BIG))
    if bad.any():
        raise ColumnError(level, int(np.argmax(bad)))
    return a


def _numbers(dicts: list) -> tuple[list[int], list[str], list[float]]:
    """(owner, key, value) of the numbers of ``user_defined`` mappings (None: none): JSON numbers within ±BIG,
    text and the rest left out (as the models keep them: not at all)."""
    out = [(j, key, v) for j, d in enumerate(dicts) if d for key, v in d.items()
           if type(v) in _NUM and -BIG <= v <= BIG]
    return [o[0] for o in out], [o[1] for o in out], [float(o[2]) for o in out]


def _entities(level: str, ents: list, *, task: bool) -> dict[str, Any]:
    """The checked fields of a column of entities (``_TaskEntity`` when ``task``, else ``_Entity``)."""
    _types(level, ents, frozenset({dict}))
    _types(level, [e.get("type", _MISSING) for e in ents], frozenset({str}))
    oid, has_id = _ints(level, [e.get("id") for e in ents], 0, I64_MAX, optional=True)
    seq, has_seq = _ints(level, [e.get("seq_id") for e in ents], 0, I64_MAX, optional=True)
    if task:
        home, _ = _ints(level, [e.get("home", _MISSING) for e in ents])
        mig_col = [e.get("migratable", _MISSING) for e in ents]
        _types(level, mig_col, frozenset({bool}))
        mig = np.array(mig_col, dtype=bool)
    else:
        home, has_home = _ints(level, [e.get("home") for e in ents], optional=True)
        mig_col = [e.get("migratable") for e in ents]
        _types(level, mig_col, frozenset({bool, _NONE}))
        mig = np.array([m is True for m in mig_col], dtype=bool)
        home = np.where(has_home, home, -1) if has_home is not None else home
    coll, has_coll = _ints(level, [e.get("collection_id") for e in ents], optional=True)
    _ints(level, [e.get("objgroup_id") for e in ents], optional=True)
    index = [e.get("index") for e in ents]
    _types(level, index, frozenset({list, _NONE}))
    counts = [len(x) if x else 0 for x in index]
    flat = [v for x in index if x for v in x]
    try:
        values, _ = _ints(level, flat)
    except ColumnError as err:
        owner = np.repeat(np.arange(len(ents)), counts)
        raise ColumnError(level, int(owner[err.k])) from None
    given_id = np.ones(len(ents), dtype=bool) if has_id is None else has_id
    given_seq = np.ones(len(ents), dtype=bool) if has_seq is None else has_seq
    no_coll = np.zeros(len(ents), dtype=bool) if has_coll is None else ~has_coll
    bad = ~(given_id | given_seq) | (mig & given_seq & no_coll)  # _Entity._ids
    if bad.any():
        raise ColumnError(level, int(np.argmax(bad)))
    return {"oid": np.where(given_id, oid, seq), "home": home, "migratable": mig,
            "collection": np.where(no_coll, -1, coll), "index_counts": counts, "index_values": values}


def check_iterations(items: list, level: str = "phase", *, lb: bool = True) -> dict[str, Any]:
    """Every task and communication of the phases ``items`` (the list a rank file's ``phases`` holds, or a
    phase's ``lb_iterations``) checked against the schema column by column, and the columns hermes keeps.

    Raises
    ------
    ColumnError
        At the first item of a column that fails (``level`` ``phase``, its position in ``items``).
    """
    _types(level, items, frozenset({dict}))
    pid, _ = _ints(level, [ph.get("id", _MISSING) for ph in items])
    tl = [ph.get("tasks", _MISSING) for ph in items]
    _types(level, tl, frozenset({list}))
    cl = [ph.get("communications") for ph in items]
    _types(level, cl, frozenset({list, _NONE}))
    uds = [ph.get("user_defined") for ph in items]
    _types(level, uds, frozenset({dict, _NONE}))
    if lb:
        lbs = [ph.get("lb_iterations") for ph in items]
        _types(level, lbs, frozenset({list, _NONE}))
        for j, its in enumerate(lbs):
            if its:
                try:
                    check_iterations(its, lb=False)
                except ColumnError:
                    raise ColumnError(level, j) from None
    n_tasks = np.fromiter(map(len, tl), dtype=np.int64, count=len(tl))
    n_comms = np.fromiter((len(c) if c else 0 for c in cl), dtype=np.int64, count=len(cl))
    t_owner = np.repeat(np.arange(len(items)), n_tasks)
    c_owner = np.repeat(np.arange(len(items)), n_comms)
    tasks = [t for ts in tl for t in ts]
    comms = [c for cs in cl if cs for c in cs]
    try:
        _types("task", tasks, frozenset({dict}))
        ent = _entities("task", [t.get("entity", _MISSING) for t in tasks], task=True)
        _ints("task", [t.get("node", _MISSING) for t in tasks])
        _types("task", [t.get("resource", _MISSING) for t in tasks], frozenset({str}))
        time = _amounts("task", [t.get("time", _MISSING) for t in tasks])
        sl = [t.get("subphases") for t in tasks]
        _types("task", sl, frozenset({list, _NONE}))
        tud = [t.get("user_defined") for t in tasks]
        _types("task", tud, frozenset({dict, _NONE}))
        _types("task", [t.get("attributes") for t in tasks], frozenset({dict, _NONE}))
        s_counts = np.fromiter((len(s) if s else 0 for s in sl), dtype=np.int64, count=len(sl))
        subs = [s for ss in sl if ss for s in ss]
        try:
            _types("sub", subs, frozenset({dict}))
            s_id, _ = _ints("sub", [s.get("id", _MISSING) for s in subs])
            s_time = _amounts("sub", [s.get("time", _MISSING) for s in subs])
        except ColumnError as err:
            raise ColumnError("task", int(np.repeat(np.arange(len(tasks)), s_counts)[err.k])) from None
    except ColumnError as err:
        raise ColumnError(level, int(t_owner[err.k])) from None
    try:
        _types("comm", comms, frozenset({dict}))
        _types("comm", [c.get("type", _MISSING) for c in comms], frozenset({str}))
        # populate_by_name: "from" (the alias) or "from_"
        src = _entities("comm", [c["from"] if "from" in c else c.get("from_", _MISSING) for c in comms], task=False)
        dst = _entities("comm", [c.get("to", _MISSING) for c in comms], task=False)
        msgs, _ = _ints("comm", [c.get("messages", _MISSING) for c in comms], 0, I64_MAX)
        nbytes = _amounts("comm", [c.get("bytes", _MISSING) for c in comms])
    except ColumnError as err:
        raise ColumnError(level, int(c_owner[err.k])) from None
    # what the model keeps of the communications: SendRecv between objects (LBAF's)
    kinds = [(c.get("type"), (c["from"] if "from" in c else c["from_"]).get("type"), c["to"].get("type"))
             for c in comms]
    keep = np.fromiter((k == ("SendRecv", "object", "object") for k in kinds), dtype=bool, count=len(kinds))
    u_owner, u_key, u_value = _numbers(tud)
    r_owner, r_key, r_value = _numbers(uds)
    last = np.asarray(n_tasks.cumsum() - 1)
    return {"pid": pid, "n_tasks": n_tasks, "n_comms": n_comms, "ent": ent, "time": time,
            "sub_counts": s_counts, "sub_id": s_id, "sub_time": s_time,
            "user": (np.asarray(u_owner, dtype=np.int64), u_key, np.asarray(u_value, dtype=np.float64)),
            "rank_user": (np.asarray(r_owner, dtype=np.int64), r_key, np.asarray(r_value, dtype=np.float64)),
            "last_task": np.where(n_tasks > 0, last, -1),
            "comm": {"keep": keep, "from": src["oid"], "to": dst["oid"], "to_home": dst["home"],
                     "messages": msgs, "bytes": nbytes}}


def explain(items: list, j: int, prefix: str = "phases") -> str:
    """The models' one line for the phase ``items[j]`` that failed a column check (``phases.j.key.path: ...``)."""
    from pydantic import ValidationError

    from hermes.errors import validation_message

    try:
        PhaseDoc.model_validate(items[j])
    except ValidationError as err:
        msg = validation_message(err, root="")
        return f"{prefix}.{j}{'' if msg.startswith(':') else '.'}{msg}"
    return f"{prefix}.{j}: not a phase of an LBDatafile"
