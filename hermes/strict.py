"""The base of hermes' input models: unknown keys refused, frozen, finite, and no bool where a number is meant.

YAML reads ``true``/``yes``/``on`` as booleans and pydantic's lax mode turns a boolean into ``1`` for an integer
field, so ``--set processors=true`` would run on one processor. :class:`Strict` refuses a boolean — alone or inside
a list or tuple — for every field whose type admits no boolean, whatever the field (a rule of the base class, not
of each field, so that a new field is covered too).
"""

from __future__ import annotations

import types
import typing
from typing import Any, get_args, get_origin

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

__all__ = ["Strict", "admits_bool", "admits_number", "holds_bool"]


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


class Strict(BaseModel):
    """Unknown keys refused, frozen, finite numbers only, and no boolean where a number (or a string) is meant."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool(cls, value: Any, info: ValidationInfo) -> Any:
        kind = cls.model_fields[info.field_name].annotation
        if holds_bool(value) and admits_number(kind) and not admits_bool(kind):
            shown = str(value).lower() if isinstance(value, (bool, np.bool_)) else "a list holding true or false"
            raise ValueError(f"must be a number, got {shown}")
        return value
