"""DARMA vt's LBDatafile: the per-rank JSON trace of a real application, read completely and written back.

A trace is one file per rank, ``<stem>.<rank>.json``, plain JSON or brotli-compressed JSON under the same name
(vt compresses by default; the two are told apart by content, not by name)::

    {"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r,
                                        "phases": {"count": 3, "skipped": {"list": [], "range": []},
                                                   "identical_to_previous": {"list": [2], "range": []}}},
     "phases": [{"id": 0,
                 "tasks": [{"entity": {"type": "object", "seq_id": 2, "collection_id": 0, "home": 1,
                                       "migratable": true, "index": [0, 2]},
                            "node": 1, "resource": "cpu", "time": 2.0,
                            "subphases": [{"id": 0, "time": 1.5}, {"id": 1, "time": 0.5}],
                            "user_defined": {"task_footprint_bytes": 1024.0, "shared_id": 4, ...}}, ...],
                 "communications": [{"type": "SendRecv", "from": {"type": "object", "seq_id": 2, ...},
                                     "to": {"type": "object", "id": 4325376012, ...},
                                     "messages": 25, "bytes": 8799.0}, ...]}, ...]}

What is read (every key of LBAF's schema, ``src/lbaf/imported/LBDatafile_schema.py``, written here as strict
pydantic models, so a malformed file is one line naming the file and the key path, never a traceback):

- every phase (or those asked: :func:`parse_phase_spec`), a phase listed in ``metadata.phases.
  identical_to_previous`` and absent from the file repeated from the one before, ``skipped`` ones left out;
- per task: the object id (the 64-bit ``id`` as vt encodes it, kept whole, else ``seq_id``: LBAF's rule;
  :func:`decode_vt_id` splits an encoded id into its home node and sequence number), its load
  (``time``), the rank whose file lists it, ``home``, ``migratable``, ``collection_id``, ``index``, the
  subphase times, and the numbers of ``user_defined`` (memory footprints, shared-block ids and sizes,
  whatever else the application recorded);
- every point-to-point communication between objects (``SendRecv`` with both endpoints of type ``object``, as
  LBAF's model takes them; an endpoint need not be a task of the phase), with messages and bytes, and the
  ranks of its endpoints. Broadcasts and the other kinds are checked, not kept.

The LBAF output key ``lb_iterations`` and ``attributes`` are checked and not kept. Files are bounded
(:data:`MAX_TRACE_BYTES` compressed and decompressed), so neither a large file nor a brotli bomb exhausts
the memory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from hermes.bounds import MAX_TRACE_KEYS, MAX_TRACE_PHASES, MAX_TRACE_RANKS
from hermes.errors import one_line, validation_message
from hermes.files import write_atomic
from hermes.loaders import parse_json, read_bytes
from hermes.progress import Progress, quiet
from hermes.trace.trace_phase import (FlatTrace, Trace, TraceError, TracePhase, ids_text, match_tasks, offsets,
                                 unique_sorted)
from hermes.trace.schema import ColumnError, LBDatafileDoc, check_iterations, explain

__all__ = ["read_trace", "write_trace", "parse_phase_spec", "trace_paths",
           "count_ranks", "find_trace", "check_new_trace", "decode_vt_id", "trace_summary", "format_trace_summary",
           "write_trace_summary", "MAX_TRACE_BYTES", "MEMORY_KEYS", "SUFFIXES"]

#: the largest rank file hermes reads, compressed or decompressed (a real application's are a few MB to a
#: few hundred)
MAX_TRACE_BYTES = 256 * 2**20
#: at most this many values per file (each costs Python tens of bytes)
MAX_TRACE_VALUES = 20_000_000
#: the ``user_defined`` keys of vt's memory model (what LBAF's memory constraint reads)
MEMORY_KEYS = ("task_footprint_bytes", "task_working_bytes", "task_serialized_bytes", "rank_working_bytes",
               "shared_id", "shared_bytes")


def decode_vt_id(oid: int) -> tuple[int, int, int]:
    """(control bits, home node, sequence id) of vt's bit-encoded object id: bits 0–1 the control (0 objgroup,
    1 bare handler, 2 non-migratable collection element, 3 migratable), bits 2–17 the home node, 18 and up the
    sequence id (vt's ``elm_id_bits``; LBAF does not decode ids). Example: 1572867 → (3, 0, 6)."""
    oid = int(oid)
    return oid & 0b11, (oid >> 2) & 0xFFFF, oid >> 18


def parse_phase_spec(spec: str | int | None) -> list[tuple[int, int]] | None:
    """A phase selection: ``None`` or ``all`` (every phase), ``K``, ``A-B`` (inclusive), or a comma list of
    those (``0,3-5,9``); as (first, last) ranges, None for all.

    Raises
    ------
    TraceError
        One line if the text is none of these.
    """
    if spec is None:
        return None
    if isinstance(spec, int) and not isinstance(spec, bool):
        return [(spec, spec)]
    text = str(spec).strip()
    if text.lower() == "all":
        return None
    out = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(-?\d{1,18})\s*(?:-\s*(-?\d{1,18})\s*)?", part)
        if not m:
            raise TraceError(f"--phase {one_line(text[:60])!r}: expected 'all', a phase id K, a range A-B or a comma "
                             f"list of those (e.g. 0,3-5)")
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if b < a:
            raise TraceError(f"--phase {text!r}: the range {a}-{b} is empty (write first-last)")
        out.append((a, b))
    return out


# -- reading --------------------------------------------------------------------------------------------------
#: the file suffixes of a trace's rank files hermes looks for, in this order (vt writes ``.json`` whether or not it
#: compresses; LBAF's ``file_suffix`` may name another)
SUFFIXES = ("json", "json.br", "br")


def trace_paths(stem: str | Path, n_ranks: int, suffix: str = "json") -> list[Path]:
    """``<stem>.0.<suffix>`` ... ``<stem>.<n−1>.<suffix>``."""
    return [Path(f"{stem}.{r}.{suffix}") for r in range(n_ranks)]


def find_trace(stem: str | Path) -> tuple[Path, int, str]:
    """(stem, number of ranks, suffix) of the trace ``stem``: rank files ``<stem>.<r>.<suffix>`` for r = 0..n−1
    without a gap, the suffix one of :data:`SUFFIXES`. The path of one rank file (``data.0.json``) names its
    trace too.

    Raises
    ------
    TraceError
        No ``<stem>.0.json`` (nor another suffix); or a gap (``<stem>.2.json`` missing while ``<stem>.3.json``
        exists).
    """
    stem = Path(stem)
    m = re.fullmatch(r"(.+)\.\d{1,9}\.(json|json\.br|br)", stem.name)
    if m and stem.is_file():  # a rank file's path: its trace
        stem = stem.with_name(m.group(1))
    try:
        parent = stem.parent if str(stem.parent) else Path(".")
        names = [q.name for q in parent.iterdir()]
    except (OSError, ValueError):  # no such directory, a stem too long to be a path
        names = []
    for suffix in SUFFIXES:
        pattern = re.compile(re.escape(stem.name) + r"\.(\d{1,9})\." + re.escape(suffix))
        found = sorted(int(m.group(1)) for name in names if (m := pattern.fullmatch(name)))
        if found:
            break
    if not found:
        _not_a_trace(stem, names)
    if not found or found[0] != 0:
        hint = f" (found {stem}.{found[0]}.{suffix})" if found else ""
        raise TraceError(f"no LBDatafile {stem}.0.json{hint}: give the stem of the per-rank files <stem>.<rank>.json")
    n = len(found)
    if found[-1] != n - 1:
        have = set(found)
        gap = next(r for r in range(n) if r not in have)
        raise TraceError(f"{stem}: rank file {stem}.{gap}.{suffix} is missing (files for {n} ranks up to rank "
                         f"{found[-1]}): a trace has one file per rank, 0 to n−1")
    return stem, n, suffix


#: what to do with a file format hermes cannot read as a trace, by suffix (the rest: the general advice)
UNREADABLE = {
    "vom": "LBAF's .vom object maps (rows of phase, object, time; no communications) are not a trace format hermes "
           "reads: give a vt LBDatafile JSON trace (an LBAF that reads .vom writes a phase as one with its VT data "
           "writer)",
}


def _not_a_trace(stem: Path, names: list[str]) -> None:
    """TraceError in one line if ``stem`` is a file, or the stem of per-rank files, of a format hermes does not
    read as a trace (LBAF's ``.vom``, a ``.csv``, ...): the format named, with what to do; else nothing."""
    suffix = None
    if stem.is_file():
        m = re.fullmatch(r".+?\.\d{1,9}\.([A-Za-z0-9.]+)", stem.name)
        suffix = (m.group(1) if m else stem.suffix.lstrip(".")) or None
    else:
        pattern = re.compile(re.escape(stem.name) + r"\.\d{1,9}\.([A-Za-z0-9.]+)")
        found = sorted({m.group(1) for name in names if (m := pattern.fullmatch(name))})
        suffix = found[0] if found else None
    if suffix is None or suffix.lower() in SUFFIXES:  # a JSON file of another name: the general advice
        return
    why = UNREADABLE.get(suffix.lower(), f"'.{suffix}' files are not a trace format hermes reads: give a vt "
                                         f"LBDatafile JSON trace")
    raise TraceError(f"{stem}: {why}, by the stem of its per-rank files <stem>.<rank>.json (plain or "
                     f"brotli-compressed; docs/TRACES.md)")


def count_ranks(stem: str | Path) -> int:
    """The number of rank files of the trace ``stem`` (:func:`find_trace`)."""
    return find_trace(stem)[1]


def _decompress(data: bytes, path: Path) -> bytes:
    """Brotli-decompressed ``data``, bounded by MAX_TRACE_BYTES (TraceError on a corrupt or truncated stream)."""
    import brotli

    d = brotli.Decompressor()
    chunks, total = [], 0
    try:
        out = d.process(data, output_buffer_limit=1 << 24)
        while True:
            chunks.append(out)
            total += len(out)
            if total > MAX_TRACE_BYTES:
                raise TraceError(f"{path}: decompresses to more than {MAX_TRACE_BYTES // 2**20} MiB, the largest rank "
                                 f"file hermes reads")
            if d.is_finished() or (d.can_accept_more_data() and not out):
                break
            out = d.process(b"", output_buffer_limit=1 << 24)
    except brotli.error:
        raise TraceError(f"{path}: neither JSON nor a valid brotli stream (corrupt or not an LBDatafile)") from None
    if not d.is_finished():
        raise TraceError(f"{path}: the brotli stream ends early (a truncated file)")
    return b"".join(chunks)


def _looks_like_json(data: bytes) -> bool:
    """Whether ``data`` may be JSON text: UTF-8 beginning with ``{`` or ``[``."""
    head = data.lstrip(b" \t\r\n")[:1]
    if head not in (b"{", b"["):
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _parse(data: bytes, path: Path) -> Any:
    """The JSON of a rank file, read by :func:`hermes.loaders.parse_json` (depth and values bounded: at most
    :data:`MAX_TRACE_VALUES` values; one line for text that is not UTF-8 or not JSON)."""
    return parse_json(data, str(path), error=TraceError, max_values=MAX_TRACE_VALUES)


def _load(path: Path) -> tuple[Any, bool]:
    """(the JSON of a rank file, whether it was brotli-compressed)."""
    if not path.exists():
        raise TraceError(f"missing LBDatafile {path}")
    data = read_bytes(path, "LBDatafile", max_bytes=MAX_TRACE_BYTES, error=TraceError)
    # plain or brotli-compressed: a brotli stream has no magic number and may begin with '{' or '[', so text
    # that does not parse as JSON is tried as brotli before its JSON error is reported
    if not _looks_like_json(data):
        if not data:
            raise TraceError(f"{path}: empty file")
        return _parse(_decompress(data, path), path), True
    try:
        return _parse(data, path), False
    except TraceError as err:
        try:
            unpacked = _decompress(data, path)
        except TraceError:
            raise err from None
        return _parse(unpacked, path), True


def _interval_union(points: list[int], ranges: list[list[int]]) -> list[tuple[int, int]]:
    """The ids of a ``metadata.phases`` set as sorted disjoint inclusive intervals."""
    out: list[tuple[int, int]] = []
    for a, b in sorted([(p, p) for p in points] + [(r[0], r[1]) for r in ranges]):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _marked(meta: Any, have: NDArray[np.int64], path: Path) -> NDArray[np.int64]:
    """The phases a file marks ``identical_to_previous`` and does not list nor skip, refused in one line beyond
    :data:`MAX_TRACE_PHASES` before they are counted one by one."""
    if meta is None:
        return np.zeros(0, dtype=np.int64)
    same = _interval_union(meta.identical_to_previous.list, meta.identical_to_previous.range)
    skip = _interval_union(meta.skipped.list, meta.skipped.range)
    left, j = [], 0  # same − skip, interval by interval
    for a, b in same:
        while j < len(skip) and skip[j][1] < a:
            j += 1
        k = j
        while a <= b and k < len(skip) and skip[k][0] <= b:
            if skip[k][0] > a:
                left.append((a, skip[k][0] - 1))
            a = max(a, skip[k][1] + 1)
            k += 1
        if a <= b:
            left.append((a, b))
    count = sum(b - a + 1 for a, b in left)
    if count - have.size > MAX_TRACE_PHASES:
        raise TraceError(f"{path}: metadata.phases marks {count:,} phases identical to the previous one, more "
                         f"than hermes reads (limit {MAX_TRACE_PHASES:,} phases)")
    if not left:
        return np.zeros(0, dtype=np.int64)
    starts = np.array([a for a, _ in left], dtype=np.int64)
    lengths = np.array([b - a + 1 for a, b in left], dtype=np.int64)
    ids = np.repeat(starts - offsets(lengths)[:-1], lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
    return ids[~np.isin(ids, have)]


@dataclass
class _Rank:
    """What one rank's file holds, checked, in columns (:func:`hermes.trace.schema.check_iterations`)."""

    path: Path
    rank: int
    listed: NDArray[np.int64]
    marked: NDArray[np.int64]
    alpha: float | None
    cols: dict[str, Any]
    compressed: bool


def _read_rank(path: Path, r: int) -> _Rank:
    doc, compressed = _load(path)
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: not an LBDatafile (the file must hold a JSON object)")
    kinds = {doc.get("type"), doc["metadata"].get("type") if isinstance(doc.get("metadata"), dict) else None}
    if "LBDatafile" not in kinds:
        raise TraceError(f"{path}: not an LBDatafile (type must be 'LBDatafile')")
    phases = doc.get("phases")
    if isinstance(phases, list) and len(phases) > MAX_TRACE_PHASES:
        raise TraceError(f"{path}: {len(phases):,} phases, more than hermes reads (limit {MAX_TRACE_PHASES:,})")
    try:  # everything but the phases, by the models
        head = LBDatafileDoc.model_validate({**doc, "phases": []} if isinstance(phases, list) else doc)
    except ValidationError as err:
        raise TraceError(f"{path}: {validation_message(err)}") from None
    meta_rank = head.metadata.rank if head.metadata is not None and head.metadata.rank is not None else r
    if meta_rank != r:
        raise TraceError(f"{path}: metadata says rank {meta_rank}, the file name rank {r}")
    try:
        cols = check_iterations(phases)
    except ColumnError as err:
        raise TraceError(f"{path}: {explain(phases, err.k)}") from None
    del doc, phases
    listed = cols["pid"]
    uniq, counts = np.unique(listed, return_counts=True)
    if np.any(counts > 1):
        raise TraceError(f"{path}: phase {int(uniq[np.argmax(counts > 1)])} is listed twice")
    marked = _marked(head.metadata.phases if head.metadata is not None else None, uniq, path)
    alpha = head.metadata.rank_alpha if head.metadata is not None else None
    return _Rank(path, r, listed, marked, alpha, cols, compressed)


def _selection(order: NDArray[np.int64], ranges: list[tuple[int, int]] | None) -> NDArray[np.bool_]:
    """Which phase ids of ``order`` the ranges select (all for None)."""
    if ranges is None:
        return np.ones(order.size, dtype=bool)
    a = np.array([x for x, _ in ranges], dtype=np.int64)
    b = np.array([y for _, y in ranges], dtype=np.int64)
    o = np.argsort(a, kind="stable")
    a, top = a[o], np.maximum.accumulate(b[o])
    j = np.searchsorted(a, order, side="right") - 1
    return (j >= 0) & (top[np.maximum(j, 0)] >= order)


def _keys(names: list[list[str]]) -> tuple[tuple[str, ...], list[NDArray[np.int64]]]:
    """(the sorted distinct keys, each list's keys as positions in it)."""
    keys = tuple(sorted({k for ks in names for k in ks}))
    code = {k: j for j, k in enumerate(keys)}
    return keys, [np.array([code[k] for k in ks], dtype=np.int64) for ks in names]


def read_trace(stem: str | Path, *, phases: str | int | list[tuple[int, int]] | None = None,
               n_ranks: int | None = None, progress: Progress | None = None) -> Trace:
    """Read the LBDatafile trace ``<stem>.<r>.json`` (every rank file, plain or brotli-compressed).

    Every file is parsed once, checked column by column (:func:`hermes.trace.schema.check_iterations`) and
    gathered into flat arrays (:class:`~hermes.trace.trace_phase.FlatTrace`): the time is linear in the size of the
    files, with no Python per phase or task beyond the list comprehensions that gather the fields.

    Parameters
    ----------
    stem : str or Path
    phases : str, int or list of (first, last), optional
        The phases to keep (:func:`parse_phase_spec`: ``all``, ``K``, ``A-B``, ``0,3-5``); default all.
    n_ranks : int, optional
        The number of rank files (default: all, :func:`count_ranks`).
    progress : Progress, optional
        Told the file being read (``reading data.3.json (4/16)``: a brotli file of 10⁵ tasks takes seconds), then
        the gathering; its status is cleared at the end.

    Raises
    ------
    TraceError
        One line naming the file and the key path (``t.1.json: phases.0.tasks.2.entity.home: ...``): a missing
        rank file, not JSON nor brotli-compressed JSON, a truncated brotli stream, not an LBDatafile, a field of
        the wrong type or range, a rank mismatch, an object listed twice, a home outside the ranks, no phase
        selected; more than :data:`MAX_TRACE_RANKS` rank files, :data:`MAX_TRACE_PHASES` phases or
        :data:`MAX_TRACE_KEYS` ``user_defined`` keys.
    """
    suffix = "json"
    if n_ranks is None:
        stem, n_ranks, suffix = find_trace(stem)
    stem_text = str(stem)
    if n_ranks > MAX_TRACE_RANKS:
        raise TraceError(f"{stem_text}: {n_ranks:,} rank files, more than hermes reads (limit {MAX_TRACE_RANKS:,})")
    ranges = phases if isinstance(phases, list) else parse_phase_spec(phases)
    shown = progress if progress is not None else quiet()
    files = []
    for r, path in enumerate(trace_paths(stem, n_ranks, suffix)):
        shown.status(f"reading {path.name}", r + 1, n_ranks)
        files.append(_read_rank(path, r))
    shown.status(f"gathering the phases of {n_ranks:,} rank file{'s' * (n_ranks != 1)}")
    # the phases: every id a file lists or marks identical to the previous one
    order = unique_sorted(np.concatenate([f.listed for f in files] + [f.marked for f in files]))
    if order.size > MAX_TRACE_PHASES:
        raise TraceError(f"{stem_text}: {order.size:,} phases, more than hermes reads (limit {MAX_TRACE_PHASES:,})")
    n_listed = np.zeros(order.size, dtype=np.int64)
    n_marked = np.zeros(order.size, dtype=np.int64)
    for f in files:
        n_listed[np.searchsorted(order, f.listed)] += 1
        n_marked[np.searchsorted(order, f.marked)] += 1
    mixed = np.flatnonzero((n_listed > 0) & (n_marked > 0))
    if mixed.size:
        pid = int(order[mixed[0]])
        path = next(f.path for f in files if np.isin(pid, f.marked))
        raise TraceError(f"{path}: phase {pid} is marked identical to the previous one here but listed in other "
                         f"ranks' files (a trace mixing both cannot be read)")
    repeat = n_listed == 0
    src = np.maximum.accumulate(np.where(repeat, -1, np.arange(order.size)))  # the phase whose data it has
    if np.any(src < 0):
        raise TraceError(f"{stem_text}: phase {int(order[np.argmax(src < 0)])} is marked identical to the previous "
                         f"one, but there is none before it")
    chosen = _selection(order, ranges)
    if not chosen.any():
        raise TraceError(f"{stem_text}: no phase {'' if ranges is None else _ranges_text(ranges) + ' '}in the trace "
                         f"(phases: {ids_text(order)})")
    needed = np.zeros(order.size, dtype=bool)
    needed[src[chosen]] = True
    block_of = np.cumsum(needed) - 1  # the block of each needed phase
    alpha = np.array([1.0 if f.alpha is None else f.alpha for f in files])
    flat = _gather(files, order, needed, block_of, int(needed.sum()), n_ranks, stem_text)
    flat = replace(flat, phase_ids=order[chosen], block=block_of[src[chosen]],
                   rank_alpha=alpha if np.any(alpha != 1.0) else None)
    shown.status(None)
    return Trace.from_flat(flat, stem_text, any(f.compressed for f in files))


def _gather(files: list[_Rank], order: NDArray[np.int64], needed: NDArray[np.bool_], block_of: NDArray[np.int64],
            n_blocks: int, n_ranks: int, stem: str) -> FlatTrace:
    """The tasks and communications of the ``needed`` phases of every file, as one :class:`FlatTrace` (one
    block per needed phase; the phase arrays are set by the caller)."""
    T: dict[str, list] = {k: [] for k in ("block", "oid", "time", "rank", "home", "mig", "coll", "icount", "ival",
                                         "sid", "uown", "ukey", "uval", "listing")}
    C: dict[str, list] = {k: [] for k in ("block", "from", "to", "messages", "bytes", "from_rank", "to_rank")}
    R: dict[str, list] = {k: [] for k in ("block", "rank", "key", "value")}
    W: dict[str, list] = {k: [] for k in ("block", "rank", "value")}
    base = 0  # tasks kept so far
    for f in files:
        c = f.cols
        g = np.searchsorted(order, c["pid"])  # each listed phase's position in the trace
        use = needed[g]
        t_entry = np.repeat(np.arange(g.size), c["n_tasks"])
        t_keep = use[t_entry]
        ent = c["ent"]
        T["block"].append(block_of[g][t_entry][t_keep])
        T["oid"].append(ent["oid"][t_keep])
        T["time"].append(c["time"][t_keep])
        T["rank"].append(np.full(int(t_keep.sum()), f.rank, dtype=np.int64))
        T["home"].append(ent["home"][t_keep])
        T["mig"].append(ent["migratable"][t_keep])
        # a task's position in the file's list of its phase (LBAF adds a rank's objects to a set in this order)
        T["listing"].append((np.arange(t_entry.size) - offsets(c["n_tasks"])[:-1][t_entry])[t_keep])
        T["coll"].append(ent["collection"][t_keep])
        icount = np.asarray(ent["index_counts"], dtype=np.int64)
        T["icount"].append(icount[t_keep])
        T["ival"].append(ent["index_values"][np.repeat(t_keep, icount)])
        new_pos = np.cumsum(t_keep) - 1 + base  # a kept task's position among all kept tasks
        s_task = np.repeat(np.arange(t_keep.size), c["sub_counts"])
        s_keep = t_keep[s_task]
        T["sid"].append((new_pos[s_task[s_keep]], c["sub_id"][s_keep], c["sub_time"][s_keep]))
        u_own, u_key, u_val = c["user"]
        u_keep = t_keep[u_own] if u_own.size else np.zeros(0, dtype=bool)
        T["uown"].append(new_pos[u_own[u_keep]] if u_own.size else u_own)
        T["ukey"].append([k for k, ok in zip(u_key, u_keep.tolist()) if ok])
        T["uval"].append(u_val[u_keep] if u_own.size else u_val)
        # rank_working_bytes: the value given with the last task of the rank's phase (LBAF's rule)
        if u_own.size:
            is_rw = np.array([k == "rank_working_bytes" for k in u_key], dtype=bool)
            last = c["last_task"]
            hit = is_rw & (last[t_entry[u_own]] == u_own)
            e = t_entry[u_own[hit]]
            ok = use[e]
            W["block"].append(block_of[g[e[ok]]])
            W["rank"].append(np.full(int(ok.sum()), f.rank, dtype=np.int64))
            W["value"].append(u_val[hit][ok])
        r_own, r_key, r_val = c["rank_user"]
        r_keep = use[r_own] if r_own.size else np.zeros(0, dtype=bool)
        R["block"].append(block_of[g[r_own[r_keep]]] if r_own.size else r_own)
        R["rank"].append(np.full(int(r_keep.sum()), f.rank, dtype=np.int64))
        R["key"].append([k for k, ok in zip(r_key, r_keep.tolist()) if ok])
        R["value"].append(r_val[r_keep] if r_own.size else r_val)
        cm = c["comm"]
        c_entry = np.repeat(np.arange(g.size), c["n_comms"])
        c_keep = use[c_entry] & cm["keep"]
        C["block"].append(block_of[g][c_entry][c_keep])
        for key in ("from", "to", "messages", "bytes"):
            C[key].append(cm[key][c_keep])
        C["from_rank"].append(np.full(int(c_keep.sum()), f.rank, dtype=np.int64))
        to_home = cm["to_home"][c_keep]
        C["to_rank"].append(np.where((to_home >= 0) & (to_home < n_ranks), to_home, f.rank))
        base += int(t_keep.sum())
        f.cols = {}  # the columns are in the lists now
    cat = {k: np.concatenate(v) if k not in ("ukey", "sid") else v for k, v in T.items()}
    block, oid = cat["block"].astype(np.int64), cat["oid"].astype(np.int64)
    o = np.lexsort((oid, block))  # the tasks of each block, by object id
    block, oid = block[o], oid[o]
    rank = cat["rank"][o]
    dup = np.flatnonzero((block[1:] == block[:-1]) & (oid[1:] == oid[:-1]))
    if dup.size:
        j = int(dup[0])
        same = (block == block[j]) & (oid == oid[j])
        pid = int(order[np.flatnonzero(needed)[block[j]]])
        raise TraceError(f"{stem}: object {int(oid[j])} is listed twice in phase {pid} (in the files of ranks "
                         f"{', '.join(str(r) for r in sorted(set(rank[same].tolist())))})")
    home = cat["home"][o].astype(np.int64)
    out = (home < 0) | (home >= n_ranks)
    if out.any():
        j = int(np.argmax(out))
        pid = int(order[np.flatnonzero(needed)[block[j]]])
        raise TraceError(f"{stem}: phase {pid}: a task's home is rank {int(home[j])}, not one of the {n_ranks} ranks "
                         f"of the trace (a rank file missing?)")
    n = oid.size
    inv = np.empty(n, dtype=np.int64)
    inv[o] = np.arange(n)
    # index: each task's values, in the new order
    icount = cat["icount"]
    istart = offsets(icount)
    new_count = icount[o]
    take = np.repeat(istart[:-1][o] - offsets(new_count)[:-1], new_count) + np.arange(int(new_count.sum()))
    ival = cat["ival"].astype(np.int64)[take]
    # subphases: (task, id) summed in the order listed, sorted by task then id
    s_task = inv[np.concatenate([x[0] for x in cat["sid"]]).astype(np.int64)] if n else np.zeros(0, dtype=np.int64)
    s_id = np.concatenate([x[1] for x in cat["sid"]]).astype(np.int64)
    s_time = np.concatenate([x[2] for x in cat["sid"]]).astype(np.float64)
    so = np.lexsort((s_id, s_task))
    s_task, s_id, s_time = s_task[so], s_id[so], s_time[so]
    first = np.r_[True, (s_task[1:] != s_task[:-1]) | (s_id[1:] != s_id[:-1])] if s_task.size else np.zeros(0, bool)
    group = np.cumsum(first) - 1
    s_time = np.bincount(group, weights=s_time, minlength=int(first.sum())) if s_task.size else s_time
    s_task, s_id = s_task[first], s_id[first]
    # user_defined numbers of the tasks, (task, key) sorted
    user_keys, codes = _keys(cat["ukey"])
    rank_keys, rcodes = _keys(R["key"])
    for keys, what in ((user_keys, "tasks'"), (rank_keys, "ranks'")):
        if len(keys) > MAX_TRACE_KEYS:
            raise TraceError(f"{stem}: {len(keys):,} distinct keys in the {what} user_defined, more than hermes "
                             f"reads (limit {MAX_TRACE_KEYS})")
    u_task = inv[cat["uown"].astype(np.int64)] if n else np.zeros(0, dtype=np.int64)
    u_key = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int64)
    uo = np.lexsort((u_key, u_task))
    # communications: endpoint ranks are the tasks' where they are tasks of the phase
    cc = {k: np.concatenate(v) for k, v in C.items()}
    cblock = cc["block"].astype(np.int64)
    a, a_ok = match_tasks(block, oid, cblock, cc["from"].astype(np.int64))
    b, b_ok = match_tasks(block, oid, cblock, cc["to"].astype(np.int64))
    cfr = np.where(a_ok, rank[a] if n else 0, cc["from_rank"]).astype(np.int64)
    ctr = np.where(b_ok, rank[b] if n else 0, cc["to_rank"]).astype(np.int64)
    co = np.lexsort((cfr, cc["to"], cc["from"], cblock))
    rb, rr, rk, rv = _sparse_rows(np.concatenate(R["block"]), np.concatenate(R["rank"]),
                                  np.concatenate(rcodes) if rcodes else np.zeros(0), np.concatenate(R["value"]))
    wb = np.concatenate(W["block"]) if W["block"] else np.zeros(0, dtype=np.int64)
    wr = np.concatenate(W["rank"]) if W["rank"] else np.zeros(0, dtype=np.int64)
    wv = np.concatenate(W["value"]) if W["value"] else np.zeros(0)
    wo = np.lexsort((wr, wb))
    return FlatTrace(
        n_ranks, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
        offsets(np.bincount(block, minlength=n_blocks)), oid, cat["time"][o].astype(np.float64), rank, home,
        cat["mig"][o].astype(bool), cat["coll"][o].astype(np.int64),
        offsets(np.bincount(cblock, minlength=n_blocks)), cc["from"][co].astype(np.int64),
        cc["to"][co].astype(np.int64), cc["messages"][co].astype(np.int64), cc["bytes"][co].astype(np.float64),
        cfr[co], ctr[co], offsets(new_count), ival, s_task, s_id, s_time.astype(np.float64),
        user_keys, u_task[uo], u_key[uo], cat["uval"].astype(np.float64)[uo], rank_keys, rb, rr, rk, rv,
        wb[wo].astype(np.int64), wr[wo].astype(np.int64), wv[wo].astype(np.float64),
        listing=cat["listing"][o].astype(np.int64))


def _sparse_rows(block, rank, key, value):
    block, rank, key = (np.asarray(x, dtype=np.int64) for x in (block, rank, key))
    o = np.lexsort((key, rank, block))
    return block[o], rank[o], key[o], np.asarray(value, dtype=np.float64)[o]


def _ranges_text(ranges: list[tuple[int, int]]) -> str:
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


# -- writing --------------------------------------------------------------------------------------------------
def _entity(ph: TracePhase, k: int | None, oid: int, home: int) -> dict[str, Any]:
    e: dict[str, Any] = {"type": "object", "seq_id": int(oid)}
    if k is None:  # an endpoint that is not a task of the phase
        e.update(collection_id=0, home=int(home), migratable=False)
        return e
    e["collection_id"] = int(ph.collection[k]) if ph.collection[k] >= 0 else 0
    e["home"] = int(ph.home[k])
    e["migratable"] = bool(ph.migratable[k])
    if ph.index[k]:
        e["index"] = list(ph.index[k])
    return e


def write_trace(stem: str | Path, trace: Trace | TracePhase | list[TracePhase], *, compress: bool = False,
                quality: int = 11) -> list[Path]:
    """Write ``trace`` as ``<stem>.<r>.json`` for every rank (empty ranks get empty task lists), each file
    atomically; brotli-compressed under the same names with ``compress`` (as vt writes them).

    Every phase is written with its tasks (object ids as ``seq_id``), subphases, ``user_defined`` numbers and the
    communications, each in the file of the rank of its sender. The files pass vt's JSON validator and LBAF's
    schema, and :func:`read_trace` reads them back to the same arrays.
    """
    phases = [trace] if isinstance(trace, TracePhase) else list(trace.phases if isinstance(trace, Trace) else trace)
    if not phases:
        raise TraceError("a trace needs at least one phase to be written")
    n_ranks = phases[0].n_ranks
    if any(ph.n_ranks != n_ranks for ph in phases):
        raise TraceError("every phase of a trace must have the same number of ranks")
    files: list[list[dict[str, Any]]] = [[] for _ in range(n_ranks)]
    for ph in phases:
        pos = {int(o): k for k, o in enumerate(ph.ids.tolist())}
        tasks: list[list[dict[str, Any]]] = [[] for _ in range(n_ranks)]
        sub_ids = ph.subphase_ids.tolist()
        for k, (oid, ell, r) in enumerate(zip(ph.ids.tolist(), ph.loads.tolist(), ph.ranks.tolist())):
            t: dict[str, Any] = {"entity": _entity(ph, k, oid, r), "node": int(r), "resource": "cpu", "time": float(ell)}
            if sub_ids:
                t["subphases"] = [{"id": int(s), "time": float(ph.subphases[k, j])} for j, s in enumerate(sub_ids)]
            ud = {key: _plain_number(key, vals[k]) for key, vals in ph.user.items() if vals[k] == vals[k]}
            if ud:
                t["user_defined"] = ud
            tasks[r].append(t)
        comms: list[list[dict[str, Any]]] = [[] for _ in range(n_ranks)]
        for a, b, nm, nb, ra, rb in zip(ph.comm_from.tolist(), ph.comm_to.tolist(), ph.comm_messages.tolist(),
                                        ph.comm_bytes.tolist(), ph.comm_from_rank.tolist(), ph.comm_to_rank.tolist()):
            comms[ra].append({"type": "SendRecv", "from": _entity(ph, pos.get(a), a, ra),
                              "to": _entity(ph, pos.get(b), b, rb), "messages": int(nm), "bytes": float(nb)})
        for r in range(n_ranks):
            entry: dict[str, Any] = {"id": int(ph.phase), "tasks": tasks[r]}
            if comms[r]:
                entry["communications"] = comms[r]
            ud = {key: float(v[r]) for key, v in ph.rank_user.items() if v[r] == v[r] and key != "rank_alpha"}
            if ud:
                entry["user_defined"] = ud
            files[r].append(entry)
    paths = trace_paths(stem, n_ranks)
    alpha = phases[0].rank_user.get("rank_alpha")
    for r, path in enumerate(paths):
        meta: dict[str, Any] = {"type": "LBDatafile", "rank": r}
        if alpha is not None and np.isfinite(alpha[r]):
            meta["rank_alpha"] = float(alpha[r])
        doc = {"type": "LBDatafile", "metadata": meta, "phases": files[r]}
        text = json.dumps(doc, indent=None if compress else 1, separators=(",", ":") if compress else None) + "\n"
        if compress:
            import brotli

            write_atomic(path, brotli.compress(text.encode(), quality=quality))
        else:
            write_atomic(path, text)
    return paths


def check_new_trace(stem: str | Path, n_ranks: int, key: str = "--out") -> None:
    """TraceError (one line) if any file ``<stem>.<r>.json`` exists already or its directory does not: a trace
    written where the user asked never replaces a file of theirs."""
    stem = Path(stem)
    if not stem.parent.is_dir():
        raise TraceError(f"{key} {stem}: the directory {stem.parent} does not exist")
    for path in trace_paths(stem, n_ranks):
        if path.exists() or path.is_symlink():
            raise TraceError(f"{key} {stem}: {path} exists; hermes does not overwrite files outside its own "
                             f"directories (give a new stem or remove it)")


def _plain_number(key: str, v: float) -> int | float:
    """A ``user_defined`` number as vt writes it: ids as integers, the rest as floats."""
    return int(v) if key.endswith("_id") and float(v).is_integer() else float(v)


# -- describing a trace -----------------------------------------------------------------------------------------
def _lists(owner: NDArray[np.int64], values: NDArray[np.int64], n: int) -> list[tuple[int, ...]]:
    """The sorted distinct ``values`` of each of ``n`` owners, as tuples (the empty one shared: a million
    empty lists would keep the garbage collector busy for seconds)."""
    out: list[tuple[int, ...]] = [()] * n
    if owner.size:
        pairs = np.unique(np.stack([owner, values], axis=1), axis=0)
        cut = np.flatnonzero(np.diff(pairs[:, 0])) + 1
        for b, vals in zip(pairs[np.r_[0, cut], 0].tolist(), np.split(pairs[:, 1], cut)):
            out[b] = tuple(vals.tolist())
    return out


def _summary(trace: Trace) -> tuple[dict[str, Any], Iterator[dict[str, Any]], dict[str, Any]]:
    """(the trace's entry of :func:`trace_summary` without its phases, its phases one by one, what the table
    adds: the ``user_defined`` keys of every phase, the messages no figure counts)."""
    from hermes.trace.workmodel import block_capacities, trace_figures

    flat = trace.flat
    p, nb = flat.n_ranks, flat.n_blocks
    f = trace_figures(flat)
    tb = flat.task_block
    sub_count = [len(x) for x in _lists(tb[flat.sub_task], flat.sub_id, nb)]
    user = _lists(tb[flat.user_task], flat.user_key, nb)
    ranks = _lists(flat.rank_block, flat.rank_key, nb)
    has_coll = flat.collection >= 0
    coll = _lists(tb[has_coll], flat.collection[has_coll], nb)
    first = np.arange(tb.size) - flat.task_start[tb] < 1000  # the control bits of vt's ids, in a phase's first 1000
    bits = _lists(tb[first], flat.ids[first] & 0b11, nb)
    own, ck, cv = block_capacities(flat)
    caps: list[tuple[float, ...] | None] = [None] * nb
    for b in np.flatnonzero(own).tolist():
        lo, hi = np.searchsorted(ck, [b * p, (b + 1) * p])
        caps[b] = tuple(cv[lo:hi].tolist())
    names, rank_names = flat.user_keys, flat.rank_keys
    extra = ["rank_alpha"] if flat.rank_alpha is not None else []
    used = sorted({names[j] for b in unique_sorted(flat.block).tolist() for j in user[b]})

    def phases(chunk: int = 4096) -> Iterator[dict[str, Any]]:
        for k0 in range(0, flat.n_phases, chunk):
            c = {k: v[k0:k0 + chunk].tolist() for k, v in f.items()}
            for k, (pid, b) in enumerate(zip(flat.phase_ids[k0:k0 + chunk].tolist(),
                                             flat.block[k0:k0 + chunk].tolist())):
                lbaf = c["lbaf_imbalance"][k]
                yield {
                    "phase": pid, "tasks": c["tasks"][k], "migratable": c["migratable"][k],
                    "communications": c["communications"][k], "other_communications": c["other_communications"][k],
                    "offrank_bytes": c["offrank_bytes"][k], "local_bytes": c["local_bytes"][k],
                    "subphases": sub_count[b], "user_defined": tuple(names[j] for j in user[b]) if user[b] else (),
                    "rank_user_defined": tuple(sorted([rank_names[j] for j in ranks[b]] + extra))
                    if ranks[b] or extra else (),
                    "collections": coll[b], "load_sum": c["load_sum"][k], "load_min": c["load_min"][k],
                    "load_mean": c["load_mean"][k], "load_max": c["load_max"][k], "imbalance": c["imbalance"][k],
                    "capacities": caps[b], "lbaf_imbalance": None if lbaf != lbaf else lbaf,
                    "id_control_bits": bits[b],
                }

    head = {"stem": trace.stem, "ranks": trace.n_ranks, "compressed": trace.compressed,
            "phase_ids": flat.phase_ids.tolist()}
    return head, phases(), {"keys": used, "other": int(f["other_communications"].sum())}


def trace_summary(trace: Trace) -> dict[str, Any]:
    """What ``hermes trace info`` prints: the trace as a whole and per phase — tasks, migratable ones,
    communications between tasks of the phase (and the other ones, which count in no figure), subphases,
    ``user_defined`` keys (lists as tuples), and the figures of :func:`hermes.trace.workmodel.trace_figures` (the
    ones ``hermes trace replay`` prints before balancing): load sum/min/mean/max, imbalance max/mean (relative to the
    capacities a hermes trace records) and LBAF's max/mean − 1, off-rank and local bytes. JSON-ready."""
    head, phases, _ = _summary(trace)
    return {**head, "phases": list(phases)}


_COLUMNS = (f"{'phase':>7} {'tasks':>7} {'migr.':>7} {'comms':>7} {'load sum':>11} {'min':>10} {'mean':>10} "
            f"{'max':>10} {'max/mean':>9} {'off-rank B':>11}")
_NOTE = ("max/mean is hermes' imbalance (1.0 fair; relative to the capacities a hermes trace records); LBAF prints "
         "max/mean - 1")


def _line(ph: dict[str, Any]) -> str:
    return (f"{ph['phase']:>7} {ph['tasks']:>7} {ph['migratable']:>7} {ph['communications']:>7} "
            f"{ph['load_sum']:>11.6g} {ph['load_min']:>10.4g} {ph['load_mean']:>10.4g} {ph['load_max']:>10.4g} "
            f"{ph['imbalance']:>9.4f} {ph['offrank_bytes']:>11.6g}")


def _table(head: dict[str, Any], phases: Iterable[dict[str, Any]], keys: list[str], other: int) -> Iterator[str]:
    yield (f"{head['stem']}: {head['ranks']} ranks, {len(head['phase_ids']):,} phase(s) "
           f"({ids_text(head['phase_ids'])}){', brotli' if head['compressed'] else ''}")
    if keys:
        yield f"user_defined: {', '.join(keys)}"
    yield _COLUMNS
    yield from map(_line, phases)
    if other:
        yield (f"{other:,} communication(s) with an endpoint that is no task of its phase are not counted (LBAF's "
               f"model)")
    yield _NOTE


def format_trace_summary(info: dict[str, Any]) -> str:
    """:func:`trace_summary` as a table."""
    keys = sorted({k for ph in info["phases"] for k in ph["user_defined"]})
    other = sum(ph.get("other_communications", 0) for ph in info["phases"])
    return "\n".join(_table(info, info["phases"], keys, other))


def write_trace_summary(trace: Trace, out: TextIO, *, as_json: bool = False) -> None:
    """``hermes trace info``: :func:`trace_summary` as its table (or as JSON) into ``out``, a phase at a time
    (the summary of 10⁶ phases as dicts would take a gigabyte)."""
    head, phases, more = _summary(trace)
    if as_json:  # the text of json.dumps(trace_summary(trace))
        out.write(json.dumps(head)[:-1] + ', "phases": [')
        for k, ph in enumerate(phases):
            out.write((", " if k else "") + json.dumps(ph))
        out.write("]}\n")
        return
    for line in _table(head, phases, more["keys"], more["other"]):
        out.write(line + "\n")
