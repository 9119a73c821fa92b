"""What a run does otherwise than its scenario says is said where it happens (docs/LIMITS.md)."""

from __future__ import annotations

from hermes.data.io import read_mesh
from hermes.data.meshinfo import format_mesh_info, mesh_info
from hermes.lifecycle.setup import approximations
from hermes.scenario import QUICKSTART, parse_scenario


def test_flat_keys_of_other_balancers_and_zero_weights_are_said(tmp_path):
    graph = tmp_path / "zw.graph"
    graph.write_text("3 2 10\n0 2\n1 1 3\n2 2\n")  # vertex 1's weight is 0
    sc = parse_scenario(QUICKSTART, overrides=[f"mesh.file={graph}", "balancer.algorithm=sos", "balancer.fanout=3",
                                               "processors=1", "platform.capacities=homo"])
    mesh = read_mesh(graph)
    lines = approximations(sc, mesh)
    assert lines[0] == "balancer.fanout: not a parameter of 'sos' (other balancers'): ignored"
    assert lines[1].endswith(": 1 zero vertex weights made 1 (a work unit needs positive work)")
    assert approximations(parse_scenario(QUICKSTART)) == []  # the quickstart asks for nothing hermes does otherwise
    text = format_mesh_info(mesh_info(mesh))
    assert "approximated 1 zero first weights made 1" in text


def test_a_word_out_of_a_short_list_names_the_closest():
    from hermes.errors import ScenarioError

    for key, value, hint in [("monitor.source", "orcale", "'oracle'"), ("balancer.selection", "gian", "'gain'"),
                             ("application.kernel", "jacobbi", "'jacobi'")]:
        try:
            parse_scenario(QUICKSTART, overrides=[f"{key}={value}"])
        except ScenarioError as err:
            assert str(err).startswith(f"{key}: must be ") and str(err).endswith(
                f", got '{value}' (did you mean {hint}?)"), err
        else:
            raise AssertionError(f"{key}={value} accepted")
