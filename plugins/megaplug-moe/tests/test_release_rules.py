"""MoE checks that differ between Megatron releases (docs/megatron-release-rules.md):
Megatron 0.13's encoder parallel sizes."""

from __future__ import annotations

from megaplug import TargetEnvironment
from megaplug.testing import problems

DENSE_TP2 = ("--tensor-model-parallel-size", "2", "--num-experts", "0", "-p", "no:preflight")
ENVIRON = {"WORLD_SIZE": "2"}


def moe_messages(version: str, *flags: str) -> list[str]:
    target = TargetEnvironment(packages={"megatron_core": version, "multistorageclient": None})
    return [p.message for p in problems(*flags, target=target, environ=ENVIRON)
            if p.plugin == "moe"]


def test_dense_encoder_needs_the_decoder_tensor_parallelism_in_0_13():
    assert moe_messages("0.13.1", *DENSE_TP2) == [
        "--encoder-tensor-model-parallel-size 0 must equal --tensor-model-parallel-size 2: a "
        "dense encoder without its own pipeline stages shares the decoder's first stage"]
    assert moe_messages("0.13.1", *DENSE_TP2, "--encoder-tensor-model-parallel-size", "2") == []


def test_not_said_to_be_dense_or_a_later_release_is_not_checked():
    assert moe_messages("0.13.1", "--tensor-model-parallel-size", "2") == []
    assert moe_messages("0.14.0", *DENSE_TP2) == []


MOE_EP2 = ("--num-experts", "4", "--expert-model-parallel-size", "2", "-p", "no:preflight")


def test_early_moe_grouped_gemm_needs_bf16_before_0_16():
    flags = (*MOE_EP2, "--moe-grouped-gemm")
    assert moe_messages("0.15.3", *flags) == [
        "--moe-grouped-gemm supports only bf16 in Megatron 0.15"]
    assert moe_messages("0.15.3", *flags, "--bf16") == []
    assert moe_messages("0.16.1", *flags) == []


def test_early_expert_parallelism_refuses_fp16_before_0_16():
    assert moe_messages("0.13.1", *MOE_EP2, "--fp16") == [
        "expert parallelism (--expert-model-parallel-size 2) does not support --fp16 in "
        "Megatron 0.13"]
    assert moe_messages("main", *MOE_EP2, "--fp16") == []
