"""Run many ``hermes`` command lines in one process (or one MPI job) and record how each ended.

Used by tests/test_bad_input.py so that the bad-input catalogue costs one interpreter start (and one
``mpiexec -n 4``) instead of one per case. ``python bad_input_batch.py CASES.json OUT.json`` runs every
case's ``argv`` through :func:`hermes.cli.main` with file descriptors 1 and 2 redirected to files (so
what C code and Open MPI print is captured too, per case and per rank) and records, per case: the exit
code, the captured stdout and stderr, the traceback of any exception that escaped ``main``, whether
``mpiexec`` would have been started (self-launched mode: the launch is intercepted, never performed), and
whether a phase of the run began (the driver's first step of a phase is intercepted and stops the run).
Under MPI the ranks' ``_exit_together`` (which finalises MPI and exits the process) is replaced by a
barrier that records the agreed code, so the next case can run; every rank writes ``OUT.json.<rank>``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
import warnings
from pathlib import Path


class Launched(BaseException):
    """hermes tried to start mpiexec."""


class PhaseStarted(BaseException):
    """The run got past its set-up into a phase."""


def _capture(fn):
    """Run ``fn()`` with fds 1 and 2 going to temporary files; (result, stdout, stderr)."""
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            result = fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        err.seek(0)
        return result, out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")


def main(cases_path: str, out_path: str) -> None:
    from hermes import cli
    from hermes.lifecycle import driver
    from hermes.runtime import launch
    warnings.simplefilter("always")  # a warning of one case must not hide the same warning of another
    cases = json.loads(Path(cases_path).read_text())
    sys.path.insert(0, str(Path(cases_path).parent))  # the catalogue's plug-in modules live beside the cases
    # ... named as a user names them, for the child that checks plug-ins (hermes.lifecycle.plugins)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(cases_path).parent),
                                                             os.environ.get("PYTHONPATH")]))
    state: dict = {}

    def no_launch(*args, **kwargs):
        state["launched"] = True
        raise Launched()

    def no_phase(*args, **kwargs):
        state["phase"] = True
        raise PhaseStarted()

    def exit_together(comm, code, timeout=60.0, message=None):
        state["exit_together"] = code
        sys.stdout.flush()
        sys.stderr.flush()
        comm.Barrier()

    launch.mpiexec_command = no_launch
    driver.extra_load = no_phase
    from hermes.cli import run as cli_run  # where the run command's job calls exit_together

    assert hasattr(cli_run, "exit_together"), "hermes.cli.run.exit_together is gone: update this batch runner"
    cli_run.exit_together = exit_together
    rank = 0
    if launch.under_mpi_launcher():
        from mpi4py import MPI

        rank = MPI.COMM_WORLD.Get_rank()
    results = []
    for case in cases:
        state.clear()

        def call(argv=case["argv"]):
            try:
                return {"code": cli.main(argv), "exception": None}
            except Launched:
                return {"code": None, "exception": None}
            except BaseException:  # noqa: BLE001 - recorded for the test to report
                return {"code": None, "exception": traceback.format_exc()}

        res, out, err = _capture(call)
        res.update(id=case["id"], stdout=out, stderr=err, launched=bool(state.get("launched")),
                   phase=bool(state.get("phase")), exit_together=state.get("exit_together"))
        results.append(res)
    with open(f"{out_path}.{rank}", "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
