"""The Brusselator study of Bahi, Contassot-Vivier & Couturier (seed 003): a second application, beside the mesh.

003 solves the 1-D Brusselator on processors in a line, synchronously (SISC) or asynchronously (AIAC), and balances
it by moving border points to the lighter neighbour, the load measured by the residual or the iteration time
(docs/ASYNC.md). It shares hermes' clock, links, error and file conventions but none of the mesh machinery.

* :mod:`hermes.bahi.brusselator` — the problem (003 eq. 4), implicit Euler + Newton, the serial reference;
* :mod:`hermes.bahi.blocks` — one processor's block of the line;
* :mod:`hermes.bahi.iteration` — what SISC and AIAC share: configuration, platform, links, records;
* :mod:`hermes.bahi.sisc` — synchronous iterations; :mod:`hermes.bahi.aiac` and :mod:`hermes.bahi.aiac_mpi` —
  asynchronous iterations (003 Alg. 1–3), simulated in one process or one processor per MPI process;
* :mod:`hermes.bahi.line_balance` — the line balancer of 003 Alg. 3–4 (residual or time estimator);
* :mod:`hermes.bahi.study` — the run spec, :func:`~hermes.bahi.study.run_brusselator`,
  :func:`~hermes.bahi.study.simulate`, the summary.

``hermes run`` reaches it through :mod:`hermes.cli.run_bahi` (a spec with ``application.kernel: brusselator``,
:func:`is_spec_file`: defined here, so that telling a spec from a mesh scenario imports none of the study).
"""

from __future__ import annotations

from pathlib import Path

from hermes.errors import HermesError
from hermes.loaders import load_yaml

__all__ = ["is_spec_file"]


def is_spec_file(path: str | Path) -> bool:
    """Whether ``path`` is a Brusselator spec (``application.kernel: brusselator``); False for anything else,
    including files that cannot be read (the scenario loader then says why)."""
    try:
        data = load_yaml(path, str(path))
    except HermesError:
        return False
    app = data.get("application") if isinstance(data, dict) else None
    return isinstance(app, dict) and app.get("kernel") == "brusselator"
