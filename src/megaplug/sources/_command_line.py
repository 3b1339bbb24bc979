"""Splitting a command line into flag occurrences, the way argparse does.

Building an argparse parser for ~900 flags costs more than everything else in a resolve,
and every rank of a job pays it at start-up. The flag table already knows every option
string, so megaplug matches tokens against it directly, reproducing argparse's rules for
what counts as an option (``--x``, ``--x=v``; ``-1`` and ``-.5`` are values, ``-1e-4`` is
not; a token with a space is a value), how many values each ``nargs`` takes, and its
error wording. argparse itself is still used to print ``--help``.
"""

from __future__ import annotations

import re

from .._options import FlagSpec
from .._record import MutableRecord

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Mapping, Sequence

#: argparse's own test for a token that is a negative number rather than an option.
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")

HELP_TOKENS = ("-h", "--help")


class Occurrence(MutableRecord):
    """One use of a flag: the spec, the spelling used and the raw value(s) given, and the
    tokens of the command line it took (``tokens[start:end]``, the flag's own first), so
    that a rewrite can keep them exactly as written (``--lr=-1``)."""

    __slots__ = ("spec", "spelling", "raw", "start", "end")

    def __init__(self, spec: FlagSpec, spelling: str, raw: str | list[str] | None,
                 start: int = 0, end: int = 0) -> None:
        self.spec, self.spelling, self.raw = spec, spelling, raw
        self.start, self.end = start, end


class Tokens(MutableRecord):
    """A split command line: flag occurrences, unknown tokens (and where each stands in the
    command line, ``unknown_at``) and argparse-style errors."""

    __slots__ = ("occurrences", "unknown", "unknown_at", "errors", "wants_help")

    def __init__(self) -> None:
        self.occurrences: list[Occurrence] = []
        self.unknown: list[str] = []
        self.unknown_at: list[int] = []
        self.errors: list[str] = []
        self.wants_help = False


def _is_option(token: str, options: Mapping[str, FlagSpec]) -> bool:
    if not token or token[0] != "-":
        return False
    if token in options or token in HELP_TOKENS:
        return True
    if len(token) == 1:
        return False
    if "=" in token and token.split("=", 1)[0] in options:
        return True
    if NEGATIVE_NUMBER.match(token):
        return False
    return " " not in token


def _expected(nargs: int | str | None) -> str:
    if nargs is None:
        return "expected one argument"
    if nargs == "+":
        return "expected at least one argument"
    if nargs == "?":
        return "expected at most one argument"
    return f"expected {nargs} argument{'s' if nargs != 1 else ''}"


def split(argv: Sequence[str], options: Mapping[str, FlagSpec]) -> Tokens:
    """Match ``argv`` against ``options`` (option string -> spec), collecting every error."""
    result = Tokens()
    tokens = list(argv)
    kinds = []
    after_separator = False
    for token in tokens:
        if after_separator:
            kinds.append("A")
        elif token == "--":
            kinds.append("-")
            after_separator = True
        else:
            kinds.append("O" if _is_option(token, options) else "A")
    index = 0
    while index < len(tokens):
        token, kind = tokens[index], kinds[index]
        index += 1
        if kind != "O":
            if kind == "A":
                result.unknown.append(token)
                result.unknown_at.append(index - 1)
            continue
        if token in HELP_TOKENS:
            result.wants_help = True
            continue
        spelling, explicit = token, None
        if token not in options and "=" in token:
            spelling, explicit = token.split("=", 1)
        spec = options.get(spelling)
        if spec is None:
            result.unknown.append(token)
            result.unknown_at.append(index - 1)
            continue
        index = _take_values(spec, spelling, explicit, tokens, kinds, index, result)
    return result


#: How many values each ``nargs`` takes: (at least, at most); an int n takes exactly n.
_ARITY: dict[str | None, tuple[int, int | None]] = {None: (1, 1), "?": (0, 1), "+": (1, None),
                                                   "*": (0, None)}


def _take_values(spec: FlagSpec, spelling: str, explicit: str | None, tokens: list[str],
                 kinds: list[str], index: int, result: Tokens) -> int:
    """Record one occurrence of ``spec``; returns the index of the next unread token."""
    start = index - 1
    nargs = spec.nargs
    if not spec.takes_value or explicit is not None:
        if not spec.takes_value and explicit is not None:
            result.errors.append(f"argument {spelling}: ignored explicit argument {explicit!r}")
        elif not spec.takes_value or nargs in (None, "?"):
            result.occurrences.append(Occurrence(spec, spelling, explicit, start, index))
        elif nargs in ("+", "*", 1):
            result.occurrences.append(Occurrence(spec, spelling, [explicit], start, index))
        else:
            result.errors.append(f"argument {spelling}: {_expected(nargs)}")
        return index
    low, high = _ARITY[nargs] if nargs in _ARITY else (int(nargs), int(nargs))  # type: ignore
    available = 0
    while index + available < len(tokens) and kinds[index + available] == "A":
        available += 1
    taken = available if high is None else min(available, high)
    if taken < low:
        result.errors.append(f"argument {spelling}: {_expected(nargs)}")
        return index + (available if isinstance(nargs, int) else 0)
    values = tokens[index:index + taken]
    raw = (values[0] if values else None) if nargs in (None, "?") else values
    result.occurrences.append(Occurrence(spec, spelling, raw, start, index + taken))
    return index + taken
