"""Reading a run directory for pictures: every file checked before anything is drawn.

A run directory may come from elsewhere (a colleague's archive, a damaged disk, someone hostile). What
:func:`hermes.viz.plot_run` and :func:`hermes.viz.vtu.write_run_vtu` read goes through here, and a damaged file
is one line naming it (``cannot read RUN/partitions.npz: owner_002 holds rank ids up to 999999 for a run of 4
processors``) — never a traceback, and never work or memory sized by a number the file chose:

* ``summary.json`` through :func:`hermes.loaders.load_json` (size, nesting, strict JSON), then the fields the
  pictures use checked for type and range (:func:`check_summary`);
* ``.npz`` archives without pickle, each array's ``.npy`` header read before its data, so an array is refused
  for its dtype or its declared size before a byte of it is decompressed (:class:`NpzArchive`; at most
  :data:`MAX_NPZ_BYTES` read from one file);
* the arrays checked for dtype kind, shape and range: finite coordinates, CSR arrays that index what they
  claim (:func:`phase_geometry`), owners in ``[0, processors)`` (:func:`check_owner`), finite non-negative
  weights, bounded refinement levels (:func:`check_unit_array`);
* ``phases.csv`` (the capacities; optional) read within the size limit, a bad row dropping the capacities
  (:func:`read_capacities`).

The limits are far beyond any run hermes makes (:data:`MAX_PROCESSORS` and :data:`MAX_PHASES` are the
scenario's own, ``hermes.scenario``).
"""

from __future__ import annotations

import csv
import io
import logging
import math
import numbers
import os
import re
import stat
import struct
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.errors import HermesError

__all__ = ["MAX_PROCESSORS", "MAX_PHASES", "MAX_NPZ_BYTES", "MAX_NPZ_MEMBERS", "MAX_LEVEL", "COORD_MAX",
           "WEIGHT_MAX", "NUMBER_MAX", "NpzArchive", "Geometry", "read_summary", "check_summary",
           "phase_geometry", "recorded_phases", "phase_arrays", "check_owner", "check_unit_array", "csr_problem",
           "read_capacities", "one_line"]

log = logging.getLogger(__name__)

#: ranks of a run (``hermes.scenario.MAX_PROCESSORS``): ``processors`` and owner ids are bounded by it
MAX_PROCESSORS = 100_000
#: phases of a run (``hermes.scenario.MAX_PHASES``): phase numbers and the length of ``summary.phases``
MAX_PHASES = 100_000
#: bytes of arrays read from one ``.npz`` file (decompressed, as the ``.npy`` headers declare them)
MAX_NPZ_BYTES = 2 * 2**30
#: members of one ``.npz`` file (5 arrays per phase of a run of MAX_PHASES phases; parsing 10⁶ zip entries
#: takes ~6 s, and a 2 GB file of empty entries would hold 4·10⁷)
MAX_NPZ_MEMBERS = 1_000_000
#: refinement levels drawn (``level_XXX``): the level panel has one colour per level out of 256
MAX_LEVEL = 255
#: coordinates (``hermes.data.mesh.COORD_MAX``): a picture's extent and areas stay finite
COORD_MAX = 1e100
#: unit weights (``hermes.data.mesh.WEIGHT_MAX``): a rank's load, summed over 10⁸ units, stays finite
WEIGHT_MAX = 1e100
#: the numbers of ``summary.json`` drawn (times, imbalances): six stacked time parts stay finite
NUMBER_MAX = 1e300

#: ``NAME_XXX``: a per-phase array (3 to 6 digits; a phase above MAX_PHASES is not one)
_PHASE_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*?)_(\d{3,6})")
_CELLS = ("coords", "points", "cell_ptr", "cell_nodes", "cell_types")
#: the 3-D cells a run directory may record (``cell_types``, VTK ids) and their corner counts
_SOLID_CORNERS = {10: 4, 12: 8, 13: 6, 14: 5}


def one_line(err: BaseException) -> str:
    """An exception as one line: its type and its text with whitespace collapsed (at most 200 characters)."""
    text = " ".join(str(err).split())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _size(b: int) -> str:
    return f"{b / 2**30:.3g} GB" if b >= 2**30 else f"{b / 2**20:.3g} MB" if b >= 2**20 else f"{b} bytes"


def _shown(v: Any) -> str:
    """A JSON value as the message quotes it: a scalar (short), a container by kind."""
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


