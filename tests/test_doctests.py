"""The Examples of the public API's docstrings run as doctests (networkx's habit), so that they cannot rot:
hermes.scenario, hermes.load_run, hermes.partition (hermes/api.py), hermes.read_mesh (hermes/data/io.py),
node_graph_counts (hermes/data/thesis_meshes.py),
hermes.balance (hermes/balance/__init__.py), hermes.Model (hermes/balance/model.py), a platform profile's
BalancePrices (hermes/runtime/clock.py), and the command line's respell (hermes/cli/parser.py)."""

from __future__ import annotations

import doctest
import importlib
import time

import pytest

from tests.conftest import ROOT

#: module → the names whose docstrings hold the examples (each must hold some: a test that finds none fails)
DOCUMENTED = {
    "hermes.api": ("scenario", "load_run", "partition"),
    "hermes.data.io": ("read_mesh",),
    "hermes.data.thesis_meshes": ("node_graph_counts",),
    "hermes.balance": ("balance",),
    "hermes.balance.model": ("Model",),
    "hermes.cli.parser": ("respell",),
    "hermes.runtime.clock": ("BalancePrices",),
    "hermes.suggest": ("",),  # the module's own docstring
}
#: the time an example may take (a docstring is read, not waited for)
SECONDS = 2.0


@pytest.mark.parametrize("module, name", [(m, n) for m, names in DOCUMENTED.items() for n in names])
def test_the_examples_run(module, name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name the shipped files as a clone's top directory sees them
    mod = importlib.import_module(module)
    finder = doctest.DocTestFinder(recurse=False)
    obj = getattr(mod, name) if name else mod
    (test,) = finder.find(obj, f"{module}.{name}".rstrip("."), module=mod, globs=dict(vars(mod)))
    assert test.examples, f"{module}.{name} has no Examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    start = time.perf_counter()
    runner.run(test, out=lambda text: pytest.fail(text, pytrace=False))
    result = runner.summarize(verbose=False)
    assert result.failed == 0 and result.attempted == len(test.examples)
    assert time.perf_counter() - start < SECONDS * len(test.examples), "the examples are too slow to read"
