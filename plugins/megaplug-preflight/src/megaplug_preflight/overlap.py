"""Expert-parallel all-to-all overlap and the weight-gradient schedules that go with it."""

from __future__ import annotations

from megaplug import Draft

from . import model_view as view
from ._report import reject, shown, te_shortfall

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._report import Check

EP_OVERLAP = "overlap_moe_expert_parallel_comm"
#: torch versions below this hang with the overlapped all-to-all.
EP_OVERLAP_MIN_TORCH = "2.6.0"
DELAYED_WGRAD_GRAPH_MIN_TE = "2.10.0"
DISPATCH_WGRAD_OVERLAP_MIN_TE = "2.3.0"


def _overlap(config: Draft) -> bool:
    return bool(config.get(EP_OVERLAP))


def ep_overlap_parallelism(config: Draft) -> None:
    """The overlap splits expert-parallel all-to-alls across interleaved pipeline chunks."""
    if not _overlap(config):
        return
    torch_version = config.env.package_version("torch")
    if torch_version is not None and not config.env.version_at_least("torch",
                                                                      EP_OVERLAP_MIN_TORCH):
        reject(config, f"--overlap-moe-expert-parallel-comm needs torch >= "
                       f"{EP_OVERLAP_MIN_TORCH} (it hangs on older versions), found "
                       f"{torch_version}",
               flags=(EP_OVERLAP,), hint="upgrade torch")
    if (config.get("pipeline_model_parallel_size", 1) > 1
            and config.get("virtual_pipeline_model_parallel_size") is None):
        reject(config, "--overlap-moe-expert-parallel-comm with pipeline parallelism needs "
                       "virtual pipeline stages",
               flags=(EP_OVERLAP, "pipeline_model_parallel_size"),
               hint="add --num-virtual-stages-per-pipeline-rank 2 (or more)")
    if config.get("expert_model_parallel_size", 1) <= 1:
        reject(config, "--overlap-moe-expert-parallel-comm needs expert parallelism "
                       "(--expert-model-parallel-size 2 or more)",
               flags=(EP_OVERLAP, "expert_model_parallel_size"),
               hint="raise --expert-model-parallel-size, or drop the overlap")
    dispatcher = config.get("moe_token_dispatcher_type", "allgather")
    if dispatcher not in ("alltoall", "flex"):
        reject(config, f"--overlap-moe-expert-parallel-comm needs --moe-token-dispatcher-type "
                       f"alltoall or flex, got {dispatcher}",
               flags=(EP_OVERLAP, "moe_token_dispatcher_type"),
               hint="use --moe-token-dispatcher-type alltoall")


def ep_overlap_without_recompute(config: Draft) -> None:
    """The overlapped schedule cannot recompute whole layers or MoE blocks."""
    if not _overlap(config):
        return
    if view.recompute_granularity_final(config) == "full":
        reject(config, "--overlap-moe-expert-parallel-comm does not work with full "
                       "recomputation",
               flags=(EP_OVERLAP, "recompute_granularity"),
               hint="use selective recomputation, or drop the overlap")
    for dest in ("recompute_method", "recompute_num_layers"):
        if config.get(dest) is not None:
            reject(config, f"--overlap-moe-expert-parallel-comm does not work with "
                           f"{shown(config, dest)}",
                   flags=(EP_OVERLAP, dest), hint=f"drop {config.spelling(dest)}")
    if "moe" in view.recompute_modules_final(config):
        reject(config, "--overlap-moe-expert-parallel-comm does not work with recomputing MoE "
                       "layers (moe in --recompute-modules, or --moe-layer-recompute)",
               flags=(EP_OVERLAP, "recompute_modules"),
               hint="remove moe from the recomputed modules")


def ep_overlap_model_settings(config: Draft) -> None:
    """The overlap runs in bf16/fp16, without shared-expert overlap, with at most one MTP layer."""
    if not _overlap(config):
        return
    if not config.get("bf16") and not config.get("fp16"):
        reject(config, "--overlap-moe-expert-parallel-comm needs --bf16 or --fp16",
               flags=(EP_OVERLAP, "bf16"), hint="add --bf16")
    if config.get("moe_shared_expert_overlap"):
        reject(config, "--overlap-moe-expert-parallel-comm and --moe-shared-expert-overlap "
                       "cannot both be on",
               flags=(EP_OVERLAP, "moe_shared_expert_overlap"),
               hint="drop --moe-shared-expert-overlap")
    if config.get("mtp_num_layers") not in (None, 0, 1):
        reject(config, f"--overlap-moe-expert-parallel-comm supports at most one MTP layer, got "
                       f"{shown(config, 'mtp_num_layers')}",
               flags=(EP_OVERLAP, "mtp_num_layers"), hint="use --mtp-num-layers 1")


