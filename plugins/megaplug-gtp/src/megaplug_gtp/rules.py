"""GTP derivations and checks, each a small function.

GTP's shard arithmetic lives here and only here: the weight shards resolve to a remat size,
and the remat ranks of one replica leave the data-parallel size the ``parallel`` plugin
derived as the world over one model-parallel group. The plugin runs after ``parallel``
(and ``precision``, whose fp32 gradient reduction makes GTP's fp32 accumulation moot).
"""

from __future__ import annotations


from megaplug import Draft

from . import remat_active
from .layout import LayoutError, resolve_tensor_parallel_weight_shards

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Callable


def _tensor_parallel_size(config: Draft) -> int:
    return config.get("tensor_model_parallel_size", 1) or 1


def _expert_tensor_parallel_size(config: Draft) -> int:
    # Only an unset size falls back to the dense one (as the moe plugin derives it): Megatron
    # keeps an explicit 0 and derives 0 shards from it.
    etp = config.get("expert_tensor_parallel_size")
    return _tensor_parallel_size(config) if etp is None else etp


# -- derive ------------------------------------------------------------------------------


def resolve_dense_weight_shards(config: Draft) -> None:
    """Weight shards default to the tensor-parallel size; the remat size is the rest."""
    tp = _tensor_parallel_size(config)
    try:
        shards, remat = resolve_tensor_parallel_weight_shards(
            tp, config.tensor_parallel_num_weight_shards, config.gtp_weight_remat_size or 1)
    except LayoutError as exc:
        config.error(f"--tensor-parallel-num-weight-shards: {exc}",
                     flags=("tensor_parallel_num_weight_shards", "tensor_model_parallel_size"),
                     hint=exc.hint)
        return
    _set_layout(config, "tensor_parallel_num_weight_shards", shards,
                "gtp_weight_remat_size", remat, ("tensor_model_parallel_size",))


def resolve_expert_weight_shards(config: Draft) -> None:
    """The same resolution for expert weights, against the expert tensor-parallel size."""
    etp = _expert_tensor_parallel_size(config)
    try:
        shards, remat = resolve_tensor_parallel_weight_shards(
            etp, config.expert_tensor_parallel_num_weight_shards,
            config.expert_gtp_weight_remat_size or 1)
    except LayoutError as exc:
        config.error(f"--expert-tensor-parallel-num-weight-shards: {exc} (expert "
                     f"tensor-parallel size)",
                     flags=("expert_tensor_parallel_num_weight_shards",
                            "expert_tensor_parallel_size"),
                     hint=exc.hint)
        return
    _set_layout(config, "expert_tensor_parallel_num_weight_shards", shards,
                "expert_gtp_weight_remat_size", remat,
                ("expert_tensor_parallel_size", "tensor_model_parallel_size"))


def _set_layout(config: Draft, shards_dest: str, shards: int, remat_dest: str, remat: int,
                inputs: tuple[str, ...]) -> None:
    if config[shards_dest] != shards:
        config.set(shards_dest, shards, reason="defaults to the tensor-parallel size times "
                   "the remat size", inputs=inputs)
    if config[remat_dest] != remat:
        config.set(remat_dest, remat, reason="weight shards / tensor-parallel size",
                   inputs=(shards_dest, *inputs))


#: The model-parallel sizes whose product is one model-parallel group.
_GROUP_SIZES = ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                "context_parallel_size")