# -- summary.json ---------------------------------------------------------------------------------------------
#: the per-phase numbers the pictures draw (hermes.viz.timeline and the partition titles)
_PHASE_NUMBERS = ("time", "compute_time", "comm_time", "sync_time", "balance_time", "migrate_time", "adapt_time",
                  "imbalance_before", "imbalance_after", "edge_cut", "cells_moved", "cell_sends", "migrated_cells")
#: the per-phase quality numbers the partition titles fall back to (a summary written before ``cells_moved``)
_QUALITY_NUMBERS = ("migration_cells",)


def read_summary(path: str | Path) -> dict[str, Any]:
    """The run's ``summary.json`` (:func:`hermes.loaders.load_json`), checked by :func:`check_summary`.

    Raises
    ------
    HermesError
        One line: missing, too large, not JSON, nested too deep, or a field the pictures use is of the wrong
        type or out of range (``cannot read RUN/summary.json: processors must be ...``).
    """
    from hermes.loaders import load_json

    path = Path(path)
    if not path.is_file():
        raise HermesError(f"missing {path.name} in run directory {path.parent}")
    try:
        summary = load_json(path, str(path), error=HermesError)
    except HermesError as err:
        raise HermesError(f"cannot read {err}") from None
    check_summary(summary, f"cannot read {path}")
    return summary


def _number(v: Any, key: str, where: str) -> None:
    """``v`` is None or a finite number (not a boolean) of magnitude at most NUMBER_MAX."""
    if v is None:
        return
    ok = isinstance(v, numbers.Real) and not isinstance(v, bool)
    try:
        ok = ok and abs(float(v)) <= NUMBER_MAX
    except OverflowError:  # an integer beyond the floats
        ok = False
    if not ok:
        raise HermesError(f"{where}: {key} must be a number of magnitude at most {NUMBER_MAX:g}, got {_shown(v)}")


def _integer(v: Any, key: str, lo: int, hi: int, where: str) -> None:
    if not (isinstance(v, numbers.Integral) and not isinstance(v, bool) and lo <= v <= hi):
        raise HermesError(f"{where}: {key} must be an integer between {lo} and {hi}, got {_shown(v)}")


def check_summary(summary: Any, where: str = "summary") -> None:
    """Check the fields of a run summary that the pictures use (the others are not read).

    ``processors`` an integer in ``[1, MAX_PROCESSORS]``; ``scenario``, ``balancer``, ``clock`` strings;
    ``total_time``, ``final_imbalance`` numbers; ``phases`` a list of at most ``MAX_PHASES`` mappings whose
    ``phase`` is an integer in ``[0, MAX_PHASES]`` and whose drawn values (times, imbalances, edge cut, cells
    moved and cell sends — also ``migrated_cells`` and, in a ``quality`` mapping, ``migration_cells``, their
    deprecated aliases) are numbers. Every field may be absent or null.

    Raises
    ------
    HermesError
        ``f"{where}: <field> must be ..., got <value>"``.
    """
    if not isinstance(summary, Mapping):
        raise HermesError(f"{where}: expected a JSON object, got {_shown(summary)}")
    if summary.get("processors") is not None:
        _integer(summary["processors"], "processors", 1, MAX_PROCESSORS, where)
    for key in ("scenario", "balancer", "clock"):
        if summary.get(key) is not None and not isinstance(summary[key], str):
            raise HermesError(f"{where}: {key} must be a string, got {_shown(summary[key])}")
    for key in ("total_time", "final_imbalance"):
        _number(summary.get(key), key, where)
    phases = summary.get("phases")
    if phases is None:
        return
    if not isinstance(phases, list):
        raise HermesError(f"{where}: phases must be a list, got {_shown(phases)}")
    if len(phases) > MAX_PHASES:
        raise HermesError(f"{where}: phases lists {len(phases)} phases, more than the {MAX_PHASES} hermes draws")
    for i, entry in enumerate(phases):
        if not isinstance(entry, Mapping):
            raise HermesError(f"{where}: phases[{i}] must be a mapping, got {_shown(entry)}")
        if entry.get("phase") is not None:
            _integer(entry["phase"], f"phases[{i}].phase", 0, MAX_PHASES, where)
        for key in _PHASE_NUMBERS:
            _number(entry.get(key), f"phases[{i}].{key}", where)
        quality = entry.get("quality")
        if isinstance(quality, Mapping):
            for key in _QUALITY_NUMBERS:
                _number(quality.get(key), f"phases[{i}].quality.{key}", where)


