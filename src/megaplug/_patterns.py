"""Layer-pattern expressions such as ``([1]*3+[0]*1)*3``, parsed without ``eval``.

The language is integers, lists of integers, ``+``, ``*`` and parentheses, with Python's
meaning: ``list + list`` concatenates, ``list * int`` and ``int * list`` repeat,
``int + int`` and ``int * int`` are arithmetic. Anything else is rejected with a message
that points at the offending character. Results are capped so a short string cannot ask
for gigabytes (``[1]*10**9`` style inputs fail cleanly).
"""

from __future__ import annotations

import re
from typing import Union

Value = Union[int, list]

#: Largest list a pattern may produce and largest integer it may contain.
MAX_LENGTH = 1_000_000
MAX_INT = 10**12

#: A run of digits and underscores; whether it is a valid literal is checked separately
#: so the message can say what is wrong with it.
_TOKEN = re.compile(r"\s*(?:([0-9][0-9_]*)|(\S))")
#: Python's decimal integer literal: no leading zeros (``0``, ``00`` and ``1_000`` are
#: fine, ``01`` is not), single underscores between digits.
_DECIMAL = re.compile(r"[1-9](?:_?[0-9])*|0(?:_?0)*")


class PatternError(ValueError):
    """A pattern string that is not a valid integer-list expression."""


def _tokens(text: str) -> list[tuple[str, str, int]]:
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:  # only trailing whitespace is left
            break
        number, symbol = match.groups()
        start = match.start(1) if number is not None else match.start(2)
        if number is not None:
            if not _DECIMAL.fullmatch(number):
                # Megatron evaluates patterns as Python, which refuses such a literal
                why = ("a number other than 0 cannot start with 0" if number[0] == "0"
                       and "_" not in number else "misplaced '_'")
                raise PatternError(f"invalid number {number!r} at position {start} in "
                                   f"{text!r}: {why}")
            tokens.append(("int", number, start))
        elif symbol in "[]()+*,":
            tokens.append((symbol, symbol, start))
        else:
            raise PatternError(f"unexpected character {symbol!r} at position {start} in {text!r}")
        position = match.end()
    tokens.append(("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0

    def peek(self) -> str:
        return self.tokens[self.index][0]

    def take(self, kind: str) -> tuple[str, str, int]:
        token = self.tokens[self.index]
        if token[0] != kind:
            found = "end of input" if token[0] == "end" else repr(token[1])
            raise PatternError(f"expected {kind!r} but found {found} at position {token[2]} "
                               f"in {self.text!r}")
        self.index += 1
        return token

    def parse(self) -> Value:
        if self.peek() == "end":
            raise PatternError("empty pattern")
        value = self.expression()
        self.take("end")
        return value

    def expression(self) -> Value:
        value = self.term()
        while self.peek() == "+":
            position = self.take("+")[2]
            value = _add(value, self.term(), self.text, position)
        return value

    def term(self) -> Value:
        value = self.factor()
        while self.peek() == "*":
            position = self.take("*")[2]
            value = _multiply(value, self.factor(), self.text, position)
        return value

    def factor(self) -> Value:
        kind = self.peek()
        if kind == "int":
            value = int(self.take("int")[1])
            return _check_int(value, self.text)
        if kind == "(":
            self.take("(")
            value = self.expression()
            self.take(")")
            return value
        if kind == "[":
            return self.list_literal()
        token = self.tokens[self.index]
        found = "end of input" if kind == "end" else repr(token[1])
        raise PatternError(f"expected a number, '[' or '(' but found {found} at position "
                           f"{token[2]} in {self.text!r}")

    def list_literal(self) -> list:
        self.take("[")
        items: list = []
        if self.peek() != "]":
            while True:
                position = self.tokens[self.index][2]
                item = self.expression()
                if not isinstance(item, int):
                    raise PatternError(f"list elements must be integers (position {position} "
                                       f"in {self.text!r})")
                items.append(item)
                if self.peek() != ",":
                    break
                self.take(",")
                if self.peek() == "]":  # trailing comma, as Python allows
                    break
        self.take("]")
        return items


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


def parse_pattern(text: str) -> Value:
    """Evaluate a pattern expression to an ``int`` or a ``list`` of ints."""
    if not isinstance(text, str):
        raise PatternError(f"expected a string, got {type(text).__name__}")
    return _Parser(text).parse()


def parse_int_list(text: str) -> list:
    """A pattern that must produce a list (``'[1,0]*2'`` -> ``[1, 0, 1, 0]``)."""
    value = parse_pattern(text)
    if not isinstance(value, list):
        raise PatternError(f"{text!r} is a number, expected a list expression")
    return value
