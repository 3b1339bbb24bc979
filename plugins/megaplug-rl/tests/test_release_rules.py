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


def rl_resolved(version: str, extra: Sequence[str]):
    target = megaplug.TargetEnvironment(
        packages={"transformer_engine": "2.17.1", "megatron_core": version,
                  "multistorageclient": None}, device_capability=(9, 0))
    return megaplug.resolve([*DENSE_GPT, *extra], environ=ENVIRON, target=target)


GROUPS = ["--grpo-group-size", "4", "--grpo-prompts-per-step", "8"]


@pytest.mark.parametrize("version", ["0.17.1", "0.18.2"])
def test_parallel_generations_resolved_in_0_17_and_0_18(version):
    plain = rl_resolved(version, GROUPS)
    assert (plain.rl_generation_batch_size, plain.rl_parallel_generation_tasks,
            plain.rl_enforce_generation_order) == (1, 512, False)
    batches = rl_resolved(version, [*GROUPS, "--rl-num-parallel-generation-batches", "2",
                                    "--rl-partial-rollouts"])
    assert (batches.rl_generation_batch_size, batches.rl_parallel_generation_tasks,
            batches.rl_enforce_generation_order) == (8, 16, True)
    deprecated = rl_resolved(version, [*GROUPS, "--rl-parallel-generation-tasks", "4",
                                       "--rl-partial-rollouts"])
    assert (deprecated.rl_num_parallel_generations, deprecated.rl_parallel_generation_tasks) \
        == (16, 4)
    assert rl_messages(version, [*GROUPS, "--rl-num-parallel-generations", "6",
                                 "--rl-partial-rollouts"]) == [
        "--rl-num-parallel-generations 6 must be divisible by --grpo-group-size 4"]
    assert rl_messages(version, [*GROUPS, "--rl-num-parallel-generations", "8"]) == [
        "--rl-num-parallel-generations needs --rl-partial-rollouts"]


@pytest.mark.parametrize("version", ["0.16.1", "0.19.0", "main"])
def test_no_generation_order_outside_0_17_and_0_18(version):
    assert "rl_enforce_generation_order" not in rl_resolved(version, GROUPS)


def test_no_generation_order_without_an_rl_run():
    target = megaplug.TargetEnvironment(packages={"megatron_core": "0.17.1",
                                                  "multistorageclient": None})
    config = megaplug.resolve([*DENSE_GPT[:-3], "-p", "no:preflight"], environ=ENVIRON,
                              target=target)
    assert "rl_enforce_generation_order" not in config
    assert config.rl_parallel_generation_tasks is None
