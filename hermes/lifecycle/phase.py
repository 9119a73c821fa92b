"""The steps of a phase (HeRMeS, thesis Fig. 10.1–10.2), each a function over the run's state
(:class:`~hermes.lifecycle.state.RunState`) and the phase's (:class:`~hermes.lifecycle.state.PhaseState`):

1. :func:`extra_load` — the capacity schedule sets the processors' capacities for phase k;
2. :func:`adapt` — the marking (a region, or the kernel's error indicator) changes the work:
   ``adaptation.kind: weights`` multiplies the marked cells' weights, ``refine`` changes the mesh
   (:mod:`hermes.adaptation`);
3. :func:`monitor` — capacities and link costs are measured (not for ``none``);
4. :func:`decide` — whether another balancing round runs (the policy: :mod:`hermes.balance.policy`; with
   ``trigger: auto`` its payoff is recorded as the phase's ``balance_decision``);
5. :func:`balance` — the balancer computes a flow (or new destinations);
6. :func:`realise` — a flow becomes cell destinations, level by level in its topological order, the
   selection strategy choosing the cells (:mod:`hermes.balance.realisation`), and
7. migrate — the cells move, with all they carry (:mod:`hermes.data.migrate`); realise and migrate alternate
   level by level, so they are one step in code (:data:`migrate_cells`); after the rounds, :func:`refine` moves
   boundary cells to straighten the subdomains within a load tolerance (``balancer.refinement``, run when
   :func:`hermes.balance.policy.refinement_decision` says so);
8. :func:`compute` — ``application.iterations`` solver iterations (thesis Alg. 2);
9. :func:`record` — per-rank figures are gathered on rank 0.

Steps 3–7 run as :func:`balance_rounds`. What costs simulated time and what does not: every collective here
is either modelled — charged to the clock through :mod:`hermes.runtime.comm` (the monitor's probes, the balancer's own
messages, the migration, the solver's halo exchanges and reduction, the end-of-phase synchronisation) — or the
testbed's bookkeeping, through :class:`hermes.runtime.comm.Bookkeeping` and never charged (records, checks, the
trigger's global imbalance). What a balancer reads beyond its rank is charged by one price list (docs/COSTS.md,
:mod:`hermes.balance.central`): the global model H when the balancer reads it, a flow's assembly, the gain's link
costs, the rounds rule's heaviest cell; a central solve at its root's rate.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from hermes.app.mesh.async_mesh import ASYNC_TAG, solve_phase_async
from hermes.app.mesh.simulate import solve_phase
from hermes.balance.flow import topological_order
from hermes.balance.interface import BalanceContext, BalancerInfo, Decision
from hermes.balance.model import Model, derived
from hermes.balance.payoff import Payoff, PhaseCost, excess
from hermes.balance.policy import (another_round, conductances, estimate_payoff, first_round_cost, read_only,
                                   refinement_decision, refinement_pays, worsens)
from hermes.balance.realisation.boundary import RefineOptions, refine_boundary
from hermes.balance.central import charge_gather, flow_words, model_words
from hermes.balance.constraints import constraint_fields, constraint_imbalances, constraint_sums, repair_constraints
from hermes.balance.realisation.realise import RealiseOptions, SubdomainFlow, realise_flow
from hermes.balance.registry import BALANCERS
from hermes.runtime.clock import CATEGORIES
from hermes.runtime.comm import NeighbourComm, agree, allreduce
from hermes.data.distributed import dense_view, gather_to_root
from hermes.data.migrate import MigrationStats, deliver, migrate, plan_of
from hermes.data.refine_dist import gather_trimesh
from hermes.errors import BalancerError, HermesError
from hermes.lifecycle.directory import records_partitions
from hermes.lifecycle.records import PhaseRecord, RankRecord
from hermes.lifecycle.state import PhaseState, RunState
from hermes.metrics import cell_bytes, imbalance, partition_quality_local
from hermes.monitor import monitor as measure

__all__ = ["step", "extra_load", "adapt", "monitor", "balance_rounds", "decide", "balance", "realise", "migrate_cells",
           "refine", "compute", "record"]

log = logging.getLogger(__name__)


# -- the steps of a phase -----------------------------------------------------------------------------------
def step(r: RunState, ph: PhaseState | int, text: str) -> None:
    """Rank 0's status: the step of the phase now running (``phase 3/8: balancing round 2/5 (pcg)``), repeated
    while it lasts (:class:`hermes.progress.Progress`; silent on the other ranks). Never a result."""
    k = ph if isinstance(ph, int) else ph.k
    r.say.status(f"phase {k}/{r.sc.adaptation.phases}: {text}")


def extra_load(r: RunState, k: int) -> PhaseState:
    """Step 1: the capacities of phase ``k`` from the schedule; the phase's clock references."""
    step(r, k, "extra load")
    caps = r.sched.at(k)
    r.clock.set_capacity(caps[r.rank])
    r.clock.begin_phase(k)  # external tasks tied to phases start or stop (nothing without an extra load)
    if r.feed is not None:
        r.feed.begin(r.clock)
    return PhaseState(k, caps, r.clock.elapsed(), r.clock.snapshot())


