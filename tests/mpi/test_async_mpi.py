"""SISC and AIAC Brusselator runs under real mpiexec (async_script.py): virtual runs equal the serial simulation
bit for bit (also with random real-time jitter), wall-clock runs match the serial solution to the accuracy."""

from __future__ import annotations

import json

import pytest

from tests.mpi.harness import check_script


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("nranks", [3, 4])
def test_async_under_mpiexec(mpirun, nranks):
    check_script(mpirun, "async_script.py", "async", nranks, [], timeout=400)


@pytest.mark.mpi
def test_runner_under_mpiexec_prints_the_summary(mpirun, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("processors: 2\nproblem: {points: 60, t_end: 0.25}\nplatform: {speed: 1.0e4}\n")
    proc = mpirun(2, [str(spec)], module="hermes.app.brusselator", timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["mode"] == "async" and out["processors"] == 2 and out["error_vs_serial"] <= 7e-4


@pytest.mark.mpi
def test_wrong_job_size_is_one_line_error(mpirun, tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("processors: 3\nproblem: {points: 60, t_end: 0.25}\n")
    proc = mpirun(2, [str(spec)], module="hermes.app.brusselator", timeout=120)
    assert proc.returncode == 2
    lines = [ln.strip("\x00 ") for ln in proc.stderr.splitlines()]
    assert lines.count("error: processors: the spec asks for 3, the job has 2") == 1  # rank 0 only
    assert "Traceback" not in proc.stderr
