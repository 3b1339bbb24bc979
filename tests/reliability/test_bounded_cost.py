"""The cost of a resolve, and the size of its report, are bounded by its input.

20,000 unknown flags, stray values or unknown config-file keys end in a report of the
first few problems and a count of the rest, with at most ``MAX_SUGGESTIONS`` did-you-mean
searches (counted here, not timed: speed is measured by benchmarks/).
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from reliability_support import MINIMAL, resolve_environment

import megaplug
from megaplug import _errors
from megaplug.cli import main

NO_GPU = megaplug.TargetEnvironment(device_capability=None)
COUNT = 20_000


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every did-you-mean search difflib makes."""
    made: list[str] = []
    original = difflib.get_close_matches

    def counted(word: str, *args: Any, **kwargs: Any) -> list[str]:
        made.append(word)
        return original(word, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    return made


def _cli(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with resolve_environment(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


ARGUMENTS = {
    "unknown flags": [f"--unknown-flag-{i}" for i in range(COUNT)],
    "misspelt flags": [f"--num-layer{i}" for i in range(COUNT)],
    "stray values": [f"stray{i}" for i in range(COUNT)],
    "unknown flags with values": [t for i in range(COUNT // 2) for t in (f"--x{i}=1", "v")],
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_many_unknown_arguments_give_a_bounded_report(name: str, searches: list[str]) -> None:
    code, err = _cli("resolve", "--assume-device-capability", "none", "--", *MINIMAL,
                     *ARGUMENTS[name])
    assert code == 2 and "Traceback" not in err
    assert len(searches) <= _errors.MAX_SUGGESTIONS
    lines = err.splitlines()
    assert len(lines) <= _errors.MAX_UNRECOGNIZED_SHOWN + 5
    assert len(err) < 40_000
    assert "more unrecognized arguments or settings, not listed one by one" in lines[-1]


def test_the_count_of_the_rest_is_exact(searches: list[str]) -> None:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL, *ARGUMENTS["unknown flags"]], environ={},
                       target=NO_GPU)
    problems = info.value.problems
    listed = [p for p in problems if p.message.startswith("unrecognized argument")]
    assert len(listed) == _errors.MAX_UNRECOGNIZED_SHOWN
    assert problems[-1].message.startswith(
        f"... and {COUNT - _errors.MAX_UNRECOGNIZED_SHOWN} more unrecognized")
    assert len(searches) == _errors.MAX_SUGGESTIONS


def test_the_first_mistakes_still_get_suggestions(searches: list[str]) -> None:
    kernel, rest = megaplug.load([])
    with pytest.raises(megaplug.ConfigError) as info:
        kernel.resolve([*rest, *MINIMAL, "--num-layer", "2", *ARGUMENTS["unknown flags"]],
                       environ={}, target=NO_GPU)
    first = info.value.problems[0]
    assert first.message == "unrecognized argument --num-layer in command line"
    assert first.hint == "did you mean --num-layers?"


def test_many_unknown_config_keys_give_a_bounded_report(tmp_path: Path,
                                                        searches: list[str]) -> None:
    path = tmp_path / "c.json"
    path.write_text(json.dumps({f"unknown_setting_{i}": i for i in range(COUNT)}))
    code, err = _cli("resolve", "--config", str(path), "--assume-device-capability", "none",
                     "--", *MINIMAL)
    assert code == 2 and len(searches) <= _errors.MAX_SUGGESTIONS
    assert len(err.splitlines()) <= _errors.MAX_UNRECOGNIZED_SHOWN + 5
    assert f"{COUNT - _errors.MAX_UNRECOGNIZED_SHOWN} more unrecognized" in err


def test_a_huge_unknown_flag_is_neither_searched_nor_echoed(searches: list[str]) -> None:
    flag = "--" + "x" * 1_000_000
    code, err = _cli("resolve", "--assume-device-capability", "none", "--", *MINIMAL, flag,
                     "y" * 1_000_000)
    assert code == 2 and not searches
    assert len(err) < 2_000 and "more characters" in err


def test_a_report_of_many_problems_is_capped() -> None:
    problems = [megaplug.Problem(f"problem {i}", hint="x" * 5000) for i in range(1000)]
    text = str(megaplug.ConfigError(problems))
    lines = text.splitlines()
    assert lines[0] == "1000 problems in the configuration:"
    assert len(lines) == _errors.MAX_PROBLEMS_SHOWN + 2
    assert lines[-1] == f"  ... and {1000 - _errors.MAX_PROBLEMS_SHOWN} more problems, not listed"
    assert all(len(line) < _errors.MAX_PROBLEM_CHARS + 100 for line in lines)
