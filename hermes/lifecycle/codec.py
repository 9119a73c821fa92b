"""A rank's state as data: the codec of a checkpoint file (:mod:`hermes.lifecycle.checkpoint`).

:class:`Encoder` walks a state object into a JSON tree and a list of numpy arrays; :class:`Decoder` rebuilds
it without running code from the file (no pickle, no class named by the file outside hermes, no ``__init__``
of a record). :func:`encode_file` packs the tree and the arrays into a deterministic ``.npz`` (stored entries,
fixed time stamps) and :func:`unpack` reads one back, checking that it is byte for byte the file this hermes
writes for what it holds. What the tree may hold is listed in :mod:`hermes.lifecycle.checkpoint`.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import importlib
import inspect
import io
import json
import math
import re
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from hermes.runtime.comm import Bookkeeping
from hermes.errors import HermesError
from hermes.loaders import json_depth

__all__ = ["Encoder", "Decoder", "Unsaveable", "Bad", "encode_file", "unpack", "MAX_NESTING", "MAX_DEPTH"]

#: containers nested in a state (a RunState is about 8 deep); the JSON document is at most 3 levels per
#: container deeper
MAX_NESTING = 100
MAX_DEPTH = 3 * MAX_NESTING + 10
#: the one array entry holding the JSON document
_TREE = "tree"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_KINDS = "(checkpoints hold arrays, numbers, strings, lists, mappings and hermes' own records)"

# -- the state as a tree of JSON and arrays --------------------------------------------------------------------
class Unsaveable(Exception):
    """What the state holds that a checkpoint cannot (``where`` in the state, ``what`` it is)."""

    def __init__(self, where: str, what: str, tail: str = _KINDS):
        where = where if len(where) <= 160 else f"{where[:70]}…{where[-70:]}"
        super().__init__(f"{where} holds {what}" + (f" {tail}" if tail else ""))


class Bad(Exception):
    """A rank file's document is not what hermes writes (one line: what is wrong)."""


def _type_name(obj: Any) -> str:
    t = type(obj)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _is_hermes(cls: type) -> bool:
    return cls.__module__.startswith("hermes.") and "<" not in cls.__qualname__


def _cached(cls: type) -> frozenset[str]:
    """Names of ``cls``' cached properties (their caches in ``__dict__`` are not state)."""
    return frozenset(name for k in cls.__mro__ for name, v in vars(k).items()
                     if isinstance(v, functools.cached_property))


def _attributes(obj: Any) -> dict[str, Any]:
    """An object's attributes: its dataclass fields (in order), then any other instance attribute."""
    out = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)} if dataclasses.is_dataclass(obj) else {}
    skip = _cached(type(obj))
    out.update((k, v) for k, v in getattr(obj, "__dict__", {}).items() if k not in out and k not in skip)
    return out


@functools.cache
def _allow_list() -> dict[type, Callable[[Any], dict[str, Any]]]:
    """The classes of hermes that are not dataclasses but may be saved, each with what of it is saved (the
    reading side sets the same attributes on an object made by ``object.__new__``)."""
    from hermes.adaptation import Adapter
    from hermes.runtime.clock import VirtualClock, WallClock

    return {Bookkeeping: _attributes, VirtualClock: _attributes, WallClock: _attributes, Adapter: _attributes}


#: the bit generators a Generator may use, by the name its ``.state`` gives
_BIT_GENERATORS = {c.__name__: c for c in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937,
                                           np.random.Philox, np.random.SFC64)}
#: numpy scalar kinds stored by dtype and bytes
_SCALAR = re.compile(r"[<>|=][biufcUSmM]\d{1,4}(\[\w{1,4}\])?")


def _plain_key(k: Any) -> bool:
    """A dict key or set element read back without calling any class' ``__hash__``."""
    if k is None or type(k) in (bool, int, float, str, bytes) or (isinstance(k, np.generic) and not
                                                                  isinstance(k, np.object_)):
        return True
    return type(k) in (tuple, frozenset) and all(_plain_key(x) for x in k)


