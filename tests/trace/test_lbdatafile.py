"""The LBDatafile reader and writer (hermes.trace.lbdatafile): every key LBAF reads, brotli, phases, errors."""

from __future__ import annotations

import json

import brotli
import numpy as np
import pytest

from hermes.trace import TraceError, parse_phase_spec, read_trace, write_trace
from hermes.trace.lbdatafile import count_ranks, decode_vt_id, trace_summary
from hermes.trace.trace_phase import TracePhase


def _task(oid, r, t, *, key="seq_id", migratable=True, sub=None, ud=None, home=None):
    e = {"type": "object", key: oid, "home": r if home is None else home, "migratable": migratable}
    if key == "seq_id":
        e["collection_id"] = 7
    task = {"entity": e, "node": r, "resource": "cpu", "time": float(t)}
    if sub is not None:
        task["subphases"] = [{"id": i, "time": float(x)} for i, x in enumerate(sub)]
    if ud is not None:
        task["user_defined"] = ud
    return task


def _comm(a, b, nbytes, kind="SendRecv", msgs=1):
    return {"type": kind, "from": {"type": "object", "seq_id": a, "home": 0, "collection_id": 7, "migratable": True},
            "to": {"type": "object", "seq_id": b, "home": 0, "collection_id": 7, "migratable": True},
            "messages": msgs, "bytes": float(nbytes)}


def _write(tmp_path, stem, docs, compress=False):
    for r, doc in enumerate(docs):
        text = json.dumps(doc).encode()
        (tmp_path / f"{stem}.{r}.json").write_bytes(brotli.compress(text) if compress else text)
    return tmp_path / stem


