"""Megatron's own value types for a resolved namespace.

megaplug resolves without torch or megatron.core, with stand-ins: :class:`TorchDType` for
dtypes and its plugins' enum classes. A namespace handed to Megatron's code must hold
Megatron's types (``args.attention_backend == AttnBackend.auto`` compares classes), so the
facade swaps them: dtypes for torch's, and each enum whose class names its Megatron
counterpart in ``__megatron_type__`` (``"module:Class"``) for that class's member of the
same name -- where megatron.core is installed. Without it the stand-ins remain.
"""

from __future__ import annotations

import enum
import importlib

from ..values._types import TorchDType

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable

_UNAVAILABLE = object()
_COUNTERPARTS: dict[type, Any] = {}


def megatron_counterpart(enum_class: type) -> type | None:
    """The Megatron class an enum stands in for, or None (not declared or not installed)."""
    found = _COUNTERPARTS.get(enum_class)
    if found is None:
        found = _COUNTERPARTS[enum_class] = _import_counterpart(enum_class)
    return None if found is _UNAVAILABLE else found


def _import_counterpart(enum_class: type) -> Any:
    path = getattr(enum_class, "__megatron_type__", None)
    if not path:
        return _UNAVAILABLE
    module_name, _, name = path.partition(":")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError):
        return _UNAVAILABLE


def to_native(value: Any) -> Any:
    """``value`` with stand-ins replaced by Megatron's types (inside lists and tuples too)."""
    if isinstance(value, TorchDType):
        return value.to_torch()
    if isinstance(value, enum.Enum):
        counterpart = megatron_counterpart(type(value))
        return value if counterpart is None else counterpart[value.name]
    if isinstance(value, list):
        return [to_native(item) for item in value]
    if isinstance(value, tuple):
        return tuple(to_native(item) for item in value)
    return value


def from_native(value: Any, stand_in_for: Callable[[type], type | None]) -> Any:
    """The inverse of :func:`to_native` for enums: a Megatron enum member (set on a namespace
    by its caller, or read from a checkpoint) becomes the stand-in that megaplug's plugins
    compare with. ``stand_in_for(enum_class)`` gives the stand-in class for an enum class
    that declares no counterpart (``None``: none, the value stays)."""
    if isinstance(value, enum.Enum) and getattr(type(value), "__megatron_type__", None) is None:
        stand_in = stand_in_for(type(value))
        return value if stand_in is None else stand_in[value.name]
    if isinstance(value, list):
        return [from_native(item, stand_in_for) for item in value]
    if isinstance(value, tuple):
        return tuple(from_native(item, stand_in_for) for item in value)
    return value