class Encoder:
    """Writes a state as a JSON tree plus arrays (see the module docstring)."""

    def __init__(self, refs: dict[str, Any]):
        self.refs = {id(obj): name for name, obj in refs.items()
                     if not (obj is None or type(obj) in (bool, int, float, str))}
        self.numbers: dict[int, int] = {}
        self.alive: list[Any] = list(refs.values())  # keeps every numbered object's id unique while encoding
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, obj: Any, where: str, depth: int = 0) -> Any:
        if depth > MAX_NESTING:
            raise Unsaveable(where, f"containers nested more than {MAX_NESTING} deep", "")
        if id(obj) in self.refs:
            return {"ref": self.refs[id(obj)]}
        t = type(obj)
        if obj is None or t in (bool, str):
            return obj
        if t is int:
            if obj.bit_length() > 8192:
                raise Unsaveable(where, f"an integer of {obj.bit_length()} bits", "")
            return obj
        if t is float:
            return obj if math.isfinite(obj) else {"float": struct.pack("<d", obj).hex()}
        if t is bytes:
            return {"bytes": base64.b64encode(obj).decode("ascii")}
        if isinstance(obj, np.generic) and _SCALAR.fullmatch(obj.dtype.str):
            return {"scalar": obj.dtype.str, "hex": obj.tobytes().hex()}
        sub = functools.partial(self, depth=depth + 1)
        if t is tuple:
            return {"tuple": [sub(x, f"{where}[{i}]") for i, x in enumerate(obj)]}
        if t is frozenset:
            return {"frozenset": [sub(x, f"{where} (an element)") for x in self._keys(obj, where)]}
        if id(obj) in self.numbers:
            return {"same": self.numbers[id(obj)]}
        n = self.numbers[id(obj)] = len(self.numbers)
        self.alive.append(obj)
        if t is list:
            return {"list": [sub(x, f"{where}[{i}]") for i, x in enumerate(obj)], "@": n}
        if t is set:
            return {"set": [sub(x, f"{where} (an element)") for x in self._keys(obj, where)], "@": n}
        if t is dict:
            self._keys(obj, where)
            if all(type(k) is str for k in obj):
                return {"map": {k: sub(v, f"{where}[{k!r}]") for k, v in obj.items()}, "@": n}
            return {"dict": [[sub(k, f"{where} (a key)"), sub(v, f"{where}[{k!r}]")] for k, v in obj.items()],
                    "@": n}
        if t is np.ndarray:
            if obj.dtype.hasobject:
                raise Unsaveable(where, "an array of Python objects (dtype object)")
            name = f"a{len(self.arrays)}"
            self.arrays[name] = obj
            return {"array": name, "@": n}
        if t is np.random.Generator:
            return {"generator": sub(obj.bit_generator, f"{where}.bit_generator"), "@": n}
        if t in _BIT_GENERATORS.values():
            seq = obj.seed_seq if type(obj.seed_seq) is np.random.SeedSequence else None
            return {"bit_generator": t.__name__, "state": sub(obj.state, f"{where}.state"),
                    "seed_seq": sub(seq, f"{where}.seed_seq"), "@": n}
        if t is np.random.SeedSequence:
            attrs = {k: getattr(obj, k) for k in ("entropy", "spawn_key", "pool_size", "n_children_spawned")}
            return {"seed_sequence": {k: sub(v, f"{where}.{k}") for k, v in attrs.items()}, "@": n}
        if isinstance(obj, BaseModel) and _is_hermes(t):
            return {"model": _class_name(t), **self._model(obj, where, sub), "@": n}
        attrs = self._allowed(obj) if _is_hermes(t) and t.__new__ is object.__new__ else None
        if attrs is None:
            raise Unsaveable(where, f"a {_type_name(obj)}")
        return {"object": _class_name(t), "attrs": {k: sub(v, f"{where}.{k}") for k, v in attrs.items()}, "@": n}

    @staticmethod
    def _keys(obj, where: str):
        for k in obj:
            if not _plain_key(k):
                raise Unsaveable(where, f"a key or element that is a {_type_name(k)} (keys are numbers, strings, "
                                         f"bytes or tuples of those)", "")
        return obj

    @staticmethod
    def _allowed(obj) -> dict[str, Any] | None:
        t = type(obj)
        if t in _allow_list():
            return _allow_list()[t](obj)
        if dataclasses.is_dataclass(obj):
            return _attributes(obj)
        return None

    @staticmethod
    def _model(obj: BaseModel, where: str, sub) -> dict[str, Any]:
        """A pydantic model's JSON form and its excluded fields (the scenario's ``base_dir``); it must read
        back equal."""
        t = type(obj)
        data = obj.model_dump(mode="json")
        excluded = {k: getattr(obj, k) for k, f in t.model_fields.items() if f.exclude}
        try:
            same = t.model_validate({**data, **excluded}) == obj
        except (ValueError, HermesError):
            same = False
        if not same:
            raise Unsaveable(where, f"a {_type_name(obj)} that does not read back from its JSON form", "")
        return {"json": data, "excluded": {k: sub(v, f"{where}.{k}") for k, v in excluded.items()}}