def _two_ranks(phases=(0, 1)):
    docs = []
    for r in range(2):
        phs = []
        for k in phases:
            tasks = [_task(10 * r + i, r, 1.0 + i + k, sub=[0.5, 0.5 + i + k]) for i in range(2)]
            comms = [_comm(10 * r, 10 * (1 - r), 100.0 * (r + 1)), _comm(10 * r, 10 * r + 1, 7.0),
                     _comm(10 * r, 10 * r + 1, 5.0, kind="Broadcast")]
            phs.append({"id": k, "tasks": tasks, "communications": comms})
        docs.append({"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r}, "phases": phs})
    return docs


def test_reads_plain_and_brotli_alike_with_every_phase(tmp_path):
    plain = read_trace(_write(tmp_path, "p", _two_ranks()))
    packed = read_trace(_write(tmp_path, "b", _two_ranks(), compress=True))
    assert not plain.compressed and packed.compressed
    assert plain.phase_ids == packed.phase_ids == [0, 1]
    for a, b in zip(plain.phases, packed.phases):
        for key in ("ids", "loads", "ranks", "home", "comm_from", "comm_to", "comm_bytes", "subphases"):
            assert np.array_equal(getattr(a, key), getattr(b, key)), key
    ph = plain.phases[1]
    assert ph.ids.tolist() == [0, 1, 10, 11] and ph.ranks.tolist() == [0, 0, 1, 1]
    assert ph.loads.tolist() == [2.0, 3.0, 2.0, 3.0]
    assert ph.subphases.tolist() == [[0.5, 1.5], [0.5, 2.5], [0.5, 1.5], [0.5, 2.5]]
    # SendRecv between objects only (the Broadcasts are not kept), endpoint ranks from the tasks
    assert ph.comm_bytes.size == 4 and sorted(ph.comm_bytes.tolist()) == [7.0, 7.0, 100.0, 200.0]
    assert ph.collection.tolist() == [7, 7, 7, 7]


def test_a_brotli_stream_that_begins_like_json_is_still_read(tmp_path):
    # brotli has no magic number: with vt's default window (22 bits) a file of more than about 128 kB compresses
    # to a stream whose first byte is '[' (0x5b), as LBAF's nolb-8color-16nodes-data/data.0.json does
    docs = _two_ranks((0,))
    docs[0]["phases"][0]["tasks"] += [_task(100 + i, 0, 1.0 + i % 7, sub=[0.25] * 8) for i in range(1500)]
    text = json.dumps(docs[0]).encode()
    assert len(text) > 2**17 and brotli.compress(text)[:1] == b"["
    tr = read_trace(_write(tmp_path, "j", docs, compress=True))
    assert tr.compressed and tr.phases[0].n_tasks == 1504


@pytest.mark.parametrize("spec, kept", [("all", [0, 1, 2, 3]), ("2", [2]), ("1-2", [1, 2]), ("0,3", [0, 3]),
                                         (3, [3]), (None, [0, 1, 2, 3])])
def test_phase_selection(tmp_path, spec, kept):
    assert read_trace(_write(tmp_path, "t", _two_ranks((0, 1, 2, 3))), phases=spec).phase_ids == kept


@pytest.mark.parametrize("spec", ["x", "2-1", "1,,2", "--", "1-"])
def test_a_bad_phase_selection_is_one_line(spec):
    with pytest.raises(TraceError, match="--phase") as err:
        parse_phase_spec(spec)
    assert "\n" not in str(err.value)


def test_identical_and_skipped_phases_of_the_metadata(tmp_path):
    docs = _two_ranks((0, 1))
    for doc in docs:  # phase 2 identical to 1 and not listed; phase 3 skipped
        doc["metadata"]["phases"] = {"count": 4, "skipped": {"list": [3], "range": []},
                                     "identical_to_previous": {"list": [], "range": [[2, 2]]}}
    tr = read_trace(_write(tmp_path, "m", docs))
    assert tr.phase_ids == [0, 1, 2]
    assert np.array_equal(tr.phase(2).loads, tr.phase(1).loads) and tr.phase(2).phase == 2


def test_lbaf_takes_the_encoded_id_before_seq_id(tmp_path):
    docs = _two_ranks((0,))
    e = docs[0]["phases"][0]["tasks"][0]["entity"]
    e["id"] = 1572867  # vt's encoding: control 3 (migratable), home node 0, sequence 6
    tr = read_trace(_write(tmp_path, "i", docs))
    assert 1572867 in tr.phases[0].ids.tolist() and 0 not in tr.phases[0].ids.tolist()
    assert decode_vt_id(1572867) == (3, 0, 6)


def test_user_defined_numbers_and_rank_working_bytes(tmp_path):
    docs = _two_ranks((0,))
    docs[0]["phases"][0]["tasks"][0]["user_defined"] = {"task_footprint_bytes": 1024.0, "shared_id": 4,
                                                       "note": "text is kept out", "rank_working_bytes": 5.0}
    docs[0]["phases"][0]["tasks"][1]["user_defined"] = {"rank_working_bytes": 9.0}
    docs[1]["phases"][0]["user_defined"] = {"hermes_capacity": 0.25}
    ph = read_trace(_write(tmp_path, "u", docs)).phases[0]
    assert ph.user["task_footprint_bytes"][0] == 1024.0 and np.isnan(ph.user["task_footprint_bytes"][1])
    assert "note" not in ph.user
    assert ph.rank_working.tolist() == [9.0, 0.0]  # the last task the rank's file lists (LBAF's rule)
    assert np.isnan(ph.rank_user["hermes_capacity"][0]) and ph.rank_user["hermes_capacity"][1] == 0.25


def test_the_writer_round_trips_every_field_plain_and_brotli(tmp_path):
    src = read_trace(_write(tmp_path, "s", _two_ranks((0, 5))))
    phases = [TracePhase(**{**ph.__dict__, "user": {"task_footprint_bytes": np.array([1.0, np.nan, 3.0, 4.0]),
                                                    "shared_id": np.array([1.0, 1.0, 2.0, np.nan])},
                            "rank_user": {"hermes_capacity": np.array([0.5, 0.5])}}) for ph in src.phases]
    for compress in (False, True):
        write_trace(tmp_path / f"w{compress}", phases, compress=compress)
        back = read_trace(tmp_path / f"w{compress}")
        assert back.compressed == compress and back.phase_ids == [0, 5]
        for a, b in zip(phases, back.phases):
            for key in ("ids", "loads", "ranks", "home", "migratable", "collection", "comm_from", "comm_to",
                        "comm_messages", "comm_bytes", "comm_from_rank", "comm_to_rank", "subphase_ids",
                        "subphases"):
                assert np.array_equal(getattr(a, key), getattr(b, key)), key
            for key in a.user:
                assert np.array_equal(a.user[key], b.user[key], equal_nan=True), key
            assert np.array_equal(a.rank_user["hermes_capacity"], b.rank_user["hermes_capacity"])
        # the written form is LBAF's: floats where the schema wants floats, ints for ids
        doc = read_bytes_json(tmp_path / f"w{compress}.1.json", compress)
        t = doc["phases"][0]["tasks"][0]
        assert isinstance(t["time"], float) and isinstance(t["entity"]["seq_id"], int)
        assert isinstance(t["user_defined"]["shared_id"], int)
        assert all(isinstance(c["bytes"], float) for c in doc["phases"][0]["communications"])


def read_bytes_json(path, compressed):
    data = path.read_bytes()
    return json.loads(brotli.decompress(data) if compressed else data)


def test_every_rank_file_is_needed(tmp_path):
    stem = _write(tmp_path, "g", _two_ranks((0,)) + _two_ranks((0,))[:1])  # ranks 0, 1, 2
    (tmp_path / "g.1.json").unlink()
    with pytest.raises(TraceError, match=r"g\.1\.json is missing") as err:
        read_trace(stem)
    assert "\n" not in str(err.value)
    with pytest.raises(TraceError, match="no LBDatafile"):
        count_ranks(tmp_path / "nothing")


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[: len(b) // 2], "ends early|neither JSON nor a valid brotli"),
    (lambda b: b"\x1b\x8f\x00\xff" + b[4:], "brotli"),
    (lambda b: b"", "empty file"),
])
def test_a_damaged_brotli_file_is_one_line(tmp_path, damage, message):
    stem = _write(tmp_path, "d", _two_ranks((0,)), compress=True)
    path = tmp_path / "d.1.json"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(TraceError, match=message) as err:
        read_trace(stem)
    assert "\n" not in str(err.value) and str(err.value).startswith(str(path))


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["phases"][0]["tasks"][0].pop("time"), "phases.0.tasks.0.time: Field required"),
    (lambda d: d["phases"][0]["tasks"][0].__setitem__("time", -1.0), "phases.0.tasks.0.time"),
    (lambda d: d["phases"][0]["tasks"][0]["entity"].pop("home"), "entity.home"),
    (lambda d: d["phases"][0]["communications"][0].__setitem__("messages", 1.5), "messages"),
    (lambda d: d["phases"][0]["tasks"][0]["entity"].__setitem__("home", 9), "home is rank 9"),
    (lambda d: d["phases"][0]["tasks"][1]["entity"].__setitem__("seq_id", 0), "listed twice"),
    (lambda d: d["phases"].append(dict(d["phases"][0])), "phase 0 is listed twice"),
    (lambda d: d["metadata"].__setitem__("rank", 1), "metadata says rank 1"),
])
def test_a_wrong_schema_is_one_line_naming_file_and_key(tmp_path, mutate, message):
    docs = _two_ranks((0,))
    mutate(docs[0])
    with pytest.raises(TraceError, match=message) as err:
        read_trace(_write(tmp_path, "w", docs))
    assert "\n" not in str(err.value)


