"""The house keeps one direction: every module sits in a tier and imports only its own tier or lower ones
(:data:`TIERS`), and there is no import cycle between hermes' parts or between its modules.

The import graph is derived from the code itself (``ast``), counting every import — at module level or
inside a function, since a lazy import is how a cycle hides, and under ``TYPE_CHECKING`` too — so the test
stays true as the code grows. A *part* is a subpackage (``hermes.balance``, ``hermes.data``, ...) or a
top-level module (``hermes.lifecycle.driver``, ``hermes.metrics``, ...).
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
    (hermes.runtime.communicator) and never ask which implementation they got: no module outside hermes.runtime imports
    the hosting, and none asks its communicator for an attribute with ``getattr``."""
    g = _graph()
    importers = sorted(a for a, b in g.edges if ".hosting" in b and not a.startswith("hermes.runtime"))
    assert not importers, f"outside the runtime, these import the hosting: {importers}"
    asking = sorted(f"{p.relative_to(ROOT)}: {m.group(0)}" for p in PACKAGE.rglob("*.py")
                    if "runtime" not in p.relative_to(PACKAGE).parts[:1]
                    for m in re.finditer(r"getattr\((self\.)?(comm|book\.comm|r\.book\.comm)\b[^)]*\)", p.read_text()))
    assert not asking, f"code that asks the communicator which implementation it is: {asking}"


# -- tiers by direction -----------------------------------------------------------------------------------------
#: The tiers, lowest first: a module may import its own tier and the tiers below it, never one above. A module
#: belongs to the tier of the longest entry that names it or a package holding it (``hermes.cli.parser`` is
#: cli); the top package ``hermes`` names only its ``__init__``.
#: A module no entry names fails the test: a new part takes its place here (and in docs/ARCHITECTURE.md's table,
#: which tests/test_architecture_doc.py holds to this one). Why each part sits where it does: the page's "Layering".
TIERS: dict[str, tuple[str, ...]] = {
    "core": ("hermes.errors", "hermes.bounds", "hermes.strict", "hermes.loaders", "hermes.files", "hermes.claims",
             "hermes.version", "hermes.interpreter", "hermes.machine", "hermes.metrics", "hermes.suggest",
             "hermes.progress"),
    "runtime": ("hermes.runtime",),
    "data": ("hermes.data",),
    "simulation": ("hermes.app.mesh",),
    "balance": ("hermes.balance", "hermes.monitor", "hermes.extraload"),
    "scenario": ("hermes.sections", "hermes.scenario"),
    "lifecycle": ("hermes.lifecycle", "hermes.adaptation"),
    "applications": ("hermes.app",),
    "tools": ("hermes.outputs", "hermes.viz", "hermes.trace", "hermes.compare", "hermes.lab", "hermes.api"),
    "cli": ("hermes.cli", "hermes.__main__", "hermes"),
}

def _names(module: str, entry: str) -> bool:
    return module == entry or (entry != "hermes" and module.startswith(entry + "."))


def _tier(module: str) -> str | None:
    """The tier of ``module`` (None: no entry names it)."""
    entries = [(len(e), t) for t, es in TIERS.items() for e in es if _names(module, e)]
    return max(entries)[1] if entries else None


def _upward(g: nx.DiGraph) -> list[tuple[str, str]]:
    """The imports in ``g`` from a lower tier to a higher one."""
    rank = {t: k for k, t in enumerate(TIERS)}
    return sorted((a, b) for a, b in g.edges if rank[_tier(a)] < rank[_tier(b)])


@pytest.mark.slow
def test_every_module_has_one_tier():
    entries = [e for es in TIERS.values() for e in es]
    assert len(entries) == len(set(entries)), "an entry of TIERS stands in two tiers"
    modules = _modules()
    assert not [m for m in modules if _tier(m) is None], \
        f"modules in no tier (give each a place in TIERS): {sorted(m for m in modules if _tier(m) is None)}"
    stale = sorted(e for e in entries if not any(_names(m, e) for m in modules))
    assert not stale, f"TIERS names what does not exist: {stale}"


@pytest.mark.slow
def test_no_tier_imports_a_higher_one():
    up = _upward(_graph())
    assert not up, "imports from a lower tier to a higher one: " + "; ".join(
        f"{a} ({_tier(a)}) -> {b} ({_tier(b)})" for a, b in up)


@pytest.mark.slow
def test_the_check_sees_an_upward_import():
    """A planted import of the command line by the data tier, and of the lifecycle by a balancer, are seen (so
    the test above can fail); an import downward is not."""
    g = _graph()
    planted = [("hermes.data.mesh", "hermes.cli.parser"), ("hermes.balance.potential.pcg", "hermes.lifecycle.state")]
    g.add_edges_from([*planted, ("hermes.cli.parser", "hermes.data.mesh")])
    assert set(planted) <= set(_upward(g))
    assert ("hermes.cli.parser", "hermes.data.mesh") not in _upward(g)


def test_a_module_takes_the_tier_of_its_longest_entry():
    assert _tier("hermes.runtime.hosting.host") == "runtime"
    assert _tier("hermes.lifecycle.driver") == "lifecycle"
    assert _tier("hermes") == "cli"
    assert _tier("hermes.newpart") is None  # the top package's entry names only itself


#: parts above the lifecycle tier that are whole programs of their own, not the mesh run's: they reach no module of
#: the lifecycle tier, directly or through what they import (what they shared with it, the machine's memory, is in
#: hermes.machine)
APART_FROM_THE_LIFECYCLE = ("hermes.app.brusselator", "hermes.lab")


def _reaching_the_lifecycle(g: nx.DiGraph, part: str) -> list[str]:
    reached = set().union(*(nx.descendants(g, m) for m in g if _names(m, part)))
    return sorted(m for m in reached if _tier(m) == "lifecycle")


@pytest.mark.slow
@pytest.mark.parametrize("part", APART_FROM_THE_LIFECYCLE)
def test_the_second_application_and_the_lab_stay_apart_from_the_mesh_run(part):
    assert not _reaching_the_lifecycle(_graph(), part)


@pytest.mark.slow
def test_the_apart_check_sees_a_planted_import():
    g = _graph()
    g.add_edge("hermes.app.brusselator.study", "hermes.lifecycle.preflight")
    assert "hermes.lifecycle.preflight" in _reaching_the_lifecycle(g, "hermes.app.brusselator")
