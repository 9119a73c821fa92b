"""Checkpoint and resume on one rank, in this process (the kill-and-resume test under mpiexec is in
tests/mpi/test_lifecycle.py): records phase by phase, a crash after a checkpoint, resume to the same
results, and the one-line refusals of a checkpoint that cannot be resumed."""

from __future__ import annotations

import hashlib
import json
import struct

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.runtime.clock import Links
from hermes.errors import HermesError
from hermes.lifecycle import driver
from hermes.lifecycle.checkpoint import load_state, read_manifest, save_state
from hermes.lifecycle.directory import scenario_yaml
from hermes.scenario import QUICKSTART, parse_scenario

WALL = {"wall_seconds", "adapt_wall_seconds"}


class Crash(Exception):
    """Stands for a kill: raised where the test's fault would kill a rank."""


def _scenario(**extra):
    sets = ["processors=1", "platform.capacities=homo", "mesh.grid=12x10", "adaptation.phases=5",
            "output.pictures=false", "output.checkpoint_every=2", *[f"{k}={v}" for k, v in extra.items()]]
    return parse_scenario(QUICKSTART, overrides=sets)


def _crash_after(monkeypatch, phase: int) -> list[dict]:
    """Make the run stop after ``phase``'s records; return what summary.json said after every phase."""
    seen: list[dict] = []

    def fault(r, k):
        seen.append(json.loads((r_out[0] / "summary.json").read_text()))
        if k == phase:
            raise Crash

    r_out: list = []
    real_open = driver.open_run

    def spy_open(r, path, *args, **kwargs):
        r_out.append(path)
        return real_open(r, path, *args, **kwargs)

    monkeypatch.setattr(driver, "_fault", fault)
    monkeypatch.setattr(driver, "open_run", spy_open)
    return seen


def _same_run(a, b) -> None:
    assert {k: v for k, v in a.summary.items() if k not in WALL} == {k: v for k, v in b.summary.items()
                                                                       if k not in WALL}
    assert (a.out_dir / "phases.csv").read_bytes() == (b.out_dir / "phases.csv").read_bytes()
    with np.load(a.out_dir / "partitions.npz") as x, np.load(b.out_dir / "partitions.npz") as y:
        assert sorted(x.files) == sorted(y.files) and all(np.array_equal(x[k], y[k]) for k in x.files)


@pytest.mark.parametrize("extra", [{}, {"adaptation.kind": "refine"}])
def test_a_crashed_run_resumes_to_the_results_of_an_uninterrupted_one(tmp_path, monkeypatch, extra):
    sc = _scenario(**extra)
    ref = driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "ref", quiet=True)
    seen = _crash_after(monkeypatch, 3)
    with pytest.raises(Crash):
        driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "crashed", quiet=True)
    # the records were written as the phases ended, the summary incomplete, the checkpoint of phase 2 kept
    assert [len(s["phases"]) for s in seen] == [1, 2, 3]
    assert [s["checkpoint"] for s in seen] == [None, 2, 2] and not any(s["complete"] for s in seen)
    assert len((tmp_path / "crashed" / "phases.csv").read_text().splitlines()) == 1 + 3
    assert read_manifest(tmp_path / "crashed").phase == 2
    monkeypatch.undo()
    out = driver.resume(tmp_path / "crashed", plain(MPI.COMM_SELF), quiet=True)
    assert out.summary["complete"] is True
    _same_run(out, ref)
    assert not (tmp_path / "crashed" / "checkpoint").exists()
    with pytest.raises(HermesError, match="holds a finished run"):
        driver.resume(tmp_path / "crashed", plain(MPI.COMM_SELF))


def test_a_checkpoint_that_cannot_be_resumed_is_refused_in_one_line(tmp_path, monkeypatch):
    _crash_after(monkeypatch, 2)
    with pytest.raises(Crash):
        driver.run(_scenario(), plain(MPI.COMM_SELF), out_dir=tmp_path / "c", quiet=True)
    monkeypatch.undo()
    man = tmp_path / "c" / "checkpoint" / "manifest.json"
    doc = json.loads(man.read_text())
    state = tmp_path / "c" / "checkpoint" / "phase-0002" / "rank-00000.npz"
    good = state.read_bytes()
    state.write_bytes(good[:-10] + b"0123456789")
    with pytest.raises(HermesError, match=r"^resume: .*rank-00000.npz is damaged"):
        driver.resume(tmp_path / "c", plain(MPI.COMM_SELF))
    state.write_bytes(good)
    four = [{**doc["files"][0], "name": f"rank-{r:05d}.npz"} for r in range(4)]
    man.write_text(json.dumps({**doc, "ranks": 4, "files": four}))
    with pytest.raises(HermesError, match=r"the checkpoint holds 4 ranks, the job has 1"):
        driver.resume(tmp_path / "c", plain(MPI.COMM_SELF))
    man.write_text(json.dumps({**doc, "hermes": "0.0.1"}))
    with pytest.raises(HermesError, match=r"written by hermes 0.0.1, this is hermes "):
        driver.resume(tmp_path / "c", plain(MPI.COMM_SELF))
    man.write_text("{")
    with pytest.raises(HermesError, match=r"^resume: .*manifest.json: not JSON \("):
        driver.resume(tmp_path / "c", plain(MPI.COMM_SELF))
    man.write_text(json.dumps(doc))
    assert driver.resume(tmp_path / "c", plain(MPI.COMM_SELF), quiet=True).summary["complete"] is True


