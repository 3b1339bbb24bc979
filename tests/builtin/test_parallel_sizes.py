"""Issue 31, class 10: odd sizes -- negative, zero, huge -- over the size flags and
``WORLD_SIZE`` are problems or warnings, never a plugin crash ("this is a bug in the
plugin"). The crashes came from divisor and list helpers written for positive numbers
only, once per plugin; they are one shared pair now (``megaplug.divisors``,
``megaplug.spoken``), defined for every integer. And a ``-p no:NAME`` naming no plugin is
refused by every command that loads plugins, as ``resolve`` refuses it."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import megaplug
from megaplug.cli import main

BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
        "--seq-length", "128", "--max-position-embeddings", "128", "--micro-batch-size", "2"]

#: The flags whose values are sizes the plugins do arithmetic with (layer, head, expert
#: counts, parallel sizes, batch sizes, pipeline splits), with how many values each takes.
SIZE_FLAGS = {
    "--num-layers": 1, "--hidden-size": 1, "--num-attention-heads": 1,
    "--num-query-groups": 1, "--ffn-hidden-size": 1, "--kv-channels": 1, "--seq-length": 1,
    "--max-position-embeddings": 1, "--micro-batch-size": 1, "--global-batch-size": 1,
    "--tensor-model-parallel-size": 1, "--pipeline-model-parallel-size": 1,
    "--context-parallel-size": 1, "--expert-model-parallel-size": 1,
    "--expert-tensor-parallel-size": 1, "--num-layers-per-virtual-pipeline-stage": 1,
    "--num-virtual-stages-per-pipeline-rank": 1, "--decoder-first-pipeline-num-layers": 1,
    "--decoder-last-pipeline-num-layers": 1, "--num-experts": 1, "--moe-router-topk": 1,
    "--moe-ffn-hidden-size": 1, "--make-vocab-size-divisible-by": 1, "--mtp-num-layers": 1,
    "--num-distributed-optimizer-instances": 1, "--recompute-num-layers": 1,
    "--moe-shared-expert-intermediate-size": 1, "--moe-router-num-groups": 1,
    "--moe-router-group-topk": 1, "--q-lora-rank": 1, "--kv-lora-rank": 1,
    "--qk-head-dim": 1, "--v-head-dim": 1, "--train-iters": 1, "--eval-interval": 1,
    "--eval-iters": 1, "--hierarchical-context-parallel-sizes": 2, "--rampup-batch-size": 3,
    "--window-size": 2, "--account-for-embedding-in-pipeline-split": 0,
    "--account-for-loss-in-pipeline-split": 0,
}
ODD = ["-2147483648", "-3", "-2", "-1", "0", "1", "2", "3", "4", "8", "99991"]
WORLDS = [None, "-8", "-1", "0", "1", "2", "8"]


def _resolve(argv: list[str], world: str | None, monkeypatch) -> tuple[int, str]:
    if world is None:
        monkeypatch.delenv("WORLD_SIZE", raising=False)
    else:
        monkeypatch.setenv("WORLD_SIZE", world)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["resolve", "--", *argv])
    return code, err.getvalue()


@pytest.fixture(autouse=True)
def _private_cache(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("MEGAPLUG_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))
    for name in ("RANK", "LOCAL_RANK", "MEGAPLUG_DISABLE", "MEGAPLUG_PLUGINS"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize("world", ["-1", "-3"])
@pytest.mark.parametrize("sizes", [["--tensor-model-parallel-size", "2"],
                                   ["--context-parallel-size", "2"],
                                   ["--pipeline-model-parallel-size", "2"]])
def test_a_negative_world_size_is_a_problem_with_a_hint(monkeypatch, world, sizes):
    code, err = _resolve([*BASE, *sizes], world, monkeypatch)
    assert code == 2
    assert "bug in the plugin" not in err
    assert f"world size {world} is not divisible by the model-parallel size 2" in err


@pytest.mark.parametrize("layers", ["-1", "-7", "0"])
@pytest.mark.parametrize("stage", ["1", "4"])
def test_a_negative_layer_count_with_virtual_stages_is_a_problem(monkeypatch, layers, stage):
    argv = [*BASE, "--num-layers", layers, "--num-layers-per-virtual-pipeline-stage", stage]
    code, err = _resolve(argv, "1", monkeypatch)
    assert code == 2
    assert "bug in the plugin" not in err and "Traceback" not in err


@pytest.mark.parametrize("split", [["--decoder-first-pipeline-num-layers", "2"],
                                   ["--decoder-first-pipeline-num-layers", "2",
                                    "--decoder-last-pipeline-num-layers", "2"],
                                   ["--account-for-embedding-in-pipeline-split"]])
@pytest.mark.parametrize("virtual", ["0", "-2"])
def test_a_zero_or_negative_virtual_size_with_an_uneven_split_never_crashes(monkeypatch, split,
                                                                            virtual):
    layers = "7" if split[0].startswith("--account") else "8"  # 8 with the embedding
    argv = [*BASE, "--num-layers", layers, "--pipeline-model-parallel-size", "4",
            "--num-virtual-stages-per-pipeline-rank", virtual, *split]
    code, err = _resolve(argv, "8", monkeypatch)
    assert code in (0, 2)  # Megatron's validate_args takes a virtual size of 0, too
    assert "bug in the plugin" not in err and "Traceback" not in err


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # patched per example
@given(chosen=st.lists(st.sampled_from(sorted(SIZE_FLAGS)), min_size=1, max_size=8,
                       unique=True),
       values=st.lists(st.sampled_from(ODD), min_size=24, max_size=24),
       world=st.sampled_from(WORLDS))
def test_odd_sizes_are_problems_never_plugin_crashes(monkeypatch, chosen, values, world):
    argv, supply = list(BASE), iter(values * 2)
    for flag in chosen:
        argv += [flag, *(next(supply) for _ in range(SIZE_FLAGS[flag]))]
    with monkeypatch.context() as patch:
        code, err = _resolve(argv, world, patch)
    assert code in (0, 2), err
    assert "bug in the plugin" not in err, err
    assert "Traceback" not in err


@given(st.integers(-10**12, 10**12))
def test_divisors_are_defined_for_every_integer(number):
    found = megaplug.divisors(number)
    assert found == sorted(set(found))
    assert all(number % divisor == 0 for divisor in found)
    if number == 0:
        assert found == []
    else:
        assert found[0] == 1 and found[-1] == abs(number)


def test_huge_numbers_are_searched_in_bounded_time():
    assert megaplug.divisors(2**61 - 1)[:1] == [1]  # a prime: only 1 below the bound


@pytest.mark.parametrize(("items", "expected"), [([], "none"), ([4], "4"), ([1, 2], "1 or 2"),
                                                 ([1, 2, 4], "1, 2 or 4")])
def test_spoken_says_every_list_even_an_empty_one(items, expected):
    assert megaplug.spoken(items) == expected


def test_the_plugins_share_one_divisor_helper():
    from pathlib import Path

    root = Path(megaplug.__file__).resolve().parents[2]
    sources = [*root.glob("src/megaplug/builtin/**/*.py"), *root.glob("plugins/*/src/**/*.py")]
    copies = [str(path) for path in sources if "isqrt" in path.read_text()]
    assert copies == []


@pytest.mark.parametrize("command", [["flags", "num-layers"], ["completion", "bash"],
                                     ["schema"], ["docs", "--out", "{tmp}/pages"], ["resolve"]])
def test_blocking_a_plugin_no_one_has_is_refused_by_every_command(capsys, tmp_path, command):
    argv = [token.replace("{tmp}", str(tmp_path)) for token in command]
    code = main([*argv, "-p", "no:TYPO"] if argv != ["resolve"] else
                ["resolve", "-p", "no:TYPO", "--", *BASE])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.out == ""
    assert "cannot block plugin 'TYPO' (-p no: / MEGAPLUG_DISABLE): no installed plugin " \
           "has that name" in captured.err