def remat_ranks_leave_data_parallelism(config: Draft) -> None:
    """The remat ranks of one replica share its weights: a model replica spans TP x PP x CP
    x remat ranks, so the data-parallel size is divided by the remat size."""
    remat, data_parallel = config.gtp_weight_remat_size, config.get("data_parallel_size")
    if remat <= 1 or data_parallel is None:
        return  # no remat, or a layout the parallel plugin reports
    group = 1
    for name in _GROUP_SIZES:
        group *= config.get(name, 1)
    world = config.world_size
    if world % group:
        return  # not even whole model-parallel groups: the parallel plugin reports it
    if data_parallel % remat:
        parts = " x ".join(f"{label} {config.get(name, 1)}" for label, name in
                           zip(("TP", "PP", "CP"), _GROUP_SIZES))
        config.error(f"world size {world} is not divisible by the model-parallel size "
                     f"{group * remat} ({parts} x GTP weight shards {remat})",
                     flags=("WORLD_SIZE", *_GROUP_SIZES, "tensor_parallel_num_weight_shards"),
                     hint=f"launch a multiple of {group * remat} processes, or use a remat size "
                          f"that divides the {data_parallel} data-parallel ranks")
        return
    config.set("data_parallel_size", data_parallel // remat,
               reason="the GTP remat ranks of a replica share its weights",
               inputs=("data_parallel_size", "gtp_weight_remat_size"))


def plain_fp32_reduce_scatter(config: Draft) -> None:
    """With fp32 gradient reduction, GTP's fp32-accumulating reduce-scatter buys nothing."""
    name = "gtp_remat_reduce_scatter_with_fp32_accumulation"
    if config.get("accumulate_allreduce_grads_in_fp32") and config[name]:
        config.warn(f"turning off {config.spelling(name)}: "
                    "--accumulate-allreduce-grads-in-fp32 already reduces in fp32",
                    flags=(name, "accumulate_allreduce_grads_in_fp32"))
        config.set(name, False, inputs=("accumulate_allreduce_grads_in_fp32",))


def prioritize_gtp_streams_on_blackwell(config: Draft) -> None:
    """On Blackwell and newer, GTP communication streams get high priority."""
    if not remat_active(config) or "high_priority_stream_groups" not in config:
        return
    capability = config.env.capability()
    if capability is None or capability[0] < 10:
        return
    groups = list(config.high_priority_stream_groups or [])
    wanted = ["gtp_remat"] + (["expt_gtp_remat"] if config.expert_gtp_weight_remat_size > 1 else [])
    added = [g for g in wanted if g not in groups]
    if added:
        config.set("high_priority_stream_groups", groups + added,
                   reason="GTP communication gets high-priority streams on Blackwell",
                   inputs=("gtp_weight_remat_size", "expert_gtp_weight_remat_size"))
        config.warn(f"adding {', '.join(repr(g) for g in added)} to the high-priority stream "
                    "groups", flags=("high_priority_stream_groups",))


DERIVATIONS: tuple[Callable[[Draft], None], ...] = (
    resolve_dense_weight_shards,
    resolve_expert_weight_shards,
    remat_ranks_leave_data_parallelism,
    plain_fp32_reduce_scatter,
    prioritize_gtp_streams_on_blackwell,
)
# -- validate (only when a remat size is above 1) ----------------------------------------

_GTP = "GTP (--tensor-parallel-num-weight-shards / --expert-tensor-parallel-num-weight-shards)"


def fp4_needs_fp4_param_gather(config: Draft) -> None:
    """GTP all-gathers NVFP4 weights natively, so FP4 needs FP4 parameter gathering."""
    if config.get("fp4") and not config.get("fp4_param_gather"):
        config.error(f"{_GTP} with --fp4-format needs --fp4-param-gather",
                     flags=("fp4", "fp4_param_gather"),
                     hint="add --fp4-param-gather")


def cuda_graphs_need_node_priority(config: Draft) -> None:
    """On Blackwell, graphed GTP communication overlaps only with node priorities on."""
    capability = config.env.capability()
    if capability is None or capability[0] < 10:
        return
    impl = config.get("cuda_graph_impl", "none")
    if impl != "none" and config.env.getenv("CUDA_GRAPHS_USE_NODE_PRIORITY") != "1":
        config.error(f"{_GTP} with --cuda-graph-impl {impl} on Blackwell or newer needs "
                     "CUDA_GRAPHS_USE_NODE_PRIORITY=1",
                     flags=("cuda_graph_impl",),
                     hint="export CUDA_GRAPHS_USE_NODE_PRIORITY=1")


