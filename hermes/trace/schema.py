"""The schema of vt's LBDatafile (LBAF's ``src/lbaf/imported/LBDatafile_schema.py``) as strict pydantic models:
what :mod:`hermes.trace.lbdatafile` validates every rank file against, so that a malformed file is one line naming
the file and the key path."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from hermes.bounds import BIG

__all__ = ["LBDatafileDoc", "PhaseDoc"]

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

    def ids(self) -> set[int]:
        out = set(self.list)
        for r in self.range:
            if len(r) != 2 or r[1] < r[0] or r[1] - r[0] > 10**7:
                raise ValueError(f"a phase range must be [first, last] with first ≤ last, got {r}")
            out.update(range(r[0], r[1] + 1))
        return out


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
