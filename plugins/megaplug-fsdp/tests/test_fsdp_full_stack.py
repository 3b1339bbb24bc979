"""The fsdp plugin together with the real built-in plugins."""

from __future__ import annotations

from typing import Sequence

import pytest

import megaplug

DENSE_GPT = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
    "--seq-length", "128", "--max-position-embeddings", "128",
    "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
]
ENVIRON = {"WORLD_SIZE": "8", "RANK": "0", "LOCAL_RANK": "0"}
MFSDP = ["--use-megatron-fsdp", "--ckpt-format", "fsdp_dtensor"]
FSDP2 = ["--use-torch-fsdp2", "--untie-embeddings-and-output-weights",
         "--no-gradient-accumulation-fusion"]


def resolve(extra: Sequence[str], capability: tuple[int, int] = (9, 0)) -> megaplug.Resolved:
    target = megaplug.TargetEnvironment(packages={"transformer_engine": "2.17.1"},
                                        device_capability=capability)
    return megaplug.resolve([*DENSE_GPT, *extra], environ=ENVIRON, target=target)


def fsdp_problems(extra: Sequence[str]) -> list[str]:
    with pytest.raises(megaplug.ConfigError) as info:
        resolve(extra)
    return [p.message for p in info.value.problems if p.plugin == "fsdp"]


def test_megatron_fsdp_launch_resolves():
    resolved = resolve(MFSDP)
    assert resolved.use_custom_fsdp is True and resolved.use_distributed_optimizer is True
    assert resolved.megatron_fsdp_main_params_dtype == megaplug.TorchDType("float32")


def test_freezing_runs_after_the_fsdp_derivation():
    assert resolve([*MFSDP, "--freeze-all-layers"]).use_distributed_optimizer is False


def test_megatron_fsdp_needs_fsdp_dtensor():
    assert fsdp_problems(["--use-megatron-fsdp"]) == [
        "--use-megatron-fsdp saves checkpoints only as --ckpt-format fsdp_dtensor, not "
        "torch_dist"]


def test_torch_fsdp2_launch_resolves():
    resolved = resolve([*FSDP2, "--ckpt-format", "torch_dcp"])
    assert resolved.high_priority_stream_groups == ["dp_cp"]
    assert "use_custom_fsdp" not in resolved


def test_torch_fsdp2_with_pipeline_parallelism_is_rejected():
    assert fsdp_problems([*FSDP2, "--pipeline-model-parallel-size", "2"]) == [
        "--use-torch-fsdp2 is not supported with pipeline parallelism "
        "(--pipeline-model-parallel-size 2)"]


def test_blackwell_stream_groups_for_megatron_fsdp():
    resolved = resolve(MFSDP, capability=(10, 0))
    assert resolved.high_priority_stream_groups == ["dp_cp"]
