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
* **JSON constants** — ``NaN``, ``Infinity`` are not JSON numbers (RFC 8259) and are refused;
* **characters** — text is UTF-8 without control characters (NUL, BEL, ESC, DEL, ...: only tab, line feed and
  carriage return); a YAML document also holds only YAML 1.2's printable characters (§5.1: no C1 controls but
  NEL, no lone surrogates, no U+FFFE/U+FFFF) and a byte order mark only at its start (§5.2).

Every refusal of a document's text names the line and column (1-based; columns count characters, or bytes where
the text is not UTF-8): ``scenario.yaml: the control character U+0007 (BEL) at line 2, column 9 is not allowed
in YAML (...)``, ``... not valid YAML at line 3, column 1 (expected ',' or ']' ...)``, ``... is not UTF-8 text
(line 1, column 1: the byte 0xff)``, ``... not JSON (Expecting value, line 1, column 2)``.

YAML numbers follow YAML 1.2: ``1e100`` (no dot) is a number, where PyYAML's YAML 1.1 rules read it as the
string ``"1e100"``; ``1.0e+100`` reads the same in both.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from hermes.errors import HermesError, ScenarioError

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_DOCUMENT_BYTES", "read_bytes", "read_text", "decode_utf8", "at",
           "describe_character", "parse_yaml", "load_yaml", "dump_yaml",
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
    directory, not a regular file (a FIFO or a device, which could block or never end), unreadable or larger
    than ``max_bytes``. It is opened without blocking and measured before anything is read."""
    path = Path(path)
    head = "" if what == str(path) else f"{what}: "
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise error(f"{head}no such file: {path}") from None
    except IsADirectoryError:
        raise error(f"{head}{path} is a directory, not a file") from None
    except (OSError, ValueError) as err:  # ValueError: a NUL byte in the name
        raise error(f"{head}cannot read {path} ({getattr(err, 'strerror', None) or type(err).__name__})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{head}{path} is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{head}{path} is not a regular file (a FIFO, a socket or a device): hermes reads files")
        if st.st_size > max_bytes:
            raise error(f"{head}{path} is {_size(st.st_size)}, more than the {_size(max_bytes)} hermes reads")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 24, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise error(f"{head}cannot read {path} ({err.strerror or type(err).__name__})") from None
    finally:
        os.close(fd)
    if total > max_bytes:  # it grew while we read it
        raise error(f"{head}{path} is more than the {_size(max_bytes)} hermes reads")
    return b"".join(chunks)


#: control characters (C0 but tab, line feed and carriage return; DEL) — no text document hermes reads holds one
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
#: what YAML 1.2 does not allow in a document (§5.1, c-printable) and a byte order mark after its start (§5.2)
_NOT_YAML = re.compile(r"[^\t\n\r\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]")
#: half of a UTF-16 pair, no character (a YAML escape "\ud800" makes one)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: the usual names of the control characters a user may meet
_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x1B: "ESC", 0x7F: "DEL"}


def at(text: str, index: int) -> str:
    """``line L, column C`` of the character ``text[index]`` (both 1-based)."""
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def describe_character(c: str) -> str:
    """A character hermes refuses, in words: ``the control character U+0007 (BEL)``, ``the byte 0xff, which is
    not UTF-8`` (a command-line argument's undecodable byte, as Python's surrogateescape holds it), ``a lone
    surrogate U+D800``, ``a byte order mark (U+FEFF)``, ``the noncharacter U+FFFF``."""
    code = ord(c)
    if 0xDC80 <= code <= 0xDCFF:
        return f"the byte 0x{code - 0xDC00:02x}, which is not UTF-8,"
    if 0xD800 <= code <= 0xDFFF:
        return f"a lone surrogate U+{code:04X}"
    if code == 0xFEFF:
        return "a byte order mark (U+FEFF) after the start of the text"
    if code in (0xFFFE, 0xFFFF):
        return f"the noncharacter U+{code:04X}"
    name = _NAMES.get(code)
    return f"the control character U+{code:04X}" + (f" ({name})" if name else "")


def read_text(path: str | Path, what: str, *, max_bytes: int = MAX_DOCUMENT_BYTES,
              error: type[HermesError] = ScenarioError) -> str:
    """:func:`read_bytes` decoded as UTF-8 (one line if it is not text, naming the line and column of the first
    byte that is not UTF-8 or of the first control character: only tab, line feed and carriage return are text)."""
    data = read_bytes(path, what, max_bytes=max_bytes, error=error)
    head = f"{'' if what == str(path) else what + ': '}{path}"
    text = decode_utf8(data, f"{head} is", error=error)
    bad = _CONTROL.search(text)
    if bad is not None:
        raise _error(error, f"{head}: {describe_character(bad.group())} at {at(text, bad.start())} is not allowed "
                            f"in a text file hermes reads", "character")
    return text


def decode_utf8(data: bytes, head: str, *, error: type[HermesError] = ScenarioError) -> str:
    """``data`` decoded as UTF-8, or one line ``{head} not UTF-8 text (line L, column C: the byte 0xff)`` naming
    the first byte that is not (its column counted in bytes; ``head`` e.g. ``"x.yaml is"`` or ``"x.json:"``)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise _error(error, f"{head} not UTF-8 text (line {line}, column {column}: the byte "
                            f"0x{data[err.start]:02x})", "encoding") from None


