"""Checkpoints of a distributed run at phase boundaries, and reading them back to resume.

A checkpoint is every rank's whole state object pickled — for the driver, its ``RunState``: the rank's
cells and fields, clock, capacity schedule, balancer memory (with any random generator it keeps), the
adapter's accounts and, on rank 0, the records so far. Pickling the object whole, rather than a list of
chosen fields, keeps state that a new step adds to the run in the checkpoint without touching this module.
What cannot or must not be pickled — the communicator, the progress printer, registry entries holding
closures — is written as a named reference (:meth:`pickle.Pickler.persistent_id`) and supplied anew on
reading.

Layout, in the run directory::

    checkpoint/manifest.json              phase, ranks, hermes version, size and SHA-256 of every file
    checkpoint/phase-KKKK/rank-RRRRR.pkl  per rank: a header (phase, rank, ranks, version, scenario), the state

Every file is written atomically; the manifest is replaced only once every rank's file of the new phase
is on disk, and older phase directories are removed after it. A run killed at any moment therefore leaves
a manifest naming a complete set of files. The run directory must be on a file system every rank sees.

A checkpoint holds pickles: resume only run directories you trust (the checksums detect damage, not
tampering). Resuming needs the hermes version that wrote the checkpoint and the same number of ranks.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hermes.comm import Bookkeeping, agree
from hermes.errors import HermesError
from hermes.results import read_summary, write_atomic, write_json
from hermes.version import __version__

__all__ = ["CHECKPOINT", "Manifest", "CheckpointError", "read_manifest", "save_state", "load_state"]

#: the checkpoint directory inside a run directory
CHECKPOINT = "checkpoint"


class CheckpointError(HermesError):
    """A checkpoint cannot be written, or is missing, damaged or not resumable by this hermes."""


@dataclass(frozen=True)
class Manifest:
    """What ``checkpoint/manifest.json`` says: the phase saved last and the files of that phase."""

    phase: int
    ranks: int
    hermes: str
    files: list[dict[str, Any]]
    directory: Path

    def path(self, rank: int) -> Path:
        return self.directory / self.files[rank]["name"]


def _phase_dir(run_dir: Path, phase: int) -> Path:
    return run_dir / CHECKPOINT / f"phase-{phase:04d}"


def read_manifest(run_dir: str | Path) -> Manifest:
    """The run directory's checkpoint manifest (serial).

    Raises
    ------
    CheckpointError
        One line: no run directory, no checkpoint, a damaged manifest, or one written by another hermes.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"--resume: {run_dir} is not a run directory")
    path = run_dir / CHECKPOINT / "manifest.json"
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        if (summary := read_summary(run_dir)) is not None and summary.get("complete", True):
            raise CheckpointError(f"--resume: {run_dir} holds a finished run (nothing to resume)") from None
        raise CheckpointError(f"--resume: {run_dir} holds no checkpoint (run with output.checkpoint_every: K "
                              f"to write them)") from None
    except (OSError, ValueError) as err:
        raise CheckpointError(f"--resume: cannot read {path} ({type(err).__name__})") from None
    try:
        man = Manifest(int(doc["phase"]), int(doc["ranks"]), str(doc["hermes"]), list(doc["files"]),
                       _phase_dir(run_dir, int(doc["phase"])))
        if len(man.files) != man.ranks or not all(isinstance(f, dict) and {"name", "sha256"} <= set(f)
                                                  for f in man.files):
            raise ValueError
    except (KeyError, TypeError, ValueError):
        raise CheckpointError(f"--resume: {path} is not a hermes checkpoint manifest") from None
    if man.hermes != __version__:
        raise CheckpointError(f"--resume: the checkpoint was written by hermes {man.hermes}, this is hermes "
                              f"{__version__} (resume with the version that wrote it)")
    return man


class _Pickler(pickle.Pickler):
    """Writes the objects of ``refs`` as references by name (by identity, not by value)."""

    def __init__(self, fh, refs: dict[str, Any]):
        super().__init__(fh, protocol=pickle.HIGHEST_PROTOCOL)
        self._names = {id(obj): name for name, obj in refs.items()}

    def persistent_id(self, obj):
        return self._names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, fh, refs: dict[str, Any]):
        super().__init__(fh)
        self._refs = refs

    def persistent_load(self, pid):
        try:
            return self._refs[pid]
        except (KeyError, TypeError):
            raise pickle.UnpicklingError(f"unknown reference {pid!r}") from None


