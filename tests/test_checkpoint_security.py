"""A checkpoint is data: reading one never runs code from it, and every kind of damage is one line before the
job starts (hermes/lifecycle/checkpoint.py).

Each case damages or crafts a copy of a real one-rank checkpoint with the manifest's checksums updated, so
that what stops it is the check under test, not the checksum: pickles (an object array whose pickle would
create a marker file, a rank file that is a pickle), class names outside hermes (a module that would create
a marker file when imported), flipped bytes at 200 random places, a strictly validated manifest, an edited
scenario.yaml. Under ``mpiexec -n 4`` (a real four-rank checkpoint left by a killed run) a damaged checkpoint
is found by the launcher before mpiexec starts, and by every rank of a job started by hand.
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.errors import HermesError
from hermes.lifecycle import checkpoint, codec, driver
from hermes.lifecycle.checkpoint import CheckpointError, load_state, read_manifest, verify_checkpoint
from hermes.runtime.launch import _LAUNCHER_ENV
from hermes.outputs import RUN_OUTPUTS
from hermes.scenario import QUICKSTART, parse_scenario
from tests.conftest import ROOT, run_mpi

BATCH = ROOT / "tests" / "bad_input_batch.py"
RANK0 = Path("checkpoint") / "phase-0002" / "rank-00000.npz"


class Crash(Exception):
    """Stands for a kill after a phase's records and checkpoint."""


class Payload:
    """Pickled, creates the directory ``path`` when unpickled (what a hostile pickle could do)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return os.mkdir, (self.path,)


def _scenario(**extra):
    sets = ["processors=1", "platform.capacities=homo", "mesh.grid=12x10", "adaptation.phases=5",
            "output.pictures=false", "output.checkpoint_every=2", *[f"{k}={v}" for k, v in extra.items()]]
    return parse_scenario(QUICKSTART, overrides=sets)


def _run(sc, out: Path, *, crash_at: int | None = None, resume: bool = False, **kw):
    """Run (or resume) ``out``, stopping after phase ``crash_at``'s records and checkpoint."""

    def fault(r, k):
        if k == crash_at:
            raise Crash

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "_fault", fault)
        try:
            if resume:
                return driver.resume(out, plain(MPI.COMM_SELF), quiet=True, outputs=RUN_OUTPUTS, **kw)
            return driver.run(sc, plain(MPI.COMM_SELF), out_dir=out, quiet=True, outputs=RUN_OUTPUTS)
        except Crash:
            return None


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A run crashed after phase 3: its checkpoint is phase 2's."""
    out = tmp_path_factory.mktemp("pristine") / "run"
    _run(_scenario(), out, crash_at=3)
    assert read_manifest(out).phase == 2
    return out


@pytest.fixture
def run_dir(pristine, tmp_path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(pristine, out)
    return out


def _manifest(run: Path) -> dict:
    return json.loads((run / "checkpoint" / "manifest.json").read_text())


def _set_manifest(run: Path, doc: dict) -> None:
    (run / "checkpoint" / "manifest.json").write_text(json.dumps(doc))


def _replace(run: Path, data: bytes, rank: int = 0) -> None:
    """Rank ``rank``'s file becomes ``data``, with the manifest's size and checksum updated."""
    (run / "checkpoint" / "phase-0002" / f"rank-{rank:05d}.npz").write_bytes(data)
    doc = _manifest(run)
    doc["files"][rank].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    _set_manifest(run, doc)


def _tree(run: Path) -> tuple[dict, dict]:
    text, arrays = codec.unpack((run / RANK0).read_bytes())
    return json.loads(text), arrays


def _one_line(err: BaseException, *words: str) -> str:
    msg = str(err)
    assert "\n" not in msg and msg.startswith("resume: "), msg
    for w in words:
        assert w in msg, msg
    return msg


def _refused(run: Path, *words: str, marker: Path | None = None) -> str:
    """The checkpoint is refused in one line by the launcher's check and by the job's (on one rank), neither
    leaving ``marker``."""
    with pytest.raises(CheckpointError) as err:
        verify_checkpoint(run)
    assert marker is None or not marker.exists()
    msg = _one_line(err.value, *words)
    with pytest.raises(HermesError) as err:
        driver.resume(run, plain(MPI.COMM_SELF), quiet=True)
    assert marker is None or not marker.exists()
    assert str(err.value) == msg
    return msg


# -- no pickle -------------------------------------------------------------------------------------------------
def test_no_file_under_checkpoint_is_a_pickle(run_dir):
    files = [p for p in (run_dir / "checkpoint").rglob("*") if p.is_file()]
    assert {p.suffix for p in files} == {".json", ".npz"} and not list(run_dir.rglob("*.pkl"))
    for path in files:
        assert path.read_bytes()[:1] != b"\x80", path  # the pickle protocol header
    with np.load(run_dir / RANK0, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    assert arrays["tree"].dtype == np.uint8 and not any(a.dtype.hasobject for a in arrays.values())
    json.loads(arrays["tree"].tobytes())  # the state tree is JSON


def test_the_checkpoint_modules_have_no_pickle_and_load_without_it():
    loads = []
    for module in (checkpoint, codec):  # the checkpoint and the codec of its files
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & {"pickle", "marshal", "shelve", "dill", "cloudpickle", "joblib"}
        loads += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "np.load"]
    assert loads and all(any(k.arg == "allow_pickle" and ast.unparse(k.value) == "False" for k in n.keywords)
                         for n in loads)


def _object_npy(path: Path) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.array([Payload(path)], dtype=object), allow_pickle=True)
    return buf.getvalue()


