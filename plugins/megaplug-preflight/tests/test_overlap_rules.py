"""Expert-parallel all-to-all overlap and the weight-gradient schedules that go with it
(TransformerConfig.__post_init__'s overlap_moe_expert_parallel_comm, delay_wgrad_compute and
overlap_dispatch_backward_with_experts_wgrad checks). Each rejection whole (message, flags,
hint) at the boundary it draws, and the near misses that must pass."""

from __future__ import annotations


import pytest
from preflight_launches import CLUSTER, DENSE, MOE, every_problem as whole, pre


OVERLAP = "--overlap-moe-expert-parallel-comm"
#: Experts without expert parallelism, for the launches that set it themselves.
EXPERTS = ["--num-experts", "8", "--moe-ffn-hidden-size", "256", "--disable-bias-linear"]
EP_OVERLAP = [*MOE, OVERLAP]




def old_torch(found: str) -> tuple:
    return pre(f"{OVERLAP} needs torch >= 2.6.0 (it hangs on older versions), found {found}",
               (OVERLAP,), "upgrade torch")


@pytest.mark.parametrize("torch, expected", [
    ("2.5.1", [old_torch("2.5.1")]),
    ("2.6.0", []),
    ("2.7.0", []),
])
def test_the_overlap_needs_torch_2_6(torch, expected):
    assert whole(EP_OVERLAP, {**CLUSTER, "torch": torch}) == expected


def test_an_old_torch_is_not_read_without_the_overlap():
    assert whole(MOE, {**CLUSTER, "torch": "2.5.1"}) == []


NO_EP = pre(f"{OVERLAP} needs expert parallelism (--expert-model-parallel-size 2 or more)",
            (OVERLAP, "--expert-model-parallel-size"),
            "raise --expert-model-parallel-size, or drop the overlap")


def dispatcher(name: str) -> tuple:
    return pre(f"{OVERLAP} needs --moe-token-dispatcher-type alltoall or flex, got {name}",
               (OVERLAP, "--moe-token-dispatcher-type"), "use --moe-token-dispatcher-type alltoall")


@pytest.mark.parametrize("argv, expected", [
    (EP_OVERLAP, []),
    ([*EP_OVERLAP, "--pipeline-model-parallel-size", "2"],
     [pre(f"{OVERLAP} with pipeline parallelism needs virtual pipeline stages",
          (OVERLAP, "--pipeline-model-parallel-size"),
          "add --num-virtual-stages-per-pipeline-rank 2 (or more)")]),
    ([*EP_OVERLAP, "--pipeline-model-parallel-size", "2",
      "--num-virtual-stages-per-pipeline-rank", "2", "--global-batch-size", "16"], []),
    ([*EP_OVERLAP, "--pipeline-model-parallel-size", "1"], []),
    ([*EXPERTS, "--moe-token-dispatcher-type", "alltoall", OVERLAP], [NO_EP]),
    ([*EXPERTS, "--moe-token-dispatcher-type", "alltoall", "--expert-model-parallel-size", "1",
      OVERLAP], [NO_EP]),
    ([*EXPERTS, "--moe-token-dispatcher-type", "allgather", "--expert-model-parallel-size", "2",
      OVERLAP], [dispatcher("allgather")]),
    ([*EXPERTS, "--moe-token-dispatcher-type", "flex", "--expert-model-parallel-size", "2",
      OVERLAP], []),
    ([OVERLAP], [NO_EP, dispatcher("allgather")]),
])
def test_the_overlap_needs_expert_parallel_all_to_alls(argv, expected):
    assert whole(argv) == expected


def does_not_work_with(what: str, dest: str) -> tuple:
    return pre(f"{OVERLAP} does not work with {what}", (OVERLAP, dest),
               f"drop {what.split()[0]}")


FULL_RECOMPUTE = pre(f"{OVERLAP} does not work with full recomputation",
                     (OVERLAP, "--recompute-granularity"),
                     "use selective recomputation, or drop the overlap")
MOE_RECOMPUTE = pre(f"{OVERLAP} does not work with recomputing MoE layers (moe in "
                    "--recompute-modules, or --moe-layer-recompute)",
                    (OVERLAP, "--recompute-modules"), "remove moe from the recomputed modules")


