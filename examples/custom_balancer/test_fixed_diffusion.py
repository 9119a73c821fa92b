"""The example plug-in's own tests: its serial reference converges to hermes' exact minimal flow on a tree
(a tree has one balancing flow), its parameters are validated by hermes, and ``hermes run`` runs it under
real mpiexec by import path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fixed_diffusion import FixedStepDiffusion  # noqa: E402

import hermes  # noqa: E402
from hermes.balance.flow import minimal_flow  # noqa: E402
from hermes.balance.registry import get_balancer  # noqa: E402
from hermes.errors import BalancerError  # noqa: E402


def _path_model() -> hermes.Model:
    return hermes.Model.create(4, [(0, 1), (1, 2), (2, 3)], [8.0, 1.0, 1.0, 2.0], [0.4, 0.2, 0.2, 0.2])


def test_serial_reference_reaches_the_minimal_flow_on_a_tree():
    m = _path_model()
    exact = minimal_flow(m)
    res = hermes.balance(m, "fixed_diffusion:FixedStepDiffusion", steps=2000)
    # diffusion contracts the defect by λ < 1 per step; 2000 steps leave far less than this bound
    assert np.max(np.abs(res.flow - exact)) <= 1e-9 * np.max(np.abs(exact))
    few = hermes.balance(m, "fixed_diffusion:FixedStepDiffusion", steps=3)
    assert np.max(np.abs(few.flow - exact)) > 1e-3  # three steps are not enough: the steps are really taken


def test_parameters_are_checked_by_hermes():
    info = get_balancer("fixed_diffusion:FixedStepDiffusion")
    assert info.defaults == {"steps": 200} and info.doc.startswith("First-order diffusion")
    with pytest.raises(BalancerError, match="steps: must be greater than or equal to 1"):
        info.check({"steps": 0})
    with pytest.raises(BalancerError, match="bogus: unknown parameter"):
        info.check({"bogus": 1})


@pytest.mark.slow
def test_hermes_run_takes_it_by_import_path(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "hermes", "run", "--out", str(out), "--quiet", "--no-pictures",
           "--set", "balancer.algorithm=fixed_diffusion:FixedStepDiffusion",
           "--set", "balancer.steps=150", "--set", "adaptation.phases=2"]
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["balancer"] == "fixed_diffusion:FixedStepDiffusion"
    assert summary["balancer_params"] == {"steps": 150}
    info = summary["phases"][0]["balance_info"][0]
    assert info["steps"] == 150 and summary["final_imbalance"] < summary["phases"][0]["imbalance_before"]


def test_the_class_is_what_hermes_sees():
    assert get_balancer("fixed_diffusion:FixedStepDiffusion").params is FixedStepDiffusion.Params