def adapt(r: RunState, ph: PhaseState) -> None:
    """Step 2: the adaptation (weights or refinement; collective), then the loads as the phase starts."""
    step(r, ph, "refinement" if r.refining else "adaptation")
    r.dom, ph.change = r.adapter.step(r.dom, ph.k)
    ph.dense = not r.refining or r.book.max(int(r.dom.gid.max(initial=-1))) + 1 == r.book.sum(r.dom.n)
    ph.gid_before = r.dom.gid  # the cells this rank holds before balancing: the migration volume's reference
    ph.loads = np.array(r.book.allgather(r.dom.load))
    ph.imbalance_before = imbalance(ph.loads, ph.caps)


def monitor(r: RunState, ph: PhaseState) -> None:
    """Step 3: measure this rank's capacity and links (charged to ``balance``) and gather the model H."""
    step(r, ph, "monitor" + (f" (round {ph.rounds + 1})" if ph.rounds else ""))
    ph.est = measure(r.comm, r.clock, r.dom.neighbour_ranks, r.probe_work, bulk=r.sc.run.bulk == "auto")
    if ph.rounds == 0:
        ph.capacity_estimate = ph.est.capacity
    if r.feed is not None and r.feed.steers:  # the balancer sees the monitor's source, not the probe
        capacity, weights = _seen(r, ph)
        ph.est = replace(ph.est, capacity=capacity, weights=weights)
        if ph.rounds == 0:
            ph.capacity_estimate = capacity
    me, est = r.rank, ph.est
    # a tuple of tuples: hosted processors share what is gathered instead of copying it p times (hermes.runtime.hosting)
    entry = (est.capacity, tuple((me, int(j), float(w)) for j, w in zip(est.neighbours, est.weights) if me < j))
    allent = r.book.allgather(entry)

    def build() -> Model:
        edges = [(i, j) for _, es in allent for i, j, _ in es]
        weights = [w for _, es in allent for _, _, w in es]
        return Model.create(r.p, np.array(edges, dtype=np.int64).reshape(-1, 2), list(ph.loads),
                            [a[0] for a in allent], weights)

    # hosted processors share one model (read-only), as they share one link-cost matrix (_gather_costs)
    ph.model = r.book.comm.shared_value("model", allent, ph.loads, build, freeze=read_only)


def _seen(r: RunState, ph: PhaseState) -> tuple[float, np.ndarray]:
    """This rank's capacity and link weights as the monitor's source gives them (``monitor`` section);
    the oracle's horizon is the phase's work at the platform's nominal total rate."""
    sc, app = r.sc, r.sc.application
    nominal = sc.platform.speed * r.p * ph.caps
    horizon = app.iterations * float(ph.loads.sum()) * app.work_per_weight / (sc.platform.speed * r.p)
    view = r.feed.view(r.clock, nominal, max(horizon, 1e-9))
    pairs = np.array([(r.rank, int(j)) for j in ph.est.neighbours], dtype=np.int64).reshape(-1, 2)
    return float(view.capacities[r.rank]), view.weights(pairs, r.feed.spec.link_weight)


