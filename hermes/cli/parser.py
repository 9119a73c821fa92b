"""The ``hermes`` argument parser: every command and option, errors as one line (:class:`UsageError`).

Every option that takes a number is parsed by one of the types below — :class:`Number` (a float), :class:`Integer`,
:class:`Numbers` (a comma list of floats or a keyword), :class:`Box` (``--zoom``'s corners) — built on
:class:`hermes.bounds.NumberRange`: hermes' rule for numbers (finite, 0 or of magnitude 1e-100 to 1e100: no NaN,
no infinity, no subnormal) and the option's own documented range, which ``--help`` shows after the option's text
and docs/PARAMETERS.md lists ("Command-line options"). A number out of range is one line, exit 2, before the
command does anything: ``hermes replay: argument --beta: must be a number in [0, 1e+100], got 1e+308``.
"""

from __future__ import annotations

import argparse
import re

from hermes.bounds import BIG, MAX_PROCESSORS, MAX_SEED, TINY, NumberRange, number_problem, shown
from hermes.suggest import close_names

__all__ = ["UsageError", "build_parser", "respell", "OLD_SPELLINGS", "Number", "Integer", "Numbers", "Box"]


class UsageError(Exception):
    """A command line argparse cannot parse (reported in one line, exit 2)."""


#: the ranges of the options, from the modules that check the same values given from Python (kept equal by
#: tests/test_bad_input.py, test_option_ranges_follow_their_modules: this module imports none of them, so that
#: parsing a command line stays cheap): hermes.compare.MAX_JOBS and MAX_TIMEOUT, hermes.viz.partition_picture.DPI_RANGE,
#: hermes.data.meshinfo.MAX_GENERATED_CELLS, hermes.balance.gossip.grapevine_serial.MAX_GOSSIP_ITERATIONS,
#: hermes.lab.specs.SPREAD_MAX, hermes.sections.LBDatafileSpec.cells_per_block, BalancerSpec.rounds and .trigger,
#: RunSpec.timeout, hermes.viz.zoom.parse_zoom's keywords
MAX_JOBS = 1024
MAX_TIMEOUT = 1e7
DPI_RANGE = (10, 1200)
MAX_GENERATED_CELLS = 20_000_000
MAX_GOSSIP_ITERATIONS = 10_000
SPREAD_MAX = 1e12
MAX_CELLS_PER_BLOCK = 10**9
MAX_ROUNDS = 1000
MAX_TRIGGER = 1e6
ZOOM_WORDS = ("auto", "none", "off", "full", "")
#: objects of ``hermes gossip``: an int64 with room (the lab refuses what this machine's memory cannot hold)
MAX_OBJECTS = 10**15


