"""A command-line problem leaves the facade as argparse's error leaves Megatron's
``parse_args``: as a ``SystemExit`` -- and still one ConfigError with every problem.
Megatron's own tests expect the exit (``pytest.raises(SystemExit)`` around ``parse_args``
with an unknown choice)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import megaplug
from megaplug.megatron import (
    ConfigError,
    UsageError,
    parse_and_validate_args,
    parse_args,
    validate_args,
)

BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2",
        "--train-iters", "10", "--lr", "1e-4", "-p", "no:lora"]
ENV = {"RANK": "0", "WORLD_SIZE": "1"}
TARGET = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                    device_capability=(9, 0))


def test_an_invalid_choice_exits_like_argparse(capsys):
    with pytest.raises(SystemExit) as info:
        parse_args(argv=[*BASE, "--rl-submission-granularity", "X"], environ=ENV)
    error = info.value
    assert isinstance(error, UsageError) and isinstance(error, ConfigError)
    assert isinstance(error, AssertionError) and isinstance(error, Exception)
    [problem] = error.problems
    assert "--rl-submission-granularity: invalid choice 'X'" in problem.message
    assert error.code == str(error)  # uncaught, Python prints the report
    assert capsys.readouterr().err == ""  # a caller that catches it prints it, once


def test_parse_and_validation_problems_come_together_in_the_exit():
    with pytest.raises(UsageError) as info:
        parse_and_validate_args(argv=[*BASE, "--hidden-size", "66", "--no-such-flag"],
                                environ=ENV, target=TARGET)
    messages = [p.message for p in info.value.problems]
    assert any("--no-such-flag" in m for m in messages)
    assert any(p.plugin == "model" for p in info.value.problems)
    assert info.value.partial["hidden_size"] == 66


def test_validation_problems_alone_are_no_exit():
    """Megatron's validate_args fails with an AssertionError, not an exit."""
    args = parse_args(argv=[*BASE, "--hidden-size", "66"], environ=ENV)
    with pytest.raises(ConfigError) as info:
        validate_args(args, target=TARGET, environ=ENV)
    assert not isinstance(info.value, SystemExit)
    assert all(p.plugin == "model" for p in info.value.problems)


def test_an_uncaught_usage_error_says_why_and_fails():
    script = ("from megaplug.megatron import parse_args\n"
              "parse_args(argv=['--lr-typo', '1', '-p', 'no:lora'], environ={})\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("1 problem in the configuration:")
    assert "--lr-typo" in done.stderr and "Traceback" not in done.stderr


def test_ignore_unknown_args_ignores_another_programs_plugin_selection():
    """Megatron's tests parse pytest's sys.argv with ignore_unknown_args=True: pytest's
    ``-p no:cacheprovider`` names no megaplug plugin and is ignored there, as argparse's
    parse_known_args ignores what it does not know."""
    foreign = [*BASE, "-p", "no:cacheprovider", "--junitxml=report.xml"]
    args = parse_args(ignore_unknown_args=True, argv=foreign, environ=ENV)
    validate_args(args, target=TARGET, environ=ENV)
    assert args.num_layers == 2 and args.data_parallel_size == 1
    with pytest.raises(UsageError) as info:
        parse_args(argv=foreign, environ=ENV)
    assert any("cannot block plugin 'cacheprovider'" in p.message for p in info.value.problems)
