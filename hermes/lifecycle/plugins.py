"""A scenario's plug-ins imported last, in a child process under a time limit: the launcher's check.

Importing a plug-in balancer runs its code: it may sleep for ever, call ``os._exit(0)``, or crash the
interpreter. The launcher (``hermes run``, ``hermes scenario``, :func:`hermes.run`) therefore validates the
scenario with plug-ins deferred (:func:`hermes.balance.registry.plugins_deferred`), runs every other check (the
files, the mesh, the run directory and its lock), and only then :func:`check_plugins`: the scenario's
``balancer`` section is validated again, plug-ins imported, by ``python -P -m hermes.lifecycle.plugins`` in a
session of its own, within ``run.timeout`` / ``--timeout`` seconds (default :data:`PLUGIN_LIMIT`). The child
answers on its standard output with a line that starts with a random token, so an answer is the child's and
not a plug-in's print; anything else is one line of hermes naming the plug-in and a non-zero exit:

- the check did not finish in time: ``plug-in 'X': importing and checking it did not finish within N s``
  (the child's whole session is killed);
- the child ended without answering: ``plug-in 'X': the process importing it ended with status S before the
  check finished`` (a ``sys.exit`` the registry could not catch, ``os._exit``), or ``was killed by signal``;
- the plug-in is broken: the registry's own line (``cannot import``, ``has no attribute``, a bad parameter).

Inside the MPI job, every rank imports the plug-ins again under the watchdog (:mod:`hermes.cli.run_mesh`).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time

from hermes.errors import BalancerError, HermesError
from hermes.interpreter import child_env, python_command
from hermes.sections import BalancerSpec

__all__ = ["PLUGIN_LIMIT", "plugin_names", "check_plugins", "main"]

#: seconds the plug-in check may take when neither ``run.timeout`` nor ``--timeout`` is given
PLUGIN_LIMIT = 60.0


def plugin_names(balancer: BalancerSpec) -> list[str]:
    """The names in the ``balancer`` section that are not built-in balancers: the algorithm and the parameter
    sections of other plug-ins (entry points, import paths), in that order."""
    from hermes.balance.registry import is_plugin

    names = [balancer.algorithm, *balancer.sections]
    return [n for i, n in enumerate(names) if is_plugin(n) and n not in names[:i]]


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the child's whole session (a plug-in may have started processes of its own)."""
    from hermes.runtime.launch import _kill_session

    _kill_session(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def check_plugins(balancer: BalancerSpec, timeout: float | None, *, what: str = "run.timeout, --timeout") -> None:
    """Validate ``balancer`` with its plug-ins imported, in a child process within ``timeout`` seconds
    (None: :data:`PLUGIN_LIMIT`); nothing to do (no process started) when it names no plug-in.

    Raises
    ------
    BalancerError
        One line naming the plug-in: the registry's verdict (cannot import, no such attribute, a bad parameter),
        or the check did not finish in time, or the child ended without answering (an exit, a signal).
    """
    names = plugin_names(balancer)
    if not names:
        return
    from hermes.runtime.launch import _die_with_parent
    from hermes.loaders import dump_yaml

    limit = PLUGIN_LIMIT if timeout is None else float(timeout)
    token = secrets.token_hex(8)
    doc = dump_yaml(balancer.model_dump(mode="python"), sort_keys=False)
    try:
        proc = subprocess.Popen(python_command("-m", "hermes.lifecycle.plugins", token), stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True,
                                start_new_session=True,
                                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    except OSError as err:
        raise BalancerError(f"plug-in {names[0]!r}: cannot start the process that checks it "
                            f"({err.strerror or err})") from None
    t0 = time.monotonic()
    try:
        out, err = proc.communicate(doc, timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a pipe still held by a process outside the session: give up on it
            pass
        source = f"{what}" if timeout is not None else f"the default {PLUGIN_LIMIT:g} s; set run.timeout or --timeout"
        raise BalancerError(f"plug-in {names[0]!r}: importing and checking it did not finish within {limit:g} s "
                            f"({source})") from None
    finally:
        if proc.poll() is None:
            _kill(proc)
            proc.wait()
    answers = [ln[len(token) + 1:] for ln in out.splitlines() if ln.startswith(token + " ")]
    if answers and answers[-1] == "ok":
        return
    if answers and answers[-1].startswith("error "):
        raise BalancerError(answers[-1][len("error "):])
    rc = proc.returncode
    if rc < 0:
        try:
            how = f"was killed by signal {-rc} ({signal.Signals(-rc).name})"
        except ValueError:
            how = f"was killed by signal {-rc}"
    else:
        how = f"ended with status {rc}"
    last = [ln.strip() for ln in err.splitlines() if ln.strip()][-1:]
    tail = f": {last[0][:200]}" if last else " (does it call sys.exit or os._exit when it is imported?)"
    raise BalancerError(f"plug-in {names[0]!r}: the process importing it {how} before the check finished, after "
                        f"{time.monotonic() - t0:.1f} s{tail}")


def main(argv: list[str] | None = None) -> int:
    """The child: the ``balancer`` section (YAML on standard input) validated with its plug-ins imported; the
    answer ``TOKEN ok`` or ``TOKEN error <line>`` on standard output (``TOKEN``: the first argument)."""
    from pydantic import ValidationError

    from hermes.errors import one_line, validation_message
    from hermes.loaders import parse_yaml

    argv = sys.argv[1:] if argv is None else argv
    token = argv[0]
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w")  # the answer's own descriptor: a plug-in may close stdout
    try:
        BalancerSpec.model_validate(parse_yaml(sys.stdin.read(), "the balancer section"))
    except ValidationError as err:
        answer = "error balancer." + validation_message(err, root="balancer")
    except HermesError as err:
        answer = f"error {err}"
    else:
        answer = "ok"
    out.write(f"{token} {one_line(answer)}\n")
    out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