def balance_rounds(r: RunState, ph: PhaseState) -> None:
    """Steps 3–7: monitor, then balancing rounds while :func:`decide` says so, then :func:`refine`."""
    if r.balancer.name == "none":
        return
    auto = r.sc.balancer.trigger == "auto"
    monitor(r, ph)
    _conductances(r, ph)
    while decide(r, ph):
        _round(r, ph, auto)
    refine(r, ph)  # its time is History.refine_time, not part of the rounds' migration rate (estimate_payoff)
    deliver_cells(r, ph, auto)
    repair_constraints_step(r, ph)
    if auto and ph.rounds:  # a phase its balancing left no better than it began tells nothing of what it reaches
        final = float(ph.model.imbalance)
        r.history.imbalance_after = final if final < ph.imbalance_before else None


def _round(r: RunState, ph: PhaseState, auto: bool) -> None:
    """One balancing round: the links measured again if the subdomain graph changed, the balancer's decision,
    its realisation, the loads gathered, and under ``trigger: auto`` the round's measured costs recorded."""
    if ph.rounds:  # the subdomain graph changed: measure the new links
        monitor(r, ph)
        _conductances(r, ph)
    spent = dict(r.clock.totals)
    excess_before = excess(ph.model)
    this = f"round {ph.rounds + 1}/{r.sc.balancer.rounds}"
    step(r, ph, f"balancing {this} ({r.balancer.name})")
    decision = balance(r, ph)
    step(r, ph, f"realisation and migration, {this}")
    st = realise(r, ph, decision)
    ph.infos.append(_jsonable(decision.info))  # after the realisation, which may add 'rejected'
    ph.stats.add(st if ph.full is None else st.as_records())  # a plan's migrations move records, not cells
    ph.rounds += 1
    ph.moved_last_round = r.book.sum(st.cells_sent) != 0
    if ph.moved_last_round:
        ph.loads = np.array(r.book.allgather(r.dom.load))
        ph.model = ph.model.with_loads(list(ph.loads))
    if auto:
        r.history.record(r.book.max(r.clock.totals["balance"] - spent["balance"]),
                         r.book.max(r.clock.totals["migrate"] - spent["migrate"]), excess_before, ph.k)


def _conductances(r: RunState, ph: PhaseState) -> None:
    """The link weights the balancer sees and the model's edge weights under ``balancer.conductance``
    (:func:`hermes.balance.policy.conductances`)."""
    ph.weights, ph.model = conductances(r.sc.balancer.conductance, r.book, r.rank, r.dom, ph.est, ph.model)


def decide(r: RunState, ph: PhaseState) -> bool:
    """Step 4: whether another balancing round runs (:func:`hermes.balance.policy.another_round`: the trigger, a
    number or ``auto``); under ``trigger: auto`` the payoff that decided is recorded in ``ph.decisions``."""
    bal = r.sc.balancer
    step(r, ph, f"deciding round {ph.rounds + 1}/{bal.rounds}")

    def first() -> tuple[float, float, str]:
        return first_round_cost(r.book, r.dom, ph.model, r.balancer, r.params, r.clock.links)

    def estimate() -> Payoff:
        return estimate_payoff(r.history, ph.model, bal, PhaseCost.of(r.sc.application, r.sc.platform.speed),
                               rounds=ph.rounds, flow_moved=ph.flow_moved, first=first)

    def granularity() -> float:  # the heaviest cell over the smallest fair load (one charged reduction)
        with r.clock.balancing():
            heaviest = allreduce(r.comm, float(r.dom.weight.max(initial=0.0)), r.clock, op="max", counters=ph.counters)
        return heaviest / max(float(ph.model.fair_loads.min()), 1e-300)

    go, payoff = another_round(bal, ph.model, rounds=ph.rounds, moved_last_round=ph.moved_last_round, last=ph.last,
                               estimate=estimate, granularity=granularity)
    if payoff is not None:
        ph.decisions.append(payoff.as_dict())
    return go


