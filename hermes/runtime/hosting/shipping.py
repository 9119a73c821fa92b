"""Read-only arrays sent point to point to another process: shipped once per pair of processes while the
receiving process keeps them, referred to after that.

A processor that sends a read-only array (:func:`~hermes.runtime.hosting.values._sealed`) to a co-hosted one shares
it (:meth:`hermes.runtime.hosting.HostedComm.isend`); sent to processors of another process, each envelope carried
its own pickled copy and each receiver kept its own. A message passed on down a tree over the processors — the end
of Grapevine's token stage, every move of the stage, to all p of them — then crossed the processes once per
processor of the other side: p/2 copies of every move in flight and held there (4,096 processors: 6.7 GiB in one
process). Here the sending process ships such an array (of at least :data:`MIN_BYTES`) once, under a key; the
receiving process keeps it, read-only, in a table of the last :data:`KEEP` arrays shipped from that process, and a
later envelope carrying the same array refers to it by its key. The sender mirrors the receiver's table (the
envelopes of a pair of processes are received in the order they were sent, and both sides update the table by the
same rule), so it refers only to an array the receiver still holds, and nothing else needs saying between them.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from hermes.runtime.hosting.values import _sealed

__all__ = ["Shipping", "MIN_BYTES", "KEEP"]

#: a read-only array smaller than this travels in its envelope as any other value
MIN_BYTES = 4096
#: the arrays shipped from one process that another keeps (and that the sender mirrors)
KEEP = 8


class _Ship:
    """An array shipped under ``key`` (the receiver keeps it)."""

    __slots__ = ("key", "array")

    def __init__(self, key: int, array: np.ndarray) -> None:
        self.key, self.array = key, array

    def __reduce__(self):
        return _Ship, (self.key, self.array)


class _Ref:
    """The array shipped earlier under ``key``."""

    __slots__ = ("key",)

    def __init__(self, key: int) -> None:
        self.key = key

    def __reduce__(self):
        return _Ref, (self.key,)


def _big(v: Any) -> bool:
    return _sealed(v) and v.nbytes >= MIN_BYTES


class Shipping:
    """One process' shipping tables: what it shipped to each other process (keys in the receiver's table order, and
    which array each key is), and what it keeps of what each other process shipped to it."""

    def __init__(self) -> None:
        self.next = 0
        self.held: dict[int, OrderedDict[int, None]] = {}  # destination process: the keys it keeps, oldest first
        self.ids: dict[int, dict[int, tuple[weakref.ref, int]]] = {}  # destination: id(array) -> (array, key)
        self.idof: dict[int, dict[int, int]] = {}  # destination: key -> id(array)
        self.kept: dict[int, OrderedDict[int, np.ndarray]] = {}  # source process: key -> array, oldest first

    # -- sending ---------------------------------------------------------------------------------------------
    def pack(self, process: int, payload: tuple[str, Any]) -> tuple[str, Any]:
        """The envelope's payload ``(kind, value)`` for ``process``: a large read-only array in ``value`` (or among
        the items of a tuple ``value``) replaced by its shipment or its reference."""
        kind, value = payload
        if kind != "value":
            return payload
        if _big(value):
            return kind, self._one(process, value)
        if type(value) is tuple and any(_big(v) for v in value):
            return kind, tuple(self._one(process, v) if _big(v) else v for v in value)
        return payload

    def _one(self, process: int, array: np.ndarray):
        held = self.held.setdefault(process, OrderedDict())
        ids = self.ids.setdefault(process, {})
        idof = self.idof.setdefault(process, {})
        hit = ids.get(id(array))
        if hit is not None and hit[0]() is array and hit[1] in held:
            held.move_to_end(hit[1])
            return _Ref(hit[1])
        key = self.next
        self.next += 1
        held[key] = None
        ids[id(array)] = (weakref.ref(array), key)
        idof[key] = id(array)
        if len(held) > KEEP:
            old, _ = held.popitem(last=False)
            i = idof.pop(old)
            if ids.get(i, (None, None))[1] == old:
                del ids[i]
        return _Ship(key, array)

    # -- receiving -------------------------------------------------------------------------------------------
    def unpack(self, process: int, payload: tuple[str, Any]) -> tuple[str, Any]:
        """The payload of an envelope from ``process`` with its shipments kept and its references resolved (in
        the order :meth:`pack` made them)."""
        kind, value = payload
        if kind != "value":
            return payload
        t = type(value)
        if t is _Ship or t is _Ref:
            return kind, self._resolve(process, value)
        if t is tuple and any(type(v) is _Ship or type(v) is _Ref for v in value):
            return kind, tuple(self._resolve(process, v) if type(v) in (_Ship, _Ref) else v for v in value)
        return payload

    def _resolve(self, process: int, item) -> np.ndarray:
        kept = self.kept.setdefault(process, OrderedDict())
        if type(item) is _Ref:
            kept.move_to_end(item.key)
            return kept[item.key]
        array = np.array(item.array, copy=True)  # its own memory, read-only: the receivers share it
        array.flags.writeable = False
        kept[item.key] = array
        if len(kept) > KEEP:
            kept.popitem(last=False)
        return array
