"""Small value classes for the kernel's records, without ``@dataclass``.

``@dataclass`` compiles code per class at import, a third of the kernel's import time on every
training rank. So records are ``__slots__`` classes whose ``__init__`` ends with ``self._fill(
locals())`` (or, made by the thousand, assigns each field), with ``==``, hash, ``repr`` by field.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_SETTERS: dict[type, tuple[tuple[str, Any], ...]] = {}


class Record:
    """Equality, hashing and ``repr`` by the ``__slots__`` fields, minus ``_hidden`` ones."""

    __slots__: tuple[str, ...] = ()
    #: Fields left out of equality, hashing and ``repr`` (caches, bulky payloads).
    _hidden: tuple[str, ...] = ()

    def _fill(self, values: dict[str, Any]) -> None:
        """Set every field from ``values`` (the ``locals()`` of ``__init__``)."""
        # Through the slots' own setters, looked up once per class: half the time of
        # object.__setattr__ by name, for the ~1,000 provenance records of every resolve.
        cls = type(self)
        setters = _SETTERS.get(cls)
        if setters is None:
            setters = _SETTERS[cls] = tuple((name, getattr(cls, name).__set__)
                                            for name in cls.__slots__)
        for name, setter in setters:
            setter(self, values[name])

    def _key(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__ if name not in self._hidden)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__
                          if name not in self._hidden)
        return f"{type(self).__name__}({shown})"


class FrozenRecord(Record):
    """A record whose fields cannot be reassigned after ``__init__``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; cannot delete {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled and copied by field: the default restores each field through the
        # __setattr__ that refuses it
        fields = {name: getattr(self, name) for klass in type(self).__mro__
                  for name in klass.__dict__.get("__slots__", ())}
        return _restored, (type(self), fields)


def _restored(cls: type, fields: dict[str, Any]) -> Any:
    """A frozen record made again from its fields (what :meth:`FrozenRecord.__reduce__`
    pickles)."""
    record = cls.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(record, name, value)
    return record


class MutableRecord(Record):
    """A record that may change; unhashable, like a dataclass with ``eq``."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]