def balance(r: RunState, ph: PhaseState) -> Decision:
    """Step 5: the balancer's decision (collective; charged to ``balance``)."""
    ph.last = ph.model.imbalance
    nb = NeighbourComm(r.comm, ph.est.neighbours, r.clock, ph.counters)
    est = ph.est
    model = ph.model  # the processor graph of this call: a profile's prices per message and hop are of its shape
    with r.clock.balancing(r.balancer.name, max_degree=int(model.degree.max(initial=0)),
                           diameter=lambda: model.diameter):
        view = r.dom if ph.dense else dense_view(r.comm, r.dom, r.clock, ph.counters)
        weights = est.weights if ph.weights is None else ph.weights
        ctx = BalanceContext(comm=r.comm, clock=r.clock, nb=nb, model=ph.model, load=r.dom.load,
                             capacity=est.capacity, weights=weights, dom=view, params=r.params, seed=r.sc.seed,
                             state=r.balancer_state, latency=est.latency, bandwidth=est.bandwidth,
                             round=ph.rounds, conductance=r.sc.balancer.conductance, bulk=r.sc.run.bulk)
        decision = agree(r.comm, _run_balancer, r.balancer, ctx)
        _charge_reads(r, ph, ctx, decision)
    ph.iterations += decision.iterations
    return decision


def _charge_reads(r: RunState, ph: PhaseState, ctx: BalanceContext, decision: Decision) -> None:
    """What the round read beyond its ranks, charged as collectives (docs/COSTS.md): the model H if the balancer
    read it on any rank, and a flow's assembly (one value per edge: the realisation acts on the whole flow graph).
    Collective; whether any rank read the model is agreed as bookkeeping."""
    if r.book.max(int(object.__getattribute__(ctx, "model_read"))):
        charge_gather(r.comm, r.clock, ph.counters, model_words(ph.model), kind="model")
    if decision.flow is not None:
        charge_gather(r.comm, r.clock, ph.counters, flow_words(ph.model), kind="flow")


def _run_balancer(info: BalancerInfo, ctx: BalanceContext) -> Decision:
    """``info.run(ctx)``, with a plug-in's failure as one line: an exception other than a HermesError — an
    interrupt or a ``SystemExit`` included — ends the job at once (its message on stderr, the same on every rank
    that fails, then ``MPI_Abort``: the other ranks may be waiting in the plug-in's own collectives), and an
    answer that is not a :class:`Decision` of the model's shape is a BalancerError on every rank."""
    builtin = info.name in BALANCERS and BALANCERS[info.name] is info
    try:
        decision = info.run(ctx)
    except HermesError:
        raise
    except BaseException as err:
        if builtin:
            raise
        import sys

        text = " ".join(str(err).split())[:300]
        print(f"hermes: error: balancer {info.name!r} failed: {type(err).__name__}{': ' + text if text else ''}",
              file=sys.stderr, flush=True)
        ctx.comm.Abort(1)
        os._exit(1)  # MPICH's MPI_Abort returns (5.0.2): no traceback after the line, no further phase
    if not builtin:
        _check_decision(info.name, decision, ctx)
    return decision


def _check_decision(name: str, decision: Any, ctx: BalanceContext) -> None:
    """A plug-in's answer is a Decision with a finite flow on the model's edges or this rank's cells' owners."""
    if not isinstance(decision, Decision):
        raise BalancerError(f"balancer {name!r} returned {type(decision).__name__}, not a hermes.balance.Decision")
    if decision.flow is not None:
        flow = np.asarray(decision.flow)
        if flow.shape != (ctx.model.q,) or flow.dtype.kind not in "iuf" or not np.all(np.isfinite(flow)):
            raise BalancerError(f"balancer {name!r} returned a flow of shape {flow.shape} ({flow.dtype}); the model "
                                f"has {ctx.model.q} edges: expected that many finite numbers")
        decision.flow = flow.astype(np.float64)
    if decision.dest is not None:
        dest = np.asarray(decision.dest)
        p = ctx.comm.Get_size()
        if dest.shape != (ctx.dom.n,) or dest.dtype.kind not in "iu" or (dest.size and (dest.min() < 0 or
                                                                                         dest.max() >= p)):
            raise BalancerError(f"balancer {name!r} returned destinations of shape {dest.shape} ({dest.dtype}); "
                                f"expected one rank in [0, {p}) for each of this rank's {ctx.dom.n} cells")
        decision.dest = dest.astype(np.int64)