# -- YAML ------------------------------------------------------------------------------------------------------
class _LimitError(yaml.YAMLError):
    """A limit of this module was exceeded (not a syntax error)."""


#: YAML 1.2's float syntax (core schema), which YAML 1.1 (PyYAML) lacks for exponents without a dot
_FLOAT12 = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$|^[-+]?\.[0-9_]+[eE][-+]?[0-9]+$")


class _Refused(yaml.YAMLError):
    """A document hermes does not read (a duplicate key, a tag outside plain data): its message is the reason."""

    def __init__(self, message: str, mark=None):
        super().__init__(message)
        self.problem_mark = mark


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, reading plain data only: a depth limit while composing, YAML 1.2 exponent floats,
    no timestamps (a date stays a string, as in YAML 1.2's core schema), no ``!!binary``/``!!set``/``!!omap``/
    ``!!pairs`` values, and a key given twice in one mapping refused (the last one would silently win)."""

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

    def construct_scalar(self, node):
        value = super().construct_scalar(node)
        bad = _SURROGATE.search(value) if isinstance(value, str) and node.style == '"' else None
        if bad is not None:  # an escape such as "\ud800" names half of a UTF-16 pair, no character
            raise _Refused(f"the escape of {describe_character(bad.group())} is not a character", node.start_mark)
        return value

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                if (key_node.tag, key_node.value) in seen:
                    raise _Refused(f"the key {key_node.value[:40]!r} is given twice in one mapping",
                                   key_node.start_mark)
                seen.add((key_node.tag, key_node.value))
        return super().construct_mapping(node, deep)


def _refuse(loader, node):
    raise yaml.constructor.ConstructorError(None, None, f"{node.tag} values are not plain data", node.start_mark)


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT12, list("-+0123456789."))
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()}
for _tag in ("timestamp", "binary", "set", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse)


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper that knows YAML 1.2's exponent floats, so that a string such as ``"1e5"`` is quoted
    and reads back as a string through :func:`parse_yaml`."""


_Dumper.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT12, list("-+0123456789."))


def dump_yaml(data: Any, **options: Any) -> str:
    """``yaml.safe_dump(data, **options)`` whose text :func:`parse_yaml` reads back to ``data``."""
    return yaml.dump(data, Dumper=_Dumper, **options)


