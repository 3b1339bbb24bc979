"""Mixture-of-experts rules at the boundaries they draw: expert counts and sizes, single
grouped parameters, dispatcher backends and quantized dispatch, load balancing, expert
biases and Transformer Engine versions (TransformerConfig.__post_init__'s MoE checks). Each
rejection whole (message, flags, hint), and the near misses that must pass."""

from __future__ import annotations

import importlib.util

import pytest
from preflight_launches import MOE, every_problem as whole, pre


#: Eight experts over two expert-parallel ranks, with linear biases on (Megatron's default).
EXPERTS = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--expert-model-parallel-size",
           "2", "--moe-token-dispatcher-type", "alltoall"]
NO_BIAS = "--disable-bias-linear"
FLEX = [*EXPERTS, NO_BIAS, "--moe-token-dispatcher-type", "flex"]
NCCLEP = [*FLEX, "--moe-flex-dispatcher-backend", "ncclep"]
GROUPED = ["--moe-grouped-gemm", "--moe-use-grouped-tensor"]
FUSER = "--use-transformer-engine-op-fuser"




FFN_WITHOUT_EXPERTS = pre("--moe-ffn-hidden-size 256 is set but --num-experts is not",
                          ("--moe-ffn-hidden-size", "--num-experts"),
                          "set --num-experts, or drop --moe-ffn-hidden-size")


@pytest.mark.parametrize("argv, expected", [
    # validate_args turns --num-experts 0 into a dense model; a negative count stays
    (["--num-experts", "-1", "--moe-ffn-hidden-size", "256", NO_BIAS],
     [pre("--num-experts -1 must be positive", ("--num-experts",),
          "give a positive number of experts, or 0 for dense")]),
    (["--num-experts", "0"], []),
    (["--num-experts", "1", "--moe-ffn-hidden-size", "256", NO_BIAS], []),
    # an expert FFN size without experts: refused unless some layers are dense by frequency
    (["--moe-ffn-hidden-size", "256"], [FFN_WITHOUT_EXPERTS]),
    (["--moe-ffn-hidden-size", "256", "--moe-layer-freq", "([1]*8)"], [FFN_WITHOUT_EXPERTS]),
    (["--moe-ffn-hidden-size", "256", "--moe-layer-freq", "1"], [FFN_WITHOUT_EXPERTS]),
    (["--moe-ffn-hidden-size", "256", "--moe-layer-freq", "([0,1]*4)"], []),
    (["--moe-ffn-hidden-size", "256", "--moe-layer-freq", "2"], []),
])
def test_expert_count_and_expert_ffn_size(argv, expected):
    assert whole(argv) == expected


def need_grouped_gemm(spelled: str, names: tuple[str, ...]) -> tuple:
    return pre(f"{spelled} need --moe-grouped-gemm", (*names, "--moe-grouped-gemm"),
               "add --moe-grouped-gemm")


def need_grouped_tensors(spelled: str, names: tuple[str, ...]) -> tuple:
    return pre(f"{spelled} need grouped tensors", (*names, "--moe-use-grouped-tensor"),
               "add --moe-use-grouped-tensor (or --use-transformer-engine-op-fuser)")


BIAS_REMOVED = pre("--moe-single-grouped-bias needs linear biases, and --disable-bias-linear "
                   "removes them", ("--moe-single-grouped-bias", "--disable-bias-linear"),
                   "drop --disable-bias-linear, or --moe-single-grouped-bias")
BOTH = ("--moe-single-grouped-weight", "--moe-single-grouped-bias")
PRECISION = pre("--moe-single-grouped-weight supports only high-precision weights, --fp8-recipe "
                "mxfp8 or --fp4-recipe nvfp4",
                ("--moe-single-grouped-weight", "--fp8-recipe", "--fp4-recipe"),
                "use the mxfp8 / nvfp4 recipe, or drop --moe-single-grouped-weight")
FP4_GATHER = pre("--moe-single-grouped-weight with FP4 needs --fp4-param-gather",
                 ("--moe-single-grouped-weight", "--fp4-param-gather"), "add --fp4-param-gather")
SINGLE_WEIGHT = [*EXPERTS, NO_BIAS, *GROUPED, "--moe-single-grouped-weight"]
FP4 = ["--fp4-format", "e2m1"]
FP4_GATHERED = [*FP4, "--fp4-param-gather", "--use-distributed-optimizer"]


