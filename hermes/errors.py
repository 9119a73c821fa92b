"""Errors that hermes reports to users as one line (never a traceback)."""

from __future__ import annotations

import re

__all__ = ["HermesError", "ScenarioError", "MeshError", "GraphError", "BalancerError", "OutputError",
           "RuntimeDefect", "keys_at", "validation_message", "one_line"]


class HermesError(Exception):
    """Base class: a user-facing problem with the input or the run; the CLI prints ``str(err)``."""


class ScenarioError(HermesError):
    """A malformed scenario: unknown key, wrong type, impossible value, missing file."""


class MeshError(HermesError):
    """A missing, unreadable or invalid mesh or graph file."""


class GraphError(HermesError):
    """A processor graph or model the algorithms cannot work on (disconnected, zero capacity, ...)."""


class BalancerError(HermesError):
    """An unknown balancer or bad balancer parameters."""


class OutputError(HermesError):
    """A result that cannot be written: a full disk, a read-only medium, a path that is not a directory."""


class RuntimeDefect(RuntimeError):
    """A defect of the code that runs on the runtime, found by the runtime (hermes.runtime.hosting's
    ``HostedError``: processors that wait for each other across processes, collectives called differently, a
    misused hosted communicator): never bad input, but still said in one line — the CLI prints ``str(err)``
    and exits 1 on every process, instead of a traceback."""


def validation_message(err, *, root: str = "value", more: bool = True, model=None) -> str:
    """One line from a pydantic ``ValidationError``: ``key.path: message`` of its first problem.

    The location skips pydantic's internal tags (``function-after[...]``, ``literal[...]``,
    ``constrained-float``); list indices show as numbers (``phases.0.tasks.3.time``). ``more`` appends how many
    other problems there are; ``root`` names a problem of the whole document. ``model`` (the model validated)
    lets an unknown key name the known keys closest to it (``mesh.fiel: unknown key (did you mean 'file'?)``,
    :func:`hermes.suggest.did_you_mean` over the keys of the section it is in).
    """
    errors = err.errors()
    e = errors[0]
    tags = ("function-", "literal[", "tagged-union[", "constrained-")
    loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and x.startswith(tags)))
    kind, ctx, got = e["type"], e.get("ctx") or {}, e.get("input")
    bounds = {"less_than_equal": ("at most", "le"), "less_than": ("below", "lt"),
              "greater_than_equal": ("at least", "ge"), "greater_than": ("above", "gt")}
    if kind == "extra_forbidden":
        from hermes.suggest import did_you_mean

        known = keys_at(model, e["loc"][:-1]) if model is not None and e["loc"] else []
        msg = "unknown key" + did_you_mean(str(e["loc"][-1]), known)
    elif kind in ("model_type", "dict_type", "model_attributes_type"):
        msg = f"must be a mapping of keys, got {_kind(got)}"
    elif kind in bounds:
        words, key = bounds[kind]
        msg = f"must be {words} {ctx[key]:g}, got {_shown(got)}"
    elif kind == "finite_number":
        msg = f"must be a finite number, got {_shown(got)}"
    elif kind == "literal_error" and isinstance(got, str):  # one of a few words: the closest ones named
        from hermes.suggest import did_you_mean

        words = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        msg = e["msg"].replace("Input should be", "must be") + f", got {got[:40]!r}" + did_you_mean(got, words)
    else:
        msg = e["msg"].replace("Value error, ", "").replace("Input should be", "must be")
        if kind.endswith(("_type", "_parsing")) and not isinstance(got, (dict, list)):
            msg = msg.split(",")[0] + f", got {_shown(got)}"
    tail = f" (and {len(errors) - 1} more problems)" if more and len(errors) > 1 else ""
    return f"{loc or root}: {msg}{tail}"


def keys_at(model, loc) -> list[str]:
    """The keys a pydantic ``model`` accepts at the location ``loc`` of a document (a path of field names, list
    indices, mapping keys and pydantic's tags): the fields (and aliases) of the sections found there — of all
    the models a field may hold (optional, in a list or a mapping, a union) —, [] when ``loc`` leads nowhere."""
    import typing

    from pydantic import BaseModel

    def models(annotation) -> list:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            return [annotation]
        return [m for a in typing.get_args(annotation) for m in models(a)]

    current = [model]
    for part in loc:
        found = [f for m in current for name, f in m.model_fields.items() if part in (name, f.alias)]
        if found:  # a field: the sections it holds; anything else (an index, a key, a tag) stays where it is
            current = [m for f in found for m in models(f.annotation)]
    return sorted({k for m in current for name, f in m.model_fields.items() if not f.exclude
                   for k in (name, f.alias) if k})


def _kind(value) -> str:
    """A value's kind in the user's (YAML/JSON) words."""
    names = {list: "a list", dict: "a mapping", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _shown(value) -> str:
    """A scalar as the user wrote it (short); containers by kind."""
    if isinstance(value, float):  # exactly, as hermes.bounds shows numbers (5e-324, not 4.94066e-324)
        from hermes.bounds import shown

        return shown(value)
    if isinstance(value, (dict, list)):
        return _kind(value)
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def one_line(text: str) -> str:
    """``text`` as one line: newlines and other control characters (from a path or a value a user gave) shown
    as escapes, so that an error is always exactly one line."""
    return "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in str(text))