def _class_name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


_CLASS = re.compile(r"(hermes(?:\.(?!__)[A-Za-z_]\w*)+):((?!__)[A-Za-z_]\w*(?:\.(?!__)[A-Za-z_]\w*)*)")
_NAME = re.compile(r"(?!__)[A-Za-z_]\w*")


def _resolve(name: Any, want: str) -> type:
    """The hermes class ``name`` ("module:Qualified.Name") of kind ``want`` (``object``: an allow-listed class or
    a dataclass; ``model``: a pydantic model). Imports only modules of the hermes package."""
    m = _CLASS.fullmatch(name) if type(name) is str else None
    if m is None:
        raise Bad(f"a class outside hermes: {str(name)[:80]!r}")
    module, qualname = m.groups()
    try:
        obj = sys.modules.get(module) or importlib.import_module(module)
    except ImportError:
        raise Bad(f"a class of {module}, a module this hermes does not have") from None
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part, None)
    if not isinstance(obj, type) or obj.__module__ != module or obj.__qualname__ != qualname:
        raise Bad(f"{name}, which is not a class of this hermes")
    if want == "model" and issubclass(obj, BaseModel):
        return obj
    if want == "object" and not issubclass(obj, BaseModel) and obj.__new__ is object.__new__ and (
            obj in _allow_list() or dataclasses.is_dataclass(obj)):
        return obj
    raise Bad(f"{name}, a class a checkpoint does not hold")