class Number:
    """The argparse type of an option that takes one float: within hermes' rule for numbers and ``lo``..``hi``
    (an end excluded when ``lo_open`` / ``hi_open``); anything else is argparse's one-line error."""

    def __init__(self, lo: float = -BIG, hi: float = BIG, *, lo_open: bool = False, hi_open: bool = False):
        self.range = NumberRange(lo, hi, lo_open, hi_open)

    def __call__(self, text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number in {self.range}, got {text[:40]!r}") from None
        if self.range.problem(x) is not None:
            raise argparse.ArgumentTypeError(f"must be {self.describe()}, got {shown(x)}")
        return x

    def describe(self) -> str:
        """The range as ``--help`` and docs/PARAMETERS.md show it."""
        return self.range.describe()


class Integer:
    """The argparse type of an option that takes an integer in ``lo``..``hi``: digits only (``1e9`` and ``2.0``
    are no integers), at most 18 of them."""

    def __init__(self, lo: int, hi: int):
        self.lo, self.hi = lo, hi

    def __call__(self, text: str) -> int:
        if not re.fullmatch(r"\s*[-+]?\d{1,18}\s*", text):
            raise argparse.ArgumentTypeError(f"must be an integer in {self.lo}..{self.hi}, got {text[:40]!r}")
        n = int(text)
        if n < self.lo:
            raise argparse.ArgumentTypeError(f"must be at least {self.lo}, got {n}")
        if n > self.hi:
            raise argparse.ArgumentTypeError(f"must be at most {self.hi}, got {n}")
        return n

    def describe(self) -> str:
        return f"an integer in {self.lo}..{self.hi}"


class Numbers:
    """The argparse type of an option that takes a comma list of floats, each in ``range`` (or one of
    ``keywords``), whose largest is at most ``spread`` times its smallest nonzero magnitude; returns the text as
    given (the command parses it again)."""

    def __init__(self, lo: float = -BIG, hi: float = BIG, *, lo_open: bool = False, hi_open: bool = False,
                 keywords: tuple[str, ...] = (), spread: float | None = None):
        self.range = NumberRange(lo, hi, lo_open, hi_open)
        self.keywords, self.spread = keywords, spread

    def __call__(self, text: str) -> str:
        if text.strip().lower() in self.keywords:
            return text
        words = " or ".join(self.keywords)
        values = []
        for k, item in enumerate(text.split(",")):
            try:
                x = float(item)
            except ValueError:
                raise argparse.ArgumentTypeError(f"expected {words + ' or ' if words else ''}comma-separated numbers, "
                                                 f"got {text[:40]!r}") from None
            if self.range.problem(x) is not None:
                raise argparse.ArgumentTypeError(f"value {k} must be {self.range.describe()}, got {shown(x)}")
            values.append(abs(x))
        nonzero = [v for v in values if v > 0]
        if self.spread is not None and nonzero and max(nonzero) > self.spread * min(nonzero):
            raise argparse.ArgumentTypeError(f"the values span {max(nonzero) / min(nonzero):.3g}, more than "
                                             f"{shown(self.spread)}")
        return text

    def describe(self) -> str:
        words = "".join(f"{w} or " for w in self.keywords)
        span = f"; the largest at most {shown(self.spread)} times the smallest" if self.spread else ""
        return f"{words}a comma list, each {self.range.describe()}{span}"


class Box:
    """``--zoom``: a keyword, or ``x0,y0,x1,y1`` with every corner within hermes' rule for numbers (its magnitude
    at most 1e100); the text as given (the command parses it again and checks the box is not empty)."""

    def __init__(self, keywords: tuple[str, ...]):
        self.keywords = keywords

    def __call__(self, text: str) -> str:
        if text.strip().lower() in self.keywords:
            return text
        for item in text.split(","):
            try:
                problem = number_problem(float(item))
            except ValueError:
                continue  # the command says what a box is
            if problem is not None:
                raise argparse.ArgumentTypeError(f"a corner {problem}")
        return text

    def describe(self) -> str:
        return f"{' | '.join(self.keywords[:2])} or 4 numbers, each 0 or of magnitude {shown(TINY)} to {shown(BIG)}"


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (``hermes: error: ...``) instead of a usage block, so that every bad
    input — options included — is one line and exit 2; an option whose type is one of the number types above
    has its range added to its ``--help`` text."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # argparse takes "-5e-324" or "-inf" for an option (its matcher knows only -1 and -1.5): a number that
        # starts with '-' is an option's value, so that the number's own range refuses it in words
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$",
                                                   re.IGNORECASE)

    def add_argument(self, *args, **kwargs):
        kind = kwargs.get("type")
        if hasattr(kind, "describe") and kwargs.get("help") not in (None, argparse.SUPPRESS):
            kwargs["help"] = f"{kwargs['help']} [{kind.describe()}]"
        return super().add_argument(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        """argparse's, with an unknown option reported by the (sub)command it was given to, and the options of
        that command closest to it suggested."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            where = self._chosen(parsed)
            known = {o.lstrip("-"): o for a in where._actions for o in a.option_strings
                     if o.startswith("--") and a.help is not argparse.SUPPRESS}
            hits = next((h for h in (close_names(e.split("=", 1)[0].lstrip("-"), known) for e in extras
                                     if e.startswith("--")) if h), [])
            hint = f" (did you mean {' or '.join(repr(known[h]) for h in hits)}?)" if hits else ""
            where.error(f"unrecognized arguments: {' '.join(extras)}{hint}")
        return parsed

    def _chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost (sub)command parser the parsed arguments went through."""
        parser: argparse.ArgumentParser = self
        while True:
            action = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
            chosen = getattr(parsed, action.dest, None) if action is not None else None
            if chosen not in (action.choices if action is not None else {}):
                return parser
            parser = action.choices[chosen]

    def error(self, message: str):
        name = self.prog.removeprefix("hermes").strip()
        unknown = re.match(r"argument COMMAND: invalid choice: '([^']*)'", message)
        if unknown:  # a mistyped command or subcommand: the closest ones (an old spelling by its new one)
            action = next(a for a in self._actions if isinstance(a, argparse._SubParsersAction))
            known = {c: c for c in action.choices}
            if not name:
                known.update({old: " ".join(new) for old, new in _OLD_COMMANDS.items()})
            hits = close_names(unknown[1], known)
            hint = f" (did you mean {' or '.join(repr(known[h]) for h in hits)}?)" if hits else \
                f" (hermes {name + ' ' if name else ''}--help lists the commands)"
            raise UsageError(f"{name + ': ' if name else ''}unknown command {unknown[1]!r}{hint}")
        tail = "" if "(did you mean" in message else f" (hermes {name + ' ' if name else ''}--help lists the options)"
        raise UsageError(f"{name + ': ' if name else ''}{message}{tail}")


#: the commands renamed by the grammar of verbs and nouns (old first word → its new words); each old spelling works
#: for one more release, :func:`respell` rewriting it and saying so on stderr
_OLD_COMMANDS = {"replay": ("trace", "replay"), "flow": ("lab", "flow"), "gossip": ("lab", "gossip"),
                 "flow-bench": ("lab", "bench")}
#: every old spelling, as the note names it (tests/test_cli.py checks each still works)
OLD_SPELLINGS = {**{f"hermes {old}": f"hermes {' '.join(new)}" for old, new in _OLD_COMMANDS.items()},
                 "hermes run --resume DIR": "hermes resume DIR"}


def respell(argv: list[str]) -> tuple[list[str], str | None]:
    """An old spelling of a command line rewritten in the grammar of verbs and nouns, and the note that says so.

    ``hermes replay`` → ``hermes trace replay``, ``hermes flow`` / ``gossip`` / ``flow-bench`` → ``hermes lab
    flow`` / ``gossip`` / ``bench``, ``hermes run --resume DIR ...`` → ``hermes resume DIR ...`` (``--resume=DIR`` and
    argparse's abbreviations, ``--res DIR``, too). A command line in the new grammar is returned as it is, with no
    note. The rewrite happens before parsing, so that a launcher re-running the command under ``mpiexec`` hands its
    ranks the new spelling and the note is said once.

    Examples
    --------
    >>> respell(["replay", "t/data", "--no-plot"])[0]
    ['trace', 'replay', 't/data', '--no-plot']
    >>> respell(["run", "--resume", "runs/a", "--quiet"])
    (['resume', 'runs/a', '--quiet'], "'hermes run --resume DIR' is now 'hermes resume DIR'")
    >>> respell(["trace", "replay", "t/data"])
    (['trace', 'replay', 't/data'], None)
    """
    if not argv:
        return argv, None
    first, rest = argv[0], argv[1:]
    if first in _OLD_COMMANDS:
        new = _OLD_COMMANDS[first]
        return [*new, *rest], f"'hermes {first}' is now 'hermes {' '.join(new)}'"
    if first != "run":
        return argv, None
    for i, word in enumerate(rest):
        if word == "--":
            break
        option, eq, value = word.partition("=")
        if len(option) > 2 and "--resume".startswith(option):  # --resume or an abbreviation (no other run option
            # starts with --r)
            if eq:
                run_dir, others = value, rest[:i] + rest[i + 1:]
            elif i + 1 < len(rest):
                run_dir, others = rest[i + 1], rest[:i] + rest[i + 2:]
            else:
                return argv, None  # no value: argparse says so
            return ["resume", run_dir, *others], "'hermes run --resume DIR' is now 'hermes resume DIR'"
    return argv, None


def _add_job_options(r: argparse.ArgumentParser) -> None:
    """The options of the MPI job that ``hermes run`` and ``hermes resume`` share."""
    r.add_argument("--timeout", metavar="SECONDS", type=Number(0, MAX_TIMEOUT, lo_open=True),
                   help="end the job if a phase (or the set-up) takes longer (a rank stopped or hung); "
                   "overrides run.timeout")
    r.add_argument("--processes", type=Integer(1, MAX_PROCESSORS), metavar="N",
                   help="MPI processes hosting the processors (default: one per processor up to this machine's "
                   "cores, one fewer for a refined run's drawing worker, the processors shared evenly); "
                   "overrides run.processes")
    r.add_argument("--no-launch", action="store_true",
                   help="never start mpiexec; run in this process (a 1-processor scenario, or already under MPI)")
    r.add_argument("--quiet", action="store_true", help="no progress output")
    r.add_argument("--verbose", action="store_true", help="debug logging")
    r.add_argument("--no-pictures", action="store_true", help="skip PNG pictures")
    # the launcher holds the run directory's lock and hands it to the job's rank 0 (hermes.files.DirLock)
    r.add_argument("--lock-token", help=argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    """The parser of every ``hermes`` command: verbs for what users do (run, resume, compare, plot), nouns with
    subcommands for what they inspect (mesh, trace, lab, balancers, scenario). The old spellings are rewritten by
    :func:`respell` before parsing, so they are no commands of their own here."""
    ap = _Parser(prog="hermes", description="Dynamic load balancing testbed for adaptive meshes")
    ap.add_argument("--version", action="store_true", help="print the version and exit")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

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
    # the old spelling of ``hermes resume RUN_DIR`` (respell() rewrites it before parsing; kept for one release)
    r.add_argument("--resume", metavar="RUN_DIR", help=argparse.SUPPRESS)
    _add_job_options(r)

    rs = sub.add_parser("resume", help="continue a run from its last checkpoint (output.checkpoint_every)")
    rs.add_argument("resume", metavar="RUN_DIR", help="the run directory of the run to continue (its scenario and "
                    "processors are the run's own)")
    _add_job_options(rs)
    # what a resumed run takes from RUN_DIR: accepted here so that hermes run's check refuses them in words
    rs.add_argument("scenario", nargs="?", help=argparse.SUPPRESS)
    rs.add_argument("--set", dest="overrides", action="append", default=[], help=argparse.SUPPRESS)
    rs.add_argument("--out", help=argparse.SUPPRESS)
    rs.add_argument("--force", action="store_true", help=argparse.SUPPRESS)

    pl = sub.add_parser("plot", help="(re)draw the pictures of a run directory (into RUN_DIR/plots/ or --out; "
                        "the run's own pictures are left as they are)")
    pl.add_argument("run_dir", help="a run directory (with summary.json, geometry.npz, partitions.npz)")
    pl.add_argument("--out", metavar="DIR",
                    help="write the pictures into DIR (made if missing; relative to the current directory). "
                    "Default: RUN_DIR/plots/ (a hermes run directory only); the run's own partition-XXX.png and "
                    "phases.png are never overwritten")
    pl.add_argument("--phase", dest="phases", action="append", default=None, metavar="K",
                    help="draw only the partition after phase K (0: the initial one; repeatable or K1,K2,...)")
    pl.add_argument("--zoom", default="auto", metavar="auto|none|x0,y0,x1,y1", type=Box(ZOOM_WORDS),
                    help="the window shown: auto (default: where every rank is legible; the whole domain on a "
                    "uniform mesh), none (the whole domain) or a box in mesh coordinates (negative corners "
                    "too: --zoom -1.5,-0.5,2,0.5)")
    pl.add_argument("--show", default="weights,loads", metavar="PANELS",
                    help="extra panels, comma-separated: weights (unit weights, or refinement levels when "
                    "recorded, beside the partition), loads (per-rank load against the fair load, under it); "
                    "'none' for the partition alone (default: weights,loads)")
    pl.add_argument("--dpi", type=Integer(*DPI_RANGE), default=150, help="resolution of the PNGs (default 150)")

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
    cm.add_argument("--jobs", type=Integer(1, MAX_JOBS), default=1, metavar="N",
                    help="run up to N runs at once while their ranks fit the cores (default 1)")
    cm.add_argument("--oversubscribe", action="store_true",
                    help="start --jobs runs whatever their ranks (virtual-clock results are unchanged; "
                    "wall-clock timings become unreliable)")
    cm.add_argument("--timeout", type=Number(0, MAX_TIMEOUT, lo_open=True), metavar="SECONDS", help="kill a run after this many wall seconds")
    cm.add_argument("--report", metavar="DIR", dest="report_dir",
                    help="only re-render results, table, plots and report.html of the experiment in DIR")
    cm.add_argument("--no-report", action="store_true", help="write results.csv, phases.csv and table.md only "
                    "(no plots, no report.html)")
    cm.add_argument("--quiet", action="store_true", help="no progress lines")
    cm.add_argument("--trace", metavar="STEM", help="a vt LBDatafile trace as the base: each run replays it "
                    "(hermes replay) with the axes' balancers and replay options (docs/TRACES.md)")

    me = sub.add_parser("mesh", help="mesh tools: describe a mesh file, generate a CFD mesh")
    msub = me.add_subparsers(dest="mesh_command", required=True, metavar="COMMAND")
    mi = msub.add_parser("info", help="counts, connectivity, degree, bounding box and validity problems")
    mi.add_argument("file", help="a mesh or graph file (meshio formats, .graph/.chaco/.metis, .mtx)")
    mi.add_argument("--units", choices=["cells", "nodes"], default="cells",
                    help="work units: cells (dual graph, default) or nodes (nodal graph)")
    mi.add_argument("--json", action="store_true", help="print one JSON object")
    mg = msub.add_parser("generate", help="write a generated CFD mesh (grid, stufe, lshape, airfoil, 3elt, cylinder, "
                         "large)")
    mg.add_argument("name", help="generator name")
    mg.add_argument("--size", type=Integer(1, MAX_GENERATED_CELLS), help="approximate number of cells (default: the shipped mesh's size)")
    mg.add_argument("--out", required=True, help="output file; the suffix picks the format (.vtu, .msh, ...)")

    tr = sub.add_parser("trace", help="vt LBDatafile traces: describe one, write a hermes run as one, balance "
                        "its phases with any balancers")
    tsub = tr.add_subparsers(dest="trace_command", required=True, metavar="COMMAND")
    ti = tsub.add_parser("info", help="ranks, phases, tasks, communications, user_defined keys, loads per phase")
    ti.add_argument("stem", help="the trace: STEM for STEM.0.json ... (plain or brotli)")
    ti.add_argument("--phase", default="all", help="phases: all (default), K, A-B or a comma list")
    ti.add_argument("--json", action="store_true", help="print one JSON object")
    tw = tsub.add_parser("write", help="write a hermes run directory as a trace (what output.lbdatafile writes)")
    tw.add_argument("run_dir", help="a run directory with recorded partitions")
    tw.add_argument("--out", metavar="DIR", help="the trace's directory: DIR/data.<rank>.json (default "
                    "RUN_DIR/lbdatafile/); new, empty or one trace write made")
    tw.add_argument("--cells-per-block", type=Integer(1, MAX_CELLS_PER_BLOCK), help="tasks are blocks of about K cells (default: cells)")
    tw.add_argument("--compress", action="store_true", help="brotli-compress the files")

    rp = tsub.add_parser("replay", help="balance the phases of a real application's trace (vt LBDatafile) with any "
                        "balancers and compare them")
    rp.add_argument("stem", nargs="?", help="the trace: STEM for the per-rank files STEM.0.json ... (plain or "
                    "brotli); not needed with --list")
    rp.add_argument("--algorithm", "--algorithms", default="grapevine,pcg,metis",
                    help="balancers, comma-separated (default grapevine,pcg,metis; 'hermes trace replay --list' names "
                    "those replay runs)")
    rp.add_argument("--phase", default="all", help="phases: all (default), K, A-B or a comma list (0,3-5)")
    rp.add_argument("--out", help="results directory (default runs/replay-<stem>-<timestamp>)")
    rp.add_argument("--graph", choices=["auto", "comm", "full"], default="auto",
                    help="processor graph of the flow balancers: comm (ranks that exchange messages), full (every "
                    "pair), auto (comm if connected, else full; default)")
    rp.add_argument("--param", dest="params", action="append", default=[], metavar="ALGORITHM.KEY=VALUE",
                    help="a balancer parameter, e.g. pcg.tolerance=1e-6 or grapevine.fanout=6 (repeatable)")
    rp.add_argument("--capacities", default="homo", type=Numbers(0, BIG, lo_open=True, keywords=("homo",),
                                                                 spread=SPREAD_MAX), help="homo (default) or one relative speed per rank, "
                    "comma-separated")
    rp.add_argument("--alpha", type=Number(0, BIG, lo_open=True), default=1.0, help="work model: weight of the load (LBAF's α, default 1)")
    rp.add_argument("--beta", type=Number(0, BIG), default=0.0, help="work model: weight of max(sent, received) off-rank "
                    "bytes (LBAF's β, default 0)")
    rp.add_argument("--gamma", type=Number(0, BIG), default=0.0, help="work model: constant per rank (LBAF's γ)")
    rp.add_argument("--delta", type=Number(0, BIG), default=0.0, help="work model: weight of the shared blocks homed "
                    "elsewhere (LBAF's δ)")
    rp.add_argument("--memory-limit", type=Number(0, BIG, lo_open=True), help="bytes per rank (LBAF's upper_bounds.max_memory_usage): a "
                    "rank above it has infinite work and is counted in memory_over")
    rp.add_argument("--seed", type=Integer(0, MAX_SEED), default=0, help="random seed of grapevine and the partitioners (default 0)")
    rp.add_argument("--rounds", type=Integer(1, MAX_ROUNDS), default=3, help="flow balancers: rounds per phase, as balancer.min_rounds "
                    "(default 3)")
    rp.add_argument("--trigger", type=Number(1, MAX_TRIGGER), default=1.0, help="flow balancers: balance only above this imbalance, "
                    "as balancer.trigger (default 1.0)")
    rp.add_argument("--realisation", choices=["auto", "objects", "cells"], default="auto",
                    help="how a flow moves objects: objects (by communication affinity), cells (hermes' gain "
                    "selection on the objects' centroids, as a trace hermes wrote has), auto (cells when there are "
                    "centroids and no memory limit; default)")
    rp.add_argument("--memory-step", choices=["refine", "repair", "off"], default=None,
                    help="under --memory-limit, what follows each balancer: refine (default: ranks above the limit "
                    "repaired by whole clusters, then a block-aware descent on the largest load), repair (the "
                    "repair only) or off (the balancer's assignment as it is)")
    rp.add_argument("--write-trace", action="store_true", help="also write each balanced assignment as an "
                    "LBDatafile trace (OUT/traces/ALGORITHM/STEM.r.json)")
    rp.add_argument("--compress", action="store_true", help="brotli-compress the written traces (as vt does)")
    rp.add_argument("--no-plot", action="store_true", help="no replay.png")
    rp.add_argument("--list", action="store_true", help="print the balancers replay runs and exit")
    rp.add_argument("--quiet", action="store_true", help="print only the results directory")
    la = sub.add_parser("lab", help="offline lab (no MPI): a balancer's flow on a processor graph, Grapevine gossip, "
                        "the published figures")
    lsub = la.add_subparsers(dest="lab_command", required=True, metavar="COMMAND")
    fl = lsub.add_parser("flow", help="run a balancer's serial reference on a processor graph")
    fl.add_argument("--graph", required=True, help="path:N ring:N star:N mesh:RxC torus:RxC tree:K:N complete:N "
                    "wheel:N bipartite:AxB, mesh-file:PATH:P, or an edge-list / JSON file")
    fl.add_argument("--capacities", default="homo", help="homo | hcuw | list | file")
    fl.add_argument("--weights", default="1", help="1 | kmod4 | ijmod3 | list | file")
    fl.add_argument("--loads", default="random:0", help="one | eq | high | half | random:SEED | list | file")
    fl.add_argument("--algorithm", required=True, help="a balancer name (hermes balancers)")
    fl.add_argument("--tol", type=Number(0, 1, hi_open=True), help="convergence tolerance (the balancer's 'tolerance')")
    fl.add_argument("--param", dest="params", action="append", default=[], metavar="KEY=VALUE",
                    help="another balancer parameter (repeatable)")
    fl.add_argument("--json", action="store_true", help="print one JSON object")

    gp = lsub.add_parser("gossip", help="Grapevine gossip balancing on object loads")
    gp.add_argument("--ranks", type=Integer(1, MAX_PROCESSORS), required=True, help="number of ranks |P|")
    gp.add_argument("--objects", type=Integer(0, MAX_OBJECTS), required=True, help="number of objects |O| (the units of load)")
    gp.add_argument("--mapped-ranks", type=Integer(1, MAX_PROCESSORS), help="objects start on the first M ranks (default: all)")
    gp.add_argument("--loads", default="iso", help="object loads: uniform:A,B | lognormal:A,B | iso (all 1) | "
                    "FILE | lbaf:STEM (LBAF LBDatafile JSON)")
    gp.add_argument("--iterations", type=Integer(0, MAX_GOSSIP_ITERATIONS), default=4, help="inform + transfer iterations i (default 4)")
    gp.add_argument("--rounds", type=Integer(1, MAX_PROCESSORS), default=4, help="gossip rounds k of the inform stage (default 4)")
    gp.add_argument("--fanout", type=Integer(1, MAX_PROCESSORS), default=4, help="peers f each rank informs per round (default 4)")
    gp.add_argument("--threshold", type=Number(1, BIG), default=1.0,
                    help="overload threshold T relative to the average load (default 1.0)")
    gp.add_argument("--criterion", choices=["original", "modified"], default="modified",
                    help="transfer criterion: 6 (original) or 6' (modified, default)")
    gp.add_argument("--source-load", choices=["turn", "current"], default="turn",
                    help="L_i in criterion 6': at the start of the source's turn (the report's) or current")
    gp.add_argument("--seed", type=Integer(0, MAX_SEED), default=0, help="random seed (default 0)")
    gp.add_argument("--json", action="store_true", help="print one JSON object")
    gp.add_argument("--write-trace", metavar="STEM", help="also write the initial and final assignments as an "
                    "LBDatafile trace STEM.<rank>.json (phases 0 and 1) for LBAF or vt-tv")

    fb = lsub.add_parser("bench", help="regenerate the published iteration/time figures (CSV + PNG)")
    fb.add_argument("--out", default="runs/flow-bench", help="output directory")
    fb.add_argument("--family", choices=["diffusion", "polynomial", "table10.1", "all"], default="all")
    fb.add_argument("--quick", action="store_true", help="a few sizes only (seconds)")
    fb.add_argument("--profile", help="a platform profile (name, e.g. thesis2003, or file): the balancers' "
                    "messages at its costs and each call at its set-up, message and allreduce-hop prices "
                    "(polynomial, table10.1)")

    ba = sub.add_parser("balancers", help="list the balancers (built in and plug-ins) and their parameters")
    ba.add_argument("--verbose", action="store_true", help="one line per parameter: default and description")
    ba.add_argument("--markdown", action="store_true", help="the parameter reference as Markdown "
                    "(docs/PARAMETERS.md is this output)")

    sc = sub.add_parser("scenario", help="print the resolved scenario (validation only, no MPI)")
    sc.add_argument("scenario", nargs="?", help="scenario YAML (default: the embedded quickstart)")
    sc.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a scenario value, e.g. --set processors=8 (repeatable; a path is relative to "
                    "the current directory; mesh.file=... replaces a mesh.grid and the reverse)")

    return ap
