"""Issue 31, class 2: the facade's answers do not depend on the namespace object.

Frameworks wrapping Megatron copy ``args`` before validating it. For every shared parity
case (and every fourth mutation), ``validate_args`` of a ``Namespace(**vars(args))`` copy,
a ``copy.deepcopy`` and a pickle round trip of what ``parse_args`` returned must end as
validating the original does: the same values, or the same problems, and the same warnings
(less those of parsing the command line, which a copy was not).
A namespace lacking settings is one problem naming them.
"""

from __future__ import annotations

import argparse
import copy
import json
import pickle

import pytest

from megaplug import ConfigError
from megaplug.megatron import parse_args, provenance, validate_args
from megaplug.megatron._state import state_of
from megaplug.values._encoding import encode

from reliability_support import MINIMAL, target_for, third_party_blocks
from parity import case_files

COPIES = {
    "namespace": lambda args: argparse.Namespace(**vars(args)),
    "deepcopy": copy.deepcopy,
    "pickle": lambda args: pickle.loads(pickle.dumps(args)),
}

CASES = [path for index, path in enumerate(case_files())
         if path.parent.name == "cases" or index % 4 == 0]


def outcome(args: argparse.Namespace, case: dict) -> tuple:
    """What validating ``args`` ends in: its values, or its problems; and its warnings."""
    env = dict(case.get("env") or {})
    try:
        validate_args(args, case.get("args_defaults") or {}, target=target_for(case),
                      environ=env, torch_types=False)
    except ConfigError as exc:
        return ("error", [str(p) for p in exc.problems], [str(w) for w in exc.warnings])
    values = {key: encode(value) for key, value in vars(args).items()}
    from megaplug.megatron import resolution_warnings

    return ("ok", values, [str(w) for w in resolution_warnings(args)])


def parsed(case: dict) -> argparse.Namespace:
    return parse_args(argv=[*third_party_blocks(), *case["argv"]],
                      environ=dict(case.get("env") or {}))


@pytest.mark.parametrize("path", CASES, ids=lambda path: path.stem)
def test_a_copied_namespace_validates_as_the_original(path, capsys):
    case = json.loads(path.read_text())
    try:
        original = parsed(case)
    except ConfigError:
        pytest.skip("the command line itself is refused: there is no namespace to copy")
    copies = {kind: make(original) for kind, make in COPIES.items()}
    # what parsing the command line warned of (a deprecated spelling) a copy cannot know
    from_parsing = [str(w) for w in state_of(original).problems.warnings]
    verdict, values, warnings = outcome(original, case)
    if path.parent.name == "cases":
        assert verdict == case["expect"], values
    expected = (verdict, values, [w for w in warnings if w not in from_parsing])
    for kind, args in copies.items():
        assert outcome(args, case) == expected, kind
    capsys.readouterr()


def test_a_copy_keeps_what_was_given_apart_from_the_defaults():
    args = copy.deepcopy(parse_args(argv=[*MINIMAL, "--weight-decay", "0.02"], environ={}))
    validate_args(args, environ={}, torch_types=False)
    given = provenance(args)
    assert given["num_layers"].source == "caller-default"  # given on the namespace
    assert given["weight_decay"].source == "caller-default"
    assert given["start_weight_decay"].history()[-1].source == "default"
    assert args.start_weight_decay == args.end_weight_decay == 0.02


def test_a_changed_copy_is_validated_with_the_change():
    args = copy.deepcopy(parse_args(argv=MINIMAL, environ={}))
    args.num_attention_heads = 5  # 64 is not a multiple of 5
    with pytest.raises(ConfigError) as caught:
        validate_args(args, environ={}, torch_types=False)
    assert [p.flags for p in caught.value.problems if p.plugin == "model"] == [
        ("--hidden-size", "--num-attention-heads")]


def lacking_problem(args: argparse.Namespace) -> list:
    with pytest.raises(ConfigError) as caught:
        validate_args(args, environ={}, torch_types=False)
    return caught.value.problems


def test_a_namespace_missing_a_setting_is_one_problem_naming_it():
    values = vars(parse_args(argv=MINIMAL, environ={}))
    del values["world_size"], values["rank"]
    problems = lacking_problem(argparse.Namespace(**values))
    assert [p.message for p in problems] == [
        "the namespace given to validate_args lacks 2 settings the plugins read: rank, "
        "world_size"]
    assert problems[0].flags == ("rank", "world_size")
    assert "parse_args" in problems[0].hint
    assert not any("raised" in p.message for p in problems)


def test_a_namespace_built_by_hand_is_one_problem_with_a_count():
    problems = lacking_problem(argparse.Namespace(num_layers=2, hidden_size=64))
    assert len(problems) == 1
    message = problems[0].message
    assert message.startswith("the namespace given to validate_args lacks ")
    assert message.endswith(" more") and "num_layers," not in message
    assert len(problems[0].flags) == 12


def test_a_namespace_validated_twice_names_the_retired_settings_it_lost(capsys):
    args = validate_args(parse_args(argv=MINIMAL, environ={}), environ={}, torch_types=False)
    for again in (args, copy.deepcopy(args)):
        problems = lacking_problem(again)
        assert len(problems) == 1 and "batch_size" in problems[0].message
    capsys.readouterr()