class Decoder:
    """Reads the tree :class:`Encoder` wrote (every node checked; any surprise is :class:`Bad`)."""

    #: the keys of each kind of node (its tag first)
    NODES = {"float": {"float"}, "bytes": {"bytes"}, "scalar": {"scalar", "hex"}, "tuple": {"tuple"},
             "frozenset": {"frozenset"}, "same": {"same"}, "ref": {"ref"}, "list": {"list", "@"},
             "set": {"set", "@"}, "map": {"map", "@"}, "dict": {"dict", "@"}, "array": {"array", "@"},
             "generator": {"generator", "@"}, "bit_generator": {"bit_generator", "state", "seed_seq", "@"},
             "seed_sequence": {"seed_sequence", "@"}, "model": {"model", "json", "excluded", "@"},
             "object": {"object", "attrs", "@"}}

    def __init__(self, arrays: dict[str, np.ndarray], refs: dict[str, Any] | None):
        self.arrays, self.refs = arrays, refs
        self.objects: dict[int, Any] = {}
        self.used: set[str] = set()

    def _new(self, node: dict, obj: Any) -> Any:
        n = node["@"]
        if type(n) is not int or n in self.objects:
            raise Bad(f"a bad object number {str(n)[:20]}")
        self.objects[n] = obj
        return obj

    def _list(self, node: dict, tag: str) -> list:
        items = node[tag]
        if type(items) is not list:
            raise Bad(f"a {tag} node without its list")
        return items

    def _key(self, node: Any) -> Any:
        k = self(node)
        if not _plain_key(k):
            raise Bad("a key that is not a number, string, bytes or tuple of those")
        return k

    def __call__(self, node: Any) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is not dict:
            raise Bad("a bare JSON list")
        tag = next((k for k in self.NODES if k in node), None)
        if tag is None or set(node) != self.NODES[tag]:
            raise Bad(f"an unknown node {sorted(node)[:4]}")
        return self.READERS[tag](self, node)

    # -- one reader per kind of node (its keys checked by __call__) ------------------------------------------
    def _read_float(self, node: dict) -> float:
        value = node["float"]
        raw = bytes.fromhex(value) if type(value) is str and len(value) == 16 else b""
        if len(raw) != 8:
            raise Bad("a bad float")
        return struct.unpack("<d", raw)[0]

    def _read_bytes(self, node: dict) -> bytes:
        if type(node["bytes"]) is not str:
            raise Bad("bad bytes")
        return base64.b64decode(node["bytes"], validate=True)

    def _read_scalar(self, node: dict) -> np.generic:
        value = node["scalar"]
        if type(value) is not str or not _SCALAR.fullmatch(value) or type(node["hex"]) is not str:
            raise Bad("a bad numpy scalar")
        dtype, raw = np.dtype(value), bytes.fromhex(node["hex"])
        if dtype.hasobject or len(raw) != dtype.itemsize:
            raise Bad("a bad numpy scalar")
        return np.frombuffer(raw, dtype=dtype, count=1)[0]

    def _read_tuple(self, node: dict) -> tuple:
        return tuple(self(x) for x in self._list(node, "tuple"))

    def _read_frozenset(self, node: dict) -> frozenset:
        return frozenset(self._key(x) for x in self._list(node, "frozenset"))

    def _read_same(self, node: dict) -> Any:
        value = node["same"]
        if type(value) is not int or value not in self.objects:
            raise Bad("a reference to an object not read before")
        return self.objects[value]

    def _read_ref(self, node: dict) -> Any:
        value = node["ref"]
        if type(value) is not str or not _NAME.fullmatch(value):
            raise Bad("a bad reference")
        if self.refs is None:
            return _Placeholder(value)
        if value not in self.refs:
            raise Bad(f"a reference to {value!r}, which this hermes does not supply")
        return self.refs[value]

    def _read_list(self, node: dict) -> list:
        out = self._new(node, [])
        out.extend(self(x) for x in self._list(node, "list"))
        return out

    def _read_set(self, node: dict) -> set:
        out = self._new(node, set())
        out.update(self._key(x) for x in self._list(node, "set"))
        return out

    def _read_map(self, node: dict) -> dict:
        """A dict with string keys (JSON's own mapping)."""
        if type(node["map"]) is not dict:
            raise Bad("a map without its mapping")
        out = self._new(node, {})
        out.update((k, self(v)) for k, v in node["map"].items())
        return out

    def _read_dict(self, node: dict) -> dict:
        """A dict with other keys: a list of (key, value) pairs."""
        out = self._new(node, {})
        for pair in self._list(node, "dict"):
            if type(pair) is not list or len(pair) != 2:
                raise Bad("a dict entry that is not a pair")
            out[self._key(pair[0])] = self(pair[1])
        return out

    def _read_array(self, node: dict) -> np.ndarray:
        value = node["array"]
        if type(value) is not str or value not in self.arrays or value in self.used:
            raise Bad(f"a reference to a missing array {str(value)[:20]}")
        self.used.add(value)
        return self._new(node, self.arrays[value])

    def _read_generator(self, node: dict) -> np.random.Generator:
        bits = self(node["generator"])
        if type(bits) not in _BIT_GENERATORS.values():
            raise Bad("a random generator without its bit generator")
        return self._new(node, np.random.Generator(bits))

    def _read_seed_sequence(self, node: dict) -> np.random.SeedSequence:
        value = node["seed_sequence"]
        if type(value) is not dict or set(value) != {"entropy", "spawn_key", "pool_size", "n_children_spawned"}:
            raise Bad("a bad seed sequence")
        args = {k: self(v) for k, v in value.items()}
        if type(args["pool_size"]) is not int or not 4 <= args["pool_size"] <= 1024:
            raise Bad("a bad seed sequence pool size")
        return self._new(node, np.random.SeedSequence(**args))

    def _read_model(self, node: dict) -> BaseModel:
        cls = _resolve(node["model"], "model")
        if type(node["excluded"]) is not dict or type(node["json"]) is not dict:
            raise Bad("a bad model node")
        excluded = {k: self(v) for k, v in node["excluded"].items()}
        return self._new(node, cls.model_validate({**node["json"], **excluded}))

    def _bit_generator(self, node: dict) -> Any:
        cls = _BIT_GENERATORS.get(node["bit_generator"]) if type(node["bit_generator"]) is str else None
        if cls is None:
            raise Bad(f"an unknown bit generator {str(node['bit_generator'])[:20]!r}")
        seq = self(node["seed_seq"])
        if seq is not None and type(seq) is not np.random.SeedSequence:
            raise Bad("a bit generator with a bad seed sequence")
        bits = cls(seq) if seq is not None else cls()
        bits.state = self(node["state"])
        return self._new(node, bits)

    def _object(self, node: dict, cls: type) -> Any:
        attrs = node["attrs"]
        if type(attrs) is not dict:
            raise Bad("an object without its attributes")
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        if missing := fields - set(attrs):
            raise Bad(f"a {cls.__qualname__} without {sorted(missing)[0]}")
        cached = _cached(cls)
        for k in attrs:
            if not _NAME.fullmatch(k) or (k not in fields and (hasattr(cls, k) or k in cached)):
                raise Bad(f"a {cls.__qualname__} with a bad attribute {k[:40]!r}")
        obj = self._new(node, object.__new__(cls))
        for k, v in attrs.items():
            object.__setattr__(obj, k, self(v))
        return obj

    def _read_object(self, node: dict) -> Any:
        return self._object(node, _resolve(node["object"], "object"))

    #: the reader of each kind of node (:attr:`NODES`)
    READERS = {"float": _read_float, "bytes": _read_bytes, "scalar": _read_scalar, "tuple": _read_tuple,
               "frozenset": _read_frozenset, "same": _read_same, "ref": _read_ref, "list": _read_list,
               "set": _read_set, "map": _read_map, "dict": _read_dict, "array": _read_array,
               "generator": _read_generator, "bit_generator": _bit_generator, "seed_sequence": _read_seed_sequence,
               "model": _read_model, "object": _read_object}