def ep_overlap_with_ncclep_and_graphs(config: Draft) -> None:
    """NCCL-EP frees expert FC1's input early; TE graphs cannot capture the split MoE/MLP."""
    if not _overlap(config):
        return
    if (config.get("moe_token_dispatcher_type") == "flex" and view.flex_backend(config) == "ncclep"
            and config.get("fine_grained_activation_offloading")
            and "expert_fc1" in view.offload_modules(config)):
        reject(config, "--overlap-moe-expert-parallel-comm with the ncclep backend cannot "
                       "offload expert_fc1",
               flags=(EP_OVERLAP, "offload_modules"),
               hint="remove expert_fc1 from --offload-modules")
    graphed = [m for m in ("moe", "mlp") if m in view.cuda_graph_modules(config)]
    if config.get("cuda_graph_impl", "none") == "transformer_engine" and graphed:
        reject(config, f"--overlap-moe-expert-parallel-comm does not work with "
                       f"--cuda-graph-modules {' '.join(graphed)} under --cuda-graph-impl "
                       "transformer_engine",
               flags=(EP_OVERLAP, "cuda_graph_modules"),
               hint="graph attn / moe_router instead")


def delayed_wgrad_needs_ep_overlap(config: Draft) -> None:
    """Delaying weight gradients is part of the overlapped expert-parallel schedule."""
    if not config.get("delay_wgrad_compute"):
        return
    if not _overlap(config):
        reject(config, "--delay-wgrad-compute needs --overlap-moe-expert-parallel-comm",
               flags=("delay_wgrad_compute", EP_OVERLAP),
               hint="add --overlap-moe-expert-parallel-comm")
    if config.get("cuda_graph_impl", "none") != "transformer_engine":
        return
    problem = te_shortfall(config, DELAYED_WGRAD_GRAPH_MIN_TE)
    if problem:
        reject(config, f"--delay-wgrad-compute with --cuda-graph-impl transformer_engine "
                       f"{problem}",
               flags=("delay_wgrad_compute", "cuda_graph_impl"),
               hint="upgrade Transformer Engine")


def dispatch_wgrad_overlap(config: Draft) -> None:
    """Overlapping the dispatch backward with expert wgrad is the other schedule."""
    if not config.get("overlap_dispatch_backward_with_experts_wgrad"):
        return
    flag = "overlap_dispatch_backward_with_experts_wgrad"
    if _overlap(config):
        reject(config, "--overlap-dispatch-backward-with-experts-wgrad and "
                       "--overlap-moe-expert-parallel-comm cannot both be on",
               flags=(flag, EP_OVERLAP), hint="choose one overlap schedule")
    problem = te_shortfall(config, DISPATCH_WGRAD_OVERLAP_MIN_TE)
    if problem:
        reject(config, f"--overlap-dispatch-backward-with-experts-wgrad {problem}",
               flags=(flag,), hint="upgrade Transformer Engine")
    if config.get("delay_wgrad_compute"):
        reject(config, "--overlap-dispatch-backward-with-experts-wgrad and "
                       "--delay-wgrad-compute cannot both be on",
               flags=(flag, "delay_wgrad_compute"), hint="choose one")


def early_attention_release_needs_ep_overlap(config: Draft) -> None:
    if config.get("ep_overlap_early_attn_memory_release") and not _overlap(config):
        reject(config, "--ep-overlap-early-attn-memory-release needs "
                       "--overlap-moe-expert-parallel-comm",
               flags=("ep_overlap_early_attn_memory_release", EP_OVERLAP),
               hint="add --overlap-moe-expert-parallel-comm")


CHECKS: tuple[Check, ...] = (
    ep_overlap_parallelism,
    ep_overlap_without_recompute,
    ep_overlap_model_settings,
    ep_overlap_with_ncclep_and_graphs,
    delayed_wgrad_needs_ep_overlap,
    dispatch_wgrad_overlap,
    early_attention_release_needs_ep_overlap,
)
