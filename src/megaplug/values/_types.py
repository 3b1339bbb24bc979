"""Value types that stand in for heavy ones, or say more than Python's own: a torch dtype
without torch, and a float setting that may be infinite."""

from __future__ import annotations

import math

from .._record import FrozenRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

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


def choice_name(choice: Any) -> str:
    """How a choice is shown and typed: an enum member by its name, anything else as text."""
    name = getattr(choice, "name", None)
    return str(name if name is not None and not isinstance(choice, (int, str)) else choice)
