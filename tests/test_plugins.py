"""A balancer defined outside hermes runs in ``hermes run`` by entry point and by import path.

The example plug-in (``examples/custom_balancer``) is found through a real distribution's metadata: a
``.dist-info`` directory with an ``entry_points.txt`` on ``PYTHONPATH`` is what ``pip install`` leaves, and
``importlib.metadata`` reads it the same way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_balancer"


def _site(tmp_path: Path, entry: str) -> dict[str, str]:
    """An environment whose PYTHONPATH holds the example and an installed-looking distribution of it."""
    dist = tmp_path / "site" / "hermes_example_balancer-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hermes-example-balancer\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[hermes.balancers]\n{entry}\n")
    path = os.pathsep.join([str(tmp_path / "site"), str(EXAMPLE), str(ROOT)])
    return {**os.environ, "PYTHONPATH": path, "MPLBACKEND": "Agg"}


def _hermes(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


@pytest.mark.slow
def test_entry_point_balancer_is_listed_and_runs(tmp_path):
    env = _site(tmp_path, "fixed_diffusion = fixed_diffusion:FixedStepDiffusion")
    listing = _hermes(env, "balancers", "--verbose")
    assert listing.returncode == 0 and "fixed_diffusion" in listing.stdout
    assert "steps" in listing.stdout and "neighbour steps" in listing.stdout
    out = tmp_path / "run"
    res = _hermes(env, "run", "--out", str(out), "--quiet", "--no-pictures", "--set", "adaptation.phases=2",
                  "--set", "balancer.algorithm=fixed_diffusion", "--set", "balancer.fixed_diffusion.steps=60",
                  "--processes", "1")  # launched (the job finds the plug-in too), its 4 processors on one process
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["balancer"] == "fixed_diffusion" and summary["balancer_params"] == {"steps": 60}
    assert summary["phases"][0]["balance_info"][0]["steps"] == 60


@pytest.mark.slow
def test_import_path_balancer_runs(tmp_path):
    env = _site(tmp_path, "unused = fixed_diffusion:FixedStepDiffusion")
    out = tmp_path / "run"
    res = _hermes(env, "run", "--out", str(out), "--quiet", "--no-pictures", "--set", "adaptation.phases=1",
                  "--set", "balancer.algorithm=fixed_diffusion:FixedStepDiffusion", "--set", "balancer.steps=40",
                  "--processes", "1")
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "summary.json").read_text())["balancer_params"] == {"steps": 40}


@pytest.mark.parametrize("algorithm, message", [
    ("broken", "balancer 'broken': its entry point no_such_module:X fails to load"),
    ("no_such_module:X", "balancer 'no_such_module:X': cannot import no_such_module"),
    ("fixed_diffusion:Nope", "fixed_diffusion has no attribute 'Nope'"),
])
@pytest.mark.slow
def test_broken_plugins_fail_in_one_line(tmp_path, algorithm, message):
    env = _site(tmp_path, "broken = no_such_module:X")
    res = _hermes(env, "run", "--quiet", "--set", f"balancer.algorithm={algorithm}")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and message in lines[0], res.stderr


def test_a_broken_plugin_does_not_take_the_listing_down(tmp_path):
    env = _site(tmp_path, "broken = no_such_module:X")
    listing = _hermes(env, "balancers")
    assert listing.returncode == 0 and "pcg" in listing.stdout


MISBEHAVING = '''
import numpy as np
from hermes.balance import Decision


def wrong_flow(ctx):
    return Decision(flow=np.zeros(ctx.model.q + 5))


def wrong_type(ctx):
    return None


def far_destinations(ctx):
    return Decision(dest=np.full(ctx.dom.n, 99))


def interrupted(ctx):
    raise KeyboardInterrupt("stop")


def exits(ctx):
    raise SystemExit(0)
'''


@pytest.mark.parametrize("name, code, message", [
    ("wrong_flow", 2, "returned a flow of shape"),
    ("wrong_type", 2, "returned NoneType, not a hermes.balance.Decision"),
    ("far_destinations", 2, "expected one rank in [0, 2)"),
    ("interrupted", 1, "failed: KeyboardInterrupt: stop"),
    ("exits", 1, "failed: SystemExit: 0"),
])
@pytest.mark.mpi
@pytest.mark.slow
def test_a_plugin_that_misbehaves_while_it_balances_is_one_line(tmp_path, name, code, message):
    """A plug-in passes the checks before launch but answers wrongly (or raises anything at all, an interrupt
    or SystemExit included) on every rank: one line, a non-zero exit, no traceback, no rank left waiting."""
    (tmp_path / "misbehaving.py").write_text(MISBEHAVING)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "MPLBACKEND": "Agg"}
    res = _hermes(env, "run", "--quiet", "--no-pictures", "--out", str(tmp_path / "run"), "--set", "processors=2",
                  "--set", "mesh.grid=8x6", "--set", "platform.capacities=homo", "--set", "adaptation.phases=1",
                  "--set", f"balancer.algorithm=misbehaving:{name}")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == code and lines and message in lines[0], res.stderr
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
