"""Malformed process environment (RANK, WORLD_SIZE, LOCAL_RANK) gives clear messages, no crash.

Non-integers and a world of fewer than one process are problems naming the variable.
A RANK outside ``[0, WORLD_SIZE)`` is a warning, not an error: Megatron stores RANK
unchecked, and a resolve may legitimately be done for another rank's view (the parallel
plugin's deliberate choice); the warning names both variables.
"""

from __future__ import annotations

import contextlib
import io

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug.cli import main

NO_GPU = megaplug.TargetEnvironment(device_capability=None)

#: environment -> (variable the problem names, text in the message)
PROBLEMS = {
    "rank_text": ({"RANK": "zero"}, "RANK", "invalid int value 'zero'"),
    "rank_float": ({"RANK": "1.5", "WORLD_SIZE": "4"}, "RANK", "invalid int value '1.5'"),
    "rank_empty": ({"RANK": ""}, "RANK", "invalid int value ''"),
    "rank_unicode": ({"RANK": "٣"}, None, None),  # int() accepts Arabic-Indic digits: rank 3
    "world_text": ({"WORLD_SIZE": "eight"}, "WORLD_SIZE", "invalid int value 'eight'"),
    "world_spaces": ({"WORLD_SIZE": "  "}, "WORLD_SIZE", "invalid int value"),
    "world_zero": ({"WORLD_SIZE": "0"}, "WORLD_SIZE", "at least one process"),
    # Megatron resolves a negative world with integer arithmetic; the batch it derives is
    # negative, which is what fails
    "world_negative": ({"WORLD_SIZE": "-8"}, "WORLD_SIZE", "which is not positive"),
    "world_huge": ({"WORLD_SIZE": "9" * 40, "RANK": "0"}, None, None),
    "local_rank_text": ({"LOCAL_RANK": "x"}, "LOCAL_RANK", "invalid int value 'x'"),
    "both_bad": ({"RANK": "a", "WORLD_SIZE": "b"}, "WORLD_SIZE", "invalid int value 'b'"),
}

#: environment -> text of the warning
WARNINGS = {
    "rank_negative": ({"RANK": "-1", "WORLD_SIZE": "4"}, "RANK is -1"),
    "rank_equals_world": ({"RANK": "4", "WORLD_SIZE": "4"}, "RANK 4 is not below WORLD_SIZE 4"),
    "rank_above_world": ({"RANK": "9", "WORLD_SIZE": "2"}, "RANK 9 is not below WORLD_SIZE 2"),
}


def _resolve(environ: dict[str, str]) -> megaplug.Resolved:
    kernel, rest = megaplug.load([])
    return kernel.resolve([*rest, *MINIMAL], environ=environ, target=NO_GPU)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_malformed_environment_is_a_clear_problem(name: str) -> None:
    environ, variable, text = PROBLEMS[name]
    if variable is None:
        try:
            _resolve(environ)
        except megaplug.ConfigError as exc:  # e.g. a huge world size the layout cannot fill
            assert not any(" raised " in p.message for p in exc.problems), exc
        return
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(environ)
    naming = [p for p in info.value.problems if variable in p.flags]
    assert naming, info.value
    assert any(text in p.message and p.hint and p.plugin for p in naming), naming
    assert not any(" raised " in p.message for p in info.value.problems)


@pytest.mark.parametrize("name", sorted(WARNINGS))
def test_rank_outside_the_world_is_a_warning(name: str) -> None:
    environ, text = WARNINGS[name]
    resolved = _resolve(environ)
    warned = [w for w in resolved.warnings if text in w.message]
    assert warned and "RANK" in warned[0].flags, resolved.warnings


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_cli_exits_2_or_0_without_a_traceback(name: str) -> None:
    environ, variable, text = PROBLEMS[name]
    err = io.StringIO()
    with resolve_environment(**environ), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(["resolve", "--assume-device-capability", "none", "--", *MINIMAL])
    assert "Traceback" not in err.getvalue()
    if variable is None:
        assert code in (0, 2)
    else:
        assert code == 2 and variable in err.getvalue() and text in err.getvalue()


def test_the_facade_reports_the_environment_like_the_kernel() -> None:
    from megaplug.megatron import parse_and_validate_args

    with pytest.raises(megaplug.ConfigError) as info:
        parse_and_validate_args(argv=MINIMAL, environ={"WORLD_SIZE": "many"}, target=NO_GPU)
    assert any("WORLD_SIZE='many'" in p.message for p in info.value.problems)
