"""Declaring settings: the ``Flag`` / ``FromEnv`` / ``Computed`` markers and ``FlagSpec``.

A plugin describes its settings as an options dataclass whose fields carry one of these
markers as its default or in ``Annotated`` metadata. The kernel turns each field into one
or more :class:`FlagSpec` records, the single description every other part of megaplug
(parser, config files, ``megaplug flags``, docs) works from.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import math
import types
import typing
from argparse import ArgumentTypeError
from typing import Annotated, Any, Callable, Sequence, get_args, get_origin

from ._record import MutableRecord, Record

MISSING: Any = dataclasses.MISSING

#: Action names a flag may use; argparse classes are mapped onto these.
ACTIONS = (
    "store",
    "store_true",
    "store_false",
    "store_const",
    "boolean_optional",
    "append",
    "count",
)

_BOOLEAN_ACTIONS = ("store_true", "store_false", "boolean_optional")

_ARGPARSE_ACTION_NAMES = {
    "store": "_StoreAction",
    "store_true": "_StoreTrueAction",
    "store_false": "_StoreFalseAction",
    "store_const": "_StoreConstAction",
    "boolean_optional": "BooleanOptionalAction",
    "append": "_AppendAction",
    "count": "_CountAction",
}


def _unset(value: Any) -> bool:
    return value is None or value is False or value is MISSING or value in ("", ())


class _Marker(Record):
    """Shared value semantics of the markers: compared, hashed and shown by their fields.

    A plugin module builds one marker per setting at import time -- about 900 of them on
    every training rank -- so they are plain ``__slots__`` classes.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        # identity and emptiness, not equality: a default of 0 is shown (0 == False)
        shown = (f"{name}={getattr(self, name)!r}" for name in self.__slots__
                 if not _unset(getattr(self, name)))
        return f"{type(self).__name__}({', '.join(shown)})"


class Flag(_Marker):
    """Marks an options-dataclass field as a command-line flag.

    Write it as the field's default (``num_layers: Optional[int] = Flag(default=None,
    help=...)``) or in ``Annotated`` metadata (``Annotated[Optional[int], Flag(help=...)] =
    None``). Everything not given is inferred from the field: option string
    ``--field-name``, ``type`` from the annotation (``Optional[X]`` is ``X``, ``list[X]``
    gives ``nargs='+'``, an ``Enum`` is parsed by member name, ``Literal`` gives choices),
    and ``store_true`` / ``store_false`` for ``bool`` fields defaulting to False / True.
    Without ``default=`` a flag defaults as in argparse: None, or False for a ``bool``.
    A field may carry several ``Flag`` markers in ``Annotated`` metadata that share its
    dest (``--x`` / ``--no-x``); there ``default=`` overrides the field's default for
    that spelling.
    """

    __slots__ = ("option_strings", "help", "action", "type", "choices", "nargs", "const",
                 "metavar", "default", "hidden", "deprecated", "env")

    def __init__(
        self,
        *option_strings: str,
        help: str = "",
        action: str | None = None,
        type: Callable[[str], Any] | None = None,
        choices: Sequence[Any] | None = None,
        nargs: int | str | None = None,
        const: Any = None,
        metavar: str | None = None,
        default: Any = MISSING,
        hidden: bool = False,
        deprecated: str | None = None,
        env: str | None = None,
    ) -> None:
        if action is not None and action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        self.option_strings = option_strings
        self.help = help
        self.action = action
        self.type = type
        self.choices = tuple(choices) if choices is not None else None
        self.nargs = nargs
        self.const = const
        self.metavar = metavar
        self.default = default
        self.hidden = hidden
        self.deprecated = deprecated
        self.env = env


class FromEnv(_Marker):
    """Marks a field whose value comes from an environment variable, not a flag."""

    __slots__ = ("variable", "help", "default")

    def __init__(self, variable: str, help: str = "", *, default: Any = MISSING) -> None:
        self.variable = variable
        self.help = help
        self.default = default