class Plugin:
    """A plug-in's own object: not data a checkpoint holds."""


#: (what a plug-in balancer keeps in ctx.state, where the message says it is, the type it names)
NOT_DATA = {
    "closure": (lambda tmp: lambda: None, "state.balancer_state['hook']", "function"),
    "open file": (lambda tmp: open(tmp / "log.txt", "w"), "state.balancer_state['hook']", "_io.TextIOWrapper"),
    "object in a list": (lambda tmp: [1, {"x": Plugin()}], "state.balancer_state['hook'][1]['x']",
                         f"{__name__}.Plugin"),
}


@pytest.mark.parametrize("case", sorted(NOT_DATA))
def test_state_that_is_not_data_is_reported_in_one_line(tmp_path, monkeypatch, case):
    make, where, kind = NOT_DATA[case]
    real = driver.start

    def start(comm, sc, **kw):
        r = real(comm, sc, **kw)
        r.balancer_state["hook"] = make(tmp_path)
        return r

    monkeypatch.setattr(driver, "start", start)
    with pytest.raises(HermesError) as err:
        driver.run(_scenario(), plain(MPI.COMM_SELF), out_dir=tmp_path / "c", quiet=True)
    assert str(err.value) == (f"checkpoint: the state of rank 0 cannot be saved: {where} holds a {kind} (checkpoints "
                              f"hold arrays, numbers, strings, lists, mappings and hermes' own records)")
    assert not (tmp_path / "c" / "checkpoint" / "manifest.json").exists()


