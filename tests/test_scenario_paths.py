"""One rule for paths: a path given on the command line (``--set``, ``--set-axis``, ``--out``) is relative to the
current directory, a path written in a YAML file relative to that file; setting one mesh source on the command
line (``mesh.file`` or ``mesh.grid``) replaces the other; a plug-in balancer's parameter section is keyed by the
name ``balancer.algorithm`` gives."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hermes.compare.experiment import load_experiment
from hermes.errors import BalancerError, ScenarioError
from hermes.lifecycle.directory import run_dir_for
from hermes.lifecycle.preflight import mesh_cells
from hermes.scenario import QUICKSTART, load_scenario, parse_scenario
from tests.conftest import ROOT

EXAMPLE = ROOT / "examples" / "custom_balancer"


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """cwd/ holds its own a.vtu; cwd/exp/ holds a scenario naming a.vtu (its own copy) and a grid scenario."""
    cwd, exp = tmp_path / "cwd", tmp_path / "cwd" / "exp"
    exp.mkdir(parents=True)
    src = (ROOT / "meshes" / "grid20x19.vtu").read_bytes()
    (cwd / "a.vtu").write_bytes(src)
    (exp / "a.vtu").write_bytes(src)
    (cwd / "b.vtu").write_bytes(src)
    base = {k: v for k, v in QUICKSTART.items() if k != "mesh"}
    (exp / "file.yaml").write_text(yaml.safe_dump({**base, "mesh": {"file": "a.vtu"}}))
    (exp / "grid.yaml").write_text(yaml.safe_dump({**base, "mesh": {"grid": "8x6"}}))
    monkeypatch.chdir(cwd)
    return cwd, exp


def test_run_set_paths_are_relative_to_the_current_directory_and_yaml_paths_to_the_file(layout):
    cwd, exp = layout
    assert load_scenario(exp / "file.yaml").resolve(load_scenario(exp / "file.yaml").mesh.file) == exp / "a.vtu"
    sc = load_scenario("exp/file.yaml", ["mesh.file=b.vtu"])  # b.vtu is only in cwd: the old rule failed here
    assert Path(sc.mesh.file) == cwd / "b.vtu"
    sc = load_scenario(exp / "file.yaml", ["output.dir=out/r1"])
    assert run_dir_for(sc.output, sc.name, sc.resolve)[0] == cwd / "out" / "r1"
    # --out: as given, from the current directory
    assert run_dir_for(sc.output, sc.name, sc.resolve, "o2") == (Path("o2"), "--out")


def test_set_mesh_file_replaces_a_grid_and_mesh_grid_a_file(layout):
    cwd, exp = layout
    sc = load_scenario(exp / "grid.yaml", ["mesh.file=a.vtu"])
    assert sc.mesh.grid is None and Path(sc.mesh.file) == cwd / "a.vtu"
    sc = load_scenario(exp / "file.yaml", ["mesh.grid=5x4"])
    assert sc.mesh.file is None and sc.mesh.grid == "5x4"
    with pytest.raises(ScenarioError, match="give exactly one of 'file' or 'grid'"):  # both on one command line
        load_scenario(exp / "grid.yaml", ["mesh.file=a.vtu", "mesh.grid=5x4"])


def test_compare_set_and_set_axis_paths_are_relative_to_the_current_directory(layout):
    cwd, exp = layout
    e = load_experiment(exp / "grid.yaml", sets=["mesh.file=b.vtu"])  # and replaces the base's grid
    (run,) = e.runs()
    assert run.scenario.mesh.grid is None and Path(run.scenario.mesh.file) == cwd / "b.vtu"
    e = load_experiment(exp / "grid.yaml", set_axes=["mesh=b.vtu,a.vtu"])
    assert [Path(r.scenario.mesh.file) for r in e.runs()] == [cwd / "b.vtu", cwd / "a.vtu"]
    e = load_experiment(exp / "grid.yaml", set_axes=["mesh.file=b.vtu"])
    assert [r.scenario.mesh.grid for r in e.runs()] == [None]
    # axes written in an experiment file stay relative to that file
    (exp / "e.yaml").write_text(yaml.safe_dump({"scenario": "grid.yaml", "axes": {"mesh": ["a.vtu", "4x3"]}}))
    assert [r.scenario.mesh.file for r in load_experiment(exp / "e.yaml").runs()] == [str(exp / "a.vtu"), None]
    (exp / "f.yaml").write_text(yaml.safe_dump({"scenario": "grid.yaml", "set": {"mesh.file": "a.vtu"}}))
    (run,) = load_experiment(exp / "f.yaml").runs()
    assert run.scenario.mesh.file == str(exp / "a.vtu") and run.scenario.mesh.grid is None


@pytest.mark.parametrize("algorithm", ["fixed_diffusion:FixedStepDiffusion", "fixed_diffusion.FixedStepDiffusion"])
def test_a_plugin_section_is_keyed_by_the_name_the_algorithm_gives(monkeypatch, algorithm):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    sc = parse_scenario({**QUICKSTART, "balancer": {"algorithm": algorithm, algorithm: {"steps": 7}}})
    assert sc.balancer.params == {"steps": 7}
    sc = parse_scenario({**QUICKSTART, "balancer": {"algorithm": algorithm}},
                        overrides=["balancer.steps=9"])  # flat, as the command line gives it
    assert sc.balancer.params == {"steps": 9}
    with pytest.raises(BalancerError) as err:
        parse_scenario({**QUICKSTART, "balancer": {"algorithm": algorithm, "FixedStepDiffusion": {"steps": 7}}})
    msg = str(err.value)
    assert msg.startswith("balancer.FixedStepDiffusion: the parameters of balancer") and "\n" not in msg
    assert f"'{algorithm}': {{...}}" in msg


def test_a_dotted_plugin_section_can_come_from_the_command_line(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    sc = parse_scenario({**QUICKSTART, "balancer": {"algorithm": "fixed_diffusion.FixedStepDiffusion"}},
                        overrides=["balancer.fixed_diffusion.FixedStepDiffusion.steps=11"])
    assert sc.balancer.params == {"steps": 11}



def test_mesh_constraint_sum_serves_a_sweep_over_single_and_multi_weight_meshes(layout):
    cwd, exp = layout
    (cwd / "m.graph").write_text("4 3 10 2\n1 0 2\n1 3 1 3\n2 0 2 4\n1 0 3\n")
    e = load_experiment(exp / "grid.yaml", sets=["mesh.constraint=sum"], set_axes=["mesh=b.vtu,m.graph"])
    runs = e.runs()
    assert [Path(r.scenario.mesh.file) for r in runs] == [cwd / "b.vtu", cwd / "m.graph"]
    cells = [mesh_cells(r.scenario.mesh, r.scenario.adaptation, r.scenario.resolve) for r in runs]
    assert cells == [(380, (1.0, 1.0)), (4, (1.0, 4.0))]  # 'sum' of one weight
