"""Security cases: what a file or a name received from someone else can make hermes do.

The rules (docs/RUNNING.md, "What a run writes"): reading a document never runs code (no pickle, no
YAML tag that builds an object, no import of a module a data file names) and never exhausts the machine (sizes,
nesting and expanded YAML aliases are bounded); a name never leaves its directory; hermes writes through
exclusive temporary files, deletes only inside directories that carry its marker, and never follows a planted
symlink. Checkpoints have their own module (tests/test_checkpoint_security.py), pictures theirs
(tests/viz/test_plot_hostile.py), the deletion faults theirs (tests/test_faults.py).
"""

from __future__ import annotations

import ast
import json
import os
import time
from pathlib import Path

import pytest

from hermes.claims import LOCK, MARKER, claim_dir, clear_dir, read_marker
from hermes.errors import BalancerError, HermesError, ScenarioError
from hermes.files import RunDirError, slug, write_atomic
from hermes.loaders import (MAX_DEPTH, MAX_NODES, dump_yaml, json_depth, json_shape, load_json, load_yaml, parse_json,
                            parse_yaml)
from hermes.scenario import QUICKSTART, load_scenario, parse_scenario, yaml_value
from tests.conftest import ROOT

HERMES = ROOT / "hermes"
#: the one module that parses YAML or JSON text itself; every other reader goes through it
LOADERS = HERMES / "loaders.py"
#: JSON read from a pipe of hermes' own child process (the extra-load runner's protocol), not from a file
INTERNAL_JSON = {HERMES / "extraload" / "task_worker.py"}


