"""The mesh application as ``hermes run`` sees it (:data:`MESH`): a scenario (or the embedded quickstart) run
phase by phase by :func:`hermes.lifecycle.driver.run`, or a run resumed from its checkpoint
(:func:`hermes.lifecycle.driver.resume`), on the job's processes (:func:`hermes.runtime.start.start`: one processor
per process on mpi4py, or several hosted per process).
"""

from __future__ import annotations

from pathlib import Path

from hermes.cli.application import Launch, Outcome
from hermes.cli.common import check_timeout

__all__ = ["MeshApplication", "MESH", "scenario_of", "import_plugins", "draws_ahead"]


def scenario_of(args):
    """The scenario of ``args``, validated with its plug-ins deferred (:func:`hermes.balance.registry.plugins_deferred`:
    named, not imported); for a ``hermes run`` about to start mpiexec, also everything
    :func:`hermes.lifecycle.preflight.preflight` can check serially (files, mesh, magnitudes, memory), so bad input
    never starts an MPI job. ``hermes scenario`` then checks the plug-ins in a child process
    (:func:`hermes.lifecycle.plugins.check_plugins`); ``hermes run`` does so once the run directory is claimed
    (:meth:`MeshApplication.prepare_launch`), and every rank of the job imports them under the watchdog
    (:func:`import_plugins`)."""
    from hermes.balance.registry import plugins_deferred
    from hermes.runtime.launch import under_mpi_launcher
    from hermes.scenario import QUICKSTART, load_scenario, parse_scenario

    overrides = list(args.overrides)
    if getattr(args, "timeout", None) is not None:
        overrides.append(f"run.timeout={args.timeout}")
    with plugins_deferred():
        if args.scenario:
            sc = load_scenario(args.scenario, overrides)
        else:
            sc = parse_scenario(QUICKSTART, overrides=overrides)
        if args.command == "run" and not args.no_launch and not under_mpi_launcher():
            from hermes.runtime.start import processes_for
            from hermes.lifecycle.preflight import preflight

            p = sc.processors or 4
            preflight(sc, p, processes=processes_for(sc.run, sc.clock, p, getattr(args, "processes", None),
                                                     drawing=draws_ahead(sc, args)))
    if args.command == "scenario":
        from hermes.lifecycle.plugins import check_plugins

        check_plugins(sc.balancer, sc.run.timeout)
    return sc


def import_plugins(args, sc, comm):
    """In the job: the scenario of ``args`` validated again with its plug-ins imported (every rank), under the
    watchdog (``run.timeout`` / ``--timeout``, default :data:`hermes.lifecycle.plugins.PLUGIN_LIMIT`): a plug-in
    whose import hangs on any rank ends the job with one line. ``sc`` (validated with plug-ins deferred) is
    returned as it is when it names no plug-in."""
    from hermes.lifecycle.plugins import PLUGIN_LIMIT, plugin_names
    from hermes.runtime.watchdog import Watchdog
    from hermes.scenario import QUICKSTART, load_scenario, parse_scenario

    names = plugin_names(sc.balancer)
    if not names:
        return sc
    overrides = list(args.overrides) + ([f"run.timeout={args.timeout}"] if args.timeout is not None else [])
    limit = sc.run.timeout if sc.run.timeout is not None else PLUGIN_LIMIT
    what = "run.timeout, --timeout" if sc.run.timeout is not None else f"the default {PLUGIN_LIMIT:g} s"
    with Watchdog(comm, limit, what=what, doing=f"importing plug-in {names[0]!r}"):
        return load_scenario(args.scenario, overrides) if args.scenario else \
            parse_scenario(QUICKSTART, overrides=overrides)


def draws_ahead(sc, args) -> bool:
    """A refined run with pictures: a worker draws them while the phases run, on a core of its own."""
    return bool(sc.output.pictures and not getattr(args, "no_pictures", False) and sc.adaptation.kind == "refine")


