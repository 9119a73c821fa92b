"""Non-centralised line balancing of asynchronous iterations, with residual or time estimators (003 §VI-B, §VII-B).

Processors sit on a line and own consecutive components; a processor compares its load estimate with its
neighbours' and, above a threshold, moves border components to the *lightest* neighbour (the variant of
Bertsekas & Tsitsiklis chosen in 003 §IV), keeping the global order of the components so that the
communication graph stays the line (003 §VII-B, Fig. 8).

Estimators (003 §VII-B)
    ``residual``  the processor's residual ``‖X_i^t − X_i^{t−1}‖∞`` (the paper's proposal: it measures how far
                  the processor still is from its local fixed point), read in asynchronous runs by one of two
                  rules (``LineBalance.residual``, below): ``last``, 003's, or ``mean``, hermes' variant;
    ``time``      the duration of its last iteration (the classical estimator: equalises iteration times; the
                  same under both rules).

Decision (003 Alg. 4, TryLeftLB / TryRightLB, for the lighter neighbour j)
    ``Ratio = L_i / L_j``; if ``Ratio > threshold``, compute ``NbToSend``; send if ``n_i − NbToSend`` stays at
    least ``min_keep`` (the paper's ``ThresholdData``, against famine). The paper leaves NbToSend open; hermes
    treats the estimate as spread evenly over a processor's components and moves the share that would equalise
    the two estimates, scaled by ``fraction`` (``fraction < 1``: the coarser balancing 003 §VII-A recommends on
    slow networks)::

        NbToSend = ⌊fraction · (L_i − L_j) / (L_i/n_i + L_j/n_j)⌋

    For the time estimator this equalises the iteration times exactly when time is proportional to components;
    for the residual it is the same rule applied to a non-additive quantity, a heuristic (003 Fig. 8 explains why
    moving any border components still helps). A neighbour with zero estimate and positive own estimate gives
    an infinite ratio. Ties between the two neighbours go to the left one (003: "the left load balancing is tested
    before the right one").

The residual rules of asynchronous runs (``LineBalance.residual``, :data:`RESIDUAL_RULES`)
    ``last``  003 as printed (Alg. 3–4): the residual of the processor's last iteration; after ``every``
              iterations the processor tries at every iteration, with the estimates its neighbours last sent.
    ``mean``  hermes' variant, three rules together: the residual *averaged over the last* ``every``
              *iterations* of the processor's current block (:func:`residual_estimate`; restarted when the block
              gives or receives components); a decision only once the processor has that many iterations of its
              current block, as receiver as well as sender; and a neighbour's estimate counts only if it was made
              since the last transfer on the link between them.

    Why the variant: 003 compares processors that iterate at about the same rate (a homogeneous cluster, Fig.
    7–8). In AIAC on unequal machines a processor iterates many times between two arrivals of its neighbours'
    data: its residual is ``0`` (it re-solves the same block with the same ghosts) except for one *spike* after
    each arrival, and the iteration that first sweeps components just received heals the interface they were cut
    at (a spike of 20× the usual size, measured on ``scenarios/bahi-grid.yaml``). Under ``last`` a fast processor
    that tries at every iteration after its countdown eventually tries right after a spike, looks heavier than its
    slow neighbour and sends it components; the slow one sees the fast one's residual as ``0`` and sends half its
    block back, and the next spike sends more. On the Table I grid the slowest processor (PII, relative speed 1)
    ended with 625 of the 1,500 points, the fast ones spun through 10⁵ near-empty iterations and the run did not
    end within the spec's 10⁵ iterations. The mean is the same quantity as 003's where the residual changes
    smoothly, and the mean change per iteration, spikes and empty iterations included, on a processor that
    iterates faster than its inputs change; waiting for a full period keeps a sampled spike or the first
    iteration after a transfer from deciding. ``mean`` is the spec's default (``balancing.residual``); every
    reproduction of 003's figures sets ``last`` (docs/ASYNC.md, "Residual balancing on unequal machines").

The pure functions here are used by the synchronous form (all decisions of an iteration at once,
:func:`sync_transfers`, :func:`apply_transfers`, with the residual of the iteration itself: every processor
iterates once per step, so there are no spikes to average and the two rules are one) and, one rank at a time, by
the asynchronous one (:mod:`hermes.app.brusselator.aiac`, which adds the offer/accept handshake and the residual rules).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hermes.errors import BalancerError

__all__ = ["ESTIMATORS", "RESIDUAL_RULES", "LineBalance", "transfer_amount", "decide_transfer", "residual_estimate",
           "sync_transfers", "apply_transfers"]

ESTIMATORS = ("residual", "time")
#: how an asynchronous processor reads the residual estimator: 003's last iteration, or hermes' mean (docstring)
RESIDUAL_RULES = ("last", "mean")


@dataclass(frozen=True)
class LineBalance:
    """Parameters of the line balancer (003 Alg. 3–4).

    Attributes
    ----------
    estimator : {"residual", "time"}
    every : int
        Iterations between two tries (the paper's ``OkToTryLB``, 20); after the countdown a processor tries at
        every iteration until it sends.
    threshold : float
        ``ThresholdRatio``: balance when ``L_i / L_j`` exceeds it (≥ 1).
    fraction : float
        Share of the equalising amount that is sent, in (0, 1].
    min_keep : int
        ``ThresholdData``: components a sender keeps at least.
    residual : {"mean", "last"}
        How an asynchronous processor reads the residual estimator (module docstring): ``last``, 003's residual
        of the last iteration; ``mean``, hermes' variant (the mean over the last ``every`` iterations of the
        current block, decisions after a full period, neighbours' estimates only if made since the last transfer
        on the link). No effect on the time estimator or on synchronous runs.
    """

    estimator: str = "residual"
    every: int = 20
    threshold: float = 2.0
    fraction: float = 0.5
    min_keep: int = 1
    residual: str = "mean"

    @property
    def averaged(self) -> bool:
        """True when the asynchronous form reads the residual by hermes' ``mean`` rule."""
        return self.estimator == "residual" and self.residual == "mean"

    def __post_init__(self):
        if self.estimator not in ESTIMATORS:
            raise BalancerError(f"balancing.estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        if self.every < 1:
            raise BalancerError(f"balancing.every must be at least 1, got {self.every}")
        if not self.threshold >= 1.0:
            raise BalancerError(f"balancing.threshold must be at least 1, got {self.threshold}")
        if not 0.0 < self.fraction <= 1.0:
            raise BalancerError(f"balancing.fraction must be in (0, 1], got {self.fraction}")
        if self.min_keep < 1:
            raise BalancerError(f"balancing.min_keep must be at least 1, got {self.min_keep}")
        if self.residual not in RESIDUAL_RULES:
            raise BalancerError(f"balancing.residual must be one of {', '.join(RESIDUAL_RULES)}, "
                                f"got {self.residual!r}")


def _ratio(mine: float, theirs: float) -> float:
    if theirs > 0.0:
        return mine / theirs
    return math.inf if mine > 0.0 else 1.0


def transfer_amount(load: float, n: int, nb_load: float, nb_n: int, fraction: float) -> int:
    """``⌊fraction · (L_i − L_j) / (L_i/n_i + L_j/n_j)⌋`` (module docstring), 0 when ``L_i ≤ L_j``."""
    if load <= nb_load or n <= 0:
        return 0
    density = load / n + (nb_load / nb_n if nb_n > 0 else 0.0)
    return int(math.floor(fraction * (load - nb_load) / density))


def decide_transfer(load: float, n: int, left: tuple[float, int] | None, right: tuple[float, int] | None,
                    params: LineBalance) -> tuple[int, int] | None:
    """003 Alg. 4 towards the lighter neighbour: ``(side, count)`` with side −1 (left) / +1 (right), or None.

    Parameters
    ----------
    load, n : this processor's estimate and component count.
    left, right : (estimate, count) of the neighbours as last known, None for a missing neighbour or an
        unknown estimate.
    """
    cands = [(s, nb) for s, nb in ((-1, left), (1, right)) if nb is not None]
    if not cands:
        return None
    side, (nb_load, nb_n) = min(cands, key=lambda c: (c[1][0], c[0]))  # lightest, left first on ties
    if not _ratio(load, nb_load) > params.threshold:
        return None
    count = min(transfer_amount(load, n, nb_load, nb_n, params.fraction), n - params.min_keep)
    return (side, count) if count >= 1 else None


def residual_estimate(residuals: Sequence[float], every: int) -> float | None:
    """The residual estimate of an asynchronous processor under hermes' ``mean`` rule: the mean of its last
    ``every`` residuals (of all of them while there are fewer), None before the first.

    Parameters
    ----------
    residuals : sequence of float
        003's ``‖X_i^t − X_i^{t−1}‖∞`` of the iterations of the processor's current block, oldest first (the
        caller restarts it when the block changes: given or received components).
    every : int
        ``LineBalance.every`` (003's ``OkToTryLB``).

    Notes
    -----
    See the module docstring: a processor that iterates faster than its inputs change has residuals ``0`` with
    a spike after each arrival, and its instantaneous residual depends on when it is read; the mean over the
    balancing period does not. Where every processor iterates at the rate its inputs change (SISC, or 003's
    homogeneous cluster) the mean follows 003's residual with a lag of about ``every / 2`` iterations. The
    caller decides with its own estimate only once it holds ``every`` residuals of its current block.

    Examples
    --------
    >>> residual_estimate([8e-3, 0.0, 0.0, 0.0], 4)
    0.002
    >>> residual_estimate([1e-3, 2e-3, 8e-3, 0.0, 0.0, 0.0], 4)
    0.002
    >>> residual_estimate([], 4) is None
    True
    """
    if not residuals:
        return None
    last = residuals[-every:]
    return float(math.fsum(last) / len(last))


def sync_transfers(loads: NDArray[np.float64], counts: NDArray[np.int64],
                   params: LineBalance) -> list[tuple[int, int, int]]:
    """All decisions of one synchronous balancing step: ``(sender, receiver, count)`` for every sender.

    Every processor decides with its neighbours' current estimates; on a line with ``threshold ≥ 1`` two
    neighbours never send to each other (both ratios cannot exceed 1), and a sender keeps ``min_keep``
    components whatever it receives, so the decisions can be applied together (:func:`apply_transfers`).
    """
    p = len(loads)
    out = []
    for i in range(p):
        left = (float(loads[i - 1]), int(counts[i - 1])) if i > 0 else None
        right = (float(loads[i + 1]), int(counts[i + 1])) if i < p - 1 else None
        d = decide_transfer(float(loads[i]), int(counts[i]), left, right, params)
        if d is not None:
            out.append((i, i + d[0], d[1]))
    return out


def apply_transfers(bounds: NDArray[np.int64], transfers: list[tuple[int, int, int]]) -> NDArray[np.int64]:
    """New line partition after moving border components between neighbours.

    ``bounds`` (P + 1,) gives block i = ``[bounds[i], bounds[i+1])``; a transfer ``(i, i ± 1, c)`` moves i's last
    (first) c components to its right (left) neighbour, so only the inner bound between them moves and the order
    of the components is kept. Raises :class:`BalancerError` if a transfer is not between neighbours, a pair
    exchanges in both directions, or a block would become empty.
    """
    new = np.asarray(bounds, dtype=np.int64).copy()
    seen = set()
    for i, j, c in transfers:
        if abs(i - j) != 1 or c < 1:
            raise BalancerError(f"transfer {i}->{j} of {c}: only positive counts between neighbours")
        edge = min(i, j)
        if edge in seen:
            raise BalancerError(f"two transfers on the link {edge}-{edge + 1}")
        seen.add(edge)
        new[edge + 1] += -c if j > i else c
    if np.any(np.diff(new) < 1):
        raise BalancerError("a transfer would leave a processor without components")
    return new
