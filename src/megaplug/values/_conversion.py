"""The one conversion of a raw value into its setting's type (``FlagSpec.convert``, which
``Kernel.convert`` calls for every source), and what it says when a value does not fit: the
problem naming the setting, the source the value came from and what to give."""

from __future__ import annotations

import enum
import math
from argparse import ArgumentTypeError

from .._errors import Problem, shorten
from ._nesting import converted
from ._types import choice_name, float_or_infinity, is_dtype

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .._options import FlagSpec

_BOOLEAN_ACTIONS = ("store_true", "store_false", "boolean_optional")
#: How much of a value a conversion problem quotes (a 5,000-digit number is not quoted whole).
_SHOWN_CHARS = 100


def converted_value(spec: FlagSpec, raw: Any) -> Any:
    """``raw`` in ``spec``'s type, or ``ValueError`` saying what is wrong with it (the
    rules are :meth:`FlagSpec.convert`'s docstring)."""
    if raw is None:
        return raw
    if spec.kind == "computed":  # no declared type: a value, not a foreign object
        return _plain_value(raw)
    if spec.action in _BOOLEAN_ACTIONS:
        if isinstance(raw, bool):
            return raw
        raise ValueError(f"expected true or false, got {raw!r}")
    if not spec.takes_value:
        return raw  # store_const / count: the value as loaded
    if spec.nargs in ("+", "*") or isinstance(spec.nargs, int):
        from ._loaded import loaded_items  # as many values as the command line's

        return [converted_item(spec, item) for item in loaded_items(raw, spec.nargs)]
    return converted_item(spec, raw)


def converted_item(spec: FlagSpec, raw: Any) -> Any:
    """One item of ``spec``'s value (the whole value where it takes one), converted."""
    value = _parse_one(spec, raw)
    # A float setting means a finite number (a learning rate, a loss scale, a timeout):
    # inf and nan would train on silently. A setting where infinity means something
    # declares it with type=float_or_infinity, which refuses nan and -inf itself.
    if type(value) is float and not math.isfinite(value) and (
            spec.type is not float_or_infinity):
        shown = raw if isinstance(raw, str) else value
        raise ValueError(f"{shorten(repr(shown), _SHOWN_CHARS)} is not a finite number")
    return value


def _parse_one(spec: FlagSpec, raw: Any) -> Any:
    if not isinstance(raw, str):
        if spec.type in (int, float, str, None):
            return _plain_scalar(spec, raw)
        if isinstance(raw, enum.Enum) or is_dtype(raw):
            return raw  # already the parsed value (a caller default, a checkpoint)
    try:
        if not isinstance(raw, str):  # a loaded value: the one whose JSON form it is
            from ._loaded import from_loaded

            return converted(from_loaded, raw, spec.type, spec.choices)
        return raw if spec.type is None else converted(spec.type, raw)
    except (TypeError, ValueError, ArgumentTypeError, OverflowError) as exc:
        detail = f" ({shorten(str(exc), _SHOWN_CHARS)})" if str(exc) else ""
        raise ValueError(f"invalid {spec.type_name} value "
                         f"{shorten(repr(raw), _SHOWN_CHARS)}{detail}") from None


def _plain_scalar(spec: FlagSpec, raw: Any) -> Any:
    """A loaded scalar for an ``int``, ``float`` or ``str`` flag, or ``ValueError``."""
    # A plugin reads an int flag as an int: a 1.5, a list or a mapping must stop here --
    # and so must anything else a loaded source holds (a tensor in a checkpoint).
    if type(raw) in (int, float):
        if spec.type in (str, None):
            return str(raw)  # as the same number typed on the command line
        if spec.type is float:
            try:
                return float(raw)
            except OverflowError:
                raise ValueError(f"{raw} is too large for a float") from None
        if type(raw) is int or (math.isfinite(raw) and raw.is_integer()):
            return int(raw)
    raise ValueError(f"expected {spec.type_name or 'text'}, got {_shown(raw)}")


def _plain_value(raw: Any) -> Any:
    """``raw`` if a setting can hold it -- None, a bool, an int, a finite float, text, an
    enum member, a dtype, or lists, tuples and mappings of these -- else ValueError."""
    # a loop, not recursion, over each container once: a pickle may nest a list 100,000
    # deep, or hold itself
    pending, seen = [raw], set()
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind in (list, tuple, dict):
            if id(item) not in seen:
                seen.add(id(item))
                pending.extend(item if kind is not dict else (*item.keys(), *item.values()))
        elif kind is float and not math.isfinite(item):
            raise ValueError(f"{item!r} is not a finite number")
        elif not (item is None or kind in (bool, int, float, str)
                  or isinstance(item, enum.Enum) or is_dtype(item)):
            raise ValueError(f"expected a plain value, got {_shown(item)}")
    return raw


def _shown(raw: Any) -> str:
    """A loaded value in a message, with its type where the repr hides it (``tensor(4)``)."""
    kind = type(raw)
    shown = shorten(repr(raw), _SHOWN_CHARS)
    if raw is None or kind in (bool, int, float, str, list, dict, tuple):
        return shown
    return f"{shown} (a {kind.__module__}.{kind.__qualname__})"


#: How a conversion problem names where the value came from.
_SUBJECTS = {
    "command-line": "{primary}",
    "config-file": "{primary} in config file {detail}",
    "environment": "environment variable {detail}={raw} is not valid",
    "caller-default": "{dest} in the caller's defaults",
    "checkpoint": "{dest} in the checkpoint arguments of {detail}",
    "namespace": "{dest} set on the namespace before validate_args",
}


def conversion_problem(spec: FlagSpec, raw: Any, reason: str, source: str,
                        detail: str) -> Problem:
    """The problem of ``raw`` (from ``source``, ``detail``: a path, a variable) refused
    for ``spec`` because ``reason``."""
    name = detail if source == "environment" else spec.primary
    subject = _SUBJECTS.get(source, "{primary} from {source} {detail}").format(
        primary=spec.primary, dest=spec.dest, detail=detail, source=source,
        raw=shorten(repr(raw), 100))
    kind = "finite float" if spec.type is float else spec.type_name or "text"
    hint = ("choose from " + ", ".join(map(choice_name, spec.choices))
            if spec.choices is not None else
            f"give {name} a number, text, true or false, or a list of these"
            if spec.kind == "computed" else f"give {name} true or false"
            if spec.action in _BOOLEAN_ACTIONS
            else f"give {name} {'an' if kind[:1].lower() in 'aeiou' else 'a'} {kind} value")
    return Problem(f"{subject}: {reason}", (name,), hint, spec.plugin)
