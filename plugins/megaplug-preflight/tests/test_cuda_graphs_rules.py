"""CUDA graphs: which modules a model can capture, and with which recomputation and offloading
(TransformerConfig.__post_init__'s CUDA-graph block). Each rejection whole (message, flags,
hint) at the boundary it draws, and the near misses that must pass."""

from __future__ import annotations


import pytest
from preflight_launches import DENSE, MOE, every_problem as whole, pre


LOCAL = ["--cuda-graph-impl", "local"]
TE = ["--cuda-graph-impl", "transformer_engine"]
# Megatron asks a whole-iteration graph to leave out the NaN check (its validate_args)
FULL_ITERATION = ["--cuda-graph-impl", "full_iteration", "--no-check-for-nan-in-loss-and-grad"]
PADDED = ["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"]
SELECTIVE = ["--recompute-granularity", "selective", "--recompute-modules"]
FULL_RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", "1"]
FINE = ["--fine-grained-activation-offloading", "--offload-modules"]




def with_cpu_offloading(impl: str) -> tuple:
    return pre(f"--cuda-graph-impl {impl} does not work with --cpu-offloading-num-layers",
               ("--cuda-graph-impl", "--cpu-offloading-num-layers"),
               "use --cuda-graph-impl full_iteration, or drop CPU offloading")


@pytest.mark.parametrize("argv, expected", [
    ([*LOCAL, "--cpu-offloading-num-layers", "1"], [with_cpu_offloading("local")]),
    ([*TE, "--cpu-offloading-num-layers", "1"], [with_cpu_offloading("transformer_engine")]),
    ([*TE, "--cpu-offloading-num-layers", "0"], []),
    ([*FULL_ITERATION, "--cpu-offloading-num-layers", "1"], []),
    (["--cuda-graph-impl", "none", "--cpu-offloading-num-layers", "1"], []),
    (["--cpu-offloading-num-layers", "1"], []),
])
def test_per_layer_graphs_do_not_work_with_cpu_offloading(argv, expected):
    assert whole(argv) == expected


def graph_modules(modules: str, problem: str) -> tuple:
    return pre(f"--cuda-graph-modules {modules} {problem}",
               ("--cuda-graph-modules", "--cuda-graph-impl"),
               "choose graph modules that exist in this model")


BOTH = "cannot capture both moe and moe_router"
NO_EXPERTS = "captures MoE modules, but the model has no experts"
ALL_MOE = "captures mlp, but every layer is an MoE layer"
NOT_PADDED = ("captures moe, which needs --moe-expert-capacity-factor with "
              "--moe-pad-expert-input-to-capacity")
SYNCHRONIZES = ("captures moe_preprocess, whose all-to-all preprocessing synchronizes with the "
                "host here")
TWO_EXPERTS = ["--num-experts", "2", "--moe-ffn-hidden-size", "256", "--disable-bias-linear"]