class Computed(_Marker):
    """Marks a field that no user sets: a plugin derives it (e.g. ``data_parallel_size``)."""

    __slots__ = ("help", "default")

    def __init__(self, help: str = "", *, default: Any = MISSING) -> None:
        self.help = help
        self.default = default


_MARKER_TYPES = (Flag, FromEnv, Computed)


class FlagSpec(MutableRecord):
    """The kernel's record of one setting: a flag spelling set, an env value or a computed one.

    ``kind`` is ``"flag"``, ``"env"`` or ``"computed"``. Several flag specs may share a
    dest when they come from the same plugin (``--x`` and ``--no-x``).
    """

    __slots__ = ("dest", "plugin", "kind", "option_strings", "action", "type", "default",
                 "choices", "nargs", "const", "metavar", "help", "hidden", "deprecated", "env",
                 "deprecated_spellings")

    def __init__(
        self,
        dest: str,
        plugin: str,
        kind: str = "flag",
        option_strings: tuple[str, ...] = (),
        action: str = "store",
        type: Callable[[str], Any] | None = None,
        default: Any = None,
        choices: tuple[Any, ...] | None = None,
        nargs: int | str | None = None,
        const: Any = None,
        metavar: str | None = None,
        help: str = "",
        hidden: bool = False,
        deprecated: str | None = None,
        env: str | None = None,
        deprecated_spellings: tuple[str, ...] = (),
    ) -> None:
        self.dest = dest
        self.plugin = plugin
        self.kind = kind
        self.option_strings = option_strings
        self.action = action
        self.type = type
        self.default = default
        self.choices = choices
        self.nargs = nargs
        self.const = const
        self.metavar = metavar
        self.help = help
        self.hidden = hidden
        self.deprecated = deprecated
        self.env = env
        self.deprecated_spellings = deprecated_spellings

    @property
    def type_name(self) -> str | None:
        if self.type is None:
            return None
        return getattr(self.type, "__name__", type(self.type).__name__)

    @property
    def argparse_action(self) -> str:
        return _ARGPARSE_ACTION_NAMES[self.action]

    @property
    def primary(self) -> str:
        """The spelling shown in messages: the first option string, else the dest."""
        return self.option_strings[0] if self.option_strings else self.dest

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append")

    def convert(self, raw: Any) -> Any:
        """``raw`` in this setting's type, or ``ValueError`` saying what is wrong with it.

        The one conversion of every source. ``raw`` is text (the command line, the
        environment), a list of texts (a flag taking several values), or a value already
        loaded (a YAML or JSON config file, a caller's defaults, a checkpoint). Text goes
        through the flag's ``type`` as argparse would; a loaded number must fit the type
        (``2.0`` is the int 2, ``2.5`` is not); an enum member or a dtype is taken as it
        is; any other loaded value goes through ``type`` as its JSON text (``[1, 0, 1]``
        for a layer pattern). Choices are checked separately, by :meth:`check_choice`.
        """
        if raw is None or self.kind == "computed":
            return raw
        if self.action in _BOOLEAN_ACTIONS:
            if isinstance(raw, bool):
                return raw
            raise ValueError(f"expected true or false, got {raw!r}")
        if not self.takes_value:
            return raw  # store_const / count: the value as loaded
        if self.nargs in ("+", "*") or isinstance(self.nargs, int):
            if not isinstance(raw, (list, tuple)):
                raw = raw.split() if isinstance(raw, str) else [raw]
            return [self._convert_one(item) for item in raw]
        return self._convert_one(raw)

    def _convert_one(self, raw: Any) -> Any:
        if not isinstance(raw, str):
            if self.type in (int, float, str, None):
                return self._plain_scalar(raw)
            if isinstance(raw, enum.Enum) or type(raw).__module__ in ("megaplug._values", "torch"):
                return raw  # already the parsed value (a caller default, a checkpoint)
        try:
            text = raw if isinstance(raw, str) else json.dumps(raw)
            return text if self.type is None else self.type(text)
        except (TypeError, ValueError, ArgumentTypeError, OverflowError) as exc:
            detail = f" ({exc})" if str(exc) else ""
            raise ValueError(f"invalid {self.type_name} value {raw!r}{detail}") from None

    def _plain_scalar(self, raw: Any) -> Any:
        """A loaded scalar for an ``int``, ``float`` or ``str`` flag, or ``ValueError``."""
        # A plugin reads an int flag as an int: a 1.5, a list or a mapping must stop here.
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            if self.type in (str, None):
                return str(raw)  # as the same number typed on the command line
            if self.type is float:
                return float(raw)
            if isinstance(raw, int) or (math.isfinite(raw) and raw.is_integer()):
                return int(raw)
        raise ValueError(f"expected {self.type_name or 'text'}, got {raw!r}")

    def argparse_call(self) -> tuple[tuple[str, ...], dict[str, Any]]:
        """This flag as ``parser.add_argument(*strings, **kwargs)`` arguments.

        The one translation from a spec to argparse, for ``--help`` and for callers that
        want a plain argparse parser of megaplug's flags.
        """
        import argparse

        strings, kwargs = self.option_strings, {
            "dest": self.dest, "default": self.default, "action": self.action,
            "help": argparse.SUPPRESS if self.hidden else (self.help or None)}
        if self.action == "boolean_optional":
            kwargs["action"] = argparse.BooleanOptionalAction
            strings = tuple(o for o in strings if not o.startswith("--no-")) or strings
        if self.takes_value:
            if self.metavar is None and self.choices is not None:
                kwargs["metavar"] = "{" + ",".join(map(choice_name, self.choices)) + "}"
            for key in ("type", "nargs", "choices", "metavar"):
                if getattr(self, key) is not None:
                    kwargs[key] = getattr(self, key)
        if self.action == "store_const" or (self.nargs == "?" and self.const is not None):
            kwargs["const"] = self.const
        return strings, kwargs

    def check_choice(self, value: Any) -> bool:
        if self.choices is None or value is None:
            return True
        values = value if isinstance(value, list) else [value]
        return all(item in self.choices for item in values)


