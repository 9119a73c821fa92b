"""The Brusselator study of Bahi, Contassot-Vivier & Couturier (seed 003): a second application, beside the mesh.

003 solves the 1-D Brusselator on processors in a line, synchronously (SISC) or asynchronously (AIAC), and balances
it by moving border points to the lighter neighbour, the load measured by the residual or the iteration time
(docs/ASYNC.md). It shares hermes' clock, links, error and file conventions but none of the mesh machinery.

* :mod:`hermes.app.brusselator.brusselator` — the problem (003 eq. 4), implicit Euler + Newton, the serial reference;
* :mod:`hermes.app.brusselator.blocks` — one processor's block of the line;
* :mod:`hermes.app.brusselator.iteration` — what SISC and AIAC share: configuration, platform, links, records;
* :mod:`hermes.app.brusselator.sisc` — synchronous iterations; :mod:`hermes.app.brusselator.aiac` and
  :mod:`hermes.app.brusselator.aiac_mpi` — asynchronous iterations (003 Alg. 1–3), simulated in one process or one
  processor per MPI process;
* :mod:`hermes.app.brusselator.line_balance` — the line balancer of 003 Alg. 3–4 (residual or time estimator);
* :mod:`hermes.app.brusselator.study` — the run spec, :func:`~hermes.app.brusselator.study.run_brusselator`,
  :func:`~hermes.app.brusselator.study.simulate`, the summary.

``hermes run`` reaches it through :mod:`hermes.cli.run_brusselator` (a spec with ``application.kernel: brusselator``,
:func:`is_spec_file`, in :mod:`hermes.app.brusselator.spec_file`, so that telling a spec
from a mesh scenario imports none of the study).
"""

from hermes.app.brusselator.spec_file import is_spec_file

__all__ = ["is_spec_file"]
