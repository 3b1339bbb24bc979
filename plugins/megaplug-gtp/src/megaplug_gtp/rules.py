"""GTP normalizations, derivations and checks, each a small function.

The remat sizes are resolved in ``normalize`` so that every plugin's ``derive`` (the
``parallel`` plugin's data-parallel size above all) sees them, whatever the order.
"""

from __future__ import annotations

from typing import Callable

from megaplug import Draft

from .layout import (
    LayoutError,
    resolve_tensor_parallel_sequence_shards,
    resolve_tensor_parallel_weight_shards,
)

#: Set by a caller restoring a layout whose sequence is split over GTP ranks; no flag.
SEQUENCE_SHARDS = "tensor_parallel_num_sequence_shards"


def remat_active(config: Draft) -> bool:
    """Whether some weight is rematerialized: most GTP checks apply only then."""
    return config.gtp_weight_remat_size > 1 or config.expert_gtp_weight_remat_size > 1


def _tensor_parallel_size(config: Draft) -> int:
    return config.get("tensor_model_parallel_size", 1) or 1


def _expert_tensor_parallel_size(config: Draft) -> int:
    # the moe plugin defaults it to the dense size later; the value is the same. Only an
    # unset size falls back: Megatron keeps an explicit 0 and derives 0 shards from it.
    etp = config.get("expert_tensor_parallel_size")
    return _tensor_parallel_size(config) if etp is None else etp


# -- normalize ---------------------------------------------------------------------------


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


def _remat_sequence_shards(config: Draft) -> int:
    """How many ways the GTP remat group splits the sequence (1: it does not)."""
    _, remat_shards = resolve_tensor_parallel_sequence_shards(
        _tensor_parallel_size(config), config.get(SEQUENCE_SHARDS),
        config.gtp_weight_remat_size, bool(config.get("sequence_parallel")))
    return remat_shards


def fold_sequence_shards_into_context_parallel(config: Draft) -> None:
    """GTP ranks that split the sequence act as context-parallel ranks: grow CP by them."""
    try:
        remat_shards = _remat_sequence_shards(config)
    except LayoutError as exc:
        config.error(f"GTP sequence shards: {exc}", flags=(SEQUENCE_SHARDS,), hint=exc.hint)
        return
    if remat_shards > 1 and "context_parallel_size" in config:
        config.set("context_parallel_size", config.context_parallel_size * remat_shards,
                   reason=f"includes {remat_shards} GTP sequence shards",
                   inputs=("context_parallel_size", SEQUENCE_SHARDS))


def sequence_sharding_constraints(config: Draft) -> None:
    """Splitting the sequence over GTP ranks needs torch_dist checkpoints and plain DDP."""
    try:
        if _remat_sequence_shards(config) <= 1:
            return
    except LayoutError:
        return  # already reported in normalize
    if config.get("ckpt_format") != "torch_dist":
        config.error("GTP sequence sharding needs --ckpt-format torch_dist",
                     flags=("ckpt_format",), hint="use --ckpt-format torch_dist")
    fsdp = "use_torch_fsdp2" if config.get("use_torch_fsdp2") else (
        "use_megatron_fsdp" if config.get("use_megatron_fsdp") else None)
    if fsdp:
        config.error(f"GTP sequence sharding runs on Megatron DDP, not {config.spelling(fsdp)}",
                     flags=(fsdp,), hint=f"drop {config.spelling(fsdp)}")
    if config.get("use_tp_pp_dp_mapping"):
        config.error("GTP sequence sharding does not support --use-tp-pp-dp-mapping",
                     flags=("use_tp_pp_dp_mapping",), hint="drop --use-tp-pp-dp-mapping")


NORMALIZATIONS: tuple[Callable[[Draft], None], ...] = (
    resolve_dense_weight_shards,
    fold_sequence_shards_into_context_parallel,
    resolve_expert_weight_shards,
)


# -- derive ------------------------------------------------------------------------------


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


# Turning off --gtp-remat-reduce-scatter-with-fp32-accumulation when gradients are already
# reduced in fp32 is the precision plugin's job: it owns that decision for every such flag.
DERIVATIONS: tuple[Callable[[Draft], None], ...] = (prioritize_gtp_streams_on_blackwell,)


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
