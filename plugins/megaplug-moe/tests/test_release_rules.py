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
        "--moe-grouped-gemm supports only bf16 in Megatron 0.15.3"]
    assert moe_messages("0.15.3", *flags, "--bf16") == []
    assert moe_messages("0.16.1", *flags) == []


def test_early_expert_parallelism_refuses_fp16_before_0_16():
    assert moe_messages("0.13.1", *MOE_EP2, "--fp16") == [
        "expert parallelism (--expert-model-parallel-size 2) does not support --fp16 in "
        "Megatron 0.13.1"]
    assert moe_messages("main", *MOE_EP2, "--fp16") == []


GRAPHED_EP = ("--num-experts", "8", "--expert-model-parallel-size", "2", "--cuda-graph-impl",
              "local", "-p", "no:preflight")


def test_graphed_expert_parallelism_needs_padded_experts_in_0_16_and_0_17():
    for version, line in (("0.16.1", "0.16.1"), ("0.17.1", "0.17.1")):
        assert moe_messages(version, *GRAPHED_EP) == [
            "local CUDA graphs with expert parallelism (--expert-model-parallel-size 2) need "
            f"--moe-pad-experts-for-cuda-graph-inference in Megatron {line}"]
        assert moe_messages(version, *GRAPHED_EP,
                            "--moe-pad-experts-for-cuda-graph-inference") == []


def test_graphed_expert_parallelism_unpadded_elsewhere_and_optimized_in_0_17():
    for version in ("0.15.3", "0.18.2", "main"):
        assert moe_messages(version, *GRAPHED_EP) == []
    assert moe_messages("0.17.1", *GRAPHED_EP, "--transformer-impl", "inference_optimized") \
        == []