def choice_name(choice: Any) -> str:
    """How a choice is shown and typed: an enum member by its name, anything else as text."""
    name = getattr(choice, "name", None)
    return str(name if name is not None and not isinstance(choice, (int, str)) else choice)


def enum_by_name(enum_class: type[enum.Enum]) -> Callable[[str], enum.Enum]:
    """A ``type=`` callable that parses an enum member by name (``'flash'`` -> ``AttnBackend.flash``)."""  # noqa: E501

    def parse(text: str) -> enum.Enum:
        name = text.split(".", 1)[1] if text.startswith(enum_class.__name__ + ".") else text
        try:
            return enum_class[name]
        except KeyError:
            names = ", ".join(member.name for member in enum_class)
            raise ValueError(f"choose from {names}") from None

    parse.__name__ = enum_class.__name__
    return parse


def _is_optional(annotation: Any) -> tuple[bool, Any]:
    origin = get_origin(annotation)
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1 and len(get_args(annotation)) == 2:
            return True, args[0]
    return False, annotation


_INFERRED: dict[Any, dict[str, Any]] = {}


def _infer_from_annotation(annotation: Any) -> dict[str, Any]:
    """What the field's type says about type, nargs and choices (cached: a few hundred
    fields share a handful of annotations such as ``Optional[int]``)."""
    try:
        return _INFERRED[annotation]
    except (KeyError, TypeError):
        pass
    inferred = _infer(annotation)
    try:
        _INFERRED[annotation] = inferred
    except TypeError:  # an unhashable annotation is simply not cached
        pass
    return inferred


