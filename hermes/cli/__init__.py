"""The ``hermes`` command line: parse, dispatch, report errors in one line.

One grammar, after git's habits: verbs for what users do — ``run``, ``resume RUN_DIR``, ``compare``, ``plot`` —
and nouns with subcommands for what they inspect — ``mesh info|generate``, ``trace info|write|replay``, ``lab
flow|gossip|bench``, ``balancers``, ``scenario``. The spellings before it (``replay``, ``flow``, ``gossip``,
``flow-bench``, ``run --resume DIR``) still work for one release: :func:`hermes.cli.parser.respell` rewrites them
before parsing and rank 0 says the new spelling in one note on stderr (stdout belongs to ``--json`` and ``--list``).
A mistyped command, subcommand or option is one line with the closest names (:func:`hermes.suggest.close_names`).

Commands are thin wrappers over Python functions (:func:`hermes.lifecycle.driver.run`, :func:`hermes.viz.plot_run`
...), one module per group: :mod:`~hermes.cli.run` (``run`` and ``resume``; the applications it runs:
:mod:`~hermes.cli.run_mesh`, :mod:`~hermes.cli.run_brusselator`), :mod:`~hermes.cli.plot`, :mod:`~hermes.cli.compare`
(``compare``, ``trace``), :mod:`~hermes.cli.info` (``scenario``, ``balancers``, ``mesh``) and :mod:`~hermes.cli.lab`
(``lab flow``, ``lab gossip``, ``lab bench``), each imported only when its command runs (``hermes --version``
imports none). The parser is :mod:`hermes.cli.parser`. Only the runtime names ``MPI.COMM_WORLD``
(:func:`hermes.runtime.world.world`).

Exit codes: 0 success, 2 bad input or results that cannot be written (a full disk, a read-only medium, a directory
in use: one line ``hermes: error: ...`` on rank 0, every rank exits 2; an error only some ranks met: one line naming
the rank; a plug-in whose import hangs or ends its process; an MPI job that could not start), 3 ``hermes compare``
ran an experiment and a run of it failed (:data:`hermes.compare.runner.EXIT_RUNS_FAILED`), 124 the watchdog ended a
job without progress, 1 an unexpected failure (under MPI the whole job is aborted so no rank waits forever; a rank
that ended or was killed without a word: one line from the launcher, mpiexec's status), 128 + N the launcher was
stopped by signal N.
"""

from __future__ import annotations

from hermes.cli.main import main
from hermes.cli.parser import build_parser

__all__ = ["main", "build_parser"]