@pytest.mark.parametrize("argv, expected", [
    ([*TE, "--cuda-graph-modules", "moe", "moe_router", *MOE, *PADDED],
     [graph_modules("moe moe_router", BOTH)]),
    # the local implementation graphs router and preprocess together
    ([*LOCAL, "--cuda-graph-modules", "moe", "moe_router", *MOE],
     [graph_modules("moe moe_router moe_preprocess", BOTH),
      graph_modules("moe moe_router moe_preprocess", NOT_PADDED)]),
    ([*TE, "--cuda-graph-modules", "moe_preprocess", *MOE],
     [graph_modules("moe_preprocess", "can capture moe_preprocess only together with moe_router")]),
    ([*LOCAL, "--cuda-graph-modules", "moe_preprocess", *MOE], []),
    ([*TE, "--cuda-graph-modules", "moe_router", "moe_preprocess", *MOE], []),
    ([*TE, "--cuda-graph-modules", "moe", *MOE, *PADDED], []),
    # graphs of MoE modules need experts: 2 or more
    ([*TE, "--cuda-graph-modules", "moe_router", "attn"],
     [graph_modules("moe_router attn", NO_EXPERTS)]),
    ([*TE, "--cuda-graph-modules", "moe"], [graph_modules("moe", NO_EXPERTS)]),
    ([*TE, "--cuda-graph-modules", "moe_router", *TWO_EXPERTS[:-1], "--num-experts", "1"],
     [graph_modules("moe_router", NO_EXPERTS)]),
    ([*TE, "--cuda-graph-modules", "moe_router", *TWO_EXPERTS], []),
    ([*TE, "--cuda-graph-modules", "attn", "mlp"], []),
    # an mlp graph needs a dense layer
    ([*TE, "--cuda-graph-modules", "mlp", *MOE], [graph_modules("mlp", ALL_MOE)]),
    ([*TE, "--cuda-graph-modules", "mlp", *MOE, "--moe-layer-freq", "([1]*8)"],
     [graph_modules("mlp", ALL_MOE)]),
    ([*TE, "--cuda-graph-modules", "mlp", *MOE, "--moe-layer-freq", "([1]*7+[0])"], []),
    ([*TE, "--cuda-graph-modules", "mlp", *MOE, "--moe-layer-freq", "([0]*8)"], []),
    ([*TE, "--cuda-graph-modules", "mlp", *MOE, "--moe-layer-freq", "2"], []),
    ([*TE, "--cuda-graph-modules", "attn", *MOE], []),
    # the moe graph needs drop-and-pad routing: a capacity factor and padding, both
    ([*TE, "--cuda-graph-modules", "moe", *MOE], [graph_modules("moe", NOT_PADDED)]),
    ([*TE, "--cuda-graph-modules", "moe", *MOE, "--moe-expert-capacity-factor", "1.0"],
     [graph_modules("moe", NOT_PADDED)]),
    ([*TE, "--cuda-graph-modules", "moe", *MOE, "--moe-expert-capacity-factor", "-1",
      "--moe-pad-expert-input-to-capacity"],
     [pre("--moe-pad-expert-input-to-capacity needs a non-negative --moe-expert-capacity-factor",
          ("--moe-pad-expert-input-to-capacity", "--moe-expert-capacity-factor"),
          "set --moe-expert-capacity-factor, or drop the padding"),
      graph_modules("moe", NOT_PADDED)]),
    # all-to-all preprocessing synchronizes when a capacity factor or FP8 padding is on
    ([*TE, "--cuda-graph-modules", "moe_router", "moe_preprocess", *MOE,
      "--moe-expert-capacity-factor", "1.0"],
     [graph_modules("moe_router moe_preprocess", SYNCHRONIZES)]),
    ([*TE, "--cuda-graph-modules", "moe_router", "moe_preprocess", *MOE,
      "--moe-router-padding-for-fp8", "--fp8-format", "e4m3"],
     [graph_modules("moe_router moe_preprocess", SYNCHRONIZES)]),
    ([*TE, "--cuda-graph-modules", "moe_router", "moe_preprocess", *MOE, *PADDED], []),
    ([*TE, "--cuda-graph-modules", "moe_router", *MOE, "--moe-expert-capacity-factor", "1.0"],
     []),
    ([*TE, "--cuda-graph-modules", "moe_router", "moe_preprocess", *MOE,
      "--moe-token-dispatcher-type", "allgather", "--moe-expert-capacity-factor", "1.0"], []),
    # graph modules are read only by the per-layer implementations
    (["--cuda-graph-impl", "none", "--cuda-graph-modules", "moe", "moe_router"], []),
])
def test_graph_modules_match_the_model(argv, expected):
    assert whole(argv) == expected


FULL_NEEDS_ITERATION = "full recomputation under CUDA graphs needs --cuda-graph-impl full_iteration"


@pytest.mark.parametrize("argv, expected", [
    ([*TE, *FULL_RECOMPUTE],
     [pre(f"{FULL_NEEDS_ITERATION}, got transformer_engine",
          ("--cuda-graph-impl", "--recompute-granularity"),
          "use selective recomputation, or --cuda-graph-impl full_iteration")]),
    ([*LOCAL, *FULL_RECOMPUTE],
     [pre(f"{FULL_NEEDS_ITERATION}, got local", ("--cuda-graph-impl", "--recompute-granularity"),
          "use selective recomputation, or --cuda-graph-impl full_iteration")]),
    ([*FULL_ITERATION, *FULL_RECOMPUTE], []),
    # full recomputation ends the check: nothing of the selective rules is read
    ([*FULL_ITERATION, *FULL_RECOMPUTE, "--recompute-modules", "core_attn"], []),
    ([*FULL_RECOMPUTE], []),
])
def test_full_recomputation_needs_full_iteration_graphs(argv, expected):
    assert whole(argv) == expected


MOE_WITH_ROUTER = pre("recomputing moe does not work with a moe_router CUDA graph under "
                      "--cuda-graph-impl transformer_engine",
                      ("--cuda-graph-modules", "--recompute-modules"), "drop one of the two")