@pytest.mark.parametrize("argv, expected", [
    ([*EXPERTS, "--moe-single-grouped-bias"],
     [need_grouped_gemm("--moe-single-grouped-bias", ("--moe-single-grouped-bias",)),
      need_grouped_tensors("--moe-single-grouped-bias", ("--moe-single-grouped-bias",))]),
    ([*EXPERTS, NO_BIAS, *BOTH],
     [need_grouped_gemm("--moe-single-grouped-weight and --moe-single-grouped-bias", BOTH),
      need_grouped_tensors("--moe-single-grouped-weight and --moe-single-grouped-bias", BOTH),
      BIAS_REMOVED]),
    ([*EXPERTS, *GROUPED, "--moe-single-grouped-bias"], []),
    ([*EXPERTS, NO_BIAS, *GROUPED, "--moe-single-grouped-bias"], [BIAS_REMOVED]),
    # the weight's precision: high precision, MXFP8 or NVFP4 (gathered)
    (SINGLE_WEIGHT, []),
    ([*SINGLE_WEIGHT, "--fp8-format", "e4m3"], [PRECISION]),
    ([*SINGLE_WEIGHT, "--fp8-format", "e4m3", "--fp8-recipe", "mxfp8"], []),
    ([*SINGLE_WEIGHT, *FP4], [FP4_GATHER]),
    ([*SINGLE_WEIGHT, *FP4_GATHERED], []),
    ([*SINGLE_WEIGHT, *FP4_GATHERED, "--fp4-recipe", "custom", "--fp4-quantizer-factory",
      "package.module.factory"], [PRECISION]),
    # a recipe is read only when its precision is on
    ([*SINGLE_WEIGHT, "--fp4-recipe", "custom", "--fp4-quantizer-factory",
      "package.module.factory"], []),
    ([*EXPERTS, NO_BIAS, *GROUPED, "--fp8-format", "e4m3"], []),
    ([*EXPERTS, NO_BIAS, *GROUPED, *FP4], []),
])
def test_single_grouped_parameters(argv, expected):
    assert whole(argv) == expected


QUANTIZED_HINT = "use --moe-token-dispatcher-type flex --moe-flex-dispatcher-backend ncclep"


def needs_ncclep(spelled: str, dests: tuple[str, ...]) -> tuple:
    return pre(f"{spelled} needs the flex dispatcher's ncclep backend",
               (*dests, "--moe-token-dispatcher-type", "--moe-flex-dispatcher-backend"),
               QUANTIZED_HINT)


def needs_fuser_and_grouped_gemm(spelled: str, dests: tuple[str, ...]) -> tuple:
    return pre(f"{spelled} needs both --use-transformer-engine-op-fuser and --moe-grouped-gemm",
               (*dests, FUSER, "--moe-grouped-gemm"), "add both flags, or dispatch in bf16")


FWD = "--moe-dispatch-fwd-dtype mxfp8"
FWD_BWD = "--moe-dispatch-fwd-dtype mxfp8 / --moe-combine-bwd-dtype mxfp8"
DTYPES = ("--moe-dispatch-fwd-dtype", "--moe-combine-bwd-dtype")


@pytest.mark.parametrize("argv, expected", [
    # NCCL-EP with grouped tensors needs the op fuser
    ([*NCCLEP, *GROUPED],
     [pre("--moe-use-grouped-tensor with the NCCL-EP backend needs "
          "--use-transformer-engine-op-fuser",
          ("--moe-use-grouped-tensor", "--moe-flex-dispatcher-backend", FUSER),
          "add --use-transformer-engine-op-fuser, or use another dispatcher")]),
    ([*NCCLEP, *GROUPED, FUSER], []),
    ([*NCCLEP, "--moe-grouped-gemm"], []),
    # MXFP8 dispatch: NCCL-EP under the flex dispatcher, with the fuser and grouped GEMM
    ([*FLEX, "--moe-dispatch-fwd-dtype", "mxfp8"],
     [needs_ncclep(FWD, DTYPES[:1]), needs_fuser_and_grouped_gemm(FWD, DTYPES[:1])]),
    ([*FLEX, "--moe-flex-dispatcher-backend", "deepep", "--moe-dispatch-fwd-dtype", "mxfp8",
      FUSER, "--moe-grouped-gemm"], [needs_ncclep(FWD, DTYPES[:1])]),
    ([*NCCLEP, "--moe-dispatch-fwd-dtype", "mxfp8", "--moe-combine-bwd-dtype", "mxfp8", FUSER,
      "--moe-grouped-gemm"], []),
    ([*NCCLEP, "--moe-dispatch-fwd-dtype", "mxfp8", "--moe-combine-bwd-dtype", "mxfp8", FUSER],
     [needs_fuser_and_grouped_gemm(FWD_BWD, DTYPES)]),
    ([*NCCLEP, "--moe-combine-bwd-dtype", "mxfp8", "--moe-grouped-gemm"],
     [needs_fuser_and_grouped_gemm("--moe-combine-bwd-dtype mxfp8", DTYPES[1:])]),
    ([*NCCLEP, "--moe-dispatch-fwd-dtype", "bf16", "--moe-combine-bwd-dtype", "bf16"], []),
])
def test_ncclep_and_quantized_dispatch(argv, expected):
    assert whole(argv) == expected


