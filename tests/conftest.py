"""Shared test helpers: run a Python script or hermes itself under real mpiexec with a timeout."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hermes.runtime.launch import mpiexec_command

ROOT = Path(__file__).resolve().parents[1]
SHARED_MESHES = ROOT.parent / "shared" / "meshes"
#: the seeds (the thesis and papers as text) beside the clone, as the shared meshes (HERMES_SHARED_SEEDS elsewhere)
SHARED_SEEDS = ROOT.parent / "shared" / "seeds"
#: the test being run (set by pytest_runtest_protocol below), so run_mpi can check it carries the mpi mark
_CURRENT_TEST: pytest.Item | None = None


def run_mpi(n: int, args: list[str], *, module: str | None = None, script: str | Path | None = None,
            timeout: float = 180, cwd: str | Path | None = None) -> subprocess.CompletedProcess:
    """Run ``python -m mpi4py <script> args`` (or ``-m module``) on ``n`` ranks; never hangs past ``timeout``."""
    if script is not None:
        cmd = mpiexec_command(n, [str(script), *args], module="hermes")
        # replace "-m hermes" by the script path
        i = cmd.index("-m", cmd.index("mpi4py") + 1)
        cmd = cmd[:i] + [str(script), *args]
    else:
        cmd = mpiexec_command(n, args, module=module or "hermes")
    if _CURRENT_TEST is not None and _CURRENT_TEST.get_closest_marker("mpi") is None:
        pytest.fail(f"{_CURRENT_TEST.nodeid} starts mpiexec but is not marked mpi: add @pytest.mark.mpi")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    if script is not None:
        # under -P nothing is prepended to sys.path, and mpi4py's script runner overwrites sys.path[0] with the
        # script's directory: give it that directory as the first entry, so the repository root survives
        env["PYTHONPATH"] = str(Path(script).resolve().parent) + os.pathsep + env["PYTHONPATH"]
    env.setdefault("MPLBACKEND", "Agg")
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT, env=env)
    except subprocess.TimeoutExpired as err:  # the job hung: that is a failure, not a pass
        pytest.fail(f"mpiexec timed out after {timeout}s: {' '.join(cmd)}\n{err.stdout}\n{err.stderr}")


@pytest.fixture
def mpirun():
    return run_mpi


# --- markers: `mpi` is given automatically, so a new test that starts mpiexec gets it without being told ---------
#: names whose use means "this test starts mpiexec": the fixture and the function behind it
_MPI_NAMES = frozenset({"mpirun", "run_mpi"})
_TESTS = Path(__file__).resolve().parent


def _names_mpi(code, globals_: dict, seen: set) -> bool:
    """True if ``code`` (its nested functions, or a helper of the test tree it calls) names run_mpi / mpirun."""
    if code in seen:
        return False
    seen.add(code)
    if _MPI_NAMES & {*code.co_names, *code.co_varnames, *code.co_freevars}:
        return True
    for const in code.co_consts:
        if hasattr(const, "co_names") and _names_mpi(const, globals_, seen):
            return True
    for name in code.co_names:
        helper = getattr(globals_.get(name), "__code__", None)
        if helper is not None and _TESTS in Path(helper.co_filename).resolve().parents:
            if _names_mpi(helper, globals_[name].__globals__, seen):
                return True
    return False


def _starts_mpiexec(item) -> bool:
    """True if the test, or a fixture it uses, uses ``mpirun`` or names ``run_mpi`` (directly or via a helper)."""
    if "mpirun" in getattr(item, "fixturenames", ()):
        return True
    funcs = [getattr(item, "function", None)]
    for defs in getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}).values():
        funcs += [d.func for d in defs]
    seen: set = set()
    return any(_names_mpi(f.__code__, f.__globals__, seen) for f in funcs if hasattr(f, "__code__"))


def pytest_collection_modifyitems(config, items):
    """Mark ``mpi`` every test that starts mpiexec through run_mpi; :func:`run_mpi` fails a test the scan missed."""
    for item in items:
        if _starts_mpiexec(item):
            item.add_marker(pytest.mark.mpi)


# --- per-test CPU time: `pytest --cpu-times FILE` writes nodeid, wall s, CPU s (this process + waited children) ---
def pytest_addoption(parser):
    parser.addoption("--cpu-times", metavar="FILE", default=None,
                     help="write one line per test: node id, wall seconds, CPU seconds (user+sys of pytest and of "
                          "the children it waited for, mpiexec and its ranks included), tab-separated")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _CURRENT_TEST
    _CURRENT_TEST = item
    path = item.config.getoption("--cpu-times")
    if path is None:
        yield
        _CURRENT_TEST = None
        return
    import resource
    import time

    def cpu() -> float:
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    wall0, cpu0 = time.perf_counter(), cpu()
    yield
    wall, used = time.perf_counter() - wall0, cpu() - cpu0
    item.config.stash.setdefault(_TIMES, []).append((item.nodeid, wall, used))
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{item.nodeid}\t{wall:.3f}\t{used:.3f}\n")
    _CURRENT_TEST = None


_TIMES = pytest.StashKey[list]()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """With ``--cpu-times``: wall and CPU seconds per area (tests/<dir>/, or top-level tests/test_*.py)."""
    times = config.stash.get(_TIMES, [])
    if not times:
        return
    areas: dict[str, list[float]] = {}
    for nodeid, wall, used in times:
        parts = nodeid.split("::")[0].split("/")
        area = parts[1] if len(parts) > 2 else "top-level"
        acc = areas.setdefault(area, [0, 0.0, 0.0])
        acc[0] += 1
        acc[1] += wall
        acc[2] += used
    terminalreporter.write_sep("-", "time per area (wall s, CPU s incl. mpiexec and ranks)")
    for area, (n, wall, used) in sorted(areas.items()):
        terminalreporter.write_line(f"| {area} | {n} | {wall:.1f} | {used:.1f} |")
    total = [sum(v[i] for v in areas.values()) for i in range(3)]
    terminalreporter.write_line(f"| total | {total[0]} | {total[1]:.1f} | {total[2]:.1f} |")
