"""The offline labs take bounded arguments: every option has a range, and what they cost together (memory,
work) is checked before any allocation; each refusal is one line naming the option, from the Python API too."""

from __future__ import annotations

import json

import pytest

from hermes.data.meshinfo import MAX_GENERATED_CELLS, generate
from hermes.errors import BalancerError, GraphError, HermesError, MeshError
from hermes.lab.bench import _run as bench_run
from hermes.lab.flow_lab import MAX_FLOW_PROCESSORS, flow_lab
from hermes.lab.gossip import MAX_WORK, gossip_cost, gossip_lab

GOSSIP = dict(ranks=8, objects=100, mapped_ranks=None, loads_spec="iso", iterations=4, rounds=4, fanout=4,
              threshold=1.0, criterion="modified", seed=0)


@pytest.mark.parametrize("change, words", [
    ({"fanout": 10**9}, "--fanout: must be at most 100000, got 1000000000"),
    ({"fanout": 0}, "--fanout: must be at least 1, got 0"),
    ({"fanout": True}, "--fanout: must be an integer, got True"),
    ({"iterations": 10**9}, "--iterations: must be at most 10000, got 1000000000"),
    ({"rounds": 10**9}, "--rounds: must be at most 100000, got 1000000000"),
    ({"iterations": 100, "rounds": 100_000}, "--rounds: with --iterations 100, must be at most 10000"),
    ({"ranks": 10**6}, "--ranks: must be at most 100000, got 1000000"),
    ({"ranks": True}, "--ranks: must be an integer, got True"),
    ({"objects": True}, "--objects: must be an integer, got True"),
    ({"objects": -1}, "--objects: must be at least 0, got -1"),
    ({"mapped_ranks": True}, "--mapped-ranks: must be an integer, got True"),
    ({"mapped_ranks": 9}, "--mapped-ranks: must be at most 8, got 9"),
    ({"threshold": 1e300}, "--threshold: must be a number in [1, 1e+100], got 1e+300"),
    ({"threshold": float("nan")}, "--threshold: must be a number in [1, 1e+100], got nan"),
    ({"seed": 2**40}, "--seed: must be an integer in 0..2147483647, got 1099511627776"),
    ({"ranks": 100_000, "iterations": 100}, "--iterations 100 on --ranks 100000 (--rounds 4, --fanout 4, --objects "
                                            "100): about 1.1e+12 operations, more than the lab's 1e+11"),
    ({"objects": 10**8, "iterations": 10}, "--iterations 10 on --ranks 8 (--rounds 4, --fanout 4, --objects "
                                           "100000000): about 1e+12 operations, more than the lab's 1e+11"),
])
def test_the_gossip_lab_refuses_out_of_bounds(change, words):
    with pytest.raises(BalancerError) as err:
        gossip_lab(**{**GOSSIP, **change})
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_gossip_lab_counts_every_allocation_in_ranks_and_fanout():
    """The bitsets of known ranks (p²) and the picks (p × min(f, p − 1)) count beside the objects: 1e5 ranks
    informing 1e5 peers each need terabytes, refused before anything is allocated."""
    memory, work = gossip_cost(100_000, 100, 4, 4, 100_000)
    assert memory > 3e12 and work > MAX_WORK
    assert gossip_cost(8, 100, 4, 4, 100_000) == gossip_cost(8, 100, 4, 4, 7)  # a fanout beyond p − 1 costs nothing
    with pytest.raises(BalancerError, match=r"^--ranks 100000, --objects 100, --fanout 100000: need about .* GB of "
                                            r"memory|^--iterations 4 on --ranks 100000"):
        gossip_lab(**{**GOSSIP, "ranks": 100_000, "fanout": 100_000})
    res = gossip_lab(**{**GOSSIP, "fanout": 100_000})  # 8 ranks: every other one informed, at once
    assert res["fanout"] == 100_000 and res["iterations_run"] >= 1


def test_the_report_sizes_are_within_the_bounds():
    """benchmarks/grapevine_report.py: 4,096 ranks, 10⁴ objects, i = k = 10, f = 6; 256 ranks, 100 iterations."""
    assert gossip_cost(4096, 10_000, 10, 10, 6)[1] < MAX_WORK / 100
    assert gossip_cost(256, 10_000, 100, 4, 4)[1] < MAX_WORK / 10


