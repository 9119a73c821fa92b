"""Whether a balancing round pays: the expected gain over the phase's solver iterations against the cost of
balancing and migrating (``balancer.trigger: auto``).

A phase runs ``N`` solver iterations after balancing. Under the model of the clock (:mod:`hermes.runtime.clock`) rank i
computes an iteration in ``κ l_i / (s p ĉ_i)`` seconds (κ work per unit of weight, s the average processor's
speed, ĉ_i its capacity as the monitor measured it, p ranks), and every iteration waits for the slowest rank,
so an iteration takes

    t(l) = κ L / (s p) · I(l),      I(l) = max_i l_i / (ĉ_i L)   (the imbalance, L = Σ l_i).

A round that takes the imbalance from ``I`` to ``I'`` saves ``N κ L / (s p) · (I − I')`` over the phase
(:func:`payoff`); it costs the balancer's time ``T_b`` and the migration's ``T_m``. The round runs when the
saving exceeds ``T_b + T_m``. The estimates come from what the run has measured (:class:`History`):

* ``I'`` — the imbalance the last balanced phase ended with, after all its rounds and the refinement (before
  any: 1); not the last round's, which may have fallen short of what a further round reaches; 1 again after a
  phase its balancing left no better than it began (else one failed realisation would stop balancing for the
  rest of the run, the estimate promising no gain);
* ``T_b`` — the slowest rank's balancing time in the last round (monitor, flow and its collectives);
  before any round, the balancer's modelled α-β time on the current model (its serial reference's counters,
  :func:`first_estimate`), or 0 for a balancer without one (METIS, Scotch: the first round runs and is
  measured);
* ``T_m`` — the migration time per unit of excess load ``E = Σ_i max(0, l_i − ĉ_i L)`` measured over the
  last balanced phase (the slowest rank's migration time of all its rounds over the excess they started
  from), times the excess now (the volume a flow moves grows with the excess); before any round,
  :func:`migration_time` of the serial reference's flow. The rate is taken over the whole phase, not its last
  round: a last round that corrects a residue of 1.0003 starts from almost no excess, and its fixed costs
  (latencies) over that excess would predict a migration of minutes for the next phase's first round. The
  boundary refinement (``balancer.refinement``) is not in the rate: its time is set by its passes' latencies,
  not by the excess, and scaled with the excess it once stopped all balancing after phase 1 (DATA grid20x19,
  imbalance up to 1.97). Under ``refinement.decide: always`` a phase's first round commits to it, so that
  round adds the last refinement's measured time once (``History.migrate_estimate``'s ``fixed``, recorded as
  ``migrate_fixed``); under
  ``decide: auto`` the refinement has its own gate and price (:func:`hermes.balance.policy.refinement_pays`).

Every estimate is recorded with the choice (``balance_decision`` in summary.json), so a wrong guess can be
seen and the model corrected. The decision is myopic: it weighs this phase only, not the imbalance a skipped
phase leaves to the next one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.balance.flow import topological_order
from hermes.balance.model import Model
from hermes.errors import HermesError

__all__ = ["Payoff", "History", "PhaseCost", "payoff", "excess", "iteration_time", "migration_time", "first_estimate"]


@dataclass(frozen=True)
class Payoff:
    """One decision: the estimates and the choice (what summary.json's ``balance_decision`` lists)."""

    round: int
    imbalance: float
    expected_after: float
    iterations: int
    iteration_time: float
    gain: float
    balance_cost: float
    migrate_cost: float
    source: str
    #: the part of ``migrate_cost`` that does not scale with the excess (a committed boundary refinement)
    migrate_fixed: float = 0.0

    @property
    def cost(self) -> float:
        return self.balance_cost + self.migrate_cost

    @property
    def balance(self) -> bool:
        """Whether the round runs: the gain exceeds the cost."""
        return self.gain > self.cost

    def as_dict(self) -> dict:
        return {**asdict(self), "cost": self.cost, "choice": "balance" if self.balance else "skip"}


@dataclass(frozen=True)
class PhaseCost:
    """What the cost model of a phase reads (module docstring): ``iterations`` N solver iterations,
    ``work_per_weight`` κ, the average processor's ``speed`` s and ``bytes_per_edge`` b of a ghost exchange
    (the boundary refinement's price, :func:`hermes.balance.policy.refinement_pays`). :meth:`of` takes them from
    the scenario's ``application`` section and the platform's speed."""

    iterations: int
    work_per_weight: float
    speed: float
    bytes_per_edge: float

    @classmethod
    def of(cls, application, speed: float) -> PhaseCost:
        """From an :class:`~hermes.sections.ApplicationSpec` (``iterations``, ``work_per_weight``,
        ``bytes_per_edge``) and the platform's ``speed``."""
        return cls(application.iterations, application.work_per_weight, speed, application.bytes_per_edge)

    def iteration_time(self, model: Model) -> float:
        """:func:`iteration_time` of ``model`` at this κ and s."""
        return iteration_time(model, self.work_per_weight, self.speed)


@dataclass
class History:
    """What the run measured (the same on every rank): the balancing time of its last round; the migration time
    and the excess load summed over the rounds of its last balanced phase (not its boundary refinement: that is
    ``refine_time``); the imbalance that phase ended with."""

    balance_time: float | None = None
    migrate_time: float | None = None
    excess: float | None = None
    imbalance_after: float | None = None
    #: the phase the sums belong to
    phase: int | None = None
    #: the migration time of the last boundary refinement that ran: the price ``refinement.decide: auto`` weighs,
    #: and under ``decide: always`` the fixed cost a phase's first round adds to its migration estimate
    refine_time: float | None = None

    def record(self, balance_time: float, migrate_time: float, excess_before: float, phase: int = 0) -> None:
        """A round's costs (the slowest rank's) and the excess load it started from; the first round of a new
        ``phase`` restarts the sums."""
        if phase != self.phase or self.migrate_time is None:
            self.migrate_time, self.excess, self.phase = 0.0, 0.0, phase
        self.balance_time = float(balance_time)
        self.migrate_time += float(migrate_time)
        self.excess += float(excess_before)

    def delivered(self, seconds: float, phase: int) -> None:
        """The direct delivery that ended ``phase``'s rounds (``balancer.delivery: direct``): part of the migration
        its rounds cost, so added to their sum."""
        if phase == self.phase and self.migrate_time is not None:
            self.migrate_time += float(seconds)

    def migrate_estimate(self, excess_now: float, fixed: float = 0.0) -> float:
        """``T_m`` for a round starting from ``excess_now``: the rounds' measured rate times it (the sum itself
        when no excess was measured), plus a ``fixed`` cost that does not scale with the excess — the boundary
        refinement a phase's first round commits to (its time is set by the passes' latencies, not by the load)."""
        if self.migrate_time is None:
            return float(fixed)
        rate = self.migrate_time * excess_now / self.excess if self.excess else self.migrate_time
        return rate + float(fixed)


def excess(model: Model) -> float:
    """``E = Σ_i max(0, l_i − ĉ_i L)``: the load above the fair shares."""
    return float(np.maximum(model.loads - model.fair_loads, 0.0).sum())


def iteration_time(model: Model, work_per_weight: float, speed: float) -> float:
    """Seconds of one solver iteration at fair loads: ``κ L / (s p)``."""
    return float(work_per_weight * model.loads.sum() / (speed * model.p))


def payoff(round_: int, model: Model, phase: PhaseCost, *, expected_after: float, balance_cost: float,
           migrate_cost: float, source: str, migrate_fixed: float = 0.0) -> Payoff:
    """The saving of one round over the phase's ``iterations`` and its cost (module docstring).

    Parameters
    ----------
    round_ : index of the round in the phase (0 = first).
    model : the current model (loads, measured capacities).
    phase : N, κ and s (``iterations``, ``work_per_weight``, ``speed``).
    expected_after : I', the imbalance the round is expected to reach.
    balance_cost, migrate_cost : T_b and T_m in seconds.
    source : where the costs come from (recorded).
    migrate_fixed : the part of ``migrate_cost`` that does not scale with the excess (recorded).
    """
    t_it = phase.iteration_time(model)
    imb = float(model.imbalance)
    after = min(float(expected_after), imb)
    return Payoff(round_, imb, after, int(phase.iterations), t_it, phase.iterations * t_it * (imb - after),
                  float(balance_cost), float(migrate_cost), source, float(migrate_fixed))


def migration_time(model: Model, flow: NDArray[np.float64], levels: int, bytes_per_weight: float,
                   latency: float, bandwidth: float) -> float:
    """α-β time of realising ``flow`` level by level: ``levels · α + max_i out_i · b / β``, where ``out_i`` is
    the weight rank i sends (its outflows) and ``b`` the bytes per unit of weight."""
    f = np.asarray(flow, dtype=np.float64)
    e = model.edges
    out = np.zeros(model.p)
    np.add.at(out, e[:, 0], np.maximum(f, 0.0))
    np.add.at(out, e[:, 1], np.maximum(-f, 0.0))
    return float(levels * latency + out.max(initial=0.0) * bytes_per_weight / bandwidth)


def first_estimate(balancer, model: Model, params: dict, links, bytes_per_weight: float) -> tuple[float, float, str]:
    """(T_b, T_m, source) before any round: the balancer's serial reference on ``model`` — its modelled α-β
    time and the migration time of its flow under ``links`` — or (0, 0) when it has none."""
    if balancer.serial is None:
        return 0.0, 0.0, "none yet (no serial reference): measured after the first round"
    try:
        res = balancer.flow(model, links=links, **params)
    except HermesError:
        return 0.0, 0.0, "none yet (the serial reference failed): measured after the first round"
    levels = len(topological_order(model, res.flow, 1e-12 * max(float(model.loads.sum()), 1.0)))
    t_m = migration_time(model, res.flow, levels, bytes_per_weight, links.latency, links.bandwidth)
    return float(res.counters.time), t_m, "serial reference (modelled α-β time)"
