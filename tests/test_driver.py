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


# -- the outputs the tools write ---------------------------------------------------------------------------------
def _tiny(**output):
    from hermes.scenario import QUICKSTART, parse_scenario

    return parse_scenario({**QUICKSTART, "processors": 1, "mesh": {"grid": "6x5"},
                           "platform": {**QUICKSTART["platform"], "capacities": "homo"},
                           "adaptation": {**QUICKSTART["adaptation"], "phases": 1},
                           "output": {"pictures": False, **output}})


class _Recorded:
    """An :class:`hermes.lifecycle.finish.Outputs` that records what the lifecycle asks of it."""

    def __init__(self):
        self.calls = []

    def ahead(self, out, base):
        self.calls.append(("ahead", out))

    def write(self, out, output):
        self.calls.append(("write", out, output.trace_spec is not None))

    def draw(self, out, sc, say=None, ahead=None):
        self.calls.append(("draw", out, sc.output.pictures))


def test_a_run_asking_for_pictures_without_output_writers_is_refused_before_any_work(tmp_path):
    """The lifecycle writes the records; the pictures, VTU files and trace are the tools' (hermes.outputs), handed
    in: without them a scenario that asks for one is one line, and no run directory is made."""
    import pytest

    from hermes.errors import ScenarioError
    from hermes.lifecycle import driver

    for key, value in (("pictures", True), ("vtu", True), ("lbdatafile", True)):
        sc = _tiny(**{key: value})
        with pytest.raises(ScenarioError, match=rf"^output\.{key}: the tools write it, and this run was handed none \(pass outputs="):
            driver.run(sc, plain(MPI.COMM_SELF), out_dir=tmp_path / key, quiet=True)
        assert not (tmp_path / key).exists()


def test_the_run_hands_its_directory_to_the_outputs_it_was_given(tmp_path):
    from hermes.lifecycle import driver

    rec = _Recorded()
    res = driver.run(_tiny(pictures=True, lbdatafile=True), plain(MPI.COMM_SELF), out_dir=tmp_path / "r",
                     quiet=True,
                     outputs=rec)
    assert res.out_dir == tmp_path / "r"
    assert rec.calls == [("write", res.out_dir, True), ("draw", res.out_dir, True)]
    assert (res.out_dir / "summary.json").is_file()


def test_a_flow_that_overflowed_is_rejected_with_a_reason():
    """A built-in's flow with an infinite or NaN value (a polynomial scheme far beyond the sizes where it is accurate
    in double precision overflows) is refused, not realised."""
    m = _path_model()
    for bad in (np.inf, np.nan):
        flow = minimal_flow(m)
        flow[1] = bad
        d = Decision(flow=flow)
        assert worsens(plain(MPI.COMM_SELF), m, d)
        assert d.info["rejected"] == "the flow is not finite (an overflow)"


def test_a_flow_its_balancer_doubts_or_that_carries_more_than_the_load_is_rejected():
    """Numerical debris whose rounded net sums look balanced (lps' product form at 1,024 processors: 10¹⁸ on the
    links, the imbalance "lowered" by the net sums and 57 once realised) is refused by what the balancer says of it
    (an eigen form's predicted error ≥ 1) and by its size (more than the whole load on one link)."""
    m = _path_model()
    doubted = Decision(flow=minimal_flow(m), info={"predicted_error": 3.0e20})
    assert worsens(plain(MPI.COMM_SELF), m, doubted)
    assert doubted.info["rejected"].startswith("the balancer's own error estimate is 3e+20")
    hopeless = Decision(flow=minimal_flow(m), info={"predicted_error": 3.0e20, "log10_condition": 122.06})
    assert worsens(plain(MPI.COMM_SELF), m, hopeless)
    assert hopeless.info["rejected"].endswith("varies by 10^122.1 within double precision's resolution of the "
                                              "eigenvalues, so no evaluation of it can be accurate on this graph")
    trusted = Decision(flow=minimal_flow(m), info={"predicted_error": 1e-12})
    assert not worsens(plain(MPI.COMM_SELF), m, trusted)
    # 10¹⁸ added on every link of the path: the net sums of the inner processors are unchanged in exact arithmetic
    big = Decision(flow=minimal_flow(m) + 1e18)
    assert worsens(plain(MPI.COMM_SELF), m, big)
    assert "more than the whole load 12" in big.info["rejected"]