def test_the_payload_of_these_tests_is_live(tmp_path):
    """The crafted object array would create its marker if numpy unpickled it (so the tests below prove
    something)."""
    marker = tmp_path / "ran"
    np.load(io.BytesIO(_object_npy(marker)), allow_pickle=True)
    assert marker.is_dir()


@pytest.mark.parametrize("how", ["hermes' layout", "np.savez", "a bare pickle"])
def test_an_object_array_is_refused_and_never_unpickled(run_dir, tmp_path, how):
    marker = tmp_path / "pwned"
    doc, arrays = _tree(run_dir)
    text = json.dumps(doc).encode()
    if how == "hermes' layout":  # exactly hermes' zip: only the entry's dtype gives it away
        members = [("tree", codec._npy(np.frombuffer(text, np.uint8)))]
        members += [(k, _object_npy(marker) if k == "a0" else codec._npy(a)) for k, a in arrays.items()]
        data = codec._pack(members)
    elif how == "np.savez":
        buf = io.BytesIO()
        np.savez(buf, tree=np.frombuffer(text, np.uint8), **{**arrays, "a0": np.array([Payload(marker)])})
        data = buf.getvalue()
    else:
        import pickle

        data = pickle.dumps(Payload(marker))
    _replace(run_dir, data)
    msg = _refused(run_dir, "rank-00000.npz is damaged", marker=marker)
    if how == "hermes' layout":
        assert "entry a0 is an array of Python objects (pickled), refused" in msg
    assert not marker.exists()


# -- class names -------------------------------------------------------------------------------------------
PROBE = "hermes_checkpoint_probe"


@pytest.mark.parametrize("name", [f"{PROBE}:Thing", "os:system", "builtins:object", "hermes.__main__:main",
                                  "hermes.balance.registry:Registry", "hermes.lifecycle.journal:checkpoint_refs",
                                  "hermes.lifecycle.state:RunState.columns", "hermes.nosuchmodule:Thing",
                                  "hermes:Thing", "hermes.errors:HermesError", 42])