def _calls(path: Path):
    """(dotted name, call node) of every call in a module."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            parts = []
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                parts.append(f.id)
            yield ".".join(reversed(parts)), node


def _modules():
    return sorted(p for p in HERMES.rglob("*.py"))


def test_no_module_imports_pickle_or_marshal():
    """No pickle (or marshal, shelve, dill) anywhere in hermes: nothing hermes reads can be code."""
    bad = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in
                    ("pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "joblib")]
    assert not bad, bad


def test_numpy_never_loads_with_pickle():
    """Every np.load passes allow_pickle=False; no np.load(..., allow_pickle=True) or read_array without it."""
    bad = []
    for path in _modules():
        for name, node in _calls(path):
            if name.endswith(("np.load", "numpy.load", "format.read_array", "fmt.read_array")):
                kw = {k.arg: k.value for k in node.keywords}
                if not (isinstance(kw.get("allow_pickle"), ast.Constant) and kw["allow_pickle"].value is False):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not bad, bad


def test_yaml_and_json_text_is_parsed_only_by_the_loaders():
    """yaml.safe_load/load/full_load/unsafe_load and json.load(s) appear only in hermes/loaders.py (and in the
    extra-load runner's pipe protocol): every document a user gives is read with the size, depth and alias
    limits."""
    bad = []
    for path in _modules():
        if path == LOADERS:
            continue
        for name, node in _calls(path):
            if name in ("yaml.load", "yaml.safe_load", "yaml.full_load", "yaml.unsafe_load", "yaml.load_all",
                        "yaml.safe_load_all") or (name in ("json.load", "json.loads") and path not in INTERNAL_JSON):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert not bad, bad


@pytest.mark.parametrize("text", [
    "!!python/object/apply:os.system ['touch {mark}']",
    "a: !!python/object/new:os.system ['touch {mark}']",
    "a: !!python/name:os.system",
    "a: !!python/module:os",
    "a: !!binary aGVsbG8=",  # a tag of the safe schema: read as bytes, still data
])
def test_yaml_tags_never_build_objects(tmp_path, text):
    mark = tmp_path / "executed"
    source = text.format(mark=mark)
    try:
        value = parse_yaml(source, "doc")
    except ScenarioError as err:
        assert "a tag hermes does not read" in str(err)
    else:
        assert isinstance(value, dict) and isinstance(value["a"], bytes)
    assert not mark.exists()
    with pytest.raises(ValueError, match="a tag hermes does not read|not valid"):
        if "binary" in text:
            raise ValueError("not valid")  # (a --set value of bytes is refused by the scenario's types instead)
        yaml_value(source)


def test_the_billion_laughs_is_refused_in_milliseconds(tmp_path):
    """9 levels of 9 aliases (10⁹ values in a few hundred bytes) under a key the balancer ignores: refused
    while the node graph is counted (linear in the distinct nodes), before validation copies it."""
    lines = ["mesh: {grid: 10x10}", "balancer:", "  algorithm: none", "  metis:", '    a0: &a0 ["lol"]']
    lines += [f"    a{k}: &a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, 10)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert path.stat().st_size < 600
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match=f"expand to more than {MAX_NODES:,} values"):
        load_scenario(path)
    assert time.perf_counter() - t0 < 5.0  # generous: the count itself takes about a millisecond


def test_aliases_within_the_limit_read_as_plain_data():
    doc = parse_yaml("a: &x {grid: 10x10}\nmesh: *x\n", "doc")
    assert doc == {"a": {"grid": "10x10"}, "mesh": {"grid": "10x10"}}


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 50_000])
def test_deep_documents_are_refused_not_a_recursion_error(depth):
    for text in ("[" * depth + "]" * depth, "{a: " * depth + "1" + "}" * depth):
        with pytest.raises(ScenarioError, match="nested more than"):
            parse_yaml(text, "doc")
    with pytest.raises(ScenarioError, match=f"nested {depth} levels deep"):
        parse_json("[" * depth + "]" * depth, "doc")


def _shape_by_hand(text: str) -> tuple[int, int]:
    """json_shape's oracle: a character-by-character scan."""
    depth = deepest = 0
    values, inside, escaped = 1, False, False
    for ch in text:
        if inside:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                inside = False
        elif ch == '"':
            inside = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
            values += 1
        elif ch in "]}":
            depth -= 1
        elif ch == ",":
            values += 1
    return deepest, values


def test_json_shape_equals_a_scan_by_hand_whatever_the_chunks():
    """Strings full of brackets, commas and escaped quotes and backslashes, cut at every chunk size from 1 byte:
    the chunked, vectorised scan agrees with the oracle (a bug at a chunk boundary would miscount)."""
    import random

    rng = random.Random(7)
    leaves = [1, 'a\\"b[', "x\\\\", "}{,", 2.5, None, '\\\\\\"[[', ""]

    def doc(level=0):
        r = rng.random()
        if level > 5 or r < 0.3:
            return rng.choice(leaves)
        if r < 0.65:
            return [doc(level + 1) for _ in range(rng.randint(0, 4))]
        return {f'k{i}\\"{{': doc(level + 1) for i in range(rng.randint(0, 4))}

    for _ in range(200):
        text = json.dumps(doc())
        for chunk in (1, 2, 3, 7, 64, 1 << 20):
            assert json_shape(text, chunk=chunk) == _shape_by_hand(text), (text, chunk)


def test_json_depth_skips_strings_and_escapes():
    assert json_depth('{"a": "[[[[\\"{{{", "b": [1, [2]]}') == 3
    assert json_depth("[]") == 1 and json_depth("3") == 0


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_has_no_non_finite_constants(constant):
    with pytest.raises(ScenarioError, match="is not a JSON number"):
        parse_json(f"[{constant}]", "doc")


def test_files_are_measured_before_they_are_read(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(300 * 2**20)  # sparse: 300 MB that cost nothing to make
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match=r"is 300 MB, more than the 256 MB hermes reads"):
        load_json(big)
    assert time.perf_counter() - t0 < 2.0
    with pytest.raises(ScenarioError, match="more than the 1 kB hermes reads"):
        load_yaml(big, max_bytes=1024)
    os.mkfifo(tmp_path / "fifo")  # no size and no end: refused, never waited on (nobody writes into it)
    t0 = time.perf_counter()
    with pytest.raises(ScenarioError, match="is not a regular file"):
        load_yaml(tmp_path / "fifo")
    assert time.perf_counter() - t0 < 2.0


def test_yaml_12_numbers_and_quoted_strings_round_trip():
    """``1e100`` is a number (YAML 1.2) where YAML 1.1 read a string; a string that looks like one is written
    quoted by dump_yaml and read back as the string."""
    assert parse_yaml("a: 1e100\nb: -2E-3\nc: 20x19\nd: '1e5'\n", "d") == {"a": 1e100, "b": -0.002, "c": "20x19",
                                                                             "d": "1e5"}
    data = {"name": "1e5", "x": ["2e3", 2e3, "0x5", "20x19"]}
    assert parse_yaml(dump_yaml(data), "d") == data
    sc = parse_scenario({**QUICKSTART, "platform": {"capacities": "homo", "speed": "1e5"}})
    assert sc.platform.speed == 1e5


@pytest.mark.parametrize("value", [True, False, [1, True], {"ranks": [0, True]}])
def test_no_bool_where_a_number_is_meant(value):
    key, v = ("platform.links", [value]) if isinstance(value, dict) else ("processors", value)
    if isinstance(value, list):
        key = "platform.capacities"
    with pytest.raises(ScenarioError, match=r"must be a (positive )?number.*, got (true|false|True|a list)"):
        parse_scenario(QUICKSTART, overrides=[f"{key}={json.dumps(v)}"])


def test_every_numeric_field_of_every_input_model_refuses_a_bool():
    """Walk the input models (scenario, Brusselator spec, extra-load tasks, monitor): a boolean given to any
    field that holds numbers but no booleans is refused — the rule of hermes.strict.Strict, whatever the field."""
    from pydantic import BaseModel

    from hermes.app.brusselator.study import BrusselatorSpec
    from hermes.extraload.tasks import TaskFile
    from hermes.monitor.series import MonitorSpec
    from hermes.scenario import Scenario
    from hermes.strict import Strict, admits_bool, admits_number

    seen, checked = set(), []

    def walk(model):
        if model in seen:
            return
        seen.add(model)
        assert issubclass(model, Strict), f"{model.__name__} does not derive from hermes.strict.Strict"
        for name, f in model.model_fields.items():
            if admits_number(f.annotation) and not admits_bool(f.annotation):
                checked.append(f"{model.__name__}.{name}")
                validator = model.__pydantic_decorators__.field_validators
                assert any("*" in d.info.fields for d in validator.values()), model
            for sub in _models(f.annotation):
                walk(sub)

    def _models(annotation):
        from typing import get_args

        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield annotation
        for a in get_args(annotation):
            yield from _models(a)

    for m in (Scenario, BrusselatorSpec, TaskFile, MonitorSpec):
        walk(m)
    assert len(checked) > 40, checked


def test_plugins_named_by_a_scenario_must_be_balancers(tmp_path, monkeypatch):
    """An import path names a balancer class or a function run(ctx) — a built-in, a module, an arbitrary class
    (never instantiated when it has no run method) or a callable of another arity is refused before launch."""
    marker = tmp_path / "instantiated"
    (tmp_path / "hostile_mod.py").write_text(
        "import pathlib\n"
        f"class NotABalancer:\n    def __init__(self):\n        pathlib.Path({str(marker)!r}).touch()\n"
        "def two(ctx, other):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for path, words in [("os:system", "a built-in function is not a balancer"),
                        ("os:path", "module is not a balancer"),
                        ("hostile_mod:NotABalancer", "NotABalancer is not a balancer"),
                        ("hostile_mod:two", "must take one argument")]:
        with pytest.raises(BalancerError, match=words):
            parse_scenario(QUICKSTART, overrides=[f"balancer.algorithm={path}"])
    assert not marker.exists()


def test_names_never_leave_their_directory(tmp_path):
    for label in ("..", ".", "../../etc", "/etc/passwd", "a\0b", "-rf", "..hidden", "\n"):
        s = slug(label)
        assert s and "/" not in s and "\0" not in s and not s.startswith((".", "-"))
        assert (tmp_path / s).resolve().parent == tmp_path.resolve()


def test_clearing_needs_the_marker_and_stays_inside(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("keep")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "f").write_text("keep")
    with pytest.raises(RunDirError, match="carries no hermes marker"):
        clear_dir(foreign)
    assert (foreign / "f").read_text() == "keep"
    lock = claim_dir(tmp_path / "run")
    run = tmp_path / "run"
    (run / "a").symlink_to(outside)
    (run / "b").symlink_to(outside / "f")
    (run / "d").mkdir()
    (run / "d" / "c").symlink_to(outside)
    clear_dir(run)
    assert sorted(p.name for p in run.iterdir()) == sorted([MARKER, LOCK])
    assert (outside / "f").read_text() == "keep"
    lock.release()


def test_a_symlinked_marker_or_lock_is_not_hermes(tmp_path):
    real = tmp_path / "real"
    claim_dir(real).release()
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / MARKER).symlink_to(real / MARKER)
    assert read_marker(real) == "run" and read_marker(fake) is None
    other = tmp_path / "other"
    other.mkdir()
    (other / LOCK).symlink_to(tmp_path / "victim")
    write_atomic(other / MARKER, json.dumps({"hermes": "run"}))
    with pytest.raises(RunDirError, match="cannot lock"):
        claim_dir(other)
    assert not (tmp_path / "victim").exists()