@pytest.mark.parametrize("argv, expected", [
    ([*MOE, "--moe-deepep-num-sms", "20", "--moe-hybridep-num-sms", "24"],
     [pre("--moe-deepep-num-sms 20 and --moe-hybridep-num-sms 24 disagree",
          ("--moe-deepep-num-sms", "--moe-hybridep-num-sms"),
          "set --moe-flex-dispatcher-num-sms instead of both")]),
    ([*MOE, "--moe-deepep-num-sms", "20", "--moe-hybridep-num-sms", "20"], []),
    ([*MOE, "--moe-deepep-num-sms", "20"], []),
    ([*MOE, "--moe-hybridep-num-sms", "24"], []),
    ([*MOE, "--moe-deepep-num-sms", "20", "--moe-hybridep-num-sms", "24",
      "--moe-flex-dispatcher-num-sms", "20"], []),
])
def test_deprecated_sm_counts_agree(argv, expected):
    assert whole(argv) == expected


def overlap_needs(dispatcher: str) -> tuple:
    return pre(f"--moe-shared-expert-overlap needs --moe-token-dispatcher-type alltoall or flex, "
               f"got {dispatcher}", ("--moe-shared-expert-overlap", "--moe-token-dispatcher-type"),
               "use the alltoall dispatcher, or drop --moe-shared-expert-overlap")


SHARED = ["--moe-shared-expert-intermediate-size", "128", "--moe-shared-expert-overlap"]


@pytest.mark.parametrize("argv, expected", [
    ([*MOE, "--moe-shared-expert-intermediate-size", "0"],
     [pre("--moe-shared-expert-intermediate-size 0 must be positive (shared experts x each "
          "one's FFN size)", ("--moe-shared-expert-intermediate-size",),
          "give a positive size, or leave it unset for no shared experts")]),
    ([*MOE, "--moe-shared-expert-intermediate-size", "1"], []),
    ([*MOE, *SHARED], []),
    ([*FLEX, *SHARED], []),
    ([*MOE, "--moe-token-dispatcher-type", "allgather", *SHARED], [overlap_needs("allgather")]),
    ([*MOE, "--moe-token-dispatcher-type", "allgather", "--moe-shared-expert-overlap"], []),
])
def test_shared_experts(argv, expected):
    assert whole(argv) == expected


def coefficients(types: int, got: int) -> tuple:
    return pre(f"{types} load-balancing types need {types} --moe-aux-loss-coeff values, got {got}",
               ("--moe-router-load-balancing-type", "--moe-aux-loss-coeff"),
               "give one coefficient per load-balancing type")


TYPES = ["--moe-router-load-balancing-type", "aux_loss", "seq_aux_loss"]


@pytest.mark.parametrize("argv, expected", [
    ([*MOE, *TYPES, "--moe-aux-loss-coeff", "0.1", "0.2", "0.3"], [coefficients(2, 3)]),
    ([*MOE, *TYPES, "--moe-aux-loss-coeff", "0.1"], [coefficients(2, 1)]),
    ([*MOE, *TYPES, "--moe-aux-loss-coeff", "0.1", "0.2"], []),
    ([*MOE, "--moe-router-load-balancing-type", "sinkhorn", "sinkhorn", "--moe-aux-loss-coeff",
      "0.1", "0.2", "--moe-expert-capacity-factor", "1.0"],
     [pre("--moe-expert-capacity-factor does not work with --moe-router-load-balancing-type "
          "sinkhorn sinkhorn",
          ("--moe-expert-capacity-factor", "--moe-router-load-balancing-type"),
          "use aux_loss, seq_aux_loss, global_aux_loss or none, or drop the capacity factor")]),
])
def test_load_balancing_types_and_coefficients(argv, expected):
    assert whole(argv) == expected


def biased_experts(etp: int) -> tuple:
    return pre(f"MoE layers with linear biases need expert tensor parallel size 1, got {etp}",
               (NO_BIAS, "--expert-tensor-parallel-size", "--num-experts"),
               "add --disable-bias-linear, or --expert-tensor-parallel-size 1")


TP2 = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]


