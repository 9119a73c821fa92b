"""The Brusselator study of 003 (:mod:`hermes.app.brusselator`) as ``hermes run`` sees it (:data:`BAHI_STUDY`), and its
lower-level runner ``python -m hermes.cli.run_brusselator SPEC.yaml [--set key=value ...] [--serial] [--json OUT]
[--timeline NPZ]`` (rank 0 prints the summary as JSON; :mod:`hermes.app.brusselator.study`; an error is one line
``hermes: error: ...``, exit 2, naming the rank when only some ranks met it).

``hermes run SPEC.yaml`` of a spec with ``application.kernel: brusselator``: the spec is validated serially, then
``mpiexec -n processors`` runs one processor per process; rank 0 prints the result and, with ``--out DIR``, writes
the run directory ``DIR`` (marker, ``scenario.yaml``, ``summary.json``), with the lifecycle of every hermes run
directory (:func:`hermes.files.claim_dir`: a new, empty or hermes-made directory, locked for the run's life). With
``--no-launch`` outside MPI, a virtual-clock spec of several processors is simulated in this process
(:func:`hermes.app.brusselator.study.simulate`, the same results). ``--timeout`` bounds the whole run's wall time (the
watchdog of :mod:`hermes.runtime.watchdog`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hermes.cli.application import Launch, Outcome
from hermes.cli.common import EXIT_BAD_INPUT, check_timeout, error, exit_together
from hermes.runtime.start import start
from hermes.runtime.world import world

__all__ = ["BahiStudy", "BAHI_STUDY", "main"]


class BahiStudy:
    """The Brusselator study: the scenarios that are Brusselator specs (:func:`hermes.app.brusselator.is_spec_file`)."""

    name = "bahi"

    def runs(self, args) -> bool:
        if not args.scenario or args.resume is not None:
            return False
        from hermes.app.brusselator import is_spec_file

        return is_spec_file(args.scenario)

    def prepare_launch(self, args) -> Launch:
        from hermes.app.brusselator.study import load_spec
        from hermes.claims import claim_dir

        check_timeout(args)  # the job arms its own watchdog with the same --timeout
        spec = load_spec(args.scenario, args.overrides)
        lock = claim_dir(args.out, "--out", force=args.force, name=spec.name) if args.out else None
        extra = ["--lock-token", lock.token] if lock is not None else []
        return Launch(spec.processors, spec.processors, extra, lock)

    def run(self, args, comm, held) -> Outcome:
        from hermes.app.brusselator.study import load_spec, run_brusselator, simulate, summarise, write_run
        from hermes.runtime.comm import agree
        from hermes.claims import claim_dir
        from hermes.runtime.watchdog import Watchdog

        rank = comm.Get_rank()
        timeout = check_timeout(args)
        spec = load_spec(args.scenario, args.overrides)
        if args.out:
            def claim() -> None:
                lock = claim_dir(args.out, "--out", force=args.force, token=args.lock_token, name=spec.name)
                held.callback(lock.release, remove_if_unused=True)

            agree(comm, lambda: claim() if rank == 0 else None)
        with Watchdog(comm, timeout, what="--timeout (the whole Brusselator run)"):
            if comm.Get_size() == 1 and spec.processors > 1 and spec.clock == "virtual":
                summary = summarise(spec, *simulate(spec))
            else:  # one processor per process (run_brusselator refuses another number)
                summary = start(comm.Get_size(), lambda c: run_brusselator(c, spec), comm)[rank]
        if args.out:
            agree(comm, lambda: write_run(Path(args.out), spec, summary) if rank == 0 else None)
        return Outcome(summary, spec)

    def result_lines(self, outcome: Outcome, args) -> list[str]:
        from hermes.app.brusselator.study import result_lines

        return [*result_lines(outcome.summary), *([f"results:  {args.out}/summary.json"] if args.out else [])]

    def stopped(self, signal_name: str) -> None:
        return None


#: the Brusselator study
BAHI_STUDY = BahiStudy()


def main(argv: list[str] | None = None) -> int:
    """``python -m hermes.cli.run_brusselator``: one run of a spec, its summary as JSON on rank 0 (exit 2 on bad
    input)."""
    import numpy as np

    from hermes.app.brusselator.brusselator import SolverError
    from hermes.app.brusselator.study import load_spec, run_brusselator, simulate, summarise, timeline
    from hermes.errors import HermesError

    ap = argparse.ArgumentParser(prog="python -m hermes.cli.run_brusselator",
                                 description="Run the Brusselator experiments of 003 (Bahi, Contassot-Vivier & "
                                 "Couturier): one spec, one processor per MPI process or all in this one")
    ap.add_argument("spec", help="spec YAML (see the docstring of hermes/app/brusselator/study.py)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a spec value")
    ap.add_argument("--serial", action="store_true", help="simulate every processor in this process (virtual)")
    ap.add_argument("--json", metavar="OUT", help="also write the summary to this file")
    ap.add_argument("--timeline", metavar="NPZ", help="write per-iteration records (rank 0)")
    args = ap.parse_args(argv)
    rank, comm = 0, None
    try:
        spec = load_spec(args.spec, args.set)
        if args.serial:
            records, rounds = simulate(spec)
            summary = summarise(spec, records, rounds)
        else:
            comm = world()
            rank = comm.Get_rank()
            records = None
            summary = start(comm.Get_size(), lambda c: run_brusselator(c, spec), comm)[rank]
        if rank == 0:
            text = json.dumps(summary, indent=1)
            print(text, flush=True)
            if args.json:
                Path(args.json).write_text(text + "\n")
            if args.timeline and args.serial:
                np.savez_compressed(args.timeline, **timeline(records))
    except (HermesError, SolverError) as err:
        error(str(err), rank)
        if comm is not None and comm.Get_size() > 1:  # an error of some ranks only (a solver's iteration limit):
            exit_together(comm, EXIT_BAD_INPUT, message=str(err))  # one line naming the rank, not a hang
        return EXIT_BAD_INPUT
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
