"""Progress for a person who waits: events as lines, and never a silence longer than a few seconds.

One :class:`Progress` per command. :meth:`~Progress.line` says an event (a phase done, a run finished): a line
of its own, always. :meth:`~Progress.status` names what is happening now (``phase 3/8: balancing, round 2``);
while nothing else is said, it is repeated with its elapsed time every ``every`` seconds (5 by default) by a
daemon thread, so a long step is never silent. On a terminal (``stream.isatty()``) the status is a live line
drawn by `rich <https://rich.readthedocs.io>`_ (a spinner, the elapsed time and, for a counted step, a bar)
under the lines said; anywhere else — a pipe, a file, a job's log, ``mpiexec``'s forwarded output — plain lines
only, so a log stays readable and grep-able.

Progress never touches results: it reads nothing back, and the numbers it prints are wall-clock times, kept
out of every file a run writes.

Examples
--------
>>> import io
>>> out = io.StringIO()
>>> with Progress(out.write, every=60) as p:
...     p.line("phase 1 done")
...     p.status("phase 2: balancing")
>>> print(out.getvalue().strip())
phase 1 done
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress", "quiet", "using", "wanted", "clock", "EVERY", "default_every"]

#: the longest silence of a step in progress (seconds) when the output is not a terminal
EVERY = 5.0


def default_every() -> float:
    """The silence after which a status is repeated: ``HERMES_PROGRESS_EVERY`` (seconds, a positive number) if
    set — a test's way to see the repetition without waiting — else :data:`EVERY`."""
    try:
        every = float(os.environ.get("HERMES_PROGRESS_EVERY", ""))
    except ValueError:
        return EVERY
    return every if 0 < every < 3600 else EVERY


def clock(seconds: float) -> str:
    """Wall seconds as a person reads them: ``m:ss``, or ``h:mm:ss`` from an hour (compare's elapsed and ETA)."""
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def _elapsed(seconds: float) -> str:
    """A step's elapsed time: ``N s`` under a minute, else :func:`clock`."""
    return f"{int(round(seconds))} s" if seconds < 59.5 else clock(seconds)


class Progress:
    """Lines and a repeated status for one command.

    Parameters
    ----------
    say : callable or None
        Where plain lines go (default: ``print`` to ``stream``, flushed). A line is given without its newline
        when ``say`` is a stream's ``write``-like callable named ``write`` (one newline is added).
    stream : file, optional
        The terminal test and rich's console (default ``sys.stdout``).
    every : float, optional
        Seconds of silence after which the status is repeated (plain output; default :func:`default_every`).
    live : bool, optional
        Force (True) or forbid (False) the live terminal line; default: ``stream.isatty()``.
    enabled : bool
        False: nothing is said at all (``--quiet``, ``progress=False``).

    Notes
    -----
    A Progress is also a callable that says a line (``p("phase 1 done")`` is ``p.line("phase 1 done")``), so it
    goes wherever a line printer is expected. The repeating thread is an OS thread that only formats and writes
    text: code that must not be entered from another thread (MPI, a hosted processor's scheduler) is never
    reached from it.
    """

    def __init__(self, say: Callable[[str], Any] | None = None, *, stream: TextIO | None = None,
                 every: float | None = None, live: bool | None = None, enabled: bool = True):
        self.stream = stream if stream is not None else sys.stdout
        self.enabled = enabled
        self.every = default_every() if every is None else every
        self._say = say
        self._lock = threading.Lock()
        self._status: str | None = None
        self._since = time.monotonic()
        self._last = time.monotonic()
        self._done: tuple[int, int] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.live = enabled and (tty if live is None else live) and say is None
        self._rich: Any = None

    # -- output --------------------------------------------------------------------------------------------------
    def _emit(self, text: str) -> None:
        if self._say is not None:
            if getattr(self._say, "__name__", "") == "write":
                self._say(text + "\n")
            else:
                self._say(text)
        elif self._rich is not None:
            self._rich.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, file=self.stream, flush=True)

    def line(self, text: str) -> None:
        """An event: a line of its own (and the silence clock restarts)."""
        if not self.enabled:
            return
        with self._lock:
            self._emit(text)
            self._last = time.monotonic()

    __call__ = line

    def status(self, text: str | None, done: int | None = None, total: int | None = None) -> None:
        """What is happening now (None: nothing); ``done`` of ``total`` for a counted step. Said again, with its
        elapsed time, after every ``every`` seconds of silence; on a terminal shown at once on the live line."""
        if not self.enabled:
            return
        with self._lock:
            if text != self._status:
                self._since = time.monotonic()
            self._status = text
            self._done = (done, total) if done is not None and total else None
            if self._rich is not None:
                self._live_update()

    def _status_text(self) -> str | None:
        if self._status is None:
            return None
        text = self._status
        if self._done is not None:
            text += f" ({self._done[0]}/{self._done[1]})"
        return f"{text} … {_elapsed(time.monotonic() - self._since)}"

    # -- the repeating thread ------------------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(min(0.25, self.every / 4)):
            with self._lock:
                if self._rich is not None:
                    self._live_update()
                    continue
                if self._status is None or time.monotonic() - self._last < self.every:
                    continue
                self._emit(self._status_text() or "")
                self._last = time.monotonic()

    def _live_update(self) -> None:
        progress, task = self._rich_task
        total = self._done[1] if self._done else None
        progress.update(task, description=self._status or "", total=total,
                        completed=self._done[0] if self._done else 0, visible=self._status is not None)

    # -- context -------------------------------------------------------------------------------------------------
    def start(self) -> "Progress":
        if not self.enabled or self._thread is not None:
            return self
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, Progress as RichProgress, SpinnerColumn, TextColumn, TimeElapsedColumn

            console = Console(file=self.stream)
            self._rich = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                      TimeElapsedColumn(), console=console, transient=True)
            self._rich_task = (self._rich, self._rich.add_task("", total=None, visible=False))
            self._rich.start()
        self._thread = threading.Thread(target=self._beat, name="hermes-progress", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
        if self._rich is not None:
            self._rich.stop()
            self._rich = None

    def __enter__(self) -> "Progress":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def quiet() -> Progress:
    """A Progress that says nothing."""
    return Progress(enabled=False)


def using(say: "Progress | Callable[[str], Any] | None") -> contextlib.AbstractContextManager["Progress"]:
    """A Progress over ``say`` for a ``with`` block: ``say`` itself if it is one (its owner starts and closes it),
    a new one writing through ``say`` (started for the block: its status repeated) if it is a line printer, a
    silent one if it is None."""
    if isinstance(say, Progress):
        return contextlib.nullcontext(say)
    return Progress(say) if say is not None else contextlib.nullcontext(quiet())


def wanted(progress: bool, quiet: bool | None, where: str) -> bool:
    """Whether a Python entry point (``where``: ``hermes.run``) shows its progress: ``progress``, unless the
    deprecated ``quiet`` is given (then ``not quiet``, with a DeprecationWarning naming ``progress=False``;
    ``quiet=`` is accepted for one release)."""
    if quiet is None:
        return bool(progress)
    warnings.warn(f"{where}(quiet=...) is deprecated and will be removed in the next release: use "
                  f"{where}(progress=False) for silence ({where} shows its progress by default)",
                  DeprecationWarning, stacklevel=3)
    return not quiet