@pytest.mark.parametrize("argv, expected", [
    (["--recompute-granularity", "full", "--recompute-method", "uniform",
      "--recompute-num-layers", "1"],
     [FULL_RECOMPUTE, does_not_work_with("--recompute-method uniform", "--recompute-method"),
      does_not_work_with("--recompute-num-layers 1", "--recompute-num-layers")]),
    (["--recompute-method", "block"],
     [does_not_work_with("--recompute-method block", "--recompute-method")]),
    (["--recompute-granularity", "selective", "--recompute-modules", "moe"], [MOE_RECOMPUTE]),
    (["--moe-layer-recompute"], [MOE_RECOMPUTE]),
    (["--recompute-granularity", "selective", "--recompute-modules", "core_attn"], []),
])
def test_the_overlap_recomputes_no_layers_nor_moe(argv, expected):
    assert whole([*EP_OVERLAP, *argv]) == expected


def test_recomputation_is_free_without_the_overlap():
    assert whole([*MOE, "--recompute-granularity", "full", "--recompute-method", "uniform",
                  "--recompute-num-layers", "1"]) == []


NEEDS_HALF = pre(f"{OVERLAP} needs --bf16 or --fp16", (OVERLAP, "--bf16"), "add --bf16")
FP32 = [a for a in DENSE if a != "--bf16"]
ROPE = ["--position-embedding-type", "rope"]


@pytest.mark.parametrize("base, argv, expected", [
    (FP32, EP_OVERLAP, [NEEDS_HALF]),
    (FP32, [*EP_OVERLAP, "--fp16"], []),
    (FP32, MOE, []),
    (DENSE, [*EP_OVERLAP, "--moe-shared-expert-intermediate-size", "128",
             "--moe-shared-expert-overlap"],
     [pre(f"{OVERLAP} and --moe-shared-expert-overlap cannot both be on",
          (OVERLAP, "--moe-shared-expert-overlap"), "drop --moe-shared-expert-overlap")]),
    (DENSE, [*EP_OVERLAP, "--moe-shared-expert-intermediate-size", "128"], []),
    (DENSE, [*EP_OVERLAP, *ROPE, "--mtp-num-layers", "2"],
     [pre(f"{OVERLAP} supports at most one MTP layer, got --mtp-num-layers 2",
          (OVERLAP, "--mtp-num-layers"), "use --mtp-num-layers 1")]),
    (DENSE, [*EP_OVERLAP, *ROPE, "--mtp-num-layers", "1"], []),
    (DENSE, [*EP_OVERLAP, *ROPE, "--mtp-num-layers", "0"], []),
])
def test_the_overlap_model_settings(base, argv, expected):
    assert whole(argv, base=base) == expected


FLEX = [*EXPERTS, "--expert-model-parallel-size", "2", "--moe-token-dispatcher-type", "flex"]
NCCLEP = [*FLEX, "--moe-flex-dispatcher-backend", "ncclep", OVERLAP]
HYBRIDEP = [*FLEX, "--moe-flex-dispatcher-backend", "hybridep", OVERLAP]
OFFLOAD = ["--fine-grained-activation-offloading", "--offload-modules"]
NCCLEP_FC1 = pre(f"{OVERLAP} with the ncclep backend cannot offload expert_fc1",
                 (OVERLAP, "--offload-modules"), "remove expert_fc1 from --offload-modules")


def graphed(modules: str) -> tuple:
    return pre(f"{OVERLAP} does not work with --cuda-graph-modules {modules} under "
               "--cuda-graph-impl transformer_engine", (OVERLAP, "--cuda-graph-modules"),
               "graph attn / moe_router instead")


MIXED = ["--moe-layer-freq", "([0,1]*4)"]
TE_GRAPHS = ["--cuda-graph-impl", "transformer_engine", "--cuda-graph-modules"]
PADDED = ["--moe-expert-capacity-factor", "1.0", "--moe-pad-expert-input-to-capacity"]


