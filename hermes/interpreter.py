"""How hermes starts Python: every interpreter it starts imports nothing from the directory it was started in.

``python -m X`` and ``python -c CODE`` put the current directory first on ``sys.path`` (``python script.py`` the
script's directory): a ``yaml.py``, ``numpy.py`` or ``mpi4py.py`` where the user stands would be imported in
place of the real module, by every rank. Every process hermes starts — the MPI ranks
(:func:`hermes.runtime.launch.mpiexec_command`), the launch probe, the drawing workers, the extra-load task
runners, the runs of ``hermes compare``, the plug-in check, the benchmarks' commands — is built by
:func:`python_command` (the interpreter with ``-P``, safe-path mode, Python ≥ 3.11: nothing prepended to
``sys.path``) and gets :func:`child_env`. The flag is on the command line, not only in the environment, so
``mpiexec`` cannot lose it on the way to a remote host.

What is kept and what is not
----------------------------
- ``PYTHONPATH`` is honoured: it is how a user names a plug-in's directory (examples/custom_balancer), and it
  names directories explicitly (``.`` too). An *empty* entry (``PYTHONPATH=:dir``, what ``PYTHONPATH=
  $PYTHONPATH:dir`` gives when the variable was unset), which Python reads as the current directory even under
  ``-P``, is dropped from the children's environment.
- ``-I`` and ``-E`` are not used: they drop ``PYTHONPATH`` too (and ``-I`` the user's site-packages).
- ``PYTHONSTARTUP`` runs only in interactive mode, which ``-m``/``-c`` never enter; ``PYTHONINSPECT`` would make
  a child interactive after its work (a rank waiting on a terminal): both are removed from the children's
  environment. A ``.pth`` file is read from site directories only, never from the current directory.
- ``HOME``: Open MPI's ``opal_init`` refuses to start without it ("Unable to get the user home directory");
  when it is unset, children get the account's home directory from the password database
  (:func:`account_home`).

The launcher itself: the ``hermes`` script has its own directory (the environment's ``bin``) first on
``sys.path``, not the current one; ``python -m hermes`` has the current directory first, and its
``__main__`` removes it (:func:`drop_implicit_cwd`) before it imports anything else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping

__all__ = ["SAFE_FLAGS", "SCRUBBED", "python_command", "child_env", "account_home", "drop_implicit_cwd"]

#: the interpreter flags of every Python hermes starts: safe-path mode (no current or script directory on sys.path)
SAFE_FLAGS: tuple[str, ...] = ("-P",)
#: environment variables removed for the children: start-up hooks of interactive mode
SCRUBBED: tuple[str, ...] = ("PYTHONSTARTUP", "PYTHONINSPECT")


def python_command(*args: str, python: str | None = None) -> list[str]:
    """``[python, -P, *args]``: a Python that imports nothing from the current (or the script's) directory.

    ``python`` defaults to this interpreter (``sys.executable``).

    Examples
    --------
    >>> python_command("-m", "hermes.viz.draw_worker", python="/usr/bin/python3")
    ['/usr/bin/python3', '-P', '-m', 'hermes.viz.draw_worker']
    """
    return [python or sys.executable, *SAFE_FLAGS, *args]


def account_home() -> str | None:
    """The home directory of this process' user in the password database (None if it has no entry)."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir or None
    except (ImportError, KeyError, OSError):
        return None


def child_env(env: Mapping[str, str] | None = None, *, path: Iterable[str | os.PathLike] = ()) -> dict[str, str]:
    """The environment of a process hermes starts: ``env`` (default: this process') without :data:`SCRUBBED`,
    ``PYTHONPATH`` without empty entries and with the directories ``path`` appended (named explicitly, e.g. the
    repository root for a benchmark's ``-m benchmarks.x``), and ``HOME`` set if it was not (:func:`account_home`).

    Examples
    --------
    >>> child_env({"PYTHONPATH": ":plugins:", "PYTHONSTARTUP": "evil.py", "HOME": "/h"})
    {'PYTHONPATH': 'plugins', 'HOME': '/h'}
    """
    out = {k: v for k, v in (os.environ if env is None else env).items() if k not in SCRUBBED}
    entries = [p for p in out.pop("PYTHONPATH", "").split(os.pathsep) if p] + [os.fspath(p) for p in path]
    if entries:
        out["PYTHONPATH"] = os.pathsep.join(entries)
    if not out.get("HOME"):
        home = account_home()
        if home is not None:
            out["HOME"] = home
    return out


def _site_dirs() -> set[str]:
    import site
    import sysconfig

    dirs = {*getattr(site, "getsitepackages", list)(), sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    user = getattr(site, "getusersitepackages", lambda: None)()
    return {os.path.realpath(d) for d in (*dirs, user) if d}


def drop_implicit_cwd(path: list[str] | None = None) -> bool:
    """Remove the current directory that ``python -m``/``-c`` put first on ``path`` (default ``sys.path``).

    Nothing is removed in safe-path mode (``-P``, ``PYTHONSAFEPATH``: nothing was put there), when the entry is
    not the current directory, or when the current directory is a site or standard-library directory (the
    entry is then needed for itself). Returns whether an entry was removed.
    """
    path = sys.path if path is None else path
    if getattr(sys.flags, "safe_path", False) or not path:
        return False
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the directory was removed: '' then names nothing that can be imported
        return False
    first = path[0]
    if first != "" and os.path.realpath(first) != cwd:
        return False
    if cwd in _site_dirs():
        return False
    del path[0]
    return True
