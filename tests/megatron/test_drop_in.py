"""megaplug's facade is a drop-in for megatron.training.arguments, judged by Megatron's code.

For every shared parity configuration that the pinned megatron-core release accepts, the
namespace of Megatron's own parse_args + validate_args and megaplug's facade hold equal
values of identical types (the differences between the pinned release and the newer
revision megaplug follows are derived from the two parsers, not listed by hand); the
namespace pickles; Megatron's own core_transformer_config_from_args builds the same
TransformerConfig from both.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import pickle

import pytest

import reference as ref
from megaplug import load


def _megatron_parser_defaults() -> dict[str, object]:
    from megatron.training.arguments import add_megatron_arguments

    parser = add_megatron_arguments(argparse.ArgumentParser(add_help=False))
    defaults: dict[str, object] = {}
    for action in parser._actions:
        defaults.setdefault(action.dest, action.default)
    return defaults


MEGATRON_DEFAULTS = _megatron_parser_defaults()
MEGAPLUG_TABLE = load(ref.third_party_blocks())[0].table
#: Flags of the pinned release that megaplug (following a newer revision) does not have.
ONLY_IN_RELEASE = set(MEGATRON_DEFAULTS) - set(MEGAPLUG_TABLE.by_dest)
#: Flags of the newer revision that the pinned release does not have yet.
ONLY_IN_MEGAPLUG = {spec.dest for spec in MEGAPLUG_TABLE if spec.kind == "flag"} - set(
    MEGATRON_DEFAULTS)


def _default_differs(dest: str) -> bool:
    """The two revisions declare a different default for this flag."""
    if dest not in MEGATRON_DEFAULTS or dest not in MEGAPLUG_TABLE:
        return False
    return MEGATRON_DEFAULTS[dest] != MEGAPLUG_TABLE.by_dest[dest][0].default


def _release_accepts_flags(case: dict) -> bool:
    from megatron.training.arguments import add_megatron_arguments

    parser = add_megatron_arguments(argparse.ArgumentParser(add_help=False))
    options = {o for action in parser._actions for o in action.option_strings}
    return all(token.split("=", 1)[0] in options for token in case["argv"]
               if token.startswith("--"))


ACCEPTED = [path for path in ref.case_files() + ref.case_files("mutations")
            if ref.load_case(path)["expect"] == "ok"
            and _release_accepts_flags(ref.load_case(path))]


def assert_same_types(expected, actual, where: str) -> None:
    assert type(actual) is type(expected), (
        f"{where}: Megatron has {type(expected).__module__}.{type(expected).__qualname__} "
        f"{expected!r}, megaplug {type(actual).__module__}.{type(actual).__qualname__} "
        f"{actual!r}")
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), where
        for index, (e, a) in enumerate(zip(expected, actual)):
            assert_same_types(e, a, f"{where}[{index}]")


def compare_namespaces(megatron: argparse.Namespace, ours: argparse.Namespace,
                       argv: list[str]) -> None:
    given = {token.split("=", 1)[0] for token in argv if token.startswith("--")}
    theirs, mine = vars(megatron), vars(ours)
    assert set(theirs) - set(mine) <= ONLY_IN_RELEASE, sorted(set(theirs) - set(mine))
    assert set(mine) - set(theirs) <= ONLY_IN_MEGAPLUG, sorted(set(mine) - set(theirs))
    for key in set(theirs) & set(mine):
        if theirs[key] != mine[key] and _default_differs(key) and not (
                set(MEGAPLUG_TABLE.by_dest[key][0].option_strings) & given):
            continue  # a default the two revisions declare differently, left at its default
        assert mine[key] == theirs[key], f"{key}: Megatron {theirs[key]!r}, megaplug {mine[key]!r}"
        assert_same_types(theirs[key], mine[key], key)


@pytest.mark.parametrize("path", ACCEPTED, ids=[p.stem for p in ACCEPTED])
def test_accepted_configuration_is_type_identical_and_pickles(path):
    case = ref.load_case(path)
    megatron = ref.megatron_args(case)
    ours = ref.megaplug_args(case)
    compare_namespaces(megatron, ours, case["argv"])
    restored = pickle.loads(pickle.dumps(ours))
    assert vars(restored) == vars(ours)


def _callable_key(function):
    """Callables compare by what they call: a partial by its function and arguments."""
    if isinstance(function, functools.partial):
        return (_callable_key(function.func), function.args, function.keywords)
    return getattr(function, "__qualname__", repr(function))


@pytest.mark.parametrize("path", ACCEPTED[::6], ids=[p.stem for p in ACCEPTED[::6]])
def test_core_transformer_config_from_args_is_identical(path):
    from megatron.training.arguments import core_transformer_config_from_args

    case = ref.load_case(path)
    megatron, ours = ref.megatron_args(case), ref.megaplug_args(case)
    with ref.targeting(case):
        try:
            expected = core_transformer_config_from_args(megatron)
        except Exception as refused:  # this machine lacks TE kernels, or the config is bad:
            with pytest.raises(type(refused)) as info:  # megaplug's args fail alike
                core_transformer_config_from_args(ours)
            assert str(info.value) == str(refused)
            return
        actual = core_transformer_config_from_args(ours)
    assert type(actual) is type(expected)
    for field in dataclasses.fields(expected):
        e, a = getattr(expected, field.name), getattr(actual, field.name)
        if callable(e) and not isinstance(e, type):
            assert _callable_key(a) == _callable_key(e), field.name
            continue
        assert a == e, f"{field.name}: Megatron {e!r}, megaplug {a!r}"
        assert_same_types(e, a, field.name)