def test_a_class_outside_hermes_is_refused_without_importing_it(run_dir, tmp_path, monkeypatch, name):
    marker = tmp_path / "imported"
    (tmp_path / f"{PROBE}.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).mkdir()\n"
                                          f"class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    doc, arrays = _tree(run_dir)
    assert doc["state"]["object"] == "hermes.lifecycle.state:RunState"
    doc["state"]["object"] = name
    _replace(run_dir, codec.encode_file(doc, arrays))
    _refused(run_dir, "rank-00000.npz is damaged (it holds ", marker=marker)
    assert not marker.exists() and PROBE not in sys.modules
    __import__(PROBE)  # the probe is live: importing it leaves its mark
    assert marker.is_dir()
    sys.modules.pop(PROBE)


def test_a_model_outside_hermes_is_refused(run_dir):
    doc, arrays = _tree(run_dir)
    assert doc["scenario"]["model"] == "hermes.scenario:Scenario"
    doc["scenario"]["model"] = "pydantic.main:BaseModel"
    _replace(run_dir, codec.encode_file(doc, arrays))
    _refused(run_dir, "it holds a class outside hermes: 'pydantic.main:BaseModel'")


@pytest.mark.parametrize("change", ["plug-in", "seed"])
def test_a_scenario_other_than_scenario_yaml_is_refused_before_it_is_validated(run_dir, tmp_path, monkeypatch,
                                                                               change):
    """The scenario a rank file holds is the one scenario.yaml shows (validating it may import a plug-in
    balancer it names by import path: a crafted one is refused first)."""
    marker = tmp_path / "imported"
    (tmp_path / f"{PROBE}.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).mkdir()\n"
                                          f"def run(ctx):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    doc, arrays = _tree(run_dir)
    if change == "plug-in":
        doc["scenario"]["json"]["balancer"]["algorithm"] = f"{PROBE}:run"
    else:
        doc["scenario"]["json"]["seed"] += 1
    _replace(run_dir, codec.encode_file(doc, arrays))
    _refused(run_dir, "rank-00000.npz holds another scenario than the run directory's scenario.yaml",
             marker=marker)
    assert PROBE not in sys.modules
    doc["scenario"]["json"]["output"]["pictures"] = True  # the one key a resume may change
    if change == "seed":
        doc["scenario"]["json"]["seed"] -= 1
        _replace(run_dir, codec.encode_file(doc, arrays))
        assert verify_checkpoint(run_dir).phase == 2


# -- damage ----------------------------------------------------------------------------------------------------
def test_a_flipped_byte_with_the_checksum_updated_is_one_line(run_dir):
    path = run_dir / RANK0
    good = path.read_bytes()
    rng = np.random.default_rng(20240)
    places = [0, 1, len(good) - 1, *rng.choice(len(good), 200, replace=False).tolist()]
    refs = {"comm": MPI.COMM_SELF, "say": print, "balancer": None, "select": None}
    words = set()
    for at in places:
        bad = bytearray(good)
        bad[at] ^= int(rng.integers(1, 256))
        _replace(run_dir, bytes(bad))
        with pytest.raises(CheckpointError) as err:  # any other exception fails the test
            verify_checkpoint(run_dir)
        msg = _one_line(err.value, "rank-00000.npz")
        words.add(msg.split("(")[1].split(":")[0][:30] if "(" in msg else msg)
        with pytest.raises(HermesError) as err:
            load_state(MPI.COMM_SELF, run_dir, lambda sc: refs)
        assert str(err.value) == msg
    _replace(run_dir, good)
    verify_checkpoint(run_dir)
    assert len(words) >= 3  # found by several checks: the zip's CRC-32, the exact layout, the zip header


def test_a_missing_or_truncated_file_is_one_line(run_dir):
    path = run_dir / RANK0
    good = path.read_bytes()
    path.write_bytes(good[:-1])
    _refused(run_dir, "rank-00000.npz is damaged (", "bytes, the manifest says")
    path.unlink()
    _refused(run_dir, "rank-00000.npz is missing")
    path.write_bytes(good)
    doc, arrays = _tree(run_dir)
    arrays["a99"] = np.zeros(3)  # an entry the tree does not name
    _replace(run_dir, codec.encode_file(doc, {**arrays}))
    _refused(run_dir, "entries are not tree, a0, a1")


MANIFESTS = {
    "ranks 0": (lambda d: {**d, "ranks": 0}, "ranks must be a whole number from 1 to 100000, got 0"),
    "ranks -1": (lambda d: {**d, "ranks": -1}, "ranks must be a whole number from 1 to 100000, got -1"),
    "ranks 1e9": (lambda d: {**d, "ranks": 1e9}, "ranks must be a whole number from 1 to 100000, got 1000000000.0"),
    "ranks huge": (lambda d: {**d, "ranks": 10**9}, "ranks must be a whole number from 1 to 100000"),
    "ranks true": (lambda d: {**d, "ranks": True}, "ranks must be a whole number from 1 to 100000, got true"),
    "ranks text": (lambda d: {**d, "ranks": "1"}, "ranks must be a whole number"),
    "phase 0": (lambda d: {**d, "phase": 0}, "phase must be a whole number from 1 to"),
    "phase 2.0": (lambda d: {**d, "phase": 2.0}, "phase must be a whole number from 1 to"),
    "a file entry missing": (lambda d: {**d, "files": []}, "files must list 1 files (one per rank), got 0"),
    "files a mapping": (lambda d: {**d, "files": {}}, "files must list 1 files"),
    "a name with ../": (lambda d: {**d, "files": [{**d["files"][0], "name": "../../../etc/passwd"}]},
                        "files[0]: name must be 'rank-00000.npz', got \"../../../etc/passwd\""),
    "a name with a separator": (lambda d: {**d, "files": [{**d["files"][0], "name": "x/rank-00000.npz"}]},
                                "name must be 'rank-00000.npz'"),
    "another rank's name": (lambda d: {**d, "files": [{**d["files"][0], "name": "rank-00001.npz"}]},
                            "name must be 'rank-00000.npz'"),
    "sha256 too short": (lambda d: {**d, "files": [{**d["files"][0], "sha256": d["files"][0]["sha256"][:63]}]},
                         "files[0]: sha256 must be 64 hexadecimal digits"),
    "sha256 not hex": (lambda d: {**d, "files": [{**d["files"][0], "sha256": "g" * 64}]},
                       "files[0]: sha256 must be 64 hexadecimal digits"),
    "bytes negative": (lambda d: {**d, "files": [{**d["files"][0], "bytes": -1}]}, "files[0]: bytes must be"),
    "bytes a bool": (lambda d: {**d, "files": [{**d["files"][0], "bytes": False}]}, "files[0]: bytes must be"),
    "an extra key in an entry": (lambda d: {**d, "files": [{**d["files"][0], "path": "/etc/passwd"}]},
                                 "files[0] must have exactly name, bytes and sha256"),
    "an extra key": (lambda d: {**d, "note": 1}, "the keys must be"),
    "scenario sha256 missing": (lambda d: {k: v for k, v in d.items() if k != "scenario_sha256"}, "the keys must be"),
    "scenario sha256 short": (lambda d: {**d, "scenario_sha256": "ab"}, "scenario_sha256 must be 64 hexadecimal"),
    "another hermes": (lambda d: {**d, "hermes": "0.0.1"}, "written by hermes 0.0.1, this is hermes"),
    "no version": (lambda d: {k: v for k, v in d.items() if k != "hermes"}, "is not a hermes checkpoint manifest"),
    "a pickled checkpoint (format missing)": (lambda d: {k: v for k, v in d.items() if k != "format"},
                                              "an earlier hermes pickled its checkpoints"),
    "a list": (lambda d: [d], "is not a hermes checkpoint manifest"),
}


@pytest.mark.parametrize("case", sorted(MANIFESTS))
def test_a_bad_manifest_is_one_line(run_dir, case):
    change, words = MANIFESTS[case]
    _set_manifest(run_dir, change(_manifest(run_dir)))
    with pytest.raises(CheckpointError) as err:
        verify_checkpoint(run_dir)
    _one_line(err.value, words)


def test_a_manifest_that_is_not_json_or_too_deep_is_one_line(run_dir):
    man = run_dir / "checkpoint" / "manifest.json"
    man.write_bytes(b"\xff\xfe")
    with pytest.raises(CheckpointError) as err:
        verify_checkpoint(run_dir)
    _one_line(err.value, "manifest.json: not UTF-8 text")
    man.write_text("[" * 10_000 + "]" * 10_000)
    with pytest.raises(CheckpointError) as err:
        verify_checkpoint(run_dir)
    _one_line(err.value, "manifest.json: nested 10000 levels deep (refused")


def test_a_header_of_another_phase_or_rank_is_one_line(run_dir):
    doc, arrays = _tree(run_dir)
    for key, value in [("rank", 1), ("phase", 4), ("ranks", 2), ("rank", False), ("hermes", "0.0.1")]:
        bad = {**doc, "header": {**doc["header"], key: value}}
        _replace(run_dir, codec.encode_file(bad, arrays))
        _refused(run_dir, "rank-00000.npz does not belong to the manifest's phase 2 (rank 0 of 1)")
    bad = {**doc, "header": {**doc["header"], "wall_seconds": "soon"}}
    _replace(run_dir, codec.encode_file(bad, arrays))
    _refused(run_dir, "its header holds a value that is not a number")


@pytest.mark.parametrize("node, words", [
    ({"same": 10**6}, "a reference to an object not read before"),
    ({"ref": "os"}, "a reference to 'os', which this hermes does not supply"),
    ({"array": "a999", "@": 10**6}, "a reference to a missing array"),
    ({"list": [], "@": 0}, "a bad object number 0"),
    ({"bit_generator": "Evil", "state": {}, "seed_seq": None, "@": 10**6}, "an unknown bit generator 'Evil'"),
    ({"scalar": "|O8", "hex": "00" * 8}, "a bad numpy scalar"),
    ({"map": {}, "@": 10**6, "extra": 1}, "an unknown node"),
    ([1, 2], "a bare JSON list"),
])
def test_a_crafted_node_is_one_line(run_dir, node, words):
    doc, arrays = _tree(run_dir)
    doc["state"]["attrs"]["balancer_state"] = node
    _replace(run_dir, codec.encode_file(doc, arrays))
    with pytest.raises(HermesError) as err:
        driver.resume(run_dir, plain(MPI.COMM_SELF), quiet=True)
    _one_line(err.value, words)


# -- the scenario ----------------------------------------------------------------------------------------------
def test_an_edited_scenario_yaml_is_refused_and_kept(run_dir):
    path = run_dir / "scenario.yaml"
    good = path.read_bytes()
    edited = good + b"# edited\n"
    path.write_bytes(edited)
    msg = _refused(run_dir, "scenario.yaml was edited after the run started", "restore the file, or start a new run")
    assert "ranks" not in msg and path.read_bytes() == edited  # refused, not overwritten
    path.unlink()
    _refused(run_dir, "scenario.yaml is missing")
    path.write_bytes(good)
    assert verify_checkpoint(run_dir).phase == 2


def test_a_run_resumed_twice_keeps_its_scenario_check(run_dir, tmp_path):
    """A resumed run's next checkpoint records the scenario.yaml the run started with (not its own scenario,
    which the resume's pictures option changes), so the run resumes again, to the same results."""
    ref = _run(_scenario(), tmp_path / "ref")
    sha = _manifest(run_dir)["scenario_sha256"]
    assert sha == hashlib.sha256((run_dir / "scenario.yaml").read_bytes()).hexdigest()
    assert _run(None, run_dir, resume=True, crash_at=5, pictures=True) is None  # checkpoint 4 written
    assert _manifest(run_dir)["phase"] == 4 and _manifest(run_dir)["scenario_sha256"] == sha
    out = _run(None, run_dir, resume=True, pictures=False)
    assert out.summary["complete"] and [p["phase"] for p in out.summary["phases"]] == [1, 2, 3, 4, 5]
    assert {k: v for k, v in out.summary.items() if "wall" not in k} == \
        {k: v for k, v in ref.summary.items() if "wall" not in k}


# -- four ranks: the launcher finds it before mpiexec, the job on every rank -----------------------------------
def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV and k != "HERMES_FAULT"}
    env["PYTHONPATH"] = str(ROOT)
    env.setdefault("MPLBACKEND", "Agg")
    return env


def _damage(run: Path, case: str) -> str:
    """Damage the four-rank checkpoint in ``run``; the words of the expected error."""
    part = run / "checkpoint" / "phase-0002"
    if case == "flipped":
        data = bytearray((part / "rank-00002.npz").read_bytes())
        data[len(data) // 2] ^= 0x5A
        _replace(run, bytes(data), rank=2)
        return "rank-00002.npz is damaged"
    if case == "missing":
        (part / "rank-00003.npz").unlink()
        return "rank-00003.npz is missing"
    if case == "ranks-0":
        _set_manifest(run, {**_manifest(run), "ranks": 0})
        return "ranks must be a whole number from 1 to 100000, got 0"
    if case == "scenario-edited":
        (run / "scenario.yaml").write_text((run / "scenario.yaml").read_text() + "# edited\n")
        return "scenario.yaml was edited after the run started"
    assert case == "object-array"
    text, arrays = codec.unpack((part / "rank-00001.npz").read_bytes())
    members = [("tree", codec._npy(np.frombuffer(text, np.uint8)))]
    members += [(k, _object_npy(run / "pwned") if k == "a0" else codec._npy(a)) for k, a in arrays.items()]
    _replace(run, codec._pack(members), rank=1)
    return "rank-00001.npz is damaged (entry a0 is an array of Python objects (pickled), refused)"


DAMAGE = ["flipped", "missing", "ranks-0", "scenario-edited", "object-array"]


@pytest.fixture(scope="module")
def four_ranks(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """Copies of a four-rank checkpoint left by a run whose rank 1 was killed after phase 2, each damaged."""
    d = tmp_path_factory.mktemp("four")
    killed = d / "killed"
    res = subprocess.run([sys.executable, "-m", "hermes", "run", "--quiet", "--no-pictures", "--set", "processors=4",
                          "--set", "adaptation.phases=4", "--set", "output.checkpoint_every=1", "--out", str(killed)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, env={**_env(), "HERMES_FAULT":
                                                                                      "kill:1:2"})
    assert res.returncode != 0 and read_manifest(killed).phase == 2, res.stderr
    verify_checkpoint(killed)
    words = {}
    for case in DAMAGE:
        shutil.copytree(killed, d / case)
        words[case] = _damage(d / case, case)
    return d, words


def _batch(d: Path, name: str, argvs: dict[str, list[str]], *, mpi: bool) -> list[dict[str, dict]]:
    spec, out = d / f"{name}.json", d / f"{name}-results.json"
    spec.write_text(json.dumps([{"id": k, "argv": v} for k, v in argvs.items()]))
    if mpi:
        res = run_mpi(4, [str(spec), str(out)], script=BATCH, timeout=300)
    else:
        res = subprocess.run([sys.executable, str(BATCH), str(spec), str(out)], capture_output=True, text=True,
                             timeout=300, cwd=ROOT, env=_env())
    assert res.returncode == 0, res.stdout + res.stderr
    return [{r["id"]: r for r in json.loads(Path(f"{out}.{k}").read_text())} for k in range(4 if mpi else 1)]


def _one_error(res: dict, words: str) -> None:
    assert res["exception"] is None, res["exception"]
    assert "Traceback" not in res["stderr"] + res["stdout"], res["stderr"]
    lines = res["stderr"].splitlines()
    assert len(lines) == 1 and lines[0].startswith("hermes: error: resume: ") and words in lines[0], res["stderr"]
    assert res["code"] == 2


@pytest.mark.mpi
@pytest.mark.slow
def test_a_damaged_checkpoint_is_found_before_mpiexec_starts(four_ranks):
    d, words = four_ranks
    (results,) = _batch(d, "self", {c: ["resume", str(d / c)] for c in DAMAGE}, mpi=False)
    for case in DAMAGE:
        res = results[case]
        assert not res["launched"], f"{case}: found only after mpiexec started"
        _one_error(res, words[case])
        assert res["stdout"] == ""
    assert not (d / "object-array" / "pwned").exists()


@pytest.mark.mpi
@pytest.mark.slow
def test_a_damaged_checkpoint_is_refused_by_every_rank_of_a_job_started_by_hand(four_ranks):
    d, words = four_ranks
    ranks = _batch(d, "mpi", {c: ["resume", str(d / c), "--no-launch", "--quiet"] for c in DAMAGE}, mpi=True)
    for case in DAMAGE:
        _one_error(ranks[0][case], words[case])
        for r, per_rank in enumerate(ranks):
            res = per_rank[case]
            assert res["exception"] is None and not res["phase"], (case, r, res["exception"])
            assert res["code"] == 2 and res["exit_together"] == 2, (case, r, res["code"])
            if r:
                assert res["stderr"] == "" and res["stdout"] == "", (case, r, res["stderr"])
    assert not (d / "object-array" / "pwned").exists()
