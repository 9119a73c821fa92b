"""``hermes compare`` (an experiment: axes swept over a base scenario, or over a trace), ``hermes trace replay`` (the
phases of a vt LBDatafile trace balanced by any balancers) and ``hermes trace`` (describe or write a trace)."""

from __future__ import annotations

import sys
from pathlib import Path

from hermes.cli.common import error, parse_params

__all__ = ["cmd_compare", "cmd_compare_trace", "cmd_replay", "cmd_trace", "write_trace_dir"]


def cmd_compare(args) -> int:
    """``hermes compare``: exit 0 when every run of the experiment is done, :data:`EXIT_RUNS_FAILED` when one or
    more failed (each named on stderr in one line ``hermes: error: run ID failed: ...``; results.csv, table.md
    and the report hold what succeeded), 2 on bad input (nothing ran), 130 when interrupted."""
    from hermes.progress import Progress
    from hermes.trace.trace_experiment import is_trace_experiment

    with Progress(enabled=not args.quiet) as say:  # a live bar on a terminal; plain lines at least every 5 s
        if args.trace or (args.experiment and is_trace_experiment(args.experiment)) or (
                args.report_dir and (Path(args.report_dir) / "trace-experiment.json").is_file()):
            return cmd_compare_trace(args, say)
        return _compare(args, say)


def _compare(args, say) -> int:
    """:func:`cmd_compare` of a scenario experiment, with its Progress."""
    from hermes.compare import collect, load_experiment, make_experiment, render, run_experiment
    from hermes.compare.runner import EXIT_RUNS_FAILED
    from hermes.errors import HermesError

    try:
        if args.report_dir:
            if args.experiment or args.set_axes or args.overrides:
                raise HermesError("--report DIR re-renders an experiment directory: give no experiment, "
                                  "--set or --set-axis with it")
            for p in render(Path(args.report_dir), report=not args.no_report, say=say):
                say(str(p))
            return 0
        from hermes.compare import check_options

        check_options(args.jobs, args.timeout)
        if args.experiment:
            exp = load_experiment(args.experiment, set_axes=args.set_axes, sets=args.overrides, name=args.name)
        else:
            exp = make_experiment({"name": "quickstart"}, set_axes=args.set_axes, sets=args.overrides, name=args.name)
        out = run_experiment(exp, args.out, jobs=args.jobs, oversubscribe=args.oversubscribe, timeout=args.timeout,
                             report=not args.no_report, say=say)
        failed = [r for r in collect(out)[1] if r["status"] != "done"]
    except HermesError as err:
        return error(str(err))
    except KeyboardInterrupt:
        print("hermes compare: interrupted; the complete runs are kept (run the same command again to resume)",
              file=sys.stderr)
        return 130
    if not args.quiet:
        print((out / "table.md").read_text(), end="")
    for r in failed:  # the tables and the report hold what succeeded; each failed run is one line here
        print(f"hermes: error: run {r['run']} {r['status']}: {r['error'] or 'no result'} (its log: "
              f"{out / 'runs' / (r['run'] + '.log')})", file=sys.stderr, flush=True)
    return EXIT_RUNS_FAILED if failed else 0


def cmd_compare_trace(args, say) -> int:
    """hermes compare on a trace (hermes.trace.trace_experiment)."""
    from hermes.compare.experiment import parse_axis_option
    from hermes.errors import HermesError
    from hermes.scenario import yaml_value
    from hermes.trace.trace_experiment import (load_trace_experiment, render_trace_experiment, run_trace_experiment,
                                         trace_experiment)

    try:
        if args.report_dir:
            for p in render_trace_experiment(Path(args.report_dir), report=not args.no_report):
                say(str(p))
            return 0
        if args.jobs != 1 or args.oversubscribe or args.timeout is not None:
            raise HermesError("--jobs, --oversubscribe and --timeout apply to runs of a scenario; a trace's replays "
                              "run one after another")
        if args.trace and args.experiment:
            raise HermesError("give a trace experiment file or --trace STEM, not both")
        if args.trace:
            exp = trace_experiment(args.trace, name=args.name)
        else:
            exp = load_trace_experiment(args.experiment, name=args.name)
        for item in args.set_axes:
            key, values = parse_axis_option(item)
            exp["axes"][key] = values
        for item in args.overrides:
            if "=" not in item:
                raise HermesError(f"--set {item!r}: expected KEY=VALUE")
            key, value = item.split("=", 1)
            try:
                exp["set"][key.strip()] = yaml_value(value)
            except ValueError as err:
                raise HermesError(f"--set {key.strip()}: {err}") from None
        exp = trace_experiment(exp["trace"], axes=exp["axes"], sets=exp["set"], name=exp["name"],
                               description=exp["description"])
        out = run_trace_experiment(exp, args.out, report=not args.no_report, say=say)
    except HermesError as err:
        return error(str(err))
    if not args.quiet:
        print((out / "table.md").read_text(), end="")
    return 0


