"""FSDP rules that differ between Megatron releases (docs/megatron-release-rules.md): in
Megatron 0.13, Megatron-FSDP is --use-custom-fsdp, a flag whose setting every launch has."""

from __future__ import annotations

import pytest

from megaplug import TargetEnvironment
from megaplug.testing import problems, resolve


def resolved(version: str, *flags: str):
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None})
    return resolve("-p", "no:preflight", *flags, target=target)


def test_use_custom_fsdp_is_a_flag_setting_in_0_13():
    assert resolved("0.13.1").use_custom_fsdp is False
    assert resolved("0.13.1", "--use-custom-fsdp", "--use-distributed-optimizer") \
        .use_custom_fsdp is True


@pytest.mark.parametrize("version", ["0.14.0", "0.19.0", "main"])
def test_use_custom_fsdp_only_with_megatron_fsdp_from_0_14(version):
    assert "use_custom_fsdp" not in resolved(version)


def fsdp_messages(version: str, *flags: str, environ: dict[str, str] | None = None) -> list[str]:
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None},
                               environ=environ or {})
    return [p.message for p in problems("-p", "no:preflight", *flags, target=target,
                                        environ=environ or {}) if p.plugin == "fsdp"]


def test_custom_fsdp_requirements_in_0_13():
    assert fsdp_messages("0.13.1", "--use-custom-fsdp") == [
        "--use-custom-fsdp needs --use-distributed-optimizer in Megatron 0.13"]
    sharded = ("--use-custom-fsdp", "--use-distributed-optimizer",
               "--data-parallel-sharding-strategy", "optim_grads_params")
    assert fsdp_messages("0.13.1", *sharded) == [
        "--use-custom-fsdp with --data-parallel-sharding-strategy optim_grads_params does not "
        "support gradient accumulation fusion in Megatron 0.13"]
    assert fsdp_messages("0.13.1", *sharded, "--no-gradient-accumulation-fusion") == []
    assert fsdp_messages("0.13.1", *sharded, "--no-gradient-accumulation-fusion",
                         environ={"CUDA_DEVICE_MAX_CONNECTIONS": "1"}) == [
        "--use-custom-fsdp needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1, found 1"]


@pytest.mark.parametrize("version,overlapped", [("0.13.1", True), ("0.14.0", False)])
def test_sharding_strategy_turns_on_overlaps_only_in_0_13(version, overlapped):
    config = resolved(version, "--data-parallel-sharding-strategy", "optim_grads_params",
                      "--use-distributed-optimizer")
    assert (config.overlap_param_gather, config.overlap_grad_reduce) == (overlapped,
                                                                         overlapped)
    config = resolved(version, "--data-parallel-sharding-strategy", "optim_grads")
    assert (config.overlap_param_gather, config.overlap_grad_reduce) == (False, overlapped)


@pytest.mark.parametrize("version,bf16", [("0.16.1", False), ("0.17.1", True),
                                          ("0.18.2", True), ("0.19.0", False)])
def test_grad_reduce_in_bf16_sets_the_fsdp_comm_dtype_in_0_17_and_0_18(version, bf16):
    from megaplug import TorchDType

    config = resolved(version, "--grad-reduce-in-bf16")
    if version == "0.16.1":
        assert "megatron_fsdp_grad_comm_dtype" not in config  # no such flag yet
    else:
        assert config.megatron_fsdp_grad_comm_dtype == (TorchDType("bfloat16") if bf16
                                                        else None)


@pytest.mark.parametrize("version,forced", [("0.14.0", False), ("0.17.1", False),
                                            ("0.18.2", True), ("main", True)])
def test_megatron_fsdp_turns_on_the_distributed_optimizer_from_0_18(version, forced):
    config = resolved(version, "--use-megatron-fsdp", "--no-gradient-accumulation-fusion",
                      "--ckpt-format", "fsdp_dtensor")
    assert config.use_distributed_optimizer is forced


FP4_FSDP2 = ("--use-torch-fsdp2", "--untie-embeddings-and-output-weights",
             "--no-gradient-accumulation-fusion", "--fp4-format", "e2m1", "--bf16",
             "--fp4-param-gather")


def _fp4_target(version: str, transformer_engine: str) -> TargetEnvironment:
    return TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None,
                                       "transformer_engine": transformer_engine}, environ={})


def _fsdp_problems(version: str, transformer_engine: str) -> list[str]:
    return [p.message for p in problems("-p", "no:preflight", *FP4_FSDP2, environ={},
                                        target=_fp4_target(version, transformer_engine))
            if p.plugin == "fsdp"]


def test_fsdp2_refuses_fp4_param_gather_without_te_2_7_until_0_17_1_turns_it_off():
    """megatron-core 0.17.0 raises on FSDP2 FP4 parameter gathers without Transformer
    Engine 2.7; 0.17.1 falls back to bf16 gathers instead (the FP4 format itself still
    needs 2.7: the precision plugin's problem)."""
    assert _fsdp_problems("0.17.0", "2.5.0") == [
        "--fp4-param-gather with --use-torch-fsdp2 requires Transformer Engine >= 2.7.0.dev0"]
    assert _fsdp_problems("0.17.1", "2.5.0") == []
    assert _fsdp_problems("0.17.0", "2.8.0") == []
    assert resolve("-p", "no:preflight", *FP4_FSDP2, environ={},
                   target=_fp4_target("0.17.0", "2.8.0")).fp4_param is True
