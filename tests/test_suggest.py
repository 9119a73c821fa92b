""""Did you mean": every place a user names a key, a parameter, a balancer, a panel or a generator answers a typo
with the closest known names (hermes.suggest.did_you_mean), in its one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from hermes.balance.registry import check_params, get_balancer, plugins_deferred
from hermes.compare.experiment import ExperimentError, load_experiment, make_experiment
from hermes.errors import BalancerError, HermesError, MeshError, ScenarioError, keys_at
from hermes.scenario import QUICKSTART, Scenario, parse_scenario
from hermes.suggest import did_you_mean

ROOT = Path(__file__).resolve().parents[1]


def _scenario_error(*overrides: str) -> str:
    with pytest.raises(HermesError) as err:
        parse_scenario(QUICKSTART, overrides=list(overrides)).balancer.params
    return str(err.value)


@pytest.mark.parametrize("override, message", [
    ("mesh.fiel=x.vtu", "mesh.fiel: unknown key (did you mean 'file'?)"),
    ("platfrom.latency=1", "platfrom: unknown key (did you mean 'platform'?)"),
    ("platform.lattency=1", "platform.lattency: unknown key (did you mean 'latency'?)"),
    ("application.iteratoins=3", "application.iteratoins: unknown key (did you mean 'iterations'?)"),
    ("adaptation.region.knd=box", "adaptation.region.knd: unknown key (did you mean 'kind'?)"),
    ("output.lbdatafile.cells_per_blok=2", "output.lbdatafile.cells_per_blok: unknown key (did you mean "
                                           "'cells_per_block'?)"),
])
def test_unknown_scenario_key_in_every_section(override, message):
    assert _scenario_error(override) == message


def test_unknown_key_far_from_every_key_has_no_suggestion():
    assert _scenario_error("mesh.zzzzqqq=1") == "mesh.zzzzqqq: unknown key"


def test_keys_at_walks_sections_and_skips_what_users_do_not_write():
    top = keys_at(Scenario, ())
    assert "mesh" in top and "balancer" in top and "base_dir" not in top  # base_dir: excluded, set by hermes
    assert "file" in keys_at(Scenario, ("mesh",))
    assert "kind" in keys_at(Scenario, ("adaptation", "region"))
    assert keys_at(Scenario, ("mesh", "nonsense")) == keys_at(Scenario, ("mesh",))


@pytest.mark.parametrize("override, close", [
    ("balancer.algoritm=pcg", "(did you mean 'algorithm'?)"),  # a key of balancer:, not a parameter of pcg
    ("balancer.tolerence=1e-3", "(did you mean 'tolerance'?)"),  # a parameter of pcg
    ("balancer.max_iteration=5", "(did you mean 'max_iterations'?)"),
    ("balancer.trigerr=2", "(did you mean 'trigger'?)"),
])
def test_set_balancer_key_suggests_keys_and_parameters(override, close):
    message = _scenario_error(override)
    key = override.split("=")[0]
    assert message.startswith(f"{key}: unknown key {close}: neither a key of balancer: nor a parameter for 'pcg'")


def test_balancer_section_parameter():
    assert _scenario_error("balancer.pcg.tolerence=1e-3") == \
        "balancer.pcg.tolerence: unknown parameter (did you mean 'tolerance'?)"
    with pytest.raises(BalancerError, match=r"^pcg\.tolerence: unknown parameter \(did you mean 'tolerance'\?\)$"):
        check_params("pcg", {"tolerence": 1e-3}, prefix="pcg.")  # hermes replay --param pcg.tolerence=...


def test_balancer_names_everywhere():
    for lookup in (lambda: get_balancer("pgc"), lambda: _deferred("pgc")):
        with pytest.raises(BalancerError, match=r"^unknown balancer 'pgc' \(did you mean 'pcg'\?\); valid: "):
            lookup()
    assert "unknown balancer 'sos_opr' (did you mean 'sos_opt' or 'sos'?)" in _scenario_error(
        "balancer.algorithm=sos_opr")


def _deferred(name):
    with plugins_deferred():
        return get_balancer(name)


def test_flow_and_replay_algorithms(capsys):
    from hermes.cli import main

    assert main(["flow", "--graph", "ring:8", "--algorithm", "pgc"]) == 2
    assert "unknown algorithm 'pgc' (did you mean 'pcg'?); valid: " in capsys.readouterr().err
    trace = str(ROOT / "tests" / "trace" / "lbaf-roundtrip" / "data")
    assert main(["replay", trace, "--algorithm", "pgc", "--out", "unused"]) == 2
    assert "unknown balancer 'pgc' (did you mean 'pcg'?)" in capsys.readouterr().err
    assert main(["replay", trace, "--algorithm", "pcg,sos", "--param", "pgc.tolerance=1e-3", "--out", "unused"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("(pcg, sos) (did you mean 'pcg'?)")
    assert main(["replay", trace, "--algorithm", "pcg", "--param", "pcg.tolerence=1e-3", "--out", "unused"]) == 2
    assert "pcg.tolerence: unknown parameter (did you mean 'tolerance'?)" in capsys.readouterr().err


def test_experiment_keys_and_axes(tmp_path):
    with pytest.raises(ExperimentError, match=r"^experiment: table\.colums: unknown key \(did you mean 'columns'\?\)$"):
        make_experiment({"name": "t", "table": {"colums": ["a"]}, "axes": {"seed": [1, 2]}})
    with pytest.raises(ExperimentError, match=r"^experiment: axs: unknown key \(did you mean 'axes'\?\)$"):
        make_experiment({"name": "t", "axs": {"seed": [1, 2]}, "scenario": {}})
    (tmp_path / "e.yaml").write_text("name: t\naxis:\n  balancer: [pcg, sos]\n")
    with pytest.raises(ExperimentError, match=r"axis: unknown key \(did you mean 'axes'\?\)$"):
        load_experiment(tmp_path / "e.yaml")  # not read as a scenario lacking its mesh
    (tmp_path / "b.yaml").write_text("name: t\naxes:\n  balancer: [pcg, pgc]\n")
    with pytest.raises(ExperimentError, match=r"unknown balancer 'pgc' \(did you mean 'pcg'\?\)"):
        load_experiment(tmp_path / "b.yaml").runs()


def test_plot_panels_and_mesh_generators(tmp_path):
    from hermes.data.meshinfo import generate
    from hermes.viz import plot_run

    with pytest.raises(HermesError, match=r"^--show 'wieghts' \(did you mean 'weights'\?\): expected some of"):
        plot_run(tmp_path, show=["wieghts"], out_dir=tmp_path / "out")
    with pytest.raises(MeshError, match=r"^unknown mesh generator 'airfol' \(did you mean 'airfoil'\?\)"):
        generate("airfol", 100, tmp_path / "a.vtu")


def test_did_you_mean_itself():
    assert did_you_mean("algoritm", ["algorithm", "rounds"]) == " (did you mean 'algorithm'?)"
    assert did_you_mean("zzz", ["algorithm", "rounds"]) == ""
    assert isinstance(ScenarioError("x"), HermesError)


# -- limits said where they happen ------------------------------------------------------------------------------
def _apart(path: Path) -> Path:
    import meshio
    import numpy as np

    pts = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [5, 5, 0], [6, 5, 0], [5, 6, 0]], dtype=float)
    meshio.write(path, meshio.Mesh(pts, [("triangle", np.array([[0, 1, 2], [3, 4, 5]]))]))
    return path


def test_hermes_scenario_refuses_the_mesh_run_refuses(tmp_path, capsys):
    from hermes.cli import main

    two = _apart(tmp_path / "two.vtu")
    assert main(["scenario", "--set", f"mesh.file={two}"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "graph is disconnected (2 components; hermes run needs a connected graph" in out.err
    assert main(["scenario", "--set", f"mesh.file={ROOT / 'meshes' / 'lshape.vtu'}"]) == 0
    assert "lshape.vtu" in capsys.readouterr().out


def test_run_says_the_dropped_cells_in_one_warning(tmp_path, caplog):
    import meshio
    import numpy as np

    from hermes.lifecycle.setup import _read_and_partition

    m = meshio.read(ROOT / "meshes" / "lshape.vtu")
    cells = [("line", np.array([[0, 1], [1, 2]])), ("vertex", np.array([[0]])), *[(b.type, b.data) for b in m.cells]]
    path = tmp_path / "l.vtu"
    meshio.write(path, meshio.Mesh(m.points, cells))
    sc = parse_scenario(QUICKSTART, overrides=[f"mesh.file={path}"])
    with caplog.at_level("WARNING"):
        mesh = _read_and_partition(sc, 4)[0]
    said = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert said == [f"mesh.file {path}: its triangle cells are the work units; dropped: 2 line, 1 vertex"]
    assert mesh.n_cells == sum(len(b.data) for b in m.cells)
