"""Reading what megaplug is handed but cannot trust: files, JSON text and YAML text.

Every path megaplug reads -- ``--config``, ``--defaults @FILE``, a heterogeneous layers
config, a checkpoint's tracker and its saved arguments -- may name a FIFO, a device, a
directory or something huge. :func:`read_regular_file` (and :func:`open_regular_file` for
a reader that wants the file itself) opens without blocking, accepts a regular file only
and reads at most a cap; anything else is an :class:`UntrustedInputError`, never a hang.

Text is read with the same guards wherever it comes from: :func:`parse_json` and
:func:`parse_yaml` report a key given twice (with its line in YAML), an integer too long
for Python to print (more than :data:`MAX_INT_DIGITS` digits), and nesting too deep to
walk -- as problems, never tracebacks. YAML follows the 1.2 core schema (what yq and
Megatron's launchers read): ``010`` is 10, ``0o10`` is 8, ``1:20`` and ``yes`` are text,
``.inf`` is a float; only ``true``/``false`` (and their capitalised forms) are booleans.
"""

from __future__ import annotations

import os
import re
import stat
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, IO


class UntrustedInputError(ValueError):
    """A file or text megaplug will not read: not a regular file, too big, not UTF-8,
    malformed, or holding a repeated key or an integer too long to handle."""


#: Most bytes read from a config file, a ``--defaults`` file or a heterogeneous config.
MAX_TEXT_BYTES = 16 << 20

#: Most characters, and values (scalars, lists, mappings), of YAML text: PyYAML builds
#: several Python objects per character and value, so a few megabytes of YAML take tens of
#: seconds and hundreds of megabytes (docs/reliability.md); a larger settings file can be
#: JSON, which is read in C.
MAX_YAML_CHARS = 1 << 20
MAX_YAML_VALUES = 50_000

#: Python refuses to turn longer integers into text (``sys.int_info``); no setting needs one.
MAX_INT_DIGITS = min(4300, getattr(sys, "get_int_max_str_digits", lambda: 4300)() or 4300)

#: Repeated keys listed in full before the rest are only counted.
_DUPLICATES_SHOWN = 10

_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"))


