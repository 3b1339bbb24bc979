"""Layer-pattern expressions such as ``([1]*3+[0]*1)*3``, parsed without ``eval``.

The language is integers, lists of integers, ``+``, ``*`` and parentheses, with Python's
meaning: ``list + list`` concatenates, ``list * int`` and ``int * list`` repeat,
``int + int`` and ``int * int`` are arithmetic. Python's own parser reads the expression
(``ast.parse``), after a character check, and only those nodes are evaluated; anything
else is rejected with a message that points at the offending character. Results are
capped so a short string cannot ask for gigabytes (``[1]*10**9`` style inputs fail cleanly).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    import ast

Value = Union[int, list]

#: Largest list a pattern may produce and largest integer it may contain.
MAX_LENGTH = 1_000_000
MAX_INT = 10**12

#: A number (digits and underscores), a symbol of the language, blanks, or anything else.
_TOKEN = re.compile(r"([0-9][0-9_]*)|[\[\]()+*,]|\s+|(.)", re.S)
#: Python's decimal integer literal: no leading zeros (``0``, ``00`` and ``1_000`` are
#: fine, ``01`` is not), single underscores between digits.
_DECIMAL = re.compile(r"[1-9](?:_?[0-9])*|0(?:_?0)*")


class PatternError(ValueError):
    """A pattern string that is not a valid integer-list expression."""


def parse_pattern(text: str) -> Value:
    """Evaluate a pattern expression to an ``int`` or a ``list`` of ints."""
    if not isinstance(text, str):
        raise PatternError(f"expected a string, got {type(text).__name__}")
    import ast  # only where a pattern is parsed: the facade imports this module on start-up

    _check_characters(text)
    if not text.strip():
        raise PatternError("empty pattern")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:  # ValueError: a literal of too many digits
        where = f" at position {exc.offset - 1}" if getattr(exc, "offset", None) else ""
        raise PatternError(f"{text!r} is not a complete expression{where}: "
                           f"{getattr(exc, 'msg', exc)}") from None
    return _value(tree.body, text)


def _check_characters(text: str) -> None:
    for match in _TOKEN.finditer(text):
        number, other = match.groups()
        if other is not None:
            raise PatternError(f"unexpected character {other!r} at position {match.start()} "
                               f"in {text!r}")
        if number is not None and not _DECIMAL.fullmatch(number):
            # Megatron evaluates patterns as Python, which refuses such a literal
            why = ("a number other than 0 cannot start with 0" if number[0] == "0"
                   and "_" not in number else "misplaced '_'")
            raise PatternError(f"invalid number {number!r} at position {match.start()} in "
                               f"{text!r}: {why}")


def _value(node: ast.AST, text: str) -> Value:
    """The value of a node of the language; any other node is refused."""
    import ast
    position = getattr(node, "col_offset", 0) + len(text) - len(text.lstrip())
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _check_int(node.value, text)
    if isinstance(node, ast.List):
        items = [_value(element, text) for element in node.elts]
        if any(isinstance(item, list) for item in items):
            raise PatternError(f"list elements must be integers (position {position} "
                               f"in {text!r})")
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        combine = _add if isinstance(node.op, ast.Add) else _multiply
        return combine(_value(node.left, text), _value(node.right, text), text, position)
    raise PatternError(f"unsupported expression at position {position} in {text!r} (only "
                       "integers, lists of integers, '+', '*' and parentheses)")


def _check_int(value: int, text: str) -> int:
    if value > MAX_INT:
        raise PatternError(f"number too large in {text!r} (limit {MAX_INT})")
    return value


def _check_length(length: int, text: str) -> None:
    if length > MAX_LENGTH:
        raise PatternError(f"pattern {text!r} expands to {length} entries (limit {MAX_LENGTH})")


def _add(left: Value, right: Value, text: str, position: int) -> Value:
    if isinstance(left, int) and isinstance(right, int):
        return _check_int(left + right, text)
    if isinstance(left, list) and isinstance(right, list):
        _check_length(len(left) + len(right), text)
        return left + right
    raise PatternError(f"cannot add a list and a number at position {position} in {text!r}")


def _multiply(left: Value, right: Value, text: str, position: int) -> Value:
    if isinstance(left, int) and isinstance(right, int):
        return _check_int(left * right, text)
    if isinstance(left, list) and isinstance(right, list):
        raise PatternError(f"cannot multiply two lists at position {position} in {text!r}")
    items, count = (left, right) if isinstance(left, list) else (right, left)
    _check_length(len(items) * count, text)  # type: ignore[arg-type]
    return items * count  # type: ignore[operator]