def nccl_proto_simple_is_slow(config: Draft) -> None:
    """GTP's small collectives prefer the LL / LL128 NCCL protocols."""
    if (config.env.getenv("NCCL_PROTO") or "").lower() == "simple":
        config.warn("GTP usually runs faster with NCCL_PROTO=LL128 or LL than with "
                    "NCCL_PROTO=Simple")


def not_with_average_in_collective(config: Draft) -> None:
    """Averaging collectives would need a per-buffer remat scaling GTP does not apply."""
    if config.get("ddp_average_in_collective"):
        config.error(f"{_GTP} does not work with --ddp-average-in-collective",
                     flags=("ddp_average_in_collective",),
                     hint="drop --ddp-average-in-collective")


def checkpoint_format_supported(config: Draft) -> None:
    """GTP can save only torch and torch_dist checkpoints."""
    fmt = config.get("ckpt_format", "torch_dist")
    if fmt not in ("torch", "torch_dist"):
        config.error(f"{_GTP} supports --ckpt-format torch or torch_dist, not {fmt!r}",
                     flags=("ckpt_format",), hint="use --ckpt-format torch_dist")


def not_fully_reshardable_mem_efficient(config: Draft) -> None:
    """The fully-reshardable, memory-efficient optimizer checkpoint mode is unsupported."""
    if (config.get("dist_ckpt_optim_fully_reshardable")
            and config.get("distrib_optim_fully_reshardable_mem_efficient")):
        config.error(f"{_GTP} does not support --dist-ckpt-optim-fully-reshardable together "
                     "with --distrib-optim-fully-reshardable-mem-efficient",
                     flags=("dist_ckpt_optim_fully_reshardable",
                            "distrib_optim_fully_reshardable_mem_efficient"),
                     hint="drop --distrib-optim-fully-reshardable-mem-efficient")


def mxfp8_needs_fp8_param_buffers(config: Draft) -> None:
    """GTP keeps no bf16 weight: MXFP8 weights must be gathered and updated as FP8."""
    if config.get("fp8_recipe") != "mxfp8":
        return
    if not config.get("fp8_param_gather"):
        config.error(f"{_GTP} with --fp8-recipe mxfp8 needs --fp8-param-gather",
                     flags=("fp8_recipe", "fp8_param_gather"), hint="add --fp8-param-gather")
    elif not config.get("reuse_grad_buf_for_mxfp8_param_ag"):
        config.error(f"{_GTP} with --fp8-recipe mxfp8 and --fp8-param-gather needs "
                     "--reuse-grad-buf-for-mxfp8-param-ag",
                     flags=("fp8_param_gather", "reuse_grad_buf_for_mxfp8_param_ag"),
                     hint="add --reuse-grad-buf-for-mxfp8-param-ag")


def symmetric_registration_for_nccl_ub(config: Draft) -> None:
    """GTP's NCCL user buffers are symmetric windows."""
    used = [d for d in ("gtp_remat_nccl_ub", "gtp_expert_remat_nccl_ub") if config[d]]
    if not used:
        return
    spelled = " / ".join(config.spelling(d) for d in used)
    if config.get("disable_symmetric_registration"):
        config.error(f"{spelled} needs symmetric registration, but "
                     "--disable-symmetric-registration is set",
                     flags=(*used, "disable_symmetric_registration"),
                     hint=f"drop --disable-symmetric-registration or {spelled}")
    if config.gtp_remat_reduce_scatter_with_fp32_accumulation:
        config.warn(f"{spelled} takes precedence over "
                    "--gtp-remat-reduce-scatter-with-fp32-accumulation on its groups (NVLS "
                    "reduce-scatters already accumulate in fp32)",
                    flags=(*used, "gtp_remat_reduce_scatter_with_fp32_accumulation"))


REMAT_CHECKS: tuple[Callable[[Draft], None], ...] = (
    fp4_needs_fp4_param_gather,
    cuda_graphs_need_node_priority,
    nccl_proto_simple_is_slow,
    not_with_average_in_collective,
    checkpoint_format_supported,
    not_fully_reshardable_mem_efficient,
    mxfp8_needs_fp8_param_buffers,
    symmetric_registration_for_nccl_ub,
)
