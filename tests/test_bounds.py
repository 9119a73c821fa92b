"""Every number of the scenario is bounded, and the bounds keep a run's arithmetic finite (issue 8 item 6).

The argument is in hermes/scenario.py ("Bounds"); these tests check that every numeric key of the schema
has finite bounds and refuses non-finite values naming the key, that :func:`check_magnitudes` draws the
line where the docstring says, and that runs at the bounds stay finite (summary.json strict JSON).
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from hermes.errors import ScenarioError
from hermes.files import write_json
from hermes.lab.flow_lab import flow_lab
from hermes.scenario import BIG, QUICKSTART, TINY, Scenario, check_magnitudes, parse_scenario


def _numbers(node, path, defs):
    """(key path, schema node) of every number or integer in the scenario's JSON schema."""
    while "$ref" in node:
        node = defs[node["$ref"].split("/")[-1]]
    for alt in node.get("anyOf", []):
        yield from _numbers(alt, path, defs)
    if node.get("type") == "object":
        for key, sub in node.get("properties", {}).items():
            yield from _numbers(sub, f"{path}.{key}" if path else key, defs)
    if node.get("type") == "array":
        if "items" in node:
            yield from _numbers(node["items"], f"{path}.0", defs)
        for i, sub in enumerate(node.get("prefixItems", [])):
            yield from _numbers(sub, f"{path}.{i}", defs)
    if node.get("type") in ("number", "integer"):
        yield path, node


SCHEMA = Scenario.model_json_schema()
NUMBERS = list(_numbers(SCHEMA, "", SCHEMA.get("$defs", {})))


def test_the_schema_has_the_numbers_we_expect():
    paths = {p for p, _ in NUMBERS}
    assert len(NUMBERS) >= 30
    assert {"mesh.weight", "adaptation.factor", "platform.speed", "platform.latency", "platform.capacities.0",
            "platform.schedule.0.0", "platform.links.0.ranks.1", "seed", "processors"} <= paths


@pytest.mark.parametrize("path, node", NUMBERS, ids=[p for p, _ in NUMBERS])
def test_every_number_has_finite_bounds(path, node):
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    assert low is not None and high is not None, f"{path} is unbounded: {node}"
    assert -BIG <= low < high <= BIG and math.isfinite(low) and math.isfinite(high)


def _with(data: dict, path: str, value) -> dict:
    """QUICKSTART-based data with ``path`` set (lists created where the path needs them)."""
    data = json.loads(json.dumps(data))
    keys = path.split(".")
    cur = data
    for k, nxt in itertools.pairwise(keys):
        if isinstance(cur, list):
            cur = cur[int(k)]
            continue
        if k not in cur or not isinstance(cur[k], (dict, list)):
            cur[k] = [] if nxt.isdigit() else {}
        cur = cur[k]
    last = keys[-1]
    if isinstance(cur, list):
        cur.append(value)
    else:
        cur[last] = value
    return data


def _scenario_data(path: str) -> dict:
    """A valid base for setting ``path``: its section filled in as the key needs."""
    data = dict(QUICKSTART)
    if path.startswith("platform.links"):
        data = _with(data, "platform.links", [{"ranks": [0, 1]}])
    if path.startswith("platform.schedule"):
        data = _with(data, "platform.schedule", [[1.0, 1.0, 1.0, 1.0]])
    if path.startswith("platform.capacities"):
        data = _with(data, "platform.capacities", [1.0, 1.0, 1.0, 1.0])
    if path.startswith("adaptation.region.box"):
        data = _with(data, "adaptation.region", {"kind": "box", "box": [0.0, 0.0, 1.0, 1.0]})
    if path.startswith("adaptation.region.center"):
        data = _with(data, "adaptation.region", {"kind": "disc", "center": [0.5, 0.5], "radius": 0.2})
    if path.startswith("extraload"):
        data = _with(data, "extraload", {"tasks": [{"processor": 0, "script": [{"work": 1.0}]}]})
    return data


def _set_in(data: dict, path: str, value) -> dict:
    data = json.loads(json.dumps(data))
    keys = path.split(".")
    cur = data
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
    if isinstance(cur, list):
        cur[int(keys[-1])] = value
    else:
        cur[keys[-1]] = value
    return data


def _key(path: str) -> str:
    """The key an error must name: the path up to its first list index (``platform.schedule.0.0`` →
    ``platform.schedule``)."""
    parts = path.split(".")
    return ".".join(parts[:next((i for i, p in enumerate(parts) if p.isdigit()), len(parts))])


