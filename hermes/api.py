"""The public Python API: a few verbs at the top of the package, everything else one import away.

``hermes.run`` runs an experiment (launching ``mpiexec`` itself when needed) and returns its
:class:`~hermes.lifecycle.records.RunResult`; ``hermes.load_run`` reads a run directory back; ``hermes.balance``
computes a balancing flow on a processor graph (:class:`hermes.Model`) with any balancer's serial reference;
``hermes.compare`` runs an experiment (axes swept over a base scenario) and returns its results table;
``hermes.read_mesh`` and ``hermes.partition`` read and partition meshes. The command line is a thin layer
over the same functions.
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hermes.compare import compare
from hermes.runtime.launch import _die_with_parent
from hermes.compare.experiment import absolute_paths
from hermes.data.io import read_mesh
from hermes.data.mesh import Mesh
from hermes.errors import HermesError, ScenarioError
from hermes.interpreter import child_env
from hermes.loaders import dump_yaml, load_json, read_text
from hermes.lifecycle.records import RunResult
from hermes.claims import check_run_dir, claim_dir
from hermes.lifecycle.directory import run_dir_for
from hermes.progress import Progress, wanted
from hermes.scenario import QUICKSTART, Scenario, load_scenario, parse_scenario

__all__ = ["run", "load_run", "compare", "read_mesh", "partition", "scenario"]


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python values (a numpy bool stays a bool, refused where a number is meant)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _overrides(overrides: dict[str, Any]) -> list[str]:
    """``{"balancer.algorithm": "metis", "adaptation__phases": 3}`` → ``--set`` items (``__`` reads as ``.``)."""
    def text(value: Any) -> str:
        try:
            return dump_yaml(_plain(value), default_flow_style=True).strip().removesuffix("...").strip()
        except Exception:  # noqa: BLE001 - yaml's RepresenterError: a Python object YAML cannot write
            raise ScenarioError(f"{key}: {type(value).__name__} is not a value a scenario holds (numbers, strings, "
                                f"booleans, lists and mappings)") from None

    out = []
    for key, value in overrides.items():
        out.append(f"{key.replace('__', '.')}={text(value)}")
    return out


def scenario(source: str | os.PathLike | dict | Scenario | None = None, **overrides: Any) -> Scenario:
    """A validated :class:`~hermes.scenario.Scenario` from a file, a raw mapping, a Scenario, or the embedded
    quickstart (``None``), with ``--set``-style overrides given as keywords.

    Raises
    ------
    ScenarioError, BalancerError
        One line naming the key.

    Examples
    --------
    A key's dots are double underscores:

    >>> import hermes
    >>> sc = hermes.scenario(seed=3, balancer__algorithm="gda0")
    >>> sc.processors, sc.balancer.algorithm, sc.seed, sc.mesh.grid
    (4, 'gda0', 3, '40x30')
    >>> hermes.scenario(balancer__algorithm="pgc")
    Traceback (most recent call last):
    ...
    hermes.errors.BalancerError: ...unknown balancer 'pgc'...
    """
    sets = _overrides(overrides)
    if source is None:
        return parse_scenario(QUICKSTART, overrides=sets)
    if isinstance(source, Scenario):
        return parse_scenario(source.to_dict(), base_dir=source.base_dir, overrides=sets) if sets else source
    if isinstance(source, dict):
        return parse_scenario(source, overrides=sets)
    return load_scenario(source, overrides=sets)


def run(source: str | os.PathLike | dict | Scenario | None = None, processors: int | None = None, *,
        out: str | os.PathLike | None = None, progress: bool = True, quiet: bool | None = None,
        **overrides: Any) -> RunResult:
    """Run an experiment and return its result (summary, per-phase and per-rank records).

    Parameters
    ----------
    source : path, dict, Scenario or None
        A scenario file, a raw scenario mapping, a :class:`~hermes.scenario.Scenario`, or None for the
        embedded quickstart.
    processors : int, optional
        The number of MPI ranks (default: the scenario's ``processors``, else 4).
    out : path, optional
        The run directory (default ``runs/<scenario>-<timestamp>``).
    progress : bool
        Show the run's progress (default): its set-up and phase lines, and the step in progress repeated at
        least every 5 s while it lasts (a live line on a terminal). False: silent.
    quiet : bool, optional
        Deprecated (accepted for one release, with a DeprecationWarning): ``quiet=True`` is ``progress=False``.
    **overrides
        Scenario keys to override, dotted (``**{"balancer.algorithm": "metis"}``) or with ``__`` for ``.``
        (``balancer__algorithm="metis"``); values as in ``--set``.

    Returns
    -------
    RunResult
        ``result.summary`` (as in summary.json), ``result.phases``, ``result.ranks`` (the rows of
        phases.csv), ``result.out_dir``, ``result.to_pandas()``.

    Notes
    -----
    Called outside MPI with more than one processor, hermes starts ``mpiexec`` itself (as ``hermes run``
    does) and reads the run directory back; called inside an MPI job, it runs on the job's communicator
    (:func:`hermes.runtime.world.world`, ``COMM_WORLD``), every rank
    taking part (the result is returned on rank 0, None elsewhere).
    """
    from hermes.runtime.launch import under_mpi_launcher

    from hermes.balance.registry import plugins_deferred
    from hermes.lifecycle.plugins import check_plugins

    show = wanted(progress, quiet, "hermes.run")
    if processors is not None:
        overrides = {**overrides, "processors": processors}  # validated as the scenario's key (no bool, bounds)
    with plugins_deferred():  # a plug-in is imported last (hermes.lifecycle.plugins)
        sc = scenario(source, **overrides)
    n = sc.processors or 4
    if under_mpi_launcher() or n == 1:
        sc = scenario(source, **overrides)  # run in this process: its plug-ins imported here
        from mpi4py import MPI

        from hermes.lifecycle.driver import run as run_here

        from hermes.outputs import RUN_OUTPUTS
        from hermes.runtime.start import start
        from hermes.runtime.world import world  # the job's communicator: the one place that names it

        comm = world() if under_mpi_launcher() else MPI.COMM_SELF
        # one processor per process of the job (a scenario asking for another number is refused by the set-up)
        # rank 0's progress: a live line on a terminal, plain lines elsewhere (a notebook, a pipe)
        with Progress(enabled=show and comm.Get_rank() == 0) as shown:
            got = start(comm.Get_size(), lambda c: run_here(sc, c, out_dir=out, quiet=not show, progress=shown,
                                                             outputs=RUN_OUTPUTS), comm)
        return got.get(comm.Get_rank())
    from hermes.lifecycle.preflight import preflight

    with plugins_deferred():
        preflight(sc, n)  # files, mesh, magnitudes, memory: before any MPI job starts
    path, key = run_dir_for(sc.output, sc.name, sc.resolve, out)
    check_run_dir(path, key)  # a path that cannot be one (a NUL byte, a file) before it is resolved
    lock = claim_dir(path.absolute(), key, name=sc.name)  # held until the job has ended, as hermes run does
    try:
        check_plugins(sc.balancer, sc.run.timeout)  # last: in a child, under the run's time limit
        return _launch(sc, n, lock.path, lock.token, not show)
    finally:
        lock.release(remove_if_unused=True)


def _launch(sc: Scenario, n: int, out_dir: Path, token: str, quiet: bool) -> RunResult:
    """Run ``sc`` on ``n`` ranks under mpiexec into ``out_dir`` (whose lock this process holds) and read it back."""
    from hermes.runtime.launch import mpiexec_command

    with tempfile.TemporaryDirectory(prefix="hermes-run-") as tmp:
        spec = Path(tmp) / f"{sc.name}.yaml"
        portable = sc.model_copy(update=absolute_paths(sc.mesh, sc.platform, sc.resolve))
        spec.write_text(dump_yaml(portable.to_dict(), sort_keys=False))
        args = ["run", str(spec), "--no-launch", "--set", f"processors={n}", "--out", str(out_dir),
                "--lock-token", token]
        cmd = mpiexec_command(n, [*args, *(["--quiet"] if quiet else [])])
        # its own session, so that an interrupted caller (KeyboardInterrupt, an exception) never leaves the job
        # its own session (an interrupted caller never leaves the job), and on Linux it ends if the caller is
        # killed outright (kill -9): a job must not outlive the lock its caller holds on the run directory
        job = subprocess.Popen(cmd, stdout=subprocess.PIPE if not quiet else subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, start_new_session=True, env=child_env(),
                               preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        try:
            err = _relay(job)
        finally:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait()
        if job.returncode != 0:
            lines = [ln for ln in err.splitlines() if ln.startswith("hermes: error:")]
            raise HermesError(lines[0].removeprefix("hermes: error: ") if lines else
                              f"mpiexec exited with {job.returncode}: {err.strip()[-500:]}")
        return load_run(out_dir)


def _relay(job: subprocess.Popen) -> str:
    """The job's progress lines printed as they come (to ``sys.stdout``: a notebook shows them) while its
    stderr is collected by a thread (neither pipe can fill and stall the job); returns its stderr."""
    import threading

    err: list[str] = []
    reader = threading.Thread(target=lambda: err.append(job.stderr.read()), daemon=True)
    reader.start()
    if job.stdout is not None:
        for line in job.stdout:
            print(line, end="", flush=True)
    job.wait()
    reader.join()
    return "".join(err)


def load_run(run_dir: str | os.PathLike) -> RunResult:
    """A run directory read back: its summary, per-phase and per-rank records.

    Raises
    ------
    HermesError
        If the directory holds no readable hermes run (one line).

    Examples
    --------
    A one-processor run (in this process, no mpiexec) of the quickstart on a small grid, read back:

    >>> import tempfile, hermes
    >>> out = tempfile.mkdtemp() + "/run"
    >>> done = hermes.run(processors=1, out=out, progress=False, mesh__grid="8x6", platform__capacities="homo",
    ...                   adaptation__phases=2, output__pictures=False)
    >>> result = hermes.load_run(out)
    >>> result["processors"], len(result.phases), result["total_time"] == done["total_time"]
    (1, 2, True)
    >>> hermes.load_run(tempfile.mkdtemp())
    Traceback (most recent call last):
    ...
    hermes.errors.HermesError: ...: not a hermes run directory (summary.json is missing)
    """
    d = Path(run_dir)
    if not (d / "summary.json").is_file():
        raise HermesError(f"{d}: not a hermes run directory (summary.json is missing)")
    summary = load_json(d / "summary.json", error=HermesError)
    text = read_text(d / "phases.csv", f"{d}: phases.csv", error=HermesError)
    try:
        rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text, newline=""))]
    except csv.Error as err:
        raise HermesError(f"{d}: cannot read phases.csv ({err})") from None
    if not isinstance(summary, dict) or "phases" not in summary:
        raise HermesError(f"{d}: summary.json is not a hermes summary")
    return RunResult(summary, rows, d)


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def partition(mesh: Mesh, parts: int, *, targets: ArrayLike | None = None, seed: int = 0,
              ufactor: int = 30) -> NDArray[np.int64]:
    """The part of every work unit of ``mesh`` (METIS, part weights ∝ ``targets``; default equal).

    Examples
    --------
    >>> import hermes, numpy as np
    >>> mesh = hermes.read_mesh("meshes/grid20x19.vtu")
    >>> np.bincount(hermes.partition(mesh, 4)).tolist()
    [95, 95, 95, 95]
    >>> parts = hermes.partition(mesh, 2, targets=[3, 1])
    >>> round(float(np.mean(parts == 0)), 2)
    0.75
    """
    from hermes.data.partition import metis_partition

    return metis_partition(mesh.xadj, mesh.adjncy, mesh.weights, parts, targets=targets, seed=seed,
                           ufactor=ufactor)

