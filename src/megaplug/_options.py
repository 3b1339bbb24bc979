"""Declaring settings: the ``Flag`` / ``FromEnv`` / ``Computed`` markers on an options
dataclass's fields, and :class:`FlagSpec`, the one description of a setting that the parser,
config files, ``megaplug flags`` and the docs work from."""

from __future__ import annotations

import enum
import functools
import types

from ._record import MutableRecord, Record
from .values._conversion import converted_value
from .values._options_class import MISSING, OptionsField, from_dataclass_field, build
from .values._types import choice_name  # noqa: F401  (re-exported: how choices are shown)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Sequence

ACTIONS = ("store", "store_true", "store_false", "store_const", "boolean_optional", "append",
           "count")


class _Marker(Record):
    """Markers compare, hash and show by their fields. About 900 are built at import time
    on every training rank, so they are plain ``__slots__`` classes."""

    __slots__ = ()

    def __repr__(self) -> str:
        # identity and emptiness, not equality: a default of 0 is shown (0 == False)
        shown = (f"{name}={value!r}" for name in self.__slots__
                 if (value := getattr(self, name)) is not None and value is not False
                 and value is not MISSING and value not in ("", ()))
        return f"{type(self).__name__}({', '.join(shown)})"


class Flag(_Marker):
    """Marks an options-dataclass field as a command-line flag.

    Write it as the field's default (``num_layers: Optional[int] = Flag(default=None,
    help=...)``) or in ``Annotated`` metadata. What is not given is inferred from the
    field: option string ``--field-name``, ``type`` from the annotation (``Optional[X]`` is
    ``X``, ``list[X]`` gives ``nargs='+'``, an ``Enum`` is parsed by member name, ``Literal``
    gives choices), and ``store_true`` / ``store_false`` for a ``bool`` defaulting to False /
    True. Without ``default=`` a flag defaults as in argparse: None, or False for a ``bool``.
    Several ``Flag`` markers in ``Annotated`` metadata share the field's dest (``--x`` /
    ``--no-x``); there ``default=`` is that spelling's default.
    """

    __slots__ = ("option_strings", "help", "action", "type", "choices", "nargs", "const",
                 "metavar", "default", "hidden", "deprecated", "env")

    def __init__(self, *option_strings: str, help: str = "", action: str | None = None,
                 type: Callable[[str], Any] | None = None, choices: Sequence[Any] | None = None,
                 nargs: int | str | None = None, const: Any = None, metavar: str | None = None,
                 default: Any = MISSING, hidden: bool = False, deprecated: str | None = None,
                 env: str | None = None) -> None:
        if action is not None and action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        self.option_strings, self.help, self.action, self.type = option_strings, help, action, type
        self.choices = tuple(choices) if choices is not None else None
        self.nargs, self.const, self.metavar, self.default = nargs, const, metavar, default
        self.hidden, self.deprecated, self.env = hidden, deprecated, env


class FromEnv(_Marker):
    """Marks a field whose value comes from an environment variable, not a flag."""

    __slots__ = ("variable", "help", "default")

    def __init__(self, variable: str, help: str = "", *, default: Any = MISSING) -> None:
        self._fill(locals())


class Computed(_Marker):
    """Marks a field that no user sets: a plugin derives it (e.g. ``data_parallel_size``)."""

    __slots__ = ("help", "default")

    def __init__(self, help: str = "", *, default: Any = MISSING) -> None:
        self._fill(locals())


_MARKER_TYPES = (Flag, FromEnv, Computed)


