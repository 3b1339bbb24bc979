"""Copies of setting values made without the ``copy`` module: the same values as
``copy.copy`` / ``copy.deepcopy``, and as independent of the original."""

from __future__ import annotations

import copy
import enum
import signal

from hypothesis import given, settings
from hypothesis import strategies as st

from megaplug.values._encoding import deep_copy, fresh


class Colour(enum.Enum):
    RED = 1
    BLUE = 2


LEAVES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                   st.text(max_size=5), st.sampled_from([Colour.RED, Colour.BLUE,
                                                         signal.Signals.SIGTERM]))
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.tuples(inner, inner),
        st.sets(st.one_of(st.integers(), st.text(max_size=3)), max_size=4),
        st.frozensets(st.integers(), max_size=3)),
    max_leaves=12)


def _containers(value: object) -> list[object]:
    """Every list, dict and set inside ``value``, ``value`` included."""
    found: list[object] = []
    if isinstance(value, (list, dict, set)):
        found.append(value)
    items = value.values() if isinstance(value, dict) else value
    if isinstance(value, (list, tuple, dict)):
        for item in items:
            found.extend(_containers(item))
    return found


@given(VALUES)
@settings(max_examples=500, deadline=None)
def test_a_deep_copy_equals_deepcopys_and_shares_no_container(value):
    copied = deep_copy(value)
    assert copied == copy.deepcopy(value)
    assert type(copied) is type(value)
    shared = {id(c) for c in _containers(value)} & {id(c) for c in _containers(copied)}
    assert not shared  # changing the copy in place never changes the original


def test_a_nested_value_changed_in_the_copy_stays_in_the_copy():
    original = {"layers": [[1, 2], [3]], "tags": {"a"}}
    copied = deep_copy(original)
    copied["layers"][0].append(9)
    copied["tags"].add("b")
    assert original == {"layers": [[1, 2], [3]], "tags": {"a"}}


def test_other_objects_go_to_deepcopy():
    class Box:
        def __init__(self, items: list[int]) -> None:
            self.items = items

    box = Box([1])
    copied = deep_copy([box])
    assert copied[0] is not box and copied[0].items == [1] and copied[0].items is not box.items


@given(VALUES)
@settings(max_examples=300, deadline=None)
def test_a_fresh_value_is_copy_copy(value):
    made = fresh(value)
    assert made == copy.copy(value) and type(made) is type(value)
    if isinstance(value, (list, dict, set)):
        assert made is not value
    else:
        assert made is value


def test_a_list_subclass_keeps_its_class():
    class Layers(list):
        pass

    made = fresh(Layers([1, 2]))
    assert type(made) is Layers and made == [1, 2]
