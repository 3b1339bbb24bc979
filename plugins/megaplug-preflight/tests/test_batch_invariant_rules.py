"""Batch-invariant mode's rules whole (message, flags, hint), each with the near miss that
must pass. Megatron's checks: TransformerConfig.__post_init__ under ``batch_invariant_mode``
(BF16 parameters, FlashAttention 3 or 4, no context parallelism, no attention dropout, and
for MoE: all-to-all dispatch unless inference-optimized, DeepGEMM for the deepgemm / triton
backends or the torch inference grouped GEMM, bf16 only, unfused and unpadded permutation)."""

from __future__ import annotations

from typing import Any

import pytest
from preflight_launches import CLUSTER, DENSE, ENVIRON, MOE, target

import megaplug

AT_MODEL_BUILD = "; Megatron would raise this when building the model"
MODE = "--batch-invariant-mode"
#: Batch-invariant mode with every attention requirement met.
INVARIANT = [MODE, "--attention-backend", "flash", "--flash-attention-version", "3",
             "--attention-dropout", "0"]
#: Batch-invariant MoE training that passes: all-to-all dispatch (MOE), nothing fused or padded.
INVARIANT_MOE = [*INVARIANT, *MOE]
INFERENCE_OPTIMIZED = ["--transformer-impl", "inference_optimized", "--moe-router-dtype", "fp32",
                       "--normalization", "RMSNorm"]


def whole(argv: list[str], *, base: list[str] = DENSE,
          packages: dict[str, Any] | None = None) -> list[tuple[str, tuple[str, ...], str]]:
    """Pre-flight's problems for ``base + argv`` as (message without the common ending,
    flags, hint), after making sure no other plugin objects."""
    try:
        megaplug.resolve([*base, *argv], environ=dict(ENVIRON), target=target(packages))
    except megaplug.ConfigError as error:
        assert not [str(p) for p in error.problems if p.plugin != "preflight"]
        assert all(p.message.endswith(AT_MODEL_BUILD) for p in error.problems)
        return [(p.message.removesuffix(AT_MODEL_BUILD), tuple(p.flags), p.hint)
                for p in error.problems]
    return []


def without_bf16() -> list[str]:
    return [a for a in DENSE if a != "--bf16"]


@pytest.mark.parametrize("argv", [
    INVARIANT,
    [*INVARIANT, "--flash-attention-version", "4"],
    [*INVARIANT, "--context-parallel-size", "1"],
    [*INVARIANT, "--attention-dropout", "0.0"],
    # without the mode, none of its requirements apply
    ["--flash-attention-version", "2", "--context-parallel-size", "2"],
    INVARIANT_MOE,
])
def test_batch_invariant_attention_that_passes(argv):
    assert whole(argv) == []


def test_without_the_mode_its_moe_requirements_do_not_apply():
    assert whole([*MOE, "--moe-token-dispatcher-type", "allgather", "--moe-permute-fusion",
                  "--batch-invariant-backend", "deepgemm"]) == []


ATTENTION_BACKEND = ("--batch-invariant-mode needs --attention-backend flash, got auto",
                     (MODE, "--attention-backend"), "use --attention-backend flash")
NO_DROPOUT = ("--batch-invariant-mode does not support attention dropout",
              (MODE, "--attention-dropout"), "use --attention-dropout 0")


def version(got: object) -> tuple[str, tuple[str, ...], str]:
    return (f"--batch-invariant-mode needs --flash-attention-version 3 or 4, got {got}",
            (MODE, "--flash-attention-version"), "add --flash-attention-version 3")


@pytest.mark.parametrize("argv, found", [
    ([MODE], [ATTENTION_BACKEND, version(None), NO_DROPOUT]),
    ([*INVARIANT, "--attention-backend", "fused"],
     [("--batch-invariant-mode needs --attention-backend flash, got fused",
       (MODE, "--attention-backend"), "use --attention-backend flash")]),
    ([*INVARIANT, "--flash-attention-version", "2"], [version(2)]),
    ([*INVARIANT, "--context-parallel-size", "2"],
     [("--batch-invariant-mode does not support context parallelism (--context-parallel-size 2)",
       (MODE, "--context-parallel-size"), "use --context-parallel-size 1")]),
    ([*INVARIANT, "--attention-dropout", "0.1"], [NO_DROPOUT]),
    ([*INVARIANT, "--attention-dropout", "0.001"], [NO_DROPOUT]),
])
def test_batch_invariant_attention_that_is_rejected(argv, found):
    assert whole(argv) == found


def test_batch_invariant_mode_needs_bf16_parameters():
    assert whole(INVARIANT, base=without_bf16()) == [
        ("--batch-invariant-mode supports BF16 parameters only, got FP32 (neither --bf16 nor "
         "--fp16)",
         (MODE, "--bf16"), "add --bf16")]
    assert whole([*INVARIANT, "--fp16"], base=without_bf16()) == [
        ("--batch-invariant-mode supports BF16 parameters only, got FP16 (--fp16)",
         (MODE, "--bf16"), "add --bf16")]


