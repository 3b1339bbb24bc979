"""Layer-pattern expressions such as ``([1]*3+[0]*1)*3``, parsed without ``eval``.

The language is integers, lists of integers, ``+``, ``*`` and parentheses, with Python's
meaning. ``ast.parse`` reads the expression after a character check, and only those nodes
are evaluated; anything else is refused with its position. Results are capped, so a short
string cannot ask for gigabytes (``[1]*10**9``).
"""

from __future__ import annotations

import re
TYPE_CHECKING = False
if TYPE_CHECKING:
    import ast

Value = int | list

#: Largest list a pattern may produce and largest integer it may contain.
MAX_LENGTH = 1_000_000
MAX_INT = 10**12

#: A number (digits and underscores), a symbol of the language, blanks, or anything else.
# (Text, compiled -- and cached by re -- when a pattern is first parsed, not at import.)
_TOKEN = r"(?s)([0-9][0-9_]*)|[\[\]()+*,]|\s+|(.)"
#: Python's decimal integer literal: no leading zeros (``0``, ``00`` and ``1_000`` are
#: fine, ``01`` is not), single underscores between digits.
_DECIMAL = r"[1-9](?:_?[0-9])*|0(?:_?0)*"


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
    for match in re.finditer(_TOKEN, text):
        number, other = match.groups()
        if other is not None:
            raise PatternError(f"unexpected character {other!r} at position {match.start()} "
                               f"in {text!r}")
        if number is not None and not re.fullmatch(_DECIMAL, number):
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
        return _checked(node.value, text)
    if isinstance(node, ast.List):
        items = [_value(element, text) for element in node.elts]
        if any(isinstance(item, list) for item in items):
            raise PatternError(f"list elements must be integers (position {position} "
                               f"in {text!r})")
        return items
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
        left, right = _value(node.left, text), _value(node.right, text)
        where = f"at position {position} in {text!r}"
        if isinstance(node.op, ast.Add):
            if type(left) is not type(right):
                raise PatternError(f"cannot add a list and a number {where}")
            return _checked(left + right, text)  # type: ignore[operator]
        if isinstance(left, list) and isinstance(right, list):
            raise PatternError(f"cannot multiply two lists {where}")
        if isinstance(left, list) or isinstance(right, list):
            items, count = (left, right) if isinstance(left, list) else (right, left)
            _check_length(len(items) * count, text)  # type: ignore[arg-type]  # before building
        return _checked(left * right, text)  # type: ignore[operator]
    raise PatternError(f"unsupported expression at position {position} in {text!r} (only "
                       "integers, lists of integers, '+', '*' and parentheses)")


def _checked(value: Value, text: str) -> Value:
    """``value`` if within the caps: an int up to MAX_INT, a list up to MAX_LENGTH long."""
    if isinstance(value, list):
        _check_length(len(value), text)
    elif value > MAX_INT:
        raise PatternError(f"number too large in {text!r} (limit {MAX_INT})")
    return value


def _check_length(length: int, text: str) -> None:
    if length > MAX_LENGTH:
        raise PatternError(f"pattern {text!r} expands to {length} entries (limit {MAX_LENGTH})")


#: What Megatron's ``_eval_pattern`` refuses before it evaluates a pattern.
_NOT_PATTERN = r"[^,\d\[\]\(\)\+\*]"


def layer_pattern(text: str | list[int]) -> Value:
    """A per-layer pattern as Megatron's layer-pattern flags take it (``'([1]*3+[0])*2'``):
    only digits, commas, ``[ ]``, ``( )``, ``+`` and ``*`` (Megatron's character check), then
    :func:`parse_pattern`; a list (a config file's value) as it is."""
    if isinstance(text, list):
        return text
    bad = re.search(_NOT_PATTERN, text)
    if bad is not None:
        raise PatternError(f"invalid pattern {text!r}: character {bad.group()!r} is not allowed "
                           "(use digits, commas, [ ], ( ), + and *)")
    return parse_pattern(text)


def layer_frequency(value: str | int | list[int]) -> Value:
    """A layer frequency as Megatron's ``moe_freq_type``, ``no_rope_freq_type`` and
    ``la_freq_type`` take it: an integer N (``4`` or ``'4'``), or, with a ``[``, a per-layer
    :func:`layer_pattern`; an int or a list (a config file's value) as it is."""
    if isinstance(value, list) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if "[" in value:
        return layer_pattern(value)
    try:
        return int(value)
    except ValueError:
        raise PatternError("expected an integer or a list pattern such as '([1]*3+[0]*1)*3', "
                           f"got {value!r}") from None


def int_tuple(text: str | tuple[int, ...]) -> tuple[int, ...]:
    """``'1,2'`` or ``'(1,2)'`` as a tuple of ints (Megatron's ``tuple_type``); a tuple as it
    is."""
    if isinstance(text, tuple):
        return text
    try:
        return tuple(int(part) for part in text.strip("()").split(","))
    except ValueError:
        raise ValueError(f"expected comma-separated integers such as 128,0, got {text!r}") from None
