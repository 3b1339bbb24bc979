"""The JSON form of resolved values, strict JSON text, and copies of values.

Output is strict: JSON that any parser reads (RFC 8259: no ``NaN`` or ``Infinity``) and YAML
(``sources._files.to_yaml``) that megaplug's config reading turns back into the same values.
A float that is not finite (``--clip-grad inf``, or one a plugin derives) is written as the
text ``"inf"``, ``"-inf"`` or ``"nan"``, which a float setting reads back as the same number.

Copies of values are made here rather than with the ``copy`` module, whose import (with
``weakref``) was a millisecond of every resolve.
"""

from __future__ import annotations

import enum
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

#: Values that cannot change in place: a copy may share them.
_IMMUTABLE = (str, int, float, bytes, type(None), enum.Enum)


def fresh(value: Any) -> Any:
    """A list, dict or set value copied (one level), so that a draft never changes a default;
    anything else as it is."""
    if type(value) in (list, dict, set):
        return value.copy()
    if isinstance(value, (list, dict, set)):
        import copy

        return copy.copy(value)
    return value


def deep_copy(value: Any) -> Any:
    """``copy.deepcopy(value)`` for the values settings hold -- containers of strings,
    numbers and enums -- without importing ``copy``; anything else goes to ``deepcopy``."""
    if isinstance(value, _IMMUTABLE):
        return value
    if type(value) is list:
        return [deep_copy(item) for item in value]
    if type(value) is dict:
        return {key: deep_copy(item) for key, item in value.items()}
    if type(value) in (set, frozenset, tuple) and all(isinstance(v, _IMMUTABLE) for v in value):
        return value.copy() if type(value) is set else value
    import copy

    return copy.deepcopy(value)


def encode(value: Any) -> Any:
    """JSON form of a resolved value: dtypes as ``'torch.x'``, enums as ``'Class.member'``,
    tuples as lists, sets as sorted lists, floats that are not finite as ``'inf'``,
    ``'-inf'`` or ``'nan'`` (JSON has no such numbers)."""
    if isinstance(value, enum.IntEnum):
        return int(value)  # signal.Signals: JSON and Megatron's parity files hold the number
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'inf', '-inf', 'nan': what a float setting reads back
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((encode(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return str(value)  # a TorchDType, a torch dtype, anything else: as it prints


def to_json(data: Any, *, indent: int | None = 1, sort_keys: bool = False) -> str:
    """Strict JSON text of JSON-able ``data``, floats that are not finite written as text.

    ``allow_nan=False`` is the guarantee: nothing megaplug prints holds ``NaN`` or
    ``Infinity``, which ``JSON.parse`` refuses and jq silently changes.
    """
    import json

    return json.dumps(finite_as_text(data), indent=indent, sort_keys=sort_keys, allow_nan=False)


def finite_as_text(data: Any) -> Any:
    """``data`` with each float that is not finite replaced by its text (``'inf'``), as
    megaplug writes it in JSON and YAML."""
    if isinstance(data, float):
        return data if math.isfinite(data) else encode(data)
    if isinstance(data, dict):
        return {key: finite_as_text(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite_as_text(item) for item in data]
    return data
