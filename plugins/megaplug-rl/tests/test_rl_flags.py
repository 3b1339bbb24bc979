"""The RL flags: Megatron's spellings and defaults, parsing, and the plugin when blocked."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import megaplug
import megaplug_rl

NO_AUTOLOAD = {"MEGAPLUG_DISABLE_PLUGIN_AUTOLOAD": "1"}
FLAGS_JSONL = Path(os.environ.get(
    "MEGAPLUG_FLAGS_JSONL",
    Path(__file__).resolve().parents[4] / "shared" / "megatron" / "flags.jsonl"))
ACTIONS = {"store": "_StoreAction", "store_true": "_StoreTrueAction",
           "boolean_optional": "BooleanOptionalAction"}


def kernel() -> Any:
    return megaplug.load(builtins=[megaplug_rl], environ=NO_AUTOLOAD)[0]


def rl_specs() -> list[Any]:
    return [spec for spec in kernel().table if spec.plugin == "rl" and spec.kind == "flag"]


def test_declares_the_43_flags_of_megatrons_rl_group() -> None:
    assert len(rl_specs()) == 43


def test_flags_match_megatron_facts() -> None:
    if not FLAGS_JSONL.exists():
        pytest.skip(f"{FLAGS_JSONL} not available")
    facts = {}
    for line in FLAGS_JSONL.read_text().splitlines():
        record = json.loads(line)
        facts[record["dest"]] = record
    for spec in rl_specs():
        fact = facts[spec.dest]
        assert fact["group"] == "rl"
        assert list(spec.option_strings) == fact["option_strings"], spec.dest
        assert ACTIONS[spec.action] == fact["action"], spec.dest
        assert spec.type_name == fact["type"], spec.dest
        assert spec.default == fact["default"] and type(spec.default) is type(fact["default"])
        assert (list(spec.choices) if spec.choices else None) == fact["choices"], spec.dest
        assert spec.nargs == (fact["nargs"] or None), spec.dest


def test_defaults_resolve() -> None:
    resolved = kernel().resolve([], environ={})
    assert resolved.perform_rl_step is False
    assert resolved.rl_generation_lag is None
    assert resolved.rl_inference_parsers == []
    assert resolved.rl_sequence_packing_algo == "fifo"
    assert resolved.refit_method == "gloo"
    assert resolved.rl_default_top_p == 0


def test_packed_bin_counter_only_with_sequence_packing() -> None:
    resolved = kernel().resolve([], environ={})
    assert "consumed_train_bins" not in resolved
    packed = kernel().resolve(["--rl-use-sequence-packing"], environ={})
    assert packed.consumed_train_bins == 0
    assert packed.source("consumed_train_bins").plugin == "rl"


def test_counter_cannot_be_set_by_the_user() -> None:
    with pytest.raises(megaplug.ConfigError):
        kernel().resolve(["--consumed-train-bins", "3"], environ={})


def test_values_parse() -> None:
    resolved = kernel().resolve(
        ["--rl-generation-lag", "1.5", "--rl-inference-parsers", "a", "b",
         "--rl-partial-rollouts", "--no-rl-skip-bos-token", "--refit-method", "nccl",
         "--rl-inference-model-unified-memory-level", "1"], environ={})
    assert resolved.rl_generation_lag == 1.5
    assert resolved.rl_inference_parsers == ["a", "b"]
    assert resolved.rl_partial_rollouts is True
    assert resolved.rl_skip_bos_token is False
    assert resolved.refit_method == "nccl"
    assert resolved.rl_inference_model_unified_memory_level == 1


@pytest.mark.parametrize("argv, spelling", [
    (["--rl-sequence-packing-algo", "NONE"], "--rl-sequence-packing-algo"),
    (["--rl-submission-granularity", "X"], "--rl-submission-granularity"),
    (["--rl-inference-model-unified-memory-level", "2"],
     "--rl-inference-model-unified-memory-level"),
    (["--grpo-group-size", "two"], "--grpo-group-size"),
])
def test_bad_values_are_rejected(argv: list[str], spelling: str) -> None:
    with pytest.raises(megaplug.ConfigError) as info:
        kernel().resolve(argv, environ={})
    assert any(p.plugin == "rl" and spelling in p.message for p in info.value.problems)


def test_blocked_plugin_names_itself() -> None:
    blocked, rest = megaplug.load(["-p", "no:rl", "--perform-rl-step"])
    assert rest == ["--perform-rl-step"]
    assert blocked.plugins.records["rl"].status == "blocked"
    with pytest.raises(megaplug.ConfigError) as info:
        blocked.resolve(rest, environ={})
    [problem] = [p for p in info.value.problems if "--perform-rl-step" in p.message]
    assert problem.plugin == "rl"
    assert "plugin 'rl'" in problem.message and "blocked" in problem.message
    assert "-p no:rl" in (problem.hint or "")


def test_samples_per_step_only_in_an_rl_run() -> None:
    """Megatron's training loop reads grpo_samples_per_iteration (megatron-core 0.19's
    validate_args sets it for an RL run only)."""
    assert "grpo_samples_per_iteration" not in kernel().resolve([], environ={})
    resolved = kernel().resolve(["--perform-rl-step", "--grpo-prompts-per-step", "6",
                                 "--grpo-group-size", "4"], environ={})
    assert resolved.grpo_samples_per_iteration == 24
    assert type(resolved.grpo_samples_per_iteration) is int
    assert resolved.source("grpo_samples_per_iteration").plugin == "rl"