def _infer(annotation: Any) -> dict[str, Any]:
    _, base = _is_optional(annotation)
    origin = get_origin(base)
    if origin in (list, tuple, typing.List, typing.Tuple):
        args = [a for a in get_args(base) if a is not Ellipsis]
        inner = _infer(args[0]) if args else {}
        return {**inner, "nargs": "+"}
    if origin is typing.Literal:
        choices = get_args(base)
        return {"type": type(choices[0]), "choices": choices}
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return {"type": enum_by_name(base), "choices": tuple(base)}
    if base in (int, float, str):
        return {"type": base}
    if base is bool:
        return {"is_bool": True}
    return {}


def _default_spelling(dest: str) -> str:
    return "--" + dest.replace("_", "-")


_SPEC_CACHE: dict[type, list[tuple[Any, ...]]] = {}


def _declared_markers(options_class: type) -> dict[str, tuple[Any, ...]]:
    """Markers that ``@options`` took from field defaults, base classes first."""
    declared: dict[str, tuple[Any, ...]] = {}
    for klass in reversed(options_class.__mro__):
        declared.update(klass.__dict__.get("__megaplug_markers__", {}))
    return declared


def _field_markers(options_class: type) -> list[tuple[Any, ...]]:
    """(field, annotation, markers) for each field, cached per class."""
    cached = _SPEC_CACHE.get(options_class)
    if cached is not None:
        return cached
    hints: dict[str, Any] | None = None
    declared = _declared_markers(options_class)
    rows = []
    for field in dataclasses.fields(options_class):
        annotation = field.type
        if isinstance(annotation, str):
            if hints is None:
                hints = typing.get_type_hints(options_class, include_extras=True)
            annotation = hints[field.name]
        markers: tuple[Any, ...] = declared.get(field.name, ())
        if get_origin(annotation) is Annotated:
            if not markers:
                markers = tuple(m for m in annotation.__metadata__ if isinstance(m, _MARKER_TYPES))
            annotation = get_args(annotation)[0]
        if not markers and isinstance(field.default, _MARKER_TYPES):
            # a plain @dataclass with a marker as the default: the marker is the declaration
            markers = (field.default,)
        rows.append((field, annotation, markers))
    _SPEC_CACHE[options_class] = rows
    return rows


def _field_default(field: dataclasses.Field, annotation: Any) -> Any:  # type: ignore[type-arg]
    if isinstance(field.default, _MARKER_TYPES):
        return _marker_default(field.default, annotation)
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:  # type: ignore[misc]
        return field.default_factory()  # type: ignore[misc]
    return None


def _is_bool(annotation: Any) -> bool:
    # under ``from __future__ import annotations`` the decorator sees the text, not the type
    return annotation is bool or annotation == "bool"


def _is_annotated(annotation: Any) -> bool:
    if isinstance(annotation, str):
        return annotation.startswith(("Annotated[", "typing.Annotated[",
                                      "typing_extensions.Annotated["))
    return get_origin(annotation) is Annotated


def _marker_default(marker: Any, annotation: Any) -> Any:
    """The field default a marker written as the default stands for (argparse's rule when
    it has no ``default=``: None, False for a ``bool`` flag, True for ``store_false``)."""
    if marker.default is not MISSING:
        return marker.default
    if isinstance(marker, Flag):
        if marker.action == "store_false":
            return True
        if marker.action == "store_true" or (marker.action is None and _is_bool(annotation)):
            return False
    return None


def specs_from_options(options_class: type, plugin: str) -> list[FlagSpec]:
    """Turn an options dataclass into flag specs (one per marker; unmarked fields are flags)."""
    if not dataclasses.is_dataclass(options_class):
        raise TypeError(f"{options_class!r} is not a dataclass")
    specs: list[FlagSpec] = []
    for field, annotation, markers in _field_markers(options_class):
        default = _field_default(field, annotation)
        inferred = _infer_from_annotation(annotation)
        if not markers:
            markers = (Flag(),)
        for marker in markers:
            if isinstance(marker, FromEnv):
                specs.append(
                    FlagSpec(
                        dest=field.name,
                        plugin=plugin,
                        kind="env",
                        type=inferred.get("type"),
                        default=default,
                        help=marker.help,
                        env=marker.variable,
                    )
                )
                continue
            if isinstance(marker, Computed):
                specs.append(
                    FlagSpec(dest=field.name, plugin=plugin, kind="computed", default=default,
                             help=marker.help)
                )
                continue
            specs.append(_flag_spec(field.name, plugin, marker, inferred, default))
    return specs


