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
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from hermes.bounds import BIG
from hermes.errors import one_line, validation_message
from hermes.files import write_atomic
from hermes.loaders import parse_json, read_bytes
from hermes.trace.phase import Trace, TraceError, TracePhase, ids_text
from hermes.trace.schema import LBDatafileDoc, PhaseDoc

__all__ = ["read_trace", "write_trace", "parse_phase_spec", "trace_paths",
           "count_ranks", "find_trace", "check_new_trace", "decode_vt_id", "MAX_TRACE_BYTES", "MEMORY_KEYS", "SUFFIXES"]

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


def _selected(pid: int, ranges: list[tuple[int, int]] | None) -> bool:
    return ranges is None or any(a <= pid <= b for a, b in ranges)


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
    if not found or found[0] != 0:
        hint = f" (found {stem}.{found[0]}.{suffix})" if found else ""
        raise TraceError(f"no LBDatafile {stem}.0.json{hint}: give the stem of the per-rank files <stem>.<rank>.json")
    n = len(found)
    if found[-1] != n - 1:
        gap = next(r for r in range(n) if r not in set(found))
        raise TraceError(f"{stem}: rank file {stem}.{gap}.{suffix} is missing (files for {n} ranks up to rank "
                         f"{found[-1]}): a trace has one file per rank, 0 to n−1")
    return stem, n, suffix


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


def _read_doc(path: Path, r: int) -> tuple[LBDatafileDoc, bool]:
    """One rank's file, parsed as strict JSON and checked against the schema; (document, was compressed)."""
    if not path.exists():
        raise TraceError(f"missing LBDatafile {path}")
    data = read_bytes(path, "LBDatafile", max_bytes=MAX_TRACE_BYTES, error=TraceError)
    # plain or brotli-compressed: a brotli stream has no magic number and may begin with '{' or '[', so text
    # that does not parse as JSON is tried as brotli before its JSON error is reported
    compressed = not _looks_like_json(data)
    if compressed:
        if not data:
            raise TraceError(f"{path}: empty file")
        data = _decompress(data, path)
        doc = parse_json(data, str(path), error=TraceError, max_values=MAX_TRACE_VALUES)
    else:
        try:
            doc = parse_json(data, str(path), error=TraceError, max_values=MAX_TRACE_VALUES)
        except TraceError as err:
            try:
                unpacked = _decompress(data, path)
            except TraceError:
                raise err from None
            doc, compressed = parse_json(unpacked, str(path), error=TraceError, max_values=MAX_TRACE_VALUES), True
    if not isinstance(doc, dict):
        raise TraceError(f"{path}: not an LBDatafile (the file must hold a JSON object)")
    kinds = {doc.get("type"), doc["metadata"].get("type") if isinstance(doc.get("metadata"), dict) else None}
    if "LBDatafile" not in kinds:
        raise TraceError(f"{path}: not an LBDatafile (type must be 'LBDatafile')")
    try:
        data = LBDatafileDoc.model_validate(doc)
    except ValidationError as err:
        raise TraceError(f"{path}: {validation_message(err)}") from None
    meta_rank = data.metadata.rank if data.metadata is not None and data.metadata.rank is not None else r
    if meta_rank != r:
        raise TraceError(f"{path}: metadata says rank {meta_rank}, the file name rank {r}")
    return data, compressed


def _phases_of(doc: LBDatafileDoc, path: Path) -> list[PhaseDoc | int]:
    """The file's phases in order, a phase ``identical_to_previous`` and absent given as its bare id."""
    listed = [ph.id for ph in doc.phases]
    if len(set(listed)) != len(listed):
        dup = next(i for i in listed if listed.count(i) > 1)
        raise TraceError(f"{path}: phase {dup} is listed twice")
    meta = doc.metadata.phases if doc.metadata is not None else None
    if meta is None:
        return list(doc.phases)
    try:
        same, skipped = meta.identical_to_previous.ids(), meta.skipped.ids()
    except ValueError as err:
        raise TraceError(f"{path}: metadata.phases: {err}") from None
    out: list[PhaseDoc | int] = list(doc.phases)
    have = set(listed)
    for pid in sorted(same - have - skipped):
        out.append(pid)
    out.sort(key=lambda ph: ph if isinstance(ph, int) else ph.id)
    return out


