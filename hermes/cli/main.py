"""The ``hermes`` command's entry: parse (:mod:`hermes.cli.parser`), check the paths given, dispatch to the
command's module (imported only when its command runs), report errors in one line (the exit codes are listed in
:mod:`hermes.cli`)."""

from __future__ import annotations

import os
import sys

from hermes.cli.common import EXIT_BAD_INPUT, error, world_rank
from hermes.cli.parser import UsageError, build_parser, respell

__all__ = ["main", "build_parser"]


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
        from hermes.runtime.launch import under_mpi_launcher

        if under_mpi_launcher():  # in a job the exception must reach the hook that aborts every rank
            raise
        where = f"{err.filename}: " if err.filename else ""
        return error(f"{where}{err.strerror or type(err).__name__}")


#: the arguments that name a file, a directory or a trace's stem (the attribute of the parsed arguments → the
#: name an error line gives it): each is checked by :func:`hermes.files.check_path` before a command runs
_PATH_OPTIONS = {"scenario": "scenario", "experiment": "experiment", "run_dir": "RUN_DIR", "stem": "STEM",
                 "file": "file", "out": "--out", "resume": "RUN_DIR", "report_dir": "--report", "trace": "--trace",
                 "write_trace": "--write-trace"}

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
    argv, note = respell(_glue_negative_values(list(sys.argv[1:] if argv is None else argv)))
    if note is not None and world_rank() == 0:  # stderr: stdout belongs to --json and --list
        print(f"hermes: {note}; the old spelling goes in the next release", file=sys.stderr, flush=True)
    try:
        args = build_parser().parse_args(argv)
    except UsageError as err:
        return error(str(err), world_rank())
    from hermes.errors import HermesError
    from hermes.files import check_path

    try:  # a path with a newline or another control character: one line, whatever the command
        for dest, key in _PATH_OPTIONS.items():
            if isinstance(getattr(args, dest, None), str):
                check_path(getattr(args, dest), key)
    except HermesError as err:
        return error(str(err), world_rank())
    stem = getattr(args, "write_trace", None)
    if isinstance(stem, str) and stem.endswith(("/", os.sep)):  # DIR/ would be the stem DIR: files beside DIR
        return error(f"--write-trace: {stem!r} names a directory; a trace's stem names its files (give DIR/STEM "
                     f"for DIR/STEM.<rank>.json)", world_rank())
    if args.version:
        from hermes.version import __version__

        print(f"hermes {__version__}")
        return 0
    if args.command in ("run", "resume"):
        from hermes.cli.run import cmd_run

        return cmd_run(args, argv)
    if args.command == "plot":
        from hermes.cli.plot import cmd_plot

        return cmd_plot(args)
    if args.command == "compare":
        from hermes.cli.compare import cmd_compare

        return cmd_compare(args)
    if args.command == "trace":
        from hermes.cli.compare import cmd_replay, cmd_trace

        return cmd_replay(args) if args.trace_command == "replay" else cmd_trace(args)
    if args.command in ("scenario", "balancers", "mesh"):
        from hermes.cli.info import cmd_balancers, cmd_mesh, cmd_scenario

        return {"scenario": cmd_scenario, "balancers": cmd_balancers, "mesh": cmd_mesh}[args.command](args)
    if args.command == "lab":
        from hermes.cli.lab import cmd_flow, cmd_flow_bench, cmd_gossip

        return {"flow": cmd_flow, "gossip": cmd_gossip, "bench": cmd_flow_bench}[args.lab_command](args)
    build_parser().print_help()
    return EXIT_BAD_INPUT