@pytest.mark.parametrize("path", [p for p, n in NUMBERS if n["type"] == "number"])
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e101])
def test_non_finite_and_huge_values_are_refused_naming_the_key(path, value):
    data = _scenario_data(path)
    parse_scenario(data)  # the base is valid
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_set_in(data, path, value))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(_key(path)), text


@pytest.mark.parametrize("path", [p for p, n in NUMBERS if n["type"] == "integer"])
def test_huge_integers_are_refused_naming_the_key(path):
    data = _scenario_data(path)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(_set_in(data, path, 10**30))
    assert str(err.value).startswith(_key(path)), str(err.value)


def _sc(**adaptation) -> Scenario:
    return parse_scenario({**QUICKSTART, "mesh": {"grid": "10x10"},
                           "adaptation": {**QUICKSTART["adaptation"], **adaptation}})


def test_magnitudes_draw_the_line_where_the_docstring_says():
    # weights: 100 cells × factor^phases ≤ BIG  ⇔  factor ≤ (BIG / 100)^(1/phases)
    edge = (BIG / 100) ** (1 / 2)
    sc = _sc(phases=2, factor=edge * (1 - 1e-9))
    check_magnitudes(sc, n_cells=100, p=4)
    with pytest.raises(ScenarioError, match=r"^mesh.weight, adaptation.factor, adaptation.phases: the total load"):
        _sc(phases=2, factor=edge * 1.01)
    # weights ≥ TINY: factor^phases ≥ 1e-100
    _sc(phases=4, factor=TINY ** 0.25 * 1.01)
    with pytest.raises(ScenarioError, match="1e-100 below"):
        _sc(phases=4, factor=TINY ** 0.25 * 0.99)
    # a mesh file's cells count: the same scenario passes with 1 cell and fails with 10⁶
    sc = parse_scenario({**QUICKSTART, "adaptation": {**QUICKSTART["adaptation"], "factor": 1e30, "phases": 3}})
    with pytest.raises(ScenarioError, match="the total load"):
        check_magnitudes(sc, n_cells=10**12, p=4)
    # the smallest capacity divides the computing time
    with pytest.raises(ScenarioError, match="the computing time"):
        check_magnitudes(sc, n_cells=100, p=4, capacities=[1.0, 1.0, 1.0, 1e-98])


def test_pcg_stays_finite_at_the_largest_loads():
    """The serial PCG (the oracle of the distributed one) on loads at BIG: a finite flow that balances."""
    loads = [BIG, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, BIG / 3]
    res = flow_lab("path:8", "homo", "1", ",".join(repr(x) for x in loads), "pcg")
    flow = np.array(res["flow"], dtype=float)
    assert np.all(np.isfinite(flow)) and res["balancing_defect"] is not None
    final = np.array(res["final_loads"])
    # the bound of the balancing defect: a few ulps of the largest load, times the path's length
    assert np.max(np.abs(final - final.mean())) <= 8 * 64 * np.finfo(float).eps * BIG


def test_a_serial_run_at_the_bound_has_a_finite_strict_summary(tmp_path):
    from hermes.api import run

    factor = (BIG / 100) ** 0.5 * 0.5  # the total load of 100 cells stays just below BIG
    sc = parse_scenario({**QUICKSTART, "processors": 1, "mesh": {"grid": "10x10"},
                         "platform": {"capacities": "homo"}, "output": {"pictures": False},
                         "adaptation": {"phases": 2, "factor": factor,
                                        "region": {"kind": "box", "box": [-1, -1, 2, 2]}}})  # every cell, every phase
    res = run(sc, out=tmp_path / "r", quiet=True)
    text = (tmp_path / "r" / "summary.json").read_text()

    def no_constant(name):
        raise AssertionError(f"summary.json holds {name}")

    summary = json.loads(text, parse_constant=no_constant)
    assert summary["weight_final"] == pytest.approx(100 * factor**2, rel=1e-12)  # 0.25 BIG
    assert math.isfinite(summary["total_time"])
    assert "\0" not in summary["versions"]["mpi"] and summary["versions"]["mpi"].startswith(("Open MPI", "MPICH"))
    assert res.summary["weight_final"] == summary["weight_final"]


def test_summary_json_is_strict(tmp_path, caplog):
    write_json(tmp_path / "s.json", {"a": [1.0, math.nan], "b": {"c": np.float64(math.inf)}})
    assert json.loads((tmp_path / "s.json").read_text()) == {"a": [1.0, None], "b": {"c": None}}
    assert "a[1] is nan" in caplog.text and "b.c is inf" in caplog.text
