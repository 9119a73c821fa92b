"""The ``hermes`` command line: parse, dispatch, report errors in one line.

Commands are thin wrappers over Python functions (:func:`hermes.driver.run`,
:func:`hermes.viz.plot_run`). This is the only module that touches ``MPI.COMM_WORLD``.

Exit codes: 0 success, 2 bad input or results that cannot be written (a full disk, a read-only medium, a directory
in use: one line ``hermes: error: ...`` on rank 0, every rank exits 2), 124 the watchdog ended a job without
progress, 1 an unexpected failure (under MPI the whole job is aborted so no rank waits forever).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

__all__ = ["main", "build_parser"]

EXIT_BAD_INPUT = 2


class UsageError(Exception):
    """A command line argparse cannot parse (reported in one line, exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (``hermes: error: ...``) instead of a usage block, so that every bad
    input — options included — is one line and exit 2."""

    def error(self, message: str):
        name = self.prog.removeprefix("hermes").strip()
        raise UsageError(f"{name + ': ' if name else ''}{message} (hermes {name or ''} --help lists the options)"
                         .replace("hermes  --help", "hermes --help"))


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="hermes", description="Dynamic load balancing testbed for adaptive meshes")
    ap.add_argument("--version", action="store_true", help="print the version and exit")
    sub = ap.add_subparsers(dest="command")

    r = sub.add_parser("run", help="run one experiment phase by phase under MPI")
    r.add_argument("scenario", nargs="?", help="scenario YAML (default: the embedded quickstart)")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a scenario value, e.g. --set balancer.algorithm=none (repeatable); a path is "
                   "relative to the current directory (paths written in the YAML: to that file); mesh.file=... "
                   "replaces a mesh.grid and mesh.grid=... a mesh.file")
    r.add_argument("--out", help="run directory, relative to the current directory (default "
                   "runs/<scenario>-<timestamp>); a finished hermes run in it "
                   "is replaced, any other non-empty directory refused")
    r.add_argument("--force", action="store_true",
                   help="replace an unfinished hermes run in --out (one that could be resumed)")
    r.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its last checkpoint (output.checkpoint_every)")
    r.add_argument("--timeout", metavar="SECONDS",
                   help="end the job if a phase (or the set-up) takes longer (a rank stopped or hung); "
                   "overrides run.timeout")
    r.add_argument("--processes", type=int, metavar="N",
                   help="MPI processes hosting the processors (default: one per processor up to this machine's "
                   "cores, one fewer for a refined run's drawing worker, the processors shared evenly); "
                   "overrides run.processes")
    r.add_argument("--no-launch", action="store_true",
                   help="never start mpiexec; run in this process (a 1-processor scenario, or already under MPI)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--verbose", action="store_true", help="debug logging")
    r.add_argument("--no-pictures", action="store_true", help="skip PNG pictures")
    # the launcher holds the run directory's lock and hands it to the job's rank 0 (hermes.results.DirLock)
    r.add_argument("--lock-token", help=argparse.SUPPRESS)

    pl = sub.add_parser("plot", help="(re)draw the pictures of a run directory (into RUN_DIR/plots/ or --out; "
                        "the run's own pictures are left as they are)")
    pl.add_argument("run_dir", help="a run directory (with summary.json, geometry.npz, partitions.npz)")
    pl.add_argument("--out", metavar="DIR",
                    help="write the pictures into DIR (made if missing; relative to the current directory). "
                    "Default: RUN_DIR/plots/ (a hermes run directory only); the run's own partition-XXX.png and "
                    "phases.png are never overwritten")
    pl.add_argument("--phase", dest="phases", action="append", default=None, metavar="K",
                    help="draw only the partition after phase K (0: the initial one; repeatable or K1,K2,...)")
    pl.add_argument("--zoom", default="auto", metavar="auto|none|x0,y0,x1,y1",
                    help="the window shown: auto (default: where every rank is legible; the whole domain on a "
                    "uniform mesh), none (the whole domain) or a box in mesh coordinates (negative corners "
                    "too: --zoom -1.5,-0.5,2,0.5)")
    pl.add_argument("--show", default="weights,loads", metavar="PANELS",
                    help="extra panels, comma-separated: weights (unit weights, or refinement levels when "
                    "recorded, beside the partition), loads (per-rank load against the fair load, under it); "
                    "'none' for the partition alone (default: weights,loads)")
    pl.add_argument("--dpi", type=int, default=150, help="resolution of the PNGs (default 150)")

    cm = sub.add_parser("compare", help="run an experiment (a base scenario and axes swept over it) and write "
                        "results.csv, phases.csv, table.md, plots and report.html")
    cm.add_argument("experiment", nargs="?", help="an experiment YAML (experiments/*.yaml), or a scenario YAML "
                    "swept with --set-axis (default: the embedded quickstart)")
    cm.add_argument("--set-axis", dest="set_axes", action="append", default=[], metavar="KEY=V1,V2,...",
                    help="sweep a scenario key over values, e.g. --set-axis balancer=pcg,gda0,metis "
                    "(repeatable; adds to or replaces the experiment's axes; paths, e.g. mesh=a.vtu,b.vtu, are "
                    "relative to the current directory)")
    cm.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario value in every run, e.g. --set adaptation.phases=3 (repeatable; a "
                    "path is relative to the current directory; mesh.file=... replaces a mesh.grid and the reverse)")
    cm.add_argument("--out", help="the experiment directory, relative to the current directory (default "
                    "runs/<experiment name>); complete runs "
                    "found there are skipped")
    cm.add_argument("--name", help="the experiment's name (default: the file's stem)")
    cm.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="run up to N runs at once while their ranks fit the cores (default 1)")
    cm.add_argument("--oversubscribe", action="store_true",
                    help="start --jobs runs whatever their ranks (virtual-clock results are unchanged; "
                    "wall-clock timings become unreliable)")
    cm.add_argument("--timeout", type=float, metavar="SECONDS", help="kill a run after this many wall seconds")
    cm.add_argument("--report", metavar="DIR", dest="report_dir",
                    help="only re-render results, table, plots and report.html of the experiment in DIR")
    cm.add_argument("--no-report", action="store_true", help="write results.csv, phases.csv and table.md only "
                    "(no plots, no report.html)")
    cm.add_argument("--quiet", action="store_true", help="no progress lines")
    cm.add_argument("--trace", metavar="STEM", help="a vt LBDatafile trace as the base: each run replays it "
                    "(hermes replay) with the axes' balancers and replay options (docs/TRACES.md)")

    sc = sub.add_parser("scenario", help="print the resolved scenario (validation only, no MPI)")
    sc.add_argument("scenario", nargs="?", help="scenario YAML (default: the embedded quickstart)")
    sc.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario value, e.g. --set processors=8 (repeatable; a path is relative to "
                    "the current directory; mesh.file=... replaces a mesh.grid and the reverse)")

    ba = sub.add_parser("balancers", help="list the balancers (built in and plug-ins) and their parameters")
    ba.add_argument("--verbose", action="store_true", help="one line per parameter: default and description")
    ba.add_argument("--markdown", action="store_true", help="the parameter reference as Markdown "
                    "(docs/PARAMETERS.md is this output)")

    fl = sub.add_parser("flow", help="offline lab: run a balancer's serial reference on a processor graph")
    fl.add_argument("--graph", required=True, help="path:N ring:N star:N mesh:RxC torus:RxC tree:K:N complete:N "
                    "wheel:N bipartite:AxB, mesh-file:PATH:P, or an edge-list / JSON file")
    fl.add_argument("--capacities", default="homo", help="homo | hcuw | list | file")
    fl.add_argument("--weights", default="1", help="1 | kmod4 | ijmod3 | list | file")
    fl.add_argument("--loads", default="random:0", help="one | eq | high | half | random:SEED | list | file")
    fl.add_argument("--algorithm", required=True, help="a balancer name (hermes balancers)")
    fl.add_argument("--tol", type=float, help="convergence tolerance (the balancer's 'tolerance')")
    fl.add_argument("--param", dest="params", action="append", default=[], metavar="KEY=VALUE",
                    help="another balancer parameter (repeatable)")
    fl.add_argument("--json", action="store_true", help="print one JSON object")

    me = sub.add_parser("mesh", help="mesh tools: describe a mesh file, generate a CFD mesh")
    msub = me.add_subparsers(dest="mesh_command", required=True)
    mi = msub.add_parser("info", help="counts, connectivity, degree, bounding box and validity problems")
    mi.add_argument("file", help="a mesh or graph file (meshio formats, .graph/.chaco/.metis, .mtx)")
    mi.add_argument("--units", choices=["cells", "nodes"], default="cells",
                    help="work units: cells (dual graph, default) or nodes (nodal graph)")
    mi.add_argument("--json", action="store_true", help="print one JSON object")
    mg = msub.add_parser("generate", help="write a generated CFD mesh (grid, stufe, lshape, airfoil, 3elt, cylinder, "
                         "large)")
    mg.add_argument("name", help="generator name")
    mg.add_argument("--size", type=int, help="approximate number of cells (default: the shipped mesh's size)")
    mg.add_argument("--out", required=True, help="output file; the suffix picks the format (.vtu, .msh, ...)")

    fb = sub.add_parser("flow-bench", help="regenerate the published iteration/time figures (CSV + PNG)")
    fb.add_argument("--out", default="runs/flow-bench", help="output directory")
    fb.add_argument("--family", choices=["diffusion", "polynomial", "table10.1", "all"], default="all")
    fb.add_argument("--quick", action="store_true", help="a few sizes only (seconds)")

    gp = sub.add_parser("gossip", help="offline lab: Grapevine gossip balancing on object loads")
    gp.add_argument("--ranks", type=int, required=True, help="number of ranks |P|")
    gp.add_argument("--objects", type=int, required=True, help="number of objects |O| (the units of load)")
    gp.add_argument("--mapped-ranks", type=int, help="objects start on the first M ranks (default: all)")
    gp.add_argument("--loads", default="iso", help="object loads: uniform:A,B | lognormal:A,B | iso (all 1) | "
                    "FILE | lbaf:STEM (LBAF LBDatafile JSON)")
    gp.add_argument("--iterations", type=int, default=4, help="inform + transfer iterations i (default 4)")
    gp.add_argument("--rounds", type=int, default=4, help="gossip rounds k of the inform stage (default 4)")
    gp.add_argument("--fanout", type=int, default=4, help="peers f each rank informs per round (default 4)")
    gp.add_argument("--threshold", type=float, default=1.0,
                    help="overload threshold T relative to the average load (default 1.0)")
    gp.add_argument("--criterion", choices=["original", "modified"], default="modified",
                    help="transfer criterion: 6 (original) or 6' (modified, default)")
    gp.add_argument("--source-load", choices=["turn", "current"], default="turn",
                    help="L_i in criterion 6': at the start of the source's turn (the report's) or current")
    gp.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    gp.add_argument("--json", action="store_true", help="print one JSON object")
    gp.add_argument("--write-trace", metavar="STEM", help="also write the initial and final assignments as an "
                    "LBDatafile trace STEM.<rank>.json (phases 0 and 1) for LBAF or vt-tv")

    tr = sub.add_parser("trace", help="vt LBDatafile traces: describe one, write a hermes run as one")
    tsub = tr.add_subparsers(dest="trace_command", required=True)
    ti = tsub.add_parser("info", help="ranks, phases, tasks, communications, user_defined keys, loads per phase")
    ti.add_argument("stem", help="the trace: STEM for STEM.0.json ... (plain or brotli)")
    ti.add_argument("--phase", default="all", help="phases: all (default), K, A-B or a comma list")
    ti.add_argument("--json", action="store_true", help="print one JSON object")
    tw = tsub.add_parser("write", help="write a hermes run directory as a trace (what output.lbdatafile writes)")
    tw.add_argument("run_dir", help="a run directory with recorded partitions")
    tw.add_argument("--out", help="the trace's stem (default RUN_DIR/lbdatafile/data)")
    tw.add_argument("--cells-per-block", type=int, help="tasks are blocks of about K cells (default: cells)")
    tw.add_argument("--compress", action="store_true", help="brotli-compress the files")

    rp = sub.add_parser("replay", help="balance the phases of a real application's trace (vt LBDatafile) with any "
                        "balancers and compare them")
    rp.add_argument("stem", help="the trace: STEM for the per-rank files STEM.0.json ... (plain or brotli)")
    rp.add_argument("--algorithm", default="grapevine,pcg,metis",
                    help="balancers, comma-separated (default grapevine,pcg,metis; 'hermes replay --list' names "
                    "those replay runs)")
    rp.add_argument("--phase", default="all", help="phases: all (default), K, A-B or a comma list (0,3-5)")
    rp.add_argument("--out", help="results directory (default runs/replay-<stem>-<timestamp>)")
    rp.add_argument("--graph", choices=["auto", "comm", "full"], default="auto",
                    help="processor graph of the flow balancers: comm (ranks that exchange messages), full (every "
                    "pair), auto (comm if connected, else full; default)")
    rp.add_argument("--param", dest="params", action="append", default=[], metavar="ALGORITHM.KEY=VALUE",
                    help="a balancer parameter, e.g. pcg.tolerance=1e-6 or grapevine.fanout=6 (repeatable)")
    rp.add_argument("--capacities", default="homo", help="homo (default) or one relative speed per rank, "
                    "comma-separated")
    rp.add_argument("--alpha", type=float, default=1.0, help="work model: weight of the load (LBAF's α, default 1)")
    rp.add_argument("--beta", type=float, default=0.0, help="work model: weight of max(sent, received) off-rank "
                    "bytes (LBAF's β, default 0)")
    rp.add_argument("--gamma", type=float, default=0.0, help="work model: constant per rank (LBAF's γ)")
    rp.add_argument("--delta", type=float, default=0.0, help="work model: weight of the shared blocks homed "
                    "elsewhere (LBAF's δ)")
    rp.add_argument("--memory-limit", type=float, help="bytes per rank (LBAF's upper_bounds.max_memory_usage): a "
                    "rank above it has infinite work and is counted in memory_over")
    rp.add_argument("--seed", type=int, default=0, help="random seed of grapevine and the partitioners (default 0)")
    rp.add_argument("--rounds", type=int, default=3, help="flow balancers: rounds per phase, as balancer.rounds "
                    "(default 3)")
    rp.add_argument("--trigger", type=float, default=1.0, help="flow balancers: balance only above this imbalance, "
                    "as balancer.trigger (default 1.0)")
    rp.add_argument("--realisation", choices=["auto", "objects", "cells"], default="auto",
                    help="how a flow moves objects: objects (by communication affinity), cells (hermes' gain "
                    "selection on the objects' centroids, as a trace hermes wrote has), auto (cells when there are "
                    "centroids and no memory limit; default)")
    rp.add_argument("--write-trace", action="store_true", help="also write each balanced assignment as an "
                    "LBDatafile trace (OUT/traces/ALGORITHM/STEM.r.json)")
    rp.add_argument("--compress", action="store_true", help="brotli-compress the written traces (as vt does)")
    rp.add_argument("--no-plot", action="store_true", help="no replay.png")
    rp.add_argument("--list", action="store_true", help="print the balancers replay runs and exit")
    rp.add_argument("--quiet", action="store_true", help="print only the results directory")
    return ap


def _cmd_trace(args) -> int:
    import json

    from hermes.errors import HermesError

    try:
        if args.trace_command == "write":
            from hermes.trace.record import write_run_trace

            if args.cells_per_block is not None and args.cells_per_block < 1:
                raise HermesError(f"--cells-per-block: must be at least 1, got {args.cells_per_block}")
            paths = write_run_trace(args.run_dir, args.out, cells_per_block=args.cells_per_block,
                                    compress=args.compress)
            print(f"{len(paths)} rank files: {str(paths[0]).removesuffix('.0.json')}.<rank>.json")
            return 0
        from hermes.trace import read_trace
        from hermes.trace.lbdatafile import format_trace_summary, trace_summary

        info = trace_summary(read_trace(args.stem, phases=args.phase))
    except HermesError as err:
        return _error(str(err))
    print(json.dumps(info) if args.json else format_trace_summary(info))
    return 0


def _cmd_replay(args) -> int:
    from hermes.errors import BalancerError, HermesError
    from hermes.results import DEFAULT_KEY, claim_dir, default_run_dir, slug
    from hermes.trace.replay import replay_algorithms

    if args.list:
        print("\n".join(replay_algorithms()))
        return 0
    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    try:
        from hermes.trace import read_trace
        from hermes.trace.report import replay_to_dir
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
        for key, value in _parse_params(args.params).items():
            algo, dot, name = key.partition(".")
            if not dot or algo not in algorithms:
                raise BalancerError(f"--param {key}: expected ALGORITHM.KEY=VALUE with ALGORITHM one of --algorithm "
                                    f"({', '.join(algorithms)})")
            params.setdefault(algo, {})[name] = value
        caps = None
        if args.capacities != "homo":
            try:
                caps = [float(x) for x in args.capacities.split(",")]
            except ValueError:
                raise HermesError(f"--capacities {args.capacities!r}: expected homo or comma-separated numbers") \
                    from None
        wm = WorkModel(args.alpha, args.beta, args.gamma, args.delta, args.memory_limit)
        trace = read_trace(args.stem, phases=args.phase)
        if caps is not None and len(caps) != trace.n_ranks:
            raise HermesError(f"--capacities: {len(caps)} numbers for the trace's {trace.n_ranks} ranks")
        say(f"trace {args.stem}: {trace.n_ranks} ranks, phases {', '.join(map(str, trace.phase_ids))}"
            f"{' (brotli)' if trace.compressed else ''}, {sum(ph.n_tasks for ph in trace.phases)} tasks")
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
                          write_traces=args.write_trace, compress=args.compress, plot=not args.no_plot, say=say)
            done = True
        finally:
            lock.release(remove_if_unused=not done)
    except HermesError as err:
        return _error(str(err))
    say(f"results:  {out}/replay.csv, {out}/replay.json, {out}/table.md"
        + ("" if args.no_plot else f", {out}/replay.png"))
    if args.quiet:
        print(out)
    return 0


def _load(args):
    """The scenario of ``args``, validated; for a ``hermes run`` about to start mpiexec, also everything
    :func:`hermes.preflight.preflight` can check serially (files, mesh, magnitudes, memory), so bad input
    never starts an MPI job."""
    from hermes.launch import under_mpi_launcher
    from hermes.scenario import QUICKSTART, load_scenario, parse_scenario

    overrides = list(args.overrides)
    if getattr(args, "timeout", None) is not None:
        overrides.append(f"run.timeout={args.timeout}")
    if args.scenario:
        sc = load_scenario(args.scenario, overrides)
    else:
        sc = parse_scenario(QUICKSTART, overrides=overrides)
    if args.command == "run" and not args.no_launch and not under_mpi_launcher():
        from hermes.hosting import processes_for
        from hermes.preflight import preflight

        p = sc.processors or 4
        preflight(sc, p, processes=processes_for(sc, p, getattr(args, "processes", None),
                                                 drawing=_draws_ahead(sc, args)))
    return sc


def _draws_ahead(sc, args) -> bool:
    """A refined run with pictures: a worker draws them while the phases run, on a core of its own."""
    return bool(sc.output.pictures and not getattr(args, "no_pictures", False) and sc.adaptation.kind == "refine")


def _timeout(args) -> float | None:
    """``--timeout`` checked as ``run.timeout`` is (one line)."""
    if args.timeout is None:
        return None
    from pydantic import ValidationError

    from hermes.errors import ScenarioError, validation_message
    from hermes.scenario import RunSpec

    try:
        return RunSpec(timeout=args.timeout).timeout
    except ValidationError as err:
        raise ScenarioError("--timeout: " + validation_message(err).split(": ", 1)[1]) from None


def _world_rank() -> int:
    """This process's rank in a job started by a launcher (0 outside MPI), without initialising MPI."""
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        try:
            return int(os.environ[key])
        except (KeyError, ValueError):
            continue
    return 0


def _error(msg: str, rank: int = 0) -> int:
    """One line ``hermes: error: ...`` on rank 0 (a newline in a path or a value shown as ``\\n``)."""
    if rank == 0:
        from hermes.errors import one_line

        print(f"hermes: error: {one_line(msg)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    """The ``hermes`` command; a closed output pipe (``hermes ... | head``) ends it quietly."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away: point stdout at /dev/null so the interpreter's final flush cannot fail
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as err:  # a file a command could not read or write that no check named: still one line
        from hermes.launch import under_mpi_launcher

        if under_mpi_launcher():  # in a job the exception must reach the hook that aborts every rank
            raise
        where = f"{err.filename}: " if err.filename else ""
        return _error(f"{where}{err.strerror or type(err).__name__}")


#: options whose value may start with '-' (a box with a negative corner: ``--zoom -1.5,-0.5,2,0.5``)
_NEGATIVE_VALUES = ("--zoom",)


def _glue_negative_values(argv: list[str]) -> list[str]:
    """``--zoom -1.5,-0.5,2,0.5`` → ``--zoom=-1.5,-0.5,2,0.5``: argparse takes a value that starts with '-' and
    holds a comma or a digit after the dash for an option; such a value belongs to the option before it."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if a in _NEGATIVE_VALUES and nxt is not None and nxt.startswith("-") and (
                "," in nxt or (len(nxt) > 1 and (nxt[1].isdigit() or nxt[1] == "."))):
            out.append(f"{a}={nxt}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _main(argv: list[str] | None = None) -> int:
    argv = _glue_negative_values(list(sys.argv[1:] if argv is None else argv))
    try:
        args = build_parser().parse_args(argv)
    except UsageError as err:
        return _error(str(err), _world_rank())
    if args.version:
        from hermes.version import __version__

        print(f"hermes {__version__}")
        return 0
    if args.command == "run":
        return _cmd_run(args, argv)
    if args.command == "plot":
        return _cmd_plot(args)
    if args.command == "compare":
        return _cmd_compare(args)
    if args.command == "scenario":
        return _cmd_scenario(args)
    if args.command == "balancers":
        from hermes.balance.registry import all_balancers

        if args.markdown:  # the built-ins only: the documentation does not depend on what is installed
            from hermes.balance.registry import BALANCERS

            print(markdown_balancers(BALANCERS), end="")
        else:
            print(format_balancers(all_balancers(), verbose=args.verbose))
        return 0
    if args.command == "flow":
        return _cmd_flow(args)
    if args.command == "gossip":
        return _cmd_gossip(args)
    if args.command == "replay":
        return _cmd_replay(args)
    if args.command == "trace":
        return _cmd_trace(args)
    if args.command == "mesh":
        return _cmd_mesh(args)
    if args.command == "flow-bench":
        from hermes.lab.bench import flow_bench

        from hermes.errors import HermesError

        fams = ("diffusion", "polynomial", "table10.1") if args.family == "all" else (args.family,)
        try:
            paths = flow_bench(args.out, quick=args.quick, families=fams)
        except HermesError as err:
            return _error(str(err))
        for path in paths:
            print(path)
        return 0
    build_parser().print_help()
    return EXIT_BAD_INPUT


def format_balancers(balancers: dict, *, verbose: bool = False) -> str:
    """The table of ``hermes balancers``: name and description, then (``--verbose``) every parameter with its
    default and description, as declared in the balancer's parameter model."""
    width = max(len(n) for n in balancers) + 2
    lines = []
    for name, info in sorted(balancers.items()):
        lines.append(f"{name:<{width}}{info.doc}")
        fields = info.params.model_fields
        if not verbose:
            if fields:
                lines.append(" " * width + "parameters: " + ", ".join(f"{k}={f.default!r}" for k, f in fields.items()))
            continue
        pw = max((len(k) for k in fields), default=0) + 2
        dw = max((len(repr(f.default)) for f in fields.values()), default=0) + 2
        for k, f in fields.items():
            lines.append(" " * (width + 2) + f"{k:<{pw}}{f.default!r:<{dw}}{f.description or ''}")
    return "\n".join(lines)


def _schema_values(prop: dict) -> str:
    """A parameter's type and bounds in words, from its JSON schema."""
    if "anyOf" in prop:
        return " or ".join(_schema_values(p) for p in prop["anyOf"])
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = {"number": "number", "integer": "integer", "boolean": "true \\| false", "string": "string",
            "null": "null"}.get(prop.get("type", ""), prop.get("type", "any"))
    names = (("minimum", "≥"), ("ge", "≥"), ("exclusiveMinimum", ">"), ("gt", ">"), ("maximum", "≤"), ("le", "≤"),
             ("exclusiveMaximum", "<"), ("lt", "<"))
    bounds = [f"{sym} {prop[k]}" for k, sym in names if k in prop]
    return kind + (" " + ", ".join(bounds) if bounds else "")


def markdown_balancers(balancers: dict) -> str:
    """docs/PARAMETERS.md: every balancer's parameters from its parameter model (a test keeps them equal)."""
    out = ["# Balancer parameters", "",
           "Generated by `hermes balancers --markdown` from each balancer's parameter model (the same model checks",
           "the scenario's `balancer:` section and `--set balancer.<name>.<key>=...`). Set them per algorithm:",
           "", "```yaml", "balancer:", "  algorithm: pcg", "  pcg: {tolerance: 1.0e-10}", "  metis: {targets: equal}",
           "```", "",
           "A balancer of your own (docs/BALANCERS.md) has its section under the name `balancer.algorithm` gives it,",
           "in full: `algorithm: 'mypkg.mod:MyBalancer'` with `'mypkg.mod:MyBalancer': {steps: 40}` (`mypkg.mod.MyBalancer`",
           "works too, also as `--set balancer.mypkg.mod.MyBalancer.steps=40`); its parameters may also go flat under",
           "`balancer:` (`--set balancer.steps=40`). A section under the class name alone is refused with what to write.",
           ""]
    for name, info in sorted(balancers.items()):
        out += [f"## `{name}`", "", info.doc, ""]
        fields = info.params.model_fields
        if not fields:
            out += ["No parameters.", ""]
            continue
        props = info.params.model_json_schema()["properties"]
        out += ["| parameter | default | values | description |", "|---|---|---|---|"]
        for key, f in fields.items():
            desc = (f.description or "").replace("|", "\\|")
            out.append(f"| `{key}` | `{f.default!r}` | {_schema_values(props[key])} | {desc} |")
        out.append("")
    return "\n".join(out)


def _cmd_mesh(args) -> int:
    import json

    from hermes.errors import HermesError

    try:
        if args.mesh_command == "info":
            from hermes.data.meshinfo import format_mesh_info, mesh_info_file

            info = mesh_info_file(args.file, units=args.units)
            print(json.dumps(info) if args.json else format_mesh_info(info))
            return 0
        from hermes.data.meshinfo import generate

        mesh = generate(args.name, args.size, args.out)
    except HermesError as err:
        return _error(str(err))
    print(f"{args.out}: {mesh.name}, {mesh.n_cells} cells, {mesh.n_edges} dual edges")
    return 0


def _parse_params(items: list[str]) -> dict:
    from hermes.errors import BalancerError
    from hermes.scenario import yaml_value

    out = {}
    for item in items:
        if "=" not in item:
            raise BalancerError(f"--param {item!r}: expected KEY=VALUE")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = yaml_value(v)
        except ValueError as err:
            raise BalancerError(f"--param {k.strip()}: {err}") from None
    return out


def _cmd_flow(args) -> int:
    import json

    from hermes.errors import HermesError
    from hermes.lab.flow import flow_lab, format_flow_report

    try:
        params = _parse_params(args.params)
        result = flow_lab(args.graph, args.capacities, args.weights, args.loads, args.algorithm, tol=args.tol,
                          params=params)
    except HermesError as err:
        return _error(str(err))
    print(json.dumps(result) if args.json else format_flow_report(result))
    return 0


def _cmd_gossip(args) -> int:
    import json

    from hermes.errors import HermesError
    from hermes.lab.gossip import format_gossip_report, gossip_lab

    try:
        result = gossip_lab(args.ranks, args.objects, args.mapped_ranks, args.loads, args.iterations, args.rounds,
                            args.fanout, args.threshold, args.criterion, args.seed, args.source_load,
                            write_trace=args.write_trace)
    except HermesError as err:
        return _error(str(err))
    print(json.dumps(result) if args.json else format_gossip_report(result))
    return 0


def _cmd_scenario(args) -> int:
    from hermes.loaders import dump_yaml

    from hermes.errors import HermesError

    try:
        sc = _load(args)
    except HermesError as err:
        return _error(str(err))
    print(dump_yaml(sc.to_dict(), sort_keys=False), end="")
    return 0


def _cmd_plot(args) -> int:
    import contextlib

    from hermes.errors import HermesError
    from hermes.results import MARKER, DirLock, claim_dir, read_marker, subdir
    from hermes.viz import parse_zoom, plot_run

    try:
        phases = None
        if args.phases is not None:
            try:
                phases = [int(k) for item in args.phases for k in item.split(",") if k.strip()]
            except ValueError:
                raise HermesError(f"--phase {','.join(args.phases)!r}: expected phase numbers") from None
        show = [] if args.show.strip().lower() in ("none", "") else args.show.split(",")
        run_dir = Path(args.run_dir)
        if not run_dir.is_dir():
            raise HermesError(f"run directory not found: {run_dir}")
        ours = read_marker(run_dir) == "run"
        if not ours and args.out is None:  # hermes writes pictures only into a run directory it made
            raise HermesError(f"{run_dir}: not a run directory hermes made (no {MARKER} marker): nothing drawn "
                              "(give --out DIR to draw elsewhere)")
        zoom = parse_zoom(args.zoom)
        # progress on stderr (stdout lists the pictures); one worker per idle core, as a run draws its own
        from hermes.viz.parallel import default_workers

        drawing = {"progress": lambda line: print(line, file=sys.stderr, flush=True),
                   "workers": default_workers(len(phases) if phases is not None else 8)}
        out = Path(args.out) if args.out is not None else None
        if out is not None and ours and out.resolve() == (run_dir / "plots").resolve():
            out = None  # the run's own plots directory: part of the run, not a hermes directory of its own
        with contextlib.ExitStack() as held:
            if out is not None:  # like any directory hermes writes: new, empty, or hermes' own plots directory
                lock = claim_dir(out, "--out", kind="plots")
                held.callback(lock.release, remove_if_unused=True)
            if ours:
                held.enter_context(DirLock.acquire(run_dir, "plot"))  # not while a run writes into it
            dest = out if out is not None else subdir(run_dir, "plots")
            dest.mkdir(parents=True, exist_ok=True)
            paths = plot_run(run_dir, phases=phases, zoom=zoom, show=show, dpi=args.dpi, out_dir=dest, **drawing)
    except HermesError as err:
        return _error(str(err))
    for p in paths:
        print(p)
    return 0


def _cmd_compare(args) -> int:
    from hermes.compare import load_experiment, make_experiment, render, run_experiment
    from hermes.errors import HermesError

    say = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    from hermes.trace.experiment import is_trace_experiment

    if args.trace or (args.experiment and is_trace_experiment(args.experiment)) or (
            args.report_dir and (Path(args.report_dir) / "trace-experiment.json").is_file()):
        return _cmd_compare_trace(args, say)
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
    except HermesError as err:
        return _error(str(err))
    except KeyboardInterrupt:
        print("hermes compare: interrupted; the complete runs are kept (run the same command again to resume)",
              file=sys.stderr)
        return 130
    if not args.quiet:
        print((out / "table.md").read_text(), end="")
    return 0


def _cmd_compare_trace(args, say) -> int:
    """hermes compare on a trace (hermes.trace.experiment)."""
    from hermes.compare.experiment import parse_axis_option
    from hermes.errors import HermesError
    from hermes.scenario import yaml_value
    from hermes.trace.experiment import (load_trace_experiment, render_trace_experiment, run_trace_experiment,
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
        return _error(str(err))
    if not args.quiet:
        print((out / "table.md").read_text(), end="")
    return 0


def _cmd_run(args, argv: list[str]) -> int:
    from hermes.errors import HermesError
    from hermes.launch import mpiexec_command, run_job, under_mpi_launcher

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("matplotlib", "PIL"):  # --verbose is about hermes, not about font lookups
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.resume is not None and (args.scenario or args.overrides or args.out or args.force):
        return _error("--resume takes the scenario and the directory from RUN_DIR (no scenario, --set, --out or "
                      "--force with it)")
    if args.scenario and args.resume is None:
        from hermes.app.bahi import is_spec_file

        if is_spec_file(args.scenario):
            return _cmd_run_brusselator(args, argv)
    if not under_mpi_launcher() and not args.no_launch:
        # validate first (serially) — the scenario, the run directory —, then start the job under mpiexec
        try:
            n, extra, lock, p = _prepare_launch(args)
        except HermesError as err:
            return _error(str(err))
        try:  # the lock is held until the job has ended (a second run into the directory is refused meanwhile)
            try:
                cmd = mpiexec_command(n, [*argv, *extra, "--no-launch"])
            except HermesError as err:
                return _error(str(err))
            if not args.quiet:
                hosted = f" ({p} processors on {n} process{'es' * (n != 1)})" if p != n else ""
                print("hermes: launching: " + " ".join(c for c in cmd if c != lock.token)
                      .replace(" --lock-token", "") + hosted, flush=True)
            end = run_job(cmd)
        finally:
            lock.release(remove_if_unused=True)
        if end.signal is not None:
            import signal

            print(f"hermes: stopped by {signal.Signals(end.signal).name}: the job was ended (the finished phases' "
                  f"records, and a checkpoint if one was due, are in the run directory)", file=sys.stderr)
        return end.status
    return _run_here(args)


def _cmd_run_brusselator(args, argv: list[str]) -> int:
    """``hermes run`` of a Brusselator spec (``application.kernel: brusselator``, :mod:`hermes.app.bahi`): the spec
    is validated serially, then ``mpiexec -n processors`` runs one processor per process; rank 0 prints the result
    and, with ``--out DIR``, writes the run directory ``DIR`` (marker, ``scenario.yaml``, ``summary.json``), with
    the lifecycle of every hermes run directory (:func:`hermes.results.claim_dir`: a new, empty or hermes-made
    directory, locked for the run's life). With ``--no-launch`` outside MPI, a virtual-clock spec of several
    processors is simulated in this process (:func:`hermes.app.bahi.simulate`, the same results). ``--timeout``
    bounds the whole run's wall time (the watchdog of :mod:`hermes.watchdog`)."""
    from hermes.app.bahi import load_spec, result_lines, run_brusselator, simulate, summarise
    from hermes.errors import HermesError
    from hermes.launch import mpiexec_command, run_job, under_mpi_launcher
    from hermes.results import claim_dir
    from hermes.watchdog import Watchdog

    if not under_mpi_launcher() and not args.no_launch:
        try:
            timeout = _timeout(args)
            spec = load_spec(args.scenario, args.overrides)
            lock = claim_dir(args.out, "--out", force=args.force, name=spec.name) if args.out else None
        except HermesError as err:
            return _error(str(err))
        try:
            try:
                extra = ["--lock-token", lock.token] if lock is not None else []
                cmd = mpiexec_command(spec.processors, [*argv, *extra, "--no-launch"])
            except HermesError as err:
                return _error(str(err))
            if not args.quiet:
                print("hermes: launching: " + " ".join(c for c in cmd if lock is None or c != lock.token)
                      .replace(" --lock-token", ""), flush=True)
            del timeout  # the job arms its own watchdog with the same --timeout
            return run_job(cmd).status
        finally:
            if lock is not None:
                lock.release(remove_if_unused=True)
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() > 1:
        _abort_on_uncaught(comm)
    held = []
    try:
        timeout = _timeout(args)
        spec = load_spec(args.scenario, args.overrides)
        if args.out:
            from hermes.comm import agree

            agree(comm, lambda: held.append(claim_dir(args.out, "--out", force=args.force, token=args.lock_token,
                                                      name=spec.name)) if rank == 0 else None)
        with Watchdog(comm, timeout, what="--timeout (the whole Brusselator run)"):
            if comm.Get_size() == 1 and spec.processors > 1 and spec.clock == "virtual":
                summary = summarise(spec, *simulate(spec))
            else:
                summary = run_brusselator(comm, spec)
        if args.out:
            from hermes.comm import agree

            agree(comm, lambda: _write_brusselator(Path(args.out), spec, summary) if rank == 0 else None)
    except HermesError as err:
        code = _error(str(err), rank)
        if comm.Get_size() > 1:
            _exit_together(comm, code)
        return code
    finally:
        for lock in held:
            lock.release(remove_if_unused=True)
    if rank == 0 and not args.quiet:
        print("\n".join(result_lines(summary)), flush=True)
        if args.out:
            print(f"results:  {args.out}/summary.json")
    return 0


def _write_brusselator(out: Path, spec, summary: dict) -> None:
    """Rank 0: a Brusselator run's directory — its old files replaced, the spec and the summary, each atomic."""
    import json

    from hermes.loaders import dump_yaml
    from hermes.results import RunDirError, _finite, clear_dir, write_atomic

    try:
        clear_dir(out)
        write_atomic(out / "scenario.yaml", dump_yaml(spec.model_dump(mode="json"), sort_keys=False))
        write_atomic(out / "summary.json", json.dumps(_finite(summary), indent=1, allow_nan=False) + "\n")
    except OSError as err:
        raise RunDirError(f"--out: cannot write the results in {out} ({err.strerror or err})") from None


def _prepare_launch(args):
    """The launcher's checks before mpiexec: (processes, extra arguments for the job, the run directory's lock,
    processors). A
    new run: the scenario and its run directory (the default one named here, so that every rank uses the
    same); a resumed run: the checkpoint and its directory. The launcher holds the directory's lock
    (:func:`hermes.results.claim_dir`) and hands it to the job with ``--lock-token``."""
    from hermes.checkpoint import verify_checkpoint
    from hermes.errors import HermesError
    from hermes.hosting import processes_for
    from hermes.results import MARKER, claim_dir, read_marker, run_dir_for

    _timeout(args)
    if args.resume is not None:
        d = Path(args.resume)
        if not d.is_dir():
            raise HermesError(f"--resume: {d} is not a run directory")
        if read_marker(d) != "run":  # nothing of a directory hermes did not make is read, let alone imported
            raise HermesError(f"--resume: {d} is not a run directory hermes made (no {MARKER} marker)")
        lock = claim_dir(d, "--resume", force=True)
        try:
            man = verify_checkpoint(d)  # every file, and scenario.yaml unchanged, before mpiexec starts
            n = processes_for(_saved_hosting(d), man.ranks, args.processes)
        except BaseException:
            lock.release()
            raise
        return n, ["--lock-token", lock.token], lock, man.ranks
    sc = _load(args)
    p = sc.processors or 4
    n = processes_for(sc, p, args.processes, drawing=_draws_ahead(sc, args))
    path, key = run_dir_for(sc, args.out)
    lock = claim_dir(path, key, force=args.force, name=sc.name)
    extra = ["--out", str(lock.path)] if args.out is None and sc.output.dir is None else []
    if sc.processors is None:
        extra += ["--set", f"processors={p}"]
    return n, [*extra, "--lock-token", lock.token], lock, p


def _run_here(args) -> int:
    from mpi4py import MPI

    from functools import partial

    from hermes.driver import resume, run
    from hermes.errors import HermesError, ScenarioError
    from hermes.hosting import host_run, processes_for

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() > 1:
        _abort_on_uncaught(comm)

    def show(line: str) -> None:
        print(line, flush=True)

    try:
        _timeout(args)
        if args.resume is not None:
            p, sc = _resume_processors(args), None
            job = partial(resume, args.resume, quiet=args.quiet, progress=show, timeout=_timeout(args),
                          pictures=False if args.no_pictures else None, lock_token=args.lock_token)
        else:
            sc = _load(args)  # every rank validates the same file: same verdict, no communication needed
            if args.no_pictures:
                sc = sc.model_copy(update={"output": sc.output.model_copy(update={"pictures": False})})
            n = comm.Get_size()
            p = sc.processors or n
            if p < n:
                raise ScenarioError(f"processors: the scenario asks for {p} processors but the job has {n} processes "
                                    f"(at most one process per processor: start at most {p}, or --set processors={n})")
            processes_for(sc, p, n if args.processes is None else args.processes,
                          what="the job's processes" if args.processes is None else "--processes")
            if args.processes is not None and args.processes != n:
                raise ScenarioError(f"--processes: {args.processes}, but the job has {n} process{'es' * (n != 1)}")
            job = partial(run, sc, out_dir=args.out, quiet=args.quiet, progress=show, force=args.force,
                          timeout=None, lock_token=args.lock_token)  # --timeout is in the scenario already
        summary = host_run(p, lambda c: job(c), comm).get(0)
    except HermesError as err:
        code = _error(str(err), rank)
        if comm.Get_size() > 1:
            _exit_together(comm, code)
        return code
    if rank == 0:
        out = getattr(summary, "out_dir", None)
        if not args.quiet:
            print(f"total time {summary['total_time']:.6g} s (clock {summary['clock']}), "
                  f"final imbalance {summary['final_imbalance']:.4f}")
            if out is not None:
                print(f"results:  {out}/summary.json, {out}/phases.csv")
                if sc is not None and sc.output.pictures:
                    print(f"pictures: {out}/partition-*.png, {out}/phases.png")
    return 0


def _saved_hosting(run_dir: Path):
    """The clock and ``run.processes`` of the run in ``run_dir`` (its scenario.yaml as hermes wrote it; the mesh
    and the other files are the checkpoint's to check), for :func:`hermes.hosting.processes_for`."""
    from types import SimpleNamespace

    from hermes.loaders import load_yaml

    doc = load_yaml(run_dir / "scenario.yaml")
    doc = doc if isinstance(doc, dict) else {}
    run = doc.get("run") if isinstance(doc.get("run"), dict) else {}
    processes = run.get("processes")
    return SimpleNamespace(clock=doc.get("clock", "virtual"),
                           run=SimpleNamespace(processes=processes if type(processes) is int else None))


def _resume_processors(args) -> int:
    """The processors of the run to resume (its checkpoint's manifest; one line if there is none)."""
    from hermes.checkpoint import read_manifest
    from hermes.errors import HermesError
    from hermes.results import MARKER, read_marker

    d = Path(args.resume)
    if not d.is_dir() or read_marker(d) != "run":
        raise HermesError(f"--resume: {d} is not a run directory hermes made (no {MARKER} marker)")
    return read_manifest(d).ranks


def _exit_together(comm, code: int, timeout: float = 60.0) -> None:
    """Every rank exits with ``code`` after rank 0's message is out — without MPI_Abort.

    ``python -m mpi4py`` turns a non-zero exit into MPI_Abort, which may kill rank 0 before its
    error line is flushed. Bad input is agreed on by all ranks, so they meet at a barrier, finalise
    MPI and leave with the same status. If a rank never arrives, the job is aborted after ``timeout``.
    """
    import time

    from mpi4py import MPI

    sys.stdout.flush()
    sys.stderr.flush()
    req = comm.Ibarrier()
    deadline = time.monotonic() + timeout
    while not req.Test():
        if time.monotonic() > deadline:
            comm.Abort(code)
        time.sleep(0.001)
    MPI.Finalize()
    os._exit(code)


def _abort_on_uncaught(comm) -> None:
    """An unexpected exception on any rank aborts the whole job (python -m mpi4py semantics)."""
    old = sys.excepthook

    def hook(etype, value, tb):
        old(etype, value, tb)
        sys.stderr.flush()
        comm.Abort(1)

    sys.excepthook = hook
