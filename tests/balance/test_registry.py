"""The registry: every built-in declares its parameters once, and everything reads that declaration."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from hermes.balance.interface import BalancerInfo, NoParams
from hermes.balance.registry import BALANCERS, Registry, get_balancer
from hermes.cli.info import markdown_balancers
from hermes.errors import BalancerError

ROOT = Path(__file__).resolve().parents[2]
WITH_SERIAL = sorted(n for n, b in BALANCERS.items() if b.serial is not None)


def test_the_registry_knows_every_built_in_and_reads_like_a_dict():
    assert len(BALANCERS) == 25 and BALANCERS.get("pcg") is BALANCERS["pcg"] and "gda0" in BALANCERS


def test_registering_keeps_the_built_ins():
    reg = Registry()
    reg.add(BALANCERS["pcg"])
    reg["mine"] = BALANCERS["gda0"]
    assert set(reg) == {"pcg", "mine"} and reg["mine"].name == "mine"
    with pytest.raises(ValueError, match="registered twice"):
        reg.add(BALANCERS["pcg"])
    BALANCERS["temporary"] = BalancerInfo("temporary", lambda ctx: None, NoParams)
    try:
        assert len(BALANCERS) == 26 and "pcg" in BALANCERS
    finally:
        del BALANCERS["temporary"]


@pytest.mark.parametrize("name", WITH_SERIAL)
def test_serial_references_take_every_parameter_with_the_declared_default(name):
    """No renaming closures, no second set of defaults: the serial reference accepts each declared parameter
    under its name, and where it has a default of its own, that default is the declared one."""
    info = BALANCERS[name]
    sig = inspect.signature(info.serial).parameters
    var = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.values())
    assert "links" in sig or var
    for key, f in info.params.model_fields.items():
        assert key in sig or var, f"{name}: the serial reference does not take {key!r}"
        if key in sig and sig[key].default is not inspect.Parameter.empty:
            assert sig[key].default == f.default, f"{name}.{key}: {sig[key].default!r} != {f.default!r}"


def test_parameter_reference_is_generated_from_the_models():
    """docs/PARAMETERS.md is `hermes balancers --markdown`: regenerate it when a parameter changes."""
    assert (ROOT / "docs" / "PARAMETERS.md").read_text() == markdown_balancers(BALANCERS)


def test_every_parameter_reference_row_names_its_values():
    """A value of either form (a number, or a mapping by balancer name) is shown as both, never as 'any'."""
    rows = [r for r in markdown_balancers(BALANCERS).splitlines() if r.startswith("| `")]
    assert rows and not [r for r in rows if r.split(" | ")[2] == "any"]
    (setup,) = [r for r in rows if r.startswith("| `balance_setup` |")]
    assert setup.split(" | ")[2] == "number ≥ 0, ≤ 1e+100 or {balancer: number ≥ 0, ≤ 1e+100}"


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(BalancerError, match=r"unknown balancer 'pcgg' \(did you mean 'pcg'\?\); valid: .*gda0.*pcg"):
        get_balancer("pcgg")
    with pytest.raises(BalancerError, match="an import path looks like"):
        get_balancer("module_only:")
