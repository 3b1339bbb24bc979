"""Every problem at once: independent mistakes in different plugins are all reported.

These cases go through the real plugins (every built-in and installed feature plugin).
``test_optimized_plugins.py`` runs this module again under ``python -O`` and compares
the problems with the ones found here: no check may depend on ``assert``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from reliability_support import MINIMAL

import megaplug

TARGET = {"packages": {"transformer_engine": "2.17.1"}, "device_capability": (9, 0)}

#: Five independent mistakes, one in each of five plugins: (plugin, tokens, flag named).
FIVE_MISTAKES = [
    ("model", ["--num-attention-heads", "5"], "--num-attention-heads"),
    ("precision", ["--fp16", "--bf16"], "--bf16"),
    ("moe", ["--num-experts", "6", "--expert-model-parallel-size", "4"], "--num-experts"),
    ("training", ["--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "5"], "--lr-warmup-iters"),
    ("data", ["--data-path", "corpus", "--train-data-path", "train"], "--data-path"),
]

#: Single mistakes in one plugin each: name -> (argv additions, environ, plugin, text).
SINGLE_CASES: dict[str, tuple[list[str], dict[str, str], str, str]] = {
    "heads": (["--num-attention-heads", "5"], {}, "model", "not divisible by"),
    "tp_world": (["--tensor-model-parallel-size", "4"], {"WORLD_SIZE": "6"}, "parallel",
                 "world size 6"),
    "precision": (["--fp16", "--bf16"], {}, "precision", "cannot be used together"),
    "experts": (["--num-experts", "6", "--expert-model-parallel-size", "4"], {"WORLD_SIZE": "8"},
                "moe", "not a multiple"),
    "payload_pattern": (["--num-experts", "4", "--moe-layer-freq", "__import__('os')"], {},
                        "moe", "--moe-layer-freq"),
    "bad_pattern": (["--moe-layer-freq", "[1]*"], {}, "moe", "--moe-layer-freq"),
    "warmup": (["--lr-warmup-fraction", "0.1", "--lr-warmup-iters", "5"], {}, "training",
               "--lr-warmup-iters"),
    "samples": (["--train-samples", "100"], {}, "training", "--train-samples"),
    "data": (["--data-path", "corpus", "--train-data-path", "train"], {}, "data", "--data-path"),
    "rank_text": ([], {"RANK": "zero"}, "parallel", "RANK"),
    "world_zero": ([], {"WORLD_SIZE": "0"}, "parallel", "WORLD_SIZE"),
}


def _resolve(argv: list[str], environ: dict[str, str]) -> megaplug.Resolved:
    kernel, rest = megaplug.load([])
    target = megaplug.TargetEnvironment(packages=dict(TARGET["packages"]),
                                        device_capability=TARGET["device_capability"])
    return kernel.resolve([*rest, *argv], environ={"WORLD_SIZE": "8", **environ}, target=target)


def problems_of(argv: list[str], environ: dict[str, str]) -> list[dict[str, Any]]:
    """The problems of a resolve as plain dicts (empty when it succeeds)."""
    try:
        _resolve(argv, environ)
    except megaplug.ConfigError as exc:
        return [problem.to_dict() for problem in exc.problems]
    return []


def all_problem_reports() -> dict[str, list[dict[str, Any]]]:
    """Every case of this module and its problems (compared across ``python -O``)."""
    reports = {name: problems_of([*MINIMAL, *extra], env)
               for name, (extra, env, _plugin, _text) in SINGLE_CASES.items()}
    reports["five_mistakes"] = problems_of(
        [*MINIMAL, *(token for _p, tokens, _f in FIVE_MISTAKES for token in tokens)], {})
    return reports


def test_five_mistakes_in_five_plugins_are_all_reported() -> None:
    argv = [*MINIMAL, *(token for _plugin, tokens, _flag in FIVE_MISTAKES for token in tokens)]
    with pytest.raises(megaplug.ConfigError) as info:
        _resolve(argv, {})
    problems = info.value.problems
    for plugin, _tokens, flag in FIVE_MISTAKES:
        own = [p for p in problems if p.plugin == plugin]
        assert own, f"no problem from {plugin}: {info.value}"
        problem = own[0]
        assert problem.flags, problem
        assert problem.hint, problem
        spelled = {megaplug.load([])[0].table.spelling(f) for f in problem.flags}
        assert flag in spelled or flag in problem.message, problem
        assert f"[{plugin}]" in str(info.value)
    assert {p.plugin for p in problems} == {plugin for plugin, _t, _f in FIVE_MISTAKES}


def test_the_cli_prints_all_five_with_plugin_and_hint(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from megaplug.cli import main

    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.delenv("RANK", raising=False)
    code = main(["resolve", "--assume-device-capability", "9.0", "--assume",
                 "transformer_engine=2.17.1", "--", *MINIMAL,
                 *(token for _p, tokens, _f in FIVE_MISTAKES for token in tokens)])
    err = capsys.readouterr().err
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("  - ")]
    for plugin, _tokens, flag in FIVE_MISTAKES:
        assert any(line.startswith(f"  - [{plugin}]") and "(hint: " in line for line in lines), err
        assert flag in err


@pytest.mark.parametrize("name", sorted(SINGLE_CASES))
def test_single_mistake_is_reported_by_its_plugin(name: str) -> None:
    extra, environ, plugin, text = SINGLE_CASES[name]
    problems = problems_of([*MINIMAL, *extra], environ)
    own = [p for p in problems if p["plugin"] == plugin]
    assert own, f"{name}: expected a problem from {plugin}, got {problems}"
    assert any(text in p["message"] for p in own), own
    assert all(p["hint"] for p in problems), problems
    assert not any(" raised " in p["message"] for p in problems), problems


def test_the_minimal_launch_is_accepted() -> None:
    resolved = _resolve(MINIMAL, {})
    assert resolved.num_layers == 2 and resolved.data_parallel_size == 8


if __name__ == "__main__":  # used by test_optimized_plugins.py
    json.dump({"optimize": sys.flags.optimize, "reports": all_problem_reports()}, sys.stdout)