@pytest.mark.parametrize("argv, expected", [
    ([*TE, "--cuda-graph-modules", "moe_router", *SELECTIVE, "moe", *MOE], [MOE_WITH_ROUTER]),
    ([*TE, "--cuda-graph-modules", "moe_router", "--moe-layer-recompute", *MOE],
     [MOE_WITH_ROUTER]),
    ([*LOCAL, "--cuda-graph-modules", "moe_router", *SELECTIVE, "moe", *MOE], []),
    ([*TE, "--cuda-graph-modules", "moe_router", *SELECTIVE, "core_attn", *MOE], []),
    ([*TE, "--cuda-graph-modules", "attn", *SELECTIVE, "moe", *MOE], []),
])
def test_recomputed_moe_does_not_straddle_a_router_graph(argv, expected):
    assert whole(argv) == expected


ATTENTION_DROPOUT = pre("attention dropout cannot be replayed by a graphed, recomputed core "
                        "attention",
                        ("--attention-dropout", "--recompute-modules", "--cuda-graph-modules"),
                        "use --attention-dropout 0, or stop recomputing core_attn")
HIDDEN_DROPOUT = pre("hidden dropout cannot be replayed by a graphed, recomputed MLP / MoE",
                     ("--hidden-dropout", "--recompute-modules", "--cuda-graph-modules"),
                     "use --hidden-dropout 0, or stop recomputing mlp / moe")
JITTER = pre("--moe-input-jitter-eps cannot be replayed by a graphed, recomputed MoE",
             ("--moe-input-jitter-eps", "--recompute-modules", "--cuda-graph-modules"),
             "drop --moe-input-jitter-eps, or stop recomputing moe")
NO_DROPOUT = ["--attention-dropout", "0", "--hidden-dropout", "0"]
MOE_GRAPH = ["--cuda-graph-modules", "moe", *MOE, *PADDED]


@pytest.mark.parametrize("argv, expected", [
    # Megatron's default dropouts are 0.1; a whole-layer graph holds every module
    ([*TE, *SELECTIVE, "core_attn"], [ATTENTION_DROPOUT]),
    ([*TE, *SELECTIVE, "core_attn", "--attention-dropout", "0"], []),
    ([*TE, "--cuda-graph-modules", "attn", *SELECTIVE, "core_attn", "--hidden-dropout", "0"],
     [ATTENTION_DROPOUT]),
    ([*TE, "--cuda-graph-modules", "mlp", *SELECTIVE, "core_attn"], []),
    ([*FULL_ITERATION, *SELECTIVE, "core_attn", "--hidden-dropout", "0"], [ATTENTION_DROPOUT]),
    ([*TE, *SELECTIVE, "mlp"], [HIDDEN_DROPOUT]),
    ([*TE, *SELECTIVE, "mlp", "--hidden-dropout", "0"], []),
    ([*TE, "--cuda-graph-modules", "mlp", *SELECTIVE, "mlp"], [HIDDEN_DROPOUT]),
    ([*TE, "--cuda-graph-modules", "attn", *SELECTIVE, "mlp"], []),
    ([*TE, "--cuda-graph-modules", "mlp", *SELECTIVE, "layernorm"], []),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "moe"], [HIDDEN_DROPOUT]),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "moe", "--hidden-dropout", "0"], []),
    ([*TE, "--cuda-graph-modules", "attn", *MOE, *SELECTIVE, "moe"], []),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "core_attn", "--moe-input-jitter-eps", "0.1"], []),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "moe", *NO_DROPOUT, "--moe-input-jitter-eps", "0.1"],
     [JITTER]),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "moe", *NO_DROPOUT, "--moe-input-jitter-eps", "0"], [JITTER]),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "moe", *NO_DROPOUT], []),
    ([*TE, "--cuda-graph-modules", "attn", *MOE, *SELECTIVE, "moe", *NO_DROPOUT,
      "--moe-input-jitter-eps", "0.1"], []),
    ([*TE, *MOE_GRAPH, *SELECTIVE, "mlp", *NO_DROPOUT, "--moe-input-jitter-eps", "0.1"], []),
    ([*FULL_ITERATION, *MOE, *SELECTIVE, "core_attn", "mlp", "moe", "--moe-input-jitter-eps",
      "0.1"], [ATTENTION_DROPOUT, HIDDEN_DROPOUT, JITTER]),
    # without graphs, or without selective recomputation, random numbers are not replayed
    ([*SELECTIVE, "core_attn", "mlp"], []),
    ([*TE, "--moe-input-jitter-eps", "0.1", *MOE], []),
])
def test_graphed_recomputed_modules_replay_no_random_numbers(argv, expected):
    assert whole(argv) == expected


GTP_SHARED = pre("GTP with local CUDA graphs capturing shared experts cannot recompute them in "
                 "FP8/FP4", ("--recompute-modules", "--cuda-graph-impl"),
                 "drop shared_experts from --recompute-modules, or use --cuda-graph-impl "
                 "full_iteration")