def test_summary_names_keys_and_loads(tmp_path):
    info = trace_summary(read_trace(_write(tmp_path, "s", _two_ranks((0, 1)))))
    assert info["ranks"] == 2 and info["phase_ids"] == [0, 1]
    ph = info["phases"][1]
    assert ph["tasks"] == 4 and ph["communications"] == 4 and ph["load_sum"] == 10.0
    assert ph["imbalance"] == 1.0 and ph["offrank_bytes"] == 300.0 and ph["subphases"] == 2


def test_other_suffixes_and_a_rank_file_name_the_trace(tmp_path):
    stem = _write(tmp_path, "v", _two_ranks((0,)), compress=True)
    for r in range(2):
        (tmp_path / f"v.{r}.json").rename(tmp_path / f"v.{r}.json.br")
    assert read_trace(stem).phases[0].n_tasks == 4
    assert read_trace(tmp_path / "v.1.json.br").stem == str(stem)  # a rank file's path names its trace


def test_a_trace_written_where_the_user_asks_never_replaces_a_file(tmp_path):
    from hermes.lab.gossip import gossip_lab
    from hermes.trace.lbdatafile import check_new_trace

    (tmp_path / "mine.1.json").write_text("the user's own file")
    with pytest.raises(TraceError, match=r"mine\.1\.json exists"):
        check_new_trace(tmp_path / "mine", 2)
    with pytest.raises(TraceError, match=r"exists"):
        gossip_lab(2, 10, None, "iso", 1, 1, 1, 1.0, "modified", 0, write_trace=str(tmp_path / "mine"))
    assert (tmp_path / "mine.1.json").read_text() == "the user's own file"
    with pytest.raises(TraceError, match="does not exist"):
        check_new_trace(tmp_path / "no" / "where", 2)