def cmd_replay(args) -> int:
    """``hermes replay``: its lines (the trace, a line per phase and balancer, the results) and, repeated while
    it lasts, the step in progress (reading the trace, ``phase 3 (4/10): pcg (2/3)``, writing, drawing) on
    standard output; ``--quiet``: only the results directory; ``--list``: only the balancers."""
    from hermes.progress import Progress

    if args.list:
        from hermes.trace.replay import replay_algorithms

        print("\n".join(replay_algorithms()))
        return 0
    if args.stem is None:
        return error("trace replay: the following arguments are required: stem (hermes trace replay --help lists "
                     "the options)")
    with Progress(enabled=not args.quiet) as shown:  # a live line on a terminal; plain lines at least every 5 s
        shown.status("loading the balancers")  # their imports take seconds on a busy machine
        return _replay(args, shown)


def _replay(args, say) -> int:
    """:func:`cmd_replay` with its Progress."""
    from hermes.errors import BalancerError, HermesError
    from hermes.claims import DEFAULT_KEY, claim_dir
    from hermes.files import slug
    from hermes.lifecycle.directory import default_run_dir
    from hermes.trace.replay import replay_algorithms

    try:
        from hermes.trace import read_trace
        from hermes.trace.replay_report import replay_to_dir
        from hermes.trace.workmodel import WorkModel

        algorithms = [a.strip() for a in args.algorithm.split(",") if a.strip()]
        if not algorithms:
            raise BalancerError("--algorithm: give at least one balancer")
        known = replay_algorithms()
        for a in algorithms:
            if a not in known:
                from hermes.balance.registry import get_balancer

                get_balancer(a)  # an unknown name: the registry's one line
                raise BalancerError(f"--algorithm {a}: it has no serial reference, so replay cannot run it (replay "
                                    f"runs: {', '.join(known)})")
        params: dict[str, dict] = {}
        for key, value in parse_params(args.params).items():
            algo, dot, name = key.partition(".")
            if not dot or algo not in algorithms:
                from hermes.suggest import did_you_mean

                close = did_you_mean(algo, algorithms) if dot else ""
                raise BalancerError(f"--param {key}: expected ALGORITHM.KEY=VALUE with ALGORITHM one of --algorithm "
                                    f"({', '.join(algorithms)}){close}")
            params.setdefault(algo, {})[name] = value
        from hermes.trace.replay import check_params

        check_params(algorithms, params)  # before the trace is read: bad parameters are one line and nothing else
        caps = None
        if args.capacities != "homo":
            try:
                caps = [float(x) for x in args.capacities.split(",")]
            except ValueError:
                raise HermesError(f"--capacities {args.capacities!r}: expected homo or comma-separated numbers") \
                    from None
        wm = WorkModel(args.alpha, args.beta, args.gamma, args.delta, args.memory_limit)
        if args.memory_step is not None and args.memory_limit is None:
            raise HermesError(f"--memory-step {args.memory_step}: needs --memory-limit (the step finishes each "
                              f"balancer under a memory limit)")
        trace = read_trace(args.stem, phases=args.phase, progress=say)
        if caps is not None and len(caps) != trace.n_ranks:
            raise HermesError(f"--capacities: {len(caps)} numbers for the trace's {trace.n_ranks} ranks")
        from hermes.trace.trace_phase import ids_text

        flat = trace.flat
        say(f"trace {args.stem}: {trace.n_ranks} ranks, {flat.n_phases:,} phase(s) ({ids_text(flat.phase_ids)})"
            f"{' (brotli)' if trace.compressed else ''}, {int(flat.phase_tasks.sum()):,} tasks")
        if args.out:
            out_path, key = Path(args.out), "--out"
        else:
            out_path, key = default_run_dir("replay-" + slug(Path(args.stem).name)), DEFAULT_KEY
        lock = claim_dir(out_path, key, kind="replay")
        out = lock.path
        done = False
        try:
            replay_to_dir(trace, algorithms, out, params=params, graph=args.graph, capacities=caps, work_model=wm,
                          seed=args.seed, rounds=args.rounds, trigger=args.trigger, realisation=args.realisation,
                          memory_step=args.memory_step or "refine", write_traces=args.write_trace, compress=args.compress,
                          plot=not args.no_plot, say=say, progress=say)
            done = True
        finally:
            lock.release(remove_if_unused=not done)
    except HermesError as err:
        return error(str(err))
    say(f"results:  {out}/replay.csv, {out}/replay.json, {out}/table.md"
        + ("" if args.no_plot else f", {out}/replay.png"))
    if args.quiet:
        print(out)
    return 0


