from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hermes.errors import ScenarioError
from hermes.scenario import QUICKSTART, apply_overrides, load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", ["quickstart", "thesis-homogeneous", "thesis-heterogeneous"])
def test_shipped_scenarios_validate(name):
    sc = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    assert sc.name == name
    if name.startswith("thesis"):
        assert sc.processors == 15 and sc.mesh.grid == "20x19" and sc.adaptation.phases == 7


def test_quickstart_file_matches_embedded():
    sc = load_scenario(ROOT / "scenarios" / "quickstart.yaml")
    assert sc.to_dict() == parse_scenario(QUICKSTART).to_dict()


@pytest.mark.parametrize(
    "patch, expected",
    [
        ({"bogus": 1}, "bogus: unknown key"),
        ({"processors": "many"}, "processors:"),
        ({"processors": 0}, "processors:"),
        ({"clock": "sundial"}, "clock:"),
        ({"mesh": {"grid": "20by19"}}, "mesh:"),
        ({"mesh": {"file": "nowhere.msh"}}, "mesh.file: no such file"),
        ({"platform": {"capacities": [1.0, 0.0, 1.0, 1.0]}}, "capacity of processor 1 must be a positive number"),
        ({"platform": {"capacities": [1.0, 1.0]}}, "platform.capacities: 2 values for 4 processors"),
        ({"application": {"iterations": -1}}, "application.iterations"),
        ({"application": {"kernel": "lbm"}}, "application.kernel"),
        ({"adaptation": {"region": {"kind": "box"}}}, "region kind 'box' needs box"),
        ({"platform": {"links": [{"ranks": [0, 9]}]}}, "platform.links.0.ranks"),
        ({"adaptation": {"region": {"kind": "front", "start": 0, "speed": 0.1, "width": 0.1, "threshold": 0.3}}},
         "threshold only apply to region kind 'indicator'"),
        ({"adaptation": {"region": {"kind": "indicator", "threshold": 0.3, "coarsen_threshold": 0.3}}},
         "coarsen_threshold 0.3 must be below threshold 0.3"),
        ({"adaptation": {"region": {"kind": "indicator", "threshold": 1.5}}}, "adaptation.region.threshold"),
        ({"application": {"kernel": "synthetic"}, "adaptation": {"region": {"kind": "indicator"}}},
         "adaptation.region.kind: indicator needs application.kernel: jacobi"),
        ({"adaptation": {"kind": "refine", "work_per_cell": -1}}, "adaptation.work_per_cell"),
    ],
)
def test_bad_values_give_one_line_with_key_path(patch, expected):
    data = {**QUICKSTART, **patch}
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    msg = str(err.value)
    assert expected in msg and "\n" not in msg


def test_overrides_set_nested_values_parsed_as_yaml():
    sc = parse_scenario(QUICKSTART, overrides=["balancer.algorithm=none", "seed=3", "balancer.targets=equal",
                                               "platform.capacities=[1, 1, 1, 2]"])
    assert sc.balancer.algorithm == "none" and sc.seed == 3
    assert sc.balancer.params == {"targets": "equal"}
    assert sc.platform.capacities == [1.0, 1.0, 1.0, 2.0]


@pytest.mark.parametrize("bad", ["noequals", "=3", "a..b=1"])
def test_bad_override_syntax(bad):
    with pytest.raises(ScenarioError):
        apply_overrides({}, [bad])


def test_malformed_yaml_and_missing_file(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("mesh: [grid: 3x3\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(p)
    with pytest.raises(ScenarioError, match="not found"):
        load_scenario(tmp_path / "absent.yaml")
    p.write_text("- a\n- b\n")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(p)


def test_relative_paths_resolve_against_scenario_dir(tmp_path):
    (tmp_path / "caps.txt").write_text("1 2 3 4\n")
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"processors": 4, "mesh": {"grid": "8x8"}, "platform": {"capacities": "caps.txt"}}))
    sc = load_scenario(p)
    assert sc.resolve("caps.txt") == tmp_path / "caps.txt"
    assert sc.name == "s"
