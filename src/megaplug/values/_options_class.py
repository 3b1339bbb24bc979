"""The options classes plugins declare with ``@options``: dataclasses, built cheaply.

``@dataclass`` compiles an ``__init__``, ``__repr__`` and ``__eq__`` per class and imports
``inspect``: most of a big plugin's import time, on every rank. Here those methods are
shared, read the fields the kernel records (``__megaplug_fields__``), and the class becomes
a real dataclass only when ``dataclasses`` first looks at it.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, get_origin

from .._options import _MARKER_TYPES, MISSING, _Field, _from_dataclass_field, _marker_default


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


def _take_marker_defaults(target: type) -> None:
    """Replace each marker written as a field's default by the default it stands for,
    keeping the marker in ``__megaplug_markers__`` for the kernel."""
    declared: dict[str, tuple[Any, ...]] = {}
    for name, annotation in target.__dict__.get("__annotations__", {}).items():
        marker = target.__dict__.get(name)
        if not isinstance(marker, _MARKER_TYPES):
            continue
        if (annotation.startswith(("Annotated[", "typing.Annotated[",
                                   "typing_extensions.Annotated["))
                if isinstance(annotation, str) else get_origin(annotation) is Annotated):
            raise TypeError(f"{target.__name__}.{name}: declare its markers either in Annotated "
                            "metadata or as the default, not both")
        declared[name] = (marker,)
        setattr(target, name, _marker_default(marker, annotation))
    target.__megaplug_markers__ = declared  # type: ignore[attr-defined]


def options(cls: type | None = None, /) -> Any:
    """Declare a plugin's options dataclass — like ``@dataclass``, built cheaply.

    Its keyword-only ``__init__``, ``__repr__`` and ``__eq__`` are shared methods, not code
    compiled per class. A marker written as a field's default (``x: int = Flag(default=1)``)
    is kept for the kernel and the plain default left on the class; a list, dict or set
    default is copied for each instance. The class becomes a real dataclass the first time
    ``dataclasses`` looks at it: importing ``dataclasses`` (and ``inspect``) is a tenth of a
    process that declares every flag, and only a plugin asking for its options object needs it.
    """

    def wrap(target: type) -> type:
        _take_marker_defaults(target)
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

    return wrap if cls is None else wrap(cls)


def _own_field(target: type, name: str) -> _Field:
    annotation, default = target.__annotations__[name], target.__dict__.get(name, MISSING)
    if type(default).__name__ == "Field" and type(default).__module__ == "dataclasses":
        return _from_dataclass_field(default, name, annotation)  # its module imported them
    if isinstance(default, (list, dict, set)):
        return _Field(name, annotation, default_factory=functools.partial(type(default), default))
    return _Field(name, annotation, default)


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
