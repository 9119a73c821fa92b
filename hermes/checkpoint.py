"""Checkpoints of a distributed run at phase boundaries, and reading them back to resume — data only.

A checkpoint is every rank's whole state object — for the driver, its ``RunState``: the rank's cells and
fields, clock, capacity schedule, balancer memory (with any random generator it keeps), the adapter's
accounts and, on rank 0, the records so far — written as data, never as a pickle. Reading one back never
runs code from the file: no pickle, no class named by the file outside hermes, no ``__init__`` of a
record. The state is walked whole, rather than a list of chosen fields, so state that a new step adds to
the run is saved without touching this module, as long as it is data:

* ``None``, ``bool``, ``int``, ``float`` (non-finite ones by their bytes), ``str``, ``bytes``, lists,
  tuples, dicts (keys: numbers, strings, bytes, tuples of those), sets — as JSON;
* numpy arrays (not of dtype object) as ``.npy`` entries of the file, numpy scalars by dtype and bytes;
* ``np.random.Generator`` by its bit generator's name, ``.state`` and seed sequence (the same stream after
  reading, ``spawn`` included);
* dataclass instances of classes defined in hermes (module ``hermes.*``), by module and qualified name
  and their attributes — rebuilt by ``object.__new__`` and ``object.__setattr__``, without calling
  ``__init__``; ``functools.cached_property`` caches are left out (recomputed from the fields);
* pydantic models of hermes (the scenario) by their JSON form, validated again on reading (that reads no
  file: the capacity and schedule files are read by :func:`hermes.scenario.parse_scenario`, not by the
  model), checked on writing to read back equal;
* a few other classes of hermes by an explicit allow-list (:func:`_allow_list`): the bookkeeping, the
  clocks, the adapter, by their attributes;
* the objects given as ``refs`` — the communicator, the progress printer, registry entries holding
  functions — by name (``{"ref": "comm"}``), supplied anew on reading.

Anything else (a plug-in's open file or function in the balancer's memory) stops the checkpoint with one
line naming where it is in the state. Objects reached twice (the adapter's clock is the run's clock) are
written once and read back as one object.

Layout, in the run directory::

    checkpoint/manifest.json              format, phase, ranks, hermes version, SHA-256 of scenario.yaml,
                                          name, size and SHA-256 of every rank's file
    checkpoint/phase-KKKK/rank-RRRRR.npz  per rank: entry ``tree`` (uint8: the UTF-8 JSON document with the
                                          header — phase, rank, ranks, version —, the scenario and the
                                          state tree) and entries ``a0``, ``a1``, … (the arrays it names)

A rank's file is a standard ``.npz`` (``np.load(path, allow_pickle=False)`` reads it), written
deterministically (stored entries, fixed time stamps): reading it checks that it is byte for byte the file
this hermes writes for what it holds, so any damage — including one the zip format ignores — is found
(:func:`verify_checkpoint`). Every file is written atomically; the manifest is replaced only once every
rank's file of the new phase is on disk, and older phase directories are removed after it. A run killed
at any moment therefore leaves a manifest naming a complete set of files. The run directory must be on a
file system every rank sees.

Resuming needs the hermes version that wrote the checkpoint, the same number of ranks and the run's
``scenario.yaml`` as it was: the run goes on with the scenario it started with, so an edited copy is
refused rather than ignored, and every rank's file must hold that scenario (but ``output.pictures``),
compared before it is validated. ``hermes run --resume`` verifies all of this before ``mpiexec`` starts
(:func:`verify_checkpoint`), and every rank checks again under ``mpiexec`` (:func:`load_state`). The
checksums detect damage, not tampering; a tampered checkpoint can change the run's data but not run code
beyond what its scenario.yaml shows, as any scenario does (a plug-in balancer ``balancer.algorithm:
pkg.module:Name`` is imported).
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import importlib
import inspect
import io
import json
import math
import re
import shutil
import struct
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from hermes.comm import Bookkeeping, agree
from hermes.errors import HermesError, OutputError, validation_message
from hermes.loaders import json_depth, load_json, parse_json, parse_yaml, read_bytes
from hermes.results import read_summary, reason, subdir, write_atomic, write_json
from hermes.scenario import MAX_PHASES, MAX_PROCESSORS
from hermes.version import __version__

__all__ = ["CHECKPOINT", "FORMAT", "Manifest", "CheckpointError", "read_manifest", "verify_checkpoint",
           "save_state", "load_state"]

#: the checkpoint directory inside a run directory
CHECKPOINT = "checkpoint"
#: the format of the manifest and of the rank files (an earlier hermes pickled the states)
FORMAT = "hermes-checkpoint-npz/1"
#: containers nested in a state (a RunState is about 8 deep); the JSON document is at most 3 levels per
#: container deeper
MAX_NESTING = 100
_MAX_DEPTH = 3 * MAX_NESTING + 10
#: the one array entry holding the JSON document
_TREE = "tree"
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: the header entries of every rank file (save_state's ``keep`` adds numbers)
_HEAD = ("phase", "rank", "ranks", "hermes")
_KINDS = "(checkpoints hold arrays, numbers, strings, lists, mappings and hermes' own records)"


class CheckpointError(HermesError):
    """A checkpoint cannot be written, or is missing, damaged or not resumable by this hermes."""


@dataclass(frozen=True)
class Manifest:
    """What ``checkpoint/manifest.json`` says: the phase saved last and the files of that phase."""

    phase: int
    ranks: int
    hermes: str
    files: list[dict[str, Any]]
    directory: Path
    #: SHA-256 of the run directory's scenario.yaml when the run started
    scenario_sha256: str = ""

    def path(self, rank: int) -> Path:
        return self.directory / self.files[rank]["name"]


def _phase_dir(run_dir: Path, phase: int) -> Path:
    return run_dir / CHECKPOINT / f"phase-{phase:04d}"


def _rank_name(rank: int) -> str:
    return f"rank-{rank:05d}.npz"


# -- the state as a tree of JSON and arrays --------------------------------------------------------------------
class _Unsaveable(Exception):
    """What the state holds that a checkpoint cannot (``where`` in the state, ``what`` it is)."""

    def __init__(self, where: str, what: str, tail: str = _KINDS):
        where = where if len(where) <= 160 else f"{where[:70]}…{where[-70:]}"
        super().__init__(f"{where} holds {what}" + (f" {tail}" if tail else ""))


class _Bad(Exception):
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
    from hermes.clock import VirtualClock, WallClock

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


class _Encoder:
    """Writes a state as a JSON tree plus arrays (see the module docstring)."""

    def __init__(self, refs: dict[str, Any]):
        self.refs = {id(obj): name for name, obj in refs.items()
                     if not (obj is None or type(obj) in (bool, int, float, str))}
        self.numbers: dict[int, int] = {}
        self.alive: list[Any] = list(refs.values())  # keeps every numbered object's id unique while encoding
        self.arrays: dict[str, np.ndarray] = {}

    def __call__(self, obj: Any, where: str, depth: int = 0) -> Any:
        if depth > MAX_NESTING:
            raise _Unsaveable(where, f"containers nested more than {MAX_NESTING} deep", "")
        if id(obj) in self.refs:
            return {"ref": self.refs[id(obj)]}
        t = type(obj)
        if obj is None or t in (bool, str):
            return obj
        if t is int:
            if obj.bit_length() > 8192:
                raise _Unsaveable(where, f"an integer of {obj.bit_length()} bits", "")
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
                raise _Unsaveable(where, "an array of Python objects (dtype object)")
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
            raise _Unsaveable(where, f"a {_type_name(obj)}")
        return {"object": _class_name(t), "attrs": {k: sub(v, f"{where}.{k}") for k, v in attrs.items()}, "@": n}

    @staticmethod
    def _keys(obj, where: str):
        for k in obj:
            if not _plain_key(k):
                raise _Unsaveable(where, f"a key or element that is a {_type_name(k)} (keys are numbers, strings, "
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
            raise _Unsaveable(where, f"a {_type_name(obj)} that does not read back from its JSON form", "")
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
        raise _Bad(f"a class outside hermes: {str(name)[:80]!r}")
    module, qualname = m.groups()
    try:
        obj = sys.modules.get(module) or importlib.import_module(module)
    except ImportError:
        raise _Bad(f"a class of {module}, a module this hermes does not have") from None
    for part in qualname.split("."):
        obj = inspect.getattr_static(obj, part, None)
    if not isinstance(obj, type) or obj.__module__ != module or obj.__qualname__ != qualname:
        raise _Bad(f"{name}, which is not a class of this hermes")
    if want == "model" and issubclass(obj, BaseModel):
        return obj
    if want == "object" and not issubclass(obj, BaseModel) and obj.__new__ is object.__new__ and (
            obj in _allow_list() or dataclasses.is_dataclass(obj)):
        return obj
    raise _Bad(f"{name}, a class a checkpoint does not hold")


class _Decoder:
    """Reads the tree :class:`_Encoder` wrote (every node checked; any surprise is :class:`_Bad`)."""

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
            raise _Bad(f"a bad object number {str(n)[:20]}")
        self.objects[n] = obj
        return obj

    def _list(self, node: dict, tag: str) -> list:
        items = node[tag]
        if type(items) is not list:
            raise _Bad(f"a {tag} node without its list")
        return items

    def _key(self, node: Any) -> Any:
        k = self(node)
        if not _plain_key(k):
            raise _Bad("a key that is not a number, string, bytes or tuple of those")
        return k

    def __call__(self, node: Any) -> Any:
        if node is None or type(node) in (bool, int, float, str):
            return node
        if type(node) is not dict:
            raise _Bad("a bare JSON list")
        tag = next((k for k in self.NODES if k in node), None)
        if tag is None or set(node) != self.NODES[tag]:
            raise _Bad(f"an unknown node {sorted(node)[:4]}")
        value = node[tag]
        if tag == "float":
            raw = bytes.fromhex(value) if type(value) is str and len(value) == 16 else b""
            if len(raw) != 8:
                raise _Bad("a bad float")
            return struct.unpack("<d", raw)[0]
        if tag == "bytes":
            if type(value) is not str:
                raise _Bad("bad bytes")
            return base64.b64decode(value, validate=True)
        if tag == "scalar":
            if type(value) is not str or not _SCALAR.fullmatch(value) or type(node["hex"]) is not str:
                raise _Bad("a bad numpy scalar")
            dtype, raw = np.dtype(value), bytes.fromhex(node["hex"])
            if dtype.hasobject or len(raw) != dtype.itemsize:
                raise _Bad("a bad numpy scalar")
            return np.frombuffer(raw, dtype=dtype, count=1)[0]
        if tag == "tuple":
            return tuple(self(x) for x in self._list(node, tag))
        if tag == "frozenset":
            return frozenset(self._key(x) for x in self._list(node, tag))
        if tag == "same":
            if type(value) is not int or value not in self.objects:
                raise _Bad("a reference to an object not read before")
            return self.objects[value]
        if tag == "ref":
            if type(value) is not str or not _NAME.fullmatch(value):
                raise _Bad("a bad reference")
            if self.refs is None:
                return _Placeholder(value)
            if value not in self.refs:
                raise _Bad(f"a reference to {value!r}, which this hermes does not supply")
            return self.refs[value]
        if tag == "list":
            out = self._new(node, [])
            out.extend(self(x) for x in self._list(node, tag))
            return out
        if tag == "set":
            out = self._new(node, set())
            out.update(self._key(x) for x in self._list(node, tag))
            return out
        if tag == "map":
            if type(value) is not dict:
                raise _Bad("a map without its mapping")
            out = self._new(node, {})
            out.update((k, self(v)) for k, v in value.items())
            return out
        if tag == "dict":
            out = self._new(node, {})
            for pair in self._list(node, tag):
                if type(pair) is not list or len(pair) != 2:
                    raise _Bad("a dict entry that is not a pair")
                out[self._key(pair[0])] = self(pair[1])
            return out
        if tag == "array":
            if type(value) is not str or value not in self.arrays or value in self.used:
                raise _Bad(f"a reference to a missing array {str(value)[:20]}")
            self.used.add(value)
            return self._new(node, self.arrays[value])
        if tag == "generator":
            bits = self(value)
            if type(bits) not in _BIT_GENERATORS.values():
                raise _Bad("a random generator without its bit generator")
            return self._new(node, np.random.Generator(bits))
        if tag == "bit_generator":
            return self._bit_generator(node)
        if tag == "seed_sequence":
            if type(value) is not dict or set(value) != {"entropy", "spawn_key", "pool_size", "n_children_spawned"}:
                raise _Bad("a bad seed sequence")
            args = {k: self(v) for k, v in value.items()}
            if type(args["pool_size"]) is not int or not 4 <= args["pool_size"] <= 1024:
                raise _Bad("a bad seed sequence pool size")
            return self._new(node, np.random.SeedSequence(**args))
        if tag == "model":
            cls = _resolve(value, "model")
            if type(node["excluded"]) is not dict or type(node["json"]) is not dict:
                raise _Bad("a bad model node")
            excluded = {k: self(v) for k, v in node["excluded"].items()}
            return self._new(node, cls.model_validate({**node["json"], **excluded}))
        return self._object(node, _resolve(value, "object"))

    def _bit_generator(self, node: dict) -> Any:
        cls = _BIT_GENERATORS.get(node["bit_generator"]) if type(node["bit_generator"]) is str else None
        if cls is None:
            raise _Bad(f"an unknown bit generator {str(node['bit_generator'])[:20]!r}")
        seq = self(node["seed_seq"])
        if seq is not None and type(seq) is not np.random.SeedSequence:
            raise _Bad("a bit generator with a bad seed sequence")
        bits = cls(seq) if seq is not None else cls()
        bits.state = self(node["state"])
        return self._new(node, bits)

    def _object(self, node: dict, cls: type) -> Any:
        attrs = node["attrs"]
        if type(attrs) is not dict:
            raise _Bad("an object without its attributes")
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        if missing := fields - set(attrs):
            raise _Bad(f"a {cls.__qualname__} without {sorted(missing)[0]}")
        cached = _cached(cls)
        for k in attrs:
            if not _NAME.fullmatch(k) or (k not in fields and (hasattr(cls, k) or k in cached)):
                raise _Bad(f"a {cls.__qualname__} with a bad attribute {k[:40]!r}")
        obj = self._new(node, object.__new__(cls))
        for k, v in attrs.items():
            object.__setattr__(obj, k, self(v))
        return obj


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


def _encode_file(doc: dict[str, Any], arrays: dict[str, np.ndarray]) -> bytes:
    try:
        text = json.dumps(doc, allow_nan=False, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    except ValueError as err:  # a model's JSON form with NaN, or a header entry that is not JSON
        raise _Unsaveable("the document", f"a value JSON cannot hold ({err})", "") from None
    if json_depth(text) > _MAX_DEPTH:
        raise _Unsaveable("the document", f"values nested more than {_MAX_DEPTH} levels deep", "")
    return _pack([(_TREE, _npy(np.frombuffer(text, dtype=np.uint8))), *((k, _npy(a)) for k, a in arrays.items())])


def _read_npy(raw: bytes, name: str) -> np.ndarray:
    """One ``.npy`` entry: its header checked before anything is allocated, no object dtype, read by
    ``np.load(..., allow_pickle=False)``, and byte for byte what hermes writes for it."""
    fp = io.BytesIO(raw)
    version = np.lib.format.read_magic(fp)
    if version not in ((1, 0), (2, 0)):
        raise _Bad(f"entry {name}: .npy version {version}")
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(fp)
    if dtype.hasobject:
        raise _Bad(f"entry {name} is an array of Python objects (pickled), refused")
    if math.prod(shape) * dtype.itemsize != len(raw) - fp.tell():
        raise _Bad(f"entry {name}: its size differs from its header's")
    arr = np.load(io.BytesIO(raw), allow_pickle=False)
    if type(arr) is not np.ndarray or _npy(arr) != raw:
        raise _Bad(f"entry {name} is not as hermes writes it")
    return arr


def _unpack(data: bytes) -> tuple[bytes, dict[str, np.ndarray]]:
    """(the JSON document, the arrays by name) of a rank file's bytes; :class:`_Bad` if it is not exactly a
    file hermes writes."""
    if data[:4] != b"PK\x03\x04":
        raise _Bad("not an .npz file" + (" (a pickle)" if data[:1] == b"\x80" else ""))
    try:  # the bytes may be anything: zipfile and numpy raise many kinds of error on them
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            infos = npz.zip.infolist()
            names = [_TREE, *(f"a{i}" for i in range(len(infos) - 1))]
            if [i.filename for i in infos] != [f"{n}.npy" for n in names]:
                raise _Bad("its entries are not tree, a0, a1, …")
            if sum(max(i.file_size, i.compress_size) for i in infos) > len(data):
                raise _Bad("its entries overlap")
            members = []
            for info, name in zip(infos, names):
                if info.compress_type != zipfile.ZIP_STORED or info.file_size > len(data):
                    raise _Bad(f"entry {name} is not stored as hermes writes it")
                members.append((name, npz.zip.read(info)))  # checks the entry's CRC-32
        arrays = {name: _read_npy(raw, name) for name, raw in members}
    except _Bad:
        raise
    except Exception as err:  # noqa: BLE001 - any failure to parse hostile bytes is one line
        raise _Bad(f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else 'unreadable'}") \
            from None
    if _pack(members) != data:
        raise _Bad("not byte for byte the file hermes writes for what it holds")
    tree = arrays.pop(_TREE)
    if tree.dtype != np.uint8 or tree.ndim != 1:
        raise _Bad("its tree entry is not uint8 text")
    return tree.tobytes(), arrays


def _why(err: BaseException) -> str:
    """One line saying why a document could not be read back."""
    if isinstance(err, ValidationError):
        return validation_message(err, root="scenario")
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160]}" if text else type(err).__name__


def _read_rank(man: Manifest, rank: int, refs: Callable[[Any], dict[str, Any]] | None,
               scenario: Any) -> tuple[Any, dict]:
    """Rank ``rank``'s file: present, its size and checksum the manifest's, exactly a file hermes writes, its
    header the manifest's, its scenario the run's (``scenario``: scenario.yaml's data, compared before the
    scenario is validated, which may import a plug-in balancer it names), its tree read back (with
    placeholders for the references if ``refs`` is None)."""
    entry, path = man.files[rank], man.path(rank)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise CheckpointError(f"--resume: {path} is missing (the checkpoint of phase {man.phase} has "
                              f"{man.ranks} files)") from None
    except OSError as err:
        raise CheckpointError(f"--resume: cannot read {path} ({err.strerror or err})") from None
    if size != entry["bytes"]:
        raise CheckpointError(f"--resume: {path} is damaged ({size} bytes, the manifest says {entry['bytes']})")
    data = read_bytes(path, "--resume", max_bytes=entry["bytes"], error=CheckpointError)
    if hashlib.sha256(data).hexdigest() != entry["sha256"]:
        raise CheckpointError(f"--resume: {path} is damaged (its checksum differs from the manifest's)")
    try:
        text, arrays = _unpack(data)
    except _Bad as err:
        raise CheckpointError(f"--resume: {path} is damaged ({err})") from None
    doc = parse_json(text, f"--resume: {path}", error=CheckpointError, max_depth=_MAX_DEPTH)
    head = doc.get("header") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or set(doc) != {"format", "header", "scenario", "state"} or \
            doc["format"] != FORMAT or not isinstance(head, dict):
        raise CheckpointError(f"--resume: {path} is not a checkpoint file of this hermes")
    if [head.get(k) for k in ("phase", "rank", "ranks", "hermes")] != [man.phase, rank, man.ranks, __version__] \
            or any(type(head.get(k)) is not int for k in ("phase", "rank", "ranks")):
        raise CheckpointError(f"--resume: {path} does not belong to the manifest's phase {man.phase} "
                              f"(rank {rank} of {man.ranks})")
    if any(type(v) not in (int, float) or not math.isfinite(v) for k, v in head.items() if k not in _HEAD):
        raise CheckpointError(f"--resume: {path} is damaged (its header holds a value that is not a number)")
    if type(doc["scenario"]) is not dict or _comparable(doc["scenario"].get("json")) != scenario:
        raise CheckpointError(f"--resume: {path} holds another scenario than the run directory's scenario.yaml "
                              f"(start a new run)")
    dec = _Decoder(arrays, None)
    try:
        head = {**head, "scenario": dec(doc["scenario"])}
        if refs is not None:
            dec.refs = refs(head["scenario"])
        state = dec(doc["state"])
    except _Bad as err:
        raise CheckpointError(f"--resume: {path} is damaged (it holds {err})") from None
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - numpy and pydantic refusing crafted values: one line
        raise CheckpointError(f"--resume: {path} cannot be read back ({_why(err)})") from None
    if unused := sorted(set(arrays) - dec.used):
        raise CheckpointError(f"--resume: {path} is damaged (entry {unused[0]} belongs to nothing)")
    return state, head


# -- the manifest ----------------------------------------------------------------------------------------------
def _int(doc: dict, key: str, low: int, high: int | None, where: str) -> int:
    v = doc.get(key)
    if type(v) is not int or v < low or (high is not None and v > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise CheckpointError(f"--resume: {where}: {key} must be a whole number {bound}, got {json.dumps(v)[:40]}")
    return v


def read_manifest(run_dir: str | Path) -> Manifest:
    """The run directory's checkpoint manifest, strictly validated (serial).

    Raises
    ------
    CheckpointError
        One line: no run directory, no checkpoint, a damaged manifest, or one written by another hermes.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise CheckpointError(f"--resume: {run_dir} is not a run directory")
    path = run_dir / CHECKPOINT / "manifest.json"
    if not path.exists() and not path.is_symlink():
        if (summary := read_summary(run_dir)) is not None and summary.get("complete", True):
            raise CheckpointError(f"--resume: {run_dir} holds a finished run (nothing to resume)")
        raise CheckpointError(f"--resume: {run_dir} holds no checkpoint (run with output.checkpoint_every: K "
                              f"to write them)")
    doc = load_json(path, "--resume", error=CheckpointError, max_bytes=64 * 2**20)
    if not isinstance(doc, dict) or not isinstance(doc.get("hermes"), str):
        raise CheckpointError(f"--resume: {path} is not a hermes checkpoint manifest")
    if doc["hermes"] != __version__:
        raise CheckpointError(f"--resume: the checkpoint was written by hermes {doc['hermes'][:40]}, this is hermes "
                              f"{__version__} (resume with the version that wrote it)")
    if doc.get("format") != FORMAT:
        raise CheckpointError(f"--resume: {path} is not a checkpoint manifest of this hermes (format "
                              f"{json.dumps(doc.get('format'))[:40]}, expected {FORMAT!r}; an earlier hermes "
                              f"pickled its checkpoints, which this one does not read: start a new run)")
    keys = {"format", "hermes", "phase", "ranks", "scenario_sha256", "files"}
    if set(doc) != keys:
        raise CheckpointError(f"--resume: {path}: the keys must be {', '.join(sorted(keys))}")
    phase = _int(doc, "phase", 1, MAX_PHASES, str(path))
    ranks = _int(doc, "ranks", 1, MAX_PROCESSORS, str(path))
    if type(doc["scenario_sha256"]) is not str or not _SHA256.fullmatch(doc["scenario_sha256"]):
        raise CheckpointError(f"--resume: {path}: scenario_sha256 must be 64 hexadecimal digits")
    files = doc["files"]
    if type(files) is not list or len(files) != ranks:
        raise CheckpointError(f"--resume: {path}: files must list {ranks} files (one per rank), got "
                              f"{len(files) if type(files) is list else json.dumps(files)[:40]}")
    for r, f in enumerate(files):
        where = f"{path}: files[{r}]"
        if type(f) is not dict or set(f) != {"name", "bytes", "sha256"}:
            raise CheckpointError(f"--resume: {where} must have exactly name, bytes and sha256")
        if f["name"] != _rank_name(r):
            raise CheckpointError(f"--resume: {where}: name must be {_rank_name(r)!r}, got "
                                  f"{json.dumps(f['name'])[:60]}")
        _int(f, "bytes", 0, None, where)
        if type(f["sha256"]) is not str or not _SHA256.fullmatch(f["sha256"]):
            raise CheckpointError(f"--resume: {where}: sha256 must be 64 hexadecimal digits")
    return Manifest(phase, ranks, __version__, files, _phase_dir(run_dir, phase), doc["scenario_sha256"])