def dispatcher(got: str) -> tuple[str, tuple[str, ...], str]:
    return (f"batch-invariant MoE training needs --moe-token-dispatcher-type alltoall, got {got}",
            (MODE, "--moe-token-dispatcher-type"), "use --moe-token-dispatcher-type alltoall")


DEEPGEMM = ("batch-invariant MoE with this backend needs DeepGEMM's bf16 grouped GEMMs "
            "(deep_gemm), not installed", (MODE, "--batch-invariant-backend"),
            "install deep_gemm, or use --batch-invariant-backend te_native")


@pytest.mark.parametrize("argv, found", [
    (["--moe-token-dispatcher-type", "allgather"], [dispatcher("allgather")]),
    (["--moe-token-dispatcher-type", "flex"], [dispatcher("flex")]),
    (["--batch-invariant-backend", "deepgemm"], [DEEPGEMM]),
    (["--batch-invariant-backend", "triton"], [DEEPGEMM]),
    (["--batch-invariant-backend", "te_native"], []),
    # inference-optimized MoE keeps its own dispatcher; DeepGEMM only for the torch GEMMs
    ([*INFERENCE_OPTIMIZED, "--moe-token-dispatcher-type", "allgather"], []),
    ([*INFERENCE_OPTIMIZED, "--inference-grouped-gemm-backend", "vllm"], []),
    ([*INFERENCE_OPTIMIZED, "--inference-grouped-gemm-backend", "torch"], [DEEPGEMM]),
    (["--fp8-format", "hybrid"],
     [("batch-invariant MoE is bf16-only; FP8 / FP4 are on", (MODE, "--fp8-format",
                                                             "--fp4-format"),
       "drop --fp8-format / --fp4-format")]),
    (["--fp4-format", "e2m1"],
     [("batch-invariant MoE is bf16-only; FP8 / FP4 are on", (MODE, "--fp8-format",
                                                             "--fp4-format"),
       "drop --fp8-format / --fp4-format")]),
    (["--moe-permute-fusion"],
     [("batch-invariant MoE needs the unfused permutation, but --moe-permute-fusion fuse it",
       (MODE, "--moe-permute-fusion"), "drop the permute-fusion flags")]),
    (["--moe-permute-fusion-into-hybridep"],
     [("batch-invariant MoE needs the unfused permutation, but "
       "--moe-permute-fusion-into-hybridep fuse it",
       (MODE, "--moe-permute-fusion-into-hybridep"), "drop the permute-fusion flags")]),
    (["--moe-permute-fusion-into-hybridep", "--moe-permute-fusion"],
     [("batch-invariant MoE needs the unfused permutation, but --moe-permute-fusion and "
       "--moe-permute-fusion-into-hybridep fuse it",
       (MODE, "--moe-permute-fusion", "--moe-permute-fusion-into-hybridep"),
       "drop the permute-fusion flags")]),
    (["--moe-pad-experts-for-cuda-graph-inference"],
     [("batch-invariant MoE supports dropless routing only, but "
       "--moe-pad-experts-for-cuda-graph-inference pad experts",
       (MODE, "--moe-pad-experts-for-cuda-graph-inference"), "drop the padding flags")]),
    (["--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor", "1.0"],
     [("batch-invariant MoE supports dropless routing only, but "
       "--moe-pad-expert-input-to-capacity pad experts",
       (MODE, "--moe-pad-expert-input-to-capacity"), "drop the padding flags")]),
    (["--moe-pad-experts-for-cuda-graph-inference", "--moe-pad-expert-input-to-capacity",
      "--moe-expert-capacity-factor", "1.0"],
     [("batch-invariant MoE supports dropless routing only, but "
       "--moe-pad-expert-input-to-capacity and --moe-pad-experts-for-cuda-graph-inference pad "
       "experts", (MODE, "--moe-pad-expert-input-to-capacity",
                   "--moe-pad-experts-for-cuda-graph-inference"), "drop the padding flags")]),
])
def test_batch_invariant_moe(argv, found):
    assert whole([*INVARIANT_MOE, *argv]) == found


@pytest.mark.parametrize("argv", [
    ["--batch-invariant-backend", "deepgemm"],
    ["--batch-invariant-backend", "triton"],
    [*INFERENCE_OPTIMIZED, "--inference-grouped-gemm-backend", "torch"],
])
def test_deepgemm_on_the_target_satisfies_the_backends_that_need_it(argv):
    assert whole([*INVARIANT_MOE, *argv], packages={**CLUSTER, "deep_gemm": "2.1.0"}) == []


def test_the_moe_rules_need_experts():
    # a dense model in batch-invariant mode has no MoE requirements
    assert whole([*INVARIANT, "--moe-token-dispatcher-type", "allgather",
                  "--batch-invariant-backend", "deepgemm", "--fp8-format", "hybrid"]) == []


@pytest.mark.parametrize("experts, found", [
    ("1", [dispatcher("allgather")]),
    ("0", []),
])
def test_one_expert_is_already_moe(experts, found):
    assert whole([*INVARIANT, "--num-experts", experts, "--moe-token-dispatcher-type",
                  "allgather"]) == found