def realise(r: RunState, ph: PhaseState, decision: Decision) -> MigrationStats:
    """Steps 6–7: cells move — to the balancer's destinations, or realising its flow level by level in
    topological order (the selection strategy picks the cells; charged to ``migrate``). A flow that would not
    lower the imbalance is refused (:func:`_worsens`)."""
    stats = MigrationStats()
    with r.clock.activity("migrate"):
        if decision.dest is not None:
            r.dom, stats = migrate(r.comm, r.dom, decision.dest, r.clock, bulk=r.sc.run.bulk == "auto")
        elif decision.flow is not None and np.any(decision.flow != 0) and not worsens(r.comm, ph.model, decision):
            # the realisation acts on the global flow: its levels are the topological order of the whole flow DAG
            cost = _gather_costs(r, ph)
            flow, model = decision.flow, ph.model
            # the same on every rank: once per model and flow (hosted processors share the model)
            levels = derived(model, ("levels", flow.tobytes()),
                             lambda: topological_order(model, flow, 1e-12 * max(model.loads.sum(), 1.0)))
            if r.sc.balancer.delivery == "direct" and ph.full is None:
                # from here to the delivery the levels move identity records; the cells travel once (deliver_cells)
                ph.full, r.dom = r.dom, plan_of(r.dom)
            options = RealiseOptions(r.select, exact=r.sc.balancer.ghosts == "exact",
                                     adaptive=r.sc.balancer.realisation == "adaptive", bulk=r.sc.run.bulk == "auto")
            r.dom, stats, realised = realise_flow(r.comm, r.dom, SubdomainFlow(model.edges, flow), cost, r.clock,
                                                  levels=levels, options=options)
            ph.flow_moved = True
            if r.rank == 0 and log.isEnabledFor(logging.DEBUG):
                for e, f, done in zip(model.edges.tolist(), flow, realised):
                    if abs(f) > 1e-9 or done:
                        log.debug("phase %d edge %s flow %.3f realised %.3f", ph.k, e, f, done)
    return stats


migrate_cells = realise  # the HeRMeS cycle names them apart; they alternate level by level in one step


def refine(r: RunState, ph: PhaseState) -> None:
    """Step 7′: after the rounds, if a flow moved cells, the boundary refinement of ``balancer.refinement``
    (:func:`hermes.balance.refinement.refine_boundary`; charged to ``migrate``, its moves counted with the
    phase's migration)."""
    spec = r.sc.balancer.refinement
    go, decision = refinement_decision(spec, ph.flow_moved, lambda: refinement_pays(
        spec, PhaseCost.of(r.sc.application, r.sc.platform.speed), r.book, r.dom, ph.est, ph.model, r.clock.links,
        r.history.refine_time))
    if not go:
        if decision:
            ph.refinement = {"passes": 0, "decision": decision}
        return
    step(r, ph, "boundary refinement")
    cut_before = r.book.sum(int(r.dom.cut_mask.sum())) // 2
    imbalance_before = float(ph.model.imbalance)
    spent = r.clock.totals["migrate"]
    with r.clock.activity("migrate"):
        cost = _gather_costs(r, ph)
        options = RefineOptions(tolerance=spec.tolerance, passes=spec.passes, geometric=spec.geometric,
                                below=spec.below, bulk=r.sc.run.bulk == "auto")
        r.dom, st = refine_boundary(r.comm, r.dom, ph.model.fair_loads, cost, r.clock, options)
    r.history.refine_time = r.book.max(r.clock.totals["migrate"] - spent)
    ph.stats.add(st.migration if ph.full is None else st.migration.as_records())
    ph.loads = np.array(r.book.allgather(r.dom.load))
    ph.model = ph.model.with_loads(list(ph.loads))
    ph.refinement = {"passes": st.passes, "cells": r.book.sum(st.cells_sent), "weight": r.book.sum(st.weight_sent),
                     "migrate_time": r.history.refine_time,
                     "edge_cut_before": cut_before, "imbalance_before": imbalance_before,
                     "imbalance_after": float(ph.model.imbalance), **({"decision": decision} if decision else {})}