def _comparable(scenario: Any) -> Any:
    """A scenario's data as a checkpoint and scenario.yaml must agree on it: all but ``output.pictures``
    (which ``hermes run --resume --no-pictures`` changes)."""
    if not isinstance(scenario, dict) or not isinstance(scenario.get("output"), dict):
        return scenario
    return {**scenario, "output": {k: v for k, v in scenario["output"].items() if k != "pictures"}}


def _check_scenario(run_dir: Path, man: Manifest) -> Any:
    """The run directory's scenario.yaml is the one the checkpoint's run started with; its data (to compare
    with the scenario each rank's file holds)."""
    path = run_dir / "scenario.yaml"
    if not path.is_file():
        raise CheckpointError(f"--resume: {path} is missing (the run's scenario: restore it, or start a new run)")
    data = read_bytes(path, "--resume", error=CheckpointError)
    if hashlib.sha256(data).hexdigest() != man.scenario_sha256:
        raise CheckpointError(f"--resume: {path} was edited after the run started (a resumed run goes on with the "
                              f"scenario it started with: restore the file, or start a new run with the edited "
                              f"scenario)")
    # the text hermes wrote (its checksum says so, but a crafted manifest could say it of any text): read back
    # with the loaders' limits, the inverse of hermes' dump_yaml
    return _comparable(parse_yaml(data.decode("utf-8", "replace"), f"--resume: {path}", error=CheckpointError))