class FlagSpec(MutableRecord):
    """The kernel's record of one setting: a flag spelling set, an env value or a computed one.

    ``kind`` is ``"flag"``, ``"env"`` or ``"computed"``. Several flag specs of one plugin
    may share a dest (``--x`` and ``--no-x``).
    """

    __slots__ = ("dest", "plugin", "kind", "option_strings", "action", "type", "default",
                 "choices", "nargs", "const", "metavar", "help", "hidden", "deprecated", "env",
                 "deprecated_spellings")

    def __init__(self, dest: str, plugin: str, kind: str = "flag",
                 option_strings: tuple[str, ...] = (), action: str = "store",
                 type: Callable[[str], Any] | None = None, default: Any = None,
                 choices: tuple[Any, ...] | None = None, nargs: int | str | None = None,
                 const: Any = None, metavar: str | None = None, help: str = "",
                 hidden: bool = False, deprecated: str | None = None, env: str | None = None,
                 deprecated_spellings: tuple[str, ...] = ()) -> None:
        self.dest, self.plugin, self.kind, self.option_strings = dest, plugin, kind, option_strings
        self.action, self.type, self.default, self.choices = action, type, default, choices
        self.nargs, self.const, self.metavar, self.help = nargs, const, metavar, help
        self.hidden, self.deprecated, self.env = hidden, deprecated, env
        self.deprecated_spellings = deprecated_spellings

    @property
    def type_name(self) -> str | None:
        return None if self.type is None else getattr(self.type, "__name__",
                                                      type(self.type).__name__)

    @property
    def primary(self) -> str:
        """The spelling shown in messages: the first option string, else the dest."""
        return self.option_strings[0] if self.option_strings else self.dest

    @property
    def takes_value(self) -> bool:
        return self.action in ("store", "append")

    def convert(self, raw: Any) -> Any:
        """``raw`` in this setting's type, or ``ValueError`` saying what is wrong with it.

        ``raw`` is text, a list of texts or a loaded value (a config file, a checkpoint). A
        loaded number must fit the type (``2.0`` is the int 2, ``2.5`` is not); an enum member
        or a dtype is taken as it is; any other loaded value must be the value whose JSON
        form it is (:mod:`megaplug.values._loaded`: ``[1, 0, 1]`` for a layer pattern,
        ``[128, 0]`` for ``--window-size 128,0``), and a list holds as many values as
        ``nargs`` lets the command line give. Choices are :meth:`check_choice`'s job.
        """
        return converted_value(self, raw)

    def check_choice(self, value: Any) -> bool:
        if self.choices is None or value is None:
            return True
        return all(item in self.choices for item in (value if isinstance(value, list)
                                                     else [value]))

    def argparse_call(self) -> tuple[tuple[str, ...], dict[str, Any]]:
        """This flag as ``parser.add_argument(*strings, **kwargs)`` arguments: the one
        translation to argparse, for ``--help`` and for a plain parser of megaplug's flags."""
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
            kwargs.update((key, getattr(self, key)) for key in ("type", "nargs", "choices",
                          "metavar") if getattr(self, key) is not None)
        if self.action == "store_const" or (self.nargs == "?" and self.const is not None):
            kwargs["const"] = self.const
        return strings, kwargs


def enum_by_name(enum_class: type[enum.Enum]) -> Callable[[str], enum.Enum]:
    """A ``type=`` callable parsing an enum member by name: ``'flash'`` -> ``Backend.flash``."""

    def parse(text: str) -> enum.Enum:
        name = text.split(".", 1)[1] if text.startswith(enum_class.__name__ + ".") else text
        try:
            return enum_class[name]
        except KeyError:
            names = ", ".join(member.name for member in enum_class)
            raise ValueError(f"choose from {names}") from None

    parse.__name__ = enum_class.__name__
    parse.__megaplug_enum__ = enum_class  # type: ignore[attr-defined]  # for _snapshot
    return parse


# -- from an options dataclass or an add_argument call to specs ---------------------------

