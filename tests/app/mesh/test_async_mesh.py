"""The asynchronous mesh application (hermes/app/mesh/async_mesh.py) without mpiexec: the scenario key, the
conservative receive rule, the serial oracle, and a one-rank run that must equal the synchronous loop."""

from __future__ import annotations

import numpy as np
import pytest
from mpi4py import MPI
from hermes.runtime.plain import plain

from hermes.app.mesh.async_mesh import _Stream, async_serial, solve_phase_async
from hermes.app.mesh.kernels import initial_fields, jacobi_serial
from hermes.app.mesh.simulate import solve_phase
from hermes.runtime.clock import Links, VirtualClock
from hermes.data.distributed import scatter_domain
from hermes.data.generators import grid
from hermes.errors import ScenarioError
from hermes.scenario import QUICKSTART, parse_scenario


# -- the scenario key --------------------------------------------------------------------------------------------
def test_mode_defaults_to_sync_and_reads_async():
    assert parse_scenario(QUICKSTART).application.mode == "sync"
    assert parse_scenario(QUICKSTART, overrides=["application.mode=async"]).application.mode == "async"


def test_unknown_mode_is_one_line_naming_the_key():
    with pytest.raises(ScenarioError) as err:
        parse_scenario(QUICKSTART, overrides=["application.mode=asynchronous"])
    msg = str(err.value)
    assert "application.mode" in msg and "\n" not in msg


@pytest.mark.parametrize("patch, key", [
    (["platform.latency=0"], "platform.latency"),
    (["platform.links=[{ranks: [0, 1], latency: 0}]"], "platform.links.0.latency"),
])
def test_async_refuses_a_zero_latency_on_the_virtual_clock(patch, key):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(QUICKSTART, overrides=["application.mode=async", *patch])
    msg = str(err.value)
    assert msg.startswith(f"{key}: application.mode async") and "\n" not in msg
    parse_scenario(QUICKSTART, overrides=patch)  # sync accepts it
    parse_scenario(QUICKSTART, overrides=["application.mode=async", "clock=wall", *patch])  # no simulation to stall


# -- the receive rule of the virtual clock ---------------------------------------------------------------------------
class _Inbox:
    """A fake communicator delivering one neighbour's messages in order, counting the receives."""

    def __init__(self, messages):
        self.messages, self.received = list(messages), 0

    def Recv(self, buf, source, tag):  # noqa: N802 (mpi4py's name)
        buf[:] = self.messages.pop(0)
        self.received += 1


def _msg(version, sent, arrival, value):
    return np.array([version, sent, arrival, value])


def test_stream_takes_the_newest_arrived_version_and_reads_no_further():
    comm = _Inbox([_msg(0, 0.0, 0.5, 0.0), _msg(1, 1.0, 2.0, 10.0), _msg(2, 2.0, 3.0, 20.0),
                   _msg(3, 3.0, 4.0, 30.0), _msg(-1, 4.0, np.inf, 0.0)])
    st = _Stream(comm, 1, 1, 0, np.array([-1.0]))
    st.at(0.4)  # nothing arrived yet: version 0 (the phase start), one message read and kept
    assert (st.version, st.values.tolist(), comm.received) == (0, [-1.0], 1)
    st.at(3.0)  # versions 1 and 2 arrived (2 exactly at s), 3 not yet: read, kept for later
    assert (st.version, st.values.tolist(), comm.received) == (2, [20.0], 4)
    st.at(3.5)
    assert (st.version, comm.received) == (2, 4)
    st.at(10.0)  # version 3, then "done": nothing more will come
    assert (st.version, st.values.tolist(), st.done, comm.received) == (3, [30.0], True, 5)
    st.at(20.0)
    assert comm.received == 5


