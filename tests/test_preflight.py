"""hermes.lifecycle.preflight: what ``hermes run`` checks before starting mpiexec (files, mesh, magnitudes, memory)."""

from __future__ import annotations

import pytest

from hermes.errors import HermesError, MeshError, ScenarioError
from hermes.lifecycle.preflight import (CELL_BYTES, PROCESSOR_BYTES, RANK_BYTES, check_memory,
                                        memory_needed, mesh_cells, preflight)
from hermes.machine import memory_available, ranks_on_this_machine
from hermes.scenario import QUICKSTART, parse_scenario
from tests.conftest import ROOT


def _sc(tmp_path=None, **top):
    return parse_scenario({**QUICKSTART, **top}, base_dir=tmp_path or ".")


def test_memory_model_and_what_the_machine_has():
    assert memory_needed(10**6, 4, 2) == 4 * RANK_BYTES + 10**6 * (CELL_BYTES + 2 * 16)
    avail = memory_available()
    assert avail is None or 0 < avail < 2**60


def test_a_grid_beyond_the_memory_is_refused_in_one_line():
    sc = _sc(mesh={"grid": "1000x1000"})
    check_memory(sc.mesh, sc.adaptation.phases, 10**6, 4, available=10**10)  # 1.4 GB of 10 GB: fine
    with pytest.raises(ScenarioError) as err:
        check_memory(sc.mesh, sc.adaptation.phases, 10**6, 4, available=10**9)
    assert str(err.value).startswith("mesh.grid: 1000x1000 needs about 1.") and "available" in str(err.value)


def test_hosted_processors_count_in_the_memory_estimate():
    # 2 processes hosting 4,096 processors: each processor beyond the processes' own costs PROCESSOR_BYTES
    assert memory_needed(10**6, 2, 3, 4096) == 2 * RANK_BYTES + 4094 * PROCESSOR_BYTES + 10**6 * (CELL_BYTES + 48)
    assert memory_needed(10**6, 4, 3, 4) == memory_needed(10**6, 4, 3)
    sc = _sc(mesh={"grid": "1000x1000"})
    need = memory_needed(10**6, 2, sc.adaptation.phases, 100_000)
    check_memory(sc.mesh, sc.adaptation.phases, 10**6, 2, available=int(need) + 1, processors=100_000)
    with pytest.raises(ScenarioError) as err:
        check_memory(sc.mesh, sc.adaptation.phases, 10**6, 2, available=int(need) - 1, processors=100_000)
    assert "99998 more hosted processors" in str(err.value) and "\n" not in str(err.value)


def test_too_many_processors_for_the_memory_is_refused_before_launching(tmp_path, monkeypatch, capsys):
    """A P the memory estimate refuses (the machine made to have 8 GiB): one line, exit 2, no mpiexec started."""
    import hermes.cli

    monkeypatch.setattr("hermes.lifecycle.preflight.memory_available", lambda: 8 * 2**30)
    monkeypatch.setattr("hermes.runtime.launch.run_job", lambda cmd: pytest.fail(f"mpiexec started: {cmd}"))
    code = hermes.cli.main(["run", "--set", "processors=20000", "--set", "mesh.grid=200x150", "--set",
                            "platform.capacities=homo", "--processes", "2", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert code == 2 and "launching" not in out, out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "19998 more hosted processors" in lines[0] and "8 GB available" in lines[0], err


def test_the_launcher_tells_how_many_ranks_share_the_machine(monkeypatch):
    monkeypatch.delenv("OMPI_COMM_WORLD_LOCAL_SIZE", raising=False)
    monkeypatch.delenv("MPI_LOCALNRANKS", raising=False)
    assert ranks_on_this_machine(16) == 16
    monkeypatch.setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4")
    assert ranks_on_this_machine(16) == 4


def test_mesh_cells_of_a_grid_and_of_a_file(tmp_path):
    def cells(sc):
        return mesh_cells(sc.mesh, sc.adaptation, sc.resolve)

    assert cells(_sc(mesh={"grid": "20x19"})) == (380, (1.0, 1.0))
    assert cells(_sc(mesh={"file": str(ROOT / "meshes" / "grid20x19.vtu")})) == (380, (1.0, 1.0))
    (tmp_path / "w.graph").write_text("4 3 10\n2 2\n1 1 3\n1 2 4\n5 3\n")
    assert cells(_sc(tmp_path, mesh={"file": "w.graph"})) == (4, (1.0, 5.0))


@pytest.mark.parametrize("p, top, message", [
    (4, {"platform": {"schedule": "s.csv"}}, "platform.schedule: phase 1 has 3 capacities for 4 processors"),
    (3, {"platform": {"capacities": "homo", "schedule": "s.csv"}, "mesh": {"grid": "1x2"}},
     "more processors (3) than cells (2) in mesh.grid: 1x2"),
    (4, {"processors": 2, "platform": {"capacities": "homo"}}, "processors: the scenario asks for 2 processors, not 4"),
    (4, {"mesh": {"file": "w.graph"}, "adaptation": {"phases": 2, "factor": 1e30}}, "the total load"),
])
def test_preflight_finds_what_only_the_run_found_before(tmp_path, p, top, message):
    (tmp_path / "s.csv").write_text("processor,adpt1\n0,1\n1,2\n2,1\n")
    (tmp_path / "w.graph").write_text("4 3 10\n2 2\n1e40 1 3\n1 2 4\n5 3\n")
    data = {**QUICKSTART, "processors": None, **top}
    if "platform" in top and "capacities" not in top["platform"]:
        data["platform"] = {**top["platform"], "capacities": "homo"}
    sc = parse_scenario(data, base_dir=tmp_path)
    with pytest.raises(HermesError) as err:
        preflight(sc, p)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_mesh_file_is_found_before_launching(tmp_path):
    (tmp_path / "bad.graph").write_text("4 3\n2\n1 3\n2\nnot numbers\n")
    sc = _sc(tmp_path, mesh={"file": "bad.graph"})
    with pytest.raises(MeshError, match="line 5: not a number"):
        preflight(sc, 4)