def test_atomic_writes_replace_a_planted_symlink_not_its_target(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "summary.json").symlink_to(victim)
    write_atomic(tmp_path / "d" / "summary.json", "{}")
    assert victim.read_text() == "keep" and not (tmp_path / "d" / "summary.json").is_symlink()


def test_a_forged_lock_token_cannot_join_a_held_lock(tmp_path):
    lock = claim_dir(tmp_path / "r")
    with pytest.raises(RunDirError, match="in use"):
        claim_dir(tmp_path / "r", token="0" * 32)
    lock.release()


def test_errors_are_hermes_errors():
    for err in (ScenarioError, BalancerError, RunDirError):
        assert issubclass(err, HermesError)


# -- issue 38: nothing runs from the directory the user stands in ------------------------------------------------
#: modules a downloaded data directory might hold; each leaves a marker and fails if imported
PLANTED = ("yaml", "numpy", "random", "hermes", "mpi4py", "json", "argparse", "pydantic", "matplotlib",
           "sitecustomize", "usercustomize")
EXAMPLE_PLUGIN = ROOT / "examples" / "custom_balancer"


def _planted(tmp_path: Path, skip: tuple[str, ...] = ()) -> tuple[Path, Path, dict[str, str]]:
    """A directory of planted modules (and a PYTHONSTARTUP hook), a directory for their markers, and an
    environment that names the example plug-in through PYTHONPATH. (An empty PYTHONPATH entry would put the
    current directory on the launcher's own path before hermes runs — Python's doing, docs/RUNNING.md; the
    children hermes starts drop it, test_children_get_safe_path_and_keep_the_named_plugin_directory.)"""
    import sys

    from hermes.runtime.launch import _LAUNCHER_ENV

    cwd, marks = tmp_path / "downloaded", tmp_path / "marks"
    cwd.mkdir()
    marks.mkdir()
    for name in (*PLANTED, "startup"):
        if name not in skip:
            (cwd / f"{name}.py").write_text(f"open({str(marks / name)!r}, 'w').write('imported')\n"
                                            f"raise RuntimeError('planted {name}.py imported')\n")
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env.update(PYTHONPATH=str(EXAMPLE_PLUGIN), PYTHONSTARTUP=str(cwd / "startup.py"),
               MPLBACKEND="Agg", PATH=str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""))
    return cwd, marks, env


