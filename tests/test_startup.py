"""Start-up: the command line and a rank import only what they use (checked in sys.modules of a fresh process,
not timed), the registry knows every balancer without importing it, and ``hermes run`` says what its set-up
does."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hermes.balance.registry import BUILTIN, Registry
from hermes.runtime.launch import _LAUNCHER_ENV
from tests.conftest import ROOT

FAMILIES = sorted(set(BUILTIN.values()))
HEAVY = ["scipy.optimize", "matplotlib", *FAMILIES]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return env


def loaded_after(code: str, modules: list[str]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    res = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=_env(),
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["run", "--help"]])
def test_the_command_line_imports_no_balancer_scipy_optimize_or_matplotlib(argv):
    code = f"import contextlib, io\nfrom hermes.cli import main\nwith contextlib.redirect_stdout(io.StringIO()):\n" \
           f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass"
    assert loaded_after(code, [*HEAVY, "hermes.balance", "numpy"]) == []


def test_import_hermes_is_lazy_and_its_api_still_works():
    assert loaded_after("import hermes", [*HEAVY, "hermes.balance", "numpy"]) == []
    code = ("import hermes\nm = hermes.Model.create(3, [(0, 1), (1, 2)], loads=[6, 0, 0], capacities=[1, 1, 1])\n"
            "assert abs(hermes.balance(m, 'pcg').flow - [4.0, 2.0]).max() < 1e-12\n"
            "assert callable(hermes.run) and callable(hermes.compare) and callable(hermes.scenario)\n"
            "import hermes.scenario\nassert hermes.scenario.__name__ == 'scenario' and callable(hermes.scenario)")
    assert loaded_after(code, ["matplotlib", "hermes.balance.gossip.grapevine"]) == []


def test_a_rank_imports_the_balancer_its_scenario_names_and_no_other():
    """What a rank runs before the set-up: the CLI, the driver, the scenario, its balancer."""
    code = ("import hermes.cli, hermes.lifecycle.driver, hermes.runtime.hosting\n"
            "from hermes.scenario import load_scenario\n"
            "from hermes.balance.registry import get_balancer\n"
            "sc = load_scenario('scenarios/refine-airfoil.yaml')\nget_balancer(sc.balancer.algorithm)")
    loaded = loaded_after(code, HEAVY)
    # gda0 (the scenario's) and pcg (the default balancer the scenario model validates when it is defined)
    assert loaded == ["hermes.balance.diffusion.gda", "hermes.balance.potential.pcg"]


def test_the_registry_lists_every_name_without_importing_and_imports_on_first_use():
    code = ("from hermes.balance.registry import BALANCERS, get_balancer\nassert len(list(BALANCERS)) == 25\n"
            "try:\n    get_balancer('nope')\nexcept Exception as err:\n    assert 'valid: ada, auto' in str(err)\n")
    assert loaded_after(code, FAMILIES) == []
    assert loaded_after(code + "get_balancer('sos')", FAMILIES) == ["hermes.balance.diffusion.gda",
                                                                   "hermes.balance.diffusion.sos"]


@pytest.mark.parametrize("module", FAMILIES)
def test_each_family_registers_the_names_the_table_gives_it(module):
    mine = sorted(n for n, m in BUILTIN.items() if m == module)
    code = (f"import importlib\nfrom hermes.balance.registry import BALANCERS\nimportlib.import_module({module!r})\n"
            f"print(sorted(n for n, v in BALANCERS._entries.items() if v is not None))")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=_env(),
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert set(mine) <= set(json.loads(res.stdout.replace("'", '"')))


def test_a_table_entry_its_module_does_not_register_is_a_lookup_error():
    reg = Registry({"ghost": "hermes.balance.flow"})
    assert "ghost" in reg and list(reg) == ["ghost"]
    with pytest.raises(LookupError, match="does not register it"):
        reg["ghost"]


def _run(*args):
    return subprocess.run([sys.executable, "-m", "hermes", "run", "--no-launch", "--set", "processors=1",
                           "--set", "mesh.grid=12x12", "--set", "platform.capacities=homo", "--set",
                           "adaptation.phases=2", *args], capture_output=True, text=True, cwd=ROOT, env=_env(),
                          timeout=300)


@pytest.mark.slow
def test_run_prints_each_set_up_step_and_an_eta_that_counts_the_pictures(tmp_path):
    res = _run("--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    starts = ["hermes: ", "set-up: mesh grid12x12 (144 cells) generated in ", "set-up: initial partition (METIS, 1 "
              "part) in ", "set-up: cells sent to their 1 processor in ", "set-up: mesh, initial partition and "
              "distribution in ", "phase 1/2: ", "phase 2/2: ", "results written in "]
    assert len(lines) > len(starts) and all(a.startswith(b) for a, b in zip(lines, starts)), res.stdout
    assert lines[5].endswith(" + drawing 4 pictures") and ", ETA " in lines[5], lines[5]
    assert lines[7].endswith("; drawing 4 pictures"), lines[7]
    assert any(line.startswith("drawn: 4 pictures in ") for line in lines[8:]), res.stdout  # after the drawing
    quiet = _run("--out", str(tmp_path / "q"), "--quiet")
    assert quiet.returncode == 0 and quiet.stdout == "", quiet.stdout
