"""Inference-only rules at their boundaries: each problem whole (plugin, message, flags, hint)
and the near miss that must pass.

Megatron's inference-optimized transformer (``--transformer-impl inference_optimized``) builds
RMSNorm layers without biases, a zero-centered gamma or Kitchen quantization; its MoE layers
are dropless, unpadded, fp32-routed, without expert tensor parallelism, gated only with the
torch or vllm grouped GEMMs, and under batch invariance dispatch over NVLS with expert
parallelism. Its options (``--inference-fuse-tp-communication``, ...) exist for no other
implementation.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
import pytest
from preflight_launches import DENSE, every_problem as whole, pre


OPTIMIZED = ["--transformer-impl", "inference_optimized", "--normalization", "RMSNorm"]
IMPL = "--transformer-impl inference_optimized"
MOE_EP2 = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
           "alltoall", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
#: A valid inference-optimized MoE over expert parallelism 2.
OPTIMIZED_MOE = [*MOE_EP2, *OPTIMIZED, "--moe-router-dtype", "fp32"]
BATCH_INVARIANT = ["--batch-invariant-mode", "--attention-backend", "flash",
                   "--flash-attention-version", "3", "--attention-dropout", "0"]
#: Without the plugin that declares them, its settings read as Megatron's defaults.
NO_INFERENCE = ["-p", "no:inference"]
#: A launch with the model plugin blocked: the rules read Megatron's model defaults.
NO_MODEL = ["-p", "no:model", "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-4",
            "--seq-length", "128"]




NO_BIASES = pre(f"{IMPL} has no linear biases",
                ("--transformer-impl", "--disable-bias-linear", "--add-qkv-bias"),
                "add --disable-bias-linear (and drop --add-qkv-bias)")
CASES: list[tuple[str, list[str], list[tuple]]] = [
    # -- the MoE layers
    ("optimized moe", OPTIMIZED_MOE, []),
    ("optimized moe, ETP 2", [*OPTIMIZED_MOE, "--expert-tensor-parallel-size", "2"],
     [pre(f"{IMPL} MoE layers do not support expert tensor parallelism "
          "(--expert-tensor-parallel-size 2)",
          ("--transformer-impl", "--expert-tensor-parallel-size"),
          "use --expert-tensor-parallel-size 1")]),
    # an expert TP size of 0 is its own mistake (model shape), not expert tensor parallelism
    ("optimized moe, ETP 0", [*OPTIMIZED_MOE, "--expert-tensor-parallel-size", "0"],
     [pre("--expert-tensor-parallel-size 0 leaves no rank to hold expert weights",
          ("--expert-tensor-parallel-size",),
          "use 1 or more (it defaults to --tensor-model-parallel-size)")]),
    ("optimized moe, capacity factor", [*OPTIMIZED_MOE, "--moe-expert-capacity-factor", "1.0"],
     [pre(f"{IMPL} MoE layers are dropless; --moe-expert-capacity-factor does not apply",
          ("--transformer-impl", "--moe-expert-capacity-factor"),
          "drop --moe-expert-capacity-factor")]),
    ("optimized moe, quantization padding",
     [*OPTIMIZED_MOE, "--moe-router-padding-for-quantization"],
     [pre("--moe-router-padding-for-quantization needs FP8 or FP4 training",
          ("--moe-router-padding-for-quantization", "--fp8-format", "--fp4-format"),
          "add --fp8-format or --fp4-format, or drop it"),
      pre(f"{IMPL} MoE layers do not pad the routing map for quantization",
          ("--transformer-impl", "--moe-router-padding-for-quantization"),
          "drop --moe-router-padding-for-quantization")]),
    ("optimized moe, fp64 router", [*OPTIMIZED_MOE, "--moe-router-dtype", "fp64"],
     [pre(f"{IMPL} MoE needs --moe-router-dtype fp32, got fp64",
          ("--transformer-impl", "--moe-router-dtype"), "add --moe-router-dtype fp32")]),
    ("optimized moe, swiglu, flashinfer",
     [*OPTIMIZED_MOE, "--swiglu", "--inference-grouped-gemm-backend", "flashinfer"],
     [pre(f"{IMPL} MoE supports gated linear units (SwiGLU / GeGLU) only with "
          "--inference-grouped-gemm-backend torch or vllm, got flashinfer",
          ("--transformer-impl", "--inference-grouped-gemm-backend", "--swiglu"),
          "use --inference-grouped-gemm-backend torch or vllm")]),
    ("optimized moe, swiglu, torch",
     [*OPTIMIZED_MOE, "--swiglu", "--inference-grouped-gemm-backend", "torch"], []),
    ("optimized moe, swiglu, no inference plugin (vllm)",
     [*NO_INFERENCE, *OPTIMIZED_MOE, "--swiglu"], []),
    ("batch-invariant optimized moe, no inference plugin (vllm, nvls)",
     [*NO_INFERENCE, *OPTIMIZED_MOE, *BATCH_INVARIANT], []),
    # the torch grouped GEMM is batch invariant (with DeepGEMM, which the target lacks)
    ("batch-invariant optimized moe, torch GEMMs",
     [*OPTIMIZED_MOE, *BATCH_INVARIANT, "--inference-grouped-gemm-backend", "torch"],
     [pre("batch-invariant MoE with this backend needs DeepGEMM's bf16 grouped GEMMs "
          "(deep_gemm), not installed", ("--batch-invariant-mode", "--batch-invariant-backend"),
          "install deep_gemm, or use --batch-invariant-backend te_native")]),
    ("optimized moe, fused TP communication",
     [*OPTIMIZED_MOE, "--inference-fuse-tp-communication"],
     [pre("--inference-fuse-tp-communication does not support MoE models",
          ("--inference-fuse-tp-communication", "--num-experts"),
          "drop --inference-fuse-tp-communication")]),
    # -- the layers
    ("optimized dense", [*OPTIMIZED, "--disable-bias-linear"], []),
    ("optimized dense, fused TP communication",
     [*OPTIMIZED, "--disable-bias-linear", "--inference-fuse-tp-communication"], []),
    ("optimized dense, linear biases", OPTIMIZED, [NO_BIASES]),
    ("optimized dense, qkv bias", [*OPTIMIZED, "--disable-bias-linear", "--add-qkv-bias"],
     [NO_BIASES]),
    ("optimized dense, zero-centered gamma",
     [*OPTIMIZED, "--disable-bias-linear", "--apply-layernorm-1p"],
     [pre(f"{IMPL} does not support a zero-centered LayerNorm gamma",
          ("--transformer-impl", "--apply-layernorm-1p"), "drop --apply-layernorm-1p")]),
    # -- inference options without the inference-optimized transformer
    ("fused TP communication, model defaults", [*NO_MODEL, "--inference-fuse-tp-communication"],
     [pre("--inference-fuse-tp-communication needs --transformer-impl inference_optimized, got "
          "transformer_engine", ("--inference-fuse-tp-communication", "transformer_impl"),
          "drop --inference-fuse-tp-communication (it is an inference option)")]),
]


@pytest.mark.parametrize("argv, expected",
                         [pytest.param(a, e, id=name) for name, a, e in CASES])
def test_inference_rule_whole(argv: list[str], expected: list[tuple]) -> None:
    base = [] if argv[:2] == NO_MODEL[:2] else DENSE
    assert whole(argv, base=base) == expected


KITCHEN = pre(f"{IMPL} does not support Kitchen quantization",
              ("--transformer-impl", "--kitchen-config-file", "--kitchen-recipe-number"),
              "drop the Kitchen flags")


@pytest.mark.parametrize("argv, expected", [
    (["--kitchen-recipe-number", "3"], [KITCHEN]),
    (["--kitchen-config-file", "recipe.yaml"], [KITCHEN]),
    ([], []),
])
def test_inference_optimized_without_kitchen(argv: list[str], expected: list[tuple]) -> None:
    # a stand-in kitchen package makes the kitchen plugin (and its two flags) available;
    # "-p kitchen" asks for a kernel of its own, not one loaded before it was importable
    with tempfile.TemporaryDirectory() as where:
        (Path(where) / "kitchen").mkdir()
        (Path(where) / "kitchen" / "__init__.py").write_text('__version__ = "0.0.1"\n')
        sys.path.insert(0, where)
        try:
            found = whole(["-p", "kitchen", *OPTIMIZED, "--disable-bias-linear", *argv])
        finally:
            sys.path.remove(where)
            sys.modules.pop("kitchen", None)
    assert found == expected