def _same(a, b) -> bool:
    """``a`` and ``b`` equal value for value, type for type (arrays: dtype, shape, memory order, bytes)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return (a.dtype == b.dtype and a.shape == b.shape and a.flags.f_contiguous == b.flags.f_contiguous
                and a.tobytes() == b.tobytes() and b.flags.writeable)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def test_the_state_tree_reads_back_exactly(tmp_path, monkeypatch):
    """Every kind of value a state holds reads back equal and of its type; objects reached twice stay one;
    random streams go on identically (spawn included); hermes records are rebuilt without their __init__."""
    sc = _scenario()
    (tmp_path / "scenario.yaml").write_text(scenario_yaml(sc))
    sha = hashlib.sha256(scenario_yaml(sc).encode()).hexdigest()
    shared = [1, 2]
    rng, mt = np.random.default_rng(7), np.random.Generator(np.random.MT19937(np.random.SeedSequence(3).spawn(2)[1]))
    rng.random(5)  # a stream part-way
    cyclic: list = ["me"]
    cyclic.append(cyclic)
    state = {
        "numbers": [0, -1, 2**200, 1.5, -0.0, float("inf"), float("-inf"), float("nan"), True, None, "é\ud800"],
        "numpy": [np.float64(0.1), np.int32(-3), np.bool_(True), np.float32(np.nan), np.complex128(1 - 2j),
                  np.str_("ab")],
        "arrays": [np.arange(6.0).reshape(2, 3), np.asfortranarray(np.arange(6).reshape(2, 3)), np.array(3.5),
                   np.zeros((0, 3)), np.array(["a", "bc"]), np.arange(4, dtype=">i2"),
                   np.zeros(2, dtype=[("x", "<f8"), ("n", "<i4")])],
        "keys": {1: "int", (0, 1): "tuple", "s": "str", b"k": "bytes", 2.5: "float", None: "none"},
        "containers": ((1, (2,)), {3, 4}, frozenset({"a"}), b"\x00\xff"),
        "shared": [shared, shared], "cyclic": cyclic,
        "rng": rng, "mt": mt, "seq": np.random.SeedSequence(11),
        "record": Links(1e-3, 2e9, {(0, 1): (1e-4, 1e8)}),
        "comm": MPI.COMM_SELF,
    }
    save_state(MPI.COMM_SELF, state, phase=1, run_dir=tmp_path, scenario=sc, refs={"comm": MPI.COMM_SELF},
               keep={"wall_seconds": 1.25}, scenario_sha256=sha)

    def refuse(*args, **kwargs):
        raise AssertionError("a record's __init__ ran while reading a checkpoint")

    monkeypatch.setattr(Links, "__init__", refuse)
    back, head = load_state(MPI.COMM_SELF, tmp_path, lambda s: {"comm": MPI.COMM_SELF})
    monkeypatch.undo()
    assert head["phase"] == 1 and head["wall_seconds"] == 1.25 and head["scenario"] == sc
    for key in ("numbers", "numpy", "arrays", "keys", "containers"):
        assert _same(state[key], back[key]), key
    assert back["shared"][0] is back["shared"][1] and back["shared"][0] == [1, 2]
    assert back["cyclic"][1] is back["cyclic"] and back["cyclic"][0] == "me"
    assert back["record"] == state["record"] and type(back["record"]) is Links and back["comm"] is MPI.COMM_SELF
    for key in ("rng", "mt"):
        assert np.array_equal(back[key].random(1000), state[key].random(1000))
        assert np.array_equal(back[key].integers(0, 2**62, 100), state[key].integers(0, 2**62, 100))
    kids, kids_back = state["rng"].spawn(2), back["rng"].spawn(2)
    assert all(np.array_equal(a.random(10), b.random(10)) for a, b in zip(kids, kids_back))
    assert _same(back["seq"].generate_state(8), state["seq"].generate_state(8))
    assert back["seq"].spawn(1)[0].spawn_key == state["seq"].spawn(1)[0].spawn_key


def test_a_state_nested_too_deep_is_one_short_line(tmp_path):
    deep: list = []
    cur = deep
    for _ in range(150):
        cur.append([])
        cur = cur[0]
    with pytest.raises(HermesError) as err:
        save_state(MPI.COMM_SELF, deep, phase=1, run_dir=tmp_path, scenario=_scenario(), refs={},
                   scenario_sha256="0" * 64)
    msg = str(err.value)
    assert msg.startswith("checkpoint: the state of rank 0 cannot be saved: state[0][0]") and "\n" not in msg
    assert msg.endswith("holds containers nested more than 100 deep") and len(msg) < 300
    assert not (tmp_path / "checkpoint").exists()


@pytest.mark.parametrize("part", ["checkpoint", "checkpoint/phase-0002", "checkpoint/manifest.json",
                                  "checkpoint/phase-0002/rank-00000.npz"])
def test_a_symlink_in_a_checkpoint_is_refused_before_launching(tmp_path, monkeypatch, part):
    """A checkpoint whose directory, phase directory, manifest or rank file has become a symlink (to an intact copy
    elsewhere): ``hermes resume`` refuses it in one line before mpiexec starts — before, it read through the
    link, launched, and the job stopped at its next checkpoint (subdir refuses to write through a link) — and
    the job's own check (``--no-launch``) says the same."""
    import subprocess
    import sys
    from pathlib import Path

    from hermes.lifecycle.checkpoint import verify_checkpoint

    _crash_after(monkeypatch, 2)
    with pytest.raises(Crash):
        driver.run(_scenario(), plain(MPI.COMM_SELF), out_dir=tmp_path / "c", quiet=True)
    monkeypatch.undo()
    real = tmp_path / "c" / part
    moved = tmp_path / "elsewhere"
    real.rename(moved)
    real.symlink_to(moved, target_is_directory=moved.is_dir())
    with pytest.raises(HermesError, match=rf"^resume: .*/c/{part} is a symlink: hermes reads and writes a "
                                          rf"checkpoint only in directories and files of the run's own"):
        verify_checkpoint(tmp_path / "c")
    root = Path(__file__).resolve().parents[1]
    for extra in ([], ["--no-launch"]):
        res = subprocess.run([sys.executable, "-m", "hermes", "resume", str(tmp_path / "c"), *extra],
                             capture_output=True, text=True, cwd=root, timeout=300)
        assert res.returncode == 2 and "launching" not in res.stdout, res.stdout + res.stderr
        assert res.stderr.count("\n") == 1 and f"/c/{part} is a symlink" in res.stderr, res.stderr
    real.unlink()
    moved.rename(real)
    assert verify_checkpoint(tmp_path / "c").phase == 2


def test_a_run_balancing_several_weights_resumes_to_the_same_results(tmp_path, monkeypatch):
    """mesh.constraint: all: the further weights are cell fields of the state, and the per-weight records
    (summary.json's imbalance_per_constraint, phases.csv's weight_2 ...) resume as the uninterrupted run wrote
    them."""
    from hermes.data.generators import grid

    from hermes.data.formats import write_chaco

    mesh = grid(12, 10)
    i = np.arange(mesh.n_cells)
    write_chaco(mesh, tmp_path / "two.graph", vertex_weights=np.column_stack((1 + i % 2, i % 5 == 0)))
    sc = parse_scenario({**QUICKSTART, "mesh": {"file": str(tmp_path / "two.graph"), "constraint": "all"}},
                        overrides=["processors=1", "platform.capacities=homo", "adaptation.phases=5",
                                   "output.pictures=false", "output.checkpoint_every=2"])
    ref = driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "ref", quiet=True)
    assert all(len(p["imbalance_per_constraint"]) == 2 for p in ref.summary["phases"])
    assert "weight_2" in (tmp_path / "ref" / "phases.csv").read_text().splitlines()[0]
    _crash_after(monkeypatch, 3)
    with pytest.raises(Crash):
        driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "crashed", quiet=True)
    monkeypatch.undo()
    _same_run(driver.resume(tmp_path / "crashed", plain(MPI.COMM_SELF), quiet=True), ref)