def open_regular_file(path: str | os.PathLike[str], what: str,
                      limit: int | None = None) -> IO[bytes]:
    """``path`` opened for binary reading, if it is a regular file (of at most ``limit``
    bytes); never blocks on a FIFO or device, whatever is put in the file's place.

    ``what`` names the file in the error ("config file", "checkpoint tracker").
    """
    shown = os.fspath(path)
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)
                             | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UntrustedInputError(f"cannot read {what} {shown}: {reason}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            kind = next((name for test, name in _FILE_KINDS if test(status.st_mode)),
                        "not a regular file")
            raise UntrustedInputError(f"{what} {shown} is {kind}; megaplug reads regular "
                                      "files only")
        if limit is not None and status.st_size > limit:
            raise UntrustedInputError(f"{what} {shown} is {status.st_size} bytes; megaplug "
                                      f"reads at most {limit} bytes from it")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular_file(path: str | os.PathLike[str], what: str,
                      limit: int = MAX_TEXT_BYTES) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them (a file that
    grows past the cap while read, or a ``/proc`` file reporting size 0, is refused too)."""
    with open_regular_file(path, what, limit) as handle:
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise UntrustedInputError(f"cannot read {what} {os.fspath(path)}: "
                                      f"{exc.strerror or exc}") from None
    if len(data) > limit:
        raise UntrustedInputError(f"{what} {os.fspath(path)} holds more than {limit} bytes; "
                                  "megaplug reads at most that much from it")
    return data


def read_text_file(path: str | os.PathLike[str], what: str,
                   limit: int = MAX_TEXT_BYTES) -> str:
    """:func:`read_regular_file` decoded as UTF-8 (a byte-order mark is dropped)."""
    data = read_regular_file(path, what, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UntrustedInputError(f"{what} {os.fspath(path)} is not UTF-8 text ({exc.reason} "
                                  f"at byte {exc.start})") from None


# -- JSON ---------------------------------------------------------------------------------


def parse_json(text: str, where: str) -> Any:
    """JSON ``text`` (from ``where``: "config file x.json", "--defaults") as Python values.

    A key repeated in one object, an integer of more than :data:`MAX_INT_DIGITS` digits,
    nesting too deep and malformed JSON are :class:`UntrustedInputError`.
    """
    import json

    repeated: list[str] = []

    def mapping(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key, value in pairs:
            if key in result:
                repeated.append(f"key {key!r} is given more than once")
            result[key] = value
        return result

    try:
        data = json.loads(text, object_pairs_hook=mapping, parse_int=_json_int)
    except RecursionError:
        raise UntrustedInputError(_too_deep_message(where)) from None
    except _TooLong as exc:
        raise UntrustedInputError(f"{where} holds {exc}") from None
    except json.JSONDecodeError as exc:
        raise UntrustedInputError(f"{where} is not valid JSON: {exc}") from None
    _raise_repeated(where, repeated)
    return not_too_deep(data, where)


def not_too_deep(data: Any, where: str) -> Any:
    """``data``, unless it nests deeper than a value may (:mod:`megaplug.values._nesting`):
    then :class:`UntrustedInputError`."""
    from ..values._nesting import too_deep

    if too_deep(data):
        raise UntrustedInputError(_too_deep_message(where))
    return data


def _too_deep_message(where: str) -> str:
    from ..values._nesting import TOO_DEEP

    return f"{where} is {TOO_DEEP}"


class _TooLong(ValueError):
    """An integer with more digits than Python (and megaplug) will handle."""


def _json_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _TooLong(f"an integer of {digits} digits; megaplug reads integers of at most "
                       f"{MAX_INT_DIGITS} digits")
    return int(text)


def _raise_repeated(where: str, repeated: list[str]) -> None:
    if not repeated:
        return
    shown = repeated[:_DUPLICATES_SHOWN]
    more = len(repeated) - len(shown)
    raise UntrustedInputError(
        f"{where} repeats keys (the last would silently win): " + "; ".join(shown)
        + (f"; and {more} more" if more else ""))


# -- YAML (1.2 core schema) -----------------------------------------------------------------

#: The YAML 1.2 core schema's plain scalars (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
#: (Text, compiled when YAML is first read or written: most resolves read none.)
_CORE_NULL = r"^(?:~|null|Null|NULL|)$"
_CORE_BOOL = r"^(?:true|True|TRUE|false|False|FALSE)$"
_CORE_INT = r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"
_CORE_FLOAT = (r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_TAG = "tag:yaml.org,2002:"
_LOADER: Any = None


def parse_yaml(text: str, where: str) -> Any:
    """YAML ``text`` read with the 1.2 core schema and ``yaml.safe_load``'s safety: tags
    such as ``!!python/object`` are refused, never constructed.

    A key repeated in one mapping (named with its lines), an integer of more than
    :data:`MAX_INT_DIGITS` digits, a value its tag cannot take (``!!int abc``), nesting too
    deep and malformed YAML are :class:`UntrustedInputError`.
    """
    import yaml

    if len(text) > MAX_YAML_CHARS:
        raise UntrustedInputError(f"{where} is {len(text):,} characters of YAML; megaplug "
                                  f"reads at most {MAX_YAML_CHARS:,} (write a larger one "
                                  "as JSON)")
    try:
        loader = _core_loader()(text)  # its reader refuses control characters at once
    except yaml.reader.ReaderError as exc:
        raise UntrustedInputError(_unprintable(where, text, exc)) from None
    try:
        data = loader.get_single_data()
    except RecursionError:
        raise UntrustedInputError(_too_deep_message(where)) from None
    except _BadScalar as exc:
        raise UntrustedInputError(f"{where}: {exc}") from None
    except yaml.constructor.ConstructorError as exc:
        if "could not determine a constructor" in str(exc.problem):
            raise UntrustedInputError(
                f"{where} uses a YAML tag megaplug will not construct ({exc.problem}); only "
                "plain values, lists and mappings are allowed") from None
        line = f" on line {exc.problem_mark.line + 1}" if exc.problem_mark else ""
        raise UntrustedInputError(f"{where} cannot be read: {exc.problem}{line}") from None
    except yaml.YAMLError as exc:
        raise UntrustedInputError(f"{where} is not valid YAML: {exc}") from None
    except (ValueError, TypeError, AttributeError) as exc:  # a constructor PyYAML keeps
        raise UntrustedInputError(f"{where} holds a value YAML cannot construct "
                                  f"({type(exc).__name__}: {exc})") from None
    finally:
        loader.dispose()
    _raise_repeated(where, loader.repeated)
    return data  # nesting checked by the caller, after aliases (a cycle is) are counted


def _unprintable(where: str, text: str, error: Any) -> str:
    """What the YAML reader's refusal of a character means, with its line."""
    line = text.count("\n", 0, error.position) + 1
    code = error.character
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return (f"{where} holds the character U+{code:04X} on line {line}, which YAML does not "
            f"allow (write it as an escape in a double-quoted string, \"{escape}\"; or is "
            "it not a settings file?)")


