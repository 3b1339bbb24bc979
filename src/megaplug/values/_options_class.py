"""The options classes plugins declare with ``@options``: dataclasses, built cheaply.

``@dataclass`` compiles an ``__init__``, ``__repr__`` and ``__eq__`` per class and imports
``inspect``: most of a big plugin's import time, on every rank. Here those methods are
shared, read the fields the kernel records (``__megaplug_fields__``), and the class becomes
a real dataclass only when ``dataclasses`` first looks at it.
"""

from __future__ import annotations

import functools

from .._record import Record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class _Missing:
    """A marker's ``default=`` when none is given (the field's default then applies)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


# Not dataclasses.MISSING: reading a flag table back from the snapshot declares nothing,
# and must not import dataclasses (and through it ``inspect``) at start-up.
MISSING: Any = _Missing()


class OptionsField(Record):
    """A field of an options class as the kernel reads it: name, annotation, and its default
    or the factory of one (``MISSING`` where there is none)."""

    __slots__ = ("name", "type", "default", "default_factory")

    def __init__(self, name: str, type: Any, default: Any = MISSING,
                 default_factory: Any = MISSING) -> None:
        # not _fill(locals()): one per field, ~900 as the plugins are imported
        self.name, self.type, self.default, self.default_factory = (
            name, type, default, default_factory)


def from_dataclass_field(field: Any, name: str, annotation: Any) -> OptionsField:
    """A ``dataclasses.Field``'s default or factory as an :class:`OptionsField`."""
    from dataclasses import MISSING as NO_DEFAULT

    default, factory = (MISSING if value is NO_DEFAULT else value
                        for value in (field.default, field.default_factory))
    return OptionsField(name, annotation, default, factory)


def build(target: type) -> type:
    """Give an options class (its markers already taken, see ``megaplug.options``) its field
    record, the shared methods, and a ``__dataclass_fields__`` made on first use."""
    fields = {field.name: field for klass in reversed(target.__mro__[1:])
              for field in klass.__dict__.get("__megaplug_fields__", ())}
    fields.update((name, _own_field(target, name)) for name, annotation
                  in target.__dict__.get("__annotations__", {}).items()
                  if not str(annotation).startswith(("ClassVar", "typing.ClassVar")))
    target.__megaplug_fields__ = tuple(fields.values())  # type: ignore[attr-defined]
    target.__dataclass_fields__ = _DataclassFields(target)  # type: ignore[attr-defined]
    target.__init__ = _options_init  # type: ignore[misc]
    target.__repr__ = _options_repr  # type: ignore[method-assign]
    target.__eq__ = _options_eq  # type: ignore[method-assign]
    target.__hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq
    return target


def _options_init(self: Any, **values: Any) -> None:
    for field in self.__megaplug_fields__:
        if field.name in values:
            value = values.pop(field.name)
        elif field.default is not MISSING:
            value = field.default
        elif field.default_factory is not MISSING:
            value = field.default_factory()
        else:
            raise TypeError(f"{type(self).__name__}() missing setting {field.name!r}")
        object.__setattr__(self, field.name, value)
    if values:
        raise TypeError(f"{type(self).__name__}() got unknown settings: "
                        f"{', '.join(sorted(values))}")


def _options_repr(self: Any) -> str:
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__megaplug_fields__)
    return f"{type(self).__name__}({inner})"


def _options_eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return all(getattr(self, f.name) == getattr(other, f.name) for f in self.__megaplug_fields__)


def _own_field(target: type, name: str) -> OptionsField:
    annotation, default = target.__annotations__[name], target.__dict__.get(name, MISSING)
    if type(default).__name__ == "Field" and type(default).__module__ == "dataclasses":
        return from_dataclass_field(default, name, annotation)  # its module imported them
    if isinstance(default, (list, dict, set)):
        copy = functools.partial(type(default), default)
        return OptionsField(name, annotation, default_factory=copy)
    return OptionsField(name, annotation, default)


class _DataclassFields:
    """``__dataclass_fields__`` of an ``@options`` class until something reads it, which then
    makes the class a dataclass (``dataclasses.fields``, ``asdict``, ``is_dataclass``)."""

    def __init__(self, options_class: type) -> None:
        self.options_class = options_class

    def __get__(self, instance: Any, owner: type) -> Any:
        import dataclasses

        target = self.options_class
        del target.__dataclass_fields__  # type: ignore[attr-defined]
        for field in target.__megaplug_fields__:  # type: ignore[attr-defined]
            default = target.__dict__.get(field.name)
            if field.default_factory is not MISSING and isinstance(default, (list, dict, set)):
                setattr(target, field.name, dataclasses.field(
                    default_factory=field.default_factory))
        dataclasses.dataclass(target, init=False, repr=False, eq=False)
        return target.__dict__["__dataclass_fields__"]
