"""The base of hermes' input models: unknown keys refused, frozen, numbers within hermes' rule, and no bool where
a number is meant.

YAML reads ``true``/``yes``/``on`` as booleans and pydantic's lax mode turns a boolean into ``1`` for an integer
field, so ``--set processors=true`` would run on one processor. :class:`Strict` refuses a boolean — alone or inside
a list or tuple — for every field whose type admits no boolean, whatever the field (a rule of the base class, not
of each field, so that a new field is covered too).

The same way, every float a field holds once validated — alone, in a list, a tuple or a mapping — obeys the rule
for numbers (:func:`hermes.bounds.number_problem`): finite, and 0 or of magnitude 1e-100 to 1e100, so that no
subnormal (``5e-324``) and no value whose square overflows reaches a model, whatever range the field declares
(its own ``Field(ge=..., le=...)`` narrows it further). :func:`number_rule` is that check, which the balancers'
parameter models (:class:`hermes.balance.interface.Params`) apply too.
"""

from __future__ import annotations

import types
import typing
from typing import Any, get_args, get_origin

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from hermes.bounds import number_problem

__all__ = ["Strict", "admits_bool", "admits_number", "holds_bool", "number_rule"]


def admits_bool(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` may hold a boolean (``bool``, ``Any``, a model, a mapping or
    an unknown type: the check is left to them)."""
    if annotation is bool or annotation is Any:
        return True
    if annotation is None or annotation is type(None):
        return False
    if isinstance(annotation, type):
        return not issubclass(annotation, (int, float, str, list, tuple, set, frozenset)) or issubclass(
            annotation, bool)
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return admits_bool(get_args(annotation)[0])
    if origin is typing.Literal:
        return any(isinstance(a, bool) for a in get_args(annotation))
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        return any(admits_bool(a) for a in get_args(annotation) if a is not Ellipsis)
    return True  # dict[...] and other generics: their own validation decides


def admits_number(annotation: Any) -> bool:
    """Whether a field of type ``annotation`` may hold an int or a float (at any depth of lists and tuples)."""
    if isinstance(annotation, type):
        return issubclass(annotation, (int, float)) and not issubclass(annotation, bool)
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return admits_number(get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset):
        return any(admits_number(a) for a in get_args(annotation) if a is not Ellipsis)
    return False


def holds_bool(value: Any) -> bool:
    """Whether ``value`` is a boolean or a list/tuple holding one (at any depth)."""
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, (list, tuple)) and any(holds_bool(v) for v in value)


def number_rule(value: Any) -> Any:
    """``value`` (a field's validated value) unchanged if every float in it — alone or at any depth of lists,
    tuples and mappings — obeys the rule for numbers; ValueError naming the first that does not, and where it is
    in the value (``item 1 must be ...``, ``item 0.script.0.work must be ...``)."""
    found = _first_bad(value)
    if found is not None:
        path, problem = found
        raise ValueError(f"item {'.'.join(map(str, path))} {problem}" if path else problem)
    return value


def _first_bad(value: Any, path: tuple = ()) -> tuple[tuple, str] | None:
    """(where, why) of the first float in ``value`` that breaks the rule for numbers, or None."""
    if isinstance(value, (float, np.floating)):
        problem = number_problem(float(value))
        return None if problem is None else (path, problem)
    if isinstance(value, (list, tuple, dict)):
        for key, item in (value.items() if isinstance(value, dict) else enumerate(value)):
            found = _first_bad(item, (*path, key))
            if found is not None:
                return found
    return None


class Strict(BaseModel):
    """Unknown keys refused, frozen, numbers within hermes' rule (:func:`number_rule`), and no boolean where a
    number (or a string) is meant."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        kind = cls.model_fields[info.field_name].annotation
        if holds_bool(value) and admits_number(kind) and not admits_bool(kind):
            shown = str(value).lower() if isinstance(value, (bool, np.bool_)) else "a list holding true or false"
            raise ValueError(f"must be a number, got {shown}")
        return value

    @field_validator("*", mode="after")
    @classmethod
    def _number_rule(cls, value: Any) -> Any:
        return number_rule(value)
