"""Shared harness of the MPI agreement scripts (balance, diffusion_family, polynomial, practical).

A script runs under ``mpiexec -n P python -m mpi4py tests/mpi/<name>_script.py [seed]`` (PYTHONPATH is the
repository root, see ``tests/conftest.py::run_mpi``). Every rank builds the same seeded model
(:func:`random_model`), takes its own view of it (:class:`RankView`: neighbours, edge indices, load,
capacity, neighbour weights, a fresh :class:`~hermes.runtime.comm.NeighbourComm` on a
:class:`~hermes.runtime.clock.VirtualClock` per run), runs the distributed form and gathers a :class:`Report` per
rank on rank 0, which compares them with the serial reference (:func:`agree`, :func:`compare`) and
appends one line per disagreement to ``failures``. :func:`same_error` checks collective-safe errors and
:func:`finish` prints ``FAIL ...`` lines or ``OK <label> P`` on rank 0 and gives every rank the exit code.
:func:`check_script` is the pytest side: run a script on n ranks and assert it printed ``OK``.

Nothing here imports mpi4py: the scripts pass ``MPI.COMM_WORLD`` in, and the pytest process can import
:func:`check_script` without initialising MPI.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hermes.balance.model import Model
from hermes.balance.registry import BalanceContext
from hermes.runtime.clock import Links, VirtualClock
from hermes.runtime.comm import NeighbourComm
from hermes.errors import BalancerError, GraphError
from tests.tolerances import gamma

__all__ = ["random_model", "slow_first_edge", "time_rtol",
           "RankView", "Report", "gather", "compare", "agree", "same_error",
           "finish", "seed_arg", "check_script"]

#: counters every rank must report exactly as the serial form does
PER_RANK = ("iterations", "exchange_rounds", "collectives")
#: counters whose sum over the ranks must equal the serial form's
SUMMED = ("messages", "bytes")


def time_rtol(counters) -> float:
    """Relative bound on a rank's modelled α-β time against the serial replay: both add the same positive
    terms (≤ 3 rounded operations each: α + w/β and the sum), one per exchange round and collective, in a
    different grouping, so each is within γ of 3 × that count of the exact sum."""
    events = counters.exchange_rounds + sum(counters.collectives.values())
    return 2 * gamma(3 * (events + 1))


def random_model(p: int, seed: int, *, integer: bool = False, homogeneous: bool = False,
                 boost: float = 0.0) -> Model:
    """Random tree plus ``p // 2`` extra edges with heterogeneous loads, capacities and weights.

    ``integer``: loads drawn from {0, …, 39} instead of U(0, 10); ``homogeneous``: unit capacities (no
    draw); ``boost`` is added to processor 0's load.
    """
    rng = np.random.default_rng(seed)
    edges = {(int(rng.integers(0, i)), i) for i in range(1, p)}
    for _ in range(p // 2):
        i, j = sorted(int(v) for v in rng.choice(p, size=2, replace=False))
        edges.add((i, j))
    edges = sorted(edges)
    loads = rng.integers(0, 40, p).astype(float) if integer else rng.uniform(0.0, 10.0, p)
    loads[0] += boost
    caps = np.ones(p) if homogeneous else rng.uniform(0.5, 3.0, p)
    return Model.create(p, edges, loads, caps, rng.uniform(0.2, 1.0, len(edges)))


def slow_first_edge(model: Model, latency: float = 7e-4, bandwidth: float = 2e7) -> Links:
    """Links of 10⁻⁴ s and 10⁸ B/s, except the model's first edge (``latency``, ``bandwidth``)."""
    i, j = (int(v) for v in model.edges[0])
    return Links(latency=1e-4, bandwidth=1e8, overrides={(i, j): (latency, bandwidth)})


