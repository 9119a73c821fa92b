"""Every balancer parameter is bounded: no accepted value can hang a run or exhaust its memory.

The bounds follow the scenario's (hermes/scenario.py, "Bounds"): every integer and number of every registered
balancer's parameter model has a finite lower and upper bound in its JSON schema (what ``hermes balancers
--markdown`` prints), magnitudes at most ``BIG``, and a bool is refused where a number is meant.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np
import pytest

import hermes.balance  # noqa: F401  (fills the registry)
from hermes.balance.diffusion.gda import StopParams, gda
from hermes.balance.diffusion.implicit import WattsParams, implicit
from hermes.balance.gossip import grapevine_serial
from hermes.balance.gossip.grapevine import RankObjects, grapevine_distributed
from hermes.balance.gossip.grapevine_serial import GrapevineParams, check_gossip_params, grapevine
from hermes.balance.interface import BIG, MAX_ITERATIONS, MAX_PROCESSORS, Count, Integer, Number, Params
from hermes.balance.registry import BALANCERS
from hermes.errors import BalancerError
from hermes.lab.specs import parse_model


def _numbers(node: dict, path: str):
    """(path, schema node) of every integer or number in a property's schema, alternatives included."""
    for k, alt in enumerate(node.get("anyOf", [])):
        yield from _numbers(alt, f"{path}[{k}]")
    if node.get("type") in ("integer", "number"):
        yield path, node


def _fields():
    for name, info in sorted(BALANCERS.items()):
        for key, prop in info.params.model_json_schema().get("properties", {}).items():
            for path, node in _numbers(prop, f"{name}.{key}"):
                yield name, key, path, node


FIELDS = list(_fields())


def test_the_models_have_the_numbers_we_expect():
    paths = {p for _, _, p, _ in FIELDS}
    assert {"grapevine.iterations", "grapevine.fanout", "grapevine.rounds", "grapevine.seed[0]", "pcg.tolerance",
            "pcg.max_iterations[0]", "gda0.max_iterations", "sos.eps[1]", "lps.refine[1]", "fos.unit_bytes",
            "scotch.migration_cost", "mpa.max_degree[0]"} <= paths


@pytest.mark.parametrize("name, key, path, node", FIELDS, ids=[p for _, _, p, _ in FIELDS])
def test_every_number_has_finite_bounds(name, key, path, node):
    low = node.get("minimum", node.get("exclusiveMinimum"))
    high = node.get("maximum", node.get("exclusiveMaximum"))
    assert low is not None and high is not None, f"{path} is unbounded: {node}"
    assert -BIG <= low < high <= BIG and math.isfinite(low) and math.isfinite(high), f"{path}: {node}"


@pytest.mark.parametrize("name, key, path, node", FIELDS, ids=[p for _, _, p, _ in FIELDS])
def test_a_bool_is_not_a_number(name, key, path, node):
    with pytest.raises(BalancerError, match=rf"^balancer\.{key}: must be"):
        BALANCERS[name].check({key: True})


@pytest.mark.parametrize("name", sorted(BALANCERS))
def test_the_defaults_are_valid(name):
    info = BALANCERS[name]
    if name == "scotch":
        pytest.importorskip("pyscotch")
    assert info.check({}) == info.defaults


@pytest.mark.parametrize("key, value, words", [
    ("iterations", 10**9, "balancer.iterations: must be less than or equal to 10000, got 1000000000"),
    ("fanout", 10**9, "balancer.fanout: must be less than or equal to 100000, got 1000000000"),
    ("rounds", 10**9, "balancer.rounds: must be less than or equal to 100000, got 1000000000"),
    ("threshold", 1e300, "balancer.threshold: must be a finite number of magnitude at most 1e+100, got 1e+300"),
    ("seed", 2**40, "balancer.seed: must be less than or equal to 2147483647, got 1099511627776"),
    ("fanout", True, "balancer.fanout: must be an integer, got True"),
])
def test_grapevine_refuses_what_would_hang_or_exhaust_memory(key, value, words):
    with pytest.raises(BalancerError) as err:
        BALANCERS["grapevine"].check({key: value})
    assert str(err.value) == words


def test_grapevine_gossip_rounds_in_all_are_bounded():
    assert BALANCERS["grapevine"].check({"iterations": 100, "rounds": 10_000})["rounds"] == 10_000
    with pytest.raises(BalancerError) as err:
        BALANCERS["grapevine"].check({"iterations": 1000, "rounds": 10_000})
    assert str(err.value) == ("balancer.rounds: with iterations 1000, must be at most 1000 (iterations × rounds ≤ "
                              "1000000 gossip rounds), got 10000")
    with pytest.raises(BalancerError, match=r"^--rounds: with --iterations 1000, must be at most 1000 "):
        check_gossip_params(1000, 10_000, 4, 1.0, "modified", 0, prefix="--")