def _expanded_nodes(node, memo: dict[int, int], active: set[int]) -> int:
    """Nodes of the tree a node stands for, each alias expanded (memoised: linear in the distinct nodes); an
    alias inside the node it names (a tree without end) is refused."""
    key = id(node)
    if key in memo:
        return memo[key]
    if key in active:
        raise _LimitError("an alias refers to a mapping or list that contains it (a document without end)")
    active.add(key)
    total = 1
    if isinstance(node, yaml.SequenceNode):
        total += sum(_expanded_nodes(n, memo, active) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        total += sum(_expanded_nodes(k, memo, active) + _expanded_nodes(v, memo, active) for k, v in node.value)
    active.discard(key)
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
        One line: a character YAML does not allow, not valid YAML (with the line and column), a tag hermes does
        not read, nested too deep, or too many nodes once its aliases are expanded. Its attribute ``kind`` is
        ``character``, ``syntax``, ``tag`` or ``limit``.
    """
    bad = _NOT_YAML.search(text, 1 if text.startswith("\ufeff") else 0)
    if bad is not None:
        c = bad.group()
        advice = "" if 0xD800 <= ord(c) <= 0xDFFF else " (write it as an escape in a double-quoted string, e.g. " \
            f"\"\\u{ord(c):04x}\")"
        raise _error(error, f"{where}: {describe_character(c)} at {at(text, bad.start())} is not allowed in YAML"
                            f"{advice}", "character")
    loader = None
    try:
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        if _expanded_nodes(node, {}, set()) > MAX_NODES:
            raise _error(error, f"{where}: its YAML aliases expand to more than {MAX_NODES:,} values (refused)",
                         "limit")
        return loader.construct_document(node)
    except _LimitError as err:
        tail = f" (refused; hermes reads at most {MAX_DEPTH} levels)" if "levels" in str(err) else " (refused)"
        raise _error(error, f"{where}: {err}{tail}", "limit") from None
    except _Refused as err:
        raise _error(error, f"{where}: {err}{_mark(err.problem_mark, ' ({})')}", "syntax") from None
    except yaml.constructor.ConstructorError as err:
        raise _error(error, f"{where}: a tag hermes does not read{_mark(err.problem_mark, ' ({})')}: "
                            f"{err.problem or 'unknown tag'}", "tag") from None
    except yaml.reader.ReaderError as err:  # pragma: no cover - _NOT_YAML finds these first
        c = chr(err.character) if isinstance(err.character, int) else str(err.character)
        raise _error(error, f"{where}: {describe_character(c)} at {at(text, err.position)} is not allowed in YAML",
                     "character") from None
    except yaml.MarkedYAMLError as err:
        problem = " ".join(str(err.problem or "").split())[:120]
        raise _error(error, f"{where}: not valid YAML{_mark(err.problem_mark, ' at {}')}"
                            + (f" ({problem})" if problem else ""), "syntax") from None
    except yaml.YAMLError as err:
        raise _error(error, f"{where}: not valid YAML ({' '.join(str(err).split())[:120]})", "syntax") from None
    except (ValueError, OverflowError, TypeError) as err:  # a scalar its tag cannot hold (a 5000-digit int, ...)
        text = " ".join(str(err).split())[:100]
        raise _error(error, f"{where}: a value hermes cannot read ({text})", "syntax") from None
    except RecursionError:  # pragma: no cover - the depth limit comes first
        raise _error(error, f"{where}: nested too deep", "limit") from None
    finally:
        if loader is not None:
            loader.dispose()


def _mark(mark, form: str) -> str:
    """``form`` filled with ``line L, column C`` of a PyYAML mark ("" without one)."""
    return "" if mark is None else form.format(f"line {mark.line + 1}, column {mark.column + 1}")


def load_yaml(path: str | Path, what: str | None = None, *, max_bytes: int = MAX_DOCUMENT_BYTES,
              error: type[HermesError] = ScenarioError) -> Any:
    """The data of the YAML file ``path`` (:func:`read_text`, then :func:`parse_yaml`)."""
    what = what or str(path)
    text = read_text(path, what, max_bytes=max_bytes, error=error)
    return parse_yaml(text, what if what == str(path) else f"{what}: {path}", error=error)


# -- JSON ------------------------------------------------------------------------------------------------------
def json_shape(data: bytes | str, *, chunk: int = 1 << 21) -> tuple[int, int]:
    """(deepest nesting of ``[`` / ``{``, an upper bound on the number of values) of a JSON text, strings
    skipped (a quote after an odd run of backslashes is escaped); computed without recursion, ``chunk`` bytes
    at a time, so its memory is a few tens of bytes per byte of one chunk whatever the document's size. A chunk
    without a backslash (most of a trace) takes a fast path: its quotes' parity by one XOR scan, and only its
    brackets' positions summed (25 MB of empty phases: 0.55 s, 2.6 s before)."""
    raw = data.encode() if isinstance(data, str) else bytes(data)
    depth = deepest = 0
    values = 1
    inside = 0  # 1 while in a string
    run = 0  # backslashes ending the previous chunk
    for start in range(0, len(raw), chunk):
        a = np.frombuffer(raw, dtype=np.uint8, count=min(chunk, len(raw) - start), offset=start)
        n = a.size
        quotes = a == 34
        bs = a == 92
        if run or bs.any():  # which quotes are escaped: those after an odd run of backslashes
            idx = np.arange(n, dtype=np.int64)
            last_other = np.maximum.accumulate(np.where(bs, -1, idx))  # the last non-backslash at or before i
            before = np.empty(n, dtype=np.int64)  # backslashes right before position i
            before[0] = run
            before[1:] = idx[:-1] - last_other[:-1]
            before[1:] += np.where(last_other[:-1] < 0, run, 0)
            quotes &= before % 2 == 0
            run = int(n - 1 - last_other[-1]) + (run if last_other[-1] < 0 else 0)
        state = np.bitwise_xor.accumulate(quotes.view(np.uint8)) ^ inside  # 1 inside a string (its opening quote too)
        out = (state == 0) & ~quotes
        at = np.flatnonzero(out & ((a == 91) | (a == 123) | (a == 93) | (a == 125)))
        if at.size:
            step = np.where((a[at] == 91) | (a[at] == 123), 1, -1)
            levels = np.cumsum(step) + depth
            deepest = max(deepest, int(levels.max()))
            depth = int(levels[-1])
            values += int(np.count_nonzero(step > 0))
        values += int(np.count_nonzero(out & (a == 44)))
        inside = int(state[-1])
    return deepest, values


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
        One line: not UTF-8, not JSON (with the line and column), nested too deep, too many values.
    """
    if isinstance(data, str) and data.startswith("\ufeff"):  # a byte order mark (RFC 8259 §8.1: may be ignored)
        data = data[1:]
    elif isinstance(data, (bytes, bytearray)) and data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    depth, values = json_shape(data)
    if depth > max_depth:
        raise error(f"{where}: nested {depth} levels deep (refused; hermes reads at most {max_depth} levels)")
    if values > max_values:
        raise error(f"{where}: about {values:,} values (refused; hermes reads at most {max_values:,})")
    text = decode_utf8(bytes(data), f"{where}:", error=error) if isinstance(data, (bytes, bytearray)) else data
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        what = err.msg
        if what.startswith("Invalid control character") and err.pos < len(text):
            what = describe_character(text[err.pos])  # inside a string (outside one it is "Expecting value")
        raise error(f"{where}: not JSON ({what}, line {err.lineno}, column {err.colno})") from None
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