@pytest.mark.parametrize("argv, expected", [
    ([*NCCLEP, *OFFLOAD, "core_attn", "expert_fc1"], [NCCLEP_FC1]),
    ([*NCCLEP, *OFFLOAD, "core_attn"], []),
    ([*NCCLEP, "--offload-modules", "expert_fc1"], []),
    ([*HYBRIDEP, *OFFLOAD, "expert_fc1"], []),
    ([*EP_OVERLAP, *OFFLOAD, "expert_fc1"], []),
    ([*NCCLEP[:-1], *OFFLOAD, "expert_fc1"], []),  # ncclep without the overlap
    # Transformer Engine graphs of the split MoE / MLP, named in that order
    ([*EP_OVERLAP, *MIXED, *PADDED, *TE_GRAPHS, "mlp", "attn", "moe"], [graphed("moe mlp")]),
    ([*EP_OVERLAP, *MIXED, *TE_GRAPHS, "mlp"], [graphed("mlp")]),
    ([*EP_OVERLAP, *PADDED, *TE_GRAPHS, "moe"], [graphed("moe")]),
    ([*EP_OVERLAP, *TE_GRAPHS, "attn", "moe_router"], []),
    ([*EP_OVERLAP, *MIXED, "--cuda-graph-impl", "local", "--cuda-graph-modules", "mlp"], []),
    ([*MOE, *MIXED, *TE_GRAPHS, "mlp"], []),
])
def test_the_overlap_with_ncclep_offloading_and_graphs(argv, expected):
    assert whole(argv) == expected


NEEDS_OVERLAP = pre("--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm",
                    ("--delay-wgrad-compute", OVERLAP), f"add {OVERLAP}")


def delayed_graphs_te(found: str) -> tuple:
    return pre("--delay-wgrad-compute with --cuda-graph-impl transformer_engine requires "
               f"transformer_engine >= 2.10.0, found {found}",
               ("--delay-wgrad-compute", "--cuda-graph-impl"), "upgrade Transformer Engine")


DELAYED = [*EP_OVERLAP, "--delay-wgrad-compute"]
ROUTER_GRAPH = [*TE_GRAPHS, "moe_router"]


@pytest.mark.parametrize("te, argv, expected", [
    ("2.9.0", [*MOE, "--delay-wgrad-compute"], [NEEDS_OVERLAP]),
    ("2.9.0", DELAYED, []),
    ("2.9.0", [*DELAYED, *ROUTER_GRAPH], [delayed_graphs_te("2.9.0")]),
    ("2.10.0", [*DELAYED, *ROUTER_GRAPH], []),
    ("2.9.0", [*DELAYED, "--cuda-graph-impl", "local"], []),
    ("2.9.0", [*MOE, "--delay-wgrad-compute", *ROUTER_GRAPH],
     [NEEDS_OVERLAP, delayed_graphs_te("2.9.0")]),
])
def test_delayed_weight_gradients_belong_to_the_overlap(te, argv, expected):
    assert whole(argv, {"transformer_engine": te}) == expected


DISPATCH = "--overlap-dispatch-backward-with-experts-wgrad"


@pytest.mark.parametrize("te, argv, expected", [
    ("2.3.0", [*MOE, DISPATCH], []),
    ("2.2.0", [*MOE, DISPATCH],
     [pre(f"{DISPATCH} requires transformer_engine >= 2.3.0, found 2.2.0", (DISPATCH,),
          "upgrade Transformer Engine")]),
    ("2.3.0", [*MOE, DISPATCH, OVERLAP, "--delay-wgrad-compute"],
     [pre(f"{DISPATCH} and {OVERLAP} cannot both be on", (DISPATCH, OVERLAP),
          "choose one overlap schedule"),
      pre(f"{DISPATCH} and --delay-wgrad-compute cannot both be on",
          (DISPATCH, "--delay-wgrad-compute"), "choose one")]),
    ("2.3.0", [*MOE, DISPATCH, "--delay-wgrad-compute"],
     [NEEDS_OVERLAP,
      pre(f"{DISPATCH} and --delay-wgrad-compute cannot both be on",
          (DISPATCH, "--delay-wgrad-compute"), "choose one")]),
    ("2.2.0", MOE, []),
])
def test_dispatch_backward_overlap_is_the_other_schedule(te, argv, expected):
    assert whole(argv, {"transformer_engine": te}) == expected


@pytest.mark.parametrize("argv, expected", [
    ([*MOE, "--ep-overlap-early-attn-memory-release"],
     [pre(f"--ep-overlap-early-attn-memory-release needs {OVERLAP}",
          ("--ep-overlap-early-attn-memory-release", OVERLAP), f"add {OVERLAP}")]),
    ([*EP_OVERLAP, "--ep-overlap-early-attn-memory-release"], []),
])
def test_early_attention_release_needs_the_overlap(argv, expected):
    assert whole(argv) == expected


def test_without_the_parallel_plugin_the_overlap_has_one_pipeline_stage():
    # the pipeline size is the parallel plugin's setting: blocked, there is one stage
    assert whole(["-p", "no:parallel", *EP_OVERLAP]) == []