# -- traces of any length: the column checks, linear reading, the limits (issue 38) ------------------------------
def _valid_doc():
    docs = _two_ranks((0, 1))
    ph = docs[0]["phases"][0]
    ph["tasks"][0]["entity"]["index"] = [3, 4]
    ph["tasks"][0]["user_defined"] = {"task_footprint_bytes": 8, "note": "x", "big": 10**30}
    ph["tasks"][0]["attributes"] = {"a": 1}
    ph["user_defined"] = {"hermes_capacity": 0.5}
    ph["lb_iterations"] = [{"id": 0, "tasks": [_task(90, 0, 1.0)]}]
    ph["communications"][0]["from"]["id"] = 10
    return docs[0]


def _mutations():
    """Documents a strict schema refuses or accepts, each one change away from a valid one: every field of a
    phase, a task, an entity, a subphase and a communication given a missing, null, wrong-typed, out-of-range
    or edge value."""
    paths = {
        "phase": ["id", "tasks", "communications", "user_defined", "lb_iterations", "extra"],
        "task": ["entity", "node", "resource", "time", "subphases", "user_defined", "attributes"],
        "entity": ["type", "id", "seq_id", "home", "collection_id", "migratable", "index", "objgroup_id"],
        "sub": ["id", "time"],
        "comm": ["type", "from", "to", "messages", "bytes"],
        "end": ["type", "id", "seq_id", "home", "collection_id", "migratable", "index"],
    }
    values = [None, True, 0, -1, 1.5, -0.0, 2**63 - 1, 2**63, -(2**63) - 1, 1e100, 1e101, 1e400, "1", [], [1],
              [True], {}, "SendRecv"]
    for level, keys in paths.items():
        for key in keys:
            for v in values + ["<missing>"]:
                yield level, key, v


def _place(doc, level, key, v):
    ph = doc["phases"][0]
    target = {"phase": ph, "task": ph["tasks"][1], "entity": ph["tasks"][1]["entity"],
              "sub": ph["tasks"][1]["subphases"][0], "comm": ph["communications"][1],
              "end": ph["communications"][1]["to"]}[level]
    if v == "<missing>":
        target.pop(key, None)
    else:
        target[key] = v


def test_the_column_checks_accept_and_refuse_what_the_models_do(tmp_path):
    """hermes.trace.schema.check_iterations (the fast path) against the pydantic models (the definition) on
    every field given every kind of wrong or edge value: both accept or both refuse, and the refusal names the
    same phase and key path."""
    from pydantic import ValidationError

    from hermes.trace.schema import ColumnError, PhaseDoc, check_iterations, explain

    docs = _two_ranks((0, 1, 2))  # through the reader: the file, the phase and the key path
    docs[1]["phases"][2]["tasks"][1]["subphases"][1]["time"] = "slow"
    with pytest.raises(TraceError) as err:
        read_trace(_write(tmp_path, "k", docs))
    assert str(err.value).startswith(str(tmp_path / "k.1.json") + ": phases.2.tasks.1.subphases.1.time: ")
    checked = 0
    for level, key, v in _mutations():
        doc = _valid_doc()
        _place(doc, level, key, v)
        try:
            [PhaseDoc.model_validate(ph) for ph in doc["phases"]]
            models = None
        except ValidationError:
            models = "refused"
        try:
            check_iterations(doc["phases"])
            columns = None
        except ColumnError as err:
            columns = explain(doc["phases"], err.k)
        assert (models is None) == (columns is None), (level, key, v, columns)
        if columns is not None:
            assert columns.startswith("phases.0") and "\n" not in columns, columns
        checked += 1
    assert checked == 35 * 19