@pytest.mark.mpi
@pytest.mark.slow
def test_a_run_imports_nothing_from_the_current_directory(tmp_path):
    """``hermes run`` launched from a directory of planted modules: the launcher, every rank (python -P -m mpi4py),
    the launch probe and the drawing worker of a refined run import none of them, and the plug-in named through
    PYTHONPATH still loads. Before: the ranks imported random.py (and the run failed with a traceback)."""
    import subprocess
    import sys

    cwd, marks, env = _planted(tmp_path)
    out = tmp_path / "run"
    res = subprocess.run([str(Path(sys.executable).with_name("hermes")), "run", "--set", "mesh.grid=8x8", "--set",
                          "adaptation.phases=2", "--set", "adaptation.kind=refine", "--processes", "2", "--set",
                          "balancer.algorithm=fixed_diffusion:FixedStepDiffusion", "--set", "balancer.steps=20",
                          "--out", str(out)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["balancer"] == "fixed_diffusion:FixedStepDiffusion" and summary["balancer_params"] == {"steps": 20}
    assert (out / "partition-002.png").is_file()  # drawn by the worker (hermes.viz.ahead) while the phases ran


def test_the_drawing_workers_import_nothing_from_the_current_directory(tmp_path, monkeypatch):
    """Pictures drawn by two fresh interpreters (hermes.viz.parallel) from a directory of planted modules. Before:
    each worker (python -m hermes.viz.draw_worker) imported them and failed."""
    from mpi4py import MPI
    from hermes.runtime.plain import plain

    from hermes.lifecycle import driver
    from hermes.viz import plot_run

    sc = parse_scenario(QUICKSTART, overrides=["mesh.grid=8x8", "adaptation.phases=2", "output.pictures=false",
                                               "processors=1", "platform.capacities=homo"])
    driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / "run", quiet=True)
    cwd, marks, env = _planted(tmp_path)
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    monkeypatch.setenv("PYTHONSTARTUP", env["PYTHONSTARTUP"])
    pictures = plot_run(tmp_path / "run", out_dir=tmp_path / "pictures", workers=2, timeline=False)
    assert len(pictures) == 3 and all(p.is_file() for p in pictures)
    assert sorted(p.name for p in marks.iterdir()) == []


@pytest.mark.mpi
@pytest.mark.slow
def test_compare_s_runs_import_nothing_from_the_current_directory(tmp_path):
    """``hermes compare`` from a directory of planted modules: every run is done and nothing planted is imported.
    Before: every run failed (its ranks imported random.py) and compare exited 0."""
    import subprocess
    import sys

    cwd, marks, env = _planted(tmp_path)
    res = subprocess.run([str(Path(sys.executable).with_name("hermes")), "compare", "--set", "mesh.grid=8x6", "--set",
                          "adaptation.phases=1", "--set", "run.processes=1", "--jobs", "2", "--set-axis",
                          "balancer.algorithm=none,pcg", "--out", str(tmp_path / "exp"), "--no-report", "--quiet"],
                         capture_output=True, text=True, cwd=cwd, env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
    rows = (tmp_path / "exp" / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",done," in row or row.endswith(",done") or "done" in row for row in rows[1:])


def test_python_m_hermes_drops_the_current_directory(tmp_path):
    """``python -m hermes`` puts the current directory first on sys.path; hermes' __main__ removes it before it
    imports anything else (a ``hermes.py`` there is found by Python itself before hermes runs: not planted here)."""
    import subprocess
    import sys

    cwd, marks, env = _planted(tmp_path, skip=("hermes",))
    res = subprocess.run([sys.executable, "-m", "hermes", "scenario", "--set", "mesh.grid=8x8"], capture_output=True,
                         text=True, cwd=cwd, env=env, timeout=120)
    assert res.returncode == 0 and "grid: 8x8" in res.stdout, res.stderr
    assert sorted(p.name for p in marks.iterdir()) == []


def test_children_get_safe_path_and_keep_the_named_plugin_directory():
    """One helper builds every Python hermes starts (hermes.interpreter): -P on the command line, PYTHONPATH kept
    without its empty entries, start-up hooks dropped; and no module of hermes or the benchmarks starts
    ``sys.executable`` without it."""
    import ast

    from hermes.interpreter import child_env, python_command

    assert python_command("-m", "x", python="/py") == ["/py", "-P", "-m", "x"]
    env = child_env({"PYTHONPATH": f"{os.pathsep}plugins{os.pathsep}", "PYTHONSTARTUP": "s.py",
                     "PYTHONINSPECT": "1", "HOME": "/h"})
    assert env == {"PYTHONPATH": "plugins", "HOME": "/h"}
    offenders = []
    for path in [*HERMES.rglob("*.py"), *(ROOT / "benchmarks").glob("*.py")]:
        if path.name == "interpreter.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.List, ast.Tuple)) and node.elts and ast.unparse(node.elts[0]) == "sys.executable":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"Python started without hermes.interpreter.python_command: {offenders}"
