"""Checkpoints of a distributed run at phase boundaries, and reading them back to resume — data only.

A checkpoint is every rank's whole state object — for the driver, its ``RunState``: the rank's cells and
fields, clock, capacity schedule, balancer memory (with any random generator it keeps), the adapter's
accounts and, on rank 0, the records so far — written as data, never as a pickle. Reading one back never
runs code from the file: no pickle, no class named by the file outside hermes, no ``__init__`` of a
record. The state is walked whole, rather than a list of chosen fields, so state that a new step adds to
the run is saved without touching this module, as long as it is data:

* ``None``, ``bool``, ``int``, ``float`` (non-finite ones by their bytes), ``str``, ``bytes``, lists,
  tuples, dicts (keys: numbers, strings, bytes, tuples of those), sets — as JSON;
* numpy arrays (not of dtype object) as ``.npy`` entries of the file, numpy scalars by dtype and bytes;
* ``np.random.Generator`` by its bit generator's name, ``.state`` and seed sequence (the same stream after
  reading, ``spawn`` included);
* dataclass instances of classes defined in hermes (module ``hermes.*``), by module and qualified name
  and their attributes — rebuilt by ``object.__new__`` and ``object.__setattr__``, without calling
  ``__init__``; ``functools.cached_property`` caches are left out (recomputed from the fields);
* pydantic models of hermes (the scenario) by their JSON form, validated again on reading (that reads no
  file: the capacity and schedule files are read by :func:`hermes.scenario.parse_scenario`, not by the
  model), checked on writing to read back equal;
* a few other classes of hermes by an explicit allow-list (:func:`_allow_list`): the bookkeeping, the
  clocks, the adapter, by their attributes;
* the objects given as ``refs`` — the communicator, the progress printer, registry entries holding
  functions — by name (``{"ref": "comm"}``), supplied anew on reading.

Anything else (a plug-in's open file or function in the balancer's memory) stops the checkpoint with one
line naming where it is in the state. Objects reached twice (the adapter's clock is the run's clock) are
written once and read back as one object.

Layout, in the run directory::

    checkpoint/manifest.json              format, phase, ranks, hermes version, SHA-256 of scenario.yaml,
                                          name, size and SHA-256 of every rank's file
    checkpoint/phase-KKKK/rank-RRRRR.npz  per rank: entry ``tree`` (uint8: the UTF-8 JSON document with the
                                          header — phase, rank, ranks, version —, the scenario and the
                                          state tree) and entries ``a0``, ``a1``, … (the arrays it names)

A rank's file is a standard ``.npz`` (``np.load(path, allow_pickle=False)`` reads it), written
deterministically (stored entries, fixed time stamps): reading it checks that it is byte for byte the file
this hermes writes for what it holds, so any damage — including one the zip format ignores — is found
(:func:`verify_checkpoint`). Every file is written atomically; the manifest is replaced only once every
rank's file of the new phase is on disk, and older phase directories are removed after it. A run killed
at any moment therefore leaves a manifest naming a complete set of files. The run directory must be on a
file system every rank sees.

Resuming needs the hermes version that wrote the checkpoint, the same number of ranks and the run's
``scenario.yaml`` as it was: the run goes on with the scenario it started with, so an edited copy is
refused rather than ignored, and every rank's file must hold that scenario (but ``output.pictures``),
compared before it is validated; the checkpoint's directories and files must be the run directory's own (a
symlink is refused, as writing the next checkpoint would refuse it) and the checkpoint directory writable.
``hermes resume`` verifies all of this before ``mpiexec`` starts
(:func:`verify_checkpoint`), and every rank checks again under ``mpiexec`` (:func:`load_state`). The
checksums detect damage, not tampering; a tampered checkpoint can change the run's data but not run code
beyond what its scenario.yaml shows, as any scenario does (a plug-in balancer ``balancer.algorithm:
pkg.module:Name`` is imported).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hermes.claims import confirm, subdir
from hermes.runtime.comm import Bookkeeping, agree
from hermes.errors import HermesError, OutputError, validation_message
from hermes.files import read_summary, reason, write_atomic, write_json
from hermes.lifecycle.codec import MAX_DEPTH, Bad, Decoder, Encoder, Unsaveable, encode_file, unpack
from hermes.loaders import load_json, parse_json, parse_yaml, read_bytes
from hermes.scenario import MAX_PHASES, MAX_PROCESSORS
from hermes.version import __version__

__all__ = ["CHECKPOINT", "FORMAT", "Manifest", "CheckpointError", "read_manifest", "verify_checkpoint",
           "save_state", "load_state"]

#: the checkpoint directory inside a run directory
CHECKPOINT = "checkpoint"
#: the format of the manifest and of the rank files (an earlier hermes pickled the states)
FORMAT = "hermes-checkpoint-npz/1"
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: the header entries of every rank file (save_state's ``keep`` adds numbers)
_HEAD = ("phase", "rank", "ranks", "hermes")


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
    #: SHA-256 of the run directory's scenario.yaml when the run started
    scenario_sha256: str = ""

    def path(self, rank: int) -> Path:
        return self.directory / self.files[rank]["name"]


def _phase_dir(run_dir: Path, phase: int) -> Path:
    return run_dir / CHECKPOINT / f"phase-{phase:04d}"


def _rank_name(rank: int) -> str:
    return f"rank-{rank:05d}.npz"


def _why(err: BaseException) -> str:
    """One line saying why a document could not be read back."""
    if isinstance(err, ValidationError):
        return validation_message(err, root="scenario")
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def _read_rank(man: Manifest, rank: int, refs: Callable[[Any], dict[str, Any]] | None,
               scenario: Any) -> tuple[Any, dict]:
    """Rank ``rank``'s file: present, its size and checksum the manifest's, exactly a file hermes writes, its
    header the manifest's, its scenario the run's (``scenario``: scenario.yaml's data, compared before the
    scenario is validated, which may import a plug-in balancer it names), its tree read back (with
    placeholders for the references if ``refs`` is None)."""
    entry, path = man.files[rank], man.path(rank)
    _own(path, directory=False)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CheckpointError(f"resume: {path} is missing (the checkpoint of phase {man.phase} has "
                              f"{man.ranks} files)") from None
    except OSError as err:
        raise CheckpointError(f"resume: cannot read {path} ({err.strerror or err})") from None
    if size != entry["bytes"]:
        raise CheckpointError(f"resume: {path} is damaged ({size} bytes, the manifest says {entry['bytes']})")
    data = read_bytes(path, "resume", max_bytes=entry["bytes"], error=CheckpointError)
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(f"resume: {path} is damaged (its checksum differs from the manifest's)")
    try:
        text, arrays = unpack(data)
    except Bad as err:
        raise CheckpointError(f"resume: {path} is damaged ({err})") from None
    doc = parse_json(text, f"resume: {path}", error=CheckpointError, max_depth=MAX_DEPTH)
    head = doc.get("header") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or set(doc) != {"format", "header", "scenario", "state"} or \
            doc["format"] != FORMAT or not isinstance(head, dict):
        raise CheckpointError(f"resume: {path} is not a checkpoint file of this hermes")
    if [head.get(k) for k in ("phase", "rank", "ranks", "hermes")] != [man.phase, rank, man.ranks, __version__] \
            or any(type(head.get(k)) is not int for k in ("phase", "rank", "ranks")):
        raise CheckpointError(f"resume: {path} does not belong to the manifest's phase {man.phase} "
                              f"(rank {rank} of {man.ranks})")
    if any(type(v) not in (int, float) or not math.isfinite(v) for k, v in head.items() if k not in _HEAD):
        raise CheckpointError(f"resume: {path} is damaged (its header holds a value that is not a number)")
    if type(doc["scenario"]) is not dict or _comparable(doc["scenario"].get("json")) != scenario:
        raise CheckpointError(f"resume: {path} holds another scenario than the run directory's scenario.yaml "
                              f"(start a new run)")
    dec = Decoder(arrays, None)
    try:
        head = {**head, "scenario": dec(doc["scenario"])}
        if refs is not None:
            dec.refs = refs(head["scenario"])
        state = dec(doc["state"])
    except Bad as err:
        raise CheckpointError(f"resume: {path} is damaged (it holds {err})") from None
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy and pydantic refusing crafted values: one line
        raise CheckpointError(f"resume: {path} cannot be read back ({_why(err)})") from None
    if unused := sorted(set(arrays) - dec.used):
        raise CheckpointError(f"resume: {path} is damaged (entry {unused[0]} belongs to nothing)")
    return state, head


# -- the manifest ----------------------------------------------------------------------------------------------
def _int(doc: dict, key: str, low: int, high: int | None, where: str) -> int:
    v = doc.get(key)
    if type(v) is not int or v < low or (high is not None and v > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise CheckpointError(f"resume: {where}: {key} must be a whole number {bound}, got {json.dumps(v)[:40]}")
    return v


def read_manifest(run_dir: str | Path) -> Manifest:
    """The run directory's checkpoint manifest, strictly validated (serial).

    Raises
    ------
    CheckpointError
        One line: no run directory, no checkpoint, a damaged manifest, or one written by another hermes.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"resume: {run_dir} is not a run directory")
    path = run_dir / CHECKPOINT / "manifest.json"
    if not _own(run_dir / CHECKPOINT, directory=True) or not _own(path, directory=False):
        if (summary := read_summary(run_dir)) is not None and summary.get("complete", True):
            raise CheckpointError(f"resume: {run_dir} holds a finished run (nothing to resume)")
        raise CheckpointError(f"resume: {run_dir} holds no checkpoint (run with output.checkpoint_every: K "
                              f"to write them)")
    doc = load_json(path, "resume", error=CheckpointError, max_bytes=64 * 2**20)
    if not isinstance(doc, dict) or not isinstance(doc.get("hermes"), str):
        raise CheckpointError(f"resume: {path} is not a hermes checkpoint manifest")
    if doc["hermes"] != __version__:
        raise CheckpointError(f"resume: the checkpoint was written by hermes {doc['hermes'][:40]}, this is hermes "
                              f"{__version__} (resume with the version that wrote it)")
    if doc.get("format") != FORMAT:
        raise CheckpointError(f"resume: {path} is not a checkpoint manifest of this hermes (format "
                              f"{json.dumps(doc.get('format'))[:40]}, expected {FORMAT!r}; an earlier hermes "
                              f"pickled its checkpoints, which this one does not read: start a new run)")
    keys = {"format", "hermes", "phase", "ranks", "scenario_sha256", "files"}
    if set(doc) != keys:
        raise CheckpointError(f"resume: {path}: the keys must be {', '.join(sorted(keys))}")
    phase = _int(doc, "phase", 1, MAX_PHASES, str(path))
    ranks = _int(doc, "ranks", 1, MAX_PROCESSORS, str(path))
    if type(doc["scenario_sha256"]) is not str or not _SHA256.fullmatch(doc["scenario_sha256"]):
        raise CheckpointError(f"resume: {path}: scenario_sha256 must be 64 hexadecimal digits")
    files = doc["files"]
    if type(files) is not list or len(files) != ranks:
        raise CheckpointError(f"resume: {path}: files must list {ranks} files (one per rank), got "
                              f"{len(files) if type(files) is list else json.dumps(files)[:40]}")
    for r, f in enumerate(files):
        where = f"{path}: files[{r}]"
        if type(f) is not dict or set(f) != {"name", "bytes", "sha256"}:
            raise CheckpointError(f"resume: {where} must have exactly name, bytes and sha256")
        if f["name"] != _rank_name(r):
            raise CheckpointError(f"resume: {where}: name must be {_rank_name(r)!r}, got "
                                  f"{json.dumps(f['name'])[:60]}")
        _int(f, "bytes", 0, None, where)
        if type(f["sha256"]) is not str or not _SHA256.fullmatch(f["sha256"]):
            raise CheckpointError(f"resume: {where}: sha256 must be 64 hexadecimal digits")
    _own(_phase_dir(run_dir, phase), directory=True)
    return Manifest(phase, ranks, __version__, files, _phase_dir(run_dir, phase), doc["scenario_sha256"])