# -- the serial oracle -------------------------------------------------------------------------------------------------
def _two_cells():
    """Two cells joined by one edge, each on its own rank."""
    xadj, adjncy = np.array([0, 1, 2]), np.array([1, 0])
    coords = np.array([[0.0, 0.0], [1.0, 0.0]])
    return xadj, adjncy, np.ones(2), initial_fields(coords), np.array([0, 1])


def test_oracle_versions_follow_the_latency():
    """Sweeps of 1 ms (rate 1000/s, weight 1), links of 2.5 ms: version m of a neighbour sent at s0 + m ms
    arrives at s0 + (m + 2.5) ms, so sweep k (starting at s0 + (k − 1) ms) uses version max(k − 4, 0)."""
    xadj, adjncy, w, fields, owner = _two_cells()
    links = Links(latency=2.5e-3, bandwidth=1e12)
    clocks = [VirtualClock(i, 2, links, 1000.0, 0.5) for i in range(2)]
    ref = async_serial(xadj, adjncy, w, fields["f"], fields["u"], owner, clocks, iterations=8, work_per_weight=1.0,
                       bytes_per_edge=64.0)
    expect = [max(k - 4, 0) for k in range(1, 9)]
    assert [int(v[0]) for v in ref.versions[0]] == expect == [int(v[0]) for v in ref.versions[1]]
    s0 = 2.5e-3 + 64.0 / 1e12
    assert ref.times == pytest.approx([s0 + 8e-3] * 2, rel=1e-12)
    # rates 1600/s and 400/s: the slow rank's last sweep (from s0 + 17.5 ms) sees the fast one's last version
    # (sent at s0 + 5 ms); the fast one's last sweep (from s0 + 4.375 ms) sees version 1 of the slow one
    clocks = [VirtualClock(i, 2, Links(latency=1e-4, bandwidth=1e12), 1000.0, c) for i, c in enumerate((0.8, 0.2))]
    ref = async_serial(xadj, adjncy, w, fields["f"], fields["u"], owner, clocks, iterations=8, work_per_weight=1.0,
                       bytes_per_edge=64.0)
    assert ref.versions[1][-1, 0] == 8 and ref.versions[0][-1, 0] == 1


def test_oracle_on_one_rank_is_serial_jacobi():
    mesh = grid(7, 5)
    fields = initial_fields(mesh.coords)
    ref = async_serial(mesh.xadj, mesh.adjncy, mesh.weights, fields["f"], fields["u"], np.zeros(mesh.n_cells),
                       [VirtualClock(0, 1, Links(), 1e5, 1.0)], iterations=9, work_per_weight=1.0, bytes_per_edge=8.0)
    assert np.array_equal(ref.u, jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 9))


# -- one rank: no neighbour, nothing stale — async equals sync bit for bit -------------------------------------------
@pytest.mark.parametrize("kernel", ["jacobi", "synthetic"])
def test_one_rank_async_equals_sync(kernel):
    comm = plain(MPI.COMM_SELF)
    mesh = grid(6, 4)
    dom = scatter_domain(comm, mesh, np.zeros(mesh.n_cells, dtype=np.int64), initial_fields(mesh.coords))
    out = {}
    for name, solve in (("sync", solve_phase), ("async", solve_phase_async)):
        clock = VirtualClock(0, 1, Links(), 1e5, 1.0)
        d, st = solve(comm, dom, clock, kernel=kernel, iterations=7, work_per_weight=2.0, bytes_per_edge=64.0)
        out[name] = (d.fields["u"], clock.now, st.residual, st.work, st.iterations)
    (us, ts, rs, ws, ks), (ua, ta, ra, wa, ka) = out["sync"], out["async"]
    assert np.array_equal(us, ua) and (ts, rs, ws, ks) == (ta, ra, wa, ka)
    assert ta == pytest.approx(7 * 2.0 * dom.load / 1e5)
    if kernel == "jacobi":
        assert np.array_equal(ua, jacobi_serial(mesh.xadj, mesh.adjncy, mesh.coords, 7))