# -- .npz archives --------------------------------------------------------------------------------------------
class NpzArchive:
    """The arrays of an ``.npz`` file, read on demand without pickle and within a byte budget.

    Only ``NAME.npy`` members are arrays (:attr:`names`). :meth:`get` reads a member's ``.npy`` header first
    and refuses a dtype that is not a plain number (boolean, integer, float) or a declared size beyond what is
    left of ``max_bytes``, so neither a forged header nor a zip bomb makes hermes allocate or decompress more.
    Use as a context manager (the zip file stays open between reads).

    Raises
    ------
    HermesError
        One line, ``cannot read PATH: ...``: missing, larger than ``max_bytes``, not a zip archive, or (from
        :meth:`get`) an array that cannot be read.
    """

    def __init__(self, path: str | Path, *, max_bytes: int = MAX_NPZ_BYTES):
        self.path = Path(path)
        if not self.path.is_file():
            raise HermesError(f"missing {self.path.name} in run directory {self.path.parent}")
        self._left = self._limit = max_bytes
        try:  # one open file for every check and the reads (a FIFO swapped in meanwhile does not block)
            self._fh = os.fdopen(os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb")
        except OSError as err:
            raise self.error(one_line(err)) from None
        try:
            info = os.fstat(self._fh.fileno())
            if not stat.S_ISREG(info.st_mode):
                raise self.error("not a regular file")
            if info.st_size > max_bytes:
                raise self.error(f"the file is {_size(info.st_size)}, more than the {_size(max_bytes)} hermes reads")
            entries = _zip_entries(self._fh)
            if entries is not None and entries > MAX_NPZ_MEMBERS:
                raise self.error(f"the archive lists {entries} members, more than the {MAX_NPZ_MEMBERS} hermes reads")
            self._zip = zipfile.ZipFile(self._fh)
            members = self._zip.namelist()
        except BaseException as err:
            self._fh.close()
            if isinstance(err, HermesError) or not isinstance(err, Exception):
                raise
            # BadZipFile, OSError, ValueError, ...: all mean "not a readable archive"
            raise self.error(one_line(err)) from None
        self.names = frozenset(m[:-4] for m in members if m.endswith(".npy"))

    def error(self, message: str) -> HermesError:
        """``cannot read PATH: message``."""
        return HermesError(f"cannot read {self.path}: {message}")

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __enter__(self) -> NpzArchive:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()
        self._fh.close()

    def get(self, name: str) -> NDArray | None:
        """The array ``name``, or None if the archive has none of that name."""
        if name not in self.names:
            return None
        fmt = np.lib.format
        try:
            with self._zip.open(name + ".npy") as fh:
                version = fmt.read_magic(fh)
                if version not in ((1, 0), (2, 0)):
                    raise self.error(f"{name}: .npy format version {version[0]}.{version[1]} (hermes reads 1.0 "
                                     "and 2.0)")
                header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = header(fh)
        except HermesError:
            raise
        except Exception as err:  # a damaged member: BadZipFile, zlib.error, EOFError, ValueError, ...
            raise self.error(f"{name}: {one_line(err)}") from None
        if dtype.kind not in "biuf" or dtype.names is not None or dtype.subdtype is not None:
            raise self.error(f"{name} holds {dtype} values (hermes reads booleans, integers and floats)")
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes > self._left:
            raise self.error(f"{name} declares {shape} values of {dtype} ({_size(nbytes)}): more than the "
                             f"{_size(self._limit)} hermes reads from one file")
        try:
            with self._zip.open(name + ".npy") as fh:
                array = fmt.read_array(fh, allow_pickle=False)
        except Exception as err:
            raise self.error(f"{name}: {one_line(err)}") from None
        self._left -= nbytes
        return array


def _zip_entries(fh) -> int | None:
    """The member count a zip file's end-of-central-directory record declares (ZIP64 too), read from the last
    64 kB before :mod:`zipfile` parses (and allocates) the whole directory; None if there is no such record
    (:mod:`zipfile` then refuses the file)."""
    size = fh.seek(0, 2)
    start = max(0, size - (22 + 65_535))  # the record and the longest comment
    fh.seek(start)
    tail = fh.read()
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        return None
    entries = struct.unpack("<H", tail[at + 10:at + 12])[0]
    if entries == 0xFFFF and at >= 20 and tail[at - 20:at - 16] == b"PK\x06\x07":  # ZIP64: its own record
        fh.seek(struct.unpack("<Q", tail[at - 12:at - 4])[0])
        record = fh.read(56)
        if len(record) == 56 and record[:4] == b"PK\x06\x06":
            entries = struct.unpack("<Q", record[32:40])[0]
    return entries


def recorded_phases(archive: NpzArchive, name: str = "owner") -> list[int]:
    """The phases ``k`` for which the archive holds ``NAME_XXX`` (``XXX`` = ``f"{k:03d}"``, k ≤ MAX_PHASES)."""
    out = []
    for key in archive.names:
        m = _PHASE_KEY.fullmatch(key)
        if m and m.group(1) == name and key == f"{name}_{int(m.group(2)):03d}" and int(m.group(2)) <= MAX_PHASES:
            out.append(int(m.group(2)))
    return sorted(out)


def phase_arrays(archive: NpzArchive) -> dict[int, list[str]]:
    """Every per-phase array ``NAME_XXX`` of the archive: ``{phase: [NAME, ...]}`` (canonical names only)."""
    out: dict[int, list[str]] = {}
    for key in sorted(archive.names):
        m = _PHASE_KEY.fullmatch(key)
        if m and key == f"{m.group(1)}_{int(m.group(2)):03d}" and int(m.group(2)) <= MAX_PHASES:
            out.setdefault(int(m.group(2)), []).append(m.group(1))
    return out


# -- checks of arrays -----------------------------------------------------------------------------------------
def _kind(archive: NpzArchive, key: str, a: NDArray, kinds: str) -> None:
    words = {"iu": "integers", "biu": "integers or booleans", "iuf": "numbers", "biuf": "numbers"}
    if a.dtype.kind not in kinds:
        raise archive.error(f"{key} holds {a.dtype} values, not {words[kinds]}")


def _shape(archive: NpzArchive, key: str, a: NDArray, shape: tuple[int, ...], what: str) -> None:
    if a.shape != shape:
        raise archive.error(f"{key} has shape {a.shape} for {what}")


def _finite(archive: NpzArchive, key: str, a: NDArray, bound: float, what: str) -> None:
    if a.size and not (np.isfinite(a).all() and float(np.abs(a).max()) <= bound):
        raise archive.error(f"{key} holds {what} that are not finite or exceed {bound:g} in magnitude")


def csr_problem(ptr: NDArray, idx: NDArray, rows: int, hi: int, *, min_row: int = 0,
                names: tuple[str, str] = ("ptr", "idx")) -> str | None:
    """What is wrong with the CSR pair (``ptr``, ``idx``), or None: ``ptr`` must be ``rows + 1`` integers
    non-decreasing (in steps of at least ``min_row``) from 0 to ``len(idx)``, ``idx`` integers in ``[0, hi)``.
    ``names`` name the two arrays in the message."""
    p, i = names
    if ptr.dtype.kind not in "iu" or idx.dtype.kind not in "iu":
        return f"{p} and {i} must hold integers, not {ptr.dtype} and {idx.dtype}"
    if ptr.shape != (rows + 1,):
        return f"{p} has shape {ptr.shape} for {rows} units (expected ({rows + 1},))"
    if idx.ndim != 1:
        return f"{i} has shape {idx.shape}, not a list of indices"
    # the range first: with every entry in [0, len(idx)] the differences cannot overflow
    if ptr[0] != 0 or ptr.min() < 0 or ptr.max() > idx.size or ptr[-1] != idx.size \
            or (ptr.size > 1 and np.diff(ptr.astype(np.int64)).min() < min_row):
        steps = f"in steps of {min_row} or more" if min_row else "non-decreasing"
        return f"{p} does not run from 0 to {idx.size} (the length of {i}) {steps}"
    if idx.size and (idx.min() < 0 or idx.max() >= hi):
        bad = int(idx.min()) if idx.min() < 0 else int(idx.max())
        return f"{i} holds index {bad} outside 0..{hi - 1}" if hi else f"{i} holds index {bad} into nothing"
    return None


def _csr(archive: NpzArchive, ptr_key: str, ptr: NDArray, idx_key: str, idx: NDArray, rows: int, hi: int,
         min_row: int = 0) -> None:
    problem = csr_problem(ptr, idx, rows, hi, min_row=min_row, names=(ptr_key, idx_key))
    if problem:
        raise archive.error(problem)


@dataclass(frozen=True)
class Geometry:
    """The checked geometry of one phase: ``coords`` (n, 2|3); ``points``/``cell_ptr``/``cell_nodes`` when the
    units are polygons; ``xadj``/``adjncy`` when the graph is recorded for these units."""

    coords: NDArray[np.float64]
    points: NDArray[np.float64] | None = None
    cell_ptr: NDArray[np.int64] | None = None
    cell_nodes: NDArray[np.int64] | None = None
    xadj: NDArray[np.int64] | None = None
    adjncy: NDArray[np.int64] | None = None
    cell_types: NDArray[np.uint8] | None = None  # VTK ids of 3-D cells (10, 12, 13, 14); None: polygons

    @property
    def n(self) -> int:
        return int(self.coords.shape[0])

    @property
    def has_cells(self) -> bool:
        return self.cell_ptr is not None


def phase_geometry(archive: NpzArchive, phase: int, cache: dict | None = None) -> Geometry:
    """The geometry of ``phase`` from ``geometry.npz``: its own ``NAME_XXX`` arrays where recorded, else the
    shared ones, checked (``cache``: one :class:`Geometry` per set of arrays, so phases sharing the mesh share
    the object and it is read and checked once).

    A phase with its own cells does not inherit the shared graph (``xadj``/``adjncy`` describe other units).
    Polygons are used when ``points``, ``cell_ptr`` and ``cell_nodes`` are all there.

    Raises
    ------
    HermesError
        ``cannot read RUN/geometry.npz: <array> ...``: no coordinates, a wrong dtype or shape, non-finite or
        huge coordinates, CSR arrays that do not index what they claim.
    """
    tag = f"_{phase:03d}"
    own = any(k + tag in archive for k in _CELLS)

    def key(name: str, inherit: bool = True) -> str | None:
        if name + tag in archive:
            return name + tag
        return name if inherit and name in archive else None

    keys = {k: key(k) for k in _CELLS}
    keys.update(xadj=key("xadj", not own), adjncy=key("adjncy", not own))
    memo = tuple(sorted((k, v) for k, v in keys.items() if v))
    if cache is not None and memo in cache:
        return cache[memo]
    if keys["coords"] is None:
        raise archive.error("no array 'coords'")
    coords = archive.get(keys["coords"])
    _kind(archive, keys["coords"], coords, "iuf")
    if coords.ndim != 2 or coords.shape[1] not in (2, 3) or coords.shape[0] == 0:
        raise archive.error(f"{keys['coords']} has shape {coords.shape}, not (units, 2) or (units, 3) with units "
                            "≥ 1")
    _finite(archive, keys["coords"], coords, COORD_MAX, "coordinates")
    n = coords.shape[0]
    out: dict[str, Any] = {"coords": coords.astype(np.float64, copy=False)}
    if all(keys[k] for k in ("points", "cell_ptr", "cell_nodes")):
        pk, ck, nk = keys["points"], keys["cell_ptr"], keys["cell_nodes"]
        pts, ptr, nodes = archive.get(pk), archive.get(ck), archive.get(nk)
        _kind(archive, pk, pts, "iuf")
        if pts.ndim != 2 or pts.shape[1] not in (2, 3):
            raise archive.error(f"{pk} has shape {pts.shape}, not (nodes, 2) or (nodes, 3)")
        _finite(archive, pk, pts, COORD_MAX, "coordinates")
        _csr(archive, ck, ptr, nk, nodes, n, pts.shape[0], min_row=3)
        out.update(points=pts.astype(np.float64, copy=False), cell_ptr=ptr.astype(np.int64),
                   cell_nodes=nodes.astype(np.int64))
        if keys["cell_types"]:
            tk = keys["cell_types"]
            types = archive.get(tk)
            _kind(archive, tk, types, "iu")
            _shape(archive, tk, types, (n,), f"{n} units")
            corners = np.zeros(256, dtype=np.int64)
            corners[list(_SOLID_CORNERS)] = list(_SOLID_CORNERS.values())
            if types.size and (types.min() < 0 or types.max() > 255 or pts.shape[1] != 3
                               or np.any(corners[np.clip(types, 0, 255)] != np.diff(out["cell_ptr"]))):
                raise archive.error(f"{tk} must give every cell a 3-D VTK type (tetra 10, hexahedron 12, wedge 13, "
                                    f"pyramid 14) matching its corner count, with 3-D points")
            out["cell_types"] = types.astype(np.uint8)
    if keys["xadj"] and keys["adjncy"]:
        xk, ak = keys["xadj"], keys["adjncy"]
        xadj, adjncy = archive.get(xk), archive.get(ak)
        _csr(archive, xk, xadj, ak, adjncy, n, n)
        out.update(xadj=xadj.astype(np.int64), adjncy=adjncy.astype(np.int64))
    geometry = Geometry(**out)
    if cache is not None:
        cache[memo] = geometry
    return geometry


def check_owner(archive: NpzArchive, key: str, n: int, processors: int | None) -> NDArray[np.int64]:
    """``owner_XXX``: ``n`` integer rank ids in ``[0, processors)`` (``[0, MAX_PROCESSORS)`` when the run's
    processor count is not known). Refused before anything is sized by a rank id."""
    owner = archive.get(key)
    if owner is None:
        raise archive.error(f"no array '{key}'")
    _kind(archive, key, owner, "iu")
    _shape(archive, key, owner, (n,), f"{n} units")
    if owner.size and owner.min() < 0:
        raise archive.error(f"{key} holds a negative rank id ({int(owner.min())})")
    top = int(owner.max()) if owner.size else -1
    if processors is not None and top >= processors:
        raise archive.error(f"{key} holds rank ids up to {top} for a run of {processors} "
                            f"processor{'s' if processors != 1 else ''}")
    if top >= MAX_PROCESSORS:
        raise archive.error(f"{key} holds rank ids up to {top}; hermes draws at most {MAX_PROCESSORS} ranks")
    return owner.astype(np.int64)


def check_unit_array(archive: NpzArchive, key: str, n: int, kind: str) -> NDArray | None:
    """An optional per-unit array of a phase, None if absent.

    ``kind``: ``weight`` (n numbers, finite, in [0, WEIGHT_MAX]), ``level`` (n integers in [0, MAX_LEVEL]),
    ``gid`` (n integers), ``migrated`` (n booleans or integers), ``field`` (numbers, shape (n,) or (n, k)).
    """
    a = archive.get(key)
    if a is None:
        return None
    kinds = {"weight": "iuf", "level": "iu", "gid": "iu", "migrated": "biu", "field": "biuf"}[kind]
    _kind(archive, key, a, kinds)
    if kind == "field":
        if a.ndim not in (1, 2) or a.shape[0] != n:
            raise archive.error(f"{key} has shape {a.shape} for {n} units")
        return a
    _shape(archive, key, a, (n,), f"{n} units")
    if kind == "weight":
        if a.size and not (np.isfinite(a).all() and a.min() >= 0 and float(a.max()) <= WEIGHT_MAX):
            raise archive.error(f"{key} holds weights that are negative, not finite or above {WEIGHT_MAX:g}")
        return a.astype(np.float64, copy=False)
    if kind == "level":
        if a.size and (a.min() < 0 or a.max() > MAX_LEVEL):
            raise archive.error(f"{key} holds refinement levels outside 0..{MAX_LEVEL}")
        return a.astype(np.int64)
    return a


# -- phases.csv -----------------------------------------------------------------------------------------------
def read_capacities(path: str | Path, nparts: int) -> dict[int, NDArray[np.float64]]:
    """The capacities of every phase from ``phases.csv``: ``{phase: (nparts,) array}``.

    The file is optional: absent, too large, unreadable or with a bad row (a rank outside ``[0, nparts)``, a
    capacity that is not a finite number ≥ 0, a phase not listing every rank) gives ``{}`` (the load panel then
    draws no fair loads; the reason is logged).
    """
    from hermes.loaders import MAX_DOCUMENT_BYTES, read_text

    path = Path(path)
    if not path.is_file():
        return {}
    per: dict[int, dict[int, float]] = {}
    try:
        text = read_text(path, str(path), max_bytes=MAX_DOCUMENT_BYTES, error=HermesError)
        for row in csv.DictReader(io.StringIO(text, newline="")):
            k, r, c = int(row["phase"]), int(row["rank"]), float(row["capacity"])
            if not (0 <= k <= MAX_PHASES and 0 <= r < nparts and math.isfinite(c) and c >= 0):
                raise ValueError(f"phase {k}, rank {r}, capacity {c}")
            per.setdefault(k, {})[r] = c
    except (HermesError, csv.Error, KeyError, ValueError, TypeError) as err:
        log.warning("%s: no fair loads drawn (%s)", path, one_line(err))
        return {}
    return {k: np.array([v[r] for r in range(nparts)]) for k, v in per.items() if len(v) == nparts}
