"""hermes: a testbed for dynamic load balancing of adaptive mesh simulations.

A revival of HeRMeS (T. Rotaru, PhD thesis, Neuchatel 2003, ch. 10). The package is split like the
HeRMeS design: data management (:mod:`hermes.data`), application simulation (:mod:`hermes.app.mesh`),
dynamic load balancing (:mod:`hermes.balance`), resource monitoring (:mod:`hermes.monitor`),
extra-load injection (:mod:`hermes.extraload`) and visualisation (:mod:`hermes.viz`), tied together
by the phase driver (:mod:`hermes.lifecycle.driver`) and the command line (:mod:`hermes.cli`).

The public API — a few verbs, everything else one import away (as networkx)::

    import hermes

    result = hermes.run("scenarios/quickstart.yaml", processors=4, balancer__algorithm="gda0")
    result["total_time"], result.phases, result.ranks, result.to_pandas()
    hermes.load_run("runs/quickstart-...")                     # a run directory read back
    hermes.compare("experiments/thesis.yaml")                  # an experiment: results table (DataFrame)
    model = hermes.Model.create(3, [(0, 1), (1, 2)], loads=[6, 0, 0], capacities=[1, 1, 1])
    hermes.balance(model, "pcg").flow                           # any balancer's serial reference
    mesh = hermes.read_mesh("meshes/airfoil.vtu"); hermes.partition(mesh, 8)

Importing hermes does not start MPI; :func:`hermes.run` launches ``mpiexec`` itself when it needs to. Nor does
it import numpy, scipy or any balancer: each name above is imported on first use (PEP 562), so ``hermes --version``
and every rank of a job pay only for what they use.
"""

from __future__ import annotations

import importlib
import sys
import types

from hermes.version import __version__

__all__ = ["__version__", "run", "load_run", "compare", "scenario", "balance", "Model", "RunResult", "read_mesh",
           "partition"]

#: the public names and the module that defines each, imported on first use
_LAZY = {
    "balance": "hermes.balance",  # the subpackage is callable: hermes.balance(model, "pcg")
    "compare": "hermes.compare",  # callable too: hermes.compare("experiments/thesis.yaml")
    "run": "hermes.api",
    "load_run": "hermes.api",
    "read_mesh": "hermes.api",
    "partition": "hermes.api",
    "Model": "hermes.balance.model",
    "RunResult": "hermes.lifecycle.records",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hermes' has no attribute {name!r}")
    mod = importlib.import_module(module)
    value = mod if module == f"hermes.{name}" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """``hermes.scenario`` is the verb :func:`hermes.api.scenario`, although a module of that name exists: importing
    the module :mod:`hermes.scenario` (``from hermes.scenario import ...``) binds it on its parent package, which
    would hide the verb, so the verb is a property of the package and the binding is not kept."""

    @property
    def scenario(self):
        from hermes.api import scenario

        return scenario

    @scenario.setter
    def scenario(self, value) -> None:
        pass  # the submodule stays reachable as sys.modules["hermes.scenario"] and by ``from hermes.scenario import``


sys.modules[__name__].__class__ = _Package