def save_state(comm, state: Any, *, phase: int, run_dir: str | Path, scenario: Any, refs: dict[str, Any],
         keep: dict[str, Any] | None = None) -> Manifest:
    """Save every rank's ``state`` after ``phase`` (collective).

    Parameters
    ----------
    comm
        The run's communicator.
    state
        This rank's state object, pickled whole.
    phase
        The phase just finished.
    run_dir
        The run directory (the same path on every rank).
    scenario
        The run's scenario, stored in the header so that :func:`load_state` can rebuild the references first.
    refs
        Objects written as references by name (the communicator, callables, registry entries).
    keep
        More header entries (plain values), returned by :func:`load_state`.

    Raises
    ------
    CheckpointError
        On every rank if any rank could not write (one line).
    """
    run_dir = Path(run_dir)
    rank, size = comm.Get_rank(), comm.Get_size()
    where = _phase_dir(run_dir, phase)

    def write_mine() -> dict[str, Any]:
        buf = io.BytesIO()
        header = {"phase": phase, "rank": rank, "ranks": size, "hermes": __version__, "scenario": scenario,
                  **(keep or {})}
        try:
            pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(header)
            _Pickler(buf, refs).dump(state)
        except (pickle.PicklingError, TypeError, AttributeError) as err:
            raise CheckpointError(f"checkpoint: the state of rank {rank} cannot be saved ({err})") from None
        data = buf.getvalue()
        name = f"rank-{rank:05d}.pkl"
        try:
            write_atomic(where / name, data)
        except OSError as err:
            raise CheckpointError(f"checkpoint: cannot write {where / name} ({err.strerror or err})") from None
        return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    entry = agree(comm, write_mine)
    files = Bookkeeping(comm).gather(entry)
    man = Manifest(phase, size, __version__, files or [], where)

    def publish() -> None:
        if rank != 0:
            return
        try:
            write_json(run_dir / CHECKPOINT / "manifest.json",
                       {"phase": phase, "ranks": size, "hermes": __version__, "files": files})
            for old in (run_dir / CHECKPOINT).glob("phase-*"):
                if old.is_dir() and old != where:
                    shutil.rmtree(old, ignore_errors=True)
        except OSError as err:
            raise CheckpointError(f"checkpoint: cannot write the manifest in {run_dir} ({err.strerror or err})") \
                from None

    agree(comm, publish)  # the checkpoint is complete on every rank's return
    return man


def load_state(comm, run_dir: str | Path, refs: Callable[[Any], dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """This rank's state from the run directory's last checkpoint (collective).

    Parameters
    ----------
    refs
        Given the stored scenario, the objects the references by name stand for (the same names as in
        :func:`save_state`).

    Returns
    -------
    (state, header)
        The header has ``phase``, ``rank``, ``ranks``, ``hermes``, ``scenario`` and what :func:`save_state` kept.

    Raises
    ------
    CheckpointError
        On every rank (one line): no checkpoint, another number of ranks, a damaged or missing file.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    man = agree(comm, read_manifest, run_dir)
    if man.ranks != size:
        raise CheckpointError(f"--resume: the checkpoint holds {man.ranks} ranks, the job has {size} (run "
                              f"'hermes run --resume {run_dir}' without mpiexec, or mpiexec -n {man.ranks})")

    def read_mine():
        path = man.path(rank)
        try:
            data = path.read_bytes()
        except OSError as err:
            raise CheckpointError(f"--resume: cannot read {path} ({err.strerror or err})") from None
        if hashlib.sha256(data).hexdigest() != man.files[rank]["sha256"]:
            raise CheckpointError(f"--resume: {path} is damaged (its checksum differs from the manifest's)")
        fh = io.BytesIO(data)
        try:
            header = pickle.Unpickler(fh).load()
            state = _Unpickler(fh, refs(header["scenario"])).load()
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, KeyError, TypeError) as err:
            raise CheckpointError(f"--resume: {path} cannot be read back ({type(err).__name__}: {err})") from None
        if (header.get("phase"), header.get("rank"), header.get("ranks")) != (man.phase, rank, size):
            raise CheckpointError(f"--resume: {path} does not belong to the manifest's phase {man.phase}")
        return state, header

    return agree(comm, read_mine)