def _user_numbers(ud: dict[str, Any] | None) -> dict[str, float]:
    if not ud:
        return {}
    return {k: float(v) for k, v in ud.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) <= BIG and v == v}


def _build_phase(pid: int, docs: list[tuple[Path, PhaseDoc | None]], n_ranks: int, stem: str) -> TracePhase:
    ids: list[int] = []
    loads: list[float] = []
    ranks: list[int] = []
    home: list[int] = []
    mig: list[bool] = []
    coll: list[int] = []
    index: list[tuple[int, ...]] = []
    subs: list[dict[int, float]] = []
    users: list[dict[str, float]] = []
    cf, ct, cm, cb, cfr, ctr = [], [], [], [], [], []
    rank_working = np.zeros(n_ranks)
    any_working = False
    rank_user: dict[str, NDArray[np.float64]] = {}
    for r, (path, ph) in enumerate(docs):
        if ph is None:
            continue
        for key, value in _user_numbers(ph.user_defined).items():
            rank_user.setdefault(key, np.full(n_ranks, np.nan))[r] = value
        if ph.tasks:
            last = _user_numbers(ph.tasks[-1].user_defined).get("rank_working_bytes")
            if last is not None:
                rank_working[r], any_working = last, True
        for k, task in enumerate(ph.tasks):
            e = task.entity
            ids.append(e.oid)
            loads.append(task.time)
            ranks.append(r)
            home.append(e.home)
            mig.append(e.migratable)
            coll.append(-1 if e.collection_id is None else e.collection_id)
            index.append(tuple(e.index or ()))
            sp: dict[int, float] = {}
            for s in task.subphases or []:
                sp[s.id] = sp.get(s.id, 0.0) + s.time
            subs.append(sp)
            users.append(_user_numbers(task.user_defined))
        for c in ph.communications or []:
            # LBAF's model: point-to-point messages between objects (Broadcast and the collective kinds, and
            # node or collection endpoints, are checked but not kept)
            if c.type != "SendRecv" or c.from_.type != "object" or c.to.type != "object":
                continue
            cf.append(c.from_.oid)
            ct.append(c.to.oid)
            cm.append(c.messages)
            cb.append(c.bytes)
            cfr.append(r)
            ctr.append(c.to.home if c.to.home is not None and 0 <= c.to.home < n_ranks else r)
    i = np.asarray(ids, dtype=np.int64)
    o = np.argsort(i, kind="stable")
    i = i[o]
    if i.size and np.any(i[1:] == i[:-1]):
        dup = int(i[1:][i[1:] == i[:-1]][0])
        raise TraceError(f"{stem}: object {dup} is listed twice in phase {pid} (in the files of ranks "
                         f"{', '.join(str(r) for r in sorted({ranks[k] for k in range(len(ids)) if ids[k] == dup}))})")
    h = np.asarray(home, dtype=np.int64)[o]
    if h.size and (h.min() < 0 or h.max() >= n_ranks):
        bad = int(h[(h < 0) | (h >= n_ranks)][0])
        raise TraceError(f"{stem}: phase {pid}: a task's home is rank {bad}, not one of the {n_ranks} ranks of the "
                         f"trace (a rank file missing?)")
    r_task = np.asarray(ranks, dtype=np.int64)[o]
    sub_ids = np.array(sorted({s for sp in subs for s in sp}), dtype=np.int64)
    sub = np.zeros((i.size, sub_ids.size))
    col = {s: k for k, s in enumerate(sub_ids.tolist())}
    for row, k in enumerate(o.tolist()):
        for s, t in subs[k].items():
            sub[row, col[s]] = t
    keys = sorted({k for u in users for k in u})
    user = {k: np.array([users[j].get(k, np.nan) for j in o.tolist()]) for k in keys}
    # the ranks of the endpoints: a task's own; otherwise the rank listing the communication (sender) or the
    # entity's home (receiver)
    cf_a, ct_a = np.asarray(cf, dtype=np.int64), np.asarray(ct, dtype=np.int64)
    where = dict(zip(i.tolist(), r_task.tolist()))
    cfr_a = np.array([where.get(a, b) for a, b in zip(cf, cfr)], dtype=np.int64)
    ctr_a = np.array([where.get(a, b) for a, b in zip(ct, ctr)], dtype=np.int64)
    c = np.lexsort((cfr_a, ct_a, cf_a))  # (from, to, from rank): the same order whichever file listed them
    return TracePhase(n_ranks, i, np.asarray(loads, dtype=np.float64)[o], r_task, h,
                      np.asarray(mig, dtype=bool)[o], int(pid), cf_a[c], ct_a[c], np.asarray(cm, dtype=np.int64)[c],
                      np.asarray(cb, dtype=np.float64)[c], cfr_a[c], ctr_a[c], np.asarray(coll, dtype=np.int64)[o],
                      tuple(index[k] for k in o.tolist()), sub_ids, sub, user,
                      rank_working if any_working else None, rank_user)


