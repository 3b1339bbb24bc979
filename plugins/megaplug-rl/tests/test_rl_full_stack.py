"""RL checks against the real core plugins (values derived by training, checkpointing...)."""

from __future__ import annotations

from typing import Sequence

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
TARGET = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                    device_capability=(9, 0))


def resolve(extra: Sequence[str]) -> megaplug.Resolved:
    return megaplug.resolve([*DENSE_GPT, *extra], environ=ENVIRON, target=TARGET)


def problems(extra: Sequence[str]) -> list[megaplug.Problem]:
    try:
        resolve(extra)
    except megaplug.ConfigError as error:
        return list(error.problems)
    return []


def test_rl_run_on_a_dense_gpt() -> None:
    resolved = resolve(["--perform-rl-step"])
    # 8 data-parallel ranks x micro batch 2: the derived global batch of 16 divides the
    # 32 x 2 x 2 = 128 rollouts of one phase.
    assert resolved.global_batch_size == 16
    assert resolved.perform_rl_step is True
    assert "consumed_train_bins" not in resolved


def test_rollouts_against_the_explicit_global_batch() -> None:
    [problem] = problems(["--perform-rl-step", "--global-batch-size", "48"])
    assert problem.plugin == "rl" and "--global-batch-size 48" in problem.message
    assert problems(["--perform-rl-step", "--global-batch-size", "64"]) == []


def test_save_interval_against_the_rollout_phase() -> None:
    # 128 rollouts / global batch 64 = 2 iterations per phase
    argv = ["--perform-rl-step", "--global-batch-size", "64", "--save", "/tmp/ckpt"]
    [problem] = problems(argv + ["--save-interval", "5"])
    assert problem.plugin == "rl" and "--save-interval 5" in problem.message
    assert problems(argv + ["--save-interval", "6"]) == []


def test_sequence_packing_with_the_real_micro_batch() -> None:
    [problem] = problems(["--perform-rl-step", "--rl-use-sequence-packing"])
    assert problem.plugin == "rl" and "--micro-batch-size 1, got 2" in problem.message
    resolved = resolve(["--perform-rl-step", "--rl-use-sequence-packing",
                        "--micro-batch-size", "1"])
    assert resolved.consumed_train_bins == 0


def test_persisted_graphs_with_a_real_graph_impl() -> None:
    assert problems(["--perform-rl-step", "--rl-persist-cuda-graphs"])[0].plugin == "rl"
    assert problems(["--perform-rl-step", "--rl-persist-cuda-graphs",
                     "--cuda-graph-impl", "local"]) == []


def test_without_perform_rl_step_nothing_is_checked() -> None:
    assert problems(["--rl-kv-cache-management-mode", "offload",
                     "--rl-consumption-granularity", "R"]) == []