def test_a_plugin_authors_shared_types_are_bounded():
    class Mine(Params):
        steps: Count = 5
        level: Integer = 0
        scale: Number = 1.0

    props = Mine.model_json_schema()["properties"]
    assert props["steps"]["maximum"] == MAX_ITERATIONS and props["level"]["minimum"] == -MAX_ITERATIONS
    assert (props["scale"]["minimum"], props["scale"]["maximum"]) == (-BIG, BIG)


#: sha256 (first 16 hex digits) of the final ranks, history and counters of the case below, computed by hermes
#: before the uniforms beyond p − 1 were skipped (d4067b8): the skip changes no result
BEFORE = {2: "9bf8810f69f6618e", 3: "81fbbcca6263ea1f", 4: "77a7d2345c3f9bdc", 7: "419726875e29a6d0",
          50: "ffdbe4009e63e919"}


def _case(fanout: int):
    rng = np.random.default_rng(5)
    loads, owner = rng.uniform(0.1, 1.0, 60), rng.integers(0, 2, 60)
    return grapevine(loads, owner, 4, GrapevineParams(iterations=6, rounds=3, fanout=fanout, threshold=1.0), seed=11)


def _digest(res) -> str:
    text = json.dumps([res.object_rank.tolist(), res.history, res.counters.as_dict()])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize("fanout", sorted(BEFORE))
def test_skipping_the_uniforms_beyond_the_other_ranks_changes_no_result(fanout):
    assert _digest(_case(fanout)) == BEFORE[fanout]


def test_a_fanout_beyond_the_other_ranks_costs_nothing(monkeypatch):
    """Fanout 1e5 on 4 ranks: 3 uniforms drawn per rank and round, the stream advanced past 99,997 others;
    the same results as drawing all of them (which took hermes minutes in pick_targets, and 1e9 asked for
    32 GB)."""
    res = _case(MAX_PROCESSORS)
    monkeypatch.setattr(grapevine_serial, "gossip_uniforms", lambda rng, f, used: rng.random(f)[:used])
    assert _digest(_case(MAX_PROCESSORS)) == _digest(res)


def test_the_distributed_form_checks_the_same_bounds():
    with pytest.raises(BalancerError, match="fanout: must be at most 100000, got 1000000000"):
        grapevine_distributed(None, RankObjects([], []), GrapevineParams.model_construct(fanout=10**9))  # unvalidated
    with pytest.raises(BalancerError, match="iterations: must be at most 10000"):
        grapevine(np.ones(2), np.zeros(2, dtype=int), 2, GrapevineParams.model_construct(iterations=10**9))
    assert GrapevineParams().fanout == 4


@pytest.mark.parametrize("name, params, words", [
    ("gda0", {"max_iterations": 10**9}, "max_iterations: must be less than or equal to 1000000"),
    ("gda0", {"check_every": 10**9}, "check_every: must be less than or equal to 1000000"),
    ("pcg", {"max_iterations": 10**9}, "max_iterations must be an integer in 0..1000000"),
    ("chebyshev", {"max_iterations": 10**9}, "max_iterations must be an integer in 1..1000000"),
    ("implicit", {"sweeps": 10**9}, "sweeps: must be less than or equal to 1000000"),
    ("fos", {"seed": 2**40}, "seed: must be less than or equal to 2147483647"),
    ("fos", {"unit_bytes": 1e300}, "unit_bytes: must be a finite number of magnitude at most 1e+100"),
])
def test_the_serial_references_check_the_same_bounds(name, params, words):
    """Called from Python without the model (``hermes.balance.potential.pcg.pcg(model, max_iterations=...)``)."""
    model = parse_model("path:4", "homo", "1", "one")
    with pytest.raises(BalancerError, match=re.escape(words)):
        BALANCERS[name].serial(model, **params)


@pytest.mark.parametrize("run, words", [
    (lambda m: gda(m, 1.0, StopParams.model_construct(max_iterations=10**9)),
     "max_iterations must be an integer in 0..1000000"),
    (lambda m: gda(m, 1.0, StopParams.model_construct(check_every=10**9)),
     "check_every must be an integer in 1..1000000"),
    (lambda m: implicit(m, params=WattsParams.model_construct(sweeps=10**9)),
     "sweeps must be None or an integer in 0..1000000"),
])
def test_the_kernels_check_an_unvalidated_parameters_object_again(run, words):
    """The serial kernels take their parameters object; one built without validation (``model_construct``) is
    checked again against the same bounds."""
    with pytest.raises(BalancerError, match=re.escape(words)):
        run(parse_model("path:4", "homo", "1", "one"))


def test_a_long_implicit_step_is_refused_not_iterated_for_minutes():
    """α = 1e6 is within alpha's bound, but its inner solve would take 2.6e7 Jacobi sweeps per step (2 min on a
    16-path): refused on every rank (β_max is agreed) before the first sweep."""
    model = parse_model("path:16", "homo", "1", "random:0")
    with pytest.raises(BalancerError, match=r"inner solve needs \d+ Jacobi sweeps .* more than 1000000"):
        BALANCERS["implicit"].flow(model, alpha=1e6)
    assert BALANCERS["implicit"].flow(model, alpha=100.0).extra["sweeps"] == 1215
