"""hermes: a testbed for dynamic load balancing of adaptive mesh simulations.

A revival of HeRMeS (T. Rotaru, PhD thesis, Neuchatel 2003, ch. 10). The package is split like the
HeRMeS design: data management (:mod:`hermes.data`), application simulation (:mod:`hermes.app`),
dynamic load balancing (:mod:`hermes.balance`), resource monitoring (:mod:`hermes.monitor`),
extra-load injection (:mod:`hermes.extraload`) and visualisation (:mod:`hermes.viz`), tied together
by the phase driver (:mod:`hermes.driver`) and the command line (:mod:`hermes.cli`).

The public API — a few verbs, everything else one import away (as networkx)::

    import hermes

    result = hermes.run("scenarios/quickstart.yaml", processors=4, balancer__algorithm="gda0")
    result["total_time"], result.phases, result.ranks, result.to_pandas()
    hermes.load_run("runs/quickstart-...")                     # a run directory read back
    hermes.compare("experiments/thesis.yaml")                  # an experiment: results table (DataFrame)
    model = hermes.Model.create(3, [(0, 1), (1, 2)], loads=[6, 0, 0], capacities=[1, 1, 1])
    hermes.balance(model, "pcg").flow                           # any balancer's serial reference
    mesh = hermes.read_mesh("meshes/airfoil.vtu"); hermes.partition(mesh, 8)

Importing hermes does not start MPI; :func:`hermes.run` launches ``mpiexec`` itself when it needs to.
"""

from __future__ import annotations

from hermes import balance  # noqa: F401  (the subpackage is callable: hermes.balance(model, "pcg"))
from hermes import compare  # noqa: F401  (callable too: hermes.compare("experiments/thesis.yaml"))
from hermes.api import load_run, partition, read_mesh, run, scenario
from hermes.balance.model import Model
from hermes.records import RunResult
from hermes.version import __version__

__all__ = ["__version__", "run", "load_run", "compare", "scenario", "balance", "Model", "RunResult", "read_mesh",
           "partition"]