@dataclass(frozen=True)
class RankView:
    """What the calling rank holds of ``model``: its neighbours, their edge indices and its own data."""

    comm: Any
    model: Model
    links: Links
    rank: int
    size: int
    nbrs: NDArray[np.int64]
    kidx: NDArray[np.int64]  # kidx[n]: index in model.edges of the edge to nbrs[n]

    @classmethod
    def of(cls, comm, model: Model, links: Links | None = None) -> RankView:
        rank = comm.Get_rank()
        index = {(int(i), int(j)): k for k, (i, j) in enumerate(model.edges.tolist())}
        nbrs = model.neighbours[rank]
        kidx = np.array([index[(min(rank, j), max(rank, j))] for j in nbrs.tolist()], dtype=np.int64)
        return cls(comm, model, links if links is not None else Links(), rank, comm.Get_size(), nbrs, kidx)

    @property
    def load(self) -> float:
        return float(self.model.loads[self.rank])

    @property
    def cap(self) -> float:
        return float(self.model.capacities[self.rank])

    @property
    def weights(self) -> NDArray[np.float64]:
        return self.model.weights[self.kidx]

    def fresh(self, capacity: float | None = None) -> NeighbourComm:
        """A NeighbourComm with zero counters on a new VirtualClock (speed 10⁶, the rank's capacity)."""
        clock = VirtualClock(self.rank, self.size, self.links, speed=1e6,
                             capacity=self.cap if capacity is None else capacity)
        return NeighbourComm(self.comm, self.nbrs, clock)

    def context(self, params: dict[str, Any], **kw) -> BalanceContext:
        """A BalanceContext for a registry entry's ``run`` on a fresh NeighbourComm (and its clock)."""
        nb = self.fresh()
        return BalanceContext(comm=self.comm, clock=nb.clock, nb=nb, model=self.model, load=self.load,
                              capacity=self.cap, weights=self.weights, dom=None, params=params, **kw)


@dataclass
class Report:
    """One rank's account of a distributed run, as gathered on rank 0."""

    rank: int
    iterations: int
    converged: bool
    counters: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)
    nbrs: NDArray[np.int64] | None = None
    kidx: NDArray[np.int64] | None = None
    flows: NDArray[np.float64] | None = None  # per neighbour, positive = out of this rank


def gather(view: RankView, result, info_keys: Iterable[str] = ()) -> list[Report] | None:
    """Gather every rank's :class:`Report` of ``result`` on rank 0 (``None`` on the other ranks).

    ``result`` is a :class:`~hermes.balance.flow.LocalFlowResult` (per-neighbour ``flows``, ``extra``)
    or a registry :class:`~hermes.balance.registry.Decision` (global ``flow``, ``info``); ``info_keys``
    picks the entries of ``extra`` / ``info`` to send.
    """
    flows = getattr(result, "flows", None)
    info = result.extra if flows is not None else result.info
    mine = Report(view.rank, result.iterations, result.converged, result.counters.as_dict(),
                  {key: info.get(key) for key in info_keys}, view.nbrs, view.kidx, flows)
    return view.comm.gather(mine, root=0)