def _own(path: Path, *, directory: bool) -> bool:
    """Whether ``path``, a part of a checkpoint, exists — refused in one line if it is a symlink (a checkpoint is
    read and written only inside the run directory: :func:`hermes.claims.subdir` would refuse it at the next
    checkpoint, after the job has started) or not a directory (``directory``) or not a regular file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    except OSError as err:
        raise CheckpointError(f"resume: cannot read {path} ({err.strerror or type(err).__name__})") from None
    if stat.S_ISLNK(st.st_mode):
        raise CheckpointError(f"resume: {path} is a symlink: hermes reads and writes a checkpoint only in "
                              f"directories and files of the run's own (move the link away)")
    if directory and not stat.S_ISDIR(st.st_mode):
        raise CheckpointError(f"resume: {path} is not a directory")
    if not directory and not stat.S_ISREG(st.st_mode):
        raise CheckpointError(f"resume: {path} is not a regular file")
    return True


def _comparable(scenario: Any) -> Any:
    """A scenario's data as a checkpoint and scenario.yaml must agree on it: all but ``output.pictures``
    (which ``hermes resume --no-pictures`` changes)."""
    if not isinstance(scenario, dict) or not isinstance(scenario.get("output"), dict):
        return scenario
    return {**scenario, "output": {k: v for k, v in scenario["output"].items() if k != "pictures"}}


def _check_scenario(run_dir: Path, man: Manifest) -> Any:
    """The run directory's scenario.yaml is the one the checkpoint's run started with; its data (to compare
    with the scenario each rank's file holds)."""
    path = run_dir / "scenario.yaml"
    if not path.is_file():
        raise CheckpointError(f"resume: {path} is missing (the run's scenario: restore it, or start a new run)")
    data = read_bytes(path, "resume", error=CheckpointError)
    if hashlib.sha256(data).hexdigest() != man.scenario_sha256:
        raise CheckpointError(f"resume: {path} was edited after the run started (a resumed run goes on with the "
                              f"scenario it started with: restore the file, or start a new run with the edited "
                              f"scenario)")
    # the text hermes wrote (its checksum says so, but a crafted manifest could say it of any text): read back
    # with the loaders' limits, the inverse of hermes' dump_yaml
    return _comparable(parse_yaml(data.decode("utf-8", "replace"), f"resume: {path}", error=CheckpointError))


def verify_checkpoint(run_dir: str | Path) -> Manifest:
    """Check the run directory's last checkpoint completely before a job reads it (serial): the manifest,
    scenario.yaml unchanged, every rank's file present, of the manifest's size and checksum, exactly a file
    hermes writes, of the manifest's phase and rank, holding the run's scenario, its state readable
    (references left unresolved).

    Raises
    ------
    CheckpointError
        The first problem, in one line ``resume: ...``.
    """
    man = read_manifest(run_dir)
    scenario = _check_scenario(Path(run_dir), man)
    for rank in range(man.ranks):
        _read_rank(man, rank, None, scenario)
    _writable(Path(run_dir))
    return man


def _writable(run_dir: Path) -> None:
    """The checkpoint directory takes the resumed run's next checkpoints (a file made and removed in it)."""
    from hermes.claims import _probe

    _probe(run_dir / CHECKPOINT, "resume")


# -- writing and reading (collective) --------------------------------------------------------------------------
def save_state(comm, state: Any, *, phase: int, run_dir: str | Path, scenario: Any, refs: dict[str, Any],
               keep: dict[str, Any] | None = None, scenario_sha256: str | None = None) -> Manifest:
    """Save every rank's ``state`` after ``phase`` (collective).

    Parameters
    ----------
    comm
        The run's communicator.
    state
        This rank's state object, written whole (module docstring: what it may hold).
    phase
        The phase just finished.
    run_dir
        The run directory (the same path on every rank).
    scenario
        The run's scenario, stored before the state so that :func:`load_state` can rebuild the references.
    refs
        Objects written as references by name (the communicator, callables, registry entries).
    keep
        More header entries (numbers), returned by :func:`load_state`.
    scenario_sha256
        Rank 0: the SHA-256 of the run directory's scenario.yaml as the run wrote it (None: of the file as it
        is now).

    Raises
    ------
    CheckpointError
        On every rank if any rank could not save or write (one line).
    """
    run_dir = Path(run_dir)
    rank, size = comm.Get_rank(), comm.Get_size()
    where = _phase_dir(run_dir, phase)
    # the path still names the directory the run locked: no rank writes into another one made at its name
    agree(comm, lambda: None if rank else confirm(run_dir))
    header = {"phase": phase, "rank": rank, "ranks": size, "hermes": __version__, **(keep or {})}
    entry = agree(comm, lambda: _write_rank_file(run_dir, where, rank, _rank_file(header, scenario, state, refs)))
    files = Bookkeeping(comm).gather(entry)
    # the checkpoint is complete on every rank's return
    sha = agree(comm, lambda: None if rank else _publish(run_dir, where, phase, size, files, scenario_sha256))
    return Manifest(phase, size, __version__, files or [], where, sha or "")


def _rank_file(header: dict[str, Any], scenario: Any, state: Any, refs: dict[str, Any]) -> bytes:
    """A rank's checkpoint file: its ``header``, then the scenario and the state encoded (in this order: the
    state's objects are numbered after the scenario's)."""
    enc = Encoder(refs)
    try:
        doc = {"format": FORMAT, "header": header, "scenario": enc(scenario, "scenario"),
               "state": enc(state, "state")}
        return encode_file(doc, enc.arrays)
    except Unsaveable as err:
        raise CheckpointError(f"checkpoint: the state of rank {header['rank']} cannot be saved: {err}") from None


def _write_rank_file(run_dir: Path, where: Path, rank: int, data: bytes) -> dict[str, Any]:
    """Write a rank's file into the phase's directory ``where`` (atomically); its manifest entry."""
    name = _rank_name(rank)
    try:
        subdir(run_dir, CHECKPOINT, where.name)  # real directories of the run's own, never a symlink
        write_atomic(where / name, data)
    except (OSError, OutputError) as err:
        raise CheckpointError(f"checkpoint: cannot write {where / name} ({reason(err)})") from None
    return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _publish(run_dir: Path, where: Path, phase: int, size: int, files: list[dict[str, Any]],
             scenario_sha256: str | None) -> str:
    """Rank 0, once every rank's file is written: the manifest of the checkpoint of ``phase`` on ``size`` ranks
    in ``where`` (the SHA-256 of scenario.yaml: ``scenario_sha256``, else of the file as it is now), then the
    older phases' directories removed. Returns the SHA-256."""
    sha = scenario_sha256
    if sha is None:
        sha = hashlib.sha256(read_bytes(run_dir / "scenario.yaml", "checkpoint", error=CheckpointError)).hexdigest()
    try:
        write_json(run_dir / CHECKPOINT / "manifest.json",
                   {"format": FORMAT, "hermes": __version__, "phase": phase, "ranks": size,
                    "scenario_sha256": sha, "files": files})
        for old in subdir(run_dir, CHECKPOINT).glob("phase-*"):
            if old.is_dir() and not old.is_symlink() and old != where:
                shutil.rmtree(old, ignore_errors=True)
        return sha
    except (OSError, OutputError) as err:
        raise CheckpointError(f"checkpoint: cannot write the manifest in {run_dir} ({reason(err)})") from None


def load_state(comm, run_dir: str | Path, refs: Callable[[Any], dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """This rank's state from the run directory's last checkpoint (collective): the checks of
    :func:`verify_checkpoint`, each rank reading its own file.

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
        On every rank (one line): no checkpoint, another number of ranks, an edited scenario.yaml, a damaged
        or missing file.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    man = agree(comm, read_manifest, run_dir)
    if man.ranks != size:
        raise CheckpointError(f"resume: the checkpoint holds {man.ranks} ranks, the job has {size} (run "
                              f"'hermes resume {run_dir}' without mpiexec, or mpiexec -n {man.ranks})")
    scenario = agree(comm, _check_scenario, Path(run_dir), man)
    agree(comm, lambda: None if rank else _writable(Path(run_dir)))
    return agree(comm, _read_rank, man, rank, refs, scenario)