def verify_checkpoint(run_dir: str | Path) -> Manifest:
    """Check the run directory's last checkpoint completely before a job reads it (serial): the manifest,
    scenario.yaml unchanged, every rank's file present, of the manifest's size and checksum, exactly a file
    hermes writes, of the manifest's phase and rank, holding the run's scenario, its state readable
    (references left unresolved).

    Raises
    ------
    CheckpointError
        The first problem, in one line ``--resume: ...``.
    """
    man = read_manifest(run_dir)
    scenario = _check_scenario(Path(run_dir), man)
    for rank in range(man.ranks):
        _read_rank(man, rank, None, scenario)
    return man


# -- writing and reading (collective) --------------------------------------------------------------------------
def save_state(comm, state: Any, *, phase: int, run_dir: str | Path, scenario: Any, refs: dict[str, Any],
               keep: dict[str, Any] | None = None, scenario_sha256: str | None = None) -> Manifest:
    """Save every rank's ``state`` after ``phase`` (collective).

    Parameters
    ----------
    comm
        The run's communicator.
    state
        This rank's state object, written whole (module docstring: what it may hold).
    phase
        The phase just finished.
    run_dir
        The run directory (the same path on every rank).
    scenario
        The run's scenario, stored before the state so that :func:`load_state` can rebuild the references.
    refs
        Objects written as references by name (the communicator, callables, registry entries).
    keep
        More header entries (numbers), returned by :func:`load_state`.
    scenario_sha256
        Rank 0: the SHA-256 of the run directory's scenario.yaml as the run wrote it (None: of the file as it
        is now).

    Raises
    ------
    CheckpointError
        On every rank if any rank could not save or write (one line).
    """
    run_dir = Path(run_dir)
    rank, size = comm.Get_rank(), comm.Get_size()
    where = _phase_dir(run_dir, phase)

    def write_mine() -> dict[str, Any]:
        enc = _Encoder(refs)
        try:
            doc = {"format": FORMAT,
                   "header": {"phase": phase, "rank": rank, "ranks": size, "hermes": __version__, **(keep or {})},
                   "scenario": enc(scenario, "scenario"), "state": enc(state, "state")}
            data = _encode_file(doc, enc.arrays)
        except _Unsaveable as err:
            raise CheckpointError(f"checkpoint: the state of rank {rank} cannot be saved: {err}") from None
        name = _rank_name(rank)
        try:
            subdir(run_dir, CHECKPOINT, where.name)  # real directories of the run's own, never a symlink
            write_atomic(where / name, data)
        except (OSError, OutputError) as err:
            raise CheckpointError(f"checkpoint: cannot write {where / name} ({reason(err)})") from None
        return {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}

    entry = agree(comm, write_mine)
    files = Bookkeeping(comm).gather(entry)
    def publish() -> str | None:
        if rank != 0:
            return
        sha = scenario_sha256
        if sha is None:
            sha = hashlib.sha256(read_bytes(run_dir / "scenario.yaml", "checkpoint", error=CheckpointError)).hexdigest()
        try:
            write_json(run_dir / CHECKPOINT / "manifest.json",
                       {"format": FORMAT, "hermes": __version__, "phase": phase, "ranks": size,
                        "scenario_sha256": sha, "files": files})
            for old in subdir(run_dir, CHECKPOINT).glob("phase-*"):
                if old.is_dir() and not old.is_symlink() and old != where:
                    shutil.rmtree(old, ignore_errors=True)
            return sha
        except (OSError, OutputError) as err:
            raise CheckpointError(f"checkpoint: cannot write the manifest in {run_dir} ({reason(err)})") from None

    sha = agree(comm, publish)  # the checkpoint is complete on every rank's return
    return Manifest(phase, size, __version__, files or [], where, sha or "")


def load_state(comm, run_dir: str | Path, refs: Callable[[Any], dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    """This rank's state from the run directory's last checkpoint (collective): the checks of
    :func:`verify_checkpoint`, each rank reading its own file.

    Parameters
    ----------
    refs
        Given the stored scenario, the objects the references by name stand for (the same names as in
        :func:`save_state`).

    Returns
    -------
    (state, header)
        The header has ``phase``, ``rank``, ``ranks``, ``hermes``, ``scenario`` and what :func:`save_state` kept.

    Raises
    ------
    CheckpointError
        On every rank (one line): no checkpoint, another number of ranks, an edited scenario.yaml, a damaged
        or missing file.
    """
    size, rank = comm.Get_size(), comm.Get_rank()
    man = agree(comm, read_manifest, run_dir)
    if man.ranks != size:
        raise CheckpointError(f"--resume: the checkpoint holds {man.ranks} ranks, the job has {size} (run "
                              f"'hermes run --resume {run_dir}' without mpiexec, or mpiexec -n {man.ranks})")
    scenario = agree(comm, _check_scenario, Path(run_dir), man)
    return agree(comm, _read_rank, man, rank, refs, scenario)
