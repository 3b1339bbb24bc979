"""CUDA graphs: which modules can be captured, and with which recomputation and offloading."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection

    from ._report import Check

IMPL = "cuda_graph_impl"
MODULES = "cuda_graph_modules"
#: Offloaded activations the local implementation can keep outside its partial graphs.
LOCAL_GRAPH_OFFLOADS = frozenset({"expert_fc1", "moe_act", "fused_group_mlp"})


def _impl(config: Draft) -> str:
    return config.get(IMPL, "none") or "none"


def _per_layer(config: Draft) -> bool:
    return _impl(config) in ("local", "transformer_engine")


def cuda_graphs_not_with_cpu_offloading(config: Draft) -> None:
    impl = _impl(config)
    if impl not in ("none", "full_iteration") and view.cpu_offloading(config):
        reject(config, f"--cuda-graph-impl {impl} does not work with --cpu-offloading-num-layers",
               flags=(IMPL, "cpu_offloading_num_layers"),
               hint="use --cuda-graph-impl full_iteration, or drop CPU offloading")


def moe_graph_modules(config: Draft) -> None:
    """The MoE graph scopes must match the model: router or whole MoE, MoE only in MoE
    models, MLP only where dense layers exist, whole MoE only with drop-and-pad routing."""
    if not _per_layer(config):
        return
    modules = view.cuda_graph_modules(config)
    problems = []
    if "moe" in modules and "moe_router" in modules:
        problems.append("cannot capture both moe and moe_router")
    if "moe_preprocess" in modules and "moe_router" not in modules:
        problems.append("can capture moe_preprocess only together with moe_router")
    experts = view.experts(config)
    if experts is None or experts <= 1:
        if "moe" in modules or "moe_router" in modules:
            problems.append("captures MoE modules, but the model has no experts")
    else:
        freq = config.get("moe_layer_freq", 1)
        if (freq == 1 or (isinstance(freq, list) and 0 not in freq)) and "mlp" in modules:
            problems.append("captures mlp, but every layer is an MoE layer")
        padded = view.capacity_factor(config) is not None and config.get(
            "moe_pad_expert_input_to_capacity")
        if not padded:
            if "moe" in modules:
                problems.append("captures moe, which needs --moe-expert-capacity-factor with "
                                "--moe-pad-expert-input-to-capacity")
            if (config.get("moe_token_dispatcher_type") == "alltoall"
                    and (view.capacity_factor(config) is not None
                         or config.get("moe_router_padding_for_fp8"))
                    and "moe_preprocess" in modules):
                problems.append("captures moe_preprocess, whose all-to-all preprocessing "
                                "synchronizes with the host here")
    for problem in problems:
        reject(config, f"--cuda-graph-modules {' '.join(modules)} {problem}",
               flags=(MODULES, IMPL), hint="choose graph modules that exist in this model")


def graphs_and_recompute(config: Draft) -> None:
    """Recomputed modules must not straddle graph boundaries, nor replay random numbers."""
    impl = _impl(config)
    granularity = view.recompute_granularity_final(config)
    if impl == "none" or not granularity:
        return
    if granularity != "selective":
        if impl != "full_iteration":
            reject(config, f"full recomputation under CUDA graphs needs --cuda-graph-impl "
                           f"full_iteration, got {impl}",
                   flags=(IMPL, "recompute_granularity"),
                   hint="use selective recomputation, or --cuda-graph-impl full_iteration")
        return
    modules, recomputed = view.cuda_graph_modules(config), view.recompute_modules_final(config)
    whole = view.whole_layer_cuda_graph(config)
    if impl == "transformer_engine" and "moe" in recomputed and "moe_router" in modules:
        reject(config, "recomputing moe does not work with a moe_router CUDA graph under "
                       "--cuda-graph-impl transformer_engine",
               flags=(MODULES, "recompute_modules"), hint="drop one of the two")
    _replayed_randomness(config, lambda module: whole or module in modules, recomputed)
    if (config.get("gtp_weight_remat_size", 1) > 1 and impl == "local"
            and (view.fp8_on(config) or view.fp4_on(config))
            and config.get("moe_shared_expert_intermediate_size") is not None
            and not config.get("moe_shared_expert_overlap")
            and (whole or "moe" in modules or "moe_router" in modules)
            and "shared_experts" in recomputed):
        reject(config, "GTP with local CUDA graphs capturing shared experts cannot recompute "
                       "them in FP8/FP4",
               flags=("recompute_modules", IMPL),
               hint="drop shared_experts from --recompute-modules, or use --cuda-graph-impl "
                    "full_iteration")


def _replayed_randomness(config: Draft, graphed: Callable[[str], bool],
                         recomputed: Collection[str]) -> None:
    """Graphed, recomputed modules replay their random numbers: no dropout or jitter in them."""
    if (config.get("attention_dropout") or 0.0) != 0.0 and graphed("attn") \
            and "core_attn" in recomputed:
        reject(config, "attention dropout cannot be replayed by a graphed, recomputed core "
                       "attention",
               flags=("attention_dropout", "recompute_modules", MODULES),
               hint="use --attention-dropout 0, or stop recomputing core_attn")
    if (config.get("hidden_dropout") or 0.0) != 0.0 and (
            (graphed("mlp") and "mlp" in recomputed) or (graphed("moe") and "moe" in recomputed)):
        reject(config, "hidden dropout cannot be replayed by a graphed, recomputed MLP / MoE",
               flags=("hidden_dropout", "recompute_modules", MODULES),
               hint="use --hidden-dropout 0, or stop recomputing mlp / moe")
    if config.get("moe_input_jitter_eps") is not None and graphed("moe") and "moe" in recomputed:
        reject(config, "--moe-input-jitter-eps cannot be replayed by a graphed, recomputed MoE",
               flags=("moe_input_jitter_eps", "recompute_modules", MODULES),
               hint="drop --moe-input-jitter-eps, or stop recomputing moe")


def graphs_and_fine_grained_offloading(config: Draft) -> None:
    """Offloading under CUDA graphs: TE or full-iteration graphs, or local graphs of
    partial MoE offloads; never the token-drop MoE graph; with warm-up steps."""
    impl = _impl(config)
    if impl == "none" or not config.get("fine_grained_activation_offloading"):
        return
    offloads, modules = set(view.offload_modules(config)), view.cuda_graph_modules(config)
    flags = (IMPL, "fine_grained_activation_offloading", "offload_modules")
    if impl == "local":
        unsupported = sorted(offloads - LOCAL_GRAPH_OFFLOADS)
        if unsupported:
            reject(config, f"--cuda-graph-impl local cannot offload {', '.join(unsupported)}",
                   flags=flags, hint="offload only expert_fc1, moe_act or fused_group_mlp, or "
                                     "use --cuda-graph-impl transformer_engine")
        if not modules:
            reject(config, "fine-grained activation offloading does not work with local "
                           "whole-layer CUDA graphs",
                   flags=(*flags, MODULES), hint="name --cuda-graph-modules")
    if "moe" in modules:
        reject(config, "fine-grained activation offloading does not work with the moe CUDA "
                       "graph module", flags=(*flags, MODULES), hint="drop moe from the modules")
    if (config.get("cuda_graph_warmup_steps", 3) or 0) <= 0:
        reject(config, "fine-grained activation offloading under CUDA graphs needs "
                       "--cuda-graph-warmup-steps 1 or more",
               flags=(*flags, "cuda_graph_warmup_steps"), hint="use at least 1 warm-up step")
    inflight = config.get("fine_grained_offloading_max_inflight_offloads")
    if impl == "full_iteration" and (inflight is None or inflight < 0):
        reject(config, "fine-grained activation offloading with full-iteration CUDA graphs needs "
                       "a non-negative --fine-grained-offloading-max-inflight-offloads",
               flags=(*flags, "fine_grained_offloading_max_inflight_offloads"),
               hint="set --fine-grained-offloading-max-inflight-offloads")


CHECKS: tuple[Check, ...] = (
    cuda_graphs_not_with_cpu_offloading,
    moe_graph_modules,
    graphs_and_recompute,
    graphs_and_fine_grained_offloading,
)