@pytest.mark.parametrize("argv, expected", [
    ([*EXPERTS, *TP2], [biased_experts(2)]),
    ([*EXPERTS, *TP2, "--expert-tensor-parallel-size", "1"], []),
    ([*EXPERTS, *TP2, NO_BIAS], []),
    ([*EXPERTS], []),
    # an expert tensor-parallel size of 0 is refused, and the biases are judged by TP
    ([*EXPERTS, *TP2, "--expert-tensor-parallel-size", "0"],
     [pre("--expert-tensor-parallel-size 0 leaves no rank to hold expert weights",
          ("--expert-tensor-parallel-size",),
          "use 1 or more (it defaults to --tensor-model-parallel-size)"),
      biased_experts(2)]),
    ([*TP2], []),
    # without the parallel plugin there is no tensor parallelism to fall back on: size 1
    (["-p", "no:parallel", *EXPERTS, "--expert-tensor-parallel-size", "0"],
     [pre("--expert-tensor-parallel-size 0 leaves no rank to hold expert weights",
          ("--expert-tensor-parallel-size",),
          "use 1 or more (it defaults to --tensor-model-parallel-size)")]),
])
def test_expert_biases_need_expert_tensor_parallel_size_1(argv, expected):
    assert whole(argv) == expected


def test_rank_capacity_with_hybridep_and_the_op_fuser():
    argv = [*FLEX, "--moe-flex-dispatcher-backend", "hybridep",
            "--moe-expert-rank-capacity-factor", "1.5"]
    assert whole([*argv, FUSER]) == []
    assert whole(argv) == [pre(
        "--moe-expert-rank-capacity-factor with HybridEP needs --use-transformer-engine-op-fuser "
        "or --moe-use-grouped-tensor",
        ("--moe-expert-rank-capacity-factor", FUSER), "add --use-transformer-engine-op-fuser")]


def fp8_te(what: str, found: str, flags: tuple[str, ...]) -> tuple:
    return pre(f"{what} requires transformer_engine >= {found}", flags,
               "upgrade Transformer Engine")


FP8_EXPERTS = [*EXPERTS, NO_BIAS, "--fp8-format", "e4m3"]


@pytest.mark.parametrize("te, argv, expected", [
    ("1.10.0", [*FP8_EXPERTS, "--moe-grouped-gemm"],
     [fp8_te("FP8 grouped GEMM", "1.11.0, found 1.10.0", ("--moe-grouped-gemm", "--fp8-format"))]),
    ("1.11.0", [*FP8_EXPERTS, "--moe-grouped-gemm"], []),
    ("1.10.0", FP8_EXPERTS, []),
    ("1.10.0", [*EXPERTS, NO_BIAS, "--moe-grouped-gemm"], []),
    ("1.6.0", [*FP8_EXPERTS, "--moe-grouped-gemm"],
     [fp8_te("MoE with FP8", "1.7.0.dev0, found 1.6.0", ("--num-experts", "--fp8-format"))]),
    (None, [*FP8_EXPERTS, "--moe-grouped-gemm"],
     [fp8_te("MoE with FP8", "1.7.0.dev0, not installed", ("--num-experts", "--fp8-format"))]),
])
def test_moe_fp8_needs_recent_transformer_engine(te, argv, expected):
    assert whole(argv, {"transformer_engine": te}) == expected


@pytest.mark.skipif(importlib.util.find_spec("transformer_engine") is not None,
                    reason="Transformer Engine is installed here: the target's is known")
def test_moe_fp8_is_not_judged_against_an_unknown_transformer_engine():
    assert whole([*FP8_EXPERTS, "--moe-grouped-gemm"], {}) == []


TOP1_SOFTMAX = pre("--moe-router-topk 1 with softmax scores needs --moe-router-pre-softmax",
                   ("--moe-router-topk", "--moe-router-pre-softmax"),
                   "add --moe-router-pre-softmax (or route to 2 or more experts)")


@pytest.mark.parametrize("argv, expected", [
    ([*MOE, "--moe-router-topk", "1"], [TOP1_SOFTMAX]),
    ([*MOE, "--moe-router-topk", "1", "--moe-router-score-function", "softmax"], [TOP1_SOFTMAX]),
    ([*MOE, "--moe-router-topk", "1", "--moe-router-score-function", "sigmoid"], []),
    ([*MOE, "--moe-router-topk", "1", "--moe-router-pre-softmax"], []),
    ([*MOE, "--moe-router-topk", "2"], []),
])
def test_top1_routing_needs_the_softmax_before_the_top_k(argv, expected):
    assert whole(argv) == expected


def test_without_the_moe_plugin_dispatch_is_in_bf16():
    # the dispatch dtypes are the moe plugin's settings: blocked, nothing is quantized
    assert whole(["-p", "no:moe"]) == []