def test_many_empty_phases_are_read_in_linear_time(tmp_path):
    """10⁵ empty phases (2.4 MB): a few tenths of a second of CPU (the old reader spent ~0.2 ms of Python per
    phase and a quadratic search of the phase ids: minutes). The bound, 5 s of CPU, holds on a loaded 2-core
    machine; the figures of every phase come from one vectorised pass."""
    import time

    n = 100_000
    (tmp_path / "e.0.json").write_text('{"type":"LBDatafile","phases":[' + ",".join(
        f'{{"id":{k},"tasks":[]}}' for k in range(n)) + "]}")
    t0 = time.process_time()
    tr = read_trace(tmp_path / "e")
    info = trace_summary(tr)
    cpu = time.process_time() - t0
    assert len(tr.phases) == n and tr.phase_ids[-1] == n - 1 and len(info["phases"]) == n
    assert info["phases"][7]["imbalance"] == 1.0 and info["phases"][7]["offrank_bytes"] == 0.0
    assert cpu < 5.0, cpu


def test_the_flat_trace_keeps_every_field_of_every_phase(tmp_path):
    """The phases of the flat trace are the phases the files hold: each field of each phase (subphases summed
    per id, user_defined per key, rank_working_bytes from the last task, the phase-level numbers, endpoint
    ranks) equal to the phase built from the files one by one."""
    rng = np.random.default_rng(5)
    docs = []
    for r in range(3):
        phs = []
        for k in (0, 2, 3):
            tasks = []
            for i in range(int(rng.integers(0, 5))):
                ud = {"task_footprint_bytes": float(rng.integers(1, 9))}
                if rng.random() < 0.5:
                    ud["rank_working_bytes"] = float(rng.integers(1, 99))
                t = _task(100 * r + i, r, float(rng.integers(1, 9)), sub=list(rng.integers(0, 3, 3).astype(float)),
                          ud=ud, home=int(rng.integers(0, 3)))
                t["subphases"].append({"id": 0, "time": 0.25})  # a subphase id twice: summed
                tasks.append(t)
            comms = [_comm(100 * r, 100 * ((r + 1) % 3), 5.0 + k), _comm(100 * r, 999, 1.0)]
            phs.append({"id": k, "tasks": tasks, "communications": comms, "user_defined": {"hermes_capacity": r + 1.0}})
        docs.append({"type": "LBDatafile", "metadata": {"type": "LBDatafile", "rank": r}, "phases": phs})
    tr = read_trace(_write(tmp_path, "f", docs))
    assert tr.phase_ids == [0, 2, 3]
    for ph in tr.phases:
        k = [0, 2, 3].index(ph.phase)
        want_ids = sorted(t["entity"]["seq_id"] for d in docs for t in d["phases"][k]["tasks"])
        assert ph.ids.tolist() == want_ids
        for row, oid in enumerate(ph.ids.tolist()):
            r = next(r for r, d in enumerate(docs) for t in d["phases"][k]["tasks"] if t["entity"]["seq_id"] == oid)
            t = next(t for t in docs[r]["phases"][k]["tasks"] if t["entity"]["seq_id"] == oid)
            assert ph.ranks[row] == r and ph.loads[row] == t["time"] and ph.home[row] == t["entity"]["home"]
            subs = {}
            for s in t["subphases"]:
                subs[s["id"]] = subs.get(s["id"], 0.0) + s["time"]
            assert {int(s): x for s, x in zip(ph.subphase_ids, ph.subphases[row]) if s in subs} == subs
            assert ph.user["task_footprint_bytes"][row] == t["user_defined"]["task_footprint_bytes"]
        last = [d["phases"][k]["tasks"][-1]["user_defined"].get("rank_working_bytes", 0.0)
                if d["phases"][k]["tasks"] else 0.0 for d in docs]
        if ph.rank_working is not None:
            assert ph.rank_working.tolist() == last
        assert ph.rank_user["hermes_capacity"].tolist() == [1.0, 2.0, 3.0]
        assert ph.comm_from.size == 6 and np.all(np.diff(ph.comm_from) >= 0)


