from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hermes.errors import HermesError, ScenarioError
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
    # a flat parameter of another balancer (metis) is ignored by 'none', not an error
    assert sc.balancer.params == {} and sc.balancer.ignored == ["targets"]
    assert sc.platform.capacities == [1.0, 1.0, 1.0, 2.0]
    sc = parse_scenario(QUICKSTART, overrides=["balancer.algorithm=metis", "balancer.targets=equal"])
    assert sc.balancer.params == {"targets": "equal", "ufactor": 30} and sc.balancer.ignored == []


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


# -- balancer parameters: a home per algorithm ------------------------------------------------------------
def _with_balancer(balancer: dict, overrides: list[str] | None = None):
    return parse_scenario({**QUICKSTART, "balancer": balancer}, overrides=overrides)


def test_per_algorithm_sections_let_the_algorithm_switch():
    bal = {"algorithm": "pcg", "pcg": {"tolerance": 1e-6}, "metis": {"targets": "equal"}}
    assert _with_balancer(bal).balancer.params == {"tolerance": 1e-6, "max_iterations": None, "form": "thesis"}
    sc = _with_balancer(bal, ["balancer.algorithm=metis"])
    assert sc.balancer.params == {"targets": "equal", "ufactor": 30}
    assert _with_balancer(bal, ["balancer.algorithm=gda0"]).balancer.params["tolerance"] == 1e-3  # its default


def test_flat_form_still_read_and_other_balancers_keys_ignored():
    flat = {"algorithm": "pcg", "tolerance": 1e-6}
    assert _with_balancer(flat).balancer.params["tolerance"] == 1e-6
    sc = _with_balancer(flat, ["balancer.algorithm=metis"])  # the YAML holds pcg's parameter: no error
    assert sc.balancer.params == {"targets": "fair", "ufactor": 30} and sc.balancer.ignored == ["tolerance"]
    # a section wins over the same flat key
    both = {"algorithm": "pcg", "tolerance": 1e-6, "pcg": {"tolerance": 1e-4}}
    assert _with_balancer(both).balancer.params["tolerance"] == 1e-4


@pytest.mark.parametrize("balancer, message", [
    ({"algorithm": "pcg", "bogus": 1},
     "balancer.bogus: unknown key: neither a key of balancer: nor a parameter for 'pcg'"),
    ({"algorithm": "pcg", "pcg": {"bogus": 1}}, "balancer.pcg.bogus: unknown parameter"),
    ({"algorithm": "pcg", "pcg": {"tolerance": 3}}, "balancer.pcg.tolerance: must be less than 1, got 3"),
    ({"algorithm": "pcg", "metis": {"targets": "fast"}}, "balancer.metis.targets: "),  # unused sections are checked
    ({"algorithm": "pcg", "pcgg": {"tolerance": 0.1}}, "balancer.pcgg: not a balancer"),
    ({"algorithm": "gda0", "lazy": "yes"}, "balancer.lazy: must be true or false"),
    ({"algorithm": "magic"}, "unknown balancer 'magic'"),
])
def test_balancer_parameter_errors_name_the_key(balancer, message):
    with pytest.raises(HermesError) as err:
        _with_balancer(balancer)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_null_keeps_its_meaning_for_the_chosen_algorithm():
    # fos: k null switches the cost/benefit gate off (it is not "use the default")
    sc = _with_balancer({"algorithm": "fos", "fos": {"k": None}})
    assert sc.balancer.params["k"] is None
    sc = _with_balancer({"algorithm": "metis", "tolerance": None})
    assert sc.balancer.params == {"targets": "fair", "ufactor": 30} and sc.balancer.ignored == ["tolerance"]
    # null for a parameter without a null of its own means its default
    assert _with_balancer({"algorithm": "pcg", "tolerance": None}).balancer.params["tolerance"] == 1e-8