def read_trace(stem: str | Path, *, phases: str | int | list[tuple[int, int]] | None = None,
               n_ranks: int | None = None) -> Trace:
    """Read the LBDatafile trace ``<stem>.<r>.json`` (every rank file, plain or brotli-compressed).

    Parameters
    ----------
    stem : str or Path
    phases : str, int or list of (first, last), optional
        The phases to keep (:func:`parse_phase_spec`: ``all``, ``K``, ``A-B``, ``0,3-5``); default all.
    n_ranks : int, optional
        The number of rank files (default: all, :func:`count_ranks`).

    Raises
    ------
    TraceError
        One line naming the file and the key path (``t.1.json: phases.0.tasks.2.entity.home: ...``): a missing
        rank file, not JSON nor brotli-compressed JSON, a truncated brotli stream, not an LBDatafile, a field of
        the wrong type or range, a rank mismatch, an object listed twice, a home outside the ranks, no phase
        selected.
    """
    suffix = "json"
    if n_ranks is None:
        stem, n_ranks, suffix = find_trace(stem)
    stem_text = str(stem)
    ranges = phases if isinstance(phases, list) else parse_phase_spec(phases)
    docs, compressed = [], False
    alpha = np.ones(n_ranks)
    for r, path in enumerate(trace_paths(stem, n_ranks, suffix)):
        doc, packed = _read_doc(path, r)
        docs.append((path, _phases_of(doc, path)))
        compressed |= packed
        if doc.metadata is not None and doc.metadata.rank_alpha is not None:
            alpha[r] = doc.metadata.rank_alpha
    order: list[int] = []
    for _, phs in docs:
        for ph in phs:
            pid = ph if isinstance(ph, int) else ph.id
            if pid not in order:
                order.append(pid)
    order.sort()
    chosen = [pid for pid in order if _selected(pid, ranges)]
    if not chosen:
        raise TraceError(f"{stem_text}: no phase {'' if ranges is None else _ranges_text(ranges) + ' '}in the trace "
                         f"(phases: {ids_text(order)})")
    by_rank = [{(ph if isinstance(ph, int) else ph.id): ph for ph in phs} for _, phs in docs]
    out: list[TracePhase] = []
    last: dict[int, TracePhase] = {}
    for pid in order:
        entries = []
        repeat = all(isinstance(m.get(pid), int) for m in by_rank if pid in m)
        if repeat:
            prev = [q for q in order if q < pid]
            if not prev or prev[-1] not in last:
                raise TraceError(f"{stem_text}: phase {pid} is marked identical to the previous one, but there is "
                                 f"none before it")
            ph = last[prev[-1]].with_id(pid)
        else:
            for r, (path, _) in enumerate(docs):
                got = by_rank[r].get(pid)
                if isinstance(got, int):
                    raise TraceError(f"{path}: phase {pid} is marked identical to the previous one here but listed "
                                     f"in other ranks' files (a trace mixing both cannot be read)")
                entries.append((path, got))
            if not _selected(pid, ranges) and not any(_selected(q, ranges) for q in order if q > pid):
                break
            ph = _build_phase(pid, entries, n_ranks, stem_text)
            if np.any(alpha != 1.0):  # LBAF's per-rank α of the work model, kept with every phase
                ph.rank_user["rank_alpha"] = alpha.copy()
        last[pid] = ph
        if _selected(pid, ranges):
            out.append(ph)
    return Trace(n_ranks, out, stem_text, compressed)


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
def trace_summary(trace: Trace) -> dict[str, Any]:
    """What ``hermes trace info`` prints: the trace as a whole and per phase (tasks, migratable ones,
    communications, subphases, ``user_defined`` keys, load sum/min/mean/max, imbalance max/mean and LBAF's
    max/mean − 1, off-rank bytes). JSON-ready."""
    phases = []
    for ph in trace.phases:
        loads = ph.rank_loads()
        mean = float(loads.mean()) if ph.n_ranks else 0.0
        off = ph.comm_from_rank != ph.comm_to_rank
        codes = {decode_vt_id(i)[0] for i in ph.ids[:1000].tolist()} if ph.n_tasks else set()
        c = ph.rank_user.get("hermes_capacity")
        caps = c / c.sum() if c is not None and np.all(np.isfinite(c)) and np.all(c > 0) else None
        phases.append({
            "phase": ph.phase, "tasks": ph.n_tasks, "migratable": int(ph.migratable.sum()),
            "communications": int(ph.comm_from.size), "offrank_bytes": float(ph.comm_bytes[off].sum()),
            "local_bytes": float(ph.comm_bytes[~off].sum()), "subphases": int(ph.subphase_ids.size),
            "user_defined": sorted(ph.user), "rank_user_defined": sorted(ph.rank_user),
            "collections": sorted({int(c) for c in ph.collection.tolist() if c >= 0}),
            "load_sum": float(loads.sum()), "load_min": float(loads.min()) if ph.n_ranks else 0.0,
            "load_mean": mean, "load_max": float(loads.max()) if ph.n_ranks else 0.0,
            # relative to the capacities a hermes-written trace records, else to the mean
            "imbalance": (float(np.max(loads / (loads.sum() * caps))) if caps is not None else
                          float(loads.max() / mean)) if mean > 0 else 1.0,
            "capacities": None if caps is None else [float(c) for c in caps],
            "lbaf_imbalance": float(loads.max() / mean - 1.0) if mean > 0 else None,
            "id_control_bits": sorted(codes),
        })
    return {"stem": trace.stem, "ranks": trace.n_ranks, "compressed": trace.compressed,
            "phase_ids": trace.phase_ids, "phases": phases}