def deliver_cells(r: RunState, ph: PhaseState, auto: bool = False) -> None:
    """Step 7″, under ``balancer.delivery: direct`` once a flow was realised: every cell whose record the rounds
    (and the refinement) moved is shipped once, whole, from the rank that held it when the phase's balancing began
    to the rank its record ended at (:func:`hermes.data.migrate.deliver`: one receipt and one migration message per
    pair, each charged on the pair's link; charged to ``migrate``). The phase's ``cell_sends`` are these; the
    records the plan's messages carried are ``records_sent``. Under ``trigger: auto`` its time joins the rounds'
    migration time (:meth:`hermes.balance.payoff.History.delivered`)."""
    if ph.full is None:
        return
    step(r, ph, "delivering the cells")
    spent = r.clock.totals["migrate"]
    with r.clock.activity("migrate"):
        r.dom, st = deliver(r.comm, ph.full, r.dom, r.clock, bulk=r.sc.run.bulk == "auto")
    ph.full = None
    ph.stats.add(st)
    if auto:
        r.history.delivered(r.book.max(r.clock.totals["migrate"] - spent), ph.k)


def repair_constraints_step(r: RunState, ph: PhaseState) -> None:
    """Step 7‴, under ``mesh.constraint: all``: every further vertex weight (and the load, if the balancer left it
    above the repair's tolerance) balanced by selection along minimal flows (:mod:`hermes.balance.constraints`;
    charged to ``migrate``, its moves counted with the phase's migration). The ``metis`` balancer balances every
    weight itself; the repair then finds them within its tolerance or improves them."""
    if not constraint_fields(r.dom.fields):
        return
    step(r, ph, "repairing the constraints")
    with r.clock.activity("migrate"):
        r.dom, res = repair_constraints(r.comm, r.dom, ph.model, r.clock, ph.counters, bulk=r.sc.run.bulk == "auto")
    ph.stats.add(res.stats)
    ph.constraints = res.as_dict()
    if res.passes:
        ph.loads = np.array(r.book.allgather(r.dom.load))
        ph.model = ph.model.with_loads(list(ph.loads))


def compute(r: RunState, ph: PhaseState) -> None:
    """Step 8: the solver's iterations (thesis Alg. 2; ``application.mode: async``: asynchronous iterations,
    :mod:`hermes.app.mesh.async_mesh`, with the phase's own message tag), then every rank synchronised (charged)."""
    app = r.sc.application
    step(r, ph, f"compute ({app.iterations} iteration{'s' * (app.iterations != 1)})")
    solve = partial(solve_phase, bulk=r.sc.run.bulk) if app.mode == "sync" else \
        partial(solve_phase_async, tag=ASYNC_TAG + ph.k % 1000)
    r.dom, ph.loop = solve(r.comm, r.dom, r.clock, kernel=app.kernel, iterations=app.iterations,
                           work_per_weight=app.work_per_weight, bytes_per_edge=app.bytes_per_edge)
    r.residual = ph.loop.residual
    allreduce(r.comm, 0.0, r.clock)
    if r.feed is not None:  # what the platform gave the application in this phase (collective, uncharged)
        ph.fed, ph.feed_errors = r.feed.observe(r.clock, ph.k, r.book)


def record(r: RunState, ph: PhaseState) -> str:
    """Step 9: the phase's records, gathered on rank 0 (bookkeeping); the head of the phase's progress line."""
    book, clock, dom, st = r.book, r.clock, r.dom, ph.stats
    step(r, ph, "record")
    t_phase = book.max(clock.elapsed() - ph.t_start)
    delta = {c: clock.totals[c] - ph.snap[c] for c in clock.totals}
    several = constraint_fields(dom.fields)  # mesh.constraint: all
    per_constraint, cons = None, None
    if several:
        mine = constraint_sums(dom)
        per_constraint = constraint_imbalances(np.array(book.allgather(mine)), ph.caps)
        cons = {**{f"weight_{k + 2}": float(v) for k, v in enumerate(mine[1:])},
                **{f"imbalance_per_constraint_{k + 1}": v for k, v in enumerate(per_constraint)}}
    row = RankRecord(ph.k, r.rank, dom.n, dom.load, float(ph.caps[r.rank]), float(ph.caps[r.rank] * ph.loads.sum()),
                     ph.capacity_estimate, *(delta[c] for c in CATEGORIES), st.cells_sent, st.cells_received,
                     st.weight_sent, st.weight_received, st.bytes_sent, **ph.fed, constraints=cons)
    rows = book.gather(row)
    sends, sends_w = book.sum(st.cells_sent), book.sum(st.weight_sent)  # the cells (weight) messages carried
    quality = partition_quality_local(r.comm, dom, capacities=ph.caps, prev_gid=ph.gid_before,
                                      bytes_per_cell=cell_bytes(dom))
    r.total_moves += sends
    cells_now, weight_now = book.sum(dom.n), book.sum(dom.load)
    arrays = _phase_arrays(r, ph.k) if records_partitions(r.sc.output) else ({}, {})
    imb_after = imbalance(ph.loads, ph.caps)
    if r.rank == 0:
        r.rows.extend(rows)
        mean = {c: float(np.mean([getattr(x, f"{c}_time") for x in rows])) for c in CATEGORIES}
        r.phases.append(PhaseRecord(ph.k, t_phase, *mean.values(), ph.imbalance_before, imb_after, sends, sends_w,
                                    quality["edge_cut"], ph.iterations, ph.rounds, ph.counters.as_dict(), ph.infos,
                                    quality, cells_now, weight_now, ph.change, ph.decisions, ph.refinement,
                                    ph.feed_errors, per_constraint, ph.constraints))
        r.partitions.update(arrays[0])
        r.geometry.update(arrays[1])
    # the movement of cells (docs/RUNNING.md): distinct cells that changed owner, and the cells the messages carried
    return (f"phase {ph.k}/{r.sc.adaptation.phases}: imbalance {ph.imbalance_before:.3f} -> {imb_after:.3f}, "
            f"moved {quality['migration_cells']} cells ({sends} sends), {r.sc.clock} time {t_phase:.4g} s")


