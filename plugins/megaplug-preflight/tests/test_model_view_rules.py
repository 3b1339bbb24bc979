"""The model configuration as Megatron builds it (``model_view``), seen through the rules that
read it: each launch's problems whole (plugin, message, flags, hint), near misses that pass.

``core_transformer_config_from_args`` and ``__post_init__`` rename and rewrite values before
the model checks read them: quick GeGLU is a gated linear unit; a ``D`` in the hybrid pattern
is a DeepSeek sparse attention layer; ``--moe-layer-recompute`` is selective recomputation;
a negative capacity factor is none (0 and fractions are capacities); ``--moe-enable-deepep``
picks the DeepEP backend over ``--moe-flex-dispatcher-backend``; the TE op fuser with grouped
GEMM uses grouped tensors; a local CUDA graph of the router also captures the preprocessing;
a full-iteration graph captures whole layers; FP4 is quantized training.
"""

from __future__ import annotations

import pytest
from preflight_launches import every_problem as whole, pre


MOE = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--moe-token-dispatcher-type",
       "alltoall", "--expert-model-parallel-size", "2", "--disable-bias-linear"]
OPTIMIZED_MOE = [*MOE, "--transformer-impl", "inference_optimized", "--normalization", "RMSNorm",
                 "--moe-router-dtype", "fp32"]
BATCH_INVARIANT = ["--batch-invariant-mode", "--attention-backend", "flash",
                   "--flash-attention-version", "3", "--attention-dropout", "0"]
SINGLE_GROUPED = [*MOE, "--moe-single-grouped-weight", "--moe-grouped-gemm"]