def _flag_spec(
    dest: str, plugin: str, marker: Flag, inferred: dict[str, Any], field_default: Any
) -> FlagSpec:
    default = field_default if marker.default is MISSING else marker.default
    action = marker.action
    if action is None:
        if inferred.get("is_bool") and marker.type is None:
            action = "store_false" if default is True else "store_true"
        else:
            action = "store"
    option_strings = marker.option_strings or (_default_spelling(dest),)
    flag_type = marker.type
    choices = marker.choices
    nargs = marker.nargs
    if action in ("store", "append"):
        if flag_type is None:
            flag_type = inferred.get("type")
        if choices is None and marker.type is None:
            choices = inferred.get("choices")
        if nargs is None and "nargs" in inferred:
            nargs = inferred["nargs"]
    elif action == "boolean_optional":
        flag_type = marker.type
    else:
        flag_type = None
    if action == "boolean_optional":
        option_strings = _with_negatives(option_strings)
    const = marker.const
    if action == "store_true":
        const = True
    elif action == "store_false":
        const = False
    return FlagSpec(
        dest=dest,
        plugin=plugin,
        option_strings=option_strings,
        action=action,
        type=flag_type,
        default=default,
        choices=tuple(choices) if choices is not None else None,
        nargs=nargs,
        const=const,
        metavar=marker.metavar,
        help=marker.help,
        hidden=marker.hidden,
        deprecated=marker.deprecated,
        env=marker.env,
    )


def _with_negatives(option_strings: tuple[str, ...]) -> tuple[str, ...]:
    """BooleanOptionalAction spellings: each ``--x`` followed by its ``--no-x``."""
    result: list[str] = []
    for option in option_strings:
        if option.startswith("--no-"):
            continue
        result.append(option)
        if option.startswith("--"):
            result.append("--no-" + option[2:])
    return tuple(result)


def spec_from_argparse(
    option_strings: Sequence[str], kwargs: dict[str, Any], plugin: str
) -> FlagSpec:
    """Build a spec from a plain ``add_argument(*option_strings, **kwargs)`` call."""
    import argparse

    kwargs = dict(kwargs)
    action = kwargs.pop("action", "store")
    if isinstance(action, type):
        action = {
            argparse.BooleanOptionalAction: "boolean_optional",
        }.get(action, action)
    if not isinstance(action, str) or action not in ACTIONS:
        raise ValueError(f"unsupported action {action!r} for {option_strings}")
    dest = kwargs.pop("dest", None)
    if dest is None:
        longs = [o for o in option_strings if o.startswith("--")]
        dest = (longs or list(option_strings))[0].lstrip("-").replace("-", "_")
    help_text = kwargs.pop("help", "") or ""
    hidden = help_text is argparse.SUPPRESS
    if hidden:
        help_text = ""
    default = kwargs.pop("default", MISSING)
    if default is MISSING:
        default = {"store_true": False, "store_false": True}.get(action)
    const = kwargs.pop("const", None)
    if action == "store_true":
        const = True
    elif action == "store_false":
        const = False
    choices = kwargs.pop("choices", None)
    if action == "boolean_optional":
        option_strings = _with_negatives(tuple(option_strings))
    spec = FlagSpec(
        dest=dest,
        plugin=plugin,
        option_strings=tuple(option_strings),
        action=action,
        type=kwargs.pop("type", None),
        default=default,
        choices=tuple(choices) if choices is not None else None,
        nargs=kwargs.pop("nargs", None),
        const=const,
        metavar=kwargs.pop("metavar", None),
        help=help_text,
        hidden=hidden,
    )
    kwargs.pop("required", None)
    if kwargs:
        raise ValueError(f"unsupported add_argument options {sorted(kwargs)} for {option_strings}")
    return spec