def _phase_arrays(r: RunState, phase: int):
    """Rank 0: the phase's per-cell arrays for partitions.npz and, for a refined mesh, its geometry for
    geometry.npz (``coords_XXX``, ...); ({}, {}) elsewhere (collective)."""
    tag, comm, dom = f"{phase:03d}", r.comm, r.dom
    n = r.setup.n_cells if not r.refining else r.book.max(int(dom.gid.max(initial=-1))) + 1
    # the solution for the VTU files; a refined mesh's levels always (the pictures' weights panel shows them)
    names = ("u",) * r.sc.output.vtu + ("level",) * r.refining
    extra = {name: dom.fields[name] for name in names if name in dom.fields}
    g = gather_to_root(comm, dom, n, extra=extra)
    tm = gather_trimesh(comm, dom) if r.refining else None
    if r.rank != 0:
        return {}, {}
    own, wts, fields = g
    alive = np.flatnonzero(own >= 0) if r.refining else slice(None)
    parts = {f"owner_{tag}": own[alive].astype(np.int32), f"weight_{tag}": wts[alive],
             **{f"{name}_{tag}": v[alive] for name, v in fields.items()}}
    if not r.refining:
        return parts, {}
    parts[f"gid_{tag}"] = alive
    return parts, {f"coords_{tag}": tm.centroids, f"points_{tag}": tm.points, f"cell_nodes_{tag}": tm.tris.ravel(),
                   f"cell_ptr_{tag}": np.arange(0, 3 * tm.n_cells + 1, 3, dtype=np.int64)}


def _jsonable(info: dict[str, Any]) -> dict[str, Any]:
    """The scalar and string entries of a Decision's info (what summary.json can hold)."""
    out = {}
    for k, v in (info or {}).items():
        if isinstance(v, (bool, int, float, str)) or v is None:
            out[k] = v
        elif isinstance(v, (np.integer, np.floating)):
            out[k] = v.item()
    return out


def _gather_costs(r: RunState, ph: PhaseState) -> np.ndarray:
    """The p×p link-cost matrix w̃ of the gain function (0 off the subdomain graph): a selection weighs its targets'
    links, so it is charged as one gather of every link's cost (``2q`` words: docs/COSTS.md) — to the migration
    under way, not to the balancer's counters."""
    book, p, est = r.book, r.p, ph.est
    rows = book.allgather((tuple(est.neighbours.tolist()), tuple(est.costs.tolist())))  # tuples: shared hosted
    charge_gather(r.comm, r.clock, None, 2 * ph.model.q, kind="costs")

    def build() -> np.ndarray:
        cost = np.zeros((p, p))
        for i, (nbrs, cs) in enumerate(rows):
            cost[i, nbrs] = cs
        return cost

    return book.comm.shared("link-costs", rows, build)  # hosted processors share one read-only matrix