@pytest.mark.parametrize("kw, error, words", [
    ({"tol": 1e300}, BalancerError, "--tol balancer.tolerance: must be less than 1, got 1e+300"),
    ({"tol": 0.0}, BalancerError, "--tol balancer.tolerance: must be greater than or equal to 1e-15, got 0.0"),
    ({"params": {"max_iterations": 10**9}}, BalancerError,
     "--param balancer.max_iterations: must be less than or equal to 1000000, got 1000000000"),
    ({"params": {"max_iterations": True}}, BalancerError,
     "--param balancer.max_iterations: must be an integer, got True"),
    ({"graph": f"path:{MAX_FLOW_PROCESSORS + 1}"}, BalancerError,
     "--graph 'path:2049': 2049 processors, more than the flow lab's 2048"),
    ({"graph": "complete:2048", "algorithm": "gda0"}, BalancerError,
     "--param balancer.max_iterations: 100000 iterations on --graph 'complete:2048' (2048 processors, 2096128 "
     "edges) are about 2.1e+11 operations"),
    ({"graph": "path:2000", "algorithm": "implicit", "params": {"sweeps": 1000}}, BalancerError,
     "--param balancer.max_iterations: 100000 iterations on --graph 'path:2000' (2000 processors, 1999 edges, "
     "1000 inner sweeps each)"),
    ({"graph": "path:" + "9" * 5000}, GraphError, "graph spec 'path:9999"),
    ({"graph": "mesh-file:meshes/grid20x19.vtu:99999999999"}, GraphError,
     "too large for the lab (99999999999 parts, at most 1000000)"),
    ({"weights": "kmod" + "9" * 5000}, HermesError, "weights spec 'kmod9999"),
    ({"graph": "x" * 5000}, GraphError, "graph spec 'xxxx"),
])
def test_the_flow_lab_refuses_out_of_bounds(kw, error, words):
    args = {"graph": "path:4", "capacities": "homo", "weights": "1", "loads": "one", "algorithm": "pcg", **kw}
    with pytest.raises(error) as err:
        flow_lab(**args)
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("doc, words", [
    ({"p": 10**12, "edges": [[0, 1]]}, "'p' must be an integer in 1..1000000, got 1000000000000"),
    ({"edges": [[0, 10**30]]}, "too large for the lab (at most 5000000 edges between processors 0..999999)"),
])
def test_graph_files_are_bounded(tmp_path, doc, words):
    (tmp_path / "g.json").write_text(json.dumps(doc))
    (tmp_path / "g.txt").write_text(f"0 1\n1 {10**12}\n")
    with pytest.raises(GraphError, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        flow_lab(str(tmp_path / "g.json"), "homo", "1", "one", "pcg")
    with pytest.raises(GraphError, match=r"g\.txt', line 2: too large for the lab"):
        flow_lab(str(tmp_path / "g.txt"), "homo", "1", "one", "pcg")


def test_flow_bench_checks_its_tolerance_and_sizes():
    with pytest.raises(BalancerError, match=r"^tol tolerance: must be less than 1, got 2"):
        bench_run("path:8", "homo", "1", "one", "gda0", 2.0, None)
    with pytest.raises(BalancerError, match=r"^--graph 'path:5000': 5000 processors"):
        bench_run("path:5000", "homo", "1", "one", "pcg", 1e-6, None)


@pytest.mark.parametrize("size, words", [
    (10**9, f"--size: must be at most {MAX_GENERATED_CELLS} (about 10 GB of memory at 512 bytes per cell), "
            f"got 1000000000"),
    (0, "--size: must be at least 1, got 0"),
    (True, "--size: must be an integer number of cells, got True"),
    (2.5, "--size: must be an integer number of cells, got 2.5"),
])
def test_mesh_generate_refuses_sizes_that_exhaust_memory(tmp_path, size, words):
    with pytest.raises(MeshError) as err:
        generate("large", size, tmp_path / "big.vtu")
    assert str(err.value) == words and not (tmp_path / "big.vtu").exists()