def test_the_limits_are_one_line_each(tmp_path, monkeypatch):
    import hermes.trace.lbdatafile as lb

    stem = _write(tmp_path, "l", _two_ranks((0, 1, 2)))
    monkeypatch.setattr(lb, "MAX_TRACE_PHASES", 2)
    with pytest.raises(TraceError, match=r"l\.0\.json: 3 phases, more than hermes reads \(limit 2\)"):
        read_trace(stem)
    monkeypatch.setattr(lb, "MAX_TRACE_PHASES", 10)
    monkeypatch.setattr(lb, "MAX_TRACE_RANKS", 1)
    with pytest.raises(TraceError, match=r"2 rank files, more than hermes reads \(limit 1\)"):
        read_trace(stem)
    monkeypatch.setattr(lb, "MAX_TRACE_RANKS", 10)
    monkeypatch.setattr(lb, "MAX_TRACE_KEYS", 1)
    docs = _two_ranks((0,))
    docs[0]["phases"][0]["tasks"][0]["user_defined"] = {"a": 1.0, "b": 2.0}
    with pytest.raises(TraceError, match=r"2 distinct keys in the tasks' user_defined, more than hermes reads"):
        read_trace(_write(tmp_path, "u", docs))


def test_phases_marked_identical_are_counted_before_they_are_made(tmp_path):
    """A metadata range of 10¹² identical phases (or a thousand of 10⁷) is refused at once, without a set of its
    ids (the old reader built one per file: gigabytes); ranges that the skipped ones cancel cost nothing."""
    import time

    docs = _two_ranks((0,))
    for doc in docs:
        doc["metadata"]["phases"] = {"skipped": {"list": [], "range": []},
                                     "identical_to_previous": {"list": [], "range": [[1, 10**12]]}}
    t0 = time.process_time()
    with pytest.raises(TraceError, match=r"marks 1,000,000,000,000 phases identical to the previous one, more than "
                                         r"hermes reads \(limit 1,000,000 phases\)") as err:
        read_trace(_write(tmp_path, "m", docs))
    assert "\n" not in str(err.value)
    for doc in docs:
        doc["metadata"]["phases"] = {"skipped": {"list": [], "range": [[5, 10**12]]},
                                     "identical_to_previous": {"list": [2, 3], "range": [[1000 * j, 1000 * j + 10**7]
                                                                                       for j in range(1, 1000)]}}
    tr = read_trace(_write(tmp_path, "n", docs))
    assert tr.phase_ids == [0, 2, 3] and np.array_equal(tr.phase(3).loads, tr.phase(0).loads)
    assert time.process_time() - t0 < 5.0


def test_trace_info_writes_what_the_summary_holds_a_phase_at_a_time(tmp_path):
    """hermes trace info streams its table and its JSON (10⁶ phases as dicts were a gigabyte): the text is
    json.dumps of trace_summary, and the table format_trace_summary of it."""
    import io

    from hermes.trace.lbdatafile import format_trace_summary, write_trace_summary

    docs = _two_ranks((0, 1, 2))
    docs[0]["phases"][1]["communications"].append(_comm(0, 555, 9.0))  # no task's: counted apart
    tr = read_trace(_write(tmp_path, "s", docs))
    for as_json, want in ((True, json.dumps(trace_summary(tr)) + "\n"),
                          (False, format_trace_summary(trace_summary(tr)) + "\n")):
        out = io.StringIO()
        write_trace_summary(tr, out, as_json=as_json)
        assert out.getvalue() == want
    assert "1 communication(s) with an endpoint that is no task of its phase are not counted" in want


@pytest.mark.parametrize("given", ["stats", "stats.0.vom"])
def test_lbaf_vom_files_are_named_as_a_format_hermes_does_not_read(tmp_path, given):
    for r in range(2):
        (tmp_path / f"stats.{r}.vom").write_text("0,1,0.5\n0,2,0.25\n")
    with pytest.raises(TraceError) as err:
        read_trace(tmp_path / given)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / given}: LBAF's .vom object maps")
    assert "give a vt LBDatafile JSON trace" in message and "\n" not in message


def test_another_suffix_is_named_too(tmp_path):
    (tmp_path / "loads.csv").write_text("a,b\n")
    with pytest.raises(TraceError, match=r"loads\.csv: '\.csv' files are not a trace format hermes reads: give a vt "):
        read_trace(tmp_path / "loads.csv")
    (tmp_path / "one.json").write_text("{}")  # JSON of another name: where the rank files should be
    with pytest.raises(TraceError, match=r"no LBDatafile .*one\.json\.0\.json: give the stem"):
        read_trace(tmp_path / "one.json")
