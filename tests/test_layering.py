"""The house keeps one direction: no import cycle between hermes' parts or between its modules.

The import graph is derived from the code itself (``ast``), counting every import — at module level or
inside a function, since a lazy import is how a cycle hides — so the test stays true as the code grows.
A *part* is a subpackage (``hermes.balance``, ``hermes.data``, ...) or a top-level module
(``hermes.lifecycle.driver``, ``hermes.metrics``, ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hermes"


def _modules() -> dict[str, Path]:
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The hermes modules ``name`` imports (the most specific module each import statement names)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in modules:  # hermes.x.y.attr -> hermes.x.y
                t = t.rpartition(".")[0]
            if t and t != name:
                found.add(t)
    return found


def _graph() -> nx.DiGraph:
    modules = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(modules)
    for name, path in modules.items():
        g.add_edges_from((name, t) for t in _imports(name, path, modules))
    return g


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])


@pytest.mark.slow
def test_no_import_cycle_between_modules():
    cycles = sorted(nx.simple_cycles(_graph()), key=len)
    assert not cycles, "import cycles: " + "; ".join(" -> ".join([*c, c[0]]) for c in cycles[:5])


@pytest.mark.slow
def test_no_import_cycle_between_parts():
    g = _graph()
    parts = nx.DiGraph()
    parts.add_edges_from((_part(a), _part(b)) for a, b in g.edges if _part(a) != _part(b))
    cycles = sorted(nx.simple_cycles(parts), key=len)
    witness = {(a, b): [(x, y) for x, y in g.edges if _part(x) == a and _part(y) == b][:2]
               for c in cycles[:3] for a, b in zip(c, [*c[1:], c[0]])}
    assert not cycles, f"cycles between parts: {cycles[:3]} (e.g. {witness})"


@pytest.mark.slow
def test_nothing_inside_imports_the_top_package():
    """``hermes/__init__.py`` is the public API and imports the parts; a part importing ``hermes`` back
    would close a cycle through it."""
    g = _graph()
    offenders = sorted(m for m in g.predecessors("hermes") if m != "hermes")
    assert not offenders, f"modules importing the top package: {offenders}"


@pytest.mark.slow
@pytest.mark.parametrize("cycle", [["hermes.a", "hermes.b"]])
def test_the_check_sees_a_cycle(cycle):
    """The graph machinery finds a planted cycle (so the tests above can fail)."""
    g = _graph()
    g.add_edges_from([(cycle[0], cycle[1]), (cycle[1], cycle[0])])
    assert any(set(c) == set(cycle) for c in nx.simple_cycles(g))


#: modules that decide from the sections of the scenario they are handed, never from the run or the scenario
#: whole (issue 26): what they may not reach, directly or through what they import
SECTIONS_ONLY = {"hermes.balance.policy": ("hermes.lifecycle", "hermes.scenario")}


@pytest.mark.slow
@pytest.mark.parametrize("module", sorted(SECTIONS_ONLY))
def test_balancing_policy_sees_sections_not_the_run(module):
    """The balancing policy (when to balance, a round's payoff, conductances, the boundary refinement's gate)
    lives beside the balancers and is handed the sections it reads: it reaches neither the driver and the run's
    state (hermes.lifecycle) nor the Scenario object."""
    g = _graph()
    assert module in g, f"{module} is gone: update SECTIONS_ONLY"
    reached = nx.descendants(g, module)
    bad = sorted(m for m in reached if any(m == p or m.startswith(p + ".") for p in SECTIONS_ONLY[module]))
    assert not bad, f"{module} reaches {bad}"


@pytest.mark.slow
def test_the_policy_check_sees_a_planted_import():
    """The check above fails when the policy imports the driver's state (so it can fail)."""
    g = _graph()
    g.add_edge("hermes.balance.policy", "hermes.lifecycle.state")
    assert "hermes.lifecycle.state" in nx.descendants(g, "hermes.balance.policy")


@pytest.mark.slow
def test_only_the_runtime_knows_the_hosting():
    """Data, balancing, the lifecycle and the applications call the runtime communicator's interface
    (hermes.runtime.interface) and never ask which implementation they got: no module outside hermes.runtime imports
    the hosting, and none asks its communicator for an attribute with ``getattr``."""
    g = _graph()
    importers = sorted(a for a, b in g.edges if ".hosting" in b and not a.startswith("hermes.runtime"))
    assert not importers, f"outside the runtime, these import the hosting: {importers}"
    asking = sorted(f"{p.relative_to(ROOT)}: {m.group(0)}" for p in PACKAGE.rglob("*.py")
                    if "runtime" not in p.relative_to(PACKAGE).parts[:1]
                    for m in re.finditer(r"getattr\((self\.)?(comm|book\.comm|r\.book\.comm)\b[^)]*\)", p.read_text()))
    assert not asking, f"code that asks the communicator which implementation it is: {asking}"