def compare(tag: str, model: Model, ref, reports: list[Report], failures: list[str], *,
            flow: NDArray[np.float64] | None = None, rtol: float = 0.0,
            per_rank: Callable[[Report, Any], Iterable[str]] | None = None,
            summed_extra: Iterable[str] = ()) -> NDArray[np.float64]:
    """Rank 0: append a line to ``failures`` for each disagreement of ``reports`` with the serial ``ref``.

    Per rank: iterations and ``converged``, the :data:`PER_RANK` counters, the α-β time against
    ``ref.extra["rank_times"]`` (relative :func:`time_rtol`) and whatever ``per_rank(report, ref)`` returns;
    over the ranks: the :data:`SUMMED` counters and, for each key in ``summed_extra``, the reports'
    ``info[key]`` against ``ref.extra[key]``. The flow is ``flow`` if given, else assembled from the
    per-neighbour flows, where every edge must be reported by both endpoints with opposite signs; it
    must equal ``ref.flow`` bit for bit (``rtol=0``) or within relative ``rtol``. Returns the flow.
    """
    for rep in reports:
        r = rep.rank
        if (rep.iterations, rep.converged) != (ref.iterations, ref.converged):
            failures.append(f"{tag}: rank {r} iterations/converged {rep.iterations}/{rep.converged}, "
                            f"serial {ref.iterations}/{ref.converged}")
        for key in PER_RANK:
            if rep.counters[key] != getattr(ref.counters, key):
                failures.append(f"{tag}: rank {r} {key}={rep.counters[key]}, serial {getattr(ref.counters, key)}")
        t_ref = float(ref.extra["rank_times"][r])
        if not abs(rep.counters["time"] - t_ref) <= time_rtol(ref.counters) * abs(t_ref):
            failures.append(f"{tag}: rank {r} time {rep.counters['time']!r}, serial {t_ref!r}")
        failures.extend(f"{tag}: rank {r} {line}" for line in (per_rank(rep, ref) if per_rank else ()))
    for key in SUMMED:
        total = sum(rep.counters[key] for rep in reports)
        if total != getattr(ref.counters, key):
            failures.append(f"{tag}: Σ {key} = {total}, serial {getattr(ref.counters, key)}")
    for key in summed_extra:
        total = sum(rep.info[key] for rep in reports)
        if total != ref.extra[key]:
            failures.append(f"{tag}: Σ {key} = {total}, serial {ref.extra[key]}")
    if flow is None:
        flow, back = np.full(model.q, np.nan), np.full(model.q, np.nan)
        for rep in reports:
            tail = rep.nbrs > rep.rank  # this rank is edges[k, 0]
            flow[rep.kidx[tail]] = rep.flows[tail]
            back[rep.kidx[~tail]] = rep.flows[~tail]
        if not (np.all(np.isfinite(flow)) and np.all(np.isfinite(back))):
            failures.append(f"{tag}: some edge has no flow reported")
        elif not np.array_equal(flow, -back):
            failures.append(f"{tag}: endpoints disagree, max |f_ij + f_ji| = {np.max(np.abs(flow + back))}")
    err = float(np.linalg.norm(flow - ref.flow)) / max(float(np.linalg.norm(ref.flow)), 1e-300)
    if not (err <= rtol if rtol > 0 else np.array_equal(flow, ref.flow)):
        failures.append(f"{tag}: distributed flow differs from serial by {err:.3e} (relative)")
    return flow


def agree(view: RankView, tag: str, run_dist: Callable[[NeighbourComm], Any], run_serial: Callable[[], Any],
          failures: list[str], *, info_keys: Iterable[str] = (), **checks):
    """Run ``run_dist`` on a fresh NeighbourComm on every rank and :func:`compare` with ``run_serial()``.

    ``checks`` go to :func:`compare`. Returns ``(ref, flow)`` on rank 0 and ``None`` on the other ranks.
    """
    reports = gather(view, run_dist(view.fresh()), info_keys)
    if reports is None:
        return None
    ref = run_serial()
    return ref, compare(tag, view.model, ref, reports, failures, **checks)


def same_error(comm, name: str, expected: type[Exception], call: Callable[[], Any], failures: list[str]) -> None:
    """Every rank runs ``call()``; each must raise ``expected`` (GraphError or BalancerError) with one message."""
    try:
        call()
        got = None
    except (GraphError, BalancerError) as err:
        got = (type(err).__name__, str(err))
    every = comm.gather(got, root=0)
    if every is not None and ({g and g[0] for g in every} != {expected.__name__} or len(set(every)) != 1):
        failures.append(f"{name}: ranks raised {sorted(map(str, every))}")


def finish(comm, label: str, failures: list[str]) -> int:
    """Rank 0 prints a ``FAIL`` line per failure, or ``OK <label> P``; every rank returns the exit code."""
    failed = comm.bcast(bool(failures), root=0)
    if comm.Get_rank() == 0:
        print("\n".join("FAIL " + line for line in failures) if failed else f"OK {label} {comm.Get_size()}",
              flush=True)
    return int(failed)


def seed_arg(default: int) -> int:
    """The script's seed: its first argument, else ``default``."""
    return int(sys.argv[1]) if len(sys.argv) > 1 else default


def check_script(mpirun, script: str, label: str, nranks: int, args: Iterable[Any], timeout: float = 120) -> None:
    """Run ``tests/mpi/<script>`` on ``nranks`` ranks; assert no FAIL line, exit code 0 and ``OK <label> n``."""
    proc = mpirun(nranks, [str(a) for a in args], script=Path(__file__).with_name(script), timeout=timeout)
    out = proc.stdout + proc.stderr
    assert "FAIL" not in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"OK {label} {nranks}" in proc.stdout.splitlines(), out
