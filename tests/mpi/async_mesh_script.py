"""Under mpiexec: the asynchronous mesh sweeps of hermes/app/mesh/async_mesh.py (run by
tests/mpi/test_async_mesh_mpi.py).

Usage: ``mpiexec -n P python -m mpi4py tests/mpi/async_mesh_script.py [seed]``

Virtual clock: a jacobi run on heterogeneous capacities with one slow link must equal the serial oracle
:func:`~hermes.app.mesh.async_mesh.async_serial` bit for bit (solution, each rank's final time, the versions every
sweep used), also when every process sleeps a random real time after each sweep; from u = 0 each sweep only
raises u and the result lies between 0 and the synchronous Jacobi of as many sweeps, differing from it. The
:class:`LoopStats` count the messages and sum the residual; with homogeneous capacities the async phase takes
less virtual time than the sync one; the synthetic kernel runs; a zero latency is refused on every rank. Wall
clock: a run finishes (no hang) within the same bounds. Rank 0 prints ``FAIL ...`` lines or ``OK async_mesh P``.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.app.mesh.async_mesh import ASYNC_TAG, async_serial, async_sweeps, solve_phase_async
from hermes.app.mesh.kernels import initial_fields, jacobi_serial
from hermes.app.mesh.simulate import solve_phase
from hermes.runtime.clock import Links, VirtualClock, WallClock
from hermes.runtime.comm import ordered_sum
from hermes.data.distributed import gather_to_root, halo_plan, scatter_domain
from hermes.data.generators import grid
from hermes.data.partition import metis_partition
from tests.mpi.harness import finish, seed_arg

comm = plain(MPI.COMM_WORLD)
rank, p = comm.Get_rank(), comm.Get_size()
seed = seed_arg(3)
K, SPEED, WPW, BPE = 12, 1.0e5, 1.0, 64.0
failures: list[str] = []


def check(ok: bool, what: str) -> None:
    if rank == 0 and not ok:
        failures.append(what)


rng = np.random.default_rng(seed)
mesh = grid(24, 18)
mesh = mesh.with_weights(rng.uniform(0.5, 2.0, mesh.n_cells))
owner = comm.bcast(metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, p, seed=seed) if rank == 0 else None)
fields = initial_fields(mesh.coords)
dom = scatter_domain(comm, mesh if rank == 0 else None, owner, fields if rank == 0 else None)
hetero = np.array([1.0 + (i % 3) for i in range(p)])
hetero /= hetero.sum()
homo = np.full(p, 1.0 / p)
# one slow link between two neighbouring subdomains (those of the first cut edge), the others fast
rows = np.repeat(np.arange(mesh.n_cells), np.diff(mesh.xadj))
e0 = np.flatnonzero(owner[rows] != owner[mesh.adjncy])[0]
i0, j0 = sorted((int(owner[rows[e0]]), int(owner[mesh.adjncy[e0]])))
links = Links(latency=2e-4, bandwidth=1e7, overrides={(i0, j0): (3e-3, 1e6)})
jitter_rng = np.random.default_rng(np.random.SeedSequence([seed, time.time_ns() % 2**32]).spawn(p)[rank])
u_sync = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, K)
# a version's chain of dependencies has at most p·K sweeps, and the map is monotone from u = 0: every async value
# lies between one sync sweep and p·K sync sweeps (exactly: floating-point rounding is monotone too)
u_low = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 1)
u_high = jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, p * K)


def run_virtual(caps, tag: int, jitter: bool):
    clock = VirtualClock(rank, p, links, SPEED, caps[rank])
    sweeps = []
    for sw in async_sweeps(comm, dom, clock, kernel="jacobi", iterations=K, work_per_weight=WPW,
                           bytes_per_edge=BPE, tag=tag):
        sweeps.append(sw)
        if jitter:
            time.sleep(jitter_rng.uniform(0.0, 2e-3))
    return clock, sweeps


def gathered(sweeps):
    """Rank 0: the final u by global id, every rank's time after its last sweep, every rank's versions."""
    g = gather_to_root(comm, dom, mesh.n_cells, extra={"u": sweeps[-1].u})
    times = comm.gather(sweeps[-1].time, root=0)
    versions = comm.gather(np.array([sw.versions for sw in sweeps]), root=0)
    return (g[2]["u"], np.array(times), versions) if rank == 0 else None


# -- 1. virtual clock: the serial oracle, with and without random real sleeps ------------------------------
ref = None
if rank == 0:
    ref = async_serial(mesh.xadj, mesh.adjncy, mesh.weights, fields["f"], fields["u"], owner,
                       [VirtualClock(i, p, links, SPEED, hetero[i]) for i in range(p)], iterations=K,
                       work_per_weight=WPW, bytes_per_edge=BPE)
for n, jitter in enumerate((False, True)):
    clock, sweeps = run_virtual(hetero, ASYNC_TAG + 1 + n, jitter)
    # each sweep only raises u (monotone map from u = 0), versions never go back, and never from the future
    prev = dom.fields["u"]
    for sw in sweeps:
        if not np.all(sw.u >= prev):
            failures.append(f"rank {rank}: sweep {sw.k} lowered u")
        prev = sw.u
    vs = np.array([sw.versions for sw in sweeps]).reshape(K, -1)
    if np.any(np.diff(vs, axis=0) < 0) or vs.min(initial=0) < 0 or vs.max(initial=0) > K:
        failures.append(f"rank {rank}: versions out of order {vs.tolist()}")
    got = gathered(sweeps)
    if rank == 0:
        u, times, versions = got
        label = "jittered" if jitter else "plain"
        check(np.array_equal(u, ref.u), f"{label}: u differs from the serial oracle by {np.abs(u - ref.u).max()}")
        check(np.array_equal(times, ref.times), f"{label}: times {times.tolist()} != oracle {ref.times.tolist()}")
        check(all(np.array_equal(v.reshape(K, -1), r) for v, r in zip(versions, ref.versions)),
              f"{label}: versions differ from the oracle")
        check(bool(np.all(u >= u_low) and np.all(u <= u_high)), f"{label}: u outside [1, p·K sync sweeps]")
        check(not np.array_equal(u, u_sync), f"{label}: async equals sync (no stale ghost was used)")
        check(any(np.any(v[-1] < K - 1) for v in versions), f"{label}: no sweep used a stale version")

# -- 2. LoopStats, and async vs sync virtual time on homogeneous capacities (nobody waits) -------------------
nbrs = halo_plan(dom).ranks
t = {}
for mode, solve in (("sync", solve_phase), ("async", solve_phase_async)):
    clock = VirtualClock(rank, p, links, SPEED, homo[rank])
    kw = {"tag": ASYNC_TAG + 3} if mode == "async" else {}
    out, st = solve(comm, dom, clock, kernel="jacobi", iterations=K, work_per_weight=WPW, bytes_per_edge=BPE, **kw)
    t[mode] = comm.allreduce(clock.now, op=MPI.MAX)
    if mode == "async":
        if st.messages != (K + 1) * nbrs.size:
            failures.append(f"rank {rank}: {st.messages} messages, expected {(K + 1) * nbrs.size}")
        locals_ = comm.allgather(float(st.residual))
        if len(set(locals_)) != 1 or not st.residual > 0:
            failures.append(f"rank {rank}: residual {st.residual} not the same positive sum everywhere")
check(t["async"] < t["sync"], f"homogeneous: async virtual time {t['async']} not below sync {t['sync']}")

# the residual is the ordered sum of each rank's last-sweep Σ(u_K − u_{K−1})²
clock = VirtualClock(rank, p, links, SPEED, homo[rank])
sweeps = list(async_sweeps(comm, dom, clock, kernel="jacobi", iterations=K, work_per_weight=WPW,
                           bytes_per_edge=BPE, tag=ASYNC_TAG + 4))
local = float(np.sum((sweeps[-1].u - sweeps[-2].u) ** 2))
if local != sweeps[-1].local_residual:
    failures.append(f"rank {rank}: local residual is not Σ(u_K − u_{{K−1}})²")
clock = VirtualClock(rank, p, links, SPEED, homo[rank])
_, st = solve_phase_async(comm, dom, clock, kernel="jacobi", iterations=K, work_per_weight=WPW, bytes_per_edge=BPE,
                          tag=ASYNC_TAG + 5)
total = ordered_sum(comm.allgather(local))
check(st.residual == total, f"residual {st.residual} != ordered sum {total}")

# -- 3. the synthetic kernel: no field values, zeros sent, residual = Σ work -----------------------------------
clock = VirtualClock(rank, p, links, SPEED, hetero[rank])
out, st = solve_phase_async(comm, dom, clock, kernel="synthetic", iterations=K, work_per_weight=WPW,
                            bytes_per_edge=BPE, tag=ASYNC_TAG + 6)
check(np.array_equal(out.fields["u"], dom.fields["u"]), "synthetic: u changed")
work_sum = ordered_sum(comm.allgather(WPW * dom.load))
check(st.residual == work_sum, f"synthetic: residual {st.residual} != Σ work {work_sum}")

# -- 4. a zero latency is refused on every rank, before any message -------------------------------------------
try:
    next(async_sweeps(comm, dom, VirtualClock(rank, p, Links(latency=0.0), SPEED, homo[rank]), kernel="jacobi",
                      iterations=K, work_per_weight=WPW, bytes_per_edge=BPE, tag=ASYNC_TAG + 7))
    refused = False
except ValueError as err:
    refused = "latency" in str(err)
refused_all = comm.allgather(refused or nbrs.size == 0)
check(all(refused_all), f"zero latency accepted on some rank: {refused_all}")

# -- 5. wall clock: real non-blocking messages, finishes, same monotone bounds ------------------------------------
wall = WallClock(rank, p, links, SPEED, hetero[rank])
sweeps = []
for sw in async_sweeps(comm, dom, wall, kernel="jacobi", iterations=K, work_per_weight=WPW, bytes_per_edge=BPE,
                       tag=ASYNC_TAG + 8):
    sweeps.append(sw)
    time.sleep(jitter_rng.uniform(0.0, 1e-3) * (1 + rank))
g = gather_to_root(comm, dom, mesh.n_cells, extra={"u": sweeps[-1].u})
if rank == 0:
    u = g[2]["u"]
    check(bool(np.all(u >= u_low) and np.all(u <= u_high)), "wall: u outside [1, p·K sync sweeps]")
check(wall.totals["compute"] > 0, "wall: no compute time measured")

everything = comm.gather(failures, root=0)
sys.exit(finish(comm, "async_mesh", [f for part in everything for f in part] if rank == 0 else []))
