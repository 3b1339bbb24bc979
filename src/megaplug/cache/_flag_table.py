"""The flag table across processes: declared once, read back by every later process.

Every plugin's ``add_args`` turns its options class into flag specs; importing those ~900
declarations and building the specs is a large part of a process's start-up, and its
result only changes when a plugin's code does. So the declaration a kernel built for the
command line or the Megatron facade makes (``_registry.declare``'s value: the table and the
inactive plugins' specs) is stored in the on-disk cache (:func:`megaplug.cache._store.cached`,
keyed on the plugins, their statuses, the installed distributions and the import closure
of every module loaded while it was declared) and, while that holds, read back as the same
value without running ``add_args`` -- and so without importing any options module. The
kernel takes either as its own: nothing here changes a kernel.

Values that are not JSON are stored by reference: an enum member by its class and name, a
``type=`` callable by ``module:qualname`` (an :func:`enum_by_name` parser by its enum).
A reference is followed only into megaplug and the plugins' own packages, so a tampered
cache file cannot make megaplug call arbitrary code. A table holding anything else is
not stored: that process, and each after it, declares as before.
"""

from __future__ import annotations

import enum
import math
import sys
import types

from .._options import FlagSpec, enum_by_name
from .._registry import Declared, FlagTable, resolve_reference

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping

#: Bump when the stored form changes.
VERSION = 3

_FIELDS = ("dest", "plugin", "kind", "option_strings", "action", "type", "default", "choices",
           "nargs", "const", "metavar", "help", "hidden", "deprecated", "env",
           "deprecated_spellings")
_BUILTIN_TYPES = {"int": int, "float": float, "str": str, "bool": bool}



class Unstorable(Exception):
    """A value the snapshot cannot refer to (a lambda, an object built at import time)."""


def declare_or_read(records: Iterable[Any], lines: Mapping[str, str],
                    declare: Callable[[], Declared], storable: Callable[[Declared], bool]
                    ) -> tuple[Declared, dict[str, Any] | None]:
    """The declaration of the plugin set behind ``records`` for the releases ``lines``, read
    back while nothing it was declared from changed (with those files), or ``declare()``d
    here (``None``) and stored for the next process when ``storable`` finds it sound (one
    with a problem is redone, and reported, each time). Only for plugin sets made of
    modules: a plugin object (a test's, an application's) has no module to key it on."""
    records = list(records)
    if not all(r.module is None or isinstance(r.module, types.ModuleType) for r in records):
        return declare(), None
    from ._store import cached, depends_on_packages, reads

    packages = code_packages(records)
    declared: list[Declared] = []
    read: list[Declared] = []

    def compute() -> dict[str, Any]:
        depends_on_packages(packages)  # the plugins' packages, imported before the declaration
        declared.append(declare())
        return _encoded(declared[0], storable, packages)

    def usable(stored: dict[str, Any]) -> bool:
        try:
            if stored["table"] is not None:
                read.append(decode(stored["table"], packages))
        except ValueError:
            return False  # a tampered or foreign file: declare, and store a good one
        return True

    # decode() checks every field as it reads it: no separate walk of the shape
    with reads() as sources:
        cached("flag-table", _key(records, lines), compute, shape={"table": (dict, None)},
               track_imports=True, accept=usable, per_key=True)
    if declared:
        return declared[0], None
    if not read:
        return declare(), None
    return read[0], dict(sources)


def _key(records: list[Any], lines: Mapping[str, str]) -> str:
    """The snapshot's key: the plugins, their statuses and modules, and the releases (plus,
    through ``cached()``, the files the declaration read)."""
    from ._store import code_fingerprint

    return code_fingerprint([f"flag table {VERSION}", repr(sorted(
        (r.name, str(r.status), r.source, getattr(r.module, "__name__", None))
        for r in records)), repr(sorted(lines.items()))])


def code_packages(records: Any) -> set[str]:
    """The top-level packages of megaplug and of the plugins behind ``records``: where the
    code a table (or an answer computed from it) came from."""
    return {"megaplug", *(name.partition(".")[0] for name in (
        getattr(record.module, "__name__", None) for record in records) if name)}


def _encoded(declared: Declared, storable: Callable[[Declared], bool], packages: set[str]
             ) -> dict[str, Any]:
    """A declaration just made, encoded for storing (``None``: not to be stored)."""
    from ._store import _cache_path, depends_on

    # the release data the table was narrowed with is read, not imported: key on it too
    depends_on([path for path in (data if isinstance(data, str) else data.path
                                  for data in declared.table.release_data.values()) if path])
    if _cache_path() is None or not storable(declared):  # a stored table is a checked one
        return {"table": None}
    try:
        return {"table": encode(declared.table, declared.inactive, packages)}
    except Unstorable:
        return {"table": None}


