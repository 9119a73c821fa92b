"""SISC and AIAC Brusselator runs under real mpiexec (async_script.py): virtual runs equal the serial simulation
bit for bit (also with random real-time jitter), wall-clock runs match the serial solution to the accuracy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hermes.runtime.launch import _LAUNCHER_ENV
from tests.conftest import ROOT
from tests.mpi.harness import check_script


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("nranks", [3, 4])
def test_async_under_mpiexec(mpirun, nranks):
    check_script(mpirun, "async_script.py", "async", nranks, [], timeout=400)


@pytest.mark.slow
@pytest.mark.mpi
def test_runner_under_mpiexec_prints_the_summary(mpirun, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("processors: 2\napplication: {mode: async}\nproblem: {points: 60, t_end: 0.25}\n"
                    "platform: {speed: 1.0e4}\n")
    proc = mpirun(2, [str(spec)], module="hermes.cli.run_brusselator", timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["mode"] == "async" and out["processors"] == 2 and out["error_vs_serial"] <= 7e-4


@pytest.mark.slow
@pytest.mark.mpi
def test_wrong_job_size_is_one_line_error(mpirun, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("processors: 3\nproblem: {points: 60, t_end: 0.25}\n")
    proc = mpirun(2, [str(spec)], module="hermes.cli.run_brusselator", timeout=120)
    assert proc.returncode == 2
    lines = [ln.strip("\x00 ") for ln in proc.stderr.splitlines()]
    assert lines.count("hermes: error: processors: the spec asks for 3, the job has 2") == 1  # rank 0 only
    assert "Traceback" not in proc.stderr


def _hermes(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "hermes", *args], capture_output=True, text=True, check=False,
                          timeout=300, cwd=ROOT, env=env)


@pytest.mark.slow
@pytest.mark.mpi
def test_hermes_run_launches_a_brusselator_spec(tmp_path):
    """``hermes run`` recognises ``application.kernel: brusselator``, starts mpiexec and prints the result."""
    spec = tmp_path / "s.yaml"
    spec.write_text("name: tiny\nprocessors: 2\napplication: {kernel: brusselator, mode: async}\n"
                    "problem: {points: 60, t_end: 0.25}\nplatform: {speed: 1.0e4}\n")
    proc = _hermes("run", str(spec), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-n 2 " in proc.stdout and "AIAC (async), 2 processors, virtual clock" in proc.stdout
    assert "within the accuracy 0.0007" in proc.stdout
    out = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert out["mode"] == "async" and out["error_vs_serial"] <= 7e-4


@pytest.mark.slow
def test_hermes_run_no_launch_simulates_every_processor_in_one_process(tmp_path):
    """``--no-launch`` outside MPI: a virtual-clock spec runs as the serial simulation (same summary as mpiexec)."""
    from hermes.app.brusselator.study import load_spec, simulate, summarise

    spec = tmp_path / "s.yaml"
    spec.write_text("name: tiny\nprocessors: 3\napplication: {kernel: brusselator, mode: async}\n"
                    "problem: {points: 60, t_end: 0.25}\nplatform: {speed: 1.0e4}\n")
    proc = _hermes("run", str(spec), "--no-launch", "--quiet", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0 and "launching" not in proc.stdout, proc.stdout + proc.stderr
    got = json.loads((tmp_path / "out" / "summary.json").read_text())
    sp = load_spec(spec)
    assert got == json.loads(json.dumps(summarise(sp, *simulate(sp))))
