"""RL checks that differ between Megatron releases, at the lines they belong to and not at
the others (docs/megatron-release-rules.md)."""

from __future__ import annotations

from typing import Sequence

import pytest

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4", "--perform-rl-step",
    "-p", "no:preflight",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def rl_messages(version: str, extra: Sequence[str]) -> list[str]:
    target = megaplug.TargetEnvironment(
        packages={"transformer_engine": "2.17.1", "megatron_core": version,
                  "multistorageclient": None}, device_capability=(9, 0))
    try:
        megaplug.resolve([*DENSE_GPT, *extra], environ=ENVIRON, target=target)
    except megaplug.ConfigError as error:
        return [p.message for p in error.problems if p.plugin == "rl"]
    return []


def test_group_submission_without_partial_rollouts_is_taken_by_0_19_only():
    extra = ["--rl-submission-granularity", "G"]
    assert rl_messages("0.19.0", extra) == []
    assert rl_messages("main", extra) == [
        "--rl-submission-granularity G requires --rl-partial-rollouts (rollouts are streamed, "
        "not submitted as a whole batch)"]


@pytest.mark.parametrize("version", ["0.19.0", "main"])
def test_rollout_submission_needs_partial_rollouts_in_both(version):
    assert len(rl_messages(version, ["--rl-submission-granularity", "R"])) == 1


def test_a_lag_below_minus_one_is_refused_from_main_on():
    extra = ["--rl-generation-lag", "-2"]
    assert rl_messages("0.19.0", extra) == []
    assert rl_messages("main", extra) == ["--rl-generation-lag -2 must be >= -1"]
