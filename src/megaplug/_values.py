"""Value types that stand in for heavy ones, and the JSON encoding of resolved values."""

from __future__ import annotations

import enum
from typing import Any

_TORCH_DTYPE_NAMES = frozenset(
    {"float32", "float16", "bfloat16", "float64", "float8_e4m3fn", "float8_e5m2", "int8",
     "uint8", "int32", "int64", "bool"}
)


class TorchDType:
    """A torch dtype by name, without importing torch.

    ``str()`` is ``'torch.bfloat16'`` like a real dtype's; equality holds with a real
    ``torch.dtype`` of the same name. ``to_torch()`` imports torch and returns the dtype.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        name = name.removeprefix("torch.")
        if name not in _TORCH_DTYPE_NAMES:
            raise ValueError(f"unknown torch dtype {name!r}")
        object.__setattr__(self, "name", name)

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("TorchDType is immutable")

    def __str__(self) -> str:
        return f"torch.{self.name}"

    def __repr__(self) -> str:
        return f"TorchDType({self.name!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TorchDType):
            return other.name == self.name
        if type(other).__name__ == "dtype" and type(other).__module__ == "torch":
            return str(other) == str(self)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("TorchDType", self.name))

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (TorchDType, (self.name,))  # immutable: rebuilt from its name, not set

    def to_torch(self) -> Any:
        import torch

        return getattr(torch, self.name)


def to_torch(value: Any) -> Any:
    """Replace :class:`TorchDType` (also inside lists and tuples) with real torch dtypes."""
    if isinstance(value, TorchDType):
        return value.to_torch()
    if isinstance(value, list):
        return [to_torch(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_torch(v) for v in value)
    return value


def encode(value: Any) -> Any:
    """JSON form of a resolved value: dtypes as ``'torch.x'``, enums as ``'Class.member'``,
    tuples as lists, sets as sorted lists."""
    if isinstance(value, enum.IntEnum):
        return int(value)  # signal.Signals: JSON and Megatron's parity files hold the number
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((encode(v) for v in value), key=repr)
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    return str(value)  # a TorchDType, a torch dtype, anything else: as it prints
