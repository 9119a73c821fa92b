"""The hosted communicator's values: requests, statuses, copies, reductions, the placement of processors."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from hermes.errors import RuntimeDefect
from hermes.runtime.ops import _apply, _fold, _op_name, _reduce_rows, waitall  # noqa: F401 (shared with plain)

__all__ = ["ANY_SOURCE", "ANY_TAG", "HostedError", "Request", "Status", "blocks", "waitall"]

ANY_SOURCE = -1
ANY_TAG = -1

_FROZEN = (type(None), bool, int, float, complex, str, bytes, np.generic)


class HostedError(RuntimeDefect):
    """A processor's code misused the hosted communicator (a hermes defect, never bad input; one line from the
    CLI, exit 1: :class:`hermes.errors.RuntimeDefect`)."""


def blocks(p: int, n: int) -> np.ndarray:
    """First processor of each of ``n`` processes hosting ``p`` processors (length n+1), as even as can be:
    the first ``p mod n`` processes host one more."""
    q, r = divmod(p, n)
    sizes = np.full(n, q, dtype=np.int64)
    sizes[:r] += 1
    return np.concatenate(([0], np.cumsum(sizes)))


def _frozen(x: Any, depth: int = 0) -> bool:
    """True for values nobody can change in place (shared by all receivers instead of copied)."""
    if isinstance(x, _FROZEN):
        return True
    if isinstance(x, tuple) and depth < 3:
        return all(_frozen(v, depth + 1) for v in x)
    return False


def _shareable(x: Any) -> bool:
    """A value point-to-point receivers may share instead of copying: immutable (:func:`_frozen`), a read-only
    array (:func:`_sealed`), or a tuple of such items (a message's stamp, sender and read-only body)."""
    return _frozen(x) or _sealed(x) or (isinstance(x, tuple) and all(_frozen(v) or _sealed(v) for v in x))


def _sealed(x: Any) -> bool:
    """A numpy array (not of objects) read-only down to the memory it views: no one can change it in place, so
    point-to-point receivers may share it (:meth:`hermes.runtime.hosting.HostedComm.isend`)."""
    if type(x) is not np.ndarray or x.dtype == object:
        return False
    while isinstance(x, np.ndarray):
        if x.flags.writeable:
            return False
        x = x.base
    return x is None


def _copy(x: Any) -> Any:
    """What a receiver gets of ``x``: ``x`` itself if nobody can change it, else a copy (as MPI's)."""
    if _frozen(x):
        return x
    if type(x) is np.ndarray and x.dtype != object:
        return x.copy()
    return copy.deepcopy(x)


def _copies(values: list) -> list:
    """A receiver's copy of a list of received values (one deep copy for all when some are containers)."""
    if all(_frozen(v) or (type(v) is np.ndarray and v.dtype != object) for v in values):
        return [_copy(v) for v in values]
    return copy.deepcopy(values)


def _into(buf, data: np.ndarray) -> None:
    """Copy ``data`` into the receive buffer ``buf`` (a numpy array; fewer elements allowed, as in MPI)."""
    flat = np.asarray(data).reshape(-1)
    if flat.dtype != buf.dtype:
        flat = np.frombuffer(flat.tobytes(), dtype=buf.dtype)
    if flat.size > buf.size:
        raise HostedError(f"message of {flat.size} elements into a buffer of {buf.size}")
    if buf.flags.c_contiguous:
        buf.reshape(-1)[: flat.size] = flat
    else:
        buf.flat[: flat.size] = flat


def _buffer(b) -> np.ndarray:
    """The numpy array of an mpi4py buffer argument (an array, or ``[array, datatype]``)."""
    if isinstance(b, (list, tuple)):
        b = b[0]
    if not isinstance(b, np.ndarray):
        raise HostedError(f"hosted buffers must be numpy arrays, not {type(b).__name__}")
    return b


class Status:
    """The source and tag of a matched message, and whether its request was cancelled (``MPI.Status``'s part hermes
    uses)."""

    def __init__(self) -> None:
        self.source, self.tag, self.count = ANY_SOURCE, ANY_TAG, 0
        self.cancelled = False

    def Is_cancelled(self) -> bool:
        return self.cancelled

    def Get_source(self) -> int:
        return self.source

    def Get_tag(self) -> int:
        return self.tag

    def Get_count(self, datatype=None) -> int:
        return self.count

    source_ = property(Get_source)


class Request:
    """A hosted request: a send is complete at once (its data is copied: sends are buffered); a receive when it is
    matched, or when it is cancelled before (:meth:`Cancel`)."""

    __slots__ = ("host", "rank", "done", "value", "buf", "source", "tag", "status_source", "status_tag", "send",
                 "cancelled")

    def __init__(self, host, rank: int, *, done=False, value=None, buf=None, source=ANY_SOURCE,
                 tag=ANY_TAG, send=False) -> None:
        self.host, self.rank, self.done, self.value, self.buf = host, rank, done, value, buf
        self.source, self.tag = source, tag
        self.status_source, self.status_tag = source, tag
        self.send, self.cancelled = send, False

    def _status(self, status) -> None:
        if status is not None:
            status.source, status.tag = self.status_source, self.status_tag
            status.cancelled = self.cancelled

    def Wait(self, status=None) -> bool:
        if not self.done:
            self.host.wait(self.rank, lambda: self.done)
        self._status(status)
        return True

    def wait(self, status=None):
        self.Wait(status)
        return self.value

    def Test(self, status=None) -> bool:
        """True if complete; a test that finds it incomplete does what a hosted ``Iprobe`` does (reads the
        envelopes that have reached this process, lets the others run once, reads them again)."""
        if not self.done:
            self.host.poll()
        if not self.done:
            self.host.pause(self.rank)
            self.host.poll()
        if self.done:
            self._status(status)
        return self.done

    def test(self, status=None):
        done = self.Test(status)
        return done, (self.value if done else None)

    def Free(self) -> None:
        pass

    def Cancel(self) -> None:
        """Cancel a posted receive that no message has matched: it is withdrawn (a message sent later goes to the
        next matching receive) and completes at once, its status cancelled (``Wait(status)``, then
        ``status.Is_cancelled()``; ``Test_cancelled`` in MPI's C names).

        Raises
        ------
        HostedError
            One line: cancelling a send (hosted sends are buffered: complete as soon as they are made, nothing is
            left to cancel) or a receive that has completed (matched or already cancelled).
        """
        if self.send:
            raise HostedError(f"processor {self.rank} cancels a send: hosted sends are buffered and complete at "
                              f"once, nothing is left to cancel")
        if self.done:
            raise HostedError(f"processor {self.rank} cancels a receive that has completed "
                              f"({'cancelled' if self.cancelled else 'matched'} already)")
        self.host.withdraw(self.rank, self)
        self.done = self.cancelled = True
        self.status_source, self.status_tag = ANY_SOURCE, ANY_TAG


_TABLE: list = []  # (the contributions, their directory table): built once for all processes' answers


def _directory(full: list, lo: int, hi: int) -> list:
    """The owner of every cell processors ``lo..hi-1`` ask for, from every processor's (owned, asked) cell
    ids; each answer is (owners, -1 where nobody owns the cell; True if a cell is owned twice or an asked one
    by nobody, anywhere)."""
    if not _TABLE or _TABLE[0] is not full:
        gids = np.concatenate([np.asarray(g, dtype=np.int64) for g, _ in full]) if full else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(full), dtype=np.int64), [len(g) for g, _ in full])
        srt = np.argsort(gids, kind="stable")
        gids, owner = gids[srt], owner[srt]
        dup = bool(gids.size > 1 and np.any(gids[1:] == gids[:-1]))
        answers = []
        for _, q in full:
            q = np.asarray(q, dtype=np.int64)
            pos = np.minimum(np.searchsorted(gids, q), max(gids.size - 1, 0))
            ok = (gids[pos] == q) if gids.size else np.zeros(q.size, bool)
            answers.append((np.where(ok, owner[pos] if gids.size else -1, -1), bool(np.any(~ok))))
        bad = dup or any(m for _, m in answers)
        _TABLE[:] = [full, [(a, bad) for a, _ in answers]]
    return _TABLE[1][lo:hi]


_ANY: dict[str, int] = {}


def _any(name: str) -> int:
    if not _ANY:
        from mpi4py import MPI

        _ANY.update(ANY_SOURCE=int(MPI.ANY_SOURCE), ANY_TAG=int(MPI.ANY_TAG))
    return _ANY[name]


def _src(source) -> int:
    source = int(source)
    return ANY_SOURCE if source in (ANY_SOURCE, _any("ANY_SOURCE")) else source


def _tag(tag) -> int:
    tag = int(tag)
    return ANY_TAG if tag in (ANY_TAG, _any("ANY_TAG")) else tag
