"""Reading YAML and JSON with limits: every document hermes reads goes through here.

A file received from someone else must not be able to exhaust the machine or crash hermes with a traceback.
The limits below are far beyond any document hermes writes or ships, and each breach is one line naming the
file (or the option) and the limit:

* **size** — a file is measured before it is read (``max_bytes``; :data:`MAX_DOCUMENT_BYTES` by default);
* **nesting depth** — mappings and lists nested deeper than :data:`MAX_DEPTH` (a scenario is 4 deep) are
  refused before the recursive parts of a parser see them (Python's recursion limit would otherwise end the
  parse in a ``RecursionError``);
* **YAML aliases** — a document whose nodes, each alias counted at every use, exceed :data:`MAX_NODES` is
  refused (the "billion laughs": a few hundred bytes of nested aliases that expand to billions of nodes when
  the document is validated, copied or written back);
* **YAML tags** — only the safe loader's plain data (``!!python/...`` tags are refused);
* **JSON values** — at most :data:`MAX_JSON_VALUES` (counted before parsing: 10⁷ empty objects would take a
  gigabyte of Python objects);
* **JSON constants** — ``NaN``, ``Infinity`` are not JSON numbers (RFC 8259) and are refused.

YAML numbers follow YAML 1.2: ``1e100`` (no dot) is a number, where PyYAML's YAML 1.1 rules read it as the
string ``"1e100"``; ``1.0e+100`` reads the same in both.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hermes.errors import HermesError, ScenarioError

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_DOCUMENT_BYTES", "read_bytes", "read_text", "parse_yaml", "load_yaml",
           "dump_yaml",
           "parse_json", "load_json", "json_depth", "json_shape", "MAX_JSON_VALUES"]

#: nesting of mappings and lists in any document hermes reads (a scenario is 4 deep, an LBDatafile 6)
MAX_DEPTH = 100
#: nodes of a YAML document, an alias counted again at every use (a 100 000-processor inline schedule of
#: 20 phases has 2 · 10⁶)
MAX_NODES = 5_000_000
#: values of a JSON document (a 100 000-phase summary.json holds about 5 · 10⁶)
MAX_JSON_VALUES = 20_000_000
#: the default size limit of a document (scenarios, experiments, specs, summaries, manifests)
MAX_DOCUMENT_BYTES = 256 * 2**20


def _size(b: float) -> str:
    for unit in ("bytes", "kB", "MB", "GB"):
        if b < 1024 or unit == "GB":
            return f"{b:.0f} {unit}" if unit == "bytes" else f"{b:.3g} {unit}"
        b /= 1024
    raise AssertionError


def read_bytes(path: str | Path, what: str, *, max_bytes: int = MAX_DOCUMENT_BYTES,
               error: type[HermesError] = ScenarioError) -> bytes:
    """The bytes of the file ``path`` (``what`` names it in errors), refused in one line if it is missing, a
    directory, unreadable or larger than ``max_bytes``."""
    path = Path(path)
    head = "" if what == str(path) else f"{what}: "
    try:
        if path.is_dir():
            raise error(f"{head}{path} is a directory, not a file")
        size = path.stat().st_size
    except FileNotFoundError:
        raise error(f"{head}no such file: {path}") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise error(f"{head}cannot read {path} ({getattr(err, 'strerror', None) or type(err).__name__})") from None
    if size > max_bytes:
        raise error(f"{head}{path} is {_size(size)}, more than the {_size(max_bytes)} hermes reads")
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as err:
        raise error(f"{head}cannot read {path} ({err.strerror or type(err).__name__})") from None
    if len(data) > max_bytes:  # it grew while we looked (a pipe, a file being written)
        raise error(f"{head}{path} is more than the {_size(max_bytes)} hermes reads")
    return data


def read_text(path: str | Path, what: str, *, max_bytes: int = MAX_DOCUMENT_BYTES,
              error: type[HermesError] = ScenarioError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (one line if it is not text)."""
    data = read_bytes(path, what, max_bytes=max_bytes, error=error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{'' if what == str(path) else what + ': '}{path} is not UTF-8 text") from None


# -- YAML ------------------------------------------------------------------------------------------------------
class _LimitError(yaml.YAMLError):
    """A limit of this module was exceeded (not a syntax error)."""


#: YAML 1.2's float syntax (core schema), which YAML 1.1 (PyYAML) lacks for exponents without a dot
_FLOAT12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$|^[-+]?\.[0-9_]+[eE][-+]?[0-9]+$")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader with a depth limit while composing and YAML 1.2 exponent floats."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _LimitError(f"nested more than {MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT12, list("-+0123456789."))


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper that knows YAML 1.2's exponent floats, so that a string such as ``"1e5"`` is quoted
    and reads back as a string through :func:`parse_yaml`."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT12, list("-+0123456789."))


def dump_yaml(data: Any, **options: Any) -> str:
    """``yaml.safe_dump(data, **options)`` whose text :func:`parse_yaml` reads back to ``data``."""
    return yaml.dump(data, Dumper=_Dumper, **options)


def _expanded_nodes(node, memo: dict[int, int]) -> int:
    """Nodes of the tree a node stands for, each alias expanded (memoised: linear in the distinct nodes)."""
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1  # a recursive alias (a node containing itself) counts once; the constructor handles it
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded_nodes(n, memo) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded_nodes(k, memo) + _expanded_nodes(v, memo) for k, v in node.value)
    memo[key] = min(total, MAX_NODES + 1)
    return memo[key]


def _error(error: type[HermesError], message: str, kind: str) -> HermesError:
    err = error(message)
    err.kind = kind  # what went wrong: "syntax", "tag" or "limit" (for callers that word it their own way)
    return err


def parse_yaml(text: str, where: str, *, error: type[HermesError] = ScenarioError) -> Any:
    """The data of the YAML document ``text`` (``where`` names it in errors), within this module's limits.

    Raises
    ------
    HermesError (``error``)
        One line: not valid YAML (with the line), a tag hermes does not read, nested too deep, or too many
        nodes once its aliases are expanded. Its attribute ``kind`` is ``syntax``, ``tag`` or ``limit``.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node, {}) > MAX_NODES:
            raise _error(error, f"{where}: its YAML aliases expand to more than {MAX_NODES:,} values (refused)",
                         "limit")
        return loader.construct_document(node)
    except _LimitError as err:
        raise _error(error, f"{where}: {err} (refused; hermes reads at most {MAX_DEPTH} levels)", "limit") from None
    except yaml.constructor.ConstructorError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise _error(error, f"{where}: a tag hermes does not read{at}: {err.problem or 'unknown tag'}", "tag") \
            from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise _error(error, f"{where}: not valid YAML" + (f" (line {mark.line + 1})" if mark is not None else ""),
                     "syntax") from None
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise _error(error, f"{where}: nested too deep", "limit") from None
    finally:
        loader.dispose()


def load_yaml(path: str | Path, what: str | None = None, *, max_bytes: int = MAX_DOCUMENT_BYTES,
              error: type[HermesError] = ScenarioError) -> Any:
    """The data of the YAML file ``path`` (:func:`read_text`, then :func:`parse_yaml`)."""
    what = what or str(path)
    text = read_text(path, what, max_bytes=max_bytes, error=error)
    return parse_yaml(text, what if what == str(path) else f"{what}: {path}", error=error)


# -- JSON ------------------------------------------------------------------------------------------------------
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_shape(data: bytes | str) -> tuple[int, int]:
    """(deepest nesting of ``[`` / ``{``, an upper bound on the number of values) of a JSON text, strings
    skipped; computed without recursion, in a few vectorised passes."""
    raw = data.encode() if isinstance(data, str) else data
    if b"[" not in raw and b"{" not in raw:
        return 0, 1
    bare = np.frombuffer(_STRING.sub(b'""', raw), dtype=np.uint8)
    opens = np.isin(bare, (ord("["), ord("{")))
    step = opens.astype(np.int64) - np.isin(bare, (ord("]"), ord("}"))).astype(np.int64)
    values = int(opens.sum()) + int(np.count_nonzero(bare == ord(","))) + 1
    return int(np.cumsum(step).max(initial=0)), values


def json_depth(data: bytes | str) -> int:
    """The deepest nesting of ``[`` / ``{`` in a JSON text (strings skipped); computed without recursion."""
    return json_shape(data)[0]


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes | str, where: str, *, error: type[HermesError] = ScenarioError,
               max_depth: int = MAX_DEPTH, max_values: int = MAX_JSON_VALUES) -> Any:
    """The data of the JSON text ``data`` (strict: no NaN or Infinity), nested at most ``max_depth`` deep and
    holding at most about ``max_values`` values (each costs Python tens of bytes: 10⁷ empty objects are a
    gigabyte).

    Raises
    ------
    HermesError (``error``)
        One line: not UTF-8, not JSON (with the line), nested too deep, too many values.
    """
    depth, values = json_shape(data)
    if depth > max_depth:
        raise error(f"{where}: nested {depth} levels deep (refused; hermes reads at most {max_depth} levels)")
    if values > max_values:
        raise error(f"{where}: about {values:,} values (refused; hermes reads at most {max_values:,})")
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise error(f"{where}: not UTF-8 text") from None
    except json.JSONDecodeError as err:
        raise error(f"{where}: not JSON ({err.msg}, line {err.lineno})") from None
    except (ValueError, RecursionError) as err:
        raise error(f"{where}: not JSON ({err})") from None


def load_json(path: str | Path, what: str | None = None, *, max_bytes: int = MAX_DOCUMENT_BYTES,
              error: type[HermesError] = ScenarioError, max_depth: int = MAX_DEPTH,
              max_values: int = MAX_JSON_VALUES) -> Any:
    """The data of the JSON file ``path`` (:func:`read_bytes`, then :func:`parse_json`)."""
    what = what or str(path)
    data = read_bytes(path, what, max_bytes=max_bytes, error=error)
    return parse_json(data, what if what == str(path) else f"{what}: {path}", error=error, max_depth=max_depth,
                      max_values=max_values)