def format_trace_summary(info: dict[str, Any]) -> str:
    """:func:`trace_summary` as a table."""
    head = (f"{info['stem']}: {info['ranks']} ranks, {len(info['phases'])} phase(s) "
            f"({ids_text(info['phase_ids'])}){', brotli' if info['compressed'] else ''}")
    keys = sorted({k for ph in info["phases"] for k in ph["user_defined"]})
    lines = [head]
    if keys:
        lines.append(f"user_defined: {', '.join(keys)}")
    lines.append(f"{'phase':>7} {'tasks':>7} {'migr.':>7} {'comms':>7} {'load sum':>11} {'min':>10} {'mean':>10} "
                 f"{'max':>10} {'max/mean':>9} {'off-rank B':>11}")
    for ph in info["phases"]:
        lines.append(f"{ph['phase']:>7} {ph['tasks']:>7} {ph['migratable']:>7} {ph['communications']:>7} "
                     f"{ph['load_sum']:>11.6g} {ph['load_min']:>10.4g} {ph['load_mean']:>10.4g} {ph['load_max']:>10.4g} "
                     f"{ph['imbalance']:>9.4f} {ph['offrank_bytes']:>11.6g}")
    lines.append("max/mean is hermes' imbalance (1.0 fair; relative to the capacities a hermes trace records); LBAF "
                 "prints max/mean - 1")
    return "\n".join(lines)
