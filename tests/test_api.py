"""The Python API's results as pandas tables: pandas is a dependency of hermes (in requirements/lock.txt too), so
these tests fail, not skip, where it is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

import hermes
from hermes.errors import HermesError
from hermes.runtime.launch import _LAUNCHER_ENV
from hermes.lifecycle.records import CSV_COLUMNS, RunResult
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """The quickstart, 2 phases, its 4 processors hosted in one process (no mpiexec)."""
    out = tmp_path_factory.mktemp("api") / "run"
    env = {k: v for k, v in os.environ.items() if k not in _LAUNCHER_ENV}
    res = subprocess.run([sys.executable, "-m", "hermes", "run", "--no-launch", "--no-pictures", "--quiet",
                          "--set", "adaptation.phases=2", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    return out


def test_to_pandas_gives_the_phases_and_the_rank_rows(run_dir):
    result = hermes.load_run(run_dir)
    phases, ranks = result.to_pandas()
    assert isinstance(phases, pd.DataFrame) and isinstance(ranks, pd.DataFrame)
    assert list(phases["phase"]) == [ph["phase"] for ph in result.phases] and len(phases) == 2
    assert list(phases["imbalance_after"]) == [ph["imbalance_after"] for ph in result.phases]
    assert list(ranks.columns) == CSV_COLUMNS and len(ranks) == len(result.ranks) == 2 * result["processors"]


def test_to_pandas_without_pandas_is_one_line_naming_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(HermesError, match=r"^to_pandas needs pandas: pip install pandas$"):
        RunResult({"phases": []}, []).to_pandas()
