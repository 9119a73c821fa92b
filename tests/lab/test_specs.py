"""Specs of hermes lab flow: generators against networkx, listing order, seed load distributions, files, errors."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest

from hermes.data.formats import write_chaco
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from hermes.errors import GraphError, ScenarioError
from hermes.lab.specs import (
    build_model,
    parse_capacities,
    parse_graph,
    parse_loads,
    parse_model,
    parse_weights,
)
from tests.tolerances import flops


def _relabel(g: nx.Graph, cols: int) -> nx.Graph:
    return nx.relabel_nodes(g, {(r, c): r * cols + c for r, c in g.nodes})


ORACLES = {
    "path:7": nx.path_graph(7),
    "ring:7": nx.cycle_graph(7),
    "ring:2": nx.path_graph(2),
    "star:6": nx.star_graph(5),
    "mesh:3x5": _relabel(nx.grid_2d_graph(3, 5), 5),
    "mesh:1x4": nx.path_graph(4),
    "torus:4x3": _relabel(nx.grid_2d_graph(4, 3, periodic=True), 3),
    "torus:5x4": _relabel(nx.grid_2d_graph(5, 4, periodic=True), 4),
    "torus:2x4": _relabel(nx.cartesian_product(nx.path_graph(2), nx.cycle_graph(4)), 4),
    "tree:2:12": nx.full_rary_tree(2, 12),
    "tree:3:17": nx.full_rary_tree(3, 17),
    "tree:1:5": nx.path_graph(5),
    "complete:6": nx.complete_graph(6),
    "wheel:7": nx.wheel_graph(7),
    "bipartite:3x4": nx.complete_bipartite_graph(3, 4),
    "path:1": nx.path_graph(1),
}


@pytest.mark.parametrize("spec", sorted(ORACLES))
def test_generators_match_networkx(spec):
    g = parse_graph(spec)
    ref = ORACLES[spec]
    assert g.p == ref.number_of_nodes() and g.q == ref.number_of_edges()
    assert {frozenset(e) for e in g.edges.tolist()} == {frozenset(e) for e in ref.edges}
    assert g.edges.dtype == np.int64 and g.edges.shape == (g.q, 2)


@pytest.mark.parametrize("spec,head", [
    ("ring:5", [[0, 1], [1, 2], [2, 3], [3, 4], [0, 4]]),
    ("star:4", [[0, 1], [0, 2], [0, 3]]),
    ("mesh:2x3", [[0, 1], [0, 3], [1, 2], [1, 4], [2, 5], [3, 4], [4, 5]]),
    ("torus:3x3", [[0, 1], [0, 3], [1, 2], [1, 4], [2, 0], [2, 5], [3, 4], [3, 6], [4, 5], [4, 7], [5, 3]]),
    ("tree:3:6", [[0, 1], [0, 2], [0, 3], [1, 4], [1, 5]]),
    ("wheel:5", [[0, 1], [0, 2], [0, 3], [0, 4], [1, 2], [2, 3], [3, 4], [1, 4]]),
    ("bipartite:2x2", [[0, 2], [0, 3], [1, 2], [1, 3]]),
])
def test_listing_order_is_the_documented_one(spec, head):
    assert parse_graph(spec).edges.tolist()[: len(head)] == head


def test_kmod4_follows_the_listing_order_through_the_model_sort():
    m = parse_model("torus:3x3", "homo", "kmod4", "one")
    w = {tuple(e): x for e, x in zip(m.edges.tolist(), m.weights)}
    # listing order: (0,1) (0,3) (1,2) (1,4) (2,0) ...: the wrap edge (2,0) is edge 4 → weight 1
    assert [w[(0, 1)], w[(0, 3)], w[(1, 2)], w[(1, 4)], w[(0, 2)], w[(2, 5)]] == [1, 2, 3, 4, 1, 2]
    assert sorted(m.weights.tolist()) == sorted((np.arange(18) % 4 + 1.0).tolist())


@pytest.mark.parametrize("spec", ["mesh:4x4", "tree:2:20", "complete:5"])
def test_ijmod3_and_kmod2(spec):
    m = parse_model(spec, "homo", "ijmod3", "one")
    assert np.array_equal(m.weights, (m.edges.sum(axis=1) % 3) + 1.0)
    g = parse_graph(spec)
    assert np.array_equal(parse_weights("kmod2", g), np.arange(g.q) % 2 + 1.0)


def test_capacities():
    # x / Σ x: the sum of a few small integers is exact, the division rounds once, on each side
    assert np.allclose(parse_capacities("hcuw", 6), np.array([1, 2, 3, 4, 1, 2]) / 13, rtol=2 * flops(2), atol=0)
    assert np.allclose(parse_capacities("homo", 4), 0.25, rtol=2 * flops(2), atol=0)
    assert np.allclose(parse_capacities("1,1,2", 3), [0.25, 0.25, 0.5], rtol=2 * flops(2), atol=0)
    assert np.allclose(parse_capacities("3", 4), 0.25, rtol=2 * flops(2), atol=0)
    assert np.allclose(parse_capacities([2.0, 6.0], 2), [0.25, 0.75], rtol=2 * flops(2), atol=0)
    assert parse_capacities("HCUW", 4).sum() == pytest.approx(1.0, rel=flops(2 * 4))


@pytest.mark.parametrize("p", [1, 4, 5, 9])
def test_seed_load_distributions(p):
    one, eq, high, half = (parse_loads(k, p) for k in ("one", "eq", "high", "half"))
    assert one[0] == 500 * p and np.all(one[1:] == 1)           # JPDC §4 ONE
    assert np.all(eq == 200 * p)                               # JPDC §4 EQ
    assert high[0] == 10 and np.all(high[1:] == 1)             # thesis §5.7 HIGH
    heavy = -(-p // 2)                                         # thesis §5.7 HALF: ratio 1 to 5
    assert np.all(half[:heavy] == 5) and np.all(half[heavy:] == 1)
    r = parse_loads("random:7", p)
    assert np.array_equal(r, parse_loads("random:7", p)) and np.all((r >= 1) & (r <= 1000) & (r == np.round(r)))


def test_random_loads_depend_on_the_seed():
    assert not np.array_equal(parse_loads("random:1", 50), parse_loads("random:2", 50))


def test_files(tmp_path):
    el = tmp_path / "g.txt"
    el.write_text("# a ring of 4\n0 1\n\n1 2\n% chaco-style comment\n2 3\n3 0\n")
    g = parse_graph(str(el))
    assert g.p == 4 and g.edges.tolist() == [[0, 1], [1, 2], [2, 3], [3, 0]]
    js = tmp_path / "g.json"
    js.write_text(json.dumps({"p": 3, "edges": [[2, 1], [0, 1]]}))
    g = parse_graph(str(js))
    assert g.p == 3 and g.edges.tolist() == [[2, 1], [0, 1]]
    (tmp_path / "c.txt").write_text("1 2\n3, 4\n")
    assert np.allclose(parse_capacities(str(tmp_path / "c.txt"), 4), np.array([1, 2, 3, 4]) / 10,
                       rtol=2 * flops(2), atol=0)
    (tmp_path / "w.json").write_text("[5, 6]")
    assert np.array_equal(parse_weights(str(tmp_path / "w.json"), g), [5.0, 6.0])
    (tmp_path / "l.txt").write_text("0\n7\n1.5\n")
    m = build_model(g, "homo", str(tmp_path / "w.json"), str(tmp_path / "l.txt"))
    # weights follow their edges: listed (2,1) → 5, (0,1) → 6; the model sorts to (0,1), (1,2)
    assert m.edges.tolist() == [[0, 1], [1, 2]] and m.weights.tolist() == [6.0, 5.0]
    assert m.loads.tolist() == [0.0, 7.0, 1.5]


@pytest.mark.parametrize("content,match", [
    ("0 1\n1 1\n", "line 2: self loop"),
    ("0 1\n1 2\n2 1\n", "line 3: duplicate edge"),
    ("0 1\n1 x\n", "line 2: expected two processor numbers"),
    ("0 1 2\n", "line 1: expected two"),
    ('{"p": 2, "edges": [[0, 2]]}', "out of range"),
    ('{"edges": [[0, 1.5]]}', "integer pairs"),
    ('{"p": 0, "edges": []}', "'p' must be"),
    ("{not json", "not JSON"),
])
def test_bad_graph_files(tmp_path, content, match):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    with pytest.raises(GraphError, match=match) as err:
        parse_graph(str(f))
    assert str(f) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("spec,match", [
    ("path:0", "expected path:N"),
    ("path:x", "expected path:N"),
    ("mesh:3", "expected mesh:RxC"),
    ("torus:3x0", "expected torus:RxC"),
    ("tree:2", "expected tree:K:N"),
    ("tree:0:5", "expected tree:K:N"),
    ("wheel:3", "N ≥ 4"),
    ("complete:100000", "too large"),
    ("hypercube:3", "not a generator"),
    ("no/such/file.txt", "nor an existing file"),
    ("mesh-file:meshes/x.graph", "mesh-file:PATH:P"),
    ("mesh-file:no/such.graph:4", "not found"),
    ("", "non-empty"),
])
def test_bad_graph_specs(spec, match):
    with pytest.raises(GraphError, match=match) as err:
        parse_graph(spec)
    assert "\n" not in str(err.value)
    if spec:
        assert repr(spec) in str(err.value)


def test_disconnected_file_graph_names_the_spec(tmp_path):
    f = tmp_path / "two.json"
    f.write_text(json.dumps({"p": 3, "edges": [[0, 1]]}))
    with pytest.raises(GraphError, match="disconnected") as err:
        parse_model(str(f), "homo", "1", "one")
    assert str(f) in str(err.value)


@pytest.mark.parametrize("fn,spec,match", [
    (parse_capacities, "fast", "expected homo, hcuw"),
    (parse_capacities, "1,2", "need 4 values"),
    (parse_capacities, "1,0,1,1", "value 1 must be positive"),
    (parse_capacities, "1,nan,1,1", "value 1 must be positive"),
    (parse_loads, "many", "expected one of one, eq"),
    (parse_loads, "random:x", "random:SEED"),
    (parse_loads, "1,-1,1,1", "value 1 must be non-negative"),
    (parse_loads, "1,2,3", "need 4 values"),
])
def test_bad_vector_specs(fn, spec, match):
    with pytest.raises(ScenarioError, match=match) as err:
        fn(spec, 4)
    assert repr(spec) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("spec,match", [
    ("heavy", "expected 1, kmod4"), ("kmod0", "modulus"), ("1,2", "need 3 values"), ("1,-2,1", "value 1"),
    ("boundary", "needs a mesh-file graph"),
])
def test_bad_weight_specs(spec, match):
    with pytest.raises(ScenarioError, match=match):
        parse_weights(spec, parse_graph("path:4"))


def test_mesh_file_subdomain_graph(tmp_path):
    mesh = grid(12, 10)
    path = write_chaco(mesh, tmp_path / "g.graph")
    g = parse_graph(f"mesh-file:{path}:5")
    assert g.p == 5 and g.meta["cells"] == 120 and sum(g.meta["part_cells"]) == 120
    # independent recount of the cut edges between every pair of parts (same METIS call, seed 0)
    owner = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, 5, seed=0)
    cut = {}
    for u in range(120):
        for v in mesh.adjncy[mesh.xadj[u]:mesh.xadj[u + 1]]:
            a, b = sorted((int(owner[u]), int(owner[v])))
            if u < v and a != b:
                cut[(a, b)] = cut.get((a, b), 0) + 1
    assert dict(zip(map(tuple, g.edges.tolist()), g.meta["boundary"])) == cut
    m = build_model(g, "homo", "boundary", "eq")
    assert m.is_connected and np.array_equal(m.weights, np.array([cut[e] for e in sorted(cut)], dtype=float))
    with pytest.raises(GraphError, match="more processors"):
        parse_graph(f"mesh-file:{path}:500")
