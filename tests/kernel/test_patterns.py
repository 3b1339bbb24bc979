"""Layer-pattern expressions: equal to Python's meaning, never evaluated by Python."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megaplug import PatternError, parse_pattern
from megaplug.values._patterns import MAX_LENGTH


# A generated expression is a tree; its text and its value are computed from the tree,
# so the reference never goes through eval.
def _leaf():
    ints = st.integers(min_value=0, max_value=9).map(lambda n: (str(n), n))
    lists = st.lists(st.integers(min_value=0, max_value=3), max_size=4).map(
        lambda xs: ("[" + ",".join(map(str, xs)) + "]", list(xs)))
    return ints | lists


def _combine(children):
    def plus(pair):
        (lt, lv), (rt, rv) = pair
        if isinstance(lv, int) != isinstance(rv, int):
            return None
        return (f"{lt}+{rt}", lv + rv)

    def times(pair):
        (lt, lv), (rt, rv) = pair
        if isinstance(lv, list) and isinstance(rv, list):
            return None
        if isinstance(lv, list) or isinstance(rv, list):
            count = rv if isinstance(lv, list) else lv
            if count > 5:
                return None
        return (f"({lt})*({rt})", lv * rv)

    pairs = st.tuples(children, children)
    return (pairs.map(plus) | pairs.map(times)).filter(lambda x: x is not None) | children.map(
        lambda c: (f"({c[0]})", c[1]))


EXPRESSIONS = st.recursive(_leaf(), _combine, max_leaves=8)


@settings(max_examples=300, deadline=None)
@given(EXPRESSIONS)
def test_generated_expressions_match_their_reference_value(expression):
    text, value = expression
    assert parse_pattern(text) == value


@pytest.mark.parametrize("text, value", [
    ("([1]*3+[0]*1)*3", [1, 1, 1, 0] * 3),
    ("[1]+[0]*23", [1] + [0] * 23),
    ("4", 4),
    (" [0, 1 ,] * 2 ", [0, 1, 0, 1]),
    ("2*[1]", [1, 1]),
    ("[1_0, 0, 00]", [10, 0, 0]),  # Python's literals: underscores, and zero spelled twice
])
def test_known_patterns(text, value):
    assert parse_pattern(text) == value


@pytest.mark.parametrize("text, message", [
    ("__import__('os').system('touch /tmp/megaplug-pwned')", "unexpected character '_'"),
    ("[1]*", "'[1]*' is not a complete expression"),
    ("[1]+1", "cannot add a list and a number"),
    ("[1]*[2]", "cannot multiply two lists"),
    ("[[1]]", "list elements must be integers"),
    ("(1", "'(1' is not a complete expression"),
    ("(1, 2)", "unsupported expression at position 0"),
    ("", "empty pattern"),
    ("1.5", "unexpected character '.'"),
    ("-1", "unexpected character '-'"),
    ("[01]*3", "invalid number '01' at position 1 in '[01]*3': "
               "a number other than 0 cannot start with 0"),
    ("[1,007]", "invalid number '007'"),
    ("[1__0]", "invalid number '1__0' at position 1 in '[1__0]': misplaced '_'"),
    ("[10_]", "misplaced '_'"),
    (f"[1]*{MAX_LENGTH + 1}", "expands to"),
    ("[1]*10000000000000", "too large"),
])
def test_invalid_patterns_are_rejected_with_a_message(text, message):
    with pytest.raises(PatternError,
                       match=message.replace("[", r"\[").replace("(", r"\(")
                                    .replace("*", r"\*").replace(")", r"\)")):
        parse_pattern(text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_text_either_parses_or_raises_pattern_error(text):
    try:
        value = parse_pattern(text)
    except PatternError:
        return
    assert isinstance(value, (int, list))


def test_a_pattern_must_be_text():
    with pytest.raises(PatternError, match="expected a string, got list"):
        parse_pattern([1, 0])  # type: ignore[arg-type]
