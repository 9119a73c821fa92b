"""Driver guards that need no MPI job: a flow that would not lower the imbalance is not applied."""

from __future__ import annotations

import numpy as np
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.balance.flow import minimal_flow
from hermes.balance.model import Model
from hermes.balance.policy import worsens
from hermes.balance.registry import Decision


def _path_model() -> Model:
    edges = np.array([[0, 1], [1, 2], [2, 3]])
    return Model(4, edges, np.array([8.0, 1.0, 1.0, 2.0]), np.full(4, 0.25), np.ones(3))


def test_a_balancing_flow_is_applied():
    m = _path_model()
    d = Decision(flow=minimal_flow(m))
    assert not worsens(plain(MPI.COMM_SELF), m, d) and "rejected" not in d.info


def test_a_flow_that_raises_the_imbalance_is_rejected_with_a_reason():
    m = _path_model()
    d = Decision(flow=-minimal_flow(m))  # the right amounts, the wrong way
    assert worsens(plain(MPI.COMM_SELF), m, d)
    assert d.info["rejected"].startswith("the flow would not lower the imbalance (2.667 -> ")
    # a flow that leaves the most loaded processor untouched does not lower the imbalance either
    side = Decision(flow=np.array([0.0, 0.0, -0.5]))
    assert worsens(plain(MPI.COMM_SELF), m, side) and "rejected" in side.info