class MeshApplication:
    """The adaptive mesh application (:mod:`hermes.app.mesh`): every scenario no other application claims."""

    name = "mesh"

    def runs(self, args) -> bool:
        return True

    def prepare_launch(self, args) -> Launch:
        """A new run: the scenario and its run directory (the default one named here, so that every rank uses the
        same); a resumed run: the checkpoint and its directory. The launcher holds the directory's lock
        (:func:`hermes.files.claim_dir`) and hands it to the job with ``--lock-token``."""
        from hermes.errors import HermesError
        from hermes.claims import MARKER, claim_dir, read_marker
        from hermes.lifecycle.directory import run_dir_for
        from hermes.runtime.start import processes_for
        from hermes.lifecycle.checkpoint import verify_checkpoint
        from hermes.lifecycle.plugins import check_plugins

        check_timeout(args)
        if args.resume is not None:
            d = Path(args.resume)
            if not d.is_dir():
                raise HermesError(f"resume: {d} is not a run directory")
            if read_marker(d) != "run":  # nothing of a directory hermes did not make is read, let alone imported
                raise HermesError(f"resume: {d} is not a run directory hermes made (no {MARKER} marker)")
            lock = claim_dir(d, "resume", force=True)
            try:
                man = verify_checkpoint(d)  # every file, and scenario.yaml unchanged, before mpiexec starts
                n = processes_for(*_saved_hosting(d), man.ranks, args.processes)
            except BaseException:
                lock.release()
                raise
            return Launch(n, man.ranks, ["--lock-token", lock.token], lock)
        sc = scenario_of(args)
        p = sc.processors or 4
        n = processes_for(sc.run, sc.clock, p, args.processes, drawing=draws_ahead(sc, args))
        path, key = run_dir_for(sc.output, sc.name, sc.resolve, args.out)
        lock = claim_dir(path, key, force=args.force, name=sc.name)
        try:  # the plug-ins last, in a child under the run's time limit (hermes.lifecycle.plugins)
            check_plugins(sc.balancer, sc.run.timeout)
        except BaseException:
            lock.release(remove_if_unused=True)
            raise
        extra = ["--out", str(lock.path)] if args.out is None and sc.output.dir is None else []
        if sc.processors is None:
            extra += ["--set", f"processors={p}"]
        return Launch(n, p, [*extra, "--lock-token", lock.token], lock)

    def run(self, args, comm, held) -> Outcome:
        from functools import partial

        from hermes.errors import ScenarioError
        from hermes.runtime.start import processes_for, start
        from hermes.lifecycle.driver import resume, run
        from hermes.outputs import RUN_OUTPUTS

        def show(line: str) -> None:
            print(line, flush=True)

        check_timeout(args)
        if args.resume is not None:
            p, sc = _resume_processors(args), None
            job = partial(resume, args.resume, quiet=args.quiet, progress=show, timeout=check_timeout(args),
                          pictures=False if args.no_pictures else None, lock_token=args.lock_token,
                          outputs=RUN_OUTPUTS)
        else:
            sc = scenario_of(args)  # every rank validates the same file: same verdict, no communication needed
            sc = import_plugins(args, sc, comm)  # then imports the plug-ins it names, under the watchdog
            if args.no_pictures:
                sc = sc.model_copy(update={"output": sc.output.model_copy(update={"pictures": False})})
            n = comm.Get_size()
            p = sc.processors or n
            if p < n:
                raise ScenarioError(f"processors: the scenario asks for {p} processors but the job has {n} processes "
                                    f"(at most one process per processor: start at most {p}, or --set processors={n})")
            processes_for(sc.run, sc.clock, p, n if args.processes is None else args.processes,
                          what="the job's processes" if args.processes is None else "--processes")
            if args.processes is not None and args.processes != n:
                raise ScenarioError(f"--processes: {args.processes}, but the job has {n} process{'es' * (n != 1)}")
            job = partial(run, sc, out_dir=args.out, quiet=args.quiet, progress=show, force=args.force,
                          timeout=None, lock_token=args.lock_token,  # --timeout is in the scenario already
                          outputs=RUN_OUTPUTS)
        return Outcome(start(p, lambda c: job(c), comm).get(0), sc)

    def result_lines(self, outcome: Outcome, args) -> list[str]:
        summary, sc = outcome.summary, outcome.scenario
        out = getattr(summary, "out_dir", None)
        lines = [f"total time {summary['total_time']:.6g} s (clock {summary['clock']}), "
                 f"final imbalance {summary['final_imbalance']:.4f}"]
        if out is not None:
            lines.append(f"results:  {out}/summary.json, {out}/phases.csv")
            if sc is not None and sc.output.pictures:
                lines.append(f"pictures: {out}/partition-*.png, {out}/phases.png")
        return lines

    def stopped(self, signal_name: str) -> str:
        return (f"hermes: stopped by {signal_name}: the job was ended (the finished phases' records, and a checkpoint "
                f"if one was due, are in the run directory)")


#: the mesh application
MESH = MeshApplication()


def _saved_hosting(run_dir: Path):
    """The ``run`` section's processes and the clock of the run in ``run_dir`` (its scenario.yaml as hermes wrote
    it; the mesh and the other files are the checkpoint's to check), for :func:`hermes.runtime.start.processes_for`."""
    from types import SimpleNamespace

    from hermes.loaders import load_yaml

    doc = load_yaml(run_dir / "scenario.yaml")
    doc = doc if isinstance(doc, dict) else {}
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    processes = run.get("processes")
    return SimpleNamespace(processes=processes if type(processes) is int else None), doc.get("clock", "virtual")


def _resume_processors(args) -> int:
    """The processors of the run to resume (its checkpoint's manifest; one line if there is none)."""
    from hermes.errors import HermesError
    from hermes.claims import MARKER, read_marker
    from hermes.lifecycle.checkpoint import read_manifest

    d = Path(args.resume)
    if not d.is_dir() or read_marker(d) != "run":
        raise HermesError(f"resume: {d} is not a run directory hermes made (no {MARKER} marker)")
    return read_manifest(d).ranks