def encode(table: FlagTable, inactive: dict[str, list[FlagSpec]], packages: set[str]
           ) -> dict[str, Any]:
    """``table`` and the inactive plugins' specs as JSON, or :class:`Unstorable` (also for
    a reference outside ``packages``, which :func:`decode` would refuse)."""
    references: dict[tuple[int, bool], dict[str, str]] = {}

    def reference(target: Any, imported_ok: bool = False) -> dict[str, str]:
        # one converter or enum serves many specs: each is named and checked once
        key = (id(target), imported_ok)
        if key not in references:
            references[key] = _reference(target, packages, imported_ok)
        return references[key]

    def spec(one: FlagSpec) -> list[Any]:
        return _encode_spec(one, reference)

    return {
        "specs": [spec(one) for one in table],
        "inactive": {name: [spec(one) for one in specs] for name, specs in inactive.items()},
        "options_classes": {plugin: {"ref": cls} if isinstance(cls, str)  # not yet imported
                            else reference(cls)
                            for plugin, cls in table.options_classes.items()},
        "mutex_groups": [list(group) for group in table.mutex_groups],
        "withheld": [spec(one) for specs in table.withheld.values() for one in specs],
        "elsewhere": dict(table.elsewhere),
        "renamed": {dest: list(renamed) for dest, renamed in table.renamed.items()},
    }


def decode(data: dict[str, Any], packages: set[str]) -> Declared:
    """The table and inactive specs ``encode`` stored (a declaration without failures: one
    with failures is never stored); ``ValueError`` for anything that
    does not hold (a tampered file), references followed only into ``packages``."""
    try:
        specs = [_decode_spec(row, packages) for row in data["specs"]]
        inactive = {str(name): [_decode_spec(row, packages) for row in rows]
                    for name, rows in data["inactive"].items()}
        options_classes = {}
        for plugin, reference in data["options_classes"].items():
            if not isinstance(reference, dict) or set(reference) != {"ref"}:
                raise ValueError(f"not a reference: {reference!r}")
            _check_package(reference["ref"], packages)
            options_classes[str(plugin)] = reference["ref"]  # imported on first use
        withheld: dict[str, list[FlagSpec]] = {}
        for row in data["withheld"]:
            spec = _decode_spec(row, packages)
            withheld.setdefault(spec.dest, []).append(spec)
        table = FlagTable.assemble(
            specs, options_classes=options_classes, withheld=withheld,
            mutex_groups=[[str(dest) for dest in group] for group in data["mutex_groups"]],
            elsewhere={str(option): str(where) for option, where in data["elsewhere"].items()},
            renamed={str(dest): (str(theirs), bool(inverted))
                     for dest, (theirs, inverted) in data["renamed"].items()})
    except (KeyError, TypeError, AttributeError, ImportError, IndexError) as exc:
        raise ValueError(f"unreadable flag table: {type(exc).__name__}: {exc}") from None
    except Exception as exc:  # noqa: BLE001  (PluginError from add(): two owners)
        raise ValueError(f"unreadable flag table: {exc}") from None
    return Declared(table, inactive, {})


# -- specs ---------------------------------------------------------------------------------


_TYPE, _DEFAULT, _CHOICES, _CONST, _OPTION_STRINGS, _DEPRECATED_SPELLINGS = map(
    _FIELDS.index, ("type", "default", "choices", "const", "option_strings",
                    "deprecated_spellings"))


def _encode_spec(spec: FlagSpec, reference: Callable[..., dict[str, str]]) -> list[Any]:
    row = [getattr(spec, name) for name in _FIELDS]
    row[_TYPE] = _encode_type(spec.type, reference)
    row[_DEFAULT] = _encode_value(spec.default, reference)
    row[_CHOICES] = _encode_value(spec.choices, reference)
    row[_CONST] = _encode_value(spec.const, reference)
    row[_OPTION_STRINGS] = list(spec.option_strings)
    row[_DEPRECATED_SPELLINGS] = list(spec.deprecated_spellings)
    return row


_SCALARS = (str, int, float, bool)


