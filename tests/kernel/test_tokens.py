"""megaplug's command-line splitting agrees with argparse, token for token."""

from __future__ import annotations

import argparse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from megaplug._options import FlagSpec
from megaplug.sources._command_line import split

SPECS = [
    FlagSpec("a", "t", option_strings=("--a",), type=int),
    FlagSpec("b", "t", option_strings=("--b",), nargs="+"),
    FlagSpec("c", "t", option_strings=("--c",), action="store_true", const=True, default=False),
    FlagSpec("d", "t", option_strings=("--d",), nargs=2),
    FlagSpec("e", "t", option_strings=("--e", "--e-alias"), nargs="*"),
    FlagSpec("f", "t", option_strings=("--f",), nargs="?", const="C"),
    FlagSpec("g", "t", option_strings=("--g", "--no-g"), action="boolean_optional"),
]
OPTIONS = {o: s for s in SPECS for o in s.option_strings}


class _Raising(argparse.ArgumentParser):
    def error(self, message):
        raise ValueError(message)


def _argparse():
    parser = _Raising(allow_abbrev=False, add_help=False, argument_default=argparse.SUPPRESS)
    parser.add_argument("--a")
    parser.add_argument("--b", nargs="+")
    parser.add_argument("--c", action="store_true")
    parser.add_argument("--d", nargs=2)
    parser.add_argument("--e", "--e-alias", nargs="*")
    parser.add_argument("--f", nargs="?", const="C")
    parser.add_argument("--g", action=argparse.BooleanOptionalAction)
    return parser


def _ours(argv):
    tokens = split(argv, OPTIONS)
    if tokens.errors:
        return "error"
    values = {}
    for occurrence in tokens.occurrences:
        spec = occurrence.spec
        if spec.action == "store_true":
            values[spec.dest] = True
        elif spec.action == "boolean_optional":
            values[spec.dest] = not occurrence.spelling.startswith("--no-")
        elif occurrence.raw is None:
            values[spec.dest] = spec.const
        else:
            values[spec.dest] = occurrence.raw
    return values, [t for t in tokens.unknown]


def _theirs(argv):
    try:
        namespace, extras = _argparse().parse_known_args(argv)
    except ValueError:
        return "error"
    return vars(namespace), [t for t in extras if t != "--"]


TOKENS = st.sampled_from([
    "--a", "--b", "--c", "--d", "--e", "--e-alias", "--f", "--g", "--no-g", "--a=3", "--b=x",
    "--c=1", "--d=1", "--e=1", "1", "2", "-1", "-1e-4", "-.5", "x y", "-x", "", "foo",
    "--zzz", "--zzz=1", "-", "--",
])


@settings(max_examples=1500, deadline=None)
@given(st.lists(TOKENS, max_size=8))
def test_split_agrees_with_argparse(argv):
    ours, theirs = _ours(argv), _theirs(argv)
    if theirs == "error" or ours == "error":
        assert ours == theirs, (argv, ours, theirs)
        return
    assert ours[0] == theirs[0], argv
    assert [t for t in ours[1] if t != "--"] == theirs[1], argv


@pytest.mark.parametrize("argv, message", [
    (["--a"], "argument --a: expected one argument"),
    (["--b"], "argument --b: expected at least one argument"),
    (["--d", "1"], "argument --d: expected 2 arguments"),
    (["--c=1"], "argument --c: ignored explicit argument '1'"),
    (["--a", "-1e-4"], "argument --a: expected one argument"),
])
def test_error_wording_matches_argparse(argv, message):
    assert split(argv, OPTIONS).errors == [message]


def test_negative_numbers_and_spaces_are_values():
    tokens = split(["--a", "-3", "--b", "-.5", "x y", "--e"], OPTIONS)
    assert [(o.spec.dest, o.raw) for o in tokens.occurrences] == [
        ("a", "-3"), ("b", ["-.5", "x y"]), ("e", [])]