@dataclass(frozen=True)
class _Placeholder:
    """A reference by name, when a file is verified without the objects it refers to."""

    name: str


# -- a rank's file -------------------------------------------------------------------------------------------
def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _pack(members: list[tuple[str, bytes]]) -> bytes:
    """The ``.npz`` of ``(name, .npy bytes)`` members, deterministically (stored, fixed time stamps)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, raw in members:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_ZIP_TIME)
            info.create_system, info.external_attr = 3, 0o644 << 16
            zf.writestr(info, raw)
    return buf.getvalue()


def encode_file(doc: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    try:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    except ValueError as err:  # a model's JSON form with NaN, or a header entry that is not JSON
        raise Unsaveable("the document", f"a value JSON cannot hold ({err})", "") from None
    if json_depth(text) > MAX_DEPTH:
        raise Unsaveable("the document", f"values nested more than {MAX_DEPTH} levels deep", "")
    return _pack([(_TREE, _npy(np.frombuffer(text, dtype=np.uint8))), *((k, _npy(a)) for k, a in arrays.items())])


def _read_npy(raw: bytes, name: str) -> np.ndarray:
    """One ``.npy`` entry: its header checked before anything is allocated, no object dtype, read by
    ``np.load(..., allow_pickle=False)``, and byte for byte what hermes writes for it."""
    fp = io.BytesIO(raw)
    version = np.lib.format.read_magic(fp)
    if version not in ((1, 0), (2, 0)):
        raise Bad(f"entry {name}: .npy version {version}")
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(fp)
    if dtype.hasobject:
        raise Bad(f"entry {name} is an array of Python objects (pickled), refused")
    if math.prod(shape) * dtype.itemsize != len(raw) - fp.tell():
        raise Bad(f"entry {name}: its size differs from its header's")
    arr = np.load(io.BytesIO(raw), allow_pickle=False)
    if type(arr) is not np.ndarray or _npy(arr) != raw:
        raise Bad(f"entry {name} is not as hermes writes it")
    return arr


def unpack(data: bytes) -> tuple[bytes, dict[str, np.ndarray]]:
    """(the JSON document, the arrays by name) of a rank file's bytes; :class:`Bad` if it is not exactly a
    file hermes writes."""
    if data[:4] != b"PK\x03\x04":
        raise Bad("not an .npz file" + (" (a pickle)" if data[:1] == b"\x80" else ""))
    try:  # the bytes may be anything: zipfile and numpy raise many kinds of error on them
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            infos = npz.zip.infolist()
            names = [_TREE, *(f"a{i}" for i in range(len(infos) - 1))]
            if [i.filename for i in infos] != [f"{n}.npy" for n in names]:
                raise Bad("its entries are not tree, a0, a1, …")
            if sum(max(i.file_size, i.compress_size) for i in infos) > len(data):
                raise Bad("its entries overlap")
            members = []
            for info, name in zip(infos, names):
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data):
                    raise Bad(f"entry {name} is not stored as hermes writes it")
                members.append((name, npz.zip.read(info)))  # checks the entry's CRC-32
        arrays = {name: _read_npy(raw, name) for name, raw in members}
    except Bad:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to parse hostile bytes is one line
        raise Bad(f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else 'unreadable'}") \
            from None
    if _pack(members) != data:
        raise Bad("not byte for byte the file hermes writes for what it holds")
    tree = arrays.pop(_TREE)
    if tree.dtype != np.uint8 or tree.ndim != 1:
        raise Bad("its tree entry is not uint8 text")
    return tree.tobytes(), arrays