CASES: list[tuple[str, list[str], list[tuple]]] = [
    ("quick GeGLU is gated", [*OPTIMIZED_MOE, "--quick-geglu",
                              "--inference-grouped-gemm-backend", "flashinfer"],
     [pre("--transformer-impl inference_optimized MoE supports gated linear units (SwiGLU / "
          "GeGLU) only with --inference-grouped-gemm-backend torch or vllm, got flashinfer",
          ("--transformer-impl", "--inference-grouped-gemm-backend", "--swiglu"),
          "use --inference-grouped-gemm-backend torch or vllm")]),
    ("quick GeGLU in TE", ["--quick-geglu", "--use-te-activation-func"],
     [pre("bias-activation fusion (on by default) and --use-te-activation-func cannot both be "
          "on", ("--no-bias-gelu-fusion", "--use-te-activation-func"),
          "add --no-bias-gelu-fusion, or drop --use-te-activation-func"),
      pre("--use-te-activation-func does not implement the quick GeGLU activation",
          ("--use-te-activation-func", "--quick-geglu"), "drop --use-te-activation-func")]),
    ("DSA layers of the hybrid pattern", ["--hybrid-layer-pattern", "MDMDMDMD"],
     [pre("DeepSeek sparse attention (DSA) needs linear layers without bias, and "
          "--add-bias-linear is on (the default)",
          ("--experimental-attention-variant", "--disable-bias-linear"),
          "add --disable-bias-linear")]),
    ("no DSA layer in the hybrid pattern", ["--hybrid-layer-pattern", "M*M*M*M*"], []),
    ("MoE layer recompute is selective", [*MOE, "--moe-layer-recompute", "--recompute-modules",
                                          "mhc"],
     [pre("--recompute-modules mhc needs --enable-mhc-connections",
          ("--recompute-modules", "--enable-mhc-connections"),
          "add --enable-mhc-connections")]),
    ("modules without recompute", [*MOE, "--recompute-modules", "mhc"], []),
    ("capacity factor 0 pads", [*MOE, "--moe-expert-capacity-factor", "0",
                                "--moe-pad-expert-input-to-capacity"], []),
    ("capacity factor 0.5 pads", [*MOE, "--moe-expert-capacity-factor", "0.5",
                                  "--moe-pad-expert-input-to-capacity"], []),
    ("capacity factor with aux_loss given", [*MOE, "--moe-expert-capacity-factor", "1.0",
                                             "--moe-router-load-balancing-type", "aux_loss"],
     []),
    ("capacity factor with two aux-loss types", [*MOE, "--moe-expert-capacity-factor", "1.0",
                                                 "--moe-router-load-balancing-type", "aux_loss",
                                                 "seq_aux_loss", "--moe-aux-loss-coeff", "0.01",
                                                 "0.01"], []),
    ("capacity factor with sinkhorn", [*MOE, "--moe-expert-capacity-factor", "1.0",
                                       "--moe-router-load-balancing-type", "sinkhorn"],
     [pre("--moe-expert-capacity-factor does not work with --moe-router-load-balancing-type "
          "sinkhorn", ("--moe-expert-capacity-factor", "--moe-router-load-balancing-type"),
          "use aux_loss, seq_aux_loss, global_aux_loss or none, or drop the capacity factor")]),
    ("DeepEP flag over the backend flag", [*MOE, "--moe-token-dispatcher-type", "flex",
                                           "--moe-enable-deepep", "--moe-flex-dispatcher-backend",
                                           "hybridep", "--moe-expert-rank-capacity-factor",
                                           "1.0"],
     [pre("--moe-enable-deepep and --moe-flex-dispatcher-backend hybridep choose two backends",
          ("--moe-enable-deepep", "--moe-flex-dispatcher-backend"),
          "drop --moe-enable-deepep (deprecated), keep the backend flag"),
      pre("--moe-expert-rank-capacity-factor needs --moe-flex-dispatcher-backend hybridep or "
          "ncclep, got deepep",
          ("--moe-expert-rank-capacity-factor", "--moe-flex-dispatcher-backend"),
          "choose the hybridep or ncclep backend")]),
    ("grouped tensors from the op fuser", [*SINGLE_GROUPED, "--use-transformer-engine-op-fuser"],
     []),
    ("grouped tensors asked for", [*SINGLE_GROUPED, "--moe-use-grouped-tensor"], []),
    ("no grouped tensors", SINGLE_GROUPED,
     [pre("--moe-single-grouped-weight need grouped tensors",
          ("--moe-single-grouped-weight", "--moe-use-grouped-tensor"),
          "add --moe-use-grouped-tensor (or --use-transformer-engine-op-fuser)")]),
    ("local router graph captures preprocessing", ["--cuda-graph-impl", "local",
                                                   "--cuda-graph-modules", "moe_router"],
     [pre("--cuda-graph-modules moe_router moe_preprocess captures MoE modules, but the model "
          "has no experts", ("--cuda-graph-modules", "--cuda-graph-impl"),
          "choose graph modules that exist in this model")]),
    ("local preprocessing graph captures the router", ["--cuda-graph-impl", "local",
                                                       "--cuda-graph-modules", "moe_preprocess"],
     [pre("--cuda-graph-modules moe_preprocess moe_router captures MoE modules, but the model "
          "has no experts", ("--cuda-graph-modules", "--cuda-graph-impl"),
          "choose graph modules that exist in this model")]),
    ("TE router graph alone", ["--cuda-graph-impl", "transformer_engine",
                               "--cuda-graph-modules", "moe_router"],
     [pre("--cuda-graph-modules moe_router captures MoE modules, but the model has no experts",
          ("--cuda-graph-modules", "--cuda-graph-impl"),
          "choose graph modules that exist in this model")]),
    # validate_args refuses modules with a full-iteration graph; pre-flight still sees the
    # whole layer captured (attention included)
    ("full iteration graphs whole layers", ["--cuda-graph-impl", "full_iteration",
                                            "--no-check-for-nan-in-loss-and-grad",
                                            "--cuda-graph-modules", "mlp",
                                            "--recompute-granularity", "selective",
                                            "--attention-dropout", "0.1"],
     [("training", "--cuda-graph-modules mlp cannot be used with --cuda-graph-impl "
       "full_iteration, which captures the whole iteration",
       ("--cuda-graph-modules", "--cuda-graph-impl"), "drop --cuda-graph-modules"),
      pre("attention dropout cannot be replayed by a graphed, recomputed core attention",
          ("--attention-dropout", "--recompute-modules", "--cuda-graph-modules"),
          "use --attention-dropout 0, or stop recomputing core_attn")]),
    ("one stage without the parallel plugin", ["-p", "no:parallel", "--recompute-granularity",
                                               "full", "--recompute-method", "uniform"],
     [pre("--recompute-granularity full needs --recompute-num-layers",
          ("--recompute-granularity", "--recompute-num-layers"),
          "add --recompute-num-layers N, N between 1 and the 8 layers per pipeline stage")]),
    ("FP4 is not bf16", [*MOE, *BATCH_INVARIANT, "--fp4-format", "e2m1"],
     [pre("batch-invariant MoE is bf16-only; FP8 / FP4 are on",
          ("--batch-invariant-mode", "--fp8-format", "--fp4-format"),
          "drop --fp8-format / --fp4-format")]),
    ("batch-invariant bf16 MoE", [*MOE, *BATCH_INVARIANT], []),
]


@pytest.mark.parametrize("argv, expected",
                         [pytest.param(a, e, id=name) for name, a, e in CASES])
def test_model_view_through_rules(argv: list[str], expected: list[tuple]) -> None:
    assert whole(argv) == expected