SHARED = [*MOE, "--moe-shared-expert-intermediate-size", "128", *NO_DROPOUT]
#: GTP rematerializes weights when the shards outnumber the tensor-parallel ranks.
REMAT_2 = ["--tensor-parallel-num-weight-shards", "2"]
FP8 = ["--fp8-format", "e4m3"]
ROUTER_GRAPH = [*LOCAL, "--cuda-graph-modules", "moe_router"]


@pytest.mark.parametrize("argv, expected", [
    ([*ROUTER_GRAPH, *FP8, *SHARED, *REMAT_2, *SELECTIVE, "shared_experts"], [GTP_SHARED]),
    ([*ROUTER_GRAPH, *FP8, *SHARED, *REMAT_2, *SELECTIVE, "shared_experts", "core_attn"],
     [GTP_SHARED]),
    ([*ROUTER_GRAPH, "--fp4-format", "e2m1", "--fp4-param-gather",
      "--use-distributed-optimizer", *SHARED, *REMAT_2,
      *SELECTIVE, "shared_experts"], [GTP_SHARED]),
    ([*LOCAL, *FP8, *SHARED, *REMAT_2, *SELECTIVE, "shared_experts"], [GTP_SHARED]),
    ([*LOCAL, "--cuda-graph-modules", "moe", *PADDED, *FP8, *SHARED, *REMAT_2, *SELECTIVE,
      "shared_experts"], [GTP_SHARED]),
    # each condition's near miss
    ([*ROUTER_GRAPH, *FP8, *SHARED, *REMAT_2, *SELECTIVE, "core_attn"], []),
    ([*ROUTER_GRAPH, *FP8, *SHARED, *SELECTIVE, "shared_experts"], []),
    ([*ROUTER_GRAPH, *FP8, *SHARED, "--tensor-parallel-num-weight-shards", "2",
      "--tensor-model-parallel-size", "2", "--sequence-parallel", *SELECTIVE, "shared_experts"],
     []),
    ([*ROUTER_GRAPH, *FP8, *SHARED, "--tensor-parallel-num-weight-shards", "4",
      "--tensor-model-parallel-size", "2", "--sequence-parallel", *SELECTIVE, "shared_experts"],
     [GTP_SHARED]),
    ([*ROUTER_GRAPH, *SHARED, *REMAT_2, *SELECTIVE, "shared_experts"], []),
    ([*ROUTER_GRAPH, *FP8, *MOE, *NO_DROPOUT, *REMAT_2, *SELECTIVE, "shared_experts"], []),
    ([*ROUTER_GRAPH, *FP8, *SHARED, "--moe-shared-expert-overlap", *REMAT_2, *SELECTIVE,
      "shared_experts"],
     [pre("--recompute-modules shared_experts does not work with --moe-shared-expert-overlap",
          ("--recompute-modules", "--moe-shared-expert-overlap"), "drop one of the two")]),
    ([*LOCAL, "--cuda-graph-modules", "attn", *FP8, *SHARED, *REMAT_2, *SELECTIVE,
      "shared_experts"], []),
    ([*TE, "--cuda-graph-modules", "moe_router", *FP8, *SHARED, *REMAT_2, *SELECTIVE,
      "shared_experts"], []),
    # without the GTP plugin nothing is rematerialized
    (["-p", "no:gtp", *ROUTER_GRAPH, *FP8, *SHARED, *SELECTIVE, "shared_experts"], []),
])
def test_gtp_local_graphs_do_not_recompute_graphed_shared_experts_in_fp8(argv, expected):
    assert whole(argv) == expected


OFFLOAD_FLAGS = ("--cuda-graph-impl", "--fine-grained-activation-offloading", "--offload-modules")
LOCAL_WHOLE_LAYER = pre("fine-grained activation offloading does not work with local "
                        "whole-layer CUDA graphs", (*OFFLOAD_FLAGS, "--cuda-graph-modules"),
                        "name --cuda-graph-modules")
WITH_MOE_GRAPH = pre("fine-grained activation offloading does not work with the moe CUDA graph "
                     "module", (*OFFLOAD_FLAGS, "--cuda-graph-modules"),
                     "drop moe from the modules")
NO_WARMUP = pre("fine-grained activation offloading under CUDA graphs needs "
                "--cuda-graph-warmup-steps 1 or more",
                (*OFFLOAD_FLAGS, "--cuda-graph-warmup-steps"),
                "use at least 1 warm-up step")
