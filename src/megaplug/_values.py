"""Value types that stand in for heavy ones, and the JSON and YAML forms of resolved values.

Output is strict: JSON that any parser reads (RFC 8259: no ``NaN`` or ``Infinity``) and YAML
that megaplug's config reading turns back into the same values. A float that is not finite
(``--clip-grad inf``, or one a plugin derives) is written as the text ``"inf"``, ``"-inf"``
or ``"nan"``, which a float setting reads back as the same number.
"""

from __future__ import annotations

import enum
import importlib
import math
from typing import Any

from ._record import FrozenRecord

_TORCH_DTYPE_NAMES = frozenset(
    {"float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "int8",
     "uint8", "int32", "int64", "bool"}
)


class TorchDType(FrozenRecord):
    """A torch dtype by name, without importing torch.

    ``str()`` is ``'torch.bfloat16'`` like a real dtype's; equality holds with a real
    ``torch.dtype`` of the same name. ``to_torch()`` imports torch and returns the dtype.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        name = name.removeprefix("torch.")
        if name not in _TORCH_DTYPE_NAMES:
            raise ValueError(f"unknown torch dtype {name!r}")
        self._fill(locals())

    def __str__(self) -> str:
        return f"torch.{self.name}"

    def __repr__(self) -> str:
        return f"TorchDType({self.name!r})"

    def __eq__(self, other: object) -> bool:
        return str(other) == str(self) if is_dtype(other) else NotImplemented

    __hash__ = FrozenRecord.__hash__  # defining __eq__ would otherwise unset it

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (TorchDType, (self.name,))  # immutable: rebuilt from its name, not set

    def to_torch(self) -> Any:
        import torch

        return getattr(torch, self.name)


def is_dtype(value: Any) -> bool:
    """Whether ``value`` is a dtype: a :class:`TorchDType` or a real ``torch.dtype``."""
    kind = type(value)
    return kind is TorchDType or (kind.__name__ == "dtype" and kind.__module__ == "torch")


def to_torch(value: Any) -> Any:
    """Replace :class:`TorchDType` (also inside lists and tuples) with real torch dtypes."""
    if isinstance(value, TorchDType):
        return value.to_torch()
    if type(value) in (list, tuple):
        return type(value)(to_torch(v) for v in value)
    return value


def float_or_infinity(text: str) -> float:
    """The ``type=`` of a float setting where infinity means something: a finite number or
    ``inf`` (``--clip-grad inf``: measure the gradient norm, never clip). Every other float
    setting takes finite numbers only; NaN and -inf no setting can mean.
    """
    value = float(text)
    if math.isnan(value) or value == -math.inf:
        raise ValueError(f"{text!r} is not a number this setting can take; give a finite "
                         "number or inf")
    return value


# Shown as ``float`` wherever a type is named (``megaplug flags``, messages, argparse's
# "invalid float value"): it is one, as Megatron declares the setting.
float_or_infinity.__name__ = "float"


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


def resolve_reference(reference: str) -> Any:
    """The object ``module:qualname`` names (how a stored flag table and a named rule group
    refer to code: by where it lives, never as code to run)."""
    module_name, _, qualname = reference.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target