def _decode_spec(row: list[Any], packages: set[str]) -> FlagSpec:
    if type(row) is not list or len(row) != len(_FIELDS):
        raise ValueError(f"not a flag spec: {row!r}")
    (dest, plugin, kind, option_strings, action, converter, default, choices, nargs, const,
     metavar, help_text, hidden, deprecated, env, deprecated_spellings) = row
    if not (type(dest) is type(plugin) is type(kind) is type(action) is str):
        raise ValueError(f"not a flag spec: {row!r}")
    # Built without __init__'s generic field filling, by plain assignments, and most
    # values (None, scalars) taken as they are: ~900 specs per process, and the snapshot
    # must read back much faster than the plugins declare.
    spec = object.__new__(FlagSpec)
    spec.dest, spec.plugin, spec.kind, spec.action = dest, plugin, kind, action
    spec.option_strings = tuple(map(str, option_strings))
    spec.type = None if converter is None else _decode_type(converter, packages)
    spec.default = (default if default is None or type(default) in _SCALARS
                    else _decode_value(default, packages))
    spec.choices = None if choices is None else _decode_value(choices, packages)
    spec.nargs = nargs
    spec.const = const if const is None or type(const) in _SCALARS else _decode_value(
        const, packages)
    spec.metavar, spec.help, spec.hidden, spec.deprecated = metavar, help_text, hidden, deprecated
    spec.env = env
    spec.deprecated_spellings = tuple(map(str, deprecated_spellings))
    return spec


# -- values and references -----------------------------------------------------------------


def _reference(target: Any, packages: set[str], imported_ok: bool = False) -> dict[str, str]:
    """``{"ref": "module:qualname"}`` for an object importable by that name from one of
    ``packages`` (or, with ``imported_ok``, an imported module), or Unstorable."""
    module, qualname = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        raise Unstorable(repr(target))
    reference = f"{module}:{qualname}"
    try:
        found = _follow(reference, packages, imported_ok)
    except (ImportError, AttributeError, ValueError):
        raise Unstorable(repr(target)) from None
    if found is not target:
        raise Unstorable(repr(target))
    return {"ref": reference}


def _encode_type(converter: Any, reference: Callable[..., dict[str, str]]) -> Any:
    if converter is None:
        return None
    if converter in (int, float, str, bool):
        return {"builtin": converter.__name__}
    enum_class = getattr(converter, "__megaplug_enum__", None)
    if enum_class is not None:
        return {"enum_by_name": reference(enum_class, True)["ref"]}
    return reference(converter)


def _decode_type(stored: Any, packages: set[str]) -> Any:
    if stored is None:
        return None
    if not isinstance(stored, dict) or len(stored) != 1:
        raise ValueError(f"not a type: {stored!r}")
    (kind, name), = stored.items()
    if kind == "builtin":
        return _BUILTIN_TYPES[name]
    if kind == "enum_by_name":
        return enum_by_name(_enum_class(name, packages))
    if kind == "ref":
        converter = _follow(name, packages)
        if not callable(converter):
            raise ValueError(f"{name} is not callable")
        return converter
    raise ValueError(f"not a type: {stored!r}")


def _encode_value(value: Any, reference: Callable[..., dict[str, str]]) -> Any:
    if value is None or type(value) in (bool, int, str):  # not a str or int subclass
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"float": repr(value)}
    if type(value) is list:
        return [_encode_value(item, reference) for item in value]
    if type(value) is tuple:
        return {"tuple": [_encode_value(item, reference) for item in value]}
    if isinstance(value, enum.Enum):
        return {"enum": reference(type(value), True)["ref"], "name": value.name}
    raise Unstorable(repr(value))


def _decode_value(stored: Any, packages: set[str]) -> Any:
    if stored is None or type(stored) in _SCALARS:
        return stored
    if isinstance(stored, list):
        return [_decode_value(item, packages) for item in stored]
    if isinstance(stored, dict):
        if set(stored) == {"tuple"}:
            return tuple(_decode_value(item, packages) for item in stored["tuple"])
        if set(stored) == {"float"} and stored["float"] in ("inf", "-inf", "nan"):
            return float(stored["float"])
        if set(stored) == {"enum", "name"}:
            return _enum_class(stored["enum"], packages)[stored["name"]]
    raise ValueError(f"not a stored value: {stored!r}")


def _check_package(reference: Any, packages: set[str], imported_ok: bool = False) -> None:
    if not isinstance(reference, str):
        raise ValueError(f"not a reference: {reference!r}")
    module = reference.partition(":")[0]
    if imported_ok and module in sys.modules:
        return  # already imported (signal, for signal.Signals): no new code runs
    if not any(module == p or module.startswith(p + ".") for p in packages):
        raise ValueError(f"{reference} is outside megaplug and the plugins' packages")


def _follow(reference: Any, packages: set[str], imported_ok: bool = False) -> Any:
    """What ``reference`` names, followed only into ``packages`` -- or, where nothing will
    be called (an enum class looked up by member name), a module already imported."""
    _check_package(reference, packages, imported_ok)
    return resolve_reference(reference)


def _enum_class(reference: Any, packages: set[str]) -> type[enum.Enum]:
    found = _follow(reference, packages, imported_ok=True)
    if not (isinstance(found, type) and issubclass(found, enum.Enum)):
        raise ValueError(f"{reference} is not an enum")
    return found