@functools.cache  # a few hundred fields share a handful of annotations (``Optional[int]``)
def _infer(annotation: Any) -> dict[str, Any]:
    """What a field's type says about type, nargs and choices."""
    import typing  # here, where options are declared, not in every resolve
    from typing import get_args, get_origin

    base, args = annotation, [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(base) in (typing.Union, types.UnionType) and len(args) == 1:
        base = args[0]  # Optional[X] is X
    origin = get_origin(base)
    if origin in (list, tuple, typing.List, typing.Tuple):
        args = [a for a in get_args(base) if a is not Ellipsis]
        return {**(_infer(args[0]) if args else {}), "nargs": "+"}
    if origin is typing.Literal:
        return {"type": type(get_args(base)[0]), "choices": get_args(base)}
    if isinstance(base, type) and issubclass(base, enum.Enum):
        return {"type": enum_by_name(base), "choices": tuple(base)}
    if base in (int, float, str):
        return {"type": base}
    return {"is_bool": True} if base is bool else {}


@functools.cache
def _field_markers(options_class: type) -> list[tuple[Any, ...]]:
    """(field, annotation, markers) for each field. ``@options`` keeps the markers written
    as defaults in ``__megaplug_markers__`` (base classes first)."""
    import typing
    from typing import Annotated, get_args, get_origin

    declared: dict[str, tuple[Any, ...]] = {}
    for klass in reversed(options_class.__mro__):
        declared.update(klass.__dict__.get("__megaplug_markers__", {}))
    hints: dict[str, Any] | None = None
    rows = []
    for field in _fields(options_class):
        annotation = field.type
        if isinstance(annotation, str):
            hints = hints or typing.get_type_hints(options_class, include_extras=True)
            annotation = hints[field.name]
        markers: tuple[Any, ...] = declared.get(field.name, ())
        if get_origin(annotation) is Annotated:
            markers = markers or tuple(m for m in annotation.__metadata__
                                       if isinstance(m, _MARKER_TYPES))
            annotation = get_args(annotation)[0]
        if not markers and isinstance(field.default, _MARKER_TYPES):
            markers = (field.default,)  # a plain @dataclass with a marker as the default
        rows.append((field, annotation, markers))
    return rows


def _field_default(field: OptionsField, annotation: Any) -> Any:
    if isinstance(field.default, _MARKER_TYPES):
        return _marker_default(field.default, annotation)
    if field.default_factory is not MISSING:
        return field.default_factory()
    return None if field.default is MISSING else field.default


def _marker_default(marker: Any, annotation: Any) -> Any:
    """The field default a marker written as the default stands for (argparse's rule when
    it has no ``default=``: None, False for a ``bool`` flag, True for ``store_false``)."""
    if marker.default is not MISSING:
        return marker.default
    if isinstance(marker, Flag):
        if marker.action == "store_false":
            return True
        # under ``from __future__ import annotations`` the decorator sees the text "bool"
        if marker.action == "store_true" or (marker.action is None
                                             and annotation in (bool, "bool")):
            return False
    return None


def specs_from_options(options_class: type, plugin: str) -> list[FlagSpec]:
    """Turn an options dataclass into flag specs (one per marker; unmarked fields are flags)."""
    specs: list[FlagSpec] = []
    for field, annotation, markers in _field_markers(options_class):
        default, inferred = _field_default(field, annotation), _infer(annotation)
        for marker in markers or (Flag(),):
            if isinstance(marker, FromEnv):
                specs.append(FlagSpec(field.name, plugin, "env", type=inferred.get("type"),
                                      default=default, help=marker.help, env=marker.variable))
            elif isinstance(marker, Computed):
                specs.append(FlagSpec(field.name, plugin, "computed", default=default,
                                      help=marker.help))
            else:
                specs.append(_flag_spec(field.name, plugin, marker, inferred, default))
    return specs


def _flag_spec(dest: str, plugin: str, marker: Flag, inferred: dict[str, Any],
               field_default: Any) -> FlagSpec:
    default = field_default if marker.default is MISSING else marker.default
    action = marker.action
    if action is None:
        switch = inferred.get("is_bool") and marker.type is None
        action = ("store_false" if default is True else "store_true") if switch else "store"
    option_strings = marker.option_strings or ("--" + dest.replace("_", "-"),)
    flag_type, choices, nargs = marker.type, marker.choices, marker.nargs
    if action in ("store", "append"):
        flag_type = flag_type or inferred.get("type")
        if choices is None and marker.type is None:
            choices = inferred.get("choices")
        nargs = nargs if nargs is not None else inferred.get("nargs")
    elif action != "boolean_optional":
        flag_type = None
    if action == "boolean_optional":
        option_strings = _with_negatives(option_strings)
    const = {"store_true": True, "store_false": False}.get(action, marker.const)
    return FlagSpec(dest, plugin, "flag", option_strings, action, flag_type, default,
                    tuple(choices) if choices is not None else None, nargs, const,
                    marker.metavar, marker.help, marker.hidden, marker.deprecated, marker.env)


def _with_negatives(option_strings: tuple[str, ...]) -> tuple[str, ...]:
    """BooleanOptionalAction spellings: each ``--x`` followed by its ``--no-x``."""
    result: list[str] = []
    for option in option_strings:
        if not option.startswith("--no-"):
            result += [option, "--no-" + option[2:]] if option.startswith("--") else [option]
    return tuple(result)


def spec_from_argparse(option_strings: Sequence[str], kwargs: dict[str, Any],
                       plugin: str) -> FlagSpec:
    """A spec from a plain ``add_argument(*option_strings, **kwargs)`` call, read as the
    ``Flag`` marker it amounts to."""
    import argparse

    kwargs = {key: value for key, value in kwargs.items() if key != "required"}
    action = kwargs.pop("action", "store")
    action = "boolean_optional" if action is argparse.BooleanOptionalAction else action
    if not isinstance(action, str) or action not in ACTIONS:
        raise ValueError(f"unsupported action {action!r} for {tuple(option_strings)}")
    longs = [o for o in option_strings if o.startswith("--")] or list(option_strings)
    dest = kwargs.pop("dest", None) or longs[0].lstrip("-").replace("-", "_")
    help_text = kwargs.pop("help", "") or ""
    unsupported = sorted(set(kwargs) - {"type", "choices", "nargs", "const", "metavar",
                                        "default"})
    if unsupported:
        raise ValueError(f"unsupported add_argument options {unsupported} for "
                         f"{tuple(option_strings)}")
    hidden = help_text is argparse.SUPPRESS
    marker = Flag(*option_strings, action=action, help="" if hidden else help_text,
                  hidden=hidden, **kwargs)
    return _flag_spec(dest, plugin, marker, {}, _marker_default(marker, None))


def _fields(options_class: type) -> tuple[OptionsField, ...]:
    """An options class's fields: an ``@options`` class's own record, a dataclass's fields."""
    if "__megaplug_fields__" in options_class.__dict__:
        return options_class.__megaplug_fields__  # type: ignore[attr-defined, no-any-return]
    import dataclasses

    return tuple(from_dataclass_field(field, field.name, field.type)
                 for field in dataclasses.fields(options_class))


def _take_marker_defaults(target: type) -> None:
    """Replace each marker written as a field's default by the default it stands for,
    keeping the marker in ``__megaplug_markers__`` for the kernel."""
    from typing import Annotated, get_origin  # where options are declared only

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
        return build(target)

    return wrap if cls is None else wrap(cls)
