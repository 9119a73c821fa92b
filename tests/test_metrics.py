"""Tests of hermes.metrics: partition quality by hand on a small grid, and distributed = serial under mpiexec.

Run as a script (``python -m mpi4py tests/test_metrics.py SEED`` under mpiexec), this file is the MPI check
itself: every rank computes :func:`partition_quality_local` after a random migration, rank 0 compares it with
:func:`partition_quality` on the gathered arrays and prints "OK".
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from hermes.data.mesh import csr_from_edges
from hermes.errors import HermesError
from hermes.metrics import (QUALITY_KEYS, boundary_cells, cell_bytes, cell_sends, cells_moved, edge_cut,
                            migration_volume, partition_quality, subdomain_graph)
from tests.tolerances import gamma

# A 4 × 2 grid of cells, c = 4 j + i:     4 5 6 7     owners:  0 2 2 3
#                                          0 1 2 3              0 0 1 1
EDGES = np.array([(0, 1), (1, 2), (2, 3), (4, 5), (5, 6), (6, 7), (0, 4), (1, 5), (2, 6), (3, 7)])
OWNER = np.array([0, 0, 1, 1, 0, 2, 2, 3])
PREV = np.array([0, 0, 1, 1, 0, 0, 2, 2])  # cells 5 (0 → 2) and 7 (2 → 3) moved
WEIGHTS = np.arange(1.0, 9.0)


def small_grid():
    xadj, adjncy = csr_from_edges(8, EDGES)
    rows = np.repeat(np.arange(8), np.diff(xadj))
    return xadj, adjncy, (rows + adjncy).astype(float)  # edge weight of (a, b) = a + b, symmetric


def test_quality_by_hand():
    xadj, adjncy, ew = small_grid()
    q = partition_quality(xadj, adjncy, OWNER, WEIGHTS, edge_weights=ew, prev_owner=PREV, bytes_per_cell=10)
    assert list(q) == list(QUALITY_KEYS)
    # loads 8, 7, 13, 8 (Σ 36, mean 9); cut edges (1,2) (4,5) (6,7) (1,5) (2,6) (3,7): weights 3+9+13+6+8+10
    # boundary: every cell but 0; adjacent parts: {1,2}, {0,2,3}, {0,1,3}, {1,2}
    assert q == {"parts": 4, "imbalance": pytest.approx(13 / 9), "max_load": 13.0, "edge_cut": 6,
                 "edge_cut_weight": 49.0, "boundary_cells": 7, "neighbours_max": 3, "neighbours_mean": 2.5,
                 "migration_cells": 2, "migration_weight": 14.0, "migration_bytes": 20}


def test_quality_options():
    xadj, adjncy, _ = small_grid()
    q = partition_quality(xadj, adjncy, OWNER, WEIGHTS, capacities=[2, 1, 2, 1], prev_owner=PREV,
                          bytes_per_cell=100 + np.arange(8))
    assert q["imbalance"] == pytest.approx(4 / 3)  # fair loads 12, 6, 12, 6: rank 3 has 8
    assert q["edge_cut_weight"] == q["edge_cut"] == 6  # unit edge weights by default
    assert q["migration_bytes"] == 105 + 107
    bare = partition_quality(xadj, adjncy, OWNER, WEIGHTS, p=6)
    assert bare["migration_cells"] is bare["migration_weight"] is bare["migration_bytes"] is None
    assert bare["parts"] == 6 and bare["neighbours_mean"] == pytest.approx(10 / 6)  # two empty parts count
    assert bare["imbalance"] == pytest.approx(13 / 6)


@pytest.mark.parametrize("seed", range(3))
def test_quality_agrees_with_the_single_metrics(seed):
    from hermes.data.generators import grid

    rng = np.random.default_rng(seed)
    mesh = grid(9, 7)
    owner, prev = rng.integers(0, 4, mesh.n_cells), rng.integers(0, 4, mesh.n_cells)
    w = rng.uniform(0.5, 2, mesh.n_cells)
    q = partition_quality(mesh.xadj, mesh.adjncy, owner, w, p=4, prev_owner=prev)
    assert q["edge_cut"] == edge_cut(mesh.xadj, mesh.adjncy, owner)
    assert q["boundary_cells"] == boundary_cells(mesh.xadj, mesh.adjncy, owner)
    assert (q["migration_cells"], q["migration_weight"]) == migration_volume(prev, owner, w)


def test_the_movement_of_cells_is_read_by_its_names_then_by_the_aliases():
    """cells_moved / cell_sends of a summary's phase record: the new keys first, else (a summary written before
    them) quality.migration_cells / migrated_cells; None when neither is recorded."""
    new = {"cells_moved": 85, "cell_sends": 88, "migrated_cells": 88, "quality": {"migration_cells": 85}}
    assert (cells_moved(new), cell_sends(new)) == (85, 88)
    old = {"migrated_cells": 88, "quality": {"migration_cells": 85}}
    assert (cells_moved(old), cell_sends(old)) == (85, 88)
    assert cells_moved({"cells_moved": 0, "quality": {"migration_cells": 5}}) == 0  # 0 is a value, not absent
    assert cell_sends({"cell_sends": 0, "migrated_cells": 5}) == 0
    for bare in ({}, {"quality": None}, {"quality": [1]}, {"cells_moved": None, "cell_sends": None}):
        assert cells_moved(bare) is None and cell_sends(bare) is None
    # the totals of a summary: cell_sends, else migrated_cells
    assert cell_sends({"cell_sends": 289, "migrated_cells": 289}) == cell_sends({"migrated_cells": 289}) == 289


@pytest.mark.parametrize("kwargs, message", [
    ({"owner": OWNER[:-1]}, "owner has shape"),
    ({"owner": OWNER + 1}, "outside the parts"),
    ({"prev_owner": PREV[:3]}, "prev_owner has shape"),
    ({"capacities": [1, 1]}, "2 capacities for"),
    ({"edge_weights": np.ones(3)}, "edge_weights has shape"),
    ({"prev_owner": PREV, "bytes_per_cell": np.ones(2)}, "bytes_per_cell has shape"),
])
def test_quality_bad_input(kwargs, message):
    xadj, adjncy, _ = small_grid()
    args = {"owner": OWNER, **kwargs}
    owner = args.pop("owner")
    with pytest.raises(HermesError, match=message):
        partition_quality(xadj, adjncy, owner, WEIGHTS, p=4, **args)


def test_cell_bytes_is_what_migration_packs():
    from hermes.data.distributed import LocalDomain
    from hermes.data.migrate import _nbytes

    xadj, adjncy, _ = small_grid()
    dom = LocalDomain(rank=0, size=2, gid=np.arange(8), weight=WEIGHTS, coords=np.zeros((8, 2)), xadj=xadj,
                      adjncy=adjncy, nbr_owner=OWNER[adjncy] % 2,
                      fields={"u": np.zeros(8), "tag": np.zeros(8, np.int32), "vec": np.zeros((8, 3))})
    mask = np.array([1, 0, 1, 1, 0, 0, 1, 0], bool)
    assert cell_bytes(dom)[mask].sum() == _nbytes(dom.take(mask))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.slow
def test_distributed_quality_equals_serial(seed):
    from tests.conftest import run_mpi

    res = run_mpi(3, [str(seed)], script=Path(__file__), timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1] == "OK"


def _mpi_main(seed: int) -> None:
    """Under mpiexec: partition_quality_local after a random migration = partition_quality on gathered arrays."""
    from mpi4py import MPI
    from hermes.runtime.plain import plain

    from hermes.data.distributed import gather_to_root, scatter_domain
    from hermes.data.generators import grid
    from hermes.data.migrate import migrate
    from hermes.data.partition import metis_partition
    from hermes.metrics import partition_quality_local

    comm = plain(MPI.COMM_WORLD)
    rank, p = comm.Get_rank(), comm.Get_size()
    mesh = grid(13, 11)
    rng = np.random.default_rng(seed)
    mesh = mesh.with_weights(rng.uniform(0.5, 3.0, mesh.n_cells))
    owner0 = metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, seed=seed) if rank == 0 else None
    fields = {"u": np.arange(mesh.n_cells) * 0.5, "tag": np.arange(mesh.n_cells, dtype=np.int32)}
    dom = scatter_domain(comm, mesh if rank == 0 else None, owner0, fields if rank == 0 else None)
    caps = np.array([0.5, 0.3, 0.2])[:p] if p == 3 else None
    local_rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(p)[rank])
    for step in range(3):
        before = gather_to_root(comm, dom, mesh.n_cells)
        prev_gid = dom.gid.copy()
        dest = np.where(local_rng.random(dom.n) < 0.2, local_rng.integers(0, p, dom.n), rank)
        dest[0] = rank
        dom, stats = migrate(comm, dom, dest)
        ew = 1.0 + (np.repeat(dom.gid, np.diff(dom.xadj)) + dom.adjncy) % 5  # symmetric in the two ends
        nbytes = cell_bytes(dom)
        q = partition_quality_local(comm, dom, capacities=caps, edge_weights=ew, prev_gid=prev_gid,
                                    bytes_per_cell=nbytes)
        assert q == comm.bcast(q, root=0), "ranks disagree"
        assert q["migration_bytes"] == comm.allreduce(stats.bytes_sent), "bytes differ from what was sent"
        after = gather_to_root(comm, dom, mesh.n_cells, extra={"bytes": nbytes})
        if rank == 0:
            owner, w, ex = after
            rows = np.repeat(np.arange(mesh.n_cells), np.diff(mesh.xadj))
            ref = partition_quality(mesh.xadj, mesh.adjncy, owner, w, capacities=caps,
                                    edge_weights=1.0 + (rows + mesh.adjncy) % 5, prev_owner=before[0],
                                    bytes_per_cell=ex["bytes"])
            for key in QUALITY_KEYS:
                if isinstance(ref[key], float):
                    # sums of ≤ n positive terms in another order, their ratios and differences from 1: γ_{n+4}
                    # times (the ratio + 1) on each side
                    tol = 2 * gamma(mesh.n_cells + 4) * (1 + abs(ref[key]))
                    assert q[key] == pytest.approx(ref[key], abs=tol), (step, key, q[key], ref[key])
                else:
                    assert q[key] == ref[key], (step, key, q[key], ref[key])
            assert ref["migration_cells"] > 0
    # a bad argument on one rank raises on every rank (no rank is left waiting)
    try:
        partition_quality_local(comm, dom, prev_gid=dom.gid, bytes_per_cell=np.ones(dom.n + (rank == 1)))
    except HermesError as err:
        assert "rank 1" in str(err)
    else:
        raise AssertionError("bad bytes_per_cell accepted")
    q = partition_quality_local(comm, dom)
    assert q["migration_cells"] is None and q["edge_cut_weight"] == q["edge_cut"]
    if rank == 0:
        print("OK")


if __name__ == "__main__":
    _mpi_main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)


def test_subdomain_graph_counts_each_cut_edge_once():
    from hermes.data.generators import grid

    mesh = grid(4, 3)  # cells numbered row by row
    x = np.arange(12) % 4
    y = np.arange(12) // 4
    owner = np.where(x < 2, 0, np.where(y < 2, 1, 2))  # left half | top right | bottom-right row
    edges, boundary = subdomain_graph(mesh.xadj, mesh.adjncy, owner)
    # 0|1: rows 0-1 across x = 2 (2 edges); 0|2: row 2 (1); 1|2: x = 2, 3 between rows 1 and 2 (2)
    assert edges.tolist() == [[0, 1], [0, 2], [1, 2]] and boundary.tolist() == [2, 1, 2]
    assert boundary.sum() == edge_cut(mesh.xadj, mesh.adjncy, owner)