# -- the options decorator ---------------------------------------------------------------

_FIELDS_CACHE: dict[type, tuple[dataclasses.Field, ...]] = {}  # type: ignore[type-arg]


def _fields_of(cls: type) -> tuple[dataclasses.Field, ...]:  # type: ignore[type-arg]
    found = _FIELDS_CACHE.get(cls)
    if found is None:
        found = _FIELDS_CACHE[cls] = dataclasses.fields(cls)
    return found


def _options_init(self: Any, **values: Any) -> None:
    for field in _fields_of(type(self)):
        if field.name in values:
            value = values.pop(field.name)
        elif field.default is not MISSING:
            value = field.default
        elif field.default_factory is not MISSING:  # type: ignore[misc]
            value = field.default_factory()  # type: ignore[misc]
        else:
            raise TypeError(f"{type(self).__name__}() missing setting {field.name!r}")
        object.__setattr__(self, field.name, value)
    if values:
        raise TypeError(f"{type(self).__name__}() got unknown settings: "
                        f"{', '.join(sorted(values))}")


def _options_repr(self: Any) -> str:
    inner = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in _fields_of(type(self)))
    return f"{type(self).__name__}({inner})"


def _options_eq(self: Any, other: object) -> bool:
    if type(other) is not type(self):
        return NotImplemented
    return all(getattr(self, f.name) == getattr(other, f.name) for f in _fields_of(type(self)))


def _take_marker_defaults(target: type) -> None:
    """Replace each marker written as a field's default by the default it stands for,
    keeping the marker in ``__megaplug_markers__`` for the kernel."""
    annotations = target.__dict__.get("__annotations__", {})
    declared: dict[str, tuple[Any, ...]] = {}
    for name, annotation in annotations.items():
        marker = target.__dict__.get(name)
        if not isinstance(marker, _MARKER_TYPES):
            continue
        if _is_annotated(annotation):
            raise TypeError(f"{target.__name__}.{name}: declare its markers either in Annotated "
                            "metadata or as the default, not both")
        declared[name] = (marker,)
        default = _marker_default(marker, annotation)
        if isinstance(default, (list, dict, set)):  # a fresh copy per instance, as default_factory
            default = dataclasses.field(default_factory=functools.partial(type(default), default))
        setattr(target, name, default)
    target.__megaplug_markers__ = declared  # type: ignore[attr-defined]


def options(cls: type | None = None, /) -> Any:
    """Declare a plugin's options dataclass — like ``@dataclass``, built cheaply.

    The class is a real dataclass (``dataclasses.fields`` works, its instances are the
    typed views ``Resolved.options`` returns), but its ``__init__`` (keyword-only),
    ``__repr__`` and ``__eq__`` are shared generic methods instead of code generated and
    compiled per class: for a plugin with a hundred-odd settings that generation is most
    of its import time, paid again by every training rank at start-up.

    A field's marker may be written as its default (``x: int = Flag(default=1, help=...)``):
    the decorator keeps the marker for the kernel and leaves the plain default on the
    class. That is the cheap form -- it builds no ``Annotated`` alias per field.
    """

    def wrap(target: type) -> type:
        _take_marker_defaults(target)
        made = dataclasses.dataclass(target, init=False, repr=False, eq=False)
        made.__init__ = _options_init  # type: ignore[misc]
        made.__repr__ = _options_repr  # type: ignore[method-assign]
        made.__eq__ = _options_eq  # type: ignore[method-assign]
        made.__hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq
        return made

    return wrap if cls is None else wrap(cls)