NO_INFLIGHT = pre("fine-grained activation offloading with full-iteration CUDA graphs needs a "
                  "non-negative --fine-grained-offloading-max-inflight-offloads",
                  (*OFFLOAD_FLAGS, "--fine-grained-offloading-max-inflight-offloads"),
                  "set --fine-grained-offloading-max-inflight-offloads")


def local_cannot(modules: str) -> tuple:
    return pre(f"--cuda-graph-impl local cannot offload {modules}", OFFLOAD_FLAGS,
               "offload only expert_fc1, moe_act or fused_group_mlp, or use --cuda-graph-impl "
               "transformer_engine")


@pytest.mark.parametrize("argv, expected", [
    # local graphs: partial MoE offloads only, and never of the whole layer; sorted names
    ([*LOCAL, *FINE, "qkv_linear", "core_attn"],
     [local_cannot("core_attn, qkv_linear"), LOCAL_WHOLE_LAYER]),
    ([*LOCAL, *FINE, "moe_act", "core_attn", "--cuda-graph-modules", "moe_router", *MOE],
     [local_cannot("core_attn")]),
    ([*LOCAL, *FINE, "moe_act", *MOE], [LOCAL_WHOLE_LAYER]),
    ([*LOCAL, *FINE, "moe_act", "expert_fc1", "--cuda-graph-modules", "moe_router", *MOE], []),
    ([*LOCAL, *FINE, "fused_group_mlp", "--use-transformer-engine-op-fuser",
      "--cuda-graph-modules", "attn", *MOE], []),
    ([*LOCAL, *FINE, "moe_act", "--cuda-graph-modules", "moe", *MOE, *PADDED], [WITH_MOE_GRAPH]),
    # Transformer Engine graphs offload anything, but not from the moe graph
    ([*TE, *FINE, "core_attn"], []),
    ([*TE, *FINE, "core_attn", "--cuda-graph-modules", "attn"], []),
    ([*TE, *FINE, "moe_act", "--cuda-graph-modules", "moe", *MOE, *PADDED], [WITH_MOE_GRAPH]),
    # warm-up steps: 1 or more
    ([*TE, *FINE, "core_attn", "--cuda-graph-warmup-steps", "0"], [NO_WARMUP]),
    ([*TE, *FINE, "core_attn", "--cuda-graph-warmup-steps", "-1"], [NO_WARMUP]),
    ([*TE, *FINE, "core_attn", "--cuda-graph-warmup-steps", "1"], []),
    # full-iteration graphs: a non-negative in-flight bound
    ([*FULL_ITERATION, *FINE, "core_attn"], [NO_INFLIGHT]),
    ([*FULL_ITERATION, *FINE, "core_attn", "--fine-grained-offloading-max-inflight-offloads",
      "-1"], [NO_INFLIGHT]),
    ([*FULL_ITERATION, *FINE, "core_attn", "--fine-grained-offloading-max-inflight-offloads",
      "0"], []),
    ([*TE, *FINE, "core_attn", "--fine-grained-offloading-max-inflight-offloads", "-1"], []),
    ([*FULL_ITERATION, *FINE, "core_attn", "--cuda-graph-warmup-steps", "0"],
     [NO_WARMUP, NO_INFLIGHT]),
    # no graphs, or no fine-grained offloading: nothing of this is read
    (["--cuda-graph-impl", "none", *FINE, "core_attn", "--cuda-graph-warmup-steps", "0"], []),
    ([*LOCAL, "--offload-modules", "core_attn", "--cuda-graph-warmup-steps", "0"], []),
])
def test_offloading_under_graphs(argv, expected):
    assert whole(argv) == expected


def test_an_unset_graph_implementation_is_none(tmp_path):
    config = tmp_path / "launch.yaml"
    config.write_text("cuda-graph-impl: null\n")
    assert whole(["--cpu-offloading-num-layers", "1"], config_files=(config,)) == []
    assert whole(["--cpu-offloading-num-layers", "1", "--cuda-graph-impl", "local"],
                 config_files=(config,)) == [with_cpu_offloading("local")]


def without(argv: list[str], *flags: str) -> list[str]:
    """``argv`` without these flags and their values."""
    kept = list(argv)
    for flag in flags:
        at = kept.index(flag)
        del kept[at:at + 2]
    return kept


#: DENSE without the training plugin's flags.
UNTRAINED = without(DENSE, "--micro-batch-size", "--train-iters", "--lr")


def test_without_the_training_plugin_there_are_no_graphs():
    # MoE-layer recomputation is the moe plugin's; the graph settings are the training plugin's
    assert whole(["-p", "no:training", *MOE, "--moe-layer-recompute"], base=UNTRAINED) == []