def cmd_trace(args) -> int:
    """``hermes trace info`` (the summary, or its JSON, on standard output) and ``hermes trace write`` (one line);
    the step in progress — the rank file being read, the summary, the trace being written — on standard error,
    repeated while it lasts (a brotli trace of 10⁵ tasks per phase takes seconds per file)."""
    from hermes.progress import Progress

    with Progress(stream=sys.stderr, enabled=not getattr(args, "quiet", False)) as shown:  # stdout holds the data
        return _trace(args, shown)


def _trace(args, shown) -> int:
    """:func:`cmd_trace` with its Progress."""
    from hermes.errors import HermesError

    try:
        if args.trace_command == "write":
            if args.cells_per_block is not None and args.cells_per_block < 1:
                raise HermesError(f"--cells-per-block: must be at least 1, got {args.cells_per_block}")
            shown.status(f"writing the trace of {args.run_dir}")
            paths = write_trace_dir(args.run_dir, args.out, cells_per_block=args.cells_per_block,
                                    compress=args.compress)
            print(f"{len(paths)} rank files: {str(paths[0]).removesuffix('.0.json')}.<rank>.json")
            return 0
        from hermes.trace import read_trace
        from hermes.trace.lbdatafile import write_trace_summary

        trace = read_trace(args.stem, phases=args.phase, progress=shown)
    except HermesError as err:
        return error(str(err))
    shown.close()  # the summary's lines stream from here (on a terminal, not through the live line's redirection)
    write_trace_summary(trace, sys.stdout, as_json=args.json)  # a phase at a time: 10⁶ phases as dicts are 1 GB
    return 0


def write_trace_dir(run_dir: str | Path, out: str | Path | None, *, cells_per_block: int | None = None,
                    compress: bool = False) -> list[Path]:
    """``hermes trace write``: the run in ``run_dir`` as a trace, ``<out>/data.<rank>.json`` (default
    ``RUN_DIR/lbdatafile/``). The run directory is locked while it is read (a run in progress there: "... is in
    use by another hermes run (pid ...)"); ``out`` is claimed as ``hermes run`` claims its ``--out`` (kind
    ``trace``: a new or empty directory, or one an earlier ``trace write`` made, which is replaced wholesale;
    anything else is refused in one line).

    Raises
    ------
    HermesError
        One line: the run directory in use or not a run with recorded partitions, ``out`` not a directory
        hermes may write.
    """
    from hermes.claims import DirLock, claim_dir, clear_dir
    from hermes.errors import HermesError
    from hermes.trace.record import TRACE_STEM, write_run_trace

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise HermesError(f"{run_dir}: not a hermes run directory (not a directory)")
    with DirLock.acquire(run_dir, "trace write"):  # not while a run writes into it
        if out is None:
            return write_run_trace(run_dir, cells_per_block=cells_per_block, compress=compress)
        lock = claim_dir(out, "--out", kind="trace")
        done = False
        try:
            clear_dir(lock.path)  # an earlier trace (of more ranks, perhaps): replaced as a whole
            paths = write_run_trace(run_dir, lock.path / TRACE_STEM, cells_per_block=cells_per_block,
                                    compress=compress)
            done = True
            return paths
        finally:
            lock.release(remove_if_unused=not done)