class _BadScalar(ValueError):
    """A scalar its tag cannot take, with the line it is on."""


def _core_loader() -> type:
    """``yaml.SafeLoader`` with the YAML 1.2 core schema's resolvers and scalar
    constructors, which notes repeated keys (built once, when YAML is first read)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml

    class CoreSchemaLoader(yaml.SafeLoader):
        yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}

        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.repeated: list[str] = []
            self.values = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            self.values += 1
            if self.values > MAX_YAML_VALUES:  # stop reading, rather than read it all first
                raise _BadScalar(f"more than {MAX_YAML_VALUES:,} values; megaplug reads at "
                                 "most that many from YAML (write a larger file as JSON)")
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                self.repeated += _repeated_keys(self, node)
            return super().construct_mapping(node, deep=deep)

    for tag, pattern, first in (
            ("bool", _CORE_BOOL, "tTfF"), ("int", _CORE_INT, "-+0123456789"),
            ("float", _CORE_FLOAT, "-+.0123456789"), ("null", _CORE_NULL, ["~", "n", "N", ""]),
            ("merge", r"^<<$", "<")):
        CoreSchemaLoader.add_implicit_resolver(_TAG + tag, re.compile(pattern), list(first))
    CoreSchemaLoader.add_constructor(_TAG + "timestamp", _no_timestamps)
    for tag, parse in (("int", _core_int), ("float", _core_float), ("bool", _core_bool)):
        CoreSchemaLoader.add_constructor(_TAG + tag, lambda loader, node, parse=parse: parse(
            loader.construct_scalar(node), node))
    _LOADER = CoreSchemaLoader
    return _LOADER


def _no_timestamps(loader: Any, node: Any) -> None:
    raise _BadScalar(f"line {node.start_mark.line + 1} is tagged !!timestamp; YAML 1.2 "
                     "and megaplug's settings have no timestamps (quote the text)")


def _repeated_keys(loader: Any, node: Any) -> list[str]:
    """Keys given twice in this mapping node (keys a ``<<`` merge brings in may be
    overridden: that is what a merge is for)."""
    import yaml

    first_line: dict[Any, int] = {}
    repeated: list[str] = []
    for key_node, _ in node.value:
        if key_node.tag == _TAG + "merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        line = key_node.start_mark.line + 1
        try:
            earlier = first_line.get(key)
        except TypeError:  # unhashable: the base constructor reports it
            continue
        if earlier is None:
            first_line[key] = line
        else:
            repeated.append(f"key {key!r} on line {line} repeats line {earlier}"
                            if earlier != line else f"key {key!r} is given twice on line {line}")
    return repeated


def _core_float(text: str, node: Any) -> float:
    """A YAML 1.2 core float (a core integer too), ``.inf`` and ``.nan`` included."""
    if re.match(_CORE_INT, text):
        return float(_core_int(text, node))
    if not re.match(_CORE_FLOAT, text):
        raise _BadScalar(f"{text!r} on line {node.start_mark.line + 1} is not a "
                         "float (YAML 1.2: digits, '.', an exponent, .inf or .nan)")
    lowered = text.lower()
    if lowered.endswith(".inf"):
        return float("-inf") if lowered.startswith("-") else float("inf")
    return float("nan") if lowered == ".nan" else float(text)


def _core_bool(text: str, node: Any) -> bool:
    """A YAML 1.2 core boolean: ``true`` or ``false`` (any case YAML allows)."""
    if not re.match(_CORE_BOOL, text):
        raise _BadScalar(f"{text!r} on line {node.start_mark.line + 1} is not a "
                         "boolean (YAML 1.2: true or false)")
    return text.lower() == "true"


def _core_int(text: str, node: Any) -> int:
    """A YAML 1.2 core integer: decimal (leading zeros are decimal), ``0o`` octal or ``0x``
    hexadecimal; no ``_`` separators, no ``0b``, no sexagesimal ``1:20``."""
    line = node.start_mark.line + 1
    if not re.match(_CORE_INT, text):
        raise _BadScalar(f"{text!r} on line {line} is not an integer (YAML 1.2: digits, "
                         "0o octal or 0x hexadecimal)")
    base = {"0o": 8, "0x": 16}.get(text[:2], 10)
    digits = text[2:] if base != 10 else text.lstrip("+-")
    # a long octal or hex number is a long decimal one too: bound both by their decimal size
    if len(digits) * {8: 0.91, 16: 1.21, 10: 1}[base] > MAX_INT_DIGITS:
        raise _BadScalar(f"the integer on line {line} has more than {MAX_INT_DIGITS} digits; "
                         "megaplug reads integers of at most that many")
    value = int(digits, base)
    return -value if text.startswith("-") else value


def to_yaml(data: Any) -> str:
    """YAML text of JSON-able ``data`` that megaplug's config reading loads as the same values
    (:func:`dump_yaml`); floats that are not finite are written as text, as in JSON."""
    from ..values._encoding import finite_as_text

    return dump_yaml(finite_as_text(data))


def dump_yaml(data: Any) -> str:
    """``data`` as YAML that :func:`parse_yaml` reads back to the same values (keys sorted).

    PyYAML writes for YAML 1.1: it quotes the text 1.1 would read as something else
    (``'010'``, ``'yes'``) but not what only 1.2 reads so (``0o10``, ``1e3``). The dumper
    here quotes a string either schema would read as a non-string.
    """
    import yaml

    return yaml.dump(data, Dumper=_core_dumper(), sort_keys=True)


_DUMPER: Any = None


def _core_dumper() -> type:
    global _DUMPER
    if _DUMPER is None:
        import yaml

        class CoreSchemaDumper(yaml.SafeDumper):
            """Quotes strings that YAML 1.1 or 1.2 would read as numbers, booleans or null."""

        for tag, pattern, first in (
                ("bool", _CORE_BOOL, "tTfF"), ("int", _CORE_INT, "-+0123456789"),
                ("float", _CORE_FLOAT, "-+.0123456789"),
                ("null", _CORE_NULL, ["~", "n", "N", ""])):
            CoreSchemaDumper.add_implicit_resolver(_TAG + tag, re.compile(pattern), list(first))
        _DUMPER = CoreSchemaDumper
    return _DUMPER
