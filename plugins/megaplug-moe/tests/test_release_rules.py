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
